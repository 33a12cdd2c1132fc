"""A parallel corpus as the rest of the project sees it: sentence pairs, and their seeded
train / validation / test split.

Every source (the built-in corpus, opus_books, local files) ends as a `DataSplits`: three lists
of `Pair`s and a `source` line saying where they came from, which every output prints.
"""
import re
from dataclasses import dataclass

import numpy as np

SPLIT_FRACTIONS = (0.90, 0.05, 0.05)      # train, validation, test
SUBSET_MODES = ("first", "random")
SPLITS = ("train", "validation", "test")
HELD_OUT = SPLITS[1:]


@dataclass(frozen=True)
class Pair:
    """A source sentence and its translation.

    src, tgt: text. The built-in corpus gives it tokenised (words separated by single spaces,
    the Italian apostrophe kept on the elided word: `l' uomo`); real corpora give it as written.
    alignment: for the built-in corpus, the (source word index, target word index) pairs saying
    which target words translate which source words (indices into `src.split()` and
    `tgt.split()`); None where unknown.
    """
    src: str
    tgt: str
    alignment: tuple = None


@dataclass(frozen=True)
class DataSplits:
    """The train, validation and test pairs, and what they are.

    source: one line naming the data (`built-in synthetic corpus (seed 0, 20000 pairs)`,
    `opus_books en-it (Helsinki-NLP), first 1000 pairs`, or a file path) for every output to print.
    """
    train: list
    validation: list
    test: list
    source: str
    src_language: str = "en"
    tgt_language: str = "it"

    def __iter__(self):
        return iter((self.train, self.validation, self.test))


def split_sizes(n, fractions=SPLIT_FRACTIONS):
    """Sizes of the train, validation and test splits of n pairs: validation and test get
    round(fraction · n) pairs each, but at least one when n ≥ 3; train gets the rest."""
    _check_fractions(fractions)
    held_out = [max(round(fraction * n), 1 if n >= 3 else 0) for fraction in fractions[1:]]
    return (n - sum(held_out), *held_out)


def split_pairs(pairs, seed=0, fractions=SPLIT_FRACTIONS):
    """(train, validation, test): a seeded shuffle of the distinct source sentences of `pairs`
    cut at `split_sizes`, each source taking all its pairs with it. A corpus with several
    translations of one sentence (Tatoeba, most multi-reference test sets) repeats its source;
    splitting by source keeps every held-out source out of training. Sources are compared by
    their words (`source_key`: "Hey. Where are you going?" is "Hey, where are you going?").
    Where every source is distinct this is a shuffle of the pairs. The same seed gives the same
    splits; every pair lands in exactly one split. Items without a `src` (a language model's
    texts) are their own source."""
    groups = {}
    for i, item in enumerate(pairs):
        groups.setdefault(source_key(getattr(item, "src", item)), []).append(i)
    groups = list(groups.values())
    order = np.random.default_rng(seed).permutation(len(groups))
    n_train, n_validation, _ = split_sizes(len(groups), fractions)
    cuts = np.split(order, [n_train, n_train + n_validation])
    return tuple([pairs[i] for group in part for i in groups[group]] for part in cuts)


def source_key(text):
    """A sentence as the split compares it: its words, case-folded, without punctuation."""
    return " ".join(re.findall(r"\w+", text.casefold()))


def subset_indices(n, subset=None, mode="first", seed=0):
    """Which of n pairs to keep: all (subset None), the first `subset`, or `subset` drawn at
    random without replacement (seeded, kept in corpus order)."""
    if mode not in SUBSET_MODES:
        raise ValueError(f"subset_mode must be one of {SUBSET_MODES}, got {mode!r}")
    if subset is None:
        return np.arange(n)
    if not isinstance(subset, (int, np.integer)) or isinstance(subset, bool) or not 1 <= subset <= n:
        raise ValueError(f"subset must be an integer from 1 to the corpus size {n}, got {subset!r}")
    if mode == "first":
        return np.arange(subset)
    return np.sort(np.random.default_rng(seed).choice(n, size=subset, replace=False))


def make_splits(pairs, source, subset=None, subset_mode="first", seed=0, fractions=SPLIT_FRACTIONS,
                languages=("en", "it")):
    """Subset, then split: the one path every corpus without its own splits goes through."""
    parts = complete_splits({"train": pairs}, seed, fractions, subset, subset_mode)
    if subset is not None:
        source += f", subset: {subset_mode} {subset} of {len(pairs)} pairs"
    return DataSplits(*parts.values(), source, *languages)


def complete_splits(given, seed=0, fractions=SPLIT_FRACTIONS, subset=None, subset_mode="first"):
    """{"train", "validation", "test": list} from the splits a corpus comes with (`given` maps
    "train" and any of "validation" and "test" to their items): the subset is taken from the
    training split, and each held-out split the corpus lacks is carved from what remains by
    the seeded split (`split_pairs`); the carved part of a split it has goes back to training."""
    train = given["train"]
    kept = [train[i] for i in subset_indices(len(train), subset, subset_mode, seed)]
    carved = dict(zip(SPLITS, split_pairs(kept, seed, fractions)))
    parts = {"train": carved["train"]}
    for split in HELD_OUT:
        if given.get(split) is None:
            parts[split] = carved[split]
        else:
            parts["train"] += carved[split]
            parts[split] = given[split]
    return parts


def describe_splits(what, origins, parts, unit, subset=None, subset_mode="first"):
    """The `source` line of a corpus with its own splits: `what` (the corpus), then where each
    split comes from (`origins`: split → a file or "its own"; a split absent there was carved
    from training) and its size; and the subset, if any."""
    described = ", ".join(f"{split}: {origins.get(split) or 'carved from train'} ({_count(len(parts[split]), unit)})"
                          for split in SPLITS)
    return f"{what}: {described}" + (f", subset of train: {subset_mode} {subset}" if subset is not None else "")


def _count(n, unit):
    """`1,014 pairs`, `1 pair`: unit is a plural in s."""
    return f"{n:,} {unit if n != 1 else unit[:-1]}"


def _check_fractions(fractions):
    if len(fractions) != 3 or min(fractions) < 0 or not np.isclose(sum(fractions), 1.0):
        raise ValueError(f"fractions must be three non-negative numbers (train, validation, test) summing to 1, "
                         f"got {fractions}")
