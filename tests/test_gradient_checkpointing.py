"""autograd.checkpoint: a checkpointed piece keeps no graph, and backward recomputes it, with the
same dropout masks, into the same gradients as the piece run plainly."""
import numpy as np
import pytest

import autograd
import autograd.functional as F
from autograd import GradcheckError, Tensor, gradcheck
from autograd.engine import topological_order
from numpy_transformer.config import TransformerConfig
from numpy_transformer.model import EncoderLayer

CONFIG = TransformerConfig(10, 10, d_model=8, n_heads=2, d_ff=16, n_encoder_layers=3, n_decoder_layers=1,
                           dropout=0.1, max_len=16, dtype="float64")


def layers_and_input(seed=0):
    rng = np.random.default_rng(seed)
    layers = [EncoderLayer(CONFIG, rng) for _ in range(3)]
    x = Tensor(rng.standard_normal((2, 5, 8)), requires_grad=True)
    return layers, x, rng


def loss_and_gradients(layers, x, rng, run_layer):
    for layer in layers:
        layer.zero_grad()
    x.grad = None
    h = x
    for layer in layers:
        h = run_layer(layer, h)
    loss = (h * h).sum()
    loss.backward()
    return loss.item(), [x.grad] + [p.grad for layer in layers for _, p in layer.named_parameters()]


def test_checkpointed_layers_give_the_gradients_of_plain_layers_with_dropout_on():
    layers, x, rng = layers_and_input()
    state = rng.bit_generator.state
    plain = loss_and_gradients(layers, x, rng, lambda layer, h: layer(h, None))
    after_plain = rng.bit_generator.state
    rng.bit_generator.state = state
    checkpointed = loss_and_gradients(layers, x, rng, lambda layer, h: autograd.checkpoint(
        lambda z: layer(z, None), h, generators=[rng]))
    assert checkpointed[0] == pytest.approx(plain[0], abs=1e-12)
    for expected, grad in zip(plain[1], checkpointed[1]):
        np.testing.assert_allclose(grad, expected, rtol=0, atol=1e-12)
    assert rng.bit_generator.state == after_plain             # the recomputation left the stream where it was


def test_without_its_generators_the_recomputation_draws_other_masks_and_the_check_fails():
    def piece(a, forget):
        rng = np.random.default_rng(0)
        return autograd.checkpoint(lambda x: F.dropout(x.tanh(), 0.5, True, rng), a,
                                   generators=[] if forget else [rng])

    a = Tensor(np.random.default_rng(1).standard_normal((4, 5)), requires_grad=True)
    assert gradcheck(lambda x: piece(x, forget=False), a)
    with pytest.raises(GradcheckError):
        gradcheck(lambda x: piece(x, forget=True), a)


def test_the_forward_pass_keeps_no_graph_inside_the_piece():
    layers, x, _ = layers_and_input()
    out = autograd.checkpoint(lambda z: layers[1](layers[0](z, None), None), x)
    assert [type(node.creator).__name__ for node in topological_order(out) if node.creator] == ["Checkpoint"]


def test_checkpoints_nest():
    a = Tensor(np.random.default_rng(2).standard_normal((3, 4)), requires_grad=True)
    inner = lambda x: (x * x).tanh()                                             # noqa: E731
    assert gradcheck(lambda x: autograd.checkpoint(lambda y: autograd.checkpoint(inner, y).exp(), x), a)


def test_a_piece_must_return_a_tensor_and_take_a_tensor_that_requires_grad():
    a = Tensor(np.ones(3), requires_grad=True)
    with pytest.raises(TypeError, match="checkpoint: fn must return a Tensor, got float"):
        autograd.checkpoint(lambda x: 1.0, a)
    with pytest.raises(ValueError, match="checkpoint: no input requires grad"):
        autograd.checkpoint(lambda x: x * 2, Tensor(np.ones(3)))
    with autograd.no_grad():
        assert autograd.checkpoint(lambda x: x * 2, Tensor(np.ones(3))).data.tolist() == [2.0, 2.0, 2.0]


# The models' option: gradient_checkpointing=True.

from numpy_transformer.language_model import DecoderOnlyTransformer, EncoderOnlyTransformer  # noqa: E402
from numpy_transformer.model import Transformer  # noqa: E402

SRC = np.array([[3, 4, 5, 6, 7], [8, 9, 3, 0, 0]])
TGT = np.array([[1, 5, 6, 7], [1, 8, 0, 0]])


def transformer(checkpointing, **overrides):
    config = TransformerConfig(10, 10, d_model=8, n_heads=2, d_ff=16, n_encoder_layers=4, n_decoder_layers=5,
                               dropout=0.1, max_len=16, dtype="float64", gradient_checkpointing=checkpointing,
                               **overrides)
    return Transformer(config, np.random.default_rng(0))


def language_model(model_class, checkpointing, build):
    config = build(10, d_model=8, n_heads=2, d_ff=16, n_layers=4, dropout=0.1, max_len=16, dtype="float64",
                   gradient_checkpointing=checkpointing)
    return model_class(config, np.random.default_rng(0))


MODELS = {
    "encoder-decoder": (lambda on: transformer(on), lambda model: model(SRC, TGT)),
    "encoder-decoder, relative": (lambda on: transformer(on, positional="relative", relative_buckets=8,
                                                         relative_max_distance=16), lambda model: model(SRC, TGT)),
    "decoder-only": (lambda on: language_model(DecoderOnlyTransformer, on, TransformerConfig.decoder_only), lambda model: model(SRC)),
    "encoder-only": (lambda on: language_model(EncoderOnlyTransformer, on, TransformerConfig.encoder_only), lambda model: model(SRC)),
}


@pytest.mark.parametrize("name", MODELS)
def test_a_model_with_gradient_checkpointing_gives_the_same_logits_and_gradients(name):
    build, run = MODELS[name]
    results, graph_sizes = [], []
    for on in (False, True):
        model = build(on)                                   # the same seed: the same weights and dropout masks
        logits = run(model)
        graph_sizes.append(len(topological_order(logits)))
        (logits * logits).sum().backward()
        results.append((logits.data, {n: p.grad for n, p in model.named_parameters()}))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=0, atol=1e-12)
    for n, grad in results[0][1].items():
        np.testing.assert_allclose(results[1][1][n], grad, rtol=0, atol=1e-12, err_msg=n)
    assert graph_sizes[1] < graph_sizes[0] / 2                 # the layers' graphs are not kept
