"""Heat maps of attention weights, as the thesis's Figures 11 and 12: a grid of layers × heads,
the query tokens down the side, the key tokens along the top, one colour scale shared by every
panel (so a pale head really is flatter than a dark one); and one head alone with its values
printed in the cells. The file's extension chooses the format: .png or .svg.
"""
from pathlib import Path

import numpy as np

from numpy_transformer.analysis.hooks import KINDS

FORMATS = (".png", ".svg")
COLOUR_MAP = "viridis"


def figure_path(path):
    """`path` as a Path, or a ValueError if its extension is not .png or .svg."""
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        raise ValueError(f"figure {path}: the extension must be one of {FORMATS}, got {path.suffix!r}")
    return path


def pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def label_axes(axis, query_tokens, key_tokens, fontsize):
    """Tokens on both axes: keys along the top (as the thesis draws them), queries down the side."""
    axis.set_xticks(range(len(key_tokens)), key_tokens, rotation=90, fontsize=fontsize)
    axis.set_yticks(range(len(query_tokens)), query_tokens, fontsize=fontsize)
    axis.xaxis.tick_top()
    axis.tick_params(length=0)


def save(figure, path):
    plt = pyplot()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(figure)
    return path


def draw_attention_grid(weights, query_tokens, key_tokens, path, title=None, layer_names=None, max_columns=4,
                        head_labels=None):
    """Draw `weights` (layers, heads, n_q, n_k) as a layers × heads grid of heat maps with a
    shared colour bar into `path` (.png or .svg); a layer with more than `max_columns` heads
    wraps onto several rows (8 heads: 2 rows of 4, as the thesis's Figure 12). Each panel is
    labelled "layer l, head h" (`layer_names[l]` for "layer l"), or `head_labels[l][h]` when
    given (a selection of heads, say). Returns the path."""
    path, weights = figure_path(path), np.asarray(weights)
    if weights.ndim != 4 or weights.shape[2:] != (len(query_tokens), len(key_tokens)):
        raise ValueError(f"draw_attention_grid: weights of shape {weights.shape} do not fit (layers, heads, "
                         f"{len(query_tokens)} query tokens, {len(key_tokens)} key tokens)")
    plt = pyplot()
    n_layers, n_heads, n_q, n_k = weights.shape
    columns = min(n_heads, max_columns)
    rows_per_layer = -(-n_heads // columns)
    size = 0.9 + 0.19 * max(n_q, n_k)
    figure, axes = plt.subplots(n_layers * rows_per_layer, columns, squeeze=False, layout="constrained",
                                figsize=(size * columns + 1.2, (size + 0.3) * n_layers * rows_per_layer + 0.6))
    fontsize = 7 if max(n_q, n_k) <= 24 else 5
    for axis in axes.ravel():
        axis.set_visible(False)
    for layer in range(n_layers):
        for head in range(n_heads):
            axis = axes[layer * rows_per_layer + head // columns, head % columns]
            axis.set_visible(True)
            image = axis.imshow(weights[layer, head], cmap=COLOUR_MAP, vmin=0.0, vmax=max(weights.max(), 1e-12))
            label_axes(axis, query_tokens, key_tokens, fontsize)
            name = layer_names[layer] if layer_names else f"layer {layer}"
            axis.set_xlabel(head_labels[layer][head] if head_labels else f"{name}, head {head}", fontsize=9)
    figure.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8, fraction=0.03, pad=0.03, label="attention weight")
    if title:
        figure.suptitle(title)
    return save(figure, path)


def draw_attention_head(matrix, query_tokens, key_tokens, path, title=None, decimals=2):
    """Draw one head (n_q, n_k) with its values printed in the cells into `path`."""
    path, matrix = figure_path(path), np.asarray(matrix)
    if matrix.shape != (len(query_tokens), len(key_tokens)):
        raise ValueError(f"draw_attention_head: a matrix of shape {matrix.shape} does not fit "
                         f"{len(query_tokens)} query tokens and {len(key_tokens)} key tokens")
    plt = pyplot()
    n_q, n_k = matrix.shape
    figure, axis = plt.subplots(figsize=(1.5 + 0.5 * n_k, 1.0 + 0.45 * n_q))
    image = axis.imshow(matrix, cmap=COLOUR_MAP, vmin=0.0, vmax=max(matrix.max(), 1e-12))
    label_axes(axis, query_tokens, key_tokens, 9)
    threshold = 0.6 * matrix.max()
    for i in range(n_q):
        for j in range(n_k):
            axis.text(j, i, f"{matrix[i, j]:.{decimals}f}", ha="center", va="center", fontsize=6,
                      color="black" if matrix[i, j] > threshold else "white")
    figure.colorbar(image, ax=axis, shrink=0.8, label="attention weight")
    if title:
        axis.set_title(title, pad=40)
    return save(figure, path)


def draw_capture(capture, directory, file_format="png"):
    """One grid per kind of attention of an `AttentionCapture` into `directory`
    (encoder_self_attn.png, decoder_self_attn.png, decoder_cross_attn.png). Returns the paths."""
    paths = []
    for kind in KINDS:
        names = capture.names(kind)
        if names:
            queries, keys = capture.axes(names[0])
            path = Path(directory) / f"{kind.replace('.', '_')}.{file_format}"
            paths.append(draw_attention_grid(capture.stack(kind), queries, keys, path, kind,
                                             [name.rsplit(".", 1)[0] for name in names]))
    return paths
