"""This project's training step against PyTorch's on the CPU: `numpy-transformer bench train-step`.

For each configuration a full training step (forward, label-smoothed cross-entropy, backward,
the gradient-norm clip and Adam's update, as `train` makes it) of `numpy_transformer.model.Transformer` and of the same architecture in PyTorch
(`torch.nn.Transformer` between token embeddings × √d + sinusoidal positions and the projection,
as in tests/test_torch_model.py) on the same batch; for the decoder-only configurations, of
`DecoderOnlyTransformer` and of `torch.nn.TransformerEncoder` with a causal mask between token
embeddings × √d + learned positions and the tied head (as in tests/test_torch_language_model.py).
PyTorch runs twice: with its default Adam, which on the CPU updates one parameter at a time,
and with `Adam(fused=True)`, PyTorch at its best:

- time: each framework builds its model, warms up and steps in a child process of its own, one
  after the other, in four rounds (every other one in the reverse order, so that a busy moment
  of a shared machine hits all three); the median of the steps. Four processes per framework,
  because on the development machine a process now and then runs 15–25 % slower throughout,
  and one of four cannot move the median. Separate processes, because with two
  threads a framework's idle workers keep spinning on the second core after each parallel
  product (OpenBLAS's for about 0.1 s), which in one process slowed the other framework's next
  step by up to 2× (docs/performance.md). Both use the same number of threads: OpenBLAS's (fixed
  by the environment before NumPy loads) and `torch.set_num_threads`; and both processes keep
  freed memory for reuse (numpy_transformer.training.allocator), as the CLI does.
- peak memory: each framework in a fresh child process: its peak resident set size (VmHWM,
  reset through /proc/self/clear_refs) while it builds the model and optimizer and runs two
  training steps, minus the resident size at the reset, which comes after two steps of the tiny
  configuration (so the imported modules, thread pools, BLAS buffers and PyTorch's kernels are
  in the baseline). It counts what training the model needs (parameters, gradients, Adam's two
  moments, activations, temporaries, allocator slack), the same way for both; tracemalloc would
  see NumPy's arrays but not PyTorch's allocator. Where the peak cannot be restarted (no
  /proc, a kernel that refuses or ignores the reset) the memory is reported as unavailable and
  the times are still measured.

The update at memory speed. The clip and Adam's update are elementwise: per float32 parameter
they must read the gradient for the norm (4 bytes), read and write it to scale it (8), and read
the parameter, its gradient and its two moments and write back all but the gradient (28): 40
bytes (`UPDATE_BYTES`), which is also what PyTorch's `clip_grad_norm_` and fused Adam move.
`update_bandwidth` measures the bytes per second the machine moves in the update's own pattern,
an array read and written back in place (a 256 MB `np.add(a, 0, out=a)`, read and write
counted, on as many threads as the step), and each result gives the fraction of it the
clip-and-update phase achieved: parameters × 40 bytes / its time / that bandwidth. (A copy to
another array is another pattern, which some CPUs move at half that rate: docs/performance.md.)
`update_floor_ns` measures the other bound, the arithmetic: Adam's update as the engine room
makes it (13 elementwise passes, bit for bit the plain form's) on one parameter of a block's
size whose arrays are already in the cache, per entry. No byte comes from memory there, so a
model's update on one thread cannot take less than its parameters times that; each result
gives that time beside fused Adam's clip and update (`numpy_update_floor_ms`).

Dropout (0.1), label smoothing (0.1), the clip at norm 1.0 and Adam's betas (0.9, 0.98) and eps (1e-9) are the
thesis's. PyTorch is imported only here and only when the benchmark runs: it is an optional
benchmark dependency, never one of the library.
"""
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

from numpy_transformer.inference import with_progress
from numpy_transformer.parameter_count import analytic_parameter_count
from numpy_transformer.training import parallel
from numpy_transformer.training.allocator import reuse_freed_memory
from numpy_transformer.training.thread_plan import choose_split, describe_split
from numpy_transformer.training.update_block import choose_update_block
from numpy_transformer.benchmarks.workloads import BETAS, CONFIGS, EPS, LABEL_SMOOTHING, LR, MAIN_CONFIGS, PAD_ID, \
    make_batch

FRAMEWORKS = ("numpy", "torch", "torch_fused")
CLIP_NORM = 1.0
UPDATE_BYTES = 4 + 8 + 28       # per float32 parameter: the norm, the scaling, Adam (module docstring)
UPDATE_GOAL = 1.3               # the clip and update's time against PyTorch's clip_grad_norm_ and fused Adam
LABELS = {"numpy": "NumPy", "torch": "PyTorch, default Adam", "torch_fused": "PyTorch, fused Adam"}
TORCH_MISSING = ("PyTorch is not installed, so only the NumPy side was measured; "
                 "`pip install torch==2.13.0` (the CPU build) adds the comparison")


class BatchLoss:
    """The objective of the benchmark's batches (training/loss.py's interface): the
    label-smoothed cross-entropy of tgt_out, the decoder-only model reading tgt_in."""

    def loss(self, model, batch, label_smoothing=LABEL_SMOOTHING):
        import autograd.functional as F
        from numpy_transformer.training.loss import loss_on_batch

        if hasattr(model, "stack"):
            return F.cross_entropy(model(batch.tgt_in), batch.tgt_out, ignore_index=PAD_ID,
                                   label_smoothing=label_smoothing)
        return loss_on_batch(model, batch, label_smoothing)


class NumpyTrainer:
    """This project's model, Adam (its update shared by `threads` threads) and one batch; `step()`
    is one training step. split: how the step uses `threads` > 1: "batch" (the batch's rows
    shared by `threads` processes, training/parallel.py), "blas" (one process, BLAS's threads)
    or "auto", what `train --threads` does (the faster, measured: training/thread_plan.py)."""

    def __init__(self, config, batch, seed=0, threads=1, split="auto"):
        from autograd.engine_room import set_update_block, share_updates
        from autograd.optim import Adam
        from numpy_transformer.language_model import DecoderOnlyTransformer
        from numpy_transformer.model import Transformer

        rng = np.random.default_rng(seed)
        model_class = DecoderOnlyTransformer if config.decoder_only else Transformer
        self.model = model_class(config.model_config(), rng).train()
        set_update_block(choose_update_block(max(p.data.size for p in self.model.parameters())))   # as train does
        self.optimizer = share_updates(Adam(self.model.named_parameters(), lr=LR, betas=BETAS, eps=EPS), threads)
        self.batch = batch
        self.parallel = None
        self.plan = choose_split(self.model, BatchLoss(), LABEL_SMOOTHING, batch, threads, split)
        if threads > 1 and self.plan.split == "batch" and parallel.available():
            self.parallel = parallel.DataParallel(self.model, BatchLoss(), LABEL_SMOOTHING, threads)

    def loss(self, model=None):
        """The label-smoothed cross-entropy of the batch, by `model` (a float16 twin) or this
        trainer's."""
        return BatchLoss().loss(model or self.model, self.batch)

    def step(self):
        """(forward, backward, clip and update) seconds of one step; with processes, the forward
        and the backward are one phase, counted as the forward (and the backward as 0)."""
        from autograd.optim import clip_grad_norm

        start = time.perf_counter()
        self.optimizer.zero_grad()
        if self.parallel is not None:
            self.parallel.gradients(self.batch)
            forward = backward = time.perf_counter()
        else:
            loss = self.loss()
            forward = time.perf_counter()
            loss.backward()
            backward = time.perf_counter()
        clip_grad_norm(self.model.parameters(), CLIP_NORM)
        self.optimizer.step()
        return forward - start, backward - forward, time.perf_counter() - backward


class TorchTrainer:
    """The same architecture in PyTorch: embeddings × √d + sinusoidal positions,
    torch.nn.Transformer (post-norm, its two final norms removed as in the thesis), the projection
    (tied to the target embedding where the config ties it); or the decoder-only model; both from
    numpy_transformer/interop/torch_reference.py; the same loss, and Adam (fused=True: PyTorch's fused
    kernel)."""

    def __init__(self, config, batch, seed=0, fused=False):
        import torch

        from numpy_transformer.interop.torch_reference import torch_decoder_only, torch_transformer

        torch.manual_seed(seed)
        self.torch = torch
        self.model = (torch_decoder_only if config.decoder_only else torch_transformer)(config.model_config()).train()
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=LR, betas=BETAS, eps=EPS, fused=fused)
        self.batch = [torch.from_numpy(array) for array in (batch.src, batch.tgt_in, batch.tgt_out)]

    def step(self):
        """(forward, backward, clip and update) seconds of one step."""
        src, tgt_in, tgt_out = self.batch
        start = time.perf_counter()
        self.optimizer.zero_grad(set_to_none=True)
        logits = self.model(tgt_in) if hasattr(self.model, "stack") else self.model(src, tgt_in)
        loss = self.torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1),
                                                      ignore_index=PAD_ID, label_smoothing=LABEL_SMOOTHING)
        forward = time.perf_counter()
        loss.backward()
        backward = time.perf_counter()
        self.torch.nn.utils.clip_grad_norm_(self.model.parameters(), CLIP_NORM)
        self.optimizer.step()
        return forward - start, backward - forward, time.perf_counter() - backward


def import_torch(threads):
    """torch with `threads` intra-op threads, or None when it is not installed."""
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(threads)
    return torch


def time_steps(config_name, frameworks, threads, steps=10, warmup=2, rounds=4, split="auto", numpy_threads=None):
    """{framework: [(forward, backward, update)…]} for each of `frameworks`: `steps` timed steps in
    all, shared between `rounds` rounds; in each round each framework runs `warmup` untimed steps
    and then its timed ones in a child process of its own (module docstring), the order reversed
    every other round. numpy_threads: NumPy's threads where they are not `threads`."""
    times = {framework: [] for framework in frameworks}
    for r in range(rounds):
        share = steps // rounds + (r < steps % rounds)
        for framework in (frameworks if r % 2 == 0 else frameworks[::-1]):
            cores = numpy_threads if framework == "numpy" and numpy_threads is not None else threads
            if share:
                times[framework] += [tuple(phases) for phases in json.loads(
                    in_child(__name__, "print_step_times", config_name, framework, cores, share, warmup, split))]
    return times


def print_step_times(config_name, framework, threads, steps, warmup, split="auto"):
    """In a fresh process: print the JSON list of the (forward, backward, update) seconds of
    `steps` steps of `framework` after `warmup` untimed ones."""
    reuse_freed_memory()
    trainer = make_trainer(framework, CONFIGS[config_name], threads, split)
    for _ in range(warmup):
        trainer.step()
    print(json.dumps([trainer.step() for _ in range(steps)]))


def make_trainer(framework, config, threads, split="auto"):
    """The trainer of `framework` ("numpy", "torch" or "torch_fused") on the configuration's batch."""
    batch = make_batch(config)
    if framework == "numpy":
        return NumpyTrainer(config, batch, threads=threads, split=split)
    import_torch(threads)
    return TorchTrainer(config, batch, fused=framework == "torch_fused")


def median_ms(phases, part=None):
    """Median milliseconds of whole steps (part None) or of one phase (0, 1, 2)."""
    return statistics.median((sum(p) if part is None else p[part]) * 1e3 for p in phases)


def peak_memory_mb(config_name, framework, threads, split="auto"):
    """The peak memory (MB) of building and training `framework`'s model for two steps, measured in
    a child process (see the module docstring); None if the framework cannot run or the peak
    cannot be measured here."""
    value = in_child(__name__, "print_peak_memory", config_name, framework, threads, split)
    return None if value == "None" else float(value)


def in_child(module, function, *arguments):
    """The last line that `function(*arguments)` of `module` prints, run in a fresh process."""
    code = f"from {module} import {function}; {function}{arguments!r}"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, encoding="utf-8",
                            errors="replace", env={**os.environ, "PYTHONIOENCODING": "utf-8"})
    if result.returncode != 0:
        raise RuntimeError(f"{function}{arguments!r} failed in its child process:\n{result.stderr}")
    return result.stdout.strip().splitlines()[-1]


def print_peak_memory(config_name, framework, threads, split="auto"):
    """In a fresh process: print the peak resident memory (MB) added by building `framework`'s
    model and optimizer for `config_name` and running two training steps, or None if torch is
    missing or the peak cannot be restarted (`restart_peak_memory`). The baseline is taken after
    two steps of the tiny configuration, so that what any run pays once (imported modules, thread
    pools, BLAS buffers, PyTorch's kernels) is in it. With the batch split between processes,
    what each worker process adds from its start to its peak is added, less the shared memory it
    touched (the weights and its gradients' slot), which this process's peak already holds: the
    shared memory counts once."""
    if framework == "torch" and import_torch(threads) is None:
        print("None")
        return
    reuse_freed_memory()
    train_two_steps(framework, CONFIGS["tiny"], threads, split)
    baseline = status_kb("VmRSS")
    if baseline is None or not restart_peak_memory():
        print("None")
        return
    workers = train_two_steps(framework, CONFIGS[config_name], threads, split)
    peak = status_kb("VmHWM")
    print("None" if peak is None or None in workers else (peak - baseline + sum(workers)) / 1024)


def train_two_steps(framework, config, threads, split="auto"):
    """Build the model and optimizer and run two steps (PyTorch's Adam allocates its moments in
    the first); returns the kilobytes each worker process added (none without them)."""
    trainer = make_trainer(framework, config, threads, split)
    shared = getattr(trainer, "parallel", None)
    starts = [] if shared is None else shared.on_workers(worker_restart_peak)
    for _ in range(2):
        trainer.step()
    if shared is None:
        return []
    peaks = shared.on_workers(worker_peak)
    shared.close()
    return [added_kb(start, peak) for start, peak in zip(starts, peaks)]


def added_kb(start, peak):
    """The kilobytes a worker added between `worker_restart_peak` (start) and `worker_peak`
    (peak), its shared pages left out; None if either reading is missing."""
    if start is None or peak is None:
        return None
    return (peak[0] - start[0]) - (peak[1] - start[1])


def worker_restart_peak(model):
    """In a worker: restart its peak memory; (its resident kilobytes now, the shared ones among
    them), or None."""
    return (status_kb("VmRSS"), status_kb("RssShmem") or 0) if restart_peak_memory() else None


def worker_peak(model):
    """In a worker: (its peak resident kilobytes, the shared kilobytes resident now: the shared
    pages it touched stay resident, so those of its peak are among them), or None."""
    peak = status_kb("VmHWM")
    return None if peak is None else (peak, status_kb("RssShmem") or 0)


def restart_peak_memory(tries=20):
    """Restart the peak resident size from the current one (VmHWM := VmRSS, by writing 5 to
    /proc/self/clear_refs); False where it does not restart: no /proc, a kernel that refuses the
    write, or one that accepts it and keeps the old peak.

    Two things keep the restarted peak from equalling the resident size read around the write.
    Another thread may change the resident size in between (BLAS's, the update's, a collection of
    garbage, a library's own): so the peak is compared with the size read just before the write
    and just after, and the restart is tried again, a millisecond apart, up to `tries` times. And
    the kernel counts a process's pages per processor and may restart the peak from a quick sum of
    those counters, above the exact size /proc prints by up to a batch of pages per processor
    (`counter_slack_kb`), for as long as those batches stay unsettled: a peak within that of the
    size counts as restarted. So a peak measured from here is exact to within that slack (256 KB
    on 2 processors)."""
    slack = counter_slack_kb()
    for attempt in range(tries):
        if attempt:
            time.sleep(0.001)
        before = status_kb("VmRSS")
        try:
            with open("/proc/self/clear_refs", "w", encoding="ascii") as clear_refs:
                clear_refs.write("5")
        except OSError:
            return False
        peak, resident = status_kb("VmHWM"), status_kb("VmRSS")
        if None in (before, peak, resident):
            return False
        if peak <= max(before, resident) + slack:
            return True
    return False


def counter_slack_kb():
    """The kilobytes by which Linux's quick sum of a process's per-processor page counters may
    stand above their exact sum: each processor keeps up to a batch of pages unsettled, the batch
    being max(32, 2 × processors) pages (the kernel's `percpu_counter_batch`)."""
    processors = os.cpu_count() or 1
    page_kb = (os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096) // 1024
    return processors * max(32, 2 * processors) * page_kb


def status_kb(field):
    """The kilobytes of `field` (VmRSS, VmHWM, RssShmem) in /proc/self/status, or None where there is none."""
    try:
        with open("/proc/self/status", encoding="utf-8", errors="replace") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def profile_numpy_step(config, top=25, steps=3):
    """The profile table of a NumPy training step: the mean of `steps` steps after a warm-up
    step (the time outside ops includes the Adam update)."""
    import autograd

    trainer = NumpyTrainer(config, make_batch(config))
    trainer.step()
    with autograd.profile() as prof:
        for _ in range(steps):
            trainer.step()
    return prof.table(top, per=steps)


def run(config_names=MAIN_CONFIGS, threads=1, steps=10, warmup=2, profile=False, log=print, progress=None,
        split="auto"):
    """Measure every configuration; print a line per configuration (and its profile); return the
    list of result dicts. progress: shows the configurations measured (`inference.with_progress`).
    split: how NumPy's side uses threads > 1 (`NumpyTrainer`)."""
    frameworks = FRAMEWORKS if import_torch(threads) is not None else FRAMEWORKS[:1]
    if len(frameworks) == 1:
        log(TORCH_MISSING)
    results, bandwidth, requested = [], update_bandwidth(threads), split
    floor_ns = update_floor_ns()
    log(f"Memory bandwidth: {bandwidth / 1e9:.1f} GB/s (a 256 MB array read and written back in place on {threads} "
        f"thread(s), read and write counted); the clip and update move {UPDATE_BYTES} bytes per parameter, "
        f"{choose_update_block(float('inf')):,} entries a block (the size measured fastest on this machine, as train "
        f"takes it; parameters of one block or less go whole)")
    log(f"Adam's update on data already in the cache: {floor_ns:.2f} ns an entry on one thread (its 13 passes over "
        f"one parameter of {FLOOR_ENTRIES:,} entries, the best of {FLOOR_REPEATS}): the least a step's update can take")
    for name in with_progress(progress, config_names, desc="configurations", unit="config"):
        config = CONFIGS[name]
        plan = numpy_plan(config, threads, requested)
        split = plan.split
        # other work keeps the cores busy: NumPy's side on one core, as train then takes (thread_plan.busy_plan)
        numpy_threads, numpy_split = (1, "auto") if split == "one" else (threads, split)
        times = {**dict.fromkeys(FRAMEWORKS),
                 **time_steps(name, frameworks, threads, steps, warmup, split=numpy_split, numpy_threads=numpy_threads)}
        processes = threads if threads > 1 and split == "batch" and parallel.available() else 1
        result = {"config": name, "decoder_only": config.decoder_only, "threads": threads, "steps": steps,
                  "numpy_processes": processes, "numpy_split": split if threads > 1 else None,
                  "numpy_split_why": plan.why if threads > 1 else None,
                  **{f"{framework}_ms": None if times[framework] is None else _rounded(median_ms(times[framework]), 2)
                     for framework in FRAMEWORKS},
                  "numpy_peak_mb": _rounded(peak_memory_mb(name, "numpy", numpy_threads, numpy_split), 1),
                  "torch_peak_mb": _rounded(peak_memory_mb(name, "torch", threads), 1)}
        result["time_ratio"] = _ratio(result["numpy_ms"], result["torch_ms"])
        result["time_ratio_fused"] = _ratio(result["numpy_ms"], result["torch_fused_ms"])
        result["memory_ratio"] = _ratio(result["numpy_peak_mb"], result["torch_peak_mb"])
        for framework in FRAMEWORKS:
            if times[framework] is not None:
                result[f"{framework}_phases_ms"] = [_rounded(median_ms(times[framework], part), 2) for part in range(3)]
        result["parameters"] = analytic_parameter_count(config.model_config())["total"]
        result["bandwidth_gb_s"] = round(bandwidth / 1e9, 2)
        result["update_floor_ns"] = round(floor_ns, 4)
        result["numpy_update_floor_ms"] = round(result["parameters"] * floor_ns / 1e6 / numpy_threads, 3)  # at best
        for framework in ("numpy", "torch_fused"):
            if times[framework] is not None:
                seconds = result[f"{framework}_phases_ms"][2] / 1e3
                result[f"{framework}_update_bandwidth_fraction"] = \
                    round(result["parameters"] * UPDATE_BYTES / seconds / bandwidth, 3)
        results.append(result)
        log(describe(config, result))
        if profile:
            log(profile_numpy_step(config))
    log(goals(results))
    return results


def update_bandwidth(threads, megabytes=256, repeats=5):
    """Bytes per second that `threads` threads move reading an array and writing it back in place
    (read and write counted, each thread adding 0 to its part of a `megabytes` float32 array:
    the access pattern of the clip and the update), the best of `repeats`."""
    from concurrent.futures import ThreadPoolExecutor

    array = np.ones(megabytes << 18, np.float32)
    bounds = np.linspace(0, array.size, threads + 1).astype(int)
    parts = [array[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    best = float("inf")
    with ThreadPoolExecutor(threads) as pool:
        for _ in range(repeats):
            start = time.perf_counter()
            list(pool.map(lambda part: np.add(part, 0.0, out=part), parts))
            best = min(best, time.perf_counter() - start)
    return 2 * array.nbytes / best


FLOOR_ENTRIES = 1 << 16          # one block of the engine room's default size (blocks.BLOCK)
FLOOR_REPEATS = 200


def update_floor_ns(entries=FLOOR_ENTRIES, repeats=FLOOR_REPEATS):
    """Nanoseconds per entry of Adam's update (`Adam.update`: the engine room's 13 passes) on one
    thread over one float32 parameter of `entries` entries, updated `repeats` times so that its
    parameter, gradient, moments and scratch are in the cache: the best time. The arithmetic
    alone, no memory traffic: a model's update cannot go faster per entry on one thread."""
    from autograd import Tensor
    from autograd.optim import Adam

    parameter = Tensor(np.ones(entries, np.float32), requires_grad=True)
    parameter.grad = np.full(entries, 1e-3, np.float32)
    optimizer = Adam([("floor", parameter)], lr=LR, betas=BETAS, eps=EPS)
    (update,), lr = optimizer.start_step()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        optimizer.update(*update, lr)
        best = min(best, time.perf_counter() - start)
    return best / entries * 1e9


def numpy_plan(config, threads, split):
    """The thread plan of NumPy's side (training/thread_plan.py: `split`, or with "auto" and
    threads > 1 the faster way for this configuration on this machine, measured or cached)."""
    from numpy_transformer.language_model import DecoderOnlyTransformer
    from numpy_transformer.model import Transformer

    if threads < 2 or split != "auto":
        return choose_split(None, None, LABEL_SMOOTHING, None, threads, split)
    model_class = DecoderOnlyTransformer if config.decoder_only else Transformer
    model = model_class(config.model_config(), np.random.default_rng(0)).train()
    return choose_split(model, BatchLoss(), LABEL_SMOOTHING, make_batch(config), threads, split)


def _ratio(numerator, denominator):
    return None if numerator is None or not denominator else round(numerator / denominator, 3)


def _rounded(value, digits):
    return None if value is None else round(value, digits)


def describe(config, result):
    """Two to five lines: the configuration, each framework's time (and peak), the ratios."""
    vocabularies = f"vocabulary {config.tgt_vocab:,}" if config.decoder_only else \
        f"vocabularies {config.src_vocab:,} / {config.tgt_vocab:,}"
    lines = [f"{config.name}: {config.description}; batch {config.batch} × {config.length} tokens, {vocabularies}"]
    for framework in FRAMEWORKS:
        ms = result[f"{framework}_ms"]
        if ms is None:
            continue
        forward, backward, update = result[f"{framework}_phases_ms"]
        phases = f"forward {forward:.1f}, backward {backward:.1f}"
        if framework == "numpy" and result.get("numpy_processes", 1) > 1:
            phases = f"forward and backward on {result['numpy_processes']} processes {forward:.1f}"
        lines.append(f"  {LABELS[framework]:<22} {ms:8.1f} ms per step ({phases}, clip and Adam {update:.1f}"
                     + _bandwidth_text(result, framework) + ")" + _peak_text(result, framework))
    if result.get("numpy_split_why"):
        lines.append(f"  NumPy's {result['threads']} threads: {describe_split(result['numpy_split'], result['threads'])} "
                     f"({result['numpy_split_why']})")
    if result["time_ratio"] is not None:
        lines.append(f"  NumPy / PyTorch: time {result['time_ratio']:.2f}× (default Adam), "
                     f"{result['time_ratio_fused']:.2f}× (fused Adam); memory {_ratio_text(result['memory_ratio'])}")
    return "\n".join(lines)


def goals(results):
    """The goals against PyTorch at its best (time ≤ 1.0 × fused Adam's, memory ≤ 1.0 ×) with
    the measured figures, and where the phases were measured, the clip and update's time against
    fused Adam's (goal ≤ UPDATE_GOAL ×)."""
    compared = [r for r in results if r["time_ratio_fused"] is not None]
    if not compared:
        return "Goals: not checked (no PyTorch figures)."
    lines = ["Goals (NumPy / PyTorch with fused Adam ≤ 1.0 in time, and ≤ 1.0 in peak memory):"]
    for r in compared:
        memory = r["memory_ratio"]
        met = r["time_ratio_fused"] <= 1.0 and (memory is None or memory <= 1.0)
        verdict = ("met" if met else "missed") + (" (time only)" if memory is None else "")
        lines.append(f"- {r['config']}: time {r['time_ratio_fused']:.2f}×, memory {_ratio_text(memory)} — {verdict}"
                     + _update_goal_text(r))
    return "\n".join(lines)


def _update_goal_text(result):
    """"; clip and update N× (≤ 1.3: met)" where both frameworks' phases were measured."""
    fused = result.get("torch_fused_phases_ms", [None] * 3)[2]
    update = _ratio(result.get("numpy_phases_ms", [None] * 3)[2], fused)
    if update is None:
        return ""
    text = f"; clip and update {update:.2f}× (≤ {UPDATE_GOAL}: {'met' if update <= UPDATE_GOAL else 'missed'}"
    floor = _ratio(result.get("numpy_update_floor_ms"), fused)
    return text + ")" if floor is None else text + f"; Adam's passes alone on data in the cache: {floor:.2f}×)"


def _peak_text(result, framework):
    """The end of a framework's line: its peak memory, "unavailable" where it could not be
    measured (None), nothing for a framework whose memory is not measured (fused Adam's)."""
    if f"{framework}_peak_mb" not in result:
        return ""
    peak = result[f"{framework}_peak_mb"]
    return ", peak memory unavailable" if peak is None else f", peak memory {peak:7.1f} MB"


def _bandwidth_text(result, framework):
    """", N % of the bandwidth" for a framework whose update's bandwidth fraction was computed."""
    fraction = result.get(f"{framework}_update_bandwidth_fraction")
    return "" if fraction is None else f" at {100 * fraction:.0f} % of the in-place bandwidth"


def _ratio_text(ratio):
    return "unavailable" if ratio is None else f"{ratio:.2f}×"

