"""Element-wise NumPy functions (ufuncs) built on lax primitives, with NumPy's
broadcasting and JAX's type promotion (Python scalars are weak: ``f32 * 2.0`` is f32).

Differences from NumPy, as in JAX: integer division by zero follows XLA (``x // 0`` is -1,
``x % 0`` is x) instead of warning and returning 0; integer overflow wraps."""
from __future__ import annotations

import operator

import numpy as np

import lax
from tracer import dtypes
from tracer.core import get_aval
from tracer.numpy.util import (as_operand, check_arraylike, promote_args,
                               promote_args_inexact, promote_dtypes, promote_dtypes_inexact)


def _dt(x):
    return get_aval(x).dtype


def _unary(lax_fn, inexact=False, name=None):
    def f(x, /):
        check_arraylike(name, x)
        (x,) = promote_dtypes_inexact(x) if inexact else promote_dtypes(x)
        return lax_fn(x)
    f.__name__ = name
    f.__doc__ = f"Element-wise ``numpy.{name}`` (lax.{lax_fn.__name__})."
    return f


def _binary(lax_fn, inexact=False, name=None):
    def f(x1, x2, /):
        args = promote_args_inexact(name, x1, x2) if inexact else promote_args(name, x1, x2)
        return lax_fn(*args)
    f.__name__ = name
    f.__doc__ = f"Element-wise ``numpy.{name}`` with broadcasting (lax.{lax_fn.__name__})."
    return f


add = _binary(lax.add, name="add")
subtract = _binary(lax.sub, name="subtract")
multiply = _binary(lax.mul, name="multiply")
maximum = _binary(lax.max, name="maximum")
minimum = _binary(lax.min, name="minimum")
equal = _binary(lax.eq, name="equal")
not_equal = _binary(lax.ne, name="not_equal")
less = _binary(lax.lt, name="less")
less_equal = _binary(lax.le, name="less_equal")
greater = _binary(lax.gt, name="greater")
greater_equal = _binary(lax.ge, name="greater_equal")
arctan2 = _binary(lax.atan2, inexact=True, name="arctan2")
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


bitwise_and = _bool_binary(lax.bitwise_and, "bitwise_and")
bitwise_or = _bool_binary(lax.bitwise_or, "bitwise_or")
bitwise_xor = _bool_binary(lax.bitwise_xor, "bitwise_xor")
left_shift = _bool_binary(lax.shift_left, "left_shift")
bitwise_left_shift = left_shift


def right_shift(x1, x2, /):
    """``numpy.right_shift``: arithmetic for signed, logical for unsigned integers."""
    a, b = promote_args("right_shift", x1, x2)
    if dtypes.is_unsigned_integer(_dt(a)):
        return lax.shift_right_logical(a, b)
    return lax.shift_right_arithmetic(a, b)


bitwise_right_shift = right_shift


def _to_bool(x):
    x = as_operand(x)
    return x if _dt(x) == np.bool_ else lax.ne(x, lax.full_like(x, 0))


def logical_and(x1, x2, /):
    a, b = promote_args("logical_and", _to_bool(x1), _to_bool(x2))
    return lax.bitwise_and(a, b)


def logical_or(x1, x2, /):
    a, b = promote_args("logical_or", _to_bool(x1), _to_bool(x2))
    return lax.bitwise_or(a, b)


def logical_xor(x1, x2, /):
    a, b = promote_args("logical_xor", _to_bool(x1), _to_bool(x2))
    return lax.bitwise_xor(a, b)


def logical_not(x, /):
    return lax.bitwise_not(_to_bool(x))


def bitwise_not(x, /):
    (x,) = promote_dtypes(x)
    return lax.bitwise_not(x)


invert = bitwise_not
bitwise_invert = bitwise_not


def true_divide(x1, x2, /):
    """``x1 / x2`` in floating point (integers are promoted to the default float)."""
    a, b = promote_args_inexact("true_divide", x1, x2)
    return lax.div(a, b)


divide = true_divide


def floor_divide(x1, x2, /):
    """``numpy.floor_divide``: rounds toward -inf (integers: x // 0 is -1, as in XLA)."""
    a, b = promote_args("floor_divide", x1, x2)
    dt = _dt(a)
    if dt == np.bool_:
        raise TypeError("floor_divide is not defined for bool arrays")
    if dtypes.is_unsigned_integer(dt):
        return lax.div(a, b)
    if dtypes.is_integer(dt):
        q = lax.div(a, b)
        r = lax.rem(a, b)
        zero = lax.full_like(r, 0)
        adjust = lax.bitwise_and(lax.ne(r, zero), lax.ne(lax.lt(r, zero), lax.lt(b, zero)))
        return lax.select(adjust, lax.sub(q, lax.full_like(q, 1)), q)
    if dtypes.is_complex(dt):
        raise TypeError("floor_divide is not defined for complex arrays")
    return _float_divmod(a, b)[0]


def _float_divmod(x1, x2):
    mod = lax.rem(x1, x2)
    div = lax.div(lax.sub(x1, mod), x2)
    zero = lax.full_like(mod, 0)
    ind = lax.bitwise_and(lax.ne(mod, zero), lax.ne(lax.lt(x2, zero), lax.lt(mod, zero)))
    mod = lax.select(ind, lax.add(mod, x2), mod)
    div = lax.select(ind, lax.sub(div, lax.full_like(div, 1)), div)
    return lax.round(div), mod


def remainder(x1, x2, /):
    """``numpy.remainder`` (``%``): the result has the divisor's sign."""
    a, b = promote_args("remainder", x1, x2)
    if dtypes.is_complex(_dt(a)):
        raise TypeError("remainder is not defined for complex arrays")
    r = lax.rem(a, b)
    zero = lax.full_like(r, 0)
    if dtypes.is_unsigned_integer(_dt(a)):
        return r
    do_plus = lax.bitwise_and(lax.ne(lax.lt(r, zero), lax.lt(b, zero)), lax.ne(r, zero))
    return lax.select(do_plus, lax.add(r, b), r)


mod = remainder


def fmod(x1, x2, /):
    """C-style remainder with the dividend's sign (lax.rem)."""
    a, b = promote_args("fmod", x1, x2)
    return lax.rem(a, b)


def divmod(x1, x2, /):
    return floor_divide(x1, x2), remainder(x1, x2)


def power(x1, x2, /):
    """``numpy.power``. A static Python int exponent uses repeated multiplication
    (lax.integer_pow), which keeps integer results exact and gradients defined at 0."""
    if isinstance(x2, int) and not isinstance(x2, bool):
        (a,) = promote_dtypes(x1)
        if x2 < 0 and dtypes.is_integer(_dt(a)):
            raise ValueError("Integers to negative integer powers are not allowed.")
        return lax.integer_pow(a, x2)
    a, b = promote_args("power", x1, x2)
    if dtypes.is_integer(_dt(a)):
        from tracer.core import concrete_value
        bv = concrete_value(b)
        if bv is not None and np.any(bv < 0):
            raise ValueError("Integers to negative integer powers are not allowed.")
    return lax.pow(a, b)


pow = power


def float_power(x1, x2, /):
    a, b = promote_args("float_power", x1, x2)
    dt = dtypes.result_type(_dt(a), np.float64) if dtypes.is_inexact(_dt(a)) else \
        dtypes.canonicalize_dtype(np.float64)
    return lax.pow(lax.convert_element_type(a, dt), lax.convert_element_type(b, dt))


def negative(x, /):
    (x,) = promote_dtypes(as_operand(x))
    if _dt(x) == np.bool_:
        raise TypeError("negative is not defined for bool arrays; use logical_not")
    return lax.neg(x)


def positive(x, /):
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
    (x,) = promote_dtypes_inexact(x)
    return lax.abs(x)


def sign(x, /):
    (x,) = promote_dtypes(as_operand(x))
    if _dt(x) == np.bool_:
        raise TypeError("sign is not defined for bool arrays")
    return lax.sign(x)


exp = _unary(lax.exp, True, "exp")
exp2 = _unary(lax.exp2, True, "exp2")
expm1 = _unary(lax.expm1, True, "expm1")
log = _unary(lax.log, True, "log")
log1p = _unary(lax.log1p, True, "log1p")
sqrt = _unary(lax.sqrt, True, "sqrt")
cbrt = _unary(lax.cbrt, True, "cbrt")
sin = _unary(lax.sin, True, "sin")
cos = _unary(lax.cos, True, "cos")
tan = _unary(lax.tan, True, "tan")
tanh = _unary(lax.tanh, True, "tanh")


def log2(x, /):
    (x,) = promote_dtypes_inexact(x)
    return lax.div(lax.log(x), lax.full_like(x, np.log(2)))


def log10(x, /):
    (x,) = promote_dtypes_inexact(x)
    return lax.div(lax.log(x), lax.full_like(x, np.log(10)))


def square(x, /):
    (x,) = promote_dtypes(as_operand(x))
    return lax.square(x)


def reciprocal(x, /):
    (x,) = promote_dtypes(as_operand(x))
    return lax.integer_pow(x, -1) if dtypes.is_inexact(_dt(x)) else \
        lax.div(lax.full_like(x, 1), x)


def floor(x, /):
    (x,) = promote_dtypes(as_operand(x))
    if not dtypes.is_floating(_dt(x)):
        if dtypes.is_complex(_dt(x)):
            raise TypeError("floor is not defined for complex arrays")
        return x
    return lax.floor(x)


def ceil(x, /):
    (x,) = promote_dtypes(as_operand(x))
    if not dtypes.is_floating(_dt(x)):
        if dtypes.is_complex(_dt(x)):
            raise TypeError("ceil is not defined for complex arrays")
        return x
    return lax.ceil(x)


def trunc(x, /):
    (x,) = promote_dtypes(as_operand(x))
    if not dtypes.is_floating(_dt(x)):
        return x
    return lax.select(lax.lt(x, lax.full_like(x, 0)), lax.ceil(x), lax.floor(x))


fix = trunc


def rint(x, /):
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
    x = as_operand(x)
    dt = _dt(x)
    if dtypes.is_floating(dt):
        return lax.is_finite(x)
    if dtypes.is_complex(dt):
        return lax.bitwise_and(lax.is_finite(lax.real(x)), lax.is_finite(lax.imag(x)))
    return lax.full_like(x, True, dtypes.bool_)


def isinf(x, /):
    x = as_operand(x)
    dt = _dt(x)
    if dtypes.is_floating(dt):
        return lax.eq(lax.abs(x), lax.full_like(x, np.inf))
    if dtypes.is_complex(dt):
        return logical_or(isinf(lax.real(x)), isinf(lax.imag(x)))
    return lax.full_like(x, False, dtypes.bool_)


def isnan(x, /):
    x = as_operand(x)
    if dtypes.is_inexact(_dt(x)):
        return lax.ne(x, x)
    return lax.full_like(x, False, dtypes.bool_)


def isposinf(x, /):
    x = as_operand(x)
    return lax.eq(x, lax.full_like(x, np.inf)) if dtypes.is_floating(_dt(x)) else \
        lax.full_like(x, False, dtypes.bool_)


def isneginf(x, /):
    x = as_operand(x)
    return lax.eq(x, lax.full_like(x, -np.inf)) if dtypes.is_floating(_dt(x)) else \
        lax.full_like(x, False, dtypes.bool_)


def real(x, /):
    x = as_operand(x)
    return lax.real(x) if dtypes.is_complex(_dt(x)) else x


def imag(x, /):
    x = as_operand(x)
    return lax.imag(x) if dtypes.is_complex(_dt(x)) else lax.full_like(x, 0)


def conjugate(x, /):
    x = as_operand(x)
    return lax.conj(x) if dtypes.is_complex(_dt(x)) else x


conj = conjugate
