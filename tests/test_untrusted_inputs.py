"""Issue 27, classes 8, 9 and 10b: held-out data that is training data is counted and warned
about; messages name the cause (the command's own options, the path, the argument); a benchmark
whose peak memory cannot be measured says so and carries on."""
import errno
import json
import os
import re
import zipfile

import pytest

from numpy_transformer.benchmarks import pretrained_speed, train_step
from numpy_transformer.benchmarks.attention_cost import sizes
from numpy_transformer.benchmarks.workloads import CONFIGS
from numpy_transformer.cli import evaluate, generate, main, os_error_message, translate
from numpy_transformer.cli.bench import MIN_N


def write_pairs(path, pairs):
    path.write_text("".join(json.dumps({"en": en, "it": it}) + "\n" for en, it in pairs), encoding="utf-8")
    return str(path)


PAIRS = [(f"the cat number {i} eats the fish .", f"il gatto numero {i} mangia il pesce .") for i in range(60)]


def train(tmp_path, *arguments):
    return main(["train", "--out", str(tmp_path / "run"), "--steps", "1", "--quiet", "--tokenizer", "word", "--no-shared-vocabulary", "--d-model", "16", "--d-ff",
                 "32", "--n-heads", "2", "--layers", "1", *arguments])


def test_a_test_file_equal_to_the_training_file_is_warned_about_with_the_count(tmp_path, capsys):
    corpus = write_pairs(tmp_path / "train.jsonl", PAIRS)
    assert train(tmp_path, "--dataset", corpus, "--test-file", corpus) == 0
    err = capsys.readouterr().err
    assert "warning: 57 of the 60 test pairs" in err and "train.jsonl" in err
    assert "validation" not in err                          # carved from training: no pair in both
    assert main(["evaluate", "--checkpoint", str(tmp_path / "run"), "--samples", "0"]) == 0
    assert "warning: 57 of the 60 test pairs" in capsys.readouterr().err


def test_held_out_pairs_that_occur_in_training_once_written_differently_are_counted(tmp_path, capsys):
    corpus = write_pairs(tmp_path / "train.jsonl", PAIRS)
    held_out = [("the cat number 1 eats the fish.", "il gatto numero 1 mangia il pesce."),     # as the tokenizer sees it
                ("the  cat number 2 eats the fish .", "il gatto numero 2 mangia il pesce ."),
                ("a new sentence .", "una frase nuova .")]
    test = write_pairs(tmp_path / "test.jsonl", held_out)
    assert train(tmp_path, "--dataset", corpus, "--test-file", test, "--validation-file", test) == 0
    err = capsys.readouterr().err
    assert "warning: 2 of the 3 test pairs (" in err and "test.jsonl" in err
    assert "warning: 2 of the 3 validation pairs (" in err


def test_a_language_models_test_texts_that_are_its_training_texts_are_warned_about(tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("".join(f"{en}\n" for en, _ in PAIRS), encoding="utf-8")
    assert train(tmp_path, "--task", "lm", "--dataset", str(texts), "--test-file", str(texts)) == 0
    assert "warning: 57 of the 60 test texts" in capsys.readouterr().err


def test_a_min_frequency_no_word_reaches_is_one_line_naming_the_option(tmp_path, capsys):
    assert train(tmp_path, "--dataset", "builtin", "--tokenizer", "word", "--no-shared-vocabulary", "--n-pairs", "200", "--min-frequency", "1000000") == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--min-frequency 1000000: no en word" in err and "lower --min-frequency" in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("arguments, message", [
    (["--warmup", "0"], "--warmup must be a positive integer, got 0"),
    (["--data-seed", "-1"], "--data-seed must be a non-negative integer, got -1"),
    (["--max-len", "2"], "--max-len must be an integer ≥ 3, got 2"),
    (["--task", "lm", "--layers", "0"], "--layers must be a positive integer, got 0")])
def test_a_bad_setting_is_named_by_the_flag_the_user_typed(tmp_path, capsys, arguments, message):
    assert main(["train", "--out", str(tmp_path / "run"), *arguments]) == 1
    err = capsys.readouterr().err
    assert err.strip() == f"numpy-transformer train: error: {message}" and not (tmp_path / "run").exists()


def out_of_memory(args):
    raise MemoryError


@pytest.mark.parametrize("module, arguments, named", [
    (translate, ["translate", "--checkpoint", "run", "a cat"], "--beam"),
    (evaluate, ["evaluate", "--checkpoint", "run"], "--beam"),
    (generate, ["generate", "--checkpoint", "run", "a"], "--max-new-tokens")])
def test_running_out_of_memory_names_the_commands_own_options(monkeypatch, capsys, module, arguments, named):
    monkeypatch.setattr(module, "command", out_of_memory)
    assert main(arguments) == 1
    err = capsys.readouterr().err
    assert "not enough memory" in err and named in err and "--d-model" not in err


def with_shape_in_header(archive, entry, shape):
    """Rewrite `entry` of the .npz `archive` with `shape` in its .npy header, its data unchanged."""
    with zipfile.ZipFile(archive) as source:
        members = [(info, source.read(info)) for info in source.infolist()]
    with zipfile.ZipFile(archive, "w") as target:
        for info, data in members:
            if info.filename == f"{entry}.npy":
                length = int.from_bytes(data[8:10], "little")
                header = re.sub(r"'shape': \([^)]*\)", f"'shape': {shape}", data[10:10 + length].decode("latin1"))
                data = data[:10] + (header.rstrip() + " ").ljust(length - 1).encode("latin1") + b"\n" + data[10 + length:]
            target.writestr(info, data)


def test_a_checkpoint_entry_whose_shape_asks_for_more_memory_than_exists_names_the_entry(tmp_path, capsys):
    assert train(tmp_path, "--dataset", "builtin", "--tokenizer", "word", "--no-shared-vocabulary", "--n-pairs", "200") == 0
    with_shape_in_header(tmp_path / "run" / "checkpoint.npz", "model/encoder.embedding.weight", "(999999999999,)")
    capsys.readouterr()
    assert main(["translate", "--checkpoint", str(tmp_path / "run"), "the cat"]) == 1
    err = capsys.readouterr().err
    assert "checkpoint.npz" in err and "'model/encoder.embedding.weight'" in err and "(999999999999,)" in err
    assert "the model expects (" in err and "not enough memory" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("code, advice", [(errno.EINVAL, "refuses this name"), (errno.ENAMETOOLONG, "too long")])
def test_an_invalid_or_too_long_name_is_a_sentence_naming_the_path(code, advice):
    message = os_error_message(OSError(code, "Invalid argument", "run:1/model.json"))
    assert message.startswith("run:1/model.json: ") and advice in message and "Invalid argument" not in message


def test_a_path_with_a_character_that_does_not_print_is_quoted_in_the_message():
    message = os_error_message(FileNotFoundError(errno.ENOENT, "No such file or directory", "corpus.jsonl\x00\nx"))
    assert message.startswith("'corpus.jsonl\\x00\\nx': no such file") and "\n" not in message


def test_a_too_long_out_is_one_line_naming_what_to_do(tmp_path, capsys):
    assert train(tmp_path / ("a" * 300)) == 1
    err = capsys.readouterr().err
    assert "too long for the file system: choose a shorter path" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("arguments, named", [(["attention", "--max-n", "1"], "--max-n"),
                                              (["attention", "--max-n", str(MIN_N - 1)], "--max-n"),
                                              (["memory", "--max-layers", "1"], "--max-layers")])
def test_degenerate_bench_arguments_are_refused_by_the_parser(capsys, arguments, named):
    with pytest.raises(SystemExit) as exit_:
        main(["bench", *arguments])
    assert exit_.value.code == 2 and f"argument {named}: must be an integer ≥" in capsys.readouterr().err
    assert sizes(MIN_N) == [MIN_N] and sizes(1) == []       # the smallest accepted --max-n measures one size


def test_bench_train_step_reports_peak_memory_unavailable_and_carries_on(monkeypatch):
    phases = [(0.001, 0.002, 0.0005)] * 3
    monkeypatch.setattr(train_step, "import_torch", lambda threads: object())
    monkeypatch.setattr(train_step, "time_steps",
                        lambda name, frameworks, threads, steps, warmup, split="auto", numpy_threads=None:
                        {framework: phases for framework in frameworks})
    monkeypatch.setattr(train_step, "peak_memory_mb", lambda name, framework, threads, split="auto": None)
    lines = []
    results = train_step.run(["tiny"], steps=1, warmup=0, log=lines.append)
    text = "\n".join(lines)
    assert results[0]["numpy_peak_mb"] is None and results[0]["memory_ratio"] is None
    assert "peak memory unavailable" in text and "memory unavailable" in text
    assert "- tiny: time 1.00×, memory unavailable — met (time only)" in text


def test_a_peak_that_cannot_be_restarted_is_printed_as_unavailable(monkeypatch, capsys):
    monkeypatch.setattr(train_step, "restart_peak_memory", lambda: False)
    monkeypatch.setitem(CONFIGS, "tiny-twice", CONFIGS["tiny"])
    train_step.print_peak_memory("tiny-twice", "numpy", 1)
    assert capsys.readouterr().out.strip().splitlines()[-1] == "None"


def test_a_kernel_that_keeps_the_old_peak_is_not_a_measurement(monkeypatch):
    readings = {"VmHWM": 900_000, "VmRSS": 30_000}
    monkeypatch.setattr(train_step, "status_kb", readings.get)
    assert train_step.restart_peak_memory() is False


def test_memory_freed_by_another_thread_after_the_restart_is_not_a_failed_restart(monkeypatch):
    """The restarted peak is the resident size at the write; a thread that frees 10 MB before it
    is read leaves the peak above the resident size read after, not above the one read before."""
    readings = iter([100_000, 100_000, 90_000])                   # VmRSS before; VmHWM, VmRSS after
    monkeypatch.setattr(train_step, "status_kb", lambda field: next(readings))
    assert train_step.restart_peak_memory() is True


def test_a_peak_restarted_a_few_pages_above_the_resident_size_is_a_restart(monkeypatch):
    """The kernel may restart the peak from its quick sum of the per-processor page counters,
    above the exact resident size it prints by up to a batch of pages a processor, and keep it
    there while those batches stay unsettled (seen once in CI on a 2-processor AMD EPYC)."""
    readings = {"VmHWM": 100_000 + 200, "VmRSS": 100_000}
    monkeypatch.setattr(train_step, "status_kb", readings.get)
    monkeypatch.setattr(train_step.os, "cpu_count", lambda: 2)
    assert train_step.counter_slack_kb() == 2 * 32 * os.sysconf("SC_PAGE_SIZE") // 1024
    assert train_step.restart_peak_memory() is True
    readings["VmHWM"] = 100_000 + train_step.counter_slack_kb() + 1
    assert train_step.restart_peak_memory(tries=3) is False


def test_a_peak_held_up_by_another_thread_for_a_moment_restarts_on_a_later_try(monkeypatch):
    """A thread that allocates just before the write and frees just after leaves the peak above
    both readings; the restart is tried again a millisecond later."""
    held = [(100_000, 150_000, 100_000)] * 4 + [(100_000, 100_000, 100_000)]
    readings = iter(value for triple in held for value in triple)
    monkeypatch.setattr(train_step, "status_kb", lambda field: next(readings))
    assert train_step.restart_peak_memory() is True


def test_the_pretrained_benchmark_reads_an_unavailable_peak(monkeypatch):
    class Finished:
        returncode, stdout, stderr = 0, "1.5 None\n", ""
    monkeypatch.setattr(pretrained_speed.subprocess, "run", lambda *a, **k: Finished)
    assert pretrained_speed.loading("numpy", "folder") == (1.5, None)
