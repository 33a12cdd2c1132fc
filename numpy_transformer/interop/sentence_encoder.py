"""A sentence-embedding model in sentence-transformers' folder layout (all-MiniLM-L6-v2 and its
kin), loaded as this project's encoder with the recipe that turns its token vectors into one
vector per text (`sentence_embedding.EmbeddingRecipe`):

    model, tokenizer, recipe = load_sentence_encoder("path/to/all-MiniLM-L6-v2")   # or a Hub name
    vectors = embed(model, tokenizer, texts, recipe)

The encoder is a Hugging Face BERT folder (`pretrained.load_pretrained`: config.json,
model.safetensors, tokenizer.json), with or without its masked-LM head. sentence-transformers
adds, each optional:

| file                          | field                        | here                              |
|-------------------------------|------------------------------|-----------------------------------|
| modules.json                  | [Transformer, Pooling,       | the pipeline: the encoder, its    |
|                               | Normalize]: type, path       | pooling, normalised or not        |
| {Pooling's path}/config.json  | pooling_mode (a mode or a    | recipe.modes                      |
|                               | list), or the older booleans |                                   |
|                               | pooling_mode_cls_token, …    |                                   |
|                               | word_embedding_dimension     | must be the model's d_model       |
| sentence_bert_config.json     | max_seq_length, do_lower_case| recipe.max_length, lowercase      |
| tokenizer_config.json         | model_max_length             | the cut when max_seq_length is    |
|                               |                              | not given (at most the positions) |

A folder without modules.json is read as sentence-transformers reads a plain Hugging Face
model: mean pooling over the real tokens, not normalised. Every file is untrusted, as
config.json is (`pretrained.ConfigFields`): a field of the wrong type or value, a module this
project does not implement (a Dense projection, say: the embeddings would be wrong without
it), or a path outside the folder is a ValueError naming the file, the field and what to do.
"""
from pathlib import Path

from numpy_transformer.data.hub import model_folder
from numpy_transformer.data.hub_tokenizer import TOKENIZER_CONFIG_FILE, read_json
from numpy_transformer.interop.pretrained import CONFIG_FILE, load_pretrained, shown
from numpy_transformer.sentence_embedding import POOLING_MODES, EmbeddingRecipe

MODULES_FILE, SETTINGS_FILE = "modules.json", "sentence_bert_config.json"
PIPELINE = ("Transformer", "Pooling", "Normalize")       # the modules read here, in their order
# sentence-transformers' older form of pooling_mode, one boolean per mode, concatenated in this order
LEGACY_POOLING_FIELDS = {"pooling_mode_cls_token": "cls", "pooling_mode_max_tokens": "max",
                         "pooling_mode_mean_tokens": "mean", "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
                         "pooling_mode_weightedmean_tokens": "weightedmean", "pooling_mode_lasttoken": "lasttoken"}
POOLING_FIELDS = {"word_embedding_dimension", "embedding_dimension", "pooling_mode", "include_prompt",
                  *LEGACY_POOLING_FIELDS}


def load_sentence_encoder(name, cache_dir=None, dtype="float32"):
    """(model, tokenizer, recipe) of a sentence-transformers folder or Hub name: the
    `EncoderOnlyTransformer` (in eval mode), its `HubTokenizer`, its `EmbeddingRecipe`. A
    ValueError when the folder holds no encoder (a GPT-2) or a file of it is wrong."""
    folder = model_folder(name, cache_dir)
    model, tokenizer = load_pretrained(folder, dtype=dtype)
    if model.config.kind != "encoder-only":
        raise ValueError(f"{folder / CONFIG_FILE}: model_type gpt2 is a causal language model, not an encoder: "
                         f"embeddings are read from a BERT-architecture encoder (model_type bert)")
    tokenizer.require(("cls_token", "sep_token"), "embed")
    modes, normalize = pipeline(folder, model.config.d_model)
    max_length, lowercase = length_and_case(folder, model.config.max_len)
    return model, tokenizer, EmbeddingRecipe(modes, normalize, max_length, lowercase)


def pipeline(folder, d_model):
    """(pooling modes, normalize) from modules.json and the Pooling module's config.json; mean
    pooling, not normalised, when the folder has no modules.json."""
    path = folder / MODULES_FILE
    if not path.is_file():
        return ("mean",), False
    modules = read_json(path)
    if not isinstance(modules, list) or not all(isinstance(module, dict) for module in modules):
        raise ValueError(f"{path}: expected a JSON list of modules, each an object with \"type\" and \"path\", got "
                         f"{shown(modules)}")
    kinds = [module_kind(path, number, module) for number, module in enumerate(modules)]
    if kinds not in (list(PIPELINE[:2]), list(PIPELINE)):
        raise ValueError(f"{path}: the modules are {', '.join(kinds) or 'none'}; this project reads Transformer, "
                         f"Pooling and optionally Normalize, in that order")
    if modules[0].get("path", "") != "":
        raise ValueError(f"{path}: module 0 (Transformer) has path {shown(modules[0]['path'])}; this project reads "
                         f"the encoder from the folder itself (path \"\")")
    return pooling_modes(module_folder(folder, path, modules[1]) / CONFIG_FILE, d_model), len(kinds) == 3


def module_kind(path, number, module):
    """The class name of a modules.json entry's "type" (sentence_transformers.models.Pooling →
    Pooling), checked to be a sentence-transformers module this project reads."""
    kind = module.get("type")
    if not isinstance(kind, str) or not kind.startswith("sentence_transformers."):
        raise ValueError(f"{path}: module {number}: type must be a sentence-transformers module such as "
                         f"\"sentence_transformers.models.Pooling\", got {shown(kind)}")
    name = kind.rsplit(".", 1)[-1]
    if name not in PIPELINE:
        raise ValueError(f"{path}: module {number} is {kind}, which this project does not implement (it reads "
                         f"{', '.join(PIPELINE)}): embeddings without it would be wrong")
    return name


def module_folder(folder, path, module):
    """The folder a modules.json entry names: a relative path inside `folder`, never outside it."""
    relative = module.get("path")
    if not isinstance(relative, str) or Path(relative).is_absolute() or ".." in Path(relative).parts:
        raise ValueError(f"{path}: the Pooling module's path must be a folder inside {folder}, such as \"1_Pooling\", "
                         f"got {shown(relative)}")
    return folder / relative


def pooling_modes(path, d_model):
    """The pooling modes of a Pooling module's config.json: its pooling_mode (a mode or a list of
    modes), else the modes of its true pooling_mode_* booleans in sentence-transformers' order,
    else mean (what sentence-transformers does)."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file (modules.json names a Pooling module there)")
    config = read_json(path)
    if not isinstance(config, dict):
        raise ValueError(f"{path}: expected a JSON object of the pooling settings, got {shown(config)}")
    unknown = sorted(config.keys() - POOLING_FIELDS)
    if unknown:
        raise ValueError(f"{path}: unknown field {unknown[0]!r} (a Pooling module has {', '.join(sorted(POOLING_FIELDS))})")
    for name in (*LEGACY_POOLING_FIELDS, "include_prompt"):
        if name in config and not isinstance(config[name], bool):
            raise ValueError(f"{path}: {name} must be true or false, got {shown(config[name])}")
    for name in ("word_embedding_dimension", "embedding_dimension"):
        if name in config and (type(config[name]) is not int or config[name] != d_model):
            raise ValueError(f"{path}: {name} is {shown(config[name])}, but the model's vectors have {d_model} "
                             f"dimensions (hidden_size in {CONFIG_FILE}): the files do not belong together")
    if "pooling_mode" not in config:
        return tuple(mode for name, mode in LEGACY_POOLING_FIELDS.items() if config.get(name)) or ("mean",)
    given = config["pooling_mode"]
    modes = [given] if isinstance(given, str) else given
    if not isinstance(modes, list) or not modes or not all(mode in POOLING_MODES for mode in modes):
        raise ValueError(f"{path}: pooling_mode must be one of {', '.join(POOLING_MODES)} or a list of them, got "
                         f"{shown(given)}")
    return tuple(modes)


def length_and_case(folder, positions):
    """(the longest token sequence read, [CLS] and [SEP] included; whether texts are lowercased)
    as sentence-transformers sets them: max_seq_length of sentence_bert_config.json, else the
    tokenizer's model_max_length, at most the model's `positions`."""
    settings = folder / SETTINGS_FILE
    values = read_json(settings) if settings.is_file() else {}
    if not isinstance(values, dict):
        raise ValueError(f"{settings}: expected a JSON object such as {{\"max_seq_length\": 256}}, got {shown(values)}")
    lowercase = values.get("do_lower_case", False)
    if not isinstance(lowercase, bool):
        raise ValueError(f"{settings}: do_lower_case must be true or false, got {shown(lowercase)}")
    length = values.get("max_seq_length")
    if length is not None:
        if type(length) is not int or not 3 <= length <= positions:
            raise ValueError(f"{settings}: max_seq_length must be an integer from 3 to {positions} (the positions "
                             f"of max_position_embeddings in {CONFIG_FILE}), got {shown(length)}")
        return length, lowercase
    return min(tokenizer_max_length(folder / TOKENIZER_CONFIG_FILE), positions), lowercase


def tokenizer_max_length(path):
    """model_max_length of tokenizer_config.json (a number ≥ 3; often 1e30, no limit), or no limit."""
    values = read_json(path) if path.is_file() else {}          # an object: HubTokenizer.load has checked it
    length = values.get("model_max_length", float("inf"))
    if type(length) not in (int, float) or not length >= 3:
        raise ValueError(f"{path}: model_max_length must be a number of tokens (at least 3), got {shown(length)}")
    return int(min(length, 2**31))
