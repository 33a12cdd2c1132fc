"""Softmax (thesis eq. (8)), its Jacobian (§1.2.3) and log-softmax: the engine room's fused forms
(`F.softmax`, `F.log_softmax` by default), the plain composite forms and the explicit Jacobian
agree; masked rows give zeros; huge logits stay exact; dtypes are kept."""
import numpy as np
import pytest

import autograd.functional as F
from autograd import Tensor, gradcheck

SHAPES_AND_AXES = [((5,), -1), ((3, 4), -1), ((3, 4), 0), ((2, 3, 4), 1), ((2, 3, 4), -1), ((2, 3, 4), 0)]
SOFTMAXES = {"fused": F.softmax, "composite": F.softmax_composite}
LOG_SOFTMAXES = {"fused": F.log_softmax, "composite": F.log_softmax_composite}


def leaf(shape, seed=0, scale=1.0, dtype=np.float64):
    data = scale * np.random.default_rng(seed).standard_normal(shape)
    return Tensor(data.astype(dtype), requires_grad=True)


def vjp(fn, x, g, **kwargs):
    x.grad = None
    out = fn(x, **kwargs)
    out.backward(g)
    return out.data, x.grad


def masked_logits():
    """Row 0 fully masked (a padded query), row 1 partly masked, row 2 free."""
    x = np.random.default_rng(3).standard_normal((3, 4))
    x[0, :] = -np.inf
    x[1, 2:] = -np.inf
    return Tensor(x, requires_grad=True)


@pytest.mark.parametrize("name", SOFTMAXES)
@pytest.mark.parametrize("shape, axis", SHAPES_AND_AXES)
def test_softmax_gradcheck(name, shape, axis):
    assert gradcheck(lambda x: SOFTMAXES[name](x, axis=axis), leaf(shape))


@pytest.mark.parametrize("name", LOG_SOFTMAXES)
@pytest.mark.parametrize("shape, axis", SHAPES_AND_AXES)
def test_log_softmax_gradcheck(name, shape, axis):
    assert gradcheck(lambda x: LOG_SOFTMAXES[name](x, axis=axis), leaf(shape))


@pytest.mark.parametrize("shape, axis", SHAPES_AND_AXES)
def test_fused_and_composite_log_softmax_agree_in_value_and_vjp(shape, axis):
    """The same operations in the same order but for the VJP, g − exp(log s) Σ g by hand against
    autograd's chain through log, sum and exp: equal to a few units of float64's rounding."""
    x, g = leaf(shape, scale=3.0), np.random.default_rng(1).standard_normal(shape)
    fused_value, fused_grad = vjp(F.log_softmax, x, g, axis=axis)
    composite_value, composite_grad = vjp(F.log_softmax_composite, x, g, axis=axis)
    np.testing.assert_allclose(fused_value, composite_value, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(fused_grad, composite_grad, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("shape, axis", SHAPES_AND_AXES)
def test_fused_and_composite_softmax_agree_in_value_and_vjp(shape, axis):
    x, g = leaf(shape), np.random.default_rng(1).standard_normal(shape)
    fused_value, fused_grad = vjp(F.softmax, x, g, axis=axis)
    composite_value, composite_grad = vjp(F.softmax_composite, x, g, axis=axis)
    np.testing.assert_allclose(fused_value, composite_value, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(fused_grad, composite_grad, rtol=1e-11, atol=1e-14)


def test_explicit_jacobian_times_g_is_the_fused_vjp():
    x, g = leaf((2, 3, 6)), np.random.default_rng(1).standard_normal((2, 3, 6))
    s, fused_grad = vjp(F.softmax, x, g)
    jacobian = F.softmax_jacobian(s)
    assert jacobian.shape == (2, 3, 6, 6)
    np.testing.assert_allclose((jacobian @ g[..., None])[..., 0], fused_grad, rtol=1e-12, atol=1e-15)


def test_explicit_jacobian_is_diag_s_minus_s_s_transpose():
    s = F.softmax(leaf((7,))).data
    jacobian = F.softmax_jacobian(s)
    np.testing.assert_allclose(jacobian, np.diag(s) - np.outer(s, s), rtol=1e-15, atol=1e-17)
    np.testing.assert_allclose(np.diag(jacobian), s * (1 - s), rtol=1e-15)  # the thesis's diagonal
    np.testing.assert_array_equal(jacobian, jacobian.T)


def test_explicit_jacobian_matches_finite_differences():
    x = leaf((5,))
    numerical = np.stack([(F.softmax(Tensor(x.data + 1e-6 * e)).data - F.softmax(Tensor(x.data - 1e-6 * e)).data)
                          / 2e-6 for e in np.eye(5)], axis=1)
    np.testing.assert_allclose(F.softmax_jacobian(F.softmax(x)), numerical, atol=1e-9)


def test_jacobian_vanishes_at_one_hot_outputs():
    # thesis eq. (9): at s = e_i every entry s_i(δ_ik − s_k) is 0
    for i in range(4):
        np.testing.assert_array_equal(F.softmax_jacobian(np.eye(4)[i]), np.zeros((4, 4)))


def test_jacobian_norm_collapses_as_logits_are_scaled_up():
    # thesis §1.2.3: large dot products push softmax to a one-hot output and its gradient to 0,
    # which is why the scores are divided by √k
    z = np.random.default_rng(0).standard_normal(16)
    norms = [np.linalg.norm(F.softmax_jacobian(F.softmax(Tensor(scale * z)))) for scale in (1, 10, 100, 1000)]
    assert all(later < earlier for earlier, later in zip(norms, norms[1:]))
    assert norms[-1] < 1e-12 * norms[0]


@pytest.mark.parametrize("name", SOFTMAXES)
@pytest.mark.parametrize("shape, axis", SHAPES_AND_AXES)
def test_softmax_rows_are_probabilities(name, shape, axis):
    s = SOFTMAXES[name](leaf(shape, scale=5.0), axis=axis).data
    assert np.all(s >= 0)
    np.testing.assert_allclose(s.sum(axis=axis), 1.0, rtol=1e-14)


@pytest.mark.parametrize("name", SOFTMAXES)
def test_huge_logits_stay_finite_and_exact(name):
    # softmax([1e4, 1e4 − 1, −1e4]) = [1, e⁻¹, 0] / (1 + e⁻¹) exactly (e^−2e4 underflows to 0)
    s = SOFTMAXES[name](Tensor(np.array([1e4, 1e4 - 1, -1e4]))).data
    expected = np.array([1.0, np.exp(-1.0), 0.0]) / (1 + np.exp(-1.0))
    np.testing.assert_allclose(s, expected, rtol=1e-15, atol=0)


@pytest.mark.parametrize("name", SOFTMAXES)
def test_softmax_is_shift_invariant(name):
    x = leaf((3, 5)).data
    np.testing.assert_allclose(SOFTMAXES[name](Tensor(x + 300.0)).data, SOFTMAXES[name](Tensor(x)).data,
                               rtol=1e-12)


@pytest.mark.parametrize("name", SOFTMAXES)
def test_fully_masked_row_gives_zeros_and_a_zero_finite_gradient(name):
    x, g = masked_logits(), np.random.default_rng(4).standard_normal((3, 4))
    s, grad = vjp(SOFTMAXES[name], x, g)
    np.testing.assert_array_equal(s[0], np.zeros(4))
    np.testing.assert_array_equal(s[1, 2:], np.zeros(2))
    np.testing.assert_allclose(s[1:].sum(axis=-1), 1.0, rtol=1e-15)
    assert np.all(np.isfinite(grad))
    np.testing.assert_array_equal(grad[0], np.zeros(4))
    np.testing.assert_array_equal(grad[1, 2:], np.zeros(2))


@pytest.mark.parametrize("forms", [SOFTMAXES, LOG_SOFTMAXES], ids=["softmax", "log_softmax"])
def test_fused_and_composite_agree_on_masked_rows(forms):
    x, g = masked_logits(), np.random.default_rng(4).standard_normal((3, 4))
    fused_value, fused_grad = vjp(forms["fused"], x, g)
    composite_value, composite_grad = vjp(forms["composite"], x, g)
    np.testing.assert_allclose(fused_value, composite_value, rtol=1e-14)
    np.testing.assert_allclose(fused_grad, composite_grad, rtol=1e-12, atol=1e-16)


@pytest.mark.parametrize("fn", [F.softmax, F.softmax_composite, F.log_softmax, F.log_softmax_composite])
def test_float32_in_float32_out_and_float32_gradient(fn):
    x = leaf((2, 3, 4), dtype=np.float32)
    out, grad = vjp(fn, x, np.ones((2, 3, 4), np.float32), axis=1)
    assert out.dtype == np.float32 and grad.dtype == np.float32


def test_float32_softmax_matches_float64():
    x = leaf((4, 6), scale=3.0)
    s64 = F.softmax(x).data
    s32 = F.softmax(Tensor(x.data.astype(np.float32))).data
    np.testing.assert_allclose(s32, s64, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", LOG_SOFTMAXES)
@pytest.mark.parametrize("shape, axis", SHAPES_AND_AXES)
def test_log_softmax_is_log_of_softmax(name, shape, axis):
    x = leaf(shape, scale=3.0)
    np.testing.assert_allclose(LOG_SOFTMAXES[name](x, axis=axis).data, np.log(F.softmax(x, axis=axis).data),
                               rtol=1e-13)


@pytest.mark.parametrize("name", LOG_SOFTMAXES)
def test_log_softmax_is_exact_for_huge_logits(name):
    log_softmax = LOG_SOFTMAXES[name]
    np.testing.assert_array_equal(log_softmax(Tensor(np.array([1e4, -1e4]))).data, [0.0, -2e4])
    np.testing.assert_array_equal(log_softmax(Tensor(np.array([1e4, -1e4], np.float32))).data,
                                  np.array([0.0, -2e4], np.float32))


@pytest.mark.parametrize("name", LOG_SOFTMAXES)
def test_log_softmax_gradient_at_huge_logits_is_finite_and_exact(name):
    # VJP g − softmax Σg with softmax = [1, 0]
    x = Tensor(np.array([1e4, -1e4]), requires_grad=True)
    _, grad = vjp(LOG_SOFTMAXES[name], x, np.array([2.0, 3.0]))
    np.testing.assert_array_equal(grad, [2.0 - 5.0, 3.0])


@pytest.mark.parametrize("name", LOG_SOFTMAXES)
def test_log_softmax_of_a_fully_masked_row_is_minus_infinity_without_nan(name):
    x = masked_logits()
    out, grad = vjp(LOG_SOFTMAXES[name], x, np.ones((3, 4)))
    assert np.all(np.isneginf(out[0])) and np.all(np.isneginf(out[1, 2:]))
    assert np.all(np.isfinite(out[1, :2])) and np.all(np.isfinite(grad))


def test_fused_softmax_accepts_a_plain_array():
    np.testing.assert_allclose(F.softmax(np.array([0.0, np.log(3.0)])).data, [0.25, 0.75], rtol=1e-15)
