"""TransformerConfig: the paper's base model, validation that names the field at fault, and the
JSON round trip (a model built from a loaded config has the same parameters)."""
import dataclasses
import json

import numpy as np
import pytest

from numpy_transformer.config import TransformerConfig
from numpy_transformer.model import Transformer

TINY = dict(src_vocab_size=11, tgt_vocab_size=13, d_model=8, n_heads=2, d_ff=12,
            n_encoder_layers=1, n_decoder_layers=2, max_len=16)


def tiny(**overrides):
    return TransformerConfig(**{**TINY, **overrides})


def test_the_defaults_are_the_thesis_hyper_parameters():
    config = TransformerConfig(src_vocab_size=100, tgt_vocab_size=200)
    assert (config.d_model, config.n_heads, config.d_k, config.d_ff) == (512, 8, 64, 2048)
    assert (config.n_encoder_layers, config.n_decoder_layers, config.dropout) == (6, 6, 0.1)
    assert (config.positional, config.positional_base) == ("sinusoidal", 10000.0)
    assert (config.norm_variant, config.norm_eps, config.norm_placement) == ("thesis", 1e-6, "post")
    assert (config.activation, config.attention, config.tie_embeddings) == ("relu", "full", False)
    assert config.dtype == "float32"


def test_base_is_the_paper_base_model_with_tied_embeddings():
    config = TransformerConfig.base(37000, 37000, share_source_embedding=True)
    assert (config.d_model, config.n_heads, config.d_ff) == (512, 8, 2048)
    assert (config.n_encoder_layers, config.n_decoder_layers, config.dropout) == (6, 6, 0.1)
    assert config.tie_embeddings and config.share_source_embedding
    assert TransformerConfig.base(10, 20, d_model=64).d_model == 64


EVERY_OPTION_CHANGED = dict(positional="learned", positional_base=100.0, norm_placement="pre",
                            norm_variant="torch", norm_eps=1e-5, activation="swiglu", tie_embeddings=True,
                            dropout=0.0, dtype="float64")


@pytest.mark.parametrize("config", [tiny(), tiny(**EVERY_OPTION_CHANGED)])
def test_json_round_trip_gives_an_equal_config(config, tmp_path):
    assert TransformerConfig.from_json(config.to_json()) == config
    config.save(tmp_path / "config.json")
    assert TransformerConfig.load(tmp_path / "config.json") == config
    assert json.loads((tmp_path / "config.json").read_text())["d_model"] == 8


def test_a_model_built_from_a_loaded_config_has_the_same_parameter_names_and_shapes(tmp_path):
    config = tiny(positional="learned", norm_placement="pre", activation="swiglu")
    config.save(tmp_path / "config.json")
    original = Transformer(config, np.random.default_rng(0))
    loaded = Transformer(TransformerConfig.load(tmp_path / "config.json"), np.random.default_rng(1))
    assert [(n, p.shape) for n, p in loaded.named_parameters()] == \
           [(n, p.shape) for n, p in original.named_parameters()]
    loaded.load_state_dict(original.state_dict())


def test_unknown_keys_in_a_loaded_file_are_named(tmp_path):
    values = {**json.loads(tiny().to_json()), "n_layers": 6, "heads": 8}
    (tmp_path / "config.json").write_text(json.dumps(values))
    with pytest.raises(ValueError, match=r"unknown keys \['heads', 'n_layers'\]"):
        TransformerConfig.load(tmp_path / "config.json")


def test_missing_required_keys_are_named():
    values = json.loads(tiny().to_json())
    del values["tgt_vocab_size"]
    with pytest.raises(ValueError, match=r"missing keys \['tgt_vocab_size'\]"):
        TransformerConfig.from_json(json.dumps(values))


def test_a_json_file_that_is_not_an_object_is_refused():
    with pytest.raises(ValueError, match="must be a JSON object, got list"):
        TransformerConfig.from_json("[1, 2]")


def test_values_read_from_json_are_validated():
    values = {**json.loads(tiny().to_json()), "d_model": "8"}
    with pytest.raises(ValueError, match="d_model must be a positive integer, got '8'"):
        TransformerConfig.from_json(json.dumps(values))


@pytest.mark.parametrize("overrides, message", [
    (dict(d_model=10, n_heads=4), "d_model=10 is not divisible by n_heads=4"),
    (dict(d_model=9, n_heads=3), r"d_model=9 must be even for the sinusoidal positional encoding"),
    (dict(positional="rotary"), r"positional must be one of \('sinusoidal', 'learned', 'relative'\), got 'rotary'"),
    (dict(norm_variant="rms"), r"norm_variant must be one of \('thesis', 'torch'\), got 'rms'"),
    (dict(norm_placement="sandwich"), r"norm_placement must be one of \('post', 'pre'\), got 'sandwich'"),
    (dict(activation="tanh"), r"activation must be one of \('relu', 'gelu', 'gelu_tanh', 'swiglu'\), got 'tanh'"),
    (dict(attention="performer"), r"attention must be one of \('full', 'sparse', .*\), got 'performer'"),
    (dict(dtype="float16"), r"dtype must be one of \('float32', 'float64'\), got 'float16'"),
    (dict(d_model=0), "d_model must be a positive integer, got 0"),
    (dict(n_heads=-2), "n_heads must be a positive integer, got -2"),
    (dict(d_ff=0), "d_ff must be a positive integer, got 0"),
    (dict(n_encoder_layers=0), "n_encoder_layers must be a positive integer, got 0"),
    (dict(n_decoder_layers=2.0), "n_decoder_layers must be a positive integer, got 2.0"),
    (dict(src_vocab_size=0), "src_vocab_size must be a positive integer, got 0"),
    (dict(tgt_vocab_size=True), "tgt_vocab_size must be a positive integer, got True"),
    (dict(max_len=-1), "max_len must be a positive integer, got -1"),
    (dict(dropout=1.0), r"dropout must be a number in \[0, 1\), got 1.0"),
    (dict(dropout=-0.1), r"dropout must be a number in \[0, 1\), got -0.1"),
    (dict(dropout=float("nan")), r"dropout must be a number in \[0, 1\), got nan"),
    (dict(norm_eps=0.0), "norm_eps must be a number > 0, got 0.0"),
    (dict(positional_base=-1.0), "positional_base must be a number > 0, got -1.0"),
    (dict(tie_embeddings="yes"), "tie_embeddings must be true or false, got 'yes'"),
    (dict(pad_id=11), r"pad_id must be an id of both vocabularies, in \[0, 11\), or None, got 11"),
    (dict(pad_id=-1), r"pad_id must be an id of both vocabularies, in \[0, 11\), or None, got -1"),
    (dict(share_source_embedding=True), "share_source_embedding needs one vocabulary.*src_vocab_size=11 and "
                                        "tgt_vocab_size=13"),
])
def test_every_validation_error_names_the_field_and_its_value(overrides, message):
    with pytest.raises(ValueError, match=f"TransformerConfig: {message}"):
        tiny(**overrides)


def test_an_odd_d_model_is_fine_with_learned_positions():
    assert tiny(d_model=9, n_heads=3, positional="learned").d_k == 3


def test_the_config_is_frozen_and_replace_validates():
    config = tiny()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.d_model = 16
    assert dataclasses.replace(config, d_model=16).d_model == 16
    with pytest.raises(ValueError, match="d_model=6 is not divisible by n_heads=4"):
        dataclasses.replace(config, d_model=6, n_heads=4)



# --- one type for the three kinds of model ------------------------------------------------------

def test_the_named_constructors_build_the_one_stack_kinds_with_gpt2_s_defaults():
    gpt = TransformerConfig.decoder_only(50, n_layers=3, d_model=16, n_heads=2)
    assert (gpt.kind, gpt.vocab_size, gpt.n_layers, gpt.causal) == ("decoder-only", 50, 3, True)
    assert (gpt.src_vocab_size, gpt.tgt_vocab_size, gpt.n_encoder_layers, gpt.n_decoder_layers) == (50, 50, 0, 3)
    assert (gpt.positional, gpt.norm_variant, gpt.norm_eps, gpt.norm_placement, gpt.activation,
            gpt.tie_embeddings) == ("learned", "torch", 1e-5, "pre", "gelu", True)
    bert = TransformerConfig.encoder_only(40, n_layers=2, norm_placement="post")
    assert (bert.kind, bert.n_encoder_layers, bert.n_decoder_layers, bert.causal) == ("encoder-only", 2, 0, False)
    assert (bert.norm_placement, bert.positional, bert.d_model) == ("post", "learned", 512)
    for config in (gpt, bert):
        assert TransformerConfig.from_json(config.to_json()) == config


def test_the_positional_form_still_builds_the_encoder_decoder():
    config = TransformerConfig(11, 13, d_model=8, n_heads=2)
    assert (config.kind, config.src_vocab_size, config.tgt_vocab_size) == ("encoder-decoder", 11, 13)
    assert json.loads(config.to_json())["kind"] == "encoder-decoder"
    values = json.loads(config.to_json())
    del values["kind"]                                       # a model.json written before the field existed
    assert TransformerConfig.from_json(json.dumps(values)) == config


@pytest.mark.parametrize("name", ["vocab_size", "n_layers", "causal"])
def test_the_one_stack_properties_say_what_an_encoder_decoder_has_instead(name):
    with pytest.raises(AttributeError, match=f"{name} is a property of the one-stack kinds.*an encoder-decoder"):
        getattr(tiny(), name)


@pytest.mark.parametrize("build, overrides, message", [
    (TransformerConfig, dict(kind="gpt"), r"kind must be one of \('encoder-decoder', 'decoder-only', "
                                          r"'encoder-only'\), got 'gpt'"),
    (TransformerConfig, dict(kind="decoder-only", n_encoder_layers=1),
     r"kind='decoder-only' reads and predicts one vocabulary: src_vocab_size=11 and tgt_vocab_size=13 must be "
     r"equal \(TransformerConfig.decoder_only"),
    (TransformerConfig, dict(kind="encoder-only", tgt_vocab_size=11),
     r"kind='encoder-only' has one stack, of n_encoder_layers blocks: n_decoder_layers must be 0, got 2"),
    (TransformerConfig.decoder_only, dict(decoder_attention="window"),
     "kind='decoder-only': the blocks' self-attention is `attention`, and decoder_attention must be None, "
     "got 'window'; set attention instead"),
    (TransformerConfig.encoder_only, dict(share_source_embedding=True),
     "kind='encoder-only' has one embedding already: share_source_embedding must be false"),
    (TransformerConfig.decoder_only, dict(attention="linformer"),
     r"attention must be a causal-capable kind, one of \(.*\), got 'linformer'"),
    (TransformerConfig.decoder_only, dict(n_layers=0), "n_decoder_layers must be a positive integer, got 0"),
])
def test_a_one_stack_config_names_the_field_at_fault_and_what_to_do(build, overrides, message):
    arguments = dict(TINY) if build is TransformerConfig else dict(vocab_size=11, d_model=8, n_heads=2)
    with pytest.raises(ValueError, match=f"TransformerConfig: {message}"):
        build(**{**arguments, **overrides})


def test_an_encoder_only_model_may_use_an_attention_that_cannot_be_causal():
    assert TransformerConfig.encoder_only(11, d_model=8, n_heads=2, attention="linformer").attention == "linformer"


def test_the_named_constructors_refuse_the_fields_they_set():
    with pytest.raises(TypeError, match=r"TransformerConfig.decoder_only sets \['n_decoder_layers'\] itself: give "
                                        r"vocab_size and n_layers"):
        TransformerConfig.decoder_only(11, n_decoder_layers=2)


def test_the_old_language_model_config_is_a_deprecated_function_giving_the_same_config():
    from numpy_transformer.language_model import LanguageModelConfig

    with pytest.warns(DeprecationWarning, match="use TransformerConfig.decoder_only"):
        gpt = LanguageModelConfig(vocab_size=30, d_model=8, n_heads=2, n_layers=2)
    assert gpt == TransformerConfig.decoder_only(30, d_model=8, n_heads=2, n_layers=2)
    with pytest.warns(DeprecationWarning):
        bert = LanguageModelConfig(30, d_model=8, n_heads=2, n_layers=2, causal=False, norm_placement="post")
    assert bert == TransformerConfig.encoder_only(30, d_model=8, n_heads=2, n_layers=2, norm_placement="post")


def test_old_language_model_json_takes_its_defaults_and_names_unknown_keys():
    """numpy-transformer 0.1 wrote every field; a hand-written file may leave some out, which
    then take LanguageModelConfig's defaults, those of the named constructors."""
    config = TransformerConfig.from_json(json.dumps({"vocab_size": 30, "d_model": 8, "n_heads": 2, "causal": False}))
    assert config == TransformerConfig.encoder_only(30, d_model=8, n_heads=2)
    with pytest.raises(ValueError, match=r"unknown keys \['heads'\] in a LanguageModelConfig"):
        TransformerConfig.from_json(json.dumps({"vocab_size": 30, "heads": 2}))
    with pytest.raises(ValueError, match="causal must be true or false, got 'yes'"):
        TransformerConfig.from_json(json.dumps({"vocab_size": 30, "d_model": 8, "n_heads": 2, "causal": "yes"}))


def test_a_model_refuses_a_config_of_another_kind():
    from numpy_transformer.language_model import DecoderOnlyTransformer

    with pytest.raises(TypeError, match=r"Transformer: config must be a TransformerConfig of kind 'encoder-decoder' "
                                        r"\(TransformerConfig\(src_vocab_size, tgt_vocab_size, …\)\), got kind "
                                        r"'decoder-only'"):
        Transformer(TransformerConfig.decoder_only(11, d_model=8, n_heads=2), np.random.default_rng(0))
    with pytest.raises(TypeError, match=r"DecoderOnlyTransformer: config must be a TransformerConfig of kind "
                                        r"'decoder-only' \(TransformerConfig.decoder_only\(vocab_size, …\)\), got dict"):
        DecoderOnlyTransformer({}, np.random.default_rng(0))
