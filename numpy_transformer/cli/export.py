"""`numpy-transformer export`: hand a model trained here to PyTorch.

    numpy-transformer export --checkpoint DIR --to torch OUT

writes OUT/model.safetensors (the weights under the names and in the layouts of the `torch.nn`
models of numpy_transformer/torch_reference.py) and OUT/model.json (the model's configuration).
In PyTorch:

    from safetensors.torch import load_file
    from numpy_transformer.config import TransformerConfig
    from numpy_transformer.torch_reference import torch_transformer
    model = torch_transformer(TransformerConfig.load("OUT/model.json"))
    model.load_state_dict(load_file("OUT/model.safetensors"))

`numpy_transformer.export.load_torch(OUT)` reads it back here.
"""
from numpy_transformer.cli.common import add_threads_argument


def add_parser(commands):
    export = commands.add_parser("export", help="write a trained model's weights for PyTorch",
                                 description="Write a trained model (translation or decoder-only) as a PyTorch state "
                                             "dict in safetensors format, with its configuration.")
    export.add_argument("--checkpoint", required=True, metavar="DIR", help="the folder `train --out` wrote")
    export.add_argument("--to", required=True, choices=("torch",),
                        help="torch: the names and layouts of numpy_transformer/torch_reference.py")
    export.add_argument("out", metavar="OUT", help="the folder to write model.safetensors and model.json into")
    add_threads_argument(export)
    export.set_defaults(run=command)


def command(args):
    """Write the checkpoint's model to OUT; print what was written."""
    from pathlib import Path

    from numpy_transformer.export import CONFIG_FILE, WEIGHTS_FILE, save_torch
    from numpy_transformer.training.checkpoint import load_checkpoint

    checkpoint = load_checkpoint(args.checkpoint)
    if checkpoint.task == "mlm":
        raise ValueError(f"{args.checkpoint} holds a masked language model; export takes translation models and "
                         f"decoder-only language models")
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise ValueError(f"{args.out} is a file, not a folder: choose a folder for OUT")
    save_torch(checkpoint.model, args.out)
    builder = "torch_transformer" if checkpoint.task == "translation" else "torch_decoder_only"
    print(f"Wrote {Path(args.out) / WEIGHTS_FILE} and {Path(args.out) / CONFIG_FILE}: load them into "
          f"numpy_transformer.torch_reference.{builder}(config)")
    return 0
