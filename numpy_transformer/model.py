"""The encoder-decoder Transformer of thesis §1.2, read top to bottom as its Figure 2.

    source ids (b, n)                            target ids (b, n′)
      │ √d · Embedding + P[:n], dropout            │ √d · Embedding + P[:n′], dropout
      ▼                                            ▼
    EncoderLayer × L ── memory Z (b, n, d) ──►  DecoderLayer × L
      (self-attention, FFN)                        (masked self-attention, cross-attention on Z, FFN)
                                                   ▼ Y (b, n′, d)
                                                 Y · P → logits (b, n′, l)

Each layer wraps its sub-layers in the "Add & Norm" of Figure 2: post-norm as the thesis and
the paper, LayerNorm(x + Dropout(sublayer(x))), or pre-norm, x + Dropout(sublayer(LayerNorm(x))),
whose stacks end with one more LayerNorm. Every hyper-parameter comes from a
`TransformerConfig`; `parameter_count.analytic_parameter_count` counts the parameters it implies
(chapter 2).

    from numpy_transformer.model import Transformer, TransformerConfig
"""
import functools
import math

import numpy as np

import autograd.functional as F
from autograd import checkpoint, is_grad_enabled
from autograd.checks import checked_integer, checked_token_ids
from numpy_transformer.attention import MultiHeadAttention
from numpy_transformer.attention.relative import RelativePositionBias
from numpy_transformer.attention.variants import options_for, share_projections_across_layers
from numpy_transformer.config import TransformerConfig, check_model_kind
from numpy_transformer.initialisation import initialise
from numpy_transformer.masks import padding_mask, self_attention_mask
from numpy_transformer.nn import Dropout, Embedding, FeedForward, LayerNorm, Linear, Module
from numpy_transformer.positional import PositionalEncoding

__all__ = ["TransformerConfig", "EncoderLayer", "DecoderLayer", "Encoder", "Decoder", "Transformer",
           "count_parameters"]


def layer_norm(config):
    """LayerNorm of eq. (2) over d_model, the variant and ε of the config."""
    return LayerNorm(config.d_model, config.norm_eps, config.norm_variant, config.dtype)


def multi_head_attention(config, rng, kind="full", causal=False):
    """MultiHead of eqs. (3)–(7), dropout on the attention weights, its heads computed by the
    attention `kind` ("full", or a variant of chapter 2 with config.attention_options; `causal`
    for the decoder's self-attention). Cross-attention is always "full". Every attention, self
    and cross, gets the config's memory_slots (numpy_transformer.attention.memory_slots)."""
    options = options_for(kind, config.attention_options, causal=causal, max_len=config.max_len)
    return MultiHeadAttention(config.d_model, config.n_heads, rng, config.dropout, dtype=config.dtype,
                              attention=kind, memory_slots=config.memory_slots, **options)


def feed_forward(config, rng):
    """The position-wise FFN of §1.2.4, d_model → d_ff → d_model."""
    return FeedForward(config.d_model, config.d_ff, rng, config.activation, config.dropout, config.dtype)


class ResidualLayer(Module):
    """What the encoder and decoder layers share: the "Add & Norm" around each sub-layer."""

    def __init__(self, config, rng):
        super().__init__()
        self.pre_norm = config.norm_placement == "pre"
        self.dropout = Dropout(config.dropout, rng)

    def add_and_norm(self, x, sublayer, norm):
        """(batch, n, d) → (batch, n, d):

            post-norm (thesis §1.2.2):  LayerNorm(x + Dropout(sublayer(x)))
            pre-norm:                   x + Dropout(sublayer(LayerNorm(x)))

        The dropout on the sub-layer's output is the paper's "residual dropout" (§5.4).
        """
        if self.pre_norm:
            return x + self.dropout(sublayer(norm(x)))
        return norm(x + self.dropout(sublayer(x)))


class EncoderLayer(ResidualLayer):
    """The transformer block f_θ: ℝ^{n×d} → ℝ^{n×d} of thesis §1.2.2 (Figure 5):

        u = LayerNorm(x + Dropout(MultiHead(x)))        self-attention, eqs. (3)–(7), (2)
        z = LayerNorm(u + Dropout(FFN(u)))              §1.2.4

    (post-norm; pre-norm moves each LayerNorm in front of its sub-layer, see `add_and_norm`).
    θ is W_q, W_k, W_v, W_c, the FFN's W₁, b₁, W₂, b₂ and the two LayerNorms' γ, β.
    `causal`: the self-attention is causal, a block of the decoder-only model (GPT), whose
    attention is the config's decoder_self_attention.
    """

    def __init__(self, config, rng, causal=False):
        super().__init__(config, rng)
        kind = config.decoder_self_attention if causal else config.attention
        self.self_attn = multi_head_attention(config, rng, kind, causal=causal)
        self.feed_forward = feed_forward(config, rng)
        self.norm_1, self.norm_2 = layer_norm(config), layer_norm(config)

    def forward(self, x, src_mask, bias=None, cache=None):
        """x: (batch, n_src, d); src_mask: boolean (batch, 1, 1, n_src), False at padding keys
        (or causal & padding, (batch, 1, n, n), in a causal block); bias: the stack's relative
        position bias (1, heads, n_src, n_keys), or None; cache: this layer's keys and values for
        incremental decoding in a causal block (see MultiHeadAttention.forward)."""
        u = self.add_and_norm(x, lambda h: self.self_attn(h, mask=src_mask, bias=bias, cache=cache), self.norm_1)
        return self.add_and_norm(u, self.feed_forward, self.norm_2)


class DecoderLayer(ResidualLayer):
    """One decoder block of thesis §1.2.5 (Figure 2, right):

        u = LayerNorm(y + Dropout(MaskedMultiHead(y)))          eq. (10): query i sees keys j ≤ i
        v = LayerNorm(u + Dropout(MultiHead(u, memory)))        cross-attention: Q from u, K, V from Z
        z = LayerNorm(v + Dropout(FFN(v)))                      §1.2.4
    """

    def __init__(self, config, rng):
        super().__init__(config, rng)
        self.self_attn = multi_head_attention(config, rng, config.decoder_self_attention, causal=True)
        self.cross_attn = multi_head_attention(config, rng)
        self.feed_forward = feed_forward(config, rng)
        self.norm_1, self.norm_2, self.norm_3 = layer_norm(config), layer_norm(config), layer_norm(config)

    def forward(self, y, memory, src_mask, tgt_mask, cache=None, bias=None):
        """y: (batch, n_tgt, d); memory: the encoder output Z (batch, n_src, d);
        src_mask: (batch, 1, 1, n_src); tgt_mask: (batch, 1, n_tgt, n_keys) or None; bias: the
        stack's relative position bias of the self-attention (1, heads, n_tgt, n_keys), or None.

        `cache`, a dict kept by the caller, holds this layer's keys and values for incremental
        decoding: cache["self"] grows by the new positions at every call, cache["cross"] holds
        the memory's projections (see MultiHeadAttention.forward).
        """
        self_cache = cross_cache = None
        if cache is not None:
            self_cache, cross_cache = cache.setdefault("self", {}), cache.setdefault("cross", {})
        u = self.add_and_norm(y, lambda h: self.self_attn(h, mask=tgt_mask, cache=self_cache, bias=bias),
                              self.norm_1)
        v = self.add_and_norm(u, lambda h: self.cross_attn(h, memory, src_mask, cache=cross_cache), self.norm_2)
        return self.add_and_norm(v, self.feed_forward, self.norm_3)


class Stack(Module):
    """What the encoder and decoder stacks share (Figure 2, bottom to top): the token embedding
    √d · X Wᴱ (§1.2), plus the positions P[start : start + n] and dropout (§1.2.1, eq. (1)),
    the layers, and, in pre-norm only, a final LayerNorm (post-norm layers already end with one).
    With positional="relative" the positions are instead one T5 relative position bias, shared
    by the self-attention of every layer (`bidirectional` in the encoder, causal in the decoder).
    """

    def __init__(self, config, embedding, layer, n_layers, rng, bidirectional):
        super().__init__()
        self.embedding = embedding
        self.positional = PositionalEncoding(config.d_model, config.max_len, config.dropout, rng,
                                             config.positional, config.positional_base, config.dtype)
        self.relative_bias = RelativePositionBias(
            config.n_heads, config.d_model, rng, bidirectional, config.relative_buckets,
            config.relative_max_distance, config.dtype) if config.positional == "relative" else None
        self.embedding_norm = layer_norm(config) if config.embedding_norm else None
        self.layers = [layer(config, rng) for _ in range(n_layers)]
        self.final_norm = layer_norm(config) if config.norm_placement == "pre" else None
        self.segment = math.ceil(math.sqrt(n_layers)) if config.gradient_checkpointing else None

    def embed(self, ids, start=0):
        """ids (batch, n) → √d · Wᴱ[ids] + P[start : start + n] (LayerNormed with
        embedding_norm, as BERT), dropout: (batch, n, d)."""
        return self.positional(self.embedding(ids), start, self.embedding_norm)

    def position_bias(self, n_q, n_k, start=0):
        """The relative position bias (1, heads, n_q, n_k) of queries at start … start + n_q − 1,
        or None without relative positions."""
        return None if self.relative_bias is None else self.relative_bias(n_q, n_k, start)

    def through_layers(self, x, *context):
        """x through every layer, x ← layer(x, *context); `context` holds what every layer reads
        besides x (the encoder output, the masks, the relative bias). With gradient
        checkpointing the layers run in ⌈√L⌉ segments of ⌈√L⌉ under autograd.checkpoint, so
        backward keeps the activations of one segment at a time: O(√L) layers' worth, not O(L)."""
        if self.segment is None or not is_grad_enabled():
            return _through(self.layers, x, *context)
        generators = self.generators()
        for begin in range(0, len(self.layers), self.segment):
            segment = functools.partial(_through, self.layers[begin:begin + self.segment])
            x = checkpoint(segment, x, *context, generators=generators)
        return x

    def finish(self, x):
        """The stack's output: LayerNorm(x) in pre-norm, x itself in post-norm."""
        return x if self.final_norm is None else self.final_norm(x)


class Encoder(Stack):
    """The encoder: f_θ_L ∘ … ∘ f_θ_1 (X) of §1.2.2, X the embedded, position-aware source."""

    def __init__(self, config, embedding, rng):
        super().__init__(config, embedding, EncoderLayer, config.n_encoder_layers, rng, bidirectional=True)
        share_projections_across_layers([layer.self_attn for layer in self.layers])

    def forward(self, src_ids, src_mask):
        """src_ids (batch, n_src) → memory Z (batch, n_src, d)."""
        x = self.embed(src_ids)                                      # (batch, n_src, d)
        bias = self.position_bias(x.shape[1], x.shape[1])
        return self.finish(self.through_layers(x, src_mask, bias))


class Decoder(Stack):
    """The decoder of §1.2.5: the embedded target through L decoder layers, each attending to
    the encoder output."""

    def __init__(self, config, embedding, rng):
        super().__init__(config, embedding, DecoderLayer, config.n_decoder_layers, rng, bidirectional=False)

    def forward(self, tgt_ids, memory, src_mask, tgt_mask, cache=None, start=0):
        """tgt_ids (batch, n_tgt) at positions start … start + n_tgt − 1 → Y (batch, n_tgt, d).
        `cache` (a dict) gets one entry per layer, cache[i], for incremental decoding."""
        y = self.embed(tgt_ids, start)                               # (batch, n_tgt, d)
        n_tgt = y.shape[1]
        bias = self.position_bias(n_tgt, start + n_tgt, start)       # the keys: every position so far
        if cache is None:
            return self.finish(self.through_layers(y, memory, src_mask, tgt_mask, None, bias))
        for i, layer in enumerate(self.layers):
            y = layer(y, memory, src_mask, tgt_mask, cache.setdefault(i, {}), bias)
        return self.finish(y)


class Transformer(Module):
    """The encoder-decoder Transformer of thesis §1.2 (Figure 2), built from a TransformerConfig.

    Parameters: encoder.embedding (Wᴱ of the source), encoder.positional (learned only),
    encoder.layers.i.*, decoder.embedding, decoder.positional, decoder.layers.i.*, the final
    norms (pre-norm) and projection.weight (P ∈ ℝ^{d × l}, untied only). With
    `share_source_embedding` the encoder uses the decoder's embedding (listed once, under
    encoder.embedding.weight).

    Tied embeddings (`tie_embeddings`, the paper's §3.4): P = Wᴱᵀ of the target, unscaled, so
    logits = Y Wᴱᵀ. The √d of §1.2 belongs to the lookup only: Wᴱ starts as N(0, 1/d) and Y,
    a LayerNorm output, has entries of unit scale, so the tied logits start with unit variance.
    """

    def __init__(self, config, rng):
        super().__init__()
        check_model_kind("Transformer", config, "encoder-decoder")
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"Transformer: rng must be a numpy.random.Generator (np.random.default_rng(seed)), "
                            f"got {type(rng).__name__}")
        self.config = config
        src_embedding = Embedding(config.src_vocab_size, config.d_model, rng, config.scale_embeddings, config.dtype)
        tgt_embedding = src_embedding if config.share_source_embedding else \
            Embedding(config.tgt_vocab_size, config.d_model, rng, config.scale_embeddings, config.dtype)
        self.encoder = Encoder(config, src_embedding, rng)
        self.decoder = Decoder(config, tgt_embedding, rng)
        self.projection = None if config.tie_embeddings else \
            Linear(config.d_model, config.tgt_vocab_size, rng, bias=False, dtype=config.dtype)
        initialise(self, config.init, rng)

    def source_mask(self, src_ids):
        """(batch, 1, 1, n_src): every query may attend to the real source tokens (not padding).
        The mask of the encoder's self-attention and of the decoder's cross-attention."""
        return padding_mask(src_ids, self.config.pad_id)

    def target_mask(self, tgt_ids):
        """(batch, 1, n_tgt, n_tgt): the causal M of eq. (10) and the target's padding."""
        return self_attention_mask(tgt_ids, self.config.pad_id, causal=True)

    def encode(self, src_ids, src_mask):
        """src_ids (batch, n_src) → memory Z (batch, n_src, d)."""
        src_ids = self._checked_ids("src_ids", src_ids, self.config.src_vocab_size)
        return self.encoder(src_ids, src_mask)

    def decode(self, memory, src_mask, tgt_ids, tgt_mask, cache=None, start=0):
        """tgt_ids (batch, n_tgt) at positions start, … → Y (batch, n_tgt, d), attending to memory.

        For incremental decoding pass the same dict as `cache` at every step, the new token(s)
        as tgt_ids, their first position as `start`, and tgt_mask None (or a mask covering every
        position so far); the outputs equal those of one decode over the whole prefix.
        """
        tgt_ids = self._checked_ids("tgt_ids", tgt_ids, self.config.tgt_vocab_size, start)
        expected = (tgt_ids.shape[0], self.config.d_model)
        if memory.ndim != 3 or (memory.shape[0], memory.shape[2]) != expected:
            raise ValueError(f"decode: memory must have shape (batch={expected[0]}, n_src, "
                             f"d_model={expected[1]}) to fit tgt_ids of shape {tgt_ids.shape}, "
                             f"got {tuple(memory.shape)}")
        return self.decoder(tgt_ids, memory, src_mask, tgt_mask, cache, start)

    def project(self, y):
        """Logits Y · P of §1.2.5: (batch, n_tgt, d) → (batch, n_tgt, tgt_vocab_size); a softmax
        over the last axis gives p(y_t | y_<t, x)."""
        if self.projection is None:
            return F.linear(y, self.decoder.embedding.weight.T)
        return self.projection(y)

    def forward(self, src_ids, tgt_ids):
        """Logits (batch, n_tgt, tgt_vocab_size) of every target position, the masks built from
        config.pad_id: source padding for the encoder and the cross-attention, causal and
        target padding for the decoder's self-attention (teacher forcing)."""
        src_ids = self._checked_ids("src_ids", src_ids, self.config.src_vocab_size)
        tgt_ids = self._checked_ids("tgt_ids", tgt_ids, self.config.tgt_vocab_size)
        if src_ids.shape[0] != tgt_ids.shape[0]:
            raise ValueError(f"src_ids and tgt_ids must have the same batch size, got shapes "
                             f"{src_ids.shape} and {tgt_ids.shape}")
        src_mask = self.source_mask(src_ids)                         # (batch, 1, 1, n_src)
        memory = self.encode(src_ids, src_mask)                      # (batch, n_src, d)
        y = self.decode(memory, src_mask, tgt_ids, self.target_mask(tgt_ids))  # (batch, n_tgt, d)
        return self.project(y)                                       # (batch, n_tgt, tgt_vocab_size)

    def _checked_ids(self, name, ids, vocab_size, start=0):
        """ids as an integer array (batch, n) with ids in [0, vocab_size) and positions
        start … start + n − 1 that the model can read (below max_len when its positions do not
        extend, see `TransformerConfig.position_limit`), or a ValueError naming `name`."""
        ids = checked_token_ids(name, ids, vocab_size, ndim=2)
        start = checked_integer("start", start, low=0)
        limit = self.config.position_limit
        if limit is not None and start + ids.shape[1] > limit:
            last = start + ids.shape[1] - 1
            raise ValueError(f"{name} of shape {ids.shape} at positions {start}..{last} "
                             f"is longer than max_len={limit}")
        return ids


def _through(layers, x, *context):
    for layer in layers:
        x = layer(x, *context)
    return x


def count_parameters(model):
    """The number of trainable scalars of `model` (a tied or shared Tensor counts once)."""
    return sum(p.size for p in model.parameters())
