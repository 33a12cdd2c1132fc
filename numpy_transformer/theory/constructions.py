"""One attention layer built by hand to copy, shift, average and attend locally (architecture
notes §Theoretical Analysis, "Single attention layer can represent: copy operations A ≈ I,
shifting A ≈ permutation matrix, averaging A ≈ uniform distribution", and §Self-Attention
Patterns: identity, local A_ij ≈ exp(−|i−j|/τ)/Z, global A_ij ≈ 1/m).

The layer is `numpy_transformer.attention.scaled_dot_product_attention` over positions X:

    Q = X W_q,   K = X W_k,   A = softmax(Q Kᵀ / √d_k),   X ∈ ℝ^{n × d}.

One-hot positions (X = I_n, d_k = n) make every score matrix reachable: with W_q = √n S and
W_k = I_n the scores are Q Kᵀ/√n = S, whatever the n × n matrix S (`projections_for_scores`).
Softmax is invariant to adding a constant to a row and softmax(log A*) = A* for a row-stochastic
A* with positive entries, so

- the uniform and the local profile, whose entries are all positive, are reached exactly
  (S = 0 and S_ij = −|i−j|/τ): the error is float rounding only;
- the identity and the shift permutation have zeros, which softmax never reaches: S = β P (P the
  permutation) gives, in every row, e^β/(e^β + n − 1) on the target and 1/(e^β + n − 1) on each
  of the n − 1 others, so the row-wise total-variation distance to P is exactly

      ε(β) = (n − 1) / (e^β + n − 1) ≤ (n − 1) e^{−β},       β = log((n − 1)(1 − ε)/ε) for a given ε.

With the sinusoidal positions of eq. (1) (d ≪ n allowed) the shift is the rotation R_s of
`numpy_transformer.positional.shift_matrix`, f(i + s) = f(i) R_s, so W_q = β √d R_s, W_k = I_d
give the scores β f(i + s)·f(j) = β Σ_k cos(ω_k (i + s − j)), largest (d/2) at j = i + s. With
the gap γ = d/2 − max_{j ≠ t} f(t)·f(j) (`sinusoidal_gap`) the row-wise TV distance is at most
(n − 1) e^{−βγ} / (1 + (n − 1) e^{−βγ}) (`sinusoidal_error_bound`).
"""
import math

import numpy as np

from autograd.checks import checked_integer, checked_number
from numpy_transformer.attention import scaled_dot_product_attention
from numpy_transformer.positional import shift_matrix, sinusoidal_encoding


def one_hot_positions(n, dtype=np.float64):
    """X = I_n: position i is the i-th unit vector. Shape (n, n)."""
    return np.eye(checked_integer("n", n, low=1), dtype=dtype)


def attention_weights(X, W_q, W_k):
    """A = softmax(X W_q (X W_k)ᵀ / √d_k) from scaled_dot_product_attention (eq. (6)).

    X: (n, d), W_q, W_k: (d, d_k). Returns A: (n, n), a plain array of X's dtype."""
    Q, K = X @ W_q, X @ W_k
    _, weights = scaled_dot_product_attention(Q, K, K)              # the values do not enter A
    return weights.data


def projections_for_scores(S):
    """(W_q, W_k) = (√n S, I_n): over one-hot positions the scores Q Kᵀ/√d_k are exactly S (n × n)."""
    S = np.asarray(S)
    if S.ndim != 2 or S.shape[0] != S.shape[1]:
        raise ValueError(f"projections_for_scores: S must be a square (n, n) matrix, got shape {S.shape}")
    return math.sqrt(S.shape[0]) * S, np.eye(S.shape[0], dtype=S.dtype)


def shift_permutation(n, s):
    """P with P[i, (i + s) mod n] = 1: row i attends to position i + s, cyclically (the last s
    rows wrap around to the start for s > 0; s < 0 looks back, the first rows wrap to the end)."""
    n = checked_integer("n", n, low=1)
    P = np.zeros((n, n))
    P[np.arange(n), (np.arange(n) + checked_integer("s", s)) % n] = 1.0
    return P


def local_profile(n, tau):
    """A*_ij = exp(−|i − j|/τ) / Z_i, Z_i = Σ_j exp(−|i − j|/τ): the notes' local attention. (n, n)."""
    weights = np.exp(local_scores(n, tau))
    return weights / weights.sum(axis=-1, keepdims=True)


def local_scores(n, tau):
    """S_ij = −|i − j|/τ, whose softmax is `local_profile`. (n, n)."""
    tau = checked_number("tau", tau, low=0, low_open=True)
    positions = np.arange(checked_integer("n", n, low=1))
    return -np.abs(positions[:, None] - positions[None, :]) / tau


def uniform_profile(n):
    """A*_ij = 1/n: the notes' global attention. (n, n)."""
    n = checked_integer("n", n, low=1)
    return np.full((n, n), 1.0 / n)


def copy_projections(n, beta):
    """(W_q, W_k) for A ≈ I over one-hot positions: scores β I, error `concentration_error(n, β)`."""
    return projections_for_scores(checked_number("beta", beta) * np.eye(n))


def shift_projections(n, s, beta):
    """(W_q, W_k) for A ≈ the cyclic shift permutation over one-hot positions: scores β P."""
    return projections_for_scores(checked_number("beta", beta) * shift_permutation(n, s))


def average_projections(n):
    """(W_q, W_k) for A = 1/n exactly: zero scores (W_q = 0) make every row uniform."""
    return projections_for_scores(np.zeros((n, n)))


def local_projections(n, tau):
    """(W_q, W_k) for A = exp(−|i−j|/τ)/Z exactly over one-hot positions: scores −|i−j|/τ."""
    return projections_for_scores(local_scores(n, tau))


def concentration_error(n, beta):
    """ε(β) = (n − 1)/(e^β + n − 1): the row-wise TV distance of softmax(β P) to a permutation P."""
    return (checked_integer("n", n, low=1) - 1) / (math.exp(checked_number("beta", beta)) + n - 1)


def beta_for_error(n, epsilon):
    """The β with concentration_error(n, β) = ε: β = log((n − 1)(1 − ε)/ε), n ≥ 2."""
    epsilon = checked_number("epsilon", epsilon, 0, 1, low_open=True, high_open=True)
    return math.log((checked_integer("n", n, low=2) - 1) * (1 - epsilon) / epsilon)


def total_variation(A, B):
    """max_i ½ Σ_j |A_ij − B_ij|: the largest row-wise total-variation distance of two (…, n, m)
    row-stochastic arrays (1 − A_{i,t} when row i of B is the unit vector at t)."""
    return float(0.5 * np.abs(np.asarray(A) - np.asarray(B)).sum(axis=-1).max())


def sinusoidal_positions(n, d_model, base=10000.0):
    """X = P[:n] of eq. (1) in float64, shape (n, d_model)."""
    return sinusoidal_encoding(n, d_model, base, dtype=np.float64)


def sinusoidal_shift_projections(d_model, s, beta, base=10000.0):
    """(W_q, W_k) = (β √d R_s, I_d) over sinusoidal positions: scores β f(i + s)·f(j), largest at
    j = i + s (s = 0: copy). Rows whose target i + s lies outside 0 … n − 1 have no such key and
    attend to whichever key is most like f(i + s): no shift there, and no bound."""
    rotation = shift_matrix(checked_integer("s", s), d_model, base, dtype=np.float64)
    return checked_number("beta", beta) * math.sqrt(d_model) * rotation, np.eye(d_model)


def sinusoidal_gap(n, d_model, base=10000.0):
    """γ = d/2 − max_{0 < |Δ| < n} f(t)·f(t + Δ) = min_{0<|Δ|<n} Σ_k (1 − cos ω_k Δ): how much the
    target's score exceeds every other key's, per unit of β."""
    X = sinusoidal_positions(n, d_model, base)
    similarity = X @ X.T
    return d_model / 2 - similarity[~np.eye(n, dtype=bool)].max()


def sinusoidal_error_bound(n, d_model, beta, base=10000.0):
    """(n − 1) e^{−βγ} / (1 + (n − 1) e^{−βγ}): the row-wise TV distance of an in-range row of the
    sinusoidal shift (or copy) to its target, at most; γ = `sinusoidal_gap`."""
    others = (n - 1) * math.exp(-beta * sinusoidal_gap(n, d_model, base))
    return others / (1 + others)


def in_range_rows(n, s):
    """The rows i with 0 ≤ i + s < n (the ones a non-cyclic shift by s can serve)."""
    rows = np.arange(n)
    return rows[(rows + s >= 0) & (rows + s < n)]
