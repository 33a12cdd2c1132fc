"""Word-level tokenizers (WordLevel + Whitespace, min_frequency 2, [UNK] [PAD] [SOS] [EOS]) and the
detokenizer that turns `l ' uomo .` back into `l'uomo.` before scoring."""
import json

import pytest

from numpy_transformer.data import builtin_splits, detokenize
from numpy_transformer.data.tokenizer import (SPECIAL_TOKENS, WordTokenizer, load_tokenizers, save_tokenizers,
                                              tokenizer_path, train_tokenizers)

ITALIAN = ["l' uomo mangia la mela .", "l' uomo beve dell' acqua .", "la donna mangia la mela .",
           "la donna beve dell' acqua .", "il gatto dorme ."]


@pytest.fixture(scope="module")
def italian_tokenizer():
    return WordTokenizer.train(ITALIAN, "it")


def test_special_tokens_come_first_with_fixed_ids(italian_tokenizer):
    assert SPECIAL_TOKENS == ("[UNK]", "[PAD]", "[SOS]", "[EOS]")
    t = italian_tokenizer
    assert (t.unk_id, t.pad_id, t.sos_id, t.eos_id) == (0, 1, 2, 3)
    assert [t.tokenizer.id_to_token(i) for i in range(4)] == list(SPECIAL_TOKENS)


def test_the_whitespace_pre_tokenizer_splits_words_and_punctuation(italian_tokenizer):
    assert italian_tokenizer.tokens("l' uomo mangia la mela .") == ["l", "'", "uomo", "mangia", "la", "mela", "."]
    assert italian_tokenizer.tokens("l'uomo mangia la mela.") == ["l", "'", "uomo", "mangia", "la", "mela", "."]


def test_encode_then_decode_gives_the_tokens_back(italian_tokenizer):
    ids = italian_tokenizer.encode("la donna mangia la mela .")
    assert italian_tokenizer.decode(ids) == "la donna mangia la mela ."
    assert italian_tokenizer.detokenize(italian_tokenizer.encode("l' uomo beve dell' acqua .")) == \
        "l'uomo beve dell'acqua."


def test_decode_drops_special_tokens(italian_tokenizer):
    t = italian_tokenizer
    ids = [t.sos_id] + t.encode("la donna dorme") + [t.eos_id, t.pad_id, t.pad_id]
    assert t.decode(ids) == "la donna"      # `dorme` was seen once: [UNK], dropped too


def test_a_word_seen_once_is_unknown_with_minimum_frequency_2(italian_tokenizer):
    t = italian_tokenizer
    assert t.tokenizer.token_to_id("gatto") is None             # seen once
    assert t.tokenizer.token_to_id("mela") is not None           # seen twice
    assert t.encode("il gatto mangia")[1] == t.unk_id
    assert t.unknown_words("il gatto mangia la pizza") == ["il", "gatto", "pizza"]
    assert t.count_unknown(["il gatto mangia", "la mela"]) == (2, 5)
    assert WordTokenizer.train(ITALIAN, "it", min_frequency=1).tokenizer.token_to_id("gatto") is not None


def test_vocabulary_size_counts_specials_and_frequent_words(italian_tokenizer):
    frequent = {"l", "'", "uomo", "mangia", "la", "mela", ".", "beve", "dell", "acqua", "donna"}
    assert italian_tokenizer.vocab_size == 4 + len(frequent)


def test_saved_and_loaded_tokenizers_give_identical_ids(tmp_path, italian_tokenizer):
    english = WordTokenizer.train(["the man eats .", "the man drinks ."], "en")
    save_tokenizers(tmp_path, english, italian_tokenizer)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tokenizer_en.json", "tokenizer_it.json"]
    loaded_en, loaded_it = load_tokenizers(tmp_path, "en", "it")
    for text in ITALIAN + ["parole mai viste ."]:
        assert loaded_it.encode(text) == italian_tokenizer.encode(text)
    assert loaded_en.encode("the man eats .") == english.encode("the man eats .")
    assert WordTokenizer.load(tokenizer_path(tmp_path, "it")).language == "it"


def test_loading_a_missing_or_broken_file_says_which(tmp_path):
    with pytest.raises(FileNotFoundError, match="tokenizer_it.json"):
        WordTokenizer.load(tmp_path / "tokenizer_it.json")
    broken = tmp_path / "tokenizer_en.json"
    broken.write_text("{not json")
    with pytest.raises(ValueError, match="not a tokenizer file"):
        WordTokenizer.load(broken)
    unnamed = tmp_path / "vocabulary.json"
    unnamed.write_text(json.dumps({}))
    with pytest.raises(ValueError, match="language"):
        WordTokenizer.load(unnamed)


def test_word_indices_map_tokens_to_the_corpus_words(italian_tokenizer):
    # The built-in corpus aligns words (`l'` is one); the model sees tokens (`l`, `'`).
    assert italian_tokenizer.word_indices("l' uomo beve dell' acqua .") == [0, 0, 1, 2, 3, 3, 4, 5]


def test_tokenizers_are_trained_on_the_training_split_only():
    splits = builtin_splits(n_pairs=400)
    source, target = train_tokenizers(splits)
    train_words = {word for pair in splits.train for word in pair.tgt.replace("'", " ").split()}
    test_only = {word for pair in splits.test for word in pair.tgt.replace("'", " ").split()} - train_words
    assert (source.language, target.language) == ("en", "it")
    assert all(target.tokenizer.token_to_id(word) is None for word in test_only)


# ---------------------------------------------------------------- detokenizer

@pytest.mark.parametrize("tokens, language, text", [
    ("l' uomo", "it", "l'uomo"),
    ("l ' uomo", "it", "l'uomo"),
    ("dell' acqua", "it", "dell'acqua"),
    ("c' è un gatto .", "it", "c'è un gatto."),
    ("un po ' di pane", "it", "un po' di pane"),
    ("sì , grazie !", "it", "sì, grazie!"),
    ("( nota ) : « ciao » ; fine ?", "it", "(nota): «ciao»; fine?"),
    ('" ciao " , disse .', "it", '"ciao", disse.'),
    ("3 . 5 e 1 , 000", "it", "3.5 e 1,000"),
    ("ben - noto", "it", "ben-noto"),
    ("don ' t , Anna ' s book .", "en", "don't, Anna's book."),
    ("I ' m here ; we ' re there .", "en", "I'm here; we're there."),
])
def test_detokenize(tokens, language, text):
    assert detokenize(tokens, language) == text


def test_detokenizing_written_text_changes_nothing():
    for text, language in [("L'uomo beve dell'acqua, poi un po' di vino.", "it"), ("Don't go (now)!", "en")]:
        assert detokenize(text, language) == text
    for pair in builtin_splits(n_pairs=300).train:
        once = detokenize(pair.tgt, "it")
        assert detokenize(once, "it") == once and " ." not in once and "' " not in once


# Byte-level BPE (`--tokenizer bpe`).

ENGLISH = ["the man eats the apple .", "the woman reads a long book .", "the teachers read the books ."] * 40


def test_bpe_spells_any_text_and_decodes_it_back():
    bpe = WordTokenizer.train_bpe(ENGLISH, "en", vocab_size=300)
    assert bpe.kind == "bpe" and 260 <= bpe.vocab_size <= 300
    assert [bpe.tokenizer.token_to_id(token) for token in ("[UNK]", "[PAD]", "[SOS]", "[EOS]")] == [0, 1, 2, 3]
    for text in ("the man eats the apple .", "the caté zebra", "naïve 北京 ?"):
        ids = bpe.encode(text)
        assert bpe.unk_id not in ids and bpe.decode(ids) == text
    assert bpe.unknown_words("the zebra") == []
    assert len(bpe.encode("the woman reads")) < len("the woman reads")        # merges: fewer tokens than bytes


def test_bpe_round_trips_through_a_file(tmp_path):
    bpe = WordTokenizer.train_bpe(ENGLISH, "en", vocab_size=300)
    bpe.save(tmp_path / "tokenizer_en.json")
    loaded = WordTokenizer.load(tmp_path / "tokenizer_en.json")
    assert loaded.kind == "bpe" and loaded.encode("the books") == bpe.encode("the books")


def test_a_translation_run_trains_and_translates_with_bpe(tmp_path):
    from numpy_transformer.training.checkpoint import load_checkpoint
    from numpy_transformer.training.run import Run
    from numpy_transformer.translation import translate
    from run_helpers import tiny_configs

    with Run.new(tmp_path / "run", *tiny_configs(data={"tokenizer": "bpe", "vocab_size": 300},
                                                 training={"steps": 3}), report=None) as run:
        run.train()
        assert run.data.src_tokenizer.kind == run.data.tgt_tokenizer.kind == "bpe"
    checkpoint = load_checkpoint(tmp_path / "run")
    assert checkpoint.data_config.tokenizer == "bpe" and checkpoint.src_tokenizer.kind == "bpe"
    [output] = translate(checkpoint.model, checkpoint.src_tokenizer, checkpoint.tgt_tokenizer, ["the cat sleeps ."])
    assert isinstance(output, str)


def test_an_unknown_tokenizer_kind_is_refused():
    from numpy_transformer.training.configs import DataConfig

    with pytest.raises(ValueError, match=r"tokenizer must be one of \('word', 'bpe'\), got 'char'"):
        DataConfig(tokenizer="char")
    with pytest.raises(ValueError, match="vocab_size must be an integer ≥ 260"):
        DataConfig(tokenizer="bpe", vocab_size=100)
