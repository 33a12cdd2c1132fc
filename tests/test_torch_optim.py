"""SGD, Adam, AdamW and the warm-up schedule against torch.optim: same start, same gradients, float64."""
import contextlib

import numpy as np
import pytest

import autograd
from autograd import Tensor
from autograd.optim import SGD, Adam, AdamW, warmup_schedule

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

SHAPES = [(3, 4), (4,)]
STEPS = 5


def run_both(make_ours, make_theirs, skip=frozenset(), steps=STEPS):
    """Take `steps` steps with both optimizers on the same parameters and gradients; the
    (step, parameter index) pairs in `skip` get no gradient. Returns both final parameter lists."""
    rng = np.random.default_rng(0)
    starts = [rng.standard_normal(shape) for shape in SHAPES]
    ours = [Tensor(s.copy(), requires_grad=True) for s in starts]
    theirs = [torch.tensor(s.copy(), requires_grad=True) for s in starts]
    our_optimizer, their_optimizer, their_scheduler = make_ours(ours), *make_theirs(theirs)
    for t in range(1, steps + 1):
        for i, (p, q) in enumerate(zip(ours, theirs)):
            g = None if (t, i) in skip else rng.standard_normal(p.shape)
            p.grad = g
            q.grad = None if g is None else torch.tensor(g)
        our_optimizer.step()
        their_optimizer.step()
        if their_scheduler is not None:
            their_scheduler.step()
    return [p.data for p in ours], [q.detach().numpy() for q in theirs]


def assert_same(ours, theirs):
    for p, q in zip(ours, theirs):
        np.testing.assert_allclose(p, q, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("momentum, weight_decay", [(0.0, 0.0), (0.9, 0.0), (0.9, 0.05)])
def test_sgd_matches_torch(momentum, weight_decay):
    assert_same(*run_both(
        lambda ps: SGD(ps, lr=0.1, momentum=momentum, weight_decay=weight_decay),
        lambda qs: (torch.optim.SGD(qs, lr=0.1, momentum=momentum, weight_decay=weight_decay), None)))


@pytest.mark.parametrize("betas, eps", [((0.9, 0.999), 1e-8), ((0.9, 0.98), 1e-9)])
@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_adam_matches_torch(betas, eps, weight_decay):
    assert_same(*run_both(
        lambda ps: Adam(ps, lr=0.01, betas=betas, eps=eps, weight_decay=weight_decay),
        lambda qs: (torch.optim.Adam(qs, lr=0.01, betas=betas, eps=eps, weight_decay=weight_decay), None)))


def test_adam_matches_torch_when_a_parameter_has_no_gradient_at_some_steps():
    skip = {(1, 1), (2, 1), (4, 0)}
    assert_same(*run_both(
        lambda ps: Adam(ps, lr=0.01),
        lambda qs: (torch.optim.Adam(qs, lr=0.01), None), skip=skip))


def test_adam_with_warmup_matches_torch_lambda_lr():
    # LambdaLR counts from 0 and multiplies the base lr (1 here); our schedule counts from 1
    schedule = warmup_schedule(d_model=16, warmup_steps=3)

    def make_theirs(qs):
        optimizer = torch.optim.Adam(qs, lr=1.0, betas=(0.9, 0.98), eps=1e-9)
        return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda epoch: schedule(epoch + 1))

    assert_same(*run_both(lambda ps: Adam(ps, lr=schedule, betas=(0.9, 0.98), eps=1e-9), make_theirs,
                          steps=8))


@pytest.mark.parametrize("plain", [False, True])
@pytest.mark.parametrize("weight_decay", [0.01, 0.1])
def test_adamw_matches_torch(weight_decay, plain):
    """AdamW, the engine room's form and the plain form, against torch.optim.AdamW, a parameter
    without a gradient at some steps included."""
    skip = {(2, 1), (4, 0)}
    with autograd.plain() if plain else contextlib.nullcontext():
        assert_same(*run_both(
            lambda ps: AdamW(ps, lr=0.01, betas=(0.9, 0.98), eps=1e-9, weight_decay=weight_decay),
            lambda qs: (torch.optim.AdamW(qs, lr=0.01, betas=(0.9, 0.98), eps=1e-9, weight_decay=weight_decay),
                        None), skip=skip))
