"""`DataConfig` and `TrainingConfig`: what a training run reads and how it optimises, validated
and saved as JSON beside the model's `TransformerConfig` (`data.json`, `training.json`).

    data = DataConfig(dataset="builtin", max_len=64)
    training = TrainingConfig(batch_size=64, steps=3000, schedule="warmup", warmup_steps=400)
    training.save("training.json");  TrainingConfig.load("training.json") == training

`resolve` makes the three configurations of a run from a preset (`presets.py`) and the flags
that override it.

`DataConfig` is the data description a checkpoint keeps: `numpy-transformer evaluate` rebuilds
the same train / validation / test split from it (same corpus, same seed). Its `task` says what
the run trains: translation (the default), a causal language model (lm) or a masked one (mlm).
"""
import dataclasses
import math

from autograd.checks import checked_integer, checked_number, is_number
from autograd.optim import warmup_schedule
from numpy_transformer.config import JsonConfig, TransformerConfig
from numpy_transformer.data import CORPUS_NAMES, DATASET_NAMES
from numpy_transformer.data.batching import POLICIES
from numpy_transformer.data.corpus import SUBSET_MODES
from numpy_transformer.data.files import parse_columns
from numpy_transformer.data.opus import PAIR_FORM, parse_pair
from numpy_transformer.data.texts import POLICIES as TEXT_POLICIES
from numpy_transformer.data.tokenizer import BYTES, KINDS as TOKENIZER_KINDS
from numpy_transformer.language_model import DecoderOnlyTransformer, EncoderOnlyTransformer
from numpy_transformer.memory_budget import check_fits, model_memory
from numpy_transformer.model import Transformer
from numpy_transformer.training.loss import TASKS
from numpy_transformer.training.mixed_precision import PRECISIONS
from numpy_transformer.training.presets import PRESETS, TASK_PRESETS, get_preset

SCHEDULES = ("warmup", "constant")


@dataclasses.dataclass(frozen=True)
class DataConfig(JsonConfig):
    """Which texts a run trains on, for which task, and how they become token ids.

    | field          | meaning                                                                  |
    |----------------|--------------------------------------------------------------------------|
    | task           | "translation" (pairs), "lm" (GPT: causal) or "mlm" (BERT: masked)        |
    | dataset        | "tatoeba" (real en-it in the package; "tatoeba-full": all of it),       |
    |                | "builtin" (synthetic),                                                   |
    |                | "opus_books", a file path, the prefix P of parallel text files P.en and |
    |                | P.it, a folder of train/validation/test files, or                       |
    |                | a Hugging Face dataset's name (pairs;                                    |
    |                | for the language models: texts); for the language models also .txt     |
    | dataset_config | that dataset's configuration (wikitext: "wikitext-2-raw-v1"), or None    |
    | validation_file| the official validation split of the file `dataset`, or None (carved     |
    |                | from training: 5 %)                                                      |
    | test_file      | its official test split, or None (carved from training: 5 %)             |
    | columns        | how a table's columns map to the languages: "en,de" (a CSV/TSV file      |
    |                | without a header, its columns in order) or "english=en,german=de" (a    |
    |                | header naming them otherwise); None: columns named by the languages     |
    | pair           | source-target languages, "en-it" (thesis §3.1)                           |
    | language       | a language model's language: the side of a parallel corpus it reads     |
    |                | (None: the pair's source), or the label of a text file's language       |
    | n_pairs        | size of the built-in corpus (the others ignore it: `resolve` refuses it) |
    | subset         | keep the first (or a random) N pairs before splitting; None: all         |
    | subset_mode    | "first" or "random"                                                      |
    | seed           | generates (built-in), subsets and splits the corpus 90/5/5 (carves the   |
    |                | held-out splits a corpus lacks)                                          |
    | max_len        | longest sentence in tokens, [SOS]/[EOS] included; the model's max_len    |
    | length_policy  | "drop" the longer pairs (texts), "truncate" them, or (texts) "split"     |
    | min_frequency  | a word (or, for BPE and WordPiece, a merge) enters the vocabulary when   |
    |                | seen this often in training (2; "unigram" ignores it)                    |
    | tokenizer      | "word" (the thesis's word-level vocabulary), or a subword kind: "bpe"    |
    |                | (byte-level BPE), "wordpiece" (BERT's) or "unigram" (SentencePiece's)    |
    | vocab_size     | the entries of each subword vocabulary ("word" ignores it)               |
    | shared_vocabulary | translation: one tokenizer trained on both sides, for source and     |
    |                | target (False: one per language)                                         |
    | fingerprint    | {"pairs": N, "sha256": …} of the corpus's pairs, set by the run that     |
    |                | trained on them: `evaluate` and `--resume` refuse other data             |
    """

    task: str = "translation"
    dataset: str = "builtin"
    dataset_config: str = None
    validation_file: str = None
    test_file: str = None
    columns: str = None
    pair: str = "en-it"
    language: str = None
    n_pairs: int = 20_000
    subset: int = None
    subset_mode: str = "first"
    seed: int = 0
    max_len: int = 64
    length_policy: str = "drop"
    min_frequency: int = 2
    tokenizer: str = "word"
    vocab_size: int = 8000
    shared_vocabulary: bool = False
    fingerprint: dict = None

    def validate(self):
        self.check_choice("task", TASKS)
        if not isinstance(self.dataset, str) or not self.dataset:
            self.fail(f"dataset must be {' or '.join(DATASET_NAMES)}, a file or folder path or a dataset's name, "
                      f"got {self.dataset!r}")
        for name in ("dataset_config", "validation_file", "test_file"):
            if getattr(self, name) is not None and not (isinstance(getattr(self, name), str) and getattr(self, name)):
                self.fail(f"{name} must be None or a non-empty string, got {getattr(self, name)!r}")
        parse_pair(self.pair)
        try:
            parse_columns(self.columns, parse_pair(self.pair))
        except ValueError as error:
            self.fail(str(error))
        if self.task == "translation" and self.language is not None:
            self.fail(f"language is a language model's (task lm or mlm); a translation run has a pair, got "
                      f"language={self.language!r}")
        if self.language is not None and not (isinstance(self.language, str) and PAIR_FORM.match(f"{self.language}-zz")):
            self.fail(f"language must be a two-letter code such as 'en', got {self.language!r}")
        self.check(checked_integer, "n_pairs", 1)
        self.check(checked_integer, "subset", 1, optional=True)
        self.check_choice("subset_mode", SUBSET_MODES)
        self.check(checked_integer, "seed", 0)
        self.check(checked_integer, "max_len", 3)
        self.check_choice("length_policy", POLICIES if self.task == "translation" else TEXT_POLICIES)
        self.check(checked_integer, "min_frequency", 1)
        self.check_choice("tokenizer", TOKENIZER_KINDS)
        self.check(checked_integer, "vocab_size", BYTES + 4)
        self.check_flag("shared_vocabulary")
        if self.shared_vocabulary and self.task != "translation":
            self.fail(f"shared_vocabulary is for translation (one vocabulary for both languages); a language model "
                      f"(task {self.task}) has one vocabulary already")
        if self.fingerprint is not None and not (isinstance(self.fingerprint, dict)
                                                 and set(self.fingerprint) == {"pairs", "sha256"}):
            self.fail(f"fingerprint must be None or {{\"pairs\": N, \"sha256\": …}}, got {self.fingerprint!r}")

    @property
    def languages(self):
        """The languages of the run's tokenizers: ('en', 'it') for a translation run on pair
        'en-it'; (language,) for a language model, by default the pair's source."""
        if self.task == "translation":
            return parse_pair(self.pair)
        return (self.language or parse_pair(self.pair)[0],)


@dataclasses.dataclass(frozen=True)
class TrainingConfig(JsonConfig):
    """How a run optimises (the training loop of `numpy_transformer.training.loop`).

    | field            | meaning                                                                 |
    |------------------|-------------------------------------------------------------------------|
    | batch_size       | sentence pairs per step                                                 |
    | steps            | optimizer steps in all; or None and `epochs` instead                    |
    | epochs           | passes over the training pairs (the thesis trains 20), when steps=None  |
    | schedule         | "warmup": d^-0.5 · factor · min(t^-0.5, t · warmup^-1.5) (Vaswani et    |
    |                  | al. 2017, §5.3); "constant": `lr` at every step (the thesis's runs)     |
    | lr               | the constant learning rate, in (0, 1]                                   |
    | warmup_steps     | the steps of the warm-up's linear rise                                  |
    | lr_factor        | the warm-up schedule's factor, in (0, 100]                              |
    | betas, eps       | Adam's (0.9, 0.98) and 1e-9, as the paper                               |
    | label_smoothing  | ε_ls of the cross-entropy, 0.1 as the paper                             |
    | clip_norm        | the largest global gradient norm (None: no clipping)                    |
    | seed             | initial weights, dropout masks and the order of the batches             |
    | eval_every       | steps between validation losses                                         |
    | log_every        | steps between lines of the metrics log                                  |
    | checkpoint_every | steps between checkpoints (one is also written at the end)              |
    | early_stop       | stop after N validations in a row without a lower validation loss       |
    |                  | (None: never)                                                           |
    | similar_lengths  | batch sentences of similar length together (less padding)               |
    | precision        | "float32", or "mixed": float16 forward and backward, float32 master     |
    |                  | weights, dynamic loss scaling (training/mixed_precision.py)             |
    """

    batch_size: int = 64
    steps: int = 3000
    epochs: float = None
    schedule: str = "warmup"
    lr: float = 1e-4
    warmup_steps: int = 4000
    lr_factor: float = 1.0
    betas: tuple = (0.9, 0.98)
    eps: float = 1e-9
    label_smoothing: float = 0.1
    clip_norm: float = 1.0
    seed: int = 0
    eval_every: int = 500
    log_every: int = 50
    checkpoint_every: int = 500
    early_stop: int = None
    similar_lengths: bool = True
    precision: str = "float32"

    def __post_init__(self):
        if isinstance(self.betas, list):          # JSON gives the pair back as a list
            object.__setattr__(self, "betas", tuple(self.betas))
        self.validate()

    def validate(self):
        self.check(checked_integer, "batch_size", 1)
        if (self.steps is None) == (self.epochs is None):
            self.fail(f"give either steps or epochs (the other None), got steps={self.steps!r}, "
                      f"epochs={self.epochs!r}")
        self.check(checked_integer, "steps", 1, optional=True)
        self.check(checked_number, "epochs", 0, low_open=True, optional=True)
        self.check_choice("schedule", SCHEDULES)
        self.check(checked_number, "lr", 0, 1, low_open=True)
        self.check(checked_integer, "warmup_steps", 1)
        self.check(checked_number, "lr_factor", 0, 100, low_open=True)
        if not (isinstance(self.betas, tuple) and len(self.betas) == 2
                and all(is_number(b) and 0 <= b < 1 for b in self.betas)):
            self.fail(f"betas must be a pair of numbers in [0, 1), got {self.betas!r}")
        self.check(checked_number, "eps", 0)
        self.check(checked_number, "label_smoothing", 0, 1, high_open=True)
        self.check(checked_number, "clip_norm", 0, low_open=True, optional=True)
        self.check(checked_integer, "seed", 0)
        for name in ("eval_every", "log_every", "checkpoint_every"):
            self.check(checked_integer, name, 1)
        self.check(checked_integer, "early_stop", 1, optional=True)
        self.check_flag("similar_lengths")
        self.check_choice("precision", PRECISIONS)

    def total_steps(self, batches_per_epoch):
        """The optimizer steps of the run: `steps`, or ⌈epochs · batches per epoch⌉."""
        if self.steps is not None:
            return self.steps
        return max(1, math.ceil(self.epochs * batches_per_epoch))

    def learning_rate(self, d_model):
        """What the optimizer takes as `lr`: a float, or the schedule t ↦ lr(t)."""
        if self.schedule == "constant":
            return float(self.lr)
        return warmup_schedule(d_model, self.warmup_steps, self.lr_factor)


def resolve(preset_name=None, model=None, training=None, data=None):
    """(model fields, TrainingConfig, DataConfig): the preset's values, then the overrides (dicts
    of field → value). No preset: the one of the task the overrides name (translation's
    "default"). The model fields are checked at once with a stand-in vocabulary, so a bad value
    fails before any data is loaded; the vocabulary sizes come later, from the tokenizers. A
    data field given that the run would ignore (n_pairs with a corpus other than the built-in
    one, min_frequency with the unigram tokenizer, …: `unused_data_fields`), a training field
    of the schedule it does not follow (`unused_training_fields`) or a model field of positions
    it does not have (`unused_model_fields`) is a ValueError naming it and why."""
    task = (data or {}).get("task")
    preset = get_preset(preset_name or TASK_PRESETS.get(task, "default"))
    if task is not None and task != preset.task:
        raise ValueError(f"the preset {preset_name!r} trains the task {preset.task!r}, not {task!r}: leave out "
                         f"--preset, or name a preset of {task!r} ({', '.join(n for n, p in PRESETS.items() if p.task == task)})")
    model_fields = {**preset.model, **(model or {})}
    check_fields_used("TransformerConfig", model or {}, unused_model_fields(model_fields))
    data_config = DataConfig(**{**preset.data, **(data or {})})
    check_fields_used("DataConfig", data or {}, unused_data_fields(data_config))
    training_config = TrainingConfig(**{**preset.training, **(training or {})})
    check_fields_used("TrainingConfig", training or {}, unused_training_fields(training_config))
    vocab_sizes = (4, 4) if data_config.task == "translation" else (7,)
    model_config(model_fields, vocab_sizes, pad_id=1, max_len=data_config.max_len, task=data_config.task)
    return model_fields, training_config, data_config


def unused_model_fields(fields):
    """field → why a model of these `fields` makes no use of it: the options of the positional
    encodings it does not have."""
    positional = fields.get("positional", TransformerConfig.positional)
    unused = {}
    if positional != "relative":
        unused.update(dict.fromkeys(("relative_buckets", "relative_max_distance"), (
            f"it shapes T5's relative position bias, and this model's positions are {positional!r}: leave it out, "
            f"or choose positional='relative'")))
    if positional != "sinusoidal":
        unused["positional_base"] = (f"it is the base of the sinusoidal encoding, and this model's positions are "
                                     f"{positional!r}: leave it out")
    return unused


def unused_data_fields(config):
    """field → why `config` makes no use of it: the fields its corpus or tokenizer ignore."""
    unused = {}
    if config.dataset != "builtin":
        unused["n_pairs"] = (f"it is the size of the built-in corpus (dataset 'builtin'), and the dataset "
                             f"{config.dataset!r} has its own size: leave it out (subset keeps fewer pairs)")
    if config.tokenizer == "unigram":
        unused["min_frequency"] = ("the unigram tokenizer keeps the vocab_size likeliest pieces however often they are "
                                   "seen (min_frequency is for the tokenizers word, bpe and wordpiece): leave it out")
    if config.tokenizer == "word":
        unused["vocab_size"] = ("a word-level vocabulary holds every word seen min_frequency times (vocab_size is for "
                                "the subword tokenizers bpe, wordpiece and unigram): leave it out")
    if config.dataset in CORPUS_NAMES:
        unused["dataset_config"] = (f"it names the configuration of a Hugging Face dataset, and the corpus "
                                    f"{config.dataset!r} is read by name (opus_books: the pair is its configuration): "
                                    f"leave it out")
    if config.subset is None:
        unused["subset_mode"] = "it says which pairs a subset keeps, and no subset is given: give subset too"
    return unused


def unused_training_fields(config):
    """field → why `config` makes no use of it: the fields of the schedule it does not follow."""
    if config.schedule == "constant":
        return {"lr_factor": f"it scales the warm-up schedule, and this run's learning rate is the constant "
                             f"lr={config.lr:g}: leave it out, or choose the warm-up schedule"}
    return {"lr": "it is the constant schedule's learning rate, and this run follows the warm-up schedule "
                  "(lr_factor scales it): leave it out, or choose the constant schedule"}


def check_fields_used(settings, given, unused):
    """A ValueError naming the first field of `given` (the caller's overrides of the class
    `settings`) in `unused` (field → why the run ignores it): a value silently dropped would
    train another run than the one asked for."""
    for field, value in given.items():
        if value is not None and field in unused:
            raise ValueError(f"{settings}: {field} ({value!r}) would be ignored: {unused[field]}")


# task → the TransformerConfig's constructor for its kind of model, and the model
MODELS = {"translation": (TransformerConfig, Transformer),
          "lm": (TransformerConfig.decoder_only, DecoderOnlyTransformer),
          "mlm": (TransformerConfig.encoder_only, EncoderOnlyTransformer)}


def model_config(model_fields, vocab_sizes, pad_id, max_len, task="translation"):
    """The TransformerConfig of a run: its fields, the vocabularies' sizes (source and target
    for translation, the one vocabulary of a language model), the [PAD] id, and the longest
    sentence as the positional table's length; its kind is the task's (MODELS)."""
    build = MODELS[task][0]
    try:
        config = build(*vocab_sizes, **{**model_fields, "pad_id": pad_id, "max_len": max_len})
    except TypeError as error:
        raise ValueError(f"TransformerConfig: {error}") from None
    check_fits_in_memory(config)
    return config


def check_fits_in_memory(config):
    """A ValueError when the model, its gradients and Adam's moments (`model_memory`) would take
    more than this machine's memory."""
    check_fits(model_memory(config), "the model, for its weights, gradients and Adam's moments,",
               "choose a smaller --d-model, --d-ff or number of layers")
