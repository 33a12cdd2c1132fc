"""Decoding (thesis §1.1): the target y* = argmax_y Π_t p(y_t | y_<t, x) of a source x, approximately.

There are |V|^n′ candidate sentences, so nobody takes that argmax exactly. Two approximations:

- **greedy decoding** takes the most probable token at every step,

      ŷ_t = argmax_v p(v | ŷ_<t, x),

  which is not the most probable sentence: argmax_y Π_t p(y_t | y_<t, x) ≠ Π_t argmax_{y_t} p(y_t | y_<t, x)
  (a likely first word can lead only to unlikely continuations);
- **beam search** keeps the `beam_size` most probable hypotheses; at every step it extends each
  of them by every token and keeps the top `beam_size` of the extensions.

Scores are sums of log-probabilities, log P(y | x) = Σ_t log p(y_t | y_<t, x), the log_softmax
of the projected logits; a hypothesis ends with EOS, whose probability counts in the sum (the
EOS itself is not part of the returned tokens). Beam search ranks finished hypotheses by the
length-normalised score log P(y | x) / lp(y), with

    lp(y) = |y|^α,        |y| = the number of terms in the sum (EOS included),

α = 1 (the default) giving the mean log-probability per token, as fairseq's and Hugging Face's
beam searches rank by default, and α = 0 the raw log-probability, which favours short sentences:
every term is ≤ 0, and a real-data model pays about 2 nats per token (perplexity ≈ 7), far more
than the price of ending early. GNMT's lp(y) = ((5 + |y|)/6)^α with α = 0.6 (Wu et al. 2016,
used by Vaswani et al. 2017) normalises too little for such a model: on Multi30k it left beam
outputs 16 % shorter than the references (docs/training.md, Decoding).

`beam_search_sentence` is beam search as the algorithm reads, one sentence at a time, lists of
hypotheses, each decoded again from SOS at every step: the plain form, to read first.
`greedy_decode` and `beam_search` (the default everywhere) run the encoder once and the decoder
one token per step (`IncrementalDecoder`); the key/value cache of the decoder's attention layers
makes a step cost O(t·d) rather than the O(t²·d) of decoding the whole prefix again. Every step
is batched over all sentences (× beams): one decoder call per step, shapes (rows, …); the
batched beam search (`_BeamSearch`) gives the plain form's hypotheses and scores.

model: a `Transformer`; src_ids: (sentences, n) source ids padded with its pad_id (the source
tokenizer's [PAD]); the target tokenizer gives the ids of [SOS] and [EOS]:

    from numpy_transformer.decoding import greedy_decode, beam_search, beam_search_sentence
    sos_id, eos_id = target_tokenizer.sos_id, target_tokenizer.eos_id     # 2 and 3: [UNK] [PAD] [SOS] [EOS] first
    greedy_decode(model, src_ids, sos_id=sos_id, eos_id=eos_id)       # [[15, 9, 4], [7, 12]]: a list per sentence
    beam_search(model, src_ids, sos_id=sos_id, eos_id=eos_id, beam_size=4, length_penalty=1.0)
    beam_search_sentence(model, src_ids[0], sos_id, eos_id, beam_size=4)   # [Hypothesis(tokens=[15, 9, 4], …), …]
"""
import dataclasses
from typing import NamedTuple

import numpy as np

import autograd.functional as F
from autograd import Tensor
from autograd.checks import checked_integer, checked_number
from numpy_transformer.inference import (check_length_penalty, checked_decoding_inputs, checked_scores, scoring_mode,
                                         with_progress)
from numpy_transformer.masks import causal_mask
from numpy_transformer.memory_budget import check_decoding_fits

__all__ = ["greedy_decode", "beam_search_sentence", "beam_search", "beam_search_n_best", "Hypothesis",
           "IncrementalDecoder", "length_normalizer", "max_output_length", "sequence_log_prob"]

EXTRA_OUTPUT_TOKENS = 50


def length_normalizer(length, alpha):
    """lp(y) = |y|^α; lp = 1 for |y| = 1 or α = 0.

    length: int or integer array; returns a float64 array (or scalar) of the same shape.
    A finished hypothesis scores log P(y | x) / lp(y): as log P ≤ 0, a larger lp (a longer y)
    divides the penalty of the extra terms away; at α = 1 the score is the mean log-probability
    of the hypothesis's tokens.
    """
    return np.asarray(length, dtype=np.float64) ** alpha


def max_output_length(source_lengths, max_len=None, extra=EXTRA_OUTPUT_TOKENS):
    """The default limit on the tokens produced (EOS included): the source length + `extra`
    (50, as Vaswani et al. 2017, §6.1; fairseq's max_len_a = 1, max_len_b = 50), capped by
    `max_len`, the positions of a model whose positions do not extend (None: no cap, see
    `TransformerConfig.position_limit`).

    source_lengths: int or integer array (batch,) of real (non-padding) source tokens.
    """
    lengths = np.asarray(source_lengths) + extra
    return lengths if max_len is None else np.minimum(lengths, max_len)


class Hypothesis(NamedTuple):
    """One output of beam search: `tokens` without SOS and EOS; `log_prob` = log P(y | x), the
    EOS term included when `finished`; `score` = log_prob / lp(y); `finished` False when the
    hypothesis was cut at the maximum length instead of ending with EOS."""
    tokens: list
    score: float
    log_prob: float
    finished: bool


class IncrementalDecoder:
    """The decoder side of one decoding run: the memory Z of the sources, and then
    log p(· | y_≤t, x) one new token per step.

    rows = batch · copies: each sentence's memory is repeated `copies` times (the beams), sentence
    b owning rows b·copies … b·copies + copies − 1.

    use_cache=True: each step feeds only the new token at position t; every masked self-attention
    appends its keys and values to the cache, (rows, heads, t + 1, d_k), and every
    cross-attention projects Z once (see MultiHeadAttention.forward).
    use_cache=False: each step decodes the whole prefix again under the causal mask of eq. (10)
    and keeps the last position: the reference the cache must reproduce.
    """

    def __init__(self, model, src_ids, use_cache=True, copies=1):
        src_mask = model.source_mask(src_ids)                                # (batch, 1, 1, n_src)
        memory = model.encode(src_ids, src_mask)                             # (batch, n_src, d)
        self.model = model
        self.memory = Tensor(np.repeat(memory.data, copies, axis=0))         # (rows, n_src, d)
        self.src_mask = np.repeat(src_mask, copies, axis=0)                  # (rows, 1, 1, n_src)
        self.prefix = np.zeros((len(self.src_mask), 0), dtype=np.int64)      # (rows, t): tokens fed so far
        self.copies = copies                                                 # rows b·copies … of sentence b
        self.cache = {} if use_cache else None

    def log_probs(self, tokens):
        """Feed `tokens` (rows,) at position t; return log p(· | y_≤t, x), (rows, tgt_vocab_size):
        the log_softmax of the logits Y_t P of §1.2.5, with −∞ for the padding token, which is
        never generated (the loss never trains it, and a PAD in an output would be read as
        padding when the output is fed back, by teacher forcing)."""
        start = self.prefix.shape[1]
        self.prefix = np.concatenate([self.prefix, np.asarray(tokens)[:, None]], axis=1)
        if self.cache is None:
            y = self.model.decode(self.memory, self.src_mask, self.prefix, causal_mask(start + 1))[:, -1:]
        else:
            y = self.model.decode(self.memory, self.src_mask, self.prefix[:, -1:], None, self.cache, start)
        return _log_probs(self.model, y[:, 0])

    def select(self, rows):
        """Keep rows `rows` (an index array, repeats allowed), in that order, each row taking one of
        the copies of its own sentence (beam search calls it at every step with the parents of
        the surviving hypotheses): the prefix and the self-attention caches (keys and values, or
        the recurrent state (S, z) of causal linear attention: arrays whose first axis is the
        row) are indexed. The memory, its mask and the cross-attention's keys and values are the
        same for every copy of a sentence, so they stay."""
        rows, sentence = np.asarray(rows), np.arange(len(self.prefix)) // self.copies
        if rows.shape != sentence.shape or not np.array_equal(rows // self.copies, sentence):
            raise ValueError(f"select: rows must give each of the {len(sentence)} rows one of the {self.copies} "
                             f"copies of its own sentence, got {rows.tolist()}")
        self.prefix = self.prefix[rows]
        if self.cache is not None:
            _select_cached_rows(self.cache, rows)


def _select_cached_rows(cache, rows):
    for key, value in cache.items():
        if key == "cross":                    # the memory's keys and values: the same in every copy
            continue
        if isinstance(value, dict):
            _select_cached_rows(value, rows)
        else:
            cache[key] = Tensor(value.data[rows])


def _log_probs(model, y):
    """log p(· | y_≤t, x), (rows, tgt_vocab_size), from the decoder's output y (rows, d) at the
    last position: the log_softmax of the logits y P of §1.2.5, −∞ for the padding token."""
    log_p = checked_scores(F.log_softmax(model.project(y), axis=-1).data, "log-probabilities")
    log_p[:, model.config.pad_id] = -np.inf
    return log_p


def greedy_decode(model, src_ids, sos_id, eos_id, max_len=None, use_cache=True, progress=None):
    """ŷ_t = argmax_v log p(v | ŷ_<t, x) until EOS, for every sentence of a padded batch.

    src_ids: integer array (batch, n_src), padded with config.pad_id. max_len: the most tokens
    produced per sentence (EOS included); by default `max_output_length` of each sentence's
    length: its length + 50, capped by config.max_len only when the model's positions stop
    there (`TransformerConfig.position_limit`, which bounds src_ids too). Returns one list of
    token ids per sentence, without SOS and EOS (and never the padding id, see
    `IncrementalDecoder.log_probs`). A finished sentence is fed padding (its output no longer
    changes) until all are done. use_cache=False decodes the whole prefix at every step (same
    tokens, slower). progress: shows the steps (`with_progress`).
    """
    src_ids, limits = _checked_inputs(model, src_ids, sos_id, eos_id, max_len)
    check_decoding_fits(model.config, src_ids, limits, beam_size=1)
    batch, pad_id = len(src_ids), model.config.pad_id
    tokens = np.full((batch, limits.max()), pad_id)
    finished = np.zeros(batch, dtype=bool)
    last = np.full(batch, sos_id)
    with scoring_mode(model):
        decoder = IncrementalDecoder(model, src_ids, use_cache)
        for t in _steps(progress, limits, "greedy"):
            best = decoder.log_probs(last).argmax(axis=-1)                   # (batch,)
            last = tokens[:, t] = np.where(finished, pad_id, best)
            finished |= (last == eos_id) | (t + 1 >= limits)
            if finished.all():
                break
    return [_without_eos(row[:limit], eos_id) for row, limit in zip(tokens, limits)]


def beam_search_sentence(model, source, sos_id, eos_id, beam_size=4, length_penalty=1.0, max_len=None):
    """Beam search (thesis §1.1) for one sentence, as the algorithm reads: the plain form of
    `beam_search_n_best`, which runs the same search over a batch (the default; the tests check
    that both give the same hypotheses and scores, with early_stopping=True).

    source: (n_src,) ids. With K = beam_size, the live hypotheses start as [SOS] alone; at every
    step t each is extended by every token v, log P(y_≤t | x) = log P(y_<t | x) + log p(v | y_<t, x);
    of the 2K best extensions, those among the first K that end with EOS (or reach the length
    limit) join the finished ones, which keep the K best by log P / lp(|y|); the K best without
    EOS live on. The search stops once K have finished and no live hypothesis can beat the best
    (log P only falls as y grows, so its score stays below log P / lp(limit)). Each hypothesis is
    decoded again from SOS at every step (no cache). Returns the K best `Hypothesis`, best first.
    """
    src_ids, limits = _checked_inputs(model, np.asarray(source)[None], sos_id, eos_id, max_len)
    K, limit = checked_integer("beam_size", beam_size, 1), int(limits[0])
    alpha = checked_number("length_penalty α of lp(y) = |y|^α", length_penalty, low=0)
    live, finished = [([], 0.0)], []                             # live: (tokens, log P(y | x))
    with scoring_mode(model):
        src_mask = model.source_mask(src_ids)                    # (1, 1, 1, n_src)
        memory = model.encode(src_ids, src_mask)                 # (1, n_src, d)
        for t in range(limit):
            extensions = [(tokens + [v], log_prob + log_p_v) for tokens, log_prob in live
                          for v, log_p_v in enumerate(_next_log_probs(model, memory, src_mask, [sos_id] + tokens))]
            best = sorted(extensions, key=lambda extension: -extension[1])[:2 * K]   # ties: in order
            ending = [(tokens, log_prob) for tokens, log_prob in best[:K] if tokens[-1] == eos_id or t + 1 == limit]
            finished += [Hypothesis(_without_eos(tokens, eos_id), float(log_prob / length_normalizer(t + 1, alpha)),
                                    float(log_prob), tokens[-1] == eos_id) for tokens, log_prob in ending]
            finished = sorted(finished, key=lambda hypothesis: -hypothesis.score)[:K]
            live = [(tokens, log_prob) for tokens, log_prob in best if tokens[-1] != eos_id][:K]
            best_possible = max(log_prob for _, log_prob in live) / length_normalizer(limit, alpha)
            if len(finished) == K and best_possible <= finished[0].score:
                break
    return finished


def _next_log_probs(model, memory, src_mask, prefix):
    """log p(· | prefix, x), (tgt_vocab_size,) float64: the decoder on the whole prefix (SOS first)
    under the causal mask of eq. (10), at its last position."""
    y = model.decode(memory, src_mask, np.array([prefix]), causal_mask(len(prefix)))   # (1, t + 1, d)
    return _log_probs(model, y[:, -1])[0].astype(np.float64)


def beam_search(model, src_ids, sos_id, eos_id, beam_size=4, length_penalty=1.0, max_len=None,
                early_stopping=True, use_cache=True, progress=None):
    """The best hypothesis of `beam_search_n_best` for every sentence: one list of token ids per
    sentence, without SOS and EOS. beam_size=1 and length_penalty=0 give `greedy_decode`'s."""
    n_best = beam_search_n_best(model, src_ids, sos_id, eos_id, beam_size, length_penalty, max_len,
                                early_stopping, use_cache, n_best=1, progress=progress)
    return [hypotheses[0].tokens for hypotheses in n_best]


def beam_search_n_best(model, src_ids, sos_id, eos_id, beam_size=4, length_penalty=1.0, max_len=None,
                       early_stopping=True, use_cache=True, n_best=None, progress=None):
    """Beam search (thesis §1.1): the `n_best` (default beam_size) best hypotheses of every
    sentence, best first, as `Hypothesis` tuples: `beam_search_sentence`'s, batched over the
    sentences and with the decoder's cache.

    With K = beam_size, V = tgt_vocab_size, B sentences, at every step t:
      1. one decoder call on the B·K live hypotheses gives log p(v | y_<t, x), (B, K, V);
      2. every extension scores log P(y_<t, x) + log p(v | y_<t, x); the 2K best of the K·V
         extensions of each sentence are ranked;
      3. those among the first K that end with EOS (or reach the length limit) join the
         finished hypotheses, ranked by log P / lp(|y|) with α = `length_penalty`, the best K
         kept; the K best extensions without EOS become the live hypotheses, and the decoder's
         cache is reordered to their parents.
    2K extensions always hold at least K without EOS (each live hypothesis has one EOS extension).

    A sentence stops at its length limit (`max_len`, as in `greedy_decode`), or once K
    hypotheses have finished and no live one can beat the best finished (early_stopping=True)
    or the worst of the K finished (False): log P only falls as a hypothesis grows, so no live
    hypothesis can score above max_live log P / lp(limit), and stopping there loses nothing.
    docs/training.md (Decoding) says why, and how this differs from Hugging Face's stopping.
    Scores are summed in float64. progress: shows the steps (`with_progress`).
    """
    src_ids, limits = _checked_inputs(model, src_ids, sos_id, eos_id, max_len)
    beam_size = checked_integer("beam_size", beam_size, 1)
    n_best = beam_size if n_best is None else checked_integer("n_best", n_best, 1, beam_size)
    length_penalty = checked_number("length_penalty α of lp(y) = |y|^α", length_penalty, low=0)
    check_length_penalty(length_penalty, int(limits.max()) + 1)
    if not isinstance(early_stopping, bool):
        raise ValueError(f"early_stopping must be True or False, got {early_stopping!r}")
    check_decoding_fits(model.config, src_ids, limits, beam_size)
    search = _BeamSearch(len(src_ids), beam_size, limits, eos_id, model.config.pad_id, length_penalty,
                         early_stopping)
    with scoring_mode(model):
        decoder = IncrementalDecoder(model, src_ids, use_cache, copies=beam_size)
        last = np.full(len(src_ids) * beam_size, sos_id)
        for t in _steps(progress, limits, f"beam {beam_size}"):
            log_p = decoder.log_probs(last).astype(np.float64)             # (B·K, V)
            parents, last = search.step(t, log_p.reshape(len(src_ids), beam_size, -1))
            if search.done.all():
                break
            decoder.select(parents)
    return search.n_best(n_best)


@dataclasses.dataclass
class _Hypotheses:
    """k hypotheses per sentence, as arrays (B, k, …)."""
    tokens: np.ndarray      # (B, k, L) generated tokens (EOS included), padded
    log_prob: np.ndarray    # (B, k) log P(y | x), float64
    length: np.ndarray      # (B, k) |y|: the terms of log_prob
    score: np.ndarray       # (B, k) log_prob / lp(|y|); −∞ for an empty slot

    def arrays(self):
        """The four arrays, in field order (dataclasses.astuple would deep-copy them)."""
        return self.tokens, self.log_prob, self.length, self.score

    def take(self, index):
        """The hypotheses index[b, j] of each sentence b: index (B, k′) → k′ per sentence."""
        return _Hypotheses(*(_per_sentence(array, index) for array in self.arrays()))

    def join(self, other):
        return _Hypotheses(*(np.concatenate(pair, axis=1) for pair in zip(self.arrays(), other.arrays())))

    def best(self, k):
        """The k best by score, in order (ties: the earlier first)."""
        return self.take(np.argsort(-self.score, axis=1, kind="stable")[:, :k])


class _BeamSearch:
    """The bookkeeping of `beam_search_n_best`: live and finished hypotheses, B sentences × K."""

    def __init__(self, batch, beam_size, limits, eos_id, pad_id, alpha, early_stopping):
        self.K, self.limits, self.eos_id, self.alpha = beam_size, limits, eos_id, alpha
        self.early_stopping = early_stopping
        shape = (batch, beam_size)
        empty = _Hypotheses(np.full(shape + (limits.max(),), pad_id), np.full(shape, -np.inf),
                            np.zeros(shape, dtype=np.int64), np.full(shape, -np.inf))
        # one live hypothesis per sentence at first, SOS alone (the others at −∞ never win)
        self.live = dataclasses.replace(empty, log_prob=np.tile(np.where(np.arange(beam_size) == 0, 0.0, -np.inf),
                                                                (batch, 1)))
        self.finished = empty
        self.done = np.zeros(batch, dtype=bool)

    def step(self, t, log_p):
        """Extend by log p (B, K, V) at step t; return the decoder rows of the new live
        hypotheses' parents (B·K,) and their last tokens (B·K,)."""
        batch, K = log_p.shape[:2]
        extended, parents = self._extensions(t, log_p)                     # (B, 2K)
        token = extended.tokens[:, :, t]
        reaches_limit = (t + 1 >= self.limits)[:, None]
        finishing = ((np.arange(2 * K) < K) & ((token == self.eos_id) | reaches_limit)
                     & np.isfinite(extended.log_prob) & ~self.done[:, None])
        if finishing.any():                 # else the K finished stay the best K, in their order
            candidates = _Hypotheses(*extended.arrays()[:3], np.where(finishing, extended.score, -np.inf))
            self.finished = self.finished.join(candidates).best(K)
        survivors = np.argsort(token == self.eos_id, axis=1, kind="stable")[:, :K]   # (B, K) non-EOS, by rank
        self.live = extended.take(survivors)
        self.done |= self._stops() | reaches_limit[:, 0]
        rows = _per_sentence(parents, survivors) + K * np.arange(batch)[:, None]
        return rows.ravel(), self.live.tokens[:, :, t].ravel()

    def _extensions(self, t, log_p):
        """The 2K best one-token extensions of the live hypotheses of each sentence, ranked
        (ties: the earlier parent, then the smaller token id), and their parents (B, 2K) in 0 … K − 1."""
        batch, K, vocab = log_p.shape
        log_prob = (self.live.log_prob[:, :, None] + log_p).reshape(batch, K * vocab)
        top = _top_k(log_prob, 2 * K)                                      # (B, 2K) into K·V
        parents, token = np.divmod(top, vocab)
        tokens = _per_sentence(self.live.tokens, parents)                   # (B, 2K, L)
        tokens[:, :, t] = token
        top_log_prob = _per_sentence(log_prob, top)
        extended = _Hypotheses(tokens, top_log_prob, np.full(top.shape, t + 1),
                               top_log_prob / length_normalizer(t + 1, self.alpha))
        return extended, parents

    def _stops(self):
        """(B,) sentences with K finished hypotheses that no live one can beat (see early_stopping)."""
        full = np.isfinite(self.finished.score).all(axis=1)
        best_possible = self.live.log_prob.max(axis=1) / length_normalizer(self.limits, self.alpha)
        threshold = self.finished.score[:, 0] if self.early_stopping else self.finished.score[:, -1]
        return full & (best_possible <= threshold)

    def n_best(self, n):
        """Per sentence, its n best finished hypotheses as `Hypothesis` tuples."""
        return [[self._hypothesis(b, j) for j in range(n) if np.isfinite(self.finished.score[b, j])]
                for b in range(len(self.done))]

    def _hypothesis(self, b, j):
        tokens = self.finished.tokens[b, j, :self.finished.length[b, j]]
        ended = bool(tokens[-1] == self.eos_id)
        return Hypothesis(_without_eos(tokens, self.eos_id), float(self.finished.score[b, j]),
                          float(self.finished.log_prob[b, j]), ended)


def _per_sentence(array, index):
    """array[b, index[b, j]] for every sentence b: (B, n, …) and (B, k) → (B, k, …). (NumPy's
    take_along_axis does the same for 2-D arrays at two and a half times the cost.)"""
    return array[np.arange(len(index))[:, None], index]


def _top_k(values, k):
    """(B, n) → (B, k): the indices of the k largest entries of each row, largest first, ties
    in index order (the first k of a stable argsort of −values), without sorting all n entries
    (the K·V extensions of a beam step): only the entries at least `_kth_largest_floor` of their
    row, every one of the k largest among them, are sorted."""
    batch, n = values.shape
    floor = _kth_largest_floor(values, k)                                   # (B, 1)
    rows, columns = np.nonzero(values >= floor)
    order = np.lexsort((columns, -values[rows, columns], rows))             # by row, value ↓, index
    first = np.searchsorted(rows[order], np.arange(batch))                  # where each row starts
    return columns[order][first[:, None] + np.arange(k)]


def _kth_largest_floor(values, k):
    """(B, n) → (B, 1): for each row a value that its k-th largest entry is not below. The rows
    cut into chunks of c entries (at least 8k chunks): the k-th largest of the chunks' maxima,
    which k entries of k different chunks reach. It costs a pass of maxima and a partition of
    n / c of them, against np.partition's O(n) selection on all n (an exact k-th largest, taken
    where the rows are too short to cut); few entries of a row of log-probabilities reach it."""
    batch, n = values.shape
    c = n // (8 * k)
    if c < 16:
        return np.partition(values, n - k, axis=1)[:, n - k:n - k + 1]
    chunks = n // c
    maxima = values[:, :chunks * c].reshape(batch, chunks, c).max(axis=2)   # (B, chunks)
    return np.partition(maxima, chunks - k, axis=1)[:, chunks - k:chunks - k + 1]


def sequence_log_prob(model, src_ids, targets, sos_id):
    """log P(y | x) = Σ_t log p(y_t | y_<t, x) of given targets, by teacher forcing (thesis §1.1).

    src_ids: (batch, n_src), padded; targets: one list of token ids per sentence, scored as
    given (append the EOS id to count the probability of ending there). Returns (batch,) float64.
    """
    src_ids = np.asarray(src_ids)
    if len(targets) != len(src_ids) or not all(len(y) for y in targets):
        raise ValueError(f"targets must be one non-empty list of ids per sentence of src_ids {src_ids.shape}, "
                         f"got lengths {[len(y) for y in targets]}")
    pad_id, n = model.config.pad_id, max(len(y) for y in targets)
    outputs = np.full((len(targets), n), pad_id)
    for row, y in zip(outputs, targets):
        row[:len(y)] = y
    inputs = np.concatenate([np.full((len(targets), 1), sos_id), outputs[:, :-1]], axis=1)
    real = np.arange(n) < np.array([len(y) for y in targets])[:, None]       # (batch, n)
    with scoring_mode(model):
        src_mask = model.source_mask(src_ids)
        y = model.decode(model.encode(src_ids, src_mask), src_mask, inputs, causal_mask(n))
        log_p = checked_scores(F.log_softmax(model.project(y), axis=-1).data, "log-probabilities").astype(np.float64)
    return np.where(real, np.take_along_axis(log_p, outputs[..., None], axis=-1)[..., 0], 0.0).sum(axis=1)


def _without_eos(tokens, eos_id):
    """The tokens before the first EOS, as a list of ints."""
    tokens = [int(token) for token in tokens]
    return tokens[:tokens.index(eos_id)] if eos_id in tokens else tokens


def _checked_inputs(model, src_ids, sos_id, eos_id, max_len):
    """src_ids as an integer array and the output limit of each sentence (batch,): `max_len`, or
    by default `max_output_length` of each sentence's length; a ValueError names a bad argument."""
    src_ids, lengths = checked_decoding_inputs(model, src_ids, sos_id, eos_id)
    limit = model.config.position_limit
    if max_len is None:
        return src_ids, max_output_length(lengths, limit)
    return src_ids, np.full(len(src_ids), checked_integer("max_len", max_len, 1, limit))


def _steps(progress, limits, what):
    """The decoding steps 0 … max(limits) − 1, through `progress` (a bar of tokens, which stops
    where the decoding does: the loop leaves it early once every sentence has ended)."""
    return with_progress(progress, range(int(limits.max())), desc=f"{what}: tokens", unit="token")
