"""The composite mode: one switch between the fused ops, with their hand-derived VJPs, and the
compositions of primitives whose gradients autograd derives (docs/autograd.md)."""
from contextlib import contextmanager

_composite = False


@contextmanager
def composite():
    """Inside this context (or a function it decorates) softmax, layer norm, the linear map and
    the attention weights run as compositions of primitive ops, whose gradient autograd derives,
    instead of as fused ops with a hand-derived VJP: stepping through them in a debugger shows
    the derivation of the thesis. Same values and gradients (the tests compare them); slower."""
    global _composite
    previous, _composite = _composite, True
    try:
        yield
    finally:
        _composite = previous


def is_composite():
    return _composite
