"""Long sentences are translated, not dropped: sinusoidal (eq. (1)) and relative positions read
sources past the training max_len, learned ones read their first max_len tokens with a note;
a file given to `translate` gets one output line per input line; the evaluation scores every
held-out pair; incremental decoding equals the full forward past max_len."""
import io
import json
import sys

import numpy as np
import pytest

import autograd.functional as F
from autograd import Tensor
import numpy_transformer.translation as translation
from numpy_transformer.config import TransformerConfig
from numpy_transformer.data import Pair, WordTokenizer
from numpy_transformer.decoding import IncrementalDecoder, beam_search, greedy_decode
from numpy_transformer.inference import scoring_mode
from numpy_transformer.model import Transformer
from numpy_transformer.positional import PositionalEncoding, sinusoidal_encoding
from numpy_transformer.training.evaluation import evaluate_pairs, print_translation_scores
from numpy_transformer.training.settings import model_config
from numpy_transformer.translation import read_sources, translate
from run_helpers import run_main

PAIRS = [Pair("the man eats the apple .", "l' uomo mangia la mela ."),
         Pair("the cat sleeps .", "il gatto dorme ."),
         Pair("today the man and the cat sleep on the big sofa at home .",
              "oggi l' uomo e il gatto dormono sul grande divano a casa ."),
         Pair("the man sleeps .", "l' uomo dorme .")]
LONG = " ".join(["the man eats the apple and"] * 3) + " the cat sleeps ."     # 22 tokens, 24 with [SOS] [EOS]


def tokenizers():
    src = WordTokenizer.train([pair.src for pair in PAIRS], "en", min_frequency=1)
    tgt = WordTokenizer.train([pair.tgt for pair in PAIRS], "it", min_frequency=1)
    return src, tgt


def tiny_model(src, tgt, max_len=8, positional="sinusoidal", seed=0, dtype="float32"):
    config = model_config(dict(d_model=8, n_heads=2, d_ff=16, n_encoder_layers=1, n_decoder_layers=2,
                               positional=positional, dtype=dtype, relative_buckets=8, relative_max_distance=16),
                          (src.vocab_size, tgt.vocab_size), src.pad_id, max_len)
    return Transformer(config, np.random.default_rng(seed)).eval()


class NeverEnds:
    """The model with the logit of EOS lowered by 10⁴: every output runs to its length limit."""

    def __init__(self, model, eos_id):
        self.model, self.eos_id = model, eos_id

    def __getattr__(self, name):
        return getattr(self.model, name)

    def project(self, y):
        return self.model.project(y) + np.where(np.arange(self.config.tgt_vocab_size) == self.eos_id, -1e4, 0.0)


# --- 1. sources past max_len ---------------------------------------------------------------------

def test_the_sinusoidal_table_grows_with_the_rows_of_eq_1():
    encoding = PositionalEncoding(8, 4, 0.0, np.random.default_rng(0))
    x = np.zeros((1, 10, 8), np.float32)
    np.testing.assert_array_equal(encoding(Tensor(x)).data[0], sinusoidal_encoding(10, 8))
    np.testing.assert_array_equal(encoding(Tensor(x[:, :1]), start=30).data[0, 0], sinusoidal_encoding(31, 8)[30])
    assert encoding.P.dtype == np.float32 and len(encoding.P) >= 31


def test_a_sinusoidal_model_reads_a_source_past_max_len_as_a_model_built_longer_would():
    """max_len 8 and max_len 64, the same weights: the same logits, bit for bit, for a 24-token
    source and a 30-token target; and the same translation of LONG."""
    src, tgt = tokenizers()
    short, long = tiny_model(src, tgt, 8), tiny_model(src, tgt, 64)
    source = translation.with_specials(src.encode(LONG), src)[None]
    assert source.shape[1] == 24 and short.config.position_limit is None
    target = np.random.default_rng(1).integers(4, tgt.vocab_size, (1, 30))
    np.testing.assert_array_equal(short(source, target).data, long(source, target).data)
    assert translate(short, src, tgt, [LONG], beam_size=2) == translate(long, src, tgt, [LONG], beam_size=2)


def test_the_output_of_a_long_source_may_run_to_its_length_plus_50():
    src, tgt = tokenizers()
    model = NeverEnds(tiny_model(src, tgt, 8), tgt.eos_id)
    (output,) = translation.decode_ids(model, [translation.with_specials(src.encode(LONG), src)], tgt.sos_id,
                                       tgt.eos_id)
    assert len(output) == 24 + 50


def test_a_learned_model_reads_the_first_max_len_tokens_and_warns_naming_the_sentence():
    src, tgt = tokenizers()
    model = tiny_model(src, tgt, 8, positional="learned")
    assert model.config.position_limit == 8
    sources, cut = read_sources(model, src, ["the cat sleeps .", LONG])
    assert cut == {1: 22} and len(sources[1]) == 8
    np.testing.assert_array_equal(sources[1], translation.with_specials(src.encode(LONG)[:6], src))
    with pytest.warns(UserWarning, match=r"sentence 2 has 22 tokens; the model reads the first 6"):
        outputs = translate(model, src, tgt, ["the cat sleeps .", LONG])
    assert len(outputs) == 2 and outputs[1] == translate(model, src, tgt, [" ".join(LONG.split()[:6])])[0]
    with pytest.raises(ValueError, match=r"longer than the model's max_len=8"):
        greedy_decode(model, np.full((1, 9), 5), tgt.sos_id, tgt.eos_id)


def test_positions_stop_at_max_len_where_a_table_has_max_len_rows_or_columns():
    sizes = dict(d_model=8, n_heads=2, d_ff=16, n_encoder_layers=1, n_decoder_layers=1, max_len=8)
    assert TransformerConfig(11, 13, **sizes).position_limit is None
    assert TransformerConfig(11, 13, positional="relative", **sizes).position_limit is None
    assert TransformerConfig(11, 13, positional="learned", **sizes).position_limit == 8
    linformer = TransformerConfig(11, 13, attention="linformer", decoder_attention="full", **sizes)
    assert linformer.position_limit == 8                            # its E and F: (k_proj, max_len)


def test_a_relative_bias_extends_too():
    src, tgt = tokenizers()
    short, long = tiny_model(src, tgt, 8, "relative"), tiny_model(src, tgt, 64, "relative")
    assert short.config.position_limit is None
    assert translate(short, src, tgt, [LONG]) == translate(long, src, tgt, [LONG])


def test_a_sentence_without_a_token_is_translated_as_an_empty_string():
    class ReadsNothingInvisible(WordTokenizer):
        def encode(self, text):
            return [] if not text.replace("\u200b", "").strip() else super().encode(text)

    src, tgt = tokenizers()
    reader = ReadsNothingInvisible(src.tokenizer, "en")
    outputs = translate(tiny_model(src, tgt), reader, tgt, ["the cat sleeps .", "", "\u200b", "the man sleeps ."])
    assert outputs[1] == outputs[2] == "" and outputs[0] and outputs[3]


# --- 2. a file in, a file of the same length out ---------------------------------------------------

@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """{positional: run folder} of `train` with max_len 10 on built-in pairs, sinusoidal and learned."""
    folders = {}
    for positional in ("sinusoidal", "learned"):
        folders[positional] = tmp_path_factory.mktemp(positional) / "run"
        status, _, err = run_main(["train", "--out", folders[positional], "--dataset", "builtin", "--tokenizer", "word",
                                   "--no-shared-vocabulary", "--n-pairs", "120", "--max-len", "10",
                                   "--d-model", "16", "--n-heads", "2", "--d-ff", "32", "--batch-size", "16",
                                   "--steps", "4", "--samples", "0", "--positional", positional])
        assert status == 0, err
    return folders


def translate_standard_input(monkeypatch, folder, data):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    return run_main(["translate", "--checkpoint", folder])


LINES = [b"the man eats .", b"", b"the man eats the apple and the woman drinks the water and the cat sleeps .",
         b"   ", b"we sleep\x0c at home .", b"the cat sleeps ."]


@pytest.mark.parametrize("positional", ["sinusoidal", "learned"])
def test_a_file_with_an_empty_and_a_long_line_gives_one_output_line_per_input_line(runs, monkeypatch, positional):
    status, out, err = translate_standard_input(monkeypatch, runs[positional], b"\n".join(LINES) + b"\n")
    assert status == 0, err
    outputs = out.split("\n")
    assert outputs[-1] == "" and len(outputs[:-1]) == len(LINES)
    assert [i for i, line in enumerate(outputs[:-1]) if not line] == [1, 3]
    assert "note: line 2 is empty: its translation is an empty line" in err
    assert "note: line 4 is empty" in err
    cut = "note: line 3 has 16 tokens; the model reads the first 8 (its 10 positions hold [SOS] and [EOS] too)"
    assert (cut in err) == (positional == "learned")
    assert "Traceback" not in err


def test_lines_end_at_line_feeds_only(runs, monkeypatch):
    """Windows line ends, no line end after the last line, and a line separator (U+2028) and a
    form feed inside a line, which str.splitlines would take for line ends: three lines."""
    data = b"the man eats .\r\n\r\nwe sleep \xe2\x80\xa8 at\x0c home ."
    status, out, _ = translate_standard_input(monkeypatch, runs["sinusoidal"], data)
    assert status == 0 and len(out.split("\n")) == 4 and out.split("\n")[1] == ""


# --- 3. every held-out pair scored ---------------------------------------------------------------

def reference_oracle(src, tgt, pairs):
    """decode_ids that outputs, for each source, the tokens of the reference of the pair whose
    source begins with the tokens read (a cut source included)."""
    references = [(src.encode(pair.src), tgt.encode(pair.tgt)) for pair in pairs]

    def decode_ids(model, sources, sos_id, eos_id, beam_size=1, length_penalty=1.0, batch_size=64, progress=None):
        read = [list(source[1:-1]) for source in sources]
        return [next(y for x, y in references if x[:len(words)] == words) for words in read]
    return decode_ids


@pytest.mark.parametrize("positional, n_perplexity_pairs, n_cut", [("sinusoidal", 4, 0), ("learned", 3, 1)])
def test_the_evaluation_scores_a_pair_longer_than_max_len(monkeypatch, capsys, positional, n_perplexity_pairs, n_cut):
    """With decoding replaced by an oracle that outputs the references, BLEU is 100 over all four
    sources, the long one included; the perplexity leaves out only what a learned P cannot hold."""
    src, tgt = tokenizers()
    monkeypatch.setattr(translation, "decode_ids", reference_oracle(src, tgt, PAIRS))
    result = evaluate_pairs(tiny_model(src, tgt, 8, positional), src, tgt, PAIRS, beam_size=1)
    assert len(result.sources) == len(result.greedy) == result.n_pairs == 4
    assert "oggi l'uomo e il gatto dormono sul grande divano a casa." in result.greedy
    assert result.greedy_scores.bleu == pytest.approx(100)
    assert (result.n_perplexity_pairs, result.n_cut) == (n_perplexity_pairs, n_cut)
    assert np.isfinite(result.cross_entropy)
    print_translation_scores(result, "test", samples=0)
    out = capsys.readouterr().out
    assert "Test split: 4 pairs, 4 sources, one reference each." in out
    assert ("sources read cut to the model's 8 positions (their first 6 tokens): 1;" in out) == bool(n_cut)
    assert ("over 3 pairs; left out, longer than the model's 8 positions: 1" in out) == bool(n_cut)


def test_the_perplexity_of_the_long_pair_is_computed_where_positions_extend():
    src, tgt = tokenizers()
    model = tiny_model(src, tgt, 8)
    long_only = evaluate_pairs(model, src, tgt, PAIRS[2:3], beam_size=1)
    assert long_only.n_perplexity_pairs == 1 and np.isfinite(long_only.cross_entropy)
    learned = evaluate_pairs(tiny_model(src, tgt, 8, "learned"), src, tgt, PAIRS[2:3], beam_size=1)
    assert learned.cross_entropy is None and learned.perplexity is None and len(learned.greedy) == 1


def test_metrics_json_says_what_was_scored(runs):
    metrics = {positional: json.loads((folder / "metrics.json").read_text()) for positional, folder in runs.items()}
    for scores in metrics.values():
        assert scores["test_pairs"] == scores["test_sources"] == scores["bleu_references"] == 6
    assert metrics["sinusoidal"]["perplexity_pairs"] == 6 and metrics["sinusoidal"]["test_sources_cut"] == 0
    assert metrics["learned"]["test_sources_cut"] > 0 and metrics["learned"]["perplexity_pairs"] < 6


# --- 4. the cache past max_len ---------------------------------------------------------------------

@pytest.mark.parametrize("positional", ["sinusoidal", "relative"])
def test_incremental_decoding_equals_the_full_forward_at_positions_past_max_len(positional):
    """Feeding 30 target tokens one at a time through the key/value cache gives, at every step,
    the log-probabilities of one full forward over the whole prefix (float64, to 1e-12)."""
    src, tgt = tokenizers()
    model = tiny_model(src, tgt, 8, positional, dtype="float64")
    source = translation.with_specials(src.encode(LONG), src)[None]
    target = np.concatenate([[tgt.sos_id], np.random.default_rng(2).integers(4, tgt.vocab_size, 29)])[None]
    with scoring_mode(model):
        decoder = IncrementalDecoder(model, source)
        cached = np.stack([decoder.log_probs(target[:, t]) for t in range(target.shape[1])], axis=1)
        full = F.log_softmax(model(source, target), axis=-1).data
    full[..., model.config.pad_id] = -np.inf
    assert cached.shape == (1, 30, tgt.vocab_size)
    assert len(decoder.cache[0]["self"]["k"].shape) == 4 and decoder.cache[0]["self"]["k"].shape[2] == 30
    np.testing.assert_allclose(cached, full, rtol=0, atol=1e-12)


@pytest.mark.parametrize("decoder", [greedy_decode, beam_search])
def test_cached_and_uncached_decoding_of_a_long_source_agree_past_max_len(decoder):
    src, tgt = tokenizers()
    model = NeverEnds(tiny_model(src, tgt, 8, dtype="float64"), tgt.eos_id)
    source = translation.with_specials(src.encode(LONG), src)[None]
    cached = decoder(model, source, tgt.sos_id, tgt.eos_id, max_len=20)
    uncached = decoder(model, source, tgt.sos_id, tgt.eos_id, max_len=20, use_cache=False)
    assert cached == uncached and len(cached[0]) == 20
