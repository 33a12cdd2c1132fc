"""Layer norm, thesis eq. (2): the engine room's fused primitive with its hand-derived VJP and
the plain composite built from primitives, in both variants ("thesis": σ + ε, "torch": √(σ² + ε))."""
import numpy as np
import pytest

import autograd.functional as F
from autograd import Tensor, gradcheck

VARIANTS = ["thesis", "torch"]
IMPLEMENTATIONS = {"fused": F.layer_norm, "composite": F.layer_norm_composite}


def inputs(shape, seed=0, dtype=np.float64):
    """x of `shape`, γ near 1 and β of shape (d,), all requiring grad."""
    rng = np.random.default_rng(seed)
    d = shape[-1]
    return (Tensor(rng.standard_normal(shape).astype(dtype), requires_grad=True),
            Tensor((1 + 0.5 * rng.standard_normal(d)).astype(dtype), requires_grad=True),
            Tensor(rng.standard_normal(d).astype(dtype), requires_grad=True))


def eq2(z, gamma, beta, eps):
    """Thesis eq. (2) in plain NumPy: γ (z − μ)/(σ + ε) + β, σ the biased standard deviation."""
    mu = z.mean(axis=-1, keepdims=True)
    sigma = np.sqrt(((z - mu) ** 2).mean(axis=-1, keepdims=True))
    return gamma * (z - mu) / (sigma + eps) + beta


def values_and_gradients(fn, tensors, upstream, **kwargs):
    for t in tensors:
        t.grad = None
    out = fn(*tensors, **kwargs)
    out.backward(upstream)
    return out.data, [t.grad for t in tensors]


@pytest.mark.parametrize("shape", [(4,), (3, 5), (2, 3, 6)])
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_gradients_for_x_gamma_and_beta_match_finite_differences(implementation, variant, shape):
    fn = IMPLEMENTATIONS[implementation]
    assert gradcheck(lambda x, g, b: fn(x, g, b, variant=variant), *inputs(shape))


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_gradients_match_finite_differences_where_eps_is_not_negligible(implementation, variant):
    # with σ ≫ ε the two denominators (and their gradients) agree to about ε/σ; here they do not
    x, gamma, beta = inputs((3, 5), seed=11)
    x.data *= np.array([[1.0], [0.3], [0.05]])
    fn = IMPLEMENTATIONS[implementation]
    assert gradcheck(lambda x, g, b: fn(x, g, b, eps=0.1, variant=variant), x, gamma, beta)


@pytest.mark.parametrize("variant", VARIANTS)
def test_fused_and_composite_agree_in_values_and_gradients(variant):
    """Equal to rounding (float64): the fused form divides once by D and takes its row means as
    products with γ, the composite divides by D through autograd's chain, so the gradients, sums
    of terms as large as 1/D, differ by a few units of 1e-16 relative to those terms."""
    tensors = inputs((2, 3, 7), seed=1)
    upstream = np.random.default_rng(2).standard_normal((2, 3, 7))
    fused, fused_grads = values_and_gradients(F.layer_norm, tensors, upstream, variant=variant)
    composite, composite_grads = values_and_gradients(F.layer_norm_composite, tensors, upstream, variant=variant)
    np.testing.assert_allclose(fused, composite, rtol=1e-12, atol=1e-12)
    for a, b in zip(fused_grads, composite_grads):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_thesis_variant_is_equation_2_with_the_thesis_default_eps(implementation):
    x, gamma, beta = inputs((3, 5))
    x.data[1] *= 1e-3  # a row with small σ, where σ + ε and √(σ² + ε) are far apart
    out = IMPLEMENTATIONS[implementation](x, gamma, beta)
    np.testing.assert_allclose(out.data, eq2(x.data, gamma.data, beta.data, 1e-6), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_the_variants_differ_by_the_ratio_of_their_denominators(implementation):
    fn = IMPLEMENTATIONS[implementation]
    x = Tensor(np.random.default_rng(3).standard_normal((4, 6)) * np.array([[1], [0.1], [1e-3], [10]]))
    ones, zeros = Tensor(np.ones(6)), Tensor(np.zeros(6))
    eps = 1e-6
    thesis = fn(x, ones, zeros, eps=eps, variant="thesis").data
    torch_like = fn(x, ones, zeros, eps=eps, variant="torch").data
    sigma = x.data.std(axis=-1, keepdims=True)
    ratio = np.sqrt(sigma ** 2 + eps) / (sigma + eps)
    np.testing.assert_allclose(thesis / torch_like, np.broadcast_to(ratio, thesis.shape), rtol=1e-12)
    assert np.abs(thesis[2] - torch_like[2]).max() > 0.1  # σ = 1e-3: √(2e-6) against 1.001e-3


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_rows_have_mean_beta_and_the_expected_spread(implementation, variant):
    x = Tensor(np.random.default_rng(4).standard_normal((5, 64)) * 3 + 2)
    beta = np.linspace(-1, 1, 64)
    out = IMPLEMENTATIONS[implementation](x, Tensor(np.ones(64)), Tensor(beta), variant=variant).data
    normalised = out - beta
    np.testing.assert_allclose(normalised.mean(axis=-1), 0, atol=1e-12)
    sigma = x.data.std(axis=-1)
    expected_std = sigma / (sigma + 1e-6) if variant == "thesis" else sigma / np.sqrt(sigma ** 2 + 1e-6)
    np.testing.assert_allclose(normalised.std(axis=-1), expected_std, rtol=1e-12)


def test_torch_variant_rows_have_unit_variance_with_gamma_one():
    x = Tensor(np.random.default_rng(5).standard_normal((8, 32)) * 4 - 1)
    out = F.layer_norm(x, Tensor(np.ones(32)), Tensor(np.zeros(32)), variant="torch").data
    np.testing.assert_allclose(out.var(axis=-1), 1, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("variant", VARIANTS)
def test_a_constant_row_gives_beta_and_the_exact_finite_gradient(variant, dtype):
    x, gamma, beta = inputs((2, 5), seed=6, dtype=dtype)
    x.data[0] = 3.0
    eps = 1e-6
    upstream = np.random.default_rng(7).standard_normal((2, 5)).astype(dtype)
    out, (grad_x, grad_gamma, grad_beta) = values_and_gradients(F.layer_norm, (x, gamma, beta), upstream,
                                                               eps=eps, variant=variant)
    np.testing.assert_array_equal(out[0], beta.data)
    assert all(np.isfinite(g).all() for g in (grad_x, grad_gamma, grad_beta))
    # x̂ = c/D is linear in c = z − μ near a constant row, so ∂L/∂z = (h − mean(h)) / D with D(σ=0)
    h = upstream[0] * gamma.data
    denominator = eps if variant == "thesis" else np.sqrt(eps)
    np.testing.assert_allclose(grad_x[0], (h - h.mean()) / denominator, rtol=1e-5 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_nearly_constant_float32_row_has_finite_gradients(variant):
    x, gamma, beta = inputs((1, 8), seed=8, dtype=np.float32)
    x.data[0] = np.float32(1e-30) * np.arange(8, dtype=np.float32)  # σ² underflows to 0 in float32
    out = F.layer_norm(x, gamma, beta, variant=variant)
    out.backward(np.ones((1, 8), np.float32))
    assert np.isfinite(out.data).all() and np.isfinite(x.grad).all()


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_float32_in_float32_out_and_float32_gradients(implementation, variant):
    tensors = inputs((3, 4, 8), dtype=np.float32)
    out, grads = values_and_gradients(IMPLEMENTATIONS[implementation], tensors,
                                      np.ones((3, 4, 8), np.float32), eps=np.float64(1e-6), variant=variant)
    assert out.dtype == np.float32
    assert [g.dtype for g in grads] == [np.float32] * 3


def test_gamma_and_beta_gradients_sum_over_every_leading_axis():
    x, gamma, beta = inputs((2, 3, 4), seed=9)
    upstream = np.random.default_rng(10).standard_normal((2, 3, 4))
    _, (_, grad_gamma, grad_beta) = values_and_gradients(F.layer_norm, (x, gamma, beta), upstream)
    x_hat = eq2(x.data, 1.0, 0.0, 1e-6)
    np.testing.assert_allclose(grad_gamma, (upstream * x_hat).sum(axis=(0, 1)), rtol=1e-12)
    np.testing.assert_allclose(grad_beta, upstream.sum(axis=(0, 1)), rtol=1e-12)


@pytest.mark.parametrize("fn", IMPLEMENTATIONS.values())
def test_unknown_variant_is_a_value_error_naming_the_allowed_ones(fn):
    with pytest.raises(ValueError, match=r"variant.*'thesis'.*'torch'.*'pytorch'"):
        fn(*inputs((2, 3)), variant="pytorch")


@pytest.mark.parametrize("fn", IMPLEMENTATIONS.values())
def test_parameters_of_the_wrong_shape_are_a_value_error_with_the_shapes(fn):
    x, gamma, beta = inputs((2, 3))
    with pytest.raises(ValueError, match=r"gamma.*\(3,\).*\(2, 3\).*\(4,\)"):
        fn(x, Tensor(np.ones(4)), beta)
    with pytest.raises(ValueError, match=r"beta.*\(3,\).*\(1, 3\)"):
        fn(x, gamma, Tensor(np.zeros((1, 3))))
