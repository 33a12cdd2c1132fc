"""Elementwise activations: ReLU (the feed-forward network of thesis §1.2.4), GELU, the
logistic sigmoid (the gate of SwiGLU), and LeakyReLU and ELU (graph attention). Each VJP is g
times the derivative at x.

| op      | forward                                   | derivative                              |
|---------|-------------------------------------------|-----------------------------------------|
| ReLU    | max(x, 0)                                 | [x > 0]                                 |
| GELU    | x Φ(x) = ½x(1 + erf(x/√2))                | Φ(x) + x φ(x)                           |
| GELU≈   | ½x(1 + tanh u),  u = √(2/π)(x + 0.044715x³) | ½(1 + tanh u) + ½x(1 − tanh² u) du/dx |
| Sigmoid | σ(x) = 1 / (1 + e⁻ˣ)                      | σ(x)(1 − σ(x))                          |
| Leaky   | x if x > 0, else slope · x                | 1 if x > 0, else slope                  |
| ELU     | x if x > 0, else eˣ − 1                   | 1 if x > 0, else eˣ                     |

Φ and φ are the standard normal CDF and density. Constants are Python floats, so a float32 x
stays float32. GELU here is the plain form, with SciPy's erf; by default `gelu` runs the engine
room's form (`autograd.engine_room.gelu_erf`: a rational erf in float32, Φ read off the output in
backward, a block at a time), tested against this one. ELU is a composite (where and exp);
autograd derives its VJP.
"""
import math

import numpy as np
from scipy.special import erf

from autograd.checks import checked_number
from autograd.engine import Function, as_tensor
from autograd.engine_room.gelu_erf import gelu_fast
from autograd.ops import masked_fill, where
from autograd.plain_mode import is_plain

_SATURATED = 100.0  # beyond |x| = 100, φ(x) is 0 to the last bit (and x² stays finite, in float16 too)


class ReLU(Function):
    """max(x, 0). VJP: g ⊙ [x > 0], so g where x > 0, else 0 (also at the kink x = 0, as
    PyTorch)."""

    def forward(self, x):
        self.save_for_backward(x > 0)
        return np.maximum(x, 0)

    def backward(self, g):
        (positive,) = self.saved
        return (g * positive,)


def normal_cdf(x):
    """Φ(x) = ½(1 + erf(x/√2)), the standard normal CDF, with SciPy's erf."""
    return 0.5 * (1 + erf(x / math.sqrt(2)))


def normal_pdf(x):
    """φ(x) = e^(−x²/2) / √(2π), the standard normal density (x clipped so that x² cannot
    overflow)."""
    x = np.clip(x, -_SATURATED, _SATURATED)
    return np.exp(-x * x / 2) / math.sqrt(2 * math.pi)


def tanh_form(x):
    """(t, du/dx) of the tanh approximation: t = tanh u, u = √(2/π)(x + 0.044715 x³). x is
    clipped to ±10, where u > 43 and t = ±1 to the last bit already, so that x³ cannot overflow."""
    x = np.clip(x, -10.0, 10.0)
    u = math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)
    du_dx = math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * x ** 2)
    return np.tanh(u), du_dx


class GELU(Function):
    """The Gaussian error linear unit, as PyTorch's `F.gelu(x, approximate=...)`:

        "none":  y = x Φ(x),             dy/dx = Φ(x) + x φ(x)
        "tanh":  y = ½ x (1 + tanh u),   dy/dx = ½(1 + tanh u) + ½ x (1 − tanh² u) du/dx

    VJP: g ⊙ dy/dx. x of any shape; y and the gradient in x's dtype (SciPy's erf has no float16
    loop: a float16 x is computed in float32 and rounded back)."""

    def forward(self, x, approximate="none"):
        self.save_for_backward(x)
        self.approximate = approximate
        if approximate == "tanh":
            y = 0.5 * x * (1 + tanh_form(x)[0])
        else:
            y = x * normal_cdf(x)
        return y.astype(x.dtype, copy=False)

    def backward(self, g):
        (x,) = self.saved
        if self.approximate == "tanh":
            t, du_dx = tanh_form(x)
            slope = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du_dx
        else:
            slope = normal_cdf(x) + x * normal_pdf(x)
        return ((g * slope).astype(g.dtype, copy=False),)


class Sigmoid(Function):
    """σ(x) = 1 / (1 + e⁻ˣ), written as e^x / (1 + e^x) for x < 0 so that the exponential is
    always e^−|x| ≤ 1 and never overflows. VJP: g σ(1 − σ)."""

    def forward(self, x):
        e = np.exp(-np.abs(x))
        s = np.where(x >= 0, 1 / (1 + e), e / (1 + e))
        self.save_for_backward(s)
        return s

    def backward(self, g):
        (s,) = self.saved
        return (g * s * (1 - s),)


class LeakyReLU(Function):
    """x where x > 0, slope · x elsewhere. VJP: g where x > 0, slope · g elsewhere (slope at the
    kink x = 0, as PyTorch)."""

    def forward(self, x, slope):
        positive = x > 0
        self.save_for_backward(positive)
        self.slope = slope
        return np.where(positive, x, x * np.asarray(slope, dtype=x.dtype))

    def backward(self, g):
        (positive,) = self.saved
        return (np.where(positive, g, g * np.asarray(self.slope, dtype=g.dtype)),)


def relu(x):
    """max(x, 0) elementwise (the feed-forward non-linearity of thesis §1.2.4)."""
    return ReLU.apply(as_tensor(x))


def gelu(x, approximate="none"):
    """The Gaussian error linear unit x Φ(x); `approximate` is "none" (erf) or "tanh". Inside
    `autograd.plain()` the plain `GELU` above; otherwise the engine room's `gelu_fast`."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    x = as_tensor(x)
    return GELU.apply(x, approximate=approximate) if is_plain() else gelu_fast(x, approximate)


def sigmoid(x):
    """The logistic function 1 / (1 + e⁻ˣ), stable for any x."""
    return Sigmoid.apply(as_tensor(x))


def leaky_relu(x, slope=0.01):
    """x for x > 0, slope · x otherwise (graph attention's scores use slope 0.2)."""
    slope = checked_number("leaky_relu: slope", slope, 0, 1, high_open=True)
    return LeakyReLU.apply(as_tensor(x), slope=slope)


def elu(x):
    """x for x > 0, eˣ − 1 otherwise (Clevert et al., 2016; the hidden activation of GAT). The
    exponential sees min(x, 0), so it never overflows."""
    x = as_tensor(x)
    positive = x.data > 0
    return where(positive, x, masked_fill(x, positive, 0.0).exp() - 1.0)
