"""The attention variants of thesis chapter 2 (§2.1): each efficient form against a dense
reference written here from the equations (masked softmax attention, or the O(n²) kernel
formula (13)), in float64 to 1e-8, with gradient checks; the pattern builders of Figure 7."""
import numpy as np
import pytest

from autograd import Tensor, gradcheck
from numpy_transformer.attention import (AttentionGraph, bigbird_pattern, blockwise_attention, causal_linear_attention,
                                         dilated_window_pattern, draw_figure_7, feature_map, global_tokens_pattern,
                                         linear_attention, linear_attention_step, linformer_attention, random_features,
                                         random_pattern, recurrent_linear_attention, scaled_dot_product_attention,
                                         sliding_window_attention, sliding_window_pattern, sparse_attention)
from numpy_transformer.attention import sparse as sparse_module
from numpy_transformer.masks import causal_mask

TIGHT = dict(rtol=1e-8, atol=1e-10)


def rng(seed=0):
    return np.random.default_rng(seed)


def tensor(*shape, seed=0, dtype=np.float64, scale=1.0):
    return Tensor((scale * rng(seed).standard_normal(shape)).astype(dtype), requires_grad=True)


def qkv(n=9, d=4, leading=(2, 3), d_v=None, seed=0, dtype=np.float64):
    return (tensor(*leading, n, d, seed=seed, dtype=dtype), tensor(*leading, n, d, seed=seed + 1, dtype=dtype),
            tensor(*leading, n, d_v or d, seed=seed + 2, dtype=dtype))


def masked_attention(q, k, v, allowed):
    """softmax(M + Q Kᵀ / √d) V in NumPy (eqs. (5), (10)); a row with nothing allowed gives zeros."""
    q, k, v = (getattr(a, "data", a) for a in (q, k, v))
    scores = np.where(allowed, q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]), -np.inf)
    peak = scores.max(axis=-1, keepdims=True)
    e = np.exp(scores - np.where(np.isneginf(peak), 0, peak))
    total = e.sum(axis=-1, keepdims=True)
    return e / np.where(total == 0, 1, total) @ v


def padding(lengths, n):
    """(batch, 1, n): True at the first `length` positions of each sentence; broadcasts over heads."""
    return (np.arange(n) < np.asarray(lengths)[:, None])[:, None, :]


# --- patterns (Figure 7) -------------------------------------------------------------------

def test_a_window_of_3_is_the_diagonal_and_its_two_neighbours():
    i, j = np.indices((6, 6))
    np.testing.assert_array_equal(sliding_window_pattern(6, 3), np.abs(i - j) <= 1)


def test_a_dilated_window_steps_by_the_dilation():
    i, j = np.indices((10, 10))
    expected = (np.abs(i - j) <= 2 * 3) & ((j - i) % 3 == 0)
    np.testing.assert_array_equal(dilated_window_pattern(10, 5, 3), expected)


def test_global_tokens_attend_to_all_and_are_attended_by_all():
    pattern = global_tokens_pattern(6, (0, 4))
    assert pattern[[0, 4]].all() and pattern[:, [0, 4]].all()
    assert pattern.sum() == 2 * 6 + 2 * 6 - 4


def test_random_links_draw_r_distinct_keys_per_query_reproducibly():
    pattern = random_pattern(20, 3, rng(1))
    np.testing.assert_array_equal(pattern.sum(axis=1), 3)
    np.testing.assert_array_equal(pattern, random_pattern(20, 3, rng(1)))


def test_bigbird_is_a_union_of_square_blocks_with_global_window_and_random_blocks():
    pattern = bigbird_pattern(16, 4, rng(2), window_blocks=3, global_blocks=1, random_blocks=1)
    blocks = pattern.reshape(4, 4, 4, 4).transpose(0, 2, 1, 3)
    assert all(b.all() or not b.any() for row in blocks for b in row)
    block_pattern = blocks.any(axis=(2, 3))
    assert block_pattern[0].all() and block_pattern[:, 0].all()
    assert (block_pattern >= sliding_window_pattern(4, 3)).all()


def test_bigbird_crops_its_blocks_when_the_block_size_does_not_divide_n():
    assert bigbird_pattern(10, 4, rng()).shape == (10, 10)


def test_figure_7_is_drawn_to_a_png(tmp_path):
    path = draw_figure_7(tmp_path / "figure7.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --- sparse attention, eq. (11) -------------------------------------------------------------

PATTERNS = {
    "window": lambda n: sliding_window_pattern(n, 3),
    "dilated": lambda n: dilated_window_pattern(n, 3, 2),
    "global": lambda n: global_tokens_pattern(n, (0, 5)),
    "random": lambda n: random_pattern(n, 2, rng(3)),
    "bigbird": lambda n: bigbird_pattern(n, 2, rng(4)),
    "bigbird causal": lambda n: bigbird_pattern(n, 2, rng(4)) & causal_mask(n),
    "window causal": lambda n: sliding_window_pattern(n, 5) & causal_mask(n),
}


@pytest.mark.parametrize("name", PATTERNS)
@pytest.mark.parametrize("lengths", [None, [9, 5]])
def test_sparse_attention_equals_masked_softmax_attention(name, lengths):
    q, k, v = qkv(d_v=3)
    pattern = PATTERNS[name](9)
    key_padding = None if lengths is None else padding(lengths, 9)
    allowed = pattern if key_padding is None else pattern & key_padding[..., None, :]
    out = sparse_attention(q, k, v, pattern, key_padding)
    np.testing.assert_allclose(out.data, masked_attention(q, k, v, allowed), **TIGHT)


def test_sparse_attention_computes_exactly_one_score_per_edge_of_the_pattern():
    q, k, v = qkv(n=40)
    for pattern in (bigbird_pattern(40, 4, rng(5)), sliding_window_pattern(40, 7) & causal_mask(40)):
        out = sparse_attention(q, k, v, pattern)
        assert out.creator.scores_computed == pattern.sum() == AttentionGraph.from_pattern(pattern).n_edges
        assert out.creator.scores_computed < 40 * 40


def test_sparse_attention_in_small_chunks_gives_the_same_values_and_gradients(monkeypatch):
    q, k, v = qkv(n=12, leading=(2,))
    pattern = bigbird_pattern(12, 3, rng(6)) & causal_mask(12)
    whole = sparse_attention(q, k, v, pattern).data
    monkeypatch.setattr(sparse_module, "CHUNK_ENTRIES", 20)
    np.testing.assert_allclose(sparse_attention(q, k, v, pattern).data, whole, **TIGHT)
    assert gradcheck(lambda q, k, v: sparse_attention(q, k, v, pattern), q, k, v)


def test_sparse_attention_gives_zeros_to_a_query_without_keys():
    q, k, v = qkv(n=5, leading=())
    pattern = causal_mask(5)
    pattern[2] = False
    out = sparse_attention(q, k, v, pattern, key_padding=np.array([False, True, True, True, True]))
    np.testing.assert_array_equal(out.data[[0, 2]], 0)


def test_sparse_attention_gradients_with_padding():
    q, k, v = qkv(n=7, leading=(2, 1))
    pattern = bigbird_pattern(7, 2, rng(7))
    key_padding = padding([7, 4], 7)
    assert gradcheck(lambda q, k, v: sparse_attention(q, k, v, pattern, key_padding), q, k, v)


def test_sparse_attention_refuses_a_pattern_of_the_wrong_size():
    q, k, v = qkv(n=5)
    with pytest.raises(ValueError, match=r"pattern is 4 × 4, q and k have 5 positions"):
        sparse_attention(q, k, v, causal_mask(4))


# --- sliding-window attention (Longformer) -------------------------------------------------

def window_reference_pattern(n, window, dilation, causal, global_tokens):
    pattern = dilated_window_pattern(n, window, dilation) | global_tokens_pattern(n, global_tokens)
    return pattern & causal_mask(n) if causal else pattern


@pytest.mark.parametrize("window, dilation", [(1, 1), (3, 1), (4, 1), (5, 2), (3, 4)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("global_tokens", [(), (0,), (2, 7)])
def test_window_attention_equals_masked_attention_over_its_graph(window, dilation, causal, global_tokens):
    q, k, v = qkv(n=10, d_v=3)
    key_padding = padding([10, 6], 10)
    pattern = window_reference_pattern(10, window, dilation, causal, global_tokens)
    out = sliding_window_attention(q, k, v, window, dilation, causal, global_tokens, key_padding)
    np.testing.assert_allclose(out.data, masked_attention(q, k, v, pattern & key_padding[..., None, :]), **TIGHT)


def test_window_attention_equals_sparse_attention_on_the_same_graph():
    q, k, v = qkv(n=16)
    pattern = window_reference_pattern(16, 5, 2, False, (3,))
    np.testing.assert_allclose(sliding_window_attention(q, k, v, 5, 2, global_tokens=(3,)).data,
                               sparse_attention(q, k, v, pattern).data, **TIGHT)


@pytest.mark.parametrize("causal", [False, True])
def test_window_attention_gradients(causal):
    q, k, v = qkv(n=7, leading=(2, 1))
    key_padding = padding([7, 5], 7)
    assert gradcheck(lambda q, k, v: sliding_window_attention(q, k, v, 3, 2, causal, (1,), key_padding), q, k, v)


def test_a_window_wider_than_the_sequence_is_full_attention():
    q, k, v = qkv(n=6)
    np.testing.assert_allclose(sliding_window_attention(q, k, v, 21).data,
                               masked_attention(q, k, v, np.ones((6, 6), bool)), **TIGHT)


@pytest.mark.parametrize("kwargs, message", [
    (dict(window=0), r"window must be a positive integer, got 0"),
    (dict(window=3, dilation=0), r"dilation must be a positive integer, got 0"),
    (dict(window=3, global_tokens=(9,)), r"global tokens must be positions in \[0, 9\), got \[9\]"),
])
def test_window_attention_names_a_bad_argument(kwargs, message):
    with pytest.raises(ValueError, match=message):
        sliding_window_attention(*qkv(), **kwargs)


# --- linear attention, eqs. (12)–(15) -------------------------------------------------------

def numpy_features(x, kind, omega=None):
    """φ of the module docstring, written out in NumPy (queries and keys alike, unshifted)."""
    if kind == "elu":
        return np.where(x > 0, x + 1, np.exp(np.minimum(x, 0)))
    if kind == "taylor":
        unit = x / np.linalg.norm(x, axis=-1, keepdims=True)
        return np.concatenate([np.ones((*x.shape[:-1], 1)), unit], axis=-1)
    x = x / x.shape[-1] ** 0.25
    projection, half_square = x @ omega, 0.5 * (x * x).sum(-1, keepdims=True)
    m = omega.shape[1]
    if kind == "favor":
        return np.exp(projection - half_square) / np.sqrt(m)
    return np.exp(half_square) * np.concatenate([np.cos(projection), np.sin(projection)], axis=-1) / np.sqrt(m)


def kernel_formula_13(q, k, v, kind, omega=None, allowed=True, eps=1e-6):
    """V′_i = Σ_j sim(Q_i, K_j) V_j / Σ_j sim(Q_i, K_j) with sim = φ(q)ᵀφ(k), the O(n²) form."""
    sim = numpy_features(q.data, kind, omega) @ np.swapaxes(numpy_features(k.data, kind, omega), -1, -2)
    sim = np.where(allowed, sim, 0.0)
    return (sim @ v.data) / np.maximum(sim.sum(-1, keepdims=True), eps)


FEATURE_MAPS = ["elu", "taylor", "favor", "fourier"]


def omega_for(kind, d=4, m=16):
    return random_features(d, m, rng(11), np.float64) if kind in ("favor", "fourier") else None


@pytest.mark.parametrize("kind", FEATURE_MAPS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("lengths", [None, [8, 5]])
def test_linear_attention_equals_the_kernel_formula_13(kind, causal, lengths):
    q, k, v = qkv(n=8, d_v=3)
    omega = omega_for(kind)
    key_padding = None if lengths is None else padding(lengths, 8)
    allowed = np.ones((8, 8), bool) if key_padding is None else np.broadcast_to(key_padding[..., None, :], (2, 1, 8, 8))
    allowed = allowed & causal_mask(8) if causal else allowed
    out = linear_attention(q, k, v, kind, causal, key_padding, omega=omega)
    np.testing.assert_allclose(out.data, kernel_formula_13(q, k, v, kind, omega, allowed), **TIGHT)


def test_linear_attention_takes_queries_and_keys_of_different_lengths():
    q, k, v = tensor(2, 3, 4, seed=1), tensor(2, 6, 4, seed=2), tensor(2, 6, 5, seed=3)
    np.testing.assert_allclose(linear_attention(q, k, v).data, kernel_formula_13(q, k, v, "elu"), **TIGHT)


def test_the_taylor_kernel_is_one_plus_the_cosine_of_q_and_k():
    q, k = tensor(5, 4, seed=1), tensor(6, 4, seed=2)
    sim = feature_map(q, "taylor").data @ feature_map(k, "taylor").data.T
    q_hat = q.data / np.linalg.norm(q.data, axis=1, keepdims=True)
    k_hat = k.data / np.linalg.norm(k.data, axis=1, keepdims=True)
    cosine = q_hat @ k_hat.T
    np.testing.assert_allclose(sim, 1 + cosine, **TIGHT)
    assert sim.min() >= 0 and sim.max() <= 2


@pytest.mark.parametrize("kind", FEATURE_MAPS)
@pytest.mark.parametrize("causal", [False, True])
def test_linear_attention_gradients(kind, causal):
    q, k, v = qkv(n=5, leading=(2,), d=3)
    omega = omega_for(kind, d=3, m=4)
    key_padding = np.array([[True] * 5, [True, True, True, False, False]])
    assert gradcheck(lambda q, k, v: linear_attention(q, k, v, kind, causal, key_padding, omega=omega), q, k, v)


@pytest.mark.parametrize("kind", FEATURE_MAPS)
def test_the_recurrent_form_equals_the_causal_form(kind):
    q, k, v = qkv(n=7)
    omega = omega_for(kind)
    causal = linear_attention(q, k, v, kind, causal=True, omega=omega).data
    recurrent, (S, z) = recurrent_linear_attention(q, k, v, kind, omega=omega)
    np.testing.assert_allclose(recurrent.data, causal, **TIGHT)
    assert S.shape[:2] == z.shape[:2] == (2, 3) and S.shape[-1] == 4     # (…, m, d_v): no n in it


def test_the_recurrent_state_has_a_fixed_size_and_continues_the_causal_form():
    q, k, v = qkv(n=7, d_v=5)
    phi_q, phi_k = feature_map(q, "elu", is_query=True), feature_map(k, "elu")
    whole, _ = causal_linear_attention(phi_q, phi_k, v)
    prefix, state = causal_linear_attention(phi_q[..., :4, :], phi_k[..., :4, :], v[..., :4, :])
    assert state[0].shape == (2, 3, 4, 5) and state[1].shape == (2, 3, 4)
    rest = []
    for t in range(4, 7):
        out, state = linear_attention_step(phi_q[..., t, :], phi_k[..., t, :], v[..., t, :], state)
        rest.append(out.data)
    np.testing.assert_allclose(np.concatenate([prefix.data, np.stack(rest, axis=-2)], axis=-2), whole.data, **TIGHT)


def softmax_attention_error(kind, n_features, seed=0, n=64, d=16):
    """Mean |random-feature attention − softmax attention| over the outputs, for q, k, v with
    N(0, 0.25) entries (the variance of the estimates grows like e^{‖q + k‖²/√d}: larger
    queries and keys need many more features, see docs/chapter2.md)."""
    q, k, v = (Tensor(rng(seed + i).standard_normal((n, d)) * 0.5) for i in range(3))
    exact = masked_attention(q, k, v, np.ones((n, n), bool))
    approx = linear_attention(q, k, v, kind, n_features=n_features, rng=rng(100 + seed)).data
    return np.abs(approx - exact).mean()


@pytest.mark.parametrize("kind", ["favor", "fourier"])
def test_random_feature_attention_error_falls_as_the_number_of_features_grows(kind):
    errors = [np.mean([softmax_attention_error(kind, m, seed) for seed in range(3)]) for m in (8, 64, 512)]
    assert errors[0] > 1.5 * errors[1] > 2.25 * errors[2], errors


def test_a_random_feature_map_needs_a_generator_or_omega():
    with pytest.raises(ValueError, match="feature_map='favor' is random: pass rng"):
        linear_attention(*qkv(), "favor")
    with pytest.raises(ValueError, match=r"omega must have shape \(d_k=4, n_features\), got \(3, 8\)"):
        linear_attention(*qkv(), "favor", omega=np.ones((3, 8)))
    with pytest.raises(ValueError, match="feature_map must be one of"):
        linear_attention(*qkv(), "cosine")


def test_causal_linear_attention_needs_one_sequence():
    q, k, v = tensor(3, 4), tensor(5, 4), tensor(5, 2)
    with pytest.raises(ValueError, match=r"linear_attention: is self-attention over one sequence"):
        linear_attention(q, k, v, causal=True)


# --- Linformer, eq. (17) --------------------------------------------------------------------

def test_linformer_with_identity_projections_is_full_attention():
    q, k, v = qkv(n=6, d_v=3)
    identity = np.eye(6)
    np.testing.assert_allclose(linformer_attention(q, k, v, identity, identity).data,
                               masked_attention(q, k, v, True), **TIGHT)


def test_linformer_equals_attention_over_the_projected_keys_and_values():
    q, k, v = qkv(n=7)
    E, F = rng(8).standard_normal((3, 4, 7)), rng(9).standard_normal((3, 4, 7))
    expected = masked_attention(q.data, E @ k.data, F @ v.data, True)
    np.testing.assert_allclose(linformer_attention(q, k, v, E, F).data, expected, **TIGHT)


def test_linformer_zeroes_padded_keys_and_values_before_projecting():
    q, k, v = qkv(n=6, leading=(1,))
    E, F = rng(8).standard_normal((3, 6)), rng(9).standard_normal((3, 6))
    key_padding = np.array([[True, True, True, True, False, False]])
    out = linformer_attention(q, k, v, E, F, key_padding).data
    k2, v2 = k.data.copy(), v.data.copy()
    k2[:, 4:], v2[:, 4:] = 100.0, -100.0
    np.testing.assert_allclose(linformer_attention(q, Tensor(k2), Tensor(v2), E, F, key_padding).data, out, **TIGHT)
    np.testing.assert_allclose(out, linformer_attention(q, k[:, :4], v[:, :4], E[:, :4], F[:, :4]).data, **TIGHT)


def test_linformer_gradients_for_q_k_v_and_the_projections():
    q, k, v = qkv(n=5, leading=(2,), d=3)
    E, F = tensor(2, 5, seed=8), tensor(2, 5, seed=9)
    assert gradcheck(lambda q, k, v, E, F: linformer_attention(q, k, v, E, F, padding([5, 3], 5)[:, 0]),
                     q, k, v, E, F)


def test_linformer_names_a_projection_that_does_not_fit_the_keys():
    with pytest.raises(ValueError, match=r"E must have shape \(…, k_proj, n=9\) .* got \(3, 8\)"):
        linformer_attention(*qkv(), np.ones((3, 8)), np.ones((3, 9)))


# --- block-wise exact attention --------------------------------------------------------------

@pytest.mark.parametrize("block_size", [1, 3, 4, 12, 50])
@pytest.mark.parametrize("causal", [False, True])
def test_blockwise_attention_equals_full_attention(block_size, causal):
    q, k, v = qkv(n=12, d_v=5)
    allowed = causal_mask(12) if causal else True
    np.testing.assert_allclose(blockwise_attention(q, k, v, block_size, causal).data,
                               masked_attention(q, k, v, allowed), **TIGHT)


@pytest.mark.parametrize("block_size", [2, 5])
def test_blockwise_attention_with_a_padding_mask_and_a_fully_masked_row(block_size):
    q, k, v = qkv(n=9)
    mask = np.broadcast_to(padding([9, 6], 9)[:, :, None, :], (2, 1, 9, 9)) & causal_mask(9)
    mask = mask.copy()
    mask[1, 0, 3] = False                                   # query 3 of sentence 2 sees nothing
    out = blockwise_attention(q, k, v, block_size, mask=mask).data
    np.testing.assert_allclose(out, masked_attention(q, k, v, mask), **TIGHT)
    np.testing.assert_array_equal(out[1, :, 3], 0)
    assert not np.isnan(out).any()


def test_blockwise_attention_of_different_query_and_key_lengths():
    q, k, v = tensor(2, 5, 4, seed=1), tensor(2, 11, 4, seed=2), tensor(2, 11, 3, seed=3)
    np.testing.assert_allclose(blockwise_attention(q, k, v, 4, mask=padding([11, 7], 11)).data,
                               masked_attention(q, k, v, padding([11, 7], 11)), **TIGHT)


@pytest.mark.parametrize("causal", [False, True])
def test_blockwise_custom_backward_passes_the_gradient_check(causal):
    q, k, v = qkv(n=7, leading=(2,), d=3)
    mask = padding([7, 4], 7)
    mask_with_empty_row = np.broadcast_to(mask, (2, 7, 7)).copy()
    mask_with_empty_row[0, 2] = False
    for m in (mask, mask_with_empty_row):
        assert gradcheck(lambda q, k, v: blockwise_attention(q, k, v, 3, causal, m), q, k, v)


def test_blockwise_gradients_equal_those_of_the_composite_dense_attention():
    q, k, v = qkv(n=10, d_v=6)
    g = rng(12).standard_normal((2, 3, 10, 6))
    mask = causal_mask(10) & padding([10, 7], 10)[..., None, :]
    gradients = []
    for attention in (lambda: blockwise_attention(q, k, v, 4, mask=mask),
                      lambda: scaled_dot_product_attention(q, k, v, mask)[0]):
        for x in (q, k, v):
            x.grad = None
        attention().backward(g)
        gradients.append([x.grad.copy() for x in (q, k, v)])
    for fused, composite in zip(*gradients):
        np.testing.assert_allclose(fused, composite, **TIGHT)


def test_blockwise_causal_needs_one_sequence_and_a_positive_block():
    with pytest.raises(ValueError, match="block_size must be a positive integer, got 0"):
        blockwise_attention(*qkv(), 0)
    with pytest.raises(ValueError, match="self-attention over one sequence"):
        blockwise_attention(tensor(3, 4), tensor(5, 4), tensor(5, 4), 2, causal=True)


# --- every form -------------------------------------------------------------------------------

FORMS = {
    "sparse": lambda q, k, v: sparse_attention(q, k, v, bigbird_pattern(8, 2, rng(1))),
    "window": lambda q, k, v: sliding_window_attention(q, k, v, 3, global_tokens=(0,)),
    "linear": lambda q, k, v: linear_attention(q, k, v, "favor", causal=True, rng=rng(2)),
    "linformer": lambda q, k, v: linformer_attention(q, k, v, rng(3).standard_normal((4, 8)),
                                                     rng(4).standard_normal((4, 8))),
    "blockwise": lambda q, k, v: blockwise_attention(q, k, v, 3, causal=True),
}


@pytest.mark.parametrize("name", FORMS)
def test_float32_in_float32_out_and_float32_gradients(name):
    q, k, v = qkv(n=8, dtype=np.float32)
    out = FORMS[name](q, k, v)
    out.backward(np.ones(out.shape, np.float32))
    assert out.dtype == q.grad.dtype == k.grad.dtype == v.grad.dtype == np.float32


@pytest.mark.parametrize("name", FORMS)
def test_mismatched_q_and_k_widths_are_named(name):
    q, k, v = tensor(2, 8, 4), tensor(2, 8, 5), tensor(2, 8, 4)
    with pytest.raises(ValueError, match=r"q and k must have the same last dimension d_k, got q \(2, 8, 4\)"):
        FORMS[name](q, k, v)


# --- in the model: MultiHeadAttention(attention=...) and TransformerConfig ---------------------

import autograd.functional as F  # noqa: E402
from autograd import no_grad  # noqa: E402
from autograd.optim import Adam  # noqa: E402
from numpy_transformer.attention import MultiHeadAttention  # noqa: E402
from numpy_transformer.config import TransformerConfig  # noqa: E402
from numpy_transformer.model import Transformer, count_parameters  # noqa: E402
from numpy_transformer.parameter_count import analytic_parameter_count  # noqa: E402

# options with which each variant's graph covers every pair of 6 tokens: it must give full attention
COVERING = {
    "sparse": dict(window=11),
    "window": dict(window=11),
    "bigbird": dict(block_size=2, global_blocks=3),
    "blockwise": dict(block_size=4),
}


def mha(attention="full", seed=0, **options):
    return MultiHeadAttention(8, 2, rng(seed), attention=attention, dtype=np.float64, **options)


@pytest.mark.parametrize("kind", COVERING)
def test_a_variant_whose_graph_covers_everything_is_full_multi_head_attention(kind):
    x = rng(5).standard_normal((2, 6, 8))
    mask = padding(np.array([6, 4]), 6)[:, :, None, :]                      # (batch, 1, 1, n)
    full = mha()(Tensor(x), mask=mask).data
    np.testing.assert_allclose(mha(kind, **COVERING[kind])(Tensor(x), mask=mask).data, full, **TIGHT)


def test_linformer_with_identity_projections_is_full_multi_head_attention():
    attention = mha("linformer", k_proj=6, max_len=6, sharing="key-value")
    attention.variant.E.data = np.eye(6)[None]
    x = rng(5).standard_normal((2, 6, 8))
    np.testing.assert_allclose(attention(Tensor(x)).data, mha()(Tensor(x)).data, **TIGHT)


@pytest.mark.parametrize("sharing, shapes", [
    ("none", [(2, 4, 10), (2, 4, 10)]), ("headwise", [(1, 4, 10), (1, 4, 10)]), ("key-value", [(1, 4, 10)])])
def test_linformer_projections_are_shared_per_head_or_between_keys_and_values(sharing, shapes):
    attention = mha("linformer", k_proj=4, max_len=10, sharing=sharing)
    assert [p.shape for name, p in attention.named_parameters() if name.startswith("variant.")] == shapes


def test_the_variants_are_self_attention_only_and_non_causal_ones_refuse_a_causal_mask():
    x, memory = tensor(2, 3, 8), tensor(2, 5, 8, seed=1)
    with pytest.raises(ValueError, match=r"attention='window'\) is self-attention only"):
        mha("window")(x, memory)
    with pytest.raises(ValueError, match=r"attention='linformer' \(not causal\) takes a key-padding mask"):
        mha("linformer", max_len=8)(x, mask=causal_mask(3))
    with pytest.raises(ValueError, match="attention='linformer' is not causal: it has no incremental decoding"):
        mha("linformer", max_len=8)(x, cache={})
    with pytest.raises(ValueError, match=r"attention='bigbird' takes the options .* got \['window'\]"):
        mha("bigbird", window=3)


CAUSAL_VARIANTS = {
    "full": {},
    "sparse": dict(window=3, dilation=2, global_tokens=[1], random_links=2),
    "window": dict(window=3, global_tokens=[0]),
    "linear": dict(feature_map="favor", n_features=16),
    "blockwise": dict(block_size=2),
}


def decoder_model(kind, options=None, seed=0):
    config = TransformerConfig(11, 13, d_model=8, n_heads=2, d_ff=12, n_encoder_layers=1, n_decoder_layers=2,
                               dropout=0.0, max_len=16, dtype="float64", decoder_attention=kind,
                               attention_options=CAUSAL_VARIANTS[kind] if options is None else options)
    return Transformer(config, rng(seed))


SOURCE = np.array([[3, 4, 5, 6, 7], [8, 9, 2, 0, 0]])


@pytest.mark.parametrize("kind", CAUSAL_VARIANTS)
def test_future_target_tokens_do_not_change_past_logits(kind):
    transformer = decoder_model(kind)
    target = rng(3).integers(2, 13, (2, 7))
    changed = target.copy()
    changed[:, 4:] = rng(4).integers(2, 13, (2, 3))
    np.testing.assert_allclose(transformer(SOURCE, changed).data[:, :4], transformer(SOURCE, target).data[:, :4],
                               **TIGHT)


@pytest.mark.parametrize("kind", CAUSAL_VARIANTS)
def test_decoding_token_by_token_with_the_cache_equals_the_full_decoder(kind):
    transformer = decoder_model(kind)
    target = rng(2).integers(2, 13, (2, 7))
    src_mask = transformer.source_mask(SOURCE)
    memory = transformer.encode(SOURCE, src_mask)
    full = transformer.decode(memory, src_mask, target, transformer.target_mask(target)).data
    cache = {}
    with no_grad():
        steps = [transformer.decode(memory, src_mask, target[:, t:t + 1], None, cache, start=t).data
                 for t in range(7)]
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, **TIGHT)
    if kind == "linear":                                   # the recurrent state, not the keys
        assert cache[0]["self"]["S"].shape == (2, 2, 16, 4) and "k" not in cache[0]["self"]


def test_the_decoder_offers_only_causal_attention():
    with pytest.raises(ValueError, match=r"decoder's self-attention must be causal, and attention 'linformer' is "
                                         r"not; the causal-capable kinds are \('full', 'sparse', 'window', 'linear', "
                                         r"'blockwise'\)"):
        TransformerConfig(10, 10, attention="linformer")
    with pytest.raises(ValueError, match="attention 'bigbird' is not"):
        TransformerConfig(10, 10, attention="window", decoder_attention="bigbird")
    assert TransformerConfig(10, 10, attention="linformer", decoder_attention="full").decoder_self_attention == "full"


@pytest.mark.parametrize("options, message", [
    (dict(k_proj=8), r"'k_proj' is not an option of attention 'window' or decoder attention 'window'"),
    (dict(window=0), "attention option window must be a positive integer, got 0"),
    (dict(causal=True), "'causal' is not an option .*the model sets causal and max_len itself"),
    (dict(global_tokens=[-1]), "global_tokens must be a list of non-negative token positions"),
])
def test_attention_options_are_validated(options, message):
    with pytest.raises(ValueError, match=message):
        TransformerConfig(10, 10, attention="window", attention_options=options)


def test_a_config_with_attention_options_survives_the_json_round_trip(tmp_path):
    config = TransformerConfig(10, 12, attention="linformer", decoder_attention="linear",
                               attention_options=dict(k_proj=8, sharing="layerwise", feature_map="taylor"))
    config.save(tmp_path / "config.json")
    assert TransformerConfig.load(tmp_path / "config.json") == config
    window = TransformerConfig(10, 12, attention="window", attention_options=dict(global_tokens=(0, 3)))
    assert TransformerConfig.from_json(window.to_json()) == window


@pytest.mark.parametrize("sharing", ["none", "headwise", "key-value", "layerwise"])
def test_linformer_parameters_are_counted_and_layerwise_sharing_lists_one_projection(sharing):
    config = TransformerConfig(11, 13, d_model=8, n_heads=2, d_ff=12, n_encoder_layers=3, n_decoder_layers=1,
                               max_len=16, attention="linformer", decoder_attention="full",
                               attention_options=dict(k_proj=4, sharing=sharing))
    transformer = Transformer(config, rng())
    assert count_parameters(transformer) == analytic_parameter_count(config)["total"]
    projections = [name for name, _ in transformer.named_parameters() if ".variant." in name]
    assert len(projections) == {"none": 6, "headwise": 6, "key-value": 3, "layerwise": 1}[sharing]


TRAINED = {  # encoder attention, decoder attention (None: the same), options
    "full": (None, {}),
    "sparse": (None, dict(window=3, random_links=1)),
    "window": (None, dict(window=3, global_tokens=[0])),
    "bigbird": ("window", dict(block_size=2, window=3)),
    "linear": (None, dict(feature_map="elu")),
    "linformer": ("linear", dict(k_proj=4)),
    "blockwise": (None, dict(block_size=2)),
}


@pytest.mark.parametrize("kind", TRAINED)
def test_a_model_with_the_variant_learns_to_copy(kind):
    """Copy task, tiny model, 100 Adam steps: the loss on a held-out batch falls below a third."""
    decoder_kind, options = TRAINED[kind]
    config = TransformerConfig(10, 10, d_model=32, n_heads=2, d_ff=64, n_encoder_layers=1, n_decoder_layers=1,
                               dropout=0.0, max_len=8, attention=kind, decoder_attention=decoder_kind,
                               attention_options=options)
    transformer = Transformer(config, rng())
    optimizer = Adam(transformer.named_parameters(), lr=5e-3, betas=(0.9, 0.98), eps=1e-9)

    def copy_batch(generator, batch=16, n=6):
        src = generator.integers(2, 10, (batch, n))
        return src, np.concatenate([np.ones((batch, 1), int), src[:, :-1]], axis=1), src

    def loss(batch):
        src, tgt_in, tgt_out = batch
        return F.cross_entropy(transformer(src, tgt_in), tgt_out, ignore_index=0)

    held_out, data = copy_batch(rng(99)), rng(1)
    before = loss(held_out).item()
    for _ in range(100):
        optimizer.zero_grad()
        loss(copy_batch(data)).backward()
        optimizer.step()
    after = loss(held_out).item()
    assert after < 0.35 * before, (before, after)
