"""`autograd.composite()`: the whole Transformer runs the composite softmax, layer norm, linear
map and attention weights, gives the same outputs and gradients as the fused ops, and its graph
holds none of the fused ops."""
import numpy as np
import pytest

import autograd
import autograd.functional as F
from autograd import Tensor
from autograd.engine import topological_order
from autograd.functional.layer_norm import LayerNorm
from autograd.functional.linear import Linear
from autograd.functional.softmax import Softmax
from numpy_transformer.attention.scaled_dot_product import AttentionWeights
from numpy_transformer.config import TransformerConfig
from numpy_transformer.model import Transformer

FUSED = {Linear, LayerNorm, Softmax, AttentionWeights}     # (the model's softmax is inside AttentionWeights)
PAD = 0
SRC = np.array([[3, 4, 5, 6, 7, 8], [9, 2, 3, 4, PAD, PAD]])
TGT_IN = np.array([[1, 5, 6, 7, 8], [1, 2, 9, PAD, PAD]])
TGT_OUT = np.array([[5, 6, 7, 8, 2], [2, 9, 2, PAD, PAD]])


def loss_and_gradients(model):
    model.zero_grad()
    logits = model(SRC, TGT_IN)
    loss = F.cross_entropy(logits, TGT_OUT, ignore_index=PAD, label_smoothing=0.1)
    ops = {type(node.creator) for node in topological_order(loss) if node.creator is not None}
    loss.backward()
    return logits.data, {name: p.grad.copy() for name, p in model.named_parameters()}, ops


@pytest.mark.parametrize("options", [dict(norm_placement="post"),
                                     dict(norm_placement="pre", norm_variant="torch", tie_embeddings=True)])
def test_a_transformer_gives_the_same_logits_and_gradients_in_both_modes(options):
    config = TransformerConfig(12, 14, d_model=8, n_heads=2, d_ff=16, n_encoder_layers=2, n_decoder_layers=2,
                               dropout=0.0, max_len=16, pad_id=PAD, dtype="float64", **options)
    model = Transformer(config, np.random.default_rng(0))
    fused_logits, fused_grads, fused_ops = loss_and_gradients(model)
    with autograd.composite():
        logits, grads, ops = loss_and_gradients(model)
    assert FUSED - {Softmax} <= fused_ops           # the fused ops really run by default ...
    assert not FUSED & ops                          # ... and none of them in composite mode
    np.testing.assert_allclose(logits, fused_logits, rtol=0, atol=1e-10)
    for name, grad in grads.items():
        np.testing.assert_allclose(grad, fused_grads[name], rtol=0, atol=1e-10, err_msg=name)


def test_composite_mode_keeps_float32():
    config = TransformerConfig(12, 14, d_model=8, n_heads=2, d_ff=16, n_encoder_layers=1, n_decoder_layers=1,
                               dropout=0.0, max_len=16, pad_id=PAD)
    with autograd.composite():
        logits, grads, _ = loss_and_gradients(Transformer(config, np.random.default_rng(0)))
    assert logits.dtype == np.float32
    assert {grad.dtype for grad in grads.values()} == {np.dtype(np.float32)}


def test_the_mode_nests_and_is_restored_after_an_exception():
    assert not autograd.is_composite()
    with autograd.composite():
        with autograd.composite():
            assert autograd.is_composite()
        assert autograd.is_composite()
    assert not autograd.is_composite()
    with pytest.raises(RuntimeError), autograd.composite():
        raise RuntimeError("inside")
    assert not autograd.is_composite()


def test_composite_is_also_a_decorator():
    @autograd.composite()
    def creator_of_softmax(x):
        return type(F.softmax(x).creator)

    assert creator_of_softmax(Tensor(np.ones((2, 3)), requires_grad=True)) is not Softmax
    assert not autograd.is_composite()


@pytest.mark.parametrize("variant", ["thesis", "torch"])
def test_the_composite_layer_norm_gradient_is_finite_and_exact_on_a_constant_row(variant):
    rng = np.random.default_rng(0)
    x = np.vstack([np.full(5, 2.0), rng.standard_normal(5)])           # row 0 is constant: σ = 0 exactly
    gamma, beta, g = rng.standard_normal(5), rng.standard_normal(5), rng.standard_normal((2, 5))
    grads = []
    for layer_norm in (F.layer_norm, F.layer_norm_composite):
        inputs = [Tensor(a.copy(), requires_grad=True) for a in (x, gamma, beta)]
        (layer_norm(*inputs, variant=variant) * g).sum().backward()
        grads.append([t.grad for t in inputs])
    for fused, composite in zip(*grads):
        assert np.isfinite(composite).all()
        np.testing.assert_allclose(composite, fused, rtol=1e-10, atol=1e-10)   # entries ~ γ/ε = 1e6 on row 0
