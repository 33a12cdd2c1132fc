"""The decoder-only Transformer against torch.nn.TransformerEncoder with a causal mask in float64
(a GPT block is an encoder layer with the causal mask), and the encoder-only model's stack
against the same without it: outputs and the gradient of every parameter, with torch's weights
copied into ours (layouts as in tests/test_torch_model.py)."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

from numpy_transformer.config import TransformerConfig  # noqa: E402
from numpy_transformer.language_model import DecoderOnlyTransformer, EncoderOnlyTransformer  # noqa: E402
from test_torch_model import gradient, layer_arrays, norm_arrays, sinusoids, values  # noqa: E402

PAD = 0
IDS = np.array([[3, 4, 5, 6, 7, 8], [9, 2, 3, 4, PAD, PAD]])


class Reference(torch.nn.Module):
    """√d · embedding + positions, torch.nn.TransformerEncoder with a causal mask, tied head."""

    def __init__(self, config):
        super().__init__()
        d, options = config.d_model, dict(dtype=torch.float64)
        self.scale, self.pad_id = math.sqrt(d), config.pad_id
        self.embedding = torch.nn.Embedding(config.vocab_size, d, **options)
        layer = torch.nn.TransformerEncoderLayer(d, config.n_heads, config.d_ff, dropout=0.0,
                                                 activation=config.activation, layer_norm_eps=config.norm_eps,
                                                 batch_first=True, norm_first=config.norm_placement == "pre",
                                                 **options)
        final_norm = torch.nn.LayerNorm(d, eps=config.norm_eps, **options) if config.norm_placement == "pre" else None
        self.stack = torch.nn.TransformerEncoder(layer, config.n_layers, norm=final_norm, enable_nested_tensor=False)
        self.register_buffer("P", sinusoids(config.max_len, d))

    def forward(self, ids, causal=True):
        """The tied logits (causal), or the stack's output h (bidirectional)."""
        x = self.embedding(ids) * self.scale + self.P[:ids.shape[1]]
        if not causal:
            return self.stack(x, src_key_padding_mask=ids == self.pad_id)
        future = torch.triu(torch.ones(ids.shape[1], ids.shape[1], dtype=torch.bool), diagonal=1)
        h = self.stack(x, mask=future, src_key_padding_mask=ids == self.pad_id, is_causal=True)
        return h @ self.embedding.weight.T


def in_our_layout(reference, read):
    arrays = {"stack.embedding.weight": read(reference.embedding.weight)}
    for i, layer in enumerate(reference.stack.layers):
        arrays.update(layer_arrays(f"stack.layers.{i}", layer, read))
    if reference.stack.norm is not None:
        arrays.update(norm_arrays("stack.final_norm", reference.stack.norm, read))
    return arrays


def paired_models(model_class, placement, causal):
    build = TransformerConfig.decoder_only if causal else TransformerConfig.encoder_only
    config = build(vocab_size=13, d_model=8, n_heads=2, d_ff=12, n_layers=2, dropout=0.0, max_len=16,
                   positional="sinusoidal", norm_placement=placement, pad_id=PAD, dtype="float64")
    torch.manual_seed(0)
    reference = Reference(config)
    with torch.no_grad():
        for p in reference.parameters():
            p.add_(0.1 * torch.randn_like(p))
    ours = model_class(config, np.random.default_rng(0))
    ours.load_state_dict({**dict(ours.state_dict()), **in_our_layout(reference, values)})
    return ours, reference


@pytest.mark.parametrize("placement", ["pre", "post"])
def test_logits_and_every_parameter_gradient_match_a_causal_torch_encoder(placement):
    ours, reference = paired_models(DecoderOnlyTransformer, placement, causal=True)
    upstream = np.random.default_rng(1).standard_normal((2, 6, 13))
    upstream[1, 4:] = 0                                      # padded positions: torch's outputs there are undefined
    logits = ours(IDS)
    logits.backward(upstream)
    expected = reference(torch.from_numpy(IDS))
    expected.backward(torch.from_numpy(upstream))
    np.testing.assert_allclose(logits.data[0], values(expected)[0], rtol=0, atol=1e-8)
    np.testing.assert_allclose(logits.data[1, :4], values(expected)[1, :4], rtol=0, atol=1e-8)
    expected_gradients = in_our_layout(reference, gradient)
    assert sorted(name for name, _ in ours.named_parameters()) == sorted(expected_gradients)
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad, expected_gradients[name], rtol=0, atol=1e-8, err_msg=name)


@pytest.mark.parametrize("placement", ["pre", "post"])
def test_the_encoder_only_stack_matches_a_torch_encoder(placement):
    ours, reference = paired_models(EncoderOnlyTransformer, placement, causal=False)
    upstream = np.random.default_rng(1).standard_normal((2, 6, 8))
    upstream[1, 4:] = 0
    h = ours.encode(IDS)
    h.backward(upstream)
    expected = reference(torch.from_numpy(IDS), causal=False)
    expected.backward(torch.from_numpy(upstream))
    np.testing.assert_allclose(h.data[0], values(expected)[0], rtol=0, atol=1e-8)
    np.testing.assert_allclose(h.data[1, :4], values(expected)[1, :4], rtol=0, atol=1e-8)
    expected_gradients = in_our_layout(reference, gradient)
    for name, p in ours.named_parameters():
        if name.startswith("stack."):
            np.testing.assert_allclose(p.grad, expected_gradients[name], rtol=0, atol=1e-8, err_msg=name)
