"""Masks (thesis §1.2.5, eq. (10)): the causal matrix M, padding masks, their combinations, and
what they do inside attention: no leak from future tokens, zero weight on padding, no NaN for a
query with nothing to attend to."""
import numpy as np
import pytest

from autograd import Tensor
from numpy_transformer.attention import MultiHeadAttention, scaled_dot_product_attention
from numpy_transformer.masks import (additive_mask, causal_mask, cross_attention_mask, padding_mask,
                                     self_attention_mask)

PAD = 0
IDS = np.array([[5, 3, 7, 2, 9],
                [4, 8, 6, PAD, PAD]])


def rng(seed=0):
    return np.random.default_rng(seed)


def test_causal_mask_is_true_on_and_below_the_diagonal():
    expected = np.array([[1, 0, 0, 0],
                         [1, 1, 0, 0],
                         [1, 1, 1, 0],
                         [1, 1, 1, 1]], dtype=bool)
    np.testing.assert_array_equal(causal_mask(4), expected)


def test_additive_form_of_the_causal_mask_is_the_thesis_matrix_m():
    n = 5
    M = np.zeros((n, n), np.float32)
    for i in range(n):
        for j in range(i + 1, n):
            M[i, j] = -np.inf
    mask = additive_mask(causal_mask(n))
    np.testing.assert_array_equal(mask, M)
    assert mask.dtype == np.float32


def test_additive_mask_refuses_a_non_boolean_mask():
    with pytest.raises(TypeError, match="boolean"):
        additive_mask(np.ones((2, 2)))


def test_padding_mask_is_true_at_real_tokens_with_shape_batch_1_1_n():
    mask = padding_mask(IDS, PAD)
    assert mask.shape == (2, 1, 1, 5)
    np.testing.assert_array_equal(mask[:, 0, 0], IDS != PAD)


def test_encoder_self_and_cross_attention_masks_are_the_source_padding():
    np.testing.assert_array_equal(self_attention_mask(IDS, PAD), padding_mask(IDS, PAD))
    np.testing.assert_array_equal(cross_attention_mask(IDS, PAD), padding_mask(IDS, PAD))


def test_decoder_self_attention_mask_combines_padding_and_causality():
    mask = self_attention_mask(IDS, PAD, causal=True)
    assert mask.shape == (2, 1, 5, 5)
    for b in range(2):
        for i in range(5):
            for j in range(5):
                assert mask[b, 0, i, j] == (j <= i and IDS[b, j] != PAD)


@pytest.mark.parametrize("ids", [np.array([1, 2, 3]), np.ones((2, 3))])
def test_ids_must_be_a_two_dimensional_integer_array(ids):
    with pytest.raises(ValueError, match=r"integer array of shape \(batch, n\)"):
        padding_mask(ids, PAD)


def test_boolean_mask_gives_softmax_of_m_plus_scaled_scores_eq_10():
    q, k, v = (rng(s).standard_normal((4, 3)) for s in (1, 2, 3))
    scores = q @ k.T / np.sqrt(3) + additive_mask(causal_mask(4), np.float64)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    out, w = scaled_dot_product_attention(Tensor(q), Tensor(k), Tensor(v), causal_mask(4))
    np.testing.assert_allclose(w.data, weights, rtol=1e-14)
    np.testing.assert_allclose(out.data, weights @ v, rtol=1e-14)


def test_future_tokens_do_not_change_past_outputs():
    attention = MultiHeadAttention(8, 2, rng()).astype(np.float64)
    x = rng(1).standard_normal((2, 6, 8))
    changed = x.copy()
    t = 2
    changed[:, t + 1:] = rng(2).standard_normal((2, 6 - t - 1, 8))
    before = attention(Tensor(x), mask=causal_mask(6)).data
    after = attention(Tensor(changed), mask=causal_mask(6)).data
    np.testing.assert_array_equal(after[:, :t + 1], before[:, :t + 1])
    assert not np.allclose(after[:, t + 1:], before[:, t + 1:])


def test_without_the_causal_mask_future_tokens_do_change_past_outputs():
    attention = MultiHeadAttention(8, 2, rng()).astype(np.float64)
    x = rng(1).standard_normal((1, 4, 8))
    changed = x.copy()
    changed[:, 3] += 1
    assert not np.allclose(attention(Tensor(x)).data[:, 0], attention(Tensor(changed)).data[:, 0])


def test_padded_keys_get_exactly_zero_weight_and_do_not_affect_the_output():
    attention = MultiHeadAttention(8, 2, rng()).astype(np.float64)
    x = rng(1).standard_normal((2, 5, 8))
    out = attention(Tensor(x), mask=self_attention_mask(IDS, PAD)).data
    np.testing.assert_array_equal(attention.last_weights[1, :, :, 3:], 0)
    assert np.all(attention.last_weights[1, :, :, :3] > 0)
    np.testing.assert_allclose(attention.last_weights.sum(-1), 1, rtol=1e-14)
    x[1, 3:] = 100 * rng(2).standard_normal((2, 8))
    changed = attention(Tensor(x), mask=self_attention_mask(IDS, PAD)).data
    np.testing.assert_allclose(changed[1, :3], out[1, :3], rtol=1e-13)


def test_a_fully_masked_row_gives_zero_weights_zero_output_and_finite_gradients():
    q, k, v = (Tensor(rng(s).standard_normal((3, 4)), requires_grad=True) for s in (1, 2, 3))
    mask = np.ones((3, 3), dtype=bool)
    mask[1] = False
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    np.testing.assert_array_equal(weights.data[1], 0)
    np.testing.assert_array_equal(out.data[1], 0)
    out.backward(np.ones((3, 4)))
    for t in (q, k, v):
        assert np.all(np.isfinite(t.grad))
    np.testing.assert_array_equal(q.grad[1], 0)
