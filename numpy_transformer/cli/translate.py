"""`numpy-transformer translate`: translate sentences with a trained model.

    numpy-transformer translate --checkpoint DIR "a sentence" ...     (or lines on standard input)
"""
import sys

from numpy_transformer.cli.common import add_decoding_arguments, add_quiet_argument, add_threads_argument, \
    add_weights_argument, load_model_of, progress_bars, standard_input_lines, utf8_lines


def add_parser(commands):
    translate = commands.add_parser("translate", help="translate sentences with a trained model",
                                    description="Translate the sentences given, or the lines of standard input: "
                                                "one line out per line in.")
    translate.add_argument("--checkpoint", required=True, metavar="DIR", help="the folder `train --out` wrote")
    translate.add_argument("sentences", nargs="*", help="sentences to translate (none: read standard input)")
    add_decoding_arguments(translate, "the translation")
    add_threads_argument(translate, "decoding: the encoder, then greedy decoding or beam search")
    add_weights_argument(translate, "translate with")
    add_quiet_argument(translate, "while the sentences are translated, batch by batch; the notes on standard "
                                  "error stay")
    translate.set_defaults(run=command)


def command(args):
    """Print one translation per sentence given, in order: one output line per input line. A
    sentence with nothing to translate (empty, or without a token the tokenizer reads) gets an
    empty line and a note on standard error naming it; a sentence the model reads cut (learned
    positions) gets a note too. Text that is not UTF-8 is refused (a ValueError naming it)."""
    from numpy_transformer.translation import cut_note, read_sources, written_translations

    checkpoint = load_model_of(args.checkpoint, "translation", args.weights)
    what = "sentence" if args.sentences else "line"
    sentences = utf8_lines(args.sentences, "sentence") if args.sentences else standard_input_lines()
    if not any(sentence.strip() for sentence in sentences):
        raise ValueError("nothing to translate: give sentences as arguments or as lines on standard input")
    src, tgt, model = checkpoint.src_tokenizer, checkpoint.tgt_tokenizer, checkpoint.model
    print(checkpoint.weights_line(args.weights), file=sys.stderr)
    if checkpoint.data_config.dataset == "builtin":
        print(f"note: {args.checkpoint} was trained on the built-in synthetic corpus (a small grammar, not real text): "
              f"it knows its {src.vocab_size - 4} {src.language} words and its sentence patterns only", file=sys.stderr)
    sources, cut = read_sources(model, src, sentences)
    for i, (sentence, source) in enumerate(zip(sentences, sources)):
        notes = [source_note(what, i + 1, sentence, source, src),
                 cut_note(what, i + 1, cut[i], model.config.position_limit) if i in cut else None]
        for note in filter(None, notes):
            print(f"note: {note}", file=sys.stderr)
    print("\n".join(written_translations(model, tgt, sources, args.beam, args.length_penalty,
                                         progress=progress_bars(args.quiet))))
    return 0


def source_note(what, number, sentence, source, src_tokenizer):
    """What to say on standard error of sentence `number` as `read_sources` read it (`source`),
    or None: why its translation is an empty line, or the words read as [UNK]."""
    if not sentence.strip():
        return f"{what} {number} is empty: its translation is an empty line"
    if source is None:
        return f"{what} {number} has no token the {src_tokenizer.language} tokenizer reads ({sentence!r}): its " \
               f"translation is an empty line"
    unknown = src_tokenizer.unknown_words(sentence)
    if unknown:
        return f"{what} {number}: not in the {src_tokenizer.language} vocabulary, read as [UNK]: " \
               f"{', '.join(repr(word) for word in unknown)}"
    return None
