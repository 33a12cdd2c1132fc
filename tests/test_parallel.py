"""Data parallelism (numpy_transformer/training/parallel.py): a step shared by processes is the
one-process step up to rounding, dropout masks included; a run is reproducible and resumes
exactly for its number of processes; a worker's failure is one clear error."""
import dataclasses
import os
import signal

import numpy as np
import pytest

from autograd.engine_room import dropout_masks
from numpy_transformer.data.batching import Batch
from numpy_transformer.language_model import DecoderOnlyTransformer, EncoderOnlyTransformer
from numpy_transformer.model import Transformer
from numpy_transformer.config import TransformerConfig
from numpy_transformer.training import parallel
from numpy_transformer.training.loss import TRANSLATION, CausalLM, LanguageModelBatch, MaskedLM
from numpy_transformer.training.run import Run
from run_helpers import assert_same_weights, tiny_configs, weights

pytestmark = pytest.mark.skipif(not parallel.available(), reason="data parallelism runs on Linux")

GENERATORS = [np.random.PCG64, np.random.PCG64DXSM, np.random.Philox, np.random.MT19937]


@pytest.mark.parametrize("bit_generator", GENERATORS)
@pytest.mark.parametrize("shape, start, stop", [((6, 5, 7), 0, 2), ((6, 5, 7), 2, 5), ((6, 5, 7), 5, 6),
                                                 ((4, 3), 1, 3), ((3, 1), 1, 2), ((5, 2, 3, 3), 0, 5)])
def test_a_shard_draws_its_rows_of_the_whole_mask_and_leaves_the_generator_where_the_whole_draw_does(
        bit_generator, shape, start, stop):
    whole_rng = np.random.Generator(bit_generator(3))
    whole = dropout_masks.keep_mask(shape, 0.9, whole_rng)
    shard_rng = np.random.Generator(bit_generator(3))
    with dropout_masks.batch_rows(start, stop, shape[0]):
        part = dropout_masks.keep_mask((stop - start,) + shape[1:], 0.9, shard_rng)
    np.testing.assert_array_equal(part, whole[start:stop])
    np.testing.assert_array_equal(shard_rng.bit_generator.random_raw(5), whole_rng.bit_generator.random_raw(5))


def test_a_mask_without_the_shard_s_rows_as_its_leading_axis_is_refused():
    with dropout_masks.batch_rows(0, 2, 4), pytest.raises(ValueError, match="leading axis"):
        dropout_masks.keep_mask((3, 5), 0.9, np.random.default_rng(0))
    with pytest.raises(ValueError, match="start < stop"):
        with dropout_masks.batch_rows(2, 2, 4):
            pass


def _translation(dropout=0.1, dtype="float64"):
    config = TransformerConfig(src_vocab_size=30, tgt_vocab_size=30, d_model=16, n_heads=2, d_ff=32,
                               n_encoder_layers=2, n_decoder_layers=1, dropout=dropout, pad_id=0, dtype=dtype)
    rng = np.random.default_rng(1)
    src, tgt = rng.integers(3, 30, (7, 9)), rng.integers(3, 30, (7, 8))
    src[2, 5:], tgt[3, 4:], tgt[6, 2:] = 0, 0, 0
    tgt_out = np.concatenate([tgt[:, 1:], np.zeros((7, 1), int)], axis=1)
    batch = Batch(src, tgt, tgt_out, int((tgt_out != 0).sum()), np.arange(7))
    return (lambda: Transformer(config, np.random.default_rng(0))), TRANSLATION, batch


def _language_model(kind, dtype="float64"):
    make_config = TransformerConfig.decoder_only if kind == "lm" else TransformerConfig.encoder_only
    config = make_config(30, n_layers=2, d_model=16, n_heads=2, d_ff=32, dropout=0.1, max_len=16, pad_id=0,
                         dtype=dtype)
    model_class = DecoderOnlyTransformer if kind == "lm" else EncoderOnlyTransformer
    rng = np.random.default_rng(2)
    inputs, targets = rng.integers(3, 30, (6, 10)), rng.integers(3, 30, (6, 10))
    ignored = 0 if kind == "lm" else -100
    targets[rng.random(targets.shape) < (0.2 if kind == "lm" else 0.7)] = ignored
    objective = CausalLM() if kind == "lm" else MaskedLM(mask_id=2, special_ids=(0, 1, 2), vocab_size=30)
    batch = LanguageModelBatch(inputs, targets, ignored, int((targets != ignored).sum()))
    return (lambda: model_class(config, np.random.default_rng(0))), objective, batch


def _one_process(make, objective, batch):
    model = make()
    model.train()
    loss = objective.loss(model, batch, 0.1)
    loss.backward()
    states = [g.bit_generator.state for g in model.generators()]
    return loss.item(), {name: p.grad.copy() for name, p in model.named_parameters()}, states


@pytest.mark.parametrize("processes", [2, 3])
@pytest.mark.parametrize("kind", ["translation", "lm", "mlm"])
def test_a_shared_step_gives_the_one_process_loss_gradients_and_dropout_draws(kind, processes):
    make, objective, batch = _translation() if kind == "translation" else _language_model(kind)
    loss, grads, states = _one_process(make, objective, batch)
    model = make()
    with parallel.DataParallel(model, objective, 0.1, processes) as shared:
        assert len(shared.shards(batch)) == processes
        model.train()
        shared_loss = shared.gradients(batch)
        assert shared_loss == pytest.approx(loss, rel=1e-13)
        for name, p in model.named_parameters():
            np.testing.assert_allclose(p.grad, grads[name], rtol=1e-10, atol=1e-13, err_msg=name)
        assert [g.bit_generator.state for g in model.generators()] == states


def test_without_the_shard_s_masks_the_gradients_would_differ(monkeypatch):
    """The check above can fail: shards that draw their masks afresh give other gradients."""
    make, objective, batch = _translation()
    _, grads, _ = _one_process(make, objective, batch)
    monkeypatch.setattr(parallel, "batch_rows", lambda start, stop, rows: dropout_masks.contextlib.nullcontext())
    model = make()
    with parallel.DataParallel(model, objective, 0.1, 2) as shared:
        model.train()
        shared.gradients(batch)
        worst = max(np.abs(p.grad - grads[name]).max() for name, p in model.named_parameters())
    assert worst > 1e-3


def test_a_shard_without_targets_makes_the_step_run_whole_in_one_process():
    make, objective, batch = _language_model("mlm")
    targets = batch.targets.copy()
    targets[3:] = -100                                   # the second half has nothing to predict
    batch = dataclasses.replace(batch, targets=targets, n_tokens=int((targets != -100).sum()))
    loss, grads, _ = _one_process(make, objective, batch)
    model = make()
    with parallel.DataParallel(model, objective, 0.1, 2) as shared:
        assert len(shared.shards(batch)) == 1
        model.train()
        assert shared.gradients(batch) == loss
        for name, p in model.named_parameters():
            np.testing.assert_array_equal(p.grad, grads[name], err_msg=name)


def test_the_weights_are_shared_while_it_runs_and_private_again_after():
    make, objective, batch = _translation()
    model = make()
    name, first = next(iter(model.named_parameters()))
    before = first.data.copy()
    shared = parallel.DataParallel(model, objective, 0.1, 2)
    assert any(first.data is array for array in shared.weights.arrays)
    first.data += 1.0                                   # an update the worker must see
    reference = make()
    next(iter(reference.named_parameters()))[1].data += 1.0
    loss, grads, _ = _one_process(lambda: reference, objective, batch)
    model.train()
    assert shared.gradients(batch) == pytest.approx(loss, rel=1e-13)
    for other, p in model.named_parameters():
        np.testing.assert_allclose(p.grad, grads[other], rtol=1e-10, atol=1e-13, err_msg=other)
    workers = list(shared.workers)
    shared.close()
    assert not any(p.data is array for _, p in model.named_parameters() for array in shared.weights.arrays)
    assert workers and all(not worker.is_alive() for worker in workers)
    np.testing.assert_array_equal(first.data, before + 1.0)


def _fails(model, item):
    if item == 3:
        raise ValueError("item three is bad")
    return item * 10


def test_map_keeps_the_order_and_a_worker_s_error_names_it():
    make, objective, _ = _translation()
    with parallel.DataParallel(make(), objective, 0.1, 3) as shared:
        assert shared.map(_fails, [0, 1, 2]) == [0, 10, 20]
        with pytest.raises(parallel.WorkerFailed, match="worker process 1 failed: ValueError: item three is bad"):
            shared.map(_fails, [0, 1, 2, 3, 4, 5])
        assert shared.workers == []                      # stopped: replies were left unread


def test_a_worker_that_dies_is_one_clear_error():
    make, objective, batch = _translation()
    model = make()
    with parallel.DataParallel(model, objective, 0.1, 2) as shared:
        os.kill(shared.workers[0].pid, signal.SIGKILL)
        shared.workers[0].join()
        model.train()
        with pytest.raises(parallel.WorkerFailed, match=r"worker process 1 .* ended \(exit code -9\); run with "
                                                        r"--threads 1"):
            shared.gradients(batch)


def _run(directory, processes, steps=10):
    return Run.new(directory, *tiny_configs(training={"steps": steps}), report=None, threads=processes)


def test_a_run_on_two_processes_follows_the_one_process_run_and_repeats_itself(tmp_path):
    """Two processes sum the gradients in another order: the ten losses moved by 1.2e-7 at
    most, relatively, under OpenBLAS's Haswell, SkylakeX and Sandybridge kernels (Intel Xeon), the
    validation loss not at all; rtol 2e-5 leaves a margin of 150."""
    one, two, again = _run(tmp_path / "one", 1), _run(tmp_path / "two", 2), _run(tmp_path / "again", 2)
    for run in (one, two, again):
        with run:
            run.train()
    np.testing.assert_allclose(two.trainer.losses, one.trainer.losses, rtol=2e-5)
    assert two.trainer.validation_loss == pytest.approx(one.trainer.validation_loss, rel=2e-5)
    assert two.trainer.losses == again.trainer.losses
    assert_same_weights(weights(two.model), weights(again.model))
    assert two.trainer.losses != one.trainer.losses                # the sums were taken in another order
    assert two.trainer.parallel is None                            # the workers are gone


@pytest.mark.parametrize("n", [5, 7])
def test_on_two_processes_n_steps_then_resume_then_n_steps_equals_2n_steps(tmp_path, n):
    with _run(tmp_path / "whole", 2, steps=2 * n) as whole:
        whole.train()
    with _run(tmp_path / "split", 2, steps=n) as first:
        first.train()
    with Run.resume(tmp_path / "split", {"steps": 2 * n}, report=None, threads=2) as second:
        second.train()
    assert first.trainer.losses + second.trainer.losses == whole.trainer.losses
    assert_same_weights(weights(second.model), weights(whole.model))


def test_an_interrupt_inside_a_shared_step_saves_the_last_completed_step(tmp_path):
    run = _run(tmp_path / "run", 2, steps=12)
    calls = []

    def interrupted_gradients(original):
        def gradients(batch):
            calls.append(batch)
            if len(calls) == 6:
                raise KeyboardInterrupt
            return original(batch)
        return gradients

    original_init = parallel.DataParallel.__init__

    def patched(self, *arguments):
        original_init(self, *arguments)
        self.gradients = interrupted_gradients(self.gradients)

    parallel.DataParallel.__init__ = patched
    try:
        with run:
            result = run.train()
    finally:
        parallel.DataParallel.__init__ = original_init
    assert result.interrupted and result.saved and result.step == 5
    with Run.resume(tmp_path / "run", report=None, threads=2) as resumed, _run(tmp_path / "whole", 2, 12) as whole:
        resumed.train()
        whole.train()
    assert_same_weights(weights(resumed.model), weights(whole.model))


def test_narrow_models_split_the_batch_and_wide_ones_give_blas_the_threads(tmp_path):
    assert parallel.splits_batch(_translation()[0]())                      # d_model 16
    wide = Run.new(tmp_path / "wide", *tiny_configs(model={"d_model": 512, "n_heads": 2, "d_ff": 64},
                                                    training={"steps": 2}), report=None, threads=2)
    assert not parallel.splits_batch(wide.model)
    with wide:
        wide.train()
        assert wide.trainer.parallel is None


def test_while_it_runs_blas_has_one_thread_here_and_in_the_workers():
    from threadpoolctl import threadpool_info, threadpool_limits

    def blas_threads():
        return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]

    make, objective, _ = _translation()
    with threadpool_limits(2, user_api="blas"):
        with parallel.DataParallel(make(), objective, 0.1, 2) as shared:
            assert set(blas_threads()) == {1}
            assert shared.on_workers(_blas_threads_here) == [[1] * len(blas_threads())]
        assert set(blas_threads()) == {2}


def _blas_threads_here(model):
    from threadpoolctl import threadpool_info

    return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]


@pytest.mark.parametrize("platform", ["darwin", "win32"])
def test_elsewhere_than_linux_training_stays_in_one_process(tmp_path, monkeypatch, platform):
    monkeypatch.setattr(parallel.sys, "platform", platform)
    assert not parallel.available()
    with pytest.raises(RuntimeError, match=f"on Linux only, not on {platform}"):
        parallel.DataParallel(_translation()[0](), TRANSLATION, 0.1, 2)
    with _run(tmp_path / "run", 2, steps=2) as run:
        run.train()
        assert run.trainer.parallel is None and run.optimizer.threads == 2


def test_shared_steps_opens_one_set_of_processes_that_train_and_a_nested_one_reuse(tmp_path):
    with _run(tmp_path / "run", 2, steps=3) as run:
        with run.trainer.shared_steps():
            shared = run.trainer.parallel
            assert shared is not None and len(shared.workers) == 1
            with run.trainer.shared_steps():
                assert run.trainer.parallel is shared
            run.trainer.train()
            assert run.trainer.parallel is shared and run.trainer.state.step == 3
        assert run.trainer.parallel is None and shared.workers == []
