"""Thesis §1.2.3: why attention divides the scores by √k.

Prints the softmax Jacobian J_s = diag(s) − s sᵀ of a small vector, then scales the logits up
and plots how the Jacobian's norm collapses as s approaches a one-hot vector (eq. (9)): with
large dot products the gradient through the softmax vanishes.

    python examples/softmax_jacobian.py [--out softmax_jacobian.png]
"""
import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import autograd.functional as F  # noqa: E402
from autograd import Tensor  # noqa: E402


def jacobian_norm(z, scale):
    """Frobenius norm of J_s at s = softmax(scale · z)."""
    s = F.softmax(Tensor(scale * z)).data
    return np.linalg.norm(F.softmax_jacobian(s))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="softmax_jacobian.png", help="where to save the figure (PNG or SVG)")
    args = parser.parse_args()

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
    fig.savefig(args.out)
    print(f"\nfigure saved to {args.out}")


if __name__ == "__main__":
    main()
