"""Layer normalisation, thesis eq. (2) (§1.2.2): the plain form and its gradient by hand.

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

`layer_norm_composite` below writes the formula with the engine's primitives (mean, sub, mul,
sqrt, div, add) and lets autograd find the gradient; `F.layer_norm` runs it inside
`autograd.plain()`. Otherwise `F.layer_norm` runs the engine room's `FusedLayerNorm`
(autograd/engine_room/fused_layer_norm.py), which applies the VJP derived here by hand
(tests/test_layer_norm.py compares the two).

The VJP by hand, for one row, with g = ∂L/∂y, h = g ⊙ γ, c = z − μ, x̂ = c / D:

    ∂x̂ᵢ/∂zⱼ = (δᵢⱼ − 1/d) / D − cᵢ/D² · ∂D/∂zⱼ,       ∂σ²/∂zⱼ = 2cⱼ/d

(the −1/d comes from μ; the terms of ∂σ²/∂zⱼ through μ sum to zero because Σ c = 0).
By the chain rule ∂D/∂zⱼ = D′(σ²) · 2cⱼ/d, so

    ∂L/∂zⱼ = Σᵢ hᵢ ∂x̂ᵢ/∂zⱼ = (hⱼ − mean(h) − uⱼ · mean(h ⊙ x̂)) / D,      u = 2 D′(σ²) c

    torch:   D = √(σ² + ε),  D′ = 1/(2D),  u = c/D = x̂
    thesis:  D = σ + ε,       D′ = 1/(2σ),  u = c/σ = x̂ · D/σ

The thesis's u is the row scaled to unit variance (|uⱼ| ≤ √d). For a constant row (σ = 0)
c = 0 and the u-term vanishes: x̂ = c/(σ + ε) = c/ε + O(‖c‖²) because σ = ‖c‖/√d, so the
derivative there is exactly (h − mean(h)) / ε. The parameters see every row:
∂L/∂γ = Σ g ⊙ x̂ and ∂L/∂β = Σ g, summed over the leading axes.
"""
import numpy as np

from autograd import ops
from autograd.plain_mode import is_plain
from autograd.engine_room.fused_layer_norm import FusedLayerNorm

VARIANTS = ("thesis", "torch")


def layer_norm_composite(x, gamma, beta, eps=1e-6, variant="thesis"):
    """γ (z − μ)/D + β over the last axis (eq. (2)) from primitives; autograd derives its gradient.
    x: (..., d); gamma, beta: (d,) → (..., d)."""
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
    derivative of the output, as in the hand-derived VJP above. (√ is taken of 1 at those rows and
    the result replaced by 0: no infinite derivative ever enters the product.)"""
    constant = variance.data == 0
    return ops.where(constant, 0.0, ops.sqrt(ops.masked_fill(variance, constant, 1.0)))


def layer_norm(x, gamma, beta, eps=1e-6, variant="thesis"):
    """γ (z − μ)/D + β over the last axis (thesis eq. (2)).

    x: (..., d); gamma, beta: (d,). Returns (..., d) in x's dtype. `variant` picks D: "thesis"
    σ + ε, "torch" √(σ² + ε) (see the module docstring). `layer_norm_composite` inside
    `autograd.plain()`, else the engine room's `FusedLayerNorm`.
    """
    if is_plain():
        return layer_norm_composite(x, gamma, beta, eps, variant)
    _check_arguments(x, gamma, beta, variant)
    return FusedLayerNorm.apply(x, gamma, beta, eps=eps, variant=variant)


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
