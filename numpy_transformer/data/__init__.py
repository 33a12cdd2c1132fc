"""Data: the corpora, word-level tokenizers, and batches (thesis §3.1).

One call gives the training code its data, whatever the source:

    splits = load_dataset_splits("builtin")              # the default: no network needed
    splits = load_dataset_splits("opus_books", pair="en-it", subset=2000)
    splits = load_dataset_splits("my_pairs.jsonl")       # a local file
    print(splits.source)                                 # which data this is; print it everywhere
    src_tokenizer, tgt_tokenizer = train_tokenizers(splits)
    encoded = encode_pairs(splits.train, src_tokenizer, tgt_tokenizer, max_len=64)
    for batch in batches(encoded, batch_size=32, rng=np.random.default_rng(0)):
        batch.src, batch.tgt_in, batch.tgt_out, batch.n_tokens

    texts = load_text_splits("builtin", language="it")   # a language model's texts (one side)

| module        | what it holds                                                            |
|---------------|--------------------------------------------------------------------------|
| `corpus`      | `Pair`, `DataSplits`, the seeded 90/5/5 split and the subset             |
| `builtin`     | the built-in synthetic corpus, with word alignments                      |
| `grammar`     | the grammar that writes it (`lexicon`, `english`, `italian`: its words)  |
| `hub`         | Hub datasets, cached copy first; `DataUnavailableError` when offline     |
| `opus`        | opus_books through `datasets`                                            |
| `files`       | local JSON-lines, CSV/TSV and Parquet files                              |
| `texts`       | monolingual texts for the language models: sources, framing, policies   |
| `tokenizer`   | `WordTokenizer`: WordLevel + Whitespace, [UNK] [PAD] [SOS] [EOS]         |
| `detokenize`  | `l ' uomo .` → `l'uomo.` before BLEU                                     |
| `batching`    | padded batches of similar lengths, the maximum-length policy             |
"""
from pathlib import Path

from numpy_transformer.data.batching import Batch, EncodedPairs, batches, encode_pairs, padding_fraction
from numpy_transformer.data.builtin import (DEFAULT_N_PAIRS, SYNTHETIC_NOTICE, builtin_corpus,
                                            builtin_splits)
from numpy_transformer.data.corpus import SPLIT_FRACTIONS, DataSplits, Pair
from numpy_transformer.data.detokenize import detokenize
from numpy_transformer.data.files import file_splits, is_data_file
from numpy_transformer.data.hub import DataUnavailableError
from numpy_transformer.data.opus import load_opus_books, parse_pair
from numpy_transformer.data.texts import TextSplits, hub_text_splits, side_of, text_file_splits, TEXT_FILE_SUFFIX
from numpy_transformer.data.tokenizer import (WordTokenizer, load_tokenizers, save_tokenizers,
                                              train_text_tokenizer, train_tokenizers)

DATASET_NAMES = ("builtin", "opus_books")
OPUS_NAMES = ("opus_books", "Helsinki-NLP/opus_books")


def load_dataset_splits(name="builtin", pair="en-it", subset=None, subset_mode="first", seed=0,
                        n_pairs=DEFAULT_N_PAIRS, cache_dir=None, fractions=SPLIT_FRACTIONS):
    """Train, validation and test pairs (a `DataSplits`, with its `source` line) from:

    - "builtin": the built-in synthetic corpus of `n_pairs` pairs (English→Italian only);
    - "opus_books" (or "Helsinki-NLP/opus_books"): the real corpus for `pair`;
    - a path to a .jsonl/.json, .csv, .tsv or .parquet file of pairs.

    The same seed generates (built-in), subsets and splits the same way; `subset` keeps the
    first N pairs (subset_mode="first") or N at random ("random") before the 90/5/5 split."""
    languages = parse_pair(pair)
    if name == "builtin":
        if languages != ("en", "it"):
            raise ValueError(f"the built-in corpus is English→Italian only (pair 'en-it'), got pair {pair!r}")
        return builtin_splits(n_pairs, seed, subset, subset_mode, fractions)
    if name in OPUS_NAMES:
        return load_opus_books(pair, subset, subset_mode, seed, cache_dir, fractions)
    if is_data_file(name) or Path(str(name)).is_file():
        return file_splits(name, languages, subset, subset_mode, seed, fractions, cache_dir)
    raise ValueError(f"unknown dataset {name!r}: use {' or '.join(map(repr, DATASET_NAMES))}, or the path of a "
                     f".jsonl, .json, .csv, .tsv or .parquet file")


def load_text_splits(name="builtin", language=None, pair="en-it", subset=None, subset_mode="first", seed=0,
                     n_pairs=DEFAULT_N_PAIRS, cache_dir=None, dataset_config=None, fractions=SPLIT_FRACTIONS):
    """Train, validation and test texts for a language model (a `TextSplits`) from:

    - "builtin", "opus_books" or a file of pairs: the `language` side of the pairs (by default
      the pair's source language), split as `load_dataset_splits` splits them;
    - a .txt file: one text per line (`language` labels it, "en" by default);
    - any other name: a Hugging Face dataset with a "text" column (`dataset_config` names its
      configuration), its own validation and test splits where it has them."""
    if name in ("builtin", *OPUS_NAMES) or is_data_file(name):
        splits = load_dataset_splits(name, pair, subset, subset_mode, seed, n_pairs, cache_dir, fractions)
        return side_of(splits, language or splits.src_language)
    if Path(str(name)).suffix.lower() == TEXT_FILE_SUFFIX or Path(str(name)).is_file():
        return text_file_splits(name, language or "en", subset, subset_mode, seed, fractions)
    return hub_text_splits(name, dataset_config, language or "en", subset, subset_mode, seed, fractions, cache_dir)
