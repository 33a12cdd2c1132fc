"""Embedding lookup: the rows of a weight matrix picked by integer token ids (thesis §1.2: X · Wᴱ).

    E[t] = W[idsₜ]          W: (vocab, d),  ids: any shape of integers,  E: (*ids.shape, d)

Picking row i is multiplying W by the one-hot vector of i (the thesis's X · Wᴱ, Wᴱ ∈ ℝ^{l×d},
X the one-hot tokens); the lookup does the same without building X. Its VJP is the transposed
selection: row i of ∂L/∂W is the sum of the output gradients of every position whose id is i
(a scatter-add).

The thesis then multiplies X · Wᴱ by √d_model (√512, §1.2). That scaling belongs to the Embedding
module of numpy_transformer.nn, not to this function: here a lookup is only a lookup.
"""
import numpy as np
from scipy.sparse import csr_matrix

from autograd.checks import checked_token_ids
from autograd.engine import Function
from autograd.precision import compute_dtype, widen


def embedding(weight, ids):
    """weight[ids]: (vocab, d) Tensor and an integer array or Tensor of any shape → (*ids.shape, d).

    Raises ValueError for ids that are not integers or not in [0, vocab).
    """
    shape = np.shape(getattr(weight, "data", weight))
    if len(shape) != 2:
        raise ValueError(f"embedding: weight must have shape (vocab, d), got {shape}")
    ids = checked_token_ids("embedding: ids", np.array(getattr(ids, "data", ids)), shape[0])
    return Embedding.apply(weight, ids=ids)     # ids copied above: the caller may reuse its array before backward


class Embedding(Function):
    """Fused lookup. Forward: out[t] = W[ids[t]]. Backward: ∂L/∂W[i] = Σ_{t : ids[t] = i} g[t].

    The lookup is X W with X the one-hot matrix of the ids (a row per position t, its 1 in column
    ids[t]), so the VJP is Xᵀ G, G the output gradient's rows: row i of ∂L/∂W adds up the rows of
    G at the positions whose id is i (a repeated id adds all of its gradients, where an
    assignment `grad[ids] = g` would keep the last). X is built as the sparse matrix it is: SciPy
    adds each row of G to its row of the result in the order of t, the sums of NumPy's
    scatter-add `np.add.at` bit for bit, 5 to 18 times faster (docs/performance.md). ids is a
    keyword (integers, not differentiable).
    """

    def forward(self, weight, ids):
        self.shape, self.ids = weight.shape, ids
        return weight[ids]

    def backward(self, g):
        ids, dtype = self.ids.reshape(-1), compute_dtype(g.dtype)      # float32 sums for a float16 g
        one_hot = csr_matrix((np.ones(len(ids), dtype), ids, np.arange(len(ids) + 1)), shape=(len(ids), self.shape[0]))
        grad = one_hot.T @ widen(g).reshape(-1, self.shape[1])           # Xᵀ G: (vocab, d)
        return (np.asarray(grad).astype(g.dtype, copy=False),)
