"""Mixed precision measured: `numpy-transformer bench precision`.

For each configuration of `bench train-step` (benchmarks/workloads.py), one training step of the
same model and batch in float32 and in mixed precision (training/mixed_precision.py: a float16
twin runs forward and backward, Adam updates the float32 master weights):

- activation memory: the bytes of the distinct arrays the step's graph holds for backward after
  the forward pass (every op's output and saved arrays, the parameters excluded), the memory
  that grows with batch × length × layers;
- peak: the peak of NumPy's allocations during forward and backward (tracemalloc): the graph,
  the temporaries and the parameters' gradients as backward makes them (float16 in mixed
  precision; their float32 copies come after);
- time: the two steps alternate, and the median of `steps` each is printed.

Two lines of micro-benchmarks say where the time goes: a matrix product of the default run's
feed-forward shape in float32, in NumPy's own float16 matmul and in float16 multiplied in float32
(`autograd.precision.matmul`), and elementwise ops in float32 and float16.
"""
import json
import statistics
import time
import tracemalloc
from pathlib import Path

import numpy as np

from numpy_transformer.benchmarks.workloads import CONFIGS, make_batch
from numpy_transformer.benchmarks.train_step import NumpyTrainer

PRECISION_CONFIGS = ("default", "thesis", "gpt-default", "gpt-small")


class MixedTrainer(NumpyTrainer):
    """The same model, Adam and batch, stepped in mixed precision."""

    def __init__(self, config, batch, seed=0):
        from numpy_transformer.training.mixed_precision import MixedPrecision

        super().__init__(config, batch, seed)
        self.mixed = MixedPrecision(self.model)

    def step(self):
        start = time.perf_counter()
        self.optimizer.zero_grad()
        self.mixed.loss_and_gradients(self.loss)
        backward = time.perf_counter()
        self.optimizer.step()
        self.mixed.after_step()
        return backward - start, time.perf_counter() - backward


def graph_bytes(loss):
    """The bytes of the distinct arrays a graph keeps for backward: each op's output and its
    saved arrays (views counted once, with the array they view); the leaves (parameters) and
    views of them (a transposed weight) excluded."""
    from autograd.engine import topological_order

    def owner(array):
        return array if array.base is None else array.base

    nodes = topological_order(loss)
    leaves = {id(owner(node.data)) for node in nodes if node.creator is None}     # parameters, and views of them
    owners = {}
    for node in nodes:
        if node.creator is None:
            continue
        for array in (node.data, *[a for a in node.creator.saved or () if isinstance(a, np.ndarray)]):
            base = owner(array)
            if isinstance(base, np.ndarray) and id(base) not in leaves:
                owners[id(base)] = base.nbytes
    return sum(owners.values())


def activation_bytes(trainer, mixed):
    """(graph bytes, peak bytes of forward + backward) of one step."""
    model = trainer.mixed.half if mixed else trainer.model
    trainer.model.zero_grad()
    model.zero_grad()
    tracemalloc.start()
    try:
        loss = trainer.loss(model)
        held = graph_bytes(loss)
        loss.backward(np.asarray(1024.0 if mixed else 1.0, dtype=loss.dtype))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return held, peak


def time_steps(trainers, steps):
    for trainer in trainers.values():
        trainer.step()
    seconds = {name: [] for name in trainers}
    for _ in range(steps):
        for name, trainer in trainers.items():
            seconds[name].append(sum(trainer.step()))
    return {name: statistics.median(values) for name, values in seconds.items()}


def measure(config_name, steps=5):
    config = CONFIGS[config_name]
    batch = make_batch(config)
    trainers = {"float32": NumpyTrainer(config, batch), "mixed": MixedTrainer(config, batch)}
    with np.errstate(over="ignore", invalid="ignore"):
        memory = {name: activation_bytes(trainer, name == "mixed") for name, trainer in trainers.items()}
        seconds = time_steps(trainers, steps)
    return {name: {"graph_mb": round(memory[name][0] / 2 ** 20, 3), "peak_mb": round(memory[name][1] / 2 ** 20, 3),
                   "step_ms": round(seconds[name] * 1e3, 1)} for name in trainers}


def best_ms(function, repeats=5):
    function()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3


def micro_benchmarks():
    """ms of a (1024 × 128) · (128 × 512) product and of elementwise ops on 1024 × 512 entries."""
    from autograd.precision import matmul

    rng = np.random.default_rng(0)
    x, w, y = rng.standard_normal((1024, 128)), rng.standard_normal((128, 512)), rng.standard_normal((1024, 512))
    x16, w16, y16 = x.astype(np.float16), w.astype(np.float16), y.astype(np.float16)
    x32, w32, y32 = x.astype(np.float32), w.astype(np.float32), y.astype(np.float32)
    return {
        "matmul float32": best_ms(lambda: x32 @ w32),
        "matmul float16, NumPy's own": best_ms(lambda: x16 @ w16, repeats=2),
        "matmul float16, in float32": best_ms(lambda: matmul(x16, w16)),
        "multiply float32": best_ms(lambda: y32 * y32), "multiply float16": best_ms(lambda: y16 * y16),
        "max(x, 0) float32": best_ms(lambda: np.maximum(y32, 0)), "max(x, 0) float16": best_ms(lambda: np.maximum(y16, 0)),
        "cast float16 → float32": best_ms(lambda: y16.astype(np.float32)),
    }


def run(config_names=PRECISION_CONFIGS, steps=5, out_dir="runs/benchmarks", log=print, progress=None):
    """Measure, print the tables, write the figure and the JSON to `out_dir`, return the results.
    progress: shows the configurations measured (`inference.with_progress`)."""
    from numpy_transformer.inference import with_progress

    micro = micro_benchmarks()
    log("operations on NumPy arrays (best of 5, ms): "
        + "; ".join(f"{name} {ms:.2f}" for name, ms in micro.items()))
    log(f"{'config':<12} {'float32 graph MB':>16} {'mixed graph MB':>14} {'ratio':>6}  {'float32 peak MB':>15} "
        f"{'mixed peak MB':>13}  {'float32 ms':>10} {'mixed ms':>9} {'ratio':>6}")
    results = {}
    for name in with_progress(progress, config_names, desc="configurations", unit="config"):
        row = results[name] = measure(name, steps)
        single, mixed = row["float32"], row["mixed"]
        log(f"{name:<12} {single['graph_mb']:>16.2f} {mixed['graph_mb']:>14.2f} "
            f"{mixed['graph_mb'] / single['graph_mb']:>6.2f}  {single['peak_mb']:>15.2f} {mixed['peak_mb']:>13.2f}  "
            f"{single['step_ms']:>10.1f} {mixed['step_ms']:>9.1f} {mixed['step_ms'] / single['step_ms']:>6.2f}")
    log("graph: the arrays kept for backward; peak: NumPy's allocations during forward + backward, the "
        "gradients included; ms: the median of a whole step (forward, backward, Adam); random batches of each config's shape")
    summary = {"micro_ms": micro, "configs": results}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "precision_benchmark.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    log(f"wrote {draw(results, out / 'precision_benchmark.png')} and {out / 'precision_benchmark.json'}")
    return summary


def draw(results, path):
    """Bars of the graph's memory and of the step time, float32 beside mixed, per configuration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results)
    positions = np.arange(len(names))
    figure, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    for axis, key, label in ((axes[0], "graph_mb", "arrays kept for backward (MB)"),
                             (axes[1], "step_ms", "training step (ms)")):
        for offset, precision in ((-0.2, "float32"), (0.2, "mixed")):
            axis.bar(positions + offset, [results[name][precision][key] for name in names], 0.4, label=precision)
        axis.set_xticks(positions, names)
        axis.set_ylabel(label)
        axis.grid(alpha=0.3, axis="y")
    axes[0].legend()
    figure.suptitle("Mixed precision in NumPy: half the activation memory, more time", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
