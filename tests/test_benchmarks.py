"""The benchmarks (commands, not timed tests): a tiny attention run writes its table, figure and
numbers, with a row and a fitted slope for every variant; `bench train-step` and `bench decode`
run on a tiny configuration and end with their JSON line."""
import json
import subprocess
import sys

import numpy as np
import pytest

from numpy_transformer.benchmarks.attention_cost import VARIANTS, goals as attention_goals, markdown_table, run, sizes, \
    slope
from numpy_transformer.benchmarks.workloads import CONFIGS, EOS_ID, PAD_ID, SOS_ID, make_batch
from numpy_transformer.benchmarks.decode import build_model, never_generated_eos
from numpy_transformer.benchmarks.train_step import goals
from numpy_transformer.decoding import greedy_decode
from run_helpers import needs_two_cores


def test_sizes_double_from_256_to_the_maximum():
    assert sizes(8192) == [256, 512, 1024, 2048, 4096, 8192]


def test_the_slope_of_a_power_law_is_its_exponent():
    ns = [1024, 2048, 4096]
    assert np.isclose(slope(ns, [3e-9 * n ** 2 for n in ns]), 2)
    assert np.isclose(slope(ns, [5 * n for n in ns]), 1)


def test_a_tiny_run_writes_the_table_figure_and_numbers(tmp_path):
    results = run(max_n=256, out_dir=tmp_path, log=lambda line: None)
    assert list(results) == [v.name for v in VARIANTS]
    assert all(r["seconds"][0] > 0 and r["peak_bytes"][0] > 0 for r in results.values())
    assert json.loads((tmp_path / "attention_benchmark.json").read_text())["full"]["n"] == [256]
    table = (tmp_path / "attention_benchmark.md").read_text()
    assert table.count("\n| ") == len(VARIANTS) and "| n = 256 |" in table        # one row per variant
    assert (tmp_path / "attention_benchmark.png").read_bytes()[:4] == b"\x89PNG"


def test_the_goals_say_met_or_missed_with_the_figures():
    n = [1024, 2048, 4096]
    fake = {name: {"n": n, "seconds": [1.0, 2.0, 4.0], "peak_bytes": [2 ** 20, 2 ** 21, 2 ** 22],
                   "time_complexity": "O(n)", "memory_complexity": "O(n)", "time_slope": 1.0, "memory_slope": 1.0}
            for name in ("full", "linear (elu + 1)", "block-wise exact (B = 128)")}
    fake["full"]["seconds"][2], fake["full"]["peak_bytes"][2] = 40.0, 100 * 2 ** 22
    text = attention_goals(fake)
    assert "40000 ms / 4000.0 ms = 10× — met" in text and "= 1/100 — met" in text
    assert "| full | O(n), O(n) |" in markdown_table(fake)


def test_the_command_line_has_bench_attention():
    from numpy_transformer.cli.bench import bench_attention_command
    from numpy_transformer.cli import build_parser

    args = build_parser().parse_args(["bench", "attention", "--max-n", "1024", "--out", "results"])
    assert (args.max_n, args.out, args.blas_threads, args.run) == (1024, "results", 1, bench_attention_command)


# --- bench train-step and bench decode ---------------------------------------------------------

TRAIN_STEP_KEYS = {"config", "decoder_only", "numpy_ms", "torch_ms", "torch_fused_ms", "numpy_peak_mb",
                   "torch_peak_mb", "time_ratio", "time_ratio_fused", "memory_ratio", "parameters", "bandwidth_gb_s",
                   "numpy_update_bandwidth_fraction", "numpy_split", "update_floor_ns", "numpy_update_floor_ms"}


def torch_installed():
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def bench_json(*arguments):
    """The JSON list on the last line of `numpy-transformer bench … --json` run as a command."""
    result = subprocess.run([sys.executable, "-m", "numpy_transformer.cli", "bench", *arguments, "--json"],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    return result.stdout, json.loads(result.stdout.strip().splitlines()[-1])


def test_bench_train_step_on_the_tiny_configurations_ends_with_the_json_line():
    out, results = bench_json("train-step", "--configs", "tiny", "gpt-tiny", "--steps", "2", "--warmup", "1")
    assert [(r["config"], r["decoder_only"]) for r in results] == [("tiny", False), ("gpt-tiny", True)]
    for result in results:
        assert TRAIN_STEP_KEYS <= set(result) and result["numpy_ms"] > 0 and result["numpy_peak_mb"] >= 0
        if not torch_installed():
            assert result["torch_ms"] is None and "PyTorch is not installed" in out
        else:
            assert result["torch_ms"] > 0 and result["torch_fused_ms"] > 0 and result["torch_peak_mb"] >= 0
            assert f"{result['config']}: time" in out                          # the goals' lines
            assert 0 < result["torch_fused_update_bandwidth_fraction"] and "clip and update" in out
        assert result["parameters"] > 0 and result["bandwidth_gb_s"] > 0
        achieved = result["parameters"] * 40 / (result["numpy_phases_ms"][2] / 1e3)      # bytes per second
        assert 0 < result["numpy_update_bandwidth_fraction"] == \
            pytest.approx(achieved / (result["bandwidth_gb_s"] * 1e9), rel=0.01, abs=1e-3)
        assert result["update_floor_ns"] > 0 and result["numpy_update_floor_ms"] == \
            pytest.approx(result["parameters"] * result["update_floor_ns"] / 1e6, rel=0.01, abs=1e-3)
    assert "Memory bandwidth: " in out and "of the in-place bandwidth" in out
    assert "Adam's update on data already in the cache: " in out
    assert "gpt-tiny: a seconds-long decoder-only run" in out and "vocabulary 60" in out


def test_bench_decode_on_the_tiny_configuration_ends_with_the_json_line():
    out, results = bench_json("decode", "--configs", "tiny", "--runs", "1")
    translation, generation = results[0], results[1:]
    assert translation["config"] == "tiny" and (translation["tokens"], translation["sentences"]) == (64, 64)
    assert translation["cached_ms"] > 0 and translation["uncached_ms"] > 0
    assert "Goal (cached greedy decoding" in out
    assert [(r["model"], r["sequences"]) for r in generation] == [("decoder-only", 1), ("decoder-only", 16)]
    assert all(r["cached_tokens_per_second"] > 0 and r["uncached_tokens_per_second"] > 0 for r in generation)
    assert "tiny, decoder-only: 16 sequences × 64 tokens" in out


def test_the_benchmark_batch_is_padded_like_a_training_batch():
    batch = make_batch(CONFIGS["default"])
    assert batch.src.shape == batch.tgt_in.shape == batch.tgt_out.shape == (64, 16)
    real = batch.tgt_in != PAD_ID
    assert real[0].all() and not real.all() and real.sum(axis=1).min() >= 12      # lengths in [¾ · 16, 16]
    assert (batch.tgt_in[:, 0] == SOS_ID).all() and np.array_equal(batch.tgt_out != PAD_ID, real)
    assert ((batch.tgt_out == EOS_ID).sum(axis=1) == 1).all()


def test_the_end_of_sentence_id_of_the_decode_benchmark_lets_every_sentence_run_to_64_tokens():
    model, src = build_model(CONFIGS["tiny"]), make_batch(CONFIGS["tiny"], batch=10).src
    eos_id = never_generated_eos(model, src)
    assert eos_id not in (PAD_ID, SOS_ID)
    assert [len(tokens) for tokens in greedy_decode(model, src, SOS_ID, eos_id, max_len=64)] == [64] * 10


def test_the_train_step_goals_judge_against_fused_adam_and_say_met_or_missed():
    results = [{"config": "thesis", "time_ratio_fused": 0.9, "memory_ratio": 0.95},
               {"config": "base", "time_ratio_fused": 1.2, "memory_ratio": 0.9},
               {"config": "gpt-small", "time_ratio_fused": 0.8, "memory_ratio": 1.1}]
    assert goals(results).splitlines()[1:] == ["- thesis: time 0.90×, memory 0.95× — met",
                                               "- base: time 1.20×, memory 0.90× — missed",
                                               "- gpt-small: time 0.80×, memory 1.10× — missed"]
    assert goals([{"config": "tiny", "time_ratio_fused": None}]) == "Goals: not checked (no PyTorch figures)."
    phases = {"config": "base", "time_ratio_fused": 0.9, "memory_ratio": 0.9, "numpy_phases_ms": [300, 500, 130],
              "torch_fused_phases_ms": [350, 600, 100]}
    assert goals([phases]).splitlines()[1] == "- base: time 0.90×, memory 0.90× — met; clip and update 1.30× (≤ 1.3: met)"
    phases["numpy_phases_ms"][2] = 140
    assert goals([phases]).splitlines()[1].endswith("clip and update 1.40× (≤ 1.3: missed)")
    phases["numpy_update_floor_ms"] = 135.0
    assert goals([phases]).splitlines()[1].endswith(
        "clip and update 1.40× (≤ 1.3: missed; Adam's passes alone on data in the cache: 1.35×)")


def test_the_update_floor_times_adams_update_of_one_parameter_in_the_engine_room(monkeypatch):
    """update_floor_ns times Adam's update (the engine room's, as a run makes it) of one
    parameter of the size asked, as many times as asked, and divides the best time by the
    entries."""
    import autograd.optim
    from numpy_transformer.benchmarks import train_step

    calls, real = [], autograd.optim.adam_update_in_blocks

    def counted(p, g, state, *arguments):
        calls.append((p.size, g.size, state["step"]))
        real(p, g, state, *arguments)

    monkeypatch.setattr(autograd.optim, "adam_update_in_blocks", counted)
    assert train_step.update_floor_ns(entries=4096, repeats=5) > 0
    assert calls == [(4096, 4096, step) for step in range(5)]


@pytest.mark.torch
def test_the_pytorch_decoder_only_reference_has_the_parameters_of_the_numpy_model():
    pytest.importorskip("torch")
    from numpy_transformer.benchmarks.train_step import NumpyTrainer, TorchTrainer
    from numpy_transformer.model import count_parameters

    for name in ("gpt-tiny", "gpt-default"):
        config = CONFIGS[name]
        batch = make_batch(config)
        numpy_model, torch_model = NumpyTrainer(config, batch).model, TorchTrainer(config, batch).model
        assert count_parameters(numpy_model) == sum(p.numel() for p in torch_model.parameters()), name


def test_the_command_line_has_bench_train_step_and_bench_decode():
    from numpy_transformer.cli.bench import bench_decode_command, bench_train_step_command
    from numpy_transformer.cli import build_parser

    args = build_parser().parse_args(["bench", "train-step", "--configs", "thesis", "base", "--profile"])
    assert (args.configs, args.steps, args.profile, args.json, args.run) == (
        ["thesis", "base"], 10, True, False, bench_train_step_command)
    assert build_parser().parse_args(["bench", "train-step"]).configs == ["thesis", "default", "base", "gpt-default",
                                                                          "gpt-small"]
    args = build_parser().parse_args(["bench", "decode", "--json"])
    assert (args.configs, args.runs, args.json, args.run) == (["thesis", "default"], 3, True, bench_decode_command)


def test_the_benchmarks_the_runs_commands_import_by_name_exist():
    """`bench pretrained` and `bench latency` import their module by name when they run: a
    renamed module must not leave them pointing at nothing."""
    import importlib

    from numpy_transformer.cli.bench import bench_latency_command, bench_pretrained_command

    for command in (bench_pretrained_command, bench_latency_command):
        assert callable(importlib.import_module(command.module).run), command.module


def test_bench_memory_shows_checkpointing_keeping_less_as_the_model_deepens(tmp_path):
    from numpy_transformer.benchmarks.memory_use import run

    summary = run(layers=(1, 2, 4), out_dir=tmp_path, log=lambda line: None)
    plain, checkpointed = (summary["results"][name] for name in ("plain", "checkpointed"))
    assert [r["layers"] for r in plain] == [1, 2, 4]
    assert checkpointed[-1]["activation_mb"] < 0.8 * plain[-1]["activation_mb"]
    assert summary["exponents"]["checkpointed"] < summary["exponents"]["plain"]
    assert (tmp_path / "memory_benchmark.png").is_file() and (tmp_path / "memory_benchmark.json").is_file()


def test_the_command_line_has_bench_memory():
    from numpy_transformer.cli import build_parser
    from numpy_transformer.cli.bench import bench_memory_command

    args = build_parser().parse_args(["bench", "memory", "--max-layers", "4"])
    assert (args.max_layers, args.run) == (4, bench_memory_command)


def test_bench_precision_shows_mixed_precision_keeping_about_half_the_activations(tmp_path):
    from numpy_transformer.benchmarks.precision_speed import run

    summary = run(("tiny", "gpt-tiny"), steps=1, out_dir=tmp_path, log=lambda line: None)
    for name in ("tiny", "gpt-tiny"):
        single, mixed = summary["configs"][name]["float32"], summary["configs"][name]["mixed"]
        assert 0.4 < mixed["graph_mb"] / single["graph_mb"] < 0.6 and mixed["step_ms"] > 0
    micro = summary["micro_ms"]
    assert micro["matmul float16, NumPy's own"] > micro["matmul float16, in float32"]
    assert (tmp_path / "precision_benchmark.png").is_file() and (tmp_path / "precision_benchmark.json").is_file()


def test_the_command_line_has_bench_precision():
    from numpy_transformer.cli import build_parser
    from numpy_transformer.cli.bench import bench_precision_command

    args = build_parser().parse_args(["bench", "precision", "--configs", "tiny", "--steps", "2"])
    assert (args.configs, args.steps, args.run) == (["tiny"], 2, bench_precision_command)


@pytest.mark.torch
def test_bench_pretrained_loads_and_generates_a_small_gpt2_here_and_in_transformers():
    pytest.importorskip("transformers")
    from numpy_transformer.benchmarks.pretrained_speed import NEW_TOKENS, run

    lines = []
    results = run(1, 1, log=lines.append, shape=dict(n_layer=1, n_embd=16, n_head=2, vocab_size=300, n_positions=64))
    for framework in ("numpy", "transformers"):
        assert results[f"{framework}_load_seconds"] >= 0 and results[f"{framework}_load_peak_mb"] >= 0
        assert results[f"{framework}_cached_tokens_per_second"] > 0
        assert results[f"{framework}_uncached_tokens_per_second"] > 0
    assert 0 <= results["shared_tokens"] <= NEW_TOKENS and "greedy tokens are the same in both" in lines[-1]


@needs_two_cores
def test_bench_train_step_on_two_processes_shares_the_batch_and_counts_the_workers_memory():
    out, results = bench_json("train-step", "--configs", "tiny", "--steps", "2", "--warmup", "1", "--threads", "2",
                              "--split", "batch")
    (result,) = results
    assert result["numpy_processes"] == 2 and result["numpy_ms"] > 0 and result["numpy_peak_mb"] >= 0
    assert "forward and backward on 2 processes" in out
    out, results = bench_json("train-step", "--configs", "tiny", "--steps", "2", "--warmup", "1", "--threads", "2",
                              "--split", "blas")
    assert results[0]["numpy_processes"] == 1 and "forward and backward on" not in out


def test_bench_train_step_on_a_busy_machine_times_numpy_on_one_core_as_train_takes(monkeypatch):
    """Where the machine is busy as a configuration starts, the thread plan is one core ("one"):
    NumPy's side is timed as train would run then (it used to hand "one" to its children as a
    split, which they refused, ending the benchmark without its results)."""
    from numpy_transformer.benchmarks import train_step
    from numpy_transformer.training.thread_plan import busy_plan

    monkeypatch.setattr(train_step, "numpy_plan", lambda config, threads, split: busy_plan(1.9))
    monkeypatch.setattr(train_step, "import_torch", lambda threads: None)          # NumPy's side alone
    lines = []
    (result,) = train_step.run(["tiny"], threads=2, steps=2, warmup=1, log=lines.append)
    assert result["numpy_split"] == "one" and result["numpy_processes"] == 1
    assert result["numpy_ms"] > 0 and result["numpy_peak_mb"] >= 0
    assert result["numpy_update_floor_ms"] == \
        pytest.approx(result["parameters"] * result["update_floor_ns"] / 1e6, rel=0.01, abs=1e-3)  # one thread's
    assert "NumPy's 2 threads: one core (one process, one BLAS thread) (other work keeps the cores busy (load 1.9)" \
        in "\n".join(lines)


def test_a_worker_s_memory_counts_what_it_allocates_and_not_the_shared_pages_it_touches():
    """The main process's peak already holds the shared weights and gradients' slots: a worker's
    addition leaves out the shared pages it touched, and keeps its private ones."""
    from numpy_transformer.benchmarks.train_step import added_kb, worker_peak, worker_restart_peak
    from numpy_transformer.training.parallel import SharedArrays

    start = worker_restart_peak(None)
    if start is None:
        pytest.skip("no /proc/self/status with a peak that restarts")
    shared = SharedArrays([((16, 1 << 20), np.float32)])    # 64 MB
    shared.arrays[0][...] = 1.0
    touched_shared = added_kb(start, worker_peak(None))
    start = worker_restart_peak(None)
    private = np.ones((16, 1 << 20), np.float32)
    touched_private = added_kb(start, worker_peak(None))
    assert touched_shared < 8 * 1024, touched_shared
    assert 60 * 1024 < touched_private < 72 * 1024, touched_private
    del private


def test_the_scaling_model_is_amdahl_s_law_without_overheads_and_grows_with_them():
    from numpy_transformer.benchmarks.scaling import predicted_step

    amdahl = {"rows": [64, 32, 16, 8, 4, 2, 1], "fb": [0.064, 0.032, 0.016, 0.008, 0.004, 0.002, 0.001],
              "update": 0.008, "clip": 0.002, "sum_pass": 0.0, "message": 0.0}
    for processes in (2, 4, 8, 16):                   # serial 0.002 (clip), parallel 0.064 + 0.008
        assert predicted_step(amdahl, processes) == pytest.approx(0.002 + 0.072 / processes)
    costly = {**amdahl, "fb": [f + 0.005 for f in amdahl["fb"]], "sum_pass": 0.004, "message": 0.0001}
    assert predicted_step(costly, 16) == pytest.approx(0.005 + 0.004 + 0.0015 + 0.004 * 15 / 16 + 0.002 + 0.0005)
    assert predicted_step({**amdahl, "rows": [8, 4, 2, 1], "fb": [0.008, 0.004, 0.002, 0.001]}, 16) is None


@needs_two_cores
def test_bench_scaling_measures_the_parts_and_predicts_on_the_tiny_configuration():
    out, results = bench_json("scaling", "--configs", "tiny", "--steps", "2", "--repeats", "2")
    (result,) = results
    assert result["rows"] == 4 and result["step_1_ms"] > 0 and result["measured_2_ms"] > 0
    assert result["predicted_ms"]["2"] > 0 and result["predicted_ms"]["8"] is None      # 4 rows: at most 4
    assert "tiny: " in out and "8 processes: more processes than rows" in out


def test_the_machine_line_names_the_cpu_its_share_the_blas_kernels_and_the_versions():
    """What every `bench` command prints first (training/machine.py): a figure copied from its
    output keeps the machine that measured it, and the share of it this process was given."""
    from numpy_transformer.training.machine import describe_machine, machine_record

    record = {"cpu": "AMD EPYC 7B13", "processors": 64, "usable_processors": 2, "memory_bytes": 256 << 30,
              "memory_limit_bytes": 4 << 30, "numpy": "2.4.6", "python": "3.11.7", "torch": None,
              "blas": [{"library": "openblas", "version": "0.3.31", "kernels": "Haswell", "threads": 1, "of": "numpy"},
                       {"library": "openblas", "version": "0.3.30", "kernels": "Zen", "threads": 2, "of": "scipy"}]}
    assert describe_machine(record) == (
        "Machine: AMD EPYC 7B13, 64 processors, this process may use 2, 256.0 GiB, a limit of 4.0 GiB; "
        "NumPy's OpenBLAS 0.3.31 (Haswell kernels, 1 thread); SciPy's OpenBLAS 0.3.30 (Zen kernels, 2 threads); "
        "NumPy 2.4.6; Python 3.11.7")
    record.update(usable_processors=64, memory_limit_bytes=None, torch="2.13.0", blas=[])
    assert describe_machine(record) == "Machine: AMD EPYC 7B13, 64 processors, 256.0 GiB; NumPy 2.4.6; Python 3.11.7; PyTorch 2.13.0"
    real = machine_record()
    assert real["processors"] >= real["usable_processors"] >= 1 and real["numpy"] == np.__version__
    assert describe_machine(real).startswith(f"Machine: {real['cpu']}, {real['processors']} processors")
