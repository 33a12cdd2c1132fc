"""Softmax within segments: the attention weights of a graph, thesis eq. (8) taken over each
node's incoming edges instead of over a row.

    α_e = exp(x_e) / Σ_{e′ : s(e′) = s(e)} exp(x_e′)

x holds one score per edge (and per head: x is (E, ...)), s(e) = `segments[e]` is the node the
edge points to. Each node's weights then sum to 1 over its incoming edges, as each row of
eq. (6) sums to 1 over its keys; nothing of size n × n is formed. The VJP is the softmax VJP of
§1.2.3 within each segment,

    ∂L/∂x_e = α_e (g_e − Σ_{e′ : s(e′) = s(e)} g_e′ α_e′),

and both sums over a segment are scatter-adds (`segment_sum_array`). `SegmentSoftmax` is the
fused op with that VJP; `segment_softmax_composite` is built from exp, a gather, `segment_sum`
and div, and autograd derives the same gradient.

Stability, as in softmax: each segment's maximum (np.maximum.at) is subtracted first. A segment
whose scores are all −∞ gets weights 0, not NaN (its maximum is taken as 0, its sum as 1).
"""
import numpy as np

from autograd.checks import checked_segments
from autograd.plain_mode import is_plain
from autograd.engine import Function, as_tensor
from autograd.ops import masked_fill, segment_sum
from autograd.ops.reductions import segment_sum_array
from autograd.precision import widen


def segment_max_array(x, segments, n_segments):
    """max of the rows of x (E, ...) within each segment, (n_segments, ...): 0 where a segment is
    empty or all −∞, so that x − max never computes −∞ − (−∞)."""
    peak = np.full((n_segments, *x.shape[1:]), -np.inf, dtype=x.dtype)
    np.maximum.at(peak, segments, x)
    peak[np.isneginf(peak)] = 0
    return peak


def segment_softmax_array(x, segments, n_segments):
    """exp(x − max) / Σ exp(x − max) within each segment, on plain arrays, in x's dtype."""
    wide = widen(x)
    e = np.exp(wide - segment_max_array(wide, segments, n_segments)[segments])
    total = segment_sum_array(e, segments, n_segments)
    total[total == 0] = 1
    return (e / total[segments]).astype(x.dtype, copy=False)


class SegmentSoftmax(Function):
    """α = softmax of x (E, ...) within each segment; VJP α ⊙ (g − Σ_segment g ⊙ α), gathered back
    to the edges."""

    def forward(self, x, segments, n_segments):
        alpha = segment_softmax_array(x, segments, n_segments)
        self.segments, self.n_segments = segments, n_segments
        self.save_for_backward(alpha)
        return alpha

    def backward(self, g):
        (alpha,) = self.saved
        g_wide, alpha_wide = widen(g), widen(alpha)
        inner = segment_sum_array(g_wide * alpha_wide, self.segments, self.n_segments)
        return ((alpha_wide * (g_wide - inner[self.segments])).astype(g.dtype, copy=False),)


def segment_softmax(x, segments, n_segments):
    """Softmax of the rows of x (E, ...) within each segment (segments: (E,) integers in
    [0, n_segments)): (E, ...), summing to 1 over each non-empty segment. Fused; inside
    `autograd.plain()`: `segment_softmax_composite`."""
    x = as_tensor(x)
    if is_plain():
        return segment_softmax_composite(x, segments, n_segments)
    segments = checked_segments("segment_softmax", segments, x.shape[0], n_segments)
    return SegmentSoftmax.apply(x, segments=segments, n_segments=n_segments)


def segment_softmax_composite(x, segments, n_segments):
    """The segment softmax from primitives (exp, a gather, segment_sum, div, where); the maximum
    is detached, as in `softmax_composite` (subtracting a constant per segment changes nothing)."""
    x = as_tensor(x)
    segments = checked_segments("segment_softmax", segments, x.shape[0], n_segments)
    e = (x - segment_max_array(x.data, segments, n_segments)[segments]).exp()
    total = segment_sum(e, segments, n_segments)
    return e / masked_fill(total, total.data == 0, 1.0)[segments]
