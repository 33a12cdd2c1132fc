"""The documentation cannot cite code that does not exist, link to a file or heading that does
not exist, or show output the code no longer prints; and the README stays a short front door."""
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
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


FRONT_PAGES = [ROOT / "README.md", DOCS / "status.md", DOCS / "layout.md"]


@pytest.mark.parametrize("page, name", [(page, name) for page in FRONT_PAGES for name in cited_names(page)
                                        if not name.endswith(".md")],
                         ids=lambda value: value.name if isinstance(value, Path) else value)
def test_every_module_or_function_the_front_pages_cite_exists(page, name):
    assert resolve(name) is not None, f"{page.name} cites {name}"


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


FENCED_CODE = re.compile(r"^ *```.*?^ *```", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"\]\(\s*<?([^()\s<>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def prose(path):
    """The page without its fenced code blocks (a `](` inside code is not a link)."""
    return FENCED_CODE.sub("", path.read_text(encoding="utf-8"))


def relative_links(path):
    return [target for target in LINK.findall(prose(path))
            if not target.startswith(("http://", "https://", "mailto:"))]


def anchor(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path):
    return {anchor(heading) for heading in HEADING.findall(prose(path))}


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_reaches_a_file_and_its_heading(page):
    broken = []
    for target in relative_links(page):
        file, _, fragment = target.partition("#")
        linked = (page.parent / file).resolve() if file else page
        if not linked.exists():
            broken.append(f"{target}: no file {linked}")
        elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
            broken.append(f"{target}: no heading #{fragment} in {linked.name}")
    assert not broken, f"{page.name}: " + "; ".join(broken)


def test_the_link_reader_finds_links_but_not_inside_code(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("[a](x.md) ![b](fig/y.png \"title\") [c](https://e.org) [d](#top)\n"
                    "```\n[e](z.md)\n```\n## The top (§1.2)\n", encoding="utf-8")
    assert relative_links(page) == ["x.md", "fig/y.png", "#top"]
    assert anchors(page) == {"the-top-12"}


def test_the_readme_stays_a_front_door():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 160, f"README.md has {len(lines)} lines; move the detail into docs/"


def test_the_engine_core_is_as_short_as_the_readme_says():
    claim = re.search(r"`autograd/engine\.py`, is under (\d+) lines", (ROOT / "README.md").read_text(encoding="utf-8"))
    assert claim, "README.md no longer states the size of autograd/engine.py"
    lines = len((ROOT / "autograd" / "engine.py").read_text(encoding="utf-8").splitlines())
    assert lines < int(claim.group(1)), f"autograd/engine.py has {lines} lines"


def test_the_layout_page_names_every_module():
    linked = {(DOCS / target).resolve() for target in relative_links(DOCS / "layout.md")}
    modules = {path.resolve() for package in ("autograd", "numpy_transformer")
               for path in (ROOT / package).rglob("*.py") if path.name != "__init__.py"}
    missing = sorted(str(path.relative_to(ROOT)) for path in modules - linked)
    assert not missing, f"docs/layout.md does not name {missing}"


def gradcheck_lines(text):
    """The lines of `numpy-transformer gradcheck` in `text`, each error masked (its digits are
    finite-difference rounding, which may move with the NumPy and BLAS in use)."""
    lines = [line.strip() for line in text.splitlines()]
    return {re.sub(r"\d\.\de-\d\d", "<error>", line) for line in lines
            if re.search(r"\d\.\de-\d\d  (ok|FAILED)", line) or re.fullmatch(r"\d+ checks, .*", line)}


def test_the_gradient_check_output_in_the_docs_is_what_the_command_prints():
    from run_helpers import run_main
    status, printed, _ = run_main(["gradcheck"])
    assert status == 0
    for page in (ROOT / "README.md", DOCS / "status.md"):
        shown = gradcheck_lines(page.read_text(encoding="utf-8").replace("`", "\n"))
        assert shown, f"{page.name} shows no gradient-check output"
        assert shown <= gradcheck_lines(printed), f"{page.name}: {sorted(shown - gradcheck_lines(printed))}"


def test_the_readme_code_runs_and_prints_what_its_comment_says(capsys):
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    assert blocks, "README.md has no Python example"
    for source in blocks:
        exec(compile(source, "README.md", "exec"), {"__name__": "__main__"})
        printed = capsys.readouterr().out
        for comment in re.findall(r"^print\(.*?#\s*(.+)$", source, re.MULTILINE):
            expected = [token.rstrip(".") for token in re.split(r"\s{2,}", comment.strip())]
            assert all(token in printed for token in expected), f"printed {printed!r}, README says {comment!r}"


def test_the_readme_shows_the_default_run_as_docs_training_does():
    """The README's expected output is an excerpt of docs/training.md's, line for line."""
    output = re.search(r"^```\n(data: Tatoeba.*?)^```", (ROOT / "README.md").read_text(encoding="utf-8"),
                       re.MULTILINE | re.DOTALL)
    assert output, "README.md no longer shows the default run's output"
    training = set((DOCS / "training.md").read_text(encoding="utf-8").splitlines())
    missing = [line for line in output.group(1).splitlines() if line.strip() not in ("", "...") and line not in training]
    assert not missing, f"README.md shows lines docs/training.md does not: {missing}"


OUTSIDE = ("..", "shared")          # a folder beside the repository's, which a clone does not have
SKIPPED_FOLDERS = {".git", "__pycache__", ".pytest_cache", "runs", "build", "dist"}


def test_no_file_of_the_repository_points_at_a_folder_outside_it():
    """The docs, the code and the tests cite the thesis, its notes and the corpora by title and
    public source, never by a path that exists only beside one working copy."""
    needle = "/".join(OUTSIDE)
    offenders = []
    for path in ROOT.rglob("*"):
        parts = set(path.relative_to(ROOT).parts)
        if parts & SKIPPED_FOLDERS or any(part.endswith(".egg-info") or part.startswith(".venv") for part in parts):
            continue
        if path.is_file() and path.suffix in {".py", ".md", ".cfg", ".toml", ".txt", ".json", ""}:
            text = path.read_text(encoding="utf-8", errors="replace")
            offenders += [f"{path.relative_to(ROOT)}:{n}" for n, line in enumerate(text.splitlines(), 1) if needle in line]
    assert not offenders, f"paths outside the repository: {offenders}"
