"""Text in, text out with the language models (`language_model.py`) and their tokenizer:

    complete(gpt, tokenizer, ["the old man"], np.random.default_rng(0), max_new_tokens=20,
             temperature=0)                     # ["the old man reads a book ."], greedy
    fill_mask(bert, tokenizer, "the [MASK] sat on the mat .", top_k=3)
    # [[("cat", 0.71), ("dog", 0.12), ("man", 0.05)]]: one list per [MASK], best first

A causal model reads [SOS] and the prompt's tokens and continues it (`sampling.generate`) until
[EOS] or `max_new_tokens`; a masked model reads [CLS] text [SEP] and gives, at each [MASK],
P(x_i | x_≠i) over the vocabulary (its special tokens left out of the ranking, and the ids of a
vocabulary padded past its tokenizer, which have no token).
"""
import numpy as np

from autograd.checks import checked_integer
from numpy_transformer.inference import checked_scores, scoring_mode, with_progress
from numpy_transformer.sampling import generate


def prompt_ids(tokenizer, prompt, max_len):
    """[SOS] and the prompt's token ids (a pretrained tokenizer without [SOS]: the prompt alone,
    or its start-of-text token when the prompt is empty); a ValueError when they leave no room
    for a new token within the model's maximum length."""
    ids = ([] if tokenizer.sos_id is None else [tokenizer.sos_id]) + tokenizer.encode(prompt)
    ids = ids or [tokenizer.bos_id]
    if len(ids) >= max_len:
        raise ValueError(f"the prompt is {len(ids)} tokens long (a start token included), and this model reads at most "
                         f"{max_len}: shorten it to leave room for the continuation")
    return ids


def complete(model, tokenizer, prompts, rng, max_new_tokens=30, temperature=1.0, top_k=None, top_p=None,
             progress=None):
    """Each prompt followed by its continuation, as text: at most `max_new_tokens` tokens (fewer
    when the model's maximum length comes first), drawn as `sampling.generate` draws them
    (temperature 0: greedy), up to [EOS]. Prompts are continued one at a time, so each may have
    its own length. progress: shows the prompts continued (`inference.with_progress`)."""
    max_new_tokens = checked_integer("max_new_tokens", max_new_tokens, low=1)
    texts = []
    for prompt in with_progress(progress, prompts, desc="generate", unit="prompt"):
        ids = prompt_ids(tokenizer, prompt, model.config.max_len)
        room = min(max_new_tokens, model.config.max_len - len(ids))
        (sequence,) = generate(model, np.asarray([ids]), room, rng, temperature, top_k, top_p, tokenizer.eos_id)
        texts.append(prompt + continuation_text(tokenizer, sequence[len(ids):], ids))
    return texts


def continuation_text(tokenizer, ids, prompt_ids=()):
    """What the new tokens `ids` add to the prompt as written. Word-level tokens are words,
    joined by spaces after one that separates them from the prompt; subword tokens are decoded
    after the prompt's `prompt_ids`, which decides whether the first starts a new word (a BPE
    `Ġ`, a unigram `▁`, a WordPiece piece without `##`) or continues the prompt's last one."""
    if tokenizer.kind == "word":
        return " " + tokenizer.detokenize(ids) if tokenizer.decode(ids) else ""
    return tokenizer.decode([*prompt_ids, *ids])[len(tokenizer.decode(prompt_ids)):]


def fill_mask(model, tokenizer, text, top_k=5):
    """For each [MASK] of `text`, the `top_k` most probable tokens and their probabilities
    P(x_i | x_≠i), best first: a list (one per [MASK]) of (token, probability) lists."""
    top_k = checked_integer("top_k", top_k, low=1)
    ids = np.asarray([[tokenizer.cls_id, *tokenizer.encode(text, keep=[tokenizer.mask_id]), tokenizer.sep_id]])
    masked = np.flatnonzero(ids[0] == tokenizer.mask_id)
    if masked.size == 0:
        raise ValueError(f"no [MASK] in {text!r}: write [MASK] where the missing word goes")
    if ids.shape[1] > model.config.max_len:
        raise ValueError(f"the text is {ids.shape[1]} tokens long ([CLS] and [SEP] included), and this model reads "
                         f"at most {model.config.max_len}: shorten it")
    with scoring_mode(model):
        logits = checked_scores(model(ids).data[0, masked], "logits").astype(np.float64)   # (masks, vocab_size)
    p = np.exp(logits - logits.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    ranked = np.argsort(-p, axis=-1, kind="stable")
    ordinary = ~np.isin(ranked, tokenizer.special_ids) & (ranked < tokenizer.vocab_size)
    return [[(tokenizer.token(i), float(row_p[i])) for i in row[keep][:top_k]]
            for row, keep, row_p in zip(ranked, ordinary, p)]
