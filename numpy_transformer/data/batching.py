"""Batches for training: token ids padded to the longest sentence of each batch, in batches of
sentences of similar length, reshuffled every epoch from a seed.

A pair (x, y) becomes three rows (ids from the source and target tokenizers):

    src     [SOS] x₁ … xₙ [EOS]         the encoder input
    tgt_in  [SOS] y₁ … yₘ               the decoder input (teacher forcing)
    tgt_out y₁ … yₘ [EOS]               the labels: tgt_out[t] is what the decoder must
                                         predict after reading tgt_in[: t + 1]

padded with [PAD] on the right; a [PAD] label is ignored by the loss (`ignore_index=pad_id`).

Maximum length (`max_len`, counting the special tokens, so a pair fits when len(x) + 2 ≤ max_len
and len(y) + 1 ≤ max_len). Policy, chosen by `policy`:
  - "drop" (the default): a pair that does not fit is left out; cutting a sentence would leave
    a target that no longer translates its source;
  - "truncate": x keeps its first max_len − 2 tokens, y its first max_len − 1 (the [EOS] stays).
`EncodedPairs.n_dropped` / `n_truncated` count what the policy did.
"""
from dataclasses import dataclass

import numpy as np

from numpy_transformer.masks import pad

POLICIES = ("drop", "truncate")
POOL_BATCHES = 50


@dataclass(frozen=True)
class EncodedPairs:
    """Token ids of the pairs that fit `max_len` (no special tokens yet), and what was cut.

    pair_index[k] is the position in the original list of the k-th kept pair."""
    src: list
    tgt: list
    pair_index: np.ndarray
    src_specials: tuple          # (sos, eos, pad) ids of the source tokenizer
    tgt_specials: tuple          # (sos, eos, pad) ids of the target tokenizer
    max_len: int = None
    policy: str = "drop"
    n_dropped: int = 0
    n_truncated: int = 0

    def __len__(self):
        return len(self.src)

    def length_keys(self):
        """What batches of similar lengths sort by (`batch_indices`): the target length within
        the source length."""
        return np.array([len(y) for y in self.tgt]), np.array([len(x) for x in self.src])

    def report(self):
        """One line for the training log: how many pairs the maximum length dropped or cut."""
        if self.max_len is None:
            return f"{len(self)} pairs, no maximum length"
        done = f"{self.n_dropped} dropped" if self.policy == "drop" else f"{self.n_truncated} truncated"
        return f"{len(self)} pairs, maximum length {self.max_len} tokens ({self.policy}): {done}"


@dataclass(frozen=True)
class Batch:
    """src (batch, n_src), tgt_in and tgt_out (batch, n_tgt), int64; n_tokens: the labels that
    are not padding (what the loss averages over); pair_index: which pairs are in the batch."""
    src: np.ndarray
    tgt_in: np.ndarray
    tgt_out: np.ndarray
    n_tokens: int
    pair_index: np.ndarray


def encode_pairs(pairs, src_tokenizer, tgt_tokenizer, max_len=None, policy="drop"):
    """Token ids of every pair (`Pair`s or (src, tgt) tuples), with the maximum-length policy
    applied (see the module docstring)."""
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    if max_len is not None and max_len < 3:
        raise ValueError(f"max_len must be at least 3 ([SOS] a word [EOS]), got {max_len}")
    src, tgt, kept, n_dropped, n_truncated = [], [], [], 0, 0
    for index, pair in enumerate(pairs):
        source, target = _texts(pair)
        x, y = src_tokenizer.encode(source), tgt_tokenizer.encode(target)
        if max_len is not None and (len(x) + 2 > max_len or len(y) + 1 > max_len):
            if policy == "drop":
                n_dropped += 1
                continue
            x, y, n_truncated = x[:max_len - 2], y[:max_len - 1], n_truncated + 1
        src.append(np.asarray(x, dtype=np.int64))
        tgt.append(np.asarray(y, dtype=np.int64))
        kept.append(index)
    return EncodedPairs(src, tgt, np.asarray(kept, dtype=np.int64), _specials(src_tokenizer), _specials(tgt_tokenizer),
                        max_len, policy, n_dropped, n_truncated)


def batch_indices(encoded, batch_size, rng, similar_lengths=True, pool_batches=POOL_BATCHES):
    """The batches of one epoch, as arrays of positions in `encoded`: every pair exactly once.

    similar_lengths: shuffle, cut into pools of `pool_batches` batches, sort each pool by
    length (`encoded.length_keys()`: source, then target, for pairs), cut the pools into batches,
    shuffle the batches. Sentences in
    a batch then have nearly the same length, so little of the batch is padding, and the order
    still changes from epoch to epoch. Otherwise: plain shuffled batches."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    order = rng.permutation(len(encoded))
    if not similar_lengths:
        return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    keys = encoded.length_keys()
    pool_size = batch_size * pool_batches
    batches = []
    for start in range(0, len(order), pool_size):
        pool = order[start:start + pool_size]
        pool = pool[np.lexsort([key[pool] for key in keys])]
        batches += [pool[i:i + batch_size] for i in range(0, len(pool), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]


def batches(encoded, batch_size, rng, similar_lengths=True, pool_batches=POOL_BATCHES):
    """Yield the `Batch`es of one epoch (see `batch_indices`); call again for the next epoch
    with the same Generator."""
    for positions in batch_indices(encoded, batch_size, rng, similar_lengths, pool_batches):
        yield make_batch(encoded, positions)


def make_batch(encoded, positions):
    """The padded arrays of the pairs at `positions` (see the module docstring)."""
    src_sos, src_eos, src_pad = encoded.src_specials
    tgt_sos, tgt_eos, tgt_pad = encoded.tgt_specials
    src = pad([np.concatenate(([src_sos], encoded.src[k], [src_eos])) for k in positions], src_pad)
    tgt_in = pad([np.concatenate(([tgt_sos], encoded.tgt[k])) for k in positions], tgt_pad)
    tgt_out = pad([np.concatenate((encoded.tgt[k], [tgt_eos])) for k in positions], tgt_pad)
    return Batch(src, tgt_in, tgt_out, int((tgt_out != tgt_pad).sum()), encoded.pair_index[positions])


def padding_fraction(batch_list, encoded):
    """The share of [PAD] in the src and tgt_out arrays of `batch_list` (built from `encoded`)."""
    src_pad, tgt_pad = encoded.src_specials[2], encoded.tgt_specials[2]
    padded = sum(int((b.src == src_pad).sum() + (b.tgt_out == tgt_pad).sum()) for b in batch_list)
    total = sum(b.src.size + b.tgt_out.size for b in batch_list)
    return padded / total


def _texts(pair):
    return (pair.src, pair.tgt) if hasattr(pair, "src") else tuple(pair)


def _specials(tokenizer):
    return tokenizer.sos_id, tokenizer.eos_id, tokenizer.pad_id
