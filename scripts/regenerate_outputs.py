"""Regenerate the expected outputs that README.md and docs/ show, from the current code.

Every output a page shows as "this command prints" lives between two marker lines,

    <!-- begin output NAME -->
    ...
    <!-- end output NAME -->

and this script alone writes what is between them: it runs the commands in a fresh folder, the
way a user would after the quick start, and puts what they printed in place. It also writes the
short run that `tests/test_expected_run.py` compares with (a change that moves the default run's
numbers fails that test until this script has been run), and records in
`docs/outputs.md` which machine and which date produced each output.

    python scripts/regenerate_outputs.py --list           # the outputs (docs/outputs.md: where they appear)
    python scripts/regenerate_outputs.py                  # all of them (--list gives their minutes)
    python scripts/regenerate_outputs.py short-run examples
    python scripts/regenerate_outputs.py default-run --print   # print, write nothing

Times are part of some outputs (the default run's duration): run it on an idle machine; it
warns when the load average says other programs share the cores. After a run, read the text
around each region the script reports as changed: the docs' comments on a translation or a
score are written by hand.
"""
import argparse
from dataclasses import dataclass, field
import datetime
import json
import os
from pathlib import Path
import platform
import re
import resource
import shlex
import subprocess
import sys
import tempfile
import time

REPO = Path(__file__).resolve().parents[1]
PAGES = ["README.md", *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md"))]
LEDGER = REPO / "docs" / "outputs.json"
LEDGER_REGION = "outputs-ledger"         # the table of docs/outputs.md, written from LEDGER
DURATIONS = REPO / "numpy_transformer" / "training" / "durations.json"   # what `train --help` quotes
SHORT_RUN = REPO / "tests" / "data" / "expected_short_run.json"
REGION = re.compile(r"^<!-- begin output (?P<name>[\w.-]+) -->\n(?P<body>.*?)^<!-- end output (?P=name) -->$",
                    re.S | re.M)

# the short run of the main job that CI repeats (tests/test_expected_run.py): the default preset
# on the first 4,000 Tatoeba pairs for 40 steps, validated every 20
SHORT_RUN_ARGUMENTS = ["--steps", "40", "--eval-every", "20", "--log-every", "10", "--subset", "4000",
                       "--samples", "0", "--beam", "1"]


# ---------------------------------------------------------------------------------------------
# running commands as a user would

@dataclass
class Result:
    command: str
    stdout: str
    stderr: str
    seconds: float
    cpu_seconds: float
    peak_gb: float             # the largest resident memory of the commands run so far


@dataclass
class Workspace:
    """A fresh folder the commands run in (their `runs/…` land there), and what they took."""
    folder: Path
    environment: dict = field(default_factory=dict)
    results: list = field(default_factory=list)

    def run(self, command, fails=False):
        """Run `command` (a line as the docs print it: `numpy-transformer …`, or `python FILE` for a
        script of the repository's or one the output wrote in the folder) in the folder; stop the
        script with its standard error if it fails, or if it succeeds when the docs show it `fails`."""
        words = split_command(command)
        if words[0] == "numpy-transformer":
            argv = [sys.executable, "-m", "numpy_transformer.cli", *words[1:]]
        elif words[0] == "python":
            script = self.folder / words[1] if (self.folder / words[1]).is_file() else REPO / words[1]
            argv = [sys.executable, str(script), *words[2:]]
        else:
            raise ValueError(f"not a command the docs print: {command}")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
               "COLUMNS": "100", **self.environment}
        before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        print(f"$ {command}", file=sys.stderr, flush=True)
        done = subprocess.run(argv, cwd=self.folder, env=env, capture_output=True, text=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if (done.returncode != 0) != fails:
            sys.exit(f"regenerate_outputs: `{command}` ended with status {done.returncode}, "
                     f"{'expected a failure' if fails else 'failed'}:\n{done.stderr}")
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        result = Result(command, done.stdout, done.stderr, time.perf_counter() - start, cpu, after.ru_maxrss / 1e6)
        self.results.append(result)
        return result


def split_command(command):
    """The words of a printed command: `\\` continuations joined, a trailing `# comment` dropped."""
    return shlex.split(command.replace("\\\n", " "), comments=True)


def trained_preset(command):
    """The preset a printed `numpy-transformer train` runs as it is, with nothing but --out,
    --preset or --task given (its duration is the preset's), or None."""
    try:
        words = split_command(command)
    except ValueError:                       # a line cut inside quotes or at a `\`
        return None
    if words[:2] != ["numpy-transformer", "train"]:
        return None
    options = dict(zip(words[2::2], words[3::2]))
    if len(words) % 2 or not set(options) <= {"--out", "--preset", "--task"}:
        return None
    from numpy_transformer.training.presets import TASK_PRESETS
    return options.get("--preset") or TASK_PRESETS[options.get("--task", "translation")]


def duration(seconds):
    """'4 minutes 29 seconds', as the docs write a duration."""
    minutes, seconds = divmod(round(seconds), 60)
    parts = [f"{minutes} minute{'s' * (minutes != 1)}"] if minutes else []
    return " ".join(parts + [f"{seconds} second{'s' * (seconds != 1)}"])


def machine(environment=None):
    """The machine, the Python, NumPy and BLAS that produce the outputs, in one line. With an
    `environment` (--env) it is read in a child process under it, as the commands run: BLAS
    picks its kernels when it loads (OPENBLAS_CORETYPE)."""
    if environment:
        read = f"import runpy; print(runpy.run_path({str(Path(__file__).resolve())!r})['machine']())"
        return subprocess.run([sys.executable, "-c", read], env={**os.environ, **environment}, check=True,
                              capture_output=True, text=True).stdout.strip()
    import numpy
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            model = next(line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        from threadpoolctl import threadpool_info
        blas = ", ".join(f"{info['internal_api']} {info['version']} ({info.get('architecture')} kernels)"
                         for info in threadpool_info() if info["user_api"] == "blas")
    except ImportError:
        build = numpy.show_config(mode="dicts")["Build Dependencies"]["blas"]
        blas = f"{build['name']} {build['version']}"
    return (f"{os.cpu_count()}-core {model} ({platform.system()}), Python {platform.python_version()}, "
            f"NumPy {numpy.__version__}, {blas}")


# ---------------------------------------------------------------------------------------------
# picking the lines the docs show out of what a command printed

def lines_matching(text, *patterns):
    return [line for line in text.splitlines() if any(re.match(p, line) for p in patterns)]


def sample_blocks(text, sources):
    """The sample translations of a `train` printout whose source is one of `sources`, in order."""
    blocks = re.findall(r"^  source .*\n(?:  \S.*\n)+", text, re.M)
    chosen = {re.match(r"  source\s+(.*)", block).group(1): block.rstrip("\n") for block in blocks}
    missing = [s for s in sources if s not in chosen]
    if missing:
        sys.exit(f"regenerate_outputs: the run printed no sample for {missing}; choose others")
    return [chosen[s] for s in sources]


def fenced(lines, language=""):
    return "\n".join([f"```{language}", *lines, "```"])


def took(run, printed="printed"):
    """The sentence before an example's output: what its command took, on which machine."""
    return (f"It took {duration(run.seconds)} of wall time ({duration(run.cpu_seconds)} of CPU) on the machine of "
            f"[outputs.md](outputs.md), one BLAS thread, and {printed}:")


def markdown_tables(text):
    """The Markdown tables a command printed, each as its list of lines, in order."""
    return [block.splitlines() for block in re.findall(r"^\|.*\n(?:\|.*\n?)*", text, re.M)]


def figures(work, *paths):
    """{path: bytes} of figures a command drew into the work folder under the path the page shows."""
    return {path: (work.folder / path).read_bytes() for path in paths}


# ---------------------------------------------------------------------------------------------
# the outputs

@dataclass
class Output:
    name: str
    summary: str
    minutes: float             # on the 2-core development machine, idle
    make: object               # Workspace -> {region name: text} (or {path: text} for files)
    regions: tuple             # the names `make` returns


def default_run(work):
    """The default run (README.md and docs/training.md) and `translate` on its model."""
    run = work.run("numpy-transformer train")
    text = run.stdout
    head = lines_matching(text, r"data:", r"pairs:", r"training pairs:", r"vocabulary", r"model: encoder",
                          r"training:")
    steps = lines_matching(text, r"step\s+\d+/")
    results = text[text.index("Test split:"):].rstrip("\n").splitlines()
    best = lines_matching(text, r"model: runs/default, best")
    samples = re.findall(r"^  source\s+(.*)$", text, re.M)
    took = (f"It took {duration(run.seconds)} on the {os.cpu_count()}-core machine the project is developed "
            f"on ([which](docs/outputs.md); one BLAS thread, the default) and printed:")
    readme = [*head, "...", steps[-1], "", "Sample test translations:",
              *"\n\n".join(sample_blocks(text, samples[-2:][::-1])).splitlines(), "  ...", *results]
    full = [*head, *steps, *best, "", "Sample test translations:",
            *"\n\n".join(sample_blocks(text, samples)).splitlines(), "", *results]
    training_sentence = (f"It prints this ({duration(run.seconds)} of wall time, {duration(run.cpu_seconds)} of "
                         f"CPU, on the machine of [docs/outputs.md](outputs.md), one BLAS thread, the default; "
                         f"longer when other programs share the cores; {run.peak_gb:.1f} GB of memory at its peak):")
    sentences = ["Where is the station?", "I don't like coffee.", "Tom is reading a book in the garden.",
                 "My sister lives in Rome.", "We will go to the beach tomorrow if it doesn't rain.",
                 "I have been waiting for two hours."]
    quoted = " ".join(f'"{s}"' for s in sentences)
    translated = work.run(f"numpy-transformer translate --checkpoint runs/default {quoted}").stdout.splitlines()
    readme_pick = work.run('numpy-transformer translate --checkpoint runs/default "Where is the station?" '
                           '"My sister lives in Rome."').stdout.splitlines()
    pairs = [f'    "{a}" "{b}"' for a, b in zip(sentences[::2], sentences[1::2])]
    command = ["$ numpy-transformer translate --checkpoint runs/default \\", *[p + " \\" for p in pairs[:-1]], pairs[-1]]
    return {
        "default-run": "\n".join([took, "", fenced(readme)]),
        "default-run-full": "\n".join([training_sentence, "", fenced(full)]),
        "translate": (f"The first prints `{readme_pick[0]}` and `{readme_pick[1]}` (a small model after three "
                      "passes over a phrase book makes mistakes too: [more, good and bad]"
                      "(docs/training.md#the-default-run))."),
        "translate-full": fenced([*command, *translated], "text"),
        "docs/figures/training_default_loss.png": (work.folder / "runs" / "default" / "loss.png").read_bytes(),
    }


def grammar_run(work):
    """The `grammar` preset, the synthetic corpus chapter 3 analyses (docs/training.md)."""
    run = work.run("numpy-transformer train --preset grammar --out runs/grammar")
    text = run.stdout
    ending = [*lines_matching(text, r"step\s+\d+/")[-1:], "...", *text[text.index("Test split:"):].splitlines()]
    return {"grammar-run": "\n".join([
        f"`numpy-transformer train --preset grammar --out runs/grammar` took {duration(run.seconds)} on the "
        f"machine of [outputs.md](outputs.md) and ended with:", "", fenced(ending)])}


def short_run(work):
    """The short seeded run CI repeats: losses, validation losses and the test cross-entropy."""
    command = "numpy-transformer train --out runs/short " + " ".join(SHORT_RUN_ARGUMENTS)
    work.run(command)
    folder = work.folder / "runs" / "short"
    log = [json.loads(line) for line in (folder / "log.jsonl").read_text().splitlines()]
    metrics = json.loads((folder / "metrics.json").read_text())
    expected = {
        "arguments": SHORT_RUN_ARGUMENTS,
        "losses": {str(row["step"]): row["loss"] for row in log if "loss" in row},
        "grad_norms": {str(row["step"]): row["grad_norm"] for row in log if "grad_norm" in row},
        "validation_losses": {str(row["step"]): row["validation_loss"] for row in log if "validation_loss" in row},
        "test_cross_entropy": metrics["test_cross_entropy"],
        "parameters": metrics["parameters"],
    }
    return {str(SHORT_RUN.relative_to(REPO)): json.dumps(expected, indent=1) + "\n"}


def language_models(work):
    """The `lm` and `mlm` presets, then `generate` and `fill-mask` on their models
    (docs/language_models.md)."""
    trainings = ["numpy-transformer train --task lm --out runs/gpt        # the preset lm: a small GPT",
                 "numpy-transformer train --task mlm --out runs/bert      # the preset mlm: a small BERT"]
    gpt, bert = (work.run(command) for command in trainings)

    def ending(run):
        """The first sample and the test scores of a language model's printout."""
        text = run.stdout
        first_sample = text[text.index("Samples of the test split:"):].split("\n\n")[0]
        return fenced([*first_sample.splitlines(), "  ...", *text[text.index("Test split:"):text.index("Wrote ")]
                       .rstrip("\n").splitlines()], "text")

    texts = re.search(r"^texts: ([\d,]+) train", gpt.stdout, re.M).group(1)
    words = re.search(r"^vocabulary .*: ([\d,]+) en;", gpt.stdout, re.M).group(1)
    parameters = [re.search(r"^model: .* ([\d,]+) parameters$", run.stdout, re.M).group(1) for run in (gpt, bert)]
    runs = [fenced(trainings, "text"), "",
            f"On the {os.cpu_count()}-core machine the project is developed on ([which](outputs.md); one BLAS thread, "
            f"the built-in corpus's English side: {texts} training texts, {words} words), the `lm` preset (2 "
            f"layers, d_model 128, 4 heads, {parameters[0]} parameters, 1,500 steps of 64 texts) took "
            f"{duration(gpt.seconds)} and ended with:", "", ending(gpt), "",
            f"and the `mlm` preset (the same sizes, post-norm, {parameters[1]} parameters, 2,000 steps) took "
            f"{duration(bert.seconds)}:", "", ending(bert)]
    completions = [
        'numpy-transformer generate --checkpoint runs/gpt --temperature 0 "the old man"',
        'numpy-transformer generate --checkpoint runs/gpt --temperature 0.8 --top-k 20 --seed 1 "the old man" "we"',
        'numpy-transformer fill-mask --checkpoint runs/bert "the [MASK] reads a long book ."']
    printed = [line for command in completions for line in work.run(command).stdout.splitlines()]
    return {"language-model-runs": "\n".join(runs),
            "language-model-completions": "\n".join([fenced(completions, "text"), "",
                                                     "On the two preset runs above, these print:", "",
                                                     fenced(printed, "text")])}


def training_examples(work):
    """docs/training.md's shorter printouts: the lines of log.jsonl, an early stop and the best
    weights, a sentence cut by learned positions, the `data:` lines of parallel text files, table
    files refused."""
    return {**run_examples(work), **long_sentence_examples(work), **corpus_file_examples(work)}


def run_examples(work):
    """The first lines of log.jsonl; an early stop, its best weights and its last ones."""
    first_steps = "numpy-transformer train --steps 500 --samples 0 --beam 1 --out runs/first-steps"
    work.run(first_steps)
    log = (work.folder / "runs" / "first-steps" / "log.jsonl").read_text(encoding="utf-8").splitlines()
    first_lines = [next(line for line in log if '"loss"' in line), next(line for line in log if "validation" in line)]
    small = ("numpy-transformer train --dataset builtin --tokenizer word --no-shared-vocabulary --n-pairs 500 "
             "--d-model 32 --n-heads 2 --d-ff 64 --steps 1500 --eval-every 100 --early-stop 3 --samples 0 --beam 1 "
             "--out runs/small")
    stopped = lines_matching(work.run(small).stdout, r"Stopped early", r"model: runs/small")
    last = work.run('numpy-transformer translate --checkpoint runs/small --weights last "the cat sleeps ."')
    return {
        "log-lines": "\n".join([f"The first of each kind in `{first_steps}` (the default preset's first 500 steps):",
                                "", fenced(first_lines, "json")]),
        "best-weights": "\n".join([fenced(stopped[1:]), "", (
            "`--weights last` takes the last weights instead (`translate --weights last` on the same run prints "
            f"`{lines_matching(last.stderr, r'model: ')[0]}`).")]),
        "early-stop": "\n".join([f"For example, a small model on 500 pairs of the built-in corpus, which it soon "
                                 f"learns by heart (`{small}`), prints at its end:", "", fenced(stopped)]),
    }


def long_sentence_examples(work):
    """A model with learned positions and --max-len 10: what its test split and `translate` say of
    the sentences it reads cut."""
    learned = ("numpy-transformer train --dataset builtin --tokenizer word --no-shared-vocabulary --n-pairs 120 "
               "--max-len 10 --positional learned --d-model 16 --n-heads 2 --d-ff 32 --batch-size 16 --steps 10 "
               "--samples 0 --out runs/learned")
    test_split = lines_matching(work.run(learned).stdout, r"Test split:", r"  sources read cut", r"  perplexity")
    cut = work.run('numpy-transformer translate --checkpoint runs/learned '
                   '"the old man and the young woman read the long book in the garden of the house ."')
    return {
        "long-sentence-note": "\n".join([
            "A sentence a model with learned positions reads cut is named on standard error (`line N` of standard "
            "input, `sentence N` of the arguments; `translate` on the model of the run with `--max-len 10` below):",
            "", fenced(lines_matching(cut.stderr, r"note: sentence \d+ has"))]),
        "long-sentence-test-split": "\n".join([f"A run with learned positions and `--max-len 10` (`{learned}`) prints",
                                               "", fenced([*test_split[:2], "  …", *test_split[2:]])]),
    }


def corpus_file_examples(work):
    """The `data:` lines of parallel text files (a prefix, a folder of splits), and table files
    whose header does not name the languages, refused."""
    files = write_tatoeba_files(work.folder, {"data/corpus": ("train", 1000), "wmt/train": ("train", 1000),
                                              "wmt/valid": ("validation", 50), "wmt/test": ("test", 60)})
    one_step = ("--tokenizer word --no-shared-vocabulary --d-model 16 --n-heads 2 --d-ff 32 --steps 1 --samples 0 "
                "--beam 1")
    data_lines = {dataset: lines_matching(work.run(f"numpy-transformer train --dataset {dataset} --pair en-it "
                                                   f"{one_step} --out runs/{dataset.strip('/').replace('/', '-')}")
                                          .stdout, r"data: ")
                  for dataset in ("data/corpus", "wmt/")}
    (work.folder / "pairs.tsv").write_text("Hello.\tCiao.\nThank you.\tGrazie.\n", encoding="utf-8")
    (work.folder / "pairs.csv").write_text("english,italian\nHello.,Ciao.\nThank you.,Grazie.\n", encoding="utf-8")
    refused = [work.run(f"numpy-transformer train --dataset {table}", fails=True).stderr.strip()
               for table in ("pairs.tsv", "pairs.csv")]
    return {
        "parallel-files-data": "\n".join([
            f"Written that way, the first {files['data/corpus']:,} training pairs of Tatoeba "
            f"(`numpy-transformer train --dataset data/corpus --pair en-it {one_step} --out runs/data-corpus`) give:",
            "",
            fenced(data_lines["data/corpus"], "text"), "",
            f"A folder, `--dataset wmt/`, holding `train`, `valid` and `test` files in both languages "
            f"({files['wmt/train']:,}, {files['wmt/valid']:,} and {files['wmt/test']:,} pairs of Tatoeba's splits):",
            "", fenced(data_lines["wmt/"], "text")]),
        "table-file-refused": fenced(refused, "text"),
    }


def write_tatoeba_files(folder, wanted):
    """Write parallel text files PREFIX.en and PREFIX.it of the first N pairs of a split of the
    packaged Tatoeba corpus, for each {PREFIX: (split, N)} of `wanted`; return {PREFIX: pairs written}."""
    from numpy_transformer.data import load_dataset_splits
    tatoeba = load_dataset_splits("tatoeba")
    written = {}
    for prefix, (split, count) in wanted.items():
        pairs = getattr(tatoeba, split)[:count]
        (folder / prefix).parent.mkdir(parents=True, exist_ok=True)
        (folder / f"{prefix}.en").write_text("".join(f"{pair.src}\n" for pair in pairs), encoding="utf-8")
        (folder / f"{prefix}.it").write_text("".join(f"{pair.tgt}\n" for pair in pairs), encoding="utf-8")
        written[prefix] = len(pairs)
    return written


def chapter1_example(work):
    """What the first code cell of docs/chapter1.md (a tiny Transformer, end to end) prints."""
    page = (REPO / "docs" / "chapter1.md").read_text(encoding="utf-8")
    (work.folder / "chapter1.py").write_text(re.search(r"```python\n(.*?)```", page, re.S).group(1), encoding="utf-8")
    return {"chapter1-tiny-transformer": fenced(work.run("python chapter1.py").stdout.rstrip("\n").splitlines())}


# the examples of docs/beyond_text.md and docs/theory.md: region, the command the page prints, the figure it draws
EXAMPLES = [
    ("vit-digits", "python examples/vit_digits.py --out docs/figures", "docs/figures/vit_cls_attention.png"),
    ("digits-to-words", "python examples/digits_to_words.py --out docs/figures",
     "docs/figures/digits_to_words_attention.png"),
    ("gat-karate", "python examples/gat_karate.py --out docs/figures", "docs/figures/gat_karate.png"),
    ("forecast-attention", "python examples/forecast_attention.py --out docs/figures",
     "docs/figures/forecast_attention.png"),
    ("attention-can-represent", "python examples/attention_can_represent.py --out docs/figures",
     "docs/figures/attention_constructions.png"),
]


def examples(work):
    """What the examples of attention beyond text and of the theory page print, and their figures."""
    made = {}
    for region, command, figure in EXAMPLES:
        run = work.run(command)
        made[region] = "\n".join([took(run), "", fenced(run.stdout.rstrip("\n").splitlines())])
        made.update(figures(work, figure))
    return made


MEMORY_SLOTS_RUNS = [(slots, seed) for slots in (0, 4, 8) for seed in (0, 1)]


def memory_slots(work):
    """The grammar preset with 0, 4 and 8 memory slots, two seeds each, and the slots' share of
    attention during training (docs/beyond_text.md)."""
    rows = ["| slots M | parameters | seed | validation loss | test cross-entropy | test perplexity | BLEU greedy | "
            "BLEU beam 4 | chrF beam 4 | training |", "|" + "---:|" * 10]
    for slots, seed in MEMORY_SLOTS_RUNS:
        folder = f"runs/memory-{slots}-seed-{seed}"
        work.run(f"numpy-transformer train --preset grammar --memory-slots {slots} --seed {seed} --out {folder}")
        m = json.loads((work.folder / folder / "metrics.json").read_text())
        rows.append(f"| {slots} | {m['parameters']:,} | {seed} | {m['validation_loss']:.4f} | "
                    f"{m['test_cross_entropy']:.4f} | {m['perplexity']:.3f} | {m['bleu_greedy']:.2f} | "
                    f"{m['bleu']:.2f} | {m['chrf']:.2f} | {duration(m['train_seconds'])} |")
    run = work.run("python examples/memory_slots.py --steps 1500 --out docs/figures")
    table, = markdown_tables(run.stdout)
    last, = lines_matching(run.stdout, r"attention mass on")
    return {"memory-slots-runs": "\n".join(rows),
            "memory-slots-mass": "\n".join([took(run, "printed this table"), "", *table, "",
                                            f"and last `{last}`."]),
            **figures(work, "docs/figures/memory_slots.png")}


def warmup(work):
    """The warm-up against a constant rate, attention entropy and loss (docs/training.md)."""
    run = work.run("python examples/warmup_attention.py --out docs/figures")
    table, = markdown_tables(run.stdout)
    return {"warmup": "\n".join([took(run, "printed this table (the entropies in nats)"), "", *table]),
            **figures(work, "docs/figures/warmup_attention.png")}


THESIS_FIGURES = tuple(f"docs/figures/chapter3/{model}/{name}.png" for model in ("1-head", "8-heads")
                       for name in ("encoder_self_attn", "decoder_self_attn", "decoder_cross_attn",
                                    "encoder_head_0_values", "spectra", "cross_attn_times_gradient"))


def thesis_experiment(work):
    """examples/thesis_experiment.py on the synthetic grammar: the tables and figures of docs/chapter3.md."""
    run = work.run("python examples/thesis_experiment.py --figures docs/figures/chapter3")
    _, one, eight, validation, _ = run.stdout.split("\n== ")

    def table(section, header):
        found, = [lines for lines in markdown_tables(section) if lines[0].startswith(header)]
        return found

    def by_model(header):
        """The table both models printed under `header`, as one, with a column naming the model."""
        head, rule, *_ = table(eight, header)
        rows = [f"| model {head}", f"|---{rule}"]
        for model, section in (("1 head", one), ("8 heads", eight)):
            rows += [f"| {model} {row}" for row in table(section, header)[2:]]
        return rows

    # the diagonal reference depends on the sentences only: once
    alignment = [row.replace("| 8 heads | diagonal", "| – | diagonal") for row in by_model("| cross-attention |")
                 if not row.startswith("| 1 head | diagonal")]
    return {
        "thesis-experiment-run": "\n".join([took(run, "printed as each model finished training"), "",
                                            fenced(lines_matching(run.stdout, r"trained \d+ steps"))]),
        "thesis-experiment-roles": "\n".join(table(eight, "| attention | head | role | top diagonal")),
        "thesis-experiment-alignment": "\n".join(alignment),
        "thesis-experiment-validation": "\n".join(markdown_tables(validation)[0]),
        "thesis-experiment-substitution": "\n".join(by_model("| w | num_pos | loss")),
        "thesis-experiment-ablation": "\n".join([*lines_matching(eight, r"Loss of the full model"), "",
                                                 *table(eight, "| rank |")]),
        **figures(work, *THESIS_FIGURES),
    }


STUDIO_VIEWS = ("model", "matrix", "equation")
STUDIO_SCREENSHOTS = tuple(f"docs/figures/chapter3/studio_{view}.png" for view in STUDIO_VIEWS)
STUDIO_COMMAND = ('numpy-transformer attention --checkpoint runs/grammar "the cat sleeps on the sofa ." '
                  '--html runs/grammar-studio.html')


def studio_screenshots(page):
    """{path: PNG bytes}: the page in headless Chromium (Debian's, through Playwright, no request
    allowed), on the cross-attention of layer 0, in each of STUDIO_VIEWS, with query 2 chosen."""
    from playwright.sync_api import sync_playwright

    args = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"]
    shots = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=args)
        tab = browser.new_page(viewport={"width": 1100, "height": 700})
        tab.route("**/*", lambda route: route.continue_() if route.request.url == page.as_uri() else route.abort())
        tab.goto(page.as_uri())
        tab.select_option("#kind", "decoder_cross")
        tab.select_option("#query", "2")
        for view, path in zip(STUDIO_VIEWS, STUDIO_SCREENSHOTS):
            tab.click(f'#views button[data-view="{view}"]')
            shots[path] = tab.screenshot(full_page=False)
        browser.close()
    return shots


def attention_studio(work):
    """`attention --html` on the grammar preset's model, and screenshots of its page (docs/chapter3.md).
    (--threads 1, the default, keeps this training's time out of durations.json: the grammar-run
    output measures the preset.)"""
    work.run("numpy-transformer train --preset grammar --out runs/grammar --threads 1")
    run = work.run(STUDIO_COMMAND)
    return {"attention-studio": "\n".join([f"`{STUDIO_COMMAND}` took {duration(run.seconds)} on the machine of "
                                           f"[outputs.md](outputs.md) and printed", "", fenced(run.stdout.splitlines())]),
            **studio_screenshots(work.folder / "runs/grammar-studio.html")}


OUTPUTS = [
    Output("short-run", "the short seeded run tests/test_expected_run.py compares with", 0.3, short_run,
           (str(SHORT_RUN.relative_to(REPO)),)),
    Output("default-run", "`numpy-transformer train` and `translate` on its model", 5, default_run,
           ("default-run", "default-run-full", "translate", "translate-full",
            "docs/figures/training_default_loss.png")),
    Output("grammar-run", "`numpy-transformer train --preset grammar`", 1.2, grammar_run, ("grammar-run",)),
    Output("language-models", "the `lm` and `mlm` presets, `generate` and `fill-mask` on their models", 2,
           language_models, ("language-model-runs", "language-model-completions")),
    Output("training-examples", "docs/training.md's shorter printouts: log lines, early stop, long sentences, "
           "corpus files", 1.8, training_examples,
           ("log-lines", "best-weights", "early-stop", "long-sentence-note", "long-sentence-test-split",
            "parallel-files-data", "table-file-refused")),
    Output("chapter1", "what the tiny Transformer of docs/chapter1.md prints", 0.1, chapter1_example,
           ("chapter1-tiny-transformer",)),
    Output("examples", "the examples of docs/beyond_text.md and docs/theory.md and their figures", 1, examples,
           tuple(name for example in EXAMPLES for name in example[::2])),
    Output("memory-slots", "the grammar preset with memory slots, and the slots' share of attention", 8,
           memory_slots, ("memory-slots-runs", "memory-slots-mass", "docs/figures/memory_slots.png")),
    Output("warmup", "`examples/warmup_attention.py`: attention entropy with and without warm-up", 1, warmup,
           ("warmup", "docs/figures/warmup_attention.png")),
    Output("thesis-experiment", "`examples/thesis_experiment.py` on the synthetic grammar (chapter 3)", 3,
           thesis_experiment, ("thesis-experiment-run", "thesis-experiment-roles", "thesis-experiment-alignment",
                               "thesis-experiment-validation", "thesis-experiment-substitution",
                               "thesis-experiment-ablation", *THESIS_FIGURES)),
    Output("attention-studio", "`attention --html` on the grammar preset's model, and screenshots of the page", 1.3,
           attention_studio, ("attention-studio", *STUDIO_SCREENSHOTS)),
]


# ---------------------------------------------------------------------------------------------
# writing regions, files and the ledger

def regions_of(text):
    return {match["name"]: match["body"] for match in REGION.finditer(text)}


def all_regions():
    """{region name: page} over README.md and docs/*.md."""
    found = {}
    for page in PAGES:
        for name in regions_of((REPO / page).read_text(encoding="utf-8")):
            if name in found:
                sys.exit(f"regenerate_outputs: region {name} is in both {found[name]} and {page}")
            found[name] = page
    return found


def replace_region(text, name, body):
    def put(match):
        return f"<!-- begin output {name} -->\n{body.rstrip(chr(10))}\n<!-- end output {name} -->"
    new, count = re.subn(rf"^<!-- begin output {re.escape(name)} -->\n.*?^<!-- end output {re.escape(name)} -->$",
                         put, text, flags=re.S | re.M)
    assert count == 1, name
    return new


def write(produced, record):
    """Put each produced region in its page and each produced file in place; return the names
    that changed."""
    pages, changed = all_regions(), []
    for name, body in produced.items():
        if name in pages:
            path = REPO / pages[name]
            text = path.read_text(encoding="utf-8")
            new = replace_region(text, name, body)
        else:
            path = REPO / name
            if not path.parent.is_dir():
                sys.exit(f"regenerate_outputs: {name} is neither a region of the docs nor a file's place")
            text = (path.read_bytes() if isinstance(body, bytes) else path.read_text(encoding="utf-8")) \
                if path.exists() else None
            new = body
        if new != text:
            changed.append(name)
            temporary = path.with_name(path.name + ".regenerating")
            if isinstance(new, bytes):
                temporary.write_bytes(new)
            else:
                temporary.write_text(new, encoding="utf-8")
            temporary.replace(path)
    ledger = json.loads(LEDGER.read_text(encoding="utf-8")) if LEDGER.exists() else {}
    ledger = dict(sorted({**ledger, **record}.items()))
    write_durations(record)
    LEDGER.write_text(json.dumps(ledger, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    page = REPO / pages[LEDGER_REGION]
    page.write_text(replace_region(page.read_text(encoding="utf-8"), LEDGER_REGION, ledger_table(ledger)),
                    encoding="utf-8")
    return changed


def write_durations(record):
    """Add the durations of the presets this run trained as they are to durations.json, which
    `train --help` quotes (the README and the docs quote the same runs' regions)."""
    measured = json.loads(DURATIONS.read_text(encoding="utf-8")) if DURATIONS.exists() else {"presets": {}}
    for row in record.values():
        for preset, seconds in row["presets"].items():
            measured["presets"][preset] = seconds
            measured["machine"] = row["machine"].split(" (")[0]
    DURATIONS.write_text(json.dumps(measured, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def ledger_table(ledger):
    """The Markdown table of docs/outputs.md: each output, where it appears, when and where it
    was produced, and what its commands took."""
    where = {output.name: output.regions for output in OUTPUTS}
    pages = all_regions()
    rows = ["| output | shown in | date | machine | time (wall / CPU) |", "|---|---|---|---|---|"]
    for name, row in ledger.items():
        places = {pages.get(region, region) for region in where.get(name, ())}
        figures = sum(place.endswith(".png") for place in places)
        shown = ", ".join(sorted(place for place in places if not place.endswith(".png")))
        shown += f" (+ {figures} figure{'s' * (figures != 1)})" if figures else ""
        rows.append(f"| `{name}` | {shown} | {row['date']} | {row['machine']} | "
                    f"{duration(row['seconds'])} / {duration(row['cpu_seconds'])} |")
    return "\n".join(rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description="Regenerate the expected outputs of README.md and docs/.")
    parser.add_argument("names", nargs="*", help="the outputs to regenerate (default: all; see --list)")
    parser.add_argument("--list", action="store_true", help="list the outputs and the regions they fill")
    parser.add_argument("--print", action="store_true", help="print what the outputs would be; write nothing")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="run the commands with this environment variable (e.g. OPENBLAS_CORETYPE=SkylakeX, "
                             "to see how far the figures move with other BLAS kernels)")
    parser.add_argument("--work", type=Path, help="run the commands in this folder (default: a temporary one)")
    options = parser.parse_args(argv)
    known = {output.name: output for output in OUTPUTS}
    if any("=" not in setting for setting in options.env):
        parser.error(f"--env takes NAME=VALUE, got {options.env}")
    environment = dict(setting.split("=", 1) for setting in options.env)
    if options.list:
        for output in OUTPUTS:
            print(f"{output.name:18} ~{output.minutes:g} min  {output.summary}")
        return 0
    unknown = [name for name in options.names if name not in known]
    if unknown:
        parser.error(f"no output named {', '.join(unknown)} (the outputs: {', '.join(known)})")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    if load > 0.5 and not options.print:
        print(f"warning: load average {load:.1f}: other programs share the cores, and the durations this "
              "script writes will be too long", file=sys.stderr)
    chosen = [known[name] for name in options.names] or OUTPUTS
    with tempfile.TemporaryDirectory(prefix="regenerate-outputs-") as temporary:
        folder = options.work or Path(temporary)
        folder.mkdir(parents=True, exist_ok=True)
        produced, record, where = {}, {}, machine(environment)
        for output in chosen:
            work = Workspace(folder / output.name, environment)
            work.folder.mkdir(exist_ok=True)
            made = output.make(work)
            assert set(made) == set(output.regions), (output.name, sorted(made))
            produced.update(made)
            record[output.name] = {
                "date": datetime.date.today().isoformat(), "machine": where,
                "commands": [result.command for result in work.results],
                "seconds": round(sum(result.seconds for result in work.results), 1),
                "cpu_seconds": round(sum(result.cpu_seconds for result in work.results), 1),
                "presets": {trained_preset(r.command): round(r.seconds) for r in work.results
                            if trained_preset(r.command)}}
    if options.print:
        for name, body in produced.items():
            print(f"=== {name}\n" + (f"({len(body):,} bytes)" if isinstance(body, bytes) else body))
        return 0
    changed = write(produced, record)
    print(f"regenerated {', '.join(output.name for output in chosen)} on {where}")
    print("changed: " + (", ".join(changed) or "nothing") + (
        " (read the text around each changed region: comments on its figures are written by hand)"
        if changed else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
