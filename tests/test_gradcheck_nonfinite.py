"""A gradient check never passes a wrong gradient: not with a NaN or infinite Jacobian entry, not
with a degenerate step, not with a tolerance that could pass anything."""
import numpy as np
import pytest

from autograd import Function, GradcheckError, Tensor, gradcheck


class TwiceWithWrongGradient(Function):
    """Forward 2x, backward 3g: a wrong VJP."""

    def forward(self, x):
        return 2 * x

    def backward(self, g):
        return (3 * g,)


def wrong(x):
    return TwiceWithWrongGradient.apply(x)


def tensor(values):
    return Tensor(np.array(values, dtype=np.float64), requires_grad=True)


def test_the_wrong_gradient_fails_at_an_ordinary_point():
    with pytest.raises(GradcheckError, match="analytic 3, numerical 2"):
        gradcheck(wrong, tensor([1.0, 2.0]))


def test_a_nan_input_is_refused():
    with pytest.raises(ValueError, match=r"input 0 has the non-finite value nan at entry \(0,\)"):
        gradcheck(wrong, tensor([np.nan, 2.0]))


@pytest.mark.parametrize("settings, message", [
    (dict(eps=0.0), "eps"), (dict(eps=np.nan), "eps"), (dict(eps=-1e-6), "eps"),
    (dict(atol=np.nan), "atol"), (dict(atol=np.inf), "atol"), (dict(atol=1e300), "atol"), (dict(atol=-1.0), "atol"),
    (dict(rtol=np.nan), "rtol"), (dict(rtol=1.0), "rtol"), (dict(num_projections=0), "num_projections"),
])
def test_a_step_or_tolerance_that_cannot_fail_is_refused(settings, message):
    with pytest.raises(ValueError, match=message):
        gradcheck(wrong, tensor([1.0, 2.0]), **settings)


def test_the_wrong_gradient_fails_in_projection_mode():
    with pytest.raises(GradcheckError, match="random direction"):
        gradcheck(wrong, tensor(np.linspace(1, 2, 50)), mode="projection")


@pytest.mark.parametrize("mode", ["jacobian", "projection"])
def test_a_nan_entry_of_the_jacobian_fails(mode):
    """log at 0: the numerical derivative is NaN (log of a negative number) and the analytic one
    infinite, so no comparison can pass."""
    with np.errstate(divide="ignore", invalid="ignore"), pytest.raises(GradcheckError):
        gradcheck(lambda x: wrong(x.log()), tensor([0.0, 2.0]), mode=mode)


def test_a_nan_entry_fails_even_where_every_other_entry_is_right():
    def nan_at_entry_0(x):
        return x * Tensor(np.array([np.nan, 1.0]))

    with np.errstate(invalid="ignore"), pytest.raises(GradcheckError, match=r"entry \(0,\).*analytic nan"):
        gradcheck(nan_at_entry_0, tensor([1.0, 2.0]))


def test_right_gradients_still_pass():
    assert gradcheck(lambda x: (x * x).sum(), tensor([1.0, -2.0, 3.0]))
    assert gradcheck(lambda x: x.exp(), tensor(np.linspace(-1, 1, 40)), mode="projection")
