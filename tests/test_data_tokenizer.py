"""Word-level tokenizers (WordLevel + Whitespace, min_frequency 2, [UNK] [PAD] [SOS] [EOS]) and the
detokenizer that turns `l ' uomo .` back into `l'uomo.` before scoring."""
import json
from types import SimpleNamespace

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
    ("„ Ja “ , sagte sie – „ gut “ .", "de", "„Ja“, sagte sie – „gut“."),
    ("he said “ yes ” and “ no ” .", "en", "he said “yes” and “no”."),
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
    bpe = WordTokenizer.train_subword(ENGLISH, "en", "bpe", vocab_size=300)
    assert bpe.kind == "bpe" and 260 <= bpe.vocab_size <= 300
    assert [bpe.tokenizer.token_to_id(token) for token in ("[UNK]", "[PAD]", "[SOS]", "[EOS]")] == [0, 1, 2, 3]
    for text in ("the man eats the apple .", "the caté zebra", "naïve 北京 ?"):
        ids = bpe.encode(text)
        assert bpe.unk_id not in ids and bpe.decode(ids) == text
    assert bpe.unknown_words("the zebra") == []
    assert len(bpe.encode("the woman reads")) < len("the woman reads")        # merges: fewer tokens than bytes


def test_bpe_round_trips_through_a_file(tmp_path):
    bpe = WordTokenizer.train_subword(ENGLISH, "en", "bpe", vocab_size=300)
    bpe.save(tmp_path / "tokenizer_en.json")
    loaded = WordTokenizer.load(tmp_path / "tokenizer_en.json")
    assert loaded.kind == "bpe" and loaded.encode("the books") == bpe.encode("the books")


def test_an_unknown_tokenizer_kind_is_refused():
    from numpy_transformer.training.settings import DataConfig

    with pytest.raises(ValueError, match=r"tokenizer must be one of \('word', 'bpe', 'wordpiece', 'unigram'\), "
                                         r"got 'char'"):
        DataConfig(tokenizer="char")
    with pytest.raises(ValueError, match="vocab_size must be an integer ≥ 260"):
        DataConfig(tokenizer="bpe", vocab_size=100)
    with pytest.raises(ValueError, match="shared_vocabulary is for translation"):
        DataConfig(task="lm", shared_vocabulary=True)
    with pytest.raises(ValueError, match="shared_vocabulary must be true or false, got 'yes'"):
        DataConfig(shared_vocabulary="yes")


# Subword kinds (`--tokenizer bpe|wordpiece|unigram`) and shared vocabularies.

REAL_LOOKING = {
    "en": ["A man in an orange hat, staring at something.", "Don't touch the café's crème brûlée!",
           "It's 3.5 km (about 2 miles) from here, isn't it?", 'She said "yes" -- then she left.',
           "Two dogs play in the snow; one wears a well-known red collar."],
    "de": ["Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt.", "Fass die Crème brûlée im Café nicht an!",
           "Es sind 3,5 km (etwa 2 Meilen) von hier, nicht wahr?", "„Ja“, sagte sie – dann ging sie.",
           "Zwei Hunde spielen im Schnee an der Straßenbahnhaltestelle."],
    "it": ["L'uomo beve dell'acqua, poi un po' di vino!", "Perché non è venuto all'università?"],
}
SUBWORD_KINDS = ("bpe", "wordpiece", "unigram")


def subword_tokenizer(kind, language, vocab_size=400):
    return WordTokenizer.train_subword(REAL_LOOKING[language] * 20, language, kind, vocab_size)


@pytest.mark.parametrize("kind", SUBWORD_KINDS)
@pytest.mark.parametrize("language", ["en", "de", "it"])
def test_subword_ids_detokenize_to_the_written_sentence(kind, language):
    tokenizer = subword_tokenizer(kind, language)
    assert tokenizer.kind == kind
    for sentence in REAL_LOOKING[language]:
        ids = tokenizer.encode(sentence)
        assert tokenizer.unk_id not in ids
        assert tokenizer.decode(ids) == sentence and tokenizer.detokenize(ids) == sentence


def test_wordpiece_marks_continuations_and_unigram_word_starts_but_decoding_drops_the_marks():
    wordpiece, unigram = subword_tokenizer("wordpiece", "de", 300), subword_tokenizer("unigram", "de", 300)
    sentence = "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt."
    assert any(token.startswith("##") for token in wordpiece.tokens("Hundehut"))        # a new compound
    assert unigram.tokens(sentence)[0].startswith("▁")
    for tokenizer in (wordpiece, unigram):
        decoded = tokenizer.decode(tokenizer.encode(sentence))
        assert "##" not in decoded and "▁" not in decoded and decoded == sentence


def test_a_wordpiece_continuation_that_comes_first_loses_its_mark_too():
    tokenizer = subword_tokenizer("wordpiece", "de", 300)
    continuation = next(i for token, i in tokenizer.tokenizer.get_vocab().items() if token.startswith("##"))
    text = tokenizer.decode([tokenizer.sos_id, continuation, *tokenizer.encode("Hut")])
    assert "#" not in text and text.endswith(" Hut")


@pytest.mark.parametrize("kind", ["wordpiece", "unigram"])
def test_wordpiece_and_unigram_entries_are_numbered_in_a_fixed_order(kind):
    tokenizer = subword_tokenizer(kind, "de", 300)
    entries = [tokenizer.tokenizer.id_to_token(i) for i in range(tokenizer.vocab_size)]
    assert entries[:4] == list(SPECIAL_TOKENS) and entries[4:] == sorted(entries[4:])


@pytest.mark.parametrize("kind, unknown", [("wordpiece", ["北京,"]), ("unigram", ["北京"]), ("bpe", [])])
def test_unknown_pieces_are_words_or_characters_never_seen(kind, unknown):
    tokenizer = subword_tokenizer(kind, "en")
    assert tokenizer.unknown_words("A man in 北京, staring.") == unknown


@pytest.mark.parametrize("kind", SUBWORD_KINDS)
def test_every_kind_has_the_special_tokens_first_and_round_trips_through_a_file(tmp_path, kind):
    from numpy_transformer.data import train_text_tokenizer

    tokenizer = train_text_tokenizer(REAL_LOOKING["en"] * 20, "en", kind=kind, vocab_size=300)
    names = ("[UNK]", "[PAD]", "[SOS]", "[EOS]", "[CLS]", "[SEP]", "[MASK]")
    assert [tokenizer.tokenizer.id_to_token(i) for i in range(7)] == list(names)
    assert tokenizer.encode("a [MASK] .", keep=[tokenizer.mask_id]).count(tokenizer.mask_id) == 1
    assert tokenizer.mask_id not in tokenizer.encode("a [MASK] .")                   # typed, it is text
    tokenizer.save(tmp_path / "tokenizer_en.json")
    loaded = WordTokenizer.load(tmp_path / "tokenizer_en.json")
    assert loaded.kind == kind and loaded.mask_id == 6
    for sentence in REAL_LOOKING["en"]:
        assert loaded.encode(sentence) == tokenizer.encode(sentence)


def german_english_splits():
    from numpy_transformer.data import DataSplits, Pair

    pairs = [Pair(en, de) for en, de in zip(REAL_LOOKING["en"], REAL_LOOKING["de"])] * 20
    return DataSplits(pairs, pairs[:2], pairs[:2], "test pairs", "en", "de")


@pytest.mark.parametrize("kind", ["word", *SUBWORD_KINDS])
def test_a_shared_vocabulary_is_one_tokenizer_for_both_languages(tmp_path, kind):
    source, target = train_tokenizers(german_english_splits(), kind=kind, vocab_size=400, shared=True)
    assert (source.language, target.language) == ("en", "de")
    assert source.vocab_size == target.vocab_size and source.encode("Café") == target.encode("Café")
    english_only, _ = train_tokenizers(german_english_splits(), kind=kind, vocab_size=400)
    assert source.token(source.encode("dann ging sie")[-1]) == "sie"          # a German word, in the source's
    assert english_only.token(english_only.encode("dann ging sie")[-1]) != "sie"
    save_tokenizers(tmp_path, source, target)
    loaded_source, loaded_target = load_tokenizers(tmp_path, "en", "de")
    assert loaded_source.tokenizer.to_str() == loaded_target.tokenizer.to_str()


@pytest.mark.parametrize("kind", ["word", *SUBWORD_KINDS])
def test_scores_are_computed_on_detokenized_text(monkeypatch, kind):
    """A decoder that returns the reference's own token ids scores BLEU 100: the hypotheses are
    the written references again, with no `##`, `▁` or spaces before punctuation."""
    import numpy_transformer.training.evaluation as evaluation
    import numpy_transformer.translation as translation
    from numpy_transformer.data import encode_pairs

    splits = german_english_splits()
    source, target = train_tokenizers(splits, min_frequency=1, kind=kind, vocab_size=400)
    test = splits.train[:5]
    references = encode_pairs(test, source, target, max_len=64).tgt
    monkeypatch.setattr(translation, "decode_ids", lambda model, sources, *rest: references)
    monkeypatch.setattr(evaluation, "mean_cross_entropy", lambda *arguments, **options: 1.0)
    stand_in = SimpleNamespace(config=SimpleNamespace(position_limit=64))       # decoding and scoring replaced
    result = evaluation.evaluate_pairs(stand_in, source, target, test, beam_size=1)
    assert [[hypothesis] for hypothesis in result.greedy] == [[pair.tgt] for pair in test] == result.references
    assert result.greedy_scores.bleu == pytest.approx(100.0)


@pytest.mark.parametrize("kind, shared", [("bpe", False), ("wordpiece", False), ("unigram", False),
                                         ("wordpiece", True), ("word", True)])
def test_a_translation_run_trains_saves_reloads_and_translates_with_each_kind(tmp_path, kind, shared):
    from numpy_transformer.training.checkpoint import load_checkpoint
    from numpy_transformer.training.run import Run
    from numpy_transformer.translation import translate
    from run_helpers import tiny_configs

    sentences = ["the cat sleeps .", "the teachers read a long book ."]
    subword = {} if kind == "word" else {"vocab_size": 300}        # a word-level vocabulary has no size to set
    configs = tiny_configs(data={"tokenizer": kind, **subword, "shared_vocabulary": shared},
                           training={"steps": 3})
    with Run.new(tmp_path / "run", *configs, report=None) as run:
        run.train()
        assert run.data.src_tokenizer.kind == run.data.tgt_tokenizer.kind == kind
        assert (run.data.src_tokenizer.tokenizer is run.data.tgt_tokenizer.tokenizer) == shared
        before = translate(run.model, run.data.src_tokenizer, run.data.tgt_tokenizer, sentences)
    checkpoint = load_checkpoint(tmp_path / "run")
    assert checkpoint.data_config.tokenizer == kind and checkpoint.data_config.shared_vocabulary == shared
    assert checkpoint.src_tokenizer.kind == kind
    assert checkpoint.src_tokenizer.encode(sentences[1]) == run.data.src_tokenizer.encode(sentences[1])
    after = translate(checkpoint.model, checkpoint.src_tokenizer, checkpoint.tgt_tokenizer, sentences)
    assert after == before and not any("##" in text or "▁" in text for text in after)


@pytest.mark.parametrize("kind", SUBWORD_KINDS)
def test_a_continuation_is_written_after_its_prompt_as_the_whole_decodes(kind):
    from numpy_transformer.completion import continuation_text
    from numpy_transformer.data import train_text_tokenizer

    tokenizer = train_text_tokenizer(REAL_LOOKING["de"] * 20, "de", kind=kind, vocab_size=300)
    ids = [tokenizer.sos_id] + tokenizer.encode("Zwei Schneehunde spielen im Hut, der Schnee.")
    for cut in range(1, len(ids)):
        prompt = tokenizer.decode(ids[:cut])
        assert prompt + continuation_text(tokenizer, ids[cut:], ids[:cut]) == "Zwei Schneehunde spielen im Hut, der Schnee."


# A special token's name typed in a text is text

TYPED = "the [PAD] man [EOS] eats [SOS] bread [MASK] [CLS] [SEP] [UNK] ."


@pytest.mark.parametrize("kind", ("word", *SUBWORD_KINDS))
def test_special_token_names_typed_in_a_text_are_text_not_special_tokens(kind):
    """In a sentence to translate, a prompt or a corpus, `[PAD]` or `[EOS]` are written text:
    read by the tokenizer's ordinary rules (word level: `[` `PAD` `]`; byte-level BPE: bytes, back
    to the same text), or [UNK] where those rules would give the special token itself (a
    WordPiece or unigram vocabulary lists it); never the id that would end or pad the sentence."""
    from numpy_transformer.data import train_text_tokenizer

    tokenizer = train_text_tokenizer(REAL_LOOKING["en"] * 20 + ["the man eats [ PAD ] ."] * 5, "en", kind=kind,
                                     vocab_size=300)
    ids = tokenizer.encode(TYPED)
    assert not set(ids) & (set(tokenizer.special_ids) - {tokenizer.unk_id})
    assert len(ids) == len(tokenizer.tokens(TYPED)) == len(tokenizer.word_indices(TYPED))
    if kind in ("word", "bpe"):
        assert tokenizer.tokens("[PAD]")[:3] == (["[", "PAD", "]"] if kind == "word" else ["[", "P", "A"])
    if kind == "bpe":
        assert tokenizer.decode(ids) == TYPED
    if kind in ("wordpiece", "unigram"):
        assert {"[PAD]", "[EOS]", "[SOS]", "[MASK]"} <= set(tokenizer.unknown_words(TYPED))
    kept = tokenizer.encode(TYPED, keep=[tokenizer.mask_id])
    assert kept.count(tokenizer.mask_id) == 1 and not set(kept) & {tokenizer.pad_id, tokenizer.eos_id}
    assert tokenizer.encode("the man eats .", keep=[tokenizer.mask_id]) == tokenizer.encode("the man eats .")


@pytest.mark.parametrize("kind", ("word", *SUBWORD_KINDS))
def test_encode_gives_the_ids_of_encoded(kind):
    """`encode` without `keep` reads the ids alone (what encode_pairs calls for every sentence),
    and they are `encoded`'s, text for text: special-token names typed in a text made [UNK] or
    text, empty and blank texts, characters never seen."""
    from numpy_transformer.data import train_text_tokenizer

    tokenizer = train_text_tokenizer(REAL_LOOKING["en"] * 20 + ["the man eats [ PAD ] ."] * 5, "en", kind=kind,
                                     vocab_size=300)
    texts = [TYPED, "", " ", "[PAD]", "[EOS][SOS]", "北京 is far", *REAL_LOOKING["en"], *REAL_LOOKING["de"]]
    ids = [tokenizer.encode(text) for text in texts]
    assert ids == [tokenizer.encoded(text)[0] for text in texts]
    assert not {i for row in ids for i in row} & (set(tokenizer.special_ids) - {tokenizer.unk_id})
    assert ids[1] == [] and (kind == "bpe" or tokenizer.unk_id in ids[5])    # bytes: no [UNK] in byte-level BPE


def test_a_corpus_sentence_holding_special_token_names_is_encoded_as_text():
    from numpy_transformer.data import Pair
    from numpy_transformer.data.batching import encode_pairs
    from numpy_transformer.data.tokenizer import train_tokenizers

    splits = german_english_splits()
    source, target = train_tokenizers(splits)
    encoded = encode_pairs([Pair("a [PAD] [EOS] b", "[SOS] c [PAD]")], source, target)
    for ids, tokenizer in ((encoded.src[0], source), (encoded.tgt[0], target)):
        assert not {tokenizer.pad_id, tokenizer.sos_id, tokenizer.eos_id} & set(ids.tolist())


def test_a_prompt_holding_special_token_names_gives_no_special_id_but_its_start():
    from numpy_transformer.completion import prompt_ids
    from numpy_transformer.data import train_text_tokenizer

    tokenizer = train_text_tokenizer(REAL_LOOKING["en"] * 20, "en")
    ids = prompt_ids(tokenizer, "[EOS] [PAD] [SOS]", 64)
    assert ids[0] == tokenizer.sos_id and not set(ids[1:]) & set(tokenizer.special_ids) - {tokenizer.unk_id}
