"""The decoder-only (GPT) and encoder-only (BERT) Transformers of the architecture notes,
§Transformer Variants. The decoder-only model:

    h_0 = √d · X Wᴱ + P                    the embedding and positions of §1.2, §1.2.1
    h_l = Block_l(h_{l−1}),  l = 1 … L       a block is the encoder layer f_θ of §1.2.2 whose
                                             self-attention is causal (eq. (10)'s mask)
    P(x_t | x_<t) = softmax(h_t W + b)       the language-model head (W = Wᴱᵀ when tied)

It is built from the encoder-decoder's own pieces (`Stack`, `EncoderLayer`): a decoder-only
block is an encoder layer with the causal mask, no cross-attention. Generation feeds one token
at a time through a key/value cache and gets the logits of recomputing the whole prefix.

The encoder-only model is the encoder itself, bidirectional, with BERT's masked-LM head:

    P(x_i | x_≠i) = softmax(LayerNorm(GELU(h_i W_t + b_t)) Wᴱᵀ + b)     at the masked positions i

Both are built from a `TransformerConfig` of their kind, whose named constructors carry GPT-2's
choices where the thesis has none (learned positions, PyTorch's LayerNorm, pre-norm, GELU, a tied
head):

    config = TransformerConfig.decoder_only(1000, d_model=64, n_heads=4, d_ff=256, n_layers=2)
    model = DecoderOnlyTransformer(config, np.random.default_rng(0))
    logits = model(ids)                    # (batch, n, vocab_size)
"""
import functools
import warnings

import numpy as np

import autograd.functional as F
from autograd.checks import checked_integer, checked_token_ids
from numpy_transformer.config import TransformerConfig, check_model_kind
from numpy_transformer.initialisation import initialise
from numpy_transformer.masks import padding_mask
from numpy_transformer.model import EncoderLayer, Stack
from numpy_transformer.nn import Embedding, LayerNorm, Linear, Module, parameter


def LanguageModelConfig(vocab_size, **fields):
    """Deprecated: numpy-transformer 0.1's configuration of the language models, kept for one
    release. It returns the equivalent `TransformerConfig`: `TransformerConfig.decoder_only(
    vocab_size, n_layers, **fields)` when causal (the default), `TransformerConfig.encoder_only`
    when causal=False; its keywords are the old ones (vocab_size, n_layers, causal, and the
    fields it shared with TransformerConfig). Build those directly instead."""
    warnings.warn("LanguageModelConfig is deprecated: use TransformerConfig.decoder_only(vocab_size, n_layers, …) "
                  "or TransformerConfig.encoder_only(…)", DeprecationWarning, stacklevel=2)
    return TransformerConfig.from_language_model_fields(vocab_size, **fields)


class DecoderOnlyTransformer(Module):
    """GPT: a causal stack over one vocabulary and its language-model head (module docstring).

    Parameters: stack.embedding.weight (Wᴱ), stack.positional (learned only) or
    stack.relative_bias (relative only), stack.layers.i.*, stack.final_norm (pre-norm), and
    head.weight, head.bias when not tied."""

    def __init__(self, config, rng):
        super().__init__()
        check_model_kind("DecoderOnlyTransformer", config, "decoder-only")
        self.config = config
        embedding = Embedding(config.vocab_size, config.d_model, rng, config.scale_embeddings, config.dtype)
        self.stack = Stack(config, embedding, functools.partial(EncoderLayer, causal=True), config.n_layers, rng,
                           bidirectional=False)
        self.head = None if config.tie_embeddings else \
            Linear(config.d_model, config.vocab_size, rng, dtype=config.dtype)
        initialise(self, config.init, rng)

    def forward(self, ids, cache=None, start=0):
        """Logits (batch, n, vocab_size) of the next token after each position of `ids`
        (batch, n), which sit at positions start … start + n − 1.

        Without a cache every position sees itself and the positions before it that are not
        padding. With `cache` (a dict kept by the caller across calls) the keys and values of
        earlier calls are kept and attended to: pass the new token(s) and their first position
        as `start`; the logits equal those of one call on the whole sequence."""
        ids = checked_token_ids("ids", ids, self.config.vocab_size, ndim=2)
        start = checked_integer("start", start, low=0)
        if start + ids.shape[1] > self.config.max_len:
            raise ValueError(f"ids of shape {ids.shape} at positions {start}..{start + ids.shape[1] - 1} are "
                             f"longer than max_len={self.config.max_len}")
        n, n_keys = ids.shape[1], start + ids.shape[1]
        x = self.stack.embed(ids, start)                                        # (batch, n, d)
        if cache is None:
            mask = causal_mask_at(start, n) & padding_mask(ids, self.config.pad_id)    # (batch, 1, n, n)
        else:                               # one new position sees every key so far: nothing to mask
            mask = causal_mask_at(start, n) if n > 1 else None
        bias = self.stack.position_bias(n, n_keys, start)
        if cache is None:
            x = self.stack.through_layers(x, mask, bias)
        else:
            for i, layer in enumerate(self.stack.layers):
                x = layer(x, mask, bias, cache.setdefault(i, {}))
        return self.project(self.stack.finish(x))

    def project(self, h):
        """h W + b: (batch, n, d) → (batch, n, vocab_size); W = Wᴱᵀ (no bias) when tied."""
        if self.head is None:
            return F.linear(h, self.stack.embedding.weight.T)
        return self.head(h)


class EncoderOnlyTransformer(Module):
    """BERT: a bidirectional stack (the encoder of §1.2.2) and the masked-LM head of the module
    docstring: a transform (Linear d → d, GELU, LayerNorm), then Wᴱᵀ (tied) or a Linear, and a
    bias over the vocabulary. Parameters: stack.*, head_transform.*, head_norm.*, head_bias, and
    head.weight when not tied.

    masked_lm_head=False builds the encoder alone (stack.* only), as Hugging Face's `BertModel`
    is: a sentence-embedding model such as all-MiniLM-L6-v2 has no head, and is read through
    `encode` (`sentence_embedding.embed` pools its outputs)."""

    def __init__(self, config, rng, masked_lm_head=True):
        super().__init__()
        check_model_kind("EncoderOnlyTransformer", config, "encoder-only")
        self.config = config
        embedding = Embedding(config.vocab_size, config.d_model, rng, config.scale_embeddings, config.dtype)
        self.stack = Stack(config, embedding, EncoderLayer, config.n_layers, rng, bidirectional=True)
        self.masked_lm_head = masked_lm_head
        self.head_transform = self.head_norm = self.head = self.head_bias = None
        if masked_lm_head:
            self.head_transform = Linear(config.d_model, config.d_model, rng, dtype=config.dtype)
            self.head_norm = LayerNorm(config.d_model, config.norm_eps, config.norm_variant, config.dtype)
            self.head = None if config.tie_embeddings else \
                Linear(config.d_model, config.vocab_size, rng, bias=False, dtype=config.dtype)
            self.head_bias = parameter(np.zeros(config.vocab_size), config.dtype)
        initialise(self, config.init, rng)

    def encode(self, ids, real=None):
        """ids (batch, n) → h (batch, n, d), every position seeing every real token: those that
        are not pad_id, or those where `real` (batch, n) is True (Hugging Face's attention_mask,
        for a text that holds the padding token itself)."""
        ids = checked_token_ids("ids", ids, self.config.vocab_size, ndim=2)
        if ids.shape[1] > self.config.max_len:
            raise ValueError(f"ids of shape {ids.shape} are longer than max_len={self.config.max_len}")
        if real is not None and np.shape(real) != ids.shape:
            raise ValueError(f"real has shape {np.shape(real)}; it must have the shape of ids, {ids.shape}")
        x = self.stack.embed(ids)
        mask = padding_mask(ids, self.config.pad_id) if real is None else np.asarray(real, dtype=bool)[:, None, None, :]
        bias = self.stack.position_bias(ids.shape[1], ids.shape[1])
        return self.stack.finish(self.stack.through_layers(x, mask, bias))

    def forward(self, ids):
        """Logits (batch, n, vocab_size) of the token at every position, read from both sides."""
        if not self.masked_lm_head:
            raise ValueError("this encoder has no masked-LM head (a BertModel checkpoint, such as a sentence-embedding "
                             "model): read its outputs with encode(ids), or embed texts with numpy-transformer embed")
        h = F.gelu(self.head_transform(self.encode(ids)), "tanh" if self.config.activation == "gelu_tanh" else "none")
        h = self.head_norm(h)
        weight = self.stack.embedding.weight.T if self.head is None else self.head.weight
        return F.linear(h, weight, self.head_bias)


IGNORED = -100     # the target of a position the masked-LM loss leaves out (PyTorch's ignore_index)


def mask_tokens(ids, rng, mask_id, vocab_size, special_ids, rate=0.15):
    """BERT's masking (Devlin et al. 2019, §3.1): (inputs, targets), both (batch, n).

    Each token that is not special ([PAD], [CLS], [SEP], …) is selected with probability `rate`;
    a selected token becomes [MASK] with probability 0.8, a random non-special token with 0.1,
    and stays itself with 0.1. targets hold the original token at the selected positions and
    IGNORED elsewhere, so that `masked_lm_loss` counts the selected positions only. When no
    token is selected (a short batch), one ordinary token is, so that every batch has a loss."""
    ids = checked_token_ids("ids", ids, vocab_size, ndim=2)
    ordinary = ~np.isin(ids, list(special_ids))
    selected = ordinary & (rng.random(ids.shape) < rate)
    if not selected.any() and ordinary.any():
        selected.flat[rng.choice(np.flatnonzero(ordinary))] = True
    choice = rng.random(ids.shape)
    candidates = np.setdiff1d(np.arange(vocab_size), list(special_ids))
    random_tokens = candidates[rng.integers(len(candidates), size=ids.shape)]
    inputs = np.where(selected & (choice < 0.8), mask_id, ids)
    inputs = np.where(selected & (choice >= 0.8) & (choice < 0.9), random_tokens, inputs)
    return inputs, np.where(selected, ids, IGNORED)


def masked_lm_loss(model, inputs, targets):
    """−(1/|S|) Σ_{i∈S} log P(x_i | x_≠i) over the selected positions S (targets ≠ IGNORED):
    the masked-LM loss, a scalar Tensor."""
    return F.cross_entropy(model(inputs), targets, ignore_index=IGNORED)


def causal_mask_at(start, n):
    """(n, start + n) boolean: query i (at position start + i) sees the keys at positions ≤ start + i,
    the causal M of eq. (10) for queries that come after `start` cached positions."""
    return np.tril(np.ones((n, start + n), dtype=bool), k=start)
