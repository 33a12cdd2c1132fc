"""`numpy-transformer export`: hand a model trained here to PyTorch or to `transformers`.

    numpy-transformer export --checkpoint DIR --to torch OUT
    numpy-transformer export --checkpoint DIR --to hf OUT       # a decoder-only model, GPT-2's format

writes OUT/model.safetensors (the weights under the names and in the layouts of the `torch.nn`
models of numpy_transformer/interop/torch_reference.py) and OUT/model.json (the model's configuration).
In PyTorch:

    from safetensors.torch import load_file
    from numpy_transformer.config import TransformerConfig
    from numpy_transformer.interop.torch_reference import torch_transformer
    model = torch_transformer(TransformerConfig.load("OUT/model.json"))
    model.load_state_dict(load_file("OUT/model.safetensors"))

`numpy_transformer.interop.export.load_torch(OUT)` reads it back here. `--to hf` writes a decoder-only
model as Hugging Face GPT-2 (config.json, model.safetensors, tokenizer.json,
special_tokens_map.json): `transformers.GPT2LMHeadModel.from_pretrained(OUT)` loads it, and
`generate --checkpoint OUT` reads it back.

OUT is written as a whole (numpy_transformer/training/output_folder.py): a fresh folder beside it,
renamed into place, so a crash leaves the earlier export whole. OUT must be missing, empty, or
an earlier export; a folder of other files, a run folder (or a folder inside one) and "" are
refused.
"""
import sys

from numpy_transformer.cli.common import add_threads_argument, add_weights_argument, check_run_folder


def add_parser(commands):
    export = commands.add_parser("export", help="write a trained model's weights for PyTorch or transformers",
                                 description="Write a trained model (translation or decoder-only) as a PyTorch state "
                                             "dict in safetensors format with its configuration, or a decoder-only "
                                             "model in Hugging Face GPT-2 format.")
    export.add_argument("--checkpoint", required=True, metavar="DIR", help="the folder `train --out` wrote")
    export.add_argument("--to", required=True, choices=("torch", "hf"),
                        help="torch: the names and layouts of numpy_transformer/interop/torch_reference.py; hf: Hugging "
                             "Face GPT-2 (decoder-only models)")
    export.add_argument("out", metavar="OUT", help="the folder to write into")
    add_threads_argument(export, "loading the model", "export copies weights and multiplies no matrices")
    add_weights_argument(export, "export")
    export.set_defaults(run=command)


def command(args):
    """Write the checkpoint's model to OUT; print what was written."""
    from pathlib import Path

    from numpy_transformer.interop.export import CONFIG_FILE, WEIGHTS_FILE, save_gpt2, save_torch
    from numpy_transformer.training.checkpoint import load_checkpoint
    from numpy_transformer.training.output_folder import OutputFolder

    check_run_folder(args.checkpoint, ("lm",) if args.to == "hf" else ("translation", "lm"))
    checkpoint = load_checkpoint(args.checkpoint, args.weights)
    if checkpoint.task == "mlm" or (args.to == "hf" and checkpoint.task != "lm"):
        raise ValueError(f"{args.checkpoint} holds a {'masked language' if checkpoint.task == 'mlm' else 'translation'} "
                         f"model; export --to torch takes translation and decoder-only models, --to hf decoder-only "
                         f"ones")
    OutputFolder(args.out, "export").check()                  # before the model is converted
    print(checkpoint.weights_line(args.weights), file=sys.stderr)
    if args.to == "hf":
        save_gpt2(checkpoint.model, checkpoint.tokenizers[0], args.out)
        print(f"Wrote {args.out}/: config.json, model.safetensors, tokenizer.json, special_tokens_map.json (Hugging "
              f"Face GPT-2; transformers.GPT2LMHeadModel.from_pretrained reads it)")
        return 0
    save_torch(checkpoint.model, args.out)
    builder = "torch_transformer" if checkpoint.task == "translation" else "torch_decoder_only"
    print(f"Wrote {Path(args.out) / WEIGHTS_FILE} and {Path(args.out) / CONFIG_FILE}: load them into "
          f"numpy_transformer.interop.torch_reference.{builder}(config)")
    return 0
