"""Parallel text files, the layout of Moses, WMT, Multi30k and fairseq: one file per language,
one sentence a line, named by a prefix and the language; line i of one file is the
translation of line i of the other.

    data/corpus.en    Hello.                 --dataset data/corpus --pair en-it
                      How are you?
    data/corpus.it    Ciao.
                      Come stai?

The held-out splits are prefixes too (`--validation-file data/dev --test-file data/test`), and
a folder may hold the three pairs of files: train.en + train.it, valid.en + valid.it (or
validation, val, dev), test.en + test.it (`official.folder_files`).

Lines end at "\\n" (`utf8.read_lines`) and are stripped of surrounding spaces. A line blank in
both files is skipped; everything else that breaks the line-by-line pairing is one ValueError
naming the file: different line counts, a line blank on one side only, a file that is empty or
not UTF-8, a prefix with only one of its two files.
"""
import re
from pathlib import Path

from numpy_transformer.data.corpus import Pair
from numpy_transformer.data.utf8 import read_lines

LANGUAGE_SUFFIX = re.compile(r"^\.([a-z]{2})$")
SHOWN = 60          # characters of a sentence an error message quotes


def language_file(prefix, language):
    """The file of one language: PREFIX.language."""
    return Path(f"{prefix}.{language}")


def is_prefix(path, languages):
    """True when `path` is not a file itself but the prefix of a language's file (PATH.en)."""
    return not Path(path).is_file() and any(language_file(path, language).is_file() for language in languages)


def prefix_label(prefix, languages):
    """How outputs name the two files: `data/corpus.{en,it}`."""
    return f"{prefix}.{{{','.join(languages)}}}"


def read_parallel_files(prefix, languages=("en", "it")):
    """The sentence pairs of PREFIX.source and PREFIX.target (a list of `Pair`), in line order;
    lines blank in both files are skipped. A ValueError naming the file for every way the two
    files can fail to pair up (see the module docstring)."""
    paths = [language_file(prefix, language) for language in languages]
    _check_both_exist(prefix, paths, languages)
    for path in paths:
        if path.stat().st_size == 0:
            raise ValueError(f"{path}: the file is empty")
    sides = [[line.strip() for line in read_lines(path)] for path in paths]
    if len(sides[0]) != len(sides[1]):
        raise ValueError(f"{paths[0]} has {len(sides[0]):,} lines and {paths[1]} has {len(sides[1]):,}: line i of "
                         f"one must be the translation of line i of the other; find the missing or extra line (a "
                         f"sentence broken over two lines, two sentences on one)")
    pairs = []
    for number, texts in enumerate(zip(*sides), start=1):
        if all(texts):
            pairs.append(Pair(*texts))
        elif any(texts):
            blank = texts.index("")
            other, text = paths[1 - blank], texts[1 - blank]
            shown = text if len(text) <= SHOWN else text[:SHOWN] + "…"
            raise ValueError(f"{paths[blank]}: line {number} is blank, but line {number} of {other} is not ({shown!r}): "
                             f"write its translation there, or delete line {number} from both files")
    if not pairs:
        raise ValueError(f"{prefix_label(prefix, languages)}: every line is blank")
    return pairs


def _check_both_exist(prefix, paths, languages):
    """A ValueError naming the missing file, the language files the prefix has, and the pair
    they would make."""
    missing = [path for path in paths if not path.is_file()]
    if not missing:
        return
    folder, name = Path(prefix).parent, Path(prefix).name
    found = sorted(path.suffix[1:] for path in folder.iterdir() if path.is_file() and path.stem == name
                   and LANGUAGE_SUFFIX.match(path.suffix)) if folder.is_dir() else []
    files = ", ".join(language_file(prefix, language).name for language in found) or "neither"
    suggestion = f"; to read those two, give --pair {_pair_of(found, languages)}" if len(found) == 2 else ""
    raise ValueError(f"{missing[0]}: no such file: the parallel corpus {prefix} is one file per language of the "
                     f"pair {'-'.join(languages)} ({' and '.join(map(str, paths))}); found {files}{suggestion}")


def _pair_of(found, languages):
    """The pair of the two `found` languages, in the order of `languages` where it has them."""
    source, target = languages
    if source in found:
        return f"{source}-{found[1 - found.index(source)]}"
    if target in found:
        return f"{found[1 - found.index(target)]}-{target}"
    return "-".join(found)
