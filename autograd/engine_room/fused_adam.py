"""Adam's and AdamW's update in place, a block at a time, and the updates shared between threads.

Replaces: `autograd.optim.Adam._adam_step` (and AdamW's decay before it), the update written as
the formulas with whole-array NumPy expressions, one parameter after another. Two changes:

- In place, in blocks. The update is a dozen elementwise passes over the parameter, its gradient
  and its two moments. `adam_update_in_blocks` makes them a block of entries at a time
  (`autograd.engine_room.blocks`), into one scratch buffer, so that a block's arrays stay in the
  core's cache from the first pass to the last. Every entry goes through the plain form's
  operations in the plain form's order: the parameters and moments are the same bit for bit.
- Threads (any optimizer's). `share_updates` wraps an optimizer so that its step deals the
  parameters between threads (`balanced_shares`), each parameter updated whole by one thread,
  instead of `Optimizer.step`'s one after another; NumPy releases the interpreter lock inside
  its loops, so they run on separate cores. The result does not depend on the number of threads.

tests/test_optim.py checks both against the plain form, bit for bit; docs/performance.md
measures what they save.
"""
import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from autograd.checks import checked_integer
from autograd.engine_room import fused_clip
from autograd.engine_room.blocks import balanced_shares, blocks, update_block
from autograd.plain_mode import is_plain


def adam_update_in_blocks(p, g, state, lr, beta1, beta2, eps, weight_decay, decoupled, block=None):
    """One Adam step on the array p (in place), with gradient g and `state` (step, exp_avg,
    exp_avg_sq, updated in place). weight_decay λ: added to the gradient as λ p (Adam's L2), or,
    `decoupled`, applied as p ← p (1 − lr λ) before the step (AdamW). block: entries a block
    (default `blocks.update_block()`); the values do not depend on it."""
    state["step"] += 1
    t = state["step"]
    step_size, root_correction = lr / (1 - beta1 ** t), math.sqrt(1 - beta2 ** t)
    scratch = np.empty(0, p.dtype)
    for p_, g_, m, v in blocks(p, g, state["exp_avg"], state["exp_avg_sq"], block=block or update_block()):
        if scratch.size < p_.size:
            scratch = np.empty(p_.size, p.dtype)                     # one buffer for every block
        update = scratch[:p_.size].reshape(p_.shape)
        if weight_decay and decoupled:
            p_ *= 1 - lr * weight_decay
        elif weight_decay:
            g_ = g_ + weight_decay * p_
        m *= beta1                                       # m ← β1 m + (1 − β1) g
        np.multiply(g_, 1 - beta1, out=update)
        m += update
        v *= beta2                                       # v ← β2 v + (1 − β2) g²
        np.square(g_, out=update)
        update *= 1 - beta2
        v += update
        np.sqrt(v, out=update)                           # update ← lr m̂ / (√v̂ + ε)
        update /= root_correction
        update += eps
        np.divide(m, update, out=update)
        update *= step_size
        p_ -= update


def share_updates(optimizer, threads):
    """`optimizer` (an `autograd.optim.Optimizer`) whose step shares its updates between `threads`
    threads: itself for one thread, else wrapped in `SharedUpdates`. The gradient clip's passes
    (`autograd.engine_room.fused_clip`) take the same number of threads from now on."""
    threads = checked_integer("threads", threads, low=1)
    fused_clip.set_threads(threads)
    return optimizer if threads == 1 else SharedUpdates(optimizer, threads)


class SharedUpdates:
    """Wraps an optimizer's `step()`: the same updates (`Optimizer.update` of every parameter that
    has a gradient), on `threads` threads (created at the first step): each thread takes a share
    of the parameters (`balanced_shares`) and updates each of its parameters whole. Inside
    `autograd.plain()`, the optimizer's own step. Everything else (its state, learning rate,
    checkpoints) is the wrapped optimizer's."""

    def __init__(self, optimizer, threads):
        self.optimizer, self.threads = optimizer, threads
        self._pool = None

    def __getattr__(self, name):
        return getattr(self.__dict__["optimizer"], name)

    def step(self):
        if is_plain():
            return self.optimizer.step()
        updates, lr = self.optimizer.start_step()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="optimizer")
        update = self.optimizer.update
        shares = self._pool.map(lambda share: [update(p, g, state, lr) for p, g, state in share],
                                balanced_shares(updates, self.threads))
        list(shares)                                        # waits, and raises what a thread raised
