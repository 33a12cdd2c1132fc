"""examples/vit_digits.py on a few digits and a tiny model: it trains, draws the [CLS]
attention figure, and ends with the test accuracy."""
import re

import numpy as np

from run_helpers import load_example


def test_a_tiny_run_learns_draws_the_figure_and_ends_with_the_accuracy(tmp_path, capsys):
    example = load_example("vit_digits")
    figure = tmp_path / "vit_cls_attention.png"
    result = example.main(["--limit", "300", "--epochs", "10", "--d-model", "16", "--heads", "2", "--layers", "1",
                           "--lr", "1e-2", "--batch-size", "32", "--label-smoothing", "0", "--out", str(tmp_path)])
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == "data: scikit-learn digits, 225 train / 75 test (8 × 8)"
    assert re.fullmatch(r"test accuracy: 0\.\d\d|test accuracy: 1\.00", lines[-1])
    assert result["losses"][-1] < 0.75 * result["losses"][0], result["losses"]
    assert result["accuracy"] > 0.3                                   # chance is 0.1
    assert figure.is_file() and figure.stat().st_size > 10_000


def test_the_cls_attention_map_is_a_distribution_over_the_patch_grid():
    example = load_example("vit_digits")
    args = example.parse_arguments(["--d-model", "8", "--heads", "2", "--layers", "1"])
    args.patch_size = 2
    model = example.build_model(args, 8, np.random.default_rng(0))
    maps = example.cls_attention(model, np.random.default_rng(1).random((3, 8, 8)).astype(np.float32))
    assert maps.shape == (3, 4, 4)
    weights = model.encoder.layers[-1].self_attn.last_weights[:, :, 0]               # (3, heads, 17)
    np.testing.assert_allclose(maps.reshape(3, 16), weights[:, :, 1:].mean(axis=1), rtol=1e-6)    # row-major grid
    np.testing.assert_allclose(maps.sum(axis=(1, 2)) + weights.mean(axis=1)[:, 0], 1, rtol=1e-5)
