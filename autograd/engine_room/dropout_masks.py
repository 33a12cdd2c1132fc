"""Dropout with masks from 16-bit draws, kept as booleans.

Replaces: `autograd.functional.dropout`'s plain form, `keep = rng.random(x.shape) >= p` and
`x ⊙ keep / (1 − p)` through the engine's Mul (`dropout_composite`). Two things change, neither
the map:

- The mask. Every entry takes a 16-bit draw, four from each 64-bit output of rng's bit
  generator (read little-endian, so every machine draws the same masks), where the plain form
  takes a 64-bit float: a quarter of the random bits and one pass. A 16-bit draw realises
  p̃, p rounded to a multiple of 2⁻¹⁶ (`kept_fraction`; |p̃ − p| ≤ 2⁻¹⁷, p = 0.1 keeps
  0.899994), and the kept entries are scaled by 1/(1 − p̃): the expectation stays exactly x.
  p = 0.5, 0.25 or 0.125 are their own p̃. The two samplers draw different masks from one
  generator, by design.
- The op. `Dropout` is x ⊙ m · s as one primitive that keeps m as booleans, one byte an entry,
  where the plain product keeps its float mask in x's dtype (four bytes in float32). x · m is
  exact (m is 0 or 1), so y rounds once, as x ⊙ (m s) does: given the same mask, the two give
  the same values and gradients bit for bit.

A data-parallel step (numpy_transformer/training/parallel.py) computes rows start:stop of a
batch in each process. Inside `batch_rows(start, stop, rows)` a mask whose leading axis holds
those rows takes exactly the draws the whole batch's mask gives them, and leaves the generator
where drawing the whole mask would (`shard_draws`): every process draws its part of the masks a
one-process step draws, so the step's result does not depend on how the batch is split.

tests/test_dropout.py checks both samplers' kept share and expectation, and both ops on one
mask; tests/test_parallel.py checks the masks of every split against the whole batch's. What each
change saves is measured in docs/performance.md.
"""
import contextlib
import math

import numpy as np

from autograd.engine import Function

LEVELS = 1 << 16        # an entry is kept when its 16-bit draw is below (1 − p̃) · LEVELS


def kept_fraction(p):
    """1 − p̃, the probability that an entry is kept: 1 − p rounded to a multiple of 2⁻¹⁶ (so
    |p̃ − p| ≤ 2⁻¹⁷; p = 0.1 keeps 58,982 of the 65,536 values of a 16-bit draw)."""
    return round((1 - p) * LEVELS) / LEVELS


_rows = None      # (start, stop, rows) inside `batch_rows`


@contextlib.contextmanager
def batch_rows(start, stop, rows):
    """Masks drawn inside are rows start:stop of the masks of a batch of `rows` rows (their
    leading axis): what one process of a data-parallel step computes."""
    global _rows
    if not 0 <= start < stop <= rows:
        raise ValueError(f"batch_rows: need 0 ≤ start < stop ≤ rows, got {start}, {stop}, {rows}")
    previous, _rows = _rows, (start, stop, rows)
    try:
        yield
    finally:
        _rows = previous


def keep_mask(shape, kept, rng):
    """The boolean mask m of `shape`: True where an entry is kept, with probability `kept`
    (a multiple of 2⁻¹⁶, from `kept_fraction`), from 16-bit draws of rng's bit generator.
    `kept` = 0 (p = 1) draws nothing. Inside `batch_rows`, rows start:stop of the whole
    batch's mask."""
    if kept == 0:
        return np.zeros(shape, dtype=bool)
    size = math.prod(shape)
    if _rows is None:
        draws = _16bit(rng.bit_generator.random_raw(-(-size // 4)))[:size]
    else:
        draws = shard_draws(rng, shape, *_rows)
    return draws.reshape(shape) <= np.uint16(kept * LEVELS - 1)


def _16bit(raw):
    return raw.astype("<u8", copy=False).view("<u2")


def shard_draws(rng, shape, start, stop, rows):
    """The 16-bit draws of rows start:stop of a mask of (rows, *shape[1:]) entries (shape[0] =
    stop − start), flat: entries [start·r, stop·r) of the whole mask's draws, r = prod(shape[1:]),
    four to a 64-bit output. The generator skips the outputs before them and after them, so it
    ends where drawing the whole mask leaves it."""
    if shape[0] != stop - start:
        raise ValueError(f"a data-parallel step computes rows {start}:{stop} of the batch, but a dropout mask "
                         f"of shape {tuple(shape)} does not have them as its leading axis")
    per_row = math.prod(shape[1:])
    first, end, whole = start * per_row, stop * per_row, rows * per_row
    before, through = first // 4, -(-end // 4)                      # 64-bit outputs
    _skip(rng.bit_generator, before)
    draws = _16bit(rng.bit_generator.random_raw(through - before))[first - 4 * before:end - 4 * before]
    _skip(rng.bit_generator, -(-whole // 4) - through)
    return draws


def _skip(bit_generator, outputs):
    """Move the bit generator on by `outputs` 64-bit outputs: PCG64's `advance` jumps there
    (Philox's counts blocks of four outputs, so other generators draw and drop them)."""
    if outputs == 0:
        return
    if isinstance(bit_generator, (np.random.PCG64, np.random.PCG64DXSM)):
        bit_generator.advance(outputs)
    else:
        for chunk in range(0, outputs, 1 << 20):
            bit_generator.random_raw(min(1 << 20, outputs - chunk))


def dropout_16bit(x, p, rng):
    """x ⊙ m / (1 − p̃) with m ~ Bernoulli(1 − p̃) from 16-bit draws: the engine room's form of
    `autograd.functional.dropout` in training, for 0 < p ≤ 1 and a Tensor x."""
    kept = kept_fraction(p)
    return Dropout.apply(x, keep=keep_mask(x.shape, kept, rng), scale=0.0 if kept == 0 else 1 / kept)


class Dropout(Function):
    """y = x ⊙ m · s with m the boolean mask `keep` and s = 1/(1 − p̃); VJP g ⊙ m · s. Keeps the
    mask as booleans. x · m is exact (m is 0 or 1), so y rounds once, as x ⊙ (m s) does."""

    def forward(self, x, keep, scale):
        self.save_for_backward(keep)
        self.scale = scale
        return self.masked(x, keep)

    def backward(self, g):
        (keep,) = self.saved
        return (self.masked(g, keep),)

    def masked(self, array, keep):
        out = np.multiply(array, keep, dtype=array.dtype)
        out *= np.asarray(self.scale, dtype=array.dtype)
        return out
