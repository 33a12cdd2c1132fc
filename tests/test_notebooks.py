"""The chapter pages are notebooks (jupytext's Markdown format) that execute as printed: each is
read by jupytext and executed by nbconvert in a fresh Python kernel, in an empty folder, as
docs/chapter1.md's install line and command do (`pip install -e ".[notebooks]"`, then
`jupytext --to notebook --execute`), so the pages cannot rot. Chapter 3 trains the experiment's
eight-head model first (half a minute to a minute): it runs with the slow tests."""
import jupytext
import pytest

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = {"chapter1.md": 8, "chapter2.md": 6, "chapter3.md": 5, "language_models.md": 4}   # at least this many code cells
SLOW = {"chapter3.md"}
NOTEBOOK_EXTRA = {"jupytext", "nbconvert", "ipykernel"}            # setup.cfg's [notebooks]


def notebook(page):
    notebook = jupytext.read(ROOT / "docs" / page)
    assert notebook.metadata["jupytext"]["text_representation"]["format_name"] == "markdown"
    assert notebook.metadata["kernelspec"]["language"] == "python"
    return notebook


@pytest.mark.parametrize("page", PAGES)
def test_the_page_is_a_notebook_of_python_cells(page):
    cells = [cell.source for cell in notebook(page).cells if cell.cell_type == "code"]
    assert len(cells) >= PAGES[page], f"{page} has {len(cells)} code cells"
    shell = [source for source in cells if source.lstrip().startswith(("%", "!"))]
    assert not shell, f"{page}: a ```bash block becomes a shell cell that Jupyter's Run All would run: {shell[0]!r}"


def test_every_notebook_page_is_executed_here():
    pages = {path.name for path in (ROOT / "docs").glob("*.md")
             if path.read_text(encoding="utf-8").startswith("---\njupyter:")}
    assert pages == set(PAGES)


def test_the_notebooks_extra_is_what_executes_a_page():
    import configparser

    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg", encoding="utf-8")
    extra = {line.split(">")[0].split("=")[0].strip() for line in setup["options.extras_require"]["notebooks"].split()}
    assert extra == NOTEBOOK_EXTRA
    assert NOTEBOOK_EXTRA <= {line.split(">")[0].strip()
                              for line in setup["options.extras_require"]["test"].split()}
    install = 'pip install -e ".[notebooks]"'
    assert install in (ROOT / "README.md").read_text(encoding="utf-8")
    assert install in (ROOT / "docs" / "chapter1.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("page", [pytest.param(page, marks=pytest.mark.slow) if page in SLOW else page
                                  for page in PAGES])
def test_the_page_executes_as_a_notebook(page, tmp_path, monkeypatch):
    from nbconvert.preprocessors import CellExecutionError, ExecutePreprocessor

    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")         # the kernel's BLAS: one thread, as the commands' default
    executed = notebook(page)
    executor = ExecutePreprocessor(timeout=600, kernel_name=executed.metadata["kernelspec"]["name"])
    try:
        executor.preprocess(executed, {"metadata": {"path": str(tmp_path)}})
    except CellExecutionError as error:
        pytest.fail(f"docs/{page} does not execute as printed:\n{error}")
    outputs = [output for cell in executed.cells if cell.cell_type == "code" for output in cell.get("outputs", [])]
    assert any(output.get("name") == "stdout" for output in outputs), f"{page} printed nothing"
    assert not list(tmp_path.iterdir()), f"{page} left files where it ran: {list(tmp_path.iterdir())}"
