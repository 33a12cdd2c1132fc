"""Inverted dropout: x ⊙ m / (1 − p̃), m ~ Bernoulli(1 − p̃), the identity at evaluation (p̃: p to 2⁻¹⁶)."""
import contextlib
from types import SimpleNamespace

import numpy as np
import pytest

import autograd.functional as F
from autograd import Tensor, gradcheck
from autograd.functional.dropout import LEVELS, _keep_mask, kept_fraction


def test_in_evaluation_it_returns_the_same_object():
    x = Tensor(np.ones(5), requires_grad=True)
    assert F.dropout(x, 0.5, training=False, rng=None) is x
    assert F.dropout(x, 0.5, training=False, rng=np.random.default_rng(0)) is x


def test_p_zero_in_training_returns_the_same_object():
    x = Tensor(np.ones(5), requires_grad=True)
    assert F.dropout(x, 0.0, training=True, rng=np.random.default_rng(0)) is x


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_the_kept_fraction_is_one_minus_p(p):
    out = F.dropout(Tensor(np.ones(1_000_000)), p, training=True, rng=np.random.default_rng(0)).data
    kept = np.mean(out != 0)
    assert abs(kept - (1 - p)) < 5 * np.sqrt(p * (1 - p) / out.size)


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_kept_entries_are_scaled_so_the_expectation_is_preserved(p):
    x = np.random.default_rng(1).uniform(1, 2, 1_000_000)
    out = F.dropout(Tensor(x), p, training=True, rng=np.random.default_rng(2)).data
    kept = out != 0
    np.testing.assert_allclose(out[kept], x[kept] / kept_fraction(p), rtol=1e-15)
    assert abs(out.mean() - x.mean()) < 0.01 * x.mean()


@pytest.mark.parametrize("p", [1e-6, 0.001, 0.1, 0.3, 0.5, 0.9, 0.99999])
def test_the_realised_p_is_within_half_a_level_of_p_and_the_mask_keeps_exactly_that_share(p):
    kept = kept_fraction(p)
    assert abs((1 - kept) - p) <= 0.5 / LEVELS and kept * LEVELS == int(kept * LEVELS)
    every_value_once = np.arange(LEVELS, dtype="<u2").view("<u8")          # as 64-bit raw outputs
    rng = SimpleNamespace(bit_generator=SimpleNamespace(random_raw=lambda n: every_value_once[:n]))
    assert np.count_nonzero(_keep_mask((LEVELS,), kept, rng)) == kept * LEVELS


def test_the_mask_is_the_same_in_every_dtype_and_comes_from_the_generator_s_raw_bits():
    rng = np.random.default_rng(11)
    masks = [F.dropout(Tensor(np.ones((5, 7), dtype)), 0.3, True, np.random.default_rng(11)).data
             for dtype in (np.float16, np.float32, np.float64)]
    assert [m.dtype for m in masks] == [np.float16, np.float32, np.float64]
    assert all(np.array_equal(m != 0, masks[0] != 0) for m in masks)
    draws = rng.bit_generator.random_raw(9).astype("<u8").view("<u2")[:35].reshape(5, 7)
    np.testing.assert_array_equal(masks[1] != 0, draws < kept_fraction(0.3) * LEVELS)


def test_the_same_seed_gives_the_same_mask_and_another_seed_another():
    x = Tensor(np.ones((20, 30)))
    first, second, other = (F.dropout(x, 0.3, True, np.random.default_rng(seed)).data for seed in (7, 7, 8))
    np.testing.assert_array_equal(first, second)
    assert not np.array_equal(first, other)


def test_the_gradient_is_zero_exactly_where_an_entry_was_dropped():
    x = Tensor(np.random.default_rng(3).standard_normal((10, 10)), requires_grad=True)
    out = F.dropout(x, 0.4, training=True, rng=np.random.default_rng(4))
    out.backward(np.ones((10, 10)))
    dropped = out.data == 0
    assert dropped.any() and (~dropped).any()
    np.testing.assert_array_equal(x.grad[dropped], 0)
    np.testing.assert_allclose(x.grad[~dropped], 1 / kept_fraction(0.4), rtol=1e-15)


def test_p_one_gives_zeros_and_zero_gradients():
    x = Tensor(np.ones((3, 4)), requires_grad=True)
    out = F.dropout(x, 1.0, training=True, rng=np.random.default_rng(0))
    out.backward(np.ones((3, 4)))
    np.testing.assert_array_equal(out.data, 0)
    np.testing.assert_array_equal(x.grad, 0)


def test_float32_stays_float32_in_values_and_gradient():
    x = Tensor(np.ones((4, 8), np.float32), requires_grad=True)
    out = F.dropout(x, 0.1, training=True, rng=np.random.default_rng(0))
    out.backward(np.ones((4, 8), np.float32))
    assert out.dtype == np.float32 and x.grad.dtype == np.float32


def test_gradient_matches_finite_differences_with_a_seeded_mask():
    x = Tensor(np.random.default_rng(5).standard_normal((3, 4)), requires_grad=True)
    assert gradcheck(lambda x: F.dropout(x, 0.3, training=True, rng=np.random.default_rng(6)), x)


@pytest.mark.parametrize("p", [-0.1, 1.5, float("nan")])
def test_p_outside_zero_one_is_a_value_error(p):
    with pytest.raises(ValueError, match="p must be in"):
        F.dropout(Tensor(np.ones(3)), p, training=True, rng=np.random.default_rng(0))


def test_training_without_a_generator_is_a_value_error():
    with pytest.raises(ValueError, match="rng"):
        F.dropout(Tensor(np.ones(3)), 0.1, training=True, rng=None)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_the_fused_op_and_the_composite_agree_bit_for_bit_and_the_op_keeps_booleans(dtype):
    import autograd
    from autograd.engine import topological_order

    x = np.random.default_rng(8).standard_normal((6, 50)).astype(dtype)
    g = np.random.default_rng(9).standard_normal((6, 50)).astype(dtype)
    results = []
    for composite in (False, True):
        t = Tensor(x, requires_grad=True)
        with autograd.composite() if composite else contextlib.nullcontext():
            y = F.dropout(t, 0.3, True, np.random.default_rng(10))
        kept_arrays = [a for node in topological_order(y) if node.creator for a in node.creator.saved]
        y.backward(g)
        results.append((y.data, t.grad, kept_arrays))
    (fused, fused_grad, fused_kept), (composite, composite_grad, composite_kept) = results
    assert fused.dtype == fused_grad.dtype == dtype
    np.testing.assert_array_equal(fused, composite)
    np.testing.assert_array_equal(fused_grad, composite_grad)
    assert [a.dtype for a in fused_kept] == [np.bool_]                  # one byte an entry
    assert np.dtype(dtype) in [a.dtype for a in composite_kept if a is not None]
