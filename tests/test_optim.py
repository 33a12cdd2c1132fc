"""Optimizers, the warm-up schedule and gradient clipping (autograd/optim.py), and the engine
room's form of Adam's and AdamW's update (autograd/engine_room/fused_adam.py) against the plain one."""
import contextlib
import math

import numpy as np
import pytest

import autograd
from autograd import Tensor
from autograd.engine_room.blocks import BLOCK, set_update_block, update_block
from autograd.engine_room.fused_clip import grad_norm_in_blocks
from autograd.engine_room.fused_adam import SharedUpdates, balanced_shares, share_updates
from autograd.optim import SGD, Adam, AdamW, clip_grad_norm, warmup_schedule


def parameter(*shape, dtype=np.float64, seed=0):
    return Tensor(np.random.default_rng(seed).standard_normal(shape).astype(dtype), requires_grad=True)


def gradients(n, shape, seed=1):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape) for _ in range(n)]


def adam_reference(p, grads, lr, beta1, beta2, eps, weight_decay=0.0, decoupled=False):
    """Adam (AdamW if `decoupled`) written out from the equations, one step per gradient;
    returns every iterate."""
    m, v, iterates = np.zeros_like(p), np.zeros_like(p), []
    for t, g in enumerate(grads, start=1):
        if decoupled:
            p = p - lr * weight_decay * p
        else:
            g = g + weight_decay * p
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g ** 2
        m_hat, v_hat = m / (1 - beta1 ** t), v / (1 - beta2 ** t)
        p = p - lr * m_hat / (np.sqrt(v_hat) + eps)
        iterates.append(p)
    return iterates


# Adam

def test_adam_first_step_moves_each_entry_by_lr_g_over_abs_g_plus_eps():
    w = parameter(5)
    start = w.data.copy()
    g = np.array([3.0, -0.5, 1e-3, -20.0, 0.25])
    w.grad = g.copy()
    Adam([w], lr=0.01, eps=1e-8).step()
    # m̂ = g and √v̂ = |g| after one step, whatever the betas
    np.testing.assert_allclose(w.data - start, -0.01 * g / (np.abs(g) + 1e-8), rtol=1e-12)
    np.testing.assert_allclose(w.data - start, -0.01 * np.sign(g), rtol=1e-5)


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_adam_first_three_steps_match_the_equations(weight_decay):
    w = parameter(2, 3)
    grads = gradients(3, (2, 3))
    expected = adam_reference(w.data.copy(), grads, lr=0.05, beta1=0.8, beta2=0.95, eps=1e-6,
                              weight_decay=weight_decay)
    optimizer = Adam([w], lr=0.05, betas=(0.8, 0.95), eps=1e-6, weight_decay=weight_decay)
    for g, p_t in zip(grads, expected):
        w.grad = g.copy()
        optimizer.step()
        np.testing.assert_allclose(w.data, p_t, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_adam_updates_a_parameter_larger_than_a_block_as_the_equations_say(layout):
    """The update runs BLOCK entries at a time (autograd.engine_room.blocks): a parameter of 2.3
    blocks, ending in a partial block, or a transposed view that is updated whole, follows the
    equations entry by entry, in place."""
    shape = (3 * BLOCK // 500 + 7, 500)
    w = parameter(*shape)
    if layout == "transposed":
        w = Tensor(w.data.T, requires_grad=True)
    grads = gradients(3, w.shape)
    expected = adam_reference(w.data.copy(), grads, lr=0.05, beta1=0.8, beta2=0.95, eps=1e-6, weight_decay=0.1)
    data, optimizer = w.data, Adam([w], lr=0.05, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1)
    for g, p_t in zip(grads, expected):
        w.grad = g.copy()
        optimizer.step()
        np.testing.assert_allclose(w.data, p_t, rtol=1e-12, atol=1e-14)
    assert w.data is data


def test_adam_with_a_constant_gradient_takes_the_same_step_every_time():
    # With g constant, m_t = (1 − β1ᵗ) g and v_t = (1 − β2ᵗ) g²: the bias correction by the true
    # step count t gives m̂ = g, v̂ = g² at every step. A counter that restarts per call, or one
    # that starts at 0, breaks this from the second (or the first) step on.
    w = parameter(4)
    g = np.array([0.5, -2.0, 1.0, 3.0])
    optimizer = Adam([w], lr=0.1, betas=(0.9, 0.98), eps=1e-9)
    for t in range(1, 21):
        before = w.data.copy()
        w.grad = g.copy()
        optimizer.step()
        np.testing.assert_allclose(w.data - before, -0.1 * g / (np.abs(g) + 1e-9), rtol=1e-9,
                                   err_msg=f"step {t}")
    assert optimizer.step_count == 20


def test_adam_parameter_without_grad_is_skipped_and_its_first_update_is_bias_corrected():
    a, b = parameter(3, seed=0), parameter(3, seed=1)
    b_start = b.data.copy()
    optimizer = Adam([a, b], lr=0.01)
    for _ in range(4):
        a.grad, b.grad = np.ones(3), None
        optimizer.step()
    np.testing.assert_array_equal(b.data, b_start)
    assert optimizer.state["1"]["step"] == 0
    np.testing.assert_array_equal(optimizer.state["1"]["exp_avg"], 0.0)

    g = np.array([2.0, -1.0, 0.5])
    a.grad, b.grad = np.ones(3), g.copy()
    optimizer.step()
    # b's moments have seen one gradient: corrected by 1 − β¹, not by 1 − β⁵
    np.testing.assert_allclose(b.data - b_start, -0.01 * g / (np.abs(g) + 1e-8), rtol=1e-12)
    assert (optimizer.step_count, optimizer.state["0"]["step"], optimizer.state["1"]["step"]) == (5, 5, 1)


# SGD

def test_sgd_without_momentum_is_p_minus_lr_g():
    w = parameter(3)
    start, g = w.data.copy(), np.array([1.0, -2.0, 0.5])
    w.grad = g.copy()
    SGD([w], lr=0.1).step()
    np.testing.assert_allclose(w.data, start - 0.1 * g, rtol=1e-15)


def test_sgd_momentum_accumulates_velocity_as_mu_v_plus_g():
    # constant g: v_k = g (1 − μᵏ)/(1 − μ), so p_k = p_0 − lr g Σ_{j≤k} (1 − μʲ)/(1 − μ)
    w = parameter(2)
    start, g, mu = w.data.copy(), np.array([1.0, -3.0]), 0.9
    optimizer = SGD([w], lr=0.1, momentum=mu)
    for k in range(1, 6):
        w.grad = g.copy()
        optimizer.step()
        travelled = sum((1 - mu ** j) / (1 - mu) for j in range(1, k + 1))
        np.testing.assert_allclose(w.data, start - 0.1 * g * travelled, rtol=1e-13)


def test_sgd_weight_decay_shrinks_the_parameter_when_the_gradient_is_zero():
    w = parameter(3)
    start = w.data.copy()
    w.grad = np.zeros(3)
    SGD([w], lr=0.1, weight_decay=0.5).step()
    np.testing.assert_allclose(w.data, start * (1 - 0.1 * 0.5), rtol=1e-15)


def test_step_does_not_modify_the_gradient():
    w = parameter(3)
    g = np.array([1.0, 2.0, 3.0])
    for optimizer in (SGD([w], lr=0.1, momentum=0.9, weight_decay=0.1), Adam([w], weight_decay=0.1)):
        w.grad = g.copy()
        optimizer.step()
        optimizer.step()
        np.testing.assert_array_equal(w.grad, g)


# dtype, zero_grad, skipped parameters

@pytest.mark.parametrize("make", [
    lambda ps: SGD(ps, lr=np.float64(0.1), momentum=np.float64(0.9), weight_decay=np.float64(0.01)),
    lambda ps: Adam(ps, lr=np.float64(1e-3), betas=(np.float64(0.9), np.float64(0.98)),
                    eps=np.float64(1e-9), weight_decay=np.float64(0.01)),
    lambda ps: Adam(ps, lr=lambda t: np.float64(1e-3) / t),
    lambda ps: AdamW(ps, lr=np.float64(1e-3), weight_decay=np.float64(0.01)),
], ids=["sgd", "adam", "adam-schedule", "adamw"])
def test_float32_parameters_and_state_stay_float32(make):
    w = parameter(4, 3, dtype=np.float32)
    optimizer = make([w])
    for g in gradients(3, (4, 3)):
        w.grad = g.astype(np.float32)
        optimizer.step()
    assert w.data.dtype == np.float32
    arrays = [value for value in optimizer.state_dict().values() if isinstance(value, np.ndarray)]
    assert all(a.dtype == np.float32 for a in arrays)


def test_updates_are_in_place_on_the_parameter_array():
    w = parameter(3)
    data = w.data
    optimizer = Adam([w])
    w.grad = np.ones(3)
    optimizer.step()
    assert w.data is data


def test_zero_grad_sets_every_grad_to_none():
    a, b = parameter(2), parameter(3)
    a.grad, b.grad = np.ones(2), np.ones(3)
    SGD([a, b], lr=0.1).zero_grad()
    assert a.grad is None and b.grad is None


def test_sgd_skips_parameters_without_grad_and_keeps_their_velocity():
    a, b = parameter(2, seed=0), parameter(2, seed=1)
    b_start = b.data.copy()
    optimizer = SGD([a, b], lr=0.1, momentum=0.9)
    b.grad = np.ones(2)
    a.grad = np.ones(2)
    optimizer.step()
    b.grad = None
    optimizer.step()
    np.testing.assert_allclose(b.data, b_start - 0.1, rtol=1e-15)  # only the first step moved b
    np.testing.assert_array_equal(optimizer.state["1"]["velocity"], np.ones(2))


# learning rate and schedule

def test_callable_lr_is_evaluated_at_the_one_based_step_count():
    w = parameter(2)
    optimizer = SGD([w], lr=lambda t: 0.1 * t)
    assert optimizer.current_lr == pytest.approx(0.1)  # the lr the first step will use
    for t in range(1, 4):
        before = w.data.copy()
        w.grad = np.ones(2)
        optimizer.step()
        np.testing.assert_allclose(before - w.data, 0.1 * t, rtol=1e-12)
        assert optimizer.current_lr == pytest.approx(0.1 * t)


def test_constant_lr_is_reported_by_current_lr():
    assert SGD([parameter(1)], lr=0.25).current_lr == 0.25


def test_warmup_schedule_rises_linearly_then_decays_as_inverse_sqrt():
    d_model, warmup = 64, 40
    lr = warmup_schedule(d_model, warmup)
    steps = np.arange(1, 5 * warmup + 1)
    values = np.array([lr(int(t)) for t in steps])
    rising, falling = steps <= warmup, steps >= warmup
    np.testing.assert_allclose(values[rising], steps[rising] * values[0], rtol=1e-12)
    np.testing.assert_allclose(values[falling] * np.sqrt(steps[falling]),
                               values[warmup - 1] * math.sqrt(warmup), rtol=1e-12)
    assert steps[np.argmax(values)] == warmup
    assert lr(warmup) == pytest.approx(d_model ** -0.5 * warmup ** -0.5, rel=1e-12)


def test_warmup_schedule_factor_scales_and_step_zero_is_refused():
    plain, scaled = warmup_schedule(512, 4000), warmup_schedule(512, 4000, factor=2.0)
    assert scaled(123) == pytest.approx(2 * plain(123), rel=1e-15)
    assert plain(4000) == pytest.approx(512 ** -0.5 * 4000 ** -0.5, rel=1e-12)
    with pytest.raises(ValueError, match="step"):
        plain(0)


def test_optimizer_with_warmup_schedule_reports_the_schedule_value():
    schedule = warmup_schedule(16, 3)
    optimizer = Adam([parameter(2)], lr=schedule)
    for t in range(1, 8):
        optimizer.named_params[0][1].grad = np.ones(2)
        optimizer.step()
        assert optimizer.current_lr == schedule(t)


# gradient clipping

def test_clip_grad_norm_scales_a_large_gradient_to_max_norm_and_returns_the_old_norm():
    a, b, c = parameter(3), parameter(2, 2), parameter(1)
    a.grad, b.grad, c.grad = np.array([3.0, 0.0, 4.0]), np.full((2, 2), 6.0), None  # norm 13
    direction = np.concatenate([a.grad, b.grad.ravel()]) / 13.0
    returned = clip_grad_norm([a, b, c], max_norm=2.0)
    assert isinstance(returned, float) and returned == pytest.approx(13.0, rel=1e-15)
    clipped = np.concatenate([a.grad, b.grad.ravel()])
    assert np.linalg.norm(clipped) == pytest.approx(2.0, rel=1e-14)
    np.testing.assert_allclose(clipped / 2.0, direction, rtol=1e-14)  # same direction
    assert c.grad is None


def test_clip_grad_norm_leaves_a_small_gradient_unchanged():
    w = parameter(3)
    w.grad = np.array([0.1, -0.2, 0.2])
    returned = clip_grad_norm([("w", w)], max_norm=1.0)
    assert returned == pytest.approx(0.3, rel=1e-14)
    np.testing.assert_array_equal(w.grad, [0.1, -0.2, 0.2])


def test_clip_grad_norm_keeps_float32_and_accumulates_in_float64():
    # (1 + 2⁻¹²)² = 1 + 2⁻¹¹ + 2⁻²⁴ is not a float32: squaring in float32 would lose 2⁻²⁴
    w = parameter(4, dtype=np.float32)
    w.grad = np.full(4, 1 + 2.0 ** -12, dtype=np.float32)
    returned = clip_grad_norm([w], max_norm=1.0)
    assert returned == 2 * (1 + 2.0 ** -12)
    assert w.grad.dtype == np.float32
    np.testing.assert_allclose(w.grad, 0.5, rtol=1e-7)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("max_norm", [None, 1.0, 1e9])
def test_the_engine_room_clip_is_the_plain_clip_bit_for_bit(threads, max_norm):
    """autograd.engine_room.fused_clip (the norm a block at a time, both passes on the threads
    that share_updates set): the plain form's norm and clipped gradients, equal, not close."""
    def clipped(plain):
        params = [parameter(*shape, dtype=np.float32, seed=i) for i, shape in enumerate(SHAPES)]
        for i, p in enumerate(params):
            p.grad = None if i == 4 else (np.random.default_rng(i).standard_normal(p.shape) * (i + 1)).astype(np.float32)
        share_updates(SGD(params, lr=0.1), threads)
        with autograd.plain() if plain else contextlib.nullcontext():
            norm = clip_grad_norm(params, max_norm)
        share_updates(SGD(params, lr=0.1), 1)
        return norm, [p.grad for p in params if p.grad is not None]
    (norm, grads), (plain_norm, plain_grads) = clipped(False), clipped(True)
    assert norm == plain_norm and norm > 1.0
    assert all(np.array_equal(g, h) and g.dtype == h.dtype == np.float32 for g, h in zip(grads, plain_grads))


def test_clip_grad_norm_leaves_non_finite_gradients_alone():
    w = parameter(2)
    w.grad = np.array([np.inf, 1.0])
    assert clip_grad_norm([w], max_norm=1.0) == math.inf
    np.testing.assert_array_equal(w.grad, [np.inf, 1.0])


# checkpoints

def make_adam(params):
    return Adam(params, lr=warmup_schedule(8, 2), betas=(0.9, 0.98), eps=1e-9, weight_decay=0.01)


def make_sgd(params):
    return SGD(params, lr=0.05, momentum=0.9)


@pytest.mark.parametrize("make", [make_adam, make_sgd], ids=["adam", "sgd"])
@pytest.mark.parametrize("through_npz", [False, True])
def test_resuming_from_state_dict_is_exact(make, through_npz, tmp_path):
    grads = gradients(5, (3, 2))
    w_a = parameter(3, 2)
    a = make([("w", w_a)])
    for g in grads[:3]:
        w_a.grad = g.copy()
        a.step()
    state = a.state_dict()
    if through_npz:
        np.savez(tmp_path / "optimizer.npz", **state)
        state = dict(np.load(tmp_path / "optimizer.npz"))

    w_b = Tensor(w_a.data.copy(), requires_grad=True)
    b = make([("w", w_b)])
    b.load_state_dict(state)
    assert b.step_count == 3
    for g in grads[3:]:
        w_a.grad, w_b.grad = g.copy(), g.copy()
        a.step()
        b.step()
    np.testing.assert_array_equal(w_b.data, w_a.data)
    assert a.state_dict().keys() == b.state_dict().keys()


def test_state_dict_is_a_copy_that_later_steps_do_not_change():
    w = parameter(2)
    optimizer = Adam([("w", w)])
    w.grad = np.ones(2)
    optimizer.step()
    state = optimizer.state_dict()
    saved = state["w.exp_avg"].copy()
    optimizer.step()
    np.testing.assert_array_equal(state["w.exp_avg"], saved)
    assert state["step"] == 1 and state["w.step"] == 1


def test_state_dict_uses_the_parameter_names():
    optimizer = Adam([("encoder.W_q", parameter(2)), ("bias", parameter(1))])
    assert set(optimizer.state_dict()) == {"step", "encoder.W_q.step", "encoder.W_q.exp_avg",
                                           "encoder.W_q.exp_avg_sq", "bias.step", "bias.exp_avg",
                                           "bias.exp_avg_sq"}


def test_load_state_dict_with_a_wrong_shape_names_the_entry():
    state = Adam([("w", parameter(3))]).state_dict()
    other = Adam([("w", parameter(4))])
    with pytest.raises(ValueError, match=r"'w.exp_avg' has shape \(3,\), expected \(4,\)"):
        other.load_state_dict(state)


def test_load_state_dict_with_a_different_number_of_parameters_lists_the_missing_entries():
    state = Adam([("w", parameter(3))]).state_dict()
    other = Adam([("w", parameter(3)), ("b", parameter(1))])
    with pytest.raises(ValueError, match=r"missing: \['b.exp_avg', 'b.exp_avg_sq', 'b.step'\]"):
        other.load_state_dict(state)
    with pytest.raises(ValueError, match="unexpected"):
        SGD([("w", parameter(3))], lr=0.1, momentum=0.9).load_state_dict(state)


def test_failed_load_leaves_the_optimizer_unchanged():
    w = parameter(3)
    optimizer = Adam([("w", w)])
    w.grad = np.ones(3)
    optimizer.step()
    before = optimizer.state_dict()
    bad = dict(before, step=7, **{"w.exp_avg": np.zeros(4)})
    with pytest.raises(ValueError):
        optimizer.load_state_dict(bad)
    assert optimizer.step_count == 1
    np.testing.assert_array_equal(optimizer.state["w"]["exp_avg"], before["w.exp_avg"])


# input validation

@pytest.mark.parametrize("make, argument", [
    (lambda p: SGD(p, lr=0.0), "lr"),
    (lambda p: SGD(p, lr=-1.0), "lr"),
    (lambda p: SGD(p, lr=0.1, momentum=-0.1), "momentum"),
    (lambda p: SGD(p, lr=0.1, weight_decay=-1e-4), "weight_decay"),
    (lambda p: Adam(p, lr=-1e-3), "lr"),
    (lambda p: Adam(p, betas=(1.0, 0.999)), r"betas\[0\]"),
    (lambda p: Adam(p, betas=(0.9, -0.1)), r"betas\[1\]"),
    (lambda p: Adam(p, eps=-1e-8), "eps"),
    (lambda p: Adam(p, weight_decay=-0.1), "weight_decay"),
    (lambda p: AdamW(p, weight_decay=-0.1), "weight_decay"),
    (lambda p: AdamW(p, betas=(0.9, 1.0)), r"betas\[1\]"),
    (lambda p: warmup_schedule(0, 4000), "d_model"),
    (lambda p: warmup_schedule(512, 0), "warmup_steps"),
    (lambda p: clip_grad_norm(p, max_norm=-1.0), "max_norm"),
])
def test_bad_hyper_parameters_raise_value_error_naming_the_argument(make, argument):
    with pytest.raises(ValueError, match=argument):
        make([parameter(2)])


def test_empty_parameter_list_is_refused():
    with pytest.raises(ValueError, match="empty"):
        Adam([])


def test_parameters_that_do_not_require_grad_are_refused_by_name():
    with pytest.raises(ValueError, match="frozen"):
        SGD([("w", parameter(2)), ("frozen", Tensor(np.ones(2)))], lr=0.1)


def test_something_other_than_a_tensor_is_refused_with_its_position():
    with pytest.raises(TypeError, match=r"params\[1\].*ndarray"):
        Adam([parameter(2), np.zeros(2)])


def test_named_pairs_and_dicts_are_accepted():
    a, b = parameter(2), parameter(3)
    assert [name for name, _ in Adam({"a": a, "b": b}).named_params] == ["a", "b"]
    assert [name for name, _ in Adam([a, ("bias", b)]).named_params] == ["0", "bias"]


def test_a_tensor_listed_twice_is_refused():
    w = parameter(2)
    with pytest.raises(ValueError, match="twice"):
        SGD([w, w], lr=0.1)


SHAPES = [(3,), (BLOCK + 5,), (7, 11), (2 * BLOCK,), (1,), (40, 30), (5,), (BLOCK,), (9, 9), (2,)]
OPTIMIZERS = {
    "adam": lambda p, threads: share_updates(Adam(p, lr=0.01, weight_decay=0.1), threads),
    "adam, no decay": lambda p, threads: share_updates(Adam(p, lr=0.01, betas=(0.8, 0.95), eps=1e-6), threads),
    "adamw": lambda p, threads: share_updates(AdamW(p, lr=0.01, weight_decay=0.1), threads),
    "sgd": lambda p, threads: share_updates(SGD(p, lr=0.1, momentum=0.9), threads),
}


def train(make, threads, plain=False, dtype=np.float32, steps=4):
    """`steps` steps of an optimizer on ten parameters of different sizes (one of several
    blocks), one of which has no gradient at every other step: (parameters, state_dict)."""
    params = [(f"p{i}", parameter(*shape, dtype=dtype, seed=i)) for i, shape in enumerate(SHAPES)]
    optimizer = make(params, threads)
    for step in range(steps):
        for i, (_, p) in enumerate(params):
            p.grad = None if (i == 4 and step % 2) else \
                np.random.default_rng(100 * step + i).standard_normal(p.shape).astype(dtype)
        with autograd.plain() if plain else contextlib.nullcontext():
            optimizer.step()
    return [p.data for _, p in params], optimizer.state_dict()


def assert_bit_for_bit(run, other):
    (params, state), (other_params, other_state) = run, other
    assert all(np.array_equal(a, b) and a.dtype == b.dtype for a, b in zip(params, other_params))
    assert state.keys() == other_state.keys()
    assert all(np.array_equal(state[key], other_state[key]) and np.asarray(state[key]).dtype ==
               np.asarray(other_state[key]).dtype for key in state)


@pytest.mark.parametrize("name", OPTIMIZERS)
@pytest.mark.parametrize("threads", [2, 3])
def test_threads_share_the_update_and_give_the_same_parameters_and_state(name, threads):
    """Several threads end where one thread ends, bit for bit."""
    assert_bit_for_bit(train(OPTIMIZERS[name], 1), train(OPTIMIZERS[name], threads))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", OPTIMIZERS)
def test_the_engine_room_update_is_the_plain_update_bit_for_bit(name, dtype):
    """The engine room's update (in place, in blocks, on two threads) makes the plain form's
    operations in the plain form's order, entry by entry: the same parameters and moments, bit
    for bit, in float32 and float64."""
    assert_bit_for_bit(train(OPTIMIZERS[name], 1, plain=True, dtype=dtype),
                       train(OPTIMIZERS[name], 2, dtype=dtype))


@pytest.mark.parametrize("block", [1024, 4 * BLOCK])
def test_the_update_and_the_norm_do_not_depend_on_the_block_size(block):
    """The block size a machine measures fastest (numpy_transformer/training/update_block.py)
    moves the time only: Adam's update and the clip's norm in blocks of `block` entries are the
    plain form's bit for bit, as at the default size."""
    previous = update_block()
    try:
        set_update_block(block)
        assert_bit_for_bit(train(OPTIMIZERS["adam"], 1, plain=True), train(OPTIMIZERS["adam"], 2))
        size = 9 * BLOCK + 3                                    # 3 blocks of 4 · BLOCK, 577 of 1,024
        runs = []
        for plain in (True, False):
            p = parameter(size, dtype=np.float32, seed=1)
            optimizer = Adam([("p", p)], lr=0.01, weight_decay=0.1)
            for step in range(3):
                p.grad = np.random.default_rng(step).standard_normal(size).astype(np.float32)
                with autograd.plain() if plain else contextlib.nullcontext():
                    optimizer.step()
            runs.append(([p.data], optimizer.state_dict()))
        assert_bit_for_bit(*runs)
        grads = [np.random.default_rng(i).standard_normal(n).astype(np.float32) for i, n in enumerate((3 * block + 17, size))]
        plain = math.sqrt(sum(float(np.sum(np.square(g, dtype=np.float64))) for g in grads))
        if tuple(int(part) for part in np.__version__.split(".")[:2]) < (2, 3):
            assert grad_norm_in_blocks(grads) == pytest.approx(plain, rel=1e-14)   # tests/test_blocks.py: why
        else:
            assert grad_norm_in_blocks(grads) == plain
    finally:
        set_update_block(previous)
    assert update_block() == previous


@pytest.mark.parametrize("size", [0, 1023, 2.5, True, "65536"])
def test_an_update_block_that_is_not_an_int_of_at_least_1024_is_refused(size):
    with pytest.raises(ValueError, match="at least 1024"):
        set_update_block(size)


@pytest.mark.parametrize("plain", [False, True])
def test_adamw_first_three_steps_match_the_equations(plain):
    w = parameter(2, 3)
    grads = gradients(3, (2, 3))
    expected = adam_reference(w.data.copy(), grads, lr=0.05, beta1=0.8, beta2=0.95, eps=1e-6, weight_decay=0.1,
                              decoupled=True)
    optimizer = AdamW([w], lr=0.05, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1)
    for g, p_t in zip(grads, expected):
        w.grad = g.copy()
        with autograd.plain() if plain else contextlib.nullcontext():
            optimizer.step()
        np.testing.assert_allclose(w.data, p_t, rtol=1e-12, atol=1e-14)


def test_adamw_decay_shrinks_every_entry_by_the_same_factor_and_skips_the_moments():
    """With a zero gradient the moments stay 0 and the Adam step is 0: p ← p (1 − lr λ)."""
    w = parameter(4)
    start = w.data.copy()
    optimizer = AdamW([("w", w)], lr=0.1, weight_decay=0.5)
    w.grad = np.zeros(4)
    optimizer.step()
    np.testing.assert_allclose(w.data, start * (1 - 0.1 * 0.5), rtol=1e-15)
    np.testing.assert_array_equal(optimizer.state["w"]["exp_avg_sq"], 0.0)


def test_the_plain_update_runs_in_plain_mode_and_the_engine_room_update_otherwise(monkeypatch):
    optimizer = Adam([("w", parameter(3))])
    calls = []
    monkeypatch.setattr(optimizer, "_update", lambda *args: calls.append("plain"))
    monkeypatch.setattr(optimizer, "_fused_update", lambda *args: calls.append("engine room"))
    optimizer.named_params[0][1].grad = np.ones(3)
    optimizer.step()
    with autograd.plain():
        optimizer.step()
    assert calls == ["engine room", "plain"]


def test_an_error_in_a_thread_is_raised_by_step(monkeypatch):
    optimizer = Adam([("a", parameter(3)), ("b", parameter(4))])

    def update(p, g, state, lr):
        if p.size == 4:
            raise FloatingPointError("the update of b")

    monkeypatch.setattr(optimizer, "_fused_update", update)
    for _, p in optimizer.named_params:
        p.grad = np.ones(p.shape)
    with pytest.raises(FloatingPointError, match="the update of b"):
        share_updates(optimizer, 2).step()


def test_the_shares_are_balanced_by_size():
    updates = [(np.zeros(size), None, None) for size in (10, 9, 6, 5, 4, 3, 1)]
    shares = balanced_shares(updates, 2)
    assert sorted(sum(u[0].size for u in share) for share in shares) == [19, 19]
    assert sorted(u[0].size for share in shares for u in share) == [1, 3, 4, 5, 6, 9, 10]
    assert [len(share) for share in balanced_shares(updates[:1], 3)] == [1, 0, 0]


def test_one_thread_is_the_optimizer_itself_and_more_wrap_its_step_only():
    """The plain optimizer takes no threads; the engine room's wrapper steps it on threads and
    reads everything else (step count, learning rate, state, checkpoints) from it."""
    optimizer = Adam([("w", parameter(3))], lr=0.01)
    assert share_updates(optimizer, 1) is optimizer
    shared = share_updates(optimizer, 2)
    assert isinstance(shared, SharedUpdates) and shared.threads == 2
    optimizer.named_params[0][1].grad = np.ones(3)
    shared.step()
    assert shared.step_count == optimizer.step_count == 1 and shared.current_lr == 0.01
    assert_bit_for_bit(([], shared.state_dict()), ([], optimizer.state_dict()))
    with pytest.raises(TypeError, match="threads"):
        Adam([parameter(2)], threads=2)


def test_threads_must_be_a_positive_integer():
    with pytest.raises(ValueError, match="threads"):
        share_updates(Adam([parameter(2)]), 0)


def test_grad_of_the_wrong_shape_names_the_parameter():
    w = parameter(3)
    optimizer = SGD([("w", w)], lr=0.1)
    w.grad = np.ones(2)
    with pytest.raises(ValueError, match=r"'w' has shape \(3,\) but its grad has shape \(2,\)"):
        optimizer.step()


# through the engine

@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_adam_minimises_a_quadratic_through_the_engine(dtype):
    target = np.array([1.0, -2.0, 3.0, 0.5], dtype=dtype)
    w = Tensor(np.zeros(4, dtype=dtype), requires_grad=True)
    optimizer = Adam([w], lr=0.1)
    for _ in range(500):
        optimizer.zero_grad()
        loss = ((w - target) ** 2).sum()
        loss.backward()
        optimizer.step()
    assert w.data.dtype == dtype
    np.testing.assert_allclose(w.data, target, atol=1e-3)
    assert ((w - target) ** 2).sum().item() < 1e-5
