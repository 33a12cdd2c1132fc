"""Inverted dropout (thesis §1.2.1: "a dropout of 0.1 is applied to prevent overfitting").

In training every entry is kept with probability 1 − p and scaled up to keep the expectation:

    dropout(x) = x ⊙ m / (1 − p),    mᵢ ~ Bernoulli(1 − p) independently,
    E[dropout(x)] = x ⊙ E[m] / (1 − p) = x.

At evaluation it is the identity, so a trained model needs no rescaling. Its VJP is
g ⊙ m / (1 − p): no gradient reaches a dropped entry.

The plain form below draws m as `rng.random(x.shape) >= p` and multiplies by the constant
m / (1 − p) through the engine's Mul, which derives the VJP. By default `dropout` runs the engine
room's form instead (`autograd.engine_room.dropout_masks`): the same map, with masks from 16-bit
draws (p rounded to a multiple of 2⁻¹⁶) kept as booleans by one primitive, `Dropout`. The two
draw different masks from one generator; given the same mask they give the same values and
gradients bit for bit (tests/test_dropout.py).
"""
import numpy as np

from autograd.engine import as_tensor
from autograd.engine_room.dropout_masks import dropout_16bit
from autograd.plain_mode import is_plain


def dropout(x, p, training, rng):
    """x ⊙ m / (1 − p) with a fresh mask m ~ Bernoulli(1 − p) drawn from `rng`, same shape as x.

    x: Tensor of any shape. p ∈ [0, 1]: the probability of dropping an entry (p = 1 drops all
    and gives zeros). `training` False, or p = 0, returns x itself (the same object, no graph
    node). rng: a numpy.random.Generator, required when `training` is True. float32 stays
    float32. Inside `autograd.plain()` the plain form below; otherwise the engine room's
    `dropout_16bit` (p rounded to a multiple of 2⁻¹⁶, see the module docstring).
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
    x = as_tensor(x)
    if not is_plain():
        return dropout_16bit(x, p, rng)
    keep = rng.random(x.shape) >= p                           # m ~ Bernoulli(1 − p)
    return dropout_composite(x, keep, 1 / (1 - p) if p < 1 else 0.0)      # p = 1 keeps nothing


def dropout_composite(x, keep, scale):
    """x ⊙ (m s) through the engine's Mul, the float mask m s in x's dtype (m: the boolean array
    `keep`, s: 1/(1 − p)); autograd derives the VJP g ⊙ (m s)."""
    return x * np.multiply(keep, np.asarray(scale, dtype=x.dtype), dtype=x.dtype)
