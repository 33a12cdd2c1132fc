"""Optimizers: SGD with momentum, Adam, AdamW, the warm-up learning-rate schedule, gradient
clipping.

    from autograd.optim import Adam, warmup_schedule, clip_grad_norm
    optimizer = Adam(model.named_parameters(), lr=warmup_schedule(d_model=512, warmup_steps=4000),
                     betas=(0.9, 0.98), eps=1e-9)
    for batch in batches:
        optimizer.zero_grad()
        loss(batch).backward()
        clip_grad_norm(model.parameters(), max_norm=1.0)
        optimizer.step()

Each optimizer's `_update` is its plain form: the update rule written as the formulas of its
docstring. By default Adam and AdamW run the engine room's form instead
(`autograd.engine_room.fused_adam`: the same arithmetic in place, a block at a time), which gives
the same numbers bit for bit; inside `with autograd.plain():` every optimizer runs `_update`.
`step()` updates one parameter after another; the engine room's `share_updates(optimizer,
threads)` deals them between threads instead (the training loop's choice, the CLI's --threads).
`grad_norm` and `clip_grad_norm` likewise run the engine room's form outside `autograd.plain()`
(`autograd.engine_room.fused_clip`: a block at a time, on those threads), the same numbers.

Updates happen in place on `p.data` and keep its dtype: float32 parameters stay float32, and so
do their moments. (Hyper-parameters are kept as Python floats on purpose: under NumPy 2 a
`np.float64` scalar turns a float32 array into float64, a Python float does not.)
"""
import math
from collections.abc import Mapping

import numpy as np

from autograd.engine import Tensor
from autograd.engine_room.fused_adam import adam_update_in_blocks
from autograd.engine_room.fused_clip import grad_norm_in_blocks, scale_in_place
from autograd.plain_mode import is_plain


class Optimizer:
    """Holds the parameters, the step count t (1-based once `step()` has run) and, per
    parameter, a dict of state (moments, counters) that `state_dict()` flattens for checkpoints.

    `params`: Tensors, or (name, Tensor) pairs (names make checkpoint keys readable), or a dict
    name -> Tensor. `lr`: a positive float, or a schedule `t -> lr` called with the step count.
    Subclasses define `_initial_state(p)` and `_update(p, g, state, lr)`, the plain form, and may
    define `_fused_update` with the same arguments, the engine room's form.
    """

    def __init__(self, params, lr):
        self.named_params = _checked_parameters(params)
        if not callable(lr):
            lr = _positive("lr", lr)
        self.lr = lr
        self.step_count = 0
        self.state = {name: self._initial_state(p.data) for name, p in self.named_params}

    def _initial_state(self, p):
        return {}

    def _update(self, p, g, state, lr):
        raise NotImplementedError

    def _fused_update(self, p, g, state, lr):
        """The engine room's form of `_update`; an optimizer without one runs its plain form."""
        self._update(p, g, state, lr)

    def _lr_at(self, step):
        return float(self.lr(step)) if callable(self.lr) else self.lr

    @property
    def current_lr(self):
        """The learning rate of the latest step (before the first step: the one it will use)."""
        return self._lr_at(max(self.step_count, 1))

    def zero_grad(self):
        for _, p in self.named_params:
            p.grad = None

    def step(self):
        """t += 1, then update every parameter that has a gradient (the others keep their
        values and their state), one after another."""
        updates, lr = self.start_step()
        for p, g, state in updates:
            self.update(p, g, state, lr)

    def update(self, p, g, state, lr):
        """One parameter's update in place: the plain form `_update` inside `autograd.plain()`,
        the engine room's `_fused_update` otherwise (the same numbers)."""
        (self._update if is_plain() else self._fused_update)(p, g, state, lr)

    def start_step(self):
        """t += 1; returns the step's updates, (p, g, state) for every parameter that has a
        gradient, and its learning rate."""
        updates = []
        for name, p in self.named_params:
            if p.grad is None:
                continue
            if p.grad.shape != p.shape:
                raise ValueError(f"parameter {name!r} has shape {p.shape} but its grad has shape {p.grad.shape}")
            updates.append((p.data, p.grad, self.state[name]))
        self.step_count += 1
        return updates, self._lr_at(self.step_count)

    def state_dict(self):
        """A flat dict of copies: {"step": t, "<name>.<key>": array or number}; it can be saved
        with `np.savez(path, **optimizer.state_dict())`."""
        flat = {"step": self.step_count}
        for name, state in self.state.items():
            for key, value in state.items():
                flat[f"{name}.{key}"] = value.copy() if isinstance(value, np.ndarray) else value
        return flat

    def load_state_dict(self, state):
        """Restore a `state_dict()` (numbers may come back as 0-d arrays, as from `np.load`)."""
        expected = self.state_dict()
        problems = []
        missing, unexpected = expected.keys() - state.keys(), state.keys() - expected.keys()
        if missing or unexpected:
            problems.append(f"the state has {len(state)} entries, this optimizer expects {len(expected)} "
                            f"(missing: {sorted(missing)}, unexpected: {sorted(unexpected)})")
        problems += [f"{key!r} has shape {np.shape(state[key])}, expected {np.shape(value)}"
                     for key, value in expected.items()
                     if key in state and np.shape(state[key]) != np.shape(value)]
        if problems:
            raise ValueError(f"{type(self).__name__}.load_state_dict: " + "; ".join(problems))
        self.step_count = int(state["step"])
        for name, param_state in self.state.items():
            for key, value in param_state.items():
                saved = state[f"{name}.{key}"]
                if isinstance(value, np.ndarray):
                    np.copyto(value, saved)
                else:
                    param_state[key] = int(saved)


class SGD(Optimizer):
    """Stochastic gradient descent with momentum μ and L2 weight decay λ (PyTorch's semantics):

        g ← g + λ p,    v ← μ v + g,    p ← p − lr v        (v = g when μ = 0)
    """

    def __init__(self, params, lr, momentum=0.0, weight_decay=0.0):
        self.momentum = _non_negative("momentum", momentum)
        self.weight_decay = _non_negative("weight_decay", weight_decay)
        super().__init__(params, lr)

    def _initial_state(self, p):
        return {"velocity": np.zeros_like(p)} if self.momentum else {}

    def _update(self, p, g, state, lr):
        if self.weight_decay:
            g = g + self.weight_decay * p
        if self.momentum:
            velocity = state["velocity"]
            velocity[...] = self.momentum * velocity + g
            g = velocity
        p -= lr * g


class Adam(Optimizer):
    """Adam (Kingma & Ba, 2015) with L2 weight decay λ added to the gradient, as PyTorch's Adam.
    At the parameter's t-th update:

        g ← g + λ p
        m ← β1 m + (1 − β1) g              first moment, a running mean of g
        v ← β2 v + (1 − β2) g²             second moment, a running mean of g²
        m̂ = m / (1 − β1ᵗ),  v̂ = v / (1 − β2ᵗ)    bias correction: m and v start at 0
        p ← p − lr m̂ / (√v̂ + ε)

    t is the optimizer's step count when the parameter had a gradient at every step; one that
    had none at some steps counts only the steps that updated it (as PyTorch does), so its first
    update is, like everyone's, p ← p − lr g / (|g| + ε): about lr in size.

    The defaults are PyTorch's; "Attention Is All You Need" (Vaswani et al., 2017, §5.3) trains
    with betas=(0.9, 0.98), eps=1e-9 and the warm-up schedule below.
    """
    decoupled = False          # True in AdamW: the decay is applied to p, not added to g

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        if len(betas) != 2:
            raise ValueError(f"betas must be a pair (beta1, beta2), got {betas!r}")
        self.beta1, self.beta2 = _probability("betas[0]", betas[0]), _probability("betas[1]", betas[1])
        self.eps = _non_negative("eps", eps)
        self.weight_decay = _non_negative("weight_decay", weight_decay)
        super().__init__(params, lr)

    def _initial_state(self, p):
        return {"step": 0, "exp_avg": np.zeros_like(p), "exp_avg_sq": np.zeros_like(p)}

    def _update(self, p, g, state, lr):
        if self.weight_decay:
            g = g + self.weight_decay * p
        self._adam_step(p, g, state, lr)

    def _adam_step(self, p, g, state, lr):
        """The moments and the step of the docstring, in place on p, m and v. lr m̂ / (√v̂ + ε) is
        computed as (lr / (1 − β1ᵗ)) · m / (√v / √(1 − β2ᵗ) + ε), PyTorch's order of operations."""
        state["step"] += 1
        t, m, v = state["step"], state["exp_avg"], state["exp_avg_sq"]
        m[...] = self.beta1 * m + (1 - self.beta1) * g
        v[...] = self.beta2 * v + (1 - self.beta2) * g ** 2
        lr_m_hat = lr / (1 - self.beta1 ** t)                           # lr m̂ = lr_m_hat · m
        root_v_hat = np.sqrt(v) / math.sqrt(1 - self.beta2 ** t)        # √v̂
        p -= m / (root_v_hat + self.eps) * lr_m_hat

    def _fused_update(self, p, g, state, lr):
        adam_update_in_blocks(p, g, state, lr, self.beta1, self.beta2, self.eps, self.weight_decay,
                              self.decoupled)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter, 2019), as PyTorch's AdamW: the decay
    shrinks the parameter directly and never enters the moments. At the parameter's t-th update:

        p ← p − lr λ p                     decoupled weight decay
        m, v, m̂, v̂ as Adam's, from g alone
        p ← p − lr m̂ / (√v̂ + ε)

    With Adam's L2 decay, λ p passes through m̂ / √v̂ and is rescaled per entry; here every
    entry shrinks by the same factor 1 − lr λ. The defaults are PyTorch's (λ = 0.01).
    """
    decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(params, lr, betas, eps, weight_decay)

    def _update(self, p, g, state, lr):
        p *= 1 - lr * self.weight_decay
        self._adam_step(p, g, state, lr)


def warmup_schedule(d_model, warmup_steps, factor=1.0):
    """The warm-up ("Noam") schedule of the architecture notes and of "Attention Is All You Need":

        lr(t) = factor · d_model^-0.5 · min(t^-0.5, t · warmup_steps^-1.5),   t = 1, 2, ...

    It rises linearly for `warmup_steps` steps, peaks at t = warmup_steps with
    factor · (d_model · warmup_steps)^-0.5, then decays as t^-0.5. Pass it as `lr=`.
    """
    d_model, warmup_steps = _positive("d_model", d_model), _positive("warmup_steps", warmup_steps)
    factor = _positive("factor", factor)

    def lr_at(step):
        if step < 1:
            raise ValueError(f"warmup_schedule: step must be >= 1 (steps count from 1), got {step}")
        step = float(step)
        return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)

    return lr_at


def grad_norm(params):
    """The global ℓ2 norm of the gradients, ‖(g_1, ..., g_n)‖ = √(Σ_i ‖g_i‖²), as a float
    (summed in float64); None grads are ignored."""
    grads = [p.grad for _, p in _named(params) if p.grad is not None]
    if not is_plain():
        return grad_norm_in_blocks(grads)               # the engine room's: the same float, bit for bit
    return math.sqrt(sum(float(np.sum(np.square(g, dtype=np.float64))) for g in grads))


def clip_grad_norm(params, max_norm):
    """Scale all gradients in place by one factor so that their global norm (`grad_norm`) is
    at most `max_norm`; None grads are ignored. max_norm None: no clipping.

    Returns the norm before clipping as a float. The gradients keep their dtype. A non-finite
    norm is returned as is and the gradients are left alone, so the caller can see it and skip
    the step.
    """
    norm = grad_norm(params)
    if max_norm is None:
        return norm
    max_norm = _positive("max_norm", max_norm)
    grads = [p.grad for _, p in _named(params) if p.grad is not None]
    if math.isfinite(norm) and norm > max_norm:
        scale = max_norm / norm
        if not is_plain():
            scale_in_place(grads, scale)                # the engine room's: the same, on threads
            return norm
        for g in grads:
            g *= scale
    return norm


def _named(params):
    """(name, Tensor) pairs from Tensors (named by position), pairs, or a dict."""
    if isinstance(params, Mapping):
        params = params.items()
    named = []
    for i, item in enumerate(params):
        if isinstance(item, Tensor):
            item = (str(i), item)
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], Tensor)):
            raise TypeError(f"params[{i}]: expected a Tensor or a (name, Tensor) pair, "
                            f"got {type(item).__name__}")
        named.append((str(item[0]), item[1]))
    return named


def _checked_parameters(params):
    named = _named(params)
    if not named:
        raise ValueError("params is empty: the optimizer has nothing to optimize")
    frozen = [name for name, p in named if not p.requires_grad]
    if frozen:
        raise ValueError(f"params {frozen} do not require grad; pass only trainable parameters")
    names, ids = [name for name, _ in named], [id(p) for _, p in named]
    if len(set(names)) != len(names) or len(set(ids)) != len(ids):
        raise ValueError(f"params has duplicate names or a tensor listed twice: {names}")
    return named


def _positive(name, value):
    if not value > 0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    return float(value)


def _non_negative(name, value):
    if not value >= 0:
        raise ValueError(f"{name} must be >= 0, got {value!r}")
    return float(value)


def _probability(name, value):
    if not 0 <= value < 1:
        raise ValueError(f"{name} must be in [0, 1), got {value!r}")
    return float(value)
