"""numpy_transformer.theory.gradient_identities: which of the notes' gradient formulas hold as
written, which hold once the softmax VJP replaces ∂L/∂A, and when ∂L/∂K_j ∝ Σ_i A_ij(1 − A_ij) Q_i
holds; all against autograd in float64."""
import numpy as np
import pytest

from numpy_transformer.theory import gradient_identities as g

N, M, D_K, D_V = 5, 6, 4, 3


@pytest.fixture
def case():
    rng = np.random.default_rng(17)
    Q, K = rng.standard_normal((N, D_K)), rng.standard_normal((M, D_K))
    V, grad_O = rng.standard_normal((M, D_V)), rng.standard_normal((N, D_V))
    A, grad_Q, grad_K, grad_V = g.autograd_gradients(Q, K, V, grad_O)
    return dict(Q=Q, K=K, V=V, grad_O=grad_O, A=A, grad_Q=grad_Q, grad_K=grad_K, grad_V=grad_V,
                grad_A=g.weights_gradient(grad_O, V))


def test_the_value_gradient_holds_as_written(case):
    np.testing.assert_allclose(g.value_gradient(case["A"], case["grad_O"]), case["grad_V"], rtol=0, atol=1e-12)


def test_the_query_gradient_as_written_with_dL_dA_is_wrong(case):
    written = g.query_gradient(case["grad_A"], case["K"])
    assert np.abs(written - case["grad_Q"]).max() > 0.1 * np.abs(case["grad_Q"]).max()


def test_the_key_gradient_as_written_with_dL_dA_is_wrong(case):
    written = g.key_gradient(case["grad_A"], case["Q"])
    assert np.abs(written - case["grad_K"]).max() > 0.1 * np.abs(case["grad_K"]).max()


def test_the_query_gradient_holds_with_the_softmax_vjp_in_place_of_dL_dA(case):
    grad_S = g.score_gradient(case["A"], case["grad_A"])
    np.testing.assert_allclose(g.query_gradient(grad_S, case["K"]), case["grad_Q"], rtol=0, atol=1e-12)


def test_the_key_gradient_holds_with_the_softmax_vjp_in_place_of_dL_dA(case):
    grad_S = g.score_gradient(case["A"], case["grad_A"])
    np.testing.assert_allclose(g.key_gradient(grad_S, case["Q"]), case["grad_K"], rtol=0, atol=1e-12)


def test_a_loss_of_the_row_sums_has_zero_gradient_but_the_written_form_is_not_zero(case):
    ones = np.ones((N, M))
    A, grad_Q, grad_K, _ = g.autograd_gradients(case["Q"], case["K"], case["V"], np.zeros((N, D_V)), ones)
    assert np.abs(grad_Q).max() < 1e-14 and np.abs(grad_K).max() < 1e-14
    assert np.abs(g.query_gradient(ones, case["K"])).max() > 0.1
    assert np.abs(g.key_gradient(ones, case["Q"])).max() > 0.1
    assert np.abs(g.score_gradient(A, ones)).max() < 1e-15


@pytest.mark.parametrize("j", [0, 3])
def test_the_key_gradient_is_c_times_the_diagonal_form_when_the_loss_rewards_key_j_alone(case, j):
    c, row_terms = 2.5, np.random.default_rng(3).standard_normal((N, 1))
    grad_A = row_terms + c * (np.arange(M) == j)                  # G_il = c δ_lj + b_i
    _, _, grad_K, _ = g.autograd_gradients(case["Q"], case["K"], case["V"], np.zeros((N, D_V)), grad_A)
    diagonal = g.key_gradient_diagonal(case["A"], case["Q"])
    np.testing.assert_allclose(grad_K[j], c * diagonal[j], rtol=0, atol=1e-12)


def test_the_key_gradient_is_not_parallel_to_the_diagonal_form_for_a_general_loss(case):
    diagonal = g.key_gradient_diagonal(case["A"], case["Q"])
    cosines = [abs(case["grad_K"][j] @ diagonal[j]) / np.linalg.norm(case["grad_K"][j]) / np.linalg.norm(diagonal[j])
               for j in range(M)]
    assert min(cosines) < 0.5


def test_the_exact_key_gradient_is_the_score_gradient_weighted_sum_of_queries(case):
    grad_S = g.score_gradient(case["A"], case["grad_A"])
    j = 2
    exact = sum(grad_S[i, j] * case["Q"][i] for i in range(N)) / np.sqrt(D_K)
    np.testing.assert_allclose(exact, case["grad_K"][j], rtol=0, atol=1e-12)
