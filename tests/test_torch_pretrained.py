"""Hugging Face GPT-2 and BERT checkpoints loaded into this project's own models
(numpy_transformer/pretrained.py) match `transformers`: tiny random models are built and saved
in Hugging Face format here (no network), loaded, and compared logit for logit, layer for layer,
head for head, and token for token in greedy generation. `transformers` and PyTorch are
test-only dependencies; the library reads the weights with safetensors' NumPy API."""
import numpy as np
import pytest

from numpy_transformer.pretrained import load_hugging_face
from numpy_transformer.sampling import generate

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.torch

VOCAB, EOS = 99, 98


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
    config = transformers.GPT2Config(vocab_size=VOCAB, n_positions=32, n_embd=16, n_layer=2, n_head=2,
                                     bos_token_id=EOS, eos_token_id=EOS, attn_implementation="eager")
    model = perturbed(transformers.GPT2LMHeadModel(config))
    folder = tmp_path_factory.mktemp("gpt2")
    model.save_pretrained(folder)
    return model, folder


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=40, max_position_embeddings=32, attn_implementation="eager")
    model = perturbed(transformers.BertForMaskedLM(config))
    folder = tmp_path_factory.mktemp("bert")
    model.save_pretrained(folder)
    return model, folder


def ids(batch=2, n=12, seed=0):
    return np.random.default_rng(seed).integers(1, EOS, (batch, n))          # no padding, no end of text


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
                                              use_cache=use_cache, bad_words_ids=[[EOS]], pad_token_id=EOS)
    hf_model.float()
    ours = generate(model, prompt, 20, np.random.default_rng(0), temperature=0, use_cache=use_cache)
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
