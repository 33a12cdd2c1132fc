"""Scaled dot-product attention (thesis eqs. (5), (6), (10)) and multi-head attention
(eqs. (3), (4), (7)): values against NumPy written from the equations, gradients against finite
differences, the head split, permutation invariance, and the key/value cache."""
import numpy as np
import pytest

from autograd import Tensor, gradcheck, no_grad
from numpy_transformer.attention import (MultiHeadAttention, merge_heads, scaled_dot_product_attention,
                                         split_heads)
from autograd.engine_room.fused_attention_weights import FusedAttentionWeights
from numpy_transformer.attention.scaled_dot_product import attention_weights_composite
from numpy_transformer.masks import causal_mask, padding_mask
from numpy_transformer.nn import Dropout


def rng(seed=0):
    return np.random.default_rng(seed)


def tensor(*shape, seed=0, dtype=np.float64):
    return Tensor(rng(seed).standard_normal(shape).astype(dtype), requires_grad=True)


def softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention_eq5(q, k, v):
    """softmax(Q Kᵀ / √d_k) V in NumPy."""
    return softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])) @ v


# --- scaled dot-product attention --------------------------------------------------------

def test_scores_are_divided_by_the_square_root_of_d_k():
    q = Tensor(np.ones((1, 4)))
    k = Tensor(np.array([[1.0, 1, 1, 1], [0, 0, 0, 0]]))
    _, weights = scaled_dot_product_attention(q, k, k)
    e2 = np.exp(2.0)  # q·k₁ / √4 = 4 / 2
    np.testing.assert_allclose(weights.data, [[e2 / (e2 + 1), 1 / (e2 + 1)]], rtol=1e-15)


@pytest.mark.parametrize("q_shape, k_shape, v_shape", [
    ((4, 5), (6, 5), (6, 3)),
    ((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 7)),
    ((2, 3, 4, 5), (2, 1, 6, 5), (6, 7)),
])
def test_attention_matches_equation_5_and_its_weights_equation_6(q_shape, k_shape, v_shape):
    q, k, v = tensor(*q_shape, seed=1), tensor(*k_shape, seed=2), tensor(*v_shape, seed=3)
    out, weights = scaled_dot_product_attention(q, k, v)
    np.testing.assert_allclose(out.data, attention_eq5(q.data, k.data, v.data), rtol=1e-13)
    np.testing.assert_allclose(weights.data.sum(-1), 1, rtol=1e-14)
    assert out.shape == (*np.broadcast_shapes(q_shape[:-2], k_shape[:-2], v_shape[:-2]), q_shape[-2], v_shape[-1])


def test_attention_gradients_without_a_mask():
    q, k, v = tensor(2, 3, 4, seed=1), tensor(2, 5, 4, seed=2), tensor(2, 5, 3, seed=3)
    assert gradcheck(lambda q, k, v: scaled_dot_product_attention(q, k, v)[0], q, k, v)


def test_attention_gradients_with_a_causal_and_padding_mask_including_an_empty_row():
    q, k, v = tensor(2, 4, 3, seed=1), tensor(2, 4, 3, seed=2), tensor(2, 4, 2, seed=3)
    mask = causal_mask(4) & np.array([[[False, True, True, True]], [[True, True, True, True]]])
    assert not mask[0, 0].any()
    assert gradcheck(lambda q, k, v: scaled_dot_product_attention(q, k, v, mask)[0], q, k, v)
    assert gradcheck(lambda q, k, v: scaled_dot_product_attention(q, k, v, mask)[1], q, k, v)


def test_dropout_acts_on_the_weights_and_the_returned_weights_are_before_dropout():
    q, k, v = tensor(3, 4, seed=1), tensor(5, 4, seed=2), tensor(5, 2, seed=3)
    dropout = Dropout(0.5, rng(4))
    out, weights = scaled_dot_product_attention(q, k, v, dropout=dropout)
    np.testing.assert_allclose(weights.data.sum(-1), 1, rtol=1e-14)
    dropout.rng = rng(4)
    np.testing.assert_allclose(out.data, dropout(weights).data @ v.data, rtol=1e-14)
    assert not np.allclose(out.data, weights.data @ v.data)


@pytest.mark.parametrize("q_shape, k_shape, mask", [
    ((2, 3, 4, 5), (2, 3, 4, 5), causal_mask(4) & np.array([False, True, True, True])),   # an empty row
    ((2, 3, 4, 5), (2, 1, 6, 5), np.array([True, True, False, True, True, False])[None, None, None]),
    ((4, 5), (2, 3, 6, 5), None),
])
def test_fused_attention_weights_agree_with_the_composite_in_values_and_gradients(q_shape, k_shape, mask):
    """The engine room's `FusedAttentionWeights` against the plain `attention_weights_composite`:
    the same operations in float64 but for the order of the VJP's sums, so equal to rounding."""
    q, k = tensor(*q_shape, seed=1), tensor(*k_shape, seed=2)
    upstream = rng(3).standard_normal(np.broadcast_shapes(q_shape[:-2], k_shape[:-2]) + (q_shape[-2], k_shape[-2]))
    results = []
    for weights in (FusedAttentionWeights.apply(q, k, allowed=mask), attention_weights_composite(q, k, mask)):
        weights.backward(upstream)
        results.append((weights.data, q.grad, k.grad))
        q.grad = k.grad = None
    for fused, composite in zip(*results):
        np.testing.assert_allclose(fused, composite, rtol=1e-12, atol=1e-14)


def test_fused_attention_weights_gradcheck_with_a_mask_and_broadcast_heads():
    mask = causal_mask(4) & np.array([[[[False, True, True, True]]], [[[True, True, True, True]]]])
    q, k = tensor(2, 3, 4, 3, seed=1), tensor(2, 1, 4, 3, seed=2)
    assert gradcheck(lambda q, k: FusedAttentionWeights.apply(q, k, allowed=mask), q, k)


@pytest.mark.parametrize("shapes, message", [
    (((3, 4), (5, 6), (5, 2)), r"q and k must have the same last dimension d_k, got q \(3, 4\), k \(5, 6\)"),
    (((3, 4), (5, 4), (6, 2)), r"k and v must have the same number of positions n_k.*v \(6, 2\)"),
    (((4,), (5, 4), (5, 2)), r"at least 2 axes.*q \(4,\)"),
    (((2, 3, 4), (3, 5, 4), (3, 5, 2)), r"leading \(batch, head\) axes.*q \(2, 3, 4\), k \(3, 5, 4\)"),
])
def test_shape_errors_name_q_k_v_and_their_shapes(shapes, message):
    q, k, v = (tensor(*s) for s in shapes)
    with pytest.raises(ValueError, match=message):
        scaled_dot_product_attention(q, k, v)


def test_a_mask_that_does_not_fit_the_scores_is_a_value_error():
    q, k, v = tensor(3, 4), tensor(5, 4), tensor(5, 2)
    with pytest.raises(ValueError, match=r"mask of shape \(3, 3\) does not broadcast to the scores' shape \(3, 5\)"):
        scaled_dot_product_attention(q, k, v, causal_mask(3))


def test_an_additive_mask_is_refused_in_place_of_a_boolean_one():
    q, k, v = tensor(3, 4), tensor(3, 4), tensor(3, 2)
    with pytest.raises(TypeError, match="boolean"):
        scaled_dot_product_attention(q, k, v, np.zeros((3, 3)))


# --- heads -------------------------------------------------------------------------------

def test_split_heads_gives_head_h_the_columns_h_dk_to_h_plus_1_dk_eq_3():
    x = rng().standard_normal((2, 5, 12))
    heads = split_heads(Tensor(x), 3).data
    assert heads.shape == (2, 3, 5, 4)
    for h in range(3):
        np.testing.assert_array_equal(heads[:, h], x[:, :, 4 * h:4 * (h + 1)])


def test_split_heads_refuses_a_width_not_divisible_by_the_heads():
    with pytest.raises(ValueError, match=r"\(2, 5, 12\) is not divisible by n_heads=5"):
        split_heads(tensor(2, 5, 12), 5)


def test_merge_heads_undoes_split_heads_exactly():
    x = rng().standard_normal((2, 5, 12))
    np.testing.assert_array_equal(merge_heads(split_heads(Tensor(x), 4)).data, x)
    h = rng(1).standard_normal((2, 4, 5, 3))
    np.testing.assert_array_equal(split_heads(merge_heads(Tensor(h)), 4).data, h)


# --- multi-head attention ----------------------------------------------------------------

def mha(d_model=8, n_heads=2, seed=0, **kwargs):
    """A float64 MultiHeadAttention with non-zero biases (a forgotten bias must show)."""
    attention = MultiHeadAttention(d_model, n_heads, rng(seed), **kwargs).astype(np.float64)
    for name, p in attention.named_parameters():
        if name.endswith("bias"):
            p.data = 0.1 * rng(seed + 1).standard_normal(p.shape)
    return attention


def multi_head_eqs_3_to_7(attention, x, z, mask=None):
    """Eqs. (3)–(7) with one explicit loop over heads, in NumPy: slice the columns of each
    projection, attend, concatenate, project with W_c."""
    def project(linear, a):
        return a @ linear.weight.data + linear.bias.data

    Q, K, V = project(attention.W_q, x), project(attention.W_k, z), project(attention.W_v, z)
    d_k, heads = attention.d_k, []
    for h in range(attention.n_heads):
        columns = slice(h * d_k, (h + 1) * d_k)
        scores = Q[..., columns] @ np.swapaxes(K[..., columns], -1, -2) / np.sqrt(d_k)
        if mask is not None:
            scores = np.where(mask[:, 0], scores, -np.inf)
        heads.append(softmax(scores) @ V[..., columns])
    return project(attention.W_c, np.concatenate(heads, axis=-1))


def test_self_attention_matches_the_equations_head_by_head():
    attention = mha(12, 3)
    x = rng(5).standard_normal((2, 4, 12))
    mask = padding_mask(np.array([[1, 2, 3, 0], [1, 2, 3, 4]]), 0)
    out = attention(Tensor(x), mask=mask).data
    np.testing.assert_allclose(out, multi_head_eqs_3_to_7(attention, x, x, mask), rtol=1e-12, atol=1e-14)


def test_cross_attention_takes_keys_and_values_from_the_memory():
    attention = mha(8, 2)
    x, memory = rng(5).standard_normal((2, 3, 8)), rng(6).standard_normal((2, 6, 8))
    out = attention(Tensor(x), Tensor(memory)).data
    assert out.shape == (2, 3, 8) and attention.last_weights.shape == (2, 2, 3, 6)
    np.testing.assert_allclose(out, multi_head_eqs_3_to_7(attention, x, memory), rtol=1e-12, atol=1e-14)


def test_one_head_with_identity_projections_is_plain_scaled_dot_product_attention():
    attention = MultiHeadAttention(6, 1, rng()).astype(np.float64)
    for linear in (attention.W_q, attention.W_k, attention.W_v, attention.W_c):
        linear.weight.data, linear.bias.data = np.eye(6), np.zeros(6)
    x, z = tensor(2, 3, 6, seed=1), tensor(2, 5, 6, seed=2)
    expected, weights = scaled_dot_product_attention(x, z, z)
    np.testing.assert_allclose(attention(x, z).data, expected.data, rtol=1e-14)
    np.testing.assert_allclose(attention.last_weights[:, 0], weights.data, rtol=1e-14)


def test_last_weights_are_per_head_and_each_row_sums_to_one():
    attention = mha(8, 4)
    attention(tensor(3, 5, 8))
    assert isinstance(attention.last_weights, np.ndarray)
    assert attention.last_weights.shape == (3, 4, 5, 5)
    np.testing.assert_allclose(attention.last_weights.sum(-1), 1, rtol=1e-14)


def test_permuting_keys_and_values_together_leaves_the_output_unchanged():
    attention = mha(8, 2)
    x, memory = rng(5).standard_normal((2, 3, 8)), rng(6).standard_normal((2, 6, 8))
    mask = padding_mask(np.array([[1, 2, 3, 4, 0, 0], [1, 2, 3, 4, 5, 6]]), 0)
    permutation = rng(7).permutation(6)
    out = attention(Tensor(x), Tensor(memory), mask).data
    permuted = attention(Tensor(x), Tensor(memory[:, permutation]), mask[..., permutation]).data
    np.testing.assert_allclose(permuted, out, rtol=1e-12, atol=1e-14)


def test_permuting_the_positions_of_self_attention_permutes_its_output():
    attention = mha(8, 2)
    x = rng(5).standard_normal((2, 5, 8))
    permutation = rng(7).permutation(5)
    out = attention(Tensor(x)).data
    np.testing.assert_allclose(attention(Tensor(x[:, permutation])).data, out[:, permutation], rtol=1e-12, atol=1e-14)


def test_decoding_token_by_token_with_the_cache_equals_the_full_causal_computation():
    attention = mha(8, 2)
    x = rng(5).standard_normal((2, 6, 8))
    full = attention(Tensor(x), mask=causal_mask(6)).data
    cache = {}
    for t in range(6):
        step = attention(Tensor(x[:, t:t + 1]), cache=cache).data
        np.testing.assert_allclose(step[:, 0], full[:, t], rtol=1e-12, atol=1e-14)
        assert cache["k"].shape == cache["v"].shape == (2, 2, t + 1, 4)


def test_a_cache_filled_by_a_prefix_then_single_steps_equals_the_full_computation():
    attention = mha(8, 2)
    x = rng(5).standard_normal((1, 5, 8))
    full = attention(Tensor(x), mask=causal_mask(5)).data
    cache = {}
    prefix = attention(Tensor(x[:, :3]), mask=causal_mask(3), cache=cache).data
    steps = [attention(Tensor(x[:, t:t + 1]), mask=causal_mask(5)[t:t + 1, :t + 1], cache=cache).data
             for t in (3, 4)]
    np.testing.assert_allclose(np.concatenate([prefix] + steps, axis=1), full, rtol=1e-12, atol=1e-14)


def test_cross_attention_cache_projects_the_memory_once():
    attention = mha(8, 2)
    x, memory = rng(5).standard_normal((2, 4, 8)), rng(6).standard_normal((2, 6, 8))
    full = attention(Tensor(x), Tensor(memory)).data
    cache = {}
    first = attention(Tensor(x[:, :1]), Tensor(memory), cache=cache).data
    keys = cache["k"]
    later = attention(Tensor(x[:, 1:]), Tensor(np.zeros_like(memory)), cache=cache).data
    assert cache["k"] is keys and keys.shape == (2, 2, 6, 4)
    np.testing.assert_allclose(np.concatenate([first, later], axis=1), full, rtol=1e-12, atol=1e-14)


def test_the_cache_works_under_no_grad():
    attention = mha(8, 2)
    x = rng(5).standard_normal((1, 3, 8))
    cache = {}
    with no_grad():
        outputs = [attention(Tensor(x[:, t:t + 1]), cache=cache) for t in range(3)]
    assert not any(o.requires_grad for o in outputs) and not cache["k"].requires_grad


def test_attention_dropout_is_active_in_training_only():
    attention = mha(8, 2, dropout=0.5)
    plain = mha(8, 2)
    x = tensor(2, 5, 8)
    trained = attention(x).data
    np.testing.assert_allclose(attention.last_weights.sum(-1), 1, rtol=1e-14)
    attention.eval()
    np.testing.assert_array_equal(attention(x).data, plain(x).data)
    assert not np.allclose(trained, plain(x).data)


def test_self_attention_gradients_for_input_and_every_parameter():
    attention = mha(8, 2)
    x = tensor(2, 3, 8)
    mask = causal_mask(3)
    assert gradcheck(lambda x, *params: attention(x, mask=mask), x, *attention.parameters())


def test_cross_attention_gradients_for_both_inputs_and_every_parameter():
    attention = mha(8, 2)
    x, memory = tensor(2, 3, 8, seed=1), tensor(2, 4, 8, seed=2)
    mask = padding_mask(np.array([[1, 2, 0, 0], [1, 2, 3, 4]]), 0)
    assert gradcheck(lambda x, memory, *params: attention(x, memory, mask), x, memory, *attention.parameters())


def test_gradients_with_seeded_attention_dropout_in_training():
    attention = mha(8, 2, dropout=0.3)
    x = tensor(2, 3, 8)

    def forward(x, *params):
        attention.dropout.rng = rng(9)
        return attention(x)
    assert gradcheck(forward, x, *attention.parameters(), mode="projection")


def test_parameters_are_named_after_the_thesis_matrices():
    names = [name for name, _ in MultiHeadAttention(8, 2, rng(), bias=False).named_parameters()]
    assert names == ["W_q.weight", "W_k.weight", "W_v.weight", "W_c.weight"]


@pytest.mark.parametrize("d_model, n_heads", [(10, 4), (8, 0)])
def test_d_model_not_divisible_by_n_heads_names_both(d_model, n_heads):
    with pytest.raises(ValueError, match=f"d_model={d_model} must be divisible by n_heads={n_heads}"):
        MultiHeadAttention(d_model, n_heads, rng())


def test_a_query_of_the_wrong_width_is_a_value_error():
    with pytest.raises(ValueError, match=r"d_in=8, got shape \(2, 3, 6\)"):
        MultiHeadAttention(8, 2, rng())(tensor(2, 3, 6, dtype=np.float32))


@pytest.mark.parametrize("cross", [False, True])
def test_float32_is_preserved_in_outputs_weights_and_gradients(cross):
    attention = MultiHeadAttention(8, 2, rng(), dropout=0.1)
    x = tensor(2, 3, 8, dtype=np.float32)
    memory = tensor(2, 5, 8, seed=1, dtype=np.float32) if cross else None
    mask = padding_mask(np.array([[1, 2, 3, 0, 0], [1, 2, 3, 4, 5]]), 0) if cross else causal_mask(3)
    out = attention(x, memory, mask, cache={})
    out.backward(np.ones(out.shape, np.float32))
    assert out.dtype == attention.last_weights.dtype == x.grad.dtype == np.float32
    assert all(p.grad.dtype == np.float32 for p in attention.parameters())
