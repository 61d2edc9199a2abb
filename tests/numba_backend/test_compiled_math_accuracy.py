"""Accuracy of every real transcendental function the compiled kernels compute, against
correctly rounded references, special values included.

Each dtype's functions run as one compiled kernel (one program with an output per
function, run through ``Executable.run_compiled``) on arrays of ``NUMPY_LOOP_MIN_ELEMENTS
- 1`` elements: from that size up, outside loop bodies, several of them run NumPy's loops
as host steps instead (``lowering.rules.NUMPY_LOOPS``), whose results are eager's.

Inputs: float32, every ``STEP``-th of the 2**32 bit patterns (every binade, both signs,
subnormals, infinities and NaNs), every float32 within 2**12 ulps of +-1, and the special
values below with both signs and both neighbours; float64, random bit patterns (every
binade alike), magnitudes log-uniform over [2**-40, 2**11] (where most functions are
neither trivial nor overflowing), 1 +- 2**-u, and the specials. pow and atan2 take a grid
of bit patterns by bit patterns plus pairs drawn where the result is neither trivial nor
out of range.

References: NumPy's longdouble functions (x87 extended precision here: 11 bits more than
float64, so rounding their value to float64 or float32 gives the correctly rounded
result but for inputs within about 2**-10 ulp of a tie); for float32 the special
functions take SciPy's float64 ones (errors near 1e-16, far below a float32 ulp). There is
no reference more precise than float64 for those in float64 (neither NumPy nor SciPy has
longdouble versions, and mpmath is not among the dependencies), so their float64 kernels
are not measured here; tests/test_scipy_special*.py compare them with SciPy.

Each function's largest error is pinned at what it measures (the tables in the
``numba_backend.vecmath`` docstring and README.md), in two ways: in ulps of the exact
value (the spacing of the floats around it; below 1 means one of those two floats, 0.5
up to the reference's own error means correctly rounded) and in ulps from the correctly
rounded result. The figures of the functions computed by the C library (glibc 2.36's
float32 and float64 routines) are that library's.
"""
import functools

import numpy as np
import pytest
import scipy.special as ss

import lax
import tracer
from lax import special_extra as sx
from lowering import rules
from lowering.ir import KernelStep
from tracer import _jit_backend

CHUNK = rules.NUMPY_LOOP_MIN_ELEMENTS - 1
STEP = 2053          # odd (a prime): the sampled patterns run through all low mantissa bits
LD = np.longdouble
F32, F64 = np.dtype(np.float32), np.dtype(np.float64)


def _erfinv(v):
    # (SciPy's erfinv takes seconds over a million arguments outside [-1, 1], all NaN)
    inside = np.abs(v) <= 1
    return np.where(inside, ss.erfinv(np.where(inside, v, 0)), np.nan)


def _lgamma(v):
    # C99's lgamma(-inf) is +inf, as the kernels'; SciPy's gammaln gives -inf
    return np.where(v == -np.inf, np.inf, ss.gammaln(v))


# name -> (traced function, reference, its kind, f(+-0) = +-0). A "ld" reference is a NumPy
# function applied in longdouble (C99 special values and signed zeros: they are checked
# against it), measured in float32 and float64; a "scipy" one a SciPy float64 function,
# measured in float32 only (its zeros' signs are not always right: erfinv(-0.0) is +0.0)
FUNCS = {
    "exp": (lax.exp, np.exp, "ld", False),
    "exp2": (lax.exp2, np.exp2, "ld", False),
    "expm1": (lax.expm1, np.expm1, "ld", True),
    "log": (lax.log, np.log, "ld", False),
    "log1p": (lax.log1p, np.log1p, "ld", True),
    "sin": (lax.sin, np.sin, "ld", True),
    "cos": (lax.cos, np.cos, "ld", False),
    "tan": (lax.tan, np.tan, "ld", True),
    "tanh": (lax.tanh, np.tanh, "ld", True),
    "sinh": (lax.sinh, np.sinh, "ld", True),
    "cosh": (lax.cosh, np.cosh, "ld", False),
    "asin": (lax.asin, np.arcsin, "ld", True),
    "acos": (lax.acos, np.arccos, "ld", False),
    "atan": (lax.atan, np.arctan, "ld", True),
    "asinh": (lax.asinh, np.arcsinh, "ld", True),
    "acosh": (lax.acosh, np.arccosh, "ld", False),
    "atanh": (lax.atanh, np.arctanh, "ld", True),
    "sqrt": (lax.sqrt, np.sqrt, "ld", True),
    "rsqrt": (lax.rsqrt, lambda v: 1 / np.sqrt(v), "ld", False),
    "cbrt": (lax.cbrt, np.cbrt, "ld", True),
    "logistic": (lax.logistic, lambda v: 1 / (1 + np.exp(-v)), "ld", False),
    "erf": (lax.erf, ss.erf, "scipy", True),
    "erfc": (lax.erfc, ss.erfc, "scipy", False),
    "erfcx": (lax.erfcx, ss.erfcx, "scipy", False),
    "erf_inv": (lax.erf_inv, _erfinv, "scipy", True),
    "erfc_inv": (lax.erfc_inv, ss.erfcinv, "scipy", False),
    "lgamma": (lax.lgamma, _lgamma, "scipy", False),
    "digamma": (lax.digamma, ss.psi, "scipy", False),
    "bessel_i0e": (lax.bessel_i0e, ss.i0e, "scipy", False),
    "bessel_i1e": (lax.bessel_i1e, ss.i1e, "scipy", True),
    "expi": (sx.expi, ss.expi, "scipy", False),
    "dawsn": (sx.dawsn, ss.dawsn, "scipy", True),
    "si": (sx.si, lambda v: ss.sici(v)[0], "scipy", True),
    "ci": (sx.ci, lambda v: ss.sici(v)[1], "scipy", False),
    "fresnel_s": (sx.fresnel_s, lambda v: ss.fresnel(v)[0], "scipy", True),
    "fresnel_c": (sx.fresnel_c, lambda v: ss.fresnel(v)[1], "scipy", True),
    "spence": (sx.spence, ss.spence, "scipy", False),
}


def _reference(name, x):
    _, fn, kind, _ = FUNCS[name]
    with np.errstate(all="ignore"):
        if kind == "ld":
            return fn(x.astype(LD))
        return fn(x.astype(np.float64)).astype(LD)


# name -> (max error in ulps of the exact value, max ulps from the correctly rounded
# result), measured on this file's inputs (the first rounded up to two decimals, 0.51 for
# correctly rounded results: the references have errors of their own). In float64
# the second is 1 also where the first shows the results correctly rounded (sqrt): the
# longdouble reference rounded to float64 is off by one on rare near-ties.
BOUNDS = {
    F32: {
        # numba_backend.vecmath: float32 with FMA (exp, sin, cos), float64 rounded once
        # (log, tanh)
        "exp": (0.77, 1), "log": (0.51, 0), "sin": (0.72, 1), "cos": (0.72, 1),
        "tanh": (0.51, 0),
        # the C library's float32 functions
        "exp2": (0.51, 1), "expm1": (0.77, 1), "log1p": (0.75, 1), "tan": (1.27, 1),
        "sinh": (1.67, 2), "cosh": (1.49, 1), "asin": (0.78, 1), "acos": (0.87, 1),
        "atan": (0.83, 1), "asinh": (1.49, 1), "acosh": (1.84, 2), "atanh": (1.64, 2),
        "sqrt": (0.51, 0), "cbrt": (0.51, 0), "erf": (0.81, 1), "pow": (0.59, 1),
        "atan2": (1.35, 1),
        # float32 arithmetic on libm results: 1 / sqrt(x), 1 / (1 + exp(-x))
        "rsqrt": (1.48, 1), "logistic": (2.12, 2),
        # the special-function kernels (float64 arithmetic, rounded once)
        "erfc": (0.51, 1), "erfcx": (0.51, 1), "erf_inv": (0.55, 1), "erfc_inv": (0.54, 1),
        "lgamma": (0.51, 1), "digamma": (0.51, 1), "bessel_i0e": (0.51, 1),
        "bessel_i1e": (0.51, 1), "expi": (0.51, 1), "dawsn": (0.51, 1), "si": (0.51, 0),
        "ci": (0.51, 1), "fresnel_s": (0.51, 0), "fresnel_c": (0.51, 0),
        "spence": (0.51, 0),
    },
    F64: {
        "exp": (1.14, 1),                           # numba_backend.vecmath.exp_f64
        # the C library's float64 functions
        "exp2": (0.51, 1), "expm1": (0.8, 1), "log": (0.52, 1), "log1p": (0.75, 1),
        "sin": (0.52, 1), "cos": (0.57, 1), "tan": (0.56, 1), "tanh": (1.97, 2),
        "sinh": (1.72, 2), "cosh": (0.99, 1), "asin": (0.52, 1), "acos": (0.52, 1),
        "atan": (0.52, 1), "asinh": (1.51, 2), "acosh": (2.05, 2), "atanh": (1.52, 2),
        "sqrt": (0.51, 1), "cbrt": (3.19, 3), "pow": (0.51, 1), "atan2": (0.52, 1),
        # float64 arithmetic on libm results
        "rsqrt": (1.49, 1), "logistic": (2.0, 2),
    },
}


# Where 1 + exp(-x) overflows, logistic's 1 / (1 + exp(-x)) is 0 instead of the true
# subnormal or tiny normal, as eager's scipy.special.expit: the error is below 1 / max
# there, and the bounds hold for results from 1 / max up.
#
# For x < 0 the float32 lgamma and digamma (reflection, float64 arithmetic with float32's
# shorter series) have an absolute error, as the float64 kernels' docstrings say of
# theirs, relative where the result is large: next to their zeros it is many ulps of the
# tiny result (1353 for lgamma at -2.7476826, 5 for digamma at -2.6106904). There the
# bound is on |error| / max(1, |f(x)|), measured (up to 2**-24, half an ulp of 1).
MIXED = {"lgamma": 6.0e-8, "digamma": 6.0e-8}


def _specials(dt):
    fi = np.finfo(dt)
    v = [0.0, fi.smallest_subnormal, fi.tiny, fi.max, np.inf, np.nan, 1.0, 2.0, 0.5, 3.0,
         10.0, 1e-7, 2.0 ** -12, 0.0625, 9.0, 20.0, 2.0 ** 17, 2.0 ** 24, 2.0 ** 53, 1e30,
         1e300, np.pi / 2, np.pi, 1e22,
         # overflow and underflow thresholds: exp, sinh/cosh, exp2, exp's subnormal end,
         # the float32 exp's clamps, logistic's flush, erfc's and erfcx's ranges
         np.log(float(fi.max)), np.log(float(fi.max)) + np.log(2.0), 128.0, 149.0, 150.0,
         1024.0, 1074.0, 1075.0, -np.log(float(fi.smallest_subnormal)), 89.0, 104.0, 10.05,
         26.55, 27.3,
         # digamma's positive root; lgamma's first negative zeros (negated below) and
         # the neighbourhood of its zeros 1 and 2
         1.4616321449683622, 2.4570247382208006, 2.7476826467274127, 0.9999999, 1.0000001]
    x = np.array(v, np.float64)
    x = x[~(np.abs(x) > float(fi.max))].astype(dt)
    x = np.concatenate([x, -x, -np.arange(1, 12, dtype=dt)])     # (the negative integers)
    with np.errstate(over="ignore"):
        return np.concatenate([x, np.nextafter(x, dt.type(np.inf)),
                               np.nextafter(x, dt.type(-np.inf))])


def _sample(dt):
    if dt == F32:
        dense = np.arange(0, 2 ** 32, STEP, dtype=np.uint64).astype(np.uint32)
        one = np.arange(-4096, 4097, dtype=np.int64) + 0x3F800000
        near_one = np.concatenate([one, one | 0x80000000]).astype(np.uint32)
        parts = [dense.view(dt), near_one.view(dt)]
    else:
        rng = np.random.default_rng(0)
        bits = rng.integers(0, 2 ** 64, 100_000, dtype=np.uint64, endpoint=False)
        sign = np.where(rng.random(200_000) < 0.5, -1.0, 1.0)
        mags = 2.0 ** rng.uniform(-40, 11, 200_000)
        u = 2.0 ** -rng.uniform(1, 53, 40_000)
        parts = [bits.view(dt), sign * mags, np.concatenate([1 + u, 1 - u, -1 + u, -1 - u])]
    return np.concatenate(parts + [_specials(dt)])


def _run_compiled(fn, args, name):
    """``fn`` on the 1-D arrays ``args`` through its compiled kernel, CHUNK elements at a
    time (the last chunk padded with ones)."""
    dt = args[0].dtype
    probe = [np.ones(CHUNK, dt) for _ in args]
    ex = _jit_backend.get_executable(tracer.jit(fn).trace(*probe).jaxpr, name)
    assert [type(s) for s in ex.program.steps] == [KernelStep]    # no host step
    ex.ensure_compiled()
    assert ex.state == "ready"
    n = args[0].size
    rows = -(-n // CHUNK)
    padded = [np.concatenate([a, np.ones(rows * CHUNK - n, dt)]).reshape(rows, CHUNK)
              for a in args]
    outs = None
    with np.errstate(all="ignore"):
        for i in range(rows):
            res = ex.run_compiled([p[i] for p in padded])
            if outs is None:
                outs = [np.empty((rows, CHUNK), dt) for _ in res]
            for o, r in zip(outs, res):
                o[i] = r
    return [o.reshape(-1)[:n] for o in outs]


@functools.lru_cache(maxsize=None)
def _unary_results(dt):
    names = [k for k, spec in FUNCS.items() if dt == F32 or spec[2] == "ld"]
    fns = [FUNCS[k][0] for k in names]
    x = _sample(dt)
    outs = _run_compiled(lambda v: tuple(f(v) for f in fns), [x], f"accuracy_{dt.name}")
    return x, dict(zip(names, outs))


def _rounded(ref, dt):
    with np.errstate(over="ignore", under="ignore"):
        return ref.astype(dt)


def _errors(got, ref, dt):
    """Per element: (error in ulps of the exact value ``ref``, ulps from ``ref`` rounded
    to ``dt``); 0 where both are NaN or the same infinity, inf where only one is."""
    fi = np.finfo(dt)
    work = LD if dt == F64 else np.float64      # (float64 resolves float32's ulps)
    want = _rounded(ref, dt)
    with np.errstate(all="ignore"):
        # (the spacing at the largest finite value, not inf)
        ulp = np.spacing(np.minimum(np.abs(want), np.nextafter(fi.max, dt.type(0))))
        ulp = ulp.astype(work)
        same = (got == want) | (np.isnan(got) & np.isnan(want))
        fin = np.isfinite(got) & np.isfinite(want)
        g = got.astype(work)
        exact = np.where(fin, np.abs(g - ref.astype(work)) / ulp, np.where(same, 0, np.inf))
        off = np.abs(g - want.astype(work)) / ulp
        rounded = np.where(same, 0, np.where(fin, off, np.inf))
    return exact.astype(np.float64), rounded.astype(np.float64)


def _check_accuracy(name, dt, x, got, ref, checked=None):
    """The pinned bounds (``BOUNDS``) over ``checked``; NaN exactly where the reference
    has one."""
    exact, rounded = _errors(got, ref, dt)
    checked = np.ones(got.size, bool) if checked is None else checked
    bound_exact, bound_rounded = BOUNDS[dt][name]
    worst = int(np.argmax(np.where(checked, exact, 0)))
    assert exact[checked].max() <= bound_exact, (name, x[worst], got[worst], ref[worst])
    assert rounded[checked].max() <= bound_rounded, name
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref), err_msg=name)


def _check_signs(name, got, want, zeros_too):
    """The sign of every non-NaN result is the reference's (of its zeros too when
    ``zeros_too``)."""
    num = ~np.isnan(got) & ~np.isnan(want) & ((want != 0) | zeros_too)
    bad = num & (np.signbit(got) != np.signbit(want))
    assert not bad.any(), (name, got[bad][:5], want[bad][:5])


# float64 needs a longdouble wider than float64 (x87's 64 bits or binary128)
_WIDE = pytest.mark.skipif(np.finfo(LD).nmant < 63, reason="longdouble is float64 here")
_DTYPES = [pytest.param(F32, id="float32"), pytest.param(F64, id="float64", marks=_WIDE)]
_UNARY_CASES = ([pytest.param(k, F32, id=f"{k}-float32") for k in FUNCS]
                + [pytest.param(k, F64, id=f"{k}-float64", marks=_WIDE)
                   for k in FUNCS if FUNCS[k][2] == "ld"])


@pytest.mark.parametrize("name,dt", _UNARY_CASES)
def test_unary_function_accuracy(name, dt):
    _, _, kind, keeps_zero = FUNCS[name]
    x, outs = _unary_results(dt)
    got = outs[name]
    ref = _reference(name, x)
    checked = None
    with np.errstate(all="ignore"):
        err = np.abs(got.astype(LD) - ref)
    if name == "logistic":
        checked = ~(ref < 1 / LD(np.finfo(dt).max))
        assert (err[~checked] < 1 / LD(np.finfo(dt).max)).all()
    if name in MIXED:
        checked = ~(x < 0)
        both = (x < 0) & np.isfinite(ref) & np.isfinite(got)
        mixed = err[both] / np.maximum(1, np.abs(ref[both]))
        assert mixed.max() <= MIXED[name], (name, x[both][np.argmax(mixed)])
        # poles and infinities alike
        neg = (x < 0) & ~both
        np.testing.assert_array_equal(got[neg], _rounded(ref[neg], dt), err_msg=name)
    _check_accuracy(name, dt, x, got, ref, checked)
    _check_signs(name, got, _rounded(ref, dt), zeros_too=kind == "ld")
    if keeps_zero:
        # f(+-0) = +-0, and a result that underflows to zero keeps the operand's sign
        zero = x == 0
        np.testing.assert_array_equal(got[zero].view(f"u{dt.itemsize}"),
                                      x[zero].view(f"u{dt.itemsize}"), err_msg=name)
        tiny = (got == 0) & (np.abs(x) < 1)
        assert (np.signbit(got[tiny]) == np.signbit(x[tiny])).all(), name


# ------------------------------------------ pow, atan2 ------------------------------------

def _binary_specials(dt):
    fi = np.finfo(dt)
    top = 2.0 ** (fi.nmant + 1)             # the integers are exact up to here
    v = np.array([0.0, float(fi.smallest_subnormal), float(fi.tiny), 1e-7, 0.1, 0.5, 1.0,
                  1.5, 2.0, 3.0, 10.0, top - 1, top + 2, float(fi.max), np.inf, np.nan], dt)
    v = np.concatenate([v, -v])
    a, b = np.meshgrid(v, v, indexing="ij")
    return a.reshape(-1), b.reshape(-1)


@functools.lru_cache(maxsize=None)
def _binary_results(dt):
    """(x, y, pow(x, y), atan2(x, y)) on: a grid of
    1024 bit patterns by the same 1024 (every 2**22-th pattern in float32, random ones in
    float64); pow over positive x of every binade with |y log2 x| up to a little past the
    exponent range (a tenth of the y integral), and over negative x with integral y;
    atan2 over quotients within 2**+-40; and a grid of special values."""
    rng = np.random.default_rng(1)
    fi = np.finfo(dt)
    if dt == F32:
        pats = np.arange(0, 2 ** 32, 2 ** 22, dtype=np.uint64).astype(np.uint32).view(dt)
        n = 400_000
    else:
        pats = rng.integers(0, 2 ** 64, 1024, dtype=np.uint64, endpoint=False).view(dt)
        n = 100_000
    ga, gb = np.meshgrid(pats, pats, indexing="ij")
    emax = fi.maxexp
    lx = rng.uniform(np.log2(float(fi.smallest_subnormal)), emax, n)
    py = rng.uniform(-1, 1, n) * (emax + 30) / np.maximum(np.abs(lx), 2.0 ** -20)
    py = np.where(rng.random(n) < 0.1, np.rint(py), py)
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    sa, sb = _binary_specials(dt)
    with np.errstate(over="ignore"):
        ay = sign * 2.0 ** rng.uniform(fi.minexp - 20, emax, n)
        ax = ay * np.where(rng.random(n) < 0.5, -1.0, 1.0) * 2.0 ** rng.uniform(-40, 40, n)
        x = np.concatenate([ga.reshape(-1), 2.0 ** lx, -(2.0 ** lx), ax, sa]).astype(dt)
        y = np.concatenate([gb.reshape(-1), py, np.rint(py), ay, sb]).astype(dt)
    p, a = _run_compiled(lambda u, v: (lax.pow(u, v), lax.atan2(u, v)), [x, y],
                         f"accuracy_binary_{dt.name}")
    return x, y, p, a


def _pow_reference(x, y):
    with np.errstate(all="ignore"):
        ref = np.power(x.astype(LD), y.astype(LD))
        # C99's special cases from the float64 pow (x87's powl has (-inf) ** -2**63 = inf)
        special = ~np.isfinite(x) | ~np.isfinite(y) | (x == 0)
        xs, ys = x[special].astype(np.float64), y[special].astype(np.float64)
        ref[special] = np.power(xs, ys)
    return ref


@pytest.mark.parametrize("dt", _DTYPES)
def test_pow_accuracy(dt):
    x, y, got, _ = _binary_results(dt)
    ref = _pow_reference(x, y)
    _check_accuracy("pow", dt, x, got, ref)
    _check_signs("pow", got, _rounded(ref, dt), zeros_too=True)


@pytest.mark.parametrize("dt", _DTYPES)
def test_atan2_accuracy(dt):
    x, y, _, got = _binary_results(dt)
    with np.errstate(all="ignore"):
        ref = np.arctan2(x.astype(LD), y.astype(LD))
    _check_accuracy("atan2", dt, x, got, ref)
    _check_signs("atan2", got, _rounded(ref, dt), zeros_too=True)
