"""The study the thesis proposes last: the role of w and num_pos in the structured
approximation I_n P + Ẽ of eq. (19), "as we believe they contain valuable information on the
idiom used" (the thesis's README).

Sweep one parameter, hold the other, and project every head exactly (`project_structured`):

    width_sweep(H, widths=(0, …, 8), num_pos=1)      the curve w ↦ (distance, captured mass)
    num_pos_sweep(H, num_pos_values=(0, …, 5), w=2)  the curve num_pos ↦ (distance, captured mass)
    sweep_heads(weights)                             both curves for every head of (heads, n_q, n_k)

The distance is eq. (22)'s |H − X| divided by the n_q rows, so that sentences of different
lengths average; the captured mass is 1 − |H − X| / Σ abs(h_ij). An attention row sums to 1, so
for attention the two say the same thing: distance per row = 1 − captured mass.

**The knee** of a curve c(v) over increasing values v_0 < v_1 < … (`knee`): the smallest v whose
captured mass reaches 90 % of the gain the sweep can give,

    knee = min { v_k : c(v_k) ≥ c(v_0) + 0.9 (max_k c(v_k) − c(v_0)) },

and v_0 when the curve gains nothing. A head whose rows are bands of half-width 2 has its knee at
w = 2; a head with two rare-token windows, at num_pos = 2 (tests/test_window_study.py). The knee
depends on the swept range (its top is the gain at the largest value), so two curves' knees
compare only over the same range.

The knee also depends on the sentence's shape: a band of half-width w covers 2w + 1 of n columns
whatever the head does. `uniform_like` gives the yardstick, the head that attends uniformly to
every key it may see (the causal mask kept): its knee is what the length alone produces, and a
head's knee means something only where it differs from it.

`bootstrap_difference` says whether two samples of knees (two language pairs, one entry per
sentence) differ by more than their spread: the difference of their means with a percentile
bootstrap interval.
"""
import dataclasses

import numpy as np

from numpy_transformer.analysis.measures import as_head
from numpy_transformer.analysis.projection import DEFAULT_EPSILON, DEFAULT_SPARSITY, project_structured

DEFAULT_WIDTHS = tuple(range(9))
DEFAULT_NUM_POS = tuple(range(6))
WIDTH_NUM_POS, NUM_POS_WIDTH = 1, 2
KNEE_FRACTION = 0.9


@dataclasses.dataclass(frozen=True)
class Curve:
    """One head's sweep: `values` of the swept parameter, and at each the projection's distance
    per query row (|H − X| / n_q) and captured mass (1 − |H − X| / Σ abs(h_ij))."""
    values: np.ndarray
    distance: np.ndarray
    captured: np.ndarray


def projection_curve(H, settings, s=DEFAULT_SPARSITY, epsilon=DEFAULT_EPSILON):
    """(distance per row, captured mass), two arrays of len(settings): the exact projection of
    eq. (21) at every (w, num_pos) of `settings`."""
    H = as_head(H)
    projections = [project_structured(H, w, num_pos, s, epsilon) for w, num_pos in settings]
    return (np.array([p.distance / H.shape[0] for p in projections]),
            np.array([p.captured_mass for p in projections]))


def swept_values(values, name):
    """`values` as a 1-D integer array, strictly increasing and ≥ 0, or a ValueError naming them."""
    values = np.asarray(values)
    if values.ndim != 1 or len(values) == 0 or not np.issubdtype(values.dtype, np.integer) or values[0] < 0 \
            or np.any(np.diff(values) <= 0):
        raise ValueError(f"{name} must be increasing integers ≥ 0, got {values.tolist()}")
    return values


def width_sweep(H, widths=DEFAULT_WIDTHS, num_pos=WIDTH_NUM_POS, s=DEFAULT_SPARSITY, epsilon=DEFAULT_EPSILON):
    """The `Curve` of H over the bandwidths `widths`, num_pos held."""
    widths = swept_values(widths, "widths")
    return Curve(widths, *projection_curve(H, [(int(w), num_pos) for w in widths], s, epsilon))


def num_pos_sweep(H, num_pos_values=DEFAULT_NUM_POS, w=NUM_POS_WIDTH, s=DEFAULT_SPARSITY, epsilon=DEFAULT_EPSILON):
    """The `Curve` of H over the numbers of rare-token windows `num_pos_values`, w held."""
    num_pos_values = swept_values(num_pos_values, "num_pos_values")
    return Curve(num_pos_values, *projection_curve(H, [(w, int(m)) for m in num_pos_values], s, epsilon))


@dataclasses.dataclass(frozen=True)
class HeadSweep:
    """Both sweeps for every head of one attention layer on one sentence: `width` and
    `num_pos` are `Curve`s whose distance and captured arrays are (heads, len(values))."""
    width: Curve
    num_pos: Curve


def stacked(curves):
    """One `Curve` whose arrays stack those of `curves` (same values) along a first axis."""
    return Curve(curves[0].values, np.stack([c.distance for c in curves]), np.stack([c.captured for c in curves]))


def sweep_heads(weights, widths=DEFAULT_WIDTHS, num_pos_values=DEFAULT_NUM_POS, width_num_pos=WIDTH_NUM_POS,
                num_pos_width=NUM_POS_WIDTH, s=DEFAULT_SPARSITY, epsilon=DEFAULT_EPSILON):
    """The `HeadSweep` of weights (heads, n_q, n_k): each head over `widths` (num_pos =
    width_num_pos) and over `num_pos_values` (w = num_pos_width)."""
    weights = np.asarray(weights)
    if weights.ndim != 3:
        raise ValueError(f"weights must be (heads, n_q, n_k), got shape {weights.shape}")
    return HeadSweep(stacked([width_sweep(H, widths, width_num_pos, s, epsilon) for H in weights]),
                     stacked([num_pos_sweep(H, num_pos_values, num_pos_width, s, epsilon) for H in weights]))


def uniform_like(weights):
    """weights (…, n_q, n_k) → the same shape, each row uniform over the keys its row attends
    at all (h_ij > 0: the causal mask's zeros stay zero). A row of zeros stays zero."""
    support = np.asarray(weights) > 0
    count = support.sum(axis=-1, keepdims=True)
    return np.where(support, 1.0 / np.maximum(count, 1), 0.0)


def knee(values, captured, fraction=KNEE_FRACTION):
    """The smallest value whose captured mass reaches `fraction` of the curve's gain (module
    docstring). values: (k,) increasing; captured: (…, k), any leading axes (heads, sentences);
    returns (…) values."""
    values, captured = np.asarray(values), np.asarray(captured, dtype=np.float64)
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    if captured.shape[-1:] != values.shape:
        raise ValueError(f"captured must end with an axis of the {len(values)} values, got shape {captured.shape}")
    start = captured[..., :1]
    threshold = start + fraction * (captured.max(axis=-1, keepdims=True) - start)
    return values[np.argmax(captured >= threshold - 1e-12, axis=-1)]


@dataclasses.dataclass(frozen=True)
class Difference:
    """mean(a) − mean(b) and its bootstrap interval [low, high] at `level`; `differs` when the
    interval excludes 0."""
    difference: float
    low: float
    high: float
    level: float

    @property
    def differs(self):
        return self.low > 0 or self.high < 0


def bootstrap_difference(a, b, rng, n_resamples=2000, level=0.95):
    """The `Difference` of the means of two samples (1-D, e.g. one knee per sentence), each
    resampled with replacement `n_resamples` times from `rng`: the percentile interval."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.ndim != 1 or b.ndim != 1 or len(a) < 2 or len(b) < 2:
        raise ValueError(f"a and b must be 1-D samples of at least 2, got shapes {a.shape} and {b.shape}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    resampled = (a[rng.integers(len(a), size=(n_resamples, len(a)))].mean(axis=1)
                 - b[rng.integers(len(b), size=(n_resamples, len(b)))].mean(axis=1))
    low, high = np.quantile(resampled, [(1 - level) / 2, (1 + level) / 2])
    return Difference(float(a.mean() - b.mean()), float(low), float(high), level)
