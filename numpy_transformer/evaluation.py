"""Evaluation: translations of a test set, corpus BLEU and chrF, perplexity.

- BLEU (Papineni et al. 2002) and chrF (Popović 2015) come from `sacrebleu`, on written text:
  the model's tokens and the references both go through `detokenize` first (`l ' uomo .` →
  `l'uomo.`), and sacrebleu applies its own standard tokenisation, so the scores compare with
  published ones. Each score comes with sacrebleu's signature (the settings that produced it).
- Perplexity is exp of the mean per-token cross-entropy, −(1/T) Σ_t log p(y_t | y_<t, x), over
  the T non-padding labels of the pairs (EOS included), without label smoothing and with
  dropout off.
- Greedy decoding and beam search (`numpy_transformer.decoding`) side by side.

    >>> scores = corpus_scores(["il gatto dorme."], ["il gatto dorme."])
    >>> round(scores.bleu), round(scores.chrf)
    (100, 100)
"""
import dataclasses
import math

import numpy as np

from numpy_transformer.data.batching import make_batch, pad
from numpy_transformer.data.detokenize import detokenize
from numpy_transformer.decoding import beam_search, greedy_decode, inference_mode


def ordered_batches(encoded, batch_size):
    """The pairs of an `EncodedPairs` in batches of similar lengths, in a fixed order (no
    randomness: evaluation must not move any training generator)."""
    lengths = [(len(x), len(y)) for x, y in zip(encoded.src, encoded.tgt)]
    order = sorted(range(len(encoded)), key=lengths.__getitem__)
    for start in range(0, len(order), batch_size):
        yield make_batch(encoded, np.asarray(order[start:start + batch_size]))


def mean_cross_entropy(model, encoded, batch_size=64, label_smoothing=0.0):
    """−(1/T) Σ_t log p(y_t | y_<t, x) over every non-padding label of the pairs of `encoded`
    (an `EncodedPairs`), in eval mode: the validation loss. Returns a float."""
    from numpy_transformer.training import loss_on_batch

    if len(encoded) == 0:
        raise ValueError("mean_cross_entropy: no pairs to evaluate (all longer than the maximum length?)")
    total, tokens = 0.0, 0
    with inference_mode(model):
        for batch in ordered_batches(encoded, batch_size):
            total += loss_on_batch(model, batch, label_smoothing).item() * batch.n_tokens
            tokens += batch.n_tokens
    return total / tokens


def perplexity(cross_entropy):
    """exp(mean per-token cross-entropy in nats): the number of equally likely words the model
    hesitates between, on average. 1 is certainty; a uniform guess over l words gives l."""
    return math.exp(cross_entropy)


@dataclasses.dataclass(frozen=True)
class Scores:
    """Corpus BLEU and chrF (0–100) and sacrebleu's signatures of the two metrics."""
    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str

    def line(self):
        return f"BLEU {self.bleu:.2f}  chrF {self.chrf:.2f}"


def corpus_scores(hypotheses, references):
    """Corpus BLEU and chrF of written hypotheses against one written reference each."""
    from sacrebleu.metrics import BLEU, CHRF

    if len(hypotheses) != len(references):
        raise ValueError(f"corpus_scores: {len(hypotheses)} hypotheses for {len(references)} references")
    bleu, chrf = BLEU(), CHRF()
    return Scores(bleu.corpus_score(hypotheses, [references]).score, chrf.corpus_score(hypotheses, [references]).score,
                  str(bleu.get_signature()), str(chrf.get_signature()))


def decode_ids(model, sources, sos_id, eos_id, beam_size=1, length_penalty=0.6, batch_size=64):
    """Output token ids for each source (a list of id arrays, [SOS] … [EOS] included): greedy
    decoding when beam_size is 1, beam search otherwise. Sources are batched by length, the
    outputs returned in the order of `sources`."""
    outputs = [None] * len(sources)
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        src_ids = pad([sources[i] for i in chunk], model.config.pad_id)
        if beam_size == 1:
            decoded = greedy_decode(model, src_ids, sos_id, eos_id)
        else:
            decoded = beam_search(model, src_ids, sos_id, eos_id, beam_size=beam_size, length_penalty=length_penalty)
        for i, tokens in zip(chunk, decoded):
            outputs[i] = tokens
    return outputs


def with_specials(ids, tokenizer):
    """[SOS] ids [EOS] as an int64 array: what the encoder reads."""
    return np.concatenate(([tokenizer.sos_id], np.asarray(ids, dtype=np.int64), [tokenizer.eos_id]))


def translate(model, src_tokenizer, tgt_tokenizer, sentences, beam_size=1, length_penalty=0.6, batch_size=64):
    """Written translations of `sentences` (strings). Words outside the source vocabulary are
    read as [UNK]; a sentence longer than the model's max_len is a ValueError (see
    `too_long`)."""
    sources = [with_specials(src_tokenizer.encode(sentence), src_tokenizer) for sentence in sentences]
    long = too_long(sources, model.config.max_len)
    if long:
        raise ValueError(f"sentence {long[0] + 1} has {len(sources[long[0]])} tokens with [SOS] and [EOS], "
                         f"more than the model's maximum length {model.config.max_len}")
    outputs = decode_ids(model, sources, tgt_tokenizer.sos_id, tgt_tokenizer.eos_id, beam_size, length_penalty,
                         batch_size)
    return [tgt_tokenizer.detokenize(tokens) for tokens in outputs]


def too_long(sources, max_len):
    """Indices of the sources (id arrays with [SOS]/[EOS]) longer than `max_len`."""
    return [i for i, source in enumerate(sources) if len(source) > max_len]


@dataclasses.dataclass
class Evaluation:
    """A test set translated both ways and scored. sources and references are written text;
    greedy / beam: the hypotheses (beam None when beam_size is 1); n_skipped: pairs left out
    by the maximum-length policy."""
    sources: list
    references: list
    greedy: list
    beam: list
    greedy_scores: Scores
    beam_scores: Scores
    cross_entropy: float
    beam_size: int
    n_skipped: int

    @property
    def perplexity(self):
        return perplexity(self.cross_entropy)

    @property
    def best(self):
        """The scores of beam search, or of greedy decoding when there was no beam."""
        return self.beam_scores or self.greedy_scores


def evaluate_pairs(model, src_tokenizer, tgt_tokenizer, pairs, max_len, length_policy="drop", beam_size=4,
                   length_penalty=0.6, batch_size=64):
    """Translate the pairs (`Pair`s) greedily and with beam search, and score both; the
    perplexity of the references. Pairs are encoded as in training (`encode_pairs` with the
    same maximum length and policy), so a pair the policy drops is left out and counted."""
    from numpy_transformer.data.batching import encode_pairs

    encoded = encode_pairs(pairs, src_tokenizer, tgt_tokenizer, max_len, length_policy)
    if len(encoded) == 0:
        raise ValueError(f"no pair to evaluate: all {len(pairs)} are longer than the maximum length {max_len}")
    kept = [pairs[i] for i in encoded.pair_index]
    sources = [with_specials(x, src_tokenizer) for x in encoded.src]
    references = [detokenize(pair.tgt, tgt_tokenizer.language) for pair in kept]

    def hypotheses(beam):
        ids = decode_ids(model, sources, tgt_tokenizer.sos_id, tgt_tokenizer.eos_id, beam, length_penalty, batch_size)
        return [tgt_tokenizer.detokenize(tokens) for tokens in ids]

    greedy = hypotheses(1)
    beam = hypotheses(beam_size) if beam_size > 1 else None
    return Evaluation([detokenize(pair.src, src_tokenizer.language) for pair in kept], references, greedy, beam,
                      corpus_scores(greedy, references), beam and corpus_scores(beam, references),
                      mean_cross_entropy(model, encoded, batch_size), beam_size, len(pairs) - len(encoded))
