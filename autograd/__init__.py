"""A small reverse-mode automatic differentiation engine over NumPy arrays.

    from autograd import Tensor, no_grad, gradcheck
    import autograd.functional as F
"""
from autograd.engine import Tensor, Function, no_grad, is_grad_enabled
from autograd.ops import concatenate, stack, split, where, masked_fill
from autograd.gradcheck import gradcheck, GradcheckError
from autograd.profiler import profile

__all__ = ["Tensor", "Function", "no_grad", "is_grad_enabled", "gradcheck", "GradcheckError",
           "concatenate", "stack", "split", "where", "masked_fill", "profile"]
