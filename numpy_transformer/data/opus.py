"""The real corpus of the thesis's experiments (§3.1): `Helsinki-NLP/opus_books` through
`datasets`, English→Italian by default (config `en-it`: 32,332 pairs of sentences from
copyright-free books, one `train` split, rows {"id", "translation": {"en", "it"}}).

The corpus has no validation or test split: `load_opus_books` makes a seeded 90/5/5 one, after
an optional subset (the first N pairs, or N at random). Other language pairs of the corpus are
chosen by name ("de-en", "fr-it", …); the order says the direction ("it-en" translates Italian
into English from the `en-it` config).

Network: `hub.load_hub_dataset`, the cached copy first, and `DataUnavailableError` at once
(saying how to go on) when there is none and the Hub cannot be reached.
"""
import re

from numpy_transformer.data.corpus import SPLIT_FRACTIONS, Pair, make_splits
from numpy_transformer.data.hub import load_hub_dataset

OPUS_BOOKS = "Helsinki-NLP/opus_books"
# The configurations of opus_books (16 languages, the bitexts of its loading script).
OPUS_BOOKS_PAIRS = tuple("""
ca-de ca-en ca-hu ca-nl de-en de-eo de-es de-fr de-hu de-it de-nl de-pt de-ru el-en el-es el-fr el-hu
en-eo en-es en-fi en-fr en-hu en-it en-nl en-no en-pl en-pt en-ru en-sv eo-es eo-fr eo-hu eo-it eo-pt
es-fi es-fr es-hu es-it es-nl es-no es-pt es-ru fi-fr fi-no fi-pl fr-hu fr-it fr-nl fr-no fr-pl fr-pt
fr-ru fr-sv hu-it hu-nl hu-no hu-pl hu-pt hu-ru it-nl it-pt it-ru it-sv
""".split())
PAIR_FORM = re.compile(r"^([a-z]{2})-([a-z]{2})$")

def parse_pair(pair):
    """'en-it' → ('en', 'it'): source and target language codes (two lowercase letters each)."""
    match = PAIR_FORM.match(pair) if isinstance(pair, str) else None
    if not match or match.group(1) == match.group(2):
        raise ValueError(f"pair must look like 'en-it' (source-target, two-letter language codes), got {pair!r}")
    return match.group(1), match.group(2)


def opus_books_config(source, target):
    """The corpus configuration holding the two languages (in either order)."""
    for config in (f"{source}-{target}", f"{target}-{source}"):
        if config in OPUS_BOOKS_PAIRS:
            return config
    with_source = [config for config in OPUS_BOOKS_PAIRS if source in config.split("-")]
    raise ValueError(
        f"opus_books has no {source}-{target} pair. Pairs with {source!r}: {', '.join(with_source) or 'none'}. "
        f"All {len(OPUS_BOOKS_PAIRS)}: {' '.join(OPUS_BOOKS_PAIRS)} (either order works; the list is at "
        f"https://huggingface.co/datasets/{OPUS_BOOKS}, or from datasets.get_dataset_config_names({OPUS_BOOKS!r}))")


def load_opus_books(pair="en-it", subset=None, subset_mode="first", seed=0, cache_dir=None,
                    fractions=SPLIT_FRACTIONS):
    """opus_books for a language pair, split into train, validation and test (a `DataSplits`).

    subset: keep N pairs before splitting, the first N (subset_mode="first") or N drawn at
    random with the seed ("random"). cache_dir: where `datasets` keeps its copy (default
    HF_DATASETS_CACHE, ~/.cache/huggingface/datasets).
    Raises DataUnavailableError when the Hub cannot be reached and nothing is cached."""
    source, target = parse_pair(pair)
    config = opus_books_config(source, target)
    table = load_hub_dataset(OPUS_BOOKS, config, cache_dir, split="train", what=f"opus_books {config}",
                             local_hint=pairs_file_hint(source, target))
    return opus_splits(table, pair, subset, subset_mode, seed, fractions)


def pairs_file_hint(source, target):
    """The local-file way on of the unavailable-corpus message, for a pair of languages."""
    return (f"--dataset FILE, a JSON-lines, CSV/TSV or Parquet file with rows "
            f"{{\"id\", \"translation\": {{\"{source}\", \"{target}\"}}}} or two columns {source}, {target} "
            f"(--columns for other names); or --dataset PREFIX, two files PREFIX.{source} and PREFIX.{target} of "
            f"one sentence a line")


def opus_splits(table, pair="en-it", subset=None, subset_mode="first", seed=0, fractions=SPLIT_FRACTIONS):
    """Split a table of the opus_books schema ({"id", "translation": {…}} rows, a
    `datasets.Dataset` or a list of dicts): the part of `load_opus_books` after the download."""
    source, target = parse_pair(pair)
    pairs = [Pair(row[source], row[target]) for row in table["translation"]] if hasattr(table, "column_names") \
        else [Pair(row["translation"][source], row["translation"][target]) for row in table]
    return make_splits(pairs, f"opus_books {pair} ({OPUS_BOOKS}, {len(pairs)} pairs)", subset, subset_mode, seed,
                       fractions, (source, target))
