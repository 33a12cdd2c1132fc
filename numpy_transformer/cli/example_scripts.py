"""What the scripts of `examples/` share with the commands: the BLAS thread count fixed from
`--threads` before NumPy loads, an output folder of their own (`--out`), a progress bar on a
terminal only, and a bad input or a missing optional library in one line
`examples/NAME.py: error: …` with exit status 1, never a traceback.

The examples are files, not a package; each begins and ends the same way:

    from numpy_transformer.cli.example_scripts import threads_from_command_line
    threads_from_command_line()          # before NumPy loads: BLAS reads its thread count then
    import numpy as np                   # noqa: E402
    …
    if __name__ == "__main__":
        run_example(main, __file__)

Like the rest of the command line, importing this module imports no NumPy.
"""
import importlib
import sys
from pathlib import Path

from numpy_transformer.cli import os_error_text, printable_output, threads_from_arguments
# on_terminal and progress: the examples import them from here, with the rest of what they share
from numpy_transformer.cli.common import (EXIT_ERROR, EXIT_INTERRUPTED, add_threads_argument,  # noqa: F401
                                          on_terminal, progress)

# the optional libraries the examples import, by module name: what pip installs
OPTIONAL_LIBRARIES = {"sklearn": "scikit-learn", "networkx": "networkx", "torch": "torch", "matplotlib": "matplotlib"}


def threads_from_command_line():
    """Fix the BLAS thread count from the script's --threads (default 1, or the environment's
    OPENBLAS_NUM_THREADS when it sets one), as `numpy-transformer` does; nothing once NumPy is
    loaded (an example imported by another, or by a test). Output in any encoding, as there
    (`printable_output`)."""
    printable_output()
    threads_from_arguments(sys.argv[1:])


def add_example_arguments(parser, script, output=True):
    """--threads, and with `output` --out DIR (default runs/examples/NAME, NAME the script's)."""
    add_threads_argument(parser, "the script's matrix products (and the update of an optimizer it runs)")
    if output:
        default = Path("runs", "examples", Path(script).stem)
        parser.add_argument("--out", type=Path, default=default,
                            help=f"the folder the figures and files go into (default {default}; created if missing)")


def output_folder(args):
    """args.out, created if missing."""
    args.out.mkdir(parents=True, exist_ok=True)
    return args.out


def loss_cell(loss):
    """A training loss in a printed table: 3 decimals, and an empty cell before the first step
    (the examples record NaN there: no step has been taken to average)."""
    return "" if loss != loss else f"{loss:.3f}"


def require(*modules):
    """Import the optional libraries `modules` now, so that a missing one stops the script before
    its work (run_example turns the ModuleNotFoundError into one line)."""
    for module in modules:
        importlib.import_module(module)


def run_example(main, script):
    """Run main(); a bad input, a missing file or optional library, or Ctrl-C ends the script with
    one line on standard error and exit status 1 (130 for Ctrl-C)."""
    from numpy_transformer.data import DataUnavailableError
    from numpy_transformer.training.checkpoint import CheckpointError

    name = f"examples/{Path(script).name}"
    try:
        main()
    except ModuleNotFoundError as error:
        library = OPTIONAL_LIBRARIES.get((error.name or "").split(".")[0])
        if library is None:
            raise
        fail(name, f"this example needs {library}, which is not installed: pip install {library}")
    except (ValueError, CheckpointError, DataUnavailableError) as error:
        fail(name, str(error))
    except OSError as error:
        fail(name, os_error_text(error))
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)


def fail(name, message):
    print(f"{name}: error: {message}", file=sys.stderr)
    sys.exit(EXIT_ERROR)
