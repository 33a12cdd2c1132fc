"""Sliding-window attention with dilation and global tokens: Longformer (thesis §2.1.1, Figure 9).

Query i attends to the keys of its (dilated) window

    j = i + o,    o = m · dilation,    |m| ≤ w // 2    (and m ≤ 0, i.e. j ≤ i, when causal)

plus the global tokens G, which in turn attend to every key (the keys j ≤ i when causal): the
graph `dilated_window_pattern(n, w, dilation) | global_tokens_pattern(n, G)` of eq. (11),
computed without ever forming it.

The window is a band. For each offset o the keys k_{i+o} of all queries i are one shifted
copy of K (zeros past the ends, masked), so the band's scores are w vectors

    s_{i,o} = q_i · k_{i+o} / √d          (one row-wise product of Q with a shifted K each)

stored as (…, n, w); the global tokens add g columns q_i · k_G / √d. One softmax over the w + g
scores of each row, then out_i = Σ_o p_{i,o} v_{i+o} + Σ_G p_{i,G} v_G. The rows of the global
tokens themselves are a dense (…, g, n) masked attention that replaces them. Work and memory
are O(n · (w + g) · d) and O(n · (w + g) + n · d): linear in n.

`BandAttention` is that band-and-global-columns step as a fused op (forward and VJP side by
side), so the autograd graph does not keep w intermediate (n, d) arrays alive; with P the
weights, G = ∂L/∂out, D_i = g_i · out_i and dS = P ⊙ (dP − D) as in §1.2.3's softmax VJP:

    dP_{i,o} = g_i · v_{i+o}      ∂L/∂q_i = Σ_o dS_{i,o} k_{i+o} / √d      (and the global columns)
    ∂L/∂k_j = Σ_o dS_{j−o,o} q_{j−o} / √d        ∂L/∂v_j = Σ_o p_{j−o,o} g_{j−o}

(each a shifted accumulation, one per offset). The global rows are built from primitives.
"""
import math

import numpy as np

import autograd.functional as F
from autograd import masked_fill, where
from autograd.checks import checked_integer
from autograd.engine import Function
from autograd.precision import in_float32
from autograd.engine_room.fused_softmax import softmax_array
from autograd.ops import unbroadcast
from numpy_transformer.attention.shape_checks import checked_key_padding, checked_qkv
from numpy_transformer.attention.patterns import checked_tokens


def window_offsets(window, dilation=1, causal=False):
    """The offsets o = m · dilation, −(w // 2) ≤ m ≤ w // 2 (m ≤ 0 when causal), as an int array."""
    half = window // 2
    return np.arange(-half, 1 if causal else half + 1) * dilation


def sliding_window_attention(q, k, v, window, dilation=1, causal=False, global_tokens=(), key_padding=None):
    """Longformer attention: softmax over the dilated window of each query and the global tokens.

    q, k: (…, n, d_k), v: (…, n, d_v) Tensors; window w ≥ 1 (the keys i + m·dilation, |m| ≤ w // 2);
    global_tokens: positions that attend to all and are attended by all; key_padding: boolean
    broadcastable to (…, n), True at real keys. Returns (…, n, d_v).
    """
    name = "sliding_window_attention"
    q, k, v, leading = checked_qkv(name, q, k, v, same_length=True)
    window = checked_integer(f"{name}: window", window, low=1)
    dilation = checked_integer(f"{name}: dilation", dilation, low=1)
    n = q.shape[-2]
    tokens = checked_tokens(name, global_tokens, n)
    real = checked_key_padding(name, key_padding, leading, n)
    real = np.ones(n, dtype=bool) if real is None else real
    is_global = np.zeros(n, dtype=bool)
    is_global[tokens] = True
    offsets = window_offsets(window, dilation, causal)
    allowed = _band_and_global_columns_allowed(n, offsets, tokens, is_global, real, causal)
    out = BandAttention.apply(q, k, v, offsets=offsets, tokens=tokens, allowed=allowed, leading=leading)
    if len(tokens) == 0:
        return out
    return _with_global_rows(out, q, k, v, tokens, is_global, real, causal)


def _band_and_global_columns_allowed(n, offsets, tokens, is_global, real, causal):
    """(…, n, w + g) boolean: which band scores (key i + o inside [0, n), real, not global —
    a global key is scored in its own column, not twice) and which global columns (real keys;
    j ≤ i when causal) count."""
    band_keys = np.arange(n)[:, None] + offsets                                  # (n, w): j = i + o
    inside = (band_keys >= 0) & (band_keys < n)
    band_keys = np.clip(band_keys, 0, n - 1)
    band = inside & ~is_global[band_keys] & real[..., band_keys]                 # (…, n, w)
    columns = real[..., None, tokens]                                            # (…, 1, g)
    if causal:
        columns = columns & (tokens <= np.arange(n)[:, None])
    leading = np.broadcast_shapes(band.shape[:-1], columns.shape[:-1])
    return np.concatenate([np.broadcast_to(band, (*leading, len(offsets))),
                           np.broadcast_to(columns, (*leading, len(tokens)))], axis=-1)


class BandAttention(Function):
    """Softmax attention of each query over its band of offsets and the global columns (module
    docstring). `allowed`: (…, n, w + g), False entries get weight 0; a row with none gets zeros."""

    @in_float32
    def forward(self, q, k, v, offsets, tokens, allowed, leading):
        self.offsets, self.tokens, self.shapes = offsets, tokens, (q.shape, k.shape, v.shape)
        self.scale, self.reach = 1 / math.sqrt(q.shape[-1]), int(np.abs(offsets).max())
        q, k, v = (np.broadcast_to(a, (*leading, *a.shape[-2:])) for a in (q, k, v))
        w = len(offsets)
        scores = np.empty((*leading, q.shape[-2], w + len(tokens)), dtype=q.dtype)
        for m, k_o in enumerate(self._shifted(k)):
            scores[..., m] = np.einsum("...nd,...nd->...n", q, k_o)
        scores[..., w:] = q @ np.swapaxes(k[..., tokens, :], -1, -2)
        weights = softmax_array(np.where(allowed, scores * self.scale, -np.inf))   # fully masked row: zeros
        out = weights[..., w:] @ v[..., tokens, :]
        for m, v_o in enumerate(self._shifted(v)):
            out += weights[..., m, None] * v_o
        self.save_for_backward(q, k, v, weights, out)
        return out

    @in_float32
    def backward(self, g):
        q, k, v, weights, out = self.saved
        w, tokens = len(self.offsets), self.tokens
        dP = np.empty_like(weights)
        for m, v_o in enumerate(self._shifted(v)):
            dP[..., m] = np.einsum("...nd,...nd->...n", g, v_o)
        dP[..., w:] = g @ np.swapaxes(v[..., tokens, :], -1, -2)
        dS = weights * (dP - np.sum(g * out, axis=-1, keepdims=True)) * self.scale
        dq = dS[..., w:] @ k[..., tokens, :]
        dk_padded, dv_padded = self._padded_zeros(k), self._padded_zeros(v)
        for m, (k_o, dk_o, dv_o) in enumerate(zip(self._shifted(k), self._shifted(dk_padded, pad=False),
                                                  self._shifted(dv_padded, pad=False))):
            dq += dS[..., m, None] * k_o
            dk_o += dS[..., m, None] * q                 # key i + o received query i's score
            dv_o += weights[..., m, None] * g
        dk, dv = self._unpad(dk_padded), self._unpad(dv_padded)
        dk[..., tokens, :] += np.swapaxes(dS[..., w:], -1, -2) @ q
        dv[..., tokens, :] += np.swapaxes(weights[..., w:], -1, -2) @ g
        return tuple(unbroadcast(grad, shape) for grad, shape in zip((dq, dk, dv), self.shapes))

    def _padded_zeros(self, x):
        return np.zeros((*x.shape[:-2], x.shape[-2] + 2 * self.reach, x.shape[-1]), dtype=x.dtype)

    def _unpad(self, padded):
        return padded[..., self.reach:padded.shape[-2] - self.reach, :]

    def _shifted(self, x, pad=True):
        """Views x[..., i + o, :] (all i) for each offset o, of a copy of x with `reach` zero
        rows at both ends (pad=False: x is that padded array already)."""
        if pad:
            zeros = np.zeros((*x.shape[:-2], self.reach, x.shape[-1]), dtype=x.dtype)
            x = np.concatenate([zeros, x, zeros], axis=-2)
        n = x.shape[-2] - 2 * self.reach
        return [x[..., self.reach + o:self.reach + o + n, :] for o in self.offsets]


def _with_global_rows(out, q, k, v, tokens, is_global, real, causal):
    """`out` with the rows of the global tokens replaced by their attention to every key
    (masked softmax over (…, g, n): g rows only, O(g · n · d))."""
    n = q.shape[-2]
    allowed = np.broadcast_to(real[..., None, :], (*real.shape[:-1], len(tokens), n))
    if causal:
        allowed = allowed & (np.arange(n) <= tokens[:, None])
    scores = (q[..., tokens, :] @ k.swapaxes(-1, -2)) * (1 / math.sqrt(q.shape[-1]))  # (…, g, n)
    global_out = F.softmax(masked_fill(scores, ~allowed, -np.inf), axis=-1) @ v      # (…, g, d_v)
    row_of = np.zeros(n, dtype=np.int64)
    row_of[tokens] = np.arange(len(tokens))
    return where(is_global[:, None], global_out[..., row_of, :], out)
