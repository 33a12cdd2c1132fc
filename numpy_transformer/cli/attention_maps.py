"""`numpy-transformer attention`: look inside the heads of a trained model for one sentence.

    numpy-transformer attention --checkpoint runs/default "the cat sleeps on the sofa ." \
        [--target "il gatto dorme sul divano ."] [--out attention] [--format png|svg]
    numpy-transformer attention --checkpoint gpt2 "The cat sleeps on the sofa."   # any language model
    numpy-transformer attention --checkpoint runs/default "the cat sleeps ." --html attention.html

writes into --out a heat-map grid per kind of attention (encoder_self_attn, decoder_self_attn,
decoder_cross_attn), the singular-value spectra (spectra), and every matrix with its tokens
(attention.npz), and prints the role of every head and its structured approximation (the
projection of eq. (21) at bandwidth --w with --num-pos rare tokens). Without --target the model
reads its own greedy translation. A language model (a run of `train --task lm|mlm`, or a Hugging
Face GPT-2 or BERT folder or Hub name) reads the sentence alone: one grid of its self-attention
heads, layer by layer.

--out is written as a whole (numpy_transformer/training/output_folder.py): a fresh folder beside
it, renamed into place. It must be missing, empty, or an earlier output of `attention`; a folder
of other files, a run folder and "" are refused, so no file of the user's is replaced.

--html FILE writes, instead of the folder, the attention studio: one self-contained page
(numpy_transformer/analysis/studio) with the matrix, head, model, equation and replay views of
every head, which opens from disk with no network. FILE must be new or a studio page written
before; any other file is left alone.
"""
import sys
from pathlib import Path

from numpy_transformer.cli.common import add_model_cache_argument, add_threads_argument, add_weights_argument, \
    check_run_folder, non_negative_integer, utf8_lines


def add_parser(commands):
    """Register `attention` on the CLI's subcommands (an argparse subparsers object)."""
    parser = commands.add_parser("attention", help="draw and classify the attention heads of a trained model",
                                 description="Heat maps, spectra, head roles and the structured approximation of "
                                             "every attention head for one sentence (thesis chapter 3).")
    parser.add_argument("--checkpoint", required=True, metavar="DIR",
                        help="the folder `train --out` wrote (translation or language model), or a Hugging Face "
                             "GPT-2 / BERT folder or Hub name")
    parser.add_argument("sentence", help="the source sentence (a language model's text)")
    parser.add_argument("--target", help="the translation the decoder reads (default: the model's own; "
                                         "translation models only)")
    add_model_cache_argument(parser)
    parser.add_argument("--out", default="runs/attention", metavar="DIR",
                        help="folder for the figures (default runs/attention; not written with --html)")
    parser.add_argument("--html", metavar="FILE",
                        help="write the interactive attention studio, one self-contained HTML page, instead of --out")
    parser.add_argument("--format", choices=("png", "svg"), default="png",
                        help="figure format (default png; --html draws in the page instead)")
    parser.add_argument("--w", type=non_negative_integer, default=3, help="bandwidth of the structured approximation (default 3)")
    parser.add_argument("--num-pos", type=non_negative_integer, default=2, help="rare tokens of the approximation's Σ3 (default 2)")
    add_threads_argument(parser, "reading the sentence, and translating it when --target is not given")
    add_weights_argument(parser, "look inside")
    parser.set_defaults(run=command)
    return parser


def approximation_table(capture, w, num_pos):
    """Markdown: every head's projection (family, distance, captured mass, entries stored)."""
    from numpy_transformer.analysis.projection import project_structured

    lines = ["| attention | head | family | distance abs(H − X) | captured | stored / entries |",
             "|---|---:|---|---:|---:|---|"]
    for name, weights in capture.weights.items():
        for head, H in enumerate(weights):
            p = project_structured(H, w, num_pos)
            lines.append(f"| {name} | {head} | {p.family} | {p.distance:.3f} | {p.captured_mass:.1%} | "
                         f"{p.stored_entries}/{p.n_entries} |")
    return "\n".join(lines)


def load_attention_model(name, target, cache_dir=None, weights="best"):
    """(the model `name` names, a function sentence → its `AttentionCapture`, the line saying which
    weights, None for a Hugging Face model): a run folder, with its `weights`, or a Hugging Face
    folder or Hub name; the target only for a translation model."""
    from numpy_transformer.analysis.capture import capture_sentence, capture_text
    from numpy_transformer.interop.pretrained import load_pretrained, names_pretrained
    from numpy_transformer.training.checkpoint import load_checkpoint

    if names_pretrained(name):
        model, tokenizer = load_pretrained(name, cache_dir)
        line = None
    else:
        check_run_folder(name, ("translation", "lm", "mlm"))
        checkpoint = load_checkpoint(name, weights)
        line = checkpoint.weights_line(weights)
        if checkpoint.task == "translation":
            return checkpoint.model, lambda sentence: capture_sentence(
                checkpoint.model, checkpoint.src_tokenizer, checkpoint.tgt_tokenizer, sentence, target), line
        model, tokenizer = checkpoint.model, checkpoint.tokenizers[0]
    if target is not None:
        raise ValueError(f"--target is the translation a translation model's decoder reads; {name} holds a language "
                         f"model, which reads the sentence alone")
    return model, lambda sentence: capture_text(model, tokenizer, sentence), line


def capture_checkpoint(name, sentence, target, cache_dir=None, weights="best"):
    """(the `AttentionCapture` of the model `name` names on the sentence, the weights line):
    `load_attention_model` applied to the sentence."""
    _, capture, line = load_attention_model(name, target, cache_dir, weights)
    return capture(sentence), line


def write_studio(args, sentence, target):
    """--html: the attention studio page of the sentence, with the numbers of the equation view."""
    from numpy_transformer.analysis.studio import studio_capture, studio_data, write_studio_page
    from numpy_transformer.analysis.studio.studio_page import check_page_path

    check_page_path(args.html)                                 # before the model is loaded
    model, capture, weights_line = load_attention_model(args.checkpoint, target, args.cache_dir, args.weights)
    if weights_line is not None:
        print(weights_line, file=sys.stderr)
    recorded = studio_capture(model, lambda: capture(sentence))
    data = studio_data(*recorded, model_name=args.checkpoint, approximation=(args.w, args.num_pos),
                       replay=target is None)
    size = write_studio_page(args.html, data)
    for note in data["notes"]:
        print(note)
    print(f"wrote {args.html} ({size / 1e6:.2f} MB, {len(data['attention'])} heads): open it in a browser, "
          f"it needs no network")
    return 0


def command(args):
    """Draw, save and classify every head's attention for the sentence; print the tables."""
    from numpy_transformer.analysis.heatmaps import draw_capture
    from numpy_transformer.analysis.roles import classify_capture, roles_table
    from numpy_transformer.analysis.spectra import draw_spectra
    from numpy_transformer.training.output_folder import OutputFolder

    sentence, target = utf8_lines([args.sentence, args.target or ""], "argument")
    if args.html is not None:
        return write_studio(args, sentence, target or None)
    out = OutputFolder(args.out, "attention")
    out.check()                                                # before the model is loaded
    capture, weights_line = capture_checkpoint(args.checkpoint, sentence, target or None, args.cache_dir,
                                               args.weights)
    if weights_line is not None:
        print(weights_line, file=sys.stderr)
    with out as staging:
        drawn = [*draw_capture(capture, staging, args.format),
                 draw_spectra(capture, staging / f"spectra.{args.format}")]
        capture.save(staging / "attention.npz")
    if capture.src_tokens and capture.tgt_tokens:
        print(f"source: {' '.join(capture.src_tokens)}")
        print(f"target ({'given' if args.target else 'the model translation'}): {' '.join(capture.tgt_tokens)}")
    else:
        print(f"text: {' '.join(capture.src_tokens or capture.tgt_tokens)}")
    print()
    print(roles_table(classify_capture(capture), {name: capture.axes(name)[1] for name in capture.weights}))
    print()
    print(f"Structured approximation X = P_c B + E (projection, w = {args.w}, num_pos = {args.num_pos}):")
    print(approximation_table(capture, args.w, args.num_pos))
    print()
    print("wrote " + ", ".join(str(Path(args.out) / path.name) for path in [*drawn, staging / "attention.npz"]))
    return 0
