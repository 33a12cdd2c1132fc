"""`TransformerConfig`: every hyper-parameter of a model in one place, validated, saved as JSON
(`JsonConfig`, the base it shares with the training run's `DataConfig` and `TrainingConfig`).
One type for the three kinds of model: the encoder-decoder of the thesis (`model.Transformer`),
and the decoder-only (GPT) and encoder-only (BERT) models of `language_model.py`.

    config = TransformerConfig(src_vocab_size=1000, tgt_vocab_size=1000, d_model=64, n_heads=4,
                               d_ff=128, n_encoder_layers=2, n_decoder_layers=2)
    gpt = TransformerConfig.decoder_only(1000, d_model=64, n_heads=4, d_ff=256, n_layers=2)
    bert = TransformerConfig.encoder_only(1000, d_model=64, n_heads=4, d_ff=256, n_layers=2)
    config.save("model.json");  TransformerConfig.load("model.json") == config

The defaults are the thesis's (§1.2.2: d = 512, H = 8, m = 2048, L = 6; dropout 0.1, §1.2.1;
the sinusoidal encoding with N = 10000, eq. (1); LayerNorm of eq. (2) with ε = 1e-6, after each
residual sum; ReLU, §1.2.4; a projection P of its own, §1.2.5). `TransformerConfig.base` is the
original paper's base model, which also ties the embeddings; `decoder_only` and `encoder_only`
start from GPT-2's choices where the thesis has none (`ONE_STACK_DEFAULTS`).
"""
import dataclasses
import json
from pathlib import Path
from typing import Optional

from autograd.checks import checked_integer, checked_number, is_integer
from numpy_transformer.bounded_json import parse_json, read_json
from autograd.functional.layer_norm import VARIANTS as NORM_VARIANTS
from numpy_transformer.attention.variants import (ATTENTION_KINDS, CAUSAL_KINDS, DEFAULTS as ATTENTION_DEFAULTS,
                                                  MODEL_OPTIONS as ATTENTION_MODEL_OPTIONS, attention_options,
                                                  options_for)
from numpy_transformer.initialisation import SCHEMES as INIT_SCHEMES
from numpy_transformer.nn import ACTIVATIONS
from numpy_transformer.positional import KINDS as POSITIONAL_KINDS

NORM_PLACEMENTS = ("post", "pre")
DTYPES = ("float32", "float64")
MODEL_KINDS = ("encoder-decoder", "decoder-only", "encoder-only")
# the stack a one-stack kind leaves out (its layer count is 0), and the stack it keeps
UNUSED_STACK = {"decoder-only": "n_encoder_layers", "encoder-only": "n_decoder_layers"}
USED_STACK = {"decoder-only": "n_decoder_layers", "encoder-only": "n_encoder_layers"}
# GPT-2's choices where the thesis has none: learned positions, PyTorch's LayerNorm with ε = 1e-5,
# pre-norm, GELU, the head tied to the embedding (BERT normalises after the residual sum: pass
# norm_placement="post")
ONE_STACK_DEFAULTS = dict(positional="learned", norm_variant="torch", norm_eps=1e-5, norm_placement="pre",
                          activation="gelu", tie_embeddings=True)

_SIZES = ("src_vocab_size", "tgt_vocab_size", "d_model", "n_heads", "d_ff", "n_encoder_layers",
          "n_decoder_layers", "max_len")
_CHOICES = {"kind": MODEL_KINDS, "positional": POSITIONAL_KINDS, "norm_variant": NORM_VARIANTS,
            "norm_placement": NORM_PLACEMENTS, "activation": ACTIVATIONS, "attention": ATTENTION_KINDS,
            "init": INIT_SCHEMES, "dtype": DTYPES}
_FLAGS = ("tie_embeddings", "share_source_embedding", "scale_embeddings", "embedding_norm", "gradient_checkpointing")


class JsonConfig:
    """A frozen dataclass saved as JSON. Subclasses define `validate()`, run on construction."""

    def __post_init__(self):
        self.validate()

    def validate(self):
        raise NotImplementedError

    def to_json(self):
        return json.dumps(dataclasses.asdict(self), indent=2)

    @classmethod
    def from_json(cls, text, where=None):
        """The config written by `to_json`, parsed within bounds (`bounded_json`); errors start
        with `where` (the file, or the class's name). Unknown keys, missing keys of fields
        without a default, and integers outside 64 bits are a ValueError naming them."""
        return cls.from_values(parse_json(text, where or cls.__name__), where)

    @classmethod
    def from_values(cls, values, where=None):
        """The config of the JSON value `values` (see `from_json`)."""
        where = where or cls.__name__
        if not isinstance(values, dict):
            raise ValueError(f"{where}: a config must be a JSON object, got {type(values).__name__}")
        fields = {field.name: field for field in dataclasses.fields(cls)}
        unknown = sorted(set(values) - set(fields))
        if unknown:
            raise ValueError(f"{where}: unknown keys {unknown}; the fields are {list(fields)}")
        missing = [name for name, field in fields.items() if name not in values
                   and field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING]
        if missing:
            raise ValueError(f"{where}: missing keys {missing}")
        _check_integers_fit(values, where)
        return cls(**values)

    def save(self, path):
        Path(path).write_text(self.to_json() + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path):
        """The config saved in the file `path`, read within bounds (`bounded_json.read_json`)."""
        return cls.from_values(read_json(path), str(path))

    def fail(self, message):
        raise ValueError(f"{type(self).__name__}: {message}")

    def check(self, check, name, *bounds, optional=False, **options):
        """Run `check` (one of `autograd.checks`: checked_integer, checked_number) on the field
        `name`; its ValueError is raised again with this class's name in front. None passes
        when `optional`."""
        value = getattr(self, name)
        if optional and value is None:
            return
        try:
            check(name, value, *bounds, **options)
        except ValueError as error:
            self.fail(str(error))

    def check_choice(self, name, allowed):
        if getattr(self, name) not in allowed:
            self.fail(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")

    def check_flag(self, name):
        if not isinstance(getattr(self, name), bool):
            self.fail(f"{name} must be true or false, got {getattr(self, name)!r}")


@dataclasses.dataclass(frozen=True)
class TransformerConfig(JsonConfig):
    """The hyper-parameters of a model: `kind` says which, the others how it is built.

    | kind              | model                                        | built by                      |
    |-------------------|----------------------------------------------|-------------------------------|
    | "encoder-decoder" | `model.Transformer`, Figure 2 of the thesis  | TransformerConfig(l_s, l_t, …)|
    | "decoder-only"    | `language_model.DecoderOnlyTransformer`, GPT | TransformerConfig.decoder_only|
    | "encoder-only"    | `language_model.EncoderOnlyTransformer`, BERT| TransformerConfig.encoder_only|

    A one-stack model (decoder-only, encoder-only) reads and predicts one vocabulary
    (src_vocab_size = tgt_vocab_size, its `vocab_size`), has one stack of blocks (its `n_layers`:
    n_decoder_layers for the decoder-only, n_encoder_layers for the encoder-only, the other 0),
    and its blocks' self-attention is `attention` (decoder_attention stays None).

    | field                    | meaning                                                   | thesis      |
    |--------------------------|-----------------------------------------------------------|-------------|
    | src_vocab_size           | l of the source language (the vocabulary read)            | §1.2        |
    | tgt_vocab_size           | l of the target language (the logits' width)              | §1.2.5      |
    | d_model                  | d, the width of every token vector                        | §1.2, 512   |
    | n_heads                  | H; each head has d_k = d_model / n_heads                  | eq. (3), 8  |
    | d_ff                     | m, the hidden width of the feed-forward network           | §1.2.4      |
    | n_encoder_layers         | L, the blocks f_θ of the encoder (0: decoder-only)        | §1.2.2, 6   |
    | n_decoder_layers         | the blocks of the decoder (0: encoder-only)               | §1.2.5      |
    | dropout                  | p of every dropout: embeddings + positions, sub-layer     | §1.2.1, 0.1 |
    |                          | outputs, attention weights, the FFN's hidden layer        |             |
    | max_len                  | the longest sequence (rows of the positional table), 512  | §1.2.1      |
    | positional               | "sinusoidal" (eq. (1)), "learned", or "relative" (T5's    | §1.2.1      |
    |                          | bias on the self-attention scores, full attention only)   |             |
    | positional_base          | N of eq. (1)                                              | 10000       |
    | relative_buckets         | T5's buckets of relative positions per stack (32)         |             |
    | relative_max_distance    | the distance where the last bucket starts (128)           |             |
    | norm_variant             | "thesis" (σ + ε, eq. (2)) or "torch" (√(σ² + ε))          | eq. (2)     |
    | norm_eps                 | ε                                                         | 1e-6        |
    | norm_placement           | "post" (LayerNorm(x + f(x)), the thesis) or "pre"         | §1.2.2      |
    | activation               | "relu" (the thesis), "gelu", "gelu_tanh" (GPT-2's tanh    | §1.2.4      |
    |                          | form of GELU) or "swiglu"                                 |             |
    | attention                | the encoder's self-attention: "full" or a variant of      | eq. (5),    |
    |                          | chapter 2 (numpy_transformer.attention.variants)          | §2.1        |
    | decoder_attention        | the decoder's masked self-attention, a causal-capable     | eq. (10)    |
    |                          | kind; None: the same as `attention`                       |             |
    | attention_options        | the variants' options, e.g. {"window": 8}; each must be   |             |
    |                          | taken by one of the two kinds (cross-attention is "full") |             |
    | memory_slots             | m learned key/value slots appended to the keys and values | notes       |
    |                          | of every attention layer, cross-attention included: K =   |             |
    |                          | [Z W_k; M_k] (attention.memory_slots); 0: none; only      |             |
    |                          | with "full" attention                                     |             |
    | tie_embeddings           | the projection P is the target embedding transposed       | §1.2.5      |
    | share_source_embedding   | one embedding for both languages (one vocabulary)         |             |
    | pad_id                   | the padding token of both vocabularies (masked as a key); | eq. (10)    |
    |                          | None for a vocabulary without one (GPT-2's)               |             |
    | scale_embeddings         | √d · X Wᴱ (True, §1.2), or X Wᴱ alone (GPT-2, BERT)      | §1.2        |
    | init                     | the initial weights: "xavier" (the notes' rules),         | notes       |
    |                          | "xavier_uniform" or "torch" (numpy_transformer/           |             |
    |                          | initialisation.py gives each rule and its variance)       |             |
    | embedding_norm           | a LayerNorm of X Wᴱ + P before dropout (BERT's)           |             |
    | gradient_checkpointing   | recompute the layers' activations in backward, ⌈√L⌉       | notes       |
    |                          | segments of ⌈√L⌉ layers per stack (autograd.checkpoint)   |             |
    | dtype                    | "float32" (training) or "float64" (gradient checks)       |             |
    | kind                     | "encoder-decoder", "decoder-only" or "encoder-only"       | notes       |

    The config is frozen; `dataclasses.replace(config, d_model=256)` gives a validated copy.
    """

    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 512
    n_heads: int = 8
    d_ff: int = 2048
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    dropout: float = 0.1
    max_len: int = 512
    positional: str = "sinusoidal"
    positional_base: float = 10000.0
    relative_buckets: int = 32
    relative_max_distance: int = 128
    norm_variant: str = "thesis"
    norm_eps: float = 1e-6
    norm_placement: str = "post"
    activation: str = "relu"
    attention: str = "full"
    decoder_attention: Optional[str] = None
    attention_options: dict = dataclasses.field(default_factory=dict, hash=False)
    memory_slots: int = 0
    tie_embeddings: bool = False
    share_source_embedding: bool = False
    pad_id: int = 0
    scale_embeddings: bool = True
    embedding_norm: bool = False
    init: str = "xavier"
    gradient_checkpointing: bool = False
    dtype: str = "float32"
    kind: str = "encoder-decoder"

    def __post_init__(self):
        # a copy with lists for tuples, as JSON gives them back (so the round trip is equal)
        options = {name: list(value) if isinstance(value, tuple) else value
                   for name, value in dict(self.attention_options).items()}
        object.__setattr__(self, "attention_options", options)
        self.validate()

    @property
    def position_limit(self):
        """The longest sequence the model can read, [SOS] and [EOS] included, or None for any
        length. Sinusoidal positions are defined for every t (eq. (1)) and T5's relative bias for
        every distance, so they extend past max_len; a learned P has max_len rows, and Linformer's
        E and F (eq. (17)) max_len columns, so those models read max_len positions at most."""
        kinds = (self.attention, self.decoder_self_attention)
        fixed = self.positional == "learned" or any("max_len" in ATTENTION_DEFAULTS[kind] for kind in kinds)
        return self.max_len if fixed else None

    @property
    def decoder_self_attention(self):
        """The kind of the decoder's masked self-attention: decoder_attention, or `attention`
        (always `attention` in a one-stack model, whose decoder_attention is None)."""
        return self.attention if self.decoder_attention is None else self.decoder_attention

    @classmethod
    def base(cls, src_vocab_size, tgt_vocab_size, **overrides):
        """The base model of Vaswani et al. (2017), Table 3: d_model 512, 8 heads, d_ff 2048,
        6 + 6 layers, dropout 0.1, post-norm, ReLU, sinusoidal positions, and the target
        embedding tied to the projection (§3.4 of the paper). The paper also shares the source
        embedding, with one vocabulary for both languages: pass share_source_embedding=True."""
        paper = dict(d_model=512, n_heads=8, d_ff=2048, n_encoder_layers=6, n_decoder_layers=6,
                     dropout=0.1, tie_embeddings=True)
        return cls(src_vocab_size, tgt_vocab_size, **{**paper, **overrides})

    @classmethod
    def decoder_only(cls, vocab_size, n_layers=6, **overrides):
        """A GPT: `n_layers` causal blocks over one vocabulary of `vocab_size` tokens, with
        GPT-2's choices (ONE_STACK_DEFAULTS) unless `overrides` (any other field) say otherwise."""
        return cls._one_stack("decoder-only", vocab_size, n_layers, overrides)

    @classmethod
    def encoder_only(cls, vocab_size, n_layers=6, **overrides):
        """A BERT: `n_layers` bidirectional blocks over one vocabulary of `vocab_size` tokens,
        with the defaults of `decoder_only` (BERT itself is post-norm: norm_placement="post")."""
        return cls._one_stack("encoder-only", vocab_size, n_layers, overrides)

    @classmethod
    def _one_stack(cls, kind, vocab_size, n_layers, overrides):
        fixed = sorted(set(overrides) & {"kind", "src_vocab_size", "tgt_vocab_size", *USED_STACK.values()})
        if fixed:
            raise TypeError(f"TransformerConfig.{kind.replace('-', '_')} sets {fixed} itself: give vocab_size and "
                            f"n_layers")
        layers = {UNUSED_STACK[kind]: 0, USED_STACK[kind]: n_layers}
        return cls(vocab_size, vocab_size, **{**ONE_STACK_DEFAULTS, **overrides, **layers, "kind": kind})

    @classmethod
    def from_json(cls, text, where=None):
        """The config written by `to_json`, or by the LanguageModelConfig of numpy-transformer 0.1
        (keys vocab_size, n_layers, causal, and no src_vocab_size): a decoder-only model when
        causal (its default), else an encoder-only one, its missing keys taking the defaults of
        `decoder_only`."""
        return super().from_json(text, where)

    @classmethod
    def from_values(cls, values, where=None):
        """The config of the JSON value `values`, in either form `from_json` reads."""
        if isinstance(values, dict) and "vocab_size" in values and "src_vocab_size" not in values:
            _check_integers_fit(values, where or cls.__name__)
            return cls.from_language_model_fields(**values)
        return super().from_values(values, where)

    @classmethod
    def from_language_model_fields(cls, vocab_size, n_layers=6, causal=True, **fields):
        """The configuration that numpy-transformer 0.1's LanguageModelConfig(vocab_size, n_layers,
        causal, **fields) described: `decoder_only` when causal, else `encoder_only`."""
        shared = {field.name for field in dataclasses.fields(cls)} - {
            "kind", "src_vocab_size", "tgt_vocab_size", *USED_STACK.values()}
        unknown = sorted(set(fields) - shared)
        if unknown:
            raise ValueError(f"TransformerConfig: unknown keys {unknown} in a LanguageModelConfig (the 0.1 form, "
                             f"with vocab_size, n_layers and causal)")
        if not isinstance(causal, bool):
            raise ValueError(f"TransformerConfig: causal must be true or false, got {causal!r}")
        return (cls.decoder_only if causal else cls.encoder_only)(vocab_size, n_layers, **fields)

    @property
    def d_k(self):
        """The width of one head, d_model / n_heads (the thesis's k)."""
        return self.d_model // self.n_heads

    @property
    def vocab_size(self):
        """The one vocabulary of a decoder-only or encoder-only model (read and predicted)."""
        self._one_stack_only("vocab_size", "src_vocab_size and tgt_vocab_size")
        return self.src_vocab_size

    @property
    def n_layers(self):
        """The blocks of a decoder-only or encoder-only model's one stack."""
        self._one_stack_only("n_layers", "n_encoder_layers and n_decoder_layers")
        return getattr(self, USED_STACK[self.kind])

    @property
    def causal(self):
        """True for the decoder-only model (GPT), False for the encoder-only one (BERT)."""
        self._one_stack_only("causal", "an encoder and a causal decoder")
        return self.kind == "decoder-only"

    def _one_stack_only(self, name, instead):
        if self.kind == "encoder-decoder":
            raise AttributeError(f"{name} is a property of the one-stack kinds (decoder-only, encoder-only); "
                                 f"an encoder-decoder TransformerConfig has {instead}")

    def validate(self):
        """Raise a ValueError naming the first field whose value cannot build a model."""
        for name in _SIZES:
            self.check(checked_integer, name, 0 if name == UNUSED_STACK.get(self.kind) else 1)
        for name, allowed in _CHOICES.items():
            self.check_choice(name, allowed)
        for name in _FLAGS:
            self.check_flag(name)
        self.check(checked_number, "dropout", 0, 1, high_open=True)
        self.check(checked_number, "norm_eps", 0, low_open=True)
        self.check(checked_number, "positional_base", 0, low_open=True)
        self.check(checked_integer, "relative_buckets", 2)
        self.check(checked_integer, "relative_max_distance", self.relative_buckets // 2 + 1)
        self.check(checked_integer, "memory_slots", 0)
        self._check_one_stack()
        self._check_attention()
        self._check_sizes_fit()

    def _check_one_stack(self):
        """What a decoder-only or encoder-only model needs of the fields it shares with the
        encoder-decoder (the class docstring)."""
        if self.kind == "encoder-decoder":
            return
        built_by = f"TransformerConfig.{self.kind.replace('-', '_')}(vocab_size, n_layers, …)"
        if self.src_vocab_size != self.tgt_vocab_size:
            self.fail(f"kind={self.kind!r} reads and predicts one vocabulary: src_vocab_size={self.src_vocab_size} "
                      f"and tgt_vocab_size={self.tgt_vocab_size} must be equal ({built_by} sets both)")
        unused = UNUSED_STACK[self.kind]
        if getattr(self, unused) != 0:
            self.fail(f"kind={self.kind!r} has one stack, of {USED_STACK[self.kind]} blocks: {unused} must be 0, "
                      f"got {getattr(self, unused)} ({built_by} sets both)")
        if self.decoder_attention is not None:
            self.fail(f"kind={self.kind!r}: the blocks' self-attention is `attention`, and decoder_attention must "
                      f"be None, got {self.decoder_attention!r}; set attention instead")
        if self.share_source_embedding:
            self.fail(f"kind={self.kind!r} has one embedding already: share_source_embedding must be false")

    def _check_attention(self):
        if self.decoder_attention is not None and self.decoder_attention not in ATTENTION_KINDS:
            self.fail(f"decoder_attention must be None or one of {ATTENTION_KINDS}, got {self.decoder_attention!r}")
        if self.kind == "decoder-only" and self.attention not in CAUSAL_KINDS:
            self.fail(f"attention must be a causal-capable kind, one of {CAUSAL_KINDS}, got {self.attention!r} "
                      f"(the blocks of kind='decoder-only' are causal)")
        if self.kind == "encoder-decoder" and self.decoder_self_attention not in CAUSAL_KINDS:
            self.fail(f"the decoder's self-attention must be causal, and attention {self.decoder_self_attention!r} "
                  f"is not; the causal-capable kinds are {CAUSAL_KINDS}: set decoder_attention to one of them")
        if not isinstance(self.attention_options, dict):
            self.fail(f"attention_options must be a dict, got {type(self.attention_options).__name__}")
        kinds = (self.attention, self.decoder_self_attention)
        for name in self.attention_options:
            if name in ATTENTION_MODEL_OPTIONS or not any(name in ATTENTION_DEFAULTS[kind] for kind in kinds):
                self.fail(f"attention_options: {name!r} is not an option of attention {kinds[0]!r} or decoder "
                      f"attention {kinds[1]!r} (the model sets causal and max_len itself)")
        for kind in kinds:
            try:
                attention_options(kind, options_for(kind, self.attention_options))
            except ValueError as error:
                self.fail(str(error))
        if self.positional == "relative" and (self.attention, self.decoder_self_attention) != ("full", "full"):
            self.fail(f"positional='relative' adds T5's bias to full attention's scores; attention "
                      f"{self.attention!r} and decoder attention {self.decoder_self_attention!r} must both be 'full'")
        if self.memory_slots and (self.attention, self.decoder_self_attention) != ("full", "full"):
            self.fail(f"memory_slots={self.memory_slots} joins the slots to full attention's scores; attention "
                      f"{self.attention!r} and decoder attention {self.decoder_self_attention!r} must both be 'full'")
        for name in ("window", "n_features", "k_proj"):
            if self.attention_options.get(name, 0) > 4 * self.max_len:
                self.fail(f"attention option {name}={self.attention_options[name]} is more than 4 × max_len="
                          f"{self.max_len}: a sequence has at most max_len tokens")

    def _check_sizes_fit(self):
        if self.d_model % self.n_heads:
            self.fail(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads} "
                  f"(each head has d_k = d_model / n_heads)")
        if self.positional == "sinusoidal" and self.d_model % 2:
            self.fail(f"d_model={self.d_model} must be even for the sinusoidal positional encoding "
                  f"(its entries come in sin/cos pairs, eq. (1))")
        vocabulary = min(self.src_vocab_size, self.tgt_vocab_size)
        if self.pad_id is not None and not (is_integer(self.pad_id) and 0 <= self.pad_id < vocabulary):
            self.fail(f"pad_id must be an id of both vocabularies, in [0, {vocabulary}), or None, got {self.pad_id!r}")
        if self.share_source_embedding and self.src_vocab_size != self.tgt_vocab_size:
            self.fail(f"share_source_embedding needs one vocabulary for both languages, got "
                  f"src_vocab_size={self.src_vocab_size} and tgt_vocab_size={self.tgt_vocab_size}")


def _check_integers_fit(values, where):
    """A ValueError naming the first field of `values` (a JSON object, its nested objects and
    lists included) holding an integer outside 64 bits: no size, count or seed is that large,
    and NumPy could not hold it."""
    stack = [(name, value) for name, value in values.items()]
    while stack:
        name, value = stack.pop()
        if is_integer(value) and not -2**63 <= value < 2**63:
            raise ValueError(f"{where}: {name} must be an integer of 64 bits (below 2**63 in size), got {value!r}")
        if isinstance(value, dict):
            stack.extend((f"{name}.{key}", inner) for key, inner in value.items())
        elif isinstance(value, list):
            stack.extend((f"{name}[{k}]", inner) for k, inner in enumerate(value))


def check_model_kind(model_name, config, kind):
    """A TypeError unless `config` is a TransformerConfig of `kind` (the model `model_name` builds)."""
    if not isinstance(config, TransformerConfig) or config.kind != kind:
        seen = f"kind {config.kind!r}" if isinstance(config, TransformerConfig) else type(config).__name__
        builder = "TransformerConfig(src_vocab_size, tgt_vocab_size, …)" if kind == "encoder-decoder" else \
            f"TransformerConfig.{kind.replace('-', '_')}(vocab_size, …)"
        raise TypeError(f"{model_name}: config must be a TransformerConfig of kind {kind!r} ({builder}), got {seen}")
