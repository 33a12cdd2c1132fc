"""A Vision Transformer learns to read handwritten digits, and where its [CLS] token looks.

    python examples/vit_digits.py                       # about 30 s on one core
    python examples/vit_digits.py --no-figure           # no figure
    python examples/vit_digits.py --dataset mnist       # MNIST through `datasets` (needs the Hub or a cached copy)

The data are scikit-learn's bundled handwritten digits (`sklearn.datasets.load_digits`: 1,797
real 8 × 8 grey images, values 0–16, scaled to [0, 1]; no download). A seeded, stratified
quarter is held out as the test set. The model is `numpy_transformer.beyond_text.vision.
VisionTransformer`: 2 × 2 patches (16 tokens of 4 pixels) and a [CLS] token, d_model 64, 4
heads, 2 pre-norm encoder layers, trained with Adam on the label-smoothed cross-entropy of the
[CLS] logits. The figure shows, for a few test digits, the [CLS] token's attention over the 16
patches in the last layer (averaged over the heads), drawn over the digit: OUT/vit_cls_attention.png
(--out, default runs/examples/vit_digits/). --threads N: BLAS threads (default 1). The last line
is the accuracy on the held-out quarter.
"""
import argparse
import time

from numpy_transformer.cli.example_scripts import (add_example_arguments, output_folder, progress, require,
                                                   run_example, threads_from_command_line)

threads_from_command_line()                  # before NumPy loads: BLAS reads its thread count then
import numpy as np  # noqa: E402

import autograd.functional as F  # noqa: E402
from autograd.engine_room.fused_adam import share_updates  # noqa: E402
from autograd.optim import Adam  # noqa: E402
from numpy_transformer.beyond_text.vision import VisionTransformer  # noqa: E402
from numpy_transformer.config import TransformerConfig  # noqa: E402
from numpy_transformer.inference import inference_mode  # noqa: E402


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", choices=("digits", "mnist"), default="digits",
                        help="digits: scikit-learn's bundled 8 × 8 digits (default); mnist: 28 × 28, through `datasets`")
    parser.add_argument("--patch-size", type=int, default=None, help="p of the p × p patches (default 2; 7 for mnist)")
    parser.add_argument("--epochs", type=int, default=40, help="passes over the training images (default 40)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam's learning rate (default 1e-3)")
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--label-smoothing", type=float, default=0.1)
    parser.add_argument("--limit", type=int, default=None, help="use only this many images (quick runs)")
    parser.add_argument("--seed", type=int, default=0)
    add_figure_arguments(parser, __file__)
    return parser.parse_args(argv)


def add_figure_arguments(parser, script):
    """--threads, --out and --no-figure, as this example and digits_to_words.py take them."""
    add_example_arguments(parser, script)
    parser.add_argument("--no-figure", action="store_true", help="draw no figure (and need no matplotlib)")


def load_images(dataset, seed, limit=None):
    """(train images, train labels, test images, test labels, description): images float32 in
    [0, 1], (n, H, W); for digits a stratified quarter held out, drawn with `seed`."""
    if dataset == "mnist":
        return load_mnist(limit)
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    images, labels = (digits.images / 16).astype(np.float32)[:limit], digits.target[:limit]
    train_x, test_x, train_y, test_y = train_test_split(images, labels, test_size=0.25, stratify=labels,
                                                        random_state=seed)
    return train_x, train_y, test_x, test_y, f"scikit-learn digits, {len(train_x)} train / {len(test_x)} test (8 × 8)"


def load_mnist(limit):
    """MNIST's own train and test splits (28 × 28), through `datasets`; an error at once when
    the Hub cannot be reached and no copy is cached."""
    from numpy_transformer.data.hub import DataUnavailableError, load_hub_dataset

    try:
        tables = load_hub_dataset("mnist", what="MNIST", local_hint="the bundled --dataset digits, no network needed")
    except DataUnavailableError as error:            # its third way on, the translation corpus, is not for images
        message = str(error).split("\n  3.")[0].replace("Three ways on", "Two ways on")
        raise DataUnavailableError(message) from None
    splits = []
    for split in ("train", "test"):
        table = tables[split].select(range(min(limit or len(tables[split]), len(tables[split]))))
        splits += [np.stack([np.asarray(image, dtype=np.float32) / 255 for image in table["image"]]),
                   np.asarray(table["label"])]
    return (*splits, f"MNIST, {len(splits[0])} train / {len(splits[2])} test (28 × 28)")


def build_model(args, image_size, rng):
    n_patches = (image_size // args.patch_size) ** 2
    config = TransformerConfig(1, 1, pad_id=None, d_model=args.d_model, n_heads=args.heads, d_ff=2 * args.d_model,
                               n_encoder_layers=args.layers, n_decoder_layers=1, dropout=0.1, positional="learned",
                               max_len=1 + n_patches, norm_placement="pre", norm_variant="torch", norm_eps=1e-5,
                               activation="gelu")
    return VisionTransformer(config, image_size, args.patch_size, n_classes=10, rng=rng)


def train(model, batch_loss, n_examples, args, rng):
    """Adam on `batch_loss(indices)` (a scalar Tensor) over shuffled batches of the n_examples;
    the mean loss of each epoch."""
    optimizer = share_updates(Adam(model.named_parameters(), lr=args.lr), args.threads)
    losses = []
    for _ in progress(range(args.epochs), desc="training", unit="epoch"):
        order, total = rng.permutation(n_examples), 0.0
        for begin in range(0, n_examples, args.batch_size):
            batch = order[begin:begin + args.batch_size]
            optimizer.zero_grad()
            loss = batch_loss(batch)
            loss.backward()
            optimizer.step()
            total += float(loss.data) * len(batch)
        losses.append(total / n_examples)
    return losses


def classification_loss(model, images, labels, label_smoothing):
    """indices → the label-smoothed cross-entropy of the [CLS] logits of those images."""
    return lambda batch: F.cross_entropy(model(images[batch]), labels[batch], label_smoothing=label_smoothing)


def predict(model, images, batch_size=256):
    """The most probable class of every image, in eval mode."""
    with inference_mode(model):
        return np.concatenate([model(images[begin:begin + batch_size]).data.argmax(axis=-1)
                               for begin in range(0, len(images), batch_size)])


def cls_attention(model, images):
    """(batch, rows, columns): the [CLS] query's attention over the patches in the last layer,
    averaged over the heads, on the patch grid (the weight [CLS] puts on itself left out)."""
    with inference_mode(model):
        model(images)
    weights = model.encoder.layers[-1].self_attn.last_weights            # (batch, heads, 1 + n, 1 + n)
    return weights[:, :, 0, 1:].mean(axis=1).reshape(len(images), *model.encoder.embedding.grid)


def draw(images, maps, labels, predictions, path):
    """Two rows: the test digits, and the [CLS] attention on the patch grid with the digit's
    outline (the 0.5 level of its ink) drawn over it."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(2, len(images), figsize=(1.6 * len(images), 3.6), constrained_layout=True)
    for column, (image, attention, label, predicted) in enumerate(zip(images, maps, labels, predictions)):
        extent = (0, image.shape[1], image.shape[0], 0)
        axes[0, column].imshow(image, cmap="gray_r", extent=extent)
        axes[0, column].set_title(f"{label} (read {predicted})", fontsize=9)
        axes[1, column].imshow(attention, cmap="viridis", extent=extent, interpolation="nearest")
        axes[1, column].contour(np.arange(image.shape[1]) + 0.5, np.arange(image.shape[0]) + 0.5, image,
                                levels=[0.5], colors="white", linewidths=1)
        for axis in axes[:, column]:
            axis.set_xticks([])
            axis.set_yticks([])
    axes[1, 0].set_ylabel("[CLS] attention", fontsize=9)
    figure.suptitle("test digits; [CLS] attention over the patches, last layer, mean over heads", fontsize=9)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def main(argv=None):
    args = parse_arguments(argv)
    require(*(() if args.dataset == "mnist" else ("sklearn",)), *(() if args.no_figure else ("matplotlib",)))
    args.patch_size = args.patch_size or (7 if args.dataset == "mnist" else 2)
    train_x, train_y, test_x, test_y, description = load_images(args.dataset, args.seed, args.limit)
    print(f"data: {description}")
    rng = np.random.default_rng(args.seed)
    model = build_model(args, train_x.shape[1], rng)
    began = time.perf_counter()
    losses = train(model, classification_loss(model, train_x, train_y, args.label_smoothing), len(train_x), args, rng)
    seconds = time.perf_counter() - began
    accuracy = float((predict(model, test_x) == test_y).mean())
    print(f"training loss: {losses[0]:.3f} (epoch 1) → {losses[-1]:.3f} (epoch {len(losses)}), {seconds:.0f} s")
    if not args.no_figure:
        shown = np.arange(min(8, len(test_x)))
        maps, path = cls_attention(model, test_x[shown]), output_folder(args) / "vit_cls_attention.png"
        print(f"figure: {draw(test_x[shown], maps, test_y[shown], predict(model, test_x[shown]), path)}")
    print(f"test accuracy: {accuracy:.2f}")
    return {"losses": losses, "accuracy": accuracy, "model": model}


if __name__ == "__main__":
    run_example(main, __file__)
