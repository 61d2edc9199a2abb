"""CHLO special functions and element-wise client ops (spec: ``002_…txt``, the CHLO
dialect): the inverse trigonometric and hyperbolic functions, sinh/cosh, the log-gamma
family (lgamma, digamma, polygamma, Hurwitz zeta), erfc, erf_inv, the exponentially
scaled Bessel functions i0e/i1e, next_after, the is_inf predicates, the regularized
incomplete gamma and beta functions (igamma, igammac, igamma_grad_a, betainc; not CHLO
ops), and the
``broadcast_*`` binary forms (NumPy-style broadcasting in front of the lax op).

tan, square, conj, erf and logistic live in ``lax/elementwise.py``.

Numerics. The special functions run our own scalar kernels (``lax/special_kernels.py``):
the eager impl calls them through a NumPy ufunc compiled by Numba on first use, the jit
lowering calls the same kernels inside its loops, so both give the same bits. Accuracy
(max error against mpmath on dense grids including poles, zeros, endpoints, large
arguments and subnormals; float32 is computed in float64 and rounded once):

==============  ===========================  ===========================================
function        float64 (ulp)                notes
==============  ===========================  ===========================================
lgamma          3 (x > 0)                    x < 0: absolute error ~1 ulp of the
                                             reflection terms (relative accuracy lost
                                             next to the negative zeros, as in SciPy)
digamma         2 (x > 0)                    x < 0: as lgamma, near the negative roots
polygamma       3 (x > 0)                    x < 0: up to ~10 (alternating sum)
zeta            3 (q > 0)                    compensated in q + k (SciPy: 21)
erfc            3                            to the subnormal range (SciPy: 2e13 there)
erfcx           2
erf_inv         3                            full accuracy as |y| -> 1
erfc_inv        3                            down to subnormal arguments
bessel_i0e      2
bessel_i1e      2
igamma          14 (P >= 1e-3)               far tails: ~|log P| ulp (the conditioning)
igammac         25 (Q >= 1e-3)               SciPy: 24 and 138 in the same region
betainc         rel. 1e-13 (a, b <= 500)     the log-formed prefactor's rounding
==============  ===========================  ===========================================

float32: at most 0.5 ulp plus the final rounding (the float64 computation is far more
accurate than float32) everywhere, i.e. correctly rounded except in rare ties.
The elementary functions (acos ... cosh) use NumPy's ufuncs eagerly (C99 branch cuts for
complex operands) and, under jit, libm for real operands (a few ulp from NumPy at most)
while complex operands run NumPy as a host step.

Poles and special values follow SciPy where JAX is silent or differs, and are listed in
each docstring (e.g. ``digamma(±0) = ∓inf``, ``lgamma(-inf) = +inf``).
"""
from __future__ import annotations

import builtins

import numpy as np

from tracer import dtypes
from tracer.core import Array, get_aval
from tracer.interpreters.ad import defjvp, defjvp_zero
from lax import elementwise as ew
from lax.elementwise import _bind_binary, _bind_unary, _const
from lax.shapes import broadcast_in_dim, full_like
from lax.utils import (_float, _inexact, promote_weak_scalars, standard_naryop, standard_unop,
                       LOWP_IMPLS)


def _kernel_impl(name):
    """Eager impl running the Numba-compiled scalar kernel (imported lazily: ``import
    tracer`` does not import Numba)."""

    def impl(*args):
        from lax import special_kernels
        return special_kernels.apply(name, *args)

    impl.__name__ = f"{name}_impl"
    return impl


def _keep_dtype(fn):
    def impl(x):
        with np.errstate(all="ignore"):
            return np.asarray(fn(x), dtype=x.dtype)
    impl.__name__ = getattr(fn, "__name__", "impl")
    return impl


def _one(x):
    return _const(x, 1)


# ================================ inverse trig / hyperbolic ===========================

def acos(x):
    """Element-wise arc cosine. CHLO 'acos'. Floating or complex; real |x| > 1 gives NaN;
    complex: the principal branch with C99's cuts (NumPy's ``arccos``)."""
    return _bind_unary(acos_p, x)


acos_p = standard_unop("acos", _keep_dtype(np.arccos), _inexact)
defjvp(acos_p, lambda g, x: ew.safe_mul(g, ew.neg(ew.rsqrt(ew.sub(_one(x), ew.square(x))))))


def asin(x):
    """Element-wise arc sine. CHLO 'asin'. Floating or complex (C99 branch cuts)."""
    return _bind_unary(asin_p, x)


asin_p = standard_unop("asin", _keep_dtype(np.arcsin), _inexact)
defjvp(asin_p, lambda g, x: ew.safe_mul(g, ew.rsqrt(ew.sub(_one(x), ew.square(x)))))


def atan(x):
    """Element-wise arc tangent. CHLO 'atan'. Floating or complex (C99 branch cuts)."""
    return _bind_unary(atan_p, x)


atan_p = standard_unop("atan", _keep_dtype(np.arctan), _inexact)
defjvp(atan_p, lambda g, x: ew.div(g, ew.add(_one(x), ew.square(x))))


def acosh(x):
    """Element-wise inverse hyperbolic cosine. CHLO 'acosh'. Real x < 1 gives NaN;
    complex: C99 branch cut on (-inf, 1)."""
    return _bind_unary(acosh_p, x)


acosh_p = standard_unop("acosh", _keep_dtype(np.arccosh), _inexact)
# 1/(sqrt(x-1) sqrt(x+1)) rather than rsqrt(x*x-1): equal for real x > 1, and the
# holomorphic derivative of the principal branch everywhere off its cut.
defjvp(acosh_p, lambda g, x: ew.safe_mul(g, ew.mul(ew.rsqrt(ew.sub(x, _one(x))),
                                               ew.rsqrt(ew.add(x, _one(x))))))


def asinh(x):
    """Element-wise inverse hyperbolic sine. CHLO 'asinh'. Floating or complex."""
    return _bind_unary(asinh_p, x)


asinh_p = standard_unop("asinh", _keep_dtype(np.arcsinh), _inexact)
defjvp(asinh_p, lambda g, x: ew.mul(g, ew.rsqrt(ew.add(ew.square(x), _one(x)))))


def atanh(x):
    """Element-wise inverse hyperbolic tangent. CHLO 'atanh'. Real: ±inf at ±1, NaN for
    |x| > 1; complex: C99 branch cuts."""
    return _bind_unary(atanh_p, x)


atanh_p = standard_unop("atanh", _keep_dtype(np.arctanh), _inexact)
defjvp(atanh_p, lambda g, x: ew.safe_div(g, ew.mul(ew.add(_one(x), x),
                                                   ew.sub(_one(x), x))))


def sinh(x):
    """Element-wise hyperbolic sine. CHLO 'sinh'. Floating or complex."""
    return _bind_unary(sinh_p, x)


sinh_p = standard_unop("sinh", _keep_dtype(np.sinh), _inexact)
defjvp(sinh_p, lambda g, x: ew.mul(g, cosh(x)))


def cosh(x):
    """Element-wise hyperbolic cosine. CHLO 'cosh'. Floating or complex."""
    return _bind_unary(cosh_p, x)


cosh_p = standard_unop("cosh", _keep_dtype(np.cosh), _inexact)
defjvp(cosh_p, lambda g, x: ew.mul(g, sinh(x)))


# ====================================== gamma family ==================================

def lgamma(x):
    """Element-wise log|Gamma(x)|. CHLO 'lgamma'. Floating dtypes.

    +inf at the poles 0, -1, -2, ... and at ±inf (C99 and JAX; SciPy's ``gammaln(-inf)``
    is -inf); NaN for NaN. Derivative: ``digamma``."""
    return _bind_unary(lgamma_p, x)


lgamma_p = standard_unop("lgamma", _kernel_impl("lgamma"), _float)
defjvp(lgamma_p, lambda g, x: ew.safe_mul(g, digamma(x)))


def digamma(x):
    """Element-wise digamma psi(x) = d/dx log Gamma(x). CHLO 'digamma'. Floating dtypes.

    ``digamma(+0) = -inf`` and ``digamma(-0) = +inf`` (SciPy's one-sided limits; JAX
    gives NaN), NaN at the negative integers and at -inf, +inf at +inf. Derivative:
    ``polygamma(1, x)``."""
    return _bind_unary(digamma_p, x)


digamma_p = standard_unop("digamma", _kernel_impl("digamma"), _float)
defjvp(digamma_p, lambda g, x: ew.safe_mul(g, polygamma(_one(x), x)))


def polygamma(m, x):
    """Element-wise polygamma psi^(m)(x), the m-th derivative of digamma. CHLO
    'polygamma'. ``m`` and ``x`` share a floating dtype (rank-0 operands broadcast); ``m``
    must hold non-negative integers (NaN otherwise, as SciPy). psi^(m)(x) =
    (-1)^(m+1) m! zeta(m + 1, x) for m >= 1.

    Not differentiable in ``m`` (differentiating raises ValueError, as in JAX); the
    derivative in ``x`` is ``polygamma(m + 1, x)``."""
    return _bind_binary(polygamma_p, m, x)


def _polygamma_grad_m(g, m, x):
    raise ValueError("polygamma: the gradient with respect to the order m is not defined "
                     "(m is an integer); differentiate with respect to x only, e.g. "
                     "stop_gradient(m) or argnums")


polygamma_p = standard_naryop("polygamma", _kernel_impl("polygamma"), _float)
defjvp(polygamma_p, _polygamma_grad_m,
       lambda g, m, x: ew.safe_mul(g, polygamma(ew.add(m, _one(m)), x)))


def zeta(x, q):
    """Element-wise Hurwitz zeta function zeta(x, q) = sum_{n>=0} (q + n)^-x. CHLO 'zeta'.
    Floating operands of one dtype (rank-0 operands broadcast).

    NaN for x < 1 and +inf for x == 1; +inf when q is a non-positive integer; for q < 0
    not an integer, defined for integer x only (NaN otherwise), as SciPy.

    Not differentiable in ``x`` (ValueError, as ``jax.lax.zeta``); d/dq zeta(x, q) =
    -x zeta(x + 1, q)."""
    return _bind_binary(zeta_p, x, q)


def _zeta_grad_x(g, x, q):
    raise ValueError("zeta: the derivative with respect to x (the exponent) is not "
                     "implemented; only the derivative with respect to q is")


zeta_p = standard_naryop("zeta", _kernel_impl("zeta"), _float)
defjvp(zeta_p, _zeta_grad_x,
       lambda g, x, q: ew.safe_mul(g, ew.neg(ew.mul(x, zeta(ew.add(x, _one(x)), q)))))


# ================================ incomplete gamma ====================================

def igamma(a, x):
    """Element-wise regularized lower incomplete gamma function P(a, x) =
    gamma(a, x) / Gamma(a) (``jax.lax.igamma``, SciPy's ``gammainc``). Floating operands of
    one dtype (rank-0 operands broadcast). NaN for a < 0, x < 0 or a == x == 0; P(0, x>0)
    = 1; P(a, 0) = 0; P(a, inf) = 1. Derivatives: ``igamma_grad_a`` in a,
    x^(a-1) e^-x / Gamma(a) in x.

    Accuracy (float64, vs mpmath): <= 14 ulp where P >= 1e-3 (SciPy: 24); in the far
    tails the error grows like the condition number |log P| ulps."""
    return _bind_binary(igamma_p, a, x)


def igammac(a, x):
    """Element-wise regularized upper incomplete gamma Q(a, x) = 1 - P(a, x), computed
    directly where it is small (``jax.lax.igammac``, SciPy's ``gammaincc``). Accuracy
    (float64, vs mpmath): <= 25 ulp where Q >= 1e-3 (SciPy: 138)."""
    return _bind_binary(igammac_p, a, x)


def igamma_grad_a(a, x):
    """Element-wise dP(a, x)/da (``jax.lax.igamma_grad_a``), by differentiating P's
    series or continued fraction term by term. Not itself differentiable."""
    return _bind_binary(igamma_grad_a_p, a, x)


def random_gamma_grad(a, x):
    """The derivative of a Gamma(a, 1) sample ``x`` with respect to ``a`` along the
    sample's CDF level (``jax.lax.random_gamma_grad``): -(dP/da) / (dP/dx) at (a, x)."""
    a, x = promote_weak_scalars("random_gamma_grad", a, x)
    return ew.neg(ew.div(igamma_grad_a(a, x), _igamma_density(a, x)))


def _igamma_density(a, x):
    # dP/dx = x^(a-1) e^-x / Gamma(a)
    return ew.exp(ew.sub(ew.sub(ew.mul(ew.sub(a, _one(a)), ew.log(x)), x), lgamma(a)))


igamma_p = standard_naryop("igamma", _kernel_impl("igamma"), _float)
defjvp(igamma_p, lambda g, a, x: ew.safe_mul(g, igamma_grad_a(a, x)),
       lambda g, a, x: ew.safe_mul(g, _igamma_density(a, x)))
igammac_p = standard_naryop("igammac", _kernel_impl("igammac"), _float)
defjvp(igammac_p, lambda g, a, x: ew.neg(ew.safe_mul(g, igamma_grad_a(a, x))),
       lambda g, a, x: ew.neg(ew.safe_mul(g, _igamma_density(a, x))))
igamma_grad_a_p = standard_naryop("igamma_grad_a", _kernel_impl("igamma_grad_a"), _float)


# ================================ incomplete beta =====================================

def betainc(a, b, x):
    """Element-wise regularized incomplete beta function I_x(a, b) = B(x; a, b) / B(a, b)
    (``jax.lax.betainc``, SciPy's ``betainc``). Floating operands of one dtype (rank-0
    operands broadcast). NaN for a < 0, b < 0, x outside [0, 1] or a == b == 0; 1 for
    a == 0, 0 for b == 0 (SciPy). Differentiable in x only (as JAX): d/dx =
    x^(a-1) (1-x)^(b-1) / B(a, b).

    Accuracy (float64): relative error about 2**-53 times |a log x| + |b log(1-x)| +
    |log B(a, b)| (the prefactor is formed in logs): 1e-14 for a, b <= 5, 1e-13 for
    a, b ~ 50-500 (SciPy's betainc is off by 0.3% at a = 400, b = 29, x = 0.158)."""
    return _bind_ternary(regularized_incomplete_beta_p, a, b, x)


def _bind_ternary(p, a, b, x):
    a, b, x = promote_weak_scalars(p.name, a, b, x)
    return p.bind(a, b, x)


def _betainc_grad_ab(g, a, b, x):
    raise ValueError("betainc: the gradient with respect to a and b is not supported (as "
                     "in JAX); differentiate with respect to x only")


def _betainc_grad_x(g, a, b, x):
    log_b = ew.sub(ew.add(lgamma(a), lgamma(b)), lgamma(ew.add(a, b)))
    log_d = ew.sub(ew.add(ew.mul(ew.sub(a, _one(a)), ew.log(x)),
                          ew.mul(ew.sub(b, _one(b)), ew.log1p(ew.neg(x)))), log_b)
    return ew.safe_mul(g, ew.exp(log_d))


regularized_incomplete_beta_p = standard_naryop("regularized_incomplete_beta",
                                                _kernel_impl("betainc"), _float, nargs=3)
defjvp(regularized_incomplete_beta_p, _betainc_grad_ab, _betainc_grad_ab, _betainc_grad_x)


# ======================================= erf family ===================================

_TWO_OVER_SQRT_PI = 2.0 / np.sqrt(np.pi)
_SQRT_PI_OVER_TWO = np.sqrt(np.pi) / 2.0


def erfc(x):
    """Element-wise complementary error function 1 - erf(x), accurate where erf(x) is
    close to 1 (down to the subnormals near x = 26.5). CHLO 'erfc'. Floating dtypes."""
    return _bind_unary(erfc_p, x)


erfc_p = standard_unop("erfc", _kernel_impl("erfc"), _float)
defjvp(erfc_p, lambda g, x: ew.mul(_const(x, -_TWO_OVER_SQRT_PI),
                                   ew.mul(g, ew.exp(ew.neg(ew.square(x))))))


def erfcx(x):
    """Element-wise scaled complementary error function exp(x**2) erfc(x), finite for
    large x where erfc underflows (~1/(x sqrt(pi))); +inf for x below about -26.6.
    Floating dtypes. Not a CHLO op: it serves ``scipy.special.erfcx`` and ``log_ndtr``.
    Derivative 2 x erfcx(x) - 2/sqrt(pi)."""
    return _bind_unary(erfcx_p, x)


erfcx_p = standard_unop("erfcx", _kernel_impl("erfcx"), _float)
defjvp(erfcx_p, lambda g, ans, x: ew.mul(g, ew.sub(ew.mul(_const(x, 2), ew.mul(x, ans)),
                                                   _const(x, _TWO_OVER_SQRT_PI))), with_ans=True)


def erf_inv(x):
    """Element-wise inverse error function on [-1, 1]: ±inf at ±1, NaN outside. CHLO
    'erf_inv'. Floating dtypes. Derivative sqrt(pi)/2 exp(erf_inv(x)**2)."""
    return _bind_unary(erf_inv_p, x)


erf_inv_p = standard_unop("erf_inv", _kernel_impl("erf_inv"), _float)
defjvp(erf_inv_p, lambda g, ans, x: ew.safe_mul(g, ew.mul(_const(x, _SQRT_PI_OVER_TWO),
                                                            ew.exp(ew.square(ans)))),
       with_ans=True)


def erfc_inv(x):
    """Element-wise inverse of erfc on [0, 2]: +inf at 0, -inf at 2, NaN outside; keeps
    full relative accuracy for tiny arguments (which ``erf_inv(1 - x)`` cannot).
    Floating dtypes. Not a CHLO op: it serves ``ndtri`` and ``erfcinv``."""
    return _bind_unary(erfc_inv_p, x)


erfc_inv_p = standard_unop("erfc_inv", _kernel_impl("erfc_inv"), _float)
defjvp(erfc_inv_p, lambda g, ans, x: ew.safe_mul(g, ew.mul(_const(x, -_SQRT_PI_OVER_TWO),
                                                             ew.exp(ew.square(ans)))),
       with_ans=True)


# ======================================= Bessel =======================================

def bessel_i0e(x):
    """Element-wise exponentially scaled modified Bessel function of order 0,
    exp(-|x|) I0(x). Floating dtypes; 0 at ±inf. Derivative i1e(x) - sign(x) i0e(x)."""
    return _bind_unary(bessel_i0e_p, x)


bessel_i0e_p = standard_unop("bessel_i0e", _kernel_impl("bessel_i0e"), _float)
defjvp(bessel_i0e_p, lambda g, ans, x: ew.mul(g, ew.sub(bessel_i1e(x), ew.mul(ew.sign(x),
                                                                               ans))),
       with_ans=True)


def bessel_i1e(x):
    """Element-wise exponentially scaled modified Bessel function of order 1,
    exp(-|x|) I1(x). CHLO 'bessel_i1e'. Floating dtypes; ±0 at ±inf.
    Derivative i0e(x) - i1e(x) (sign(x) + 1/x), 1/2 at 0."""
    return _bind_unary(bessel_i1e_p, x)


def _bessel_i1e_jvp(g, ans, x):
    eps = _const(x, np.finfo(get_aval(x).dtype).eps)
    not_tiny = ew.gt(ew.abs(x), eps)
    safe_x = ew.select(not_tiny, x, full_like(x, eps))
    dydx = ew.sub(bessel_i0e(safe_x), ew.mul(ans, ew.add(ew.sign(safe_x),
                                                         ew.reciprocal(safe_x))))
    return ew.mul(g, ew.select(not_tiny, dydx, full_like(x, 0.5)))


bessel_i1e_p = standard_unop("bessel_i1e", _kernel_impl("bessel_i1e"), _float)
defjvp(bessel_i1e_p, _bessel_i1e_jvp, with_ans=True)


# ================================ next_after, is_inf ==================================

def next_after(x1, x2):
    """Element-wise the next representable value after ``x1`` towards ``x2`` (C's
    ``nextafter``; subnormals included, ``x1 == x2`` gives ``x2``, NaN if either is NaN).
    CHLO 'next_after'. Floating operands of one dtype. Not differentiable (as JAX)."""
    return _bind_binary(next_after_p, x1, x2)


def _next_after_impl(x, y):
    with np.errstate(all="ignore"):
        out = np.nextafter(x, y).astype(np.result_type(x, y))
    # NumPy's float16 loop returns x1 when x1 == x2 (nextafter(0.0, -0.0) == 0.0)
    return np.where(x == y, y, out).astype(out.dtype) if out.dtype == np.float16 else out


next_after_p = standard_naryop("next_after", _next_after_impl, _float)


def _lowp_next_after(x, y):
    # a step of the narrow type's own ulp: ml_dtypes' nextafter loop, not a widened one
    with np.errstate(all="ignore"):
        return np.nextafter(x, y).astype(x.dtype)


LOWP_IMPLS["next_after"] = _lowp_next_after
nextafter = next_after


def _is_inf_op(name, fn, doc):
    p = standard_unop(name, fn, _float, result_dtype=lambda dt: dtypes.bool_,
                      keep_weak=False)
    defjvp_zero(p)

    def wrapper(x):
        return _bind_unary(p, x)
    wrapper.__name__ = name
    wrapper.__doc__ = doc
    return p, wrapper


is_inf_p, is_inf = _is_inf_op(
    "is_inf", np.isinf, "Element-wise: True where x is +inf or -inf. CHLO 'is_inf'. Floating "
    "dtypes; the result is bool.")
is_neg_inf_p, is_neg_inf = _is_inf_op(
    "is_neg_inf", np.isneginf, "Element-wise: True where x is -inf. CHLO 'is_neg_inf'. "
    "Floating dtypes; the result is bool.")
is_pos_inf_p, is_pos_inf = _is_inf_op(
    "is_pos_inf", np.isposinf, "Element-wise: True where x is +inf. CHLO 'is_pos_inf'. "
    "Floating dtypes; the result is bool.")


# ================================== broadcast_* forms =================================

def _as_operands(fname, *args):
    out = []
    for a in args:
        if isinstance(a, (np.ndarray, np.generic)):
            a = Array(np.asarray(a))
        out.append(a)
    return promote_weak_scalars(fname, *out)


def _broadcast_operands(fname, args, broadcast_dimensions=None):
    """Broadcast ``args`` (already operands) to one shape: NumPy's rule (trailing
    dimensions aligned), or, for two operands of different ranks, CHLO's
    ``broadcast_dimensions`` mapping the lower-rank operand's dimensions to result
    dimensions."""
    args = list(args)
    shapes = [get_aval(a).shape for a in args]
    nd = builtins.max(len(s) for s in shapes)
    if broadcast_dimensions is not None:
        if len(args) != 2 or len(shapes[0]) == len(shapes[1]):
            raise ValueError(f"{fname}: broadcast_dimensions applies to two operands of "
                             f"different ranks, got shapes {shapes}")
        low = 0 if len(shapes[0]) < len(shapes[1]) else 1
        bd = tuple(int(d) for d in broadcast_dimensions)
        if len(bd) != len(shapes[low]) or any(not 0 <= d < nd for d in bd) or \
                any(a >= b for a, b in zip(bd, bd[1:])):
            raise ValueError(f"{fname}: broadcast_dimensions {bd} must give one strictly "
                             f"increasing result dimension (< {nd}) for each dimension of "
                             f"the lower-rank operand of shape {shapes[low]}")
        expanded = [1] * nd
        for i, d in enumerate(bd):
            expanded[d] = shapes[low][i]
        dims_of = {low: bd, 1 - low: tuple(range(nd))}
        aligned = {low: tuple(expanded), 1 - low: shapes[1 - low]}
    else:
        dims_of = {i: tuple(range(nd - len(s), nd)) for i, s in enumerate(shapes)}
        aligned = {i: (1,) * (nd - len(s)) + tuple(s) for i, s in enumerate(shapes)}
    out_shape = []
    for k in range(nd):
        sizes = {aligned[i][k] for i in range(len(args))} - {1}
        if len(sizes) > 1:
            raise ValueError(f"{fname}: shapes {', '.join(str(tuple(s)) for s in shapes)} "
                             f"cannot be broadcast together (dimension {k}: sizes "
                             f"{sorted(sizes)})")
        out_shape.append(sizes.pop() if sizes else 1)
    out_shape = tuple(out_shape)
    return [a if get_aval(a).shape == out_shape else
            broadcast_in_dim(a, out_shape, dims_of[i]) for i, a in enumerate(args)]


def _make_broadcast_binary(chlo_name, lax_fn):
    fname = f"broadcast_{chlo_name}"

    def f(lhs, rhs, broadcast_dimensions=None):
        x, y = _broadcast_operands(fname, _as_operands(fname, lhs, rhs),
                                   broadcast_dimensions)
        return lax_fn(x, y)

    f.__name__ = fname
    f.__doc__ = (f"``lax.{lax_fn.__name__}`` with NumPy-style broadcasting of its operands "
                 f"(CHLO '{fname}'). Operands share a dtype (Python scalars adopt it); "
                 "``broadcast_dimensions`` optionally maps the lower-rank operand's "
                 "dimensions to result dimensions, as in CHLO. ValueError for shapes that "
                 "do not broadcast.")
    return f


broadcast_add = _make_broadcast_binary("add", ew.add)
broadcast_and = _make_broadcast_binary("and", ew.bitwise_and)
broadcast_atan2 = _make_broadcast_binary("atan2", ew.atan2)
broadcast_complex = _make_broadcast_binary("complex", ew.complex)
broadcast_divide = _make_broadcast_binary("divide", ew.div)
broadcast_maximum = _make_broadcast_binary("maximum", ew.max)
broadcast_minimum = _make_broadcast_binary("minimum", ew.min)
broadcast_multiply = _make_broadcast_binary("multiply", ew.mul)
broadcast_next_after = _make_broadcast_binary("next_after", next_after)
broadcast_or = _make_broadcast_binary("or", ew.bitwise_or)
broadcast_polygamma = _make_broadcast_binary("polygamma", polygamma)
broadcast_power = _make_broadcast_binary("power", ew.pow)
broadcast_remainder = _make_broadcast_binary("remainder", ew.rem)
broadcast_shift_left = _make_broadcast_binary("shift_left", ew.shift_left)
broadcast_shift_right_arithmetic = _make_broadcast_binary("shift_right_arithmetic",
                                                          ew.shift_right_arithmetic)
broadcast_shift_right_logical = _make_broadcast_binary("shift_right_logical",
                                                       ew.shift_right_logical)
broadcast_subtract = _make_broadcast_binary("subtract", ew.sub)
broadcast_xor = _make_broadcast_binary("xor", ew.bitwise_xor)
broadcast_zeta = _make_broadcast_binary("zeta", zeta)

_COMPARE = {"EQ": ew.eq, "NE": ew.ne, "LT": ew.lt, "LE": ew.le, "GT": ew.gt, "GE": ew.ge}
_COMPARE_TOTAL = {"EQ": ew.eq_total_order, "NE": ew.ne_total_order,
                  "LT": ew.lt_total_order, "LE": ew.le_total_order,
                  "GT": ew.gt_total_order, "GE": ew.ge_total_order}


def broadcast_compare(lhs, rhs, comparison_direction="EQ", compare_type=None,
                      broadcast_dimensions=None):
    """Element-wise comparison with NumPy-style broadcasting (CHLO 'broadcast_compare').
    ``comparison_direction``: "EQ", "NE", "LT", "LE", "GT" or "GE"; ``compare_type``
    "TOTALORDER" uses the IEEE total order (-NaN < -inf < ... < -0 < +0 < ... < NaN), any
    other value (FLOAT, SIGNED, UNSIGNED, None) the operands' natural order."""
    direction = str(comparison_direction).upper()
    if direction not in _COMPARE:
        raise ValueError(f"broadcast_compare: comparison_direction must be one of "
                         f"{sorted(_COMPARE)}, got {comparison_direction!r}")
    x, y = _broadcast_operands("broadcast_compare",
                               _as_operands("broadcast_compare", lhs, rhs),
                               broadcast_dimensions)
    if compare_type is not None and str(compare_type).upper() == "TOTALORDER":
        return _COMPARE_TOTAL[direction](x, y)
    return _COMPARE[direction](x, y)


def broadcast_select(pred, on_true, on_false):
    """``lax.select`` with NumPy-style broadcasting of all three operands (CHLO
    'broadcast_select'): ``pred`` is bool, the cases share a dtype."""
    (p,) = _as_operands("broadcast_select", pred)
    t, f = _as_operands("broadcast_select", on_true, on_false)
    p, t, f = _broadcast_operands("broadcast_select", (p, t, f))
    return ew.select(p, t, f)


def constant_like(value, operand):
    """A splat constant of ``operand``'s shape and dtype (CHLO 'constant_like')."""
    return full_like(operand, value)
