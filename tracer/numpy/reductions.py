"""Reductions with NumPy's signatures (axis, dtype, keepdims, initial, where): sum, prod,
max, min, mean, var, std, any, all, argmax, argmin, and their aliases."""
from __future__ import annotations

import builtins
import math

import numpy as np

import lax
from lax import reductions as lax_reductions
from lax import elementwise as lax_ew
from lax.utils import eager_binary, eager_unary
from tracer import core, dtypes
from tracer.core import Array, get_aval
from tracer.numpy.util import as_operand, canonicalize_axis_tuple


_EAGER_PRIMITIVES = {"sum": lax_reductions.reduce_sum_p, "prod": lax_reductions.reduce_prod_p,
                     "max": lax_reductions.reduce_max_p, "min": lax_reductions.reduce_min_p}


_MEAN_FAST_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _dt(x):
    return get_aval(x).dtype


def _keep(out, axes, ndim):
    if not axes:
        return out
    shape = list(get_aval(out).shape)
    for a in sorted(axes):
        shape.insert(a, 1)
    return lax.reshape(out, tuple(shape))


def _check_out(out, fname):
    if out is not None:
        raise NotImplementedError(f"{fname}: the out argument is not supported (Arrays are "
                                  "immutable); use the return value")


def _eager_reduction(a, fname, axis, keepdims, caller=None):
    """The eager hot path of ``sum``/``prod``/``max``/``min`` over a concrete, strongly
    typed float Array with no dtype, initial or where (``x.sum()``): the primitive's impl
    through ``lax.utils.eager_unary``, the same impl and result as the general path, with
    none of its promotion work. None where it does not apply."""
    if type(a) is not Array or core.dynamic_level():
        return None
    aval = a._aval or a.aval
    if aval.dtype.kind != "f" or aval.weak_type:
        return None
    if aval.ndim == 0 and axis is not None:
        return None     # (the general path raises the AxisError of axis=0 on a 0-d array)
    axes = tuple(sorted(canonicalize_axis_tuple(axis, aval.ndim, caller or fname)))
    if not axes:
        return None
    res = eager_unary(_EAGER_PRIMITIVES[fname], a, {"axes": axes})
    if res is not None and keepdims:
        res = _keep(res, axes, aval.ndim)
    return res


def _reduction_axes(axis, ndim, fname):
    """``canonicalize_axis_tuple`` for a reduction: a 0-d operand has no axis 0 to reduce
    (NumPy's and JAX's AxisError), where other functions take axis 0 or -1 of a scalar."""
    if ndim == 0 and axis is not None and axis != ():
        for a in (axis if isinstance(axis, (tuple, list)) else (axis,)):
            raise np.exceptions.AxisError(f"{fname}: axis {a} is out of bounds for array "
                                          "of dimension 0")
    return canonicalize_axis_tuple(axis, ndim, fname)


def _reduction(a, fname, lax_reducer, identity, axis, dtype, out, keepdims, initial, where,
               upcast_small_ints=False, promote_bool=None):
    if dtype is None and out is None and initial is None and where is None:
        res = _eager_reduction(a, fname, axis, keepdims)
        if res is not None:
            return res
    _check_out(out, fname)
    a = as_operand(a, fname)
    aval = get_aval(a)
    axes = _reduction_axes(axis, aval.ndim, fname)
    dt = aval.dtype
    if dtype is not None:
        dt = dtypes.canonicalize_dtype(dtype)
    elif upcast_small_ints and (dt == np.bool_ or (dtypes.is_integer(dt) and dt.itemsize <
                                                    dtypes.default_int_dtype().itemsize)):
        dt = dtypes.default_uint_dtype() if dtypes.is_unsigned_integer(dt) else \
            dtypes.default_int_dtype()
    if promote_bool is not None and dt == np.bool_:
        dt = promote_bool
    if dt == np.bool_ and fname in ("sum", "prod"):
        # a bool sum is "any", a bool product "all" (NumPy's and JAX's): every element
        # becomes (x != 0) first, so [-1, 1] does not cancel
        if aval.dtype != np.bool_:
            a = lax.ne(a, lax.full_like(a, 0))
        lax_reducer = lax.reduce_or if fname == "sum" else lax.reduce_and
    elif dt != aval.dtype:
        a = lax.convert_element_type(a, dt)
    if where is not None:
        from tracer.numpy.manipulation import where as _where, broadcast_to
        w = broadcast_to(as_operand(where), aval.shape)
        if identity is None:
            if initial is None:
                raise ValueError(f"{fname}: reduction with where= needs an initial value")
            ident = initial
        else:
            ident = identity(dt)
        a = _where(w, a, lax.full_like(a, ident))
    res = lax_reducer(a, axes)
    if initial is not None:
        from tracer.numpy.ufuncs import add, multiply, maximum, minimum
        combine = {"sum": add, "prod": multiply, "max": maximum, "min": minimum}[fname]
        res = combine(res, lax.convert_element_type(as_operand(initial), dt))
    # the result is strongly typed, as JAX's reductions give it (jnp.sum(2.0) is f32, not
    # weak): convert_element_type drops the weak type and is free when there is none
    res = lax.convert_element_type(res, dt)
    if keepdims:
        res = _keep(res, axes, aval.ndim)
    return res


def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """``numpy.sum``. Without ``dtype`` bool and integers narrower than the default
    integer accumulate in the default (unsigned) integer dtype, as in NumPy and JAX
    (int64 / uint64 with enable_x64); ``dtype=bool`` gives "any" (logical or of
    ``x != 0``)."""
    return _reduction(a, "sum", lax.reduce_sum, lambda dt: 0, axis, dtype, out, keepdims,
                      initial, where, upcast_small_ints=True)


def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """``numpy.prod``: dtypes as ``sum``; ``dtype=bool`` gives "all" (logical and of
    ``x != 0``)."""
    return _reduction(a, "prod", lax.reduce_prod, lambda dt: 1, axis, dtype, out, keepdims,
                      initial, where, upcast_small_ints=True)


def _max_identity(dt):
    return -np.inf if dtypes.is_floating(dt) else (False if dt == np.bool_ else dtypes.iinfo(dt).min)


def _min_identity(dt):
    return np.inf if dtypes.is_floating(dt) else (True if dt == np.bool_ else dtypes.iinfo(dt).max)


def _check_nonempty(a, axis, fname, initial):
    if initial is None and type(a) is Array and a._value.size:
        return      # (the eager hot path: nothing to check)
    aval = get_aval(as_operand(a))
    axes = _reduction_axes(axis, aval.ndim, fname)
    if initial is None and builtins.any(aval.shape[i] == 0 for i in axes):
        raise ValueError(f"zero-size array to reduction operation {fname} which has no "
                         f"identity (shape {aval.shape}); pass initial=")


def max(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """``numpy.max`` (NaN propagates). ValueError on an empty reduction without initial."""
    _check_nonempty(a, axis, "max", initial)
    if where is not None and initial is None:
        raise ValueError("max: reduction with where= needs an initial value")
    return _reduction(a, "max", lax.reduce_max, None if initial is None else _max_identity,
                      axis, None, out, keepdims, initial, where)


def min(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """``numpy.min`` (NaN propagates)."""
    _check_nonempty(a, axis, "min", initial)
    if where is not None and initial is None:
        raise ValueError("min: reduction with where= needs an initial value")
    return _reduction(a, "min", lax.reduce_min, None if initial is None else _min_identity,
                      axis, None, out, keepdims, initial, where)


amax = max
amin = min


def _bool_reduction(a, fname, lax_reducer, axis, out, keepdims, where):
    _check_out(out, fname)
    a = as_operand(a, fname)
    if _dt(a) != np.bool_:
        a = lax.ne(a, lax.full_like(a, 0))
    if where is not None:
        from tracer.numpy.manipulation import where as _where, broadcast_to
        w = broadcast_to(as_operand(where), get_aval(a).shape)
        a = _where(w, a, lax.full_like(a, fname == "all"))
    axes = canonicalize_axis_tuple(axis, get_aval(a).ndim, fname)
    res = lax_reducer(a, axes)
    return _keep(res, axes, get_aval(a).ndim) if keepdims else res


def any(a, axis=None, out=None, keepdims=False, *, where=None):
    """``numpy.any``."""
    return _bool_reduction(a, "any", lax.reduce_or, axis, out, keepdims, where)


def all(a, axis=None, out=None, keepdims=False, *, where=None):
    """``numpy.all``."""
    return _bool_reduction(a, "all", lax.reduce_and, axis, out, keepdims, where)


def _count(a, axes, where):
    aval = get_aval(a)
    if where is None:
        n = 1
        for i in axes:
            n *= aval.shape[i]
        return n
    from tracer.numpy.manipulation import broadcast_to
    w = broadcast_to(as_operand(where), aval.shape)
    return lax.reduce_sum(lax.convert_element_type(w, dtypes.default_int_dtype()), axes)


def _stat_dtype(a, dtype, fname, variance=False):
    """(result dtype, computation dtype) of mean/var/std: the input's inexact dtype (the
    default float for integers and bool; float16 and the ml_dtypes floats compute in float32, rounding once), or
    ``dtype``, in which the statistic is then computed (integers wrap and divide toward
    zero, as in NumPy and JAX). As in JAX, ``dtype=bool`` raises TypeError, and a real
    ``dtype`` for the ``variance`` of complex input ValueError."""
    if dtype is None:
        dt = _dt(a) if dtypes.is_inexact(_dt(a)) else dtypes.default_float_dtype()
        # float16 and the ml_dtypes floats accumulate in float32 and round once (JAX)
        wide = dt == dtypes.float16 or dtypes.is_lowp_float(dt)
        return dt, (dtypes.float32 if wide else dt)
    dt = dtypes.canonicalize_dtype(dtype)
    if dt == np.bool_:
        raise TypeError(f"{fname}: dtype=bool is not supported (as in jax.numpy); pass a "
                        f"numeric dtype, or use any/all for logical reductions")
    if variance and dtypes.is_complex(_dt(a)) and not dtypes.is_complex(dt):
        raise ValueError(f"{fname}: a real dtype ({dt.name}) for the variance of complex "
                         f"input ({_dt(a).name}) is not supported (as in jax.numpy); pass "
                         "a complex dtype or none")
    return dt, dt


def mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    """``numpy.mean``; integers and bool average in the default float dtype (float64 with
    enable_x64, NumPy's choice; JAX 0.10 gives float32 for inputs up to 32 bits). With an
    integer ``dtype`` the sum is taken in that dtype and divided toward zero. NaN for
    empty input. TypeError for ``dtype=bool``."""
    if dtype is None and out is None and where is None and type(a) is Array and \
            (a._aval or a.aval).dtype in _MEAN_FAST_DTYPES:
        # the eager hot path: the general path's sum and division, without its promotions
        s = _eager_reduction(a, "sum", axis, keepdims, caller="mean")
        if s is not None:
            shape = a._value.shape
            n = math.prod(shape[i] for i in canonicalize_axis_tuple(axis, len(shape), "mean"))
            out = eager_binary(lax_ew.div_p, "div", s, float(n))
            if out is not None:
                return out
    _check_out(out, "mean")
    a = as_operand(a, "mean")
    aval = get_aval(a)
    axes = _reduction_axes(axis, aval.ndim, "mean")
    dt, cdt = _stat_dtype(a, dtype, "mean")
    s = sum(a, axis=axes, keepdims=keepdims, where=where, dtype=cdt)
    if np.dtype(cdt) == np.complex64:
        # NumPy divides by its count as an intp: a complex64 sum in complex128 (a complex
        # division rounds more than once; for real sums the wider division rounds alike)
        s = lax.convert_element_type(s, np.complex128)
        cdt = np.dtype(np.complex128)
    n = _count(a, axes, where)
    if isinstance(n, int):
        n = lax.full_like(s, n, dtypes.default_float_dtype() if not dtypes.is_inexact(cdt)
                          else None)
    else:
        n = lax.convert_element_type(n, cdt if dtypes.is_inexact(cdt) else
                                     dtypes.default_float_dtype())
        if keepdims:
            n = _keep(n, axes, aval.ndim)
    if not dtypes.is_inexact(cdt):
        # NumPy's true division, then the cast: the quotient truncated toward zero
        s = lax.convert_element_type(s, dtypes.default_float_dtype())
    return lax.convert_element_type(lax.div(s, n), dt)


average_ = mean


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
        correction=None):
    """``numpy.var`` (``ddof`` / ``correction``); complex input gives a real variance.
    Dtypes as ``mean``: with ``dtype`` the result has that dtype and is computed in it
    (an integer dtype wraps and truncates, as NumPy and jax.numpy.nanvar; jax.numpy.var
    returns float64 there). ValueError for a real ``dtype`` on complex input (as JAX),
    TypeError for ``dtype=bool``."""
    _check_out(out, "var")
    if correction is not None:
        ddof = correction
    a = as_operand(a, "var")
    aval = get_aval(a)
    axes = _reduction_axes(axis, aval.ndim, "var")
    dt, cdt = _stat_dtype(a, dtype, "var", variance=True)
    a = lax.convert_element_type(a, cdt)
    m = mean(a, axis=axes, keepdims=True, where=where, dtype=cdt)
    from tracer.numpy.ufuncs import subtract, real, multiply, conjugate
    c = subtract(a, m)
    sq = real(multiply(c, conjugate(c))) if dtypes.is_complex(cdt) else lax.mul(c, c)
    rdt = get_aval(sq).dtype
    s = sum(sq, axis=axes, keepdims=keepdims, where=where, dtype=rdt)
    if not dtypes.is_inexact(rdt):
        s = lax.convert_element_type(s, dtypes.default_float_dtype())
    fdt = get_aval(s).dtype
    n = _count(a, axes, where)
    if isinstance(n, int):
        d = n - ddof
        n = lax.full_like(s, d if d > 0 else 0)
    else:
        n = lax.sub(lax.convert_element_type(n, fdt), lax.full((), ddof, fdt))
        if keepdims:
            n = _keep(n, axes, aval.ndim)
    out_dt = dt if dtype is not None else dtypes.real_dtype(dt)
    return lax.convert_element_type(lax.div(s, n), out_dt)


def _check_std_dtype(dtype, fname):
    if dtype is not None and not dtypes.is_inexact(dtypes.canonicalize_dtype(dtype)):
        raise ValueError(f"{fname}: dtype must be a float or complex dtype (as in "
                         f"jax.numpy), got {np.dtype(dtype).name}")


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
        correction=None):
    """``numpy.std``: sqrt of ``var``. ValueError for a ``dtype`` that is not a float or
    complex dtype (as jax.numpy.std)."""
    _check_std_dtype(dtype, "std")
    _stat_dtype(as_operand(a, "std"), dtype, "std", variance=True)
    return lax.sqrt(var(a, axis, dtype, out, ddof, keepdims, where=where, correction=correction))


def _arg(a, axis, keepdims, fname, lax_fn):
    a = as_operand(a, fname)
    aval = get_aval(a)
    if axis is None:
        if aval.size == 0:
            raise ValueError(f"attempt to get {fname} of an empty sequence")
        flat = lax.reshape(a, (aval.size,))
        res = lax_fn(flat, 0, dtypes.default_int_dtype())
        if keepdims:
            res = lax.reshape(res, (1,) * aval.ndim)
        return res
    ax = canonicalize_axis_tuple(axis, aval.ndim, fname)[0]
    if aval.shape[ax] == 0:
        raise ValueError(f"attempt to get {fname} of an empty sequence (axis {ax} of shape "
                         f"{aval.shape})")
    res = lax_fn(a, ax, dtypes.default_int_dtype())
    return _keep(res, (ax,), aval.ndim) if keepdims else res


def argmax(a, axis=None, out=None, keepdims=False):
    """``numpy.argmax`` (first occurrence; NaN counts as maximal)."""
    _check_out(out, "argmax")
    return _arg(a, axis, keepdims, "argmax", lax.argmax)


def argmin(a, axis=None, out=None, keepdims=False):
    """``numpy.argmin`` (first occurrence; NaN counts as minimal)."""
    _check_out(out, "argmin")
    return _arg(a, axis, keepdims, "argmin", lax.argmin)


def ptp(a, axis=None, out=None, keepdims=False):
    """``max - min`` along ``axis`` (``numpy.ptp``)."""
    from tracer.numpy.ufuncs import subtract
    return subtract(max(a, axis, keepdims=keepdims), min(a, axis, keepdims=keepdims))


def count_nonzero(a, axis=None, keepdims=False):
    """The number of nonzero entries along ``axis`` (``numpy.count_nonzero``)."""
    a = as_operand(a)
    nz = lax.ne(a, lax.full_like(a, 0))
    return sum(nz, axis=axis, keepdims=keepdims, dtype=dtypes.default_int_dtype())


# ====================================== NaN-aware ========================================

def _nan_replaced(a, fname, value):
    """``a`` with NaNs replaced by ``value`` (ints and bools unchanged)."""
    a = as_operand(a, fname)
    if not dtypes.is_inexact(_dt(a)):
        return a
    return lax.select(lax.ne(a, a), lax.full_like(a, value), a)


def _isnan(a):
    return lax.ne(a, a) if dtypes.is_inexact(_dt(a)) else lax.full_like(a, False, np.bool_)


def nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """``numpy.nansum``: NaNs count as zero."""
    return sum(_nan_replaced(a, "nansum", 0), axis, dtype, out, keepdims, initial, where)


def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """``numpy.nanprod``: NaNs count as one."""
    return prod(_nan_replaced(a, "nanprod", 1), axis, dtype, out, keepdims, initial, where)


def _nan_extremum(a, axis, out, keepdims, initial, where, fname, reducer, fill):
    _check_out(out, fname)
    a = as_operand(a, fname)
    if not dtypes.is_inexact(_dt(a)):
        return reducer(a, axis, keepdims=keepdims, initial=initial, where=where)
    nan = _isnan(a)
    if dtypes.is_complex(_dt(a)):
        raise TypeError(f"{fname} is not defined for complex arrays")
    filled = lax.select(nan, lax.full_like(a, fill), a)
    res = reducer(filled, axis, keepdims=keepdims, initial=initial, where=where)
    # All-NaN slices give NaN, as in NumPy (which also warns).
    if where is not None:
        from tracer.numpy.manipulation import broadcast_to
        nan = lax.bitwise_and(nan, broadcast_to(as_operand(where), get_aval(a).shape))
        allnan = all(lax.bitwise_or(nan, lax.bitwise_not(broadcast_to(as_operand(where),
                                                                      get_aval(a).shape))),
                     axis=axis, keepdims=keepdims)
        allnan = lax.bitwise_and(allnan, any(broadcast_to(as_operand(where), get_aval(a).shape),
                                             axis=axis, keepdims=keepdims))
    else:
        allnan = all(nan, axis=axis, keepdims=keepdims)
    if initial is not None:
        return res
    return lax.select(allnan, lax.full_like(res, np.nan), res)


def nanmax(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """``numpy.nanmax``: the maximum ignoring NaNs; NaN for all-NaN slices."""
    return _nan_extremum(a, axis, out, keepdims, initial, where, "nanmax", max, -np.inf)


def nanmin(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """``numpy.nanmin``: the minimum ignoring NaNs; NaN for all-NaN slices."""
    return _nan_extremum(a, axis, out, keepdims, initial, where, "nanmin", min, np.inf)


def _nanarg(a, axis, out, keepdims, fname, fn, fill):
    _check_out(out, fname)
    a = as_operand(a, fname)
    if not dtypes.is_inexact(_dt(a)):
        return fn(a, axis, keepdims=keepdims)
    nan = _isnan(a)
    res = fn(lax.select(nan, lax.full_like(a, fill), a), axis, keepdims=keepdims)
    # All-NaN slices: NumPy raises; JAX returns -1.
    allnan = all(nan, axis=axis, keepdims=keepdims)
    return lax.select(allnan, lax.full_like(res, -1), res)


def nanargmax(a, axis=None, out=None, keepdims=False):
    """``numpy.nanargmax`` (-1 for all-NaN slices, as in JAX)."""
    return _nanarg(a, axis, out, keepdims, "nanargmax", argmax, -np.inf)


def nanargmin(a, axis=None, out=None, keepdims=False):
    """``numpy.nanargmin`` (-1 for all-NaN slices, as in JAX)."""
    return _nanarg(a, axis, out, keepdims, "nanargmin", argmin, np.inf)


def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    """``numpy.nanmean``: the mean of the non-NaN values (NaN for all-NaN slices)."""
    _check_out(out, "nanmean")
    a = as_operand(a, "nanmean")
    _stat_dtype(a, dtype, "nanmean")
    if not dtypes.is_inexact(_dt(a)):
        return mean(a, axis, dtype, keepdims=keepdims, where=where)
    valid = lax.bitwise_not(_isnan(a))
    if where is not None:
        from tracer.numpy.manipulation import broadcast_to
        valid = lax.bitwise_and(valid, broadcast_to(as_operand(where), get_aval(a).shape))
    return mean(a, axis, dtype, keepdims=keepdims, where=valid)


def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
           correction=None):
    """``numpy.nanvar``: the variance of the non-NaN values."""
    _check_out(out, "nanvar")
    a = as_operand(a, "nanvar")
    _stat_dtype(a, dtype, "nanvar", variance=True)
    if not dtypes.is_inexact(_dt(a)):
        return var(a, axis, dtype, ddof=ddof, keepdims=keepdims, where=where,
                   correction=correction)
    valid = lax.bitwise_not(_isnan(a))
    if where is not None:
        from tracer.numpy.manipulation import broadcast_to
        valid = lax.bitwise_and(valid, broadcast_to(as_operand(where), get_aval(a).shape))
    return var(a, axis, dtype, ddof=ddof, keepdims=keepdims, where=valid,
               correction=correction)


def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
           correction=None):
    """``numpy.nanstd``: sqrt of ``nanvar`` (``dtype`` as in ``std``)."""
    _check_std_dtype(dtype, "nanstd")
    _stat_dtype(as_operand(a, "nanstd"), dtype, "nanstd", variance=True)
    return lax.sqrt(nanvar(a, axis, dtype, out, ddof, keepdims, where=where,
                           correction=correction))


# ===================================== cumulative ========================================
# On lax's cumulative primitives (lax.cumsum / lax.cumprod). Dtypes are jax.numpy's:
# without ``dtype`` integers keep their dtype (NumPy widens those narrower than 64 bits:
# cumsum(int8) is int64 there, int8 here) and bool accumulates in the default integer;
# cumulative_sum widens like ``sum`` (the Array API rule, which JAX follows and
# cumulative_prod does not). ``dtype=bool`` accumulates ``x != 0`` in the default integer
# and converts back, so cumsum is a running "any" and cumprod a running "all" (NumPy's
# logical or / and: cumsum([-1, 1], dtype=bool) is [True, True]).

def _cum_dtype(a, dtype, widen):
    """(result dtype, computation dtype) of a cumulative function."""
    dt = _dt(a)
    if dtype is not None:
        dt = dtypes.canonicalize_dtype(dtype)
        return dt, (dtypes.default_int_dtype() if dt == np.bool_ else dt)
    if dt == np.bool_ or (widen and dtypes.is_integer(dt) and
                          dt.itemsize < dtypes.default_int_dtype().itemsize):
        dt = dtypes.default_uint_dtype() if dtypes.is_unsigned_integer(dt) else \
            dtypes.default_int_dtype()
    return dt, dt


def _cumulative(a, axis, dtype, out, fname, combine, identity, nan_value=None,
                widen=False):
    _check_out(out, fname)
    a = as_operand(a, fname)
    if axis is None:
        a = lax.reshape(a, (get_aval(a).size,))
        axis = 0
    (axis,) = canonicalize_axis_tuple(axis, get_aval(a).ndim, fname)
    dt, cdt = _cum_dtype(a, dtype, widen)
    if nan_value is not None:
        a = _nan_replaced(a, fname, nan_value)
    if dt == np.bool_ and _dt(a) != np.bool_:
        a = lax.ne(a, lax.full_like(a, 0))
    out = combine(lax.convert_element_type(a, cdt), axis=axis)
    return lax.convert_element_type(out, dt)


def cumsum(a, axis=None, dtype=None, out=None):
    """``numpy.cumsum`` (flattened when ``axis`` is None), with jax.numpy's dtypes (see
    the note above: integers keep their dtype, bool accumulates in the default
    integer)."""
    return _cumulative(a, axis, dtype, out, "cumsum", lax.cumsum, 0)


def cumprod(a, axis=None, dtype=None, out=None):
    """``numpy.cumprod`` (flattened when ``axis`` is None); dtypes as ``cumsum``."""
    return _cumulative(a, axis, dtype, out, "cumprod", lax.cumprod, 1)


def nancumsum(a, axis=None, dtype=None, out=None):
    """``numpy.nancumsum``: NaNs count as zero."""
    return _cumulative(a, axis, dtype, out, "nancumsum", lax.cumsum, 0, nan_value=0)


def nancumprod(a, axis=None, dtype=None, out=None):
    """``numpy.nancumprod``: NaNs count as one."""
    return _cumulative(a, axis, dtype, out, "nancumprod", lax.cumprod, 1, nan_value=1)


def _cumulative_api(x, axis, dtype, include_initial, fname, combine, identity):
    x = as_operand(x, fname)
    nd = get_aval(x).ndim
    if axis is None:
        if nd > 1:
            raise ValueError(f"{fname}: axis must be given for arrays of rank {nd} > 1")
        axis = 0
    if nd == 0:
        raise ValueError(f"{fname}: the input must have at least one dimension")
    (axis,) = canonicalize_axis_tuple(axis, nd, fname)
    out = _cumulative(x, axis, dtype, None, fname, combine, identity,
                      widen=fname == "cumulative_sum")
    if include_initial:
        cfg = [(0, 0, 0)] * nd
        cfg[axis] = (1, 0, 0)
        out = lax.pad(out, lax.full((), identity, _dt(out)), cfg)
    return out


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    """Array API ``cumulative_sum`` (``numpy.cumulative_sum``): ``include_initial``
    prepends the zero. Integers narrower than the default widen as in ``sum``."""
    return _cumulative_api(x, axis, dtype, include_initial, "cumulative_sum", lax.cumsum, 0)


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
    """Array API ``cumulative_prod`` (``numpy.cumulative_prod``); integers keep their
    dtype (jax.numpy's; NumPy widens them)."""
    return _cumulative_api(x, axis, dtype, include_initial, "cumulative_prod", lax.cumprod, 1)


# ====================================== averages =========================================

def average(a, axis=None, weights=None, returned=False, keepdims=False):
    """``numpy.average``: the weighted mean along ``axis``. 1-D ``weights`` with a
    single ``axis`` weigh that axis; otherwise ``weights`` has ``a``'s shape.
    ``returned`` also gives the sum of the weights."""
    from tracer.numpy.ufuncs import multiply, true_divide
    from tracer.numpy.util import promote_dtypes_inexact
    a = as_operand(a, "average")
    if weights is None:
        avg = mean(a, axis, keepdims=keepdims)
        if not returned:
            return avg
        aval = get_aval(a)
        axes = canonicalize_axis_tuple(axis, aval.ndim, "average")
        n = 1
        for i in axes:
            n *= aval.shape[i]
        return avg, lax.full_like(avg, n)
    a, w = promote_dtypes_inexact(a, weights)
    sa, sw = get_aval(a).shape, get_aval(w).shape
    if sa != sw:
        if axis is None:
            raise ValueError(f"average: axis must be given when the shapes of a {sa} and "
                             f"weights {sw} differ")
        if len(sw) != 1:
            raise ValueError(f"average: 1-D weights expected when shapes of a {sa} and "
                             f"weights {sw} differ")
        (ax,) = canonicalize_axis_tuple(axis, len(sa), "average")
        if sw[0] != sa[ax]:
            raise ValueError(f"average: length of weights {sw[0]} differs from that of a "
                             f"along axis {ax} ({sa[ax]})")
        w = lax.broadcast_in_dim(w, sa, (ax,))
    wsum = sum(w, axis, keepdims=keepdims)
    avg = true_divide(sum(multiply(a, w), axis, keepdims=keepdims), wsum)
    if returned:
        if get_aval(wsum).shape != get_aval(avg).shape:
            wsum = lax.broadcast_in_dim(wsum, get_aval(avg).shape, ())
        return avg, wsum
    return avg


# ================================ comparisons of arrays ==================================

def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """True if ``isclose`` holds everywhere (``numpy.allclose``), as a bool Array."""
    from tracer.numpy.ufuncs import isclose
    return all(isclose(a, b, rtol, atol, equal_nan))


def array_equal(a1, a2, equal_nan=False):
    """Same shape and equal elements (``numpy.array_equal``), as a bool Array."""
    from tracer.numpy.ufuncs import equal, isnan, logical_and, logical_or
    a1, a2 = as_operand(a1), as_operand(a2)
    if get_aval(a1).shape != get_aval(a2).shape:
        return lax.full((), False, np.bool_)
    eq = equal(a1, a2)
    if equal_nan:
        eq = logical_or(eq, logical_and(isnan(a1), isnan(a2)))
    return all(eq)


def array_equiv(a1, a2):
    """Broadcast-compatible and equal (``numpy.array_equiv``), as a bool Array."""
    from tracer.numpy.ufuncs import equal
    a1, a2 = as_operand(a1), as_operand(a2)
    try:
        np.broadcast_shapes(get_aval(a1).shape, get_aval(a2).shape)
    except ValueError:
        return lax.full((), False, np.bool_)
    return all(equal(a1, a2))


# =================================== statistics ==========================================

def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None):
    """``numpy.cov``: the covariance matrix of the variables in the rows (``rowvar``) or
    columns of ``m`` (and ``y``), with optional frequency and analytic weights."""
    from tracer.numpy.manipulation import concatenate, matmul
    from tracer.numpy.util import promote_dtypes_inexact
    from tracer.numpy.ufuncs import conjugate, multiply
    m = as_operand(m, "cov")
    if get_aval(m).ndim > 2:
        raise ValueError(f"cov: m has more than 2 dimensions (shape {get_aval(m).shape})")
    (m,) = promote_dtypes_inexact(m) if y is None else promote_dtypes_inexact(m, y)[:1]
    x = lax.reshape(m, (1, get_aval(m).size)) if get_aval(m).ndim < 2 else m
    if not rowvar and get_aval(x).shape[0] != 1:
        x = lax.transpose(x, (1, 0))
    if y is not None:
        y = as_operand(y, "cov")
        if get_aval(y).ndim > 2:
            raise ValueError("cov: y has more than 2 dimensions")
        (y,) = promote_dtypes_inexact(y, m)[:1]
        y = lax.reshape(y, (1, get_aval(y).size)) if get_aval(y).ndim < 2 else y
        if not rowvar and get_aval(y).shape[0] != 1:
            y = lax.transpose(y, (1, 0))
        x = concatenate([x, y], axis=0)
    (x,) = promote_dtypes_inexact(x)
    if ddof is None:
        ddof = 0 if bias else 1
    n_obs = get_aval(x).shape[1]
    w = None
    if fweights is not None:
        w = lax.convert_element_type(as_operand(fweights), _dt(x) if not
                                     dtypes.is_complex(_dt(x)) else dtypes.real_dtype(_dt(x)))
    if aweights is not None:
        aw = lax.convert_element_type(as_operand(aweights), dtypes.real_dtype(_dt(x)))
        w = aw if w is None else lax.mul(w, aw)
    if w is None:
        avg = mean(x, axis=1)
        fact = lax.full((), n_obs - ddof, dtypes.real_dtype(_dt(x)))
    else:
        avg = average(x, axis=1, weights=w)
        w_sum = lax.reduce_sum(w, (0,))
        if ddof == 0:
            fact = w_sum
        elif aweights is None:
            fact = lax.sub(w_sum, lax.full((), ddof, _dt(w_sum)))
        else:
            fact = lax.sub(w_sum, lax.div(lax.mul(lax.full((), ddof, _dt(w_sum)),
                                                  lax.reduce_sum(lax.mul(w, aw), (0,))),
                                          w_sum))
    xc = lax.sub(x, lax.broadcast_in_dim(avg, get_aval(x).shape, (0,)))
    xw = xc if w is None else multiply(xc, w)
    c = matmul(xw, lax.transpose(conjugate(xc), (1, 0)))
    fact = lax.convert_element_type(fact, _dt(c))
    c = lax.div(c, fact)
    return lax.squeeze(c, (0, 1)) if get_aval(c).shape == (1, 1) else c


def corrcoef(x, y=None, rowvar=True):
    """``numpy.corrcoef``: Pearson correlation coefficients, clipped to [-1, 1]."""
    from tracer.numpy.ufuncs import real, sqrt, true_divide
    from tracer.numpy.manipulation import clip
    c = cov(x, y, rowvar)
    if get_aval(c).ndim == 0:
        return true_divide(c, c)
    d = _diag2(c)
    sd = sqrt(real(d))
    n = get_aval(sd).shape[0]
    c = true_divide(c, lax.broadcast_in_dim(sd, (n, n), (0,)))
    c = true_divide(c, lax.broadcast_in_dim(sd, (n, n), (1,)))
    if dtypes.is_complex(_dt(c)):
        return lax.complex(clip(lax.real(c), -1, 1), clip(lax.imag(c), -1, 1))
    return clip(c, -1, 1)


def _diag2(c):
    """The main diagonal of a square matrix, by a strided slice of its flattening."""
    n = get_aval(c).shape[0]
    flat = lax.reshape(c, (n * n,))
    return lax.slice(flat, (0,), (n * n,), (n + 1,)) if n else flat
