"""Inverted dropout (thesis §1.2.1: "a dropout of 0.1 is applied to prevent overfitting").

In training every entry is kept with probability 1 − p and scaled up to keep the expectation:

    dropout(x) = x ⊙ m / (1 − p),    mᵢ ~ Bernoulli(1 − p) independently,
    E[dropout(x)] = x ⊙ E[m] / (1 − p) = x.

At evaluation it is the identity, so a trained model needs no rescaling. Its VJP is
g ⊙ m / (1 − p): no gradient reaches a dropped entry.

`Dropout` is that map as one primitive that keeps its mask as booleans, one byte an entry;
`dropout_composite` is the product with a constant float mask through the engine's Mul, which
keeps the mask in x's dtype, four bytes an entry in float32 (a gpt-small step keeps about 40 MB
of masks). The two give the same values and gradients bit for bit (tests/test_dropout.py):
x · 1 is exact, so (x ⊙ m) · s rounds once, as x · (m s) does.

The masks come from 16-bit random draws, so the p they realise is p̃, p rounded to a multiple of
2⁻¹⁶ (`kept_fraction`; for p = 0.1, 1 − p̃ = 0.899994), and the kept entries are scaled by
1/(1 − p̃): the expectation stays exactly x. p = 0.5, 0.25 or 0.125 are their own p̃.
"""
import math

import numpy as np

from autograd.plain_mode import is_composite
from autograd.engine import Function, as_tensor


def dropout(x, p, training, rng):
    """x ⊙ m / (1 − p̃) with a fresh mask m ~ Bernoulli(1 − p̃) drawn from `rng`, same shape as x
    (p̃: p to 2⁻¹⁶, see the module docstring).

    x: Tensor of any shape. p ∈ [0, 1]: the probability of dropping an entry (p = 1 drops all
    and gives zeros). `training` False, or p = 0, returns x itself (the same object, no graph
    node). rng: a numpy.random.Generator, required when `training` is True. float32 stays
    float32. Under `autograd.composite()`: `dropout_composite` with the same mask.
    """
    if not 0 <= p <= 1:
        raise ValueError(f"dropout: p must be in [0, 1], got {p}")
    if not training:
        return x
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"dropout: training needs rng, a numpy.random.Generator "
                         f"(e.g. np.random.default_rng(seed)), got {type(rng).__name__}")
    if p == 0:
        return x
    x, kept = as_tensor(x), kept_fraction(p)
    keep, scale = _keep_mask(x.shape, kept, rng), 0.0 if kept == 0 else 1 / kept
    if is_composite():
        return dropout_composite(x, keep, scale)
    return Dropout.apply(x, keep=keep, scale=scale)


def dropout_composite(x, keep, scale):
    """x ⊙ (m s) through the engine's Mul, with the float mask m s in x's dtype (m: `keep`)."""
    return x * np.multiply(keep, np.asarray(scale, dtype=x.dtype), dtype=x.dtype)


class Dropout(Function):
    """y = x ⊙ m · s with m the boolean mask `keep` and s = 1/(1 − p̃); VJP g ⊙ m · s. Keeps the
    mask as booleans. x · m is exact (m is 0 or 1), so y rounds once, as x ⊙ (m s) does."""

    def forward(self, x, keep, scale):
        self.save_for_backward(keep)
        self.scale = scale
        return self.masked(x, keep)

    def backward(self, g):
        (keep,) = self.saved
        return (self.masked(g, keep),)

    def masked(self, array, keep):
        out = np.multiply(array, keep, dtype=array.dtype)
        out *= np.asarray(self.scale, dtype=array.dtype)
        return out


LEVELS = 1 << 16        # an entry is kept when its 16-bit draw is below (1 − p̃) · LEVELS


def kept_fraction(p):
    """1 − p̃, the probability that an entry is kept: 1 − p rounded to a multiple of 2⁻¹⁶ (so
    |p̃ − p| ≤ 2⁻¹⁷; p = 0.1 keeps 58,982 of the 65,536 values of a 16-bit draw, 0.899994)."""
    return round((1 - p) * LEVELS) / LEVELS


def _keep_mask(shape, kept, rng):
    """The boolean mask m: True where an entry is kept, with probability `kept` = 1 − p̃. The draws
    are 16-bit integers, four from each 64-bit output of rng's bit generator (little-endian, the
    same masks on every machine): a mask costs one pass over a quarter of the random bits that
    float32 uniforms take, 0.33 against 0.83 ms for 0.5 M entries (docs/performance.md). Dropout
    needs no finer p than 2⁻¹⁶. `kept` = 0 (p = 1) draws nothing."""
    if kept == 0:
        return np.zeros(shape, dtype=bool)
    size = math.prod(shape)
    draws = rng.bit_generator.random_raw(-(-size // 4)).astype("<u8", copy=False).view("<u2")[:size]
    return draws.reshape(shape) <= np.uint16(kept * LEVELS - 1)
