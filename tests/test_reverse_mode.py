"""The engine room's form of reverse mode (autograd/engine_room/reverse_mode.py: gradients added
in place, outputs built without Tensor.__init__) against the plain `Tensor.backward` of
autograd/engine.py: the same gradients bit for bit, and the default path runs the engine room's."""
import contextlib

import numpy as np
import pytest

import autograd
import autograd.functional as F
from autograd import Tensor
from autograd.engine_room import reverse_mode
from numpy_transformer.config import TransformerConfig
from numpy_transformer.model import Transformer

PAD = 0
SRC = np.array([[3, 4, 5, 6, 7, 8], [9, 2, 3, 4, PAD, PAD]])
TGT_IN = np.array([[1, 5, 6, 7, 8], [1, 2, 9, PAD, PAD]])
TGT_OUT = np.array([[5, 6, 7, 8, 2], [2, 9, 2, PAD, PAD]])


def gradients(model, backward_mode):
    """Every parameter's gradient after one loss: the forward on the default path, the backward
    in `backward_mode` (contextlib.nullcontext for the default, or autograd.plain)."""
    model.zero_grad()
    loss = F.cross_entropy(model(SRC, TGT_IN), TGT_OUT, ignore_index=PAD, label_smoothing=0.1)
    with backward_mode():
        loss.backward()
    return {name: p.grad.copy() for name, p in model.named_parameters()}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("options", [dict(), dict(norm_placement="pre", tie_embeddings=True, activation="gelu")],
                         ids=["thesis", "pre-tied-gelu"])
def test_a_models_gradients_from_the_engine_room_backward_are_the_plain_ones_bit_for_bit(dtype, options):
    config = TransformerConfig(12, 14, d_model=8, n_heads=2, d_ff=16, n_encoder_layers=2, n_decoder_layers=2,
                               dropout=0.0, max_len=16, pad_id=PAD, dtype=dtype, **options)
    model = Transformer(config, np.random.default_rng(0))
    default, plain = gradients(model, contextlib.nullcontext), gradients(model, autograd.plain)
    assert default.keys() == plain.keys()
    for name, grad in default.items():
        assert grad.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(plain[name], grad, err_msg=name)


def test_the_default_path_runs_the_engine_room_form_and_plain_mode_the_plain_one(monkeypatch):
    calls = []
    for name in ("forward", "backward"):
        original = getattr(reverse_mode, name)
        monkeypatch.setattr(reverse_mode, name, lambda *args, name=name, original=original:
                            (calls.append(name), original(*args))[1])
    x = Tensor(np.arange(3.0), requires_grad=True)
    (x * x).sum().backward()
    assert calls == ["forward", "forward", "backward"]
    calls.clear()
    with autograd.plain():
        (x * x).sum().backward()
    assert calls == []
    np.testing.assert_array_equal(x.grad, 4 * np.arange(3.0))


def test_in_plain_mode_leaves_that_share_an_upstream_gradient_get_independent_arrays():
    a, b = Tensor(np.ones(3), requires_grad=True), Tensor(np.ones(3), requires_grad=True)
    with autograd.plain():
        (a + b).sum().backward()
    a.grad *= 0
    np.testing.assert_array_equal(b.grad, np.ones(3))
