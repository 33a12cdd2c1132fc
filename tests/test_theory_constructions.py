"""numpy_transformer.theory.constructions: one attention layer built by hand copies, shifts,
averages and attends locally within the error its docstring derives, and a wrong construction
misses that tolerance; numpy_transformer.theory.learned: Adam finds the same patterns."""
import numpy as np
import pytest

from autograd import Tensor, gradcheck
from numpy_transformer.theory import constructions as c
from numpy_transformer.theory import learned

N = 8
EPSILON = 1e-3


def weights_over_one_hot(projections):
    return c.attention_weights(c.one_hot_positions(N), *projections)


def test_copy_is_the_identity_up_to_exactly_the_derived_error():
    beta = c.beta_for_error(N, EPSILON)
    A = weights_over_one_hot(c.copy_projections(N, beta))
    assert c.total_variation(A, np.eye(N)) == pytest.approx(EPSILON, rel=1e-12)
    assert c.concentration_error(N, beta) == pytest.approx(EPSILON, rel=1e-12)


def test_the_copy_error_falls_like_n_minus_one_times_e_to_the_minus_beta():
    for beta in (2.0, 6.0, 12.0):
        A = weights_over_one_hot(c.copy_projections(N, beta))
        assert c.total_variation(A, np.eye(N)) <= (N - 1) * np.exp(-beta)
    assert c.total_variation(weights_over_one_hot(c.copy_projections(N, 12.0)), np.eye(N)) < 1e-4


def test_a_copy_with_half_the_scale_misses_the_tolerance():
    beta = c.beta_for_error(N, EPSILON)
    assert c.total_variation(weights_over_one_hot(c.copy_projections(N, beta / 2)), np.eye(N)) > 10 * EPSILON


@pytest.mark.parametrize("s", [1, 3, -1])
def test_shift_is_the_cyclic_shift_permutation_up_to_the_derived_error(s):
    beta = c.beta_for_error(N, EPSILON)
    A = weights_over_one_hot(c.shift_projections(N, s, beta))
    P = c.shift_permutation(N, s)
    assert c.total_variation(A, P) == pytest.approx(EPSILON, rel=1e-12)
    assert np.argmax(A, axis=1).tolist() == [(i + s) % N for i in range(N)]


def test_the_shift_wraps_around_at_the_border():
    A = weights_over_one_hot(c.shift_projections(N, 1, 20.0))
    assert A[N - 1, 0] > 1 - 1e-6 and A[0, 1] > 1 - 1e-6


def test_a_shift_by_the_wrong_offset_is_far_from_the_permutation():
    A = weights_over_one_hot(c.shift_projections(N, 2, c.beta_for_error(N, EPSILON)))
    assert c.total_variation(A, c.shift_permutation(N, 1)) > 0.99


def test_average_is_exactly_uniform():
    A = weights_over_one_hot(c.average_projections(N))
    assert c.total_variation(A, c.uniform_profile(N)) < 1e-15


def test_a_weak_copy_is_not_uniform():
    A = weights_over_one_hot(c.copy_projections(N, 1.0))
    assert c.total_variation(A, c.uniform_profile(N)) > 0.1


@pytest.mark.parametrize("tau", [0.5, 1.0, 3.0])
def test_local_attention_is_the_exp_minus_distance_over_tau_profile(tau):
    A = weights_over_one_hot(c.local_projections(N, tau))
    np.testing.assert_allclose(A, c.local_profile(N, tau), rtol=0, atol=1e-14)
    np.testing.assert_allclose(A[2, 3] / A[2, 2], np.exp(-1 / tau), rtol=1e-12)


def test_local_attention_with_twice_the_tau_is_a_different_profile():
    A = weights_over_one_hot(c.local_projections(N, 2.0))
    assert np.abs(A - c.local_profile(N, 1.0)).max() > 0.05


def test_any_score_matrix_is_reached_over_one_hot_positions():
    S = np.random.default_rng(0).standard_normal((N, N))
    A = weights_over_one_hot(c.projections_for_scores(S))
    expected = np.exp(S) / np.exp(S).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(A, expected, rtol=1e-13)


@pytest.mark.parametrize("s", [0, 1, -2])
def test_sinusoidal_shift_is_within_the_gap_bound_on_in_range_rows(s):
    n, d, beta = 16, 16, 30.0
    A = c.attention_weights(c.sinusoidal_positions(n, d), *c.sinusoidal_shift_projections(d, s, beta))
    rows = c.in_range_rows(n, s)
    bound = c.sinusoidal_error_bound(n, d, beta)
    assert c.total_variation(A[rows], c.shift_permutation(n, s)[rows]) <= bound < 1e-5


def test_sinusoidal_copy_does_not_meet_the_shift_bound():
    n, d, beta = 16, 16, 30.0
    A = c.attention_weights(c.sinusoidal_positions(n, d), *c.sinusoidal_shift_projections(d, 0, beta))
    rows = c.in_range_rows(n, 1)
    assert c.total_variation(A[rows], c.shift_permutation(n, 1)[rows]) > 0.99


def test_the_sinusoidal_gap_is_that_of_neighbouring_positions_for_16_dimensions():
    X = c.sinusoidal_positions(16, 16)
    assert c.sinusoidal_gap(16, 16) == pytest.approx(8 - X[0] @ X[1], rel=1e-12)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="tau"):
        c.local_profile(4, 0.0)
    with pytest.raises(ValueError, match="S must be a square"):
        c.projections_for_scores(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="epsilon"):
        c.beta_for_error(4, 1.5)


@pytest.mark.parametrize("task", ["copy", "shift", "average", "local"])
def test_adam_learns_each_pattern_to_within_0_03_of_the_constructed_one(task):
    n = 6
    pattern = learned.target_patterns(n)[task]
    rng = np.random.default_rng(0)
    untrained = learned.learned_weights(learned.SingleHeadAttention(n + 8, n + 8, 8, np.random.default_rng(0)), n, rng)
    model, losses = learned.train_attention(pattern, rng, steps=150)
    A = learned.learned_weights(model, n, rng)
    constructed = {"copy": c.copy_projections(n, c.beta_for_error(n, EPSILON)),
                   "shift": c.shift_projections(n, 1, c.beta_for_error(n, EPSILON)),
                   "average": c.average_projections(n), "local": c.local_projections(n, 1.0)}[task]
    assert c.total_variation(A, c.attention_weights(c.one_hot_positions(n), *constructed)) < 0.03
    assert losses[-1] < 0.01 * losses[0]
    if task != "average":                                      # an untrained head is near uniform already
        assert c.total_variation(untrained, pattern) > 0.3


def test_the_single_head_passes_a_float64_gradient_check():
    rng = np.random.default_rng(1)
    head = learned.SingleHeadAttention(5, 4, 3, rng, dtype=np.float64)
    x = Tensor(rng.standard_normal((2, 4, 5)), requires_grad=True)
    assert gradcheck(lambda x, *weights: head(x)[0], x, head.W_q.weight, head.W_k.weight, head.W_v.weight)
