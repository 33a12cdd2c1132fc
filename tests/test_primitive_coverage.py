"""Every primitive the project registers, in autograd/ or numpy_transformer/, has a float64
gradient check: this file checks one case per attention primitive of chapter 2's variants and
fails if a registered primitive appears in none (autograd's own, the fused attention weights of
eq. (6) among them, are covered by tests/test_gradcheck_suite.py)."""
import importlib
import pkgutil

import numpy as np
import pytest

import numpy_transformer
from autograd import Function, Tensor, gradcheck
from autograd.engine import topological_order
from numpy_transformer.attention import (blockwise_attention, linear_attention, sliding_window_attention,
                                         sparse_attention, sliding_window_pattern)
from numpy_transformer.attention.kernel_linear import random_features


def qkv(n=6, d=3, seed=0):
    rng = np.random.default_rng(seed)
    return [Tensor(rng.standard_normal((2, n, d)), requires_grad=True) for _ in range(3)]


OMEGA = random_features(3, 4, np.random.default_rng(1), dtype=np.float64)
CASES = {
    "blockwise": lambda q, k, v: blockwise_attention(q, k, v, 4, causal=True),
    "sparse": lambda q, k, v: sparse_attention(q, k, v, sliding_window_pattern(6, 3)),
    "window": lambda q, k, v: sliding_window_attention(q, k, v, 3, dilation=2, global_tokens=(0,)),
    "linear causal fourier": lambda q, k, v: linear_attention(q, k, v, "fourier", causal=True, omega=OMEGA),
}


@pytest.mark.parametrize("name", CASES)
def test_gradient_check(name):
    assert gradcheck(CASES[name], *qkv())


def test_every_project_primitive_outside_autograd_has_a_gradient_check():
    for module in pkgutil.walk_packages(numpy_transformer.__path__, "numpy_transformer."):
        importlib.import_module(module.name)  # every primitive registers itself on import
    covered = set()
    for fn in CASES.values():
        covered |= {type(node.creator).__name__ for node in topological_order(fn(*qkv()))
                    if node.creator is not None}
    project = {name for name, cls in Function.registry.items() if cls.__module__.startswith("numpy_transformer.")}
    assert project - covered == set(), f"primitives without a gradient check: {sorted(project - covered)}"
