"""Generating text with a decoder-only model: the next token drawn from

    p_T(v) ∝ exp(z_v / T)        temperature T > 0 (T → 0: the argmax, greedy decoding)

restricted to the k most probable tokens (top-k) and to the nucleus, the smallest set of the
most probable tokens whose mass reaches p (top-p, Holtzman et al. 2020), renormalised.

    ids = generate(model, prompt_ids, max_new_tokens=20, rng=np.random.default_rng(0),
                   temperature=0.8, top_k=40, top_p=0.95, eos_id=2)
"""
import numpy as np

from autograd.checks import checked_integer, checked_number, checked_token_ids
from numpy_transformer.inference import checked_scores, scoring_mode


def next_token_distribution(logits, temperature=1.0, top_k=None, top_p=None):
    """The sampling distribution (batch, V) of the next token from logits (batch, V), float64:
    softmax(z / T), then only the top_k most probable tokens and the top_p nucleus kept.

    A temperature so small that z / T overflows takes the limit T → 0 exactly: softmax of
    (z − max z) / T, where every entry is ≤ 0 and the overflow becomes exp(−∞) = 0 everywhere
    but at the largest logits, which share the mass (greedy decoding, ties split evenly)."""
    temperature = checked_number("temperature", temperature, low=0, low_open=True)
    logits = np.asarray(logits, dtype=np.float64)
    with np.errstate(over="ignore"):                 # an overflow to ±inf is the limit taken below
        z = logits / temperature
        if np.isinf(z[np.isfinite(logits)]).any():
            z = (logits - logits.max(axis=-1, keepdims=True)) / temperature
    if top_k is not None:
        top_k = checked_integer("top_k", top_k, low=1)
        kth = -np.sort(-z, axis=-1)[:, min(top_k, z.shape[-1]) - 1:min(top_k, z.shape[-1])]
        z = np.where(z >= kth, z, -np.inf)
    p = np.exp(z - z.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    if top_p is not None:
        top_p = checked_number("top_p", top_p, low=0, high=1, low_open=True)
        order = np.argsort(-p, axis=-1, kind="stable")
        sorted_p = np.take_along_axis(p, order, axis=-1)
        outside = np.cumsum(sorted_p, axis=-1) - sorted_p >= top_p        # the mass before it already reaches p
        np.put_along_axis(p, order, np.where(outside, 0.0, sorted_p), axis=-1)
        p /= p.sum(axis=-1, keepdims=True)
    return p


def sample_next(logits, rng, temperature=1.0, top_k=None, top_p=None):
    """One token id per row of logits (batch, V): the argmax when temperature is 0, else a draw
    from `next_token_distribution`."""
    if checked_number("temperature", temperature, low=0) == 0:
        return np.argmax(logits, axis=-1)
    p = next_token_distribution(logits, temperature, top_k, top_p)
    return (p.cumsum(axis=-1) > rng.random((len(p), 1))).argmax(axis=-1)


def generate(model, prompt_ids, max_new_tokens, rng, temperature=1.0, top_k=None, top_p=None, eos_id=None,
             use_cache=True):
    """The prompts (batch, n) of equal length followed by up to `max_new_tokens` generated ids
    each: a list of int lists, a sequence ending at its first `eos_id` (the padding id is never
    drawn: the model reads it as no token at all). With the cache, the
    prompt is read once and each new token costs one position; without it, every step
    recomputes the whole prefix (the same tokens)."""
    ids = checked_token_ids("prompt_ids", prompt_ids, model.config.vocab_size, ndim=2)
    max_new_tokens = checked_integer("max_new_tokens", max_new_tokens, low=0,
                                     high=model.config.max_len - ids.shape[1])
    sequences, done, cache = ids.copy(), np.zeros(len(ids), dtype=bool), {} if use_cache else None
    with scoring_mode(model):
        step_input, start = sequences, 0
        for _ in range(max_new_tokens):
            logits = checked_scores(model(step_input, cache, start).data[:, -1].copy(), "logits")
            if model.config.pad_id is not None:
                logits[:, model.config.pad_id] = -np.inf                       # padding is never generated
            token = sample_next(logits, rng, temperature, top_k, top_p)
            sequences = np.concatenate([sequences, token[:, None]], axis=1)
            done |= token == eos_id
            if done.all():
                break
            step_input, start = (sequences[:, -1:], sequences.shape[1] - 1) if use_cache else (sequences, 0)
    return [_until_eos(row, ids.shape[1], eos_id) for row in sequences.tolist()]


def _until_eos(row, prompt_length, eos_id):
    generated = row[prompt_length:]
    return row[:prompt_length] + (generated[:generated.index(eos_id) + 1] if eos_id in generated else generated)
