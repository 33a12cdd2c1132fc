"""The documentation cannot cite code that does not exist."""
import importlib
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
CITED = re.compile(r"`((?:autograd|numpy_transformer)(?:\.\w+)+)`")


def cited_names(path):
    return sorted(set(CITED.findall(path.read_text(encoding="utf-8"))))


def resolve(dotted):
    """The object `import a.b; a.b.c` reaches: attributes first, submodules where none exists."""
    parts = dotted.split(".")
    target = importlib.import_module(parts[0])
    for depth, part in enumerate(parts[1:], start=2):
        if not hasattr(target, part):
            importlib.import_module(".".join(parts[:depth]))
        target = getattr(target, part)
    return target


@pytest.mark.parametrize("name", cited_names(DOCS / "equations.md"))
def test_every_function_named_in_the_equation_index_exists(name):
    assert callable(resolve(name)), f"docs/equations.md cites {name}, which is not callable"


def test_the_equation_index_cites_the_chapter_1_functions():
    assert {"autograd.functional.softmax", "autograd.functional.layer_norm",
            "autograd.functional.cross_entropy", "autograd.functional.softmax_jacobian"} <= set(
        cited_names(DOCS / "equations.md"))


def test_the_training_page_shows_train_step_as_the_code_has_it():
    import inspect

    from numpy_transformer.training.loop import train_step

    source = inspect.getsource(train_step)
    without_docstring = re.sub(r'\n    """.*?"""\n', "\n", source, count=1, flags=re.DOTALL)
    shown = re.search(r"```python\n(def train_step.*?)```", (DOCS / "training.md").read_text(encoding="utf-8"),
                      re.DOTALL)
    assert shown is not None and shown.group(1) == without_docstring
