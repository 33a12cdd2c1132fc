"""Inverted dropout (thesis §1.2.1: "a dropout of 0.1 is applied to prevent overfitting").

In training every entry is kept with probability 1 − p and scaled up to keep the expectation:

    dropout(x) = x ⊙ m / (1 − p),    mᵢ ~ Bernoulli(1 − p) independently,
    E[dropout(x)] = x ⊙ E[m] / (1 − p) = x.

At evaluation it is the identity, so a trained model needs no rescaling. It is a composite: a
product with a constant mask through the engine's Mul, whose VJP g ⊙ m / (1 − p) sends no
gradient to the dropped entries. No new primitive is needed.

The masks come from 16-bit random draws, so the p they realise is p̃, p rounded to a multiple of
2⁻¹⁶ (`kept_fraction`; for p = 0.1, 1 − p̃ = 0.899994), and the kept entries are scaled by
1/(1 − p̃): the expectation stays exactly x. p = 0.5, 0.25 or 0.125 are their own p̃.
"""
import math

import numpy as np


def dropout(x, p, training, rng):
    """x ⊙ m / (1 − p̃) with a fresh mask m ~ Bernoulli(1 − p̃) drawn from `rng`, same shape as x
    (p̃: p to 2⁻¹⁶, see the module docstring).

    x: Tensor of any shape. p ∈ [0, 1]: the probability of dropping an entry (p = 1 drops all
    and gives zeros). `training` False, or p = 0, returns x itself (the same object, no graph
    node). rng: a numpy.random.Generator, required when `training` is True. The mask has
    x's dtype, so float32 stays float32.
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
    return x * _scaled_mask(x.shape, x.dtype, p, rng)


LEVELS = 1 << 16        # an entry is kept when its 16-bit draw is below (1 − p̃) · LEVELS


def kept_fraction(p):
    """1 − p̃, the probability that an entry is kept: 1 − p rounded to a multiple of 2⁻¹⁶ (so
    |p̃ − p| ≤ 2⁻¹⁷; p = 0.1 keeps 58,982 of the 65,536 values of a 16-bit draw, 0.899994)."""
    return round((1 - p) * LEVELS) / LEVELS


def _scaled_mask(shape, dtype, p, rng):
    """m / (1 − p̃) in `dtype`: 1/(1 − p̃) where an entry is kept, 0 elsewhere, so that
    E[x ⊙ m / (1 − p̃)] = x exactly. The draws are 16-bit integers, four from each 64-bit output
    of rng's bit generator (little-endian, the same masks on every machine): a mask costs one
    pass over a quarter of the random bits that float32 uniforms take, 0.33 against 0.83 ms for
    0.5 M entries (docs/performance.md). Dropout needs no finer p than 2⁻¹⁶."""
    size, kept = math.prod(shape), kept_fraction(p)
    if kept == 0:
        return np.zeros(shape, dtype)
    draws = rng.bit_generator.random_raw(-(-size // 4)).astype("<u8", copy=False).view("<u2")[:size]
    keep = draws.reshape(shape) <= np.uint16(kept * LEVELS - 1)
    return np.multiply(keep, np.asarray(1 / kept, dtype=dtype), dtype=dtype)
