"""The initial weights of a model, by scheme (the `init` field of TransformerConfig, `--init` of
`train`). Every parameter is drawn again by its role; the variance each rule gives is in the last
column (U(±a) has variance a²/3):

| scheme           | role                              | rule                                   | variance          |
|------------------|-----------------------------------|----------------------------------------|-------------------|
| `xavier`         | every Linear W (d_in → d_out)     | N(0, 2/(d_in + d_out)), as built       | 2/(d_in + d_out)  |
| (the default)    | W_q, W_k, W_v, W_O (d × d)        | the same: the notes' N(0, 1/d_model),  | 1/d               |
|                  |                                   | and N(0, 1/(h d_v)) with h d_v = d     |                   |
|                  | embeddings (V × d)                | N(0, 1/d), as built                    | 1/d               |
| `xavier_uniform` | every matrix, embeddings included | U(±√(6/(fan_in + fan_out))), the       | 2/(fan_in+fan_out)|
| (the Annotated   |                                   | Annotated Transformer's recipe         |                   |
| Transformer's)   | W_q, W_k, W_v                     | as the recipe draws them: one matrix,  | 1/(2d)            |
|                  |                                   | PyTorch's packed in_proj (3d × d):     |                   |
|                  |                                   | U(±√(6/4d))                            |                   |
| `torch`          | Linear W                          | U(±1/√d_in): kaiming_uniform(a=√5)     | 1/(3 d_in)        |
|                  | Linear b                          | U(±1/√d_in)                            | 1/(3 d_in)        |
|                  | W_q, W_k, W_v                     | xavier_uniform of in_proj (3d × d):    | 1/(2d)            |
|                  |                                   | U(±√(6/4d))                            |                   |
|                  | W_O                               | U(±1/√d)                               | 1/(3d)            |
|                  | attention biases                  | 0                                      | 0                 |
|                  | embeddings                        | N(0, 1)                                | 1                 |
| `xavier`         | memory slots M_k, M_v (m × d)     | N(0, 1), as built: the scale of Z W_k  | 1                 |
|                  |                                   | for a unit-scale Z (d · 1 · 1/d)       |                   |
| `xavier_uniform` | memory slots                      | U(±√3), the same variance              | 1                 |
| `torch`          | memory slots                      | N(0, 1/d): xavier_normal_ of PyTorch's | 1/d               |
|                  |                                   | bias_k, bias_v (1, 1, d)               |                   |

Biases start at 0 in `xavier` and `xavier_uniform`; LayerNorm γ = 1 and β = 0, positions,
T5's bias table and Linformer's E and F stay as built in every scheme. `xavier` draws nothing more: a model built with
it is the model its constructors drew.
"""
import math

import numpy as np

SCHEMES = ("xavier", "xavier_uniform", "torch")
ATTENTION = (".W_q.", ".W_k.", ".W_v.")
MEMORY_SLOTS = (".memory_k", ".memory_v")


def initialise(model, scheme, rng):
    """Draw the parameters of `model` again by `scheme` (module docstring), in place."""
    if scheme not in SCHEMES:
        raise ValueError(f"init must be one of {SCHEMES}, got {scheme!r}")
    if scheme == "xavier":
        return model
    parameters = dict(model.named_parameters())
    for name, parameter in parameters.items():
        values = draw(scheme, name, parameter.shape, parameters, rng)
        if values is not None:
            parameter.data = values.astype(parameter.dtype)
    return model


def draw(scheme, name, shape, parameters, rng):
    """The new values of one parameter, or None to keep it (norms, positions, T5's table,
    Linformer's E and F)."""
    if name.endswith(MEMORY_SLOTS):
        return rng.standard_normal(shape) / math.sqrt(shape[1]) if scheme == "torch" else uniform(rng, shape, math.sqrt(3))
    if not name.endswith((".weight", ".bias", "head_bias")) or "positional" in name or "relative_bias" in name:
        return None
    if name.endswith("embedding.weight"):
        return rng.standard_normal(shape) if scheme == "torch" else uniform(rng, shape, math.sqrt(6 / sum(shape)))
    if name.endswith(".weight"):
        return uniform(rng, shape, weight_bound(scheme, name, shape))
    attention = any(part in name for part in (*ATTENTION, ".W_c."))
    if scheme == "torch" and name.endswith(".bias") and not attention:
        d_in = parameters[name.removesuffix(".bias") + ".weight"].shape[0]
        return uniform(rng, shape, 1 / math.sqrt(d_in))
    return np.zeros(shape)                                         # every other bias


def weight_bound(scheme, name, shape):
    """a of U(±a) for a Linear weight (d_in, d_out) under `scheme`."""
    d_in, d_out = shape
    if any(part in name for part in ATTENTION):
        return math.sqrt(6 / (d_in + 3 * d_out))          # xavier_uniform of the packed (3d, d) in_proj
    if scheme == "xavier_uniform":
        return math.sqrt(6 / (d_in + d_out))
    return 1 / math.sqrt(d_in)


def uniform(rng, shape, bound):
    return rng.uniform(-bound, bound, shape)
