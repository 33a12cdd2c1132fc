"""Gradient checkpointing measured: `numpy-transformer bench memory`.

A decoder-only model (d_model 64, 4 heads, d_ff 256, 2,000 words) of L = 1, 2, 4, 8, 16, 24
layers takes one training step (forward, loss, backward) on a batch of 16 sequences of 64
tokens, with and without `gradient_checkpointing` (⌈√L⌉ segments of ⌈√L⌉ layers). For each:

- the activation memory: the peak of NumPy's allocations during the step (tracemalloc, which
  NumPy reports every array buffer to), less the parameters' gradients, which any step keeps;
- the step's time (the best of 3).

The fitted exponent of activation memory against L (least squares on log–log, L ≥ 2) should be
about 1 without checkpointing (every layer's activations kept until backward) and about 0.5 with
it (one segment's activations plus the ⌈√L⌉ segment inputs); the time grows by about one more
forward pass.
"""
import json
import math
from pathlib import Path

import numpy as np

from numpy_transformer.benchmarks.attention_cost import slope, time_and_peak

LAYERS = (1, 2, 4, 8, 16, 24)
MODEL = dict(vocab_size=256, d_model=64, n_heads=4, d_ff=256, dropout=0.1, max_len=128)
BATCH, LENGTH = 8, 128


def build(n_layers, checkpointing, seed=0):
    from numpy_transformer.config import TransformerConfig
    from numpy_transformer.language_model import DecoderOnlyTransformer

    config = TransformerConfig.decoder_only(n_layers=n_layers, gradient_checkpointing=checkpointing, **MODEL)
    return DecoderOnlyTransformer(config, np.random.default_rng(seed))


def training_step(model, ids):
    import autograd.functional as F

    model.zero_grad()
    loss = F.cross_entropy(model(ids[:, :-1]), ids[:, 1:], ignore_index=model.config.pad_id)
    loss.backward()


def measure(n_layers, checkpointing, repeats=3):
    """(activation bytes at the peak, best step time in seconds) of one training step."""
    model = build(n_layers, checkpointing)
    ids = np.random.default_rng(1).integers(1, MODEL["vocab_size"], (BATCH, LENGTH + 1))
    times, peak = time_and_peak(lambda: training_step(model, ids), repeats)
    gradients = sum(p.data.nbytes for p in model.parameters())
    return peak - gradients, min(times)


def run(layers=LAYERS, out_dir="runs/benchmarks", log=print, progress=None):
    """Measure every depth both ways, print the table and the exponents, write the figure and
    the JSON; return the results. progress: shows the depths measured (`inference.with_progress`)."""
    from numpy_transformer.inference import with_progress

    results = {"plain": [], "checkpointed": []}
    log(f"decoder-only model {MODEL}, batch {BATCH} × {LENGTH} tokens, one training step")
    log(f"{'layers':>6}  {'plain MB':>9} {'ms':>7}  {'checkpointed MB':>15} {'ms':>7}")
    for n_layers in with_progress(progress, layers, desc="depths", unit="depth"):
        row = {name: measure(n_layers, name == "checkpointed") for name in results}
        for name, (memory, seconds) in row.items():
            results[name].append({"layers": n_layers, "activation_mb": round(memory / 2**20, 2),
                                  "step_ms": round(seconds * 1e3, 1)})
        log(f"{n_layers:>6}  {row['plain'][0] / 2**20:>9.1f} {row['plain'][1] * 1e3:>7.0f}  "
            f"{row['checkpointed'][0] / 2**20:>15.1f} {row['checkpointed'][1] * 1e3:>7.0f}")
    exponents = {name: slope(layers, [r["activation_mb"] for r in rows], fit_from=2) for name, rows in results.items()}
    log(f"fitted exponent of activation memory against L (L ≥ 2): plain {exponents['plain']:.2f} (expected ≈ 1), "
        f"checkpointed {exponents['checkpointed']:.2f} (expected ≈ 0.5)")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    summary = {"model": MODEL, "batch": BATCH, "length": LENGTH, "results": results, "exponents": exponents}
    (out / "memory_benchmark.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    log(f"wrote {draw(results, exponents, out / 'memory_benchmark.png')} and {out / 'memory_benchmark.json'}")
    return summary


def draw(results, exponents, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 4))
    for name, rows in results.items():
        axis.loglog([r["layers"] for r in rows], [r["activation_mb"] for r in rows], "o-",
                    label=f"{name} (slope {exponents[name]:.2f})")
    axis.set_xlabel("layers L")
    axis.set_ylabel("activation memory of a step (MB)")
    axis.set_title("Gradient checkpointing: memory O(L) → O(√L)", fontsize=10)
    axis.grid(alpha=0.3, which="both")
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
