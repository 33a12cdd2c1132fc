"""examples/gat_karate.py with tiny settings: the bundled karate club data, a seeded run whose
last printed line is the accuracy on the 32 unlabelled members, and the figure."""
import re

import numpy as np
import pytest

from run_helpers import load_example

TINY = ["--epochs", "40", "--hidden", "4", "--heads", "2"]


@pytest.fixture(scope="module")
def example():
    return load_example("gat_karate")


def test_the_data_is_the_karate_club_with_its_two_factions_led_by_the_labelled_members(example):
    features, (sources, targets), labels, _ = example.karate_club()
    assert features.shape == (34, 34) and np.array_equal(features, np.eye(34))
    assert len(sources) == 2 * 78 and set(zip(sources, targets)) == set(zip(targets, sources))
    assert np.bincount(labels).tolist() == [17, 17] and labels[0] == 0 and labels[33] == 1


def test_a_seeded_run_prints_the_accuracy_last_draws_the_figure_and_repeats_exactly(example, tmp_path, capsys):
    figure = tmp_path / "gat_karate.png"
    accuracy = example.main(TINY + ["--out", str(tmp_path)])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.fullmatch(r"accuracy: [01]\.\d\d", last) and last == f"accuracy: {accuracy:.2f}"
    assert figure.is_file() and figure.stat().st_size > 10_000
    assert example.main(TINY + ["--no-figure"]) == accuracy
    assert accuracy > 0.5                                    # better than a coin on 32 members
