"""The shape measures of one head (numpy_transformer/analysis/measures.py) on matrices whose
answers are known: the identity, a shifted diagonal, a band, a single column, a uniform head."""
import numpy as np
import pytest

from numpy_transformer.analysis.measures import (band_mass, column_masses, diagonal_mass, head_measures,
                                                 numerical_rank, offset_masses, row_entropy, singular_values,
                                                 spectral_norm, uniform_head)

N = 8


def shifted(n, k):
    """Row i attends i + k (row n − 1 − k … n − 1 attend themselves where i + k falls off)."""
    H = np.zeros((n, n))
    for i in range(n):
        H[i, i + k if 0 <= i + k < n else i] = 1.0
    return H


def band(n, w):
    k = np.abs(np.arange(n)[None, :] - np.arange(n)[:, None])
    B = (k <= w).astype(float)
    return B / B.sum(axis=1, keepdims=True)


def single_column(n, j):
    H = np.zeros((n, n))
    H[:, j] = 1.0
    return H


def test_the_identity_has_all_its_mass_on_the_diagonal_and_none_elsewhere():
    I = np.eye(N)
    assert diagonal_mass(I) == 1.0 and diagonal_mass(I, 1) == 0.0 and diagonal_mass(I, -1) == 0.0
    ks, masses = offset_masses(I)
    assert list(ks) == list(range(-(N - 1), N)) and masses[ks == 0] == 1.0 and masses.sum() == pytest.approx(1)
    assert band_mass(I, 0) == 1.0


def test_a_previous_token_head_has_its_mass_on_offset_minus_one():
    H = shifted(N, -1)
    assert diagonal_mass(H, -1) == pytest.approx((N - 1) / N)
    assert diagonal_mass(H, 0) == pytest.approx(1 / N)
    measures = head_measures(H)
    assert measures.dominant_offset == -1 and measures.dominant_offset_mass == pytest.approx((N - 1) / N)


def test_a_band_of_bandwidth_w_has_all_its_mass_inside_the_band_and_spreads_it_over_the_diagonals():
    H = band(N, 2)
    assert band_mass(H, 2) == pytest.approx(1.0)
    assert band_mass(H, 1) < 1.0
    assert diagonal_mass(H, 0) == pytest.approx(np.mean(1 / (np.minimum(np.arange(N), 2) + np.minimum(N - 1 - np.arange(N), 2) + 1)))
    assert diagonal_mass(H, 3) == 0.0


def test_a_single_column_collects_all_the_mass_and_has_rank_one_and_norm_root_n():
    H = single_column(N, 5)
    masses = column_masses(H)
    assert masses[5] == 1.0 and masses.sum() == pytest.approx(1.0)
    assert numerical_rank(H) == 1
    assert spectral_norm(H) == pytest.approx(np.sqrt(N))
    assert np.all(row_entropy(H) == 0.0)


def test_a_uniform_head_has_entropy_log_n_rank_one_and_norm_one():
    U = uniform_head(N, N)
    assert row_entropy(U) == pytest.approx(np.full(N, np.log(N)))
    assert numerical_rank(U) == 1 and spectral_norm(U) == pytest.approx(1.0)
    assert column_masses(U) == pytest.approx(np.full(N, 1 / N))
    assert band_mass(U, 2) == pytest.approx((N * 5 - 6) / N ** 2)


def test_a_causal_uniform_head_spreads_each_row_over_the_keys_it_may_see():
    U = uniform_head(4, 4, causal=True)
    assert U == pytest.approx(np.array([[1, 0, 0, 0], [1 / 2, 1 / 2, 0, 0], [1 / 3, 1 / 3, 1 / 3, 0], [1 / 4] * 4]))


def test_permutations_are_full_rank_with_every_singular_value_one():
    P = np.eye(N)[np.random.default_rng(0).permutation(N)]
    assert numerical_rank(P) == N
    assert singular_values(P) == pytest.approx(np.ones(N))


def test_the_norm_of_a_row_stochastic_head_lies_between_one_and_the_root_of_its_largest_column_sum():
    rng = np.random.default_rng(1)
    for concentration in (0.1, 1.0, 10.0):
        H = rng.dirichlet(np.full(N, concentration), size=N)
        assert 1.0 - 1e-12 <= spectral_norm(H) <= np.sqrt(H.sum(axis=0).max()) + 1e-12


def test_the_rank_tolerance_is_stated_and_can_be_given():
    H = np.diag([1.0, 1e-3, 1e-20])
    assert numerical_rank(H) == 2
    assert numerical_rank(H, tol=1e-2) == 1


def test_masses_are_shares_of_the_total_mass_whatever_the_scale():
    H = np.random.default_rng(2).random((5, 7))
    assert band_mass(3 * H, 1) == pytest.approx(band_mass(H, 1))
    assert offset_masses(H)[1].sum() == pytest.approx(1.0)


def test_bad_heads_are_refused_with_their_shape():
    with pytest.raises(ValueError, match=r"\(n_q, n_k\) matrix, got shape \(3,\)"):
        diagonal_mass(np.ones(3))
    with pytest.raises(ValueError, match="no attention mass"):
        band_mass(np.zeros((3, 3)), 1)
