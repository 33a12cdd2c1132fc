"""Kernel ("linear") attention, thesis §2.1.2, eqs. (12)–(15) (Katharopoulos et al., the linear
transformer; Performer's random features).

Softmax attention is a weighted mean with weights sim(q_i, k_j) = exp(q_i · k_j / √d_k):

    V′_i = Σ_j sim(Q_i, K_j) V_j / Σ_j sim(Q_i, K_j)                                  (12), (13)

With a kernel sim(a, b) = φ(a)ᵀ φ(b) (eq. (14)) the sums factor, and associativity computes
Σ_j φ(K_j) V_jᵀ and Σ_j φ(K_j) once for all queries:

    V′_i = φ(Q_i)ᵀ Σ_j φ(K_j) V_jᵀ / φ(Q_i)ᵀ Σ_j φ(K_j)                               (15)

O(n · m · d) instead of O(n² · d) for m features. Causal (j ≤ i) the sums become prefix sums,
S_i = Σ_{j≤i} φ(K_j) V_jᵀ and z_i = Σ_{j≤i} φ(K_j), which is a recurrence (an RNN):

    S_i = S_{i−1} + φ(K_i) V_iᵀ,   z_i = z_{i−1} + φ(K_i),   V′_i = φ(Q_i)ᵀ S_i / φ(Q_i)ᵀ z_i

so decoding carries (S, z) from token to token in O(m · d) memory, whatever the length.

Feature maps (`feature_map=`):

| name      | φ(x)                                        | φ(q)ᵀφ(k)                              |
|-----------|---------------------------------------------|----------------------------------------|
| "elu"     | elu(x) + 1                                  | a kernel of its own (not softmax), > 0 |
| "taylor"  | [1, x / ‖x‖₂]                               | 1 + q̂ · k̂ ∈ [0, 2]: first order of     |
|           |                                             | e^{q̂·k̂} (end of §2.1.2)                |
| "favor"   | exp(ωᵀx − ‖x‖²/2) / √m                      | ≈ exp(q·k/√d), unbiased, always > 0    |
| "fourier" | exp(‖x‖²/2) [cos ωᵀx, sin ωᵀx] / √m         | ≈ exp(q·k/√d), unbiased, can be < 0    |

"favor" and "fourier" scale x by d^−1/4 first. ω ∈ ℝ^{d × m} has N(0, 1) entries
(`random_features`); "fourier" has 2m features. The random maps estimate the softmax kernel:
Performer's positive random features, and random Fourier features (`φ(x) = [cos(Wx), sin(Wx)]`
of the architecture notes, which estimate the Gaussian kernel e^{−‖q−k‖²/2}) times
exp(‖x‖²/2), which turns that kernel into the softmax one. Their error falls like 1/√m.

Stabilisation: "favor" divides each query's features by the largest of its exponentials, a
constant of that query alone, which cancels between the numerator and the denominator of
eq. (15). Keys get no such shift: one constant for all keys would have to be known before the
last key, which would break the recurrence. The denominator is max(φ(Q_i)ᵀ Σ_j φ(K_j), ε): a
query whose keys are all padding gets 0, not 0/0. "fourier" weights can be negative, so its
denominator can come near 0 or below; it is clamped at ε like the others, which keeps it
finite but not accurate: a large output where the estimate of Σ_j sim fails. That instability
is why Performer uses the positive features; "fourier" is here to show it (docs/chapter2.md
measures both).
"""
import math

import numpy as np

from autograd import Tensor, concatenate, masked_fill, stack, where
from autograd.checks import checked_integer
from autograd.engine import Function
from autograd.precision import in_float32
from numpy_transformer.attention.shape_checks import checked_key_padding, checked_qkv

FEATURE_MAPS = ("elu", "taylor", "favor", "fourier")
RANDOM_FEATURE_MAPS = ("favor", "fourier")


class PrefixSum(Function):
    """y_i = Σ_{j≤i} x_j along `axis` (np.cumsum). VJP: ∂L/∂x_j = Σ_{i≥j} g_i, the suffix sums of g."""

    @in_float32
    def forward(self, x, axis):
        self.axis = axis
        return np.cumsum(x, axis=axis)

    @in_float32
    def backward(self, g):
        return (np.flip(np.cumsum(np.flip(g, self.axis), axis=self.axis), self.axis),)


class CosSin(Function):
    """[cos p, sin p] concatenated along the last axis: (…, m) → (…, 2m).
    VJP: ∂L/∂p = −sin p ⊙ g_cos + cos p ⊙ g_sin."""

    def forward(self, p):
        self.save_for_backward(p)
        return np.concatenate([np.cos(p), np.sin(p)], axis=-1)

    def backward(self, g):
        (p,) = self.saved
        m = p.shape[-1]
        return (np.cos(p) * g[..., m:] - np.sin(p) * g[..., :m],)


def prefix_sum(x, axis):
    return PrefixSum.apply(x, axis=axis)


def random_features(d, n_features, rng, dtype=np.float32):
    """ω ∈ ℝ^{d × m} with N(0, 1) entries, drawn with `rng` (a numpy.random.Generator)."""
    n_features = checked_integer("random_features: n_features", n_features, low=1)
    return rng.standard_normal((d, n_features)).astype(dtype)


def elu_feature_map(x):
    """φ(x) = elu(x) + 1: x + 1 for x > 0, eˣ otherwise (> 0 everywhere). (…, d) → (…, d)."""
    positive = x.data > 0
    return where(positive, x + 1.0, masked_fill(x, positive, 0.0).exp())


def taylor_feature_map(x):
    """φ(x) = [1, x / ‖x‖₂], so φ(q)ᵀφ(k) = 1 + q̂ · k̂ ≥ 0: the first-order Taylor expansion
    e^{q̂·k̂} ≈ 1 + q̂ · k̂ of the end of §2.1.2 with ℓ2-normalised q and k. A zero vector maps
    to [1, 0]. (…, d) → (…, d + 1)."""
    squared = (x * x).sum(axis=-1, keepdims=True)
    norm = where(squared.data > 0, squared, 1.0).sqrt()
    ones = Tensor(np.ones((*x.shape[:-1], 1), dtype=x.dtype))
    return concatenate([ones, x / norm], axis=-1)


def favor_feature_map(x, omega, is_query):
    """Positive random features (Performer's FAVOR+): φ(x) = exp(ωᵀx − ‖x‖²/2) / √m with x
    scaled by d^−1/4, so that E[φ(q)ᵀφ(k)] = exp(q · k / √d). Queries are divided by their
    largest exponential (a constant per query, which cancels in eq. (15)). (…, d) → (…, m)."""
    x = x * x.shape[-1] ** -0.25
    logits = x @ omega - (x * x).sum(axis=-1, keepdims=True) * 0.5
    if is_query:
        logits = logits - logits.data.max(axis=-1, keepdims=True)
    return logits.exp() * (1 / math.sqrt(omega.shape[-1]))


def fourier_feature_map(x, omega):
    """Random Fourier features made softmax features: φ(x) = exp(‖x‖²/2) [cos ωᵀx, sin ωᵀx] / √m,
    x scaled by d^−1/4, so that E[φ(q)ᵀφ(k)] = exp(‖q‖²/2 + ‖k‖²/2) e^{−‖q−k‖²/2}
    = exp(q · k / √d).
    (…, d) → (…, 2m). Its products can be negative (see the module docstring)."""
    x = x * x.shape[-1] ** -0.25
    features = CosSin.apply(x @ omega) * (1 / math.sqrt(omega.shape[-1]))
    return features * ((x * x).sum(axis=-1, keepdims=True) * 0.5).exp()


def feature_map(x, kind, omega=None, is_query=False):
    """φ of the named map applied to the rows of x (…, n, d) → (…, n, m). `omega` (d, m) is
    the random matrix of "favor" and "fourier"."""
    if kind == "elu":
        return elu_feature_map(x)
    if kind == "taylor":
        return taylor_feature_map(x)
    if kind == "favor":
        return favor_feature_map(x, omega, is_query)
    if kind == "fourier":
        return fourier_feature_map(x, omega)
    raise ValueError(f"feature_map must be one of {FEATURE_MAPS}, got {kind!r}")


def linear_attention(q, k, v, feature_map="elu", causal=False, key_padding=None, n_features=64,
                     rng=None, omega=None, eps=1e-6):
    """Kernel attention of eq. (15), non-causal or causal (prefix sums).

    q: (…, n_q, d_k), k: (…, n_k, d_k), v: (…, n_k, d_v) Tensors; causal needs n_q = n_k.
    feature_map: "elu", "taylor", "favor" or "fourier" (see the module docstring); the random
    maps take `omega` (d_k, n_features) or draw it from `rng`. key_padding: boolean
    broadcastable to (…, n_k), True at real keys; φ(K) of padded keys is zeroed, so they
    add nothing to either sum. eps: the denominator is max(φ(Q_i)ᵀ Σ φ(K_j), eps).
    Returns (…, n_q, d_v).
    """
    name = "linear_attention"
    q, k, v, leading = checked_qkv(name, q, k, v, same_length=causal)
    key_padding = checked_key_padding(name, key_padding, leading, k.shape[-2])
    phi_q, phi_k = query_key_features(q, k, feature_map, n_features, rng, omega)
    if key_padding is not None:
        phi_k = phi_k * key_padding[..., None].astype(phi_k.dtype)
    if causal:
        return causal_linear_attention(phi_q, phi_k, v, eps)[0]
    return kernel_attention(phi_q, phi_k, v, eps)


def query_key_features(q, k, kind, n_features=64, rng=None, omega=None):
    """(φ(Q), φ(K)) with the map `kind`; for a random map, ω is `omega` or drawn from `rng`."""
    if kind not in FEATURE_MAPS:
        raise ValueError(f"linear_attention: feature_map must be one of {FEATURE_MAPS}, got {kind!r}")
    if kind in RANDOM_FEATURE_MAPS:
        if omega is None:
            if rng is None:
                raise ValueError(f"linear_attention: feature_map={kind!r} is random: pass rng (a "
                                 f"numpy.random.Generator) or omega (an array (d_k, n_features))")
            omega = random_features(q.shape[-1], n_features, rng)
        omega = np.asarray(getattr(omega, "data", omega)).astype(q.dtype, copy=False)
        if omega.ndim != 2 or omega.shape[0] != q.shape[-1]:
            raise ValueError(f"linear_attention: omega must have shape (d_k={q.shape[-1]}, n_features), "
                             f"got {omega.shape}")
    return feature_map(q, kind, omega, is_query=True), feature_map(k, kind, omega, is_query=False)


def _divide(numerator, denominator, eps):
    """numerator / max(denominator, eps)."""
    return numerator / where(denominator.data > eps, denominator, eps)


def kernel_attention(phi_q, phi_k, v, eps=1e-6):
    """Eq. (15) by associativity: φ(Q) (φ(K)ᵀ V) / φ(Q) (φ(K)ᵀ 1).
    phi_q: (…, n_q, m), phi_k: (…, n_k, m), v: (…, n_k, d_v) → (…, n_q, d_v)."""
    kv = phi_k.swapaxes(-1, -2) @ v                                 # Σ_j φ(K_j) V_jᵀ: (…, m, d_v)
    z = phi_k.sum(axis=-2, keepdims=True)                          # Σ_j φ(K_j): (…, 1, m)
    return _divide(phi_q @ kv, (phi_q * z).sum(axis=-1, keepdims=True), eps)


def causal_linear_attention(phi_q, phi_k, v, eps=1e-6, state=None):
    """The causal form: S_i = S₀ + Σ_{j≤i} φ(K_j) V_jᵀ and z_i = z₀ + Σ_{j≤i} φ(K_j) by prefix
    sums, V′_i = φ(Q_i)ᵀ S_i / max(φ(Q_i)ᵀ z_i, eps).

    phi_q, phi_k: (…, n, m), v: (…, n, d_v); `state` (S₀ (…, m, d_v), z₀ (…, m)) continues a
    sequence whose earlier positions were processed already (None: an empty prefix).
    Returns (output (…, n, d_v), the state after the last position). The (…, n, m, d_v)
    prefix sums are O(n · m · d) memory: linear in n.
    """
    *_, n, m = phi_q.shape
    d_v = v.shape[-1]
    outer = phi_k.reshape(*phi_k.shape, 1) * v.reshape(*v.shape[:-1], 1, d_v)   # φ(K_j) V_jᵀ: (…, n, m, d_v)
    S, z = prefix_sum(outer, axis=-3), prefix_sum(phi_k, axis=-2)
    if state is not None:
        S0, z0 = state
        S = S + S0.reshape(*S0.shape[:-2], 1, m, d_v)
        z = z + z0.reshape(*z0.shape[:-1], 1, m)
    numerator = phi_q.reshape(*phi_q.shape[:-1], 1, m) @ S                          # (…, n, 1, d_v)
    numerator = numerator.reshape(*numerator.shape[:-2], d_v)
    out = _divide(numerator, (phi_q * z).sum(axis=-1, keepdims=True), eps)
    return out, (S[..., -1, :, :], z[..., -1, :])


def linear_attention_step(phi_q, phi_k, v, state=None, eps=1e-6):
    """One step of the recurrence: S ← S + φ(k) vᵀ, z ← z + φ(k), out = φ(q)ᵀ S / max(φ(q)ᵀ z, eps).
    phi_q, phi_k: (…, m), v: (…, d_v), state (S (…, m, d_v), z (…, m)) or None. Returns (out, state)."""
    m, d_v = phi_k.shape[-1], v.shape[-1]
    S = phi_k.reshape(*phi_k.shape, 1) * v.reshape(*v.shape[:-1], 1, d_v)
    z = phi_k
    if state is not None:
        S, z = state[0] + S, state[1] + z
    numerator = (phi_q.reshape(*phi_q.shape[:-1], 1, m) @ S)
    numerator = numerator.reshape(*numerator.shape[:-2], d_v)
    return _divide(numerator, (phi_q * z).sum(axis=-1, keepdims=True), eps), (S, z)


def recurrent_linear_attention(q, k, v, feature_map="elu", n_features=64, rng=None, omega=None, eps=1e-6,
                               state=None):
    """Causal linear attention computed as an RNN, one position at a time with
    `linear_attention_step` (how decoding sees it). Equals `linear_attention(…, causal=True)`.
    q, k: (…, n, d_k), v: (…, n, d_v). Returns (output (…, n, d_v), state (S, z))."""
    q, k, v, _ = checked_qkv("recurrent_linear_attention", q, k, v, same_length=True)
    phi_q, phi_k = query_key_features(q, k, feature_map, n_features, rng, omega)
    outputs = []
    for t in range(q.shape[-2]):
        out, state = linear_attention_step(phi_q[..., t, :], phi_k[..., t, :], v[..., t, :], state, eps)
        outputs.append(out)
    return stack(outputs, axis=-2), state
