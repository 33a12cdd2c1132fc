"""The engine room's fused linear map x W + b (one matrix product on the rows of x) against the
plain composite form from the broadcasting `@` and `+`, and against finite differences."""
import numpy as np
import pytest

import autograd.functional as F
from autograd import Tensor, gradcheck


def tensor(*shape, seed=0, dtype=np.float64):
    return Tensor(np.random.default_rng(seed).standard_normal(shape).astype(dtype), requires_grad=True)


@pytest.mark.parametrize("x_shape", [(5,), (3, 5), (2, 3, 5), (2, 1, 3, 5)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_fused_and_composite_linear_agree_in_values_and_gradients(x_shape, with_bias):
    """Equal to rounding, not bit for bit: BLAS may sum a row's d_in products in another order
    when the rows are one matrix than when they are a batch of matrices (float64, sums of 5)."""
    x, weight, bias = tensor(*x_shape, seed=1), tensor(5, 4, seed=2), tensor(4, seed=3) if with_bias else None
    inputs = [t for t in (x, weight, bias) if t is not None]
    upstream = np.random.default_rng(4).standard_normal(x_shape[:-1] + (4,))
    results = []
    for fn in (F.linear, F.linear_composite):
        y = fn(x, weight, bias)
        y.backward(upstream)
        results.append([y.data] + [t.grad for t in inputs])
        for t in inputs:
            t.grad = None
    for fused, composite in zip(*results):
        np.testing.assert_allclose(fused, composite, rtol=1e-12, atol=1e-14)


def test_linear_gradcheck_with_a_transposed_weight():
    x, weight = tensor(2, 3, 4, seed=1), tensor(5, 4, seed=2)
    assert gradcheck(lambda x, w: F.linear(x, w.T), x, weight)


def test_inputs_that_need_no_gradient_get_none_and_the_others_their_gradient():
    x, weight, bias = Tensor(np.ones((2, 3))), tensor(3, 4), Tensor(np.zeros(4))
    F.linear(x, weight, bias).sum().backward()
    np.testing.assert_array_equal(weight.grad, np.full((3, 4), 2.0))
    assert x.grad is None and bias.grad is None


def test_float32_in_float32_out_and_float32_gradients():
    x, weight, bias = tensor(2, 3, 4, dtype=np.float32), tensor(4, 5, dtype=np.float32), tensor(5, dtype=np.float32)
    y = F.linear(x, weight, bias)
    assert y.dtype == np.float32
    y.backward(np.ones(y.shape, np.float32))
    assert {x.grad.dtype, weight.grad.dtype, bias.grad.dtype} == {np.dtype(np.float32)}
