"""Evaluation of a trained model, in one place: what `numpy-transformer evaluate` and the end of
`train` compute and print, and the validation loss of the training loop.

The measures:

- Cross-entropy and perplexity. The mean per-token cross-entropy −(1/T) Σ_t log p(y_t | context)
  over the T targets that count (a translation's non-padding labels, EOS included; every next
  token of a causal language model; the masked tokens of a masked one, with the fixed evaluation
  masks of `training/loss.py`), without label smoothing and with dropout off; its exponential is
  the perplexity.
- BLEU (Papineni et al. 2002) and chrF (Popović 2015) of translations, from `sacrebleu`, on
  written text: the model's tokens and the references both go through `detokenize` first
  (`l ' uomo .` → `l'uomo.`), and sacrebleu applies its own standard tokenisation, so the scores
  compare with published ones. Each score comes with sacrebleu's signature (the settings that
  produced it).
- The top-1 accuracy of a language model's predicted tokens.

What is evaluated:

- a translation model (`evaluate_pairs`): its translations of every pair of a split (sentences
  longer than max_len included), greedy and with beam search (`numpy_transformer.translation`)
  side by side, BLEU and chrF of both, perplexity;
- a language model (`evaluate_texts`): perplexity, accuracy, and a few samples (causal: the
  first third of a text's words continued greedily; masked: the middle word of a text replaced by
  [MASK], and the three best candidates);
- a split of a run's data (`evaluate_split`, what `train` runs at its end) or of a saved run
  (`evaluate_checkpoint`, the `evaluate` command), printed by `print_evaluation`.

    >>> scores = corpus_scores(["il gatto dorme."], ["il gatto dorme."])
    >>> round(scores.bleu), round(scores.chrf)
    (100, 100)
"""
import dataclasses
import math
import sys

import numpy as np

from numpy_transformer.completion import complete, fill_mask
from numpy_transformer.data.batching import encode_pairs
from numpy_transformer.data.detokenize import detokenize
from numpy_transformer.data.texts import encode_texts
from numpy_transformer.inference import checked_scores, inference_mode, scoring_mode, with_progress
from numpy_transformer.training.checkpoint import load_checkpoint
from numpy_transformer.training.loss import TRANSLATION, make_objective
from numpy_transformer.training.prepare import prepare_data
from numpy_transformer.translation import read_sources, written_translations


# Cross-entropy and perplexity.

def ordered_batches(encoded, batch_size, objective=TRANSLATION, progress=None):
    """The sequences of `encoded` in batches of similar lengths, in a fixed order (no
    randomness: evaluation must not move any training generator). progress: shows the batches
    read (`inference.with_progress`)."""
    order = np.lexsort(encoded.length_keys())
    starts = range(0, len(order), batch_size)
    for number, start in enumerate(with_progress(progress, starts, desc="perplexity", unit="batch")):
        yield objective.batch(encoded, order[start:start + batch_size], ("evaluate", number))


def mean_cross_entropy(model, encoded, batch_size=64, label_smoothing=0.0, objective=TRANSLATION, progress=None,
                       parallel=None):
    """−(1/T) Σ_t log p(y_t | context) over every target that counts in `encoded` (an
    `EncodedPairs`, or an `EncodedTexts` with a language model's objective), in eval mode: the
    validation loss. Returns a float. progress: see `ordered_batches`. parallel: a
    `DataParallel` whose processes share the batches (the sum is taken in the same order)."""
    if len(encoded) == 0:
        raise ValueError("mean_cross_entropy: nothing to evaluate (all longer than the maximum length?)")
    batches = ordered_batches(encoded, batch_size, objective, progress)
    if parallel is None:
        losses = (batch_loss(model, batch, objective, label_smoothing) for batch in batches)
    else:
        losses = parallel.map(batch_loss, batches, objective, label_smoothing)
    total, tokens = 0.0, 0
    for loss, count in losses:
        total += loss * count
        tokens += count
    return total / tokens


def batch_loss(model, batch, objective, label_smoothing=0.0):
    """(the mean loss of one batch in eval mode, its number of targets)."""
    with inference_mode(model):
        return objective.loss(model, batch, label_smoothing).item(), batch.n_tokens


def perplexity(cross_entropy):
    """exp(mean per-token cross-entropy in nats): the number of equally likely words the model
    hesitates between, on average. 1 is certainty; a uniform guess over l words gives l.
    (Beyond e^700 the float overflows: inf.)"""
    return math.exp(cross_entropy) if cross_entropy < 700 else math.inf


# Translation: BLEU, chrF and perplexity.

@dataclasses.dataclass(frozen=True)
class Scores:
    """Corpus BLEU and chrF (0–100) and sacrebleu's signatures of the two metrics."""
    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str

    def line(self):
        return f"BLEU {self.bleu:.2f}  chrF {self.chrf:.2f}"


def corpus_scores(hypotheses, references):
    """Corpus BLEU and chrF of written hypotheses against their written references: one string
    per hypothesis, or a list of them (all the translations of its source; any number). sacrebleu
    reads the references as streams, the k-th stream holding each hypothesis's k-th reference or
    None where it has fewer; its signature then says nrefs:var."""
    from sacrebleu.metrics import BLEU, CHRF

    if len(hypotheses) != len(references):
        raise ValueError(f"corpus_scores: {len(hypotheses)} hypotheses for {len(references)} references")
    streams = reference_streams(references)
    bleu, chrf = BLEU(), CHRF()
    return Scores(bleu.corpus_score(hypotheses, streams).score, chrf.corpus_score(hypotheses, streams).score,
                  str(bleu.get_signature()), str(chrf.get_signature()))


def reference_streams(references):
    """sacrebleu's reference streams from one reference, or a list of references, per hypothesis."""
    lists = [[reference] if isinstance(reference, str) else list(reference) for reference in references]
    if any(not found for found in lists):
        raise ValueError("corpus_scores: a hypothesis without a reference")
    depth = max((len(found) for found in lists), default=1)
    return [[found[k] if k < len(found) else None for found in lists] for k in range(depth)]


def group_by_source(pairs):
    """[(source, [pairs])]: the pairs of each distinct source text, in the order of first
    appearance. A corpus with several translations of a sentence repeats its source once per
    translation; it is translated once and scored against all of them."""
    groups = {}
    for pair in pairs:
        groups.setdefault(pair.src, []).append(pair)
    return list(groups.items())


@dataclasses.dataclass
class Evaluation:
    """A held-out split translated both ways and scored, one hypothesis per distinct source.
    sources: written text; references: the written translations of each source (a list each);
    greedy / beam: the hypotheses (beam None when beam_size is 1); n_pairs: the pairs scored,
    all of them; n_cut: sources the model read cut (learned positions, see
    `translation.read_sources`); cross_entropy: over the references of the n_perplexity_pairs
    pairs the model's positions hold (all of them where its positions extend), None when none
    does; position_limit: the model's (None: any length)."""
    sources: list
    references: list
    greedy: list
    beam: list
    greedy_scores: Scores
    beam_scores: Scores
    cross_entropy: float
    beam_size: int
    n_pairs: int
    n_perplexity_pairs: int
    n_cut: int
    position_limit: int

    @property
    def perplexity(self):
        return None if self.cross_entropy is None else perplexity(self.cross_entropy)

    @property
    def best(self):
        """The scores of beam search, or of greedy decoding when there was no beam."""
        return self.beam_scores or self.greedy_scores

    @property
    def max_references(self):
        return max(len(found) for found in self.references)


def evaluate_pairs(model, src_tokenizer, tgt_tokenizer, pairs, beam_size=4, length_penalty=1.0, batch_size=64,
                   progress=None):
    """Translate each distinct source of the pairs (`Pair`s) greedily and with beam search, score
    both against all the source's translations, and give the perplexity of the references.

    Every pair counts in BLEU and chrF, whatever its length: each source is read as `translate`
    reads it (whole where the model's positions extend past max_len; its first max_len − 2
    tokens with learned positions), and every reference is scored. The perplexity counts every
    pair whose source and target the model's positions hold (`TransformerConfig.position_limit`,
    encoded as in training): all of them for sinusoidal or relative positions; with learned
    positions, the longer pairs are left out of the perplexity only.

    progress: shows each of the three passes, batch by batch (`inference.with_progress`)."""
    if not pairs:
        raise ValueError("no pair to evaluate: the split is empty")
    groups = group_by_source(pairs)
    sources, cut = read_sources(model, src_tokenizer, [source for source, _ in groups])
    references = [[detokenize(pair.tgt, tgt_tokenizer.language) for pair in found] for _, found in groups]
    greedy = written_translations(model, tgt_tokenizer, sources, 1, length_penalty, batch_size, progress)
    beam = written_translations(model, tgt_tokenizer, sources, beam_size, length_penalty, batch_size, progress) \
        if beam_size > 1 else None
    limit = model.config.position_limit
    held = encode_pairs(pairs, src_tokenizer, tgt_tokenizer, limit)
    cross_entropy = mean_cross_entropy(model, held, batch_size, progress=progress) if len(held) else None
    return Evaluation([detokenize(source, src_tokenizer.language) for source, _ in groups], references, greedy, beam,
                      corpus_scores(greedy, references), beam and corpus_scores(beam, references), cross_entropy,
                      beam_size, len(pairs), len(held), len(cut), limit)


# Language models: perplexity, accuracy, samples.

@dataclasses.dataclass
class LanguageModelEvaluation:
    """cross_entropy (nats per token) and accuracy over n_tokens predicted tokens of n_texts
    texts (n_skipped left out by the maximum length); samples: (what, text) rows to print."""
    cross_entropy: float
    accuracy: float
    n_texts: int
    n_tokens: int
    n_skipped: int
    samples: list

    @property
    def perplexity(self):
        return perplexity(self.cross_entropy)


def evaluate_texts(model, tokenizer, texts, objective, max_len, length_policy="drop", batch_size=64, samples=4,
                   progress=None):
    """The `LanguageModelEvaluation` of `texts`, encoded as in training; progress: shows the
    batches scored (`inference.with_progress`)."""
    encoded = encode_texts(texts, tokenizer, max_len, length_policy, objective.framing)
    if len(encoded) == 0:
        raise ValueError(f"no text to evaluate: all {len(texts)} are longer than the maximum length {max_len}")
    cross_entropy, accuracy, n_tokens = token_scores(model, encoded, objective, batch_size, progress)
    kept = [texts[i] for i in dict.fromkeys(encoded.text_index.tolist())]
    rows = (causal_samples if objective.framing == "causal" else masked_samples)(model, tokenizer, kept[:samples])
    return LanguageModelEvaluation(cross_entropy, accuracy, len(kept), n_tokens, len(texts) - len(kept), rows)


def token_scores(model, encoded, objective, batch_size=64, progress=None):
    """(mean cross-entropy, top-1 accuracy, number) of the predicted tokens of `encoded`, in
    eval mode, without label smoothing; progress: see `ordered_batches`."""
    total, correct, tokens = 0.0, 0, 0
    with scoring_mode(model):
        for batch in ordered_batches(encoded, batch_size, objective, progress):
            logits = model(batch.inputs)
            checked_scores(logits.data, "logits")
            counted = batch.targets != batch.ignore_index
            total += objective.cross_entropy(logits, batch).item() * batch.n_tokens
            correct += int((logits.data.argmax(axis=-1) == batch.targets)[counted].sum())
            tokens += batch.n_tokens
    return total / tokens, correct / tokens, tokens


def causal_samples(model, tokenizer, texts):
    """(what, text) rows: each text, and its first third continued greedily."""
    rows = []
    for text in texts:
        words = text.split()
        prompt = " ".join(words[:max(1, len(words) // 3)])
        (completion,) = complete(model, tokenizer, [prompt], np.random.default_rng(0), model.config.max_len,
                                 temperature=0)
        rows += [("text", text), ("prompt", prompt), ("greedy", completion), ("", "")]
    return rows


def masked_samples(model, tokenizer, texts):
    """(what, text) rows: each text with its middle word masked, and the three best candidates."""
    rows = []
    for text in texts:
        words = text.split()
        middle = len(words) // 2
        masked = " ".join(words[:middle] + ["[MASK]"] + words[middle + 1:])
        candidates = fill_mask(model, tokenizer, masked, top_k=3)[0]
        best = ", ".join(f"{token} {probability:.2f}" for token, probability in candidates)
        rows += [("masked", masked), ("answer", words[middle]), ("best", best), ("", "")]
    return rows


# A split of a run's data, as `train` and `evaluate` print it.

def evaluate_checkpoint(directory, split="test", beam_size=4, length_penalty=1.0, samples=4, cache_dir=None,
                        progress=None, weights="best"):
    """The `evaluate` command: load the run saved in `directory` with its `weights` ("best" or
    "last", `load_checkpoint`), rebuild its data from the data description saved with it, and
    print (and return) the evaluation of the split. progress: None (no bar, nor those of
    `datasets`), or a function that draws one (`inference.with_progress`)."""
    checkpoint = load_checkpoint(directory, weights)
    data = prepare_data(checkpoint.data_config, cache_dir, checkpoint.tokenizers, progress=progress is not None)
    print(checkpoint.weights_line(weights))
    print(f"data: {data.splits.source}")
    print_warnings(data)
    objective = make_objective(checkpoint.task, checkpoint.tokenizers, checkpoint.training_config.seed)
    return evaluate_split(checkpoint.model, data, checkpoint.data_config, objective, split, beam_size, length_penalty,
                          samples, progress)


def print_warnings(data):
    """The warnings of the prepared data (`PreparedData.warnings`), on standard error."""
    for warning in data.warnings:
        print(warning, file=sys.stderr)


def evaluate_split(model, data, data_config, objective, split="test", beam_size=4, length_penalty=1.0, samples=4,
                   progress=None):
    """Evaluate `model` on a split ("test" or "validation") of its prepared data (`PreparedData`
    of `data_config`): its pairs (`evaluate_pairs`, greedy and with a beam of `beam_size`) or
    texts (`evaluate_texts`). Prints `samples` samples and the scores; returns the evaluation.
    progress: shows the passes over the split (`inference.with_progress`)."""
    items = data.splits.test if split == "test" else data.splits.validation
    if not items:
        raise ValueError(f"{data.splits.source}: the split to evaluate is empty (the corpus is too small)")
    if data_config.task == "translation":
        evaluation = evaluate_pairs(model, data.src_tokenizer, data.tgt_tokenizer, items, beam_size, length_penalty,
                                    progress=progress)
    else:
        evaluation = evaluate_texts(model, data.tokenizers[0], items, objective, data_config.max_len,
                                    data_config.length_policy, samples=samples, progress=progress)
    print_evaluation(evaluation, split, samples)
    return evaluation


def print_evaluation(evaluation, split, samples):
    """What `train` and `evaluate` print about a split: `print_translation_scores`, or
    `print_language_model_scores` for a language model."""
    if isinstance(evaluation, LanguageModelEvaluation):
        print_language_model_scores(evaluation, split)
    else:
        print_translation_scores(evaluation, split, samples)


def reference_counts(evaluation):
    """`1,000 sources, one reference each` or `1,000 sources with 2,303 references (1 to 9 each),
    every one scored`."""
    n_sources = len(evaluation.sources)
    if evaluation.max_references == 1:
        return f"{n_sources:,} sources, one reference each"
    fewest = min(len(found) for found in evaluation.references)
    return (f"{n_sources:,} distinct sources translated once each and scored against all "
            f"{sum(map(len, evaluation.references)):,} references ({fewest} to {evaluation.max_references} a source)")


def print_language_model_scores(evaluation, split):
    """The samples, then the perplexity and accuracy of the predicted tokens."""
    if evaluation.samples:
        print(f"\nSamples of the {split} split:")
        print("\n".join(f"  {what:<8} {text}".rstrip() for what, text in evaluation.samples))
    skipped = f" ({evaluation.n_skipped} longer than the maximum length left out)" if evaluation.n_skipped else ""
    print(f"{split.capitalize()} split: {evaluation.n_texts:,} texts{skipped}, {evaluation.n_tokens:,} predicted tokens.")
    print(f"  perplexity {evaluation.perplexity:.3f} (cross-entropy {evaluation.cross_entropy:.4f} nats per token), "
          f"top-1 accuracy {evaluation.accuracy:.1%}")


def print_translation_scores(evaluation, split, samples):
    """Sample translations, BLEU and chrF (greedy and beam) with sacrebleu's signatures, perplexity."""
    rows = [("greedy", evaluation.greedy_scores)]
    if evaluation.beam_scores:
        rows.append((f"beam {evaluation.beam_size}", evaluation.beam_scores))
    shown = min(samples, len(evaluation.sources))
    if shown:
        print(f"\nSample {split} translations:")
    for i in range(shown):
        lines = [("source", evaluation.sources[i])] + [("reference" if k == 0 else "", reference)
                                                        for k, reference in enumerate(evaluation.references[i])]
        lines.append(("greedy", evaluation.greedy[i]))
        if evaluation.beam:
            lines.append((f"beam {evaluation.beam_size}", evaluation.beam[i]))
        print("\n".join(f"  {name:<10} {text}" for name, text in lines) + "\n")
    print(f"{split.capitalize()} split: {evaluation.n_pairs:,} pairs, {reference_counts(evaluation)}.")
    if evaluation.n_cut:
        limit = evaluation.position_limit
        print(f"  sources read cut to the model's {limit} positions (their first {limit - 2} tokens): "
              f"{evaluation.n_cut:,}; their references all count")
    print(f"  {'':<8} {'BLEU':>6} {'chrF':>6}")
    for name, scores in rows:
        print(f"  {name:<8} {scores.bleu:>6.2f} {scores.chrf:>6.2f}")
    print(f"  BLEU signature: {evaluation.greedy_scores.bleu_signature}")
    print(f"  chrF signature: {evaluation.greedy_scores.chrf_signature}")
    print(f"  {perplexity_line(evaluation)}")


def perplexity_line(evaluation):
    """`perplexity 7.123 (cross-entropy 1.9633 nats per token)`, and which pairs it leaves out."""
    left_out = evaluation.n_pairs - evaluation.n_perplexity_pairs
    beyond = f"longer than the model's {evaluation.position_limit} positions"
    if evaluation.cross_entropy is None:
        return f"perplexity: none, every pair is {beyond}"
    line = f"perplexity {evaluation.perplexity:.3f} (cross-entropy {evaluation.cross_entropy:.4f} nats per token)"
    return f"{line} over {evaluation.n_perplexity_pairs:,} pairs; left out, {beyond}: {left_out:,}" if left_out \
        else line
