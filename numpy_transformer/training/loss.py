"""The training objectives of the three tasks (`train --task`) and their batches: the loss
that `train_step` (training/loop.py) minimises.

Translation (thesis §1.1). For a batch of sentence pairs (x, y), `tgt_in` = [SOS] y and
`tgt_out` = y [EOS]:

    logits = model(src, tgt_in)                               (batch, n′, l), teacher forcing
    loss   = mean over non-padding t of  −Σ_v q_t(v) log p(v | y_<t, x)
             q_t = (1 − ε) · onehot(y_t) + ε / l              label smoothing (ε = 0.1)

Causal language modelling (GPT). A text x framed as [SOS] x [EOS]: the model reads [SOS] x and
the loss is the mean of −log P(x_t | x_<t) over x [EOS], padding left out.

Masked language modelling (BERT). A text framed as [CLS] x [SEP], masked by `mask_tokens`: the
loss is the mean of −log P(x_i | x_≠i) over the selected positions only. The masks of a
training batch come from a generator seeded by (run seed, step), those of an evaluation batch
from its number: a resumed run draws the masks it would have drawn, and every evaluation of a
split sees the same masks.

Without smoothing (ε = 0) and with dropout off, the mean over a whole split is the validation
loss, and its exponential the perplexity (training/evaluation.py).
"""
import dataclasses

import numpy as np

import autograd.functional as F
from numpy_transformer.data.batching import make_batch
from numpy_transformer.data.texts import framed
from numpy_transformer.language_model import IGNORED, mask_tokens


def loss_on_batch(model, batch, label_smoothing=0.0):
    """The mean cross-entropy of a translation batch's labels (padding ignored): a scalar Tensor."""
    logits = model(batch.src, batch.tgt_in)                          # (batch, n_tgt, tgt_vocab_size)
    return F.cross_entropy(logits, batch.tgt_out, ignore_index=model.config.pad_id,
                           label_smoothing=label_smoothing)


@dataclasses.dataclass(frozen=True)
class LanguageModelBatch:
    """inputs and targets (batch, n) int64; a target equal to `ignore_index` has no loss;
    n_tokens: the targets that count."""
    inputs: np.ndarray
    targets: np.ndarray
    ignore_index: int
    n_tokens: int


class Translation:
    """Sentence pairs (an `EncodedPairs`) → `Batch` (src, tgt_in, tgt_out) → `loss_on_batch`."""
    name = "translation"

    def batch(self, encoded, positions, key=None):
        return make_batch(encoded, positions)

    def loss(self, model, batch, label_smoothing=0.0):
        return loss_on_batch(model, batch, label_smoothing)


class CausalLM:
    """Texts framed [SOS] x [EOS] (an `EncodedTexts`) → inputs [SOS] x, targets x [EOS]."""
    name = "lm"
    framing = "causal"

    def batch(self, encoded, positions, key=None):
        ids = framed(encoded, positions)
        targets, pad_id = ids[:, 1:], encoded.specials[2]
        return LanguageModelBatch(ids[:, :-1], targets, pad_id, int((targets != pad_id).sum()))

    def loss(self, model, batch, label_smoothing=0.0):
        """The mean cross-entropy of the targets that count: a scalar Tensor."""
        return self.cross_entropy(model(batch.inputs), batch, label_smoothing)

    @staticmethod
    def cross_entropy(logits, batch, label_smoothing=0.0):
        """The mean cross-entropy of the model's logits (batch, n, vocab_size) for `batch`."""
        return F.cross_entropy(logits, batch.targets, ignore_index=batch.ignore_index, label_smoothing=label_smoothing)


@dataclasses.dataclass(frozen=True)
class MaskedLM(CausalLM):
    """Texts framed [CLS] x [SEP] → BERT-masked inputs, and the original tokens as targets at the
    selected positions (IGNORED elsewhere). mask_id, special_ids, vocab_size: the tokenizer's;
    seed: the run's (with the step, it seeds a training batch's masks)."""
    mask_id: int
    special_ids: tuple
    vocab_size: int
    seed: int = 0
    name = "mlm"
    framing = "masked"

    def batch(self, encoded, positions, key=None):
        """key: ("train", step) or ("evaluate", batch number); see the module docstring."""
        purpose, number = key or ("evaluate", 0)
        rng = np.random.default_rng([0, self.seed, number] if purpose == "train" else [1, number])
        inputs, targets = mask_tokens(framed(encoded, positions), rng, self.mask_id, self.vocab_size,
                                      self.special_ids)
        return LanguageModelBatch(inputs, targets, IGNORED, int((targets != IGNORED).sum()))


TRANSLATION = Translation()
TASKS = ("translation", "lm", "mlm")


def make_objective(task, tokenizers=(), seed=0):
    """The objective of a task: TRANSLATION, a CausalLM, or a MaskedLM that masks with the
    language model's tokenizer (tokenizers: the run's, one for a language model)."""
    if task == "translation":
        return TRANSLATION
    if task == "lm":
        return CausalLM()
    if task == "mlm":
        (tokenizer,) = tokenizers
        return MaskedLM(tokenizer.mask_id, tuple(tokenizer.special_ids), tokenizer.vocab_size, seed)
    raise ValueError(f"unknown task {task!r}: use one of {TASKS}")
