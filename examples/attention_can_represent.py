"""The architecture notes' claim, built and learned: "a single attention layer can represent copy
operations (A ≈ I), shifting (A ≈ permutation matrix), averaging (A ≈ uniform distribution)",
and the local pattern A_ij ≈ exp(−|i−j|/τ)/Z.

    python examples/attention_can_represent.py                  # n = 10, 1500 Adam steps a task, seconds
    python examples/attention_can_represent.py --n 16 --steps 3000 --out runs/constructions

For each pattern A* (copy, cyclic shift by --shift, average, local with --tau) over n positions:

- constructed: W_q, W_k set by hand over one-hot positions (numpy_transformer.theory.constructions),
  copy and shift with β chosen for a row-wise total-variation error of --epsilon;
- learned: one head with learned W_q, W_k, W_v (numpy_transformer.theory.learned) trained with
  Adam on synthetic data (random Gaussian contents drawn from --seed) whose target at position i
  is Σ_j A*_ij c_j; its A is averaged over a fresh batch.

The table gives the largest row-wise total-variation distance, max_i ½ Σ_j |A_ij − B_ij|, of each
to the pattern and to each other; the figure, OUT/attention_constructions.png (--out, default
runs/examples/attention_can_represent/), draws both matrices side by side. --threads N: BLAS
threads (default 1).
"""
import argparse

from numpy_transformer.cli.example_scripts import (add_example_arguments, output_folder, progress, require,
                                                   run_example, threads_from_command_line)

threads_from_command_line()                  # before NumPy loads: BLAS reads its thread count then
import numpy as np  # noqa: E402

from numpy_transformer.theory.constructions import (  # noqa: E402
    attention_weights, average_projections, beta_for_error, copy_projections, local_projections, one_hot_positions,
    shift_projections, total_variation)
from numpy_transformer.theory.learned import learned_weights, target_patterns, train_attention  # noqa: E402


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10, help="sequence length (default 10)")
    parser.add_argument("--shift", type=int, default=1, help="the shift s: row i attends to i + s mod n (default 1)")
    parser.add_argument("--tau", type=float, default=1.0, help="τ of the local pattern (default 1.0)")
    parser.add_argument("--epsilon", type=float, default=1e-3, help="the constructed copy and shift's error (default 1e-3)")
    parser.add_argument("--steps", type=int, default=1500, help="Adam steps per task (default 1500)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the weights and the data (default 0)")
    add_example_arguments(parser, __file__)
    return parser.parse_args(argv)


def constructed_weights(args):
    """{task: A} of the hand-built layer over one-hot positions."""
    beta = beta_for_error(args.n, args.epsilon)
    projections = {"copy": copy_projections(args.n, beta), "shift": shift_projections(args.n, args.shift, beta),
                   "average": average_projections(args.n), "local": local_projections(args.n, args.tau)}
    X = one_hot_positions(args.n)
    return {task: attention_weights(X, *pair) for task, pair in projections.items()}


def learned_attention(args, patterns):
    """{task: (A, final loss)} of a head trained on each task, each from the same seed."""
    results = {}
    for task, pattern in progress(patterns.items(), desc="training a head per task", unit="task"):
        rng = np.random.default_rng(args.seed)
        model, losses = train_attention(pattern, rng, steps=args.steps)
        results[task] = learned_weights(model, args.n, rng), losses[-1]
    return results


def table(patterns, constructed, learned):
    """Markdown: the distances of each task, and the learned head's final loss."""
    lines = ["| task | TV(constructed, A*) | TV(learned, A*) | TV(learned, constructed) | final loss (MSE) |",
             "|---|---:|---:|---:|---:|"]
    for task, pattern in patterns.items():
        A_learned, loss = learned[task]
        lines.append(f"| {task} | {total_variation(constructed[task], pattern):.2e} | "
                     f"{total_variation(A_learned, pattern):.4f} | "
                     f"{total_variation(A_learned, constructed[task]):.4f} | {loss:.2e} |")
    return "\n".join(lines)


def draw(constructed, learned, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(2, len(constructed), figsize=(3 * len(constructed), 6), constrained_layout=True)
    for column, task in enumerate(constructed):
        for row, (kind, A) in enumerate((("constructed", constructed[task]), ("learned", learned[task][0]))):
            image = axes[row, column].imshow(A, cmap="viridis", vmin=0, vmax=1)
            axes[row, column].set(title=f"{task}, {kind}", xlabel="key j", ylabel="query i")
    figure.colorbar(image, ax=axes, shrink=0.6, label="A_ij")
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def main(argv=None):
    args = parse_arguments(argv)
    require("matplotlib")
    patterns = target_patterns(args.n, args.shift, args.tau)
    constructed = constructed_weights(args)
    learned = learned_attention(args, patterns)
    print(f"data: synthetic, n = {args.n} one-hot positions with Gaussian contents (seed {args.seed}); "
          f"{args.steps} Adam steps a task")
    print(table(patterns, constructed, learned))
    print(f"figure: {draw(constructed, learned, output_folder(args) / 'attention_constructions.png')}")
    return constructed, learned


if __name__ == "__main__":
    run_example(main, __file__)
