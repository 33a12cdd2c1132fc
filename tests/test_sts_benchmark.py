"""`numpy-transformer bench sts`: the STS benchmark's file read as untrusted input (each fault one
line naming the file, the line and the field), Spearman's and Pearson's correlations of the pair
cosines with the human scores, the throughput's bookkeeping, and the check against
sentence-transformers' figure. The model is a tiny random BERT folder built here and the scored
pairs are the test's own; tests/test_torch_sts.py runs sentence-transformers beside it."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from numpy_transformer.benchmarks import sts
from numpy_transformer.interop.sentence_encoder import load_sentence_encoder
from numpy_transformer.sentence_embedding import embed
from run_helpers import assert_clear_error, run_main
from test_untrusted_hf_metadata import bert_config, bert_tensors, bert_tokenizer, write_folder

PAIRS = [("the cat sat on the mat", "a cat sat on a mat", "4.800"),
         ("the dog ran", "the dogs ran", "3.750"),
         ("a cat ran on the mat", "the dog sat", "1.000"),
         ("the hat", "a hat on the cat", "2.400"),
         ("the dog sat on the hat", "a mat ran", "0.000"),
         ("a dog ran on a mat", "a dog ran on a mat", "5.000")]


def sts_line(first, second, score, genre="main-captions", sources=()):
    """A line of sts-test.csv: genre, file, year, id, score, the two sentences, [the sources]."""
    return "\t".join([genre, "MSRvid", "2012test", "0001", score, first, second, *sources]) + "\n"


@pytest.fixture
def sts_file(tmp_path):
    path = tmp_path / "sts-test.csv"
    path.write_text("".join(sts_line(*pair, sources=("src-a", "src-b") if i % 2 else ())
                            for i, pair in enumerate(PAIRS)), encoding="utf-8")
    return path


@pytest.fixture
def encoder(tmp_path):
    """A sentence-embedding folder: a one-layer BERT of width 8, random weights, no modules.json
    (mean pooling over the real tokens, as sentence-transformers reads such a folder)."""
    tokenizer = bert_tokenizer()
    return write_folder(tmp_path / "encoder", bert_config(tokenizer.get_vocab_size()),
                        bert_tensors(tokenizer.get_vocab_size(), np.random.default_rng(3)), tokenizer,
                        {"cls_token": "[CLS]", "sep_token": "[SEP]", "mask_token": "[MASK]"})


@pytest.fixture
def in_process(monkeypatch):
    """The command runs in this process (its BLAS thread count is already the one asked for)."""
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")


def bench_sts(encoder, data, *flags):
    return run_main(["bench", "sts", "--model", encoder, "--data", data, *flags])


def test_the_benchmarks_lines_are_read_with_and_without_their_source_fields(sts_file):
    pairs = sts.read_sts_pairs(sts_file)
    assert pairs.first == [first for first, _, _ in PAIRS]
    assert pairs.second == [second for _, second, _ in PAIRS]
    np.testing.assert_array_equal(pairs.scores, [float(score) for _, _, score in PAIRS])
    assert pairs.sentences() == pairs.first + pairs.second


def test_quote_marks_are_text_not_quoting(tmp_path):
    path = tmp_path / "quotes.csv"
    path.write_text(sts_line('"A man, a plan" said he.', "He said 'a plan'.", "3") +
                    sts_line('"Unclosed quote', "x", "1"), encoding="utf-8")
    pairs = sts.read_sts_pairs(path)
    assert pairs.first == ['"A man, a plan" said he.', '"Unclosed quote']


GOOD = sts_line("the cat sat", "the dog sat", "2.5")
BAD_FILES = {
    "six fields": (GOOD + "main\tMSRvid\t2012\t0002\t3.0\tonly one sentence\n", r"line 2 has 6 tab-separated field"),
    "eight fields": (GOOD + sts_line("a", "b", "1", sources=("one source",)), r"line 2 has 8 .*or 9 with source 1"),
    "score above 5": (GOOD + sts_line("a", "b", "5.2"), r"line 2: score \(field 5\) is '5.2'.* from 0 to 5"),
    "negative score": (GOOD + sts_line("a", "b", "-0.1"), r"line 2: score \(field 5\) is '-0.1'"),
    "score not a number": (sts_line("a", "b", "high") + GOOD, r"line 1: score \(field 5\) is 'high'"),
    "nan score": (GOOD + sts_line("a", "b", "nan"), r"line 2: score \(field 5\) is 'nan'"),
    "empty second sentence": (GOOD + sts_line("a", " ", "1"), r"line 2: sentence 2 \(field 7\) is empty"),
    "empty first sentence": (sts_line("", "b", "1") + GOOD, r"line 1: sentence 1 \(field 6\) is empty"),
    "blank line": (GOOD + "\n" + GOOD, r"line 2 has 1 tab-separated field"),
    "no pairs": ("", r"no scored pairs"),
    "equal scores": (GOOD + GOOD, r"every pair has the score 2.5: a rank correlation needs"),
}


@pytest.mark.parametrize("content, message", BAD_FILES.values(), ids=BAD_FILES.keys())
def test_each_fault_of_the_file_is_one_line_naming_file_line_and_field(encoder, tmp_path, in_process, content,
                                                                        message):
    path = tmp_path / "bad.csv"
    path.write_text(content, encoding="utf-8")
    status, out, err = bench_sts(encoder, path, "--no-reference")
    assert_clear_error(status, err, f"{path}: {message}")
    assert len(err.strip().splitlines()) == 1 and out == ""


def test_a_file_that_is_not_utf8_is_one_line_naming_the_line(encoder, tmp_path, in_process):
    path = tmp_path / "latin1.csv"
    path.write_bytes(GOOD.encode() + sts_line("un caffè", "a coffee", "4").encode("latin-1"))
    status, _, err = bench_sts(encoder, path, "--no-reference")
    assert_clear_error(status, err, rf"{path}: line 2 is not UTF-8 text")


def test_a_missing_file_is_one_line(encoder, tmp_path, in_process):
    status, _, err = bench_sts(encoder, tmp_path / "absent.csv", "--no-reference")
    assert_clear_error(status, err, "absent.csv")


def test_spearman_is_pearson_of_the_ranks_and_pearson_of_the_values():
    rng = np.random.default_rng(0)
    cosines, scores = rng.uniform(-1, 1, 50), rng.uniform(0, 5, 50)
    ranks = lambda values: np.argsort(np.argsort(values)).astype(float)   # noqa: E731 (no ties here)
    figures = sts.correlations(cosines, scores)
    assert figures["spearman"] == pytest.approx(np.corrcoef(ranks(cosines), ranks(scores))[0, 1], abs=1e-12)
    assert figures["pearson"] == pytest.approx(np.corrcoef(cosines, scores)[0, 1], abs=1e-12)
    assert sts.correlations(np.exp(scores), scores)["spearman"] == pytest.approx(1.0)     # monotone: ρ = 1


def test_the_cosine_of_pair_k_compares_row_k_with_row_n_plus_k():
    vectors = np.random.default_rng(1).normal(size=(6, 4)).astype(np.float32)
    expected = [vectors[k] @ vectors[3 + k] / (np.linalg.norm(vectors[k]) * np.linalg.norm(vectors[3 + k]))
                for k in range(3)]
    cosines = sts.pair_cosines(vectors)
    assert cosines.dtype == np.float32
    np.testing.assert_allclose(cosines, expected, rtol=1e-6)


def test_the_timed_passes_follow_one_untimed_batch():
    calls = []
    vectors, seconds = sts.timed_embeddings(lambda texts: calls.append(list(texts)) or np.ones((len(texts), 2)),
                                            list("abcdefg"), batch_size=3, runs=2)
    assert calls == [list("abc"), list("abcdefg"), list("abcdefg")]
    assert vectors.shape == (7, 2) and len(seconds) == 2 and all(s >= 0 for s in seconds)


def expected_spearman(encoder, path):
    """ρ computed step by step: the loader's model, `embed`, the cosines, scipy's spearmanr."""
    from scipy.stats import spearmanr

    model, tokenizer, recipe = load_sentence_encoder(encoder)
    pairs = sts.read_sts_pairs(path)
    first, second = (embed(model, tokenizer, texts, recipe) for texts in (pairs.first, pairs.second))
    cosines = [a @ b / (np.linalg.norm(a) * np.linalg.norm(b)) for a, b in zip(first, second)]
    return spearmanr(cosines, pairs.scores).statistic


def test_the_command_reports_the_spearman_of_the_models_own_embeddings(encoder, sts_file, in_process):
    status, out, err = bench_sts(encoder, sts_file, "--no-reference", "--batch-size", "4", "--runs", "3", "--json")
    assert status == 0, err
    [figures] = json.loads(out.strip().splitlines()[-1])
    assert figures["spearman"] == pytest.approx(expected_spearman(encoder, sts_file), abs=1e-6)
    assert figures["framework"] == "numpy-transformer" and figures["pairs"] == len(PAIRS)
    assert figures["sentences_per_second"] == pytest.approx(2 * len(PAIRS) / figures["seconds"])
    assert (figures["threads"], figures["batch_size"]) == (1, 4)
    assert f"{len(PAIRS)} scored pairs ({2 * len(PAIRS)} sentences)" in out
    assert "mean pooling, not normalised, texts cut at 16 tokens; batches of 4, 1 thread, median of 3 runs" in out
    row = next(line for line in out.splitlines() if line.startswith("numpy-transformer"))
    assert row.split()[1:3] == [f"{100 * figures['spearman']:.2f}", f"{100 * figures['pearson']:.2f}"]


def fake_reference(monkeypatch, cosines):
    """sentence-transformers' child process replaced: it 'measures' `cosines` in 2 seconds, or
    reports that it is not installed (cosines None)."""
    from numpy_transformer.benchmarks import train_step

    answer = "null" if cosines is None else json.dumps({"cosines": np.asarray(cosines).tolist(), "seconds": [2.0]})
    monkeypatch.setattr(train_step, "in_child", lambda module, function, *arguments: answer)


def test_the_reference_figure_is_reported_beside_and_checked_against_this_projects(encoder, sts_file, monkeypatch,
                                                                                   in_process):
    model, tokenizer, recipe = load_sentence_encoder(encoder)
    own = sts.pair_cosines(embed(model, tokenizer, sts.read_sts_pairs(sts_file).sentences(), recipe))
    fake_reference(monkeypatch, own + np.float32(1e-7))
    status, out, err = bench_sts(encoder, sts_file, "--json")
    assert status == 0, err
    ours, theirs = json.loads(out.strip().splitlines()[-1])
    assert theirs["framework"] == "sentence-transformers" and theirs["sentences_per_second"] == 2 * len(PAIRS) / 2.0
    assert theirs["spearman"] == pytest.approx(ours["spearman"], abs=1e-12)
    assert "the two agree: Spearman differs by 0.0e+00 (at most 0.0001)" in out


def test_a_reference_that_orders_the_pairs_otherwise_is_an_error(encoder, sts_file, monkeypatch, in_process):
    fake_reference(monkeypatch, np.linspace(0, 1, len(PAIRS)))
    status, _, err = bench_sts(encoder, sts_file)
    assert_clear_error(status, err, r"Spearman correlation .* differs from sentence-transformers' .* more than 0.0001")


def test_without_sentence_transformers_the_command_says_so_and_gives_its_own_figure(encoder, sts_file, monkeypatch,
                                                                                    in_process):
    fake_reference(monkeypatch, None)
    status, out, err = bench_sts(encoder, sts_file, "--json")
    assert status == 0, err
    assert sts.MISSING_REFERENCE in out and len(json.loads(out.strip().splitlines()[-1])) == 1


def test_the_reference_child_prints_null_where_sentence_transformers_is_missing(monkeypatch, sts_file, capsys):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    sts.print_reference_cosines("unused", str(sts_file), 1, 32, 1)
    assert capsys.readouterr().out == "null\n"


def test_the_command_rerun_for_its_thread_count_keeps_every_option(encoder, sts_file):
    environment = {name: value for name, value in os.environ.items() if name != "OPENBLAS_NUM_THREADS"}
    result = subprocess.run([sys.executable, "-m", "numpy_transformer.cli", "bench", "sts", "--model", str(encoder),
                             "--data", str(sts_file), "--batch-size", "2", "--runs", "2", "--no-reference", "--json"],
                            capture_output=True, text=True, env=environment)
    assert result.returncode == 0, result.stderr
    [figures] = json.loads(result.stdout.strip().splitlines()[-1])
    assert (figures["batch_size"], figures["threads"], figures["pairs"]) == (2, 1, len(PAIRS))
    assert "median of 2 runs" in result.stdout
