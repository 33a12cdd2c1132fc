"""The engine room's form of reverse mode (autograd/engine_room/reverse_mode.py: gradients added
in place, outputs built without Tensor.__init__) against the plain `Tensor.backward` of
autograd/engine.py: the same gradients bit for bit, and the default path runs the engine room's;
its `gradients_into`, which writes leaves' gradients into given arrays."""
import contextlib

import numpy as np
import pytest

import autograd
import autograd.functional as F
from autograd import Tensor
from autograd.engine_room import reverse_mode
from numpy_transformer.config import TransformerConfig
from numpy_transformer.model import Transformer
from test_engine import chain

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


# gradients_into: each leaf's gradient written where it is wanted, the private one freed at once.

def test_gradients_into_writes_each_leaf_s_gradient_into_its_array_with_the_same_values():
    """The model's gradients bit for bit as backward() gives them, each in the array given for
    its leaf (which becomes its .grad); a tied embedding (two uses) included; a leaf not given
    keeps its own array; a leaf that already has a gradient adds to it as usual."""
    from numpy_transformer.config import TransformerConfig
    from numpy_transformer.language_model import DecoderOnlyTransformer

    config = TransformerConfig.decoder_only(vocab_size=12, d_model=8, n_heads=2, d_ff=16, n_layers=2, dropout=0.0,
                                            max_len=8, pad_id=0, tie_embeddings=True, dtype="float32")
    model = DecoderOnlyTransformer(config, np.random.default_rng(0))
    tokens = np.array([[1, 2, 3, 4, 5], [6, 7, 8, 0, 0]])

    def backward():
        F.cross_entropy(model(tokens[:, :-1]), tokens[:, 1:], ignore_index=0).backward()

    parameters = [p for _, p in model.named_parameters()]
    model.zero_grad()
    backward()
    expected = [p.grad.copy() for p in parameters]
    model.zero_grad()
    sinks = [np.full(p.shape, np.nan, p.dtype) for p in parameters[1:]]
    with reverse_mode.gradients_into(zip(parameters[1:], sinks)):
        backward()
    assert parameters[0].grad is not None and not any(parameters[0].grad is sink for sink in sinks)
    for p, sink, grad in zip(parameters[1:], sinks, expected[1:]):
        assert p.grad is sink
        np.testing.assert_array_equal(sink, grad)
    for p, grad in zip(parameters, expected):
        np.testing.assert_array_equal(p.grad, grad)
    again = [np.zeros(p.shape, p.dtype) for p in parameters]
    with reverse_mode.gradients_into(zip(parameters, again)):
        backward()                                              # every .grad set: added to, sinks untouched
    assert not any(sink.any() for sink in again)
    for p, grad in zip(parameters, expected):
        np.testing.assert_allclose(p.grad, 2 * grad, rtol=1e-6, atol=1e-7)


def test_gradients_into_frees_each_private_gradient_at_once():
    """While backward() runs, at most a few weight gradients exist besides the arrays given:
    the peak of traced memory stays under a third of what keeping every private gradient to the
    end costs (here 6 gradients of 16 KB each)."""
    import tracemalloc

    peaks = []
    for into in (False, True):
        weights, loss = chain(layers=12, width=128)
        sinks = [np.empty(w.shape, w.dtype) for w in weights]
        tracemalloc.start()
        with reverse_mode.gradients_into(zip(weights, sinks)) if into else contextlib.nullcontext():
            loss.backward()
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert all((w.grad is sink) == into for w, sink in zip(weights, sinks))
    kept, freed = peaks
    assert kept > 12 * 128 * 128 * 4 and freed < kept / 3, peaks


def test_gradients_into_is_not_nested_and_ends_with_its_block():
    weights, loss = chain()
    for wrong in (np.empty(weights[0].shape, np.float64), np.empty((1, *weights[0].shape), np.float32)):
        with pytest.raises(ValueError, match=r"gradients_into\(\): an array of .* for a tensor of \(64, 64\) float32"):
            with reverse_mode.gradients_into([(weights[0], wrong)]):
                pass                                            # a float64 array would take a silent upcast
    with pytest.raises(RuntimeError, match="inside another"):
        with reverse_mode.gradients_into([]):
            with reverse_mode.gradients_into([]):
                pass
    assert reverse_mode._sinks is None
    with pytest.raises(ValueError):
        with reverse_mode.gradients_into(zip(weights, [np.empty(w.shape, w.dtype) for w in weights])):
            raise ValueError
    assert reverse_mode._sinks is None
    loss.backward()
    assert all(w.grad is not None for w in weights)
