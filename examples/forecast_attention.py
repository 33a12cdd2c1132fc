"""Temporal attention on a real series: Google's daily share price, one day ahead.

    python examples/forecast_attention.py                 # a few seconds
    python examples/forecast_attention.py --window 10 --steps 400 --out runs/forecast

Data: `goog.npz` of matplotlib's bundled sample data (no network): Yahoo Finance's daily prices of
GOOG from 2004-08-19 to 2008-10-14, 1,047 trading days; the adjusted close p_t is forecast.
The first 80% of the days are the training part, the last 20% (210 days, January to October 2008,
the financial crash) the held-out tail.

The model sees log returns r_t = log p_t − log p_{t−1}, standardised with the mean and standard
deviation of the training part's returns: a window of the w latest returns is the history, the
current day the query (numpy_transformer.beyond_text.time_series), and the forecast return gives
the price p̂_{t+1} = p_t · exp(r̂_{t+1}). The linear AR(p) is fitted by least squares on the same
standardised training returns; the naive forecast is p̂_{t+1} = p_t.

All three are scored on the tail's prices by MASE with one scale, the naive one-step mean absolute
error of the training part's prices (Hyndman & Koehler 2006). The naive forecast's MASE on the tail
is then not 1 but the tail's mean daily move over the training part's: 2008 moved about twice as
much per day. Daily prices are close to a random walk, so the naive forecast is hard to beat.
The figure is OUT/forecast_attention.png (--out, default runs/examples/forecast_attention/);
--threads N: BLAS threads (default 1). The last line is `MASE: model x.xx, naive y.yy, linear AR z.zz`.
"""
import argparse
from types import SimpleNamespace

from numpy_transformer.cli.example_scripts import (add_example_arguments, output_folder, require, run_example,
                                                   threads_from_command_line)

threads_from_command_line()                  # before NumPy loads: BLAS reads its thread count then
import numpy as np  # noqa: E402

from numpy_transformer.beyond_text.forecast_baselines import (fit_linear_autoregression,  # noqa: E402
                                                              linear_autoregression_forecast,
                                                              mean_absolute_scaled_error)
from numpy_transformer.beyond_text.time_series import (Standardiser, TemporalAttentionForecaster,  # noqa: E402
                                                       attention_over_history, forecast, sliding_windows,
                                                       train_forecaster)

SOURCE = "matplotlib sample data goog.npz (Yahoo Finance, GOOG daily adjusted close)"


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--window", type=int, default=20, help="w, the days of history the model sees (default 20)")
    parser.add_argument("--order", type=int, default=5, help="p of the linear AR baseline (default 5)")
    parser.add_argument("--train-fraction", type=float, default=0.8, help="the training part (default 0.8)")
    parser.add_argument("--d-model", type=int, default=16, help="d_model (default 16)")
    parser.add_argument("--heads", type=int, default=4, help="attention heads (default 4)")
    parser.add_argument("--steps", type=int, default=200, help="Adam steps (default 200)")
    parser.add_argument("--lr", type=float, default=1e-3, help="learning rate (default 1e-3)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the weights and the batches (default 0)")
    add_example_arguments(parser, __file__)
    return parser.parse_args(argv)


def load_prices():
    """(dates, adjusted closing prices) of goog.npz, bundled with matplotlib."""
    from matplotlib import cbook

    data = cbook.get_sample_data("goog.npz")["price_data"]
    return data["date"], data["adj_close"].astype(np.float64)


def prepare(prices, window, train_fraction):
    """The windows of standardised log returns and what each forecasts.

    Window i holds the returns into days i+1 … i+w and forecasts the return into day t + 1 = i+w+1
    from day t's price; it belongs to the training part when day t + 1 does.
    """
    n_train = int(train_fraction * len(prices))
    if not window + 2 <= n_train < len(prices):
        raise ValueError(f"--train-fraction {train_fraction} leaves {n_train} of {len(prices)} days for training; "
                         f"both parts need days, and the training part more than window + 1 = {window + 1}")
    returns = np.diff(np.log(prices))                                    # returns[j]: day j → day j + 1
    standardiser = Standardiser.fit(returns[:n_train - 1])               # the training part's returns only
    standardised = standardiser.transform(returns)
    inputs, targets = sliding_windows(standardised, window)
    today = np.arange(len(inputs)) + window                              # day t of window i
    return SimpleNamespace(n_train=n_train, standardiser=standardiser, training_returns=standardised[:n_train - 1],
                           inputs=inputs, targets=targets, training=today + 1 < n_train, today=today)


def price_forecast(data, prices, standardised_returns):
    """p̂_{t+1} = p_t · exp(r̂_{t+1}) for every window of the tail, (n,) prices."""
    return prices[data.today[~data.training]] * np.exp(data.standardiser.inverse(standardised_returns)[:, 0])


def run(args):
    dates, prices = load_prices()
    data = prepare(prices, args.window, args.train_fraction)
    model = TemporalAttentionForecaster(args.window, np.random.default_rng(args.seed), d_model=args.d_model,
                                        n_heads=args.heads)
    losses = train_forecaster(model, data.inputs[data.training], data.targets[data.training],
                              np.random.default_rng(args.seed + 1), steps=args.steps, lr=args.lr)
    tail = data.inputs[~data.training]
    coefficients = fit_linear_autoregression(data.training_returns, args.order)
    forecasts = {"model": price_forecast(data, prices, forecast(model, tail)),
                 "naive": prices[data.today[~data.training]],
                 "linear AR": price_forecast(data, prices, linear_autoregression_forecast(coefficients, tail))}
    actual = prices[data.today[~data.training] + 1]
    mase = {name: mean_absolute_scaled_error(actual, predicted, prices[:data.n_train])
            for name, predicted in forecasts.items()}
    return SimpleNamespace(dates=dates[data.today[~data.training] + 1], actual=actual, forecasts=forecasts, mase=mase,
                           weights=attention_over_history(model, tail), losses=losses, data=data, n_days=len(prices))


def draw(result, path):
    """Forecast against truth on the tail; the attention per lag averaged over the tail; α_t per day."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (prices, lags, heat) = plt.subplots(1, 3, figsize=(15, 4), constrained_layout=True)
    prices.plot(result.dates, result.actual, color="black", label="truth")
    for name, style in (("model", "-"), ("linear AR", ":")):
        prices.plot(result.dates, result.forecasts[name], style, label=f"{name} (MASE {result.mase[name]:.2f})")
    prices.set(title=f"one day ahead on the tail (naive MASE {result.mase['naive']:.2f})", ylabel="price ($)")
    prices.tick_params(axis="x", labelrotation=30)
    prices.legend()
    window = result.weights.shape[1]
    lag = np.arange(window)[::-1]                                        # position j of the window is lag w − 1 − j
    lags.bar(lag, result.weights.mean(axis=0))
    lags.axhline(1 / window, color="grey", linestyle="--", label="uniform 1/w")
    lags.set(title="attention of the current day, mean over the tail", xlabel="lag (days before t)", ylabel="weight")
    lags.legend()
    image = heat.imshow(result.weights[:, ::-1].T, aspect="auto", origin="lower", cmap="viridis")
    heat.set(title="attention α_t per forecast day (heads averaged)", xlabel="day of the tail", ylabel="lag",
             yticks=range(0, window, max(1, window // 5)))
    figure.colorbar(image, ax=heat)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def main(argv=None):
    args = parse_arguments(argv)
    require("matplotlib")                    # its sample data and the figure
    result = run(args)
    data = result.data
    print(f"data: {SOURCE}, {result.n_days} days; training part {data.n_train} days, "
          f"held-out tail {int((~data.training).sum())} days")
    print(f"model: window {args.window}, d_model {args.d_model}, {args.heads} heads, {args.steps} steps; "
          f"training loss {np.mean(result.losses[:10]):.3f} → {np.mean(result.losses[-10:]):.3f}")
    print(f"figure: {draw(result, output_folder(args) / 'forecast_attention.png')}")
    mase = result.mase
    print(f"MASE: model {mase['model']:.2f}, naive {mase['naive']:.2f}, linear AR {mase['linear AR']:.2f}")
    return result


if __name__ == "__main__":
    run_example(main, __file__)
