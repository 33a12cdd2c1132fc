"""MultiHeadAttention against torch.nn.MultiheadAttention(batch_first=True), float64, with the
weights copied: values, per-head weights, and the gradients of the inputs and every parameter.

Layouts: torch stores a Linear weight as (out, in) and packs W_q, W_k, W_v row-wise into
`in_proj_weight` (3d, d); ours are (in, out) matrices, so W_q = in_proj_weight[:d]ᵀ and so on.
Torch's boolean masks mean the opposite of ours: True there is "may not attend"."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

from autograd import Tensor  # noqa: E402
from numpy_transformer.attention import MultiHeadAttention, scaled_dot_product_attention  # noqa: E402
from numpy_transformer.masks import causal_mask, padding_mask  # noqa: E402

D_MODEL, N_HEADS = 8, 2
TOLERANCE = dict(rtol=1e-8, atol=1e-10)
PAD = 0
TGT_IDS = np.array([[3, 5, 2, 7, 1], [4, 6, 9, PAD, PAD]])
SRC_IDS = np.array([[1, 2, 3, PAD, PAD, PAD], [4, 5, 6, 7, 8, 9]])


def rng(seed=0):
    return np.random.default_rng(seed)


def paired_modules(seed=0):
    """Our module (float64, random biases) and torch's with the same weights."""
    ours = MultiHeadAttention(D_MODEL, N_HEADS, rng(seed)).astype(np.float64)
    for linear in (ours.W_q, ours.W_k, ours.W_v, ours.W_c):
        linear.bias.data = 0.1 * rng(seed + 1).standard_normal(D_MODEL)
    theirs = torch.nn.MultiheadAttention(D_MODEL, N_HEADS, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.from_numpy(
            np.concatenate([ours.W_q.weight.data.T, ours.W_k.weight.data.T, ours.W_v.weight.data.T])))
        theirs.in_proj_bias.copy_(torch.from_numpy(
            np.concatenate([ours.W_q.bias.data, ours.W_k.bias.data, ours.W_v.bias.data])))
        theirs.out_proj.weight.copy_(torch.from_numpy(ours.W_c.weight.data.T))
        theirs.out_proj.bias.copy_(torch.from_numpy(ours.W_c.bias.data))
    return ours, theirs


def torch_parameter_gradients(theirs):
    """torch's gradients in our names and layouts."""
    w, b, d = theirs.in_proj_weight.grad.numpy(), theirs.in_proj_bias.grad.numpy(), D_MODEL
    return {"W_q.weight": w[:d].T, "W_k.weight": w[d:2 * d].T, "W_v.weight": w[2 * d:].T,
            "W_q.bias": b[:d], "W_k.bias": b[d:2 * d], "W_v.bias": b[2 * d:],
            "W_c.weight": theirs.out_proj.weight.grad.numpy().T, "W_c.bias": theirs.out_proj.bias.grad.numpy()}


def compare(query, memory, our_mask, attn_mask, key_padding_mask):
    """Run both modules on the same inputs (memory None: self-attention) and upstream gradient
    and compare the outputs, the per-head weights and every gradient."""
    ours, theirs = paired_modules()
    upstream = rng(9).standard_normal(query.shape)
    arrays = [query] if memory is None else [query, memory]
    our_inputs = [Tensor(a, requires_grad=True) for a in arrays]
    out = ours(*our_inputs, mask=our_mask)
    out.backward(upstream)

    their_inputs = [torch.tensor(a, requires_grad=True) for a in arrays]
    key_value = their_inputs[-1]
    expected, expected_weights = theirs(their_inputs[0], key_value, key_value, attn_mask=attn_mask,
                                        key_padding_mask=key_padding_mask, average_attn_weights=False)
    expected.backward(torch.from_numpy(upstream))

    np.testing.assert_allclose(out.data, expected.detach().numpy(), **TOLERANCE)
    np.testing.assert_allclose(ours.last_weights, expected_weights.detach().numpy(), **TOLERANCE)
    for ours_x, theirs_x in zip(our_inputs, their_inputs):
        np.testing.assert_allclose(ours_x.grad, theirs_x.grad.numpy(), **TOLERANCE)
    expected_grads = torch_parameter_gradients(theirs)
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad, expected_grads[name], err_msg=name, **TOLERANCE)


def test_self_attention_with_causal_and_key_padding_masks_matches_torch():
    x = rng(1).standard_normal((2, 5, D_MODEL))
    mask = padding_mask(TGT_IDS, PAD) & causal_mask(5)
    compare(x, None, mask, attn_mask=torch.from_numpy(~causal_mask(5)),
            key_padding_mask=torch.from_numpy(TGT_IDS == PAD))


def test_self_attention_without_masks_matches_torch():
    x = rng(2).standard_normal((2, 4, D_MODEL))
    compare(x, None, None, attn_mask=None, key_padding_mask=None)


def test_cross_attention_with_a_key_padding_mask_matches_torch():
    x, memory = rng(3).standard_normal((2, 5, D_MODEL)), rng(4).standard_normal((2, 6, D_MODEL))
    compare(x, memory, padding_mask(SRC_IDS, PAD), attn_mask=None,
            key_padding_mask=torch.from_numpy(SRC_IDS == PAD))


def test_scaled_dot_product_attention_matches_torch_with_a_mask():
    q, k, v = (rng(s).standard_normal((2, 3, 4, 5)) for s in (5, 6, 7))
    mask = causal_mask(4)
    out, _ = scaled_dot_product_attention(Tensor(q), Tensor(k), Tensor(v), mask)
    expected = torch.nn.functional.scaled_dot_product_attention(
        *(torch.from_numpy(a) for a in (q, k, v)), attn_mask=torch.from_numpy(mask))
    np.testing.assert_allclose(out.data, expected.numpy(), **TOLERANCE)
