"""Vectorizable math functions for generated kernels.

Numba calls the scalar libm for ``np.exp``/``np.sin``..., so a fused loop over a
transcendental runs one element at a time. These versions are straight-line arithmetic
(range reduction, polynomial, exponent bit tricks, selects), pasted into the kernel source
(``numba_backend.inliner``), so LLVM vectorizes the loops that call them. ``fma`` (one
rounding, ``llvm.fma``) is imported by the kernel modules instead. The float32 functions are
within an ulp of the correctly rounded result for every input (NumPy's own float32 versions
are too; both are checked against each other in tests/numba_backend); all but ``exp_f32``,
``sin_f32`` and ``cos_f32`` compute in float64 and round once.

- ``exp_f32``: native float32 with FMA (8 lanes on AVX2): exp(x) = 2**n exp(r),
  r = x - n ln2 by Cody-Waite with float32 ln2_hi + ln2_lo (x - n ln2_hi exact by FMA, the
  rounding of r carried as a Fast2Sum correction), Taylor to r**8, 2**n in two exact-or-
  once-rounded steps (subnormal results rounded, not flushed). Max error 0.785 ulp of the
  exact value over all 2**32 inputs (so always one of the two neighbours of it: <= 1 ulp
  from the correctly rounded result, equal to it for all but 17970805 inputs).
- ``exp_f64``: the same with a two-part ln2 (Cody-Waite) and degree 13, and a two-step
  scaling so that subnormal results are rounded once.
- ``tanh_f32``: 1 - 2/(exp(2|x|) + 1) with exp as in ``exp_f64``, or the odd Taylor
  series to x**9 for |x| < 2**-4, in float64.
- ``log_f32``: log(x) = e ln2 + 2 atanh(s), s = (m - 1)/(m + 1), m in [sqrt(1/2), sqrt(2)).
- ``sin_f32``/``cos_f32``: native float32 with FMA: x = n pi/2 + r, r = r_hi + r_lo a
  float32 pair, then sin r and cos r by Taylor polynomials (to r**9, r**10) on [-pi/4, pi/4]
  with r_lo's first-order term (cos: 1 - r_hi**2/2 with its rounding error carried), the
  quadrant picked by selects. The reduction: for |x| < 2**17 Cody-Waite with pi/2 as three
  float32 parts (x - n A exact by FMA, n B split exactly by FMA and subtracted by TwoSum:
  r_hi + r_lo within about 2**-56 of r); for larger finite x exact without
  tables, x 2/pi mod 4 as the sum of the x c_k mod 4 over 28-bit parts c_k of 2/pi (in
  float64, each exact, summed in double-double). Both reductions are straight-line and
  vectorize; the kernels run ``_sin_f32_fast``/``_cos_f32_fast`` (Cody-Waite only) and
  rerun a loop nest with the full versions when some argument is >= 2**17
  (``numba_backend.codegen``). Max error 0.7291 ulp (sin) and 0.7282 ulp (cos) of the
  exact value over all 2**32 inputs (so within 1 ulp of the correctly rounded result);
  sin(+-0) = +-0, inf and NaN give NaN.

Accuracy of the compiled real functions (tests/numba_backend/test_compiled_math_accuracy.py
pins these figures): the largest error in ulps of the exact value, against longdouble
references (SciPy's float64 functions for the float32 special functions), over every
2053rd float32 bit pattern, every float32 within 2**12 ulps of +-1 and the special values
with their neighbours (float32; exp, sin and cos: all 2**32 inputs), and over 460k
float64 values spread over every binade (float64). Below 1, a result is always one of the
two floats around the exact value; 0.50 means correctly rounded on these inputs. In
parentheses: the ulps from the correctly rounded result, where more than 1. "libm": the C
library's float32 or float64 function (glibc 2.36's figures), one call per element. "*":
on float32/float64 arrays of 4096 elements or more outside loop bodies NumPy's loop runs
instead (``lowering.rules.NUMPY_LOOPS``), with eager's results. "-": not measured, for
want of a reference more precise than float64 (the special-function kernels' docstrings
give figures measured against mpmath).

    function    float32    float64    computed as (float32 / float64)
    exp         0.785      1.14       exp_f32 / exp_f64
    log*        0.50       0.51       log_f32 (in float64, rounded once) / libm
    sin, cos    0.73       0.51, 0.56 sin_f32, cos_f32 / libm
    tanh*       0.50       1.96 (2)   tanh_f32 (in float64, rounded once) / libm
    exp2*       0.50       0.51       libm
    expm1*      0.76       0.79       libm
    log1p*      0.74       0.75       libm
    tan*        1.26       0.56       libm
    sinh*       1.67 (2)   1.72 (2)   libm
    cosh*       1.49       0.99       libm
    asin*       0.78       0.51       libm
    acos*       0.87       0.52       libm
    atan*       0.82       0.51       libm
    asinh*      1.49       1.51 (2)   libm
    acosh*      1.83 (2)   2.05 (2)   libm
    atanh*      1.63 (2)   1.52 (2)   libm
    sqrt        0.50       0.50       IEEE square root
    cbrt*       0.50       3.19 (3)   libm
    pow*        0.58       0.51       libm
    atan2       1.35       0.51       libm
    rsqrt       1.47       1.48       1 / sqrt(x), rounded twice
    logistic    2.12 (2)   1.99 (2)   1 / (1 + exp(-x)), libm exp; 0 where exp(-x)
                                      overflows (true results below 1 / max)
    erf         0.80       -          libm
    erfc, erfcx, erf_inv, erfc_inv, bessel_i0e, bessel_i1e, expi, dawsn:
                0.54       -          lax/special_kernels.py, lax/special_extra_kernels.py
                                      (in float64, rounded once)
    si, ci, fresnel_s, fresnel_c, spence:
                0.50       -          the same
    lgamma, digamma:
                0.50       -          the same, for x > 0; for x < 0 (reflection) the error
                                      is absolute, below 2**-24 max(1, |f(x)|): many ulps
                                      of the tiny results next to the negative zeros (1353
                                      for lgamma at -2.7476826, 5 for digamma at -2.6106904)
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
from llvmlite import ir as llvm_ir
from numba_backend.inliner import inline_source, kernel_import
from numba_backend.lazy_numba import when_numba

# ---------------------------------------- fma ---------------------------------------------


def _fma_llvm(typingctx, a, b, c):
    """``llvm.fma`` of three floats of one type (the intrinsic's typer): one rounding; on
    this backend's x86 targets LLVM emits vfmadd (FMA3) and vectorizes it, or calls
    libm's fma without FMA."""
    from numba.core import types as nb_types
    if not (isinstance(a, nb_types.Float) and a == b == c):
        return None

    def codegen(context, builder, signature, args):
        ty = context.get_value_type(a)
        fn = builder.module.declare_intrinsic("llvm.fma", [ty],
                                              llvm_ir.FunctionType(ty, [ty, ty, ty]))
        return builder.call(fn, args)
    return a(a, b, c), codegen


@kernel_import
def fma(a, b, c):
    """a * b + c rounded once, for float32 or float64 scalars of one type. Compiled, it is
    ``llvm.fma`` (the overload below); this Python version serves the ``debug_kernels``
    mode and tests. float64: exact (fractions), except with an inf or NaN operand, where
    it is the unfused a * b + c (the same value but for the sign of a NaN). float32: the
    product is exact in float64 and the sum rounds twice (float64, then float32), which
    differs from one rounding only when the float64 sum lies on a float32 tie it was
    rounded onto (rare; never in vecmath's uses, whose sums are far from ties or exact)."""
    if isinstance(a, np.float32):
        return np.float32(np.float64(a) * np.float64(b) + np.float64(c))
    a, b, c = float(a), float(b), float(c)
    try:
        return np.float64(float(Fraction(a) * Fraction(b) + Fraction(c)))
    except (OverflowError, ValueError):
        return np.float64(a * b + c)


def _register_fma():
    """``fma``'s compiled version, ``llvm.fma`` (when Numba is imported:
    ``lazy_numba``)."""
    from numba.core import types as nb_types
    from numba.extending import intrinsic, overload
    fma_llvm = intrinsic(_fma_llvm)

    @overload(fma)
    def _fma_overload(a, b, c):
        if isinstance(a, nb_types.Float) and a == b == c:
            return lambda a, b, c: fma_llvm(a, b, c)
        return None


when_numba(_register_fma)


# ---------------------------------------- exp ---------------------------------------------

_LOG2E = 1.4426950408889634
_LN2 = 0.6931471805599453
_LN2_HI = 0.6931471803691238       # 33 significant bits: n * _LN2_HI is exact
_LN2_LO = 1.9082149292705877e-10


# float32: ln2 = _LN2_HI_F + _LN2_LO_F + 9e-17 (float32 parts); 1/k! as float32
_LOG2E_F = 1.4426950216293335
_LN2_HI_F = 0.6931471824645996
_LN2_LO_F = -1.9046542121259336e-09
_IF3, _IF4, _IF5 = 0.1666666716337204, 0.0416666679084301, 0.008333333767950535
_IF6, _IF7, _IF8 = 0.0013888889225199819, 0.00019841270113829523, 2.4801587642286904e-05


@inline_source
def exp_f32(x):
    xf = np.float32(x)
    xc = xf if xf < np.float32(89.0) else np.float32(89.0)
    xc = xc if xc > np.float32(-104.0) else np.float32(-104.0)   # NaN ends here; fixed below
    n = np.rint(xc * np.float32(_LOG2E_F))
    # x - n ln2_hi is exact: a multiple of 2**-24 (or x itself when n == 0) below 1/2
    r = fma(n, np.float32(-_LN2_HI_F), xc)
    c = n * np.float32(-_LN2_LO_F)                  # the rest of -n ln2, |c| < 3e-7
    rr = r + c                                      # rounded: rr + e = x - n ln2,
    e = (r - rr) + c                                # e exact (Fast2Sum) when |r| >= |c|
    # exp(rr + e) = 1 + rr + rr**2 q(rr) + e (1 + rr) (+ O(e rr**2)), with
    # q(r) = (exp(r) - 1 - r) / r**2 to r**6 (Taylor; the rest is below 2**-32)
    q = fma(np.float32(_IF8), rr, np.float32(_IF7))
    q = fma(q, rr, np.float32(_IF6))
    q = fma(q, rr, np.float32(_IF5))
    q = fma(q, rr, np.float32(_IF4))
    q = fma(q, rr, np.float32(_IF3))
    q = fma(q, rr, np.float32(0.5))
    t = rr + fma(rr * rr, q, fma(e, rr, e))
    p = np.float32(1.0) + t
    # 2**n in two steps: p 2**n1 is exact (normal), the second product rounds once, also
    # to a subnormal or to inf
    ni = np.int32(n)
    n1 = ni >> 1
    s1 = np.int32((n1 + 127) << 23).view(np.float32)
    s2 = np.int32((ni - n1 + 127) << 23).view(np.float32)
    y = (p * s1) * s2
    return y if xf == xf else xf


@inline_source
def exp_f64(x):
    xc = x if x < 710.0 else 710.0
    xc = xc if xc > -750.0 else -750.0
    n = np.rint(xc * _LOG2E)
    r = (xc - n * _LN2_HI) - n * _LN2_LO
    p = 1.0 / 6227020800.0
    p = 1.0 / 479001600 + r * p
    p = 1.0 / 39916800 + r * p
    p = 1.0 / 3628800 + r * p
    p = 1.0 / 362880 + r * p
    p = 1.0 / 40320 + r * p
    p = 1.0 / 5040 + r * p
    p = 1.0 / 720 + r * p
    p = 1.0 / 120 + r * p
    p = 1.0 / 24 + r * p
    p = 1.0 / 6 + r * p
    p = 0.5 + r * p
    p = 1.0 + r * p
    p = 1.0 + r * p
    ni = np.int64(n)
    n1 = ni >> 1
    n2 = ni - n1
    s1 = np.int64((n1 + 1023) << 52).view(np.float64)
    s2 = np.int64((n2 + 1023) << 52).view(np.float64)
    y = (p * s1) * s2
    return y if x == x else x


# ---------------------------------------- tanh --------------------------------------------

@inline_source
def tanh_f32(x):
    xd = np.float64(x)
    ax = abs(xd)
    # |x| >= 2**-4: 1 - 2 / (exp(2|x|) + 1), exp in float64 as in exp_f64 (degree 12: the
    # cancellation near 2**-4 costs no more than 2**-45 relative); tanh(20) is 1.0 in float64
    v = 2.0 * (ax if ax < 20.0 else 20.0)
    n = np.rint(v * _LOG2E)
    r = (v - n * _LN2_HI) - n * _LN2_LO
    p = 1.0 / 479001600
    p = 1.0 / 39916800 + r * p
    p = 1.0 / 3628800 + r * p
    p = 1.0 / 362880 + r * p
    p = 1.0 / 40320 + r * p
    p = 1.0 / 5040 + r * p
    p = 1.0 / 720 + r * p
    p = 1.0 / 120 + r * p
    p = 1.0 / 24 + r * p
    p = 1.0 / 6 + r * p
    p = 0.5 + r * p
    p = 1.0 + r * p
    p = 1.0 + r * p
    t = p * np.int64((np.int64(n) + 1023) << 52).view(np.float64)
    big = 1.0 - 2.0 / (t + 1.0)
    big = big if xd > 0.0 else -big
    # |x| < 2**-4: the odd series to x**9 (the next term is below 2**-46 relative); it
    # keeps the sign of a zero
    s = xd * xd
    small = xd * (1.0 + s * (-1.0 / 3 + s * (2.0 / 15 + s * (-17.0 / 315 + s * (62.0 / 2835)))))
    y = np.float32(small if ax < 0.0625 else big)
    return y if xd == xd else np.float32(x)


# ---------------------------------------- log ---------------------------------------------

_SQRT2 = 1.4142135623730951


@inline_source
def log_f32(x):
    xd = np.float64(x)
    ok = xd > 0.0
    xs = xd if ok else 1.0
    bits = np.float64(xs).view(np.int64)
    e = (bits >> 52) - 1023
    m = np.int64((bits & 0xFFFFFFFFFFFFF) | 0x3FF0000000000000).view(np.float64)  # [1, 2)
    big = m > _SQRT2
    m = m * 0.5 if big else m
    e = e + 1 if big else e
    s = (m - 1.0) / (m + 1.0)
    s2 = s * s
    p = 2.0 * s * (1.0 + s2 * (1.0 / 3 + s2 * (1.0 / 5 + s2 * (1.0 / 7 + s2 * (
        1.0 / 9 + s2 * (1.0 / 11 + s2 * (1.0 / 13 + s2 * (1.0 / 15))))))))
    y = np.float32(np.float64(e) * _LN2 + p)
    # x == 0: -inf; x < 0 or NaN: NaN; x == inf: inf
    y = y if ok else (np.float32(-np.inf) if xd == 0.0 else np.float32(np.nan))
    return y if xd < np.inf else np.float32(x)


# ------------------------------------- sin and cos -----------------------------------------

_PIO2_HI = 1.5707963267948966
_PIO2_LO = 6.123233995736766e-17

# float32 sin/cos: pi/2 = _PIO2_A + _PIO2_B + _PIO2_C + 1.1e-23 (float32 parts)
_TWO_OVER_PI_F = 0.6366197466850281
_PIO2_A = 1.5707963705062866
_PIO2_B = -4.371138828673793e-08
_PIO2_C = -1.7151245100058819e-15
_TRIG_FAST = 131072.0                   # 2**17
_IF9, _IF10 = 2.7557318844628753e-06, 2.755731998149713e-07


@inline_source
def _reduce_pio2_f32(xf):
    """(n, r_hi, r_lo): xf = n pi/2 + r_hi + r_lo, |r_hi| <= pi/4 (about), n integral, for
    a float32 |xf| < _TRIG_FAST; r_hi + r_lo is within about 2**-56 of r."""
    n = np.rint(xf * np.float32(_TWO_OVER_PI_F))
    # x - n A is exact (a multiple of ulp(x) or 2**-23, below 1 in magnitude)
    r1 = fma(-n, np.float32(_PIO2_A), xf)
    p = n * np.float32(_PIO2_B)
    pe = fma(n, np.float32(_PIO2_B), -p)                       # n B = p + pe exactly
    s = r1 - p                                                  # TwoSum(r1, -p)
    bb = s - r1
    err = (r1 - (s - bb)) - (p + bb)
    lo = err - fma(n, np.float32(_PIO2_C), pe)
    hi = s + lo                                                 # renormalized
    lo = lo - (hi - s)
    return n, hi, lo


@inline_source
def _sincos_f32_poly(rh, rl):
    """(sin r, cos r) for r = rh + rl, |r| <= pi/4 (about), float32 with FMA."""
    th = rh * rh
    tl = fma(rh, rh, -th)                                       # rh**2 = th + tl exactly
    # sin(rh + rl) = rh + rh th P(th) + rl (1 - th/2), P Taylor to r**9
    ps = fma(np.float32(_IF9), th, np.float32(-_IF7))
    ps = fma(ps, th, np.float32(_IF5))
    ps = fma(ps, th, np.float32(-_IF3))
    st = fma(rh * th, ps, rl * fma(np.float32(-0.5), th, np.float32(1.0)))
    sv = rh + st
    # cos(rh + rl) = w + (e - tl/2 - rh rl + th**2 Q(th)), w = 1 - th/2 rounded, e its
    # rounding error (exact); Q Taylor to r**10
    hh = np.float32(0.5) * th
    w = np.float32(1.0) - hh
    e = (np.float32(1.0) - w) - hh
    pc = fma(np.float32(-_IF10), th, np.float32(_IF8))
    pc = fma(pc, th, np.float32(-_IF6))
    pc = fma(pc, th, np.float32(_IF4))
    ct = fma(th * th, pc, e - fma(rh, rl, np.float32(0.5) * tl))
    cv = w + ct
    return sv, cv


# 2/pi = _TOP_C0 + ... + _TOP_C6 + O(2**-196): 28-bit parts (products with a float32 exact)
_TOP_C0 = 0.6366197690367699
_TOP_C1 = 3.3308114738561656e-09
_TOP_C2 = 2.276010047810136e-18
_TOP_C3 = 2.5268260189002822e-26
_TOP_C4 = 1.6682867657019525e-34
_TOP_C5 = 1.158871328288855e-43
_TOP_C6 = 7.053959174404295e-52


@inline_source
def _mod4_acc(xd, c, hi, lo):
    """(f, hi', lo'): f = x c mod 4 (exact: x c is exact, a 24 by 28 bit product), added
    to the double-double hi + lo by TwoSum (hi' + lo' = hi + lo + f up to lo's rounding)."""
    pr = xd * c
    f = pr - 4.0 * np.floor(pr * 0.25)
    sh = hi + f
    bv = sh - hi
    er = (hi - (sh - bv)) + (f - bv)
    return f, sh, lo + er


@inline_source
def _reduce_pio2_huge(xf):
    """(n, r_hi, r_lo) as ``_reduce_pio2_f32``, for any finite float32 |xf| >= 2**17,
    without tables (straight-line float64, so it vectorizes): x 2/pi mod 4 as the sum
    of the x c_k mod 4 (each exact; those of the high parts are multiples of 4 or
    small, those of the low parts below 2**-68 once they are past x's bits)."""
    xd = abs(np.float64(xf))      # |x|: 4 + (a tiny negative x c) would lose x c's bits
    hi = 0.0
    lo = 0.0
    f, hi, lo = _mod4_acc(xd, _TOP_C0, hi, lo)
    f, hi, lo = _mod4_acc(xd, _TOP_C1, hi, lo)
    f, hi, lo = _mod4_acc(xd, _TOP_C2, hi, lo)
    f, hi, lo = _mod4_acc(xd, _TOP_C3, hi, lo)
    f, hi, lo = _mod4_acc(xd, _TOP_C4, hi, lo)
    f, hi, lo = _mod4_acc(xd, _TOP_C5, hi, lo)
    f, hi, lo = _mod4_acc(xd, _TOP_C6, hi, lo)
    n = np.rint(hi)
    a = hi - n                                                  # exact, |a| <= 1/2
    t = a + lo
    r = t * _PIO2_HI + t * _PIO2_LO
    r = -r if xf < np.float32(0.0) else r        # -x = -n pi/2 - r
    n = -n if xf < np.float32(0.0) else n
    rh = np.float32(r)
    rl = np.float32(r - np.float64(rh))
    nq = n - 4.0 * np.floor(n * 0.25)
    return np.float32(nq), rh, rl


@inline_source
def sin_f32(x):
    xf = np.float32(x)
    ax = abs(xf)
    fast = ax < np.float32(_TRIG_FAST)                          # False for inf and NaN
    finite = ax < np.float32(np.inf)
    xc = xf if fast else np.float32(0.0)
    n, rh, rl = _reduce_pio2_f32(xc)
    xh = np.float32(_TRIG_FAST) if (fast or not finite) else xf
    nh, rhh, rlh = _reduce_pio2_huge(xh)
    n = n if fast else nh
    rh = rh if fast else rhh
    rl = rl if fast else rlh
    sv, cv = _sincos_f32_poly(rh, rl)
    q = np.int32(n)
    v = cv if (q & np.int32(1)) != np.int32(0) else sv
    v = -v if (q & np.int32(2)) != np.int32(0) else v
    v = xf if ax < np.float32(2.44140625e-04) else v            # 2**-12: sin x rounds to x
    return v if finite else np.float32(np.nan)


@inline_source
def cos_f32(x):
    xf = np.float32(x)
    ax = abs(xf)
    fast = ax < np.float32(_TRIG_FAST)
    finite = ax < np.float32(np.inf)
    xc = xf if fast else np.float32(0.0)
    n, rh, rl = _reduce_pio2_f32(xc)
    xh = np.float32(_TRIG_FAST) if (fast or not finite) else xf
    nh, rhh, rlh = _reduce_pio2_huge(xh)
    n = n if fast else nh
    rh = rh if fast else rhh
    rl = rl if fast else rlh
    sv, cv = _sincos_f32_poly(rh, rl)
    q = np.int32(n)
    v = sv if (q & np.int32(1)) != np.int32(0) else cv
    v = -v if ((q + np.int32(1)) & np.int32(2)) != np.int32(0) else v
    return v if finite else np.float32(np.nan)

@inline_source
def _sin_f32_fast(x):
    """sin_f32 for |x| < _TRIG_FAST, inf and NaN (anything for other arguments)."""
    xf = np.float32(x)
    ax = abs(xf)
    fast = ax < np.float32(_TRIG_FAST)
    xc = xf if fast else np.float32(0.0)
    n, rh, rl = _reduce_pio2_f32(xc)
    sv, cv = _sincos_f32_poly(rh, rl)
    q = np.int32(n)
    v = cv if (q & np.int32(1)) != np.int32(0) else sv
    v = -v if (q & np.int32(2)) != np.int32(0) else v
    v = xf if ax < np.float32(2.44140625e-04) else v
    return v if fast else np.float32(np.nan)


@inline_source
def _cos_f32_fast(x):
    """cos_f32 for |x| < _TRIG_FAST, inf and NaN (anything for other arguments)."""
    xf = np.float32(x)
    ax = abs(xf)
    fast = ax < np.float32(_TRIG_FAST)
    xc = xf if fast else np.float32(0.0)
    n, rh, rl = _reduce_pio2_f32(xc)
    sv, cv = _sincos_f32_poly(rh, rl)
    q = np.int32(n)
    v = sv if (q & np.int32(1)) != np.int32(0) else cv
    v = -v if ((q + np.int32(1)) & np.int32(2)) != np.int32(0) else v
    return v if fast else np.float32(np.nan)


@inline_source
def _trig_f32_rare(x):
    """1 for the finite float32 arguments the fast sin/cos do not cover, else 0."""
    ax = abs(np.float32(x))
    rare = (ax >= np.float32(_TRIG_FAST)) & (ax < np.float32(np.inf))
    return np.int64(1) if rare else np.int64(0)


# codegen runs loop nests with the fast versions first, and again with the full ones
# when _trig_f32_rare counted any argument
sin_f32._tracer_fast_path = (_sin_f32_fast, _trig_f32_rare)
cos_f32._tracer_fast_path = (_cos_f32_fast, _trig_f32_rare)


# ------------------------------- max/min reductions as integers ----------------------------
# A float max with NumPy's NaN propagation does not vectorize (LLVM needs no-NaNs flags for
# float min/max reductions, which we never set). Reduced as integer keys it does: the key
# order is -0.0 < +0.0 (XLA's) and a NaN maps to the extreme key, so any NaN wins.

@inline_source
def max_key_f32(x):
    i = np.float32(x).view(np.int32)
    k = i ^ ((i >> 31) & np.int32(0x7FFFFFFF))
    return k if x == x else np.int32(0x7FFFFFFF)


@inline_source
def min_key_f32(x):
    i = np.float32(x).view(np.int32)
    k = i ^ ((i >> 31) & np.int32(0x7FFFFFFF))
    return k if x == x else np.int32(-0x80000000)


@inline_source
def max_key_f64(x):
    i = np.float64(x).view(np.int64)
    k = i ^ ((i >> 63) & np.int64(0x7FFFFFFFFFFFFFFF))
    return k if x == x else np.int64(0x7FFFFFFFFFFFFFFF)


@inline_source
def min_key_f64(x):
    i = np.float64(x).view(np.int64)
    k = i ^ ((i >> 63) & np.int64(0x7FFFFFFFFFFFFFFF))
    return k if x == x else np.int64(-0x8000000000000000)
