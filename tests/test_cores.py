"""The processors this process may use: its CPU set and its control groups' CPU quota, not only
the machine's count (training/cores.py)."""
import os
import subprocess
import sys

import pytest

from cgroup_helpers import HYBRID, V2_HOST, mount, real_group, run_in_group, write_files
from numpy_transformer.training import cores


@pytest.mark.parametrize("files, quota", [
    ({"cpu.max": "200000 100000\n"}, 2.0),                          # docker run --cpus 2, cgroup v2
    ({"cpu.max": "150000 100000\n"}, 1.5),
    ({"cpu.max": "max 100000\n"}, None),                             # no limit
    ({"cpu/cpu.cfs_quota_us": "50000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 0.5),     # cgroup v1
    ({"cpu,cpuacct/cpu.cfs_quota_us": "-1\n", "cpu,cpuacct/cpu.cfs_period_us": "100000\n"}, None),
    ({"cpuacct,cpu/cpu.cfs_quota_us": "300000\n", "cpuacct,cpu/cpu.cfs_period_us": "100000\n"}, 3.0),
    ({"cpu.max": "garbage\n", "cpu/cpu.cfs_quota_us": "100000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 1.0),
    ({"cpu.max": "100000 0\n"}, None),                               # a period no kernel writes
    ({"cpu/cpu.cfs_quota_us": "many\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
    ({}, None),                                                      # no control group file system
])
def test_where_proc_cannot_tell_the_top_of_sys_fs_cgroup_is_read(tmp_path, files, quota):
    """No /proc (a container that hides it, another system): the quota of v2's or v1's top group,
    which is a container's own, or None where unset or unreadable."""
    files = {f"sys/fs/cgroup/{name}": text for name, text in files.items()}
    assert cores.cgroup_cpu_quota(write_files(tmp_path, files)) == quota


@pytest.mark.parametrize("cgroup, mountinfo, files, quota", [
    # a systemd service in a slice with CPUQuota=100% (cgroup v2): the slice's quota applies to it
    ("0::/training.slice/run.service\n", V2_HOST,
     {"sys/fs/cgroup/training.slice/cpu.max": "100000 100000\n",
      "sys/fs/cgroup/training.slice/run.service/cpu.max": "max 100000\n"}, 1.0),
    # the service's own quota tighter than its slice's: the least
    ("0::/training.slice/run.service\n", V2_HOST,
     {"sys/fs/cgroup/training.slice/cpu.max": "400000 100000\n",
      "sys/fs/cgroup/training.slice/run.service/cpu.max": "50000 100000\n"}, 0.5),
    # a quota on the host's top group is no group's above a container's top: still read
    ("0::/\n", V2_HOST, {"sys/fs/cgroup/cpu.max": "300000 100000\n"}, 3.0),
    # a sibling's quota does not apply
    ("0::/a.slice/run.service\n", V2_HOST,
     {"sys/fs/cgroup/b.slice/cpu.max": "100000 100000\n", "sys/fs/cgroup/a.slice/run.service/cpu.max": "max 100000\n"},
     None),
    # cgroup v1 beside an empty v2 (systemd's hybrid layout): the cpu controller's hierarchy holds it
    ("12:memory:/user.slice\n4:cpu,cpuacct:/user.slice/job\n0::/user.slice/job\n", HYBRID,
     {"sys/fs/cgroup/cpu,cpuacct/user.slice/cpu.cfs_quota_us": "150000\n",
      "sys/fs/cgroup/cpu,cpuacct/user.slice/cpu.cfs_period_us": "100000\n",
      "sys/fs/cgroup/cpu,cpuacct/user.slice/job/cpu.cfs_quota_us": "-1\n",
      "sys/fs/cgroup/cpu,cpuacct/user.slice/job/cpu.cfs_period_us": "100000\n",
      "sys/fs/cgroup/memory/user.slice/cpu.cfs_quota_us": "1000\n"}, 1.5),
    # docker on cgroup v1 without a cgroup namespace: /proc names the host's path, the mount shows
    # the container's own group as its top
    ("4:cpu,cpuacct:/docker/abc\n", mount(33, "/docker/abc", "/sys/fs/cgroup/cpu,cpuacct", "cgroup", "rw,cpu,cpuacct"),
     {"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "200000\n", "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n"},
     2.0),
    # a group whose path only starts with the mount's top as text is not below it: the top is read
    ("4:cpu,cpuacct:/docker/abcdef\n", mount(33, "/docker/abc", "/sys/fs/cgroup/cpu,cpuacct", "cgroup", "rw,cpu,cpuacct"),
     {"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "200000\n", "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
      "sys/fs/cgroup/cpu,cpuacct/def/cpu.cfs_quota_us": "50000\n", "sys/fs/cgroup/cpu,cpuacct/def/cpu.cfs_period_us": "100000\n"},
     2.0),
    # a mount point with a space, written \040 by the kernel
    ("0::/run.service\n", mount(30, "/", "/mnt/cgroup\\040two", "cgroup2", "rw"),
     {"mnt/cgroup two/run.service/cpu.max": "100000 100000\n"}, 1.0),
    # the group gone (the process moved while reading), broken lines: nothing read, no error
    ("0::/gone.service\nnonsense\n", V2_HOST + "broken line\n", {}, None),
    # no hierarchy holds the cpu controller
    ("5:memory:/x\n", mount(34, "/", "/sys/fs/cgroup/memory", "cgroup", "rw,memory"),
     {"sys/fs/cgroup/memory/x/cpu.cfs_quota_us": "1000\n", "sys/fs/cgroup/memory/x/cpu.cfs_period_us": "100000\n"}, None),
])
def test_the_quota_is_the_least_of_the_process_group_and_the_groups_above_it(tmp_path, cgroup, mountinfo, files,
                                                                             quota):
    """The group named by /proc/self/cgroup, found where /proc/self/mountinfo mounts its hierarchy,
    and every group above it up to the mount's top: what a systemd unit, a Slurm job step or a
    nested container is limited by, where the top of /sys/fs/cgroup holds no quota."""
    files = {"proc/self/cgroup": cgroup, "proc/self/mountinfo": mountinfo, **files}
    assert cores.cgroup_cpu_quota(write_files(tmp_path, files)) == quota


@pytest.mark.parametrize("machine, affinity, quota, usable", [
    (64, 64, None, 64),
    (64, 4, None, 4),                  # a Slurm allocation of 4 processors on a 64-processor node
    (64, 64, 1.5, 2),                  # docker run --cpus 1.5: two processors, each busy part of the time
    (64, 4, 0.5, 1),
    (2, 2, 8.0, 2),                    # a quota above the machine's processors
    (None, 1, None, 1),                # os.cpu_count() cannot tell
])
def test_the_usable_cores_are_the_least_of_the_machine_its_cpu_set_and_its_quota(monkeypatch, machine, affinity,
                                                                                  quota, usable):
    monkeypatch.setattr(cores.os, "cpu_count", lambda: machine)
    monkeypatch.setattr(cores.os, "sched_getaffinity", lambda pid: set(range(affinity)), raising=False)
    monkeypatch.setattr(cores, "cgroup_cpu_quota", lambda filesystem=None: quota)
    assert cores.usable_cores() == usable


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs a CPU set of two processors or more to narrow")
def test_threads_beyond_the_cpu_set_are_refused_in_one_line_that_names_both_counts(tmp_path):
    """As `taskset -c 0 numpy-transformer train --threads 2` on a machine of two or more: two
    processes on one processor would only take turns, so the flag is refused before anything
    runs, and the line says how many processors the process may use and the machine has."""
    machine = os.cpu_count()
    code = ("import os, sys; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
            "from numpy_transformer.cli import main; sys.exit(main(sys.argv[1:]))")
    result = subprocess.run([sys.executable, "-c", code, "train", "--threads", "2", "--out", str(tmp_path / "run")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stdout == ""
    (line,) = [line for line in result.stderr.splitlines() if "--threads" in line and "error" in line]
    assert f"this process may use 1 of the machine's {machine} processors" in line, result.stderr
    assert not (tmp_path / "run").exists()
    result = subprocess.run([sys.executable, "-c", code.replace("sys.exit(main(sys.argv[1:]))",
                                                                "from numpy_transformer.training import cores; "
                                                                "print(cores.usable_cores())")],
                            capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "1", result.stderr


@pytest.mark.cgroup
def test_a_real_quota_on_the_group_above_the_process_limits_its_threads(tmp_path):
    """A real control group with a quota of one processor and, inside it, a group without one
    that holds a child process (as a systemd slice holds a service, or a Slurm job its steps):
    the child may use 1 processor and is refused `--threads 2` in one line. Creates the groups
    under the cpu hierarchy's top and removes them (root only: `pytest -m cgroup`, which
    .ci/run runs; NUMPY_TRANSFORMER_REQUIRE_CGROUP=1 turns the skip into a failure)."""
    limits = {"v2": {"cpu.max": "100000 100000"}, "v1": {"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "100000"}}
    with real_group("cpu", limits) as procs:
        code = ("import sys; from numpy_transformer.training import cores; print(cores.usable_cores(), cores.cgroup_cpu_quota()); "
                "from numpy_transformer.cli import main; sys.exit(main(sys.argv[1:]))")
        result = run_in_group(procs, code, "train", "--threads", "2", "--out", tmp_path / "run")
        assert result.returncode == 2, result.stderr
        assert result.stdout.splitlines() == ["1 1.0"], result.stdout
        (line,) = [line for line in result.stderr.splitlines() if "--threads" in line and "error" in line]
        assert f"this process may use 1 of the machine's {os.cpu_count()} processors" in line or os.cpu_count() == 1, line
        assert not (tmp_path / "run").exists()
