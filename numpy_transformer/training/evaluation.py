"""Evaluation of a trained model on a test set: its translations, corpus BLEU and chrF, perplexity.

- BLEU (Papineni et al. 2002) and chrF (Popović 2015) come from `sacrebleu`, on written text:
  the model's tokens and the references both go through `detokenize` first (`l ' uomo .` →
  `l'uomo.`), and sacrebleu applies its own standard tokenisation, so the scores compare with
  published ones. Each score comes with sacrebleu's signature (the settings that produced it).
- Perplexity is exp of the mean per-token cross-entropy, −(1/T) Σ_t log p(y_t | y_<t, x), over
  the T non-padding labels of the pairs (EOS included), without label smoothing and with
  dropout off (`numpy_transformer.training.loss`).
- Greedy decoding and beam search (`numpy_transformer.translation`) side by side.

    >>> scores = corpus_scores(["il gatto dorme."], ["il gatto dorme."])
    >>> round(scores.bleu), round(scores.chrf)
    (100, 100)
"""
import dataclasses

from numpy_transformer.data.batching import encode_pairs
from numpy_transformer.data.detokenize import detokenize
from numpy_transformer.training.loss import mean_cross_entropy, perplexity
from numpy_transformer.translation import decode_ids, with_specials


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
                   length_penalty=1.0, batch_size=64):
    """Translate the pairs (`Pair`s) greedily and with beam search, and score both; the
    perplexity of the references. Pairs are encoded as in training (`encode_pairs` with the
    same maximum length and policy), so a pair the policy drops is left out and counted."""
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
