"""JSON from elsewhere, parsed within bounds: the one way the project reads a JSON file it did not
just write (a run folder's model.json, training.json, data.json, manifest and lock; a Hugging Face
folder's config.json, tokenizer.json, tokenizer_config.json; a checkpoint's training state; a
safetensors header; a JSON object on the command line).

    read_json("runs/x/model.json")         # the value, or one ValueError naming the file
    parse_json(text, "checkpoint.npz: its training state")

What `json.loads` alone lets through, and what is refused here, each as one ValueError naming the
file (and the field), never a RecursionError, an OverflowError or a MemoryError:
  - a file larger than `max_bytes` (checked on its size before it is read, and on what is read),
    or not a regular file (a FIFO would hang the reader, a device would never end);
  - text that is not UTF-8;
  - arrays and objects nested deeper than `max_depth` (counted over the brackets outside strings,
    without recursion, before the parser, which recurses, sees the text);
  - an integer of more than MAX_DIGITS digits (`"d_model": 1` followed by 400 zeros), a number
    too large for a float (`1e400`), and NaN, Infinity and -Infinity (not JSON, though Python's
    parser reads them), unless `finite=False`; the message names the field where the number is
    (`attention_options.window`).

Each consumer still checks the values it uses against its own bounds (`TransformerConfig.validate`,
`interop.pretrained.ConfigFields`): these bounds only keep the parsing itself finite.
"""
import json
import math
import os
import re
import stat
from pathlib import Path

import numpy as np

MAX_BYTES = 16 * 2**20          # a configuration, manifest, lock or training state: a few kilobytes
TOKENIZER_BYTES = 512 * 2**20   # a tokenizer.json: the largest published ones are about 35 MB
MAX_DEPTH = 64                  # what this project and Hugging Face write nest 8 levels at most
MAX_DIGITS = 40                 # transformers writes int(1e30) (31 digits) as "no limit"
REMEDY = "the file is damaged or was not written for this project: replace it with a good copy"
STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def read_json(path, max_bytes=MAX_BYTES, max_depth=MAX_DEPTH, finite=True, remedy=REMEDY, **options):
    """The JSON value in the file `path`, within the bounds of the module docstring; a ValueError
    starting with the file otherwise (`remedy` saying what to do). options: passed to json.loads
    (object_pairs_hook)."""
    return parse_json(read_bounded(path, max_bytes, remedy), path, max_depth, finite, remedy, **options)


def read_bounded(path, max_bytes=MAX_BYTES, remedy=REMEDY):
    """The bytes of the regular file `path`, at most `max_bytes` of them; a ValueError naming the
    file when it is not a regular file or is larger (FileNotFoundError when it does not exist)."""
    path = Path(path)
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise ValueError(f"{path}: not a regular file (a {file_kind(mode)}): give the path of a JSON file")
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        data = file.read(min(size, max_bytes) + 1) if size <= max_bytes else b""
    if size > max_bytes or len(data) > max_bytes:
        raise ValueError(f"{path}: larger than the {max_bytes:,} bytes a file of this kind takes: {remedy}")
    return data


def file_kind(mode):
    """What a path of this st_mode is, in words: "folder", "named pipe (FIFO)", …"""
    kinds = ((stat.S_ISDIR, "folder"), (stat.S_ISFIFO, "named pipe (FIFO)"), (stat.S_ISCHR, "character device"),
             (stat.S_ISBLK, "block device"), (stat.S_ISSOCK, "socket"), (stat.S_ISREG, "regular file"))
    return next((name for test, name in kinds if test(mode)), "special file")


def parse_json(text, where, max_depth=MAX_DEPTH, finite=True, remedy=REMEDY, **options):
    """The JSON value of `text` (str or bytes), within the bounds of the module docstring; a
    ValueError starting with `where` (a file, or what the text is) otherwise."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(f"{where}: not UTF-8 JSON ({error.reason} at byte {error.start}): {remedy}") from None
    depth = nesting_depth(text)
    if depth > max_depth:
        raise ValueError(f"{where}: arrays and objects nested {depth:,} levels deep, past the {max_depth} this "
                         f"project reads: {remedy}")
    suspects = []

    def integer(digits):
        if len(digits.lstrip("-")) > MAX_DIGITS:
            suspects.append(digits)
            return Unreadable(digits)
        return int(digits)

    def number(digits):
        value = float(digits)
        if not math.isfinite(value):
            suspects.append(digits)
        return value

    def constant(name):
        suspects.append(name)
        return float(name.replace("Infinity", "inf"))

    try:
        value = json.loads(text, parse_int=integer, parse_float=number, parse_constant=constant, **options)
    except json.JSONDecodeError as error:
        raise ValueError(f"{where}: not UTF-8 JSON ({error}): {remedy}") from None
    if suspects and (finite or any(isinstance(suspect, str) and suspect.lstrip("-").isdigit()
                                   for suspect in suspects)):
        field, found = first_unbounded(value, finite)
        if field is not None:
            raise ValueError(f"{where}: {field or 'the value'}: {found} is outside what a number of this project "
                             f"can be (integers of at most {MAX_DIGITS} digits, finite numbers): {remedy}")
    return value


def nesting_depth(text):
    """The deepest nesting of arrays and objects in the JSON `text`, over the brackets outside its
    strings (a bound, not a parse: text that is not JSON is the parser's to refuse)."""
    brackets = NOT_BRACKET.sub("", STRING.sub("", text))
    if not brackets:
        return 0
    steps = np.frombuffer(brackets.encode("ascii"), np.uint8)
    return int(np.cumsum(np.where((steps == ord("[")) | (steps == ord("{")), 1, -1)).max())


class Unreadable(str):
    """An integer of more than MAX_DIGITS digits, kept as its text until the field is named."""

    def __repr__(self):
        return f"{self[:12]}…({len(self.lstrip('-'))} digits)"


def first_unbounded(value, finite=True):
    """(field, shown) of the first number of `value` outside the bounds (an `Unreadable`
    integer; with `finite`, a float that is NaN or infinite), its field as a path `a.b[2]` ("" for
    the value itself); (None, None) when there is none. Walks without recursion."""
    stack = [("", value)]
    while stack:
        field, item = stack.pop()
        if isinstance(item, Unreadable) or (finite and isinstance(item, float) and not math.isfinite(item)):
            return field, repr(item)
        if isinstance(item, dict):
            stack.extend((f"{field}.{key}" if field else str(key), inner) for key, inner in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend((f"{field}[{k}]", inner) for k, inner in reversed(list(enumerate(item))))
    return None, None
