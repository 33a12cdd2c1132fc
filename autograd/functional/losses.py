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

`CrossEntropy` below computes exactly that, with log p = log softmax(z) row by row. `F.cross_entropy`
runs it inside `autograd.plain()`; otherwise it runs the engine room's `FusedCrossEntropy`
(autograd/engine_room/fused_cross_entropy.py), which computes the same from s = z − max z in one
array (tests/test_cross_entropy.py compares the two).

float16 logits: the log-softmax, the loss and its gradient are computed in float32, the loss is
returned as a float32 scalar (a loss scale of 2¹⁶ times a loss of 1 would overflow float16) and
the gradient rounded to float16 (autograd/precision.py).
"""
import numpy as np

from autograd.plain_mode import is_plain
from autograd.engine import Function, as_tensor
from autograd.engine_room.fused_cross_entropy import FusedCrossEntropy
from autograd.precision import widen


class CrossEntropy(Function):
    """Mean label-smoothed cross-entropy, the plain form. logits: (..., C); targets: integer array
    of shape (...); counted: boolean array of shape (...), True for the rows that enter the mean
    (neither is differentiable). Returns a scalar. VJP: (p − p*) g / n_valid on the counted rows,
    0 on the others."""

    def forward(self, logits, targets, counted, label_smoothing=0.0):
        z, y = widen(logits[counted]), targets[counted]                  # (n, C), (n,): the counted rows
        shifted = z - z.max(axis=-1, keepdims=True)
        log_p = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))     # log softmax(z)
        loss_rows = -log_p[np.arange(len(y)), y]                         # −log p_y
        if label_smoothing:                                              # (1 − ε)(−log p_y) + ε/C Σ_c (−log p_c)
            loss_rows = (1 - label_smoothing) * loss_rows + label_smoothing * -log_p.mean(axis=-1)
        self.shape, self.dtype, self.counted, self.label_smoothing = logits.shape, logits.dtype, counted, label_smoothing
        self.save_for_backward(log_p, y)
        return np.asarray(loss_rows.mean())

    def backward(self, g):
        log_p, y = self.saved
        n, n_classes = log_p.shape
        p = np.exp(log_p)                                                # softmax(z)
        p_star = np.full_like(p, self.label_smoothing / n_classes)
        p_star[np.arange(n), y] += 1 - self.label_smoothing             # (1 − ε) onehot(y) + ε/C
        grad = np.zeros(self.shape, dtype=self.dtype)
        grad[self.counted] = (p - p_star) * g / n
        return (grad,)


def cross_entropy(logits, targets, ignore_index=None, label_smoothing=0.0):
    """Mean of −log p(y_t | y_<t, x) over the non-ignored rows (thesis §1.1), with label smoothing.

    logits: Tensor (..., C) of unnormalised scores; targets: integer array or Tensor (...) of
    class indices in [0, C), or `ignore_index` for rows left out of the mean (padding).
    Same definition as PyTorch's `F.cross_entropy(logits, targets, ignore_index=...,
    label_smoothing=...)` with reduction="mean". Returns a scalar Tensor, float32 for float16
    logits and of the logits' dtype otherwise. `CrossEntropy` inside `autograd.plain()`, else the
    engine room's `FusedCrossEntropy`.
    """
    logits, targets = as_tensor(logits), np.asarray(getattr(targets, "data", targets))
    counted = _check_arguments(logits.shape, targets, ignore_index, label_smoothing)
    loss = CrossEntropy if is_plain() else FusedCrossEntropy
    return loss.apply(logits, targets=targets, counted=counted, label_smoothing=float(label_smoothing))


def _check_arguments(logits_shape, targets, ignore_index, label_smoothing):
    """The rows that enter the mean (those whose target is not `ignore_index`), or a TypeError or
    ValueError naming the argument that is wrong."""
    if not np.issubdtype(targets.dtype, np.integer):
        raise TypeError(f"cross_entropy: targets must be integer class indices, got dtype {targets.dtype}")
    if logits_shape[:-1] != targets.shape:
        raise ValueError(f"cross_entropy: logits of shape {logits_shape} need targets of shape "
                         f"{logits_shape[:-1]} (logits.shape[:-1]), got targets of shape {targets.shape}")
    if not 0 <= label_smoothing <= 1:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    counted = np.ones(targets.shape, dtype=bool) if ignore_index is None else targets != ignore_index
    if not counted.any():
        raise ValueError(f"cross_entropy: all {targets.size} targets are ignored (ignore_index="
                         f"{ignore_index}), so the mean over the non-ignored rows is undefined")
    n_classes = logits_shape[-1]
    counted_targets = targets[counted]
    out_of_range = counted_targets[(counted_targets < 0) | (counted_targets >= n_classes)]
    if out_of_range.size:
        raise ValueError(f"cross_entropy: target {out_of_range[0]} is out of range [0, {n_classes}) "
                         f"(ignore_index={ignore_index})")
    return counted
