"""No float64 anywhere in a float32 training step: every array the graph of one step holds (each
node's value, each op's saved arrays and array attributes), every gradient backward() passes
between ops, every parameter gradient, and Adam's moments are float32. The same walk of a
mixed-precision step finds float16 everywhere but where float32 is the rule."""
import numpy as np
import pytest

import autograd.functional as F
from autograd import Tensor
from autograd.engine_room import reverse_mode
from autograd.engine import topological_order
from autograd.optim import Adam
from numpy_transformer.config import TransformerConfig
from numpy_transformer.model import Transformer
from numpy_transformer.training.mixed_precision import MixedPrecision

PAD = 0
SRC = np.array([[3, 4, 5, 6, 7, 8], [9, 2, 3, 4, PAD, PAD]])
TGT_IN = np.array([[1, 5, 6, 7, 8], [1, 2, 9, PAD, PAD]])
TGT_OUT = np.array([[5, 6, 7, 8, 2], [2, 9, 2, PAD, PAD]])


def float_arrays(value):
    """The floating-point arrays in `value`: an array, or arrays inside tuples, lists and dicts."""
    if isinstance(value, np.ndarray):
        return [value] if value.dtype.kind in "fc" else []
    if isinstance(value, (tuple, list)):
        return [array for item in value for array in float_arrays(item)]
    if isinstance(value, dict):
        return float_arrays(list(value.values()))
    return []


def arrays_held_by_the_graph(loss):
    """(where, array) for each node's value and each op's saved arrays and array attributes."""
    held = []
    for node in topological_order(loss):
        held += [("value", node.data)] if node.data.dtype.kind in "fc" else []
        if node.creator is not None:
            fn = node.creator
            held += [(f"{type(fn).__name__}.{name}", array) for name, value in vars(fn).items()
                     for array in float_arrays(value)]
    return held


@pytest.mark.parametrize("options", [
    dict(),
    dict(norm_placement="pre", norm_variant="torch", activation="gelu", tie_embeddings=True),
    dict(activation="swiglu", positional="learned"),
], ids=["thesis", "pre-gelu-tied", "swiglu-learned"])
def test_one_float32_training_step_holds_and_passes_only_float32_arrays(options, monkeypatch):
    config = TransformerConfig(src_vocab_size=11, tgt_vocab_size=13, d_model=8, n_heads=2, d_ff=12,
                               n_encoder_layers=2, n_decoder_layers=2, dropout=0.1, max_len=16, **options)
    model = Transformer(config, np.random.default_rng(0)).train()
    optimizer = Adam(model.named_parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9)
    passed = []
    accumulate = reverse_mode._accumulate
    monkeypatch.setattr(reverse_mode, "_accumulate", lambda grads, owned, tensor, g, fresh:
                        (passed.append(g.dtype), accumulate(grads, owned, tensor, g, fresh)))

    loss = F.cross_entropy(model(SRC, TGT_IN), TGT_OUT, ignore_index=PAD, label_smoothing=0.1)
    held = arrays_held_by_the_graph(loss)
    loss.backward()
    optimizer.step()

    assert len(held) > 100 and not [where for where, array in held if array.dtype != np.float32]
    assert len(passed) > 100 and set(passed) == {np.dtype(np.float32)}
    assert all(p.dtype == np.float32 and p.grad.dtype == np.float32 for p in model.parameters())
    assert {array.dtype for array in float_arrays(optimizer.state)} == {np.dtype(np.float32)}


def test_the_walk_would_see_a_float64_array_saved_by_an_op():
    x = Tensor(np.ones(3, np.float32), requires_grad=True)
    y = x * 2.0
    y.creator.save_for_backward(np.ones(3))                          # a float64 the op should not keep
    assert [where for where, array in arrays_held_by_the_graph(y) if array.dtype != np.float32] == ["Mul.saved"]


# what a mixed-precision step keeps in float32 (autograd/precision.py): the loss, the layer norms'
# per-row statistics (…, 1), the loss's probabilities, and the efficient attentions' arrays
FLOAT32_IN_MIXED = ("FusedCrossEntropy.saved", "BlockwiseAttention.saved", "SparseAttention.saved", "BandAttention.saved")


def float32_in_a_mixed_step(where, array, loss):
    return array is loss.data or where in FLOAT32_IN_MIXED or (where == "FusedLayerNorm.saved" and array.shape[-1] == 1)


@pytest.mark.parametrize("options", [
    dict(),
    dict(norm_placement="pre", norm_variant="torch", activation="gelu", tie_embeddings=True),
    dict(activation="swiglu", positional="relative"),
    dict(attention="window", decoder_attention="linear", attention_options={"window": 2}),
    dict(attention="blockwise", attention_options={"block_size": 2}),
], ids=["thesis", "pre-gelu-tied", "swiglu-relative", "window-linear", "blockwise"])
def test_one_mixed_precision_step_holds_and_passes_float16_arrays(options, monkeypatch):
    """The float16 twin's graph holds float16 arrays but for the float32 ones listed above, every
    gradient between ops is float16; the master weights, their gradients and Adam stay float32."""
    config = TransformerConfig(src_vocab_size=11, tgt_vocab_size=13, d_model=8, n_heads=2, d_ff=12,
                               n_encoder_layers=2, n_decoder_layers=2, dropout=0.1, max_len=16, **options)
    model = Transformer(config, np.random.default_rng(0)).train()
    optimizer = Adam(model.named_parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9)
    mixed = MixedPrecision(model)
    passed, held = [], []
    accumulate = reverse_mode._accumulate
    monkeypatch.setattr(reverse_mode, "_accumulate", lambda grads, owned, tensor, g, fresh:
                        (passed.append(g.dtype), accumulate(grads, owned, tensor, g, fresh)))

    def loss_of(half):
        loss = F.cross_entropy(half(SRC, TGT_IN), TGT_OUT, ignore_index=PAD, label_smoothing=0.1)
        held.extend((where, array, loss) for where, array in arrays_held_by_the_graph(loss))
        return loss

    mixed.loss_and_gradients(loss_of)
    optimizer.step()
    mixed.after_step()

    assert len(held) > 100 and not [where for where, array, loss in held
                                    if array.dtype != np.float16 and not float32_in_a_mixed_step(where, array, loss)]
    assert [array.dtype for where, array, loss in held if float32_in_a_mixed_step(where, array, loss)] == \
        [np.float32] * sum(float32_in_a_mixed_step(*item) for item in held)
    assert len(passed) > 100 and set(passed) == {np.dtype(np.float16)}
    assert all(p.dtype == np.float32 and p.grad.dtype == np.float32 for p in model.parameters())
    assert all(p.dtype == np.float16 for p in mixed.half.parameters())
    assert {array.dtype for array in float_arrays(optimizer.state)} == {np.dtype(np.float32)}
