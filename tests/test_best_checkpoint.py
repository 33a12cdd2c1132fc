"""The best model is kept (numpy_transformer/training/checkpoint.py, loop.py, run.py): a run whose
validation loss rises keeps the weights of its lowest validation loss, bit for bit, in
checkpoint_best.npz beside the last ones; the commands use them by default and say so;
--early-stop stops at the right step; a resumed run equals the uninterrupted one, best weights
included; an old run folder still loads; the data summary suggests subwords when many
validation tokens are [UNK]."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from numpy_transformer.training.checkpoint import load_checkpoint
from numpy_transformer.training.metrics_log import read_log
from numpy_transformer.training.prepare import prepare_data, unknown_share
from numpy_transformer.training.run import Run
from numpy_transformer.training.run_folder import MANIFEST, RunFolderError
from numpy_transformer.training.settings import DataConfig
from run_helpers import assert_clear_error, assert_same_weights, run_main, tiny_configs, weights

# A high constant learning rate on 54 training pairs: the validation loss falls, then rises.
RISING = dict(steps=30, schedule="constant", lr=0.2, eval_every=5, checkpoint_every=10)
SMALL_CORPUS = dict(n_pairs=60)
TINY_FLAGS = ["--dataset", "builtin", "--tokenizer", "word", "--no-shared-vocabulary", "--n-pairs", "60", "--max-len", "32", "--d-model", "16", "--n-heads", "2", "--d-ff", "32",
              "--batch-size", "16", "--lr", "0.2", "--eval-every", "5", "--checkpoint-every", "10", "--log-every",
              "2", "--samples", "0", "--beam", "1", "--quiet"]
OLD_RUN = Path(__file__).parent / "data" / "checkpoints_0_1" / "translation"


def new_run(directory, **training):
    return Run.new(directory, *tiny_configs(training={**RISING, **training}, data=SMALL_CORPUS), report=None)


def validation_losses(directory):
    """{step: validation loss} of the run's log."""
    return {r["step"]: r["validation_loss"] for r in read_log(Path(directory) / "log.jsonl") if "validation_loss" in r}


def archive_arrays(path):
    with np.load(path) as archive:
        return {key: archive[key] for key in archive.files}


@pytest.fixture(scope="module")
def rising(tmp_path_factory):
    """(folder, best step, best loss) of a 30-step run whose validation loss rises after its
    lowest point, and the folder of the same run trained only to that step."""
    root = tmp_path_factory.mktemp("rising")
    with new_run(root / "whole") as run:
        run.train()
    losses = validation_losses(root / "whole")
    best_step = min(losses, key=losses.get)
    assert best_step < 30 and losses[30] > losses[best_step]          # the loss did rise: the test means something
    with new_run(root / "to_best", steps=best_step) as run:
        run.train()
    return root / "whole", best_step, losses[best_step], root / "to_best"


def test_the_best_checkpoint_holds_the_weights_of_the_lowest_validation_loss_bit_for_bit(rising):
    whole, best_step, best_loss, to_best = rising
    best = load_checkpoint(whole, "best")
    assert best.weights == "best" and best.best == {"step": best_step, "validation_loss": best_loss}
    assert best.step == 30 and best.scored_step == best_step
    assert_same_weights(weights(best.model), weights(load_checkpoint(to_best, "last").model))
    last = load_checkpoint(whole)                                     # the default: what --resume continues
    assert last.weights == "last" and last.scored_step == 30
    assert not all(np.array_equal(a, b) for a, b in zip(weights(last.model).values(), weights(best.model).values()))
    assert (last.state["best_step"], last.state["best_loss"]) == (best_step, best_loss)


def test_the_best_checkpoint_is_listed_in_the_manifest(rising):
    manifest = json.loads((rising[0] / MANIFEST).read_text())
    assert "checkpoint_best.npz" in manifest["files"] and (rising[0] / "checkpoint_best.npz").is_file()


def test_translate_and_evaluate_use_the_best_weights_by_default_and_say_which(rising):
    whole, best_step, best_loss, to_best = rising
    sentences = ["the cat sleeps .", "the man eats bread ."]
    status, out, err = run_main(["translate", "--checkpoint", whole, "--beam", "1", *sentences])
    assert status == 0, err
    assert f"model: {whole}, best validation loss {best_loss:.3f} at step {best_step} (last: step 30)" in err
    assert out == run_main(["translate", "--checkpoint", to_best, "--weights", "last", "--beam", "1", *sentences])[1]
    status, _, err = run_main(["translate", "--checkpoint", whole, "--weights", "last", "--beam", "1", *sentences])
    assert f"model: {whole}, last weights at step 30 (best validation loss {best_loss:.3f} at step {best_step})" in err
    status, out, err = run_main(["evaluate", "--checkpoint", whole, "--beam", "1", "--samples", "2", "--quiet"])
    assert status == 0, err
    lines = out.splitlines()
    assert lines[0] == f"model: {whole}, best validation loss {best_loss:.3f} at step {best_step} (last: step 30)"
    reference = run_main(["evaluate", "--checkpoint", to_best, "--weights", "last", "--beam", "1", "--samples", "2",
                          "--quiet"])[1]
    assert lines[1:] == reference.splitlines()[1:]


def test_export_and_attention_use_the_best_weights_and_say_which(rising, tmp_path):
    from numpy_transformer.interop.export import load_torch

    whole, best_step, best_loss, _ = rising
    line = f"model: {whole}, best validation loss {best_loss:.3f} at step {best_step} (last: step 30)"
    status, _, err = run_main(["export", "--checkpoint", whole, "--to", "torch", tmp_path / "exported"])
    assert status == 0 and line in err, err
    assert_same_weights(weights(load_torch(tmp_path / "exported")), weights(load_checkpoint(whole, "best").model))
    status, _, err = run_main(["attention", "--checkpoint", whole, "the cat sleeps .", "--out", tmp_path / "maps"])
    assert status == 0 and line in err, err
    status, _, err = run_main(["attention", "--checkpoint", whole, "--weights", "last", "the cat sleeps .", "--out",
                               tmp_path / "maps"])
    assert status == 0 and f"model: {whole}, last weights at step 30" in err, err


def test_generate_uses_the_best_weights_of_a_language_model_and_says_which(tmp_path):
    status, out, err = run_main(["train", "--task", "lm", "--out", tmp_path / "lm", *TINY_FLAGS, "--steps", "10",
                                 "--layers", "1"])
    assert status == 0, err
    best = load_checkpoint(tmp_path / "lm", "best")
    status, out, err = run_main(["generate", "--checkpoint", tmp_path / "lm", "--max-new-tokens", "3", "the"])
    assert status == 0 and f"model: {tmp_path / 'lm'}, best validation loss " \
                           f"{best.best['validation_loss']:.3f} at step {best.best['step']} (last: step 10)" in err


def test_train_scores_the_best_weights_and_metrics_json_records_the_step(tmp_path):
    status, out, err = run_main(["train", "--out", tmp_path / "run", "--steps", "30", *TINY_FLAGS])
    assert status == 0, err
    losses = validation_losses(tmp_path / "run")
    best_step = min(losses, key=losses.get)
    assert best_step < 30                                              # the scored weights are not the last
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert (metrics["weights"], metrics["scored_step"], metrics["best_step"], metrics["steps"]) == \
           ("best", best_step, best_step, 30)
    assert metrics["best_validation_loss"] == losses[best_step] and metrics["stopped_early"] is False
    assert f"best validation loss {losses[best_step]:.3f} at step {best_step} (last: step 30)" in out
    evaluated = run_main(["evaluate", "--checkpoint", tmp_path / "run", "--beam", "1", "--quiet"])[1]
    assert metrics["perplexity"] == pytest.approx(float(evaluated.split("perplexity ")[-1].split()[0]), abs=1e-3)
    status, out, err = run_main(["train", "--out", tmp_path / "last", "--steps", "30", "--weights", "last",
                                 *TINY_FLAGS])
    metrics = json.loads((tmp_path / "last" / "metrics.json").read_text())
    assert (metrics["weights"], metrics["scored_step"], metrics["best_step"]) == ("last", 30, best_step)


def expected_early_stop(losses, patience):
    """The step at which a run with these validation losses ({step: loss}) stops after
    `patience` validations in a row without a lower loss (None: it never does)."""
    best, since = None, 0
    for step, loss in sorted(losses.items()):
        if best is None or loss < best:
            best, since = loss, 0
        else:
            since += 1
            if since == patience:
                return step
    return None


def test_early_stop_stops_after_n_validations_without_a_lower_loss(rising, tmp_path):
    losses = validation_losses(rising[0])
    expected = expected_early_stop(losses, 2)
    assert expected is not None and expected < 30
    with new_run(tmp_path / "stopped", early_stop=2) as run:
        result = run.train()
    assert result.stopped_early and not result.interrupted and result.step == expected
    assert load_checkpoint(tmp_path / "stopped").step == expected
    assert_same_weights(weights(load_checkpoint(tmp_path / "stopped", "best").model),
                        weights(load_checkpoint(rising[0], "best").model))
    with new_run(tmp_path / "patient", early_stop=len(losses)) as run:
        assert not run.train().stopped_early


def test_train_says_it_stopped_early_and_records_it(rising, tmp_path):
    expected = expected_early_stop(validation_losses(rising[0]), 2)
    status, out, err = run_main(["train", "--out", tmp_path / "run", "--steps", "30", "--early-stop", "2",
                                 *TINY_FLAGS])
    assert status == 0, err
    assert f"Stopped early at step {expected} of 30: 2 validations without a validation loss below" in out
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["stopped_early"] is True and metrics["steps"] == expected
    assert metrics["training"]["early_stop"] == 2


@pytest.mark.parametrize("value", ["0", "-1"])
def test_a_bad_early_stop_is_one_clear_line(tmp_path, value):
    status, _, err = run_main(["train", "--out", tmp_path / "run", "--early-stop", value, *TINY_FLAGS])
    assert_clear_error(status, err, "--early-stop must be", absent_folder=tmp_path / "run")


def interrupt():
    raise KeyboardInterrupt                       # Ctrl-C: a checkpoint of step 17


def crash():
    raise RuntimeError("killed")                  # no checkpoint at the end: the last one is step 10's


def resumed_equals_whole(tmp_path, stop, **training):
    """Train 30 steps in one go, and the same run stopped at step 17 by `stop` and resumed;
    assert they end equal: weights, best weights, and the best fields of the training states.
    Returns the resumed run's TrainingResult."""
    with new_run(tmp_path / "whole", **training) as whole:
        whole.train()

    def stop_at_17(trainer):
        if trainer.state.step == 17:
            stop()

    with new_run(tmp_path / "cut", **training) as cut:
        try:
            cut.train(stop_at_17)
        except RuntimeError:
            pass
    assert load_checkpoint(tmp_path / "cut").step == (17 if stop is interrupt else 10)
    with Run.resume(tmp_path / "cut", report=None) as resumed:
        result = resumed.train()
        assert_same_weights(weights(resumed.model), weights(whole.model))
    fields = ("step", "best_loss", "best_step", "validations_without_improvement", "validation_loss")
    for name in ("checkpoint_best.npz", "checkpoint.npz"):
        saved, expected = archive_arrays(tmp_path / "cut" / name), archive_arrays(tmp_path / "whole" / name)
        states = [json.loads(str(arrays.pop("state"))) for arrays in (saved, expected)]
        assert_same_weights(saved, expected)
        assert [{key: state.get(key) for key in fields} for state in states] == \
               [{key: states[1].get(key) for key in fields}] * 2
    return result


@pytest.mark.parametrize("stop", [interrupt, crash], ids=["ctrl-c", "crash"])
def test_a_resumed_run_equals_the_uninterrupted_one_best_weights_included(tmp_path, stop):
    resumed_equals_whole(tmp_path, stop)


def test_a_resumed_run_stops_early_where_the_uninterrupted_one_does(tmp_path):
    result = resumed_equals_whole(tmp_path, interrupt, early_stop=2)
    with new_run(tmp_path / "again", early_stop=2) as run:
        assert result.stopped_early and result.step == run.train().step


def test_an_old_run_folder_gives_its_last_weights_with_a_note(tmp_path):
    folder = shutil.copytree(OLD_RUN, tmp_path / "old")
    checkpoint = load_checkpoint(folder, "best")
    assert checkpoint.weights == "last" and checkpoint.best is None
    assert_same_weights(weights(checkpoint.model), weights(load_checkpoint(folder).model))
    status, out, err = run_main(["translate", "--checkpoint", folder, "--beam", "1", "the cat"])
    assert status == 0 and out.strip()
    assert f"model: {folder}, last weights at step {checkpoint.step} (note: no checkpoint_best.npz" in err


def test_a_damaged_best_checkpoint_is_one_clear_line_and_the_last_weights_still_load(rising, tmp_path):
    folder = shutil.copytree(rising[0], tmp_path / "copy")
    best = folder / "checkpoint_best.npz"
    best.write_bytes(best.read_bytes()[: best.stat().st_size // 2])
    status, _, err = run_main(["translate", "--checkpoint", folder, "the cat"])
    assert_clear_error(status, err, r"checkpoint_best.npz is damaged and cannot be read")
    assert run_main(["translate", "--checkpoint", folder, "--weights", "last", "the cat"])[0] == 0


def test_a_resumed_run_never_replaces_a_best_checkpoint_its_manifest_does_not_list(rising, tmp_path):
    folder = shutil.copytree(rising[0], tmp_path / "copy")
    manifest = json.loads((folder / MANIFEST).read_text())
    manifest["files"].remove("checkpoint_best.npz")                # a run of the version before
    (folder / MANIFEST).write_text(json.dumps(manifest))
    (folder / "checkpoint_best.npz").write_bytes(b"the user's own file")
    with pytest.raises(RunFolderError, match="checkpoint_best.npz is not a file of this run"):
        Run.resume(folder, {"steps": 40}, report=None)
    assert (folder / "checkpoint_best.npz").read_bytes() == b"the user's own file"


def test_a_link_at_the_best_checkpoint_is_refused_and_its_target_left_alone(rising, tmp_path):
    folder = shutil.copytree(rising[0], tmp_path / "copy")
    target = tmp_path / "elsewhere.npz"
    target.write_bytes(b"mine")
    (folder / "checkpoint_best.npz").unlink()
    (folder / "checkpoint_best.npz").symlink_to(target)
    with pytest.raises(RunFolderError, match="checkpoint_best.npz is a symbolic link"):
        Run.resume(folder, {"steps": 40}, report=None)
    assert target.read_bytes() == b"mine"


class Vocabulary:
    def __init__(self, kind):
        self.kind = kind


@pytest.mark.parametrize("kind, unknown, suggested", [("word", 31, True), ("word", 30, False), ("word", 0, False),
                                                      ("unigram", 500, False)])
def test_the_data_line_suggests_subwords_above_3_percent_unknown_words(kind, unknown, suggested):
    line = unknown_share(Vocabulary(kind), unknown, 1000, "validation en tokens")
    assert line.startswith(f"{unknown / 1000:.1%} of the validation en tokens are [UNK]")
    assert ("--tokenizer unigram --vocab-size 8000" in line) == suggested


def test_the_summary_of_a_small_corpus_suggests_subwords():
    summary = prepare_data(DataConfig(dataset="builtin", n_pairs=120, max_len=32), progress=False).summary
    assert "are [UNK] (over 3%: a subword vocabulary" in summary[-1]
    assert "--tokenizer unigram --vocab-size 8000" in summary[-1]


def test_load_checkpoint_names_the_weights_it_takes(rising):
    with pytest.raises(ValueError, match="weights must be best or last, got 'first'"):
        load_checkpoint(rising[0], "first")
