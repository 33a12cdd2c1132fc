"""Locks that know their owner (numpy_transformer/training/locks.py): a lock records the process id,
host and start time of its holder and is put in place whole; a lock whose process is gone, whose
process id now belongs to another program, or that holds no lock at all is taken over with one
line saying why; a live holder still refuses; of simultaneous starters exactly one wins; a full
disk leaves no lock behind."""
import errno
import json
import multiprocessing
import os
import socket
import subprocess
import sys

import pytest

from numpy_transformer.training import locks
from numpy_transformer.training.locks import LockHeld, check_lock, process_start, read_lock, release_lock, \
    remove_stale_lock, take_lock
from numpy_transformer.training.run import Run
from numpy_transformer.training.run_folder import LOCK, RunFolderError
from run_helpers import run_main, tiny_configs

HOST = socket.gethostname()
TINY_RUN = ["--dataset", "builtin", "--tokenizer", "word", "--no-shared-vocabulary", "--n-pairs", "120", "--max-len",
            "32", "--d-model", "16", "--n-heads", "2", "--d-ff", "32", "--batch-size", "16", "--steps", "3", "--beam",
            "1", "--samples", "0", "--quiet"]


def held(holder):
    return f"held by {holder['pid']}"


def dead_pid():
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


@pytest.fixture
def sleeper():
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process
    process.kill()
    process.wait()


def test_a_lock_records_pid_host_and_start_time_and_is_released(tmp_path):
    path = tmp_path / "lock"
    assert take_lock(path, held) is None
    record = json.loads(path.read_text())
    assert record["pid"] == os.getpid() and record["host"] == HOST
    if sys.platform.startswith("linux"):
        assert record["started"] == process_start(os.getpid()) is not None
    assert [p.name for p in tmp_path.iterdir()] == ["lock"]           # no temporary left
    release_lock(path)
    assert not path.exists()


@pytest.mark.parametrize("content, why", [
    ("", "it is empty"),
    ("\x00\x01garbage", "not JSON"),
    ("[1, 2]", "a JSON list, not an object"),
    ('{"pid": -5, "host": "%s"}' % HOST, "its process id is -5, not a positive integer"),
    ('{"pid": true, "host": "%s"}' % HOST, "its process id is True"),
    ('{"pid": 0, "host": "%s"}' % HOST, "its process id is 0"),
    ('{"pid": 12}', "it names no host"),
    ('{"pid": null, "host": null}', "its process id is None"),
])
def test_a_lock_that_holds_no_lock_is_taken_over_saying_why(tmp_path, content, why):
    path = tmp_path / "lock"
    path.write_text(content)
    note = take_lock(path, held)
    assert note.startswith(f"note: took over the lock {path}: ") and why in note and "\n" not in note
    assert read_lock(path)[0]["pid"] == os.getpid()


def test_a_lock_of_a_dead_process_or_of_a_reused_pid_is_taken_over(tmp_path, sleeper):
    path = tmp_path / "lock"
    pid = dead_pid()
    path.write_text(json.dumps({"pid": pid, "host": HOST}))
    assert take_lock(path, held) == f"note: took over the lock of process {pid}, which no longer runs"
    release_lock(path)
    if not sys.platform.startswith("linux"):
        return
    # a live process whose start time is not the recorded one: the pid was reused
    started = process_start(sleeper.pid)
    path.write_text(json.dumps({"pid": sleeper.pid, "host": HOST, "started": started + 1}))
    assert "its process id now belongs to another program" in take_lock(path, held)
    release_lock(path)
    # a lock of an earlier boot
    path.write_text(json.dumps({"pid": sleeper.pid, "host": HOST, "started": started, "boot": "another-boot"}))
    assert "restarted" in take_lock(path, held)


def test_a_live_holder_refuses_and_its_lock_is_left_alone(tmp_path, sleeper):
    path = tmp_path / "lock"
    for record in ({"pid": sleeper.pid, "host": HOST},
                   {"pid": sleeper.pid, "host": HOST, "started": process_start(sleeper.pid)},
                   {"pid": 1, "host": HOST},                           # another user's process: it runs
                   {"pid": dead_pid(), "host": "another-host"}):       # cannot be seen from here
        path.write_text(json.dumps(record))
        with pytest.raises(LockHeld, match=f"held by {record['pid']}"):
            take_lock(path, held)
        assert json.loads(path.read_text()) == record and [p.name for p in tmp_path.iterdir()] == ["lock"]
        release_lock(path)                                             # not ours: kept
        assert path.exists()


def test_a_full_disk_while_taking_the_lock_leaves_no_lock(tmp_path, monkeypatch):
    path = tmp_path / "lock"

    def disk_full(descriptor, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(locks.os, "write", disk_full)
    with pytest.raises(OSError) as raised:
        take_lock(path, held)
    assert raised.value.errno == errno.ENOSPC
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    assert take_lock(path, held) is None


@pytest.mark.parametrize("command", ["train", "resume", "export"])
def test_a_full_disk_at_the_start_leaves_no_lock_and_the_next_call_works(tmp_path, monkeypatch, command):
    """The full disk strikes while the lock is written: one line, and once space is free, the
    same command works (no "in use by another run (process None on None)")."""
    folder = tmp_path / "run"
    if command != "train":
        assert run_main(["train", "--out", folder, *TINY_RUN])[0] == 0
    arguments = {"train": ["train", "--out", folder, *TINY_RUN],
                 "resume": ["train", "--out", folder, "--resume", "--steps", "4", "--quiet", "--beam", "1",
                            "--samples", "0"],
                 "export": ["export", "--checkpoint", folder, "--to", "torch", tmp_path / "exported"]}[command]
    real_write = os.write

    def disk_full(descriptor, data):
        if os.readlink(f"/proc/self/fd/{descriptor}").endswith(".new"):    # the lock's temporary
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(descriptor, data)

    if not os.path.exists("/proc/self/fd"):
        pytest.skip("needs /proc to tell the lock's write from the others")
    monkeypatch.setattr(locks.os, "write", disk_full)
    status, _, err = run_main(arguments)
    errors = [line for line in err.splitlines() if "error" in line]
    assert status == 1 and "Traceback" not in err and len(errors) == 1 and "the disk is full" in errors[0], err
    leftovers = [p.name for p in [*tmp_path.iterdir(), *(folder.iterdir() if folder.exists() else [])]
                 if "lock" in p.name]
    assert leftovers == []
    if command == "train":
        assert not folder.exists()                          # the folder it made is removed again
    monkeypatch.undo()
    status, _, err = run_main(arguments)
    assert status == 0, err


def test_a_run_takes_over_a_garbage_lock_and_says_so(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / LOCK).write_text("[]")
    reports = []
    with Run.new(folder, *tiny_configs(training={"steps": 2}), report=reports.append) as run:
        run.train()
    assert any(line.startswith(f"note: took over the lock {folder / LOCK}: it is not a lock") for line in reports)
    assert not (folder / LOCK).exists()


def test_a_run_refuses_a_folder_a_live_process_holds(tmp_path, sleeper):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / LOCK).write_text(json.dumps({"pid": sleeper.pid, "host": HOST,
                                           "started": process_start(sleeper.pid)}))
    with pytest.raises(RunFolderError, match=f"in use by another run \\(process {sleeper.pid} on {HOST}\\)"):
        Run.new(folder, *tiny_configs())


def test_removing_a_stale_lock_leaves_a_live_one_and_a_guard_held_by_another(tmp_path, sleeper):
    """The race of processes taking over one stale lock: the one holding the takeover guard reads
    the lock again and removes it only if it is still stale; another finds the guard taken."""
    path = tmp_path / "lock"
    record = json.dumps({"pid": sleeper.pid, "host": HOST})
    path.write_text(record)
    remove_stale_lock(path)
    assert path.read_text() == record and [p.name for p in tmp_path.iterdir()] == ["lock"]
    guard = tmp_path / "lock.takeover"
    guard.write_text(record)                                # a live process takes over a stale lock now
    stale = json.dumps({"pid": dead_pid(), "host": HOST})
    path.write_text(stale)
    remove_stale_lock(path)                                 # left to it
    assert path.read_text() == stale and guard.read_text() == record
    sleeper.kill()
    sleeper.wait()
    remove_stale_lock(path)                                 # the guard's process is gone: the guard goes
    assert path.exists() and not guard.exists()
    remove_stale_lock(path)                                 # now the stale lock goes
    assert list(tmp_path.iterdir()) == []


def _start(path, barrier, results):
    try:
        outcome = "won" if take_lock(path, held) is None else "took over"
    except LockHeld:
        outcome = "refused"
    barrier.wait()                                          # the winner stays alive until all have tried
    results.put(outcome)


@pytest.mark.parametrize("stale", ["", "garbage", "dead"])
def test_of_eight_simultaneous_starts_exactly_one_wins(tmp_path, stale):
    """Eight processes take one lock at once: on no lock, an empty or garbage one, or a dead
    process's, exactly one holds it and seven are refused."""
    path = tmp_path / "lock"
    if stale == "garbage":
        path.write_text("not a lock")
    elif stale == "dead":
        path.write_text(json.dumps({"pid": dead_pid(), "host": HOST}))
    context = multiprocessing.get_context("fork" if sys.platform != "win32" else "spawn")
    barrier, results = context.Barrier(8), context.Queue()
    processes = [context.Process(target=_start, args=(path, barrier, results)) for _ in range(8)]
    for process in processes:
        process.start()
    outcomes = sorted(results.get(timeout=120) for _ in processes)
    for process in processes:
        process.join(timeout=60)
    assert outcomes.count("refused") == 7, outcomes
    assert [p.name for p in tmp_path.iterdir()] == ["lock"]            # no temporary, nothing aside


def test_check_lock_without_a_lock_or_with_ones_own_is_none(tmp_path):
    path = tmp_path / "lock"
    assert check_lock(path, held) is None
    take_lock(path, held)
    assert check_lock(path, held) is None


def test_a_file_system_without_hard_links_gets_a_whole_lock_too(tmp_path, monkeypatch):
    def no_links(*args, **kwargs):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(locks.os, "link", no_links)
    path = tmp_path / "lock"
    assert take_lock(path, held) is None
    assert read_lock(path)[0]["pid"] == os.getpid() and [p.name for p in tmp_path.iterdir()] == ["lock"]
    with pytest.raises(FileExistsError):
        locks._create(path, "{}")                           # a second creation still fails
    assert [p.name for p in tmp_path.iterdir()] == ["lock"]


def test_export_takes_over_a_garbage_lock_beside_its_target_and_says_so(tmp_path):
    run = tmp_path / "run"
    assert run_main(["train", "--out", run, *TINY_RUN])[0] == 0
    lock = tmp_path / ".exported.numpy-transformer.lock"
    lock.write_text('{"pid": -5}')
    status, _, err = run_main(["export", "--checkpoint", run, "--to", "torch", tmp_path / "exported"])
    assert status == 0, err
    assert f"note: took over the lock {lock}: it is not a lock of numpy-transformer" in err
    assert not lock.exists() and (tmp_path / "exported" / "model.safetensors").is_file()


def test_a_link_is_taken_over_and_a_folder_or_pipe_refused_untouched(tmp_path):
    target = tmp_path / "users-file"
    target.write_text('{"pid": 1, "host": "%s"}' % HOST)
    path = tmp_path / "lock"
    path.symlink_to(target)
    assert "symbolic link" in take_lock(path, held)
    assert not path.is_symlink() and target.read_text() == '{"pid": 1, "host": "%s"}' % HOST
    path.unlink()
    path.mkdir()
    with pytest.raises(locks.NotALockFile, match="is not a lock file"):
        take_lock(path, held)
    assert path.is_dir()
    path.rmdir()
    if not hasattr(os, "mkfifo"):
        return
    os.mkfifo(path)
    with pytest.raises(locks.NotALockFile, match="is not a lock file"):     # never blocks on the pipe
        take_lock(path, held)


def test_eight_simultaneous_trains_on_a_folder_with_an_empty_lock_have_one_winner(tmp_path):
    """Eight `train` commands started at once on one --out, whose lock a full disk left empty (an
    older version's): exactly one trains, the seven others are refused in one line each."""
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / LOCK).write_text("")
    command = [sys.executable, "-m", "numpy_transformer.cli", "train", "--out", str(folder), *TINY_RUN]
    environment = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    processes = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=environment) for _ in range(8)]
    results = [(process.wait(timeout=300), process.stderr.read()) for process in processes]
    for process in processes:
        process.stdout.close()
        process.stderr.close()
    assert sorted(status for status, _ in results) == [0] + [1] * 7, results
    for status, err in results:
        if status == 1:
            assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
            assert "in use by another run (process " in err or "already holds a trained model" in err, err
            assert "process None" not in err
    assert not (folder / LOCK).exists() and [p.name for p in folder.iterdir() if "lock" in p.name] == []


def test_the_temporaries_of_the_lock_and_of_its_takeover_guard_are_leftovers_and_nothing_else_is():
    from numpy_transformer.training.locks import GUARD, is_lock_leftover

    lock = ".numpy-transformer-run.lock"
    assert is_lock_leftover(f"{lock}.123-0a1b2c3d.new", lock)
    assert is_lock_leftover(f"{lock}{GUARD}", lock)
    assert is_lock_leftover(f"{lock}{GUARD}.123-0a1b2c3d.new", lock)     # a starter writing the guard
    for name in (lock, f"{lock}.new", f"{lock}{GUARD}.x", "notes.txt", f"{lock}.123-0a1b2c3d.new.txt"):
        assert not is_lock_leftover(name, lock), name
