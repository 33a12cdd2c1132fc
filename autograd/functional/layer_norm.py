"""Layer normalisation, thesis eq. (2) (§1.2.2), fused and composite.

For one row z ∈ ℝᵈ (the last axis; every leading axis is a batch axis):

    μ = (1/d) Σᵢ zᵢ,    σ² = (1/d) Σᵢ (zᵢ − μ)²    (biased: divide by d, not d − 1)
    x̂ = (z − μ) / D,     y = γ ⊙ x̂ + β,           γ, β ∈ ℝᵈ

with two choices of the denominator D:

| variant  | D            | source                                   |
|----------|--------------|------------------------------------------|
| "thesis" | σ + ε        | thesis eq. (2), ε = 1e-6 (the default)   |
| "torch"  | √(σ² + ε)    | torch.nn.functional.layer_norm           |

They are different functions: for a row with σ = 1 and ε = 1e-6 they differ by about
ε/2 relative, and for rows with small σ by much more (σ + ε against √(σ² + ε) ≥ √ε).

`LayerNorm` is the fused primitive with the hand-derived VJP (derived in its docstring);
`layer_norm_composite` writes the same formula with the engine's primitives (mean, sub, mul,
sqrt, div, add) and lets autograd find the gradient. The tests check that both agree.

For float16 x the fused op computes the statistics and the normalisation in float32 (z² of a
residual stream entry of 300 overflows float16) and stores x̂ and y in float16.
"""
import numpy as np

from autograd import ops
from autograd.plain_mode import is_composite
from autograd.engine import Function
from autograd.precision import widen

VARIANTS = ("thesis", "torch")


def layer_norm(x, gamma, beta, eps=1e-6, variant="thesis"):
    """γ (z − μ)/D + β over the last axis, as a fused primitive (thesis eq. (2)).

    x: (..., d); gamma, beta: (d,). Returns (..., d) in x's dtype. `variant` picks D: "thesis"
    σ + ε, "torch" √(σ² + ε) (see the module docstring). Under `autograd.composite()`:
    `layer_norm_composite`.
    """
    if is_composite():
        return layer_norm_composite(x, gamma, beta, eps, variant)
    _check_arguments(x, gamma, beta, variant)
    return LayerNorm.apply(x, gamma, beta, eps=eps, variant=variant)


def layer_norm_composite(x, gamma, beta, eps=1e-6, variant="thesis"):
    """The same function as `layer_norm`, built from primitives; autograd derives its gradient."""
    _check_arguments(x, gamma, beta, variant)
    mu = ops.mean(x, axis=-1, keepdims=True)
    centred = x - mu
    variance = ops.mean(centred * centred, axis=-1, keepdims=True)
    if variant == "thesis":
        denominator = _standard_deviation(variance) + float(eps)
    else:
        denominator = ops.sqrt(variance + float(eps))
    return gamma * (centred / denominator) + beta


def _standard_deviation(variance):
    """σ = √(σ²), whose derivative is 0 instead of 1/0 at a constant row (σ² = 0). The output
    depends on σ only through (z − μ)/(σ + ε), and z − μ = 0 there, so 0 is the exact
    derivative of the output, as in the fused `LayerNorm`. (√ is taken of 1 at those rows and
    the result replaced by 0: no infinite derivative ever enters the product.)"""
    constant = variance.data == 0
    return ops.where(constant, 0.0, ops.sqrt(ops.masked_fill(variance, constant, 1.0)))


class LayerNorm(Function):
    """Fused layer norm with the hand-derived VJP. Inputs x (..., d), γ (d,), β (d,).

    Backward for one row, with g = ∂L/∂y, h = g ⊙ γ, c = z − μ, x̂ = c / D:

        ∂x̂ᵢ/∂zⱼ = (δᵢⱼ − 1/d) / D − cᵢ/D² · ∂D/∂zⱼ,       ∂σ²/∂zⱼ = 2cⱼ/d

    (the −1/d comes from μ; the terms of ∂σ²/∂zⱼ through μ sum to zero because Σ c = 0).
    By the chain rule ∂D/∂zⱼ = D′(σ²) · 2cⱼ/d, so

        ∂L/∂zⱼ = Σᵢ hᵢ ∂x̂ᵢ/∂zⱼ = (hⱼ − mean(h) − uⱼ · mean(h ⊙ x̂)) / D,      u = 2 D′(σ²) c

        torch:   D = √(σ² + ε),  D′ = 1/(2D),  u = c/D = x̂
        thesis:  D = σ + ε,       D′ = 1/(2σ),  u = c/σ = x̂ · D/σ

    The thesis's u is the row scaled to unit variance (|uⱼ| ≤ √d). The op keeps no second
    row-sized array for it: it saves x̂ and, per row, the factor D/σ = 1 + ε/σ, and forms
    u · mean(h ⊙ x̂) as x̂ · (D/σ · mean(h ⊙ x̂)). D/σ cannot overflow: σ, the square root of a
    variance, is at least the square root of the smallest positive float. For a constant row
    (σ = 0) c = 0 and the u-term vanishes: x̂ = c/(σ + ε) = c/ε + O(‖c‖²) because σ = ‖c‖/√d, so
    the derivative there is exactly (h − mean(h)) / ε. `_direction_scale` gives the factor 0
    there instead of dividing by 0.

    The parameters see every row: ∂L/∂γ = Σ g ⊙ x̂ and ∂L/∂β = Σ g, summed over the leading axes.
    """

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
    """Per row, the factor u / x̂ of the u = 2 D′(σ²) c of the LayerNorm docstring: 1 for "torch"
    (u = x̂), D/σ for "thesis" (u = c/σ = x̂ · D/σ), 0 where σ = 0."""
    if variant == "torch":
        return np.ones_like(sigma)
    return np.divide(denominator, sigma, out=np.zeros_like(sigma), where=sigma > 0)


def _check_arguments(x, gamma, beta, variant):
    if variant not in VARIANTS:
        raise ValueError(f"layer_norm: variant must be one of {VARIANTS}, got {variant!r}")
    shape = np.shape(getattr(x, "data", x))
    if len(shape) == 0:
        raise ValueError("layer_norm: x must have at least one axis (the one normalised), got a scalar")
    for name, parameter in (("gamma", gamma), ("beta", beta)):
        parameter_shape = np.shape(getattr(parameter, "data", parameter))
        if parameter_shape != shape[-1:]:
            raise ValueError(f"layer_norm: {name} must have shape {shape[-1:]} (the last axis of x, "
                             f"whose shape is {shape}), got {parameter_shape}")
