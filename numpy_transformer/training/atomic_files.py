"""Files written atomically: a reader (or a crash) only ever sees the old file or the new one
whole, never half of it. Checkpoints, configurations, the metrics log's rewrite, figures and
metrics all go through `atomic_write`."""
import os
from pathlib import Path


def atomic_write(path, write):
    """Write `path` through `write(binary_file)`: a temporary file in the same folder, fsync,
    os.replace (atomic on POSIX and Windows), then fsync of the folder."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.tmp")
    try:
        with open(temporary, "wb") as file:
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
    _fsync_directory(path.parent)


def atomic_write_text(path, text):
    atomic_write(path, lambda file: file.write(text.encode("utf-8")))


def _fsync_directory(directory):
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
