"""Evaluation of a trained language model on held-out texts: the cross-entropy of the tokens it
predicts (every next token for a causal model, the masked ones for a masked model, with the
fixed evaluation masks of `training/loss.py`), its exponential the perplexity, the top-1
accuracy of the same predictions, and a few samples:

- causal: the first third of a text's words as a prompt, continued greedily;
- masked: the middle word of a text replaced by [MASK], and the three best candidates.
"""
import dataclasses

import numpy as np

from numpy_transformer.completion import complete, fill_mask
from numpy_transformer.data.texts import encode_texts
from numpy_transformer.decoding import inference_mode
from numpy_transformer.training.loss import ordered_batches, perplexity


@dataclasses.dataclass
class LanguageModelEvaluation:
    """cross_entropy (nats per token) and accuracy over n_tokens predicted tokens of n_texts
    texts (n_skipped left out by the maximum length); samples: (what, text) rows to print."""
    cross_entropy: float
    accuracy: float
    n_texts: int
    n_tokens: int
    n_skipped: int
    samples: list

    @property
    def perplexity(self):
        return perplexity(self.cross_entropy)


def evaluate_texts(model, tokenizer, texts, objective, max_len, length_policy="drop", batch_size=64, samples=4):
    """The `LanguageModelEvaluation` of `texts`, encoded as in training."""
    encoded = encode_texts(texts, tokenizer, max_len, length_policy, objective.framing)
    if len(encoded) == 0:
        raise ValueError(f"no text to evaluate: all {len(texts)} are longer than the maximum length {max_len}")
    cross_entropy, accuracy, n_tokens = token_scores(model, encoded, objective, batch_size)
    kept = [texts[i] for i in dict.fromkeys(encoded.text_index.tolist())]
    rows = (causal_samples if objective.framing == "causal" else masked_samples)(model, tokenizer, kept[:samples])
    return LanguageModelEvaluation(cross_entropy, accuracy, len(kept), n_tokens, len(texts) - len(kept), rows)


def token_scores(model, encoded, objective, batch_size=64):
    """(mean cross-entropy, top-1 accuracy, number) of the predicted tokens of `encoded`, in
    eval mode, without label smoothing."""
    total, correct, tokens = 0.0, 0, 0
    with inference_mode(model):
        for batch in ordered_batches(encoded, batch_size, objective):
            logits = model(batch.inputs)
            counted = batch.targets != batch.ignore_index
            total += objective.cross_entropy(logits, batch).item() * batch.n_tokens
            correct += int((logits.data.argmax(axis=-1) == batch.targets)[counted].sum())
            tokens += batch.n_tokens
    return total / tokens, correct / tokens, tokens


def causal_samples(model, tokenizer, texts):
    """(what, text) rows: each text, and its first third continued greedily."""
    rows = []
    for text in texts:
        words = text.split()
        prompt = " ".join(words[:max(1, len(words) // 3)])
        (completion,) = complete(model, tokenizer, [prompt], np.random.default_rng(0), model.config.max_len,
                                 temperature=0)
        rows += [("text", text), ("prompt", prompt), ("greedy", completion), ("", "")]
    return rows


def masked_samples(model, tokenizer, texts):
    """(what, text) rows: each text with its middle word masked, and the three best candidates."""
    rows = []
    for text in texts:
        words = text.split()
        middle = len(words) // 2
        masked = " ".join(words[:middle] + ["[MASK]"] + words[middle + 1:])
        candidates = fill_mask(model, tokenizer, masked, top_k=3)[0]
        best = ", ".join(f"{token} {probability:.2f}" for token, probability in candidates)
        rows += [("masked", masked), ("answer", words[middle]), ("best", best), ("", "")]
    return rows
