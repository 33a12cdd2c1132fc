"""T5's relative position bias (numpy_transformer/attention/relative.py): T5's buckets, the bias
added to the scores with a checked gradient, fused = composite, and a Transformer with relative
positions that decodes the same with and without the key/value cache and never sees the future."""
import numpy as np
import pytest

import autograd
from autograd import Tensor, gradcheck
from numpy_transformer.attention import scaled_dot_product_attention
from numpy_transformer.attention.relative import RelativePositionBias, relative_position_bucket
from numpy_transformer.config import TransformerConfig
from numpy_transformer.masks import causal_mask
from numpy_transformer.model import Transformer, count_parameters
from numpy_transformer.parameter_count import analytic_parameter_count

RELATIVE = np.arange(-300, 301)


def test_small_distances_have_a_bucket_each_and_far_ones_share_the_last():
    buckets = relative_position_bucket(np.array([0, -1, -7, 1, 7]), bidirectional=True)
    assert buckets.tolist() == [0, 1, 7, 17, 23]              # keys after the query: the upper 16 buckets
    assert relative_position_bucket(np.array([-128, -1000]), bidirectional=True).tolist() == [15, 15]
    causal = relative_position_bucket(np.array([3, 1, 0, -1, -15, -16, -1000]), bidirectional=False)
    assert causal.tolist() == [0, 0, 0, 1, 15, 16, 31]       # the future is never seen: bucket 0


def test_buckets_grow_monotonically_with_the_distance():
    for bidirectional in (True, False):
        past = relative_position_bucket(-np.arange(0, 400), bidirectional)
        assert np.all(np.diff(past) >= 0) and past.max() == (15 if bidirectional else 31)


@pytest.mark.torch
@pytest.mark.parametrize("bidirectional, n_buckets, max_distance", [(True, 32, 128), (False, 32, 128),
                                                                      (True, 8, 20), (False, 16, 64)])
def test_buckets_equal_those_of_hugging_face_t5(bidirectional, n_buckets, max_distance):
    torch = pytest.importorskip("torch")
    t5 = pytest.importorskip("transformers.models.t5.modeling_t5")
    expected = t5.T5Attention._relative_position_bucket(torch.tensor(RELATIVE), bidirectional, n_buckets, max_distance)
    np.testing.assert_array_equal(relative_position_bucket(RELATIVE, bidirectional, n_buckets, max_distance),
                                  expected.numpy())


def qkv_bias(seed=0, n=5):
    rng = np.random.default_rng(seed)
    q, k, v = (Tensor(rng.standard_normal((2, 2, n, 4)), requires_grad=True) for _ in range(3))
    return q, k, v, Tensor(rng.standard_normal((1, 2, n, n)), requires_grad=True)


@pytest.mark.parametrize("mask", [None, causal_mask(5)])
def test_attention_with_a_bias_has_a_checked_gradient(mask):
    assert gradcheck(lambda q, k, v, bias: scaled_dot_product_attention(q, k, v, mask, bias=bias)[0], *qkv_bias())


def test_the_bias_is_added_before_the_scaling_and_fused_equals_composite():
    q, k, v, bias = qkv_bias()
    weights = scaled_dot_product_attention(q, k, v, bias=bias)[1].data
    scores = (q.data @ np.swapaxes(k.data, -1, -2) + bias.data) / 2.0        # √d_k = 2
    expected = np.exp(scores - scores.max(-1, keepdims=True))
    np.testing.assert_allclose(weights, expected / expected.sum(-1, keepdims=True), rtol=0, atol=1e-12)
    with autograd.plain():
        composite = scaled_dot_product_attention(q, k, v, bias=bias)[1].data
    np.testing.assert_allclose(composite, weights, rtol=0, atol=1e-12)


def test_a_bias_that_does_not_fit_the_scores_is_refused():
    q, k, v, _ = qkv_bias()
    with pytest.raises(ValueError, match=r"bias of shape \(1, 2, 4, 5\) does not broadcast"):
        scaled_dot_product_attention(q, k, v, bias=Tensor(np.zeros((1, 2, 4, 5))))


def test_the_bias_module_looks_up_one_scalar_per_head_and_bucket():
    module = RelativePositionBias(3, 12, np.random.default_rng(0), bidirectional=False, n_buckets=8, max_distance=16,
                                  dtype=np.float64)
    bias = module(4, 6, start=2).data                                      # queries 2…5, keys 0…5
    relative = np.arange(6)[None, :] - np.arange(2, 6)[:, None]
    expected = module.weight.data[relative_position_bucket(relative, False, 8, 16)]   # (4, 6, heads)
    np.testing.assert_array_equal(bias, expected.transpose(2, 0, 1)[None])
    assert gradcheck(lambda weight: RelativePositionBias.forward(_with_weight(module, weight), 4, 6, 2),
                     Tensor(module.weight.data.copy(), requires_grad=True))


def _with_weight(module, weight):
    module.weight = weight
    return module


def relative_config(**overrides):
    return TransformerConfig(**{**dict(src_vocab_size=20, tgt_vocab_size=22, d_model=8, n_heads=2, d_ff=16,
                                       n_encoder_layers=2, n_decoder_layers=2, positional="relative",
                                       relative_buckets=8, relative_max_distance=16, max_len=32, dropout=0.0,
                                       dtype="float64"), **overrides})


def test_one_bias_per_stack_is_shared_by_its_layers_and_counted():
    model = Transformer(relative_config(), np.random.default_rng(0))
    names = [name for name, _ in model.named_parameters() if "relative" in name]
    assert names == ["encoder.relative_bias.weight", "decoder.relative_bias.weight"]
    assert count_parameters(model) == analytic_parameter_count(model.config)["total"]


def test_decoding_with_the_cache_equals_the_full_decoder():
    model = Transformer(relative_config(), np.random.default_rng(1))
    src, tgt = np.array([[3, 4, 5, 6, 7, 0]]), np.array([[1, 5, 6, 7, 8, 9, 10]])
    mask = model.source_mask(src)
    memory = model.encode(src, mask)
    full = model.decode(memory, mask, tgt, model.target_mask(tgt)).data
    cache = {}
    steps = [model.decode(memory, mask, tgt[:, t:t + 1], None, cache, start=t).data for t in range(tgt.shape[1])]
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, rtol=0, atol=1e-12)


def test_future_target_tokens_do_not_change_past_logits():
    model = Transformer(relative_config(), np.random.default_rng(2))
    src, tgt = np.array([[3, 4, 5]]), np.array([[1, 5, 6, 7, 8]])
    changed = tgt.copy()
    changed[0, 3:] = [11, 12]
    np.testing.assert_array_equal(model(src, tgt).data[0, :3], model(src, changed).data[0, :3])


def test_whole_model_gradients_with_relative_positions():
    model = Transformer(relative_config(n_encoder_layers=1, n_decoder_layers=1), np.random.default_rng(3))
    src, tgt = np.array([[3, 4, 5]]), np.array([[1, 5, 6]])
    for name, parameter in model.named_parameters():
        if "relative" in name:
            assert gradcheck(lambda p: model(src, tgt), parameter, mode="projection")


def test_relative_positions_need_full_attention():
    with pytest.raises(ValueError, match="positional='relative'.*must both be 'full'"):
        relative_config(attention="linear")
