"""The language models' texts: every source (a side of the built-in corpus or of a pairs file, a
.txt file, a Hub dataset from its cache, an unreachable Hub), the framings and the
maximum-length policies, and the tokenizer's [CLS] [SEP] [MASK]. Nothing here downloads."""
import datasets
import huggingface_hub.constants
import numpy as np
import pytest

from numpy_transformer.data import load_dataset_splits, load_text_splits, train_text_tokenizer
from numpy_transformer.data.texts import encode_texts, framed
from run_helpers import assert_unavailable_at_once, fake_cached_dataset, write_opus_jsonl, written_pairs

CLOSED_PORT = "http://127.0.0.1:9"


@pytest.fixture
def unreachable_hub(monkeypatch):
    """Every request to the Hub goes to a closed local port: refused at once, whatever the network."""
    monkeypatch.setattr(datasets.config, "HF_ENDPOINT", CLOSED_PORT)
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", CLOSED_PORT)


def test_a_side_of_the_built_in_corpus_keeps_the_split_of_its_pairs():
    pairs = load_dataset_splits("builtin", n_pairs=100)
    for language, side in (("en", "src"), ("it", "tgt")):
        texts = load_text_splits("builtin", language, n_pairs=100)
        assert texts.language == language and "synthetic" in texts.source and f"its {language} side" in texts.source
        for split_texts, split_pairs in zip(texts, pairs):
            assert split_texts == [getattr(pair, side) for pair in split_pairs]


def test_a_language_the_corpus_lacks_is_refused():
    with pytest.raises(ValueError, match="it has the languages en and it, not 'de'; choose one with --language"):
        load_text_splits("builtin", "de", n_pairs=30)


def test_a_side_of_a_pairs_file(tmp_path):
    path = write_opus_jsonl(tmp_path / "pairs.jsonl", written_pairs(40))
    texts = load_text_splits(str(path), "it")
    assert sum(map(len, texts)) == 40 and texts.language == "it"
    assert set(texts.train) <= {pair.tgt for pair in written_pairs(40)}


def test_a_text_file_gives_one_text_per_line_blank_lines_skipped_split_90_5_5(tmp_path):
    path = tmp_path / "story.txt"
    path.write_text("".join(f"  line number {i} .\n" + ("\n" if i % 3 == 0 else "") for i in range(100)),
                    encoding="utf-8")
    texts = load_text_splits(str(path), "en", seed=1)
    assert [len(split) for split in texts] == [90, 5, 5]
    assert sorted(text for split in texts for text in split) == sorted(f"line number {i} ." for i in range(100))
    assert texts.source == f"local text file {path} (100 texts)"
    assert load_text_splits(str(path), "en", seed=1).train == texts.train != load_text_splits(str(path), "en").train
    assert len(load_text_splits(str(path), "en", subset=20).train) == 18


@pytest.mark.parametrize("content, message", [(b"\n  \n", "the file has no text"),
                                              (b"caf\xe9\n", "line 1 is not UTF-8 text")])
def test_an_empty_or_undecodable_text_file_is_one_clear_error(tmp_path, content, message):
    path = tmp_path / "bad.txt"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message):
        load_text_splits(str(path))


def test_a_missing_text_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.txt: no such file"):
        load_text_splits(str(tmp_path / "missing.txt"))


def fake_cached_texts(cache_dir, name, config, splits, column="text"):
    """A cached Hub dataset `name` whose splits ({split: texts}) have one column of texts."""
    fake_cached_dataset(cache_dir, name, config, {split: [{column: text} for text in texts]
                                                  for split, texts in splits.items()})


def test_a_cached_hub_dataset_keeps_its_own_validation_and_test_splits(unreachable_hub, tmp_path):
    cache = tmp_path / "cache"
    train = [f"text {i}" for i in range(40)] + ["", "   "]
    fake_cached_texts(cache, "someone/tiny_texts", "plain", {"train": train, "validation": ["v 1", "v 2"],
                                                             "test": ["t 1"]})
    texts = load_text_splits("someone/tiny_texts", "en", dataset_config="plain", cache_dir=cache)
    assert sorted(texts.train) == sorted(train[:40])           # blank texts skipped, nothing held out of train
    assert (texts.validation, texts.test) == (["v 1", "v 2"], ["t 1"])
    assert "train: its own (40 texts), validation: its own (2 texts), test: its own (1 text)" in texts.source


def test_a_hub_dataset_with_only_a_training_split_has_its_held_out_splits_carved_from_it(unreachable_hub, tmp_path):
    cache = tmp_path / "cache"
    fake_cached_texts(cache, "someone/only_train", "plain", {"train": [f"text {i}" for i in range(100)]})
    texts = load_text_splits("someone/only_train", dataset_config="plain", cache_dir=cache)
    assert [len(split) for split in texts] == [90, 5, 5]
    assert "validation: carved from train (5 texts), test: carved from train (5 texts)" in texts.source


def test_a_hub_dataset_without_a_text_column_names_its_columns(unreachable_hub, tmp_path):
    cache = tmp_path / "cache"
    fake_cached_texts(cache, "someone/tiny_texts", "plain", {"train": ["a"]}, column="sentence")
    with pytest.raises(ValueError, match=r"the dataset someone/tiny_texts has no 'text' column \(its columns: "
                                         r"\['sentence'\]\)"):
        load_text_splits("someone/tiny_texts", dataset_config="plain", cache_dir=cache)


def test_an_unreachable_hub_gives_one_helpful_error_within_seconds(unreachable_hub, tmp_path):
    assert_unavailable_at_once(
        lambda: load_text_splits("wikitext", dataset_config="wikitext-2-raw-v1", cache_dir=tmp_path / "cache"),
        "Cannot load the dataset wikitext (wikitext-2-raw-v1): the Hugging Face Hub",
        ("datasets.load_dataset('wikitext', 'wikitext-2-raw-v1')", "HF_HUB_OFFLINE=1", "--dataset FILE.txt",
         "--dataset builtin"))


TEXTS = ["the cat sat on the mat .", "a dog .", "the dog sat on the cat and the mat ."]


@pytest.fixture(scope="module")
def tokenizer():
    return train_text_tokenizer(TEXTS * 2, "en")


def test_a_language_model_tokenizer_has_bert_s_tokens_after_the_four_of_translation(tokenizer):
    assert [tokenizer.unk_id, tokenizer.pad_id, tokenizer.sos_id, tokenizer.eos_id] == [0, 1, 2, 3]
    assert [tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id] == [4, 5, 6]
    assert tokenizer.encode("the [MASK] sat", keep=[tokenizer.mask_id])[1] == tokenizer.mask_id
    assert tokenizer.token(tokenizer.encode("cat")[0]) == "cat" and tokenizer.token(6) == "[MASK]"


def test_byte_level_bpe_s_mask_takes_the_space_before_it():
    bpe = train_text_tokenizer(TEXTS * 5, "en", kind="bpe", vocab_size=300)
    assert bpe.tokens("the [MASK] sat", keep=[bpe.mask_id])[1:] == ["[MASK]", "Ġsat"]   # no stray "Ġ" before it
    assert bpe.tokens("the cat sat")[1] == "Ġcat" and bpe.token(bpe.encode("the cat")[1]) == "cat"


@pytest.mark.parametrize("framing, first, last", [("causal", "sos_id", "eos_id"), ("masked", "cls_id", "sep_id")])
def test_framing_wraps_each_text_in_its_special_tokens_and_pads_on_the_right(tokenizer, framing, first, last):
    encoded = encode_texts(TEXTS, tokenizer, framing=framing)
    ids = framed(encoded, np.arange(3))
    assert ids.shape == (3, 12)
    for row, text in zip(ids, TEXTS):
        tokens = tokenizer.encode(text)
        np.testing.assert_array_equal(row[:len(tokens) + 2],
                                      [getattr(tokenizer, first), *tokens, getattr(tokenizer, last)])
        assert (row[len(tokens) + 2:] == tokenizer.pad_id).all()


@pytest.mark.parametrize("framing, fits", [("causal", 7), ("masked", 8)])
def test_a_text_fits_when_the_model_reads_it_within_max_len(tokenizer, framing, fits):
    """The causal model reads [SOS] x (len + 1), the masked one [CLS] x [SEP] (len + 2)."""
    six = "the cat sat on the mat"
    assert len(encode_texts([six], tokenizer, fits, "drop", framing)) == 1
    dropped = encode_texts([six], tokenizer, fits - 1, "drop", framing)
    assert len(dropped) == 0 and dropped.n_dropped == 1


def test_truncate_keeps_the_first_tokens_and_split_keeps_every_token_in_pieces(tokenizer):
    tokens = tokenizer.encode(TEXTS[2])                                             # 10 tokens
    truncated = encode_texts(TEXTS, tokenizer, 6, "truncate", "causal")            # room for 5
    assert [len(x) for x in truncated.ids] == [5, 3, 5] and truncated.n_cut == 2
    np.testing.assert_array_equal(truncated.ids[2], tokens[:5])
    split = encode_texts(TEXTS, tokenizer, 6, "split", "causal")
    assert [len(x) for x in split.ids] == [5, 2, 3, 5, 5] and split.n_cut == 2
    assert split.text_index.tolist() == [0, 0, 1, 2, 2]
    np.testing.assert_array_equal(np.concatenate(split.ids[3:]), tokens)
    assert "2 texts split" in split.report()
