"""Dynamic loss scaling, the other half of mixed precision (Micikevicius et al., 2018, "Mixed
Precision Training"; PyTorch's `torch.amp.GradScaler` has the same rule and defaults).

float16 has no number between 0 and 6·10⁻⁸, and below 6·10⁻⁵ it keeps fewer than its 11 bits:
the gradients of a small loss with respect to the activations fall there and are lost. The
chain rule is linear, so backward from S · L instead of L multiplies every gradient by S and
lifts them into float16's range; the float32 master gradients are divided by S again, and Adam
sees the gradients of L. S is picked as large as the gradients allow:

    a step whose gradients hold an inf or a NaN (S · g overflowed 65,504)  →  skip it, S ← S / 2
    `growth_interval` steps in a row without one                         →  S ← 2 S

    scaler = LossScaler()
    loss.backward(scaler.scale)                     # on the float16 model
    master.grad = half.grad / scaler.scale          # float32; a skipped step when not finite
    scaler.update(finite)
"""
import math

from autograd.checks import checked_integer, checked_number


class LossScaler:
    """The loss scale S and how many clean steps it has lasted. scale: the first S (2¹⁶);
    growth_factor, backoff_factor: S's change up after `growth_interval` clean steps, and down
    after an overflow."""

    def __init__(self, scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000):
        self.scale = checked_number("LossScaler: scale", scale, low=0, low_open=True)
        self.growth_factor = checked_number("LossScaler: growth_factor", growth_factor, low=1, low_open=True)
        self.backoff_factor = checked_number("LossScaler: backoff_factor", backoff_factor, low=0, high=1,
                                             low_open=True, high_open=True)
        self.growth_interval = checked_integer("LossScaler: growth_interval", growth_interval, low=1)
        self.clean_steps = 0        # steps since the last change of S
        self.skipped_steps = 0      # overflows so far

    def update(self, finite):
        """After a step: `finite` says whether its gradients were all finite (the step was taken)."""
        if not finite:
            self.scale *= self.backoff_factor
            self.clean_steps = 0
            self.skipped_steps += 1
            return
        self.clean_steps += 1
        if self.clean_steps == self.growth_interval:
            self.scale *= self.growth_factor
            self.clean_steps = 0

    def unscale(self, gradient):
        """A scaled gradient (a float16 array) as the float32 gradient of the loss itself."""
        unscaled = gradient.astype("float32")
        unscaled *= 1 / self.scale
        return unscaled

    def state_dict(self):
        return {"scale": self.scale, "clean_steps": self.clean_steps, "skipped_steps": self.skipped_steps}

    def load_state_dict(self, state):
        scale = float(state["scale"])
        if not (math.isfinite(scale) and scale > 0):
            raise ValueError(f"LossScaler.load_state_dict: the scale must be a positive number, got {scale}")
        self.scale, self.clean_steps, self.skipped_steps = scale, int(state["clean_steps"]), int(state["skipped_steps"])
