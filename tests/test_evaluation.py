"""Evaluation (numpy_transformer/training/evaluation.py, translation.py): BLEU and chrF are sacrebleu's on written text,
perplexity is exp of the mean per-token cross-entropy, translations come back detokenized."""
import math

import numpy as np
import pytest
import sacrebleu

import autograd.functional as F
import numpy_transformer.training.evaluation as evaluation
from numpy_transformer.data import Pair, WordTokenizer, encode_pairs
from numpy_transformer.data.batching import make_batch
from numpy_transformer.training.evaluation import corpus_scores, evaluate_pairs, mean_cross_entropy, perplexity
import numpy_transformer.translation as translation
from numpy_transformer.translation import translate
from numpy_transformer.model import Transformer
from numpy_transformer.training.settings import model_config

HYPOTHESES = ["L'uomo mangia una mela.", "Il gatto dorme sul divano!", "Siamo a casa, oggi."]
REFERENCES = ["L'uomo mangia la mela.", "Il gatto dorme sul divano.", "Oggi siamo a casa."]
PAIRS = [Pair("the man eats the apple .", "l' uomo mangia la mela ."),
         Pair("the cat sleeps on the sofa .", "il gatto dorme sul divano ."),
         Pair("today we are at home .", "oggi siamo a casa ."),
         Pair("the man sleeps .", "l' uomo dorme .")]


def test_bleu_and_chrf_are_sacrebleus_scores_with_their_signatures():
    scores = corpus_scores(HYPOTHESES, REFERENCES)
    assert scores.bleu == sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES]).score
    assert scores.chrf == sacrebleu.corpus_chrf(HYPOTHESES, [REFERENCES]).score
    assert 0 < scores.bleu < 100 and 0 < scores.chrf < 100
    assert scores.bleu_signature.startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")
    assert scores.chrf_signature.startswith("nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:")
    assert corpus_scores(REFERENCES, REFERENCES).bleu == pytest.approx(100)


def test_scores_need_one_reference_per_hypothesis():
    with pytest.raises(ValueError, match="2 hypotheses for 3 references"):
        corpus_scores(HYPOTHESES[:2], REFERENCES)


def tokenizers():
    src = WordTokenizer.train([pair.src for pair in PAIRS], "en", min_frequency=1)
    tgt = WordTokenizer.train([pair.tgt for pair in PAIRS], "it", min_frequency=1)
    return src, tgt


def tiny_model(src, tgt, max_len=16, seed=0, positional="sinusoidal"):
    config = model_config(dict(d_model=8, n_heads=2, d_ff=16, n_encoder_layers=1, n_decoder_layers=1,
                               positional=positional), (src.vocab_size, tgt.vocab_size), src.pad_id, max_len)
    return Transformer(config, np.random.default_rng(seed))


def test_hypotheses_and_references_are_scored_as_written_text(monkeypatch):
    """With decoding replaced by an oracle that outputs the reference's tokens, the hypotheses are
    the detokenized references (`l'uomo mangia la mela.`) and BLEU is 100."""
    src, tgt = tokenizers()
    by_source = {tuple(src.encode(pair.src)): tgt.encode(pair.tgt) for pair in PAIRS}

    def oracle(model, sources, sos_id, eos_id, beam_size=1, length_penalty=0.6, batch_size=64, progress=None):
        return [by_source[tuple(source[1:-1])] for source in sources]

    monkeypatch.setattr(translation, "decode_ids", oracle)
    result = evaluate_pairs(tiny_model(src, tgt), src, tgt, PAIRS)
    assert result.references[0] == ["l'uomo mangia la mela."] and result.sources[0] == "the man eats the apple."
    assert [[hypothesis] for hypothesis in result.greedy] == [[hypothesis] for hypothesis in result.beam] == \
        result.references
    assert result.greedy_scores.bleu == result.beam_scores.bleu == pytest.approx(100)
    assert result.best is result.beam_scores


def test_a_hypothesis_equal_to_the_second_reference_scores_100():
    references = [["il gatto dorme.", "la gatta dorme."], ["piove.", "sta piovendo.", "cade la pioggia."]]
    scores = corpus_scores(["la gatta dorme.", "cade la pioggia."], references)
    assert scores.bleu == pytest.approx(100) and scores.chrf == pytest.approx(100)
    assert "nrefs:var" in scores.bleu_signature
    assert corpus_scores(["la gatta dorme."], [["il gatto dorme."]]).bleu < 50      # one reference: not 100


def test_a_repeated_source_is_translated_once_and_scored_against_all_its_translations(monkeypatch):
    """Two translations of "the man eats the apple.": the oracle outputs the second; BLEU is 100,
    the source is decoded once, and the perplexity counts both references."""
    src, tgt = tokenizers()
    pairs = PAIRS + [Pair("the man eats the apple .", "oggi l' uomo mangia la mela .")]
    second = {tuple(src.encode(pair.src)): tgt.encode(pair.tgt) for pair in pairs}      # the last wins
    decoded = []

    def oracle(model, sources, sos_id, eos_id, beam_size=1, length_penalty=0.6, batch_size=64, progress=None):
        decoded.append(len(sources))
        return [second[tuple(source[1:-1])] for source in sources]

    monkeypatch.setattr(translation, "decode_ids", oracle)
    result = evaluate_pairs(tiny_model(src, tgt), src, tgt, pairs, beam_size=1)
    assert decoded == [len(PAIRS)] and result.n_pairs == len(pairs)
    assert result.references[0] == ["l'uomo mangia la mela.", "oggi l'uomo mangia la mela."]
    assert result.greedy[0] == "oggi l'uomo mangia la mela."
    assert result.greedy_scores.bleu == pytest.approx(100)
    assert evaluation.reference_counts(result) == ("4 distinct sources translated once each and scored against "
                                                   "all 5 references (1 to 2 a source)")


def test_greedy_and_beam_search_are_both_run_and_beam_1_is_greedy_only():
    src, tgt = tokenizers()
    model = tiny_model(src, tgt)
    both = evaluate_pairs(model, src, tgt, PAIRS, beam_size=3)
    assert len(both.greedy) == len(both.beam) == 4 and both.beam_size == 3
    greedy = evaluate_pairs(model, src, tgt, PAIRS, beam_size=1)
    assert greedy.beam is None and greedy.beam_scores is None and greedy.best is greedy.greedy_scores
    assert greedy.greedy == both.greedy


def test_pairs_longer_than_the_maximum_length_are_scored_and_left_out_of_a_learned_models_perplexity_only():
    src, tgt = tokenizers()          # the sofa pair: 7 words + [SOS] [EOS] > 8
    for positional, n_perplexity_pairs, n_cut in (("sinusoidal", 4, 0), ("learned", 3, 1)):
        result = evaluate_pairs(tiny_model(src, tgt, 8, positional=positional), src, tgt, PAIRS, beam_size=1)
        assert result.n_pairs == 4 and len(result.sources) == len(result.greedy) == 4
        assert "the cat sleeps on the sofa." in result.sources
        assert (result.n_perplexity_pairs, result.n_cut) == (n_perplexity_pairs, n_cut)


def test_mean_cross_entropy_is_the_mean_negative_log_probability_of_the_non_padding_labels():
    src, tgt = tokenizers()
    model = tiny_model(src, tgt)
    encoded = encode_pairs(PAIRS, src, tgt)
    batch = make_batch(encoded, np.arange(len(PAIRS)))
    model.eval()
    log_p = F.log_softmax(model(batch.src, batch.tgt_in), axis=-1).data.astype(np.float64)
    model.train()
    label_log_p = np.take_along_axis(log_p, batch.tgt_out[..., None], axis=-1)[..., 0]
    real = batch.tgt_out != tgt.pad_id
    expected = -label_log_p[real].mean()
    assert real.sum() == sum(len(tgt.encode(pair.tgt)) + 1 for pair in PAIRS)   # the labels and each EOS
    assert mean_cross_entropy(model, encoded, batch_size=3) == pytest.approx(expected, rel=1e-5)
    assert perplexity(expected) == pytest.approx(math.exp(expected))


def test_a_model_that_guesses_uniformly_has_the_vocabulary_size_as_perplexity():
    src, tgt = tokenizers()
    model = tiny_model(src, tgt)
    model.projection.weight.data[:] = 0.0             # every logit 0: p = 1 / l for every word
    cross_entropy = mean_cross_entropy(model, encode_pairs(PAIRS, src, tgt))
    assert perplexity(cross_entropy) == pytest.approx(tgt.vocab_size, rel=1e-5)


def test_translate_returns_written_text_for_every_sentence_longer_ones_included():
    src, tgt = tokenizers()
    model = tiny_model(src, tgt, max_len=8)
    outputs = translate(model, src, tgt, ["the man eats the apple .", "the cat sleeps .",
                                          "the man eats the apple on the sofa"], beam_size=2)
    assert len(outputs) == 3 and all(isinstance(text, str) for text in outputs)
    assert all(" ." not in text and "' " not in text for text in outputs)
