"""The engine room: the optimised forms of code whose plain form lives in `autograd.engine`
(apply and backward), `autograd.functional` or `autograd.optim` (and of the attention weights,
whose plain form is numpy_transformer/attention/scaled_dot_product.py). Each module names the
plain form it replaces and is tested against it; `autograd.plain()` switches them all off. What
each one gains is measured in docs/performance.md, not here."""
