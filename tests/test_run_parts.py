"""Parts that prove they belong together: a run folder's manifest records the run's id and the
SHA-256 of its tokenizers, model.json, data.json and of the weights' names and shapes, both
checkpoints record the run id, and every command that loads a run folder refuses one whose
parts do not match, naming the file and what to do. A run folder of an older version, which
records none, still loads (tests/test_old_checkpoints.py). `train --overwrite` refuses an
export folder, and its message suggests no command that would be refused in turn."""
import json
import shutil

import pytest

from numpy_transformer.training.checkpoint import CheckpointError, load_checkpoint
from numpy_transformer.training.run_folder import MANIFEST
from run_helpers import run_main

TINY = ["--dataset", "builtin", "--n-pairs", "200", "--max-len", "32", "--d-model", "16", "--n-heads", "2",
        "--d-ff", "32", "--batch-size", "16", "--steps", "4", "--eval-every", "2", "--beam", "1", "--samples", "0",
        "--quiet"]
SUBWORDS = ["--tokenizer", "bpe", "--vocab-size", "280", "--no-shared-vocabulary"]


def train(folder, *flags):
    status, _, err = run_main(["train", "--out", folder, *TINY, *flags])
    assert status == 0, err
    return folder


@pytest.fixture(scope="module")
def translation_runs(tmp_path_factory):
    """Two translation runs with subword vocabularies of the same size, on different splits."""
    root = tmp_path_factory.mktemp("runs")
    return (train(root / "a", *SUBWORDS, "--data-seed", "1"),
            train(root / "b", *SUBWORDS, "--data-seed", "2", "--seed", "7"))


def one_error(err):
    lines = [line for line in err.strip().splitlines() if "error" in line]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_the_manifest_records_the_run_and_the_sha256_of_its_parts(translation_runs):
    folder, _ = translation_runs
    record = json.loads((folder / MANIFEST).read_text())
    assert len(record["run"]) == 32
    assert set(record["parts"]) == {"model.json", "data.json", "tokenizer_en.json", "tokenizer_it.json", "weights"}
    assert all(len(digest) == 64 for digest in record["parts"].values())
    checkpoint = load_checkpoint(folder, "best")
    assert "run" not in checkpoint.state and "run" not in checkpoint.best


COMMANDS = {
    "translate": lambda folder, out: ["translate", "--checkpoint", folder, "the cat sleeps ."],
    "evaluate": lambda folder, out: ["evaluate", "--checkpoint", folder, "--beam", "1", "--samples", "0", "--quiet"],
    "attention": lambda folder, out: ["attention", "--checkpoint", folder, "the cat sleeps .", "--out", out],
    "export": lambda folder, out: ["export", "--checkpoint", folder, "--to", "torch", out],
    "resume": lambda folder, out: ["train", "--out", folder, "--resume", "--steps", "6", "--quiet"],
}


@pytest.mark.parametrize("command", COMMANDS)
def test_a_tokenizer_from_another_run_of_the_same_vocabulary_size_is_refused(translation_runs, tmp_path, command):
    a, b = translation_runs
    folder = shutil.copytree(a, tmp_path / "mixed")
    assert load_checkpoint(a).src_tokenizer.vocab_size == load_checkpoint(b).src_tokenizer.vocab_size
    assert (a / "tokenizer_en.json").read_bytes() != (b / "tokenizer_en.json").read_bytes()
    shutil.copy(b / "tokenizer_en.json", folder / "tokenizer_en.json")
    before = sorted(p.name for p in folder.iterdir())
    status, _, err = run_main(COMMANDS[command](folder, tmp_path / "out"))
    line = one_error(err)
    assert status == 1 and f"{folder / 'tokenizer_en.json'} does not belong to the run" in line
    assert "restore this run's own tokenizer_en.json" in line
    assert sorted(p.name for p in folder.iterdir()) == before and not (tmp_path / "out").exists()


@pytest.mark.parametrize("archive, weights", [("checkpoint.npz", "last"), ("checkpoint_best.npz", "best")])
def test_a_checkpoint_from_another_run_with_the_same_shapes_is_refused(translation_runs, tmp_path, archive, weights):
    a, _ = translation_runs
    other = train(tmp_path / "other", *SUBWORDS, "--data-seed", "1", "--seed", "3")   # same tokenizers, shapes
    folder = shutil.copytree(a, tmp_path / "mixed")
    shutil.copy(other / archive, folder / archive)
    with pytest.raises(CheckpointError, match=f"{archive} comes from another run than the files beside it"):
        load_checkpoint(folder, weights)
    status, _, err = run_main(["evaluate", "--checkpoint", folder, "--weights", weights, "--beam", "1"])
    assert status == 1 and f"restore this run's own {archive}" in one_error(err)


def test_a_changed_model_json_or_a_missing_part_or_manifest_is_refused(translation_runs, tmp_path):
    a, _ = translation_runs
    folder = shutil.copytree(a, tmp_path / "changed")
    (folder / "model.json").write_text((a / "model.json").read_text().replace('"dropout": 0.1', '"dropout": 0.2'))
    assert (folder / "model.json").read_text() != (a / "model.json").read_text()
    with pytest.raises(CheckpointError, match="model.json does not belong to the run"):
        load_checkpoint(folder)
    folder = shutil.copytree(a, tmp_path / "no-manifest")
    (folder / MANIFEST).unlink()
    with pytest.raises(CheckpointError, match="does not record \\(the manifest is missing or replaced\\)"):
        load_checkpoint(folder)
    folder = shutil.copytree(a, tmp_path / "bad-manifest")
    record = json.loads((folder / MANIFEST).read_text())
    (folder / MANIFEST).write_text(json.dumps({**record, "parts": {"../../etc/passwd": "0" * 64}}))
    with pytest.raises(CheckpointError, match="its 'parts' are not file names with their SHA-256"):
        load_checkpoint(folder)


@pytest.mark.parametrize("task, command", [("lm", ["generate", "--max-new-tokens", "3", "the"]),
                                           ("mlm", ["fill-mask", "the [MASK] ."])])
def test_generate_and_fill_mask_refuse_parts_of_another_run(tmp_path, task, command):
    first = train(tmp_path / "first", "--task", task, "--tokenizer", "word")
    second = train(tmp_path / "second", "--task", task, "--tokenizer", "word", "--seed", "5")
    status, _, err = run_main([command[0], "--checkpoint", first, *command[1:]])
    assert status == 0, err
    shutil.copy(second / "checkpoint.npz", first / "checkpoint.npz")
    shutil.copy(second / "checkpoint_best.npz", first / "checkpoint_best.npz")
    status, _, err = run_main([command[0], "--checkpoint", first, *command[1:]])
    assert status == 1 and "comes from another run than the files beside it" in one_error(err)


@pytest.mark.parametrize("to, task", [("torch", "translation"), ("hf", "lm")])
def test_train_overwrite_refuses_an_export_folder_and_suggests_no_refused_command(tmp_path, to, task):
    run = train(tmp_path / "run", "--task", task, "--tokenizer", "word")
    exported = tmp_path / "exported"
    assert run_main(["export", "--checkpoint", run, "--to", to, exported])[0] == 0
    before = {p.name: p.read_bytes() for p in exported.iterdir()}
    for flags in ([], ["--overwrite"]):
        status, _, err = run_main(["train", "--out", exported, "--task", task, "--tokenizer", "word", *TINY, *flags])
        line = one_error(err)
        assert status == 1 and "two models in one folder" in line and "choose another folder with --out" in line
        assert "--overwrite" not in line and "--resume" not in line
    assert {p.name: p.read_bytes() for p in exported.iterdir()} == before
