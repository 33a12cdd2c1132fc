"""The families of structured matrices of thesis §3.1.2 (eqs. (19), (20)), as random generators:
a member is a 0/1 pattern P from Σ = Σ1 ∪ Σ2 ∪ Σ3, its rows normalised to sum to 1 as an
attention matrix's do, plus the sparse error Ẽ of eq. (19):

    Σ1           I_n: every token attends to itself (positional heads)
    Σ2(w)        a band b_ij = 1 for −w₁ ≤ j − i ≤ w₂ (w₁, w₂ ≤ w), with drop-out p: near
                 words attending each other (syntactic heads), Figure 15
    Σ3(T, W)     token t_k attended by a window of w_k consecutive rows, identity elsewhere
                 (rare-token heads), Figure 14: the thesis's block [I_{d₁}, P_r, I_{d₂}]
    Ẽ            density 1/n: one entry per row, at a random column, uniform in [0, coefficient],
                 so abs(ε_ij) ≤ coefficient (the thesis's ε)

Choices the thesis leaves open, made here and used alike by `random_search` and `projection`:
- Ẽ has exactly one entry in each row (n entries of n², the thesis's density 1/n) rather than
  n entries scattered at random; then every member lies in the set the projection searches
  (at most s = 1 error entry per row).
- Σ2's drop-out never removes the diagonal, so no row is left empty before the normalisation.
- Σ3's window need not contain its token: `window_starts` places it anywhere (the thesis's
  figure starts the window at the token; "t₁ is attended by w₁ surrounding tokens" centres it,
  which is the default). Rare-token heads of trained models have every row attending the
  final full stop or [EOS], far from most of those rows. Windows do not overlap (the
  thesis's concatenation of blocks).
"""
import numpy as np


def normalise_rows(P):
    """P with every row divided by its sum (rows of zeros stay zero)."""
    sums = P.sum(axis=1, keepdims=True)
    return P / np.where(sums > 0, sums, 1.0)


def sparse_error(n, coefficient, rng):
    """Ẽ (n, n): one entry per row at a uniformly random column, uniform in [0, coefficient]."""
    if coefficient < 0:
        raise ValueError(f"the coefficient of the sparse error must be ≥ 0, got {coefficient}")
    E = np.zeros((n, n))
    E[np.arange(n), rng.integers(0, n, n)] = coefficient * rng.random(n)
    return E


def sigma1(n):
    """Σ1: the identity I_n."""
    return np.eye(n)


def sigma2(n, w1, w2, dropout, rng):
    """A member of Σ2: the band −w1 ≤ j − i ≤ w2 with each off-diagonal entry dropped with
    probability `dropout`, rows normalised."""
    if min(w1, w2) < 0 or not 0 <= dropout < 1:
        raise ValueError(f"Σ2 needs bandwidths w1, w2 ≥ 0 and a drop-out in [0, 1), got w1={w1}, w2={w2}, "
                         f"dropout={dropout}")
    k = np.arange(n)[None, :] - np.arange(n)[:, None]
    band = (k >= -w1) & (k <= w2)
    kept = band & ((rng.random((n, n)) >= dropout) | (k == 0))
    return normalise_rows(kept.astype(np.float64))


def window_start(n, position, size):
    """The first row of a window of `size` rows surrounding row `position`, kept inside 0 … n − 1."""
    return int(np.clip(position - (size - 1) // 2, 0, n - size))


def sigma3(n, positions, windows, window_starts=None):
    """A member of Σ3(T, W): rows window_starts[k] … + windows[k] − 1 all attend column
    positions[k] (T = positions, W = windows); the other rows attend themselves. Windows
    default to surrounding their token (`window_start`) and must not overlap."""
    if len(positions) != len(windows):
        raise ValueError(f"Σ3 needs one window size per token, got T={list(positions)} and W={list(windows)}")
    if window_starts is None:
        window_starts = [window_start(n, t, w) for t, w in zip(positions, windows)]
    P, covered = np.eye(n), np.zeros(n, dtype=bool)
    for t, size, start in zip(positions, windows, window_starts):
        if not (0 <= t < n and 1 <= size and 0 <= start and start + size <= n):
            raise ValueError(f"Σ3: token {t} with a window of {size} rows from row {start} does not fit "
                             f"a {n} × {n} matrix")
        rows = np.arange(start, start + size)
        if covered[rows].any():
            raise ValueError(f"Σ3: the windows {list(zip(window_starts, windows))} overlap")
        covered[rows] = True
        P[rows] = 0.0
        P[rows, t] = 1.0
    return P


def random_window_starts(n, n_windows, size, rng):
    """Starts of `n_windows` disjoint windows of `size` rows, uniform over all placements."""
    free = n - n_windows * size
    if free < 0:
        raise ValueError(f"{n_windows} windows of {size} rows do not fit in {n} rows")
    gaps = np.sort(rng.integers(0, free + 1, n_windows))
    return [int(g) + k * size for k, g in enumerate(gaps)]


def sigma1_member(n, coefficient, rng):
    """I_n + Ẽ: identity with noise."""
    return sigma1(n) + sparse_error(n, coefficient, rng)


def sigma2_member(n, w, dropout, coefficient, rng):
    """A random band of bandwidths w₁, w₂ drawn from 0 … w, drop-out, + Ẽ."""
    w1, w2 = rng.integers(0, w + 1, 2)
    return sigma2(n, int(w1), int(w2), dropout, rng) + sparse_error(n, coefficient, rng)


def sigma3_member(n, w, num_pos, coefficient, rng):
    """num_pos rare tokens at random columns, each attended by a window of w rows placed at
    random (disjoint), + Ẽ."""
    starts = random_window_starts(n, num_pos, w, rng)
    positions = rng.integers(0, n, num_pos)
    return sigma3(n, positions, [w] * num_pos, starts) + sparse_error(n, coefficient, rng)
