"""Graph attention (GAT, Veličković et al., 2018; architecture notes §Graph Neural Networks):

    e_ij = LeakyReLU(aᵀ [W h_i ‖ W h_j])                    the score of neighbour j for node i
    α_ij = softmax_{j ∈ N(i)}(e_ij)                          over i's neighbourhood only
    h_i′ = σ( Σ_{j ∈ N(i)} α_ij W h_j )

A graph is a sparse attention pattern: node i is a query that attends to the keys j ∈ N(i),
its neighbours and itself (a self-loop is added to every node), exactly the N(i) of thesis
eq. (11) (numpy_transformer.attention.sparse), here with N(i) given by the graph instead of
a window. The score is not a product q_i · k_j: splitting a = [a₁ ‖ a₂],

    aᵀ [W h_i ‖ W h_j] = a₁ᵀ W h_i + a₂ᵀ W h_j,

one number per node as a target (a₁) and one as a source (a₂), and e_ij is their sum through
a LeakyReLU (slope 0.2). Every head has its own W and a; the heads are concatenated (hidden
layers) or averaged (the output layer).

`GraphAttention.forward` computes it sparsely, on the edge list: the two per-node numbers are
gathered at the ends of every edge, the softmax runs over each node's incoming edges (a segment
softmax) and the messages α_ij W h_j are summed into their nodes (a segment sum), O(|edges|)
work. `GraphAttention.dense_forward` is the same layer as masked attention over all n × n
pairs: e is a broadcast sum of a column and a row, the adjacency is the mask M of eq. (10).
"""
import math

import numpy as np

import autograd.functional as F
from autograd.checks import checked_integer, checked_number
from autograd.ops import segment_sum
from numpy_transformer.attention.sparse import AttentionGraph
from numpy_transformer.masks import additive_mask
from numpy_transformer.nn import Dropout, Linear, Module, parameter


def attention_graph(edges, n_nodes):
    """The pattern D of eq. (11) that a graph attention layer attends over: node i's neighbours
    N(i) = {j : edge j → i} ∪ {i}, duplicates removed, as an `AttentionGraph` whose queries are
    the nodes that attend (the edges' targets) and whose keys are their neighbours (sources).

    edges: a pair (sources, targets) of integer arrays of length E, or an integer array of
    shape (2, E), edge e running from sources[e] to targets[e]; an undirected graph lists both
    directions. n_nodes: the number of nodes, every index in [0, n_nodes).
    """
    if isinstance(edges, AttentionGraph):
        if (edges.n_queries, edges.n_keys) != (n_nodes, n_nodes):
            raise ValueError(f"graph attention: the graph has {edges.n_queries} × {edges.n_keys} nodes, the "
                             f"features {n_nodes}")
        return edges
    n_nodes = checked_integer("attention_graph: n_nodes", n_nodes, low=1)
    sources, targets = _checked_edges(edges, n_nodes)
    nodes = np.arange(n_nodes)
    pairs = np.unique(np.concatenate([targets, nodes]) * n_nodes + np.concatenate([sources, nodes]))
    queries, keys = np.divmod(pairs, n_nodes)                       # sorted by query (target)
    return AttentionGraph(n_nodes, n_nodes, queries, keys, np.searchsorted(queries, np.arange(n_nodes + 1)))


def neighbourhood_mask(graph):
    """(n, n) boolean, True at [i, j] when j ∈ N(i): the graph as an attention mask."""
    mask = np.zeros((graph.n_queries, graph.n_keys), dtype=bool)
    mask[graph.queries, graph.keys] = True
    return mask


class GraphAttention(Module):
    """One graph attention layer with H heads: h (n, d_in) → (n, H·d_out) with `concat`, the
    heads side by side (hidden layers), or (n, d_out) without, their mean (the output layer):

        head k:  h_i′ = Σ_{j ∈ N(i)} α_ij^(k) W^(k) h_j,
                 α_ij^(k) = softmax_{j ∈ N(i)}( LeakyReLU(a₁^(k)ᵀ W^(k) h_i + a₂^(k)ᵀ W^(k) h_j) )

    The non-linearity σ is left to the model (ELU after a hidden layer, the loss's softmax after
    the output layer). Parameters: W (Linear(d_in, H·d_out), no bias: the H matrices W^(k)
    side by side, split as eq. (3) splits W_q), a_target = a₁ and a_source = a₂, (H, d_out)
    each, Glorot-initialised as the paper's a ∈ ℝ^{2 d_out}. Dropout (probability `dropout`,
    the paper's 0.6) acts on the layer's input and on the attention weights, in training.
    After each call `last_weights` holds the weights α as a NumPy array: (E, H), one row per
    edge of the layer's `AttentionGraph` (`forward`), or (H, n, n) (`dense_forward`).
    """

    def __init__(self, d_in, d_out, n_heads, rng, concat=True, dropout=0.0, slope=0.2, dtype=np.float32):
        super().__init__()
        self.n_heads = checked_integer("GraphAttention: n_heads", n_heads, low=1)
        self.d_out = checked_integer("GraphAttention: d_out", d_out, low=1)
        if not isinstance(concat, bool):
            raise TypeError(f"GraphAttention: concat must be True (heads concatenated) or False (averaged), "
                            f"got {concat!r}")
        self.concat = concat
        self.slope = checked_number("GraphAttention: slope", slope, 0, 1, high_open=True)
        self.W = Linear(d_in, n_heads * d_out, rng, bias=False, dtype=dtype)
        std = math.sqrt(2 / (2 * d_out + 1))
        self.a_target = parameter(std * rng.standard_normal((n_heads, d_out)), dtype)
        self.a_source = parameter(std * rng.standard_normal((n_heads, d_out)), dtype)
        self.dropout = Dropout(dropout, rng)
        self.last_weights = None

    def node_scores(self, h):
        """W h reshaped to (n, H, d_out), and the scores a₁ᵀ W h_i and a₂ᵀ W h_j, (n, H) each."""
        if h.ndim != 2:
            raise ValueError(f"GraphAttention: h must be the node features (n_nodes, d_in), got shape {h.shape}")
        Wh = self.W(self.dropout(h)).reshape(h.shape[0], self.n_heads, self.d_out)
        return Wh, (Wh * self.a_target).sum(axis=-1), (Wh * self.a_source).sum(axis=-1)

    def forward(self, h, edges):
        """The sparse form: h (n, d_in) and `edges` (see `attention_graph`, or an AttentionGraph
        from it) → (n, H·d_out) or (n, d_out); O(|edges| · H · d_out)."""
        Wh, target, source = self.node_scores(h)
        graph = attention_graph(edges, h.shape[0])
        e = F.leaky_relu(target[graph.queries] + source[graph.keys], self.slope)   # (E, H): e_ij per edge
        alpha = F.segment_softmax(e, graph.queries, graph.n_queries)                # over each N(i)
        self.last_weights = alpha.data
        messages = self.dropout(alpha)[:, :, None] * Wh[graph.keys]                  # α_ij W h_j: (E, H, d_out)
        return self.combine_heads(segment_sum(messages, graph.queries, graph.n_queries))

    def dense_forward(self, h, edges):
        """The same layer as masked attention over all pairs: e (H, n, n) = LeakyReLU(a₁ᵀWh_i + a₂ᵀWh_j),
        α = softmax(M + e) with the graph's M of eq. (10) (0 on N(i), −∞ elsewhere); O(n² · H)."""
        Wh, target, source = self.node_scores(h)
        graph = attention_graph(edges, h.shape[0])
        e = F.leaky_relu(target.T[:, :, None] + source.T[:, None, :], self.slope)
        alpha = F.softmax(e + additive_mask(neighbourhood_mask(graph), e.dtype), axis=-1)
        self.last_weights = alpha.data
        return self.combine_heads((self.dropout(alpha) @ Wh.swapaxes(0, 1)).swapaxes(0, 1))

    def combine_heads(self, heads):
        """(n, H, d_out) → (n, H·d_out), the heads concatenated, or (n, d_out), their mean."""
        return heads.reshape(heads.shape[0], -1) if self.concat else heads.mean(axis=1)


class GAT(Module):
    """The paper's transductive model for node classification: two graph attention layers,

        logits = GAT_out( ELU( GAT_hidden(X) ) ),

    the hidden layer with `n_heads` heads of `d_hidden` features, concatenated, the output layer
    with `output_heads` heads of `n_classes` scores, averaged (8 × 8, ELU and 1 output head on
    Cora in the paper, dropout 0.6). x: (n, d_in) node features → (n, n_classes) logits.
    """

    def __init__(self, d_in, n_classes, rng, d_hidden=8, n_heads=8, output_heads=1, dropout=0.6, dtype=np.float32):
        super().__init__()
        self.hidden = GraphAttention(d_in, d_hidden, n_heads, rng, concat=True, dropout=dropout, dtype=dtype)
        self.output = GraphAttention(n_heads * d_hidden, n_classes, output_heads, rng, concat=False,
                                     dropout=dropout, dtype=dtype)

    def forward(self, x, edges):
        return self.output(F.elu(self.hidden(x, edges)), edges)


def _checked_edges(edges, n_nodes):
    """(sources, targets), two integer arrays of one length with entries in [0, n_nodes)."""
    wanted = "(sources, targets), two integer arrays of one length, or an integer array of shape (2, E)"
    try:
        sources, targets = (np.asarray(ends) for ends in edges)
    except (TypeError, ValueError):
        raise ValueError(f"graph attention: edges must be {wanted}, got {type(edges).__name__} "
                         f"{np.shape(edges) if isinstance(edges, np.ndarray) else ''}") from None
    if sources.ndim != 1 or sources.shape != targets.shape or sources.dtype.kind not in "iu" \
            or targets.dtype.kind not in "iu":
        raise ValueError(f"graph attention: edges must be {wanted}, got sources {sources.dtype} {sources.shape} "
                         f"and targets {targets.dtype} {targets.shape}")
    for name, ends in (("source", sources), ("target", targets)):
        outside = (ends < 0) | (ends >= n_nodes)
        if outside.any():
            e = int(np.argmax(outside))
            raise ValueError(f"graph attention: edge {e} has {name} {ends[e]}, outside the nodes [0, {n_nodes})")
    return sources, targets
