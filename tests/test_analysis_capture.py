"""Capturing every attention matrix of a sentence pair (numpy_transformer/analysis/capture.py)
and drawing it (heatmaps.py, spectra.py): stable names, shapes, tokens, .npz round trip, PNG
and SVG files, a clear error for attention variants that keep no weights."""
import numpy as np
import pytest

from analysis_helpers import PAIRS, tiny_model, tokenizers
from numpy_transformer.analysis.capture import AttentionCapture, capture_attention, capture_sentence
from numpy_transformer.analysis.heatmaps import draw_attention_grid, draw_attention_head, draw_capture
from numpy_transformer.analysis.hooks import attention_modules
from numpy_transformer.analysis.spectra import draw_spectra

SRC_TOKENIZER, TGT_TOKENIZER = tokenizers()
PAIR = PAIRS[0]


@pytest.fixture(scope="module")
def capture():
    model = tiny_model(SRC_TOKENIZER, TGT_TOKENIZER)
    return capture_sentence(model, SRC_TOKENIZER, TGT_TOKENIZER, PAIR.src, PAIR.tgt)


def test_every_attention_layer_has_a_stable_name_in_running_order():
    model = tiny_model(SRC_TOKENIZER, TGT_TOKENIZER)
    assert list(attention_modules(model)) == ["encoder.0.self_attn", "encoder.1.self_attn", "decoder.0.self_attn",
                                              "decoder.0.cross_attn", "decoder.1.self_attn", "decoder.1.cross_attn"]


def test_the_capture_holds_every_matrix_with_its_shape_and_tokens(capture):
    assert capture.src_tokens == ["[SOS]", *SRC_TOKENIZER.tokens(PAIR.src), "[EOS]"]
    assert capture.tgt_tokens == ["[SOS]", *TGT_TOKENIZER.tokens(PAIR.tgt)]
    n_src, n_tgt = len(capture.src_tokens), len(capture.tgt_tokens)
    shapes = {name: w.shape for name, w in capture.weights.items()}
    assert shapes == {"encoder.0.self_attn": (2, n_src, n_src), "encoder.1.self_attn": (2, n_src, n_src),
                      "decoder.0.self_attn": (2, n_tgt, n_tgt), "decoder.0.cross_attn": (2, n_tgt, n_src),
                      "decoder.1.self_attn": (2, n_tgt, n_tgt), "decoder.1.cross_attn": (2, n_tgt, n_src)}
    for name, weights in capture.weights.items():
        assert weights.sum(axis=-1) == pytest.approx(np.ones(weights.shape[:2]))
        queries, keys = capture.axes(name)
        assert weights.shape[1:] == (len(queries), len(keys))
    assert np.all(np.triu(capture.weights["decoder.0.self_attn"][0], 1) == 0)    # causal
    assert capture.stack("decoder.cross_attn").shape == (2, 2, n_tgt, n_src)


def test_the_capture_runs_in_eval_mode_and_leaves_the_mode_alone():
    model = tiny_model(SRC_TOKENIZER, TGT_TOKENIZER)
    first = capture_attention(model, [2, 5, 6, 3], [2, 7])
    second = capture_attention(model, [2, 5, 6, 3], [2, 7])
    assert model.training                                     # restored
    for name in first.weights:
        np.testing.assert_array_equal(first.weights[name], second.weights[name])   # no dropout
    assert first.src_tokens == ["2", "5", "6", "3"]


def test_without_a_target_the_capture_uses_the_models_own_translation():
    model = tiny_model(SRC_TOKENIZER, TGT_TOKENIZER)
    capture = capture_sentence(model, SRC_TOKENIZER, TGT_TOKENIZER, PAIR.src)
    assert capture.tgt_tokens[0] == "[SOS]" and 1 <= len(capture.tgt_tokens) <= model.config.max_len


def test_the_capture_saves_and_loads_as_npz_with_its_tokens(capture, tmp_path):
    capture.save(tmp_path / "attention.npz")
    loaded = AttentionCapture.load(tmp_path / "attention.npz")
    assert loaded.src_tokens == capture.src_tokens and loaded.tgt_tokens == capture.tgt_tokens
    assert loaded.weights.keys() == capture.weights.keys()
    for name in capture.weights:
        np.testing.assert_array_equal(loaded.weights[name], capture.weights[name])


def test_a_variant_that_keeps_no_weights_is_refused_by_name():
    model = tiny_model(SRC_TOKENIZER, TGT_TOKENIZER, attention="linear")
    with pytest.raises(ValueError, match=r"encoder.0.self_attn \(linear\), encoder.1.self_attn \(linear\), "
                                         r"decoder.0.self_attn \(linear\).*attention='full'"):
        capture_sentence(model, SRC_TOKENIZER, TGT_TOKENIZER, PAIR.src, PAIR.tgt)


@pytest.mark.parametrize("suffix", ["png", "svg"])
def test_heat_maps_and_spectra_are_written_as_png_or_svg(capture, tmp_path, suffix):
    paths = draw_capture(capture, tmp_path, suffix)
    assert [p.name for p in paths] == [f"{kind}.{suffix}" for kind in
                                       ("encoder_self_attn", "decoder_self_attn", "decoder_cross_attn")]
    queries, keys = capture.axes("decoder.0.cross_attn")
    paths.append(draw_attention_head(capture.weights["decoder.0.cross_attn"][1], queries, keys,
                                     tmp_path / f"head.{suffix}", "decoder.0.cross_attn, head 1"))
    paths.append(draw_spectra(capture, tmp_path / f"spectra.{suffix}"))
    signature = b"\x89PNG" if suffix == "png" else b"<?xml"
    for path in paths:
        assert path.read_bytes().startswith(signature) and path.stat().st_size > 1000


def test_the_values_of_one_head_are_printed_in_its_cells(tmp_path):
    path = draw_attention_head(np.array([[0.25, 0.75], [1.0, 0.0]]), ["a", "b"], ["x", "y"], tmp_path / "h.svg")
    text = path.read_text()
    assert all(value in text for value in ("0.25", "0.75", "1.00", "0.00"))


def test_figures_refuse_other_formats_and_misfit_tokens(tmp_path):
    with pytest.raises(ValueError, match="extension must be one of"):
        draw_attention_head(np.eye(2), ["a", "b"], ["a", "b"], tmp_path / "h.jpg")
    with pytest.raises(ValueError, match="do not fit"):
        draw_attention_grid(np.ones((1, 2, 3, 3)), ["a", "b"], ["a", "b", "c"], tmp_path / "g.png")
