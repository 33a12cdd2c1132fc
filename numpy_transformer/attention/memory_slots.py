"""Memory-augmented attention (architecture notes, §Cross-Attention Variants):

    K = [Z W_k; M_k],    V = [Z W_v; M_v]          M_k, M_v ∈ ℝ^{m × d}, learned

m learned key/value slots appended to the keys and values of the sequence Z (the encoder
output in the notes' cross-attention, X itself in a self-attention). The slots live in the
projected space, beside Z W_k and Z W_v: they are keys and values themselves, not token vectors
that W_k, W_v would project (Sukhbaatar et al. 2019's "persistent memory"; PyTorch's
`add_bias_kv` is the case m = 1). Per head they split like the projections, eq. (3): head h
holds columns (h−1)k … hk of M_k and M_v, so each head has m slots of width d_k.

Every query may attend to every slot: the mask gets m True columns, T5's relative position
bias m zero columns (a slot has no position). A query whose sequence keys are all masked
therefore still attends to the slots, with weights summing to 1 over them. With a key/value
cache the slots are not cached: the cache holds the sequence's keys and values, and the slots
are appended at every call, so decoding step by step equals the full computation.
"""
import numpy as np

from autograd import concatenate
from numpy_transformer.masks import boolean_mask


def append_memory_slots(K, V, slots_k, slots_v):
    """[K; M_k], [V; M_v] along the positions: K, V (batch, heads, n_k, d_k) and the slots of
    every head, slots_k, slots_v (heads, m, d_k) → (batch, heads, n_k + m, d_k) each."""
    batch = np.zeros((K.shape[0], 1, 1, 1), dtype=K.dtype)      # the slots broadcast over the batch;
    slots_k, slots_v = slots_k + batch, slots_v + batch         # the VJP sums the batch's gradients
    return concatenate([K, slots_k], axis=-2), concatenate([V, slots_v], axis=-2)


def memory_mask(mask, n_keys, n_slots):
    """A boolean mask broadcastable to (…, n_q, n_keys), with n_slots True columns appended:
    (…, n_q, n_keys + n_slots). None stays None (every key and slot allowed)."""
    if mask is None:
        return None
    mask = boolean_mask(mask)
    if mask.ndim == 0 or mask.shape[-1] not in (1, n_keys):
        raise ValueError(f"attention: mask of shape {mask.shape} does not cover the n_k={n_keys} keys "
                         f"(…, n_q, n_k) its memory slots are appended to")
    leading = mask.shape[:-1]
    return np.concatenate([np.broadcast_to(mask, (*leading, n_keys)), np.ones((*leading, n_slots), bool)], axis=-1)


def memory_bias(bias, n_keys, n_slots):
    """T5's relative position bias (…, n_q, n_keys) with n_slots zero columns appended (the
    slots have no position), a Tensor (…, n_q, n_keys + n_slots); None stays None."""
    if bias is None:
        return None
    if bias.shape[-1] != n_keys:
        raise ValueError(f"attention: bias of shape {bias.shape} does not cover the n_k={n_keys} keys "
                         f"(…, n_q, n_k) its memory slots are appended to")
    zeros = np.zeros((*bias.shape[:-1], n_slots), dtype=bias.dtype)
    return concatenate([bias, zeros], axis=-1)
