"""Hugging Face checkpoints of GPT-2 and BERT, loaded into this project's own models: a folder
holding `config.json` and `model.safetensors` (what `save_pretrained` writes, and what the Hub
serves for `gpt2`, `distilgpt2`, `bert-base-uncased` and models of the same formats) becomes a
`DecoderOnlyTransformer` or an `EncoderOnlyTransformer`. There is no second implementation:
GPT-2 is the decoder-only model with pre-norm, GELU's tanh form, learned positions, unscaled
embeddings and a tied head; BERT is the encoder-only model with post-norm, GELU, learned
positions, unscaled embeddings normalised by a LayerNorm (`embedding_norm`), and its MLM head,
or no head: a `BertModel` checkpoint (its weights named without `bert.`, no `cls.predictions`),
such as the sentence-embedding model all-MiniLM-L6-v2, loads as the encoder alone
(`EncoderOnlyTransformer(masked_lm_head=False)`; `sentence_encoder.py` adds its pooling).

    model = load_hugging_face("path/to/gpt2")     # model.safetensors read tensor by tensor
    model, tokenizer = load_pretrained("gpt2")    # a folder, or a Hub name (cached, or downloaded)

GPT-2 (`Conv1D` stores its weights as (in, out), the layout of `Linear` here):

| Hugging Face                              | here                                          |
|-------------------------------------------|-----------------------------------------------|
| wte.weight                                | stack.embedding.weight (and the tied head)    |
| wpe.weight                                | stack.positional.P                            |
| h.i.ln_1, h.i.ln_2                        | stack.layers.i.norm_1, norm_2 (γ, β)          |
| h.i.attn.c_attn (d, 3d)                   | self_attn.W_q, W_k, W_v: its three d columns  |
| h.i.attn.c_proj                           | self_attn.W_c                                 |
| h.i.mlp.c_fc, h.i.mlp.c_proj              | feed_forward.W_1, W_2                         |
| ln_f                                      | stack.final_norm                              |

BERT (`nn.Linear` stores (out, in): transposed here):

| Hugging Face (prefix `bert.`)                   | here                                    |
|-------------------------------------------------|-----------------------------------------|
| embeddings.word_embeddings                      | stack.embedding.weight                  |
| embeddings.position_embeddings + the first row  | stack.positional.P (one segment: the    |
| of embeddings.token_type_embeddings             | type-0 embedding added to every position)|
| embeddings.LayerNorm                            | stack.embedding_norm                    |
| encoder.layer.i.attention.self.query/key/value  | stack.layers.i.self_attn.W_q, W_k, W_v  |
| encoder.layer.i.attention.output.dense          | self_attn.W_c                           |
| encoder.layer.i.attention.output.LayerNorm      | norm_1                                  |
| encoder.layer.i.intermediate.dense, output.dense| feed_forward.W_1, W_2                   |
| encoder.layer.i.output.LayerNorm                | norm_2                                  |
| cls.predictions.transform.dense, .LayerNorm     | head_transform, head_norm               |
| cls.predictions.bias                            | head_bias                               |

A `BertModel` checkpoint names its weights without the prefix `bert.` and has no `cls.*`; its
`pooler.dense` (the [CLS] pooler of next-sentence prediction) and the buffer
`embeddings.position_ids` (0, 1, 2, … as integers) are not weights of this model and are left
unread, as `transformers` leaves them. Every input here is one segment (token type 0), so BERT's
token-type embedding is folded into the positions. GPT-2 has no padding token (`pad_id` None,
unless its config names one).
"""
import json
import re
from collections import Counter
from pathlib import Path

import numpy as np
from safetensors import SafetensorError, safe_open

from autograd.checks import checked_integer, checked_number
from numpy_transformer.data.hub import model_folder
from numpy_transformer.bounded_json import parse_json
from numpy_transformer.data.hub_tokenizer import HubTokenizer, read_json
from numpy_transformer.config import TransformerConfig
from numpy_transformer.language_model import DecoderOnlyTransformer, EncoderOnlyTransformer
from numpy_transformer.training.output_folder import check_whole
from numpy_transformer.parameter_count import analytic_parameter_count
from numpy_transformer.memory_budget import check_fits

ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu", "relu": "relu"}
CONFIG_FILE, WEIGHTS_FILE = "config.json", "model.safetensors"


def load_pretrained(name, cache_dir=None, dtype="float32"):
    """(model, tokenizer) of a Hugging Face model folder, or of a Hub name (`data.hub.model_folder`)."""
    folder = model_folder(name, cache_dir)
    check_whole(folder, "export")                 # an export's files belong together, before any is read
    tokenizer = HubTokenizer.load(folder)
    model = load_hugging_face(folder, dtype)
    check_tokenizer_fits(tokenizer, model.config.vocab_size, folder / CONFIG_FILE)
    return model, tokenizer


def check_tokenizer_fits(tokenizer, vocab_size, config_path):
    """A ValueError when the tokenizer has an id beyond the model's vocabulary: the two files do
    not belong together. A tokenizer with fewer ids is accepted, as `transformers` accepts it:
    vocabularies are often padded (to a multiple of 8 or 64) past their tokenizer; the ids
    without a token decode to nothing and are never fill-mask candidates."""
    vocabulary = tokenizer.tokenizer.get_vocab(with_added_tokens=True)
    token, last = max(vocabulary.items(), key=lambda pair: pair[1], default=(None, -1))
    if last >= vocab_size:
        raise ValueError(f"{tokenizer.path}: the token {token!r} has id {last}, beyond the model's vocabulary of "
                         f"{vocab_size} ids (vocab_size in {config_path}): the two files do not belong together")


RUNS_FOLDER = "runs"      # where train (runs/default) and the examples (runs/examples/NAME) write by default


def names_pretrained(name):
    """True when `name` means a Hugging Face model: a folder holding its config.json, or no path
    here but the shape of a Hub repository's name (`looks_like_hub_name`)."""
    path = Path(name)
    return (path / CONFIG_FILE).is_file() or (not path.exists() and looks_like_hub_name(name))


def looks_like_hub_name(name):
    """Whether `name` has the shape of a Hub repository's name, `gpt2` or `owner/name`, as
    huggingface_hub's `validate_repo_id` accepts it (letters, digits, `-`, `_` and `.`, at most
    one slash, no leading or trailing `.` or `-`, no `--` or `..`, at most 96 characters a part:
    so no `./`, `../`, `/` or `~` in front), and whose owner is no folder here nor `runs/`, this
    project's folder of runs: `runs/default` before training, or `data/run` beside a folder
    `data/`, is a local folder that is missing, never a Hub model."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    name = str(name)
    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    owner = name.partition("/")[0] if "/" in name else None
    return owner is None or (owner != RUNS_FOLDER and not Path(owner).exists())


def load_hugging_face(folder, dtype="float32"):
    """The GPT-2 or BERT model saved in `folder` (config.json, model.safetensors), in eval mode.
    The weights are read one tensor at a time and put into the model at once, so loading holds
    the model and one tensor of the file, not a second copy of every weight. A folder `export
    --to hf` wrote is first checked whole (`output_folder.check_whole`): its config, tokenizer and
    weights belong together."""
    folder = Path(folder)
    check_whole(folder, "export")
    hf_config = read_config(folder)
    kind = hf_config.get("model_type")
    if kind not in ("gpt2", "bert"):
        raise ValueError(f"{folder / CONFIG_FILE}: model_type {shown(kind)} is not one this project loads (gpt2, bert)")
    config = (gpt2_config if kind == "gpt2" else bert_config)(hf_config, dtype)
    weights = SafetensorsWeights(folder / WEIGHTS_FILE, hugging_face_name, UNREAD_TENSORS[kind])
    if kind == "gpt2":
        model = DecoderOnlyTransformer(config, np.random.default_rng(0))
    else:                                                    # BertForMaskedLM, or BertModel: no head
        head = any(name.startswith("cls.") for name in weights.entries)
        model = EncoderOnlyTransformer(config, np.random.default_rng(0), masked_lm_head=head)
    check_layer_count(weights, LAYER_NAME[kind], config.n_layers)
    pairs = gpt2_state(weights, config) if kind == "gpt2" else bert_state(weights, config, model.masked_lm_head)
    fill_parameters(model, pairs, weights.path)
    return model.eval()


LAYER_NAME = {"gpt2": re.compile(r"h\.(\d+)\."), "bert": re.compile(r"bert\.encoder\.layer\.(\d+)\.")}
# the buffers a checkpoint may hold beside its weights, left unread (`transformers` no longer saves them)
UNREAD_TENSORS = {"gpt2": (), "bert": ("bert.embeddings.position_ids",)}
BERT_MODEL_PARTS = ("embeddings.", "encoder.", "pooler.")     # a BertModel's names, without `bert.`


def check_layer_count(weights, layer_name, n_layers):
    """A ValueError naming a tensor of a layer beyond the n_layers of config.json: the weights
    of a deeper model, which would load as its first layers without a word."""
    for name in weights.entries:
        layer = layer_name.match(name)
        if layer and int(layer[1]) >= n_layers:
            raise ValueError(f"{weights.path}: the tensor {weights.file_names[name]} is of layer {layer[1]}, but "
                             f"config.json's model has {n_layers} layer(s): use the config.json saved with these "
                             f"weights")


def hugging_face_name(name):
    """A checkpoint's weight name without the `transformer.` prefix, a `BertModel`'s names under
    `bert.` as `BertForMaskedLM` has them, BERT's old LayerNorm names (gamma, beta) as weight
    and bias."""
    name = name.removeprefix("transformer.")
    name = "bert." + name if name.startswith(BERT_MODEL_PARTS) else name
    for old, new in ((".gamma", ".weight"), (".beta", ".bias")):
        name = name[:-len(old)] + new if name.endswith(old) else name
    return name


def fill_parameters(model, pairs, source="the weights"):
    """Copy each (name, array) of `pairs` into the model's parameter of that name as it comes;
    a ValueError, beginning with `source` (where the pairs come from), for a name or shape the
    model lacks, or a parameter no pair filled."""
    parameters = dict(model.named_parameters())
    for name, array in pairs:
        if name not in parameters or parameters[name].shape != array.shape:
            raise ValueError(f"{source}: {name} {array.shape} does not fit the model (expected "
                             f"{parameters[name].shape if name in parameters else 'no such parameter'})")
        target = parameters.pop(name)
        target.data = np.ascontiguousarray(array, dtype=target.dtype)     # a copy only of views and casts
    if parameters:
        raise ValueError(f"{source}: no weight for {', '.join(parameters)}")


def read_config(folder):
    """config.json of `folder` as `ConfigFields`: a JSON object, else a ValueError naming the file."""
    path = folder / CONFIG_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file (a Hugging Face model folder holds {CONFIG_FILE} and "
                                f"{WEIGHTS_FILE})")
    return ConfigFields(path, read_json(path))


REQUIRED = object()                   # the default of a field that config.json must have
# the bounds of the sizes config.json gives: far above every published model (GPT-3 has 96 layers
# of width 12288, the largest vocabularies about 256,000 tokens), far below what would hang the
# loader; the memory the weights need is checked too (`built_config`)
MAX_LAYERS, MAX_WIDTH, MAX_VOCABULARY, MAX_POSITIONS = 1024, 2**17, 2**22, 2**20


class ConfigFields:
    """The fields of a Hugging Face config.json, each checked as it is read: a ValueError naming
    the file, the field, what it must be and what it is. A field absent takes the default given,
    when there is one (`transformers`' default); n_inner and pad_token_id may also be null."""

    def __init__(self, path, values):
        if not isinstance(values, dict):
            raise ValueError(f"{path}: expected a JSON object of the model's settings, got {shown(values)}")
        self.path, self.values = path, values

    def get(self, name, default=REQUIRED):
        if name in self.values:
            return self.values[name]
        if default is REQUIRED:
            raise ValueError(f"{self.path}: no field {name!r}, which this project needs to build the model")
        return default

    def checked(self, check, name, default, *bounds, **options):
        """The field `name` passed through `check` (one of `autograd.checks`), its error with the file in front."""
        value = self.get(name, default)
        try:
            return check(name, value, *bounds, **options)
        except ValueError as error:
            raise ValueError(f"{self.path}: {shown_error(error)}") from None

    def integer(self, name, low, high, default=REQUIRED):
        return self.checked(checked_integer, name, default, low, high)

    def number(self, name, low, high, default, **options):
        return self.checked(checked_number, name, default, low, high, **options)

    def choice(self, name, allowed, default):
        value = self.get(name, default)
        if not isinstance(value, str) or value not in allowed:
            raise ValueError(f"{self.path}: {name} must be one of {', '.join(allowed)}, got {shown(value)}")
        return value

    def require(self, name, supported):
        """A field whose only value this project implements is `supported`, its default in `transformers`."""
        value = self.get(name, supported)
        if type(value) is not type(supported) or value != supported:
            raise ValueError(f"{self.path}: {name}={shown(value)} is an option this project does not implement "
                             f"(it loads {name}={json.dumps(supported)} only)")

    def optional_id(self, name, vocab_size, default=None):
        """A token id below vocab_size, or None (null)."""
        value = self.get(name, default)
        return None if value is None else self.integer(name, 0, vocab_size - 1, default)


def shown(value, limit=60):
    """repr of a value read from a file, cut to `limit` characters (a line, not a screenful)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def shown_error(error):
    """An error of `autograd.checks` ("… got VALUE") with VALUE cut as `shown` cuts it."""
    text, cut = str(error), str(error).rfind(", got ")
    return text if cut < 0 or len(text) - cut <= 70 else text[:cut + 66] + "…"


class SafetensorsWeights:
    """model.safetensors as a mapping name → array, each tensor read from the file when asked
    for (no PyTorch; the file is opened for each tensor and closed again, so what was read is
    freed once copied into the model). The format: an 8-byte little-endian header length, a
    JSON header giving each tensor's dtype, shape and byte range, then the data. rename: what
    the names become (`hugging_face_name` for the checkpoints of the Hub); unread: the names
    (renamed) of buffers left out, whatever their dtype.

    The file comes from elsewhere, so nothing in it is trusted. The `safetensors` library checks,
    on every opening, that the header is a JSON object of complete entries, and that the byte
    ranges lie in the file, follow one another without gap or overlap and each hold shape ×
    dtype bytes. Here: no name twice (the library keeps the last), before or after `rename`;
    only the dtypes read here; every tensor read finite. Each failure is one ValueError naming
    the file."""

    DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "BF16": np.uint16}

    def __init__(self, path, rename=lambda name: name, unread=()):
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such file (only the safetensors format is read, not "
                                    f"pytorch_model.bin)")
        self.path = path
        with self._open():                                # the library's checks first
            self.data_start, header = _header_without_repeated_names(path)
        header.pop("__metadata__", None)
        header = {name: entry for name, entry in header.items() if rename(name) not in unread}
        unknown = sorted({entry["dtype"] for entry in header.values()} - set(self.DTYPES))
        if unknown:
            raise ValueError(f"{path}: tensors of dtype {', '.join(unknown)}, which this project does not read")
        self.entries, self.file_names = {}, {}
        for name, entry in header.items():
            if rename(name) in self.entries:
                raise ValueError(f"{path}: the tensors {self.file_names[rename(name)]} and {name} are the same "
                                 f"weight {rename(name)}: keep one of them")
            self.entries[rename(name)], self.file_names[rename(name)] = entry, name

    def __getitem__(self, name):
        if name not in self.entries:
            raise ValueError(f"{self.path}: no tensor {name} (a checkpoint of another model or format)")
        with self._open() as file:
            array = self._bfloat16(name) if self.entries[name]["dtype"] == "BF16" else \
                file.get_tensor(self.file_names[name])
        if not np.isfinite(array).all():
            raise ValueError(f"{self.path}: the tensor {self.file_names[name]} holds NaN or infinite values (the "
                             f"model that saved it had diverged, or the file is damaged): use another checkpoint")
        return array

    def shaped(self, name, shape):
        """The tensor `name`, which the model's configuration says is of `shape` (checked before
        it is split or indexed); a ValueError naming it otherwise."""
        if name in self.entries and tuple(self.entries[name]["shape"]) != shape:
            raise ValueError(f"{self.path}: the tensor {self.file_names[name]} has shape "
                             f"{tuple(self.entries[name]['shape'])}; config.json asks for {shape}")
        return self[name]

    def _open(self):
        """The file opened by the library, which checks its header; a ValueError naming the file."""
        try:
            return safe_open(str(self.path), framework="numpy")
        except SafetensorError as error:
            message = " ".join(str(error).split())
            raise ValueError(f"{self.path}: not a valid safetensors file ({message}): the file is damaged or was "
                             f"not written in this format; download or export it again") from None

    def _bfloat16(self, name):
        """A bfloat16 tensor (NumPy has no such dtype) as float32: the upper half of a float32's
        bits, read from the byte range the library has checked."""
        entry = self.entries[name]
        begin, end = entry["data_offsets"]
        bits = np.fromfile(self.path, "<u2", (end - begin) // 2, offset=self.data_start + begin)
        return (bits.astype(np.uint32) << 16).view(np.float32).reshape(entry["shape"])


def _header_without_repeated_names(path):
    """(where the data starts, {name: entry}) of a safetensors file the library has accepted; a
    ValueError when a name appears twice in one object (JSON readers keep the last)."""
    def unique(pairs):
        repeated = sorted(name for name, count in Counter(name for name, _ in pairs).items() if count > 1)
        if repeated:
            raise ValueError(f"{path}: the header names {', '.join(repeated)} more than once: the file is damaged "
                             f"or was not written by a safetensors writer; download or export it again")
        return dict(pairs)

    with open(path, "rb") as file:
        length = int.from_bytes(file.read(8), "little")
        return 8 + length, parse_json(file.read(length), f"{path}: its header", object_pairs_hook=unique,
                                      remedy="download or export it again")


# the options of GPT-2 and BERT this project implements one way only, the way `transformers` does by default
GPT2_FIXED = {"scale_attn_weights": True, "tie_word_embeddings": True, "scale_attn_by_inverse_layer_idx": False,
              "reorder_and_upcast_attn": False, "add_cross_attention": False}
BERT_FIXED = {"position_embedding_type": "absolute", "tie_word_embeddings": True, "is_decoder": False,
              "add_cross_attention": False}


def gpt2_config(hf, dtype):
    """The TransformerConfig of GPT-2's config.json (`ConfigFields`), every field checked."""
    for name, value in GPT2_FIXED.items():
        hf.require(name, value)
    d = hf.integer("n_embd", 1, MAX_WIDTH)
    vocab_size = hf.integer("vocab_size", 1, MAX_VOCABULARY)
    d_ff = hf.integer("n_inner", 1, MAX_WIDTH) if hf.get("n_inner", None) is not None else 4 * d
    return built_config(
        hf, "n_embd", "n_head", TransformerConfig.decoder_only, vocab_size, d_model=d,
        n_heads=hf.integer("n_head", 1, d), d_ff=d_ff, n_layers=hf.integer("n_layer", 1, MAX_LAYERS),
        dropout=hf.number("resid_pdrop", 0, 1, 0.1, high_open=True),
        max_len=hf.integer("n_positions", 1, MAX_POSITIONS), positional="learned", norm_variant="torch",
        norm_placement="pre", norm_eps=hf.number("layer_norm_epsilon", 0, None, 1e-5, low_open=True),
        activation=ACTIVATIONS[hf.choice("activation_function", ACTIVATIONS, "gelu_new")], tie_embeddings=True,
        scale_embeddings=False, pad_id=hf.optional_id("pad_token_id", vocab_size), dtype=dtype)


def bert_config(hf, dtype):
    """The TransformerConfig of BERT's config.json (`ConfigFields`), every field checked."""
    for name, value in BERT_FIXED.items():
        hf.require(name, value)
    d = hf.integer("hidden_size", 1, MAX_WIDTH)
    vocab_size = hf.integer("vocab_size", 1, MAX_VOCABULARY)
    return built_config(
        hf, "hidden_size", "num_attention_heads", TransformerConfig.encoder_only, vocab_size, d_model=d,
        n_heads=hf.integer("num_attention_heads", 1, d), d_ff=hf.integer("intermediate_size", 1, MAX_WIDTH),
        n_layers=hf.integer("num_hidden_layers", 1, MAX_LAYERS),
        dropout=hf.number("hidden_dropout_prob", 0, 1, 0.1, high_open=True),
        max_len=hf.integer("max_position_embeddings", 1, MAX_POSITIONS), positional="learned", norm_variant="torch",
        norm_placement="post", norm_eps=hf.number("layer_norm_eps", 0, None, 1e-12, low_open=True),
        activation=ACTIVATIONS[hf.choice("hidden_act", ACTIVATIONS, "gelu")], tie_embeddings=True,
        scale_embeddings=False, embedding_norm=True, pad_id=hf.optional_id("pad_token_id", vocab_size, 0),
        dtype=dtype)


def built_config(hf, width, heads, build, vocab_size, **fields):
    """build(vocab_size, **fields) (`TransformerConfig.decoder_only` or `encoder_only`) once the
    heads divide the width; a ValueError naming config.json's fields (`width`, `heads`) otherwise,
    or when the weights would not fit in this machine's memory."""
    if fields["d_model"] % fields["n_heads"]:
        raise ValueError(f"{hf.path}: {width}={fields['d_model']} is not divisible by {heads}={fields['n_heads']} "
                         f"(each head has {width} / {heads} dimensions)")
    try:
        config = build(vocab_size, **fields)
    except ValueError as error:
        raise ValueError(f"{hf.path}: {error}") from None
    check_fits(analytic_parameter_count(config)["total"] * np.dtype(config.dtype).itemsize,
               f"{hf.path}: the model it describes, for its weights,", "load a smaller model, or use a machine with more memory")
    return config


def gpt2_state(weights, config):
    """(name here, array) pairs from GPT-2's weights (the first table of the module docstring),
    each tensor of the file read once."""
    d = config.d_model
    yield "stack.embedding.weight", weights["wte.weight"]
    yield "stack.positional.P", weights["wpe.weight"]
    yield from _norm("stack.final_norm", weights, "ln_f")
    for i in range(config.n_layers):
        hf, here = f"h.{i}", f"stack.layers.{i}"
        columns = np.split(weights.shaped(f"{hf}.attn.c_attn.weight", (d, 3 * d)), 3, axis=1)
        biases = np.split(weights.shaped(f"{hf}.attn.c_attn.bias", (3 * d,)), 3)
        for name, weight, bias in zip(("W_q", "W_k", "W_v"), columns, biases):
            yield f"{here}.self_attn.{name}.weight", weight
            yield f"{here}.self_attn.{name}.bias", bias
        yield from _linear(f"{here}.self_attn.W_c", weights, f"{hf}.attn.c_proj")
        yield from _linear(f"{here}.feed_forward.W_1", weights, f"{hf}.mlp.c_fc")
        yield from _linear(f"{here}.feed_forward.W_2", weights, f"{hf}.mlp.c_proj")
        yield from _norm(f"{here}.norm_1", weights, f"{hf}.ln_1")
        yield from _norm(f"{here}.norm_2", weights, f"{hf}.ln_2")


def bert_state(weights, config, masked_lm_head=True):
    """(name here, array) pairs from BERT's weights (the second table of the module docstring),
    the head's only when `masked_lm_head`."""
    embeddings = "bert.embeddings"
    yield "stack.embedding.weight", weights[f"{embeddings}.word_embeddings.weight"]
    positions = weights.shaped(f"{embeddings}.position_embeddings.weight", (config.max_len, config.d_model))
    token_types = weights[f"{embeddings}.token_type_embeddings.weight"]
    if token_types.ndim != 2 or token_types.shape[0] == 0 or token_types.shape[1] != config.d_model:
        raise ValueError(f"{weights.path}: the tensor {embeddings}.token_type_embeddings.weight has shape "
                         f"{token_types.shape}; config.json asks for (type_vocab_size, {config.d_model})")
    yield "stack.positional.P", np.add(positions, token_types[0], dtype=np.float64)
    yield from _norm("stack.embedding_norm", weights, f"{embeddings}.LayerNorm")
    if masked_lm_head:
        yield from _linear("head_transform", weights, "cls.predictions.transform.dense", transposed=True)
        yield from _norm("head_norm", weights, "cls.predictions.transform.LayerNorm")
        yield "head_bias", weights["cls.predictions.bias"]
    for i in range(config.n_layers):
        hf, here = f"bert.encoder.layer.{i}", f"stack.layers.{i}"
        for name, part in (("W_q", "query"), ("W_k", "key"), ("W_v", "value")):
            yield from _linear(f"{here}.self_attn.{name}", weights, f"{hf}.attention.self.{part}", transposed=True)
        yield from _linear(f"{here}.self_attn.W_c", weights, f"{hf}.attention.output.dense", transposed=True)
        yield from _norm(f"{here}.norm_1", weights, f"{hf}.attention.output.LayerNorm")
        yield from _linear(f"{here}.feed_forward.W_1", weights, f"{hf}.intermediate.dense", transposed=True)
        yield from _linear(f"{here}.feed_forward.W_2", weights, f"{hf}.output.dense", transposed=True)
        yield from _norm(f"{here}.norm_2", weights, f"{hf}.output.LayerNorm")


def _linear(here, weights, hf, transposed=False):
    weight = weights[f"{hf}.weight"]
    return [(f"{here}.weight", weight.T if transposed else weight), (f"{here}.bias", weights[f"{hf}.bias"])]


def _norm(here, weights, hf):
    return [(f"{here}.gamma", weights[f"{hf}.weight"]), (f"{here}.beta", weights[f"{hf}.bias"])]
