"""Reading an .npz archive from elsewhere within the sizes it declares.

An .npz file is a ZIP archive of .npy members. `np.load` trusts it: a member's .npy header may
declare any shape, and a ZIP entry may unpack to gigabytes, all allocated before anything can
refuse them. Like safetensors, which reads its header and checks every tensor's offsets before
it reads a byte of data, `read_npz` reads each member's .npy header first
(`numpy.lib.format.read_array_header_1_0` / `_2_0`, itself bounded) and checks, before the data:

    the dtype holds no Python objects               (np.load's allow_pickle=False)
    check(key, shape, dtype) accepts them           (the caller's expected shapes and sizes)
    header + prod(shape) · itemsize == the ZIP entry's uncompressed size

and then reads exactly that many bytes: `zipfile` never unpacks past the entry's declared size,
so no member takes more memory than its header declares and its caller accepted. Any problem is
a ValueError naming the archive, the member and the reason.

    arrays = read_npz("checkpoint.npz", check)      # {key: array}, as dict(np.load(path))
"""
import math
import zipfile

import numpy as np

NPY_HEADERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}


def read_npz(path, check):
    """{key: array} of the .npz archive at `path` (key: the member's name without ".npy").

    check(key, shape, dtype): raises an exception when the member `key` must not be read (one
    that is not a ValueError passes through unchanged); called before any of its data is.
    Members are read one at a time, in archive order."""
    arrays = {}
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            key = info.filename.removesuffix(".npy")
            try:
                if info.filename == key or key in arrays:
                    raise ValueError("not an .npy member" if info.filename == key else "appears twice")
                arrays[key] = _read_member(archive, info, key, check)
            except ValueError as error:
                raise ValueError(f"{path}: member {info.filename!r}: {error}") from None
    return arrays


def _read_member(archive, info, key, check):
    with archive.open(info) as stream:
        version = np.lib.format.read_magic(stream)
        if version not in NPY_HEADERS:
            raise ValueError(f".npy format version {version[0]}.{version[1]}, which this reader does not take")
        shape, fortran_order, dtype = NPY_HEADERS[version](stream)
        if dtype.hasobject:
            raise ValueError("it holds Python objects, which are never loaded (they could run code)")
        check(key, shape, dtype)
        size = math.prod(shape) * dtype.itemsize
        if stream.tell() + size != info.file_size:
            raise ValueError(f"its header declares {size:,} bytes of data ({dtype} {shape}) but the archive says "
                             f"it unpacks to {info.file_size - stream.tell():,}")
        data = stream.read(size)
        if len(data) != size:
            raise ValueError(f"it ends after {len(data):,} of its {size:,} bytes")
    array = np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran_order else "C")
    return array.copy()
