"""numpy_transformer/training/thread_plan.py: how `train --threads N` shares a step, measured
on this machine for the model at hand, kept in a cache, never changing what the run computes."""
import json
import os
from pathlib import Path

import numpy as np
import pytest

from numpy_transformer.benchmarks.train_step import BatchLoss
from numpy_transformer.benchmarks.workloads import CONFIGS, make_batch
from numpy_transformer.model import Transformer
from numpy_transformer.training import parallel, thread_plan
from numpy_transformer.training.run import Run
from numpy_transformer.training.thread_plan import choose_split, machine_key, measure
from run_helpers import needs_two_cores, tiny_configs

needs_fork = pytest.mark.skipif(not parallel.available(), reason="data parallelism runs on Linux")


@pytest.fixture(autouse=True)
def idle(monkeypatch):
    """The tests' machine counts as idle (a measurement is kept) unless a test says otherwise."""
    monkeypatch.setattr(thread_plan, "machine_busy", lambda: 0.0)


def tiny(seed=0):
    config = CONFIGS["tiny"]
    return Transformer(config.model_config(), np.random.default_rng(seed)).train(), make_batch(config)


def test_a_split_that_is_given_is_taken_without_a_model_or_a_measurement(monkeypatch):
    monkeypatch.setattr(thread_plan, "measure", lambda *args: pytest.fail("measured"))
    for split in ("batch", "blas"):
        assert choose_split(None, None, 0.1, None, 2, split).split == split
    assert choose_split(None, None, 0.1, None, 1, "auto").split == "blas"          # one core: one process
    with pytest.raises(ValueError, match="split must be one of auto, batch, blas, got 'both'"):
        choose_split(None, None, 0.1, None, 2, "both")


@needs_fork
def test_auto_takes_the_faster_way_measured_and_then_reads_it_from_the_cache(tmp_path, monkeypatch):
    model, batch = tiny()
    cache = tmp_path / "plans.json"
    plan = choose_split(model, BatchLoss(), 0.1, batch, 2, cache=cache)
    assert plan.seconds["batch"] > 0 and plan.seconds["blas"] > 0
    update = plan.seconds["update"]
    assert update > 0 and set(plan.seconds) == {"batch", "blas", "update"}
    faster = plan.seconds["batch"] + update < plan.seconds["blas"] + update      # two processes: no margin
    assert plan.split == ("batch" if faster else "blas") and "measured now" in plan.why
    assert json.loads(cache.read_text()) == {machine_key(model, batch, 2): plan.seconds}
    monkeypatch.setattr(thread_plan, "measure", lambda *args: pytest.fail("measured again"))
    again = choose_split(model, BatchLoss(), 0.1, batch, 2, cache=cache)
    assert (again.split, again.seconds) == (plan.split, plan.seconds) and "measured before" in again.why


@pytest.mark.parametrize("processes, split", [(2, "batch"), (3, "blas"), (4, "blas")])
def test_two_processes_take_the_faster_way_and_more_need_the_margin(processes, split):
    """2 % faster split: two processes sum their gradients in one shared set, so the batch is
    split; three or more would hold a set a worker, and need `MARGIN` (5 %)."""
    assert thread_plan.splits_batch({"batch": 0.98, "blas": 1.0, "update": 0.0}, processes) == (split == "batch")
    assert not thread_plan.splits_batch({"batch": 1.0, "blas": 1.0, "update": 0.5}, processes)
    assert thread_plan.splits_batch({"batch": 0.5, "blas": 1.0, "update": 0.1}, processes)


def test_the_key_changes_with_the_model_the_batch_and_the_cores():
    model, batch = tiny()
    wider = Transformer(CONFIGS["default"].model_config(), np.random.default_rng(0))
    keys = {machine_key(model, batch, 2), machine_key(model, batch, 3), machine_key(wider, batch, 2),
            machine_key(model, make_batch(CONFIGS["default"]), 2)}
    assert len(keys) == 4 and machine_key(model, batch, 2) == machine_key(tiny(seed=1)[0], batch, 2)


@needs_fork
def test_the_key_does_not_depend_on_the_order_in_which_the_blas_libraries_were_loaded(monkeypatch):
    """NumPy's and SciPy's OpenBLAS come in either order from threadpoolctl (seen: the same
    command gave two keys, so a plan measured before was missed at random)."""
    model, batch = tiny()
    pools = [{"user_api": "blas", "internal_api": "openblas", "version": version, "architecture": "SkylakeX",
              "threading_layer": "pthreads"} for version in ("0.3.30", "0.3.31")]
    monkeypatch.setattr(thread_plan, "threadpool_info", lambda: pools)
    key = machine_key(model, batch, 2)
    monkeypatch.setattr(thread_plan, "threadpool_info", lambda: pools[::-1])
    assert machine_key(model, batch, 2) == key
    monkeypatch.setattr(thread_plan, "threadpool_info", lambda: pools[:1])
    assert machine_key(model, batch, 2) != key


def test_a_cache_that_is_not_json_is_measured_again_and_rewritten(tmp_path, monkeypatch):
    model, batch = tiny()
    cache = tmp_path / "plans.json"
    cache.write_text("{not json")
    measured = {"batch": 0.5, "blas": 0.25, "update": 0.1}
    monkeypatch.setattr(thread_plan, "measure", lambda *args: measured)
    assert choose_split(model, BatchLoss(), 0.1, batch, 2, cache=cache).split == "blas"
    assert json.loads(cache.read_text()) == {machine_key(model, batch, 2): measured}


def test_a_plan_kept_without_the_update_s_time_is_measured_again(tmp_path, monkeypatch):
    model, batch = tiny()
    cache = tmp_path / "plans.json"
    cache.write_text(json.dumps({machine_key(model, batch, 2): {"batch": 0.5, "blas": 1.0}}))   # an older cache's
    monkeypatch.setattr(thread_plan, "measure", lambda *args: {"batch": 1.1, "blas": 1.0, "update": 1.0})
    plan = choose_split(model, BatchLoss(), 0.1, batch, 2, cache=cache)
    assert plan.split == "blas" and "measured now" in plan.why


@pytest.mark.parametrize("processes, batch_seconds, update, split", [
    (3, 0.5, 0.0, "batch"), (3, 0.97, 0.0, "blas"), (3, 1.2, 0.0, "blas"), (3, 0.9, 0.0, "batch"), (3, 0.9, 2.0, "blas"),
    (3, 0.5, 1.0, "batch"), (2, 0.97, 0.0, "batch"), (2, 0.9, 2.0, "batch"), (2, 1.2, 0.0, "blas")])
def test_the_batch_is_split_only_when_that_makes_the_whole_step_faster_by_the_margin(tmp_path, monkeypatch, processes,
                                                                                      batch_seconds, update, split):
    """The clip and update follow the forward and backward either way: with three processes, a
    forward and backward 10 % faster is a step about 3 % faster when the update takes twice as
    long, not enough; two processes take any gain."""
    monkeypatch.setattr(parallel, "available", lambda: True)
    monkeypatch.setattr(thread_plan, "measure", lambda *args: {"batch": batch_seconds, "blas": 1.0, "update": update})
    model, batch = tiny()
    assert choose_split(model, BatchLoss(), 0.1, batch, processes, cache=False).split == split


def test_the_update_s_time_is_the_sample_s_scaled_to_the_parameters(monkeypatch):
    """A clock that ticks one second a reading: every timed clip and update of the sample takes
    a second, so the estimate is the parameters over the sample's entries (split between the
    threads, rounded up), and the sample is never larger than the model."""
    assert thread_plan.update_seconds(1 << 12, 2) > 0                       # really timed, on a tiny model
    ticks = iter(range(1000))
    monkeypatch.setattr(thread_plan.time, "perf_counter", lambda: float(next(ticks)))
    assert thread_plan.update_seconds(1 << 22, 1, sample=1 << 16) == 64.0
    assert thread_plan.update_seconds(1 << 22, 2, sample=1 << 16) == 64.0
    assert thread_plan.update_seconds(1 << 22, 3, sample=1 << 16) == (1 << 22) / (3 * 21846)
    assert thread_plan.update_seconds(1000, 1, sample=1 << 16) == 1.0


def test_a_busy_machine_measures_nothing_and_takes_one_core(tmp_path, monkeypatch):
    """Under load a measurement would time the other work (seen: three steps each way chose BLAS's
    threads for the default model beside one busy process, which then trained and evaluated 18 %
    slower than one thread): nothing is measured or kept, and the run takes one core, even where
    a plan was measured before on a quiet machine (beside a busy process a split batch, as
    measured quiet, trained and evaluated 9 % slower than one core)."""
    monkeypatch.setattr(thread_plan, "machine_busy", lambda: 6.5)
    monkeypatch.setattr(thread_plan, "measure", lambda *args: pytest.fail("measured on a busy machine"))
    model, batch = tiny()
    plan = choose_split(model, BatchLoss(), 0.1, batch, 2, cache=tmp_path / "plans.json")
    assert plan.split == "one" and plan.seconds == {} and "busy (load 6.5)" in plan.why
    assert not (tmp_path / "plans.json").exists()
    (tmp_path / "plans.json").write_text(json.dumps({machine_key(model, batch, 2): {"batch": 0.5, "blas": 1.0,
                                                                                    "update": 0.1}}))
    assert choose_split(model, BatchLoss(), 0.1, batch, 2, cache=tmp_path / "plans.json").split == "one"
    monkeypatch.setattr(thread_plan, "machine_busy", lambda: 0.0)
    plan = choose_split(model, BatchLoss(), 0.1, batch, 2, cache=tmp_path / "plans.json")
    assert plan.split == "batch" and "measured before on this machine" in plan.why


@needs_fork
def test_a_run_started_on_a_busy_machine_trains_on_one_core_as_threads_1_bit_for_bit(tmp_path, monkeypatch):
    """`train --threads 2` on a busy machine: one process, one BLAS thread, the update on one
    thread: the weights of processes=1 bit for bit; the split is kept for a resume."""
    from threadpoolctl import threadpool_info, threadpool_limits

    monkeypatch.setattr(thread_plan, "cache_path", lambda: tmp_path / "plans.json")
    monkeypatch.setattr(thread_plan, "machine_busy", lambda: 6.5)
    blas_threads = []
    one = Run.new(tmp_path / "one", *tiny_configs(training={"steps": 4}), report=None)
    one.train()
    busy = Run.new(tmp_path / "busy", *tiny_configs(training={"steps": 4}), threads=2, split="auto", report=None)
    step = busy.trainer.step_on_batch
    monkeypatch.setattr(busy.trainer, "step_on_batch", lambda *a, **k: blas_threads.append(
        {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}) or step(*a, **k))
    with threadpool_limits(2, user_api="blas"):                  # as `train --threads 2` starts
        busy.train()
    assert busy.trainer.state.split == "one" and busy.trainer.sharing() == 1
    assert blas_threads and all(threads == {1} for threads in blas_threads)
    for (name, a), (_, b) in zip(one.model.named_parameters(), busy.model.named_parameters()):
        assert np.array_equal(a.data, b.data), name
    assert not (tmp_path / "plans.json").exists()


def test_where_proc_stat_cannot_be_read_the_machine_is_busy_when_the_load_exceeds_half_the_cores_and_one(
        monkeypatch):
    monkeypatch.undo()
    monkeypatch.setattr(thread_plan.os, "cpu_count", lambda: 4)
    monkeypatch.setattr(thread_plan.os, "sched_getaffinity", lambda pid: set(range(4)), raising=False)
    monkeypatch.setattr(thread_plan.os, "getloadavg", lambda: (2.4, 0.0, 0.0))
    assert thread_plan.machine_busy(sample_seconds=0, stat=Path("/nonexistent/stat")) == 0.0
    monkeypatch.setattr(thread_plan.os, "getloadavg", lambda: (2.6, 0.0, 0.0))
    assert thread_plan.machine_busy(sample_seconds=0, stat=Path("/nonexistent/stat")) == 2.6



class Stat:
    """/proc/stat as read twice, `machine_busy`'s before and after."""

    def __init__(self, *texts):
        self.texts = list(texts)

    def read_text(self, encoding):
        return self.texts.pop(0)


def stat_lines(ticks):
    """/proc/stat's processor lines for {processor: (user, idle, iowait, steal)} in clock ticks."""
    lines = [f"cpu  {sum(t[0] for t in ticks.values())} 0 0 0 0 0 0 0 0 0"]
    lines += [f"cpu{cpu} {user} 0 0 {idle} {iowait} 0 0 {steal} 0 0" for cpu, (user, idle, iowait, steal) in ticks.items()]
    return "\n".join(lines + ["intr 5 0 0", "ctxt 10", "procs_running 3"]) + "\n"


@pytest.mark.parametrize("after, busy", [
    ({5: (100, 100, 0, 0), 6: (100, 100, 0, 0)}, 0.0),             # the set idle, the node's load 40
    ({5: (200, 0, 0, 0), 6: (200, 0, 0, 0)}, 2.0),                  # both taken by other work
    ({5: (200, 0, 0, 0), 6: (100, 100, 0, 0)}, 1.0),                # one of two: busy, as a load of 2 on 2 cores
    ({5: (140, 60, 0, 0), 6: (100, 100, 0, 0)}, 0.0),               # 0.4 of a processor: not busy
    ({5: (100, 0, 100, 0), 6: (100, 0, 0, 100)}, 1.0),              # waiting for a disk is idle; the hypervisor's time busy
])
def test_on_a_cpu_set_smaller_than_the_machine_its_own_processors_are_watched_not_the_load(monkeypatch, after, busy):
    """A Slurm allocation of processors 5 and 6 on a 64-processor node that other jobs keep at a
    load of 40: the load average says the machine is busy, the two processors may be idle. Their
    busy time over the sample decides."""
    monkeypatch.undo()
    monkeypatch.setattr(thread_plan.os, "cpu_count", lambda: 64)
    monkeypatch.setattr(thread_plan.os, "sched_getaffinity", lambda pid: {5, 6}, raising=False)
    monkeypatch.setattr(thread_plan.os, "getloadavg", lambda: (40.0, 40.0, 40.0))
    before = {cpu: (100, 0, 0, 0) for cpu in range(64)}
    stat = Stat(stat_lines(before), stat_lines({**before, **after}))
    assert thread_plan.machine_busy(sample_seconds=0, stat=stat) == pytest.approx(busy)


@pytest.mark.parametrize("after, busy", [
    ({0: (100, 100, 0, 0), 1: (100, 100, 0, 0)}, 0.0),             # idle now, after minutes of work
    ({0: (200, 0, 0, 0), 1: (100, 100, 0, 0)}, 1.0),                # one of two taken by other work
    ({0: (140, 60, 0, 0), 1: (100, 100, 0, 0)}, 0.0),               # 0.4 of a processor: not busy
])
def test_on_the_whole_machine_what_its_processors_do_now_decides_not_the_load_of_the_last_minute(
        monkeypatch, after, busy):
    """Two processors, a load average of 1.9 left by a run that has just ended (the next run, or a
    benchmark's next configuration, used to take one core for it): their busy time over the
    sample decides."""
    monkeypatch.undo()
    monkeypatch.setattr(thread_plan.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(thread_plan.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(thread_plan.os, "getloadavg", lambda: (1.9, 1.0, 0.5))
    before = {cpu: (100, 0, 0, 0) for cpu in range(2)}
    stat = Stat(stat_lines(before), stat_lines(after))
    assert thread_plan.machine_busy(sample_seconds=0, stat=stat) == pytest.approx(busy)


def test_where_proc_stat_cannot_tell_the_load_average_decides(monkeypatch):
    monkeypatch.undo()
    monkeypatch.setattr(thread_plan.os, "cpu_count", lambda: 64)
    monkeypatch.setattr(thread_plan.os, "sched_getaffinity", lambda pid: {5, 6}, raising=False)
    monkeypatch.setattr(thread_plan.os, "getloadavg", lambda: (40.0, 40.0, 40.0))
    assert thread_plan.machine_busy(sample_seconds=0, stat=Stat("cpu5 1 2 x\n", "cpu5 1 2 x\n")) == 40.0
    assert thread_plan.machine_busy(sample_seconds=0, stat=Stat("", "")) == 40.0         # no processor lines


def test_the_busy_time_of_real_processors_is_between_none_and_all():
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if not os.path.exists("/proc/stat") or not cpus:
        pytest.skip("no /proc/stat or CPU set here")
    assert 0.0 <= thread_plan.busy_processors(cpus, 0.05) <= len(cpus) + 1e-9

@needs_fork
def test_measuring_leaves_the_weights_the_gradients_and_the_dropout_draws_as_they_were():
    model, batch = tiny()
    before = {name: p.data.copy() for name, p in model.named_parameters()}
    first = next(p for _, p in model.named_parameters())
    first.grad = np.full(first.shape, 3.0, first.dtype)
    states = [g.bit_generator.state for g in model.generators()]
    seconds = measure(model, BatchLoss(), 0.1, batch, 2, steps=1)
    assert set(seconds) == {"batch", "blas", "update"}
    assert all(np.array_equal(p.data, before[name]) for name, p in model.named_parameters())
    assert np.array_equal(first.grad, np.full(first.shape, 3.0)) and \
        all(p.grad is None for _, p in model.named_parameters() if p is not first)
    assert [g.bit_generator.state for g in model.generators()] == states


@needs_fork
def test_a_run_records_the_measured_split_and_a_resumed_run_keeps_it(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(thread_plan, "measure", lambda *args: {"batch": 2.0, "blas": 1.0, "update": 0.1})
    lines = []
    with Run.new(tmp_path / "run", *tiny_configs(training={"steps": 2}), report=lines.append, threads=2,
                 split="auto") as run:
        run.train()
        assert run.trainer.state.split == "blas" and run.trainer.parallel is None
    assert any(line.startswith("Threads: one process with 2 BLAS threads, the faster way here") for line in lines)
    assert (tmp_path / "cache" / "numpy-transformer" / "thread-plans.json").is_file()
    monkeypatch.setattr(thread_plan, "measure", lambda *args: pytest.fail("a resumed run measured again"))
    with Run.resume(tmp_path / "run", training={"steps": 4}, report=None, threads=2, split="auto") as resumed:
        resumed.train()
        assert resumed.trainer.state.split == "blas"


@needs_two_cores
@pytest.mark.parametrize("split, load, one_thread", [("blas", 0.0, False), ("blas", 3.5, True), ("batch", 0.0, True)])
def test_the_final_evaluation_decodes_on_one_blas_thread_after_a_split_batch_or_on_a_busy_machine(
        tmp_path, monkeypatch, split, load, one_thread):
    """Decoding on two BLAS threads beside a busy process took 33.3 s against 28.5 s on one (the
    default preset's test split, Xeon): `train` asks for one thread while the machine is busy,
    and after a run that split its batches; a run that gave BLAS the threads on a quiet machine
    keeps them."""
    from numpy_transformer.training import parallel as parallel_module
    from run_helpers import run_main

    asked = []
    original = parallel_module.evaluation_threads
    monkeypatch.setattr(parallel_module, "evaluation_threads", lambda one: asked.append(one) or original(one))
    monkeypatch.setattr(thread_plan, "machine_busy", lambda: load)
    status, _, err = run_main(["train", "--out", tmp_path / "run", "--dataset", "builtin", "--tokenizer", "word",
                               "--no-shared-vocabulary", "--n-pairs", "120", "--d-model", "16", "--n-heads", "2",
                               "--d-ff", "32", "--batch-size", "16", "--max-len", "32", "--steps", "2", "--samples",
                               "0", "--beam", "1", "--quiet", "--threads", "2", "--split", split])
    assert status == 0, err
    assert asked == [one_thread]
