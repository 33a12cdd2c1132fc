"""Every primitive op is gradient-checked (float64), and every registered primitive is covered."""
import numpy as np
import pytest

from autograd import Function, gradcheck
from autograd.engine import topological_order
from autograd.gradcheck_suite import CASES, max_gradient_error


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_gradient_check(case):
    assert gradcheck(case.fn, *case.inputs(np.random.default_rng(0)))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_float32_in_float32_out_and_float32_gradients(case):
    inputs = case.inputs(np.random.default_rng(0), dtype=np.float32)
    out = case.fn(*inputs)
    assert out.dtype == np.float32
    out.backward(np.ones(out.shape, np.float32))
    assert all(x.grad is None or x.grad.dtype == np.float32 for x in inputs)


def primitives_in_graph(tensor):
    return {type(node.creator).__name__ for node in topological_order(tensor) if node.creator is not None}


def test_every_registered_primitive_has_a_gradient_check():
    covered = set()
    for case in CASES:
        covered |= primitives_in_graph(case.fn(*case.inputs(np.random.default_rng(0))))
    library = {name for name, cls in Function.registry.items() if cls.__module__.startswith("autograd.")}
    assert library - covered == set(), f"primitives without a gradient check: {sorted(library - covered)}"


def test_the_suite_reports_errors_at_the_finite_difference_level():
    assert max(max_gradient_error(case, np.random.default_rng(1)) for case in CASES[:5]) < 1e-6
