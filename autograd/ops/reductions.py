"""Reductions. Sum copies g back to every summed entry; Max sends it to the maximal entries
(split evenly between ties, the subgradient NumPy's `amax` and PyTorch's `amax` use);
SegmentSum, a sum within groups of rows (a scatter-add), gathers each group's g back to its rows."""
import numpy as np

from autograd.engine import Function
from autograd.precision import compute_dtype, total


def _expand(g, axis, keepdims):
    """Give a reduced gradient back its reduced axes (as length 1) so it broadcasts against the
    input (a full reduction leaves a 0-d array, which broadcasts as it is)."""
    return g if keepdims or axis is None else np.expand_dims(g, axis)


class Sum(Function):
    def forward(self, a, axis=None, keepdims=False):
        self.shape, self.axis, self.keepdims = a.shape, axis, keepdims
        return total(a, axis=axis, keepdims=keepdims)

    def backward(self, g):
        g = _expand(g, self.axis, self.keepdims)
        return (np.broadcast_to(g, self.shape),)


class Max(Function):
    def forward(self, a, axis=None, keepdims=False):
        out = np.max(a, axis=axis, keepdims=True)
        is_max = a == out
        self.axis, self.keepdims = axis, keepdims
        self.save_for_backward(is_max, np.sum(is_max, axis=axis, keepdims=True))
        return out if keepdims else np.squeeze(out, axis=axis)

    def backward(self, g):
        is_max, count = self.saved
        g = _expand(g, self.axis, self.keepdims)
        return (is_max * (g / count.astype(g.dtype)),)


def segment_sum_array(a, segments, n_segments):
    """out[s] = Σ_{e : segments[e] = s} a[e] on plain arrays: (E, ...) → (n_segments, ...), 0 for a
    segment without rows; summed in a's compute dtype (np.add.at, unbuffered: repeats add up)."""
    out = np.zeros((n_segments, *a.shape[1:]), dtype=compute_dtype(a.dtype))
    np.add.at(out, segments, a)
    return out.astype(a.dtype, copy=False)


class SegmentSum(Function):
    """out[s] = Σ_{e : segments[e] = s} a[e] along axis 0, a: (E, ...) → (n_segments, ...). In a
    graph, segments[e] is the node edge e points to, and out sums each node's incoming messages.
    VJP: every row e receives the gradient of its segment, g[segments[e]] (a gather)."""

    def forward(self, a, segments, n_segments):
        self.segments = segments
        return segment_sum_array(a, segments, n_segments)

    def backward(self, g):
        return (g[self.segments],)
