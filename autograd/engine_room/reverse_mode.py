"""The engine's bookkeeping for speed: the optimised form of `Function.apply` and
`Tensor.backward` (autograd/engine.py, where the plain form is: build each output with
`Tensor(...)`; visit the nodes in reverse topological order, apply each VJP and add its result
into the input's gradient, `a + b`).

What differs from the plain form:

- Gradients added in place. The plain form allocates a new sum for every contribution after the
  first, and copies each leaf's gradient before storing it as `.grad`. Here a VJP's result that
  shares memory with no other gradient (`fresh`: not the op's upstream gradient g, a view of it,
  or another input's gradient; `_owner` follows a view to the array that owns its memory, and a
  read-only array is never fresh) belongs to its tensor alone: later contributions are added
  into it, and a leaf keeps it without a copy. Otherwise the second contribution allocates a
  fresh sum that later ones update in place. The sums are the same, in the same order.
- Each op's output is built without `Tensor.__init__`'s conversion and checks, which an op's
  floating or integer output cannot fail (every op pays for them: ~45 times a decoded token).
- Checks the plain form leaves out: each VJP's result has its input's shape and dtype, and a
  second backward() through a freed graph says so.
- The profiler's timings (autograd/profiler.py sets `_profiler` while a `profile()` block runs;
  otherwise its only cost is one `is None` test per op).
- Gradients written where they are wanted (`gradients_into`): a leaf given an array there has
  its gradient copied into that array as soon as the gradient is complete (or handed to a
  function of the caller's that puts it there), and the array becomes its `.grad`; the private
  gradient is then freed at once instead of living to the end of backward(). The processes of
  training/parallel.py fill their shared gradients that way.

Tested against the plain form in tests/test_reverse_mode.py (a model's gradients bit for bit,
float32 and float64; gradients_into) and tests/test_engine.py (no two gradients sharing memory
on graphs full of views).
"""
from contextlib import contextmanager

import numpy as np

from autograd.engine import Tensor

_profiler = None  # an autograd.profiler.Profile while `autograd.profile()` runs
_sinks = None     # {id(leaf): array} while `gradients_into` runs
_write = None     # the function that puts a gradient into its array, meanwhile


@contextmanager
def gradients_into(pairs, write=np.copyto):
    """While in the context, backward() puts the gradient of each leaf of `pairs` ((tensor,
    array) with the tensor's shape and dtype) into its array, as write(array, gradient) (a copy
    unless told otherwise), when the leaf has no gradient yet (else it adds as usual); the
    array becomes the leaf's `.grad`. The values are those of the plain form, bit for bit;
    under `plain_mode` the plain form runs and keeps its own arrays."""
    global _sinks, _write
    if _sinks is not None:
        raise RuntimeError("gradients_into() inside another gradients_into()")
    sinks = {}
    for tensor, array in pairs:
        if array.shape != tensor.shape or array.dtype != tensor.dtype:
            raise ValueError(f"gradients_into(): an array of {array.shape} {array.dtype} for a tensor of "
                             f"{tensor.shape} {tensor.dtype}")
        sinks[id(tensor)] = array
    _sinks, _write = sinks, write
    try:
        yield
    finally:
        _sinks, _write = None, None


def forward(fn, arrays, params):
    """fn.forward(*arrays, **params) as a Tensor outside the graph (`Function.apply` links it)."""
    if _profiler is None:
        return _result(fn.forward(*arrays, **params))
    return _result(_profiler.timed(type(fn).__name__, "forward", fn.forward, *arrays, **params))


def _result(array):
    """An op's output (an array, or a NumPy scalar of a full reduction) as a Tensor: Tensor(array)
    without the checks of __init__."""
    out = Tensor.__new__(Tensor)
    out.data, out.requires_grad, out.grad, out.creator = np.asarray(array), False, None, None
    return out


def backward(order, grads, retain_graph):
    """`Tensor.backward` from the nodes in reverse topological order and {id(root): ∂L/∂root}."""
    owned = set()
    for node in order:
        g = grads.pop(id(node))
        if node.creator is None:
            sink = None if _sinks is None or node.grad is not None else _sinks.get(id(node))
            if sink is not None:
                _write(sink, g)
                node.grad = sink
            else:
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
                check_gradient(fn, tensor, input_grad)
                fresh = sum(other is owner for other in owners) == 1 and input_grad.flags.writeable
                _accumulate(grads, owned, tensor, input_grad, fresh)
        if not retain_graph:
            fn.saved, fn.inputs = None, ()  # release the arrays and the intermediate tensors


def _owner(array):
    """The array whose memory `array` uses (itself unless it is a view); None for None."""
    return array if array is None or array.base is None else array.base


def _accumulate(grads, owned, tensor, g, fresh):
    """grads[tensor] += g, in place where that is safe: into a sum this tensor owns (`owned`), or
    keeping a `fresh` g as one (see above)."""
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


def check_gradient(fn, tensor, g):
    """A VJP must return an array of its input's shape and dtype: catches unbroadcasting bugs
    and silent float64 upcasts the moment they happen."""
    if g is None or g.shape != tensor.shape or g.dtype != tensor.dtype:
        got = "None" if g is None else f"{g.shape} {g.dtype}"
        raise RuntimeError(f"{type(fn).__name__}.backward returned a gradient of {got} "
                           f"for an input of {tensor.shape} {tensor.dtype}")
