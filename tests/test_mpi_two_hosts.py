"""`mpiexec` across two hosts: rank 1 on a second host that scripts/two_hosts.sh brings up on this
machine (a network namespace with its own hostname and sshd, a veth link to this one). The
ranks' messages cross the link, and the weights are those of `train --threads 2 --split batch`
bit for bit. Marked `mpi`; skipped without mpi4py, root, network namespaces or sshd
(Debian: apt-get install openssh-server)."""
import os
import re
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from numpy_transformer.benchmarks.mpi_scaling import hostfile_options
from numpy_transformer.training.checkpoint import load_checkpoint
from run_helpers import assert_same_weights, needs_two_cores, run_main, weights
from test_mpi import MPIEXEC, TASKS, TINY, VENDOR, finished, mpiexec, under_mpiexec

TWO_HOSTS = Path(__file__).resolve().parent.parent / "scripts" / "two_hosts.sh"


@pytest.fixture
def host_b(tmp_path):
    """Host B up for the test, down after it: (its name, the environment that lets mpiexec reach
    it, the hostfile for this mpiexec)."""
    if os.geteuid() != 0:
        pytest.skip("a second host in a network namespace needs root")
    if not (shutil.which("ip") and shutil.which("unshare") and Path("/usr/sbin/sshd").exists()):
        pytest.skip("a second host needs iproute2, unshare and sshd (apt-get install openssh-server)")
    if subprocess.run(["unshare", "--net", "--uts", "true"], capture_output=True).returncode != 0:
        pytest.skip("this system does not let root make network namespaces")
    name, folder = f"nt{os.getpid() % 100000}", tmp_path / "hosts"
    script = {**os.environ, "TWO_HOSTS_NAME": name, "TWO_HOSTS_NET": f"10.78.{os.getpid() % 250}"}
    up = subprocess.run(["bash", TWO_HOSTS, "up", folder], env=script, capture_output=True, text=True, timeout=120)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        exported = (folder / "env").read_text().split("export ", 1)[1].split()
        environment = dict(setting.split("=", 1) for setting in exported)
        yield name, environment, folder / ("hosts.openmpi" if VENDOR == "Open MPI" else "hosts.mpich")
    finally:
        subprocess.run(["bash", TWO_HOSTS, "down", folder], env=script, capture_output=True, timeout=60)


def link_bytes(name):
    """Bytes received and sent so far by this host's end of the link to host `name`."""
    statistics = Path("/sys/class/net") / f"veth-{name}" / "statistics"
    return sum(int((statistics / f"{way}_bytes").read_text()) for way in ("rx", "tx"))


@under_mpiexec
@needs_two_cores
def test_mpiexec_on_two_hosts_gives_the_weights_of_threads_2_and_its_messages_cross_the_link(tmp_path, host_b):
    name, environment, hostfile = host_b
    arguments = ["train", *TINY, *TASKS["translation"], "--steps", "7"]
    before = link_bytes(name)
    status, out, err, _ = finished(mpiexec([*arguments, "--out", tmp_path / "mpi"],
                                           options=hostfile_options(MPIEXEC, hostfile), environment=environment))
    crossed = link_bytes(name) - before
    assert status == 0 and err == "", f"exit {status}\nstdout: {out[-3000:]}\nstderr: {err[-3000:]}"
    assert f"processes: 2 MPI ranks ({socket.gethostname()} ×1, {name} ×1)," in out, out
    status, _, err = run_main([*arguments, "--out", tmp_path / "threads", "--threads", "2", "--split", "batch"])
    assert status == 0, err
    under_mpi, threads = load_checkpoint(tmp_path / "mpi"), load_checkpoint(tmp_path / "threads")
    assert under_mpi.step == threads.step == 7
    assert_same_weights(weights(under_mpi.model), weights(threads.model))
    # every step's gradients came over the link and the new weights went back (4 bytes a parameter each way)
    gradient_bytes = sum(p.data.nbytes for p in under_mpi.model.parameters())
    assert crossed > 2 * 7 * gradient_bytes, (crossed, gradient_bytes)



@under_mpiexec
def test_a_rank_stopped_on_host_b_ends_the_two_host_run_in_one_line_and_is_killed(tmp_path, host_b):
    """Rank 1, on host B, stops itself (SIGSTOP) at its 13th shard: rank 0 names it within 10 s,
    saves step 12, and mpiexec ends the stopped rank on host B too (under MPICH only since rank 0
    leaves by MPI_Abort: hydra's proxy of host A killed the ranks of host A alone, and mpiexec
    waited for host B's for ever). Open MPI's prterun adds its report, and a line of PMIx's."""
    from test_mpi import FAILING_RANK, _ended, without_launcher_report

    name, environment, hostfile = host_b
    folder = tmp_path / "run"
    process = mpiexec([13, "stop", "train", *TINY, *TASKS["translation"], "--steps", "100", "--out", folder],
                      script=FAILING_RANK, options=hostfile_options(MPIEXEC, hostfile), environment=environment)
    status, _, err, seconds = finished(process, timeout=60)
    line = without_launcher_report(err, always=True, two_hosts=True).strip()
    assert status == 1 and seconds < 60 and "\n" not in line, err
    pid = re.fullmatch(rf"numpy-transformer train: error: MPI rank 1 on {name} \(pid (\d+)\) has used no processor "
                       rf"time for 10 s \(stopped, blocked, or its host is unreachable\); a checkpoint of step 12 is "
                       rf"in {re.escape(str(folder))}\. Continue with: mpiexec -n 2 numpy-transformer train --out "
                       rf"{re.escape(str(folder))} --resume", line)
    assert pid, line
    assert _ended(int(pid.group(1))), "the stopped rank outlived mpiexec"    # host B shares this machine's pids
    assert load_checkpoint(folder).step == 12
