"""Corpora with their own splits: a training file with separate validation and test files, a
folder of them, a Hugging Face dataset's splits (from a fake cached copy: nothing here
downloads). The held-out splits a corpus lacks are carved from training; the subset is taken
from training only; the source line names every file."""
import datasets
import huggingface_hub.constants
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from numpy_transformer.data import Pair, load_dataset_splits, load_text_splits
from run_helpers import assert_unavailable_at_once, fake_cached_dataset, write_opus_jsonl

CLOSED_PORT = "http://127.0.0.1:9"


@pytest.fixture
def unreachable_hub(monkeypatch):
    """Every request to the Hub goes to a closed local port: refused at once, whatever the network."""
    monkeypatch.setattr(datasets.config, "HF_ENDPOINT", CLOSED_PORT)
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", CLOSED_PORT)


def pairs(name, n):
    return [Pair(f"{name} sentence {i} .", f"{name} frase {i} .") for i in range(n)]


@pytest.fixture
def benchmark(tmp_path):
    """A training file of 200 pairs, a validation file of 12 and a test file of 8."""
    return {split: write_opus_jsonl(tmp_path / f"{split}.jsonl", pairs(split, n))
            for split, n in (("train", 200), ("val", 12), ("test", 8))}


def load(path, **options):
    return load_dataset_splits(str(path), cache_dir=path.parent / "cache", **options)


def test_separate_files_are_the_splits_and_the_source_line_names_them(benchmark):
    splits = load(benchmark["train"], validation_file=str(benchmark["val"]), test_file=str(benchmark["test"]))
    assert splits.validation == pairs("val", 12) and splits.test == pairs("test", 8)
    assert sorted(splits.train, key=str) == sorted(pairs("train", 200), key=str)
    assert splits.source == (f"local files: train: {benchmark['train']} (200 pairs), validation: {benchmark['val']} "
                             f"(12 pairs), test: {benchmark['test']} (8 pairs)")


def test_a_validation_file_alone_has_the_test_split_carved_from_training(benchmark):
    splits = load(benchmark["train"], validation_file=str(benchmark["val"]), seed=3)
    assert splits.validation == pairs("val", 12)
    assert (len(splits.train), len(splits.test)) == (190, 10)              # 5 % of the training file
    assert sorted(splits.train + splits.test, key=str) == sorted(pairs("train", 200), key=str)
    assert splits.source.endswith("test: carved from train (10 pairs)")
    assert load(benchmark["train"], validation_file=str(benchmark["val"]), seed=3) == splits
    assert load(benchmark["train"], validation_file=str(benchmark["val"]), seed=4).test != splits.test


def test_a_test_file_alone_has_the_validation_split_carved_from_training(benchmark):
    splits = load(benchmark["train"], test_file=str(benchmark["test"]))
    assert splits.test == pairs("test", 8) and len(splits.validation) == 10 and len(splits.train) == 190
    assert "validation: carved from train (10 pairs)" in splits.source


def test_the_subset_is_taken_from_the_training_file_only(benchmark):
    splits = load(benchmark["train"], validation_file=str(benchmark["val"]), subset=40, subset_mode="first")
    assert {pair.src for pair in splits.train + splits.test} == {f"train sentence {i} ." for i in range(40)}
    assert splits.validation == pairs("val", 12)
    assert splits.source.endswith(", subset of train: first 40")


def test_a_folder_of_train_dev_and_test_files_in_any_format(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    write_opus_jsonl(folder / "train.jsonl", pairs("train", 100))
    (folder / "dev.tsv").write_text("en\tit\n" + "".join(f"{p.src}\t{p.tgt}\n" for p in pairs("dev", 5)))
    pq.write_table(pa.table({"en": [p.src for p in pairs("test", 4)], "it": [p.tgt for p in pairs("test", 4)]}),
                   folder / "test.parquet")
    (folder / "README.md").write_text("not a split")
    splits = load(folder)
    assert (splits.validation, splits.test, len(splits.train)) == (pairs("dev", 5), pairs("test", 4), 100)
    assert f"validation: {folder / 'dev.tsv'} (5 pairs)" in splits.source


def test_a_folder_with_only_a_training_file_is_split_90_5_5(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    write_opus_jsonl(folder / "train.jsonl", pairs("train", 100))
    splits = load(folder)
    assert [len(split) for split in splits] == [90, 5, 5]
    assert splits.source == f"local file {folder / 'train.jsonl'} (100 pairs)"


@pytest.mark.parametrize("files, message", [
    (["notes.jsonl", "val.jsonl"], r"no training split \(named train\); found notes\.jsonl, val\.jsonl"),
    (["train.jsonl", "train.csv"], r"train\.csv and train\.jsonl are both the train split: keep one"),
    (["train.jsonl", "val.jsonl", "validation.jsonl"], r"val\.jsonl and validation\.jsonl are both the validation"),
])
def test_a_folder_without_one_clear_file_per_split_is_refused(tmp_path, files, message):
    for name in files:
        (tmp_path / name).write_text("")
    with pytest.raises(ValueError, match=message):
        load_dataset_splits(str(tmp_path))


def test_separate_files_go_with_a_training_file_only(benchmark, tmp_path):
    with pytest.raises(ValueError, match=r"--validation-file and --test-file go with a training file given to "
                                         r"--dataset, not with the dataset 'builtin'"):
        load_dataset_splits("builtin", validation_file=str(benchmark["val"]))
    with pytest.raises(ValueError, match="is a folder: its train/validation/test files are the splits"):
        load_dataset_splits(str(tmp_path), test_file=str(benchmark["test"]))
    with pytest.raises(FileNotFoundError, match=r"missing\.jsonl: no such file"):
        load(benchmark["train"], validation_file=str(tmp_path / "missing.jsonl"))


def test_a_bad_validation_file_is_named(benchmark, tmp_path):
    (tmp_path / "broken.jsonl").write_text('{"translation": {"en": "Hello.", "it": " "}}\n')
    with pytest.raises(ValueError, match=r"broken\.jsonl: row 1 has no 'it' text"):
        load(benchmark["train"], validation_file=str(tmp_path / "broken.jsonl"))


# A Hugging Face dataset with its own splits, from a fake cached copy.

def test_a_hub_dataset_with_two_language_columns_keeps_its_own_splits(unreachable_hub, tmp_path):
    def rows(name, n):
        return [{"en": f"{name} {i} .", "de": f"{name} satz {i} ."} for i in range(n)] + [{"en": "", "de": "leer ."}]

    cache = tmp_path / "cache"
    fake_cached_dataset(cache, "someone/multi", "default", {"train": rows("train", 60), "validation": rows("val", 4),
                                                             "test": rows("test", 3)})
    splits = load_dataset_splits("someone/multi", pair="en-de", dataset_config="default", cache_dir=cache)
    assert splits.validation == [Pair(f"val {i} .", f"val satz {i} .") for i in range(4)]       # the empty row skipped
    assert [len(split) for split in splits] == [60, 4, 3]
    assert (splits.src_language, splits.tgt_language) == ("en", "de")
    assert splits.source == ("Hugging Face dataset someone/multi (default): train: its own (60 pairs), validation: "
                             "its own (4 pairs), test: its own (3 pairs)")


def test_a_hub_dataset_with_a_translation_column_and_only_a_training_split_is_carved(unreachable_hub, tmp_path):
    cache = tmp_path / "cache"
    rows = [{"translation": {"de": f"satz {i} .", "en": f"sentence {i} ."}} for i in range(100)]
    fake_cached_dataset(cache, "someone/books", "de-en", {"train": rows})
    splits = load_dataset_splits("someone/books", pair="en-de", dataset_config="de-en", cache_dir=cache, subset=40)
    assert [len(split) for split in splits] == [36, 2, 2]
    assert splits.source.endswith("validation: carved from train (2 pairs), test: carved from train (2 pairs), "
                                  "subset of train: first 40")
    with pytest.raises(ValueError, match=r"the dataset someone/books: the 'translation' column has the languages "
                                         r"\['de', 'en'\], not \['en', 'fr'\]"):
        load_dataset_splits("someone/books", pair="en-fr", dataset_config="de-en", cache_dir=cache)


def test_an_unreachable_hub_dataset_gives_one_helpful_error_within_seconds(unreachable_hub, tmp_path):
    assert_unavailable_at_once(
        lambda: load_dataset_splits("bentrevett/multi30k", pair="en-de", cache_dir=tmp_path / "cache"),
        "Cannot load the dataset bentrevett/multi30k: the Hugging Face Hub",
        ("datasets.load_dataset('bentrevett/multi30k')", "--dataset FILE", '"en", "de"', "--dataset builtin"))


# The language models read the same files: their side of the pairs, or .txt files.

def test_a_language_model_reads_its_side_of_separate_files_of_pairs(benchmark):
    texts = load_text_splits(str(benchmark["train"]), "it", validation_file=str(benchmark["val"]),
                             cache_dir=benchmark["train"].parent / "cache")
    assert texts.validation == [pair.tgt for pair in pairs("val", 12)] and len(texts.test) == 10
    assert "validation: " + str(benchmark["val"]) in texts.source and texts.source.endswith("its it side")


def test_a_language_model_reads_a_folder_of_text_files(tmp_path):
    (tmp_path / "train.txt").write_text("".join(f"line {i} .\n\n" for i in range(40)), encoding="utf-8")
    (tmp_path / "validation.txt").write_text("held out .\n", encoding="utf-8")
    texts = load_text_splits(str(tmp_path), "en")
    assert texts.validation == ["held out ."] and (len(texts.train), len(texts.test)) == (38, 2)
    assert texts.source == (f"local text files: train: {tmp_path / 'train.txt'} (38 texts), validation: "
                            f"{tmp_path / 'validation.txt'} (1 text), test: carved from train (2 texts)")
    separate = load_text_splits(str(tmp_path / "train.txt"), "en", test_file=str(tmp_path / "validation.txt"))
    assert separate.test == ["held out ."]


def test_text_files_and_files_of_pairs_do_not_mix(benchmark, tmp_path):
    (tmp_path / "story.txt").write_text("once upon a time .\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"val\.jsonl: a language model's text files end in \.txt"):
        load_text_splits(str(tmp_path / "story.txt"), validation_file=str(benchmark["val"]))
