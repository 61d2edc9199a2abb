"""tracer.scipy.special against scipy.special: values (including poles, zeros, tails and
non-finite inputs), dtypes and promotion, derivatives (check_grads), vmap and jit."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import scipy.special as sps

import tracer
import tracer.scipy.special as tss
from tracer.test_util import check_grads, check_jit, check_vmap

RNG = np.random.default_rng(99)
INF, NAN = np.inf, np.nan

EDGES = np.array([0.0, -0.0, -1.0, -1.5, -2.5, 0.5, 1.0, 2.0, 2.5, 10.0, 171.5, INF, -INF, NAN])


def _close(got, want, rtol):
    # (atol: SciPy flushes some subnormal results to zero, e.g. log_ndtr(38) = -2e-317)
    got = np.asarray(got)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-305, equal_nan=True)
    fin = np.isinf(want)
    np.testing.assert_array_equal(got[fin], want[fin])


# name, our function, SciPy's, input maker, rtol (float64)
UNARY = [
    ("gammaln", tss.gammaln, sps.gammaln, lambda: RNG.uniform(-10, 30, 200), 1e-13),
    ("gamma", tss.gamma, sps.gamma, lambda: RNG.uniform(-10, 30, 200), 1e-13),
    ("gammasgn", tss.gammasgn, sps.gammasgn, lambda: RNG.uniform(-10, 10, 200), 0),
    ("loggamma", tss.loggamma, sps.loggamma, lambda: RNG.uniform(-5, 30, 200), 1e-14),
    ("digamma", tss.digamma, sps.digamma, lambda: RNG.uniform(0.01, 30, 200), 1e-14),
    ("psi", tss.psi, sps.psi, lambda: RNG.uniform(0.01, 30, 200), 1e-14),
    ("erf", tss.erf, sps.erf, lambda: RNG.uniform(-6, 6, 200), 1e-15),
    ("erfc", tss.erfc, sps.erfc, lambda: RNG.uniform(-6, 6, 200), 1e-14),
    ("erfcx", tss.erfcx, sps.erfcx, lambda: RNG.uniform(-2, 50, 200), 1e-14),
    ("erfinv", tss.erfinv, sps.erfinv, lambda: RNG.uniform(-1, 1, 200), 1e-14),
    ("erfcinv", tss.erfcinv, sps.erfcinv, lambda: RNG.uniform(0, 2, 200), 1e-14),
    # (in the lower tail both round z = x/sqrt(2), a relative error up to x*x/2**53)
    ("ndtr", tss.ndtr, sps.ndtr, lambda: RNG.uniform(-30, 10, 200), 3e-13),
    ("ndtri", tss.ndtri, sps.ndtri, lambda: np.concatenate([RNG.uniform(0, 1, 200),
                                                           np.logspace(-300, -1, 50)]), 1e-14),
    # (SciPy's log_ndtr loses ~1e-12 relative in the tails; mpmath checks below)
    ("log_ndtr", tss.log_ndtr, sps.log_ndtr, lambda: RNG.uniform(-100, 40, 300), 3e-12),
    ("i0", tss.i0, sps.i0, lambda: RNG.uniform(-700, 700, 200), 1e-14),
    ("i1", tss.i1, sps.i1, lambda: RNG.uniform(-700, 700, 200), 1e-14),
    ("i0e", tss.i0e, sps.i0e, lambda: RNG.uniform(-50, 50, 200), 1e-15),
    ("i1e", tss.i1e, sps.i1e, lambda: RNG.uniform(-50, 50, 200), 1e-15),
    ("expit", tss.expit, sps.expit, lambda: RNG.uniform(-50, 50, 200), 1e-15),
    ("logit", tss.logit, sps.logit, lambda: RNG.uniform(-0.1, 1.1, 200), 1e-14),
    ("entr", tss.entr, sps.entr, lambda: RNG.uniform(-1, 5, 200), 1e-15),
    ("factorial", tss.factorial, lambda n: sps.factorial(n), lambda: RNG.uniform(-3, 30, 200),
     1e-13),
]


@pytest.mark.parametrize("name,fn,ref,make,rtol", UNARY, ids=[u[0] for u in UNARY])
def test_unary_against_scipy(name, fn, ref, make, rtol):
    x = make()
    _close(fn(x), ref(x), rtol)


@pytest.mark.parametrize("name,fn,ref,make,rtol", UNARY, ids=[u[0] for u in UNARY])
def test_unary_edge_values(name, fn, ref, make, rtol):
    x = EDGES
    want = ref(x)
    if name in ("gammaln",):
        want = np.where(x == -INF, INF, want)        # C99/JAX: lgamma(-inf) = +inf
    if name == "factorial":
        want = np.where(np.isnan(x), NAN, want)
    # gamma(171.5) = exp(706.57...): the exp of a rounded log costs |log| * 2**-53
    _close(fn(x), want, 2e-13 if name in ("gamma", "factorial") else max(rtol, 1e-13))


@pytest.mark.parametrize("name,fn,ref,make_a,make_b,rtol", [
    ("beta", tss.beta, sps.beta, lambda: RNG.uniform(0.1, 20, 100),
     lambda: RNG.uniform(-5, 20, 100), 1e-12),
    ("betaln", tss.betaln, sps.betaln, lambda: RNG.uniform(0.1, 50, 100),
     lambda: RNG.uniform(0.1, 50, 100), 1e-12),
    ("poch", tss.poch, sps.poch, lambda: RNG.uniform(0.1, 10, 100),
     lambda: RNG.uniform(-3, 5, 100), 1e-12),
    ("polygamma", tss.polygamma, sps.polygamma, lambda: RNG.integers(0, 6, 100).astype(float),
     lambda: RNG.uniform(0.1, 20, 100), 1e-13),
    ("zeta", tss.zeta, sps.zeta, lambda: RNG.uniform(1.01, 20, 100),
     lambda: RNG.uniform(0.1, 20, 100), 1e-14),
    ("xlogy", tss.xlogy, sps.xlogy, lambda: RNG.uniform(-2, 2, 100),
     lambda: RNG.uniform(0, 3, 100), 1e-15),
    ("xlog1py", tss.xlog1py, sps.xlog1py, lambda: RNG.uniform(-2, 2, 100),
     lambda: RNG.uniform(-1, 3, 100), 1e-15),
    ("rel_entr", tss.rel_entr, sps.rel_entr, lambda: RNG.uniform(-1, 2, 100),
     lambda: RNG.uniform(-1, 2, 100), 1e-14),
    ("kl_div", tss.kl_div, sps.kl_div, lambda: RNG.uniform(-1, 2, 100),
     lambda: RNG.uniform(-1, 2, 100), 1e-13),
    ("boxcox", tss.boxcox, sps.boxcox, lambda: RNG.uniform(0.1, 5, 100),
     lambda: RNG.uniform(-2, 2, 100), 1e-13),
    ("boxcox1p", tss.boxcox1p, sps.boxcox1p, lambda: RNG.uniform(-0.9, 5, 100),
     lambda: RNG.uniform(-2, 2, 100), 1e-13),
    ("gammainc", tss.gammainc, sps.gammainc, lambda: RNG.uniform(0, 30, 100),
     lambda: RNG.uniform(0, 40, 100), 1e-12),
    ("gammaincc", tss.gammaincc, sps.gammaincc, lambda: RNG.uniform(0, 30, 100),
     lambda: RNG.uniform(0, 40, 100), 1e-11),
    ("comb", tss.comb, sps.comb, lambda: RNG.integers(-2, 30, 100).astype(float),
     lambda: RNG.integers(-2, 30, 100).astype(float), 1e-12),
])
def test_binary_against_scipy(name, fn, ref, make_a, make_b, rtol):
    a, b = make_a(), make_b()
    _close(fn(a, b), ref(a, b), rtol)


def test_binary_special_values():
    _close(tss.beta(np.array([1.0, -0.5, 0.0, 2.0]), np.array([2.0, 1.5, 1.0, -1.0])),
           sps.beta(np.array([1.0, -0.5, 0.0, 2.0]), np.array([2.0, 1.5, 1.0, -1.0])), 1e-14)
    z, m = np.array([1.0, 0.0, -1.0, 2.5, -2.5]), np.array([0.0, 1.0, 2.0, -1.0, 0.5])
    _close(tss.poch(z, m), sps.poch(z, m), 1e-14)
    x, y = np.array([0.0, 0.0, 1.0, 0.0]), np.array([0.0, NAN, 2.0, -1.0])
    _close(tss.xlogy(x, y), sps.xlogy(x, y), 1e-15)
    _close(tss.xlog1py(np.array([0.0, 1.0]), np.array([-1.0, 1.0])),
           sps.xlog1py(np.array([0.0, 1.0]), np.array([-1.0, 1.0])), 1e-15)
    _close(tss.rel_entr(np.array([0.0, 1.0, 1.0, 0.0, NAN]), np.array([0.0, 0.0, 2.0, -1.0, 1.0])),
           sps.rel_entr(np.array([0.0, 1.0, 1.0, 0.0, NAN]), np.array([0.0, 0.0, 2.0, -1.0, 1.0])),
           1e-15)
    _close(tss.comb(5.0, 2.0, repetition=True), sps.comb(5.0, 2.0, repetition=True), 1e-13)
    a, x = np.array([0.0, 0.0, -1.0, 2.0, 1.0, 1.0]), np.array([1.0, 0.0, 1.0, 0.0, INF, -1.0])
    _close(tss.gammainc(a, x), sps.gammainc(a, x), 1e-15)
    _close(tss.gammaincc(a, x), sps.gammaincc(a, x), 1e-15)


def test_zero_results_have_scipys_sign():
    # ndtri(0.5) and spence(1) gave -0.0. (Odd functions keep the sign of a -0.0 input, as
    # IEEE and JAX do, where SciPy gives +0.0: erfinv(-0.0), i1(-0.0), so those are not here.)
    for fn, ref, x in [(tss.ndtri, sps.ndtri, [0.5]), (tss.spence, sps.spence, [1.0]),
                       (tss.entr, sps.entr, [0.0, 1.0, -0.0]), (tss.logit, sps.logit, [0.5])]:
        for dt in (np.float64, np.float32):
            xa = np.array(x, dt)
            for f in (fn, tracer.jit(fn)):
                got = np.asarray(f(xa))
                np.testing.assert_array_equal(got, ref(xa))
                np.testing.assert_array_equal(np.signbit(got), np.signbit(ref(xa)), str(fn))


def test_derivatives_at_the_ends_of_the_domain_are_infinite_as_jax():
    # JAX: grad(logit) is inf at 0 and 1, grad(entr) inf at 0, polygamma's and digamma's
    # derivative overflow to inf next to the pole at 0 (the compensated zeta sum gave NaN).
    for g in (tracer.vmap(tracer.grad(tss.logit)), tracer.jit(tracer.vmap(tracer.grad(tss.logit)))):
        _close(g(np.array([0.0, 0.25, 1.0])), np.array([INF, 1 / (0.25 * 0.75), INF]), 1e-15)
    _close(tracer.vmap(tracer.grad(tss.entr))(np.array([0.0, -0.0, 1.0, 2.0, INF])),
           np.array([INF, INF, -1.0, -np.log(2.0) - 1, -INF]), 1e-15)
    _close(tracer.vmap(tracer.grad(tss.digamma))(np.array([1e-300, 1e-160, 1.0])),
           np.array([INF, INF, np.pi ** 2 / 6]), 1e-14)
    n = np.array([1.0, 2.0, 3.0, 2.0])
    x = np.array([1e-300, 1e-200, -1e-300, 1e-100])
    _close(tss.polygamma(n, x), sps.polygamma(n, x), 1e-14)
    _close(tss.zeta(2.0, np.array([1e-300, -1e-300, 1.5])), sps.zeta(2.0, [1e-300, -1e-300, 1.5]),
           1e-14)


def test_tails_beyond_scipy():
    # ndtri keeps relative accuracy down to the subnormals (via erfcinv)
    _close(tss.ndtri(np.array([1e-300, 1e-10, 0.0, 1.0, -0.1, 1.1])),
           np.array([sps.ndtri(1e-300), sps.ndtri(1e-10), -INF, INF, NAN, NAN]), 1e-14)
    # log_ndtr stays finite where ndtr underflows; -x**2/2 dominates
    got = np.asarray(tss.log_ndtr(np.array([-1e3, -1e5])))
    assert np.all(np.isfinite(got))
    _close(got, sps.log_ndtr(np.array([-1e3, -1e5])), 1e-14)
    # against mpmath: the -x**2/2 term is exact here (SciPy squares a rounded x/sqrt 2)
    _close(tss.log_ndtr(np.array([-27.68497926493662, -15.0, -8.0])),
           np.array([-387.47016745881734, -116.1313848457117, -35.01343715991455]), 2e-16)


def test_betainc():
    a, b, x = RNG.uniform(0.1, 10, 100), RNG.uniform(0.1, 10, 100), RNG.uniform(0, 1, 100)
    _close(tss.betainc(a, b, x), sps.betainc(a, b, x), 1e-13)
    assert tss.betainc(1, 2, 0.5).dtype == np.float64       # ints promote
    check_grads(lambda x: tss.betainc(2.0, 3.0, x), (RNG.uniform(0.1, 0.9, 3),), order=1,
                modes=("fwd", "rev"))


def test_multigammaln_and_bernoulli():
    _close(tss.multigammaln(np.array([3.5, 10.0]), 3), sps.multigammaln(np.array([3.5, 10.0]), 3),
           1e-14)
    with pytest.raises(ValueError, match="multigammaln"):
        tss.multigammaln(3.0, 0)
    b = np.asarray(tss.bernoulli(12))
    exact = [1, Fraction(-1, 2), Fraction(1, 6), 0, Fraction(-1, 30), 0, Fraction(1, 42), 0,
             Fraction(-1, 30), 0, Fraction(5, 66), 0, Fraction(-691, 2730)]
    np.testing.assert_array_equal(b, [float(v) for v in exact])


def test_logsumexp_softmax():
    a = RNG.normal(size=(3, 4))
    b = RNG.uniform(-1, 1, (3, 4))
    _close(tss.logsumexp(a), sps.logsumexp(a), 1e-14)
    _close(tss.logsumexp(a, axis=1, keepdims=True), sps.logsumexp(a, axis=1, keepdims=True), 1e-14)
    got, sign = tss.logsumexp(a, axis=0, b=b, return_sign=True)
    want, wsign = sps.logsumexp(a, axis=0, b=b, return_sign=True)
    _close(got, want, 1e-13)
    np.testing.assert_array_equal(sign, wsign)
    _close(tss.softmax(a), sps.softmax(a), 1e-14)
    _close(tss.softmax(a, axis=1), sps.softmax(a, axis=1), 1e-14)
    _close(tss.log_softmax(a, axis=0), sps.log_softmax(a, axis=0), 1e-14)


def test_dtypes_and_promotion(x32):
    x = np.linspace(0.5, 3, 5, dtype=np.float32)
    assert tss.gammaln(x).dtype == np.float32
    assert tss.digamma(np.arange(1, 4)).dtype == np.float32     # ints -> default float
    assert tss.zeta(2.0, x).dtype == np.float32                  # weak scalar adopts f32
    np.testing.assert_allclose(tss.erfcx(x), sps.erfcx(x.astype(np.float64)), rtol=2e-7)


def test_errors_name_the_function():
    with pytest.raises(NotImplementedError, match="Riemann"):
        tss.zeta(2.0)
    with pytest.raises(NotImplementedError, match="exact"):
        tss.factorial(3, exact=True)
    with pytest.raises(TypeError, match="gammaln.*real"):
        tss.gammaln(np.array([1 + 1j]))


@pytest.mark.parametrize("fn,make", [
    (tss.gammaln, lambda: RNG.uniform(0.5, 4, 3)), (tss.gamma, lambda: RNG.uniform(0.5, 4, 3)),
    (tss.digamma, lambda: RNG.uniform(0.5, 4, 3)), (tss.erfinv, lambda: RNG.uniform(-0.8, 0.8, 3)),
    (tss.erfcinv, lambda: RNG.uniform(0.2, 1.8, 3)), (tss.ndtr, lambda: RNG.uniform(-3, 3, 3)),
    (tss.ndtri, lambda: RNG.uniform(0.1, 0.9, 3)),
    (tss.log_ndtr, lambda: np.array([-8.0, -0.5, 2.0, 7.0])),
    (tss.i0, lambda: RNG.uniform(-3, 3, 3)), (tss.i1e, lambda: RNG.uniform(-3, 3, 3)),
    (tss.logit, lambda: RNG.uniform(0.1, 0.9, 3)), (tss.entr, lambda: RNG.uniform(0.1, 2, 3)),
    (tss.erfcx, lambda: RNG.uniform(-1, 3, 3)),
])
def test_grads(fn, make):
    check_grads(fn, (make(),), order=2, modes=("fwd", "rev"))


def test_grads_binary():
    a, b = RNG.uniform(0.5, 3, 3), RNG.uniform(0.5, 3, 3)
    for fn in (tss.xlogy, tss.xlog1py, tss.betaln, tss.beta, tss.rel_entr, tss.kl_div,
               tss.gammainc, tss.gammaincc):
        check_grads(fn, (a, b), order=1, modes=("fwd", "rev"))
    # the custom derivatives: d/dy = x / y (0 at x == 0, y != 0; NaN at 0/0 as in JAX),
    # d/dx = log(y) also at x == 0 where the primal is the constant 0
    assert float(tracer.grad(lambda y: tss.xlogy(0.0, y))(1.5)) == 0.0
    assert np.isnan(float(tracer.grad(lambda y: tss.xlogy(0.0, y))(0.0)))
    g = tracer.grad(lambda x: tss.xlogy(x, 2.0))(0.0)
    assert float(g) == pytest.approx(np.log(2.0))
    check_grads(lambda x: tss.polygamma(1.0, x), (a,), order=2, modes=("fwd", "rev"))
    check_grads(lambda q: tss.zeta(3.0, q), (a,), order=1, modes=("fwd", "rev"))


def test_vmap_and_jit():
    x = RNG.uniform(0.1, 0.9, (4, 3))
    check_vmap(tss.ndtri, (x,), in_axes=(0,))
    check_vmap(tss.xlogy, (x, x.T.copy()), in_axes=(0, 1))
    check_vmap(lambda v: tss.logsumexp(v), (x,), in_axes=(1,))

    def f(x):
        return tss.gammaln(x + 1) + tss.log_ndtr(x) + tss.i0e(x) * tss.erfinv(x)

    # (lax.erf and log run libm under jit and NumPy/SciPy eagerly: an ulp apart)
    check_jit(f, (x,), atol=1e-15, rtol=1e-15)
