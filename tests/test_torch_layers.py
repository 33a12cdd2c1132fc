"""Our layers against PyTorch in float64: layer norm, embedding, integer-array indexing and
broadcast matmul, values and gradients."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

import autograd.functional as F  # noqa: E402
from autograd import Tensor  # noqa: E402

TOLERANCE = dict(rtol=1e-7, atol=1e-7)


def ours(fn, arrays, upstream):
    """fn's value and the gradients of every array, with the engine."""
    tensors = [Tensor(a, requires_grad=True) for a in arrays]
    out = fn(*tensors)
    out.backward(upstream)
    return out.data, [t.grad for t in tensors]


def theirs(fn, arrays, upstream):
    """fn's value and the gradients of every array, with PyTorch."""
    tensors = [torch.tensor(a, requires_grad=True) for a in arrays]
    out = fn(*tensors)
    out.backward(torch.from_numpy(np.asarray(upstream)))
    return out.detach().numpy(), [t.grad.numpy() for t in tensors]


def assert_same(fn_ours, fn_theirs, arrays, seed=0):
    upstream = np.random.default_rng(seed).standard_normal(fn_ours(*map(Tensor, arrays)).shape)
    value, grads = ours(fn_ours, arrays, upstream)
    expected_value, expected_grads = theirs(fn_theirs, arrays, upstream)
    np.testing.assert_allclose(value, expected_value, **TOLERANCE)
    assert len(grads) == len(expected_grads)
    for grad, expected in zip(grads, expected_grads):
        np.testing.assert_allclose(grad, expected, **TOLERANCE)


def random(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


@pytest.mark.parametrize("eps", [1e-5, 1e-6])
@pytest.mark.parametrize("shape", [(6,), (3, 6), (2, 4, 6)])
@pytest.mark.parametrize("fn", [F.layer_norm, F.layer_norm_composite], ids=["fused", "composite"])
def test_torch_variant_matches_torch_layer_norm(fn, shape, eps):
    arrays = [random(*shape, seed=1), 1 + random(6, seed=2), random(6, seed=3)]
    assert_same(lambda x, w, b: fn(x, w, b, eps=eps, variant="torch"),
                lambda x, w, b: torch.nn.functional.layer_norm(x, (6,), w, b, eps=eps), arrays)


@pytest.mark.parametrize("fn", [F.layer_norm, F.layer_norm_composite], ids=["fused", "composite"])
def test_thesis_variant_matches_equation_2_differentiated_by_torch(fn):
    def eq2(x, w, b):
        mu = x.mean(dim=-1, keepdim=True)
        return w * (x - mu) / (x.std(dim=-1, correction=0, keepdim=True) + 1e-6) + b

    arrays = [random(2, 3, 6, seed=4), 1 + random(6, seed=5), random(6, seed=6)]
    assert_same(lambda x, w, b: fn(x, w, b), eq2, arrays)


def test_embedding_matches_torch_with_repeated_indices():
    ids = np.array([[0, 3, 3, 1], [3, 0, 4, 3]])
    assert_same(lambda w: F.embedding(w, ids),
                lambda w: torch.nn.functional.embedding(torch.from_numpy(ids), w), [random(5, 3, seed=7)])


def test_indexing_with_a_repeated_integer_list_matches_torch():
    assert_same(lambda x: x[[0, 2, 0, 0]], lambda x: x[[0, 2, 0, 0]], [random(3, 4, seed=8)])


def test_indexing_with_row_and_column_arrays_matches_torch():
    rows, cols = np.array([[0, 1], [0, 0]]), np.array([[2, 2], [2, 3]])
    assert_same(lambda x: x[rows, cols], lambda x: x[torch.from_numpy(rows), torch.from_numpy(cols)],
                [random(3, 4, seed=9)])


@pytest.mark.parametrize("shape_a, shape_b", [
    ((2, 1, 3, 4), (5, 4, 6)),
    ((4,), (4,)),
    ((4,), (4, 6)),
    ((3, 4), (4,)),
    ((2, 3, 4), (4,)),
    ((4,), (5, 4, 6)),
])
def test_matmul_broadcasting_matches_torch(shape_a, shape_b):
    assert_same(lambda a, b: a @ b, lambda a, b: a @ b, [random(*shape_a, seed=10), random(*shape_b, seed=11)])
