"""A model trained here, handed to PyTorch and back: its weights under the names and in the
layouts of the `torch.nn` models of `torch_reference.py`.

    arrays = torch_state(model)                   # {torch name: array}
    save_torch(model, "exported/")                # exported/model.safetensors + model.json
    model = load_torch("exported/")               # the identity: the same weights back

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
"""
import json
import os
from pathlib import Path

import numpy as np

from numpy_transformer.config import TransformerConfig
from numpy_transformer.language_model import DecoderOnlyTransformer, LanguageModelConfig
from numpy_transformer.model import Transformer
from numpy_transformer.pretrained import SafetensorsWeights, fill_parameters
from numpy_transformer.torch_reference import check_exportable

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
    if getattr(model.config, "share_source_embedding", False):        # PyTorch lists a shared module twice
        arrays["tgt_embedding.weight"] = arrays["src_embedding.weight"]
    return arrays


def ours_from_torch(model, arrays):
    """(our name, array) pairs from a torch state (`torch_state`'s inverse)."""
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
    folder/model.json (each written whole, then renamed into place)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    write_safetensors(folder / WEIGHTS_FILE, torch_state(model))
    _replace(folder / CONFIG_FILE, (model.config.to_json() + "\n").encode("utf-8"))


def load_torch(folder):
    """The model `save_torch` (or PyTorch, under the same names) wrote to `folder`."""
    folder = Path(folder)
    values = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
    config = (LanguageModelConfig if "vocab_size" in values else TransformerConfig).from_json(json.dumps(values))
    model = (DecoderOnlyTransformer if "vocab_size" in values else Transformer)(config, np.random.default_rng(0))
    weights = SafetensorsWeights(folder / WEIGHTS_FILE)
    fill_parameters(model, ours_from_torch(model, {name: weights[name] for name in weights.entries}))
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
    data = b"".join(np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<")).tobytes()
                    for array in arrays.values())
    _replace(path, len(text).to_bytes(8, "little") + text + data)


def _replace(path, content):
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_bytes(content)
    os.replace(temporary, path)
