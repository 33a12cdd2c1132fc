"""Head ablation (Voita et al. 2019, the thesis's reference [12]): silence one head at a time
and rank the heads by how much the loss rises without them.

A head is silenced by zeroing its weights where they multiply V: head_h = A_h V_h = 0, so the
head adds nothing to Concat(head_1, …, head_H) W_c (eq. (7)), which is Voita et al.'s
"zero the head's output". Everything else is untouched.
"""
import contextlib
import dataclasses

import numpy as np

from numpy_transformer.analysis.capture import check_full_attention
from numpy_transformer.analysis.hooks import attention_modules, weights_hooks
from numpy_transformer.training.evaluation import mean_cross_entropy


def silence(heads):
    """A hook that zeroes the weights of `heads` (head indices) and keeps the others."""
    def zero_heads(weights):
        keep = np.ones(weights.shape[1], dtype=weights.dtype)
        keep[list(heads)] = 0
        return weights * keep[:, None, None]
    return zero_heads


@contextlib.contextmanager
def ablated_heads(model, heads):
    """Inside the block, the heads in `heads` ((name, head index) pairs) are silenced."""
    check_full_attention(model)
    by_name = {}
    for name, head in heads:
        by_name.setdefault(name, set()).add(head)
    with weights_hooks(model, lambda name: silence(by_name[name]) if name in by_name else None):
        yield


@dataclasses.dataclass(frozen=True)
class AblationResult:
    """The loss without one head, and its increase over the full model's loss."""
    name: str
    head: int
    loss: float
    increase: float


def head_ablation(model, encoded, batch_size=64):
    """(the full model's loss, an `AblationResult` per head sorted by decreasing increase):
    the mean cross-entropy of `encoded` (an `EncodedPairs`) with each head silenced in turn."""
    base = mean_cross_entropy(model, encoded, batch_size)
    results = []
    for name, module in attention_modules(model).items():
        for head in range(module.n_heads):
            with ablated_heads(model, [(name, head)]):
                loss = mean_cross_entropy(model, encoded, batch_size)
            results.append(AblationResult(name, head, loss, loss - base))
    return base, sorted(results, key=lambda r: -r.increase)


def ablation_markdown(base, results):
    """The ranking as a Markdown table."""
    lines = [f"Loss of the full model: {base:.4f}", "",
             "| rank | attention | head | loss without it | increase |", "|---:|---|---:|---:|---:|"]
    lines += [f"| {rank} | {r.name} | {r.head} | {r.loss:.4f} | {r.increase:+.4f} |"
              for rank, r in enumerate(results, start=1)]
    return "\n".join(lines)
