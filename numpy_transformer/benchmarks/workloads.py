"""The configurations `bench train-step` and `bench decode` measure, and their batches.

| name    | what                          | layers | d_model, heads, d_ff | batch × tokens | vocabularies  |
|---------|-------------------------------|--------|----------------------|----------------|---------------|
| thesis  | the thesis's experiment, §3.1 | 1 + 1  | 512, 8, 2048         | 8 × 32         | 8,000 / 8,000 |
| default | the default model, grammar's  | 1 + 1  | 128, 4, 512          | 64 × 16        | 735 / 1,242   |
| base    | Vaswani et al. (2017), tied   | 6 + 6  | 512, 8, 2048         | 8 × 32         | 8,000 / 8,000 |
| tiny    | a seconds-long smoke run      | 1 + 1  | 16, 2, 32            | 4 × 8          | 50 / 60       |
| gpt-default | the lm preset's decoder-only model | 2 | 128, 4, 512        | 64 × 16        | 745           |
| gpt-small   | a GPT of the thesis's width        | 6 | 512, 8, 2048       | 8 × 64         | 8,000         |
| gpt-tiny    | a seconds-long decoder-only run    | 1 | 16, 2, 32          | 4 × 8          | 60            |

The decoder-only (GPT) rows are `DecoderOnlyTransformer`s of the `lm` preset's kind (pre-norm,
GELU, learned positions, tied head) reading the batch's target side: `tgt_in` → `tgt_out`.

The `default` workload is the default preset's model with the vocabularies the built-in corpus
gives its word-level tokenizers: the `grammar` preset's run, the default run until it moved to
the packaged Tatoeba corpus, whose one shared unigram vocabulary has 8,000 pieces. 16 tokens is
about the longest sentence of its batches (the mean is 8).

Dropout 0.1, label smoothing 0.1 and Adam's betas (0.9, 0.98) and eps 1e-9 are the thesis's.
"""
import dataclasses
import math

import numpy as np

PAD_ID, SOS_ID, EOS_ID = 0, 1, 2
DROPOUT, LABEL_SMOOTHING, LR, BETAS, EPS = 0.1, 0.1, 1e-4, (0.9, 0.98), 1e-9


@dataclasses.dataclass(frozen=True)
class BenchConfig:
    """A model (TransformerConfig fields; those of TransformerConfig.decoder_only when
    `decoder_only`) and a batch of `batch` pairs of `length` tokens (a decoder-only model reads
    the target side)."""
    name: str
    description: str
    model: dict
    batch: int
    length: int
    src_vocab: int
    tgt_vocab: int
    decoder_only: bool = False

    def model_config(self):
        """The TransformerConfig: decoder-only (over the target vocabulary) when `decoder_only`,
        else encoder-decoder."""
        from numpy_transformer.config import TransformerConfig
        if self.decoder_only:
            return TransformerConfig.decoder_only(self.tgt_vocab, dropout=DROPOUT, pad_id=PAD_ID,
                                                  max_len=max(64, self.length), **self.model)
        return TransformerConfig(self.src_vocab, self.tgt_vocab, dropout=DROPOUT, pad_id=PAD_ID, **self.model)


ONE_LAYER = dict(n_encoder_layers=1, n_decoder_layers=1)
CONFIGS = {config.name: config for config in (
    BenchConfig("thesis", "the thesis's experiment (§3.1): d_model 512, 8 heads, d_ff 2048, 1 + 1 layers",
                dict(d_model=512, n_heads=8, d_ff=2048, **ONE_LAYER), batch=8, length=32,
                src_vocab=8000, tgt_vocab=8000),
    BenchConfig("default", "the default preset's model (d_model 128, 4 heads, d_ff 512, 1 + 1 layers) with the "
                           "grammar preset's word-level vocabularies",
                dict(d_model=128, n_heads=4, d_ff=512, **ONE_LAYER), batch=64, length=16,
                src_vocab=735, tgt_vocab=1242),
    BenchConfig("base", "the base model of Vaswani et al. (2017): 6 + 6 layers, d_model 512, tied target embedding",
                dict(d_model=512, n_heads=8, d_ff=2048, n_encoder_layers=6, n_decoder_layers=6,
                     tie_embeddings=True), batch=8, length=32, src_vocab=8000, tgt_vocab=8000),
    BenchConfig("tiny", "a seconds-long smoke run: d_model 16, 2 heads, d_ff 32, 1 + 1 layers",
                dict(d_model=16, n_heads=2, d_ff=32, **ONE_LAYER), batch=4, length=8, src_vocab=50, tgt_vocab=60),
    BenchConfig("gpt-default", "the lm preset's decoder-only model: d_model 128, 4 heads, d_ff 512, 2 layers",
                dict(d_model=128, n_heads=4, d_ff=512, n_layers=2), batch=64, length=16, src_vocab=745, tgt_vocab=745,
                decoder_only=True),
    BenchConfig("gpt-small", "a decoder-only model of the thesis's width: d_model 512, 8 heads, d_ff 2048, 6 layers",
                dict(d_model=512, n_heads=8, d_ff=2048, n_layers=6), batch=8, length=64, src_vocab=8000,
                tgt_vocab=8000, decoder_only=True),
    BenchConfig("gpt-tiny", "a seconds-long decoder-only run: d_model 16, 2 heads, d_ff 32, 1 layer",
                dict(d_model=16, n_heads=2, d_ff=32, n_layers=1), batch=4, length=8, src_vocab=60, tgt_vocab=60,
                decoder_only=True),
)}
MAIN_CONFIGS = ("thesis", "default", "base", "gpt-default", "gpt-small")
DECODE_CONFIGS = ("thesis", "default")   # base decodes for minutes without the cache: ask for it by name
CONFIG_NAMES = tuple(CONFIGS)
ENCODER_DECODER_NAMES = tuple(name for name, config in CONFIGS.items() if not config.decoder_only)


def make_batch(config, seed=0, batch=None):
    """A padded batch like the training loop's, of config.batch pairs (or `batch`): random ids,
    row lengths in [¾ length, length], the first row full, targets = the decoder input shifted
    by one, ending in EOS."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(math.ceil(0.75 * config.length), config.length + 1, size=batch or config.batch)
    lengths[0] = config.length
    columns = np.arange(config.length)
    real = columns < lengths[:, None]
    src = np.where(real, rng.integers(3, config.src_vocab, real.shape), PAD_ID)
    words = rng.integers(3, config.tgt_vocab, real.shape)
    tgt_in = np.where(real, np.where(columns == 0, SOS_ID, words), PAD_ID)
    tgt_out = np.where(real, np.where(columns == lengths[:, None] - 1, EOS_ID, np.roll(words, -1, axis=1)), PAD_ID)
    from numpy_transformer.data.batching import Batch

    return Batch(src, tgt_in, tgt_out, int((tgt_out != PAD_ID).sum()), np.arange(len(src)))
