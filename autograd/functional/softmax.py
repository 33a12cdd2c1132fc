"""Softmax (thesis eq. (8)) and log-softmax along one axis: the plain forms.

    s_i = exp(z_i) / Σ_j exp(z_j)                                     (8)
    log s_i = z_i − log Σ_j exp(z_j)

z: any shape, the sum running along `axis`; s has z's shape. Its Jacobian (thesis §1.2.3) is

    ∂s_i/∂z_k = s_i (δ_ik − s_k),     i.e.  J_s = diag(s) − s sᵀ,

symmetric, so the VJP is J_s g = s ⊙ g − s ⟨s, g⟩ = s ⊙ (g − ⟨g, s⟩): O(n) per row, with no
n × n matrix. `softmax_jacobian` forms J_s explicitly, for the tests and for looking at it. For
log-softmax, ∂ log s_i/∂z_k = δ_ik − s_k, so its VJP is g − s Σ g.

`softmax_composite` and `log_softmax_composite` below write the formulas with the engine's
primitives (exp, sum, div, log) and let autograd derive those VJPs. `F.softmax` and
`F.log_softmax` run them inside `autograd.plain()`; otherwise they run the fused forms of
autograd/engine_room/fused_softmax.py, which compute the same values in one buffer and apply the
VJPs above by hand (tests/test_softmax.py compares the two).

Stability: softmax(z − c) = softmax(z) for any c constant along the axis, so every form
subtracts the row maximum (exp never overflows; the largest term is exp(0) = 1). A fully masked
row (every entry −inf, as in a padded attention row) has no maximum to subtract: it takes 0
instead, every exp is 0, the sum of 0 is replaced by 1, and the row comes out as zeros (its log
as −inf), not NaN.
"""
import numpy as np

from autograd.plain_mode import is_plain
from autograd.engine import as_tensor
from autograd.engine_room.fused_softmax import FusedLogSoftmax, FusedSoftmax
from autograd.ops import masked_fill


def softmax_composite(x, axis=-1):
    """Thesis eq. (8) from primitives only (exp, sum, div, where); autograd derives the VJP."""
    e = _minus_row_max(as_tensor(x), axis).exp()
    return e / _one_for_zero(e.sum(axis=axis, keepdims=True))


def log_softmax_composite(x, axis=-1):
    """log softmax(x) = (x − max) − log Σ exp(x − max) from primitives; exact where
    log(softmax(x)) would round s to 0 (log_softmax([1e4, −1e4]) = [0, −2e4])."""
    shifted = _minus_row_max(as_tensor(x), axis)
    return shifted - _one_for_zero(shifted.exp().sum(axis=axis, keepdims=True)).log()


def _minus_row_max(x, axis):
    """x − max(x) along `axis`, 0 taken for the maximum of a row that is all −inf.

    The maximum is detached: softmax does not change when a constant is subtracted from a row,
    so its gradient through the maximum is zero anyway (every row of J_s sums to 0)."""
    peak = x.detach().max(axis=axis, keepdims=True)
    return x - masked_fill(peak, np.isneginf(peak.data), 0.0)


def _one_for_zero(total):
    """A row sum of exponentials with 1 in place of 0 (a fully masked row): 0/1 = 0, log 1 = 0."""
    return masked_fill(total, total.data == 0, 1.0)


def softmax_jacobian(s):
    """J_s = diag(s) − s sᵀ (thesis §1.2.3) of softmax outputs s along the last axis.

    s: array or Tensor of shape (..., n). Returns a NumPy array of shape (..., n, n) with
    J[..., i, k] = ∂s_i/∂z_k = s_i (δ_ik − s_k). It is zero at a one-hot s (thesis eq. (9))."""
    s = np.asarray(getattr(s, "data", s))
    column = s[..., :, None]
    return column * (np.eye(s.shape[-1], dtype=s.dtype) - s[..., None, :])


def softmax(x, axis=-1):
    """Thesis eq. (8) along `axis`: x (any shape) → s (the same shape). `softmax_composite`
    inside `autograd.plain()`, else the engine room's `FusedSoftmax`."""
    if is_plain():
        return softmax_composite(x, axis)
    return FusedSoftmax.apply(as_tensor(x), axis=axis)


def log_softmax(x, axis=-1):
    """log softmax(x) along `axis`; finite for logits of any size (a fully masked row gives −inf,
    the log of its zeros). `log_softmax_composite` inside `autograd.plain()`, else the engine
    room's `FusedLogSoftmax`."""
    if is_plain():
        return log_softmax_composite(x, axis)
    return FusedLogSoftmax.apply(as_tensor(x), axis=axis)
