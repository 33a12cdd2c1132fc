"""Sentence embeddings from an encoder (`language_model.EncoderOnlyTransformer`, BERT's
architecture), as sentence-transformers computes them: each text read as [CLS] text [SEP] (cut
to `max_length` tokens), the encoder's last hidden states h_1 … h_n pooled into one vector per
text, that vector scaled to length 1 where the model asks for it.

    mean                   e = Σ_i m_i h_i / Σ_i m_i        m_i = 1 at a real token, 0 at padding
    cls                    e = h_1                          the vector of [CLS]
    max                    e_j = max_{i: m_i = 1} h_ij
    mean_sqrt_len_tokens   e = Σ_i m_i h_i / √(Σ_i m_i)
    weightedmean           e = Σ_i i m_i h_i / Σ_i i m_i    positions i = 1 … n
    lasttoken              e = h_k                          k the last real token ([SEP])
    normalised             e / max(‖e‖, 1e-12)

Several modes give their vectors one after the other, in the order of `modes`. Two texts are
compared by the cosine of their embeddings, cos(a, b) = ⟨a, b⟩ / (‖a‖ ‖b‖).

    recipe = EmbeddingRecipe(modes=("mean",), normalize=True, max_length=256)
    vectors = embed(model, tokenizer, ["A man is eating food.", "A man eats."], recipe)   # (2, d)
    cosine_similarity(vectors, vectors)                                                  # (2, 2)
    rank(query_vector, vectors)                 # (indices best first, their cosines)

`interop.sentence_encoder.load_sentence_encoder` reads the model, its tokenizer and its recipe
from a sentence-transformers folder.
"""
import dataclasses

import numpy as np

from numpy_transformer.masks import pad

POOLING_MODES = ("cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken")
NORM_FLOOR = 1e-12        # the smallest norm divided by (torch.nn.functional.normalize's eps)


@dataclasses.dataclass(frozen=True)
class EmbeddingRecipe:
    """How a model's token vectors become one vector per text: the pooling `modes` (a tuple of
    POOLING_MODES, concatenated in that order), `normalize` to length 1, the texts cut to
    `max_length` tokens ([CLS] and [SEP] included), and lowercased first when `lowercase`."""

    modes: tuple = ("mean",)
    normalize: bool = False
    max_length: int = 512
    lowercase: bool = False

    def __post_init__(self):
        unknown = [mode for mode in self.modes if mode not in POOLING_MODES]
        if not self.modes or unknown:
            raise ValueError(f"modes must be one or more of {', '.join(POOLING_MODES)}, got {self.modes!r}")
        if self.max_length < 3:
            raise ValueError(f"max_length must be at least 3 ([CLS], a token, [SEP]), got {self.max_length}")


def pool(h, real, mode):
    """One vector per text: h (batch, n, d) the token vectors, real (batch, n) True at the real
    tokens (the rest is padding, on the right); the formulas of the module docstring."""
    m = real[..., None].astype(h.dtype)                                   # (batch, n, 1)
    if mode == "cls":
        return h[:, 0]
    if mode == "max":
        return np.where(real[..., None], h, -np.inf).max(axis=1)
    if mode == "lasttoken":
        return h[np.arange(len(h)), real.sum(axis=1) - 1]
    if mode == "weightedmean":
        m = m * np.arange(1, h.shape[1] + 1, dtype=h.dtype)[:, None]
    total, count = (h * m).sum(axis=1), np.maximum(m.sum(axis=1), 1e-9)   # (batch, d), (batch, 1)
    return total / (np.sqrt(count) if mode == "mean_sqrt_len_tokens" else count)


def normalised(vectors):
    """Each row scaled to length 1: v / max(‖v‖, 1e-12)."""
    return vectors / np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), NORM_FLOOR)


def framed_ids(tokenizer, text, recipe):
    """[CLS] and the text's token ids and [SEP], the text cut to recipe.max_length − 2 tokens."""
    ids = tokenizer.encode(text.lower() if recipe.lowercase else text)
    return [tokenizer.cls_id, *ids[:recipe.max_length - 2], tokenizer.sep_id]


def embed(model, tokenizer, texts, recipe=EmbeddingRecipe(), batch_size=32, progress=iter):
    """(len(texts), d × len(recipe.modes)) array, one embedding per text in the order given,
    of the model's dtype. Texts are encoded `batch_size` at a time, longest first (less
    padding), each batch through `progress` (an iterable wrapper: a progress bar). A ValueError
    names a text that is not a string or is empty (blank)."""
    if isinstance(texts, str):
        raise ValueError(f"texts must be a list of texts, got one string ({texts[:40]!r}): pass [text]")
    for number, text in enumerate(texts, start=1):
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"text {number} is {'empty' if isinstance(text, str) else type(text).__name__}: "
                             f"give each text at least one word")
    framed = [framed_ids(tokenizer, text, recipe) for text in texts]
    order = sorted(range(len(texts)), key=lambda i: -len(framed[i]))
    vectors = np.zeros((len(texts), model.config.d_model * len(recipe.modes)), dtype=model.config.dtype)
    starts = range(0, len(order), batch_size)
    for start in progress(starts):
        chunk = order[start:start + batch_size]
        ids = pad([framed[i] for i in chunk], model.config.pad_id or 0)        # hidden by `real` whatever it is
        real = np.arange(ids.shape[1]) < np.array([len(framed[i]) for i in chunk])[:, None]
        h = model.encode(ids, real).data
        pooled = np.concatenate([pool(h, real, mode) for mode in recipe.modes], axis=-1)
        vectors[chunk] = normalised(pooled) if recipe.normalize else pooled
    return vectors


def cosine_similarity(a, b):
    """(len(a), len(b)) cosines ⟨a_i, b_j⟩ / (‖a_i‖ ‖b_j‖) of the rows of a (m, d) and b (k, d)."""
    return normalised(np.asarray(a)) @ normalised(np.asarray(b)).T


def rank(query, candidates):
    """(indices, cosines) of the rows of `candidates` (k, d) by their cosine with the vector
    `query` (d,), best first (ties in the order given)."""
    scores = cosine_similarity(np.asarray(query)[None], candidates)[0]
    order = np.argsort(-scores, kind="stable")
    return order, scores[order]
