"""`numpy-transformer evaluate`: BLEU, chrF and perplexity of a trained model on the test (or
validation) split, rebuilt from the data description saved with it; for a language model its
perplexity and the accuracy of its predicted tokens.

    numpy-transformer evaluate --checkpoint DIR [--split test|validation] [--beam N]
"""
import sys

from numpy_transformer.cli.common import add_common_arguments, add_decoding_arguments, non_negative_integer


def add_parser(commands):
    evaluate = commands.add_parser("evaluate", help="BLEU, chrF and perplexity of a trained model (a language "
                                                    "model's perplexity and accuracy)",
                                   description="Score a trained model on its test (or validation) split, "
                                               "rebuilt from the data description saved with it.")
    evaluate.add_argument("--checkpoint", required=True, metavar="DIR", help="the folder `train --out` wrote")
    evaluate.add_argument("--split", choices=("test", "validation"), default="test")
    evaluate.add_argument("--samples", type=non_negative_integer, default=4,
                          help="translations (or completions) to print (default 4)")
    add_decoding_arguments(evaluate, "the evaluation")
    add_common_arguments(evaluate)
    evaluate.set_defaults(run=command)


def command(args):
    """Print sample translations and the scores of the saved model on the split asked for."""
    from numpy_transformer.training.checkpoint import load_checkpoint
    from numpy_transformer.training.loss import make_objective
    from numpy_transformer.training.prepare import prepare_data

    checkpoint = load_checkpoint(args.checkpoint)
    data = prepare_data(checkpoint.data_config, args.cache_dir, checkpoint.tokenizers,
                        progress=not args.quiet and sys.stderr.isatty())
    print(f"model: {checkpoint.directory}, step {checkpoint.step}")
    print(f"data: {data.splits.source}")
    items = data.splits.test if args.split == "test" else data.splits.validation
    objective = make_objective(checkpoint.task, checkpoint.tokenizers, checkpoint.training_config.seed)
    evaluation = evaluate_split(checkpoint.model, data, checkpoint.data_config, items, args, objective)
    print_evaluation(evaluation, args.split, args.samples)
    return 0


def evaluate_split(model, data, data_config, items, args, objective):
    """The evaluation of a split's pairs (with the decoding settings of the command line) or texts."""
    from numpy_transformer.training.evaluation import evaluate_pairs
    from numpy_transformer.training.language_evaluation import evaluate_texts

    if not items:
        raise ValueError(f"{data.splits.source}: the split to evaluate is empty (the corpus is too small)")
    if data_config.task == "translation":
        return evaluate_pairs(model, data.src_tokenizer, data.tgt_tokenizer, items, data_config.max_len,
                              data_config.length_policy, args.beam, args.length_penalty)
    return evaluate_texts(model, data.tokenizers[0], items, objective, data_config.max_len, data_config.length_policy,
                          samples=args.samples)


def print_evaluation(evaluation, split, samples):
    """What `train` and `evaluate` print about a split: `print_translation_scores`, or
    `print_language_model_scores` for a language model."""
    if hasattr(evaluation, "accuracy"):
        print_language_model_scores(evaluation, split)
    else:
        print_translation_scores(evaluation, split, samples)


def print_language_model_scores(evaluation, split):
    """The samples, then the perplexity and accuracy of the predicted tokens."""
    if evaluation.samples:
        print(f"\nSamples of the {split} split:")
        print("\n".join(f"  {what:<8} {text}".rstrip() for what, text in evaluation.samples))
    skipped = f" ({evaluation.n_skipped} longer than the maximum length left out)" if evaluation.n_skipped else ""
    print(f"{split.capitalize()} split: {evaluation.n_texts:,} texts{skipped}, {evaluation.n_tokens:,} predicted tokens.")
    print(f"  perplexity {evaluation.perplexity:.3f} (cross-entropy {evaluation.cross_entropy:.4f} nats per token), "
          f"top-1 accuracy {evaluation.accuracy:.1%}")


def print_translation_scores(evaluation, split, samples):
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
