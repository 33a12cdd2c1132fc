"""Real English–Italian sentences that ship with the package: Tatoeba (tatoeba.org), CC-BY 2.0 FR.

    splits = load_dataset_splits("tatoeba")                 # offline; the default data of train
    splits = load_dataset_splits("tatoeba", pair="it-en")   # Italian into English
    splits = load_dataset_splits("tatoeba-full")            # every pair: the translator preset's data

Short, everyday sentences (five or six words on average, the register of a phrase book) with
all the Italian translations the Tatoeba project has for them:

| split      | where it comes from                                   | size                           |
|------------|-------------------------------------------------------|--------------------------------|
| train      | `corpora/tatoeba-en-it/train.jsonl.gz`, less the test | 60,000 pairs before the carve  |
| validation | `corpora/tatoeba-en-it/validation.jsonl.gz`           | 2,303 pairs, 1,000 sources     |
| test       | carved from train by source sentence (seeded)         | 1,000 sources, all their pairs |

`tatoeba-full` is the same corpus with every training pair of the export's split: the rows of
`train.jsonl.gz`, then those of `train-more.jsonl.xz` (344,949 pairs in all before the test is
carved, 148,088 sources); the same validation file, and its own test split carved the same way.

A source sentence repeats once per translation. The held-out splits are made by source, so no
English sentence of the validation or test split occurs in training, and evaluation scores one
hypothesis per source against all its translations. A subset smaller than 20,000 sources gives
5 % of its sources to the test split. `scripts/build_tatoeba.py` wrote the two files; the
folder's README.md holds the attribution every output that uses the corpus points to.
"""
import gzip
import json
import lzma
from pathlib import Path

from numpy_transformer.data.corpus import DataSplits, Pair, complete_splits, describe_splits, source_key, subset_indices

NAMES = ("tatoeba", "tatoeba-en-it")
FULL_NAMES = ("tatoeba-full",)
LANGUAGES = ("en", "it")
CORPUS_FOLDER = Path(__file__).parent / "corpora" / "tatoeba-en-it"
MORE_FILE = "train-more.jsonl.xz"      # the training pairs after train.jsonl.gz's, for tatoeba-full
ATTRIBUTION = "Tatoeba (tatoeba.org), CC-BY 2.0 FR"
TEST_SOURCES = 1000
MAX_TEST_FRACTION = 0.05


def tatoeba_splits(pair="en-it", subset=None, subset_mode="first", seed=0, full=False):
    """The packaged Tatoeba corpus as a `DataSplits` for pair "en-it" or "it-en" (see the module
    docstring); full: with every training pair (`tatoeba-full`), not the first 60,000. subset: keep
    the first (or, subset_mode="random", a seeded random) N training pairs before the test split
    is carved from them; the seed also chooses the test sources."""
    languages = tuple(pair.split("-")) if isinstance(pair, str) else None
    if languages not in (LANGUAGES, LANGUAGES[::-1]):
        raise ValueError(f"the Tatoeba corpus of the package is English–Italian: pair 'en-it' or 'it-en', got {pair!r}")
    rows = {split: read_rows(CORPUS_FOLDER / f"{split}.jsonl.gz") for split in ("train", "validation")}
    if full:
        rows["train"] += read_rows(CORPUS_FOLDER / MORE_FILE, compression="xz")
    given = {split: [Pair(*texts) if languages == LANGUAGES else Pair(*texts[::-1]) for texts in split_rows]
             for split, split_rows in rows.items()}
    kept = {source_key(given["train"][i].src) for i in subset_indices(len(given["train"]), subset, subset_mode, seed)}
    share = min(MAX_TEST_FRACTION, TEST_SOURCES / len(kept))
    parts = complete_splits(given, seed, (1 - 2 * share, share, share), subset, subset_mode)
    origins = {"train": "its own", "validation": "its own", "test": "carved from train by source"}
    what = (f"Tatoeba English–Italian{', every pair' if full else ''}, real sentences ({ATTRIBUTION}; "
            f"numpy_transformer/data/corpora/tatoeba-en-it/README.md)")
    return DataSplits(*parts.values(), describe_splits(what, origins, parts, "pairs", subset, subset_mode),
                      *languages)


def read_rows(path, gzip_compressed=True, compression=None):
    """The (English, Italian) texts of a JSON-lines file in the opus_books schema, in file order
    (gzip-compressed, or compression="xz", or plain with gzip_compressed=False); a ValueError
    naming the file, the line and what is wrong with it."""
    opener = lzma.open if compression == "xz" else gzip.open if gzip_compressed else open
    with opener(path, "rt", encoding="utf-8") as file:
        return [_texts(path, number, line) for number, line in enumerate(file, start=1)]


def _texts(path, number, line):
    try:
        row = json.loads(line)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: line {number} is not JSON ({error.msg}); rebuild the corpus with "
                         f"scripts/build_tatoeba.py") from None
    texts = tuple(row.get("translation", {}).get(language) if isinstance(row, dict) and
                  isinstance(row.get("translation"), dict) else None for language in LANGUAGES)
    if not all(isinstance(text, str) and text.strip() for text in texts):
        raise ValueError(f"{path}: line {number} lacks a 'translation' with English and Italian text; rebuild the "
                         f"corpus with scripts/build_tatoeba.py")
    return texts
