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

from autograd.checks import checked_token_ids
from autograd.engine import Function
from autograd.precision import compute_dtype


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

    A repeated id must add up its gradients, so the VJP cannot assign `grad[ids] = g` (the last
    write would win); np.add.at, NumPy's unbuffered scatter-add, says "add each row of g to row
    ids[t]". ids is a keyword (integers, not differentiable).
    """

    def forward(self, weight, ids):
        self.shape, self.ids = weight.shape, ids
        return weight[ids]

    def backward(self, g):
        grad = np.zeros(self.shape, dtype=compute_dtype(g.dtype))     # float32 sums for a float16 g
        np.add.at(grad, self.ids.reshape(-1), g.reshape(-1, self.shape[1]))
        return (grad.astype(g.dtype, copy=False),)
