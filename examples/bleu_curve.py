"""Validation BLEU against training time, for this project's recipe and PyTorch's.

    python examples/bleu_curve.py --dataset multi30k/train.jsonl --pair en-de
    python examples/bleu_curve.py --framework torch --init recipe --dataset … --pair en-de

Both frameworks train the model of a preset (`--preset`, default "default") on the same data,
tokenizers and batches (the same seed draws the same batch order), with the same Adam, warm-up,
label smoothing and clipping; only the framework and the initial weights may differ:

| --framework | --init      | the model and its initial weights                                          |
|-------------|-------------|----------------------------------------------------------------------------|
| numpy       | xavier …    | this project's model, `--init` as `numpy-transformer train --init`           |
| torch       | recipe      | `torch.nn.Transformer` as the Annotated Transformer initialises it: every    |
|             |             | matrix, the embeddings included, Xavier-uniform                              |
| torch       | copy        | `torch.nn.Transformer` starting from this project's initial weights (the   |
|             |             | framework alone, the recipe aside)                                           |

The PyTorch model is `numpy_transformer.interop.torch_reference.torch_transformer` (√d · embeddings +
sinusoidal positions, `nn.Transformer` without the two final LayerNorms that post-norm stacks
do not have here, the projection). Every `--eval-every` steps the clock
stops, the weights are copied into this project's model (`export.ours_from_torch` for PyTorch)
and the validation split is translated greedily and scored with sacrebleu, the same code for
both. Each evaluation is a line of OUT/curve.jsonl: step, training seconds, BLEU, chrF, and the
target tokens trained on per second of training. The run
ends after `--steps` steps or `--max-minutes` of training, whichever comes first. PyTorch is
needed only for --framework torch. `--plot numpy=A/curve.jsonl torch=B/curve.jsonl` draws
curves already written into OUT/bleu_curve.png (against minutes, or `--against steps`); `--test`
scores the test split too at every point. OUT is --out (default runs/examples/bleu_curve/);
--threads N (default 1) is PyTorch's thread count, and this project's as `train --threads N` uses
it (the batch split between N processes for the default model, training/parallel.py).
"""
import argparse
import contextlib
import json
import time
from pathlib import Path

from numpy_transformer.cli.example_scripts import (add_example_arguments, output_folder, progress, require,
                                                   run_example, threads_from_command_line)

threads_from_command_line()                  # before NumPy loads: BLAS reads its thread count then
import numpy as np  # noqa: E402

from numpy_transformer.training.allocator import reuse_freed_memory  # noqa: E402
from numpy_transformer.data.batching import batch_indices  # noqa: E402
from numpy_transformer.model import Transformer  # noqa: E402
from numpy_transformer.training.settings import model_config, resolve  # noqa: E402
from numpy_transformer.training.evaluation import evaluate_pairs  # noqa: E402
from numpy_transformer.training.loop import Trainer, make_optimizer, run_generators  # noqa: E402
from numpy_transformer.training.loss import TRANSLATION  # noqa: E402
from numpy_transformer.training.prepare import prepare_data  # noqa: E402


def batches(data, config, data_rng):
    """The training batches, epoch after epoch, in the order `numpy-transformer train` draws them."""
    step = 0
    while True:
        for positions in batch_indices(data.train, config.batch_size, data_rng, config.similar_lengths):
            yield TRANSLATION.batch(data.train, positions, ("train", step))
            step += 1


class NumpyRun:
    """This project's model and Adam: `step(batch)` is `numpy-transformer train`'s step
    (`Trainer.step_on_batch`), `translator()` the model."""

    def __init__(self, config, training, model_rng, train_data, threads=1):
        self.model = Transformer(config, model_rng)
        self.trainer = Trainer(self.model, make_optimizer(self.model, training, threads), train_data, training,
                               np.random.default_rng(0), report=None, processes=threads)

    def step(self, batch):
        self.trainer.step_on_batch(batch)

    def translator(self):
        return self.model


class TorchRun:
    """`torch.nn.Transformer` trained by PyTorch, initialised by the recipe or copied from ours."""

    def __init__(self, config, training, model_rng, init, fused=False):
        import torch

        from numpy_transformer.interop.export import torch_state
        from numpy_transformer.interop.torch_reference import torch_transformer

        self.torch, self.config, self.training = torch, config, training
        self.ours = Transformer(config, model_rng)                       # the NumPy run's initial weights
        torch.manual_seed(int(model_rng.integers(2 ** 31)))
        self.model = torch_transformer(config)
        if init == "recipe":
            for p in self.model.parameters():
                if p.dim() > 1:
                    torch.nn.init.xavier_uniform_(p)
        else:
            self.model.load_state_dict({name: torch.from_numpy(array) for name, array in torch_state(self.ours).items()})
        schedule = training.learning_rate(config.d_model)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1.0 if callable(schedule) else schedule,
                                          betas=training.betas, eps=training.eps, fused=fused)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda t: schedule(t + 1)) \
            if callable(schedule) else None

    def step(self, batch):
        torch = self.torch
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        src, tgt_in, tgt_out = (torch.from_numpy(a) for a in (batch.src, batch.tgt_in, batch.tgt_out))
        logits = self.model(src, tgt_in)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1),
                                                 ignore_index=self.config.pad_id,
                                                 label_smoothing=self.training.label_smoothing)
        loss.backward()
        if self.training.clip_norm is not None:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.training.clip_norm)
        self.optimizer.step()
        if self.scheduler is not None:
            self.scheduler.step()

    def translator(self):
        """This project's model holding the trained weights."""
        from numpy_transformer.interop.export import ours_from_torch
        from numpy_transformer.interop.pretrained import fill_parameters

        state = {name: value.detach().numpy() for name, value in self.model.state_dict().items()}
        fill_parameters(self.ours, ours_from_torch(self.ours, state))
        return self.ours



def validation_point(run, data, step, seconds, test=False):
    """Greedy BLEU and chrF of the validation split (and with test, of the test split: test_bleu,
    test_chrf) after `step` steps and `seconds` of training."""
    point = {"step": step, "train_seconds": round(seconds, 1)}
    for split, prefix in (("validation", ""), *((("test", "test_"),) if test else ())):
        scores = evaluate_pairs(run.translator(), *data.tokenizers, getattr(data.splits, split),
                                beam_size=1).greedy_scores
        point.update({f"{prefix}bleu": round(scores.bleu, 2), f"{prefix}chrf": round(scores.chrf, 2)})
    return point


def train_with_curve(run, data, configs, data_rng, out, eval_every, max_seconds, log=print, test=False):
    """Train `run` for the run's steps or `max_seconds`, whichever comes first; every `eval_every`
    steps (and at the end) a validation point, also written to out/curve.jsonl."""
    training = configs["training"]
    curve, seconds, tokens = [], 0.0, 0
    with progress(total=training.steps, desc="training", unit="step") as bar:
        for step, batch in enumerate(batches(data, training, data_rng), start=1):
            start = time.perf_counter()
            run.step(batch)
            seconds += time.perf_counter() - start
            bar.update()
            tokens += int(np.count_nonzero(batch.tgt_out != data.tokenizers[1].pad_id))
            last = step == training.steps or seconds >= max_seconds
            if step % eval_every == 0 or last:
                curve.append({**validation_point(run, data, step, seconds, test),
                              "target_tokens_per_second": round(tokens / seconds)})
                with bar.external_write_mode():
                    log(json.dumps(curve[-1]))
                (out / "curve.jsonl").write_text("".join(json.dumps(point) + "\n" for point in curve),
                                                 encoding="utf-8")
            if last:
                return curve


def draw(curves, path, against="minutes"):
    """The curves ({label: curve.jsonl path}) as validation BLEU against minutes of training, or
    against steps (against="steps")."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 4))
    for label, curve_path in curves.items():
        points = [json.loads(line) for line in Path(curve_path).read_text(encoding="utf-8").splitlines()]
        axis.plot([p["step"] if against == "steps" else p["train_seconds"] / 60 for p in points],
                  [p["bleu"] for p in points], "o-", label=label)
    axis.set_xlabel("training steps" if against == "steps" else "minutes of training")
    axis.set_ylabel("validation BLEU (greedy)")
    axis.grid(alpha=0.3)
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plot", nargs="+", metavar="LABEL=CURVE",
                        help="draw curve.jsonl files already written (LABEL=PATH …) into OUT/bleu_curve.png, and "
                             "train nothing")
    parser.add_argument("--against", choices=("minutes", "steps"), default="minutes",
                        help="--plot: BLEU against minutes of training (default) or steps")
    parser.add_argument("--framework", choices=("numpy", "torch"), default="numpy")
    parser.add_argument("--init", default=None, help="numpy: the preset's (default), xavier, xavier_uniform, "
                                                      "torch; torch: recipe (default) or copy")
    parser.add_argument("--preset", default="default")
    parser.add_argument("--dataset", default=None, help="the preset's by default (tatoeba for the default preset)")
    parser.add_argument("--validation-file", default=None)
    parser.add_argument("--pair", default=None, help="the preset's by default")
    parser.add_argument("--steps", type=int, default=None, help="the preset's by default")
    parser.add_argument("--seed", type=int, default=0)
    for part, example in (("model", '"d_model": 256'), ("training", '"warmup_steps": 1000'),
                          ("data", '"vocab_size": 4000')):
        parser.add_argument(f"--{part}", type=json.loads, default={}, metavar="JSON",
                            help=f"more {part} fields over the preset's, e.g. '{{{example}}}'")
    parser.add_argument("--eval-every", type=int, default=250)
    parser.add_argument("--max-minutes", type=float, default=float("inf"))
    parser.add_argument("--test", action="store_true", help="score the test split too at every point (test_bleu, "
                                                                 "test_chrf)")
    parser.add_argument("--fused-adam", action="store_true", help="torch: Adam(fused=True), PyTorch at its best")
    add_example_arguments(parser, __file__)
    args = parser.parse_args(argv)
    reuse_freed_memory()                                    # as the CLI does, for either framework
    if args.plot:
        require("matplotlib")
        curves = dict(item.split("=", 1) for item in args.plot)
        print(f"wrote {draw(curves, output_folder(args) / 'bleu_curve.png', args.against)}")
        return None
    if args.framework == "torch":
        require("torch")                                    # before the data are prepared
    init = args.init or ("recipe" if args.framework == "torch" else None)
    model = {**({"init": init} if args.framework == "numpy" and init else {}), **args.model}
    training = {"seed": args.seed, **({"steps": args.steps, "epochs": None} if args.steps else {}), **args.training}
    data = {name: value for name, value in (("dataset", args.dataset), ("pair", args.pair),
                                             ("validation_file", args.validation_file)) if value is not None}
    model_fields, training_config, data_config = resolve(args.preset, model, training, {**data, **args.data})
    init = init or model_fields.get("init", "xavier")
    prepared = prepare_data(data_config, progress=False)
    config = model_config(model_fields, [t.vocab_size for t in prepared.tokenizers], prepared.src_tokenizer.pad_id,
                          data_config.max_len)
    model_rng, data_rng = run_generators(args.seed)
    if args.framework == "torch":
        import torch
        torch.set_num_threads(args.threads)
        run = TorchRun(config, training_config, model_rng, init, args.fused_adam)
    else:
        run = NumpyRun(config, training_config, model_rng, prepared.train, args.threads)
    out = output_folder(args)
    print("\n".join(prepared.summary))
    print(f"{args.framework}, init {init}, preset {args.preset}, seed {args.seed}, {training_config.steps} steps "
          f"at most, {args.max_minutes} minutes at most -> {out}/curve.jsonl", flush=True)
    shared = run.trainer.shared_steps() if args.framework == "numpy" else contextlib.nullcontext()
    with shared:                                            # --threads N as `train` uses them
        return train_with_curve(run, prepared, {"training": training_config, "data": data_config}, data_rng, out,
                                args.eval_every, args.max_minutes * 60, log=lambda line: print(line, flush=True),
                                test=args.test)


if __name__ == "__main__":
    run_example(main, __file__)
