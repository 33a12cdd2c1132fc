"""The real English–Italian corpus in the package (numpy_transformer/data/tatoeba.py): it loads
offline through the package, credits Tatoeba, and its held-out splits are made by source
sentence, so no held-out English sentence occurs in training."""
import gzip
import re

import pytest

from numpy_transformer.data import load_dataset_splits, load_text_splits
from numpy_transformer.data import tatoeba
from numpy_transformer.data.corpus import Pair, source_key, split_pairs


@pytest.fixture(scope="module")
def splits():
    return load_dataset_splits("tatoeba")


def normalised(text):
    return re.sub(r"[^\w ]", " ", text.lower()).split()


@pytest.fixture(scope="module")
def full_splits():
    return load_dataset_splits("tatoeba-full")


def test_the_corpus_ships_compressed_within_a_few_megabytes():
    files = sorted(tatoeba.CORPUS_FOLDER.glob("*.jsonl.*"))
    assert [file.name for file in files] == ["train-more.jsonl.xz", "train.jsonl.gz", "validation.jsonl.gz"]
    assert sum(file.stat().st_size for file in files) < 6_000_000
    assert "Tatoeba (tatoeba.org), CC-BY 2.0 FR" in (tatoeba.CORPUS_FOLDER / "README.md").read_text()


def test_split_sizes_and_the_attribution_in_the_source_line(splits):
    assert len(splits.train) + len(splits.test) == 60_000
    assert len(splits.validation) == 2303
    assert len({pair.src for pair in splits.validation}) == 1000
    assert len({source_key(pair.src) for pair in splits.test}) == 1000
    assert "Tatoeba (tatoeba.org), CC-BY 2.0 FR" in splits.source
    assert "carved from train by source" in splits.source
    assert (splits.src_language, splits.tgt_language) == ("en", "it")


def test_no_held_out_source_occurs_in_training_even_up_to_case_and_punctuation(splits):
    train = {pair.src for pair in splits.train}
    train_normalised = {tuple(normalised(source)) for source in train}
    for held_out in (splits.validation, splits.test):
        sources = {pair.src for pair in held_out}
        assert not sources & train
        assert not {tuple(normalised(source)) for source in sources} & train_normalised


def test_every_translation_of_a_test_source_goes_with_it(splits):
    everything = load_dataset_splits("tatoeba", subset=None)
    test_sources = {pair.src for pair in splits.test}
    all_pairs = everything.train + everything.test
    assert sorted((p.src, p.tgt) for p in all_pairs if p.src in test_sources) == \
        sorted((p.src, p.tgt) for p in splits.test)
    assert sum(1 for p in splits.test if sum(q.src == p.src for q in splits.test) > 1) > 100


def test_the_seed_chooses_the_test_sources_and_the_same_seed_the_same_ones(splits):
    again, other = load_dataset_splits("tatoeba"), load_dataset_splits("tatoeba", seed=1)
    assert again.test == splits.test
    assert {p.src for p in other.test} != {p.src for p in splits.test}


def test_a_subset_keeps_five_percent_of_its_sources_for_the_test(splits):
    small = load_dataset_splits("tatoeba", subset=2000)
    assert len(small.train) + len(small.test) == 2000
    sources = {source_key(p.src) for p in small.train} | {source_key(p.src) for p in small.test}
    assert len({source_key(p.src) for p in small.test}) == round(0.05 * len(sources))
    assert small.validation == splits.validation
    assert "subset of train: first 2000" in small.source


def test_italian_into_english_swaps_every_split(splits):
    reverse = load_dataset_splits("tatoeba", pair="it-en")
    assert reverse.validation == [Pair(pair.tgt, pair.src) for pair in splits.validation]
    assert sorted((p.src, p.tgt) for p in reverse.train + reverse.test) == \
        sorted((p.tgt, p.src) for p in splits.train + splits.test)
    assert not {source_key(p.src) for p in reverse.test} & {source_key(p.src) for p in reverse.train}
    assert (reverse.src_language, reverse.tgt_language) == ("it", "en")
    with pytest.raises(ValueError, match="English–Italian: pair 'en-it' or 'it-en', got 'en-de'"):
        load_dataset_splits("tatoeba", pair="en-de")


def test_a_language_model_reads_one_side(splits):
    texts = load_text_splits("tatoeba", language="it")
    assert texts.train == [pair.tgt for pair in splits.train]


def test_a_damaged_corpus_file_is_named_with_its_line(tmp_path):
    path = tmp_path / "train.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as file:
        file.write('{"translation": {"en": "Hi.", "it": "Ciao."}}\n{"translation": {"en": "Hi."}}\n')
    with pytest.raises(ValueError, match=r"train.jsonl.gz: line 2 lacks a 'translation' with English and Italian"):
        tatoeba.read_rows(path)
    path.write_bytes(gzip.compress(b"not json\n"))
    with pytest.raises(ValueError, match="line 1 is not JSON"):
        tatoeba.read_rows(path)


def test_the_seeded_split_keeps_every_source_with_all_its_translations():
    pairs = [Pair(f"s{i // 3}", f"t{i}") for i in range(300)]        # 100 sources, 3 translations each
    train, validation, test = split_pairs(pairs, seed=0)
    assert sorted(train + validation + test, key=lambda p: p.tgt) == sorted(pairs, key=lambda p: p.tgt)
    for part in (validation, test):
        assert len(part) == 15 and not {p.src for p in part} & {p.src for p in train}


def test_sources_equal_up_to_case_punctuation_and_spacing_are_one_source():
    pairs = [Pair("Hey. Where are you going?", "a"), Pair("hey, where  are you going", "b")] + \
        [Pair(f"s{i}", f"t{i}") for i in range(60)]
    for seed in range(5):
        parts = split_pairs(pairs, seed=seed)
        assert [sum(p.tgt in "ab" for p in part) for part in parts].count(2) == 1


def test_with_distinct_sources_the_split_is_a_shuffle_of_the_pairs():
    import numpy as np
    pairs = [Pair(f"s{i}", f"t{i}") for i in range(100)]
    order = np.random.default_rng(3).permutation(100)
    assert split_pairs(pairs, seed=3) == ([pairs[i] for i in order[:90]], [pairs[i] for i in order[90:95]],
                                          [pairs[i] for i in order[95:]])


def test_the_full_corpus_is_the_default_corpus_and_more_with_the_same_validation(splits, full_splits):
    assert len(full_splits.train) + len(full_splits.test) == 344_949
    assert full_splits.validation == splits.validation
    assert len({source_key(pair.src) for pair in full_splits.test}) == 1000
    first = load_dataset_splits("tatoeba-full", subset=60_000)
    assert sorted(first.train + first.test, key=lambda p: (p.src, p.tgt)) == \
        sorted(splits.train + splits.test, key=lambda p: (p.src, p.tgt))
    assert "every pair" in full_splits.source and "Tatoeba (tatoeba.org), CC-BY 2.0 FR" in full_splits.source


def test_no_held_out_source_of_the_full_corpus_occurs_in_its_training_even_up_to_case_and_punctuation(full_splits):
    train_normalised = {tuple(normalised(pair.src)) for pair in full_splits.train}
    for held_out in (full_splits.validation, full_splits.test):
        assert not {pair.src for pair in held_out} & {pair.src for pair in full_splits.train}
        assert not {tuple(normalised(pair.src)) for pair in held_out} & train_normalised
    assert sum(1 for p in full_splits.test if sum(q.src == p.src for q in full_splits.test) > 1) > 500


def write_jsonl(path, pairs, ids=True):
    import json
    lines = "".join(json.dumps({**({"id": str(i)} if ids else {}), "translation": {"en": en, "it": it}},
                               ensure_ascii=False) + "\n" for i, (en, it) in enumerate(pairs))
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(lines.encode("utf-8"), mtime=0))
    else:
        path.write_text(lines, encoding="utf-8")


def build_script():
    import importlib.util
    from pathlib import Path
    spec = importlib.util.spec_from_file_location("build_tatoeba", Path(__file__).parents[1] / "scripts" /
                                                  "build_tatoeba.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_build_script_writes_the_same_bytes_every_time_and_leaves_out_validation_sources(tmp_path):
    train = [("Hello.", "Ciao."), ("I'm here.", "Sono qui.")]
    more = [("We succeeded.", "Ce l'abbiamo fatta."), ("Where's the cat?", "Dov'è il gatto?")]
    write_jsonl(tmp_path / "train.jsonl", train)
    write_jsonl(tmp_path / "validation.jsonl", [("We succeeded!", "Siamo riusciti!")])
    write_jsonl(tmp_path / "train-full.jsonl.gz", train + more)
    build = build_script()
    build.build(tmp_path, tmp_path / "first")
    build.build(tmp_path, tmp_path / "second")
    for name in ("train.jsonl.gz", "validation.jsonl.gz", tatoeba.MORE_FILE):
        assert (tmp_path / "first" / name).read_bytes() == (tmp_path / "second" / name).read_bytes()
    assert tatoeba.read_rows(tmp_path / "first" / "train.jsonl.gz") == train
    assert tatoeba.read_rows(tmp_path / "first" / tatoeba.MORE_FILE, compression="xz") == more[1:]
    write_jsonl(tmp_path / "train-full.jsonl.gz", more + train)
    with pytest.raises(SystemExit, match="does not begin with the rows of"):
        build.build(tmp_path, tmp_path / "third")
