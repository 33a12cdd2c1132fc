"""Training on P MPI processes: `mpiexec -n P numpy-transformer train …`, on one host or several.

The same shared step as `train --threads P` (training/parallel.py: the same shards, the same
dropout draws, the same sum in the order of the shards); only the transport differs.

                          --threads P (`ForkTransport`)       mpiexec -n P (`MpiTransport`)
    the workers           P − 1 processes forked here         ranks 1 … P − 1, any host
    the model             forked with them                    pickled to them once, at the start
    the weights           shared memory: read as updated      sent after each update (one buffer)
    a step's gradients    written into shared memory          sent to rank 0 (one buffer a worker)
    a silent worker       its processor time, from /proc      its main thread's, sent every 0.1 s

Rank 0 runs `train` exactly as `train --threads P` does: it reads the corpus, writes the run
folder, the log, the progress bar and the printout. Ranks 1 … P − 1 read nothing and print
nothing unless they fail: they answer rank 0's messages (`serve`), with `parallel.answer`, the
function the forked workers use. Each step rank 0 sends every worker its shard and the dropout
generators' states (a few kB), every rank computes its shard's gradient with one BLAS thread,
the workers send theirs into rank 0's slots, rank 0 sums them in shard order, clips, updates,
and the new weights go to every worker before its next message: the weights of `train --threads
P`, bit for bit.

At the start every rank sends rank 0 its package version, a fingerprint of the package's
sources and its command line (`check_agreement`); ranks that differ are refused in one line.
mpi4py is imported only under mpiexec (`launched_size` reads the launcher's environment).

Faults. Every wait of rank 0 (for a reply, or for a long message to be taken) is a loop of
MPI tests: a worker whose processor time has not moved for `parallel.SILENT_SECONDS` of that
waiting (stopped, or its host gone) raises `parallel.WorkerLost` naming its rank and host; a
worker's MemoryError comes back as one. The training loop then saves the last completed step,
rank 0 prints one line, and leaves at once (`finish`, `abort`: by MPI_Abort under MPICH, which
reaches every host's proxy, by exiting under Open MPI): mpiexec then kills the other ranks, a
stopped one on another host included. A rank killed by a signal (kill -9, the out-of-memory killer)
is the launcher's: MPICH's mpiexec (hydra) then kills every rank at once, rank 0 included, so
the last checkpoint is what is kept, and mpiexec's report names the rank's host and pid. Under
`mpiexec -disable-auto-cleanup` it tells the other ranks with SIGUSR1 instead (noted here, not
fatal), and rank 0 takes the rank silent for DEAD_SECONDS for the dead one, saves the last step
and prints its line; in some tries hydra still kills rank 0 at once (a race in hydra), and
the last checkpoint is then what is kept. Ctrl-C and SIGTERM, which MPICH's mpiexec passes to
every rank, are rank 0's to handle (as `train` does); the workers ignore them. Open MPI's
mpiexec (prterun) instead ends every rank within 0.5 s (SIGTERM, then SIGKILL); sent to rank 0
itself, they end the run as `train` does.
"""
import hashlib
import os
import pickle
import signal
import socket
import sys
import threading
import time
from pathlib import Path

from numpy_transformer import __version__

LAUNCH_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE")       # MPICH (hydra) and Intel MPI; Open MPI
RANK_VARIABLES = ("PMI_RANK", "OMPI_COMM_WORLD_RANK")
INSTALL = 'pip install "numpy-transformer[mpi]" (mpi4py and MPICH), or pip install mpi4py mpich'
MESSAGE, REPLY, GRADIENTS, ALIVE = 1, 2, 3, 4                # tags: rank 0 → worker; worker → rank 0
ALIVE_SECONDS = 0.1                                          # a worker reports its processor time this often

_world = None          # the communicator while `mpiexec` runs this process (`use_world`)
_hosts = None          # [(host, pid)] of every rank (`check_agreement`)
_failure_reported = False   # mpiexec said a rank failed (SIGUSR1, under -disable-auto-cleanup)
DEAD_SECONDS = 1.0          # then a rank silent this long is taken for the dead one


def launched_size(environ=None):
    """How many processes mpiexec started with this one (1 when it did not start it), from the
    launcher's environment: nothing is imported."""
    environ = os.environ if environ is None else environ
    for name in LAUNCH_VARIABLES:
        if environ.get(name, "").isdigit():
            return int(environ[name])
    return 1


def launched_rank(environ=None):
    """This process's rank among them (0 when mpiexec did not start it)."""
    environ = os.environ if environ is None else environ
    for name in RANK_VARIABLES:
        if environ.get(name, "").isdigit():
            return int(environ[name])
    return 0


def use_world():
    """MPI's COMM_WORLD (mpi4py imported now), kept for `world`; a ValueError saying what to
    install when mpi4py is missing."""
    global _world
    try:
        from mpi4py import MPI
    except ImportError:
        raise ValueError(f"mpiexec started {launched_size()} processes, but mpi4py is not installed: {INSTALL}") \
            from None
    if MPI.Query_thread() != MPI.THREAD_MULTIPLE:          # a worker reports from a thread of its own
        raise ValueError(f"this MPI ({MPI.Get_library_version().splitlines()[0].strip()}) does not let threads call it "
                         f"at once (MPI_THREAD_MULTIPLE), which training under mpiexec needs: {INSTALL}")
    if hasattr(signal, "SIGUSR1"):
        # mpiexec -disable-auto-cleanup tells the living ranks that one died with SIGUSR1, whose
        # default would end them: noted instead, rank 0 then takes a rank silent for 1 s as dead
        signal.signal(signal.SIGUSR1, _note_failure)
    _world = MPI.COMM_WORLD
    return _world


def _note_failure(signum, frame):
    global _failure_reported
    _failure_reported = True


def world():
    """The communicator of an MPI run (`use_world`), or None: `train` then shares its steps
    between forked processes (--threads)."""
    return _world


def source_fingerprint():
    """A SHA-256 of the package's Python sources (numpy_transformer and autograd), file names
    included: two ranks with the same fingerprint run the same code."""
    digest = hashlib.sha256()
    for package in ("numpy_transformer", "autograd"):
        root = Path(sys.modules[package].__file__).parent
        for path in sorted(root.rglob("*.py")):
            digest.update(str(path.relative_to(root.parent)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def identity(argv):
    """What every rank must share, and where it runs: {version, sources, arguments, host, pid}."""
    import autograd     # noqa: F401 (its sources are fingerprinted)

    return {"version": __version__, "sources": source_fingerprint(), "arguments": list(argv),
            "host": socket.gethostname(), "pid": os.getpid()}


def check_agreement(comm, argv):
    """Every rank's `identity`, gathered on rank 0; returns [(host, pid)] of rank 0, 1, …. A
    rank whose version, sources or command line differ from rank 0's makes every rank raise
    ValueError (rank 0's names the rank, its host and what differs)."""
    everyone = comm.gather(identity(argv), root=0)
    verdict = disagreement(everyone) if comm.rank == 0 else None
    verdict = comm.bcast(verdict, root=0)
    if verdict is not None:
        raise ValueError(verdict)
    global _hosts
    _hosts = [(rank["host"], rank["pid"]) for rank in comm.bcast(everyone, root=0)]
    return _hosts


def hosts():
    """[(host, pid)] of every rank, once `check_agreement` has run (else None)."""
    return _hosts


def disagreement(everyone):
    """One sentence naming the first rank that differs from rank 0 (version, sources or
    arguments), or None when they all agree."""
    first = everyone[0]
    for rank, other in enumerate(everyone[1:], start=1):
        for key, what in (("version", "package version"), ("sources", "source code"), ("arguments", "command line")):
            if other[key] != first[key]:
                shown = (first[key], other[key]) if key != "sources" else (first[key][:12], other[key][:12])
                return (f"MPI rank {rank} on {other['host']} runs another {what} than rank 0 on {first['host']} "
                        f"({shown[1]!r}, rank 0: {shown[0]!r}): install the same numpy-transformer on every host "
                        f"and start every rank with the same arguments")
    return None


class MpiTransport:
    """The workers of `DataParallel` as MPI ranks 1 … P − 1 (the module docstring): the
    interface of `parallel.ForkTransport`. hosts: [(host, pid)] of every rank."""
    paced = False         # a step never runs whole on rank 0: the ranks have cores of their own
    shared_memory = False  # the gradients reach rank 0 as messages, into a slot per rank

    def __init__(self, model, objective, label_smoothing, weights, slots, comm=None, hosts=None):
        self.comm = comm or world()
        self.hosts = hosts or [("?", "?")] * self.comm.size
        if len(slots) != self.comm.size - 1:
            raise ValueError(f"{len(slots) + 1} processes asked for, but mpiexec started {self.comm.size}")
        self.weights, self.slots = weights, slots
        self.stale = False              # the workers hold older weights than rank 0
        self.closed = False
        self.owed = set()               # the workers that owe a reply
        self.silent = set()             # the workers found silent (`finish` then aborts the job)
        self.processor = [None] * self.comm.size
        for number in range(1, self.comm.size):
            self.send(number, ("start", (model, objective, label_smoothing)))

    def name(self, number):
        host, pid = self.hosts[number]
        return f"MPI rank {number} on {host} (pid {pid})"

    def lost(self, number, what):
        """The `parallel.WorkerLost` error of rank `number`, saying `what` happened."""
        from numpy_transformer.training import parallel

        host, pid = self.hosts[number]
        return parallel.WorkerLost(number, pid, what, host=host)

    def updated(self):
        self.stale = True

    def send(self, number, message):
        """Send rank `number` a message (pickled), after the weights when they have changed:
        every worker then takes part in a broadcast of them (one buffer, MPI's tree)."""
        if self.stale:
            self.stale = False
            for other in range(1, self.comm.size):
                self._wait([other], self.comm.isend(("weights", None), dest=other, tag=MESSAGE))
            self._wait(range(1, self.comm.size), self.comm.Ibcast([self.weights.memory, _byte()], root=0))
        self._wait([number], self.comm.isend(message, dest=number, tag=MESSAGE))
        if message is not None and message[0] in ("step", "map", "call"):
            self.owed.add(number)

    def receive(self, number):
        """Rank `number`'s reply; a step's gradients land in its slot (the reply then has a
        third item, True)."""
        reply = self._wait([number], _Arrival(self.comm, number, REPLY))
        self.owed.discard(number)
        if len(reply) == 3:
            self._wait([number], self.comm.Irecv([self.slots[number - 1].memory, _byte()], source=number,
                                                 tag=GRADIENTS))
        return reply[:2]

    def _wait(self, numbers, request):
        """`poll` a request, reading the reports of their processor time of the ranks `numbers`
        meanwhile: `WorkerLost` for one that reports no change for SILENT_SECONDS of this waiting."""
        from numpy_transformer.training import parallel

        numbers, silent = list(numbers), dict.fromkeys(numbers, 0.0)

        def check(waited):
            for number in numbers:
                silent[number] = 0.0 if self._alive(number) else silent[number] + waited
                if _failure_reported and silent[number] >= DEAD_SECONDS:
                    self.silent.add(number)
                    raise self.lost(number, f"ended: mpiexec reported a failed rank, and this one has sent nothing "
                                            f"for {DEAD_SECONDS:g} s (kill -9, or the system's out-of-memory killer?)")
                if silent[number] >= parallel.SILENT_SECONDS:
                    self.silent.add(number)
                    raise self.lost(number, f"has used no processor time for {parallel.SILENT_SECONDS:g} s "
                                            f"(stopped, blocked, or its host is unreachable)")
        return poll(request, check)

    def _alive(self, number):
        """Whether rank `number` reported a processor time other than the last one it reported."""
        changed = False
        while self.comm.iprobe(source=number, tag=ALIVE):
            seconds = self.comm.recv(source=number, tag=ALIVE)
            changed = changed or seconds != self.processor[number]
            self.processor[number] = seconds
        return changed

    def close(self):
        """End the workers' session: a worker that owes a reply is heard first (its reply
        dropped); a lost one is left for `finish`, which then aborts the job. Once only."""
        global _clean
        if self.closed:
            return
        self.closed, clean_before, _clean = True, _clean, False     # unclean until closed in order
        for number in sorted(self.owed - self.silent):
            try:
                self.receive(number)
            except Exception:                        # noqa: BLE001 (a WorkerLost: it is in self.silent)
                continue
        self.stale = False                          # no more steps: the weights need not go out
        for number in range(1, self.comm.size):
            if number not in self.silent:
                try:
                    self.send(number, None)
                except Exception:                    # noqa: BLE001 (as above)
                    pass
        _clean = clean_before and not self.silent


_clean = True           # no worker was lost: `finish` may end the job in order


def poll(request, between=None):
    """Wait for an MPI request (anything with test() → (done, value)) to complete: its value.
    The request is tested with pauses that grow from 10 µs to 1 ms, and between(seconds waited
    since the last call) is called at each: a waiting process sleeps instead of spinning (MPI's
    own waits spin, which on a machine with other work takes a core from it)."""
    pause, clock = 1e-5, time.monotonic()
    while True:
        done, value = request.test()
        if done:
            return value
        if between is not None:
            now = time.monotonic()
            between(min(now - clock, 0.2))
            clock = now
        time.sleep(pause)
        pause = min(2 * pause, 0.001)


class _Arrival:
    """A pickled message from `source` with `tag`, of any size, as a request: test() → (done,
    the message)."""

    def __init__(self, comm, source, tag):
        self.comm, self.source, self.tag = comm, source, tag

    def test(self):
        message = self.comm.improbe(source=self.source, tag=self.tag)
        return (False, None) if message is None else (True, message.recv())


def _byte():
    from mpi4py import MPI

    return MPI.BYTE


def serve(comm):
    """A worker rank (1 … P − 1): answer rank 0's sessions until it sends "end"; the exit
    status (0)."""
    from numpy_transformer.training import parallel

    parallel.threadpool_limits(1, user_api="blas")
    for number in (signal.SIGINT, signal.SIGTERM):             # mpiexec passes Ctrl-C and SIGTERM to every
        signal.signal(number, signal.SIG_IGN)                  # rank: rank 0 handles them, as train does
    session, end = threading.Event(), threading.Event()
    reporter = threading.Thread(target=_report_processor_time, args=(comm, session, end, _main_thread_clock()),
                                daemon=True,
                                name="processor time to rank 0")
    reporter.start()
    while True:
        message = poll(_Arrival(comm, 0, MESSAGE))
        if message == ("end", None):
            end.set()
            reporter.join()
            comm.send(None, dest=0, tag=ALIVE)              # the last report: rank 0 may end MPI
            finalize()
            return 0
        session.set()
        _serve_session(comm, *message[1])
        session.clear()


def _serve_session(comm, model, objective, label_smoothing):
    """Answer "weights", "step", "map" and "call" messages until None."""
    from numpy_transformer.training import parallel

    import numpy as np

    parameters = [p for _, p in model.named_parameters()]
    specs = [(p.shape, p.dtype) for p in parameters]
    weights, slot = parallel.SharedArrays(specs), parallel.SharedArrays(specs)
    for p, array in zip(parameters, weights.arrays):
        np.copyto(array, p.data)
        p.data = array
    while True:
        message = poll(_Arrival(comm, 0, MESSAGE))
        if message is None:
            return
        if message[0] == "weights":
            poll(comm.Ibcast([weights.memory, _byte()], root=0))     # matches rank 0's Ibcast
            continue
        reply = parallel.answer(model, objective, label_smoothing, slot, message)
        gradients = message[0] == "step" and reply[0] == "done"
        poll(comm.isend(reply + (True,) if gradients else reply, dest=0, tag=REPLY))
        if gradients:
            poll(comm.Isend([slot.memory, _byte()], dest=0, tag=GRADIENTS))


def _main_thread_clock():
    """A function of no argument: the processor time of this process's main thread, the one that
    computes (the reporting thread's own time left out, so that a main thread blocked for good
    reads as silent); the whole process's where threads' clocks cannot be read."""
    try:
        clock = time.pthread_getcpuclockid(threading.main_thread().ident)
        return lambda: time.clock_gettime(clock)
    except (AttributeError, OSError):
        return time.process_time


def _report_processor_time(comm, session, end, processor_time):
    """During a session, send rank 0 the main thread's processor time every ALIVE_SECONDS (how
    rank 0 tells a busy worker from a stopped or blocked one), until `end` is set."""
    while not end.wait(ALIVE_SECONDS):
        if session.is_set():
            comm.send(processor_time(), dest=0, tag=ALIVE)


def abort(comm, status):
    """Leave rank 0 now with exit status `status`, the output flushed first, without ending MPI
    in order; mpiexec then kills the other ranks, a stopped one included, and exits non-zero
    (with this status, or that of a rank a signal ended). Under MPICH (and the MPIs built on it)
    by MPI_Abort: a rank that merely exits is noticed only by the mpiexec proxy of its own host,
    which kills the ranks of that host and no other (a stopped rank on another host then kept
    mpiexec waiting for ever); MPI_Abort's own line on standard error is silenced, rank 0's line
    having said what happened. Under Open MPI by leaving (os._exit): its mpiexec
    (prterun) ends every rank on every host when one exits non-zero, and MPI_Abort would add a
    report of its own on standard error."""
    sys.stdout.flush()
    sys.stderr.flush()
    if not _open_mpi():
        os.dup2(os.open(os.devnull, os.O_WRONLY), 2)     # MPI_Abort's own line ("Abort(1) on node 0 …") unsaid
        comm.Abort(status)
    os._exit(status)


def _open_mpi():
    """Whether the MPI library is Open MPI's (else MPICH's, or one built on it: Intel MPI's, whose
    version string does not say MPICH)."""
    from mpi4py import MPI

    return MPI.Get_library_version().strip().startswith("Open MPI")


def finish(comm, status):
    """End an MPI run on rank 0 with exit status `status`: the workers are told to end, or, when
    one was lost (it may be stopped or stuck in a message), `abort`."""
    if not _clean:
        abort(comm, status or 1)
    for number in range(1, comm.size):
        comm.send(("end", None), dest=number, tag=MESSAGE)
    for number in range(1, comm.size):
        if not _heard_last_report(comm, number):
            host, pid = (_hosts or [("?", "?")] * comm.size)[number]
            print(f"MPI rank {number} on {host} (pid {pid}) did not end within {_silent_seconds():g} s of being told "
                  f"to; the run's files are complete", file=sys.stderr)
            abort(comm, status or 1)
    finalize()
    return status


def _heard_last_report(comm, number):
    """Take rank `number`'s reports of its processor time up to its last one (None, sent once it
    has stopped reporting), so that none is left unreceived when MPI ends: MPI_Finalize fails on
    a message never received, and a rank that leaves without ending MPI in order is taken by
    mpiexec for a crash (it then kills every rank). False if the last one does not come within
    SILENT_SECONDS."""
    waited = 0.0

    def count(seconds):
        nonlocal waited
        waited += seconds
        if waited >= _silent_seconds():
            raise TimeoutError

    try:
        while poll(_Arrival(comm, number, ALIVE), count) is not None:
            pass
    except TimeoutError:
        return False
    return True


def _silent_seconds():
    from numpy_transformer.training import parallel

    return parallel.SILENT_SECONDS


def finalize():
    """End MPI in order (MPI_Finalize) now, so that its error, if any, is raised here: mpi4py's own
    hook at the interpreter's exit ignores it, and a rank whose MPI_Finalize fails leaves without
    telling mpiexec, which then kills the other ranks and reports a crash."""
    from mpi4py import MPI

    if not MPI.Is_finalized():
        MPI.Finalize()


def pickled_size(value):
    """Bytes of a message (for `bench scaling`)."""
    return len(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
