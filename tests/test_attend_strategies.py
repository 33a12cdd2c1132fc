"""The extension points of MultiHeadAttention (numpy_transformer/attention/attend.py and cache.py):
the attend strategy chosen at construction and replaceable after it, the key/value cache with
its append and reuse, and the strategy's `weights_used`, where the analyses see and replace the
weights."""
import numpy as np
import pytest

from autograd import Tensor
from numpy_transformer.analysis.hooks import attention_modules, weights_hooks
from numpy_transformer.attention import MultiHeadAttention, attend, split_heads
from numpy_transformer.attention.attend import FullAttention, MemorySlotsAttention, VariantAttention
from numpy_transformer.attention.cache import KeyValueCache
from numpy_transformer.attention.relative import RelativePositionBias
from numpy_transformer.masks import causal_mask
from numpy_transformer.model import Transformer, TransformerConfig

D, HEADS = 8, 2


def rng(seed=0):
    return np.random.default_rng(seed)


def layer(**options):
    return MultiHeadAttention(D, HEADS, rng(), dtype=np.float64, **options)


def tokens(*shape, seed=1):
    return Tensor(rng(seed).standard_normal(shape))


class UniformAttention(FullAttention):
    """Every query weighs every key alike: head = (1/n_k) Σ_j V_j. It keeps and reuses keys as
    full attention does."""

    def __call__(self, Q, K, V, mask, bias, cache):
        n_q, n_k = Q.shape[-2], K.shape[-2]
        return Tensor(np.full((n_q, n_k), 1 / n_k)) @ V


# --- the strategy --------------------------------------------------------------------------

@pytest.mark.parametrize("options, strategy", [
    ({}, FullAttention), (dict(memory_slots=2), MemorySlotsAttention),
    (dict(attention="window", window=3), VariantAttention), (dict(attention="linear"), VariantAttention)])
def test_the_strategy_is_chosen_at_construction_from_attention_and_memory_slots(options, strategy):
    attention = layer(**options)
    assert type(attention.attend) is strategy
    if strategy is VariantAttention:
        assert attention.attend.variant is attention.variant


def test_a_strategy_of_ones_own_replaces_how_the_heads_attend():
    attention = MultiHeadAttention(D, 1, rng(), dtype=np.float64)
    for linear in (attention.W_q, attention.W_k, attention.W_v, attention.W_c):
        linear.weight.data, linear.bias.data = np.eye(D), np.zeros(D)
    attention.attend = UniformAttention(attention.dropout)
    x = tokens(2, 5, D)
    expected = np.broadcast_to(x.data.mean(axis=1, keepdims=True), x.shape)     # identity projections
    np.testing.assert_allclose(attention(x).data, expected, rtol=1e-14)
    assert attention.last_weights is None                                     # it never formed eq. (6)'s weights


@pytest.mark.numerics
def test_a_strategy_of_ones_own_still_takes_the_keys_through_the_cache():
    attention = layer()
    attention.attend = UniformAttention(attention.dropout)
    x = tokens(1, 4, D)
    full = attention(x).data
    cache = {}
    attention(Tensor(x.data[:, :3]), cache=cache)
    last = attention(Tensor(x.data[:, 3:]), cache=cache).data                 # the mean over all four keys
    assert cache["k"].shape == (1, HEADS, 4, D // HEADS)
    # one row against four reaches BLAS in another shape: 2e-15 apart relatively under OpenBLAS's
    # Haswell kernels (4e-16 SkylakeX's, 0 Sandybridge's); a key left out moves the mean by far more
    np.testing.assert_allclose(last[:, 0], full[:, 3], rtol=1e-12)


# --- the strategy's weights_used: last_weights and the hook ----------------------------------

def test_the_hook_sees_the_weights_of_equation_6_and_what_it_returns_multiplies_V():
    attention, x = layer(), tokens(2, 4, D)
    seen = []

    def silence(weights):
        seen.append(weights.data)
        return weights * 0
    attention.attend.weights_hook = silence
    out = attention(x, mask=causal_mask(4)).data
    assert len(seen) == 1 and seen[0].shape == (2, HEADS, 4, 4) and seen[0] is attention.last_weights
    np.testing.assert_allclose(seen[0].sum(-1), 1, rtol=1e-14)
    assert np.all(np.triu(seen[0], 1) == 0)                                   # the causal mask of eq. (10)
    np.testing.assert_array_equal(out, np.broadcast_to(attention.W_c.bias.data, out.shape))   # zero heads: W_c's bias


def test_the_variants_never_reach_the_hook_and_keep_no_weights():
    attention = layer(attention="window", window=3)
    attention.attend.weights_hook = lambda weights: pytest.fail("a variant formed full attention's weights")
    attention(tokens(2, 5, D))
    assert attention.last_weights is None


# --- the cache -------------------------------------------------------------------------------

def test_append_joins_the_new_keys_after_the_cached_ones():
    K, V = tokens(1, HEADS, 2, 4), tokens(1, HEADS, 2, 4, seed=2)
    store = {}
    KeyValueCache(store).append(K, V)
    all_K, all_V = KeyValueCache(store).append(V, K)
    assert store["k"] is all_K and store["v"] is all_V
    np.testing.assert_array_equal(all_K.data, np.concatenate([K.data, V.data], axis=-2))
    np.testing.assert_array_equal(all_V.data, np.concatenate([V.data, K.data], axis=-2))


def test_reuse_computes_the_keys_and_values_once_per_store():
    calls = []

    def keys_values():
        calls.append(1)
        return tokens(1, HEADS, 3, 4), tokens(1, HEADS, 3, 4, seed=2)
    store = {}
    first, later = KeyValueCache(store).reuse(keys_values), KeyValueCache(store).reuse(keys_values)
    assert len(calls) == 1 and first[0] is later[0] and first[1] is later[1]


@pytest.mark.parametrize("options", [{}, dict(memory_slots=2)], ids=["full", "memory-slots"])
def test_without_a_cache_the_keys_and_values_are_computed_directly(options, monkeypatch):
    """Self- and cross-attention, training or encoding: K and V are Z W_k and Z W_v split per
    head, and no KeyValueCache is ever built."""
    monkeypatch.setattr(attend, "KeyValueCache", lambda store: pytest.fail("a cache was built without a cache"))
    attention, x, memory = layer(**options), tokens(2, 4, D), tokens(2, 6, D, seed=2)
    for z, key_value in ((x, None), (memory, memory)):
        K, V = attention.keys_values(x, key_value, None)
        np.testing.assert_array_equal(K.data, split_heads(attention.W_k(z), HEADS).data)
        np.testing.assert_array_equal(V.data, split_heads(attention.W_v(z), HEADS).data)
        assert attention(x, key_value).shape == x.shape


def test_memory_slots_a_relative_bias_and_the_cache_together_give_the_uncached_outputs():
    attention = layer(memory_slots=3)
    relative = RelativePositionBias(HEADS, D, rng(4), bidirectional=False, n_buckets=8, max_distance=16,
                                    dtype=np.float64)
    x = tokens(2, 5, D)
    full = attention(x, mask=causal_mask(5), bias=relative(5, 5)).data
    cache = {}
    steps = [attention(Tensor(x.data[:, t:t + 1]), mask=causal_mask(5)[t:t + 1, :t + 1], cache=cache,
                       bias=relative(1, t + 1, start=t)).data for t in range(5)]
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, rtol=0, atol=1e-13)
    assert cache["k"].shape[-2] == 5                                          # the sequence's keys, no slot


def test_cross_attention_with_memory_slots_projects_the_memory_once():
    attention, x, memory = layer(memory_slots=3), tokens(2, 4, D), tokens(2, 6, D, seed=2)
    full = attention(x, memory).data
    cache = {}
    first = attention(Tensor(x.data[:, :1]), memory, cache=cache).data
    later = attention(Tensor(x.data[:, 1:]), Tensor(np.zeros(memory.shape)), cache=cache).data
    assert cache["k"].shape[-2] == 6
    np.testing.assert_allclose(np.concatenate([first, later], axis=1), full, rtol=0, atol=1e-13)


def test_the_analyses_hooks_reach_full_attention_in_a_model_whose_self_attention_is_a_variant():
    config = TransformerConfig(12, 14, d_model=D, n_heads=HEADS, d_ff=16, n_encoder_layers=1, n_decoder_layers=1,
                               attention="window", attention_options={"window": 2}, max_len=16, dtype="float64")
    model, seen = Transformer(config, rng()), []
    with weights_hooks(model, lambda name: lambda weights: seen.append(name) or weights):
        model(np.array([[3, 4, 5]]), np.array([[1, 5, 6]]))
    assert seen == ["decoder.0.cross_attn"]
    assert all(module.attend.weights_hook is None for module in attention_modules(model).values())
