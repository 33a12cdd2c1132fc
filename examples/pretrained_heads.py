"""Thesis chapter 3 on a real pretrained model: every attention head of a BERT-architecture
encoder (all-MiniLM-L6-v2: 6 layers × 12 heads = 72), read on real English sentences: the heat
maps, the role of each head counted over the sentences and summed per layer, where the
attention goes ([CLS], [SEP], punctuation), the spectra, and the structured approximation
I_n P + Ẽ of eq. (19) by the thesis's random search and by the exact projection.

    python examples/pretrained_heads.py --model /path/to/all-MiniLM-L6-v2 --out runs/minilm-heads
    python examples/pretrained_heads.py --model FOLDER --text sentences.txt   # your sentences, one a line

--model: a Hugging Face BERT folder, with or without its masked-LM head (a sentence-transformers
folder such as all-MiniLM-L6-v2), or a Hub name (default sentence-transformers/all-MiniLM-L6-v2,
which needs the Hub or its cache). The sentences: the first --sentences distinct English sources
of the packaged Tatoeba corpus's validation split (real, everyday sentences) with at least
--min-tokens WordPiece tokens, [CLS] and [SEP] included, and at most what the model reads; or
the lines of --text (a UTF-8 file), with the same bounds. Each head is analysed token by token:
a word WordPiece splits is several rows and columns, and [CLS] and [SEP] are tokens like the
others (a head that collects [SEP] is a rare-token head whose token is [SEP]). The roles are
also counted with [CLS] and [SEP] left out, to see what the heads do among the words. The
approximation of eq. (19) runs on the first --approximation-sentences sentences (default 10):
the random search draws 3,000 members per head and setting.

It writes into --out: layer_L.png (every head of layer L on the first sentence),
selected_heads.png (a few heads per layer, one of each role first), spectra.png, attention.npz
(that sentence's matrices) and report.md (everything printed). --threads N: BLAS threads
(default 1). Expected output (all-MiniLM-L6-v2; docs/chapter3.md has the tables and what they
say):

    model: all-MiniLM-L6-v2, 6 layers × 12 heads, 40 sentences (Tatoeba, validation split, English side; 11.0 tokens …
    heat maps of: [CLS] a railroad was constructed in this town . [SEP]
    …
    | attention | heads | positional | syntactic | rare-token | broad | other | heads by their most frequent role |
    |---|---:|---:|---:|---:|---:|---:|---|
    | encoder.0.self_attn | 12 | 40 | 49 | 62 | 329 | 0 | 1 positional, 1 syntactic, 1 rare-token, 9 broad |
    | encoder.1.self_attn | 12 | 34 | 10 | 401 | 32 | 3 | 1 positional, 10 rare-token, 1 broad |
    …
    | 3 | 2 | all layers | 720 | 11.2 | 11.200 | 12.555 | 0.0994 | 1.078 | 0.0079 | 90.9% | 26% |
"""
import argparse
import dataclasses
import string
import time
from pathlib import Path

from numpy_transformer.cli.example_scripts import (add_example_arguments, output_folder, progress, run_example,
                                                   threads_from_command_line)

threads_from_command_line()                  # before NumPy loads: BLAS reads its thread count then
import numpy as np  # noqa: E402

from numpy_transformer.analysis.capture import AttentionCapture, capture_text
from numpy_transformer.analysis.heatmaps import draw_attention_grid
from numpy_transformer.analysis.measures import numerical_rank, spectral_norm
from numpy_transformer.analysis.roles import (ROLES_WITH_BROAD, classify_capture, count_roles, role_counts_markdown,
                                              role_shares_markdown)
from numpy_transformer.analysis.spectra import draw_spectra
from numpy_transformer.analysis.structured import (THESIS_SETTINGS, mean_validation, mean_validation_markdown,
                                                   validation_table)
from numpy_transformer.data import load_dataset_splits
from numpy_transformer.data.utf8 import read_lines
from numpy_transformer.interop.sentence_encoder import load_sentence_encoder

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
KIND = "encoder.self_attn"
HEADS_SHOWN = 4                              # heads per layer in selected_heads.png
PUNCTUATION = frozenset(string.punctuation)


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_example_arguments(parser, __file__)
    parser.add_argument("--model", default=DEFAULT_MODEL,
                        help=f"a Hugging Face BERT folder or Hub name (default {DEFAULT_MODEL})")
    parser.add_argument("--cache-dir", help="where huggingface_hub keeps downloaded models (default HF_HUB_CACHE)")
    parser.add_argument("--text", type=Path,
                        help="a UTF-8 file of sentences, one a line (default: Tatoeba's validation split, English side)")
    parser.add_argument("--sentences", type=int, default=40, help="how many sentences (default 40)")
    parser.add_argument("--min-tokens", type=int, default=10,
                        help="the shortest sentence, in tokens with [CLS] and [SEP] (default 10)")
    parser.add_argument("--approximation-sentences", type=int, default=10,
                        help="the first N sentences the approximation of eq. (19) is run on (default 10: the random "
                             "search draws 3,000 members per head and setting)")
    parser.add_argument("--samples", type=int, default=100,
                        help="random members per family and grid point in the random search (default 100)")
    return parser.parse_args(argv)


def token_count(tokenizer, text):
    """The tokens the encoder reads: [CLS], the text's WordPiece tokens, [SEP]."""
    return len(tokenizer.encode(text)) + 2


def chosen_sentences(args, tokenizer, max_tokens):
    """(sentences, where they come from): the first --sentences distinct candidates of
    --min-tokens to max_tokens tokens, from --text or from Tatoeba's validation split."""
    if args.text is not None:
        candidates, source = [line.strip() for line in read_lines(args.text)], str(args.text)
    else:
        candidates = [pair.src for pair in load_dataset_splits("tatoeba").validation]
        source = "Tatoeba, validation split, English side"
    chosen = []
    for text in dict.fromkeys(filter(None, candidates)):
        if len(chosen) == args.sentences:
            break
        if args.min_tokens <= token_count(tokenizer, text) <= max_tokens:
            chosen.append(text)
    if not chosen:
        raise ValueError(f"{source}: no sentence has {args.min_tokens} to {max_tokens} tokens with [CLS] and [SEP], "
                         f"or --sentences is {args.sentences}: lower --min-tokens, give other sentences, or ask for "
                         f"at least one")
    return chosen, source


def selected_heads(capture):
    """(weights (layers, HEADS_SHOWN, n, n), labels): per layer one head of each role met in
    this sentence first (in the order of ROLES_WITH_BROAD), then the lowest-numbered others."""
    roles = {(row.name, row.head): row.role for row in classify_capture(capture, broad=True)}
    weights, labels = [], []
    for name in capture.names(KIND):
        heads = range(len(capture.weights[name]))
        firsts = [next(h for h in heads if roles[name, h] == role)
                  for role in ROLES_WITH_BROAD if any(roles[name, h] == role for h in heads)]
        shown = [*firsts, *(h for h in heads if h not in firsts)][:HEADS_SHOWN]
        weights.append(capture.weights[name][shown])
        labels.append([f"layer {name.split('.')[1]}, head {h}: {roles[name, h]}" for h in shown])
    return np.stack(weights), labels


def draw(capture, out):
    """The heat maps (one grid per layer, and the selection), the spectra; the paths."""
    tokens = capture.src_tokens
    paths = [draw_attention_grid(capture.weights[name][None], tokens, tokens, out / f"layer_{name.split('.')[1]}.png",
                                 f"{name}: every head", [name.rsplit(".", 1)[0]])
             for name in capture.names(KIND)]
    weights, labels = selected_heads(capture)
    paths.append(draw_attention_grid(weights, tokens, tokens, out / "selected_heads.png",
                                     f"{HEADS_SHOWN} heads per layer", head_labels=labels))
    paths.append(draw_spectra(capture, out / "spectra.png"))
    return paths


def key_kind(token):
    """Which kind of key a token is, for `attention_targets`."""
    if token in ("[CLS]", "[SEP]"):
        return token
    return "punctuation" if set(token) <= PUNCTUATION else "word"


def attention_targets_markdown(captures):
    """Per layer, the share of all attention (over heads, queries and sentences) that goes to
    [CLS], to [SEP], to punctuation and to word pieces; and the mean numerical rank (of n) and
    ‖H‖₂ of its heads."""
    kinds = ("[CLS]", "[SEP]", "punctuation", "word")
    lines = ["| layer | to [CLS] | to [SEP] | to punctuation | to word pieces | numerical rank / n | ‖H‖₂ |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name in captures[0].names(KIND):
        shares, ranks, norms = {kind: [] for kind in kinds}, [], []
        for capture in captures:
            weights = capture.weights[name]                                        # (heads, n, n)
            columns = weights.sum(axis=(0, 1)) / weights.sum()
            keys = np.array([key_kind(token) for token in capture.src_tokens])
            for kind in kinds:
                shares[kind].append(columns[keys == kind].sum())
            ranks += [numerical_rank(H) / len(H) for H in weights]
            norms += [spectral_norm(H) for H in weights]
        lines.append(f"| {name} | " + " | ".join(f"{np.mean(shares[kind]):.0%}" for kind in kinds) +
                     f" | {np.mean(ranks):.2f} | {np.mean(norms):.2f} |")
    return "\n".join(lines)


def without_special_tokens(capture):
    """The capture with the rows and columns of [CLS] and [SEP] dropped and each row scaled
    back to sum 1: what each word piece attends among the word pieces."""
    inner = {name: weights[:, 1:-1, 1:-1] / weights[:, 1:-1, 1:-1].sum(axis=-1, keepdims=True)
             for name, weights in capture.weights.items()}
    return AttentionCapture(capture.src_tokens[1:-1], [], inner)


def structured_rows(captures, samples):
    """Both methods of eq. (19) on every head of every sentence, cropped to at most 16 × 16, at
    the thesis's four settings: the `ValidationRow`s, each head labelled by its layer."""
    rng, rows = np.random.default_rng(0), []
    for capture in progress(captures, desc="eq. (19)", unit="sentence"):
        heads = {f"{name}|{h}": H for name in capture.names(KIND) for h, H in enumerate(capture.weights[name])}
        for row in validation_table(heads, THESIS_SETTINGS, rng=rng, n_samples=samples):
            rows.append(dataclasses.replace(row, head=row.head.split("|")[0]))
    return rows


def main(argv=None):
    args = parse_arguments(argv)
    if min(args.sentences, args.approximation_sentences, args.samples) < 1:
        raise ValueError(f"--sentences, --approximation-sentences and --samples must be at least 1, got "
                         f"{args.sentences}, {args.approximation_sentences} and {args.samples}")
    model, tokenizer, recipe = load_sentence_encoder(args.model, args.cache_dir)
    sentences, source = chosen_sentences(args, tokenizer, min(recipe.max_length, model.config.max_len))
    out = output_folder(args)                                   # once the inputs are known to be good
    captures = [capture_text(model, tokenizer, text) for text in progress(sentences, desc="capture", unit="sentence")]
    config = model.config
    with open(out / "report.md", "w", encoding="utf-8") as report:
        def say(text=""):
            print(text)
            report.write(text + "\n")

        say(f"model: {Path(args.model).name}, {config.n_layers} layers × {config.n_heads} heads, {len(sentences)} "
            f"sentences ({source}; {np.mean([len(c.src_tokens) for c in captures]):.1f} tokens on average with "
            f"[CLS] and [SEP])")
        say(f"heat maps of: {' '.join(captures[0].src_tokens)}")
        captures[0].save(out / "attention.npz")
        say("figures: " + ", ".join(str(path) for path in draw(captures[0], out)))
        counts = count_roles(captures, broad=True)
        say(f"\nRoles per layer: heads × sentences of each role ({config.n_heads} heads × {len(captures)} sentences "
            f"per layer)\n")
        say(role_shares_markdown(counts, as_counts=True))
        say("\nThe same as shares:\n")
        say(role_shares_markdown(counts))
        say("\nThe roles among the word pieces: the rows and columns of [CLS] and [SEP] left out, each row scaled "
            "back to sum 1 (heads × sentences):\n")
        say(role_shares_markdown(count_roles([without_special_tokens(c) for c in captures], broad=True),
                                 as_counts=True))
        say("\nWhere the attention goes, per layer (share of all weights), and the spectra:\n")
        say(attention_targets_markdown(captures))
        say("\nEvery head over the sentences:\n")
        say(role_counts_markdown(counts))
        approximated = captures[:args.approximation_sentences]
        say(f"\nThe structured approximation of eq. (19) on the first {len(approximated)} sentences, heads cropped to "
            f"at most 16 × 16 (random search: best of {args.samples} members per family and grid point; projection: "
            f"exact); means per layer, then over all {config.n_layers * config.n_heads} heads (the column "
            f"\"sentences\" counts heads × sentences)\n")
        start = time.perf_counter()
        rows = structured_rows(approximated, args.samples)
        layers = mean_validation(rows)
        overall = mean_validation([dataclasses.replace(row, head="all layers") for row in rows])
        say(mean_validation_markdown(layers + overall))
        say(f"\n({time.perf_counter() - start:.0f} s)")
    print(f"\nreport: {out / 'report.md'}")


if __name__ == "__main__":
    run_example(main, __file__)
