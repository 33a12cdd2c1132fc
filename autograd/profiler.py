"""An opt-in profiler: wall time and calls per primitive op, forward and backward.

    import autograd
    with autograd.profile() as prof:
        loss = model(src, tgt_in) ...; loss.backward()
    print(prof.table())

While a `profile()` block runs, the engine room's form of `Function.apply` and `Tensor.backward`
(autograd/engine_room/reverse_mode.py) times every `forward` and every VJP (`backward`) of every
primitive; outside one it checks a single global (`reverse_mode._profiler is None`) and does
nothing else, so profiling costs nothing when it is off. Inside `autograd.plain()` nothing is timed.
The time not spent inside an op (module code, `Function.apply`'s bookkeeping, the optimizer if
it runs in the block) is reported as "outside ops": it is the overhead Python adds per op.
"""
import time
from collections import defaultdict
from contextlib import contextmanager

from autograd.engine_room import reverse_mode


class Profile:
    """Calls and seconds per (op name, "forward" | "backward"), and the block's wall time."""

    def __init__(self):
        self.calls = defaultdict(int)
        self.seconds = defaultdict(float)
        self.wall_seconds = 0.0

    def timed(self, op, phase, function, *args, **kwargs):
        """function(*args, **kwargs), its duration added to (op, phase)."""
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            self.seconds[op, phase] += time.perf_counter() - start
            self.calls[op, phase] += 1

    @property
    def op_seconds(self):
        return sum(self.seconds.values())

    def rows(self):
        """[(op, forward calls, forward s, backward calls, backward s)], slowest (total) first."""
        ops = {op for op, _ in self.calls}
        rows = [(op, self.calls[op, "forward"], self.seconds[op, "forward"],
                 self.calls[op, "backward"], self.seconds[op, "backward"]) for op in ops]
        return sorted(rows, key=lambda row: -(row[2] + row[4]))

    def table(self, top=None, per=1):
        """A text table of `rows()` (the `top` slowest, or all), with the share of the wall time
        each op takes and the time spent outside ops. With `per`, the number of times the block
        ran the same work (training steps, say), calls and milliseconds are given per run."""
        wall = max(self.wall_seconds, 1e-12)
        lines = [f"{'op':<16} {'fwd calls':>9} {'fwd ms':>9} {'bwd calls':>9} {'bwd ms':>9} {'total ms':>9} "
                 f"{'share':>6}"]
        for op, forward_calls, forward, backward_calls, backward in self.rows()[:top]:
            lines.append(f"{op:<16} {forward_calls / per:>9g} {forward * 1e3 / per:>9.2f} {backward_calls / per:>9g} "
                         f"{backward * 1e3 / per:>9.2f} {(forward + backward) * 1e3 / per:>9.2f} "
                         f"{(forward + backward) / wall:>6.1%}")
        outside = self.wall_seconds - self.op_seconds
        calls = sum(self.calls.values())
        lines.append(f"{'outside ops':<16} {'':>9} {'':>9} {'':>9} {'':>9} {outside * 1e3 / per:>9.2f} "
                     f"{outside / wall:>6.1%}")
        lines.append(f"{calls / per:g} op calls in {self.wall_seconds * 1e3 / per:.1f} ms of wall time"
                     + (f" (per run, the mean of {per})" if per != 1 else ""))
        return "\n".join(lines)


@contextmanager
def profile():
    """Profile every op run inside the block; yields the `Profile` (read it after the block)."""
    if reverse_mode._profiler is not None:
        raise RuntimeError("profile(): a profile is already running (profiles do not nest)")
    result = Profile()
    reverse_mode._profiler = result
    start = time.perf_counter()
    try:
        yield result
    finally:
        result.wall_seconds = time.perf_counter() - start
        reverse_mode._profiler = None
