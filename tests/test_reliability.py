"""What happens when things go wrong: a run never deletes what it did not write, one writer per
run folder, the data a run was trained on is the data it is evaluated on, SIGTERM saves like
Ctrl-C, and every fault is one clear line."""
import contextlib
import errno
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import numpy_transformer.training.checkpoint as checkpoint_module
from numpy_transformer.cli import main
from numpy_transformer.config import TransformerConfig
from numpy_transformer.model import Transformer
from numpy_transformer.training.checkpoint import CheckpointError, load_checkpoint
from numpy_transformer.training.loop import TrainingDiverged
from numpy_transformer.training.run import Run
from numpy_transformer.training.run_folder import LOCK, MANIFEST, RunFolderError
from run_helpers import tiny_configs, write_opus_jsonl, written_pairs

TINY = ["--tokenizer", "word", "--no-shared-vocabulary", "--d-model", "16", "--n-heads", "2", "--d-ff", "32", "--batch-size", "16", "--max-len", "32",
        "--eval-every", "5", "--checkpoint-every", "5", "--samples", "0", "--beam", "1", "--quiet"]
ENVIRONMENT = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}


def run_main(args, cwd=None):
    """(exit status, stdout, stderr) of main(args) run in `cwd`, argparse's SystemExit included."""
    out, err, previous = io.StringIO(), io.StringIO(), os.getcwd()
    os.chdir(cwd or previous)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main([str(arg) for arg in args])
    except SystemExit as exit:
        status = exit.code
    finally:
        os.chdir(previous)
    return status, out.getvalue(), err.getvalue()


def tiny_train(out, *more, steps=5):
    return run_main(["train", "--out", out, "--dataset", "builtin", "--tokenizer", "word", "--no-shared-vocabulary", "--n-pairs", "120", "--steps", steps, *TINY, *more])


def one_error_line(err):
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# A run never deletes what it did not write.

def test_a_new_run_refuses_a_folder_of_the_users_files_and_touches_none(tmp_path):
    (tmp_path / "data.json").write_text('{"my": "data"}')
    (tmp_path / "loss.png").mkdir()
    (tmp_path / "loss.png" / "keep.txt").write_text("x")
    status, _, err = tiny_train(tmp_path)
    assert status == 1 and "data.json, loss.png" in one_error_line(err)
    assert (tmp_path / "data.json").read_text() == '{"my": "data"}'
    assert (tmp_path / "loss.png" / "keep.txt").read_text() == "x"
    status, _, err = tiny_train(tmp_path, "--overwrite")         # --overwrite replaces no file of the user's
    assert status == 1 and (tmp_path / "loss.png" / "keep.txt").exists()


def test_an_empty_out_is_refused_and_the_current_folder_left_alone(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    status, _, err = run_main(["train", "--out", "", "--dataset", "builtin", "--tokenizer", "word", "--no-shared-vocabulary", "--n-pairs", "120", "--steps", "5", *TINY], cwd=tmp_path)
    assert status == 1 and "--out ." in one_error_line(err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_overwrite_removes_only_the_files_a_run_wrote(tmp_path):
    folder = tmp_path / "run"
    assert tiny_train(folder)[0] == 0
    (folder / "notes.txt").write_text("mine")
    written = json.loads((folder / MANIFEST).read_text())["files"]
    assert {"checkpoint.npz", "data.json", "log.jsonl", "metrics.json"} <= set(written)
    status, _, err = tiny_train(folder)
    assert status == 1 and "already holds a trained model" in one_error_line(err)
    assert tiny_train(folder, "--overwrite")[0] == 0
    assert (folder / "notes.txt").read_text() == "mine"
    assert load_checkpoint(folder).step == 5


def test_a_run_writes_beside_the_users_files_only_with_overwrite(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    assert tiny_train(tmp_path)[0] == 1
    assert tiny_train(tmp_path, "--overwrite")[0] == 0
    assert (tmp_path / "notes.txt").read_text() == "mine" and (tmp_path / "checkpoint.npz").is_file()


# One writer per run folder.

def test_a_second_run_on_a_folder_in_use_is_refused_while_the_first_completes(tmp_path):
    folder = tmp_path / "run"
    command = [sys.executable, "-m", "numpy_transformer.cli", "train", "--out", str(folder), "--dataset", "builtin", "--tokenizer", "word", "--no-shared-vocabulary", "--n-pairs", "400",
               "--steps", "400", *TINY]
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENVIRONMENT)
    try:
        deadline = time.time() + 60
        while not (folder / LOCK).exists() and time.time() < deadline:
            time.sleep(0.05)
        second = subprocess.run(command, capture_output=True, text=True, env=ENVIRONMENT, timeout=120)
        assert second.returncode == 1
        assert f"in use by another run (process {first.pid}" in one_error_line(second.stderr)
        _, err = first.communicate(timeout=300)
        assert first.returncode == 0, err
    finally:
        first.kill()
    assert not (folder / LOCK).exists()
    assert load_checkpoint(folder).step == 400


def test_a_stale_lock_of_a_dead_process_is_taken_over(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    folder = tmp_path / "run"
    folder.mkdir()
    import socket
    (folder / LOCK).write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname()}))
    reports = []
    with Run.new(folder, *tiny_configs(training={"steps": 2}), report=reports.append) as run:
        run.train()
    assert any(f"took over the lock of process {dead.pid}" in line for line in reports)
    assert not (folder / LOCK).exists()


# The data a run was trained on.

def test_evaluate_and_resume_refuse_a_changed_corpus_file(tmp_path):
    corpus = tmp_path / "pairs.jsonl"
    write_opus_jsonl(corpus, written_pairs(120))
    folder = tmp_path / "run"
    assert run_main(["train", "--out", folder, "--dataset", corpus, "--steps", "5", *TINY])[0] == 0
    assert json.loads((folder / "data.json").read_text())["dataset"] == str(corpus.resolve())
    lines = corpus.read_text().splitlines()
    corpus.write_text("\n".join(lines[1:] + lines[:1]) + "\n")         # the same pairs, in another order
    for command in (["evaluate", "--checkpoint", folder, "--beam", "1"], ["train", "--out", folder, "--resume",
                                                                            "--steps", "10", "--quiet"]):
        status, _, err = run_main(command)
        assert status == 1 and "not the data this run was trained on" in one_error_line(err)


def test_a_run_on_official_splits_saves_every_file_and_refuses_a_changed_validation_file(tmp_path):
    write_opus_jsonl(tmp_path / "train.jsonl", written_pairs(120))
    write_opus_jsonl(tmp_path / "val.jsonl", written_pairs(12, seed=2))
    folder = tmp_path / "run"
    status, out, err = run_main(["train", "--out", folder, "--dataset", "train.jsonl", "--validation-file",
                                 "val.jsonl", "--steps", "5", *TINY], cwd=tmp_path)
    assert status == 0, err
    assert (f"data: local files: train: train.jsonl (114 pairs), validation: val.jsonl (12 pairs), test: carved "
            f"from train (6 pairs)") in out
    saved = json.loads((folder / "data.json").read_text())
    assert (saved["dataset"], saved["validation_file"]) == (str(tmp_path / "train.jsonl"), str(tmp_path / "val.jsonl"))
    assert run_main(["evaluate", "--checkpoint", folder, "--beam", "1"])[0] == 0       # from another folder
    write_opus_jsonl(tmp_path / "val.jsonl", written_pairs(12, seed=3))
    status, _, err = run_main(["evaluate", "--checkpoint", folder, "--beam", "1"])
    assert status == 1 and "not the data this run was trained on" in one_error_line(err)


def test_evaluate_finds_the_corpus_from_another_working_folder(tmp_path):
    corpus = tmp_path / "pairs.jsonl"
    write_opus_jsonl(corpus, written_pairs(120))
    folder = tmp_path / "run"
    assert run_main(["train", "--out", folder, "--dataset", "pairs.jsonl", "--steps", "5", *TINY], cwd=tmp_path)[0] == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    write_opus_jsonl(elsewhere / "pairs.jsonl", written_pairs(140))      # a different file of the same name
    status, out, err = run_main(["evaluate", "--checkpoint", folder, "--beam", "1"], cwd=elsewhere)
    assert status == 0, err


# SIGTERM, and checks on resuming.

def test_sigterm_saves_a_checkpoint_that_resume_continues(tmp_path):
    folder = tmp_path / "run"
    command = [sys.executable, "-m", "numpy_transformer.cli", "train", "--out", str(folder), "--dataset", "builtin", "--tokenizer", "word", "--no-shared-vocabulary", "--n-pairs", "400",
               "--steps", "3000", *TINY[:-5], "--checkpoint-every", "100000", "--samples", "0", "--beam", "1"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENVIRONMENT)
    try:
        deadline = time.time() + 60
        while not (folder / "log.jsonl").exists() and time.time() < deadline:
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 130, err
    step = load_checkpoint(folder).step
    assert 0 < step < 3000
    status, _, err = run_main(["train", "--out", folder, "--resume", "--steps", str(step + 2), "--quiet",
                               "--samples", "0", "--beam", "1"])
    assert status == 0, err
    assert load_checkpoint(folder).step == step + 2


def test_resume_refuses_fewer_steps_than_done_and_overwrite(tmp_path):
    folder = tmp_path / "run"
    assert tiny_train(folder, steps=10)[0] == 0
    status, _, err = run_main(["train", "--out", folder, "--resume", "--steps", "5"])
    assert status == 1 and "at step 10, past the 5 steps" in one_error_line(err)
    status, _, err = run_main(["train", "--out", folder, "--resume", "--overwrite"])
    assert status == 1 and "not both" in one_error_line(err)
    assert not (folder / LOCK).exists()


# Checkpoints.

def test_a_checkpoint_with_nan_weights_is_refused(tmp_path):
    folder = tmp_path / "run"
    assert tiny_train(folder)[0] == 0
    with np.load(folder / "checkpoint.npz") as archive:
        arrays = dict(archive)
    name = next(key for key in arrays if key.startswith("model/"))
    arrays[name] = np.full_like(arrays[name], np.nan)
    np.savez(folder / "checkpoint.npz", **arrays)
    with pytest.raises(CheckpointError, match=f"the weights of {name.removeprefix('model/')} are not all finite"):
        load_checkpoint(folder)
    status, _, err = run_main(["translate", "--checkpoint", folder, "the cat sleeps ."])
    assert status == 1 and "not all finite" in one_error_line(err)


def test_a_file_given_as_checkpoint_names_its_folder(tmp_path):
    folder = tmp_path / "run"
    assert tiny_train(folder)[0] == 0
    status, _, err = run_main(["translate", "--checkpoint", folder / "model.json", "the cat ."])
    assert status == 1 and f"the folder that holds it, {folder}" in one_error_line(err)


# Faults of the machine: one line, the last checkpoint whole.

def test_a_full_disk_while_saving_is_one_line_and_keeps_the_last_checkpoint(tmp_path, monkeypatch):
    folder = tmp_path / "run"
    assert tiny_train(folder)[0] == 0
    before = {name: (folder / name).read_bytes() for name in ("checkpoint.npz", "checkpoint_best.npz")}

    def disk_full(file, **arrays):
        file.write(b"partial")
        raise OSError(errno.ENOSPC, "No space left on device", str(folder / ".checkpoint.npz.tmp"))

    monkeypatch.setattr(checkpoint_module.np, "savez", disk_full)
    status, _, err = run_main(["train", "--out", folder, "--resume", "--steps", "10", "--quiet"])
    # the first file written fails: the best weights of step 10, written before the last ones
    assert status == 1 and f"{folder / 'checkpoint_best.npz'}: the disk is full" in one_error_line(err)
    assert {name: (folder / name).read_bytes() for name in before} == before


def test_a_folder_that_cannot_be_written_is_refused_before_any_data_loads(tmp_path, monkeypatch):
    folder = tmp_path / "run"
    folder.mkdir()
    monkeypatch.setattr(os, "access", lambda path, mode: not (Path(path) == folder and mode == os.W_OK))
    status, _, err = tiny_train(folder)
    assert status == 1 and f"cannot write in {folder}" in one_error_line(err)


def test_an_out_that_is_a_file_is_refused_before_any_data_loads(tmp_path):
    path = tmp_path / "taken"
    path.write_text("x")
    status, _, err = tiny_train(path)
    assert status == 1 and "is a file, not a folder" in one_error_line(err)


def test_a_read_only_folder_is_one_line(tmp_path, monkeypatch):
    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", str(tmp_path / "run"))

    monkeypatch.setattr(Path, "mkdir", read_only)
    status, _, err = tiny_train(tmp_path / "run")
    assert status == 1 and "read-only: choose a folder you can write to" in one_error_line(err)


@pytest.mark.parametrize("flags, message", [
    (["--d-model", "100000", "--n-heads", "2"], "GiB"),
    (["--attention", "window", "--attention-options", '{"window": 1000000000}'], "window=1000000000"),
    (["--dataset", "builtin", "--tokenizer", "word", "--no-shared-vocabulary", "--n-pairs", "2"], "2 pairs are too few"),
    (["--lr", "1e308"], r"lr must be a number in (0, 1]"),
])
def test_absurd_or_too_small_settings_fail_before_any_folder_exists(tmp_path, flags, message):
    args = ["train", "--out", tmp_path / "run", "--dataset", "builtin", "--tokenizer", "word", "--no-shared-vocabulary", "--n-pairs", "120", "--steps", "5", *TINY]
    status, _, err = run_main([*args, *flags])
    assert status == 1 and message in one_error_line(err)
    assert not (tmp_path / "run").exists()


def test_a_run_that_diverges_before_its_first_checkpoint_leaves_no_folder(tmp_path, monkeypatch):
    def diverge(self, batch):
        raise TrainingDiverged("training diverged at step 1")

    monkeypatch.setattr("numpy_transformer.training.loop.Trainer.step_on_batch", diverge)
    status, _, err = tiny_train(tmp_path / "run")
    assert status == 1 and "diverged" in one_error_line(err)
    assert not (tmp_path / "run").exists()


# Bad input at the command line and in the API.

def test_text_that_is_not_utf8_is_one_line(tmp_path):
    folder = tmp_path / "run"
    assert tiny_train(folder)[0] == 0
    result = subprocess.run([sys.executable, "-m", "numpy_transformer.cli", "translate", "--checkpoint", str(folder)],
                            input=b"the caf\xe9\n", capture_output=True, env=ENVIRONMENT, timeout=120)
    assert result.returncode == 1
    assert "line 1 is not valid UTF-8" in one_error_line(result.stderr.decode())
    corpus = tmp_path / "latin.jsonl"
    corpus.write_bytes('{"id": "0", "translation": {"en": "the café", "it": "il caffè"}}\n'.encode("latin-1"))
    status, _, err = run_main(["train", "--out", tmp_path / "other", "--dataset", corpus, *TINY])
    assert status == 1 and f"{corpus}: line 1 is not UTF-8" in one_error_line(err)


def test_an_over_long_target_of_attention_is_refused_like_a_source(tmp_path):
    folder = tmp_path / "run"
    assert tiny_train(folder)[0] == 0
    status, _, err = run_main(["attention", "--checkpoint", folder, "the cat .", "--target", "il " * 40,
                               "--out", tmp_path / "attention"])
    assert status == 1 and "the target has 41 tokens" in one_error_line(err)


@pytest.mark.parametrize("args", [
    ["gradcheck", "--seed", "-1"], ["bench", "decode", "--runs", "0"], ["bench", "attention", "--max-n", "0"],
    ["bench", "train-step", "--steps", "0"], ["train", "--samples", "-1"], ["train", "--length-penalty", "-1"],
    ["train", "--threads", "100000"], ["translate", "--checkpoint", "x", "--beam", "0", "a"],
])
def test_values_out_of_range_are_refused_by_the_parser(args):
    status, _, err = run_main(args)
    assert status == 2 and "error: argument" in err


def test_the_model_api_names_a_bad_argument():
    config = TransformerConfig(10, 10, d_model=8, n_heads=2, d_ff=8, n_encoder_layers=1, n_decoder_layers=1)
    with pytest.raises(TypeError, match="rng must be a numpy.random.Generator"):
        Transformer(config, None)
    model = Transformer(config, np.random.default_rng(0))
    src = np.array([[3, 4]])
    mask = model.source_mask(src)
    with pytest.raises(ValueError, match="start must be a non-negative integer, got -2"):
        model.decode(model.encode(src, mask), mask, np.array([[1]]), None, start=-2)


def test_a_folder_error_is_a_value_error_naming_the_folder(tmp_path):
    (tmp_path / "x.txt").write_text("x")
    with pytest.raises(RunFolderError, match=str(tmp_path)):
        Run.new(tmp_path, *tiny_configs())
