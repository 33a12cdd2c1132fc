"""The w / num_pos study of the structured approximation: sweeps on small heads whose knee is
known by construction (bands of a given half-width, a given number of rare-token windows), the
knee's definition on explicit curves, and the bootstrap comparison of two samples."""
import numpy as np
import pytest

from numpy_transformer.analysis.window_study import (
    bootstrap_difference, knee, num_pos_sweep, sweep_heads, uniform_like, width_sweep)


def banded(n, half_width):
    """(n, n) attention whose row i is uniform on the columns abs(j − i) ≤ half_width."""
    band = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :]) <= half_width
    return band / band.sum(axis=1, keepdims=True)


def rare_token_head(n=12, windows=((2, 10), (7, 0)), rows=2):
    """The identity, with each window's `rows` rows (first row, column) attending one column."""
    H = np.eye(n)
    for start, column in windows:
        H[start:start + rows] = np.eye(n)[column]
    return H


@pytest.mark.parametrize("half_width", [0, 1, 2, 3])
def test_a_band_of_half_width_k_has_its_knee_at_w_equal_k(half_width):
    curve = width_sweep(banded(14, half_width), widths=range(7))
    assert knee(curve.values, curve.captured) == half_width
    assert curve.captured[half_width] == pytest.approx(1.0)
    if half_width:
        assert curve.captured[half_width - 1] < 0.94      # one short of the band misses mass


def test_two_rare_token_windows_put_the_knee_at_num_pos_2():
    curve = num_pos_sweep(rare_token_head(), num_pos_values=range(5), w=2)
    assert knee(curve.values, curve.captured) == 2
    np.testing.assert_allclose(curve.captured[:3], [1 - 2 / 12, 1 - 1 / 12, 1.0])  # each window saves 2 × 0.5


def test_one_window_puts_the_knee_at_num_pos_1_and_none_at_0():
    assert knee(range(4), num_pos_sweep(rare_token_head(windows=((4, 11),)), range(4)).captured) == 1
    assert knee(range(4), num_pos_sweep(np.eye(10), range(4)).captured) == 0


def test_for_attention_rows_the_distance_per_row_is_one_minus_the_captured_mass():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(9, 7)) * 3
    H = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)      # a rectangular, cross-attention-like head
    curve = width_sweep(H, widths=range(4))
    np.testing.assert_allclose(curve.distance, 1 - curve.captured, atol=1e-12)
    assert curve.captured[-1] > curve.captured[0]


def test_a_band_as_wide_as_the_sentence_captures_everything():
    rng = np.random.default_rng(1)
    H = rng.dirichlet(np.ones(6), size=6)
    assert width_sweep(H, widths=[0, 5]).captured[-1] == pytest.approx(1.0)


def test_sweep_heads_keeps_each_head_apart():
    weights = np.stack([banded(12, 1), banded(12, 3), rare_token_head()])
    sweep = sweep_heads(weights, widths=range(6), num_pos_values=range(4))
    assert sweep.width.captured.shape == (3, 6) and sweep.num_pos.captured.shape == (3, 4)
    np.testing.assert_array_equal(knee(sweep.width.values, sweep.width.captured)[:2], [1, 3])
    assert knee(sweep.num_pos.values, sweep.num_pos.captured)[2] == 2
    np.testing.assert_allclose(sweep.width.captured[1], width_sweep(weights[1], range(6)).captured)


def test_the_knee_is_the_first_value_reaching_the_fraction_of_the_gain():
    values = np.array([0, 1, 2, 3, 4])
    assert knee(values, [0.2, 0.5, 0.9, 0.95, 1.0]) == 3              # 0.2 + 0.9 × 0.8 = 0.92
    assert knee(values, [0.2, 0.5, 0.9, 0.95, 1.0], fraction=0.5) == 2
    assert knee(values, [0.6, 0.6, 0.6, 0.6, 0.6]) == 0               # no gain: the first value
    assert knee(values, [0.2, 1.0, 0.7, 1.0, 0.9]) == 1               # the gain is to the maximum
    np.testing.assert_array_equal(knee(values, [[0, 1, 1, 1, 1], [0, 0, 0, 0, 1]]), [1, 4])


@pytest.mark.parametrize("call, message", [
    (lambda: knee([0, 1], [0.5, 1.0], fraction=0), "fraction"),
    (lambda: knee([0, 1, 2], [0.5, 1.0]), "captured"),
    (lambda: width_sweep(np.eye(4), widths=[2, 1]), "widths"),
    (lambda: num_pos_sweep(np.eye(4), num_pos_values=[-1, 0]), "num_pos_values"),
    (lambda: sweep_heads(np.eye(4)), "weights"),
    (lambda: bootstrap_difference([1.0], [1.0, 2.0], np.random.default_rng(0)), "a and b"),
])
def test_bad_input_names_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_the_bootstrap_separates_shifted_samples_and_not_equal_ones():
    rng = np.random.default_rng(0)
    a = rng.integers(1, 4, size=40).astype(float)
    same = bootstrap_difference(a, rng.permutation(a), np.random.default_rng(1))
    assert not same.differs and same.difference == pytest.approx(0.0) and same.low < 0 < same.high
    shifted = bootstrap_difference(a + 2, a, np.random.default_rng(1))
    assert shifted.differs and shifted.difference == pytest.approx(2.0) and shifted.low > 1.5


def test_the_bootstrap_is_reproducible_from_its_generator():
    a, b = np.arange(10.0), np.arange(10.0)[::-1] + 0.5
    assert bootstrap_difference(a, b, np.random.default_rng(3)) == bootstrap_difference(a, b, np.random.default_rng(3))


def test_the_uniform_yardstick_keeps_the_causal_mask_and_its_knee_grows_with_the_sentence():
    causal = np.tril(np.ones((4, 4))) * np.arange(1, 5)[None, :]
    np.testing.assert_allclose(uniform_like(causal[None])[0], np.tril(np.ones((4, 4))) / np.arange(1, 5)[:, None])
    short, long = (knee(range(9), width_sweep(uniform_like(np.ones((n, n))), range(9)).captured) for n in (6, 16))
    assert short < long
