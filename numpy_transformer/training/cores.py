"""The processors this process may use, which can be fewer than the machine has.

`os.cpu_count()` counts the machine's processors. A process is often allowed fewer:

- a CPU set (its affinity): `taskset`, a Slurm or PBS allocation on a cluster node,
  `docker run --cpuset-cpus`;
- a CPU quota of its control group or of a group above it: `docker run --cpus 2`, a Kubernetes
  limit, a systemd unit's or slice's `CPUQuota` (cgroup v2: `cpu.max`, "200000 100000" is two
  processors' worth; cgroup v1: `cpu.cfs_quota_us` over `cpu.cfs_period_us`, −1 for none).

`usable_cores()` is the least of the three, the quota rounded up, as joblib's loky and Dask
count them. `--threads` may not exceed it, and the optimizer's threads stop there.

Where the group is: `/proc/self/cgroup` names this process's group in each hierarchy (cgroup
v2's line "0::/path", or the cgroup v1 line whose controllers include `cpu`), and
`/proc/self/mountinfo` says where that hierarchy is mounted and which of its groups the mount
shows as its top (a container sees its own group there). The group's quota and those of the
groups above it, up to that top, all apply: the least of them is the quota. (Go's runtime reads
the same two files since Go 1.25, the process's own group only.) Where `/proc` cannot tell, the
top of `/sys/fs/cgroup` is read, which is a container's own group.
"""
import math
import os
import re
from pathlib import Path

CGROUP_V1_FOLDERS = ("cpu", "cpu,cpuacct", "cpuacct,cpu")     # where /sys/fs/cgroup mounts cgroup v1's cpu


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
    """The CPU quota in processors (1.5 for `docker run --cpus 1.5`) of this process's control
    group, the least of its own and of the groups above it that its mount shows (module
    docstring), or None where there is none or it cannot be read (no cgroup file system, not
    Linux, a malformed file). `filesystem`: where `/proc` and `/sys` are found (tests)."""
    folders = cgroup_folders(filesystem)
    if folders is None:                                  # /proc cannot tell: the top of /sys/fs/cgroup
        top = filesystem / "sys/fs/cgroup"
        folders = [("v2", top, top)] + [("v1", top / name, top / name) for name in CGROUP_V1_FOLDERS]
    quotas = []
    for version, folder, top in folders:
        while True:
            quotas.append(_quota_in(version, folder))
            if folder == top or top not in folder.parents:
                break
            folder = folder.parent
    quotas = [quota for quota in quotas if quota is not None]
    return min(quotas) if quotas else None


def cgroup_folders(filesystem=Path("/")):
    """[(version, folder of this process's group, folder of the top its mount shows)] for each
    mounted hierarchy that holds the cpu controller (cgroup v2, and v1's `cpu`), or None where
    `/proc/self/cgroup` or `/proc/self/mountinfo` cannot be read."""
    try:
        groups = (filesystem / "proc/self/cgroup").read_text(encoding="utf-8").splitlines()
        mounts = (filesystem / "proc/self/mountinfo").read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    paths = {}                                           # "v2" and "v1": this process's group in each
    for line in groups:
        fields = line.split(":", 2)
        if len(fields) != 3:
            continue
        if fields[0] == "0" and fields[1] == "":
            paths["v2"] = fields[2]
        elif "cpu" in fields[1].split(","):
            paths["v1"] = fields[2]
    folders = []
    for line in mounts:
        left, dash, right = line.partition(" - ")
        left, right = left.split(), right.split()
        if not dash or len(left) < 5 or len(right) < 3:
            continue
        if right[0] == "cgroup2":
            version = "v2"
        elif right[0] == "cgroup" and "cpu" in right[2].split(","):
            version = "v1"
        else:
            continue
        if version not in paths:
            continue
        root, mount_point = _unescaped(left[3]), _unescaped(left[4])
        top = filesystem / mount_point.lstrip("/")
        path = paths[version]
        inside = path == root or path.startswith(root.rstrip("/") + "/")   # else the mount hides it
        folder = Path(os.path.normpath(top / os.path.relpath(path, root))) if inside else top
        folders.append((version, folder, top))
    return folders


def _unescaped(field):
    """A mountinfo path field with its octal escapes (\\040 for a space) decoded."""
    return re.sub(r"\\([0-7]{3})", lambda match: chr(int(match.group(1), 8)), field)


def _quota_in(version, folder):
    """The quota written in one group's folder in processors, or None (none set, or unreadable)."""
    try:
        if version == "v2":
            quota, period = (folder / "cpu.max").read_text(encoding="ascii").split()[:2]
            return None if quota == "max" else _processors(int(quota), int(period))
        quota = int((folder / "cpu.cfs_quota_us").read_text(encoding="ascii"))
        period = int((folder / "cpu.cfs_period_us").read_text(encoding="ascii"))
        return None if quota < 0 else _processors(quota, period)
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
