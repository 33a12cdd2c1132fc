"""Data parallelism (numpy_transformer/training/parallel.py): a step shared by processes is the
one-process step up to rounding, dropout masks included; a run is reproducible and resumes
exactly for its number of processes; a worker's failure is one clear error."""
import contextlib
import dataclasses
import functools
import gc
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from autograd.engine_room import dropout_masks
from numpy_transformer.data.batching import Batch
from numpy_transformer.language_model import DecoderOnlyTransformer, EncoderOnlyTransformer
from numpy_transformer.model import Transformer
from numpy_transformer.config import TransformerConfig
from numpy_transformer.training import cores, parallel
from numpy_transformer.training.checkpoint import load_checkpoint
from numpy_transformer.training.loss import TRANSLATION, CausalLM, LanguageModelBatch, MaskedLM
from numpy_transformer.training.run import Run
from run_helpers import assert_same_weights, needs_two_cores, run_main, tiny_configs, weights

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


def _step_gradients(shared, model, batch, states):
    """The loss and the gradients (copies) of one shared step from the dropout generators' `states`."""
    parallel._set_states(model.generators(), states)
    model.train()
    loss = shared.gradients(batch)
    return loss, {name: None if p.grad is None else p.grad.copy() for name, p in model.named_parameters()}


def _one_set_and_slots(make, objective, batch, monkeypatch, steps=2):
    """[(loss, gradients)] of `steps` shared steps from the same start, with one shared set of
    gradients (two processes' default) and with a slot per worker summed afterwards."""
    results = []
    for shared_memory in (True, False):
        monkeypatch.setattr(parallel.ForkTransport, "shared_memory", shared_memory)
        model = make()
        states = [g.bit_generator.state for g in model.generators()]
        with parallel.DataParallel(model, objective, 0.1, 2) as shared:
            assert (shared.slots == [shared.sum]) == shared_memory
            results.append([_step_gradients(shared, model, batch, states) for _ in range(steps)])
            if shared_memory:
                for (name, p), array in zip(model.named_parameters(), shared.sum.arrays):
                    assert p.grad is array, name
    return results


def _assert_same_steps(steps, others):
    for (loss, grads), (other_loss, other_grads) in zip(steps, others, strict=True):
        assert loss == other_loss
        for name in grads:
            np.testing.assert_array_equal(grads[name], other_grads[name], err_msg=name)


@pytest.mark.parametrize("kind", ["translation", "lm", "mlm"])
def test_two_processes_sum_in_one_shared_set_the_bits_of_a_slot_per_worker_and_again(kind, monkeypatch):
    """The second step from the same start gives the first's bits: nothing of a step stays in
    the shared set (a second process adding into the last step's sum would double it)."""
    make, objective, batch = _translation() if kind == "translation" else _language_model(kind)
    one_set, slots = _one_set_and_slots(make, objective, batch, monkeypatch)
    _assert_same_steps(one_set, slots)
    _assert_same_steps(one_set[:1], one_set[1:])


def test_a_transport_given_as_a_function_gets_a_slot_per_worker(monkeypatch):
    """`train` under mpiexec passes its transport as a functools.partial, which carries no
    `shared_memory`: the slots, with the same numbers."""
    make, objective, batch = _translation()
    one_set, _ = _one_set_and_slots(make, objective, batch, monkeypatch, steps=1)
    model = make()
    states = [g.bit_generator.state for g in model.generators()]
    with parallel.DataParallel(model, objective, 0.1, 2, functools.partial(parallel.ForkTransport)) as shared:
        assert shared.sum is None and len(shared.slots) == 1
        _assert_same_steps(one_set, [_step_gradients(shared, model, batch, states)])


def _second_in(process, main_pid, seconds):
    """SharedSum.write, but in `process` ("main" or "worker") waiting (up to 5 s) for the other
    process to put its gradient in first; seconds[0] counts the gradients it then added."""
    write = parallel.SharedSum.write

    def waiting_write(self, array, gradient):
        i = self._index[id(array)]
        if (os.getpid() == main_pid) == (process == "main"):
            deadline = time.monotonic() + 5
            while not self.written[i] and time.monotonic() < deadline:
                time.sleep(0.001)
            seconds[0] += bool(self.written[i])
        write(self, array, gradient)
    return waiting_write


@pytest.mark.parametrize("second", ["main", "worker"])
def test_the_shared_sum_is_the_same_whichever_process_puts_a_gradient_in_first(second, monkeypatch):
    make, objective, batch = _translation()
    seconds = parallel.SharedArrays([((1,), np.int64)]).arrays[0]
    monkeypatch.setattr(parallel.SharedSum, "write", _second_in(second, os.getpid(), seconds))
    ordered, slots = _one_set_and_slots(make, objective, batch, monkeypatch, steps=1)
    _assert_same_steps(ordered, slots)
    assert seconds[0] == len(list(make().named_parameters()))     # every one added by `second`


def test_two_processes_hold_one_set_of_gradients_here_not_two(monkeypatch):
    """NumPy's allocations in this process while a step's gradients are computed and summed
    (tracemalloc: the shared memory is not among them): with a slot per worker its own set of
    gradients adds to them, with the shared sum it does not."""
    import tracemalloc
    config = TransformerConfig.decoder_only(30, n_layers=2, d_model=256, n_heads=2, d_ff=1024, dropout=0.0,
                                            max_len=16, pad_id=0, dtype="float32")
    _, objective, batch = _language_model("lm")
    model_bytes = sum(p.data.nbytes for _, p in DecoderOnlyTransformer(config, np.random.default_rng(0))
                      .named_parameters())
    peaks = {}
    for shared_memory in (True, False):
        monkeypatch.setattr(parallel.ForkTransport, "shared_memory", shared_memory)
        model = DecoderOnlyTransformer(config, np.random.default_rng(0))
        with parallel.DataParallel(model, objective, 0.1, 2) as shared:
            model.train()
            shared.gradients(batch)                          # the first step's one-time allocations
            tracemalloc.start()
            try:
                shared.gradients(batch)
                peaks[shared_memory] = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
    assert peaks[False] - peaks[True] > 0.5 * model_bytes, (peaks, model_bytes)     # 0.78 measured


def _hold_every_lock_then(signal_number, main_pid, taken):
    """SharedSum.write that, in the worker, takes every lock, says so in taken[0] and sends
    itself `signal_number`; in the main process it first waits (up to 10 s) for that."""
    write = parallel.SharedSum.write

    def holding_write(self, array, gradient):
        if os.getpid() != main_pid:
            for lock in self.locks:
                lock.acquire()
            taken[0] = 1
            os.kill(os.getpid(), signal_number)
        deadline = time.monotonic() + 10
        while not taken[0] and time.monotonic() < deadline:
            time.sleep(0.001)
        write(self, array, gradient)
    return holding_write


@pytest.mark.parametrize("signal_number, what", [
    (signal.SIGKILL, r"was killed by SIGKILL \(kill -9, or the system's out-of-memory killer\)$"),
    (signal.SIGSTOP, r"is stopped \(SIGSTOP, or Ctrl-Z\): it has used no processor time for 1 s$")])
def test_a_worker_lost_while_it_holds_a_gradient_s_lock_is_one_clear_error(signal_number, what, monkeypatch):
    """The main process waits for the lock as for a reply: the worker's end or silence is found."""
    monkeypatch.setattr(parallel, "SILENT_SECONDS", 1.0)
    taken = parallel.SharedArrays([((1,), np.int8)]).arrays[0]
    monkeypatch.setattr(parallel.SharedSum, "write", _hold_every_lock_then(signal_number, os.getpid(), taken))
    make, objective, batch = _translation()
    model = make()
    with parallel.DataParallel(model, objective, 0.1, 2) as shared:
        worker = shared.workers[0]
        model.train()
        started = time.monotonic()
        with pytest.raises(parallel.WorkerLost, match=rf"^worker process 1 \(pid {worker.pid}\) {what}") as lost:
            shared.gradients(batch)
        assert taken[0] == 1 and "Traceback" not in str(lost.value)
        assert time.monotonic() - started < 30                  # a bound on a hang, not a speed check
        assert shared.workers == [] and not worker.is_alive()


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


def _out_of_memory(model, item):
    if item == 1:
        raise MemoryError("Unable to allocate 1.00 TiB for an array")
    return item


def test_a_worker_out_of_memory_is_a_lost_worker_whose_step_is_not_taken():
    make, objective, _ = _translation()
    with parallel.DataParallel(make(), objective, 0.1, 2) as shared:
        pid = shared.workers[0].pid
        with pytest.raises(parallel.WorkerLost, match=rf"^worker process 1 \(pid {pid}\) ran out of memory "
                                                      rf"\(MemoryError: Unable to allocate 1\.00 TiB for an array\)$"):
            shared.map(_out_of_memory, [0, 1])


@pytest.mark.parametrize("number, signal_number, ending", [
    (1, signal.SIGKILL, r"was killed by SIGKILL \(kill -9, or the system's out-of-memory killer\)"),
    (2, signal.SIGTERM, "was killed by SIGTERM"),
    (1, None, "ended with exit status 3")])
def test_a_worker_that_dies_is_one_clear_error_and_the_others_stop(number, signal_number, ending):
    make, objective, batch = _translation()
    model = make()
    with parallel.DataParallel(model, objective, 0.1, 3) as shared:
        workers = list(shared.workers)
        model.train()
        with pytest.raises(parallel.WorkerLost, match=rf"^worker process {number} \(pid {workers[number - 1].pid}\) "
                                                      rf"{ending}$") as lost:
            if signal_number is None:                           # worker 1 gets item 1, and exits
                shared.map(_exit_with_3_on_1, [0, 1, 2])
            os.kill(workers[number - 1].pid, signal_number)
            workers[number - 1].join(timeout=30)
            shared.gradients(batch)
        assert lost.value.number == number and "\n" not in str(lost.value)
        assert shared.workers == [] and not any(worker.is_alive() for worker in workers)


def _exit_with_3_on_1(model, item):
    if item == 1:
        os._exit(3)
    return item


def test_a_stopped_worker_is_found_silent_and_killed(monkeypatch):
    monkeypatch.setattr(parallel, "SILENT_SECONDS", 1.0)
    make, objective, batch = _translation()
    model = make()
    with parallel.DataParallel(model, objective, 0.1, 2) as shared:
        worker = shared.workers[0]
        os.kill(worker.pid, signal.SIGSTOP)
        model.train()
        started = time.monotonic()
        with pytest.raises(parallel.WorkerLost, match=rf"^worker process 1 \(pid {worker.pid}\) is stopped "
                                                      r"\(SIGSTOP, or Ctrl-Z\): it has used no processor time for 1 s$"):
            shared.gradients(batch)
        assert time.monotonic() - started < 30                  # a bound on a hang, not a speed check
        assert not worker.is_alive() and worker.exitcode == -signal.SIGKILL


def test_a_long_message_to_a_stopped_worker_does_not_hang(monkeypatch):
    """A message longer than the socket holds waits for the worker to read it: watched too."""
    monkeypatch.setattr(parallel, "SILENT_SECONDS", 1.0)
    make, objective, _ = _translation()
    with parallel.DataParallel(make(), objective, 0.1, 2) as shared:
        worker = shared.workers[0]
        assert shared.on_workers(_size, np.zeros(10 ** 6)) == [8 * 10 ** 6]        # 8 MB: read while sent
        os.kill(worker.pid, signal.SIGSTOP)
        started = time.monotonic()
        with pytest.raises(parallel.WorkerLost, match=r"^worker process 1 \(pid \d+\) is stopped"):
            shared.on_workers(_size, np.zeros(10 ** 6))
        assert time.monotonic() - started < 30                  # a bound on a hang, not a speed check
        assert not worker.is_alive()


@pytest.mark.parametrize("signal_number", [signal.SIGKILL, signal.SIGSTOP])
def test_a_long_message_cut_off_leaves_nothing_behind(monkeypatch, signal_number):
    """The thread that sends a long message to a worker that dies (or is stopped, then killed)
    ends before its connection is closed, raises nothing of its own, and leaves no garbage that
    fails when collected (on Python 3.13 the error kept with its traceback did: the BytesIO under
    the message was closed while views of it were still alive, "Exception ignored … BufferError"
    on stderr after the one-line error; and a connection closed under the thread had it fail with
    a TypeError)."""
    monkeypatch.setattr(parallel, "SILENT_SECONDS", 1.0)
    thread_errors, unraisable = [], []
    monkeypatch.setattr(threading, "excepthook", thread_errors.append)
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    make, objective, _ = _translation()
    with parallel.DataParallel(make(), objective, 0.1, 2) as shared:
        worker = shared.workers[0]
        os.kill(worker.pid, signal.SIGSTOP)
        if signal_number == signal.SIGKILL:
            threading.Timer(0.5, os.kill, (worker.pid, signal.SIGKILL)).start()
        with pytest.raises(parallel.WorkerLost, match=r"^worker process 1 \(pid \d+\) "):
            shared.on_workers(_size, np.zeros(10 ** 7))             # 80 MB: more than the socket holds
    gc.collect()
    assert not [t for t in threading.enumerate() if t.name == "message to a worker"]
    assert thread_errors == [] and unraisable == []


def _size(model, array):
    return array.nbytes


def test_a_slow_worker_is_not_taken_for_a_silent_one(monkeypatch):
    """A worker that computes, however long, uses processor time: it is waited for."""
    monkeypatch.setattr(parallel, "SILENT_SECONDS", 0.5)
    make, objective, _ = _translation()
    with parallel.DataParallel(make(), objective, 0.1, 2) as shared:
        assert shared.on_workers(_compute_for, 1.5) == [True]


def _compute_for(model, seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
    return True


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
        def gradients(batch, here=False):
            calls.append(batch)
            if len(calls) == 6:
                raise KeyboardInterrupt
            return original(batch, here)
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


def test_a_run_that_gives_blas_the_threads_stays_in_one_process(tmp_path):
    run = Run.new(tmp_path / "blas", *tiny_configs(training={"steps": 2}), report=None, threads=2, split="blas")
    with run:
        run.train()
        assert run.trainer.parallel is None and run.trainer.state.split == "blas"


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
    monkeypatch.setattr(cores, "usable_cores", lambda: 2)         # the update's two threads even on one core
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


def test_a_run_whose_worker_is_killed_saves_its_last_step_and_resumes_to_the_uninterrupted_run(tmp_path):
    run = _run(tmp_path / "run", 2, steps=12)

    def kill_the_worker_after_step_5(trainer):
        if trainer.state.step == 5:
            os.kill(trainer.parallel.workers[0].pid, signal.SIGKILL)

    with run:
        result = run.train(kill_the_worker_after_step_5)
    assert isinstance(result.worker_lost, parallel.WorkerLost) and "was killed by SIGKILL" in str(result.worker_lost)
    assert result.saved and result.step == 5 and not result.interrupted
    assert run.trainer.parallel is None
    with Run.resume(tmp_path / "run", report=None, threads=2) as resumed, _run(tmp_path / "whole", 2, 12) as whole:
        resumed.train()
        whole.train()
    assert run.trainer.losses + resumed.trainer.losses == whole.trainer.losses
    assert_same_weights(weights(resumed.model), weights(whole.model))


def test_steps_run_here_give_the_shared_steps_bit_for_bit(tmp_path, monkeypatch):
    """`Pace` may run any step in this process, every shard one after the other: the run is the
    same, so it stays a function of its seed and of --threads whatever the machine's load."""
    with _run(tmp_path / "shared", 2, steps=12) as shared:
        monkeypatch.setattr(parallel.Pace, "here", lambda pace: False)
        shared.train()
    ways = []
    monkeypatch.setattr(parallel.Pace, "here", lambda pace: ways.append(pace.steps % 3 == 1) or ways[-1])
    with _run(tmp_path / "mixed", 2, steps=12) as mixed:
        mixed.train()
    assert True in ways and False in ways
    assert mixed.trainer.losses == shared.trainer.losses
    assert mixed.trainer.validation_loss == shared.trainer.validation_loss
    assert_same_weights(weights(mixed.model), weights(shared.model))


def test_pace_takes_the_faster_way_and_tries_the_other_now_and_then():
    pace = parallel.Pace()
    ways = []
    for _ in range(400):
        here = pace.here()
        ways.append(here)
        pace.took(here, 0.030 if here else 0.020, 1000)             # shared is faster
    assert ways[:10] == [False] * 10 and ways[10:12] == [True, True]  # a first trial at step 10
    assert sum(ways) == 2 * 4                                         # then two steps here in every 100
    pace = parallel.Pace()
    ways = []
    for _ in range(400):
        here = pace.here()
        ways.append(here)
        pace.took(here, 0.030 if here else 0.045, 1000)             # here is faster (a core taken)
    assert ways[12:110] == [True] * 98 and ways[110:112] == [False, False] and sum(ways) == 400 - 10 - 2 * 3
    pace = parallel.Pace()
    ways = []
    for step in range(400):
        here = pace.here()
        ways.append(here)
        loaded = 150 <= step < 250                                  # another job takes a core, then leaves
        pace.took(here, 0.030 if here else (0.045 if loaded else 0.020), 1000)
    assert ways[150:153] == [False] * 3 and ways[153:210] == [True] * 57          # 3 slower steps of 5: here
    assert ways[210:212] == [False] * 2 and ways[212:250] == [True] * 38          # a trial: shared still slower
    assert ways[250:310] == [True] * 60 and ways[310:312] == [False] * 2 and not any(ways[312:])  # the next trial


# A worker killed or stopped under `numpy-transformer train --threads 2`: one line, the last step saved.

TRAIN = [sys.executable, "-m", "numpy_transformer.cli", "train", "--dataset", "builtin", "--tokenizer", "word",
         "--no-shared-vocabulary", "--n-pairs", "400", "--steps", "100000", "--d-model", "16", "--n-heads", "2",
         "--d-ff", "32", "--batch-size", "16", "--max-len", "32", "--eval-every", "5", "--checkpoint-every", "5",
         "--samples", "0", "--beam", "1", "--quiet", "--threads", "2", "--split", "batch"]


@contextlib.contextmanager
def _training(folder):
    """A `train --threads 2` process and the pid of its worker, once it trains; both are killed
    on leaving, if still there."""
    process = subprocess.Popen([*TRAIN, "--out", str(folder)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    children = []
    try:
        deadline = time.monotonic() + 120
        while not (folder / "log.jsonl").exists():
            assert process.poll() is None and time.monotonic() < deadline, process.communicate()
            time.sleep(0.05)
        children = [int(pid) for pid in Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()]
        assert len(children) == 1, children
        yield process, children[0]
    finally:
        process.kill()
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _end(process):
    """(seconds until `process` ends, its standard error)."""
    started = time.monotonic()
    _, err = process.communicate(timeout=120)
    return time.monotonic() - started, err


def _gone(pid):
    return not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] == "Z"


@needs_two_cores
@pytest.mark.parametrize("signal_number, what", [
    (signal.SIGKILL, r"was killed by SIGKILL \(kill -9, or the system's out-of-memory killer\)"),
    (signal.SIGTERM, "was killed by SIGTERM"),
    (signal.SIGSTOP, r"is stopped \(SIGSTOP, or Ctrl-Z\): it has used no processor time for 10 s")])
def test_train_with_a_worker_killed_or_stopped_ends_in_one_line_and_resumes(tmp_path, signal_number, what):
    folder = tmp_path / "run"
    shared_memory = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
    with _training(folder) as (process, worker):
        os.kill(worker, signal_number)
        seconds, err = _end(process)
    assert process.returncode == 1, err
    assert seconds < 90                                    # a bound on a hang (10 s of silence, then the save)
    line = err.strip()
    assert "\n" not in line and "Traceback" not in err, err
    step = load_checkpoint(folder).step
    assert re.fullmatch(rf"numpy-transformer train: error: worker process 1 \(pid {worker}\) {what}; a checkpoint "
                        rf"of step {step} is in {re.escape(str(folder))}\. Continue with: numpy-transformer train "
                        rf"--out {re.escape(str(folder))} --resume --threads 2", line), line
    assert step > 0 and _gone(worker)
    if os.path.isdir("/dev/shm"):
        assert set(os.listdir("/dev/shm")) <= shared_memory
    status, _, err = run_main(["train", "--out", folder, "--resume", "--steps", step + 2, "--threads", "2",
                               "--quiet", "--samples", "0", "--beam", "1"])
    assert status == 0, err
    assert load_checkpoint(folder).step == step + 2


@needs_two_cores
def test_ctrl_c_while_a_worker_is_stopped_ends_the_run_with_130_and_saves(tmp_path):
    folder = tmp_path / "run"
    with _training(folder) as (process, worker):
        os.kill(worker, signal.SIGSTOP)
        time.sleep(1)
        process.send_signal(signal.SIGINT)                 # stop after this step: it never ends…
        time.sleep(0.5)
        process.send_signal(signal.SIGINT)                 # … so at once
        seconds, err = _end(process)
    assert process.returncode == 130, err
    assert seconds < 45 and _gone(worker), err
    step = load_checkpoint(folder).step
    assert f"Interrupted at step {step} of 100000: a checkpoint of step {step} is in {folder}" in err
    assert f"numpy-transformer train --out {folder} --resume --threads 2" in err


@needs_two_cores
def test_killing_train_leaves_no_stopped_worker_behind(tmp_path):
    with _training(tmp_path / "run") as (process, worker):
        os.kill(worker, signal.SIGSTOP)
        process.kill()
        process.communicate(timeout=60)
        deadline = time.monotonic() + 30
        while not _gone(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(worker)                               # the kernel killed it with its parent
