"""The training loop: teacher forcing, label-smoothed cross-entropy, Adam, checkpoints.

`train_step`, the first function below, is one step of gradient descent on a batch of sentence
pairs (x, y), `tgt_in` = [SOS] y, `tgt_out` = y [EOS] (or of texts, for a language model: the
objectives of training/loss.py):

    loss   = objective.loss(model, batch, ε)                  the label-smoothed cross-entropy
                                                              of thesis §1.1
    grads  = backward(loss), rescaled so that ‖grads‖ ≤ clip_norm
    θ      ← Adam(θ, grads, lr(t))                            warm-up schedule or constant lr

Everything else here runs that step in a loop (`Trainer`): batches, validation, the log, the
progress bar, checkpoints, Ctrl-C, and the check between the clip and the update (a loss or a
gradient norm that is not finite stops the run with `TrainingDiverged`).

With `precision="mixed"` the forward and backward run on a float16 twin of the model, with a
dynamic loss scale, and Adam updates the float32 weights (training/mixed_precision.py): the
same `train_step`, given the twin's loss and the master weights' optimizer.

Every `eval_every` steps the loss on the validation pairs (without smoothing, dropout off),
every `log_every` steps a line of the metrics log, every `checkpoint_every` steps a checkpoint.

The best weights. A validation loss lower than every one before it (strictly) makes the current
weights the best: the Trainer keeps a copy (`unsaved_best`) until the next checkpoint writes it
beside the last weights, and the state records its loss and step. With `early_stop` = N the run
stops after N validations in a row without a lower loss (`TrainingResult.stopped_early`).

Exactness. A run is a function of its seed: the initial weights and the dropout masks come from
one generator, the order of the batches from another (`run_generators`). The loop's position
(`TrainingState`: step, epoch, batch within the epoch, both generators' states, the best
validation loss, its step and the validations since) is saved with each checkpoint, so that N
steps, a checkpoint, a resume and N more steps give the weights, the best weights and the
losses of 2N steps in one go, bit for bit. With several processes (`train --threads N`, or N
MPI ranks under `mpiexec -n N`; `shared_steps`) each step is the same step shared out
(training/parallel.py, training/mpi.py): the run is then a function of its seed and N, and
follows the one-process run up to rounding.

Ctrl-C. While `train` runs, the first Ctrl-C (or SIGTERM, what a scheduler or `kill` sends)
asks the loop to stop after the current step and save a checkpoint; a second one interrupts at
once. A `KeyboardInterrupt` raised inside a step
(by a callback, or the second Ctrl-C) still saves the last completed step, unless it struck
during the parameter update itself, which would leave the weights half-updated. A worker
process of `train --threads N` that dies or stops answering (`parallel.WorkerLost`) ends the
run the same way: the last completed step is saved, and `TrainingResult.worker_lost` says which.
"""
import contextlib
import dataclasses
import functools
import math
import signal
import sys
import threading
import time

import numpy as np

from autograd.engine_room import set_update_block, share_updates
from autograd.optim import Adam, clip_grad_norm
from autograd.plain_mode import is_plain
from numpy_transformer.data.batching import batch_indices
from numpy_transformer.training.evaluation import mean_cross_entropy, perplexity
from numpy_transformer.training import cores, mpi, parallel
from numpy_transformer.training.loss import TRANSLATION
from numpy_transformer.training.mixed_precision import MixedPrecision
from numpy_transformer.training.thread_plan import choose_split, describe_split
from numpy_transformer.training.update_block import choose_update_block


def train_step(model, batch, loss_fn, optimizer, clip_norm, before_update=None):
    """One step of gradient descent: forward, loss, backward, clip, update.

    loss_fn(model, batch): the scalar loss Tensor (the objective's label-smoothed cross-entropy);
    optimizer: Adam (anything with zero_grad() and step()); clip_norm: the largest gradient norm
    (None: no clipping). Returns (loss, gradient norm before clipping), two floats.
    before_update(loss, norm), if given, runs between the clip and the update, which happens only
    if it returns True (`Trainer` stops a diverged run there, and skips a mixed-precision step
    whose gradients overflowed).
    """
    model.train()                                          # dropout on
    optimizer.zero_grad()
    loss = loss_fn(model, batch)                           # forward and the loss
    loss.backward()                                        # backward: ∂loss/∂θ into every .grad
    norm = clip_grad_norm(model.parameters(), clip_norm)   # g ← g · min(1, clip_norm / ‖g‖)
    if before_update is None or before_update(loss.item(), norm):
        optimizer.step()                                   # update: θ ← Adam(θ, g, lr(t))
    return loss.item(), norm


class TrainingDiverged(ValueError):
    """The loss or the gradient became infinite or NaN."""


def run_generators(seed):
    """(model generator, data generator) for a run seed: two independent streams, one for the
    initial weights and then the dropout masks, one for the order of the batches."""
    model_seed, data_seed = np.random.SeedSequence(seed).spawn(2)
    return np.random.default_rng(model_seed), np.random.default_rng(data_seed)


def make_optimizer(model, config, threads=1):
    """Adam with the betas, eps and learning rate (schedule) of a TrainingConfig; its update
    shared by `threads` threads (the CLI's --threads: the engine room's `share_updates`), a block
    of the size measured fastest on this machine at a time (training/update_block.py)."""
    optimizer = Adam(model.named_parameters(), lr=config.learning_rate(model.config.d_model), betas=config.betas,
                     eps=config.eps)
    set_update_block(choose_update_block(max(p.data.size for p in model.parameters())))  # measured: the same update
    return share_updates(optimizer, min(threads, cores.usable_cores()))   # the same update with any threads


@dataclasses.dataclass
class TrainingState:
    """Where the loop is: what a checkpoint needs, besides weights and Adam's moments, to continue
    exactly. data_rng: the batch-order generator's state at the start of the current epoch
    (the epoch's order is drawn again from it); model_rngs: the dropout generators' states;
    interval_losses / interval_tokens: the steps since the last log line; loss_scaler: a mixed-
    precision run's loss scale (`LossScaler.state_dict()`), None in float32; best_loss, best_step:
    the lowest validation loss so far and its step (None before the first); validations_without_
    improvement: the validations since then (what `early_stop` counts); processes: how many
    processes shared each step (`Trainer.sharing`; None in a checkpoint older than the field);
    split: how the run shares its steps between several cores of one machine, "batch", "blas" or
    "one" (one core: the machine was busy when it started; training/thread_plan.py), None until a
    run with several decides (kept, so that a resumed run continues the same way)."""
    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    data_rng: dict = None
    model_rngs: list = None
    train_seconds: float = 0.0
    interval_losses: list = dataclasses.field(default_factory=list)
    interval_tokens: list = dataclasses.field(default_factory=list)
    loss_scaler: dict = None
    best_loss: float = None
    best_step: int = None
    validations_without_improvement: int = 0
    processes: int = None
    split: str = None

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values):
        names = {field.name for field in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in values.items() if key in names})


@dataclasses.dataclass
class TrainingResult:
    """How `Trainer.train` ended. interrupted: stopped by Ctrl-C; saved: a checkpoint of the
    final step was written; loss: the mean training loss of the last logged interval;
    stopped_early: stopped by `early_stop`; worker_lost: a `parallel.WorkerLost` that stopped the
    run (a worker process died or stopped answering), or None."""
    step: int
    total_steps: int
    interrupted: bool
    saved: bool
    loss: float
    validation_loss: float
    train_seconds: float
    stopped_early: bool = False
    worker_lost: Exception = None


class Trainer:
    """Trains `model` on `train_data` (an `EncodedPairs`) with `optimizer`, as `config` says.

    data_rng: the batch-order generator of `run_generators(config.seed)`, whose other generator
    built the model (and draws its dropout masks). validation_data: an `EncodedPairs` or None. log: an object
    with `write(record)` (a `MetricsLog`), or None. save: a function of no argument that writes a
    checkpoint (it reads `trainer.checkpoint_state()`, and writes `trainer.unsaved_best` first,
    then sets it to None), or None. progress: show a tqdm bar;
    report: where the validation lines go (None: nowhere). state: a `TrainingState` to resume.
    objective: what the model learns (`training/loss.py`): TRANSLATION, or a language model's,
    whose data are `EncodedTexts`. processes: the cores to use; split: how, with more than one:
    "batch", the processes share each step and each validation (`training/parallel.py`: the
    batch's rows split between them), "blas", one process with the BLAS threads it was given, or
    "auto", the faster of the two, measured on the run's first batch (training/thread_plan.py), or
    "one", one core as with processes=1, when the machine is busy as the run starts; a resumed
    run keeps the split it started with, unless `split` names one. A mixed-precision or
    plain-mode run, or a system other than Linux, stays in one process.
    """

    def __init__(self, model, optimizer, train_data, config, data_rng, validation_data=None, log=None,
                 save=None, progress=False, report=print, state=None, objective=TRANSLATION, processes=1,
                 split="batch"):
        if len(train_data) == 0:
            raise ValueError("train_data is empty: no training pair fits the maximum length")
        self.model, self.optimizer, self.config, self.objective = model, optimizer, config, objective
        self.train_data, self.validation_data = train_data, validation_data
        self.data_rng, self.log, self.save, self.report = data_rng, log, save, report
        self.progress = progress
        self.processes, self.split, self.parallel = processes, split, None
        self.mixed = MixedPrecision(model) if config.precision == "mixed" else None
        self.generators = model.generators()
        self.batches_per_epoch = len(batch_indices(train_data, config.batch_size, np.random.default_rng(0),
                                                   config.similar_lengths))
        self.total_steps = config.total_steps(self.batches_per_epoch)
        self.state = state or TrainingState(data_rng=data_rng.bit_generator.state)
        if state is not None:
            self._restore_generators(state)
            if self.mixed is not None and state.loss_scaler is not None:
                self.mixed.scaler.load_state_dict(state.loss_scaler)
        self.losses = []                 # the training loss of every step run by this Trainer
        self.validation_loss = None
        self.unsaved_best = None         # the best weights ({name: array}) until a checkpoint writes them
        self._last_logged_loss = float("nan")
        self.stop_requested = False
        self._plan, self._phase, self._saved_step = None, "idle", None
        self._speed = [0, time.perf_counter()]   # tokens and clock since the last log line

    def checkpoint_state(self):
        """The loop's state as a JSON-serialisable dict, with the generators' current states."""
        scaler = None if self.mixed is None else self.mixed.scaler.state_dict()
        return dataclasses.replace(self.state, model_rngs=[g.bit_generator.state for g in self.generators],
                                   loss_scaler=scaler, processes=self.sharing()).to_dict()

    def _restore_generators(self, state):
        if state.model_rngs is not None:
            if len(state.model_rngs) != len(self.generators):
                raise ValueError(f"the saved state has {len(state.model_rngs)} model generators, the model "
                                 f"draws from {len(self.generators)}")
            for generator, saved in zip(self.generators, state.model_rngs):
                generator.bit_generator.state = saved
        self.data_rng.bit_generator.state = state.data_rng

    def train(self, callback=None):
        """Run until `total_steps` (or Ctrl-C); save a checkpoint at the end. callback(trainer),
        if given, is called after every step. Returns a `TrainingResult`."""
        interrupted, lost = False, None
        self._clock = (self.state.train_seconds, time.perf_counter())   # the loop's wall time, resumes included
        with self._progress_bar() as bar, _stop_on_first_interrupt(self), self.shared_steps():
            try:
                while self.state.step < self.total_steps and not (self.stop_requested or self.stopped_early):
                    self._run_step(bar)
                    if callback is not None:
                        callback(self)
            except KeyboardInterrupt:
                interrupted = True
            except parallel.WorkerLost as error:   # the other workers are stopped; saved below, as for Ctrl-C
                # kept without its traceback, which holds this frame: a reference cycle through
                # the frames of the failed message, collected later and noisily (a BytesIO with
                # views of it still open: "Exception ignored … BufferError" on Python 3.13)
                lost = error.with_traceback(None)
        interrupted = interrupted or self.stop_requested
        saved = self._phase != "update" and self._checkpoint()
        return TrainingResult(self.state.step, self.total_steps, interrupted, saved, self._last_logged_loss,
                              self.validation_loss, self.state.train_seconds, self.stopped_early, lost)

    @contextlib.contextmanager
    def shared_steps(self):
        """A context in which `train_step` and the validation are shared by the processes of a
        `DataParallel` (`train` runs in one), if `sharing()` says so. Inside another, it adds
        nothing. Under mpiexec the processes are MPI's ranks (training/mpi.py)."""
        if self.parallel is not None or self.sharing() == 1:
            if self.parallel is None and self.processes > 1 and self.state.split == "one":
                with parallel.one_core(self.optimizer):     # the machine was busy when the run started
                    yield
            else:
                yield
            return
        distributed = mpi.world()
        transport = None if distributed is None else functools.partial(mpi.MpiTransport, comm=distributed,
                                                                        hosts=mpi.hosts())
        with parallel.DataParallel(self.model, self.objective, self.config.label_smoothing,
                                   self.processes, transport) as self.parallel:
            try:
                yield
            finally:
                self.parallel = None

    def sharing(self):
        """How many processes share each step: `processes` if more than one is asked for and the
        run splits its batches (`chosen_split`; else BLAS has the threads), else 1. Under mpiexec
        always the ranks, whatever the width (each may have a host of its own); a mixed-precision
        or plain-mode run is then refused (ValueError)."""
        if mpi.world() is not None:
            if self.mixed is not None or is_plain():
                raise ValueError("a mixed-precision or plain-mode run trains in one process: start it without mpiexec")
            return self.processes
        if self.processes < 2 or self.mixed is not None or is_plain() or not parallel.available() \
                or self.chosen_split() != "batch":
            return 1
        return self.processes

    def chosen_split(self):
        """"batch", "blas" or "one" (see the class docstring): `split` if it names one, else the one
        the run started with, else measured now on the next batch (and reported)."""
        if self.split != "auto":
            self.state.split = self.split
        elif self.state.split is None:
            batch = self.objective.batch(self.train_data, self._next_positions(), ("train", self.state.step))
            plan = choose_split(self.model, self.objective, self.config.label_smoothing, batch, self.processes)
            self.state.split = plan.split
            if self.report is not None:
                self.report(f"Threads: {describe_split(plan.split, self.processes)}, the faster way here: {plan.why}.")
        return self.state.split

    @property
    def stopped_early(self):
        """Whether `early_stop` validations in a row have brought no lower validation loss."""
        patience = self.config.early_stop
        return patience is not None and self.state.validations_without_improvement >= patience

    def _run_step(self, bar):
        """One optimizer step on the next batch, then the log, validation and checkpoint due."""
        snapshot = [g.bit_generator.state for g in self.generators]
        batch = self.objective.batch(self.train_data, self._next_positions(), ("train", self.state.step))
        self._phase = "step"
        try:
            loss, grad_norm = self.step_on_batch(batch)
        except (KeyboardInterrupt, parallel.WorkerLost):
            if self._phase == "step":      # nothing changed yet: forget this step's dropout draws
                for generator, saved in zip(self.generators, snapshot):
                    generator.bit_generator.state = saved
            raise
        self._phase = "idle"
        self._advance()
        self.losses.append(loss)
        self.state.interval_losses.append(loss)
        self.state.interval_tokens.append(batch.n_tokens)
        self._speed[0] += batch.n_tokens
        self.state.train_seconds = self._clock[0] + time.perf_counter() - self._clock[1]
        self._after_step(bar, grad_norm)

    def step_on_batch(self, batch):
        """`train_step` on the batch with this run's objective, optimizer and clip_norm, and
        `_before_update` between the clip and the update: (loss, gradient norm before clipping);
        shared by the processes of `DataParallel` when there are several.
        In mixed precision the loss and the optimizer are the twin's and the master weights'
        (`MixedPrecision.wrap`), and a step whose scaled gradients overflowed is skipped."""
        if self.parallel is not None:
            return self.parallel.step_on_batch(batch, self.optimizer, self.config.clip_norm, self._before_update)
        loss_fn, optimizer = self._loss, self.optimizer
        if self.mixed is not None:
            loss_fn, optimizer = self.mixed.wrap(loss_fn, optimizer)
        return train_step(self.model, batch, loss_fn, optimizer, self.config.clip_norm, self._before_update)

    def _loss(self, model, batch):
        return self.objective.loss(model, batch, self.config.label_smoothing)

    def _before_update(self, loss, grad_norm):
        """Whether to update: not for a mixed-precision step to skip (`MixedPrecision.skipped`);
        a loss or a gradient norm that is not finite raises `TrainingDiverged`. From here on an
        interrupted step is not saved (the update may be half done)."""
        if self.mixed is not None and self.mixed.skipped(loss, grad_norm):
            return False
        if not (math.isfinite(loss) and math.isfinite(grad_norm)):
            raise TrainingDiverged(
                f"training diverged at step {self.state.step + 1}: loss {loss}, gradient norm {grad_norm}. "
                f"Lower the learning rate (--lr, or --lr-factor with the warm-up schedule) or clip the gradients "
                f"(--clip-norm)")
        self._phase = "update"
        return True

    def _next_positions(self):
        """The positions (in train_data) of the next batch: the current epoch's order, drawn from
        the data generator at the epoch's start state."""
        if self._plan is None:
            self.data_rng.bit_generator.state = self.state.data_rng
            self._plan = batch_indices(self.train_data, self.config.batch_size, self.data_rng,
                                       self.config.similar_lengths)
        return self._plan[self.state.batch_in_epoch]

    def _advance(self):
        self.state.step += 1
        self.state.batch_in_epoch += 1
        if self.state.batch_in_epoch == len(self._plan):
            self.state.epoch, self.state.batch_in_epoch, self._plan = self.state.epoch + 1, 0, None
            self.state.data_rng = self.data_rng.bit_generator.state

    def _after_step(self, bar, grad_norm):
        step, config = self.state.step, self.config
        last = step == self.total_steps
        if bar is not None:
            if step % 10 == 0 or last:
                bar.set_postfix_str(self._bar_text(), refresh=False)
            bar.update(1)
        if step % config.log_every == 0 or last:
            self._log_interval(grad_norm)
        if self.validation_data is not None and (step % config.eval_every == 0 or last):
            self._validate()
        if step % config.checkpoint_every == 0 and not last:
            self._checkpoint()

    def _log_interval(self, grad_norm):
        losses, tokens = self.state.interval_losses, self.state.interval_tokens
        self._last_logged_loss = float(np.dot(losses, tokens) / np.sum(tokens))
        now = time.perf_counter()
        speed = self._speed[0] / max(now - self._speed[1], 1e-9)
        self._speed = [0, now]
        record = {"step": self.state.step, "epoch": round(self.epoch_progress, 4), "loss": self._last_logged_loss,
                  "lr": self.optimizer.current_lr, "grad_norm": grad_norm if math.isfinite(grad_norm) else None,
                  "tokens_per_second": round(speed, 1), "train_seconds": round(self.state.train_seconds, 3)}
        if self.mixed is not None:
            record.update(loss_scale=self.mixed.scaler.scale, skipped_steps=self.mixed.scaler.skipped_steps)
        self._write_log(record)
        self.state.interval_losses, self.state.interval_tokens = [], []

    def _validate(self):
        self.validation_loss = mean_cross_entropy(self.model, self.validation_data, self.config.batch_size,
                                                  objective=self.objective, parallel=self.parallel)
        validation_perplexity = perplexity(self.validation_loss)
        self._write_log({"step": self.state.step, "validation_loss": self.validation_loss,
                         "validation_perplexity": validation_perplexity})
        self._keep_if_best(self.validation_loss)
        if self.report is not None:
            recent = self.losses[-self.config.eval_every:]
            since = f" (mean of the {len(recent)} steps since the resume)" \
                if len(recent) < self.config.eval_every and len(recent) < self.state.step else ""
            self.report(f"step {self.state.step:>{len(str(self.total_steps))}}/{self.total_steps}  "
                        f"loss {np.mean(recent):.3f}{since}  validation loss {self.validation_loss:.3f} "
                        f"(perplexity {validation_perplexity:.2f})  lr {self.optimizer.current_lr:.2e}  "
                        f"{format_seconds(self.state.train_seconds)}")

    def _keep_if_best(self, loss):
        """A loss below every earlier one (strictly) makes the current weights the best; any other
        counts one more validation without improvement."""
        state = self.state
        if math.isfinite(loss) and (state.best_loss is None or loss < state.best_loss):
            state.best_loss, state.best_step, state.validations_without_improvement = loss, state.step, 0
            self.unsaved_best = self.model.state_dict()
        else:
            state.validations_without_improvement += 1

    def _checkpoint(self):
        if self.save is None:
            return False
        if self._saved_step != self.state.step:
            self.save()
            self._saved_step = self.state.step
        return True

    def _write_log(self, record):
        if self.log is not None:
            self.log.write(record)

    @property
    def epoch_progress(self):
        """Epochs done, as a fraction (2.5: halfway through the third epoch)."""
        return self.state.epoch + self.state.batch_in_epoch / self.batches_per_epoch

    def _bar_text(self):
        recent = self.losses[-10:]
        speed = self._speed[0] / max(time.perf_counter() - self._speed[1], 1e-9)
        return f"loss {np.mean(recent):.3f}, lr {self.optimizer.current_lr:.2e}, {speed:,.0f} tok/s"

    @contextlib.contextmanager
    def _progress_bar(self):
        if not self.progress:
            yield None
            return
        from tqdm import tqdm

        bar = tqdm(total=self.total_steps, initial=self.state.step, unit="step", dynamic_ncols=True,
                   file=sys.stderr, leave=True)
        report = self.report
        if report is not None:
            self.report = bar.write
        try:
            yield bar
        finally:
            bar.close()
            self.report = report


STOP_SIGNALS = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}


@contextlib.contextmanager
def _stop_on_first_interrupt(trainer):
    """While training: the first SIGINT (Ctrl-C) or SIGTERM sets trainer.stop_requested, so the
    loop ends after the step under way and saves; a second one acts as it would without the
    loop (Ctrl-C raises KeyboardInterrupt, SIGTERM ends the process). Only the main thread can
    install signal handlers; elsewhere both keep their default behaviour."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def request_stop(signum, frame):
        trainer.stop_requested = True
        restore()
        if trainer.report is not None:
            trainer.report(f"{STOP_SIGNALS[signum]}: stopping after this step and saving a checkpoint "
                           f"({STOP_SIGNALS[signum]} again to stop at once)")

    previous = {number: signal.signal(number, request_stop) for number in STOP_SIGNALS}

    def restore():
        for number, handler in previous.items():
            signal.signal(number, handler if handler is not None else signal.SIG_DFL)

    try:
        yield
    finally:
        restore()


def format_seconds(seconds):
    """7.5 minutes → "7:30"."""
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes}:{seconds:02d}"
