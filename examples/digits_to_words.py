"""The translation decoder writes a handwritten digit's name, in English or Italian, from the
image alone, and shows which patches its cross-attention reads for each word.

    python examples/digits_to_words.py                  # about a minute on one core
    python examples/digits_to_words.py --no-figure      # no figure

The data are scikit-learn's bundled handwritten digits (`sklearn.datasets.load_digits`: 1,797
real 8 × 8 images; no download), a seeded, stratified quarter held out as the test set. Every
image is written twice: the decoder starts from a language tag and writes one word and EOS,

    <en> → seven <eos>            <it> → sette <eos>

The model is `numpy_transformer.beyond_text.cross_modal.ImageToText`: the ViT encoder on 2 × 2
patches (16 tokens, no [CLS]) and the project's translation `Decoder`, whose cross-attention
takes Q from the text and K = V from the 16 patch outputs. Trained with Adam on the
label-smoothed cross-entropy (teacher forcing), decoded greedily with the key/value cache. The
last line is the exact match on the held-out quarter: the fraction of (image, language) pairs
whose whole output is the right word. The figure shows, for a few test digits, the last
decoder layer's cross-attention (mean over heads) of the query that writes each output token:
OUT/digits_to_words_attention.png (--out, default runs/examples/digits_to_words/). --threads N:
BLAS threads (default 1).
"""
import argparse
from pathlib import Path
import sys
import time

from numpy_transformer.cli.example_scripts import (output_folder, require, run_example,
                                                   threads_from_command_line)

threads_from_command_line()                  # before NumPy loads: BLAS reads its thread count then
import numpy as np  # noqa: E402

import autograd.functional as F  # noqa: E402
from numpy_transformer.beyond_text.cross_modal import ImageToText, greedy_text  # noqa: E402
from numpy_transformer.config import TransformerConfig  # noqa: E402
from numpy_transformer.inference import inference_mode  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))     # the examples are files, not a package
from vit_digits import add_figure_arguments, load_images, train  # noqa: E402
NAMES = {"<en>": "zero one two three four five six seven eight nine".split(),
         "<it>": "zero uno due tre quattro cinque sei sette otto nove".split()}
VOCABULARY = ["<pad>", "<eos>", *NAMES, *sorted(set(NAMES["<en>"]) | set(NAMES["<it>"]))]
ID = {token: i for i, token in enumerate(VOCABULARY)}
FIGURE = "digits_to_words_attention.png"


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=20, help="passes over the training images (default 20)")
    parser.add_argument("--batch-size", type=int, default=64, help="images per step, each in both languages")
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam's learning rate (default 1e-3)")
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--encoder-layers", type=int, default=2)
    parser.add_argument("--decoder-layers", type=int, default=1)
    parser.add_argument("--label-smoothing", type=float, default=0.1)
    parser.add_argument("--limit", type=int, default=None, help="use only this many images (quick runs)")
    parser.add_argument("--seed", type=int, default=0)
    add_figure_arguments(parser, __file__)
    return parser.parse_args(argv)


def sentences(labels):
    """Every label in both languages: (image rows, decoder inputs [<lang>, word], targets
    [word, <eos>]), the rows and token arrays (2 · batch, …)."""
    rows = np.concatenate([np.arange(len(labels))] * len(NAMES))
    tags = np.repeat([ID[tag] for tag in NAMES], len(labels))
    words = np.concatenate([[ID[NAMES[tag][label]] for label in labels] for tag in NAMES])
    return rows, np.stack([tags, words], axis=1), np.stack([words, np.full_like(words, ID["<eos>"])], axis=1)


def build_model(args, rng):
    config = TransformerConfig(1, len(VOCABULARY), d_model=args.d_model, n_heads=args.heads, d_ff=2 * args.d_model,
                               n_encoder_layers=args.encoder_layers, n_decoder_layers=args.decoder_layers, dropout=0.1,
                               positional="learned", max_len=16, norm_placement="pre", norm_variant="torch",
                               norm_eps=1e-5, activation="gelu")
    return ImageToText(config, image_size=8, patch_size=2, rng=rng)


def naming_loss(model, images, labels, label_smoothing):
    """indices → the label-smoothed cross-entropy of both languages' words for those images
    (teacher forcing)."""
    def loss(batch):
        rows, tgt_in, tgt_out = sentences(labels[batch])
        return F.cross_entropy(model(images[batch][rows], tgt_in), tgt_out, label_smoothing=label_smoothing)
    return loss


def exact_match(model, images, labels):
    """The fraction of (image, language) pairs whose greedy output is exactly [the word]."""
    rows, tgt_in, _ = sentences(labels)
    outputs = greedy_text(model, images[rows], tgt_in[:, 0], ID["<eos>"], max_len=4)
    return float(np.mean([output == [word] for output, word in zip(outputs, tgt_in[:, 1])]))


def cross_attention(model, images, labels):
    """{tag: (batch, 2, rows, columns)}: for the queries at <lang> (which writes the word) and
    at the word (which writes <eos>), the last decoder layer's cross-attention over the patch
    grid, mean over heads, teacher-forced on the right words."""
    rows, tgt_in, _ = sentences(labels)
    with inference_mode(model):
        model(images[rows], tgt_in)
    weights = model.decoder.layers[-1].cross_attn.last_weights.mean(axis=1)          # (2 · batch, 2, n_patches)
    grid = model.encoder.embedding.grid
    per_language = weights.reshape(len(NAMES), len(labels), 2, *grid)
    return dict(zip(NAMES, per_language))


def draw(images, labels, maps, path):
    """A row a digit: the image, then the cross-attention of each output token, with the
    digit's outline over it."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = [(tag, position) for tag in NAMES for position in (0, 1)]
    figure, axes = plt.subplots(len(images), 1 + len(columns), figsize=(1.5 * (1 + len(columns)), 1.6 * len(images)),
                                constrained_layout=True, squeeze=False)
    for row, (image, label) in enumerate(zip(images, labels)):
        extent = (0, image.shape[1], image.shape[0], 0)
        axes[row, 0].imshow(image, cmap="gray_r", extent=extent)
        axes[row, 0].set_title(f"test digit {label}", fontsize=8)
        for axis, (tag, position) in zip(axes[row, 1:], columns):
            axis.imshow(maps[tag][row, position], cmap="viridis", extent=extent, interpolation="nearest")
            axis.contour(np.arange(image.shape[1]) + 0.5, np.arange(image.shape[0]) + 0.5, image, levels=[0.5],
                         colors="white", linewidths=1)
            written = NAMES[tag][label] if position == 0 else "<eos>"
            axis.set_title(f"{tag} → {written}", fontsize=8)
        for axis in axes[row]:
            axis.set_xticks([])
            axis.set_yticks([])
    figure.suptitle("decoder cross-attention over the 16 patches for each output token (last layer, mean over heads)",
                    fontsize=9)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def main(argv=None):
    args = parse_arguments(argv)
    require("sklearn", *(() if args.no_figure else ("matplotlib",)))
    train_x, train_y, test_x, test_y, description = load_images("digits", args.seed, args.limit)
    print(f"data: {description}, each named in English and Italian")
    rng = np.random.default_rng(args.seed)
    model = build_model(args, rng)
    began = time.perf_counter()
    losses = train(model, naming_loss(model, train_x, train_y, args.label_smoothing), len(train_x), args, rng)
    print(f"training loss: {losses[0]:.3f} (epoch 1) → {losses[-1]:.3f} (epoch {len(losses)}), "
          f"{time.perf_counter() - began:.0f} s")
    match = exact_match(model, test_x, test_y)
    if not args.no_figure:
        shown = np.arange(min(4, len(test_x)))
        maps, path = cross_attention(model, test_x[shown], test_y[shown]), output_folder(args) / FIGURE
        print(f"figure: {draw(test_x[shown], test_y[shown], maps, path)}")
    print(f"test exact match: {match:.2f}")
    return {"losses": losses, "exact_match": match, "model": model}


if __name__ == "__main__":
    run_example(main, __file__)
