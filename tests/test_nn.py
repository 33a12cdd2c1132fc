"""numpy_transformer.nn: Module bookkeeping (names, state dicts, train/eval, dtype) and the
layers of thesis §1.2 (Linear, Embedding, LayerNorm eq. (2), Dropout, the feed-forward
network of §1.2.4), checked against NumPy formulas and finite differences."""
import math

import numpy as np
import pytest
from scipy.special import erf

from autograd import Tensor, gradcheck
from numpy_transformer.attention import MultiHeadAttention
from numpy_transformer.nn import Dropout, Embedding, FeedForward, LayerNorm, Linear, Module
from numpy_transformer.positional import PositionalEncoding


def rng(seed=0):
    return np.random.default_rng(seed)


def tensor(*shape, seed=0, dtype=np.float64):
    return Tensor(rng(seed).standard_normal(shape).astype(dtype), requires_grad=True)


def check_gradients(module, *inputs):
    """gradcheck of module(*inputs) with respect to every input Tensor and every parameter."""
    n = len(inputs)
    return gradcheck(lambda *args: module(*args[:n]), *inputs, *module.parameters())


class Block(Module):
    def __init__(self, seed):
        super().__init__()
        self.self_attn = MultiHeadAttention(4, 2, rng(seed))
        self.norm = LayerNorm(4)
        self.dropout = Dropout(0.5, rng(seed))


class Stack(Module):
    """A parameter defined after the submodules, and a list of submodules."""

    def __init__(self, seed=0):
        super().__init__()
        self.layers = [Block(seed), Block(seed + 1)]
        self.scale = Tensor(np.ones(4, np.float32), requires_grad=True)


# --- Module ------------------------------------------------------------------------------

def test_named_parameters_are_dotted_paths_in_definition_order():
    names = [name for name, _ in Stack().named_parameters()]
    block = [f"self_attn.{w}.{p}" for w in ("W_q", "W_k", "W_v", "W_c") for p in ("weight", "bias")]
    block += ["norm.gamma", "norm.beta"]
    assert names == [f"layers.0.{n}" for n in block] + [f"layers.1.{n}" for n in block] + ["scale"]


def test_parameters_are_the_module_tensors_themselves():
    stack = Stack()
    assert stack.parameters()[0] is stack.layers[0].self_attn.W_q.weight
    assert stack.parameters()[-1] is stack.scale
    assert all(p.requires_grad for p in stack.parameters())


def test_named_modules_lists_every_submodule_with_its_path():
    names = [name for name, _ in Stack().named_modules()]
    assert names[:3] == ["", "layers.0", "layers.0.self_attn"]
    assert "layers.1.self_attn.W_c" in names and "layers.1.dropout" in names


def test_a_shared_tensor_is_listed_once_under_its_first_name():
    class Tied(Module):
        def __init__(self):
            super().__init__()
            self.first, self.second = Linear(4, 4, rng()), Linear(4, 4, rng(), bias=False)
            self.second.weight = self.first.weight
    assert [name for name, _ in Tied().named_parameters()] == ["first.weight", "first.bias"]


def test_a_buffer_is_not_a_parameter():
    class WithBuffer(Module):
        def __init__(self):
            super().__init__()
            self.table = Tensor(np.ones(3))
    assert WithBuffer().parameters() == [] and WithBuffer().state_dict() == {}


def test_state_dict_round_trip_gives_the_same_parameters_and_outputs():
    source, target = FeedForward(4, 8, rng(1)), FeedForward(4, 8, rng(2))
    x = tensor(3, 4, dtype=np.float32)
    assert not np.allclose(source(x).data, target(x).data)
    target.load_state_dict(source.state_dict())
    for (name, p), (other, q) in zip(source.named_parameters(), target.named_parameters()):
        assert name == other
        np.testing.assert_array_equal(p.data, q.data)
    np.testing.assert_array_equal(source(x).data, target(x).data)


def test_state_dict_holds_copies_not_the_parameters_arrays():
    linear = Linear(2, 3, rng())
    state = linear.state_dict()
    linear.weight.data += 1
    assert not np.array_equal(state["weight"], linear.weight.data)


def test_load_state_dict_keeps_the_module_dtype():
    linear = Linear(2, 3, rng())
    linear.load_state_dict({k: v.astype(np.float64) for k, v in Linear(2, 3, rng(1)).state_dict().items()})
    assert linear.weight.dtype == np.float32


def test_load_state_dict_names_missing_unexpected_and_mismatched_parameters_in_one_error():
    linear = Linear(2, 3, rng())
    before = linear.weight.data.copy()
    state = {"weight": np.zeros((3, 2)), "bais": np.zeros(3)}
    with pytest.raises(ValueError) as error:
        linear.load_state_dict(state)
    message = str(error.value)
    assert "missing: bias" in message
    assert "unexpected: bais" in message
    assert "weight: expected shape (2, 3), got (3, 2)" in message
    np.testing.assert_array_equal(linear.weight.data, before)


def test_train_and_eval_reach_modules_inside_lists():
    stack = Stack()
    assert stack.eval() is stack
    assert all(not m.training for _, m in stack.named_modules())
    stack.train()
    assert all(m.training for _, m in stack.named_modules())
    stack.train(False)
    assert not stack.layers[1].dropout.training


def test_zero_grad_clears_every_gradient():
    linear = Linear(2, 3, rng())
    linear(tensor(4, 2, dtype=np.float32)).sum().backward()
    assert linear.weight.grad is not None
    linear.zero_grad()
    assert all(p.grad is None for p in linear.parameters())


def test_astype_converts_parameters_and_buffers_in_place():
    stack, encoding = Stack(), PositionalEncoding(4, 10, 0.0, rng())
    weight = stack.layers[0].self_attn.W_q.weight
    stack.astype(np.float64), encoding.astype(np.float64)
    assert stack.layers[0].self_attn.W_q.weight is weight
    assert all(p.dtype == np.float64 for p in stack.parameters())
    assert encoding.P.dtype == np.float64


def test_astype_refuses_a_non_floating_dtype():
    with pytest.raises(TypeError, match="floating"):
        Linear(2, 3, rng()).astype(np.int64)


# --- Linear ------------------------------------------------------------------------------

def test_linear_computes_x_times_w_plus_b_with_w_of_shape_d_in_by_d_out():
    linear = Linear(3, 5, rng()).astype(np.float64)
    linear.bias.data = rng(1).standard_normal(5)
    x = tensor(2, 4, 3)
    assert linear.weight.shape == (3, 5)
    np.testing.assert_allclose(linear(x).data, x.data @ linear.weight.data + linear.bias.data, rtol=1e-14)


def test_linear_initialisation_is_xavier_normal_with_zero_bias():
    linear = Linear(300, 500, rng())
    std = math.sqrt(2 / (300 + 500))
    assert abs(linear.weight.data.std() / std - 1) < 0.01
    assert abs(linear.weight.data.mean()) < 0.01 * std
    np.testing.assert_array_equal(linear.bias.data, 0)


def test_linear_without_bias_has_only_a_weight():
    assert [name for name, _ in Linear(2, 3, rng(), bias=False).named_parameters()] == ["weight"]


def test_linear_shape_error_names_expected_and_actual_last_dimension():
    with pytest.raises(ValueError, match=r"d_in=3, got shape \(2, 4\)"):
        Linear(3, 5, rng())(tensor(2, 4, dtype=np.float32))


@pytest.mark.parametrize("bias", [True, False])
def test_linear_gradients_for_input_and_parameters(bias):
    linear = Linear(3, 4, rng(), bias=bias).astype(np.float64)
    assert check_gradients(linear, tensor(2, 3))


# --- Embedding ---------------------------------------------------------------------------

IDS = np.array([[0, 3, 3, 1], [4, 0, 2, 3]])


def test_embedding_is_the_row_lookup_times_square_root_of_d_model():
    embedding = Embedding(5, 16, rng())
    np.testing.assert_allclose(embedding(IDS).data, 4.0 * embedding.weight.data[IDS], rtol=1e-6)
    np.testing.assert_array_equal(Embedding(5, 16, rng(), scale=False)(IDS).data, embedding.weight.data[IDS])


def test_scaled_embedding_entries_have_unit_scale():
    embedding = Embedding(1000, 64, rng())
    assert abs(embedding.weight.data.std() * 8 - 1) < 0.01
    assert abs(embedding(np.arange(1000)).data.std() - 1) < 0.01


def test_embedding_gradient_with_repeated_ids():
    embedding = Embedding(5, 3, rng()).astype(np.float64)
    assert check_gradients(embedding, IDS)


# --- LayerNorm ---------------------------------------------------------------------------

def eq2(z, gamma, beta, eps=1e-6):
    mu = z.mean(axis=-1, keepdims=True)
    return gamma * (z - mu) / (z.std(axis=-1, keepdims=True) + eps) + beta


def test_layer_norm_starts_as_thesis_eq_2_with_gamma_one_and_beta_zero():
    norm = LayerNorm(6).astype(np.float64)
    x = tensor(2, 3, 6)
    np.testing.assert_array_equal(norm.gamma.data, 1)
    np.testing.assert_array_equal(norm.beta.data, 0)
    np.testing.assert_allclose(norm(x).data, eq2(x.data, 1.0, 0.0), rtol=1e-12, atol=1e-14)


def test_layer_norm_torch_variant_divides_by_root_of_variance_plus_eps():
    norm = LayerNorm(6, eps=1e-2, variant="torch").astype(np.float64)
    x = tensor(3, 6)
    expected = (x.data - x.data.mean(-1, keepdims=True)) / np.sqrt(x.data.var(-1, keepdims=True) + 1e-2)
    np.testing.assert_allclose(norm(x).data, expected, rtol=1e-12)


def test_layer_norm_unknown_variant_is_a_value_error():
    with pytest.raises(ValueError, match="variant must be one of"):
        LayerNorm(6, variant="rms")


@pytest.mark.parametrize("variant", ["thesis", "torch"])
def test_layer_norm_gradients_for_input_and_parameters(variant):
    norm = LayerNorm(5, variant=variant).astype(np.float64)
    norm.gamma.data, norm.beta.data = 1 + rng(1).standard_normal(5), rng(2).standard_normal(5)
    assert check_gradients(norm, tensor(2, 3, 5))


# --- Dropout -----------------------------------------------------------------------------

def test_dropout_drops_in_training_and_is_the_identity_in_evaluation():
    dropout = Dropout(0.5, rng())
    x = Tensor(np.ones((50, 50), np.float32))
    assert 0.4 < np.mean(dropout(x).data == 0) < 0.6
    dropout.eval()
    assert dropout(x) is x


@pytest.mark.parametrize("p", [-0.1, 1.1])
def test_dropout_probability_outside_zero_one_is_a_value_error(p):
    with pytest.raises(ValueError, match=r"p must be in \[0, 1\]"):
        Dropout(p, rng())


# --- FeedForward -------------------------------------------------------------------------

def sigmoid(z):
    return 1 / (1 + np.exp(-z))


HIDDEN = {
    "relu": lambda ffn, x: np.maximum(0, affine(ffn.W_1, x)),
    "gelu": lambda ffn, x: (lambda z: z * 0.5 * (1 + erf(z / math.sqrt(2))))(affine(ffn.W_1, x)),
    "swiglu": lambda ffn, x: sigmoid(affine(ffn.W_1, x)) * affine(ffn.W_3, x),
}


def affine(linear, x):
    return x @ linear.weight.data + linear.bias.data


def random_biases(module, seed=1):
    """Non-zero biases, so that a formula that forgets one is caught."""
    for name, p in module.named_parameters():
        if name.endswith("bias"):
            p.data = rng(seed).standard_normal(p.shape).astype(p.dtype)
    return module


@pytest.mark.parametrize("activation", ["relu", "gelu", "swiglu"])
def test_feed_forward_matches_its_formula(activation):
    ffn = random_biases(FeedForward(4, 10, rng(), activation=activation).astype(np.float64))
    x = tensor(2, 3, 4)
    expected = affine(ffn.W_2, HIDDEN[activation](ffn, x.data))
    np.testing.assert_allclose(ffn(x).data, expected, rtol=1e-12, atol=1e-14)


def test_feed_forward_parameters_follow_the_thesis_names():
    names = [name for name, _ in FeedForward(4, 10, rng()).named_parameters()]
    assert names == ["W_1.weight", "W_1.bias", "W_2.weight", "W_2.bias"]
    swiglu = dict(FeedForward(4, 10, rng(), activation="swiglu").named_parameters())
    assert swiglu["W_1.weight"].shape == swiglu["W_3.weight"].shape == (4, 10)
    assert swiglu["W_2.weight"].shape == (10, 4)


@pytest.mark.parametrize("activation", ["relu", "gelu", "swiglu"])
def test_feed_forward_gradients_for_input_and_parameters(activation):
    ffn = random_biases(FeedForward(4, 6, rng(), activation=activation).astype(np.float64))
    assert check_gradients(ffn, tensor(2, 3, 4))


def test_feed_forward_gradients_with_seeded_dropout_in_training():
    ffn = FeedForward(4, 6, rng(), dropout=0.3).astype(np.float64)
    x = tensor(2, 3, 4)

    def forward(x, *params):
        ffn.dropout.rng = rng(7)  # the same mask at every evaluation
        return ffn(x)
    assert gradcheck(forward, x, *ffn.parameters())


def test_feed_forward_dropout_acts_in_training_only():
    ffn = FeedForward(4, 32, rng(), dropout=0.5)
    x = tensor(2, 3, 4, dtype=np.float32)
    trained = ffn(x).data
    ffn.eval()
    evaluated = ffn(x).data
    np.testing.assert_allclose(evaluated, affine(ffn.W_2, HIDDEN["relu"](ffn, x.data)), rtol=1e-5, atol=1e-6)
    assert not np.allclose(trained, evaluated)


def test_feed_forward_unknown_activation_names_the_allowed_values():
    with pytest.raises(ValueError, match=r"one of \('relu', 'gelu', 'gelu_tanh', 'swiglu'\), got 'tanh'"):
        FeedForward(4, 8, rng(), activation="tanh")


# --- dtype -------------------------------------------------------------------------------

FLOAT32_CASES = {
    "linear": (lambda: Linear(4, 3, rng()), lambda: tensor(2, 4, dtype=np.float32)),
    "embedding": (lambda: Embedding(5, 4, rng()), lambda: IDS),
    "layer_norm": (lambda: LayerNorm(4), lambda: tensor(2, 3, 4, dtype=np.float32)),
    "ffn_relu_with_dropout": (lambda: FeedForward(4, 8, rng(), dropout=0.1), lambda: tensor(2, 3, 4, dtype=np.float32)),
    "ffn_gelu": (lambda: FeedForward(4, 8, rng(), activation="gelu"), lambda: tensor(2, 3, 4, dtype=np.float32)),
    "ffn_swiglu": (lambda: FeedForward(4, 8, rng(), activation="swiglu"),
                   lambda: tensor(2, 3, 4, dtype=np.float32)),
}


@pytest.mark.parametrize("case", FLOAT32_CASES)
def test_float32_is_preserved_in_outputs_and_gradients(case):
    make_module, make_input = FLOAT32_CASES[case]
    module, x = make_module(), make_input()
    out = module(x)
    out.backward(np.ones(out.shape, np.float32))
    assert out.dtype == np.float32
    assert all(p.dtype == np.float32 and p.grad.dtype == np.float32 for p in module.parameters())
    if isinstance(x, Tensor):
        assert x.grad.dtype == np.float32
