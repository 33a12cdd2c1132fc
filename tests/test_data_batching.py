"""Batching: [SOS]/[EOS] placement, labels shifted by one, padding to the longest sentence of each
batch, the maximum-length policy and its counts, every pair once per epoch, batches of similar
lengths, and the same batches for the same seed."""
import numpy as np
import pytest

from numpy_transformer.data import Pair, builtin_splits, train_tokenizers
from numpy_transformer.data.batching import (batch_indices, batches, encode_pairs, make_batch, pad,
                                             padding_fraction)


@pytest.fixture(scope="module")
def tokenizers():
    return train_tokenizers(builtin_splits(n_pairs=3000))


@pytest.fixture(scope="module")
def pairs():
    return builtin_splits(n_pairs=3000).train


@pytest.fixture(scope="module")
def encoded(pairs, tokenizers):
    return encode_pairs(pairs, *tokenizers)


def epoch(encoded, seed, batch_size=16, **options):
    return list(batches(encoded, batch_size, np.random.default_rng(seed), **options))


def test_source_is_wrapped_in_sos_eos_and_the_labels_are_the_decoder_input_shifted_by_one(encoded, tokenizers):
    src_tokenizer, tgt_tokenizer = tokenizers
    sos, eos, pad_id = tgt_tokenizer.sos_id, tgt_tokenizer.eos_id, tgt_tokenizer.pad_id
    batch = make_batch(encoded, np.array([0, 1, 2]))
    for row in range(3):
        x, y = encoded.src[row], encoded.tgt[row]
        n, m = len(x), len(y)
        np.testing.assert_array_equal(batch.src[row, :n + 2], np.concatenate(([src_tokenizer.sos_id], x,
                                                                              [src_tokenizer.eos_id])))
        np.testing.assert_array_equal(batch.tgt_in[row, :m + 1], np.concatenate(([sos], y)))
        np.testing.assert_array_equal(batch.tgt_out[row, :m + 1], np.concatenate((y, [eos])))
        np.testing.assert_array_equal(batch.tgt_out[row, :m], batch.tgt_in[row, 1:m + 1])   # shifted by one
        assert (batch.tgt_in[row, m + 1:] == pad_id).all() and (batch.tgt_out[row, m + 1:] == pad_id).all()


def test_each_batch_is_padded_to_its_longest_sentence(encoded, tokenizers):
    pad_id = tokenizers[1].pad_id
    for positions in batch_indices(encoded, 16, np.random.default_rng(0)):
        batch = make_batch(encoded, positions)
        assert batch.src.shape[1] == max(len(encoded.src[k]) for k in positions) + 2
        real = (batch.tgt_out != pad_id).sum(axis=1)
        assert batch.tgt_out.shape[1] == real.max() == max(len(encoded.tgt[k]) for k in positions) + 1
        assert batch.n_tokens == real.sum()
        assert batch.src.dtype == batch.tgt_in.dtype == batch.tgt_out.dtype == np.int64


def test_every_pair_appears_exactly_once_per_epoch(encoded):
    for similar_lengths in (True, False):
        indices = np.concatenate(batch_indices(encoded, 16, np.random.default_rng(1), similar_lengths))
        assert sorted(indices) == list(range(len(encoded)))


def test_similar_length_batches_have_less_padding_than_random_batches(encoded):
    similar = padding_fraction(epoch(encoded, seed=2), encoded)
    random = padding_fraction(epoch(encoded, seed=2, similar_lengths=False), encoded)
    assert similar < random / 3


def test_the_same_seed_gives_the_same_batches_and_another_seed_other_batches(encoded):
    first, again, other = epoch(encoded, seed=5), epoch(encoded, seed=5), epoch(encoded, seed=6)
    assert all(np.array_equal(a.src, b.src) and np.array_equal(a.tgt_out, b.tgt_out) for a, b in zip(first, again))
    assert not all(np.array_equal(a.pair_index, b.pair_index) for a, b in zip(first, other))


def test_successive_epochs_from_one_generator_differ(encoded):
    rng = np.random.default_rng(0)
    one, two = list(batches(encoded, 16, rng)), list(batches(encoded, 16, rng))
    assert not all(np.array_equal(a.pair_index, b.pair_index) for a, b in zip(one, two))


def test_drop_policy_leaves_out_and_counts_pairs_longer_than_max_len(pairs, tokenizers):
    max_len = 10
    src_tokenizer, tgt_tokenizer = tokenizers
    too_long = sum(len(src_tokenizer.encode(p.src)) + 2 > max_len or len(tgt_tokenizer.encode(p.tgt)) + 1 > max_len
                   for p in pairs)
    encoded = encode_pairs(pairs, *tokenizers, max_len=max_len)
    assert 0 < too_long == encoded.n_dropped
    assert len(encoded) == len(pairs) - too_long and encoded.n_truncated == 0
    assert f"{too_long} dropped" in encoded.report()
    batch = make_batch(encoded, np.arange(len(encoded)))
    assert batch.src.shape[1] <= max_len and batch.tgt_in.shape[1] <= max_len


def test_truncate_policy_cuts_keeps_eos_and_counts(pairs, tokenizers):
    encoded = encode_pairs(pairs, *tokenizers, max_len=8, policy="truncate")
    assert len(encoded) == len(pairs) and encoded.n_dropped == 0 and encoded.n_truncated > 0
    batch = make_batch(encoded, np.arange(len(encoded)))
    assert batch.src.shape[1] == 8 and batch.tgt_out.shape[1] == 8
    eos = tokenizers[1].eos_id
    assert ((batch.tgt_out == eos).sum(axis=1) == 1).all()


def test_pair_index_points_back_at_the_original_pairs(pairs, tokenizers):
    encoded = encode_pairs(pairs, *tokenizers, max_len=10)
    for k in (0, 5, len(encoded) - 1):
        assert tokenizers[0].encode(pairs[encoded.pair_index[k]].src) == encoded.src[k].tolist()


def test_plain_tuples_work_as_pairs(tokenizers):
    encoded = encode_pairs([("the boy eats .", "il ragazzo mangia .")], *tokenizers)
    assert encode_pairs([Pair("the boy eats .", "il ragazzo mangia .")], *tokenizers).src[0].tolist() == \
        encoded.src[0].tolist()


def test_bad_arguments_are_named(pairs, tokenizers):
    with pytest.raises(ValueError, match="policy"):
        encode_pairs(pairs, *tokenizers, max_len=10, policy="cut")
    with pytest.raises(ValueError, match="max_len"):
        encode_pairs(pairs, *tokenizers, max_len=2)
    with pytest.raises(ValueError, match="batch_size"):
        batch_indices(encode_pairs(pairs[:5], *tokenizers), 0, np.random.default_rng(0))


def test_pad_fills_on_the_right():
    np.testing.assert_array_equal(pad([np.array([5, 6, 7]), np.array([8])], 1), [[5, 6, 7], [8, 1, 1]])
