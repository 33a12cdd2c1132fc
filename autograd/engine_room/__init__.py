"""The engine room: the optimised forms of code whose plain form lives in `autograd.engine`
(apply and backward), `autograd.functional` or `autograd.optim` (and of the attention weights,
whose plain form is numpy_transformer/attention/scaled_dot_product.py). Each module names the
plain form it replaces and is tested against it; `autograd.plain()` switches them all off. What
each one gains is measured in docs/performance.md, not here.

The core swaps in the fused form of its own equation by file, as autograd does (the attention's
weights: numpy_transformer/attention/); the run machinery and the lab (the shared training
steps, the benchmarks) use the public names below, the rest is each module's own.
"""
import importlib

_PUBLIC = {
    "batch_rows": "dropout_masks",        # the dropout draws of rows start:stop of a batch (a shard)
    "share_updates": "fused_adam",        # an optimizer whose step is dealt between threads
    "SharedUpdates": "fused_adam",
    "balanced_shares": "blocks",          # arrays dealt into n shares of about equal size
    "set_update_block": "blocks",         # the block size of the optimizer's passes (measured per machine)
    "update_block": "blocks",
    "softmax_array": "fused_softmax",     # softmax and log-softmax of plain arrays (decoding)
    "log_softmax_array": "fused_softmax",
    "gradients_into": "reverse_mode",     # backward() writing given leaves' gradients into given arrays
}
__all__ = sorted(_PUBLIC)


def __getattr__(name):
    """The public names, imported when first asked for (the modules import autograd.engine,
    which imports this package)."""
    if name not in _PUBLIC:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_PUBLIC[name]}"), name)
