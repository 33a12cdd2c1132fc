"""Work bounded by what is free: a decoding (beam size × length × model size) is checked against
the memory available now, not the machine's total, and refused in one line saying what it needs,
what is free and what to lower; a decoding shows its steps on a bar and stops at Ctrl-C with
exit status 130 and one line."""
import numpy as np
import pytest

from numpy_transformer import memory_budget
from numpy_transformer.decoding import IncrementalDecoder, beam_search, greedy_decode
from numpy_transformer.memory_budget import available_memory, check_fits, machine_memory
from numpy_transformer.training.checkpoint import load_checkpoint
from run_helpers import run_main

MiB, GiB = 2 ** 20, 2 ** 30


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("decoding") / "run"
    status, _, err = run_main(["train", "--out", folder, "--dataset", "builtin", "--tokenizer", "word",
                               "--no-shared-vocabulary", "--n-pairs", "120", "--max-len", "32", "--d-model", "16",
                               "--n-heads", "2", "--d-ff", "32", "--batch-size", "16", "--steps", "3", "--beam", "1",
                               "--samples", "0", "--quiet"])
    assert status == 0, err
    return folder


def test_the_memory_available_now_is_known_and_at_most_the_machines():
    free, total = available_memory(), machine_memory()
    if free is None or total is None:
        pytest.skip("this system says neither what is free nor its total")
    assert 0 < free <= total


def test_check_fits_compares_with_what_is_free_not_the_total(monkeypatch):
    monkeypatch.setattr(memory_budget, "machine_memory", lambda: 64 * GiB)
    monkeypatch.setattr(memory_budget, "memory_limit", lambda: None)           # no container's limit
    monkeypatch.setattr(memory_budget, "available_memory", lambda: 512 * MiB)
    check_fits(500 * MiB, "the work", "do less")
    with pytest.raises(ValueError, match=r"^the work would need 1\.0 GiB, more than this machine's 0\.5 GiB free now "
                                         r"\(of 64\.0 GiB\): do less$"):
        check_fits(GiB, "the work", "do less")
    monkeypatch.setattr(memory_budget, "available_memory", lambda: None)       # unknown: the total
    check_fits(GiB, "the work", "do less")
    with pytest.raises(ValueError, match=r"more than this machine's 64\.0 GiB: do less"):
        check_fits(65 * GiB, "the work", "do less")


def test_a_beam_that_does_not_fit_in_the_free_memory_is_refused_in_one_line(run, monkeypatch):
    monkeypatch.setattr(memory_budget, "machine_memory", lambda: 64 * GiB)
    monkeypatch.setattr(memory_budget, "memory_limit", lambda: None)
    monkeypatch.setattr(memory_budget, "available_memory", lambda: 64 * MiB)   # a busy machine
    status, out, err = run_main(["translate", "--checkpoint", run, "--beam", "10000", "the cat sleeps ."])
    line = err.strip().splitlines()[-1]
    assert status == 1 and out == "" and "Traceback" not in err
    assert line.startswith("numpy-transformer translate: error: decoding 1 sentences with 10000 beams each would "
                           "need ")
    assert "GiB free now (of 64.0 GiB): choose a smaller --beam" in line
    status, out, err = run_main(["translate", "--checkpoint", run, "--beam", "4", "the cat sleeps ."])
    assert status == 0 and len(out.splitlines()) == 1, err


@pytest.mark.parametrize("beam", [1, 3])
def test_a_decoding_shows_its_steps(run, beam):
    checkpoint = load_checkpoint(run)
    model, tgt = checkpoint.model, checkpoint.tgt_tokenizer
    src_ids = np.array([[tgt.sos_id, 5, 6, tgt.eos_id]])
    bars = []

    def progress(iterable, **options):
        bars.append({**options, "steps": 0})
        for item in iterable:
            bars[-1]["steps"] += 1
            yield item

    if beam == 1:
        decoded = greedy_decode(model, src_ids, tgt.sos_id, tgt.eos_id, max_len=7, progress=progress)
        assert decoded == greedy_decode(model, src_ids, tgt.sos_id, tgt.eos_id, max_len=7)
    else:
        decoded = beam_search(model, src_ids, tgt.sos_id, tgt.eos_id, beam_size=beam, max_len=7, progress=progress)
        assert decoded == beam_search(model, src_ids, tgt.sos_id, tgt.eos_id, beam_size=beam, max_len=7)
    assert len(bars) == 1 and bars[0]["unit"] == "token"
    assert bars[0]["desc"] == ("greedy" if beam == 1 else f"beam {beam}") + ": tokens"
    assert 1 <= bars[0]["steps"] <= 7


def test_ctrl_c_during_a_long_decoding_is_one_line_and_exit_130(run, monkeypatch):
    calls = []
    real = IncrementalDecoder.log_probs

    def interrupted_on_the_third_step(self, tokens):
        calls.append(len(tokens))
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(self, tokens)

    monkeypatch.setattr(IncrementalDecoder, "log_probs", interrupted_on_the_third_step)
    status, out, err = run_main(["translate", "--checkpoint", run, "--beam", "50", "the cat sleeps ."])
    assert status == 130 and out == "" and len(calls) == 3
    assert err.strip().splitlines()[-1] == "numpy-transformer translate: interrupted"
    assert "Traceback" not in err
