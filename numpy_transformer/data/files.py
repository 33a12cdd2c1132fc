"""Local parallel corpora: JSON lines, CSV, TSV or Parquet files read through `datasets`.

Two layouts are accepted, for a language pair such as en-it:
  - the opus_books schema, one row per pair: {"id": "0", "translation": {"en": "…", "it": "…"}}
    (the `id` column is optional);
  - two columns named by the languages: `en` and `it` (a header row in CSV/TSV).

    data.jsonl   {"id": "0", "translation": {"en": "Hello.", "it": "Ciao."}}
    data.tsv     en<TAB>it
                 Hello.<TAB>Ciao.

A file that is empty, cannot be parsed, lacks the columns, or has a row without text gives one
`ValueError` naming the file and the problem. A file alone is split 90/5/5; separate validation
and test files, or a folder of them, are the corpus's own splits (`official.py`).
"""
from pathlib import Path

from numpy_transformer.data.corpus import SPLIT_FRACTIONS, DataSplits, Pair
from numpy_transformer.data.official import local_splits, split_files

FORMATS = {".jsonl": ("json", {}), ".json": ("json", {}), ".csv": ("csv", {}),
           ".tsv": ("csv", {"delimiter": "\t"}), ".parquet": ("parquet", {})}


def load_pairs_file(path, languages=("en", "it"), cache_dir=None):
    """The sentence pairs of a local file (a list of `Pair`), in file order."""
    path = Path(path)
    rows = table_rows(_read(path, cache_dir), languages, path)
    return [_pair(path, number, texts, languages) for number, texts in enumerate(rows, start=1)]


def table_rows(table, languages, where):
    """The (source, target) texts of each row of a `datasets.Dataset` in one of the two layouts
    of the module docstring (None where a row lacks one); a ValueError naming `where` and the
    columns found when the table has neither layout."""
    source, target = languages
    if "translation" in table.column_names:
        _check_translation_languages(where, table, languages)
        return [(row.get(source), row.get(target)) if isinstance(row, dict) else (None, None)
                for row in table["translation"]]
    if source in table.column_names and target in table.column_names:
        return list(zip(table[source], table[target]))
    raise ValueError(f"{where}: expected a 'translation' column holding {{{source!r}, {target!r}}} or two "
                     f"columns {source!r} and {target!r}; found columns {table.column_names}")


def hub_pairs(table, languages, where):
    """The pairs of a Hub dataset's table whose two texts are not blank (unlike a local file,
    the user cannot mend a Hub dataset's rows, so the incomplete ones are skipped)."""
    return [Pair(*texts) for texts in table_rows(table, languages, where)
            if all(isinstance(text, str) and text.strip() for text in texts)]


def file_splits(path, languages=("en", "it"), subset=None, subset_mode="first", seed=0,
                fractions=SPLIT_FRACTIONS, cache_dir=None, validation_file=None, test_file=None):
    """A local corpus as a `DataSplits`: one file of pairs split (seeded) 90/5/5, or its own
    splits: `path` with separate validation and test files, or a folder of them
    (`official.split_files`; a split it lacks is carved from training)."""
    files = split_files(path, FORMATS, validation_file, test_file)
    parts, source = local_splits(files, lambda file: load_pairs_file(file, languages, cache_dir), "local file",
                                 "pairs", seed, fractions, subset, subset_mode)
    return DataSplits(*parts.values(), source, *languages)


def _read(path, cache_dir):
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    if path.suffix.lower() not in FORMATS:
        raise ValueError(f"{path}: unknown format {path.suffix!r}; use one of {', '.join(FORMATS)}")
    if path.stat().st_size == 0:
        raise ValueError(f"{path}: the file is empty")
    if path.suffix.lower() != ".parquet":
        check_utf8(path)
    import datasets

    builder, options = FORMATS[path.suffix.lower()]
    try:
        table = datasets.load_dataset(builder, data_files=str(path), split="train", cache_dir=cache_dir, **options)
    except Exception as error:  # datasets and pyarrow raise many types; each means "cannot parse"
        reason = error.__cause__ or error
        raise ValueError(f"{path}: cannot read it as {builder.upper()} ({type(reason).__name__}: {reason})") from None
    if len(table) == 0:
        raise ValueError(f"{path}: the file has no rows")
    return table


def check_utf8(path):
    """A ValueError naming the file and the first line that is not UTF-8 text."""
    with open(path, "rb") as file:
        for number, line in enumerate(file, start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as error:
                raise ValueError(f"{path}: line {number} is not UTF-8 text ({error.reason} at byte {error.start} "
                                 f"of the line): convert the file to UTF-8 (e.g. iconv -f latin1 -t utf-8)") from None


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
