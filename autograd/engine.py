"""The engine: a Tensor remembers the Function that made it; backward() walks that graph in
reverse topological order and applies each Function's vector-Jacobian product (VJP).

Reverse mode in one paragraph: for a scalar loss L and an op y = f(x), the chain rule gives
∂L/∂x = (∂y/∂x)ᵀ ∂L/∂y. Each primitive knows how to compute that product without ever forming
the Jacobian ∂y/∂x; backward() starts from ∂L/∂L = 1 and pushes gradients from every node to
its inputs, adding up the contributions of a node that feeds several others.

This file is the plain form: by default `Function.apply` and `Tensor.backward` hand the same
work to autograd/engine_room/reverse_mode.py (gradients added in place, checked VJPs, profiling).
"""
from contextlib import contextmanager

import numpy as np

from autograd.checks import checked_op_inputs, constant_array
from autograd.plain_mode import is_plain

_grad_enabled = True


@contextmanager
def no_grad():
    """Inside this context (or a function it decorates) ops build no graph: use it for
    evaluation, decoding and optimizer updates."""
    global _grad_enabled
    previous, _grad_enabled = _grad_enabled, False
    try:
        yield
    finally:
        _grad_enabled = previous


def is_grad_enabled():
    return _grad_enabled


class Function:
    """A primitive op. `forward` maps input arrays to an output array; `backward` maps the
    output's gradient g to one gradient per input (None where none is needed).

    Every subclass registers itself in `Function.registry`, so the tests can prove that each
    primitive has a gradient check. Non-tensor arguments (axis, shape, index) are keywords.
    """

    registry = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        Function.registry[cls.__name__] = cls

    @classmethod
    def apply(cls, *inputs, **params):
        """The op's output, a Tensor; when an input needs a gradient, the output remembers the op
        (`creator`) and the op its inputs: the edges backward() walks."""
        arrays = checked_op_inputs(cls.__name__, inputs, Tensor)     # no silent float64 upcasts
        fn = cls()
        # under no_grad() no input needs a gradient: the forward can skip what only backward reads
        fn.needs_input_grad = tuple([isinstance(x, Tensor) and x.requires_grad for x in inputs]) if _grad_enabled \
            else (False,) * len(inputs)
        fn.saved = ()
        out = Tensor(fn.forward(*arrays, **params)) if is_plain() else reverse_mode.forward(fn, arrays, params)
        if True in fn.needs_input_grad:
            out.requires_grad, out.creator = True, fn
            fn.inputs = tuple([x if isinstance(x, Tensor) else _CONSTANT for x in inputs])
        return out

    def save_for_backward(self, *arrays):
        self.saved = arrays

    def forward(self, *arrays, **params):
        raise NotImplementedError

    def backward(self, grad):
        raise NotImplementedError


def as_tensor(value, dtype=None):
    """Wrap a constant (a number or an array) as a Tensor. With a floating `dtype` (the other
    operand's) a floating or integer constant takes it, so `x * 2` or `x * np.ones(3)` keeps a
    float32 x in float32."""
    return value if isinstance(value, Tensor) else Tensor(constant_array(value, dtype))


from autograd import ops  # noqa: E402  (the ops are Functions: they need the class above)


class Tensor:
    """An n-dimensional array (`.data`) with a gradient (`.grad`) for leaves that require one.

    `.creator` is the Function that produced this tensor (None for leaves and constants).
    """

    # The operators and methods: each applies one primitive op (autograd/ops/), so that
    # a * b is ops.mul(a, b), which is Mul.apply(a, b).
    __add__, __radd__ = ops.add, lambda self, other: ops.add(other, self)
    __sub__, __rsub__ = ops.sub, lambda self, other: ops.sub(other, self)
    __mul__, __rmul__ = ops.mul, lambda self, other: ops.mul(other, self)
    __truediv__, __rtruediv__ = ops.div, lambda self, other: ops.div(other, self)
    __matmul__, __rmatmul__ = ops.matmul, lambda self, other: ops.matmul(other, self)
    __pow__, __rpow__ = ops.power, lambda self, other: ops.power(other, self)
    __neg__, __getitem__ = ops.neg, ops.getitem
    exp, log, sqrt, tanh = ops.exp, ops.log, ops.sqrt, ops.tanh
    sum, mean, max = ops.sum, ops.mean, ops.max
    reshape, transpose, swapaxes, T = ops.reshape, ops.transpose, ops.swapaxes, property(ops.transpose)
    __array_priority__ = 100  # ndarray + Tensor calls Tensor.__radd__, not NumPy's add

    def __init__(self, data, requires_grad=False, dtype=None):
        self.data = np.asarray(data.data if isinstance(data, Tensor) else data, dtype=dtype)
        if requires_grad and not np.issubdtype(self.data.dtype, np.floating):
            raise TypeError(f"only floating-point tensors can require grad, got {self.data.dtype}")
        self.requires_grad, self.grad, self.creator = requires_grad, None, None

    shape = property(lambda self: self.data.shape)
    ndim = property(lambda self: self.data.ndim)
    size = property(lambda self: self.data.size)
    dtype = property(lambda self: self.data.dtype)

    def __repr__(self):
        grad = ", requires_grad=True" if self.requires_grad else ""
        return f"Tensor({self.data!r}{grad})"

    def __len__(self):
        return len(self.data)

    def numpy(self):
        return self.data

    def item(self):
        return self.data.item()

    def detach(self):
        """The same values, cut from the graph (shares memory with `.data`)."""
        return Tensor(self.data)

    def backward(self, grad=None, retain_graph=False):
        """Accumulate ∂self/∂leaf into `leaf.grad` for every leaf that requires grad.

        `grad` is the upstream gradient (default 1 for a one-element tensor). The arrays the
        graph saved are freed afterwards unless `retain_graph=True`.
        """
        grads, order = {id(self): self.upstream_gradient(grad)}, reversed(topological_order(self))
        if not is_plain():
            return reverse_mode.backward(order, grads, retain_graph)
        for node in order:                                  # every node after all the nodes it feeds
            g = grads.pop(id(node))                         # ∂L/∂node, complete
            if node.creator is None:                        # a leaf keeps its gradient
                node.grad = g.copy() if node.grad is None else node.grad + g
                continue
            fn = node.creator
            for tensor, input_grad in zip(fn.inputs, fn.backward(g)):      # the VJP, one per input
                if tensor.requires_grad:                    # added into that input's gradient
                    grads[id(tensor)] = grads[id(tensor)] + input_grad if id(tensor) in grads else input_grad
            if not retain_graph:
                fn.saved, fn.inputs = None, ()              # release the arrays and the intermediate tensors

    def upstream_gradient(self, grad):
        """∂L/∂self to start backward() from: `grad`, or 1 for a one-element tensor."""
        if not self.requires_grad:
            raise RuntimeError("backward() on a tensor that does not require grad "
                               "(no input had requires_grad=True, or it was built under no_grad())")
        if grad is None and self.size != 1:
            raise ValueError(f"backward() needs `grad` for a non-scalar output of shape {self.shape}")
        grad = np.ones_like(self.data) if grad is None else \
            np.asarray(grad.data if isinstance(grad, Tensor) else grad, dtype=self.dtype)
        if grad.shape != self.shape:
            raise ValueError(f"backward(): grad has shape {grad.shape}, the tensor has {self.shape}")
        return grad


_CONSTANT = Tensor(np.zeros(()))  # a node's input that was a constant: it needs no gradient


def topological_order(root):
    """The nodes that need a gradient, each after all of its inputs. Iterative (an explicit
    stack), so a graph of any depth is fine. A node's leaf inputs (weights) are pushed before
    the others, so they are reached last: in reverse order each leaf then comes right after the
    last node that uses it, where its gradient is complete (the other nodes keep their order)."""
    order, visited, stack = [], set(), [(root, False)]
    while stack:
        node, inputs_done = stack.pop()
        if inputs_done:
            order.append(node)
        elif id(node) not in visited:
            visited.add(id(node))
            stack.append((node, True))
            if node.creator is not None:
                inputs = [t for t in node.creator.inputs if t.requires_grad and id(t) not in visited]
                stack.extend((t, False) for t in sorted(inputs, key=lambda t: t.creator is not None))
    return order


from autograd.engine_room import reverse_mode  # noqa: E402  (the engine room's form of the above needs Tensor)
