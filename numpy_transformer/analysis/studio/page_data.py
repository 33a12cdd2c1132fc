"""The attention studio's numbers as one dict, written into the page as JSON
(`<script type="application/json" id="attention-data">`; the format is documented in
docs/chapter3.md, "The attention studio").

    {"format": "numpy-transformer attention studio", "version": 1, "model": …, "task": …,
     "tokens": {"source": […], "target": […]}   (a language model: {"text": […]}),
     "attention": [{"kind", "layer", "head", "queries", "keys", "weights", "role", …}, …],
     "masks": {kind: [[0/1 …], …]},   "steps": [greedy decoding replay] (translations),
     "notes": [lines saying what is left out]}

`weights` is the query × key matrix of eq. (6) (rows are queries), 4 decimals. With the
equation numbers, each entry also carries the rows of Q^(h), K^(h), V^(h) (6 decimals) from
which the page recomputes eqs. (5)–(7), (10) for a chosen query. With the approximation, the
projection X = I_nP + Ẽ of eq. (21) (analysis.projection) and its distance |H − X|.
"""
import numpy as np

from numpy_transformer.analysis.hooks import kind_of, layer_of
from numpy_transformer.analysis.projection import project_structured
from numpy_transformer.analysis.roles import classify_head

FORMAT = "numpy-transformer attention studio"
VERSION = 1
KINDS = {"encoder.self_attn": "encoder_self", "decoder.self_attn": "decoder_self",
         "decoder.cross_attn": "decoder_cross"}
WEIGHT_DECIMALS, VECTOR_DECIMALS = 4, 6
# Bounds on what a page carries, in numbers (each a few bytes of JSON): the weights of every head
# always; the Q, K, V rows and the approximations only while the page stays small. At 256 tokens,
# 6 layers × 12 heads and d_k = 64 the weights alone are 4.7 million numbers.
MAX_WEIGHT_NUMBERS = 6_000_000
MAX_VECTOR_NUMBERS = 1_500_000
MAX_APPROXIMATION_NUMBERS = 1_500_000


def studio_kind(name, language_model):
    """"decoder.0.cross_attn" → "decoder_cross"; a language model's one stack is "self"."""
    return "self" if language_model else KINDS[kind_of(name)]


def sides(name, language_model):
    """(the query tokens' side, the key tokens' side) of a layer, names of `tokens`."""
    if language_model:
        return "text", "text"
    if name.startswith("encoder"):
        return "source", "source"
    return "target", ("target" if kind_of(name) == "decoder.self_attn" else "source")


def rounded(array, decimals):
    """Nested lists of `array` rounded to `decimals` (what JSON carries)."""
    return np.round(np.asarray(array, dtype=np.float64), decimals).tolist()


def count_numbers(capture, vectors):
    """(weights, Q/K/V rows) numbers a page of this capture would carry."""
    weights = sum(w.size for w in capture.weights.values())
    rows = sum(v.Q.size + v.K.size + v.V.size for v in vectors.values()) if vectors else 0
    return weights, rows


def studio_data(capture, vectors=None, model_name="", approximation=(3, 2), replay=True):
    """The page's data (the module docstring) for an `AttentionCapture` and, optionally, the
    {name: HeadVectors} of head_vectors.studio_capture. approximation: (w, num_pos) of the
    structured approximation of eq. (21), or None; replay: the greedy decoding steps of a
    translation (only when the target is the model's own greedy translation). Parts beyond the
    bounds above are left out, with a note saying so."""
    language_model = not (capture.src_tokens and capture.tgt_tokens)
    n_weights, n_rows = count_numbers(capture, vectors)
    if n_weights > MAX_WEIGHT_NUMBERS:
        raise ValueError(f"the attention of this input has {n_weights:,} weights, more than the page's bound of "
                         f"{MAX_WEIGHT_NUMBERS:,}: use a shorter input (256 tokens on 6 layers × 12 heads fit)")
    notes = []
    if vectors and n_rows > MAX_VECTOR_NUMBERS:
        notes.append(f"equation view left out: the Q, K, V rows would be {n_rows:,} numbers (bound "
                     f"{MAX_VECTOR_NUMBERS:,}); a shorter input shows it")
        vectors = None
    with_bias = sorted(name for name, layer in (vectors or {}).items() if layer.has_bias)
    if with_bias:
        notes.append(f"equation view left out for the layers whose scores get a relative position bias "
                     f"(which the page does not carry): {', '.join(with_bias)}")
    if approximation and n_weights > MAX_APPROXIMATION_NUMBERS:
        notes.append(f"I_nP + Ẽ approximation left out: {n_weights:,} weights (bound {MAX_APPROXIMATION_NUMBERS:,})")
        approximation = None
    if language_model:
        tokens = {"text": capture.src_tokens or capture.tgt_tokens}
    else:
        tokens = {"source": capture.src_tokens, "target": capture.tgt_tokens}
    entries, masks = [], {}
    for name, weights in capture.weights.items():
        kind = studio_kind(name, language_model)
        queries, keys = sides(name, language_model)
        layer_vectors = vectors.get(name) if vectors else None
        if layer_vectors is not None:
            masks.setdefault(kind, layer_vectors.allowed.astype(int).tolist())
        for head, H in enumerate(weights):
            entries.append(head_entry(kind, layer_of(name), head, queries, keys, H, capture.is_causal(name),
                                      layer_vectors, approximation))
    data = {"format": FORMAT, "version": VERSION, "model": str(model_name),
            "task": "language model" if language_model else "translation", "tokens": tokens,
            "attention": entries, "masks": masks, "notes": notes}
    if replay and not language_model:
        data["steps"] = replay_steps(capture)
    return data


def head_entry(kind, layer, head, queries, keys, H, causal, layer_vectors, approximation):
    """One item of "attention": a head's weights, role and, when given, its Q, K, V rows and
    structured approximation."""
    entry = {"kind": kind, "layer": layer, "head": head, "queries": queries, "keys": keys,
             "weights": rounded(H, WEIGHT_DECIMALS), "role": classify_head(H, causal)[0]}
    if layer_vectors is not None and not layer_vectors.has_bias:
        rows = {"q": layer_vectors.Q, "k": layer_vectors.K, "v": layer_vectors.V}
        entry.update(d_k=layer_vectors.d_k, **{name: rounded(M[head], VECTOR_DECIMALS) for name, M in rows.items()})
    if approximation:
        w, num_pos = approximation
        projection = project_structured(H, w, num_pos)
        entry["approximation"] = {"w": w, "num_pos": num_pos, "family": projection.family,
                                  "distance": round(projection.distance, 4),
                                  "captured_mass": round(projection.captured_mass, 4),
                                  "matrix": rounded(projection.X, WEIGHT_DECIMALS)}
    return entry


def replay_steps(capture):
    """Greedy decoding, step by step: at step t the decoder has read target tokens 0 … t and
    chooses token t + 1; after the last token it chose [EOS] or reached max_len, which the
    capture does not tell apart: "[EOS] or max_len"."""
    target = capture.tgt_tokens
    return [{"query": t, "prefix": target[:t + 1],
             "chosen": target[t + 1] if t + 1 < len(target) else "[EOS] or max_len"}
            for t in range(len(target))]
