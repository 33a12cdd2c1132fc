"""Scaled dot-product attention, thesis eqs. (5), (6) and (10).

    Attention(Q, K, V) = softmax(Q Kᵀ / √k) V                                        (5)
    weights            = softmax(Q Kᵀ / √k)                                          (6)
    MaskedAttention    = softmax(M + Q Kᵀ / √k) V                                    (10)

with k = d_k the width of queries and keys. Eqs. (5) and (6) of the thesis print the divisor
as k: a typo, the text of §1.2.2, §1.2.3 ("the division by √k") and eq. (10) all divide by √k,
as does the paper. Dividing by √k keeps the scores at unit scale when the entries of q and k
have unit scale (a dot product of k such terms has variance k), which keeps the softmax out
of the saturated corners where its Jacobian vanishes (§1.2.3, eq. (9)).

`attention_weights_composite` computes the weights of eqs. (6) and (10) step by step with the
engine's ops, and autograd derives their gradient; `scaled_dot_product_attention` runs it inside
`autograd.plain()`. Otherwise it runs the engine room's `FusedAttentionWeights`
(autograd/engine_room/fused_attention_weights.py), the same weights as one primitive with a
hand-derived VJP (tests/test_attention.py compares the two).
"""
import math

import numpy as np

import autograd.functional as F
from autograd import masked_fill
from autograd.plain_mode import is_plain
from autograd.engine import as_tensor
from autograd.engine_room.fused_attention_weights import fused_attention_weights
from numpy_transformer.masks import boolean_mask


def scaled_dot_product_attention(q, k, v, mask=None, dropout=None, bias=None):
    """softmax(Q Kᵀ / √d_k), masked, times V (eqs. (5), (6), (10)). Returns (output, weights).

    q: (..., n_q, d_k), k: (..., n_k, d_k), v: (..., n_k, d_v); leading axes broadcast.
    mask: boolean, True where query i may attend to key j, broadcastable to (..., n_q, n_k).
    As in Figure 6 it acts after the scaling: masked scores become −∞ (adding the thesis's M),
    so their weights are exactly 0. A query with every key masked gets zero weights and a zero
    output, not NaN. `dropout` (a callable such as a Dropout module) acts on the weights
    before they multiply V; the returned weights are the ones before dropout. `bias` (a Tensor
    broadcastable to (..., n_q, n_k), e.g. T5's relative position bias R) is added to the
    scores before the scaling: softmax((Q Kᵀ + R)/√d_k). The weights come from
    `attention_weights_composite` inside `autograd.plain()`, else from the fused
    `FusedAttentionWeights`.

    output: (..., n_q, d_v); weights: (..., n_q, n_k), each unmasked row summing to 1.
    """
    q, k, v = as_tensor(q), as_tensor(k), as_tensor(v)
    scores_shape = _check_shapes(q.shape, k.shape, v.shape)
    allowed = None if mask is None else _check_mask(mask, scores_shape)
    bias = None if bias is None else _check_bias(as_tensor(bias, q.dtype), scores_shape)
    attention_weights = attention_weights_composite if is_plain() else fused_attention_weights
    weights = attention_weights(q, k, allowed, bias)                          # eqs. (6), (10)
    attended = weights if dropout is None else dropout(weights)
    return attended @ v, weights                                              # eq. (5)


def attention_weights_composite(q, k, mask=None, bias=None):
    """softmax(M + (Q Kᵀ + R) / √d_k) of eqs. (6) and (10) from the engine's ops (R the bias, or
    none; M −∞ where `mask` is False); autograd derives the VJP. q: (..., n_q, d_k),
    k: (..., n_k, d_k) → (..., n_q, n_k)."""
    q, k = as_tensor(q), as_tensor(k)
    scores = q @ k.swapaxes(-1, -2)                                           # Q Kᵀ
    if bias is not None:
        scores = scores + bias                                                # + R
    scores = scores / math.sqrt(q.shape[-1])                                  # / √d_k
    if mask is not None:
        scores = masked_fill(scores, ~boolean_mask(mask), -np.inf)            # + M: −∞ where masked
    return F.softmax(scores, axis=-1)


def _check_shapes(q_shape, k_shape, v_shape):
    """The shape of the scores, (..., n_q, n_k), or a ValueError naming q, k, v and their shapes."""
    shapes = lambda: f"q {q_shape}, k {k_shape}, v {v_shape}"                      # noqa: E731 (on error only)
    if min(len(q_shape), len(k_shape), len(v_shape)) < 2:
        raise ValueError(f"attention: q, k, v need at least 2 axes (…, seq, dim), got {shapes()}")
    if q_shape[-1] != k_shape[-1]:
        raise ValueError(f"attention: q and k must have the same last dimension d_k, got {shapes()}")
    if k_shape[-2] != v_shape[-2]:
        raise ValueError(f"attention: k and v must have the same number of positions n_k "
                         f"(axis -2), got {shapes()}")
    if q_shape[:-2] == k_shape[:-2] == v_shape[:-2]:
        return (*q_shape[:-2], q_shape[-2], k_shape[-2])
    try:
        batch = np.broadcast_shapes(q_shape[:-2], k_shape[:-2], v_shape[:-2])
    except ValueError:
        raise ValueError(f"attention: the leading (batch, head) axes of q, k, v do not broadcast, "
                         f"got {shapes()}") from None
    return (*batch, q_shape[-2], k_shape[-2])


def _check_bias(bias, scores_shape):
    _check_broadcasts("bias", bias.shape, scores_shape)
    return bias


def _check_mask(mask, scores_shape):
    mask = boolean_mask(mask)
    _check_broadcasts("mask", mask.shape, scores_shape)
    return mask


def _check_broadcasts(name, shape, scores_shape):
    try:
        fits = np.broadcast_shapes(shape, scores_shape) == scores_shape
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"attention: {name} of shape {shape} does not broadcast to the scores' shape "
                         f"{scores_shape} (…, n_q, n_k)")
