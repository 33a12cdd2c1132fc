"""Files written atomically: a reader (or a crash) only ever sees the old file or the new one
whole, never half of it. Checkpoints, configurations, the metrics log's rewrite, figures and
metrics all go through `atomic_write`; the metrics log's lines through `append_line`.

Neither writes through a symbolic link: a link where a file would be written (the file itself,
or its temporary) is refused with a ValueError that names it, and what it points to is left
alone; a link could otherwise carry the write out of the folder, to any file of the user's.
"""
import errno
import os
from pathlib import Path

NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)        # POSIX; Windows has no such flag (and few links)


def atomic_write(path, write):
    """Write `path` through `write(binary_file)`: a temporary file in the same folder, fsync,
    os.replace (atomic on POSIX and Windows), then fsync of the folder."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.tmp")
    refuse_link(path)
    try:
        with os.fdopen(_open_no_follow(temporary, os.O_TRUNC), "wb") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except OSError as error:                    # name the file being written, not its temporary
        temporary.unlink(missing_ok=True)
        if error.errno is None:
            raise
        raise OSError(error.errno, error.strerror, str(path)) from error
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    fsync_directory(path.parent)


def atomic_write_text(path, text):
    atomic_write(path, lambda file: file.write(text.encode("utf-8")))


def append_line(path, line):
    """Append `line` and a newline to the file `path` (created if missing), never through a link."""
    with os.fdopen(_open_no_follow(Path(path), os.O_APPEND), "a", encoding="utf-8") as file:
        file.write(line + "\n")


def refuse_link(path):
    """A ValueError if `path` is a symbolic link, naming it and what it points to."""
    if Path(path).is_symlink():
        raise ValueError(f"{path} is a symbolic link (to {os.readlink(path)}): numpy-transformer never writes "
                         f"through a link; remove the link (what it points to is left alone)")


def _open_no_follow(path, mode):
    """A descriptor of `path` opened for writing (created if missing) with `mode` (O_TRUNC or
    O_APPEND); a link there is refused, also one planted between a check and the open."""
    refuse_link(path)
    try:
        return os.open(path, os.O_WRONLY | os.O_CREAT | mode | NO_FOLLOW, 0o644)
    except OSError as error:
        if error.errno == errno.ELOOP:
            refuse_link(path)
        raise


def fsync_directory(directory):
    """Make the rename itself durable (POSIX; Windows cannot open a folder, and needs nothing)."""
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)
