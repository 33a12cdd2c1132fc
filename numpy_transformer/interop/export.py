"""A model trained here, handed to PyTorch and back: its weights under the names and in the
layouts of the `torch.nn` models of `torch_reference.py`; and a decoder-only model in Hugging
Face GPT-2 format (`save_gpt2`), which `transformers` loads and `pretrained.py` reads back.

    arrays = torch_state(model)                   # {torch name: array}
    save_torch(model, "runs/exported/")           # runs/exported/model.safetensors + model.json
    model = load_torch("runs/exported/")          # the identity: the same weights back

| here (ours: Linear weights (in, out))          | PyTorch (nn.Linear weights (out, in))              |
|------------------------------------------------|----------------------------------------------------|
| encoder.embedding, decoder.embedding           | src_embedding, tgt_embedding                        |
| encoder.positional.P, decoder.positional.P     | src_P, tgt_P (learned positions only)              |
| {stack}.layers.i.self_attn.W_q, W_k, W_v       | transformer.{stack}.layers.i.self_attn.in_proj_weight (rows q; k; v), in_proj_bias |
| {stack}.layers.i.self_attn.W_c                 | ….self_attn.out_proj                               |
| decoder.layers.i.cross_attn.*                  | transformer.decoder.layers.i.multihead_attn.*      |
| {stack}.layers.i.feed_forward.W_1, W_2         | ….linear1, linear2                                 |
| {stack}.layers.i.norm_k (γ, β)                 | ….normk (weight, bias)                             |
| {stack}.final_norm (pre-norm)                  | transformer.{stack}.norm                           |
| projection (untied)                            | projection                                         |
| decoder-only: stack.embedding, stack.positional.P, stack.layers.i.*, stack.final_norm, head | embedding, positions, stack.layers.i.*, stack.norm, head |

The files: `model.safetensors` (the torch names, read by `safetensors.torch.load_file`) and
`model.json` (the model's configuration, from which `torch_reference` builds the module).

Both exports are written as a whole (`training/output_folder.py`): into a fresh folder beside
the target, renamed into place in one step, with a manifest of every file's SHA-256. A folder
of the user's files, a run folder and the empty path are refused; `load_torch` and
`pretrained.load_hugging_face` check that the files of an export belong together.
"""
import json
from pathlib import Path

import numpy as np

from numpy_transformer.config import TransformerConfig
from numpy_transformer.data.tokenizer import CLS, EOS, MASK, PAD, SEP, SOS, UNK
from numpy_transformer.training.atomic_files import atomic_write, atomic_write_text
from numpy_transformer.training.output_folder import OutputFolder, check_whole
from numpy_transformer.language_model import DecoderOnlyTransformer
from numpy_transformer.model import Transformer
from numpy_transformer.interop.pretrained import SafetensorsWeights, fill_parameters
from numpy_transformer.interop.torch_reference import check_exportable

WEIGHTS_FILE, CONFIG_FILE = "model.safetensors", "model.json"
SAFETENSORS_DTYPES = {"float32": "F32", "float64": "F64"}


def torch_state(model):
    """{torch name: array} of a Transformer or a DecoderOnlyTransformer (the module docstring)."""
    check_exportable(model.config)
    state = model.state_dict()
    arrays = {}
    for torch_name, names, layout in layout_table(model):
        values = [state[name] for name in names]
        if layout == "stacked":                                  # W_q, W_k, W_v → in_proj (3d, d) or (3d,)
            arrays[torch_name] = np.concatenate([v.T if v.ndim == 2 else v for v in values])
        else:
            arrays[torch_name] = values[0].T if layout == "transposed" else values[0]
    if model.config.share_source_embedding:                           # PyTorch lists a shared module twice
        arrays["tgt_embedding.weight"] = arrays["src_embedding.weight"]
    return arrays


def ours_from_torch(model, arrays):
    """(our name, array) pairs from a torch state (`torch_state`'s inverse); arrays: a mapping
    torch name → array (a dict, or `SafetensorsWeights`, which reads each tensor when asked)."""
    for torch_name, names, layout in layout_table(model):
        value = arrays[torch_name]
        if layout == "stacked":
            for name, part in zip(names, np.split(value, 3)):
                yield name, part.T if part.ndim == 2 else part
        else:
            yield names[0], value.T if layout == "transposed" else value


def layout_table(model):
    """(torch name, [our names], layout) for every parameter: layout "same", "transposed"
    (a Linear's weight) or "stacked" (W_q, W_k, W_v packed into in_proj)."""
    parameters = dict(model.named_parameters())
    table, packed = [], set()
    for name, parameter in parameters.items():
        if name in packed:
            continue
        torch_name = _torch_name(name, isinstance(model, DecoderOnlyTransformer))
        if ".W_q." in name:
            group = [name.replace(".W_q.", f".{m}.") for m in ("W_q", "W_k", "W_v")]
            packed.update(group)
            table.append((torch_name, group, "stacked"))
        else:
            linear = name.endswith(".weight") and parameter.ndim == 2 and "embedding" not in name
            table.append((torch_name, [name], "transposed" if linear else "same"))
    return table


RENAMES = [(".W_q.weight", ".in_proj_weight"), (".W_q.bias", ".in_proj_bias"), (".W_c.", ".out_proj."),
           (".cross_attn.", ".multihead_attn."), (".feed_forward.W_1.", ".linear1."),
           (".feed_forward.W_2.", ".linear2."), (".gamma", ".weight"), (".beta", ".bias")]


def _torch_name(name, decoder_only):
    for k in (1, 2, 3):
        name = name.replace(f".norm_{k}.", f".norm{k}.")
    for old, new in RENAMES:
        name = name.replace(old, new)
    if decoder_only:
        return {"stack.embedding.weight": "embedding.weight", "stack.positional.P": "positions"}.get(
            name, name.replace("stack.final_norm.", "stack.norm."))
    named = {"encoder.embedding.weight": "src_embedding.weight", "decoder.embedding.weight": "tgt_embedding.weight",
             "encoder.positional.P": "src_P", "decoder.positional.P": "tgt_P"}
    if name in named or name.startswith("projection."):
        return named.get(name, name)
    return "transformer." + name.replace(".final_norm.", ".norm.")


def save_torch(model, folder):
    """Write `torch_state(model)` to folder/model.safetensors and the configuration to
    folder/model.json, the folder as a whole (`OutputFolder`)."""
    arrays = torch_state(model)                                # refused before any folder exists
    with OutputFolder(folder, "export") as staging:
        write_safetensors(staging / WEIGHTS_FILE, arrays)
        atomic_write_text(staging / CONFIG_FILE, model.config.to_json() + "\n")


def load_torch(folder):
    """The model `save_torch` (or PyTorch, under the same names) wrote to `folder`; a ValueError
    if the folder's files do not belong together (`check_whole`)."""
    folder = Path(folder)
    check_whole(folder, "export")
    config = TransformerConfig.load(folder / CONFIG_FILE)     # also a decoder-only model.json of 0.1
    model = (Transformer if config.kind == "encoder-decoder" else DecoderOnlyTransformer)(config,
                                                                                         np.random.default_rng(0))
    weights = SafetensorsWeights(folder / WEIGHTS_FILE)
    fill_parameters(model, ours_from_torch(model, weights), weights.path)      # one tensor at a time
    return model


def write_safetensors(path, arrays):
    """The safetensors format: an 8-byte little-endian header length, the JSON header (dtype,
    shape and byte range of each tensor), then the tensors' bytes, row-major."""
    header, offset = {}, 0
    for name, array in arrays.items():
        size = array.size * array.itemsize
        header[name] = {"dtype": SAFETENSORS_DTYPES[array.dtype.name], "shape": list(array.shape),
                        "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header).encode("utf-8")
    text += b" " * (-len(text) % 8)                               # the data starts 8-byte aligned

    def write(file):
        file.write(len(text).to_bytes(8, "little") + text)
        for array in arrays.values():                              # one tensor at a time, little-endian
            file.write(np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes())

    atomic_write(path, write)


def save_gpt2(model, tokenizer, folder):
    """Write a decoder-only model in Hugging Face GPT-2 format: config.json, model.safetensors,
    tokenizer.json (whose post-processor puts [SOS] first, as the model was trained to read) and
    special_tokens_map.json, the folder as a whole (`OutputFolder`). GPT-2 adds no √d to its
    embeddings: with scale_embeddings the embedding is stored times √d and the final LayerNorm's
    γ and β divided by √d, which gives the same logits, the head being tied. Pre-norm, full attention and a tied head only."""
    check_gpt2_exportable(model.config)
    config, state = model.config, model.state_dict()
    scale = np.float32(np.sqrt(config.d_model)) if config.scale_embeddings else np.float32(1)
    arrays = {"transformer.wte.weight": state["stack.embedding.weight"] * scale,
              "transformer.wpe.weight": model.stack.positional.P.data[:config.max_len],
              "transformer.ln_f.weight": state["stack.final_norm.gamma"] / scale,
              "transformer.ln_f.bias": state["stack.final_norm.beta"] / scale}
    for i in range(config.n_layers):
        here, hf = f"stack.layers.{i}", f"transformer.h.{i}"
        attention = [f"{here}.self_attn.{name}" for name in ("W_q", "W_k", "W_v")]
        arrays.update({
            f"{hf}.ln_1.weight": state[f"{here}.norm_1.gamma"], f"{hf}.ln_1.bias": state[f"{here}.norm_1.beta"],
            f"{hf}.attn.c_attn.weight": np.concatenate([state[f"{name}.weight"] for name in attention], axis=1),
            f"{hf}.attn.c_attn.bias": np.concatenate([state[f"{name}.bias"] for name in attention]),
            f"{hf}.attn.c_proj.weight": state[f"{here}.self_attn.W_c.weight"],
            f"{hf}.attn.c_proj.bias": state[f"{here}.self_attn.W_c.bias"],
            f"{hf}.ln_2.weight": state[f"{here}.norm_2.gamma"], f"{hf}.ln_2.bias": state[f"{here}.norm_2.beta"],
            f"{hf}.mlp.c_fc.weight": state[f"{here}.feed_forward.W_1.weight"],
            f"{hf}.mlp.c_fc.bias": state[f"{here}.feed_forward.W_1.bias"],
            f"{hf}.mlp.c_proj.weight": state[f"{here}.feed_forward.W_2.weight"],
            f"{hf}.mlp.c_proj.bias": state[f"{here}.feed_forward.W_2.bias"]})
    with OutputFolder(folder, "export") as staging:
        write_safetensors(staging / "model.safetensors",
                          {name: np.asarray(a, np.float32) for name, a in arrays.items()})
        _write_json(staging / "config.json", gpt2_config_json(config, tokenizer))
        atomic_write_text(staging / "tokenizer.json", _with_sos_first(tokenizer).to_str())
        _write_json(staging / "special_tokens_map.json", {
            "bos_token": SOS, "eos_token": EOS, "pad_token": PAD, "unk_token": UNK, "cls_token": CLS,
            "sep_token": SEP, "mask_token": MASK})


GPT2_ACTIVATIONS = {"gelu_tanh": "gelu_new", "gelu": "gelu", "relu": "relu"}


def check_gpt2_exportable(config):
    """A ValueError naming what GPT-2's format cannot hold."""
    problems = [] if config.kind == "decoder-only" else ["not a decoder-only model"]
    problems += [f"{name}={getattr(config, name)!r}" for name, allowed in (
        ("norm_placement", ("pre",)), ("positional", ("learned", "sinusoidal")), ("attention", ("full",)),
        ("activation", tuple(GPT2_ACTIVATIONS)), ("tie_embeddings", (True,)), ("memory_slots", (0,))) if getattr(config, name) not in allowed]
    if problems:
        raise ValueError(f"GPT-2's format cannot hold this model: {', '.join(problems)} (it takes a pre-norm "
                         f"decoder-only model with full attention without memory slots, learned or sinusoidal positions, ReLU or GELU, "
                         f"and a tied head)")


def gpt2_config_json(config, tokenizer):
    """GPT-2's config.json for a decoder-only model and its tokenizer."""
    return {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": config.vocab_size,
            "n_positions": config.max_len, "n_embd": config.d_model, "n_layer": config.n_layers,
            "n_head": config.n_heads, "n_inner": config.d_ff, "activation_function": GPT2_ACTIVATIONS[config.activation],
            "layer_norm_epsilon": config.norm_eps, "resid_pdrop": config.dropout, "embd_pdrop": config.dropout,
            "attn_pdrop": config.dropout, "bos_token_id": tokenizer.sos_id, "eos_token_id": tokenizer.eos_id,
            "pad_token_id": config.pad_id, "tie_word_embeddings": True}


def _with_sos_first(tokenizer):
    """A copy of the tokenizer's `tokenizers.Tokenizer` whose post-processor puts [SOS] first."""
    from tokenizers import Tokenizer, processors

    copy = Tokenizer.from_str(tokenizer.tokenizer.to_str())
    copy.post_processor = processors.TemplateProcessing(single=f"{SOS} $A", special_tokens=[(SOS, tokenizer.sos_id)])
    return copy


def _write_json(path, value):
    atomic_write_text(path, json.dumps(value, indent=2) + "\n")
