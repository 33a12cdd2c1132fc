"""The gradient formulas of the architecture notes (§Attention Weight Properties, "Gradient Flow";
§Training Dynamics, "Attention Optimization"), each as a function, beside autograd's gradient.

For one head, Q: (n, d_k), K: (m, d_k), V: (m, d_v), a loss L and G_O = ∂L/∂O: (n, d_v):

    S = Q Kᵀ / √d_k,   A = softmax(S) row by row,   O = A V.

The notes write

    ∂L/∂V = Aᵀ (∂L/∂O)                      ∂L/∂V_j = Σ_i A_ij ∂L/∂O_i          holds as written
    ∂L/∂Q = (∂L/∂A) K / √d_k                                                   holds with ∂L/∂S
    ∂L/∂K = (∂L/∂A)ᵀ Q / √d_k                                                  holds with ∂L/∂S
    ∂L/∂K_j ∝ Σ_i A_ij (1 − A_ij) Q_i                                          holds in a special case

The middle two skip the softmax: Q and K reach L through S, so the chain rule needs
∂L/∂S = A ⊙ (∂L/∂A − rowsum(∂L/∂A ⊙ A)) (the VJP of the softmax Jacobian diag(a) − a aᵀ of thesis
§1.2.3, row by row) in place of ∂L/∂A. A loss that depends on A only through its row sums
(L = Σ_ij A_ij = n) has ∂L/∂A = 1 and zero gradient everywhere, yet (∂L/∂A) K/√d_k ≠ 0.

The last keeps only the diagonal of the softmax Jacobian, ∂A_ij/∂S_ij = A_ij(1 − A_ij). Exactly,
∂L/∂K_j = Σ_i (∂L/∂S)_ij Q_i / √d_k, and (∂L/∂S)_ij = A_ij (G_ij − Σ_l A_il G_il) with G = ∂L/∂A
equals c A_ij (1 − A_ij) for every i when G_il = c δ_lj + b_i: the loss rewards attention to the
one key j with the same weight c in every row (plus anything that depends on the rows' sums
alone). Then ∂L/∂K_j = (c/√d_k) Σ_i A_ij (1 − A_ij) Q_i; for a general loss it is not even
parallel to that vector.
"""
import math

import numpy as np

from autograd import Tensor, plain
from numpy_transformer.attention import scaled_dot_product_attention


def value_gradient(A, grad_O):
    """∂L/∂V = Aᵀ ∂L/∂O, i.e. ∂L/∂V_j = Σ_i A_ij ∂L/∂O_i. A: (n, m), grad_O: (n, d_v) → (m, d_v)."""
    return A.T @ grad_O


def weights_gradient(grad_O, V):
    """∂L/∂A = ∂L/∂O Vᵀ, from O = A V. grad_O: (n, d_v), V: (m, d_v) → (n, m)."""
    return grad_O @ V.T


def score_gradient(A, grad_A):
    """∂L/∂S = A ⊙ (∂L/∂A − rowsum(∂L/∂A ⊙ A)): the softmax VJP, row by row. (n, m) → (n, m)."""
    return A * (grad_A - np.sum(grad_A * A, axis=-1, keepdims=True))


def query_gradient(G, K):
    """G K / √d_k: the notes' ∂L/∂Q with G = ∂L/∂A (wrong), the exact one with G = ∂L/∂S.
    G: (n, m), K: (m, d_k) → (n, d_k)."""
    return G @ K / math.sqrt(K.shape[-1])


def key_gradient(G, Q):
    """Gᵀ Q / √d_k: the notes' ∂L/∂K with G = ∂L/∂A (wrong), the exact one with G = ∂L/∂S, i.e.
    ∂L/∂K_j = Σ_i (∂L/∂S)_ij Q_i / √d_k. G: (n, m), Q: (n, d_k) → (m, d_k)."""
    return G.T @ Q / math.sqrt(Q.shape[-1])


def key_gradient_diagonal(A, Q):
    """Σ_i A_ij (1 − A_ij) Q_i / √d_k for every key j: the notes' ∂L/∂K_j ∝ …, the diagonal of the
    softmax Jacobian only. A: (n, m), Q: (n, d_k) → (m, d_k)."""
    return (A * (1 - A)).T @ Q / math.sqrt(Q.shape[-1])


def autograd_gradients(Q, K, V, grad_O, grad_A=None):
    """(A, ∂L/∂Q, ∂L/∂K, ∂L/∂V) from autograd for L = ⟨O, grad_O⟩ + ⟨A, grad_A⟩ (so ∂L/∂O = grad_O
    and the direct part of ∂L/∂A is grad_A), through the attention built from primitive ops
    (`autograd.plain()`: autograd derives the softmax's gradient, nothing hand-derived).
    Q: (n, d_k), K: (m, d_k), V: (m, d_v), grad_O: (n, d_v), grad_A: (n, m) or None."""
    q, k, v = (Tensor(x, requires_grad=True) for x in (Q, K, V))
    with plain():
        O, A = scaled_dot_product_attention(q, k, v)
        loss = (O * grad_O).sum()
        if grad_A is not None:
            loss = loss + (A * grad_A).sum()
    loss.backward()
    return A.data, q.grad, k.grad, v.grad
