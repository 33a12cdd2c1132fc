"""Lock files that know their owner: which process writes to a run folder (or an output folder) now.

    {"pid": 4242, "host": "lab-3", "started": 81234567, "boot": "6f1c…"}

A lock records the process id, the host, the process's start time (in clock ticks since boot,
from /proc/PID/stat on Linux; None elsewhere) and the boot's id (/proc/sys/kernel/random/
boot_id): a process id reused by another program after the owner died, or after a reboot, is
seen as a different process.

Taking a lock is atomic and never leaves a half-written lock: the record is written whole into
a temporary file beside the lock, which is then hard-linked to the lock's name. A link, like
O_CREAT | O_EXCL, fails when the name exists, so of several processes starting at once exactly
one wins; and a full disk fails while the temporary is written, before any lock exists. (A file
system without hard links gets the record in one write to a file created with O_EXCL.)

A lock is taken over, with a one-line note saying why, when
- its process no longer runs on this host (killed with kill -9, or the machine restarted);
- its process id now belongs to another program (its start time differs);
- it holds no lock at all: empty, not JSON, a list, a process id that is not a positive integer,
  no host (left by an older version stopped while writing it, or by someone else).
A lock of a live process refuses the second command, naming the process; so does one of
another host, whose processes cannot be seen from here. A symbolic link in the lock's place is
taken over (the link is removed, what it points to is never read nor touched); a folder, a pipe
or a device there is refused in one line and left alone.

Taking over happens under a guard, `LOCK.takeover`, created as a lock is: its holder reads the
lock again and removes it only if it is still stale, so that of processes taking over one stale
lock at once exactly one wins (a rename aside and back could put back a lock over one a third
process had just taken).
"""
import errno
import json
import os
import re
import secrets
import socket
import stat
import time
from pathlib import Path

from numpy_transformer.bounded_json import parse_json

MAX_LOCK_BYTES = 4096           # a lock is a line of JSON; more is not a lock
GUARD, ATTEMPTS = ".takeover", 200                # the guard of a takeover; tries to take a lock
NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)
NO_HARD_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EXDEV}


class LockHeld(ValueError):
    """A lock held by a live process (or one on another host); the message says whose."""


class NotALockFile(ValueError):
    """A folder, a pipe or a device where a lock file should be: never read nor removed."""


def own_record():
    """This process's lock record."""
    return {"pid": os.getpid(), "host": socket.gethostname(), "started": process_start(os.getpid()),
            "boot": boot_id()}


def take_lock(path, in_use_message, error=LockHeld):
    """Create the lock file `path` holding this process's record (the module docstring says how).
    A live holder raises `error(in_use_message(holder))`; a stale or damaged lock is taken over.
    Returns the one-line note on a lock taken over, or None."""
    path = Path(path)
    record = json.dumps(own_record())
    note = None
    for _ in range(ATTEMPTS):
        try:
            _create(path, record)
        except FileExistsError:
            note = check_lock(path, in_use_message, error) or note
            remove_stale_lock(path)
            continue
        return note
    raise error(f"could not take the lock {path}: other processes keep replacing it; try again")


def check_lock(path, in_use_message, error=LockHeld):
    """Raise `error(in_use_message(holder))` if a live process (or one on another host) holds the
    lock `path`; else the note on taking it over (None without a lock, or for this process's own)."""
    path = Path(path)
    holder, problem = read_lock(path)
    if holder is None and problem is None:
        return None                                     # no lock
    if problem is not None:
        return f"note: took over the lock {path}: {problem}"
    if holder["pid"] == os.getpid() and holder["host"] == socket.gethostname():
        return None                                     # this process's own, left by a Run not closed
    why_dead = stale_reason(holder)
    if why_dead is None:
        raise error(in_use_message(holder))
    return f"note: took over the lock of process {holder['pid']}, which {why_dead}"


def release_lock(path):
    """Remove the lock file `path`, if it is still this process's."""
    holder, _ = read_lock(path)
    if holder is not None and holder["pid"] == os.getpid() and holder["host"] == socket.gethostname():
        Path(path).unlink(missing_ok=True)


def remove_stale_lock(path):
    """Remove the lock `path` if it is still stale (or not a lock), holding the takeover guard
    `PATH.takeover` meanwhile (created as a lock is): of processes taking over one stale lock at
    once, one removes it and the others find the guard taken, or the lock gone or live again, and
    try again. A guard whose process is gone (killed while it held it) is removed."""
    path = Path(path)
    guard = path.with_name(f"{path.name}{GUARD}")
    try:
        _create(guard, json.dumps(own_record()))
    except FileExistsError:
        holder, _ = read_lock(guard)
        if holder is None or (holder["pid"] != os.getpid() and stale_reason(holder) is not None):
            guard.unlink(missing_ok=True)
        else:
            time.sleep(0.01)                            # another process is taking it over
        return
    try:
        holder, problem = read_lock(path)
        if problem is not None or (holder is not None and (holder["pid"] == os.getpid()
                                                           or stale_reason(holder) is not None)):
            path.unlink(missing_ok=True)
    finally:
        guard.unlink(missing_ok=True)


def read_lock(path):
    """(record, None) for a lock, (None, why it is not a lock) for a file that is not one, and
    (None, None) when there is no file."""
    try:
        if Path(path).is_symlink():
            return None, "it is a symbolic link, not a lock file"
        descriptor = os.open(path, os.O_RDONLY | NO_FOLLOW | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None, None
    except OSError as error:
        return None, f"it cannot be read ({error.strerror or error})"
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise NotALockFile(f"{path} is not a lock file (a folder, a pipe or a device): numpy-transformer "
                               f"neither reads nor removes it; remove it yourself, then try again")
        with os.fdopen(descriptor, "rb", closefd=False) as file:
            data = file.read(MAX_LOCK_BYTES + 1)
    except OSError as error:
        return None, f"it cannot be read ({error.strerror or error})"
    finally:
        os.close(descriptor)
    if not data.strip():
        return None, "it is empty (a command stopped while writing it, or a full disk)"
    if len(data) > MAX_LOCK_BYTES:
        return None, f"it holds more than {MAX_LOCK_BYTES} bytes, which no lock does"
    try:
        record = parse_json(data, path)
    except ValueError:
        return None, f"it is not a lock of numpy-transformer (not JSON: {data[:40]!r})"
    pid = record.get("pid") if isinstance(record, dict) else None
    if not isinstance(record, dict):
        return None, f"it is not a lock of numpy-transformer (a JSON {type(record).__name__}, not an object)"
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return None, f"it is not a lock of numpy-transformer (its process id is {pid!r}, not a positive integer)"
    if not isinstance(record.get("host"), str) or not record["host"]:
        return None, "it is not a lock of numpy-transformer (it names no host)"
    return record, None


def stale_reason(holder):
    """Why the process of the lock record `holder` no longer holds it ("no longer runs", …), or
    None when it may still: it runs, or runs on another host, which cannot be seen from here."""
    if holder["host"] != socket.gethostname():
        return None
    pid = holder["pid"]
    boot = boot_id()
    if isinstance(holder.get("boot"), str) and boot is not None and holder["boot"] != boot:
        return "ran before this machine restarted"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "no longer runs"
    except PermissionError:
        pass                                            # runs, as another user
    except (OverflowError, OSError):
        return "no longer runs"
    started = holder.get("started")
    if isinstance(started, int) and not isinstance(started, bool):
        now = process_start(pid)
        if now is not None and now != started:
            return "no longer runs (its process id now belongs to another program)"
    return None


def process_start(pid):
    """When process `pid` started, in clock ticks since boot (field 22 of /proc/PID/stat), or
    None where the system does not say."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
        return int(text[text.rindex(")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def boot_id():
    """This boot's id (Linux), or None."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip() or None
    except (OSError, ValueError):
        return None


LEFTOVER = re.compile(r"\.(\d+)-[0-9a-f]{8}\.new")


def is_lock_leftover(name, lock_name):
    """Whether `name` is a temporary of the lock `lock_name` (`take_lock`), its takeover guard,
    or a temporary of the guard."""
    suffix = name[len(lock_name):] if name.startswith(lock_name) else ""
    return suffix == GUARD or LEFTOVER.fullmatch(suffix.removeprefix(GUARD)) is not None


def remove_lock_leftovers(folder, lock_name):
    """Remove the lock's temporaries in `folder` whose process no longer runs (a kill -9 between
    writing the temporary and removing it)."""
    for entry in Path(folder).iterdir():
        found = LEFTOVER.fullmatch(entry.name[len(lock_name):].removeprefix(GUARD)) \
            if entry.name.startswith(lock_name) else None
        if found and entry.is_file() and not entry.is_symlink():
            pid = int(found[1])
            if pid != os.getpid() and stale_reason({"pid": pid, "host": socket.gethostname()}) is not None:
                entry.unlink(missing_ok=True)


def _create(path, record):
    """Create `path` holding `record`, or FileExistsError: the record written whole into a
    temporary beside it, then hard-linked into place (a full disk fails before the lock exists)."""
    temporary = path.with_name(f"{path.name}.{os.getpid()}-{secrets.token_hex(4)}.new")
    descriptor = os.open(temporary, os.O_CREAT | os.O_EXCL | os.O_WRONLY | NO_FOLLOW, 0o644)
    try:
        try:
            _write_all(descriptor, record.encode("utf-8"))
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        try:
            os.link(temporary, path)
        except FileExistsError:
            raise
        except OSError as error:
            if error.errno not in NO_HARD_LINKS:
                raise
            _create_without_links(path, record)
    finally:
        temporary.unlink(missing_ok=True)


def _create_without_links(path, record):
    descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | NO_FOLLOW, 0o644)
    try:
        _write_all(descriptor, record.encode("utf-8"))
    except BaseException:
        os.close(descriptor)
        path.unlink(missing_ok=True)
        raise
    os.close(descriptor)


def _write_all(descriptor, data):
    while data:
        data = data[os.write(descriptor, data):]
