"""How well random-feature attention approximates softmax attention as the number of features
m grows (thesis §2.1.2; the "favor" and "fourier" maps of numpy_transformer.attention.kernel_linear).

The error is the mean |linear_attention(q, k, v) − softmax attention| over the outputs, for
n = 64 tokens of width d = 16 with N(0, σ²) entries, averaged over seeds. Both estimators are
unbiased for exp(q · k / √d) with a variance of order e^{‖q + k‖² / √d} / m, so the error falls
like 1/√m once m is large, and later the larger the queries and keys are.
"""
import numpy as np

from autograd import Tensor
from numpy_transformer.attention import linear_attention, scaled_dot_product_attention

FEATURE_COUNTS = (4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)


def random_feature_error(kind, n_features, seed=0, scale=0.5, n=64, d=16):
    """Mean absolute difference between `kind` attention with m = n_features and softmax attention."""
    rng = np.random.default_rng(seed)
    q, k, v = (Tensor(scale * rng.standard_normal((n, d))) for _ in range(3))
    exact = scaled_dot_product_attention(q, k, v)[0].data
    approx = linear_attention(q, k, v, kind, n_features=n_features, rng=np.random.default_rng(100 + seed)).data
    return float(np.abs(approx - exact).mean())


def random_feature_errors(kinds=("favor", "fourier"), scales=(0.5, 1.0), counts=FEATURE_COUNTS, seeds=range(5)):
    """{(kind, scale): [median error over the seeds, for each m in counts]}. The median, because
    a "fourier" denominator near 0 gives a few huge errors that would swamp a mean."""
    return {(kind, scale): [float(np.median([random_feature_error(kind, m, seed, scale) for seed in seeds]))
                            for m in counts]
            for kind in kinds for scale in scales}


def plot_random_feature_errors(path, counts=FEATURE_COUNTS):
    """The log-log figure of the errors against m, with a 1/√m guide. Returns the errors."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    errors = random_feature_errors(counts=counts)
    figure, axis = plt.subplots(figsize=(7, 4.8))
    for (kind, scale), values in errors.items():
        axis.loglog(counts, values, "o-" if kind == "favor" else "s--", label=f"{kind}, entries N(0, {scale}²)")
    guide = np.array(counts, dtype=float)
    axis.loglog(guide, errors[("favor", 0.5)][0] * np.sqrt(guide[0] / guide), "k:", label="∝ 1/√m")
    axis.set_xlabel("number of random features m")
    axis.set_ylabel("mean |output − softmax attention's|")
    axis.set_title("Random-feature attention against softmax attention (n = 64, d = 16, median of 5 seeds)",
                   fontsize=9)
    axis.grid(True, which="both", alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return errors
