"""Reductions with NumPy's signatures (axis, dtype, keepdims, initial, where): sum, prod,
max, min, mean, var, std, any, all, argmax, argmin, and their aliases."""
from __future__ import annotations

import builtins
import operator

import numpy as np

import lax
from tracer import dtypes
from tracer.core import get_aval
from tracer.numpy.util import as_operand, canonicalize_axis_tuple


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


def _reduction(a, fname, lax_reducer, identity, axis, dtype, out, keepdims, initial, where,
               upcast_small_ints=False, promote_bool=None):
    _check_out(out, fname)
    a = as_operand(a, fname)
    aval = get_aval(a)
    axes = canonicalize_axis_tuple(axis, aval.ndim, fname)
    dt = aval.dtype
    if dtype is not None:
        dt = dtypes.canonicalize_dtype(dtype)
    elif upcast_small_ints and (dt == np.bool_ or (dtypes.is_integer(dt) and dt.itemsize <
                                                    dtypes.default_int_dtype().itemsize)):
        dt = dtypes.default_uint_dtype() if dtypes.is_unsigned_integer(dt) else \
            dtypes.default_int_dtype()
    if promote_bool is not None and dt == np.bool_:
        dt = promote_bool
    if dt != aval.dtype:
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
        res = lax.convert_element_type(res, dt)
    if keepdims:
        res = _keep(res, axes, aval.ndim)
    return res


def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """``numpy.sum``. Small integers and bool accumulate in the default integer dtype."""
    return _reduction(a, "sum", lax.reduce_sum, lambda dt: 0, axis, dtype, out, keepdims,
                      initial, where, upcast_small_ints=True)


def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """``numpy.prod``."""
    return _reduction(a, "prod", lax.reduce_prod, lambda dt: 1, axis, dtype, out, keepdims,
                      initial, where, upcast_small_ints=True)


def _max_identity(dt):
    return -np.inf if dtypes.is_floating(dt) else (False if dt == np.bool_ else np.iinfo(dt).min)


def _min_identity(dt):
    return np.inf if dtypes.is_floating(dt) else (True if dt == np.bool_ else np.iinfo(dt).max)


def _check_nonempty(a, axis, fname, initial):
    aval = get_aval(as_operand(a))
    axes = canonicalize_axis_tuple(axis, aval.ndim, fname)
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


def mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    """``numpy.mean``; integers average in the default float dtype. NaN for empty input."""
    _check_out(out, "mean")
    a = as_operand(a, "mean")
    aval = get_aval(a)
    axes = canonicalize_axis_tuple(axis, aval.ndim, "mean")
    dt = dtypes.canonicalize_dtype(dtype) if dtype is not None else (
        aval.dtype if dtypes.is_inexact(aval.dtype) else dtypes.default_float_dtype())
    s = sum(lax.convert_element_type(a, dt), axis=axes, keepdims=keepdims, where=where)
    n = _count(a, axes, where)
    if isinstance(n, int):
        from tracer.numpy.ufuncs import true_divide
        return lax.div(s, lax.full_like(s, n)) if dtypes.is_inexact(dt) else true_divide(s, n)
    n = lax.convert_element_type(n, dt)
    if keepdims:
        n = _keep(n, axes, aval.ndim)
    return lax.div(s, n)


average_ = mean


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
        correction=None):
    """``numpy.var`` (``ddof`` / ``correction``); complex input gives a real variance."""
    _check_out(out, "var")
    if correction is not None:
        ddof = correction
    a = as_operand(a, "var")
    aval = get_aval(a)
    axes = canonicalize_axis_tuple(axis, aval.ndim, "var")
    dt = dtypes.canonicalize_dtype(dtype) if dtype is not None else (
        aval.dtype if dtypes.is_inexact(aval.dtype) else dtypes.default_float_dtype())
    a = lax.convert_element_type(a, dt)
    m = mean(a, axis=axes, keepdims=True, where=where)
    from tracer.numpy.ufuncs import subtract, real, multiply, conjugate
    c = subtract(a, m)
    sq = real(multiply(c, conjugate(c))) if dtypes.is_complex(dt) else lax.mul(c, c)
    s = sum(sq, axis=axes, keepdims=keepdims, where=where)
    n = _count(a, axes, where)
    rdt = get_aval(s).dtype
    if isinstance(n, int):
        d = n - ddof
        return lax.div(s, lax.full_like(s, d if d > 0 else 0))
    n = lax.sub(lax.convert_element_type(n, rdt), lax.full((), ddof, rdt))
    if keepdims:
        n = _keep(n, axes, aval.ndim)
    return lax.div(s, n)


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
        correction=None):
    """``numpy.std``: sqrt of ``var``."""
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
    from tracer.numpy.ufuncs import subtract
    return subtract(max(a, axis, keepdims=keepdims), min(a, axis, keepdims=keepdims))


def count_nonzero(a, axis=None, keepdims=False):
    a = as_operand(a)
    nz = lax.ne(a, lax.full_like(a, 0))
    return sum(nz, axis=axis, keepdims=keepdims, dtype=dtypes.default_int_dtype())
