"""`numpy-transformer bench BENCHMARK`, the benchmarks of `numpy_transformer.benchmarks`:

- `attention` measures how the attention variants of chapter 2 scale with n
  (numpy_transformer.benchmarks.attention_cost) and draws the figures of docs/chapter2.md: the timing
  figure and table, the random-feature error figure (numpy_transformer.benchmarks.random_features)
  and the thesis's Figure 7;
- `train-step` times a training step of this project's models (the encoder-decoder and the
  decoder-only model) against the same architectures in PyTorch, with its default and its fused
  Adam, and the peak memory of each (numpy_transformer.benchmarks.train_step);
- `scaling` measures the parts of a training step shared by processes (`train --threads N`),
  the step on 2 processes, and predicts it for 4, 8 and 16 (numpy_transformer.benchmarks.scaling);
  with --mpi, the MPI transport's costs (mpiexec -n 2; with --hostfile, between two hosts) and the
  step on 2 to 64 ranks of a cluster (numpy_transformer.benchmarks.mpi_scaling);
- `decode` times greedy decoding of 64 tokens with and without the key/value cache
  (numpy_transformer.benchmarks.decode);
- `complexity` measures the complexity notes' table: time, memory and FLOPs of attention, the
  feed-forward network and an encoder layer as T and d grow, with the fitted exponents, and the
  key/value cache's bytes per token (numpy_transformer.benchmarks.complexity);
- `pretrained` loads a GPT-2-small-sized model in Hugging Face format and generates with it,
  against `transformers` (numpy_transformer.benchmarks.pretrained_speed);
- `latency` translates one sentence (beam 4) and generates 64 tokens from one prompt, against
  the same weights in PyTorch decoded incrementally (numpy_transformer.benchmarks.latency);
- `sts` scores a sentence-embedding model (all-MiniLM-L6-v2) on the STS benchmark: the Spearman
  correlation of its cosines with the human scores, and sentences per second, against
  sentence-transformers (numpy_transformer.benchmarks.sts).

docs/performance.md gives their figures. `--threads` (alias `--blas-threads`) fixes the BLAS
thread count before NumPy loads; where NumPy is already loaded with another count (a caller in
the same process), the benchmark runs in a child process instead. Every benchmark but
`attention` and `sts` shows a progress bar on standard error when it is a terminal (not with
`--quiet`); standard output is the same with or without it.
"""
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

from numpy_transformer.cli.common import (BLAS_THREAD_VARIABLES, add_quiet_argument, add_split_argument,
                                          integer_at_least, non_negative_integer, positive_integer, progress_bars,
                                          thread_count)

MIN_N = 256                 # the first length of numpy_transformer.benchmarks.attention_cost.sizes
MIN_LAYERS = 4              # the exponent of bench memory is fitted over L ≥ 2: two depths, 2 and 4
BENCH_OUT = "runs/benchmarks"       # where bench attention, memory and precision write: runs/ holds every output


def add_parser(commands):
    """Add `bench attention | train-step | scaling | decode | memory | precision | complexity | pretrained | latency | sts`
    to the CLI's subcommands."""
    bench = commands.add_parser("bench", help="measure the attention variants, a training step against PyTorch, "
                                              "decoding with and without the cache, gradient checkpointing's memory, "
                                              "mixed precision, the complexity table, loading a pretrained model, "
                                              "sentence embeddings on the STS benchmark")
    benchmarks = bench.add_subparsers(dest="benchmark", required=True, metavar="BENCHMARK")
    attention = benchmarks.add_parser(
        "attention", help="time and peak memory of every attention variant, forward + backward, n = 256 … max-n")
    attention.add_argument("--max-n", type=integer_at_least(MIN_N), default=8192,
                           help=f"the longest sequence, at least {MIN_N} (default 8192)")
    attention.add_argument("--out", default=BENCH_OUT,
                           help=f"folder for the table, figures and JSON (default {BENCH_OUT})")
    _add_threads_argument(attention, "BLAS threads")
    attention.set_defaults(run=bench_attention_command)
    _add_train_step_command(benchmarks)
    _add_scaling_command(benchmarks)
    _add_decode_command(benchmarks)
    memory = benchmarks.add_parser(
        "memory", help="activation memory and time of a training step for L = 1 … 24 layers, with and without "
                       "gradient checkpointing, and the fitted growth exponents")
    memory.add_argument("--max-layers", type=integer_at_least(MIN_LAYERS), default=24,
                        help=f"the deepest model, at least {MIN_LAYERS} (default 24)")
    memory.add_argument("--out", default=BENCH_OUT, help=f"folder for the figure and JSON (default {BENCH_OUT})")
    add_quiet_argument(memory, "over the depths, each measured with and without checkpointing")
    _add_threads_argument(memory, "BLAS threads")
    memory.set_defaults(run=bench_memory_command)
    _add_precision_command(benchmarks)
    _add_complexity_command(benchmarks)
    pretrained = benchmarks.add_parser(
        "pretrained", help="a GPT-2-small-sized model in Hugging Face format: loading time and memory, and greedy "
                           "generation with and without the cache, against transformers")
    pretrained.add_argument("--runs", type=positive_integer, default=3, help="timed runs of each (default 3)")
    pretrained.add_argument("--json", action="store_true", help="end with one line: the results as JSON")
    add_quiet_argument(pretrained, "over the timed runs of generation")
    _add_threads_argument(pretrained)
    pretrained.set_defaults(run=bench_pretrained_command)
    latency = benchmarks.add_parser(
        "latency", help="one sentence at a time against PyTorch's incremental decoder: translate with a beam "
                        "of 4, generate 64 tokens")
    latency.add_argument("--runs", type=positive_integer, default=7, help="timed runs of each (default 7)")
    latency.add_argument("--json", action="store_true", help="end with one line: the results as JSON")
    add_quiet_argument(latency, "over the two tasks")
    _add_threads_argument(latency)
    latency.set_defaults(run=bench_latency_command)
    _add_sts_command(benchmarks)


def _add_threads_argument(parser, what="threads of BLAS and of PyTorch"):
    parser.add_argument("--threads", "--blas-threads", dest="blas_threads", type=thread_count, default=1,
                        help=f"{what} (default 1: stable figures on a shared machine)")


def _add_configs_argument(parser, defaults):
    from numpy_transformer.benchmarks.workloads import CONFIG_NAMES

    parser.add_argument("--configs", nargs="+", choices=CONFIG_NAMES, default=list(defaults), metavar="NAME",
                        help=f"configurations among {', '.join(CONFIG_NAMES)} (default: {' '.join(defaults)})")


def _add_precision_command(benchmarks):
    from numpy_transformer.benchmarks.precision_speed import PRECISION_CONFIGS

    parser = benchmarks.add_parser(
        "precision", help="a training step in float32 and in mixed precision: activation memory, peak and time")
    _add_configs_argument(parser, PRECISION_CONFIGS)
    parser.add_argument("--steps", type=positive_integer, default=5, help="timed steps of each (default 5)")
    parser.add_argument("--out", default=BENCH_OUT, help=f"folder for the figure and JSON (default {BENCH_OUT})")
    parser.add_argument("--json", action="store_true", help="end with one line: the results as JSON")
    add_quiet_argument(parser, "over the configurations, float32 beside mixed precision")
    _add_threads_argument(parser, "BLAS threads")
    parser.set_defaults(run=bench_precision_command)


def _add_complexity_command(benchmarks):
    parser = benchmarks.add_parser(
        "complexity", help="the complexity notes' table measured: time, memory and FLOPs of attention, the "
                           "feed-forward network and an encoder layer against T and d, fitted exponents, and the "
                           "key/value cache's bytes per token")
    parser.add_argument("--quick", action="store_true", help="small sizes and small models: seconds, not a minute or "
                                                             "two (the exponents then say little)")
    parser.add_argument("--repeats", type=positive_integer, default=5, help="timed runs per size, the median "
                                                                            "kept (default 5)")
    parser.add_argument("--plot", metavar="PATH", help="draw time and memory against T and d there "
                                                       "(e.g. docs/figures/complexity.png)")
    parser.add_argument("--json", action="store_true", help="end with one line: the results as JSON")
    add_quiet_argument(parser, "over the sweeps")
    _add_threads_argument(parser, "BLAS threads")
    parser.set_defaults(run=bench_complexity_command)


def _add_sts_command(benchmarks):
    parser = benchmarks.add_parser(
        "sts", help="a sentence-embedding model on the STS benchmark: Spearman correlation of its cosines with the "
                    "human scores, and sentences per second, against sentence-transformers")
    parser.add_argument("--model", required=True, metavar="FOLDER",
                        help="a sentence-transformers folder (all-MiniLM-L6-v2) or Hub name")
    parser.add_argument("--data", required=True, metavar="FILE",
                        help="the benchmark's sts-test.csv (from stsbenchmark.tar.gz; docs/language_models.md)")
    parser.add_argument("--batch-size", type=positive_integer, default=32, help="sentences per batch (default 32)")
    parser.add_argument("--runs", type=positive_integer, default=1, help="timed passes of each, the median kept "
                                                                         "(default 1)")
    parser.add_argument("--no-reference", dest="reference", action="store_false",
                        help="do not run sentence-transformers beside it")
    parser.add_argument("--json", action="store_true", help="end with one line: the results as JSON")
    _add_threads_argument(parser)
    parser.set_defaults(run=bench_sts_command)


def _add_train_step_command(benchmarks):
    from numpy_transformer.benchmarks.workloads import MAIN_CONFIGS

    parser = benchmarks.add_parser(
        "train-step", help="one training step (forward, backward, clip, Adam) against PyTorch: time, peak memory, "
                           "and the update's share of the memory bandwidth")
    _add_configs_argument(parser, MAIN_CONFIGS)
    parser.add_argument("--steps", type=positive_integer, default=10, help="timed steps of each framework (default 10)")
    parser.add_argument("--warmup", type=non_negative_integer, default=2, help="untimed steps first (default 2)")
    parser.add_argument("--profile", action="store_true", help="print the profile of one NumPy step per configuration")
    parser.add_argument("--json", action="store_true", help="end with one line: the results as a JSON list")
    add_split_argument(parser, "(what `train` does; the benchmark prints what auto chose and why)")
    add_quiet_argument(parser, "over the configurations")
    _add_threads_argument(parser)
    parser.set_defaults(run=bench_train_step_command)


def _add_scaling_command(benchmarks):
    from numpy_transformer.benchmarks.workloads import MAIN_CONFIGS

    parser = benchmarks.add_parser(
        "scaling", help="a training step shared by processes (train --threads N): its parts measured, the step on "
                        "2 processes measured, and the speed-up predicted for 4, 8 and 16")
    _add_configs_argument(parser, MAIN_CONFIGS)
    parser.add_argument("--steps", type=positive_integer, default=10, help="timed whole steps (default 10)")
    parser.add_argument("--repeats", type=positive_integer, default=7, help="timed repeats of each part (default 7)")
    parser.add_argument("--mpi", action="store_true",
                        help="the MPI transport (mpiexec -n P numpy-transformer train): its costs measured with "
                             "mpiexec -n 2, and the step on 2 to 64 ranks of a cluster predicted (needs "
                             "pip install -e \".[mpi]\")")
    parser.add_argument("--bandwidth", type=float, default=10.0, metavar="GBIT",
                        help="with --mpi: the cluster's network bandwidth per link, Gbit/s (default 10)")
    parser.add_argument("--latency", type=float, default=50.0, metavar="MICROSECONDS",
                        help="with --mpi: the latency of one message on that network, µs (default 50)")
    parser.add_argument("--hostfile", type=Path, metavar="FILE",
                        help="with --mpi: measure between the first two slots of this mpiexec hostfile (two hosts: "
                             "the network between them) instead of two processes here")
    parser.add_argument("--json", action="store_true", help="end with one line: the results as a JSON list")
    add_quiet_argument(parser, "over the configurations measured and predicted")
    parser.set_defaults(run=bench_scaling_command)


def bench_scaling_command(args):
    """Measure and predict the step on more processes (numpy_transformer.benchmarks.scaling);
    every measurement runs in a child process with one BLAS thread."""
    from numpy_transformer.benchmarks import mpi_scaling, scaling

    progress = progress_bars(args.quiet)
    if args.mpi:
        if args.bandwidth <= 0 or args.latency < 0:
            raise ValueError(f"--bandwidth must be positive and --latency not negative, got {args.bandwidth:g} and "
                             f"{args.latency:g}")
        if args.hostfile is not None and not args.hostfile.is_file():
            raise ValueError(f"--hostfile {args.hostfile}: no such file (one host a line, as mpiexec reads it)")
        results = mpi_scaling.run(args.configs, args.steps, args.repeats, args.bandwidth, args.latency,
                                  log=lines_beside(progress), progress=progress, hostfile=args.hostfile)
    elif args.hostfile is not None:
        raise ValueError("--hostfile is for bench scaling --mpi (the MPI transport between two hosts)")
    else:
        results = scaling.run(args.configs, args.steps, args.repeats, log=lines_beside(progress), progress=progress)
    if args.json:
        print(json.dumps(results))
    return 0


def _add_decode_command(benchmarks):
    from numpy_transformer.benchmarks.workloads import DECODE_CONFIGS, ENCODER_DECODER_NAMES

    parser = benchmarks.add_parser("decode", help="greedy decoding of 64 sentences into 64 tokens, with and "
                                                  "without the key/value cache")
    parser.add_argument("--configs", nargs="+", choices=ENCODER_DECODER_NAMES, default=list(DECODE_CONFIGS),
                        metavar="NAME", help=f"configurations among {', '.join(ENCODER_DECODER_NAMES)} (default: "
                                             f"{' '.join(DECODE_CONFIGS)}; base takes about 2 minutes per run "
                                             f"without the cache)")
    parser.add_argument("--runs", type=positive_integer, default=3, help="timed runs of each (default 3)")
    parser.add_argument("--profile", action="store_true", help="print the profile of one cached decode")
    parser.add_argument("--json", action="store_true", help="end with one line: the results as a JSON list")
    add_quiet_argument(parser, "over the configurations decoded with and without the cache")
    _add_threads_argument(parser)
    parser.set_defaults(run=bench_decode_command)


def _rerun_with_blas_threads(threads, bench_arguments):
    """The BLAS thread count must be fixed before NumPy loads: None if it already is `threads`,
    otherwise the exit status of `numpy-transformer bench *bench_arguments` run in a child
    process with it set."""
    threads = str(threads)
    if os.environ.get("OPENBLAS_NUM_THREADS") == threads:
        return None
    env = {**os.environ, **{name: threads for name in BLAS_THREAD_VARIABLES}}
    return subprocess.call([sys.executable, "-m", "numpy_transformer.cli", "bench", *bench_arguments,
                            "--threads", threads], env=env)


def bench_attention_command(args):
    """Run the attention benchmark and draw the chapter 2 figures into args.out. The BLAS thread
    count must be fixed before NumPy loads, so the run happens in a child process with it set."""
    status = _rerun_with_blas_threads(args.blas_threads,
                                      ["attention", "--max-n", str(args.max_n), "--out", str(args.out)])
    if status is not None:
        return status
    from numpy_transformer.attention.patterns import draw_figure_7
    from numpy_transformer.benchmarks.attention_cost import run
    from numpy_transformer.benchmarks.random_features import plot_random_feature_errors

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = lines_beside(None)
    log(f"Figure 7: {draw_figure_7(out / 'figure7_patterns.png')}")
    errors = plot_random_feature_errors(out / "random_feature_error.png")
    for (kind, scale), values in errors.items():
        log(f"random features {kind}, N(0, {scale}²) entries: median errors {', '.join(f'{e:.3g}' for e in values)}")
    run(args.max_n, out, log=log)
    return 0


def _runs_command(benchmark, module):
    """The command of a benchmark with the options --runs, --json and --quiet: `module` (of
    numpy_transformer.benchmarks).run(threads, runs, log, progress=…), with --json a last line
    holding its results as JSON."""
    def command(args):
        status = _rerun_with_blas_threads(args.blas_threads, [benchmark, "--runs", str(args.runs),
                                                              *_flags(args, ("--json", "--quiet"))])
        if status is not None:
            return status
        run = importlib.import_module(command.module).run
        progress = progress_bars(args.quiet)
        results = run(args.blas_threads, args.runs, log=lines_beside(progress), progress=progress)
        if args.json:
            print(json.dumps(results))
        return 0
    command.module = f"numpy_transformer.benchmarks.{module}"
    command.__doc__ = f"Run `numpy-transformer bench {benchmark}` (see {command.module})."
    return command


bench_pretrained_command = _runs_command("pretrained", "pretrained_speed")
bench_latency_command = _runs_command("latency", "latency")


def bench_sts_command(args):
    """Score the model of args.model on the STS pairs of args.data, here and with
    sentence-transformers; with --json the last line is the results as JSON."""
    status = _rerun_with_blas_threads(args.blas_threads, ["sts", "--model", args.model, "--data", args.data,
                                                          "--batch-size", str(args.batch_size), "--runs",
                                                          str(args.runs), *([] if args.reference else ["--no-reference"]),
                                                          *_flags(args, ("--json",))])
    if status is not None:
        return status
    from numpy_transformer.benchmarks.sts import run

    results = run(args.model, args.data, args.blas_threads, args.batch_size, args.runs, args.reference,
                  log=lines_beside(None))
    if args.json:
        print(json.dumps(results))
    return 0


def bench_memory_command(args):
    """Measure gradient checkpointing's memory and time; the figure and JSON go to args.out."""
    status = _rerun_with_blas_threads(args.blas_threads, ["memory", "--max-layers", str(args.max_layers),
                                                          "--out", str(args.out), *_flags(args, ("--quiet",))])
    if status is not None:
        return status
    from numpy_transformer.benchmarks.memory_use import LAYERS, run

    progress = progress_bars(args.quiet)
    run([n for n in LAYERS if n <= args.max_layers], args.out, log=lines_beside(progress), progress=progress)
    return 0


def bench_precision_command(args):
    """Measure a training step in float32 and in mixed precision; with --json the last line is the
    results as JSON."""
    status = _rerun_with_blas_threads(args.blas_threads, ["precision", "--configs", *args.configs, "--steps",
                                                          str(args.steps), "--out", str(args.out),
                                                          *_flags(args, ("--json", "--quiet"))])
    if status is not None:
        return status
    from numpy_transformer.benchmarks.precision_speed import run

    progress = progress_bars(args.quiet)
    results = run(args.configs, args.steps, args.out, log=lines_beside(progress), progress=progress)
    if args.json:
        print(json.dumps(results))
    return 0


def bench_complexity_command(args):
    """Measure the complexity table and the key/value cache; with --json the last line is the
    results as JSON."""
    status = _rerun_with_blas_threads(args.blas_threads, ["complexity", "--repeats", str(args.repeats),
                                                          *(["--plot", args.plot] if args.plot else []),
                                                          *_flags(args, ("--quick", "--json", "--quiet"))])
    if status is not None:
        return status
    from numpy_transformer.benchmarks import complexity

    sweeps, models = ((complexity.QUICK_SWEEPS, complexity.QUICK_CACHE_MODELS) if args.quick
                      else (complexity.SWEEPS, complexity.CACHE_MODELS))
    progress = progress_bars(args.quiet)
    results = complexity.run(sweeps, models, args.repeats, args.plot, log=lines_beside(progress), progress=progress)
    if args.json:
        print(json.dumps(results))
    return 0


def lines_beside(progress):
    """The `log` of a benchmark: each line printed on standard output at once, the first one
    after the line naming the machine that measures (training/machine.py: printed with the
    first figure, so that a command refused before it measures prints nothing there); while
    `progress` (`common.progress_bars`) draws a bar on standard error, through tqdm.write, which
    lifts the bar off the terminal for the line and draws it again below (standard output gets
    the same bytes)."""
    first = [True]

    def log(line):
        if first:
            from numpy_transformer.training.machine import describe_machine

            first.clear()
            log(describe_machine())
        if progress is None:
            print(line, flush=True)
            return
        from tqdm import tqdm

        tqdm.write(line, file=sys.stdout)
        sys.stdout.flush()
    return log


def _flags(args, flags=("--profile", "--json")):
    """The command-line switches among `flags` that are on in `args`, to pass to a child process."""
    return [flag for flag in flags if getattr(args, flag[2:])]


def bench_train_step_command(args):
    """Time a training step of each configuration against PyTorch; with --json the last line is
    the JSON list of the results."""
    status = _rerun_with_blas_threads(args.blas_threads, ["train-step", "--configs", *args.configs, "--steps",
                                                          str(args.steps), "--warmup", str(args.warmup),
                                                          "--split", args.split,
                                                          *_flags(args, ("--profile", "--json", "--quiet"))])
    if status is not None:
        return status
    from numpy_transformer.benchmarks.train_step import run

    progress = progress_bars(args.quiet)
    results = run(args.configs, args.blas_threads, args.steps, args.warmup, args.profile, log=lines_beside(progress),
                  progress=progress, split=args.split)
    if args.json:
        print(json.dumps(results))
    return 0


def bench_decode_command(args):
    """Time greedy decoding with and without the cache; with --json the last line is the JSON list."""
    status = _rerun_with_blas_threads(args.blas_threads, ["decode", "--configs", *args.configs, "--runs",
                                                          str(args.runs), *_flags(args, ("--profile", "--json", "--quiet"))])
    if status is not None:
        return status
    from numpy_transformer.benchmarks.decode import run

    progress = progress_bars(args.quiet)
    results = run(args.configs, args.runs, args.profile, log=lines_beside(progress), progress=progress)
    if args.json:
        print(json.dumps(results))
    return 0
