"""What `numpy-transformer train`, `translate` and `evaluate` do (the parser is in `cli.py`).

Each function takes the parsed arguments, prints, and returns the exit status; errors a user can
act on are raised as CheckpointError, DataUnavailableError or ValueError for `cli.main` to print.
"""
import json
import math
import sys
import time

from numpy_transformer.checkpoint import atomic_write_text, load_checkpoint
from numpy_transformer.evaluation import evaluate_pairs, too_long, translate as translate_sentences, with_specials
from numpy_transformer.experiment import METRICS_FILE, RESUMABLE_FIELDS, Run, prepare_data
from numpy_transformer.presets import resolve
from numpy_transformer.training import format_seconds

EXIT_INTERRUPTED = 130


def train(args):
    started = time.perf_counter()
    report = None if args.quiet else print
    options = dict(cache_dir=args.cache_dir, progress=not args.quiet and sys.stderr.isatty(), report=report)
    model, training, data = overrides(args)
    if args.resume:
        run = resume_run(args, model, training, data, options)
    else:
        run = Run.new(args.out, *resolve(args.preset or "default", model, training, data), overwrite=args.overwrite,
                      **options)
    print("\n".join(run.data.summary() + [model_line(run), training_line(run)]))
    result = run.train()
    if result.interrupted:
        where = f"a checkpoint of step {result.step} is in {run.directory}" if result.saved else \
            f"the last checkpoint in {run.directory} is kept"
        print(f"Interrupted at step {result.step} of {result.total_steps}: {where}. Continue with:\n"
              f"  numpy-transformer train --out {run.directory} --resume", file=sys.stderr)
        return EXIT_INTERRUPTED
    evaluation = evaluate_split(run.model, run.data, run.configs["data"], run.data.splits.test, args)
    print_evaluation(evaluation, "test", args.samples)
    metrics = run_metrics(run, result, evaluation, args, time.perf_counter() - started)
    atomic_write_text(run.directory / METRICS_FILE, json.dumps(metrics, indent=2, ensure_ascii=False) + "\n")
    print(f"Wrote {run.directory}/: checkpoint.npz (+ model.json, training.json, data.json, tokenizers), "
          f"log.jsonl, loss.png, {METRICS_FILE}. Total time {format_seconds(metrics['total_seconds'])}.")
    return 0


def overrides(args):
    """(model, training, data) dicts of the fields the flags set (flags left out set nothing)."""
    given = {name: value for name, value in vars(args).items() if value is not None}
    model, training, data = ({name.split(".", 1)[1]: value for name, value in given.items()
                              if name.startswith(prefix + ".")} for prefix in ("model", "training", "data"))
    if args.layers is not None:
        model = {"n_encoder_layers": args.layers, "n_decoder_layers": args.layers, **model}
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
    changed = [name for name in (*model, *data)] + (["preset"] if args.preset else [])
    if changed:
        raise ValueError(f"--resume continues the saved run with its own settings; cannot change "
                         f"{', '.join(changed)} (only {', '.join(RESUMABLE_FIELDS)} may change)")
    run = Run.resume(args.out, training, **options)
    print(f"Resuming {run.directory} at step {run.trainer.state.step} of {run.trainer.total_steps}.")
    return run


def model_line(run):
    config = run.configs["model"]
    return (f"model: {config.n_encoder_layers}+{config.n_decoder_layers} layers, d_model {config.d_model}, "
            f"{config.n_heads} heads (d_k {config.d_k}), d_ff {config.d_ff}, dropout {config.dropout}, "
            f"{config.norm_placement}-norm, {run.parameters:,} parameters")


def training_line(run):
    config, trainer = run.configs["training"], run.trainer
    if config.schedule == "warmup":
        peak = config.lr_factor * (run.configs["model"].d_model * config.warmup_steps) ** -0.5
        rate = f"warm-up {config.warmup_steps} steps (peak lr {peak:.1e})"
    else:
        rate = f"constant lr {config.lr:g}"
    return (f"training: {trainer.total_steps:,} steps ({trainer.total_steps / trainer.batches_per_epoch:.3g} epochs) "
            f"of {config.batch_size} pairs, Adam {config.betas} eps {config.eps:g}, {rate}, label smoothing "
            f"{config.label_smoothing}, clip {config.clip_norm}, seed {config.seed} -> {run.directory}")


def evaluate_split(model, data, data_config, pairs, args):
    if not pairs:
        raise ValueError(f"{data.splits.source}: the split to evaluate is empty (the corpus is too small)")
    return evaluate_pairs(model, data.src_tokenizer, data.tgt_tokenizer, pairs, data_config.max_len,
                          data_config.length_policy, args.beam, args.length_penalty)


def print_evaluation(evaluation, split, samples):
    """Sample translations, BLEU and chrF (greedy and beam) with sacrebleu's signatures, perplexity."""
    rows = [("greedy", evaluation.greedy_scores)]
    if evaluation.beam_scores:
        rows.append((f"beam {evaluation.beam_size}", evaluation.beam_scores))
    shown = min(samples, len(evaluation.sources))
    if shown:
        print(f"\nSample {split} translations:")
    for i in range(shown):
        lines = [("source", evaluation.sources[i]), ("reference", evaluation.references[i]),
                 ("greedy", evaluation.greedy[i])]
        if evaluation.beam:
            lines.append((f"beam {evaluation.beam_size}", evaluation.beam[i]))
        print("\n".join(f"  {name:<10} {text}" for name, text in lines) + "\n")
    skipped = f" ({evaluation.n_skipped} longer than the maximum length left out)" if evaluation.n_skipped else ""
    print(f"{split.capitalize()} split: {len(evaluation.sources):,} pairs{skipped}.")
    print(f"  {'':<8} {'BLEU':>6} {'chrF':>6}")
    for name, scores in rows:
        print(f"  {name:<8} {scores.bleu:>6.2f} {scores.chrf:>6.2f}")
    print(f"  BLEU signature: {evaluation.greedy_scores.bleu_signature}")
    print(f"  chrF signature: {evaluation.greedy_scores.chrf_signature}")
    print(f"  perplexity {evaluation.perplexity:.3f} (cross-entropy {evaluation.cross_entropy:.4f} nats per token)")


def run_metrics(run, result, evaluation, args, total_seconds):
    best = evaluation.best
    return {
        "source": run.data.splits.source,
        "preset": args.preset or (None if args.resume else "default"),
        "bleu": best.bleu, "chrf": best.chrf,
        "bleu_greedy": evaluation.greedy_scores.bleu, "chrf_greedy": evaluation.greedy_scores.chrf,
        "beam_size": evaluation.beam_size if evaluation.beam_scores else 1, "length_penalty": args.length_penalty,
        "bleu_signature": best.bleu_signature, "chrf_signature": best.chrf_signature,
        "perplexity": evaluation.perplexity, "test_cross_entropy": evaluation.cross_entropy,
        "test_pairs": len(evaluation.sources),
        "loss": _finite(result.loss), "validation_loss": _finite(result.validation_loss),
        "steps": result.step, "epochs": round(run.trainer.epoch_progress, 3),
        "train_seconds": round(result.train_seconds, 1), "total_seconds": round(total_seconds, 1),
        "parameters": run.parameters,
        "data": _config_dict(run.configs["data"]), "model": _config_dict(run.configs["model"]),
        "training": _config_dict(run.configs["training"]),
    }


def translate(args):
    checkpoint = load_checkpoint(args.checkpoint)
    sentences = args.sentences or [line.rstrip("\n") for line in sys.stdin]
    if not any(sentence.strip() for sentence in sentences):
        raise ValueError("nothing to translate: give sentences as arguments or as lines on standard input")
    src, tgt, model = checkpoint.src_tokenizer, checkpoint.tgt_tokenizer, checkpoint.model
    long = too_long([with_specials(src.encode(sentence), src) for sentence in sentences], model.config.max_len)
    if long:
        numbers = ", ".join(str(i + 1) for i in long)
        raise ValueError(f"sentence {numbers} is longer than this model's maximum length of {model.config.max_len} "
                         f"tokens ([SOS] and [EOS] included): split it into shorter sentences")
    if checkpoint.data_config.dataset == "builtin":
        print(f"note: {args.checkpoint} was trained on the built-in synthetic corpus (a small grammar, not real text): "
              f"it knows its {src.vocab_size - 4} {src.language} words and its sentence patterns only", file=sys.stderr)
    for number, sentence in enumerate(sentences, start=1):
        unknown = src.unknown_words(sentence)
        if unknown:
            print(f"note: sentence {number}: not in the {src.language} vocabulary, read as [UNK]: "
                  f"{', '.join(repr(word) for word in unknown)}", file=sys.stderr)
    written = [i for i, sentence in enumerate(sentences) if sentence.strip()]
    outputs = translate_sentences(model, src, tgt, [sentences[i] for i in written], args.beam, args.length_penalty)
    lines = [""] * len(sentences)
    for i, output in zip(written, outputs):
        lines[i] = output
    print("\n".join(lines))
    return 0


def evaluate(args):
    checkpoint = load_checkpoint(args.checkpoint)
    data = prepare_data(checkpoint.data_config, args.cache_dir, (checkpoint.src_tokenizer, checkpoint.tgt_tokenizer),
                        progress=not args.quiet and sys.stderr.isatty())
    print(f"model: {checkpoint.directory}, step {checkpoint.step}")
    print(f"data: {data.splits.source}")
    pairs = data.splits.test if args.split == "test" else data.splits.validation
    evaluation = evaluate_split(checkpoint.model, data, checkpoint.data_config, pairs, args)
    print_evaluation(evaluation, args.split, args.samples)
    return 0


def _finite(value):
    return value if value is not None and math.isfinite(value) else None


def _config_dict(config):
    return json.loads(config.to_json())
