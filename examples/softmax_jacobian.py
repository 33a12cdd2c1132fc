"""Thesis §1.2.3: why attention divides the scores by √k.

Prints the softmax Jacobian J_s = diag(s) − s sᵀ of a small vector, then scales the logits up
and plots how the Jacobian's norm collapses as s approaches a one-hot vector (eq. (9)): with
large dot products the gradient through the softmax vanishes.

    python examples/softmax_jacobian.py       # [--out DIR] (default runs/examples/softmax_jacobian/) [--threads N]

The figure is OUT/softmax_jacobian.png.
"""
import argparse

from numpy_transformer.cli.example_scripts import (add_example_arguments, output_folder, require, run_example,
                                                   threads_from_command_line)

threads_from_command_line()                  # before NumPy loads: BLAS reads its thread count then
import numpy as np  # noqa: E402

import autograd.functional as F  # noqa: E402
from autograd import Tensor  # noqa: E402


def jacobian_norm(z, scale):
    """Frobenius norm of J_s at s = softmax(scale · z)."""
    s = F.softmax(Tensor(scale * z)).data
    return np.linalg.norm(F.softmax_jacobian(s))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_example_arguments(parser, __file__)
    args = parser.parse_args(argv)
    require("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    z = np.array([1.0, 2.0, 0.5, -1.0])
    s = F.softmax(Tensor(z)).data
    np.set_printoptions(precision=4, suppress=True)
    print("z   =", z)
    print("s   =", s)
    print("J_s = diag(s) - s s^T =")
    print(F.softmax_jacobian(s))

    # Dot products of random d-dimensional queries and keys have standard deviation √d.
    rng = np.random.default_rng(0)
    scales = np.logspace(-1, 2.5, 60)
    print("\nscale   ||J_s||_F   max s")
    for scale in (0.1, 1, 8, 64, 300):
        print(f"{scale:5g}   {jacobian_norm(z, scale):9.2e}   {F.softmax(Tensor(scale * z)).data.max():.6f}")
    samples = [rng.standard_normal(16) for _ in range(200)]
    median_norm = [np.median([jacobian_norm(x, scale) for x in samples]) for scale in scales]

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.loglog(scales, median_norm, label="random logits, n = 16 (median of 200)")
    ax.loglog(scales, [jacobian_norm(z, scale) for scale in scales], "--", label=f"z = {z.tolist()}")
    for d in (64, 512):
        ax.axvline(np.sqrt(d), color="grey", lw=0.8, ls=":")
        ax.text(np.sqrt(d), 0.02, f" √{d}", color="grey", transform=ax.get_xaxis_transform())
    ax.set_xlabel("scale of the logits (unscaled dot products grow like √d)")
    ax.set_ylim(1e-12, 2)
    ax.set_ylabel("‖J_s‖ (Frobenius)")
    ax.set_title("Softmax Jacobian norm vs logit scale (thesis §1.2.3)")
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    path = output_folder(args) / "softmax_jacobian.png"
    fig.savefig(path)
    plt.close(fig)
    print(f"\nfigure saved to {path}")


if __name__ == "__main__":
    run_example(main, __file__)
