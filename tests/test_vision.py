"""The Vision Transformer (numpy_transformer.beyond_text.vision): the notes' Reshape(image, p)
in row-major patch order, its gradients in float64, and what the encoder may and may not see."""
import dataclasses

import numpy as np
import pytest

import autograd.functional as F
from autograd import Tensor, gradcheck
from autograd.optim import Adam
from numpy_transformer.beyond_text.vision import PatchEmbedding, VisionTransformer, image_patches
from numpy_transformer.config import TransformerConfig

CONFIG = TransformerConfig(1, 1, pad_id=None, d_model=8, n_heads=2, d_ff=16, n_encoder_layers=1, n_decoder_layers=1,
                           dropout=0.0, positional="learned", max_len=7, norm_placement="pre", dtype="float64")


def vit(config=CONFIG, image_size=(4, 6), channels=1, seed=0):
    """A float64 ViT of 2 × 2 patches over 4 × 6 images: 6 patches and [CLS]."""
    return VisionTransformer(config, image_size, 2, n_classes=3, rng=np.random.default_rng(seed), channels=channels)


def images(*shape, seed=1):
    return np.random.default_rng(seed).standard_normal(shape)


def assemble(patches, image_shape, p):
    """The inverse of Reshape(image, p), written out patch by patch: (b, n, p·p·C) → (b, C, H, W)."""
    batch, (channels, height, width) = len(patches), image_shape
    out = np.zeros((batch, channels, height, width))
    for index in range(patches.shape[1]):
        row, column = divmod(index, width // p)                                   # row-major
        block = patches[:, index].reshape(batch, p, p, channels).transpose(0, 3, 1, 2)
        out[:, :, row * p:(row + 1) * p, column * p:(column + 1) * p] = block
    return out


# --- Reshape(image, patch_size) ---------------------------------------------------------------

def test_patches_reassemble_to_the_image_exactly_in_row_major_order():
    x = images(2, 3, 4, 6)
    patches = image_patches(x, 2)
    assert patches.shape == (2, 6, 2 * 2 * 3)
    np.testing.assert_array_equal(assemble(patches, (3, 4, 6), 2), x)
    # patch 1 is the second patch of the top row (not the first of the second row)
    np.testing.assert_array_equal(patches[:, 1].reshape(2, 2, 2, 3), x[:, :, 0:2, 2:4].transpose(0, 2, 3, 1))


def test_a_grey_image_is_an_image_of_one_channel():
    x = images(2, 4, 6)
    np.testing.assert_array_equal(image_patches(x, 2), image_patches(x[:, None], 2))
    assert image_patches(x, 1).shape == (2, 24, 1) and image_patches(x, 2).shape == (2, 6, 4)


def test_patching_keeps_the_dtype_and_passes_tensors():
    assert image_patches(images(1, 4, 4).astype(np.float32), 2).dtype == np.float32
    assert isinstance(image_patches(Tensor(images(1, 4, 4)), 2), Tensor)


@pytest.mark.parametrize("x, patch_size, message", [
    (images(2, 5, 6), 2, r"image height 5 is not divisible by patch_size=2"),
    (images(2, 4, 6), 4, r"image width 6 is not divisible by patch_size=4"),
    (images(4, 6), 2, r"images must have shape \(batch, H, W\) or \(batch, C, H, W\), got \(4, 6\)"),
    (images(1, 1, 1, 4, 6), 2, r"got \(1, 1, 1, 4, 6\)"),
    (images(2, 4, 6), 0, r"patch_size"),
])
def test_bad_images_or_patch_sizes_raise_one_clear_error(x, patch_size, message):
    with pytest.raises(ValueError, match=message):
        image_patches(x, patch_size)


def test_the_model_names_the_image_shape_it_was_built_for():
    model = vit()
    for x in (images(2, 4, 4), images(2, 2, 4, 6), images(4, 6)):
        with pytest.raises(ValueError, match=r"images must have shape \(batch, 1, 4, 6\) or \(batch, 4, 6\)"):
            model(x)
    with pytest.raises(ValueError, match=r"max_len=5 is shorter than the 7 tokens of an image \(6 patches and \[CLS\]\)"):
        vit(dataclasses.replace(CONFIG, max_len=5))
    with pytest.raises(ValueError, match=r"image width 5 is not divisible"):
        vit(image_size=(4, 5))
    with pytest.raises(TypeError, match="config must be a TransformerConfig"):
        VisionTransformer(dict(d_model=8), 4, 2, 3, np.random.default_rng(0))


# --- gradients, float64 -----------------------------------------------------------------------

def test_patch_embedding_gradients_for_the_image_and_W_embed():
    embedding = PatchEmbedding(2, 3, 5, np.random.default_rng(0), dtype=np.float64)
    x = Tensor(images(2, 3, 4, 6), requires_grad=True)
    assert gradcheck(lambda x, *params: embedding(x), x, *embedding.parameters(), mode="jacobian")


@pytest.mark.parametrize("placement", ["pre", "post"])
def test_whole_vit_gradients_for_the_image_and_every_parameter(placement):
    model = vit(dataclasses.replace(CONFIG, norm_placement=placement), channels=2)
    x = Tensor(images(2, 2, 4, 6), requires_grad=True)
    assert gradcheck(lambda x, *params: model(x), x, *model.parameters(), mode="projection")


# --- what the encoder sees --------------------------------------------------------------------

def test_the_class_token_output_depends_on_every_patch():
    model = vit()
    x = Tensor(images(1, 4, 6), requires_grad=True)
    model(x).sum().backward()
    per_patch = np.abs(image_patches(x.grad, 2)).sum(axis=-1)                       # (1, 6)
    assert (per_patch > 1e-8).all(), per_patch


def test_permuting_patches_changes_the_output_only_through_the_positions():
    model, x = vit(), images(2, 4, 6)
    permutation = np.array([4, 0, 5, 2, 1, 3])
    shuffled = assemble(image_patches(x, 2)[:, permutation], (1, 4, 6), 2)[:, 0]
    assert not np.allclose(model(x).data, model(shuffled).data)                       # the positions see it
    model.encoder.positional.P.data[:] = 0                                            # without them, a set of patches
    np.testing.assert_allclose(model(x).data, model(shuffled).data, rtol=1e-12, atol=1e-12)


def test_an_image_is_read_alone_whatever_else_is_in_the_batch():
    model, x = vit(), images(3, 4, 6)
    np.testing.assert_allclose(model(x).data[:1], model(x[:1]).data, rtol=1e-12, atol=1e-12)
    assert model.encoder.layers[0].self_attn.last_weights.shape == (1, 2, 7, 7)        # no padding, no mask


def test_float32_images_and_model_stay_float32():
    model = vit(dataclasses.replace(CONFIG, dtype="float32"))
    assert model(images(2, 4, 6)).dtype == np.float32                                 # float64 arrays are cast


def test_a_few_steps_of_adam_reduce_the_loss_on_real_digits():
    from sklearn.datasets import load_digits

    digits = load_digits()
    x, y = (digits.images[:64] / 16).astype(np.float32), digits.target[:64]
    config = dataclasses.replace(CONFIG, d_model=16, n_heads=2, d_ff=32, max_len=17, dtype="float32")
    model = VisionTransformer(config, 8, 2, n_classes=10, rng=np.random.default_rng(0))
    optimizer = Adam(model.named_parameters(), lr=3e-3)
    losses = []
    for _ in range(40):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.data))
    assert losses[-1] < 0.6 * losses[0], losses
