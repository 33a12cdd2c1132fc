"""Eq. (19)–(22) in one call, and the thesis's validation table with both methods side by side.

    X, distance = structured_approximation(H, w=3, num_pos=2, method="projection")
    X, distance = structured_approximation(H, w=3, num_pos=2, method="random_search", rng=rng)

- "projection" (the default): the exact minimiser of eq. (21) over Σ1 ∪ Σ2(w) ∪ Σ3(w, num_pos)
  with the sparse error E (`projection.project_structured`);
- "random_search": the thesis's procedure, the best of many random members of the families
  (`search.random_search`), an upper bound on the same minimum.

`validation_table` runs both on the same heads, each cropped to its top-left 16 × 16 block,
for the thesis's settings (w, num_pos) ∈ {(3, 2), (10, 1), (2, 2), (2, 1)}; `mean_validation`
averages such rows over many sentences, one table per model and setting rather than per sentence.
"""
import dataclasses

import numpy as np

from numpy_transformer.analysis.measures import as_head
from numpy_transformer.analysis.projection import DEFAULT_EPSILON, DEFAULT_SPARSITY, project_structured
from numpy_transformer.analysis.search import N_SAMPLES, random_search

METHODS = ("projection", "random_search")
THESIS_SETTINGS = ((3, 2), (10, 1), (2, 2), (2, 1))
CROP_SIZE = 16
MEAN_FIELDS = ("n", "mass", "search_distance", "search_mean_error", "projection_distance", "projection_mean_error",
               "captured_mass")        # the ValidationRow fields that mean_validation averages


def structured_approximation(H, w, num_pos, method="projection", rng=None, s=DEFAULT_SPARSITY,
                             epsilon=DEFAULT_EPSILON, n_samples=N_SAMPLES):
    """(X, distance): a structured matrix X of eq. (19) near the head H, and |H − X| of eq. (22).

    w: the bandwidth of B (and the rows of Σ3's windows); num_pos: Σ3's rare tokens; s, ε: the
    sparse error's entries per row and their bound (projection); rng, n_samples: the random
    search's generator and members per grid point."""
    if method == "projection":
        result = project_structured(H, w, num_pos, s, epsilon)
    elif method == "random_search":
        result = random_search(H, w, num_pos, rng, n_samples)
    else:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    return result.X, result.distance


def crop(H, size=CROP_SIZE):
    """The top-left square block of H, at most size × size: the thesis's 16 × 16 crops."""
    H = as_head(H)
    n = min(size, *H.shape)
    return H[:n, :n]


@dataclasses.dataclass(frozen=True)
class ValidationRow:
    """One head at one setting: both methods' distance and mean error per entry (distance / n²),
    and what the projection chose; `mass` = Σ abs(h_ij) of the crop, the distance of X = 0, the
    yardstick of both."""
    head: str
    w: int
    num_pos: int
    n: int
    mass: float
    search_distance: float
    search_family: str
    projection_distance: float
    projection_family: str
    captured_mass: float
    stored_entries: int

    @property
    def search_mean_error(self):
        return self.search_distance / self.n ** 2

    @property
    def projection_mean_error(self):
        return self.projection_distance / self.n ** 2


def validation_table(heads, settings=THESIS_SETTINGS, crop_size=CROP_SIZE, rng=None, n_samples=N_SAMPLES,
                     s=DEFAULT_SPARSITY, epsilon=DEFAULT_EPSILON):
    """A `ValidationRow` per head and setting. heads: name → (n, n) matrix, cropped square to
    `crop_size`; the random search draws from `rng` (seed 0 by default)."""
    rng = np.random.default_rng(0) if rng is None else rng
    rows = []
    for w, num_pos in settings:
        for name, H in heads.items():
            H = crop(H, crop_size)
            n = H.shape[0]
            found = random_search(H, w, num_pos, rng, n_samples)
            exact = project_structured(H, w, num_pos, s, epsilon)
            rows.append(ValidationRow(name, w, num_pos, n, float(np.abs(H).sum()), found.distance, found.family,
                                      exact.distance, exact.family, exact.captured_mass, exact.stored_entries))
    return rows


def validation_markdown(rows):
    """The validation table as Markdown: the thesis's columns (head, minimum distance, mean
    error per entry) for the random search and for the projection, side by side, and the
    distance of X = 0 for scale."""
    lines = ["| w | num_pos | head | n | X = 0: distance | random search: distance | mean error | family | "
             "projection: distance | mean error | family | captured | stored / n² |",
             "|---:|---:|---|---:|---:|---:|---:|---|---:|---:|---|---:|---|"]
    for r in rows:
        lines.append(f"| {r.w} | {r.num_pos} | {r.head} | {r.n} | {r.mass:.3f} | {r.search_distance:.3f} | "
                     f"{r.search_mean_error:.4f} | {r.search_family} | {r.projection_distance:.3f} | "
                     f"{r.projection_mean_error:.4f} | {r.projection_family} | {r.captured_mass:.1%} | "
                     f"{r.stored_entries}/{r.n ** 2} |")
    return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class MeanValidationRow:
    """One head at one setting over several sentences: the means of the `ValidationRow` fields
    (the mean errors per entry are averaged sentence by sentence), and the share of sentences in
    which the random search came nearer to the head than X = 0."""
    head: str
    w: int
    num_pos: int
    n_sentences: int
    mean_n: float
    mass: float
    search_distance: float
    search_mean_error: float
    projection_distance: float
    projection_mean_error: float
    captured_mass: float
    search_beats_zero: float


def mean_validation(rows):
    """A `MeanValidationRow` per (w, num_pos, head) of `ValidationRow`s from several sentences,
    in the order each first appears."""
    groups = {}
    for row in rows:
        groups.setdefault((row.w, row.num_pos, row.head), []).append(row)
    means = []
    for (w, num_pos, head), group in groups.items():
        fields = [float(np.mean([getattr(row, field) for row in group])) for field in MEAN_FIELDS]
        beats_zero = float(np.mean([row.search_distance < row.mass for row in group]))
        means.append(MeanValidationRow(head, w, num_pos, len(group), *fields, beats_zero))
    return means


def mean_validation_markdown(rows):
    """The mean validation table as Markdown: both methods' mean distance and mean error per
    entry, X = 0's distance for scale, the projection's captured mass, and how often the random
    search beat X = 0."""
    lines = ["| w | num_pos | head | sentences | mean n | X = 0: distance | random search: distance | mean error | "
             "projection: distance | mean error | captured | random search < X = 0 |",
             "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r.w} | {r.num_pos} | {r.head} | {r.n_sentences} | {r.mean_n:.1f} | {r.mass:.3f} | "
                     f"{r.search_distance:.3f} | {r.search_mean_error:.4f} | {r.projection_distance:.3f} | "
                     f"{r.projection_mean_error:.4f} | {r.captured_mass:.1%} | {r.search_beats_zero:.0%} |")
    return "\n".join(lines)
