"""What the commands share: their exit statuses, the arguments several of them take (decoding
settings, threads, the caches, the weights, quiet), each with help naming the command's own
work, and the progress bars drawn on a terminal.

Nothing here imports NumPy: the parser is built before the BLAS thread count is fixed. The
argparse types import the checks of `autograd.checks` when they run, after it is.
"""
import argparse
import sys

EXIT_ERROR, EXIT_INTERRUPTED = 1, 130
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def positive_integer(text):
    """argparse type: an integer ≥ 1."""
    return _checked(text, int, lambda checks, value: checks.checked_integer("the value", value, low=1))


def integer_at_least(low):
    """argparse type: an integer ≥ low (a benchmark's size that needs at least that much)."""
    def integer(text):
        return _checked(text, int, lambda checks, value: checks.checked_integer("the value", value, low=low))
    return integer


def thread_count(text):
    """argparse type: an integer from 1 to the processors this process may use (training/cores.py)."""
    from numpy_transformer.training import cores

    usable = cores.usable_cores()
    return _checked(text, int, lambda checks, value: checks.checked_integer("the value", value, low=1, high=usable),
                    note=f" ({cores.describe_cores()})")


def non_negative_integer(text):
    """argparse type: an integer ≥ 0."""
    return _checked(text, int, lambda checks, value: checks.checked_integer("the value", value, low=0))


def non_negative_number(text):
    """argparse type: a finite number ≥ 0."""
    return _checked(text, float, lambda checks, value: checks.checked_number("the value", value, low=0))


def _checked(text, kind, check, note=""):
    import autograd.checks as checks

    try:
        return check(checks, kind(text))
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error).removeprefix("the value ") + note) from None


def probability(text):
    """argparse type: a number in (0, 1]."""
    return _checked(text, float, lambda checks, value: checks.checked_number("the value", value, low=0, high=1,
                                                                             low_open=True))


def json_object(text):
    """argparse type: a JSON object such as '{"window": 8}'."""
    from numpy_transformer.bounded_json import parse_json

    try:
        value = parse_json(text, "the value", remedy="write it as JSON, such as '{\"window\": 8}'")
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{str(error).removeprefix('the value: ')}: {text[:60]!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object such as '{{\"window\": 8}}', got {text!r}")
    return value


DECODING_DEFAULTS = {"beam": 4, "length_penalty": 1.0}


def add_decoding_arguments(parser, what):
    parser.add_argument("--beam", type=positive_integer, default=DECODING_DEFAULTS["beam"], metavar="N",
                        help=f"beam size of {what} (default {DECODING_DEFAULTS['beam']}; 1: greedy only)")
    parser.add_argument("--length-penalty", type=non_negative_number, default=DECODING_DEFAULTS["length_penalty"],
                        metavar="ALPHA",
                        help="α ≥ 0: beam search ranks by log P(y) / |y|^α (default 1: the mean log-probability "
                             "per token; 0: the raw log-probability)")


TRAINING_THREADS = ("cores to train on, at most those this process may use: N processes share each step, a part of "
                    "the batch each, and N threads the "
                    "optimizer's update (default 1; 2 trains the default preset 1.7 times as fast on an idle 2-core "
                    "AMD EPYC, 1.6 times on an idle 2-core Xeon; a run that starts beside another job keeping the "
                    "cores busy takes one core, as --threads 1, with its numbers: on that Xeon beside one busy "
                    "process 77.7 s against 79.1 s; a step runs in one process when "
                    "that is faster, with the same numbers; a seeded run repeats itself for a given N, and "
                    "differs from another N by rounding; several hosts: mpiexec -n P numpy-transformer train, "
                    "docs/training.md)")


def add_threads_argument(parser, work=None, why="the matrix products of these models gain little from more"):
    """--threads: the BLAS threads of `work` (what the command computes: "decoding"), the default
    1 explained by `why`; with `work` None those of training and of the optimizer's update."""
    text = TRAINING_THREADS if work is None else f"threads of BLAS for {work} (default 1: {why})"
    parser.add_argument("--threads", type=thread_count, default=1, help=text)


def add_split_argument(parser, more=""):
    """--split batch|blas|auto: how --threads N > 1 shares a training step (training/thread_plan.py)."""
    parser.add_argument("--split", choices=("auto", "batch", "blas"), default="auto",
                        help="how --threads N > 1 shares a training step: batch (the batch's rows shared by N "
                             "processes of one BLAS thread each), blas (one process, N BLAS threads) or auto "
                             "(default: the faster of the two, measured in a few steps for the model on this "
                             "machine and kept in the user's cache folder, ~/.cache/numpy-transformer) " + more)


def add_quiet_argument(parser, bars):
    """--quiet: no progress bar, `bars` saying which ("while translating")."""
    parser.add_argument("--quiet", action="store_true", help=f"no progress bar on standard error {bars} (a bar is "
                                                             f"drawn only when standard error is a terminal)")


def add_dataset_cache_argument(parser, corpus):
    """--cache-dir of a command that reads `corpus` (a Hugging Face dataset, through datasets)."""
    parser.add_argument("--cache-dir", metavar="DIR",
                        help=f"where datasets keeps its copy of {corpus}: a Hugging Face dataset's download, or the "
                             f"table it reads from a .jsonl, .json or .parquet file (default "
                             f"HF_DATASETS_CACHE)")


def add_model_cache_argument(parser):
    """--cache-dir of a command that may read a model from the Hugging Face Hub."""
    parser.add_argument("--cache-dir", metavar="DIR",
                        help="where huggingface_hub keeps the models it downloads, for --checkpoint a Hub name "
                             "(default HF_HUB_CACHE)")


def add_weights_argument(parser, use):
    """--weights: which weights of a run folder the command `use`s ("translate with")."""
    parser.add_argument("--weights", choices=("best", "last"), default="best",
                        help=f"which weights of the run folder to {use}: best (those of the lowest validation loss, "
                             f"checkpoint_best.npz; the default) or last (those of the run's last step); a run "
                             f"without best weights gives its last ones, with a note")


def on_terminal():
    """Whether a progress bar is wanted: only when standard error is a terminal."""
    return sys.stderr.isatty()


def progress(iterable=None, **options):
    """tqdm over `iterable` on standard error, shown only on a terminal (nothing in a log)."""
    from tqdm import tqdm

    return tqdm(iterable, file=sys.stderr, disable=not on_terminal(), dynamic_ncols=True, **options)


def progress_bars(quiet):
    """What a command hands the library as its `progress`: a function drawing a bar on standard
    error (each bar removed when its work is done, so the terminal keeps the output alone), or
    None (no bar) with --quiet or when standard error is not a terminal (a log, a pipe, CI)."""
    if quiet or not on_terminal():
        return None
    return lambda iterable, **options: progress(iterable, leave=False, **options)


MODEL_NAMES = {"translation": "a translation model", "lm": "a causal language model (GPT)",
               "mlm": "a masked language model (BERT)"}


# the special tokens each command puts around the text: generate starts an empty prompt with
# bos_token and stops at eos_token; fill-mask reads [CLS] text [SEP] and predicts at [MASK]
NEEDED_TOKENS = {"lm": ("bos_token", "eos_token"), "mlm": ("cls_token", "sep_token", "mask_token")}
TASK_COMMANDS = {"lm": "generate", "mlm": "fill-mask"}


def training_command(folder, tasks=("translation",)):
    """The `train` command that makes a model of the first of `tasks` in `folder`, the others
    named after it: `numpy-transformer train --task lm --out runs/gpt`."""
    flags = {"translation": "", "lm": "--task lm ", "mlm": "--task mlm "}
    kinds = {"translation": "a translation model", "lm": "a GPT", "mlm": "a BERT"}
    others = ", ".join(f"{flags[task].strip()} for {kinds[task]}" for task in tasks[1:])
    return f"`numpy-transformer train {flags[tasks[0]]}--out {folder}`" + (f" ({others})" if others else "")


def check_run_folder(folder, tasks=("translation",)):
    """A ValueError in one line when --checkpoint `folder` does not exist: what to train there,
    for the `tasks` the command reads (the first is the one suggested)."""
    from pathlib import Path

    if not Path(folder).exists():
        raise ValueError(f"no such folder {folder}: train a model there with {training_command(folder, tasks)}")


def load_model_of(directory, task, weights="best"):
    """The checkpoint in `directory` with its `weights` ("best" or "last"), which must hold a
    model of `task` ("translation", "lm" or "mlm"); a ValueError naming what it holds and what to
    train otherwise (`check_run_folder` when the folder does not exist). The command prints
    `checkpoint.weights_line(weights)` on standard error once its input is known to be good (an
    error stays one line)."""
    from numpy_transformer.training.checkpoint import load_checkpoint

    check_run_folder(directory, (task,))
    checkpoint = load_checkpoint(directory, weights)
    if checkpoint.task != task:
        raise ValueError(f"{directory} holds {MODEL_NAMES[checkpoint.task]} (task {checkpoint.task}); this command "
                         f"needs {MODEL_NAMES[task]}: train one with numpy-transformer train --task {task} --out DIR")
    return checkpoint


def load_language_model(name, task, cache_dir=None, weights="best"):
    """(model, tokenizer, notes) for --checkpoint NAME: a run folder of `train --task TASK` (its
    `weights`), or a Hugging Face GPT-2 (task lm) or BERT (task mlm) folder, or such a model's
    Hub name. notes: the lines for standard error about a run folder's model (which weights,
    and its data)."""
    from numpy_transformer.interop.pretrained import load_pretrained, names_pretrained

    if not names_pretrained(name):
        checkpoint = load_model_of(name, task, weights)
        notes = [checkpoint.weights_line(weights)]
        if checkpoint.data_config.dataset == "builtin":
            notes.append(f"note: {name} was trained on the built-in synthetic corpus (a small grammar, not real text)")
        return checkpoint.model, checkpoint.tokenizers[0], notes
    model, tokenizer = load_pretrained(name, cache_dir)
    if model.config.causal != (task == "lm"):
        held = "a GPT-2 (causal)" if model.config.causal else "a BERT (masked)"
        raise ValueError(f"{name} holds {held} model; this command needs {MODEL_NAMES[task]}")
    if task == "mlm" and not model.masked_lm_head:
        raise ValueError(f"{name} holds a BERT encoder without a masked-LM head (BertModel weights, no "
                         f"cls.predictions.*, as a sentence-embedding model has): fill-mask needs BertForMaskedLM "
                         f"weights; embed texts with it by numpy-transformer embed --checkpoint {name}")
    tokenizer.require(NEEDED_TOKENS[task], TASK_COMMANDS[task])
    return model, tokenizer, []


def utf8_lines(texts, what):
    """`texts` (command-line arguments or lines), each checked to be valid UTF-8: Python hands
    undecodable bytes over as lone surrogates, which the tokenizers cannot read."""
    for number, text in enumerate(texts, start=1):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"{what} {number} is not valid UTF-8 text ({text.encode('utf-8', 'surrogateescape')!r}): "
                             f"convert it to UTF-8 first (e.g. iconv -f latin1 -t utf-8)") from None
    return list(texts)


def standard_input_lines():
    """The lines of standard input, read as UTF-8 (a ValueError naming the line otherwise), as a
    file has them: split at line feeds only (a carriage return before one dropped), so that a
    command can answer each line with one line (str.splitlines would also split at form feeds,
    U+001C to U+001E, U+0085 and U+2028 inside a line)."""
    binary = getattr(sys.stdin, "buffer", None)          # None: a text stream put in its place
    text = binary.read().decode("utf-8", "surrogateescape") if binary is not None else sys.stdin.read()
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return utf8_lines([line.removesuffix("\r") for line in lines], "line")
