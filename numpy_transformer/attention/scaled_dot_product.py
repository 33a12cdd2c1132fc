"""Scaled dot-product attention, thesis eqs. (5), (6) and (10).

    Attention(Q, K, V) = softmax(Q Kᵀ / √k) V                                        (5)
    weights            = softmax(Q Kᵀ / √k)                                          (6)
    MaskedAttention    = softmax(M + Q Kᵀ / √k) V                                    (10)

with k = d_k the width of queries and keys. Eqs. (5) and (6) of the thesis print the divisor
as k: a typo, the text of §1.2.2, §1.2.3 ("the division by √k") and eq. (10) all divide by √k,
as does the paper. Dividing by √k keeps the scores at unit scale when the entries of q and k
have unit scale (a dot product of k such terms has variance k), which keeps the softmax out
of the saturated corners where its Jacobian vanishes (§1.2.3, eq. (9)).

The weights of eq. (6) with the mask of eq. (10) are one fused primitive, `AttentionWeights`,
with the hand-derived VJP below; `attention_weights_composite` builds them from the engine's
ops (transpose, @, /, masked_fill, softmax) and the tests check that both agree. The weights
stay a Tensor of the graph either way, so MultiHeadAttention can keep them (`last_weights`),
pass them through its `weights_hook` and dropout, and multiply V with the engine's `@`.
"""
import math

import numpy as np

import autograd.functional as F
from autograd import masked_fill
from autograd.plain_mode import is_composite
from autograd.engine import Function, as_tensor
from autograd.functional.softmax import softmax_array, softmax_vjp
from autograd.ops import unbroadcast
from autograd.precision import widen
from numpy_transformer.masks import boolean_mask


def scaled_dot_product_attention(q, k, v, mask=None, dropout=None, bias=None):
    """softmax(Q Kᵀ / √d_k), masked, times V (eqs. (5), (6), (10)). Returns (output, weights).

    q: (..., n_q, d_k), k: (..., n_k, d_k), v: (..., n_k, d_v); leading axes broadcast.
    mask: boolean, True where query i may attend to key j, broadcastable to (..., n_q, n_k).
    As in Figure 6 it acts after the scaling: masked scores become −∞ (adding the thesis's M),
    so their weights are exactly 0. A query with every key masked gets zero weights and a zero
    output, not NaN. `dropout` (a callable such as a Dropout module) acts on the weights
    before they multiply V; the returned weights are the ones before dropout. The weights come
    from the fused `AttentionWeights`, or under `autograd.composite()` from
    `attention_weights_composite`. `bias` (a Tensor broadcastable to (..., n_q, n_k), e.g. T5's
    relative position bias R) is added to the scores before the scaling: softmax((Q Kᵀ + R)/√d_k).

    output: (..., n_q, d_v); weights: (..., n_q, n_k), each unmasked row summing to 1.
    """
    q, k, v = as_tensor(q), as_tensor(k), as_tensor(v)
    scores_shape = _check_shapes(q.shape, k.shape, v.shape)
    allowed = None if mask is None else _check_mask(mask, scores_shape)
    biases = () if bias is None else (_check_bias(as_tensor(bias, q.dtype), scores_shape),)
    weights = attention_weights_composite(q, k, allowed, bias) if is_composite() else \
        AttentionWeights.apply(q, k, *biases, allowed=allowed)
    attended = weights if dropout is None else dropout(weights)
    return attended @ v, weights


def attention_weights_composite(q, k, mask=None, bias=None):
    """softmax(M + (Q Kᵀ + R) / √d_k) of eqs. (6) and (10) from the engine's ops (R the bias, or
    none); autograd derives the VJP. The same function as the fused `AttentionWeights` (the
    tests compare them)."""
    q, k = as_tensor(q), as_tensor(k)
    products = q @ k.swapaxes(-1, -2)
    scores = (products if bias is None else products + bias) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = masked_fill(scores, ~boolean_mask(mask), -np.inf)
    return F.softmax(scores, axis=-1)


class AttentionWeights(Function):
    """P = softmax(M + (Q Kᵀ + R) / √d_k), eqs. (6) and (10), fused. q: (..., n_q, d_k),
    k: (..., n_k, d_k), an optional bias R broadcastable to (..., n_q, n_k) (T5's relative
    positions), `allowed`: a boolean mask broadcastable to (..., n_q, n_k), True where query i may
    attend to key j (or None). Masked weights are exactly 0; a row with no allowed key is all zeros.

    VJP, with G = ∂L/∂P and S = (Q Kᵀ + R) / √d_k: the softmax VJP of §1.2.3 row by row gives
    ∂L/∂S = P ⊙ (G − ⟨G, P⟩) (0 at masked entries, where P = 0), and S is a sum of a product
    and R, so

        ∂L/∂Q = (∂L/∂S) K / √d_k,    ∂L/∂K = (∂L/∂S)ᵀ Q / √d_k,    ∂L/∂R = (∂L/∂S) / √d_k,

    summed over the leading axes that were broadcast. float16 inputs: the scores, the softmax and
    these gradients are computed in float32 (the notes' "attention weights: FP32"), the weights
    and the gradients stored in float16 (autograd/precision.py).
    """

    def forward(self, q, k, *bias, allowed=None):
        self.scale = math.sqrt(q.shape[-1])
        scores = widen(q) @ np.swapaxes(widen(k), -1, -2)              # float16 q, k: the scores in float32
        if bias:
            scores = scores + widen(bias[0])
            self.bias_shape = bias[0].shape
        scores /= self.scale
        if allowed is not None:
            np.copyto(scores, -np.inf, where=~allowed)
        weights = softmax_array(scores).astype(q.dtype, copy=False)
        self.save_for_backward(q, k, weights)
        return weights

    def backward(self, g):
        q, k, weights = self.saved
        grad_scores = softmax_vjp(weights, widen(g))                    # float32 for float16 weights
        grad_scores /= self.scale
        grad_q = unbroadcast(grad_scores @ widen(k), q.shape) if self.needs_input_grad[0] else None
        grad_k = unbroadcast(np.swapaxes(grad_scores, -1, -2) @ widen(q), k.shape) if self.needs_input_grad[1] else None
        grads = [grad_q, grad_k]
        if len(self.needs_input_grad) == 3:
            grads.append(unbroadcast(grad_scores, self.bias_shape) if self.needs_input_grad[2] else None)
        return tuple(None if grad is None else grad.astype(g.dtype, copy=False) for grad in grads)


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
