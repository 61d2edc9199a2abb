"""Element-wise NumPy functions (ufuncs) built on lax primitives, with NumPy's
broadcasting and JAX's type promotion (Python scalars are weak: ``f32 * 2.0`` is f32).

Differences from NumPy, as in JAX: integer division by zero follows XLA (``x // 0`` is -1,
``x % 0`` is x) instead of warning and returning 0; integer overflow wraps."""
from __future__ import annotations

import operator

import numpy as np

import lax
# the primitives bound at import come from their family module: when ``import lax``
# comes first, this module is imported while the ``lax`` package is still empty
from lax import elementwise as lax_ew
from tracer import dtypes
from tracer.core import Array, Tracer, get_aval
from lax.utils import eager_binary_op, eager_unary_op
from tracer.numpy.util import (as_operand, check_arraylike, promote_args, promote_shapes,
                               promote_dtypes_numeric,
                               promote_args_inexact, promote_dtypes, promote_dtypes_inexact)


def _dt(x):
    return get_aval(x).dtype


def _unary(lax_fn, inexact=False, name=None, prim=None):
    def f(x, /):
        if isinstance(x, (Array, Tracer)) and (not inexact or x.aval.dtype.kind in "fc"):
            return lax_fn(x)      # (one operand of a float dtype: nothing to promote)
        check_arraylike(name, x)
        (x,) = promote_dtypes_inexact(x) if inexact else promote_dtypes(x)
        return lax_fn(x)
    f.__name__ = name
    f.__doc__ = f"Element-wise ``numpy.{name}`` (lax.{lax_fn.__name__})."
    # (lax_fn(x) is prim.bind(x) there)
    return f if prim is None else eager_unary_op(prim, f, "fc" if inexact else "fciu")


def _float_and_scalar(x1, x2) -> bool:
    """An Array/Tracer of a float or complex dtype and a Python float or int (a weak
    scalar): the promoted dtype is the array's, which the lax op's own handling of
    weak scalars (``lax.utils.promote_weak_scalars``) gives without the general
    promotion's conversions. Python ints beyond int64 take the general path (its error)."""
    if isinstance(x1, (Array, Tracer)):
        a, s = x1, x2
    elif isinstance(x2, (Array, Tracer)):
        a, s = x2, x1
    else:
        return False
    t = type(s)
    if t is not float and not (t is int and -2 ** 63 <= s < 2 ** 63):
        return False
    return a.aval.dtype.kind in "fc"


def _binary(lax_fn, inexact=False, name=None, scalar_fast=False, prim=None):
    def f(x1, x2, /):
        if scalar_fast and _float_and_scalar(x1, x2):
            return lax_fn(x1, x2)
        args = promote_args_inexact(name, x1, x2) if inexact else promote_args(name, x1, x2)
        return lax_fn(*args)
    f.__name__ = name
    f.__doc__ = f"Element-wise ``numpy.{name}`` with broadcasting (lax.{lax_fn.__name__})."
    if prim is None:
        return f
    return _with_eager_path(prim, name, f)


def _with_eager_path(prim, name, general, kinds="fciu"):
    fast = eager_binary_op(prim, name, general, kinds)
    # (array_methods puts the same fast path on x + y)
    fast.eager_primitive, fast.eager_kinds = prim, kinds
    return fast


def _add_or(x, y):
    # Bool addition is logical or (NumPy and JAX).
    return lax.bitwise_or(x, y) if _dt(x) == np.bool_ else lax.add(x, y)


_add_or.__name__ = "add"
add = _binary(_add_or, name="add", scalar_fast=True, prim=lax_ew.add_p)
subtract = _binary(lax_ew.sub, name="subtract", scalar_fast=True, prim=lax_ew.sub_p)
multiply = _binary(lax_ew.mul, name="multiply", scalar_fast=True, prim=lax_ew.mul_p)
maximum = _binary(lax_ew.max, name="maximum", scalar_fast=True, prim=lax_ew.max_p)
minimum = _binary(lax_ew.min, name="minimum", scalar_fast=True, prim=lax_ew.min_p)
equal = _binary(lax_ew.eq, name="equal", scalar_fast=True, prim=lax_ew.eq_p)
not_equal = _binary(lax_ew.ne, name="not_equal", scalar_fast=True, prim=lax_ew.ne_p)


def _is_complex_operand(x) -> bool:
    return type(x) is complex or (isinstance(x, (Array, Tracer)) and x.aval.dtype.kind == "c")


def _lexicographic(lax_fn):
    """``lax_fn`` (an order comparison) on promoted operands, complex ones compared
    lexicographically on (real, imag), as in JAX (lax's comparisons refuse them): the
    imaginary parts decide only where the real parts are equal, so ``0+nanj < 1+0j`` is
    True, where NumPy gives False for any NaN."""
    def lexicographic(x, y):
        if _dt(x).kind != "c":
            return lax_fn(x, y)
        rx, ry = lax.real(x), lax.real(y)
        return lax.select(lax.eq(rx, ry), lax_fn(lax.imag(x), lax.imag(y)), lax_fn(rx, ry))
    lexicographic.__name__ = lax_fn.__name__
    return lexicographic


def _ordering(lax_fn, name, prim):
    """An order comparison: real operands take the fast paths of ``_binary``, complex
    ones ``_lexicographic``."""
    real = _binary(lax_fn, name=name, scalar_fast=True)
    general = _binary(_lexicographic(lax_fn), name=name)

    def f(x1, x2, /):
        if _is_complex_operand(x1) or _is_complex_operand(x2):
            return general(x1, x2)
        return real(x1, x2)
    f.__name__ = name
    f.__doc__ = (f"Element-wise ``numpy.{name}`` with broadcasting (lax.{lax_fn.__name__}); "
                 "complex operands compare lexicographically on (real, imag), as in JAX.")
    return _with_eager_path(prim, name, f, "fiu")     # (complex: lexicographic)


less = _ordering(lax_ew.lt, "less", lax_ew.lt_p)
less_equal = _ordering(lax_ew.le, "less_equal", lax_ew.le_p)
greater = _ordering(lax_ew.gt, "greater", lax_ew.gt_p)
greater_equal = _ordering(lax_ew.ge, "greater_equal", lax_ew.ge_p)
arctan2 = _binary(lax_ew.atan2, inexact=True, name="arctan2")
atan2 = arctan2


def _bool_binary(lax_fn, name):
    def f(x1, x2, /):
        args = promote_args(name, x1, x2)
        for a in args:
            if not (dtypes.is_integer(_dt(a)) or _dt(a) == np.bool_):
                raise TypeError(f"{name} is only defined for integer and bool arrays, got "
                                f"{_dt(a).name}")
        return lax_fn(*args)
    f.__name__ = name
    return f


bitwise_and = _bool_binary(lax_ew.bitwise_and, "bitwise_and")
bitwise_or = _bool_binary(lax_ew.bitwise_or, "bitwise_or")
bitwise_xor = _bool_binary(lax_ew.bitwise_xor, "bitwise_xor")
def _int_shift_args(name, x1, x2):
    a, b = promote_args(name, x1, x2)
    if _dt(a) == np.bool_:
        # Bools shift as integers (NumPy and JAX).
        a, b = (lax.convert_element_type(v, dtypes.default_int_dtype()) for v in (a, b))
    if not dtypes.is_integer(_dt(a)):
        raise TypeError(f"{name} is only defined for integer and bool arrays, got "
                        f"{_dt(a).name}")
    return a, b


def left_shift(x1, x2, /):
    """``numpy.left_shift`` (shifts of the bit width or more give 0)."""
    return lax.shift_left(*_int_shift_args("left_shift", x1, x2))


bitwise_left_shift = left_shift


def right_shift(x1, x2, /):
    """``numpy.right_shift``: arithmetic for signed, logical for unsigned integers."""
    a, b = _int_shift_args("right_shift", x1, x2)
    if dtypes.is_unsigned_integer(_dt(a)):
        return lax.shift_right_logical(a, b)
    return lax.shift_right_arithmetic(a, b)


bitwise_right_shift = right_shift


def _to_bool(x):
    x = as_operand(x)
    return x if _dt(x) == np.bool_ else lax.ne(x, lax.full_like(x, 0))


def logical_and(x1, x2, /):
    """Element-wise truth of x1 and x2 (``numpy.logical_and``; nonzero is True)."""
    a, b = promote_args("logical_and", _to_bool(x1), _to_bool(x2))
    return lax.bitwise_and(a, b)


def logical_or(x1, x2, /):
    """Element-wise truth of x1 or x2 (``numpy.logical_or``)."""
    a, b = promote_args("logical_or", _to_bool(x1), _to_bool(x2))
    return lax.bitwise_or(a, b)


def logical_xor(x1, x2, /):
    """Element-wise truth of exactly one of x1, x2 (``numpy.logical_xor``)."""
    a, b = promote_args("logical_xor", _to_bool(x1), _to_bool(x2))
    return lax.bitwise_xor(a, b)


def logical_not(x, /):
    """Element-wise truth of not x (``numpy.logical_not``)."""
    return lax.bitwise_not(_to_bool(x))


def bitwise_not(x, /):
    """Bitwise inversion of integers, logical not of bools (``numpy.invert``)."""
    (x,) = promote_dtypes(x)
    return lax.bitwise_not(x)


invert = bitwise_not
bitwise_invert = bitwise_not


def true_divide(x1, x2, /):
    """``x1 / x2`` in floating point (integers are promoted to the default float)."""
    a, b = promote_args_inexact("true_divide", x1, x2)
    return lax.div(a, b)


# (two float or complex Arrays of one aval, or one and a Python float: lax.div as it is)
true_divide = _with_eager_path(lax_ew.div_p, "true_divide", true_divide, "fc")


divide = true_divide


def floor_divide(x1, x2, /):
    """``numpy.floor_divide`` (``//``): the quotient rounded toward -inf.

    Floats follow NumPy's ``npy_divmod`` (a zero quotient has the sign of ``x1 / x2``),
    and where exactly one operand is infinite or ``x2`` is zero the result is ``x1 / x2``,
    as the Array API standard's special cases require (``inf // 2`` is inf and
    ``-1 // inf`` is -0, where NumPy gives NaN and -1). Integers: ``x // 0`` is -1, as in
    XLA. TypeError for bool and complex operands."""
    a, b = promote_args("floor_divide", x1, x2)
    dt = _dt(a)
    if dt == np.bool_:
        raise TypeError("floor_divide is not defined for bool arrays")
    if dtypes.is_unsigned_integer(dt):
        return lax.div(a, b)
    if dtypes.is_integer(dt):
        a, b = _full_broadcast(a, b)
        q = lax.div(a, b)
        r = lax.rem(a, b)
        zero = lax.full_like(r, 0)
        adjust = lax.bitwise_and(lax.ne(r, zero), lax.ne(lax.lt(r, zero), lax.lt(b, zero)))
        # x // 0 stays XLA's -1 (no floor adjustment), for every sign of x.
        adjust = lax.bitwise_and(adjust, lax.ne(b, zero))
        return lax.select(adjust, lax.sub(q, lax.full_like(q, 1)), q)
    if dtypes.is_complex(dt):
        raise TypeError("floor_divide is not defined for complex arrays")
    a, b = _full_broadcast(a, b)
    # x / 0 (±inf, NaN for 0 / 0), finite / ±inf (a signed zero) and ±inf / finite (a
    # signed infinity): the fmod-based formula would give NaN or -1 there.
    direct = lax.bitwise_or(lax.eq(b, lax.full_like(b, 0)), lax.ne(isinf(a), isinf(b)))
    return lax.select(direct, lax.div(a, b), _float_floor_divide(a, b))


def _float_floor_divide(x1, x2):
    """The quotient of NumPy's ``npy_divmod`` for floats (x2 != 0): (x1 - fmod) / x2,
    floored, corrected by one when the remainder's sign differs from the divisor's; a
    zero quotient has the sign of x1 / x2."""
    mod = lax.rem(x1, x2)
    div = lax.div(lax.sub(x1, mod), x2)
    zero = lax.full_like(mod, 0)
    one = lax.full_like(div, 1)
    ind = lax.bitwise_and(lax.ne(mod, zero), lax.ne(lax.lt(x2, zero), lax.lt(mod, zero)))
    div = lax.select(ind, lax.sub(div, one), div)
    floordiv = lax.floor(div)
    floordiv = lax.select(lax.gt(lax.sub(div, floordiv), lax.full_like(div, 0.5)),
                          lax.add(floordiv, one), floordiv)
    return lax.select(lax.eq(div, zero), _signed_zero(lax.div(x1, x2)), floordiv)


def _signed_zero(x):
    """A zero with the sign bit of ``x``."""
    z = lax.full_like(x, 0)
    return lax.select(signbit(x), lax.neg(z), z)


def _zero_with_sign_of(r, b):
    """``r``, except that a zero ``r`` takes the sign of ``b`` (NumPy's remainder: the
    result has the divisor's sign, zeros included). The tangent of ``r`` is kept: there
    ``z - (stop_gradient(r) - r)`` is ``z - (+0) == z`` in value, with ``r``'s tangent."""
    z = _signed_zero(b)
    z = lax.sub(z, lax.sub(lax.stop_gradient(r), r))
    return lax.select(lax.eq(r, lax.full_like(r, 0)), z, r)


def remainder(x1, x2, /):
    """``numpy.remainder`` (``%``): the result has the divisor's sign, a zero result too
    (``-4.0 % 2.0`` is +0, ``4.0 % -2.0`` is -0, as in NumPy and the Array API). Integers:
    ``x % 0`` is x, as in XLA. TypeError for complex operands."""
    a, b = promote_args("remainder", x1, x2)
    if dtypes.is_complex(_dt(a)):
        raise TypeError("remainder is not defined for complex arrays")
    r = lax.rem(a, b)
    zero = lax.full_like(r, 0)
    if dtypes.is_unsigned_integer(_dt(a)):
        return r
    do_plus = lax.bitwise_and(lax.ne(lax.lt(r, zero), lax.lt(b, zero)), lax.ne(r, zero))
    r = lax.select(do_plus, lax.add(r, b), r)
    if dtypes.is_floating(_dt(a)):
        r = _zero_with_sign_of(r, _full_broadcast(r, b)[1])
    return r


mod = remainder


def fmod(x1, x2, /):
    """C-style remainder with the dividend's sign (lax.rem)."""
    a, b = promote_args("fmod", x1, x2)
    return lax.rem(a, b)


def divmod(x1, x2, /):
    """``(floor_divide(x1, x2), remainder(x1, x2))`` (``numpy.divmod``)."""
    return floor_divide(x1, x2), remainder(x1, x2)


def power(x1, x2, /):
    """``numpy.power``. A static Python int exponent uses repeated multiplication
    (lax.integer_pow), which keeps integer results exact and gradients defined at 0.
    Bools compute as int32 (JAX's rule; NumPy keeps ``bool ** bool`` bool)."""
    if isinstance(x2, int) and not isinstance(x2, bool):
        check_arraylike("power", x1)
        (a,) = promote_dtypes_numeric(x1)
        if x2 < 0 and dtypes.is_integer(_dt(a)):
            raise ValueError("Integers to negative integer powers are not allowed.")
        return lax.integer_pow(a, x2)
    check_arraylike("power", x1, x2)
    a, b = promote_shapes("power", *promote_dtypes_numeric(x1, x2))
    if dtypes.is_integer(_dt(a)):
        from tracer.core import concrete_value
        bv = concrete_value(b)
        if bv is not None and np.any(bv < 0):
            raise ValueError("Integers to negative integer powers are not allowed.")
    return lax.pow(a, b)


pow = power


def float_power(x1, x2, /):
    """``x1 ** x2`` computed in at least float64 (``numpy.float_power``; float32
    without enable_x64)."""
    a, b = promote_args("float_power", x1, x2)
    f64 = np.dtype(np.float64)
    if dtypes.is_lowp_float(_dt(a)):
        return lax.pow(a, b)      # as JAX: the low-precision floats keep their dtype
    dt = dtypes.result_type(_dt(a), f64) if dtypes.is_inexact(_dt(a)) else \
        dtypes.canonicalize_dtype(f64)
    return lax.pow(lax.convert_element_type(a, dt), lax.convert_element_type(b, dt))


def negative(x, /):
    """Element-wise -x (``numpy.negative``); TypeError for bools."""
    (x,) = promote_dtypes(as_operand(x))
    if _dt(x) == np.bool_:
        raise TypeError("negative is not defined for bool arrays; use logical_not")
    return lax.neg(x)


negative = eager_unary_op(lax_ew.neg_p, negative, "fciu")   # (bool: negative's error)


def positive(x, /):
    """Element-wise +x, a copy of x (``numpy.positive``)."""
    (x,) = promote_dtypes(as_operand(x))
    return x


def absolute(x, /):
    """``numpy.absolute``; complex -> real magnitude; unsigned and bool unchanged."""
    (x,) = promote_dtypes(as_operand(x))
    dt = _dt(x)
    if dt == np.bool_ or dtypes.is_unsigned_integer(dt):
        return x
    return lax.abs(x)


abs = absolute


def fabs(x, /):
    """Element-wise |x| as a float (``numpy.fabs``)."""
    (x,) = promote_dtypes_inexact(x)
    return lax.abs(x)


def sign(x, /):
    """Element-wise sign: -1, 0 or 1 (NaN for NaN; x / |x| for complex) (``numpy.sign``)."""
    (x,) = promote_dtypes(as_operand(x))
    if _dt(x) == np.bool_:
        raise TypeError("sign is not defined for bool arrays")
    if dtypes.is_inexact(_dt(x)):
        # lax.sign keeps the sign of a zero (-0.0 -> -0.0, like XLA); NumPy and the Array
        # API give +0 (0 + 0j for complex).
        return _select(lax.eq(x, _c(x, 0)), _c(x, 0), lax.sign(x))
    return lax.sign(x)


exp = _unary(lax_ew.exp, True, "exp", lax_ew.exp_p)
exp2 = _unary(lax_ew.exp2, True, "exp2", lax_ew.exp2_p)


def expm1(x, /):
    """Element-wise ``exp(x) - 1``, accurate near 0 (``numpy.expm1``, lax.expm1).

    Complex ``x + iy`` is ``expm1(x) cos(y) - 2 sin(y/2)^2 + i exp(x) sin(y)`` when both
    parts are finite (a zero ``y`` is kept exactly; a zero real part is +0), and ``exp(z) - 1`` otherwise, which
    gives the C99 / Array API special values (``expm1(inf + 0j)`` is ``inf + 0j``;
    NumPy's ``expm1`` gives ``inf + nanj``)."""
    check_arraylike("expm1", x)
    (x,) = promote_dtypes_inexact(x)
    if not dtypes.is_complex(_dt(x)):
        return lax.expm1(x)
    re, im = lax.real(x), lax.imag(x)
    half_sin = lax.sin(lax.mul(im, _c(im, 0.5)))
    out_re = lax.sub(lax.mul(lax.expm1(re), lax.cos(im)),
                     lax.mul(_c(im, 2), lax.mul(half_sin, half_sin)))
    # + 0.0 turns a -0 (from expm1(-0)) into +0: Re(exp(z)) - 1 is never -0.
    out_re = lax.add(out_re, _c(out_re, 0.0))
    out_im = _select(lax.eq(im, _c(im, 0)), im, lax.mul(lax.exp(re), lax.sin(im)))
    finite = lax.bitwise_and(lax.is_finite(re), lax.is_finite(im))
    return _select(finite, lax.complex(out_re, out_im),
                   lax.sub(lax.exp(x), _c(x, 1)))


log = _unary(lax_ew.log, True, "log", lax_ew.log_p)
log1p = _unary(lax_ew.log1p, True, "log1p", lax_ew.log1p_p)
sqrt = _unary(lax_ew.sqrt, True, "sqrt", lax_ew.sqrt_p)
_cbrt_any = _unary(lax_ew.cbrt, True, "cbrt", lax_ew.cbrt_p)


def cbrt(x, /):
    """Element-wise real cube root (``numpy.cbrt``, lax.cbrt). Like NumPy's and
    jax.numpy's, it refuses complex input (``lax.cbrt`` gives the principal complex
    cube root, the spec's)."""
    out_dt = _dt(x) if isinstance(x, (Array, Tracer)) else np.asarray(x).dtype
    if np.dtype(out_dt).kind == "c":
        raise TypeError(f"cbrt: complex input ({np.dtype(out_dt).name}) is not supported, "
                        "as in numpy.cbrt and jax.numpy.cbrt; lax.cbrt gives the principal "
                        "complex cube root")
    return _cbrt_any(x)
sin = _unary(lax_ew.sin, True, "sin", lax_ew.sin_p)
cos = _unary(lax_ew.cos, True, "cos", lax_ew.cos_p)
tan = _unary(lax_ew.tan, True, "tan", lax_ew.tan_p)
tanh = _unary(lax_ew.tanh, True, "tanh", lax_ew.tanh_p)


def log2(x, /):
    """Element-wise base-2 logarithm (``numpy.log2``)."""
    (x,) = promote_dtypes_inexact(x)
    return lax.div(lax.log(x), lax.full_like(x, np.log(2)))


def log10(x, /):
    """Element-wise base-10 logarithm (``numpy.log10``)."""
    (x,) = promote_dtypes_inexact(x)
    return lax.div(lax.log(x), lax.full_like(x, np.log(10)))


def square(x, /):
    """``numpy.square`` (x * x). A bool computes as int32, as in JAX (NumPy keeps bool)."""
    (x,) = promote_dtypes_numeric(as_operand(x))
    return lax.square(x)


def reciprocal(x, /):
    """Element-wise 1 / x (``numpy.reciprocal``; integer division for integers)."""
    (x,) = promote_dtypes(as_operand(x))
    return lax.integer_pow(x, -1) if dtypes.is_inexact(_dt(x)) else \
        lax.div(lax.full_like(x, 1), x)


def floor(x, /):
    """Element-wise floor (``numpy.floor``; integers unchanged)."""
    (x,) = promote_dtypes(as_operand(x))
    if not dtypes.is_floating(_dt(x)):
        if dtypes.is_complex(_dt(x)):
            raise TypeError("floor is not defined for complex arrays")
        return x
    return lax.floor(x)


def ceil(x, /):
    """Element-wise ceiling (``numpy.ceil``; integers unchanged)."""
    (x,) = promote_dtypes(as_operand(x))
    if not dtypes.is_floating(_dt(x)):
        if dtypes.is_complex(_dt(x)):
            raise TypeError("ceil is not defined for complex arrays")
        return x
    return lax.ceil(x)


def trunc(x, /):
    """Element-wise rounding toward zero (``numpy.trunc``; also ``fix``)."""
    (x,) = promote_dtypes(as_operand(x))
    if not dtypes.is_floating(_dt(x)):
        return x
    return lax.select(lax.lt(x, lax.full_like(x, 0)), lax.ceil(x), lax.floor(x))


fix = trunc


def rint(x, /):
    """Element-wise rounding to the nearest integer, ties to even (``numpy.rint``)."""
    (x,) = promote_dtypes_inexact(x)
    if dtypes.is_complex(_dt(x)):
        return lax.complex(lax.round_nearest_even(lax.real(x)),
                           lax.round_nearest_even(lax.imag(x)))
    return lax.round_nearest_even(x)


def round(a, decimals=0, out=None):
    """``numpy.round``: half to even, at ``decimals`` decimal places."""
    if out is not None:
        raise NotImplementedError("round: the out argument is not supported (Arrays are "
                                  "immutable)")
    (a,) = promote_dtypes(as_operand(a))
    dt = _dt(a)
    decimals = operator.index(decimals)
    if dtypes.is_integer(dt) or dt == np.bool_:
        if decimals >= 0:
            return a
        f = lax.full_like(a, 10 ** (-decimals))
        return lax.mul(lax.convert_element_type(rint(true_divide(a, f)), dt), f)
    if decimals == 0:
        return rint(a)
    f = lax.full_like(a, 10.0 ** decimals)
    return lax.div(rint(lax.mul(a, f)), f)


around = round


def isfinite(x, /):
    """True where x is neither infinite nor NaN (``numpy.isfinite``)."""
    x = as_operand(x)
    dt = _dt(x)
    if dtypes.is_floating(dt):
        return lax.is_finite(x)
    if dtypes.is_complex(dt):
        return lax.bitwise_and(lax.is_finite(lax.real(x)), lax.is_finite(lax.imag(x)))
    return lax.full_like(x, True, dtypes.bool_)


def isinf(x, /):
    """True where x is ±inf (either part for complex) (``numpy.isinf``)."""
    x = as_operand(x)
    dt = _dt(x)
    if dtypes.is_floating(dt):
        return lax.eq(lax.abs(x), lax.full_like(x, np.inf))
    if dtypes.is_complex(dt):
        return logical_or(isinf(lax.real(x)), isinf(lax.imag(x)))
    return lax.full_like(x, False, dtypes.bool_)


def isnan(x, /):
    """True where x is NaN (``numpy.isnan``)."""
    x = as_operand(x)
    if dtypes.is_inexact(_dt(x)):
        return lax.ne(x, x)
    return lax.full_like(x, False, dtypes.bool_)


def isposinf(x, /):
    """True where x is +inf (``numpy.isposinf``)."""
    x = as_operand(x)
    return lax.eq(x, lax.full_like(x, np.inf)) if dtypes.is_floating(_dt(x)) else \
        lax.full_like(x, False, dtypes.bool_)


def isneginf(x, /):
    """True where x is -inf (``numpy.isneginf``)."""
    x = as_operand(x)
    return lax.eq(x, lax.full_like(x, -np.inf)) if dtypes.is_floating(_dt(x)) else \
        lax.full_like(x, False, dtypes.bool_)


def real(x, /):
    """The real part (``numpy.real``; real input unchanged)."""
    x = as_operand(x)
    return lax.real(x) if dtypes.is_complex(_dt(x)) else x


def imag(x, /):
    """The imaginary part (``numpy.imag``; zeros for real input)."""
    x = as_operand(x)
    return lax.imag(x) if dtypes.is_complex(_dt(x)) else lax.full_like(x, 0)


def conjugate(x, /):
    """The complex conjugate (``numpy.conjugate``; real input unchanged)."""
    x = as_operand(x)
    return lax.conj(x) if dtypes.is_complex(_dt(x)) else x


conj = conjugate



# ============================ more element-wise functions ================================

def _c(x, value):
    """``value`` as a rank-0 constant of ``x``'s dtype (lax ops broadcast it)."""
    return lax.full((), value, _dt(x))


def _select(pred, on_true, on_false):
    """lax.select with rank-0 branches broadcast to the predicate's shape."""
    shape = get_aval(pred).shape
    if get_aval(on_true).shape != shape:
        on_true = lax.broadcast_in_dim(on_true, shape, ())
    if get_aval(on_false).shape != shape:
        on_false = lax.broadcast_in_dim(on_false, shape, ())
    return lax.select(pred, on_true, on_false)


def _inexact_operand(name, x):
    check_arraylike(name, x)
    (x,) = promote_dtypes_inexact(x)
    return x


def _real_args(name, *args):
    out = promote_args(name, *args)
    if dtypes.is_complex(_dt(out[0])):
        raise TypeError(f"{name} is not defined for complex arrays (got {_dt(out[0]).name})")
    return out


def _real_inexact_args(name, *args):
    out = promote_args_inexact(name, *args)
    if dtypes.is_complex(_dt(out[0])):
        raise TypeError(f"{name} is not defined for complex arrays (got {_dt(out[0]).name})")
    return out


def _full_broadcast(*args):
    """Broadcast every argument (rank-0 ones included) to the common shape."""
    from tracer.numpy.util import broadcast_to_shape
    shape = np.broadcast_shapes(*(get_aval(a).shape for a in args))
    return [broadcast_to_shape(a, shape) for a in args]


def arcsin(x, /):
    """Element-wise inverse sine (``numpy.arcsin``, lax.asin): NaN outside [-1, 1] for
    real input; the principal branch for complex input."""
    return lax.asin(_inexact_operand("arcsin", x))


def arccos(x, /):
    """Element-wise inverse cosine (``numpy.arccos``, lax.acos), in [0, pi]."""
    return lax.acos(_inexact_operand("arccos", x))


def arctan(x, /):
    """Element-wise inverse tangent (``numpy.arctan``, lax.atan)."""
    return lax.atan(_inexact_operand("arctan", x))


def sinh(x, /):
    """Element-wise hyperbolic sine (``numpy.sinh``, lax.sinh)."""
    return lax.sinh(_inexact_operand("sinh", x))


def cosh(x, /):
    """Element-wise hyperbolic cosine (``numpy.cosh``, lax.cosh)."""
    return lax.cosh(_inexact_operand("cosh", x))


def arcsinh(x, /):
    """Element-wise inverse hyperbolic sine (``numpy.arcsinh``, lax.asinh)."""
    return lax.asinh(_inexact_operand("arcsinh", x))


def arccosh(x, /):
    """Element-wise inverse hyperbolic cosine (``numpy.arccosh``, lax.acosh): NaN below
    1 for real input."""
    return lax.acosh(_inexact_operand("arccosh", x))


def arctanh(x, /):
    """Element-wise inverse hyperbolic tangent (``numpy.arctanh``, lax.atanh): ±inf at
    ±1, NaN outside [-1, 1] for real input."""
    return lax.atanh(_inexact_operand("arctanh", x))


asin, acos, atan, asinh, acosh, atanh = arcsin, arccos, arctan, arcsinh, arccosh, arctanh


def deg2rad(x, /):
    """Degrees to radians (``numpy.deg2rad``)."""
    x = _inexact_operand("deg2rad", x)
    return lax.mul(x, _c(x, np.pi / 180))


def rad2deg(x, /):
    """Radians to degrees (``numpy.rad2deg``)."""
    x = _inexact_operand("rad2deg", x)
    return lax.mul(x, _c(x, 180 / np.pi))


radians, degrees = deg2rad, rad2deg


def _int_view(x):
    """The bits of a float array as the signed integer type of the same width."""
    return lax.bitcast_convert_type(x, np.dtype(f"i{_dt(x).itemsize}"))


def signbit(x, /):
    """True where the sign bit is set (``numpy.signbit``), -0.0 included."""
    check_arraylike("signbit", x)
    (x,) = promote_dtypes(x)
    dt = _dt(x)
    if dt == np.bool_ or dtypes.is_unsigned_integer(dt):
        return lax.full_like(x, False, dtypes.bool_)
    if dtypes.is_integer(dt):
        return lax.lt(x, _c(x, 0))
    if dtypes.is_complex(dt):
        raise TypeError("signbit is not defined for complex arrays")
    iv = _int_view(x)
    return lax.lt(iv, lax.full((), 0, _dt(iv)))


def copysign(x1, x2, /):
    """``|x1|`` with the sign bit of ``x2`` (``numpy.copysign``)."""
    a, b = _full_broadcast(*_real_inexact_args("copysign", x1, x2))
    return _select(signbit(b), lax.neg(lax.abs(a)), lax.abs(a))


def nextafter(x1, x2, /):
    """The next representable float after ``x1`` toward ``x2`` (``numpy.nextafter``,
    lax.nextafter)."""
    a, b = _full_broadcast(*_real_inexact_args("nextafter", x1, x2))
    return lax.nextafter(a, b)


def spacing(x, /):
    """The distance from ``x`` to the next float away from zero (``numpy.spacing``):
    negative for negative ``x``; NaN for ±inf and NaN."""
    x = _inexact_operand("spacing", x)
    if dtypes.is_complex(_dt(x)):
        raise TypeError("spacing is not defined for complex arrays")
    big = np.inf
    if dtypes.is_lowp_float(_dt(x)) and not np.isinf(np.float32(np.inf).astype(_dt(x))):
        big = float(dtypes.finfo(_dt(x)).max)     # (no inf in the format: step to its max)
    toward = _select(signbit(x), _c(x, -big), _c(x, big))
    out = lax.sub(nextafter(x, toward), x)
    return _select(isinf(x), _c(x, np.nan), out)


def _float_layout(dt):
    fi = np.finfo(dt)
    return fi.nmant, fi.nexp, (1 << (fi.nexp - 1)) - 1


def _as_signed(value, it):
    """A bit pattern (Python int) as a value of the signed integer dtype ``it``."""
    return int(np.array(value, dtype=np.uint64).astype(np.dtype(f"u{it.itemsize}")).view(it))


def frexp(x, /):
    """Mantissa in [0.5, 1) and exponent with ``x = m * 2**e`` (``numpy.frexp``); 0, ±inf
    and NaN give (x, 0). The exponent is int32."""
    x = _inexact_operand("frexp", x)
    dt = _dt(x)
    if dtypes.is_complex(dt):
        raise TypeError("frexp is not defined for complex arrays")
    nmant, nexp, bias = _float_layout(dt)
    it = np.dtype(f"i{dt.itemsize}")
    # Subnormals: scale into the normal range first and correct the exponent after.
    sub = lax.lt(lax.abs(x), _c(x, np.finfo(dt).tiny))
    xs = lax.select(sub, lax.mul(x, _c(x, 2.0 ** nmant)), x)
    bits = _int_view(xs)
    e = lax.bitwise_and(lax.shift_right_logical(bits, lax.full((), nmant, it)),
                        lax.full((), (1 << nexp) - 1, it))
    e = lax.sub(e, lax.full((), bias - 1, it))
    e = lax.select(sub, lax.sub(e, lax.full((), nmant, it)), e)
    # Replace the exponent field by that of 0.5 (bias - 1).
    keep = _as_signed(~(((1 << nexp) - 1) << nmant) & ((1 << (8 * dt.itemsize)) - 1), it)
    m_bits = lax.bitwise_or(lax.bitwise_and(bits, lax.full((), keep, it)),
                            lax.full((), (bias - 1) << nmant, it))
    m = lax.bitcast_convert_type(m_bits, dt)
    special = lax.bitwise_or(lax.eq(x, _c(x, 0)), lax.bitwise_not(lax.is_finite(x)))
    m = lax.select(special, x, m)
    e = _select(special, lax.full((), 0, it), e)
    return m, lax.convert_element_type(e, np.int32)


def _exact_pow2(e, dt):
    """2**e in ``dt`` for integers ``e`` in the normal exponent range (bit assembly)."""
    nmant, _, bias = _float_layout(dt)
    it = np.dtype(f"i{dt.itemsize}")
    e = lax.convert_element_type(e, it)
    return lax.bitcast_convert_type(
        lax.shift_left(lax.add(e, lax.full((), bias, it)), lax.full((), nmant, it)), dt)


def ldexp(x1, x2, /):
    """``x1 * 2**x2`` for an integer ``x2`` (``numpy.ldexp``): exact while the result is
    representable; overflow gives ±inf, underflow ±0."""
    check_arraylike("ldexp", x1, x2)
    x2 = as_operand(x2)
    if not (dtypes.is_integer(_dt(x2)) or _dt(x2) == np.bool_):
        raise TypeError(f"ldexp: the exponent must be an integer array, got {_dt(x2).name}")
    (x1,) = promote_dtypes_inexact(x1)
    dt = _dt(x1)
    if dtypes.is_complex(dt):
        raise TypeError("ldexp is not defined for complex arrays")
    from tracer.numpy.util import promote_shapes
    x1, x2 = promote_shapes("ldexp", x1, lax.convert_element_type(x2, np.int32))
    _, _, bias = _float_layout(dt)
    lo, hi = 1 - bias, bias

    def clamp(v, a, b):
        return lax.clamp(lax.full((), a, np.int32), v, lax.full((), b, np.int32))

    # Three factors, each within the normal range, reach every representable result;
    # the large factor goes first so that only the last product can round.
    e = clamp(x2, 3 * lo, 3 * hi)
    e1 = clamp(e, lo, hi)
    rest = lax.sub(e, e1)
    e2 = clamp(rest, lo, hi)
    e3 = lax.sub(rest, e2)
    out = lax.mul(x1, _exact_pow2(e1, dt))
    out = lax.mul(out, _exact_pow2(e2, dt))
    return lax.mul(out, _exact_pow2(e3, dt))


def modf(x, /, out=None):
    """Fractional and integral parts, both with the sign of ``x`` (``numpy.modf``)."""
    if out is not None:
        raise NotImplementedError("modf: the out argument is not supported")
    x = _inexact_operand("modf", x)
    whole = trunc(x)
    frac = lax.select(isinf(x), lax.full_like(x, 0), lax.sub(x, whole))
    return copysign(frac, x), whole


def hypot(x1, x2, /):
    """sqrt(x1**2 + x2**2) without intermediate overflow or underflow (``numpy.hypot``);
    inf if either is infinite, even when the other is NaN."""
    a, b = _full_broadcast(*_real_inexact_args("hypot", x1, x2))
    a, b = lax.abs(a), lax.abs(b)
    hi, lo = lax.max(a, b), lax.min(a, b)
    safe_hi = lax.select(lax.eq(hi, _c(hi, 0)), lax.full_like(hi, 1), hi)
    r = lax.div(lo, safe_hi)
    out = lax.mul(hi, lax.sqrt(lax.add(_c(r, 1), lax.mul(r, r))))
    out = lax.select(lax.eq(hi, _c(hi, 0)), hi, out)
    either_inf = lax.bitwise_or(isinf(a), isinf(b))
    return _select(either_inf, _c(out, np.inf), out)


def logaddexp(x1, x2, /):
    """log(exp(x1) + exp(x2)) without overflow (``numpy.logaddexp``); equal infinities
    give that infinity.

    Derivatives: the softmax weights ``exp(x1 - out)`` and ``exp(x2 - out)`` (JAX's
    custom jvp), computed as ``logistic(±(x1 - x2))``: 0.5 each at a tie, and finite at
    infinite inputs — (1, 0) at (inf, finite), 0.5 each at equal infinities (JAX gives
    (1, 1) at (inf, 0) and NaN at (-inf, -inf)); NaN for a NaN input."""
    a, b = _full_broadcast(*_real_inexact_args("logaddexp", x1, x2))
    return _logaddexp(a, b)


def logaddexp2(x1, x2, /):
    """log2(2**x1 + 2**x2) without overflow (``numpy.logaddexp2``). Derivatives: the
    weights ``2**(x1 - out)`` and ``2**(x2 - out)``, at ties and infinities as for
    ``logaddexp``."""
    a, b = _full_broadcast(*_real_inexact_args("logaddexp2", x1, x2))
    return _logaddexp2(a, b)


def _logaddexp_fwd(a, b, base2):
    amax = lax.max(a, b)
    delta = lax.sub(a, b)
    nan_delta = lax.ne(delta, delta)
    safe = lax.select(nan_delta, lax.full_like(delta, 0), delta)
    e = lax.neg(lax.abs(safe))
    if base2:
        out = lax.add(amax, lax.div(lax.log1p(lax.exp2(e)), _c(amax, np.log(2.0))))
    else:
        out = lax.add(amax, lax.log1p(lax.exp(e)))
    # NaN delta: equal infinities (a + b is that infinity) or a NaN operand (a + b is NaN).
    return lax.select(nan_delta, lax.add(a, b), out)


def _logaddexp_jvp_rule(base2):
    # The derivative through max/abs of the primal formula is wrong at ties (max and abs
    # each give their own subgradient); the derivatives are the weights of a two-way
    # softmax: w1 = 1 / (1 + base**(x2 - x1)) = logistic(ln(base) * (x1 - x2)), w2 =
    # logistic(-...). Equal inputs (infinities included, where x1 - x2 is NaN) weigh 0.5
    # each; a NaN input keeps a NaN difference, so NaN weights.
    def rule(primals, tangents):
        a, b = primals
        ta, tb = tangents
        out = (_logaddexp2 if base2 else _logaddexp)(a, b)
        # Only equal infinities are replaced: a select on ``a == b`` alone would also
        # cut the tangent of the difference at finite ties, and every higher derivative
        # there (grad(grad(softplus))(0.) would be 0 instead of 0.25).
        diff = lax.sub(a, b)
        delta = lax.select(lax.bitwise_and(lax.eq(a, b), lax.ne(diff, diff)),
                           lax.full_like(a, 0), diff)
        if base2:
            delta = lax.mul(delta, _c(delta, np.log(2.0)))
        wa = lax.logistic(delta)
        wb = lax.logistic(lax.neg(delta))
        return out, lax.add(lax.mul(ta, wa), lax.mul(tb, wb))
    return rule


def _make_logaddexp(base2):
    from tracer.custom_derivatives import custom_jvp

    def fun(a, b):
        return _logaddexp_fwd(a, b, base2)

    fun.__name__ = "logaddexp2" if base2 else "logaddexp"
    f = custom_jvp(fun)
    f.defjvp(_logaddexp_jvp_rule(base2))
    return f


_logaddexp = _make_logaddexp(False)
_logaddexp2 = _make_logaddexp(True)


def fmax(x1, x2, /):
    """Element-wise maximum ignoring NaNs (``numpy.fmax``): NaN only if both are NaN.
    Floats as jax.numpy.fmax, ``where(x1 > x2 | isnan(x2), x1, x2)``: equal values
    (-0.0 and +0.0) give ``x2`` (NumPy gives ``x1``), and so does the derivative at a tie."""
    a, b = _full_broadcast(*promote_args("fmax", x1, x2))
    if not dtypes.is_inexact(_dt(a)):
        return lax.max(a, b)
    if dtypes.is_complex(_dt(a)):
        return lax.select(lax.ne(b, b), a, lax.select(lax.ne(a, a), b, maximum(a, b)))
    return lax.select(lax.bitwise_or(lax.gt(a, b), lax.ne(b, b)), a, b)


def fmin(x1, x2, /):
    """Element-wise minimum ignoring NaNs (``numpy.fmin``); floats as jax.numpy.fmin,
    ``where(x1 < x2 | isnan(x2), x1, x2)``."""
    a, b = _full_broadcast(*promote_args("fmin", x1, x2))
    if not dtypes.is_inexact(_dt(a)):
        return lax.min(a, b)
    if dtypes.is_complex(_dt(a)):
        return lax.select(lax.ne(b, b), a, lax.select(lax.ne(a, a), b, minimum(a, b)))
    return lax.select(lax.bitwise_or(lax.lt(a, b), lax.ne(b, b)), a, b)



def _euclid(a, b):
    """gcd of non-negative integer arrays by Euclid's algorithm, unrolled to the bound on
    its steps for the dtype (about 1.44 log2 of the largest value); eager calls stop as
    soon as every remainder is zero."""
    from tracer.core import concrete_value
    steps = int(1.45 * 8 * _dt(a).itemsize) + 3
    zero = lax.full_like(b, 0)
    for _ in range(steps):
        bv = concrete_value(b)
        if bv is not None and not np.any(bv):
            break
        bz = lax.eq(b, zero)
        r = lax.rem(a, lax.select(bz, lax.full_like(b, 1), b))
        a, b = lax.select(bz, a, b), lax.select(bz, b, r)
    return a


def gcd(x1, x2, /):
    """Greatest common divisor of |x1| and |x2| (``numpy.gcd``); gcd(0, 0) = 0."""
    a, b = promote_args("gcd", x1, x2)
    if not dtypes.is_integer(_dt(a)):
        raise TypeError(f"gcd is only defined for integer arrays, got {_dt(a).name}")
    a, b = _full_broadcast(absolute(a), absolute(b))
    return _euclid(lax.max(a, b), lax.min(a, b))


def lcm(x1, x2, /):
    """Least common multiple of |x1| and |x2| (``numpy.lcm``); 0 if either is 0."""
    a, b = promote_args("lcm", x1, x2)
    if not dtypes.is_integer(_dt(a)):
        raise TypeError(f"lcm is only defined for integer arrays, got {_dt(a).name}")
    a, b = _full_broadcast(absolute(a), absolute(b))
    g = _euclid(lax.max(a, b), lax.min(a, b))
    gz = lax.eq(g, lax.full_like(g, 0))
    out = lax.mul(lax.div(a, lax.select(gz, lax.full_like(g, 1), g)), b)
    return lax.select(gz, lax.full_like(g, 0), out)


def heaviside(x1, x2, /):
    """The Heaviside step: 0 for x1 < 0, x2 at 0, 1 for x1 > 0 (``numpy.heaviside``);
    NaN for NaN."""
    a, b = _real_inexact_args("heaviside", x1, x2)
    shape = np.broadcast_shapes(get_aval(a).shape, get_aval(b).shape)
    from tracer.numpy.util import broadcast_to_shape
    a, b = broadcast_to_shape(a, shape), broadcast_to_shape(b, shape)
    zero, one = lax.full_like(a, 0), lax.full_like(a, 1)
    out = lax.select(lax.lt(a, zero), zero, lax.select(lax.gt(a, zero), one, b))
    return lax.select(lax.ne(a, a), a, out)


def sinc(x, /):
    """sin(pi x) / (pi x), 1 at 0 (``numpy.sinc``). Near 0 a Taylor polynomial gives the
    value and all derivatives of the limit (sinc'(0) = 0, sinc''(0) = -pi^2/3)."""
    x = _inexact_operand("sinc", x)
    px = lax.mul(x, _c(x, np.pi))
    small = lax.lt(lax.abs(px), _c(x, 0.05)) if not dtypes.is_complex(_dt(x)) else \
        lax.lt(lax.abs(px), lax.full((), 0.05, dtypes.real_dtype(_dt(x))))
    safe = lax.select(small, lax.full_like(px, 1), px)
    z2 = lax.mul(px, px)
    # 1 - z^2/3! + z^4/5! - z^6/7! + z^8/9!
    poly = _c(x, 1 / 362880)
    for coef in (-1 / 5040, 1 / 120, -1 / 6, 1.0):
        poly = lax.add(lax.mul(poly, z2), _c(x, coef))
    return lax.select(small, poly, lax.div(lax.sin(safe), safe))


def i0(x):
    """The modified Bessel function of the first kind, order 0 (``numpy.i0``): exp(|x|)
    times lax.bessel_i0e(x); real input only."""
    x = _inexact_operand("i0", x)
    if dtypes.is_complex(_dt(x)):
        raise TypeError("i0 of complex input is not supported")
    return lax.mul(lax.exp(lax.abs(x)), lax.bessel_i0e(x))


def angle(z, deg=False):
    """The argument of complex ``z`` (``numpy.angle``), in radians unless ``deg``."""
    check_arraylike("angle", z)
    z = as_operand(z)
    if dtypes.is_complex(_dt(z)):
        re, im = lax.real(z), lax.imag(z)
    else:
        (re,) = promote_dtypes_inexact(z)
        im = lax.full_like(re, 0)
    out = lax.atan2(im, re)
    return lax.mul(out, _c(out, 180 / np.pi)) if deg else out


def bitwise_count(x, /):
    """The number of 1 bits in |x| (``numpy.bitwise_count``), as uint8."""
    check_arraylike("bitwise_count", x)
    (x,) = promote_dtypes(x)
    dt = _dt(x)
    if not (dtypes.is_integer(dt) or dt == np.bool_):
        raise TypeError(f"bitwise_count is only defined for integer arrays, got {dt.name}")
    if dt == np.bool_:
        return lax.convert_element_type(x, np.uint8)
    if dtypes.is_signed_integer(dt):
        x = lax.abs(x)
    return lax.convert_element_type(lax.population_count(x), np.uint8)


def iscomplex(x):
    """True where the imaginary part is nonzero (``numpy.iscomplex``)."""
    x = as_operand(x)
    if not dtypes.is_complex(_dt(x)):
        return lax.full_like(x, False, dtypes.bool_)
    return lax.ne(lax.imag(x), lax.full((), 0, dtypes.real_dtype(_dt(x))))


def isreal(x):
    """True where the imaginary part is zero (``numpy.isreal``)."""
    x = as_operand(x)
    if not dtypes.is_complex(_dt(x)):
        return lax.full_like(x, True, dtypes.bool_)
    return lax.eq(lax.imag(x), lax.full((), 0, dtypes.real_dtype(_dt(x))))


def isrealobj(x):
    """True unless ``x`` has a complex dtype (``numpy.isrealobj``)."""
    return not dtypes.is_complex(dtypes.dtype_and_weak_type(as_operand(x))[0])


def iscomplexobj(x):
    """True if ``x`` has a complex dtype (``numpy.iscomplexobj``)."""
    return dtypes.is_complex(dtypes.dtype_and_weak_type(as_operand(x))[0])


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|a - b| <= atol + rtol |b| element-wise (``numpy.isclose``); equal infinities are
    close, NaNs only with ``equal_nan``."""
    a, b = promote_args("isclose", a, b)
    dt = _dt(a)
    if dt == np.bool_:
        return equal(a, b)
    if not dtypes.is_inexact(dt):
        a, b = promote_dtypes_inexact(a, b)
        dt = _dt(a)
    a, b = _full_broadcast(a, b)
    rdt = dtypes.real_dtype(dt)
    tol = lax.add(lax.full((), atol, rdt), lax.mul(lax.full((), rtol, rdt), lax.abs(b)))
    finite_close = lax.le(lax.abs(lax.sub(a, b)), tol)
    any_inf = lax.bitwise_or(isinf(a), isinf(b))
    out = lax.select(any_inf, lax.eq(a, b), finite_close)
    if equal_nan:
        out = lax.bitwise_or(out, lax.bitwise_and(isnan(a), isnan(b)))
    return out


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """Replace NaN by ``nan`` and ±inf by ``posinf``/``neginf`` (default: the largest
    finite values of the dtype) (``numpy.nan_to_num``)."""
    check_arraylike("nan_to_num", x)
    x = as_operand(x)
    dt = _dt(x)
    if dtypes.is_complex(dt):
        re = nan_to_num(lax.real(x), nan=nan, posinf=posinf, neginf=neginf)
        im = nan_to_num(lax.imag(x), nan=nan, posinf=posinf, neginf=neginf)
        return lax.complex(re, im)
    if not dtypes.is_inexact(dt):
        return x
    fi = np.finfo(dt)
    posinf = fi.max if posinf is None else posinf
    neginf = fi.min if neginf is None else neginf
    out = _select(lax.ne(x, x), _c(x, nan), x)
    out = _select(isposinf(x), _c(x, posinf), out)
    return _select(isneginf(x), _c(x, neginf), out)
