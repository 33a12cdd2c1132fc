"""The thesis's validation of eq. (19) (§3.1.2): how close is a head H to the best of many
random structured matrices? For every family and every point of the grid of coefficients, draw
`n_samples` members (`families.py`) and keep the one nearest to H in the ℓ1 distance of
eq. (22). The table of the thesis reports, per head, that minimum distance and the mean error
per entry, distance / n².

The grid: the coefficient of Ẽ in COEFFICIENTS (0 … 0.5, the thesis's ε = 0.5 the largest),
Σ2's drop-out probability in DROPOUTS. Σ3 uses num_pos windows of w rows (as many as fit).

A random search only ever finds an upper bound on the distance of eq. (21): `projection.py`
computes the minimum itself, over a set that holds every member drawn here.
"""
import dataclasses

import numpy as np

from numpy_transformer.analysis.families import sigma1_member, sigma2_member, sigma3_member
from numpy_transformer.analysis.measures import as_head

COEFFICIENTS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)
DROPOUTS = (0.1, 0.3, 0.5)
N_SAMPLES = 100


@dataclasses.dataclass(frozen=True)
class SearchResult:
    """The nearest member found: X, its distance |H − X|, its family and the grid point
    (coefficient, and drop-out for Σ2) it was drawn at; `n_drawn` members were tried."""
    X: np.ndarray
    distance: float
    family: str
    parameters: dict
    n_drawn: int


def family_draws(n, w, num_pos, rng, coefficients, dropouts):
    """Yield (family, parameters, draw) for every grid point: draw() returns one random member."""
    for coefficient in coefficients:
        yield "Σ1", {"coefficient": coefficient}, lambda c=coefficient: sigma1_member(n, c, rng)
        for dropout in dropouts:
            yield "Σ2", {"coefficient": coefficient, "dropout": dropout}, \
                lambda c=coefficient, p=dropout: sigma2_member(n, w, p, c, rng)
        windows = min(num_pos, n // w) if w >= 1 else 0
        if windows:
            yield "Σ3", {"coefficient": coefficient}, lambda c=coefficient: sigma3_member(n, w, windows, c, rng)


def random_search(H, w, num_pos, rng=None, n_samples=N_SAMPLES, coefficients=COEFFICIENTS, dropouts=DROPOUTS):
    """The best of `n_samples` random members of Σ1, Σ2(w) and Σ3(w, num_pos) at every grid
    point, under |H − X|. H must be square (the thesis's crops). Returns a `SearchResult`."""
    H = as_head(H)
    if H.shape[0] != H.shape[1]:
        raise ValueError(f"random_search draws square members; got a head of shape {H.shape} (crop it square)")
    rng = np.random.default_rng(0) if rng is None else rng
    best, n_drawn = None, 0
    for family, parameters, draw in family_draws(H.shape[0], w, num_pos, rng, coefficients, dropouts):
        for _ in range(n_samples):
            X = draw()
            distance = float(np.abs(H - X).sum())
            n_drawn += 1
            if best is None or distance < best.distance:
                best = SearchResult(X, distance, family, parameters, 0)
    return dataclasses.replace(best, n_drawn=n_drawn)
