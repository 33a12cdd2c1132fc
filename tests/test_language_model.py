"""The decoder-only Transformer (numpy_transformer/language_model.py) and its sampler
(numpy_transformer/sampling.py): the future never leaks, the cache gives the logits of
recomputing for every causal attention, gradients are checked, the loss falls, and the sampler
keeps to its top-k and nucleus."""
import numpy as np
import pytest

import autograd.functional as F
from autograd import gradcheck
from autograd.optim import Adam
from numpy_transformer.attention.variants import CAUSAL_KINDS
from numpy_transformer.config import TransformerConfig
from numpy_transformer.language_model import DecoderOnlyTransformer
from numpy_transformer.sampling import generate, next_token_distribution, sample_next

PAD = 0
IDS = np.array([[3, 4, 5, 6, 7, 8, 9], [10, 11, 12, 13, PAD, PAD, PAD]])


def tiny(causal=True, **overrides):
    build = TransformerConfig.decoder_only if causal else TransformerConfig.encoder_only
    return build(**{**dict(vocab_size=24, d_model=8, n_heads=2, d_ff=16, n_layers=2, dropout=0.0, max_len=32,
                           pad_id=PAD, dtype="float64"), **overrides})


def model(seed=0, **overrides):
    return DecoderOnlyTransformer(tiny(**overrides), np.random.default_rng(seed))


KINDS = [dict(attention=kind) for kind in CAUSAL_KINDS] + [dict(positional="relative", relative_buckets=8,
                                                                   relative_max_distance=16),
                                                              dict(norm_placement="post", activation="relu",
                                                                   positional="sinusoidal", tie_embeddings=False)]


@pytest.mark.parametrize("options", KINDS, ids=lambda options: "-".join(str(v) for v in options.values()))
def test_generation_with_the_cache_gives_the_logits_of_recomputing(options):
    lm = model(**options).eval()
    ids = IDS[:1]
    full = lm(ids).data
    cache = {}
    first = lm(ids[:, :3], cache).data                                  # the prompt in one call, then token by token
    steps = [lm(ids[:, t:t + 1], cache, start=t).data for t in range(3, ids.shape[1])]
    np.testing.assert_allclose(np.concatenate([first, *steps], axis=1), full, rtol=0, atol=1e-12)


@pytest.mark.parametrize("options", KINDS, ids=lambda options: "-".join(str(v) for v in options.values()))
def test_future_tokens_do_not_change_past_logits(options):
    lm = model(**options)
    changed = IDS.copy()
    changed[:, 4:] = 15
    np.testing.assert_array_equal(lm(IDS).data[0, :4], lm(changed).data[0, :4])


def test_padding_at_the_end_changes_no_real_logit():
    lm = model()
    alone = lm(IDS[1:, :4]).data
    np.testing.assert_allclose(lm(IDS).data[1:, :4], alone, rtol=0, atol=1e-12)


@pytest.mark.parametrize("options", [{}, dict(tie_embeddings=False, positional="relative", relative_buckets=8,
                                              relative_max_distance=16),
                                     dict(activation="gelu_tanh", scale_embeddings=False)])      # GPT-2's
def test_whole_model_gradients_for_every_parameter(options):
    lm = model(n_layers=1, **options)
    targets = np.roll(IDS, -1, axis=1)
    for name, parameter in lm.named_parameters():
        assert gradcheck(lambda p: F.cross_entropy(lm(IDS), targets, ignore_index=PAD), parameter,
                         mode="projection"), name


def test_the_loss_falls_on_a_pattern_the_model_can_learn():
    lm = DecoderOnlyTransformer(tiny(d_model=16, d_ff=32, dtype="float32"), np.random.default_rng(0))
    sequences = np.array([[(start + t) % 20 + 3 for t in range(12)] for start in range(16)])   # counting mod 20
    optimizer = Adam(lm.named_parameters(), lr=1e-2)
    losses = []
    for _ in range(150):
        optimizer.zero_grad()
        loss = F.cross_entropy(lm(sequences[:, :-1]), sequences[:, 1:])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.1 * losses[0]


def test_a_config_names_what_is_wrong():
    with pytest.raises(ValueError, match="TransformerConfig: attention must be a causal-capable kind"):
        tiny(attention="linformer")
    with pytest.raises(ValueError, match="TransformerConfig: d_model=8 is not divisible by n_heads=3"):
        tiny(n_heads=3)
    assert TransformerConfig.from_json(tiny().to_json()) == tiny()


def test_a_sequence_past_max_len_is_refused():
    with pytest.raises(ValueError, match="longer than max_len=32"):
        model()(np.full((1, 3), 4), {}, start=30)


# The sampler.

LOGITS = np.log(np.array([[0.05, 0.4, 0.1, 0.3, 0.15]]))


def test_top_k_keeps_the_k_most_probable_tokens():
    p = next_token_distribution(LOGITS, top_k=2)
    np.testing.assert_allclose(p, [[0, 0.4 / 0.7, 0, 0.3 / 0.7, 0]], atol=1e-12)
    draws = [sample_next(np.repeat(LOGITS, 2000, axis=0), np.random.default_rng(seed), top_k=2) for seed in range(3)]
    assert set(np.concatenate(draws).tolist()) == {1, 3}


def test_top_p_keeps_the_smallest_set_whose_mass_reaches_p():
    """(p is kept off the exact partial sums 0.4, 0.7, …, which the rounding of exp(log p) decides.)"""
    assert np.flatnonzero(next_token_distribution(LOGITS, top_p=0.65)[0]).tolist() == [1, 3]     # 0.4 + 0.3
    assert np.flatnonzero(next_token_distribution(LOGITS, top_p=0.71)[0]).tolist() == [1, 3, 4]  # needs 0.15 more
    assert np.flatnonzero(next_token_distribution(LOGITS, top_p=0.39)[0]).tolist() == [1]
    np.testing.assert_allclose(next_token_distribution(LOGITS, top_p=1.0), np.exp(LOGITS), atol=1e-12)


def test_a_low_temperature_tends_to_greedy_and_zero_is_greedy():
    assert next_token_distribution(LOGITS, temperature=0.01)[0, 1] > 0.999
    assert sample_next(LOGITS, np.random.default_rng(0), temperature=0).tolist() == [1]


def test_sampling_follows_the_distribution():
    draws = sample_next(np.repeat(LOGITS, 20000, axis=0), np.random.default_rng(0))
    np.testing.assert_allclose(np.bincount(draws, minlength=5) / 20000, np.exp(LOGITS[0]), atol=0.01)


@pytest.mark.parametrize("settings, message", [(dict(top_p=1.5), "top_p must be a number in"),
                                               (dict(temperature=-1), "temperature must be"),
                                               (dict(top_k=0), "top_k must be a positive integer")])
def test_bad_sampling_values_are_refused(settings, message):
    with pytest.raises(ValueError, match=message):
        sample_next(LOGITS, np.random.default_rng(0), **settings)


def test_generation_is_seeded_cached_or_not_and_stops_at_the_end_token():
    lm = model(vocab_size=24)
    prompt = np.array([[3, 4, 5]])
    runs = [generate(lm, prompt, 12, np.random.default_rng(seed), use_cache=cache)
            for seed, cache in ((0, True), (0, False), (1, True))]
    assert runs[0] == runs[1] and runs[0] != runs[2] and runs[0][0][:3] == [3, 4, 5]
    greedy = generate(lm, prompt, 12, np.random.default_rng(0), temperature=0)[0]
    eos = greedy[5]
    stopped = generate(lm, prompt, 12, np.random.default_rng(0), temperature=0, eos_id=eos)[0]
    assert stopped == greedy[:greedy.index(eos, 3) + 1]


def test_a_prompt_that_leaves_no_room_is_refused():
    with pytest.raises(ValueError, match="max_new_tokens must be an integer in"):
        generate(model(), np.full((1, 30), 4), 5, np.random.default_rng(0))


# The encoder-only model (BERT) and its masked-LM loss.

from numpy_transformer.language_model import IGNORED, EncoderOnlyTransformer, mask_tokens, masked_lm_loss  # noqa: E402

SPECIAL = {0, 1, 2, 3}            # [PAD], [CLS], [SEP], [MASK] of these tests
MASK = 3


def bert(seed=0, **overrides):
    config = tiny(**{"causal": False, "norm_placement": "post", **overrides})
    return EncoderOnlyTransformer(config, np.random.default_rng(seed))


def test_bert_masking_selects_15_percent_and_replaces_them_80_10_10():
    rng = np.random.default_rng(0)
    ids = rng.integers(4, 24, size=(400, 250))
    ids[:, 0], ids[:, -1], ids[:5, -50:] = 1, 2, PAD                      # [CLS] … [SEP], some padding
    inputs, targets = mask_tokens(ids, np.random.default_rng(1), MASK, 24, SPECIAL)
    selected = targets != IGNORED
    assert not selected[np.isin(ids, list(SPECIAL))].any()                # special tokens are never selected
    assert abs(selected[~np.isin(ids, list(SPECIAL))].mean() - 0.15) < 0.003
    np.testing.assert_array_equal(targets[selected], ids[selected])
    assert (inputs[~selected] == ids[~selected]).all()
    masked, unchanged = inputs[selected] == MASK, inputs[selected] == ids[selected]
    randomised = ~masked & ~unchanged
    assert abs(masked.mean() - 0.8) < 0.01 and abs(randomised.mean() - 0.1) < 0.01
    assert abs(unchanged.mean() - 0.1) < 0.012        # (a random draw equal to the token counts as unchanged)
    assert not np.isin(inputs[selected][randomised], list(SPECIAL)).any()


def test_the_masked_lm_loss_counts_the_selected_positions_only():
    model = bert()
    inputs = np.array([[1, 5, MASK, 7, 8, 2], [1, 9, 10, MASK, 2, PAD]])
    targets = np.full(inputs.shape, IGNORED)
    targets[0, 2], targets[1, 3] = 6, 11
    logits = model(inputs).data
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    expected = -(log_p[0, 2, 6] + log_p[1, 3, 11]) / 2
    np.testing.assert_allclose(masked_lm_loss(model, inputs, targets).item(), expected, rtol=1e-12)


def test_bert_reads_both_sides_and_ignores_padding():
    model = bert()
    ids = np.array([[1, 5, 6, 7, 2]])
    changed = ids.copy()
    changed[0, 3] = 9
    assert np.abs(model(ids).data[0, 1] - model(changed).data[0, 1]).max() > 1e-6     # the future is read
    padded = np.array([[1, 5, 6, 7, 2, PAD, PAD]])
    np.testing.assert_allclose(model(padded).data[0, :5], model(ids).data[0], rtol=0, atol=1e-12)


@pytest.mark.parametrize("options", [{}, dict(tie_embeddings=False, attention="linformer",
                                              attention_options={"k_proj": 4}),
                                     dict(embedding_norm=True, scale_embeddings=False)])         # BERT's
def test_bert_gradients_for_every_parameter(options):
    model = bert(n_layers=1, **options)
    inputs = np.array([[1, 5, MASK, 7, 2], [1, MASK, 10, 11, 2]])
    targets = np.where(inputs == MASK, 6, IGNORED)
    for name, parameter in model.named_parameters():
        assert gradcheck(lambda p: masked_lm_loss(model, inputs, targets), parameter, mode="projection"), name


def test_the_masked_lm_loss_falls():
    model = bert(d_model=16, d_ff=32, norm_placement="pre", dtype="float32")
    sequences = np.array([[(start + t) % 20 + 4 for t in range(12)] for start in range(20)])
    optimizer = Adam(model.named_parameters(), lr=1e-2)
    rng, losses = np.random.default_rng(0), []
    for _ in range(300):
        inputs, targets = mask_tokens(sequences, rng, MASK, 24, SPECIAL, rate=0.3)
        optimizer.zero_grad()
        loss = masked_lm_loss(model, inputs, targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert np.mean(losses[-10:]) < 0.25 * np.mean(losses[:10])


def test_a_model_refuses_the_other_kinds_config():
    with pytest.raises(TypeError, match="EncoderOnlyTransformer: config must be a TransformerConfig of kind "
                                        "'encoder-only' .*, got kind 'decoder-only'"):
        EncoderOnlyTransformer(tiny(), np.random.default_rng(0))
    with pytest.raises(TypeError, match="DecoderOnlyTransformer: config must be a TransformerConfig of kind "
                                        "'decoder-only' .*, got kind 'encoder-only'"):
        DecoderOnlyTransformer(tiny(causal=False), np.random.default_rng(0))
