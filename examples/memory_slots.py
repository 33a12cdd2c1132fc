"""How much attention the learned memory slots draw, layer by layer, as a model trains.

    python examples/memory_slots.py                           # the default model, 4 slots, ~2 minutes
    python examples/memory_slots.py --slots 8 --steps 1500 --out runs/memory

The default model (1 + 1 layers, d_model 128, 4 heads) with `memory_slots` m learned key/value
slots in every attention layer (K = [Z W_k; M_k], V = [Z W_v; M_v],
numpy_transformer.attention.memory_slots), trained on the built-in corpus as `numpy-transformer train
--memory-slots m` trains it. Every `--every` steps, on a fixed batch of validation pairs in eval
mode, the attention mass on the slots of each layer,

    mass = Σ_{j > n_k} A_ij,   averaged over the heads and the real (non-padding) query rows,

the share of each query's attention that goes to the slots rather than to the tokens. The
output is a table (step, training loss, mass per layer) and a figure of the mass against the step,
OUT/memory_slots.png (--out, default runs/examples/memory_slots/). --threads N: BLAS threads
and the optimizer's (default 1).
"""
import argparse

from numpy_transformer.cli.example_scripts import (add_example_arguments, loss_cell, on_terminal, output_folder,
                                                   require, run_example, threads_from_command_line)

threads_from_command_line()                  # before NumPy loads: BLAS reads its thread count then
import numpy as np  # noqa: E402

from numpy_transformer.analysis.hooks import attention_modules  # noqa: E402
from numpy_transformer.data.batching import make_batch  # noqa: E402
from numpy_transformer.inference import inference_mode  # noqa: E402
from numpy_transformer.model import Transformer  # noqa: E402
from numpy_transformer.training.settings import model_config, resolve  # noqa: E402
from numpy_transformer.training.loop import Trainer, make_optimizer, run_generators  # noqa: E402
from numpy_transformer.training.prepare import prepare_data  # noqa: E402


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slots", type=int, default=4, help="memory slots m of every attention layer (default 4)")
    parser.add_argument("--steps", type=int, default=800, help="training steps (default 800; the preset's 1500)")
    parser.add_argument("--every", type=int, default=50, help="steps between probes (default 50)")
    parser.add_argument("--n-pairs", type=int, default=20_000, help="size of the built-in corpus (default 20000)")
    parser.add_argument("--d-model", type=int, default=128, help="d_model (default 128, the default preset's)")
    add_example_arguments(parser, __file__)
    return parser.parse_args(argv)


def slot_mass(model, batch):
    """{layer name: mean attention mass on the memory slots} on `batch`, in eval mode: the last
    m columns of each layer's weights summed, averaged over the heads and the real query rows."""
    with inference_mode(model):
        model(batch.src, batch.tgt_in)
    real_queries = {"encoder": batch.src != model.config.pad_id, "decoder": batch.tgt_in != model.config.pad_id}
    mass = {}
    for name, module in attention_modules(model).items():
        A = module.last_weights.astype(np.float64)                          # (batch, heads, n_q, n_k + m)
        on_slots = A[..., A.shape[-1] - module.memory_slots:].sum(axis=-1)   # (batch, heads, n_q)
        real = np.broadcast_to(real_queries[name.split(".")[0]][:, None, :], on_slots.shape)
        mass[name] = float(on_slots[real].mean())
    return mass


def train(args, data, probe_batch):
    """[(step, mean training loss since the last probe, {layer: slot mass})] of one run."""
    model_fields, training, _ = resolve("grammar", model={"d_model": args.d_model, "d_ff": 4 * args.d_model,
                                                          "memory_slots": args.slots}, training={"steps": args.steps})
    config = model_config(model_fields, [t.vocab_size for t in data.tokenizers], data.src_tokenizer.pad_id,
                          args.max_len)
    model_rng, data_rng = run_generators(training.seed)
    model = Transformer(config, model_rng)
    trainer = Trainer(model, make_optimizer(model, training, args.threads), data.train, training, data_rng,
                      report=None, progress=on_terminal())
    records = [(0, float("nan"), slot_mass(model, probe_batch))]

    def probe(trainer):
        step = trainer.state.step
        if step % args.every == 0 or step == args.steps:
            records.append((step, float(np.mean(trainer.losses[-args.every:])), slot_mass(model, probe_batch)))

    trainer.train(probe)
    return records


def table(records):
    """Markdown: the loss and each layer's slot mass at a few steps."""
    names = list(records[0][2])
    lines = ["| step | training loss | " + " | ".join(names) + " |", "|" + "---:|" * (2 + len(names))]
    last = records[-1][0]
    for step, loss, mass in records:
        if step in (0, 50, 100, 200, 400) or step % 500 == 0 or step == last:
            lines.append(f"| {step} | {loss_cell(loss)} | " + " | ".join(f"{mass[name]:.3f}" for name in names) + " |")
    return "\n".join(lines)


def draw(records, slots, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 3.6), constrained_layout=True)
    steps = [step for step, *_ in records]
    for name in records[0][2]:
        axes.plot(steps, [mass[name] for *_, mass in records], label=name)
    axes.set(xlabel="step", ylabel="attention mass on the slots", ylim=(0, None),
             title=f"{slots} memory slots per attention layer (built-in corpus)")
    axes.legend(fontsize=8)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def main(argv=None):
    args = parse_arguments(argv)
    require("matplotlib")
    _, _, data_config = resolve("grammar", data={"n_pairs": args.n_pairs})
    args.max_len = data_config.max_len
    data = prepare_data(data_config)
    probe_batch = make_batch(data.validation, np.arange(min(64, len(data.validation))))
    print(f"data: {data.splits.source}")
    records = train(args, data, probe_batch)
    print(table(records))
    step, _, mass = records[-1]
    figure = draw(records, args.slots, output_folder(args) / "memory_slots.png")
    print(f"attention mass on {args.slots} slots after {step} steps: "
          + ", ".join(f"{name} {value:.3f}" for name, value in mass.items()) + f"; figure: {figure}")
    return records


if __name__ == "__main__":
    run_example(main, __file__)
