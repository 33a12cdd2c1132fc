"""A small reverse-mode automatic differentiation engine over NumPy arrays.

    from autograd import Tensor, no_grad, gradcheck
    import autograd.functional as F

`with autograd.plain():` runs every op that has an optimised form (autograd.engine_room) in its
plain form instead, to step through beside the thesis (`autograd.composite()` is its old name).
"""
from autograd.engine import Tensor, Function, no_grad, is_grad_enabled
from autograd.plain_mode import plain, is_plain, composite, is_composite
from autograd.ops import concatenate, stack, split, where, masked_fill
from autograd.gradcheck import gradcheck, GradcheckError
from autograd.profiler import profile
from autograd.checkpointing import checkpoint

__all__ = ["Tensor", "Function", "no_grad", "is_grad_enabled", "plain", "is_plain", "composite", "is_composite",
           "gradcheck", "GradcheckError", "concatenate", "stack", "split", "where", "masked_fill", "profile", "checkpoint"]
