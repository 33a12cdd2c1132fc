"""The key/value cache of incremental decoding, shared by full attention and the variants that
keep every key (block-wise, sparse, window).

Decoding one token at a time, a layer would recompute the keys and values of every earlier
position at every step; the cache keeps them instead. The caller (a decoder stepping through a
sentence, numpy_transformer.decoding) keeps one dict per attention layer and passes it to every
call, `layer(x, cache=store)`; `KeyValueCache` reads and writes its entries "k" and "v",
(batch, heads, positions so far, d_k) each, so the caller (beam search reordering its rows, a
test reading the shapes) sees plain arrays:

  - self-attention: the keys and values of this call's positions are appended to the stored
    ones, and the queries attend to all of them. The caller passes the new position(s) only;
    a mask (if any) must cover every cached key, i.e. have n_k = positions so far.
  - cross-attention: the encoder output's keys and values are projected on the first call,
    stored, and reused afterwards (the encoder output is then not read).

Step-by-step decoding with a cache gives the outputs of the full causal computation
(tests/test_attention.py, tests/test_decoding.py). Without a cache (training, encoding) the layer computes K and V
directly and this class is not used. Linear attention keeps a recurrent state instead
(numpy_transformer/attention/variants.py).
"""
from autograd import concatenate


class KeyValueCache:
    """The keys and values one attention layer keeps in the caller's dict `store` between calls."""

    def __init__(self, store):
        self.store = store

    def append(self, K, V):
        """Self-attention: this call's keys and values (batch, heads, n_new, d_k) after the cached
        ones; returns all of them, (batch, heads, positions so far, d_k)."""
        if "k" in self.store:
            K = concatenate([self.store["k"], K], axis=-2)
            V = concatenate([self.store["v"], V], axis=-2)
        self.store["k"], self.store["v"] = K, V
        return K, V

    def reuse(self, keys_values):
        """Cross-attention: the keys and values of the encoder output, `keys_values()`, computed
        on the first call and read from the store afterwards."""
        if "k" not in self.store:
            self.store["k"], self.store["v"] = keys_values()
        return self.store["k"], self.store["v"]
