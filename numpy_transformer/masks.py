"""Attention masks: which keys each query may attend to (thesis §1.2.5, eq. (10)).

A mask here is a boolean array, True where a query may attend to a key, broadcastable to the
scores' shape (batch, heads, n_queries, n_keys). Attention sets the scores where it is False to
−∞, so their softmax weights are exactly 0; `additive_mask` gives the same information as the
thesis's matrix M (0 where allowed, −∞ elsewhere), added to the scores in eq. (10):

    MaskedAttention(Q, K, V) = softmax(M + Q Kᵀ / √k) V.                           (10)

| attention in Figure 2         | mask                                  | shape                      |
|-------------------------------|---------------------------------------|----------------------------|
| encoder self-attention        | source padding                        | (batch, 1, 1, n_src)       |
| decoder masked self-attention | target padding and causal (M)         | (batch, 1, n_tgt, n_tgt)   |
| decoder cross-attention       | source padding                        | (batch, 1, 1, n_src)       |

Only keys are masked: the output rows of padded queries are computed and then ignored (the
loss skips padding). (The architecture notes print the cases of the causal mask swapped, 0 for
i < j; the thesis's M is right: −∞ above the diagonal, where j > i.)
"""
import numpy as np

from autograd.checks import checked_token_ids


def causal_mask(n):
    """(n, n) boolean, True on and below the diagonal: query i may attend to keys j ≤ i.

    The pattern of the thesis's M (eq. (10)): its zeros are the True entries, its −∞ the False.
    """
    if n < 0:
        raise ValueError(f"causal_mask: n must be non-negative, got {n}")
    return np.tril(np.ones((n, n), dtype=bool))


def additive_mask(allowed, dtype=np.float32):
    """The thesis's M from a boolean mask: 0 where `allowed`, −∞ elsewhere; same shape."""
    return np.where(boolean_mask(allowed, "allowed"), 0.0, -np.inf).astype(dtype)


def padding_mask(ids, pad_id):
    """(batch, 1, 1, n) boolean, True at real tokens: every query may attend to every key
    that is not padding. ids: integer array (batch, n); pad_id None: a vocabulary without
    padding (GPT-2's), every token real."""
    ids = checked_token_ids("ids", ids, ndim=2)
    real = np.ones(ids.shape, dtype=bool) if pad_id is None else ids != pad_id
    return real[:, None, None, :]


def self_attention_mask(ids, pad_id, causal=False):
    """Mask of a self-attention over `ids` (batch, n): padding keys masked; with `causal`
    also the future (keys j > query i), as in the decoder.

    Returns (batch, 1, 1, n) without `causal`, (batch, 1, n, n) with it.
    """
    mask = padding_mask(ids, pad_id)
    return mask & causal_mask(mask.shape[-1]) if causal else mask


def cross_attention_mask(src_ids, pad_id):
    """Mask of the decoder's cross-attention on the encoder output: every target query may
    attend to every real source token. src_ids (batch, n_src) → (batch, 1, 1, n_src)."""
    return padding_mask(src_ids, pad_id)


def boolean_mask(mask, name="mask"):
    """`mask` as a boolean array; a TypeError for any other dtype (an additive 0/−∞ mask passed
    where a boolean one is expected would otherwise be silently misread)."""
    mask = np.asarray(getattr(mask, "data", mask))
    if mask.dtype != bool:
        raise TypeError(f"{name} must be a boolean array (True = may attend), got dtype {mask.dtype}")
    return mask


def pad(sequences, pad_id):
    """(len(sequences), longest) int64 array, each row a sequence of ids followed by `pad_id`s:
    the padded batch whose [PAD] positions `padding_mask` then hides."""
    out = np.full((len(sequences), max(len(s) for s in sequences)), pad_id, dtype=np.int64)
    for row, sequence in zip(out, sequences):
        row[:len(sequence)] = sequence
    return out
