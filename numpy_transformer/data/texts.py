"""Monolingual corpora for the language models (`train --task lm|mlm`): texts, one sentence or
document each, split into train / validation / test, encoded and framed.

Where the texts come from (`numpy_transformer.data.load_text_splits` chooses):
- one side of a parallel corpus (`side_of`): the built-in corpus ("en" or "it", split exactly
  as its pairs are), opus_books, a file of pairs, or parallel text files (corpus.en +
  corpus.it: the side of the language asked for);
- a .txt file (`text_file_splits`): one text per line, blank lines skipped, split 90/5/5;
  or separate train / validation / test .txt files, or a folder of them (`official.py`);
- a Hugging Face dataset by name (`hub_text_splits`): its "text" column, with its own
  validation and test splits where it has them.

A sequence frames the tokens x of a text the way its model reads it:

    causal (GPT):   [SOS] x [EOS]     the model reads [SOS] x and predicts x [EOS]
    masked (BERT):  [CLS] x [SEP]     the model reads it whole, some tokens masked

so a text fits `max_len` when len(x) + 1 (causal) or len(x) + 2 (masked) ≤ max_len. A longer
text is dropped ("drop", the default), keeps its first tokens ("truncate"), or is cut into
consecutive pieces that fit ("split", what documents need).
"""
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from numpy_transformer.masks import pad
from numpy_transformer.data.corpus import SPLIT_FRACTIONS
from numpy_transformer.data.utf8 import read_lines
from numpy_transformer.data.official import hub_splits, local_splits, split_files

FRAMINGS = {"causal": 1, "masked": 2}      # framing → the positions its special tokens take in the model
POLICIES = ("drop", "truncate", "split")
TEXT_FILE_SUFFIX = ".txt"


@dataclass(frozen=True)
class TextSplits:
    """The train, validation and test texts, the line naming the data, and its language."""
    train: list
    validation: list
    test: list
    source: str
    language: str = "en"

    def __iter__(self):
        return iter((self.train, self.validation, self.test))


def side_of(splits, language):
    """The `language` side of a parallel corpus's `DataSplits`, as texts (the same split)."""
    languages = (splits.src_language, splits.tgt_language)
    if language not in languages:
        raise ValueError(f"{splits.source}: it has the languages {' and '.join(languages)}, not {language!r}; "
                         f"choose one with --language")
    side = "src" if language == splits.src_language else "tgt"
    texts = [[getattr(pair, side) for pair in split] for split in splits]
    return TextSplits(*texts, f"{splits.source}; its {language} side", language)


def text_file_splits(path, language="en", subset=None, subset_mode="first", seed=0, fractions=SPLIT_FRACTIONS,
                     validation_file=None, test_file=None):
    """The lines of UTF-8 text files, one text each (blank lines skipped): one file split
    (seeded) 90/5/5, or its own splits: `path` with separate validation and test files, or a
    folder of them (`official.split_files`; a split it lacks is carved from training)."""
    files = split_files(path, (TEXT_FILE_SUFFIX,), validation_file, test_file)
    parts, source = local_splits(files, read_texts, "local text file", "texts", seed, fractions, subset, subset_mode)
    return TextSplits(*parts.values(), source, language)


def read_texts(path):
    """The non-blank lines of a UTF-8 .txt file, stripped; lines end at "\\n" only, as those of
    parallel text files (`utf8.read_lines`: a byte-order mark and "\\r\\n" are read too)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    if path.suffix.lower() != TEXT_FILE_SUFFIX:
        raise ValueError(f"{path}: a language model's text files end in {TEXT_FILE_SUFFIX} (one text per line); "
                         f"do not mix them with files of pairs")
    texts = [line.strip() for line in read_lines(path) if line.strip()]
    if not texts:
        raise ValueError(f"{path}: the file has no text (every line is blank)")
    return texts


def hub_text_splits(name, config=None, language="en", subset=None, subset_mode="first", seed=0,
                    fractions=SPLIT_FRACTIONS, cache_dir=None):
    """A Hugging Face dataset's "text" column (blank texts skipped): its own validation and test
    splits where it has them, the rest carved from its training split with the seeded split
    (the subset applies to the training split). DataUnavailableError when offline and not cached."""
    parts, source = hub_splits(name, config, texts_of_table, "texts", cache_dir,
                               "--dataset FILE.txt, a UTF-8 text file with one sentence or document per line", seed,
                               fractions, subset, subset_mode)
    return TextSplits(*parts.values(), source, language)


def texts_of_table(table, where):
    """The non-blank texts of a Hub table's "text" column."""
    if "text" not in table.column_names:
        raise ValueError(f"{where} has no 'text' column (its columns: {table.column_names})")
    return [text for text in table["text"] if text and text.strip()]


@dataclass(frozen=True)
class EncodedTexts:
    """Token ids of the sequences (no special tokens yet) that fit `max_len`, and what was cut.

    text_index[k]: the text the k-th sequence comes from (a split text gives several);
    specials: (first, last, pad) ids of the framing, [SOS] [EOS] [PAD] or [CLS] [SEP] [PAD]."""
    ids: list
    text_index: np.ndarray
    specials: tuple
    max_len: int = None
    policy: str = "drop"
    n_dropped: int = 0
    n_cut: int = 0

    def __len__(self):
        return len(self.ids)

    def length_keys(self):
        """What batches of similar lengths sort by (`batching.batch_indices`)."""
        return (np.array([len(x) for x in self.ids]),)

    def report(self):
        """One line for the training log: sequences, and what the maximum length did."""
        if self.max_len is None:
            return f"{len(self)} sequences, no maximum length"
        done = {"drop": f"{self.n_dropped} texts dropped", "truncate": f"{self.n_cut} texts truncated",
                "split": f"{self.n_cut} texts split"}[self.policy]
        return f"{len(self)} sequences, maximum length {self.max_len} tokens ({self.policy}): {done}"


def encode_texts(texts, tokenizer, max_len=None, policy="drop", framing="causal"):
    """The token ids of every text, with the maximum-length policy of the module docstring."""
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    if framing not in FRAMINGS:
        raise ValueError(f"framing must be one of {tuple(FRAMINGS)}, got {framing!r}")
    room = None if max_len is None else max_len - FRAMINGS[framing]
    if room is not None and room < 1:
        raise ValueError(f"max_len {max_len} leaves no room for a token beside the special ones")
    sequences, index, n_dropped, n_cut = [], [], 0, 0
    for number, text in enumerate(texts):
        x = tokenizer.encode(text)
        if room is not None and len(x) > room:
            if policy == "drop":
                n_dropped += 1
                continue
            n_cut += 1
            x = x[:room] if policy == "truncate" else x
        pieces = [x] if room is None else [x[start:start + room] for start in range(0, len(x), room)]
        sequences += [np.asarray(piece, dtype=np.int64) for piece in pieces if piece]
        index += [number] * sum(1 for piece in pieces if piece)
    first, last = (tokenizer.sos_id, tokenizer.eos_id) if framing == "causal" else (tokenizer.cls_id, tokenizer.sep_id)
    if first is None or last is None:
        raise ValueError(f"the tokenizer of {tokenizer.language!r} lacks the special tokens of the {framing} framing")
    return EncodedTexts(sequences, np.asarray(index, dtype=np.int64), (first, last, tokenizer.pad_id), max_len, policy,
                        n_dropped, n_cut)


def framed(encoded, positions):
    """(len(positions), longest + 2) int64: the sequences at `positions` framed by their special
    tokens, padded with [PAD] on the right."""
    first, last, pad_id = encoded.specials
    return pad([np.concatenate(([first], encoded.ids[k], [last])) for k in positions], pad_id)
