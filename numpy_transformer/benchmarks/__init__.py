"""Benchmarks: `numpy-transformer bench attention` measures how the attention variants of
chapter 2 scale with n (numpy_transformer.benchmarks.attention) and draws the figures of
docs/chapter2.md: the timing figure and table, the random-feature error figure
(numpy_transformer.benchmarks.random_features) and the thesis's Figure 7."""
import os
import subprocess
import sys
from pathlib import Path

BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def add_bench_command(commands):
    """Add `bench attention [--max-n N] [--out DIR] [--blas-threads T]` to the CLI's subcommands."""
    bench = commands.add_parser("bench", help="measure how the attention variants of chapter 2 scale")
    benchmarks = bench.add_subparsers(dest="benchmark", required=True, metavar="BENCHMARK")
    attention = benchmarks.add_parser(
        "attention", help="time and peak memory of every attention variant, forward + backward, n = 256 … max-n")
    attention.add_argument("--max-n", type=int, default=8192, help="the longest sequence (default 8192)")
    attention.add_argument("--out", default="benchmark_results",
                           help="folder for the table, figures and JSON (default benchmark_results)")
    attention.add_argument("--blas-threads", type=int, default=1,
                           help="BLAS threads (default 1: stable figures on a shared machine)")
    attention.set_defaults(run=bench_attention_command)


def bench_attention_command(args):
    """Run the attention benchmark and draw the chapter 2 figures into args.out. The BLAS thread
    count must be fixed before NumPy loads, so the run happens in a child process with it set."""
    threads = str(args.blas_threads)
    if os.environ.get("OPENBLAS_NUM_THREADS") != threads:
        env = {**os.environ, **{name: threads for name in BLAS_THREAD_VARIABLES}}
        return subprocess.call([sys.executable, "-m", "numpy_transformer.cli", "bench", "attention",
                                "--max-n", str(args.max_n), "--out", str(args.out), "--blas-threads", threads],
                               env=env)
    from numpy_transformer.attention.patterns import draw_figure_7
    from numpy_transformer.benchmarks.attention import run
    from numpy_transformer.benchmarks.random_features import plot_random_feature_errors

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"Figure 7: {draw_figure_7(out / 'figure7_patterns.png')}")
    errors = plot_random_feature_errors(out / "random_feature_error.png")
    for (kind, scale), values in errors.items():
        print(f"random features {kind}, N(0, {scale}²) entries: median errors {', '.join(f'{e:.3g}' for e in values)}")
    run(args.max_n, out, log=lambda line: print(line, flush=True))
    return 0
