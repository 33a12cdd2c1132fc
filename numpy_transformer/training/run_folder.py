"""A run's folder: which files in it the project wrote, and which process writes to it now.

    DIR/.numpy-transformer-run.json    the manifest: the names of the files a run writes there
    DIR/.numpy-transformer-run.lock    while a run writes there: its process id and host

A new run goes only into a folder that is empty, missing, or made by an earlier run (it has a
manifest); `--overwrite` then removes the files the manifest names, never anything else, and
never a folder. In a folder of the user's own files a run is refused, and with `--overwrite`
it writes beside them only when none has a name the run would write.

No file of the run is written through a symbolic link: a link in the folder where the run
would write (left there, or planted) is refused, and the file it points to is left alone.

The lock file is created with O_CREAT | O_EXCL, which the file system makes atomic: of two runs
started on one folder, exactly one creates it, and the other is refused with the holder's
process id. A lock left by a process that no longer runs on this host (killed with kill -9)
is stale: it is taken over, and the run says so. Taking it over moves it aside by a rename and
checks what was moved, so that two runs taking over one stale lock at once cannot both win.
"""
import json
import os
import socket
import time
from pathlib import Path

from numpy_transformer.training.atomic_files import atomic_write_text
from numpy_transformer.bounded_json import read_json

MANIFEST, LOCK = ".numpy-transformer-run.json", ".numpy-transformer-run.lock"


class RunFolderError(ValueError):
    """A folder a run must not write to, or another run writes to now."""


class RunFolder:
    """The folder of one run, claimed by this process (`claim`) until `release`."""

    def __init__(self, directory, names):
        """directory: the run's folder; names: the files a run writes there."""
        self.directory, self.names = _checked_directory(directory), sorted(names)
        self.created = False                    # whether `claim` made the folder
        self.stale_lock_taken = None            # the process id of a dead holder whose lock was taken over

    def claim(self, new=False, overwrite=False):
        """Lock the folder for this process and write the manifest. new: a new run, which needs
        a folder it may fill (`check_new`), made here if missing; the files of an earlier run
        (which `check_new` allows only with `overwrite` once it holds a checkpoint) are removed."""
        if new:
            self.check_new(overwrite)
            self.created = not self.directory.exists()
            self.directory.mkdir(parents=True, exist_ok=True)
        elif not self.directory.is_dir():
            raise RunFolderError(f"{self.directory} does not exist")
        else:
            self.check_no_links()
            self._check_no_unlisted_files()
        self._lock()
        if new:
            self._remove_written()
        atomic_write_text(self.directory / MANIFEST,
                          json.dumps({"written_by": "numpy-transformer", "files": self.names}, indent=2) + "\n")
        return self

    def release(self):
        """Remove the lock, if it is still this process's."""
        release_lock(self.directory / LOCK)

    def discard(self):
        """Undo a new run that saved nothing: remove its files, the manifest and the lock, and
        the folder itself if `claim` made it and nothing else is in it."""
        self._remove_written()
        (self.directory / MANIFEST).unlink(missing_ok=True)
        self.release()
        if self.created and not any(self.directory.iterdir()):
            self.directory.rmdir()

    def check_new(self, overwrite=False):
        """A RunFolderError unless a new run may write here (the module docstring says when)."""
        if not self.directory.exists():
            return
        if not os.access(self.directory, os.W_OK):
            raise RunFolderError(f"cannot write in {self.directory} (a read-only file system, or no permission): "
                                 f"choose a folder you can write to with --out")
        self._check_not_in_use()
        self.check_no_links()
        present = sorted(p.name for p in self.directory.iterdir() if p.name != LOCK)
        written = set(_read_manifest(self.directory))
        foreign = [name for name in present if name not in written and name != MANIFEST]
        if (self.directory / MANIFEST).exists() and "checkpoint.npz" in present and not overwrite:
            raise RunFolderError(f"{self.directory} already holds a trained model: to train another model, give a new "
                                 f"folder with --out NEW; to continue this one, --resume; to replace it, --overwrite")
        clashes = [name for name in foreign if name in self.names]
        if clashes:
            raise RunFolderError(f"{self.directory} holds {', '.join(clashes)}, which a run would replace and no manifest "
                                 f"of numpy-transformer lists ({MANIFEST}; a run of an older version writes none): "
                                 f"move them, or choose another folder with --out")
        if foreign and not overwrite:
            shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
            raise RunFolderError(f"{self.directory} is not empty ({shown}) and no run made it: choose another folder "
                                 f"with --out, or pass --overwrite to write the run beside those files")

    def _lock(self):
        self.stale_lock_taken = take_lock(self.directory / LOCK, self._in_use_message)

    def _check_not_in_use(self):
        """A RunFolderError if a live process holds the lock; else the stale holder's pid (or None)."""
        return check_lock(self.directory / LOCK, self._in_use_message)

    def _in_use_message(self, holder):
        return (f"{self.directory} is in use by another run (process {holder.get('pid')} on {holder.get('host')}): "
                f"wait for it to end, or choose another folder with --out")

    def check_no_links(self):
        """A RunFolderError if a file the run writes is a symbolic link: nothing is written through one."""
        links = [name for name in [*self.names, MANIFEST] if (self.directory / name).is_symlink()]
        if links:
            raise RunFolderError(f"{self.directory / links[0]} is a symbolic link: a run never writes through a "
                                 f"link; remove it (the file it points to is left alone), or choose another "
                                 f"folder with --out")

    def _check_no_unlisted_files(self):
        """A RunFolderError if a run resumed here would replace a file its manifest does not list
        (one a newer version writes, such as checkpoint_best.npz, put there by the user). A folder
        without a manifest (numpy-transformer 0.1) is not checked."""
        if not (self.directory / MANIFEST).is_file():
            return
        written = set(_read_manifest(self.directory))
        unlisted = [name for name in self.names if name not in written and (self.directory / name).exists()]
        if unlisted:
            raise RunFolderError(f"{self.directory / unlisted[0]} is not a file of this run ({MANIFEST} does not list "
                                 f"it), and the resumed run would replace it: move it, then resume")

    def _remove_written(self):
        """Remove the files an earlier run wrote (the manifest's names): regular files only."""
        for name in _read_manifest(self.directory):
            path = self.directory / name
            if path.is_file() and not path.is_symlink():
                path.unlink()

def take_lock(path, in_use_message):
    """Create the lock file `path` (O_CREAT | O_EXCL: of two processes, one creates it) holding
    this process's id and host. A live holder is a RunFolderError, `in_use_message(holder)`; a
    dead one's lock is taken over. Returns the dead holder's process id, or None."""
    record = json.dumps({"pid": os.getpid(), "host": socket.gethostname()})
    stale = None
    for _ in range(3):
        try:
            descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o644)
        except FileExistsError:
            stale = check_lock(path, in_use_message)
            remove_stale_lock(path)
            continue
        with os.fdopen(descriptor, "w") as file:
            file.write(record)
        return stale
    raise RunFolderError(f"could not take the lock {path}")


def check_lock(path, in_use_message):
    """A RunFolderError if a live process holds the lock `path`; else the stale holder's pid (or None)."""
    if not path.exists():
        return None
    holder = _read_lock(path)
    if _is_alive(holder, path):
        raise RunFolderError(in_use_message(holder))
    return None if holder.get("pid") == os.getpid() else holder.get("pid")


def release_lock(path):
    """Remove the lock file `path`, if it is still this process's."""
    if _read_lock(path).get("pid") == os.getpid():
        path.unlink(missing_ok=True)


def remove_stale_lock(path):
    """Move the stale lock aside (a rename: of two runs taking it over at once, one moves it)
    and delete it, unless it is no longer the stale one: then another run has just taken the
    folder, and its lock goes back in place for the next attempt to find."""
    aside = path.with_name(f"{path.name}.{os.getpid()}")
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return                                # another run moved it first
    if _is_alive(_read_lock(aside), aside):
        os.rename(aside, path)
    else:
        aside.unlink(missing_ok=True)


def _checked_directory(directory):
    if str(directory) == "":
        raise RunFolderError("the run folder is an empty path: write --out . for the current folder")
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise RunFolderError(f"{directory} is a file, not a folder: choose a folder with --out")
    return directory


def _read_manifest(directory):
    """The file names the manifest of `directory` lists ([] without a readable manifest)."""
    try:
        record = read_json(Path(directory) / MANIFEST)
    except (OSError, ValueError):
        return []
    files = record.get("files") if isinstance(record, dict) else None
    return [name for name in files if isinstance(name, str) and "/" not in name] if isinstance(files, list) else []


def _read_lock(path):
    try:
        record = read_json(path)
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _is_alive(holder, path):
    """Whether the process that wrote a lock still runs. A lock from another host counts as
    alive, and so does one that cannot be read yet (being written) unless it is a minute old."""
    pid = holder.get("pid")
    if not isinstance(pid, int):
        return _age_in_seconds(path) < 60
    if holder.get("host") != socket.gethostname():
        return True
    if pid == os.getpid():
        return False                    # this process's own lock, left by a Run object not closed
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _age_in_seconds(path):
    try:
        return time.time() - Path(path).stat().st_mtime
    except OSError:
        return 0.0
