"""How `train --threads N` uses its N cores, measured on this machine for the model at hand.

A step can use N cores two ways (training/parallel.py):

- "batch": N processes of one BLAS thread each, a part of the batch's rows each (`DataParallel`);
- "blas": one process, whose BLAS shares each matrix product between N threads.

Which is faster depends on the model's width and the batch (how much of a step the matrix
products take, which BLAS's threads share, against the elementwise work and Python's overhead
per op, which they do not), on the CPU, its BLAS kernels and the libraries' versions.
`choose_split` measures it: the forward and backward of the run's next batch, both ways in
turn, `STEPS` times each after one untimed step each, and the clip and update that follow them
either way (`update_seconds`), and splits the batch if that makes the whole step faster (a few
seconds for the thesis's models). From three processes on, by more than `MARGIN`: there every
worker holds a set of gradients of its own, memory that one process does not need. Two
processes sum theirs in one shared set (`parallel.SharedSum`), and the faster way is taken
(docs/performance.md).
The answer is kept in the user's cache folder (`cache_path`), under a key of the CPU, its
cores, N, the versions of Python, NumPy and BLAS (with its kernels) and the model's and the
batch's shapes, so the next run of that model on that machine reads it instead of measuring.
While other work keeps the cores busy (`machine_busy`: the busy time of the run's processors over a
quarter of a second, or the load average where that cannot be read) as the run starts, nothing is measured or
read: such a measurement times that work, not the machine, and three steps of it chose one way
or the other at random; and both ways, measured or not, lose to one core (processes that wait for each other at every step, BLAS threads
that spin), so the run takes one core (`busy_plan`: "one", the numbers of `--threads 1`) and the
next quiet run measures (delete the file to measure again, or give `--split`). A load that comes
once the run is under way is `parallel.Pace`'s to follow.

The measurement changes nothing in the run: no weight is updated, the gradients are dropped,
and the dropout generators are put back where they were. What the choice changes is what
`--threads` documents: a run with N processes sums its gradient over N parts of the batch, in
their order, a run in one process over the whole batch, so they differ by rounding; a run
keeps the split it started with when it is resumed (`TrainingState.split`), and `--split
batch|blas` pins it.
"""
import dataclasses
import hashlib
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

from autograd import Tensor
from autograd.engine_room import share_updates
from autograd.optim import Adam, clip_grad_norm
from numpy_transformer.training import parallel
from numpy_transformer.training.atomic_files import atomic_write_text
from numpy_transformer.training.cores import usable_cores

SPLITS = ("auto", "batch", "blas")
STEPS = 3                         # timed steps each way (after one untimed step each)
MARGIN = 0.05                     # 3+ processes: the batch is split if the step takes less than 1 − MARGIN of the time
SAMPLE = 1 << 22                  # entries of the scratch parameters `update_seconds` times (64 MB with Adam's moments)
SAMPLE_SECONDS = 0.25            # how long `machine_busy` watches the processors this process may use
CACHE_FILE = "thread-plans.json"


@dataclasses.dataclass
class Plan:
    """split: "batch" or "blas"; seconds: the median seconds of a forward and backward each way
    and of the clip and update after either ({"batch": …, "blas": …, "update": …}, empty when the
    split was given); why: one sentence for the user."""
    split: str
    seconds: dict
    why: str


def choose_split(model, objective, label_smoothing, batch, processes, split="auto", cache=None):
    """The `Plan` for training `model` on batches like `batch` with `processes` cores: `split`
    itself when it is "batch" or "blas" (or when the batch cannot be split here: "blas"),
    else the cached measurement for this machine and model, else a new one (then cached).
    cache: the cache file (default `cache_path()`; False: neither read nor written)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    if split != "auto":
        return Plan(split, {}, f"--split {split} given")
    if processes < 2 or not parallel.available():
        return Plan("blas", {}, "one core, or processes cannot be forked here: one process")
    busy = machine_busy()
    if busy:
        return busy_plan(busy)
    key = machine_key(model, batch, processes)
    path = cache_path() if cache is None else cache
    known = read_cache(path, _is_plan).get(key) if path else None
    if known is None:
        known = measure(model, objective, label_smoothing, batch, processes)
        if path:
            keep_in_cache(path, key, known, _is_plan, "thread plan")
        source = "measured now"
    else:
        source = f"measured before on this machine, kept in {path}"
    return Plan("batch" if splits_batch(known, processes) else "blas", known,
                f"a forward and backward took {1e3 * known['batch']:.1f} ms on {processes} processes and "
                f"{1e3 * known['blas']:.1f} ms with {processes} BLAS threads, the clip and update about "
                f"{1e3 * known['update']:.1f} ms after either ({source})")


def splits_batch(seconds, processes):
    """Whether a measurement {"batch", "blas", "update"} with `processes` processes splits the
    batch: the whole step, the forward and backward and then the clip and update, faster that
    way (by more than `MARGIN` from three processes on: the module docstring)."""
    margin = MARGIN if processes > 2 else 0.0
    return seconds["batch"] + seconds["update"] < (1 - margin) * (seconds["blas"] + seconds["update"])


def busy_plan(load):
    """The `Plan` of a machine that other work keeps busy, whatever was measured before on it
    when it was quiet: one core, as `--threads 1` (the same numbers), since N processes that
    wait for each other or N BLAS threads that spin lose to one beside another job; nothing is
    measured or kept."""
    return Plan("one", {}, f"other work keeps the cores busy (load {load:.1f}), where N processes or N BLAS threads "
                           f"lose to one core: one core, as --threads 1 trains (the next quiet run measures; --split "
                           f"batch|blas uses them anyway)")


def describe_split(split, processes):
    """The split in words: "2 processes share each step", "one process with 2 BLAS threads" or
    "one core"."""
    if split == "one":
        return "one core (one process, one BLAS thread)"
    if split == "batch":
        return f"{processes} processes share each step, a part of the batch each"
    return f"one process with {processes} BLAS threads"


def measure(model, objective, label_smoothing, batch, processes, steps=STEPS):
    """{"batch": s, "blas": s, "update": s}: the median seconds of the forward and backward of
    `batch` shared by `processes` processes and with `processes` BLAS threads in this one, timed
    in turn, and `update_seconds`; the model's weights, gradients and dropout generators as they
    were."""
    generators = model.generators()
    states = [g.bit_generator.state for g in generators]
    parameters = [p for _, p in model.named_parameters()]
    kept = [p.grad for p in parameters]

    def one_process():
        with threadpool_limits(processes, user_api="blas"):
            objective.loss(model, batch, label_smoothing).backward()

    seconds = {"batch": [], "blas": []}
    try:
        with parallel.DataParallel(model, objective, label_smoothing, processes) as shared:
            ways = {"batch": lambda: shared.gradients(batch), "blas": one_process}
            for step in range(steps + 1):
                for way, run in ways.items():
                    for p in parameters:
                        p.grad = None
                    for generator, state in zip(generators, states):
                        generator.bit_generator.state = state
                    start = time.perf_counter()
                    run()
                    if step:                                   # the first step of each way warms up
                        seconds[way].append(time.perf_counter() - start)
    finally:
        for p, grad in zip(parameters, kept):
            p.grad = grad
        for generator, state in zip(generators, states):
            generator.bit_generator.state = state
    return {**{way: statistics.median(times) for way, times in seconds.items()},
            "update": update_seconds(sum(p.data.size for p in parameters), processes)}


def update_seconds(size, threads, sample=SAMPLE):
    """The seconds of the gradient clip and Adam's update of `size` float32 parameters on
    `threads` threads, estimated: both timed on `threads` scratch parameters of min(size, sample)
    entries in all, their updates shared by the threads as a run's are (`share_updates`), the
    fastest of three after one untimed, scaled to `size` entries. The passes are elementwise, so
    the time grows with the entries; the sample is larger than a core's caches, so it is timed
    from memory, as a model's update is. The same either way a step is split, it sets how much
    of the whole step a faster forward and backward saves."""
    entries = min(size, sample)
    parts = [Tensor(np.ones(-(-entries // threads), np.float32), requires_grad=True) for _ in range(threads)]
    for part in parts:
        part.grad = np.ones(part.shape, np.float32)             # norm above 1: the clip scales
    optimizer = share_updates(Adam([(f"scratch{i}", part) for i, part in enumerate(parts)]), threads)
    times = []
    for _ in range(4):
        start = time.perf_counter()
        clip_grad_norm(parts, 1.0)
        optimizer.step()
        times.append(time.perf_counter() - start)
    return min(times[1:]) * size / (len(parts) * parts[0].size)


def machine_busy(sample_seconds=SAMPLE_SECONDS, stat=Path("/proc/stat")):
    """How much other work keeps this process's cores busy, in processors' worth, if it is more
    than half of them (else 0.0, also where nothing says): the busy time of the processors it may
    use (its CPU set: all of them, or those `taskset`, a Slurm or PBS allocation on a cluster
    node or `docker run --cpuset-cpus` gives it), read from `stat` (Linux's /proc/stat) over
    `sample_seconds` while this process sleeps; busy above cores / 2 − 0.5 (and above 0.5).

    What the processors do now, not the 1-minute load average, which remembers the last minutes:
    a run started just after another (or a benchmark's configuration just after the one before)
    read the work just ended as a busy machine and took one core; and on a node shared by jobs
    the load speaks for processors this process cannot use. Where /proc/stat cannot be read (not
    Linux), the 1-minute load average decides: busy above cores / 2 + 0.5 (this process counting
    for one)."""
    machine = os.cpu_count() or 1
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if allowed:
        busy = busy_processors(allowed, sample_seconds, stat)
        if busy is not None:
            return busy if busy > max(len(allowed) / 2 - 0.5, 0.5) else 0.0
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return 0.0
    return load if load > machine / 2 + 0.5 else 0.0


def busy_processors(cpus, seconds, stat=Path("/proc/stat")):
    """The processors' worth of time the processors `cpus` (their numbers) spent busy (neither
    idle nor waiting for a disk; time the hypervisor took counts as busy) over `seconds`, read
    from `stat` (/proc/stat) before and after, or None where it cannot be read."""
    before = _cpu_times(stat)
    time.sleep(seconds)
    after = _cpu_times(stat)
    if before is None or after is None or any(cpu not in before or cpu not in after for cpu in cpus):
        return None
    busy = 0.0
    for cpu in cpus:
        (total_0, idle_0), (total_1, idle_1) = before[cpu], after[cpu]
        if total_1 > total_0:
            busy += 1 - (idle_1 - idle_0) / (total_1 - total_0)
    return busy


def _cpu_times(stat):
    """{processor: (its total time, its idle and disk-waiting time)} from /proc/stat's "cpuN"
    lines (user nice system idle iowait irq softirq steal, in clock ticks), or None."""
    try:
        lines = stat.read_text(encoding="ascii").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    times = {}
    for line in lines:
        name, *fields = line.split()
        if name.startswith("cpu") and name[3:].isdigit() and len(fields) >= 5:
            try:
                ticks = [int(field) for field in fields[:8]]
            except ValueError:
                return None
            times[int(name[3:])] = (sum(ticks), ticks[3] + ticks[4])
    return times


def machine_key(model, batch, processes):
    """The cache key: a hash of the CPU, its cores and those this process may use, `processes`,
    the versions of Python, NumPy and BLAS (its kernels too), the model's class and
    configuration, the batch's shapes."""
    blas = sorted((json.dumps({key: info.get(key) for key in ("internal_api", "version", "architecture",
                                                             "threading_layer")}, sort_keys=True)
                   for info in threadpool_info() if info.get("user_api") == "blas"))   # in any order loaded
    arrays = {field.name: getattr(batch, field.name).shape for field in dataclasses.fields(batch)
              if isinstance(getattr(batch, field.name), np.ndarray)}
    described = {"cpu": cpu_name(), "cores": os.cpu_count(), "usable_cores": usable_cores(),
                 "processes": processes, "python": platform.python_version(), "numpy": np.__version__, "blas": blas,
                 "model": type(model).__name__, "config": repr(model.config), "batch": arrays}
    return hashlib.sha256(json.dumps(described, sort_keys=True, default=str).encode()).hexdigest()[:32]


def cpu_name():
    """The CPU's model name (/proc/cpuinfo on Linux), or what `platform` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cache_path():
    """The cache file: thread-plans.json in numpy-transformer's folder of the user's cache
    ($XDG_CACHE_HOME, else ~/.cache)."""
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "numpy-transformer" / CACHE_FILE


def read_cache(path, valid):
    """The entries {key: value} of a JSON cache file whose value passes `valid(value)`; {} when
    the file is missing or is not a JSON object (a cache: what is left out is measured again and
    rewritten)."""
    try:
        kept = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(kept, dict):
        return {}
    return {key: value for key, value in kept.items() if valid(value)}


def keep_in_cache(path, key, value, valid, what):
    """Add key: value to the JSON cache file (written atomically: training/atomic_files.py),
    keeping its entries that pass `valid`; a cache that cannot be written is only a warning that
    names `what` was measured."""
    kept = {**read_cache(path, valid), key: value}
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(kept, indent=1, sort_keys=True))
    except (OSError, ValueError) as error:
        print(f"numpy-transformer: could not keep the measured {what} in {path} ({error}); it will be "
              f"measured again next time", file=sys.stderr)


def _is_plan(value):
    """A cached plan: {"batch": s, "blas": s, "update": s}, each a number of seconds."""
    return isinstance(value, dict) and all(isinstance(value.get(way), (int, float))
                                           for way in ("batch", "blas", "update"))
