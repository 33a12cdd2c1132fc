"""GELU in float32 with a rational erf, a block at a time, its slope read off its output.

Replaces: `autograd.functional.activations.GELU`, the plain form x Φ(x) = ½x(1 + erf(x/√2))
with SciPy's erf and the VJP g ⊙ (Φ(x) + x φ(x)) (and its tanh approximation). Three changes:

- The erf. In float32 (and float16, widened) Φ takes `erf_float32`, Eigen's rational
  approximation x α(x²)/β(x²) on [−4, 4] (XLA's too), within 4.5e-7 of erf everywhere; float64,
  and float32 arrays under SMALL entries (where its ~25 NumPy passes cost more in calls than
  SciPy's one), keep SciPy's erf.
- Φ in backward. The exact form's slope reads Φ(x) off the forward's output as y / x, one
  division, where computing Φ again takes the erf's passes.
- Blocks. Both directions run a block of entries at a time (`autograd.engine_room.blocks`), so
  the erf's passes and the slope's temporaries stay in the cache.

tests/test_activations.py checks these forms against the plain ones (values and slopes within
the erf's bound in float32, to rounding in float64), the erf's bound on 1.4 M points, and that
the blocks change no value; docs/performance.md measures what each change saves.
"""
import math

import numpy as np
from scipy.special import erf

from autograd.engine import Function
from autograd.engine_room.blocks import BLOCK, in_blocks
from autograd.precision import widen

_SQRT_HALF = math.sqrt(0.5)
_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)
_TANH_SCALE, _TANH_CUBIC = math.sqrt(2 / math.pi), 0.044715
_SATURATED = 100.0  # beyond |x| = 100 both Φ and tanh u equal 0 or 1 to the last bit
SMALL = 4096        # float32 arrays this large or larger take erf_float32 (see _normal_cdf); at most
assert SMALL <= BLOCK // 2  # half a block, so every block of a large array (autograd.engine_room.blocks) takes it too


# erf(x) ≈ x α(x²) / β(x²) on [−4, 4], ±1 beyond (Eigen's generic_fast_erf_float, also XLA's):
# the coefficients of α (degree 6 in x², highest first) and β (degree 4).
_ERF_ALPHA = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
              -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02)
_ERF_BETA = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
             -1.42647390514189e-02)


def erf_float32(x, out=None):
    """erf of a float32 array as x α(x²) / β(x²), x clipped to [−4, 4] (where float32's erf is
    already ±1): within 4.5e-7 of the exact erf everywhere (tests/test_activations.py). Every
    step works in place on two buffers, so that its ~25 passes stay cheap. `out` (x itself is
    allowed) receives the result."""
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
    than SciPy's erf costs in all."""
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


def gelu_fast(x, approximate):
    """GELU of the Tensor x, exact (`approximate="none"`) or tanh (`"tanh"`): the engine room's
    form of `autograd.functional.gelu`, which checks `approximate`."""
    return FastGELU.apply(x, approximate=approximate)


class FastGELU(Function):
    """x Φ(x), exact (`approximate="none"`) or with the tanh approximation (`"tanh"`), as
    PyTorch's `F.gelu(x, approximate=...)`. VJP: g times the derivative of the chosen form; the
    exact form reads its Φ(x) off the output, y / x, instead of computing the erf again.
    float16 x: computed in float32 (SciPy's erf has no float16 loop), stored in float16. Both
    directions run a block of entries at a time (autograd.engine_room.blocks)."""

    def forward(self, x, approximate="none"):
        value, self.slope = _GELU_FORMS[approximate]
        y = in_blocks(lambda x_: value(widen(x_)), x, dtype=x.dtype)
        self.save_for_backward(x, y)              # y is the next op's input: the graph keeps it anyway
        return y

    def backward(self, g):
        x, y = self.saved
        slope_times = lambda g_, x_, y_: g_ * self.slope(x_, y_).astype(g.dtype, copy=False)   # noqa: E731
        return (in_blocks(slope_times, g, x, y, dtype=g.dtype),)
