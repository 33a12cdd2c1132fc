"""The `numpy-transformer` command."""
import argparse
import sys

import numpy as np

from numpy_transformer import __version__
from numpy_transformer.benchmarks import add_bench_command


def gradcheck_command(args):
    """Gradient-check every primitive op of the engine and print one line per op."""
    from autograd import GradcheckError, gradcheck
    from autograd.gradcheck_suite import CASES, max_gradient_error

    print("Gradient check of every primitive op: analytic (backward) vs numerical (central")
    print("differences, h = 1e-6) Jacobians, float64, random inputs with seed", args.seed)
    print(f"{'op':<30} {'input shapes':<26} {'max |error|':>11}  result")
    failures = 0
    for case in CASES:
        rng = np.random.default_rng(args.seed)
        error = max_gradient_error(case, rng)
        try:
            gradcheck(case.fn, *case.inputs(np.random.default_rng(args.seed)))
            result = "ok"
        except GradcheckError as failure:
            result, failures = f"FAILED: {failure}", failures + 1
        shapes = " ".join(str(s) for s in case.shapes)
        print(f"{case.name:<30} {shapes:<26} {error:>11.1e}  {result}")
    print(f"{len(CASES)} checks, {len(CASES) - failures} passed, {failures} failed.")
    return 1 if failures else 0


def build_parser():
    parser = argparse.ArgumentParser(prog="numpy-transformer", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    check = commands.add_parser("gradcheck", help="gradient-check every primitive op of the engine")
    check.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    check.set_defaults(run=gradcheck_command)
    add_bench_command(commands)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
