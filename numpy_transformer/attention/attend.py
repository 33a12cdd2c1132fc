"""How the heads of a `MultiHeadAttention` layer attend, eq. (5) or a variant of chapter 2: the
strategy the layer chooses when it is built (`attention=`, `memory_slots=`) and keeps as
`layer.attend`.

    head_h = Attention(Q^(h), K^(h), V^(h))                                          (5)

A strategy is called as `attend(Q, K, V, mask, bias, cache)` → the heads, (batch, heads, n_q,
d_v). With a key/value cache (incremental decoding, cache.py) the layer also asks it what the
cache keeps, because the kinds keep different things (full attention every key and value, linear
attention a recurrent state instead):

    keep(K, V, cache) → K, V              self-attention: this call's keys and values joined to
                                          the past positions the strategy keeps
    reuse(keys_values, cache) → K, V      cross-attention: the encoder output's keys and values,
                                          keys_values(), computed once per cache (cache None:
                                          computed now)

| strategy               | the heads                                            | the cache keeps           |
|------------------------|------------------------------------------------------|---------------------------|
| `FullAttention`        | softmax(M + (Q Kᵀ + R)/√k) V, eqs. (5), (6), (10)    | every key and value       |
| `MemorySlotsAttention` | full attention over [K; M_k], [V; M_v]               | the same, never the slots |
| `VariantAttention`     | a variant of chapter 2, self-attention only          | what the variant needs    |

Full attention's weights of eq. (6), on their way to V, are kept as `last_weights` (a NumPy
array (batch, heads, n_q, n_k), for analysis; the layer's `last_weights` reads it), pass through
`weights_hook` when one is set, then through the layer's dropout. The hook is how the analyses
of chapter 3 watch, replace or zero a head's weights as they are used (attention × gradient,
the structured approximation, head ablation): `numpy_transformer.analysis.hooks.weights_hooks`
sets it on every layer's strategy for the length of a `with` block.

A strategy of one's own replaces a layer's after construction, `layer.attend = strategy`
(a subclass of `FullAttention` that changes `__call__` only, for instance).
"""
from numpy_transformer.attention.cache import KeyValueCache
from numpy_transformer.attention.heads import split_heads
from numpy_transformer.attention.memory_slots import append_memory_slots, memory_bias, memory_mask
from numpy_transformer.attention.scaled_dot_product import scaled_dot_product_attention


class FullAttention:
    """Eq. (5) over every key the queries may see, the scaled dot-product attention of
    scaled_dot_product.py, masked (eq. (10)) and with T5's relative bias R when given. `dropout`
    (the layer's Dropout) acts on the weights before they multiply V; `weights_hook` (None, or a
    function weights → weights set by an analysis) acts before it; `last_weights` keeps the
    weights of the last call, before both."""

    def __init__(self, dropout):
        self.dropout, self.weights_hook, self.last_weights = dropout, None, None

    def keep(self, K, V, cache):
        return KeyValueCache(cache).append(K, V)

    def reuse(self, keys_values, cache):
        return keys_values() if cache is None else KeyValueCache(cache).reuse(keys_values)

    def __call__(self, Q, K, V, mask, bias, cache):
        """The keys and values came through the cache in `keep` or `reuse`: `cache` is not read."""
        return scaled_dot_product_attention(Q, K, V, mask, dropout=self.weights_used, bias=bias)[0]

    def weights_used(self, weights):
        """The weights of eq. (6), a Tensor (batch, heads, n_q, n_k), kept as `last_weights`,
        then through the hook (if set) and dropout: the weights that multiply V."""
        self.last_weights = weights.data
        if self.weights_hook is not None:
            weights = self.weights_hook(weights)
        return self.dropout(weights)


class MemorySlotsAttention(FullAttention):
    """Memory-augmented attention (memory_slots.py): full attention over K = [Z W_k; M_k] and
    V = [Z W_v; M_v], M_k, M_v ∈ ℝ^{m × d} (`memory_k`, `memory_v`, the layer's parameters)
    split per head as eq. (3). The mask gets m True columns and the bias m zero columns, and
    `last_weights` has n_k + m columns, the slots last. The cache keeps the sequence's keys and
    values only: the slots join after them at every call."""

    def __init__(self, dropout, memory_k, memory_v, n_heads):
        super().__init__(dropout)
        self.memory_k, self.memory_v, self.n_heads = memory_k, memory_v, n_heads

    def __call__(self, Q, K, V, mask, bias, cache):
        n_keys, n_slots = K.shape[-2], self.memory_k.shape[0]
        K, V = append_memory_slots(K, V, split_heads(self.memory_k, self.n_heads),
                                   split_heads(self.memory_v, self.n_heads))
        return super().__call__(Q, K, V, memory_mask(mask, n_keys, n_slots), memory_bias(bias, n_keys, n_slots), cache)


class VariantAttention:
    """A variant of chapter 2: `variant`, a module of variants.py ((Q, K, V, mask, cache) →
    heads), of attention `kind`. Self-attention only, without a bias; it forms no weights of
    eq. (6), so its `last_weights` stays None and its `weights_hook` is never called. The
    variant keeps what it needs of past positions in the cache itself as it attends (every key
    and value, or linear attention's recurrent state), so `keep` passes this call's keys and
    values on as they are."""

    last_weights = weights_hook = None

    def __init__(self, variant, kind):
        self.variant, self.kind = variant, kind

    def keep(self, K, V, cache):
        return K, V

    def reuse(self, keys_values, cache):
        raise self.refusal()

    def __call__(self, Q, K, V, mask, bias, cache):
        if bias is not None:
            raise self.refusal()
        return self.variant(Q, K, V, mask, cache)

    def refusal(self):
        return ValueError(f"MultiHeadAttention(attention={self.kind!r}) is self-attention only, without a bias; "
                          f"cross-attention and relative positions use attention='full'")
