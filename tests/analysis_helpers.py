"""A tiny model and tokenizers on a few built-in pairs, for the analysis tests (untrained:
the analysis reads the weights, it does not need them to be good)."""
import numpy as np

from numpy_transformer.config import TransformerConfig
from numpy_transformer.data import WordTokenizer, builtin_corpus
from numpy_transformer.model import Transformer

PAIRS = builtin_corpus(60, seed=3)


def tokenizers():
    return (WordTokenizer.train((p.src for p in PAIRS), "en", min_frequency=1),
            WordTokenizer.train((p.tgt for p in PAIRS), "it", min_frequency=1))


def tiny_model(src_tokenizer, tgt_tokenizer, seed=0, **overrides):
    config = TransformerConfig(**{**dict(src_vocab_size=src_tokenizer.vocab_size,
                                         tgt_vocab_size=tgt_tokenizer.vocab_size, d_model=16, n_heads=2, d_ff=24,
                                         n_encoder_layers=2, n_decoder_layers=2, dropout=0.1, max_len=32,
                                         pad_id=src_tokenizer.pad_id), **overrides})
    return Transformer(config, np.random.default_rng(seed))
