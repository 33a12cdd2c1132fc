"""A run's data, ready for the loop: the corpus of a `DataConfig` loaded and split, its
tokenizers trained on the training split (or given, as a resumed run does), and the training
and validation splits encoded, for any task:

| task        | corpus                                  | tokenizers                        | encoded as      |
|-------------|-----------------------------------------|-----------------------------------|-----------------|
| translation | sentence pairs (`load_dataset_splits`)  | one per language                  | `EncodedPairs`  |
| lm, mlm     | texts (`load_text_splits`)              | one, with [CLS] [SEP] [MASK]       | `EncodedTexts`  |

    data = prepare_data(DataConfig(task="lm"))
    data.summary, data.tokenizers, data.train, data.validation

The corpus's fingerprint (a hash of its pairs or texts, split by split) is saved in data.json by
a new run; `evaluate` and `--resume` refuse a corpus whose fingerprint differs.

A held-out pair (or text) that also occurs in training measures memory, not translation:
`data.warnings` counts them, split by split (`held_out_overlaps`), and `train` and `evaluate`
print the count with the files.
"""
import dataclasses
import hashlib
import itertools
from pathlib import Path

from numpy_transformer.data import encode_pairs, load_dataset_splits, load_text_splits, train_text_tokenizer, \
    train_tokenizers
from numpy_transformer.data.corpus import HELD_OUT, source_key
from numpy_transformer.data.moses import is_prefix
from numpy_transformer.data.opus import parse_pair
from numpy_transformer.data.texts import encode_texts
from numpy_transformer.data.tokenizer import MASKED_LM_TOKENS, SPECIAL_TOKENS
from numpy_transformer.training.loss import make_objective


PATH_FIELDS = ("dataset", "validation_file", "test_file")


@dataclasses.dataclass
class PreparedData:
    """The splits of a DataConfig, its tokenizers (source and target, or the language model's
    one), the training and validation splits as ids (validation None when empty), and the lines
    `train` prints about them."""
    splits: object
    tokenizers: tuple
    train: object
    validation: object
    summary: list
    warnings: list = dataclasses.field(default_factory=list)

    @property
    def src_tokenizer(self):
        return self.tokenizers[0]

    @property
    def tgt_tokenizer(self):
        return self.tokenizers[-1]


def prepare_data(data_config, cache_dir=None, tokenizers=None, progress=True):
    """Load, split, tokenize and encode the data of `data_config` (see the module docstring).
    progress: False turns off the `datasets` progress bars ("Generating train split"), for logs."""
    if not progress and data_config.dataset != "builtin":
        import datasets
        datasets.disable_progress_bars()
    if data_config.task == "translation":
        return _prepare_pairs(data_config, cache_dir, tokenizers)
    return _prepare_texts(data_config, cache_dir, tokenizers)


def _prepare_pairs(data_config, cache_dir, tokenizers):
    splits = load_dataset_splits(data_config.dataset, data_config.pair, data_config.subset, data_config.subset_mode,
                                 data_config.seed, data_config.n_pairs, cache_dir, **_split_sources(data_config))
    _check_splits(data_config, splits, "pairs")
    src, tgt = tokenizers or train_tokenizers(splits, data_config.min_frequency, data_config.tokenizer,
                                              data_config.vocab_size, data_config.shared_vocabulary)
    for tokenizer in () if tokenizers else (src, tgt):
        _check_words_reach_frequency(data_config, splits, tokenizer, len(SPECIAL_TOKENS), "pairs")
    train, validation = (encode_pairs(pairs, src, tgt, data_config.max_len, data_config.length_policy)
                         for pairs in (splits.train, splits.validation))
    if len(train) == 0:
        raise ValueError(f"none of the {len(splits.train)} training pairs fits the maximum length "
                         f"{data_config.max_len}; raise it with --max-len")
    unknown, total = src.count_unknown(pair.src for pair in splits.validation)
    summary = [f"data: {splits.source}",
               f"pairs: {len(splits.train):,} train, {len(splits.validation):,} validation, {len(splits.test):,} test",
               f"training pairs: {train.report()}",
               f"{_vocabularies(data_config, src, tgt)}; "
               f"{unknown_share(src, unknown, total, f'validation {splits.src_language} tokens')}"]
    warnings = overlap_warnings(data_config, splits, held_out_overlaps(splits, (src, tgt)), "pairs")
    return PreparedData(splits, (src, tgt), train, validation if len(validation) else None, summary, warnings)


def _prepare_texts(data_config, cache_dir, tokenizers):
    splits = load_text_splits(data_config.dataset, data_config.languages[0], data_config.pair, data_config.subset,
                              data_config.subset_mode, data_config.seed, data_config.n_pairs, cache_dir,
                              **_split_sources(data_config))
    _check_splits(data_config, splits, "texts")
    (tokenizer,) = tokenizers or (train_text_tokenizer(splits.train, splits.language, data_config.min_frequency,
                                                       data_config.tokenizer, data_config.vocab_size),)
    if not tokenizers:
        _check_words_reach_frequency(data_config, splits, tokenizer, len(SPECIAL_TOKENS + MASKED_LM_TOKENS), "texts")
    framing = make_objective(data_config.task, (tokenizer,)).framing
    train, validation = (encode_texts(texts, tokenizer, data_config.max_len, data_config.length_policy, framing)
                         for texts in (splits.train, splits.validation))
    if len(train) == 0:
        raise ValueError(f"none of the {len(splits.train)} training texts fits the maximum length "
                         f"{data_config.max_len}; raise it with --max-len, or cut long texts with "
                         f"--length-policy split")
    unknown, total = tokenizer.count_unknown(splits.validation)
    summary = [f"data: {splits.source}",
               f"texts: {len(splits.train):,} train, {len(splits.validation):,} validation, {len(splits.test):,} test",
               f"training sequences: {train.report()}",
               f"vocabulary ({_kind_name(tokenizer.kind, data_config.min_frequency)}, + 7 special tokens): {tokenizer.vocab_size:,} {splits.language}; "
               f"{unknown_share(tokenizer, unknown, total, 'validation tokens')}"]
    warnings = overlap_warnings(data_config, splits, held_out_overlaps(splits, (tokenizer,)), "texts")
    return PreparedData(splits, (tokenizer,), train, validation if len(validation) else None, summary, warnings)


UNKNOWN_SHARE_FOR_SUBWORDS = 0.03     # above it, the summary suggests a subword vocabulary


def unknown_share(tokenizer, unknown, total, tokens):
    """`4.2% of the validation en tokens are [UNK]` (`tokens`: which ones), `unknown` of `total`;
    above UNKNOWN_SHARE_FOR_SUBWORDS with a word-level vocabulary, with the flags of a subword
    one, which splits a rare word into known pieces instead."""
    share = unknown / max(total, 1)
    line = f"{share:.1%} of the {tokens} are [UNK]"
    if tokenizer.kind == "word" and share > UNKNOWN_SHARE_FOR_SUBWORDS:
        line += (f" (over {UNKNOWN_SHARE_FOR_SUBWORDS:.0%}: a subword vocabulary splits rare words into known pieces "
                 f"instead; try --tokenizer unigram --vocab-size 8000)")
    return line


def tokenizer_view(tokenizer, text):
    """`text` as the tokenizer sees it before its vocabulary: normalised (where it has a
    normalizer) and cut into pre-tokens, so `l'uomo.` and `l ' uomo .` are one text for the
    word-level tokenizer."""
    text = _normalised(tokenizer, text)
    pre_tokenizer = tokenizer.tokenizer.pre_tokenizer
    return (text,) if pre_tokenizer is None else tuple(piece for piece, _ in pre_tokenizer.pre_tokenize_str(text))


def held_out_overlaps(splits, tokenizers):
    """{"validation": n, "test": n}: how many items (pairs, or texts) of each held-out split are,
    as `tokenizers` see them (`tokenizer_view`: the source's and the target's, or the one of a
    language model), exactly an item of the training split. A cheap sieve goes first: the text
    normalised, its whitespace removed, which two texts of equal view share under the
    pre-tokenizers trained here (the word-level and WordPiece ones keep every other character in
    order; the byte-level BPE and unigram views give the text back); only the items it matches
    are cut into pre-tokens."""
    def sides(item):
        return zip(tokenizers, (item,) if isinstance(item, str) else (item.src, item.tgt))

    def sieve(item):
        return tuple("".join(_normalised(tokenizer, text).split()) for tokenizer, text in sides(item))

    def view(item):
        return tuple(tokenizer_view(tokenizer, text) for tokenizer, text in sides(item))

    in_training = {sieve(item) for item in splits.train}
    candidates = {name: [item for item in getattr(splits, name) if sieve(item) in in_training] for name in HELD_OUT}
    sieved = {sieve(item) for items in candidates.values() for item in items}
    seen = {view(item) for item in splits.train if sieve(item) in sieved}
    return {name: sum(view(item) in seen for item in items) for name, items in candidates.items()}


def _normalised(tokenizer, text):
    normalizer = tokenizer.tokenizer.normalizer
    return text if normalizer is None else normalizer.normalize_str(text)


def overlap_warnings(data_config, splits, overlaps, unit):
    """One warning line per held-out split with items that also occur in training: the count,
    the files (or the corpus they were carved from), and what to do."""
    training = data_config.dataset
    return [f"warning: {n:,} of the {len(getattr(splits, name)):,} {name} {unit} "
            f"({getattr(data_config, f'{name}_file') or f'from {training}'}) also occur in the training {unit} "
            f"({training}): scores on them measure memory, not generalisation; remove them from the {name} "
            f"{unit}" for name, n in overlaps.items() if n]


def _split_sources(data_config):
    """The arguments naming the corpus's configuration, its separate held-out files and how its
    columns are read."""
    return {name: getattr(data_config, name) for name in ("dataset_config", "validation_file", "test_file", "columns")}


def _check_words_reach_frequency(data_config, splits, tokenizer, n_special, unit):
    """A ValueError when a word-level vocabulary holds only the special tokens: no word of the
    training split is seen --min-frequency times, so every word would be [UNK]."""
    if tokenizer.kind == "word" and tokenizer.vocab_size <= n_special:
        raise ValueError(f"--min-frequency {data_config.min_frequency}: no {tokenizer.language} word is seen that "
                         f"often in the training split of {data_config.dataset} ({unit}: {len(splits.train):,}), so "
                         f"every word would be [UNK]; lower --min-frequency (default 2), or train on more data")


def _kind_name(kind, min_frequency):
    """What a vocabulary of `kind` holds, in words."""
    times = "twice" if min_frequency == 2 else "once" if min_frequency == 1 else f"{min_frequency:,} times"
    return f"words seen at least {times} in training" if kind == "word" else KIND_NAMES[kind]


KIND_NAMES = {"bpe": "byte-level BPE: bytes and merges",
              "wordpiece": "WordPiece: words and ##-pieces", "unigram": "unigram: ▁-pieces"}


def _vocabularies(data_config, src, tgt):
    """The summary's words on the translation vocabularies: one per language, or one shared."""
    kind = _kind_name(src.kind, data_config.min_frequency)
    if data_config.shared_vocabulary:
        return (f"vocabulary shared by {src.language} and {tgt.language} ({kind}, + 4 special "
                f"tokens): {src.vocab_size:,} entries")
    return (f"vocabularies ({kind}, + 4 special tokens): {src.vocab_size:,} {src.language}, "
            f"{tgt.vocab_size:,} {tgt.language}")


def _check_splits(data_config, splits, unit):
    """A ValueError unless every split has an item: one line that says why one is empty. The
    held-out splits a corpus lacks are carved by source sentence (`split_pairs`), so a file of
    many pairs of one or two sentences is as few as its distinct sentences."""
    if not (splits.train and splits.validation and splits.test):
        items = [*splits.train, *splits.validation, *splits.test]
        distinct = len({source_key(getattr(item, "src", item)) for item in items})
        if distinct < min(len(items), 3):
            one = "source sentence" if unit == "pairs" else unit.removesuffix("s")
            raise ValueError(f"{splits.source}: its {len(items):,} {unit} have {distinct:,} distinct {one}"
                             f"{'s' * (distinct != 1)} (compared by their words, case and punctuation aside): the "
                             f"validation and test {unit} are held out by {one}, so that none is trained on, and "
                             f"a run needs at least 3 distinct ones; add {unit} of other sentences")
        raise ValueError(f"{splits.source}: {len(items):,} {unit} are too few to split into training, validation "
                         f"and test {unit} (a run needs at least 3)")
    check_same_data(data_config, splits, unit)


def corpus_fingerprint(splits):
    """{"pairs": N, "sha256": hex digest} of the pairs (or texts) of the three splits, in order:
    what tells a corpus from another, whether it came from a file, the Hub or the built-in grammar."""
    items = list(itertools.chain(splits.train, splits.validation, splits.test))
    digest = hashlib.sha256()
    for item in items:
        line = item if isinstance(item, str) else f"{item.src}\t{item.tgt}"
        digest.update(f"{line}\n".encode("utf-8", "surrogateescape"))
    return {"pairs": len(items), "sha256": digest.hexdigest()}


def with_fingerprint(data_config, splits):
    """The DataConfig a new run saves: the paths of its files (and folder, and the prefixes of
    parallel text files) made absolute, and the corpus's fingerprint, which covers every split,
    whichever file it came from."""
    languages = parse_pair(data_config.pair)
    paths = {name: str(Path(path).resolve()) for name in PATH_FIELDS if (path := getattr(data_config, name)) is not None
             and (Path(path).exists() or is_prefix(path, languages))}
    return dataclasses.replace(data_config, **paths, fingerprint=corpus_fingerprint(splits))


def check_same_data(data_config, splits, unit="pairs"):
    """A ValueError unless `splits` are the pairs (texts) the run saved with `data_config` was
    trained on (nothing to check for a run saved before fingerprints: None)."""
    saved = data_config.fingerprint
    if saved is None:
        return
    now = corpus_fingerprint(splits)
    if now["pairs"] != saved["pairs"]:
        change = f"it has {now['pairs']:,} {unit} now, {saved['pairs']:,} when the run trained"
    elif now["sha256"] != saved["sha256"]:
        change = f"its {now['pairs']:,} {unit} differ from those the run trained on (changed or reordered)"
    else:
        return
    raise ValueError(f"{splits.source}: not the data this run was trained on: {change}. Restore the original "
                     f"corpus ({data_config.dataset}), or train a new run on this one")
