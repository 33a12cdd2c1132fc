"""The forecasts temporal attention has to beat, and the error that compares them.

    naive:      x̂_{t+1} = x_t                                               the last value
    linear AR:  x̂_{t+1} = c + φ_1 x_t + φ_2 x_{t−1} + … + φ_p x_{t−p+1}      least squares on the training part
    MASE      = mean_t |x_t − x̂_t| / ( 1/(n−1) Σ_{s=2..n} |y_s − y_{s−1}| )  y_1 … y_n the training part

MASE (mean absolute scaled error, Hyndman & Koehler 2006) divides a forecast's mean absolute
error by the in-sample mean absolute error of the naive one-step forecast on the training part:
below 1 the forecast beats the naive one as it did on the training data, above 1 it loses. On a
held-out tail the naive forecast's own MASE is 1 only if the tail moves as much per step as the
training part did.
"""
import numpy as np

from autograd.checks import checked_integer
from numpy_transformer.beyond_text.time_series import sliding_windows

__all__ = ["naive_forecast", "fit_linear_autoregression", "linear_autoregression_forecast",
           "mean_absolute_scaled_error"]


def naive_forecast(inputs, horizon=1):
    """x̂_{t+1} = … = x̂_{t+h} = x_t: the last value of every window, (n, w) → (n, horizon)."""
    inputs = _windows("naive_forecast", inputs, 1)
    return np.repeat(inputs[:, -1:], horizon, axis=1)


def fit_linear_autoregression(training_series, order):
    """[c, φ_1, …, φ_p] minimising Σ_t (x_t − c − Σ_k φ_k x_{t−k})² over the training series
    (np.linalg.lstsq): a float64 array of shape (order + 1,)."""
    order = checked_integer("fit_linear_autoregression: order", order, low=1)
    inputs, targets = sliding_windows(np.asarray(training_series, dtype=np.float64), order)
    if len(inputs) < order + 1:
        raise ValueError(f"fit_linear_autoregression: {len(inputs)} windows cannot determine {order + 1} "
                         f"coefficients (order={order}); give a longer series or a lower order")
    design = np.column_stack([np.ones(len(inputs)), inputs[:, ::-1]])            # 1, x_{t}, x_{t−1}, …
    coefficients, *_ = np.linalg.lstsq(design, targets[:, 0], rcond=None)
    return coefficients


def linear_autoregression_forecast(coefficients, inputs):
    """x̂_{t+1} = c + Σ_k φ_k x_{t−k+1} from the last p values of every window, (n, w ≥ p) → (n, 1)."""
    coefficients = np.asarray(coefficients)
    order = len(coefficients) - 1
    inputs = _windows("linear_autoregression_forecast", inputs, order)
    latest_first = inputs[:, ::-1][:, :order]
    return (coefficients[0] + latest_first @ coefficients[1:])[:, None]


def mean_absolute_scaled_error(actual, forecast, training_series):
    """mean |actual − forecast| / mean_s |y_s − y_{s−1}|, y the training series (module docstring)."""
    actual, forecast = np.asarray(actual, dtype=np.float64), np.asarray(forecast, dtype=np.float64)
    if actual.shape != forecast.shape or actual.size == 0:
        raise ValueError(f"mean_absolute_scaled_error: actual and forecast must have the same non-empty shape, "
                         f"got {actual.shape} and {forecast.shape}")
    scale = np.abs(np.diff(np.asarray(training_series, dtype=np.float64))).mean() if len(training_series) > 1 else 0
    if not scale > 0:
        raise ValueError("mean_absolute_scaled_error: the training series must have at least two values "
                         "and change at least once (its naive mean absolute error scales the error)")
    return float(np.abs(actual - forecast).mean() / scale)


def _windows(name, inputs, needed):
    inputs = np.asarray(inputs)
    if inputs.ndim != 2 or inputs.shape[1] < needed:
        raise ValueError(f"{name}: inputs must be windows of shape (n, w) with w ≥ {needed}, got shape {inputs.shape}")
    return inputs
