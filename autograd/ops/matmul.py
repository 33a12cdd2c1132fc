"""Batched matrix product with NumPy's broadcasting of the batch axes.

For C = A B: ∂L/∂A = G Bᵀ and ∂L/∂B = Aᵀ G, summed over batch axes that were broadcast.
A 1-D operand is a row (for A) or a column (for B), as in np.matmul. float16 operands are
multiplied in float32 (autograd/precision.py).
"""
import numpy as np

from autograd.engine import Function
from autograd.precision import matmul
from autograd.ops.elementwise import unbroadcast


class MatMul(Function):
    def forward(self, a, b):
        self.save_for_backward(a, b)
        return matmul(a, b)

    def backward(self, g):
        a, b = self.saved
        a2 = a[None, :] if a.ndim == 1 else a
        b2 = b[:, None] if b.ndim == 1 else b
        g2 = g[..., None] if b.ndim == 1 else g
        g2 = np.expand_dims(g2, -2) if a.ndim == 1 else g2
        grad_a = grad_b = None
        if self.needs_input_grad[0]:
            grad_a = unbroadcast(matmul(g2, np.swapaxes(b2, -1, -2)), a2.shape).reshape(a.shape)
        if self.needs_input_grad[1]:
            grad_b = unbroadcast(matmul(np.swapaxes(a2, -1, -2), g2), b2.shape).reshape(b.shape)
        return grad_a, grad_b
