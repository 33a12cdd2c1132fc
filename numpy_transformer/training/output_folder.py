"""A folder a command writes as a whole (`export`, `attention --out`): old or new, never a mix.

    with OutputFolder("exported", "export") as staging:
        save files into staging                       # a fresh folder beside "exported"
    # on leaving the block: the manifest, then one rename puts the folder in place

Every file goes into a fresh, uniquely named folder beside the target (`.NAME.partial-…`), and
that folder is renamed onto the target in one step. A crash, or a failed write, leaves the
target as it was; two commands writing one target never share a temporary name. The folder's
manifest, `.numpy-transformer-output.json`, names the command and the SHA-256 of every file,
so that a reader can check that the files belong together (`check_whole`).

The target gets a run folder's rules (`run_folder.py`):

- the empty path is refused (write . for the current folder), and so are a file and a link;
- a run folder, or a folder inside one, is refused: it would shadow the run;
- only a missing or empty folder, or this command's own earlier output (a manifest of the same
  command listing every file in it), is replaced; a folder holding other files is refused and
  left alone;
- a lock beside the target, `.NAME.numpy-transformer.lock`, taken as a run's (`locks.py`: it
  records the process id, host and start time), refuses a second command on the same target
  while the first writes; a lock whose process is gone, or that holds no lock, is taken over
  with a note on standard error.

An earlier output is replaced by two renames: it moves aside (`.NAME.replaced-…`), the new one
moves in, then the files the old one's manifest lists are removed (a file put there meanwhile
stays). Only between the two renames is the target missing; a crash there leaves the earlier
output whole under its aside name, which the next command on the target removes with any other
leftover of its own.
"""
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

from numpy_transformer.training.atomic_files import atomic_write_text, fsync_directory
from numpy_transformer.bounded_json import read_json
from numpy_transformer.training.checkpoint import ARCHIVE, check_digests, file_sha256
from numpy_transformer.training.locks import remove_lock_leftovers
from numpy_transformer.training.run_folder import MANIFEST as RUN_MANIFEST, RunFolderError, check_lock, release_lock, \
    take_lock

OUTPUT_MANIFEST = ".numpy-transformer-output.json"
LEFTOVERS = ("partial", "replaced")             # its own folders a crash can leave beside the target


class OutputFolder:
    """The target folder of one command, written as a whole (the module docstring)."""

    def __init__(self, target, command):
        """target: the folder to write; command: what writes it ("export", "attention"), recorded
        in the manifest: a command replaces only its own earlier output."""
        if str(target) == "":
            raise RunFolderError("the output folder is an empty path: write . for the current folder")
        self.target, self.command = Path(os.path.abspath(target)), command
        self.shown = Path(target)
        self.lock = self.target.with_name(f".{self.target.name}.numpy-transformer.lock")
        self.staging = None

    def __enter__(self):
        self.check()
        self.target.parent.mkdir(parents=True, exist_ok=True)
        note = take_lock(self.lock, self._in_use_message)
        try:
            if note is not None:
                print(note, file=sys.stderr)
            self.check()                                         # again, now that no other command writes
            self._remove_leftovers()
            remove_lock_leftovers(self.target.parent, self.lock.name)
            self.staging = Path(tempfile.mkdtemp(prefix=f".{self.target.name}.partial-", dir=self.target.parent))
        except BaseException:
            release_lock(self.lock)
            raise
        return self.staging

    def __exit__(self, exception_type, *_):
        try:
            if exception_type is None:
                self._write_manifest()
                self._move_into_place()
        finally:
            if self.staging.exists():
                shutil.rmtree(self.staging)
            release_lock(self.lock)

    def check(self):
        """A RunFolderError unless this command may replace the target (the module docstring)."""
        target, shown = self.target, self.shown
        if target.is_symlink():
            raise RunFolderError(f"{shown} is a symbolic link: numpy-transformer never writes through a link; "
                                 f"choose a folder")
        if target.exists() and not target.is_dir():
            raise RunFolderError(f"{shown} is a file, not a folder: choose a folder to write into")
        run = next((folder for folder in [target, *target.parents] if _is_run_folder(folder)), None)
        if run is not None:
            raise RunFolderError(f"{shown} {'is' if run == target else 'is inside'} the run folder {run}: writing "
                                 f"there would shadow the run (its loaders would read these files); choose a folder "
                                 f"outside it")
        check_lock(self.lock, self._in_use_message)
        if target.is_dir():
            foreign = self._foreign_files()
            if foreign:
                shown_names = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
                raise RunFolderError(f"{shown} holds files that {self.command} did not write ({shown_names}): it "
                                     f"replaces only an empty folder or its own earlier output; move them, or choose "
                                     f"another folder")

    def _foreign_files(self):
        """The entries of the target its own manifest does not list (all of them without one)."""
        present = sorted(entry.name for entry in self.target.iterdir())
        record = read_manifest(self.target)
        if record.get("command") != self.command:
            return present
        written = set(record["files"]) | {OUTPUT_MANIFEST}
        return [name for name in present if name not in written or not _is_plain_file(self.target / name)]

    def _in_use_message(self, holder):
        return (f"{self.shown} is being written by another numpy-transformer command (process {holder.get('pid')} "
                f"on {holder.get('host')}): wait for it to end, or choose another folder")

    def _write_manifest(self):
        files = {entry.name: file_sha256(entry) for entry in sorted(self.staging.iterdir())}
        atomic_write_text(self.staging / OUTPUT_MANIFEST, json.dumps(
            {"written_by": "numpy-transformer", "command": self.command, "files": files}, indent=2) + "\n")

    def _move_into_place(self):
        if self.target.is_dir() and any(self.target.iterdir()):
            aside = Path(tempfile.mkdtemp(prefix=f".{self.target.name}.replaced-", dir=self.target.parent))
            os.replace(self.target, aside)                       # onto the empty folder just made
            os.rename(self.staging, self.target)
            _remove_own_files(aside)
        else:
            os.replace(self.staging, self.target)                # a missing or empty target
        fsync_directory(self.target.parent)

    def _remove_leftovers(self):
        """Remove what a crashed command on this target left beside it: its own folders only,
        named as `tempfile.mkdtemp` names them (eight letters, digits or _ after the prefix)."""
        leftover = re.compile(rf"\.{re.escape(self.target.name)}\.({'|'.join(LEFTOVERS)})-[a-z0-9_]{{8}}")
        for folder in self.target.parent.iterdir():
            found = leftover.fullmatch(folder.name)
            if not found or not folder.is_dir() or folder.is_symlink():
                continue
            if found[1] == "partial":                            # only the crashed command wrote there
                shutil.rmtree(folder)
            else:
                _remove_own_files(folder)


def read_manifest(folder):
    """The output manifest of `folder` as a dict ({} without a readable one)."""
    try:
        record = read_json(Path(folder) / OUTPUT_MANIFEST)
    except (OSError, ValueError):
        return {}
    files = record.get("files") if isinstance(record, dict) else None
    valid = isinstance(files, dict) and all("/" not in name and isinstance(digest, str) for name, digest in files.items())
    return record if valid else {}


def check_whole(folder, command):
    """A ValueError unless every file the manifest of `folder` lists is there with its recorded
    SHA-256 (the files of one output, not a mix). A folder without a manifest of `command` (not
    written by it: a Hugging Face download, an older export) is not checked."""
    folder = Path(folder)
    record = read_manifest(folder)
    if record.get("command") != command:
        return
    check_digests(folder, record["files"], ValueError,
                  lambda path, name: f"{path} is missing, though {folder / OUTPUT_MANIFEST} lists it: the folder is "
                                     f"incomplete; {command} it again",
                  lambda path, name: f"{path} does not belong with the other files of {folder}: its SHA-256 differs "
                                     f"from the one {OUTPUT_MANIFEST} records (changed, or copied from another "
                                     f"{command}); {command} it again")


def _remove_own_files(folder):
    """Remove an earlier output moved aside: the files its manifest lists, the manifest, and the
    folder once empty; a file someone put there meanwhile stays, and so does the folder."""
    for name in read_manifest(folder).get("files", {}):
        if _is_plain_file(folder / name):
            (folder / name).unlink()
    (folder / OUTPUT_MANIFEST).unlink(missing_ok=True)
    if not any(folder.iterdir()):
        folder.rmdir()


def _is_plain_file(path):
    return path.is_file() and not path.is_symlink()


def _is_run_folder(folder):
    return (folder / RUN_MANIFEST).is_file() or (folder / ARCHIVE).is_file()

