"""opus_books: offline failure is fast and says what to do; a cached copy loads without network;
language pairs are checked; the subset and split logic is tested on local tables of the real
schema. Nothing here downloads: the Hub endpoint is pointed at a closed local port."""
import json
import shutil
import time
from pathlib import Path

import datasets
import huggingface_hub.constants
import pytest

from numpy_transformer.data import DataUnavailableError, load_dataset_splits
from numpy_transformer.data.hub import hub_is_reachable
from numpy_transformer.data.opus import OPUS_BOOKS_PAIRS, load_opus_books, opus_books_config, opus_splits, parse_pair

CLOSED_PORT = "http://127.0.0.1:9"


@pytest.fixture
def unreachable_hub(monkeypatch):
    """Every request to the Hub goes to a closed local port: refused at once, whatever the network."""
    monkeypatch.setattr(datasets.config, "HF_ENDPOINT", CLOSED_PORT)
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", CLOSED_PORT)


def rows(n):
    return [{"id": str(i), "translation": {"en": f"sentence {i} .", "it": f"frase {i} ."}} for i in range(n)]


def table(n):
    return datasets.Dataset.from_list(rows(n))


def assert_the_message_helps(message):
    for hint in ("HF_DATASETS_CACHE", "HF_HUB_OFFLINE=1", "--dataset FILE", "--dataset builtin",
                 "datasets.load_dataset('Helsinki-NLP/opus_books', 'en-it')"):
        assert hint in message, hint


def test_an_unreachable_hub_gives_one_helpful_error_within_seconds(unreachable_hub, tmp_path):
    start = time.perf_counter()
    with pytest.raises(DataUnavailableError) as failure:
        load_opus_books("en-it", cache_dir=tmp_path / "cache")
    assert time.perf_counter() - start < 10
    message = str(failure.value)
    assert message.startswith(f"Cannot load opus_books en-it: the Hugging Face Hub ({CLOSED_PORT}) cannot be reached")
    assert_the_message_helps(message)
    assert failure.value.__cause__ is None and failure.value.__context__ is None     # no chained traceback
    assert not list(tmp_path.rglob("*.arrow")), "nothing was downloaded"


def test_here_the_real_hub_is_unreachable_and_the_error_comes_within_seconds(tmp_path):
    if hub_is_reachable():
        pytest.skip("the Hugging Face Hub is reachable here; this test must not download")
    start = time.perf_counter()
    with pytest.raises(DataUnavailableError, match="cannot be reached") as failure:
        load_dataset_splits("opus_books", cache_dir=tmp_path / "cache")
    assert time.perf_counter() - start < 10
    assert_the_message_helps(str(failure.value))


def test_offline_mode_without_a_cached_copy_says_so(monkeypatch, unreachable_hub, tmp_path):
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    with pytest.raises(DataUnavailableError, match=r"offline mode is on \(HF_HUB_OFFLINE\), and no copy is cached"):
        load_opus_books("en-it", cache_dir=tmp_path / "cache")


def fake_cached_copy(cache_dir, config, n):
    """Write `n` pairs where `datasets` keeps a downloaded Hub dataset:
    <cache>/Helsinki-NLP___opus_books/<config>/<version>/<hash>/ with the Arrow file and its info."""
    source = cache_dir.parent / "source.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows(n)))
    datasets.load_dataset("json", data_files=str(source), split="train", cache_dir=str(cache_dir.parent / "build"))
    (built,) = [p for p in (cache_dir.parent / "build" / "json").glob("*/*/*") if p.is_dir()]
    target = cache_dir / "Helsinki-NLP___opus_books" / config / "1.0.0" / "0123456789abcdef"
    target.mkdir(parents=True)
    shutil.copy(built / "json-train.arrow", target / "opus_books-train.arrow")
    info = json.loads((built / "dataset_info.json").read_text())
    info.update(builder_name="opus_books", dataset_name="opus_books", config_name=config)
    info["splits"]["train"]["dataset_name"] = "opus_books"
    (target / "dataset_info.json").write_text(json.dumps(info))


def test_a_cached_copy_is_used_without_the_network(unreachable_hub, tmp_path):
    cache = tmp_path / "cache"
    fake_cached_copy(cache, "en-it", 60)
    splits = load_opus_books("en-it", cache_dir=cache, subset=40, subset_mode="random", seed=3)
    assert [len(split) for split in splits] == [36, 2, 2]
    assert splits.source == "opus_books en-it (Helsinki-NLP/opus_books, 60 pairs), subset: random 40 of 60 pairs"
    assert all(pair.src.startswith("sentence") and pair.tgt.startswith("frase") for split in splits for pair in split)


@pytest.mark.parametrize("pair", ["english-italian", "en_it", "EN-IT", "en-en", "en-it-fr", 5])
def test_a_malformed_pair_name_is_refused(pair):
    with pytest.raises(ValueError, match="pair must look like 'en-it'"):
        parse_pair(pair)


def test_a_pair_the_corpus_lacks_lists_how_to_find_the_valid_ones():
    with pytest.raises(ValueError) as failure:
        load_opus_books("en-ja")
    message = str(failure.value)
    assert message.startswith("opus_books has no en-ja pair. Pairs with 'en': ")
    assert "en-it" in message and "get_dataset_config_names" in message and "huggingface.co/datasets" in message


def test_either_order_of_a_pair_names_its_configuration():
    assert opus_books_config("en", "it") == opus_books_config("it", "en") == "en-it"
    assert opus_books_config("fr", "de") == "de-fr"
    assert len(OPUS_BOOKS_PAIRS) == len(set(OPUS_BOOKS_PAIRS)) and "en-it" in OPUS_BOOKS_PAIRS


def test_the_corpus_is_split_90_5_5_disjoint_and_seeded():
    splits = opus_splits(table(200), seed=0)
    assert [len(split) for split in splits] == [180, 10, 10]
    sources = [{pair.src for pair in split} for split in splits]
    assert not (sources[0] & sources[1] or sources[0] & sources[2] or sources[1] & sources[2])
    assert set().union(*sources) == {f"sentence {i} ." for i in range(200)}
    assert opus_splits(table(200), seed=0).test == splits.test
    assert opus_splits(table(200), seed=1).test != splits.test
    assert (splits.src_language, splits.tgt_language) == ("en", "it")


def test_subset_first_n_or_random_n():
    first = opus_splits(table(100), subset=20, subset_mode="first")
    assert {pair.src for split in first for pair in split} == {f"sentence {i} ." for i in range(20)}
    assert first.source.endswith("subset: first 20 of 100 pairs")
    chosen = [{pair.src for split in opus_splits(table(100), subset=20, subset_mode="random", seed=s)
               for pair in split} for s in (0, 0, 1)]
    assert len(chosen[0]) == 20 and chosen[0] == chosen[1] != chosen[2]
    assert chosen[0] != {f"sentence {i} ." for i in range(20)}


def test_bad_subsets_are_refused():
    with pytest.raises(ValueError, match="subset must be an integer from 1 to the corpus size 10"):
        opus_splits(table(10), subset=11)
    with pytest.raises(ValueError, match="subset_mode"):
        opus_splits(table(10), subset=5, subset_mode="last")


def test_the_order_of_the_pair_sets_the_direction():
    splits = opus_splits(table(20), pair="it-en")
    assert all(pair.src.startswith("frase") and pair.tgt.startswith("sentence") for pair in splits.train)
    assert (splits.src_language, splits.tgt_language) == ("it", "en")


def test_a_list_of_rows_works_like_a_dataset():
    assert opus_splits(rows(30), seed=2) == opus_splits(table(30), seed=2)


def test_the_single_entry_point_routes_by_name(unreachable_hub, tmp_path):
    with pytest.raises(DataUnavailableError):
        load_dataset_splits("opus_books", cache_dir=tmp_path / "cache")
    with pytest.raises(DataUnavailableError, match="Cannot load the dataset someone/pairs: "):
        load_dataset_splits("someone/pairs", cache_dir=tmp_path / "cache")       # any other name: the Hub's
    with pytest.raises(FileNotFoundError, match=r"\./nowhere/pairs: no such file or folder"):
        load_dataset_splits("./nowhere/pairs")
    with pytest.raises(ValueError, match="English→Italian only"):
        load_dataset_splits("builtin", pair="de-en")
    assert "synthetic" in load_dataset_splits("builtin", n_pairs=50).source
    assert not Path(tmp_path / "cache").exists() or not list(Path(tmp_path / "cache").rglob("*.arrow"))
