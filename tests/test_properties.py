"""Property tests over random shapes: elementwise ops and matmul agree with NumPy in value and
broadcast their gradients back to each input's own shape, correctly (gradcheck)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

from autograd import Tensor, gradcheck

BINARY = {
    "add": (lambda a, b: a + b, np.add),
    "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply),
    "div": (lambda a, b: a / b, np.divide),
    "pow": (lambda a, b: a ** b, np.power),
}
UNARY = {
    "neg": (lambda a: -a, np.negative),
    "exp": (lambda a: a.exp(), np.exp),
    "log": (lambda a: a.log(), np.log),
    "sqrt": (lambda a: a.sqrt(), np.sqrt),
    "tanh": (lambda a: a.tanh(), np.tanh),
}
small = settings(max_examples=15, deadline=None)


def positive(shape, seed):
    return Tensor(np.random.default_rng(seed).uniform(0.5, 2.0, shape), requires_grad=True)


@pytest.mark.parametrize("name", BINARY)
@small
@given(shapes=mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3),
       seed=st.integers(0, 2**16))
def test_binary_ops_broadcast_like_numpy(name, shapes, seed):
    op, reference = BINARY[name]
    a, b = positive(shapes.input_shapes[0], seed), positive(shapes.input_shapes[1], seed + 1)
    out = op(a, b)
    assert out.shape == shapes.result_shape
    np.testing.assert_allclose(out.data, reference(a.data, b.data), rtol=1e-12)
    assert gradcheck(op, a, b)


@pytest.mark.parametrize("name", UNARY)
@small
@given(shape=st.lists(st.integers(1, 4), max_size=3).map(tuple), seed=st.integers(0, 2**16))
def test_unary_ops_match_numpy(name, shape, seed):
    op, reference = UNARY[name]
    a = positive(shape, seed)
    np.testing.assert_allclose(op(a).data, reference(a.data), rtol=1e-12)
    assert gradcheck(op, a)


@st.composite
def matmul_shapes(draw):
    m, k, n = draw(st.integers(1, 4)), draw(st.integers(1, 4)), draw(st.integers(1, 4))
    batch = draw(mutually_broadcastable_shapes(num_shapes=2, max_dims=2, max_side=3))
    a_shape, b_shape = batch.input_shapes[0] + (m, k), batch.input_shapes[1] + (k, n)
    a_shape = (k,) if draw(st.booleans()) and not batch.input_shapes[0] else a_shape
    b_shape = (k,) if draw(st.booleans()) and not batch.input_shapes[1] else b_shape
    return a_shape, b_shape


@small
@given(shapes=matmul_shapes(), seed=st.integers(0, 2**16))
def test_matmul_broadcasts_batch_axes_like_numpy(shapes, seed):
    rng = np.random.default_rng(seed)
    a, b = (Tensor(rng.standard_normal(s), requires_grad=True) for s in shapes)
    np.testing.assert_allclose((a @ b).data, np.matmul(a.data, b.data), rtol=1e-12)
    assert gradcheck(lambda x, y: x @ y, a, b)


@small
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple), seed=st.integers(0, 2**16),
       keepdims=st.booleans())
def test_reductions_over_every_axis_match_numpy(shape, seed, keepdims):
    a = Tensor(np.random.default_rng(seed).standard_normal(shape), requires_grad=True)
    for axis in [None, *range(-len(shape), len(shape))]:
        for method in ("sum", "mean", "max"):
            op = lambda x: getattr(x, method)(axis=axis, keepdims=keepdims)  # noqa: E731
            expected = getattr(np, method)(a.data, axis=axis, keepdims=keepdims)
            np.testing.assert_allclose(op(a).data, expected, rtol=1e-12)
            assert gradcheck(op, a)
