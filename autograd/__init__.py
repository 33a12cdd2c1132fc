"""A small reverse-mode automatic differentiation engine over NumPy arrays.

    from autograd import Tensor, no_grad, gradcheck
    import autograd.functional as F

`with autograd.composite():` runs the fused ops of autograd.functional (softmax, layer norm,
linear) and the model's attention weights as compositions of primitives, to step through.
"""
from autograd.engine import Tensor, Function, no_grad, is_grad_enabled
from autograd.composite_mode import composite, is_composite
from autograd.ops import concatenate, stack, split, where, masked_fill
from autograd.gradcheck import gradcheck, GradcheckError
from autograd.profiler import profile
from autograd.checkpointing import checkpoint

__all__ = ["Tensor", "Function", "no_grad", "is_grad_enabled", "composite", "is_composite", "gradcheck", "GradcheckError",
           "concatenate", "stack", "split", "where", "masked_fill", "profile", "checkpoint"]
