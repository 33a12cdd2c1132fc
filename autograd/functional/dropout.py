"""Inverted dropout (thesis §1.2.1: "a dropout of 0.1 is applied to prevent overfitting").

In training every entry is kept with probability 1 − p and scaled up to keep the expectation:

    dropout(x) = x ⊙ m / (1 − p),    mᵢ ~ Bernoulli(1 − p) independently,
    E[dropout(x)] = x ⊙ E[m] / (1 − p) = x.

At evaluation it is the identity, so a trained model needs no rescaling. It is a composite: a
product with a constant mask through the engine's Mul, whose VJP g ⊙ m / (1 − p) sends no
gradient to the dropped entries. No new primitive is needed.
"""
import numpy as np

from autograd.precision import compute_dtype


def dropout(x, p, training, rng):
    """x ⊙ m / (1 − p) with a fresh mask m ~ Bernoulli(1 − p) drawn from `rng`, same shape as x.

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


def _scaled_mask(shape, dtype, p, rng):
    """m / (1 − p) in `dtype`: 1/(1 − p) where an entry is kept (probability 1 − p), 0 elsewhere.
    The uniform draws are in `dtype` too, so a float32 step makes no float64 array (float32 for
    float16, which NumPy's generators do not draw: the same masks as a float32 run)."""
    keep = rng.random(shape, dtype=compute_dtype(dtype)) < 1 - p
    scale = 0.0 if p == 1 else 1 / (1 - p)
    return keep.astype(dtype) * np.asarray(scale, dtype=dtype)
