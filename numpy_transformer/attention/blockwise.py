"""Exact attention block by block with an online softmax (FlashAttention's algorithm): eq. (5)
without ever holding the n × n weights.

The keys are cut into blocks of `block_size`. Each block's scores S_b = Q K_bᵀ / √d (all
queries against B keys: n × B numbers) update three running quantities per query row:

    m ← max(m, rowmax S_b)                                    the running maximum
    ℓ ← ℓ · e^{m_old − m} + rowsum e^{S_b − m}                 the running Σ_j e^{s_ij − m}
    A ← A · e^{m_old − m} + e^{S_b − m} V_b                    the running Σ_j e^{s_ij − m} v_j

and at the end out = A / ℓ: exactly softmax(Q Kᵀ/√d) V, because rescaling by e^{m_old − m}
turns sums taken against an old maximum into sums against the new one (softmax(z − c) =
softmax(z), §1.2.3). Extra memory O(n · B); the loop runs over key blocks, never over tokens.

The backward pass recomputes instead of storing: it keeps q, k, v, the output O and the
per-row log-sum-exp L = m + log ℓ (n numbers), and for each block rebuilds
P_b = exp(S_b − L) (the exact weights of that block), then, with D_i = Σ_j dO_ij O_ij
(= Σ_j p_ij dP_ij, the row term of the softmax VJP s ⊙ (g − ⟨g, s⟩)):

    dV_b = P_bᵀ dO      dP_b = dO V_bᵀ      dS_b = P_b ⊙ (dP_b − D)
    dQ += dS_b K_b / √d      dK_b = dS_bᵀ Q / √d

Masked scores are −∞ (weight 0); a query with every key masked gets zeros (ℓ = 0), not NaN.
Causal: the block of keys j₀ … j₀ + B − 1 matters only to the queries i ≥ j₀, so it is
computed for those rows only (about half the work).
"""
import math

import numpy as np

from autograd.checks import checked_integer
from autograd.engine import Function
from autograd.precision import in_float32
from autograd.ops import unbroadcast
from numpy_transformer.attention.shape_checks import checked_qkv
from numpy_transformer.attention.scaled_dot_product import _check_mask


def blockwise_attention(q, k, v, block_size, causal=False, mask=None):
    """softmax(Q Kᵀ / √d_k) V computed block by block (exact, eq. (5) and (10)).

    q: (…, n_q, d_k), k: (…, n_k, d_k), v: (…, n_k, d_v) Tensors, leading axes broadcast;
    block_size: keys per block; causal: query i sees keys j ≤ i (needs n_q = n_k); mask:
    boolean broadcastable to (…, n_q, n_k), True where query i may attend to key j.
    Returns (…, n_q, d_v) with q's dtype.
    """
    name = "blockwise_attention"
    q, k, v, leading = checked_qkv(name, q, k, v, same_length=causal)
    block_size = checked_integer(f"{name}: block_size", block_size, low=1)
    if mask is not None:
        mask = _check_mask(mask, (*leading, q.shape[-2], k.shape[-2]))
    return BlockwiseAttention.apply(q, k, v, block_size=block_size, causal=causal, mask=mask)


class BlockwiseAttention(Function):
    """The fused op: online softmax forward, recomputing backward (module docstring)."""

    @in_float32
    def forward(self, q, k, v, block_size, causal, mask):
        leading = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        self.block_size, self.causal, self.scale = block_size, causal, 1 / math.sqrt(q.shape[-1])
        # a view of the mask with every axis full-size, so that its blocks can be sliced
        self.mask = None if mask is None else np.broadcast_to(mask, (*leading, q.shape[-2], k.shape[-2]))
        rows = (*leading, q.shape[-2], 1)
        m = np.full(rows, -np.inf, dtype=q.dtype)                      # running max
        total = np.zeros(rows, dtype=q.dtype)                          # running Σ e^{s − m}
        acc = np.zeros((*leading, q.shape[-2], v.shape[-1]), dtype=q.dtype)
        for first, keys in self._blocks(k.shape[-2]):
            scores = self._scores(q, k, first, keys)
            m_new = np.maximum(m[..., first:, :], scores.max(axis=-1, keepdims=True))
            shift = _finite(m_new)
            e = np.exp(scores - shift)
            rescale = np.exp(m[..., first:, :] - shift)
            total[..., first:, :] = total[..., first:, :] * rescale + e.sum(axis=-1, keepdims=True)
            acc[..., first:, :] = acc[..., first:, :] * rescale + e @ v[..., keys, :]
            m[..., first:, :] = m_new
        empty = total == 0                                             # every key masked
        out = acc / np.where(empty, 1, total)
        log_sum_exp = np.where(empty, 0, _finite(m) + np.log(np.where(empty, 1, total)))
        self.save_for_backward(q, k, v, out, log_sum_exp)
        return out

    @in_float32
    def backward(self, g):
        q, k, v, out, log_sum_exp = self.saved
        rowwise = np.sum(g * out, axis=-1, keepdims=True)              # D_i = Σ_j dO_ij O_ij
        dq = np.zeros((*g.shape[:-1], q.shape[-1]), dtype=q.dtype)
        dk_blocks, dv_blocks = [], []
        for first, keys in self._blocks(k.shape[-2]):
            p = np.exp(self._scores(q, k, first, keys) - log_sum_exp[..., first:, :])   # P_b, recomputed
            g_rows = g[..., first:, :]
            dv_blocks.append(np.swapaxes(p, -1, -2) @ g_rows)
            dS = p * (g_rows @ np.swapaxes(v[..., keys, :], -1, -2) - rowwise[..., first:, :])
            dq[..., first:, :] += dS @ k[..., keys, :] * self.scale
            dk_blocks.append(np.swapaxes(dS, -1, -2) @ q[..., first:, :] * self.scale)
        dk, dv = np.concatenate(dk_blocks, axis=-2), np.concatenate(dv_blocks, axis=-2)
        return unbroadcast(dq, q.shape), unbroadcast(dk, k.shape), unbroadcast(dv, v.shape)

    def _blocks(self, n_keys):
        """(first query row, key slice) per block; causal blocks start at their first key's row."""
        for start in range(0, n_keys, self.block_size):
            yield (start if self.causal else 0), slice(start, min(start + self.block_size, n_keys))

    def _scores(self, q, k, first, keys):
        """Q K_bᵀ / √d for query rows first…, masked (−∞) where the mask or causality forbids."""
        scores = (q[..., first:, :] @ np.swapaxes(k[..., keys, :], -1, -2)) * self.scale
        if self.causal:
            query = np.arange(first, q.shape[-2])[:, None]
            scores = np.where(np.arange(keys.start, keys.stop) <= query, scores, -np.inf)
        if self.mask is not None:
            scores = np.where(self.mask[..., first:, keys], scores, -np.inf)
        return scores


def _finite(m):
    """The running maximum with 0 where it is still −∞ (no key seen yet, or all masked), so
    that s − m never computes −∞ − (−∞)."""
    return np.where(np.isneginf(m), 0, m).astype(m.dtype)
