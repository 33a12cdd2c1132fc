"""Cross-entropy of the model's next-token distribution against the target tokens (thesis §1.1).

At step t the model predicts p = softmax(z) over the vocabulary of C tokens; the target
distribution p* is one-hot at y_t, and the loss is

    Loss(p*, p) = −Σ_c p*_c log p_c = −log p(y_t | y_<t, x).

(The thesis's middle line drops the minus sign.) Label smoothing with ε moves mass ε from the
target onto all C classes evenly, p* = (1 − ε) onehot(y_t) + ε/C, which gives

    loss_row = (1 − ε)(−log p_y) + ε/C Σ_c (−log p_c),

PyTorch's `F.cross_entropy(..., label_smoothing=ε)`. The loss is the mean over the rows whose
target is not `ignore_index` (padding). Since Σ_c p*_c = 1 and ∂ log p_c/∂z_k = δ_ck − p_k,

    ∂loss_row/∂z = p − p*,

so the VJP is (softmax(z) − p*) · g / n_valid on the counted rows and 0 on the ignored ones.

float16 logits: the log-softmax, the loss and its gradient are computed in float32, the loss is
returned as a float32 scalar (a loss scale of 2¹⁶ times a loss of 1 would overflow float16) and
the gradient rounded to float16 (autograd/precision.py).
"""
import numpy as np

from autograd.engine import Function, as_tensor
from autograd.functional.softmax import _nonzero, _row_max
from autograd.precision import compute_dtype, widen


def _counted(targets, ignore_index):
    """The rows that enter the mean: those whose target is not `ignore_index`."""
    return np.ones(targets.shape, dtype=bool) if ignore_index is None else targets != ignore_index


def _smoothed_nll_and_softmax(rows, targets, label_smoothing):
    """Per row (1 − ε)(−log p_y) + ε/C Σ_c (−log p_c), and p = softmax(rows), which the VJP
    keeps. rows: (n, C), an array of the caller's own (it is overwritten); targets: (n,).

    From s = z − max z alone: −log p_c = log Σ exp(s) − s_c, so the loss needs s_y, Σ_c s_c and
    the log of the row's sum; exp(s) then becomes p in place. One array of the logits' size, and
    one exp."""
    s = widen(rows)
    s -= _row_max(s, axis=-1)
    picked, s_total = s[np.arange(len(targets)), targets], s.sum(axis=-1)
    p = np.exp(s, out=s)
    total = _nonzero(p.sum(axis=-1, keepdims=True))
    p /= total
    log_total = np.log(total[:, 0])
    nll = log_total - picked
    if label_smoothing == 0:  # skip the smoothing term: 0 · (−inf) would be NaN for a masked class
        return nll, p
    return (1 - label_smoothing) * nll + label_smoothing * (log_total - s_total / p.shape[-1]), p


class CrossEntropy(Function):
    """Mean label-smoothed cross-entropy. logits: (..., C); targets: integer array of shape (...)
    (not differentiable). Returns a scalar. VJP: (softmax − p*) g / n_valid on counted rows, 0
    on ignored rows."""

    def forward(self, logits, targets, ignore_index=None, label_smoothing=0.0):
        rows, targets = logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
        counted = _counted(targets, ignore_index)
        nll, probs = _smoothed_nll_and_softmax(rows[counted], targets[counted], label_smoothing)   # float32 for float16
        loss = np.mean(nll)
        self.shape, self.dtype, self.counted, self.label_smoothing = logits.shape, logits.dtype, counted, label_smoothing
        self.save_for_backward(probs, targets[counted])
        return np.asarray(loss, dtype=compute_dtype(logits.dtype))

    def backward(self, g):
        """(p − p*) g / n on the counted rows, p* = (1 − ε) onehot(y) + ε/C subtracted in place."""
        probs, targets = self.saved
        scale = g / len(targets)
        counted_grad = probs * scale
        counted_grad[np.arange(len(targets)), targets] -= (1 - self.label_smoothing) * scale
        if self.label_smoothing:
            counted_grad -= self.label_smoothing / probs.shape[-1] * scale
        grad = np.zeros((self.counted.size, probs.shape[-1]), dtype=self.dtype)
        grad[self.counted] = counted_grad
        return (grad.reshape(self.shape),)


def cross_entropy(logits, targets, ignore_index=None, label_smoothing=0.0):
    """Mean of −log p(y_t | y_<t, x) over the non-ignored rows (thesis §1.1), with label smoothing.

    logits: Tensor (..., C) of unnormalised scores; targets: integer array or Tensor (...) of
    class indices in [0, C), or `ignore_index` for rows left out of the mean (padding).
    Same definition as PyTorch's `F.cross_entropy(logits, targets, ignore_index=...,
    label_smoothing=...)` with reduction="mean". Returns a scalar Tensor, float32 for float16
    logits and of the logits' dtype otherwise.
    """
    logits, targets = as_tensor(logits), np.asarray(getattr(targets, "data", targets))
    _check_arguments(logits.shape, targets, ignore_index, label_smoothing)
    return CrossEntropy.apply(logits, targets=targets, ignore_index=ignore_index,
                              label_smoothing=float(label_smoothing))


def _check_arguments(logits_shape, targets, ignore_index, label_smoothing):
    if not np.issubdtype(targets.dtype, np.integer):
        raise TypeError(f"cross_entropy: targets must be integer class indices, got dtype {targets.dtype}")
    if logits_shape[:-1] != targets.shape:
        raise ValueError(f"cross_entropy: logits of shape {logits_shape} need targets of shape "
                         f"{logits_shape[:-1]} (logits.shape[:-1]), got targets of shape {targets.shape}")
    if not 0 <= label_smoothing <= 1:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    counted = targets[_counted(targets, ignore_index)]
    if counted.size == 0:
        raise ValueError(f"cross_entropy: all {targets.size} targets are ignored (ignore_index="
                         f"{ignore_index}), so the mean over the non-ignored rows is undefined")
    n_classes = logits_shape[-1]
    out_of_range = counted[(counted < 0) | (counted >= n_classes)]
    if out_of_range.size:
        raise ValueError(f"cross_entropy: target {out_of_range[0]} is out of range [0, {n_classes}) "
                         f"(ignore_index={ignore_index})")
