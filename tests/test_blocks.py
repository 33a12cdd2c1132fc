"""autograd.engine_room.blocks: elementwise work a cache-sized block at a time, the same values as in one go."""
import gc
import weakref

import numpy as np
import pytest

from autograd.engine_room.blocks import BLOCK, blocks, in_blocks, sum_of_squares


@pytest.mark.parametrize("size", [7, BLOCK, BLOCK + 1, 2 * BLOCK + 100, 5 * BLOCK - 3])
def test_the_blocks_cover_every_entry_once_in_order_none_under_half_a_block(size):
    a, b = np.arange(size), np.arange(size) * 2
    parts = list(blocks(a, b))
    assert np.array_equal(np.concatenate([p for p, _ in parts]), a)
    assert all(np.array_equal(q, 2 * p) for p, q in parts)                # the same entries of each array
    assert len(parts) == -(-size // BLOCK)
    assert size <= BLOCK or min(len(p) for p, _ in parts) >= BLOCK // 2


def test_arrays_that_are_not_contiguous_come_whole():
    a = np.zeros((4 * BLOCK, 2))[:, 0]
    assert [len(p) for p, in blocks(a)] == [4 * BLOCK]


def test_in_blocks_gives_the_values_of_one_call_and_the_dtype_asked():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((3, BLOCK + 5)), rng.standard_normal((3, BLOCK + 5))
    calls = []

    def f(a, b):
        calls.append(a.size)
        return np.exp(a) * b

    result = in_blocks(f, x, y, dtype=np.float32)
    assert result.dtype == np.float32 and result.shape == x.shape
    assert np.array_equal(result, (np.exp(x) * y).astype(np.float32))
    assert len(calls) == 4 and sum(calls) == x.size
    assert in_blocks(f, x[0, :5], y[0, :5], dtype=np.float64).shape == (5,)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(5,), (BLOCK,), (BLOCK + 1,), (3 * BLOCK - 7,), (1000003,), (7, 3 * BLOCK + 5),
                                   (512, 2048)])
def test_sum_of_squares_is_numpys_float64_sum_bit_for_bit(shape, dtype):
    """The same tree of sums as NumPy's pairwise sum of the whole float64 copy: equal, not
    close (float32 squares are exact in float64, so only the order of the sums could differ)."""
    rng = np.random.default_rng(sum(shape))
    a = (rng.standard_normal(shape) * rng.uniform(0.01, 100, shape[-1])).astype(dtype)
    plain = float(np.sum(np.square(a, dtype=np.float64)))
    if tuple(int(part) for part in np.__version__.split(".")[:2]) < (2, 3):
        # NumPy before 2.3 sums in another order, which also depends on where the array starts:
        # measured 7.2e-16 at most on NumPy 1.24.4, 1.26.4, 2.0.2 and 2.2.6
        assert sum_of_squares(a) == pytest.approx(plain, rel=1e-14)
    else:
        assert sum_of_squares(a) == plain


def test_sum_of_squares_and_the_blocks_at_another_block_size():
    """The optimizer's passes may run blocks of another size (training/update_block.py): the
    blocks still cover every entry once, none under half a block, and the sum of squares is the
    same tree of sums, so the same float, at every size."""
    a = np.random.default_rng(3).standard_normal(9 * BLOCK + 3).astype(np.float32)
    sums = {block: sum_of_squares(a, block) for block in (1024, BLOCK, 2 * BLOCK, 4 * BLOCK, 16 * BLOCK)}
    if tuple(int(part) for part in np.__version__.split(".")[:2]) < (2, 3):
        assert max(sums.values()) == pytest.approx(min(sums.values()), rel=1e-14)   # another order: above
    else:
        assert len(set(sums.values())) == 1
    for block in (1024, 4 * BLOCK):
        parts = [p for p, in blocks(a, block=block)]
        assert np.array_equal(np.concatenate(parts), a) and len(parts) == -(-a.size // block)
        assert min(len(p) for p in parts) >= block // 2


def test_sum_of_squares_of_a_view_that_is_not_contiguous_is_the_plain_sum():
    a = np.random.default_rng(0).standard_normal((3 * BLOCK, 2)).astype(np.float32)[:, 1]
    assert sum_of_squares(a) == float(np.sum(np.square(a, dtype=np.float64)))


def test_sum_of_squares_keeps_no_reference_to_its_array():
    """Once the sum is returned, nothing of it holds the array: with the cycle collector off, the
    array is freed as soon as its last name goes. (A recursive closure over the array was a
    reference cycle: each training step's gradients then stayed in memory until the collector
    ran, a set of gradients more per step.)"""
    a = np.ones(3 * BLOCK + 1, np.float32)
    alive = weakref.ref(a)
    enabled = gc.isenabled()
    gc.disable()
    try:
        assert sum_of_squares(a) == 3 * BLOCK + 1
        del a
        assert alive() is None
    finally:
        if enabled:
            gc.enable()
