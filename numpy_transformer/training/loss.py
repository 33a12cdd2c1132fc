"""The training objective and its evaluation: cross-entropy by teacher forcing, and perplexity.

For a batch of sentence pairs (x, y), `tgt_in` = [SOS] y and `tgt_out` = y [EOS]:

    logits = model(src, tgt_in)                               (batch, n′, l), teacher forcing
    loss   = mean over non-padding t of  −Σ_v q_t(v) log p(v | y_<t, x)         thesis §1.1
             q_t = (1 − ε) · onehot(y_t) + ε / l              label smoothing (ε = 0.1)

Without smoothing (ε = 0) and with dropout off, the mean over a whole split is the validation
loss, and its exponential the perplexity.
"""
import math

import numpy as np

import autograd.functional as F
from numpy_transformer.data.batching import make_batch
from numpy_transformer.decoding import inference_mode


def loss_on_batch(model, batch, label_smoothing=0.0):
    """The mean cross-entropy of the batch's labels (padding ignored): a scalar Tensor."""
    logits = model(batch.src, batch.tgt_in)                          # (batch, n_tgt, tgt_vocab_size)
    return F.cross_entropy(logits, batch.tgt_out, ignore_index=model.config.pad_id,
                           label_smoothing=label_smoothing)


def ordered_batches(encoded, batch_size):
    """The pairs of an `EncodedPairs` in batches of similar lengths, in a fixed order (no
    randomness: evaluation must not move any training generator)."""
    lengths = [(len(x), len(y)) for x, y in zip(encoded.src, encoded.tgt)]
    order = sorted(range(len(encoded)), key=lengths.__getitem__)
    for start in range(0, len(order), batch_size):
        yield make_batch(encoded, np.asarray(order[start:start + batch_size]))


def mean_cross_entropy(model, encoded, batch_size=64, label_smoothing=0.0):
    """−(1/T) Σ_t log p(y_t | y_<t, x) over every non-padding label of the pairs of `encoded`
    (an `EncodedPairs`), in eval mode: the validation loss. Returns a float."""
    if len(encoded) == 0:
        raise ValueError("mean_cross_entropy: no pairs to evaluate (all longer than the maximum length?)")
    total, tokens = 0.0, 0
    with inference_mode(model):
        for batch in ordered_batches(encoded, batch_size):
            total += loss_on_batch(model, batch, label_smoothing).item() * batch.n_tokens
            tokens += batch.n_tokens
    return total / tokens


def perplexity(cross_entropy):
    """exp(mean per-token cross-entropy in nats): the number of equally likely words the model
    hesitates between, on average. 1 is certainty; a uniform guess over l words gives l.
    (Beyond e^700 the float overflows: inf.)"""
    return math.exp(cross_entropy) if cross_entropy < 700 else math.inf
