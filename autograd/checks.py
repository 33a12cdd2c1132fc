"""Argument checks, one place for the engine, the model, the configurations and the command line.

Each `checked_*` function returns the value it checked (converted: an int, a float, an integer
array) or raises a ValueError (a TypeError for an array of the wrong kind) whose message names
the argument, what it must be, and what it got:

    checked_integer("beam_size", 0, low=1)          ValueError: beam_size must be a positive integer, got 0
    checked_number("dropout", 1.5, 0, 1, high_open=True)
                                                     ValueError: dropout must be a number in [0, 1), got 1.5
    checked_token_ids("src_ids", ids, vocab_size=120)
                                                     ValueError: src_ids: id 130 at position (0, 3) …
"""
import math
import numbers

import numpy as np


def is_integer(value):
    """True for Python and NumPy integers (a bool is not one)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_number(value):
    """True for Python and NumPy real numbers (a bool is not one)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def checked_integer(name, value, low=None, high=None):
    """`value` as an int if it is an integer in [low, high] (None: unbounded)."""
    if not is_integer(value) or (low is not None and value < low) or (high is not None and value > high):
        named = {(1, None): "a positive integer", (0, None): "a non-negative integer"}
        raise ValueError(f"{name} must be {named.get((low, high), 'an integer' + _interval(low, high))}, got {value!r}")
    return int(value)


def checked_number(name, value, low=None, high=None, low_open=False, high_open=False):
    """`value` as a float if it is a finite number in the interval from low to high (None:
    unbounded), each end excluded when `low_open` / `high_open`."""
    inside = is_number(value) and math.isfinite(value) and \
        (low is None or value > low or (value == low and not low_open)) and \
        (high is None or value < high or (value == high and not high_open))
    if not inside:
        raise ValueError(f"{name} must be a number{_interval(low, high, low_open, high_open)}, got {value!r}")
    return float(value)


def _interval(low, high, low_open=False, high_open=False):
    if low is None and high is None:
        return ""
    if high is None:
        return f" {'>' if low_open else '≥'} {low}"
    if low is None:
        return f" {'<' if high_open else '≤'} {high}"
    return f" in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"


def checked_token_ids(name, ids, vocab_size=None, ndim=None):
    """`ids` (an array, a Tensor or nested lists) as an integer array whose entries lie in
    [0, vocab_size) (any integers when vocab_size is None); `ndim`, if given, is the number of
    axes it must have, and then it must not be empty. The error gives the first id outside the
    vocabulary and its position."""
    ids = np.asarray(getattr(ids, "data", ids))
    if not np.issubdtype(ids.dtype, np.integer) or (ndim is not None and (ids.ndim != ndim or ids.size == 0)):
        wanted = "an integer array" if ndim is None else \
            f"a non-empty integer array of {'shape (batch, n)' if ndim == 2 else f'{ndim} axes'}"
        raise ValueError(f"{name} must be {wanted}, got {ids.dtype} of shape {ids.shape}")
    if vocab_size is None:
        return ids
    outside = (ids < 0) | (ids >= vocab_size)
    if outside.any():
        position = tuple(int(i) for i in np.argwhere(outside)[0])
        raise ValueError(f"{name}: id {ids[position]} at position {position} (shape {ids.shape}) "
                         f"is outside the vocabulary [0, {vocab_size})")
    return ids


def checked_segments(name, segments, n_rows, n_segments):
    """`segments` as an integer array of shape (n_rows,) with entries in [0, n_segments): the
    segment of each row of an (n_rows, ...) input (segment sums and softmaxes)."""
    segments = np.asarray(getattr(segments, "data", segments))
    if not np.issubdtype(segments.dtype, np.integer) or segments.shape != (n_rows,):
        raise ValueError(f"{name}: segments must be an integer array of shape ({n_rows},), one segment per "
                         f"row of the input, got {segments.dtype} of shape {segments.shape}")
    outside = (segments < 0) | (segments >= n_segments)
    if outside.any():
        first = int(np.argmax(outside))
        raise ValueError(f"{name}: segments[{first}] = {segments[first]} is outside [0, n_segments) = "
                         f"[0, {n_segments})")
    return segments


def constant_array(value, dtype):
    """A constant (a number or an array) as the array `autograd.engine.as_tensor` wraps: with a
    floating `dtype` (the other operand's), a floating or integer constant takes it."""
    value = np.asarray(value)
    if dtype is not None and np.dtype(dtype).kind == "f" and value.dtype.kind in "fiub":
        value = value.astype(dtype, copy=False)
    return value


def checked_op_inputs(name, inputs, tensor_type):
    """An op's inputs as arrays (`Function.apply`; name: the op's): a Tensor's data, a constant
    in the dtype of the first Tensor (`constant_array`). Refuses float32 mixed with float64,
    which would silently upcast. (Plain loops: this runs for every op, and a generator costs
    more than the whole check.)"""
    dtype = None
    for x in inputs:
        if isinstance(x, tensor_type):
            dtype = x.data.dtype
            break
    if dtype is None:
        raise TypeError(f"{name}: at least one input must be a Tensor")
    arrays = [x.data if isinstance(x, tensor_type) else constant_array(x, dtype) for x in inputs]
    float_dtype = None
    for array in arrays:
        if array.dtype.kind == "f":
            if float_dtype is None:
                float_dtype = array.dtype
            elif array.dtype != float_dtype:
                floats = {str(array.dtype) for array in arrays if array.dtype.kind == "f"}
                raise TypeError(f"{name}: inputs mix {' and '.join(sorted(floats))}; "
                                "cast them to one dtype first (no silent upcasts)")
    return arrays
