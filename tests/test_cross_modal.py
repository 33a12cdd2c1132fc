"""Cross-modal attention (numpy_transformer.beyond_text.cross_modal): the translation decoder
with K = V = the ViT encoder's patch outputs. Gradients in float64, the memory and its mask,
greedy decoding with the key/value cache against recomputing the prefix, a short training run."""
import dataclasses

import numpy as np
import pytest

import autograd.functional as F
from autograd import Tensor, gradcheck
from autograd.optim import Adam
from numpy_transformer.beyond_text.cross_modal import ImageToText, greedy_text
from numpy_transformer.config import TransformerConfig
from numpy_transformer.decoding import IncrementalDecoder
from numpy_transformer.inference import inference_mode

VOCAB, PAD, EOS = 7, 0, 1
CONFIG = TransformerConfig(1, VOCAB, d_model=8, n_heads=2, d_ff=16, n_encoder_layers=1, n_decoder_layers=1,
                           dropout=0.0, positional="learned", max_len=8, norm_placement="pre", dtype="float64")


def image_to_text(config=CONFIG, seed=0):
    """A float64 model over 4 × 6 images in 2 × 2 patches: a memory of 6 patches."""
    return ImageToText(config, (4, 6), 2, np.random.default_rng(seed))


def images(*shape, seed=1):
    return np.random.default_rng(seed).standard_normal(shape)


TGT = np.array([[2, 3, 4], [5, 6, 0]])                                  # the second ends with padding


# --- gradients, float64 -----------------------------------------------------------------------

@pytest.mark.parametrize("placement", ["pre", "post"])
def test_image_to_text_gradients_for_the_image_and_every_parameter(placement):
    model = image_to_text(dataclasses.replace(CONFIG, norm_placement=placement))
    x = Tensor(images(2, 4, 6), requires_grad=True)
    assert gradcheck(lambda x, *params: model(x, TGT), x, *model.parameters(), mode="projection")


# --- the memory: K = V = the patch outputs ----------------------------------------------------

def test_the_memory_is_one_vector_per_patch_and_its_mask_hides_none():
    model, x = image_to_text(), images(2, 4, 6)
    mask = model.source_mask(x)
    assert mask.shape == (2, 1, 1, 6) and mask.dtype == bool and mask.all()
    assert model.encode(x, mask).shape == (2, 6, 8)                                   # no [CLS]
    model(x, TGT)
    weights = model.decoder.layers[0].cross_attn.last_weights                         # (2, heads, 3, 6)
    assert weights.shape == (2, 2, 3, 6) and (weights > 0).all()                      # every patch seen
    np.testing.assert_allclose(weights.sum(axis=-1), 1, rtol=1e-12)


def test_every_output_token_reads_every_patch():
    model = image_to_text()
    x = Tensor(images(1, 4, 6), requires_grad=True)
    model(x, TGT[:1])[:, 0].sum().backward()                                          # the first token only
    per_patch = np.abs(x.grad.reshape(1, 2, 2, 3, 2).swapaxes(2, 3)).sum(axis=(-1, -2))
    assert (per_patch > 1e-8).all(), per_patch


def test_future_and_padded_target_tokens_do_not_change_earlier_logits():
    model, x = image_to_text(), images(2, 4, 6)
    changed = TGT.copy()
    changed[:, 2] = [6, 3]
    np.testing.assert_allclose(model(x, TGT).data[:, :2], model(x, changed).data[:, :2], rtol=1e-12, atol=1e-12)


def test_bad_inputs_raise_one_clear_error():
    model = image_to_text()
    with pytest.raises(ValueError, match=r"images must have shape \(batch, 1, 4, 6\) or \(batch, 4, 6\), got \(2, 6, 4\)"):
        model(images(2, 6, 4), TGT)
    with pytest.raises(ValueError, match=r"images and tgt_ids must have the same batch size"):
        model(images(3, 4, 6), TGT)
    with pytest.raises(ValueError, match=r"start_ids must hold one token per image, got 1 for 2 images"):
        greedy_text(model, images(2, 4, 6), [2], EOS)
    with pytest.raises(ValueError, match=r"max_len"):
        greedy_text(model, images(2, 4, 6), [2, 3], EOS, max_len=9)


# --- greedy decoding --------------------------------------------------------------------------

def test_the_cache_gives_the_log_probabilities_of_recomputing_the_prefix():
    model, x = image_to_text(), images(3, 4, 6)
    fed = np.array([[2, 5, 3, 6], [4, 4, 2, 1], [3, 6, 5, 2]])
    with inference_mode(model):
        cached, recomputed = IncrementalDecoder(model, x, use_cache=True), IncrementalDecoder(model, x, use_cache=False)
        for t in range(fed.shape[1]):
            np.testing.assert_allclose(cached.log_probs(fed[:, t]), recomputed.log_probs(fed[:, t]), rtol=1e-10,
                                       atol=1e-12)


def test_greedy_text_takes_the_most_probable_token_at_every_step():
    model, x, start = image_to_text(seed=2), images(4, 4, 6), np.array([2, 3, 4, 5])     # outputs of 1 to 4 tokens
    outputs = greedy_text(model, x, start, EOS, max_len=5)
    assert outputs == greedy_text(model, x, start, EOS, max_len=5, use_cache=False)
    for image, first, output in zip(x, start, outputs):
        prefix = [int(first)]
        for token in output + ([EOS] if len(output) < 5 else []):     # a shorter output ended with EOS
            with inference_mode(model):
                log_p = F.log_softmax(model(image[None], np.array([prefix])), axis=-1).data[0, -1]
            log_p[PAD] = -np.inf                                        # never generated
            assert token == int(log_p.argmax())
            prefix.append(token)
    assert EOS not in sum(outputs, []) and PAD not in sum(outputs, [])


def test_a_short_training_run_teaches_the_decoder_to_name_real_digits():
    from sklearn.datasets import load_digits

    digits = load_digits()
    x, labels = (digits.images[:48] / 16).astype(np.float32), digits.target[:48]
    config = dataclasses.replace(CONFIG, tgt_vocab_size=12, d_model=16, d_ff=32, max_len=16, dtype="float32")
    model = ImageToText(config, 8, 2, np.random.default_rng(0))
    tgt_in = np.stack([np.full(48, 1), labels + 2], axis=1)                 # [<start>, word]
    tgt_out = np.stack([labels + 2, np.full(48, EOS)], axis=1)               # [word, <eos>]
    optimizer = Adam(model.named_parameters(), lr=1e-2)
    losses = []
    for _ in range(40):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x, tgt_in), tgt_out)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.data))
    assert losses[-1] < 0.5 * losses[0], losses
    outputs = greedy_text(model, x, np.full(48, 1), EOS, max_len=3)
    assert np.mean([output == [label + 2] for output, label in zip(outputs, labels)]) > 0.5
