"""Gradient checking: compare the engine's gradients with central finite differences,

    ∂f/∂x_j ≈ (f(x + h e_j) − f(x − h e_j)) / 2h,      error O(h²),

in float64 (in float32 the rounding error of f, about 1e-7 |f| / h, swamps the difference).

Small problems compare whole Jacobians: the numerical one column by column (two evaluations of
f per input entry), the analytic one row by row (one backward pass per output entry). Large ones
compare random projections: for random u (output-shaped) and v (input-shaped), the analytic
⟨∇ₓ⟨u, f⟩, v⟩ against the numerical (⟨u, f(x + h v)⟩ − ⟨u, f(x − h v)⟩) / 2h.

An entry passes when |analytic − numerical| ≤ atol + rtol · |numerical|. A check that cannot
fail is refused: a NaN or infinite entry on either side fails (NaN compares false with
everything, so it would otherwise pass unseen), inputs must be finite, h > 0, and the
tolerances lie in [0, 1) (with rtol ≥ 1 a zero gradient would pass against any numerical one).
"""
import numpy as np

from autograd.checks import checked_integer, checked_number
from autograd.engine import Tensor, no_grad


class GradcheckError(AssertionError):
    """The analytic and numerical gradients disagree; the message names the input and entry."""


def gradcheck(fn, *inputs, eps=1e-6, atol=1e-5, rtol=1e-4, mode="auto", num_projections=3,
              rng=None, max_jacobian_entries=200_000):
    """Check the gradient of `fn(*inputs)` with respect to every input Tensor that requires grad.

    `fn` must be deterministic (seed any dropout inside it). `mode` is "jacobian",
    "projection", or "auto" (the Jacobian when output size × input size is at most
    `max_jacobian_entries`). Returns True or raises GradcheckError reporting the worst entry.
    """
    checked = _checked_inputs(inputs)
    eps = checked_number("gradcheck: eps (the step h)", eps, low=0, low_open=True)
    atol, rtol = (checked_number(f"gradcheck: {name}", value, 0, 1, high_open=True)
                  for name, value in (("atol", atol), ("rtol", rtol)))
    num_projections = checked_integer("gradcheck: num_projections", num_projections, low=1)   # 0 would check nothing
    out = fn(*inputs)
    if not isinstance(out, Tensor):
        raise TypeError(f"gradcheck: fn must return a Tensor, got {type(out).__name__}")
    if mode == "auto":
        total = out.size * sum(inputs[i].size for i in checked)
        mode = "jacobian" if total <= max_jacobian_entries else "projection"
    saved_grads = [inputs[i].grad for i in checked]
    try:
        if mode == "jacobian":
            _check_jacobians(fn, inputs, checked, eps, atol, rtol)
        elif mode == "projection":
            rng = rng if rng is not None else np.random.default_rng(0)
            for _ in range(num_projections):
                _check_projection(fn, inputs, checked, eps, atol, rtol, rng)
        else:
            raise ValueError(f"gradcheck: mode must be 'auto', 'jacobian' or 'projection', got {mode!r}")
    finally:
        for i, grad in zip(checked, saved_grads):
            inputs[i].grad = grad
    return True


def _checked_inputs(inputs):
    checked = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    if not checked:
        raise ValueError("gradcheck: no input Tensor has requires_grad=True")
    for i in checked:
        if inputs[i].dtype != np.float64:
            raise TypeError(f"gradcheck: input {i} is {inputs[i].dtype}; finite differences need float64 "
                            f"(pass Tensor(x.astype(np.float64), requires_grad=True))")
        bad = np.argwhere(~np.isfinite(inputs[i].data))
        if len(bad):
            raise ValueError(f"gradcheck: input {i} has the non-finite value {inputs[i].data[tuple(bad[0])]} at entry "
                             f"{tuple(int(k) for k in bad[0])}; no gradient can be checked there")
    return checked


def numerical_jacobian(fn, inputs, index, eps=1e-6):
    """J[o, j] = ∂ fn(*inputs)[o] / ∂ inputs[index][j] by central differences, shape (out.size, x.size)."""
    x = inputs[index]
    columns = []
    for j in range(x.size):
        columns.append(_central_difference(fn, inputs, x, _unit(x.shape, j), eps))
    return np.stack(columns, axis=1)


def analytic_jacobian(fn, inputs, index):
    """J[o, j] from the engine: one backward pass per output entry, shape (out.size, x.size)."""
    x = inputs[index]
    out = fn(*inputs)
    rows = []
    for o in range(out.size):
        x.grad = None
        if out.requires_grad:
            out.backward(_unit(out.shape, o), retain_graph=True)
        rows.append(np.zeros(x.size) if x.grad is None else x.grad.reshape(-1).copy())
    return np.stack(rows, axis=0)


def _check_jacobians(fn, inputs, checked, eps, atol, rtol):
    for i in checked:
        analytic = analytic_jacobian(fn, inputs, i)
        numerical = numerical_jacobian(fn, inputs, i, eps)
        finite = np.isfinite(analytic) & np.isfinite(numerical)
        excess = np.full(analytic.shape, np.inf)                      # a non-finite entry fails
        excess[finite] = np.abs(analytic - numerical)[finite] - (atol + rtol * np.abs(numerical[finite]))
        worst = np.unravel_index(np.argmax(excess), excess.shape)
        if excess[worst] > 0:
            out_entry = tuple(int(k) for k in np.unravel_index(worst[0], fn(*inputs).shape))
            in_entry = tuple(int(k) for k in np.unravel_index(worst[1], inputs[i].shape))
            raise GradcheckError(_report(f"input {i} {inputs[i].shape} at entry {in_entry}, "
                                         f"output entry {out_entry}", analytic[worst], numerical[worst],
                                         atol, rtol))


def _check_projection(fn, inputs, checked, eps, atol, rtol, rng):
    out = fn(*inputs)
    u = rng.standard_normal(out.shape)
    for i in checked:
        inputs[i].grad = None
    if out.requires_grad:
        out.backward(u)
    for i in checked:
        x = inputs[i]
        v = rng.standard_normal(x.shape)
        analytic = 0.0 if x.grad is None else float(np.sum(x.grad * v))
        numerical = float(np.sum(u * _central_difference(fn, inputs, x, v, eps).reshape(out.shape)))
        if not abs(analytic - numerical) <= atol + rtol * abs(numerical):    # a NaN fails too
            raise GradcheckError(_report(f"input {i} {x.shape} along a random direction",
                                         analytic, numerical, atol, rtol))


def _central_difference(fn, inputs, x, direction, eps):
    """(fn(x + eps·direction) − fn(x − eps·direction)) / 2 eps, flattened; x restored after."""
    original = x.data.copy()
    with no_grad():
        x.data = original + eps * direction
        plus = fn(*inputs).data.reshape(-1)
        x.data = original - eps * direction
        minus = fn(*inputs).data.reshape(-1)
    x.data = original
    return (plus - minus) / (2 * eps)


def _unit(shape, flat_index):
    e = np.zeros(int(np.prod(shape)))
    e[flat_index] = 1.0
    return e.reshape(shape)


def _report(where, analytic, numerical, atol, rtol):
    analytic, numerical = float(analytic), float(numerical)
    error = abs(analytic - numerical)
    relative = error / max(abs(numerical), 1e-300)
    return (f"gradient check failed for {where}: analytic {analytic:.6g}, numerical {numerical:.6g}, "
            f"|error| {error:.3g}, relative {relative:.3g} (atol {atol:g}, rtol {rtol:g})")
