"""Data: the corpora, word-level tokenizers, and batches (thesis §3.1).

One call gives the training code its data, whatever the source:

    splits = load_dataset_splits("tatoeba")              # real sentences in the package: no network needed
    splits = load_dataset_splits("builtin")              # the synthetic grammar, with word alignments
    splits = load_dataset_splits("opus_books", pair="en-it", subset=2000)
    splits = load_dataset_splits("my_pairs.jsonl")       # a local file, split 90/5/5
    splits = load_dataset_splits("data/corpus", pair="en-de")  # data/corpus.en + data/corpus.de, a sentence a line
    splits = load_dataset_splits("pairs.tsv", pair="en-de", columns="en,de")  # a TSV file without a header
    splits = load_dataset_splits("train.jsonl", pair="en-de", validation_file="val.jsonl")  # official splits
    splits = load_dataset_splits("bentrevett/multi30k", pair="en-de")  # a Hub dataset and its splits
    print(splits.source)                                 # which data this is; print it everywhere
    src_tokenizer, tgt_tokenizer = train_tokenizers(splits)
    encoded = encode_pairs(splits.train, src_tokenizer, tgt_tokenizer, max_len=64)
    for batch in batches(encoded, batch_size=32, rng=np.random.default_rng(0)):
        batch.src, batch.tgt_in, batch.tgt_out, batch.n_tokens

    texts = load_text_splits("builtin", language="it")   # a language model's texts (one side)

| module        | what it holds                                                            |
|---------------|--------------------------------------------------------------------------|
| `corpus`      | `Pair`, `DataSplits`, the seeded 90/5/5 split and the subset             |
| `tatoeba`     | real English–Italian in the package: Tatoeba, CC-BY 2.0 FR (`tatoeba-full`: all of it) |
| `builtin`     | the built-in synthetic corpus, with word alignments                      |
| `grammar`     | the grammar that writes it (`lexicon`, `english`, `italian`: its words)  |
| `hub`         | Hub datasets, cached copy first; `DataUnavailableError` when offline     |
| `opus`        | opus_books through `datasets`                                            |
| `files`       | local JSON-lines, CSV/TSV and Parquet files; `--columns` for other names |
| `moses`       | parallel text files: corpus.en + corpus.it, one sentence a line          |
| `utf8`        | text files read as UTF-8, line by line                                   |
| `official`    | corpora with their own splits: separate files, a folder, a Hub dataset   |
| `texts`       | monolingual texts for the language models: sources, framing, policies   |
| `tokenizer`   | `WordTokenizer`: WordLevel + Whitespace, [UNK] [PAD] [SOS] [EOS]         |
| `detokenize`  | `l ' uomo .` → `l'uomo.` before BLEU                                     |
| `batching`    | padded batches of similar lengths, the maximum-length policy             |
"""
from numpy_transformer.data.batching import Batch, EncodedPairs, batches, encode_pairs, padding_fraction
from numpy_transformer.data.builtin import (DEFAULT_N_PAIRS, SYNTHETIC_NOTICE, builtin_corpus,
                                            builtin_splits)
from numpy_transformer.data.corpus import SPLIT_FRACTIONS, DataSplits, Pair
from numpy_transformer.data.detokenize import detokenize
from numpy_transformer.data.files import FORMATS, file_splits, hub_pairs
from numpy_transformer.data.hub import DataUnavailableError
from numpy_transformer.data.official import hub_splits, split_files
from numpy_transformer.data.opus import load_opus_books, pairs_file_hint, parse_pair
from numpy_transformer.data.tatoeba import FULL_NAMES as TATOEBA_FULL_NAMES, NAMES as TATOEBA_NAMES, tatoeba_splits
from numpy_transformer.data.texts import TextSplits, hub_text_splits, side_of, text_file_splits, TEXT_FILE_SUFFIX
from numpy_transformer.data.tokenizer import (WordTokenizer, load_tokenizers, save_tokenizers,
                                              train_text_tokenizer, train_tokenizers)

DATASET_NAMES = ("tatoeba", "tatoeba-full", "builtin", "opus_books")
OPUS_NAMES = ("opus_books", "Helsinki-NLP/opus_books")
CORPUS_NAMES = ("builtin", *TATOEBA_NAMES, *TATOEBA_FULL_NAMES, *OPUS_NAMES)      # the corpora known by name


def load_dataset_splits(name="builtin", pair="en-it", subset=None, subset_mode="first", seed=0,
                        n_pairs=DEFAULT_N_PAIRS, cache_dir=None, fractions=SPLIT_FRACTIONS, dataset_config=None,
                        validation_file=None, test_file=None, columns=None):
    """Train, validation and test pairs (a `DataSplits`, with its `source` line) from:

    - "tatoeba": real English–Italian sentences in the package (`tatoeba.py`; pair en-it or it-en);
      "tatoeba-full": the same with every training pair (344,949 rather than 60,000);
    - "builtin": the built-in synthetic corpus of `n_pairs` pairs (English→Italian only);
    - "opus_books" (or "Helsinki-NLP/opus_books"): the real corpus for `pair`;
    - a path to a .jsonl/.json, .csv, .tsv or .parquet file of pairs, or the prefix P of two
      parallel text files P.en and P.it (one sentence a line, `moses.py`), with the separate
      `validation_file` and `test_file` of its official splits if it has them (files or
      prefixes); or a folder of such files named train, validation (val, valid, dev) and test;
    - any other name: a Hugging Face dataset with a `translation` column or one column per
      language (`dataset_config` names its configuration), with its own splits.

    columns: how a table's columns map to the languages, for a CSV/TSV file without a header
    ("en,it": its columns in order) or columns named otherwise ("english=en,italian=it");
    `files.parse_columns`.

    The same seed generates (built-in), subsets and splits the same way; `subset` keeps the
    first N training pairs (subset_mode="first") or N at random ("random"). A corpus without
    its own validation or test split has it carved from training: 90/5/5."""
    languages = parse_pair(pair)
    files = split_files(name, FORMATS, validation_file, test_file, languages)
    if files is not None:
        return file_splits(name, languages, subset, subset_mode, seed, fractions, cache_dir, validation_file, test_file,
                           columns)
    if columns is not None and name in CORPUS_NAMES:
        raise ValueError(f"--columns maps the columns of a file of pairs (or a Hub dataset); the corpus {name!r} "
                         f"is read as it is: leave --columns out")
    if name == "builtin":
        if languages != ("en", "it"):
            raise ValueError(f"the built-in corpus is English→Italian only (pair 'en-it'), got pair {pair!r}")
        return builtin_splits(n_pairs, seed, subset, subset_mode, fractions)
    if name in TATOEBA_NAMES or name in TATOEBA_FULL_NAMES:
        return tatoeba_splits(pair, subset, subset_mode, seed, full=name in TATOEBA_FULL_NAMES)
    if name in OPUS_NAMES:
        return load_opus_books(pair, subset, subset_mode, seed, cache_dir, fractions)
    parts, source = hub_splits(name, dataset_config, lambda table, where: hub_pairs(table, languages, where, columns),
                               "pairs", cache_dir, pairs_file_hint(*languages), seed, fractions, subset, subset_mode)
    return DataSplits(*parts.values(), source, *languages)


def load_text_splits(name="builtin", language=None, pair="en-it", subset=None, subset_mode="first", seed=0,
                     n_pairs=DEFAULT_N_PAIRS, cache_dir=None, dataset_config=None, fractions=SPLIT_FRACTIONS,
                     validation_file=None, test_file=None, columns=None):
    """Train, validation and test texts for a language model (a `TextSplits`) from:

    - "tatoeba", "builtin", "opus_books", or a file (or files, or a folder) of pairs, parallel
      text files among them (and the `columns` of a table): the `language` side of the pairs
      (by default the pair's source language), split as `load_dataset_splits` splits them;
    - a .txt file: one text per line (`language` labels it, by default the pair's source), with
      separate validation and test .txt files if it has them; or a folder of such files;
    - any other name: a Hugging Face dataset with a "text" column (`dataset_config` names its
      configuration), its own validation and test splits where it has them."""
    language = language or parse_pair(pair)[0]
    files = split_files(name, (*FORMATS, TEXT_FILE_SUFFIX), validation_file, test_file, parse_pair(pair))
    text_files = files is not None and files["train"].suffix.lower() == TEXT_FILE_SUFFIX
    if columns is not None and (text_files or files is None and name not in CORPUS_NAMES):
        raise ValueError(f"--columns maps the columns of a file of pairs; {name} holds texts (a text a line, or a "
                         f"'text' column): leave --columns out")
    if text_files:
        return text_file_splits(name, language, subset, subset_mode, seed, fractions, validation_file, test_file)
    if files is not None or name in CORPUS_NAMES:
        splits = load_dataset_splits(name, pair, subset, subset_mode, seed, n_pairs, cache_dir, fractions,
                                     validation_file=validation_file, test_file=test_file, columns=columns)
        return side_of(splits, language)
    return hub_text_splits(name, dataset_config, language, subset, subset_mode, seed, fractions, cache_dir)
