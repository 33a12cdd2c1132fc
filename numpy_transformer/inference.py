"""What every use of a trained model shares around its forward pass, apart from the algorithms
themselves (`decoding`, `sampling`, `completion`, the evaluation): eval mode without gradients,
scores that are checked before a token is chosen from them, the decoders' argument checks, and
an optional progress bar.

    from numpy_transformer.inference import inference_mode, scoring_mode, checked_scores, with_progress
    with inference_mode(model):                        # no_grad() and eval(), restored afterwards
        logits = model(src_ids, tgt_ids)
"""
import contextlib
import math

import numpy as np

from autograd import no_grad
from autograd.checks import checked_integer, checked_token_ids

__all__ = ["inference_mode", "scoring_mode", "checked_scores", "with_progress", "checked_decoding_inputs",
           "check_length_penalty"]


@contextlib.contextmanager
def inference_mode(model):
    """no_grad() and eval mode (no dropout) for the duration; the model's mode is restored."""
    was_training = model.training
    model.eval()
    try:
        with no_grad():
            yield
    finally:
        model.train(was_training)


@contextlib.contextmanager
def scoring_mode(model):
    """`inference_mode`, with NumPy's overflow warnings off: the decoders and the sampler check
    the scores themselves (`checked_scores`) and stop with one line naming the cause."""
    with inference_mode(model), np.errstate(over="ignore", invalid="ignore"):
        yield


def checked_scores(scores, what):
    """`scores` (the logits or log-probabilities of a decoding step), or a ValueError when some
    are NaN or +∞: the model's arithmetic overflowed (weights of 3e38 make Y·P infinite, and
    softmax of ∞ − ∞ is NaN), and no token can be chosen from them."""
    if np.isnan(scores).any() or np.isposinf(scores).any():
        raise ValueError(f"the model's {what} are not finite (NaN or +inf): its weights are so large that its "
                         f"arithmetic overflows, or damaged; restore a copy of them, or train again")
    return scores


def with_progress(progress, iterable, **options):
    """`iterable` through `progress`, a function such as tqdm that draws a bar as it is consumed
    and takes its options (desc=, unit=), or `iterable` itself when progress is None: the core
    prints nothing unless its caller asks."""
    return iterable if progress is None else progress(iterable, **options)


def checked_decoding_inputs(model, src_ids, sos_id, eos_id):
    """src_ids (batch, n_src) as an integer array and each sentence's number of real (non-padding)
    tokens (batch,), or a ValueError naming the argument: a source longer than the model's
    positions, an empty sentence, a token id outside the target vocabulary, EOS = PAD."""
    config, limit = model.config, model.config.position_limit
    src_ids = checked_token_ids("src_ids", src_ids, ndim=2)
    if limit is not None and src_ids.shape[1] > limit:
        raise ValueError(f"src_ids of shape {src_ids.shape} is longer than the model's "
                         f"max_len={limit}")
    lengths = (src_ids != config.pad_id).sum(axis=1)
    if (lengths == 0).any():
        raise ValueError(f"src_ids: sentence {int(np.argmin(lengths))} is empty (only padding, "
                         f"pad_id={config.pad_id})")
    for name, token in (("sos_id", sos_id), ("eos_id", eos_id)):
        checked_integer(name, token, 0, config.tgt_vocab_size - 1)
    if eos_id == config.pad_id:
        raise ValueError(f"eos_id must differ from the padding id (pad_id={config.pad_id}), which is never "
                         f"generated, got {eos_id}")
    return src_ids, lengths


def check_length_penalty(alpha, longest):
    """A ValueError when lp(y) = |y|^α is not a finite float64 for some length up to `longest`
    (the hypotheses' EOS included): every score log P / lp would be −0 and the ranking empty."""
    if alpha * math.log(longest) >= math.log(np.finfo(np.float64).max):
        raise ValueError(f"length_penalty α={alpha:g} makes lp(y) = |y|^α overflow for outputs of up to {longest} "
                         f"tokens, so every hypothesis would score 0: choose α below "
                         f"{math.log(np.finfo(np.float64).max) / math.log(longest):.0f} (0.6 to 1 is usual)")
