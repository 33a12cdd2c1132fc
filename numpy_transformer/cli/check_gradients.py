"""`numpy-transformer gradcheck`: gradient-check every primitive op of the engine, one line per op."""
from numpy_transformer.cli.common import add_threads_argument, non_negative_integer


def add_parser(commands):
    check = commands.add_parser("gradcheck", help="gradient-check every primitive op of the engine")
    check.add_argument("--seed", type=non_negative_integer, default=0, help="seed of the random inputs (default 0)")
    add_threads_argument(check, "the Jacobians' matrix products")
    check.set_defaults(run=command)


def command(args):
    """Gradient-check every primitive op of the engine and print one line per op."""
    import numpy as np

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
