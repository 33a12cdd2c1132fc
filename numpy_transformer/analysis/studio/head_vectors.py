"""The numbers of eqs. (3)–(7) and (10) that every attention layer used on one sentence: per
head the queries Q^(h) = X W_{h,q}, the keys K^(h) = Z W_{h,k}, the values V^(h) = Z W_{h,v}, the
mask, and the layer's output Concat(head_1, …, head_H) W_c, for the attention studio's equation
view.

`studio_capture(model, capture)` runs `capture()` (a function of numpy_transformer.analysis.capture,
e.g. `lambda: capture_sentence(...)`) while every attention layer (hooks.attention_modules) records
the arguments of its last call, then projects them again with the layer's own W_q, W_k, W_v. Only
the last call of each layer is kept: the full pass that `capture` ends with, after any greedy
decoding it ran first.
"""
import contextlib
import dataclasses

import numpy as np

from autograd import no_grad
from numpy_transformer.analysis.hooks import attention_modules
from numpy_transformer.attention.heads import split_heads
from numpy_transformer.masks import boolean_mask


@dataclasses.dataclass
class HeadVectors:
    """One attention layer's numbers for sentence 0 of its batch: Q (heads, n_q, d_k), K and V
    (heads, n_k, d_k), allowed (n_q, n_k) booleans (True: query i may attend to key j), output
    (n_q, d_model) the layer's result, and has_bias (a relative bias R was added to the scores,
    which the equation view does not show)."""
    Q: np.ndarray
    K: np.ndarray
    V: np.ndarray
    allowed: np.ndarray
    output: np.ndarray
    has_bias: bool

    @property
    def d_k(self):
        return self.Q.shape[-1]


@contextlib.contextmanager
def recorded_calls(model):
    """Inside the block, every attention layer's calls are recorded: {name: (args, kwargs, output)}
    of its last call. The layers' own forward runs unchanged."""
    calls = {}
    modules = attention_modules(model)

    def recording(name, forward):
        def forward_and_record(*args, **kwargs):
            output = forward(*args, **kwargs)
            calls[name] = (args, kwargs, output)
            return output
        return forward_and_record

    try:
        for name, module in modules.items():
            module.forward = recording(name, module.forward)
        yield calls
    finally:
        for module in modules.values():
            vars(module).pop("forward", None)


def as_array(x):
    return np.asarray(getattr(x, "data", x))


def head_vectors(module, args, kwargs, output):
    """The `HeadVectors` of a `MultiHeadAttention` call forward(query, key_value=None, mask=None,
    cache=None, bias=None), projected again by the layer's W_q, W_k, W_v (eqs. (3), (4))."""
    names = ("query", "key_value", "mask", "cache", "bias")
    call = {**dict(zip(names, args)), **kwargs}
    query, key_value, mask = call["query"], call.get("key_value"), call.get("mask")
    z = query if key_value is None else key_value
    with no_grad():
        Q = as_array(split_heads(module.W_q(query), module.n_heads))[0]
        K = as_array(split_heads(module.W_k(z), module.n_heads))[0]
        V = as_array(split_heads(module.W_v(z), module.n_heads))[0]
    n_q, n_k = Q.shape[1], K.shape[1]
    allowed = np.ones((n_q, n_k), dtype=bool) if mask is None else \
        np.broadcast_to(boolean_mask(as_array(mask)), (1, 1, n_q, n_k))[0, 0].copy()
    return HeadVectors(Q.astype(np.float64), K.astype(np.float64), V.astype(np.float64), allowed,
                       as_array(output)[0].astype(np.float64), call.get("bias") is not None)


def studio_capture(model, capture):
    """(the `AttentionCapture` that capture() returns, {layer name: HeadVectors}) for `model`."""
    with recorded_calls(model) as calls:
        result = capture()
    modules = attention_modules(model)
    return result, {name: head_vectors(modules[name], *calls[name]) for name in result.weights}
