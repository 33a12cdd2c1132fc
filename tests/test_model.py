"""The encoder-decoder Transformer (thesis §1.2, Figure 2): the layers against their formulas,
gradients against finite differences, the causal and padding invariances, the key/value cache,
a copy task that learns, float32 end to end, input errors, and the parameter count of
chapter 2."""
import contextlib
import dataclasses
import io
import itertools
import re
from pathlib import Path

import numpy as np
import pytest

import autograd.functional as F
from autograd import Tensor, gradcheck, no_grad
from autograd.optim import Adam
from numpy_transformer.config import TransformerConfig
from numpy_transformer.masks import causal_mask, padding_mask
from numpy_transformer.model import DecoderLayer, EncoderLayer, Transformer, count_parameters
from numpy_transformer.parameter_count import analytic_parameter_count

PAD, BOS = 0, 1
TINY = dict(src_vocab_size=11, tgt_vocab_size=13, d_model=8, n_heads=2, d_ff=12, n_encoder_layers=2,
            n_decoder_layers=2, dropout=0.0, max_len=16, dtype="float64")
PLACEMENTS = ("post", "pre")


def rng(seed=0):
    return np.random.default_rng(seed)


def tiny(**overrides):
    return TransformerConfig(**{**TINY, **overrides})


def randomized(module, seed=1):
    """`module` with every bias, β and γ moved off its initial 0 or 1 (a forgotten term must show)."""
    generator = rng(seed)
    for name, p in module.named_parameters():
        noise = 0.1 * generator.standard_normal(p.shape)
        if name.endswith(("bias", "beta", "gamma")):
            p.data = (p.data + noise).astype(p.dtype)
    return module


def model(seed=0, **overrides):
    return randomized(Transformer(tiny(**overrides), rng(seed)), seed + 1)


def token_ids(batch, n, vocab_size, seed=0):
    """Random ids without padding: in [2, vocab_size) (0 is padding, 1 the start token)."""
    return rng(seed).integers(2, vocab_size, (batch, n))


def tensor(*shape, seed=0):
    return Tensor(rng(seed).standard_normal(shape), requires_grad=True)


SRC = np.array([[3, 4, 5, 6, 7], [8, 9, 2, PAD, PAD]])
TGT = np.array([[BOS, 5, 6, 7], [BOS, 2, PAD, PAD]])


# --- the layers are the formulas of §1.2.2 and §1.2.5 ------------------------------------

@pytest.mark.parametrize("placement", PLACEMENTS)
def test_encoder_layer_is_the_block_f_theta(placement):
    layer = randomized(EncoderLayer(tiny(norm_placement=placement), rng()))
    x, mask = tensor(2, 5, 8), padding_mask(SRC, PAD)
    attention = lambda h: layer.self_attn(h, mask=mask)  # noqa: E731
    if placement == "post":   # u = LN(x + MultiHead(x)), z = LN(u + FFN(u))
        u = layer.norm_1(x + attention(x))
        z = layer.norm_2(u + layer.feed_forward(u))
    else:                     # u = x + MultiHead(LN(x)), z = u + FFN(LN(u))
        u = x + attention(layer.norm_1(x))
        z = u + layer.feed_forward(layer.norm_2(u))
    np.testing.assert_array_equal(layer(x, mask).data, z.data)


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_decoder_layer_is_masked_self_attention_cross_attention_and_feed_forward(placement):
    layer = randomized(DecoderLayer(tiny(norm_placement=placement), rng()))
    y, memory = tensor(2, 4, 8, seed=1), tensor(2, 5, 8, seed=2)
    src_mask, tgt_mask = padding_mask(SRC, PAD), causal_mask(4)
    sublayers = [(lambda h: layer.self_attn(h, mask=tgt_mask), layer.norm_1),
                 (lambda h: layer.cross_attn(h, memory, src_mask), layer.norm_2),
                 (layer.feed_forward, layer.norm_3)]
    z = y
    for sublayer, norm in sublayers:
        z = norm(z + sublayer(z)) if placement == "post" else z + sublayer(norm(z))
    np.testing.assert_array_equal(layer(y, memory, src_mask, tgt_mask).data, z.data)


def test_post_norm_stacks_end_with_their_last_layer_and_pre_norm_stacks_with_a_final_layer_norm():
    post = [name for name, _ in model(norm_placement="post").named_parameters() if "final_norm" in name]
    pre = [name for name, _ in model(norm_placement="pre").named_parameters() if "final_norm" in name]
    assert post == []
    assert pre == ["encoder.final_norm.gamma", "encoder.final_norm.beta",
                   "decoder.final_norm.gamma", "decoder.final_norm.beta"]


def test_the_stacks_scale_the_embedding_by_sqrt_d_and_add_the_positions():
    encoder = model().encoder
    expected = np.sqrt(8) * encoder.embedding.weight.data[SRC] + encoder.positional.P.data[:5]
    np.testing.assert_allclose(encoder.embed(SRC).data, expected, rtol=1e-15)


@pytest.mark.numerics
def test_tied_logits_are_the_decoder_output_times_the_embedding_transposed():
    transformer = model(tie_embeddings=True)
    y = tensor(2, 3, 8)
    W_E = transformer.decoder.embedding.weight.data
    # the two products reach BLAS in other shapes: 7e-16 apart relatively (3 float64 steps) under
    # OpenBLAS's Haswell kernels, 0 under SkylakeX's and Sandybridge's; rtol 1e-13 leaves a margin
    # of 100 and no room for any other factor or transposition
    np.testing.assert_allclose(transformer.project(y).data, y.data @ W_E.T, rtol=1e-13)
    assert not any(name.startswith("projection") for name, _ in transformer.named_parameters())


def test_a_shared_source_embedding_is_one_tensor_listed_once():
    transformer = model(src_vocab_size=13, share_source_embedding=True, tie_embeddings=True)
    assert transformer.encoder.embedding is transformer.decoder.embedding
    names = [name for name, _ in transformer.named_parameters() if "embedding" in name]
    assert names == ["encoder.embedding.weight"]


def test_logits_have_shape_batch_target_length_target_vocabulary():
    logits = Transformer(tiny(dtype="float32"), rng())(SRC, TGT)
    assert logits.shape == (2, 4, 13) and logits.dtype == np.float32


# --- gradients ---------------------------------------------------------------------------

@pytest.mark.parametrize("placement", PLACEMENTS)
def test_encoder_layer_gradients_for_the_input_and_every_parameter(placement):
    layer = randomized(EncoderLayer(tiny(norm_placement=placement), rng()))
    mask = padding_mask(SRC[:, :4], PAD)
    assert gradcheck(lambda x, *params: layer(x, mask), tensor(2, 4, 8), *layer.parameters(), mode="projection")


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_decoder_layer_gradients_for_both_inputs_and_every_parameter(placement):
    layer = randomized(DecoderLayer(tiny(norm_placement=placement), rng()))
    src_mask, tgt_mask = padding_mask(SRC[:, :4], PAD), causal_mask(3)
    assert gradcheck(lambda y, memory, *params: layer(y, memory, src_mask, tgt_mask),
                     tensor(2, 3, 8, seed=1), tensor(2, 4, 8, seed=2), *layer.parameters(), mode="projection")


@pytest.mark.parametrize("options", [
    dict(),
    dict(norm_placement="pre", activation="swiglu", positional="learned", norm_variant="torch",
         tie_embeddings=True, share_source_embedding=True, src_vocab_size=13),
], ids=["thesis", "pre-swiglu-learned-tied"])
def test_whole_model_gradients_for_every_parameter(options):
    transformer = model(n_encoder_layers=1, n_decoder_layers=1, **options)
    assert gradcheck(lambda *params: transformer(SRC, TGT), *transformer.parameters(), mode="projection")


# --- what the decoder may see ------------------------------------------------------------

@pytest.mark.parametrize("placement", PLACEMENTS)
@pytest.mark.parametrize("t", [0, 2, 4])
def test_future_target_tokens_do_not_change_past_logits(t, placement):
    transformer = model(norm_placement=placement)
    src, tgt = token_ids(2, 5, 11, seed=1), token_ids(2, 6, 13, seed=2)
    changed = tgt.copy()
    changed[:, t + 1:] = token_ids(2, 6, 13, seed=3)[:, t + 1:]
    logits, changed_logits = transformer(src, tgt).data, transformer(src, changed).data
    np.testing.assert_allclose(changed_logits[:, :t + 1], logits[:, :t + 1], rtol=0, atol=1e-12)
    assert not np.allclose(changed_logits[:, t + 1:], logits[:, t + 1:])


def encode_and_decode(transformer, src, tgt):
    """(memory, decoder output Y) with the masks of `forward`."""
    src_mask = transformer.source_mask(src)
    memory = transformer.encode(src, src_mask)
    return memory.data, transformer.decode(memory, src_mask, tgt, transformer.target_mask(tgt)).data


def padded(ids, n_pad):
    return np.concatenate([ids, np.full((ids.shape[0], n_pad), PAD)], axis=1)


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_source_padding_changes_neither_the_real_encoder_outputs_nor_the_decoder_outputs(placement):
    transformer = model(norm_placement=placement)
    src, tgt = token_ids(2, 5, 11, seed=1), token_ids(2, 4, 13, seed=2)
    memory, y = encode_and_decode(transformer, src, tgt)
    padded_memory, padded_y = encode_and_decode(transformer, padded(src, 3), tgt)
    np.testing.assert_allclose(padded_memory[:, :5], memory, rtol=0, atol=1e-12)
    np.testing.assert_allclose(padded_y, y, rtol=0, atol=1e-12)


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_target_padding_does_not_change_the_logits_of_the_real_positions(placement):
    transformer = model(norm_placement=placement)
    src, tgt = token_ids(2, 5, 11, seed=1), token_ids(2, 4, 13, seed=2)
    np.testing.assert_allclose(transformer(src, padded(tgt, 3)).data[:, :4], transformer(src, tgt).data,
                               rtol=0, atol=1e-12)


def test_a_padded_batch_gives_each_sentence_the_logits_it_gets_alone():
    transformer = model()
    logits = transformer(SRC, TGT).data
    for i, (src, tgt) in enumerate(zip(SRC, TGT)):
        alone = transformer(src[src != PAD][None], tgt[tgt != PAD][None]).data[0]
        np.testing.assert_allclose(logits[i, :len(alone)], alone, rtol=0, atol=1e-12)


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_decoding_token_by_token_with_the_cache_equals_the_full_decoder(placement):
    transformer = model(norm_placement=placement, positional="learned")
    src, tgt = SRC, token_ids(2, 6, 13, seed=2)
    src_mask = transformer.source_mask(src)
    memory = transformer.encode(src, src_mask)
    full = transformer.decode(memory, src_mask, tgt, transformer.target_mask(tgt)).data
    cache = {}
    with no_grad():
        steps = [transformer.decode(memory, src_mask, tgt[:, t:t + 1], None, cache, start=t).data
                 for t in range(6)]
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, rtol=0, atol=1e-12)
    assert sorted(cache) == [0, 1]
    assert cache[1]["self"]["k"].shape == (2, 2, 6, 4) and cache[1]["cross"]["k"].shape == (2, 2, 5, 4)


def test_a_cache_filled_by_a_prefix_then_continued_equals_the_full_decoder():
    transformer = model()
    tgt = token_ids(2, 5, 13, seed=2)
    src_mask = transformer.source_mask(SRC)
    memory = transformer.encode(SRC, src_mask)
    full = transformer.decode(memory, src_mask, tgt, transformer.target_mask(tgt)).data
    cache = {}
    prefix = transformer.decode(memory, src_mask, tgt[:, :3], transformer.target_mask(tgt[:, :3]), cache).data
    rest = transformer.decode(memory, src_mask, tgt[:, 3:], causal_mask(5)[3:], cache, start=3).data
    np.testing.assert_allclose(np.concatenate([prefix, rest], axis=1), full, rtol=0, atol=1e-12)


# --- training ----------------------------------------------------------------------------

def test_dropout_acts_in_training_only():
    with_dropout = Transformer(tiny(dropout=0.3), rng())
    without = Transformer(tiny(dropout=0.0), rng())
    assert not np.allclose(with_dropout(SRC, TGT).data, without(SRC, TGT).data)
    np.testing.assert_array_equal(with_dropout.eval()(SRC, TGT).data, without(SRC, TGT).data)


def test_float32_end_to_end_logits_and_every_gradient():
    transformer = Transformer(tiny(dtype="float32", dropout=0.1, tie_embeddings=True), rng())
    logits = transformer(SRC, TGT)
    F.cross_entropy(logits[:, :-1], TGT[:, 1:], ignore_index=PAD, label_smoothing=0.1).backward()
    assert logits.dtype == np.float32
    assert all(p.grad is not None and p.grad.dtype == p.dtype == np.float32 for p in transformer.parameters())


def reversal_batch(generator, batch=32, n=6, vocab_size=10):
    """Source: random tokens; target: the source reversed, fed to the decoder after BOS."""
    src = generator.integers(2, vocab_size, (batch, n))
    target = src[:, ::-1]
    return src, np.concatenate([np.full((batch, 1), BOS), target[:, :-1]], axis=1), target


def test_the_loss_falls_on_a_reversal_task():
    config = TransformerConfig(10, 10, d_model=32, n_heads=4, d_ff=64, n_encoder_layers=1, n_decoder_layers=1,
                               dropout=0.0, max_len=8)
    transformer = Transformer(config, rng())
    optimizer = Adam(transformer.named_parameters(), lr=3e-3, betas=(0.9, 0.98), eps=1e-9)

    def loss(batch):
        src, tgt_in, tgt_out = batch
        return F.cross_entropy(transformer(src, tgt_in), tgt_out, ignore_index=PAD, label_smoothing=0.1)

    held_out, data = reversal_batch(rng(99)), rng(1)
    before = loss(held_out).item()
    for _ in range(100):
        optimizer.zero_grad()
        loss(reversal_batch(data)).backward()
        optimizer.step()
    after = loss(held_out).item()
    assert before > 2.5 and after < 0.4 * before, (before, after)


# --- bad input ---------------------------------------------------------------------------

@pytest.mark.parametrize("src, tgt, message", [
    (SRC.astype(float), TGT, r"src_ids must be a non-empty integer array of shape \(batch, n\), got float64 of "
                             r"shape \(2, 5\)"),
    (SRC[0], TGT, r"src_ids must be .* got int64 of shape \(5,\)"),
    (SRC, TGT[:, :0], r"tgt_ids must be a non-empty integer array .* shape \(2, 0\)"),
    (SRC, TGT + 10, r"tgt_ids: id 15 at position \(0, 1\) \(shape \(2, 4\)\) is outside the vocabulary "
                    r"\[0, 13\)"),
    (SRC - 1, TGT, r"src_ids: id -1 at position \(1, 3\) .* outside the vocabulary \[0, 11\)"),
    (np.ones((2, 17), int), TGT, r"src_ids of shape \(2, 17\) at positions 0..16 is longer than max_len=16"),
    (SRC[:1], TGT, r"src_ids and tgt_ids must have the same batch size, got shapes \(1, 5\) and \(2, 4\)"),
])
def test_bad_token_ids_are_value_errors_naming_the_argument(src, tgt, message):
    with pytest.raises(ValueError, match=message):
        model(positional="learned")(src, tgt)      # learned positions stop at max_len, sinusoidal ones do not


def test_decode_names_a_memory_that_does_not_fit_the_target():
    transformer = model()
    with pytest.raises(ValueError, match=r"memory must have shape \(batch=2, n_src, d_model=8\) to fit tgt_ids "
                                         r"of shape \(2, 4\), got \(1, 5, 8\)"):
        transformer.decode(tensor(1, 5, 8), None, TGT, None)


def test_a_cached_step_past_a_learned_max_len_names_the_positions():
    transformer = model(positional="learned")
    with pytest.raises(ValueError, match=r"tgt_ids of shape \(2, 1\) at positions 16..16 is longer than "
                                         r"max_len=16"):
        transformer.decode(tensor(2, 5, 8), None, TGT[:, :1], None, {}, start=16)


# --- the number of parameters (chapter 2) ------------------------------------------------

OPTIONS = list(itertools.product(("sinusoidal", "learned"), PLACEMENTS, ("relu", "gelu", "swiglu"),
                                 (False, True), (False, True)))


@pytest.mark.parametrize("positional, placement, activation, tied, shared", OPTIONS)
@pytest.mark.parametrize("embedding_norm", [False, True])
def test_the_analytic_count_equals_the_model_count_for_every_option(positional, placement, activation, tied,
                                                                    shared, embedding_norm):
    config = tiny(positional=positional, norm_placement=placement, activation=activation, tie_embeddings=tied,
                  share_source_embedding=shared, src_vocab_size=13 if shared else 11, d_model=12, n_heads=3,
                  n_encoder_layers=2, n_decoder_layers=3, d_ff=20, embedding_norm=embedding_norm, dtype="float32")
    counts = analytic_parameter_count(config)
    assert counts["total"] == count_parameters(Transformer(config, rng())) == \
        sum(value for key, value in counts.items() if key != "total")


@pytest.mark.parametrize("kind", ["decoder-only", "encoder-only"])
@pytest.mark.parametrize("positional, placement, activation, tied", [
    ("learned", "pre", "gelu", True), ("sinusoidal", "post", "swiglu", False), ("relative", "pre", "relu", False)])
@pytest.mark.parametrize("embedding_norm, memory_slots", [(False, 0), (True, 2)])
def test_the_analytic_count_equals_the_model_count_for_the_one_stack_kinds(kind, positional, placement, activation,
                                                                           tied, embedding_norm, memory_slots):
    from numpy_transformer.language_model import DecoderOnlyTransformer, EncoderOnlyTransformer

    build, model_class = (TransformerConfig.decoder_only, DecoderOnlyTransformer) if kind == "decoder-only" else \
        (TransformerConfig.encoder_only, EncoderOnlyTransformer)
    config = build(17, n_layers=2, d_model=12, n_heads=3, d_ff=20, max_len=16, positional=positional,
                   norm_placement=placement, activation=activation, tie_embeddings=tied, embedding_norm=embedding_norm,
                   memory_slots=0 if positional == "relative" else memory_slots, relative_buckets=8,
                   relative_max_distance=8)
    counts = analytic_parameter_count(config)
    assert counts["total"] == count_parameters(model_class(config, rng())) == \
        sum(value for key, value in counts.items() if key != "total")


def test_the_analytic_count_counts_an_encoder_only_linformer_s_projections():
    from numpy_transformer.language_model import EncoderOnlyTransformer

    config = TransformerConfig.encoder_only(17, n_layers=2, d_model=12, n_heads=3, d_ff=20, max_len=16,
                                            attention="linformer", attention_options={"k_proj": 4})
    assert analytic_parameter_count(config)["total"] == count_parameters(EncoderOnlyTransformer(config, rng()))


@pytest.mark.parametrize("d_model, n_heads, d_ff, layers",
                         [(4, 1, 4, (1, 1)), (16, 4, 64, (3, 1)), (10, 5, 7, (1, 4))])
def test_the_analytic_count_equals_the_model_count_for_other_sizes(d_model, n_heads, d_ff, layers):
    config = tiny(d_model=d_model, n_heads=n_heads, d_ff=d_ff, n_encoder_layers=layers[0],
                  n_decoder_layers=layers[1], dtype="float32")
    assert analytic_parameter_count(config)["total"] == count_parameters(Transformer(config, rng()))


def total(config, **changes):
    return analytic_parameter_count(dataclasses.replace(config, **changes))["total"]


def test_the_base_model_with_a_shared_37000_token_vocabulary_has_63_1_million_parameters():
    """Vaswani et al., Table 3, print 65 × 10⁶: our exact count is 3% lower (see the docstring of
    analytic_parameter_count); the layers alone agree with the paper's N = 2 and N = 8 rows."""
    base = TransformerConfig.base(37000, 37000, share_source_embedding=True)
    counts = analytic_parameter_count(base)
    assert counts == {"embeddings": 18_944_000, "positional": 0, "attention": 18_911_232,
                      "feed_forward": 25_196_544, "layer_norms": 30_720, "projection": 0, "total": 63_082_496}
    assert abs(counts["total"] - 65e6) / 65e6 < 0.03
    big = dict(d_model=1024, n_heads=16, d_ff=4096)
    assert total(base, **big) == 214_245_376  # the paper: 213 × 10⁶
    layers_8_minus_2 = total(base, n_encoder_layers=8, n_decoder_layers=8) - total(base, n_encoder_layers=2,
                                                                                   n_decoder_layers=2)
    assert abs(layers_8_minus_2 - 44e6) < 1e6  # the paper: 80 − 36 = 44 (× 10⁶)


def test_heads_do_not_change_the_count():
    assert analytic_parameter_count(tiny(n_heads=1)) == analytic_parameter_count(tiny(n_heads=8))


# --- docs --------------------------------------------------------------------------------

def test_the_snippet_of_docs_chapter1_prints_what_the_page_shows():
    page = (Path(__file__).resolve().parent.parent / "docs" / "chapter1.md").read_text(encoding="utf-8")
    code, shown = re.search(r"```python\n(.*?)```\n\nprints\n\n<!-- begin output chapter1-tiny-transformer -->\n"
                            r"```\n(.*?)```", page, re.DOTALL).groups()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(code, {})
    assert printed.getvalue() == shown
