"""`numpy-transformer train`: train a model, then evaluate it on the test split.

    numpy-transformer train [--out DIR] [--preset NAME] [--dataset tatoeba|builtin|opus_books|FILE|DIR|HUB_NAME] [flags]
    numpy-transformer train --dataset train.jsonl --validation-file val.jsonl [--test-file test.jsonl] [flags]
    numpy-transformer train --dataset data/corpus --pair en-de [flags]      (data/corpus.en + data/corpus.de)
    numpy-transformer train --dataset pairs.tsv --columns en,de --pair en-de [flags]   (a TSV file without header)
    numpy-transformer train --task lm|mlm [--dataset builtin|FILE.txt|HUB_NAME] [--language xx] [flags]
    numpy-transformer train --out DIR --resume [--steps N]

The task is translation (the default), a causal language model (lm, GPT) or a masked one
(mlm, BERT); each has its preset (`default`, `lm`, `mlm`).

Every field a preset sets can be overridden by a flag. The work is `numpy_transformer.training`
(`Run`: data, tokenizers, model, loop, checkpoints); this module parses and prints.
"""
import argparse
import contextlib
import json
import math
import re
import signal
import sys
import threading
import time

from numpy_transformer.cli.common import DECODING_DEFAULTS, EXIT_ERROR, EXIT_INTERRUPTED, add_dataset_cache_argument, \
    add_decoding_arguments, add_quiet_argument, add_split_argument, add_threads_argument, add_weights_argument, \
    json_object, non_negative_integer, on_terminal, progress_bars
from numpy_transformer.training.presets import PRESETS, TASK_PRESETS, measured_duration

TASKS = tuple(TASK_PRESETS)
DEFAULT_OUT = "runs/default"

# (flag, field, type, help): every field a preset sets can be overridden by a flag.
MODEL_FLAGS = [
    ("--d-model", "d_model", int, "width d of every token vector"),
    ("--n-heads", "n_heads", int, "attention heads H (d_model must be divisible by it)"),
    ("--d-ff", "d_ff", int, "hidden width m of the feed-forward network"),
    ("--encoder-layers", "n_encoder_layers", int, "encoder layers (translation)"),
    ("--decoder-layers", "n_decoder_layers", int, "decoder layers (translation)"),
    ("--dropout", "dropout", float, "dropout probability"),
    ("--norm-placement", "norm_placement", str, "LayerNorm after the residual sum (post, the thesis) or before (pre)"),
    ("--norm-variant", "norm_variant", str, "LayerNorm of eq. (2) (thesis) or PyTorch's (torch)"),
    ("--activation", "activation", str, "feed-forward activation: relu, gelu or swiglu"),
    ("--positional", "positional", str, "positional encoding: sinusoidal, learned, or relative (T5's bias)"),
    ("--relative-buckets", "relative_buckets", int, "buckets of T5's relative position bias (--positional "
                                                    "relative only)"),
    ("--relative-max-distance", "relative_max_distance", int, "where its last bucket starts (--positional relative "
                                                              "only)"),
    ("--positional-base", "positional_base", float, "the base N of the sinusoidal encoding, eq. (1) (--positional "
                                                    "sinusoidal only)"),
    ("--norm-eps", "norm_eps", float, "ε of the LayerNorm"),
    ("--attention", "attention", str, "the encoder's self-attention (a language model's): full or a chapter 2 "
                                      "variant"),
    ("--decoder-attention", "decoder_attention", str, "the decoder's self-attention (a causal kind; translation)"),
    ("--attention-options", "attention_options", json_object, 'options of the variants, as JSON: \'{"window": 8}\''),
    ("--memory-slots", "memory_slots", int, "m learned key/value slots appended to every attention's keys and "
                                            "values (0: none; full attention only)"),
    ("--init", "init", str, "initial weights: xavier (the notes' rules), xavier_uniform (Glorot's uniform rule, "
                            "embeddings included) or torch (PyTorch's defaults)"),
]
TRAINING_FLAGS = [
    ("--batch-size", "batch_size", int, "sentence pairs (texts) per step"),
    ("--steps", "steps", int, "optimizer steps in all"),
    ("--epochs", "epochs", float, "passes over the training pairs (instead of --steps)"),
    ("--lr-factor", "lr_factor", float, "factor of the warm-up schedule (refused with a constant --lr)"),
    ("--label-smoothing", "label_smoothing", float, "label smoothing ε of the loss"),
    ("--seed", "seed", int, "seed of the initial weights, dropout and batch order"),
    ("--eval-every", "eval_every", int, "steps between validation losses"),
    ("--log-every", "log_every", int, "steps between lines of the metrics log"),
    ("--checkpoint-every", "checkpoint_every", int, "steps between checkpoints (each also writes the weights of "
                                                    "the lowest validation loss so far, checkpoint_best.npz)"),
    ("--early-stop", "early_stop", int, "stop after N validations in a row without a lower validation loss "
                                        "(without it the run trains every step)"),
    ("--precision", "precision", str, "float32, or mixed: float16 forward and backward, float32 master weights and "
                                      "Adam, dynamic loss scaling"),
]
DATA_FLAGS = [
    ("--dataset", "dataset", str, "tatoeba (real English–Italian sentences in the package, offline; tatoeba-full: "
                                  "every pair of it, 344,949, the translator preset's), builtin "
                                  "(the synthetic grammar, offline), opus_books, a .jsonl/.json/.csv/"
                                  ".tsv/.parquet file of pairs (columns named by the languages, or see --columns), "
                                  "the prefix P of two parallel text files P.en and P.it of one sentence a line "
                                  "(the pair's languages; line i of one translates line i of the other), each split "
                                  "90/5/5 unless --validation-file/--test-file give its official splits; a folder of "
                                  "train.*, validation.* (val, valid, dev) and test.* files, or of train.en + "
                                  "train.it, valid.en + valid.it, test.en + test.it; or a Hugging Face dataset with a "
                                  "translation column or one column per language (its own splits); for --task "
                                  "lm|mlm also .txt files (one text per line) or a Hugging Face dataset with a "
                                  "'text' column"),
    ("--validation-file", "validation_file", str, "the official validation split of the --dataset file (a file, or "
                                                  "the prefix of parallel text files; without it: 5%% of the "
                                                  "training file)"),
    ("--test-file", "test_file", str, "the official test split of the --dataset file (a file, or a prefix; without "
                                      "it: 5%% of the training file)"),
    ("--columns", "columns", str, "which columns of a CSV/TSV (or JSON lines, Parquet) file hold which language: "
                                  "en,de for a file without a header (its columns in order: the first English, the "
                                  "second German), english=en,german=de for a header naming them otherwise"),
    ("--dataset-config", "dataset_config", str, "the configuration of a Hugging Face dataset (wikitext-2-raw-v1, "
                                                "iwslt2017-en-de; refused with tatoeba, builtin and opus_books, read "
                                                "by name)"),
    ("--pair", "pair", str, "source-target languages"),
    ("--language", "language", str, "a language model's language: the side of a parallel corpus it reads "
                                    "(without it: the pair's source)"),
    ("--n-pairs", "n_pairs", int, "size of the built-in corpus, --dataset builtin (refused with another corpus, "
                                  "which has its own size)"),
    ("--subset", "subset", int, "keep only N pairs of the corpus"),
    ("--subset-mode", "subset_mode", str, "which N pairs --subset keeps: first or random (refused without "
                                          "--subset)"),
    ("--data-seed", "seed", int, "seed of the corpus split (and of the built-in corpus)"),
    ("--max-len", "max_len", int, "longest sentence in tokens, [SOS]/[EOS] included"),
    ("--length-policy", "length_policy", str, "longer pairs: drop or truncate; longer texts also split"),
    ("--min-frequency", "min_frequency", int, "a word (for bpe and wordpiece, a merge) enters the vocabulary when "
                                              "seen this often (refused with --tokenizer unigram, which keeps the "
                                              "likeliest pieces however often they are seen)"),
    ("--tokenizer", "tokenizer", str, "word (the thesis's word-level vocabulary), or subwords: bpe (byte-level BPE), "
                                      "wordpiece (BERT's) or unigram (SentencePiece's)"),
    ("--vocab-size", "vocab_size", int, "entries of each subword vocabulary (refused with --tokenizer word)"),
]


def default_run():
    """section ("model", "training", "data") → field → its value in a run of `numpy-transformer
    train` with neither --preset nor --task: the default preset's, else its configuration's own
    default (TransformerConfig's, TrainingConfig's, DataConfig's). The help names these, taken
    from the code rather than written again. (The parser is built once the BLAS thread count is
    fixed: loading NumPy here is safe.)"""
    import dataclasses
    from numpy_transformer.config import TransformerConfig
    from numpy_transformer.training.settings import resolve

    model, training, data = resolve()
    missing = dataclasses.MISSING
    own = {field.name: field.default_factory() if field.default is missing else field.default
           for field in dataclasses.fields(TransformerConfig)
           if field.default is not missing or field.default_factory is not missing}    # the fields with a default
    return {"model": {**own, **model}, "training": dataclasses.asdict(training), "data": dataclasses.asdict(data)}


def shown(value):
    """A default as the help writes it: 0.1, 1e-06, 10000 (not 10000.0), xavier_uniform."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def with_default(text, value):
    """A flag's help `text` ending with "; default VALUE", or as it is for a default of None
    (its text says what no value means)."""
    return text if value is None or value == {} else f"{text}; default {shown(value)}"


def switch_default(flag, value):
    """"; default --FLAG" or "; default --no-FLAG": the form of a --FLAG/--no-FLAG switch that
    `value` (True or False) stands for."""
    return f"; default {flag if value else flag.replace('--', '--no-', 1)}"


# (flag, (section, field), help) of the switches --FLAG / --no-FLAG
SWITCHES = [
    ("--tie-embeddings", ("model", "tie_embeddings"), "the output projection is the target embedding transposed"),
    ("--scale-embeddings", ("model", "scale_embeddings"), "multiply the embeddings by √d_model (§1.2) or not "
                                                          "(GPT-2, BERT)"),
    ("--gradient-checkpointing", ("model", "gradient_checkpointing"), "recompute the layers' activations in backward "
                                                                      "(√L segments): less memory, more time"),
    ("--shared-vocabulary", ("data", "shared_vocabulary"), "translation: one tokenizer trained on both languages, for "
                                                           "source and target, or one per language"),
]


def preset_help(name, preset):
    """A preset's description, with the time it took where it was measured."""
    took = measured_duration(name)
    return f"{preset.description} ({took})" if took else preset.description


def add_parser(commands):
    defaults = default_run()
    data = defaults["data"]
    vocabulary = (f"one shared {data['tokenizer']} vocabulary" if data["shared_vocabulary"] else
                  f"one {data['tokenizer']} vocabulary per language")
    if data["tokenizer"] != "word":
        vocabulary += f" of {data['vocab_size']:,}"
    train = commands.add_parser(
        "train", help=f"train a translation model (by default on dataset {data['dataset']}, {data['pair']}) or a "
                      f"language model",
        description=f"Train a translation model (or, with --task, a language model) and evaluate it on the test "
                    f"split. The flags of the groups below override the preset; the defaults they name are those "
                    f"of a run with neither --task nor --preset, that is --preset default: {data['dataset']} "
                    f"{data['pair']}, {vocabulary}, {defaults['model']['init']} weights. --task lm|mlm and the other "
                    f"presets set their own values (--preset).")
    train.add_argument("--out", metavar="DIR",
                       help=f"folder of the checkpoint, log, figure and metrics (default {DEFAULT_OUT})")
    train.add_argument("--task", choices=TASKS, dest="data.task",
                       help=with_default("translation, lm (a causal language model, GPT) or mlm (a masked one, BERT)",
                                         data["task"]))
    train.add_argument("--preset", choices=list(PRESETS),
                       help="the task's own if not given (default, lm, mlm). " +
                            "; ".join(f"{name}: {preset_help(name, preset)}" for name, preset in PRESETS.items()))
    train.add_argument("--resume", action="store_true", help="continue the run saved in --out")
    train.add_argument("--overwrite", action="store_true", help="replace a run already saved in --out")
    groups = (("model", MODEL_FLAGS), ("training", TRAINING_FLAGS), ("data", DATA_FLAGS))
    for name, flags in groups:
        group = train.add_argument_group(f"{name} (override the preset)")
        for flag, field, kind, text in flags:
            group.add_argument(flag, dest=f"{name}.{field}", type=kind, help=with_default(text, defaults[name][field]),
                               metavar=field.upper())
    special = train.add_argument_group("model, training and data: more")
    model, training = defaults["model"], defaults["training"]
    special.add_argument("--layers", type=int, help=with_default("encoder and decoder layers (both), or a language "
                                                                 "model's layers", model["n_encoder_layers"]))
    for flag, (section, field), text in SWITCHES:
        special.add_argument(flag, action=argparse.BooleanOptionalAction, dest=f"{section}.{field}",
                             help=text + switch_default(flag, defaults[section][field]))
    special.add_argument("--lr", type=float, help="a constant learning rate (the thesis's runs: 1e-4) instead of the "
                                                  "warm-up schedule")
    special.add_argument("--warmup", type=int, metavar="STEPS",
                         help=with_default("the warm-up schedule d^-0.5·min(t^-0.5, t·STEPS^-1.5)",
                                           training["warmup_steps"] if training["schedule"] == "warmup" else None))
    special.add_argument("--clip-norm", type=float,
                         help=with_default("largest gradient norm; 0 turns clipping off", training["clip_norm"]))
    add_decoding_arguments(train, "the final evaluation on the test split")
    train.set_defaults(beam=None, length_penalty=None)      # given or not: decoding_settings
    train.add_argument("--samples", type=non_negative_integer, default=4, help="test translations to print (default 4)")
    add_dataset_cache_argument(train, "--dataset")
    add_threads_argument(train)
    add_split_argument(train, "(kept by a resumed run unless given)")
    add_weights_argument(train, "score in the final evaluation on the test split")
    add_quiet_argument(train, "while training or during the final evaluation, and no line per validation")
    train.set_defaults(run=command)


def command(args):
    """Train (or resume) the run in --out, evaluate it on the test split, write metrics.json.
    SIGTERM is Ctrl-C throughout (`sigterm_as_ctrl_c`): every ending is one of Ctrl-C's."""
    with sigterm_as_ctrl_c():
        return train_command(args)


@contextlib.contextmanager
def sigterm_as_ctrl_c():
    """While in this context SIGTERM (what `kill`, a scheduler or a container's stop sends) raises
    KeyboardInterrupt, as Ctrl-C does: the training loop's own handler (training/loop.py) stops
    after the step under way and saves, and everywhere else (reading the data, the last save,
    the final evaluation) the command ends as an interrupted one: no temporary left, the last
    checkpoint kept, the command to continue printed, exit status 130. Only the main thread can
    install a handler; elsewhere SIGTERM keeps its default."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


def train_command(args):
    """`command` without its SIGTERM handler."""
    from numpy_transformer.training.settings import resolve
    from numpy_transformer.training.run import Run
    from numpy_transformer.training.run_folder import RunFolderError

    started = time.perf_counter()
    given_out, args.out = args.out is not None, DEFAULT_OUT if args.out is None else args.out
    report = None if args.quiet else print
    options = dict(cache_dir=args.cache_dir, progress=not args.quiet and on_terminal(), report=report,
                   threads=args.threads, split=args.split)
    model, training, data = overrides(args)
    if args.resume:
        run = resume_run(args, model, training, data, options)
    else:
        try:
            settings = resolve(args.preset, model, training, data)
        except ValueError as error:
            raise ValueError(named_by_flag(str(error), args.layers is not None)) from None
        decoding_settings(args, settings[2].task)
        from numpy_transformer.training import mpi

        if mpi.world() is not None and settings[1].precision == "mixed":      # before the folder is made
            raise ValueError("--precision mixed trains in one process: start it without mpiexec")
        try:
            run = Run.new(args.out, *settings, overwrite=args.overwrite, **options)
        except RunFolderError as error:
            if given_out:
                raise
            raise RunFolderError(f"{error} (--out was not given: a run goes to {DEFAULT_OUT} by default)") from None
    if report is None and run.folder.lock_note is not None:      # else Run reports it
        print(run.folder.lock_note, file=sys.stderr)
    with run:                                   # the folder stays locked until the metrics are written
        return train_and_evaluate(run, args, started)


def train_and_evaluate(run, args, started):
    """Train the run, print and save its scores on the test split; the exit status."""
    from numpy_transformer.training.evaluation import print_warnings
    from numpy_transformer.training.run import METRICS_FILE

    print("\n".join(run.data.summary + [model_line(run), training_line(run)] + ranks_line(run)))
    print_warnings(run.data)
    try:
        result = run.train()
    except KeyboardInterrupt:                   # a second Ctrl-C (or SIGTERM) during the last save
        return interrupted(run, args, f"at step {run.trainer.state.step} of {run.trainer.total_steps}")
    saved = f"a checkpoint of step {result.step} is in {run.directory}" if result.saved else None
    if result.worker_lost is not None:          # a worker process died or stopped answering
        print(f"numpy-transformer train: error: {result.worker_lost}; "
              f"{saved or f'the last checkpoint in {run.directory} is kept'}. Continue with: {resume_command(run, args)}",
              file=sys.stderr)
        return EXIT_ERROR
    if result.interrupted:
        return interrupted(run, args, f"at step {result.step} of {result.total_steps}", saved)
    try:
        return evaluate_and_write(run, args, started, result)
    except KeyboardInterrupt:
        return interrupted(run, args, "during the final evaluation on the test split",
                           f"the checkpoint of step {result.step} in {run.directory} is kept ({METRICS_FILE} is "
                           f"written when the evaluation completes)", "Finish it")


def resume_command(run, args):
    """The command that continues `run`: the same --threads N (or mpiexec -n P) continues it
    exactly."""
    from numpy_transformer.training import mpi

    if mpi.world() is not None:
        return f"mpiexec -n {args.threads} numpy-transformer train --out {run.directory} --resume"
    return f"numpy-transformer train --out {run.directory} --resume" + \
        (f" --threads {args.threads}" if args.threads > 1 else "")


def interrupted(run, args, when, where=None, what="Continue"):
    """Print how a run interrupted `when` ended and what to type next; EXIT_INTERRUPTED. where:
    what was saved (default: the last checkpoint is kept). A new run stopped before its first
    checkpoint has none: its folder is one the same `train` command starts again."""
    from numpy_transformer.training.checkpoint import has_checkpoint

    if not has_checkpoint(run.directory):
        print(f"Interrupted {when}, before the first checkpoint: nothing to continue in {run.directory}; run the "
              f"same numpy-transformer train command again (without --resume) to start over there", file=sys.stderr)
    else:
        print(f"Interrupted {when}: {where or f'the last checkpoint in {run.directory} is kept'}. {what} with:\n"
              f"  {resume_command(run, args)}", file=sys.stderr)
    return EXIT_INTERRUPTED


def evaluate_and_write(run, args, started, result):
    """Score the run's weights on the test split, write metrics.json; the exit status."""
    from numpy_transformer.training.atomic_files import atomic_write_text
    from numpy_transformer.training.checkpoint import load_checkpoint
    from numpy_transformer.training.evaluation import evaluate_split
    from numpy_transformer.training.loop import format_seconds
    from numpy_transformer.training.parallel import evaluation_threads
    from numpy_transformer.training.run import METRICS_FILE
    from numpy_transformer.training.thread_plan import machine_busy

    state = run.trainer.state
    if result.stopped_early:
        print(f"Stopped early at step {result.step} of {result.total_steps}: {state.validations_without_improvement} "
              f"validations without a validation loss below {state.best_loss:.3f} (step {state.best_step}).")
    scored = load_checkpoint(run.directory, args.weights)
    print(scored.weights_line(args.weights))
    evaluation_started = time.perf_counter()
    # one BLAS thread for decoding after a split batch, or while other work keeps the cores busy
    with evaluation_threads(run.trainer.state.split == "batch" or bool(machine_busy())):
        evaluation = evaluate_split(scored.model, run.data, run.configs["data"], run.objective, "test", args.beam,
                                    args.length_penalty, args.samples, progress_bars(args.quiet))
    metrics = run_metrics(run, result, evaluation, args, time.perf_counter() - started, scored)
    metrics["evaluation_seconds"] = round(time.perf_counter() - evaluation_started, 1)
    atomic_write_text(run.directory / METRICS_FILE, json.dumps(metrics, indent=2, ensure_ascii=False) + "\n")
    best = ", checkpoint_best.npz" if state.best_step is not None else ""
    total = format_seconds(metrics["total_seconds"])
    if args.resume:       # the step lines' clock counts the training before the resume too
        total = f"{total} in this process; {format_seconds(result.train_seconds)} of training in all"
    print(f"Wrote {run.directory}/: checkpoint.npz{best} (+ model.json, training.json, data.json, tokenizers), "
          f"log.jsonl, loss.png, {METRICS_FILE}. Total time {total}.")
    return 0


# settings class → field → the flag that sets it, for the messages of a bad value
FIELD_FLAGS = {"TransformerConfig": {field: flag for flag, field, _, _ in MODEL_FLAGS} | {"n_layers": "--layers"},
               "TrainingConfig": {field: flag for flag, field, _, _ in TRAINING_FLAGS}
               | {"lr": "--lr", "warmup_steps": "--warmup", "clip_norm": "--clip-norm"},
               "DataConfig": {field: flag for flag, field, _, _ in DATA_FLAGS}}


LAYER_FIELDS = ("n_layers", "n_encoder_layers", "n_decoder_layers")


def named_by_flag(message, layers_given=False):
    """A settings class's message ("TrainingConfig: warmup_steps must be a positive integer,
    got 0") with the flag that sets the field in its place ("--warmup must be …"): the flag is
    what the user typed, and what changes the value. layers_given: --layers set the layer counts."""
    match = re.match(r"(\w+): (\w+) ", message)
    flag = FIELD_FLAGS.get(match[1], {}).get(match[2]) if match else None
    if match and layers_given and match[2] in LAYER_FIELDS:
        flag = "--layers"
    return f"{flag} {message[match.end():]}" if flag else message


def overrides(args):
    """(model, training, data) dicts of the fields the flags set (flags left out set nothing)."""
    if args.resume and args.overwrite:
        raise ValueError("give --resume (continue the run in --out) or --overwrite (start it again), not both")
    given = {name: value for name, value in vars(args).items() if value is not None}
    model, training, data = ({name.split(".", 1)[1]: value for name, value in given.items()
                              if name.startswith(prefix + ".")} for prefix in ("model", "training", "data"))
    if args.layers is not None:
        task = data.get("task") or (PRESETS[args.preset].task if args.preset else "translation")
        layers = ("n_encoder_layers", "n_decoder_layers") if task == "translation" else ("n_layers",)
        model = {**dict.fromkeys(layers, args.layers), **model}
    if args.lr is not None and args.warmup is not None:
        raise ValueError("give --lr (a constant learning rate) or --warmup (the warm-up schedule), not both")
    if args.lr is not None:
        training.update(schedule="constant", lr=args.lr)
    if args.warmup is not None:
        training.update(schedule="warmup", warmup_steps=args.warmup)
    if args.clip_norm is not None:
        training["clip_norm"] = args.clip_norm or None
    if "steps" in training and "epochs" in training:
        raise ValueError("give --steps or --epochs, not both")
    if "steps" in training or "epochs" in training:
        training = {"steps": None, "epochs": None, **training}
    return model, training, data


def resume_run(args, model, training, data, options):
    """The run in --out, continued. Only how long it runs and how often it reports may change."""
    from numpy_transformer.training.run import RESUMABLE_FIELDS, Run

    changed = changed_settings(args.out, model, data, args.preset)
    if changed:
        raise ValueError(f"--resume continues the saved run with its own settings; cannot change "
                         f"{', '.join(changed)} (only {', '.join(RESUMABLE_FIELDS)} may change)")
    decoding_settings(args, saved_task(args.out))
    run = Run.resume(args.out, training, **options)
    print(f"Resuming {run.directory} at step {run.trainer.state.step} of {run.trainer.total_steps}.")
    if run.unsaved_steps_until is not None:
        print(f"Note: its log went on to step {run.unsaved_steps_until}, past this checkpoint: the run ended "
              f"before it could save those steps (killed by a signal or the out-of-memory killer, for "
              f"instance); they are trained again, to the same numbers.")
    note = processes_note(run.trainer.state.processes, run.trainer.sharing(), run.trainer.state.step)
    if note:
        print(note)
    return run


def decoding_settings(args, task):
    """--beam and --length-penalty, given or their defaults, for a run of `task`: they set the
    beam search of a translation model's final evaluation, so either one given for a language
    model's run (which has none) is a ValueError rather than silently ignored (`--beam 1`, no
    beam search, asks for what such a run does)."""
    given = [f"--{name.replace('_', '-')}" for name in DECODING_DEFAULTS
             if getattr(args, name) is not None and not (name == "beam" and args.beam == 1)]
    if given and task not in (None, "translation"):
        raise ValueError(f"{' and '.join(given)} set{'s' if len(given) == 1 else ''} the beam search of a translation "
                         f"model's final evaluation; a --task {task} run is scored without one: leave "
                         f"{'it' if len(given) == 1 else 'them'} out")
    for name, default in DECODING_DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, default)


def saved_task(directory):
    """The task of the run saved in `directory`; None when its data.json cannot be read (Run.resume
    then names the file)."""
    from pathlib import Path

    from numpy_transformer.training.checkpoint import CONFIG_FILES
    from numpy_transformer.training.settings import DataConfig

    try:
        return DataConfig.load(Path(directory) / CONFIG_FILES["data"]).task
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def processes_note(before, now, step):
    """A line for a run resumed on another number of processes than it ran on (None if the
    same, or unknown): a run is a function of its seed and of that number (training/parallel.py)."""
    if before is None or before == now:
        return None
    return (f"Note: the run shared its steps between {before} process{'es' if before > 1 else ''} and continues on "
            f"{now}: from step {step + 1} on each batch is cut into {now} part{'s' if now > 1 else ''} and the "
            f"gradients summed in another order, so the weights follow a run on {now} (equal up to rounding, not "
            f"bit for bit, to continuing on {before})")


def changed_settings(directory, model, data, preset=None):
    """The model and data settings given with --resume (flags: {field: value}) whose values are
    not the run's own: repeating the run's `--task lm` or `--dataset pairs.tsv` changes nothing,
    nor does repeating its --preset (["preset"] when that preset, with the flags given, would
    set another model or data setting). A folder whose configurations cannot be read: none
    (Run.resume names the file)."""
    from pathlib import Path

    from numpy_transformer.config import TransformerConfig
    from numpy_transformer.training.checkpoint import CONFIG_FILES
    from numpy_transformer.training.settings import DataConfig

    try:
        saved = {"model": TransformerConfig.load(Path(directory) / CONFIG_FILES["model"]),
                 "data": DataConfig.load(Path(directory) / CONFIG_FILES["data"])}
    except (OSError, ValueError, TypeError, AttributeError):
        return []
    absent = object()

    def same(config, name, value):
        own = getattr(config, name, absent)
        return own == value or (isinstance(own, str) and isinstance(value, str) and own == str(Path(value).resolve()))

    changed = [name for kind, given in (("model", model), ("data", data)) for name, value in given.items()
               if not same(saved[kind], name, value)]
    if preset is not None and not changed:
        import dataclasses
        from numpy_transformer.training.settings import resolve

        fields, _, data_config = resolve(preset, model, None, data)
        derived = ("src_vocab_size", "tgt_vocab_size", "vocab_size", "pad_id", "max_len",    # from the data
                   "fingerprint")                                                       # of the corpus read
        if not (all(same(saved["model"], name, value) for name, value in fields.items() if name not in derived)
                and all(same(saved["data"], name, value) for name, value in dataclasses.asdict(data_config).items()
                        if name not in derived)):
            changed.append("preset")
    return changed


MODEL_KINDS = {"translation": "encoder-decoder", "lm": "decoder-only (causal)", "mlm": "encoder-only (masked LM)"}


def model_line(run):
    config = run.configs["model"]
    layers = getattr(config, "n_layers", None) or f"{config.n_encoder_layers}+{config.n_decoder_layers}"
    return (f"model: {MODEL_KINDS[run.objective.name]}, {layers} layers, d_model {config.d_model}, "
            f"{config.n_heads} heads (d_k {config.d_k}), d_ff {config.d_ff}, dropout {config.dropout}, "
            f"{config.norm_placement}-norm, {config.positional} positions"
            f"{f', {config.memory_slots} memory slots' if config.memory_slots else ''}, {run.parameters:,} parameters")


def training_line(run):
    config, trainer = run.configs["training"], run.trainer
    if config.schedule == "warmup":
        peak = config.lr_factor * (run.configs["model"].d_model * config.warmup_steps) ** -0.5
        rate = f"warm-up {config.warmup_steps} steps (peak lr {peak:.1e})"
    else:
        rate = f"constant lr {config.lr:g}"
    return (f"training: {trainer.total_steps:,} steps ({trainer.total_steps / trainer.batches_per_epoch:.3g} epochs) "
            f"of {config.batch_size} {'pairs' if run.objective.name == 'translation' else 'texts'}, Adam {config.betas} "
            f"eps {config.eps:g}, {rate}, label smoothing "
            f"{config.label_smoothing}, clip {config.clip_norm}, seed {config.seed}"
            f"{', mixed precision' if config.precision == 'mixed' else ''} -> {run.directory}")


def ranks_line(run):
    """Under mpiexec, [a line naming the ranks and their hosts]; else []."""
    from collections import Counter

    from numpy_transformer.training import mpi

    if mpi.world() is None:
        return []
    hosts = Counter(host for host, _ in mpi.hosts())
    where = ", ".join(f"{host} ×{count}" for host, count in hosts.items())
    return [f"processes: {sum(hosts.values())} MPI ranks ({where}), each step shared between them as by --threads "
            f"{sum(hosts.values())} --split batch; rank 0 (this one) reads, writes and prints"]


def run_metrics(run, result, evaluation, args, total_seconds, scored):
    """metrics.json: the scores of the test split, of the weights `scored` (a `Checkpoint`) holds,
    and the run's figures."""
    task = run.objective.name
    preset = args.preset or (None if args.resume else TASK_PRESETS[task])
    return {"source": run.data.splits.source, "task": task, "preset": preset,
            **(translation_scores(evaluation, args) if task == "translation" else language_model_scores(evaluation)),
            "weights": scored.weights, "scored_step": scored.scored_step, "best_step": run.trainer.state.best_step,
            "best_validation_loss": run.trainer.state.best_loss, "stopped_early": result.stopped_early,
            **run_figures(run, result, total_seconds)}


def translation_scores(evaluation, args):
    best = evaluation.best
    return {
        "bleu": best.bleu, "chrf": best.chrf,
        "bleu_greedy": evaluation.greedy_scores.bleu, "chrf_greedy": evaluation.greedy_scores.chrf,
        "beam_size": evaluation.beam_size if evaluation.beam_scores else 1, "length_penalty": args.length_penalty,
        "bleu_signature": best.bleu_signature, "chrf_signature": best.chrf_signature,
        "perplexity": evaluation.perplexity, "test_cross_entropy": evaluation.cross_entropy,
        "test_pairs": evaluation.n_pairs, "test_sources": len(evaluation.sources),
        "bleu_references": sum(map(len, evaluation.references)), "test_sources_cut": evaluation.n_cut,
        "perplexity_pairs": evaluation.n_perplexity_pairs,
        # the decoding's work: the words the model wrote (greedy and beam), which two runs that
        # differ by rounding alone can make differ by a few percent
        "translated_words": sum(len(text.split()) for text in evaluation.greedy + (evaluation.beam or []))}


def language_model_scores(evaluation):
    return {"perplexity": evaluation.perplexity, "test_cross_entropy": evaluation.cross_entropy,
            "accuracy": evaluation.accuracy, "test_texts": evaluation.n_texts, "test_tokens": evaluation.n_tokens}


def run_figures(run, result, total_seconds):
    from numpy_transformer.training.machine import machine_record

    return {
        "loss": _finite(result.loss), "validation_loss": _finite(result.validation_loss),
        "steps": result.step, "epochs": round(run.trainer.epoch_progress, 3),
        "train_seconds": round(result.train_seconds, 1), "total_seconds": round(total_seconds, 1),
        "machine": machine_record(),                          # the machine that took those seconds
        "parameters": run.parameters,
        "data": _config_dict(run.configs["data"]), "model": _config_dict(run.configs["model"]),
        "training": _config_dict(run.configs["training"]),
    }


def _finite(value):
    return value if value is not None and math.isfinite(value) else None


def _config_dict(config):
    return json.loads(config.to_json())
