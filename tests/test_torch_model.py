"""The whole Transformer against torch.nn.Transformer(batch_first=True) in float64: logits and
the gradient of every parameter, with torch's weights copied into ours.

torch.nn.Transformer is only the stack of Figure 2 between the embeddings and the projection,
so the reference adds what the thesis puts around it: the token embeddings scaled by √d_model
(§1.2), the sinusoidal positions of eq. (1) (written here again in torch), and the
projection Y · P (§1.2.5; bias-free, or the target embedding transposed when tied).

Two of torch's choices are matched on our side, one on theirs:
  - torch's LayerNorm divides by √(σ² + ε) with ε = 1e-5: our config uses
    norm_variant="torch" and norm_eps=1e-5 (the thesis's eq. (2), σ + ε, is another function);
  - dropout is 0 in both;
  - torch.nn.Transformer always ends its encoder and decoder with a LayerNorm (`encoder.norm`,
    `decoder.norm`). The thesis's post-norm stacks have none, their last layer already ends
    with one, so for post-norm the reference replaces those two norms with Identity; for
    pre-norm they are kept and correspond to our `encoder.final_norm` and `decoder.final_norm`.

Layouts: torch stores a Linear weight as (out, in) and packs W_q, W_k, W_v row-wise into
`in_proj_weight`; ours are (in, out), so W_q = in_proj_weight[:d]ᵀ. Torch's boolean masks mean
"may not attend" where ours mean "may attend".
"""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

from numpy_transformer.config import TransformerConfig  # noqa: E402
from numpy_transformer.model import Transformer  # noqa: E402

PAD = 0
SRC = np.array([[3, 4, 5, 6, 7, 8], [9, 2, 3, 4, PAD, PAD]])
TGT = np.array([[1, 5, 6, 7, 8], [1, 2, 9, PAD, PAD]])
TOLERANCE = dict(rtol=0, atol=1e-8)


def config(**overrides):
    return TransformerConfig(**{**dict(src_vocab_size=11, tgt_vocab_size=13, d_model=8, n_heads=2, d_ff=12,
                                       n_encoder_layers=2, n_decoder_layers=2, dropout=0.0, max_len=16,
                                       norm_variant="torch", norm_eps=1e-5, dtype="float64"), **overrides})


def sinusoids(max_len, d_model, base=10000.0):
    """Eq. (1) as the PyTorch tutorials write it: ω_k = exp(−2k log N / d)."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    omega = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(base) / d_model))
    P = torch.zeros(max_len, d_model, dtype=torch.float64)
    P[:, 0::2], P[:, 1::2] = torch.sin(position * omega), torch.cos(position * omega)
    return P


class Reference(torch.nn.Module):
    """Embeddings × √d + positions, torch.nn.Transformer, projection: Figure 2 in torch."""

    def __init__(self, config):
        super().__init__()
        d, options = config.d_model, dict(dtype=torch.float64)
        self.scale, self.pad_id = math.sqrt(d), config.pad_id
        self.src_embedding = torch.nn.Embedding(config.src_vocab_size, d, **options)
        self.tgt_embedding = self.src_embedding if config.share_source_embedding else \
            torch.nn.Embedding(config.tgt_vocab_size, d, **options)
        self.transformer = torch.nn.Transformer(
            d, config.n_heads, config.n_encoder_layers, config.n_decoder_layers, config.d_ff, dropout=0.0,
            activation=config.activation, layer_norm_eps=config.norm_eps, batch_first=True,
            norm_first=config.norm_placement == "pre", **options)
        if config.norm_placement == "post":
            self.transformer.encoder.norm = torch.nn.Identity()
            self.transformer.decoder.norm = torch.nn.Identity()
        self.projection = None if config.tie_embeddings else \
            torch.nn.Linear(d, config.tgt_vocab_size, bias=False, **options)
        self.register_buffer("P", sinusoids(config.max_len, d))

    def forward(self, src, tgt):
        x = self.src_embedding(src) * self.scale + self.P[:src.shape[1]]
        y = self.tgt_embedding(tgt) * self.scale + self.P[:tgt.shape[1]]
        future = torch.triu(torch.ones(tgt.shape[1], tgt.shape[1], dtype=torch.bool), diagonal=1)
        src_padding, tgt_padding = src == self.pad_id, tgt == self.pad_id
        out = self.transformer(x, y, tgt_mask=future, src_key_padding_mask=src_padding,
                               tgt_key_padding_mask=tgt_padding, memory_key_padding_mask=src_padding)
        return out @ self.tgt_embedding.weight.T if self.projection is None else self.projection(out)


def attention_arrays(name, attention, read):
    w, b, d = read(attention.in_proj_weight), read(attention.in_proj_bias), attention.embed_dim
    arrays = {}
    for i, matrix in enumerate(("W_q", "W_k", "W_v")):
        rows = slice(i * d, (i + 1) * d)
        arrays[f"{name}.{matrix}.weight"], arrays[f"{name}.{matrix}.bias"] = w[rows].T, b[rows]
    return {**arrays, **linear_arrays(f"{name}.W_c", attention.out_proj, read)}


def linear_arrays(name, linear, read):
    return {f"{name}.weight": read(linear.weight).T, f"{name}.bias": read(linear.bias)}


def norm_arrays(name, norm, read):
    return {f"{name}.gamma": read(norm.weight), f"{name}.beta": read(norm.bias)}


def layer_arrays(name, layer, read):
    """One torch encoder or decoder layer's parameters under our names, in our layouts."""
    arrays = attention_arrays(f"{name}.self_attn", layer.self_attn, read)
    if hasattr(layer, "multihead_attn"):
        arrays.update(attention_arrays(f"{name}.cross_attn", layer.multihead_attn, read))
    arrays.update(linear_arrays(f"{name}.feed_forward.W_1", layer.linear1, read))
    arrays.update(linear_arrays(f"{name}.feed_forward.W_2", layer.linear2, read))
    norms = (layer.norm1, layer.norm2, layer.norm3) if hasattr(layer, "norm3") else (layer.norm1, layer.norm2)
    for i, norm in enumerate(norms, start=1):
        arrays.update(norm_arrays(f"{name}.norm_{i}", norm, read))
    return arrays


def in_our_layout(reference, read):
    """{our parameter name: array} for every parameter of the reference; `read` takes a torch
    parameter to an array (its values or its gradient)."""
    arrays = {"encoder.embedding.weight": read(reference.src_embedding.weight)}
    if reference.tgt_embedding is not reference.src_embedding:
        arrays["decoder.embedding.weight"] = read(reference.tgt_embedding.weight)
    for stack in ("encoder", "decoder"):
        torch_stack = getattr(reference.transformer, stack)
        for i, layer in enumerate(torch_stack.layers):
            arrays.update(layer_arrays(f"{stack}.layers.{i}", layer, read))
        if isinstance(torch_stack.norm, torch.nn.LayerNorm):
            arrays.update(norm_arrays(f"{stack}.final_norm", torch_stack.norm, read))
    if reference.projection is not None:
        arrays["projection.weight"] = read(reference.projection.weight).T
    return arrays


def values(p):
    return p.detach().numpy()


def gradient(p):
    return p.grad.numpy()


def paired_models(config, seed=0):
    """The reference with every parameter moved off its initial value (so that zero biases and
    unit γ cannot hide a mistake), and our model holding the same weights."""
    torch.manual_seed(seed)
    reference = Reference(config)
    with torch.no_grad():
        for p in reference.parameters():
            p.add_(0.1 * torch.randn_like(p))
    ours = Transformer(config, np.random.default_rng(seed))
    ours.load_state_dict(in_our_layout(reference, values))
    return ours, reference


def logits_and_gradients(ours, reference, upstream):
    """Both models' logits and parameter gradients (ours by name, theirs in our layout) for
    the loss ⟨upstream, logits⟩."""
    our_logits = ours(SRC, TGT)
    our_logits.backward(upstream)
    their_logits = reference(torch.from_numpy(SRC), torch.from_numpy(TGT))
    their_logits.backward(torch.from_numpy(upstream))
    our_gradients = {name: p.grad for name, p in ours.named_parameters()}
    return our_logits.data, values(their_logits), our_gradients, in_our_layout(reference, gradient)


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")  # torch's note on its pre-norm fast path
@pytest.mark.parametrize("options", [
    dict(),
    dict(norm_placement="pre", activation="gelu", tie_embeddings=True, share_source_embedding=True,
         src_vocab_size=13),
], ids=["post-relu", "pre-gelu-tied"])
def test_logits_and_every_parameter_gradient_match_torch_nn_transformer(options):
    ours, reference = paired_models(config(**options))
    upstream = np.random.default_rng(1).standard_normal((2, 5, 13))
    logits, expected_logits, gradients, expected_gradients = logits_and_gradients(ours, reference, upstream)
    np.testing.assert_allclose(logits, expected_logits, **TOLERANCE)
    assert sorted(gradients) == sorted(expected_gradients)
    for name, grad in gradients.items():
        np.testing.assert_allclose(grad, expected_gradients[name], **TOLERANCE, err_msg=name)


def test_without_removing_torch_final_norms_post_norm_would_differ():
    """The final encoder/decoder LayerNorms of torch.nn.Transformer are not in the thesis's
    post-norm model: keeping them changes the logits (so the Identity above is needed)."""
    ours, reference = paired_models(config())
    reference.transformer.encoder.norm = torch.nn.LayerNorm(8, eps=1e-5, dtype=torch.float64)
    reference.transformer.decoder.norm = torch.nn.LayerNorm(8, eps=1e-5, dtype=torch.float64)
    with torch.no_grad():
        their_logits = values(reference(torch.from_numpy(SRC), torch.from_numpy(TGT)))
    assert np.abs(ours(SRC, TGT).data - their_logits).max() > 1e-3
