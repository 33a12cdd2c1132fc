"""The cross-entropy (thesis §1.1, with label smoothing and ignore_index): the engine room's
`FusedCrossEntropy` against the plain `CrossEntropy` and against a composite built from
log_softmax and indexing, plus the properties a training loop relies on, in both forms."""
import contextlib

import numpy as np
import pytest

import autograd
import autograd.functional as F
from autograd import Tensor, gradcheck
from autograd.engine_room.fused_cross_entropy import FusedCrossEntropy
from autograd.functional.losses import CrossEntropy

FORMS = {"engine room": contextlib.nullcontext, "plain": autograd.plain}

CASES = [  # (logits shape, ignore_index, label_smoothing)
    ((4, 5), None, 0.0),
    ((4, 5), None, 0.1),
    ((6, 3), 0, 0.0),
    ((2, 3, 5), -100, 0.2),
    ((2, 4, 6), 2, 1.0),
]


def reference_cross_entropy(logits, targets, ignore_index=None, label_smoothing=0.0):
    """The same loss composed from primitives: log_softmax, integer indexing, mean."""
    n_classes = logits.shape[-1]
    rows, targets = logits.reshape(-1, n_classes), targets.reshape(-1)
    kept = np.flatnonzero(targets != ignore_index) if ignore_index is not None else np.arange(targets.size)
    log_p = F.log_softmax(rows[kept])
    nll = -log_p[np.arange(kept.size), targets[kept]]
    uniform = -log_p.mean(axis=-1)
    return ((1 - label_smoothing) * nll + label_smoothing * uniform).mean()


def make_case(shape, ignore_index, seed=0, dtype=np.float64):
    """Logits, and targets with about a third of the rows set to ignore_index (never all)."""
    rng = np.random.default_rng(seed)
    logits = Tensor((2 * rng.standard_normal(shape)).astype(dtype), requires_grad=True)
    targets = rng.integers(0, shape[-1], size=shape[:-1])
    if ignore_index is not None:
        targets[rng.random(shape[:-1]) < 0.35] = ignore_index
        targets.reshape(-1)[0] = 1 if ignore_index != 1 else 0
    return logits, targets


def loss_and_grad(fn, logits, targets, **kwargs):
    logits.grad = None
    loss = fn(logits, targets, **kwargs)
    loss.backward()
    return loss.item(), logits.grad


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("shape, ignore_index, smoothing", CASES)
def test_gradcheck(shape, ignore_index, smoothing, form):
    logits, targets = make_case(shape, ignore_index)

    def loss(z):
        with FORMS[form]():
            return F.cross_entropy(z, targets, ignore_index=ignore_index, label_smoothing=smoothing)

    assert gradcheck(loss, logits)


@pytest.mark.parametrize("dtype, rtol, atol", [(np.float64, 1e-13, 1e-16), (np.float32, 1e-6, 1e-7)])
@pytest.mark.parametrize("shape, ignore_index, smoothing", CASES)
def test_the_engine_room_form_matches_the_plain_form_in_value_and_gradient(shape, ignore_index, smoothing,
                                                                            dtype, rtol, atol):
    """The same loss to rounding: the plain form takes p = exp(log p), the fused one exp(s) / Σ exp(s),
    and they add up −log p_c in different orders, so values differ in the last bits of the dtype
    (a few units of 1e-16, or of 6e-8 in float32). The gradient (p − p*) g / n keeps p's absolute
    error (p ≤ 1), which the relative tolerance misses where p ≈ p* cancels: hence the absolute one."""
    logits, targets = make_case(shape, ignore_index, dtype=dtype)
    kwargs = dict(ignore_index=ignore_index, label_smoothing=smoothing)
    fused_loss, fused_grad = loss_and_grad(F.cross_entropy, logits, targets, **kwargs)
    with autograd.plain():
        plain_loss, plain_grad = loss_and_grad(F.cross_entropy, logits, targets, **kwargs)
    assert type(F.cross_entropy(logits, targets, **kwargs).creator) is FusedCrossEntropy
    with autograd.plain():
        assert type(F.cross_entropy(logits, targets, **kwargs).creator) is CrossEntropy
    np.testing.assert_allclose(plain_loss, fused_loss, rtol=rtol)
    assert plain_grad.dtype == fused_grad.dtype == dtype
    np.testing.assert_allclose(plain_grad, fused_grad, rtol=rtol, atol=atol)


@pytest.mark.parametrize("shape, ignore_index, smoothing", CASES)
def test_fused_matches_the_composite_in_value_and_gradient(shape, ignore_index, smoothing):
    logits, targets = make_case(shape, ignore_index)
    kwargs = dict(ignore_index=ignore_index, label_smoothing=smoothing)
    fused_loss, fused_grad = loss_and_grad(F.cross_entropy, logits, targets, **kwargs)
    reference_loss, reference_grad = loss_and_grad(reference_cross_entropy, logits, targets, **kwargs)
    np.testing.assert_allclose(fused_loss, reference_loss, rtol=1e-13)
    np.testing.assert_allclose(fused_grad, reference_grad, rtol=1e-11, atol=1e-16)


def test_loss_is_minus_log_probability_of_the_target():
    # thesis §1.1: Loss = −log p(y_t | y_<t, x), averaged over the rows
    z = np.array([[2.0, 0.0, -1.0], [0.5, 0.5, 3.0]])
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    loss = F.cross_entropy(Tensor(z), np.array([0, 1])).item()
    np.testing.assert_allclose(loss, -(np.log(p[0, 0]) + np.log(p[1, 1])) / 2, rtol=1e-15)


def test_label_smoothing_matches_the_formula():
    z, targets, eps = np.array([[2.0, 0.0, -1.0, 1.0], [0.5, 0.5, 3.0, -2.0]]), np.array([0, 1]), 0.3
    log_p = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    rows = [(1 - eps) * -log_p[i, t] + eps / 4 * -log_p[i].sum() for i, t in enumerate(targets)]
    loss = F.cross_entropy(Tensor(z), targets, label_smoothing=eps).item()
    np.testing.assert_allclose(loss, np.mean(rows), rtol=1e-15)


def test_gradient_is_softmax_minus_smoothed_target_over_the_row_count():
    logits, targets = make_case((5, 4), None)
    _, grad = loss_and_grad(F.cross_entropy, logits, targets, label_smoothing=0.2)
    p = F.softmax(logits).data
    target = 0.8 * np.eye(4)[targets] + 0.2 / 4
    np.testing.assert_allclose(grad, (p - target) / 5, rtol=1e-12, atol=1e-16)
    np.testing.assert_allclose(grad.sum(axis=-1), 0.0, atol=1e-16)


def test_ignored_rows_get_zero_gradient_and_do_not_change_the_loss():
    logits, targets = make_case((3, 4, 5), -100, seed=1)
    ignored = targets == -100
    assert ignored.any() and not ignored.all()
    loss, grad = loss_and_grad(F.cross_entropy, logits, targets, ignore_index=-100, label_smoothing=0.1)
    np.testing.assert_array_equal(grad[ignored], 0.0)
    changed = logits.data.copy()
    changed[ignored] = 1e3 * np.random.default_rng(2).standard_normal((ignored.sum(), 5))
    changed_loss = F.cross_entropy(Tensor(changed), targets, ignore_index=-100, label_smoothing=0.1).item()
    assert changed_loss == loss


def test_loss_is_the_mean_over_the_counted_rows_only():
    # dividing by all rows instead of the non-ignored ones would shrink this loss
    logits, targets = make_case((4, 6, 5), 0, seed=3)
    counted = targets != 0
    full = F.cross_entropy(logits, targets, ignore_index=0).item()
    subset = F.cross_entropy(Tensor(logits.data[counted]), targets[counted]).item()
    np.testing.assert_allclose(full, subset, rtol=1e-14)


def test_doubling_the_batch_with_a_copy_keeps_the_loss_and_halves_each_rows_gradient():
    # a mean, not a sum: catches a missing or doubled 1/B
    logits, targets = make_case((3, 4, 5), -100, seed=4)
    loss, grad = loss_and_grad(F.cross_entropy, logits, targets, ignore_index=-100, label_smoothing=0.1)
    doubled = Tensor(np.concatenate([logits.data, logits.data]), requires_grad=True)
    doubled_loss, doubled_grad = loss_and_grad(F.cross_entropy, doubled, np.concatenate([targets, targets]),
                                               ignore_index=-100, label_smoothing=0.1)
    np.testing.assert_allclose(doubled_loss, loss, rtol=1e-14)
    np.testing.assert_allclose(doubled_grad[:3], grad / 2, rtol=1e-14)
    np.testing.assert_allclose(doubled_grad[3:], grad / 2, rtol=1e-14)


@pytest.mark.parametrize("form", FORMS)
def test_huge_logits_give_an_exact_finite_loss_and_gradient(form):
    logits = Tensor(np.array([[1e4, -1e4], [1e4, -1e4]]), requires_grad=True)
    with FORMS[form]():
        loss, grad = loss_and_grad(F.cross_entropy, logits, np.array([1, 0]))
    assert loss == 1e4  # (2e4 + 0) / 2
    np.testing.assert_array_equal(grad, [[0.5, -0.5], [0.0, 0.0]])


@pytest.mark.parametrize("form", FORMS)
def test_float32_in_float32_out_and_float32_gradient(form):
    logits, targets = make_case((2, 3, 5), -100, dtype=np.float32)
    with FORMS[form]():
        loss = F.cross_entropy(logits, targets, ignore_index=-100, label_smoothing=0.1)
    loss.backward()
    assert loss.dtype == np.float32 and logits.grad.dtype == np.float32


def test_targets_may_be_a_tensor():
    logits, targets = make_case((4, 5), None)
    np.testing.assert_array_equal(F.cross_entropy(logits, Tensor(targets)).data,
                                  F.cross_entropy(logits, targets).data)


def test_every_target_ignored_raises():
    with pytest.raises(ValueError, match="all 4 targets are ignored"):
        F.cross_entropy(Tensor(np.zeros((4, 3))), np.full(4, -100), ignore_index=-100)


@pytest.mark.parametrize("bad", [3, 7, -1])
def test_out_of_range_target_raises_and_names_the_value(bad):
    with pytest.raises(ValueError, match=rf"target {bad} is out of range \[0, 3\)"):
        F.cross_entropy(Tensor(np.zeros((4, 3))), np.array([0, bad, 1, 2]))


def test_ignore_index_outside_the_class_range_is_allowed():
    assert np.isfinite(F.cross_entropy(Tensor(np.zeros((3, 3))), np.array([0, -100, 2]), ignore_index=-100).item())


def test_shape_mismatch_names_both_shapes():
    with pytest.raises(ValueError, match=r"\(2, 3, 5\).*\(2, 4\)"):
        F.cross_entropy(Tensor(np.zeros((2, 3, 5))), np.zeros((2, 4), dtype=int))


@pytest.mark.parametrize("eps", [-0.1, 1.5])
def test_label_smoothing_outside_zero_one_raises(eps):
    with pytest.raises(ValueError, match="label_smoothing"):
        F.cross_entropy(Tensor(np.zeros((2, 3))), np.array([0, 1]), label_smoothing=eps)


def test_float_targets_raise_a_type_error():
    with pytest.raises(TypeError, match="targets must be integer"):
        F.cross_entropy(Tensor(np.zeros((2, 3))), np.array([0.0, 1.0]))
