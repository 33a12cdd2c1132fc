"""Shape and indexing primitives: they move entries around, so their VJPs move the gradient
back (reshape back, transpose by the inverse permutation, scatter into the indexed places,
split where the inputs were joined)."""
import itertools

import numpy as np

from autograd.engine import Function
from autograd.precision import compute_dtype


class Reshape(Function):
    def forward(self, a, shape):
        self.shape = a.shape
        return a.reshape(shape)

    def backward(self, g):
        return (g.reshape(self.shape),)


class Transpose(Function):
    def forward(self, a, axes=None):
        self.axes = axes if axes is not None else tuple(reversed(range(a.ndim)))
        return a.transpose(self.axes)

    def backward(self, g):
        return (g.transpose(np.argsort(self.axes)),)


class GetItem(Function):
    """a[index]. Basic indexing (ints, slices) selects each entry at most once, so the VJP
    writes g into place; an integer-array index may repeat entries, and their gradients add
    up (np.add.at, a scatter-add)."""

    def forward(self, a, index):
        self.shape, self.index = a.shape, index
        return a[index]

    def backward(self, g):
        if _is_basic(self.index):
            grad = np.zeros(self.shape, dtype=g.dtype)
            grad[self.index] = g
            return (grad,)
        grad = np.zeros(self.shape, dtype=compute_dtype(g.dtype))     # float32 sums for a float16 g
        np.add.at(grad, self.index, g)
        return (grad.astype(g.dtype, copy=False),)


def _is_basic(index):
    parts = index if isinstance(index, tuple) else (index,)
    return all(p is None or p is Ellipsis or isinstance(p, (int, np.integer, slice)) for p in parts)


class Concatenate(Function):
    def forward(self, *arrays, axis=0):
        self.axis = axis
        self.boundaries = list(itertools.accumulate(a.shape[axis] for a in arrays))[:-1]   # where backward splits
        return np.concatenate(arrays, axis=axis)

    def backward(self, g):
        return tuple(np.split(g, self.boundaries, axis=self.axis))
