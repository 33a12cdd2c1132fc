"""The label-smoothed cross-entropy from s = z − max z alone: the optimised form of the plain
`CrossEntropy` of autograd/functional/losses.py (where the loss and its VJP p − p* are derived).

What differs from the plain form: the plain one keeps log p and the softmax p = exp(log p) as two
arrays of the logits' size and builds p* as a third; this one computes the loss from s alone,
−log p_c = log Σ exp(s) − s_c, turns s into p in place (one array of the logits' size, one exp),
and subtracts p* from p in backward without forming it. float16 logits are computed in float32.

Tested against the plain form in tests/test_cross_entropy.py (values and gradients, to rounding).
"""
import numpy as np

from autograd.engine import Function
from autograd.engine_room.fused_softmax import nonzero, row_max
from autograd.precision import compute_dtype, widen


def _smoothed_nll_and_softmax(rows, targets, label_smoothing):
    """Per row (1 − ε)(−log p_y) + ε/C Σ_c (−log p_c), and p = softmax(rows), which the VJP
    keeps. rows: (n, C), an array of the caller's own (it is overwritten); targets: (n,).

    From s = z − max z alone: −log p_c = log Σ exp(s) − s_c, so the loss needs s_y, Σ_c s_c and
    the log of the row's sum; exp(s) then becomes p in place. One array of the logits' size, and
    one exp."""
    s = widen(rows)
    s -= row_max(s, axis=-1)
    picked, s_total = s[np.arange(len(targets)), targets], s.sum(axis=-1)
    p = np.exp(s, out=s)
    total = nonzero(p.sum(axis=-1, keepdims=True))
    p /= total
    log_total = np.log(total[:, 0])
    nll = log_total - picked
    if label_smoothing == 0:  # skip the smoothing term: 0 · (−inf) would be NaN for a masked class
        return nll, p
    return (1 - label_smoothing) * nll + label_smoothing * (log_total - s_total / p.shape[-1]), p


class FusedCrossEntropy(Function):
    """Mean label-smoothed cross-entropy. logits: (..., C); targets: integer array of shape (...);
    counted: boolean array of shape (...), the rows that enter the mean (neither is
    differentiable). Returns a scalar. VJP: (softmax − p*) g / n_valid on counted rows, 0 on the
    others."""

    def forward(self, logits, targets, counted, label_smoothing=0.0):
        rows, targets, counted = logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), counted.reshape(-1)
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
