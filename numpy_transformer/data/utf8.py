"""Text files read as UTF-8, line by line: the first line that is not UTF-8 is named, and lines
are counted the way `wc -l` and the Moses scripts count them.

    check_utf8("corpus.it")          # ValueError: corpus.it: line 3 is not UTF-8 text (…)
    read_lines("corpus.it")          # ["Ciao.", "Come stai?", …]
"""
from pathlib import Path


def check_utf8(path):
    """A ValueError naming the file and the first line that is not UTF-8 text."""
    with open(path, "rb") as file:
        for number, line in enumerate(file, start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as error:
                raise ValueError(f"{path}: line {number} is not UTF-8 text ({error.reason} at byte {error.start} "
                                 f"of the line): convert the file to UTF-8 (e.g. iconv -f latin1 -t utf-8)") from None


def check_line_ends(path, text):
    """A ValueError naming the file when `text` (the file's) ends its lines in a bare carriage
    return, as classic Mac OS and Excel's "CSV (Macintosh)" write them: it has "\\r" and no
    "\\n", and lines end at "\\n" here, so the whole file would be read as one line. (A lone
    "\\r" in a file of "\\n" lines is a character of its line, read as written.)"""
    if "\r" in text and "\n" not in text:
        raise ValueError(f"{path}: its lines end in a bare carriage return (\\r, as classic Mac OS and Excel's \"CSV "
                         f"(Macintosh)\" write them), and lines end at \\n or \\r\\n here, so it would be read as one "
                         f"line: convert its line ends (e.g. tr '\\r' '\\n' < {Path(path).name} > "
                         f"unix-{Path(path).name})")


def read_lines(path):
    """The lines of a UTF-8 text file, without their line ends. A line ends at "\\n" only (the
    "\\r" of a Windows line end is dropped), so a sentence holding another Unicode line break
    (U+2028, U+0085) stays one line and line i of two parallel files stays pair i; a byte-order
    mark at the start of the file is dropped. A file of bare "\\r" line ends is refused
    (`check_line_ends`)."""
    check_utf8(path)
    with open(Path(path), encoding="utf-8-sig", newline="") as file:
        text = file.read()
    check_line_ends(path, text)
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()                     # the end of the last line, not a line
    return [line.removesuffix("\r") for line in lines]
