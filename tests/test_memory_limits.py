"""The memory a process may use where its control group, or a group above it, has a limit
(`docker run --memory`, Slurm's `--mem`, a systemd unit's `MemoryMax`): what is free is what the
limit leaves, and a model or a decoding that would pass it is refused in one line naming the
limit, not killed by the kernel without a word (memory_budget.py, control_groups.py)."""
import pytest

from cgroup_helpers import HYBRID, V2_HOST, real_group, run_in_group, write_files
from numpy_transformer import control_groups, memory_budget
from numpy_transformer.memory_budget import check_fits

MiB, GiB = 2 ** 20, 2 ** 30
V1_NONE = "9223372036854771712\n"                        # what cgroup v1 says of a group without a limit


def _limit_and_room(tmp_path, cgroup, mountinfo, files):
    folder = write_files(tmp_path, {"proc/self/cgroup": cgroup, "proc/self/mountinfo": mountinfo, **files})
    return (control_groups.limit("memory", memory_budget._limit_in, folder),
            control_groups.limit("memory", memory_budget._room_in, folder))


@pytest.mark.parametrize("cgroup, mountinfo, files, limit, room", [
    # a Slurm job step under its job's limit (cgroup v2): the job's 4 GiB, less what the job uses
    # (3 GiB, of which 1 GiB is file cache the kernel can drop)
    ("0::/system.slice/slurmstepd.scope/job_7/step_0\n", V2_HOST,
     {"sys/fs/cgroup/system.slice/slurmstepd.scope/job_7/memory.max": f"{4 * GiB}\n",
      "sys/fs/cgroup/system.slice/slurmstepd.scope/job_7/memory.current": f"{3 * GiB}\n",
      "sys/fs/cgroup/system.slice/slurmstepd.scope/job_7/memory.stat": f"anon {2 * GiB}\nfile {GiB}\ninactive_file {GiB}\n",
      "sys/fs/cgroup/system.slice/slurmstepd.scope/job_7/step_0/memory.max": "max\n",
      "sys/fs/cgroup/system.slice/slurmstepd.scope/job_7/step_0/memory.current": f"{3 * GiB}\n"},
     4 * GiB, 2 * GiB),
    # the step's own limit tighter: the least room of the two
    ("0::/job/step\n", V2_HOST,
     {"sys/fs/cgroup/job/memory.max": f"{8 * GiB}\n", "sys/fs/cgroup/job/memory.current": f"{GiB}\n",
      "sys/fs/cgroup/job/step/memory.max": f"{2 * GiB}\n", "sys/fs/cgroup/job/step/memory.current": f"{GiB}\n",
      "sys/fs/cgroup/job/step/memory.stat": "inactive_file 0\n"},
     2 * GiB, GiB),
    # using more than the limit (the cache not yet dropped): no room, not a negative one
    ("0::/\n", V2_HOST, {"sys/fs/cgroup/memory.max": f"{GiB}\n", "sys/fs/cgroup/memory.current": f"{2 * GiB}\n"},
     GiB, 0),
    # no limit anywhere
    ("0::/user.slice\n", V2_HOST, {"sys/fs/cgroup/user.slice/memory.max": "max\n",
                                   "sys/fs/cgroup/user.slice/memory.current": f"{GiB}\n"}, None, None),
    # cgroup v1 (systemd's hybrid layout): docker run --memory 512m, the host's group above unlimited
    ("12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/docker/abc\n", HYBRID,
     {"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": f"{512 * MiB}\n",
      "sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes": f"{200 * MiB}\n",
      "sys/fs/cgroup/memory/docker/abc/memory.stat": f"cache {100 * MiB}\ntotal_inactive_file {50 * MiB}\n",
      "sys/fs/cgroup/memory/docker/memory.limit_in_bytes": V1_NONE,
      "sys/fs/cgroup/memory/memory.limit_in_bytes": V1_NONE}, 512 * MiB, 362 * MiB),
    ("12:memory:/\n", HYBRID, {"sys/fs/cgroup/memory/memory.limit_in_bytes": V1_NONE,
                                "sys/fs/cgroup/memory/memory.usage_in_bytes": f"{GiB}\n"}, None, None),
    # unreadable or malformed files: no limit read, no error
    ("0::/a\n", V2_HOST, {"sys/fs/cgroup/a/memory.max": "lots\n", "sys/fs/cgroup/a/memory.current": "1\n"}, None, None),
    ("0::/a\n", V2_HOST, {"sys/fs/cgroup/a/memory.max": f"{GiB}\n"}, GiB, None),
])
def test_the_limit_and_the_room_left_are_the_least_over_the_group_and_those_above_it(tmp_path, cgroup, mountinfo,
                                                                                   files, limit, room):
    assert _limit_and_room(tmp_path, cgroup, mountinfo, files) == (limit, room)


def test_a_limit_below_the_machines_memory_is_what_check_fits_compares_with_and_names(monkeypatch):
    monkeypatch.setattr(memory_budget, "machine_memory", lambda: 64 * GiB)
    monkeypatch.setattr(memory_budget, "memory_limit", lambda: 4 * GiB)
    monkeypatch.setattr(memory_budget, "available_memory", lambda: 3 * GiB)
    check_fits(3 * GiB, "the work", "do less")
    with pytest.raises(ValueError, match=r"^the work would need 3\.5 GiB, more than the 3\.0 GiB this process may "
                                         r"still use \(its memory limit: 4\.0 GiB, its container's, job's or "
                                         r"service's\): do less$"):
        check_fits(3.5 * GiB, "the work", "do less")
    monkeypatch.setattr(memory_budget, "available_memory", lambda: None)       # what is free unknown: the limit
    check_fits(4 * GiB, "the work", "do less")
    with pytest.raises(ValueError, match=r"more than the 4\.0 GiB this process may still use"):
        check_fits(5 * GiB, "the work", "do less")
    monkeypatch.setattr(memory_budget, "memory_limit", lambda: 128 * GiB)      # above the machine's: the machine's
    with pytest.raises(ValueError, match=r"more than this machine's 64\.0 GiB: do less"):
        check_fits(65 * GiB, "the work", "do less")


@pytest.mark.cgroup
def test_a_real_memory_limit_refuses_a_model_that_would_pass_it_in_one_line(tmp_path):
    """A real control group with a memory limit of 1 GiB and, inside it, a group without one that
    holds `train` of a model needing about 1.9 GiB for its weights, gradients and moments: one
    line naming the limit, before the model is built, where without the limit the kernel would
    kill the run without a word once it passed 1 GiB. (Root only: `pytest -m cgroup`.)"""
    limits = {"v2": {"memory.max": str(GiB)}, "v1": {"memory.limit_in_bytes": str(GiB)}}
    with real_group("memory", limits) as procs:
        code = ("import sys; from numpy_transformer import memory_budget as m; "
                "print(m.memory_limit(), m.available_memory() <= m.memory_limit()); "
                "from numpy_transformer.cli import main; sys.exit(main(sys.argv[1:]))")
        result = run_in_group(procs, code, "train", "--out", tmp_path / "run", "--dataset", "builtin", "--tokenizer",
                              "word", "--d-model", "1024", "--n-heads", "8", "--d-ff", "4096", "--encoder-layers", "4",
                              "--decoder-layers", "4", "--steps", "1", "--quiet")
    assert result.stdout.splitlines() == [f"{GiB} True"], (result.stdout, result.stderr)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("numpy-transformer train: error: the model, for its weights, gradients and Adam's moments, "
                           "would need "), line
    assert "GiB this process may still use (its memory limit: 1.0 GiB" in line, line
