"""numpy_transformer/training/update_block.py: the optimizer's block size, measured once per machine and kept."""
import json

import pytest

from autograd.engine_room import blocks, fused_adam
from numpy_transformer.training import update_block
from numpy_transformer.training.update_block import BLOCK, CANDIDATES, choose_update_block, fastest, measure


@pytest.fixture(autouse=True)
def a_new_process(monkeypatch):
    """Each test starts as a new process would, on a quiet machine."""
    monkeypatch.setattr(update_block, "_chosen", {})
    monkeypatch.setattr(update_block, "machine_busy", lambda: 0.0)


def timings(**seconds):
    """A stand-in for `measure`: {size: seconds}, and how often it was called."""
    calls = []

    def measured():
        calls.append(1)
        return {BLOCK: seconds["default"], 2 * BLOCK: seconds["double"], 4 * BLOCK: seconds["quadruple"]}
    return measured, calls


def test_the_fastest_size_is_taken_only_if_it_beats_the_default_by_more_than_the_margin():
    assert fastest({BLOCK: 1.0, 2 * BLOCK: 0.9, 4 * BLOCK: 0.95}) == 2 * BLOCK
    assert fastest({BLOCK: 1.0, 2 * BLOCK: 0.99, 4 * BLOCK: 1.2}) == BLOCK        # 1 %: noise, not a reason
    assert fastest({BLOCK: 1.0, 2 * BLOCK: 1.1, 4 * BLOCK: 1.3}) == BLOCK


def test_a_measured_size_is_kept_for_the_machine_and_read_back_instead_of_measuring(tmp_path, monkeypatch):
    cache = tmp_path / "update-blocks.json"
    measured, calls = timings(default=1.0, double=0.9, quadruple=0.8)
    assert choose_update_block(10 * BLOCK, cache=cache, measure_sizes=measured) == 4 * BLOCK
    assert choose_update_block(10 * BLOCK, cache=cache, measure_sizes=measured) == 4 * BLOCK
    assert len(calls) == 1                                                    # kept for the process
    monkeypatch.setattr(update_block, "_chosen", {})                          # a new process
    assert choose_update_block(10 * BLOCK, cache=cache, measure_sizes=measured) == 4 * BLOCK
    assert len(calls) == 1 and list(json.loads(cache.read_text()).values()) == [4 * BLOCK]


def test_parameters_of_one_block_or_less_measure_nothing(tmp_path):
    measured, calls = timings(default=1.0, double=0.5, quadruple=0.5)
    assert choose_update_block(BLOCK, cache=tmp_path / "c.json", measure_sizes=measured) == BLOCK
    assert not calls and not (tmp_path / "c.json").exists()


def test_a_busy_machine_takes_the_default_and_keeps_nothing_but_reads_what_a_quiet_one_kept(tmp_path, monkeypatch):
    cache = tmp_path / "update-blocks.json"
    measured, calls = timings(default=1.0, double=0.5, quadruple=0.7)
    monkeypatch.setattr(update_block, "machine_busy", lambda: 1.7)
    assert choose_update_block(10 * BLOCK, cache=cache, measure_sizes=measured) == BLOCK
    assert not calls and not cache.exists()
    monkeypatch.setattr(update_block, "machine_busy", lambda: 0.0)
    assert choose_update_block(10 * BLOCK, cache=cache, measure_sizes=measured) == 2 * BLOCK
    monkeypatch.setattr(update_block, "_chosen", {})
    monkeypatch.setattr(update_block, "machine_busy", lambda: 1.7)
    assert choose_update_block(10 * BLOCK, cache=cache, measure_sizes=measured) == 2 * BLOCK   # measured when quiet


@pytest.mark.parametrize("content", ["not json", "[1, 2]", '{"KEY": 1000}', '{"KEY": "262144"}', '{"KEY": true}'])
def test_a_cache_that_is_broken_or_names_another_size_is_measured_again_and_rewritten(tmp_path, monkeypatch, content):
    cache = tmp_path / "update-blocks.json"
    monkeypatch.setattr(update_block, "machine_key", lambda: "KEY")
    cache.write_text(content)
    measured, calls = timings(default=1.0, double=0.8, quadruple=0.9)
    assert choose_update_block(10 * BLOCK, cache=cache, measure_sizes=measured) == 2 * BLOCK
    assert len(calls) == 1 and json.loads(cache.read_text()) == {"KEY": 2 * BLOCK}


def test_a_cache_that_cannot_be_written_is_a_warning(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    measured, _ = timings(default=1.0, double=0.8, quadruple=0.9)
    assert choose_update_block(10 * BLOCK, cache=blocker / "update-blocks.json", measure_sizes=measured) == 2 * BLOCK
    assert "could not keep the measured update block" in capsys.readouterr().err


def test_the_measurement_times_every_candidate_and_puts_the_block_size_back(monkeypatch):
    assert BLOCK == blocks.BLOCK                                  # the engine room's default
    sizes_run, real_blocks = [], fused_adam.blocks
    monkeypatch.setattr(fused_adam, "blocks", lambda *arrays, block: sizes_run.append(block) or real_blocks(*arrays,
                                                                                                          block=block))
    seconds = measure(sample=3 * BLOCK + 5, rounds=2)
    assert set(seconds) == set(CANDIDATES) and all(0 < value < 5 for value in seconds.values())
    assert sizes_run == 3 * list(CANDIDATES) and blocks.update_block() == BLOCK     # an untimed round and two


def test_train_and_the_benchmark_run_the_optimizer_in_the_chosen_blocks(monkeypatch):
    """make_optimizer (what train builds) sets the size chosen for the model's largest parameter."""
    import numpy as np

    from autograd.engine_room import set_update_block, update_block as current
    from numpy_transformer.model import Transformer, TransformerConfig
    from numpy_transformer.training import loop
    from numpy_transformer.training.settings import TrainingConfig

    asked = []
    monkeypatch.setattr(loop, "choose_update_block", lambda largest: asked.append(largest) or 2 * BLOCK)
    model = Transformer(TransformerConfig(300, 300, d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1,
                                          n_decoder_layers=1), np.random.default_rng(0))
    previous = current()
    try:
        loop.make_optimizer(model, TrainingConfig())
        assert current() == 2 * BLOCK and asked == [max(p.data.size for p in model.parameters())]
    finally:
        set_update_block(previous)


def test_the_key_is_the_same_in_a_process_that_loaded_another_blas():
    """The passes are NumPy's loops: loading SciPy (and its own OpenBLAS) must not make a process
    measure again, as it did while the key named the BLAS libraries loaded."""
    import subprocess
    import sys

    code = "from numpy_transformer.training.update_block import machine_key; {}print(machine_key())"
    keys = {subprocess.run([sys.executable, "-c", code.format(load)], capture_output=True, text=True,
                           check=True).stdout.strip() for load in ("", "import scipy.linalg; ")}
    assert len(keys) == 1
