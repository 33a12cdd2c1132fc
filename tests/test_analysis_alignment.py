"""Alignment error rate of cross-attention heads against the built-in corpus's word alignments
(numpy_transformer/analysis/alignment.py)."""
import numpy as np
import pytest

from analysis_helpers import PAIRS, tiny_model, tokenizers
from numpy_transformer.analysis.alignment import (AlignmentCounts, alignment_counts, alignment_markdown,
                                                  cross_attention_alignment, diagonal_links, predicted_links,
                                                  word_mass, word_maps)
from numpy_transformer.data import Pair

SRC_WORDS = [-1, 0, 1, 1, 2, -1]        # [SOS] w0 w1 w1′ w2 [EOS]: word 1 is two tokens
TGT_WORDS = [0, 1, 2, -1]               # queries predicting y0 y1 y2 [EOS]


def attention_on(columns):
    """One query row per entry, all its mass on key `columns[t]`."""
    H = np.zeros((len(columns), len(SRC_WORDS)))
    H[np.arange(len(columns)), columns] = 1.0
    return H


def test_a_perfect_diagonal_alignment_has_aer_zero():
    H = attention_on([1, 2, 4, 5])
    links = predicted_links(H, SRC_WORDS, TGT_WORDS, [0, 1, 2])
    counts = alignment_counts(links, {(0, 0), (1, 1), (2, 2)})
    assert links == {(0, 0), (1, 1), (2, 2)}
    assert counts.aer == 0.0 and counts.precision == counts.recall == 1.0


def test_a_designed_case_has_the_aer_it_should():
    """Gold: y1 translates x1 and x2. The head links y0 → x1 (wrong), y1 → x2, y2 → x2:
    |A ∩ S| = 2, |A| = 3, |S| = 4, AER = 1 − 2·2/(3 + 4) = 3/7."""
    gold = {(0, 0), (1, 1), (2, 1), (2, 2)}
    counts = alignment_counts(predicted_links(attention_on([2, 4, 4, 0]), SRC_WORDS, TGT_WORDS, [0, 1, 2]), gold)
    assert (counts.matched, counts.predicted, counts.gold) == (2, 3, 4)
    assert counts.aer == pytest.approx(3 / 7) and counts.precision == pytest.approx(2 / 3) and counts.recall == 0.5


def test_the_tokens_of_a_word_add_up_and_special_tokens_belong_to_no_word():
    H = np.array([[0.0, 0.3, 0.2, 0.2, 0.3, 0.0]])            # word 1 gets 0.4 over its two tokens
    assert word_mass(H, SRC_WORDS, [0]) == pytest.approx(np.array([[0.3, 0.4, 0.3]]))
    H = np.array([[0.9, 0.0, 0.05, 0.0, 0.05, 0.0]])          # [SOS] takes the most, but is no word
    assert predicted_links(H, SRC_WORDS, [0], [0]) == {(1, 0)}


def test_counts_add_up_over_sentences():
    total = AlignmentCounts(1, 2, 3) + AlignmentCounts(2, 2, 2)
    assert total == AlignmentCounts(3, 4, 5) and total.aer == pytest.approx(1 - 6 / 9)
    assert AlignmentCounts().aer == 0.0 and AlignmentCounts().precision == 0.0


def test_the_diagonal_reference_spreads_the_target_over_the_source():
    assert diagonal_links(3, 3, [0, 1, 2]) == {(0, 0), (1, 1), (2, 2)}
    assert diagonal_links(5, 3, [0, 1, 2]) == {(0, 0), (2, 1), (4, 2)}


def test_word_maps_follow_the_encoder_and_decoder_positions():
    src_tokenizer, tgt_tokenizer = tokenizers()
    src, tgt = word_maps(src_tokenizer, tgt_tokenizer, Pair("the man eats .", "l' uomo mangia ."))
    assert src == [-1, 0, 1, 2, 3, -1]
    assert tgt == [0, 0, 1, 2, 3, -1]                          # `l'` is two tokens, `l` and `'`


def test_every_cross_attention_head_of_a_model_gets_its_counts():
    src_tokenizer, tgt_tokenizer = tokenizers()
    model = tiny_model(src_tokenizer, tgt_tokenizer)
    heads, diagonal, used = cross_attention_alignment(model, src_tokenizer, tgt_tokenizer, PAIRS, n_pairs=5)
    gold = sum(len(pair.alignment) for pair in PAIRS[:5])
    assert used == 5 and list(heads) == ["decoder.0.cross_attn", "decoder.1.cross_attn"]
    assert all(len(counts) == 2 and all(c.gold == gold and 0 <= c.aer <= 1 for c in counts)
               for counts in heads.values())
    assert diagonal.gold == gold
    assert alignment_markdown(heads, diagonal).count("\n") == 2 + 4


def test_pairs_without_alignments_are_refused():
    src_tokenizer, tgt_tokenizer = tokenizers()
    model = tiny_model(src_tokenizer, tgt_tokenizer)
    with pytest.raises(ValueError, match="only the built-in corpus"):
        cross_attention_alignment(model, src_tokenizer, tgt_tokenizer, [Pair("a b .", "c d .")])
