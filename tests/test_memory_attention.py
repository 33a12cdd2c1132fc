"""Memory-augmented attention (numpy_transformer/attention/memory_slots.py): m learned key/value slots
appended after the sequence's keys and values, K = [Z W_k; M_k], V = [Z W_v; M_v]. The layer
equals the formula, has a checked gradient (the slots' included), keeps causality and padding,
lets every query see the slots, decodes the same with the key/value cache in every model kind,
and is counted, initialised, saved, trained from the command line and refused where it has no
counterpart (the variants of chapter 2, PyTorch export, the analyses of chapter 3)."""
import dataclasses
import json

import numpy as np
import pytest

from autograd import Tensor, gradcheck
from numpy_transformer.analysis import capture_attention
from numpy_transformer.attention import MultiHeadAttention
from numpy_transformer.attention.relative import RelativePositionBias
from numpy_transformer.config import TransformerConfig
from numpy_transformer.interop.export import save_gpt2, save_torch, torch_state
from numpy_transformer.language_model import DecoderOnlyTransformer, EncoderOnlyTransformer
from numpy_transformer.masks import causal_mask, padding_mask
from numpy_transformer.model import Transformer, count_parameters
from numpy_transformer.parameter_count import analytic_parameter_count
from numpy_transformer.training.checkpoint import load_checkpoint
from run_helpers import assert_same_weights, run_main, weights

D, HEADS, SLOTS = 8, 2, 3


def layer(slots=SLOTS, seed=0, **options):
    return MultiHeadAttention(D, HEADS, np.random.default_rng(seed), dtype=np.float64, memory_slots=slots, **options)


def tokens(shape, seed=1, requires_grad=False):
    return Tensor(np.random.default_rng(seed).standard_normal(shape), requires_grad=requires_grad)


def reference(attention, x, z, mask=None, bias=None):
    """The notes' formula written out in NumPy, head by head: K = [Z W_k; M_k], V = [Z W_v; M_v],
    softmax((Q Kᵀ + [R 0]) / √d_k) over the allowed keys and every slot, Concat(heads) W_c."""
    project = {name: lambda y, lin=getattr(attention, name): y @ lin.weight.data + lin.bias.data
               for name in ("W_q", "W_k", "W_v", "W_c")}
    Q, K, V = project["W_q"](x), project["W_k"](z), project["W_v"](z)
    n_q, n_k, d_k = x.shape[1], z.shape[1], D // HEADS
    allowed = np.ones((n_q, n_k), bool) if mask is None else np.broadcast_to(mask, (x.shape[0], 1, n_q, n_k))
    heads = []
    for h in range(HEADS):
        columns = slice(h * d_k, (h + 1) * d_k)
        K_h = np.concatenate([K[..., columns], np.broadcast_to(attention.memory_k.data[:, columns],
                                                               (x.shape[0], SLOTS, d_k))], axis=1)
        V_h = np.concatenate([V[..., columns], np.broadcast_to(attention.memory_v.data[:, columns],
                                                               (x.shape[0], SLOTS, d_k))], axis=1)
        scores = Q[..., columns] @ K_h.swapaxes(1, 2)
        if bias is not None:
            scores[..., :n_k] += bias[0, h]
        scores /= np.sqrt(d_k)
        scores[..., :n_k] = np.where(np.broadcast_to(allowed, (x.shape[0], HEADS, n_q, n_k))[:, h],
                                     scores[..., :n_k], -np.inf)
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        heads.append(weights / weights.sum(-1, keepdims=True) @ V_h)
    return project["W_c"](np.concatenate(heads, axis=-1))


# --- the layer: the formula and its gradient ----------------------------------------------

def test_the_slots_are_keys_and_values_appended_after_the_sequence_in_projected_space():
    attention, x = layer(), tokens((2, 5, D)).data
    z, mask = tokens((2, 4, D), seed=2).data, padding_mask(np.array([[1, 2, 3, 0], [1, 2, 0, 0]]), 0)
    np.testing.assert_allclose(attention(x).data, reference(attention, x, x), rtol=0, atol=1e-12)
    np.testing.assert_allclose(attention(x, z, mask).data, reference(attention, x, z, mask), rtol=0, atol=1e-12)
    bias = RelativePositionBias(HEADS, D, np.random.default_rng(3), bidirectional=False, n_buckets=8,
                                max_distance=16, dtype=np.float64)(5, 5)
    np.testing.assert_allclose(attention(x, mask=causal_mask(5), bias=bias).data,
                               reference(attention, x, x, causal_mask(5), bias.data), rtol=0, atol=1e-12)
    assert attention.last_weights.shape == (2, HEADS, 5, 5 + SLOTS)


@pytest.mark.parametrize("cross", [False, True])
def test_memory_attention_has_a_checked_gradient_the_slots_included(cross):
    attention = layer()
    x = tokens((2, 4, D), requires_grad=True)
    if cross:
        z = tokens((2, 3, D), seed=2, requires_grad=True)
        mask = padding_mask(np.array([[1, 2, 0], [1, 2, 3]]), 0)
        assert gradcheck(lambda x, z, m_k, m_v: attention(x, z, mask), x, z, attention.memory_k, attention.memory_v)
    else:
        bias = tokens((1, HEADS, 4, 4), seed=3, requires_grad=True)
        assert gradcheck(lambda x, bias, m_k, m_v: attention(x, mask=causal_mask(4), bias=bias),
                         x, bias, attention.memory_k, attention.memory_v)


def test_a_float32_layer_stays_float32_the_slots_and_their_gradients_included():
    attention = MultiHeadAttention(D, HEADS, np.random.default_rng(0), memory_slots=SLOTS)
    bias = Tensor(np.zeros((1, HEADS, 4, 4), np.float32))
    out = attention(tokens((2, 4, D)).data.astype(np.float32), mask=causal_mask(4), bias=bias)
    out.sum().backward()
    assert out.dtype == attention.last_weights.dtype == attention.memory_k.grad.dtype == np.float32


def test_zero_slots_is_exactly_the_old_layer():
    old, new = MultiHeadAttention(D, HEADS, np.random.default_rng(0), dtype=np.float64), layer(slots=0)
    assert_same_weights(weights(old), weights(new))
    x = tokens((2, 5, D)).data
    np.testing.assert_array_equal(old(x, mask=causal_mask(5)).data, new(x, mask=causal_mask(5)).data)
    fields = {field.name: getattr(tiny_config(), field.name) for field in dataclasses.fields(TransformerConfig)}
    del fields["memory_slots"]
    models = [Transformer(config, np.random.default_rng(0)) for config in (
        TransformerConfig(**fields), TransformerConfig(**fields, memory_slots=0))]
    assert_same_weights(*(weights(model) for model in models))
    src, tgt = np.array([[3, 4, 0]]), np.array([[1, 5, 6]])
    np.testing.assert_array_equal(*(model(src, tgt).data for model in models))


# --- masks ----------------------------------------------------------------------------------

def test_future_tokens_do_not_change_past_outputs_with_slots():
    attention, x = layer(), tokens((1, 6, D)).data
    changed = x.copy()
    changed[0, 4:] += 5.0
    past = [attention(y, mask=causal_mask(6)).data[0, :4] for y in (x, changed)]
    np.testing.assert_array_equal(*past)
    assert not np.allclose(attention(x).data[0, :4], attention(changed).data[0, :4])      # without the mask they do


def test_padded_keys_get_zero_weight_the_slots_do_not_and_every_row_sums_to_one():
    attention = layer()
    attention(tokens((2, 4, D)).data, mask=padding_mask(np.array([[1, 2, 0, 0], [1, 2, 3, 0]]), 0))
    weights = attention.last_weights                                         # (2, heads, 4, 4 + m)
    assert weights.shape == (2, HEADS, 4, 4 + SLOTS)
    assert (weights[0, ..., 2:4] == 0).all() and (weights[1, ..., 3] == 0).all()
    assert (weights[..., 4:] > 0).all()
    np.testing.assert_allclose(weights.sum(-1), 1, rtol=0, atol=1e-12)


def test_a_query_with_every_sequence_key_masked_still_attends_the_slots():
    attention, x = layer(), tokens((1, 3, D)).data
    mask = np.array([[True, False, False], [False, False, False], [True, True, True]])
    out = attention(x, mask=mask).data
    weights = attention.last_weights[0, :, 1]                                # query 1: no sequence key
    assert (weights[:, :3] == 0).all()
    np.testing.assert_allclose(weights[:, 3:].sum(-1), 1, rtol=0, atol=1e-12)
    np.testing.assert_allclose(out, reference(attention, x, x, mask), rtol=0, atol=1e-12)
    assert np.abs(out[0, 1]).max() > 1e-3                                    # not the zero row of no slots


def test_a_mask_that_does_not_cover_the_keys_is_refused_naming_its_shape():
    with pytest.raises(ValueError, match=r"mask of shape \(5, 4\) does not cover the n_k=5 keys"):
        layer()(tokens((1, 5, D)).data, mask=np.ones((5, 4), bool))


# --- the key/value cache in every model kind ------------------------------------------------

def tiny_config(**overrides):
    return TransformerConfig(**{**dict(src_vocab_size=20, tgt_vocab_size=22, d_model=D, n_heads=HEADS, d_ff=16,
                                       n_encoder_layers=2, n_decoder_layers=2, max_len=32, dropout=0.0,
                                       memory_slots=SLOTS, dtype="float64"), **overrides})


def tiny_language_config(causal, **overrides):
    build = TransformerConfig.decoder_only if causal else TransformerConfig.encoder_only
    return build(**{**dict(vocab_size=20, d_model=D, n_heads=HEADS, d_ff=16, n_layers=2, max_len=32, dropout=0.0,
                           memory_slots=SLOTS, dtype="float64"), **overrides})


@pytest.mark.parametrize("positional", ["sinusoidal", "relative"])
def test_encoder_decoder_step_by_step_with_the_cache_equals_the_full_decoder(positional):
    model = Transformer(tiny_config(positional=positional, relative_buckets=8, relative_max_distance=16),
                        np.random.default_rng(1))
    src, tgt = np.array([[3, 4, 5, 6, 0], [7, 8, 0, 0, 0]]), np.array([[1, 5, 6, 7, 8, 9], [1, 9, 8, 7, 6, 5]])
    mask = model.source_mask(src)
    memory = model.encode(src, mask)
    full = model.decode(memory, mask, tgt, model.target_mask(tgt)).data
    cache = {}
    steps = [model.decode(memory, mask, tgt[:, t:t + 1], None, cache, start=t).data for t in range(tgt.shape[1])]
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, rtol=0, atol=1e-10)
    assert cache[0]["self"]["k"].shape[-2] == tgt.shape[1] and cache[0]["cross"]["k"].shape[-2] == src.shape[1]


def test_gpt_generation_with_the_cache_gives_the_logits_of_recomputing():
    model = DecoderOnlyTransformer(tiny_language_config(causal=True), np.random.default_rng(2))
    ids = np.array([[1, 5, 6, 7, 8, 9, 10]])
    cache = {}
    steps = [model(ids[:, :3], cache).data] + [model(ids[:, t:t + 1], cache, start=t).data for t in range(3, 7)]
    np.testing.assert_allclose(np.concatenate(steps, axis=1), model(ids).data, rtol=0, atol=1e-10)
    assert cache[0]["k"].shape[-2] == 7                                       # the sequence's keys, no slot


@pytest.mark.parametrize("kind", ["transformer", "gpt", "bert"])
def test_a_tiny_model_of_each_kind_has_checked_gradients_for_its_slots(kind):
    rng = np.random.default_rng(3)
    if kind == "transformer":
        model = Transformer(tiny_config(n_encoder_layers=1, n_decoder_layers=1), rng)
        src, tgt = np.array([[3, 4, 0]]), np.array([[1, 5, 6]])
        run = lambda: model(src, tgt)                                         # noqa: E731
    else:
        model_class = DecoderOnlyTransformer if kind == "gpt" else EncoderOnlyTransformer
        model = model_class(tiny_language_config(causal=kind == "gpt", n_layers=1), rng)
        ids = np.array([[1, 5, 6, 0]])
        run = lambda: model(ids)                                              # noqa: E731
    slots = [(name, p) for name, p in model.named_parameters() if name.endswith(("memory_k", "memory_v"))]
    assert len(slots) == (6 if kind == "transformer" else 2)                  # every attention, cross included
    for name, parameter in slots:
        assert gradcheck(lambda p: run(), parameter, mode="projection"), name
    assert gradcheck(lambda p: run(), dict(model.named_parameters())[slots[0][0].replace("memory_k", "W_q.weight")],
                     mode="projection")


# --- configuration, count, initialisation, checkpoints -----------------------------------

def test_the_analytic_count_adds_two_m_d_per_attention_layer():
    config = tiny_config(n_encoder_layers=2, n_decoder_layers=3)
    model = Transformer(config, np.random.default_rng(0))
    assert count_parameters(model) == analytic_parameter_count(config)["total"]
    without = analytic_parameter_count(dataclasses.replace(config, memory_slots=0))["total"]
    assert count_parameters(model) - without == (2 + 2 * 3) * 2 * SLOTS * D
    for causal in (True, False):
        model_class = DecoderOnlyTransformer if causal else EncoderOnlyTransformer
        counts = [count_parameters(model_class(tiny_language_config(causal, memory_slots=m), np.random.default_rng(0)))
                  for m in (0, SLOTS)]
        assert counts[1] - counts[0] == 2 * 2 * SLOTS * D


def test_the_config_keeps_memory_slots_through_json_and_refuses_bad_values():
    config = tiny_config(memory_slots=4)
    assert TransformerConfig.from_json(config.to_json()) == config and json.loads(config.to_json())["memory_slots"] == 4
    language = tiny_language_config(causal=True, memory_slots=4)
    assert TransformerConfig.from_json(language.to_json()) == language
    with pytest.raises(ValueError, match="memory_slots must be a non-negative integer, got -1"):
        tiny_config(memory_slots=-1)
    with pytest.raises(ValueError, match="memory_slots must be a non-negative integer, got 1.5"):
        tiny_config(memory_slots=1.5)


@pytest.mark.parametrize("options", [dict(attention="linear"), dict(decoder_attention="window")])
def test_the_variants_of_chapter_2_refuse_memory_slots(options):
    with pytest.raises(ValueError, match="memory_slots=3 joins the slots to full attention's scores"):
        tiny_config(**options)
    with pytest.raises(ValueError, match="memory_slots=3 needs attention='full'"):
        layer(attention=options.get("attention", "window"))


@pytest.mark.parametrize("scheme, variance", [("xavier", 1.0), ("xavier_uniform", 1.0), ("torch", 1 / 256)])
def test_every_scheme_draws_the_slots_with_the_variance_of_its_rule(scheme, variance):
    config = TransformerConfig(10, 10, d_model=256, n_heads=8, d_ff=8, n_encoder_layers=1, n_decoder_layers=1,
                               max_len=8, memory_slots=128, init=scheme)
    parameters = dict(Transformer(config, np.random.default_rng(0)).named_parameters())
    for name in ("encoder.layers.0.self_attn.memory_k", "decoder.layers.0.cross_attn.memory_v"):
        values = parameters[name].data.astype(np.float64)
        assert values.var() == pytest.approx(variance, rel=0.02) and abs(values.mean()) < 0.05 * np.sqrt(variance)
    if scheme == "xavier_uniform":
        assert np.abs(values).max() <= np.sqrt(3)


def test_the_slots_are_saved_and_loaded_with_the_state_dict():
    model, other = (Transformer(tiny_config(), np.random.default_rng(seed)) for seed in (0, 1))
    state = model.state_dict()
    assert state["decoder.layers.1.cross_attn.memory_v"].shape == (SLOTS, D)
    other.load_state_dict(state)
    assert_same_weights(weights(model), weights(other))


# --- where the slots have no counterpart -----------------------------------------------------

def test_pytorch_and_gpt2_export_and_the_attention_analyses_refuse_memory_slots(tmp_path):
    model = Transformer(tiny_config(), np.random.default_rng(0))
    with pytest.raises(ValueError, match="no PyTorch counterpart for memory_slots=3"):
        torch_state(model)
    with pytest.raises(ValueError, match="no PyTorch counterpart for memory_slots=3"):
        save_torch(model, tmp_path / "exported")
    assert not (tmp_path / "exported").exists()
    with pytest.raises(ValueError, match="these attention layers have memory slots.*encoder.0.self_attn"):
        capture_attention(model, [1, 3, 2], [1, 4])
    gpt = DecoderOnlyTransformer(tiny_language_config(causal=True, norm_placement="pre"), np.random.default_rng(0))
    with pytest.raises(ValueError, match="GPT-2's format cannot hold this model: memory_slots=3"):
        save_gpt2(gpt, None, tmp_path)


# --- training from the command line ------------------------------------------------------------

def test_train_with_memory_slots_runs_and_its_checkpoint_loads_the_slots(tmp_path):
    directory = tmp_path / "run"
    status, out, err = run_main(["train", "--out", directory, "--memory-slots", "4", "--dataset", "builtin", "--tokenizer", "word", "--no-shared-vocabulary", "--n-pairs", "120",
                                 "--max-len", "32", "--d-model", "16", "--n-heads", "2", "--d-ff", "32", "--layers", "1",
                                 "--batch-size", "16", "--steps", "6", "--eval-every", "3", "--samples", "0"])
    assert status == 0, err
    assert ", 4 memory slots, " in out
    metrics = json.loads((directory / "metrics.json").read_text())
    assert metrics["model"]["memory_slots"] == 4 and np.isfinite(metrics["loss"])
    checkpoint = load_checkpoint(directory)
    assert checkpoint.model.config.memory_slots == 4
    slots = checkpoint.model.decoder.layers[0].cross_attn.memory_k
    assert slots.shape == (4, 16) and slots.dtype == np.float32
    assert metrics["parameters"] == count_parameters(checkpoint.model)


@pytest.mark.torch
def test_one_slot_is_pytorch_s_add_bias_kv():
    """torch.nn.MultiheadAttention(add_bias_kv=True) appends one learned key and value after the
    projections: the case m = 1, with the same weights the same outputs, weights and gradients."""
    torch = pytest.importorskip("torch")
    ours = layer(slots=1)
    theirs = torch.nn.MultiheadAttention(D, HEADS, add_bias_kv=True, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.from_numpy(np.concatenate([ours.W_q.weight.data.T, ours.W_k.weight.data.T,
                                                                     ours.W_v.weight.data.T])))
        theirs.in_proj_bias.copy_(torch.from_numpy(np.concatenate([ours.W_q.bias.data, ours.W_k.bias.data,
                                                                   ours.W_v.bias.data])))
        theirs.out_proj.weight.copy_(torch.from_numpy(ours.W_c.weight.data.T))
        theirs.out_proj.bias.copy_(torch.from_numpy(ours.W_c.bias.data))
        theirs.bias_k.copy_(torch.from_numpy(ours.memory_k.data[None]))
        theirs.bias_v.copy_(torch.from_numpy(ours.memory_v.data[None]))
    ids = np.array([[3, 5, 2, 7], [4, 6, 0, 0]])
    x = tokens((2, 4, D))
    x.requires_grad = True
    out = ours(x, mask=padding_mask(ids, 0) & causal_mask(4))
    out.backward(np.ones(out.shape))
    x_torch = torch.from_numpy(x.data).requires_grad_()
    expected, weights = theirs(x_torch, x_torch, x_torch, key_padding_mask=torch.from_numpy(ids == 0),
                               attn_mask=torch.from_numpy(~causal_mask(4)), average_attn_weights=False)
    expected.sum().backward()
    np.testing.assert_allclose(out.data, expected.detach().numpy(), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(ours.last_weights, weights.detach().numpy(), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(ours.memory_k.grad, theirs.bias_k.grad.numpy()[0], rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(ours.memory_v.grad, theirs.bias_v.grad.numpy()[0], rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(x.grad, x_torch.grad.numpy(), rtol=1e-8, atol=1e-10)
