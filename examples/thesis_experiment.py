"""Thesis §3.1 in one command: train a one-layer Transformer with 1 head and with 8 heads, draw
their heads, classify them, validate the structured approximation of eq. (19) (the thesis's
random search and the exact projection side by side), and score the cross-attention against
the built-in corpus's word alignments. The roles and the approximation are also counted and
averaged over --sentences held-out sentences of the validation split (distinct sources of at
least --min-tokens tokens).

    python examples/thesis_experiment.py                    # built-in corpus, small and quick
    python examples/thesis_experiment.py --dataset tatoeba --d-model 128 --batch-size 64 --steps 4000
                                                            # real English–Italian (packaged)
    python examples/thesis_experiment.py --dataset opus_books --thesis-size   # the thesis's runs

A real corpus has no word alignments: the alignment error rate is then skipped with a note.

The default (d_model 64, d_ff 256, 1,500 steps of 32 pairs on 6,000 built-in pairs) trains both
models in 3 to 5 minutes on 2 cores; --thesis-size takes the presets thesis-1-head and
thesis-8-heads as they are (d_model 512, d_ff 2048, batch 8, lr 1e-4, 20 epochs: hours in
NumPy). Trained runs are kept in --out (default runs/examples/thesis_experiment/) and reused
when the settings are the same (--retrain trains again). Everything printed is also written to
--out/report.md, and the figures to --figures (default --out/figures). --threads N: BLAS
threads and the optimizer's (default 1).

What the default settings print, the tables and the figures, is in docs/chapter3.md, which
`python scripts/regenerate_outputs.py thesis-experiment` regenerates from the current code.
"""
import argparse
import contextlib
import dataclasses
import sys
import time
from pathlib import Path

from numpy_transformer.cli.example_scripts import (add_example_arguments, on_terminal, run_example,
                                                   threads_from_command_line)

threads_from_command_line()                  # before NumPy loads: BLAS reads its thread count then
import numpy as np  # noqa: E402

from numpy_transformer.analysis.ablation import ablation_markdown, head_ablation
from numpy_transformer.analysis.alignment import alignment_markdown, cross_attention_alignment
from numpy_transformer.analysis.attribution import attention_gradient_attribution
from numpy_transformer.analysis.capture import capture_sentence, sentence_ids
from numpy_transformer.analysis.heatmaps import draw_attention_grid, draw_attention_head, draw_capture
from numpy_transformer.analysis.roles import (classify_capture, count_roles, role_counts_markdown,
                                              role_shares_markdown, roles_table)
from numpy_transformer.analysis.spectra import draw_spectra
from numpy_transformer.analysis.structured import (THESIS_SETTINGS, mean_validation, mean_validation_markdown,
                                                   validation_markdown, validation_table)
from numpy_transformer.analysis.substitution import structured_substitution
from numpy_transformer.training.checkpoint import has_checkpoint, load_checkpoint
from numpy_transformer.data import encode_pairs
from numpy_transformer.training.run import Run, prepare_data
from numpy_transformer.model import count_parameters
from numpy_transformer.training.settings import resolve

HEADS = {1: "thesis-1-head", 8: "thesis-8-heads"}
SUBSTITUTION_SETTINGS = ((3, 2), (2, 1))


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_example_arguments(parser, __file__)
    parser.add_argument("--figures", default=None, help="folder of the figures (default OUT/figures)")
    parser.add_argument("--dataset", default="builtin",
                        help="builtin (default, synthetic), tatoeba (real English–Italian, packaged) or opus_books")
    parser.add_argument("--n-pairs", type=int, default=6000, help="size of the built-in corpus (default 6000)")
    parser.add_argument("--subset", type=int, help="keep only the first N training pairs of opus_books or tatoeba")
    parser.add_argument("--d-model", type=int, default=64, help="d_model (default 64; the thesis: 512)")
    parser.add_argument("--steps", type=int, default=1500, help="training steps of each model (default 1500)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--thesis-size", action="store_true",
                        help="the presets as they are: d_model 512, batch 8, lr 1e-4, 20 epochs")
    parser.add_argument("--retrain", action="store_true", help="train again even if --out holds the runs")
    parser.add_argument("--pairs", type=int, default=100, help="test pairs for the alignment error rate")
    parser.add_argument("--substitution-pairs", type=int, default=40,
                        help="test pairs for the structured substitution (greedy decoding; 0 skips it)")
    parser.add_argument("--samples", type=int, default=100,
                        help="random members per family and grid point in the random search (default 100)")
    parser.add_argument("--sentences", type=int, default=40,
                        help="held-out sentences (validation split) the roles and the approximation are "
                             "counted over (default 40)")
    parser.add_argument("--min-tokens", type=int, default=10,
                        help="the shortest of those sentences, in tokens with [SOS] and [EOS] (default 10)")
    return parser.parse_args(argv)


def run_settings(args, n_heads):
    """(model fields, TrainingConfig, DataConfig) of one run: the thesis preset, made small
    unless --thesis-size."""
    data = {"dataset": args.dataset, "subset": args.subset,
            **({"n_pairs": args.n_pairs} if args.dataset == "builtin" else {})}    # the built-in corpus's size
    if args.thesis_size:
        return resolve(HEADS[n_heads], data=data)
    model = dict(d_model=args.d_model, d_ff=4 * args.d_model, dropout=0.1)
    training = dict(batch_size=args.batch_size, steps=args.steps, epochs=None, schedule="warmup",
                    warmup_steps=min(200, args.steps), lr_factor=1.0, eval_every=args.steps,
                    log_every=max(args.steps // 10, 1), checkpoint_every=args.steps)
    return resolve(HEADS[n_heads], model, training, {**data, "max_len": 64})


def same_settings(checkpoint, model_fields, training_config, data_config):
    """Whether a saved run was trained with these settings (the data's fingerprint, which the run
    added, aside: `prepare_data` checks it against the corpus when the run is reused)."""
    trained_on = dataclasses.replace(checkpoint.data_config, fingerprint=data_config.fingerprint)
    return (checkpoint.training_config == training_config and trained_on == data_config
            and all(getattr(checkpoint.model_config, name) == value for name, value in model_fields.items()))


def trained_model(args, n_heads, directory):
    """(model, source tokenizer, target tokenizer, DataSplits): read from the checkpoint a
    previous run with the same settings left in `directory`, or trained now."""
    settings = run_settings(args, n_heads)
    if has_checkpoint(directory) and not args.retrain:
        checkpoint = load_checkpoint(directory)
        if same_settings(checkpoint, *settings):
            data = prepare_data(checkpoint.data_config, progress=False,
                                tokenizers=(checkpoint.src_tokenizer, checkpoint.tgt_tokenizer))
            print(f"(reusing the model trained in {directory} with these settings; --retrain trains it again)")
            return checkpoint.model, checkpoint.src_tokenizer, checkpoint.tgt_tokenizer, data.splits
    run = Run.new(directory, *settings, overwrite=True, report=None, threads=args.threads, split="auto",
                  progress=on_terminal())
    start = time.perf_counter()
    result = run.train()
    print(f"trained {result.step} steps in {time.perf_counter() - start:.0f} s, validation loss "
          f"{result.validation_loss:.3f}")
    return run.model, run.data.src_tokenizer, run.data.tgt_tokenizer, run.data.splits


def analysis_sentence(splits, src_tokenizer, min_tokens=16):
    """The first test pair whose source fills a 16 × 16 crop ([SOS] x [EOS] ≥ 16 tokens)."""
    for pair in splits.test:
        if len(src_tokenizer.encode(pair.src)) + 2 >= min_tokens:
            return pair
    return max(splits.test, key=lambda pair: len(pair.src.split()))


def held_out_sentences(splits, src_tokenizer, tgt_tokenizer, n, min_tokens, max_len):
    """The first n pairs of the validation split with distinct sources of min_tokens to max_len
    tokens ([SOS] x [EOS]), each with its first reference translation (which must fit too)."""
    chosen, seen = [], set()
    for pair in splits.validation:
        if len(chosen) == n:
            break
        fits = min_tokens <= len(src_tokenizer.encode(pair.src)) + 2 <= max_len and \
            len(tgt_tokenizer.encode(pair.tgt)) + 1 <= max_len
        if fits and pair.src not in seen:
            seen.add(pair.src)
            chosen.append(pair)
    if not chosen:
        raise ValueError(f"no sentence of the validation split has {min_tokens} to {max_len} tokens with [SOS] and "
                         f"[EOS], or --sentences is {n}: lower --min-tokens, or ask for at least one sentence")
    return chosen


def draw(model, src_tokenizer, tgt_tokenizer, pair, capture, figures, label):
    """The figures of one model: a grid per kind, one head with its values, the spectra, and
    attention × gradient of the cross-attention."""
    paths = draw_capture(capture, figures / label)
    queries, keys = capture.axes("encoder.0.self_attn")
    paths.append(draw_attention_head(capture.weights["encoder.0.self_attn"][0], queries, keys,
                                     figures / label / "encoder_head_0_values.png",
                                     f"{label}: encoder self-attention, head 0"))
    paths.append(draw_spectra(capture, figures / label / "spectra.png"))
    src_ids, tgt_in = sentence_ids(model, src_tokenizer, tgt_tokenizer, pair.src, pair.tgt)
    attribution = attention_gradient_attribution(model, src_ids, tgt_in, [*tgt_in[1:], tgt_tokenizer.eos_id])
    queries, keys = capture.axes("decoder.0.cross_attn")
    paths.append(draw_attention_grid(attribution["decoder.0.cross_attn"][None], queries, keys,
                                     figures / label / "cross_attn_times_gradient.png",
                                     f"{label}: cross-attention × |∂loss/∂weights|"))
    return paths


def analyse(args, n_heads, figures):
    """Train (or reuse) one model and print its analysis; returns the encoder heads (name → matrix) of
    the analysis sentence, then those of each held-out sentence, for the validation tables."""
    label = f"{n_heads}-head" if n_heads == 1 else f"{n_heads}-heads"
    model, src_tokenizer, tgt_tokenizer, splits = trained_model(args, n_heads, Path(args.out) / label)
    print(f"\n== {label}: {count_parameters(model):,} parameters, data: {splits.source}")
    pair = analysis_sentence(splits, src_tokenizer)
    capture = capture_sentence(model, src_tokenizer, tgt_tokenizer, pair.src, pair.tgt)
    print(f"sentence: {' '.join(capture.src_tokens)}\ntarget:   {' '.join(capture.tgt_tokens)}\n")
    print(roles_table(classify_capture(capture), {name: capture.axes(name)[1] for name in capture.weights}))
    print("\nfigures: " + ", ".join(str(p) for p in draw(model, src_tokenizer, tgt_tokenizer, pair, capture,
                                                       figures, label)))
    sentences = held_out_sentences(splits, src_tokenizer, tgt_tokenizer, args.sentences, args.min_tokens,
                                   model.config.max_len)
    captures = [capture_sentence(model, src_tokenizer, tgt_tokenizer, p.src, p.tgt) for p in sentences]
    print(f"\nRoles over {len(captures)} held-out sentences (validation split, {args.min_tokens} tokens or more, "
          f"first reference as the target), each head classified sentence by sentence:\n")
    counts = count_roles(captures)
    print(role_counts_markdown(counts))
    print("\nThe same, per attention layer (share of heads × sentences):\n")
    print(role_shares_markdown(counts))
    test = splits.test
    if pair.alignment is None:
        print("\nNo word alignments in this corpus: the alignment error rate of the cross-attention, which needs "
              "the built-in corpus's gold alignments, is skipped.")
    else:
        heads, diagonal, used = cross_attention_alignment(model, src_tokenizer, tgt_tokenizer, test, args.pairs)
        print(f"\nAlignment of the cross-attention with the gold word alignments, {used} test pairs:\n")
        print(alignment_markdown(heads, diagonal))
    encoded = encode_pairs(test[:200], src_tokenizer, tgt_tokenizer, model.config.max_len)
    base, ablation = head_ablation(model, encoded)
    print(f"\nHead ablation on {len(encoded)} test pairs, heads ranked by the loss they cost:\n")
    print(ablation_markdown(base, ablation))
    if args.substitution_pairs:
        print(f"\nEvery head replaced by its projection X = P_c B + E, {args.substitution_pairs} test pairs "
              f"(greedy decoding):\n")
        print("| w | num_pos | loss | loss with X | BLEU | BLEU with X | mass kept |\n|---:|---:|---:|---:|---:|---:|---:|")
        for w, num_pos in SUBSTITUTION_SETTINGS:
            r = structured_substitution(model, src_tokenizer, tgt_tokenizer, test, w, num_pos, args.substitution_pairs)
            print(f"| {w} | {num_pos} | {r.loss:.3f} | {r.substituted_loss:.3f} | {r.bleu:.1f} | "
                  f"{r.substituted_bleu:.1f} | {r.captured_mass:.1%} |")
    return [{f"{label} h{h}": H for h, H in enumerate(c.weights["encoder.0.self_attn"])} for c in [capture, *captures]]


class Tee:
    """Write to the terminal and to a file at once."""

    def __init__(self, *streams):
        self.streams = streams

    def write(self, text):
        for stream in self.streams:
            stream.write(text)

    def flush(self):
        for stream in self.streams:
            stream.flush()


def main(argv=None):
    args = parse_arguments(argv)
    out = Path(args.out)
    figures = Path(args.figures) if args.figures else out / "figures"
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "report.md", "w", encoding="utf-8") as report, contextlib.redirect_stdout(Tee(sys.stdout, report)):
        heads, held_out = {}, None
        for n_heads in HEADS:
            first, *sentences = analyse(args, n_heads, figures)
            heads.update(first)
            held_out = sentences if held_out is None else [{**a, **b} for a, b in zip(held_out, sentences, strict=True)]
        print("\n== Validation of eq. (19) on the encoder heads, 16 × 16 crops "
              f"(random search: best of {args.samples} members per family and grid point; projection: exact)\n")
        start = time.perf_counter()
        rows = validation_table(heads, THESIS_SETTINGS, rng=np.random.default_rng(0), n_samples=args.samples)
        print(validation_markdown(rows))
        print(f"\n({time.perf_counter() - start:.1f} s)")
        print(f"\n== Validation of eq. (19) over {len(held_out)} held-out sentences (validation split), encoder heads "
              f"cropped to at most 16 × 16; means per head and setting\n")
        start = time.perf_counter()
        rng = np.random.default_rng(0)
        rows = [row for sentence in held_out
                for row in validation_table(sentence, THESIS_SETTINGS, rng=rng, n_samples=args.samples)]
        print(mean_validation_markdown(mean_validation(rows)))
        print(f"\n({time.perf_counter() - start:.1f} s)")
    print(f"\nreport: {out / 'report.md'}")


if __name__ == "__main__":
    run_example(main, __file__)
