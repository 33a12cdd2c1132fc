"""The key/value cache of incremental decoding, shared by full attention and the variants that
keep every key (block-wise, sparse, window)."""
from autograd import concatenate


def append_to_cache(cache, K, V):
    """Append this call's keys and values (batch, heads, n_new, d_k) to cache["k"], cache["v"]
    (created on the first call) and return all of them, (batch, heads, positions so far, d_k)."""
    if "k" in cache:
        K = concatenate([cache["k"], K], axis=-2)
        V = concatenate([cache["v"], V], axis=-2)
    cache["k"], cache["v"] = K, V
    return K, V
