"""Hugging Face GPT-2 and BERT checkpoints loaded into this project's own models
(numpy_transformer/interop/pretrained.py) match `transformers`: tiny random models are built and saved
in Hugging Face format here (no network), loaded, and compared logit for logit, layer for layer,
head for head, and token for token in greedy generation. `transformers` and PyTorch are
test-only dependencies; the library reads the safetensors format through `safetensors`' NumPy
reader."""
import numpy as np
import pytest

from numpy_transformer.data.hub_tokenizer import HubTokenizer
from numpy_transformer.interop.pretrained import load_hugging_face
from numpy_transformer.sampling import generate
from run_helpers import run_main

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.torch

EOS = 0                  # <|endoftext|>, the first id of the byte-level BPE below


TEXTS = ["Hello there, general Kenobi!", "The café serves naïve crème brûlée.", "Several   spaces and a\nnewline.",
         "Emoji 🙂 and ümlauts", "the cat sat on the mat"] * 20
TRICKY = ["Héllo wörld", "emoji 🙂 here", "several   spaces", "a\nnewline", "naïve café", " leading space", ""]


def byte_level_bpe(vocab_size=300):
    """A GPT-2-style tokenizer: byte-level BPE with <|endoftext|> (here its first id)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(TEXTS, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                                                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                             show_progress=False))
    return tokenizer


def wordpiece():
    """A BERT-style tokenizer: lower-cased WordPiece, [CLS] text [SEP]."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokenizer.train_from_iterator(TEXTS, trainers.WordPieceTrainer(vocab_size=200, special_tokens=specials,
                                                                   show_progress=False))
    tokenizer.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]",
                                                             special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    return tokenizer


def perturbed(model):
    """`model` with every parameter moved off its initial value (zero biases, unit LayerNorm
    scales), so that a weight loaded into the wrong place cannot go unnoticed."""
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn(parameter.shape, generator=generator))
    return model.eval()


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    torch.manual_seed(0)
    tokenizer = byte_level_bpe()
    config = transformers.GPT2Config(vocab_size=tokenizer.get_vocab_size(), n_positions=32, n_embd=16, n_layer=2,
                                     n_head=2, bos_token_id=EOS, eos_token_id=EOS, attn_implementation="eager")
    model = perturbed(transformers.GPT2LMHeadModel(config))
    folder = tmp_path_factory.mktemp("gpt2")
    model.save_pretrained(folder)
    tokenizer.save(str(folder / "tokenizer.json"))
    return model, folder


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    torch.manual_seed(0)
    tokenizer = wordpiece()
    config = transformers.BertConfig(vocab_size=tokenizer.get_vocab_size(), hidden_size=16, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=40, max_position_embeddings=32,
                                     attn_implementation="eager")
    model = perturbed(transformers.BertForMaskedLM(config))
    folder = tmp_path_factory.mktemp("bert")
    model.save_pretrained(folder)
    tokenizer.save(str(folder / "tokenizer.json"))
    return model, folder


def ids(batch=2, n=12, seed=0):
    return np.random.default_rng(seed).integers(5, 119, (batch, n))          # no special token of either


def reference(model, tokens, dtype=torch.float32):
    with torch.no_grad():
        return model.to(dtype)(torch.from_numpy(tokens), output_hidden_states=True, output_attentions=True)


@pytest.mark.parametrize("name", ["gpt2", "bert"])
def test_the_logits_equal_those_of_transformers_in_float32(request, name):
    hf_model, folder = request.getfixturevalue(name)
    model, tokens = load_hugging_face(folder), ids()
    expected = reference(hf_model, tokens).logits.numpy()
    logits = model(tokens).data
    assert logits.dtype == np.float32
    np.testing.assert_allclose(logits, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())


@pytest.mark.parametrize("name", ["gpt2", "bert"])
def test_every_layer_and_every_head_equal_those_of_transformers_in_float64(request, name):
    hf_model, folder = request.getfixturevalue(name)
    model, tokens = load_hugging_face(folder, dtype="float64"), ids(seed=1)
    expected = reference(hf_model, tokens, torch.float64)
    stack = model.stack
    x = stack.embed(tokens)
    mask = np.tril(np.ones((tokens.shape[1],) * 2, dtype=bool)) if name == "gpt2" else None
    np.testing.assert_allclose(x.data, expected.hidden_states[0].numpy(), rtol=0, atol=1e-10)
    for i, layer in enumerate(stack.layers):
        x = layer(x, mask, None)
        hidden = stack.finish(x) if i == len(stack.layers) - 1 and name == "gpt2" else x
        np.testing.assert_allclose(hidden.data, expected.hidden_states[i + 1].numpy(), rtol=0, atol=1e-10,
                                   err_msg=f"layer {i}")
        np.testing.assert_allclose(layer.self_attn.last_weights, expected.attentions[i].numpy(), rtol=0, atol=1e-10,
                                   err_msg=f"the heads of layer {i}")
    np.testing.assert_allclose(model(tokens).data, expected.logits.numpy(), rtol=0, atol=1e-10)
    hf_model.float()


@pytest.mark.parametrize("use_cache", [True, False])
def test_greedy_generation_equals_transformers_token_for_token(gpt2, use_cache):
    hf_model, folder = gpt2
    model, prompt = load_hugging_face(folder, dtype="float64"), ids(batch=1, n=5, seed=2)
    with torch.no_grad():
        expected = hf_model.double().generate(torch.from_numpy(prompt), max_new_tokens=20, do_sample=False,
                                              use_cache=use_cache, pad_token_id=EOS)
    hf_model.float()
    ours = generate(model, prompt, 20, np.random.default_rng(0), temperature=0, eos_id=EOS, use_cache=use_cache)
    assert ours == expected.numpy().tolist()


def test_a_folder_that_is_not_a_checkpoint_is_one_clear_error(tmp_path, gpt2):
    with pytest.raises(FileNotFoundError, match="config.json: no such file"):
        load_hugging_face(tmp_path)
    (tmp_path / "config.json").write_text('{"model_type": "t5"}')
    with pytest.raises(ValueError, match="model_type 't5' is not one this project loads"):
        load_hugging_face(tmp_path)
    (tmp_path / "config.json").write_text((gpt2[1] / "config.json").read_text())
    with pytest.raises(FileNotFoundError, match="model.safetensors: no such file"):
        load_hugging_face(tmp_path)


def test_the_tokenizers_give_the_ids_of_transformers_on_tricky_strings(gpt2, bert):
    gpt2_tokenizer = HubTokenizer.load(gpt2[1])
    reference = transformers.PreTrainedTokenizerFast(tokenizer_file=str(gpt2[1] / "tokenizer.json"))
    for text in TRICKY:
        assert gpt2_tokenizer.encode(text) == reference(text)["input_ids"], text
        assert gpt2_tokenizer.decode(gpt2_tokenizer.encode(text)) == text
    bert_tokenizer = HubTokenizer.load(bert[1])
    reference = transformers.PreTrainedTokenizerFast(tokenizer_file=str(bert[1] / "tokenizer.json"))
    for text in TRICKY:
        framed = [bert_tokenizer.cls_id, *bert_tokenizer.encode(text), bert_tokenizer.sep_id]
        assert framed == reference(text)["input_ids"], text
    assert (gpt2_tokenizer.eos_id, gpt2_tokenizer.sos_id, gpt2_tokenizer.pad_id) == (EOS, None, None)
    assert (bert_tokenizer.pad_id, bert_tokenizer.cls_id, bert_tokenizer.sep_id, bert_tokenizer.mask_id) == (0, 2, 3, 4)


def test_generate_on_a_hugging_face_folder_prints_what_transformers_generates(gpt2):
    hf_model, folder = gpt2
    status, out, err = run_main(["generate", "--checkpoint", folder, "--temperature", "0", "--max-new-tokens", "8",
                                 "Hello there"])
    assert status == 0, err
    reference = transformers.PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"))
    prompt = reference("Hello there", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        expected = hf_model.generate(prompt, max_new_tokens=8, do_sample=False, pad_token_id=EOS)
    assert out == reference.decode(expected[0], skip_special_tokens=True) + "\n"


def test_fill_mask_on_a_hugging_face_folder_ranks_as_transformers_does(bert):
    hf_model, folder = bert
    status, out, err = run_main(["fill-mask", "--checkpoint", folder, "--top-k", "3", "the cat [MASK] on the mat"])
    assert status == 0, err
    reference = transformers.PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"))
    inputs = reference("the cat [MASK] on the mat", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        logits = hf_model(inputs).logits[0, 3].double()
    probabilities = torch.softmax(logits, -1)
    logits[:5] = -torch.inf                                        # the special tokens are never candidates
    best = torch.argsort(logits, descending=True)[:3].tolist()
    expected = [f"{reference.decode([i]).strip()}\t{probabilities[i].item():.4f}" for i in best]
    assert out.splitlines() == expected


def test_a_checkpoint_of_the_other_kind_is_one_clear_line(gpt2, bert):
    status, _, err = run_main(["fill-mask", "--checkpoint", gpt2[1], "a [MASK]"])
    assert status == 1 and "holds a GPT-2 (causal) model; this command needs a masked language model" in err
    status, _, err = run_main(["generate", "--checkpoint", bert[1], "a"])
    assert status == 1 and "holds a BERT (masked) model; this command needs a causal language model" in err


def test_attention_on_a_hugging_face_folder_captures_the_heads_of_transformers(gpt2, tmp_path):
    hf_model, folder = gpt2
    status, out, err = run_main(["attention", "--checkpoint", folder, "Hello there", "--out", tmp_path])
    assert status == 0, err
    tokens = HubTokenizer.load(folder).encode("Hello there")
    assert out.startswith("text: ") and "| decoder.1.self_attn | 1 |" in out
    with torch.no_grad():
        expected = hf_model(torch.tensor([tokens]), output_attentions=True).attentions
    with np.load(tmp_path / "attention.npz") as saved:
        for layer, weights in enumerate(expected):
            np.testing.assert_allclose(saved[f"weights/decoder.{layer}.self_attn"], weights[0].numpy(), atol=1e-5)
