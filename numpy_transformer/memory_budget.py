"""What fits in this machine's memory: commands estimate the largest arrays a run will hold and
refuse, in one line, what cannot fit in the memory available now, before they allocate it (as
`train` always did): the line says what it would need, what is free, and what to lower.

What is free is the machine's available memory, or less where the process's control group or a
group above it has a memory limit (`docker run --memory 4g`, Slurm's `--mem`, a systemd unit's
`MemoryMax`; `numpy_transformer.control_groups` finds them): /proc/meminfo speaks for the whole
machine, and a process that allocates past its group's limit is killed by the kernel without a
word.

    machine_memory()                                   # bytes of physical memory, or None
    memory_limit()                                     # a container's, job's or service's limit, or None
    available_memory()                                 # bytes available now (MemAvailable), or None
    model_memory(config)                               # a model, its gradients and Adam's moments
    decoding_memory(config, rows, source_length, output_length)      # a greedy or beam search run
    check_decoding_fits(config, src_ids, limits, beam_size)          # … refused before it starts
"""
import os

import numpy as np

from numpy_transformer import control_groups
from numpy_transformer.parameter_count import analytic_parameter_count

# the Python objects of one parameter array, whatever its size: the Tensor and the NumPy array
# headers of the weight, its gradient and Adam's moments, and their entries in the module's,
# the optimizer's and the archive's dicts (the weights of a model with very many thin layers
# take less than these)
ARRAY_OVERHEAD = 1024
# a cgroup v1 group without a memory limit says 9223372036854771712 (the largest count of pages)
NO_LIMIT = 2 ** 60


def machine_memory():
    """This machine's physical memory in bytes, or None where the system does not say."""
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else None


def model_memory(config):
    """The bytes a model of `config` takes before its first batch: four arrays of the parameters'
    size (the weights, their gradients and Adam's two moments; when a checkpoint is loaded, the
    weights, the archive's copy of them and Adam's two moments), the Python objects around every
    parameter array (`ARRAY_OVERHEAD` each: 16 arrays per block, 10 more per cross-attention),
    and the sinusoidal table P (max_len, d_model) of each stack, built in float64
    (numpy_transformer.positional)."""
    parameters = 4 * analytic_parameter_count(config)["total"] * np.dtype(config.dtype).itemsize
    n_cross = config.n_decoder_layers if config.kind == "encoder-decoder" else 0
    arrays = 16 * (config.n_encoder_layers + config.n_decoder_layers) + 10 * n_cross
    return parameters + arrays * ARRAY_OVERHEAD + 2 * config.max_len * config.d_model * np.dtype(np.float64).itemsize


def decoding_memory(config, rows, source_length, output_length):
    """The bytes of the largest arrays of one decoding run (`numpy_transformer.decoding`) over
    `rows` = sentences × beams, with L decoder layers, d = d_model, n = source_length,
    T = output_length, V = tgt_vocab_size, per row:

        self-attention cache     2 L T d      keys and values of every step
        cross-attention          (2 L + 1) n d   the memory Z repeated per beam, its keys and values
        scores                   V (1 + 3 · 2)   log p in the model's dtype, three float64 copies
        hypotheses               6 T             token arrays (live, extended, finished), int64

    (the first three in units of the model's itemsize, the last of 8 bytes). A config without
    decoder layers or d_model (a stand-in model that has no cache) counts the last two only."""
    itemsize = np.dtype(getattr(config, "dtype", np.float32)).itemsize
    layers, d = getattr(config, "n_decoder_layers", 0), getattr(config, "d_model", 0)
    per_row = ((2 * layers * output_length + (2 * layers + 1) * source_length) * d + 7 * config.tgt_vocab_size) \
        * itemsize + 6 * output_length * 8
    return rows * per_row


def memory_limit():
    """The least memory limit, in bytes, of this process's control group and of the groups above
    it (cgroup v2's `memory.max`, v1's `memory.limit_in_bytes`), or None where none is set."""
    return control_groups.limit("memory", _limit_in)


def available_memory():
    """The bytes of memory available now, without swapping: MemAvailable of /proc/meminfo on
    Linux (the free memory plus the caches the kernel can drop), the free pages elsewhere when
    the system says (SC_AVPHYS_PAGES), or None; at most what the memory limits of the process's
    control groups leave it (each group's limit less what the group uses, its file cache that
    the kernel can drop not counted)."""
    free = _machine_available()
    room = control_groups.limit("memory", _room_in)
    return room if free is None or (room is not None and room < free) else free


def _machine_available():
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                name, _, value = line.partition(":")
                if name == "MemAvailable":
                    return int(value.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def _limit_in(version, folder):
    """The memory limit one group's folder sets, in bytes, or None."""
    limit = control_groups.read_number(folder / ("memory.max" if version == "v2" else "memory.limit_in_bytes"))
    return limit if limit is not None and 0 < limit < NO_LIMIT else None


def _room_in(version, folder):
    """What one group with a memory limit may still take, in bytes: its limit less what it uses,
    less its inactive file cache (which the kernel drops before it kills), or None."""
    limit = _limit_in(version, folder)
    used = control_groups.read_number(folder / ("memory.current" if version == "v2" else "memory.usage_in_bytes"))
    if limit is None or used is None:
        return None
    cache = control_groups.read_stat(folder / "memory.stat", "inactive_file" if version == "v2" else
                                     "total_inactive_file") or 0
    return max(0, limit - max(0, used - cache))


def check_fits(needed, what, advice):
    """A ValueError when `needed` bytes are more than the memory available now (`available_memory`,
    at most this machine's): "`what` would need … GiB, more than this machine's … GiB free now
    (of … GiB): `advice`"; where a control group's memory limit is below the machine's memory,
    "more than the … GiB this process may still use (its memory limit: … GiB, …)"; without a
    figure for what is free, compared with the machine's memory or the limit."""
    total, free, limit = machine_memory(), available_memory(), memory_limit()
    limited = limit is not None and (not total or limit < total)       # a container's, job's or service's
    if limited:
        total = limit
    if free is not None and total:
        free = min(free, total)
    ceiling = free if free is not None else total
    if not ceiling or needed <= ceiling:
        return
    needs = f"{what} would need {needed / 2**30:,.1f} GiB"
    if limited:
        raise ValueError(f"{needs}, more than the {ceiling / 2**30:,.1f} GiB this process may still use (its memory "
                         f"limit: {limit / 2**30:,.1f} GiB, its container's, job's or service's): {advice}")
    if free is None:
        raise ValueError(f"{needs}, more than this machine's {total / 2**30:,.1f} GiB: {advice}")
    of = f" (of {total / 2**30:,.1f} GiB)" if total else ""
    raise ValueError(f"{needs}, more than this machine's {free / 2**30:,.1f} GiB free now{of}: {advice}")


def check_decoding_fits(config, src_ids, limits, beam_size):
    """A ValueError, before anything is allocated, when decoding src_ids (batch, n_src) with
    `beam_size` beams up to `limits` tokens (batch,) would not fit in this machine's memory."""
    check_fits(decoding_memory(config, len(src_ids) * beam_size, src_ids.shape[1], int(limits.max())),
               f"decoding {len(src_ids)} sentences with {beam_size} beams each",
               "choose a smaller --beam (4 is the usual size)")
