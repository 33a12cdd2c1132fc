"""A training run in a folder: data, tokenizers, model, optimizer, loop, checkpoints, log and
figure, for a new run or one resumed from its checkpoint. `numpy-transformer train` is this
module plus printing.

    with Run.new("runs/mine", *resolve("default", training={"steps": 500})) as run:
        result = run.train()              # checkpoints, log.jsonl and loss.png in runs/mine
    with Run.resume("runs/mine", training={"steps": 1000}) as run:
        run.train()                       # steps 501 … 1000, as if never stopped

Nothing is written before the data, the tokenizers and the configuration are known to be good,
so a bad input leaves no folder behind. The folder is locked while the run is open, and holds
a manifest of the files the run writes (`run_folder.py`); data.json keeps a fingerprint of the
corpus, which `evaluate` and `--resume` check.
"""
import dataclasses
import hashlib
import itertools
from pathlib import Path

from numpy_transformer.training.checkpoint import ARCHIVE, CONFIG_FILES, CheckpointError, has_checkpoint, load_checkpoint, \
    save_checkpoint
from numpy_transformer.data import encode_pairs, load_dataset_splits, train_tokenizers
from numpy_transformer.data.tokenizer import tokenizer_path
from numpy_transformer.model import Transformer, count_parameters
from numpy_transformer.training.configs import model_config
from numpy_transformer.training.loop import Trainer, TrainingDiverged, TrainingState, make_optimizer, run_generators
from numpy_transformer.training.metrics_log import MetricsLog, plot_loss_curve
from numpy_transformer.training.run_folder import RunFolder

LOG_FILE, FIGURE_FILE, METRICS_FILE = "log.jsonl", "loss.png", "metrics.json"
# What may change when a run resumes: how long it goes on and how often it reports.
RESUMABLE_FIELDS = ("steps", "epochs", "eval_every", "log_every", "checkpoint_every")


@dataclasses.dataclass
class PreparedData:
    """The splits of a DataConfig, the tokenizers, and the training and validation pairs as ids."""
    splits: object
    src_tokenizer: object
    tgt_tokenizer: object
    train: object
    validation: object

    def summary(self):
        """The lines `train` prints about its data."""
        splits, src, tgt = self.splits, self.src_tokenizer, self.tgt_tokenizer
        unknown, total = src.count_unknown(pair.src for pair in splits.validation)
        kind = "words seen at least twice in training" if src.kind == "word" else "byte-level BPE: bytes and merges"
        return [f"data: {splits.source}",
                f"pairs: {len(splits.train):,} train, {len(splits.validation):,} validation, {len(splits.test):,} test",
                f"training pairs: {self.train.report()}",
                f"vocabularies ({kind}, + 4 special tokens): "
                f"{src.vocab_size:,} {splits.src_language}, {tgt.vocab_size:,} {splits.tgt_language}; "
                f"{unknown / max(total, 1):.1%} of the validation {splits.src_language} tokens are [UNK]"]


def corpus_fingerprint(splits):
    """{"pairs": N, "sha256": hex digest} of the pairs of the three splits, in order: what
    tells a corpus from another, whether it came from a file, the Hub or the built-in grammar."""
    pairs = list(itertools.chain(splits.train, splits.validation, splits.test))
    digest = hashlib.sha256()
    for pair in pairs:
        digest.update(f"{pair.src}\t{pair.tgt}\n".encode("utf-8", "surrogateescape"))
    return {"pairs": len(pairs), "sha256": digest.hexdigest()}


def with_fingerprint(data_config, splits):
    """The DataConfig a new run saves: a file's path made absolute, and the corpus's fingerprint."""
    dataset = data_config.dataset
    if Path(dataset).is_file():
        dataset = str(Path(dataset).resolve())
    return dataclasses.replace(data_config, dataset=dataset, fingerprint=corpus_fingerprint(splits))


def check_same_data(data_config, splits):
    """A ValueError unless `splits` are the pairs the run saved with `data_config` was trained
    on (nothing to check for a run saved before fingerprints: None)."""
    saved = data_config.fingerprint
    if saved is None:
        return
    now = corpus_fingerprint(splits)
    if now["pairs"] != saved["pairs"]:
        change = f"it has {now['pairs']:,} pairs now, {saved['pairs']:,} when the run trained"
    elif now["sha256"] != saved["sha256"]:
        change = f"its {now['pairs']:,} pairs differ from those the run trained on (changed or reordered)"
    else:
        return
    raise ValueError(f"{splits.source}: not the data this run was trained on: {change}. Restore the original "
                     f"corpus ({data_config.dataset}), or train a new run on this one")


def prepare_data(data_config, cache_dir=None, tokenizers=None, progress=True):
    """Load and split the corpus of `data_config`, train the tokenizers on its training split
    (or use the given (source, target) pair, as a resumed run does), and encode. progress:
    False turns off the `datasets` progress bars ("Generating train split"), for logs."""
    if not progress and data_config.dataset != "builtin":
        import datasets
        datasets.disable_progress_bars()
    splits = load_dataset_splits(data_config.dataset, data_config.pair, data_config.subset, data_config.subset_mode,
                                 data_config.seed, data_config.n_pairs, cache_dir)
    if not (splits.train and splits.validation and splits.test):
        n = len(splits.train) + len(splits.validation) + len(splits.test)
        raise ValueError(f"{splits.source}: {n} pairs are too few to split into training, validation and test pairs "
                         f"(a run needs at least 3)")
    check_same_data(data_config, splits)
    src, tgt = tokenizers or train_tokenizers(splits, data_config.min_frequency, data_config.tokenizer,
                                              data_config.vocab_size)
    train, validation = (encode_pairs(pairs, src, tgt, data_config.max_len, data_config.length_policy)
                         for pairs in (splits.train, splits.validation))
    if len(train) == 0:
        raise ValueError(f"none of the {len(splits.train)} training pairs fits the maximum length "
                         f"{data_config.max_len}; raise it with --max-len")
    return PreparedData(splits, src, tgt, train, validation if len(validation) else None)


def run_file_names(languages):
    """The files a run writes into its folder."""
    return [ARCHIVE, *CONFIG_FILES.values(), LOG_FILE, FIGURE_FILE, METRICS_FILE,
            *(tokenizer_path(Path(), language).name for language in languages)]


class Run:
    """A run's folder and everything its training needs (see the module docstring). The folder
    stays locked for this process until `close` (or the end of a `with Run.new(…) as run:`)."""

    def __init__(self, folder, data, model, optimizer, configs, data_rng, state=None, progress=False,
                 report=print):
        self.folder, self.data, self.model, self.optimizer, self.configs = folder, data, model, optimizer, configs
        self.directory = folder.directory
        if folder.stale_lock_taken is not None and report is not None:
            report(f"note: took over the lock of process {folder.stale_lock_taken}, which no longer runs")
        self.log = MetricsLog(self.directory / LOG_FILE)
        self.trainer = Trainer(model, optimizer, data.train, configs["training"], data_rng, data.validation, self.log,
                               self.save, progress, report, state)

    @classmethod
    def new(cls, directory, model_fields, training_config, data_config, cache_dir=None, overwrite=False, **options):
        """A fresh run in `directory`: empty, missing, or an earlier run's folder (whose files are
        replaced, which needs `overwrite` once it holds a checkpoint); see run_folder.py."""
        folder = RunFolder(directory, run_file_names(data_config.languages))
        folder.check_new(overwrite)
        data = prepare_data(data_config, cache_dir, progress=options.get("progress", False))
        config = model_config(model_fields, data.src_tokenizer.vocab_size, data.tgt_tokenizer.vocab_size,
                              data.src_tokenizer.pad_id, data_config.max_len)
        if data.tgt_tokenizer.pad_id != config.pad_id:
            raise ValueError(f"the tokenizers' [PAD] ids differ ({config.pad_id} and {data.tgt_tokenizer.pad_id})")
        model_rng, data_rng = run_generators(training_config.seed)
        model = Transformer(config, model_rng)
        configs = {"model": config, "training": training_config, "data": with_fingerprint(data_config, data.splits)}
        folder.claim(new=True, overwrite=overwrite)
        return cls(folder, data, model, make_optimizer(model, training_config), configs, data_rng, **options)

    @classmethod
    def resume(cls, directory, training=None, cache_dir=None, **options):
        """The run saved in `directory`, ready to continue from its last checkpoint. `training`:
        new values of the RESUMABLE_FIELDS (a longer run: {"steps": 5000}); changing any other
        setting would not continue the same run, and is a ValueError."""
        checkpoint = load_checkpoint(directory)
        folder = RunFolder(directory, run_file_names(checkpoint.data_config.languages))
        training_config = _resumed_training_config(checkpoint.training_config, training or {})
        data = prepare_data(checkpoint.data_config, cache_dir, (checkpoint.src_tokenizer, checkpoint.tgt_tokenizer),
                            options.get("progress", False))
        optimizer = make_optimizer(checkpoint.model, training_config)
        folder.claim()
        try:
            optimizer.load_state_dict(checkpoint.optimizer_state)
            state = TrainingState.from_dict(checkpoint.state)
            _, data_rng = run_generators(training_config.seed)
            run = cls(folder, data, checkpoint.model, optimizer,
                      {"model": checkpoint.model_config, "training": training_config, "data": checkpoint.data_config},
                      data_rng, state, **options)
        except (ValueError, TypeError, KeyError) as error:
            folder.release()
            raise CheckpointError(f"{Path(directory) / ARCHIVE}: the saved training state does not fit this run "
                                  f"({error})") from None
        if run.trainer.total_steps < state.step:
            folder.release()
            raise ValueError(f"{directory} is at step {state.step}, past the {run.trainer.total_steps} steps asked for: "
                             f"give more steps (or epochs) to continue it")
        run.log.keep_until(state.step)
        return run

    @property
    def parameters(self):
        return count_parameters(self.model)

    def save(self):
        save_checkpoint(self.directory, self.model, self.optimizer, self.trainer.checkpoint_state(), self.configs,
                        (self.data.src_tokenizer, self.data.tgt_tokenizer))

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
        title = (f"{self.data.splits.source.split(':')[0]}: d_model {config.d_model}, {config.n_heads} heads, "
                 f"{config.n_encoder_layers}+{config.n_decoder_layers} layers")
        plot_loss_curve(self.log.records(), self.directory / FIGURE_FILE, title)


def _resumed_training_config(saved, changes):
    fixed = {name: value for name, value in changes.items()
             if name not in RESUMABLE_FIELDS and getattr(saved, name) != value}
    if fixed:
        raise ValueError(f"a resumed run keeps its settings; cannot change {', '.join(sorted(fixed))} "
                         f"(only {', '.join(RESUMABLE_FIELDS)} may change). Start a new run with --out for those")
    length = {"steps": None, "epochs": None} if {"steps", "epochs"} & set(changes) else {}
    return dataclasses.replace(saved, **{**length, **changes})
