"""Local parallel corpora: CSV and TSV files read literally (`read_delimited`), JSON lines and
Parquet files read through `datasets`, and the parallel text files of Moses and WMT (`moses.py`).

A table file, for a language pair such as en-it, holds the pairs in one of two layouts:
  - the opus_books schema, one row per pair: {"id": "0", "translation": {"en": "…", "it": "…"}}
    (the `id` column is optional);
  - two columns named by the languages: `en` and `it` (a header row in CSV/TSV).

    data.jsonl   {"id": "0", "translation": {"en": "Hello.", "it": "Ciao."}}
    data.tsv     en<TAB>it
                 Hello.<TAB>Ciao.

A CSV or TSV file is text, and every field stays the text it holds: `None`, `NA`, `null`,
`nan`, `True`, `1e5`, `0012` are sentences, not missing values or numbers. A TSV file is one row
a line and has no quoting (a quote is part of its sentence); a CSV file has RFC 4180's quoting
(a field in quotes holds commas, doubled quotes, line breaks), and a quote that never closes is
refused naming its line.

Columns named otherwise, or a CSV/TSV file without a header, are read with `columns` (the
`--columns` flag, `parse_columns`): names in order (`column_names`) or a mapping of names
(`Dataset.rename_columns`):

    --columns en,it                 no header: the first column is English, the second Italian
    --columns id,en,it              no header, three columns (any names; the pair picks two)
    --columns english=en,italian=it a header naming them otherwise: these columns are en and it

    pairs.tsv    Hello.<TAB>Ciao.             --columns en,it
    pairs.csv    english,italian              --columns english=en,italian=it
                 Hello.,Ciao.

A file that is empty, cannot be parsed, lacks the columns, has a row of another number of
fields than its columns or a row without text gives one `ValueError` naming the file and the
problem (the line, for CSV/TSV; a CSV/TSV file lacking the columns: its header, and the
`--columns` that would read it). A file alone is split 90/5/5; separate validation and test
files, or a folder of them, are the corpus's own splits (`official.py`).
"""
import csv
import re
from pathlib import Path

from numpy_transformer.data.corpus import SPLIT_FRACTIONS, DataSplits, Pair
from numpy_transformer.data.moses import is_prefix, prefix_label, read_parallel_files
from numpy_transformer.data.official import local_splits, split_files
from numpy_transformer.data.utf8 import check_line_ends, check_utf8, read_lines

FORMATS = {".jsonl": ("json", {}), ".json": ("json", {}), ".csv": ("csv", {"delimiter": ","}),
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
    table, lines = _read(path, cache_dir, languages, columns)
    if len(table) == 0:
        raise ValueError(f"{path}: the file has no rows")
    if isinstance(columns, dict):
        table = renamed(table, columns, f"{path}: its header (first row)")
    headed_text = FORMATS[path.suffix.lower()][0] == "csv"
    hint = "" if columns else header_hint(table.column_names, languages) if headed_text else \
        mapping_hint(table.column_names, languages)
    rows = table_rows(table, languages, path, hint)
    return [_pair(path, f"line {lines[number - 1]}" if lines else f"row {number}", texts, languages)
            for number, texts in enumerate(rows, start=1)]


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
                     f"columns {source!r} and {target!r}; found columns {shown(table.column_names)}" +
                     (f". {hint}" if hint else ""))


def renamed(table, columns, where):
    """The table's columns named in `columns` ({name: language}), renamed to their languages;
    a ValueError naming `where` and the columns it has when one is missing."""
    missing = [name for name in columns if name not in table.column_names]
    if missing:
        raise ValueError(f"{where} has no column {missing[0]!r} (--columns): its columns are {shown(table.column_names)}")
    return table.select_columns(list(columns)).rename_columns(columns)


def shown(values, most=4, width=40):
    """A list of names or fields for a one-line message: at most `most`, each cut at `width`
    characters, and how many more (a file read as one row can have thousands)."""
    cut = [repr(value if len(value) <= width else value[:width - 1] + "…") for value in map(str, values[:most])]
    if len(values) <= most:
        return f"[{', '.join(cut)}]"
    return f"[{', '.join(cut[:most - 1])}, …] ({len(values):,} in all)"


def header_hint(found, languages):
    """What to do when the first row of a CSV/TSV file, read as its header (`found`), does not
    name the languages: name the columns of a file without a header, or map a header's names."""
    in_order = [*languages, *(f"column{k}" for k in range(len(languages) + 1, len(found) + 1))]
    if len(in_order) > 6:
        in_order = [*in_order[:3], "…", in_order[-1]]
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
    builder, options = FORMATS[path.suffix.lower()]
    if isinstance(columns, list) and builder != "csv":
        raise ValueError(f"{path}: columns in order (--columns {','.join(columns)}) are for a CSV/TSV file without "
                         f"a header; a {builder.upper()} file names its columns: map them with "
                         f"--columns NAME={languages[0]},NAME={languages[1]}")
    if builder == "csv":
        return read_delimited(path, options["delimiter"], languages, columns)
    import datasets

    verbosity = datasets.logging.get_verbosity()
    datasets.logging.set_verbosity(datasets.logging.CRITICAL)  # its "Failed to load JSON …": the one line below says it
    try:
        return datasets.load_dataset(builder, data_files=str(path), split="train", cache_dir=cache_dir), None
    except Exception as error:  # datasets and pyarrow raise many types; each means "cannot parse"
        reason = error.__cause__ or error
        raise ValueError(f"{path}: cannot read it as {builder.upper()} ({type(reason).__name__}: {reason})") from None
    finally:
        datasets.logging.set_verbosity(verbosity)


def read_delimited(path, delimiter, languages=("en", "it"), columns=None):
    """(a `datasets.Dataset` of string columns, the line number of each of its rows) of a CSV
    (delimiter ",") or TSV ("\\t") file, read literally: every field is the text between its
    delimiters, a string as written (no NA values, no numbers, no dates); lines end at "\\n"
    (`utf8.read_lines`: a "\\r\\n" and a byte-order mark are read too). A TSV file has no
    quoting (IANA's text/tab-separated-values): a quote is a character of the sentence. A CSV
    file has RFC 4180's: a field in quotes may hold commas, doubled quotes and line breaks, and
    a quote that never closes is refused naming the line where it opens. A line whose fields are
    all blank is skipped. columns: the names of all columns in order (a file without a header),
    or None / a mapping (the first row is the header). Every row must have one field per
    column; a ValueError naming the file and the line otherwise."""
    records = _tsv_records(path) if delimiter == "\t" else _csv_records(path)
    records = [(number, fields) for number, fields in records if any(field.strip() for field in fields)]
    if not records:
        raise ValueError(f"{path}: every line is blank")
    if isinstance(columns, list):
        names, where = columns, f"--columns {','.join(columns)} names"
        if len(records[0][1]) != len(columns):
            raise ValueError(f"{path}: --columns {','.join(columns)} names {len(columns)} columns, but the first row "
                             f"has {len(records[0][1])} fields ({shown(records[0][1])}); name every column in order")
    else:
        (_, names), records, where = records[0], records[1:], "its header (first row) names"
        if not records:
            raise ValueError(f"{path}: the file has one row, read as its header {shown(names)}, and no pairs below it" +
                             (f". {header_hint(names, languages)}" if columns is None else ""))
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"{path}: its header (first row) names the column {repeated[0]!r} twice" +
                             (f". {header_hint(names, languages)}" if columns is None else ""))
    separator = "tab" if delimiter == "\t" else "comma"
    for number, fields in records:
        if len(fields) != len(names):
            raise ValueError(f"{path}: line {number} has {len(fields)} {separator}-separated fields, and {where} "
                             f"{len(names)}: every row has one field per column (a {separator} inside a sentence, "
                             f"or one missing, splits it otherwise)" +
                             (" — quote a field that holds a comma" if delimiter == "," else ""))
    import datasets

    features = datasets.Features({name: datasets.Value("string") for name in names})
    table = datasets.Dataset.from_dict({name: [fields[k] for _, fields in records] for k, name in enumerate(names)},
                                       features=features)
    return table, [number for number, _ in records]


def _tsv_records(path):
    """(line number, fields) of each line of a TSV file: the line split at every tab."""
    return [(number, line.split("\t")) for number, line in enumerate(read_lines(path), start=1)]


def _csv_records(path):
    """(line number where it starts, fields) of each record of a CSV file, read by the `csv`
    module (strict RFC 4180 quoting) from its lines cut at "\\n" only (a "\\r\\n" ends a record,
    and stays in a quoted field as written)."""
    with open(path, encoding="utf-8-sig", newline="") as file:
        text = file.read()
    check_line_ends(path, text)
    lines = [line + "\n" for line in text.split("\n")]
    if lines[-1] == "\n":
        lines.pop()                     # the end of the last line, not a line
    reader = csv.reader(lines, strict=True)
    records, start = [], 1
    try:
        for fields in reader:
            records.append((start, fields))
            start = reader.line_num + 1
    except csv.Error as error:
        if reader.line_num >= len(lines) and "end of data" in str(error):
            raise ValueError(f"{path}: line {start}: a quoted field opens there and its closing quote never comes: "
                             f"close it, or double each quote inside a quoted field (\"\"), or write the file as "
                             f"TSV (no quoting)") from None
        raise ValueError(f"{path}: line {reader.line_num}: not CSV ({error}): quote a field that holds a quote or a "
                         f"line break, doubling each quote inside it (\"\"), or write the file as TSV "
                         f"(no quoting)") from None
    return records


def _check_translation_languages(path, table, languages):
    found = table.features["translation"]
    names = sorted(getattr(found, "languages", None) or (found.keys() if isinstance(found, dict) else []))
    if names and not set(languages) <= set(names):
        raise ValueError(f"{path}: the 'translation' column has the languages {names}, not {list(languages)}; "
                         f"choose the pair with pair='xx-yy'")


def _pair(path, where, texts, languages):
    """The Pair of a row's two texts; a ValueError naming the file and `where` (its line or row)
    when one is not text or blank."""
    for text, language in zip(texts, languages):
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"{path}: {where} has no {language!r} text (found {text!r}): write it, or delete the "
                             f"{where.split()[0]}")
    return Pair(*texts)
