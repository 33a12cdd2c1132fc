"""`numpy-transformer evaluate`: BLEU, chrF and perplexity of a trained model on the test (or
validation) split, rebuilt from the data description saved with it.

    numpy-transformer evaluate --checkpoint DIR [--split test|validation] [--beam N]
"""
import sys

from numpy_transformer.cli.common import add_common_arguments, add_decoding_arguments, non_negative_integer


def add_parser(commands):
    evaluate = commands.add_parser("evaluate", help="BLEU, chrF and perplexity of a trained model",
                                   description="Score a trained model on its test (or validation) split, "
                                               "rebuilt from the data description saved with it.")
    evaluate.add_argument("--checkpoint", required=True, metavar="DIR", help="the folder `train --out` wrote")
    evaluate.add_argument("--split", choices=("test", "validation"), default="test")
    evaluate.add_argument("--samples", type=non_negative_integer, default=4, help="translations to print (default 4)")
    add_decoding_arguments(evaluate, "the evaluation")
    add_common_arguments(evaluate)
    evaluate.set_defaults(run=command)


def command(args):
    """Print sample translations and the scores of the saved model on the split asked for."""
    from numpy_transformer.training.checkpoint import load_checkpoint
    from numpy_transformer.training.run import prepare_data

    checkpoint = load_checkpoint(args.checkpoint)
    data = prepare_data(checkpoint.data_config, args.cache_dir, (checkpoint.src_tokenizer, checkpoint.tgt_tokenizer),
                        progress=not args.quiet and sys.stderr.isatty())
    print(f"model: {checkpoint.directory}, step {checkpoint.step}")
    print(f"data: {data.splits.source}")
    pairs = data.splits.test if args.split == "test" else data.splits.validation
    evaluation = evaluate_split(checkpoint.model, data, checkpoint.data_config, pairs, args)
    print_evaluation(evaluation, args.split, args.samples)
    return 0


def evaluate_split(model, data, data_config, pairs, args):
    """The `Evaluation` of `pairs` with the decoding settings of the command line."""
    from numpy_transformer.training.evaluation import evaluate_pairs

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
