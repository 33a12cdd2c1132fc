"""examples/window_study.py on tiny runs: both pairs trained (Multi30k replaced by small files
written here in its schema), every kind of attention swept, the table and the figure written;
and a missing Multi30k folder stops it before any training."""
import contextlib
import io
import json

import pytest

from run_helpers import load_example, written_pairs

TINY = ["--steps", "2", "--seeds", "0", "--sentences", "3", "--n-pairs", "120", "--d-model", "16", "--heads", "2",
        "--max-width", "2", "--max-num-pos", "1", "--min-tokens", "3", "--max-tokens", "40"]


@pytest.fixture(scope="module")
def example():
    return load_example("window_study")


def write_multi30k(folder):
    """train.jsonl (120 pairs) and val.jsonl (20) in Multi30k's schema, {"translation": {"en", "de"}}."""
    folder.mkdir()
    for name, pairs in (("train.jsonl", written_pairs(120)), ("val.jsonl", written_pairs(20, seed=2))):
        rows = [{"id": str(i), "translation": {"en": p.src, "de": p.tgt}} for i, p in enumerate(pairs)]
        (folder / name).write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return folder


def test_both_pairs_are_swept_on_every_kind_and_the_figure_is_the_last_line(example, tmp_path):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        results = example.main([*TINY, "--multi30k", str(write_multi30k(tmp_path / "m30k")),
                                "--out", str(tmp_path / "runs"), "--figures", str(tmp_path)])
    assert list(results) == list(example.PAIRS)
    for sweeps in results.values():
        assert list(sweeps) == list(example.KINDS)
        for sweep in sweeps.values():
            seeds, sentences, heads, widths = sweep.width.captured.shape
            assert (seeds, heads, widths) == (1, 2 + 1, 3) and 2 <= sentences <= 3   # 2 heads, the yardstick
            assert sweep.num_pos.captured.shape[-1] == 2
            assert ((sweep.width.captured > 0) & (sweep.width.captured <= 1 + 1e-9)).all()
    printed = out.getvalue()
    assert "| decoder.0.cross_attn | w |" in printed and "en→de Multi30k" in printed
    assert printed.strip().splitlines()[-1] == f"figure: {tmp_path / 'window_study.png'}"
    assert (tmp_path / "window_study.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_missing_multi30k_folder_is_named_before_training(example, tmp_path):
    with pytest.raises(FileNotFoundError, match="--multi30k"):
        example.main([*TINY, "--multi30k", str(tmp_path / "nowhere"), "--out", str(tmp_path / "runs")])
    assert not (tmp_path / "runs").exists()
