"""Every way a run ends is one of the known endings: a run killed (kill -9) or stopped (SIGTERM)
at any moment, the first checkpoint's write and the final evaluation included, leaves a folder
that one printed command continues or starts again, no temporary file, and exit status 130 for
SIGTERM as for Ctrl-C. The faults are injected at a chosen moment in a child process (the
moment is a function call, not a time)."""
import json
import os
import signal
import subprocess
import sys
import textwrap

from numpy_transformer.training.checkpoint import load_checkpoint
from numpy_transformer.training.run_folder import LOCK, MANIFEST
from run_helpers import run_main

TINY_RUN = ["--dataset", "builtin", "--tokenizer", "word", "--no-shared-vocabulary", "--n-pairs", "120", "--max-len",
            "32", "--d-model", "16", "--n-heads", "2", "--d-ff", "32", "--batch-size", "16", "--steps", "5",
            "--eval-every", "5", "--beam", "1", "--samples", "0", "--quiet"]
ENVIRONMENT = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}


def train_with_fault(folder, fault):
    """Run `train --out folder` in a child process in which `fault` (Python source, run before
    the command) replaces a function by one that kills or stops the process; its result."""
    program = textwrap.dedent(fault) + textwrap.dedent(f"""
        import sys
        from numpy_transformer.cli import main
        sys.exit(main({["train", "--out", str(folder), *TINY_RUN]!r}))
    """)
    return subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=ENVIRONMENT,
                          timeout=300)


def temporaries(folder):
    return [p.name for p in folder.iterdir() if p.name.endswith((".tmp", ".new", ".aside"))]


KILL_IN_FIRST_SAVE = """
    import os, signal
    import numpy as np
    def killed_while_writing(file, **arrays):
        file.write(b"PK half an archive")
        file.flush()
        os.kill(os.getpid(), signal.{signal})
    np.savez = killed_while_writing
"""


def test_a_run_killed_while_writing_its_first_checkpoint_is_started_again_by_the_same_command(tmp_path):
    folder = tmp_path / "run"
    killed = train_with_fault(folder, KILL_IN_FIRST_SAVE.format(signal="SIGKILL"))
    assert killed.returncode == -signal.SIGKILL
    assert temporaries(folder) and (folder / MANIFEST).is_file() and (folder / LOCK).is_file()
    # --resume says exactly what to type, in one line ...
    status, _, err = run_main(["train", "--out", folder, "--resume"])
    assert status == 1 and len(err.strip().splitlines()) == 1
    assert "stopped before its first checkpoint" in err and "same numpy-transformer train command" in err
    assert "without --resume" in err
    # ... and that command works: the dead run's lock, files and temporaries are replaced
    status, _, err = run_main(["train", "--out", folder, *TINY_RUN])
    assert status == 0, err
    assert "note: took over the lock of process" in err and "which no longer runs" in err     # --quiet too
    assert temporaries(folder) == [] and not (folder / LOCK).exists()
    assert load_checkpoint(folder).step == 5 and (folder / "metrics.json").is_file()


def test_sigterm_while_writing_the_first_checkpoint_ends_as_ctrl_c_and_the_same_command_starts_again(tmp_path):
    folder = tmp_path / "run"
    stopped = train_with_fault(folder, KILL_IN_FIRST_SAVE.format(signal="SIGTERM"))
    assert stopped.returncode == 130, stopped.stderr
    assert "Traceback" not in stopped.stderr
    assert "before the first checkpoint" in stopped.stderr and "without --resume" in stopped.stderr
    assert temporaries(folder) == [] and not (folder / LOCK).exists()
    status, _, err = run_main(["train", "--out", folder, *TINY_RUN])
    assert status == 0, err
    assert load_checkpoint(folder).step == 5


def test_sigterm_during_the_final_evaluation_keeps_the_checkpoint_and_resume_finishes_it(tmp_path):
    folder = tmp_path / "run"
    stopped = train_with_fault(folder, """
        import os, signal, time
        import numpy_transformer.training.evaluation as evaluation
        def stopped_while_evaluating(*args, **kwargs):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)                       # the handler runs before this returns
            raise AssertionError("SIGTERM was not handled")
        evaluation.evaluate_split = stopped_while_evaluating
    """)
    assert stopped.returncode == 130, stopped.stderr
    assert "Traceback" not in stopped.stderr
    lines = stopped.stderr.strip().splitlines()
    assert lines[-2].startswith("Interrupted during the final evaluation on the test split: the checkpoint of "
                                "step 5")
    assert lines[-1].strip() == f"numpy-transformer train --out {folder} --resume"
    assert temporaries(folder) == [] and not (folder / LOCK).exists()
    assert not (folder / "metrics.json").exists()
    status, _, err = run_main(lines[-1].split()[1:] + ["--quiet", "--beam", "1", "--samples", "0"])
    assert status == 0, err
    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["steps"] == 5 and load_checkpoint(folder).step == 5


def test_sigterm_while_the_data_is_read_leaves_no_folder(tmp_path):
    folder = tmp_path / "run"
    stopped = train_with_fault(folder, """
        import os, signal, time
        import numpy_transformer.training.run as run
        def stopped_while_reading(*args, **kwargs):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
            raise AssertionError("SIGTERM was not handled")
        run.prepare_data = stopped_while_reading
    """)
    assert stopped.returncode == 130 and "interrupted" in stopped.stderr and "Traceback" not in stopped.stderr
    assert not folder.exists()
