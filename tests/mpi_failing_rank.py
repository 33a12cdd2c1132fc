"""`numpy-transformer` under mpiexec with rank 1 failing at its Nth shard (tests/test_mpi.py):

    mpiexec -n 2 python tests/mpi_failing_rank.py N memory|stop|block|kill numpy-transformer-arguments…

memory: rank 1 raises MemoryError there; stop: it stops itself (SIGSTOP), as `kill -STOP` does;
block: its main thread waits for ever (a deadlock);
kill: it kills itself (SIGKILL), as `kill -9` or the out-of-memory killer do."""
import os
import signal
import sys
import threading

from numpy_transformer.cli import main
from numpy_transformer.training import parallel
from numpy_transformer.training.mpi import launched_rank

if launched_rank() == 1:
    computed, failing_at, how = parallel.shard_into, int(sys.argv[1]), sys.argv[2]
    calls = [0]

    def failing_shard_into(*arguments):
        calls[0] += 1
        if calls[0] == failing_at:
            if how == "memory":
                raise MemoryError("Unable to allocate 1.00 TiB for an array")
            if how == "block":
                threading.Event().wait()                  # blocked for good, using no processor time
            os.kill(os.getpid(), signal.SIGSTOP if how == "stop" else signal.SIGKILL)
        return computed(*arguments)
    parallel.shard_into = failing_shard_into

sys.exit(main(sys.argv[3:]))
