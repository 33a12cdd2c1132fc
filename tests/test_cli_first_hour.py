"""The first hour of a new user: a progress bar wherever a command works for long, on a terminal
only; help that says what each shared flag does in its own command; messages that say what
happened and what to do."""
import argparse
import contextlib
import errno
import io
import sys

import pytest

from numpy_transformer.cli import build_parser, main, os_error_message
from numpy_transformer.data import builtin_corpus
from tests.run_helpers import run_main

SMALL = ["--dataset", "builtin", "--tokenizer", "word", "--n-pairs", "120", "--max-len", "32", "--d-model", "16",
         "--n-heads", "2", "--d-ff", "32", "--batch-size", "16", "--steps", "4", "--eval-every", "2",
         "--checkpoint-every", "2", "--samples", "1"]
TINY = [*SMALL, "--no-shared-vocabulary", "--beam", "2"]


class Terminal(io.StringIO):
    """Standard error as a terminal shows it: what was written, and isatty() true."""

    def isatty(self):
        return True


def run_on(stderr, args):
    """(exit status, stdout, stderr) of main(args) with `stderr` in place of standard error."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(stderr):
        status = main([str(arg) for arg in args])
    return status, out.getvalue(), stderr.getvalue()


def three_ways(args):
    """The (status, stdout, stderr) of args on a terminal, in a log (no terminal), and on a
    terminal with --quiet."""
    return run_on(Terminal(), args), run_on(io.StringIO(), args), run_on(Terminal(), [*args, "--quiet"])


def has_bar(stderr, unit="batch"):
    """Whether a tqdm bar counting `unit`s was drawn: its rate, `unit`/s (s/`unit` when slow)."""
    return f"{unit}/s" in stderr or f"s/{unit}" in stderr


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    directory = tmp_path_factory.mktemp("first_hour") / "run"
    status, _, err = run_main(["train", "--out", directory, *TINY, "--quiet"])
    assert status == 0, err
    return directory


# Progress bars: on a terminal only, never with --quiet, standard output unchanged.

def test_evaluate_draws_its_passes_on_a_terminal_and_nothing_in_a_log_or_with_quiet(run_folder):
    terminal, log, quiet = three_ways(["evaluate", "--checkpoint", run_folder, "--beam", "2", "--samples", "1"])
    assert terminal[0] == log[0] == quiet[0] == 0
    assert terminal[1] == log[1] == quiet[1] and "BLEU" in log[1]
    for what in ("greedy", "beam 2", "perplexity"):
        assert f"{what}:" in terminal[2], what
    assert has_bar(terminal[2]) and not has_bar(log[2]) and not has_bar(quiet[2])
    assert "greedy:" not in log[2] + quiet[2] and "perplexity:" not in log[2] + quiet[2]


def test_translate_of_many_lines_draws_a_bar_on_a_terminal_only(run_folder, monkeypatch):
    lines = "".join(pair.src + "\n" for pair in builtin_corpus(150, seed=3))
    results = []
    for stderr, quiet in ((Terminal(), []), (io.StringIO(), []), (Terminal(), ["--quiet"])):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(lines.encode("utf-8")), encoding="utf-8"))
        results.append(run_on(stderr, ["translate", "--checkpoint", run_folder, "--beam", "2", *quiet]))
    (terminal, log, quiet) = results
    assert terminal[0] == log[0] == quiet[0] == 0
    assert terminal[1] == log[1] == quiet[1] and len(log[1].splitlines()) == 150
    assert "beam 2:" in terminal[2] and has_bar(terminal[2])
    assert not has_bar(log[2]) and not has_bar(quiet[2]) and "beam 2:" not in log[2] + quiet[2]


def test_the_final_evaluation_of_train_draws_its_passes_and_leaves_standard_output_alone(tmp_path):
    runs = [run_on(stderr, ["train", "--out", tmp_path / name, *TINY, *quiet])
            for name, stderr, quiet in (("terminal", Terminal(), []), ("log", io.StringIO(), []),
                                        ("quiet", Terminal(), ["--quiet"]))]
    assert [status for status, _, _ in runs] == [0, 0, 0]
    terminal, log, quiet = runs
    assert "perplexity:" in terminal[2] and "beam 2:" in terminal[2] and has_bar(terminal[2])
    assert not has_bar(log[2]) and not has_bar(quiet[2])

    def same_run(stdout, name):                  # the folder's name and the time differ, nothing else
        return stdout.replace(str(tmp_path / name), "OUT").rsplit("Total time", 1)[0]
    assert same_run(terminal[1], "terminal") == same_run(log[1], "log")
    assert "Test split" in log[1]


def fake_benchmark(log, progress):
    """What a benchmark's run does with its log and progress: two lines, one between steps."""
    from numpy_transformer.inference import with_progress

    for number in with_progress(progress, range(2), desc="configurations", unit="config"):
        log(f"line {number}")
    return [{"number": 2}]


JSON = ["--threads", "1", "--json"]


@pytest.mark.parametrize("benchmark, module, arguments", [
    ("train-step", "train_step", ["--configs", "tiny", *JSON]), ("latency", "latency", JSON),
    ("pretrained", "pretrained_speed", JSON), ("complexity", "complexity", ["--quick", *JSON]),
    ("decode", "decode", ["--configs", "thesis", *JSON]),
    ("precision", "precision_speed", ["--configs", "tiny", *JSON]),
    ("memory", "memory_use", ["--threads", "1"]), ("scaling", "scaling", ["--configs", "tiny"])])
def test_the_long_benchmarks_draw_a_bar_on_a_terminal_and_print_the_same_lines(benchmark, module, arguments,
                                                                                monkeypatch):
    import importlib

    given = []

    def run(*args, log, progress, **options):
        given.append(progress)
        return fake_benchmark(log, progress)
    monkeypatch.setattr(importlib.import_module(f"numpy_transformer.benchmarks.{module}"), "run", run)
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")             # the benchmark runs here, not in a child
    terminal, log, quiet = three_ways(["bench", benchmark, *arguments])
    expected = "line 0\nline 1\n" + ('[{"number": 2}]\n' if "--json" in arguments else "")
    assert terminal[0] == log[0] == quiet[0] == 0
    assert terminal[1] == log[1] == quiet[1]
    machine, rest = terminal[1].split("\n", 1)          # the machine that measured, then the figures
    assert machine.startswith("Machine: ") and " processors" in machine and "NumPy " in machine, machine
    assert rest == expected
    assert given[0] is not None and given[1] is None and given[2] is None
    assert has_bar(terminal[2], "config") and log[2] == "" and quiet[2] == ""


@pytest.mark.parametrize("benchmark, arguments", [("train-step", ["--configs", "tiny"]), ("latency", []),
                                                  ("pretrained", []), ("complexity", ["--quick"]),
                                                  ("decode", ["--configs", "thesis"]), ("memory", []),
                                                  ("precision", ["--configs", "tiny"])])
def test_a_benchmark_run_in_a_child_process_keeps_quiet(benchmark, arguments, monkeypatch):
    import numpy_transformer.cli.bench as bench

    called = []
    monkeypatch.setattr(bench.subprocess, "call", lambda command, env: called.append(command) or 0)
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "7")             # not the count asked for: a child runs it
    assert run_main(["bench", benchmark, *arguments, "--threads", "1", "--quiet"])[0] == 0
    assert "--quiet" in called[0]


def test_the_complexity_benchmark_counts_its_sweeps_on_the_bar():
    from numpy_transformer.benchmarks import complexity

    shown, lines = [], []

    def progress(iterable, **options):
        shown.append(options["desc"])
        return list(iterable)
    results = complexity.run(complexity.QUICK_SWEEPS[:2], complexity.QUICK_CACHE_MODELS[:1], repeats=1,
                             log=lines.append, progress=progress)
    assert shown == ["sweeps"] and len(results["sweeps"]) == 2 and lines


def test_generate_of_many_prompts_draws_a_bar_on_a_terminal_only(tmp_path, monkeypatch):
    assert run_main(["train", "--out", tmp_path / "lm", "--task", "lm", *SMALL, "--quiet"])[0] == 0
    prompts = "".join(f"{pair.src.split()[0]}\n" for pair in builtin_corpus(20, seed=3))
    results = []
    for stderr, quiet in ((Terminal(), []), (io.StringIO(), []), (Terminal(), ["--quiet"])):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(prompts.encode("utf-8")), encoding="utf-8"))
        results.append(run_on(stderr, ["generate", "--checkpoint", tmp_path / "lm", "--temperature", "0",
                                       "--max-new-tokens", "3", *quiet]))
    (terminal, log, quiet) = results
    assert terminal[0] == log[0] == quiet[0] == 0
    assert terminal[1] == log[1] == quiet[1] and len(log[1].splitlines()) == 20
    assert has_bar(terminal[2], "prompt") and not has_bar(log[2], "prompt") and not has_bar(quiet[2], "prompt")


# Help: each shared flag says what it does in its own command.

def command_parsers():
    """{command name: its parser}, `bench BENCHMARK` included."""
    commands = next(action for action in build_parser()._actions if isinstance(action, argparse._SubParsersAction))
    parsers = {}
    for name, parser in commands.choices.items():
        if name == "bench":
            benchmarks = next(action for action in parser._actions
                              if isinstance(action, argparse._SubParsersAction))
            parsers |= {f"bench {benchmark}": sub for benchmark, sub in benchmarks.choices.items()}
        else:
            parsers[name] = parser
    return parsers


def flag_help(parser, flag):
    found = [action.help for action in parser._actions if flag in action.option_strings]
    return found[0] if found else None


SHARED = ("--threads", "--quiet", "--cache-dir", "--weights")

# command → flag → words its help must hold: the command's own work
OWN_WORK = {
    "train": {"--threads": "optimizer's update", "--quiet": "while training", "--cache-dir": "--dataset",
              "--weights": "final evaluation"},
    "translate": {"--threads": "decoding", "--quiet": "translated", "--weights": "translate with"},
    "evaluate": {"--threads": "scoring the split", "--quiet": "perplexity", "--cache-dir": "the run's corpus",
                 "--weights": "to score"},
    "generate": {"--threads": "generating", "--quiet": "prompts", "--cache-dir": "Hub name",
                 "--weights": "generate with"},
    "fill-mask": {"--threads": "reading the text", "--cache-dir": "Hub name", "--weights": "predict with"},
    "attention": {"--threads": "reading the sentence", "--cache-dir": "Hub name", "--weights": "look inside"},
    "export": {"--threads": "multiplies no matrices", "--weights": "to export"},
    "gradcheck": {"--threads": "Jacobians"},
    "bench train-step": {"--quiet": "configurations"},
    "bench latency": {"--quiet": "tasks"},
    "bench pretrained": {"--quiet": "runs of generation"},
    "bench complexity": {"--quiet": "sweeps"},
}


@pytest.mark.parametrize("command", sorted(OWN_WORK))
def test_each_shared_flag_says_what_it_does_in_its_own_command(command):
    parser = command_parsers()[command]
    for flag, words in OWN_WORK[command].items():
        text = flag_help(parser, flag)
        assert text is not None and words in text, (command, flag, text)


def test_only_train_speaks_of_the_optimizer_or_of_training_in_its_shared_flags():
    for command, parser in command_parsers().items():
        texts = " ".join(flag_help(parser, flag) or "" for flag in SHARED)
        if command != "train":
            assert "optimizer" not in texts and "training" not in texts and "--resume" not in texts, command


def test_cache_dir_only_where_a_dataset_or_a_hub_model_may_be_read():
    having = {command for command, parser in command_parsers().items() if flag_help(parser, "--cache-dir")}
    assert having == {"train", "evaluate", "generate", "fill-mask", "attention", "embed"}


def test_no_two_commands_share_the_same_help_for_threads_quiet_or_weights():
    for flag in ("--quiet", "--weights"):
        texts = [flag_help(parser, flag) for parser in command_parsers().values() if flag_help(parser, flag)]
        assert len(texts) == len(set(texts)), flag
    threads = [flag_help(parser, "--threads") for command, parser in command_parsers().items()
               if not command.startswith("bench")]
    assert len(threads) == len(set(threads))


# Messages: what happened, and what to do.

def test_a_missing_dataset_path_says_it_does_not_exist_and_what_dataset_takes(tmp_path):
    status, out, err = run_main(["train", "--dataset", f"{tmp_path}/my-benchmark/", "--out", tmp_path / "run"])
    (line,) = err.strip().splitlines()
    assert status == 1 and out == ""
    assert line.startswith(f"numpy-transformer train: error: {tmp_path}/my-benchmark/: no such file or folder. "
                           f"--dataset takes a corpus by name (tatoeba, builtin, opus_books")
    assert "the prefix P of parallel text files P.en and P.it" in line and "a folder of train" in line
    assert "kept whole" not in line and not (tmp_path / "run").exists()


def test_a_missing_path_under_an_existing_folder_is_not_taken_for_a_hub_dataset(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    status, out, err = run_main(["train", "--dataset", "data/my-benchmark", "--out", tmp_path / "run"])
    (line,) = err.strip().splitlines()
    assert status == 1 and line.startswith("numpy-transformer train: error: data/my-benchmark: no such file or "
                                           "folder. --dataset takes a corpus by name")
    assert "reach" not in line and "network" not in line          # not the message of an unreachable Hub


def test_an_existing_run_folder_says_how_to_train_another_continue_or_replace(tmp_path):
    assert run_main(["train", "--out", tmp_path / "run", *TINY, "--quiet"])[0] == 0
    status, _, err = run_main(["train", "--out", tmp_path / "run", *TINY])
    (line,) = err.strip().splitlines()
    assert status == 1 and line == (f"numpy-transformer train: error: {tmp_path / 'run'} already holds a trained "
                                    f"model: to train another model, give a new folder with --out NEW; to continue "
                                    f"this one, --resume; to replace it, --overwrite")


def test_without_out_the_message_says_runs_default_is_the_default(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run_main(["train", *TINY, "--quiet"])[0] == 0
    status, _, err = run_main(["train", *TINY])
    (line,) = err.strip().splitlines()
    assert status == 1 and line.startswith("numpy-transformer train: error: runs/default already holds a trained model")
    assert line.endswith("--overwrite (--out was not given: a run goes to runs/default by default)")


@pytest.mark.parametrize("code, kept", [(errno.ENOSPC, True), (errno.EROFS, True), (errno.EDQUOT, True),
                                        (errno.ENOENT, False), (errno.EACCES, False), (errno.EISDIR, False)])
def test_files_kept_whole_is_said_after_an_error_of_writing_only(code, kept):
    message = os_error_message(OSError(code, "an error", "runs/x/checkpoint.npz"))
    assert ("files written before are kept whole" in message) == kept


@pytest.mark.parametrize("encoding", ["ascii", "latin-1", "cp1252"])
def test_an_output_encoding_without_the_printouts_characters_writes_them_as_escapes(tmp_path, encoding):
    """A terminal in an ASCII or Latin-1 locale, or Windows writing to a file in its code page,
    cannot encode "→" (or "▁", "≤"): the command used to fail at its first line ("'ascii' codec
    can't encode character"); now it runs and writes such a character as a \\u escape, on
    standard output and error alike. An error handler the user gave is kept."""
    import os
    import subprocess

    code = "import sys; from numpy_transformer.cli import main; sys.exit(main(sys.argv[1:]))"
    result = subprocess.run([sys.executable, "-c", code, "train", "--out", str(tmp_path / "run"), *TINY],
                            capture_output=True, env={**os.environ, "PYTHONIOENCODING": encoding}, timeout=300)
    assert result.returncode == 0, result.stderr.decode(encoding, "replace")[-2000:]
    out = result.stdout.decode(encoding)
    assert "synthetic English\\u2192Italian" in out and "test split" in out.lower(), out[:2000]
    assert (tmp_path / "run" / "checkpoint.npz").exists()
    result = subprocess.run([sys.executable, "-c", code, "train", "--out", str(tmp_path / "run"), *TINY],
                            capture_output=True, env={**os.environ, "PYTHONIOENCODING": encoding}, timeout=300)
    (line,) = result.stderr.decode(encoding).splitlines()            # a refusal: the folder exists
    assert result.returncode == 1 and line.startswith("numpy-transformer train: error:"), line
    result = subprocess.run([sys.executable, "-c", code, "train", "--out", str(tmp_path / "other"), *TINY],
                            capture_output=True, env={**os.environ, "PYTHONIOENCODING": f"{encoding}:replace"},
                            timeout=300)
    assert result.returncode == 0 and "synthetic English?Italian" in result.stdout.decode(encoding)
