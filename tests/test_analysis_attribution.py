"""Attention rollout and attention × gradient (numpy_transformer/analysis/attribution.py)."""
import numpy as np
import pytest

import autograd.functional as F
from analysis_helpers import PAIRS, tiny_model, tokenizers
from numpy_transformer.analysis.attribution import (attention_gradient_attribution, attention_rollout,
                                                    capture_rollout, rollout_step)
from numpy_transformer.analysis.capture import capture_sentence
from numpy_transformer.analysis.hooks import weights_hooks
from numpy_transformer.inference import inference_mode

SRC_TOKENIZER, TGT_TOKENIZER = tokenizers()


def test_rollout_rows_sum_to_one():
    rng = np.random.default_rng(0)
    layers = [rng.dirichlet(np.ones(7), size=(3, 7)) for _ in range(4)]
    rollout = attention_rollout(layers)
    assert rollout.shape == (7, 7) and rollout.sum(axis=1) == pytest.approx(np.ones(7)) and rollout.min() >= 0


def test_rollout_of_one_layer_mixes_the_head_average_with_the_residual():
    A = np.array([[[0.0, 1.0], [1.0, 0.0]], [[0.0, 1.0], [0.0, 1.0]]])      # two heads
    assert rollout_step(A) == pytest.approx(np.array([[0.5, 0.5], [0.25, 0.75]]))   # ½ [[0, 1], [½, ½]] + ½ I


def test_rollout_multiplies_the_layers_from_the_top_down():
    A1, A2 = np.array([[1.0, 0.0], [1.0, 0.0]]), np.array([[0.0, 1.0], [0.0, 1.0]])
    assert attention_rollout([A1, A2]) == pytest.approx(rollout_step(A2) @ rollout_step(A1))
    assert attention_rollout([A1, A2]) == pytest.approx(np.array([[0.75, 0.25], [0.5, 0.5]]))


def test_identity_attention_rolls_out_to_the_identity():
    assert attention_rollout([np.eye(4)[None]] * 3) == pytest.approx(np.eye(4))


def test_rollout_of_a_capture_follows_the_encoder_or_the_decoder():
    model = tiny_model(SRC_TOKENIZER, TGT_TOKENIZER)
    capture = capture_sentence(model, SRC_TOKENIZER, TGT_TOKENIZER, PAIRS[1].src, PAIRS[1].tgt)
    encoder, decoder = capture_rollout(capture, "encoder"), capture_rollout(capture, "decoder")
    assert encoder.shape == (len(capture.src_tokens),) * 2 and decoder.shape == (len(capture.tgt_tokens),) * 2
    assert np.all(np.triu(decoder, 1) == 0)                       # the decoder's flow stays causal
    with pytest.raises(ValueError, match="square"):
        rollout_step(capture.weights["decoder.0.cross_attn"])


def pair_ids(pair):
    x, y = SRC_TOKENIZER.encode(pair.src), TGT_TOKENIZER.encode(pair.tgt)
    return ([SRC_TOKENIZER.sos_id, *x, SRC_TOKENIZER.eos_id], [TGT_TOKENIZER.sos_id, *y], [*y, TGT_TOKENIZER.eos_id])


@pytest.mark.numerics
def test_attention_times_gradient_is_the_weights_times_the_losss_sensitivity_to_them():
    model = tiny_model(SRC_TOKENIZER, TGT_TOKENIZER, dtype="float64")
    src, tgt_in, tgt_out = pair_ids(PAIRS[2])
    attribution = attention_gradient_attribution(model, src, tgt_in, tgt_out)
    assert attribution["decoder.1.cross_attn"].shape == (2, len(tgt_in), len(src)) and len(attribution) == 6
    name, index, h = "encoder.1.self_attn", (1, 2, 3), 1e-6

    def loss_with(delta):
        def nudge(weights):
            moved = weights.data.copy()
            moved[(0, *index)] += delta
            return type(weights)(moved)
        with inference_mode(model), weights_hooks(model, lambda n: nudge if n == name else None):
            return F.cross_entropy(model(np.array([src]), np.array([tgt_in])), np.array([tgt_out])).item()

    A = capture_sentence(model, SRC_TOKENIZER, TGT_TOKENIZER, PAIRS[2].src, PAIRS[2].tgt).weights[name][index]
    derivative = (loss_with(h) - loss_with(-h)) / (2 * h)
    # the difference quotient carries the two losses' rounding over 2h: it missed by 1.4e-6
    # relatively under OpenBLAS's SkylakeX and Sandybridge kernels, 4.8e-6 under Haswell's (Intel
    # Xeon); rel 5e-5 leaves a margin of 10
    assert attribution[name][index] == pytest.approx(A * abs(derivative), rel=5e-5)


def test_attention_times_gradient_leaves_the_model_as_it_was():
    model = tiny_model(SRC_TOKENIZER, TGT_TOKENIZER)
    before = {name: p.data.copy() for name, p in model.named_parameters()}
    attention_gradient_attribution(model, *pair_ids(PAIRS[3]))
    assert model.training and all(p.grad is None for p in model.parameters())
    assert all(np.array_equal(before[name], p.data) for name, p in model.named_parameters())
    assert all(module.attend.weights_hook is None for module in
               [layer.self_attn for layer in model.encoder.layers])
