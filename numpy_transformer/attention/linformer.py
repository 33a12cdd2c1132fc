"""Linformer: low-rank attention by projecting keys and values, thesis §2.1.3, eq. (17).

The weights P = softmax(Q Kᵀ / √k) are close to low rank (the long-tailed spectra of Figure 10;
the Johnson–Lindenstrauss lemma 2.1 bounds the error of a random projection). Linformer
projects the n keys and values to k′ rows with learned E, F ∈ ℝ^{k′ × n}:

    head_i = softmax( Q^(i) (E_i K^(i))ᵀ / √k ) · F_i V^(i)                           (17)
                     └──────── n × k′ ────────┘   └ k′ × d ┘

O(n · k′ · d) time and O(n · k′) memory. It approximates (exact only in special cases, e.g.
k′ = n with E = F = I). It is not causal: every projected row mixes all n positions, the
future included, so it serves encoders (self-attention over a whole input) only.

Padding: padded keys and values are zeroed before the projection, so they add nothing to
E K and F V; the softmax still runs over all k′ projected rows.
"""
import math

import numpy as np

import autograd.functional as F
from autograd.engine import as_tensor
from numpy_transformer.attention.shape_checks import checked_key_padding, checked_qkv


def linformer_attention(q, k, v, E, F_, key_padding=None):
    """softmax(Q (E K)ᵀ / √d_k) (F V), eq. (17).

    q: (…, n_q, d_k), k: (…, n, d_k), v: (…, n, d_v) Tensors; E, F_: (…, k_proj, n) Tensors or
    arrays (leading axes broadcast: one per head, or shared); key_padding: boolean
    broadcastable to (…, n), True at real keys. Returns (…, n_q, d_v).
    """
    name = "linformer_attention"
    q, k, v, leading = checked_qkv(name, q, k, v)
    E, F_ = as_tensor(E, q.dtype), as_tensor(F_, q.dtype)
    n = k.shape[-2]
    for label, projection in (("E", E), ("F", F_)):
        if projection.ndim < 2 or projection.shape[-1] != n:
            raise ValueError(f"{name}: {label} must have shape (…, k_proj, n={n}) to project keys of shape "
                             f"{k.shape}, got {projection.shape}")
    key_padding = checked_key_padding(name, key_padding, leading, n)
    if key_padding is not None:
        real = key_padding[..., None].astype(q.dtype)
        k, v = k * real, v * real
    projected_k, projected_v = E @ k, F_ @ v                         # (…, k_proj, d_k), (…, k_proj, d_v)
    scores = (q @ projected_k.swapaxes(-1, -2)) * (1 / math.sqrt(q.shape[-1]))   # (…, n_q, k_proj)
    return F.softmax(scores, axis=-1) @ projected_v


def linformer_projections(k_proj, max_len, rng, n_matrices=1, dtype=np.float32):
    """Initial E (or F) matrices, (n_matrices, k_proj, max_len), Xavier normal as Linformer's
    code (a linear map from max_len to k_proj): N(0, 2 / (max_len + k_proj)). A sequence of
    n ≤ max_len positions uses the first n columns."""
    std = math.sqrt(2 / (max_len + k_proj))
    return (std * rng.standard_normal((n_matrices, k_proj, max_len))).astype(dtype)
