"""examples/memory_slots.py on a tiny model: it probes every few steps, and the mass it reports
is the slots' share of the attention weights (their last m columns), on the real query rows."""
import contextlib

import numpy as np
import pytest

from run_helpers import load_example


@pytest.fixture(scope="module")
def example():
    return load_example("memory_slots")


def test_a_tiny_run_is_probed_every_few_steps_and_draws_its_figure(example, tmp_path, capsys):
    records = example.main(["--steps", "20", "--every", "10", "--n-pairs", "300", "--d-model", "16", "--slots", "2",
                            "--out", str(tmp_path)])
    assert [step for step, *_ in records] == [0, 10, 20]
    assert set(records[0][2]) == {"encoder.0.self_attn", "decoder.0.self_attn", "decoder.0.cross_attn"}
    assert all(0 < mass < 1 for *_, masses in records for mass in masses.values())
    assert (tmp_path / "memory_slots.png").is_file() and capsys.readouterr().out.splitlines()[-1].startswith(
        "attention mass on 2 slots after 20 steps")


def test_the_mass_is_the_share_of_the_last_m_columns_over_real_queries(example, monkeypatch):
    class Module:
        memory_slots = 2

        def __init__(self, weights):
            self.last_weights = weights

    class Model:
        config = type("Config", (), {"pad_id": 0})()

        def __call__(self, src, tgt):
            pass

    on_slots = np.array([[0.0, 0.0, 0.5, 0.5], [0.5, 0.3, 0.1, 0.1], [0.1, 0.1, 0.4, 0.4]])[None, None]
    batch = type("Batch", (), {"src": np.array([[5, 6, 0]]), "tgt_in": np.array([[5, 6, 7]])})()
    modules = {"encoder.0.self_attn": Module(on_slots), "decoder.0.self_attn": Module(on_slots)}
    monkeypatch.setattr(example, "attention_modules", lambda model: modules)
    monkeypatch.setattr(example, "inference_mode", lambda model: contextlib.nullcontext())
    mass = example.slot_mass(Model(), batch)
    assert mass["encoder.0.self_attn"] == pytest.approx((1.0 + 0.2) / 2)      # the padded third query left out
    assert mass["decoder.0.self_attn"] == pytest.approx((1.0 + 0.2 + 0.8) / 3)
