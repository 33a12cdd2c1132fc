"""A run's folder: which files in it the project wrote, and which process writes to it now.

    DIR/.numpy-transformer-run.json    the manifest: the names of the files a run writes there, the
                                       run's id and the SHA-256 of its parts
    DIR/.numpy-transformer-run.lock    while a run writes there: its process id, host and start time

A new run goes only into a folder that is empty, missing, or made by an earlier run (it has a
manifest); `--overwrite` then removes the files the manifest names, never anything else, and
never a folder. In a folder of the user's own files a run is refused, and with `--overwrite`
it writes beside them only when none has a name the run would write.

The manifest of a run begun by this version also records the run's id and the SHA-256 of its
parts that never change while it trains (the tokenizers, model.json, data.json, and the weights'
names and shapes); both checkpoints record the run id. Every command that loads the folder
checks them (`checkpoint.load_checkpoint`): a tokenizer or a checkpoint taken from another run
is refused, naming the file. A folder holding an export or a Hugging Face model (its manifest,
model.safetensors or pytorch_model.bin) is refused, with or without `--overwrite`: a run beside
it would leave two models in one folder.

No file of the run is written through a symbolic link: a link in the folder where the run
would write (left there, or planted) is refused, and the file it points to is left alone.

The lock (`locks.py`) records the process id, host and start time of its run and is put in
place whole by one atomic link: of runs started on one folder at once, exactly one takes it,
and the others are refused with the holder's process id. A lock whose process no longer runs
(killed with kill -9, or its process id now another program's), or that holds no lock at all
(empty, not JSON, a bad process id), is taken over, and the run says so in one line.

A run killed before its first checkpoint leaves a folder with a manifest and no checkpoint:
the same `train` command starts it again there (its files, and the temporaries of the files it
was writing, `.NAME.tmp`, are removed first).
"""
import json
import os
import uuid
from pathlib import Path

from numpy_transformer.training.atomic_files import atomic_write_text
from numpy_transformer.bounded_json import read_json
from numpy_transformer.training.locks import check_lock as _check_lock, is_lock_leftover, release_lock, \
    remove_lock_leftovers, take_lock as _take_lock

MANIFEST, LOCK = ".numpy-transformer-run.json", ".numpy-transformer-run.lock"
# the files of a model that is not a run: `export`'s manifest, and a Hugging Face model's weights
MODEL_FILES = {".numpy-transformer-output.json", "model.safetensors", "pytorch_model.bin"}
MAX_MANIFEST_BYTES = 1 << 20


class RunFolderError(ValueError):
    """A folder a run must not write to, or another run writes to now."""


class RunFolder:
    """The folder of one run, claimed by this process (`claim`) until `release`."""

    def __init__(self, directory, names):
        """directory: the run's folder; names: the files a run writes there."""
        self.directory, self.names = _checked_directory(directory), sorted(names)
        self.created = False                    # whether `claim` made the folder
        self.lock_note = None                   # the note on a stale or damaged lock taken over, or None
        self.run_id = None                      # the manifest's run id (None: a run of an older version)

    def claim(self, new=False, overwrite=False, parts=None):
        """Lock the folder for this process and write the manifest. new: a new run, which needs
        a folder it may fill (`check_new`), made here if missing; the files of an earlier run
        (which `check_new` allows only with `overwrite` once it holds a checkpoint) are removed.
        parts: a new run's fingerprints ({file name or "weights": SHA-256}, `checkpoint.run_parts`),
        recorded with a new run id; a resumed run keeps those its manifest holds."""
        if new:
            self.check_new(overwrite)
            self.created = not self.directory.exists()
            self.directory.mkdir(parents=True, exist_ok=True)
        elif not self.directory.is_dir():
            raise RunFolderError(f"{self.directory} does not exist")
        else:
            self.check_no_links()
            self._check_no_unlisted_files()
        try:
            self._lock()
        except BaseException:
            self._remove_if_made()
            raise
        try:
            if new:
                self._remove_written()
                record = {"run": uuid.uuid4().hex, "parts": parts} if parts is not None else {}
            else:
                record = {key: value for key, value in read_manifest_record(self.directory).items()
                          if key in ("run", "parts")}
            self.run_id = record.get("run")
            atomic_write_text(self.directory / MANIFEST, json.dumps(
                {"written_by": "numpy-transformer", "files": self.names, **record}, indent=2) + "\n")
        except BaseException:
            self.release()
            self._remove_if_made()
            raise
        return self

    def _remove_if_made(self):
        """Remove the folder if `claim` made it and nothing is in it."""
        if self.created and self.directory.is_dir() and not any(self.directory.iterdir()):
            self.directory.rmdir()

    def release(self):
        """Remove the lock, if it is still this process's."""
        release_lock(self.directory / LOCK)

    def discard(self):
        """Undo a new run that saved nothing: remove its files, the manifest and the lock, and
        the folder itself if `claim` made it and nothing else is in it."""
        self._remove_written()
        (self.directory / MANIFEST).unlink(missing_ok=True)
        self.release()
        self._remove_if_made()

    def check_new(self, overwrite=False):
        """A RunFolderError unless a new run may write here (the module docstring says when)."""
        if not self.directory.exists():
            return
        if not os.access(self.directory, os.W_OK):
            raise RunFolderError(f"cannot write in {self.directory} (a read-only file system, or no permission): "
                                 f"choose a folder you can write to with --out")
        self._check_not_in_use()
        self.check_no_links()
        written = set(_read_manifest(self.directory))
        present = sorted(p.name for p in self.directory.iterdir() if not self._is_own_leftover(p.name, written))
        foreign = [name for name in present if name not in written and name != MANIFEST]
        model_files = sorted(set(present) & MODEL_FILES)
        if model_files:
            raise RunFolderError(f"{self.directory} holds {', '.join(model_files)}: an export or a Hugging Face "
                                 f"model is there, and a run beside it would leave two models in one folder (each "
                                 f"command reading one of them); choose another folder with --out")
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
        self.lock_note = take_lock(self.directory / LOCK, self._in_use_message)

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

    def _is_own_leftover(self, name, written):
        """Whether `name` is the lock, one of its temporaries, or the temporary of a file a run
        writes here (`.checkpoint.npz.tmp`, left by a run killed while writing it)."""
        own = {*self.names, *written, MANIFEST}
        return name == LOCK or is_lock_leftover(name, LOCK) or \
            (name.startswith(".") and name.endswith(".tmp") and name[1:-4] in own)

    def _remove_written(self):
        """Remove the files an earlier run wrote (the manifest's names) and the temporaries a run
        killed while writing left (`.NAME.tmp`): regular files only."""
        written = _read_manifest(self.directory)
        for name in [*written, *(f".{name}.tmp" for name in {*self.names, *written, MANIFEST})]:
            path = self.directory / name
            if path.is_file() and not path.is_symlink():
                path.unlink()
        remove_lock_leftovers(self.directory, LOCK)

def _checked_directory(directory):
    if str(directory) == "":
        raise RunFolderError("the run folder is an empty path: write --out . for the current folder")
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise RunFolderError(f"{directory} is a file, not a folder: choose a folder with --out")
    return directory


def read_manifest_record(directory):
    """The manifest of `directory` as a dict ({} without a readable one, or one of more than
    MAX_MANIFEST_BYTES)."""
    try:
        record = read_json(Path(directory) / MANIFEST, max_bytes=MAX_MANIFEST_BYTES)
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _read_manifest(directory):
    """The file names the manifest of `directory` lists ([] without a readable manifest)."""
    files = read_manifest_record(directory).get("files")
    return [name for name in files if isinstance(name, str) and "/" not in name] if isinstance(files, list) else []


def take_lock(path, in_use_message):
    """`locks.take_lock`, a live holder a RunFolderError."""
    return _take_lock(path, in_use_message, RunFolderError)


def check_lock(path, in_use_message):
    """`locks.check_lock`, a live holder a RunFolderError."""
    return _check_lock(path, in_use_message, RunFolderError)
