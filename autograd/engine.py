"""The engine: a Tensor remembers the Function that made it; backward() walks that graph in
reverse topological order and applies each Function's vector-Jacobian product (VJP).

Reverse mode in one paragraph: for a scalar loss L and an op y = f(x), the chain rule gives
∂L/∂x = (∂y/∂x)ᵀ ∂L/∂y. Each primitive knows how to compute that product without ever forming
the Jacobian ∂y/∂x; backward() starts from ∂L/∂L = 1 and pushes gradients from every node to
its inputs, adding up the contributions of a node that feeds several others.
"""
from contextlib import contextmanager

import numpy as np

_grad_enabled = True
_profiler = None  # an autograd.profiler.Profile while `autograd.profile()` runs


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
        arrays = _input_arrays(cls, inputs)
        fn = cls()
        # under no_grad() no input needs a gradient: the forward can skip what only backward reads
        fn.needs_input_grad = tuple([isinstance(x, Tensor) and x.requires_grad for x in inputs]) if _grad_enabled \
            else (False,) * len(inputs)
        fn.saved = ()
        if _profiler is None:  # the profiler's only cost when it is off: this test
            out = _result(fn.forward(*arrays, **params))
        else:
            out = _result(_profiler.timed(cls.__name__, "forward", fn.forward, *arrays, **params))
        if True in fn.needs_input_grad:
            out.requires_grad = True
            out.creator = fn
            fn.inputs = tuple([x if isinstance(x, Tensor) else _CONSTANT for x in inputs])
        return out

    def save_for_backward(self, *arrays):
        self.saved = arrays

    def forward(self, *arrays, **params):
        raise NotImplementedError

    def backward(self, grad):
        raise NotImplementedError


def _result(array):
    """An op's output (an array, or a NumPy scalar of a full reduction) as a Tensor outside the
    graph, the caller links it: Tensor(array) without the checks of __init__, which an op's
    floating or integer output cannot fail. Every op pays for this: ~45 times a decoded token."""
    out = Tensor.__new__(Tensor)
    out.data, out.requires_grad, out.grad, out.creator = np.asarray(array), False, None, None
    return out


def as_tensor(value, dtype=None):
    """Wrap a constant (a number or an array) as a Tensor. With a floating `dtype` (the other
    operand's) a floating or integer constant takes it, so `x * 2` or `x * np.ones(3)` keeps a
    float32 x in float32."""
    return value if isinstance(value, Tensor) else Tensor(_constant(value, dtype))


def _constant(value, dtype):
    """A constant as the array `as_tensor` wraps."""
    value = np.asarray(value)
    if dtype is not None and np.dtype(dtype).kind == "f" and value.dtype.kind in "fiub":
        value = value.astype(dtype, copy=False)
    return value


def _input_arrays(cls, inputs):
    """An op's inputs as arrays: a Tensor's data, a constant in the dtype of the first Tensor
    (`as_tensor`'s rule). Mixing float32 and float64 Tensors would silently upcast: refuse it
    where it happens. (Plain loops: this runs for every op, and a generator costs more than the
    whole check.)"""
    dtype = None
    for x in inputs:
        if isinstance(x, Tensor):
            dtype = x.data.dtype
            break
    if dtype is None:
        raise TypeError(f"{cls.__name__}: at least one input must be a Tensor")
    arrays = [x.data if isinstance(x, Tensor) else _constant(x, dtype) for x in inputs]
    float_dtype = None
    for array in arrays:
        if array.dtype.kind == "f":
            if float_dtype is None:
                float_dtype = array.dtype
            elif array.dtype != float_dtype:
                floats = {str(array.dtype) for array in arrays if array.dtype.kind == "f"}
                raise TypeError(f"{cls.__name__}: inputs mix {' and '.join(sorted(floats))}; "
                                "cast them to one dtype first (no silent upcasts)")
    return arrays


class Tensor:
    """An n-dimensional array (`.data`) with a gradient (`.grad`) for leaves that require one.

    `.creator` is the Function that produced this tensor (None for leaves and constants).
    """

    __array_priority__ = 100  # ndarray + Tensor calls Tensor.__radd__, not NumPy's add

    def __init__(self, data, requires_grad=False, dtype=None):
        self.data = np.asarray(data.data if isinstance(data, Tensor) else data, dtype=dtype)
        if requires_grad and not np.issubdtype(self.data.dtype, np.floating):
            raise TypeError(f"only floating-point tensors can require grad, got {self.data.dtype}")
        self.requires_grad = requires_grad
        self.grad = None
        self.creator = None

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
        if not self.requires_grad:
            raise RuntimeError("backward() on a tensor that does not require grad "
                               "(no input had requires_grad=True, or it was built under no_grad())")
        if grad is None:
            if self.size != 1:
                raise ValueError(f"backward() needs `grad` for a non-scalar output of shape {self.shape}")
            grad = np.ones_like(self.data)
        grad = np.asarray(grad.data if isinstance(grad, Tensor) else grad, dtype=self.dtype)
        if grad.shape != self.shape:
            raise ValueError(f"backward(): grad has shape {grad.shape}, the tensor has {self.shape}")
        grads, owned = {id(self): grad}, set()
        for node in reversed(topological_order(self)):
            g = grads.pop(id(node))
            if node.creator is None:
                node.grad = (g if id(node) in owned else g.copy()) if node.grad is None else node.grad + g
                continue
            fn = node.creator
            if fn.saved is None:
                raise RuntimeError(f"backward() through a graph a second time: {type(fn).__name__} has freed "
                                   "its saved arrays. Pass retain_graph=True to the first backward().")
            input_grads = fn.backward(g) if _profiler is None else \
                _profiler.timed(type(fn).__name__, "backward", fn.backward, g)
            owners = [_owner(g)] + [_owner(input_grad) for input_grad in input_grads]
            for tensor, input_grad, owner in zip(fn.inputs, input_grads, owners[1:]):
                if tensor.requires_grad:
                    _check_gradient(fn, tensor, input_grad)
                    fresh = sum(other is owner for other in owners) == 1 and input_grad.flags.writeable
                    _accumulate(grads, owned, tensor, input_grad, fresh)
            if not retain_graph:
                fn.saved, fn.inputs = None, ()  # release the arrays and the intermediate tensors


_CONSTANT = Tensor(np.zeros(()))  # a node's input that was a constant: it needs no gradient


def topological_order(root):
    """The nodes that need a gradient, each after all of its inputs. Iterative (an explicit
    stack), so a graph of any depth is fine."""
    order, visited, stack = [], set(), [(root, False)]
    while stack:
        node, inputs_done = stack.pop()
        if inputs_done:
            order.append(node)
        elif id(node) not in visited:
            visited.add(id(node))
            stack.append((node, True))
            if node.creator is not None:
                stack.extend((t, False) for t in node.creator.inputs
                             if t.requires_grad and id(t) not in visited)
    return order


def _owner(array):
    """The array whose memory `array` uses (itself unless it is a view); None for None."""
    return array if array is None or array.base is None else array.base


def _accumulate(grads, owned, tensor, g, fresh):
    """grads[tensor] += g, in place where that is safe. A `fresh` g (a VJP's new array that shares
    memory with no other gradient: not the op's upstream gradient g, a view of it, or another
    input's gradient) belongs to this tensor alone: later contributions are added into it, and a
    leaf keeps it as its .grad without a copy. Otherwise the second contribution allocates a
    fresh sum that later ones update in place."""
    key = id(tensor)
    if key not in grads:
        grads[key] = g
        if fresh:
            owned.add(key)
    elif key in owned:
        grads[key] += g
    else:
        grads[key] = grads[key] + g
        owned.add(key)


def _check_gradient(fn, tensor, g):
    """A VJP must return an array of its input's shape and dtype: catches unbroadcasting bugs
    and silent float64 upcasts the moment they happen."""
    if g is None or g.shape != tensor.shape or g.dtype != tensor.dtype:
        got = "None" if g is None else f"{g.shape} {g.dtype}"
        raise RuntimeError(f"{type(fn).__name__}.backward returned a gradient of {got} "
                           f"for an input of {tensor.shape} {tensor.dtype}")


from autograd import ops  # noqa: E402  (the ops need Tensor and Function, defined above)


def _binary(op, swap=False):
    if swap:
        return lambda self, other: op(other, self)
    return lambda self, other: op(self, other)


Tensor.__add__, Tensor.__radd__ = _binary(ops.add), _binary(ops.add, swap=True)
Tensor.__sub__, Tensor.__rsub__ = _binary(ops.sub), _binary(ops.sub, swap=True)
Tensor.__mul__, Tensor.__rmul__ = _binary(ops.mul), _binary(ops.mul, swap=True)
Tensor.__truediv__, Tensor.__rtruediv__ = _binary(ops.div), _binary(ops.div, swap=True)
Tensor.__matmul__, Tensor.__rmatmul__ = _binary(ops.matmul), _binary(ops.matmul, swap=True)
Tensor.__pow__, Tensor.__rpow__ = _binary(ops.power), _binary(ops.power, swap=True)
Tensor.__neg__ = ops.neg
Tensor.__getitem__ = ops.getitem
Tensor.exp, Tensor.log, Tensor.sqrt, Tensor.tanh = ops.exp, ops.log, ops.sqrt, ops.tanh
Tensor.sum, Tensor.mean, Tensor.max = ops.sum, ops.mean, ops.max
Tensor.reshape, Tensor.transpose, Tensor.swapaxes = ops.reshape, ops.transpose, ops.swapaxes
Tensor.T = property(lambda self: ops.transpose(self))
