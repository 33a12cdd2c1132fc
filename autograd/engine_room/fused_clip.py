"""The gradient-norm clip's two passes, a block at a time and on the update's threads.

Replaces: `autograd.optim.grad_norm`'s `np.sum(np.square(g, dtype=np.float64))` for one gradient
after another, which writes a float64 copy of each gradient and reads it back (20 bytes moved
per float32 entry, and a temporary twice the gradient's size), and `clip_grad_norm`'s `g *= scale`,
one gradient after another. Here:

- each gradient's sum of squares is `blocks.sum_of_squares`: float64 squares a block at a time,
  in the cache (4 bytes read per entry), the same value bit for bit (on NumPy 2.3 and newer);
- both passes are dealt between the threads that share the optimizer's update (`threads`, which
  `share_updates` sets: the run's --threads), each gradient whole to one thread;
- the norm is √ of the same per-gradient sums added in the same order as the plain form's.

So the norm and the clipped gradients are the plain form's bit for bit on NumPy 2.3 and newer,
and within a rounding of them on older NumPy (tests/test_optim.py).
"""
import math
from concurrent.futures import ThreadPoolExecutor

from autograd.checks import checked_integer
from autograd.engine_room.blocks import balanced_shares, sum_of_squares, update_block

_pool = {"threads": 1, "executor": None, "size": 0}


def set_threads(threads):
    """The number of threads the clip's passes use from now on (`share_updates` calls it)."""
    _pool["threads"] = checked_integer("threads", threads, low=1)


def grad_norm_in_blocks(grads):
    """√(Σ_i ‖g_i‖²) over the arrays `grads`, summed in float64 (`sum_of_squares` of each, on the
    threads, in blocks of `blocks.update_block()` entries), the per-array sums added in their
    order: a float."""
    block = update_block()
    return math.sqrt(sum(_on_threads(lambda g: sum_of_squares(g, block), grads)))


def scale_in_place(grads, scale):
    """g ← g · scale for every array of `grads`, in place, on the threads."""
    def scale_one(g):
        g *= scale
    _on_threads(scale_one, grads)


def _on_threads(function, arrays):
    """[function(a) for a in arrays], the arrays dealt between the threads by size (the largest
    first, each to the least loaded thread), each array whole to one thread."""
    threads = min(_pool["threads"], len(arrays))
    if threads <= 1:
        return [function(a) for a in arrays]
    if _pool["size"] != _pool["threads"]:
        if _pool["executor"] is not None:
            _pool["executor"].shutdown()
        _pool["executor"] = ThreadPoolExecutor(_pool["threads"], thread_name_prefix="clip")
        _pool["size"] = _pool["threads"]
    results = [None] * len(arrays)

    def run(share):
        for a, i in share:
            results[i] = function(a)
    list(_pool["executor"].map(run, balanced_shares([(a, i) for i, a in enumerate(arrays)], threads)))
    return results
