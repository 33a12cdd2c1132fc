"""Embedding lookup: E[t] = W[ids[t]], and the scatter-add VJP ∂L/∂W[i] = Σ_{ids[t] = i} g[t],
in the plain form (`np.add.at`) and the engine room's (a sparse matrix product)."""
import contextlib

import numpy as np
import pytest

import autograd
import autograd.functional as F
from autograd import Tensor, gradcheck
from autograd.engine_room.sparse_embedding_grad import SparseGradEmbedding
from autograd.functional.embedding import Embedding

FORMS = {"engine room": (contextlib.nullcontext, SparseGradEmbedding), "plain": (autograd.plain, Embedding)}


def weight(vocab=7, d=4, dtype=np.float64):
    return Tensor(np.random.default_rng(0).standard_normal((vocab, d)).astype(dtype), requires_grad=True)


def test_output_has_shape_ids_shape_plus_d_and_holds_the_picked_rows():
    w = weight()
    ids = np.array([[0, 3, 3, 6, 1], [2, 2, 5, 4, 0]])
    out = F.embedding(w, ids)
    assert out.shape == (2, 5, 4)
    np.testing.assert_array_equal(out.data[1, 2], w.data[5])
    np.testing.assert_array_equal(out.data, w.data[ids])


@pytest.mark.parametrize("form", FORMS)
def test_an_id_used_three_times_gets_three_times_the_gradient_row(form):
    w = weight()
    row = np.array([1.0, -2.0, 0.5, 3.0])
    mode, lookup = FORMS[form]
    with mode():
        out = F.embedding(w, np.array([1, 3, 1, 1]))
    assert type(out.creator) is lookup
    out.backward(np.tile(row, (4, 1)))
    np.testing.assert_array_equal(w.grad[1], 3 * row)
    np.testing.assert_array_equal(w.grad[3], row)
    np.testing.assert_array_equal(np.delete(w.grad, [1, 3], axis=0), 0)


@pytest.mark.parametrize("form", FORMS)
def test_gradient_with_repeated_ids_matches_finite_differences(form):
    ids = np.array([[0, 2, 2], [4, 0, 2]])
    mode, _ = FORMS[form]

    def lookup(w):
        with mode():
            return F.embedding(w, ids)

    assert gradcheck(lookup, weight(vocab=5, d=3))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_the_sparse_product_gives_the_plain_scatter_add_sums_bit_for_bit(dtype):
    """∂L/∂W = Xᵀ G with X the sparse one-hot matrix adds each row in the order of t, as the
    plain form's np.add.at does: the same sums to the last bit (float16 summed in float32, then
    rounded), and the same values forward."""
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 7, (5, 40))                                     # every id many times, some never
    g = rng.standard_normal((5, 40, 6)).astype(dtype)
    w = rng.standard_normal((9, 6)).astype(dtype)
    results = []
    for mode, _ in FORMS.values():
        weight = Tensor(w.copy(), requires_grad=True)
        with mode():
            out = F.embedding(weight, ids)
        out.backward(g)
        assert weight.grad.dtype == dtype and weight.grad.flags.c_contiguous
        results.append((out.data, weight.grad))
    (fused_out, fused_grad), (plain_out, plain_grad) = results
    np.testing.assert_array_equal(plain_out, fused_out)
    np.testing.assert_array_equal(plain_grad, fused_grad)


def test_ids_may_be_a_tensor_or_a_list():
    w = weight()
    np.testing.assert_array_equal(F.embedding(w, Tensor(np.array([1, 2]))).data, w.data[[1, 2]])
    np.testing.assert_array_equal(F.embedding(w, [[6]]).data, w.data[[[6]]])


def test_float32_stays_float32_in_values_and_gradient():
    w = weight(dtype=np.float32)
    out = F.embedding(w, np.array([0, 0, 5]))
    out.backward(np.ones((3, 4), np.float32))
    assert out.dtype == np.float32 and w.grad.dtype == np.float32


@pytest.mark.parametrize("bad", [7, -1])
def test_an_id_outside_the_vocabulary_is_a_value_error_naming_it(bad):
    with pytest.raises(ValueError, match=rf"id {bad} at position \(1, 0\).*\[0, 7\)"):
        F.embedding(weight(vocab=7), np.array([[0, 1], [bad, 2]]))


def test_non_integer_ids_are_a_value_error_naming_the_dtype():
    with pytest.raises(ValueError, match="integer array.*float64"):
        F.embedding(weight(), np.array([0.0, 1.0]))


def test_a_weight_that_is_not_a_matrix_is_a_value_error():
    with pytest.raises(ValueError, match=r"\(vocab, d\).*\(7,\)"):
        F.embedding(Tensor(np.ones(7), requires_grad=True), np.array([0]))
