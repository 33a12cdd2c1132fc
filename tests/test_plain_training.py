"""The whole-model switch: the default model trained with the engine room's forms (the default)
and inside `autograd.plain()` (every op and the optimizer in their plain forms) from the same
seed gives the same losses, step after step.

The model is the `default` preset's architecture (1 + 1 layers, d_model 128, 4 heads, d_ff 512,
Glorot-uniform weights) with its Adam, warm-up schedule, label smoothing and gradient clipping,
on a task it learns within 200 steps: reversing random sentences of 8 tokens from a
vocabulary of 40, a fresh batch of 8 at every step. Dropout is 0: the two forms of dropout draw
different masks from one generator by design (tests/test_dropout.py compares them), and
different masks would make the runs differ by more than rounding.

Tolerances. In exact arithmetic the two runs are the same; they differ by rounding, and training
compounds a difference. In float32 a difference of 1e-7 at the first steps (an op's two forms
rounding differently) grows about a million-fold, to some 10 % of the loss by step 200, so a
float32 tolerance over 200 steps could not be both honest and tight. The long run is therefore
made in float64, where the same million-fold growth takes rounding of 1e-16 to about 1e-10:
losses within 1e-8, relative, leave a factor of 100 above that (measured: 5e-14 at most; the
growth is steepest once the loss has fallen, and faster still past step 250, so the run stops at
200). In float32 the first ten steps are compared, within 1e-5 (measured: 1.1e-7 at most), with
every parameter and moment still float32 in both forms.

BLAS runs one thread here: products of 72 rows gain nothing from more, and idle BLAS threads
that spin on a busy machine would make the runs many times slower.
"""
import contextlib

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import autograd
import autograd.functional as F
from autograd.optim import Adam, clip_grad_norm
from numpy_transformer.model import Transformer
from numpy_transformer.training.loop import make_optimizer
from numpy_transformer.training.presets import PRESETS
from numpy_transformer.training.settings import TrainingConfig, model_config

PAD, SOS, EOS, VOCAB, LENGTH, BATCH = 0, 1, 2, 40, 8, 8


def reversal_batches(steps, seed=1):
    """(src, tgt_in, tgt_out) of `steps` fresh batches: random sentences and their reversal."""
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        src = rng.integers(EOS + 1, VOCAB, (BATCH, LENGTH))
        target = src[:, ::-1]
        yield (src, np.concatenate([np.full((BATCH, 1), SOS), target], axis=1),
               np.concatenate([target, np.full((BATCH, 1), EOS)], axis=1))


def train(steps, dtype, plain):
    """The losses of `steps` steps of the default preset's model and training (dropout 0), with
    the engine room's forms or the plain ones, and the optimizer (whose state holds the moments)."""
    preset = PRESETS["default"]
    config = model_config({**preset.model, "dropout": 0.0, "dtype": dtype}, (VOCAB, VOCAB), PAD, LENGTH + 1)
    training = TrainingConfig(**{**preset.training, "steps": steps})
    model = Transformer(config, np.random.default_rng(0))
    optimizer = make_optimizer(model, training)
    losses = []
    with autograd.plain() if plain else contextlib.nullcontext(), threadpool_limits(1, user_api="blas"):
        for src, tgt_in, tgt_out in reversal_batches(steps):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(src, tgt_in), tgt_out, ignore_index=PAD,
                                   label_smoothing=training.label_smoothing)
            loss.backward()
            clip_grad_norm(model.parameters(), training.clip_norm)
            optimizer.step()
            losses.append(loss.item())
    return np.array(losses), optimizer


def test_the_default_model_trains_to_the_same_losses_in_the_plain_forms():
    """The two forms add in other orders; after 200 float64 steps their losses differed by 2.5e-14
    at most, relatively, under OpenBLAS's Haswell, SkylakeX and Sandybridge kernels (Intel Xeon):
    rtol 1e-8 leaves a margin of 10^5 and still sees any term computed differently."""
    engine_room, _ = train(200, "float64", plain=False)
    plain, _ = train(200, "float64", plain=True)
    assert engine_room[-20:].mean() < 0.5 * engine_room[0]            # it learns: the loss more than halves
    np.testing.assert_allclose(plain, engine_room, rtol=1e-8, atol=0)


def test_in_float32_the_first_steps_agree_and_everything_stays_float32():
    """The first ten float32 losses differed by 1.1e-7 at most, relatively (one float32 step,
    under the Haswell and Sandybridge kernels; none under SkylakeX): rtol 1e-5."""
    runs = {plain: train(10, "float32", plain) for plain in (False, True)}
    (engine_room, _), (plain, _) = runs[False], runs[True]
    np.testing.assert_allclose(plain, engine_room, rtol=1e-5, atol=0)
    for _, optimizer in runs.values():
        assert {p.dtype for _, p in optimizer.named_params} == {np.dtype(np.float32)}
        assert {value.dtype for value in optimizer.state_dict().values() if isinstance(value, np.ndarray)} == \
            {np.dtype(np.float32)}


@pytest.mark.parametrize("plain", [False, True])
def test_the_switch_reaches_the_optimizer(plain, monkeypatch):
    """The plain run really runs the plain update: inside autograd.plain() Adam's `_update`,
    outside it the engine room's `_fused_update`, at every step."""
    calls = []
    for name in ("_update", "_fused_update"):
        monkeypatch.setattr(Adam, name, lambda self, p, g, state, lr, name=name: calls.append(name))
    train(2, "float32", plain)
    assert set(calls) == {"_update" if plain else "_fused_update"}
