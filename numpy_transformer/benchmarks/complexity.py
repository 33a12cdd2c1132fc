"""The complexity notes' table, measured: `numpy-transformer bench complexity`.

The notes (§Complexity analysis) give, for T tokens of width d:

    component           time      compute (multiply-adds)      memory
    attention           O(T²)     O(T² · d)                    O(T²)
    feed-forward layer  O(T)      O(T · d²)                    O(T · d)
    transformer layer   O(T²)     O(T² · d + T · d²)           O(T² + T · d)

Each component here is this project's own: `MultiHeadAttention` (H = 4 heads, self-attention),
`FeedForward` (d_ff = 4d, ReLU) and `EncoderLayer` (both, with two LayerNorms), float32, batch 1,
dropout off, one forward and one backward pass (upstream gradient random, gradients for the
input and every parameter). For each:

- multiply-adds, counted analytically over the matrix products (the elementwise work of the
  softmax, ReLU, LayerNorm and biases, O(H T²) and O(T d), is left out):

      attention      4 T d²  (X W_q, X W_k, X W_v, heads W_c)  +  2 T² d  (Q Kᵀ and A V, all heads)
      feed-forward   2 T d d_ff = 8 T d²                         (x W₁, h W₂)
      encoder layer  12 T d² + 2 T² d

  The backward pass of C = A B computes dA = dC Bᵀ and dB = Aᵀ dC, each as many multiply-adds as
  the product itself, and every product here has both inputs requiring a gradient: forward +
  backward is exactly 3 × the forward count. FLOPs = 2 × multiply-adds.
- time: the median of a few runs (wall clock, one BLAS thread);
- memory: the peak of the bytes NumPy allocates during the step (`tracemalloc`, as
  `bench attention` measures), less the parameters' gradients (d², which the notes' column does
  not count): the activations kept for backward and the temporaries.

Each component is swept in T at a fixed d and in d at a fixed T, and the exponent of
time ∝ T^a (or d^a) is the least-squares slope on log-log (`attention.slope`), as is that of
memory and of the analytic FLOP count over the same sizes. The FLOP exponent is what the
formulas above predict for the sizes measured: the notes' exponent is the limit of one term,
and a sum such as 4 T d² + 2 T² d has the local exponent 1 + 2T²d / (4Td² + 2T²d) in T, which is
2 only when T ≫ 2d. So the sweeps sit where the notes' term dominates: attention's T sweep and
its d sweep keep T ≥ 4d (2 T² d ≥ 2 · 4 T d²), the layer's d sweep keeps d ≥ T/2 (its 12 T d²
then outweighs 2 T² d by 6d/T ≥ 3). Below such sizes the measured exponent is smaller than the notes' for a
reason in the formulas, not in the code; and time adds effects the multiply-add count does not
see: Python's fixed cost per op at small sizes, the BLAS running faster on bigger products
(GFLOP/s grows with d), and the T² elementwise passes of the softmax, which cost time in
proportion to H T², not T² d.

The key/value cache (`numpy_transformer.attention.cache`): after decoding a few tokens with a
real model, its bytes per token per layer, measured, are 2 · d · 4 (one key and one value of
width d = H · d_k, float32). For the project's presets and GPT-2 small's shape the table gives
the whole cache of one sequence at its longest against the parameters' bytes.
"""
import dataclasses
import os
import statistics
from pathlib import Path

import numpy as np

from numpy_transformer.benchmarks.attention_cost import slope, time_and_peak
from numpy_transformer.inference import with_progress

N_HEADS, FF_RATIO = 4, 4


def attention_multiply_adds(T, d):
    """Multiply-adds of one forward pass of multi-head self-attention: the four projections
    4 T d² and, over all heads, Q Kᵀ and A V, T² d each."""
    return 4 * T * d * d + 2 * T * T * d


def feed_forward_multiply_adds(T, d, d_ff=None):
    """Multiply-adds of one forward pass of the feed-forward network: x W₁ and h W₂, T d d_ff each."""
    return 2 * T * d * (FF_RATIO * d if d_ff is None else d_ff)


def layer_multiply_adds(T, d):
    """Multiply-adds of one forward pass of an encoder layer: attention + feed-forward."""
    return attention_multiply_adds(T, d) + feed_forward_multiply_adds(T, d)


def training_flops(multiply_adds):
    """FLOPs of forward + backward: 3 × the forward multiply-adds, 2 FLOPs each."""
    return 3 * 2 * multiply_adds


def _attention(d, rng):
    from numpy_transformer.attention import MultiHeadAttention

    attention = MultiHeadAttention(d, N_HEADS, rng)
    return attention, attention


def _feed_forward(d, rng):
    from numpy_transformer.nn import FeedForward

    feed_forward = FeedForward(d, FF_RATIO * d, rng)
    return feed_forward, feed_forward


def _encoder_layer(d, rng):
    from numpy_transformer.config import TransformerConfig
    from numpy_transformer.model import EncoderLayer

    config = TransformerConfig(1, 1, d_model=d, n_heads=N_HEADS, d_ff=FF_RATIO * d, dropout=0.0)
    layer = EncoderLayer(config, rng)
    return (lambda x: layer(x, None)), layer


@dataclasses.dataclass(frozen=True)
class Component:
    """A row of the notes' table: its O(·) for time, compute and memory, the exponents they
    claim in T and in d, the forward multiply-adds, and build(d, rng) → the module."""
    name: str
    time: str
    compute: str
    memory: str
    claimed: dict            # {"T": (compute, memory), "d": (compute, memory)}: the notes' exponents
    multiply_adds: callable
    build: callable


COMPONENTS = {c.name: c for c in (
    Component("attention", "O(T²)", "O(T²·d)", "O(T²)", {"T": (2, 2), "d": (1, 0)}, attention_multiply_adds,
              _attention),
    Component("feed-forward", "O(T)", "O(T·d²)", "O(T·d)", {"T": (1, 1), "d": (2, 1)}, feed_forward_multiply_adds,
              _feed_forward),
    Component("encoder layer", "O(T²)", "O(T²·d + T·d²)", "O(T² + T·d)", {"T": (2, 2), "d": (2, 1)},
              layer_multiply_adds, _encoder_layer),
)}


@dataclasses.dataclass(frozen=True)
class Sweep:
    """`component` measured at every value of `axis` ("T" or "d") in `values`, the other fixed."""
    component: str
    axis: str
    fixed: int
    values: tuple

    def sizes(self):
        """(T, d) of every point."""
        return [(v, self.fixed) if self.axis == "T" else (self.fixed, v) for v in self.values]

    def describe(self):
        other = "d" if self.axis == "T" else "T"
        return f"{self.axis} = {', '.join(map(str, self.values))} at {other} = {self.fixed}"


SWEEPS = (                            # the default run: about 30 s of one core's time
    Sweep("attention", "T", 64, (256, 512, 1024, 2048, 4096)),       # T ≥ 4d: 2T²d ≥ 2 · 4Td²
    Sweep("attention", "d", 2048, (32, 64, 128, 256, 512)),          # T ≥ 4d
    Sweep("feed-forward", "T", 128, (256, 512, 1024, 2048, 4096)),
    Sweep("feed-forward", "d", 512, (64, 128, 256, 512, 1024)),
    Sweep("encoder layer", "T", 64, (256, 512, 1024, 2048, 4096)),   # T ≥ 4d: the T² terms lead
    Sweep("encoder layer", "d", 128, (64, 128, 256, 512, 1024)),     # d ≥ T/2: 12Td² ≥ 3 · 2T²d
)
QUICK_SWEEPS = (                      # seconds: the same shapes, small, where fixed costs blur the exponents
    Sweep("attention", "T", 16, (32, 64, 128)),
    Sweep("attention", "d", 128, (8, 16, 32)),
    Sweep("feed-forward", "T", 16, (32, 64, 128)),
    Sweep("feed-forward", "d", 32, (8, 16, 32)),
    Sweep("encoder layer", "T", 16, (32, 64, 128)),
    Sweep("encoder layer", "d", 32, (8, 16, 32)),
)


def measure_point(component, T, d, repeats, seed=0):
    """{"T", "d", "seconds" (the median), "peak_bytes", "flops"} of one forward + backward of
    `component` on x ∈ ℝ^{1×T×d}; peak_bytes leaves out the parameters' gradients."""
    from autograd import Tensor

    rng = np.random.default_rng(seed)
    forward, module = component.build(d, rng)
    x = Tensor(rng.standard_normal((1, T, d)).astype(np.float32), requires_grad=True)
    g = rng.standard_normal((1, T, d)).astype(np.float32)

    def step():
        forward(x).backward(g)
        x.grad = None
        module.zero_grad()

    times, peak = time_and_peak(step, repeats)
    gradients = sum(p.data.nbytes for p in module.parameters())
    return {"T": T, "d": d, "seconds": statistics.median(times), "peak_bytes": peak - gradients,
            "flops": training_flops(component.multiply_adds(T, d))}


def measure_sweep(sweep, repeats):
    """The sweep's points and the fitted exponents of FLOPs, time and memory against its axis."""
    component = COMPONENTS[sweep.component]
    points = [measure_point(component, T, d, repeats) for T, d in sweep.sizes()]
    return {"component": sweep.component, "axis": sweep.axis, "fixed": sweep.fixed, "points": points,
            "exponents": fit_exponents(sweep.values, points),
            "claimed": dict(zip(("compute", "memory"), component.claimed[sweep.axis]))}


def fit_exponents(values, points):
    """{"flops", "seconds", "peak_bytes"}: the exponent a of each ∝ value^a, the least-squares
    slope of its log against log(value) over all the points."""
    return {key: slope(values, [p[key] for p in points], fit_from=min(values))
            for key in ("flops", "seconds", "peak_bytes")}


# --- the key/value cache ----------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class CacheModel:
    """A model whose cache is measured: `config()` → its TransformerConfig (encoder-decoder or
    decoder-only), whose max_len is the longest sequence it decodes."""
    name: str
    config: callable


def _preset_model(preset, bench_config):
    """The model of `preset` with the vocabularies of the benchmark configuration of its shape."""
    def config():
        from numpy_transformer.benchmarks.workloads import CONFIGS
        from numpy_transformer.training.presets import PRESETS

        bench, max_len = CONFIGS[bench_config], PRESETS[preset].data["max_len"]
        return dataclasses.replace(bench.model_config(), max_len=max_len)
    return CacheModel(f"{preset} preset", config)


def _gpt2_small():
    from numpy_transformer.config import TransformerConfig
    return TransformerConfig.decoder_only(50257, d_model=768, n_heads=12, d_ff=3072, n_layers=12, max_len=1024,
                                          activation="gelu_tanh", dropout=0.0)


CACHE_MODELS = (_preset_model("default", "default"), _preset_model("thesis-8-heads", "thesis"),
                _preset_model("base", "base"), _preset_model("lm", "gpt-default"),
                CacheModel("GPT-2 small", _gpt2_small))
QUICK_CACHE_MODELS = (_preset_model("default", "default"), _preset_model("lm", "gpt-default"))
DECODED = 8                          # tokens decoded before the cache is measured


def cache_bytes(cache):
    """The bytes of every array in a cache dict (nested: per layer, "self" and "cross")."""
    return sum(cache_bytes(value) if isinstance(value, dict) else value.data.nbytes for value in cache.values())


def build_cache_model(config, seed=0):
    from numpy_transformer.language_model import DecoderOnlyTransformer
    from numpy_transformer.model import Transformer

    model_class = DecoderOnlyTransformer if config.kind == "decoder-only" else Transformer
    return model_class(config, np.random.default_rng(seed)).eval()


def decode_with_cache(model, n_tokens, seed=0):
    """The cache after feeding `n_tokens` tokens one at a time to `model`, one sequence (an
    encoder-decoder model first encodes a source of n_tokens tokens). Returns the cache: per
    decoder layer i, cache[i] = {"k", "v"} (decoder-only) or {"self": {…}, "cross": {…}}."""
    from numpy_transformer.decoding import IncrementalDecoder

    rng, config = np.random.default_rng(seed), model.config
    if config.kind == "decoder-only":
        tokens, cache = rng.integers(3, config.vocab_size, (1, n_tokens)), {}
        for t in range(n_tokens):
            model(tokens[:, t:t + 1], cache, t)
        return cache
    decoder = IncrementalDecoder(model, rng.integers(3, config.src_vocab_size, (1, n_tokens)))
    for token in rng.integers(3, config.tgt_vocab_size, n_tokens):
        decoder.log_probs(np.array([token]))
    return decoder.cache


def measure_cache(cache_model, n_tokens=DECODED):
    """The model's cache after `n_tokens` tokens: its bytes per token per layer, measured, and the
    cache of one sequence at max_len against the parameters' bytes. A decoder-only model caches
    the keys and values of the tokens it has read; an encoder-decoder also those of the source
    (cross-attention), here a source as long as the output: two sequences of keys and values."""
    from numpy_transformer.model import count_parameters

    config = cache_model.config()
    model = build_cache_model(config)
    cache = decode_with_cache(model, n_tokens)
    layers, sequences = len(cache), 1 if config.kind == "decoder-only" else 2
    per_token = cache_bytes(cache) / (n_tokens * layers * sequences)
    itemsize = np.dtype(config.dtype).itemsize
    return {"model": cache_model.name, "layers": layers, "d_model": config.d_model, "max_len": config.max_len,
            "bytes_per_token_per_layer": per_token, "expected_bytes_per_token_per_layer": 2 * config.d_model * itemsize,
            "cache_bytes_at_max_len": per_token * layers * sequences * config.max_len,
            "parameter_bytes": count_parameters(model) * itemsize}


# --- the run, its tables and its figure ---------------------------------------------------------

def run(sweeps=SWEEPS, cache_models=CACHE_MODELS, repeats=5, plot_path=None, log=print, progress=None):
    """Measure every sweep and every model's cache, print the two tables (and why the exponents
    differ from the notes'), draw the figure to `plot_path` if given; return the results.
    progress: shows the sweeps measured (`inference.with_progress`)."""
    load_before = os.getloadavg()[0]
    results = {"repeats": repeats, "sweeps": [], "cache": []}
    for sweep in with_progress(progress, sweeps, desc="sweeps", unit="sweep"):
        result = measure_sweep(sweep, repeats)
        results["sweeps"].append(result)
        log(f"{sweep.component}, {sweep.describe()}: " + "; ".join(
            f"{p[sweep.axis]} → {p['seconds'] * 1e3:.1f} ms, {p['peak_bytes'] / 2**20:.1f} MB, "
            f"{p['flops'] / p['seconds'] / 1e9:.1f} GFLOP/s" for p in result["points"]))
    results["cache"] = [measure_cache(model) for model in cache_models]
    results["load_average"] = [load_before, os.getloadavg()[0]]
    results["cores"] = os.cpu_count()
    log("")
    log(complexity_table(results["sweeps"]))
    log("")
    log(why_exponents_differ(results))
    log("")
    log(cache_table(results["cache"]))
    log("")
    log(cache_verdict(results["cache"]))
    if plot_path is not None:
        log(f"\nwrote {plot(results['sweeps'], plot_path)}")
    return results


def complexity_table(sweep_results):
    """The notes' O(·) beside the exponents: the notes' (compute, memory), the analytic FLOP
    count's over the sizes measured, the measured time's and memory's; and GFLOP/s."""
    lines = ["| component | the notes: time · compute · memory | sweep | the notes' exponent, compute · memory "
             "| FLOP exponent (formula) | time exponent | memory exponent | GFLOP/s, smallest → largest |",
             "|---|---|---|---|---|---|---|---|"]
    for r in sweep_results:
        c, e, points = COMPONENTS[r["component"]], r["exponents"], r["points"]
        values = [p[r["axis"]] for p in points]
        other = "d" if r["axis"] == "T" else "T"
        rates = [p["flops"] / p["seconds"] / 1e9 for p in points]
        lines.append(f"| {c.name} | {c.time} · {c.compute} · {c.memory} "
                     f"| {r['axis']} = {values[0]} … {values[-1]}, "
                     f"{other} = {r['fixed']} | {r['claimed']['compute']} · {r['claimed']['memory']} "
                     f"| {e['flops']:.2f} | {e['seconds']:.2f} | {e['peak_bytes']:.2f} "
                     f"| {rates[0]:.1f} → {rates[-1]:.1f} |")
    return "\n".join(lines)


def why_exponents_differ(results):
    """What the reader should take from the table, with this run's load."""
    return "\n".join([
        "Reading the table: the notes' exponent is the limit of one term; the FLOP exponent is the formula's over the",
        "sizes measured (attention 4Td² + 2T²d reaches 2 in T only when T ≫ 2d, the layer 12Td² + 2T²d only when",
        "T ≫ 6d; in d the layer reaches 2 only when d ≫ T/6). Time follows the FLOPs where the products are large;",
        "at small sizes Python's fixed cost per op flattens it, and the BLAS's speed changes with the shape (the",
        "GFLOP/s column). Attention's T² work is partly elementwise (softmax, its VJP: H·T² values, not T²·d),",
        "and its memory is H·T² (H = 4 heads here) plus T·d terms; memory leaves out the parameters' gradients.",
        f"Timings: the median of {results['repeats']} timed runs per size, one BLAS thread;",
        load_note(*results["load_average"], results.get("cores") or os.cpu_count())])


def load_note(before, after, cores):
    """The load average at the start and at the end of the run against the core count, and what
    it means for the timings: above the count, other processes shared the cores."""
    measured = f"load average {before:.2f} at the start and {after:.2f} at the end on {cores} cores"
    if max(before, after) > cores:
        return f"{measured}: above the core count, other processes shared them, so single points are noisy."
    return f"{measured}: not above the core count, so every process had a core of its own."


def cache_table(cache_results):
    """Bytes per token per layer, measured and 2·d·itemsize; one sequence's cache at max_len
    against the parameters."""
    lines = ["| model | layers, d | KV cache bytes per token per layer, measured (2·d·4) | one sequence at "
             "max_len | parameters | cache / parameters | sequences whose cache equals the parameters |",
             "|---|---|---|---|---|---|---|"]
    for r in cache_results:
        ratio = r["cache_bytes_at_max_len"] / r["parameter_bytes"]
        lines.append(f"| {r['model']} | {r['layers']}, {r['d_model']} | {r['bytes_per_token_per_layer']:,.0f} "
                     f"({r['expected_bytes_per_token_per_layer']:,}) | {_megabytes(r['cache_bytes_at_max_len'])} "
                     f"at {r['max_len']} tokens | {_megabytes(r['parameter_bytes'])} | {ratio:.1%} "
                     f"| {1 / ratio:,.1f} |")
    return "\n".join(lines)


def cache_verdict(cache_results):
    """The notes' sentence on the cache's memory against the measurement."""
    ratios = [r["cache_bytes_at_max_len"] / r["parameter_bytes"] for r in cache_results]
    largest = max(cache_results, key=lambda r: r["cache_bytes_at_max_len"])
    sequences = largest["parameter_bytes"] / largest["cache_bytes_at_max_len"]
    return "\n".join([
        "The notes: KV caching \"comes at a high memory cost\". Measured: 2·d·4 bytes per token per layer (a key",
        f"and a value of width d, float32); one sequence at its longest holds {min(ratios):.1%} to {max(ratios):.1%}",
        "of the parameters' bytes here. The cost is per sequence and per token, batch × length × layers × 2d × 4:",
        f"{sequences:.1f} sequences of {largest['max_len']} tokens of {largest['model']} hold as much as its "
        "parameters.",
        "What it buys in decoding time is `bench decode`'s measurement."])


def _megabytes(n_bytes):
    return f"{n_bytes / 2**20:,.2f} MB" if n_bytes < 2**30 else f"{n_bytes / 2**30:,.2f} GB"


def plot(sweep_results, path):
    """Four log-log panels: time and memory against T and against d, every component with its
    fitted slope."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(2, 2, figsize=(11, 8))
    for column, axis_name in enumerate(("T", "d")):
        panels = (("seconds", "time, forward + backward (s)", 1.0, "compute"),
                  ("peak_bytes", "peak memory of the step (MB)", 2.0 ** -20, "memory"))
        for row, (key, unit, scale, claim) in enumerate(panels):
            axis = axes[row, column]
            for r in (r for r in sweep_results if r["axis"] == axis_name):
                values = [p[axis_name] for p in r["points"]]
                other = "d" if axis_name == "T" else "T"
                axis.loglog(values, [p[key] * scale for p in r["points"]], "o-",
                            label=f"{r['component']}, {other} = {r['fixed']}: slope {r['exponents'][key]:.2f} "
                                  f"(FLOPs {r['exponents']['flops']:.2f}, notes {r['claimed'][claim]})")
            ticks = sorted({p[axis_name] for r in sweep_results if r["axis"] == axis_name for p in r["points"]})
            axis.set_xticks(ticks, [str(t) for t in ticks])
            axis.minorticks_off()
            axis.set_xlabel(f"{axis_name} ({'tokens' if axis_name == 'T' else 'model width'})")
            axis.set_ylabel(unit)
            axis.grid(True, which="both", alpha=0.3)
            axis.legend(fontsize=7)
    figure.suptitle("The complexity notes' table, measured: float32, batch 1, 4 heads, d_ff = 4d, one BLAS thread")
    figure.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
