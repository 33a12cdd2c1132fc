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
    """MultiHead(X, Z) = Concat(head_1, …, head_H) W_c, eqs. (3)–(7).

    Parameters W_q, W_k, W_v, W_c: Linear(d_model, d_model) each (with biases unless
    bias=False). Dropout with probability `dropout` acts on the attention weights, as in the
    paper's implementation. After each call `last_weights` holds the attention weights of
    every head as a NumPy array (batch, heads, n_q, n_k), before dropout, for analysis.
    `weights_hook` (None unless set, by numpy_transformer.analysis) is a function weights →
    weights applied to the weights Tensor before dropout and V: it lets an analysis watch,
    replace or zero a head's weights as they are used (attention × gradient, the structured
    approximation, head ablation). Both happen in one method, `weights_used`.

    `attention` chooses how the heads attend: "full" (eq. (5)) or a variant of chapter 2,
    "sparse", "window", "bigbird", "linear", "linformer" or "blockwise", with its `options`
    (window, dilation, global_tokens, feature_map, k_proj, block_size, causal, …; see
    numpy_transformer.attention.variants). The variants are self-attention only; their
    `last_weights` is None, and attention dropout acts on full attention's weights only.
    The choice is kept as `attend`, a strategy of numpy_transformer.attention.attend (full
    attention, memory slots, or the variant, `variant`), which a strategy of one's own may
    replace.

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
        self.attend = self.attend_strategy()

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
        Q = split_heads(self.W_q(query), self.n_heads)                  # (3), (4): Q^(h) = X W_{h,q}
        K, V = self.keys_values(query, key_value, cache)                # (4): K^(h) = Z W_{h,k}, V^(h) = Z W_{h,v}
        heads = self.attend(Q, K, V, mask, bias, cache)                 # (5): head_h = Attention(Q^(h), K^(h), V^(h))
        return self.W_c(merge_heads(heads))                             # (7): Concat(head_1, …, head_H) W_c

    def keys_values(self, query, key_value, cache):
        """K, V of eq. (4), (batch, heads, n_k, d_k) each, of Z = query (self-attention) or
        Z = key_value (cross-attention), through the cache by the attend strategy's rule: a
        self-attention's new keys and values join the past positions it keeps, a
        cross-attention's are projected once per cache."""
        if key_value is None:
            return self.attend.keep(*self.project_keys_values(query), cache)
        return self.attend.reuse(lambda: self.project_keys_values(key_value), cache)

    def project_keys_values(self, z):
        """Z W_k and Z W_v split per head, eqs. (3), (4): (batch, heads, n, d_k) each."""
        return split_heads(self.W_k(z), self.n_heads), split_heads(self.W_v(z), self.n_heads)

    def weights_used(self, weights):
        """The weights of eq. (6), a Tensor (batch, heads, n_q, n_k), on their way to V (full
        attention calls it): kept as `last_weights`, then through `weights_hook` when one is
        set, then through dropout; returns the weights that multiply V."""
        self.last_weights = weights.data
        if self.weights_hook is not None:
            weights = self.weights_hook(weights)
        return self.dropout(weights)

    def attend_strategy(self):
        """How the heads attend (attend.py): the variant's, or full attention, over the memory
        slots too when the layer has them."""
        if self.variant is not None:
            return VariantAttention(self.variant, self.attention)
        if self.memory_slots:
            return MemorySlotsAttention(self.weights_used, self.memory_k, self.memory_v, self.n_heads)
        return FullAttention(self.weights_used)
