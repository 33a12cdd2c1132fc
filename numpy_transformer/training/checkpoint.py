"""Checkpoints: everything needed to translate with a trained model, or to continue its training
exactly where it stopped, in one folder.

    DIR/model.json            the TransformerConfig (of the kind the task trains: encoder-decoder,
                              decoder-only or encoder-only; a language model's run folder written
                              by numpy-transformer 0.1 holds a LanguageModelConfig, read as one)
    DIR/training.json         the TrainingConfig
    DIR/data.json             the DataConfig: which task, corpus, split and seed (to rebuild the splits)
    DIR/tokenizer_en.json     the tokenizers of both languages (a language model has one)
    DIR/tokenizer_it.json
    DIR/checkpoint.npz        the last weights ("model/<name>"), Adam's state ("optimizer/<key>"),
                              and the loop's position as JSON ("state": step, epoch, batch, random
                              states, the best validation loss so far and its step)
    DIR/checkpoint_best.npz   the weights of the lowest validation loss ("model/<name>"), and
                              "state": {"step", "validation_loss"} of those weights

Every file is written atomically (`numpy_transformer/training/atomic_files.py`): a crash during a write leaves the
previous version whole. `checkpoint.npz` is written last: a folder
without it holds no checkpoint, and the JSON files never change during a run, so every
`checkpoint.npz` found is consistent with the files beside it. `checkpoint_best.npz` is written
just before the `checkpoint.npz` whose state first names its step, so the best weights a
checkpoint names are on disk when it is.

`load_checkpoint(directory, weights="best")` loads the best weights into the model (the last
ones, which `Checkpoint.weights_line` notes, for a run folder without them: one of an older
version, or not validated yet); `weights="last"`, the default, the weights `--resume` continues.

Loading checks everything and turns any problem (a missing folder or file, a truncated archive,
bad JSON, weights that do not fit the configuration, a part of another run) into one
`CheckpointError` whose message says what is wrong and where.

Parts that belong together. The manifest of a run begun by this version
(`.numpy-transformer-run.json`, training/run_folder.py) records the run's id and the SHA-256
of the parts that never change while it trains (`run_parts`: model.json, data.json, the
tokenizers, and the weights' names and shapes); both archives' "state" records the run id.
Loading refuses a file whose SHA-256, or an archive whose run id, is not the manifest's: a
tokenizer of another run with the same vocabulary size, or a checkpoint of another run with the
same shapes, would otherwise load. A folder whose manifest records none (an older version's)
is not checked.
"""
import dataclasses
import functools
import hashlib
import json
import re
import zipfile
import zlib
from pathlib import Path

import numpy as np

from numpy_transformer.config import TransformerConfig
from numpy_transformer.bounded_json import parse_json, read_json
from numpy_transformer.data.tokenizer import WordTokenizer, tokenizer_path
from numpy_transformer.training.atomic_files import atomic_write, atomic_write_text
from numpy_transformer.training.bounded_archive import read_npz
from numpy_transformer.memory_budget import check_fits, model_memory
from numpy_transformer.training.run_folder import MANIFEST as RUN_MANIFEST, read_manifest_record
from numpy_transformer.training.settings import MODELS, DataConfig, TrainingConfig

ARCHIVE, BEST_ARCHIVE = "checkpoint.npz", "checkpoint_best.npz"
WEIGHTS = ("best", "last")      # which weights of a run folder a command loads
CONFIG_FILES = {"model": "model.json", "training": "training.json", "data": "data.json"}
CONFIG_CLASSES = {"training": TrainingConfig, "data": DataConfig, "model": TransformerConfig}
MAX_STATE_BYTES = 2**24         # the loop's position as JSON: random states, a few counters and losses
WEIGHTS_PART, MAX_PARTS = "weights", 16          # the manifest's fingerprint of the weights' names and shapes
HEX_ID, SHA256 = re.compile(r"[0-9a-f]{32}"), re.compile(r"[0-9a-f]{64}")
PART_NAME = re.compile(r"(model|data)\.json|tokenizer_[A-Za-z0-9_-]{1,32}\.json")


class CheckpointError(Exception):
    """A checkpoint folder that cannot be used; the message says which file and why."""


@dataclasses.dataclass
class Checkpoint:
    """What `load_checkpoint` reads: the configurations, the tokenizers (source and target, or a
    language model's one), the model with its weights loaded, Adam's state (a flat dict for
    `Optimizer.load_state_dict`) and the training loop's state (a dict, see
    `numpy_transformer.training.loop.TrainingState`). weights: whose weights the model holds,
    "last" or "best"; best: {"step", "validation_loss"} of checkpoint_best.npz when they are its."""
    directory: Path
    model_config: object
    training_config: TrainingConfig
    data_config: DataConfig
    tokenizers: tuple
    model: object
    optimizer_state: dict
    state: dict
    weights: str = "last"
    best: dict = None

    @property
    def step(self):
        """The last step trained (the one `--resume` continues from)."""
        return int(self.state["step"])

    @property
    def scored_step(self):
        """The step whose weights the model holds."""
        return self.best["step"] if self.weights == "best" else self.step

    def weights_line(self, asked="best"):
        """One line on the weights loaded, for `asked` weights: `model: runs/x, best validation
        loss 2.331 at step 500 (last: step 1500)`, or the last weights, with a note when the best
        were asked for and the folder has none."""
        if self.weights == "best":
            return (f"model: {self.directory}, best validation loss {self.best['validation_loss']:.3f} at step "
                    f"{self.best['step']} (last: step {self.step})")
        line = f"model: {self.directory}, last weights at step {self.step}"
        if asked == "best":
            return (f"{line} (note: no {BEST_ARCHIVE}, the weights of the best validation loss, in it: a run of an "
                    f"older version, or one not validated yet; the last weights are used)")
        if self.state.get("best_step") is not None:
            return f"{line} (best validation loss {self.state['best_loss']:.3f} at step {self.state['best_step']})"
        return line

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


def save_best_weights(directory, weights, step, validation_loss, run=None):
    """Write checkpoint_best.npz in `directory`: `weights` ({name: array}, a model's
    `state_dict()`) of `step`, whose validation loss was `validation_loss`; run: the run id of
    the folder's manifest, recorded in the state (None: none recorded)."""
    arrays = {f"model/{name}": array for name, array in weights.items()}
    state = {"step": step, "validation_loss": validation_loss, **({"run": run} if run is not None else {})}
    arrays["state"] = np.asarray(json.dumps(state))
    atomic_write(Path(directory) / BEST_ARCHIVE, lambda file: np.savez(file, **arrays))


def save_checkpoint(directory, model, optimizer, state, configs, tokenizers):
    """Write a checkpoint to `directory` (created if needed).

    configs: {"model": TransformerConfig, "training": TrainingConfig,
    "data": DataConfig}; tokenizers: (source, target) WordTokenizers, or a language model's one;
    state: a JSON-serialisable dict (the loop's position). The JSON files first, the archive
    last (see the module docstring)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write_text(directory / CONFIG_FILES["training"], configs["training"].to_json() + "\n")
    for name, text in part_texts(configs, tokenizers).items():
        atomic_write_text(directory / name, text)
    arrays = {f"model/{name}": array for name, array in model.state_dict().items()}
    arrays.update({f"optimizer/{key}": np.asarray(value) for key, value in optimizer.state_dict().items()})
    arrays["state"] = np.asarray(json.dumps(state))
    atomic_write(directory / ARCHIVE, lambda file: np.savez(file, **arrays))


def part_texts(configs, tokenizers):
    """{file name: text} of the parts of a run that never change while it trains, and that must
    belong together: model.json, data.json and the tokenizers (training.json changes on resuming)."""
    texts = {CONFIG_FILES[kind]: configs[kind].to_json() + "\n" for kind in ("model", "data")}
    texts.update({tokenizer_path(Path(), tokenizer.language).name: tokenizer.tokenizer.to_str()
                  for tokenizer in tokenizers})
    return texts


def run_parts(configs, tokenizers, model):
    """The fingerprints a new run records in its manifest: the SHA-256 of each of `part_texts`,
    and under "weights" that of the weights' names and shapes (`weights_fingerprint`)."""
    parts = {name: hashlib.sha256(text.encode("utf-8")).hexdigest()
             for name, text in part_texts(configs, tokenizers).items()}
    parts[WEIGHTS_PART] = weights_fingerprint({name: p.shape for name, p in model.named_parameters()})
    return parts


def weights_fingerprint(shapes):
    """The SHA-256 of a model's parameter names and shapes ({name: shape})."""
    listed = json.dumps(sorted([name, list(shape)] for name, shape in shapes.items()))
    return hashlib.sha256(listed.encode("utf-8")).hexdigest()


def load_checkpoint(directory, weights="last"):
    """Read and check the checkpoint in `directory` (a `Checkpoint`), or raise CheckpointError.
    weights: "last" (those of checkpoint.npz) or "best" (those of checkpoint_best.npz, the last
    ones when there is none).

    Nothing is allocated before it is bounded: the model of model.json must fit in this
    machine's memory (the estimate `train` makes, `model_memory`) before it is built, and every
    member of checkpoint.npz must have the shape the model expects (`bounded_archive`) before
    its data is read."""
    if weights not in WEIGHTS:
        raise ValueError(f"weights must be {' or '.join(WEIGHTS)}, got {weights!r}")
    directory = Path(directory)
    _check_complete(directory)
    run, parts = _recorded_parts(directory)
    configs = {kind: _read_config(directory, kind, config_class) for kind, config_class in CONFIG_CLASSES.items()}
    tokenizers = tuple(_read_tokenizer(directory, language) for language in configs["data"].languages)
    _check_vocabularies(directory, configs["model"], tokenizers)
    _check_fits_in_memory(directory / CONFIG_FILES["model"], configs["model"])
    try:
        model = MODELS[configs["data"].task][1](configs["model"], np.random.default_rng(configs["training"].seed))
    except TypeError as error:                  # a model.json of another kind than the task's
        raise CheckpointError(f"{directory / CONFIG_FILES['model']} does not describe a model of the task "
                              f"{configs['data'].task!r} of {directory / CONFIG_FILES['data']}: {error}") from None
    shapes = {name: parameter.shape for name, parameter in model.named_parameters()}
    last, optimizer_state, state = _read_archive(directory / ARCHIVE, shapes)
    _check_part_files(directory, parts, shapes)                 # each file whole, now: do they belong together?
    _check_same_run(directory / ARCHIVE, state, run)
    _check_finite(directory / ARCHIVE, last)
    best = _read_best(directory / BEST_ARCHIVE, shapes) if weights == "best" else None
    if best is not None:
        _check_same_run(directory / BEST_ARCHIVE, best[1], run)
    model.load_state_dict(last if best is None else best[0])
    return Checkpoint(directory, configs["model"], configs["training"], configs["data"], tokenizers, model,
                      optimizer_state, state, "last" if best is None else "best", None if best is None else best[1])


def _recorded_parts(directory):
    """(run id, {part: SHA-256}) that the manifest of `directory` records; (None, {}) for a run
    folder of an older version, which records none. A CheckpointError naming the field when
    they are not what a run writes."""
    record = read_manifest_record(directory)
    run, parts = record.get("run"), record.get("parts", {})
    manifest = directory / RUN_MANIFEST
    if run is not None and not (isinstance(run, str) and HEX_ID.fullmatch(run)):
        raise CheckpointError(f"{manifest}: its 'run' is not a run id ({str(run)[:40]!r}); restore the run folder's "
                              f"manifest, or train again")
    if not (isinstance(parts, dict) and len(parts) <= MAX_PARTS
            and all(isinstance(name, str) and (name == WEIGHTS_PART or PART_NAME.fullmatch(name))
                    and isinstance(digest, str) and SHA256.fullmatch(digest) for name, digest in parts.items())):
        raise CheckpointError(f"{manifest}: its 'parts' are not file names with their SHA-256; restore the run "
                              f"folder's manifest, or train again")
    return run, parts


def _check_part_files(directory, parts, shapes):
    """A CheckpointError naming the first file whose SHA-256 is not the one the manifest records,
    or model.json when the weights' names and shapes (`shapes`) are not those it records."""
    if WEIGHTS_PART in parts and parts[WEIGHTS_PART] != weights_fingerprint(shapes):
        raise CheckpointError(f"{directory / CONFIG_FILES['model']} describes weights of other names or shapes than "
                              f"those {RUN_MANIFEST} records for the run in {directory}: the files come from "
                              f"different runs; restore the run folder whole, or train again")
    check_digests(directory, {name: digest for name, digest in parts.items() if name != WEIGHTS_PART},
                  CheckpointError,
                  lambda path, name: f"{path} is missing, though {directory / RUN_MANIFEST} records it: the run folder "
                                     f"is incomplete; restore the file from a copy of this run, or train again",
                  lambda path, name: f"{path} does not belong to the run in {directory}: its SHA-256 differs from the "
                                     f"one {RUN_MANIFEST} records (changed, or copied from another run); restore "
                                     f"this run's own {name}, or train again")


def check_digests(folder, digests, error, missing, unlike):
    """Raise `error` at the first file of `folder` that is not as `digests` ({name: SHA-256})
    records: missing (or not a plain file), with the message `missing(path, name)`, or of another
    SHA-256, with `unlike(path, name)`."""
    for name, digest in digests.items():
        path = Path(folder) / name
        if not path.is_file() or path.is_symlink():
            raise error(missing(path, name))
        if file_sha256(path) != digest:
            raise error(unlike(path, name))


def _check_same_run(path, state, run):
    """A CheckpointError unless the archive `path`, whose state is `state`, was saved by the run
    whose id the manifest records (`run`; None for a run of an older version). The id is then
    taken out of `state`, which holds the loop's position (or the best weights' step and loss)."""
    saved = state.pop("run", None)
    if saved == run:
        return
    manifest = path.parent / RUN_MANIFEST
    if run is None:
        raise CheckpointError(f"{path} was saved by a run whose id {manifest} does not record (the manifest is "
                              f"missing or replaced): the folder's parts cannot be shown to belong together; restore "
                              f"the run folder whole, or train again")
    raise CheckpointError(f"{path} comes from another run than the files beside it (its run id is not the one "
                          f"{manifest} records): restore this run's own {path.name}, or train again")


def file_sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _read_best(path, shapes):
    """(weights, {"step", "validation_loss"}) of checkpoint_best.npz, None without one; a
    CheckpointError if it is damaged or does not fit the model."""
    if not path.is_file():
        return None
    weights, _, state = _read_archive(path, shapes)
    _check_finite(path, weights)
    loss = state.get("validation_loss")
    if not (isinstance(state["step"], int) and isinstance(loss, float) and np.isfinite(loss)):
        raise CheckpointError(f"{path}: its 'state' entry is not the step and validation loss of the best weights "
                              f"({state!r}); use the last weights with --weights last, or train again")
    return weights, state


def _check_fits_in_memory(path, config):
    try:
        check_fits(model_memory(config), f"{path}: the model it describes", "the file is damaged or comes from a "
                   "larger machine; restore a copy, or load it where it fits")
    except ValueError as error:
        raise CheckpointError(str(error)) from None


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
    if not (directory / ARCHIVE).is_file() and (directory / RUN_MANIFEST).is_file():
        raise CheckpointError(f"no checkpoint in {directory}: the run there stopped before its first checkpoint "
                              f"({ARCHIVE} is missing); start it again with the same numpy-transformer train command "
                              f"(--out {directory}, without --resume)")
    if not (directory / ARCHIVE).is_file():
        other = _other_output(directory)
        if other:
            raise CheckpointError(f"no checkpoint in {directory}: it holds {other}, not a training run, and train "
                                  f"does not write over it: evaluate and --resume read the run folder itself (the "
                                  f"folder train --out wrote); to train a new model, choose a new folder with --out")
        raise CheckpointError(f"no checkpoint in {directory}: {ARCHIVE} is missing (training has not saved one "
                              f"there; train with: numpy-transformer train --out {directory})")


OUTPUT_MANIFEST = ".numpy-transformer-output.json"       # output_folder's (which imports this module)
MODEL_FILES = ("model.safetensors", "config.json", "model.json")


def _other_output(directory):
    """What a folder without checkpoint.npz holds when it is another command's output or a model
    folder rather than a run ("the output of export (model.json, model.safetensors)"), or None."""
    try:
        record = read_json(directory / OUTPUT_MANIFEST)
    except (OSError, ValueError):
        record = None
    if isinstance(record, dict) and isinstance(record.get("command"), str) and isinstance(record.get("files"), dict):
        files = ", ".join(sorted(name for name in record["files"] if isinstance(name, str))[:4])
        return f"the output of {record['command']} ({files})"
    found = [name for name in MODEL_FILES if (directory / name).is_file()]
    if "model.safetensors" in found or "config.json" in found:
        return f"a model's files ({', '.join(found)}: an export, or a Hugging Face model folder)"
    return None


def _read_config(directory, kind, config_class):
    path = directory / CONFIG_FILES[kind]
    try:
        return config_class.load(path)
    except FileNotFoundError:
        raise CheckpointError(f"{path} is missing: the checkpoint in {directory} is incomplete") from None
    except (ValueError, TypeError) as error:   # json.JSONDecodeError is a ValueError
        raise CheckpointError(f"{path}: not a valid {kind} configuration ({str(error).removeprefix(f'{path}: ')})") \
            from None


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


def _read_archive(path, parameters):
    """(weights, optimizer state, loop state) from checkpoint.npz, or CheckpointError.

    parameters: the model's parameter shapes, {name: shape}: every "model/<name>" member must have
    the shape of <name>, and so must every optimizer member of a parameter (or be a number)."""
    try:
        arrays = read_npz(path, functools.partial(_check_member, path, parameters))
        state = parse_json(str(arrays.pop("state")), f"{path}: its 'state' entry", finite=False)
    except KeyError:
        raise CheckpointError(f"{path} has no 'state' entry: it was not written by numpy-transformer") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as error:
        raise CheckpointError(f"{path} is damaged and cannot be read ({type(error).__name__}: {error}); "
                              f"train again, or restore a copy") from None
    weights = {key.removeprefix("model/"): value for key, value in arrays.items() if key.startswith("model/")}
    missing = [name for name in parameters if name not in weights]
    if missing:
        raise _not_fitting(path, f"{len(missing)} of its parameters are missing ({', '.join(missing[:3])}"
                                 f"{', …' if len(missing) > 3 else ''})")
    optimizer_state = {key.removeprefix("optimizer/"): value for key, value in arrays.items()
                       if key.startswith("optimizer/")}
    if not isinstance(state, dict) or "step" not in state:
        raise CheckpointError(f"{path}: the 'state' entry is not a training state (no 'step')")
    return weights, optimizer_state, state


def _check_member(path, parameters, key, shape, dtype):
    """A CheckpointError unless the member `key` of checkpoint.npz, of `shape` and `dtype` as
    its header declares, is one the model of model.json expects (see `_read_archive`)."""
    kind, _, name = key.partition("/")
    if kind == "model" and name in parameters:
        expected, kinds = {parameters[name]}, "f"
    elif kind == "optimizer" and (name == "step" or name.rpartition(".")[0] in parameters):
        expected, kinds = {(), parameters.get(name.rpartition(".")[0], ())}, "fiub"
    elif key == "state":
        expected, kinds = {()}, "U"
        if dtype.itemsize > MAX_STATE_BYTES:
            raise CheckpointError(f"{path}: the training state declares {dtype.itemsize:,} bytes, more than the "
                                  f"{MAX_STATE_BYTES:,} a numpy-transformer state takes; restore a copy")
    else:
        expected, kinds = set(), ""
    if shape not in expected or dtype.kind not in kinds:
        wanted = f"expects {' or '.join(map(str, sorted(expected)))}" if expected else "has no such entry"
        raise _not_fitting(path, f"member {key!r} declares {dtype} {shape}, the model {wanted}")


def _not_fitting(path, detail):
    model_json = path.parent / CONFIG_FILES["model"]
    return CheckpointError(f"{path}: the weights do not fit the configuration in {model_json}: "
                           f"{detail}: the files come from different runs; restore a whole run folder")
