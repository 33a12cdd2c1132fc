"""How the cost of each attention of chapter 2 grows with n: `numpy-transformer bench attention`.

For n = 256, 512, …, max_n (d = 64, float32, batch 1, one head) it runs every variant
forward and backward (upstream gradient random, gradients for q, k, v and any projection)
and records:

- time: the best of a few runs (fewer at large n), wall clock;
- peak memory: the peak of the bytes allocated during one forward + backward, measured with
  `tracemalloc`. NumPy reports every array buffer it allocates to tracemalloc, so this counts
  exactly the arrays (and Python objects) the computation creates, temporaries freed before the
  end included, and nothing allocated before (q, k, v, the pattern); unlike the process's
  resident size it can be reset between variants and does not depend on what the allocator
  keeps. It is the arrays' bytes, not the resident memory of the process.

Then it fits the slope of log time and log memory against log n on n ≥ 1024 (below, fixed
costs blur the exponent): 2 for the n × n methods, 1 for the linear ones. It writes a log-log
figure, a Markdown table and the raw numbers (JSON) to the output folder, and prints the table.

BLAS runs on one thread (`blas_threads`): on a shared 2-core machine OpenBLAS's two threads
wait for each other, which made a 64 × 4096 × 64 product 200 times slower in some runs; one
thread gives stable figures, the same for every variant.
"""
import json
import math
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from autograd import Tensor
from numpy_transformer.attention import (AttentionGraph, bigbird_pattern, blockwise_attention, linear_attention,
                                         linformer_attention, scaled_dot_product_attention, sliding_window_attention,
                                         sparse_attention)

D_HEAD = 64
WINDOW, BLOCK, K_PROJ, N_FEATURES, BIGBIRD_BLOCK = 128, 128, 256, 64, 64
FIT_FROM = 1024


@dataclass(frozen=True)
class Variant:
    """name, its cost in the complexity notes' terms, and setup(n, rng) → attention(q, k, v)
    (the setup builds what the variant keeps between calls: a pattern's graph, projections)."""
    name: str
    time_complexity: str
    memory_complexity: str
    setup: Callable


def _full(n, rng):
    return lambda q, k, v: scaled_dot_product_attention(q, k, v)[0]


def _sparse(n, rng):
    graph = AttentionGraph.from_pattern(bigbird_pattern(n, BIGBIRD_BLOCK, rng, window_blocks=3, global_blocks=1,
                                                        random_blocks=1))
    return lambda q, k, v: sparse_attention(q, k, v, graph)


def _window(n, rng):
    return lambda q, k, v: sliding_window_attention(q, k, v, WINDOW)


def _linear(feature_map, causal=False):
    def setup(n, rng):
        omega = rng.standard_normal((D_HEAD, N_FEATURES)).astype(np.float32)
        return lambda q, k, v: linear_attention(q, k, v, feature_map, causal, omega=omega)
    return setup


def _linformer(n, rng):
    E, F_ = (Tensor((rng.standard_normal((K_PROJ, n)) / math.sqrt(n)).astype(np.float32), requires_grad=True)
             for _ in range(2))
    return lambda q, k, v: linformer_attention(q, k, v, E, F_)


def _blockwise(n, rng):
    return lambda q, k, v: blockwise_attention(q, k, v, BLOCK)


VARIANTS = [
    Variant("full", "O(n² d)", "O(n²)", _full),
    Variant(f"sparse (BigBird, blocks of {BIGBIRD_BLOCK}: 3 window, 1 global, 1 random)", "O(n · |N(i)| · d)",
            "O(n · |N(i)|)", _sparse),
    Variant(f"window (w = {WINDOW})", "O(n w d)", "O(n w)", _window),
    Variant("linear (elu + 1)", "O(n d²)", "O(n d + d²)", _linear("elu")),
    Variant(f"linear (FAVOR+, m = {N_FEATURES})", "O(n m d)", "O(n m)", _linear("favor")),
    Variant("linear causal (elu + 1, prefix sums)", "O(n d²)", "O(n d²)", _linear("elu", causal=True)),
    Variant(f"Linformer (k′ = {K_PROJ})", "O(n k′ d)", "O(n k′)", _linformer),
    Variant(f"block-wise exact (B = {BLOCK})", "O(n² d)", "O(n B)", _blockwise),
]


def sizes(max_n):
    return [256 * 2 ** i for i in range(int(math.log2(max_n / 256)) + 1)]


def repeats(n):
    return 5 if n <= 1024 else 3 if n <= 4096 else 1


def forward_backward(attention, q, k, v, g):
    out = attention(q, k, v)
    out.backward(g)
    for x in (q, k, v):
        x.grad = None


def time_and_peak(step, repeats):
    """([seconds of each of `repeats` timed calls of step()], the peak bytes allocated during one
    more call, by tracemalloc), after one untimed warm-up call."""
    step()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    tracemalloc.start()
    try:
        step()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return times, peak


def measure(variant, n, seed=0):
    """(best time in seconds, peak bytes) of one forward + backward of `variant` at length n."""
    rng = np.random.default_rng(seed)
    q, k, v = (Tensor(rng.standard_normal((1, n, D_HEAD)).astype(np.float32), requires_grad=True) for _ in range(3))
    g = rng.standard_normal((1, n, D_HEAD)).astype(np.float32)
    attention = variant.setup(n, rng)
    times, peak = time_and_peak(lambda: forward_backward(attention, q, k, v, g), repeats(n))
    return min(times), peak


def slope(ns, values, fit_from=FIT_FROM):
    """The least-squares slope of log(value) against log(n) over n ≥ fit_from: the exponent
    of a growth value ∝ n^slope."""
    points = [(math.log(n), math.log(value)) for n, value in zip(ns, values) if n >= fit_from]
    if len(points) < 2:
        return float("nan")
    x, y = np.array(points).T
    return float(np.polyfit(x, y, 1)[0])


def run(max_n=8192, out_dir="runs/benchmarks", log=print):
    """Measure every variant at every size, write the figure, table and JSON; return the results."""
    ns = sizes(max_n)
    results, started = {}, time.perf_counter()
    for variant in VARIANTS:
        seconds, peaks = zip(*(measure(variant, n) for n in ns))
        results[variant.name] = {"n": ns, "seconds": list(seconds), "peak_bytes": list(peaks),
                                 "time_complexity": variant.time_complexity,
                                 "memory_complexity": variant.memory_complexity,
                                 "time_slope": slope(ns, seconds), "memory_slope": slope(ns, peaks)}
        log(f"{variant.name}: " + ", ".join(f"n={n} {t * 1e3:.1f} ms {m / 2**20:.1f} MB"
                                            for n, t, m in zip(ns, seconds, peaks)))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "attention_benchmark.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    minutes = (time.perf_counter() - started) / 60
    table = (markdown_table(results) + "\n\n" + goals(results)
             + f"\n\n(One run, n = {ns[0]} … {ns[-1]}: {minutes:.1f} minutes of measurement.)\n")
    (out / "attention_benchmark.md").write_text(table, encoding="utf-8")
    plot(results, out / "attention_benchmark.png")
    log(table)
    return results


def markdown_table(results):
    """Time (ms) and peak memory (MB) per n, the fitted slopes, and the expected complexity."""
    ns = next(iter(results.values()))["n"]
    header = ("| variant | expected time, memory | " + " | ".join(f"n = {n}" for n in ns)
              + " | time slope | memory slope |")
    lines = [header, "|" + "---|" * (len(ns) + 4)]
    for name, r in results.items():
        cells = [f"{t * 1e3:.0f} ms, {m / 2**20:.1f} MB" for t, m in zip(r["seconds"], r["peak_bytes"])]
        expected = f"{r['time_complexity']}, {r['memory_complexity']}".replace("|", "\\|")
        lines.append(f"| {name} | {expected} | " + " | ".join(cells)
                     + f" | {r['time_slope']:.2f} | {r['memory_slope']:.2f} |")
    return "\n".join(lines)


def goals(results):
    """The issue's three goals, each with the measured figures and met / missed."""
    full = results["full"]
    at = full["n"].index(4096) if 4096 in full["n"] else None
    lines = ["Goals:"]
    linear_names = [name for name in results if name.startswith(("linear (", "Linformer", "window", "block-wise"))]
    for name in linear_names:
        s = results[name]["memory_slope"]
        verdict = f"not measured (the slope needs two sizes n ≥ {FIT_FROM})" if math.isnan(s) else \
            f"slope {s:.2f} — {'met' if s <= 1.2 else 'missed'}"
        lines.append(f"- memory of {name} grows ~linearly: {verdict}")
    if at is None:
        lines.append("- (n = 4096 not measured: run with --max-n 4096 or more for the two goals at n = 4096)")
        return "\n".join(lines)
    linear = results["linear (elu + 1)"]
    speedup = full["seconds"][at] / linear["seconds"][at]
    lines.append(f"- at n = 4096 linear attention is ≥ 10× faster than full attention (forward + backward): "
                 f"{full['seconds'][at] * 1e3:.0f} ms / {linear['seconds'][at] * 1e3:.1f} ms = {speedup:.0f}× — "
                 f"{'met' if speedup >= 10 else 'missed'}")
    blockwise = results[next(name for name in results if name.startswith("block-wise"))]
    ratio = blockwise["peak_bytes"][at] / full["peak_bytes"][at]
    lines.append(f"- at n = 4096 block-wise peak memory ≤ 1/10 of full attention's: "
                 f"{blockwise['peak_bytes'][at] / 2**20:.1f} MB / {full['peak_bytes'][at] / 2**20:.1f} MB = "
                 f"1/{1 / ratio:.0f} — {'met' if ratio <= 0.1 else 'missed'}")
    return "\n".join(lines)


def plot(results, path):
    """Two log-log panels, time and peak memory against n, with slope-1 and slope-2 guides."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(13, 7.5))
    panels = ((axes[0], "seconds", "time_slope", "time, forward + backward (s)", 1.0),
              (axes[1], "peak_bytes", "memory_slope", "peak memory of the arrays (MB)", 2.0 ** -20))
    ns = np.array(next(iter(results.values()))["n"], dtype=float)
    for axis, key, slope_key, unit, scale in panels:
        for name, r in results.items():
            axis.loglog(r["n"], np.array(r[key]) * scale, "o-", label=f"{name} (slope {r[slope_key]:.2f})")
        top = max(np.array(r[key]).max() for r in results.values()) * scale
        for power, style in ((1, ":"), (2, "--")):
            axis.loglog(ns, top * (ns / ns[-1]) ** power, "k" + style, linewidth=0.8, label=f"∝ n^{power}")
        axis.set_xticks(ns, [str(int(n)) for n in ns])
        axis.minorticks_off()
        axis.set_xlabel("n (tokens), d = 64, float32")
        axis.set_ylabel(unit)
        axis.grid(True, which="major", alpha=0.3)
        axis.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=1)
    figure.suptitle("Attention variants of chapter 2 on a shared 2-core machine (one BLAS thread)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
