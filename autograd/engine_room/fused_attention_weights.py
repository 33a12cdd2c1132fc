"""The attention weights of eqs. (6) and (10) as one fused primitive: the optimised form of
`attention_weights_composite` (numpy_transformer/attention/scaled_dot_product.py, where the
weights are computed step by step from the engine's ops).

The op is generic, which is why it lives in the engine room: a softmax over the last axis of the
scaled products of two arrays, with an optional additive bias and a boolean mask; it knows
nothing of heads, layers or caches (those stay in numpy_transformer/attention/).

What differs from the plain form: the scores, the mask and the softmax are one Function with one
buffer instead of five ops, each keeping its own array of the scores' size alive until backward;
the VJP is derived by hand (below); float16 q and k are computed in float32 (the architecture
notes' "attention weights: FP32"), the weights and the gradients stored in float16
(autograd/precision.py). The weights stay a Tensor of the graph either way, so
MultiHeadAttention can keep them, pass them through its hooks and dropout, and multiply V with
the engine's `@`.

Tested against the plain form in tests/test_attention.py (values and gradients, to rounding).
"""
import math

import numpy as np

from autograd.engine import Function
from autograd.engine_room.fused_softmax import softmax_array, softmax_vjp
from autograd.ops import unbroadcast
from autograd.precision import widen


def fused_attention_weights(q, k, allowed=None, bias=None):
    """softmax(M + (Q Kᵀ + R) / √d_k) as one `FusedAttentionWeights`: q (..., n_q, d_k) and
    k (..., n_k, d_k) Tensors, `allowed` a boolean array or None, `bias` R a Tensor or None, all
    broadcastable to (..., n_q, n_k) → (..., n_q, n_k)."""
    biases = () if bias is None else (bias,)
    return FusedAttentionWeights.apply(q, k, *biases, allowed=allowed)


class FusedAttentionWeights(Function):
    """P = softmax(M + (Q Kᵀ + R) / √d_k), eqs. (6) and (10), fused. q: (..., n_q, d_k),
    k: (..., n_k, d_k), an optional bias R broadcastable to (..., n_q, n_k) (T5's relative
    positions), `allowed`: a boolean mask broadcastable to (..., n_q, n_k), True where query i may
    attend to key j (or None). Masked weights are exactly 0; a row with no allowed key is all zeros.

    VJP, with G = ∂L/∂P and S = (Q Kᵀ + R) / √d_k: the softmax VJP of §1.2.3 row by row gives
    ∂L/∂S = P ⊙ (G − ⟨G, P⟩) (0 at masked entries, where P = 0), and S is a sum of a product
    and R, so

        ∂L/∂Q = (∂L/∂S) K / √d_k,    ∂L/∂K = (∂L/∂S)ᵀ Q / √d_k,    ∂L/∂R = (∂L/∂S) / √d_k,

    summed over the leading axes that were broadcast.
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
