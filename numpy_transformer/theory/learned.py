"""Copy, shift, average and local attention learned from data by one attention head, for
comparison with the constructions of `numpy_transformer.theory.constructions`.

The task of a row-stochastic pattern A* (n × n): token i carries its one-hot position and a random
content vector c_i ∈ ℝ^{d_c}, x_i = [e_i, c_i]; the target of position i is Σ_j A*_ij c_j (the
content of position i for copy, of i + s for shift, the mean for average). The head

    O = softmax(X W_q (X W_k)ᵀ / √d_k) X W_v,   W_q, W_k ∈ ℝ^{(n + d_c) × d_k},  W_v ∈ ℝ^{(n + d_c) × d_c},

minimises the mean squared error with Adam. Since the contents are random, the head can only
meet the targets by attending with the pattern A* from the positions and reading the contents
through W_v; the learned A, averaged over a fresh batch, is then compared with A*.
"""
import numpy as np

from autograd.checks import checked_integer
from autograd.optim import Adam
from numpy_transformer.attention import scaled_dot_product_attention
from numpy_transformer.nn import Linear, Module
from numpy_transformer.theory.constructions import local_profile, shift_permutation, uniform_profile


class SingleHeadAttention(Module):
    """One head, O = softmax(X W_q (X W_k)ᵀ / √d_k) X W_v, no biases. x: (batch, n, d_in) →
    (O: (batch, n, d_v), A: (batch, n, n))."""

    def __init__(self, d_in, d_k, d_v, rng, dtype=np.float32):
        super().__init__()
        self.W_q = Linear(d_in, d_k, rng, bias=False, dtype=dtype)
        self.W_k = Linear(d_in, d_k, rng, bias=False, dtype=dtype)
        self.W_v = Linear(d_in, d_v, rng, bias=False, dtype=dtype)

    def forward(self, x):
        return scaled_dot_product_attention(self.W_q(x), self.W_k(x), self.W_v(x))


def target_patterns(n, s=1, tau=1.0):
    """{task: A*} for copy (I), shift by s (cyclic), average (1/n) and local (exp(−|i−j|/τ)/Z)."""
    return {"copy": np.eye(n), "shift": shift_permutation(n, s), "average": uniform_profile(n),
            "local": local_profile(n, tau)}


def task_batch(pattern, batch_size, d_content, rng, dtype=np.float32):
    """(inputs (batch, n, n + d_c), targets (batch, n, d_c)): x_i = [e_i, c_i], target_i = Σ_j A*_ij c_j."""
    n = pattern.shape[0]
    content = rng.standard_normal((batch_size, n, d_content))
    positions = np.broadcast_to(np.eye(n), (batch_size, n, n))
    inputs = np.concatenate([positions, content], axis=-1)
    return inputs.astype(dtype), (pattern @ content).astype(dtype)


def train_attention(pattern, rng, steps=300, batch_size=32, d_content=8, lr=0.03):
    """(model, losses): a SingleHeadAttention trained with Adam on the task of `pattern` (n × n),
    a fresh batch at every step drawn from `rng`. d_k = n + d_c."""
    steps = checked_integer("steps", steps, low=1)
    n = pattern.shape[0]
    model = SingleHeadAttention(n + d_content, n + d_content, d_content, rng)
    optimizer = Adam(model.named_parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        inputs, targets = task_batch(pattern, batch_size, d_content, rng)
        output, _ = model(inputs)
        loss = ((output - targets) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.data))
    return model, losses


def learned_weights(model, n, rng, batch_size=64):
    """The model's attention weights on a fresh batch of random contents, averaged over the batch
    (they should not depend on the contents): (n, n), float64."""
    inputs, _ = task_batch(np.eye(n), batch_size, model.W_v.d_out, rng)
    _, weights = model(inputs)
    return weights.data.astype(np.float64).mean(axis=0)
