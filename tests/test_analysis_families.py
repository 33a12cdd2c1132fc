"""The random members of Σ1, Σ2(w), Σ3(T, W) and the sparse error Ẽ (thesis §3.1.2,
numpy_transformer/analysis/families.py): shapes, row sums, where their mass lies."""
import numpy as np
import pytest

from numpy_transformer.analysis.families import (random_window_starts, sigma1, sigma1_member, sigma2, sigma2_member,
                                                 sigma3, sigma3_member, sparse_error, window_start)

N = 16


def rng(seed=0):
    return np.random.default_rng(seed)


def test_the_sparse_error_has_one_entry_per_row_bounded_by_its_coefficient():
    E = sparse_error(N, 0.3, rng())
    assert E.shape == (N, N)
    assert np.all((E > 0).sum(axis=1) <= 1) and (E > 0).sum() >= N - 1   # density 1/n
    assert E.min() >= 0 and E.max() <= 0.3


def test_members_are_row_stochastic_plus_at_most_the_coefficient():
    generator = rng(1)
    for coefficient in (0.0, 0.2, 0.5):
        members = [sigma1_member(N, coefficient, generator), sigma2_member(N, 3, 0.3, coefficient, generator),
                   sigma3_member(N, 3, 2, coefficient, generator)]
        for X in members:
            assert X.shape == (N, N) and X.min() >= 0
            assert np.all(X.sum(axis=1) >= 1 - 1e-12) and np.all(X.sum(axis=1) <= 1 + coefficient + 1e-12)


def test_sigma1_is_the_identity():
    assert np.array_equal(sigma1(5), np.eye(5))


def test_sigma2_lies_in_its_band_keeps_the_diagonal_and_normalises_its_rows():
    P = sigma2(N, 1, 3, 0.5, rng(2))
    k = np.arange(N)[None, :] - np.arange(N)[:, None]
    assert np.all(P[(k < -1) | (k > 3)] == 0)
    assert np.all(np.diag(P) > 0)
    assert P.sum(axis=1) == pytest.approx(np.ones(N))
    assert (P > 0).sum() < ((k >= -1) & (k <= 3)).sum()       # drop-out removed some of the band


def test_sigma3_sends_each_window_to_its_token_and_keeps_the_identity_elsewhere():
    P = sigma3(8, positions=[6, 1], windows=[3, 2], window_starts=[0, 4])
    assert np.all(P[0:3, 6] == 1) and np.all(P[4:6, 1] == 1)
    for row in (3, 6, 7):
        assert P[row, row] == 1
    assert P.sum(axis=1) == pytest.approx(np.ones(8))


def test_the_default_window_surrounds_its_token_inside_the_matrix():
    assert window_start(10, 5, 3) == 4
    assert window_start(10, 0, 3) == 0 and window_start(10, 9, 4) == 6
    P = sigma3(10, [5], [3])
    assert np.all(P[4:7, 5] == 1)


def test_sigma3_refuses_overlapping_or_misfit_windows():
    with pytest.raises(ValueError, match="overlap"):
        sigma3(8, [1, 2], [3, 3], [0, 2])
    with pytest.raises(ValueError, match="does not fit"):
        sigma3(8, [1], [4], [6])


def test_random_windows_are_disjoint_and_inside():
    generator = rng(3)
    for _ in range(50):
        starts = random_window_starts(16, 3, 4, generator)
        assert starts == sorted(starts) and starts[-1] + 4 <= 16
        assert all(b - a >= 4 for a, b in zip(starts, starts[1:]))
    with pytest.raises(ValueError, match="do not fit"):
        random_window_starts(5, 2, 3, generator)
