"""The affine map of a linear layer, y = x W + b (the X · W of thesis §1.2.2): the plain form.

x: (..., d_in), W: (d_in, d_out), b: (d_out,) or None → y: (..., d_out). Every leading axis of
x is a batch axis; stacking the rows of x into a matrix X ∈ ℝ^{N × d_in} (N the product of the
leading axes), and the rows of G = ∂L/∂y the same way,

    Y = X W + 1 bᵀ,       ∂L/∂X = G Wᵀ,      ∂L/∂W = Xᵀ G,      ∂L/∂b = 1ᵀ G  (the column sums of G)

`linear_composite` computes Y with the engine's broadcasting `@` and `+` and lets autograd
derive those VJPs. `F.linear` runs it inside `autograd.plain()`; otherwise it runs the engine
room's `FusedLinear` (autograd/engine_room/fused_linear.py), which computes each of the three
products above as one product of 2-D arrays (tests/test_linear.py compares the two).
"""
from autograd.plain_mode import is_plain
from autograd.engine import as_tensor
from autograd.engine_room.fused_linear import FusedLinear


def linear_composite(x, weight, bias=None):
    """x W + b from the engine's broadcasting matrix product and sum: (..., d_in) → (..., d_out)."""
    y = as_tensor(x) @ weight
    return y if bias is None else y + bias


def linear(x, weight, bias=None):
    """x W + b over the last axis of x: (..., d_in) → (..., d_out); `bias` may be None.
    `linear_composite` inside `autograd.plain()`, else the engine room's `FusedLinear`."""
    if is_plain():
        return linear_composite(x, weight, bias)
    x = as_tensor(x)
    if bias is None:
        return FusedLinear.apply(x, weight)
    return FusedLinear.apply(x, weight, bias)
