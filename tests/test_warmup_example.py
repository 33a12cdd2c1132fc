"""examples/warmup_attention.py on a tiny model: both runs share their start, differ in the
learning rate only, and the entropies it reports are those of the attention weights."""
import contextlib

import numpy as np
import pytest

from run_helpers import load_example


@pytest.fixture(scope="module")
def example():
    return load_example("warmup_attention")


def test_the_two_runs_start_alike_and_are_probed_every_few_steps(example, tmp_path, capsys):
    records = example.main(["--steps", "20", "--every", "10", "--n-pairs", "300", "--d-model", "16",
                            "--out", str(tmp_path)])
    assert [step for step, *_ in records["warmup"]] == [step for step, *_ in records["constant"]] == [0, 10, 20]
    assert records["warmup"][0][2] == records["constant"][0][2]                  # the same model at step 0
    assert records["warmup"][1][1] > records["constant"][1][1]                   # warm-up starts slower
    assert (tmp_path / "warmup_attention.png").is_file() and "| 20 |" in capsys.readouterr().out


def test_the_entropy_is_zero_for_one_hot_rows_and_log_n_for_uniform_ones(example, monkeypatch):
    class Module:
        def __init__(self, weights):
            self.last_weights = weights

    class Model:
        config = type("Config", (), {"pad_id": 0})()

        def __call__(self, src, tgt):
            pass

    n = 4
    one_hot, uniform = np.eye(n)[None, None], np.full((1, 1, n, n), 1 / n)
    batch = type("Batch", (), {"src": np.ones((1, n), int), "tgt_in": np.ones((1, n), int)})()
    modules = {"encoder.0.self_attn": Module(one_hot), "decoder.0.self_attn": Module(uniform),
               "decoder.0.cross_attn": Module(uniform)}
    monkeypatch.setattr(example, "attention_modules", lambda model: modules)
    monkeypatch.setattr(example, "inference_mode", lambda model: contextlib.nullcontext())
    entropy = example.attention_entropy(Model(), batch)
    assert entropy["encoder.self_attn"] == 0 and entropy["decoder.self_attn"] == pytest.approx(np.log(n))
