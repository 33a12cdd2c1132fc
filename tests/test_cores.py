"""The processors this process may use: its CPU set and its control group's CPU quota, not only
the machine's count (training/cores.py)."""
import os
import subprocess
import sys

import pytest

from numpy_transformer.training import cores


def _cgroup(tmp_path, files):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


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
def test_the_quota_is_read_from_cgroup_v2_or_v1_and_none_where_unset_or_unreadable(tmp_path, files, quota):
    assert cores.cgroup_cpu_quota(_cgroup(tmp_path, files)) == quota


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
    monkeypatch.setattr(cores, "cgroup_cpu_quota", lambda root=None: quota)
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
