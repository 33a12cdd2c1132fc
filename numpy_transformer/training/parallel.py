"""Data parallelism: one training step shared by P processes (`train --threads P`, or
`mpiexec -n P numpy-transformer train`).

A step's loss is the mean over the batch's N target tokens, so it splits over any partition of
the batch's rows into shards k = 1 … P with N_k tokens each:

    L  = Σ_k (N_k / N) · L_k          L_k: the mean over shard k's tokens (the objective's loss)
    ∇L = Σ_k (N_k / N) · ∇L_k

`DataParallel` runs P processes: this one and P − 1 workers forked from it, each with one BLAS
thread (threadpoolctl sets it while they run). At every step each computes the forward and
backward of one shard, rows start:stop of the batch, with the dropout masks the whole batch
draws for those rows (`autograd.engine_room.batch_rows`); the workers write their
gradients into shared memory, this process adds them to its own in the order of the shards
(the parameters dealt between P threads), then clips and updates the weights as `train_step`
does (training/loop.py). With two processes there is one set of gradients, in shared memory
(`SharedSum`): each process puts each of its gradients there as soon as it is complete, the
first to finish a parameter's by a copy, the second by adding its own; g_1 + g_2 is the same
sum in either order, and no process holds the other's gradients. The weights themselves live
in shared memory, so the workers read every update without a copy. The validation loss is
shared out the same way, a part of the validation batches to each process, summed in their
order.

What this gives:
- the same step as one process, up to the rounding of sums taken in another order (the
  gradient of every shard is a sum over fewer tokens); tests/test_parallel.py checks it;
- a run that is a function of its seed and its number of processes: the shards and the order
  of the sums depend on nothing else, so a resumed run equals the uninterrupted one;
- none of this in the layers: a worker runs the model's own forward and backward.

Two transports carry the messages, behind one small interface (`ForkTransport`'s docstring):
`ForkTransport`, the workers forked on this machine with the weights and the gradients in
shared memory (what is described here), and `training.mpi.MpiTransport`, the workers as MPI
ranks on any hosts, the gradients sent to this process and the updated weights broadcast to
them (training/mpi.py). The sharing (`shards`, `shard_into`, the ordered `_sum`, the update)
is the same code for both, so they give the same weights bit for bit.

When it pays on one machine: measured there for the model at hand (training/thread_plan.py,
which times a few steps this way and with BLAS's threads in one process instead, and keeps the
answer in the user's cache folder). Narrow models tend to gain: there elementwise work and
Python's overhead per op take much of a step, which BLAS's threads do not share. Under mpiexec
the ranks always share the steps (each may have a host of its own).

A loaded machine. When another job takes a core, P processes that wait for each other at every
step can be slower than one. So a step may also run "here": every shard in this process, one
after the other, each as its worker would compute it (`shard_into`), summed in the same order:
the same numbers, so the run stays a function of its seed and P. `Pace` measures the time per
target token both ways (the other way for 2 steps every 100) and runs the faster.

Supervision. A worker can die (`kill -9`, SIGTERM, the system's out-of-memory killer) or stop
answering (`kill -STOP`). Every wait for a reply (or for a worker to read a long message) is a
wait of at most 0.1 s at a time, between which this process checks the worker: a worker that has ended raises `WorkerLost` naming its
signal or exit status at once; one that owes a reply and has used no processor time for
`SILENT_SECONDS` (10 s of this process's waiting) is stopped or stuck, and raises `WorkerLost`
too. A slow worker never trips it, however slow: it uses processor time while it computes.
The other workers are then stopped; the training loop saves the last completed step
(training/loop.py). Workers are killed by the kernel when this process dies, so none outlives it.

Workers are forked, so this runs on Linux only (`available()`): on macOS the system's libraries,
Accelerate's BLAS among them, are not safe to use in a forked process (which is why Python
starts processes there by spawning them), and Windows cannot fork. There, and in a
mixed-precision or plain-mode (`autograd.plain()`) run, training stays in one process with
BLAS's threads.
"""
import collections
import contextlib
import ctypes
import dataclasses
import math
import mmap
import multiprocessing
import os
import signal
import statistics
import sys
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.reduction import ForkingPickler

import numpy as np
from threadpoolctl import threadpool_limits

from autograd.engine_room import SharedUpdates, balanced_shares, batch_rows, gradients_into
from autograd.optim import clip_grad_norm
from numpy_transformer.training import cores

ALIGNMENT = 64          # bytes: every shared array starts on a cache line
POLL_SECONDS = 0.1      # a wait for a worker's reply checks on the worker this often
SOCKET_ROOM = 65536     # bytes a message to a worker may have without waiting for the worker to read it
SILENT_SECONDS = 10.0   # a worker that owes a reply and uses no processor time this long is stopped or stuck


def available():
    """Whether workers can be forked here: on Linux (see the module docstring)."""
    return sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()


def evaluation_threads(one_thread):
    """A context in which BLAS has one thread if `one_thread` (`train` asks for it after a run
    that split its batches between processes, or while other work keeps the cores busy), for
    `train`'s final evaluation: decoding multiplies a few rows at a time, too little to share
    between BLAS threads, and on a machine where another job takes a core those threads wait for
    each other at every product (docs/performance.md, "Training on more cores"). Else a run
    that gave BLAS the threads keeps them."""
    return threadpool_limits(1, user_api="blas") if one_thread else contextlib.nullcontext()


class SharedArrays:
    """Arrays of the given (shape, dtype) in one block of anonymous shared memory: a process
    forked after it was made reads and writes the same memory."""

    def __init__(self, specs):
        offsets, total = [], 0
        for shape, dtype in specs:
            offsets.append(total)
            total += -(-math.prod(shape) * np.dtype(dtype).itemsize // ALIGNMENT) * ALIGNMENT
        self.memory = mmap.mmap(-1, max(total, ALIGNMENT))
        self.arrays = [np.frombuffer(self.memory, dtype, count=math.prod(shape), offset=offset).reshape(shape)
                       for (shape, dtype), offset in zip(specs, offsets)]


class SharedSum(SharedArrays):
    """The gradients of a step shared by two processes, summed where they lie: one array per
    parameter (the given (shape, dtype) specs) in shared memory, a lock for each, and whether it
    holds a gradient yet. `write` is `gradients_into`'s way to put a process's gradient there:
    the first of the two processes to complete a parameter's gradient copies it in, the second
    adds its own, so the array ends as g_1 + g_2, which is g_2 + g_1 bit for bit. The same
    numbers as a slot per worker summed afterwards (`DataParallel._sum`), with one set of
    gradients in memory instead of two. `wait`: None (a plain wait for a lock), or, in the
    process that watches the other, a function called as wait(done) that calls done() until it
    returns True, raising `WorkerLost` if the other process ends or falls silent meanwhile (it
    may hold the lock)."""

    def __init__(self, specs):
        super().__init__(specs)
        context = multiprocessing.get_context("fork")
        self.locks = [context.Lock() for _ in specs]
        self.written = SharedArrays([((len(specs),), np.uint8)]).arrays[0]
        self.wait = None
        self._index = {id(array): i for i, array in enumerate(self.arrays)}

    def start(self):
        """Before a step: no gradient in yet."""
        self.written[:] = 0

    def write(self, array, gradient):
        """array ← gradient if it holds none yet, else array += gradient (array: one of `arrays`)."""
        i = self._index[id(array)]
        lock = self.locks[i]
        if self.wait is None:
            lock.acquire()
        else:
            self.wait(lambda: lock.acquire(timeout=POLL_SECONDS))
        try:
            if self.written[i]:
                np.add(array, gradient, out=array)
            else:
                np.copyto(array, gradient)
                self.written[i] = 1
        finally:
            lock.release()


class WorkerFailed(RuntimeError):
    """A worker process raised an error or ended."""


class WorkerLost(WorkerFailed):
    """A worker process ended, or stopped answering (see the module docstring, "Supervision"):
    number, pid (and host, for an MPI rank): which one; str(error): one sentence naming it and
    what happened."""

    def __init__(self, number, pid, what, host=None):
        where = f"worker process {number} (pid {pid})" if host is None else f"MPI rank {number} on {host} (pid {pid})"
        super().__init__(f"{where} {what}")
        self.number, self.pid, self.host = number, pid, host


class DataParallel:
    """`processes` processes computing each step's gradients, one shard of the batch each (see
    the module docstring). model: the model being trained (its weights move into shared memory
    until `close`); objective, label_smoothing: the loss (training/loss.py); transport: the
    class of the workers, called as transport(model, objective, label_smoothing, weights,
    slots) (`ForkTransport`, the default, or `training.mpi.MpiTransport`), or a function that
    makes them (a `functools.partial` of one: then every worker has a slot). Use as a context
    manager, or call `close`."""

    def __init__(self, model, objective, label_smoothing, processes, transport=None):
        if processes < 2:
            raise ValueError(f"DataParallel needs at least 2 processes, got {processes}")
        if transport is None and not available():
            raise RuntimeError(f"data parallelism forks its workers, which this project does on Linux only, "
                               f"not on {sys.platform}: train with BLAS's threads (the default elsewhere)")
        self.model, self.objective, self.label_smoothing = model, objective, float(label_smoothing)
        self.processes = processes
        self._blas = threadpool_limits(1, user_api="blas")     # here and, forked, in the workers
        self.parameters = [p for _, p in model.named_parameters()]
        threads = min(processes, cores.usable_cores())        # the sum's threads: the usable cores at most
        self._shares = [[i for _, i in share]                  # the parameters' indices, one list a thread
                        for share in balanced_shares([(p.data, i) for i, p in enumerate(self.parameters)], threads)]
        specs = [(p.shape, p.dtype) for p in self.parameters]
        self.weights = SharedArrays(specs)
        for p, shared in zip(self.parameters, self.weights.arrays):
            np.copyto(shared, p.data)
            p.data = shared
        transport = transport or ForkTransport
        shared_memory = getattr(transport, "shared_memory", False)     # a function that makes one (a partial): slots
        self.sum = SharedSum(specs) if processes == 2 and shared_memory else None
        self.slots = [self.sum] if self.sum is not None else [SharedArrays(specs) for _ in range(processes - 1)]
        self.generators = model.generators()
        self._adders = None
        try:
            self.transport = transport(model, objective, self.label_smoothing, self.weights, self.slots)
        except BaseException:
            self.close()
            raise
        if self.sum is not None:                               # here only: the worker was forked without it
            self.sum.wait = lambda done: self.transport.wait_for(1, done)
        self.pace = Pace(shared_only=not self.transport.paced)

    @property
    def workers(self):
        """The worker processes of the fork transport (an empty list once closed, or over MPI)."""
        return getattr(getattr(self, "transport", None), "workers", [])

    # One step.

    def step_on_batch(self, batch, optimizer, clip_norm, before_update=None):
        """`training.loop.train_step` with the forward and backward shared out: returns (loss,
        gradient norm before clipping); before_update as there. The step runs shared or here
        (`pace`), with the same numbers either way."""
        started, here = time.perf_counter(), self.pace.here()
        self.model.train()
        optimizer.zero_grad()
        loss = self.gradients(batch, here)                     # Σ_k (N_k/N) L_k and ∇ into every .grad
        norm = clip_grad_norm(self.model.parameters(), clip_norm)
        if before_update is None or before_update(loss, norm):
            with _one_thread(optimizer) if here else contextlib.nullcontext():
                optimizer.step()
            self.transport.updated()
        self.pace.took(here, time.perf_counter() - started, batch.n_tokens)
        return loss, norm

    def gradients(self, batch, here=False):
        """The loss of `batch` (a float) with its gradient in every parameter's .grad (which it
        replaces): shard 0 here, the others in the workers (or, `here`, in this process after
        shard 0's), the gradients summed in the order of the shards."""
        for p in self.parameters:
            p.grad = None
        shards = self.shards(batch)
        if len(shards) == 1:                                    # too few rows with targets to share
            loss = self.objective.loss(self.model, batch, self.label_smoothing)
            loss.backward()
            return loss.item()
        states = [generator.bit_generator.state for generator in self.generators]
        if self.sum is not None:
            self.sum.start()
        if here:
            replies = [shard_into(self.model, self.objective, self.label_smoothing, shard, states, slot)
                       for shard, slot in zip(shards[1:], self.slots)]
            _set_states(self.generators, states)
            loss = self._first_shard(shards[0])
        else:
            with self._failing_closes():
                for number, shard in enumerate(shards[1:], start=1):
                    self._send(number, ("step", (shard, states)))
                loss = self._first_shard(shards[0])
                replies = [self._receive(number) for number in range(1, len(shards))]
        for shard_loss, _ in replies:
            loss += shard_loss
        if self.sum is None:
            self._sum(replies, 1 if here else len(self._shares))
        else:
            for p, array, written in zip(self.parameters, self.sum.arrays, self.sum.written):
                p.grad = array if written else None
        return loss

    def _first_shard(self, shard):
        """`shard_backward` of this process's shard; with a `SharedSum`, each gradient put there
        as soon as it is complete."""
        if self.sum is None:
            return shard_backward(self.model, self.objective, self.label_smoothing, shard)
        with gradients_into(zip(self.parameters, self.sum.arrays), self.sum.write):
            loss = shard_backward(self.model, self.objective, self.label_smoothing, shard)
        for p, array in zip(self.parameters, self.sum.arrays):
            if p.grad is not None and p.grad is not array:      # not put there (plain mode): now
                self.sum.write(array, p.grad)
        return loss

    def _sum(self, replies, threads):
        """g ← g_1 + g_2 + … + g_P, parameter by parameter in the order of the shards; the
        parameters dealt between `threads` threads (each sum is the same whichever thread
        takes it)."""
        def add(indices):
            for i in indices:
                p = self.parameters[i]
                for slot, (_, present) in zip(self.slots, replies):
                    if not present[i]:
                        continue
                    if p.grad is None:
                        p.grad = slot.arrays[i].copy()
                    else:
                        p.grad += slot.arrays[i]
        if threads == 1:
            add(range(len(self.parameters)))
            return
        if self._adders is None:
            self._adders = ThreadPoolExecutor(len(self._shares), thread_name_prefix="gradient sum")
        list(self._adders.map(add, self._shares))

    def shards(self, batch):
        """The batch cut into at most `processes` runs of rows, as `Shard`s; fewer when some part
        would hold no target that counts (then one, the whole batch)."""
        rows, pad_id = _rows(batch), self.model.config.pad_id
        bounds = np.linspace(0, rows, min(self.processes, rows) + 1).round().astype(int).tolist()
        shards = [make_shard(batch, start, stop, pad_id) for start, stop in zip(bounds[:-1], bounds[1:])]
        if len(shards) < 2 or any(shard.tokens == 0 for shard in shards):
            return [Shard(0, rows, rows, batch, shards[0].total, shards[0].total)]
        return shards

    # Any work on the model, shared out (the validation loss).

    def map(self, function, items, *arguments):
        """[function(model, item, *arguments) for item in items], the items cut into contiguous
        parts, one per process (this one takes the first); function: a module-level function."""
        items = list(items)
        if self.pace.here():
            return [function(self.model, item, *arguments) for item in items]
        bounds = np.linspace(0, len(items), self.processes + 1).round().astype(int)
        parts = [items[start:stop] for start, stop in zip(bounds[:-1], bounds[1:])]
        with self._failing_closes():
            for number, part in enumerate(parts[1:], start=1):
                self._send(number, ("map", (function, part, arguments)))
            results = [function(self.model, item, *arguments) for item in parts[0]]
            for number in range(1, self.processes):
                results += self._receive(number)
        return results

    def on_workers(self, function, *arguments):
        """[function(model, *arguments) in worker 1, 2, …]: a question for each worker process
        (the benchmarks ask for their peak memory); function: a module-level function."""
        with self._failing_closes():
            for number in range(1, self.processes):
                self._send(number, ("call", (function, arguments)))
            return [self._receive(number) for number in range(1, self.processes)]

    # The workers, through the transport.

    def _send(self, number, message):
        self.transport.send(number, message)

    def _receive(self, number):
        """Worker `number`'s reply: its value; a worker's error raised here (`WorkerFailed`, or
        MemoryError)."""
        kind, value = self.transport.receive(number)
        if kind == "error":
            name, message, trace = value
            if name == "MemoryError":                      # the step is not done: the last one is saved
                raise self.transport.lost(number, f"ran out of memory (MemoryError{': ' + message if message else ''})")
            raise WorkerFailed(f"{self.transport.name(number)} failed: {name}: {message}\n{trace}")
        return value

    @contextlib.contextmanager
    def _failing_closes(self):
        """An exception (Ctrl-C included) between sending work and receiving all of it leaves
        replies unread: the workers are stopped, and the next `DataParallel` starts afresh."""
        try:
            yield
        except BaseException:
            self.close()
            raise

    def close(self):
        """Stop the workers and give the weights back their own memory."""
        if getattr(self, "transport", None) is not None:
            self.transport.close()
        if self._adders is not None:
            self._adders.shutdown()
        self._adders = None
        for p in self.parameters:
            if any(p.data is shared for shared in self.weights.arrays):
                p.data = p.data.copy()
        self.slots, self.sum = [], None
        if self._blas is not None:
            self._blas.restore_original_limits()
            self._blas = None

    def __enter__(self):
        return self

    def __exit__(self, *exception):
        self.close()


class ForkTransport:
    """The workers of `DataParallel` on this machine: P − 1 processes forked from this one, the
    weights and the gradients' slots in memory they share with it; messages through pipes,
    every wait supervised (the module docstring, "Supervision").

    The interface of a transport (training/mpi.py has the other, `MpiTransport`):
    send(number, message), receive(number) → ("done", value) or ("error", (name, message,
    trace)) with a step's gradients in slot number − 1, updated() after every update of the
    weights, name(number), lost(number, what) → a `WorkerLost`, close(); paced: whether a step may run here instead (`Pace`);
    shared_memory: whether the workers write into this process's memory (then two processes sum
    their gradients in one `SharedSum`, and wait_for(number, done) waits on worker `number`)."""
    paced = True
    shared_memory = True

    def __init__(self, model, objective, label_smoothing, weights, slots):
        self.connections, self.workers, self.senders = [], [], []
        context = multiprocessing.get_context("fork")
        for number, slot in enumerate(slots, start=1):
            here, there = context.Pipe()
            worker = context.Process(target=_serve, args=(there, here, model, objective, label_smoothing,
                                                          slot), daemon=True,
                                     name=f"numpy-transformer worker {number}")
            worker.start()
            there.close()
            self.connections.append(here)
            self.workers.append(worker)

    def updated(self):
        """The weights live in shared memory: the workers read the update as it is made."""

    def name(self, number):
        return f"worker process {number}"

    def lost(self, number, what):
        """The `WorkerLost` error of worker `number`, saying `what` happened."""
        return WorkerLost(number, self.workers[number - 1].pid, what)

    def send(self, number, message):
        """Send worker `number` a message; one longer than SOCKET_ROOM (which may have to wait
        for the worker to read it) is sent by a thread while this one watches the worker."""
        # bytes, not the view of a BytesIO that dumps() gives: a worker lost while it is sent
        # leaves the view in the frames of a traceback, and where those end up in a reference
        # cycle the collector closes the BytesIO under it ("Exception ignored … BufferError" on
        # stderr, seen on Python 3.13)
        connection, data, failed = self.connections[number - 1], bytes(ForkingPickler.dumps(message)), []

        def send():
            try:
                connection.send_bytes(data)
            except OSError:
                failed.append(True)
        if len(data) <= SOCKET_ROOM:
            send()
        else:
            sender = threading.Thread(target=send, name="message to a worker", daemon=True)
            sender.connection = connection
            self.senders.append(sender)
            sender.start()
            self._wait(number, lambda: sender.join(POLL_SECONDS) or not sender.is_alive())
            self.senders.remove(sender)
        if failed:
            raise self._ended(number) from None

    def receive(self, number):
        """Worker `number`'s reply, waited for POLL_SECONDS at a time (`_wait`)."""
        connection = self.connections[number - 1]
        try:
            self._wait(number, lambda: connection.poll(POLL_SECONDS))    # True also when the worker's end closed
            return connection.recv()
        except (EOFError, OSError):
            raise self._ended(number) from None

    def wait_for(self, number, done):
        """`_wait`, and `WorkerLost` as soon as worker `number` has ended (for a lock it may have held,
        which no reply will say)."""
        worker = self.workers[number - 1]

        def done_or_ended():
            if done():
                return True
            if worker.exitcode is not None:
                raise self._ended(number)
            return False
        self._wait(number, done_or_ended)

    def _wait(self, number, done):
        """Call done() (which waits up to POLL_SECONDS) until it returns True; `WorkerLost` when
        worker `number` stays silent meanwhile (the module docstring, "Supervision")."""
        worker = self.workers[number - 1]
        silence = _Silence(worker.pid)
        while not done():
            if silence.longer_than(SILENT_SECONDS):
                worker.kill()
                raise WorkerLost(number, worker.pid, f"{silence.state}: it has used no processor time for "
                                                     f"{SILENT_SECONDS:g} s")

    def _ended(self, number):
        worker = self.workers[number - 1]
        worker.join(timeout=1)
        return WorkerLost(number, worker.pid, _ending(worker.exitcode))

    def close(self):
        """Stop the workers."""
        for connection in self.connections:
            with contextlib.suppress(OSError, ValueError):
                connection.send(None)
        for worker in self.workers:
            if _processor_ticks(worker.pid)[1] not in ("T", "t"):     # a stopped worker would not read None
                worker.join(timeout=5)
            if worker.is_alive():
                worker.kill()                               # SIGKILL: also ends a stopped worker
                worker.join()
        # A thread left writing to a worker that failed ends now that no worker reads (the pipe
        # is broken); closing its connection under it would have it write to a closed, or
        # reused, descriptor.
        for sender in self.senders:
            sender.join(timeout=5)
        for connection in self.connections:
            if not any(sender.is_alive() and sender.connection is connection for sender in self.senders):
                connection.close()
        self.connections, self.workers, self.senders = [], [], []


class Pace:
    """Whether the next step runs shared between the processes or here, every shard in this
    process one after the other (`shard_into` either way, so the numbers are the same): the way
    that took less time per target token over its last SAMPLES steps. The other way is tried
    again for TRIAL_STEPS steps every TRIAL_EVERY steps, so the choice follows the machine's
    load: with a core taken by another job, processes that wait for each other at every step
    can be slower than one (docs/performance.md, "Training on more cores")."""
    WARM_UP, SAMPLES, TRIAL_EVERY, TRIAL_STEPS = 2, 5, 100, 2

    def __init__(self, shared_only=False):
        self.shared_only = shared_only                # never here (the MPI transport: see training/mpi.py)
        self.steps, self.choice = 0, False
        self.seconds_per_token = {False: collections.deque(maxlen=self.SAMPLES),     # shared
                                  True: collections.deque(maxlen=self.SAMPLES)}      # here

    def here(self):
        """Whether the next step (or validation) runs here: the faster way so far, but the other
        one during a trial (from step 10 on, the first TRIAL_STEPS of every TRIAL_EVERY)."""
        if self.shared_only:
            return False
        return self.choice != bool(self._trial())

    def took(self, here, seconds, tokens):
        """A step ran `here` (or shared) on `tokens` target tokens in `seconds`."""
        if self.steps >= self.WARM_UP and tokens > 0:
            self.seconds_per_token[here].append(seconds / tokens)
        self.steps += 1
        if self._trial() == 1:                      # a trial starts: forget the other way's older times
            self.seconds_per_token[not self.choice].clear()
        if not self._trial():
            shared, here = (self.seconds_per_token[way] for way in (False, True))
            self.choice = bool(shared and here) and statistics.median(here) < statistics.median(shared)

    def _trial(self):
        """0 outside a trial, else which step of the trial the next one is (1, 2, …)."""
        into = (self.steps - 10) % self.TRIAL_EVERY + 1
        return into if self.steps >= 10 and into <= self.TRIAL_STEPS else 0


class Shard:
    """Rows start:stop of a batch of `rows` rows (`batch`: those rows only), with `tokens` of the
    whole batch's `total` targets that count."""

    def __init__(self, start, stop, rows, batch, tokens, total):
        self.start, self.stop, self.rows, self.batch, self.tokens, self.total = start, stop, rows, batch, tokens, total


def make_shard(batch, start, stop, pad_id):
    """The `Shard` of rows start:stop of `batch` (pad_id: the translation targets' padding)."""
    counted = _counted_per_row(batch, pad_id)
    tokens = int(counted[start:stop].sum())
    return Shard(start, stop, _rows(batch), _slice(batch, start, stop, tokens), tokens, int(counted.sum()))


def shard_backward(model, objective, label_smoothing, shard):
    """(N_k / N) · L_k of one shard, its gradient accumulated into .grad: a float. The dropout
    masks are the shard's rows of the whole batch's (`batch_rows`)."""
    with batch_rows(shard.start, shard.stop, shard.rows):
        loss = objective.loss(model, shard.batch, label_smoothing) * (shard.tokens / shard.total)
    loss.backward()
    return loss.item()


def shard_into(model, objective, label_smoothing, shard, states, slot):
    """A worker's part of a step: the shard's (N_k / N) · L_k, from the dropout generators'
    `states` at the step's start, its gradient put into `slot` (`SharedArrays`, one array per
    parameter, copied there; or a `SharedSum`, summed there). Returns (loss, [whether each
    parameter has a gradient]); every .grad is None after."""
    parameters = [p for _, p in model.named_parameters()]
    write = slot.write if isinstance(slot, SharedSum) else np.copyto
    _set_states(model.generators(), states)
    for p in parameters:
        p.grad = None
    with gradients_into(zip(parameters, slot.arrays), write):     # each gradient put there when complete
        loss = shard_backward(model, objective, label_smoothing, shard)
    present = [p.grad is not None for p in parameters]
    for p, grad in zip(parameters, slot.arrays):
        if p.grad is not None and p.grad is not grad:       # not put there (plain mode): now
            write(grad, p.grad)
        p.grad = None
    return loss, present


@contextlib.contextmanager
def one_core(optimizer):
    """BLAS and the optimizer's update on one thread while in the context: each step as `train
    --threads 1` computes it, with the same numbers (the update's do not depend on its threads),
    for a run that starts while other work keeps the cores busy (training/thread_plan.py)."""
    with threadpool_limits(1, user_api="blas"), _one_thread(optimizer):
        yield


@contextlib.contextmanager
def _one_thread(optimizer):
    """The update of an optimizer shared between threads (`SharedUpdates`) made on one thread
    while in the context (its result does not depend on the threads: autograd/optim.py)."""
    if not isinstance(optimizer, SharedUpdates):
        yield
        return
    kept, optimizer.threads = optimizer.threads, 1
    try:
        yield
    finally:
        optimizer.threads = kept


def _set_states(generators, states):
    for generator, state in zip(generators, states):
        generator.bit_generator.state = state


def answer(model, objective, label_smoothing, slot, message):
    """A worker's reply to a "step", "call" or "map" message (kind, value): ("done", result), or
    ("error", (name, message, trace)) when the work raised. A step's gradients go into `slot`
    (`shard_into`)."""
    kind, value = message
    try:
        if kind == "step":
            shard, states = value
            model.train()
            return "done", shard_into(model, objective, label_smoothing, shard, states, slot)
        if kind == "call":
            function, arguments = value
            return "done", function(model, *arguments)
        function, part, arguments = value
        return "done", [function(model, item, *arguments) for item in part]
    except Exception as error:                             # noqa: BLE001 (sent to the main process)
        return "error", (type(error).__name__, str(error), traceback.format_exc())


def _serve(connection, parents_end, model, objective, label_smoothing, slot):
    """A worker: answers "step", "call" and "map" messages until it reads None or its pipe closes."""
    parents_end.close()
    _die_with(multiprocessing.parent_process().pid)
    threadpool_limits(1, user_api="blas")
    signal.signal(signal.SIGINT, signal.SIG_IGN)       # Ctrl-C is the main process's to handle
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    while True:
        try:
            message = connection.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        reply = answer(model, objective, label_smoothing, slot, message)
        try:
            connection.send(reply)
        except (BrokenPipeError, OSError):
            return


class _Silence:
    """How long a process has used no processor time, counted in the waits of this one: a wait
    longer than twice POLL_SECONDS (this process was itself stopped, or starved of processor
    time) counts as one of POLL_SECONDS. state: the process's state in words."""

    def __init__(self, pid):
        self.pid, self.seconds, self.state = pid, 0.0, "is silent"
        self.ticks, self.clock = None, None                # read at the first wait (most replies need none)

    def longer_than(self, seconds):
        ticks, state = _processor_ticks(self.pid)
        now = time.monotonic()
        if ticks is None or ticks != self.ticks:
            self.seconds = 0.0
        else:
            self.seconds += min(now - self.clock, 2 * POLL_SECONDS)
        self.ticks, self.clock = ticks, now
        self.state = PROCESS_STATES.get(state, "is silent")
        return self.seconds >= seconds


PROCESS_STATES = {"T": "is stopped (SIGSTOP, or Ctrl-Z)", "t": "is stopped by a debugger",
                  "D": "is blocked in the kernel (waiting for the disk or for memory)"}


def _processor_ticks(pid):
    """(user + system processor time in clock ticks, state letter) of a process, from
    /proc/PID/stat; (None, None) when it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as file:
            fields = file.read().rsplit(")", 1)[1].split()      # after "pid (name)"
        return int(fields[11]) + int(fields[12]), fields[0]
    except (OSError, IndexError, ValueError):
        return None, None


def _ending(exitcode):
    """How a worker ended, from its exit code (−N: killed by signal N)."""
    if exitcode is None:
        return "closed its connection"
    if exitcode < 0:
        name = signal.Signals(-exitcode).name if -exitcode in signal.valid_signals() else f"signal {-exitcode}"
        why = " (kill -9, or the system's out-of-memory killer)" if -exitcode == signal.SIGKILL else ""
        return f"was killed by {name}{why}"
    return f"ended with exit status {exitcode}"


def _die_with(parent):
    """Ask the kernel to kill this process (SIGKILL) when its parent ends (Linux's
    PR_SET_PDEATHSIG), so that a worker never outlives the training process, stopped or not."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))     # 1: PR_SET_PDEATHSIG
    if os.getppid() != parent:                             # the parent ended before the request
        os._exit(1)


def _rows(batch):
    return len(batch.src) if hasattr(batch, "src") else len(batch.inputs)


def _counted_per_row(batch, pad_id):
    """How many targets of each row enter the loss."""
    if hasattr(batch, "tgt_out"):
        return (batch.tgt_out != pad_id).sum(axis=1)
    return (batch.targets != batch.ignore_index).sum(axis=1)


def _slice(batch, start, stop, tokens):
    """The batch of rows start:stop, with `tokens` targets that count (every array with a row
    per example is cut)."""
    rows = _rows(batch)
    cut = {field.name: getattr(batch, field.name)[start:stop] for field in dataclasses.fields(batch)
           if isinstance(getattr(batch, field.name), np.ndarray) and len(getattr(batch, field.name)) == rows}
    return dataclasses.replace(batch, n_tokens=tokens, **cut)
