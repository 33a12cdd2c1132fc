"""`numpy-transformer bench scaling`: what a training step on P processes costs, measured in its
parts, and the speed-up those parts predict for 4, 8 and 16 processes (training/parallel.py).

A step shared by P processes (one BLAS thread each) is, in time,

    T(P) = F(B/P) + M (P − 1) + S(P) + C + U / P

- F(b): the forward and backward of b rows of the batch (B rows in all) in one process, what
  every process does at once, measured for b = B, B/2, B/4, … 1. Fitted as a + c b, a is the
  part that does not shrink with the shard (Python and NumPy's overhead per op), c b the part
  that does.
- M: sending a shard to a worker and reading its reply, per worker (the pipe and pickling).
- S(P): summing the P gradients, parameter by parameter on P threads: (P − 1)/P of R,
  R = one pass adding a gradient of the model's size.
- C: the gradient norm and the clip, on one thread.
- U: Adam's update on one thread, shared by P threads.

Measured on this machine in one process, the parts predict T(2), which is then measured; the
gap between the two is what the model leaves out (two processes sharing caches and memory
bandwidth, waking a worker). Beyond the machine's cores nothing can be measured, so T(4), T(8),
T(16) are the prediction alone, and assume each process keeps a core and the memory bandwidth it
has here; a second figure adds the gap measured at 2 processes to every step.
Amdahl's law is the special case a = M = R = 0: T(P) = serial + parallel / P; the serial part
reported is a + C + the parts that grow with P.
"""
import json
import statistics
import time

import numpy as np
from threadpoolctl import threadpool_limits

from numpy_transformer.benchmarks.train_step import BatchLoss, NumpyTrainer, in_child
from numpy_transformer.training.allocator import reuse_freed_memory
from numpy_transformer.training.cores import usable_cores
from numpy_transformer.benchmarks.workloads import CONFIGS, LABEL_SMOOTHING, MAIN_CONFIGS, make_batch

PREDICTED = (2, 4, 8, 16)


def median_seconds(function, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure_parts(config_name, repeats=7):
    """In one process with one BLAS thread: {"rows": [b…], "fb": [F(b) s…], "update", "clip",
    "sum_pass", "message"} in seconds, and "parameters"."""
    from autograd.optim import clip_grad_norm
    from numpy_transformer.training import parallel

    config = CONFIGS[config_name]
    batch = make_batch(config)
    trainer = NumpyTrainer(config, batch, threads=1, split="batch")
    model, objective, rows = trainer.model, BatchLoss(), len(batch.src)
    for _ in range(2):
        trainer.step()
    parts = {"config": config_name, "rows": [], "fb": []}
    b = rows
    while b >= 1:
        shard = parallel.make_shard(batch, 0, b, model.config.pad_id)

        def forward_backward():                            # what a process of P = rows / b computes
            trainer.optimizer.zero_grad()
            parallel.shard_backward(model, objective, LABEL_SMOOTHING, shard)
        forward_backward()
        parts["rows"].append(b)
        parts["fb"].append(median_seconds(forward_backward, repeats))
        b //= 2
    trainer.optimizer.zero_grad()
    objective.loss(model, batch, LABEL_SMOOTHING).backward()
    grads = [p.grad for p in model.parameters()]
    copies = [g.copy() for g in grads]
    parts["update"] = median_seconds(trainer.optimizer.step, repeats)
    parts["clip"] = median_seconds(lambda: clip_grad_norm(model.parameters(), 1e9), repeats)

    def one_sum_pass():
        for g, c in zip(grads, copies):
            g += c
    parts["sum_pass"] = median_seconds(one_sum_pass, repeats)
    parts["parameters"] = int(sum(g.size for g in grads))
    with parallel.DataParallel(model, objective, LABEL_SMOOTHING, 2) as shared:
        shards = shared.shards(batch)

        def message():
            shared._send(1, ("call", (_nothing, (shards[1],))))
            shared._receive(1)
        message()
        parts["message"] = median_seconds(message, repeats)
    return parts


def _nothing(model, shard):
    return None


def print_parts(config_name, repeats):
    """In a fresh process, one BLAS thread: print `measure_parts` as JSON."""
    reuse_freed_memory()
    with threadpool_limits(1, user_api="blas"):
        print(json.dumps(measure_parts(config_name, repeats)))


def print_loop_step(config_name, processes, steps):
    """In a fresh process: print the median seconds of the training loop's step on `processes`
    processes: gradients, norm and clip (to 1.0, as `train` does), Adam."""
    from autograd.optim import clip_grad_norm

    config = CONFIGS[config_name]
    reuse_freed_memory()
    limit = threadpool_limits(1, user_api="blas")
    trainer = NumpyTrainer(config, make_batch(config), threads=processes, split="batch")

    def step():
        trainer.optimizer.zero_grad()
        if trainer.parallel is not None:
            trainer.parallel.gradients(trainer.batch)
        else:
            trainer.loss().backward()
        clip_grad_norm(trainer.model.parameters(), 1.0)
        trainer.optimizer.step()
    for _ in range(2):
        step()
    print(median_seconds(step, steps))
    limit.restore_original_limits()


def measured_step(config_name, processes, steps):
    """The median seconds of the loop's step on `processes` processes (`print_loop_step`), in a
    fresh process, one BLAS thread each."""
    return float(in_child(__name__, "print_loop_step", config_name, processes, steps))


def fit_overhead(rows, seconds):
    """(a, c) of the least-squares line F(b) = a + c b."""
    c, a = np.polyfit(np.asarray(rows, float), np.asarray(seconds, float), 1)
    return max(float(a), 0.0), float(c)


def shard_seconds(parts, processes):
    """F(⌈B/P⌉), the forward and backward of the largest of P shards (which sets the pace):
    measured where that size was, else the fitted line; None when P exceeds the batch's rows."""
    rows = parts["rows"][0]
    if processes > rows:
        return None
    shard = -(-rows // processes)
    if shard in parts["rows"]:
        return parts["fb"][parts["rows"].index(shard)]
    a, c = fit_overhead(parts["rows"], parts["fb"])
    return a + c * shard


def predicted_step(parts, processes):
    """T(P) of the module docstring, in seconds, from the measured parts; None where the batch
    has fewer rows than processes."""
    forward_backward = shard_seconds(parts, processes)
    if forward_backward is None:
        return None
    summing = parts["sum_pass"] * (processes - 1) / processes
    return forward_backward + parts["message"] * (processes - 1) + summing + parts["clip"] + \
        parts["update"] / processes


def run(config_names=MAIN_CONFIGS, steps=10, repeats=7, log=print, progress=None):
    """Measure the parts, predict, measure T(2) where there are 2 cores; a line per
    configuration and a table; returns the results."""
    from numpy_transformer.inference import with_progress

    results = []
    cores = usable_cores()
    for name in with_progress(progress, config_names, desc="configurations", unit="config"):
        parts = json.loads(in_child(__name__, "print_parts", name, repeats))
        a, c = fit_overhead(parts["rows"], parts["fb"])
        one = measured_step(name, 1, steps)
        two = measured_step(name, 2, steps) if cores >= 2 else None
        predicted = {p: predicted_step(parts, p) for p in PREDICTED}
        serial = a + parts["clip"]
        gap = None if two is None or predicted[2] is None else two - predicted[2]
        result = {"config": name, "parameters": parts["parameters"], "rows": parts["rows"][0],
                  "step_1_ms": one * 1e3, "measured_2_ms": None if two is None else two * 1e3,
                  "overhead_ms": a * 1e3, "per_row_ms": c * 1e3, "clip_ms": parts["clip"] * 1e3,
                  "update_ms": parts["update"] * 1e3, "sum_pass_ms": parts["sum_pass"] * 1e3,
                  "message_ms": parts["message"] * 1e3, "serial_fraction": serial / one,
                  "predicted_ms": {p: None if t is None else t * 1e3 for p, t in predicted.items()},
                  "speedup": {p: None if t is None else one / t for p, t in predicted.items()},
                  "gap_2_ms": None if gap is None else gap * 1e3,
                  "speedup_with_gap": {p: None if t is None or gap is None else one / (t + max(gap, 0.0))
                                       for p, t in predicted.items()},
                  "forward_backward_ms": dict(zip(parts["rows"], [f * 1e3 for f in parts["fb"]]))}
        results.append(result)
        log(describe(result))
    return results


def describe(r):
    """Lines for one configuration: its parts, then measured and predicted steps and speed-ups."""
    measured = "not measured (one core)" if r["measured_2_ms"] is None else \
        f"{r['measured_2_ms']:.1f} ms measured ({r['step_1_ms'] / r['measured_2_ms']:.2f}×)"
    lines = [f"{r['config']}: {r['parameters']:,} parameters, batch of {r['rows']} rows; one process "
             f"{r['step_1_ms']:.1f} ms per step",
             f"  forward+backward of b rows ≈ {r['overhead_ms']:.2f} ms + {r['per_row_ms']:.3f} ms × b; "
             f"norm and clip {r['clip_ms']:.2f} ms; Adam {r['update_ms']:.2f} ms on one thread; one gradient "
             f"sum pass {r['sum_pass_ms']:.2f} ms; a message to a worker {r['message_ms']:.3f} ms",
             f"  serial part at one process (overhead + clip): {100 * r['serial_fraction']:.1f} % of the step",
             f"  2 processes: {_ms(r['predicted_ms'][2])} predicted, {measured}"]
    for p in PREDICTED[1:]:
        t, with_gap = r["predicted_ms"][p], r["speedup_with_gap"][p]
        gap = "" if with_gap is None else f"; {with_gap:.2f}× with the gap measured at 2 processes added"
        lines.append(f"  {p} processes: " + ("more processes than rows" if t is None else
                                             f"{t:.1f} ms predicted ({r['speedup'][p]:.2f}×{gap})"))
    return "\n".join(lines)


def _ms(value):
    return "—" if value is None else f"{value:.1f} ms"
