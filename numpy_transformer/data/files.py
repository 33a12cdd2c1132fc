"""Local parallel corpora: JSON lines, CSV, TSV or Parquet files read through `datasets`, and
the parallel text files of Moses and WMT (`moses.py`).

A table file, for a language pair such as en-it, holds the pairs in one of two layouts:
  - the opus_books schema, one row per pair: {"id": "0", "translation": {"en": "…", "it": "…"}}
    (the `id` column is optional);
  - two columns named by the languages: `en` and `it` (a header row in CSV/TSV).

    data.jsonl   {"id": "0", "translation": {"en": "Hello.", "it": "Ciao."}}
    data.tsv     en<TAB>it
                 Hello.<TAB>Ciao.

Columns named otherwise, or a CSV/TSV file without a header, are read with `columns` (the
`--columns` flag, `parse_columns`), as `datasets.load_dataset("csv", column_names=…)` and
`Dataset.rename_columns` read them:

    --columns en,it                 no header: the first column is English, the second Italian
    --columns id,en,it              no header, three columns (any names; the pair picks two)
    --columns english=en,italian=it a header naming them otherwise: these columns are en and it

    pairs.tsv    Hello.<TAB>Ciao.             --columns en,it
    pairs.csv    english,italian              --columns english=en,italian=it
                 Hello.,Ciao.

A file that is empty, cannot be parsed, lacks the columns, or has a row without text gives one
`ValueError` naming the file and the problem (a CSV/TSV file lacking them: its header, and the
`--columns` that would read it). A file alone is split 90/5/5; separate validation and test
files, or a folder of them, are the corpus's own splits (`official.py`).
"""
import csv
import itertools
import re
from pathlib import Path

from numpy_transformer.data.corpus import SPLIT_FRACTIONS, DataSplits, Pair
from numpy_transformer.data.moses import is_prefix, prefix_label, read_parallel_files
from numpy_transformer.data.official import local_splits, split_files
from numpy_transformer.data.utf8 import check_utf8

FORMATS = {".jsonl": ("json", {}), ".json": ("json", {}), ".csv": ("csv", {}),
           ".tsv": ("csv", {"delimiter": "\t"}), ".parquet": ("parquet", {})}
COLUMN_NAME = re.compile(r"^[A-Za-z_][\w-]*$")     # a header cell that looks like a name, not a sentence


def parse_columns(columns, languages=("en", "it")):
    """The `columns` option (a string, as --columns takes it) parsed, or None when not given:

    - "en,it" → ["en", "it"]: the CSV/TSV file has no header, these are the names of all its
      columns in order (datasets' and pandas' `column_names`);
    - "english=en,italian=it" → {"english": "en", "italian": "it"}: the file has a header, and
      these of its columns hold these languages (`rename_columns`).

    Both languages of the pair must be named. A ValueError, starting `columns`, otherwise."""
    if columns is None:
        return None
    form = "'en,it' (a file without a header: its columns in order) or 'english=en,italian=it' (a header's names)"
    if not isinstance(columns, str):
        raise ValueError(f"columns must be a string such as {form}, got {columns!r}")
    parts = [tuple(word.strip() for word in part.split("=", 1)) for part in columns.split(",")]
    mapped = {len(part) == 2 for part in parts}             # NAME=LANGUAGE, or a name alone
    if len(mapped) > 1:
        raise ValueError(f"columns {columns!r} mixes names and NAME=LANGUAGE: give {form}")
    if not all(all(part) for part in parts):
        raise ValueError(f"columns {columns!r} has an empty name: give {form}")
    for words in ([part[0] for part in parts], [part[-1] for part in parts]):
        repeated = sorted({word for word in words if words.count(word) > 1})
        if repeated:
            raise ValueError(f"columns {columns!r} names {repeated[0]!r} twice")
    absent = [language for language in languages if language not in [part[-1] for part in parts]]
    if absent:
        raise ValueError(f"columns {columns!r} gives no column to {absent[0]!r}, a language of the pair "
                         f"{'-'.join(languages)}: name it, or choose the pair with --pair")
    return dict(parts) if mapped == {True} else [name for name, in parts]


def load_pairs_file(path, languages=("en", "it"), cache_dir=None, columns=None):
    """The sentence pairs of a local corpus (a list of `Pair`), in file order: a table file, or
    the prefix of two parallel text files (`moses.py`). columns: as `parse_columns` takes it."""
    path = Path(path)
    columns = parse_columns(columns, languages)
    if is_prefix(path, languages):
        if columns is not None:
            raise ValueError(f"{prefix_label(path, languages)}: --columns maps the columns of a table file (CSV, "
                             f"TSV, JSON lines, Parquet); parallel text files are named by their languages already")
        return read_parallel_files(path, languages)
    table = _read(path, cache_dir, languages, columns)
    if len(table) == 0:
        raise ValueError(f"{path}: the file has no rows")
    if isinstance(columns, dict):
        table = renamed(table, columns, f"{path}: its header (first row)")
    headed_text = FORMATS[path.suffix.lower()][0] == "csv"
    hint = "" if columns else header_hint(table.column_names, languages) if headed_text else \
        mapping_hint(table.column_names, languages)
    rows = table_rows(table, languages, path, hint)
    return [_pair(path, number, texts, languages) for number, texts in enumerate(rows, start=1)]


def table_rows(table, languages, where, hint=""):
    """The (source, target) texts of each row of a `datasets.Dataset` in one of the two layouts
    of the module docstring (None where a row lacks one); a ValueError naming `where`, the
    columns found and the `hint` when the table has neither layout."""
    source, target = languages
    if "translation" in table.column_names:
        _check_translation_languages(where, table, languages)
        return [(row.get(source), row.get(target)) if isinstance(row, dict) else (None, None)
                for row in table["translation"]]
    if source in table.column_names and target in table.column_names:
        return list(zip(table[source], table[target]))
    raise ValueError(f"{where}: expected a 'translation' column holding {{{source!r}, {target!r}}} or two "
                     f"columns {source!r} and {target!r}; found columns {table.column_names}" +
                     (f". {hint}" if hint else ""))


def renamed(table, columns, where):
    """The table's columns named in `columns` ({name: language}), renamed to their languages;
    a ValueError naming `where` and the columns it has when one is missing."""
    missing = [name for name in columns if name not in table.column_names]
    if missing:
        raise ValueError(f"{where} has no column {missing[0]!r} (--columns): its columns are {table.column_names}")
    return table.select_columns(list(columns)).rename_columns(columns)


def header_hint(found, languages):
    """What to do when the first row of a CSV/TSV file, read as its header (`found`), does not
    name the languages: name the columns of a file without a header, or map a header's names."""
    in_order = [*languages, *(f"column{k}" for k in range(len(languages) + 1, len(found) + 1))]
    return (f"The first row was read as the header: if the file has no header, name its columns in order with "
            f"--columns {','.join(in_order)}; if it has one, map its names with {mapping_flag(found, languages)}")


def mapping_hint(found, languages):
    """What to do when a table's columns (`found`) do not name the languages: map two of them."""
    return f"Map the columns that hold them with {mapping_flag(found, languages)}"


def mapping_flag(found, languages):
    """The --columns that maps a table's columns (`found`) to the languages: its names when it
    has two and they look like names (not sentences), NAME otherwise."""
    names = found if len(found) == len(languages) and all(map(COLUMN_NAME.match, found)) else ["NAME"] * len(languages)
    return f"--columns {','.join(f'{name}={language}' for name, language in zip(names, languages))}"


def hub_pairs(table, languages, where, columns=None):
    """The pairs of a Hub dataset's table whose two texts are not blank (unlike a local file,
    the user cannot mend a Hub dataset's rows, so the incomplete ones are skipped). columns:
    "name=xx,…" maps columns of other names to the languages (`parse_columns`)."""
    columns = parse_columns(columns, languages)
    if isinstance(columns, list):
        raise ValueError(f"{where}: a Hub dataset names its columns; map them with "
                         f"{mapping_flag(table.column_names, languages)}")
    table = renamed(table, columns, where) if columns else table
    hint = "" if columns else mapping_hint(table.column_names, languages)
    return [Pair(*texts) for texts in table_rows(table, languages, where, hint)
            if all(isinstance(text, str) and text.strip() for text in texts)]


def file_splits(path, languages=("en", "it"), subset=None, subset_mode="first", seed=0,
                fractions=SPLIT_FRACTIONS, cache_dir=None, validation_file=None, test_file=None, columns=None):
    """A local corpus as a `DataSplits`: one file of pairs (or prefix of parallel text files)
    split (seeded) 90/5/5, or its own splits: `path` with separate validation and test files,
    or a folder of them (`official.split_files`; a split it lacks is carved from training)."""
    files = split_files(path, FORMATS, validation_file, test_file, languages)
    parts, source = local_splits(files, lambda file: load_pairs_file(file, languages, cache_dir, columns),
                                 "local file", "pairs", seed, fractions, subset, subset_mode,
                                 lambda file: prefix_label(file, languages) if is_prefix(file, languages) else str(file))
    return DataSplits(*parts.values(), source, *languages)


def _read(path, cache_dir, languages, columns):
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    if path.suffix.lower() not in FORMATS:
        prefix = path.with_suffix("")
        parallel = (f"; for the parallel text files {prefix_label(prefix, languages)}, give their prefix {prefix}"
                    if path.suffix[1:] in languages else "")
        raise ValueError(f"{path}: unknown format {path.suffix!r}; use one of {', '.join(FORMATS)}{parallel}")
    if path.stat().st_size == 0:
        raise ValueError(f"{path}: the file is empty")
    if path.suffix.lower() != ".parquet":
        check_utf8(path)
    import datasets

    builder, options = FORMATS[path.suffix.lower()]
    if isinstance(columns, list) and builder != "csv":
        raise ValueError(f"{path}: columns in order (--columns {','.join(columns)}) are for a CSV/TSV file without "
                         f"a header; a {builder.upper()} file names its columns: map them with "
                         f"--columns NAME={languages[0]},NAME={languages[1]}")
    if builder == "csv":
        _check_first_rows(path, options.get("delimiter", ","), languages, columns)
        options = {**options, "column_names": columns} if isinstance(columns, list) else options
    try:
        return datasets.load_dataset(builder, data_files=str(path), split="train", cache_dir=cache_dir, **options)
    except Exception as error:  # datasets and pyarrow raise many types; each means "cannot parse"
        reason = error.__cause__ or error
        raise ValueError(f"{path}: cannot read it as {builder.upper()} ({type(reason).__name__}: {reason})") from None


def _check_first_rows(path, delimiter, languages, columns):
    """A ValueError when the first rows of a CSV/TSV file cannot be read as `columns` says:
    columns in order (no header) that are not one per field of the first row (pandas would
    take surplus leading fields as the row's index, or leave names empty); or a header alone,
    nothing below it (a file of one pair, without a header, read as having one)."""
    with open(path, encoding="utf-8", newline="") as file:
        first = list(itertools.islice((row for row in csv.reader(file, delimiter=delimiter) if row), 2))
    if isinstance(columns, list) and first and len(first[0]) != len(columns):
        raise ValueError(f"{path}: --columns {','.join(columns)} names {len(columns)} columns, but the first row "
                         f"has {len(first[0])} fields ({first[0]!r}); name every column in order")
    if not isinstance(columns, list) and len(first) == 1:
        raise ValueError(f"{path}: the file has one row, read as its header {first[0]}, and no pairs below it" +
                         (f". {header_hint(first[0], languages)}" if columns is None else ""))


def _check_translation_languages(path, table, languages):
    found = table.features["translation"]
    names = sorted(getattr(found, "languages", None) or (found.keys() if isinstance(found, dict) else []))
    if names and not set(languages) <= set(names):
        raise ValueError(f"{path}: the 'translation' column has the languages {names}, not {list(languages)}; "
                         f"choose the pair with pair='xx-yy'")


def _pair(path, number, texts, languages):
    for text, language in zip(texts, languages):
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"{path}: row {number} has no {language!r} text (found {text!r})")
    return Pair(*texts)
