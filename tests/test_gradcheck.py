"""gradcheck itself: it must fail loudly on a wrong gradient and refuse what it cannot check."""
import numpy as np
import pytest

from autograd import Function, GradcheckError, Tensor, gradcheck


class _WrongExp(Function):
    """exp with a VJP that forgets a factor of e^a: gradcheck must catch it."""

    def forward(self, a):
        return np.exp(a)

    def backward(self, g):
        return (g,)


def x64(*shape, seed=0):
    return Tensor(np.random.default_rng(seed).standard_normal(shape), requires_grad=True)


@pytest.mark.parametrize("mode", ["jacobian", "projection"])
def test_a_wrong_vjp_is_caught(mode):
    with pytest.raises(GradcheckError, match="input 0"):
        gradcheck(lambda a: _WrongExp.apply(a), x64(3, 2), mode=mode)


def test_the_report_names_the_input_the_entry_and_both_values():
    good = x64(2)
    with pytest.raises(GradcheckError) as failure:
        gradcheck(lambda a, b: a * _WrongExp.apply(b), good, x64(2, seed=1))
    message = str(failure.value)
    assert "input 1 (2,) at entry" in message
    assert "analytic" in message and "numerical" in message and "relative" in message


def test_float32_inputs_are_refused_with_a_hint():
    with pytest.raises(TypeError, match="float64"):
        gradcheck(lambda a: a * 2, Tensor(np.ones(3, np.float32), requires_grad=True))


def test_nothing_to_check_is_an_error():
    with pytest.raises(ValueError, match="requires_grad"):
        gradcheck(lambda a: a * 2, Tensor(np.ones(3)))


def test_unknown_mode_is_an_error():
    with pytest.raises(ValueError, match="mode"):
        gradcheck(lambda a: a * 2, x64(2), mode="exact")


def test_projection_mode_checks_large_inputs():
    x = x64(80, 90)
    assert gradcheck(lambda a: (a.tanh() @ a.T).sum(axis=0), x, mode="auto")


def test_gradcheck_leaves_inputs_and_their_grads_as_they_were():
    x = x64(3)
    before = x.data.copy()
    x.grad = np.full(3, 7.0)
    gradcheck(lambda a: a.exp(), x)
    np.testing.assert_array_equal(x.data, before)
    np.testing.assert_array_equal(x.grad, np.full(3, 7.0))
