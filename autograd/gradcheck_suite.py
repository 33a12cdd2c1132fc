"""One gradient check per primitive op, with broadcasting where the op broadcasts.

`numpy-transformer gradcheck` prints this table; the tests run it and prove that every
registered primitive (`Function.registry`) appears in at least one case's graph. Ops with an
engine-room form are checked in both forms: the default, and the plain one (`plain()`).
"""
from dataclasses import dataclass
from typing import Callable

import numpy as np

import autograd.functional as F
from autograd import ops
from autograd.checkpointing import checkpoint
from autograd.engine import Tensor
from autograd.engine_room.fused_attention_weights import fused_attention_weights
from autograd.gradcheck import analytic_jacobian, numerical_jacobian
from autograd.plain_mode import plain


@dataclass(frozen=True)
class Case:
    name: str
    fn: Callable
    shapes: tuple
    positive: bool = False  # inputs drawn from [0.5, 2] (log, sqrt, a power's base)

    def inputs(self, rng, dtype=np.float64):
        low_high = (0.5, 2.0) if self.positive else None
        return [Tensor((rng.uniform(*low_high, shape) if low_high else rng.standard_normal(shape))
                       .astype(dtype), requires_grad=True) for shape in self.shapes]


_IDS = np.array([[0, 3, 3], [1, 0, 4]])
_TARGETS = np.array([2, 0, 4, 1])
_SEGMENTS = np.array([2, 0, 2, 1, 2, 0])  # six rows in four segments, segment 3 empty
_MASK = np.array([[True, False, False, True], [False, True, False, False], [True, True, False, False]])
_CAUSAL = np.tril(np.ones((3, 5), bool))

CASES = [
    Case("a + b (broadcast)", lambda a, b: a + b, ((3, 4), (4,))),
    Case("a - b (broadcast)", lambda a, b: a - b, ((2, 1, 4), (3, 1))),
    Case("a * b (broadcast)", lambda a, b: a * b, ((3, 4), (3, 1))),
    Case("a / b (broadcast)", lambda a, b: a / b, ((3, 4), (4,)), positive=True),
    Case("a ** b", lambda a, b: a ** b, ((3, 4), (3, 4)), positive=True),
    Case("-a", lambda a: -a, ((3, 4),)),
    Case("exp", lambda a: a.exp(), ((3, 4),)),
    Case("log", lambda a: a.log(), ((3, 4),), positive=True),
    Case("sqrt", lambda a: a.sqrt(), ((3, 4),), positive=True),
    Case("tanh", lambda a: a.tanh(), ((3, 4),)),
    Case("where / masked_fill", lambda a, b: ops.where(_MASK, a, b), ((3, 4), (4,))),
    Case("sum(axis=1)", lambda a: a.sum(axis=1), ((2, 3, 4),)),
    Case("mean(keepdims)", lambda a: a.mean(axis=(0, 2), keepdims=True), ((2, 3, 4),)),
    Case("max(axis=-1)", lambda a: a.max(axis=-1), ((3, 5),)),
    Case("segment_sum (scatter-add)", lambda a: ops.segment_sum(a, _SEGMENTS, 4), ((6, 3),)),
    Case("reshape", lambda a: a.reshape(4, 6), ((2, 3, 4),)),
    Case("transpose / swapaxes", lambda a: a.swapaxes(0, 2), ((2, 3, 4),)),
    Case("x[1:, ::2]", lambda a: a[1:, ::2], ((3, 5),)),
    Case("x[[0, 2, 0]] (repeats)", lambda a: a[[0, 2, 0, 0]], ((3, 4),)),
    Case("concatenate / stack / split", lambda a, b: ops.stack(ops.split(ops.concatenate([a, b], axis=1), 2, axis=1)),
         ((2, 3), (2, 1))),
    Case("a @ b (batched, broadcast)", lambda a, b: a @ b, ((2, 1, 3, 4), (5, 4, 2))),
    Case("linear x W + b (fused)", lambda x, w, b: F.linear(x, w, b), ((2, 3, 4), (4, 5), (5,))),
    Case("softmax", lambda a: F.softmax(a, axis=-1), ((3, 5),)),
    Case("softmax_composite", lambda a: F.softmax_composite(a, axis=0), ((3, 5),)),
    Case("segment_softmax", lambda a: F.segment_softmax(a, _SEGMENTS, 4), ((6, 2),)),
    Case("segment_softmax_composite", lambda a: F.segment_softmax_composite(a, _SEGMENTS, 4), ((6, 2),)),
    Case("log_softmax", lambda a: F.log_softmax(a, axis=-1), ((3, 5),)),
    Case("log_softmax_composite", lambda a: F.log_softmax_composite(a, axis=0), ((3, 5),)),
    Case("relu", lambda a: F.relu(a), ((3, 4),)),
    Case("gelu", lambda a: F.gelu(a), ((3, 4),)),
    Case("gelu (tanh)", lambda a: F.gelu(a, approximate="tanh"), ((3, 4),)),
    Case("gelu, plain form", plain()(F.gelu), ((3, 4),)),
    Case("gelu (tanh), plain form", plain()(lambda a: F.gelu(a, approximate="tanh")), ((3, 4),)),
    Case("sigmoid", lambda a: F.sigmoid(a), ((3, 4),)),
    Case("leaky_relu", lambda a: F.leaky_relu(a, 0.2), ((3, 4),)),
    Case("elu", lambda a: F.elu(a), ((3, 4),)),
    Case("attention weights (fused, masked, bias)", lambda q, k, r: fused_attention_weights(q, k, _CAUSAL, r),
         ((2, 3, 4), (2, 5, 4), (3, 5))),
    Case("layer_norm (thesis eq. 2)", lambda x, g, b: F.layer_norm(x, g, b), ((3, 5), (5,), (5,))),
    Case("layer_norm (torch)", lambda x, g, b: F.layer_norm(x, g, b, variant="torch"), ((3, 5), (5,), (5,))),
    Case("layer_norm_composite", lambda x, g, b: F.layer_norm_composite(x, g, b), ((3, 5), (5,), (5,))),
    Case("cross_entropy (smoothed)", lambda z: F.cross_entropy(z, _TARGETS, ignore_index=1, label_smoothing=0.1),
         ((4, 5),)),
    Case("cross_entropy (plain)",
         lambda z: _plain(F.cross_entropy, z, _TARGETS, ignore_index=1, label_smoothing=0.1), ((4, 5),)),
    Case("dropout (training)", lambda a: F.dropout(a, 0.3, True, np.random.default_rng(0)), ((3, 4),)),
    Case("dropout (training), plain form", plain()(lambda a: F.dropout(a, 0.3, True, np.random.default_rng(0))),
         ((3, 4),)),
    Case("embedding (repeated ids)", lambda w: F.embedding(w, _IDS), ((5, 3),)),
    Case("embedding (plain)", lambda w: _plain(F.embedding, w, _IDS), ((5, 3),)),
    Case("checkpoint (with dropout)", lambda a, b: _checkpointed_dropout(a, b), ((3, 4), (4,))),
]


def _plain(fn, *args, **kwargs):
    """fn(*args, **kwargs) inside `autograd.plain()`: the plain form of an op whose default is
    an engine-room form."""
    with plain():
        return fn(*args, **kwargs)


def _checkpointed_dropout(a, b):
    """dropout(tanh(a · b)) under `checkpoint`: a fresh generator each call, so that every call
    draws the same mask; the recomputation in backward must draw it again."""
    rng = np.random.default_rng(0)
    return checkpoint(lambda x, y: F.dropout((x * y).tanh(), 0.5, True, rng), a, b, generators=[rng])


def max_gradient_error(case, rng):
    """Largest |analytic − numerical| entry over all of the case's input Jacobians (float64)."""
    inputs = case.inputs(rng)
    return max(np.max(np.abs(analytic_jacobian(case.fn, inputs, i) - numerical_jacobian(case.fn, inputs, i)))
               for i in range(len(inputs)))
