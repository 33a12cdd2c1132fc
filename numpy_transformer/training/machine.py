"""The machine that measures, in one line: every `bench` command prints it first, and `train`
keeps its record in metrics.json (`machine`), so that a figure copied from either keeps the CPU,
the share of it this process had, the BLAS and its kernels, and the libraries' versions that made
it.

    Machine: Intel(R) Xeon(R) Processor, 2 processors, 23.5 GiB; NumPy's OpenBLAS 0.3.31.188.0
    (SkylakeX kernels, 1 thread); NumPy 2.4.6; Python 3.11.7; PyTorch 2.13.0+cpu

A process may be given less than the machine has (a CPU set, a CPU quota, a memory limit:
training/cores.py, memory_budget.py); the line then says so: "2 processors, this process may use
1", "23.5 GiB, a limit of 3.0 GiB".
"""
import importlib.metadata
import os
import platform
from pathlib import Path

from numpy_transformer.memory_budget import machine_memory, memory_limit
from numpy_transformer.training.cores import usable_cores
from numpy_transformer.training.thread_plan import cpu_name


def machine_record():
    """What `describe_machine` prints, as a dict: cpu, processors, usable_processors,
    memory_bytes, memory_limit_bytes, blas (one dict per BLAS library loaded, NumPy's first:
    library, version, kernels, threads, and "of": "numpy" or "scipy" where its file lies in that
    package's folders, as in the wheels), numpy, python, torch (None where not installed)."""
    from threadpoolctl import threadpool_info
    import numpy as np

    blas, seen = [], set()
    for pool in threadpool_info():
        if pool.get("user_api") != "blas":
            continue
        path = Path(pool.get("filepath") or "")
        entry = {"library": pool.get("internal_api"), "version": pool.get("version"),
                 "kernels": pool.get("architecture"), "threads": pool.get("num_threads"),
                 "of": next((name for name in ("numpy", "scipy") if any(part.startswith(name) for part in path.parts)),
                            None)}
        if tuple(entry.values()) not in seen:
            seen.add(tuple(entry.values()))
            blas.append(entry)
    blas.sort(key=lambda entry: entry["of"] != "numpy")             # NumPy's first: the one the models use
    try:
        torch = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch = None
    return {"cpu": cpu_name(), "processors": os.cpu_count(), "usable_processors": usable_cores(),
            "memory_bytes": machine_memory(), "memory_limit_bytes": memory_limit(), "blas": blas,
            "numpy": np.__version__, "python": platform.python_version(), "torch": torch}


def describe_machine(record=None):
    """The one line "Machine: …" of `machine_record()` (or of `record`)."""
    record = machine_record() if record is None else record
    processors = f"{record['processors']} processors"
    if record["usable_processors"] < (record["processors"] or 1):
        processors += f", this process may use {record['usable_processors']}"
    parts = [f"{record['cpu']}, {processors}"]
    if record["memory_bytes"]:
        parts[0] += f", {record['memory_bytes'] / 2**30:.1f} GiB"
        limit = record["memory_limit_bytes"]
        if limit is not None and limit < record["memory_bytes"]:
            parts[0] += f", a limit of {limit / 2**30:.1f} GiB"
    names = {"openblas": "OpenBLAS", "mkl": "MKL", "blis": "BLIS"}
    for blas in record["blas"]:
        threads = f"{blas['threads']} thread{'s' if blas['threads'] != 1 else ''}"
        kernels = f"{blas['kernels']} kernels, " if blas["kernels"] else ""
        of = {"numpy": "NumPy's ", "scipy": "SciPy's "}.get(blas["of"], "")
        parts.append(f"{of}{names.get(blas['library'], blas['library'])} {blas['version']} ({kernels}{threads})")
    parts += [f"NumPy {record['numpy']}", f"Python {record['python']}"]
    if record["torch"]:
        parts.append(f"PyTorch {record['torch']}")
    return "Machine: " + "; ".join(parts)
