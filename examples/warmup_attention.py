"""The architecture notes' claim, measured: warm-up, "gradual increase [of the learning rate]
prevents attention collapse early in training".

    python examples/warmup_attention.py                        # the default model, ~2 minutes
    python examples/warmup_attention.py --steps 800 --out runs/warmup

Two runs of the default model (1 + 1 layers, d_model 128, 4 heads) on the built-in corpus,
the same seed, data and batches; only the learning rate differs:

- warm-up:  lr(t) = d^-0.5 · min(t^-0.5, t · w^-1.5), w = 400 (the default preset's);
- constant: lr = that schedule's peak, d^-0.5 · w^-0.5 ≈ 4.4e-3, from the first step.

Every `--every` steps: the training loss (the mean since the last probe) and, on a fixed batch
of validation pairs in eval mode, the mean attention entropy of each kind of attention,

    H = −Σ_j A_ij log A_ij,   averaged over the heads and the real (non-padding) query rows:

0 when a head puts all its weight on one key (collapse), log n when it spreads evenly over n
keys. The output is a table of both runs and a figure of the loss and the entropies,
OUT/warmup_attention.png (--out, default runs/examples/warmup_attention/). --threads N: BLAS
threads and the optimizer's (default 1).
"""
import argparse
import dataclasses

from numpy_transformer.cli.example_scripts import (add_example_arguments, loss_cell, on_terminal, output_folder,
                                                   require, run_example, threads_from_command_line)

threads_from_command_line()                  # before NumPy loads: BLAS reads its thread count then
import numpy as np  # noqa: E402

from numpy_transformer.analysis.hooks import attention_modules, kind_of  # noqa: E402
from numpy_transformer.data.batching import make_batch  # noqa: E402
from numpy_transformer.inference import inference_mode  # noqa: E402
from numpy_transformer.model import Transformer  # noqa: E402
from numpy_transformer.training.settings import model_config, resolve  # noqa: E402
from numpy_transformer.training.loop import Trainer, make_optimizer, run_generators  # noqa: E402
from numpy_transformer.training.prepare import prepare_data  # noqa: E402

KINDS = ("encoder.self_attn", "decoder.self_attn", "decoder.cross_attn")


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=400, help="steps of each run (default 400, the warm-up's length)")
    parser.add_argument("--every", type=int, default=10, help="steps between probes (default 10)")
    parser.add_argument("--n-pairs", type=int, default=20_000, help="size of the built-in corpus (default 20000)")
    parser.add_argument("--d-model", type=int, default=128, help="d_model (default 128, the default preset's)")
    add_example_arguments(parser, __file__)
    return parser.parse_args(argv)


def attention_entropy(model, batch):
    """{kind: mean entropy} of every kind of attention on `batch`, in eval mode."""
    with inference_mode(model):
        model(batch.src, batch.tgt_in)
    rows = {"encoder": batch.src != model.config.pad_id, "decoder": batch.tgt_in != model.config.pad_id}
    totals = {kind: [] for kind in KINDS}
    for name, module in attention_modules(model).items():
        A = module.last_weights.astype(np.float64)                       # (batch, heads, n_q, n_k)
        H = -(A * np.log(np.where(A > 0, A, 1))).sum(axis=-1)             # (batch, heads, n_q)
        real = rows[name.split(".")[0]][:, None, :]
        totals[kind_of(name)].append(H[np.broadcast_to(real, H.shape)].mean())
    return {kind: float(np.mean(values)) for kind, values in totals.items()}


def run(schedule, args, data, probe_batch):
    """[(step, loss, {kind: entropy})] of one run, `schedule` "warmup" or "constant"."""
    model_fields, training, _ = resolve("grammar", model={"d_model": args.d_model, "d_ff": 4 * args.d_model},
                                        training={"steps": args.steps})
    if schedule == "constant":                                 # the warm-up's peak, d^-0.5 · w^-0.5, from step 1
        peak = training.lr_factor * (args.d_model * training.warmup_steps) ** -0.5
        training = dataclasses.replace(training, schedule="constant", lr=peak)
    config = model_config(model_fields, [t.vocab_size for t in data.tokenizers], data.src_tokenizer.pad_id,
                          args.max_len)
    model_rng, data_rng = run_generators(training.seed)
    model = Transformer(config, model_rng)
    trainer = Trainer(model, make_optimizer(model, training, args.threads), data.train, training, data_rng,
                      report=None, progress=on_terminal())
    records = [(0, float("nan"), attention_entropy(model, probe_batch))]

    def probe(trainer):
        step = trainer.state.step
        if step % args.every == 0:
            records.append((step, float(np.mean(trainer.losses[-args.every:])), attention_entropy(model, probe_batch)))

    trainer.train(probe)
    return records


def table(records):
    """Markdown: both runs side by side at a few steps."""
    lines = ["| step | loss, warm-up | loss, constant | " + " | ".join(f"H {kind}, warm-up | constant" for kind in KINDS)
             + " |", "|" + "---:|" * (3 + 2 * len(KINDS))]
    warm, constant = records["warmup"], records["constant"]
    shown = sorted({0, *(step for step, *_ in warm if step in (10, 20, 50, 100, 200) or step == warm[-1][0])})
    for step in shown:
        (_, loss_w, h_w), = [r for r in warm if r[0] == step]
        (_, loss_c, h_c), = [r for r in constant if r[0] == step]
        entropies = " | ".join(f"{h_w[kind]:.2f} | {h_c[kind]:.2f}" for kind in KINDS)
        lines.append(f"| {step} | {loss_cell(loss_w)} | {loss_cell(loss_c)} | {entropies} |")
    return "\n".join(lines)


def draw(records, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (losses, entropies) = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    for schedule, style in (("warmup", "-"), ("constant", "--")):
        steps = [step for step, *_ in records[schedule][1:]]
        losses.plot(steps, [loss for _, loss, _ in records[schedule][1:]], style, color="black", label=schedule)
        for kind, colour in zip(KINDS, ("tab:blue", "tab:orange", "tab:green")):
            entropies.plot([step for step, *_ in records[schedule]], [h[kind] for *_, h in records[schedule]], style,
                           color=colour, label=f"{kind}, {schedule}")
    losses.set(xlabel="step", ylabel="training loss (label-smoothed)", title="loss")
    entropies.set(xlabel="step", ylabel="mean attention entropy (nats)", title="attention entropy")
    losses.legend()
    entropies.legend(fontsize=7)
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
    records = {schedule: run(schedule, args, data, probe_batch) for schedule in ("warmup", "constant")}
    print(table(records))
    print(f"figure: {draw(records, output_folder(args) / 'warmup_attention.png')}")
    return records


if __name__ == "__main__":
    run_example(main, __file__)
