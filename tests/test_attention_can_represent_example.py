"""examples/attention_can_represent.py on tiny settings: it prints the table of every task, draws
the figure, and the learned weights come near the constructed ones."""
import pytest

from numpy_transformer.theory.constructions import total_variation
from run_helpers import load_example


@pytest.fixture(scope="module")
def example():
    return load_example("attention_can_represent")


def test_the_table_and_figure_cover_every_task_and_learning_approaches_the_construction(example, tmp_path, capsys):
    constructed, learned = example.main(["--n", "5", "--steps", "150", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert list(constructed) == list(learned) == ["copy", "shift", "average", "local"]
    assert all(f"| {task} |" in out for task in constructed)
    assert out.strip().splitlines()[-1] == f"figure: {tmp_path / 'attention_constructions.png'}"
    assert (tmp_path / "attention_constructions.png").is_file()
    assert max(total_variation(learned[task][0], constructed[task]) for task in constructed) < 0.05
