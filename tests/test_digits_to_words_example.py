"""examples/digits_to_words.py on a few digits and a tiny model: the sentences it trains on,
a run that learns and draws its figure, and the exact match it ends with."""
import re

import numpy as np

from run_helpers import load_example


def test_every_digit_is_written_once_in_each_language_after_its_tag():
    example = load_example("digits_to_words")
    rows, tgt_in, tgt_out = example.sentences(np.array([7, 0]))
    words = [[example.VOCABULARY[i] for i in row] for row in tgt_in]
    assert rows.tolist() == [0, 1, 0, 1]
    assert words == [["<en>", "seven"], ["<en>", "zero"], ["<it>", "sette"], ["<it>", "zero"]]
    assert [example.VOCABULARY[i] for i in tgt_out[:, 1]] == ["<eos>"] * 4
    np.testing.assert_array_equal(tgt_out[:, 0], tgt_in[:, 1])             # the word, then <eos>


def test_a_tiny_run_learns_draws_the_figure_and_ends_with_the_exact_match(tmp_path, capsys):
    example = load_example("digits_to_words")
    figure = tmp_path / "digits_to_words_attention.png"
    result = example.main(["--limit", "200", "--epochs", "8", "--d-model", "16", "--heads", "2", "--encoder-layers", "1",
                           "--lr", "1e-2", "--batch-size", "32", "--label-smoothing", "0", "--out", str(tmp_path)])
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == "data: scikit-learn digits, 150 train / 50 test (8 × 8), each named in English and Italian"
    assert re.fullmatch(r"test exact match: (0\.\d\d|1\.00)", lines[-1])
    assert result["losses"][-1] < 0.6 * result["losses"][0], result["losses"]
    assert figure.is_file() and figure.stat().st_size > 10_000


def test_the_cross_attention_maps_are_distributions_over_the_patch_grid():
    example = load_example("digits_to_words")
    model = example.build_model(example.parse_arguments(["--d-model", "8", "--heads", "2"]), np.random.default_rng(0))
    maps = example.cross_attention(model, np.random.default_rng(1).random((3, 8, 8)).astype(np.float32),
                                   np.array([1, 2, 3]))
    assert set(maps) == {"<en>", "<it>"} and maps["<en>"].shape == (3, 2, 4, 4)
    np.testing.assert_allclose(maps["<it>"].sum(axis=(-1, -2)), 1, rtol=1e-5)
