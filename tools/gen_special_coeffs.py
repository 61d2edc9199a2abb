"""Generates ``lax/special_coeffs.py``: the Chebyshev expansions and series constants used
by the special-function kernels in ``lax/special_kernels.py`` and
``lax/special_extra_kernels.py``.

Development tool only (needs mpmath, which the project does not depend on):

    python tools/gen_special_coeffs.py > lax/special_coeffs.py

Every approximation is a truncated Chebyshev series of a smooth, zero-free auxiliary
function on an interval whose centre and half-width are exact binary numbers, so that the
kernel's map ``t = (x - centre) * scale`` is exact. Coefficients are computed at 50 digits
by the discrete cosine transform at Chebyshev nodes and truncated where the tail sum falls
below the target relative error (2**-57 for float64, 2**-31 for float32, both relative to
the smallest value of the function on the interval). The script then evaluates each series
in double precision with Clenshaw's recurrence at random points and prints the measured
maximum error (in units of 2**-53) as a comment beside the table.
"""
from __future__ import annotations

import math
import random
import sys
from fractions import Fraction

import mpmath as mp

mp.mp.dps = 50
NODES = 96
TOL64 = mp.mpf(2) ** -57
TOL32 = mp.mpf(2) ** -31


def cheb_coeffs(f, lo, hi, n=NODES):
    """Chebyshev coefficients of f on [lo, hi]; c[0] already halved."""
    lo, hi = mp.mpf(lo), mp.mpf(hi)
    c, h = (lo + hi) / 2, (hi - lo) / 2
    thetas = [mp.pi * (j + mp.mpf(0.5)) / n for j in range(n)]
    vals = [f(c + h * mp.cos(th)) for th in thetas]
    coeffs = []
    for k in range(n):
        s = mp.fsum(v * mp.cos(k * th) for v, th in zip(vals, thetas))
        coeffs.append(2 * s / n)
    coeffs[0] /= 2
    return coeffs, min(abs(v) for v in vals)


def truncate(coeffs, fmin, tol):
    for n in range(1, len(coeffs)):
        tail = mp.fsum(abs(x) for x in coeffs[n:])
        if tail <= tol * fmin:
            return coeffs[:n]
    raise ValueError("series does not converge to the tolerance with the nodes given")


def clenshaw(cs, t):
    b1 = b2 = 0.0
    for ck in reversed(cs[1:]):
        b1, b2 = ck + 2.0 * t * b1 - b2, b1
    return cs[0] + t * b1 - b2


def measure(f, lo, hi, cs, unit, samples=400):
    rng = random.Random(0)
    c, s = (lo + hi) / 2, 2 / (hi - lo)
    worst = 0.0
    for i in range(samples):
        x = lo + (hi - lo) * rng.random()
        t = (x - c) * s
        got = clenshaw(cs, t)
        ref = f(mp.mpf(x))
        err = abs((mp.mpf(got) - ref) / ref) * 2 ** unit
        worst = max(worst, float(err))
    return worst


TABLES = []


def fit(name, f, lo, hi, note):
    coeffs, fmin = cheb_coeffs(f, lo, hi)
    for suffix, tol, unit in (("64", TOL64, 53), ("32", TOL32, 24)):
        cs = [float(x) for x in truncate(coeffs, fmin, tol)]
        err = measure(f, lo, hi, cs, unit)
        TABLES.append((f"{name}_{suffix}", cs, lo, hi, note, err, unit))


# ----------------------------------------------------------------------------- lgamma
def lgamma_u(x):
    # lgamma(x) / ((x - 1)(x - 2)); the removable points are never nodes (even count).
    return mp.loggamma(x) / ((x - 1) * (x - 2))


fit("LGAMMA_U", lgamma_u, 1.0, 3.0, "lgamma(x) / ((x-1)(x-2)) on [1, 3]")

# ---------------------------------------------------------------------------- digamma
DIGAMMA_ROOT = mp.findroot(mp.digamma, mp.mpf("1.4616321449683623"))
ROOT_HI = float(DIGAMMA_ROOT)
ROOT_LO = float(DIGAMMA_ROOT - ROOT_HI)


def digamma_v(x):
    return mp.digamma(x) / (x - DIGAMMA_ROOT)


fit("DIGAMMA_V", digamma_v, 1.0, 3.0, "digamma(x) / (x - x0) on [1, 3], x0 its positive root")

# -------------------------------------------------------------------------- erf / erfc


def erf_e(t):
    # erf(sqrt(t)) / sqrt(t) as a function of t = x**2 on [0, 1].
    if t == 0:
        return 2 / mp.sqrt(mp.pi)
    r = mp.sqrt(t)
    return mp.erf(r) / r


fit("ERF_E", erf_e, 0.0, 1.0, "erf(x) / x as a function of t = x*x, t in [0, 1]")


def erfcx(x):
    return mp.exp(x * x) * mp.erfc(x)


fit("ERFCX_A", erfcx, 0.5, 2.5, "exp(x*x) * erfc(x) on [0.5, 2.5]")
fit("ERFCX_B", erfcx, 2.5, 6.5, "exp(x*x) * erfc(x) on [2.5, 6.5]")
ERFCX_U_MAX = 1.0 / (6.5 * 6.5)


def erfcx_g(u):
    # x * erfcx(x) as a function of u = 1/x**2 on [0, 1/6.5**2].
    if u == 0:
        return 1 / mp.sqrt(mp.pi)
    x = 1 / mp.sqrt(u)
    return x * erfcx(x)


fit("ERFCX_G", erfcx_g, 0.0, ERFCX_U_MAX, "x * erfcx(x) as a function of u = 1/x**2, x >= 6.5")

# ------------------------------------------------------ erf_inv starting values
# Halley's iteration in the kernels converges from these in one step (float64) and they
# alone are well below float32's rounding; one table each, 2**-34 relative.
TOL_GUESS = mp.mpf(2) ** -34


def erfcinv_mp(c):
    return mp.findroot(lambda x: mp.log(mp.erfc(x)) - mp.log(c), mp.sqrt(-mp.log(c)))


def erfinv_over_y(t):
    # erfinv(sqrt(t)) / sqrt(t) for t = y**2 in [0, 1/4].
    if t == 0:
        return mp.sqrt(mp.pi) / 2
    r = mp.sqrt(t)
    return mp.erfinv(r) / r


def erfcinv_of_w(w):
    # erfcinv(c) as a function of w = sqrt(-log(c)).
    return erfcinv_mp(mp.exp(-w * w))


def fit_guess(name, f, lo, hi, note):
    coeffs, fmin = cheb_coeffs(f, lo, hi, n=48)
    cs = [float(x) for x in truncate(coeffs, fmin, TOL_GUESS)]
    err = measure(f, lo, hi, cs, 34, samples=100)
    TABLES.append((name, cs, lo, hi, note, err, 34))


fit_guess("ERFINV_GUESS", erfinv_over_y, 0.0, 0.25,
          "erfinv(y) / y as a function of t = y*y, t in [0, 1/4]")
fit_guess("ERFCINV_GUESS_A", erfcinv_of_w, 0.75, 2.25,
          "erfcinv(c) as a function of w = sqrt(-log c), w in [0.75, 2.25]")
fit_guess("ERFCINV_GUESS_B", erfcinv_of_w, 2.25, 6.25,
          "erfcinv(c) as a function of w = sqrt(-log c), w in [2.25, 6.25]")
fit_guess("ERFCINV_GUESS_C", erfcinv_of_w, 6.25, 28.25,
          "erfcinv(c) as a function of w = sqrt(-log c), w in [6.25, 28.25]")

# --------------------------------------------------------------------------- i0e / i1e


def i0e(x):
    return mp.exp(-x) * mp.besseli(0, x)


def i1e_over_x(x):
    if x == 0:
        return mp.mpf(0.5)
    return mp.exp(-x) * mp.besseli(1, x) / x


fit("I0E_A", i0e, 0.0, 2.0, "exp(-x) * I0(x) on [0, 2]")
fit("I0E_M", i0e, 2.0, 4.0, "exp(-x) * I0(x) on [2, 4]")
fit("I0E_B", i0e, 4.0, 8.0, "exp(-x) * I0(x) on [4, 8]")
fit("I1E_A", i1e_over_x, 0.0, 2.0, "exp(-x) * I1(x) / x on [0, 2]")
fit("I1E_M", i1e_over_x, 2.0, 4.0, "exp(-x) * I1(x) / x on [2, 4]")
fit("I1E_B", i1e_over_x, 4.0, 8.0, "exp(-x) * I1(x) / x on [4, 8]")


def i0e_g(t):
    # sqrt(x) * i0e(x) as a function of t = 8/x on (0, 1].
    if t == 0:
        return 1 / mp.sqrt(2 * mp.pi)
    x = 8 / t
    return mp.sqrt(x) * i0e(x)


def i1e_g(t):
    if t == 0:
        return 1 / mp.sqrt(2 * mp.pi)
    x = 8 / t
    return mp.sqrt(x) * mp.exp(-x) * mp.besseli(1, x)


fit("I0E_C", i0e_g, 0.0, 1.0, "sqrt(x) * i0e(x) as a function of t = 8/x, x >= 8")
fit("I1E_C", i1e_g, 0.0, 1.0, "sqrt(x) * i1e(x) as a function of t = 8/x, x >= 8")


# ------------------------------------------ dawsn, expi (lax/special_extra_kernels.py)


def dawsn(x):
    return mp.sqrt(mp.pi) / 2 * mp.exp(-x * x) * mp.erfi(x)


def expi_g(x):
    # x e^-x Ei(x): smooth, 1 + 1/x + 2/x**2 + ... for large x.
    return x * mp.exp(-x) * mp.ei(x)


fit("DAWSN_A", dawsn, 2.0, 4.0, "Dawson's integral on [2, 4]")
fit("DAWSN_B", dawsn, 4.0, 8.0, "Dawson's integral on [4, 8]")
fit("EXPI_A", expi_g, 4.0, 8.0, "x exp(-x) Ei(x) on [4, 8]")
fit("EXPI_B", expi_g, 8.0, 16.0, "x exp(-x) Ei(x) on [8, 16]")
fit("EXPI_C", expi_g, 16.0, 32.0, "x exp(-x) Ei(x) on [16, 32]")
fit("EXPI_D", expi_g, 32.0, 64.0, "x exp(-x) Ei(x) on [32, 64]")


# ------------------------------------------------------------------ series constants
def bernoulli(n):
    return Fraction(mp.bernfrac(n)[0], mp.bernfrac(n)[1])


STIRLING = [float(bernoulli(2 * k) / (2 * k * (2 * k - 1))) for k in range(1, 10)]
DIGAMMA_ASYM = [float(bernoulli(2 * k) / (2 * k)) for k in range(1, 10)]
# Euler-Maclaurin tail of the Hurwitz zeta function: B_2j / (2j)!.
ZETA_EM = [float(bernoulli(2 * j) / math.factorial(2 * j)) for j in range(1, 13)]


def fmt(v):
    return repr(float(v))


def main(out=sys.stdout):
    w = out.write
    w('"""Coefficient tables of the special-function kernels (lax/special_kernels.py,\n')
    w('lax/special_extra_kernels.py).\n\n')
    w("Generated by tools/gen_special_coeffs.py (mpmath, 50 digits); do not edit by hand.\n")
    w("Chebyshev tables hold c[0]/2, c[1], ... for Clenshaw's recurrence in\n")
    w("t = (x - centre) * scale on the interval named beside each table. The _64 tables\n")
    w("target 2**-57 relative truncation error, the _32 tables 2**-31.\n")
    w('"""\n')
    w("import numpy as np\n\n")
    for name, cs, lo, hi, note, err, unit in TABLES:
        w(f"# {note}; {len(cs)} terms; measured max relative error of the series alone, "
          f"evaluated in double: {err:.3g} x 2**-{unit}\n")
        w(f"{name} = np.array([\n")
        for c in cs:
            w(f"    {fmt(c)},\n")
        w("])\n\n")
    w(f"DIGAMMA_ROOT_HI = {fmt(ROOT_HI)}\n")
    w(f"DIGAMMA_ROOT_LO = {fmt(ROOT_LO)}\n")
    w(f"ERFCX_U_MAX = {fmt(ERFCX_U_MAX)}\n\n")
    w("# B_2k / (2k (2k - 1)), k = 1.. (Stirling's series of lgamma)\n")
    w(f"STIRLING = np.array([{', '.join(fmt(v) for v in STIRLING)}])\n")
    w("# B_2k / (2k), k = 1.. (asymptotic series of digamma)\n")
    w(f"DIGAMMA_ASYM = np.array([{', '.join(fmt(v) for v in DIGAMMA_ASYM)}])\n")
    w("# B_2j / (2j)!, j = 1..12 (Euler-Maclaurin tail of the Hurwitz zeta function)\n")
    w(f"ZETA_EM = np.array([{', '.join(fmt(v) for v in ZETA_EM)}])\n")


if __name__ == "__main__":
    main()
