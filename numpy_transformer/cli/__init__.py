"""The `numpy-transformer` command: one module per command in this package.

    numpy-transformer train [--out DIR] [--preset NAME] [--dataset tatoeba|builtin|opus_books|FILE] [flags]
    numpy-transformer translate --checkpoint DIR "a sentence" ...     (or lines on standard input)
    numpy-transformer evaluate --checkpoint DIR [--split test|validation] [--beam N]
    numpy-transformer attention --checkpoint DIR "a sentence" [--out DIR]
    numpy-transformer generate --checkpoint DIR [--temperature T] [--top-k K] [--top-p P] "a prompt"
    numpy-transformer fill-mask --checkpoint DIR "a text with [MASK]"
    numpy-transformer embed --checkpoint HF_FOLDER "a text" ... [--similarity | --search QUERY] [--out FILE.npy]
    numpy-transformer export --checkpoint DIR --to torch OUT
    numpy-transformer gradcheck
    numpy-transformer bench attention | train-step | decode | memory

Each command module has `add_parser(commands)` and `command(args)`. Importing this package
imports no NumPy: BLAS reads its thread count once, when NumPy loads, so `main` sets it from
`--threads` first and each command imports what it needs when it runs. `main` also asks the C
library to keep freed memory for the next arrays (numpy_transformer.training.allocator), which spares a
training step re-mapping its activations page by page.

A bad input (a missing or damaged checkpoint, an unreadable data file, an unknown language pair,
an unreachable corpus, a sentence longer than the model's maximum length) and a fault of the
machine (a full disk, a folder that cannot be written, too little memory) print one line
`numpy-transformer COMMAND: error: …` and exit with status 1, without a traceback.
"""
import argparse
import contextlib
import difflib
import errno
import os
import sys
import traceback

from numpy_transformer import __version__
from numpy_transformer.training.allocator import reuse_freed_memory
from numpy_transformer.cli import (attention_maps, bench, check_gradients, embed, evaluate, export_model, fill_mask,
                                   generate, train, translate)
from numpy_transformer.cli.common import BLAS_THREAD_VARIABLES, EXIT_ERROR, EXIT_INTERRUPTED
from numpy_transformer.training.mpi import launched_rank, launched_size

BLAS_SPIN_VARIABLE, BLAS_SHORT_SPIN = "OPENBLAS_THREAD_TIMEOUT", "16"

COMMANDS = (check_gradients, train, translate, evaluate, generate, fill_mask, embed, attention_maps, export_model,
            bench)


class Parser(argparse.ArgumentParser):
    """argparse's parser, for the command and each of its subcommands (add_subparsers makes
    them of this class too), with two changes: no abbreviations (`--thread 2` is not taken for
    `--threads 2`), and an option a command does not know is refused by that command, with its
    usage and the nearest of its own options: "unknown option --stpes; did you mean --steps?"."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **{**kwargs, "allow_abbrev": False})

    def parse_known_args(self, args=None, namespace=None):
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(self.unknown_message(extras))
        return parsed, extras

    def unknown_message(self, extras):
        """What is wrong with the first of `extras`, the arguments this parser did not take."""
        options = [extra for extra in extras if extra.startswith("-")]
        if not options:
            return f"unrecognized arguments: {' '.join(extras)}"
        name = options[0].split("=", 1)[0]
        nearest = difflib.get_close_matches(name, self._option_string_actions, n=1)
        return f"unknown option {name}" + (f"; did you mean {nearest[0]}?" if nearest else
                                            f" (the options of {self.prog} are in {self.prog} --help)")


def build_parser():
    parser = Parser(prog="numpy-transformer", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS:
        module.add_parser(commands)
    return parser


def requested_threads(argv):
    """The value of --threads (or --blas-threads) in argv, or None when it is not given."""
    early = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    early.add_argument("--threads", "--blas-threads", dest="threads")
    given, _ = early.parse_known_args(argv)
    try:
        return int(given.threads) if given.threads is not None else None
    except ValueError:
        return None                 # the real parser reports it


def limit_blas_threads(threads):
    """Set the BLAS thread count through the environment, which BLAS reads when NumPy loads.

    threads: the --threads given (it overrides the environment), or None: then 1, unless the
    user's environment sets a count. Returns False when NumPy is already loaded (too late).

    With more than one thread OpenBLAS's workers, once a product is done, spin for 2^28 cycles
    before they sleep: the second core stays busy waiting, and the optimizer's threads
    (autograd.optim) cannot use it. OPENBLAS_THREAD_TIMEOUT=16 puts them to sleep after 2^16
    cycles: still awake for the next product of a forward or backward pass, asleep before the
    update starts, so the update's threads get the cores (docs/performance.md, 8, measures it).
    A value in the user's environment is kept."""
    if "numpy" in sys.modules:
        return False
    if threads is None and any(name in os.environ for name in BLAS_THREAD_VARIABLES):
        return True
    for name in BLAS_THREAD_VARIABLES:
        os.environ[name] = str(threads or 1)
    if (threads or 1) > 1:
        os.environ.setdefault(BLAS_SPIN_VARIABLE, BLAS_SHORT_SPIN)
    return True


def threads_from_arguments(argv):
    """Fix the BLAS thread count from --threads in argv (1 when it is not given and the
    environment sets none), before NumPy loads; an invalid value is left to the parser. (`train`
    may split its steps between processes instead; each then runs one BLAS thread:
    numpy_transformer/training/parallel.py.)"""
    threads = requested_threads(argv)
    if threads is None or threads >= 1:
        limit_blas_threads(threads)


def printable_output():
    """Let standard output and error write any character: one their encoding lacks is written as
    a \\u escape (as Python writes tracebacks to standard error) instead of failing the command
    at its first line. The printouts use "–", "▁", "≤", "×" and the corpora's own letters; a
    terminal in a Latin-1 or ASCII locale has no "▁", and neither has Windows's code page when
    the output goes to a file. A stream given an error handler (PYTHONIOENCODING=ascii:replace)
    keeps it."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure") and getattr(stream, "errors", None) == "strict":
            stream.reconfigure(errors="backslashreplace")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    printable_output()
    threads_from_arguments(argv)
    reuse_freed_memory()
    args = parse_arguments(argv)
    if launched_size() > 1:
        return main_under_mpi(args, argv)
    return run_command(args)


def parse_arguments(argv):
    """The parsed arguments; under mpiexec only rank 0 prints a usage error (every rank exits 2)."""
    if launched_rank() == 0:
        return build_parser().parse_args(argv)
    with open(os.devnull, "w", encoding="utf-8") as nowhere, contextlib.redirect_stderr(nowhere), contextlib.redirect_stdout(nowhere):
        return build_parser().parse_args(argv)


def main_under_mpi(args, argv):
    """`mpiexec -n P numpy-transformer train …` (numpy_transformer/training/mpi.py): every rank
    checks that the others run the same code and arguments; rank 0 trains as `train --threads
    P` does, the other ranks serve it. Only rank 0 prints; the exit status is rank 0's."""
    from numpy_transformer.training import mpi

    speaks = launched_rank() == 0
    if args.command != "train":
        return report_error(args.command, f"only train shares its work between the processes mpiexec starts; run "
                                          f"numpy-transformer {args.command} without mpiexec") if speaks else EXIT_ERROR
    try:
        comm = mpi.use_world()
    except ValueError as error:
        return report_error(args.command, str(error)) if speaks else EXIT_ERROR
    try:
        mpi.check_agreement(comm, argv)
        if args.threads > 1:
            raise ValueError(f"under mpiexec the processes are its {comm.size} ranks: give mpiexec -n P or "
                             f"--threads N, not both")
    except ValueError as error:
        # every rank ends MPI in order and only rank 0 fails: Open MPI's mpiexec (prterun) adds a
        # report of its own to rank 0's line when a rank exits non-zero while others still run
        status = report_error(args.command, str(error)) if speaks else 0
        mpi.finalize()
        return status
    if comm.rank > 0:
        return mpi.serve(comm)
    args.threads = comm.size
    try:
        status = run_command(args)
    except BaseException:                          # a bug: its trace, then every rank ends
        traceback.print_exc()
        status = EXIT_ERROR
        mpi.abort(comm, status)
    return mpi.finish(comm, status)


def run_command(args):
    """Run the parsed command; the exit status (a known fault: one line, status 1)."""
    from numpy_transformer.data import DataUnavailableError
    from numpy_transformer.training.checkpoint import CheckpointError

    try:
        return args.run(args)
    except (CheckpointError, DataUnavailableError, ValueError) as error:
        return report_error(args.command, error)
    except OSError as error:
        return report_error(args.command, os_error_message(error))
    except MemoryError:
        return report_error(args.command, "not enough memory: " + MEMORY_ADVICE.get(args.command, MEMORY_FALLBACK))
    except KeyboardInterrupt:
        print(f"numpy-transformer {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def report_error(command, message):
    print(f"numpy-transformer {command}: error: {message}", file=sys.stderr)
    return EXIT_ERROR


MEMORY_ADVICE = {
    "train": "choose smaller sizes (--d-model, --d-ff, --batch-size, --max-len) or fewer --threads; the last "
             "checkpoint saved is kept",
    "translate": "the model in --checkpoint needs more than is free: give fewer or shorter sentences at once, a "
                 "smaller --beam, or fewer --threads",
    "evaluate": "the model in --checkpoint needs more than is free: a smaller --beam, or fewer --threads",
    "generate": "the model in --checkpoint needs more than is free: a smaller --max-new-tokens or a shorter prompt",
    "fill-mask": "the model in --checkpoint needs more than is free: a shorter text",
    "embed": "the model in --checkpoint needs more than is free: a smaller --batch-size",
    "attention": "the model in --checkpoint needs more than is free: a shorter sentence",
    "export": "the model in --checkpoint needs more than is free: close other programs and export again",
    "bench": "choose a smaller benchmark (--max-n, --max-layers, --configs) or fewer --threads",
}
MEMORY_FALLBACK = "close other programs, or run on a machine with more memory"

OS_ERROR_ADVICE = {
    errno.ENOSPC: "the disk is full: free some space, or choose a folder on another disk",
    errno.EDQUOT: "the disk quota is used up: free some space, or choose another folder",
    errno.EROFS: "the file system is read-only: choose a folder you can write to",
    errno.EFBIG: "the file would be larger than this process may write (ulimit -f) or the file system allows: raise "
                 "the limit, or choose another folder",
    errno.EACCES: "permission denied: choose a folder you can write to",
    errno.EPERM: "not permitted: choose a folder you can write to",
    errno.ENOTDIR: "a part of this path is a file, not a folder",
    errno.EISDIR: "this is a folder, not a file",
    errno.ENOENT: "no such file or folder",
    errno.ENAMETOOLONG: "the name is too long for the file system: choose a shorter path",
    errno.EINVAL: "the file system refuses this name (a character it does not allow, such as : * ? \" < > | on a "
                  "Windows or FAT disk): choose another name",
}


# the errors of writing: a file written atomically (a checkpoint among them) keeps its previous version
WRITE_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG)


def os_error_message(error):
    """One sentence for an OSError: `os_error_text`, and for an error of writing (a full disk, a
    read-only file system) that the files written before are kept whole."""
    kept = " (files written before are kept whole)" if error.errno in WRITE_ERRORS else ""
    return f"{os_error_text(error)}{kept}"


def os_error_text(error):
    """An OSError as the path (quoted where it holds characters that do not print), what went
    wrong, what to do."""
    name = str(error.filename) if error.filename else ""
    where = f"{name if name.isprintable() else repr(name)}: " if name else ""      # a NUL or a newline shown, not sent
    return f"{where}{OS_ERROR_ADVICE.get(error.errno, error.strerror or str(error))}"
