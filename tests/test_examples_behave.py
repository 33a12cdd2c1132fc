"""The scripts of examples/ behave like the commands: each takes --threads (1 by default, fixed
before NumPy loads) and, where it writes, --out; run in a fresh interpreter from another folder,
the quick ones write only into --out and leave the repository as it was; a missing optional
library or input file ends in one line `examples/NAME.py: error: …` with status 1."""
import json
import os
from pathlib import Path
import re
import subprocess
import sys

import pytest

from run_helpers import load_example, needs_two_cores, written_pairs
from test_pretrained_heads import write_tiny_bert_model

REPOSITORY = Path(__file__).resolve().parent.parent
EXAMPLES = sorted(path.stem for path in (REPOSITORY / "examples").glob("*.py"))
WRITES_NOTHING = {"attention_step_by_step"}
TINY_MODEL = ["--d-model", "8", "--heads", "2"]
QUICK = {                                        # the tiny settings of each example's own test, smaller still
    "attention_can_represent": ["--n", "5", "--steps", "20"],
    "attention_step_by_step": [],
    "bleu_curve": ["--steps", "2", "--eval-every", "2", "--model", '{"d_model": 16, "n_heads": 2, "d_ff": 32}',
                   "--training", '{"batch_size": 16}', "--data", '{"n_pairs": 120, "max_len": 32}', "--dataset", "builtin"],
    "digits_to_words": ["--limit", "40", "--epochs", "1", "--encoder-layers", "1", *TINY_MODEL],
    "forecast_attention": ["--steps", "5", "--window", "5", *TINY_MODEL],
    "gat_karate": ["--epochs", "5", "--hidden", "4", "--heads", "2"],
    "memory_slots": ["--steps", "4", "--every", "2", "--n-pairs", "300", "--d-model", "16", "--slots", "2"],
    "positional_encoding": ["--max-len", "20", "--d-model", "8"],
    "pretrained_heads": ["--sentences", "2", "--samples", "1", "--min-tokens", "4"],
    "softmax_jacobian": [],
    "vit_digits": ["--limit", "40", "--epochs", "1", "--layers", "1", *TINY_MODEL],
    "warmup_attention": ["--steps", "4", "--every", "2", "--n-pairs", "300", "--d-model", "16"],
    "window_study": ["--steps", "2", "--seeds", "0", "--sentences", "3", "--n-pairs", "120", "--d-model", "16",
                     "--heads", "2", "--max-width", "2", "--max-num-pos", "1", "--min-tokens", "3",
                     "--max-tokens", "40"],
}
# Runs examples/NAME.py as `python examples/NAME.py ARGS` would, with the modules named in its
# first argument made unimportable (a None in sys.modules: `import torch` then fails as it does
# where torch is not installed); then prints the thread counts of the BLAS that was loaded.
RUNNER = """
import runpy, sys
blocked, script, *arguments = sys.argv[1:]
for name in filter(None, blocked.split(",")):
    sys.modules[name] = None
sys.argv = [script, *arguments]
try:
    runpy.run_path(script, run_name="__main__")
finally:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        pass
    else:
        print("BLAS threads:", sorted({pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}))
"""
BLAS_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_THREAD_TIMEOUT")


def run_example(name, arguments, folder, blocked=()):
    """subprocess.CompletedProcess of examples/NAME.py run from `folder`, in an environment that
    sets no BLAS thread count."""
    environment = {key: value for key, value in os.environ.items() if key not in BLAS_VARIABLES}
    environment["PYTHONPATH"] = os.pathsep.join([str(REPOSITORY), *filter(None, [os.environ.get("PYTHONPATH")])])
    environment["HF_DATASETS_OFFLINE"] = "1"
    return subprocess.run([sys.executable, "-c", RUNNER, ",".join(blocked), str(REPOSITORY / "examples" / f"{name}.py"),
                           *arguments], cwd=folder, env=environment, capture_output=True, text=True, timeout=600)


def repository_listing():
    """{path: (size, mtime)} of every file of the repository but git's and Python's bytecode caches."""
    listing = {}
    for directory, folders, files in os.walk(REPOSITORY):
        folders[:] = [name for name in folders if name not in (".git", "__pycache__")]
        for name in files:
            if name != ".git":                           # a worktree's .git is a file
                status = (Path(directory) / name).stat()
                listing[os.path.relpath(Path(directory) / name, REPOSITORY)] = (status.st_size, status.st_mtime_ns)
    return listing


def write_multi30k(folder):
    """train.jsonl and val.jsonl in Multi30k's schema, {"translation": {"en", "de"}}."""
    folder.mkdir()
    for name, pairs in (("train.jsonl", written_pairs(120)), ("val.jsonl", written_pairs(20, seed=2))):
        rows = [{"translation": {"en": p.src, "de": p.tgt}} for p in pairs]
        (folder / name).write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return folder


def test_every_example_has_quick_settings_here_or_is_the_long_thesis_experiment():
    assert sorted([*QUICK, "thesis_experiment"]) == EXAMPLES


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_example_takes_threads_and_where_it_writes_an_output_folder(name, capsys):
    with pytest.raises(SystemExit) as stopped:
        load_example(name).main(["--help"])
    shown = capsys.readouterr().out
    assert stopped.value.code == 0 and "--threads" in shown
    assert ("--out" in shown) == (name not in WRITES_NOTHING)
    assert "--figure " not in shown                          # a figure goes into --out, not to a path of its own


@pytest.mark.parametrize("name", sorted(QUICK))
def test_a_quick_run_writes_into_its_output_folder_only_and_runs_blas_on_one_thread(name, tmp_path):
    folder, out = tmp_path / "elsewhere", tmp_path / "out"
    folder.mkdir()
    arguments = [*QUICK[name], *(["--multi30k", str(write_multi30k(tmp_path / "m30k"))] if name == "window_study" else []),
                 *(["--model", str(write_tiny_bert_model(tmp_path / "bert"))] if name == "pretrained_heads" else []),
                 *([] if name in WRITES_NOTHING else ["--out", str(out)])]
    before = repository_listing()
    result = run_example(name, arguments, folder)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert repository_listing() == before
    assert list(folder.iterdir()) == []                     # nothing in the folder it ran from either
    if name not in WRITES_NOTHING:
        assert any(out.iterdir()) and str(out) in result.stdout          # it says where it wrote
    if "BLAS threads:" in result.stdout:
        assert result.stdout.strip().splitlines()[-1] == "BLAS threads: [1]"


@needs_two_cores
def test_the_threads_flag_reaches_blas_before_numpy_loads(tmp_path):
    pytest.importorskip("threadpoolctl")
    result = run_example("attention_step_by_step", ["--threads", "2"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "BLAS threads: [2]"


@pytest.mark.parametrize("name, arguments, blocked, message", [
    ("bleu_curve", ["--framework", "torch"], ["torch"], "this example needs torch, which is not installed: pip install torch"),
    ("vit_digits", [], ["sklearn"], "this example needs scikit-learn, which is not installed: pip install scikit-learn"),
    ("digits_to_words", [], ["sklearn"], "this example needs scikit-learn, which is not installed"),
    ("gat_karate", [], ["networkx"], "this example needs networkx, which is not installed: pip install networkx"),
    ("positional_encoding", [], ["matplotlib"], "this example needs matplotlib, which is not installed"),
    ("warmup_attention", [], ["matplotlib"], "this example needs matplotlib, which is not installed"),
    ("window_study", ["--multi30k", "nowhere"], [], r"Multi30k not found: nowhere/train\.jsonl, nowhere/val\.jsonl missing\. "
                                                    "Pass --multi30k FOLDER"),
])
def test_a_missing_library_or_input_is_one_line_and_status_1_before_any_work(name, arguments, blocked, message, tmp_path):
    out = tmp_path / "out"
    result = run_example(name, [*arguments, "--out", str(out)], tmp_path, blocked)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"examples/{name}.py: error: ") and re.search(message, lines[0]), lines[0]
    assert not out.exists()                                 # stopped before it wrote anything


def test_an_example_prints_in_an_output_encoding_without_its_characters(tmp_path, monkeypatch):
    """`python examples/attention_step_by_step.py > out.txt` where standard output is ASCII (or
    Windows's code page): its "§" and "√" are written as escapes, not a failed first line."""
    monkeypatch.setenv("PYTHONIOENCODING", "ascii")
    result = run_example("attention_step_by_step", [], tmp_path)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert "\\u" in result.stdout or "\\x" in result.stdout, result.stdout[:2000]
