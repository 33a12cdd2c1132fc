"""The thesis's proposed study: what w and num_pos of the structured approximation I_n P + Ẽ
(eq. (19)) say about the language pair. Train one-layer, 8-head Transformers on two pairs, sweep
w and num_pos of the exact projection over every head of every attention (encoder self,
decoder self, cross) on held-out sentences, and compare the knees.

    python examples/window_study.py                                  # en→it built-in, en→de Multi30k
    python examples/window_study.py --multi30k /path/to/multi30k     # a folder with train.jsonl, val.jsonl

The trained runs go into --out (default runs/examples/window_study/), the figure
window_study.png into --figures (default: --out); --threads N: BLAS threads and the optimizer's
(default 1).

The pairs: the built-in en→it corpus (synthetic: templated sentences, so its window structure is
the generator's, not Italian's) and Multi30k en→de (real captions, read from the files
train.jsonl and val.jsonl in --multi30k, default multi30k/ in the repository).
opus_books en→it, the thesis's corpus, needs the Hugging Face Hub and is not run here.

Per pair and seed: train (d_model 64, 8 heads, 1,500 steps of 32 pairs, the thesis-8-heads
preset made small as in examples/thesis_experiment.py), take the first --sentences pairs of the
test split whose source has --min-tokens to --max-tokens tokens ([SOS] and [EOS] included, the
same range for both pairs, so that sentence length does not make the difference), capture
every head with teacher forcing, and project it at w = 0 … 8 (num_pos = 1) and at
num_pos = 0 … 5 (w = 2) with `numpy_transformer.analysis.window_study.sweep_heads`. The knee is
`numpy_transformer.analysis.window_study.knee`: the smallest value reaching 90 % of the
captured-mass gain. Beside the heads, each sentence's uniform head of the same shape
(`numpy_transformer.analysis.window_study.uniform_like`, the causal mask kept) is swept too: the
knee that the sentence's length alone gives, the yardstick of the heads' knees. The defaults (2 pairs × 2 seeds) take 5 to 6 minutes of CPU; on 2
cores loaded by other work they printed in 11 to 14 minutes of wall time.

Expected output (docs/chapter3.md, "The study the thesis proposes"; a run of yours may differ
in the digits): a table per pair (knees per head, the uniform yardstick last), then

    | attention | parameter | en→it built-in: mean knee (heads: min–max) [uniform] | en→de Multi30k: … | difference [95 % interval] | differs |
    | encoder.0.self_attn | w | 4.15 (3.92–4.55) [5.80] | 4.52 (4.08–5.24) [6.20] | -0.37 [-0.81, +0.08] | no |
    …
    | decoder.0.cross_attn | w | 3.45 (3.25–3.69) [5.42] | 4.84 (4.70–5.00) [6.20] | -1.39 [-1.80, -0.94] | yes |
    …
    figure: runs/examples/window_study/window_study.png
"""
import argparse
import time
from pathlib import Path

from numpy_transformer.cli.example_scripts import (add_example_arguments, on_terminal, progress, require,
                                                   run_example, threads_from_command_line)

threads_from_command_line()                  # before NumPy loads: BLAS reads its thread count then
import numpy as np  # noqa: E402

from numpy_transformer.analysis.capture import capture_sentence  # noqa: E402
from numpy_transformer.analysis.window_study import (  # noqa: E402
    DEFAULT_NUM_POS, DEFAULT_WIDTHS, KNEE_FRACTION, NUM_POS_WIDTH, WIDTH_NUM_POS, HeadSweep, bootstrap_difference,
    knee, stacked, sweep_heads, uniform_like)
from numpy_transformer.training.settings import resolve  # noqa: E402
from numpy_transformer.training.run import Run  # noqa: E402

REPOSITORY = Path(__file__).resolve().parent.parent
DEFAULT_MULTI30K = REPOSITORY / "multi30k"
KINDS = ("encoder.0.self_attn", "decoder.0.self_attn", "decoder.0.cross_attn")
PAIRS = ("en→it built-in", "en→de Multi30k")


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--multi30k", default=str(DEFAULT_MULTI30K),
                        help="folder holding Multi30k's train.jsonl and val.jsonl (default multi30k/ in the repository)")
    add_example_arguments(parser, __file__)
    parser.add_argument("--figures", type=Path, default=None, help="folder of the figure (default: --out)")
    parser.add_argument("--n-pairs", type=int, default=6000, help="size of the built-in corpus (default 6000)")
    parser.add_argument("--subset", type=int, help="keep only the first N training pairs of Multi30k")
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--steps", type=int, default=1500, help="training steps per model (default 1500)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="training seeds (default 0 1)")
    parser.add_argument("--sentences", type=int, default=40, help="held-out sentences per pair (default 40)")
    parser.add_argument("--min-tokens", type=int, default=10, help="shortest source, [SOS] [EOS] included")
    parser.add_argument("--max-tokens", type=int, default=20, help="longest source, [SOS] [EOS] included")
    parser.add_argument("--max-width", type=int, default=max(DEFAULT_WIDTHS), help="sweep w = 0 … this")
    parser.add_argument("--max-num-pos", type=int, default=max(DEFAULT_NUM_POS), help="sweep num_pos = 0 … this")
    parser.add_argument("--fraction", type=float, default=KNEE_FRACTION, help="the knee's share of the gain")
    args = parser.parse_args(argv)
    if not 0 < args.min_tokens <= args.max_tokens:
        parser.error(f"--min-tokens must be ≥ 1 and ≤ --max-tokens, got {args.min_tokens} and {args.max_tokens}")
    return args


def multi30k_files(folder):
    """(train.jsonl, val.jsonl) in `folder`, or a FileNotFoundError saying where they were looked for."""
    files = [Path(folder) / name for name in ("train.jsonl", "val.jsonl")]
    missing = [str(path) for path in files if not path.is_file()]
    if missing:
        raise FileNotFoundError(f"Multi30k not found: {', '.join(missing)} missing. Pass --multi30k FOLDER, the "
                                f"folder holding Multi30k en-de's train.jsonl and val.jsonl (the opus_books schema)")
    return files


def data_settings(args, pair):
    """The DataConfig fields of one language pair (word-level vocabularies for both)."""
    if pair == PAIRS[0]:
        return dict(dataset="builtin", pair="en-it", n_pairs=args.n_pairs, max_len=40)
    train, validation = multi30k_files(args.multi30k)
    return dict(dataset=str(train), validation_file=str(validation), pair="en-de", subset=args.subset, max_len=40)


def train(args, pair, seed):
    """(model, source tokenizer, target tokenizer, DataSplits) of a one-layer model trained now."""
    model = dict(d_model=args.d_model, n_heads=args.heads, d_ff=4 * args.d_model, dropout=0.1)
    training = dict(batch_size=args.batch_size, steps=args.steps, epochs=None, schedule="warmup", seed=seed,
                    warmup_steps=min(200, args.steps), lr_factor=1.0, eval_every=args.steps,
                    log_every=max(args.steps // 10, 1), checkpoint_every=args.steps)
    directory = Path(args.out) / f"{pair.split()[-1].lower()}-seed{seed}"
    run = Run.new(directory, *resolve("thesis-8-heads", model, training, data_settings(args, pair)),
                  overwrite=True, report=None, threads=args.threads, split="auto", progress=on_terminal())
    start = time.perf_counter()
    result = run.train()
    print(f"{pair}, seed {seed}: trained {result.step} steps in {time.perf_counter() - start:.0f} s, validation "
          f"loss {result.validation_loss:.3f} (the run: {directory})")
    return run.model, run.data.src_tokenizer, run.data.tgt_tokenizer, run.data.splits


def held_out(splits, src_tokenizer, tgt_tokenizer, args, max_len):
    """The first `args.sentences` test pairs whose source has min … max tokens and whose target fits."""
    chosen = []
    for pair in splits.test:
        n_src, n_tgt = len(src_tokenizer.encode(pair.src)) + 2, len(tgt_tokenizer.encode(pair.tgt)) + 1
        if args.min_tokens <= n_src <= args.max_tokens and n_tgt <= max_len:
            chosen.append(pair)
        if len(chosen) == args.sentences:
            break
    if len(chosen) < 2:
        raise ValueError(f"only {len(chosen)} test pairs have {args.min_tokens} to {args.max_tokens} source tokens")
    return chosen


def sweep_model(model, src_tokenizer, tgt_tokenizer, pairs, args):
    """{kind: HeadSweep} with Curves of shape (sentences, heads + 1, values): every head on every
    pair, and last the uniform head of the same shape (the yardstick)."""
    widths, num_pos_values = range(args.max_width + 1), range(args.max_num_pos + 1)
    sweeps = {kind: [] for kind in KINDS}
    for pair in progress(pairs, desc="sweeping the heads", unit="sentence"):
        capture = capture_sentence(model, src_tokenizer, tgt_tokenizer, pair.src, pair.tgt)
        for kind in KINDS:
            weights = capture.weights[kind]
            sweeps[kind].append(sweep_heads(np.concatenate([weights, uniform_like(weights[:1])]), widths,
                                            num_pos_values))
    return {kind: stacked_sweeps(found) for kind, found in sweeps.items()}


def stacked_sweeps(sweeps):
    """One HeadSweep whose curves stack those of `sweeps` along a new first axis."""
    return HeadSweep(stacked([s.width for s in sweeps]), stacked([s.num_pos for s in sweeps]))


def study_pair(args, pair):
    """{kind: HeadSweep} with Curves (seeds, sentences, heads + 1, values), and the mean source length."""
    per_seed = []
    for seed in args.seeds:
        model, src_tokenizer, tgt_tokenizer, splits = train(args, pair, seed)
        pairs = held_out(splits, src_tokenizer, tgt_tokenizer, args, model.config.max_len)
        start = time.perf_counter()
        per_seed.append(sweep_model(model, src_tokenizer, tgt_tokenizer, pairs, args))
        print(f"  swept {len(pairs)} held-out sentences × {len(KINDS)} kinds × {args.heads} heads in "
              f"{time.perf_counter() - start:.0f} s")
    length = np.mean([len(src_tokenizer.encode(p.src)) + 2 for p in pairs])
    return {kind: stacked_sweeps([s[kind] for s in per_seed]) for kind in KINDS}, length


def knees(curve, fraction):
    """(seeds, sentences, heads + 1): the knee of every single curve."""
    return knee(curve.values, curve.captured, fraction)


def spread(values):
    """'median [q1, q3]' of an array."""
    q1, median, q3 = np.quantile(values, [0.25, 0.5, 0.75])
    return f"{median:g} [{q1:g}, {q3:g}]"


def head_table(sweeps, fraction):
    """Markdown: per kind and head, the knee of the mean curve (over seeds and sentences) and of
    each seed's, the per-sentence knees' median and quartiles, the captured mass at the ends; the
    last row of each kind is the uniform yardstick."""
    lines = ["| attention | head | knee w | per seed | per sentence: median [q1, q3] | captured w=0 → knee → max | "
             "knee num_pos | per seed | per sentence | captured num_pos=0 → knee |",
             "|---|---:|---:|---|---|---|---:|---|---|---|"]
    for kind, sweep in sweeps.items():
        n_rows = sweep.width.captured.shape[2]
        for h in range(n_rows):
            cells = []
            for curve, ends in ((sweep.width, True), (sweep.num_pos, False)):
                mean = curve.captured[:, :, h].mean(axis=(0, 1))
                k = int(knee(curve.values, mean, fraction))
                per_seed = knee(curve.values, curve.captured[:, :, h].mean(axis=1), fraction)
                seeds = "/".join(str(int(s)) for s in per_seed)
                masses = f"{mean[0]:.1%} → {mean[k]:.1%}" + (f" → {mean[-1]:.1%}" if ends else "")
                cells += [str(k), seeds, spread(knees(curve, fraction)[:, :, h]), masses]
            lines.append(f"| {kind} | {'uniform' if h == n_rows - 1 else h} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def sentence_knees(curve, fraction):
    """(sentences,): each sentence's knee averaged over seeds and heads (the yardstick left out)."""
    return knees(curve, fraction)[:, :, :-1].mean(axis=(0, 2))


def comparison(results, fraction, rng):
    """Markdown: per kind and parameter, each pair's mean knee (the range across heads; the
    uniform yardstick's) and their difference with its 95 % bootstrap interval over sentences;
    and the conclusion lines."""
    (a_name, a), (b_name, b) = results.items()
    lines = [f"| attention | parameter | {a_name}: mean knee (heads: min–max) [uniform] | {b_name}: mean knee "
             "(heads: min–max) [uniform] | difference [95 % interval] | differs |", "|---|---|---:|---:|---|---|"]
    verdicts = []
    for kind in KINDS:
        for parameter in ("width", "num_pos"):
            curves = [getattr(r[kind], parameter) for r in (a, b)]
            cells = []
            for curve in curves:
                *per_head, uniform = knees(curve, fraction).mean(axis=(0, 1))
                cells.append(f"{np.mean(per_head):.2f} ({min(per_head):.2f}–{max(per_head):.2f}) [{uniform:.2f}]")
            d = bootstrap_difference(*(sentence_knees(c, fraction) for c in curves), rng)
            name = "w" if parameter == "width" else "num_pos"
            lines.append(f"| {kind} | {name} | {cells[0]} | {cells[1]} | {d.difference:+.2f} [{d.low:+.2f}, "
                         f"{d.high:+.2f}] | {'yes' if d.differs else 'no'} |")
            verdicts.append(f"{kind} {name}: {'differs' if d.differs else 'no difference'} "
                            f"({d.difference:+.2f}, interval [{d.low:+.2f}, {d.high:+.2f}])")
    return "\n".join(lines), verdicts


def draw(results, path, fraction):
    """Captured mass (= 1 − distance per row) against w and against num_pos, one line per head
    (mean over seeds and sentences), the knee marked; rows: attention kinds; the pairs side by side."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(len(KINDS), 4, figsize=(15, 9), sharey="row")
    for row, kind in enumerate(KINDS):
        swept = (("width", f"w (num_pos = {WIDTH_NUM_POS})"), ("num_pos", f"num_pos (w = {NUM_POS_WIDTH})"))
        for col, (parameter, label) in enumerate(swept):
            for offset, (pair, sweeps) in enumerate(results.items()):
                axis, curve = axes[row, 2 * col + offset], getattr(sweeps[kind], parameter)
                *mean, uniform = curve.captured.mean(axis=(0, 1))               # heads, then the yardstick
                axis.plot(curve.values, uniform, "k--", lw=1, label="uniform head")
                for h, line in enumerate(mean):
                    k = int(knee(curve.values, line, fraction))
                    drawn = axis.plot(curve.values, line, marker=".", lw=1, label=f"head {h}")
                    axis.plot([k], [line[list(curve.values).index(k)]], "o", ms=8, mfc="none",
                              color=drawn[0].get_color())
                axis.set_title(f"{pair}: {kind}", fontsize=9)
                axis.set_xlabel(label)
                axis.grid(alpha=0.3)
        axes[row, 0].set_ylabel("captured mass\n(1 − distance per row)")
    axes[0, 0].legend(fontsize=7, ncol=2)
    figure.suptitle(f"Structured approximation I_n P + Ẽ: captured mass vs w and num_pos, per head "
                    f"(circles: knees, {fraction:.0%} of the gain; dashed: a uniform head of the same shape)",
                    fontsize=11)
    figure.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def main(argv=None):
    args = parse_arguments(argv)
    multi30k_files(args.multi30k)                       # fail before training anything
    require("matplotlib")
    start, cpu = time.perf_counter(), time.process_time()
    results = {}
    for pair in PAIRS:
        results[pair], length = study_pair(args, pair)
        print(f"\n== {pair}: {len(args.seeds)} seeds, held-out sentences of {args.min_tokens}–{args.max_tokens} "
              f"source tokens (mean {length:.1f}); knees at {args.fraction:.0%} of the captured-mass gain\n")
        print(head_table(results[pair], args.fraction) + "\n")
    table, verdicts = comparison(results, args.fraction, np.random.default_rng(0))
    print(f"== Do the knees differ between the pairs? (mean over seeds, sentences and heads; interval: "
          f"bootstrap over sentences)\n\n{table}\n")
    print("\n".join(verdicts))
    print(f"\nwall {time.perf_counter() - start:.0f} s, CPU {time.process_time() - cpu:.0f} s")
    print(f"figure: {draw(results, (args.figures or args.out) / 'window_study.png', args.fraction)}")
    return results


if __name__ == "__main__":
    run_example(main, __file__)
