"""The primitives graph attention adds to the engine: the segment sum (a scatter-add), the
segment softmax (fused and composite), LeakyReLU and ELU. Their float64 gradient checks are
cases of autograd/gradcheck_suite.py; here their values and the fused/composite agreement."""
import numpy as np
import pytest

import autograd
import autograd.functional as F
from autograd import Tensor
from autograd.ops import segment_sum

SEGMENTS = np.array([2, 0, 2, 1, 2, 0, 4])          # five segments, segment 3 empty


def x64(*shape, seed=0):
    return Tensor(np.random.default_rng(seed).standard_normal(shape), requires_grad=True)


def test_segment_sum_adds_the_rows_of_each_segment_and_gives_zeros_to_an_empty_one():
    x = x64(7, 3)
    expected = np.stack([x.data[SEGMENTS == s].sum(axis=0) for s in range(5)])
    np.testing.assert_allclose(segment_sum(x, SEGMENTS, 5).data, expected, atol=1e-15)
    assert np.all(segment_sum(x, SEGMENTS, 5).data[3] == 0)


def test_segment_softmax_is_the_row_softmax_when_the_segments_are_the_rows():
    scores = x64(4, 5)
    rows = np.repeat(np.arange(4), 5)
    alpha = F.segment_softmax(scores.reshape(20), rows, 4)
    np.testing.assert_allclose(alpha.data.reshape(4, 5), F.softmax(scores, axis=-1).data, atol=1e-15)


def test_segment_softmax_sums_to_one_over_each_segment_per_column():
    alpha = F.segment_softmax(x64(7, 2) * 30.0, SEGMENTS, 5).data
    sums = np.stack([alpha[SEGMENTS == s].sum(axis=0) for s in (0, 1, 2, 4)])
    np.testing.assert_allclose(sums, 1.0, atol=1e-12)


def test_fused_and_composite_segment_softmax_agree_in_value_and_gradient():
    x, g = x64(7, 2), np.random.default_rng(1).standard_normal((7, 2))
    fused = F.segment_softmax(x, SEGMENTS, 5)
    fused.backward(g)
    fused_grad, x.grad = x.grad, None
    with autograd.plain():
        composite = F.segment_softmax(x, SEGMENTS, 5)
    assert composite.creator.__class__.__name__ != "SegmentSoftmax"
    composite.backward(g)
    np.testing.assert_allclose(composite.data, fused.data, atol=1e-15)
    np.testing.assert_allclose(x.grad, fused_grad, atol=1e-14)


def test_a_segment_of_minus_infinity_gets_zero_weights_not_nan():
    x = np.array([0.5, -np.inf, -np.inf, 2.0])
    for fn in (F.segment_softmax, F.segment_softmax_composite):
        alpha = fn(Tensor(x), np.array([0, 1, 1, 0]), 2).data
        assert np.all(np.isfinite(alpha)) and np.all(alpha[1:3] == 0)


def test_segments_outside_the_range_or_of_the_wrong_length_are_clear_errors():
    with pytest.raises(ValueError, match=r"segments\[1\] = 5 is outside \[0, n_segments\) = \[0, 5\)"):
        segment_sum(x64(3, 2), np.array([0, 5, 1]), 5)
    with pytest.raises(ValueError, match=r"integer array of shape \(7,\).*shape \(6,\)"):
        F.segment_softmax(x64(7, 2), SEGMENTS[:6], 5)
    with pytest.raises(ValueError, match="n_segments"):
        segment_sum(x64(3, 2), np.array([0, 1, 1]), -1)


def test_leaky_relu_scales_the_negative_part_by_its_slope_and_elu_is_exp_minus_one_there():
    x = np.array([-3.0, -0.5, 0.0, 0.7, 1000.0])
    np.testing.assert_array_equal(F.leaky_relu(Tensor(x), 0.2).data, np.where(x > 0, x, 0.2 * x))
    np.testing.assert_allclose(F.elu(Tensor(x)).data, np.where(x > 0, x, np.expm1(np.minimum(x, 0))), rtol=1e-15)
    assert F.leaky_relu(Tensor(x.astype(np.float32)), 0.2).dtype == np.float32
    with pytest.raises(ValueError, match="slope must be a number in"):
        F.leaky_relu(Tensor(x), 1.5)
