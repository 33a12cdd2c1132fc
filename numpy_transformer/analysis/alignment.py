"""How well cross-attention finds the word alignment, on the built-in corpus whose true
alignments are known (`Pair.alignment`: (English word, Italian word) index pairs).

From one cross-attention head to links between words:
1. tokens to words: the source the encoder reads is [SOS] x [EOS] and the tokenizer may split
   a word (`l'` → `l` `'`), so key j belongs to word `word_indices(x)[j − 1]` ([SOS], [EOS]
   to none); query t of the decoder predicts target token t (the last query predicts [EOS]),
   which belongs to word `word_indices(y)[t]`;
2. the head's mass between words: M[k, m] = Σ over k's query rows, Σ over m's key columns;
3. each target word k with a gold link is linked to argmax_m M[k, m], the source word it
   attends most when it is predicted. (The argmax always names a word, so target words the
   gold leaves unaligned are skipped rather than counted as errors.)

Scores, with A the predicted links and S the gold ones, summed over the corpus:

    precision = |A ∩ S| / |A|,   recall = |A ∩ S| / |S|,
    AER = 1 − (|A ∩ S| + |A ∩ P|) / (|A| + |S|)          (Och & Ney 2003)

with the possible links P = S (the corpus marks every link sure), so AER = 1 − F1. A target word
aligned to two source words ("next to" ↔ "accanto") can match only one of them: recall < 1
even for a perfect head. The reference row `diagonal` links target word k to source word
round(k (n_x − 1) / (n_y − 1)), what a head that knew only positions would do.
"""
import dataclasses

import numpy as np

from numpy_transformer.analysis.capture import capture_attention
from numpy_transformer.data.batching import encode_pairs


@dataclasses.dataclass(frozen=True)
class AlignmentCounts:
    """|A ∩ S|, |A|, |S|, added up over sentences; the scores of the module docstring."""
    matched: int = 0
    predicted: int = 0
    gold: int = 0

    def __add__(self, other):
        return AlignmentCounts(self.matched + other.matched, self.predicted + other.predicted, self.gold + other.gold)

    @property
    def precision(self):
        return self.matched / self.predicted if self.predicted else 0.0

    @property
    def recall(self):
        return self.matched / self.gold if self.gold else 0.0

    @property
    def aer(self):
        total = self.predicted + self.gold
        return 1.0 - 2.0 * self.matched / total if total else 0.0


def alignment_counts(predicted, gold):
    """`AlignmentCounts` of two sets of (source word, target word) links."""
    predicted, gold = set(predicted), set(gold)
    return AlignmentCounts(len(predicted & gold), len(predicted), len(gold))


def word_mass(weights, src_word_of_key, tgt_word_of_query):
    """M (target words, source words): a head's weights (n_q, n_k) summed over each word's
    query rows and key columns (entries −1 of the maps belong to no word)."""
    src_words, tgt_words = np.asarray(src_word_of_key), np.asarray(tgt_word_of_query)
    keys = (src_words[:, None] == np.arange(src_words.max() + 1)).astype(np.float64)       # (n_k, source words)
    queries = (tgt_words[None, :] == np.arange(tgt_words.max() + 1)[:, None]).astype(np.float64)  # (target words, n_q)
    return queries @ np.asarray(weights, dtype=np.float64) @ keys


def predicted_links(weights, src_word_of_key, tgt_word_of_query, target_words):
    """{(argmax_m M[k, m], k) for k in target_words}: the links one head predicts."""
    M = word_mass(weights, src_word_of_key, tgt_word_of_query)
    return {(int(np.argmax(M[k])), int(k)) for k in target_words}


def diagonal_links(n_src_words, n_tgt_words, target_words):
    """The position-only reference: target word k ↔ source word round(k (n_x − 1)/(n_y − 1))."""
    scale = (n_src_words - 1) / max(n_tgt_words - 1, 1)
    return {(int(round(k * scale)), int(k)) for k in target_words}


def word_maps(src_tokenizer, tgt_tokenizer, pair):
    """(source word of every encoder position, target word of every decoder query) of a pair."""
    return [-1, *src_tokenizer.word_indices(pair.src), -1], [*tgt_tokenizer.word_indices(pair.tgt), -1]


def cross_attention_alignment(model, src_tokenizer, tgt_tokenizer, pairs, n_pairs=100):
    """Alignment counts of every cross-attention head over the first `n_pairs` pairs with an
    alignment that fit the model's max_len. Returns ({name: [AlignmentCounts per head]},
    AlignmentCounts of the diagonal reference, the number of pairs used)."""
    aligned = [pair for pair in pairs if pair.alignment]
    if not aligned:
        raise ValueError("no pair has a word alignment: only the built-in corpus has them (dataset 'builtin')")
    encoded = encode_pairs(aligned, src_tokenizer, tgt_tokenizer, model.config.max_len)
    heads, diagonal, used = {}, AlignmentCounts(), 0
    for k in range(min(n_pairs, len(encoded))):
        pair = aligned[encoded.pair_index[k]]
        src_ids = [src_tokenizer.sos_id, *encoded.src[k], src_tokenizer.eos_id]
        capture = capture_attention(model, src_ids, [tgt_tokenizer.sos_id, *encoded.tgt[k]])
        src_words, tgt_words = word_maps(src_tokenizer, tgt_tokenizer, pair)
        gold = set(pair.alignment)
        target_words = sorted({t for _, t in gold})
        for name in capture.names("decoder.cross_attn"):
            counts = [alignment_counts(predicted_links(H, src_words, tgt_words, target_words), gold)
                      for H in capture.weights[name]]
            heads[name] = counts if name not in heads else [a + b for a, b in zip(heads[name], counts)]
        diagonal += alignment_counts(diagonal_links(len(pair.src.split()), len(pair.tgt.split()), target_words), gold)
        used += 1
    return heads, diagonal, used


def alignment_markdown(heads, diagonal):
    """The alignment table: precision, recall and AER per cross-attention layer and head."""
    lines = ["| cross-attention | head | precision | recall | AER |", "|---|---:|---:|---:|---:|"]
    for name, counts in heads.items():
        for head, c in enumerate(counts):
            lines.append(f"| {name} | {head} | {c.precision:.3f} | {c.recall:.3f} | {c.aer:.3f} |")
    lines.append(f"| diagonal (positions only) | – | {diagonal.precision:.3f} | {diagonal.recall:.3f} | "
                 f"{diagonal.aer:.3f} |")
    return "\n".join(lines)
