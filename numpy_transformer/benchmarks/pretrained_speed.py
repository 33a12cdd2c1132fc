"""A GPT-2-small-sized model loaded from Hugging Face format, against `transformers`:
`numpy-transformer bench pretrained`.

The model is GPT-2 small's shape (12 layers, d_model 768, 12 heads, 50,257 tokens, 124 M
parameters) with the random weights `transformers` draws, saved by `save_pretrained` in a
temporary folder: the same files as the Hub's `gpt2`, which cannot be downloaded here.

- loading: wall time and peak memory of `pretrained.load_hugging_face` here and of
  `GPT2LMHeadModel.from_pretrained` there, each in a fresh child process (the peak resident set
  size above the one after importing the library, /proc/self/status);
- generation: greedy tokens per second after a prompt of PROMPT random tokens, one sequence,
  NEW_TOKENS new ones, with and without the key/value cache, here (`sampling.generate`) and in
  `transformers` (`generate(do_sample=False)`), the four alternated, median of `runs`. Random
  weights give nearly uniform logits, so float32 rounding can flip a near-tie: the output says
  how many of the generated tokens the two frameworks share.

`transformers` and PyTorch are benchmark dependencies, imported here only when the benchmark
runs; the thread count is the same for both (BLAS's, and `torch.set_num_threads`).
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from numpy_transformer.benchmarks.train_step import restart_peak_memory, status_kb
from numpy_transformer.inference import with_progress

PROMPT, NEW_TOKENS = 8, 32
GPT2_SMALL = {}                       # transformers.GPT2Config's defaults are GPT-2 small's
MISSING = ("the pretrained benchmark builds its GPT-2-sized model with `transformers` and compares with it: "
           "`pip install torch==2.13.0 transformers` (the CPU build)")


def save_random_gpt2(folder, shape=GPT2_SMALL):
    """Write a GPT-2 model of `shape` (GPT2Config fields; GPT-2 small's by default) with random
    weights to `folder` (config.json, model.safetensors). Returns the number of parameters."""
    import torch
    import transformers

    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(**shape))
    model.save_pretrained(folder)
    return sum(p.numel() for p in model.parameters())


def print_loading(framework, folder):
    """In a fresh process: print the seconds and the peak memory (MB) of loading the model in
    `folder` with `framework`, above the resident size after its imports."""
    if framework == "numpy":
        from numpy_transformer.interop.pretrained import load_hugging_face as load
    else:
        import transformers

        load = transformers.GPT2LMHeadModel.from_pretrained      # imports torch and the model's code now
    baseline = status_kb("VmRSS")
    measured = baseline is not None and restart_peak_memory()
    start = time.perf_counter()
    load(folder)
    seconds, peak = time.perf_counter() - start, status_kb("VmHWM")
    print(seconds, (peak - baseline) / 1024 if measured and peak is not None else None)


def loading(framework, folder):
    """(seconds, peak MB) of loading with `framework` in a child process; the peak None where it
    cannot be measured (`restart_peak_memory`)."""
    code = (f"from numpy_transformer.benchmarks.pretrained_speed import print_loading; "
            f"print_loading({framework!r}, {str(folder)!r})")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, encoding="utf-8",
                            errors="replace", env={**os.environ, "PYTHONIOENCODING": "utf-8"})
    if result.returncode != 0:
        raise RuntimeError(f"loading with {framework} failed:\n{result.stderr}")
    seconds, megabytes = result.stdout.split()[-2:]
    return float(seconds), None if megabytes == "None" else float(megabytes)


def time_generation(folder, threads, runs=3, progress=None):
    """({(framework, cached): [seconds…]}, {(framework, cached): tokens}) of greedy generation,
    the four runs alternated; progress: shows the rounds of four (`inference.with_progress`)."""
    import torch
    import transformers

    from numpy_transformer.interop.pretrained import load_hugging_face
    from numpy_transformer.sampling import generate

    torch.set_num_threads(threads)
    ours, theirs = load_hugging_face(folder), transformers.GPT2LMHeadModel.from_pretrained(folder).eval()
    prompt = np.random.default_rng(0).integers(0, ours.config.vocab_size - 1, (1, PROMPT))
    runners = {("numpy", cached): lambda cached=cached: generate(ours, prompt, NEW_TOKENS, None, temperature=0,
                                                                  use_cache=cached)[0]
               for cached in (True, False)}
    for cached in (True, False):
        runners[("transformers", cached)] = lambda cached=cached: _hf_generate(torch, theirs, prompt, cached)
    times, outputs = {key: [] for key in runners}, {}
    for _ in with_progress(progress, range(runs), desc="generation runs", unit="run"):
        for key, run in runners.items():
            start = time.perf_counter()
            outputs[key] = run()
            times[key].append(time.perf_counter() - start)
    return times, outputs


def _hf_generate(torch, model, prompt, cached):
    with torch.no_grad():
        tokens = model.generate(torch.from_numpy(prompt), max_new_tokens=NEW_TOKENS, do_sample=False,
                                use_cache=cached, pad_token_id=model.config.eos_token_id,
                                eos_token_id=None)
    return tokens[0].tolist()


def run(threads=1, runs=3, log=print, shape=GPT2_SMALL, progress=None):
    """Measure loading and generation (module docstring) of a GPT-2 model of `shape`; print the
    lines; return the results (None without transformers). progress: shows the timed runs of
    generation (`inference.with_progress`)."""
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        log(MISSING)
        return None
    with tempfile.TemporaryDirectory() as folder:
        parameters = save_random_gpt2(folder, shape)
        size = (Path(folder) / "model.safetensors").stat().st_size / 2 ** 20
        log(f"GPT-2 {'small' if shape == GPT2_SMALL else shape}, random weights: {parameters:,} parameters, "
            f"model.safetensors {size:,.0f} MB; {threads} thread(s)")
        results = {"parameters": parameters, "threads": threads, "prompt": PROMPT, "new_tokens": NEW_TOKENS}
        for framework in ("numpy", "transformers"):
            seconds, megabytes = loading(framework, folder)
            results[f"{framework}_load_seconds"] = round(seconds, 2)
            results[f"{framework}_load_peak_mb"] = None if megabytes is None else round(megabytes, 1)
            peak = "unavailable" if megabytes is None else f"{megabytes:7.1f} MB"
            log(f"  loading, {framework:<12}: {seconds:6.2f} s, peak memory {peak}")
        times, outputs = time_generation(folder, threads, runs, progress)
        for (framework, cached), seconds in times.items():
            rate = NEW_TOKENS / statistics.median(seconds)
            results[f"{framework}_{'cached' if cached else 'uncached'}_tokens_per_second"] = round(rate, 1)
            log(f"  generation, {framework:<12} {'with' if cached else 'without':>7} the cache: "
                f"{rate:7.1f} tokens per second")
    ours, theirs = outputs[("numpy", True)][PROMPT:], outputs[("transformers", True)][PROMPT:]
    results["shared_tokens"] = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), NEW_TOKENS)
    log(f"  the first {results['shared_tokens']} of the {NEW_TOKENS} greedy tokens are the same in both")
    return results
