"""The Vision Transformer (architecture notes, §Applications Beyond NLP, Computer Vision):

    x_patch    = Reshape(image, patch_size)        (batch, C, H, W) → (batch, n_patches, p·p·C)
    x_embedded = x_patch W_embed + pos_embed       (batch, 1 + n_patches, d), [CLS] in front
    output     = Transformer(x_embedded)           the encoder of thesis §1.2.2, unchanged

An image cut into non-overlapping p × p patches is a sequence of n_patches = (H/p)(W/p)
tokens; each flattened patch (p·p·C numbers) goes through one Linear map W_embed, the image's
counterpart of the token embedding Wᴱ. As in Dosovitskiy et al. (2021), a learned [CLS] vector
x_class is put in front of the patches, learned positions are added, the sequence goes through
the project's encoder layers (`numpy_transformer.model.Encoder`, built from a TransformerConfig),
and a Linear head reads the class from the [CLS] output:

    logits = Z[:, 0] W_head + b_head               (batch, n_classes)

    config = TransformerConfig(src_vocab_size=1, tgt_vocab_size=1, pad_id=None, d_model=64, n_heads=4,
                               d_ff=128, n_encoder_layers=2, positional="learned", max_len=17)
    model = VisionTransformer(config, image_size=8, patch_size=2, n_classes=10, rng=rng)
    model(images)                                  # images (batch, 8, 8) → logits (batch, 10)

The vocabulary sizes and the decoder fields of the config are not read: the encoder's tokens
are patches. max_len must hold the 1 + n_patches tokens.
"""
import numpy as np

from autograd import Tensor, concatenate
from autograd.checks import checked_integer
from numpy_transformer.config import TransformerConfig
from numpy_transformer.initialisation import initialise
from numpy_transformer.model import Encoder
from numpy_transformer.nn import Linear, Module, parameter

__all__ = ["image_patches", "patch_grid", "PatchEmbedding", "ImageTokens", "image_encoder", "VisionTransformer"]


def patch_grid(image_size, patch_size):
    """(H/p, W/p): the rows and columns of patches of an `image_size` (H or (H, W)) image, or a
    ValueError when a side is not a multiple of the patch size."""
    height, width = (image_size, image_size) if np.ndim(image_size) == 0 else tuple(image_size)
    patch_size = checked_integer("patch_size", patch_size, low=1)
    for name, side in (("height", height), ("width", width)):
        checked_integer(f"image {name}", side, low=1)
        if side % patch_size:
            raise ValueError(f"image {name} {side} is not divisible by patch_size={patch_size}: the patches "
                             f"are non-overlapping p × p squares that tile the image")
    return height // patch_size, width // patch_size


def image_patches(images, patch_size):
    """Reshape(image, patch_size) of the notes: (batch, H, W) or (batch, C, H, W) →
    (batch, n_patches, p·p·C), n_patches = (H/p)(W/p).

    Patch (r, c) of the grid is row r · W/p + c (row-major, as one reads); its p·p·C numbers
    are its pixels row by row, each pixel's C channels together. `images`: an array or a
    Tensor (its gradient flows back through the reshapes)."""
    images = images if isinstance(images, Tensor) else np.asarray(images)
    if images.ndim not in (3, 4):
        raise ValueError(f"images must have shape (batch, H, W) or (batch, C, H, W), got {tuple(images.shape)}")
    if images.ndim == 3:
        images = images.reshape(images.shape[0], 1, *images.shape[1:])
    batch, channels, height, width = images.shape
    rows, columns = patch_grid((height, width), patch_size)
    p = patch_size
    grid = images.reshape(batch, channels, rows, p, columns, p)       # (b, C, row, y, column, x)
    grid = grid.transpose(0, 2, 4, 3, 5, 1)                            # (b, row, column, y, x, C)
    return grid.reshape(batch, rows * columns, p * p * channels)


class PatchEmbedding(Module):
    """x_patch W_embed + b: the patches of `image_patches`, each through one Linear map,
    (batch, H, W) or (batch, C, H, W) → (batch, n_patches, d_model)."""

    def __init__(self, patch_size, channels, d_model, rng, dtype=np.float32):
        super().__init__()
        self.patch_size = checked_integer("patch_size", patch_size, 1)
        channels = checked_integer("channels", channels, 1)
        self.W_embed = Linear(patch_size * patch_size * channels, d_model, rng, dtype=dtype)

    def forward(self, images):
        return self.W_embed(image_patches(images, self.patch_size))


class ImageTokens(Module):
    """The encoder's input sequence before the positions: [x_class; x_patch W_embed],
    (batch, H, W) or (batch, C, H, W) → (batch, 1 + n_patches, d_model); without
    `class_token`, the patches alone, (batch, n_patches, d_model).

    It stands where the token embedding stands in `numpy_transformer.model.Stack`, which adds
    the positions P[:n] and dropout. Arrays are cast to the parameters' dtype; a Tensor is taken
    as it is (gradient checks)."""

    def __init__(self, config, image_size, patch_size, channels, rng, class_token=True):
        super().__init__()
        self.grid = patch_grid(image_size, patch_size)
        self.image_shape = (channels, self.grid[0] * patch_size, self.grid[1] * patch_size)
        self.n_patches = self.grid[0] * self.grid[1]
        self.patch_embedding = PatchEmbedding(patch_size, channels, config.d_model, rng, config.dtype)
        self.x_class = parameter(rng.standard_normal((1, 1, config.d_model)), config.dtype) if class_token else None

    def forward(self, images):
        if not isinstance(images, Tensor):
            images = np.asarray(images, dtype=self.patch_embedding.W_embed.weight.dtype)
        self.check(images)
        x = self.patch_embedding(images)                                   # (batch, n_patches, d)
        if self.x_class is None:
            return x
        batch, _, d = x.shape
        x_class = self.x_class + np.zeros((batch, 1, d), dtype=x.dtype)    # the same vector for every image
        return concatenate([x_class, x], axis=1)                           # (batch, 1 + n_patches, d)

    def check(self, images):
        """A ValueError unless `images` is (batch, H, W) (one channel) or (batch, C, H, W) of
        the image shape this model was built for."""
        channels, height, width = self.image_shape
        shapes = [(channels, height, width)] + ([(height, width)] if channels == 1 else [])
        if tuple(images.shape[1:]) not in shapes or len(images) == 0:
            expected = " or ".join(f"(batch, {', '.join(map(str, shape))})" for shape in shapes)
            raise ValueError(f"images must have shape {expected}, got {tuple(images.shape)}")


def image_encoder(config, image_size, patch_size, channels, rng, class_token=True):
    """The encoder stack (`numpy_transformer.model.Encoder`) whose embedding is `ImageTokens`:
    x_embedded = [x_class;] x_patch W_embed + pos_embed, then the encoder layers, then (in
    pre-norm) the final LayerNorm. A TypeError/ValueError when the config cannot hold it."""
    if not isinstance(config, TransformerConfig):
        raise TypeError(f"config must be a TransformerConfig, got {type(config).__name__}")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator (np.random.default_rng(seed)), got {type(rng).__name__}")
    tokens = ImageTokens(config, image_size, patch_size, checked_integer("channels", channels, 1), rng, class_token)
    length = tokens.n_patches + (1 if class_token else 0)
    if length > config.max_len:
        raise ValueError(f"config.max_len={config.max_len} is shorter than the {length} tokens of an image "
                         f"({tokens.n_patches} patches{' and [CLS]' if class_token else ''}): raise max_len")
    return Encoder(config, tokens, rng)


class VisionTransformer(Module):
    """ViT (module docstring): images → logits (batch, n_classes) read from the [CLS] output.

    Parameters: encoder.embedding.patch_embedding.W_embed.* (W_embed, b), encoder.embedding.x_class,
    encoder.positional.P (learned), encoder.layers.i.*, encoder.final_norm.* (pre-norm), head.*.
    `last_weights` of encoder.layers[i].self_attn holds (batch, heads, 1 + n, 1 + n) after a call;
    its row 0 is the [CLS] token's attention over [CLS] and the patches."""

    def __init__(self, config, image_size, patch_size, n_classes, rng, channels=1):
        super().__init__()
        self.config = config
        self.encoder = image_encoder(config, image_size, patch_size, channels, rng)
        self.head = Linear(config.d_model, checked_integer("n_classes", n_classes, 2), rng, dtype=config.dtype)
        initialise(self, config.init, rng)

    def encode(self, images):
        """images → Z (batch, 1 + n_patches, d): every token sees every other (an image has no
        padding, so no mask)."""
        return self.encoder(images, None)

    def forward(self, images):
        """Logits (batch, n_classes): W_head applied to the [CLS] output Z[:, 0]."""
        return self.head(self.encode(images)[:, 0])
