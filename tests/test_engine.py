"""The engine: graph building, reverse topological order, accumulation, no_grad, freeing."""
import contextlib

import numpy as np
import pytest

import autograd.functional as F
from autograd import Tensor, gradcheck, no_grad, is_grad_enabled, ops


def leaf(*shape, dtype=np.float64, seed=0):
    return Tensor(np.random.default_rng(seed).standard_normal(shape).astype(dtype), requires_grad=True)


def test_node_reused_many_times_accumulates_every_use():
    x = leaf(3)
    total = x
    for _ in range(99):
        total = total + x
    total.sum().backward()
    np.testing.assert_array_equal(x.grad, np.full(3, 100.0))


def test_diamond_graph_matches_hand_derivative():
    # a = 2x, b = a + a, c = a * b = 8x²  =>  dc/dx = 16x
    x = leaf(4)
    a = x * 2
    c = a * (a + a)
    c.sum().backward()
    np.testing.assert_allclose(x.grad, 16 * x.data, rtol=1e-12)


def test_chain_of_10000_ops_does_not_hit_the_recursion_limit():
    x = leaf(2)
    y = x
    for _ in range(10_000):
        y = y * 1.0001
    y.sum().backward()
    np.testing.assert_allclose(x.grad, np.full(2, 1.0001 ** 10_000), rtol=1e-9)


def test_no_grad_builds_no_graph_and_restores_the_mode():
    x = leaf(3)
    with no_grad():
        assert not is_grad_enabled()
        y = (x * x).sum()
    assert is_grad_enabled()
    assert not y.requires_grad and y.creator is None


def test_an_op_output_is_a_tensor_like_any_other_even_a_full_reduction():
    x = leaf(2, 3, dtype=np.float32)
    for grad_mode in (True, False):
        with contextlib.nullcontext() if grad_mode else no_grad():
            total, product = x.sum(), x * 2
        for y in (total, product):
            assert isinstance(y.data, np.ndarray) and y.dtype == np.float32 and y.grad is None
            assert y.requires_grad == grad_mode and (y.creator is not None) == grad_mode
    assert total.shape == () and total.item() == pytest.approx(float(x.data.sum()))


def test_no_grad_works_as_a_decorator():
    @no_grad()
    def evaluate(t):
        return t * 3

    assert not evaluate(leaf(2)).requires_grad
    assert is_grad_enabled()


def test_no_grad_restores_the_mode_after_an_exception():
    with pytest.raises(ZeroDivisionError):
        with no_grad():
            1 / 0
    assert is_grad_enabled()


def test_saved_arrays_are_freed_after_backward():
    x = leaf(3)
    y = x.exp()
    y.sum().backward()
    assert y.creator.saved is None


def test_second_backward_through_a_freed_graph_raises_a_clear_error():
    x = leaf(3)
    loss = (x * x).sum()
    loss.backward()
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        loss.backward()


def test_retain_graph_allows_a_second_backward_and_grads_accumulate():
    x = leaf(3)
    loss = (x * x).sum()
    loss.backward(retain_graph=True)
    loss.backward()
    np.testing.assert_allclose(x.grad, 4 * x.data)


def test_non_scalar_backward_needs_an_explicit_gradient():
    x = leaf(2, 3)
    with pytest.raises(ValueError, match=r"non-scalar output of shape \(2, 3\)"):
        (x * 2).backward()
    (x * 2).backward(np.ones((2, 3)))
    np.testing.assert_array_equal(x.grad, np.full((2, 3), 2.0))


def test_backward_with_a_wrongly_shaped_gradient_names_both_shapes():
    with pytest.raises(ValueError, match=r"\(3,\).*\(2,\)"):
        (leaf(2) * 2).backward(np.ones(3))


def test_backward_on_a_constant_explains_why_it_cannot():
    with pytest.raises(RuntimeError, match="does not require grad"):
        Tensor(np.ones(2)).sum().backward()


def test_leaves_that_share_an_upstream_gradient_get_independent_arrays():
    a, b = leaf(3, seed=1), leaf(3, seed=2)
    (a + b).sum().backward()
    a.grad *= 0
    np.testing.assert_array_equal(b.grad, np.ones(3))


@pytest.mark.parametrize("graph", [
    lambda a, b: (a + b.reshape(3)) * a,                                  # a view of the upstream gradient
    lambda a, b: ops.concatenate([a, b.reshape(3), a * 2.0]).reshape(3, 3).T.sum(axis=0),  # split views
    lambda a, b: F.linear(a.reshape(1, 3), b.reshape(3, 1)).sum() * a + a,   # fresh VJP results added in place
    lambda a, b: (a * b.reshape(3)).sum() + a.max() + a[[0, 0, 2]].sum(),
], ids=["add-reshape", "concatenate-split", "linear", "sum-max-getitem"])
def test_in_place_accumulation_never_lets_two_gradients_share_memory(graph):
    """backward() adds later contributions into a gradient in place, and gives a leaf its
    gradient without a copy, only when no other gradient shares that array's memory: every
    leaf's .grad is its own array, and the values are those of finite differences."""
    a, b = leaf(3, seed=1), leaf(1, 3, seed=2)
    out = graph(a, b)
    out.backward(np.ones(out.shape))
    assert not np.shares_memory(a.grad, b.grad)
    b_grad = b.grad.copy()
    a.grad *= 0                                                             # the user may scale .grad in place
    np.testing.assert_array_equal(b.grad, b_grad)
    assert gradcheck(graph, a, b)


def test_constants_get_no_gradient_and_inputs_that_need_none_are_skipped():
    x, c = leaf(3), Tensor(np.arange(3.0))
    (x * c).sum().backward()
    assert c.grad is None
    np.testing.assert_array_equal(x.grad, c.data)


def test_python_scalars_keep_float32():
    x = leaf(3, dtype=np.float32)
    for y in (x * 2.5, 2.5 - x, x / 3, 1 / (x * x + 1), x ** 2, x + 1e-9):
        assert y.dtype == np.float32


def test_only_floating_tensors_can_require_grad():
    with pytest.raises(TypeError, match="floating-point"):
        Tensor(np.arange(3), requires_grad=True)


def test_an_ndarray_on_the_left_of_an_operator_still_builds_the_graph():
    x = leaf(3)
    y = np.ones(3) * x
    assert isinstance(y, Tensor) and y.requires_grad


def test_detach_cuts_the_graph_but_shares_the_values():
    x = leaf(3)
    d = (x * 2).detach()
    assert not d.requires_grad and d.creator is None
    np.testing.assert_array_equal(d.data, 2 * x.data)


def test_intermediate_tensors_are_released_after_backward():
    import gc
    import weakref
    x = leaf(3)
    hidden = x.exp()
    loss = (hidden * 2).sum()
    watcher = weakref.ref(hidden)
    del hidden
    loss.backward()
    gc.collect()
    assert watcher() is None


def test_array_constants_take_the_tensor_dtype():
    x = leaf(3, dtype=np.float32)
    assert (x * np.array(2.0)).dtype == np.float32
    assert (x + np.ones(3)).dtype == np.float32


def test_mixing_float32_and_float64_tensors_is_refused_where_it_happens():
    with pytest.raises(TypeError, match="float32 and float64"):
        leaf(3, dtype=np.float32) + leaf(3)


def test_integer_tensors_are_not_truncated_by_float_constants():
    assert (Tensor(np.arange(3)) * 0.5).data.tolist() == [0.0, 0.5, 1.0]


def test_an_op_on_no_tensor_at_all_is_a_clear_type_error():
    from autograd import ops
    with pytest.raises(TypeError, match="at least one input must be a Tensor"):
        ops.add(np.ones(2), 1.0)


# Each leaf's gradient taken as soon as it is complete, and written where it is wanted.

def chain(layers=6, width=64, seed=0):
    """h ← tanh(h W_k) for k = 1 … layers, from a constant h: (the weights, the loss Σ h)."""
    rng = np.random.default_rng(seed)
    weights = [Tensor(rng.standard_normal((width, width)).astype(np.float32) / 8, requires_grad=True)
               for _ in range(layers)]
    h = Tensor(rng.standard_normal((4, width)).astype(np.float32))
    for w in weights:
        h = (h @ w).tanh()
    return weights, h.sum()


def test_each_leaf_comes_right_after_the_last_node_that_uses_it():
    """In reverse topological order a leaf follows the last of its consumers with nothing but
    other leaves between: its gradient is complete there and is taken at once, not held until
    the end of backward() (the inputs a node needs visited last were the leaves before)."""
    from autograd.engine import topological_order
    from numpy_transformer.config import TransformerConfig
    from numpy_transformer.language_model import DecoderOnlyTransformer

    config = TransformerConfig.decoder_only(vocab_size=12, d_model=8, n_heads=2, d_ff=16, n_layers=2, dropout=0.0,
                                            max_len=8, pad_id=0, tie_embeddings=True, dtype="float32")
    model = DecoderOnlyTransformer(config, np.random.default_rng(0))
    tokens = np.array([[1, 2, 3, 4, 5], [6, 7, 8, 0, 0]])
    loss = F.cross_entropy(model(tokens[:, :-1]), tokens[:, 1:], ignore_index=0)
    for _, loss in [chain(), (None, loss)]:
        order = list(reversed(topological_order(loss)))
        position = {id(node): i for i, node in enumerate(order)}
        last_use = {}
        for node in order:
            for tensor in (node.creator.inputs if node.creator is not None else ()):
                if tensor.requires_grad:
                    last_use[id(tensor)] = max(last_use.get(id(tensor), -1), position[id(node)])
        leaves = [node for node in order if node.creator is None]
        assert len(leaves) >= 6
        for node in leaves:
            between = order[last_use[id(node)] + 1:position[id(node)]]
            assert all(other.creator is None for other in between), [type(o.creator).__name__ for o in between]

