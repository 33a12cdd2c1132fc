"""The chapter pages are notebooks (jupytext's Markdown format): their Python cells run top to
bottom, in one namespace, from the repository's root, so the pages cannot rot."""
import os
import time
from pathlib import Path

import jupytext
import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = {"chapter1.md": 8, "chapter2.md": 6, "chapter3.md": 5, "language_models.md": 4}   # at least this many code cells


def code_cells(page):
    notebook = jupytext.read(ROOT / "docs" / page)
    assert notebook.metadata["jupytext"]["text_representation"]["format_name"] == "markdown"
    assert notebook.metadata["kernelspec"]["language"] == "python"
    return [cell.source for cell in notebook.cells if cell.cell_type == "code"]


@pytest.mark.parametrize("page", PAGES)
def test_the_chapter_runs_cell_by_cell(page, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    cells = code_cells(page)
    assert len(cells) >= PAGES[page], f"{page} has {len(cells)} code cells"
    shell = [source for source in cells if source.lstrip().startswith(("%", "!"))]
    assert not shell, f"{page}: a ```bash block becomes a shell cell that Jupyter's Run All would run: {shell[0]!r}"
    namespace, started = {"__name__": "__main__"}, time.perf_counter()
    for number, source in enumerate(cells, start=1):
        try:
            exec(compile(source, f"{page}, cell {number}", "exec"), namespace)
        except Exception as error:
            pytest.fail(f"{page}, cell {number} failed: {type(error).__name__}: {error}\n{source}")
    assert time.perf_counter() - started < 120, f"{page} took too long to run"

