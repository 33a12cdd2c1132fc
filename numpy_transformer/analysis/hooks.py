"""Every attention layer of a Transformer under a stable name, and a way to act on the weights
each one uses.

Names: `encoder.{l}.self_attn`, `decoder.{l}.self_attn` (masked, eq. (10)) and
`decoder.{l}.cross_attn`, l = 0 … L − 1, in the order the model runs them. A language model
has one stack: a decoder-only model's layers are named `decoder.{l}.self_attn` (causal), an
encoder-only model's `encoder.{l}.self_attn`.

`weights_hooks(model, make_hook)` sets the `weights_hook` of every layer's attend strategy
(`layer.attend`, numpy_transformer/attention/attend.py) for the duration of a `with` block:
make_hook(name) returns a function weights → weights (a Tensor (batch, heads, n_q, n_k)), or
None to leave that layer alone. The hook sees the weights after the softmax and before dropout
and V, so what it returns is what the layer uses.
"""
import contextlib

KINDS = ("encoder.self_attn", "decoder.self_attn", "decoder.cross_attn")


def attention_modules(model):
    """{name: MultiHeadAttention} for every attention layer of `model`, in running order."""
    if hasattr(model, "stack"):                                  # a language model
        stack = "decoder" if model.config.causal else "encoder"
        return {f"{stack}.{l}.self_attn": layer.self_attn for l, layer in enumerate(model.stack.layers)}
    modules = {f"encoder.{l}.self_attn": layer.self_attn for l, layer in enumerate(model.encoder.layers)}
    for l, layer in enumerate(model.decoder.layers):
        modules[f"decoder.{l}.self_attn"] = layer.self_attn
        modules[f"decoder.{l}.cross_attn"] = layer.cross_attn
    return modules


def kind_of(name):
    """"decoder.1.cross_attn" → "decoder.cross_attn"."""
    stack, _, attention = name.split(".")
    return f"{stack}.{attention}"


def layer_of(name):
    """"decoder.1.cross_attn" → 1."""
    return int(name.split(".")[1])


@contextlib.contextmanager
def weights_hooks(model, make_hook):
    """Inside the block, layer `name` passes its weights through make_hook(name) (if not None)."""
    modules = attention_modules(model)
    previous = {name: module.attend.weights_hook for name, module in modules.items()}
    try:
        for name, module in modules.items():
            module.attend.weights_hook = make_hook(name)
        yield modules
    finally:
        for name, module in modules.items():
            module.attend.weights_hook = previous[name]
