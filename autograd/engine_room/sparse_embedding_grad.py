"""The embedding lookup with its VJP as a sparse matrix product: the optimised form of the plain
`Embedding` of autograd/functional/embedding.py, whose VJP is NumPy's scatter-add `np.add.at`.

The lookup is X W with X the one-hot matrix of the ids (a row per position t, its 1 in column
ids[t]), so the VJP is Xᵀ G, G the output gradient's rows. Here X is built as the sparse (CSR)
matrix it is and SciPy computes Xᵀ G: it adds each row of G to its row of the result in the
order of t, the sums of `np.add.at` bit for bit (docs/performance.md measures the difference in
time). A float16 G is summed in float32.

Tested against the plain form in tests/test_embedding.py (gradients bit for bit).
"""
import numpy as np
from scipy.sparse import csr_matrix

from autograd.engine import Function
from autograd.precision import compute_dtype, widen


class SparseGradEmbedding(Function):
    """out[t] = W[ids[t]]; ∂L/∂W = Xᵀ G with X the one-hot ids as a sparse matrix. weight:
    (vocab, d); ids: integers of any shape (a keyword, not differentiable) → (*ids.shape, d)."""

    def forward(self, weight, ids):
        self.shape, self.ids = weight.shape, ids
        return weight[ids]

    def backward(self, g):
        ids, dtype = self.ids.reshape(-1), compute_dtype(g.dtype)      # float32 sums for a float16 g
        one_hot = csr_matrix((np.ones(len(ids), dtype), ids, np.arange(len(ids) + 1)), shape=(len(ids), self.shape[0]))
        grad = one_hot.T @ widen(g).reshape(-1, self.shape[1])           # Xᵀ G: (vocab, d)
        return (np.asarray(grad).astype(g.dtype, copy=False),)
