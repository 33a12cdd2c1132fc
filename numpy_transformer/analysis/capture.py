"""Every attention matrix of one sentence pair, with its tokens (thesis §3.1, Figures 11–12).

    capture = capture_sentence(model, src_tokenizer, tgt_tokenizer, "the cat sleeps .")
    capture.weights["encoder.0.self_attn"]      # (heads, n_src, n_src)
    capture.weights["decoder.0.cross_attn"]     # (heads, n_tgt, n_src)
    capture.axes("decoder.0.cross_attn")        # (query tokens, key tokens)
    capture.save("attention.npz");  AttentionCapture.load("attention.npz")
    capture = capture_text(gpt, tokenizer, "the cat sleeps .")    # a language model's one stack

The source the encoder reads is [SOS] x [EOS]; the decoder reads [SOS] y (teacher forcing), and
its query t is the one that predicts y_{t+1} (the last predicts [EOS]). Without a target, y is
the model's own greedy translation. A language model reads one text: a decoder-only model its
tokens (after [SOS] where its tokenizer has one: `completion.prompt_ids`), its heads filed as the
decoder's; an encoder-only model [CLS] x [SEP], its heads filed as the encoder's. Only full attention keeps its weights: a model whose
self-attention is a variant of chapter 2 (sparse, linear, …) cannot be captured, nor one with memory slots.
"""
import dataclasses

import numpy as np

from numpy_transformer.analysis.hooks import attention_modules, kind_of, layer_of
from numpy_transformer.completion import prompt_ids
from numpy_transformer.decoding import greedy_decode
from numpy_transformer.inference import inference_mode


@dataclasses.dataclass
class AttentionCapture:
    """src_tokens: the encoder's input tokens; tgt_tokens: the decoder's input tokens;
    weights: name → (heads, n_q, n_k) array, for every attention layer."""
    src_tokens: list
    tgt_tokens: list
    weights: dict

    def axes(self, name):
        """(query tokens, key tokens) of layer `name`."""
        queries = self.src_tokens if name.startswith("encoder") else self.tgt_tokens
        keys = self.tgt_tokens if kind_of(name) == "decoder.self_attn" else self.src_tokens
        return queries, keys

    def is_causal(self, name):
        """True for the decoder's masked self-attention (query i sees keys j ≤ i)."""
        return kind_of(name) == "decoder.self_attn"

    def names(self, kind):
        """The names of one kind ("encoder.self_attn", …), by layer."""
        return sorted((name for name in self.weights if kind_of(name) == kind), key=layer_of)

    def stack(self, kind):
        """(layers, heads, n_q, n_k): every layer of one kind."""
        return np.stack([self.weights[name] for name in self.names(kind)])

    def save(self, path):
        """Write an .npz: one array per layer ("weights/<name>"), and the tokens."""
        arrays = {f"weights/{name}": w for name, w in self.weights.items()}
        np.savez(path, src_tokens=np.array(self.src_tokens), tgt_tokens=np.array(self.tgt_tokens), **arrays)

    @classmethod
    def load(cls, path):
        """Read what `save` wrote."""
        with np.load(path, allow_pickle=False) as archive:
            weights = {key.removeprefix("weights/"): archive[key] for key in archive.files if key.startswith("weights/")}
            return cls(archive["src_tokens"].tolist(), archive["tgt_tokens"].tolist(), weights)


def check_full_attention(model):
    """A ValueError naming the layers whose attention keeps no weights (a chapter 2 variant), or
    whose weights also cover memory slots (numpy_transformer.attention.memory_slots)."""
    variants = [f"{name} ({module.attention})" for name, module in attention_modules(model).items()
                if module.variant is not None]
    if variants:
        raise ValueError(f"these attention layers use a variant of chapter 2 that never forms the n × n weights, "
                         f"so they cannot be captured: {', '.join(variants)}; analyse a model with "
                         f"attention='full'")
    with_slots = [name for name, module in attention_modules(model).items() if module.memory_slots]
    if with_slots:
        raise ValueError(f"these attention layers have memory slots, whose weights are columns of no token, so the "
                         f"analyses of chapter 3 (n_q × n_k token maps) do not apply: {', '.join(with_slots)}; "
                         f"read the slots' share from MultiHeadAttention.last_weights[..., n_k:] instead")


def capture_attention(model, src_ids, tgt_ids, src_tokens=None, tgt_tokens=None):
    """Run `model` (eval mode, no gradients) on one pair and collect every layer's weights.

    src_ids: the encoder's input ([SOS] x [EOS]), tgt_ids: the decoder's input ([SOS] y), 1-D
    integer arrays; the tokens label the axes (default: the ids as text)."""
    check_full_attention(model)
    src_ids, tgt_ids = np.asarray(src_ids).reshape(1, -1), np.asarray(tgt_ids).reshape(1, -1)
    with inference_mode(model):
        model(src_ids, tgt_ids)
    weights = {name: module.last_weights[0].astype(np.float64) for name, module in attention_modules(model).items()}
    src_tokens = [str(i) for i in src_ids[0]] if src_tokens is None else list(src_tokens)
    tgt_tokens = [str(i) for i in tgt_ids[0]] if tgt_tokens is None else list(tgt_tokens)
    return AttentionCapture(src_tokens, tgt_tokens, weights)


def token_strings(tokenizer, ids):
    """The vocabulary's token for every id ([SOS], [EOS], [UNK] included)."""
    return [tokenizer.tokenizer.id_to_token(int(i)) for i in ids]


def sentence_ids(model, src_tokenizer, tgt_tokenizer, source, target=None):
    """(src_ids, tgt_ids): [SOS] x [EOS] and [SOS] y, y the target's ids or, without one, the
    model's greedy translation of the source. Both stay within max_len, which the attention maps
    cover, whether or not the model's positions extend past it."""
    src_ids = np.array([src_tokenizer.sos_id, *src_tokenizer.encode(source), src_tokenizer.eos_id])
    if len(src_ids) > model.config.max_len:
        raise ValueError(f"the source has {len(src_ids)} tokens with [SOS] and [EOS], more than the model's "
                         f"max_len={model.config.max_len}")
    if target is None:
        check_full_attention(model)
        with inference_mode(model):
            output = greedy_decode(model, src_ids[None], tgt_tokenizer.sos_id, tgt_tokenizer.eos_id,
                                   max_len=model.config.max_len)[0]
    else:
        output = tgt_tokenizer.encode(target)
        if len(output) + 1 > model.config.max_len:
            raise ValueError(f"the target has {len(output) + 1} tokens with [SOS], more than the model's "
                             f"max_len={model.config.max_len}")
    return src_ids, np.array([tgt_tokenizer.sos_id, *output][:model.config.max_len], dtype=np.int64)


def capture_sentence(model, src_tokenizer, tgt_tokenizer, source, target=None):
    """`capture_attention` of a sentence (text) and its target (text, or the model's greedy
    translation when None), the axes labelled with the tokens."""
    src_ids, tgt_ids = sentence_ids(model, src_tokenizer, tgt_tokenizer, source, target)
    return capture_attention(model, src_ids, tgt_ids, token_strings(src_tokenizer, src_ids),
                             token_strings(tgt_tokenizer, tgt_ids))


def capture_text(model, tokenizer, text):
    """Every head of a language model on one text (see the module docstring): an
    `AttentionCapture` whose decoder (causal model) or encoder (masked model) reads the text."""
    check_full_attention(model)
    if model.config.causal:
        ids = np.array(prompt_ids(tokenizer, text, model.config.max_len + 1))
    else:
        ids = np.array([tokenizer.cls_id, *tokenizer.encode(text), tokenizer.sep_id])
    if len(ids) > model.config.max_len:
        raise ValueError(f"the text has {len(ids)} tokens, more than the model's max_len={model.config.max_len}")
    with inference_mode(model):                  # an encoder's heads need no head on top (it may have none)
        model(ids[None]) if model.config.causal else model.encode(ids[None])
    weights = {name: module.last_weights[0].astype(np.float64) for name, module in attention_modules(model).items()}
    tokens = token_strings(tokenizer, ids)
    return AttentionCapture([] if model.config.causal else tokens, tokens if model.config.causal else [], weights)
