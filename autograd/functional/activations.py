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
stays float32. Φ uses SciPy's erf in float64; in float32 (and float16, widened) it uses
`erf_float32`, Eigen's rational approximation, five times faster than SciPy's float32 erf on a
training batch and as accurate as float32 needs (docs/performance.md), and SciPy's erf again on
arrays under SMALL entries, where the rational form's many passes cost more in calls. ELU is a
composite (where and exp); autograd derives its VJP.
"""
import math

import numpy as np
from scipy.special import erf

from autograd.blocks import BLOCK, in_blocks
from autograd.checks import checked_number
from autograd.engine import Function, as_tensor
from autograd.ops import masked_fill, where
from autograd.precision import widen

_SQRT_HALF = math.sqrt(0.5)
_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)
_TANH_SCALE, _TANH_CUBIC = math.sqrt(2 / math.pi), 0.044715
_SATURATED = 100.0  # beyond |x| = 100 both Φ and tanh u equal 0 or 1 to the last bit
SMALL = 4096        # float32 arrays this large or larger take erf_float32 (see _normal_cdf); at most
assert SMALL <= BLOCK // 2  # half a block, so every block of a large array (autograd.blocks) takes it too


class ReLU(Function):
    """max(x, 0). VJP: g ⊙ [x > 0], so g where x > 0, else 0 (also at the kink x = 0, as
    PyTorch)."""

    def forward(self, x):
        self.save_for_backward(x > 0)
        return np.maximum(x, 0)

    def backward(self, g):
        (positive,) = self.saved
        return (g * positive,)


# erf(x) ≈ x α(x²) / β(x²) on [−4, 4], ±1 beyond (Eigen's generic_fast_erf_float, also XLA's):
# the coefficients of α (degree 6 in x², highest first) and β (degree 4).
_ERF_ALPHA = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
              -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02)
_ERF_BETA = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
             -1.42647390514189e-02)


def erf_float32(x, out=None):
    """erf of a float32 array as x α(x²) / β(x²), x clipped to [−4, 4] (where float32's erf is
    already ±1): within 4.5e-7 of the exact erf everywhere (tests/test_activations.py). Every
    step works in place on two buffers, so the ~25 passes stay as cheap as one SciPy call is
    not: SciPy's erf takes about 11 ns per float32 entry here, this about 2 ns. `out` (x itself
    is allowed) receives the result."""
    clipped = np.clip(x, -4.0, 4.0, out=out)
    x2 = clipped * clipped
    numerator = _horner(_ERF_ALPHA, x2, np.empty_like(x2))
    numerator *= clipped
    denominator = _horner(_ERF_BETA, x2, clipped)
    return np.divide(numerator, denominator, out=clipped)


def _horner(coefficients, x2, out):
    """Σ_k c_k x2^(n−k) by Horner's rule, into `out`."""
    np.multiply(x2, coefficients[0], out=out)
    out += coefficients[1]
    for c in coefficients[2:]:
        out *= x2
        out += c
    return out


def _normal_cdf(x):
    """Φ(x) = ½(1 + erf(x/√2)), in a new array. float32 takes `erf_float32` from SMALL entries up:
    below, as in a decoding step's (1, 512) hidden layer, its ~25 passes cost more in NumPy calls
    than SciPy's erf costs in all (512 entries: 12.4 µs against 2.8)."""
    z = x * _SQRT_HALF
    cdf = erf(z, out=z) if x.dtype == np.float64 or x.size < SMALL else erf_float32(z, out=z)
    cdf += 1
    cdf *= 0.5
    return cdf


def _normal_pdf(x):
    """φ(x) = e^(−x²/2) / √(2π), in a new array; x clipped so that x² cannot overflow (φ(±100)
    is 0 anyway)."""
    density = np.clip(x, -_SATURATED, _SATURATED)
    np.square(density, out=density)
    density *= -0.5
    np.exp(density, out=density)
    density *= _INV_SQRT_2PI
    return density


def _gelu_exact(x):
    cdf = _normal_cdf(x)
    cdf *= x
    return cdf


def _gelu_exact_slope(x, y):
    """Φ(x) + x φ(x), with Φ(x) read off the output y (`_cdf_from_output`); x, y as stored."""
    cdf = widen(_cdf_from_output(x, y))
    x = widen(x)
    slope = _normal_pdf(x)
    slope *= x
    slope += cdf
    return slope


def _cdf_from_output(x, y):
    """Φ(x) read off GELU's output y = x Φ(x) as y / x: one division, where computing Φ again
    takes the erf's ~25 passes. In x's own dtype: where |x| is below its smallest normal number
    (x = 0 included) y is subnormal or zero, and Φ(x) = ½ to the last digit."""
    with np.errstate(divide="ignore", invalid="ignore"):                # 0 / 0, replaced below
        cdf = y / x
    cdf[np.abs(x) < np.finfo(x.dtype).tiny] = 0.5
    return cdf


def _tanh_u(x):
    """tanh u with u = √(2/π)(x + 0.044715 x³); x clipped so that x³ cannot overflow."""
    x_c = np.clip(x, -_SATURATED, _SATURATED)
    return np.tanh(_TANH_SCALE * x_c * (1 + _TANH_CUBIC * x_c * x_c)), x_c


def _gelu_tanh(x):
    return 0.5 * x * (1 + _tanh_u(x)[0])


def _gelu_tanh_slope(x, y):
    """The tanh form's slope from x alone (y unused): tanh is one cheap pass, and ½(1 − t²) read
    off y, as 2 Φ̃ (1 − Φ̃) with Φ̃ = y / x, would lose digits where t nears ±1."""
    t, x_c = _tanh_u(widen(x))
    du_dx = _TANH_SCALE * (1 + 3 * _TANH_CUBIC * x_c * x_c)
    return 0.5 * (1 + t) + 0.5 * x_c * (1 - t * t) * du_dx


_GELU_FORMS = {"none": (_gelu_exact, _gelu_exact_slope), "tanh": (_gelu_tanh, _gelu_tanh_slope)}


class GELU(Function):
    """x Φ(x), exact (`approximate="none"`) or with the tanh approximation (`"tanh"`), as
    PyTorch's `F.gelu(x, approximate=...)`. VJP: g times the derivative of the chosen form; the
    exact form reads its Φ(x) off the output, y / x, instead of computing the erf again.
    float16 x: computed in float32 (SciPy's erf has no float16 loop), stored in float16. Both
    directions run a block of entries at a time (autograd.blocks): the erf's ~25 passes and the
    slope's temporaries then stay in the cache."""

    def forward(self, x, approximate="none"):
        value, self.slope = _GELU_FORMS[approximate]
        y = in_blocks(lambda x_: value(widen(x_)), x, dtype=x.dtype)
        self.save_for_backward(x, y)              # y is the next op's input: the graph keeps it anyway
        return y

    def backward(self, g):
        x, y = self.saved
        slope_times = lambda g_, x_, y_: g_ * self.slope(x_, y_).astype(g.dtype, copy=False)   # noqa: E731
        return (in_blocks(slope_times, g, x, y, dtype=g.dtype),)


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
    """The Gaussian error linear unit x Φ(x); `approximate` is "none" (erf) or "tanh"."""
    if approximate not in _GELU_FORMS:
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return GELU.apply(as_tensor(x), approximate=approximate)


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
