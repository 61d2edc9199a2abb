"""Array creation: array, asarray, zeros, ones, full, empty, *_like, arange, linspace,
eye, identity (NumPy's signatures; JAX's dtype defaults)."""
from __future__ import annotations

import operator

import numpy as np

import lax
from tracer import dtypes
from tracer.core import Array, Tracer, get_aval, to_numpy
from tracer.numpy.util import as_operand


def _canon_dtype(dtype):
    return None if dtype is None else dtypes.canonicalize_dtype(dtype)


def array(object, dtype=None, copy=True, order=None, ndmin=0):
    """An Array from array-like data (``numpy.array``). Nested lists may hold tracers.
    Python scalars give weakly typed arrays; NumPy data is copied (Arrays are immutable).
    Raises TypeError for data NumPy cannot represent numerically."""
    dt = _canon_dtype(dtype)
    if isinstance(object, (Tracer, Array)):
        out = object
        if dt is not None and get_aval(out).dtype != dt:
            out = lax.convert_element_type(out, dt)
    elif isinstance(object, (list, tuple)) and _contains_tracer(object):
        from tracer.numpy.manipulation import stack
        out = stack([array(o) for o in object])
        if dt is not None:
            out = lax.convert_element_type(out, dt)
    elif isinstance(object, (bool, int, float, complex)):
        d, weak = dtypes.dtype_and_weak_type(object)
        if dt is not None:
            out = Array(np.asarray(object, dtype=dt))
        else:
            out = Array(np.asarray(object, dtype=d), weak)
    else:
        if isinstance(object, (list, tuple)) and _contains_array(object):
            object = _to_nested_numpy(object)
        arr = np.array(object, copy=True)
        if arr.dtype.kind in "OUSV":
            raise TypeError(f"array: cannot convert {type(object).__name__} with dtype "
                            f"{arr.dtype} to a numeric array")
        if dt is None:
            if isinstance(object, (list, tuple)) and arr.dtype.kind in "iuf" and \
                    _all_python_scalars(object):
                # Lists of Python numbers take the default (canonical) types.
                dt = dtypes.canonicalize_dtype(arr.dtype)
            else:
                dt = dtypes.canonicalize_dtype(arr.dtype)
        out = Array(arr.astype(dt, copy=False))
    if ndmin and get_aval(out).ndim < ndmin:
        out = lax.reshape(out, (1,) * (ndmin - get_aval(out).ndim) + get_aval(out).shape)
    return out


def _contains_tracer(obj):
    if isinstance(obj, Tracer):
        return True
    if isinstance(obj, (list, tuple)):
        return any(_contains_tracer(o) for o in obj)
    return False


def _contains_array(obj):
    if isinstance(obj, Array):
        return True
    if isinstance(obj, (list, tuple)):
        return any(_contains_array(o) for o in obj)
    return False


def _to_nested_numpy(obj):
    if isinstance(obj, Array):
        return obj._value
    if isinstance(obj, (list, tuple)):
        return [_to_nested_numpy(o) for o in obj]
    return obj


def _all_python_scalars(obj):
    if isinstance(obj, (list, tuple)):
        return all(_all_python_scalars(o) for o in obj)
    return isinstance(obj, (bool, int, float, complex))


def asarray(a, dtype=None, order=None, copy=None):
    """``numpy.asarray``: like ``array`` without copying Arrays and tracers."""
    if isinstance(a, (Tracer, Array)):
        dt = _canon_dtype(dtype)
        if dt is not None and get_aval(a).dtype != dt:
            return lax.convert_element_type(a, dt)
        return a
    return array(a, dtype=dtype)


def _shape_arg(shape, fname):
    if isinstance(shape, (int, np.integer)):
        return (operator.index(shape),)
    try:
        return tuple(operator.index(s) for s in shape)
    except TypeError:
        raise TypeError(f"{fname}: shape must be an int or a sequence of ints, got "
                        f"{shape!r}") from None


def full(shape, fill_value, dtype=None):
    """An array of ``shape`` filled with ``fill_value`` (``numpy.full``); a non-scalar
    fill value is broadcast."""
    shape = _shape_arg(shape, "full")
    dt = _canon_dtype(dtype)
    if np.ndim(fill_value) != 0 if not isinstance(fill_value, (Tracer, Array)) else \
            get_aval(fill_value).ndim != 0:
        from tracer.numpy.manipulation import broadcast_to
        v = asarray(fill_value, dtype=dt)
        return broadcast_to(v, shape)
    if dt is None:
        if isinstance(fill_value, (bool, int, float, complex)):
            dt = dtypes.dtype_and_weak_type(fill_value)[0]
            return lax.full(shape, fill_value, dt)
        return lax.full(shape, fill_value)
    return lax.full(shape, fill_value, dt)


def zeros(shape, dtype=None):
    """Zeros of ``shape`` (default dtype: float64, or float32 without x64)."""
    return lax.full(_shape_arg(shape, "zeros"), 0, _canon_dtype(dtype) or dtypes.default_float_dtype())


def ones(shape, dtype=None):
    """Ones of ``shape`` (default dtype: the default float)."""
    return lax.full(_shape_arg(shape, "ones"), 1, _canon_dtype(dtype) or dtypes.default_float_dtype())


def empty(shape, dtype=None):
    """Like ``zeros`` (Arrays are immutable, so no uninitialised memory is exposed)."""
    return zeros(shape, dtype)


def _like(a, dtype, shape):
    aval = get_aval(as_operand(a))
    return (aval.shape if shape is None else _shape_arg(shape, "*_like"),
            _canon_dtype(dtype) or aval.dtype)


def zeros_like(a, dtype=None, shape=None):
    shape, dt = _like(a, dtype, shape)
    return lax.full(shape, 0, dt)


def ones_like(a, dtype=None, shape=None):
    shape, dt = _like(a, dtype, shape)
    return lax.full(shape, 1, dt)


def empty_like(a, dtype=None, shape=None):
    return zeros_like(a, dtype, shape)


def full_like(a, fill_value, dtype=None, shape=None):
    shape, dt = _like(a, dtype, shape)
    return full(shape, fill_value, dt)


def arange(start, stop=None, step=None, dtype=None):
    """``numpy.arange`` with static bounds (ConcretizationTypeError for traced bounds)."""
    from tracer.core import concrete_or_error
    start = concrete_or_error(lambda v: np.asarray(v).item(), start, "in arange's start")
    if stop is not None:
        stop = concrete_or_error(lambda v: np.asarray(v).item(), stop, "in arange's stop")
    if step is not None:
        step = concrete_or_error(lambda v: np.asarray(v).item(), step, "in arange's step")
    dt = _canon_dtype(dtype)
    if stop is None and step is None:
        res = np.arange(start)
    else:
        res = np.arange(start, stop, 1 if step is None else step)
    if dt is None:
        dt = dtypes.canonicalize_dtype(res.dtype)
    if res.size and step is None and float(res[0]) == 0 and dt.kind in "iu" and \
            res.dtype.kind in "iu" and stop is None:
        return lax.iota(dt, res.size)
    return Array(res.astype(dt))


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    """``numpy.linspace`` (traced start/stop allowed; ``num`` static)."""
    from tracer.numpy import ufuncs as uf
    num = operator.index(num)
    if num < 0:
        raise ValueError(f"linspace: number of samples, {num}, must be non-negative")
    start_a, stop_a = asarray(start), asarray(stop)
    dt = _canon_dtype(dtype) or dtypes.result_type(start_a, stop_a, dtypes.default_float_dtype())
    calc_dt = dtypes.result_type(dt, dtypes.default_float_dtype()) if not dtypes.is_inexact(dt) else dt
    start_a = lax.convert_element_type(start_a, calc_dt)
    stop_a = lax.convert_element_type(stop_a, calc_dt)
    div = (num - 1) if endpoint else num
    bshape = np.broadcast_shapes(get_aval(start_a).shape, get_aval(stop_a).shape)
    from tracer.numpy.util import broadcast_to_shape
    start_b = broadcast_to_shape(start_a, bshape)
    stop_b = broadcast_to_shape(stop_a, bshape)
    step = uf.divide(uf.subtract(stop_b, start_b), div) if div > 0 else \
        full(bshape, np.nan, calc_dt)
    iota_shape = (num,) + tuple(bshape)
    it = lax.broadcasted_iota(calc_dt, iota_shape, 0)
    sb = lax.broadcast_in_dim(start_b, iota_shape, tuple(range(1, len(iota_shape))))
    stb = lax.broadcast_in_dim(step, iota_shape, tuple(range(1, len(iota_shape))))
    out = uf.add(sb, uf.multiply(it, stb)) if div > 0 else sb
    if endpoint and num > 1:
        last = lax.broadcast_in_dim(stop_b, (1,) + tuple(bshape), tuple(range(1, len(iota_shape))))
        out = lax.concatenate([lax.slice_in_dim(out, 0, num - 1, 1, 0), last], 0)
    if axis != 0:
        from tracer.numpy.manipulation import moveaxis
        out = moveaxis(out, 0, axis)
    if dtypes.is_integer(dt):
        out = uf.floor(out)
    out = lax.convert_element_type(out, dt)
    return (out, step) if retstep else out


def eye(N, M=None, k=0, dtype=None):
    """2-D identity-like array with ones on diagonal ``k`` (``numpy.eye``)."""
    N = operator.index(N)
    M = N if M is None else operator.index(M)
    dt = _canon_dtype(dtype) or dtypes.default_float_dtype()
    r = lax.broadcasted_iota(dtypes.default_int_dtype(), (N, M), 0)
    c = lax.broadcasted_iota(dtypes.default_int_dtype(), (N, M), 1)
    return lax.convert_element_type(lax.eq(lax.add(r, k), c), dt)


def identity(n, dtype=None):
    return eye(n, dtype=dtype)
