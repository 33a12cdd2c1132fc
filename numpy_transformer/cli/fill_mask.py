"""`numpy-transformer fill-mask`: the most probable tokens for each [MASK] of a text, by a
trained masked language model.

    numpy-transformer fill-mask --checkpoint DIR|HF_FOLDER|HUB_NAME [--top-k K] "the [MASK] sat on the mat ."

One candidate per line, best first: the token, a tab, its probability P(x_i | x_≠i). A text with
several [MASK]s gives one block per [MASK], in order, separated by an empty line.
"""
import sys

from numpy_transformer.cli.common import add_model_cache_argument, add_threads_argument, add_weights_argument, \
    load_language_model, positive_integer, utf8_lines


def add_parser(commands):
    fill = commands.add_parser("fill-mask", help="the best tokens for each [MASK] of a text, by a masked language "
                                                 "model (--task mlm)",
                               description="Print the most probable tokens for each [MASK], best first, each with "
                                           "its probability.")
    fill.add_argument("--checkpoint", required=True, metavar="DIR",
                      help="the folder `train --task mlm` wrote, a Hugging Face BERT folder, or a Hub name "
                           "(bert-base-uncased)")
    fill.add_argument("text", help="a text with one [MASK] or more")
    fill.add_argument("--top-k", type=positive_integer, default=5, metavar="K", help="candidates per [MASK] (default 5)")
    add_model_cache_argument(fill)
    add_threads_argument(fill, "reading the text, one pass through the model")
    add_weights_argument(fill, "predict with")
    fill.set_defaults(run=command)


def command(args):
    """Print the candidates of each [MASK]: token<TAB>probability, best first."""
    from numpy_transformer.completion import fill_mask

    model, tokenizer, notes = load_language_model(args.checkpoint, "mlm", args.cache_dir, args.weights)
    (text,) = utf8_lines([args.text], "text")
    blocks = fill_mask(model, tokenizer, text, args.top_k)
    for note in notes:
        print(note, file=sys.stderr)
    print("\n\n".join("\n".join(f"{token}\t{probability:.4f}" for token, probability in candidates)
                      for candidates in blocks))
    return 0
