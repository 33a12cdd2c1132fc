"""Temporal attention for forecasting (numpy_transformer.beyond_text.time_series) and its
baselines (forecast_baselines): gradients, causality, the windows, MASE, the linear AR, and a
short training that beats the naive forecast on a sine."""
import numpy as np
import pytest

from autograd import Tensor, gradcheck
from numpy_transformer.beyond_text.forecast_baselines import (fit_linear_autoregression, linear_autoregression_forecast,
                                                              mean_absolute_scaled_error, naive_forecast)
from numpy_transformer.beyond_text.time_series import (Standardiser, TemporalAttentionForecaster, attention_over_history,
                                                       forecast, sliding_windows, train_forecaster)


def forecaster(window=6, horizon=1, positions="learned", dtype=np.float32, seed=0):
    return TemporalAttentionForecaster(window, np.random.default_rng(seed), horizon=horizon, d_model=8, n_heads=2,
                                       positions=positions, dtype=dtype)


def noisy_sine(n=600, period=25, seed=0):
    t = np.arange(n)
    return np.sin(2 * np.pi * t / period) + 0.1 * np.random.default_rng(seed).standard_normal(n)


# --- gradients ---------------------------------------------------------------------------

@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
def test_forecaster_gradients_for_the_window_and_every_parameter(positions):
    model = forecaster(window=5, horizon=2, positions=positions, dtype=np.float64)
    for p in model.parameters():                                          # biases away from 0
        p.data += 0.1 * np.random.default_rng(1).standard_normal(p.shape)
    x = Tensor(np.random.default_rng(2).standard_normal((3, 5)), requires_grad=True)
    assert gradcheck(lambda x, *params: model(x), x, *model.parameters(), mode="jacobian")


# --- no leakage --------------------------------------------------------------------------

@pytest.mark.parametrize("t", [5, 9, 14])
def test_the_forecast_from_step_t_does_not_change_when_later_values_change(t):
    model, window = forecaster(), 6
    series = noisy_sine(20)
    changed = series.copy()
    changed[t + 1:] = np.random.default_rng(3).standard_normal(len(series) - t - 1) * 10
    first = t - window + 1                                                # the windows ending at steps ≤ t
    before = forecast(model, sliding_windows(series, window)[0][:first + 1])
    after = forecast(model, sliding_windows(changed, window)[0][:first + 1])
    np.testing.assert_array_equal(after, before)
    assert not np.allclose(forecast(model, sliding_windows(changed, window)[0])[first + 1:],
                           forecast(model, sliding_windows(series, window)[0])[first + 1:])


def test_windows_hold_the_past_only_and_their_targets_follow_them():
    indices = np.arange(12.0)                                             # each value is its own time step
    inputs, targets = sliding_windows(indices, window=4, horizon=3)
    assert inputs.shape == (6, 4) and targets.shape == (6, 3)
    np.testing.assert_array_equal(inputs[2], [2, 3, 4, 5])
    np.testing.assert_array_equal(targets[2], [6, 7, 8])
    assert (inputs.max(axis=1) < targets.min(axis=1)).all()
    np.testing.assert_array_equal(targets[:, 0], inputs[:, -1] + 1)
    assert targets[-1, -1] == indices[-1]                                 # every value used


def test_the_standardiser_reads_the_training_part_only():
    series = noisy_sine(100)
    changed = series.copy()
    changed[80:] += 50
    assert Standardiser.fit(series[:80]) == Standardiser.fit(changed[:80])
    standardiser = Standardiser.fit(series[:80])
    z = standardiser.transform(series[:80])
    assert z.mean() == pytest.approx(0, abs=1e-12) and z.std() == pytest.approx(1)
    np.testing.assert_allclose(standardiser.inverse(z), series[:80])


# --- MASE and the baselines --------------------------------------------------------------

def test_naive_forecast_has_mase_one_on_the_training_part_by_construction():
    training = np.cumsum(np.random.default_rng(4).standard_normal(200))
    inputs, targets = sliding_windows(training, window=1)
    assert mean_absolute_scaled_error(targets, naive_forecast(inputs), training) == pytest.approx(1, rel=1e-12)


def test_mase_matches_a_hand_computation():
    training = np.array([1.0, 3.0, 2.0, 5.0])                             # naive errors 2, 1, 3: scale 2
    actual, predicted = np.array([4.0, 6.0]), np.array([4.5, 3.0])        # errors 0.5, 3: mean 1.75
    assert mean_absolute_scaled_error(actual, predicted, training) == pytest.approx(1.75 / 2)


def test_naive_forecast_repeats_the_last_value():
    np.testing.assert_array_equal(naive_forecast(np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]), horizon=2),
                                  [[3, 3], [6, 6]])


def test_linear_autoregression_recovers_the_coefficients_of_an_ar2_series():
    c, phi_1, phi_2 = 0.5, 0.6, -0.3
    noise = np.random.default_rng(5).standard_normal(5000)
    x = np.zeros(5000)
    for t in range(2, 5000):
        x[t] = c + phi_1 * x[t - 1] + phi_2 * x[t - 2] + noise[t]
    np.testing.assert_allclose(fit_linear_autoregression(x, order=2), [c, phi_1, phi_2], atol=0.05)


def test_linear_autoregression_forecast_weights_the_latest_value_by_phi_1():
    coefficients = np.array([1.0, 0.5, 0.25])                             # 1 + 0.5 x_t + 0.25 x_{t−1}
    windows = np.array([[9.0, 2.0, 4.0], [0.0, 4.0, 2.0]])
    np.testing.assert_allclose(linear_autoregression_forecast(coefficients, windows), [[1 + 2 + 0.5], [1 + 1 + 1]])


# --- learning ----------------------------------------------------------------------------

def test_the_forecaster_learns_a_sine_better_than_the_naive_forecast():
    series, n_train, window = noisy_sine(), 480, 24
    standardiser = Standardiser.fit(series[:n_train])
    inputs, targets = sliding_windows(standardiser.transform(series), window)
    training = np.arange(len(inputs)) + window < n_train                  # the target's step is in the training part
    model = TemporalAttentionForecaster(window, np.random.default_rng(1), d_model=16)
    losses = train_forecaster(model, inputs[training], targets[training], np.random.default_rng(2), steps=200)
    actual = standardiser.inverse(targets[~training])
    model_mase = mean_absolute_scaled_error(actual, standardiser.inverse(forecast(model, inputs[~training])),
                                            series[:n_train])
    naive_mase = mean_absolute_scaled_error(actual, standardiser.inverse(naive_forecast(inputs[~training])),
                                            series[:n_train])
    assert np.mean(losses[-20:]) < 0.25 * losses[0]
    assert model_mase < 0.7 * naive_mase


def test_the_forecaster_trains_and_forecasts_in_float32():
    model = forecaster(window=6, horizon=2)
    inputs, targets = sliding_windows(noisy_sine(40), 6, horizon=2)             # float64 arrays
    train_forecaster(model, inputs, targets, np.random.default_rng(0), steps=2)
    assert forecast(model, inputs).dtype == np.float32
    assert all(p.dtype == np.float32 for p in model.parameters())


def test_attention_over_history_is_one_distribution_over_the_window_per_forecast():
    model = forecaster(window=6)
    weights = attention_over_history(model, sliding_windows(noisy_sine(30), 6)[0])
    assert weights.shape == (24, 6) and (weights > 0).all()
    np.testing.assert_allclose(weights.sum(axis=1), 1, rtol=1e-5)


# --- bad input ---------------------------------------------------------------------------

@pytest.mark.parametrize("window, horizon, message", [
    (0, 1, "window must be a positive integer, got 0"),
    (-3, 1, "window must be a positive integer, got -3"),
    (2.5, 1, "window must be a positive integer, got 2.5"),
    (True, 1, "window must be a positive integer, got True"),
    (3, 0, "horizon must be a positive integer, got 0"),
    (9, 2, "a series of length 10 has no window of 9 values followed by 2 target"),
])
def test_bad_window_sizes_are_refused_with_the_value_seen(window, horizon, message):
    with pytest.raises(ValueError, match=message):
        sliding_windows(np.arange(10.0), window, horizon)


def test_other_bad_inputs_are_refused():
    with pytest.raises(ValueError, match=r"series must be 1-D \(n,\), got shape \(2, 5\)"):
        sliding_windows(np.zeros((2, 5)), 2)
    with pytest.raises(ValueError, match=r"expected windows of shape \(batch, window=6\), got shape \(4, 5\)"):
        forecaster(window=6)(np.zeros((4, 5), np.float32))
    with pytest.raises(ValueError, match="same non-empty shape, got \\(3,\\) and \\(2,\\)"):
        mean_absolute_scaled_error(np.zeros(3), np.zeros(2), np.arange(5.0))
    with pytest.raises(ValueError, match="must have at least two values and change"):
        mean_absolute_scaled_error(np.zeros(3), np.zeros(3), np.ones(5))
    with pytest.raises(ValueError, match="window must be a positive integer, got 0"):
        forecaster(window=0)
    with pytest.raises(ValueError, match="positions must be 'learned' or 'sinusoidal', got 'rotary'"):
        forecaster(positions="rotary")
    with pytest.raises(ValueError, match="order must be a positive integer, got 0"):
        fit_linear_autoregression(np.arange(20.0), order=0)
    with pytest.raises(ValueError, match="standard deviation"):
        Standardiser.fit(np.ones(10))
    with pytest.raises(ValueError, match="cannot determine 4 coefficients"):
        fit_linear_autoregression(np.arange(6.0), order=3)
    with pytest.raises(ValueError, match=r"w ≥ 3, got shape \(4, 2\)"):
        linear_autoregression_forecast(np.zeros(4), np.zeros((4, 2)))
