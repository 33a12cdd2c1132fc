"""A model trained here, handed to PyTorch (numpy_transformer/interop/export.py): its exported weights
load into the `torch.nn` models of numpy_transformer/interop/torch_reference.py, which then compute what
it computes, for every option they share; export then import is the identity; `export` writes
what `safetensors.torch` reads."""
import numpy as np
import pytest

from numpy_transformer.config import TransformerConfig
from numpy_transformer.interop.export import load_torch, save_torch, torch_state
from numpy_transformer.language_model import DecoderOnlyTransformer
from numpy_transformer.model import Transformer
from run_helpers import assert_clear_error, assert_same_weights, run_main, weights

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

from numpy_transformer.interop.torch_reference import torch_decoder_only, torch_transformer  # noqa: E402

SRC = np.array([[3, 4, 5, 6, 0], [4, 5, 6, 7, 8]])
TGT = np.array([[1, 5, 6, 0], [1, 2, 3, 4]])
IDS = np.array([[3, 4, 5, 6, 7], [4, 5, 6, 0, 0]])
TRANSLATION_OPTIONS = [dict(), dict(norm_placement="pre", positional="learned", activation="gelu"),
                       dict(tie_embeddings=True, share_source_embedding=True, scale_embeddings=False),
                       dict(norm_variant="torch", norm_eps=1e-5, activation="gelu_tanh")]
DECODER_ONLY_OPTIONS = [dict(), dict(tie_embeddings=False, positional="sinusoidal", norm_placement="post"),
                        dict(activation="gelu_tanh", scale_embeddings=False)]


def perturbed(model):
    """Every parameter moved off its initial value (ones, zeros), so a misplaced one shows."""
    rng = np.random.default_rng(1)
    for _, parameter in model.named_parameters():
        parameter.data = parameter.data + 0.1 * rng.standard_normal(parameter.shape).astype(parameter.dtype)
    return model.eval()


def in_torch(reference, model):
    reference.load_state_dict({name: torch.from_numpy(array.copy()) for name, array in torch_state(model).items()})
    return reference.eval()


@pytest.mark.parametrize("options", TRANSLATION_OPTIONS, ids=str)
def test_an_exported_translation_model_computes_the_same_logits_in_pytorch(options):
    vocab = 11 if options.get("share_source_embedding") else 13
    config = TransformerConfig(11, vocab, d_model=8, n_heads=2, d_ff=16, n_encoder_layers=2, n_decoder_layers=2,
                               dropout=0.1, max_len=16, **options)
    model = perturbed(Transformer(config, np.random.default_rng(0)))
    reference = in_torch(torch_transformer(config), model)
    with torch.no_grad():
        expected = reference(torch.from_numpy(SRC), torch.from_numpy(TGT)).numpy()
    real = TGT != 0
    np.testing.assert_allclose(model(SRC, TGT).data[real], expected[real], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("options", DECODER_ONLY_OPTIONS, ids=str)
def test_an_exported_decoder_only_model_computes_the_same_logits_in_pytorch(options):
    config = TransformerConfig.decoder_only(20, d_model=8, n_heads=2, d_ff=16, n_layers=2, dropout=0.1, max_len=16,
                                            **options)
    model = perturbed(DecoderOnlyTransformer(config, np.random.default_rng(0)))
    reference = in_torch(torch_decoder_only(config), model)
    with torch.no_grad():
        expected = reference(torch.from_numpy(IDS)).numpy()
    real = IDS != 0
    np.testing.assert_allclose(model(IDS).data[real], expected[real], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("model", [
    Transformer(TransformerConfig(11, 13, d_model=8, n_heads=2, d_ff=16, n_encoder_layers=1, n_decoder_layers=1,
                                  positional="learned", norm_placement="pre"), np.random.default_rng(0)),
    DecoderOnlyTransformer(TransformerConfig.decoder_only(20, d_model=8, n_heads=2, d_ff=16, n_layers=2,
                                                          tie_embeddings=False), np.random.default_rng(0))],
    ids=["translation", "decoder-only"])
def test_export_then_import_is_the_identity_and_safetensors_reads_the_file(tmp_path, model):
    from safetensors.torch import load_file

    save_torch(model, tmp_path)
    assert_same_weights(weights(load_torch(tmp_path)), weights(model))
    written = load_file(str(tmp_path / "model.safetensors"))
    assert written.keys() == torch_state(model).keys()
    assert all(tensor.dtype == torch.float32 for tensor in written.values())


def test_a_model_without_a_pytorch_counterpart_is_refused_with_the_options_named():
    config = TransformerConfig(11, 13, d_model=8, n_heads=2, d_ff=16, n_encoder_layers=1, n_decoder_layers=1,
                               positional="relative", activation="swiglu")
    with pytest.raises(ValueError, match=r"no PyTorch counterpart for positional='relative', activation='swiglu'"):
        torch_state(Transformer(config, np.random.default_rng(0)))


def test_the_export_command_writes_a_state_dict_that_loads_into_the_reference(tmp_path):
    run = tmp_path / "run"
    status, _, err = run_main(["train", "--out", run, "--dataset", "builtin", "--tokenizer", "word", "--no-shared-vocabulary", "--n-pairs", "120", "--max-len", "32", "--d-model", "16",
                               "--n-heads", "2", "--d-ff", "32", "--batch-size", "16", "--steps", "3", "--beam", "1",
                               "--samples", "0"])
    assert status == 0, err
    status, out, err = run_main(["export", "--checkpoint", run, "--to", "torch", tmp_path / "exported"])
    assert status == 0, err
    assert "torch_reference.torch_transformer(config)" in out
    from safetensors.torch import load_file

    config = TransformerConfig.load(tmp_path / "exported" / "model.json")
    torch_transformer(config).load_state_dict(load_file(str(tmp_path / "exported" / "model.safetensors")))
    status, _, err = run_main(["export", "--checkpoint", tmp_path / "missing", "--to", "torch", tmp_path / "x"])
    assert_clear_error(status, err, "no such folder")


def test_a_decoder_only_model_in_gpt2_format_gives_the_same_logits_in_transformers_and_back(tmp_path):
    transformers = pytest.importorskip("transformers")
    from numpy_transformer.data.tokenizer import train_text_tokenizer
    from numpy_transformer.interop.export import save_gpt2
    from numpy_transformer.interop.pretrained import load_pretrained

    tokenizer = train_text_tokenizer(["the cat sat on the mat .", "a dog ."] * 3, "en", min_frequency=1)
    config = TransformerConfig.decoder_only(tokenizer.vocab_size, d_model=8, n_heads=2, d_ff=16, n_layers=2,
                                            dropout=0.1, max_len=16,
                                            pad_id=tokenizer.pad_id)      # √d-scaled embeddings, as trained here
    model = perturbed(DecoderOnlyTransformer(config, np.random.default_rng(0)))
    save_gpt2(model, tokenizer, tmp_path)
    ids = np.array([[tokenizer.sos_id, *tokenizer.encode("the cat sat on the mat .")]])
    with torch.no_grad():
        theirs = transformers.GPT2LMHeadModel.from_pretrained(tmp_path).eval()(torch.from_numpy(ids)).logits.numpy()
    np.testing.assert_allclose(theirs, model(ids).data, rtol=1e-5, atol=1e-5)
    again, hub_tokenizer = load_pretrained(str(tmp_path))
    np.testing.assert_allclose(again(ids).data, model(ids).data, rtol=1e-5, atol=1e-5)
    assert hub_tokenizer.sos_id == tokenizer.sos_id                    # read back, prompts start with [SOS]
    reference = transformers.PreTrainedTokenizerFast(tokenizer_file=str(tmp_path / "tokenizer.json"))
    assert reference("the cat sat")["input_ids"] == [tokenizer.sos_id, *tokenizer.encode("the cat sat")]


def test_gpt2_s_format_refuses_what_it_cannot_hold(tmp_path):
    from numpy_transformer.data.tokenizer import train_text_tokenizer
    from numpy_transformer.interop.export import save_gpt2

    config = TransformerConfig.decoder_only(20, d_model=8, n_heads=2, d_ff=16, n_layers=1, norm_placement="post",
                                            tie_embeddings=False)
    with pytest.raises(ValueError, match=r"GPT-2's format cannot hold this model: norm_placement='post', "
                                         r"tie_embeddings=False"):
        save_gpt2(DecoderOnlyTransformer(config, np.random.default_rng(0)), train_text_tokenizer(["a b"], "en"),
                  tmp_path)
