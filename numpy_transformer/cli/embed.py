"""`numpy-transformer embed`: sentence embeddings from a pretrained encoder, as
sentence-transformers' `encode` gives them (`sentence_embedding.embed`).

    numpy-transformer embed --checkpoint HF_FOLDER|HUB_NAME "a text" ...     (or --file FILE, or standard input)
        [--out FILE.npy|FILE.jsonl] [--similarity | --search QUERY [--top-k K]] [--batch-size N]

The checkpoint is a BERT-architecture Hugging Face folder, a sentence-transformers folder
(all-MiniLM-L6-v2: its pooling and normalisation are read from it) or a Hub name. One text per
argument or per line. What is printed:

- by default, one JSON line per text, {"text": …, "embedding": [… d numbers]}; with --out the
  embeddings go to a file instead: FILE.npy (a (texts, d) float32 array) or FILE.jsonl;
- --similarity: the cosine-similarity matrix of the texts, row i and column j for texts i and j,
  tab-separated, 4 decimals;
- --search QUERY: the K texts closest to QUERY by cosine, best first, each as its cosine, a tab,
  the text.
"""
import json
import sys
from pathlib import Path

from numpy_transformer.cli.common import add_model_cache_argument, add_threads_argument, positive_integer, \
    standard_input_lines, utf8_lines

OUTPUT_FORMATS = (".npy", ".jsonl")


def add_parser(commands):
    embed = commands.add_parser("embed", help="sentence embeddings, cosine similarities or a semantic search with a "
                                              "pretrained encoder (all-MiniLM-L6-v2)",
                                description="Embed texts with a pretrained encoder: print the embeddings as JSON "
                                            "lines, write them to a file, print the texts' cosine similarities, or "
                                            "rank the texts against a query.")
    embed.add_argument("--checkpoint", required=True, metavar="DIR",
                       help="a Hugging Face BERT or sentence-transformers folder, or a Hub name "
                            "(sentence-transformers/all-MiniLM-L6-v2)")
    embed.add_argument("texts", nargs="*", metavar="TEXT", help="texts to embed (none: --file, or the lines of "
                                                                "standard input)")
    embed.add_argument("--file", type=Path, help="a UTF-8 text file, one text per line")
    embed.add_argument("--overwrite", action="store_true", help="let --out replace a file that exists")
    embed.add_argument("--out", type=Path, help=f"write the embeddings to this file, ending in "
                                                f"{' or '.join(OUTPUT_FORMATS)}, instead of printing them (its "
                                                f"folder created if missing)")
    task = embed.add_mutually_exclusive_group()
    task.add_argument("--similarity", action="store_true", help="print the cosine-similarity matrix of the texts")
    task.add_argument("--search", metavar="QUERY", help="print the texts closest to QUERY, best first")
    embed.add_argument("--top-k", type=positive_integer, default=5, metavar="K",
                       help="how many texts --search prints (default 5)")
    embed.add_argument("--batch-size", type=positive_integer, default=32, metavar="N",
                       help="texts encoded at once (default 32, as sentence-transformers)")
    add_model_cache_argument(embed)
    add_threads_argument(embed, "embedding the texts", "one sentence's matrices are small")
    embed.add_argument("--quiet", action="store_true", help="no progress bar on standard error while embedding (a "
                                                            "bar is drawn only when it is a terminal) and no line "
                                                            "about the file written")
    embed.set_defaults(run=command)


def command(args):
    """Embed the texts, then print or write what the flags ask for (module docstring)."""
    from numpy_transformer.interop.pretrained import names_pretrained
    from numpy_transformer.interop.sentence_encoder import load_sentence_encoder
    from numpy_transformer.sentence_embedding import embed

    if args.out is not None and args.out.suffix not in OUTPUT_FORMATS:
        raise ValueError(f"--out {args.out}: the file name must end in {' or '.join(OUTPUT_FORMATS)} (a NumPy array, "
                         f"or one JSON line per text)")
    if args.out is not None and (args.out.exists() or args.out.is_symlink()) and not args.overwrite:
        raise ValueError(f"--out {args.out}: the file already exists and embed does not replace a file unasked: "
                         f"give a new name, or --overwrite to replace it")
    texts = read_texts(args)
    queries = [] if args.search is None else utf8_lines([args.search], "--search query")
    if queries and not queries[0].strip():
        raise ValueError("--search: the query is empty: give the words to look for")
    if not names_pretrained(args.checkpoint):
        what = f"no such folder {args.checkpoint}" if not Path(args.checkpoint).exists() else \
            f"{args.checkpoint} is not a Hugging Face model folder (no config.json) nor a Hub name"
        raise ValueError(f"{what}: embed reads a BERT-architecture encoder such as "
                         f"all-MiniLM-L6-v2 (a folder of config.json, model.safetensors and tokenizer.json, or a Hub "
                         f"name: sentence-transformers/all-MiniLM-L6-v2), not a run folder of train")
    model, tokenizer, recipe = load_sentence_encoder(args.checkpoint, args.cache_dir)
    vectors = embed(model, tokenizer, texts + queries, recipe, args.batch_size,
                    lambda batches: progress_bar(batches, args.quiet))
    if args.search is not None:
        print_search(texts, vectors[:-1], vectors[-1], args.top_k)
    elif args.similarity:
        print_similarity(vectors)
    elif args.out is not None:
        write_embeddings(args.out, texts, vectors)
        if not args.quiet:
            print(f"wrote {len(texts)} embeddings of {vectors.shape[1]} dimensions to {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(json_lines(texts, vectors))
    return 0


def read_texts(args):
    """The texts of the arguments, of --file, or of standard input (one of the three), each
    UTF-8 and not blank; a ValueError naming the first that is not."""
    if args.texts and args.file is not None:
        raise ValueError("give the texts as arguments or as --file FILE, not both")
    if args.file is not None:
        from numpy_transformer.data.utf8 import read_lines

        texts, where = read_lines(args.file), f"{args.file}: line"
    elif args.texts:
        texts, where = utf8_lines(args.texts, "text"), "text"
    else:
        texts, where = standard_input_lines(), "standard input: line"
    if not texts:
        raise ValueError("nothing to embed: give texts as arguments, as --file FILE, or as lines on standard input")
    for number, text in enumerate(texts, start=1):
        if not text.strip():
            raise ValueError(f"{where} {number} is empty: every text needs at least one word (remove blank lines)")
    return texts


def progress_bar(batches, quiet):
    """tqdm over the batches on standard error: on a terminal only, and never with --quiet."""
    from tqdm import tqdm

    return tqdm(batches, file=sys.stderr, disable=quiet or not sys.stderr.isatty(), desc="embed", unit="batch",
                dynamic_ncols=True)


def json_lines(texts, vectors):
    """One JSON object per text: {"text": …, "embedding": [numbers]}, each number the shortest
    decimal that reads back as the same float32."""
    return "".join(f'{{"text": {json.dumps(text, ensure_ascii=False)}, "embedding": [{", ".join(map(str, vector))}]}}\n'
                   for text, vector in zip(texts, vectors))


def write_embeddings(path, texts, vectors):
    """The embeddings into `path` as a whole (`atomic_write`): .npy, or JSON lines. The .npy
    file is made in memory and written by Python's file object: NumPy writes an array to a real
    file with C's fwrite, whose short write on a full disk or past `ulimit -f` comes back as
    "48000 requested and 12768 written", without the errno that says which. Its folder is created if missing (runs/corpus.npy in a
    fresh clone)."""
    import io

    import numpy as np

    from numpy_transformer.training.atomic_files import atomic_write, atomic_write_text

    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".npy":
        content = io.BytesIO()
        np.save(content, vectors)
        atomic_write(path, lambda file: file.write(content.getbuffer()))
    else:
        atomic_write_text(path, json_lines(texts, vectors))


def print_similarity(vectors):
    from numpy_transformer.sentence_embedding import cosine_similarity

    print("\n".join("\t".join(f"{value:.4f}" for value in row) for row in cosine_similarity(vectors, vectors)))


def print_search(texts, vectors, query, top_k):
    from numpy_transformer.sentence_embedding import rank

    order, scores = rank(query, vectors)
    print("\n".join(f"{score:.4f}\t{texts[i]}" for i, score in zip(order[:top_k], scores)))
