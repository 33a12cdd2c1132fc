"""The `numpy-transformer` command.

    numpy-transformer train [--out DIR] [--preset NAME] [--dataset builtin|opus_books|FILE] [flags]
    numpy-transformer translate --checkpoint DIR "a sentence" ...     (or lines on standard input)
    numpy-transformer evaluate --checkpoint DIR [--split test|validation] [--beam N]
    numpy-transformer attention --checkpoint DIR "a sentence" [--out DIR]
    numpy-transformer gradcheck
    numpy-transformer bench attention

A bad input (a missing or damaged checkpoint, an unreadable data file, an unknown language pair,
an unreachable corpus, a sentence longer than the model's maximum length) prints one line
`numpy-transformer COMMAND: error: …` and exits with status 1, without a traceback.
"""
import argparse
import json
import os
import sys

from numpy_transformer import __version__
from numpy_transformer.analysis.command import add_attention_command
from numpy_transformer.benchmarks import BLAS_THREAD_VARIABLES, add_bench_command

EXIT_ERROR, EXIT_INTERRUPTED = 1, 130
MODEL_COMMANDS = ("train", "translate", "evaluate")


def gradcheck_command(args):
    """Gradient-check every primitive op of the engine and print one line per op."""
    import numpy as np

    from autograd import GradcheckError, gradcheck
    from autograd.gradcheck_suite import CASES, max_gradient_error

    print("Gradient check of every primitive op: analytic (backward) vs numerical (central")
    print("differences, h = 1e-6) Jacobians, float64, random inputs with seed", args.seed)
    print(f"{'op':<30} {'input shapes':<26} {'max |error|':>11}  result")
    failures = 0
    for case in CASES:
        rng = np.random.default_rng(args.seed)
        error = max_gradient_error(case, rng)
        try:
            gradcheck(case.fn, *case.inputs(np.random.default_rng(args.seed)))
            result = "ok"
        except GradcheckError as failure:
            result, failures = f"FAILED: {failure}", failures + 1
        shapes = " ".join(str(s) for s in case.shapes)
        print(f"{case.name:<30} {shapes:<26} {error:>11.1e}  {result}")
    print(f"{len(CASES)} checks, {len(CASES) - failures} passed, {failures} failed.")
    return 1 if failures else 0


def train_command(args):
    from numpy_transformer.commands import train
    return train(args)


def translate_command(args):
    from numpy_transformer.commands import translate
    return translate(args)


def evaluate_command(args):
    from numpy_transformer.commands import evaluate
    return evaluate(args)


def json_object(text):
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"not JSON ({error}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object such as '{{\"window\": 8}}', got {text!r}")
    return value


# (flag, field, type, help): every field a preset sets can be overridden by a flag.
MODEL_FLAGS = [
    ("--d-model", "d_model", int, "width d of every token vector"),
    ("--n-heads", "n_heads", int, "attention heads H (d_model must be divisible by it)"),
    ("--d-ff", "d_ff", int, "hidden width m of the feed-forward network"),
    ("--encoder-layers", "n_encoder_layers", int, "encoder layers"),
    ("--decoder-layers", "n_decoder_layers", int, "decoder layers"),
    ("--dropout", "dropout", float, "dropout probability"),
    ("--norm-placement", "norm_placement", str, "LayerNorm after the residual sum (post, the thesis) or before (pre)"),
    ("--norm-variant", "norm_variant", str, "LayerNorm of eq. (2) (thesis) or PyTorch's (torch)"),
    ("--activation", "activation", str, "feed-forward activation: relu, gelu or swiglu"),
    ("--positional", "positional", str, "positional encoding: sinusoidal or learned"),
    ("--positional-base", "positional_base", float, "the base N of the sinusoidal encoding, eq. (1)"),
    ("--norm-eps", "norm_eps", float, "ε of the LayerNorm"),
    ("--attention", "attention", str, "the encoder's self-attention: full or a chapter 2 variant"),
    ("--decoder-attention", "decoder_attention", str, "the decoder's self-attention (a causal kind)"),
    ("--attention-options", "attention_options", json_object, 'options of the variants, as JSON: \'{"window": 8}\''),
]
TRAINING_FLAGS = [
    ("--batch-size", "batch_size", int, "sentence pairs per step"),
    ("--steps", "steps", int, "optimizer steps in all"),
    ("--epochs", "epochs", float, "passes over the training pairs (instead of --steps)"),
    ("--lr-factor", "lr_factor", float, "factor of the warm-up schedule"),
    ("--label-smoothing", "label_smoothing", float, "label smoothing ε of the loss"),
    ("--seed", "seed", int, "seed of the initial weights, dropout and batch order"),
    ("--eval-every", "eval_every", int, "steps between validation losses"),
    ("--log-every", "log_every", int, "steps between lines of the metrics log"),
    ("--checkpoint-every", "checkpoint_every", int, "steps between checkpoints"),
]
DATA_FLAGS = [
    ("--dataset", "dataset", str, "builtin (synthetic, offline; the default), opus_books, or a .jsonl/.csv/.tsv/"
                                  ".parquet file of pairs"),
    ("--pair", "pair", str, "source-target languages (default en-it)"),
    ("--n-pairs", "n_pairs", int, "size of the built-in corpus (default 20000)"),
    ("--subset", "subset", int, "keep only N pairs of the corpus"),
    ("--subset-mode", "subset_mode", str, "which N pairs: first (default) or random"),
    ("--data-seed", "seed", int, "seed of the corpus split (and of the built-in corpus)"),
    ("--max-len", "max_len", int, "longest sentence in tokens, [SOS]/[EOS] included"),
    ("--length-policy", "length_policy", str, "longer pairs: drop (default) or truncate"),
    ("--min-frequency", "min_frequency", int, "a word enters the vocabulary when seen this often (default 2)"),
]


def add_train_parser(commands):
    from numpy_transformer.presets import PRESETS

    train = commands.add_parser("train", help="train a translation model (built-in corpus by default)",
                                description="Train a translation model and evaluate it on the test split.")
    train.add_argument("--out", default="runs/default", metavar="DIR",
                       help="folder of the checkpoint, log, figure and metrics (default runs/default)")
    train.add_argument("--preset", choices=list(PRESETS),
                       help="default if not given. " + "; ".join(f"{name}: {preset.description}" for name, preset in PRESETS.items()))
    train.add_argument("--resume", action="store_true", help="continue the run saved in --out")
    train.add_argument("--overwrite", action="store_true", help="replace a run already saved in --out")
    groups = (("model", MODEL_FLAGS), ("training", TRAINING_FLAGS), ("data", DATA_FLAGS))
    for name, flags in groups:
        group = train.add_argument_group(f"{name} (override the preset)")
        for flag, field, kind, text in flags:
            group.add_argument(flag, dest=f"{name}.{field}", type=kind, help=text, metavar=field.upper())
    special = train.add_argument_group("model and training: more")
    special.add_argument("--layers", type=int, help="encoder and decoder layers (both)")
    special.add_argument("--tie-embeddings", action=argparse.BooleanOptionalAction, dest="model.tie_embeddings",
                         help="the output projection is the target embedding transposed")
    special.add_argument("--lr", type=float, help="a constant learning rate (the thesis's runs: 1e-4)")
    special.add_argument("--warmup", type=int, metavar="STEPS",
                         help="the warm-up schedule d^-0.5·min(t^-0.5, t·STEPS^-1.5) (the default preset's)")
    special.add_argument("--clip-norm", type=float, help="largest gradient norm; 0 turns clipping off")
    add_decoding_arguments(train, "the final evaluation on the test split")
    train.add_argument("--samples", type=int, default=4, help="test translations to print (default 4)")
    add_common_arguments(train)
    train.set_defaults(run=train_command)


def add_decoding_arguments(parser, what):
    parser.add_argument("--beam", type=positive_integer, default=4, metavar="N",
                        help=f"beam size of {what} (default 4; 1: greedy only)")
    parser.add_argument("--length-penalty", type=float, default=0.6, metavar="ALPHA",
                        help="α of beam search's length penalty ((5 + |y|)/6)^α (default 0.6)")


def add_common_arguments(parser):
    parser.add_argument("--cache-dir", help="where datasets keeps its copies (default HF_DATASETS_CACHE)")
    parser.add_argument("--threads", type=positive_integer, default=1,
                        help="BLAS threads (default 1: small matrices gain little from more, and "
                             "threads waiting for a busy CPU slow training down several times)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar and no lines per validation")


def positive_integer(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def build_parser():
    parser = argparse.ArgumentParser(prog="numpy-transformer", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    check = commands.add_parser("gradcheck", help="gradient-check every primitive op of the engine")
    check.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    check.set_defaults(run=gradcheck_command)
    add_train_parser(commands)

    translate = commands.add_parser("translate", help="translate sentences with a trained model",
                                    description="Translate the sentences given, or the lines of standard input.")
    translate.add_argument("--checkpoint", required=True, metavar="DIR", help="the folder `train --out` wrote")
    translate.add_argument("sentences", nargs="*", help="sentences to translate (none: read standard input)")
    add_decoding_arguments(translate, "the translation")
    add_common_arguments(translate)
    translate.set_defaults(run=translate_command)

    evaluate = commands.add_parser("evaluate", help="BLEU, chrF and perplexity of a trained model",
                                   description="Score a trained model on its test (or validation) split, "
                                               "rebuilt from the data description saved with it.")
    evaluate.add_argument("--checkpoint", required=True, metavar="DIR", help="the folder `train --out` wrote")
    evaluate.add_argument("--split", choices=("test", "validation"), default="test")
    evaluate.add_argument("--samples", type=int, default=4, help="translations to print (default 4)")
    add_decoding_arguments(evaluate, "the evaluation")
    add_common_arguments(evaluate)
    evaluate.set_defaults(run=evaluate_command)
    add_attention_command(commands)
    add_bench_command(commands)
    return parser


def limit_blas_threads(threads):
    """Set the BLAS thread count through the environment, which BLAS reads when NumPy loads:
    this works only before NumPy is imported, and never overrides the user's own setting."""
    if "numpy" in sys.modules or any(name in os.environ for name in BLAS_THREAD_VARIABLES):
        return
    for name in BLAS_THREAD_VARIABLES:
        os.environ[name] = str(threads)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    threads = argparse.ArgumentParser(add_help=False)
    threads.add_argument("--threads", type=int, default=1)
    early, _ = threads.parse_known_args(argv)     # before the parser below imports NumPy
    if argv and argv[0] in MODEL_COMMANDS and early.threads >= 1:
        limit_blas_threads(early.threads)
    args = build_parser().parse_args(argv)
    from numpy_transformer.checkpoint import CheckpointError
    from numpy_transformer.data import DataUnavailableError

    try:
        return args.run(args)
    except (CheckpointError, DataUnavailableError, ValueError, FileNotFoundError) as error:
        print(f"numpy-transformer {args.command}: error: {error}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print(f"numpy-transformer {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
