"""Elementwise work on large arrays, a cache-sized block at a time.

Replaces: the same elementwise passes made over the whole array at once (plain NumPy, as in
`autograd.optim.Adam._adam_step` and `autograd.functional.activations.GELU`). The values are
the same bit for bit, each entry's arithmetic being unchanged (tests/test_blocks.py).

A chain of elementwise passes (an optimizer's update, GELU's erf and its slope) made over the
whole of a large array reads and writes main memory at every pass, and its temporaries are as
large as the array. Made block by block, a block's arrays and temporaries stay in the core's
cache from the first pass to the last, and the temporaries are a block's size (what that saves
is measured in docs/performance.md).

`sum_of_squares` does the same for a reduction: Σ a² in float64 without a float64 copy of the
array, the same value bit for bit as NumPy's sum of the whole copy from NumPy 2.3 on (earlier
NumPy sums in an order that also depends on where the array starts in memory: then equal to
about 1e-15, relatively). `balanced_shares` deals such work, array by array, between threads.

The optimizer's passes (the clip's norm and Adam's update) take their block size from
`update_block()`, BLOCK unless `set_update_block` chose another: a run sets the size measured
fastest on its machine (numpy_transformer/training/update_block.py). The values do not depend on
it: each entry's arithmetic, and the pairwise tree of `sum_of_squares`, are the same for any size.
"""
import numpy as np

BLOCK = 1 << 16                 # entries: 256 KB of float32 per array, a few arrays within a 2 MB cache
_update = {"block": BLOCK}      # the block size of the optimizer's passes (`set_update_block`)


def update_block():
    """The block size, in entries, of the optimizer's passes (fused_adam, fused_clip)."""
    return _update["block"]


def set_update_block(size):
    """Make the optimizer's passes run `size` entries a block (an int of at least 1,024) from now
    on, in this process; returns the size."""
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1024:
        raise ValueError(f"an update block is an int of at least 1024 entries, got {size!r}")
    _update["block"] = int(size)
    return _update["block"]


def blocks(*arrays, block=BLOCK):
    """Views of `arrays` (of one shape) a block at a time, the same entries of each: ⌈size / block⌉
    blocks of equal size (± 1), so that none holds fewer than block / 2 entries (and a choice made
    by size, as GELU's erf, is the same for every block). Arrays that are not all C-contiguous, or
    not larger than a block, come whole."""
    size = arrays[0].size
    if size <= block or not all(a.flags.c_contiguous for a in arrays):
        yield arrays
        return
    flat = [a.reshape(-1) for a in arrays]
    count = -(-size // block)
    bounds = [size * i // count for i in range(count + 1)]
    for start, end in zip(bounds, bounds[1:]):
        yield tuple(a[start:end] for a in flat)


def in_blocks(function, *arrays, dtype):
    """function(*arrays) as a `dtype` array, for a `function` that acts entry by entry (entry i
    of its result depends on entry i of each input alone), computed a block at a time into one
    output; the same values as one call on the whole arrays."""
    if arrays[0].size <= BLOCK:
        return function(*arrays).astype(dtype, copy=False)
    out = np.empty(arrays[0].shape, dtype)
    for out_block, *input_blocks in blocks(out, *arrays):
        out_block[...] = function(*input_blocks)
    return out


def sum_of_squares(array, block=BLOCK):
    """Σ a² over every entry of `array`, summed in float64, as a float: the value of
    `np.sum(np.square(array, dtype=np.float64))` bit for bit on NumPy 2.3 and newer (to about
    1e-15 on older NumPy: the module docstring), without that float64 copy, for any `block`.

    NumPy sums a contiguous float64 array pairwise: a part of n > 128 entries is the sum of its
    first n₂ = ⌊n/2⌋ − (⌊n/2⌋ mod 8) entries and of the rest, each summed the same way. Here the
    parts are split the same way down to at most `block` entries; each is squared into one float64
    buffer that stays in the cache and summed by NumPy (the same pairwise sum from there down),
    and the sums are added back up the same tree. (tests/test_blocks.py checks the bits.)"""
    flat = array.reshape(-1) if array.flags.c_contiguous else None
    if flat is None or flat.size <= block:
        return float(np.sum(np.square(array, dtype=np.float64)))
    return float(_pairwise_sum_of_squares(flat, 0, flat.size, np.empty(block, np.float64)))


def _pairwise_sum_of_squares(flat, start, n, buffer):
    """Σ flat[start:start + n]² by NumPy's pairwise split, each part of at most len(buffer)
    entries squared in `buffer`. (A function of its own, not a closure over `flat`: a closure
    that calls itself is a reference cycle, which would keep `flat`, a view of the gradient,
    alive until Python's cycle collector runs: tests/test_blocks.py.)"""
    if n <= len(buffer):
        squares = buffer[:n]
        np.copyto(squares, flat[start:start + n])              # float64 squares of float32 are exact
        np.square(squares, out=squares)
        return np.sum(squares)
    half = n // 2 - n // 2 % 8
    return (_pairwise_sum_of_squares(flat, start, half, buffer)
            + _pairwise_sum_of_squares(flat, start + half, n - half, buffer))


def balanced_shares(updates, n):
    """`updates` (tuples whose first item is an array: (parameter, gradient, state)) dealt into
    n lists of about equal total size: the largest first, each to the lightest list so far."""
    shares, sizes = [[] for _ in range(n)], [0] * n
    for update in sorted(updates, key=lambda update: -update[0].size):
        lightest = sizes.index(min(sizes))
        shares[lightest].append(update)
        sizes[lightest] += update[0].size
    return shares
