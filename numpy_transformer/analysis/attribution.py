"""Which input tokens an output depends on, from the attention weights (architecture notes,
"Attention Rollout" and "Gradient-Based Attribution").

**Attention rollout** (Abnar & Zuidema 2020). A layer's output at position i is its input at i
(the residual connection) plus what its attention brought from every j. Model that by

    Ã_l = normalise_rows(½ Ā_l + ½ I),     Ā_l the layer's weights averaged over its heads,

and follow it through the stack: R = Ã_L Ã_{L−1} ⋯ Ã_1, row i the share of each input token in
the top layer's position i. Every Ã_l is row-stochastic, so R is too. (The notes write
Ã = I + Ā, unnormalised, and the product Ã_1 ⋯ Ã_L: the same flow with row vectors acting from
the left and without the normalisation, which only rescales.) Rollout follows one stack's
self-attention: the encoder's, or the decoder's masked self-attention (its cross-attention
brings in the encoder, which a single product cannot follow).

**Attention × gradient.** Attribution_ij = A_ij · abs(∂L/∂A_ij): a weight matters when it is large
and the loss L is sensitive to it. To read ∂L/∂A off backward(), the hook of `hooks.py` adds a
leaf Tensor Z = 0 to the weights of every layer before they multiply V: A + Z has A's values,
and ∂L/∂Z = ∂L/∂A. (Replacing A by a detached copy would also cut the paths through the later
layers' own weights, which depend on A through their queries and keys, and give a different,
partial derivative.)
"""
import numpy as np

import autograd.functional as F
from autograd import Tensor
from numpy_transformer.analysis.capture import check_full_attention
from numpy_transformer.analysis.hooks import weights_hooks


def rollout_step(weights):
    """Ã = normalise_rows(½ Ā + ½ I) of one layer's weights, (heads, n, n) or (n, n)."""
    weights = np.asarray(weights, dtype=np.float64)
    mean = weights.mean(axis=0) if weights.ndim == 3 else weights
    if mean.ndim != 2 or mean.shape[0] != mean.shape[1]:
        raise ValueError(f"attention rollout needs square self-attention weights, got shape {weights.shape}")
    mixed = 0.5 * mean + 0.5 * np.eye(len(mean))
    return mixed / mixed.sum(axis=1, keepdims=True)


def attention_rollout(layers):
    """R = Ã_L ⋯ Ã_1 for `layers`, the weights of each layer from the first, (heads, n, n) each."""
    rollout = None
    for weights in layers:
        step = rollout_step(weights)
        rollout = step if rollout is None else step @ rollout
    if rollout is None:
        raise ValueError("attention rollout needs at least one layer")
    return rollout


def capture_rollout(capture, stack="encoder"):
    """The rollout of an `AttentionCapture`'s encoder ("encoder") or decoder ("decoder")
    self-attention."""
    return attention_rollout([capture.weights[name] for name in capture.names(f"{stack}.self_attn")])


def attention_gradient_attribution(model, src_ids, tgt_in, tgt_out):
    """name → (heads, n_q, n_k): A ⊙ abs(∂L/∂A) for every attention layer, L the mean
    cross-entropy of the labels tgt_out given the source src_ids and the decoder input tgt_in
    (1-D id arrays of one pair), dropout off. The model's parameters and their gradients are
    left as they were."""
    check_full_attention(model)
    weights_seen, zeros = {}, {}

    def make_hook(name):
        def plus_zero(weights):
            weights_seen[name] = weights.data
            zeros[name] = Tensor(np.zeros_like(weights.data), requires_grad=True)
            return weights + zeros[name]
        return plus_zero

    parameters = model.parameters()
    gradients, was_training = [p.grad for p in parameters], model.training
    model.eval()
    try:
        with weights_hooks(model, make_hook):
            logits = model(np.asarray(src_ids).reshape(1, -1), np.asarray(tgt_in).reshape(1, -1))
            F.cross_entropy(logits, np.asarray(tgt_out).reshape(1, -1)).backward()
    finally:
        model.train(was_training)
        for p, grad in zip(parameters, gradients):
            p.grad = grad
    return {name: (weights_seen[name] * np.abs(zero.grad))[0].astype(np.float64) for name, zero in zeros.items()}
