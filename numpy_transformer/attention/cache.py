"""The key/value cache of incremental decoding, shared by full attention and the variants that
keep every key (block-wise, sparse, window).

The caller keeps one dict per attention layer and passes it at every call; `KeyValueCache`
reads and writes its entries "k" and "v", (batch, heads, positions so far, d_k) each, so the
caller (beam search reordering its rows, a test reading the shapes) sees plain arrays."""
from autograd import concatenate


class KeyValueCache:
    """The keys and values one attention layer keeps in the caller's dict `store` between calls.
    A store of None keeps nothing: every call sees its own keys and values only."""

    def __init__(self, store):
        self.store = store

    def append(self, K, V):
        """Self-attention: this call's keys and values (batch, heads, n_new, d_k) after the cached
        ones; returns all of them, (batch, heads, positions so far, d_k)."""
        if self.store is None:
            return K, V
        if "k" in self.store:
            K = concatenate([self.store["k"], K], axis=-2)
            V = concatenate([self.store["v"], V], axis=-2)
        self.store["k"], self.store["v"] = K, V
        return K, V

    def reuse(self, keys_values):
        """Cross-attention: the keys and values of the encoder output, `keys_values()`, computed
        on the first call and read from the store afterwards (the memory is not read again)."""
        if self.store is None:
            return keys_values()
        if "k" not in self.store:
            self.store["k"], self.store["v"] = keys_values()
        return self.store["k"], self.store["v"]
