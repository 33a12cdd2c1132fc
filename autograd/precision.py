"""Half precision: what the engine stores in float16 and what it computes in float32.

The architecture notes (§Memory and Efficiency) give the rule of mixed precision: "Q, K, V:
FP16; attention weights: FP32 (for numerical stability); output: FP16". float16 has a 10-bit
mantissa (3 decimal digits) and a largest value of 65,504, so three kinds of computation go
wrong in it, and every op of the engine that does one of them on float16 arrays does it in
float32 and rounds the result back:

| computation                          | what float16 does                     | the ops               |
|--------------------------------------|---------------------------------------|-----------------------|
| long sums (matrix products, the      | a running sum stops growing: 2048 + 1 | MatMul, FusedLinear,  |
| gradient of a broadcast, a bias, an  | rounds to 2048                        | Sum, unbroadcast,     |
| embedding row)                       |                                       | the embeddings' VJPs, |
|                                      |                                       | GetItem               |
| exponentials and squares (softmax,   | exp(12) and 300² overflow to inf      | FusedSoftmax,         |
| the layer-norm variance)             |                                       | FusedLogSoftmax,      |
|                                      |                                       | FusedLayerNorm,       |
|                                      |                                       | the attention weights |
| the loss                             | its gradient, times the loss scale,   | the cross-entropies   |
|                                      | is a sum over the vocabulary          |                       |

The fused ops are the engine room's, which the model runs by default. Inside `autograd.plain()`
the composite softmax and layer norm follow the rules of the primitives they are built from
(their sums in float32, their exponentials and squares in float16): the plain forms are for
reading and checking in float32 and float64, not for training in float16.

Elementwise ops (add, multiply, ReLU, dropout) stay in float16: each result is one rounding
of an exact value. The efficient attentions (block-wise, sparse, window, linear), loops of sums
and exponentials from end to end, run wholly in float32 (`in_float32`) and keep float32 arrays. The arrays the graph keeps for backward are float16, so the activations
take half the memory of float32; only per-row statistics (a layer norm's σ) and the loss's
probabilities are float32.

A product in float32 is also the fast way: NumPy has no float16 BLAS, and its own float16
matmul runs a plain loop instead of the blocked, vectorised BLAS kernels. Multiplying the
float16 operands in float32 (exactly: the product of two float16 numbers fits in float32) and
summing in float32 is what half-precision matrix units (tensor cores) do.
"""
import functools

import numpy as np

HALF = np.dtype(np.float16)


def compute_dtype(dtype):
    """The dtype a computation on `dtype` arrays runs in: float32 for float16, else `dtype`."""
    dtype = np.dtype(dtype)
    return np.dtype(np.float32) if dtype == HALF else dtype


def widen(array):
    """`array` in its compute dtype: a float32 copy of a float16 array, any other array itself."""
    return array.astype(np.float32) if array.dtype == HALF else array


def matmul(a, b):
    """a @ b, with float16 operands multiplied and summed in float32 and the result rounded to
    float16 (see the module docstring). Other dtypes: NumPy's matmul as it is."""
    if a.dtype == HALF:
        return np.matmul(widen(a), widen(b)).astype(HALF)
    return a @ b


def total(array, axis=None, keepdims=False):
    """np.sum(array, axis) in the array's dtype, accumulated in its compute dtype."""
    return np.sum(array, axis=axis, dtype=compute_dtype(array.dtype), keepdims=keepdims).astype(array.dtype,
                                                                                                copy=False)


def in_float32(method):
    """Decorates a Function's `forward` or `backward`: with a float16 array among its arguments it
    runs on float32 copies of them, and its float32 results are rounded to float16."""
    @functools.wraps(method)
    def wrapped(self, *arrays, **params):
        if not any(isinstance(a, np.ndarray) and a.dtype == HALF for a in arrays):
            return method(self, *arrays, **params)
        result = method(self, *[widen(a) if isinstance(a, np.ndarray) else a for a in arrays], **params)
        return tuple(map(_narrowed, result)) if isinstance(result, tuple) else _narrowed(result)
    return wrapped


def _narrowed(array):
    return array.astype(HALF) if isinstance(array, np.ndarray) and array.dtype == np.float32 else array
