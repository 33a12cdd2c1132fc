"""The initialisation schemes (numpy_transformer/initialisation.py): every rule's empirical
variance, on a large layer, within 2 % of its formula; the default draws nothing more; norms
and positions are left as built."""
import dataclasses
import math

import numpy as np
import pytest

from numpy_transformer.config import TransformerConfig
from numpy_transformer.language_model import DecoderOnlyTransformer, EncoderOnlyTransformer
from numpy_transformer.model import Transformer

D, D_FF, VOCAB = 256, 1024, 3000


def big(init, **options):
    config = TransformerConfig(VOCAB, VOCAB, d_model=D, n_heads=8, d_ff=D_FF, n_encoder_layers=1,
                               n_decoder_layers=1, max_len=16, init=init, **options)
    return dict(Transformer(config, np.random.default_rng(0)).named_parameters())


# (parameter, variance) for each scheme: the formulas of the module docstring
EXPECTED = {
    "xavier": {"encoder.layers.0.self_attn.W_q.weight": 1 / D, "encoder.layers.0.self_attn.W_c.weight": 1 / D,
               "encoder.layers.0.feed_forward.W_1.weight": 2 / (D + D_FF), "encoder.embedding.weight": 1 / D,
               "projection.weight": 2 / (D + VOCAB)},
    "xavier_uniform": {"encoder.layers.0.self_attn.W_q.weight": 1 / (2 * D),
                       "decoder.layers.0.cross_attn.W_v.weight": 1 / (2 * D),
                       "encoder.layers.0.self_attn.W_c.weight": 1 / D,
                       "encoder.layers.0.feed_forward.W_1.weight": 2 / (D + D_FF),
                       "encoder.embedding.weight": 2 / (VOCAB + D), "projection.weight": 2 / (D + VOCAB)},
    "torch": {"encoder.layers.0.self_attn.W_q.weight": 1 / (2 * D), "encoder.layers.0.self_attn.W_c.weight": 1 / (3 * D),
              "encoder.layers.0.feed_forward.W_1.weight": 1 / (3 * D), "encoder.layers.0.feed_forward.W_2.weight":
              1 / (3 * D_FF), "encoder.embedding.weight": 1.0, "projection.weight": 1 / (3 * D)},
}


@pytest.mark.parametrize("scheme", list(EXPECTED))
def test_every_rule_gives_the_variance_of_its_formula_within_2_percent(scheme):
    parameters = big(scheme)
    for name, variance in EXPECTED[scheme].items():
        values = parameters[name].data.astype(np.float64)
        assert abs(values.mean()) < 0.05 * math.sqrt(variance), name
        assert values.var() == pytest.approx(variance, rel=0.02), name


def test_the_biases_and_the_uniform_bounds():
    torch_like = big("torch")
    d_in_bound = 1 / math.sqrt(D)
    bias = torch_like["encoder.layers.0.feed_forward.W_1.bias"].data
    assert np.abs(bias).max() <= d_in_bound and bias.var() == pytest.approx(1 / (3 * D), rel=0.15)
    assert not torch_like["encoder.layers.0.self_attn.W_q.bias"].data.any()             # attention biases 0
    assert np.abs(torch_like["encoder.layers.0.feed_forward.W_1.weight"].data).max() <= d_in_bound
    uniform = big("xavier_uniform")
    assert np.abs(uniform["projection.weight"].data).max() <= math.sqrt(6 / (D + VOCAB))
    assert not uniform["encoder.layers.0.feed_forward.W_1.bias"].data.any()


def test_the_default_draws_nothing_more_and_norms_and_positions_stay_as_built():
    default, again = big("xavier"), big("xavier")
    assert all(np.array_equal(default[name].data, again[name].data) for name in default)
    learned = big("torch", positional="learned")
    assert (learned["encoder.layers.0.norm_1.gamma"].data == 1).all()
    assert learned["encoder.positional.P"].data.var() == pytest.approx(0.5, rel=0.1)      # N(0, 1/2), as built


@pytest.mark.parametrize("model_class, build", [(DecoderOnlyTransformer, TransformerConfig.decoder_only),
                                                (EncoderOnlyTransformer, TransformerConfig.encoder_only)])
def test_the_language_models_take_the_schemes_too(model_class, build):
    config = build(VOCAB, d_model=D, n_heads=8, d_ff=D_FF, n_layers=1, init="torch", tie_embeddings=False)
    parameters = dict(model_class(config, np.random.default_rng(0)).named_parameters())
    assert parameters["stack.embedding.weight"].data.var() == pytest.approx(1.0, rel=0.02)
    assert parameters["head.weight"].data.var() == pytest.approx(1 / (3 * D), rel=0.02)


def test_an_unknown_scheme_is_refused_naming_the_choices():
    with pytest.raises(ValueError, match=r"init must be one of \('xavier', 'xavier_uniform', 'torch'\), got 'he'"):
        TransformerConfig(10, 10, init="he")


def test_the_default_preset_starts_a_real_vocabulary_s_words_below_their_positions():
    """The recipe gap of docs/training.md: with the notes' N(0, 1/d) embeddings, √d · Wᴱ has entries
    of standard deviation 1 and drowns the sinusoidal positions (0.6 over 64 positions); the default preset's
    Glorot-uniform rule starts the words of a Multi30k-sized vocabulary at about 0.2."""
    from numpy_transformer.positional import sinusoidal_encoding
    from numpy_transformer.training.settings import model_config, resolve

    fields = resolve("default")[0]
    config = model_config(fields, (6061, 7812), pad_id=0, max_len=64)
    model = Transformer(config, np.random.default_rng(0))
    positions = sinusoidal_encoding(64, config.d_model).std()
    for embedding in (model.encoder.embedding, model.decoder.embedding):
        words = math.sqrt(config.d_model) * embedding.weight.data.std()
        assert 0.15 < words < 0.25 < 0.55 < positions
    notes = Transformer(dataclasses.replace(config, init="xavier"), np.random.default_rng(0))
    assert math.sqrt(config.d_model) * notes.encoder.embedding.weight.data.std() > positions


@pytest.mark.torch
def test_xavier_uniform_draws_q_k_v_as_the_recipe_does_in_pytorch():
    """The Annotated Transformer's recipe applies `xavier_uniform_` to every matrix of
    `torch.nn.Transformer`, whose W_q, W_k, W_v are one packed (3d × d) in_proj: each gets the
    variance 1/(2d), not the 1/d of a d × d matrix of its own."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    attention = torch.nn.MultiheadAttention(D, 8, batch_first=True)
    torch.nn.init.xavier_uniform_(attention.in_proj_weight)
    torch_q = attention.in_proj_weight.detach().numpy()[:D].astype(np.float64)
    ours = big("xavier_uniform")["encoder.layers.0.self_attn.W_q.weight"].data.astype(np.float64)
    assert np.abs(ours).max() <= np.abs(torch_q).max() * 1.001
    assert ours.var() == pytest.approx(torch_q.var(), rel=0.03)
