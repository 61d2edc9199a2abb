"""Scalar kernels of the special functions, written for Numba and used by both backends.

Each kernel is a plain scalar function compiled with ``numba.njit`` (lazily, on its first
call; ``cache=True``), so that

- the Numba lowering (``lowering/special.py``) calls it from inside generated loops, by
  name (``lax.special_kernels.<name>_f64`` / ``_f32``), and
- the eager NumPy impls in ``lax/special.py`` call the same code through a NumPy ufunc
  built from it (``ufunc(name, dtype)``): eager and jitted results are the same bits.

This module imports Numba; ``lax/special.py`` imports it only inside its impls, so
``import tracer`` does not import Numba. The pure-Python function behind each kernel is
``kernel.py_func`` (for stepping through).

Arithmetic is float64 throughout (a float32 argument is widened first and the result is
rounded once on store), with shorter series for float32 where the float64 accuracy is not
needed (the ``_32`` coefficient tables). The algorithms are the published ones (Chebyshev
expansions of zero-free auxiliary functions, recurrences, reflection formulas, Stirling /
asymptotic / Euler-Maclaurin series, Halley's iteration); the coefficients are our own
fits (``tools/gen_special_coeffs.py``). No SciPy at run time.

Measured maximum errors against mpmath (float64, ulps; float32 results are the correctly
rounded value except for at most 1 ulp) are listed in each kernel's docstring and in
``tests/lax/test_special.py``, which checks them against SciPy.
"""
from __future__ import annotations

import math

import numba
import numpy as np

from lax import special_coeffs as C

# (no C-callable wrapper: these are called from Python or by name from compiled code)
_jit = numba.njit(cache=True, error_model="numpy", nogil=True, no_cfunc_wrapper=True)

INF = math.inf
NAN = math.nan
PI = math.pi
EULER = 0.57721566490153286061
HALF_LOG_2PI = 0.91893853320467274178
SQRT_PI_2 = 0.88622692545275801365          # sqrt(pi) / 2
TINY = 2.0 ** -30


@_jit
def _cheb(cs, t):
    """Clenshaw's recurrence for sum' c_k T_k(t) (cs[0] holds c_0 / 2)."""
    b1 = 0.0
    b2 = 0.0
    t2 = 2.0 * t
    for k in range(len(cs) - 1, 0, -1):
        b0 = cs[k] + t2 * b1 - b2
        b2 = b1
        b1 = b0
    return cs[0] + t * b1 - b2


@_jit
def _sinpi_abs(a):
    """|sin(pi a)| for a >= 0, with the exact reduction a -> frac(a) (no pi*a rounding)."""
    f = a - math.floor(a)
    if f > 0.5:
        f = 1.0 - f
    return math.sin(PI * f)


@_jit
def _pi_cot_pi(a):
    """pi * cot(pi a) for a > 0 not an integer, reduced exactly by periodicity."""
    f = a - math.floor(a)
    sign = 1.0
    if f > 0.5:
        f = 1.0 - f
        sign = -1.0
    if f < 0.25:
        c = 1.0 / math.tan(PI * f)
    else:
        c = math.tan(PI * (0.5 - f))
    return sign * PI * c


# ------------------------------------------------------------------------------ lgamma

@_jit
def _lgamma_pos(x, U, nstir):
    """log Gamma(x) for finite x > 0.

    (0, 1): lgamma(x + 1) - log(x); [1, 3]: (x-1)(x-2) U(x), U a Chebyshev series of the
    zero-free lgamma(x)/((x-1)(x-2)), so the zeros at 1 and 2 keep full relative accuracy;
    [3, 13): downward recurrence to [2, 3); >= 13: Stirling's series.
    """
    if x < 1.0:
        return x * (x - 1.0) * _cheb(U, x - 1.0) - math.log(x)
    if x <= 3.0:
        # (+ 0.0: lgamma(1) and lgamma(2) are +0, not the -0 of the product)
        return (x - 1.0) * (x - 2.0) * _cheb(U, x - 2.0) + 0.0
    if x < 13.0:
        prod = 1.0
        while x >= 3.0:
            x -= 1.0
            prod *= x
        return math.log(prod) + (x - 1.0) * (x - 2.0) * _cheb(U, x - 2.0)
    r = 1.0 / x
    r2 = r * r
    s = 0.0
    for k in range(nstir - 1, -1, -1):
        s = s * r2 + C.STIRLING[k]
    return (x - 0.5) * (math.log(x) - 1.0) + (HALF_LOG_2PI - 0.5) + s * r


@_jit
def _lgamma(x, U, nstir):
    if math.isnan(x):
        return x
    if math.isinf(x):
        return INF
    ax = abs(x)
    if ax < TINY:
        if ax == 0.0:
            return INF
        return -math.log(ax) - EULER * x
    if x > 0.0:
        return _lgamma_pos(x, U, nstir)
    if x == math.floor(x):
        return INF
    # Gamma(x) Gamma(-x) = -pi / (x sin(pi x)); -x is exact.
    return math.log(PI / (ax * _sinpi_abs(ax))) - _lgamma_pos(ax, U, nstir)


@_jit
def lgamma_f64(x):
    """log|Gamma(x)|, float64. +inf at the poles (0, -1, ...) and at +-inf; NaN for NaN.
    Max error vs mpmath: 2 ulp for x > 0; for x < 0 the error is absolute (about 1 ulp of
    log(pi / |x sin(pi x)|)), so relative accuracy is lost near the negative zeros of
    lgamma (x ~ -2.457, -2.747, ...), as in every reflection-based implementation."""
    return _lgamma(np.float64(x), C.LGAMMA_U_64, 8)


@_jit
def lgamma_f32(x):
    """log|Gamma(x)|, float32 (float64 arithmetic, shorter series): max 1 ulp for x > 0;
    for x < 0 the error is absolute, below 2**-24 max(1, |lgamma x|), so many ulps of the
    tiny results next to the negative zeros (1353 at -2.7476826)."""
    return _lgamma(np.float64(x), C.LGAMMA_U_32, 3)


# ----------------------------------------------------------------------------- digamma

@_jit
def _digamma_13(x, V):
    """digamma on [1, 3]: (x - x0) V(x), x0 the positive root (split in two doubles)."""
    return ((x - C.DIGAMMA_ROOT_HI) - C.DIGAMMA_ROOT_LO) * _cheb(V, x - 2.0)


@_jit
def _digamma_pos(x, V, nasym):
    if x < 1.0:
        # digamma(x) = digamma(x + 1) - 1/x, with x + 1 never formed (t and the root
        # distance are computed from x exactly).
        d = (x + (1.0 - C.DIGAMMA_ROOT_HI)) - C.DIGAMMA_ROOT_LO
        return d * _cheb(V, x - 1.0) - 1.0 / x
    if x <= 3.0:
        return _digamma_13(x, V)
    if x < 10.0:
        acc = 0.0
        while x > 3.0:
            x -= 1.0
            acc += 1.0 / x
        return _digamma_13(x, V) + acc
    r2 = 1.0 / (x * x)
    s = 0.0
    for k in range(nasym - 1, -1, -1):
        s = s * r2 + C.DIGAMMA_ASYM[k]
    return math.log(x) - 0.5 / x - s * r2


@_jit
def _digamma(x, V, nasym):
    if math.isnan(x):
        return x
    if math.isinf(x):
        return INF if x > 0 else NAN
    ax = abs(x)
    if ax < TINY:
        if ax == 0.0:
            return -math.copysign(INF, x)
        return -1.0 / x - EULER
    if x > 0.0:
        return _digamma_pos(x, V, nasym)
    if x == math.floor(x):
        return NAN
    # Reflection: digamma(x) = digamma(1 - x) - pi cot(pi x), cot odd, reduced exactly.
    return _digamma_pos(1.0 + ax, V, nasym) + _pi_cot_pi(ax)


@_jit
def digamma_f64(x):
    """digamma(x) = d/dx log Gamma(x), float64. -inf at +0, +inf at -0 (SciPy's limits),
    NaN at the negative integers and -inf, +inf at +inf. Max error vs mpmath: 2 ulp for
    x > 0 (the positive root 1.4616... is resolved exactly); for x < 0 the error is
    absolute, relative accuracy is lost next to the negative roots."""
    return _digamma(np.float64(x), C.DIGAMMA_V_64, 8)


@_jit
def digamma_f32(x):
    """digamma(x), float32 (float64 arithmetic, shorter series)."""
    return _digamma(np.float64(x), C.DIGAMMA_V_32, 4)


# -------------------------------------------------------------------------------- zeta

@_jit
def _zeta(s, q):
    """Hurwitz zeta(s, q) = sum_k (q + k)^-s: a direct sum up to q + N >= 20, then the
    Euler-Maclaurin tail with up to 12 Bernoulli terms. s < 1: NaN; s == 1: +inf;
    q a non-positive integer: +inf; q < 0 with s not an integer: NaN (as SciPy)."""
    if math.isnan(s) or math.isnan(q):
        return NAN
    if s == 1.0:
        return INF
    if s < 1.0:
        return NAN
    if q <= 0.0:
        if q == math.floor(q):
            return INF
        if s != math.floor(s):
            return NAN
    if math.isinf(s):
        if q > 1.0:
            return 0.0
        if q == 1.0:
            return 1.0
        return INF
    if math.isinf(q):
        return 0.0
    # The j-th Euler-Maclaurin term relative to the tail is about (s)_2j / (2 pi a)^2j:
    # sum directly up to a >= max(20, 1.5 s), where 12 terms reach 2**-60 (for large s the
    # direct terms die out much earlier and the loop returns).
    # q + k is carried as a + alo (alo the rounding error of the running sum), and each
    # power corrected to first order, (a + alo)^-s = a^-s (1 - s alo / a): the result
    # is otherwise as sensitive to that rounding as s times an ulp. Neumaier's
    # compensated summation keeps the alternating sums of q < 0 accurate.
    total = 0.0
    comp = 0.0
    a = q
    alo = 0.0
    while a < 20.0 or a < 1.5 * s:
        term = math.pow(a, -s) * (1.0 - s * alo / a)
        if math.isinf(term):
            # (q + k)^-s overflowed (q next to a pole): it dominates every other term,
            # and the compensation below would turn inf - inf into NaN.
            return term
        t = total + term
        if abs(total) >= abs(term):
            comp += (total - t) + term
        else:
            comp += (term - t) + total
        total = t
        if a > 0.0 and (term == 0.0 or abs(term) < 1e-17 * abs(total)):
            return total + comp
        an = a + 1.0
        bv = an - a
        alo += (a - (an - bv)) + (1.0 - bv)
        a = an
    total += comp
    b = math.pow(a, -s) * (1.0 - s * alo / a)
    total += a * b / (s - 1.0) * (1.0 + alo / a) + 0.5 * b
    fac = s * b / a
    a2 = a * a
    for j in range(12):
        term = C.ZETA_EM[j] * fac
        total += term
        if abs(term) < 1e-17 * abs(total):
            break
        fac *= (s + 2.0 * j + 1.0) * (s + 2.0 * j + 2.0) / a2
    return total


@_jit
def zeta_f64(s, q):
    """Hurwitz zeta, float64: max 2 ulp vs mpmath for q > 0 (more for q < 0, where
    the terms of the sum alternate in sign)."""
    return _zeta(np.float64(s), np.float64(q))


@_jit
def zeta_f32(s, q):
    return _zeta(np.float64(s), np.float64(q))


@_jit
def _polygamma(n, x, V, nasym):
    if math.isnan(n) or math.isnan(x):
        return NAN
    if n != math.floor(n) or n < 0.0:
        return NAN
    if n == 0.0:
        return _digamma(x, V, nasym)
    fact = 1.0
    k = 2.0
    while k <= n:
        fact *= k
        k += 1.0
    r = fact * _zeta(n + 1.0, x)
    if 0.5 * n == math.floor(0.5 * n):
        r = -r
    return r


@_jit
def polygamma_f64(n, x):
    """polygamma(n, x) = (-1)^(n+1) n! zeta(n + 1, x) for integer n >= 1, digamma for
    n = 0, NaN for other n (as SciPy)."""
    return _polygamma(np.float64(n), np.float64(x), C.DIGAMMA_V_64, 8)


@_jit
def polygamma_f32(n, x):
    return _polygamma(np.float64(n), np.float64(x), C.DIGAMMA_V_32, 4)


# ------------------------------------------------------ regularized incomplete gamma

@_jit
def _log1pmx(t):
    """log(1 + t) - t without cancellation: for -0.5 <= t <= 2 through s = t / (2 + t),
    log(1 + t) = 2 atanh(s), so log(1 + t) - t = -t^2/(2 + t) + 2 (s^3/3 + s^5/5 + ...)."""
    if t < -0.5 or t > 2.0:
        return math.log1p(t) - t
    s = t / (2.0 + t)
    s2 = s * s
    term = s * s2
    acc = 0.0
    k = 3.0
    for _ in range(60):
        add = term / k
        acc += add
        if abs(add) <= 1e-17 * abs(acc):
            break
        term *= s2
        k += 2.0
    return -t * t / (2.0 + t) + 2.0 * acc


@_jit
def _lgamma1p(a):
    """lgamma(1 + a) for 0 <= a <= 2, exact in a (1 + a is never formed)."""
    return a * (a - 1.0) * _cheb(C.LGAMMA_U_64, a - 1.0)


@_jit
def _igam_log_prefactor(a, x):
    """log(x^a e^-x / Gamma(a + 1)). For a >= 10 in the form a log1pmx((x - a)/a)
    - log(2 pi a)/2 - (Stirling's correction), whose only large term is the result: the
    error is then that of the exponent, not of the cancelling a log x - x - lgamma(a+1)."""
    if a < 10.0:
        lg = _lgamma1p(a) if a <= 2.0 else _lgamma_pos(a + 1.0, C.LGAMMA_U_64, 8)
        return a * math.log(x) - x - lg
    r = 1.0 / a
    r2 = r * r
    st = 0.0
    for k in range(7, -1, -1):
        st = st * r2 + C.STIRLING[k]
    return a * _log1pmx((x - a) / a) - 0.5 * math.log(2.0 * PI * a) - st * r


_IGAM_MAXIT = 20000


@_jit
def _igam(a, x, want):
    """Regularized incomplete gamma: want 0 -> P(a, x), 1 -> Q(a, x), 2 -> dP/da.

    x >= max(a, 1.5): Q by the continued fraction (modified Lentz), P = 1 - Q;
    else a < 1 and Q wanted: Q = -expm1(u) - e^u a sum_n (-x)^n / (n! (a + n)) with
    u = a log x - lgamma(1 + a) (accurate when Q is small, x < 1.5);
    else: P by its power series x^a e^-x / Gamma(a+1) sum_n x^n / ((a+1)...(a+n)).
    dP/da differentiates the same series or fraction term by term (forward mode)."""
    if math.isnan(a) or math.isnan(x) or a < 0.0 or x < 0.0:
        return NAN
    if a == 0.0:
        if x > 0.0:
            return 1.0 if want == 0 else (0.0 if want == 1 else NAN)
        return NAN
    if x == 0.0:
        return 0.0 if want == 0 else (1.0 if want == 1 else 0.0)
    if math.isinf(x):
        if math.isinf(a):
            return NAN
        return 1.0 if want == 0 else 0.0
    if math.isinf(a):
        return 0.0 if want == 0 else (1.0 if want == 1 else 0.0)
    logx = math.log(x)
    if x >= a and x >= 1.5:
        # Q = x^a e^-x / Gamma(a) * h, h the continued fraction (and dh/da alongside)
        tiny = 1e-300
        b = x + 1.0 - a
        c = 1.0 / tiny
        dc = 0.0
        d = 1.0 / b
        dd = d * d
        h = d
        dh = dd
        i = 1.0
        for _ in range(_IGAM_MAXIT):
            an = -i * (i - a)
            b += 2.0
            den = an * d + b
            dden = i * d + an * dd - 1.0
            if abs(den) < tiny:
                den = tiny
            d = 1.0 / den
            dd = -dden * d * d
            cn = b + an / c
            dc = -1.0 + (i * c - an * dc) / (c * c)
            c = cn if abs(cn) >= tiny else tiny
            dl = d * c
            ddl = dd * c + d * dc
            dh = dh * dl + h * ddl
            h *= dl
            # (the a-derivative converges more slowly than the fraction itself)
            if abs(dl - 1.0) < 1e-16 and (want != 2 or abs(h * ddl) <= 1e-16 * abs(dh)):
                break
            i += 1.0
        f = math.exp(_igam_log_prefactor(a, x)) * a
        q = f * h
        if want == 1:
            return q
        if want == 0:
            return 1.0 - q
        dq = f * ((logx - _digamma_pos(a, C.DIGAMMA_V_64, 8)) * h + dh)
        return -dq
    if a < 1.0 and want == 1:
        u = a * logx - _lgamma1p(a)
        e = math.exp(u)
        t = 0.0
        term = 1.0
        n = 1.0
        for _ in range(200):
            term *= -x / n
            add = term / (a + n)
            t += add
            if abs(add) <= 1e-17 * abs(t):
                break
            n += 1.0
        return -math.expm1(u) - e * a * t
    # the power series of P, with its a-derivative
    t = 1.0
    dt = 0.0
    ssum = 1.0
    dsum = 0.0
    n = 1.0
    for _ in range(_IGAM_MAXIT):
        r = x / (a + n)
        dt = (dt - t / (a + n)) * r
        t *= r
        ssum += t
        dsum += dt
        if t <= 1e-17 * ssum and (want != 2 or abs(dt) <= 1e-17 * abs(dsum)):
            break
        n += 1.0
    dpre = math.exp(_igam_log_prefactor(a, x))
    p = dpre * ssum
    if want == 0:
        return p
    if want == 1:
        return 1.0 - p
    return dpre * ((logx - _digamma_pos(a + 1.0, C.DIGAMMA_V_64, 8)) * ssum + dsum)


@_jit
def igamma_f64(a, x):
    """Regularized lower incomplete gamma P(a, x), float64 (see _igam)."""
    return _igam(np.float64(a), np.float64(x), 0)


@_jit
def igamma_f32(a, x):
    return _igam(np.float64(a), np.float64(x), 0)


@_jit
def igammac_f64(a, x):
    """Regularized upper incomplete gamma Q(a, x) = 1 - P(a, x), float64."""
    return _igam(np.float64(a), np.float64(x), 1)


@_jit
def igammac_f32(a, x):
    return _igam(np.float64(a), np.float64(x), 1)


@_jit
def igamma_grad_a_f64(a, x):
    """dP(a, x)/da, float64."""
    return _igam(np.float64(a), np.float64(x), 2)


@_jit
def igamma_grad_a_f32(a, x):
    return _igam(np.float64(a), np.float64(x), 2)


# ------------------------------------------------------- regularized incomplete beta

@_jit
def _betainc(a, b, x):
    """I_x(a, b) = B(x; a, b) / B(a, b): the continued fraction (DLMF 8.17.22, modified
    Lentz) on the side x < (a + 1)/(a + b + 2) where it converges fast, else
    1 - I_{1-x}(b, a). The prefactor x^a (1-x)^b / (a B(a, b)) is formed in logs: its
    relative error is about 2**-53 times the size of those logs (so ~1e-13 for a, b ~ 100).
    SciPy's special values: a == 0 -> 1, b == 0 -> 0, a == b == 0 -> NaN."""
    if math.isnan(a) or math.isnan(b) or math.isnan(x):
        return NAN
    if a < 0.0 or b < 0.0 or x < 0.0 or x > 1.0 or (a == 0.0 and b == 0.0):
        return NAN
    if a == 0.0:
        return 1.0
    if b == 0.0:
        return 0.0
    if math.isinf(a) and math.isinf(b):
        return NAN
    if math.isinf(a):
        return 1.0 if x == 1.0 else 0.0
    if math.isinf(b):
        return 0.0 if x == 0.0 else 1.0
    if x == 0.0:
        return 0.0
    if x == 1.0:
        return 1.0
    swap = x * (a + b + 2.0) > a + 1.0
    if swap:
        a, b = b, a
        xs = 1.0 - x
        ys = x
    else:
        xs = x
        ys = 1.0 - x
    lbeta = (_lgamma(a, C.LGAMMA_U_64, 8) + _lgamma(b, C.LGAMMA_U_64, 8)
             - _lgamma(a + b, C.LGAMMA_U_64, 8))
    # log(1 - xs) from whichever of xs, ys is exact
    logy = math.log(ys) if swap else math.log1p(-xs)
    logx = math.log1p(-ys) if swap and ys < 0.5 else math.log(xs)
    pre = math.exp(a * logx + b * logy - math.log(a) - lbeta)
    tiny = 1e-300
    qab = a + b
    c = 1.0
    d = 1.0 - qab * xs / (a + 1.0)
    if abs(d) < tiny:
        d = tiny
    d = 1.0 / d
    h = d
    m = 1.0
    for _ in range(_IGAM_MAXIT):
        m2 = 2.0 * m
        aa = m * (b - m) * xs / ((a - 1.0 + m2) * (a + m2))
        d = 1.0 + aa * d
        if abs(d) < tiny:
            d = tiny
        c = 1.0 + aa / c
        if abs(c) < tiny:
            c = tiny
        d = 1.0 / d
        h *= d * c
        aa = -(a + m) * (qab + m) * xs / ((a + m2) * (a + 1.0 + m2))
        d = 1.0 + aa * d
        if abs(d) < tiny:
            d = tiny
        c = 1.0 + aa / c
        if abs(c) < tiny:
            c = tiny
        d = 1.0 / d
        dl = d * c
        h *= dl
        if abs(dl - 1.0) < 1e-16:
            break
        m += 1.0
    r = pre * h
    return 1.0 - r if swap else r


@_jit
def betainc_f64(a, b, x):
    """Regularized incomplete beta I_x(a, b), float64 (see _betainc)."""
    return _betainc(np.float64(a), np.float64(b), np.float64(x))


@_jit
def betainc_f32(a, b, x):
    return _betainc(np.float64(a), np.float64(b), np.float64(x))


# --------------------------------------------------------------------------- erf, erfc

@_jit
def _exp_neg_sq(x):
    """exp(-x*x) with the rounding error of x*x compensated (Veltkamp's split), so the
    result keeps full relative accuracy for large x."""
    hi = x * x
    c = 134217729.0 * x
    xh = c - (c - x)
    xl = x - xh
    lo = ((xh * xh - hi) + 2.0 * xh * xl) + xl * xl
    return math.exp(-hi) * (1.0 - lo)


@_jit
def _erfcx_pos(x, A, B, G):
    """exp(x*x) erfc(x) for x >= 0.5 (finite)."""
    if x < 2.5:
        return _cheb(A, x - 1.5)
    if x < 6.5:
        return _cheb(B, (x - 4.5) * 0.5)
    u = 1.0 / (x * x)
    return _cheb(G, u * (2.0 / C.ERFCX_U_MAX) - 1.0) / x


@_jit
def _erfc_pos(x, A, B, G):
    """erfc(x) for x >= 0.5."""
    if x >= 27.3:
        return 0.0
    return _exp_neg_sq(x) * _erfcx_pos(x, A, B, G)


@_jit
def _erf(x, E, A, B, G):
    if math.isnan(x):
        return x
    ax = abs(x)
    if ax <= 1.0:
        return x * _cheb(E, 2.0 * x * x - 1.0)
    if ax >= 6.0:
        return math.copysign(1.0, x)
    return math.copysign(1.0 - _erfc_pos(ax, A, B, G), x)


@_jit
def _erfc(x, E, A, B, G):
    if math.isnan(x):
        return x
    if abs(x) < 0.5:
        return 1.0 - x * _cheb(E, 2.0 * x * x - 1.0)
    if x > 0.0:
        return _erfc_pos(x, A, B, G)
    return 2.0 - _erfc_pos(-x, A, B, G)


@_jit
def _erfcx(x, E, A, B, G):
    """exp(x*x) erfc(x): the Chebyshev tables for x >= 0.5, exp(x*x) erfc(x) directly
    below (no cancellation), 2 exp(x*x) - erfcx(-x) for x <= -0.5 (compensated x*x;
    +inf below -26.6)."""
    if math.isnan(x):
        return x
    if x >= 0.5:
        if math.isinf(x):
            return 0.0
        return _erfcx_pos(x, A, B, G)
    if x > -0.5:
        return math.exp(x * x) * _erfc(x, E, A, B, G)
    if x < -26.7:
        return INF
    hi = x * x
    c = 134217729.0 * x
    xh = c - (c - x)
    xl = x - xh
    lo = ((xh * xh - hi) + 2.0 * xh * xl) + xl * xl
    return 2.0 * (math.exp(hi) * (1.0 + lo)) - _erfcx_pos(-x, A, B, G)


@_jit
def erf_f64(x):
    """erf(x), float64: max 1 ulp vs mpmath."""
    return _erf(np.float64(x), C.ERF_E_64, C.ERFCX_A_64, C.ERFCX_B_64, C.ERFCX_G_64)


@_jit
def erf_f32(x):
    return _erf(np.float64(x), C.ERF_E_32, C.ERFCX_A_32, C.ERFCX_B_32, C.ERFCX_G_32)


@_jit
def erfc_f64(x):
    """erfc(x), float64: max 2 ulp vs mpmath over the whole range, including the large-x
    tail down to the subnormals (x < 26.6) where exp(-x*x) is computed compensated."""
    return _erfc(np.float64(x), C.ERF_E_64, C.ERFCX_A_64, C.ERFCX_B_64, C.ERFCX_G_64)


@_jit
def erfc_f32(x):
    return _erfc(np.float64(x), C.ERF_E_32, C.ERFCX_A_32, C.ERFCX_B_32, C.ERFCX_G_32)


@_jit
def erfcx_f64(x):
    """Scaled complementary error function exp(x*x) erfc(x), float64: max 2 ulp."""
    return _erfcx(np.float64(x), C.ERF_E_64, C.ERFCX_A_64, C.ERFCX_B_64, C.ERFCX_G_64)


@_jit
def erfcx_f32(x):
    return _erfcx(np.float64(x), C.ERF_E_32, C.ERFCX_A_32, C.ERFCX_B_32, C.ERFCX_G_32)


# ---------------------------------------------------------------------- erf_inv, erfc_inv

@_jit
def _solve_erf(p, tol, maxit, E, A, B, G):
    """x >= 0 with erf(x) = p, for 0 < p <= 0.53: a Chebyshev starting value (relative
    error < 2**-34; fitted up to 0.5, slightly extrapolated above), then Halley's
    iteration until the step is below ``tol`` (relative; with cubic convergence the next
    error is then far below the rounding error)."""
    x = p * _cheb(C.ERFINV_GUESS, 8.0 * p * p - 1.0)
    for _ in range(maxit):
        d = (_erf(x, E, A, B, G) - p) * SQRT_PI_2 * math.exp(x * x)
        x = x - d / (1.0 + x * d)
        if abs(d) <= tol * x:
            break
    return x


@_jit
def _solve_erfc(c, tol, maxit, E, A, B, G):
    """x >= 0 with erfc(x) = c, for 0 < c <= 0.47: a Chebyshev starting value in
    w = sqrt(-log c) (relative error < 2**-34), then Halley's iteration on the relative
    residual erfc(x)/c - 1 (no exp(x*x) overflow, even for subnormal c)."""
    logc = math.log(c)
    w = math.sqrt(-logc)
    if w < 2.25:
        x = _cheb(C.ERFCINV_GUESS_A, (w - 1.5) * (1.0 / 0.75))
    elif w < 6.25:
        x = _cheb(C.ERFCINV_GUESS_B, (w - 4.25) * 0.5)
    else:
        x = _cheb(C.ERFCINV_GUESS_C, (w - 17.25) * (1.0 / 11.0))
    for _ in range(maxit):
        if c < 1e-290:
            # erfc(x) itself would be subnormal here: form erfc(x)/c as
            # exp(-(x*x + log c)) erfcx(x), with x*x compensated (x > 25 here).
            hi = x * x
            k = 134217729.0 * x
            xh = k - (k - x)
            xl = x - xh
            lo = ((xh * xh - hi) + 2.0 * xh * xl) + xl * xl
            r = math.exp(-(hi + logc)) * (1.0 - lo) * _erfcx_pos(x, A, B, G) - 1.0
        else:
            r = _erfc(x, E, A, B, G) / c - 1.0
        d = -r * SQRT_PI_2 * math.exp(logc + x * x)
        x = x - d / (1.0 + x * d)
        if abs(d) <= tol * x:
            break
    return x


@_jit
def _erf_inv(y, tol, maxit, E, A, B, G):
    if math.isnan(y):
        return y
    p = abs(y)
    if p > 1.0:
        return NAN
    if p == 1.0:
        return math.copysign(INF, y)
    if p == 0.0:
        return y
    # (the erfc form only where erfc(x) has full relative accuracy: x > 0.5)
    if p <= 0.53:
        x = _solve_erf(p, tol, maxit, E, A, B, G)
    else:
        x = _solve_erfc(1.0 - p, tol, maxit, E, A, B, G)
    return math.copysign(x, y)


@_jit
def _erfc_inv(c, tol, maxit, E, A, B, G):
    if math.isnan(c) or c < 0.0 or c > 2.0:
        return NAN
    if c == 0.0:
        return INF
    if c == 2.0:
        return -INF
    if c <= 0.47:
        return _solve_erfc(c, tol, maxit, E, A, B, G)
    if c >= 1.53:
        return -_solve_erfc(2.0 - c, tol, maxit, E, A, B, G)
    return _erf_inv(1.0 - c, tol, maxit, E, A, B, G)


@_jit
def erf_inv_f64(y):
    """Inverse of erf on [-1, 1] (+-inf at +-1, NaN outside), float64: max 2 ulp vs
    mpmath; near |y| = 1 the solve runs on 1 - |y| (exact), so the tail keeps full
    accuracy."""
    return _erf_inv(np.float64(y), 1e-8, 3, C.ERF_E_64, C.ERFCX_A_64, C.ERFCX_B_64,
                    C.ERFCX_G_64)


@_jit
def erf_inv_f32(y):
    """float32: the Chebyshev starting value alone (relative error < 2**-34)."""
    return _erf_inv(np.float64(y), 1e-4, 0, C.ERF_E_32, C.ERFCX_A_32, C.ERFCX_B_32,
                    C.ERFCX_G_32)


@_jit
def erfc_inv_f64(c):
    """Inverse of erfc on [0, 2] (+inf at 0, -inf at 2, NaN outside), float64: relative
    accuracy for tiny c down to the subnormals."""
    return _erfc_inv(np.float64(c), 1e-8, 3, C.ERF_E_64, C.ERFCX_A_64, C.ERFCX_B_64,
                     C.ERFCX_G_64)


@_jit
def erfc_inv_f32(c):
    return _erfc_inv(np.float64(c), 1e-4, 0, C.ERF_E_32, C.ERFCX_A_32, C.ERFCX_B_32,
                     C.ERFCX_G_32)


# --------------------------------------------------------------------------- i0e, i1e

@_jit
def _i0e(x, A, M, B, G):
    ax = abs(x)
    if ax <= 2.0:
        return _cheb(A, ax - 1.0)
    if ax <= 4.0:
        return _cheb(M, ax - 3.0)
    if ax <= 8.0:
        return _cheb(B, (ax - 6.0) * 0.5)
    if math.isinf(ax):
        return 0.0
    return _cheb(G, 16.0 / ax - 1.0) / math.sqrt(ax)


@_jit
def _i1e(x, A, M, B, G):
    ax = abs(x)
    if ax <= 2.0:
        return x * _cheb(A, ax - 1.0)
    if ax <= 4.0:
        return x * _cheb(M, ax - 3.0)
    if ax <= 8.0:
        return x * _cheb(B, (ax - 6.0) * 0.5)
    if math.isinf(ax):
        return math.copysign(0.0, x)
    return math.copysign(_cheb(G, 16.0 / ax - 1.0) / math.sqrt(ax), x)


@_jit
def bessel_i0e_f64(x):
    """exp(-|x|) I0(x), float64: max 2 ulp vs mpmath."""
    return _i0e(np.float64(x), C.I0E_A_64, C.I0E_M_64, C.I0E_B_64, C.I0E_C_64)


@_jit
def bessel_i0e_f32(x):
    return _i0e(np.float64(x), C.I0E_A_32, C.I0E_M_32, C.I0E_B_32, C.I0E_C_32)


@_jit
def bessel_i1e_f64(x):
    """exp(-|x|) I1(x), float64: max 2 ulp vs mpmath."""
    return _i1e(np.float64(x), C.I1E_A_64, C.I1E_M_64, C.I1E_B_64, C.I1E_C_64)


@_jit
def bessel_i1e_f32(x):
    return _i1e(np.float64(x), C.I1E_A_32, C.I1E_M_32, C.I1E_B_32, C.I1E_C_32)


# ------------------------------------------------------------------------- registry

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)

# primitive name -> {dtype: scalar kernel}. float16 uses the float32 kernel (computed
# wider, rounded on store). Binary kernels take (operand0, operand1).
KERNELS = {
    "lgamma": {_F32: lgamma_f32, _F64: lgamma_f64},
    "digamma": {_F32: digamma_f32, _F64: digamma_f64},
    "zeta": {_F32: zeta_f32, _F64: zeta_f64},
    "polygamma": {_F32: polygamma_f32, _F64: polygamma_f64},
    "erf": {_F32: erf_f32, _F64: erf_f64},
    "erfc": {_F32: erfc_f32, _F64: erfc_f64},
    "erfcx": {_F32: erfcx_f32, _F64: erfcx_f64},
    "erf_inv": {_F32: erf_inv_f32, _F64: erf_inv_f64},
    "erfc_inv": {_F32: erfc_inv_f32, _F64: erfc_inv_f64},
    "bessel_i0e": {_F32: bessel_i0e_f32, _F64: bessel_i0e_f64},
    "bessel_i1e": {_F32: bessel_i1e_f32, _F64: bessel_i1e_f64},
    "igamma": {_F32: igamma_f32, _F64: igamma_f64},
    "igammac": {_F32: igammac_f32, _F64: igammac_f64},
    "igamma_grad_a": {_F32: igamma_grad_a_f32, _F64: igamma_grad_a_f64},
    "betainc": {_F32: betainc_f32, _F64: betainc_f64},
}

NARGS = {"zeta": 2, "polygamma": 2, "igamma": 2, "igammac": 2, "igamma_grad_a": 2,
         "betainc": 3}

_UFUNCS: dict = {}


def kernel(name: str, dtype):
    """The njit scalar kernel of primitive ``name`` for operands of ``dtype``."""
    dtype = np.dtype(dtype)
    table = KERNELS[name]
    return table[_F64] if dtype == _F64 else table[_F32]


def ufunc(name: str, dtype):
    """A NumPy ufunc running the kernel of ``name`` element-wise (compiled on first use;
    float16 operands run the float32 kernel)."""
    dtype = np.dtype(dtype)
    key_dt = _F64 if dtype == _F64 else _F32
    key = (name, key_dt)
    u = _UFUNCS.get(key)
    if u is None:
        nargs = NARGS.get(name, 1)
        sig = f"{key_dt.name}({', '.join([key_dt.name] * nargs)})"
        # Building a ufunc lowers its loop wrapper with the CPU target's registries; a
        # process that has only loaded cached code (numba_backend._numba loads without
        # installing them) has none yet, and the wrapper would fail to lower a cast.
        from numba.core.registry import cpu_target
        cpu_target.target_context.refresh()
        u = numba.vectorize([sig], cache=True)(kernel(name, key_dt))
        _UFUNCS[key] = u
    return u


def apply(name: str, *args):
    """Run kernel ``name`` on NumPy arrays of one floating dtype; returns that dtype."""
    dtype = np.result_type(*args)
    u = ufunc(name, dtype)
    work = _F64 if dtype == _F64 else _F32
    with np.errstate(all="ignore"):
        out = u(*[np.asarray(a, work) for a in args])
    return np.asarray(out, dtype)
