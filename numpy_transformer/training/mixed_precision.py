"""Mixed-precision training (`train --precision mixed`, architecture notes §Memory and Efficiency).

Two copies of the model:

- the float32 model holds the **master weights**: Adam updates them (its moments are float32
  too), gradient clipping and the validation loss read them, checkpoints save them, so a mixed
  run's checkpoint is an ordinary float32 model;
- its float16 **twin** (the same modules, the same dropout generators) runs forward and
  backward: Q, K, V, the activations and everything the graph keeps for backward are float16;
  the ops compute the softmax, the layer-norm statistics and the loss in float32
  (autograd/precision.py).

One step:

    half ← float16(master)                          after every update
    L    = loss(half(batch))                        float32 scalar
    backward from S · L on the twin                 float16 gradients, S the loss scale
    master.grad = float32(half.grad) / S            (autograd/loss_scaling.py)
    not finite → skip the step, S ← S / 2;   else clip, Adam on the master weights

A step whose gradients are not finite even at S ≤ 1 is not an overflow of the scaling but a
diverged model, and raises as a float32 run does.

The loop runs this step with the same `train_step` as a float32 step (training/loop.py):
`MixedPrecision.wrap` hands it the twin's loss, whose backward() is the scaled one, and the
master weights' optimizer, whose step() also refreshes the twin.
"""
import copy
import math

import numpy as np

from autograd.loss_scaling import LossScaler
from autograd.precision import HALF

PRECISIONS = ("float32", "mixed")


class MixedPrecision:
    """The float16 twin of the float32 `model` and the loss scaler (a `LossScaler`)."""

    def __init__(self, model, scaler=None):
        if {p.dtype for p in model.parameters()} != {np.dtype(np.float32)}:
            raise ValueError(f"mixed precision trains a float32 model (its master weights), got parameters of "
                             f"{sorted({p.dtype.name for p in model.parameters()})}")
        self.model = model
        shared = {id(generator): generator for generator in model.generators()}    # the same dropout draws
        self.half = copy.deepcopy(model, memo=shared).astype(HALF)
        self.pairs = list(zip(model.parameters(), self.half.parameters()))
        self.scaler = scaler or LossScaler()

    def loss_and_gradients(self, loss_of):
        """L = loss_of(twin), a float32 scalar Tensor; backward from S · L on the twin; every master
        parameter's .grad set to the unscaled float32 gradient. Returns L."""
        loss = self.twin_loss(loss_of)
        self.backward(loss)
        return loss

    def twin_loss(self, loss_of):
        """L = loss_of(twin), the twin in the master model's mode (training or evaluation)."""
        self.half.train(self.model.training)
        with np.errstate(over="ignore", invalid="ignore"):
            return loss_of(self.half)

    def backward(self, loss):
        """Backward from S · L on the twin; every master parameter's .grad set to the unscaled
        float32 gradient. Overflows are expected here (they are what the scaler detects), so
        NumPy's warnings about them are silenced."""
        with np.errstate(over="ignore", invalid="ignore"):
            loss.backward(np.asarray(self.scaler.scale, dtype=loss.dtype))
            for master, half in self.pairs:
                master.grad = None if half.grad is None else self.scaler.unscale(half.grad)
                half.grad = None

    def wrap(self, loss_fn, optimizer):
        """(loss_fn, optimizer) as `train_step` takes them, for a step in mixed precision: the loss
        on the twin (a `ScaledLoss`) and the master weights' optimizer (`MasterOptimizer`)."""
        return (lambda model, batch: ScaledLoss(self, self.twin_loss(lambda half: loss_fn(half, batch))),
                MasterOptimizer(self, optimizer))

    def skipped(self, loss, grad_norm):
        """Whether to skip this step: the loss is finite but the gradients are not, an overflow of
        S · L, and S can still come down (then S ← S / 2). Not at S ≤ 1: gradients of L itself
        that do not fit are a diverged model, which the loop reports as in float32."""
        overflow = math.isfinite(loss) and not math.isfinite(grad_norm) and self.scaler.scale > 1
        if overflow:
            self.scaler.update(finite=False)
        return overflow

    def after_step(self):
        """The master weights were updated: copy them into the twin; one clean step for the scaler."""
        for master, half in self.pairs:
            np.copyto(half.data, master.data, casting="same_kind")
        self.scaler.update(finite=True)


class ScaledLoss:
    """The twin's loss L as `train_step` uses it: item() is L, backward() goes from S · L on the
    twin and leaves the unscaled gradients in the master weights (`MixedPrecision.backward`)."""

    def __init__(self, mixed, loss):
        self.mixed, self.loss = mixed, loss

    def item(self):
        return self.loss.item()

    def backward(self):
        self.mixed.backward(self.loss)


class MasterOptimizer:
    """The optimizer of the master weights as `train_step` uses it: step() updates them, then
    copies them into the twin (`MixedPrecision.after_step`)."""

    def __init__(self, mixed, optimizer):
        self.mixed, self.optimizer = mixed, optimizer

    def zero_grad(self):
        self.optimizer.zero_grad()

    def step(self):
        self.optimizer.step()
        self.mixed.after_step()
