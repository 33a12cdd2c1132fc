"""Inverted dropout: x ⊙ m / (1 − p), m ~ Bernoulli(1 − p), the identity at evaluation. The
plain form (`autograd.plain()`) draws m from float uniforms; the engine room's form, the default,
from 16-bit draws, with p rounded to p̃, a multiple of 2⁻¹⁶. The two samplers draw different
masks by design: each is checked for its kept share and its expectation, and the two ops give the
same values and gradients on one mask."""
import contextlib
from types import SimpleNamespace

import numpy as np
import pytest

import autograd
import autograd.functional as F
from autograd import Tensor, gradcheck
from autograd.engine import topological_order
from autograd.engine_room.dropout_masks import LEVELS, Dropout, keep_mask, kept_fraction
from autograd.functional.dropout import dropout_composite

MODES = {"engine room": contextlib.nullcontext, "plain": autograd.plain}


def realised_keep(p, mode):
    """1 − p̃ for the engine room's 16-bit masks, 1 − p for the plain form's."""
    return kept_fraction(p) if mode == "engine room" else 1 - p


def test_in_evaluation_it_returns_the_same_object():
    x = Tensor(np.ones(5), requires_grad=True)
    assert F.dropout(x, 0.5, training=False, rng=None) is x
    assert F.dropout(x, 0.5, training=False, rng=np.random.default_rng(0)) is x


def test_p_zero_in_training_returns_the_same_object():
    x = Tensor(np.ones(5), requires_grad=True)
    assert F.dropout(x, 0.0, training=True, rng=np.random.default_rng(0)) is x


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_the_kept_fraction_is_one_minus_p_within_a_binomial_bound(p, mode):
    """The count of kept entries is Binomial(n, 1 − p): within 5 standard deviations of its mean
    (a false alarm about once in 3.5 million seeds; the seeds are fixed)."""
    with MODES[mode]():
        out = F.dropout(Tensor(np.ones(1_000_000)), p, training=True, rng=np.random.default_rng(0)).data
    kept = np.mean(out != 0)
    assert abs(kept - (1 - p)) < 5 * np.sqrt(p * (1 - p) / out.size)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("p", [0.1, 0.5])
def test_kept_entries_are_scaled_so_the_expectation_is_preserved(p, mode):
    """Kept entries are x / (1 − p) (1 − p̃ in the engine room), so E[out] = x: the sample mean of
    out − x, with x ~ U(1, 2), is within 5 standard errors of 0 (an entry's variance is at most
    x² p / (1 − p) ≤ 4 p / (1 − p))."""
    x = np.random.default_rng(1).uniform(1, 2, 1_000_000)
    with MODES[mode]():
        out = F.dropout(Tensor(x), p, training=True, rng=np.random.default_rng(2)).data
    kept = out != 0
    np.testing.assert_allclose(out[kept], x[kept] / realised_keep(p, mode), rtol=1e-15)
    assert abs(np.mean(out - x)) < 5 * np.sqrt(4 * p / (1 - p) / x.size)


@pytest.mark.parametrize("p", [1e-6, 0.001, 0.1, 0.3, 0.5, 0.9, 0.99999])
def test_the_realised_p_is_within_half_a_level_of_p_and_the_mask_keeps_exactly_that_share(p):
    kept = kept_fraction(p)
    assert abs((1 - kept) - p) <= 0.5 / LEVELS and kept * LEVELS == int(kept * LEVELS)
    every_value_once = np.arange(LEVELS, dtype="<u2").view("<u8")          # as 64-bit raw outputs
    rng = SimpleNamespace(bit_generator=SimpleNamespace(random_raw=lambda n: every_value_once[:n]))
    assert np.count_nonzero(keep_mask((LEVELS,), kept, rng)) == kept * LEVELS


def test_the_mask_is_the_same_in_every_dtype_and_comes_from_the_generator_s_raw_bits():
    rng = np.random.default_rng(11)
    masks = [F.dropout(Tensor(np.ones((5, 7), dtype)), 0.3, True, np.random.default_rng(11)).data
             for dtype in (np.float16, np.float32, np.float64)]
    assert [m.dtype for m in masks] == [np.float16, np.float32, np.float64]
    assert all(np.array_equal(m != 0, masks[0] != 0) for m in masks)
    draws = rng.bit_generator.random_raw(9).astype("<u8").view("<u2")[:35].reshape(5, 7)
    np.testing.assert_array_equal(masks[1] != 0, draws < kept_fraction(0.3) * LEVELS)


@pytest.mark.parametrize("mode", MODES)
def test_the_same_seed_gives_the_same_mask_and_another_seed_another(mode):
    x = Tensor(np.ones((20, 30)))
    with MODES[mode]():
        first, second, other = (F.dropout(x, 0.3, True, np.random.default_rng(seed)).data for seed in (7, 7, 8))
    np.testing.assert_array_equal(first, second)
    assert not np.array_equal(first, other)


@pytest.mark.parametrize("mode", MODES)
def test_the_gradient_is_zero_exactly_where_an_entry_was_dropped(mode):
    x = Tensor(np.random.default_rng(3).standard_normal((10, 10)), requires_grad=True)
    with MODES[mode]():
        out = F.dropout(x, 0.4, training=True, rng=np.random.default_rng(4))
    out.backward(np.ones((10, 10)))
    dropped = out.data == 0
    assert dropped.any() and (~dropped).any()
    np.testing.assert_array_equal(x.grad[dropped], 0)
    np.testing.assert_allclose(x.grad[~dropped], 1 / realised_keep(0.4, mode), rtol=1e-15)


@pytest.mark.parametrize("mode", MODES)
def test_p_one_gives_zeros_and_zero_gradients(mode):
    x = Tensor(np.ones((3, 4)), requires_grad=True)
    with MODES[mode]():
        out = F.dropout(x, 1.0, training=True, rng=np.random.default_rng(0))
    out.backward(np.ones((3, 4)))
    np.testing.assert_array_equal(out.data, 0)
    np.testing.assert_array_equal(x.grad, 0)


@pytest.mark.parametrize("mode", MODES)
def test_float32_stays_float32_in_values_and_gradient(mode):
    x = Tensor(np.ones((4, 8), np.float32), requires_grad=True)
    with MODES[mode]():
        out = F.dropout(x, 0.1, training=True, rng=np.random.default_rng(0))
    out.backward(np.ones((4, 8), np.float32))
    assert out.dtype == np.float32 and x.grad.dtype == np.float32


@pytest.mark.parametrize("mode", MODES)
def test_gradient_matches_finite_differences_with_a_seeded_mask(mode):
    x = Tensor(np.random.default_rng(5).standard_normal((3, 4)), requires_grad=True)
    with MODES[mode]():
        assert gradcheck(lambda x: F.dropout(x, 0.3, training=True, rng=np.random.default_rng(6)), x)


@pytest.mark.parametrize("p", [-0.1, 1.5, float("nan")])
def test_p_outside_zero_one_is_a_value_error(p):
    with pytest.raises(ValueError, match="p must be in"):
        F.dropout(Tensor(np.ones(3)), p, training=True, rng=np.random.default_rng(0))


def test_training_without_a_generator_is_a_value_error():
    with pytest.raises(ValueError, match="rng"):
        F.dropout(Tensor(np.ones(3)), 0.1, training=True, rng=None)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_given_one_mask_the_engine_room_op_and_the_plain_product_agree_bit_for_bit(dtype):
    """`Dropout` (the engine room's op, which keeps the mask as booleans) and the plain form's
    product with the float mask m s: the same values and gradients, bit for bit (x · m is
    exact, so both round once)."""
    x = np.random.default_rng(8).standard_normal((6, 50)).astype(dtype)
    g = np.random.default_rng(9).standard_normal((6, 50)).astype(dtype)
    keep, scale = np.random.default_rng(10).random((6, 50)) >= 0.3, 1 / 0.7
    results = []
    for masked in (lambda t: Dropout.apply(t, keep=keep, scale=scale), lambda t: dropout_composite(t, keep, scale)):
        t = Tensor(x, requires_grad=True)
        y = masked(t)
        kept_arrays = [a for node in topological_order(y) if node.creator for a in node.creator.saved]
        y.backward(g)
        results.append((y.data, t.grad, kept_arrays))
    (fused, fused_grad, fused_kept), (plain, plain_grad, plain_kept) = results
    assert fused.dtype == fused_grad.dtype == dtype
    np.testing.assert_array_equal(fused, plain)
    np.testing.assert_array_equal(fused_grad, plain_grad)
    assert [a.dtype for a in fused_kept] == [np.bool_]                  # one byte an entry
    assert np.dtype(dtype) in [a.dtype for a in plain_kept if a is not None]


def test_the_plain_form_draws_its_mask_from_float_uniforms_and_runs_no_dropout_op():
    x = Tensor(np.ones((5, 7)), requires_grad=True)
    with autograd.plain():
        out = F.dropout(x, 0.3, True, np.random.default_rng(12))
    np.testing.assert_array_equal(out.data != 0, np.random.default_rng(12).random((5, 7)) >= 0.3)
    assert Dropout not in {type(node.creator) for node in topological_order(out) if node.creator is not None}
