"""The yardsticks of `bench latency`: a decoding step written as plain array code.

The same weights and equations as the layers, with a key/value cache, but no Tensors, no
modules, no checks and no engine. Not a second implementation to use: a measure of how much of
a decoding step is NumPy's own work and how much the layers and the engine around the same
NumPy calls add. They cover the models of `bench latency` and the models like them (full
attention without memory slots, sinusoidal or learned positions, ReLU or exact GELU, either
layer norm, pre- or post-norm, tied or untied projections) and refuse the others.

    generator = PlainNumpyGenerator(decoder_only_model)
    logits = generator.step(ids, start)                          # (1, V), the next token's
    translator = PlainNumpyTranslator(transformer, source, copies=4)
    log_p = translator.log_probs(tokens)                         # IncrementalDecoder's interface
"""
import numpy as np
from scipy.special import erf

from autograd.engine_room import log_softmax_array, softmax_array
from numpy_transformer.language_model import causal_mask_at


def covers(config):
    """Whether the yardsticks cover a model of `config` (the module docstring's list)."""
    return config.decoder_self_attention == "full" and config.memory_slots == 0 and not config.embedding_norm \
        and config.positional in ("sinusoidal", "learned") and config.activation in ("relu", "gelu")


class PlainNumpyLayers:
    """The sublayers of a stack (`stack`, its parameters' prefix) as array code on the model's
    weights: Wᴱ and P, layer norm, x W + b, attention over a cache, the feed-forward network,
    and the residual connection around each, pre- or post-norm."""

    def __init__(self, model, stack):
        config = model.config
        if not covers(config):
            raise ValueError(f"{type(self).__name__} covers full attention without memory slots, sinusoidal or "
                             f"learned positions, ReLU or exact GELU, without an embedding norm; got {config}")
        self.config, self.prefix = config, stack
        self.weights = {name: p.data for name, p in model.named_parameters()}
        self.embedding = getattr(model, stack).embedding.weight.data                  # Wᴱ (V, d)
        self.positions = getattr(model, stack).positional.P.data                      # P (max_len, d)
        self.scale = self.positions.dtype.type(np.sqrt(config.d_model)) if config.scale_embeddings else 1

    def embed(self, ids, start):
        """√d · Wᴱ[ids] + P[start : start + n]: (rows, n) → (rows, n, d)."""
        return self.embedding[ids] * self.scale + self.positions[start:start + ids.shape[1]]

    def norm(self, x, name):
        """γ (z − μ)/D + β, D = σ + ε (thesis) or √(σ² + ε) (torch)."""
        centred = x - x.sum(-1, keepdims=True) / x.shape[-1]
        variance = np.square(centred).sum(-1, keepdims=True) / x.shape[-1]
        eps = x.dtype.type(self.config.norm_eps)
        centred /= np.sqrt(variance) + eps if self.config.norm_variant == "thesis" else np.sqrt(variance + eps)
        return centred * self.weights[name + ".gamma"] + self.weights[name + ".beta"]

    def linear(self, x, name):
        return x @ self.weights[name + ".weight"] + self.weights[name + ".bias"]

    def attention(self, h, name, cache, memory=None, allowed=None):
        """Multi-head attention of the new positions h (rows, n, d): self-attention over the cache
        and themselves (memory None; causal among themselves when n > 1), or cross-attention
        over `memory`, whose keys and values are projected on the first call. `allowed`: the
        keys each query may see, broadcastable to (rows, heads, n, n_keys), or None."""
        rows, n, heads = h.shape[0], h.shape[1], self.config.n_heads
        split = lambda x: x.reshape(rows, -1, heads, x.shape[-1] // heads).swapaxes(1, 2)   # noqa: E731
        q = split(self.linear(h, f"{name}.W_q"))
        if memory is None or "k" not in cache:
            source = h if memory is None else memory
            k, v = split(self.linear(source, f"{name}.W_k")), split(self.linear(source, f"{name}.W_v"))
            if memory is None and "k" in cache:
                k, v = np.concatenate([cache["k"], k], 2), np.concatenate([cache["v"], v], 2)
            cache["k"], cache["v"] = k, v
        scores = q @ cache["k"].swapaxes(-1, -2) / h.dtype.type(np.sqrt(q.shape[-1]))
        if memory is None and n > 1:
            allowed = causal_mask_at(cache["k"].shape[2] - n, n)
        if allowed is not None:
            scores = np.where(allowed, scores, -np.inf)
        heads_out = softmax_array(scores) @ cache["v"]                            # (rows, heads, n, d_k)
        return self.linear(heads_out.swapaxes(1, 2).reshape(rows, n, -1), f"{name}.W_c")

    def feed_forward(self, x, name):
        hidden = self.linear(x, f"{name}.W_1")
        if self.config.activation == "relu":
            hidden = np.maximum(hidden, 0)
        else:
            hidden = hidden * (0.5 * (1 + erf(hidden * x.dtype.type(np.sqrt(0.5)))))   # x Φ(x)
        return self.linear(hidden, f"{name}.W_2")

    def residual(self, x, sublayer, norm):
        """x + sublayer(LayerNorm(x)) (pre-norm) or LayerNorm(x + sublayer(x)) (post-norm)."""
        if self.config.norm_placement == "pre":
            return x + sublayer(self.norm(x, norm))
        return self.norm(x + sublayer(x), norm)

    def finish(self, x):
        return self.norm(x, f"{self.prefix}.final_norm") if self.config.norm_placement == "pre" else x


class PlainNumpyGenerator(PlainNumpyLayers):
    """The decoder-only model's incremental step."""

    def __init__(self, model):
        super().__init__(model, "stack")
        self.cache = {}

    def step(self, ids, start):
        """The logits (1, V) of the next token after `ids` (1, n) at positions start …"""
        x = self.embed(ids, start)
        for i in range(self.config.n_layers):
            layer, cache = f"stack.layers.{i}", self.cache.setdefault(i, {})
            x = self.residual(x, lambda h: self.attention(h, f"{layer}.self_attn", cache), f"{layer}.norm_1")
            x = self.residual(x, lambda h: self.feed_forward(h, f"{layer}.feed_forward"), f"{layer}.norm_2")
        h = self.finish(x[:, -1])
        if self.config.tie_embeddings:
            return h @ self.embedding.T
        return self.linear(h, "head")


class PlainNumpyTranslator(PlainNumpyLayers):
    """The encoder-decoder's decoder side, `copies` rows per source sentence (the beams), with
    `numpy_transformer.decoding.IncrementalDecoder`'s `log_probs` and `select`. The encoder runs
    once, through the model."""

    def __init__(self, model, src_ids, copies=1):
        super().__init__(model, "decoder")
        src_mask = model.source_mask(src_ids)                                   # (batch, 1, 1, n_src)
        self.memory = np.repeat(model.encode(src_ids, src_mask).data, copies, axis=0)
        self.allowed = np.repeat(src_mask, copies, axis=0)
        self.cache, self.start = {}, 0

    def log_probs(self, tokens):
        """log p(· | y_≤t, x) (rows, V) after feeding `tokens` (rows,) at position t."""
        y = self.embed(np.asarray(tokens)[:, None], self.start)
        for i in range(self.config.n_decoder_layers):
            layer, cache = f"decoder.layers.{i}", self.cache.setdefault(i, {"self": {}, "cross": {}})
            y = self.residual(y, lambda h: self.attention(h, f"{layer}.self_attn", cache["self"]), f"{layer}.norm_1")
            y = self.residual(y, lambda h: self.attention(h, f"{layer}.cross_attn", cache["cross"], self.memory,
                                                          self.allowed), f"{layer}.norm_2")
            y = self.residual(y, lambda h: self.feed_forward(h, f"{layer}.feed_forward"), f"{layer}.norm_3")
        self.start += 1
        h = self.finish(y[:, 0])
        weight = self.embedding.T if self.config.tie_embeddings else self.weights["projection.weight"]
        log_p = log_softmax_array(h @ weight)
        log_p[:, self.config.pad_id] = -np.inf
        return log_p

    def select(self, rows):
        """Keep the self-attention caches' rows `rows` (every copy of a sentence shares its memory)."""
        for cache in self.cache.values():
            cache["self"]["k"], cache["self"]["v"] = cache["self"]["k"][rows], cache["self"]["v"][rows]
