"""Multi-head attention, thesis eqs. (3), (4) and (7) (§1.2.2, Figure 4).

    Q = X W_q,  K = Z W_k,  V = Z W_v                  W_q, W_k, W_v ∈ ℝ^{d × d}
    W_{h,q} = W_q[:, (h−1)k : h k]  (same for W_k, W_v)                              (3)
    Q^(h) = X W_{h,q},  K^(h) = Z W_{h,k},  V^(h) = Z W_{h,v}                         (4)
    head_h = Attention(Q^(h), K^(h), V^(h))                                          (5)
    MultiHead = Concat(head_1, …, head_H) W_c          W_c ∈ ℝ^{H k × d} = ℝ^{d × d}  (7)

with k = d_k = d / H. Z = X for self-attention; for cross-attention X comes from the decoder
and Z is the encoder output ("memory"). W_c is the paper's W^O. The split of eq. (3) and the
concatenation of eq. (7) are reshapes (heads.py); eq. (5) is the layer's attend strategy
(attend.py): full attention, or a variant of chapter 2, with memory slots or without.
"""
import numpy as np

from autograd.checks import checked_integer
from numpy_transformer.attention.attend import FullAttention, MemorySlotsAttention, VariantAttention
from numpy_transformer.attention.heads import merge_heads, split_heads
from numpy_transformer.attention.variants import attention_variant
from numpy_transformer.nn import Dropout, Linear, Module, parameter


class MultiHeadAttention(Module):
    """MultiHead(X, Z) = Concat(head_1, …, head_H) W_c, eqs. (3)–(7), with H = `n_heads` heads of
    width d_k = d_model / H.

    X: (batch, n_q, d_model), the sequence whose positions ask (the queries); Z: (batch, n_k,
    d_model), the sequence they attend to (Z = X for self-attention, the encoder output for
    cross-attention). W_q, W_k, W_v, W_c: Linear(d_model, d_model) each (with biases unless
    bias=False). Per head Q^(h), K^(h): (batch, n, d_k); the weights of eq. (6): (batch, H, n_q,
    n_k), kept after each call as `last_weights` (a NumPy array, before dropout), for analysis.

    `attention` chooses how the heads attend, eq. (5): "full", or a variant of chapter 2
    ("sparse", "window", "bigbird", "linear", "linformer", "blockwise", with its `options`;
    numpy_transformer.attention.variants). `dropout` acts on full attention's weights, as in the
    paper's implementation. `memory_slots` m > 0 appends m learned key/value slots to K and V
    (memory_slots.py). The choice is kept as `attend`, a strategy of attend.py, which documents
    the strategies, the analyses' hook on the weights, and what a key/value cache keeps.
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
        if self.memory_slots:   # N(0, 1): the scale of Z W_k for a unit-scale Z
            self.memory_k = parameter(rng.standard_normal((self.memory_slots, d_model)), dtype)
            self.memory_v = parameter(rng.standard_normal((self.memory_slots, d_model)), dtype)
        self.attend = self.attend_strategy()

    def forward(self, query, key_value=None, mask=None, cache=None, bias=None):
        """MultiHead(X, Z) of eqs. (3)–(7): X = `query` (batch, n_q, d_model), Z = `key_value`
        (batch, n_k, d_model), or X itself when None → (batch, n_q, d_model).

        mask: boolean, True where query i may attend to key j, broadcastable to (batch, heads,
        n_q, n_k) (eq. (10); numpy_transformer.masks). bias: T5's relative position bias R,
        (1 or batch, heads, n_q, n_k), added to the scores (relative.py). cache: the dict of
        incremental decoding, one per layer (cache.py); None computes K and V from Z.
        """
        Q = split_heads(self.W_q(query), self.n_heads)                  # (3), (4): Q^(h) = X W_{h,q}
        K, V = self.keys_values(query, key_value, cache)                # (4): K^(h) = Z W_{h,k}, V^(h) = Z W_{h,v}
        heads = self.attend(Q, K, V, mask, bias, cache)                 # (5): head_h = Attention(Q^(h), K^(h), V^(h))
        return self.W_c(merge_heads(heads))                             # (7): Concat(head_1, …, head_H) W_c

    def keys_values(self, query, key_value, cache):
        """K, V of eq. (4), (batch, heads, n_k, d_k) each: Z W_k and Z W_v split per head, with
        Z = query (self-attention) or key_value (cross-attention). With a cache they go through
        the strategy's `keep` (this call's after the past positions) or `reuse` (the encoder
        output's, projected once per cache)."""
        if key_value is not None:
            return self.attend.reuse(lambda: self.project_keys_values(key_value), cache)
        K, V = self.project_keys_values(query)
        return (K, V) if cache is None else self.attend.keep(K, V, cache)

    def project_keys_values(self, z):
        """Z W_k and Z W_v split per head, eqs. (3), (4): (batch, heads, n, d_k) each."""
        return split_heads(self.W_k(z), self.n_heads), split_heads(self.W_v(z), self.n_heads)

    @property
    def last_weights(self):
        """The weights of eq. (6) of the last call, (batch, heads, n_q, n_k) (n_k + m columns
        with m memory slots, the slots last), before dropout; None for a variant of chapter 2."""
        return self.attend.last_weights

    def attend_strategy(self):
        """How the heads attend (attend.py): the variant's, or full attention, over the memory
        slots too when the layer has them."""
        if self.variant is not None:
            return VariantAttention(self.variant, self.attention)
        if self.memory_slots:
            return MemorySlotsAttention(self.dropout, self.memory_k, self.memory_v, self.n_heads)
        return FullAttention(self.dropout)
