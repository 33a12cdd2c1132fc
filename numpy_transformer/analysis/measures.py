"""Shape measures of one attention head (thesis §3.1, Figure 10; architecture notes,
"Attention Entropy").

H is one head's weights, (n_q, n_k): row i is query i's distribution over the keys (rows sum
to 1; a masked row may be 0). Masses are fractions of the head's total mass Σ_ij h_ij, so a
number means the same at every sentence length.

| function               | computes                                                          |
|------------------------|-------------------------------------------------------------------|
| `diagonal_mass(H, k)`  | Σ_i h_{i,i+k} / Σ h: k = 0 the diagonal, k = −1 the previous token |
| `offset_masses(H)`     | the same for every offset k = j − i, −(n_q − 1) … n_k − 1         |
| `band_mass(H, w)`      | Σ_{abs(j − i) ≤ w} h_ij / Σ h: inside the band of bandwidth w     |
| `column_masses(H)`     | Σ_i h_ij / Σ h: the share of all attention that key j receives   |
| `row_entropy(H)`       | −Σ_j h_ij log h_ij per row, in nats (0 log 0 = 0)                 |
| `singular_values(H)`   | σ_1 ≥ σ_2 ≥ … (Figure 10)                                         |
| `numerical_rank(H)`    | #{σ_i > tol}, tol = σ_1 · max(n_q, n_k) · eps(dtype) by default   |
| `spectral_norm(H)`     | ‖H‖₂ = σ_1                                                        |

The thesis notes that the trained matrices are "full rank with low ℓ2 norm". For a square
row-stochastic H the norm is pinned between two numbers that have a meaning:

    1 ≤ ‖H‖₂ ≤ √(‖H‖₁ ‖H‖∞) = √(largest column sum),

the left because H 1 = 1, the right by Hölder. A positional head (a permutation-like H, every
column sum near 1) has ‖H‖₂ ≈ 1; a rare-token head (one column holding the mass of c rows) has
‖H‖₂ up to √c. So the norm is low exactly when no key collects much attention.
"""
import dataclasses

import numpy as np


def as_head(H):
    """H as a 2-D float array (n_q, n_k), or a ValueError naming its shape."""
    H = np.asarray(H, dtype=np.float64)
    if H.ndim != 2 or 0 in H.shape:
        raise ValueError(f"an attention head must be a non-empty (n_q, n_k) matrix, got shape {H.shape}")
    return H


def total_mass(H):
    """Σ_ij h_ij, or a ValueError for a head with no mass (every row masked)."""
    total = H.sum()
    if total <= 0:
        raise ValueError(f"the head of shape {H.shape} has no attention mass (Σ h = {total})")
    return total


def offsets(n_q, n_k):
    """(n_q, n_k) array of k = j − i: which diagonal each entry lies on."""
    return np.arange(n_k)[None, :] - np.arange(n_q)[:, None]


def diagonal_mass(H, offset=0):
    """Σ_i h_{i, i+offset} / Σ h: the share of the mass on one diagonal (offset 0: the diagonal,
    −1: each token's previous token, +1: its next token)."""
    H = as_head(H)
    return float(H[offsets(*H.shape) == offset].sum() / total_mass(H))


def offset_masses(H):
    """(offsets k = −(n_q − 1) … n_k − 1 as an int array, the share of the mass on each)."""
    H = as_head(H)
    n_q, n_k = H.shape
    ks = np.arange(-(n_q - 1), n_k)
    masses = np.bincount((offsets(n_q, n_k) + n_q - 1).ravel(), weights=H.ravel(), minlength=len(ks))
    return ks, masses / total_mass(H)


def band_mass(H, w):
    """Σ_{abs(j − i) ≤ w} h_ij / Σ h: the share inside the band of bandwidth w (2w + 1 diagonals;
    the thesis's b_ij = 0 for i > j + w₁ or j > i + w₂, with w₁ = w₂ = w)."""
    H = as_head(H)
    return float(H[np.abs(offsets(*H.shape)) <= w].sum() / total_mass(H))


def column_masses(H):
    """(n_k,): Σ_i h_ij / Σ h, the share of all attention that key j receives."""
    H = as_head(H)
    return H.sum(axis=0) / total_mass(H)


def row_entropy(H):
    """(n_q,): −Σ_j h_ij log h_ij in nats, 0 log 0 = 0. 0 for a one-hot row, log n_k for a
    uniform one."""
    H = as_head(H)
    logs = np.log(np.where(H > 0, H, 1.0))
    return -(H * logs).sum(axis=1)


def singular_values(H):
    """σ_1 ≥ … ≥ σ_min(n_q, n_k) ≥ 0, the spectrum of Figure 10."""
    return np.linalg.svd(as_head(H), compute_uv=False)


def numerical_rank(H, tol=None):
    """The number of singular values above `tol`; by default tol = σ_1 · max(n_q, n_k) · eps,
    eps the machine epsilon of float64 (2.2e-16): NumPy's `matrix_rank` rule, which counts
    what the rounding of an SVD cannot tell from zero."""
    H = as_head(H)
    sigma = singular_values(H)
    if tol is None:
        tol = sigma[0] * max(H.shape) * np.finfo(np.float64).eps
    return int((sigma > tol).sum())


def spectral_norm(H):
    """‖H‖₂ = σ_1, the largest singular value (see the module docstring for its bounds)."""
    return float(singular_values(H)[0])


@dataclasses.dataclass(frozen=True)
class HeadMeasures:
    """Every measure of one head, as `head_measures` computes them."""
    shape: tuple
    dominant_offset: int          # the diagonal k = j − i holding the most mass
    dominant_offset_mass: float
    band_mass: float              # inside bandwidth `band_width`
    band_width: int
    uniform_band_mass: float      # what a uniform head (over the keys it may see) puts in that band
    top_column: int               # the key receiving the most attention
    top_column_mass: float
    top_two_columns_mass: float   # the two keys receiving the most, together
    uniform_top_columns: tuple    # what a uniform head puts on its largest one and two columns
    mean_entropy: float           # nats, over the rows
    rank: int
    spectral_norm: float
    uniform_entropy: float        # what a uniform head gives: log n_k (under a causal mask, the mean of log(i + 1))


def head_measures(H, band_width=2, causal=False):
    """The `HeadMeasures` of H. `causal`: H is a masked self-attention (query i sees j ≤ i),
    which the uniform reference must respect."""
    H = as_head(H)
    ks, masses = offset_masses(H)
    columns, uniform = column_masses(H), uniform_head(*H.shape, causal)
    best_offset, best_column = int(np.argmax(masses)), int(np.argmax(columns))
    return HeadMeasures(H.shape, int(ks[best_offset]), float(masses[best_offset]), band_mass(H, band_width),
                        band_width, band_mass(uniform, band_width), best_column, float(columns[best_column]),
                        top_two(columns), (float(column_masses(uniform).max()), top_two(column_masses(uniform))),
                        float(row_entropy(H).mean()), numerical_rank(H), spectral_norm(H),
                        float(row_entropy(uniform).mean()))


def top_two(columns):
    """The sum of the two largest column masses."""
    return float(np.sort(columns)[-2:].sum())


def uniform_head(n_q, n_k, causal=False):
    """The head that knows nothing: each row uniform over the keys it may see (j ≤ i if causal)."""
    allowed = offsets(n_q, n_k) <= 0 if causal else np.ones((n_q, n_k), dtype=bool)
    return allowed / allowed.sum(axis=1, keepdims=True)
