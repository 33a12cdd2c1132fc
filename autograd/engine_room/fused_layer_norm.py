"""Layer norm as one fused primitive with its hand-derived VJP: the optimised form of
`layer_norm_composite` (autograd/functional/layer_norm.py, where eq. (2), its two variants and
the VJP used here are derived).

What differs from the plain form: one Function instead of a chain of primitives; the VJP

    ∂L/∂z = (h − mean(h) − u · mean(h ⊙ x̂)) / D,     h = g ⊙ γ,   u = 2 D′(σ²) (z − μ)

applied by hand, with the two row means of h and h ⊙ x̂ taken as products with γ (g γ and
(g ⊙ x̂) γ, one matrix–vector product each) instead of forming h first; x̂ normalised in place;
no second row-sized array for u: the op saves x̂ and, per row, the factor u / x̂ (1 for "torch",
D/σ = 1 + ε/σ for "thesis", 0 for a constant row, where the u-term vanishes); and float16 x with
the statistics and the normalisation computed in float32 (z² of a residual stream entry of 300
overflows float16), x̂ and y stored in float16.

Tested against the plain form in tests/test_layer_norm.py (values and gradients, to rounding).
"""
import numpy as np

from autograd.engine import Function
from autograd.precision import widen


class FusedLayerNorm(Function):
    """γ (z − μ)/D + β over the last axis. Inputs x (..., d), γ (d,), β (d,); `variant` "thesis"
    (D = σ + ε) or "torch" (D = √(σ² + ε)). ∂L/∂γ = Σ g ⊙ x̂ and ∂L/∂β = Σ g, summed over the
    leading axes."""

    def forward(self, x, gamma, beta, eps, variant):
        z = widen(x)                                                    # float16: the statistics in float32
        eps = np.asarray(eps, dtype=z.dtype)
        d = z.shape[-1]                                                 # means as sum / d: NumPy's mean, without
        x_hat = z - z.sum(axis=-1, keepdims=True) / d                  # its Python wrapper; c, normalised below
        variance = np.square(x_hat).sum(axis=-1, keepdims=True) / d
        sigma = np.sqrt(variance)
        denominator = sigma + eps if variant == "thesis" else np.sqrt(variance + eps)
        x_hat /= denominator
        if True in self.needs_input_grad:
            self.save_for_backward(x_hat.astype(x.dtype, copy=False), _direction_scale(sigma, denominator, variant),
                                   denominator, gamma)
        y = x_hat * widen(gamma)
        y += widen(beta)
        return y.astype(x.dtype, copy=False)

    def backward(self, g):
        x_hat, u_scale, denominator, gamma = self.saved
        dtype, shape, d = g.dtype, g.shape, g.shape[-1]
        g, x_hat, gamma = widen(g).reshape(-1, d), widen(x_hat).reshape(-1, d), widen(gamma)   # rows
        g_x_hat = g * x_hat
        grad_x = grad_gamma = grad_beta = None
        if self.needs_input_grad[0]:                 # row means of h = g ⊙ γ and of h ⊙ x̂ as products with γ
            mean_h, mean_h_x_hat = (g @ gamma)[:, None] / d, (g_x_hat @ gamma)[:, None] / d
            grad_x = g * gamma                                          # h
            grad_x -= mean_h
            grad_x -= x_hat * (u_scale.reshape(-1, 1) * mean_h_x_hat)  # u · mean(h ⊙ x̂), u = x̂ · u_scale
            grad_x /= denominator.reshape(-1, 1)
            grad_x = grad_x.reshape(shape).astype(dtype, copy=False)
        if self.needs_input_grad[1]:
            grad_gamma = g_x_hat.sum(axis=0).astype(dtype, copy=False)
        if self.needs_input_grad[2]:
            grad_beta = g.sum(axis=0).astype(dtype, copy=False)
        return grad_x, grad_gamma, grad_beta


def _direction_scale(sigma, denominator, variant):
    """Per row, the factor u / x̂ of the u = 2 D′(σ²) c of the VJP: 1 for "torch" (u = x̂), D/σ for
    "thesis" (u = c/σ = x̂ · D/σ), 0 where σ = 0. D/σ cannot overflow: σ, the square root of a
    variance, is at least the square root of the smallest positive float."""
    if variant == "torch":
        return np.ones_like(sigma)
    return np.divide(denominator, sigma, out=np.zeros_like(sigma), where=sigma > 0)
