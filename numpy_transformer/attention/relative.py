"""T5's relative position bias (architecture notes, §Transformer Variants; Raffel et al. 2020):

    S̃_ij = (Q_i K_jᵀ + R_{i−j}) / √d_k,       R_{i−j} = b[h, bucket(j − i)]

one learned scalar b per (head, bucket) added to the scores, instead of positions added to the
embeddings. The buckets are T5's: the first half of them hold one distance each (0, 1, …), the
rest distances growing logarithmically up to `max_distance`, beyond which all distances share
the last bucket. Bidirectional attention (an encoder) splits the buckets between keys before
and after the query; causal attention sees keys before the query only, and uses all buckets
for them. As in T5, one bias serves every layer of a stack.

The bias depends on the absolute positions of query and key only through j − i, so with a
key/value cache the new queries at positions start … start + n − 1 get the rows of the full
matrix for those positions (`RelativePositionBias.forward(n_q, n_k, start)`).
"""
import math

import numpy as np

import autograd.functional as F
from autograd.checks import checked_integer
from numpy_transformer.nn import Module, parameter


def relative_position_bucket(relative_position, bidirectional=True, n_buckets=32, max_distance=128):
    """T5's bucket of each relative position j − i (an integer array; the same shape back).

    bidirectional: half the buckets for j − i ≤ 0, half for j − i > 0; otherwise keys after
    the query (j − i > 0) all fall in bucket 0, as causal attention never sees them. Within a
    side of m buckets, distances below m/2 are exact and the larger ones share log-spaced
    buckets up to `max_distance`."""
    relative_position = np.asarray(relative_position)
    buckets = np.zeros(relative_position.shape, dtype=np.int64)
    if bidirectional:
        n_buckets //= 2
        buckets += (relative_position > 0) * n_buckets
        distance = np.abs(relative_position)
    else:
        distance = -np.minimum(relative_position, 0)
    exact = n_buckets // 2
    logarithmic = exact + (np.log(np.maximum(distance, exact) / exact) / math.log(max_distance / exact)
                           * (n_buckets - exact)).astype(np.int64)
    return buckets + np.where(distance < exact, distance, np.minimum(logarithmic, n_buckets - 1))


class RelativePositionBias(Module):
    """The bias R of every head, from a (n_buckets, n_heads) table of learned scalars drawn from
    N(0, 1/d_model) as T5's. `bidirectional`: an encoder's self-attention; False: causal."""

    def __init__(self, n_heads, d_model, rng, bidirectional, n_buckets=32, max_distance=128, dtype=np.float32):
        super().__init__()
        self.n_buckets = checked_integer("relative position n_buckets", n_buckets, low=2)
        self.max_distance = checked_integer("relative position max_distance", max_distance, low=n_buckets // 2 + 1)
        self.bidirectional = bidirectional
        self.weight = parameter(rng.standard_normal((n_buckets, n_heads)) / math.sqrt(d_model), dtype)

    def forward(self, n_q, n_k, start=0):
        """(1, heads, n_q, n_k): R for queries at positions start … start + n_q − 1 and keys at
        0 … n_k − 1."""
        relative = np.arange(n_k)[None, :] - np.arange(start, start + n_q)[:, None]      # j − i, (n_q, n_k)
        buckets = relative_position_bucket(relative, self.bidirectional, self.n_buckets, self.max_distance)
        return F.embedding(self.weight, buckets).transpose(2, 0, 1)[None]                 # (1, heads, n_q, n_k)
