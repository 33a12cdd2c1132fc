"""Reductions. Sum copies g back to every summed entry; Max sends it to the maximal entries
(split evenly between ties, the subgradient NumPy's `amax` and PyTorch's `amax` use)."""
import numpy as np

from autograd.engine import Function
from autograd.precision import total


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
