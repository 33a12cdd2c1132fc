"""`bench complexity`: the analytic multiply-add counts against hand counts and PyTorch's FLOP
counter, the exponent fit on synthetic data, the key/value cache's bytes per token per layer
measured from real caches, and the command end to end on tiny sizes (no timing is asserted)."""
import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest

from numpy_transformer.benchmarks import complexity
from numpy_transformer.benchmarks.complexity import (CacheModel, attention_multiply_adds, cache_bytes,
                                                     decode_with_cache, build_cache_model, feed_forward_multiply_adds,
                                                     fit_exponents, layer_multiply_adds, measure_cache, training_flops)
from numpy_transformer.config import TransformerConfig


def products(*shapes):
    """Multiply-adds of the products (m × k) @ (k × n), one (m, k, n) each."""
    return sum(m * k * n for m, k, n in shapes)


def test_attention_multiply_adds_match_a_hand_count_of_every_product():
    T, d, heads = 3, 8, 4
    d_k = d // heads
    projections = products(*[(T, d, d)] * 4)                                      # X W_q, X W_k, X W_v, heads W_c
    scores = heads * products((T, d_k, T))                                        # Q Kᵀ per head
    weighted = heads * products((T, T, d_k))                                      # A V per head
    assert attention_multiply_adds(T, d) == projections + scores + weighted == 4 * 3 * 64 + 2 * 9 * 8


def test_feed_forward_and_layer_multiply_adds_match_a_hand_count():
    T, d = 3, 8
    assert feed_forward_multiply_adds(T, d) == products((T, d, 4 * d), (T, 4 * d, d)) == 1536
    assert feed_forward_multiply_adds(T, d, d_ff=5) == products((T, d, 5), (T, 5, d))
    assert layer_multiply_adds(T, d) == attention_multiply_adds(T, d) + feed_forward_multiply_adds(T, d)
    assert training_flops(1536) == 3 * 2 * 1536


def test_doubling_T_quadruples_the_T_squared_term_and_doubles_the_rest():
    T, d = 10, 6
    quadratic, linear = 2 * T * T * d, 4 * T * d * d
    assert attention_multiply_adds(2 * T, d) == 4 * quadratic + 2 * linear
    assert attention_multiply_adds(T, 2 * d) == 2 * quadratic + 4 * linear
    assert feed_forward_multiply_adds(2 * T, d) == 2 * feed_forward_multiply_adds(T, d)
    assert feed_forward_multiply_adds(T, 2 * d) == 4 * feed_forward_multiply_adds(T, d)


@pytest.mark.torch
def test_the_flop_counts_equal_pytorchs_counter_on_the_same_products_forward_and_backward():
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    T, d, heads = 12, 16, 4
    torch.manual_seed(0)
    x = torch.randn(1, T, d, requires_grad=True)
    W_q, W_k, W_v, W_c = (torch.nn.Linear(d, d) for _ in range(4))
    split = lambda z: z.reshape(1, T, heads, d // heads).transpose(1, 2)           # noqa: E731
    with FlopCounterMode(display=False) as attention_counter:
        Q, K, V = split(W_q(x)), split(W_k(x)), split(W_v(x))
        A = torch.softmax(Q @ K.transpose(-1, -2) / (d // heads) ** 0.5, dim=-1)
        out = W_c((A @ V).transpose(1, 2).reshape(1, T, d))
        out.backward(torch.randn_like(out))
    feed_forward = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.ReLU(), torch.nn.Linear(4 * d, d))
    with FlopCounterMode(display=False) as feed_forward_counter:
        out = feed_forward(x)
        out.backward(torch.randn_like(out))
    assert attention_counter.get_total_flops() == training_flops(attention_multiply_adds(T, d))
    assert feed_forward_counter.get_total_flops() == training_flops(feed_forward_multiply_adds(T, d))


def test_the_fit_recovers_known_exponents_from_synthetic_data():
    rng = np.random.default_rng(0)
    values = [64, 128, 256, 512, 1024]
    points = [{"flops": 7.0 * v ** 2, "seconds": 3e-9 * v ** 1.5 * rng.lognormal(0, 0.02),
               "peak_bytes": 4096 + 0.0 * v} for v in values]
    exponents = fit_exponents(values, points)
    assert exponents["flops"] == pytest.approx(2.0)
    assert exponents["seconds"] == pytest.approx(1.5, abs=0.05)
    assert exponents["peak_bytes"] == pytest.approx(0.0, abs=1e-9)
    mixed = fit_exponents(values, [{"flops": 4 * v * 64 ** 2 + 2 * v * v * 64, "seconds": 1, "peak_bytes": 1}
                                   for v in values])["flops"]
    assert 1.5 < mixed < 2.0                             # 4Td² + 2T²d at d = 64: between the two terms


TINY_DECODER_ONLY = TransformerConfig.decoder_only(50, d_model=16, n_heads=2, d_ff=32, n_layers=3, max_len=20,
                                                   dropout=0.0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_decoder_only_cache_holds_2_d_itemsize_bytes_per_token_per_layer(dtype):
    config = dataclasses.replace(TINY_DECODER_ONLY, dtype=dtype)
    model = build_cache_model(config)
    itemsize = np.dtype(dtype).itemsize
    for n_tokens in (4, 7):
        cache = decode_with_cache(model, n_tokens)
        assert len(cache) == 3
        assert cache_bytes(cache) == n_tokens * 3 * 2 * 16 * itemsize
    result = measure_cache(CacheModel("tiny", lambda: config), n_tokens=5)
    assert result["bytes_per_token_per_layer"] == result["expected_bytes_per_token_per_layer"] == 2 * 16 * itemsize
    assert result["cache_bytes_at_max_len"] == 20 * 3 * 2 * 16 * itemsize
    assert result["parameter_bytes"] == sum(p.data.nbytes for p in model.parameters())


def test_the_encoder_decoder_cache_adds_the_sources_keys_and_values():
    config = TransformerConfig(40, 50, d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=2,
                               max_len=12, dropout=0.0)
    cache = decode_with_cache(build_cache_model(config), 6)
    assert [cache_bytes(cache[i]["self"]) for i in range(2)] == [6 * 2 * 16 * 4] * 2
    assert [cache_bytes(cache[i]["cross"]) for i in range(2)] == [6 * 2 * 16 * 4] * 2    # a 6-token source
    result = measure_cache(CacheModel("tiny", lambda: config), n_tokens=6)
    assert result["bytes_per_token_per_layer"] == 2 * 16 * 4
    assert result["cache_bytes_at_max_len"] == 2 * 12 * 2 * 2 * 16 * 4          # self + cross, 2 layers


@pytest.mark.parametrize("before, after, shared", [(0.3, 0.8, False), (2.0, 1.9, False), (1.5, 2.6, True),
                                                    (3.1, 0.4, True)])
def test_the_load_note_says_other_processes_shared_the_cores_only_when_the_load_was_above_their_count(
        before, after, shared):
    note = complexity.load_note(before, after, cores=2)
    assert note.startswith(f"load average {before:.2f} at the start and {after:.2f} at the end on 2 cores: ")
    assert ("above the core count, other processes shared them" in note) == shared
    assert ("not above the core count, so every process had a core of its own" in note) == (not shared)


def test_the_table_reading_names_the_runs_own_load():
    text = complexity.why_exponents_differ({"repeats": 5, "load_average": [0.1, 0.2], "cores": 2})
    assert "load average 0.10 at the start and 0.20 at the end on 2 cores: not above the core count" in text
    assert "shared" not in text


def test_bench_complexity_quick_prints_both_tables_and_ends_with_the_json_line(tmp_path):
    figure = tmp_path / "complexity.png"
    result = subprocess.run([sys.executable, "-m", "numpy_transformer.cli", "bench", "complexity", "--quick",
                             "--repeats", "1", "--plot", str(figure), "--json"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "| attention | O(T²) · O(T²·d) · O(T²) | T = 32 … 128, d = 16 | 2 · 2 |" in out
    assert "| feed-forward | O(T) · O(T·d²) · O(T·d) | d = 8 … 32, T = 32 | 2 · 1 | 2.00 |" in out
    assert out.count("| encoder layer |") == 2 and "Reading the table" in out and "load average" in out
    assert "| lm preset | 2, 128 | 1,024 (1,024) | 0.12 MB at 64 tokens |" in out
    results = json.loads(out.strip().splitlines()[-1])
    assert [(s["component"], s["axis"]) for s in results["sweeps"]] == [
        (c, axis) for c in ("attention", "feed-forward", "encoder layer") for axis in "Td"]
    assert all(p["seconds"] > 0 and p["peak_bytes"] > 0 for s in results["sweeps"] for p in s["points"])
    assert figure.read_bytes()[:4] == b"\x89PNG"


def test_the_command_line_has_bench_complexity():
    from numpy_transformer.cli import build_parser
    from numpy_transformer.cli.bench import bench_complexity_command

    args = build_parser().parse_args(["bench", "complexity"])
    assert (args.quick, args.repeats, args.plot, args.json, args.blas_threads, args.run) == (
        False, 5, None, False, 1, bench_complexity_command)
    assert build_parser().parse_args(["bench", "complexity", "--quick", "--plot", "x.png"]).plot == "x.png"
