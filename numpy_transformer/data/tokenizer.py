"""Tokenizers of the `tokenizers` library, four kinds (`--tokenizer`):

- "word", as in the thesis's experiments (§3.1): the WordLevel model, the Whitespace
  pre-tokenizer (words and runs of punctuation: `l'uomo.` → `l` `'` `uomo` `.`), and a
  vocabulary of the words seen at least twice in the training split (min_frequency 2): rarer
  words become [UNK];
- "bpe", byte-level byte-pair encoding (GPT-2's): every text is bytes, and the vocabulary is
  the 256 bytes and the merges of the most frequent adjacent pieces, up to `vocab_size`
  entries, so no word is ever unknown and a rare word is spelled in pieces;
- "wordpiece" (BERT's): each space-separated word is spelled with the longest pieces of the
  vocabulary, the first as it is, the others marked `##` (`Straßenbahn` → `Straßen` `##bahn`,
  `Hut,` → `Hut` `##,`); merges are chosen by how much more often two pieces occur together
  than apart; a word with a character never seen is [UNK];
- "unigram" (SentencePiece's): the vocabulary of `vocab_size` pieces under which the training
  text is most probable, a piece that starts a word marked `▁` (`▁Straßen` `bahn`); a
  character never seen is [UNK]. Its trainer has no minimum frequency.

Every kind decodes ids back to written text: the subword kinds restore the spaces exactly
(no `##`, no `▁` left), the word-level one joins words with spaces and `detokenize` repairs
the punctuation, so BLEU is scored on natural text.

All have the special tokens [UNK] [PAD] [SOS] [EOS] first (ids 0–3). The tokenizer of a
language model (`train_text_tokenizer`) also has BERT's [CLS] [SEP] [MASK] (ids 4–6).

One tokenizer per language, saved beside the model as `tokenizer_en.json` and
`tokenizer_it.json`; a shared vocabulary (`train_tokenizers(..., shared=True)`) is one
tokenizer trained on both sides, saved under both names.

    >>> en = WordTokenizer.train(["the cat eats .", "the dog eats ."], "en")
    >>> en.encode("the cat eats .")        # `cat` was seen once: [UNK]
    [6, 0, 5, 4]
"""
import os
import re
from pathlib import Path

from numpy_transformer.data.detokenize import detokenize
from numpy_transformer.bounded_json import TOKENIZER_BYTES, parse_json, read_bounded

SPECIAL_TOKENS = ("[UNK]", "[PAD]", "[SOS]", "[EOS]")
UNK, PAD, SOS, EOS = SPECIAL_TOKENS
MASKED_LM_TOKENS = ("[CLS]", "[SEP]", "[MASK]")
CLS, SEP, MASK = MASKED_LM_TOKENS
MIN_FREQUENCY = 2
KINDS = ("word", "bpe", "wordpiece", "unigram")
SUBWORD_KINDS = KINDS[1:]
CONTINUATION = "##"            # WordPiece's mark of a piece that continues a word
MODEL_KINDS = {"WordLevel": "word", "BPE": "bpe", "WordPiece": "wordpiece", "Unigram": "unigram"}
BYTES = 256                     # the byte-level alphabet every BPE vocabulary starts from
FILE_NAME = re.compile(r"tokenizer_([A-Za-z_-]+)\.json$")


class TextTokenizer:
    """What every tokenizer here offers over its `tokenizers.Tokenizer` (`self.tokenizer`, and
    `special_ids`): ids without special tokens, and text back from ids."""

    def encode(self, text, keep=()):
        """Token ids of `text`, without special tokens. keep: ids of special tokens that stay
        tokens where their names are typed (fill-mask's [MASK]); what a tokenizer does with the
        other names is its own (`WordTokenizer.encoded`: text)."""
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def tokens(self, text):
        return self.tokenizer.encode(text, add_special_tokens=False).tokens

    def decode(self, ids):
        """The text of `ids`, special tokens dropped ([UNK] too): word-level tokens joined by
        spaces, byte-level BPE's bytes put back together, WordPiece's `##` pieces joined to the
        piece before, unigram's `▁` made a space. A WordPiece continuation that comes first
        (a model may begin with one) loses its `##` too."""
        text = self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=True)
        return text.removeprefix(CONTINUATION) if self.kind == "wordpiece" else text

    def detokenize(self, ids):
        """Written text from `ids`: `decode`, then the rules of `detokenize` for this language."""
        return detokenize(self.decode(ids), self.language)

    @property
    def vocab_size(self):
        return self.tokenizer.get_vocab_size()

    @property
    def kind(self):
        """"word", "bpe", "wordpiece" or "unigram": the tokenizer's model (`KINDS`)."""
        return MODEL_KINDS[type(self.tokenizer.model).__name__]

    def token(self, token_id):
        """The written form of one token: `decode` of it alone, spaces trimmed (a BPE token
        `Ġcat` is `cat`, a unigram one `▁cat` too; a WordPiece continuation keeps its `##`), or
        the special token's own name ([SEP])."""
        if token_id in self.special_ids:
            return self.tokenizer.id_to_token(int(token_id))
        return self.tokenizer.decode([int(token_id)]).strip()


class WordTokenizer(TextTokenizer):
    """A `tokenizers.Tokenizer` (a WordLevel, byte-level BPE, WordPiece or unigram model) and the
    language it is for (which detokenizing rules apply)."""

    def __init__(self, tokenizer, language):
        self.tokenizer, self.language = tokenizer, language
        missing = [token for token in SPECIAL_TOKENS if tokenizer.token_to_id(token) is None]
        if missing:
            raise ValueError(f"tokenizer for {language!r} lacks the special tokens {missing}")
        tokenizer.encode_special_tokens = True          # a special token's name in a text is text (`encoded`)
        self._made_unknown = frozenset(self.special_ids) - {self.unk_id}   # what `encoded` makes [UNK]

    def encode(self, text, keep=()):
        """Token ids of `text`, without special tokens; the names of special tokens typed in it
        are text (`encoded`), but for those whose ids are in `keep`. Without `keep`, `encoded`'s
        ids alone, without its tokens and offsets (encode_pairs calls this for every sentence)."""
        if keep:
            return self.encoded(text, keep)[0]
        ids = self.tokenizer.encode(text, add_special_tokens=False).ids
        return ids if self._made_unknown.isdisjoint(ids) else [self._unknown_if_special(i) for i in ids]

    def tokens(self, text, keep=()):
        return self.encoded(text, keep)[1]

    def encoded(self, text, keep=()):
        """(ids, tokens, offsets) of `text`, without special tokens. A special token's name
        typed in the text ([PAD], [EOS], [SOS] in a sentence to translate, a prompt, a corpus)
        is text, read by the tokenizer's ordinary rules: `[`, `PAD`, `]` at the word level, bytes
        in byte-level BPE; where those rules would give the special token itself (a WordPiece or
        unigram vocabulary lists it as a piece) it is [UNK]. Only the special tokens whose ids
        are in `keep` are read as themselves where typed (fill-mask's [MASK]), with the space
        before them where the token takes it (`lstrip`, as the whole text's encoding does)."""
        kept = {self.tokenizer.id_to_token(int(i)): int(i) for i in keep}
        ids, tokens, offsets, start = [], [], [], 0
        for match in (re.finditer("|".join(_kept_pattern(token, self._lstrip(i)) for token, i in kept.items()), text)
                      if kept else ()):
            self._append_text(text[start:match.start()], start, ids, tokens, offsets)
            token = match.group().lstrip()
            ids.append(kept[token])
            tokens.append(token)
            offsets.append((match.start(), match.end()))
            start = match.end()
        self._append_text(text[start:], start, ids, tokens, offsets)
        return ids, tokens, offsets

    def _append_text(self, text, start, ids, tokens, offsets):
        """The encoding of `text` (which starts at `start` of the whole) added to the lists, a
        special token's id from the vocabulary made [UNK]."""
        if not text:
            return
        encoding = self.tokenizer.encode(text, add_special_tokens=False)
        for token_id, token, (begin, end) in zip(encoding.ids, encoding.tokens, encoding.offsets):
            ids.append(self._unknown_if_special(token_id))
            tokens.append(UNK if token_id in self._made_unknown else token)
            offsets.append((start + begin, start + end))

    def _unknown_if_special(self, token_id):
        """[UNK]'s id for a special token's id that text gave (`encoded`), else `token_id`."""
        return self.unk_id if token_id in self._made_unknown else token_id

    def _lstrip(self, token_id):
        """Whether the added token of `token_id` takes the spaces before it."""
        added = self.tokenizer.get_added_tokens_decoder().get(int(token_id))
        return bool(getattr(added, "lstrip", False))

    @classmethod
    def train(cls, sentences, language, min_frequency=MIN_FREQUENCY, special_tokens=SPECIAL_TOKENS):
        """Learn the vocabulary from an iterable of sentences: the special tokens first (ids 0–3:
        [UNK] [PAD] [SOS] [EOS], then any others given), then every word seen at least
        `min_frequency` times."""
        from tokenizers import Tokenizer, models, pre_tokenizers, trainers

        tokenizer = Tokenizer(models.WordLevel(unk_token=UNK))
        tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
        trainer = trainers.WordLevelTrainer(min_frequency=min_frequency, special_tokens=list(special_tokens),
                                            show_progress=False)
        tokenizer.train_from_iterator(sentences, trainer=trainer)
        return cls(tokenizer, language)

    @classmethod
    def train_subword(cls, sentences, language, kind, vocab_size, min_frequency=MIN_FREQUENCY,
                      special_tokens=SPECIAL_TOKENS):
        """Learn a subword vocabulary of `kind` ("bpe", "wordpiece" or "unigram", the module
        docstring) from an iterable of sentences, up to `vocab_size` entries (the special tokens
        included), merging pieces seen at least `min_frequency` times (BPE, WordPiece).
        [MASK] takes the space before it (as RoBERTa's mask does): in `the [MASK] sat` it stands
        for a word's first piece, the space that starts it included."""
        from tokenizers import AddedToken, Tokenizer

        if kind not in SUBWORD_KINDS:
            raise ValueError(f"the subword kind must be one of {SUBWORD_KINDS}, got {kind!r}")
        specials = [AddedToken(token, lstrip=token == MASK, special=True) for token in special_tokens]
        model, pre_tokenizer, decoder, trainer = _subword_parts(kind, vocab_size, min_frequency, specials)
        tokenizer = Tokenizer(model)
        tokenizer.pre_tokenizer, tokenizer.decoder = pre_tokenizer, decoder
        tokenizer.train_from_iterator(sentences, trainer=trainer)
        return cls(_numbered_in_order(tokenizer, len(special_tokens)), language)

    @classmethod
    def load(cls, path, language=None):
        """Read a tokenizer saved by `save`. The language defaults to the one in the file name
        (tokenizer_it.json → 'it')."""
        from tokenizers import Tokenizer

        path = Path(path)
        if language is None:
            match = FILE_NAME.search(path.name)
            if not match:
                raise ValueError(f"{path}: cannot tell the language from the file name; pass language=")
            language = match.group(1)
        if not path.exists():
            raise FileNotFoundError(f"no tokenizer file at {path}")
        text = read_bounded(path, TOKENIZER_BYTES)
        parse_json(text, f"{path}: not a tokenizer file")      # bounded, before the library parses it
        try:
            return cls(Tokenizer.from_str(text.decode("utf-8")), language)
        except Exception as error:  # the tokenizers library raises a bare Exception on bad JSON
            raise ValueError(f"{path}: not a tokenizer file ({error})") from None

    def save(self, path):
        """Write the tokenizer as JSON, atomically (a temporary file renamed into place)."""
        path = Path(path)
        temporary = path.with_name(path.name + ".tmp")
        temporary.write_text(self.tokenizer.to_str(), encoding="utf-8")
        os.replace(temporary, path)

    def word_indices(self, text):
        """For each token of `text`, the index of the space-separated word it comes from: the
        built-in corpus aligns words (`l'` is one word), the model sees tokens (`l` and `'`)."""
        starts = [match.start() for match in re.finditer(r"\S+", text)]
        return [sum(start <= begin for start in starts) - 1 for begin, _ in self.encoded(text)[2]]

    def unknown_words(self, text):
        """The pieces of `text` that encode as [UNK]: words outside a word-level vocabulary, or
        words (WordPiece) and characters (unigram) never seen in training; none for byte-level
        BPE, which spells anything in bytes. A special token's name typed where the vocabulary
        has it as a piece is one too (`encoded`)."""
        ids, _, offsets = self.encoded(text)
        return [text[start:end] for token_id, (start, end) in zip(ids, offsets) if token_id == self.unk_id]

    def count_unknown(self, texts):
        """(unknown tokens, all tokens) over an iterable of texts."""
        unknown = total = 0
        for text in texts:
            ids = self.encode(text)
            unknown += sum(i == self.unk_id for i in ids)
            total += len(ids)
        return unknown, total

    @property
    def unk_id(self):
        return self.tokenizer.token_to_id(UNK)

    @property
    def pad_id(self):
        return self.tokenizer.token_to_id(PAD)

    @property
    def sos_id(self):
        return self.tokenizer.token_to_id(SOS)

    @property
    def eos_id(self):
        return self.tokenizer.token_to_id(EOS)

    @property
    def cls_id(self):
        """The id of [CLS] (None in a translation tokenizer, which lacks BERT's tokens)."""
        return self.tokenizer.token_to_id(CLS)

    @property
    def sep_id(self):
        return self.tokenizer.token_to_id(SEP)

    @property
    def mask_id(self):
        return self.tokenizer.token_to_id(MASK)

    @property
    def special_ids(self):
        """The ids of the special tokens this tokenizer has."""
        return [self.tokenizer.token_to_id(token) for token in SPECIAL_TOKENS + MASKED_LM_TOKENS
                if self.tokenizer.token_to_id(token) is not None]


def _kept_pattern(token, lstrip):
    """The regular expression of a special token kept where typed, with the spaces before it
    when it takes them."""
    return (r"\s*" if lstrip else "") + re.escape(token)


def tokenizer_path(directory, language):
    return Path(directory) / f"tokenizer_{language}.json"


def train_tokenizers(splits, min_frequency=MIN_FREQUENCY, kind="word", vocab_size=None, shared=False):
    """(source, target) tokenizers of `kind` trained on the training split of a `DataSplits`
    only (the validation and test words the model never saw stay unknown, as they would in use);
    `vocab_size`: the entries of each subword vocabulary. shared: one vocabulary trained on
    both sides, the same for source and target (each keeps its language for `detokenize`)."""
    sources, targets = [pair.src for pair in splits.train], [pair.tgt for pair in splits.train]
    if shared:
        both = train_one(sources + targets, splits.src_language, kind, min_frequency, vocab_size)
        return both, WordTokenizer(both.tokenizer, splits.tgt_language)
    return (train_one(sources, splits.src_language, kind, min_frequency, vocab_size),
            train_one(targets, splits.tgt_language, kind, min_frequency, vocab_size))


def train_text_tokenizer(texts, language, min_frequency=MIN_FREQUENCY, kind="word", vocab_size=None):
    """The one tokenizer of a language model, trained on its training texts: the special tokens
    of translation and BERT's [CLS] [SEP] [MASK] (ids 0–6), then the words or pieces."""
    return train_one(texts, language, kind, min_frequency, vocab_size, SPECIAL_TOKENS + MASKED_LM_TOKENS)


def train_one(sentences, language, kind, min_frequency, vocab_size, special_tokens=SPECIAL_TOKENS):
    """A tokenizer of `kind` (one of `KINDS`) trained on an iterable of sentences."""
    if kind not in KINDS:
        raise ValueError(f"the tokenizer must be one of {KINDS}, got {kind!r}")
    if kind == "word":
        return WordTokenizer.train(sentences, language, min_frequency, special_tokens)
    return WordTokenizer.train_subword(sentences, language, kind, vocab_size, min_frequency, special_tokens)


def _numbered_in_order(tokenizer, n_special):
    """The same tokenizer with its vocabulary numbered in a fixed order: the special tokens
    first, then the other entries in the order of their text. The WordPiece and unigram trainers
    of `tokenizers` number their entries in the order of a hash table, which changes from run to
    run, so the same vocabulary would get other ids (unigram log-probabilities are rounded to
    1e-6 for the same reason). They also break ties between equally frequent candidates in that
    order, so on a small corpus two runs can still learn slightly different entries; a run
    saves its tokenizers, and everything after training reads those. Byte-level BPE's
    numbering, which its merges refer to, is kept."""
    import json

    from tokenizers import Tokenizer

    state = json.loads(tokenizer.to_str())
    model = state["model"]
    if model["type"] == "WordPiece":
        entries = sorted(model["vocab"].items(), key=lambda entry: entry[1])
        model["vocab"] = {token: i for i, (token, _) in enumerate(entries[:n_special] + sorted(entries[n_special:]))}
    elif model["type"] == "Unigram":
        entries = [[token, round(score, 6)] for token, score in model["vocab"]]
        model["vocab"] = entries[:n_special] + sorted(entries[n_special:])
    return Tokenizer.from_str(json.dumps(state))


def _subword_parts(kind, vocab_size, min_frequency, specials):
    """(model, pre-tokenizer, decoder, trainer) of a subword kind: byte-level BPE splits text
    into bytes, WordPiece at spaces (punctuation stays in the word, so decoding restores every
    space), unigram at spaces marked `▁`."""
    from tokenizers import decoders, models, pre_tokenizers, trainers

    if kind == "bpe":
        return (models.BPE(unk_token=UNK), pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel(),
                trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=specials,
                                    show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    if kind == "wordpiece":
        return (models.WordPiece(unk_token=UNK, continuing_subword_prefix=CONTINUATION),
                pre_tokenizers.WhitespaceSplit(), decoders.WordPiece(prefix=CONTINUATION, cleanup=False),
                trainers.WordPieceTrainer(vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=specials,
                                          show_progress=False))
    return (models.Unigram(), pre_tokenizers.Metaspace(), decoders.Metaspace(),
            trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=specials, unk_token=UNK, show_progress=False))


def save_tokenizers(directory, *tokenizers):
    """Write each tokenizer to `directory`/tokenizer_<language>.json."""
    for tokenizer in tokenizers:
        tokenizer.save(tokenizer_path(directory, tokenizer.language))


def load_tokenizers(directory, *languages):
    """The tokenizers saved in `directory` for `languages`, in that order."""
    return tuple(WordTokenizer.load(tokenizer_path(directory, language), language) for language in languages)
