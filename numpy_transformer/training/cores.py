"""The processors this process may use, which can be fewer than the machine has.

`os.cpu_count()` counts the machine's processors. A process is often allowed fewer:

- a CPU set (its affinity): `taskset`, a Slurm or PBS allocation on a cluster node,
  `docker run --cpuset-cpus`;
- a CPU quota of its control group or of a group above it: `docker run --cpus 2`, a Kubernetes
  limit, a systemd unit's or slice's `CPUQuota` (cgroup v2: `cpu.max`, "200000 100000" is two
  processors' worth; cgroup v1: `cpu.cfs_quota_us` over `cpu.cfs_period_us`, −1 for none).
  `numpy_transformer.control_groups` finds the groups.

`usable_cores()` is the least of the three, the quota rounded up, as joblib's loky and Dask
count them. `--threads` may not exceed it, and the optimizer's threads stop there.
"""
import math
import os
from pathlib import Path

from numpy_transformer import control_groups


def usable_cores():
    """The processors this process may use: the least of the machine's processors, its CPU
    set and its control groups' CPU quota (rounded up), at least 1."""
    counts = [os.cpu_count() or 1]
    if hasattr(os, "sched_getaffinity"):
        counts.append(len(os.sched_getaffinity(0)))
    quota = cgroup_cpu_quota()
    if quota is not None:
        counts.append(math.ceil(quota))
    return max(1, min(counts))


def cgroup_cpu_quota(filesystem=Path("/")):
    """The CPU quota in processors (1.5 for `docker run --cpus 1.5`): the least of this process's
    control group's and of the groups above it (`control_groups.limit`), or None where none is
    set or it cannot be read (no cgroup file system, not Linux, a malformed file). `filesystem`:
    where `/proc` and `/sys` are found (tests)."""
    return control_groups.limit("cpu", _quota_in, filesystem)


def _quota_in(version, folder):
    """The quota one group's folder sets, in processors, or None (none set, or unreadable)."""
    if version == "v1":
        quota, period = (control_groups.read_number(folder / f"cpu.cfs_{name}_us") for name in ("quota", "period"))
        return None if quota is None or period is None or quota < 0 else _processors(quota, period)
    try:
        quota, period = (folder / "cpu.max").read_text(encoding="ascii").split()[:2]
        return None if quota == "max" else _processors(int(quota), int(period))
    except (OSError, ValueError):
        return None


def _processors(quota, period):
    """quota / period, or None for values no kernel writes (a period ≤ 0, a quota of 0)."""
    return quota / period if quota > 0 and period > 0 else None


def describe_cores():
    """What a refusal of --threads says of the processors: the machine's count, or the count
    this process may use and the machine's where they differ."""
    cores, machine = usable_cores(), os.cpu_count() or 1
    if cores == machine:
        return f"this machine has {machine} processors"
    return (f"this process may use {cores} of the machine's {machine} processors: its CPU set or its "
            f"CPU quota (its container's, job's or service's) allows no more")
