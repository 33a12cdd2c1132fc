"""Control groups for the tests of numpy_transformer.control_groups: files laid out as the kernel
writes them under a temporary folder, and real groups where the suite runs as root."""
import contextlib
import os
import subprocess
import sys

import pytest

from numpy_transformer import control_groups


def write_files(folder, files):
    """`files` ({path below folder: text}) written under `folder`; returns `folder`."""
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


def mount(mount_id, root, mount_point, kind, options):
    """One line of /proc/self/mountinfo, as the kernel writes it."""
    return f"{mount_id} 23 0:{mount_id} {root} {mount_point} rw,nosuid,nodev,noexec,relatime shared:9 - {kind} {kind} {options}\n"


V2_HOST = mount(30, "/", "/sys/fs/cgroup", "cgroup2", "rw,nsdelegate,memory_recursiveprot")
HYBRID = (mount(31, "/", "/sys/fs/cgroup", "tmpfs", "ro,mode=755")
          + mount(32, "/", "/sys/fs/cgroup/unified", "cgroup2", "rw")
          + mount(33, "/", "/sys/fs/cgroup/cpu,cpuacct", "cgroup", "rw,cpu,cpuacct")
          + mount(34, "/", "/sys/fs/cgroup/memory", "cgroup", "rw,memory"))


def writable_hierarchy(controller):
    """(version, the top folder of a mounted cgroup hierarchy holding `controller` where this
    process may create groups), or None."""
    tops = dict(control_groups.group_folders(controller))   # each version's last folder: its top
    for version, top in tops.items():
        if version == "v2":
            controllers = top / "cgroup.controllers"
            if not controllers.exists() or controller not in controllers.read_text(encoding="ascii").split():
                continue
        if os.access(top, os.W_OK):
            return version, top
    return None


@contextlib.contextmanager
def real_group(controller, limits):
    """A real group with `limits` ({version: {file: text}}) below the top of the hierarchy that
    holds `controller`, and an empty group inside it; yields the inner group's `cgroup.procs`
    (write a process id there to move it in). Removes both. Skips where no hierarchy lets this
    process create groups (not root); NUMPY_TRANSFORMER_REQUIRE_CGROUP=1 makes that a failure."""
    found = writable_hierarchy(controller)
    if found is None:
        message = f"needs a cgroup hierarchy with the {controller} controller where this process may create groups (root)"
        if os.environ.get("NUMPY_TRANSFORMER_REQUIRE_CGROUP") == "1":
            pytest.fail(message)
        pytest.skip(message)
    version, top = found
    outer = top / f"numpy-transformer-test-{os.getpid()}"
    inner = outer / "run"
    try:
        if version == "v2":
            subtree = top / "cgroup.subtree_control"
            if controller not in subtree.read_text(encoding="ascii").split():
                subtree.write_text(f"+{controller}", encoding="ascii")
        outer.mkdir()
        for name, text in limits[version].items():
            (outer / name).write_text(text, encoding="ascii")
        inner.mkdir()
        yield inner / "cgroup.procs"
    finally:
        for group in (inner, outer):
            if group.exists():
                group.rmdir()


def run_in_group(procs, code, *arguments, timeout=300):
    """`python -c code *arguments` started inside the group whose `cgroup.procs` is `procs` (moved
    there before Python starts), as a finished subprocess with its text output."""
    return subprocess.run(["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(procs), sys.executable, "-c", code,
                           *map(str, arguments)], capture_output=True, text=True, timeout=timeout)
