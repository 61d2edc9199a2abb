"""Element-wise special functions beyond CHLO's set, serving ``tracer.scipy.special``: the
exponential integrals E_n and Ei, Dawson's integral, the sine/cosine and Fresnel
integrals, Spence's function, the confluent and Gauss hypergeometric functions 1F1 and
2F1, Owen's T function and the Faddeeva function w(z). Not part of ``jax.lax``; the
public names are ``tracer.scipy.special``'s.

Two kinds of primitive:

- ``expn``, ``expi``, ``dawsn``, ``si``, ``ci``, ``fresnel_s``, ``fresnel_c`` and
  ``spence`` run our own scalar kernels (``lax/special_extra_kernels.py``) exactly as the
  CHLO special functions of ``lax/special.py`` do: eagerly through a Numba ufunc, under
  jit inside the fused loops (``lowering/special_extra.py``), the same bits both ways.
  Accuracy (float64, max error against mpmath on dense grids including the zeros, the
  algorithm switch points, tiny, huge and non-finite arguments): 5 ulp for expn (3 ulp
  for n = 0, 1; SciPy: up to 272 at n = 100), 4 for expi, 2 for dawsn, 3 for si, 4 for
  ci below 2 (beyond, 2 ulp of the oscillation's amplitude 1/x: relative accuracy is
  lost next to the zeros of Ci, as in SciPy), 3 and 4 for fresnel_s and fresnel_c at
  any x (SciPy's error grows like x**2), 3 for spence; float32 results are the float64
  values rounded once (within 1 float32 ulp).
- ``hyp1f1``, ``hyp2f1``, ``owens_t`` and ``wofz`` evaluate SciPy's ``scipy.special``
  functions (the reference, at SciPy's accuracy) and run as host steps under jit. Their
  derivatives in the parameters a, b, c of 1F1 and 2F1 are the primitives
  ``hyp1f1_grad`` and ``hyp2f1_grad`` (NumPy series, not differentiable further).

Special values follow SciPy and are listed in the wrappers' docstrings in
``tracer/scipy/special.py``.
"""
from __future__ import annotations

import numpy as np

from lax import elementwise as ew
from lax.elementwise import _bind_binary, _bind_unary, _const
from lax.shapes import full_like
from lax.utils import (_complex, _float, promote_weak_scalars, scipy_special, standard_naryop,
                       standard_unop)
from tracer.interpreters.ad import defjvp


def _kernel_impl(name):
    """Eager impl running the Numba-compiled scalar kernel (imported lazily, so that
    ``import tracer`` does not import Numba)."""

    def impl(*args):
        from lax import special_extra_kernels  # noqa: F401  (registers the kernels)
        from lax import special_kernels
        return special_kernels.apply(name, *args)

    impl.__name__ = f"{name}_impl"
    return impl


def _bind_n(p, *args, **params):
    args = promote_weak_scalars(p.name, *args)
    return p.bind(*args, **params)


def _one(x):
    return _const(x, 1)


def _safe(pred, x, value):
    """x where pred, else a harmless ``value`` (so that a rule's unselected branch never
    makes NaN or inf that a cotangent of zero would turn into NaN)."""
    return ew.select(pred, x, full_like(x, value))


# ================================= exponential integrals ==============================

def expn(n, x):
    """Element-wise generalized exponential integral E_n(x) = int_1^inf e^(-x t) t^-n dt
    (SciPy's ``expn``). ``n`` and ``x`` share a floating dtype; ``n`` is truncated to an
    integer (as SciPy). NaN for n < 0 or x < 0; E_n(0) = 1/(n - 1) for n > 1 and +inf
    for n <= 1; 0 at x = +inf. Not differentiable in n (ValueError); d/dx E_n = -E_(n-1)
    (E_(-1)(x) = e^-x (1 + x) / x^2)."""
    return _bind_binary(expn_p, n, x)


def _expn_grad_n(g, n, x):
    raise ValueError("expn: the derivative with respect to the order n is not defined (n "
                     "is an integer); differentiate with respect to x only")


def _expn_grad_x(g, n, x):
    one = _one(x)
    lower = ew.neg(expn(ew.sub(n, one), x))
    # n = 0 (truncated): -d/dx e^-x / x = -e^-x (1 + x) / x^2
    zero_order = ew.neg(ew.div(ew.mul(ew.exp(ew.neg(x)), ew.add(one, x)), ew.square(x)))
    return ew.mul(g, ew.select(ew.ge(n, one), lower, zero_order))


expn_p = standard_naryop("expn", _kernel_impl("expn"), _float)
defjvp(expn_p, _expn_grad_n, _expn_grad_x)


def expi(x):
    """Element-wise exponential integral Ei(x) = -PV int_(-x)^inf e^-t / t dt (SciPy's
    ``expi``): -E1(-x) for x < 0, -inf at 0, -0 at -inf, +inf at +inf; finite up to
    x ~ 716.7, where SciPy's overflows from 709.8. Derivative e^x / x."""
    return _bind_unary(expi_p, x)


expi_p = standard_unop("expi", _kernel_impl("expi"), _float)
defjvp(expi_p, lambda g, x: ew.mul(g, ew.div(ew.exp(x), x)))


# ================================= Dawson, sici, fresnel ==============================

def dawsn(x):
    """Element-wise Dawson's integral D(x) = e^(-x^2) int_0^x e^(t^2) dt (SciPy's
    ``dawsn``): odd, ±0 at ±inf. Derivative 1 - 2 x D(x)."""
    return _bind_unary(dawsn_p, x)


dawsn_p = standard_unop("dawsn", _kernel_impl("dawsn"), _float)
defjvp(dawsn_p, lambda g, ans, x: ew.mul(g, ew.sub(_one(x), ew.mul(_const(x, 2),
                                                                    ew.mul(x, ans)))),
       with_ans=True)


def si(x):
    """Element-wise sine integral Si(x) = int_0^x sin t / t dt (SciPy's ``sici(x)[0]``):
    odd, ±pi/2 at ±inf. Derivative sin x / x (1 at 0)."""
    return _bind_unary(si_p, x)


def _si_jvp(g, x):
    nz = ew.ne(x, _const(x, 0))
    sx = _safe(nz, x, 1)
    return ew.mul(g, ew.select(nz, ew.div(ew.sin(sx), sx), full_like(x, 1)))


si_p = standard_unop("si", _kernel_impl("si"), _float)
defjvp(si_p, _si_jvp)


def ci(x):
    """Element-wise cosine integral Ci(x) = gamma + log x + int_0^x (cos t - 1)/t dt
    (SciPy's ``sici(x)[1]``): Ci(-x) = Ci(x) (the real part of the principal value, as
    SciPy), -inf at ±0, 0 at +inf, NaN at -inf. Derivative cos x / x."""
    return _bind_unary(ci_p, x)


ci_p = standard_unop("ci", _kernel_impl("ci"), _float)
defjvp(ci_p, lambda g, x: ew.mul(g, ew.div(ew.cos(x), x)))


def fresnel_s(x):
    """Element-wise Fresnel integral S(x) = int_0^x sin(pi t^2 / 2) dt (SciPy's
    ``fresnel(x)[0]``): odd, ±1/2 at ±inf. Derivative sin(pi x^2 / 2)."""
    return _bind_unary(fresnel_s_p, x)


def fresnel_c(x):
    """Element-wise Fresnel integral C(x) = int_0^x cos(pi t^2 / 2) dt (SciPy's
    ``fresnel(x)[1]``): odd, ±1/2 at ±inf. Derivative cos(pi x^2 / 2)."""
    return _bind_unary(fresnel_c_p, x)


def _half_pi_square(x):
    return ew.mul(_const(x, np.pi / 2), ew.square(x))


fresnel_s_p = standard_unop("fresnel_s", _kernel_impl("fresnel_s"), _float)
defjvp(fresnel_s_p, lambda g, x: ew.mul(g, ew.sin(_half_pi_square(x))))
fresnel_c_p = standard_unop("fresnel_c", _kernel_impl("fresnel_c"), _float)
defjvp(fresnel_c_p, lambda g, x: ew.mul(g, ew.cos(_half_pi_square(x))))


# ========================================= spence =====================================

def spence(x):
    """Element-wise Spence's function int_1^x log t / (1 - t) dt = Li2(1 - x) (SciPy's
    ``spence``): pi^2/6 at 0, 0 at 1, NaN for x < 0 and at +inf (as SciPy). Derivative
    log(x) / (1 - x), -1 at x = 1."""
    return _bind_unary(spence_p, x)


def _log_over_one_minus(x):
    """log(x) / (1 - x), -1 at x = 1, written so that its own derivatives are accurate
    near 1 too: there (|x - 1| < 1/64) it is the series -(1 - u/2 + u^2/3 - ...) of
    u = x - 1 (10 terms: below float64 rounding), elsewhere the quotient; each branch
    sees a harmless operand where it is not selected. (Differentiating the quotient at
    x = 1 - 2**-53 gave 2.0 for the second derivative of spence, 0.5 being right.)"""
    one = _one(x)
    u = ew.sub(x, one)
    near = ew.lt(ew.abs(u), _const(x, 1 / 64))
    us = _safe(near, u, 0)
    p = _const(x, -1 / 10)
    for k in range(8, -1, -1):
        p = ew.add(_const(x, (-1) ** k / (k + 1)), ew.mul(us, p))
    xf = ew.select(near, full_like(x, 2), x)
    far = ew.div(ew.log(xf), ew.sub(one, xf))
    return ew.select(near, ew.neg(p), far)


def _spence_jvp(g, x):
    return ew.mul(g, _log_over_one_minus(x))


spence_p = standard_unop("spence", _kernel_impl("spence"), _float)
defjvp(spence_p, _spence_jvp)


# ============================ SciPy-evaluated primitives ==============================

def _scipy_impl(fname):
    """Eager impl calling ``scipy.special.<fname>`` in the operands' dtype (float16 in
    float32, rounded on the way out: SciPy has no float16 loops)."""

    def impl(*args):
        dt = np.result_type(*args)
        work = np.float32 if dt == np.float16 else dt
        with np.errstate(all="ignore"):
            out = scipy_special(fname)(*[np.asarray(a, work) for a in args])
        return np.asarray(out, dt)

    impl.__name__ = f"{fname}_impl"
    return impl


def hyp1f1(a, b, x):
    """Element-wise confluent hypergeometric function 1F1(a; b; x) = sum_k (a)_k / (b)_k
    x^k / k! (Kummer's M; SciPy's ``hyp1f1``, whose values these are). Floating operands
    of one dtype. Derivatives: d/dx = a/b 1F1(a + 1; b + 1; x); d/da and d/db by
    ``hyp1f1_grad``."""
    return _bind_n(hyp1f1_p, a, b, x)


hyp1f1_p = standard_naryop("hyp1f1", _scipy_impl("hyp1f1"), _float, nargs=3)
defjvp(hyp1f1_p,
       lambda g, a, b, x: ew.mul(g, hyp1f1_grad(a, b, x, argnum=0)),
       lambda g, a, b, x: ew.mul(g, hyp1f1_grad(a, b, x, argnum=1)),
       lambda g, a, b, x: ew.mul(g, ew.mul(ew.div(a, b),
                                           hyp1f1(ew.add(a, _one(a)), ew.add(b, _one(b)), x))))


def hyp2f1(a, b, c, x):
    """Element-wise Gauss hypergeometric function 2F1(a, b; c; x) = sum_k (a)_k (b)_k /
    (c)_k x^k / k! (SciPy's ``hyp2f1``, whose values these are, analytically continued
    to x < -1; +inf or NaN beyond 1 as SciPy). Floating operands of one dtype.
    Derivatives: d/dx = ab/c 2F1(a + 1, b + 1; c + 1; x); d/da, d/db, d/dc by
    ``hyp2f1_grad`` (x < 1)."""
    return _bind_n(hyp2f1_p, a, b, c, x)


def _hyp2f1_grad_x(g, a, b, c, x):
    one = _one(x)
    return ew.mul(g, ew.mul(ew.div(ew.mul(a, b), c),
                            hyp2f1(ew.add(a, one), ew.add(b, one), ew.add(c, one), x)))


hyp2f1_p = standard_naryop("hyp2f1", _scipy_impl("hyp2f1"), _float, nargs=4)
defjvp(hyp2f1_p,
       lambda g, a, b, c, x: ew.mul(g, hyp2f1_grad(a, b, c, x, argnum=0)),
       lambda g, a, b, c, x: ew.mul(g, hyp2f1_grad(a, b, c, x, argnum=1)),
       lambda g, a, b, c, x: ew.mul(g, hyp2f1_grad(a, b, c, x, argnum=2)),
       _hyp2f1_grad_x)


def owens_t(h, a):
    """Element-wise Owen's T function T(h, a) = 1/(2 pi) int_0^a exp(-h^2 (1 + t^2) / 2)
    / (1 + t^2) dt (SciPy's ``owens_t``, whose values these are). Derivatives
    dT/dh = -exp(-h^2/2) erf(a h / sqrt 2) / (2 sqrt(2 pi)) and
    dT/da = exp(-h^2 (1 + a^2) / 2) / (2 pi (1 + a^2))."""
    return _bind_binary(owens_t_p, h, a)


def _owens_t_grad_h(g, h, a):
    e = ew.exp(ew.mul(_const(h, -0.5), ew.square(h)))
    er = ew.erf(ew.mul(ew.mul(a, h), _const(h, np.sqrt(0.5))))
    return ew.mul(g, ew.mul(_const(h, -1 / (2 * np.sqrt(2 * np.pi))), ew.mul(e, er)))


def _owens_t_grad_a(g, h, a):
    one_a2 = ew.add(_one(a), ew.square(a))
    e = ew.exp(ew.mul(_const(h, -0.5), ew.mul(ew.square(h), one_a2)))
    return ew.mul(g, ew.div(e, ew.mul(_const(a, 2 * np.pi), one_a2)))


owens_t_p = standard_naryop("owens_t", _scipy_impl("owens_t"), _float)
defjvp(owens_t_p, _owens_t_grad_h, _owens_t_grad_a)


def wofz(z):
    """Element-wise Faddeeva function w(z) = exp(-z^2) erfc(-i z) (SciPy's ``wofz``,
    whose values these are). Complex operands (complex64 or complex128); holomorphic,
    with w'(z) = -2 z w(z) + 2i / sqrt(pi)."""
    return _bind_unary(wofz_p, z)


wofz_p = standard_unop("wofz", _scipy_impl("wofz"), _complex)
defjvp(wofz_p, lambda g, ans, z: ew.mul(g, ew.add(ew.mul(_const(z, -2), ew.mul(z, ans)),
                                                   _const(z, 2j / np.sqrt(np.pi)))), with_ans=True)


# ============================ parameter derivatives of 1F1, 2F1 =======================

_SERIES_MAXIT = 20000


def _series_done(t, hs, total, eps):
    scale = np.abs(t) * (1 + sum(np.abs(h) for h in hs))
    return scale <= eps * np.maximum(np.abs(total), np.finfo(np.float64).tiny)


def _hyp1f1_series(a, b, x, eps):
    """(M, dM/da, dM/db) of M = 1F1(a; b; x) by the defining series, differentiated term
    by term: d/da (a)_k = (a)_k sum_(j<k) 1/(a + j). For x >= 0 (the callers reflect)."""
    t = np.ones_like(x)
    m, ma, mb = t.copy(), np.zeros_like(x), np.zeros_like(x)
    ha, hb = np.zeros_like(x), np.zeros_like(x)
    done = np.zeros(x.shape, bool)
    for k in range(_SERIES_MAXIT):
        ha = ha + 1 / (a + k)
        hb = hb + 1 / (b + k)
        t = t * ((a + k) / (b + k) * x / (k + 1))
        t = np.where(done, 0, t)
        m, ma, mb = m + t, ma + t * ha, mb - t * hb
        done |= (k > 2) & _series_done(t, (ha, hb), np.abs(m) + np.abs(ma) + np.abs(mb),
                                       eps) | ~np.isfinite(t)
        if done.all():
            break
    bad = ~done
    return [np.where(bad, np.nan, v) for v in (m, ma, mb)]


def _hyp1f1_grad_impl(a, b, x, *, argnum):
    dt = np.result_type(a, b, x)
    a, b, x = (np.asarray(v, np.float64) for v in np.broadcast_arrays(a, b, x))
    eps = np.finfo(dt if dt != np.float16 else np.float32).eps / 4
    with np.errstate(all="ignore"):
        neg = x < 0
        # Kummer: M(a; b; x) = e^x M(b - a; b; -x), so that the series has x >= 0
        ap = np.where(neg, b - a, a)
        _, m1, m2 = _hyp1f1_series(ap, b, np.abs(x), eps)
        ex = np.exp(x)
        da = np.where(neg, -ex * m1, m1)
        db = np.where(neg, ex * (m1 + m2), m2)
        out = da if argnum == 0 else db
    return np.asarray(out, dt)


def hyp1f1_grad(a, b, x, argnum):
    """d/da (``argnum=0``) or d/db (``argnum=1``) of 1F1(a; b; x), by its series
    differentiated term by term (after Kummer's transformation for x < 0). NaN where the
    series does not converge in 20000 terms or a or b is a non-positive integer. Not
    itself differentiable."""
    if argnum not in (0, 1):
        raise ValueError(f"hyp1f1_grad: argnum must be 0 (a) or 1 (b), got {argnum!r}")
    return _bind_n(hyp1f1_grad_p, a, b, x, argnum=int(argnum))


hyp1f1_grad_p = standard_naryop("hyp1f1_grad", _hyp1f1_grad_impl, _float, nargs=3)


def _hyp2f1_series(a, b, c, x, eps):
    """(F, dF/da, dF/db, dF/dc) of F = 2F1(a, b; c; x) by the defining series,
    differentiated term by term (|x| < 1)."""
    t = np.ones_like(x)
    f, fa, fb, fc = t.copy(), np.zeros_like(x), np.zeros_like(x), np.zeros_like(x)
    ha, hb, hc = np.zeros_like(x), np.zeros_like(x), np.zeros_like(x)
    done = np.zeros(x.shape, bool)
    for k in range(_SERIES_MAXIT):
        ha, hb, hc = ha + 1 / (a + k), hb + 1 / (b + k), hc + 1 / (c + k)
        t = t * ((a + k) * (b + k) / ((c + k) * (k + 1)) * x)
        t = np.where(done, 0, t)
        f, fa, fb, fc = f + t, fa + t * ha, fb + t * hb, fc - t * hc
        total = np.abs(f) + np.abs(fa) + np.abs(fb) + np.abs(fc)
        done |= (k > 2) & _series_done(t, (ha, hb, hc), total, eps) | ~np.isfinite(t)
        if done.all():
            break
    bad = ~done
    return [np.where(bad, np.nan, v) for v in (f, fa, fb, fc)]


def _hyp2f1_grad_impl(a, b, c, x, *, argnum):
    dt = np.result_type(a, b, c, x)
    a, b, c, x = (np.asarray(v, np.float64) for v in np.broadcast_arrays(a, b, c, x))
    eps = np.finfo(dt if dt != np.float16 else np.float32).eps / 4
    with np.errstate(all="ignore"):
        # Pfaff: F(a, b; c; x) = (1 - x)^-a F(a, c - b; c; x / (x - 1)) for x < -1/2
        pf = x < -0.5
        z = np.where(pf, x / (x - 1), np.where(x < 1, x, 0.0))
        bp = np.where(pf, c - b, b)
        f, f1, f2, f3 = _hyp2f1_series(a, bp, c, z, eps)
        w = (1 - x) ** -a
        if argnum == 0:
            out = np.where(pf, w * (f1 - np.log1p(-x) * f), f1)
        elif argnum == 1:
            out = np.where(pf, -w * f2, f2)
        else:
            out = np.where(pf, w * (f2 + f3), f3)
        out = np.where(x < 1, out, np.nan)
    return np.asarray(out, dt)


def hyp2f1_grad(a, b, c, x, argnum):
    """d/da, d/db or d/dc (``argnum`` 0, 1, 2) of 2F1(a, b; c; x) for x < 1, by its series
    differentiated term by term (after Pfaff's transformation for x < -1/2). NaN for
    x >= 1, where the series does not converge in 20000 terms (x within about 1e-3 of 1)
    or a parameter is a non-positive integer. Not itself differentiable."""
    if argnum not in (0, 1, 2):
        raise ValueError(f"hyp2f1_grad: argnum must be 0 (a), 1 (b) or 2 (c), got "
                         f"{argnum!r}")
    return _bind_n(hyp2f1_grad_p, a, b, c, x, argnum=int(argnum))


hyp2f1_grad_p = standard_naryop("hyp2f1_grad", _hyp2f1_grad_impl, _float, nargs=4)
