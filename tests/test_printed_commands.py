"""Every command printed in README.md and docs/*.md runs as printed after the quick start.

Which text is a command (the rule this module applies):

- A command is a line of a fenced code block (```bash, ```sh, ```shell, ```console, ```text or
  unlabelled; in a transcript whose commands start with `$ `, only those lines) or of an indented code block (four spaces, after a blank line) that begins, after
  an optional `$ ` prompt and `NAME=value` environment settings, with `numpy-transformer `,
  `python -m numpy_transformer.cli `, `python examples/` or `python scripts/`. A line ending
  in `\\` goes on with the next; ` # …` after the command is its comment. A line
  `numpy-transformer COMMAND: error: …` is output, not a command.
- A command quoted inline in the prose (`numpy-transformer train --preset grammar --out
  runs/grammar`, a span broken over lines joined) is a command when it is complete: when it
  parses. One that does not (`numpy-transformer attention`, the name of a command in a
  sentence) only names things: its command and each of its options must exist, spelt in full.
- A usage synopsis is not a command, and only names things too: a line with an option in
  `[…]`, a `|` between alternatives, a `…`, or a placeholder in capitals (`DIR`, `N`, `FOLDER`).

What every command must do:

1. parse with the real parser (`numpy_transformer.cli.build_parser`, or the example's own),
   options spelt in full; a `train` also resolves its preset and flags into settings (nothing
   is trained);
2. a `train` writes into its own `--out`, not runs/default (the quick start's bare
   `numpy-transformer train` aside), a folder trained by that one command in all the pages, so
   that it runs after the quick start instead of stopping at "runs/default already holds a
   trained model"; two different commands of one program on one page never share a folder;
3. a command that needs the network (a dataset or a model of the Hugging Face Hub) says so in
   its comment, `# needs the network …` (an inline one: in its paragraph), and only such a
   command says it;
4. `--checkpoint DIR` is runs/default (the quick start's), a folder an earlier command of the
   same page writes, or a folder the page's text names as one (`DIR/`, with its slash); any
   other name is a Hub model (rule 3); a local data file or
   folder ships in the repository, lies in a folder an earlier command writes, or is named in
   the page's text or the command's comment (where to get it).

A few pages' commands also run, in order, in a temporary folder, with a tiny model on the
built-in corpus appended to each `train`.
"""
import argparse
import contextlib
import functools
import importlib.util
import io
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from unittest import mock

import pytest

from numpy_transformer.cli import build_parser
from numpy_transformer.data import CORPUS_NAMES, FORMATS, OPUS_NAMES
from numpy_transformer.training import cores

from run_helpers import run_main

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_BLOCKS = {"", "bash", "sh", "shell", "console", "text"}
COMMAND_START = re.compile(r"(numpy-transformer|python -m numpy_transformer\.cli|python (examples|scripts)/\S+)(\s|$)")
OUTPUT_LINE = re.compile(r"numpy-transformer [\w-]+: ")
ENVIRONMENT_SETTINGS = re.compile(r"^([A-Za-z_]\w*=\S*\s+)+")
PLACEHOLDER = re.compile(r"(?<![\w-])[A-Z][A-Z_]*(?![\w-])")
NETWORK_MARK = "needs the network"
QUICK_START = ("numpy-transformer", ("train",))
DEFAULT_RUN = PurePosixPath("runs/default")


@dataclass(frozen=True)
class Printed:
    """One printed command: where it stands, the program (`numpy-transformer` or a script's
    path), its arguments, its comment, its kind: "block" (a line of a code block), "inline"
    (quoted in the prose) or "synopsis", and an inline command's paragraph."""
    page: str
    line: int
    text: str
    program: str
    argv: tuple
    comment: str
    kind: str
    paragraph: str = ""

    def __str__(self):
        return f"{self.page}:{self.line}: {self.text}"


def split_comment(text):
    """(command, comment) of a shell line: the comment starts at a `#` after a space, outside quotes."""
    quote = None
    for index, character in enumerate(text):
        if quote:
            quote = None if character == quote else quote
        elif character in "'\"":
            quote = character
        elif character == "#" and (index == 0 or text[index - 1].isspace()):
            return text[:index].rstrip(), text[index + 1:].strip()
    return text.rstrip(), ""


def is_synopsis(command):
    """Whether a command line is a usage synopsis: `[--option]`, `a | b`, `…` or a PLACEHOLDER
    outside quotes."""
    unquoted = re.sub(r"\"[^\"]*\"|'[^']*'", "''", command)
    return bool(re.search(r"\[-|\s\|\s|…|\.\.\.", unquoted) or PLACEHOLDER.search(unquoted))


def printed(page, line, text, kind, paragraph=""):
    """The Printed command of a line of text (continuations joined), or None when it is none."""
    text = text.strip()
    text = ENVIRONMENT_SETTINGS.sub("", text[2:] if text.startswith("$ ") else text)
    if not COMMAND_START.match(text) or OUTPUT_LINE.match(text):
        return None
    command, comment = split_comment(text) if kind == "block" else (text, "")
    kind = "synopsis" if is_synopsis(command) else kind
    try:
        words = shlex.split(command)
    except ValueError:                                  # an unclosed quote: a fragment of prose
        return None
    if words[0] == "numpy-transformer":
        program, argv = "numpy-transformer", words[1:]
    elif words[:3] == ["python", "-m", "numpy_transformer.cli"]:
        program, argv = "numpy-transformer", words[3:]
    else:
        program, argv = words[1], words[2:]
    return Printed(page, line, command, program, tuple(argv), comment, kind, paragraph)


def prompted(block):
    """The lines of a code block that are commands: in a transcript, whose commands start with
    `$ `, those lines and their continuations (the rest is what they print); else every line."""
    if not any(line.lstrip().startswith("$ ") for _, line in block):
        return block
    kept = []
    for number, line in block:
        if line.lstrip().startswith("$ ") or (kept and kept[-1][0] == number - 1 and kept[-1][1].endswith("\\")):
            kept.append((number, line))
    return kept


def code_and_prose(path):
    """([(line number, text)] of the lines of code blocks, `\\` continuations joined;
    [(line number, text)] of the prose)."""
    code, prose, fence, previous_blank, indented, block = [], [], None, True, False, []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        stripped = line.strip()
        if fence is None and re.match(r"(```|~~~)", stripped):
            fence, shell, block = stripped[:3], stripped[3:].strip().split(" ")[0] in SHELL_BLOCKS, []
        elif fence is not None and stripped.startswith(fence):
            fence = None
            code += prompted(block)
        elif fence is not None:
            if shell:
                block.append((number, line))
        elif line.startswith("    ") and stripped and (previous_blank or indented):
            indented = True
            code.append((number, line))
        else:
            indented = indented and not stripped
            prose.append((number, line))
        previous_blank = not stripped
    joined = []
    for number, line in code:
        if joined and joined[-1][1].endswith("\\") and joined[-1][2] == number - 1:
            start, text, _ = joined.pop()
            joined.append((start, text[:-1].rstrip() + " " + line.strip(), number))
        else:
            joined.append((number, line, number))
    return [(start, text) for start, text, _ in joined], prose


def inline_spans(prose):
    """[(line number, text, paragraph)] of the `code spans` of the prose, a span broken over
    lines joined with a space."""
    spans, paragraph = [], []
    for number, line in [*prose, (None, "")]:
        if line.strip():
            paragraph.append((number, line))
            continue
        text = "\n".join(line for _, line in paragraph)
        for match in re.finditer(r"`([^`]+)`", text):
            spans.append((paragraph[0][0] + text.count("\n", 0, match.start()), re.sub(r"\s+", " ", match[1]), text))
        paragraph = []
    return spans


def page_commands(path):
    """Every Printed command of a page, in the order of its lines."""
    code, prose = code_and_prose(path)
    name = page_name(path)
    commands = [printed(name, number, text, "block") for number, text in code]
    commands += [printed(name, number, text, "inline", paragraph) for number, text, paragraph in inline_spans(prose)]
    return sorted((command for command in commands if command is not None), key=lambda command: command.line)


def page_name(path):
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name


def page_prose(path):
    """The prose of a page (code blocks left out), as one text."""
    return "\n".join(line for _, line in code_and_prose(path)[1])


class Captured(Exception):
    """Raised in place of parse_args: it carries the parser an example's main() built."""


@functools.lru_cache(maxsize=None)
def program_parser(program):
    """The argparse parser of `numpy-transformer`, or the one examples/NAME.py (scripts/NAME.py)
    builds in its main(), caught as it is about to parse: the script does no work."""
    if program == "numpy-transformer":
        return build_parser()
    path = ROOT / program
    if not path.is_file():
        raise FileNotFoundError(f"{program} is no file of the repository")
    spec = importlib.util.spec_from_file_location(f"printed_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def capture(parser, *arguments, **options):
        raise Captured(parser)

    with mock.patch.object(argparse.ArgumentParser, "parse_args", capture):
        try:
            module.main()
        except Captured as captured:
            return captured.args[0]
    raise AssertionError(f"{program}: main() parsed no arguments")


def subcommand_parser(parser, argv):
    """The parser of the (sub)command argv names: `bench attention …` → bench attention's."""
    for word in argv:
        choices = next((action.choices for action in parser._actions
                        if isinstance(action, argparse._SubParsersAction)), None)
        if not choices or word not in choices:
            break
        parser = choices[word]
    return parser


def spelling_problems(command):
    """The options of a command that its program does not have, spelt in full (argparse would
    take an abbreviation, which a later option can make ambiguous)."""
    try:
        parser = subcommand_parser(program_parser(command.program), command.argv)
    except FileNotFoundError as error:
        return [str(error)]
    known = {option for action in parser._actions for option in action.option_strings}
    return [f"{option.split('=')[0]} is no option of {parser.prog}" for option in command.argv
            if option.startswith("--") and option != "--" and option.split("=")[0] not in known]


def parse(command):
    """(Namespace, None) of a command parsed by its program's parser, or (None, argparse's message).
    The pages' --threads 2 were run on the 2-core development machine: they parse as on a
    machine of that many cores and more, whatever this one allows (tests/test_cores.py)."""
    messages = io.StringIO()
    with contextlib.redirect_stderr(messages), contextlib.redirect_stdout(io.StringIO()), \
            mock.patch.object(cores, "usable_cores", lambda: 64):
        try:
            return program_parser(command.program).parse_args(list(command.argv)), None
        except SystemExit:
            return None, (messages.getvalue().strip().splitlines() or ["printed its help"])[-1]


def training_settings(args):
    """(model fields, TrainingConfig, DataConfig) of a `train` command, as `train` resolves them."""
    from numpy_transformer.cli.train import overrides
    from numpy_transformer.training.settings import resolve

    return resolve(args.preset, *overrides(args))


PACKAGED = (set(CORPUS_NAMES) - set(OPUS_NAMES)) | {"digits"}      # digits: vit_digits's, scikit-learn's


def is_local_path(value):
    """Whether a --dataset value names a file or a folder (not a corpus or a Hub dataset)."""
    return value.endswith("/") or PurePosixPath(value).suffix in FORMATS or (ROOT / value).exists()


def is_hub_dataset(value):
    return value not in PACKAGED and not is_local_path(value)


def repository_path(value):
    """A path as the docs print it: relative to the repository (an example's default is absolute)."""
    path = Path(str(value))
    return PurePosixPath(path.relative_to(ROOT) if path.is_absolute() and path.is_relative_to(ROOT) else path)


def written_folders(args):
    """The folders a command writes into: --out (its default included), --figures; and the page
    `attention --html` writes instead of its --out."""
    html = getattr(args, "html", None)
    out = None if html is not None else getattr(args, "out", None)
    return {repository_path(value) for value in (out, getattr(args, "figures", None), html) if value is not None}


def within(path, folders):
    path = PurePosixPath(path)
    return any(folder == path or folder in path.parents for folder in folders)


def in_comment(name, command):
    """Whether a command's comment names a path (a word of its own, not a part of another)."""
    return re.search(rf"(?<![\w/.-]){re.escape(name)}(?![\w/-])", command.comment) is not None


def named(value, command, prose):
    """Whether the page's prose (in backticks) or the command's comment names a path or its folder."""
    folder = PurePosixPath(value).parts[0] + "/"
    return any(f"`{name}`" in prose or in_comment(name, command) for name in (value, folder))


def read_data(args, settings):
    """(the Hub datasets, the local files and folders) a command reads; settings: a `train`'s."""
    if settings is not None:
        datasets, files = [settings[2].dataset], [settings[2].validation_file, settings[2].test_file]
    else:
        datasets = [getattr(args, "dataset", None)]
        files = [getattr(args, "validation_file", None), getattr(args, "multi30k", None),
                 *(item.split("=", 1)[-1] for item in getattr(args, "plot", None) or [])]     # --plot LABEL=PATH
    datasets = [value for value in datasets if value is not None]
    files = [str(repository_path(value)) for value in files if value is not None]
    return [value for value in datasets if is_hub_dataset(value)], files + list(filter(is_local_path, datasets))


@dataclass
class Page:
    """What a page's commands so far have done: the folders they write (runs/default, the quick
    start's, first), {(program, folder): the command that writes it}; and, over all the pages,
    {folder: the `train` commands that write it}."""
    prose: str
    trained_by: dict
    written: set = field(default_factory=lambda: {DEFAULT_RUN})
    writers: dict = field(default_factory=dict)


def page_problems(path, trained_by=None):
    """What keeps the commands of a page from running as printed after the quick start, one
    line each. trained_by: {folder: {commands}}, filled with the page's `train` commands."""
    page, problems = Page(page_prose(path), {} if trained_by is None else trained_by), []
    for command in page_commands(path):
        found = [f"{command}: {problem}" for problem in spelling_problems(command)]
        problems += found
        if found or command.kind == "synopsis":
            continue
        args, error = parse(command)
        if error is not None:
            if command.kind == "block":
                problems.append(f"{command}: does not parse: {error}")
            continue                            # an inline name (`numpy-transformer attention`): its options exist
        problems += [f"{command}: {problem}" for problem in command_problems(command, args, page)]
        page.written |= written_folders(args)
    return problems


def command_problems(command, args, page):
    """The problems of one command that parses, on a page whose earlier commands did `page`."""
    settings = None
    if command.program == "numpy-transformer" and args.command == "train" and not args.resume:
        try:
            settings = training_settings(args)
        except ValueError as error:
            return [f"its settings do not resolve: {error}"]
    network, problems = checkpoint_problems(command, args, page)
    hub_datasets, files = read_data(args, settings)
    network += [f"the Hub dataset {name}" for name in hub_datasets
                if f"`{name}." not in page.prose]        # a prefix of parallel files the page names: `P.en`
    problems += [f"reads {file}, which no earlier command writes and the page does not explain" for file in files
                 if not (within(file, page.written) or (ROOT / file).exists() or named(file, command, page.prose))]
    if network and NETWORK_MARK not in command.comment + command.paragraph:
        problems.append(f"needs the network ({', '.join(network)}): say so, `# {NETWORK_MARK} (the Hugging Face Hub)`")
    if not network and command.kind == "block" and NETWORK_MARK in command.comment:
        problems.append(f"says it {NETWORK_MARK}, but reads nothing from the Hub")
    return folder_problems(command, args, page) + problems


def folder_problems(command, args, page):
    """A `train` into runs/default; a folder another command of the same program writes."""
    problems = []
    if command.program == "numpy-transformer" and args.command == "train" and command.argv != QUICK_START[1]:
        out = PurePosixPath(args.out or DEFAULT_RUN)        # train's --out defaults to runs/default
        if "--out" not in command.argv or out == DEFAULT_RUN:
            problems.append("trains into runs/default, which the quick start has filled: give it its own --out")
        page.trained_by.setdefault(out, set()).add(command.argv)
    program = (subcommand_parser(program_parser(command.program), command.argv).prog    # numpy-transformer bench decode
               if command.program == "numpy-transformer" else command.program)
    for folder in written_folders(args) - {DEFAULT_RUN}:
        other = page.writers.setdefault((program, folder), command)
        if other.argv != command.argv:
            problems.append(f"writes into {folder}, as line {other.line} does: give each its own --out")
    return problems


def checkpoint_problems(command, args, page):
    """([the Hub model it needs], [problems]) of a command's --checkpoint: a folder an earlier
    command writes, one of the repository, one its comment names, or else a Hub model."""
    checkpoint = getattr(args, "checkpoint", None)
    if checkpoint is None or within(checkpoint, page.written) or (ROOT / checkpoint).is_dir() \
            or in_comment(checkpoint, command) or f"`{checkpoint.rstrip('/')}/`" in page.prose:
        return [], []
    if PurePosixPath(checkpoint).parts[0] == "runs":
        return [], [f"--checkpoint {checkpoint}: no earlier command of this page writes it"]
    return [f"the Hub model {checkpoint}"], []


@pytest.mark.parametrize("page", PAGES, ids=page_name)
def test_every_command_of_the_page_runs_as_printed_after_the_quick_start(page):
    problems = page_problems(page)
    assert not problems, "\n".join(problems)


def test_one_folder_is_trained_by_one_command_in_all_the_pages():
    trained_by = {}
    for page in PAGES:
        page_problems(page, trained_by)
    shared = {str(folder): sorted(" ".join(argv) for argv in commands)
              for folder, commands in trained_by.items() if len(commands) > 1}
    assert not shared, shared


def test_the_pages_print_commands_of_every_kind():
    """The extraction finds the commands it should (a broken one would find nothing to check)."""
    commands = [command for page in PAGES for command in page_commands(page)]
    kinds = {(command.page, command.kind, command.text) for command in commands}
    assert ("README.md", "block", 'numpy-transformer translate --checkpoint runs/default "Where is the station?" '
            '"My sister lives in Rome."') in kinds
    assert ("docs/beyond_text.md", "block", "python examples/vit_digits.py --out docs/figures") in kinds
    assert any(command.kind == "synopsis" and command.page == "docs/performance.md" for command in commands)
    assert sum(command.kind == "block" for command in commands) >= 40
    assert {"numpy-transformer", "examples/bleu_curve.py", "examples/thesis_experiment.py"} <= {
        command.program for command in commands}


FAKE_PAGE = '''# A page

Then `numpy-transformer train --preset grammar
--out runs/grammar` (about a minute); `numpy-transformer attention` draws.

```bash
numpy-transformer train --preset grammar \\
    --out runs/g   # the grammar, #1
OMP_NUM_THREADS=1 python examples/softmax_jacobian.py --out "my figures"
numpy-transformer bench attention [--max-n 8192] [--out DIR]
numpy-transformer train: error: a message the command printed
```

```python
numpy-transformer train   # not a shell block
```

    python examples/positional_encoding.py --out figures

```text
$ numpy-transformer bench sts --model m --data sts-test.csv \\
    --runs 3
numpy-transformer          82.05    82.75    18.16        151.9
```
'''


def test_commands_are_found_as_the_rule_says(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(FAKE_PAGE, encoding="utf-8")
    found = [(command.line, command.kind, command.program, command.argv, command.comment)
             for command in page_commands(page)]
    assert found == [
        (3, "inline", "numpy-transformer", ("train", "--preset", "grammar", "--out", "runs/grammar"), ""),
        (4, "inline", "numpy-transformer", ("attention",), ""),
        (7, "block", "numpy-transformer", ("train", "--preset", "grammar", "--out", "runs/g"), "the grammar, #1"),
        (9, "block", "examples/softmax_jacobian.py", ("--out", "my figures"), ""),
        (10, "synopsis", "numpy-transformer", ("bench", "attention", "[--max-n", "8192]", "[--out", "DIR]"), ""),
        (18, "block", "examples/positional_encoding.py", ("--out", "figures"), ""),
        (21, "block", "numpy-transformer", ("bench", "sts", "--model", "m", "--data", "sts-test.csv", "--runs", "3"),
         ""),
    ]


@pytest.mark.parametrize("lines, problem", [
    (["numpy-transformer train --out runs/x --learning-rate 3"], r"--learning-rate is no option of numpy-transformer train"),
    (["numpy-transformer train --out runs/x --ste 2"], r"--ste is no option"),                  # argparse takes it
    (["python examples/softmax_jacobian.py --bogus"], r"--bogus is no option"),
    (["python examples/nothing.py"], r"examples/nothing.py is no file"),
    (['numpy-transformer translate "a sentence"'], r"does not parse: .*--checkpoint"),
    (["numpy-transformer train --out runs/x --d-model 30 --n-heads 4"], r"settings do not resolve"),
    (["numpy-transformer train --preset grammar"], r"trains into runs/default"),
    (["numpy-transformer train --preset grammar --out runs/default"], r"trains into runs/default"),
    (["`numpy-transformer train --gradient-checkpointing` saves memory."], r"trains into runs/default"),
    (["numpy-transformer train --dataset opus_books --out runs/o"], r"needs the network \(the Hub dataset opus_books\)"),
    (["numpy-transformer generate --checkpoint gpt2 hello"], r"needs the network \(the Hub model gpt2\)"),
    (["numpy-transformer train --preset grammar --out runs/q   # needs the network"], r"reads nothing from the Hub"),
    (['numpy-transformer translate --checkpoint runs/later "a"', "numpy-transformer train --preset grammar --out runs/later"],
     r"--checkpoint runs/later: no earlier command"),
    (["numpy-transformer train --dataset mine/pairs.jsonl --out runs/m"], r"reads mine/pairs.jsonl, which no earlier"),
    (["python examples/bleu_curve.py --seed 0", "python examples/bleu_curve.py --seed 1"],
     r"writes into runs/examples/bleu_curve, as line 4 does"),
], ids=lambda value: value[0] if isinstance(value, list) else None)
def test_a_command_that_would_not_run_as_printed_is_caught(tmp_path, lines, problem):
    page = tmp_path / "page.md"
    code = [line for line in lines if not line.startswith("`")]
    prose = [line for line in lines if line.startswith("`")]
    page.write_text("\n\n".join(["# A page", *prose, "```bash\n" + "\n".join(code) + "\n```"]) + "\n", encoding="utf-8")
    problems = page_problems(page)
    assert any(re.search(problem, found) for found in problems), problems


def test_the_same_commands_written_right_pass(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("""# A page

Where the pairs come from: `mine/`.

```bash
numpy-transformer train --preset grammar --out runs/later
numpy-transformer translate --checkpoint runs/later "a"
numpy-transformer translate --checkpoint runs/default "a"
numpy-transformer train --dataset opus_books --out runs/o   # needs the network (the Hugging Face Hub)
numpy-transformer train --dataset mine/pairs.jsonl --out runs/m
numpy-transformer train --dataset theirs/pairs.tsv --out runs/t   # their pairs, theirs/pairs.tsv
python examples/bleu_curve.py --seed 0
python examples/bleu_curve.py --seed 1 --out runs/seed-1
python examples/bleu_curve.py --plot a=runs/seed-1/curve.jsonl --out runs/plot
numpy-transformer train
```
""", encoding="utf-8")
    assert page_problems(page) == []


# A tiny model on 120 built-in pairs, appended to every printed `train` of the pages run below
TINY_TRAIN = ["--steps", "2", "--n-pairs", "120", "--max-len", "32", "--d-model", "16", "--n-heads", "2",
              "--d-ff", "32", "--layers", "1", "--batch-size", "16", "--eval-every", "2", "--samples", "0", "--quiet"]
TINY_TRANSLATION_DATA = ["--dataset", "builtin", "--tokenizer", "word", "--no-shared-vocabulary"]
RUN_HERE = {"train", "translate", "evaluate", "generate", "fill-mask", "attention"}


@pytest.mark.parametrize("page, commands", [("README.md", {"translate", "train", "attention"}),
                                            ("docs/chapter3.md", {"train", "attention"}),
                                            ("docs/language_models.md", {"train", "generate", "fill-mask"})])
def test_the_pages_commands_run_in_order_after_the_quick_start(page, commands, tmp_path, monkeypatch):
    """The quick start's run, then the page's models and what reads them: the printed folders,
    sentences and flags, each `train` made tiny; left out: what needs the network or reads a
    folder no printed command writes. A page's --threads 2 runs as printed on a machine that
    allows this process one core: two processes take turns."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cores, "usable_cores", lambda: 64)
    quick_start = [*QUICK_START[1], *TINY_TRAIN, *TINY_TRANSLATION_DATA]
    assert run_main(quick_start)[0] == 0
    ran, written = [], {DEFAULT_RUN}
    for command in page_commands(ROOT / page):
        args, error = parse(command) if command.kind != "synopsis" else (None, "a synopsis")
        if (error is not None or command.program != "numpy-transformer" or args.command not in RUN_HERE
                or command.argv == QUICK_START[1] or NETWORK_MARK in command.comment
                or not within(getattr(args, "checkpoint", None) or DEFAULT_RUN, written)):
            continue
        argv = list(command.argv)
        if args.command == "train":
            task = training_settings(args)[2].task
            argv += TINY_TRAIN + (TINY_TRANSLATION_DATA if task == "translation" else ["--dataset", "builtin"])
        status, _, err = run_main(argv)
        assert status == 0, f"{command}\n{err}"
        ran.append(args.command)
        written |= written_folders(args)
    assert commands <= set(ran), ran
