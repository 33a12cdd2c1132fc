"""Build the package's Tatoeba English–Italian corpus from a folder of JSON-lines files.

    python scripts/build_tatoeba.py FOLDER

FOLDER holds `train.jsonl` and `validation.jsonl` in the opus_books schema, one pair a line:
{"id": …, "translation": {"en": "…", "it": "…"}}, with the validation sources absent from the
training file (a split by English sentence of the English–Italian pairs of the Tatoeba project,
tatoeba.org, as exported by manythings.org/anki), and `train-full.jsonl.gz`, every training pair
of that split, whose first rows are `train.jsonl`'s. The script checks that, then writes into
`numpy_transformer/data/corpora/tatoeba-en-it/`:

- `train.jsonl.gz`, `validation.jsonl.gz`: the rows of the two files without their ids, in the
  same order (the `tatoeba` corpus, the default preset's);
- `train-more.jsonl.xz`: the rows of `train-full.jsonl.gz` after `train.jsonl`'s, less the pairs
  whose source is a validation source up to case and punctuation (`corpus.source_key`); with
  `train.jsonl.gz` before them, the `tatoeba-full` corpus (the `translator` preset's).

Every file is compressed byte for byte the same on every run (gzip without a time stamp; xz at
preset 9). The test splits are not stored: `numpy_transformer.data.tatoeba` carves them from
training by source.
"""
import argparse
import gzip
import json
import lzma
from pathlib import Path

from numpy_transformer.data.corpus import source_key
from numpy_transformer.data.tatoeba import CORPUS_FOLDER, MORE_FILE, read_rows

SPLITS = ("train", "validation")


def build(folder, out=CORPUS_FOLDER):
    folder = Path(folder)
    rows = {split: read_rows(folder / f"{split}.jsonl", gzip_compressed=False) for split in SPLITS}
    shared = {en for en, _ in rows["validation"]} & {en for en, _ in rows["train"]}
    if shared:
        raise SystemExit(f"{len(shared)} validation sources occur in training, e.g. {sorted(shared)[0]!r}")
    full = read_rows(folder / "train-full.jsonl.gz")
    if full[:len(rows["train"])] != rows["train"]:
        raise SystemExit(f"{folder / 'train-full.jsonl.gz'} does not begin with the rows of {folder / 'train.jsonl'}")
    held_out = {source_key(en) for en, _ in rows["validation"]}
    more = [pair for pair in full[len(rows["train"]):] if source_key(pair[0]) not in held_out]
    out.mkdir(parents=True, exist_ok=True)
    for split, pairs in rows.items():
        with open(out / f"{split}.jsonl.gz", "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0,
                                                                         filename="") as file:
            file.write(json_lines(pairs))
        report(out / f"{split}.jsonl.gz", len(pairs))
    (out / MORE_FILE).write_bytes(lzma.compress(json_lines(more), preset=9))
    report(out / MORE_FILE, len(more), f" ({len(full) - len(rows['train']) - len(more)} left out: their source is a "
                                       f"validation source up to case and punctuation)")


def json_lines(pairs):
    return "".join(json.dumps({"translation": {"en": en, "it": it}}, ensure_ascii=False) + "\n"
                   for en, it in pairs).encode("utf-8")


def report(path, n_pairs, note=""):
    print(f"{path}: {n_pairs:,} pairs, {path.stat().st_size:,} bytes{note}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="a folder holding train.jsonl, validation.jsonl and train-full.jsonl.gz")
    build(parser.parse_args().folder)
