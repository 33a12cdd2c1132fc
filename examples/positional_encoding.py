"""The sinusoidal positional encoding of thesis eq. (1), drawn and probed.

    python examples/positional_encoding.py               # [--out DIR] [--threads N]

Saves OUT/positional_encoding.png (--out, default runs/examples/positional_encoding/), a figure
with two panels: the table P (positions down, dimensions across: fast oscillations in the first
dimensions, slow ones in the last), and the dot product
PE(t) · PE(t + s) against the offset s. That dot product is Σ_k cos(ω_k s): it does not depend
on t, only on the distance s, and it is largest at s = 0. It also checks the thesis's claim that
a shift is a linear map, PE(t + s) = PE(t) R_s. Expected output (defaults):

    P = sinusoidal_encoding(max_len=100, d_model=64, base=10000): shape (100, 64)
    PE(t) · PE(t + s) for t = 0 and t = 50 (the same: it depends on s only):
         s    t = 0   t = 50
         0   32.000   32.000
    ...
"""
import argparse

from numpy_transformer.cli.example_scripts import (add_example_arguments, output_folder, require, run_example,
                                                   threads_from_command_line)

threads_from_command_line()                  # before NumPy loads: BLAS reads its thread count then
import numpy as np  # noqa: E402

from numpy_transformer.positional import shift_matrix, sinusoidal_encoding  # noqa: E402

OFFSETS = (0, 1, 2, 5, 10, 20, 40)


def print_dot_products(P):
    later = len(P) // 2
    print(f"PE(t) · PE(t + s) for t = 0 and t = {later} (the same: it depends on s only):")
    print(f"{'s':>6} {'t = 0':>8} {f't = {later}':>8}")
    for s in (s for s in OFFSETS if later + s < len(P)):
        print(f"{s:>6} {P[0] @ P[s]:>8.3f} {P[later] @ P[later + s]:>8.3f}")


def print_shift_check(P, base):
    print("Shifts are linear maps, PE(t + s) = PE(t) R_s, for every t at once:")
    for s in (s for s in (1, 7, 30) if s < len(P)):
        R = shift_matrix(s, P.shape[1], base, dtype=np.float64)
        error = np.max(np.abs(P[:-s] @ R - P[s:]))
        print(f"  s = {s:>2}: max |PE(t) R_s − PE(t + s)| = {error:.1e}")


def plot(P, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (table, dots) = plt.subplots(1, 2, figsize=(11, 4))
    image = table.imshow(P, aspect="auto", cmap="RdBu", vmin=-1, vmax=1)
    table.set(title="P[t, i], thesis eq. (1)", xlabel="dimension i", ylabel="position t")
    figure.colorbar(image, ax=table)
    later = len(P) // 2
    offsets = np.arange(len(P) - later)
    dots.plot(offsets, P[0] @ P[offsets].T, label="t = 0")
    dots.plot(offsets, P[later] @ P[later + offsets].T, "--", label=f"t = {later}")
    dots.set(title="PE(t) · PE(t + s)", xlabel="offset s", ylabel="dot product")
    dots.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_example_arguments(parser, __file__)
    parser.add_argument("--max-len", type=int, default=100)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--base", type=float, default=10000.0)
    args = parser.parse_args(argv)
    require("matplotlib")
    P = sinusoidal_encoding(args.max_len, args.d_model, args.base, dtype=np.float64)
    print(f"P = sinusoidal_encoding(max_len={args.max_len}, d_model={args.d_model}, base={args.base:g}): "
          f"shape {P.shape}")
    print_dot_products(P)
    print_shift_check(P, args.base)
    figure = plot(P, output_folder(args) / "positional_encoding.png")
    print(f"Saved the heat map and the dot-product curve to {figure}")


if __name__ == "__main__":
    run_example(main, __file__)
