"""Corpora as people have them: parallel text files (corpus.en + corpus.de, one sentence a line,
alone, as official splits, or in a folder), and CSV/TSV files without a header or with columns
named otherwise (`--columns`); every way they can fail to pair up is one line naming the file."""
import csv
import json
import os

import pytest

from numpy_transformer.data import Pair, load_dataset_splits, load_text_splits
from numpy_transformer.data.files import hub_pairs, parse_columns
from numpy_transformer.training.settings import DataConfig
from run_helpers import assert_clear_error, run_main, written_pairs

ENGLISH = ["Hello.", "How are you?", "The cat sleeps on the sofa.", "We eat bread, then we drink.",
           'He said "yes".', "Where is the station?"]
GERMAN = ["Hallo.", "Wie geht es dir?", "Die Katze schläft auf dem Sofa.", "Wir essen Brot, dann trinken wir.",
          'Er sagte „ja“.', "Wo ist der Bahnhof?"]
PAIRS = [Pair(en, de) for en, de in zip(ENGLISH, GERMAN)]
TINY = ["--max-len", "32", "--d-model", "16", "--n-heads", "2", "--d-ff", "32", "--batch-size", "16", "--steps", "2",
        "--eval-every", "1", "--checkpoint-every", "2", "--samples", "1", "--beam", "1"]


def write_lines(path, lines, end="\n"):
    path.write_text("".join(line + end for line in lines), encoding="utf-8", newline="")
    return path


def write_parallel(prefix, pairs, languages=("en", "de")):
    """PREFIX.en and PREFIX.de, one sentence a line; the prefix."""
    for side, language in enumerate(languages):
        write_lines(prefix.parent / f"{prefix.name}.{language}", [pair[side] for pair in pairs])
    return prefix


def every_pair(splits):
    return splits.train + splits.validation + splits.test


def load(name, **options):
    return load_dataset_splits(str(name), **{"pair": "en-de", "cache_dir": None, **options})


# Parallel text files

def test_a_prefix_and_the_pair_name_two_files_read_line_by_line(tmp_path):
    prefix = write_parallel(tmp_path / "corpus", [(pair.src, pair.tgt) for pair in PAIRS])
    splits = load(prefix)
    assert sorted(every_pair(splits), key=PAIRS.index) == PAIRS
    assert splits.source == f"local file {prefix}.{{en,de}} (6 pairs)"
    reversed_splits = load(prefix, pair="de-en")
    assert sorted(every_pair(reversed_splits), key=lambda p: GERMAN.index(p.src)) == \
        [Pair(pair.tgt, pair.src) for pair in PAIRS]


def test_prefixes_are_official_splits_too(tmp_path):
    train = write_parallel(tmp_path / "train", [(f"{en} {i}", f"{de} {i}") for i in range(5)
                                                for en, de in zip(ENGLISH, GERMAN)])
    dev = write_parallel(tmp_path / "dev", [(pair.src, pair.tgt) for pair in PAIRS[:2]])
    test = write_parallel(tmp_path / "test", [(pair.src, pair.tgt) for pair in PAIRS[2:]])
    splits = load(train, validation_file=str(dev), test_file=str(test))
    assert splits.validation == PAIRS[:2] and splits.test == PAIRS[2:] and len(splits.train) == 30
    assert f"validation: {dev}.{{en,de}} (2 pairs)" in splits.source


@pytest.mark.parametrize("validation_name", ["valid", "validation", "val", "dev"])
def test_a_folder_of_train_valid_test_files_per_language_is_the_fairseq_layout(tmp_path, validation_name):
    write_parallel(tmp_path / "train", [(f"{en} {i}", f"{de} {i}") for i in range(5) for en, de in zip(ENGLISH, GERMAN)])
    write_parallel(tmp_path / validation_name, [(pair.src, pair.tgt) for pair in PAIRS[:2]])
    write_parallel(tmp_path / "test", [(pair.src, pair.tgt) for pair in PAIRS[2:]])
    splits = load(tmp_path)
    assert splits.validation == PAIRS[:2] and splits.test == PAIRS[2:] and len(splits.train) == 30


def test_a_folder_with_a_table_and_parallel_files_for_one_split_is_refused(tmp_path):
    write_parallel(tmp_path / "train", [(pair.src, pair.tgt) for pair in PAIRS])
    (tmp_path / "train.jsonl").write_text('{"en": "Hello.", "de": "Hallo."}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"train\.jsonl and train\.\{en,de\} are both the train split: keep one"):
        load(tmp_path)


def test_lines_end_at_newline_only_and_a_windows_file_reads_the_same(tmp_path):
    """A sentence holding U+2028 or U+0085 (which str.splitlines would break) stays one line, so
    the pairing holds; a CRLF file and a byte-order mark read as plain lines."""
    english = ["One\u2028line.", "Two\x85lines?", "Three."]
    german = ["Eine Zeile.", "Zwei Zeilen?", "Drei."]
    write_lines(tmp_path / "corpus.en", english)
    (tmp_path / "corpus.de").write_text("\ufeff" + "".join(line + "\r\n" for line in german), encoding="utf-8",
                                        newline="")
    assert sorted(every_pair(load(tmp_path / "corpus")), key=lambda pair: german.index(pair.tgt)) == \
        [Pair(en, de) for en, de in zip(english, german)]


def test_a_line_blank_in_both_files_is_skipped_and_the_pairing_kept(tmp_path):
    write_lines(tmp_path / "corpus.en", ["Hello.", "", "  ", "Goodbye."])
    write_lines(tmp_path / "corpus.de", ["Hallo.", " ", "", "Tschüss."])
    assert sorted(every_pair(load(tmp_path / "corpus")), key=lambda pair: pair.src) == \
        [Pair("Goodbye.", "Tschüss."), Pair("Hello.", "Hallo.")]


def test_a_language_model_reads_one_side_split_as_the_pairs_are(tmp_path):
    prefix = write_parallel(tmp_path / "corpus", [(pair.src, pair.tgt) for pair in PAIRS])
    pairs = load(prefix)
    texts = load_text_splits(str(prefix), language="de", pair="en-de")
    assert list(texts) == [[pair.tgt for pair in split] for split in pairs]
    assert texts.source == f"{pairs.source}; its de side"


def test_files_of_different_line_counts_are_refused_naming_both_files_and_counts(tmp_path):
    write_lines(tmp_path / "corpus.en", ENGLISH)
    write_lines(tmp_path / "corpus.de", GERMAN[:-1])
    with pytest.raises(ValueError, match=rf"{tmp_path}/corpus\.en has 6 lines and {tmp_path}/corpus\.de has 5: "
                                         r"line i of one must be the translation of line i of the other"):
        load(tmp_path / "corpus")


def test_a_line_blank_on_one_side_is_refused_naming_the_file_and_line(tmp_path):
    write_lines(tmp_path / "corpus.en", ENGLISH)
    write_lines(tmp_path / "corpus.de", [*GERMAN[:3], "", *GERMAN[4:]])
    with pytest.raises(ValueError, match=rf"{tmp_path}/corpus\.de: line 4 is blank, but line 4 of .*corpus\.en is not "
                                         r"\('We eat bread, then we drink\.'\): write its translation there, or delete "
                                         r"line 4 from both files"):
        load(tmp_path / "corpus")


def test_a_file_that_is_not_utf8_is_refused_naming_the_line(tmp_path):
    write_lines(tmp_path / "corpus.en", ENGLISH)
    (tmp_path / "corpus.de").write_bytes("\n".join(GERMAN).encode("cp1252") + b"\n")
    with pytest.raises(ValueError, match=r"corpus\.de: line 3 is not UTF-8 text .*iconv"):
        load(tmp_path / "corpus")


def test_a_prefix_with_one_of_its_two_files_names_the_missing_one_and_the_pair_found(tmp_path):
    prefix = write_parallel(tmp_path / "corpus", [(pair.src, pair.tgt) for pair in PAIRS])
    with pytest.raises(ValueError, match=rf"{prefix}\.it: no such file: the parallel corpus {prefix} is one file per "
                                         r"language of the pair en-it .*found corpus\.de, corpus\.en; to read those "
                                         r"two, give --pair en-de"):
        load(prefix, pair="en-it")
    (tmp_path / "corpus.de").unlink()
    with pytest.raises(ValueError, match=rf"{prefix}\.de: no such file: .*; found corpus\.en$"):
        load(prefix)


def test_an_empty_file_and_a_file_given_for_its_prefix_are_refused_saying_what_to_do(tmp_path):
    write_lines(tmp_path / "corpus.en", ENGLISH)
    (tmp_path / "corpus.de").write_text("")
    with pytest.raises(ValueError, match=r"corpus\.de: the file is empty"):
        load(tmp_path / "corpus")
    write_lines(tmp_path / "corpus.de", GERMAN)
    with pytest.raises(ValueError, match=rf"unknown format '\.en'; .* give their prefix {tmp_path}/corpus$"):
        load(tmp_path / "corpus.en")


# Columns: files without a header, or with other names

def write_table(path, rows, delimiter="\t", header=None):
    lines = ([delimiter.join(header)] if header else []) + [delimiter.join(row) for row in rows]
    return write_lines(path, lines)


ROWS = [(pair.src, pair.tgt) for pair in PAIRS if "," not in pair.src + pair.tgt and '"' not in pair.src]


def test_a_headerless_tsv_is_read_with_its_columns_named_in_order(tmp_path):
    path = write_table(tmp_path / "pairs.tsv", ROWS)
    splits = load(path, columns="en,de")
    assert sorted(every_pair(splits), key=lambda pair: ENGLISH.index(pair.src)) == [Pair(*row) for row in ROWS]
    reversed_splits = load(path, pair="de-en", columns="en,de")
    assert {(pair.tgt, pair.src) for pair in every_pair(reversed_splits)} == set(ROWS)


def test_a_headerless_file_of_three_columns_names_all_three(tmp_path):
    path = write_table(tmp_path / "pairs.tsv", [(str(i), *row) for i, row in enumerate(ROWS)])
    assert set(every_pair(load(path, columns="id,en,de"))) == {Pair(*row) for row in ROWS}


def test_columns_in_order_that_do_not_match_the_first_row_are_refused_not_misread(tmp_path):
    """pandas would take a surplus first field as the row's index: the pairs would be the id and
    the English."""
    path = write_table(tmp_path / "pairs.tsv", [(str(i), *row) for i, row in enumerate(ROWS)])
    with pytest.raises(ValueError, match=r"pairs\.tsv: --columns en,de names 2 columns, but the first row has 3 "
                                         r"fields .*; name every column in order"):
        load(path, columns="en,de")


def test_a_header_of_other_names_is_mapped_to_the_languages(tmp_path):
    path = write_table(tmp_path / "pairs.csv", ROWS, ",", header=("english", "german"))
    splits = load(path, columns="english=en,german=de")
    assert set(every_pair(splits)) == {Pair(*row) for row in ROWS}
    jsonl = write_lines(tmp_path / "pairs.jsonl", [json.dumps({"source": en, "target": de, "id": i})
                                                   for i, (en, de) in enumerate(ROWS)])
    assert set(every_pair(load(jsonl, columns="source=en,target=de"))) == {Pair(*row) for row in ROWS}


@pytest.mark.parametrize("header, n_rows, columns, message", [
    (None, len(ROWS), None, r"pairs\.csv: .*found columns \['Hello\.', 'Hallo\.'\]\. The first row was read as the "
                            r"header: if the file has no header, name its columns in order with --columns en,de; if it "
                            r"has one, map its names with --columns NAME=en,NAME=de$"),
    (("english", "german"), len(ROWS), None, r"found columns \['english', 'german'\]\. .* map its names with "
                                             r"--columns english=en,german=de$"),
    (None, 1, None, r"pairs\.csv: the file has one row, read as its header \['Hello\.', 'Hallo\.'\], and no pairs "
                    r"below it\. The first row was read as the header: .*--columns en,de"),
    (("english", "german"), len(ROWS), "englisch=en,german=de",
     r"pairs\.csv: its header \(first row\) has no column 'englisch' \(--columns\): its columns are "
     r"\['english', 'german'\]"),
])
def test_a_header_that_names_no_language_is_refused_with_the_header_and_the_columns_that_would_read_it(
        tmp_path, header, n_rows, columns, message):
    path = write_table(tmp_path / "pairs.csv", ROWS[:n_rows], ",", header=header)
    with pytest.raises(ValueError, match=message):
        load(path, columns=columns)


def test_columns_in_order_are_for_csv_and_tsv_only(tmp_path):
    jsonl = write_lines(tmp_path / "pairs.jsonl", [json.dumps({"en": en, "de": de}) for en, de in ROWS])
    with pytest.raises(ValueError, match=r"pairs\.jsonl: columns in order .* a JSON file names its columns"):
        load(jsonl, columns="en,de")


def test_columns_with_parallel_text_files_or_a_named_corpus_are_refused(tmp_path):
    prefix = write_parallel(tmp_path / "corpus", ROWS)
    with pytest.raises(ValueError, match=r"corpus\.\{en,de\}: --columns maps the columns of a table file"):
        load(prefix, columns="en,de")
    with pytest.raises(ValueError, match=r"the corpus 'tatoeba' is read as it is: leave --columns out"):
        load_dataset_splits("tatoeba", columns="en,it")


@pytest.mark.parametrize("columns, message", [
    ("en,german=de", "mixes names and NAME=LANGUAGE"),
    ("en,,de", "has an empty name"),
    ("english=,german=de", "has an empty name"),
    ("en,de,en", "names 'en' twice"),
    ("a=en,b=en,c=de", "names 'en' twice"),
    ("en,fr", "gives no column to 'de', a language of the pair en-de"),
])
def test_bad_columns_are_refused_naming_the_problem(columns, message):
    with pytest.raises(ValueError, match=rf"^columns '{columns}' {message}"):
        parse_columns(columns, ("en", "de"))
    with pytest.raises(ValueError, match=rf"DataConfig: columns '{columns}' {message}"):
        DataConfig(dataset="pairs.tsv", pair="en-de", columns=columns)


def test_columns_map_a_hub_tables_other_names_too():
    import datasets

    table = datasets.Dataset.from_dict({"english": ["Hello.", ""], "german": ["Hallo.", "Leer."]})
    assert hub_pairs(table, ("en", "de"), "the dataset x/y", "english=en,german=de") == [Pair("Hello.", "Hallo.")]
    with pytest.raises(ValueError, match=r"the dataset x/y: .*Map the columns that hold them with "
                                         r"--columns english=en,german=de"):
        hub_pairs(table, ("en", "de"), "the dataset x/y")


# Read literally: a field is its text, a line is a row

# sentences that a reader with CSV quoting, NA detection or type guessing would change or refuse
LITERAL = [('"Run!"', '"Corri!"'), ("None", "Nessuno"), ("NA", "null"), ("nan", "NaN"), ("True", "False"),
           ("1e5", "100000"), ("0012", "12"), ("42", "7"), ("# not a comment", "#hashtag"),
           ('"Open the door', "Apri la porta"), ("he said.", 'and closed it"'), ('She said "hi".', "Disse «ciao»."),
           ("'Single'", "'Singolo'"), ('""', '"" ""'), ("Tab\u00a0free.", "Senza\u2028tab.")]
# one row more: the 200-line case, a quote opening on one line and closing many lines later
LONG = [(f"Sentence {i}.", f"Frase {i}.") for i in range(200)]
LONG[20], LONG[25] = ('"Opens here', "Si apre"), ("closes here\"", "si chiude\"")


def load_file(path, **options):
    from numpy_transformer.data.files import load_pairs_file

    return load_pairs_file(path, ("en", "de"), **options)


@pytest.mark.parametrize("rows", [LITERAL, LONG], ids=["classes", "200 lines"])
@pytest.mark.parametrize("header", [None, ("en", "de")], ids=["headerless", "header"])
@pytest.mark.parametrize("end", ["\n", "\r\n"], ids=["lf", "crlf"])
def test_a_tsv_file_is_read_literally_one_row_a_line_no_quoting_no_na_no_types(tmp_path, rows, header, end):
    path = write_lines(tmp_path / "pairs.tsv", ([("\t".join(header))] if header else []) +
                       ["\t".join(row) for row in rows], end)
    pairs = load_file(path, columns=None if header else "en,de")
    assert [(pair.src, pair.tgt) for pair in pairs] == rows


def test_parallel_text_files_are_read_literally(tmp_path):
    prefix = write_parallel(tmp_path / "corpus", LITERAL + LONG)
    assert [(pair.src, pair.tgt) for pair in load_file(prefix)] == LITERAL + LONG


def test_a_byte_order_mark_a_lone_carriage_return_and_spaces_are_read_as_written(tmp_path):
    """A BOM starts the file, not the sentence; a lone "\r" inside a line is a character of the
    sentence (a line ends at "\n" only); spaces around a field are kept; a line blank in every
    field is skipped."""
    path = tmp_path / "pairs.tsv"
    path.write_bytes("\ufeffHello.\tCiao.\nOne\rtwo\tUno\rdue\n  Hi \tx y \n\t\nLast.\tUltimo.".encode("utf-8"))
    assert [(pair.src, pair.tgt) for pair in load_file(path, columns="en,de")] == [
        ("Hello.", "Ciao."), ("One\rtwo", "Uno\rdue"), ("  Hi ", "x y "), ("Last.", "Ultimo.")]


def test_a_csv_file_keeps_its_quoting_and_every_field_stays_a_string(tmp_path):
    rows = [*LITERAL, ("We eat, then drink.", "Mangiamo, poi beviamo."), ("Two\nlines.", "Due\r\nrighe."), ("", "")]
    path = tmp_path / "pairs.csv"
    with open(path, "w", newline="", encoding="utf-8") as file:
        csv.writer(file).writerows([("en", "de"), *rows])
    assert [(pair.src, pair.tgt) for pair in load_file(path)] == rows[:-1]      # the blank row is skipped
    path.write_text('\ufeffen,de\r\nNone,NA\r\n0012,1e5\r\n"Say ""hi"".",Ciao\r\n', encoding="utf-8")
    assert [(pair.src, pair.tgt) for pair in load_file(path)] == [("None", "NA"), ("0012", "1e5"),
                                                                  ('Say "hi".', "Ciao")]


@pytest.mark.parametrize("name, text, columns, message", [
    ("pairs.csv", 'en,de\nHello.,Hallo.\n"Open,Offen\nThen,Dann\n', None,
     r"pairs\.csv: line 3: a quoted field opens there and its closing quote never comes: close it"),
    ("pairs.csv", 'Hello.,Hallo.\n"Hi" there,Hallo\n', "en,de", r"pairs\.csv: line 2: not CSV \(.*\): quote a field"),
    ("pairs.csv", "en,de\nOne\rtwo,Eins\n", None, r"pairs\.csv: line 2: not CSV \(new-line character"),
    ("pairs.csv", "en,de\nWe eat, then drink.,Wir essen.\n", None,
     r"pairs\.csv: line 2 has 3 comma-separated fields, and its header \(first row\) names 2: .* quote a field that"),
    ("pairs.tsv", "Hello.\tHallo.\nBye.\tTschüss.\t\n", "en,de",
     r"pairs\.tsv: line 2 has 3 tab-separated fields, and --columns en,de names 2: every row has one field per column"),
    ("pairs.tsv", "Hello.\tHallo.\nBye.\n", "en,de", r"pairs\.tsv: line 2 has 1 tab-separated fields"),
    ("pairs.tsv", "Hello.\tHallo.\n\tTschüss.\n", "en,de",
     r"pairs\.tsv: line 2 has no 'en' text \(found ''\): write it, or delete the line$"),
    ("pairs.tsv", "\n\nHello.\tHallo.\n \tNA\n", "en,de", r"pairs\.tsv: line 4 has no 'en' text \(found ' '\)"),
    ("pairs.tsv", "en\ten\nHello.\tHallo.\n", None,
     r"pairs\.tsv: its header \(first row\) names the column 'en' twice"),
    ("pairs.tsv", "\n \t \n\n", "en,de", r"pairs\.tsv: every line is blank$"),
])
def test_a_table_file_that_cannot_be_read_literally_is_refused_naming_the_line(tmp_path, name, text, columns, message):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    with pytest.raises(ValueError, match=message):
        load_file(path, columns=columns)


def test_a_language_models_text_file_ends_lines_at_newline_only(tmp_path):
    path = tmp_path / "texts.txt"
    path.write_bytes("\ufeffOne\u2028line.\r\nNone\n\x0cNA\n\n0012\n".encode("utf-8"))
    from numpy_transformer.data.texts import read_texts

    assert read_texts(path) == ["One\u2028line.", "None", "NA", "0012"]


@pytest.mark.parametrize("args, named, kind", [
    (["--dataset", "/dev/zero"], "/dev/zero", "a character device"),
    (["--dataset", "pipe.tsv"], "pipe.tsv", r"a named pipe \(FIFO\)"),
    (["--dataset", "corpus"], "corpus.de", r"a named pipe \(FIFO\)"),
    (["--dataset", "pairs.tsv", "--columns", "en,de", "--validation-file", "pipe.tsv"], "pipe.tsv",
     r"a named pipe \(FIFO\)"),
    (["--task", "lm", "--dataset", "pipe.tsv"], "pipe.tsv", r"a named pipe \(FIFO\)"),
])
def test_a_pipe_or_a_device_given_as_data_is_named_for_what_it_is_and_never_opened(tmp_path, monkeypatch, args,
                                                                                    named, kind):
    """Opening a FIFO would wait for a writer forever, and /dev/zero never ends: both are refused
    from their type alone, with what --dataset takes."""
    monkeypatch.chdir(tmp_path)
    os.mkfifo(tmp_path / "pipe.tsv")
    write_table(tmp_path / "pairs.tsv", ROWS)
    write_lines(tmp_path / "corpus.en", ENGLISH)
    os.mkfifo(tmp_path / "corpus.de")
    out = tmp_path / "run"
    status, _, err = run_main(["train", "--out", out, "--pair", "en-de", *args, *TINY])
    assert_clear_error(status, err, rf"error: {named}: {kind}, not a regular file or a folder: .*takes .*save the "
                                    rf"data to a file first$", absent_folder=out)


# The command: a run saves how it read its data, evaluate rebuilds it

def test_train_on_a_headerless_tsv_saves_columns_and_evaluate_rebuilds_the_data(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_table(tmp_path / "pairs.tsv", [(pair.src, pair.tgt) for pair in written_pairs(60)])
    out = tmp_path / "run"
    status, stdout, err = run_main(["train", "--out", out, "--dataset", "pairs.tsv", "--columns", "en,de",
                                    "--pair", "en-de", "--cache-dir", tmp_path / "cache", *TINY])
    assert status == 0, err
    assert "data: local file pairs.tsv (60 pairs)" in stdout
    saved = json.loads((out / "data.json").read_text())
    assert saved["columns"] == "en,de" and saved["dataset"] == str(tmp_path / "pairs.tsv")
    status, stdout, err = run_main(["evaluate", "--checkpoint", out, "--beam", "1", "--samples", "0",
                                    "--cache-dir", tmp_path / "cache"])
    assert status == 0, err


def test_train_on_parallel_text_files_keeps_their_absolute_prefix_for_evaluate_elsewhere(tmp_path, monkeypatch):
    (tmp_path / "data").mkdir()
    write_parallel(tmp_path / "data" / "corpus", [(pair.src, pair.tgt) for pair in written_pairs(60)])
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "run"
    status, stdout, err = run_main(["train", "--out", out, "--dataset", "data/corpus", "--pair", "en-de", *TINY])
    assert status == 0, err
    assert "data: local file data/corpus.{en,de} (60 pairs)" in stdout
    assert json.loads((out / "data.json").read_text())["dataset"] == str(tmp_path / "data" / "corpus")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    status, _, err = run_main(["evaluate", "--checkpoint", out, "--beam", "1", "--samples", "0"])
    assert status == 0, err


@pytest.mark.parametrize("args, message", [
    (["--dataset", "pairs.tsv", "--columns", "en"], r"--columns 'en' gives no column to 'de'"),
    (["--dataset", "corpus"], r"corpus\.en has 6 lines and corpus\.de has 5"),
    (["--dataset", "corpus", "--columns", "en,de"], r"--columns maps the columns of a table file"),
])
def test_bad_files_and_columns_are_one_line_and_leave_no_folder(tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    write_table(tmp_path / "pairs.tsv", ROWS)
    write_lines(tmp_path / "corpus.en", ENGLISH)
    write_lines(tmp_path / "corpus.de", GERMAN[:-1])
    out = tmp_path / "run"
    status, _, err = run_main(["train", "--out", out, "--pair", "en-de", *args, *TINY])
    assert_clear_error(status, err, message, absent_folder=out)


@pytest.mark.parametrize("name, task", [("pairs.tsv", "translation"), ("pairs.csv", "translation"),
                                        ("texts.txt", "lm")])
def test_a_file_whose_lines_end_in_a_bare_carriage_return_is_refused_saying_how_to_convert_it(tmp_path, name, task):
    """Classic Mac OS and Excel's "CSV (Macintosh)" end lines in "\r" alone; lines end at "\n"
    here, so such a file was one row: the TSV was refused as a header of 401 columns, every
    one printed, and a text file was one text. Now one line names the line ends and `tr`."""
    separator = {".tsv": "\t", ".csv": ",", ".txt": None}[name[-4:]]
    lines = ([f"en{separator}de"] + [f"Sentence {i}.{separator}Satz {i}." for i in range(200)] if separator
             else [f"Sentence {i}." for i in range(200)])
    path = tmp_path / name
    path.write_bytes("".join(line + "\r" for line in lines).encode("utf-8"))
    status, _, err = run_main(["train", "--task", task, "--dataset", path, "--pair", "en-de", "--tokenizer", "word",
                               "--steps", "1", "--out", tmp_path / "run"])
    assert_clear_error(status, err, rf"{name}: its lines end in a bare carriage return .* so it would be read as one "
                                    rf"line: convert its line ends \(e\.g\. tr '\\r' '\\n' < {name} > unix-{name}\)",
                       absent_folder=tmp_path / "run")
    assert len(err.strip().splitlines()) == 1 and len(err) < 400, err
    path.write_bytes("".join(line + "\r\n" for line in lines).encode("utf-8"))            # Windows's: read
    assert run_main(["train", "--task", task, "--dataset", path, "--pair", "en-de", "--tokenizer", "word",
                     "--steps", "1", "--out", tmp_path / "run"])[0] == 0


def test_a_header_of_many_columns_is_shown_cut_in_its_one_line(tmp_path):
    """A file read as one row of hundreds of fields used to print every field, twice: the line
    shows four, each at most 40 characters, and how many there are."""
    path = tmp_path / "pairs.tsv"
    path.write_text("\t".join(f"A rather long sentence number {i} of the header row." for i in range(300)) + "\n",
                    encoding="utf-8")
    status, _, err = run_main(["train", "--dataset", path, "--pair", "en-de", "--tokenizer", "word", "--steps", "1",
                               "--out", tmp_path / "run"])
    assert_clear_error(status, err, r"read as its header \['A rather long sentence number 0 of the …', "
                                    r"'A rather long sentence number 1 of the …', 'A rather long sentence number 2 "
                                    r"of the …', …\] \(300 in all\), and no pairs below it.* --columns "
                                    r"en,de,column3,…,column300;")
    assert len(err) < 700, err
