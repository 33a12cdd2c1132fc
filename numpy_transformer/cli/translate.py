"""`numpy-transformer translate`: translate sentences with a trained model.

    numpy-transformer translate --checkpoint DIR "a sentence" ...     (or lines on standard input)
"""
import sys

from numpy_transformer.cli.common import add_common_arguments, add_decoding_arguments, load_model_of, \
    standard_input_lines, utf8_lines


def add_parser(commands):
    translate = commands.add_parser("translate", help="translate sentences with a trained model",
                                    description="Translate the sentences given, or the lines of standard input.")
    translate.add_argument("--checkpoint", required=True, metavar="DIR", help="the folder `train --out` wrote")
    translate.add_argument("sentences", nargs="*", help="sentences to translate (none: read standard input)")
    add_decoding_arguments(translate, "the translation")
    add_common_arguments(translate)
    translate.set_defaults(run=command)



def command(args):
    """Print one translation per sentence given (an empty line for an empty sentence)."""
    from numpy_transformer.translation import too_long, translate, with_specials

    checkpoint = load_model_of(args.checkpoint, "translation", args.weights)
    sentences = utf8_lines(args.sentences, "sentence") if args.sentences else standard_input_lines()
    if not any(sentence.strip() for sentence in sentences):
        raise ValueError("nothing to translate: give sentences as arguments or as lines on standard input")
    src, tgt, model = checkpoint.src_tokenizer, checkpoint.tgt_tokenizer, checkpoint.model
    long = too_long([with_specials(src.encode(sentence), src) for sentence in sentences], model.config.max_len)
    if long:
        numbers = ", ".join(str(i + 1) for i in long)
        raise ValueError(f"sentence {numbers} is longer than this model's maximum length of {model.config.max_len} "
                         f"tokens ([SOS] and [EOS] included): split it into shorter sentences")
    print(checkpoint.weights_line(args.weights), file=sys.stderr)
    if checkpoint.data_config.dataset == "builtin":
        print(f"note: {args.checkpoint} was trained on the built-in synthetic corpus (a small grammar, not real text): "
              f"it knows its {src.vocab_size - 4} {src.language} words and its sentence patterns only", file=sys.stderr)
    for number, sentence in enumerate(sentences, start=1):
        unknown = src.unknown_words(sentence)
        if unknown:
            print(f"note: sentence {number}: not in the {src.language} vocabulary, read as [UNK]: "
                  f"{', '.join(repr(word) for word in unknown)}", file=sys.stderr)
    written = [i for i, sentence in enumerate(sentences) if sentence.strip()]
    outputs = translate(model, src, tgt, [sentences[i] for i in written], args.beam, args.length_penalty)
    lines = [""] * len(sentences)
    for i, output in zip(written, outputs):
        lines[i] = output
    print("\n".join(lines))
    return 0
