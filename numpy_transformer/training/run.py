"""A training run in a folder: data, tokenizers, model, optimizer, loop, checkpoints, log and
figure, for a new run or one resumed from its checkpoint. `numpy-transformer train` is this
module plus printing.

    with Run.new("runs/mine", *resolve("default", training={"steps": 500})) as run:
        result = run.train()              # checkpoints (the last and the best), log.jsonl and loss.png
    with Run.resume("runs/mine", training={"steps": 1000}) as run:
        run.train()                       # steps 501 … 1000, as if never stopped

Nothing is written before the data, the tokenizers and the configuration are known to be good,
so a bad input leaves no folder behind. The folder is locked while the run is open, and holds
a manifest of the files the run writes (`run_folder.py`), with the run's id and the SHA-256 of
its parts (tokenizers, model.json, data.json, the weights' names and shapes), which every
command that loads the folder checks; both checkpoints record the run id. data.json keeps a
fingerprint of the corpus, which `evaluate` and `--resume` check.
"""
import dataclasses
from pathlib import Path

from numpy_transformer.training.checkpoint import ARCHIVE, BEST_ARCHIVE, CONFIG_FILES, CheckpointError, \
    has_checkpoint, load_checkpoint, run_parts, save_best_weights, save_checkpoint
from numpy_transformer.data.tokenizer import tokenizer_path
from numpy_transformer.model import count_parameters
from numpy_transformer.training.settings import MODELS, model_config
from numpy_transformer.training.loop import Trainer, TrainingDiverged, TrainingState, make_optimizer, run_generators
from numpy_transformer.training.loss import make_objective
from numpy_transformer.training.metrics_log import MetricsLog, plot_loss_curve
from numpy_transformer.training.prepare import prepare_data, with_fingerprint
from numpy_transformer.training.run_folder import RunFolder

LOG_FILE, FIGURE_FILE, METRICS_FILE = "log.jsonl", "loss.png", "metrics.json"
# What may change when a run resumes: how long it goes on and how often it reports.
RESUMABLE_FIELDS = ("steps", "epochs", "eval_every", "log_every", "checkpoint_every", "early_stop")
TASK_TITLES = {"translation": "translation", "lm": "causal language model", "mlm": "masked language model"}


def run_file_names(languages):
    """The files a run writes into its folder."""
    return [ARCHIVE, BEST_ARCHIVE, *CONFIG_FILES.values(), LOG_FILE, FIGURE_FILE, METRICS_FILE,
            *(tokenizer_path(Path(), language).name for language in languages)]


class Run:
    """A run's folder and everything its training needs (see the module docstring). The folder
    stays locked for this process until `close` (or the end of a `with Run.new(…) as run:`)."""

    def __init__(self, folder, data, model, optimizer, configs, data_rng, state=None, progress=False,
                 report=print, processes=1, split="batch"):
        self.folder, self.data, self.model, self.optimizer, self.configs = folder, data, model, optimizer, configs
        self.directory = folder.directory
        if folder.lock_note is not None and report is not None:
            report(folder.lock_note)
        self.log = MetricsLog(self.directory / LOG_FILE)
        self.unsaved_steps_until = None      # resumed: the last step the log held past the checkpoint
        self.objective = make_objective(configs["data"].task, data.tokenizers, configs["training"].seed)
        self.trainer = Trainer(model, optimizer, data.train, configs["training"], data_rng, data.validation, self.log,
                               self.save, progress, report, state, self.objective, processes, split)

    @classmethod
    def new(cls, directory, model_fields, training_config, data_config, cache_dir=None, overwrite=False, threads=1,
            **options):
        """A fresh run in `directory`: empty, missing, or an earlier run's folder (whose files are
        replaced, which needs `overwrite` once it holds a checkpoint); see run_folder.py.
        `threads`: the cores that share each step (training/parallel.py; options' `split` says
        how: `Trainer`) and the threads of the optimizer's update (make_optimizer)."""
        folder = RunFolder(directory, run_file_names(data_config.languages))
        folder.check_new(overwrite)
        data = prepare_data(data_config, cache_dir, progress=options.get("progress", False))
        config = model_config(model_fields, [tokenizer.vocab_size for tokenizer in data.tokenizers],
                              data.src_tokenizer.pad_id, data_config.max_len, data_config.task)
        if data.tgt_tokenizer.pad_id != config.pad_id:
            raise ValueError(f"the tokenizers' [PAD] ids differ ({config.pad_id} and {data.tgt_tokenizer.pad_id})")
        model_rng, data_rng = run_generators(training_config.seed)
        model = MODELS[data_config.task][1](config, model_rng)
        configs = {"model": config, "training": training_config, "data": with_fingerprint(data_config, data.splits)}
        folder.claim(new=True, overwrite=overwrite, parts=run_parts(configs, data.tokenizers, model))
        return cls(folder, data, model, make_optimizer(model, training_config, threads), configs, data_rng,
                   processes=threads, **options)

    @classmethod
    def resume(cls, directory, training=None, cache_dir=None, threads=1, **options):
        """The run saved in `directory`, ready to continue from its last checkpoint. `training`:
        new values of the RESUMABLE_FIELDS (a longer run: {"steps": 5000}); changing any other
        setting would not continue the same run, and is a ValueError."""
        checkpoint = load_checkpoint(directory)
        folder = RunFolder(directory, run_file_names(checkpoint.data_config.languages))
        training_config = _resumed_training_config(checkpoint.training_config, training or {})
        data = prepare_data(checkpoint.data_config, cache_dir, checkpoint.tokenizers, options.get("progress", False))
        optimizer = make_optimizer(checkpoint.model, training_config, threads)
        folder.claim()
        try:
            optimizer.load_state_dict(checkpoint.optimizer_state)
            state = TrainingState.from_dict(checkpoint.state)
            _, data_rng = run_generators(training_config.seed)
            run = cls(folder, data, checkpoint.model, optimizer,
                      {"model": checkpoint.model_config, "training": training_config, "data": checkpoint.data_config},
                      data_rng, state, processes=threads, **options)
        except (ValueError, TypeError, KeyError) as error:
            folder.release()
            raise CheckpointError(f"{Path(directory) / ARCHIVE}: the saved training state does not fit this run "
                                  f"({error})") from None
        if run.trainer.total_steps < state.step:
            folder.release()
            raise ValueError(f"{directory} is at step {state.step}, past the {run.trainer.total_steps} steps asked for: "
                             f"give more steps (or epochs) to continue it")
        run.unsaved_steps_until = run.log.keep_until(state.step)
        return run

    @property
    def parameters(self):
        return count_parameters(self.model)

    def save(self):
        """Write a checkpoint: the best weights first, if a validation found new ones since the
        last checkpoint (`Trainer.unsaved_best`), then the last ones."""
        state = self.trainer.state
        run = self.folder.run_id
        if self.trainer.unsaved_best is not None:
            save_best_weights(self.directory, self.trainer.unsaved_best, state.best_step, state.best_loss, run)
            self.trainer.unsaved_best = None
        saved = self.trainer.checkpoint_state()
        save_checkpoint(self.directory, self.model, self.optimizer, {**saved, "run": run} if run else saved,
                        self.configs, self.data.tokenizers)

    def train(self, callback=None):
        """Train to the end (or Ctrl-C), then draw the loss curve. Returns a TrainingResult.
        A new run that diverges (or runs out of memory) before its first checkpoint leaves
        nothing behind."""
        try:
            result = self.trainer.train(callback)
        except (TrainingDiverged, MemoryError):
            if not has_checkpoint(self.directory):
                self.folder.discard()
            raise
        self.plot()
        return result

    def close(self):
        """Release the folder's lock."""
        self.folder.release()

    def __enter__(self):
        return self

    def __exit__(self, *exception):
        self.close()

    def plot(self):
        config = self.configs["model"]
        layers = getattr(config, "n_layers", None) or f"{config.n_encoder_layers}+{config.n_decoder_layers}"
        title = (f"{_without_credit(self.data.splits.source.split(':')[0])}: {TASK_TITLES[self.objective.name]}, "
                 f"d_model {config.d_model}, {config.n_heads} heads, {layers} layers")
        plot_loss_curve(self.log.records(), self.directory / FIGURE_FILE, title)


def _without_credit(corpus):
    """A corpus's description without its closing parenthesis, the source's credit ("Tatoeba
    English–Italian, real sentences (Tatoeba (tatoeba.org), CC-BY 2.0 FR; …)" → "Tatoeba
    English–Italian, real sentences"), for a figure's title."""
    if not corpus.endswith(")"):
        return corpus
    depth = 0
    for position in range(len(corpus) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(corpus[position], 0)
        if depth == 0:
            return corpus[:position].rstrip() or corpus
    return corpus


def _resumed_training_config(saved, changes):
    fixed = {name: value for name, value in changes.items()
             if name not in RESUMABLE_FIELDS and getattr(saved, name) != value}
    if fixed:
        raise ValueError(f"a resumed run keeps its settings; cannot change {', '.join(sorted(fixed))} "
                         f"(only {', '.join(RESUMABLE_FIELDS)} may change). Start a new run with --out for those")
    length = {"steps": None, "epochs": None} if {"steps", "epochs"} & set(changes) else {}
    return dataclasses.replace(saved, **{**length, **changes})
