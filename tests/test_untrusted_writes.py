"""Every command that writes keeps the promises `train` keeps (numpy_transformer/training/output_folder.py,
atomic_files.py, run_folder.py): `export` and `attention --out` replace no file of the user's,
refuse "" and a run folder, write their folder as a whole under a lock, and an export whose
files do not belong together is refused on loading; nothing is written through a symbolic link."""
import errno
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

from numpy_transformer.config import TransformerConfig
from numpy_transformer.data.tokenizer import train_text_tokenizer
from numpy_transformer.interop import export
from numpy_transformer.interop.export import load_torch, save_gpt2, save_torch
from numpy_transformer.interop.pretrained import load_pretrained
from numpy_transformer.language_model import DecoderOnlyTransformer
from numpy_transformer.training.atomic_files import atomic_write_text
from numpy_transformer.training.metrics_log import MetricsLog
from numpy_transformer.training.output_folder import OUTPUT_MANIFEST, OutputFolder
from numpy_transformer.training.run_folder import RunFolderError
from run_helpers import assert_clear_error, assert_same_weights, run_main, weights

TINY_RUN = ["--dataset", "builtin", "--tokenizer", "word", "--no-shared-vocabulary", "--n-pairs", "120", "--max-len", "32", "--d-model", "16", "--n-heads", "2", "--d-ff", "32",
            "--batch-size", "16", "--steps", "3", "--beam", "1", "--samples", "0"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A tiny translation run's folder (copy it before changing it)."""
    directory = tmp_path_factory.mktemp("trained") / "run"
    status, _, err = run_main(["train", "--out", directory, *TINY_RUN])
    assert status == 0, err
    return directory


def decoder_only(seed):
    tokenizer = train_text_tokenizer(["the cat sat on the mat .", "a dog ."] * 3, "en", min_frequency=1)
    config = TransformerConfig.decoder_only(tokenizer.vocab_size, d_model=8, n_heads=2, d_ff=16, n_layers=1,
                                            max_len=16, pad_id=tokenizer.pad_id)
    return DecoderOnlyTransformer(config, np.random.default_rng(seed)), tokenizer


def listing(folder):
    return {path.name: path.read_bytes() for path in folder.iterdir()}


def test_export_refuses_a_folder_holding_the_users_config_json_and_keeps_it(run, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "config.json").write_text('{"my": "settings"}')
    before = listing(out)
    status, _, err = run_main(["export", "--checkpoint", run, "--to", "torch", out])
    assert_clear_error(status, err, r"mine holds files that export did not write \(config.json\)")
    model, tokenizer = decoder_only(0)
    with pytest.raises(RunFolderError, match="did not write"):
        save_gpt2(model, tokenizer, out)
    assert listing(out) == before and sorted(p.name for p in tmp_path.iterdir()) == ["mine"]


def test_evaluate_and_resume_on_an_export_folder_advise_a_command_that_works(run, tmp_path):
    """An export is not a run: evaluate and --resume say so, and do not advise `train --out EXPORT`,
    which would be refused (the folder holds files a run did not write)."""
    exported = tmp_path / "exported"
    status, _, err = run_main(["export", "--checkpoint", run, "--to", "torch", exported])
    assert status == 0, err
    for command in (["evaluate", "--checkpoint", exported], ["train", "--out", exported, "--resume"]):
        status, _, err = run_main(command)
        assert_clear_error(status, err, rf"no checkpoint in {exported}: it holds the output of export \(model\.json, "
                                        rf"model\.safetensors\), not a training run.* choose a new folder with --out$")
        assert "train --out" not in err.replace("the folder train --out wrote", "")
    status, _, err = run_main(["train", "--out", exported, *TINY_RUN])
    assert_clear_error(status, err, r"an export or a Hugging Face model is there")     # the advice not given


def test_an_empty_out_is_refused_and_the_current_folder_left_alone(run, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for command in (["export", "--checkpoint", run, "--to", "torch", ""],
                    ["attention", "--checkpoint", run, "the cat sleeps .", "--out", ""]):
        status, _, err = run_main(command)
        assert_clear_error(status, err, "empty path: write . for the current folder")
    assert list(tmp_path.iterdir()) == []


def test_a_run_folder_or_a_folder_inside_one_is_refused(run, tmp_path):
    copy = shutil.copytree(run, tmp_path / "run")
    before = listing(copy)
    for out, verb in ((copy, "is"), (copy / "exported", "is inside")):
        status, _, err = run_main(["export", "--checkpoint", copy, "--to", "torch", out])
        assert_clear_error(status, err, f"{verb} the run folder .*run: writing there would shadow the run")
    status, _, err = run_main(["attention", "--checkpoint", copy, "the cat sleeps .", "--out", copy])
    assert_clear_error(status, err, "shadow the run")
    assert listing(copy) == before


def test_a_failed_export_over_an_earlier_one_leaves_the_earlier_one_whole(tmp_path, monkeypatch):
    first, _ = decoder_only(0)
    save_torch(first, tmp_path / "exported")
    before = listing(tmp_path / "exported")

    def disk_full(path, text):                               # the weights are written, the config is not
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(export, "atomic_write_text", disk_full)
    with pytest.raises(OSError):
        save_torch(decoder_only(1)[0], tmp_path / "exported")
    assert listing(tmp_path / "exported") == before
    assert [p.name for p in tmp_path.iterdir()] == ["exported"]          # no partial folder, no lock left
    assert_same_weights(weights(load_torch(tmp_path / "exported")), weights(first))


def test_an_export_replaces_its_own_earlier_export_as_a_whole(tmp_path):
    first, second = decoder_only(0)[0], decoder_only(1)[0]
    save_torch(first, tmp_path / "exported")
    save_torch(second, tmp_path / "exported")
    assert_same_weights(weights(load_torch(tmp_path / "exported")), weights(second))
    assert sorted(p.name for p in (tmp_path / "exported").iterdir()) == [OUTPUT_MANIFEST, "model.json",
                                                                         "model.safetensors"]
    assert [p.name for p in tmp_path.iterdir()] == ["exported"]


def test_a_second_export_into_a_folder_being_written_is_refused_and_a_killed_one_leaves_no_trace(tmp_path):
    """Another process holds the export's lock while it writes: a second export is refused with
    its process id; once it is killed (kill -9, mid-write), the next export takes the stale lock
    over and removes the killed one's partial folder."""
    ready = tmp_path / "ready"
    writer = subprocess.Popen([sys.executable, "-c", (
        "import pathlib, sys, time\n"
        "from numpy_transformer.training.output_folder import OutputFolder\n"
        "with OutputFolder(sys.argv[1], 'export') as staging:\n"
        "    (staging / 'model.safetensors').write_bytes(b'half')\n"
        "    pathlib.Path(sys.argv[2]).touch()\n"
        "    time.sleep(60)\n"), str(tmp_path / "exported"), str(ready)])
    try:
        while not ready.exists():
            assert writer.poll() is None, "the writing process ended early"
            time.sleep(0.05)
        partial = [p.name for p in tmp_path.iterdir() if p.name.startswith(".exported.partial-")]
        assert len(partial) == 1
        with pytest.raises(RunFolderError, match=rf"being written by another numpy-transformer command \(process "
                                                 rf"{writer.pid} "):
            save_torch(decoder_only(0)[0], tmp_path / "exported")
    finally:
        writer.kill()
        writer.wait()
    model = decoder_only(1)[0]
    save_torch(model, tmp_path / "exported")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exported", "ready"]
    assert_same_weights(weights(load_torch(tmp_path / "exported")), weights(model))


def test_an_export_whose_files_come_from_two_exports_is_refused_on_loading(tmp_path):
    for name, seed in (("a", 0), ("b", 1)):
        save_torch(decoder_only(seed)[0], tmp_path / name)
    shutil.copy(tmp_path / "b" / "model.safetensors", tmp_path / "a" / "model.safetensors")
    with pytest.raises(ValueError, match=r"a/model.safetensors does not belong with the other files of .*a: its "
                                         r"SHA-256 differs"):
        load_torch(tmp_path / "a")


def test_a_gpt2_export_with_another_exports_weights_is_refused_by_the_hugging_face_loader(tmp_path):
    for name, seed in (("a", 0), ("b", 1)):
        save_gpt2(*decoder_only(seed), tmp_path / name)
    load_pretrained(str(tmp_path / "a"))
    shutil.copy(tmp_path / "b" / "model.safetensors", tmp_path / "a" / "model.safetensors")
    status, _, err = run_main(["generate", "--checkpoint", tmp_path / "a", "the cat"])
    assert_clear_error(status, err, r"model.safetensors does not belong with the other files")
    (tmp_path / "b" / "tokenizer.json").unlink()
    status, _, err = run_main(["generate", "--checkpoint", tmp_path / "b", "the cat"])
    assert_clear_error(status, err, r"b/tokenizer.json is missing, though .* lists it")


@pytest.mark.parametrize("name", ["log.jsonl", "metrics.json", "checkpoint.npz"])
def test_a_link_in_a_run_folder_is_refused_and_what_it_points_to_untouched(run, tmp_path, name):
    copy = shutil.copytree(run, tmp_path / "run")
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's own file\n")
    if name == "checkpoint.npz":                      # a link to a real checkpoint: resume would read it
        shutil.move(copy / name, tmp_path / "elsewhere.npz")
        victim = tmp_path / "elsewhere.npz"
    before = victim.read_bytes()
    (copy / name).unlink(missing_ok=True)
    (copy / name).symlink_to(victim)
    for arguments in ([*TINY_RUN, "--overwrite"], ["--resume", "--steps", "5"]):
        status, _, err = run_main(["train", "--out", copy, *arguments])
        assert_clear_error(status, err, rf"run/{name} is a symbolic link: a run never writes through a link")
        assert victim.read_bytes() == before and (copy / name).is_symlink()


def test_the_log_and_atomic_writes_refuse_a_link_and_leave_its_target_alone(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("mine\n")
    for name in ("log.jsonl", ".figure.png.tmp"):
        (tmp_path / name).symlink_to(victim)
    with pytest.raises(ValueError, match=r"log.jsonl is a symbolic link \(to .*victim.txt\): numpy-transformer never "
                                         r"writes through a link"):
        MetricsLog(tmp_path / "log.jsonl").write({"step": 1})
    with pytest.raises(ValueError, match="log.jsonl is a symbolic link"):
        atomic_write_text(tmp_path / "log.jsonl", "replaced")
    with pytest.raises(ValueError, match=r".figure.png.tmp is a symbolic link"):
        atomic_write_text(tmp_path / "figure.png", "drawn")             # through its temporary
    assert victim.read_text() == "mine\n" and (tmp_path / "log.jsonl").is_symlink()


def test_attention_out_keeps_the_users_files_and_replaces_only_its_own_output(run, tmp_path):
    out = tmp_path / "figures"
    out.mkdir()
    (out / "encoder_self_attn.png").write_bytes(b"my own figure")
    (out / "notes.txt").write_text("notes")
    before = listing(out)
    sentence = ["attention", "--checkpoint", run, "the cat sleeps .", "--out"]
    status, _, err = run_main([*sentence, out])
    assert_clear_error(status, err, r"figures holds files that attention did not write \(encoder_self_attn.png, "
                                    r"notes.txt\)")
    assert listing(out) == before
    for _ in range(2):                                   # its own earlier output is replaced as a whole
        status, printed, err = run_main([*sentence, tmp_path / "maps"])
        assert status == 0, err
    assert f"wrote {tmp_path / 'maps' / 'encoder_self_attn.png'}" in printed
    status, _, err = run_main(["export", "--checkpoint", run, "--to", "torch", tmp_path / "maps"])
    assert_clear_error(status, err, "maps holds files that export did not write")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["figures", "maps"]


def test_a_crash_between_the_two_renames_leaves_the_earlier_export_whole_aside_and_the_next_removes_it(tmp_path,
                                                                                                       monkeypatch):
    from numpy_transformer.training import output_folder

    first = decoder_only(0)[0]
    save_torch(first, tmp_path / "exported")

    def killed(source, destination):
        raise OSError(errno.EIO, "killed", str(source))

    monkeypatch.setattr(output_folder.os, "rename", killed)
    with pytest.raises(OSError):
        save_torch(decoder_only(1)[0], tmp_path / "exported")
    monkeypatch.undo()
    (aside,) = tmp_path.iterdir()
    assert aside.name.startswith(".exported.replaced-")
    assert_same_weights(weights(load_torch(aside)), weights(first))
    (aside / "notes.txt").write_text("put there by the user")
    save_torch(decoder_only(2)[0], tmp_path / "exported")
    assert sorted(p.name for p in tmp_path.iterdir()) == [aside.name, "exported"]
    assert [p.name for p in aside.iterdir()] == ["notes.txt"]          # the user's file stays
