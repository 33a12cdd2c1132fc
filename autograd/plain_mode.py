"""The plain mode: one switch that runs a whole model on the plain forms.

By default the functions of `autograd.functional` and `autograd.optim` run the optimised forms
of `autograd.engine_room` (each tested against its plain form). Inside `with autograd.plain():`
every one of them runs its plain form instead: a few lines of NumPy that read like the formula,
or a composition of primitives whose gradient autograd derives. Stepping through a model in a
debugger then shows the equations of the thesis (docs/autograd.md lists each pair).

`autograd.composite()` is the earlier name of the same switch, kept as an alias.
"""
from contextlib import contextmanager

_plain = False


@contextmanager
def plain():
    """Inside this context (or a function it decorates) every op with an optimised form runs its
    plain form. Same values and gradients to rounding (the tests compare them); slower."""
    global _plain
    previous, _plain = _plain, True
    try:
        yield
    finally:
        _plain = previous


def is_plain():
    """True inside `plain()`: the functions with an optimised form run their plain form."""
    return _plain


composite, is_composite = plain, is_plain      # the earlier names, kept for one release
