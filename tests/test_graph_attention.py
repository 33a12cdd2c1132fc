"""Graph attention (numpy_transformer/beyond_text/graph.py): float64 gradient checks of the
layer and the two-layer model, the sparse form equal to the dense masked one, attention that
lives on the graph only, permutation equivariance, and clear errors."""
import numpy as np
import pytest

from autograd import Tensor, gradcheck
from numpy_transformer.beyond_text.graph import GAT, GraphAttention, attention_graph, neighbourhood_mask
from numpy_transformer.nn import Dropout

N = 7
# a directed graph: a ring 0 → 1 → … → 6 → 0, two chords, a duplicate and an explicit self-loop
EDGES = (np.array([0, 1, 2, 3, 4, 5, 6, 0, 5, 0, 3]), np.array([1, 2, 3, 4, 5, 6, 0, 4, 2, 1, 3]))


def features(d=5, seed=0, dtype=np.float64):
    return Tensor(np.random.default_rng(seed).standard_normal((N, d)).astype(dtype), requires_grad=True)


def layer(concat=True, dropout=0.0, dtype=np.float64, seed=1):
    return GraphAttention(5, 3, 2, np.random.default_rng(seed), concat=concat, dropout=dropout, dtype=dtype)


def reseeded(module, forward):
    """forward with every Dropout of `module` drawing from a fresh generator: the same masks on
    every call, as a gradient check needs."""
    def run(*args):
        for _, sub in module.named_modules():
            if isinstance(sub, Dropout):
                sub.rng = np.random.default_rng(0)
        return forward(*args)
    return run


@pytest.mark.parametrize("concat", [True, False], ids=["heads concatenated", "heads averaged"])
@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_layer_gradient_check(concat, dropout):
    gat = layer(concat, dropout)
    x = features()
    assert gradcheck(reseeded(gat, lambda x, *params: gat(x, EDGES)), x, *gat.parameters())


def test_model_gradient_check():
    model = GAT(5, 3, np.random.default_rng(0), d_hidden=2, n_heads=3, output_heads=2, dropout=0.2,
                dtype=np.float64)
    x = features()
    assert gradcheck(reseeded(model, lambda x, *params: model(x, EDGES)), x, *model.parameters())


@pytest.mark.parametrize("concat", [True, False], ids=["heads concatenated", "heads averaged"])
def test_sparse_and_dense_forms_are_the_same_layer(concat):
    gat, x = layer(concat), features()
    sparse = gat(x, EDGES)
    sparse_weights = gat.last_weights
    dense = gat.dense_forward(x, EDGES)
    np.testing.assert_allclose(sparse.data, dense.data, rtol=1e-12, atol=1e-14)
    graph = attention_graph(EDGES, N)
    np.testing.assert_allclose(gat.last_weights[:, graph.queries, graph.keys].T, sparse_weights, atol=1e-15)
    g = np.random.default_rng(2).standard_normal(sparse.shape)
    sparse.backward(g)
    sparse_grads = [x.grad] + [p.grad for p in gat.parameters()]
    x.grad = None
    gat.zero_grad()
    dense.backward(g)
    for a, b in zip(sparse_grads, [x.grad] + [p.grad for p in gat.parameters()]):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-13)


def test_each_nodes_attention_sums_to_one_over_its_neighbourhood_with_itself_and_is_zero_elsewhere():
    gat = layer()
    gat.dense_forward(features(), EDGES)
    mask = neighbourhood_mask(attention_graph(EDGES, N))
    sources, targets = EDGES
    expected = np.eye(N, dtype=bool)
    expected[targets, sources] = True                       # edge j → i: i attends to j
    np.testing.assert_array_equal(mask, expected)
    np.testing.assert_allclose(gat.last_weights.sum(axis=-1), 1.0, atol=1e-14)
    assert np.all(gat.last_weights[:, ~mask] == 0) and np.all(gat.last_weights[:, mask] > 0)


def test_duplicate_edges_and_given_self_loops_are_counted_once():
    graph = attention_graph(EDGES, N)
    assert graph.n_edges == len(set(zip(EDGES[1], EDGES[0])) | {(i, i) for i in range(N)}) == 16
    assert np.all(np.diff(graph.query_starts) == np.bincount(graph.queries, minlength=N))


@pytest.mark.parametrize("form", ["forward", "dense_forward"])
def test_a_non_neighbours_features_do_not_change_a_nodes_output_and_a_neighbours_do(form):
    gat, x = layer(), features()
    out = getattr(gat, form)(x, EDGES).data
    mask = neighbourhood_mask(attention_graph(EDGES, N))
    for i in range(N):
        for j in range(N):
            changed = x.data.copy()
            changed[j] += 10.0
            other = getattr(gat, form)(Tensor(changed), EDGES).data
            assert np.array_equal(other[i], out[i]) != mask[i, j], (i, j)


def test_relabelling_the_nodes_permutes_the_outputs():
    model = GAT(5, 3, np.random.default_rng(0), d_hidden=2, n_heads=3, dropout=0.0, dtype=np.float64)
    x = features()
    permutation = np.random.default_rng(3).permutation(N)   # node v gets the new label permutation[v]
    relabelled = np.empty_like(x.data)
    relabelled[permutation] = x.data
    edges = (permutation[EDGES[0]], permutation[EDGES[1]])
    out, out_relabelled = model(x, EDGES).data, model(Tensor(relabelled), edges).data
    np.testing.assert_allclose(out_relabelled[permutation], out, rtol=1e-12, atol=1e-14)
    assert not np.allclose(out_relabelled, out)


def test_float32_features_give_float32_outputs_and_gradients():
    model = GAT(5, 3, np.random.default_rng(0), d_hidden=2, n_heads=2)
    x = features(dtype=np.float32)
    out = model(x, EDGES)
    out.sum().backward()
    assert out.dtype == np.float32 and x.grad.dtype == np.float32
    assert all(p.grad.dtype == np.float32 for p in model.parameters())


@pytest.mark.parametrize("edges, message", [
    ((np.array([0, 7]), np.array([1, 2])), r"edge 1 has source 7, outside the nodes \[0, 7\)"),
    ((np.array([0, 1]), np.array([1, -1])), r"edge 1 has target -1, outside the nodes \[0, 7\)"),
    (np.zeros((3, 4), dtype=int), r"edges must be \(sources, targets\).*got ndarray \(3, 4\)"),
    ((np.array([0, 1]), np.array([1, 2, 3])), r"got sources int64 \(2,\) and targets int64 \(3,\)"),
    ((np.array([0.0, 1.0]), np.array([1.0, 2.0])), r"got sources float64 \(2,\)"),
])
def test_bad_edges_are_clear_errors(edges, message):
    with pytest.raises(ValueError, match=message):
        layer()(features(), edges)


def test_features_of_the_wrong_shape_are_clear_errors():
    with pytest.raises(ValueError, match=r"h must be the node features \(n_nodes, d_in\), got shape \(2, 7, 5\)"):
        layer()(Tensor(np.zeros((2, N, 5))), EDGES)
    with pytest.raises(ValueError, match="d_in=5"):
        layer()(Tensor(np.zeros((N, 4))), EDGES)
    with pytest.raises(ValueError, match="n_heads must be a positive integer, got 0"):
        GraphAttention(5, 3, 0, np.random.default_rng(0))
    with pytest.raises(TypeError, match="concat must be True .* or False .*, got 'mean'"):
        GraphAttention(5, 3, 2, np.random.default_rng(0), concat="mean")
    with pytest.raises(ValueError, match="the graph has 7 × 7 nodes, the features 6"):
        layer()(Tensor(np.zeros((N - 1, 5))), attention_graph(EDGES, N))
