"""The structured approximation of eqs. (19)–(22) (numpy_transformer/analysis/projection.py,
search.py, structured.py): the projection is the exact minimum (against enumerating every
centre map and every error support of small matrices), never worse than the thesis's random
search, and the thesis's uniqueness claim fails in 2 × 2 counterexamples."""
import itertools

import numpy as np
import pytest
from scipy.optimize import linprog

from numpy_transformer.analysis.families import sigma2_member, sigma3_member
from numpy_transformer.analysis.projection import (assemble, band_support, centre_costs, project_structured)
from numpy_transformer.analysis.search import random_search
from numpy_transformer.analysis.structured import (THESIS_SETTINGS, crop, structured_approximation,
                                                   validation_markdown, validation_table)


def attention_like(n_q, n_k, seed, concentration=0.5):
    return np.random.default_rng(seed).dirichlet(np.full(n_k, concentration), size=n_q)


def centre_maps(n_q, n_k, w, num_pos):
    """Every centre map of Σ1 ∪ Σ2(w) ∪ Σ3(w, num_pos), by enumeration."""
    m = max(n_q, n_k)
    yield tuple(range(n_q))
    for c in itertools.permutations(range(m), n_q):
        if all(abs(c[i] - i) <= w for i in range(n_q)):
            yield c
    if w < 1:
        return
    for k in range(1, num_pos + 1):
        for starts in itertools.combinations(range(n_q - w + 1), k):
            if any(b - a < w for a, b in zip(starts, starts[1:])):
                continue
            for columns in itertools.product(range(n_k), repeat=k):
                c = list(range(n_q))
                for start, column in zip(starts, columns):
                    c[start:start + w] = [column] * w
                yield tuple(c)


def brute_force_distance(H, w, num_pos, s, epsilon):
    """min over every centre map and every choice of at most s error entries per row (rows are
    independent once the centre map is fixed), each entry's value clipped to [−ε, ε]."""
    n_q, n_k = H.shape
    best = np.inf
    for c in centre_maps(n_q, n_k, w, num_pos):
        support = band_support(n_q, n_k, c, w)
        total = 0.0
        for i in range(n_q):
            row_best = np.inf
            for chosen in itertools.combinations(range(n_k), min(s, n_k)):
                x = np.where(support[i], H[i], 0.0)
                for j in chosen:
                    if not support[i, j]:
                        x[j] = np.clip(H[i, j], -epsilon, epsilon)
                row_best = min(row_best, np.abs(H[i] - x).sum())
            total += row_best
        best = min(best, total)
    return best


CASES = [(4, 4, 1, 1, 1, 0.2, 0), (5, 5, 1, 2, 1, 0.1, 1), (5, 5, 1, 1, 2, 0.3, 2), (5, 5, 2, 1, 1, 0.05, 3),
         (5, 5, 0, 2, 1, 0.5, 4), (4, 4, 1, 2, 0, 0.5, 5), (3, 5, 1, 1, 1, 0.2, 6), (5, 3, 1, 1, 1, 0.2, 7)]


@pytest.mark.parametrize("n_q, n_k, w, num_pos, s, epsilon, seed", CASES)
def test_the_projection_is_the_minimum_over_every_centre_map_and_error_support(n_q, n_k, w, num_pos, s, epsilon,
                                                                              seed):
    H = attention_like(n_q, n_k, seed)
    projection = project_structured(H, w, num_pos, s, epsilon)
    assert projection.distance == pytest.approx(brute_force_distance(H, w, num_pos, s, epsilon), abs=1e-12)
    assert projection.distance == pytest.approx(np.abs(H - projection.X).sum())
    assert projection.distance == pytest.approx(min(projection.family_distances.values()))


@pytest.mark.parametrize("seed", range(3))
def test_the_closed_form_of_one_convex_piece_is_its_linear_programs_minimum(seed):
    """Fix the centre map and the error positions: min Σ abs(h − x) over X = B + E, B free on the band,
    abs(e) ≤ ε on the chosen positions, is a linear program (x = b + e, t ≥ ±(h − x))."""
    n, w, epsilon = 5, 1, 0.15
    H = attention_like(n, n, seed)
    centres = np.array([0, 2, 1, 3, 4])
    support = band_support(n, n, centres, w)
    X, _ = assemble(H, centres, w, 1, epsilon)
    errors = (X != 0) & ~support
    free, boxed = np.flatnonzero(support), np.flatnonzero(errors)
    n_x, n_vars = n * n, 2 * n * n
    # variables: x (n²), t (n²); minimise Σ t, t ≥ h − x, t ≥ x − h
    A = np.block([[-np.eye(n_x), -np.eye(n_x)], [np.eye(n_x), -np.eye(n_x)]])
    b = np.concatenate([-H.ravel(), H.ravel()])
    bounds = [(0, 0)] * n_x + [(0, None)] * n_x
    for k in free:
        bounds[k] = (None, None)
    for k in boxed:
        bounds[k] = (-epsilon, epsilon)
    result = linprog(np.r_[np.zeros(n_x), np.ones(n_x)], A_ub=A, b_ub=b, bounds=bounds, method="highs")
    assert len(bounds) == n_vars and result.status == 0
    assert result.fun == pytest.approx(np.abs(H - X).sum(), abs=1e-9)
    assert result.fun == pytest.approx(centre_costs(H, w, 1, epsilon)[np.arange(n), centres].sum(), abs=1e-9)


@pytest.mark.parametrize("w, num_pos", THESIS_SETTINGS)
def test_the_projection_is_never_farther_than_the_random_search(w, num_pos):
    rng = np.random.default_rng(w + 10 * num_pos)
    heads = [attention_like(16, 16, 1), sigma2_member(16, w, 0.3, 0.3, rng), sigma3_member(16, w, num_pos, 0.2, rng)]
    for H in heads:
        searched = random_search(H, w, num_pos, rng, n_samples=20)
        assert project_structured(H, w, num_pos).distance <= searched.distance + 1e-12


def test_a_member_of_the_set_is_its_own_projection():
    rng = np.random.default_rng(5)
    X = sigma3_member(12, 3, 2, 0.4, rng)
    projection = project_structured(X, 3, 2)
    assert projection.distance == pytest.approx(0.0, abs=1e-12) and projection.captured_mass == pytest.approx(1.0)


def test_a_rare_token_head_is_projected_on_sigma3_with_its_window_and_column():
    H = np.eye(12)
    H[1:4] = 0.0
    H[1:4, 11] = 1.0                                  # rows 1 … 3 (a window of w = 3 rows) attend token 11
    projection = project_structured(H, 3, 1, s=0)
    assert projection.family == "Σ3" and projection.distance == 0.0
    assert projection.family_distances["Σ1"] == projection.family_distances["Σ2"] == 3.0   # out of their reach
    assert projection.windows == ((1, 11),)            # (a band centred on 8 … 10 would hold it too)
    assert list(projection.centres) == [0, 11, 11, 11, 4, 5, 6, 7, 8, 9, 10, 11]
    assert projection.stored_entries == (band_support(12, 12, projection.centres, 3)).sum()
    assert projection.n_entries == 144


def test_a_swap_of_neighbours_is_projected_on_sigma2():
    P = np.eye(6)[[1, 0, 2, 4, 3, 5]]
    projection = project_structured(P, 1, 1, s=0)
    assert projection.distance == 0.0
    assert projection.family_distances["Σ2"] == 0.0 and projection.family_distances["Σ1"] == 0.0  # bandwidth 1 holds it
    exact = project_structured(P, 0, 1, s=0)
    assert exact.family_distances["Σ1"] == 4.0 and exact.family_distances["Σ2"] == 4.0   # w = 0: Σ2(0) = {I}


def test_the_family_distances_are_nested_sigma1_above_the_others():
    for seed in range(5):
        d = project_structured(attention_like(9, 9, seed), 1, 2).family_distances
        assert d["Σ2"] <= d["Σ1"] + 1e-12 and d["Σ3"] <= d["Σ1"] + 1e-12


def test_l1_projection_onto_a_convex_set_need_not_be_unique():
    """Theorem 3.1 needs a Hilbert space. In ℓ1, every diag(t, 1 − t), t ∈ [0, 1] (a closed
    convex set) is at distance 1 from I₂; in the Frobenius norm only t = 1/2 is nearest."""
    I = np.eye(2)
    ts = np.linspace(0, 1, 11)
    l1 = [np.abs(I - np.diag([t, 1 - t])).sum() for t in ts]
    frobenius = [np.linalg.norm(I - np.diag([t, 1 - t])) for t in ts]
    assert l1 == pytest.approx(np.ones(11))
    assert np.argmin(frobenius) == 5 and sorted(frobenius)[1] > frobenius[5]


def test_sparse_matrices_are_not_convex_and_their_nearest_point_need_not_be_unique():
    """The thesis's X = {B + E}, B diagonal (w = 0), E with one non-zero: X₁ and X₂ are both at
    distance 1 from H, and their midpoint has two non-zeros: it is not in the set."""
    H = np.array([[0.0, 1.0], [1.0, 0.0]])
    X1, X2 = np.array([[0.0, 1.0], [0.0, 0.0]]), np.array([[0.0, 0.0], [1.0, 0.0]])
    assert np.abs(H - X1).sum() == np.abs(H - X2).sum() == 1.0
    assert np.count_nonzero(((X1 + X2) / 2) - np.diag(np.diag(X1 + X2))) == 2


def test_the_projection_returns_one_of_several_minimisers():
    H = np.array([[0.6, 0.2, 0.2], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    projection = project_structured(H, 0, 0, s=1, epsilon=0.5)
    other = projection.X.copy()
    other[0, 1:] = other[0, 1:][::-1]
    assert not np.array_equal(other, projection.X)
    assert np.abs(H - other).sum() == pytest.approx(projection.distance) == pytest.approx(0.2)


def test_structured_approximation_offers_both_methods():
    H = attention_like(8, 8, 9)
    X, distance = structured_approximation(H, 2, 1, method="projection")
    assert distance == pytest.approx(np.abs(H - X).sum())
    Y, searched = structured_approximation(H, 2, 1, method="random_search", rng=np.random.default_rng(0),
                                           n_samples=10)
    assert searched == pytest.approx(np.abs(H - Y).sum()) and distance <= searched
    with pytest.raises(ValueError, match="method must be one of"):
        structured_approximation(H, 2, 1, method="gradient")


def test_the_random_search_is_reproducible_from_its_generator():
    H = attention_like(8, 8, 2)
    a = random_search(H, 2, 1, np.random.default_rng(4), n_samples=5)
    b = random_search(H, 2, 1, np.random.default_rng(4), n_samples=5)
    assert a.distance == b.distance and a.family == b.family and a.n_drawn == b.n_drawn == 6 * (1 + 3 + 1) * 5
    with pytest.raises(ValueError, match="square"):
        random_search(np.ones((3, 4)) / 4, 1, 1)


def test_the_validation_table_has_both_methods_for_every_setting_and_head():
    heads = {"a": attention_like(20, 20, 0), "b": attention_like(10, 10, 1)}
    rows = validation_table(heads, rng=np.random.default_rng(0), n_samples=5)
    assert [(r.w, r.num_pos, r.head) for r in rows] == [(w, p, h) for w, p in THESIS_SETTINGS for h in "ab"]
    assert [r.n for r in rows[:2]] == [16, 10]                      # 16 × 16 crops
    assert all(r.projection_distance <= r.search_distance for r in rows)
    assert rows[0].search_mean_error == pytest.approx(rows[0].search_distance / 256)
    assert rows[0].mass == pytest.approx(crop(heads["a"]).sum())
    table = validation_markdown(rows)
    assert table.count("\n") == len(rows) + 1 and "random search" in table and "projection" in table


def test_crops_are_the_top_left_square_block():
    H = np.arange(30.0).reshape(5, 6)
    assert np.array_equal(crop(H, 3), H[:3, :3]) and crop(H, 16).shape == (5, 5)


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError, match="w, num_pos, s, epsilon ≥ 0"):
        project_structured(np.eye(3), -1, 1)
