"""Greedy decoding with and without the key/value cache: `numpy-transformer bench decode`.

For each configuration of `bench train-step` (its model, in evaluation mode) `greedy_decode`
translates 64 sources of the configuration's length, the batch `numpy-transformer evaluate` and
`translate` decode at once, into exactly 64 tokens each, twice: with the cache (each step feeds
one new token; every masked self-attention appends its keys and values, every cross-attention
projects the memory once) and without it (each step decodes the whole prefix again). Both must
give the same tokens; the time of each is the median of a few runs, the two alternated.

Exactly 64 tokens: `max_len=64`, and an end-of-sentence id that the model never produces. Greedy
decoding's tokens do not depend on which id ends a sentence until that id is chosen, so one
untimed decode with a candidate id shows the whole 64-token path of every sentence; if the
candidate appears in it, the next candidate is an id that does not, and so on. (With a random
model and thousands of tokens the first candidate is nearly always one.) That untimed decode
also warms the cached path up; the uncached runs are long enough not to need it.

The decoder-only model of the same size (a `DecoderOnlyTransformer` with the configuration's
decoder layers, d_model, heads and target vocabulary) generates 64 tokens greedily after a
prompt of 8 random tokens, for 1 and for 16 sequences, with and without its cache; the figure
is tokens per second (generated tokens of all sequences / wall time).
"""
import statistics
import time

import numpy as np

from numpy_transformer.benchmarks.workloads import CONFIGS, DECODE_CONFIGS, DROPOUT, EOS_ID, PAD_ID, SOS_ID, make_batch

N_TOKENS = 64
SENTENCES = 64
PROMPT = 8
GENERATION_BATCHES = (1, 16)


def build_model(config, seed=0):
    from numpy_transformer.model import Transformer
    return Transformer(config.model_config(), np.random.default_rng(seed)).eval()


def never_generated_eos(model, src_ids, max_len=N_TOKENS):
    """An id that greedy decoding of `src_ids` does not produce in its first `max_len` tokens (so
    that, as the end-of-sentence id, every sentence runs to max_len)."""
    from numpy_transformer.decoding import greedy_decode

    candidate, vocabulary = EOS_ID, model.config.tgt_vocab_size
    for _ in range(vocabulary):
        outputs = greedy_decode(model, src_ids, SOS_ID, candidate, max_len=max_len)
        if all(len(tokens) == max_len for tokens in outputs):
            return candidate
        seen = {token for tokens in outputs for token in tokens} | {PAD_ID, SOS_ID, candidate}
        candidate = min(set(range(vocabulary)) - seen)
    raise RuntimeError("no end-of-sentence id lets every sentence run to the maximum length")


def time_decoding(config, runs=3):
    """{"cached": [seconds…], "uncached": [seconds…]}: greedy decoding of N_TOKENS tokens for
    SENTENCES sources of the configuration, the two alternated."""
    from numpy_transformer.decoding import greedy_decode

    model, src_ids = build_model(config), make_batch(config, batch=SENTENCES).src
    eos_id = never_generated_eos(model, src_ids)
    times = {"cached": [], "uncached": []}
    outputs = {}
    for _ in range(runs):
        for name in times:
            start = time.perf_counter()
            outputs[name] = greedy_decode(model, src_ids, SOS_ID, eos_id, max_len=N_TOKENS, use_cache=name == "cached")
            times[name].append(time.perf_counter() - start)
    if outputs["cached"] != outputs["uncached"]:
        raise RuntimeError(f"{config.name}: decoding with and without the cache gave different tokens")
    return times


def decoder_only_model(config, seed=0):
    """The decoder-only model of the configuration's size, in evaluation mode."""
    from numpy_transformer.config import TransformerConfig
    from numpy_transformer.language_model import DecoderOnlyTransformer

    sizes = {name: config.model[name] for name in ("d_model", "n_heads", "d_ff")}
    lm_config = TransformerConfig.decoder_only(config.tgt_vocab, n_layers=config.model["n_decoder_layers"],
                                               dropout=DROPOUT, max_len=PROMPT + N_TOKENS, pad_id=PAD_ID, **sizes)
    return DecoderOnlyTransformer(lm_config, np.random.default_rng(seed)).eval()


def time_generation(config, n_sequences, runs=3):
    """{"cached": [seconds…], "uncached": [seconds…]}: N_TOKENS greedy tokens after a prompt of
    PROMPT tokens for `n_sequences` sequences, the two alternated; the same tokens both ways."""
    from numpy_transformer.sampling import generate

    model = decoder_only_model(config)
    prompt = np.random.default_rng(0).integers(3, config.tgt_vocab, (n_sequences, PROMPT))
    times, outputs = {"cached": [], "uncached": []}, {}
    for _ in range(runs):
        for name in times:
            start = time.perf_counter()
            outputs[name] = generate(model, prompt, N_TOKENS, np.random.default_rng(0), temperature=0,
                                     use_cache=name == "cached")
            times[name].append(time.perf_counter() - start)
    if outputs["cached"] != outputs["uncached"]:
        raise RuntimeError(f"{config.name}: generating with and without the cache gave different tokens")
    return times


def generation_results(name, runs, log):
    """A result dict per batch of GENERATION_BATCHES for the decoder-only model of `name`."""
    results = []
    for n_sequences in GENERATION_BATCHES:
        times = time_generation(CONFIGS[name], n_sequences, runs)
        cached, uncached = (n_sequences * N_TOKENS / statistics.median(times[key]) for key in ("cached", "uncached"))
        results.append({"config": name, "model": "decoder-only", "sequences": n_sequences, "tokens": N_TOKENS,
                        "cached_tokens_per_second": round(cached, 1), "uncached_tokens_per_second": round(uncached, 1),
                        "speedup": round(cached / uncached, 2)})
        log(f"{name}, decoder-only: {n_sequences} sequence{'s' if n_sequences > 1 else ''} × {N_TOKENS} tokens "
            f"after {PROMPT}: with the cache {cached:,.0f} tokens/s, without {uncached:,.0f} tokens/s, "
            f"{cached / uncached:.1f}× faster")
    return results


def profile_cached_decoding(config, top=20):
    """The profile table of one cached greedy decode of N_TOKENS tokens."""
    import autograd
    from numpy_transformer.decoding import greedy_decode

    model, src_ids = build_model(config), make_batch(config, batch=SENTENCES).src
    eos_id = never_generated_eos(model, src_ids)
    with autograd.profile() as prof:
        greedy_decode(model, src_ids, SOS_ID, eos_id, max_len=N_TOKENS)
    return prof.table(top)


def run(config_names=DECODE_CONFIGS, runs=3, profile=False, log=print, progress=None):
    """Measure every configuration, print a line each and the goal; return the result dicts.
    progress: shows the configurations measured (`inference.with_progress`)."""
    from numpy_transformer.inference import with_progress

    results = []
    for name in with_progress(progress, config_names, desc="configurations", unit="config"):
        config = CONFIGS[name]
        times = time_decoding(config, runs)
        cached, uncached = (statistics.median(times[key]) * 1e3 for key in ("cached", "uncached"))
        results.append({"config": name, "tokens": N_TOKENS, "sentences": SENTENCES, "cached_ms": round(cached, 1),
                        "uncached_ms": round(uncached, 1), "speedup": round(uncached / cached, 2)})
        log(f"{name}: {config.description}; {SENTENCES} sentences of {config.length} tokens → {N_TOKENS} tokens "
            f"each: with the cache {cached:.0f} ms, without {uncached:.0f} ms, {uncached / cached:.1f}× faster")
        if profile:
            log(profile_cached_decoding(config))
    log("Goal (cached greedy decoding of 64 tokens ≥ 5× faster than recomputing): "
        + ", ".join(f"{r['config']} {r['speedup']:.1f}× {'met' if r['speedup'] >= 5 else 'missed'}" for r in results))
    for name in config_names:
        results += generation_results(name, runs, log)
    return results
