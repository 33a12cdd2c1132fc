"""Attention graphs of thesis §2.1.1 as boolean (n, n) patterns: entry (i, j) is True when
query i attends to key j, i.e. j ∈ N(i), the out-neighbours of node i in the graph D of eq. (11).

| builder                   | N(i)                                                        | thesis              |
|---------------------------|-------------------------------------------------------------|---------------------|
| `sliding_window_pattern`  | |i − j| ≤ w // 2                                            | Figure 7 (b), w = 3 |
| `dilated_window_pattern`  | j = i + m·dilation, |m| ≤ w // 2                             | Longformer, Fig. 9  |
| `global_tokens_pattern`   | every j for i ∈ G; i itself for j ∈ G (rows and columns G)  | Figure 7 (c), g = 2 |
| `random_pattern`          | r keys drawn at random for each query                       | Figure 7 (a), r = 2 |
| `bigbird_pattern`         | the union of the three, on blocks of tokens                 | Figure 7 (d)        |

A pattern's number of True entries is the number of inner products q_i · k_j that sparse
attention computes (the edges of Figure 8). Combine patterns with `|` (union) and `&`
(`& causal_mask(n)` keeps j ≤ i). `draw_figure_7` draws the four panels of the thesis's Figure 7.
"""
import numpy as np

from autograd.checks import checked_integer


def sliding_window_pattern(n, window):
    """(n, n): query i attends to the keys |i − j| ≤ window // 2 (w = 3: i − 1, i, i + 1)."""
    return dilated_window_pattern(n, window, 1)


def dilated_window_pattern(n, window, dilation):
    """(n, n): query i attends to j = i + m·dilation for |m| ≤ window // 2 (dilation 1: the
    sliding window). Built one diagonal at a time: O(n · window), no n × n integer arrays."""
    n = checked_integer("dilated_window_pattern: n", n, low=0)
    window = checked_integer("dilated_window_pattern: window", window, low=1)
    dilation = checked_integer("dilated_window_pattern: dilation", dilation, low=1)
    pattern = np.zeros((n, n), dtype=bool)
    rows = np.arange(n)
    for m in range(-(window // 2), window // 2 + 1):
        keys = rows + m * dilation
        inside = (keys >= 0) & (keys < n)
        pattern[rows[inside], keys[inside]] = True
    return pattern


def global_tokens_pattern(n, tokens):
    """(n, n): the global tokens G attend to every token (rows G) and every token attends to
    them (columns G), BigBird's and Longformer's global attention."""
    tokens = checked_tokens("global_tokens_pattern", tokens, n)
    pattern = np.zeros((n, n), dtype=bool)
    pattern[tokens, :] = True
    pattern[:, tokens] = True
    return pattern


def random_pattern(n, r, rng, causal=False):
    """(n, n): each query attends to r distinct keys drawn uniformly (r ≤ n) with `rng`, a
    numpy.random.Generator. Rows that drew a key twice draw again, all rows at once.

    causal: query i draws its r keys among j ≤ i instead, as ⌊u (i + 1)⌋ with u uniform in
    [0, 1), one row of u per query; they may repeat (row 0 has one key to draw from), and row i
    does not depend on n, so the pattern of n tokens is the top-left corner of any longer one
    (what decoding one token at a time needs)."""
    n = checked_integer("random_pattern: n", n, low=1)
    r = checked_integer("random_pattern: r", r, low=0)
    if causal:
        keys = (rng.random((n, r)) * np.arange(1, n + 1)[:, None]).astype(np.int64)
    else:
        if r > n:
            raise ValueError(f"random_pattern: r={r} distinct keys per query is more than n={n}")
        keys = rng.integers(0, n, (n, r))
        while r and (repeated := _has_repeats(keys)).any():
            keys[repeated] = rng.integers(0, n, (int(repeated.sum()), r))
    pattern = np.zeros((n, n), dtype=bool)
    pattern[np.repeat(np.arange(n), r), keys.reshape(-1)] = True
    return pattern


def _has_repeats(keys):
    ordered = np.sort(keys, axis=1)
    return (ordered[:, 1:] == ordered[:, :-1]).any(axis=1)


def bigbird_pattern(n, block_size, rng, window_blocks=3, global_blocks=1, random_blocks=1):
    """(n, n): BigBird's block layout (Figure 7 (d)). The n tokens form ⌈n / block_size⌉ blocks;
    on the graph of blocks, each block attends to a window of `window_blocks` blocks around it,
    to `random_blocks` random blocks, and the first `global_blocks` blocks attend to all and
    are attended by all. Each block edge becomes a block_size × block_size square of token
    edges (cropped at n), which is what lets BigBird compute dense blocks."""
    block_size = checked_integer("bigbird_pattern: block_size", block_size, low=1)
    n = checked_integer("bigbird_pattern: n", n, low=1)
    n_blocks = -(-n // block_size)
    blocks = sliding_window_pattern(n_blocks, window_blocks)
    blocks |= global_tokens_pattern(n_blocks, range(min(global_blocks, n_blocks)))
    blocks |= random_pattern(n_blocks, min(random_blocks, n_blocks), rng)
    square = np.ones((block_size, block_size), dtype=bool)
    return np.kron(blocks, square)[:n, :n]


def checked_tokens(name, tokens, n):
    """The global token positions as a sorted integer array of distinct positions in [0, n)."""
    tokens = np.unique(np.asarray(list(tokens), dtype=np.int64))
    if tokens.size and (tokens[0] < 0 or tokens[-1] >= n):
        raise ValueError(f"{name}: global tokens must be positions in [0, {n}), got {tokens.tolist()}")
    return tokens


FIGURE_7_PANELS = ("(a) random attention, r = 2", "(b) sliding window attention, w = 3",
                   "(c) global attention, g = 2", "(d) BigBird")


def figure_7_patterns(n=12, rng=None):
    """The four (n, n) patterns of the thesis's Figure 7: random r = 2, window w = 3, global
    g = 2, and their union (BigBird with blocks of one token)."""
    rng = np.random.default_rng(7) if rng is None else rng
    random, window, global_ = random_pattern(n, 2, rng), sliding_window_pattern(n, 3), global_tokens_pattern(n, (0, 1))
    return [random, window, global_, random | window | global_]


def draw_figure_7(path, n=12, rng=None):
    """Draw the thesis's Figure 7 from the builders into `path` (a PNG): four n × n grids,
    coloured where query i (row) attends to key j (column), white elsewhere. Returns the path."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    patterns = figure_7_patterns(n, rng)
    figure, axes = plt.subplots(1, 4, figsize=(13, 4.0))
    for axis, pattern, title, colour in zip(axes, patterns, FIGURE_7_PANELS,
                                            ("Blues", "Oranges", "Greens", "Purples")):
        axis.imshow(pattern, cmap=colour, vmin=0, vmax=1.4)
        axis.set_xticks(np.arange(-0.5, n), minor=True)
        axis.set_yticks(np.arange(-0.5, n), minor=True)
        axis.grid(which="minor", color="lightgrey", linewidth=0.5)
        axis.tick_params(which="both", length=0, labelbottom=False, labelleft=False)
        axis.set_title(f"{title}\n{int(pattern.sum())} of {n * n} scores", fontsize=10)
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)
    return path
