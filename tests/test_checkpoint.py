"""Checkpoints (numpy_transformer/training/checkpoint.py) and resuming (training/run.py): a round trip
keeps everything, a resumed run is the run that never stopped, a crash during a write leaves
the previous checkpoint whole, and a damaged checkpoint gives one clear CheckpointError."""
import json
import shutil

import numpy as np
import pytest

import numpy_transformer.training.checkpoint as checkpoint_module
import numpy_transformer.training.atomic_files as files_module
from numpy_transformer.training.checkpoint import CheckpointError, load_checkpoint
from numpy_transformer.training.atomic_files import atomic_write_text
from numpy_transformer.training.run import Run
from numpy_transformer.training.metrics_log import read_log
from run_helpers import assert_same_weights, tiny_configs, weights


def new_run(directory, **training):
    return Run.new(directory, *tiny_configs(training=training), report=None)


@pytest.fixture(scope="module")
def saved_run(tmp_path_factory):
    """A tiny run trained for 10 steps, its checkpoint in its folder."""
    run = new_run(tmp_path_factory.mktemp("saved") / "run", steps=10)
    run.train()
    return run


def test_a_checkpoint_round_trip_keeps_weights_optimizer_configs_tokenizers_and_state(saved_run):
    loaded = load_checkpoint(saved_run.directory)
    assert_same_weights(weights(loaded.model), weights(saved_run.model))
    saved_state = saved_run.optimizer.state_dict()
    assert loaded.optimizer_state.keys() == saved_state.keys()
    for key, value in saved_state.items():
        np.testing.assert_array_equal(loaded.optimizer_state[key], value, err_msg=key)
    assert loaded.model_config == saved_run.configs["model"]
    assert loaded.training_config == saved_run.configs["training"]
    assert loaded.data_config == saved_run.configs["data"]
    for loaded_tokenizer, tokenizer in ((loaded.src_tokenizer, saved_run.data.src_tokenizer),
                                        (loaded.tgt_tokenizer, saved_run.data.tgt_tokenizer)):
        assert loaded_tokenizer.tokenizer.get_vocab() == tokenizer.tokenizer.get_vocab()
        assert loaded_tokenizer.language == tokenizer.language
    assert loaded.state == saved_run.trainer.checkpoint_state()
    assert loaded.step == 10
    assert loaded.model.parameters()[0].dtype == np.float32


@pytest.mark.parametrize("n", [7, 10])   # at an epoch's end (7 batches an epoch) and within one
def test_n_steps_then_resume_then_n_steps_equals_2n_steps(tmp_path, n):
    whole = new_run(tmp_path / "whole", steps=2 * n)
    whole.train()
    first = new_run(tmp_path / "split", steps=n)
    first.train()
    second = Run.resume(tmp_path / "split", {"steps": 2 * n}, report=None)
    assert second.trainer.state.step == n
    second.train()
    assert first.trainer.losses + second.trainer.losses == whole.trainer.losses
    assert_same_weights(weights(second.model), weights(whole.model))
    assert second.optimizer.step_count == whole.optimizer.step_count == 2 * n
    for key, value in whole.optimizer.state_dict().items():
        np.testing.assert_array_equal(second.optimizer.state_dict()[key], value, err_msg=key)


def test_an_interrupted_run_resumes_to_the_weights_of_an_uninterrupted_one(tmp_path):
    whole = new_run(tmp_path / "whole", steps=12)
    whole.train()

    def interrupt(trainer):
        if trainer.state.step == 4:
            raise KeyboardInterrupt

    interrupted = new_run(tmp_path / "cut", steps=12)
    result = interrupted.train(interrupt)
    assert result.interrupted and result.saved and result.step == 4
    assert load_checkpoint(tmp_path / "cut").step == 4
    resumed = Run.resume(tmp_path / "cut", report=None)
    resumed.train()
    assert interrupted.trainer.losses + resumed.trainer.losses == whole.trainer.losses
    assert_same_weights(weights(resumed.model), weights(whole.model))


def test_an_interrupt_inside_a_step_saves_the_last_completed_step(tmp_path):
    run = new_run(tmp_path / "run", steps=12)
    original, calls = run.trainer.step_on_batch, []

    def interrupted_step(batch):
        calls.append(batch)
        if len(calls) == 6:          # during the forward pass of step 6
            raise KeyboardInterrupt
        return original(batch)

    run.trainer.step_on_batch = interrupted_step
    result = run.train()
    assert result.interrupted and result.saved and result.step == 5
    whole = new_run(tmp_path / "whole", steps=12)
    whole.train()
    resumed = Run.resume(tmp_path / "run", report=None)
    resumed.train()
    assert_same_weights(weights(resumed.model), weights(whole.model))


def test_resuming_drops_the_log_lines_written_after_the_checkpoint(tmp_path):
    early = new_run(tmp_path / "run", steps=8)
    early.train()
    early.log.write({"step": 9, "loss": 1.0})       # logged, then a crash before the next checkpoint
    resumed = Run.resume(tmp_path / "run", {"steps": 10}, report=None)
    assert max(r["step"] for r in read_log(resumed.log.path)) == 8
    resumed.train()
    assert [r["step"] for r in read_log(resumed.log.path) if "loss" in r][-2:] == [8, 10]


def test_resuming_refuses_to_change_the_settings_of_the_run(saved_run):
    with pytest.raises(ValueError, match="cannot change batch_size"):
        Run.resume(saved_run.directory, {"batch_size": 4}, report=None)


def test_a_crash_while_writing_a_checkpoint_leaves_the_previous_one_whole(tmp_path, monkeypatch):
    run = new_run(tmp_path / "run", steps=3)
    run.train()
    before = weights(load_checkpoint(run.directory).model)
    run.trainer.state.step += 1                       # something new to save
    run.model.parameters()[0].data += 1.0

    def crash_after_half(file, **arrays):
        file.write(b"PK\x03\x04 half an archive")
        raise OSError("disk full")

    monkeypatch.setattr(checkpoint_module.np, "savez", crash_after_half)
    with pytest.raises(OSError, match="disk full"):
        run.save()
    loaded = load_checkpoint(run.directory)
    assert loaded.step == 3
    assert_same_weights(weights(loaded.model), before)
    assert sorted(p.name for p in run.directory.iterdir() if p.name.endswith(".tmp")) == []   # no temporary left


def test_atomic_write_replaces_the_file_only_when_the_new_one_is_complete(tmp_path, monkeypatch):
    path = tmp_path / "model.json"
    atomic_write_text(path, "old")

    def fail(*args):
        raise OSError("power cut")

    monkeypatch.setattr(files_module.os, "replace", fail)
    with pytest.raises(OSError):
        atomic_write_text(path, "new")
    assert path.read_text() == "old"
    assert list(tmp_path.iterdir()) == [path]


def copy_of(run, tmp_path):
    target = tmp_path / "copy"
    shutil.copytree(run.directory, target)
    return target


def test_a_missing_folder_or_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint at .*nowhere: the folder does not exist"):
        load_checkpoint(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="checkpoint.npz is missing"):
        load_checkpoint(tmp_path / "empty")


def test_a_truncated_archive_is_a_clear_error(saved_run, tmp_path):
    directory = copy_of(saved_run, tmp_path)
    archive = directory / "checkpoint.npz"
    archive.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    with pytest.raises(CheckpointError, match="checkpoint.npz is damaged and cannot be read"):
        load_checkpoint(directory)


@pytest.mark.parametrize("name, text, message", [
    ("model.json", '{"src_vocab_size": 10,', "model.json: not a valid model configuration"),
    ("training.json", "[1, 2]", "training.json: not a valid training configuration"),
    ("data.json", '{"pair": "english"}', "data.json: not a valid data configuration"),
    ("tokenizer_it.json", "{not json", "tokenizer_it.json: not a tokenizer file"),
])
def test_bad_json_is_a_clear_error_naming_the_file(saved_run, tmp_path, name, text, message):
    directory = copy_of(saved_run, tmp_path)
    (directory / name).write_text(text)
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(directory)


def test_a_missing_file_is_a_clear_error(saved_run, tmp_path):
    directory = copy_of(saved_run, tmp_path)
    (directory / "training.json").unlink()
    with pytest.raises(CheckpointError, match="training.json is missing"):
        load_checkpoint(directory)


def test_weights_that_do_not_fit_the_configuration_are_a_clear_error(saved_run, tmp_path):
    directory = copy_of(saved_run, tmp_path)
    config = json.loads((directory / "model.json").read_text())
    config.update(d_model=32, d_ff=64)
    (directory / "model.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="the weights do not fit the configuration in .*model.json"):
        load_checkpoint(directory)


def test_tokenizers_from_another_run_are_a_clear_error(saved_run, tmp_path):
    directory = copy_of(saved_run, tmp_path)
    config = json.loads((directory / "model.json").read_text())
    config["tgt_vocab_size"] += 1
    (directory / "model.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="tokenizer_it.json has .* words but .*tgt_vocab_size"):
        load_checkpoint(directory)
