"""One sentence at a time against PyTorch: `numpy-transformer bench latency`.

What a user waits for: `numpy-transformer translate` of one sentence with a beam of 4, and
`numpy-transformer generate` of 64 tokens from one prompt. Both are measured on the models of
`bench train-step` ("default": the default preset's encoder-decoder with the grammar preset's
vocabularies; "gpt-default": the lm preset's decoder-only model), random weights, evaluation
mode, tokenization aside:

- translate: a source of 12 tokens, `beam_search` with 4 beams for exactly 20 steps (an
  end-of-sentence id the search never lets into its beam, found as `bench decode` finds one);
- generate: an 8-token prompt, 64 greedy tokens by `sampling.generate`.

Each is also run, as a yardstick, with the decoding step written as plain array code without
the engine and the layers (`plain_decoding`), the same search around it.

PyTorch decodes the same weights (`export.torch_state` into `torch_reference`'s modules) with
the incremental decoder a PyTorch user writes for speed: the encoder once; then at every step
each layer runs on the new position only, its self-attention appending the new keys and values
to a cache and its cross-attention reading the memory's keys and values projected once
(`F.linear` on the layers' own weights, `F.scaled_dot_product_attention`); the beam keeps the
top 4 of the 4 · V extensions and reorders the cache with `index_select`. Both must produce the
same tokens. The figure is the median wall time of a few runs per sentence at the threads of
`--threads`, each framework timed in child processes of its own, in rounds that alternate their
order (`time_in_children`).
"""
import dataclasses
import json
import statistics
import time

import numpy as np

from numpy_transformer.inference import with_progress
from numpy_transformer.training.allocator import reuse_freed_memory
from numpy_transformer.benchmarks.workloads import CONFIGS, PAD_ID, SOS_ID
from numpy_transformer.benchmarks.plain_decoding import PlainNumpyGenerator, PlainNumpyTranslator, covers
from numpy_transformer.benchmarks.train_step import import_torch, in_child

SOURCE_TOKENS, BEAM, STEPS = 12, 4, 20
PROMPT, NEW_TOKENS = 8, 64
FRAMEWORKS = ("numpy", "plain", "torch")


def translation_case(name="default", seed=0):
    """(model, source (1, 12), eos_id): the model of the encoder-decoder configuration `name` and
    an end-of-sentence id with which beam search runs all STEPS steps."""
    from numpy_transformer.benchmarks.decode import build_model

    return beam_case(build_model(CONFIGS[name], seed), seed)


def beam_case(model, seed=0):
    """(model, source, eos_id) for an encoder-decoder `model`: a random source of SOURCE_TOKENS
    tokens and an end-of-sentence id with which beam search runs all STEPS steps."""
    from numpy_transformer.decoding import beam_search_n_best

    source = np.random.default_rng(seed).integers(3, model.config.src_vocab_size, (1, SOURCE_TOKENS))
    for eos_id in range(2, model.config.tgt_vocab_size):
        if eos_id == PAD_ID or eos_id == SOS_ID:
            continue
        n_best = beam_search_n_best(model, source, SOS_ID, eos_id, BEAM, max_len=STEPS)[0]
        if all(len(h.tokens) == STEPS and not h.finished for h in n_best):
            return model, source, eos_id
    raise RuntimeError("no end-of-sentence id lets the beam run to its length limit")


def numpy_translate(model, source, eos_id):
    from numpy_transformer.decoding import beam_search
    return beam_search(model, source, SOS_ID, eos_id, BEAM, max_len=STEPS)[0]


def generation_case(name="gpt-default", seed=0):
    """(model, prompt (1, 8)): the model of the decoder-only configuration `name`."""
    from numpy_transformer.language_model import DecoderOnlyTransformer

    config = CONFIGS[name]
    lm_config = dataclasses.replace(config.model_config(), max_len=PROMPT + NEW_TOKENS)
    model = DecoderOnlyTransformer(lm_config, np.random.default_rng(seed)).eval()
    return model, np.random.default_rng(seed).integers(3, config.tgt_vocab, (1, PROMPT))


def numpy_generate(model, prompt):
    from numpy_transformer.sampling import generate
    return generate(model, prompt, NEW_TOKENS, np.random.default_rng(0), temperature=0)[0][PROMPT:]


def plain_numpy_translate(model, source, eos_id):
    """`numpy_translate` with `PlainNumpyTranslator` in the place of the layers: the same beam
    search (`decoding._BeamSearch`), the same tokens."""
    from numpy_transformer.decoding import _BeamSearch

    search = _BeamSearch(1, BEAM, np.array([STEPS]), eos_id, model.config.pad_id, alpha=1.0, early_stopping=True)
    decoder, last = PlainNumpyTranslator(model, source, copies=BEAM), np.full(BEAM, SOS_ID)
    for t in range(STEPS):
        parents, last = search.step(t, decoder.log_probs(last).astype(np.float64).reshape(1, BEAM, -1))
        if search.done.all():
            break
        decoder.select(parents)
    return search.n_best(1)[0][0].tokens


def plain_numpy_generate(model, prompt):
    """NEW_TOKENS greedy tokens after `prompt` by `PlainNumpyGenerator`: those of `numpy_generate`."""
    generator, step_input, start, generated = PlainNumpyGenerator(model), prompt, 0, []
    for _ in range(NEW_TOKENS):
        logits = generator.step(step_input, start)
        logits[:, model.config.pad_id] = -np.inf
        generated.append(int(logits.argmax(-1)[0]))
        start += step_input.shape[1]
        step_input = np.array([[generated[-1]]])
    return generated


class TorchIncremental:
    """A PyTorch model of `torch_reference` decoded one position at a time with a key/value
    cache: `step(ids, start)` → the logits of the new positions' last one, (rows, V)."""

    def __init__(self, torch, module, layers, embedding, positions, scale, project, memory=None):
        self.torch, self.F = torch, torch.nn.functional
        self.module, self.layers, self.embedding, self.positions = module, layers, embedding, positions
        self.scale, self.project, self.memory = scale, project, memory
        self.cache = [{} for _ in layers]

    def attention(self, mha, x, cache, memory=None):
        """nn.MultiheadAttention `mha` of the new positions x: self-attention over the cached
        keys and values and x's own (memory None; several positions only on the first call), or
        cross-attention over the memory."""
        F, d = self.F, x.shape[-1]
        heads = lambda t: t.unflatten(-1, (mha.num_heads, d // mha.num_heads)).transpose(1, 2)  # noqa: E731
        q = heads(F.linear(x, mha.in_proj_weight[:d], mha.in_proj_bias[:d]))
        if memory is None or "k" not in cache:
            source = x if memory is None else memory
            k, v = (heads(t) for t in F.linear(source, mha.in_proj_weight[d:], mha.in_proj_bias[d:]).chunk(2, -1))
            if memory is None and "k" in cache:
                k, v = self.torch.cat([cache["k"], k], 2), self.torch.cat([cache["v"], v], 2)
            cache["k"], cache["v"] = k, v
        causal = memory is None and q.shape[2] > 1                     # a prompt: its positions see their past only
        out = F.scaled_dot_product_attention(q, cache["k"], cache["v"], is_causal=causal)
        return F.linear(out.transpose(1, 2).flatten(-2), mha.out_proj.weight, mha.out_proj.bias)

    def layer(self, layer, x, cache):
        """One nn.TransformerDecoderLayer (memory given) or nn.TransformerEncoderLayer (causal)."""
        sublayers = [(layer.norm1, lambda h: self.attention(layer.self_attn, h, cache.setdefault("self", {})))]
        if self.memory is not None:
            sublayers.append((layer.norm2, lambda h: self.attention(layer.multihead_attn, h, cache.setdefault(
                "cross", {}), self.memory)))
        last_norm = layer.norm3 if self.memory is not None else layer.norm2
        sublayers.append((last_norm, lambda h: layer.linear2(layer.activation(layer.linear1(h)))))
        for norm, sublayer in sublayers:
            x = x + sublayer(norm(x)) if layer.norm_first else norm(x + sublayer(x))
        return x

    def step(self, ids, start):
        x = self.embedding(ids) * self.scale + self.positions[start:start + ids.shape[1]]
        for layer, cache in zip(self.layers, self.cache):
            x = self.layer(layer, x, cache)
        return self.project(x[:, -1])

    def select(self, rows):
        """Keep the self-attention caches' rows `rows` (the beams' parents; every beam shares the
        memory, so the cross-attention's keys and values stay)."""
        for layer_cache in self.cache:
            cache = layer_cache["self"]
            cache["k"], cache["v"] = cache["k"].index_select(0, rows), cache["v"].index_select(0, rows)


def torch_translator(torch, model):
    """The encoder-decoder `model`'s weights in torch_reference.torch_transformer."""
    from numpy_transformer.interop.export import torch_state
    from numpy_transformer.interop.torch_reference import torch_transformer

    reference = torch_transformer(model.config).eval()
    reference.load_state_dict({name: torch.from_numpy(array) for name, array in torch_state(model).items()})
    return reference


def torch_translate(torch, reference, source, pad_id):
    """Beam search of BEAM beams for STEPS steps, incremental; the best hypothesis's tokens."""
    with torch.inference_mode():
        src = torch.from_numpy(source)
        positions = reference.P if hasattr(reference, "P") else reference.tgt_P
        src_P = reference.P if hasattr(reference, "P") else reference.src_P
        memory = reference.transformer.encoder(reference.src_embedding(src) * reference.scale + src_P[:src.shape[1]])
        head = (lambda y: y @ reference.tgt_embedding.weight.T) if reference.projection is None else reference.projection
        final_norm = reference.transformer.decoder.norm or (lambda y: y)              # pre-norm stacks end with one
        decoder = TorchIncremental(torch, reference, reference.transformer.decoder.layers, reference.tgt_embedding,
                                   positions, reference.scale, lambda y: head(final_norm(y)),
                                   memory.expand(BEAM, -1, -1))
        scores = torch.full((BEAM,), -float("inf"), dtype=torch.float64)
        scores[0] = 0.0
        tokens = torch.full((BEAM, 1), SOS_ID, dtype=torch.int64)
        for t in range(STEPS):
            log_p = torch.log_softmax(decoder.step(tokens[:, -1:], t), -1).double()
            log_p[:, pad_id] = -float("inf")
            scores, index = (scores[:, None] + log_p).flatten().topk(BEAM)
            parents, words = index // log_p.shape[1], index % log_p.shape[1]
            tokens = torch.cat([tokens[parents], words[:, None]], 1)
            decoder.select(parents)
        return tokens[0, 1:].tolist()


def torch_generator(torch, model):
    from numpy_transformer.interop.export import torch_state
    from numpy_transformer.interop.torch_reference import torch_decoder_only

    reference = torch_decoder_only(model.config).eval()
    reference.load_state_dict({name: torch.from_numpy(array) for name, array in torch_state(model).items()})
    return reference


def torch_generate(torch, reference, prompt):
    """NEW_TOKENS greedy tokens after `prompt`, incremental."""
    with torch.inference_mode():
        head = (lambda h: h @ reference.embedding.weight.T) if reference.head is None else reference.head
        final_norm = reference.stack.norm or (lambda h: h)
        decoder = TorchIncremental(torch, reference, reference.stack.layers, reference.embedding,
                                   reference.positions, reference.scale, lambda h: head(final_norm(h)))
        step_input, start, generated = torch.from_numpy(prompt), 0, []
        for _ in range(NEW_TOKENS):
            logits = decoder.step(step_input, start)
            logits[:, PAD_ID] = -float("inf")
            token = logits.argmax(-1)
            generated.append(int(token[0]))
            start += step_input.shape[1]
            step_input = token[:, None]
        return generated


def framework_call(task, config_name, framework, threads):
    """The zero-argument call that runs `task` once on the model of `config_name` with
    `framework` ("numpy", "plain": the yardstick, or "torch"), and returns its tokens; None where
    the yardstick does not cover the model or PyTorch is not installed."""
    case = translation_case(config_name) if task == "translate" else generation_case(config_name)
    if framework == "numpy":
        return lambda: (numpy_translate if task == "translate" else numpy_generate)(*case)
    if framework == "plain":
        plain = plain_numpy_translate if task == "translate" else plain_numpy_generate
        return (lambda: plain(*case)) if covers(case[0].config) else None
    torch = import_torch(threads)
    if torch is None:
        return None
    if task == "translate":
        model, source, _ = case
        reference = torch_translator(torch, model)
        return lambda: torch_translate(torch, reference, source, model.config.pad_id)
    generator = torch_generator(torch, case[0])
    return lambda: torch_generate(torch, generator, case[1])


def print_task_times(task, config_name, framework, threads, runs, warmup=2):
    """In a fresh process: print the JSON {"seconds": […], "tokens": […]} of `runs` timed runs of
    `framework_call(…)` after `warmup` untimed ones (null where there is no such call)."""
    reuse_freed_memory()
    call = framework_call(task, config_name, framework, threads)
    if call is None:
        print("null")
        return
    for _ in range(warmup):
        call()
    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        tokens = call()
        seconds.append(time.perf_counter() - start)
    print(json.dumps({"seconds": seconds, "tokens": tokens}))


def time_in_children(task, config_name, threads, runs, rounds=3):
    """{framework: (seconds, tokens)}: `runs` timed runs of each framework, shared between
    `rounds` rounds; in each round each framework runs in a child process of its own, the order
    reversed every other round. One process for all would let a framework's thread pool, still
    spinning after its own run, slow the next framework's run (docs/performance.md, "One
    sentence at a time")."""
    measured = {}
    for r in range(rounds):
        share = runs // rounds + (r < runs % rounds)
        for framework in (FRAMEWORKS if r % 2 == 0 else FRAMEWORKS[::-1]) if share else ():
            output = json.loads(in_child(__name__, "print_task_times", task, config_name, framework, threads, share))
            if output is not None:
                seconds, tokens = measured.setdefault(framework, ([], output["tokens"]))
                seconds += output["seconds"]
                if output["tokens"] != tokens:
                    raise RuntimeError(f"{framework} decoded different tokens in two processes: {tokens}, "
                                       f"{output['tokens']}")
    return measured


def run(threads=1, runs=7, log=print, configs=("default", "gpt-default"), progress=None):
    """Measure both tasks on the models of `configs` (an encoder-decoder and a decoder-only
    configuration), print a line each; return the result dicts. progress: shows the tasks
    measured (`inference.with_progress`)."""
    results = []
    tasks = (("translate", configs[0]), ("generate", configs[1]))
    for task, config_name in with_progress(progress, tasks, desc="tasks", unit="task"):
        measured = time_in_children(task, config_name, threads, runs)
        ms = {name: round(statistics.median(seconds) * 1e3, 1) for name, (seconds, _) in measured.items()}
        result = {"task": task, "config": config_name, "threads": threads, "numpy_ms": ms["numpy"],
                  "torch_ms": ms.get("torch"), "plain_numpy_ms": ms.get("plain"),
                  "same_tokens": all(tokens == measured["numpy"][1] for _, tokens in measured.values())}
        results.append(result)
        log(describe(result))
    return results


def describe(result):
    what = {"translate": f"translate one sentence of {SOURCE_TOKENS} tokens, beam {BEAM}, {STEPS} steps",
            "generate": f"generate {NEW_TOKENS} tokens after {PROMPT}, greedy"}[result["task"]] + f" ({result['config']})"
    line = f"{what}, {result['threads']} thread(s): NumPy {result['numpy_ms']:.1f} ms"
    plain = "" if result["plain_numpy_ms"] is None else \
        f"; the same step as plain array code (a yardstick): {result['plain_numpy_ms']:.1f} ms"
    if result["torch_ms"] is None:
        return line + " (PyTorch not installed: `pip install torch==2.13.0` adds the comparison)" + plain
    ratio = result["numpy_ms"] / result["torch_ms"]
    same = "the same tokens" if result["same_tokens"] else "DIFFERENT tokens"
    return line + f", PyTorch incremental {result['torch_ms']:.1f} ms, NumPy / PyTorch {ratio:.2f}× ({same}){plain}"
