"""The `numpy-transformer` command: train, translate, evaluate end to end on a tiny run, and every
bad input answered by one clear line, a non-zero exit status, no traceback, no run folder."""
import io
import json
import re
import subprocess
import sys

import datasets
import huggingface_hub.constants
import pytest

from numpy_transformer.training.run import Run
from run_helpers import assert_clear_error, run_main, write_opus_jsonl, written_pairs

TINY = ["--dataset", "builtin", "--tokenizer", "word", "--no-shared-vocabulary", "--n-pairs", "120", "--max-len", "32", "--d-model", "16", "--n-heads", "2", "--d-ff", "32",
        "--batch-size", "16", "--steps", "10", "--eval-every", "5", "--checkpoint-every", "5", "--samples", "2"]
METRICS = {"bleu", "chrf", "bleu_greedy", "chrf_greedy", "bleu_signature", "chrf_signature", "loss",
           "validation_loss", "perplexity", "train_seconds", "source", "steps", "parameters", "data", "model"}


def without(flags, flag):
    """`flags` without `flag` and its value (--n-pairs, for a corpus other than the built-in one)."""
    at = flags.index(flag)
    return flags[:at] + flags[at + 2:]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(folder, stdout) of `numpy-transformer train` with tiny settings on 120 built-in pairs."""
    directory = tmp_path_factory.mktemp("cli") / "run"
    status, out, err = run_main(["train", "--out", directory, *TINY])
    assert status == 0, err
    return directory, out


def test_train_prints_the_data_translations_and_scores_and_writes_the_run_folder(trained):
    directory, out = trained
    assert "built-in synthetic corpus" in out and "not real text" in out
    assert "pairs: 108 train, 6 validation, 6 test" in out
    assert "vocabularies" in out and "parameters" in out
    assert "Sample test translations" in out and "reference" in out and "beam 4" in out
    assert "BLEU signature: nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp" in out
    assert "chrF signature: nrefs:1" in out and "perplexity" in out
    metrics = json.loads((directory / "metrics.json").read_text())
    assert METRICS <= metrics.keys()
    assert metrics["steps"] == 10 and metrics["beam_size"] == 4 and "synthetic" in metrics["source"]
    for name in ("checkpoint.npz", "model.json", "training.json", "data.json", "tokenizer_en.json",
                 "tokenizer_it.json", "log.jsonl", "loss.png"):
        assert (directory / name).is_file(), name


def test_evaluate_rebuilds_the_test_split_and_gives_the_scores_of_train(trained):
    directory, _ = trained
    metrics = json.loads((directory / "metrics.json").read_text())
    status, out, _ = run_main(["evaluate", "--checkpoint", directory, "--samples", "1"])
    assert status == 0
    assert "Test split: 6 pairs" in out
    assert re.search(rf"beam 4 +{metrics['bleu']:.2f} +{metrics['chrf']:.2f}", out), out
    assert re.search(rf"greedy +{metrics['bleu_greedy']:.2f} +{metrics['chrf_greedy']:.2f}", out), out
    assert f"perplexity {metrics['perplexity']:.3f}" in out
    status, out, _ = run_main(["evaluate", "--checkpoint", directory, "--split", "validation", "--beam", "1"])
    assert status == 0 and "Validation split: 6 pairs" in out and "beam" not in out.split("Validation split")[1]


def test_translate_prints_one_line_per_sentence_from_arguments_or_standard_input(trained, monkeypatch):
    directory, _ = trained
    status, out, err = run_main(["translate", "--checkpoint", directory, "the man eats .", "", "we sleep ."])
    assert status == 0
    assert len(out.splitlines()) == 3 and out.splitlines()[1] == ""
    assert "built-in synthetic corpus" in err
    monkeypatch.setattr(sys, "stdin", io.StringIO("the man eats .\nwe sleep .\n"))
    status, out, _ = run_main(["translate", "--checkpoint", directory, "--beam", "2"])
    assert status == 0 and len(out.splitlines()) == 2


def test_translate_notes_the_words_it_has_never_seen(trained):
    directory, _ = trained
    status, out, err = run_main(["translate", "--checkpoint", directory, "the zebra eats the xylophone ."])
    assert status == 0 and len(out.splitlines()) == 1
    note = next(line for line in err.splitlines() if "[UNK]" in line)
    assert note.startswith("note: sentence 1: not in the en vocabulary, read as [UNK]: 'zebra'")
    assert "'xylophone'" in note and "'the'" not in note


def test_translate_reads_special_token_names_in_a_sentence_as_text(trained):
    """`[EOS]` typed in a sentence does not end it, nor `[PAD]` pad it: they are words the
    vocabulary lacks, and the note names them."""
    status, out, err = run_main(["translate", "--checkpoint", trained[0], "the man [EOS] eats [PAD] ."])
    assert status == 0 and len(out.splitlines()) == 1
    note = next(line for line in err.splitlines() if "[UNK]" in line)
    assert "'EOS'" in note and "'PAD'" in note


def test_translate_translates_a_sentence_longer_than_the_model_was_trained_on(trained):
    directory, _ = trained               # sinusoidal positions: the 42 tokens are read whole, past max_len 32
    status, out, err = run_main(["translate", "--checkpoint", directory, "the man eats .", "the man " * 20])
    assert status == 0 and len(out.splitlines()) == 2 and out.splitlines()[1], err
    assert "the model reads the first" not in err


def test_translate_with_nothing_to_translate_says_so(trained, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    status, _, err = run_main(["translate", "--checkpoint", trained[0]])
    assert_clear_error(status, err, "nothing to translate")


def test_train_resume_continues_and_refuses_new_settings(trained, tmp_path):
    import shutil
    directory = tmp_path / "run"
    shutil.copytree(trained[0], directory)
    status, _, err = run_main(["train", "--out", directory, *TINY])
    assert_clear_error(status, err, "already holds a trained model: to train another model, give a new folder with "
                                    "--out NEW; to continue this one, --resume")
    status, _, err = run_main(["train", "--out", directory, "--resume", "--d-model", "32", "--task", "translation"])
    assert_clear_error(status, err, r"cannot change d_model \(only")            # the run's own task is no change
    status, _, err = run_main(["train", "--out", directory, "--resume", "--task", "lm"])
    assert_clear_error(status, err, r"cannot change task \(only")
    status, _, err = run_main(["train", "--out", directory, "--resume", "--preset", "grammar"])
    assert_clear_error(status, err, r"cannot change preset \(only")       # grammar's model is not this one
    own = ["--task", "translation", "--dataset", "builtin", "--d-model", "16", "--max-len", "32", "--n-pairs", "120"]
    repeated = ["--preset", "default", "--n-heads", "2", "--d-ff", "32", "--tokenizer", "word", "--no-shared-vocabulary"]
    status, out, err = run_main(["train", "--out", directory, "--resume", *own, *repeated, "--steps", "12",
                                 "--samples", "0"])
    assert status == 0, err                     # the run's own preset and flags, repeated: no change
    assert "Resuming" in out and "at step 10 of 12" in out
    assert json.loads((directory / "metrics.json").read_text())["steps"] == 12


def test_a_run_killed_between_checkpoints_resumes_from_the_last_and_says_which_steps_it_trains_again(tmp_path):
    """kill -9 (or the out-of-memory killer) leaves the last checkpoint and a log that went on:
    --resume continues from the checkpoint, says how far the log went, and drops the log's
    records past the checkpoint, which the resumed run writes again with the same losses."""
    import signal
    import time
    from numpy_transformer.training.checkpoint import load_checkpoint
    from numpy_transformer.training.metrics_log import read_log

    directory = tmp_path / "run"
    flags = [*TINY, "--steps", "100000", "--checkpoint-every", "5", "--eval-every", "100000", "--log-every", "1"]
    process = subprocess.Popen([sys.executable, "-m", "numpy_transformer.cli", "train", "--out", str(directory),
                                "--quiet", *flags], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while max((record.get("step", 0) for record in read_log(directory / "log.jsonl")), default=0) < 7:
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()[1]
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    saved = load_checkpoint(directory).step
    before = {record["step"]: record["loss"] for record in read_log(directory / "log.jsonl") if "loss" in record}
    logged = max(before)
    if logged == saved:                                     # killed just as it saved a checkpoint: nothing to say
        pytest.skip(f"killed at a checkpoint (step {saved})")
    status, out, err = run_main(["train", "--out", directory, "--resume", *flags, "--steps", str(logged + 2),
                                 "--samples", "0"])
    assert status == 0, err
    assert f"Resuming {directory} at step {saved} of {logged + 2}." in out
    assert (f"Note: its log went on to step {logged}, past this checkpoint: the run ended before it could save "
            f"those steps (killed by a signal or the out-of-memory killer, for instance); they are trained again, "
            f"to the same numbers.") in out
    after = [(record["step"], record["loss"]) for record in read_log(directory / "log.jsonl") if "loss" in record]
    assert [step for step, _ in after] == list(range(1, logged + 3))     # each step once, those past step 5 redone
    assert all(loss == before[step] for step, loss in after if step <= logged)         # to the same numbers


def test_ctrl_c_during_train_saves_and_says_how_to_resume(tmp_path, monkeypatch):
    train = Run.train

    def interrupted(self, callback=None):
        def interrupt(trainer):
            if trainer.state.step == 3:
                raise KeyboardInterrupt
        return train(self, interrupt)

    monkeypatch.setattr(Run, "train", interrupted)
    status, _, err = run_main(["train", "--out", tmp_path / "run", *TINY])
    assert status == 130
    assert "Interrupted at step 3 of 10: a checkpoint of step 3 is in" in err and "--resume" in err
    assert "Traceback" not in err and (tmp_path / "run" / "checkpoint.npz").is_file()


def test_a_missing_checkpoint_is_one_clear_line(tmp_path):
    status, _, err = run_main(["translate", "--checkpoint", tmp_path / "nowhere", "hello"])
    assert_clear_error(status, err, "no such folder .*nowhere: train a model there with "
                                     "`numpy-transformer train --out .*nowhere`")
    status, _, err = run_main(["evaluate", "--checkpoint", tmp_path])
    assert_clear_error(status, err, "checkpoint.npz is missing")


def test_a_damaged_checkpoint_is_one_clear_line(trained, tmp_path):
    import shutil
    directory = tmp_path / "run"
    shutil.copytree(trained[0], directory)
    archive = directory / "checkpoint.npz"
    archive.write_bytes(archive.read_bytes()[:1000])
    status, _, err = run_main(["evaluate", "--checkpoint", directory])
    assert_clear_error(status, err, "checkpoint.npz is damaged")


def test_a_configuration_that_does_not_fit_the_weights_is_one_clear_line(trained, tmp_path):
    import shutil
    directory = tmp_path / "run"
    shutil.copytree(trained[0], directory)
    config = json.loads((directory / "model.json").read_text())
    config["n_encoder_layers"] = 2
    (directory / "model.json").write_text(json.dumps(config))
    status, _, err = run_main(["translate", "--checkpoint", directory, "the man eats ."])
    assert_clear_error(status, err, "the weights do not fit the configuration")


@pytest.mark.parametrize("content, message", [
    ("", "the file is empty"),
    ("{not json\n", "cannot read it as JSON"),
    ('{"id": "0", "translation": {"en": "Hello.", "fr": "Bonjour."}}\n', "languages"),
])
def test_an_empty_or_malformed_data_file_is_one_clear_line_and_leaves_no_folder(tmp_path, content, message):
    path = tmp_path / "pairs.jsonl"
    path.write_text(content)
    out = tmp_path / "run"
    status, _, err = run_main(["train", "--out", out, "--dataset", path, "--cache-dir", tmp_path / "cache",
                               *without(TINY[2:], "--n-pairs")])
    assert_clear_error(status, err, message, absent_folder=out)


def test_a_data_file_in_the_opus_books_schema_trains(tmp_path):
    path = write_opus_jsonl(tmp_path / "books.jsonl", written_pairs(60))
    out = tmp_path / "run"
    status, stdout, err = run_main(["train", "--out", out, "--dataset", path, "--cache-dir", tmp_path / "cache",
                                    *without(TINY[2:], "--n-pairs"), "--steps", "2"])
    assert status == 0, err
    assert f"data: local file {path} (60 pairs)" in stdout
    assert json.loads((out / "data.json").read_text())["dataset"] == str(path)


@pytest.mark.parametrize("args, message", [
    (["--pair", "en-fr"], "the built-in corpus is English→Italian only"),
    (["--dataset", "opus_books", "--pair", "en-xx"], "opus_books has no en-xx pair"),
    (["--pair", "english"], "pair must look like 'en-it'"),
    (["--n-heads", "3"], "d_model=16 is not divisible by n_heads=3"),
    (["--lr", "1e-4", "--warmup", "100"], "not both"),
    (["--precision", "half"], r"precision must be one of \('float32', 'mixed'\), got 'half'"),
])
def test_an_unknown_language_pair_or_a_bad_setting_is_one_clear_line_and_leaves_no_folder(tmp_path, args, message):
    out = tmp_path / "run"
    tiny = without(TINY, "--n-pairs") if "--dataset" in args else TINY      # --n-pairs: the built-in corpus's
    status, _, err = run_main(["train", "--out", out, *tiny, *args])
    assert_clear_error(status, err, message, absent_folder=out)


def test_an_unknown_preset_lists_the_presets(tmp_path):
    status, _, err = run_main(["train", "--out", tmp_path / "run", "--preset", "huge"])
    assert status == 2 and "invalid choice: 'huge'" in err and "thesis-8-heads" in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("preset, message", [("thesis-1-head", "Cannot load opus_books en-it"),
                                             ("small-real", "bentrevett/multi30k")])
def test_a_hub_corpus_unreachable_prints_what_to_do_instead(tmp_path, monkeypatch, preset, message):
    closed_port = "http://127.0.0.1:9"
    monkeypatch.setattr(datasets.config, "HF_ENDPOINT", closed_port)
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", closed_port)
    out = tmp_path / "run"
    status, _, err = run_main(["train", "--out", out, "--preset", preset, "--cache-dir", tmp_path / "cache"])
    assert_clear_error(status, err, message, absent_folder=out)
    assert "--dataset builtin" in err and "--dataset FILE" in err


def test_the_installed_command_exits_with_status_1_and_no_traceback(tmp_path):
    result = subprocess.run([sys.executable, "-m", "numpy_transformer.cli", "translate", "--checkpoint",
                             str(tmp_path / "missing"), "hello"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert result.stdout == "" and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and "no such folder" in result.stderr


@pytest.mark.parametrize("task", ["translation", "lm"])
def test_train_in_mixed_precision_logs_the_loss_scale_and_saves_float32_weights(tmp_path, task):
    out = tmp_path / "run"
    status, stdout, err = run_main(["train", "--out", out, "--task", task, *TINY, "--precision", "mixed"])
    assert status == 0, err
    assert "mixed precision" in stdout
    records = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert [r["loss_scale"] for r in records if "loss" in r][0] == 2.0 ** 16
    assert {p.dtype.name for p in Run.resume(out, report=None).model.parameters()} == {"float32"}
