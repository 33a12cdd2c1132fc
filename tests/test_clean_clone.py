"""A clean clone stays clean: every folder the commands and the examples write by default, every
folder a command printed in the pages writes, and the virtual environment of the README's set-up
are ignored by .gitignore (they all lie under runs/, or are .venv/); the one way into docs/ is
an example given `--out docs/…` or `--figures docs/…` (the figures the pages show). The scripts
of scripts/ are left out: writing the repository's packaged corpus and recorded outputs is their
work."""
import argparse
import re
import shutil
import subprocess
from pathlib import Path, PurePosixPath

import pytest

from numpy_transformer.cli.train import DEFAULT_OUT

from test_printed_commands import PAGES, page_commands, parse, program_parser, repository_path, written_folders

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted(f"examples/{path.name}" for path in (ROOT / "examples").glob("*.py"))
OUTPUTS = {"out", "figures"}                          # the destinations of the options that name what is written

pytestmark = pytest.mark.skipif(not (ROOT / ".git").exists() or shutil.which("git") is None,
                                reason="needs the git checkout, whose .gitignore it reads")


def ignored(folders):
    """The folders (relative to the repository) git ignores, as `git check-ignore` says for the
    folder itself (a trailing slash: a folder, which need not exist)."""
    names = [f"{folder}/" for folder in folders]
    result = subprocess.run(["git", "check-ignore", "--no-index", "--stdin"], input="\n".join(names), cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode in (0, 1), result.stderr
    return {PurePosixPath(line.rstrip("/")) for line in result.stdout.splitlines()}


def output_defaults(parser, program):
    """{(program and subcommand, option): default} of the output options of a parser and its subcommands."""
    found = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, subparser in action.choices.items():
                found |= output_defaults(subparser, f"{program} {name}")
        elif action.dest in OUTPUTS and action.default is not None:
            found[(program, action.option_strings[0] if action.option_strings else action.dest)] = action.default
    return found


def default_outputs():
    """{(program, option): folder relative to the repository} of every command and example."""
    defaults = {("numpy-transformer train", "--out"): DEFAULT_OUT}         # train resolves its default itself
    defaults |= output_defaults(program_parser("numpy-transformer"), "numpy-transformer")
    for example in EXAMPLES:
        defaults |= output_defaults(program_parser(example), example)
    return {key: repository_path(value) for key, value in defaults.items()}


def test_every_default_output_folder_is_ignored():
    defaults = default_outputs()
    assert {("numpy-transformer attention", "--out"), ("numpy-transformer bench attention", "--out"),
            ("numpy-transformer bench memory", "--out"), ("numpy-transformer bench precision", "--out"),
            ("examples/thesis_experiment.py", "--out")} <= set(defaults)
    assert len({program for program, _ in defaults if program.startswith("examples/")}) >= 10
    kept = ignored(set(defaults.values()))
    tracked = {f"{program} {option}: {folder}" for (program, option), folder in defaults.items() if folder not in kept}
    assert not tracked, f"write by default into folders git would track: {sorted(tracked)}"


def test_no_default_writes_into_docs():
    inside = {key: folder for key, folder in default_outputs().items() if folder.parts[:1] == ("docs",)}
    assert not inside


def test_the_virtual_environment_of_the_set_up_is_ignored():
    (folder,) = re.findall(r"python3? -m venv (\S+)", (ROOT / "README.md").read_text(encoding="utf-8"))
    assert ignored({PurePosixPath(folder)}) == {PurePosixPath(folder)}


def test_what_the_printed_commands_write_is_ignored_or_an_examples_figures_in_docs():
    writes, problems = 0, []
    for page in PAGES:
        for command in page_commands(page):
            if command.kind == "synopsis" or command.program.startswith("scripts/"):
                continue
            args, error = parse(command)
            if error is not None:
                continue                                 # an inline name (`numpy-transformer attention`)
            for folder in written_folders(args):
                writes += 1
                if folder.parts[:1] == ("docs",):
                    if not command.program.startswith("examples/"):
                        problems.append(f"{command}: writes into {folder}; only an example's --out docs/… may")
                elif not ignored({folder}):
                    problems.append(f"{command}: writes into {folder}, which git would track: put it under runs/")
    assert writes >= 40
    assert not problems, "\n".join(problems)


def test_a_folder_outside_runs_is_caught():
    assert ignored({PurePosixPath("attention"), PurePosixPath("runs/attention"), PurePosixPath("docs/figures")}) \
        == {PurePosixPath("runs/attention")}


def test_the_printed_notebook_commands_write_under_an_ignored_folder():
    """`jupytext --to notebook docs/PAGE.md` alone would write docs/PAGE.ipynb: every printed one
    names its output (-o), in a folder git ignores."""
    printed = [line for page in PAGES for line in page.read_text(encoding="utf-8").splitlines()
               if "jupytext --to notebook" in line]
    assert printed
    for line in printed:
        output = re.search(r"\s-o\s+(\S+?)`?$", line.strip())
        assert output, f"{line.strip()}: name the notebook it writes with -o, outside docs/"
        assert ignored({PurePosixPath(output[1]).parent}) == {PurePosixPath(output[1]).parent}, line
