"""examples/thesis_experiment.py on the packaged Tatoeba corpus (real English–Italian, no word
alignments): two tiny one-layer models trained for a few steps, the roles counted and eq. (19)
validated with both methods over held-out sentences of the validation split, the alignment
error rate skipped with a note; and the two summaries (count_roles, mean_validation) on heads
whose answers are known."""
import contextlib
import io
import re

import numpy as np
import pytest

from numpy_transformer.analysis.capture import AttentionCapture
from numpy_transformer.analysis.roles import ROLES, count_roles, role_counts_markdown, role_shares_markdown
from numpy_transformer.analysis.structured import THESIS_SETTINGS, mean_validation, validation_table
from numpy_transformer.data import load_dataset_splits
from numpy_transformer.training.checkpoint import load_checkpoint
from run_helpers import load_example

SENTENCES = 3
TINY = ["--dataset", "tatoeba", "--subset", "2000", "--d-model", "16", "--steps", "2", "--batch-size", "8",
        "--sentences", str(SENTENCES), "--samples", "2", "--substitution-pairs", "0", "--pairs", "5"]


@pytest.fixture(scope="module")
def example():
    return load_example("thesis_experiment")


@pytest.fixture(scope="module")
def real_run(example, tmp_path_factory):
    """(printed text, --out folder) of one tiny run on Tatoeba."""
    out = tmp_path_factory.mktemp("thesis_tatoeba")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        example.main([*TINY, "--out", str(out)])
    return printed.getvalue(), out


def markdown_rows(text, header_start):
    """The data rows (cells split) of every Markdown table whose header starts with header_start."""
    rows, inside = [], False
    for line in text.splitlines():
        if line.startswith(header_start):
            inside = True
        elif inside and line.startswith("|---"):
            continue
        elif inside and line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
        else:
            inside = False
    return rows


def test_the_roles_are_counted_over_the_held_out_sentences_for_both_models(real_run):
    printed, _ = real_run
    assert printed.count(f"Roles over {SENTENCES} held-out sentences (validation split") == 2
    rows = markdown_rows(printed, "| attention | head | role (share of sentences) |")
    assert len(rows) == 3 * 1 + 3 * 8                       # three kinds of attention, 1 head and 8 heads
    for row in rows:
        counts = [int(cell) for cell in row[3:3 + len(ROLES)]]
        assert sum(counts) == SENTENCES
        role = row[2].split(" (")[0]
        assert role in ROLES and counts[ROLES.index(role)] == max(counts)
    layers = markdown_rows(printed, "| attention | heads | positional |")
    kinds = ("encoder.0.self_attn", "decoder.0.self_attn", "decoder.0.cross_attn")
    assert [(row[0], row[1]) for row in layers] == [(name, heads) for heads in ("1", "8") for name in kinds]
    for row in layers:
        assert sum(int(share.rstrip("%")) for share in row[2:2 + len(ROLES)]) in (99, 100, 101)


def test_the_alignment_error_rate_is_skipped_with_a_note(real_run):
    printed, _ = real_run
    assert printed.count("No word alignments in this corpus: the alignment error rate") == 2
    assert "gold word alignments, " not in printed


def test_both_approximation_errors_are_averaged_over_the_held_out_sentences(real_run):
    printed, out = real_run
    header = "| w | num_pos | head | sentences | mean n | X = 0: distance | random search: distance | mean error | " \
             "projection: distance | mean error |"
    assert f"Validation of eq. (19) over {SENTENCES} held-out sentences" in printed
    rows = markdown_rows(printed, header)
    assert len(rows) == len(THESIS_SETTINGS) * (1 + 8)     # the encoder heads of both models
    assert {(int(r[0]), int(r[1])) for r in rows} == set(THESIS_SETTINGS)
    for w, num_pos, head, sentences, n, zero, search, search_error, projection, projection_error, *_ in rows:
        assert re.fullmatch(r"(1-head|8-heads) h\d", head) and int(sentences) == SENTENCES
        assert float(projection) <= float(search) + 1e-3       # the exact minimum never loses to the search
        assert float(projection) <= float(zero) + 1e-3
        assert float(search_error) > 0 and float(projection_error) >= 0
    assert header in (out / "report.md").read_text(encoding="utf-8")


def test_a_second_run_with_the_same_settings_reuses_the_trained_models(example, real_run):
    _, out = real_run
    args = example.parse_arguments([*TINY, "--out", str(out)])
    for n_heads, label in ((1, "1-head"), (8, "8-heads")):
        checkpoint = load_checkpoint(out / label)
        assert checkpoint.data_config.fingerprint is not None
        assert example.same_settings(checkpoint, *example.run_settings(args, n_heads))
    other = example.parse_arguments([*TINY, "--out", str(out), "--subset", "2500"])
    assert not example.same_settings(load_checkpoint(out / "8-heads"), *example.run_settings(other, 8))


class WordTokenizer:
    """Whitespace tokens, enough for held_out_sentences' lengths."""

    def encode(self, text):
        return text.split()


def test_the_held_out_sentences_are_distinct_validation_sources_of_the_length_asked(example):
    splits = load_dataset_splits("tatoeba", subset=2000)
    sentences = example.held_out_sentences(splits, WordTokenizer(), WordTokenizer(), 20, 9, 64)
    sources = [pair.src for pair in sentences]
    assert len(sources) == 20 and len(set(sources)) == 20
    assert set(sources) <= {pair.src for pair in splits.validation}
    assert not set(sources) & {pair.src for pair in splits.train}
    assert all(len(source.split()) + 2 >= 9 for source in sources)
    with pytest.raises(ValueError, match="--min-tokens"):
        example.held_out_sentences(splits, WordTokenizer(), WordTokenizer(), 20, 60, 64)


def capture_of(*heads, tokens):
    """An AttentionCapture whose encoder has these (n, n) heads over `tokens`."""
    return AttentionCapture(list(tokens), [], {"encoder.0.self_attn": np.stack(heads)})


def test_count_roles_counts_each_heads_role_and_its_most_attended_key():
    n = 12
    identity, last_token = np.eye(n), np.zeros((n, n))
    last_token[:, -1] = 1.0
    uniform = np.full((n, n), 1 / n)
    words = [f"w{i}" for i in range(n - 1)]
    captures = [capture_of(identity, last_token, tokens=[*words, "[EOS]"]),
                capture_of(uniform, last_token, tokens=[*words, "[EOS]"]),
                capture_of(identity, identity, tokens=[*words, "."])]
    first, second = count_roles(captures)
    assert (first.name, first.head, second.head) == ("encoder.0.self_attn", 0, 1)
    assert first.counts == {"positional": 2, "syntactic": 0, "rare-token": 0, "other": 1}
    assert first.role == "positional" and first.n_sentences == 3
    assert second.counts == {"positional": 1, "syntactic": 0, "rare-token": 2, "other": 0}
    assert second.role == "rare-token" and (second.top_token, second.top_token_sentences) == ("[EOS]", 2)
    assert second.mean_top_column_mass == pytest.approx((1 + 1 + 1 / n) / 3)
    table = role_counts_markdown([first, second])
    assert "| encoder.0.self_attn | 1 | rare-token (67%) | 1 | 0 | 2 | 0 | `[EOS]` (2/3) |" in table
    shares = role_shares_markdown([first, second])
    assert "| encoder.0.self_attn | 2 | 50% | 0% | 33% | 17% | 1 positional, 1 rare-token |" in shares


def test_mean_validation_averages_each_head_and_setting_over_the_sentences():
    rng = np.random.default_rng(0)
    sentences = []
    for n in (6, 10):
        H = rng.random((n, n))
        sentences.append({"a": H / H.sum(axis=1, keepdims=True), "b": np.eye(n)})
    rows = [row for heads in sentences for row in validation_table(heads, ((2, 1), (1, 1)), n_samples=3)]
    means = mean_validation(rows)
    assert [(m.w, m.num_pos, m.head) for m in means] == [(2, 1, "a"), (2, 1, "b"), (1, 1, "a"), (1, 1, "b")]
    for mean in means:
        group = [r for r in rows if (r.w, r.num_pos, r.head) == (mean.w, mean.num_pos, mean.head)]
        assert mean.n_sentences == 2 and mean.mean_n == 8
        assert mean.search_distance == pytest.approx(np.mean([r.search_distance for r in group]))
        assert mean.projection_mean_error == pytest.approx(np.mean([r.projection_distance / r.n ** 2 for r in group]))
        assert mean.search_beats_zero == np.mean([r.search_distance < r.mass for r in group])
    identity = [m for m in means if m.head == "b"]
    assert all(m.projection_distance == 0 and m.captured_mass == 1 for m in identity)
