"""ReLU, GELU (exact and tanh) and sigmoid: gradient checks, hand-computed values, stability
for large |x|, dtypes, and a clear error for an unknown GELU form. GELU has two forms, the plain
one (`autograd.plain()`) and the engine room's (`autograd.engine_room.gelu_erf`, the default):
both are checked, and checked against each other."""
import contextlib
import math

import numpy as np
import pytest
from scipy.special import erf

import autograd
import autograd.engine_room.gelu_erf as gelu_erf
import autograd.functional.activations as activations
import autograd.functional as F
from autograd import Tensor, gradcheck

ACTIVATIONS = {
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "gelu (plain)": autograd.plain()(F.gelu),
    "gelu_tanh (plain)": autograd.plain()(lambda x: F.gelu(x, approximate="tanh")),
    "sigmoid": F.sigmoid,
}
SHAPES = [(7,), (3, 4), (2, 3, 4)]


@pytest.fixture(params=["engine room", "plain"])
def either_form(request):
    """Runs the test once with the default (engine room) forms and once inside autograd.plain()."""
    with autograd.plain() if request.param == "plain" else contextlib.nullcontext():
        yield


def leaf(shape, seed=0, scale=2.0, dtype=np.float64):
    data = scale * np.random.default_rng(seed).standard_normal(shape)
    return Tensor(data.astype(dtype), requires_grad=True)


def derivative(fn, x, dtype=np.float64):
    """The elementwise derivative at x, from the VJP with g = 1."""
    x = Tensor(np.asarray(x, dtype=dtype), requires_grad=True)
    fn(x).backward(np.ones(x.shape, dtype))
    return x.grad


def away_from_zero(x):
    """ReLU has a kink at 0, where finite differences are meaningless."""
    x.data[np.abs(x.data) < 1e-3] = 0.5
    return x


@pytest.mark.parametrize("name", ACTIVATIONS)
@pytest.mark.parametrize("shape", SHAPES)
def test_gradcheck(name, shape):
    assert gradcheck(ACTIVATIONS[name], away_from_zero(leaf(shape)))


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_float32_in_float32_out_and_float32_gradient(name):
    x = leaf((3, 4), dtype=np.float32)
    out = ACTIVATIONS[name](x)
    out.backward(np.ones((3, 4), np.float32))
    assert out.dtype == np.float32 and x.grad.dtype == np.float32


@pytest.mark.parametrize("name", ACTIVATIONS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_huge_inputs_give_finite_values_and_gradients(name, dtype):
    x = Tensor(np.array([-1e30, -1e4, -50.0, 50.0, 1e4, 1e30], dtype=dtype), requires_grad=True)
    out = ACTIVATIONS[name](x)
    out.backward(np.ones(6, dtype))
    assert np.all(np.isfinite(out.data)) and np.all(np.isfinite(x.grad))


@pytest.mark.numerics
@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_the_engine_room_gelu_agrees_with_the_plain_form(approximate, dtype):
    """Values and slopes of the default (engine room) GELU against the plain form on [−10, 10].
    Both evaluate the same formulas with different roundings (float16: the engine room widens to
    float32, the plain form only the erf): values within 2 ulps of max(|x|, 1), slopes (at most
    1.13) within 6 ulps of 1. The exact form in float32 adds the rational erf's error, at most
    4.5e-7 in erf, so 2.25e-7 in Φ = ½(1 + erf): 2.25e-7 |x| in the value x Φ(x) and 2.25e-7 in
    the slope, which reads its Φ off the value. The tanh form adds a difference of up to 2 ulps
    in t = tanh u (ε for |t| in [½, 1)): the two forms round u in other orders, and NumPy's tanh
    differs by CPU (its AVX-512 and AVX2 loops, the C library's below them). That moves the
    value ½x(1 + t) by ½|x|ε and the slope ½(1 + t) + ½x(1 − t²)u' by (½ + |x t| u')ε: 6.6 ulps
    of 1 at x = −4.55 with NumPy's loops held to SSE4.2, where 6 was the bound before."""
    x = np.linspace(-10, 10, 200_001).astype(dtype)
    forms = []
    for context in (autograd.plain, lambda: contextlib.nullcontext()):
        t = Tensor(x, requires_grad=True)
        with context():
            y = F.gelu(t, approximate=approximate)
        y.backward(np.ones_like(x))
        assert y.dtype == t.grad.dtype == dtype
        forms.append((y.data.astype(np.float64), t.grad.astype(np.float64)))
    (plain, plain_slope), (fast, fast_slope) = forms
    eps, erf_error = np.finfo(dtype).eps, 2.25e-7 if (dtype == np.float32 and approximate == "none") else 0.0
    wide = np.abs(x.astype(np.float64))
    t_value, t_slope = 0.0, 0.0
    if approximate == "tanh":
        t, du_dx = activations.tanh_form(wide)
        t_value, t_slope = 0.5 * wide * eps, (0.5 + wide * np.abs(t) * du_dx) * eps
    assert np.all(np.abs(fast - plain) <= erf_error * wide + 2 * eps * np.maximum(wide, 1) + t_value)
    assert np.all(np.abs(fast_slope - plain_slope) <= erf_error + 6 * eps + t_slope)


def test_relu_values_and_derivative():
    x = np.array([-2.0, -0.0, 0.0, 3.0])
    np.testing.assert_array_equal(F.relu(Tensor(x)).data, [0.0, 0.0, 0.0, 3.0])
    np.testing.assert_array_equal(derivative(F.relu, x), [0.0, 0.0, 0.0, 1.0])  # 0 at the kink, as PyTorch


def test_gelu_exact_is_x_times_normal_cdf(either_form):
    x = np.array([-3.0, -1.0, 0.0, 0.5, 2.0])
    expected = [v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x]
    np.testing.assert_allclose(F.gelu(Tensor(x)).data, expected, rtol=1e-15)


def test_gelu_exact_derivative_is_cdf_plus_x_times_density(either_form):
    x = np.array([-3.0, -1.0, 0.0, 0.5, 2.0])
    expected = [0.5 * (1 + math.erf(v / math.sqrt(2))) + v * math.exp(-v * v / 2) / math.sqrt(2 * math.pi)
                for v in x]
    np.testing.assert_allclose(derivative(F.gelu, x), expected, rtol=1e-14)


def test_float32_erf_is_within_its_bound_of_the_exact_erf_everywhere():
    """The engine room's rational erf (autograd.engine_room.gelu_erf.erf_float32)."""
    x = np.linspace(-7, 7, 1_400_001, dtype=np.float32)
    approximation = gelu_erf.erf_float32(x)
    assert approximation.dtype == np.float32
    error = np.abs(approximation - erf(x.astype(np.float64)))
    assert error.max() <= 4.5e-7                                     # about 7 units in float32's last place
    assert np.array_equal(gelu_erf.erf_float32(np.float32([-1e30, -4, 4, 1e30])), [-1, -1, 1, 1])
    in_place = x.copy()
    assert gelu_erf.erf_float32(in_place, out=in_place) is in_place and np.array_equal(in_place, approximation)


def test_float32_gelu_and_its_slope_match_the_float64_formula():
    """float32 uses erf_float32, float64 SciPy's erf: the two GELUs agree to float32's precision
    (the default forms, from the engine room)."""
    x = np.linspace(-10, 10, 20_001)
    for form in ("none", "tanh"):
        exact, fast = (F.gelu(Tensor(x), approximate=form), F.gelu(Tensor(x.astype(np.float32)), approximate=form))
        assert fast.dtype == np.float32
        np.testing.assert_allclose(fast.data, exact.data, rtol=0, atol=2e-6)
        slope = derivative(lambda t: F.gelu(t, approximate=form), x, np.float32)
        assert slope.dtype == np.float32
        np.testing.assert_allclose(slope, derivative(lambda t: F.gelu(t, approximate=form), x), rtol=0, atol=2e-6)


def test_small_float32_arrays_take_scipy_s_erf_and_large_ones_the_rational_form(monkeypatch):
    """A decoding step's (1, 512) hidden layer goes to SciPy's erf, a training batch's to
    erf_float32; both agree with the float64 formula to float32's precision."""
    calls = []
    rational = gelu_erf.erf_float32
    monkeypatch.setattr(gelu_erf, "erf_float32", lambda z, out=None: calls.append(z.size) or rational(z, out=out))
    for size in (512, gelu_erf.SMALL - 1, gelu_erf.SMALL, 64 * 512):
        x = np.random.default_rng(size).uniform(-6, 6, size)
        fast = F.gelu(Tensor(x.astype(np.float32)))
        np.testing.assert_allclose(fast.data, F.gelu(Tensor(x)).data, rtol=0, atol=2e-6)
    assert calls == [gelu_erf.SMALL, 64 * 512]


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_in_blocks_gives_the_values_and_gradients_of_one_pass(approximate):
    """The engine room's GELU runs a block at a time (autograd.engine_room.blocks); its last
    block is no smaller than the others, so every block takes the same erf, and the result is
    bit for bit that of one pass."""
    x = np.random.default_rng(1).uniform(-6, 6, (3, 2 ** 16 + 77)).astype(np.float32)
    g = np.random.default_rng(2).standard_normal(x.shape).astype(np.float32)
    value, slope = gelu_erf._GELU_FORMS[approximate]
    t = Tensor(x, requires_grad=True)
    y = F.gelu(t, approximate=approximate)
    y.backward(g)
    assert np.array_equal(y.data, value(x)) and np.array_equal(t.grad, g * slope(x, value(x)))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_gelu_s_backward_reads_the_cdf_off_its_output_exactly_at_zero_and_tiny_inputs(dtype, monkeypatch):
    """The engine room's exact form: its slope Φ(x) + x φ(x) takes Φ(x) = y / x from the
    forward's y = x Φ(x): no erf in backward, ½ where |x| is below the smallest normal number,
    and float16's y (rounded to 11 bits) gives the slope to float16's precision."""
    tiny = np.finfo(dtype).tiny
    subnormal = tiny * np.array([0.3, -0.7, 0.011])                     # y = x/2 loses digits there
    x = np.concatenate([[0.0, -0.0], subnormal, [tiny, 2 * tiny, 1e-3], np.linspace(-8, 8, 2001)]).astype(dtype)
    t = Tensor(x, requires_grad=True)
    y = F.gelu(t)
    monkeypatch.setattr(gelu_erf, "erf_float32", lambda *args, **kwargs: pytest.fail("erf in backward"))
    monkeypatch.setattr(gelu_erf, "erf", lambda *args, **kwargs: pytest.fail("erf in backward"))
    y.backward(np.ones_like(x))
    wide = x.astype(np.float64)
    expected = 0.5 * (1 + erf(wide / math.sqrt(2))) + wide * np.exp(-wide * wide / 2) / math.sqrt(2 * math.pi)
    assert t.grad.dtype == dtype and np.all(t.grad[:5] == 0.5)
    np.testing.assert_allclose(t.grad, expected, rtol=0, atol={np.float16: 2e-3, np.float32: 1e-6,
                                                                 np.float64: 1e-14}[dtype])


def test_gelu_tanh_is_the_tanh_formula(either_form):
    x = np.array([-3.0, -1.0, 0.0, 0.5, 2.0])
    expected = [0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3))) for v in x]
    np.testing.assert_allclose(F.gelu(Tensor(x), approximate="tanh").data, expected, rtol=1e-15)


def test_gelu_tanh_approximates_the_exact_gelu(either_form):
    x = Tensor(np.linspace(-6, 6, 101))
    np.testing.assert_allclose(F.gelu(x, approximate="tanh").data, F.gelu(x).data, atol=1e-3)


def test_gelu_saturates_to_relu_for_large_inputs(either_form):
    x = np.array([-200.0, -60.0, 60.0, 200.0])
    for form in ("none", "tanh"):
        np.testing.assert_array_equal(F.gelu(Tensor(x), approximate=form).data, [-0.0, -0.0, 60.0, 200.0])
        np.testing.assert_array_equal(derivative(lambda t: F.gelu(t, approximate=form), x), [0, 0, 1, 1])


def test_gelu_unknown_approximation_names_the_argument():
    with pytest.raises(ValueError, match="approximate.*'erf'"):
        F.gelu(Tensor(np.zeros(3)), approximate="erf")


def test_sigmoid_values_and_derivative():
    x = np.array([-2.0, 0.0, 1.0])
    s = 1 / (1 + np.exp(-x))
    np.testing.assert_allclose(F.sigmoid(Tensor(x)).data, s, rtol=1e-15)
    np.testing.assert_allclose(derivative(F.sigmoid, x), s * (1 - s), rtol=1e-15)


def test_sigmoid_is_stable_and_symmetric_for_large_inputs():
    x = np.array([-800.0, -40.0, 40.0, 800.0])
    s = F.sigmoid(Tensor(x)).data
    np.testing.assert_array_equal(s[[0, 3]], [0.0, 1.0])
    np.testing.assert_allclose(s[1], math.exp(-40.0), rtol=1e-15)  # not rounded to 0 by 1 − σ(40)
    np.testing.assert_allclose(s + F.sigmoid(Tensor(-x)).data, 1.0, rtol=1e-15)
