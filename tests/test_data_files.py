"""Local corpora through `datasets`: JSON lines, CSV, TSV and Parquet, in the opus_books schema or
as two columns; empty, malformed and incomplete files give one clear error naming the file."""
import csv
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from numpy_transformer.data import Pair, load_dataset_splits
from numpy_transformer.data.files import file_splits, load_pairs_file

ROWS = [("Hello.", "Ciao."), ("The man eats, then he drinks.", "L'uomo mangia, poi beve."),
        ('He said "yes".', 'Disse "sì".'), ("A tab\there?", "Una tabulazione?")]
PAIRS = [Pair(en, it) for en, it in ROWS]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


def opus_rows(rows=ROWS):
    return [{"id": str(i), "translation": {"en": en, "it": it}} for i, (en, it) in enumerate(rows)]


def write_csv(path, rows, delimiter=","):
    with open(path, "w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file, delimiter=delimiter)
        writer.writerow(["en", "it"])
        writer.writerows(rows)
    return path


def load(path, **options):
    return load_pairs_file(path, cache_dir=path.parent / "cache", **options)


def test_json_lines_in_the_opus_books_schema(tmp_path):
    assert load(write_jsonl(tmp_path / "books.jsonl", opus_rows())) == PAIRS


def test_json_lines_with_two_columns(tmp_path):
    assert load(write_jsonl(tmp_path / "pairs.jsonl", [{"en": en, "it": it} for en, it in ROWS])) == PAIRS


def test_csv_with_quoted_commas(tmp_path):
    rows = [row for row in ROWS if "\t" not in row[0]]
    assert load(write_csv(tmp_path / "pairs.csv", rows)) == [Pair(*row) for row in rows]


def test_tsv(tmp_path):
    rows = [row for row in ROWS if "\t" not in row[0] and '"' not in row[0]]
    assert load(write_csv(tmp_path / "pairs.tsv", rows, delimiter="\t")) == [Pair(*row) for row in rows]


def test_parquet_in_the_opus_books_schema_and_with_two_columns(tmp_path):
    pq.write_table(pa.Table.from_pylist(opus_rows()), tmp_path / "books.parquet")
    assert load(tmp_path / "books.parquet") == PAIRS
    pq.write_table(pa.table({"en": [en for en, _ in ROWS], "it": [it for _, it in ROWS]}), tmp_path / "two.parquet")
    assert load(tmp_path / "two.parquet") == PAIRS


def test_another_language_pair(tmp_path):
    path = write_jsonl(tmp_path / "fr.jsonl", [{"id": "0", "translation": {"en": "Yes.", "fr": "Oui."}}])
    assert load(path, languages=("fr", "en")) == [Pair("Oui.", "Yes.")]
    with pytest.raises(ValueError, match=r"fr\.jsonl: the 'translation' column has the languages \['en', 'fr'\]"):
        load(path)


def test_an_empty_file_is_named(tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(ValueError, match=r"empty\.jsonl: the file is empty"):
        load(tmp_path / "empty.jsonl")


def test_a_malformed_file_is_named_with_the_parser_message(tmp_path):
    (tmp_path / "broken.jsonl").write_text('{"id": "0", "translation": {"en": "Hello."\n')
    with pytest.raises(ValueError, match=r"broken\.jsonl: cannot read it as JSON \(.*JSON parse error"):
        load(tmp_path / "broken.jsonl")
    (tmp_path / "broken.parquet").write_bytes(b"not parquet")
    with pytest.raises(ValueError, match=r"broken\.parquet: cannot read it as PARQUET"):
        load(tmp_path / "broken.parquet")


def test_missing_columns_are_listed(tmp_path):
    path = write_jsonl(tmp_path / "columns.jsonl", [{"source": "Hello.", "target": "Ciao."}])
    with pytest.raises(ValueError, match=r"columns\.jsonl: expected a 'translation' column .* two columns 'en' and "
                                         r"'it'; found columns \['source', 'target'\]"):
        load(path)


def test_a_row_without_text_is_named(tmp_path):
    path = write_csv(tmp_path / "holes.csv", [("Hello.", "Ciao."), ("Yes.", "")])
    with pytest.raises(ValueError, match=r"holes\.csv: line 3 has no 'it' text \(found ''\): write it, or delete"):
        load(path)


def test_unknown_format_and_missing_file(tmp_path):
    (tmp_path / "pairs.txt").write_text("Hello.\tCiao.\n")
    with pytest.raises(ValueError, match=r"pairs\.txt: unknown format '\.txt'"):
        load(tmp_path / "pairs.txt")
    with pytest.raises(FileNotFoundError, match=r"nowhere\.jsonl: no such file"):
        load(tmp_path / "nowhere.jsonl")


def test_a_file_is_split_90_5_5_with_its_path_as_source(tmp_path):
    rows = [(f"sentence {i} .", f"frase {i} .") for i in range(200)]
    path = write_jsonl(tmp_path / "many.jsonl", opus_rows(rows))
    splits = load_dataset_splits(str(path), seed=1, cache_dir=tmp_path / "cache")
    assert [len(split) for split in splits] == [180, 10, 10]
    assert str(path) in splits.source
    assert sorted(p.src for split in splits for p in split) == sorted(en for en, _ in rows)
    subset = file_splits(path, subset=40, subset_mode="first", cache_dir=tmp_path / "cache")
    assert {p.src for split in subset for p in split} == {f"sentence {i} ." for i in range(40)}
    assert "first 40 of 200" in subset.source


@pytest.mark.parametrize("task, lines, said", [
    ("translation", ["en\tit", *[f"Hello!\tCiao {i}!" for i in range(60)], *[f"hello\tSalve {i}" for i in range(60)]],
     "its 120 pairs have 1 distinct source sentence (compared by their words, case and punctuation aside): the "
     "validation and test pairs are held out by source sentence"),
    ("translation", ["en\tit", *[f"{s}\tUna frase {i}." for i in range(40) for s in ("One.", "Two.")]],
     "its 80 pairs have 2 distinct source sentences"),
    ("translation", ["en\tit", "One.\tUno.", "Two.\tDue."], "2 pairs are too few to split into training, "
                                                               "validation and test pairs (a run needs at least 3)"),
    ("lm", ["The same line."] * 50, "its 50 texts have 1 distinct text (compared by their words"),
])
def test_a_file_of_too_few_distinct_sentences_says_so_and_not_that_its_many_pairs_are_too_few(tmp_path, task, lines,
                                                                                              said):
    """The held-out splits are carved by source sentence: 120 pairs that all translate "Hello!"
    cannot be split, and the line said "120 pairs are too few … (a run needs at least 3)"."""
    from run_helpers import run_main

    path = tmp_path / ("pairs.tsv" if task == "translation" else "texts.txt")
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    status, out, err = run_main(["train", "--task", task, "--dataset", path, "--tokenizer", "word", "--steps", "1",
                                 "--out", tmp_path / "run"])
    (line,) = err.strip().splitlines()
    assert status == 1 and said in line and str(path) in line, line
    assert not (tmp_path / "run").exists()


def test_a_file_that_is_not_json_lines_is_one_line_on_standard_error_and_no_log_line_of_datasets(tmp_path):
    """`datasets` logs its own "Failed to load JSON from file …" before raising; the command's
    line says the same, so the log line is silenced and standard error holds one line (a real
    process: a handler of the logging module writes to the standard error of its creation)."""
    import subprocess
    import sys

    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(f'{{"en": "Hello {i}.", "it": "Ciao {i}."}}\n' for i in range(50)) + "{oops\n",
                    encoding="utf-8")
    code = "import sys; from numpy_transformer.cli import main; sys.exit(main(sys.argv[1:]))"
    result = subprocess.run([sys.executable, "-c", code, "train", "--dataset", str(path), "--out", str(tmp_path / "run"),
                             "--cache-dir", str(tmp_path / "cache")], capture_output=True, text=True,
                            encoding="utf-8", timeout=300)
    (line,) = result.stderr.splitlines()
    assert result.returncode == 1 and line.startswith(f"numpy-transformer train: error: {path}: cannot read it as "
                                                      f"JSON (ArrowInvalid: JSON parse error"), result.stderr
    assert not (tmp_path / "run").exists()
