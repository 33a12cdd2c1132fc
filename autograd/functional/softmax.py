"""Softmax (thesis eq. (8)) and log-softmax along one axis, fused and composite.

    s_i = exp(z_i) / Σ_j exp(z_j)                                     (8)

Its Jacobian (thesis §1.2.3) is

    ∂s_i/∂z_k = s_i (δ_ik − s_k),     i.e.  J_s = diag(s) − s sᵀ,

symmetric, so the VJP is J_s g = s ⊙ g − s ⟨s, g⟩ = s ⊙ (g − ⟨g, s⟩): O(n) per row, with no
n × n matrix. The fused `Softmax` uses that formula; `softmax_composite` is built from exp, sum
and div, and autograd derives the same gradient by itself. `softmax_jacobian` forms J_s
explicitly, for the tests and for looking at it.

Stability: softmax(z − c) = softmax(z) for any c constant along the axis, so both versions
subtract the row maximum (exp never overflows; the largest term is exp(0) = 1). A fully masked
row (every entry −inf, as in a padded attention row) has no maximum to subtract: it takes 0
instead, every exp is 0, the sum of 0 is replaced by 1, and the row comes out as zeros, not NaN.

float16 inputs are computed in float32 and the results rounded to float16 (autograd/precision.py):
the sum of a row of exponentials, and ⟨g, s⟩ with a loss-scaled g, would lose digits or overflow.
"""
import numpy as np

from autograd.plain_mode import is_composite
from autograd.engine import Function, as_tensor
from autograd.ops import masked_fill
from autograd.precision import widen


def _row_max(x, axis):
    """max(x) along `axis` (kept as length 1), with 0 where the whole row is −inf, so that
    x − max never computes −inf − (−inf)."""
    peak = np.max(x, axis=axis, keepdims=True)
    peak[np.isneginf(peak)] = 0
    return peak


def _nonzero(total):
    """A row sum of exponentials, with 1 in place of 0 (a fully masked row): 0/1 = 0, log 1 = 0."""
    total[total == 0] = 1
    return total


def softmax_array(x, axis=-1):
    """exp(x − max) / Σ exp(x − max) along `axis`, on plain arrays, in one buffer (the fused
    attention weights of numpy_transformer.attention use it too)."""
    e = widen(x) - _row_max(x, axis)
    np.exp(e, out=e)
    e /= _nonzero(np.sum(e, axis=axis, keepdims=True))
    return e.astype(x.dtype, copy=False)


def softmax_vjp(s, g, axis=-1):
    """J_s g = s ⊙ (g − ⟨g, s⟩) along `axis`: the VJP of softmax at s, on plain arrays."""
    s_wide, g_wide = widen(s), widen(g)
    grad = g_wide - np.sum(g_wide * s_wide, axis=axis, keepdims=True)
    grad *= s_wide
    return grad.astype(g.dtype, copy=False)


def log_softmax_array(x, axis=-1):
    """x − max − log Σ exp(x − max) along `axis`, on plain arrays (the cross-entropy uses it too)."""
    shifted = widen(x) - _row_max(x, axis)
    return shifted - np.log(_nonzero(np.sum(np.exp(shifted), axis=axis, keepdims=True)))


class Softmax(Function):
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


class LogSoftmax(Function):
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


def softmax(x, axis=-1):
    """Thesis eq. (8) along `axis`, fused: the hand-derived VJP s ⊙ (g − ⟨g, s⟩).
    Under `autograd.composite()`: `softmax_composite`."""
    if is_composite():
        return softmax_composite(x, axis)
    return Softmax.apply(as_tensor(x), axis=axis)


def log_softmax(x, axis=-1):
    """log softmax(x) along `axis`, fused; finite for logits of any size (a fully masked row
    gives −inf, the log of its zeros)."""
    return LogSoftmax.apply(as_tensor(x), axis=axis)


def softmax_composite(x, axis=-1):
    """Thesis eq. (8) from primitives only (exp, sum, div, where); autograd derives the VJP.

    The maximum is detached: softmax does not change when a constant is subtracted from a row,
    so its gradient through the maximum is zero anyway (every row of J_s sums to 0)."""
    x = as_tensor(x)
    peak = x.detach().max(axis=axis, keepdims=True)
    peak = masked_fill(peak, np.isneginf(peak.data), 0.0)
    e = (x - peak).exp()
    total = e.sum(axis=axis, keepdims=True)
    return e / masked_fill(total, total.data == 0, 1.0)


def softmax_jacobian(s):
    """J_s = diag(s) − s sᵀ (thesis §1.2.3) of softmax outputs s along the last axis.

    s: array or Tensor of shape (..., n). Returns a NumPy array of shape (..., n, n) with
    J[..., i, k] = ∂s_i/∂z_k = s_i (δ_ik − s_k). It is zero at a one-hot s (thesis eq. (9))."""
    s = np.asarray(getattr(s, "data", s))
    column = s[..., :, None]
    return column * (np.eye(s.shape[-1], dtype=s.dtype) - s[..., None, :])
