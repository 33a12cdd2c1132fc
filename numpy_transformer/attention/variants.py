"""The attention of a `MultiHeadAttention` layer chosen by name: the variants of chapter 2
behind one interface, so a model can swap them (`TransformerConfig.attention`).

| attention   | computes                                 | options (defaults)                      | causal? |
|-------------|------------------------------------------|-----------------------------------------|---------|
| "full"      | eq. (5), the n × n weights               | none (the mask carries causality)       | yes     |
| "sparse"    | eq. (11), window ∪ global ∪ random links | window 7, dilation 1, global_tokens [], | yes     |
|             |                                          | random_links 0, seed 0                  |         |
| "window"    | Longformer, banded                       | window 7, dilation 1, global_tokens []  | yes     |
| "bigbird"   | eq. (11), BigBird's block layout         | block_size 8, window_blocks 3,          | no      |
|             |                                          | global_blocks 1, random_blocks 1, seed 0|         |
| "linear"    | eq. (15), kernel feature maps            | feature_map "elu", n_features 64,       | yes     |
|             |                                          | seed 0, eps 1e-6                        |         |
| "linformer" | eq. (17), learned E, F                   | k_proj 32, sharing "headwise" ("none",  | no      |
|             |                                          | "key-value", "layerwise")               |         |
| "blockwise" | eq. (5) exactly, online softmax          | block_size 64                           | yes     |

The causal-capable ones take `causal=True` (decoder self-attention: query i sees j ≤ i); the
model sets it, and `max_len` for Linformer's projections. "bigbird" is not offered causal (its
global tokens attend to every position, the future included), nor is "linformer".

Masks: "full" and "blockwise" take any boolean mask. The others take which keys are real,
read from the mask's last query row (a padding mask (…, 1, n), or causal & padding, whose last
row sees every real key); the graph, window or causality is their own. A mask that depends on
the query reaches a non-causal variant only by mistake, and is refused.

Incremental decoding (`cache`): "blockwise" keeps keys and values as "full" does; "sparse" and
"window" too, and compute a new query's row of their (causal) graph against the cached keys;
"linear" keeps its recurrent state (S, z) instead, O(m · d) whatever the length; the others are
not causal and refuse a cache. Attention dropout acts on "full"'s weights only (the other forms
never hold the weights), and `last_weights` is None for them.
"""
import numpy as np

from autograd import Tensor
from autograd.checks import checked_integer, checked_number, is_integer
from numpy_transformer.attention.blockwise import blockwise_attention
from numpy_transformer.attention.cache import KeyValueCache
from numpy_transformer.attention.kernel_linear import (FEATURE_MAPS, RANDOM_FEATURE_MAPS, causal_linear_attention,
                                                linear_attention, query_key_features, random_features)
from numpy_transformer.attention.linformer import linformer_attention, linformer_projections
from numpy_transformer.attention.patterns import (bigbird_pattern, dilated_window_pattern, global_tokens_pattern,
                                                  random_pattern)
from numpy_transformer.attention.scaled_dot_product import scaled_dot_product_attention
from numpy_transformer.attention.sparse import AttentionGraph, sparse_attention
from numpy_transformer.attention.window import sliding_window_attention
from numpy_transformer.masks import boolean_mask, causal_mask
from numpy_transformer.nn import Module, parameter

ATTENTION_KINDS = ("full", "sparse", "window", "bigbird", "linear", "linformer", "blockwise")
CAUSAL_KINDS = ("full", "sparse", "window", "linear", "blockwise")
LINFORMER_SHARING = ("none", "headwise", "key-value", "layerwise")
MODEL_OPTIONS = ("causal", "max_len")  # set by the model, not by the config

DEFAULTS = {
    "full": {},
    "sparse": dict(window=7, dilation=1, global_tokens=[], random_links=0, seed=0, causal=False),
    "window": dict(window=7, dilation=1, global_tokens=[], causal=False),
    "bigbird": dict(block_size=8, window_blocks=3, global_blocks=1, random_blocks=1, seed=0),
    "linear": dict(feature_map="elu", n_features=64, seed=0, eps=1e-6, causal=False),
    "linformer": dict(k_proj=32, sharing="headwise", max_len=512),
    "blockwise": dict(block_size=64, causal=False),
}

_AT_LEAST = {"window": 1, "dilation": 1, "random_links": 0, "seed": 0, "block_size": 1, "window_blocks": 1,
             "global_blocks": 0, "random_blocks": 0, "n_features": 1, "k_proj": 1, "max_len": 1}
_CHOICES = {"feature_map": FEATURE_MAPS, "sharing": LINFORMER_SHARING}


def attention_options(kind, options):
    """The complete options of attention `kind`: the defaults updated with `options`, checked.
    A ValueError names an unknown kind, an option the kind does not take, or a bad value."""
    if kind not in ATTENTION_KINDS:
        raise ValueError(f"attention must be one of {ATTENTION_KINDS}, got {kind!r}")
    unknown = sorted(set(options) - set(DEFAULTS[kind]))
    if unknown:
        raise ValueError(f"attention={kind!r} takes the options {sorted(DEFAULTS[kind])}, got {unknown}")
    complete = {**DEFAULTS[kind], **options}
    for name, value in complete.items():
        check_option(name, value)
    return complete


def check_option(name, value):
    """A ValueError naming option `name` when `value` is not one it can take."""
    def fail(requirement):
        raise ValueError(f"attention option {name} must be {requirement}, got {value!r}")

    if name in _AT_LEAST:
        checked_integer(f"attention option {name}", value, low=_AT_LEAST[name])
    if name in _CHOICES and value not in _CHOICES[name]:
        fail(f"one of {_CHOICES[name]}")
    if name == "global_tokens" and not (isinstance(value, (list, tuple)) and all(
            is_integer(t) and t >= 0 for t in value)):
        fail("a list of non-negative token positions")
    if name == "eps":
        checked_number(f"attention option {name}", value, low=0, low_open=True)
    if name == "causal" and not isinstance(value, bool):
        fail("true or false")


def options_for(kind, options, **model_options):
    """The entries of `options` (a config's attention_options) that `kind` takes, plus the
    model's own (`causal`, `max_len`) where the kind takes them."""
    every = {**options, **model_options}
    return {name: value for name, value in every.items() if name in DEFAULTS[kind]}


def attention_variant(kind, d_k, n_heads, rng, dtype=np.float32, **options):
    """The module that computes the heads of `kind` (None for "full", which
    numpy_transformer.attention.attend.FullAttention computes). Its call is
    (Q, K, V, mask, cache) → heads (batch, heads, n, d_k), K and V this call's only: the module
    keeps what it needs of past positions in `cache` itself."""
    options = attention_options(kind, options)
    if kind == "full":
        return None
    if kind in ("sparse", "window", "bigbird"):
        return GraphAttention(kind, options)
    if kind == "linear":
        return KernelAttention(d_k, dtype, **options)
    if kind == "linformer":
        return LinformerAttention(n_heads, rng, dtype, **options)
    return BlockwiseSelfAttention(**options)


def key_padding_from_mask(mask, causal, kind):
    """Which keys are real, (…, n_k), from a padding mask (…, 1, n_k) or, for a causal variant,
    from causal & padding (its last query row); None for no mask."""
    if mask is None:
        return None
    mask = boolean_mask(mask)
    if mask.ndim >= 2 and mask.shape[-2] > 1 and not causal:
        raise ValueError(f"attention={kind!r} (not causal) takes a key-padding mask (…, 1, n_k), got a mask of "
                         f"shape {mask.shape} that depends on the query (causal?); build it with causal=True")
    return mask[..., -1, :] if mask.ndim >= 2 else mask


class KeyValueCacheAttention(Module):
    """Variants that keep every key and value in the cache, as full attention does. A cached
    call computes the rows of its new queries (positions start …) against all keys so far,
    restricted to `allowed_rows` and to the mask (which must then cover every cached key)."""

    def forward(self, Q, K, V, mask, cache):
        if cache is None:
            return self.attend(Q, K, V, mask)
        n_new = K.shape[-2]
        K, V = KeyValueCache(cache).append(K, V)
        allowed = self.allowed_rows(K.shape[-2] - n_new, n_new, K.shape[-2])
        if mask is not None:
            allowed = boolean_mask(mask) if allowed is None else allowed & boolean_mask(mask)
        return self.attend_rows(Q, K, V, allowed)

    def attend_rows(self, Q, K, V, allowed):
        return scaled_dot_product_attention(Q, K, V, allowed)[0]


class GraphAttention(KeyValueCacheAttention):
    """"sparse", "window" and "bigbird": softmax over a graph N(i) of eq. (11). "window" runs
    the banded `sliding_window_attention`, the others `sparse_attention` over the pattern
    (built once per sequence length)."""

    def __init__(self, kind, options):
        super().__init__()
        self.kind, self.options = kind, options
        self.causal = options.get("causal", False)
        self.graphs = {}

    def pattern(self, n):
        """The (n, n) graph for n tokens (global tokens past n dropped; & causal when causal)."""
        o = self.options
        if self.kind == "bigbird":
            return bigbird_pattern(n, o["block_size"], np.random.default_rng(o["seed"]), o["window_blocks"],
                                   o["global_blocks"], o["random_blocks"])
        pattern = dilated_window_pattern(n, o["window"], o["dilation"])
        pattern |= global_tokens_pattern(n, [t for t in o["global_tokens"] if t < n])
        if o.get("random_links"):
            r = o["random_links"] if self.causal else min(o["random_links"], n)
            pattern |= random_pattern(n, r, np.random.default_rng(o["seed"]), causal=self.causal)
        return pattern & causal_mask(n) if self.causal else pattern

    def attend(self, Q, K, V, mask):
        n = Q.shape[-2]
        key_padding = key_padding_from_mask(mask, self.causal, self.kind)
        if self.kind == "window":
            o = self.options
            tokens = [t for t in o["global_tokens"] if t < n]
            return sliding_window_attention(Q, K, V, o["window"], o["dilation"], self.causal, tokens, key_padding)
        if n not in self.graphs:
            self.graphs[n] = AttentionGraph.from_pattern(self.pattern(n))
        return sparse_attention(Q, K, V, self.graphs[n], key_padding)

    def allowed_rows(self, start, n_new, n_keys):
        if not self.causal:
            raise ValueError(f"attention={self.kind!r} without causal=True has no incremental decoding "
                             f"(its graph reaches future positions)")
        return self.pattern(n_keys)[start:start + n_new]


class BlockwiseSelfAttention(KeyValueCacheAttention):
    """"blockwise": exact attention by blocks; any mask, causal as an option."""

    def __init__(self, block_size, causal):
        super().__init__()
        self.block_size, self.causal = block_size, causal

    def attend(self, Q, K, V, mask):
        return blockwise_attention(Q, K, V, self.block_size, self.causal, mask)

    def allowed_rows(self, start, n_new, n_keys):
        if not self.causal:
            return None
        return np.arange(n_keys) <= np.arange(start, start + n_new)[:, None]

    def attend_rows(self, Q, K, V, allowed):
        return blockwise_attention(Q, K, V, self.block_size, mask=allowed)


class KernelAttention(Module):
    """"linear": eq. (15). The random features ω of "favor" and "fourier" are drawn once from
    `seed` (shared by every head and layer): a buffer, rebuilt from the config, not trained.
    With a cache (causal only) it keeps the recurrent state cache["S"], cache["z"]."""

    def __init__(self, d_k, dtype, feature_map, n_features, seed, eps, causal):
        super().__init__()
        self.feature_map, self.eps, self.causal = feature_map, eps, causal
        self.omega = None
        if feature_map in RANDOM_FEATURE_MAPS:
            self.omega = Tensor(random_features(d_k, n_features, np.random.default_rng(seed), dtype))

    def forward(self, Q, K, V, mask, cache):
        if cache is None:
            key_padding = key_padding_from_mask(mask, self.causal, "linear")
            return linear_attention(Q, K, V, self.feature_map, self.causal, key_padding, omega=self.omega,
                                    eps=self.eps)
        if not self.causal:
            raise ValueError("attention='linear' without causal=True has no incremental decoding")
        phi_q, phi_k = query_key_features(Q, K, self.feature_map, omega=self.omega)
        key_padding = key_padding_from_mask(mask, True, "linear")
        if key_padding is not None:
            phi_k = phi_k * key_padding[..., -K.shape[-2]:, None].astype(phi_k.dtype)
        state = (cache["S"], cache["z"]) if "S" in cache else None
        out, (cache["S"], cache["z"]) = causal_linear_attention(phi_q, phi_k, V, self.eps, state)
        return out


class LinformerAttention(Module):
    """"linformer": eq. (17) with learned E, F ∈ ℝ^{k_proj × max_len}, a sequence of n tokens
    using their first n columns. sharing: "none" (E_h, F_h per head), "headwise" (one E, F
    for all heads), "key-value" (also E = F), "layerwise" (key-value, and one E for every
    layer: see `share_projections_across_layers`). Not causal: no cache."""

    def __init__(self, n_heads, rng, dtype, k_proj, sharing, max_len):
        super().__init__()
        self.max_len, self.sharing = max_len, sharing
        n_matrices = n_heads if sharing == "none" else 1
        self.E = parameter(linformer_projections(k_proj, max_len, rng, n_matrices), dtype)
        self.F = parameter(linformer_projections(k_proj, max_len, rng, n_matrices), dtype) \
            if sharing in ("none", "headwise") else None

    def forward(self, Q, K, V, mask, cache):
        if cache is not None:
            raise ValueError("attention='linformer' is not causal: it has no incremental decoding")
        n = K.shape[-2]
        if n > self.max_len:
            raise ValueError(f"attention='linformer': {n} positions are more than its projections' "
                             f"max_len={self.max_len}")
        F_ = self.E if self.F is None else self.F
        key_padding = key_padding_from_mask(mask, False, "linformer")
        return linformer_attention(Q, K, V, self.E[..., :n], F_[..., :n], key_padding)


def share_projections_across_layers(attentions):
    """Linformer's layerwise sharing: every MultiHeadAttention in `attentions` uses the first
    one's E (listed once among the parameters). No-op for other kinds or sharings."""
    variants = [getattr(a, "variant", None) for a in attentions]
    if variants and isinstance(variants[0], LinformerAttention) and variants[0].sharing == "layerwise":
        for variant in variants[1:]:
            variant.E = variants[0].E


def variant_parameter_count(kind, options, n_heads, max_len, n_layers):
    """The parameters a variant adds to `n_layers` attention layers (Linformer's E, F)."""
    if kind != "linformer":
        return 0
    options = attention_options(kind, options_for(kind, options, max_len=max_len))
    per_matrix = options["k_proj"] * options["max_len"]
    sharing = options["sharing"]
    if sharing == "layerwise":
        return per_matrix
    per_layer = {"none": 2 * n_heads, "headwise": 2, "key-value": 1}[sharing] * per_matrix
    return n_layers * per_layer
