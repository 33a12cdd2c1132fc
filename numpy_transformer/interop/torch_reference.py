"""This project's models written with `torch.nn`: what `numpy-transformer export --to torch`
writes weights for, what `bench train-step` times against, and what the tests compare with.

    reference = torch_transformer(config)         # a TransformerConfig: Figure 2 in PyTorch
    reference.load_state_dict({name: torch.from_numpy(a) for name, a in torch_state(model).items()})

- `torch_transformer`: √d · embeddings + positions (a buffer `P` for the sinusoidal table, or
  parameters `src_P`, `tgt_P` when learned), `torch.nn.Transformer` (its final norms replaced
  by Identity in post-norm, where the thesis's stacks have none), and the projection (none when
  tied: the target embedding transposed);
- `torch_decoder_only`: √d · embedding + positions (`positions`), `torch.nn.TransformerEncoder`
  with a causal mask, the final LayerNorm in pre-norm, the head (tied, or a Linear with bias).

Both take `scale_embeddings`, pre- or post-norm, ReLU, GELU or GELU's tanh form, and
sinusoidal or learned positions; relative positions, the attention variants of chapter 2 and
SwiGLU have no `torch.nn` counterpart here. torch's LayerNorm is √(σ² + ε): the thesis's
σ + ε (norm_variant="thesis") differs from it by about ε/2σ² relative. PyTorch is imported when
a function is called; nothing else in the library needs it.
"""
import math

from numpy_transformer.config import check_model_kind
from numpy_transformer.positional import sinusoidal_encoding

TORCH_ACTIVATIONS = ("relu", "gelu", "gelu_tanh")


def check_exportable(config):
    """A ValueError naming the options of `config` that have no torch.nn counterpart here."""
    problems = []
    if config.positional == "relative":
        problems.append("positional='relative'")
    if config.activation not in TORCH_ACTIVATIONS:
        problems.append(f"activation={config.activation!r}")
    attentions = {config.attention, config.decoder_self_attention}
    problems += [f"attention={kind!r}" for kind in sorted(attentions - {"full"})]
    if config.memory_slots:
        problems.append(f"memory_slots={config.memory_slots}")
    if problems:
        raise ValueError(f"no PyTorch counterpart for {', '.join(problems)}: the reference models of "
                         f"numpy_transformer/interop/torch_reference.py take full attention without memory slots, ReLU or GELU, "
                         f"and sinusoidal or learned positions")


def _torch_and_options(name, config, kind, dtype):
    """(torch, the keyword arguments of every layer) once `config` is checked to be of `kind` and
    to have a PyTorch counterpart; torch is imported here, never by the library at import time."""
    import torch

    check_model_kind(name, config, kind)
    check_exportable(config)
    return torch, dict(dtype=dtype or getattr(torch, config.dtype))


def torch_transformer(config, dtype=None):
    """The encoder-decoder of `config` (a TransformerConfig of that kind) as a torch.nn.Module."""
    torch, options = _torch_and_options("torch_transformer", config, "encoder-decoder", dtype)

    class Reference(torch.nn.Module):
        def __init__(self):
            super().__init__()
            d = config.d_model
            self.scale, self.pad_id = math.sqrt(d) if config.scale_embeddings else 1.0, config.pad_id
            self.src_embedding = torch.nn.Embedding(config.src_vocab_size, d, **options)
            self.tgt_embedding = self.src_embedding if config.share_source_embedding else \
                torch.nn.Embedding(config.tgt_vocab_size, d, **options)
            self.transformer = torch.nn.Transformer(
                d, config.n_heads, config.n_encoder_layers, config.n_decoder_layers, config.d_ff,
                dropout=config.dropout, activation=_activation(torch, config.activation),
                layer_norm_eps=config.norm_eps, batch_first=True, norm_first=config.norm_placement == "pre", **options)
            if config.norm_placement == "post":
                self.transformer.encoder.norm = torch.nn.Identity()
                self.transformer.decoder.norm = torch.nn.Identity()
            self.projection = None if config.tie_embeddings else \
                torch.nn.Linear(d, config.tgt_vocab_size, bias=False, **options)
            if config.positional == "learned":
                self.src_P = torch.nn.Parameter(torch.zeros(config.max_len, d, **options))
                self.tgt_P = torch.nn.Parameter(torch.zeros(config.max_len, d, **options))
            else:
                table = torch.from_numpy(sinusoidal_encoding(config.max_len, d, config.positional_base))
                self.register_buffer("P", table.to(options["dtype"]), persistent=False)   # fixed: not saved
            self.dropout = torch.nn.Dropout(config.dropout)

        def forward(self, src, tgt):
            src_P, tgt_P = (self.src_P, self.tgt_P) if config.positional == "learned" else (self.P, self.P)
            x = self.dropout(self.src_embedding(src) * self.scale + src_P[:src.shape[1]])
            y = self.dropout(self.tgt_embedding(tgt) * self.scale + tgt_P[:tgt.shape[1]])
            future = torch.ones(tgt.shape[1], tgt.shape[1], dtype=torch.bool).triu(1)   # True: may not attend
            src_padding, tgt_padding = src == self.pad_id, tgt == self.pad_id
            out = self.transformer(x, y, tgt_mask=future, src_key_padding_mask=src_padding,
                                   tgt_key_padding_mask=tgt_padding, memory_key_padding_mask=src_padding,
                                   tgt_is_causal=True)
            return out @ self.tgt_embedding.weight.T if self.projection is None else self.projection(out)

    return Reference()


def torch_decoder_only(config, dtype=None):
    """The decoder-only model of `config` (a TransformerConfig of that kind) as a torch.nn.Module."""
    torch, options = _torch_and_options("torch_decoder_only", config, "decoder-only", dtype)

    class Reference(torch.nn.Module):
        def __init__(self):
            super().__init__()
            d = config.d_model
            self.scale, self.pad_id = math.sqrt(d) if config.scale_embeddings else 1.0, config.pad_id
            self.embedding = torch.nn.Embedding(config.vocab_size, d, **options)
            if config.positional == "learned":
                self.positions = torch.nn.Parameter(torch.randn(config.max_len, d, **options) * math.sqrt(0.5))
            else:
                table = torch.from_numpy(sinusoidal_encoding(config.max_len, d, config.positional_base))
                self.register_buffer("positions", table.to(options["dtype"]), persistent=False)
            layer = torch.nn.TransformerEncoderLayer(d, config.n_heads, config.d_ff, dropout=config.dropout,
                                                     activation=_activation(torch, config.activation),
                                                     layer_norm_eps=config.norm_eps, batch_first=True,
                                                     norm_first=config.norm_placement == "pre", **options)
            final_norm = torch.nn.LayerNorm(d, config.norm_eps, **options) if config.norm_placement == "pre" else None
            self.stack = torch.nn.TransformerEncoder(layer, config.n_layers, norm=final_norm, enable_nested_tensor=False)
            self.head = None if config.tie_embeddings else torch.nn.Linear(d, config.vocab_size, **options)
            self.dropout = torch.nn.Dropout(config.dropout)

        def forward(self, ids):
            n = ids.shape[1]
            x = self.dropout(self.embedding(ids) * self.scale + self.positions[:n])
            future = torch.ones(n, n, dtype=torch.bool).triu(1)                           # True: may not attend
            padding = None if self.pad_id is None else ids == self.pad_id
            h = self.stack(x, mask=future, src_key_padding_mask=padding, is_causal=True)
            return h @ self.embedding.weight.T if self.head is None else self.head(h)

    return Reference()


def _activation(torch, name):
    if name == "gelu_tanh":
        return lambda x: torch.nn.functional.gelu(x, approximate="tanh")
    return name
