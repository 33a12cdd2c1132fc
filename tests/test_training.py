"""The training loop (numpy_transformer/training/: loop.py, presets.py, run.py): it
learns, it is a function of its seed, it validates with dropout off, and it stops cleanly."""
import copy
import dataclasses
import gc
import json
import math
import re
import os
import re
import signal

import numpy as np
import pytest

from autograd import is_grad_enabled
from autograd.engine_room.blocks import BLOCK
from autograd.engine_room.fused_adam import SharedUpdates
from autograd.optim import SGD, Adam
from numpy_transformer.data import WordTokenizer, encode_pairs, load_dataset_splits
from numpy_transformer.training.evaluation import mean_cross_entropy
from numpy_transformer.training import cores, loop
from numpy_transformer.training.run import Run
from numpy_transformer.model import Transformer
from numpy_transformer.training.presets import PRESETS
from numpy_transformer.training.settings import model_config, resolve
from numpy_transformer.training.loop import Trainer, TrainingDiverged, make_optimizer, run_generators, train_step
from numpy_transformer.training.loss import TRANSLATION
from numpy_transformer.training.settings import DataConfig, TrainingConfig
from numpy_transformer.training.metrics_log import read_log
from run_helpers import assert_same_weights, tiny_configs, weights, write_opus_jsonl, written_pairs


def test_64_pairs_of_an_opus_books_file_are_overfit_to_a_training_loss_below_0_1(tmp_path):
    path = write_opus_jsonl(tmp_path / "books.jsonl", written_pairs(64))
    splits = load_dataset_splits(str(path), cache_dir=tmp_path / "cache")
    pairs = splits.train + splits.validation + splits.test
    assert len(pairs) == 64
    src = WordTokenizer.train([pair.src for pair in pairs], "en", min_frequency=1)
    tgt = WordTokenizer.train([pair.tgt for pair in pairs], "it", min_frequency=1)
    encoded = encode_pairs(pairs, src, tgt, max_len=64)
    config = model_config(dict(d_model=32, n_heads=2, d_ff=64, dropout=0.0, n_encoder_layers=1, n_decoder_layers=1),
                          (src.vocab_size, tgt.vocab_size), src.pad_id, 64)
    training = TrainingConfig(batch_size=64, steps=80, schedule="constant", lr=1e-2, label_smoothing=0.0)
    model_rng, data_rng = run_generators(0)
    model = Transformer(config, model_rng)
    trainer = Trainer(model, make_optimizer(model, training), encoded, training, data_rng, report=None)
    trainer.train()
    assert trainer.losses[0] > 5.0                   # about log(vocabulary) at the start
    assert trainer.losses[-1] < 0.1
    assert mean_cross_entropy(model, encoded) < 0.1  # and in eval mode, on all 64 pairs


def run_and_batch(tmp_path):
    """A tiny run and the first 16 of its training pairs as a batch."""
    run = Run.new(tmp_path / "run", *tiny_configs(), report=None)
    return run, TRANSLATION.batch(run.data.train, np.arange(16), ("train", 0))


def test_train_step_moves_the_weights_by_the_clipped_gradient(tmp_path):
    run, batch = run_and_batch(tmp_path)
    before = weights(run.model)
    loss, norm = train_step(run.model, batch, TRANSLATION.loss, SGD(run.model.parameters(), lr=1.0), clip_norm=0.01)
    after = weights(run.model)
    change = math.sqrt(sum(np.sum((before[name].astype(np.float64) - after[name]) ** 2) for name in before))
    assert loss > 0 and norm > 0.01                 # the gradient was longer than clip_norm ...
    assert change == pytest.approx(0.01, rel=1e-3)  # ... and θ moved by lr · clip_norm


def test_train_step_skips_the_update_when_before_update_says_no(tmp_path):
    run, batch = run_and_batch(tmp_path)
    before, seen = weights(run.model), []
    optimizer = SGD(run.model.parameters(), lr=1.0)
    result = train_step(run.model, batch, TRANSLATION.loss, optimizer, 1.0, lambda *step: seen.append(step) or False)
    assert seen == [result] and optimizer.step_count == 0
    assert_same_weights(weights(run.model), before)


def test_the_trainers_step_is_train_step_with_the_runs_objective_optimizer_and_clip(tmp_path):
    run, batch = run_and_batch(tmp_path)
    config = run.configs["training"]
    twin = copy.deepcopy(run.model)                # the same weights and dropout generator
    expected = train_step(twin, batch, lambda model, batch: TRANSLATION.loss(model, batch, config.label_smoothing),
                          make_optimizer(twin, config), config.clip_norm)
    assert run.trainer.step_on_batch(batch) == expected
    assert_same_weights(weights(run.model), weights(twin))


@pytest.mark.parametrize("threads", [1, 2])
def test_a_training_step_leaves_nothing_for_the_cycle_collector(tmp_path, monkeypatch, threads):
    """A step frees its graph, activations and gradients by reference counting alone: with the
    cycle collector off, steps after the first leave no unreachable objects. A cycle through a
    step's arrays would keep a step's gradients (and more) alive until the collector happens to
    run, several steps later: memory a gradient set higher per step, and pages faulted in anew.
    The model has a weight larger than the optimizer's block (d_ff 4,100: 65,600 entries; the
    block is fixed at the default, not measured). Only cycles through the project's functions
    and objects count: an earlier test's figures, say, may be let go by one of its threads while
    these steps run."""
    monkeypatch.setattr(cores, "usable_cores", lambda: 2)
    monkeypatch.setattr(loop, "choose_update_block", lambda largest: BLOCK)
    run = Run.new(tmp_path / "run", *tiny_configs(model={"d_ff": 4100}), report=None, threads=threads, split="blas")
    assert max(p.data.size for p in run.model.parameters()) > BLOCK
    batch = TRANSLATION.batch(run.data.train, np.arange(16), ("train", 0))
    run.trainer.step_on_batch(batch)                         # what a first step builds once (caches, pools)
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)                             # what is found stays in gc.garbage, to be named
    try:
        for _ in range(3):
            run.trainer.step_on_batch(batch)
        gc.collect()
        ours = sorted({_module_of(o) + "." + getattr(o, "__qualname__", type(o).__qualname__)
                       for o in gc.garbage if _module_of(o).split(".")[0] in ("autograd", "numpy_transformer")})
        assert not ours, f"reference cycles through the project's objects: {ours[:20]}"
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if enabled:
            gc.enable()


def _module_of(thing):
    """The module that defines a function, or the class of any other object."""
    defined = thing if callable(thing) and not isinstance(thing, type) else type(thing)
    return getattr(defined, "__module__", None) or ""


def train_tiny(tmp_path, name="run", seed=0, steps=10, callback=None, **training):
    run = Run.new(tmp_path / name, *tiny_configs(training={"seed": seed, "steps": steps, **training}), report=None)
    result = run.train(callback)
    return run, result


def test_the_same_seed_gives_the_same_losses_step_for_step(tmp_path):
    first, _ = train_tiny(tmp_path, "a")
    second, _ = train_tiny(tmp_path, "b")
    other, _ = train_tiny(tmp_path, "c", seed=1)
    assert len(first.trainer.losses) == 10
    assert first.trainer.losses == second.trainer.losses
    assert first.trainer.losses != other.trainer.losses


def test_two_optimizer_threads_in_one_process_train_the_same_run_as_one(tmp_path, monkeypatch):
    """With BLAS's threads (a wide model's way, training/parallel.py) a second thread changes
    nothing: the update is the same bit for bit. (Split between processes, the run follows
    the one-process run up to rounding: tests/test_parallel.py.)"""
    monkeypatch.setattr(cores, "usable_cores", lambda: 2)         # two threads take turns on one core
    one, _ = train_tiny(tmp_path, "one")
    two = Run.new(tmp_path / "two", *tiny_configs(training={"seed": 0, "steps": 10}), report=None, threads=2,
                  split="blas")
    two.train()
    assert isinstance(one.optimizer, Adam) and (type(two.optimizer), two.optimizer.threads) == (SharedUpdates, 2)
    assert two.trainer.parallel is None
    assert two.trainer.losses == one.trainer.losses


def test_the_loss_falls_and_the_log_has_training_and_validation_lines(tmp_path):
    run, result = train_tiny(tmp_path, steps=30, checkpoint_every=10)
    records = read_log(run.directory / "log.jsonl")
    training = [r for r in records if "loss" in r]
    validation = [r for r in records if "validation_loss" in r]
    assert [r["step"] for r in training] == list(range(2, 31, 2))
    assert [r["step"] for r in validation] == [5, 10, 15, 20, 25, 30]
    assert training[-1]["loss"] < training[0]["loss"]
    assert {"epoch", "lr", "grad_norm", "tokens_per_second", "train_seconds"} <= training[0].keys()
    assert validation[-1]["validation_perplexity"] == pytest.approx(math.exp(validation[-1]["validation_loss"]))
    assert result.validation_loss == validation[-1]["validation_loss"]
    assert (run.directory / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_validation_runs_in_eval_mode_without_gradients_and_training_resumes_in_train_mode(tmp_path):
    run = Run.new(tmp_path / "run", *tiny_configs(training={"steps": 5, "eval_every": 5}), report=None)
    model, seen = run.model, []
    forward = model.forward

    def spy(src_ids, tgt_ids):
        seen.append((model.training, model.encoder.layers[0].dropout.training, is_grad_enabled(), len(src_ids)))
        return forward(src_ids, tgt_ids)

    model.forward = spy
    run.train()
    training_steps = [s for s in seen if s[3] == 16][:5]
    validation = seen[5:]
    assert training_steps and all(s[:3] == (True, True, True) for s in training_steps)
    assert validation and all(s[:3] == (False, False, False) for s in validation)
    assert model.training and model.encoder.layers[0].dropout.training
    first = run.trainer.validation_loss
    assert mean_cross_entropy(model, run.data.validation, 16) == first   # dropout off: the same number again


def test_epochs_set_the_number_of_steps(tmp_path):
    run = Run.new(tmp_path / "run", *tiny_configs(training={"steps": None, "epochs": 2}), report=None)
    assert run.trainer.batches_per_epoch == 7
    assert run.trainer.total_steps == 14
    result = run.train()
    assert result.step == 14 and run.trainer.state.epoch == 2 and run.trainer.state.batch_in_epoch == 0


def test_the_schedules_give_the_learning_rates_they_promise():
    constant = TrainingConfig(schedule="constant", lr=1e-4)
    assert constant.learning_rate(512) == 1e-4
    warmup = TrainingConfig(schedule="warmup", warmup_steps=400, lr_factor=2.0).learning_rate(128)
    assert warmup(400) == pytest.approx(2.0 * (128 * 400) ** -0.5)
    assert warmup(200) == pytest.approx(warmup(400) / 2)
    assert warmup(1600) == pytest.approx(warmup(400) / 2)


def test_ctrl_c_stops_after_the_step_and_saves_a_checkpoint(tmp_path):
    def press_ctrl_c(trainer):
        if trainer.state.step == 3:
            os.kill(os.getpid(), signal.SIGINT)

    run, result = train_tiny(tmp_path, callback=press_ctrl_c)
    assert result.interrupted and result.saved and result.step == 3
    from numpy_transformer.training.checkpoint import load_checkpoint
    assert load_checkpoint(run.directory).step == 3
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler   # the handler is put back


def test_a_diverging_run_stops_with_a_message_naming_the_learning_rate(tmp_path):
    run = Run.new(tmp_path / "run", *tiny_configs(), report=None)
    run.model.decoder.embedding.weight.data[:] = np.inf
    with pytest.raises(TrainingDiverged, match="learning rate"):
        with np.errstate(invalid="ignore", over="ignore"):
            run.train()


@pytest.mark.parametrize("fields, message", [
    (dict(batch_size=0), "batch_size must be a positive integer"),
    (dict(steps=None), "either steps or epochs"),
    (dict(steps=10, epochs=2), "either steps or epochs"),
    (dict(schedule="cosine"), "schedule must be one of"),
    (dict(lr=-1.0), r"lr must be a number in \(0, 1\]"),
    (dict(betas=(0.9, 1.5)), "betas must be a pair"),
    (dict(label_smoothing=1.0), "label_smoothing"),
    (dict(precision="float16"), "precision must be one of"),
])
def test_a_bad_training_config_names_the_field(fields, message):
    with pytest.raises(ValueError, match=message):
        TrainingConfig(**fields)


@pytest.mark.parametrize("fields, message", [
    (dict(pair="english-italian"), "pair must look like 'en-it'"),
    (dict(max_len=2), "max_len must be an integer ≥ 3"),
    (dict(length_policy="cut"), "length_policy must be one of"),
    (dict(subset=0), "subset must be a positive integer"),
])
def test_a_bad_data_config_names_the_field(fields, message):
    with pytest.raises(ValueError, match=message):
        DataConfig(**fields)


def test_configs_round_trip_through_json():
    training = TrainingConfig(steps=None, epochs=2.5, schedule="constant", clip_norm=None)
    data = DataConfig(dataset="opus_books", subset=100, subset_mode="random")
    assert TrainingConfig.from_json(training.to_json()) == training
    assert DataConfig.from_json(data.to_json()) == data
    with pytest.raises(ValueError, match=r"unknown keys \[.learning_rate.\]"):
        TrainingConfig.from_json('{"steps": 5, "learning_rate": 1}')


def test_the_presets_are_the_runs_they_describe():
    model, training, data = resolve("thesis-8-heads")
    assert (model["d_model"], model["n_heads"], model["n_encoder_layers"], model["n_decoder_layers"]) == (512, 8, 1, 1)
    assert (training.batch_size, training.schedule, training.lr, training.epochs) == (8, "constant", 1e-4, 20)
    assert (data.dataset, data.pair, data.max_len) == ("opus_books", "en-it", 350)
    assert resolve("thesis-1-head")[0]["n_heads"] == 1
    model, training, data = resolve("default")
    assert model["n_encoder_layers"] == model["n_decoder_layers"] == 1 and model["n_heads"] > 1
    assert (data.dataset, data.tokenizer, data.vocab_size, data.shared_vocabulary) == ("tatoeba", "unigram", 8000, True)
    base = model_config(resolve("base")[0], (37000, 37000), 1, 350)
    assert (base.n_encoder_layers, base.d_ff, base.tie_embeddings) == (6, 2048, True)
    model, training, data = resolve("small-real")
    assert (model["d_model"], model["init"], training.steps) == (128, "xavier_uniform", 10_000)
    assert (data.dataset, data.pair, data.tokenizer, data.shared_vocabulary) == ("bentrevett/multi30k", "en-de",
                                                                                "unigram", True)
    assert set(PRESETS) == {"default", "translator", "grammar", "thesis-1-head", "thesis-8-heads", "base", "small-real",
                            "lm", "mlm"}


def test_flags_override_a_preset_and_bad_values_fail_before_any_data_is_loaded():
    model, training, _ = resolve("thesis-1-head", {"n_heads": 4}, {"steps": 100, "epochs": None})
    assert model["n_heads"] == 4 and training.steps == 100 and training.lr == 1e-4
    with pytest.raises(ValueError, match="not divisible by n_heads=3"):
        resolve("default", {"n_heads": 3})
    with pytest.raises(ValueError, match="unknown preset 'huge'"):
        resolve("huge")


@pytest.mark.parametrize("preset, data, why", [
    ("default", {"n_pairs": 3000}, "size of the built-in corpus .* the dataset 'tatoeba' has its own size"),
    ("grammar", {"dataset": "opus_books", "n_pairs": 3000}, "the dataset 'opus_books' has its own size"),
    ("default", {"min_frequency": 5}, "the unigram tokenizer keeps the vocab_size likeliest pieces"),
    ("grammar", {"vocab_size": 500}, "a word-level vocabulary holds every word"),
    ("grammar", {"subset_mode": "random"}, "no subset is given"),
    ("default", {"dataset_config": "en-it"}, "the corpus 'tatoeba' is read by name"),
])
def test_a_data_field_the_run_would_ignore_is_refused_naming_it_and_why(preset, data, why):
    (field, value), = ((f, v) for f, v in data.items() if f != "dataset")
    with pytest.raises(ValueError, match=rf"^DataConfig: {field} \({value!r}\) would be ignored: .*{why}"):
        resolve(preset, data=data)


@pytest.mark.parametrize("preset, training, field, why", [
    ("thesis-1-head", {"lr_factor": 2.0}, "lr_factor", "scales the warm-up schedule, and this run's learning rate "
                                                       "is the constant lr=0.0001"),
    ("default", {"schedule": "constant", "lr": 1e-3, "lr_factor": 2.0}, "lr_factor", "the constant lr=0.001"),
    ("default", {"lr": 1e-3}, "lr", "this run follows the warm-up schedule"),
])
def test_a_training_field_of_the_schedule_the_run_does_not_follow_is_refused(preset, training, field, why):
    with pytest.raises(ValueError, match=rf"^TrainingConfig: {field} \({training[field]!r}\) would be ignored: "
                                         rf".*{re.escape(why)}"):
        resolve(preset, training=training)
    assert resolve(preset, training={name: value for name, value in training.items() if name != field})


@pytest.mark.parametrize("model, field, why", [
    ({"relative_buckets": 16}, "relative_buckets", "T5's relative position bias, and this model's positions are "
                                                   "'sinusoidal'"),
    ({"positional": "learned", "relative_max_distance": 64}, "relative_max_distance", "positions are 'learned'"),
    ({"positional": "relative", "positional_base": 500.0}, "positional_base", "positions are 'relative'"),
])
def test_a_model_field_of_positions_the_model_does_not_have_is_refused(model, field, why):
    with pytest.raises(ValueError, match=rf"^TransformerConfig: {field} \({model[field]!r}\) would be ignored: "
                                         rf".*{re.escape(why)}"):
        resolve("default", model)
    assert resolve("default", {"positional": "relative", "relative_buckets": 16})[0]["relative_buckets"] == 16


def test_a_data_field_the_run_uses_is_taken():
    assert resolve("grammar", data={"n_pairs": 3000})[2].n_pairs == 3000
    assert resolve("default", data={"tokenizer": "bpe", "min_frequency": 5})[2].min_frequency == 5
    assert resolve("grammar", data={"subset": 100, "subset_mode": "random"})[2].subset_mode == "random"


def test_a_run_folder_is_refused_when_it_already_holds_a_model(tmp_path):
    train_tiny(tmp_path, steps=2)
    with pytest.raises(ValueError, match="already holds a trained model"):
        Run.new(tmp_path / "run", *tiny_configs(), report=None)
    run = Run.new(tmp_path / "run", *tiny_configs(training={"steps": 1}), overwrite=True, report=None)
    assert not (run.directory / "checkpoint.npz").exists() and not (run.directory / "log.jsonl").exists()


def test_state_to_dict_round_trips(tmp_path):
    run, _ = train_tiny(tmp_path, steps=3)
    state = run.trainer.checkpoint_state()
    from numpy_transformer.training.loop import TrainingState
    assert TrainingState.from_dict(state).to_dict() == state
    assert dataclasses.asdict(TrainingState.from_dict(state))["step"] == 3


# What a resumed run prints, and the loss figure.

def test_after_a_resume_the_step_line_says_its_loss_is_a_mean_over_the_steps_since(tmp_path):
    lines = []
    with Run.new(tmp_path / "run", *tiny_configs(training={"steps": 7, "eval_every": 5}), report=lines.append) as run:
        run.train()
    assert len(lines) == 2 and "since the resume" not in "".join(lines)        # steps 5 and 7: 5 steps each
    lines.clear()
    with Run.resume(tmp_path / "run", {"steps": 15}, report=lines.append) as resumed:
        resumed.train()
    losses = resumed.trainer.losses
    assert [line.split()[1] for line in lines] == ["10/15", "15/15"]
    assert f"loss {np.mean(losses[:3]):.3f} (mean of the 3 steps since the resume)  validation loss" in lines[0]
    assert f"loss {np.mean(losses[-5:]):.3f}  validation loss" in lines[1]     # 5 steps: a full interval


def test_resumed_train_gives_the_total_time_of_this_process_and_the_training_time_in_all(tmp_path):
    from run_helpers import run_main

    flags = ["--out", tmp_path / "run", "--dataset", "builtin", "--tokenizer", "word", "--no-shared-vocabulary",
             "--n-pairs", "120", "--d-model", "16", "--n-heads", "2", "--d-ff", "32", "--batch-size", "16",
             "--max-len", "32", "--eval-every", "5", "--samples", "0", "--beam", "1", "--quiet"]
    status, out, err = run_main(["train", *flags, "--steps", "5"])
    assert status == 0, err
    assert re.search(r"Total time \d+:\d\d\.$", out.strip())
    status, out, err = run_main(["train", "--out", tmp_path / "run", "--resume", "--steps", "8", "--samples", "0",
                                 "--beam", "1", "--quiet"])
    assert status == 0, err
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    total, training = (f"{int(s) // 60}:{int(s) % 60:02d}" for s in (metrics["total_seconds"], metrics["train_seconds"]))
    assert out.strip().endswith(f"Total time {total} in this process; {training} of training in all.")


def test_metrics_give_the_final_evaluation_its_time_and_the_words_it_translated(tmp_path):
    from run_helpers import run_main

    flags = ["--out", tmp_path / "run", "--dataset", "builtin", "--tokenizer", "word", "--no-shared-vocabulary",
             "--n-pairs", "120", "--d-model", "16", "--n-heads", "2", "--d-ff", "32", "--batch-size", "16",
             "--max-len", "32", "--steps", "3", "--samples", "0", "--beam", "2", "--quiet"]
    status, out, err = run_main(["train", *flags])
    assert status == 0, err
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert 0 <= metrics["evaluation_seconds"] <= metrics["total_seconds"] - metrics["train_seconds"] + 0.1
    from numpy_transformer.training.machine import machine_record                # and the machine that took them
    assert metrics["machine"] == json.loads(json.dumps(machine_record()))
    from numpy_transformer.training.evaluation import evaluate_split    # the same words, counted again
    from numpy_transformer.training.run import Run
    from numpy_transformer.training.checkpoint import load_checkpoint
    with Run.resume(tmp_path / "run", report=None) as run:
        scored = load_checkpoint(run.directory, metrics["weights"])
        evaluation = evaluate_split(scored.model, run.data, run.configs["data"], run.objective, "test", 2, 1.0, 0,
                                    None)
    words = sum(len(text.split()) for text in evaluation.greedy + evaluation.beam)
    assert words > 0 and metrics["translated_words"] == words


def test_the_loss_figure_draws_a_long_title_whole():
    from numpy_transformer.training.metrics_log import loss_figure
    import matplotlib.pyplot as plt

    title = ("Tatoeba English–Italian, real sentences (Tatoeba (tatoeba.org), CC-BY 2.0 FR; numpy_transformer/data/"
             "corpora/tatoeba-en-it/README.md): translation, d_model 128, 4 heads, 1+1 layers")
    figure = loss_figure([{"step": 5, "loss": 3.0}, {"step": 5, "validation_loss": 2.5}], title)
    try:
        renderer = figure.canvas.get_renderer()
        drawn = figure.axes[0].title
        box, page = drawn.get_window_extent(renderer), figure.bbox
        assert page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 and box.y1 <= page.y1
        assert drawn.get_text().replace("\n", " ") == title
    finally:
        plt.close(figure)


def test_a_run_s_figure_is_titled_with_the_corpus_without_its_credit(tmp_path, monkeypatch):
    import numpy_transformer.training.run as run_module

    titles = []
    monkeypatch.setattr(run_module, "plot_loss_curve", lambda records, path, title: titles.append(title))
    with Run.new(tmp_path / "run", *tiny_configs(training={"steps": 2}), report=None) as run:
        run.train()
    assert titles == ["built-in synthetic corpus: translation, d_model 16, 2 heads, 1+1 layers"]
    assert run_module._without_credit("Tatoeba English–Italian, real sentences (Tatoeba (tatoeba.org), CC-BY 2.0 "
                                      "FR; numpy_transformer/data/corpora/tatoeba-en-it/README.md)") == \
        "Tatoeba English–Italian, real sentences"
    for kept in ("data/pairs.tsv", "(only a credit)", "unbalanced)"):
        assert run_module._without_credit(kept) == kept
