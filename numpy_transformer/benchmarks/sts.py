"""The STS benchmark (Cer et al. 2017, SemEval-2017 task 1) for sentence embeddings:
`numpy-transformer bench sts --model FOLDER --data sts-test.csv`.

Its test split holds 1,379 pairs of English sentences (a_k, b_k), each scored by people from 0
(unrelated) to 5 (the same meaning), s_k. A sentence-embedding model e is judged by how well the
cosine of the two embeddings orders the pairs as the people did, Spearman's rank correlation

    c_k = cos(e(a_k), e(b_k))                        k = 1 … N
    ρ   = Pearson's r of (rank(c_1) … rank(c_N)) and (rank(s_1) … rank(s_N))

with Pearson's r of the values themselves beside it. MTEB and the sentence-transformers papers
report 100 ρ ("cosine Spearman").

The file is the benchmark's own sts-test.csv (in stsbenchmark.tar.gz): one pair a line, fields
separated by tabs, no quoting (a quote mark is text):

    genre  file  year  id  score  sentence 1  sentence 2  [source 1  source 2]

It is untrusted input: a line that is not UTF-8, a line without 7 (or 9) fields, a score that is
not a number from 0 to 5, an empty sentence, or scores that are all equal (no order to
correlate with) is a ValueError naming the file, the line and the field.

Both frameworks embed the same 2N sentences (each pair's first sentences, then its second
ones) in batches of `batch_size`, tokenization included and loading not: this project's `embed`
(the model, tokenizer and pooling recipe of `interop.sentence_encoder.load_sentence_encoder`)
and sentence-transformers' `SentenceTransformer.encode` on the same folder, in a child process
of its own with torch.set_num_threads(threads). Each first embeds one batch untimed; the time
is the median of `runs` passes over all 2N sentences. The two Spearman figures must agree to
AGREEMENT.
"""
import dataclasses
import json
import statistics
import time

import numpy as np

SCORE_FIELD, FIRST_FIELD, SECOND_FIELD = 4, 5, 6
FIELD_NAMES = ("genre", "file", "year", "id", "score", "sentence 1", "sentence 2", "source 1", "source 2")
FIELD_COUNTS = (7, 9)                # the pair alone, or the pair and its two sources
LOWEST, HIGHEST = 0.0, 5.0
AGREEMENT = 1e-4                     # |ρ here − ρ of sentence-transformers| allowed
MISSING_REFERENCE = ("sentence-transformers is not installed, so its figure is not measured: "
                     "pip install torch==2.13.0 sentence-transformers (the CPU build of torch)")


@dataclasses.dataclass(frozen=True)
class ScoredPairs:
    """The pairs of an STS file: `first` and `second` the sentences (lists of N strings),
    `scores` the human scores (N,) float64 from 0 to 5."""

    first: list
    second: list
    scores: np.ndarray

    def sentences(self):
        """The 2N sentences in the order embedded: every first sentence, then every second one."""
        return self.first + self.second


def read_sts_pairs(path):
    """The ScoredPairs of an sts-*.csv file of the STS benchmark (module docstring); a
    ValueError names the file, the line and the field of the first thing wrong."""
    from numpy_transformer.data.utf8 import read_lines

    first, second, scores = [], [], []
    for number, line in enumerate(read_lines(path), start=1):
        fields = line.split("\t")
        if len(fields) not in FIELD_COUNTS:
            raise ValueError(f"{path}: line {number} has {len(fields)} tab-separated field(s); an STS benchmark line "
                             f"has 7 ({', '.join(FIELD_NAMES[:7])}), or 9 with {FIELD_NAMES[7]} and "
                             f"{FIELD_NAMES[8]}: give the benchmark's sts-test.csv")
        scores.append(score(path, number, fields[SCORE_FIELD]))
        for column, sentences in ((FIRST_FIELD, first), (SECOND_FIELD, second)):
            if not fields[column].strip():
                raise ValueError(f"{path}: line {number}: {FIELD_NAMES[column]} (field {column + 1}) is empty: "
                                 f"every pair needs two sentences")
            sentences.append(fields[column])
    if len(set(scores)) < 2:
        raise ValueError(f"{path}: {'no scored pairs' if not scores else f'every pair has the score {scores[0]:g}'}: "
                         f"a rank correlation needs at least two pairs with different scores")
    return ScoredPairs(first, second, np.array(scores))


def score(path, number, text):
    """The human score of line `number`: a number from 0 to 5."""
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not LOWEST <= value <= HIGHEST:
        raise ValueError(f"{path}: line {number}: score (field {SCORE_FIELD + 1}) is {text!r}; the STS benchmark's "
                         f"human scores are numbers from {LOWEST:g} to {HIGHEST:g}")
    return value


def pair_cosines(vectors):
    """(N,) cosines c_k = ⟨u_k, v_k⟩ / (‖u_k‖ ‖v_k‖) of the embeddings (2N, d) of
    `ScoredPairs.sentences()`: row k against row N + k."""
    from numpy_transformer.sentence_embedding import normalised

    n = len(vectors) // 2
    return (normalised(vectors[:n]) * normalised(vectors[n:])).sum(axis=-1)


def correlations(cosines, scores):
    """{"spearman": ρ, "pearson": r} of the cosines (N,) against the human scores (N,)."""
    from scipy.stats import pearsonr, spearmanr

    cosines = np.asarray(cosines, dtype=np.float64)
    return {"spearman": float(spearmanr(cosines, scores).statistic),
            "pearson": float(pearsonr(cosines, scores).statistic)}


def timed_embeddings(encode, sentences, batch_size, runs):
    """(the embeddings (2N, d) that encode(sentences) returns, the seconds of each of `runs`
    calls): one batch is embedded first, untimed (what a first call pays once)."""
    encode(sentences[:batch_size])
    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        vectors = encode(sentences)
        seconds.append(time.perf_counter() - start)
    return np.asarray(vectors), seconds


def print_reference_cosines(folder, data, threads, batch_size, runs):
    """In a fresh process: print the JSON {"cosines": […], "seconds": […]} of
    sentence-transformers' embeddings of the pairs in `data`, or null when it is not installed."""
    from numpy_transformer.benchmarks.train_step import import_torch

    try:
        import_torch(threads)
        from sentence_transformers import SentenceTransformer
    except ImportError:
        print("null")
        return
    model = SentenceTransformer(str(folder), device="cpu")
    vectors, seconds = timed_embeddings(lambda texts: model.encode(texts, batch_size=batch_size),
                                        read_sts_pairs(data).sentences(), batch_size, runs)
    print(json.dumps({"cosines": pair_cosines(vectors).tolist(), "seconds": seconds}))


def result(framework, cosines, seconds, pairs, threads, batch_size):
    """The figures of one framework: its correlations, the median seconds of a pass over the 2N
    sentences and the sentences per second."""
    median = statistics.median(seconds)
    return {"framework": framework, "pairs": len(pairs.scores), **correlations(cosines, pairs.scores),
            "seconds": median, "sentences_per_second": 2 * len(pairs.scores) / median, "threads": threads,
            "batch_size": batch_size}


def describe(recipe):
    """The pooling recipe in words: "mean pooling, normalised, texts cut at 256 tokens"."""
    return (f"{' + '.join(recipe.modes)} pooling, {'normalised' if recipe.normalize else 'not normalised'}, "
            f"{'lowercased, ' if recipe.lowercase else ''}texts cut at {recipe.max_length} tokens")


def run(model, data, threads=1, batch_size=32, runs=1, reference=True, log=print):
    """Measure the STS benchmark on the pairs of the file `data` with the sentence-embedding
    model `model` (a sentence-transformers folder or Hub name), here and, when `reference` and
    sentence-transformers is installed, there; log a table; return the result dicts. A
    ValueError when the two Spearman figures differ by more than AGREEMENT."""
    from numpy_transformer.benchmarks.train_step import in_child
    from numpy_transformer.data.hub import model_folder
    from numpy_transformer.interop.sentence_encoder import load_sentence_encoder
    from numpy_transformer.sentence_embedding import embed

    pairs = read_sts_pairs(data)
    folder = model_folder(model)
    encoder, tokenizer, recipe = load_sentence_encoder(folder)
    log(f"STS benchmark: {len(pairs.scores)} scored pairs ({2 * len(pairs.scores)} sentences) of {data}")
    log(f"model {model}: {describe(recipe)}; batches of {batch_size}, {threads} thread{'s' * (threads > 1)}, "
        f"median of {runs} run{'s' * (runs > 1)}")
    log(f"{'':23}{'Spearman':>9}{'Pearson':>9}{'seconds':>9}{'sentences/s':>13}")
    vectors, seconds = timed_embeddings(lambda texts: embed(encoder, tokenizer, texts, recipe, batch_size),
                                        pairs.sentences(), batch_size, runs)
    cosines = pair_cosines(vectors)
    results = [result("numpy-transformer", cosines, seconds, pairs, threads, batch_size)]
    if reference:
        measured = json.loads(in_child(__name__, "print_reference_cosines", str(folder), str(data), threads,
                                       batch_size, runs))
        if measured is None:
            log(MISSING_REFERENCE)
        else:
            results.append(result("sentence-transformers", measured["cosines"], measured["seconds"], pairs, threads,
                                   batch_size))
    for figures in results:
        log(f"{figures['framework']:23}{100 * figures['spearman']:9.2f}{100 * figures['pearson']:9.2f}"
            f"{figures['seconds']:9.2f}{figures['sentences_per_second']:13.1f}")
    if len(results) == 2:
        check_agreement(cosines, measured["cosines"], results, log)
    return results


def check_agreement(cosines, reference_cosines, results, log):
    """Log how far this project's figures are from sentence-transformers'; a ValueError when
    the Spearman figures differ by more than AGREEMENT."""
    gap = abs(results[0]["spearman"] - results[1]["spearman"])
    largest = float(np.max(np.abs(np.asarray(cosines, dtype=np.float64) - reference_cosines)))
    if not gap <= AGREEMENT:
        raise ValueError(f"this project's Spearman correlation {results[0]['spearman']:.6f} differs from "
                         f"sentence-transformers' {results[1]['spearman']:.6f} by {gap:.1e}, more than {AGREEMENT:g}: "
                         f"the two read the model differently")
    log(f"the two agree: Spearman differs by {gap:.1e} (at most {AGREEMENT:g}), the cosines by at most {largest:.1e}")
