"""The opt-in profiler: calls and time per op, forward and backward, a readable table, and
nothing at all while no profile runs."""
import numpy as np
import pytest

import autograd
from autograd import Tensor
from autograd.engine_room import reverse_mode
from autograd.profiler import Profile


def leaf(*shape):
    return Tensor(np.random.default_rng(0).standard_normal(shape), requires_grad=True)


def test_every_forward_and_backward_call_is_counted_per_op():
    x = leaf(3, 4)
    with autograd.profile() as prof:
        y = (x * 2.0 + 1.0) * x
        y.sum().backward()
    assert prof.calls["Mul", "forward"] == 2 and prof.calls["Mul", "backward"] == 2
    assert prof.calls["Add", "forward"] == 1 and prof.calls["Add", "backward"] == 1
    assert prof.calls["Sum", "forward"] == 1 and prof.calls["Sum", "backward"] == 1
    assert all(prof.seconds[key] >= 0 for key in prof.calls)


def test_the_time_inside_ops_is_part_of_the_wall_time():
    x = leaf(200, 200)
    with autograd.profile() as prof:
        (x @ x).sum().backward()
    assert 0 < prof.op_seconds <= prof.wall_seconds


def test_the_table_lists_each_op_slowest_first_with_the_time_outside_ops():
    x = leaf(300, 300)
    with autograd.profile() as prof:
        (x @ x + 1.0).sum().backward()
    lines = prof.table().splitlines()
    assert lines[0].split()[:3] == ["op", "fwd", "calls"]
    assert lines[1].split()[:2] == ["MatMul", "1"]                      # the product dwarfs the rest
    assert lines[-2].startswith("outside ops")
    assert lines[-1].startswith("6 op calls in ")
    assert len(prof.table(top=1).splitlines()) == 4


def test_the_table_per_run_divides_calls_and_times_by_the_runs():
    x = leaf(3)
    with autograd.profile() as prof:
        for _ in range(4):
            (x * 2.0).sum().backward()
    mul = next(line for line in prof.table(per=4).splitlines() if line.startswith("Mul"))
    assert mul.split()[1:4:2] == ["1", "1"]                                   # one forward, one backward per run
    assert prof.table(per=4).splitlines()[-1].startswith("4 op calls in ") and "the mean of 4" in prof.table(per=4)


def test_ops_outside_the_block_are_not_counted_and_profiling_stops_after_an_error():
    x = leaf(2)
    with pytest.raises(ZeroDivisionError):
        with autograd.profile() as prof:
            x * 3.0
            1 / 0
    x + 1.0
    assert reverse_mode._profiler is None
    assert dict(prof.calls) == {("Mul", "forward"): 1}


def test_profiles_do_not_nest():
    with autograd.profile():
        with pytest.raises(RuntimeError, match="already running"):
            with autograd.profile():
                pass


def test_without_a_profile_the_engine_never_calls_the_profiler(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the profiler ran while no profile() block was open")

    monkeypatch.setattr(Profile, "timed", refuse)
    x = leaf(3)
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad, 2 * x.data)
