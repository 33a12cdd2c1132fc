"""AND, OR and NOT computed by one attention head (architecture notes §Expressivity Analysis,
"Self-attention can implement Boolean circuits efficiently: AND, OR, NOT gates ↔ specific
attention patterns").

The construction. Each input token has three features e = [b, c, 1]: its bit b ∈ {0, 1}, a flag
c that marks the constant token, and a constant 1. One query token, e_query = [0, 0, 1], attends
over the input tokens (cross-attention: the query is not among the keys) with
`numpy_transformer.attention.scaled_dot_product_attention`:

    q = e_query W_q = √d_k w,   k_j = e_j W_k = e_j,   v_j = e_j W_v,
    score_j = q·k_j / √d_k = w·e_j  (an affine function of the token's bit and flag),
    output  = Σ_j softmax(score)_j v_j.

- OR(b_1 … b_n): tokens = the n bits, w = β [1, 0, 0], v_j = b_j. If some bit is 1 the weight
  goes to the ones (each scores β, each zero scores 0) and the output is k e^β/(k e^β + n − k) for
  k ones; if none is, the output is exactly 0.
- AND(b_1 … b_n): w = β [−1, 0, 0] (the zeros score β above the ones), v_j = b_j: if some bit is 0
  the weight goes to the zeros and the output is (n − z)/(z e^β + n − z) for z zeros; if none
  is, exactly 1.
- NOT(b): tokens = the bit and a constant token [0, 1, 1]; w = β [2, 1, −1] gives the bit token
  the score β(2b − 1) and the constant token 0; v_j = c_j (the constant token carries the 1).
  b = 1: the weight goes to the bit token (value 0); b = 0: to the constant token (value 1).

The output is within ε of the gate: ε = (n − 1)/(e^β + n − 1) for n-ary AND and OR (the worst
case: a single one among n for OR, a single zero for AND), ε = 1/(1 + e^β) for NOT
(`gate_error_bound`). Beyond attention the gate uses the token features above (given, not
learned) and a fixed readout: the Boolean value is the output rounded at 1/2, right when ε < 1/2.
Attention alone yields a real number ε-close to the bit; in a Transformer the feed-forward
layer after it could do the rounding.
"""
import math

import numpy as np

from autograd.checks import checked_integer, checked_number
from numpy_transformer.attention import scaled_dot_product_attention

GATES = ("and", "or", "not")
QUERY = np.array([0.0, 0.0, 1.0])
CONSTANT_TOKEN = np.array([0.0, 1.0, 1.0])

# The score weights w (per unit of β) on the features [b, c, 1], and the feature the value reads.
SCORE_WEIGHTS = {"and": [-1.0, 0.0, 0.0], "or": [1.0, 0.0, 0.0], "not": [2.0, 1.0, -1.0]}
VALUE_FEATURE = {"and": 0, "or": 0, "not": 1}


def gate_tokens(gate, bits):
    """The input tokens' features [b, c, 1]: one row per bit, and for NOT the constant token after
    it. Shape (n, 3) or (2, 3)."""
    bits = _checked_bits(gate, bits)
    tokens = np.stack([bits, np.zeros_like(bits), np.ones_like(bits)], axis=1)
    return np.vstack([tokens, CONSTANT_TOKEN]) if gate == "not" else tokens


def gate_projections(gate, beta):
    """(W_q, W_k, W_v) of shapes (3, 3), (3, 3), (3, 1): W_q's last row √3 β w (the query has only
    the constant feature), W_k = I, W_v the unit column of the feature the value reads."""
    beta = checked_number("beta", beta)
    W_q = np.zeros((3, 3))
    W_q[2] = math.sqrt(3) * beta * np.array(SCORE_WEIGHTS[_checked_gate(gate)])
    W_v = np.zeros((3, 1))
    W_v[VALUE_FEATURE[gate], 0] = 1.0
    return W_q, np.eye(3), W_v


def attention_gate(gate, bits, beta):
    """The attention output (a float in [0, 1]) of the query over the gate's tokens."""
    tokens = gate_tokens(gate, bits)
    W_q, W_k, W_v = gate_projections(gate, beta)
    output, _ = scaled_dot_product_attention(QUERY[None] @ W_q, tokens @ W_k, tokens @ W_v)
    return float(output.data[0, 0])


def gate_value(gate, bits):
    """The Boolean gate itself, 0 or 1."""
    bits = _checked_bits(gate, bits)
    return int({"and": bits.all(), "or": bits.any(), "not": not bits[0]}[gate])


def gate_error_bound(gate, n, beta):
    """ε: |attention_gate − gate_value| ≤ ε on every input; (n − 1)/(e^β + n − 1) for AND and OR
    of n bits, 1/(1 + e^β) for NOT."""
    beta = checked_number("beta", beta)
    if _checked_gate(gate) == "not":
        return 1 / (1 + math.exp(beta))
    n = checked_integer("n", n, low=1)
    return (n - 1) / (math.exp(beta) + n - 1)


def _checked_gate(gate):
    if gate not in GATES:
        raise ValueError(f"gate must be one of {GATES}, got {gate!r}")
    return gate


def _checked_bits(gate, bits):
    bits = np.asarray(bits)
    if bits.ndim != 1 or bits.size == 0 or not np.isin(bits, (0, 1)).all():
        raise ValueError(f"bits must be a non-empty 1-D sequence of 0s and 1s, got {bits!r}")
    if _checked_gate(gate) == "not" and bits.size != 1:
        raise ValueError(f"bits: NOT takes one bit, got {bits.size}")
    return bits.astype(np.float64)
