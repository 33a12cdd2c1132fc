"""The primitive ops and the functions that apply them (the Tensor's operators call these).

Composites built from primitives (mean, swapaxes, stack, split, masked_fill) need no VJP of
their own: autograd derives their gradients.
"""
import math

import numpy as np

from autograd.ops.elementwise import (Add, Sub, Mul, Div, Pow, Neg, Exp, Log, Sqrt, Tanh, Where,
                                      unbroadcast)
from autograd.checks import checked_segments
from autograd.ops.reductions import Sum, Max, SegmentSum
from autograd.ops.shape import Reshape, Transpose, GetItem, Concatenate
from autograd.ops.matmul import MatMul

__all__ = ["add", "sub", "mul", "div", "power", "neg", "exp", "log", "sqrt", "tanh", "where",
           "masked_fill", "sum", "mean", "max", "segment_sum", "reshape", "transpose", "swapaxes", "getitem",
           "concatenate", "stack", "split", "matmul", "unbroadcast"]


def add(a, b):
    return Add.apply(a, b)


def sub(a, b):
    return Sub.apply(a, b)


def mul(a, b):
    return Mul.apply(a, b)


def div(a, b):
    return Div.apply(a, b)


def power(a, b):
    return Pow.apply(a, b)


def neg(a):
    return Neg.apply(a)


def exp(a):
    return Exp.apply(a)


def log(a):
    return Log.apply(a)


def sqrt(a):
    return Sqrt.apply(a)


def tanh(a):
    return Tanh.apply(a)


def matmul(a, b):
    return MatMul.apply(a, b)


def where(condition, a, b):
    """Entries of a where `condition` (a boolean array) holds, of b elsewhere."""
    condition = np.asarray(getattr(condition, "data", condition), dtype=bool)
    return Where.apply(a, b, condition=condition)


def masked_fill(x, mask, value):
    """x with the entries where `mask` is True replaced by `value` (e.g. -inf before a softmax)."""
    return where(mask, value, x)


def sum(x, axis=None, keepdims=False):
    return Sum.apply(x, axis=_axis(axis), keepdims=keepdims)


def mean(x, axis=None, keepdims=False):
    axis = _axis(axis)
    count = x.size if axis is None else math.prod(x.shape[i] for i in np.atleast_1d(axis))
    return sum(x, axis, keepdims) * (1.0 / count)


def max(x, axis=None, keepdims=False):
    return Max.apply(x, axis=_axis(axis), keepdims=keepdims)


def segment_sum(x, segments, n_segments):
    """Σ of the rows of x (E, ...) within each segment: (n_segments, ...), segments (E,) integers
    in [0, n_segments) (a scatter-add; an empty segment gives zeros)."""
    segments = checked_segments("segment_sum", segments, x.shape[0], n_segments)
    return SegmentSum.apply(x, segments=segments, n_segments=n_segments)


def reshape(x, *shape):
    shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
    return Reshape.apply(x, shape=tuple(shape))


def transpose(x, *axes):
    axes = axes[0] if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else axes
    return Transpose.apply(x, axes=tuple(axes) if axes else None)


def swapaxes(x, axis1, axis2):
    axes = list(range(x.ndim))
    axes[axis1], axes[axis2] = axes[axis2], axes[axis1]
    return transpose(x, axes)


def getitem(x, index):
    """x[index]; Tensors inside the index are read as their integer arrays."""
    if isinstance(index, tuple):
        index = tuple(getattr(i, "data", i) for i in index)
    else:
        index = getattr(index, "data", index)
    return GetItem.apply(x, index=index)


def concatenate(tensors, axis=0):
    return Concatenate.apply(*tensors, axis=axis)


def stack(tensors, axis=0):
    """Join along a new axis: each tensor gains an axis of length 1, then they are concatenated."""
    expanded = [reshape(t, _with_new_axis(t.shape, axis)) for t in tensors]
    return concatenate(expanded, axis=axis)


def split(x, sections, axis=0):
    """Split into `sections` equal parts, or at the given indices (as np.split): slices of x."""
    bounds = np.split(np.arange(x.shape[axis]), sections)
    prefix = (slice(None),) * (axis % x.ndim)
    return [getitem(x, prefix + (slice(int(b[0]), int(b[-1]) + 1) if len(b) else slice(0, 0),))
            for b in bounds]


def _axis(axis):
    return tuple(axis) if isinstance(axis, list) else axis


def _with_new_axis(shape, axis):
    axis = axis if axis >= 0 else len(shape) + 1 + axis
    return shape[:axis] + (1,) + shape[axis:]
