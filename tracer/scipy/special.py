"""tracer.scipy.special: SciPy's special functions (``jax.scipy.special``) on the lax
special-function primitives (``lax/special.py``), with NumPy broadcasting and JAX's
promotion (integers and bools become the default float; Python scalars are weak).

Accuracy is that of the primitives (a few ulp, see ``lax/special.py``) for gammaln,
digamma, polygamma, zeta, erf, erfc, erfcx, erfinv, erfcinv, ndtri, i0e, i1e (gammainc,
gammaincc: tens of ulp, better than SciPy's). Functions
composed from them inherit the rounding of the composition: ``gamma``, ``beta``,
``poch``, ``factorial`` and ``comb`` are ``exp`` of log-gamma sums, so their relative
error grows like ``|log result| * 2**-53`` (about 700 ulp for gamma(170); JAX computes
them the same way); ``i0``/``i1`` multiply by ``exp(|x|)`` (a few ulp). Special values
follow SciPy (listed per function where they are not obvious).

dawsn, exp1, expi, expn, fresnel, sici and spence run our own kernels (a few ulp in
float64, listed in ``lax/special_extra.py``); hyp1f1, hyp2f1, owens_t and wofz return
SciPy's values; bessel_jn and sph_harm_y are compositions of lax operations (recurrences).

Functions of SciPy's list not provided here are listed in the README ("Not supported
yet"), with the reason.
"""
from __future__ import annotations

import math
import operator
from fractions import Fraction

import numpy as np

import lax
from lax import special_extra as lax_extra
from tracer import dtypes
from tracer.core import Array, get_aval
from tracer.custom_derivatives import custom_jvp
from tracer.nn import log_softmax as _nn_log_softmax
from tracer.nn import logsumexp as _nn_logsumexp
from tracer.nn import softmax as _nn_softmax
from tracer.numpy.util import as_operand, promote_args_inexact

__all__ = [
    "bernoulli", "bessel_jn", "beta", "betainc", "betaln", "boxcox", "boxcox1p", "comb",
    "dawsn", "digamma", "entr", "erf", "erfc", "erfcinv", "erfcx", "erfinv", "exp1", "expi",
    "expit", "expn", "factorial", "fresnel", "gamma", "gammainc", "gammaincc", "gammaln",
    "gammasgn", "hyp1f1", "hyp2f1", "i0", "i0e", "i1", "i1e", "kl_div", "log_ndtr",
    "log_softmax", "loggamma", "logit", "logsumexp", "multigammaln", "ndtr", "ndtri",
    "owens_t", "poch", "polygamma", "psi", "rel_entr", "sici", "softmax", "spence",
    "sph_harm_y", "wofz", "xlog1py", "xlogy", "zeta",
]


def _args(fname, *xs):
    return promote_args_inexact(fname, *xs)


def _c(x, v):
    return lax.full_like(x, v)


def _where(pred, a, b):
    return lax.select(pred, a, b)


def _real_only(fname, x):
    if dtypes.is_complex(get_aval(x).dtype):
        raise TypeError(f"tracer.scipy.special.{fname} supports real inputs only, got "
                        f"{get_aval(x).str_short()}")
    return x


def _unary(fname, fn, x):
    (x,) = _args(fname, x)
    return fn(_real_only(fname, x))


# ==================================== gamma family =====================================

def gammaln(x):
    """log|Gamma(x)| (``scipy.special.gammaln``): +inf at 0, -1, -2, ... and at +inf;
    at -inf +inf (SciPy gives -inf there)."""
    return _unary("gammaln", lax.lgamma, x)


def loggamma(x):
    """Principal log Gamma for real x (``scipy.special.loggamma``): gammaln(x) for x >= 0,
    NaN for x < 0 (where Gamma is negative or the branch is complex). Real inputs only."""
    (x,) = _args("loggamma", x)
    _real_only("loggamma", x)
    return _where(lax.lt(x, _c(x, 0)), _c(x, np.nan), lax.lgamma(x))


def gammasgn(x):
    """Sign of Gamma(x) (``scipy.special.gammasgn``): 1 for x > 0 and +0, -1 for -0,
    (-1)**ceil(-x) for negative non-integers, NaN at negative integers, -inf and NaN."""
    (x,) = _args("gammasgn", x)
    _real_only("gammasgn", x)
    one, zero = _c(x, 1), _c(x, 0)
    fl = lax.floor(x)
    odd = lax.ne(lax.rem(fl, _c(x, 2)), zero)     # floor(x) odd -> Gamma(x) < 0
    neg = _where(odd, lax.neg(one), one)
    out = _where(lax.gt(x, zero), one, neg)
    zero_sign = _where(lax.lt(lax.div(one, x), zero), lax.neg(one), one)   # -0 -> -1
    out = _where(lax.eq(x, zero), zero_sign, out)
    bad = lax.bitwise_or(lax.ne(x, x), lax.bitwise_and(lax.lt(x, zero), lax.eq(fl, x)))
    return _where(bad, _c(x, np.nan), out)


def gamma(x):
    """Gamma(x) (``scipy.special.gamma``) as gammasgn(x) * exp(gammaln(x)): inf at +0 and
    +inf, -inf at -0, NaN at the negative integers and -inf; relative error about
    |gammaln(x)| * 2**-53."""
    (x,) = _args("gamma", x)
    _real_only("gamma", x)
    return lax.mul(gammasgn(x), lax.exp(lax.lgamma(x)))


def _gammasgn_poles_positive(x):
    # gammasgn with +1 at the poles: there exp(+-inf) of the log-gamma sum already gives
    # the inf or 0 of the ratio (beta(2, -1) = inf, poch(-1, 2) = 0, as SciPy).
    fl = lax.floor(x)
    pole = lax.bitwise_and(lax.le(x, _c(x, 0)), lax.eq(fl, x))
    return _where(pole, _c(x, 1), gammasgn(x))


def betaln(a, b):
    """log|B(a, b)| = gammaln(a) + gammaln(b) - gammaln(a + b) (``scipy.special.betaln``)."""
    a, b = _args("betaln", a, b)
    return lax.sub(lax.add(lax.lgamma(a), lax.lgamma(b)), lax.lgamma(lax.add(a, b)))


def beta(a, b):
    """B(a, b) = Gamma(a) Gamma(b) / Gamma(a + b) (``scipy.special.beta``), signed."""
    a, b = _args("beta", a, b)
    g = _gammasgn_poles_positive
    sign = lax.mul(lax.mul(g(a), g(b)), g(lax.add(a, b)))
    return lax.mul(sign, lax.exp(betaln(a, b)))


def poch(z, m):
    """Pochhammer's rising factorial Gamma(z + m) / Gamma(z) (``scipy.special.poch``);
    1 where m == 0."""
    z, m = _args("poch", z, m)
    zm = lax.add(z, m)
    sign = lax.mul(_gammasgn_poles_positive(zm), _gammasgn_poles_positive(z))
    val = lax.mul(sign, lax.exp(lax.sub(lax.lgamma(zm), lax.lgamma(z))))
    # z + m at a pole of Gamma (z not at one): +inf, as SciPy
    zm_pole = lax.bitwise_and(lax.le(zm, _c(zm, 0)), lax.eq(lax.floor(zm), zm))
    z_pole = lax.bitwise_and(lax.le(z, _c(z, 0)), lax.eq(lax.floor(z), z))
    val = _where(lax.bitwise_and(zm_pole, lax.bitwise_not(z_pole)), _c(val, np.inf), val)
    return _where(lax.eq(m, _c(m, 0)), _c(val, 1), val)


def factorial(n, exact=False):
    """n! = Gamma(n + 1) for n >= 0 and 0 for n < 0 (``scipy.special.factorial`` with
    ``exact=False``); ``exact=True`` is not supported (traced values have fixed width)."""
    if exact:
        raise NotImplementedError("tracer.scipy.special.factorial: exact=True is not "
                                  "supported; use exact=False (floating result)")
    (n,) = _args("factorial", n)
    return _where(lax.lt(n, _c(n, 0)), _c(n, 0), lax.exp(lax.lgamma(lax.add(n, _c(n, 1)))))


def comb(N, k, exact=False, repetition=False):
    """Binomial coefficient N choose k (``scipy.special.comb``, ``exact=False``): 0 where
    k > N, N < 0 or k < 0; ``repetition=True`` gives comb(N + k - 1, k)."""
    if exact:
        raise NotImplementedError("tracer.scipy.special.comb: exact=True is not supported; "
                                  "use exact=False (floating result)")
    N, k = _args("comb", N, k)
    if repetition:
        N = lax.sub(lax.add(N, k), _c(N, 1))
    one, zero = _c(N, 1), _c(N, 0)
    val = lax.exp(lax.sub(lax.lgamma(lax.add(N, one)),
                          lax.add(lax.lgamma(lax.add(k, one)),
                                  lax.lgamma(lax.add(lax.sub(N, k), one)))))
    bad = lax.bitwise_or(lax.bitwise_or(lax.lt(N, zero), lax.lt(k, zero)), lax.gt(k, N))
    return _where(bad, zero, val)


def multigammaln(a, d):
    """Log of the multivariate gamma function of dimension ``d`` (a static int):
    d(d-1)/4 log(pi) + sum_{j<d} gammaln(a - j/2) (``scipy.special.multigammaln``)."""
    d = operator.index(d)
    if d < 1:
        raise ValueError(f"tracer.scipy.special.multigammaln: d must be a positive integer, "
                         f"got {d}")
    (a,) = _args("multigammaln", a)
    out = _c(a, d * (d - 1) / 4 * math.log(math.pi))
    for j in range(d):
        out = lax.add(out, lax.lgamma(lax.sub(a, _c(a, j / 2))))
    return out


def gammainc(a, x):
    """The regularized lower incomplete gamma function P(a, x) (``scipy.special.gammainc``):
    NaN for a < 0 or x < 0, 1 for a == 0 < x. Differentiable in both arguments."""
    a, x = _args("gammainc", a, x)
    return lax.igamma(a, x)


def gammaincc(a, x):
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x), accurate
    where it is small (``scipy.special.gammaincc``)."""
    a, x = _args("gammaincc", a, x)
    return lax.igammac(a, x)


def betainc(a, b, x):
    """The regularized incomplete beta function I_x(a, b) (``scipy.special.betainc``):
    NaN outside a, b >= 0, 0 <= x <= 1. Differentiable in x only (as JAX)."""
    a, b, x = _args("betainc", a, b, x)
    return lax.betainc(a, b, x)


def digamma(x):
    """psi(x) = d/dx log Gamma(x) (``scipy.special.digamma``): -inf at +0, +inf at -0, NaN
    at the negative integers."""
    return _unary("digamma", lax.digamma, x)


psi = digamma


def polygamma(n, x):
    """The n-th derivative of digamma (``scipy.special.polygamma``); n must hold
    non-negative integers (NaN otherwise). Differentiable in x only."""
    n, x = _args("polygamma", n, x)
    return lax.polygamma(n, x)


def zeta(x, q=None):
    """Hurwitz zeta sum_{k>=0} (q + k)**-x (``scipy.special.zeta``): NaN for x < 1, inf at
    x == 1. The Riemann zeta function (``q=None``) is not supported (as in JAX): pass
    ``q=1`` for x > 1."""
    if q is None:
        raise NotImplementedError("tracer.scipy.special.zeta: the Riemann zeta function "
                                  "(q=None) is not implemented; pass q (q=1 gives Riemann's "
                                  "zeta for x > 1)")
    x, q = _args("zeta", x, q)
    return lax.zeta(x, q)


def bernoulli(n):
    """The Bernoulli numbers B_0 .. B_n (B_1 = -1/2) as a float array
    (``scipy.special.bernoulli``); ``n`` is a static non-negative int."""
    n = operator.index(n)
    if n < 0:
        raise ValueError(f"tracer.scipy.special.bernoulli: n must be >= 0, got {n}")
    # Akiyama-Tanigawa in exact rationals; it gives B_1 = +1/2, SciPy's convention is -1/2.
    out, a = [], []
    for m in range(n + 1):
        a.append(Fraction(1, m + 1))
        for j in range(m, 0, -1):
            a[j - 1] = j * (a[j - 1] - a[j])
        out.append(a[0])
    if n >= 1:
        out[1] = -out[1]
    return Array(np.array([float(v) for v in out], dtypes.default_float_dtype()))


# ===================================== error functions ==================================

def erf(x):
    """The error function (``scipy.special.erf``)."""
    return _unary("erf", lax.erf, x)


def erfc(x):
    """1 - erf(x), accurate in the tail (``scipy.special.erfc``)."""
    return _unary("erfc", lax.erfc, x)


def erfcx(x):
    """exp(x**2) erfc(x) (``scipy.special.erfcx``); +inf below about -26.6."""
    return _unary("erfcx", lax.erfcx, x)


def erfinv(y):
    """Inverse of erf on [-1, 1] (``scipy.special.erfinv``): ±inf at ±1, NaN outside."""
    return _unary("erfinv", lax.erf_inv, y)


def erfcinv(y):
    """Inverse of erfc on [0, 2] (``scipy.special.erfcinv``): +inf at 0, -inf at 2, NaN
    outside; full relative accuracy for tiny y."""
    return _unary("erfcinv", lax.erfc_inv, y)


_SQRT1_2 = 1 / math.sqrt(2)


def ndtr(x):
    """The standard normal CDF (``scipy.special.ndtr``), as SciPy computes it:
    0.5 + 0.5 erf(x/sqrt 2) near 0, 0.5 erfc(|x|/sqrt 2) (reflected for x > 0) beyond."""
    (x,) = _args("ndtr", x)
    _real_only("ndtr", x)
    z = lax.mul(x, _c(x, _SQRT1_2))
    half = _c(x, 0.5)
    small = lax.mul(half, lax.add(_c(x, 1), lax.erf(z)))
    tail = lax.mul(half, lax.erfc(lax.abs(z)))
    tail = _where(lax.gt(x, _c(x, 0)), lax.sub(_c(x, 1), tail), tail)
    return _where(lax.lt(lax.abs(z), _c(x, _SQRT1_2)), small, tail)


def ndtri(p):
    """The inverse of ndtr (``scipy.special.ndtri``): -sqrt(2) erfcinv(2 p), accurate for
    tiny p; -inf at 0, +inf at 1, NaN outside [0, 1]."""
    (p,) = _args("ndtri", p)
    _real_only("ndtri", p)
    # 0 - y rather than -y: at p = 0.5 erfc_inv(1) is +0.0, and SciPy's ndtri(0.5) is +0.0.
    return lax.sub(_c(p, 0), lax.mul(_c(p, math.sqrt(2)), lax.erfc_inv(lax.mul(_c(p, 2), p))))


def log_ndtr(x, series_order=3):
    """log(ndtr(x)) without underflow (``scipy.special.log_ndtr``): log1p(-ndtr(-x)) for
    x > 0, log(erfcx(-x/sqrt 2) / 2) - x**2/2 for x < -1 (erfcx keeps it finite far into
    the tail), log(ndtr(x)) in between. ``series_order`` is accepted for JAX
    compatibility (the erfcx form needs no asymptotic series)."""
    (x,) = _args("log_ndtr", x)
    _real_only("log_ndtr", x)
    one = _c(x, 1)
    upper = lax.log1p(lax.neg(ndtr(lax.neg(x))))
    mid = lax.log(ndtr(x))
    # the lower branch is evaluated at a safe point where it is not selected
    xl = _where(lax.lt(x, lax.neg(one)), x, lax.neg(one))
    z = lax.mul(lax.neg(xl), _c(x, _SQRT1_2))
    lower = lax.sub(lax.log(lax.mul(_c(x, 0.5), lax.erfcx(z))),
                    lax.mul(_c(x, 0.5), lax.mul(xl, xl)))
    out = _where(lax.gt(x, _c(x, 0)), upper, mid)
    return _where(lax.lt(x, lax.neg(one)), lower, out)


# ========================================= Bessel =======================================

def i0e(x):
    """exp(-|x|) I0(x) (``scipy.special.i0e``)."""
    return _unary("i0e", lax.bessel_i0e, x)


def i1e(x):
    """exp(-|x|) I1(x) (``scipy.special.i1e``)."""
    return _unary("i1e", lax.bessel_i1e, x)


def i0(x):
    """The modified Bessel function I0(x) = exp(|x|) i0e(x) (``scipy.special.i0``); inf
    beyond |x| ~ 709.8, where exp overflows (as SciPy)."""
    (x,) = _args("i0", x)
    _real_only("i0", x)
    return lax.mul(lax.exp(lax.abs(x)), lax.bessel_i0e(x))


def i1(x):
    """The modified Bessel function I1(x) = exp(|x|) i1e(x) (``scipy.special.i1``)."""
    (x,) = _args("i1", x)
    _real_only("i1", x)
    return lax.mul(lax.exp(lax.abs(x)), lax.bessel_i1e(x))


# ================================ logistic, entropies, logs =============================

def expit(x):
    """The logistic sigmoid 1 / (1 + exp(-x)) (``scipy.special.expit``)."""
    (x,) = _args("expit", x)
    return lax.logistic(x)


def logit(p):
    """log(p / (1 - p)) (``scipy.special.logit``): -inf at 0, +inf at 1, NaN outside.
    Derivative 1 / (p (1 - p)): +inf at 0 and 1 (as JAX)."""
    (p,) = _args("logit", p)
    return _logit(p)


@custom_jvp
def _logit(p):
    return lax.log(lax.div(p, lax.sub(_c(p, 1), p)))


@_logit.defjvp
def _logit_jvp(primals, tangents):
    (p,), (pd,) = primals, tangents
    return _logit(p), lax.div(pd, lax.mul(p, lax.sub(_c(p, 1), p)))


def xlogy(x, y):
    """x * log(y), 0 where x == 0 unless y is NaN (``scipy.special.xlogy``). Derivatives
    log(y) and x / y."""
    x, y = _broadcast_all("xlogy", *_args("xlogy", x, y))
    return _xlogy(x, y)


@custom_jvp
def _xlogy(x, y):
    keep0 = lax.bitwise_and(lax.eq(x, _c(x, 0)), lax.eq(y, y))
    return _where(keep0, _c(x, 0), lax.mul(x, lax.log(y)))


@_xlogy.defjvp
def _xlogy_jvp(primals, tangents):
    x, y = primals
    xd, yd = tangents
    return _xlogy(x, y), lax.add(lax.mul(xd, lax.log(y)), lax.mul(yd, lax.div(x, y)))


def xlog1py(x, y):
    """x * log1p(y), 0 where x == 0 unless y is NaN (``scipy.special.xlog1py``).
    Derivatives log1p(y) and x / (1 + y)."""
    x, y = _broadcast_all("xlog1py", *_args("xlog1py", x, y))
    return _xlog1py(x, y)


@custom_jvp
def _xlog1py(x, y):
    keep0 = lax.bitwise_and(lax.eq(x, _c(x, 0)), lax.eq(y, y))
    return _where(keep0, _c(x, 0), lax.mul(x, lax.log1p(y)))


@_xlog1py.defjvp
def _xlog1py_jvp(primals, tangents):
    x, y = primals
    xd, yd = tangents
    return _xlog1py(x, y), lax.add(lax.mul(xd, lax.log1p(y)),
                                   lax.mul(yd, lax.div(x, lax.add(y, _c(y, 1)))))


def entr(x):
    """-x log(x) for x > 0, 0 at 0, -inf for x < 0 (``scipy.special.entr``)."""
    (x,) = _args("entr", x)
    _real_only("entr", x)
    return _where(lax.lt(x, _c(x, 0)), _c(x, -np.inf), _neg_xlogx(x))


@custom_jvp
def _neg_xlogx(x):
    """-x log(x) for x > 0, +0.0 at 0 (and where x < 0, which entr replaces), NaN for NaN.
    Its derivative -log(x) - 1 is +inf at 0 (as JAX)."""
    zero = _c(x, 0)
    safe = _where(lax.gt(x, zero), x, _c(x, 1))
    val = lax.neg(lax.mul(safe, lax.log(safe)))
    return _where(lax.ne(x, x), x, _where(lax.gt(x, zero), val, zero))


@_neg_xlogx.defjvp
def _neg_xlogx_jvp(primals, tangents):
    (x,), (xd,) = primals, tangents
    return _neg_xlogx(x), lax.mul(xd, lax.sub(lax.neg(lax.log(x)), _c(x, 1)))


def rel_entr(x, y):
    """x log(x / y) for x, y > 0; 0 for x == 0, y >= 0; +inf otherwise
    (``scipy.special.rel_entr``)."""
    x, y = _args("rel_entr", x, y)
    zero = _c(x, 0)
    pos = lax.bitwise_and(lax.gt(x, zero), lax.gt(y, zero))
    sx = _where(pos, x, _c(x, 1))
    sy = _where(pos, y, _c(y, 1))
    val = lax.mul(sx, lax.log(lax.div(sx, sy)))
    zero_case = lax.bitwise_and(lax.eq(x, zero), lax.ge(y, zero))
    out = _where(pos, val, _where(zero_case, zero, _c(x, np.inf)))
    nan = lax.bitwise_or(lax.ne(x, x), lax.ne(y, y))
    return _where(nan, _c(x, np.nan), out)


def kl_div(x, y):
    """x log(x / y) - x + y for x, y > 0; y for x == 0, y >= 0; +inf otherwise
    (``scipy.special.kl_div``)."""
    x, y = _args("kl_div", x, y)
    zero = _c(x, 0)
    pos = lax.bitwise_and(lax.gt(x, zero), lax.gt(y, zero))
    sx = _where(pos, x, _c(x, 1))
    sy = _where(pos, y, _c(y, 1))
    val = lax.add(lax.sub(lax.mul(sx, lax.log(lax.div(sx, sy))), sx), sy)
    zero_case = lax.bitwise_and(lax.eq(x, zero), lax.ge(y, zero))
    out = _where(pos, val, _where(zero_case, y, _c(x, np.inf)))
    nan = lax.bitwise_or(lax.ne(x, x), lax.ne(y, y))
    return _where(nan, _c(x, np.nan), out)


def boxcox(x, lmbda):
    """The Box-Cox transform (x**lmbda - 1) / lmbda, log(x) at lmbda == 0
    (``scipy.special.boxcox``)."""
    x, lmbda = _args("boxcox", x, lmbda)
    lx = lax.log(x)
    tiny = lax.lt(lax.abs(lmbda), _c(lmbda, 1e-19))
    safe = _where(tiny, _c(lmbda, 1), lmbda)
    return _where(tiny, lx, lax.div(lax.expm1(lax.mul(safe, lx)), safe))


def boxcox1p(x, lmbda):
    """Box-Cox of 1 + x: ((1 + x)**lmbda - 1) / lmbda, log1p(x) at lmbda == 0
    (``scipy.special.boxcox1p``)."""
    x, lmbda = _args("boxcox1p", x, lmbda)
    lx = lax.log1p(x)
    tiny = lax.lt(lax.abs(lmbda), _c(lmbda, 1e-19))
    safe = _where(tiny, _c(lmbda, 1), lmbda)
    return _where(tiny, lx, lax.div(lax.expm1(lax.mul(safe, lx)), safe))


def _all_axes(x, axis):
    return tuple(range(get_aval(as_operand(x)).ndim)) if axis is None else axis


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False, where=None):
    """log(sum(b * exp(a))) over ``axis`` (``scipy.special.logsumexp``): stable, ``b``
    weights (a negative total gives NaN unless ``return_sign``), ``return_sign`` returns
    (log|sum|, sign)."""
    return _nn_logsumexp(a, axis=axis, b=b, keepdims=keepdims, return_sign=return_sign,
                         where=where)


def softmax(x, axis=None):
    """exp(x) / sum(exp(x)) over ``axis`` (``scipy.special.softmax``; all axes by
    default, as SciPy)."""
    return _nn_softmax(x, axis=_all_axes(x, axis))


def log_softmax(x, axis=None):
    """x - logsumexp(x) over ``axis`` (``scipy.special.log_softmax``; all axes by
    default, as SciPy)."""
    return _nn_log_softmax(x, axis=_all_axes(x, axis))


# ============================ exponential and related integrals =========================
# Kernel-backed primitives of lax/special_extra.py (accuracy listed there: a few ulp in
# float64 against mpmath, float32 correctly rounded but for rare ties).

def expn(n, x):
    """The generalized exponential integral E_n(x) = int_1^inf e^(-x t) / t^n dt
    (``scipy.special.expn``). ``n`` (integer-valued; a float order is truncated, as SciPy)
    and ``x`` broadcast; the result has their promoted float dtype. NaN for n < 0 or
    x < 0; E_n(0) = 1/(n - 1) for n > 1, +inf for n <= 1; 0 at +inf. Differentiable in
    x only (d/dx E_n = -E_(n-1)); differentiating in n raises ValueError."""
    n, x = _args("expn", n, x)
    return lax_extra.expn(_real_only("expn", n), _real_only("expn", x))


def exp1(x):
    """The exponential integral E1(x) = int_x^inf e^-t / t dt = expn(1, x)
    (``scipy.special.exp1`` for real x): +inf at 0, NaN for x < 0 (the real function's
    domain), 0 at +inf. Derivative -e^-x / x."""
    (x,) = _args("exp1", x)
    _real_only("exp1", x)
    return lax_extra.expn(_c(x, 1), x)


def expi(x):
    """The exponential integral Ei(x) = -PV int_(-x)^inf e^-t / t dt
    (``scipy.special.expi``): -E1(-x) for x < 0, -inf at 0, -0 at -inf. Finite up to
    x ~ 716.7 (SciPy's overflows to inf from x ~ 709.8). Derivative e^x / x."""
    return _unary("expi", lax_extra.expi, x)


def dawsn(x):
    """Dawson's integral D(x) = e^(-x^2) int_0^x e^(t^2) dt (``scipy.special.dawsn``):
    odd, ±0 at ±inf. Derivative 1 - 2 x D(x)."""
    return _unary("dawsn", lax_extra.dawsn, x)


def sici(x):
    """The sine and cosine integrals (Si(x), Ci(x)) (``scipy.special.sici``):
    Si(x) = int_0^x sin t / t dt (odd, ±pi/2 at ±inf) and
    Ci(x) = gamma + log|x| + int_0^|x| (cos t - 1)/t dt (even: SciPy's real part for
    x < 0; -inf at 0, 0 at +inf, NaN at -inf). Derivatives sin x / x and cos x / x."""
    (x,) = _args("sici", x)
    _real_only("sici", x)
    return lax_extra.si(x), lax_extra.ci(x)


def fresnel(x):
    """The Fresnel integrals (S(x), C(x)) = (int_0^x sin(pi t^2 / 2) dt,
    int_0^x cos(pi t^2 / 2) dt) (``scipy.special.fresnel``): odd, ±1/2 at ±inf. The phase
    pi x^2 / 2 is reduced exactly, so large x keep full accuracy (SciPy's error grows
    like x^2 ulp there). Derivatives sin(pi x^2 / 2) and cos(pi x^2 / 2)."""
    (x,) = _args("fresnel", x)
    _real_only("fresnel", x)
    return lax_extra.fresnel_s(x), lax_extra.fresnel_c(x)


def spence(x):
    """Spence's function int_1^x log t / (1 - t) dt = Li2(1 - x)
    (``scipy.special.spence``, real x): pi^2/6 at 0, 0 at 1, NaN for x < 0 and at +inf
    (as SciPy). Derivative log(x) / (1 - x)."""
    return _unary("spence", lax_extra.spence, x)


# ============================== SciPy-evaluated functions ===============================
# Primitives whose values are scipy.special's (eagerly, and as host steps under jit),
# with derivatives written in lax (lax/special_extra.py).

def hyp1f1(a, b, x):
    """The confluent hypergeometric function 1F1(a; b; x) = sum_k (a)_k / (b)_k x^k / k!
    (``scipy.special.hyp1f1``, real arguments; its values and special values, e.g. +inf
    at b = 0, including 1F1(0; 0; x) where JAX returns 1). Arguments broadcast to their
    promoted float dtype. Differentiable in a, b and x (as JAX): d/dx = a/b 1F1(a + 1;
    b + 1; x); d/da, d/db by the series differentiated term by term (NaN where a or b is
    a non-positive integer or the series does not converge)."""
    a, b, x = _args("hyp1f1", a, b, x)
    for v in (a, b, x):
        _real_only("hyp1f1", v)
    return lax_extra.hyp1f1(a, b, x)


def hyp2f1(a, b, c, x):
    """The Gauss hypergeometric function 2F1(a, b; c; x) = sum_k (a)_k (b)_k / (c)_k
    x^k / k! (``scipy.special.hyp2f1``, real arguments; its values, analytically
    continued for x < -1). Arguments broadcast to their promoted float dtype.
    Differentiable in a, b, c and x (as JAX): d/dx = ab/c 2F1(a + 1, b + 1; c + 1; x);
    d/da, d/db, d/dc by the differentiated series for x < 1 (NaN for x >= 1)."""
    a, b, c, x = _args("hyp2f1", a, b, c, x)
    for v in (a, b, c, x):
        _real_only("hyp2f1", v)
    return lax_extra.hyp2f1(a, b, c, x)


def owens_t(h, a):
    """Owen's T function T(h, a) = 1/(2 pi) int_0^a exp(-h^2 (1 + t^2) / 2) / (1 + t^2) dt
    (``scipy.special.owens_t``; its values). Arguments broadcast to their promoted float
    dtype. Differentiable in h and a."""
    h, a = _args("owens_t", h, a)
    _real_only("owens_t", h)
    _real_only("owens_t", a)
    return lax_extra.owens_t(h, a)


def wofz(z):
    """The Faddeeva function w(z) = exp(-z^2) erfc(-i z) (``scipy.special.wofz``; its
    values). Real or complex ``z``; the result is complex (complex64 for float32 and
    complex64 inputs, else complex128). Holomorphic: w'(z) = -2 z w(z) + 2i / sqrt(pi)."""
    (z,) = _args("wofz", z)
    dt = get_aval(z).dtype
    if not dtypes.is_complex(dt):
        cdt = np.complex128 if dt == np.float64 else np.complex64
        z = lax.convert_element_type(z, cdt)
    return lax_extra.wofz(z)


# ============================== Bessel J_n, spherical harmonics =========================

def bessel_jn(z, *, v, n_iter=50):
    """The Bessel functions of the first kind J_0(z) .. J_v(z) of integer order and real
    argument (``jax.scipy.special.bessel_jn``; values of ``scipy.special.jv``): an array
    of shape ``(v + 1, *z.shape)`` in z's promoted float dtype.

    Miller's backward recurrence J_(k-1) = 2k/z J_k - J_(k+1) from order ``n_iter``,
    normalized by J_0 + 2 (J_2 + J_4 + ...) = 1, carried as the ratios J_k / J_(k+1) so
    that nothing overflows at small z (JAX's form overflows to NaN below about z = 1e-5).
    ``n_iter`` must exceed |z| comfortably (JAX's rule of thumb: the smallest n with
    0.5 log10(6.28 + n) - n log10(1.36 + |z|/n) > 20; 50 serves |z| up to about 20);
    beyond, the result is inaccurate, as in JAX. ``v`` and ``n_iter`` are static ints
    (TypeError otherwise; ValueError for v < 0 or n_iter < v); complex z raises
    ValueError. Differentiable in z."""
    try:
        v = operator.index(v)
        n_iter = operator.index(n_iter)
    except TypeError:
        raise TypeError(f"tracer.scipy.special.bessel_jn: v and n_iter must be static "
                        f"integers, got v={v!r}, n_iter={n_iter!r}") from None
    if v < 0 or n_iter < max(v, 1):
        raise ValueError(f"tracer.scipy.special.bessel_jn: need 0 <= v <= n_iter and "
                         f"n_iter >= 1, got v={v}, n_iter={n_iter}")
    (z,) = _args("bessel_jn", z)
    if dtypes.is_complex(get_aval(z).dtype):
        raise ValueError("tracer.scipy.special.bessel_jn: complex input is not supported "
                         f"(got {get_aval(z).str_short()})")
    # r_k = J_k / J_(k+1): r_k = 2 (k + 1) / z - 1 / r_(k+1), from r_(n_iter) = 2 (n_iter
    # + 1) / z (J_(n_iter + 1) / J_(n_iter + 2) to leading order; the start's error dies
    # out downwards). At z = 0 every ratio is infinite: J_0 = 1, J_k = 0.
    two_over_z = lax.div(_c(z, 2), z)
    r = lax.mul(two_over_z, _c(z, n_iter + 1))
    ratios = [None] * n_iter
    for k in range(n_iter - 1, -1, -1):
        r = lax.sub(lax.mul(two_over_z, _c(z, k + 1)), lax.div(_c(z, 1), r))
        ratios[k] = r
    # q_k = J_k / J_0 = q_(k-1) / r_(k-1); the normalization sums q_k for even k.
    q = _c(z, 1)
    qs = [q]
    total = _c(z, 1)
    for k in range(1, n_iter + 1):
        q = lax.div(q, ratios[k - 1])
        if k <= v:
            qs.append(q)
        if k % 2 == 0:
            total = lax.add(total, lax.mul(_c(z, 2), q))
    j0 = lax.div(_c(z, 1), total)
    outs = [lax.expand_dims(lax.mul(qk, j0), (0,)) for qk in qs]
    return outs[0] if len(outs) == 1 else lax.concatenate(outs, 0)


def sph_harm_y(n, m, theta, phi, diff_n=None, n_max=None):
    """The spherical harmonics Y_n^m(theta, phi) = N P_n^m(cos theta) e^(i m phi), with
    the Condon-Shortley phase and N = sqrt((2n + 1)/(4 pi) (n - m)!/(n + m)!)
    (``scipy.special.sph_harm_y``: theta the polar angle in [0, pi], phi the azimuth).
    ``n`` and ``m`` are integer-valued (degree and order), the four arguments broadcast
    as in SciPy (JAX returns a 1-D array, a scalar theta becoming shape (1,)); the result
    is complex (complex128 for float64 angles, complex64 for float32).
    Y_n^m = 0 where |m| > n, in particular for n < 0 (as SciPy).

    The normalized associated Legendre functions come from the stable recurrences
    P_m^m = -sqrt((2m + 1)/(2m)) sin(theta) P_(m-1)^(m-1) and
    P_l^m = a_l (cos(theta) P_(l-1)^m - P_(l-2)^m / a_(l-1)),
    a_l = sqrt((4 l^2 - 1)/(l^2 - m^2)), run to ``n_max`` = max(n) steps (a static int:
    pass it when n is traced; as in JAX, larger n are clipped to n_max). ``diff_n`` (the
    derivatives SciPy can return) is not supported: NotImplementedError unless None or 0
    (as JAX). Differentiable in theta and phi."""
    if diff_n not in (None, 0):
        raise NotImplementedError("tracer.scipy.special.sph_harm_y: diff_n (derivatives) "
                                  "is not supported (as in JAX); pass diff_n=None")
    if n_max is None:
        try:
            n_max = int(np.max(np.asarray(n)))
        except Exception:
            raise ValueError("tracer.scipy.special.sph_harm_y: n_max must be given as a "
                             "static int when n is traced (the recurrence runs n_max "
                             "steps)") from None
    n_max = operator.index(n_max)
    theta, phi = _args("sph_harm_y", theta, phi)
    for v_ in (theta, phi):
        _real_only("sph_harm_y", v_)
    fdt = np.result_type(get_aval(theta).dtype, get_aval(phi).dtype)
    n, m = (lax.convert_element_type(as_operand(a, "sph_harm_y"), fdt) for a in (n, m))
    n, m, theta, phi = promote_args_inexact("sph_harm_y", n, m, theta, phi)
    n, m, theta, phi = _broadcast_all("sph_harm_y", n, m, theta, phi)
    n = lax.min(n, _c(n, n_max))
    am = lax.abs(m)
    x, s = lax.cos(theta), lax.sin(theta)
    one = _c(x, 1)
    # P_am^am, built up to order am (per element) in n_max static steps
    pmm = _c(x, 0.5 / math.sqrt(math.pi))
    for k in range(1, n_max + 1):
        step = lax.mul(_c(x, -math.sqrt((2 * k + 1) / (2 * k))), lax.mul(s, pmm))
        pmm = _where(lax.le(_c(am, k), am), step, pmm)
    # upward in the degree l = am + 1 .. n
    am2 = lax.mul(am, am)

    def a_l(l):
        l2 = lax.mul(l, l)
        return lax.sqrt(lax.div(lax.sub(lax.mul(_c(l, 4), l2), one), lax.sub(l2, am2)))

    p_prev, p = _c(x, 0), pmm
    a_prev = one
    for j in range(1, n_max + 1):
        l = lax.add(am, _c(am, j))
        active = lax.le(l, n)
        lsafe = _where(active, l, lax.add(am, one))     # keeps a_l finite where idle
        a = a_l(lsafe)
        p_next = lax.mul(a, lax.sub(lax.mul(x, p), lax.div(p_prev, a_prev)))
        p_prev, p, a_prev = (_where(active, p, p_prev), _where(active, p_next, p),
                             _where(active, a, a_prev))
    p = _where(lax.gt(am, n), _c(p, 0), p)
    # Y_n^-m = (-1)^m conj(Y_n^m): the real factor (-1)^m and the phase e^(-i m phi)
    odd = lax.ne(lax.rem(am, _c(am, 2)), _c(am, 0))
    sign = _where(lax.bitwise_and(lax.lt(m, _c(m, 0)), odd), _c(p, -1), _c(p, 1))
    p = lax.mul(p, sign)
    ang = lax.mul(m, phi)
    return lax.complex(lax.mul(p, lax.cos(ang)), lax.mul(p, lax.sin(ang)))


def _broadcast_all(fname, *args):
    shapes = [get_aval(a).shape for a in args]
    shape = np.broadcast_shapes(*shapes) if shapes else ()
    return [a if get_aval(a).shape == shape else lax.broadcast_in_dim(
        a, shape, tuple(range(len(shape) - len(get_aval(a).shape), len(shape))))
        for a in args]
