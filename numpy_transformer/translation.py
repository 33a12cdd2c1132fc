"""Translating sentences with a trained model (thesis §1.1): text → ids → greedy decoding or
beam search (`numpy_transformer.decoding`) → text.

    translate(model, src_tokenizer, tgt_tokenizer, ["the cat sleeps ."], beam_size=4)
    → ["il gatto dorme."]

Sources are batched by length; each is read as [SOS] words [EOS], as in training. Every
sentence gets a translation, in order:

- a sentence longer than max_len: a model with sinusoidal positions (eq. (1) holds for every
  position) or T5's relative bias reads it whole, and may write up to its length + 50 tokens
  (`decoding.max_output_length`); a model whose positions stop at max_len (learned positions,
  Linformer: `TransformerConfig.position_limit`) reads its first max_len − 2 tokens between
  [SOS] and [EOS], as training's "truncate" policy cuts, with a warning naming the sentence;
- a sentence without a token (empty, or nothing the tokenizer reads) gets "".
"""
import warnings

import numpy as np

from numpy_transformer.masks import pad
from numpy_transformer.decoding import beam_search, greedy_decode
from numpy_transformer.inference import with_progress


def decode_ids(model, sources, sos_id, eos_id, beam_size=1, length_penalty=1.0, batch_size=64, progress=None):
    """Output token ids for each source (a list of id arrays, [SOS] … [EOS] included, or None
    for a sentence with nothing to read, whose output is empty): greedy decoding when beam_size
    is 1, beam search otherwise. Sources are batched by length, the outputs returned in the
    order of `sources`. progress: shows the batches decoded, and the tokens of each batch
    (`with_progress`); Ctrl-C stops the decoding at the step under way (KeyboardInterrupt)."""
    outputs = [[] for _ in sources]
    order = sorted((i for i, source in enumerate(sources) if source is not None), key=lambda i: len(sources[i]))
    what = "greedy" if beam_size == 1 else f"beam {beam_size}"
    for start in with_progress(progress, range(0, len(order), batch_size), desc=what, unit="batch"):
        chunk = order[start:start + batch_size]
        src_ids = pad([sources[i] for i in chunk], model.config.pad_id)
        if beam_size == 1:
            decoded = greedy_decode(model, src_ids, sos_id, eos_id, progress=progress)
        else:
            decoded = beam_search(model, src_ids, sos_id, eos_id, beam_size=beam_size, length_penalty=length_penalty,
                                  progress=progress)
        for i, tokens in zip(chunk, decoded):
            outputs[i] = tokens
    return outputs


def with_specials(ids, tokenizer):
    """[SOS] ids [EOS] as an int64 array: what the encoder reads."""
    return np.concatenate(([tokenizer.sos_id], np.asarray(ids, dtype=np.int64), [tokenizer.eos_id]))


def read_sources(model, tokenizer, sentences):
    """(sources, cut): what the encoder reads of each sentence, and the sentences it reads cut.

    sources[i]: [SOS] tokens [EOS] (`with_specials`), or None when the tokenizer finds no token
    in sentence i. cut: {i: its number of tokens} for each sentence longer than the model's
    positions hold (`TransformerConfig.position_limit`, None for sinusoidal and relative
    positions: nothing is cut); such a sentence keeps its first position_limit − 2 tokens."""
    limit = model.config.position_limit
    sources, cut = [], {}
    for i, sentence in enumerate(sentences):
        ids = tokenizer.encode(sentence)
        if limit is not None and len(ids) + 2 > limit:
            cut[i], ids = len(ids), ids[:limit - 2]
        sources.append(with_specials(ids, tokenizer) if ids else None)
    return sources, cut


def cut_note(what, number, n_tokens, limit):
    """`line 604 has 93 tokens; the model reads the first 62 …`: what `read_sources` did to a
    sentence longer than the model's `limit` positions."""
    return (f"{what} {number} has {n_tokens} tokens; the model reads the first {limit - 2} (its {limit} positions "
            f"hold [SOS] and [EOS] too): split it to translate the rest")


def written_translations(model, tgt_tokenizer, sources, beam_size=1, length_penalty=1.0, batch_size=64,
                         progress=None):
    """The written translation of each source of `read_sources` ("" for None); progress: see
    `decode_ids`."""
    outputs = decode_ids(model, sources, tgt_tokenizer.sos_id, tgt_tokenizer.eos_id, beam_size, length_penalty,
                         batch_size, progress)
    return [tgt_tokenizer.detokenize(tokens) for tokens in outputs]


def translate(model, src_tokenizer, tgt_tokenizer, sentences, beam_size=1, length_penalty=1.0, batch_size=64):
    """Written translations of `sentences` (strings), one per sentence, in order. Words outside
    the source vocabulary are read as [UNK]; a sentence without a token gets ""; a sentence
    longer than a model with learned positions can read is cut (see the module docstring) with
    a UserWarning naming it, as `numpy-transformer translate` prints a note."""
    sources, cut = read_sources(model, src_tokenizer, sentences)
    for i, n_tokens in cut.items():
        warnings.warn(cut_note("sentence", i + 1, n_tokens, model.config.position_limit), stacklevel=2)
    return written_translations(model, tgt_tokenizer, sources, beam_size, length_penalty, batch_size)
