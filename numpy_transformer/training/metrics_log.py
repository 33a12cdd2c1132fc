"""The metrics log of a run (JSON lines) and its loss-curve figure.

`log.jsonl` holds one JSON object per line, appended as training goes:

    {"step": 50, "epoch": 0.18, "loss": 4.21, "lr": 0.00055, "grad_norm": 1.9, "tokens_per_second": 8231.5, "train_seconds": 6.1}
    {"step": 250, "validation_loss": 1.02, "validation_perplexity": 2.77}

a training line every `log_every` steps (`loss`: the mean label-smoothed loss per token since the
previous line) and a validation line every `eval_every` steps (cross-entropy without smoothing).
`loss.png` draws both against the step.
"""
import json
from pathlib import Path

from numpy_transformer.training.atomic_files import append_line, atomic_write, atomic_write_text
from numpy_transformer.bounded_json import parse_json


class MetricsLog:
    """Appends records to a JSON-lines file, one line each, flushed at once, never through a link."""

    def __init__(self, path):
        self.path = Path(path)

    def write(self, record):
        append_line(self.path, json.dumps(record))

    def records(self):
        return read_log(self.path)

    def keep_until(self, step):
        """Drop the records after `step` (written after the checkpoint a run resumes from);
        returns the last step they reached, or None when there were none (a run that ended
        without saving, killed or cut off, logged steps its checkpoint does not hold)."""
        records = self.records()
        kept = [record for record in records if record.get("step", 0) <= step]
        atomic_write_text(self.path, "".join(json.dumps(record) + "\n" for record in kept))
        dropped = [record.get("step", 0) for record in records if record.get("step", 0) > step]
        return max(dropped) if dropped else None


def read_log(path):
    """The records of a JSON-lines log; a line cut short by a crash is skipped."""
    path = Path(path)
    if not path.is_file():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(parse_json(line, path, finite=False))
        except ValueError:              # a line cut short, or not a record of this project
            continue
    return records


def plot_loss_curve(records, path, title="Training"):
    """Draw the training loss (label-smoothed) and the validation loss against the step, and
    write the PNG atomically to `path`."""
    import matplotlib.pyplot as plt

    figure = loss_figure(records, title)
    atomic_write(path, lambda file: figure.savefig(file, format="png", dpi=110))
    plt.close(figure)


TITLE_CHARACTERS = 90      # a line of the title at 10 points fits the 7-inch figure


def loss_figure(records, title="Training"):
    """The figure of `plot_loss_curve` (matplotlib's, to close after use); a long title is
    wrapped into lines that fit the figure's width, so it is drawn whole."""
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    training = [(r["step"], r["loss"]) for r in records if "loss" in r]
    validation = [(r["step"], r["validation_loss"]) for r in records if "validation_loss" in r]
    figure, axes = plt.subplots(figsize=(7, 4))
    if training:
        axes.plot(*zip(*training), label="training loss (label-smoothed)", linewidth=1.2)
    if validation:
        axes.plot(*zip(*validation), "o-", label="validation loss (cross-entropy)", markersize=3)
    axes.set_xlabel("step")
    axes.set_ylabel("loss per token (nats)")
    axes.set_title(textwrap.fill(title, TITLE_CHARACTERS), fontsize=10)
    axes.grid(alpha=0.3)
    if training or validation:
        axes.legend()
    figure.tight_layout()
    return figure
