"""The block size of the optimizer's passes, measured on this machine.

The engine room's clip and Adam update (autograd/engine_room/fused_clip.py, fused_adam.py) go
over each parameter a block of entries at a time, so that the block's parameter, gradient,
moments and scratch stay in the core's caches from the first of Adam's 13 passes to the last. A
larger block makes fewer ufunc calls (13 a block) for as long as its 20 bytes an entry still
fit in the caches, and where that ends depends on the CPU (docs/performance.md gives what two
CPUs measured). The values are the same bit for bit at any block size; only the time moves.

`choose_update_block` times the norm and the update of `SAMPLE` scratch entries (larger than the
caches, as a model's are) at each size of `CANDIDATES`, in turn, `ROUNDS` times after an untimed
round, on one thread, and takes the fastest median if it beats the default (`BLOCK`) by more than
`MARGIN`. The answer is kept in the user's cache folder (`update-blocks.json` beside the thread
plans), under a key of the CPU, its cores and the versions of Python and NumPy, and for the
rest of the process. Nothing is measured for parameters that all fit in one block (they go
whole), nor while other work keeps the cores busy (`thread_plan.machine_busy`: the default then,
not kept). A measurement is made once per machine, on 128 MB of scratch.
"""
import hashlib
import json
import os
import platform
import statistics
import time

import numpy as np

from autograd import Tensor
from autograd.engine_room import set_update_block, update_block
from autograd.optim import Adam, clip_grad_norm
from numpy_transformer.training.thread_plan import cache_path, cpu_name, keep_in_cache, machine_busy, read_cache

BLOCK = 1 << 16                   # the engine room's default (autograd/engine_room/blocks.py: BLOCK)
CANDIDATES = (BLOCK, 2 * BLOCK, 4 * BLOCK)   # 64 K, 128 K and 256 K entries
SAMPLE = 1 << 23                  # scratch entries: 128 MB with the gradient and the moments
ROUNDS = 3                        # timed rounds, each size once a round, after one untimed round
MARGIN = 0.02                     # another size is taken if it is faster than BLOCK by more than this
CACHE_FILE = "update-blocks.json"
_chosen = {}                      # key -> block size, for this process


def choose_update_block(largest, cache=None, measure_sizes=None):
    """The block size (entries) for the optimizer's passes over parameters whose largest has
    `largest` entries: BLOCK where every parameter fits in one, else what was measured on this
    machine (kept in this process, then in `cache`, default the user's cache folder; False:
    neither read nor written), else measured now. measure_sizes: the function that times the
    sizes (default `measure`; the tests give their own)."""
    if largest <= BLOCK:
        return BLOCK
    key = machine_key()
    if key in _chosen:
        return _chosen[key]
    path = cache_path().with_name(CACHE_FILE) if cache is None else cache
    known = read_cache(path, _is_size).get(key) if path else None
    if known is None:
        if machine_busy():
            return BLOCK
        known = fastest((measure_sizes or measure)())
        if path:
            keep_in_cache(path, key, known, _is_size, "update block")
    _chosen[key] = known
    return known


def fastest(seconds):
    """The size of {size: seconds} to take: the fastest, if faster than BLOCK by more than MARGIN."""
    best = min(seconds, key=seconds.get)
    return best if seconds[best] < (1 - MARGIN) * seconds[BLOCK] else BLOCK


def measure(sizes=CANDIDATES, sample=SAMPLE, rounds=ROUNDS):
    """{size: the median seconds of the gradient norm and Adam's update of `sample` float32
    scratch entries (the engine room's, as a run makes them) in blocks of that size}, the sizes
    timed in turn, `rounds` times after an untimed round; the block size is put back after."""
    scratch = Tensor(np.ones(sample, np.float32), requires_grad=True)
    scratch.grad = np.full(sample, 1e-3, np.float32)
    optimizer = Adam([("scratch", scratch)], lr=1e-6, betas=(0.9, 0.98), eps=1e-9)
    seconds, previous = {size: [] for size in sizes}, update_block()
    try:
        for round_ in range(rounds + 1):
            for size in sizes:
                set_update_block(size)
                start = time.perf_counter()
                clip_grad_norm([scratch], None)                  # the norm (None: nothing scaled)
                optimizer.step()
                if round_:
                    seconds[size].append(time.perf_counter() - start)
    finally:
        set_update_block(previous)
    return {size: statistics.median(times) for size, times in seconds.items()}


def machine_key():
    """A hash of the CPU, its cores and the versions of Python and NumPy: what the passes' speed
    depends on (they are NumPy's own loops, no BLAS; a key naming the BLAS libraries loaded would
    differ between a process that imported SciPy and one that did not, and measure again)."""
    described = {"cpu": cpu_name(), "cores": os.cpu_count(), "python": platform.python_version(),
                 "numpy": np.__version__}
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()[:32]


def _is_size(value):
    """A kept size: one of CANDIDATES."""
    return type(value) is int and value in CANDIDATES
