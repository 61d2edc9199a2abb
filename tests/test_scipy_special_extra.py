"""tracer.scipy.special's exponential, sine/cosine, Fresnel and Dawson integrals, Spence's
function, 1F1, 2F1, Owen's T, the Faddeeva function, bessel_jn and sph_harm_y
(lax/special_extra.py, lax/special_extra_kernels.py).

Accuracy of the kernel-backed functions is pinned in float64 ulps against recorded mpmath
values (``special_extra_reference_values.py``: the zeros, switch points, tiny and huge
arguments, random points of every regime) and against SciPy on dense grids where SciPy is
accurate; float32 against the float64 result rounded. Measured maxima on dense grids of
~3000 points per function (mpmath, 40 digits) are the ``ULP`` bounds below: dawsn 2,
expi 4, expn 5 (n <= 100), si 3, ci 4 for x < 2 (beyond: 2 ulp of the amplitude 1/x),
fresnel S 3 and C 4 at any x (SciPy: up to 2.7e7 ulp at x ~ 1e8), spence 3 (SciPy: 18).

Then special values against SciPy, derivatives (check_grads against finite differences,
the stated closed forms), vmap against a loop, jit against eager (bit for bit for the
kernels), and compositions (vmap of grad under jit, a value used twice).
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest
import scipy.special as sps

import tracer
import tracer.numpy as tnp
import tracer.scipy.special as tss
from tracer.test_util import check_grads, check_jit, check_vmap

sys.path.insert(0, os.path.dirname(__file__))
from special_extra_reference_values import EXPN, FRESNEL, UNARY  # noqa: E402

RNG = np.random.default_rng(2024)


@pytest.fixture(autouse=True)
def _fresh_rng():
    # every test draws the same numbers whatever ran before it (xdist reorders tests)
    global RNG
    RNG = np.random.default_rng(2024)
INF, NAN = np.inf, np.nan


def ulp_error(got, ref, dtype=np.float64):
    """|got - ref| in ulps of ``dtype`` at ``ref``; 0 where both are equal, both NaN, or
    ``ref`` rounds to the same infinity in ``dtype``."""
    got = np.asarray(got, np.float64)
    ref = np.asarray(ref, np.float64)
    with np.errstate(all="ignore"):
        ref_d = ref.astype(dtype)
        spacing = np.spacing(np.abs(ref_d)).astype(np.float64)
        err = np.abs(got - ref) / spacing
    same = (got == ref) | (np.isnan(got) & np.isnan(ref)) | (np.isinf(ref_d) & (got == ref_d))
    return np.where(same, 0.0, err)


def _np(x):
    return np.asarray(x)


UNARY_FN = {
    "dawsn": tss.dawsn, "expi": tss.expi, "spence": tss.spence,
    "si": lambda x: tss.sici(x)[0], "ci": lambda x: tss.sici(x)[1],
}
ULP = {"dawsn": 2, "expi": 4, "si": 3, "ci": 4, "spence": 3, "fresnel_s": 3, "fresnel_c": 4,
       "expn": 5}


# ================================ accuracy against mpmath ===============================

@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_against_mpmath(name):
    x, ref = np.array(UNARY[name]).T
    got = _np(UNARY_FN[name](x))
    err = ulp_error(got, ref)
    if name == "ci":
        # beyond 2 the error is absolute, about an ulp of the oscillation's amplitude
        far = x >= 2
        assert np.all(np.abs(got[far] - ref[far]) <= 2 * np.spacing(1 / x[far])), x[far]
        err = err[~far]
    assert err.max() <= ULP[name], (name, err.max(), x[np.argmax(err)])


def test_fresnel_against_mpmath():
    x, s_ref, c_ref = np.array(FRESNEL).T
    s, c = tss.fresnel(x)
    assert ulp_error(s, s_ref).max() <= ULP["fresnel_s"]
    assert ulp_error(c, c_ref).max() <= ULP["fresnel_c"]
    s, c = tss.fresnel(-x)                       # odd
    np.testing.assert_array_equal(_np(s), -_np(tss.fresnel(x)[0]))
    np.testing.assert_array_equal(_np(c), -_np(tss.fresnel(x)[1]))


def test_expn_against_mpmath():
    n, x, ref = np.array(EXPN).T
    err = ulp_error(tss.expn(n, x), ref)
    assert err.max() <= ULP["expn"], (err.max(), n[np.argmax(err)], x[np.argmax(err)])
    one = n == 1
    assert ulp_error(tss.exp1(x[one]), ref[one]).max() <= 3


# ========================= against SciPy on dense grids, float32 ========================

# name, ours, SciPy's, grid where SciPy is itself accurate, rtol
GRIDS = [
    ("dawsn", tss.dawsn, sps.dawsn, lambda: RNG.uniform(-15, 15, 500), 4e-15),
    ("exp1", tss.exp1, sps.exp1, lambda: RNG.uniform(0, 60, 500), 4e-15),
    # (SciPy's expi loses relative accuracy next to its zero at 0.3725)
    ("expi", tss.expi, sps.expi, lambda: np.concatenate([RNG.uniform(-60, 0.3, 250),
                                                        RNG.uniform(0.45, 700, 250)]), 4e-15),
    ("si", lambda x: tss.sici(x)[0], lambda x: sps.sici(x)[0],
     lambda: RNG.uniform(-40, 40, 500), 2e-15),
    ("spence", tss.spence, sps.spence, lambda: RNG.uniform(0, 20, 500), 5e-15),
    # (SciPy rounds the phase pi x^2 / 2: keep x small)
    ("fresnel_s", lambda x: tss.fresnel(x)[0], lambda x: sps.fresnel(x)[0],
     lambda: RNG.uniform(-4, 4, 500), 4e-15),
    ("fresnel_c", lambda x: tss.fresnel(x)[1], lambda x: sps.fresnel(x)[1],
     lambda: RNG.uniform(-4, 4, 500), 4e-15),
]


@pytest.mark.parametrize("name,fn,ref,make,rtol", GRIDS, ids=[g[0] for g in GRIDS])
def test_against_scipy(name, fn, ref, make, rtol):
    x = make()
    np.testing.assert_allclose(_np(fn(x)), ref(x), rtol=rtol, atol=0)


def test_ci_and_expn_against_scipy():
    x = RNG.uniform(0, 40, 500)
    x = x[np.abs(sps.sici(x)[1]) > 0.05]         # (relative accuracy is lost at the zeros)
    np.testing.assert_allclose(_np(tss.sici(x)[1]), sps.sici(x)[1], rtol=4e-14)
    n = RNG.integers(0, 30, 300).astype(float)
    x = RNG.uniform(0, 50, 300)
    np.testing.assert_allclose(_np(tss.expn(n, x)), sps.expn(n, x), rtol=5e-15, atol=0)


@pytest.mark.parametrize("name,fn,ref,make,rtol", GRIDS, ids=[g[0] for g in GRIDS])
def test_float32(name, fn, ref, make, rtol):
    x = make().astype(np.float32)
    got = fn(x)
    assert got.dtype == np.float32
    want = _np(fn(x.astype(np.float64)))          # accurate to a few float64 ulps
    assert ulp_error(got, want, np.float32).max() <= 1.0
    assert tss.expn(np.float32(2), x).dtype == np.float32
    assert tss.sici(x)[1].dtype == tss.fresnel(x)[0].dtype == np.float32


# ==================================== special values ===================================

EDGES = np.array([0.0, -0.0, -1.0, -1e-300, 1e-300, 0.5, 1.0, 2.0, 10.0, 700.0, 1e10, 1e300,
                  INF, -INF, NAN])


@pytest.mark.parametrize("name,fn,ref", [
    ("dawsn", tss.dawsn, sps.dawsn), ("exp1", tss.exp1, sps.exp1),
    ("expi", tss.expi, sps.expi), ("spence", tss.spence, sps.spence),
    ("si", lambda x: tss.sici(x)[0], lambda x: sps.sici(x)[0]),
    ("ci", lambda x: tss.sici(x)[1], lambda x: sps.sici(x)[1]),
    ("fresnel_s", lambda x: tss.fresnel(x)[0], lambda x: sps.fresnel(x)[0]),
    ("fresnel_c", lambda x: tss.fresnel(x)[1], lambda x: sps.fresnel(x)[1]),
])
def test_edge_values_follow_scipy(name, fn, ref):
    got, want = _np(fn(EDGES)), ref(EDGES)
    if name.startswith("fresnel"):
        # SciPy's S(1e300) is NaN (the limit is 1/2); its phase pi x^2 / 2 is rounded at
        # x = 1e10 (and 700): compare at its accuracy
        want = np.where(EDGES == 1e300, 0.5, want)
        np.testing.assert_allclose(got, want, rtol=1e-9, equal_nan=True)
    else:
        np.testing.assert_allclose(got, want, rtol=5e-15, atol=0, equal_nan=True)
    fin = ~np.isfinite(want)
    np.testing.assert_array_equal(got[fin], want[fin])


def test_special_values():
    # the signs of odd functions at -0, Ei beyond SciPy's overflow, Ci(-inf)
    assert np.signbit(_np(tss.dawsn(-0.0))) and np.signbit(_np(tss.sici(-0.0)[0]))
    assert float(tss.fresnel(1e300)[0]) == 0.5                  # (SciPy: NaN)
    assert float(tss.expi(712.0)) == pytest.approx(2.3216800841052115e+306, rel=1e-15)
    assert np.isinf(float(tss.expi(717.0)))
    assert np.isnan(float(tss.sici(-INF)[1])) and float(tss.sici(-INF)[0]) == -np.pi / 2
    assert float(tss.spence(0.0)) == pytest.approx(np.pi ** 2 / 6, rel=1e-16)
    assert float(tss.spence(1.0)) == 0.0
    # E_n at 0, non-integer and negative orders, infinities (as SciPy)
    n = np.array([0.0, 1.0, 2.0, 5.0, 2.5, 0.5, -1.0, 2.0, 3.0, NAN, 1.0])
    x = np.array([0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, INF, -1.0, 1.0, NAN])
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning, match="truncated"):
        want = sps.expn(n, x)
    np.testing.assert_allclose(_np(tss.expn(n, x)), want, rtol=5e-15, equal_nan=True)
    assert tss.expn(2, 1).dtype == np.float64            # ints promote


# ================================ derivatives ===========================================

@pytest.mark.parametrize("fn,make", [
    (tss.dawsn, lambda: RNG.uniform(-5, 5, 3)),
    (tss.exp1, lambda: RNG.uniform(0.2, 5, 3)),
    (tss.expi, lambda: np.array([-3.0, 0.3, 2.0, 30.0])),
    (tss.spence, lambda: np.array([0.2, 0.9, 1.7, 5.0])),
    (lambda x: tss.sici(x)[0], lambda: RNG.uniform(-10, 10, 3)),
    (lambda x: tss.sici(x)[1], lambda: RNG.uniform(0.2, 10, 3)),
    (lambda x: tss.fresnel(x)[0], lambda: RNG.uniform(-3, 3, 3)),
    (lambda x: tss.fresnel(x)[1], lambda: RNG.uniform(-3, 3, 3)),
    (lambda x: tss.expn(3, x), lambda: RNG.uniform(0.2, 5, 3)),
    (lambda x: tss.expn(0, x), lambda: RNG.uniform(0.2, 5, 3)),
])
def test_grads(fn, make):
    check_grads(fn, (make(),), order=2, modes=("fwd", "rev"))


def test_closed_form_derivatives():
    x = np.array([0.3, 1.0, 2.5, 7.0])
    g = lambda f: _np(tracer.vmap(tracer.grad(f))(x))     # noqa: E731
    np.testing.assert_allclose(g(tss.dawsn), 1 - 2 * x * sps.dawsn(x), rtol=1e-13)
    np.testing.assert_allclose(g(tss.expi), np.exp(x) / x, rtol=1e-13)
    np.testing.assert_allclose(g(tss.exp1), -np.exp(-x) / x, rtol=1e-13)
    np.testing.assert_allclose(g(lambda t: tss.expn(4, t)), -sps.expn(3, x), rtol=1e-13)
    xs = np.where(x == 1, 2.0, x)
    np.testing.assert_allclose(g(tss.spence), np.where(x == 1, -1, np.log(xs) / (1 - xs)),
                               rtol=1e-13)
    np.testing.assert_allclose(g(lambda t: tss.sici(t)[0]), np.sin(x) / x, rtol=1e-13)
    np.testing.assert_allclose(g(lambda t: tss.fresnel(t)[1]), np.cos(np.pi * x * x / 2),
                               rtol=1e-13)
    # the removable points: Si'(0) = 1, spence'(1) = -1
    assert float(tracer.grad(lambda t: tss.sici(t)[0])(0.0)) == 1.0
    assert float(tracer.grad(tss.spence)(1.0)) == -1.0
    with pytest.raises(ValueError, match="expn.*order n"):
        tracer.grad(tss.expn)(2.0, 1.0)


def _spence_derivatives(x):
    """spence'(x) = log(x)/(1 - x) and its next two derivatives, by their closed forms in
    150-digit decimals (each loses digits to cancellation next to 1, the decimals do not
    run out)."""
    from decimal import Decimal, localcontext
    with localcontext() as ctx:
        ctx.prec = 150
        X, one = Decimal(x), Decimal(1)
        if X == one:
            return -1.0, 0.5, -2 / 3
        L = X.ln()
        n = one / X - one + L
        h2 = ((one / X - one / X ** 2) * (one - X) + 2 * n) / (one - X) ** 3
        return float(L / (one - X)), float(n / (one - X) ** 2), float(h2)


def test_spence_higher_derivatives_next_to_one():
    """The second and third derivatives of spence at and next to x = 1, where its first
    derivative log(x)/(1 - x) is 0/0: differentiating that quotient gave 0 at 1 and 2.0
    at 1 - 2**-53 for the second (0.5 is right). Eager, jit and vmap, on both sides of
    the point where the rule's series gives way to the quotient (|x - 1| = 1/64)."""
    x = np.array([1 - 2 ** -53, 1.0, 1 + 2 ** -52, 1 - 1e-3, 1 + 1e-8, 1 - 0.0157, 1.0155,
                  1.0157, 0.5, 2.0, 40.0])
    want = np.array([_spence_derivatives(v) for v in x])
    d1 = tracer.grad(tss.spence)
    d2 = tracer.grad(d1)
    d3 = tracer.grad(d2)
    for k, d in enumerate((d1, d2, d3)):
        rtol = (1e-15, 1e-13, 5e-12)[k]
        np.testing.assert_allclose([float(d(v)) for v in x], want[:, k], rtol=rtol)
        np.testing.assert_allclose(_np(tracer.jit(tracer.vmap(d))(x)), want[:, k], rtol=rtol)
    assert float(d2(np.float32(1.0))) == 0.5 and float(d2(np.float32(1 - 2 ** -24))) == \
        pytest.approx(0.5, rel=1e-6)


def test_scipy_backed_values_and_grads():
    a, b, x = RNG.uniform(0.5, 3, 4), RNG.uniform(0.5, 3, 4), RNG.uniform(-3, 3, 4)
    np.testing.assert_array_equal(_np(tss.hyp1f1(a, b, x)), sps.hyp1f1(a, b, x))
    check_grads(tss.hyp1f1, (a, b, x), order=1, modes=("fwd", "rev"), rtol=1e-5)
    c, z = RNG.uniform(1, 4, 4), np.array([-3.0, -0.4, 0.3, 0.8])
    np.testing.assert_array_equal(_np(tss.hyp2f1(a, b, c, z)), sps.hyp2f1(a, b, c, z))
    check_grads(tss.hyp2f1, (a, b, c, z), order=1, modes=("fwd", "rev"), rtol=1e-5)
    h, aa = RNG.uniform(-3, 3, 4), RNG.uniform(-3, 3, 4)
    np.testing.assert_array_equal(_np(tss.owens_t(h, aa)), sps.owens_t(h, aa))
    check_grads(tss.owens_t, (h, aa), order=2, modes=("fwd", "rev"))
    # d/dx 1F1 in closed form
    gx = _np(tracer.vmap(tracer.grad(tss.hyp1f1, argnums=2))(a, b, x))
    np.testing.assert_allclose(gx, a / b * sps.hyp1f1(a + 1, b + 1, x), rtol=1e-14)
    # the parameter derivatives are NaN outside their series' domain (x >= 1 for 2F1)
    assert np.isnan(float(tracer.grad(tss.hyp2f1)(1.0, 1.0, 3.0, 1.5)))
    assert tss.hyp1f1(np.float32(1), np.float32(2), np.float32(0.5)).dtype == np.float32


def test_wofz():
    z = RNG.normal(size=6) * 3 + 1j * RNG.normal(size=6) * 3
    w = tss.wofz(z)
    assert w.dtype == np.complex128
    np.testing.assert_array_equal(_np(w), sps.wofz(z))
    assert tss.wofz(np.float32(1.0)).dtype == np.complex64
    np.testing.assert_array_equal(_np(tss.wofz(np.array([1.0, -2.0]))),
                                  sps.wofz(np.array([1.0, -2.0]) + 0j))
    # holomorphic: jvp along a complex tangent equals the difference quotient
    t = 0.3 - 0.7j
    _, dw = tracer.jvp(tss.wofz, (z,), (np.full_like(z, t),))
    h = 1e-6
    fd = (sps.wofz(z + h * t) - sps.wofz(z - h * t)) / (2 * h)
    np.testing.assert_allclose(_np(dw), fd, rtol=1e-7, atol=1e-9)   # FD rounding ~eps/h
    np.testing.assert_allclose(_np(dw), (-2 * z * sps.wofz(z) + 2j / np.sqrt(np.pi)) * t,
                               rtol=1e-14)


# ============================= bessel_jn, sph_harm_y ====================================

def test_bessel_jn():
    z = np.concatenate([RNG.uniform(-20, 20, 40), [0.0, 1e-300, 1e-10, -3.0]])
    j = _np(tss.bessel_jn(z, v=6))
    assert j.shape == (7, z.size)
    want = sps.jv(np.arange(7)[:, None], z)
    np.testing.assert_allclose(j, want, rtol=1e-12, atol=2e-15)
    assert np.all(np.isfinite(j))                         # no overflow at tiny z
    assert tss.bessel_jn(np.float32(2.0), v=1).shape == (2,)
    assert tss.bessel_jn(np.ones((2, 3), np.float32), v=2).dtype == np.float32
    check_grads(lambda t: tss.bessel_jn(t, v=3, n_iter=24), (RNG.uniform(0.5, 6, 3),),
                order=2, modes=("fwd", "rev"))
    # J0' = -J1 (grad of a sum: vmap(grad) of it trips a batching bug of add_any)
    d = _np(tracer.grad(lambda t: tnp.sum(tss.bessel_jn(t, v=1)[0]))(z[:5]))
    np.testing.assert_allclose(d, -sps.jv(1, z[:5]), rtol=1e-11, atol=1e-14)
    with pytest.raises(ValueError, match="bessel_jn"):
        tss.bessel_jn(1.0, v=-1)
    with pytest.raises(TypeError, match="bessel_jn"):
        tss.bessel_jn(1.0, v=1.5)
    with pytest.raises(ValueError, match="complex"):
        tss.bessel_jn(1.0 + 1j, v=1)


def test_sph_harm_y():
    n = RNG.integers(0, 9, 60)
    m = RNG.integers(-10, 11, 60)                         # |m| > n included: 0
    theta = np.concatenate([RNG.uniform(0, np.pi, 57), [0.0, np.pi, np.pi / 2]])
    phi = RNG.uniform(0, 2 * np.pi, 60)
    got = _np(tss.sph_harm_y(n, m, theta, phi))
    assert got.dtype == np.complex128
    np.testing.assert_allclose(got, sps.sph_harm_y(n, m, theta, phi), rtol=1e-13, atol=1e-15)
    # broadcasting, scalars, float32, negative degree (0, as SciPy)
    g = _np(tss.sph_harm_y(np.arange(4)[:, None], 1, 0.7, np.array([0.1, 0.2])))
    np.testing.assert_allclose(g, sps.sph_harm_y(np.arange(4)[:, None], 1, 0.7,
                                                 np.array([0.1, 0.2])), rtol=1e-13, atol=1e-16)
    assert tss.sph_harm_y(2, 1, np.float32(0.3), np.float32(0.2)).dtype == np.complex64
    assert complex(tss.sph_harm_y(-1, 0, 0.5, 0.1)) == 0
    # n_max clips the degree (as JAX); traced n needs it
    np.testing.assert_allclose(_np(tss.sph_harm_y(np.array([5]), np.array([1]), 0.4, 0.3,
                                                  n_max=3)),
                               sps.sph_harm_y(3, 1, 0.4, 0.3), rtol=1e-14)
    f = tracer.jit(lambda nn, t: tss.sph_harm_y(nn, 1, t, 0.3, n_max=4))
    np.testing.assert_allclose(_np(f(np.array([2, 4]), np.array([0.5, 1.0]))),
                               sps.sph_harm_y(np.array([2, 4]), 1, np.array([0.5, 1.0]), 0.3),
                               rtol=1e-14)
    with pytest.raises(NotImplementedError, match="diff_n"):
        tss.sph_harm_y(1, 0, 0.5, 0.1, diff_n=1)
    # derivatives in theta and phi: d/dphi Y = i m Y
    re = lambda t, p: tnp.real(tss.sph_harm_y(3, 2, t, p))      # noqa: E731
    check_grads(re, (np.array([0.4, 1.1]), np.array([0.3, 2.0])), order=1,
                modes=("fwd", "rev"))
    dphi = _np(tracer.jvp(lambda p: tss.sph_harm_y(3, 2, 0.8, p), (0.5,), (1.0,))[1])
    np.testing.assert_allclose(dphi, 2j * sps.sph_harm_y(3, 2, 0.8, 0.5), rtol=1e-13)


# ================================ vmap, jit, compositions ================================

def test_vmap():
    x = RNG.uniform(0.1, 4, (3, 4))
    for fn in (tss.dawsn, tss.expi, tss.spence, tss.sici, tss.fresnel):
        check_vmap(fn, (x,), in_axes=(1,))
    n = np.array([0.0, 1.0, 3.0])
    check_vmap(tss.expn, (n, x), in_axes=(0, 0))
    check_vmap(lambda t: tss.expn(2.0, t), (x,), in_axes=(1,))
    check_vmap(tss.hyp1f1, (x, x + 1, x.T.copy()), in_axes=(0, 0, 1))
    check_vmap(tss.owens_t, (x, x[0]), in_axes=(0, None))
    check_vmap(lambda t: tss.bessel_jn(t, v=2), (x,), in_axes=(1,))


def test_jit_matches_eager_bit_for_bit():
    x = np.concatenate([RNG.uniform(-10, 30, 40), EDGES])
    xp = np.abs(x)
    for fn in (tss.dawsn, tss.exp1, tss.expi, tss.spence, tss.sici, tss.fresnel,
               lambda t: tss.expn(3.0, t)):
        check_jit(fn, (x,))
    check_jit(tss.dawsn, (x[np.abs(x) < 1e30].astype(np.float32),))
    check_jit(tss.hyp1f1, (xp[:10], xp[:10] + 1, x[:10]))          # host step
    check_jit(tss.wofz, (x[:10] + 1j,))
    check_jit(lambda t: tss.bessel_jn(t, v=3), (x[:10],), rtol=1e-15, atol=1e-300)


def test_compositions():
    x = RNG.uniform(0.5, 3, 5)

    def f(t):
        d = tss.dawsn(t)
        si, ci = tss.sici(t)
        return d * d + tss.expi(t) * si - ci + tss.expn(2, t) * tss.spence(t)

    g = tracer.jit(tracer.vmap(tracer.grad(f)))(x)
    h = 1e-6
    fd = (_np(f(x + h)) - _np(f(x - h))) / (2 * h)
    np.testing.assert_allclose(_np(g), fd, rtol=1e-7)
    # control flow under vmap: a switch between two of them
    sel = tracer.vmap(lambda t: tracer.lax.cond(t > 1.5, tss.dawsn, tss.expi, t))(x)
    np.testing.assert_array_equal(_np(sel), np.where(x > 1.5, _np(tss.dawsn(x)),
                                                     _np(tss.expi(x))))


def test_errors_name_the_function():
    for fn in (tss.dawsn, tss.expi, tss.spence, tss.exp1, tss.sici, tss.fresnel):
        with pytest.raises(TypeError, match="real"):
            fn(np.array([1 + 1j]))
    with pytest.raises(TypeError, match="hyp1f1.*real"):
        tss.hyp1f1(1.0, 2.0, 1j)
