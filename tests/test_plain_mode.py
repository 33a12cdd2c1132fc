"""`autograd.plain()`: the whole Transformer runs the plain forms (the composite softmax, layer
norm, linear map and attention weights, the plain cross-entropy and embedding lookup), gives the
same logits, loss and gradients as the engine room's forms, and its graph holds none of the
engine room's Functions."""
import numpy as np
import pytest

import autograd
import autograd.functional as F
from autograd import Function, Tensor
from autograd.engine import topological_order
from autograd.engine_room.fused_cross_entropy import FusedCrossEntropy
from autograd.engine_room.fused_layer_norm import FusedLayerNorm
from autograd.engine_room.fused_linear import FusedLinear
from autograd.engine_room.fused_softmax import FusedSoftmax
from autograd.engine_room.sparse_embedding_grad import SparseGradEmbedding
from autograd.functional.embedding import Embedding
from autograd.functional.losses import CrossEntropy
from autograd.engine_room.fused_attention_weights import FusedAttentionWeights
from numpy_transformer.config import TransformerConfig
from numpy_transformer.model import Transformer

ENGINE_ROOM = {cls for cls in Function.registry.values() if cls.__module__.startswith("autograd.engine_room.")}
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
    return logits.data, loss.data, {name: p.grad.copy() for name, p in model.named_parameters()}, ops


def test_the_engine_room_holds_the_fused_forms():
    assert {FusedLinear, FusedLayerNorm, FusedSoftmax, FusedCrossEntropy, SparseGradEmbedding,
            FusedAttentionWeights} <= ENGINE_ROOM
    assert not {CrossEntropy, Embedding} & ENGINE_ROOM


@pytest.mark.parametrize("options", [dict(norm_placement="post"),
                                     dict(norm_placement="pre", norm_variant="torch", tie_embeddings=True)])
def test_a_transformer_gives_the_same_logits_and_gradients_in_both_modes(options):
    """float64, so that the two forms' different orders of rounding stay far below 1e-10."""
    config = TransformerConfig(12, 14, d_model=8, n_heads=2, d_ff=16, n_encoder_layers=2, n_decoder_layers=2,
                               dropout=0.0, max_len=16, pad_id=PAD, dtype="float64", **options)
    model = Transformer(config, np.random.default_rng(0))
    fused_logits, fused_loss, fused_grads, fused_ops = loss_and_gradients(model)
    with autograd.plain():
        logits, loss, grads, ops = loss_and_gradients(model)
    assert {FusedLinear, FusedLayerNorm, FusedCrossEntropy, SparseGradEmbedding, FusedAttentionWeights} <= fused_ops
    assert not ENGINE_ROOM & ops, sorted(cls.__name__ for cls in ENGINE_ROOM & ops)
    assert {CrossEntropy, Embedding} <= ops                 # the plain forms ran in their place
    np.testing.assert_allclose(logits, fused_logits, rtol=0, atol=1e-10)
    np.testing.assert_allclose(loss, fused_loss, rtol=1e-12)
    for name, grad in grads.items():
        np.testing.assert_allclose(grad, fused_grads[name], rtol=0, atol=1e-10, err_msg=name)


def test_plain_mode_keeps_float32():
    config = TransformerConfig(12, 14, d_model=8, n_heads=2, d_ff=16, n_encoder_layers=1, n_decoder_layers=1,
                               dropout=0.0, max_len=16, pad_id=PAD)
    with autograd.plain():
        logits, loss, grads, _ = loss_and_gradients(Transformer(config, np.random.default_rng(0)))
    assert logits.dtype == loss.dtype == np.float32
    assert {grad.dtype for grad in grads.values()} == {np.dtype(np.float32)}


def test_the_mode_nests_and_is_restored_after_an_exception():
    assert not autograd.is_plain()
    with autograd.plain():
        with autograd.plain():
            assert autograd.is_plain()
        assert autograd.is_plain()
    assert not autograd.is_plain()
    with pytest.raises(RuntimeError), autograd.plain():
        raise RuntimeError("inside")
    assert not autograd.is_plain()


def test_plain_is_also_a_decorator_and_composite_its_old_name():
    @autograd.plain()
    def creator_of_softmax(x):
        return type(F.softmax(x).creator)

    assert creator_of_softmax(Tensor(np.ones((2, 3)), requires_grad=True)) is not FusedSoftmax
    assert not autograd.is_plain()
    assert autograd.composite is autograd.plain and autograd.is_composite is autograd.is_plain


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
