"""Cross-modal attention (architecture notes, §Applications Beyond NLP and §Cross-Attention
Variants): the translation decoder of thesis §1.2.5 writing about an image.

    Q = text_features                  the decoder's states, (batch, n_tgt, d)
    K = V = image_features             the ViT encoder's patch outputs, (batch, n_patches, d)
    cross_attention = Attention(Q, K, V)

It is the encoder-decoder attention of the Transformer (Q = decoder_hidden_state,
K = V = encoder_output) with the text encoder replaced by the image encoder of
`numpy_transformer.beyond_text.vision`: the patches, each through W_embed, plus learned
positions, through the encoder layers. No [CLS] token: the decoder reads the patches
themselves, so its cross-attention weights say which patches each output token looks at. An
image has no padding, so the memory mask lets every query see every patch.

    config = TransformerConfig(src_vocab_size=1, tgt_vocab_size=len(words), d_model=64, n_heads=4, d_ff=128,
                               n_encoder_layers=2, n_decoder_layers=1, positional="learned", max_len=16)
    model = ImageToText(config, image_size=8, patch_size=2, rng=rng)
    logits = model(images, tgt_ids)                  # (batch, n_tgt, tgt_vocab_size), teacher forcing
    greedy_text(model, images, start_ids, eos_id)    # one list of token ids per image
"""
import numpy as np

from autograd.checks import checked_integer, checked_token_ids
from numpy_transformer.beyond_text.vision import image_encoder
from numpy_transformer.decoding import IncrementalDecoder, _without_eos
from numpy_transformer.inference import inference_mode
from numpy_transformer.initialisation import initialise
from numpy_transformer.model import Decoder, Transformer
from numpy_transformer.nn import Embedding, Linear, Module

__all__ = ["ImageToText", "greedy_text"]


class ImageToText(Transformer):
    """The encoder-decoder Transformer whose source is an image: an image encoder (patches, no
    [CLS]) and the translation `Decoder` with its cross-attention on the patch outputs.

    Everything on the target side is `numpy_transformer.model.Transformer`'s own: `decode`
    (the decoder's key/value cache included), `project`, `target_mask`; only the source side
    differs: `source_mask` and `encode` take images (batch, H, W) or (batch, C, H, W).
    Parameters: encoder.embedding.patch_embedding.W_embed.*, encoder.positional.P,
    encoder.layers.i.*, decoder.*, projection.weight (untied only). The config's
    src_vocab_size and share_source_embedding are not read."""

    def __init__(self, config, image_size, patch_size, rng, channels=1):
        Module.__init__(self)                  # not Transformer.__init__, which builds a text encoder
        self.config = config
        self.encoder = image_encoder(config, image_size, patch_size, channels, rng, class_token=False)
        self.n_patches = self.encoder.embedding.n_patches
        embedding = Embedding(config.tgt_vocab_size, config.d_model, rng, config.scale_embeddings, config.dtype)
        self.decoder = Decoder(config, embedding, rng)
        self.projection = None if config.tie_embeddings else \
            Linear(config.d_model, config.tgt_vocab_size, rng, bias=False, dtype=config.dtype)
        initialise(self, config.init, rng)

    def source_mask(self, images):
        """(batch, 1, 1, n_patches), all True: an image has no padding, every query sees every
        patch (the mask of the encoder's self-attention and of the decoder's cross-attention)."""
        self.encoder.embedding.check(images)
        return np.ones((len(images), 1, 1, self.n_patches), dtype=bool)

    def encode(self, images, src_mask):
        """images → memory Z (batch, n_patches, d): K = V = image_features of the module docstring."""
        return self.encoder(images, src_mask)

    def forward(self, images, tgt_ids):
        """Logits (batch, n_tgt, tgt_vocab_size) of every target position (teacher forcing): the
        causal and target-padding mask on the decoder's self-attention, every patch visible to
        its cross-attention."""
        tgt_ids = self._checked_ids("tgt_ids", tgt_ids, self.config.tgt_vocab_size)
        if len(images) != len(tgt_ids):
            raise ValueError(f"images and tgt_ids must have the same batch size, got shapes "
                             f"{tuple(images.shape)} and {tgt_ids.shape}")
        src_mask = self.source_mask(images)                                    # (batch, 1, 1, n_patches)
        memory = self.encode(images, src_mask)                                 # (batch, n_patches, d)
        return self.project(self.decode(memory, src_mask, tgt_ids, self.target_mask(tgt_ids)))


def greedy_text(model, images, start_ids, eos_id, max_len=8, use_cache=True):
    """ŷ_t = argmax_v p(v | ŷ_<t, image), the decoder fed start_ids[b] first (a language tag,
    or SOS), until every image has produced `eos_id` or `max_len` tokens.

    images: (batch, H, W) or (batch, C, H, W); start_ids: (batch,) token ids. Returns one list
    of token ids per image, without the start token and the EOS. The encoder runs once; with
    `use_cache` each step feeds only the newest token through the decoder's key/value cache
    (`numpy_transformer.decoding.IncrementalDecoder`), without it the whole prefix again (the
    same tokens, slower)."""
    start_ids = checked_token_ids("start_ids", start_ids, model.config.tgt_vocab_size, ndim=1)
    checked_integer("eos_id", eos_id, 0, model.config.tgt_vocab_size - 1)
    max_len = checked_integer("max_len", max_len, 1, model.config.max_len)
    if len(start_ids) != len(images):
        raise ValueError(f"start_ids must hold one token per image, got {len(start_ids)} for {len(images)} images")
    tokens, finished = [start_ids], np.zeros(len(start_ids), dtype=bool)
    with inference_mode(model):
        decoder = IncrementalDecoder(model, images, use_cache)
        while len(tokens) <= max_len and not finished.all():
            tokens.append(decoder.log_probs(tokens[-1]).argmax(axis=-1))          # (batch,)
            finished |= tokens[-1] == eos_id
    return [_without_eos(row, eos_id) for row in np.stack(tokens[1:], axis=1)]
