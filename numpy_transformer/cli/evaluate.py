"""`numpy-transformer evaluate`: BLEU, chrF and perplexity of a trained model on the test (or
validation) split, rebuilt from the data description saved with it; for a language model its
perplexity and the accuracy of its predicted tokens.

    numpy-transformer evaluate --checkpoint DIR [--split test|validation] [--beam N] [--weights best|last]

The work is `numpy_transformer.training.evaluation` (`evaluate_checkpoint`); this module parses
the arguments.
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
    """Print sample translations (or completions) and the scores of the saved model on the split
    asked for (`numpy_transformer.training.evaluation.evaluate_checkpoint`)."""
    from numpy_transformer.training.evaluation import evaluate_checkpoint

    evaluate_checkpoint(args.checkpoint, args.split, args.beam, args.length_penalty, args.samples, args.cache_dir,
                        progress=not args.quiet and sys.stderr.isatty(), weights=args.weights)
    return 0
