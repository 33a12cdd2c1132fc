"""Layers with parameters: `Module` and the pieces of the Transformer block (thesis §1.2).

A `Module` holds its parameters as attributes (Tensors with requires_grad=True) and its
submodules as attributes (Modules, or Python lists of Modules). Everything else follows from
that: dotted parameter names in definition order (`layers.0.self_attn.W_q.weight`), state
dicts, train/eval switches, dtype conversion.

| module        | computes                                         | thesis                 |
|---------------|--------------------------------------------------|------------------------|
| `Linear`      | x W + b,  W ∈ ℝ^{d_in × d_out}                   | the X · W of §1.2.2    |
| `Embedding`   | √d · Wᴱ[ids]                                     | X · Wᴱ · √512, §1.2    |
| `LayerNorm`   | γ (z − μ)/(σ + ε) + β                            | eq. (2)                |
| `Dropout`     | x ⊙ m / (1 − p) in training, x in evaluation     | §1.2.1 ("0.1")         |
| `FeedForward` | max(0, x W₁ + b₁) W₂ + b₂ (or GELU, SwiGLU)      | §1.2.4                 |
"""
import math

import numpy as np

import autograd.functional as F
from autograd import Tensor
from autograd.functional.layer_norm import VARIANTS as LAYER_NORM_VARIANTS


class Module:
    """Base class of every layer. Subclasses call `super().__init__()` and define `forward`.

    Attributes that count:
      - a Tensor with requires_grad=True is a parameter;
      - a Tensor without it is a buffer: a constant the layer uses (the sinusoidal table),
        converted by `astype` but neither trained nor saved;
      - a Module, or a list of Modules, is a submodule (list entries are named by their index).
    """

    def __init__(self):
        self.training = True

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must define forward()")

    def _members(self):
        """(name, Tensor or Module) for the attributes that count, in definition order."""
        for name, value in vars(self).items():
            if isinstance(value, (Tensor, Module)):
                yield name, value
            elif isinstance(value, list) and value and all(isinstance(m, Module) for m in value):
                yield from ((f"{name}.{i}", m) for i, m in enumerate(value))

    def named_modules(self, prefix=""):
        """(dotted name, module) for this module ("" or `prefix`) and every submodule, depth first."""
        yield prefix, self
        for name, member in self._members():
            if isinstance(member, Module):
                yield from member.named_modules(_join(prefix, name))

    def generators(self):
        """The distinct numpy Generators this module and its submodules draw from (dropout), in
        module order: what a checkpoint must save to continue exactly, and what gradient
        checkpointing must rewind to recompute the same masks."""
        found = {}
        for _, module in self.named_modules():
            for value in vars(module).values():
                if isinstance(value, np.random.Generator):
                    found.setdefault(id(value), value)
        return list(found.values())

    def _named_tensors(self, prefix=""):
        """(dotted name, Tensor) for every parameter and buffer, in definition order."""
        for name, member in self._members():
            if isinstance(member, Module):
                yield from member._named_tensors(_join(prefix, name))
            else:
                yield _join(prefix, name), member

    def named_parameters(self):
        """(dotted name, Tensor) for every parameter, in definition order. A Tensor shared by
        two modules (tied weights) is listed once, under its first name."""
        seen = set()
        for name, tensor in self._named_tensors():
            if tensor.requires_grad and id(tensor) not in seen:
                seen.add(id(tensor))
                yield name, tensor

    def parameters(self):
        return [p for _, p in self.named_parameters()]

    def state_dict(self):
        """{dotted name: a copy of the parameter's array}: a checkpoint."""
        return {name: p.data.copy() for name, p in self.named_parameters()}

    def load_state_dict(self, state):
        """Copy the arrays of `state` into the parameters, cast to each parameter's dtype.

        Names and shapes must match exactly; otherwise one ValueError lists every missing,
        unexpected and mismatched name, and no parameter is changed.
        """
        parameters = dict(self.named_parameters())
        arrays = {name: np.asarray(getattr(value, "data", value)) for name, value in state.items()}
        problems = _state_problems(parameters, arrays)
        if problems:
            raise ValueError(f"load_state_dict: the state does not fit {type(self).__name__}:\n  "
                             + "\n  ".join(problems))
        for name, p in parameters.items():
            p.data = arrays[name].astype(p.dtype)

    def train(self, mode=True):
        """Set `training` on this module and every submodule (dropout is active in training)."""
        for _, module in self.named_modules():
            module.training = mode
        return self

    def eval(self):
        return self.train(False)

    def zero_grad(self):
        for p in self.parameters():
            p.grad = None

    def astype(self, dtype):
        """Convert every parameter and buffer to `dtype` in place (float64 for gradient checks).
        The Tensors stay the same objects, so an optimizer holding them still works."""
        dtype = np.dtype(dtype)
        if dtype.kind != "f":
            raise TypeError(f"astype: dtype must be a floating type, got {dtype}")
        for _, tensor in self._named_tensors():
            tensor.data, tensor.grad = tensor.data.astype(dtype), None
        return self


def _join(prefix, name):
    return f"{prefix}.{name}" if prefix else name


def _state_problems(parameters, arrays):
    """The lines of load_state_dict's error: missing, unexpected and mismatched names."""
    missing = [name for name in parameters if name not in arrays]
    unexpected = [name for name in arrays if name not in parameters]
    mismatched = [f"{name}: expected shape {p.shape}, got {arrays[name].shape}"
                  for name, p in parameters.items() if name in arrays and arrays[name].shape != p.shape]
    return ([f"missing: {', '.join(missing)}"] if missing else []) + \
           ([f"unexpected: {', '.join(unexpected)}"] if unexpected else []) + \
           [f"shape mismatch: {line}" for line in mismatched]


def parameter(values, dtype):
    """A trainable Tensor holding `values` cast to `dtype`."""
    return Tensor(np.asarray(values).astype(dtype), requires_grad=True)


class Linear(Module):
    """y = x W + b, W of shape (d_in, d_out) (the thesis writes X · W), b of shape (d_out,).

    x: (..., d_in) → y: (..., d_out). Xavier/Glorot normal initialisation,
    W ~ N(0, 2/(d_in + d_out)), which for a d × d projection is the N(0, 1/d) the architecture
    notes give for W_Q, W_K, W_V and W_O: the output entries keep the scale of the input's.
    b starts at zero. It calls autograd.functional.linear: one fused op by default, whose VJP
    multiplies the rows of x, whatever its leading axes, as one matrix.
    """

    def __init__(self, d_in, d_out, rng, bias=True, dtype=np.float32):
        super().__init__()
        self.d_in, self.d_out = d_in, d_out
        std = math.sqrt(2 / (d_in + d_out))
        self.weight = parameter(std * rng.standard_normal((d_in, d_out)), dtype)
        self.bias = parameter(np.zeros(d_out), dtype) if bias else None

    def forward(self, x):
        if x.shape[-1:] != (self.d_in,):
            raise ValueError(f"Linear({self.d_in}, {self.d_out}): expected an input whose last "
                             f"dimension is d_in={self.d_in}, got shape {tuple(x.shape)}")
        return F.linear(x, self.weight, self.bias)


class Embedding(Module):
    """Token ids → vectors, √d_model · Wᴱ[ids] (thesis §1.2: X · Wᴱ, "multiply by √512").

    ids: integers of any shape (..., n) → (..., n, d_model). Wᴱ ∈ ℝ^{vocab × d_model} starts as
    N(0, 1/d_model), i.e. standard deviation d_model^-1/2: after the √d_model scaling the
    vectors have entries of unit scale, the scale of the sinusoidal encoding (entries in
    [−1, 1]) they are added to, so neither the token nor its position drowns the other. With
    `scale=False` the lookup is returned unscaled.
    """

    def __init__(self, vocab_size, d_model, rng, scale=True, dtype=np.float32):
        super().__init__()
        self.vocab_size, self.d_model = vocab_size, d_model
        self.scale = math.sqrt(d_model) if scale else 1.0
        self.weight = parameter(rng.standard_normal((vocab_size, d_model)) / math.sqrt(d_model), dtype)

    def forward(self, ids):
        return F.embedding(self.weight, ids) * self.scale


class LayerNorm(Module):
    """γ (z − μ)/(σ + ε) + β over the last axis (thesis eq. (2)), γ ∈ ℝᵈ ones, β ∈ ℝᵈ zeros.

    `variant="torch"` uses √(σ² + ε) in the denominator, as PyTorch (see
    autograd.functional.layer_norm). x: (..., d) → (..., d).
    """

    def __init__(self, d, eps=1e-6, variant="thesis", dtype=np.float32):
        super().__init__()
        if variant not in LAYER_NORM_VARIANTS:
            raise ValueError(f"LayerNorm: variant must be one of {LAYER_NORM_VARIANTS}, got {variant!r}")
        self.eps, self.variant = eps, variant
        self.gamma = parameter(np.ones(d), dtype)
        self.beta = parameter(np.zeros(d), dtype)

    def forward(self, x):
        return F.layer_norm(x, self.gamma, self.beta, eps=self.eps, variant=self.variant)


class Dropout(Module):
    """Inverted dropout with probability p (thesis §1.2.1): x ⊙ m / (1 − p) in training, the
    identity after `eval()`. The masks are drawn from `rng`."""

    def __init__(self, p, rng):
        super().__init__()
        if not 0 <= p <= 1:
            raise ValueError(f"Dropout: p must be in [0, 1], got {p}")
        self.p, self.rng = p, rng

    def forward(self, x):
        return F.dropout(x, self.p, self.training, self.rng)


ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "swiglu")


class FeedForward(Module):
    """The position-wise feed-forward network of thesis §1.2.4, applied to every row alone:

        relu:    FFN(x) = max(0, x W₁ + b₁) W₂ + b₂                 (the thesis, d_ff = m = 2048)
        gelu:    FFN(x) = GELU(x W₁ + b₁) W₂ + b₂                  (gelu_tanh: GELU's tanh form, GPT-2's)
        swiglu:  FFN(x) = (σ(x W₁ + b₁) ⊙ (x W₃ + b₃)) W₂ + b₂

    W₁, W₃ ∈ ℝ^{d_model × d_ff}, W₂ ∈ ℝ^{d_ff × d_model}; x: (..., d_model) → (..., d_model).
    The thesis writes b₁, b₂ ∈ ℝ; they are vectors (ℝ^{d_ff} and ℝ^{d_model}), as in the paper.

    The SwiGLU line follows the architecture notes, whose gate is the sigmoid σ (that is
    Dauphin et al.'s GLU). Shazeer's SwiGLU gates with Swish(z) = z · σ(z) instead:
    (Swish(x W₁) ⊙ x W₃) W₂.

    Dropout (probability `dropout`) acts on the hidden layer, before W₂, as in PyTorch's
    Transformer layers.
    """

    def __init__(self, d_model, d_ff, rng, activation="relu", dropout=0.0, dtype=np.float32):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"FeedForward: activation must be one of {ACTIVATIONS}, got {activation!r}")
        self.activation = activation
        self.W_1 = Linear(d_model, d_ff, rng, dtype=dtype)
        if activation == "swiglu":
            self.W_3 = Linear(d_model, d_ff, rng, dtype=dtype)
        self.W_2 = Linear(d_ff, d_model, rng, dtype=dtype)
        self.dropout = Dropout(dropout, rng)

    def hidden(self, x):
        """The d_ff-dimensional layer between W₁ and W₂."""
        if self.activation == "swiglu":
            return F.sigmoid(self.W_1(x)) * self.W_3(x)
        if self.activation == "relu":
            return F.relu(self.W_1(x))
        return F.gelu(self.W_1(x), "tanh" if self.activation == "gelu_tanh" else "none")

    def forward(self, x):
        return self.W_2(self.dropout(self.hidden(x)))
