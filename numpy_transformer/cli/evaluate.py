"""`numpy-transformer evaluate`: BLEU, chrF and perplexity of a trained model on the test (or
validation) split, rebuilt from the data description saved with it; for a language model its
perplexity and the accuracy of its predicted tokens.

    numpy-transformer evaluate --checkpoint DIR [--split test|validation] [--beam N] [--weights best|last]

The work is `numpy_transformer.training.evaluation` (`evaluate_checkpoint`); this module parses
the arguments.
"""
from numpy_transformer.cli.common import add_dataset_cache_argument, add_decoding_arguments, add_quiet_argument, \
    add_threads_argument, add_weights_argument, check_run_folder, non_negative_integer, progress_bars


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
    add_dataset_cache_argument(evaluate, "the run's corpus (its data.json names it)")
    add_threads_argument(evaluate, "translating and scoring the split")
    add_weights_argument(evaluate, "score")
    add_quiet_argument(evaluate, "while the corpus is read, the split translated (greedy, then with the beam) and "
                                 "its perplexity computed")
    evaluate.set_defaults(run=command)


def command(args):
    """Print sample translations (or completions) and the scores of the saved model on the split
    asked for (`numpy_transformer.training.evaluation.evaluate_checkpoint`)."""
    from numpy_transformer.training.evaluation import evaluate_checkpoint

    check_run_folder(args.checkpoint, ("translation", "lm", "mlm"))
    evaluate_checkpoint(args.checkpoint, args.split, args.beam, args.length_penalty, args.samples, args.cache_dir,
                        progress=progress_bars(args.quiet), weights=args.weights)
    return 0
