"""examples/forecast_attention.py with tiny settings on matplotlib's bundled goog.npz: the windows
forecast tomorrow's return from today's, nothing of the tail is fitted, and the last line reports
three MASE on one scale."""
import re

import numpy as np
import pytest

from run_helpers import load_example


@pytest.fixture(scope="module")
def example():
    return load_example("forecast_attention")


def test_the_run_ends_with_the_three_mase_on_the_tail(example, tmp_path, capsys):
    figure = tmp_path / "forecast_attention.png"
    result = example.main(["--steps", "5", "--window", "5", "--d-model", "8", "--heads", "2", "--out", str(tmp_path)])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.fullmatch(r"MASE: model \d+\.\d\d, naive \d+\.\d\d, linear AR \d+\.\d\d", last)
    _, prices = example.load_prices()
    n_train = result.data.n_train
    tail_moves = np.abs(np.diff(prices[n_train - 1:])).mean()             # naive: p̂_{t+1} = p_t over the tail
    assert result.mase["naive"] == pytest.approx(tail_moves / np.abs(np.diff(prices[:n_train])).mean())
    assert f"naive {result.mase['naive']:.2f}" in last and figure.is_file()
    assert result.weights.shape == (len(prices) - n_train, 5)


def test_each_window_forecasts_the_return_into_the_next_day(example):
    _, prices = example.load_prices()
    data = example.prepare(prices, window=5, train_fraction=0.8)
    returns = np.log(prices[data.today + 1] / prices[data.today])
    np.testing.assert_allclose(data.standardiser.inverse(data.targets[:, 0]), returns)
    np.testing.assert_allclose(data.standardiser.inverse(data.inputs[:, -1]), np.log(prices[data.today] / prices[data.today - 1]))
    assert (data.today[data.training] + 1 < data.n_train).all() and (data.today[~data.training] + 1 >= data.n_train).all()


def test_the_tail_does_not_reach_the_fitted_statistics_or_the_training_windows(example):
    _, prices = example.load_prices()
    changed = prices.copy()
    data = example.prepare(prices, window=5, train_fraction=0.8)
    changed[data.n_train:] *= 3
    changed_data = example.prepare(changed, window=5, train_fraction=0.8)
    assert changed_data.standardiser == data.standardiser
    np.testing.assert_array_equal(changed_data.training_returns, data.training_returns)
    np.testing.assert_array_equal(changed_data.inputs[data.training], data.inputs[data.training])
    np.testing.assert_array_equal(changed_data.targets[data.training], data.targets[data.training])


def test_a_training_fraction_that_leaves_no_tail_is_refused(example):
    _, prices = example.load_prices()
    with pytest.raises(ValueError, match="--train-fraction 1.0 leaves 1047 of 1047 days"):
        example.prepare(prices, window=5, train_fraction=1.0)
