"""Named settings for `numpy-transformer train --preset NAME`; every field can still be
overridden by a flag (`--d-model 256`, `--steps 5000`, …). How long each takes is in
`numpy-transformer train --help`, measured (`measured_duration`).

| preset          | model                                    | training                                        | data                    |
|-----------------|------------------------------------------|-------------------------------------------------|-------------------------|
| default         | 1 + 1 layers, d 128, 4 heads, d_ff 512,  | batch 64, 3,000 steps, warm-up 400              | Tatoeba en-it (in the   |
|                 | Glorot-uniform weights                   |                                                 | package), shared unigram|
|                 |                                          |                                                 | 8,000, max length 64    |
| translator      | the default model                        | batch 64, 20,000 steps, warm-up 400             | every Tatoeba pair      |
|                 |                                          |                                                 | (tatoeba-full), shared  |
|                 |                                          |                                                 | unigram 8,000, 64       |
| grammar         | the default model                        | batch 64, 1,500 steps, warm-up 400              | built-in, words, 64     |
| thesis-1-head   | 1 + 1 layers, d 512, 1 head, d_ff 2048   | batch 8, 20 epochs, constant lr 1e-4            | opus_books en-it, 350   |
| thesis-8-heads  | 1 + 1 layers, d 512, 8 heads, d_ff 2048  | batch 8, 20 epochs, constant lr 1e-4            | opus_books en-it, 350   |
| base            | 6 + 6 layers, d 512, 8 heads, d_ff 2048, | batch 64, 100,000 steps, warm-up 4,000          | opus_books en-it, 350   |
|                 | tied target embedding (the paper's base) |                                                 |                         |
| small-real      | 1 + 1 layers, d 128, 4 heads, d_ff 512,  | batch 64, 10,000 steps, warm-up 400             | Multi30k en-de (Hub),   |
|                 | Glorot-uniform weights                   |                                                 | shared unigram, 8,000   |
| lm              | GPT: 2 causal layers, d 128, 4 heads,    | batch 64, 1,500 steps, warm-up 400, no label    | built-in, English side, |
|                 | d_ff 512, pre-norm, GELU, tied head      | smoothing                                       | max length 64           |
| mlm             | BERT: 2 layers, d 128, 4 heads, d_ff 512,| batch 64, 2,000 steps, warm-up 400, no label    | built-in, English side, |
|                 | post-norm, GELU, the masked-LM head      | smoothing                                       | max length 64           |

The thesis presets are the experiments of §3.1 (one layer, to see what each head does); the
default is their small, quick cousin, trained on the real English–Italian sentences that ship
with the package (`data/tatoeba.py`) within minutes on two cores; its vocabulary and steps were
chosen by measurement (docs/training.md, "Choosing the default recipe"). `translator` trains the
same model nearly seven times as long on all 344,949 pairs of the package (`tatoeba-full`), within half
an hour on two cores (`--threads 2`), for a model that translates everyday sentences well
(docs/training.md, "A translator worth keeping"). `grammar` is the same
model on the synthetic grammar of `data/grammar.py` (the default until real sentences shipped),
for chapter 3's analyses, which compare the heads with the grammar's word alignments. `default` and `base` draw every matrix, the embeddings included, from
Glorot's uniform rule (`init="xavier_uniform"`, the Annotated Transformer's recipe): on
Multi30k it gives 2.5 BLEU more than the notes' rules at equal steps, and on the built-in
corpus a lower test perplexity (docs/training.md, "The recipe gap"); the thesis presets keep
the notes' rules, the library's default. `base` is the model of Vaswani et al. (2017), Table 3; it is far too large
for a CPU in NumPy and is here to show the sizes (`numpy-transformer train --preset base`
prints its 60-odd million parameters before the first step).

`lm` and `mlm` are the presets of the language models (`train --task lm|mlm` picks them when no
preset is named): small GPT and BERT models of the architecture notes on one side of the
built-in corpus. Label smoothing is off there, so the training loss is the cross-entropy whose
exponential is the perplexity.
"""
import dataclasses
import json
from pathlib import Path

DURATIONS_FILE = Path(__file__).with_name("durations.json")    # written by scripts/regenerate_outputs.py

ONE_LAYER = dict(n_encoder_layers=1, n_decoder_layers=1)
THESIS_RUN = dict(batch_size=8, steps=None, epochs=20, schedule="constant", lr=1e-4, eval_every=1000,
                  log_every=100, checkpoint_every=1000)
SMALL_MODEL = dict(d_model=128, n_heads=4, d_ff=512, dropout=0.1, init="xavier_uniform", **ONE_LAYER)  # default's
BUILTIN_DATA = dict(dataset="builtin", tokenizer="word", shared_vocabulary=False)   # the synthetic grammar, by words
OPUS_BOOKS = dict(dataset="opus_books", pair="en-it", max_len=350)
LANGUAGE_MODEL_RUN = dict(batch_size=64, schedule="warmup", warmup_steps=400, lr_factor=1.0, label_smoothing=0.0,
                          eval_every=250, log_every=50, checkpoint_every=500)


@dataclasses.dataclass(frozen=True)
class Preset:
    """Overrides of the defaults of the model's configuration (`model`: TransformerConfig's, or
    those of TransformerConfig.decoder_only and .encoder_only for the tasks lm and mlm, which take
    n_layers), TrainingConfig (`training`) and DataConfig (`data`, which holds the task); `numpy_transformer.training.settings.resolve` applies them."""
    description: str
    model: dict
    training: dict
    data: dict

    @property
    def task(self):
        return self.data.get("task", "translation")


PRESETS = {
    "default": Preset(
        "small and thesis-like (one layer each side, 4 heads, d_model 128) on the real Tatoeba English–Italian "
        "sentences in the package, one unigram vocabulary of 8,000 pieces, 3,000 steps",
        SMALL_MODEL,
        dict(batch_size=64, steps=3000, schedule="warmup", warmup_steps=400, lr_factor=1.0, eval_every=500,
             log_every=50, checkpoint_every=500),
        dict(dataset="tatoeba", max_len=64, tokenizer="unigram", vocab_size=8000, shared_vocabulary=True)),
    "translator": Preset(
        "a translator worth keeping: the default model on every Tatoeba English–Italian pair in the package "
        "(tatoeba-full, 342,566 training pairs), one unigram vocabulary of 8,000 pieces, 20,000 steps (about 29 "
        "minutes with --threads 2 on a 2-core Intel Xeon)",
        SMALL_MODEL,
        dict(batch_size=64, steps=20_000, schedule="warmup", warmup_steps=400, lr_factor=1.0, eval_every=2000,
             log_every=100, checkpoint_every=2000),
        dict(dataset="tatoeba-full", max_len=64, tokenizer="unigram", vocab_size=8000, shared_vocabulary=True)),
    "grammar": Preset(
        "the default model on the synthetic grammar (the built-in corpus, whose word alignments chapter 3 compares "
        "the heads with), word-level vocabularies, 1,500 steps",
        SMALL_MODEL,
        dict(batch_size=64, steps=1500, schedule="warmup", warmup_steps=400, lr_factor=1.0, eval_every=250,
             log_every=50, checkpoint_every=500),
        dict(BUILTIN_DATA, max_len=64)),
    "thesis-1-head": Preset(
        "thesis §3.1: one layer, 1 head, d_model 512, batch 8, lr 1e-4, 20 epochs of opus_books en-it",
        dict(d_model=512, n_heads=1, d_ff=2048, dropout=0.1, **ONE_LAYER), THESIS_RUN, OPUS_BOOKS),
    "thesis-8-heads": Preset(
        "thesis §3.1: one layer, 8 heads, d_model 512, batch 8, lr 1e-4, 20 epochs of opus_books en-it",
        dict(d_model=512, n_heads=8, d_ff=2048, dropout=0.1, **ONE_LAYER), THESIS_RUN, OPUS_BOOKS),
    "base": Preset(
        "the base model of Vaswani et al. (2017): 6 + 6 layers, d_model 512, 8 heads, warm-up 4000",
        dict(d_model=512, n_heads=8, d_ff=2048, n_encoder_layers=6, n_decoder_layers=6, dropout=0.1,
             tie_embeddings=True, init="xavier_uniform"),
        dict(batch_size=64, steps=100_000, schedule="warmup", warmup_steps=4000, lr_factor=1.0, eval_every=1000,
             log_every=100, checkpoint_every=1000),
        OPUS_BOOKS),
    "small-real": Preset(
        "a real corpus of about 30,000 pairs (Multi30k en-de from the Hub by default): the default model, "
        "Glorot-uniform weights, a shared unigram vocabulary of 8,000 pieces, 10,000 steps (about 30 minutes on "
        "Multi30k on a 2-core AMD EPYC, one thread)",
        SMALL_MODEL,
        dict(batch_size=64, steps=10_000, schedule="warmup", warmup_steps=400, lr_factor=1.0, eval_every=1000,
             log_every=100, checkpoint_every=1000),
        dict(dataset="bentrevett/multi30k", pair="en-de", max_len=64, tokenizer="unigram", vocab_size=8000,
             shared_vocabulary=True)),
    "lm": Preset(
        "a small GPT (2 causal layers, d_model 128, 4 heads) on the English side of the built-in corpus",
        dict(d_model=128, n_heads=4, d_ff=512, n_layers=2, dropout=0.1),
        dict(LANGUAGE_MODEL_RUN, steps=1500), dict(task="lm", dataset="builtin", max_len=64)),
    "mlm": Preset(
        "a small BERT (2 layers, d_model 128, 4 heads, post-norm) on the English side of the built-in corpus",
        dict(d_model=128, n_heads=4, d_ff=512, n_layers=2, dropout=0.1, norm_placement="post"),
        dict(LANGUAGE_MODEL_RUN, steps=2000), dict(task="mlm", dataset="builtin", max_len=64)),
}
TASK_PRESETS = {"translation": "default", "lm": "lm", "mlm": "mlm"}     # the preset of a task named alone


def about(seconds):
    """A measured duration as the docs and the help round it: 'about a minute', 'about 4 minutes'."""
    if seconds < 45:
        return f"about {round(seconds)} seconds"
    minutes = round(seconds / 60)
    return "about a minute" if minutes == 1 else f"about {minutes} minutes"


def measured_duration(name):
    """'about 4 minutes on a 2-core AMD EPYC, one thread': how long `numpy-transformer train
    --preset NAME` took when scripts/regenerate_outputs.py last ran it (durations.json), or None
    for a preset it does not run. The README, the docs and `train --help` all give this figure."""
    try:
        measured = json.loads(DURATIONS_FILE.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    seconds = measured["presets"].get(name)
    return None if seconds is None else f"{about(seconds)} on a {measured['machine']}, one thread"


def get_preset(name):
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; the presets are: {', '.join(PRESETS)}")
    return PRESETS[name]
