"""This process's Linux control groups (cgroups v1 and v2): where they are, and the limits that
they and the groups above them set. A process may be allowed less than the machine has: a
container (`docker run --cpus 2 --memory 4g`, a Kubernetes limit), a batch job (Slurm's
`--mem`), a systemd unit or slice (`CPUQuota`, `MemoryMax`). `training/cores.py` reads the CPU
quota from here and `memory_budget.py` the memory limit.

Where the groups are: `/proc/self/cgroup` names this process's group in each hierarchy (cgroup
v2's line "0::/path"; in cgroup v1, the line whose controllers include the one asked for), and
`/proc/self/mountinfo` says where that hierarchy is mounted and which of its groups the mount
shows as its top (a container sees its own group there). A group's limit and those of the
groups above it, up to that top, all apply: the least of them is the limit. (Go's runtime reads
the same two files since Go 1.25, the process's own group only.) Where `/proc` cannot tell, the
top of `/sys/fs/cgroup` is read, which is a container's own group.
"""
import os
import re
from pathlib import Path

# where /sys/fs/cgroup mounts a cgroup v1 controller's hierarchy, by controller
V1_FOLDERS = {"cpu": ("cpu", "cpu,cpuacct", "cpuacct,cpu"), "memory": ("memory",)}


def limit(controller, read, filesystem=Path("/")):
    """The least value `read(version, folder)` gives over this process's group and the groups
    above it, in each mounted hierarchy that holds `controller` ("cpu" or "memory"); `read`
    returns None where a group sets no limit or its files cannot be read. None where none does.
    `filesystem`: where `/proc` and `/sys` are found (tests)."""
    values = [read(version, folder) for version, folder in group_folders(controller, filesystem)]
    values = [value for value in values if value is not None]
    return min(values) if values else None


def group_folders(controller, filesystem=Path("/")):
    """[(version, folder)]: for each mounted hierarchy that holds `controller` ("v2", or "v1" for
    the hierarchy of cgroup v1 that has it), the folder of this process's group and then each
    folder above it up to the top its mount shows; where /proc cannot tell, the top folders of
    /sys/fs/cgroup."""
    folders = []
    for version, folder, top in _groups(controller, filesystem):
        while True:
            folders.append((version, folder))
            if folder == top or top not in folder.parents:
                break
            folder = folder.parent
    return folders


def read_number(path):
    """The integer a cgroup file holds, or None (no such file, unreadable, or "max")."""
    try:
        text = path.read_text(encoding="ascii").strip()
        return None if text == "max" else int(text)
    except (OSError, ValueError):
        return None


def read_stat(path, name):
    """The value of line `name` of a cgroup `*.stat` file ("name value" lines), or None."""
    try:
        for line in path.read_text(encoding="ascii").splitlines():
            key, _, value = line.partition(" ")
            if key == name:
                return int(value)
    except (OSError, ValueError):
        pass
    return None


def _groups(controller, filesystem):
    """[(version, folder of this process's group, folder of the top its mount shows)]."""
    try:
        groups = (filesystem / "proc/self/cgroup").read_text(encoding="utf-8").splitlines()
        mounts = (filesystem / "proc/self/mountinfo").read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):                 # /proc cannot tell: the top of /sys/fs/cgroup
        top = filesystem / "sys/fs/cgroup"
        return [("v2", top, top)] + [("v1", top / name, top / name) for name in V1_FOLDERS[controller]]
    paths = {}                                           # "v2" and "v1": this process's group in each
    for line in groups:
        fields = line.split(":", 2)
        if len(fields) != 3:
            continue
        if fields[0] == "0" and fields[1] == "":
            paths["v2"] = fields[2]
        elif controller in fields[1].split(","):
            paths["v1"] = fields[2]
    found = []
    for line in mounts:
        left, dash, right = line.partition(" - ")
        left, right = left.split(), right.split()
        if not dash or len(left) < 5 or len(right) < 3:
            continue
        if right[0] == "cgroup2":
            version = "v2"
        elif right[0] == "cgroup" and controller in right[2].split(","):
            version = "v1"
        else:
            continue
        if version not in paths:
            continue
        root, mount_point, path = _unescaped(left[3]), _unescaped(left[4]), paths[version]
        top = filesystem / mount_point.lstrip("/")
        inside = path == root or path.startswith(root.rstrip("/") + "/")   # else the mount hides it
        found.append((version, Path(os.path.normpath(top / os.path.relpath(path, root))) if inside else top, top))
    return found


def _unescaped(field):
    """A mountinfo path field with its octal escapes (\\040 for a space) decoded."""
    return re.sub(r"\\([0-7]{3})", lambda match: chr(int(match.group(1), 8)), field)
