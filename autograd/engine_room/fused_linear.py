"""The linear map y = x W + b as one fused primitive: the optimised form of `linear_composite`
(autograd/functional/linear.py, where the formula and its VJPs are written out).

What differs from the plain form: the rows of x are stacked into one matrix X ∈ ℝ^{N × d_in}
(N the product of the leading axes) and every product is one product of 2-D arrays,

    Y = X W,      ∂L/∂X = G Wᵀ,      ∂L/∂W = Xᵀ G,      ∂L/∂b = 1ᵀ G  (the column sums of G),

instead of the engine's broadcasting `@` and `+`, whose VJPs reduce over the batch axes; float16
operands are multiplied and summed in float32 (`precision.matmul`, `precision.total`); and only
the arrays backward needs are kept (x only for ∂L/∂W, W only for ∂L/∂X). docs/performance.md
says why each is written so.

Tested against the plain form in tests/test_linear.py: the two agree to rounding, as BLAS sums a
row's products in an order that may depend on how many rows share the call.
"""
from autograd.engine import Function
from autograd.precision import matmul, total


class FusedLinear(Function):
    """Y = X W (+ b) on the rows of x: x (..., d_in), W (d_in, d_out), b (d_out,) or absent →
    (..., d_out). VJPs G Wᵀ, Xᵀ G and the column sums of G (see above)."""

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
