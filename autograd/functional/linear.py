"""The affine map of a linear layer, y = x W + b (the X · W of thesis §1.2.2), fused and composite.

x: (..., d_in), W: (d_in, d_out), b: (d_out,) or None → y: (..., d_out). Every leading axis of
x is a batch axis; stacking the rows of x into a matrix X ∈ ℝ^{N × d_in} (N the product of the
leading axes), and the rows of G = ∂L/∂y the same way,

    Y = X W + 1 bᵀ,       ∂L/∂X = G Wᵀ,      ∂L/∂W = Xᵀ G,      ∂L/∂b = 1ᵀ G  (the column sums of G)

`linear_composite` computes the same with the engine's broadcasting `@` and `+`, and lets
autograd derive the VJPs; the fused `Linear` computes Y = X W, ∂L/∂X = G Wᵀ and ∂L/∂W = Xᵀ G as
one product of 2-D arrays each. The two agree to rounding: BLAS sums a row's products in an
order that may depend on how many rows share the call. (docs/performance.md says why each is
written so.)
"""
from autograd.plain_mode import is_composite
from autograd.engine import Function, as_tensor
from autograd.precision import matmul, total


def linear(x, weight, bias=None):
    """x W + b over the last axis of x, fused: (..., d_in) → (..., d_out). `bias` may be None.
    Under `autograd.composite()`: `linear_composite`."""
    if is_composite():
        return linear_composite(x, weight, bias)
    x = as_tensor(x)
    if bias is None:
        return Linear.apply(x, weight)
    return Linear.apply(x, weight, bias)


def linear_composite(x, weight, bias=None):
    """The same map from the engine's broadcasting matrix product and sum."""
    y = as_tensor(x) @ weight
    return y if bias is None else y + bias


class Linear(Function):
    """Y = X W (+ b) on the rows of x; VJPs G Wᵀ, Xᵀ G and the column sums of G (see above)."""

    def forward(self, x, weight, bias=None):
        y = matmul(x.reshape(-1, x.shape[-1]), weight).reshape(*x.shape[:-1], weight.shape[-1])
        if bias is not None:
            y += bias
        self.x_shape = x.shape
        needs_x, needs_weight = self.needs_input_grad[:2]
        self.save_for_backward(x if needs_weight else None, weight if needs_x else None)
        return y

    def backward(self, g):
        x, weight = self.saved
        g = g.reshape(-1, g.shape[-1])                               # G: (N, d_out)
        grad_x = matmul(g, weight.T).reshape(self.x_shape) if self.needs_input_grad[0] else None
        grad_weight = matmul(x.reshape(-1, x.shape[-1]).T, g) if self.needs_input_grad[1] else None
        if len(self.needs_input_grad) == 2:
            return grad_x, grad_weight
        return grad_x, grad_weight, total(g, axis=0) if self.needs_input_grad[2] else None
