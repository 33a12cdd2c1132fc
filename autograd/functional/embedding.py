"""Embedding lookup: the rows of a weight matrix picked by integer token ids (thesis §1.2: X · Wᴱ).

    E[t] = W[idsₜ]          W: (vocab, d),  ids: any shape of integers,  E: (*ids.shape, d)

Picking row i is multiplying W by the one-hot vector of i (the thesis's X · Wᴱ, Wᴱ ∈ ℝ^{l×d},
X the one-hot tokens); the lookup does the same without building X. Its VJP is the transposed
selection Xᵀ G: row i of ∂L/∂W is the sum of the output gradients of every position whose id is
i (a scatter-add; a repeated id adds all of its gradients, where an assignment `grad[ids] = g`
would keep the last).

`Embedding` below is that plain form, its VJP NumPy's scatter-add `np.add.at`. `F.embedding`
runs it inside `autograd.plain()`; otherwise it runs the engine room's `SparseGradEmbedding`
(autograd/engine_room/sparse_embedding_grad.py), which computes Xᵀ G as a sparse matrix product,
the same sums bit for bit (tests/test_embedding.py).

The thesis then multiplies X · Wᴱ by √d_model (√512, §1.2). That scaling belongs to the Embedding
module of numpy_transformer.nn, not to this function: here a lookup is only a lookup.
"""
import numpy as np

from autograd.checks import checked_token_ids
from autograd.plain_mode import is_plain
from autograd.engine import Function
from autograd.engine_room.sparse_embedding_grad import SparseGradEmbedding
from autograd.precision import compute_dtype, widen


class Embedding(Function):
    """out[t] = W[ids[t]]; ∂L/∂W[i] = Σ_{t : ids[t] = i} g[t]. weight: (vocab, d); ids: integers
    of any shape (a keyword, not differentiable) → (*ids.shape, d). A float16 g is summed in
    float32."""

    def forward(self, weight, ids):
        self.shape, self.ids = weight.shape, ids
        return weight[ids]

    def backward(self, g):
        grad = np.zeros(self.shape, dtype=compute_dtype(g.dtype))
        np.add.at(grad, self.ids, widen(g))                              # grad[ids[t]] += g[t], for every t
        return (grad.astype(g.dtype, copy=False),)


def embedding(weight, ids):
    """weight[ids]: (vocab, d) Tensor and an integer array or Tensor of any shape → (*ids.shape, d).

    Raises ValueError for ids that are not integers or not in [0, vocab). `Embedding` inside
    `autograd.plain()`, else the engine room's `SparseGradEmbedding`.
    """
    shape = np.shape(getattr(weight, "data", weight))
    if len(shape) != 2:
        raise ValueError(f"embedding: weight must have shape (vocab, d), got {shape}")
    ids = checked_token_ids("embedding: ids", np.array(getattr(ids, "data", ids)), shape[0])
    lookup = Embedding if is_plain() else SparseGradEmbedding
    return lookup.apply(weight, ids=ids)     # ids copied above: the caller may reuse its array before backward
