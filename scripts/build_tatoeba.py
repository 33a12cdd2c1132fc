"""Build the package's Tatoeba English–Italian corpus from a folder of JSON-lines files.

    python scripts/build_tatoeba.py FOLDER

FOLDER holds `train.jsonl` and `validation.jsonl` in the opus_books schema, one pair a line:
{"id": …, "translation": {"en": "…", "it": "…"}}, with the validation sources absent from the
training file (a split by English sentence of the English–Italian pairs of the Tatoeba project,
tatoeba.org, as exported by manythings.org/anki). The script checks that, then writes
`numpy_transformer/data/corpora/tatoeba-en-it/{train,validation}.jsonl.gz`: the same rows
without their ids, in the same order, gzip-compressed byte for byte the same on every run. The
test split is not stored: `numpy_transformer.data.tatoeba` carves it from training by source.
"""
import argparse
import gzip
import json
from pathlib import Path

from numpy_transformer.data.tatoeba import CORPUS_FOLDER, read_rows

SPLITS = ("train", "validation")


def build(folder, out=CORPUS_FOLDER):
    rows = {split: read_rows(Path(folder) / f"{split}.jsonl", gzip_compressed=False) for split in SPLITS}
    shared = {en for en, _ in rows["validation"]} & {en for en, _ in rows["train"]}
    if shared:
        raise SystemExit(f"{len(shared)} validation sources occur in training, e.g. {sorted(shared)[0]!r}")
    out.mkdir(parents=True, exist_ok=True)
    for split, pairs in rows.items():
        lines = "".join(json.dumps({"translation": {"en": en, "it": it}}, ensure_ascii=False) + "\n"
                        for en, it in pairs)
        with open(out / f"{split}.jsonl.gz", "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0,
                                                                         filename="") as file:
            file.write(lines.encode("utf-8"))
        print(f"{out / f'{split}.jsonl.gz'}: {len(pairs):,} pairs, {(out / f'{split}.jsonl.gz').stat().st_size:,} bytes")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="a folder holding train.jsonl and validation.jsonl")
    build(parser.parse_args().folder)
