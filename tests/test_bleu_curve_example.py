"""examples/bleu_curve.py on a tiny run: the curve it writes, and (with PyTorch) that the torch
run started from this project's weights follows the NumPy run: the same batches, schedule and
loss, so a difference between the recipes is the recipes'."""
import json

import numpy as np
import pytest

from run_helpers import load_example, needs_two_cores

TINY = ["--steps", "4", "--eval-every", "2", "--model", '{"d_model": 16, "n_heads": 2, "d_ff": 32, "dropout": 0.0}',
        "--training", '{"batch_size": 16}', "--preset", "grammar", "--data", '{"n_pairs": 120, "max_len": 32}']


@pytest.fixture(scope="module")
def example():
    return load_example("bleu_curve")


def test_the_curve_has_a_point_every_few_steps_and_at_the_end(example, tmp_path):
    curve = example.main([*TINY, "--steps", "5", "--out", str(tmp_path)])
    assert [point["step"] for point in curve] == [2, 4, 5]
    assert all(0 <= point["bleu"] <= 100 and point["train_seconds"] >= 0 for point in curve)
    assert all(point["target_tokens_per_second"] > 0 for point in curve)
    written = [json.loads(line) for line in (tmp_path / "curve.jsonl").read_text().splitlines()]
    assert written == curve


def test_with_test_each_point_scores_the_test_split_too_and_the_run_is_the_same(example, tmp_path):
    curve = example.main([*TINY, "--test", "--out", str(tmp_path)])
    assert [point["step"] for point in curve] == [2, 4]
    assert all({"bleu", "chrf", "test_bleu", "test_chrf"} <= point.keys() for point in curve)
    assert any(point["test_chrf"] != point["chrf"] for point in curve)          # another split, other scores
    plain = example.main([*TINY, "--out", str(tmp_path / "plain")])
    assert [{k: v for k, v in point.items() if not k.startswith("test_") and k != "train_seconds"
             and k != "target_tokens_per_second"} for point in curve] == \
        [{k: v for k, v in point.items() if k not in ("train_seconds", "target_tokens_per_second")} for point in plain]


def test_written_curves_are_drawn_against_minutes(example, tmp_path):
    example.main([*TINY, "--out", str(tmp_path / "run")])
    assert example.main(["--plot", f"tiny={tmp_path / 'run' / 'curve.jsonl'}", "--out", str(tmp_path / "plot")]) is None
    assert (tmp_path / "plot" / "bleu_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert example.main(["--plot", f"tiny={tmp_path / 'run' / 'curve.jsonl'}", "--against", "steps",
                         "--out", str(tmp_path / "steps")]) is None
    assert (tmp_path / "steps" / "bleu_curve.png").read_bytes() != (tmp_path / "plot" / "bleu_curve.png").read_bytes()


def test_the_minutes_budget_ends_the_run(example, tmp_path):
    curve = example.main([*TINY, "--steps", "1000", "--max-minutes", "0", "--out", str(tmp_path)])
    assert [point["step"] for point in curve] == [1]


@pytest.mark.torch
def test_the_torch_run_copied_from_ours_trains_as_ours_does(example):
    pytest.importorskip("torch")
    from numpy_transformer.training.settings import model_config, resolve
    from numpy_transformer.training.loop import run_generators
    from numpy_transformer.training.prepare import prepare_data

    fields, training, data_config = resolve("grammar", {"d_model": 16, "n_heads": 2, "d_ff": 32, "dropout": 0.0},
                                            {"batch_size": 16, "steps": 4, "schedule": "constant", "lr": 1e-2},
                                            {"n_pairs": 120, "max_len": 32})
    data = prepare_data(data_config, progress=False)
    config = model_config(fields, [t.vocab_size for t in data.tokenizers], data.src_tokenizer.pad_id, 32)
    runs = [example.NumpyRun(config, training, run_generators(0)[0], data.train),
            example.TorchRun(config, training, run_generators(0)[0], "copy")]
    for run in runs:
        for _, batch in zip(range(4), example.batches(data, training, run_generators(0)[1])):
            run.step(batch)
    ours, theirs = (dict(run.translator().named_parameters()) for run in runs)
    moved = np.abs(ours["decoder.layers.0.self_attn.W_q.weight"].data
                   - example.Transformer(config, run_generators(0)[0]).decoder.layers[0].self_attn.W_q.weight.data).max()
    assert moved > 1e-3
    # Adam moves an entry whose gradient is 0 up to rounding by ±lr either way: W_k's bias (its
    # gradient is 0, softmax ignores a constant added to a row of scores), a rare word's embedding.
    # Those may differ by up to steps · lr; every other parameter agrees entry for entry.
    for name, parameter in ours.items():
        difference = np.abs(theirs[name].data - parameter.data)
        assert difference.max() <= 4 * 1e-2, name
        assert name.endswith("W_k.bias") or np.mean(difference > 1e-4) < 0.01, name


@needs_two_cores
def test_two_threads_split_the_numpy_run_s_batches_between_two_processes_as_train_does(example, tmp_path,
                                                                                      monkeypatch):
    from numpy_transformer.training import parallel

    if not parallel.available():
        pytest.skip("data parallelism runs on Linux")
    opened = []
    original = parallel.DataParallel.__init__

    def recording(self, model, objective, label_smoothing, processes, *transport):
        opened.append(processes)
        original(self, model, objective, label_smoothing, processes, *transport)

    monkeypatch.setattr(parallel.DataParallel, "__init__", recording)
    curve = example.main([*TINY, "--threads", "2", "--out", str(tmp_path)])
    assert opened == [2] and [point["step"] for point in curve] == [2, 4]
