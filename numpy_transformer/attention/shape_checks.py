"""Argument checks shared by the attention variants of chapter 2: q, k, v of matching shapes,
a key-padding array that fits them, a positive integer size. Each failure is a ValueError (or
a TypeError for a wrong dtype) naming the function, the argument and what it got."""
import numpy as np

from autograd.engine import as_tensor
from numpy_transformer.attention.scaled_dot_product import _check_shapes
from numpy_transformer.masks import boolean_mask


def checked_qkv(name, q, k, v, same_length=False):
    """q, k, v as Tensors and the leading (batch, head) shape they broadcast to.

    q: (…, n_q, d_k), k: (…, n_k, d_k), v: (…, n_k, d_v). `same_length`: self-attention only,
    n_q = n_k (a pattern or a band over one sequence)."""
    q, k, v = as_tensor(q), as_tensor(k), as_tensor(v)
    try:
        scores_shape = _check_shapes(q.shape, k.shape, v.shape)
    except ValueError as error:
        raise ValueError(f"{name}: {error}") from None
    if same_length and q.shape[-2] != k.shape[-2]:
        raise ValueError(f"{name}: is self-attention over one sequence, so q and k need the same number "
                         f"of positions, got q {q.shape}, k {k.shape}")
    return q, k, v, scores_shape[:-2]


def checked_key_padding(name, key_padding, leading, n_keys):
    """`key_padding` (True at real keys) as a boolean array broadcastable to (…, n_keys), with
    `leading` the batch axes of the scores; None stays None (every key is real)."""
    if key_padding is None:
        return None
    key_padding = boolean_mask(key_padding, f"{name}: key_padding")
    try:
        fits = np.broadcast_shapes(key_padding.shape, (*leading, n_keys)) == (*leading, n_keys)
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"{name}: key_padding of shape {key_padding.shape} does not broadcast to "
                         f"(…, n_k) = {(*leading, n_keys)}")
    return key_padding

