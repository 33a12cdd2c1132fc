"""Corpora that come with their own splits, as a benchmark does: a training file with separate
validation and test files, a folder holding them, or a Hugging Face dataset's splits.

    --dataset train.jsonl                                    one file: split 90/5/5 (seeded)
    --dataset train.jsonl --validation-file val.jsonl        the official validation split;
                                                             the test split carved from train
    --dataset train.jsonl --validation-file val.jsonl --test-file test.jsonl
    --dataset data/multi30k/                                 a folder of train.*, validation.*
                                                             (or val.*, valid.*, dev.*), test.*
    --dataset data/corpus --validation-file data/dev --test-file data/test
                                                             prefixes of parallel text files:
                                                             data/corpus.en + data/corpus.it, …
    --dataset data/wmt/                                      a folder of train.en + train.it,
                                                             valid.en + valid.it, test.en + test.it
    --dataset bentrevett/multi30k                            a Hub dataset: its train,
                                                             validation and test splits

A held-out split the corpus lacks is carved from its training split by the seeded 90/5/5 rule
(5 % of it), so a run always has a test split to report on; the `source` line says which
split came from which file and which was carved (`corpus.describe_splits`). A subset is taken
from the training split only.
"""
import re
import stat
from pathlib import Path

from numpy_transformer.bounded_json import file_kind
from numpy_transformer.data.corpus import HELD_OUT, SPLIT_FRACTIONS, complete_splits, describe_splits
from numpy_transformer.data.hub import load_hub_dataset
from numpy_transformer.data.moses import is_prefix, prefix_label

# split → the names its file (or a Hub dataset's split) may have
SPLIT_NAMES = {"train": ("train",), "validation": ("validation", "val", "valid", "dev"), "test": ("test",)}
HUB_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")


def accepted(suffixes, languages):
    """What --dataset takes, for the message of a path that does not exist."""
    prefix = f"the prefix P of parallel text files {' and '.join(f'P.{language}' for language in languages)}, " \
        if languages else ""
    return (f"--dataset takes a corpus by name (tatoeba, builtin, opus_books, or a Hugging Face dataset such as "
            f"bentrevett/multi30k), a file ({', '.join(suffixes)}), {prefix}or a folder of train, validation and "
            f"test files")


def official_names(names, where):
    """{split: name}: which of `names` (file names, or a Hub dataset's splits) is each split, by
    its stem; "train" is required, the held-out splits are optional. A ValueError naming
    `where` when there is no training split, or two names for one split."""
    found = {}
    for split, aliases in SPLIT_NAMES.items():
        matches = sorted(name for name in names if Path(name).stem.lower() in aliases)
        if len(matches) > 1:
            raise ValueError(f"{where}: {' and '.join(matches)} are both the {split} split: keep one")
        found.update({split: matches[0]} if matches else {})
    if "train" not in found:
        raise ValueError(f"{where}: no training split (named train); found {', '.join(sorted(names)) or 'nothing'}")
    return found


def folder_files(folder, suffixes, languages=()):
    """{split: Path} of the files in `folder` named train, validation (val, valid, dev) and test,
    with one of `suffixes`; and, given the `languages` of a pair, of the parallel text files so
    named (train.en + train.it: the prefix folder/train, `moses.py`)."""
    folder = Path(folder)
    files = {path.name: path for path in folder.iterdir() if path.is_file() and path.suffix.lower() in suffixes}
    files |= {prefix_label(path.stem, languages): folder / path.stem for path in folder.iterdir()
              if path.is_file() and path.suffix[1:] in languages}
    parallel = f", or pairs of files ending in {' and '.join(f'.{language}' for language in languages)}" \
        if languages else ""
    found = official_names(list(files), f"{folder} (files ending in {', '.join(suffixes)}{parallel})")
    return {split: files[name] for split, name in found.items()}


def split_files(name, suffixes, validation_file=None, test_file=None, languages=()):
    """{split: Path} of a local corpus (`name` a file, the prefix of parallel text files of the
    pair's `languages`, with the separate held-out files given; or a folder), or None when
    `name` is a corpus's name rather than a path.
    A FileNotFoundError when `name` is a path that does not exist."""
    separate = {split: Path(path) for split, path in zip(HELD_OUT, (validation_file, test_file)) if path is not None}
    for flag, path in (("--dataset", name), *((f"--{split}-file", path) for split, path in separate.items())):
        _check_not_special(path, flag, suffixes, languages)
    if Path(name).is_dir():
        if separate:
            raise ValueError(f"{name} is a folder: its train/validation/test files are the splits; give "
                             f"--validation-file and --test-file with a training file instead")
        return folder_files(name, suffixes, languages)
    if Path(name).is_file() or Path(name).suffix.lower() in suffixes or is_prefix(name, languages):
        return {"train": Path(name), **separate}
    if not HUB_NAME.match(name) or _under_a_local_folder(name):
        raise FileNotFoundError(f"{name}: no such file or folder. {accepted(suffixes, languages)}")
    if separate:
        raise ValueError(f"--validation-file and --test-file go with a training file given to --dataset, not with "
                         f"the dataset {name!r}")
    return None


def _check_not_special(path, flag, suffixes, languages):
    """A ValueError when `path` (or, for a prefix, one of its language files) exists but is not a
    regular file or a folder: a named pipe, a device, a socket. Such a path is never opened (a
    FIFO would wait for a writer, /dev/zero would never end)."""
    candidates = [Path(path), *(Path(f"{path}.{language}") for language in languages)]
    for candidate in candidates:
        try:
            mode = candidate.stat().st_mode
        except OSError:
            continue
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            prefix = " or the prefix of parallel text files" if languages else ""
            takes = accepted(suffixes, languages) if flag == "--dataset" else \
                f"{flag} takes a regular file ({', '.join(suffixes)}){prefix}"
            raise ValueError(f"{candidate}: a {file_kind(mode)}, not a regular file or a folder: {takes}; save the "
                             f"data to a file first")


def _under_a_local_folder(name):
    """Whether `name`, shaped as a Hub dataset (owner/name), starts with a folder that exists
    here (data/my-benchmark beside a folder data/): then it is a path that is missing."""
    owner = Path(name).parent
    return owner != Path(".") and owner.is_dir()


def local_splits(files, read, what, unit, seed=0, fractions=SPLIT_FRACTIONS, subset=None, subset_mode="first",
                 label=str):
    """({split: items}, source line) of local files ({split: Path}; `read` gives a file's items,
    `label` its name in the source line). One file: split 90/5/5 with the source line
    `what PATH (N unit)`; several: the official splits, completed by `corpus.complete_splits`."""
    given = {split: read(path) for split, path in files.items()}
    parts = complete_splits(given, seed, fractions, subset, subset_mode)
    if set(files) == {"train"}:
        source = f"{what} {label(files['train'])} ({len(given['train'])} {unit})"
        return parts, source + (f", subset: {subset_mode} {subset} of {len(given['train'])} {unit}"
                                if subset is not None else "")
    return parts, describe_splits(f"{what}s", {split: label(path) for split, path in files.items()}, parts, unit,
                                  subset, subset_mode)


def hub_splits(name, config, read, unit, cache_dir=None, local_hint="", seed=0, fractions=SPLIT_FRACTIONS,
               subset=None, subset_mode="first"):
    """({split: items}, source line) of a Hugging Face dataset: its own splits (`read(table,
    where)` gives a split's items), completed by `corpus.complete_splits`.
    DataUnavailableError when the Hub cannot be reached and nothing is cached."""
    label = name + (f" ({config})" if config else "")
    tables = load_hub_dataset(name, config, cache_dir, what=f"the dataset {label}", local_hint=local_hint)
    found = official_names(list(tables), f"the dataset {label}")
    given = {split: read(tables[table], f"the dataset {name}") for split, table in found.items()}
    parts = complete_splits(given, seed, fractions, subset, subset_mode)
    return parts, describe_splits(f"Hugging Face dataset {label}", dict.fromkeys(found, "its own"), parts, unit,
                                  subset, subset_mode)
