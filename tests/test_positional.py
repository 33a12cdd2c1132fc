"""Positional encoding, thesis eq. (1) (§1.2.1): the sinusoidal table, its shift property, and
the PositionalEncoding module (sinusoidal or learned, then dropout)."""
import math

import numpy as np
import pytest

from autograd import Tensor, gradcheck
from numpy_transformer.positional import PositionalEncoding, shift_matrix, sinusoidal_encoding


def rng(seed=0):
    return np.random.default_rng(seed)


@pytest.mark.parametrize("base", [10000.0, 100.0])
def test_each_row_is_sin_and_cos_of_the_position_times_omega_k(base):
    max_len, d = 12, 8
    P = sinusoidal_encoding(max_len, d, base=base, dtype=np.float64)
    assert P.shape == (max_len, d)
    for t in range(max_len):
        for k in range(d // 2):
            omega = 1 / base ** (2 * k / d)
            assert P[t, 2 * k] == pytest.approx(math.sin(omega * t), abs=1e-15)
            assert P[t, 2 * k + 1] == pytest.approx(math.cos(omega * t), abs=1e-15)


def test_the_base_changes_the_frequencies():
    assert not np.allclose(sinusoidal_encoding(10, 8, base=100.0), sinusoidal_encoding(10, 8))
    np.testing.assert_array_equal(sinusoidal_encoding(10, 8)[:, 0], np.sin(np.arange(10)).astype(np.float32))


def test_the_first_row_is_zero_sin_and_unit_cos():
    P = sinusoidal_encoding(3, 6)
    np.testing.assert_array_equal(P[0, 0::2], 0)
    np.testing.assert_array_equal(P[0, 1::2], 1)


def test_float32_by_default():
    assert sinusoidal_encoding(5, 4).dtype == np.float32
    assert shift_matrix(1, 4).dtype == np.float32


@pytest.mark.parametrize("d_model", [7, 0, -2])
def test_odd_or_non_positive_d_model_is_a_value_error(d_model):
    with pytest.raises(ValueError, match=f"even number.*got {d_model}"):
        sinusoidal_encoding(10, d_model)


@pytest.mark.parametrize("base", [10000.0, 50.0])
@pytest.mark.parametrize("s", [0, 1, 3, 17, 40])
def test_a_shift_by_s_is_the_same_linear_map_at_every_position(s, base):
    P = sinusoidal_encoding(100, 16, base=base, dtype=np.float64)
    R = shift_matrix(s, 16, base=base, dtype=np.float64)
    np.testing.assert_allclose(P[:100 - s] @ R, P[s:], rtol=0, atol=1e-10)


def test_shift_matrices_are_rotations_that_compose():
    R2, R3, R5 = (shift_matrix(s, 8, dtype=np.float64) for s in (2, 3, 5))
    np.testing.assert_allclose(R2 @ R2.T, np.eye(8), atol=1e-14)
    np.testing.assert_allclose(R2 @ R3, R5, atol=1e-14)
    np.testing.assert_array_equal(shift_matrix(0, 8, dtype=np.float64), np.eye(8))


def test_the_dot_product_of_two_encodings_depends_only_on_their_offset():
    P = sinusoidal_encoding(60, 16, dtype=np.float64)
    omega = 1 / 10000.0 ** (np.arange(0, 16, 2) / 16)
    for s in (0, 1, 5, 20):
        dots = np.sum(P[:60 - s] * P[s:], axis=-1)
        np.testing.assert_allclose(dots, np.sum(np.cos(omega * s)), atol=1e-12)


# --- PositionalEncoding ------------------------------------------------------------------

def test_sinusoidal_module_adds_the_first_n_rows_and_has_no_parameters():
    encoding = PositionalEncoding(8, 20, 0.0, rng())
    x = Tensor(rng(1).standard_normal((2, 5, 8)).astype(np.float32))
    np.testing.assert_array_equal(encoding(x).data, x.data + sinusoidal_encoding(20, 8)[:5])
    assert encoding.parameters() == []


def test_start_shifts_the_positions_for_incremental_decoding():
    encoding = PositionalEncoding(8, 20, 0.0, rng())
    x = Tensor(np.zeros((1, 2, 8), np.float32))
    np.testing.assert_array_equal(encoding(x, start=6).data[0], sinusoidal_encoding(20, 8)[6:8])


def test_learned_module_has_a_max_len_by_d_model_parameter():
    encoding = PositionalEncoding(8, 20, 0.0, rng(), kind="learned")
    ((name, P),) = encoding.named_parameters()
    assert name == "P" and P.shape == (20, 8)
    x = Tensor(np.zeros((1, 4, 8), np.float32))
    np.testing.assert_array_equal(encoding(x).data[0], P.data[:4])


def test_learned_module_gradients_for_input_and_table():
    encoding = PositionalEncoding(4, 6, 0.0, rng(), kind="learned").astype(np.float64)
    x = Tensor(rng(1).standard_normal((2, 3, 4)), requires_grad=True)
    assert gradcheck(lambda x, P: encoding(x, start=2), x, encoding.P)


def test_dropout_acts_in_training_and_not_in_evaluation():
    encoding = PositionalEncoding(16, 50, 0.5, rng())
    x = Tensor(np.ones((4, 50, 16), np.float32))
    assert 0.4 < np.mean(encoding(x).data == 0) < 0.6
    np.testing.assert_array_equal(encoding.eval()(x).data, x.data + sinusoidal_encoding(50, 16))


def test_a_sequence_longer_than_a_learned_max_len_names_both_lengths():
    encoding = PositionalEncoding(8, 10, 0.0, rng(), kind="learned")
    with pytest.raises(ValueError, match=r"length 12\) exceed max_len=10"):
        encoding(Tensor(np.zeros((1, 12, 8), np.float32)))


def test_a_wrong_model_dimension_is_a_value_error():
    with pytest.raises(ValueError, match=r"d_model=8, got shape \(1, 3, 6\)"):
        PositionalEncoding(8, 10, 0.0, rng())(Tensor(np.zeros((1, 3, 6), np.float32)))


def test_an_unknown_kind_is_a_value_error():
    with pytest.raises(ValueError, match="kind must be one of"):
        PositionalEncoding(8, 10, 0.0, rng(), kind="rotary")


@pytest.mark.parametrize("kind", ["sinusoidal", "learned"])
def test_float32_is_preserved(kind):
    encoding = PositionalEncoding(8, 10, 0.1, rng(), kind=kind)
    x = Tensor(np.ones((2, 4, 8), np.float32), requires_grad=True)
    out = encoding(x)
    out.backward(np.ones(out.shape, np.float32))
    assert out.dtype == x.grad.dtype == np.float32
    assert all(p.grad.dtype == np.float32 for p in encoding.parameters())
