"""Elementwise primitives. NumPy broadcasting copies an input along some axes, so the VJP
sums the gradient back over those axes (`unbroadcast`).

| op        | forward   | VJP for a        | VJP for b              |
|-----------|-----------|------------------|------------------------|
| Add       | a + b     | g                | g                      |
| Sub       | a - b     | g                | -g                     |
| Mul       | a * b     | g b              | g a                    |
| Div       | a / b     | g / b            | -g a / b²              |
| Pow       | a ** b    | g b a^(b-1)      | g aᵇ log a             |
| Neg       | -a        | -g               |                        |
| Exp       | eᵃ        | g eᵃ             |                        |
| Log       | log a     | g / a            |                        |
| Sqrt      | √a        | g / (2√a)        |                        |
| Tanh      | tanh a    | g (1 - tanh² a)  |                        |
| Where     | c ? a : b | g where c        | g where not c          |
"""
import numpy as np

from autograd.engine import Function
from autograd.precision import total


def unbroadcast(grad, shape):
    """Sum `grad` down to `shape`: the VJP of NumPy broadcasting (leading axes that were added,
    and axes of length 1 that were stretched), accumulated in float32 for a float16 grad."""
    if grad.shape == shape:
        return grad
    grad = total(grad, axis=tuple(range(grad.ndim - len(shape))))
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    return total(grad, axis=stretched, keepdims=True) if stretched else grad


class Add(Function):
    def forward(self, a, b):
        self.shapes = a.shape, b.shape
        return a + b

    def backward(self, g):
        return unbroadcast(g, self.shapes[0]), unbroadcast(g, self.shapes[1])


class Sub(Function):
    def forward(self, a, b):
        self.shapes = a.shape, b.shape
        return a - b

    def backward(self, g):
        return unbroadcast(g, self.shapes[0]), unbroadcast(-g, self.shapes[1])


class Mul(Function):
    def forward(self, a, b):
        self.save_for_backward(a, b)
        return a * b

    def backward(self, g):
        a, b = self.saved
        grad_a = unbroadcast(g * b, a.shape) if self.needs_input_grad[0] else None
        grad_b = unbroadcast(g * a, b.shape) if self.needs_input_grad[1] else None
        return grad_a, grad_b


class Div(Function):
    def forward(self, a, b):
        self.save_for_backward(a, b)
        return a / b

    def backward(self, g):
        a, b = self.saved
        grad_a = unbroadcast(g / b, a.shape) if self.needs_input_grad[0] else None
        grad_b = unbroadcast(-(g / b) * (a / b), b.shape) if self.needs_input_grad[1] else None
        return grad_a, grad_b


class Pow(Function):
    def forward(self, a, b):
        out = a ** b
        self.save_for_backward(a, b, out)
        return out

    def backward(self, g):
        a, b, out = self.saved
        grad_a = unbroadcast(g * b * a ** (b - 1), a.shape) if self.needs_input_grad[0] else None
        grad_b = unbroadcast(g * out * np.log(a), b.shape) if self.needs_input_grad[1] else None
        return grad_a, grad_b


class Neg(Function):
    def forward(self, a):
        return -a

    def backward(self, g):
        return (-g,)


class Exp(Function):
    def forward(self, a):
        out = np.exp(a)
        self.save_for_backward(out)
        return out

    def backward(self, g):
        (out,) = self.saved
        return (g * out,)


class Log(Function):
    def forward(self, a):
        self.save_for_backward(a)
        return np.log(a)

    def backward(self, g):
        (a,) = self.saved
        return (g / a,)


class Sqrt(Function):
    def forward(self, a):
        out = np.sqrt(a)
        self.save_for_backward(out)
        return out

    def backward(self, g):
        (out,) = self.saved
        return (g / (2 * out),)


class Tanh(Function):
    def forward(self, a):
        out = np.tanh(a)
        self.save_for_backward(out)
        return out

    def backward(self, g):
        (out,) = self.saved
        return (g * (1 - out * out),)


class Where(Function):
    """`condition` is a boolean array (not differentiable), broadcast against a and b."""

    def forward(self, a, b, condition):
        self.shapes, self.condition = (a.shape, b.shape), condition
        return np.where(condition, a, b)

    def backward(self, g):
        zero = np.zeros((), dtype=g.dtype)
        return (unbroadcast(np.where(self.condition, g, zero), self.shapes[0]),
                unbroadcast(np.where(self.condition, zero, g), self.shapes[1]))
