"""Multi-head attention, thesis eqs. (3), (4) and (7) (§1.2.2, Figure 4).

    Q = X W_q,  K = Z W_k,  V = Z W_v                  W_q, W_k, W_v ∈ ℝ^{d × d}
    W_{h,q} = W_q[:, (h−1)k : h k]  (same for W_k, W_v)                              (3)
    Q^(h) = X W_{h,q},  K^(h) = Z W_{h,k},  V^(h) = Z W_{h,v}                         (4)
    head_h = Attention(Q^(h), K^(h), V^(h))                                          (5)
    MultiHead = Concat(head_1, …, head_H) W_c          W_c ∈ ℝ^{H k × d} = ℝ^{d × d}  (7)

with k = d_k = d / H. Z = X for self-attention; for cross-attention X comes from the decoder
and Z is the encoder output ("memory"). W_c is the paper's W^O.

Eq. (3) takes head h's projection from columns (h−1)k … hk of W_q, so Q^(h) is columns
(h−1)k … hk of the full Q = X W_q: reshaping the last axis of Q from d into (H, k) puts head h
at index h − 1 of the new axis. `split_heads` does that reshape (and moves the head axis in
front of the positions); `merge_heads` undoes it, which is the concatenation of eq. (7). All
heads are then one batched product: no Python loop over heads.
"""
import numpy as np

from autograd.checks import checked_integer
from numpy_transformer.attention.cache import append_to_cache
from numpy_transformer.attention.memory_slots import append_memory_slots, memory_bias, memory_mask
from numpy_transformer.attention.scaled_dot_product import scaled_dot_product_attention
from numpy_transformer.attention.variants import attention_variant
from numpy_transformer.nn import Dropout, Linear, Module, parameter


def split_heads(x, n_heads):
    """(..., n, d) → (..., H, n, d/H): head h holds columns h·d_k … (h+1)·d_k of x (eq. (3))."""
    *leading, n, d = x.shape
    if d % n_heads:
        raise ValueError(f"split_heads: the last dimension of x {tuple(x.shape)} is not divisible "
                         f"by n_heads={n_heads}")
    if n == 1:                      # one position (a decoding step): moving an axis of length 1 is a reshape
        return x.reshape(*leading, n_heads, 1, d // n_heads)
    return x.reshape(*leading, n, n_heads, d // n_heads).swapaxes(-3, -2)


def merge_heads(x):
    """(..., H, n, d_k) → (..., n, H·d_k): Concat(head_1, …, head_H) of eq. (7)."""
    *leading, n_heads, n, d_k = x.shape
    if n == 1:
        return x.reshape(*leading, 1, n_heads * d_k)
    return x.swapaxes(-3, -2).reshape(*leading, n, n_heads * d_k)


class MultiHeadAttention(Module):
    """MultiHead(X, Z) = Concat(head_1, …, head_H) W_c, eqs. (3)–(7).

    Parameters W_q, W_k, W_v, W_c: Linear(d_model, d_model) each (with biases unless
    bias=False). Dropout with probability `dropout` acts on the attention weights, as in the
    paper's implementation. After each call `last_weights` holds the attention weights of
    every head as a NumPy array (batch, heads, n_q, n_k), before dropout, for analysis.
    `weights_hook` (None unless set, by numpy_transformer.analysis) is a function weights →
    weights applied to the weights Tensor before dropout and V: it lets an analysis watch,
    replace or zero a head's weights as they are used (attention × gradient, the structured
    approximation, head ablation).

    `attention` chooses how the heads attend: "full" (eq. (5)) or a variant of chapter 2,
    "sparse", "window", "bigbird", "linear", "linformer" or "blockwise", with its `options`
    (window, dilation, global_tokens, feature_map, k_proj, block_size, causal, …; see
    numpy_transformer.attention.variants). The variants are self-attention only; their
    `last_weights` is None, and attention dropout acts on full attention's weights only.

    `memory_slots` m > 0 makes it memory-augmented (numpy_transformer.attention.memory_slots): two
    more parameters, memory_k and memory_v (m, d_model), drawn from N(0, 1) (the scale of Z W_k
    for a unit-scale Z), appended to the keys and values, K = [Z W_k; M_k], V = [Z W_v; M_v].
    `last_weights` then has n_k + m columns, the slots last. Full attention only.
    """

    def __init__(self, d_model, n_heads, rng, dropout=0.0, bias=True, dtype=np.float32, attention="full",
                 memory_slots=0, **options):
        super().__init__()
        if n_heads <= 0 or d_model % n_heads:
            raise ValueError(f"MultiHeadAttention: d_model={d_model} must be divisible by "
                             f"n_heads={n_heads} (each head has d_k = d_model / n_heads)")
        self.d_model, self.n_heads, self.d_k = d_model, n_heads, d_model // n_heads
        self.W_q = Linear(d_model, d_model, rng, bias, dtype)
        self.W_k = Linear(d_model, d_model, rng, bias, dtype)
        self.W_v = Linear(d_model, d_model, rng, bias, dtype)
        self.W_c = Linear(d_model, d_model, rng, bias, dtype)
        self.dropout = Dropout(dropout, rng)
        self.attention = attention
        self.variant = attention_variant(attention, self.d_k, n_heads, rng, dtype, **options)
        self.memory_slots = checked_integer("memory_slots", memory_slots, low=0)
        if self.memory_slots and self.variant is not None:
            raise ValueError(f"MultiHeadAttention: memory_slots={self.memory_slots} needs attention='full'; "
                             f"attention={attention!r} computes its heads without the n × n scores the slots join")
        self.memory_k = self.memory_v = None
        if self.memory_slots:
            self.memory_k = parameter(rng.standard_normal((self.memory_slots, d_model)), dtype)
            self.memory_v = parameter(rng.standard_normal((self.memory_slots, d_model)), dtype)
        self.last_weights = None
        self.weights_hook = None

    def forward(self, query, key_value=None, mask=None, cache=None, bias=None):
        """Self-attention of `query` (key_value None) or its cross-attention on `key_value`.

        query: (batch, n_q, d_model); key_value: (batch, n_k, d_model) or None;
        mask: boolean, broadcastable to (batch, heads, n_q, n_k) (see numpy_transformer.masks).
        Returns (batch, n_q, d_model).

        `cache`, a dict the caller keeps between calls (one per attention layer), serves
        incremental decoding:
          - self-attention: the keys and values of this call's positions are appended to
            cache["k"], cache["v"] (batch, heads, positions so far, d_k), and the queries attend
            to all of them. Call it with the new position(s) only; the mask (if any) must
            cover every cached key, i.e. have n_k = positions so far.
          - cross-attention: the memory's keys and values are projected on the first call,
            stored in cache["k"], cache["v"] and reused afterwards (key_value is then not read).
        Step-by-step decoding with a cache gives the outputs of the full causal computation.
        (A variant's cache: see numpy_transformer.attention.variants.)

        `bias`: added to every head's scores before the scaling (T5's relative position bias,
        numpy_transformer.attention.relative), (1 or batch, heads, n_q, n_k); full attention only.

        With memory slots the mask and the bias cover the n_k keys of the sequence (the cached
        ones included); the m slots are appended after them, every query allowed to see them
        with a zero bias, and they are never cached.
        """
        Q = split_heads(self.W_q(query), self.n_heads)
        if self.variant is not None:
            if key_value is not None or bias is not None:
                raise ValueError(f"MultiHeadAttention(attention={self.attention!r}) is self-attention only, "
                                 f"without a bias; cross-attention and relative positions use attention='full'")
            self.last_weights = None
            return self.W_c(merge_heads(self.variant(Q, *self._keys_values(query), mask, cache)))
        if key_value is None:
            K, V = self._self_keys_values(query, cache)
        else:
            K, V = self._cross_keys_values(key_value, cache)
        if self.memory_slots:
            K, V, mask, bias = self._with_memory_slots(K, V, mask, bias)
        heads, weights = scaled_dot_product_attention(Q, K, V, mask, dropout=self._weights_used, bias=bias)
        self.last_weights = weights.data
        return self.W_c(merge_heads(heads))

    def _weights_used(self, weights):
        """The weights that multiply V: through `weights_hook` when one is set, then dropout."""
        if self.weights_hook is not None:
            weights = self.weights_hook(weights)
        return self.dropout(weights)

    def _with_memory_slots(self, K, V, mask, bias):
        """[K; M_k], [V; M_v] (batch, heads, n_k + m, d_k), the mask with m True columns and the
        bias with m zero columns (numpy_transformer.attention.memory_slots)."""
        n_keys = K.shape[-2]
        K, V = append_memory_slots(K, V, split_heads(self.memory_k, self.n_heads),
                                   split_heads(self.memory_v, self.n_heads))
        return K, V, memory_mask(mask, n_keys, self.memory_slots), memory_bias(bias, n_keys, self.memory_slots)

    def _keys_values(self, z):
        """K, V of eq. (4) for every head: (batch, heads, n, d_k) each."""
        return split_heads(self.W_k(z), self.n_heads), split_heads(self.W_v(z), self.n_heads)

    def _self_keys_values(self, x, cache):
        K, V = self._keys_values(x)
        return (K, V) if cache is None else append_to_cache(cache, K, V)

    def _cross_keys_values(self, memory, cache):
        if cache is None:
            return self._keys_values(memory)
        if "k" not in cache:
            cache["k"], cache["v"] = self._keys_values(memory)
        return cache["k"], cache["v"]
