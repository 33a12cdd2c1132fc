"""The singular-value spectrum of every head (thesis Figure 10, after Linformer's Figure 1):
σ_i / σ_1 against i, one line per head, one panel per kind of attention, with the tolerance of
`numerical_rank` (max(n_q, n_k) · eps) dashed: what falls below it is rounding, not rank.

A long tail (fast decay) means a low-rank approximation would do. A permutation-like
(positional) head has a flat spectrum, every σ_i = 1; a head whose rows all attend one key has
rank one; the thesis reports its heads full rank.
"""
import numpy as np

from numpy_transformer.analysis.heatmaps import figure_path, pyplot, save
from numpy_transformer.analysis.hooks import KINDS
from numpy_transformer.analysis.measures import singular_values

FLOOR = 1e-18   # σ_i / σ_1 below rounding (≈ 1e-16) are drawn here


def normalised_spectrum(H):
    """σ_i / σ_1 of one head (all zeros for a zero head)."""
    sigma = singular_values(H)
    return sigma / sigma[0] if sigma[0] > 0 else sigma


def draw_spectra(capture, path):
    """Draw the normalised spectra of every head of an `AttentionCapture` into `path`
    (.png or .svg), one panel per kind of attention. Returns the path."""
    path = figure_path(path)
    plt = pyplot()
    kinds = [kind for kind in KINDS if capture.names(kind)]
    figure, axes = plt.subplots(1, len(kinds), figsize=(4.4 * len(kinds), 3.6), squeeze=False,
                                constrained_layout=True)
    for axis, kind in zip(axes[0], kinds):
        for name in capture.names(kind):
            for head, H in enumerate(capture.weights[name]):
                spectrum = normalised_spectrum(H)
                axis.plot(np.arange(1, len(spectrum) + 1), np.maximum(spectrum, FLOOR), marker=".", linewidth=1,
                          label=f"{name.split('.')[1]}.{head}")
        tolerance = max(capture.weights[name].shape[1:]) * np.finfo(np.float64).eps
        axis.axhline(tolerance, color="grey", linestyle="--", linewidth=0.8)
        axis.text(1, tolerance * 3, "rank tolerance", fontsize=7, color="grey")
        axis.set_yscale("log")
        axis.set_ylim(FLOOR / 3, 3)
        axis.set_xlabel("i")
        axis.set_ylabel("σ_i / σ_1")
        axis.set_title(kind, fontsize=10)
        axis.grid(alpha=0.3)
    if sum(len(capture.weights[name]) for name in capture.names(kinds[0])) <= 16:
        axes[0, 0].legend(title="layer.head", fontsize=6, ncol=2)
    return save(figure, path)
