"""Softmax and log-softmax as fused primitives: the optimised forms of `softmax_composite` and
`log_softmax_composite` (autograd/functional/softmax.py, where eq. (8), its Jacobian and the VJP
s ⊙ (g − ⟨g, s⟩) of §1.2.3 are derived).

What differs from the plain forms: one Function per call instead of a chain of primitives, the
hand-derived VJP instead of autograd's, the exponentials normalised in place in one buffer, and
float16 inputs computed in float32 (`widen`) with the results rounded back to float16. The array
helpers serve the other fused forms too (the cross-entropy, the attention weights, the banded
attention) and the benchmarks' decoder without a graph.

Tested against the plain forms in tests/test_softmax.py (values and gradients, to rounding).
"""
import numpy as np

from autograd.engine import Function
from autograd.precision import widen


def row_max(x, axis):
    """max(x) along `axis` (kept as length 1), with 0 where the whole row is −inf, so that
    x − max never computes −inf − (−inf)."""
    peak = np.max(x, axis=axis, keepdims=True)
    peak[np.isneginf(peak)] = 0
    return peak


def nonzero(total):
    """A row sum of exponentials, with 1 in place of 0 (a fully masked row): 0/1 = 0, log 1 = 0."""
    total[total == 0] = 1
    return total


def softmax_array(x, axis=-1):
    """exp(x − max) / Σ exp(x − max) along `axis`, on plain arrays, in one buffer."""
    e = widen(x) - row_max(x, axis)
    np.exp(e, out=e)
    e /= nonzero(np.sum(e, axis=axis, keepdims=True))
    return e.astype(x.dtype, copy=False)


def softmax_vjp(s, g, axis=-1):
    """J_s g = s ⊙ (g − ⟨g, s⟩) along `axis`: the VJP of softmax at s, on plain arrays."""
    s_wide, g_wide = widen(s), widen(g)
    grad = g_wide - np.sum(g_wide * s_wide, axis=axis, keepdims=True)
    grad *= s_wide
    return grad.astype(g.dtype, copy=False)


def log_softmax_array(x, axis=-1):
    """x − max − log Σ exp(x − max) along `axis`, on plain arrays."""
    shifted = widen(x) - row_max(x, axis)
    return shifted - np.log(nonzero(np.sum(np.exp(shifted), axis=axis, keepdims=True)))


class FusedSoftmax(Function):
    """s = softmax(x) along `axis`. x: any shape; s: the same shape, each row summing to 1
    (0 for a fully masked row). VJP: s ⊙ (g − ⟨g, s⟩), the product J_s g with J_s = diag(s) − s sᵀ."""

    def forward(self, x, axis=-1):
        s = softmax_array(x, axis)
        self.axis = axis
        self.save_for_backward(s)
        return s

    def backward(self, g):
        (s,) = self.saved
        return (softmax_vjp(s, g, self.axis),)


class FusedLogSoftmax(Function):
    """log s = x − max − log Σ exp(x − max) along `axis`, exact where log(softmax(x)) would
    round s to 0 (log_softmax([1e4, −1e4]) = [0, −2e4]). VJP: ∂ log s_i/∂x_k = δ_ik − s_k, so
    the VJP is g − s Σg, with s = exp(log s)."""

    def forward(self, x, axis=-1):
        out = log_softmax_array(x, axis).astype(x.dtype, copy=False)
        self.axis = axis
        self.save_for_backward(out)
        return out

    def backward(self, g):
        (out,) = self.saved
        g_wide = widen(g)
        grad = g_wide - np.exp(widen(out)) * np.sum(g_wide, axis=self.axis, keepdims=True)
        return (grad.astype(g.dtype, copy=False),)
