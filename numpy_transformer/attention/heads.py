"""The heads of multi-head attention: the column split of eq. (3) and the concatenation of eq. (7).

    W_{h,q} = W_q[:, (h−1)k : h k]  (same for W_k, W_v)                              (3)
    MultiHead = Concat(head_1, …, head_H) W_c                                         (7)

with k = d_k = d / H. Eq. (3) takes head h's projection from columns (h−1)k … hk of W_q, so
Q^(h) is columns (h−1)k … hk of the full Q = X W_q: reshaping the last axis of Q from d into
(H, k) puts head h at index h − 1 of the new axis. `split_heads` does that reshape (and moves
the head axis in front of the positions); `merge_heads` undoes it, which is the concatenation
of eq. (7). All heads are then one batched product: no Python loop over heads.
"""


def split_heads(x, n_heads):
    """(..., n, d) → (..., H, n, d/H): head h holds columns h·d_k … (h+1)·d_k of x (eq. (3))."""
    *leading, n, d = x.shape
    if d % n_heads:
        raise ValueError(f"split_heads: the last dimension of x {tuple(x.shape)} is not divisible "
                         f"by n_heads={n_heads}")
    if n == 1:                      # one position (a decoding step): moving an axis of length 1 is a reshape
        return x.reshape(*leading, n_heads, 1, d // n_heads)
    return x.reshape(*leading, n, n_heads, d // n_heads).swapaxes(-3, -2)


def merge_heads(x):
    """(..., H, n, d_k) → (..., n, H·d_k): Concat(head_1, …, head_H) of eq. (7)."""
    *leading, n_heads, n, d_k = x.shape
    if n == 1:
        return x.reshape(*leading, 1, n_heads * d_k)
    return x.swapaxes(-3, -2).reshape(*leading, n, n_heads * d_k)
