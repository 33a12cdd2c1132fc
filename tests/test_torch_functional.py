"""Values and gradients of the functional ops against PyTorch, in float64, to 1e-7."""
import numpy as np
import pytest

import autograd.functional as F
from autograd import Tensor

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch
TF = torch.nn.functional
TOLERANCE = dict(rtol=1e-7, atol=1e-7)


def inputs(shape, seed=0, scale=2.0):
    data = scale * np.random.default_rng(seed).standard_normal(shape)
    return Tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)


def assert_same_value_and_vjp(ours, theirs, shape, seed=0):
    """Compare ours(x) with theirs(x_torch) and their VJPs for one random upstream gradient."""
    x, x_torch = inputs(shape, seed)
    g = np.random.default_rng(seed + 1).standard_normal(shape)
    out, out_torch = ours(x), theirs(x_torch)
    out.backward(g)
    out_torch.backward(torch.tensor(g))
    np.testing.assert_allclose(out.data, out_torch.detach().numpy(), **TOLERANCE)
    np.testing.assert_allclose(x.grad, x_torch.grad.numpy(), **TOLERANCE)


@pytest.mark.parametrize("shape, axis", [((7,), -1), ((3, 5), 0), ((2, 3, 4), 1), ((2, 3, 4), -1)])
def test_softmax(shape, axis):
    assert_same_value_and_vjp(lambda x: F.softmax(x, axis=axis), lambda x: TF.softmax(x, dim=axis), shape)
    assert_same_value_and_vjp(lambda x: F.softmax_composite(x, axis=axis), lambda x: TF.softmax(x, dim=axis), shape)


@pytest.mark.parametrize("shape, axis", [((7,), -1), ((3, 5), 0), ((2, 3, 4), 1), ((2, 3, 4), -1)])
def test_log_softmax(shape, axis):
    assert_same_value_and_vjp(lambda x: F.log_softmax(x, axis=axis), lambda x: TF.log_softmax(x, dim=axis), shape)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(approximate):
    assert_same_value_and_vjp(lambda x: F.gelu(x, approximate=approximate),
                              lambda x: TF.gelu(x, approximate=approximate), (4, 25))


def test_sigmoid():
    assert_same_value_and_vjp(F.sigmoid, torch.sigmoid, (4, 25), seed=3)


def test_relu():
    assert_same_value_and_vjp(F.relu, TF.relu, (4, 25), seed=5)


def cross_entropy_case(shape, ignore_index, seed):
    rng = np.random.default_rng(seed)
    targets = rng.integers(0, shape[-1], size=shape[:-1])
    targets[rng.random(shape[:-1]) < 0.3] = ignore_index
    targets.reshape(-1)[0] = 0
    return inputs(shape, seed) + (targets,)


@pytest.mark.parametrize("shape", [(8, 5), (3, 6, 7)])
@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.7])
def test_cross_entropy_with_label_smoothing_and_ignore_index(shape, smoothing):
    logits, logits_torch, targets = cross_entropy_case(shape, -100, seed=7)
    loss = F.cross_entropy(logits, targets, ignore_index=-100, label_smoothing=smoothing)
    # torch wants the classes on axis 1: (B, T, C) logits become (B, C, T)
    loss_torch = TF.cross_entropy(torch.movedim(logits_torch, -1, 1), torch.tensor(targets),
                                  ignore_index=-100, label_smoothing=smoothing)
    loss.backward()
    loss_torch.backward()
    np.testing.assert_allclose(loss.item(), loss_torch.item(), **TOLERANCE)
    np.testing.assert_allclose(logits.grad, logits_torch.grad.numpy(), **TOLERANCE)


def test_cross_entropy_without_ignore_index():
    logits, logits_torch, _ = cross_entropy_case((6, 4), -100, seed=9)
    targets = np.array([0, 1, 2, 3, 0, 2])
    loss = F.cross_entropy(logits, targets)
    loss_torch = TF.cross_entropy(logits_torch, torch.tensor(targets))
    loss.backward()
    loss_torch.backward()
    np.testing.assert_allclose(loss.item(), loss_torch.item(), **TOLERANCE)
    np.testing.assert_allclose(logits.grad, logits_torch.grad.numpy(), **TOLERANCE)
