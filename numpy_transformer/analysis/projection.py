"""The exact minimiser of eq. (21): the structured matrix nearest to a head in the ℓ1 distance
of eq. (22), |H − X| = Σ_ij abs(h_ij − x_ij).

**The set.** A centre map c sends each row i to a column c(i); P_c is its 0/1 matrix (a 1 at
(i, c(i))), and B is banded with bandwidth w (b_kj = 0 for abs(k − j) > w: the thesis's
w₁ = w₂ = w). Then (P_c B)_ij = b_{c(i), j}: row i of P_c B is a band row centred on column
c(i). The structured matrices are

    X = P_c B + E,     c ∈ Σ1 ∪ Σ2(w) ∪ Σ3(w, num_pos),
                       E with at most s non-zeros per row, each abs(e_ij) ≤ ε,

with three families of centre maps (the thesis's permutation sets, eq. (20)):

    Σ1            c(i) = i                                 positional heads: a band on the diagonal
    Σ2(w)         c a permutation with abs(c(i) − i) ≤ w   syntactic heads: near words trade places
    Σ3(w, m)      c(i) = t_k on at most m disjoint windows  rare-token heads: a window of w rows
                  of w consecutive rows, c(i) = i elsewhere attends token t_k (any column)

Σ1 is the identity of Σ2 and the "no window" case of Σ3, so the families are nested in it.
Every member the generators of `families.py` draw (Σ1, Σ2(w) bands with w₁, w₂ ≤ w, Σ3 with
windows of w rows, Ẽ of one entry ≤ ε per row) lies in this set: the projection's distance is
never above `random_search`'s at the same w, num_pos (and s ≥ 1, ε ≥ the coefficients).

**The minimum for a fixed centre map.** B is free on the support S_c = {(i, j): abs(j − c(i)) ≤ w},
so X = H there. Off S_c an entry is E's or 0; an entry of E at (i, j) costs
abs(h_ij − clip(h_ij, −ε, ε)) instead of abs(h_ij): it saves min(abs(h_ij), ε). The best E takes,
in each row, the s largest savings off the support. Row i centred on c costs, in closed form,

    C[i, c] = Σ_{j ∉ S_c(i)} abs(h_ij)  −  (the s largest min(abs(h_ij), ε), j ∉ S_c(i)),

and the distance of c is Σ_i C[i, c(i)].

**The minimum over each family**, exactly:
- Σ1: one map, Σ_i C[i, i].
- Σ2(w): min over permutations c of Σ_i C[i, c(i)] is a linear assignment problem, the
  entries with abs(c − i) > w forbidden: `scipy.optimize.linear_sum_assignment`.
- Σ3(w, m): a window of rows a … a + w − 1 moved from the diagonal to column t saves
  g_{a,t} = Σ_r (C[r, r] − C[r, t]); let g_a = max_t g_{a,t}. Choosing at most m disjoint
  windows to maximise Σ g_a x_a, x_a ∈ {0, 1}, is an integer program whose constraint matrix
  (one row "the windows covering row r", which are consecutive starts a = r − w + 1 … r, and
  one row "at most m windows") has the consecutive-ones property in every row, so it is
  totally unimodular: the linear relaxation 0 ≤ x ≤ 1 has integral vertices.
  `scipy.optimize.linprog` with the HiGHS dual simplex (which ends on a vertex) solves it exactly.

The minimum over the union is the least of the three; ties go to the simpler family (Σ1, then
Σ2, then Σ3). Rectangular heads (cross-attention, n_q ≠ n_k) work the same way, a centre
being any of max(n_q, n_k) positions, its band clipped to the n_k columns.

**What the thesis's argument needs** (its "existence and uniqueness" after eq. (22)):
- Convexity fails: the matrices with at most s non-zeros per row are not a convex set (the
  mean of two matrices with one non-zero per row, in different columns, has two), and neither
  is a union over permutations. What is convex is each piece with the centre map c and the
  positions of E's entries fixed: an affine subspace (B on S_c) plus a box (abs(e) ≤ ε).
- Existence holds anyway: the set is a finite union of closed convex pieces, the distance
  to each is attained (a continuous coercive function on a closed set of a
  finite-dimensional space), and the least of finitely many minima is the minimum.
- Uniqueness is not given: Theorem 3.1 is about a Hilbert space, and ℓ1 is not a
  Hilbert-space norm (no parallelogram law, not strictly convex). Even on one convex piece
  the nearest point can be a whole segment (diag(t, 1 − t) is at distance 1 from I₂ for every
  t in [0, 1]), and across pieces two supports can tie. tests/test_analysis_projection.py
  holds these 2 × 2 counterexamples. The distance (the minimum) is unique; this code returns
  one minimiser, chosen by the tie-breaking above.
- So the code does not appeal to Theorem 3.1: it minimises exactly over the finite union of
  fixed-pattern convex pieces, by the closed form per row and the two exact combinatorial
  solvers above, and a test checks it against enumerating every piece of small matrices.
"""
import dataclasses

import numpy as np
from scipy.optimize import linear_sum_assignment, linprog

from numpy_transformer.analysis.measures import as_head

FAMILIES = ("Σ1", "Σ2", "Σ3")
DEFAULT_SPARSITY, DEFAULT_EPSILON = 1, 0.5


@dataclasses.dataclass(frozen=True)
class Projection:
    """The nearest structured matrix X to a head H, and what it is made of.

    distance: |H − X| of eq. (22); family: "Σ1", "Σ2" or "Σ3"; centres: c(i) for every row;
    windows: Σ3's (first row, column) pairs; family_distances: the minimum of each family;
    captured_mass: 1 − distance / Σ abs(h), the share of the head that X reproduces;
    stored_entries: the entries X keeps (band entries + error entries), against n_q · n_k."""
    X: np.ndarray
    distance: float
    family: str
    centres: np.ndarray
    windows: tuple
    family_distances: dict
    captured_mass: float
    stored_entries: int
    n_entries: int


def band_support(n_rows, n_cols, centres, w):
    """(n_rows, n_cols) boolean: abs(j − centres[i]) ≤ w, the support of P_c B."""
    return np.abs(np.arange(n_cols)[None, :] - np.asarray(centres)[:, None]) <= w


def centre_costs(H, w, s=DEFAULT_SPARSITY, epsilon=DEFAULT_EPSILON):
    """C (n_q, max(n_q, n_k)): C[i, c] is the least ℓ1 error of row i when it is a band row
    centred on column c plus at most s error entries bounded by ε (module docstring)."""
    A = np.abs(as_head(H))
    n_q, n_k = A.shape
    outside = ~band_support(max(n_q, n_k), n_k, np.arange(max(n_q, n_k)), w)   # (centres, n_k)
    outside_mass = A @ outside.T                                                # (n_q, centres)
    savings = np.where(outside[None], np.minimum(A, epsilon)[:, None, :], 0.0)  # (n_q, centres, n_k)
    best_savings = -np.sort(-savings, axis=-1)[..., :s].sum(axis=-1)
    return outside_mass - best_savings


def assemble(H, centres, w, s=DEFAULT_SPARSITY, epsilon=DEFAULT_EPSILON):
    """X = P_c B + E for the centre map `centres`: H on the band rows, and in each row the s
    largest clipped entries off the band. Returns (X, number of stored entries)."""
    H = as_head(H)
    support = band_support(*H.shape, centres, w)
    X = np.where(support, H, 0.0)
    savings = np.where(support, 0.0, np.minimum(np.abs(H), epsilon))
    rows = np.arange(H.shape[0])[:, None]
    chosen = np.argsort(-savings, axis=1, kind="stable")[:, :s]
    chosen_savings = savings[rows, chosen]
    X[rows, chosen] = np.where(chosen_savings > 0, np.clip(H[rows, chosen], -epsilon, epsilon), X[rows, chosen])
    return X, int(support.sum() + (chosen_savings > 0).sum())


def sigma2_centres(C, w):
    """The permutation c, abs(c(i) − i) ≤ w, minimising Σ_i C[i, c(i)] (linear assignment)."""
    n_rows, n_centres = C.shape
    far = np.abs(np.arange(n_centres)[None, :] - np.arange(n_rows)[:, None]) > w
    rows, centres = linear_sum_assignment(np.where(far, np.inf, C))
    return centres[np.argsort(rows)]


def sigma3_windows(H, C, w, num_pos):
    """At most num_pos disjoint windows of w rows, each with its column, minimising the total
    cost (the integer program of the module docstring, solved as its exact LP). Returns a list of
    (first row, column); among equally good columns, the one the window's rows attend most."""
    n_rows, n_cols = H.shape
    if w < 1 or num_pos < 1 or w > n_rows:
        return []
    starts = np.arange(n_rows - w + 1)
    window_rows = starts[:, None] + np.arange(w)[None, :]                       # (starts, w)
    diagonal = C[np.arange(n_rows), np.arange(n_rows)]
    moved = C[window_rows][..., :n_cols].sum(axis=1)                           # (starts, columns)
    gains = diagonal[window_rows].sum(axis=1)[:, None] - moved
    best_gains = gains.max(axis=1)
    attended = np.abs(H)[window_rows].sum(axis=1)                              # (starts, columns)
    best_columns = np.where(gains >= best_gains[:, None] - 1e-12, attended, -np.inf).argmax(axis=1)
    useful = np.flatnonzero(best_gains > 1e-12)
    if len(useful) == 0:
        return []
    covers = (window_rows[useful][:, :, None] == np.arange(n_rows)).any(axis=1).T   # (rows, useful starts)
    constraints = np.vstack([covers, np.ones((1, len(useful)))])
    bounds = np.append(np.ones(n_rows), num_pos)
    result = linprog(-best_gains[useful], A_ub=constraints, b_ub=bounds, bounds=(0, 1), method="highs-ds")
    if result.status != 0 or not np.allclose(result.x, np.round(result.x), atol=1e-7):
        raise RuntimeError(f"Σ3 window choice: the LP did not end on an integral vertex ({result.message})")
    return [(int(starts[a]), int(best_columns[a])) for a in useful[np.round(result.x) == 1]]


def sigma3_centres(n_rows, windows, w):
    """The centre map of Σ3: the identity, with each window's rows sent to its column."""
    centres = np.arange(n_rows)
    for start, column in windows:
        centres[start:start + w] = column
    return centres


def project_structured(H, w, num_pos, s=DEFAULT_SPARSITY, epsilon=DEFAULT_EPSILON):
    """The `Projection` of H onto {P_c B + E}: the exact minimiser of eq. (21) over
    Σ1 ∪ Σ2(w) ∪ Σ3(w, num_pos) with bandwidth w, at most s error entries per row, each
    bounded by ε (module docstring)."""
    H = as_head(H)
    if w < 0 or num_pos < 0 or s < 0 or epsilon < 0:
        raise ValueError(f"project_structured needs w, num_pos, s, epsilon ≥ 0, got w={w}, num_pos={num_pos}, "
                         f"s={s}, epsilon={epsilon}")
    n_q, n_k = H.shape
    C = centre_costs(H, w, s, epsilon)
    windows = sigma3_windows(H, C, w, num_pos)
    candidates = {"Σ1": np.arange(n_q), "Σ2": sigma2_centres(C, w), "Σ3": sigma3_centres(n_q, windows, w)}
    family_distances = {family: float(C[np.arange(n_q), centres].sum()) for family, centres in candidates.items()}
    family = min(FAMILIES, key=lambda f: (round(family_distances[f], 12), FAMILIES.index(f)))
    X, stored = assemble(H, candidates[family], w, s, epsilon)
    distance, mass = float(np.abs(H - X).sum()), float(np.abs(H).sum())
    return Projection(X, distance, family, candidates[family], tuple(windows) if family == "Σ3" else (),
                      family_distances, 1.0 - distance / mass if mass > 0 else 1.0, stored, H.size)
