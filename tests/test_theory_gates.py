"""numpy_transformer.theory.gates: one attention head computes AND, OR (of any number of bits)
and NOT on every input, within the derived error, which is attained."""
import itertools

import numpy as np
import pytest

from numpy_transformer.theory.gates import attention_gate, gate_error_bound, gate_projections, gate_value

BETA = 8.0


def assignments(n):
    return [list(bits) for bits in itertools.product((0, 1), repeat=n)]


def errors(gate, n, beta):
    return [abs(attention_gate(gate, bits, beta) - gate_value(gate, bits)) for bits in assignments(n)]


@pytest.mark.parametrize("gate", ["and", "or"])
@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_and_and_or_are_within_the_derived_error_on_all_inputs_and_the_bound_is_attained(gate, n):
    measured, bound = errors(gate, n, BETA), gate_error_bound(gate, n, BETA)
    assert max(measured) <= bound + 1e-15
    assert max(measured) == pytest.approx(bound, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("gate", ["and", "or"])
def test_two_bit_truth_tables_after_rounding_at_one_half(gate):
    table = {tuple(bits): round(attention_gate(gate, bits, BETA)) for bits in assignments(2)}
    expected = {"and": {(0, 0): 0, (0, 1): 0, (1, 0): 0, (1, 1): 1}, "or": {(0, 0): 0, (0, 1): 1, (1, 0): 1, (1, 1): 1}}
    assert table == expected[gate]


def test_not_is_within_one_over_one_plus_e_to_the_beta():
    for bit in (0, 1):
        assert abs(attention_gate("not", [bit], BETA) - (1 - bit)) == pytest.approx(1 / (1 + np.exp(BETA)), rel=1e-12)


def test_the_all_zero_or_and_the_all_one_and_are_exact():
    assert attention_gate("or", [0, 0, 0, 0], BETA) == 0.0
    assert attention_gate("and", [1, 1, 1, 1], BETA) == 1.0


@pytest.mark.parametrize("gate", ["and", "or"])
def test_without_the_scale_attention_averages_and_misses_the_gate(gate):
    assert max(errors(gate, 2, 0.0)) == pytest.approx(0.5)
    assert max(errors(gate, 2, 0.0)) > gate_error_bound(gate, 2, BETA)


def test_or_with_the_and_weights_is_wrong():
    assert attention_gate("and", [0, 1], BETA) < 0.5 < gate_value("or", [0, 1])


def test_the_query_reads_only_the_constant_feature():
    W_q, W_k, W_v = gate_projections("not", BETA)
    assert not W_q[:2].any() and (W_k == np.eye(3)).all() and W_v[:, 0].tolist() == [0, 1, 0]


def test_bad_gates_and_bits_are_named():
    with pytest.raises(ValueError, match="gate must be one of"):
        attention_gate("xor", [0, 1], BETA)
    with pytest.raises(ValueError, match="bits"):
        attention_gate("and", [0, 2], BETA)
    with pytest.raises(ValueError, match="NOT takes one bit"):
        attention_gate("not", [0, 1], BETA)
