"""Checkpoints: everything needed to translate with a trained model, or to continue its training
exactly where it stopped, in one folder.

    DIR/model.json            the TransformerConfig (of the kind the task trains: encoder-decoder,
                              decoder-only or encoder-only; a language model's run folder written
                              by numpy-transformer 0.1 holds a LanguageModelConfig, read as one)
    DIR/training.json         the TrainingConfig
    DIR/data.json             the DataConfig: which task, corpus, split and seed (to rebuild the splits)
    DIR/tokenizer_en.json     the tokenizers of both languages (a language model has one)
    DIR/tokenizer_it.json
    DIR/checkpoint.npz        weights ("model/<name>"), Adam's state ("optimizer/<key>"), and the
                              loop's position as JSON ("state": step, epoch, batch, random states)

Every file is written atomically (`numpy_transformer/training/atomic_files.py`): a crash during a write leaves the
previous version whole. `checkpoint.npz` is written last: a folder
without it holds no checkpoint, and the JSON files never change during a run, so every
`checkpoint.npz` found is consistent with the files beside it.

Loading checks everything and turns any problem (a missing folder or file, a truncated archive,
bad JSON, weights that do not fit the configuration) into one `CheckpointError` whose message
says what is wrong and where.
"""
import dataclasses
import json
import math
import zipfile
from pathlib import Path

import numpy as np

from numpy_transformer.config import TransformerConfig
from numpy_transformer.data.tokenizer import WordTokenizer, tokenizer_path
from numpy_transformer.training.settings import MODELS, DataConfig, TrainingConfig
from numpy_transformer.training.atomic_files import atomic_write, atomic_write_text

ARCHIVE = "checkpoint.npz"
CONFIG_FILES = {"model": "model.json", "training": "training.json", "data": "data.json"}
CONFIG_CLASSES = {"training": TrainingConfig, "data": DataConfig, "model": TransformerConfig}


class CheckpointError(Exception):
    """A checkpoint folder that cannot be used; the message says which file and why."""


@dataclasses.dataclass
class Checkpoint:
    """What `load_checkpoint` reads: the configurations, the tokenizers (source and target, or a
    language model's one), the model with its weights loaded, Adam's state (a flat dict for
    `Optimizer.load_state_dict`) and the training loop's state (a dict, see
    `numpy_transformer.training.loop.TrainingState`)."""
    directory: Path
    model_config: object
    training_config: TrainingConfig
    data_config: DataConfig
    tokenizers: tuple
    model: object
    optimizer_state: dict
    state: dict

    @property
    def step(self):
        return int(self.state["step"])

    @property
    def task(self):
        return self.data_config.task

    @property
    def src_tokenizer(self):
        return self.tokenizers[0]

    @property
    def tgt_tokenizer(self):
        return self.tokenizers[-1]


def has_checkpoint(directory):
    return (Path(directory) / ARCHIVE).is_file()


def save_checkpoint(directory, model, optimizer, state, configs, tokenizers):
    """Write a checkpoint to `directory` (created if needed).

    configs: {"model": TransformerConfig, "training": TrainingConfig,
    "data": DataConfig}; tokenizers: (source, target) WordTokenizers, or a language model's one;
    state: a JSON-serialisable dict (the loop's position). The JSON files first, the archive
    last (see the module docstring)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for kind, name in CONFIG_FILES.items():
        atomic_write_text(directory / name, configs[kind].to_json() + "\n")
    for tokenizer in tokenizers:
        atomic_write_text(tokenizer_path(directory, tokenizer.language), tokenizer.tokenizer.to_str())
    arrays = {f"model/{name}": array for name, array in model.state_dict().items()}
    arrays.update({f"optimizer/{key}": np.asarray(value) for key, value in optimizer.state_dict().items()})
    arrays["state"] = np.asarray(json.dumps(state))
    atomic_write(directory / ARCHIVE, lambda file: np.savez(file, **arrays))


def load_checkpoint(directory):
    """Read and check the checkpoint in `directory` (a `Checkpoint`), or raise CheckpointError."""
    directory = Path(directory)
    _check_complete(directory)
    configs = {kind: _read_config(directory, kind, config_class) for kind, config_class in CONFIG_CLASSES.items()}
    tokenizers = tuple(_read_tokenizer(directory, language) for language in configs["data"].languages)
    _check_vocabularies(directory, configs["model"], tokenizers)
    weights, optimizer_state, state = _read_archive(directory / ARCHIVE)
    _check_finite(directory / ARCHIVE, weights)
    try:
        model = MODELS[configs["data"].task][1](configs["model"], np.random.default_rng(configs["training"].seed))
    except TypeError as error:                  # a model.json of another kind than the task's
        raise CheckpointError(f"{directory / CONFIG_FILES['model']} does not describe a model of the task "
                              f"{configs['data'].task!r} of {directory / CONFIG_FILES['data']}: {error}") from None
    try:
        model.load_state_dict(weights)
    except ValueError as error:
        raise CheckpointError(f"{directory / ARCHIVE}: the weights do not fit the configuration in "
                              f"{directory / CONFIG_FILES['model']}:\n{error}") from None
    return Checkpoint(directory, configs["model"], configs["training"], configs["data"], tokenizers, model,
                      optimizer_state, state)


def _check_finite(path, weights):
    for name, array in weights.items():
        if np.issubdtype(array.dtype, np.floating) and not np.isfinite(array).all():
            raise CheckpointError(f"{path}: the weights of {name} are not all finite (NaN or infinite): the run that "
                                  f"saved them had diverged; train again, or restore an earlier copy")


def _check_complete(directory):
    if directory.is_file():
        raise CheckpointError(f"{directory} is a file: --checkpoint takes the folder that holds it, {directory.parent}")
    if not directory.is_dir():
        raise CheckpointError(f"no checkpoint at {directory}: the folder does not exist "
                              f"(train a model there with: numpy-transformer train --out {directory})")
    if not (directory / ARCHIVE).is_file():
        raise CheckpointError(f"no checkpoint in {directory}: {ARCHIVE} is missing (training has not saved one "
                              f"there; train with: numpy-transformer train --out {directory})")


def _read_config(directory, kind, config_class):
    path = directory / CONFIG_FILES[kind]
    try:
        return config_class.load(path)
    except FileNotFoundError:
        raise CheckpointError(f"{path} is missing: the checkpoint in {directory} is incomplete") from None
    except (ValueError, TypeError) as error:   # json.JSONDecodeError is a ValueError
        raise CheckpointError(f"{path}: not a valid {kind} configuration ({error})") from None


def _read_tokenizer(directory, language):
    path = tokenizer_path(directory, language)
    try:
        return WordTokenizer.load(path, language)
    except FileNotFoundError:
        raise CheckpointError(f"{path} is missing: the checkpoint in {directory} is incomplete") from None
    except ValueError as error:
        raise CheckpointError(str(error)) from None


def _check_vocabularies(directory, config, tokenizers):
    sizes = {"src_vocab_size": config.src_vocab_size, "tgt_vocab_size": config.tgt_vocab_size} \
        if config.kind == "encoder-decoder" else {"vocab_size": config.vocab_size}
    for tokenizer, (name, size) in zip(tokenizers, sizes.items()):
        if tokenizer.vocab_size != size:
            raise CheckpointError(
                f"{tokenizer_path(directory, tokenizer.language)} has {tokenizer.vocab_size} words but "
                f"{directory / CONFIG_FILES['model']} says {name}={size}: the files come from different runs")
    pad_ids = [tokenizer.pad_id for tokenizer in tokenizers]
    if any(pad_id != config.pad_id for pad_id in pad_ids):
        raise CheckpointError(f"{directory}: the tokenizers' [PAD] ids ({', '.join(map(str, pad_ids))}) "
                              f"differ from pad_id={config.pad_id} in {CONFIG_FILES['model']}")


def _read_entry(path, archive, key):
    """One array of checkpoint.npz. When its header asks for more memory than there is and more
    bytes than the file stores for it, its shape is damaged, not a model too large for the
    machine: a CheckpointError naming the entry and the shape."""
    try:
        return archive[key]
    except MemoryError as error:
        stored = archive.zip.getinfo(f"{key}.npy").file_size
        shape, dtype = getattr(error, "shape", None), getattr(error, "dtype", None)
        if shape is None or dtype is None or math.prod(shape) * dtype.itemsize <= stored:
            raise
        raise CheckpointError(f"{path}: the entry {key!r} declares the shape {shape} in its header, more than this "
                              f"machine's memory, but stores {stored:,} bytes: the header's shape is damaged; train "
                              f"again, or restore a copy") from None


def _read_archive(path):
    """(weights, optimizer state, loop state) from checkpoint.npz, or CheckpointError."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {key: _read_entry(path, archive, key) for key in archive.files}
        state = json.loads(str(arrays.pop("state")))
    except KeyError:
        raise CheckpointError(f"{path} has no 'state' entry: it was not written by numpy-transformer") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
        raise CheckpointError(f"{path} is damaged and cannot be read ({type(error).__name__}: {error}); "
                              f"train again, or restore a copy") from None
    weights = {key.removeprefix("model/"): value for key, value in arrays.items() if key.startswith("model/")}
    optimizer_state = {key.removeprefix("optimizer/"): value for key, value in arrays.items()
                       if key.startswith("optimizer/")}
    if not isinstance(state, dict) or "step" not in state:
        raise CheckpointError(f"{path}: the 'state' entry is not a training state (no 'step')")
    return weights, optimizer_state, state
