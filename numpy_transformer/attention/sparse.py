"""Sparse attention over a graph, thesis eq. (11) (§2.1.1, BigBird):

    ATTN_D(X)_i = x_i + Σ_h σ( Q^(h)(x_i) K^(h)(X_{N(i)})ᵀ ) · V^(h)(X_{N(i)})           (11)

This file computes the attention term of one head, for every query i at once:

    out_i = Σ_{j ∈ N(i)} p_ij v_j,    p_ij = exp(s_ij) / Σ_{l ∈ N(i)} exp(s_il),    s_ij = q_i · k_j / √d_k

(σ = softmax, scaled by √d_k as in eq. (5); the residual x_i and the sum over heads belong to
the layer, `MultiHeadAttention`). Eq. (11) reduces to eq. (5) when every N(i) is full.

Only the scores s_ij of the graph's edges are computed: the pattern becomes an edge list
(query, key) sorted by query, the scores a vector with one entry per edge (gathered rows
q_i · k_j, in chunks of `CHUNK_ENTRIES` numbers), and the softmax runs over the segments of that
vector that share a query. The weights are then a sparse matrix P (compressed rows: the edge
list itself), and out = P V is a sparse-times-dense product (scipy.sparse). Work and memory are
O(|edges| + n · d) = O(n · |N(i)|), never n × n; a query with many neighbours (a global token,
N(i) = everything) costs its degree, not the others'. The (batch, head) slices are one loop.

`SparseAttention` is a fused op with its gradient by hand. With G = ∂L/∂out and
D_i = Σ_j p_ij (g_i · v_j) = g_i · out_i (the softmax VJP of §1.2.3, per row):

    ∂L/∂V = Pᵀ G        dS_ij = p_ij (g_i · v_j − D_i)   (on the edges only)
    ∂L/∂Q = dS K / √d_k        ∂L/∂K = dSᵀ Q / √d_k

dS, like P, is a sparse matrix on the graph's edges.
"""
import math
from dataclasses import dataclass

import numpy as np
from scipy.sparse import csr_array

from autograd.engine import Function
from autograd.precision import in_float32
from autograd.ops import unbroadcast
from numpy_transformer.attention.shape_checks import checked_key_padding, checked_qkv
from numpy_transformer.masks import boolean_mask

CHUNK_ENTRIES = 1 << 20  # numbers per gathered (edges, d) block of the scores: 4 MB of float32


@dataclass(frozen=True)
class AttentionGraph:
    """The graph D of eq. (11) as an edge list sorted by query: edge e goes from query
    `queries[e]` to key `keys[e]`; `query_starts[i]` … `query_starts[i + 1]` are the edges of
    query i (its N(i)). (`keys` and `query_starts` are the compressed-row layout of P.)"""
    n_queries: int
    n_keys: int
    queries: np.ndarray
    keys: np.ndarray
    query_starts: np.ndarray

    @classmethod
    def from_pattern(cls, pattern):
        """The graph of a boolean (n_q, n_k) pattern, True where query i attends to key j."""
        pattern = boolean_mask(pattern, "sparse_attention: pattern")
        if pattern.ndim != 2:
            raise ValueError(f"sparse_attention: pattern must be a boolean (n_q, n_k) array, got shape "
                             f"{pattern.shape}")
        queries, keys = np.nonzero(pattern)
        starts = np.searchsorted(queries, np.arange(pattern.shape[0] + 1))
        return cls(*pattern.shape, queries, keys, starts)

    @property
    def n_edges(self):
        return len(self.queries)

    def matrix(self, values):
        """The sparse (n_q, n_k) matrix with `values` (one per edge) on the edges."""
        return csr_array((values, self.keys, self.query_starts), shape=(self.n_queries, self.n_keys))


def sparse_attention(q, k, v, pattern, key_padding=None):
    """ATTN_D of eq. (11) for one head: softmax over the neighbours N(i) given by `pattern`.

    q: (…, n, d_k), k: (…, n, d_k), v: (…, n, d_v) Tensors (leading axes broadcast);
    pattern: boolean (n, n), True where query i attends to key j (see `patterns`), or an
    `AttentionGraph` built from one; key_padding: boolean broadcastable to (…, n), True at
    real keys (edges into padded keys get weight 0). A query with no allowed key gets zeros.
    Returns the output Tensor (…, n, d_v), of q's dtype.
    """
    q, k, v, leading = checked_qkv("sparse_attention", q, k, v, same_length=True)
    graph = pattern if isinstance(pattern, AttentionGraph) else AttentionGraph.from_pattern(pattern)
    n = q.shape[-2]
    if (graph.n_queries, graph.n_keys) != (n, n):
        raise ValueError(f"sparse_attention: the pattern is {graph.n_queries} × {graph.n_keys}, q and k have "
                         f"{n} positions (q {q.shape}, k {k.shape})")
    key_padding = checked_key_padding("sparse_attention", key_padding, leading, n)
    return SparseAttention.apply(q, k, v, graph=graph, key_padding=key_padding, leading=leading)


class SparseAttention(Function):
    """out = ATTN_D(q, k, v) over the edges of `graph`; see the module docstring for the VJP.
    After forward, `scores_computed` is the number of inner products q_i · k_j it took for
    one (batch, head) slice: the graph's number of edges."""

    @in_float32
    def forward(self, q, k, v, graph, key_padding, leading):
        self.graph, self.leading, self.scale = graph, leading, 1 / math.sqrt(q.shape[-1])
        q_, k_, v_ = (np.broadcast_to(a, (*leading, *a.shape[-2:])) for a in (q, k, v))
        valid = None if key_padding is None else np.broadcast_to(key_padding, (*leading, graph.n_keys))
        weights = np.empty((*leading, graph.n_edges), dtype=q.dtype)
        out = np.empty((*leading, graph.n_queries, v.shape[-1]), dtype=q.dtype)
        for index in np.ndindex(*leading):
            scores = edge_products(q_[index], k_[index], graph) * self.scale
            self.scores_computed = len(scores)
            if valid is not None:
                scores = np.where(valid[index][graph.keys], scores, -np.inf)
            weights[index] = _segment_softmax(scores, graph.query_starts)
            out[index] = graph.matrix(weights[index]) @ v_[index]
        self.save_for_backward(q_, k_, v_, out, weights)
        self.shapes = q.shape, k.shape, v.shape
        return out

    @in_float32
    def backward(self, g):
        q, k, v, out, weights = self.saved
        graph = self.graph
        dq, dk, dv = np.empty_like(q), np.empty_like(k), np.empty_like(v)
        for index in np.ndindex(*self.leading):
            rowwise = np.sum(g[index] * out[index], axis=-1)                       # D_i = g_i · out_i
            dS = weights[index] * (edge_products(g[index], v[index], graph) - rowwise[graph.queries])
            P, dS = graph.matrix(weights[index]), graph.matrix(dS)
            dv[index] = P.T @ g[index]
            dq[index] = dS @ k[index] * self.scale
            dk[index] = dS.T @ q[index] * self.scale
        return tuple(unbroadcast(grad, shape) for grad, shape in zip((dq, dk, dv), self.shapes))


def edge_products(a, b, graph):
    """a_i · b_j for every edge (i, j) of the graph, (edges,): rows gathered in chunks of about
    CHUNK_ENTRIES numbers (a sampled dense-dense product, never the n × n one)."""
    chunk = max(1, CHUNK_ENTRIES // a.shape[-1])
    return np.concatenate([np.einsum("ed,ed->e", a[graph.queries[e:e + chunk]], b[graph.keys[e:e + chunk]])
                           for e in range(0, max(graph.n_edges, 1), chunk)])


def _segment_softmax(scores, pointer):
    """softmax within each segment pointer[s] … pointer[s + 1] of `scores` (edges,). A segment
    whose scores are all −∞ (every neighbour padded) gets weights 0, not NaN: its maximum is
    taken as 0 and its sum as 1. Empty segments (queries without keys) take no part."""
    nonempty = pointer[:-1] < pointer[1:]
    starts, lengths = pointer[:-1][nonempty], np.diff(pointer)[nonempty]
    if len(starts) == 0:
        return scores
    peak = np.maximum.reduceat(scores, starts)
    peak[np.isneginf(peak)] = 0
    e = np.exp(scores - np.repeat(peak, lengths))
    total = np.add.reduceat(e, starts)
    total[total == 0] = 1
    return e / np.repeat(total, lengths)
