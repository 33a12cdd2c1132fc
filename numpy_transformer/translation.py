"""Translating sentences with a trained model (thesis §1.1): text → ids → greedy decoding or
beam search (`numpy_transformer.decoding`) → text.

    translate(model, src_tokenizer, tgt_tokenizer, ["the cat sleeps ."], beam_size=4)
    → ["il gatto dorme."]

Sources are batched by length; each is read as [SOS] words [EOS], as in training.
"""
import numpy as np

from numpy_transformer.masks import pad
from numpy_transformer.decoding import beam_search, greedy_decode


def decode_ids(model, sources, sos_id, eos_id, beam_size=1, length_penalty=1.0, batch_size=64):
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


def translate(model, src_tokenizer, tgt_tokenizer, sentences, beam_size=1, length_penalty=1.0, batch_size=64):
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
