"""Temporal attention for forecasting (architecture notes §Applications Beyond NLP, §Time Series
Analysis):

    # Query: current time step
    # Keys/Values: historical time steps
    forecast = Attention(current, history, history)

A window of the w latest values x_{t−w+1} … x_t is embedded value by value, each with its
position; the current step t is the one query, the w steps of the window are the keys and the
values, and a linear head reads the attended vector out as the next `horizon` values:

    h_i = x_i w_e + b_e + p_i             i = t−w+1 … t        H: (batch, w, d)       value + position
    a   = MultiHead(h_t, H, H)            eqs. (3)–(7)          (batch, 1, d)          query: step t
    ŷ   = (h_t + a) W_o + b_o                                  (batch, horizon)       x̂_{t+1} … x̂_{t+h}

The residual h_t + a keeps the current value on a direct path to the head, as the encoder layer's
"Add" does (a forecast "like the last value, corrected by what the history says"); attention
supplies the correction. The window holds x_t and its past only, never a value to forecast, so
the forecast for t + 1 cannot see the future (tests/test_time_series.py checks it).

Why one attention layer and not a causal encoder stack: with one query the weights
α_t = softmax(q_t Kᵀ/√d_k) are one distribution over the lags, which can be drawn and read;
on the series tried here (a sine, daily stock prices) a causal `EncoderLayer` did not forecast
better (docs/beyond_text.md).

Normalisation (`Standardiser`) is fitted on the training part only; `sliding_windows` turns a
series into (inputs, targets) pairs. The baselines and MASE are in forecast_baselines.py.
"""
from dataclasses import dataclass

import numpy as np

from autograd import no_grad
from autograd.checks import checked_integer
from autograd.optim import Adam
from numpy_transformer.attention import MultiHeadAttention
from numpy_transformer.nn import Linear, Module
from numpy_transformer.positional import PositionalEncoding

__all__ = ["sliding_windows", "Standardiser", "TemporalAttentionForecaster", "train_forecaster", "forecast",
           "attention_over_history"]


def sliding_windows(series, window, horizon=1):
    """(inputs, targets) of every window of a 1-D series: inputs[i] = series[i : i + w] (the history,
    oldest first, the current step last), targets[i] = series[i + w : i + w + horizon] (what follows).

    series: (n,) → inputs (n − w − horizon + 1, w), targets (n − w − horizon + 1, horizon). A target
    is never inside its own window. Window i forecasts from step t = i + w − 1.
    """
    series = np.asarray(series)
    if series.ndim != 1:
        raise ValueError(f"sliding_windows: series must be 1-D (n,), got shape {series.shape}")
    window = checked_integer("sliding_windows: window", window, low=1)
    horizon = checked_integer("sliding_windows: horizon", horizon, low=1)
    count = len(series) - window - horizon + 1
    if count < 1:
        raise ValueError(f"sliding_windows: a series of length {len(series)} has no window of {window} values "
                         f"followed by {horizon} target(s); it needs at least {window + horizon} values")
    inputs = np.lib.stride_tricks.sliding_window_view(series, window)[:count]
    targets = np.lib.stride_tricks.sliding_window_view(series[window:], horizon)[:count]
    return inputs.copy(), targets.copy()


@dataclass(frozen=True)
class Standardiser:
    """z = (x − μ) / σ with μ, σ the mean and standard deviation of the training part only, so no
    statistic of the held-out part leaks into the model's inputs."""
    mean: float
    std: float

    @classmethod
    def fit(cls, training_series):
        training_series = np.asarray(training_series, dtype=np.float64)
        std = training_series.std() if training_series.size else 0.0
        if not std > 0:
            raise ValueError(f"Standardiser.fit: the training series needs at least two distinct values, "
                             f"got {training_series.size} value(s) with standard deviation {std}")
        return cls(float(training_series.mean()), float(std))

    def transform(self, x):
        return (np.asarray(x) - self.mean) / self.std

    def inverse(self, z):
        return np.asarray(z) * self.std + self.mean


class TemporalAttentionForecaster(Module):
    """ŷ = (h_t + MultiHead(h_t, H, H)) W_o + b_o, h_i = x_i w_e + b_e + p_i (module docstring).

    window: w, the number of values the model sees; horizon: how many next values it forecasts;
    positions: "learned" (a parameter per position) or "sinusoidal" (eq. (1)), added by
    `PositionalEncoding`. forward: x (batch, w) → (batch, horizon). After a call,
    `attention.last_weights` (batch, heads, 1, w) holds α_t over the window, oldest first.
    """

    def __init__(self, window, rng, horizon=1, d_model=32, n_heads=4, positions="learned", dtype=np.float32):
        super().__init__()
        self.window = checked_integer("TemporalAttentionForecaster: window", window, low=1)
        self.horizon = checked_integer("TemporalAttentionForecaster: horizon", horizon, low=1)
        if positions not in ("learned", "sinusoidal"):
            raise ValueError(f"TemporalAttentionForecaster: positions must be 'learned' or 'sinusoidal', got {positions!r}")
        self.value_embedding = Linear(1, d_model, rng, dtype=dtype)
        self.positions = PositionalEncoding(d_model, window, 0.0, rng, kind=positions, dtype=dtype)
        self.attention = MultiHeadAttention(d_model, n_heads, rng, dtype=dtype)
        self.head = Linear(d_model, horizon, rng, dtype=dtype)

    def forward(self, x):
        if x.ndim != 2 or x.shape[1] != self.window:
            raise ValueError(f"TemporalAttentionForecaster: expected windows of shape (batch, window={self.window}), "
                             f"got shape {tuple(x.shape)}")
        H = self.positions(self.value_embedding(x.reshape(*x.shape, 1)))       # (batch, w, d)
        current = H[:, -1:]                                                    # (batch, 1, d): the query, step t
        attended = self.attention(current, H)                                  # keys and values: the window
        return self.head(current + attended).reshape(x.shape[0], self.horizon)


def train_forecaster(model, inputs, targets, rng, steps=500, batch_size=64, lr=3e-3):
    """Adam on the mean squared error ½·mean (ŷ − y)² over random batches of windows; returns the
    losses, one per step. inputs (n, w), targets (n, horizon), in the model's scale."""
    if len(inputs) != len(targets):
        raise ValueError(f"train_forecaster: inputs and targets must hold as many windows, got "
                         f"{len(inputs)} and {len(targets)}")
    dtype = model.head.weight.dtype
    optimizer = Adam(model.named_parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        rows = rng.choice(len(inputs), size=min(batch_size, len(inputs)), replace=False)
        error = model(np.asarray(inputs[rows], dtype)) - np.asarray(targets[rows], dtype)
        loss = (error * error).mean() * 0.5
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.data))
    return losses


def forecast(model, inputs):
    """The model's forecasts of every window, (n, w) → (n, horizon), without building a graph."""
    with no_grad():
        return model(np.asarray(inputs, model.head.weight.dtype)).data


def attention_over_history(model, inputs):
    """α_t of every window, averaged over the heads: (n, w) → (n, w), column j the weight of
    position j of the window (j = w − 1: the current step, lag 0)."""
    forecast(model, inputs)
    return model.attention.last_weights.mean(axis=1)[:, 0]
