"""Positional encoding, thesis §1.2.1, eq. (1).

The Transformer sees all tokens at once, so their order has to be written into the vectors.
Position t gets the vector f(t) ∈ ℝᵈ with

    f(t)^(2k)   = sin(ω_k t),                                                       (1)
    f(t)^(2k+1) = cos(ω_k t),        ω_k = 1 / N^{2k/d},   k = 0, …, d/2 − 1,

N = 10000 in the paper (`base` here). The rows P[t] = f(t) form P ∈ ℝ^{max_len × d}, and the
model adds P[:n] to the n embedded tokens, X · Wᴱ + P[:n, :], then applies dropout (0.1).

Shifts are linear maps: by the angle-addition formulas every pair (sin ω_k t, cos ω_k t) is
turned into (sin ω_k (t+s), cos ω_k (t+s)) by a 2 × 2 rotation by ω_k s that does not depend on
t, so f(t + s) = f(t) R_s with R_s block diagonal (`shift_matrix`).
"""
import numpy as np

from autograd import Tensor
from numpy_transformer.nn import Dropout, Module, parameter

KINDS = ("sinusoidal", "learned", "relative")


def frequencies(d_model, base=10000.0):
    """ω_k = base^(−2k/d_model) for k = 0, …, d_model/2 − 1: shape (d_model/2,), float64."""
    _check_even(d_model)
    return base ** (-np.arange(0, d_model, 2) / d_model)


def sinusoidal_encoding(max_len, d_model, base=10000.0, dtype=np.float32):
    """P ∈ ℝ^{max_len × d_model} of thesis eq. (1): P[t, 2k] = sin(ω_k t), P[t, 2k+1] = cos(ω_k t).

    d_model must be even (the entries come in sin/cos pairs); `base` is the thesis's N.
    """
    angles = np.arange(max_len)[:, None] * frequencies(d_model, base)  # (max_len, d/2): ω_k t
    P = np.empty((max_len, d_model))
    P[:, 0::2], P[:, 1::2] = np.sin(angles), np.cos(angles)
    return P.astype(dtype)


def shift_matrix(s, d_model, base=10000.0, dtype=np.float32):
    """R_s ∈ ℝ^{d × d} with f(t + s) = f(t) R_s for every t (f a row vector of eq. (1)).

    Block k (rows and columns 2k, 2k+1) is the rotation by ω_k s, from the thesis's
        sin(ω(t+s)) = sin(ωt) cos(ωs) + cos(ωt) sin(ωs),
        cos(ω(t+s)) = cos(ωt) cos(ωs) − sin(ωt) sin(ωs):
        [sin ωt, cos ωt] · [[ cos ωs, −sin ωs],  = [sin ω(t+s), cos ω(t+s)].
                            [ sin ωs,  cos ωs]]
    """
    angle = s * frequencies(d_model, base)
    even = np.arange(0, d_model, 2)
    R = np.zeros((d_model, d_model))
    R[even, even], R[even, even + 1] = np.cos(angle), -np.sin(angle)
    R[even + 1, even], R[even + 1, even + 1] = np.sin(angle), np.cos(angle)
    return R.astype(dtype)


def _check_even(d_model):
    if d_model <= 0 or d_model % 2:
        raise ValueError(f"sinusoidal encoding: d_model must be a positive even number "
                         f"(sin/cos pairs), got {d_model}")


class PositionalEncoding(Module):
    """x + P[start : start + n], then dropout (thesis §1.2.1: X · Wᴱ + P[:n, :], dropout 0.1).

    x: (batch, n, d_model) → (batch, n, d_model). `kind`:
      - "sinusoidal": P is the fixed table of eq. (1), a buffer (not trained, not saved), of
        max_len rows at first;
      - "learned": P is a parameter of shape (max_len, d_model), drawn from N(0, 1/2) so that
        its entries have the mean square of the sinusoidal table's (sin² + cos² = 1 per pair);
      - "relative": nothing is added (P = 0): the positions enter the attention scores instead,
        as T5's relative position bias (numpy_transformer.attention.relative).
    `start` is the position of x's first row: incremental decoding adds one position at a time.
    Eq. (1) holds for every t, so a sinusoidal table shorter than start + n is rebuilt longer
    (at least twice as long, so that one step at a time rebuilds it rarely); its rows are the
    same whatever its length. A learned P has max_len rows: a sequence that runs past them is a
    ValueError.
    """

    def __init__(self, d_model, max_len, dropout, rng, kind="sinusoidal", base=10000.0, dtype=np.float32):
        super().__init__()
        if kind not in KINDS:
            raise ValueError(f"PositionalEncoding: kind must be one of {KINDS}, got {kind!r}")
        self.d_model, self.max_len, self.kind, self.base = d_model, max_len, kind, base
        if kind == "sinusoidal":
            self.P = Tensor(sinusoidal_encoding(max_len, d_model, base, dtype))
        elif kind == "relative":
            self.P = None
        else:
            self.P = parameter(np.sqrt(0.5) * rng.standard_normal((max_len, d_model)), dtype)
        self.dropout = Dropout(dropout, rng)

    def forward(self, x, start=0, norm=None):
        """norm: a LayerNorm applied to x + P before the dropout (BERT's embeddings), or None."""
        n = x.shape[-2]
        if x.shape[-1] != self.d_model:
            raise ValueError(f"PositionalEncoding: expected inputs of last dimension d_model="
                             f"{self.d_model}, got shape {tuple(x.shape)}")
        if self.kind == "sinusoidal" and start + n > len(self.P):
            rows = max(start + n, 2 * len(self.P))
            self.P = Tensor(sinusoidal_encoding(rows, self.d_model, self.base, self.P.dtype))
        if self.kind == "learned" and start + n > self.max_len:
            raise ValueError(f"PositionalEncoding: positions {start}..{start + n - 1} (a sequence of "
                             f"length {n}) exceed max_len={self.max_len}, the rows of the learned table")
        x = x if self.P is None else x + self.P[start:start + n]
        return self.dropout(x if norm is None else norm(x))
