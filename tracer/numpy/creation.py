"""Array creation: array, asarray, zeros, ones, full, empty, *_like, arange, linspace,
eye, identity (NumPy's signatures; JAX's dtype defaults), grids, triangles, windows and
readers. The Array API's ``device=`` keyword is accepted and ignored (one host device)."""
from __future__ import annotations

import operator

import numpy as np

import lax
from tracer import dtypes
from tracer import core
from tracer.core import Array, ShapedArray, Tracer, check_not_masked, get_aval, to_numpy
from tracer.numpy.util import as_operand


def _canon_dtype(dtype):
    return None if dtype is None else dtypes.canonicalize_dtype(dtype)


def array(object, dtype=None, copy=True, order=None, ndmin=0):
    """An Array from array-like data (``numpy.array``). Nested lists may hold tracers.
    Python scalars give weakly typed arrays; NumPy data is copied (Arrays are immutable).
    Raises TypeError for data NumPy cannot represent numerically, OverflowError for a
    Python int that does not fit the integer dtype it would get (the default int dtype,
    or ``dtype``), as JAX does."""
    return _array(object, dtype, ndmin, "array")


def _python_ints(obj):
    if type(obj) is int:
        yield obj
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _python_ints(o)


def _array(object, dtype, ndmin, fname):
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
    elif type(object) in (bool, int, float, complex):
        # (Python scalars only: NumPy's float64 and complex128 scalars are float and
        # complex instances too, and take their dtype, canonicalized, as 0-d arrays do)
        d, weak = dtypes.dtype_and_weak_type(object)
        dtypes.check_int_fits(object, d if dt is None else dt, f"tracer.numpy.{fname}")
        if dt is not None:
            out = Array(np.asarray(object, dtype=dt))
        else:
            out = Array(np.asarray(object, dtype=d), weak)
    else:
        if isinstance(object, (list, tuple)) and _contains_array(object):
            object = _to_nested_numpy(object)
        if isinstance(object, (list, tuple)):
            ints = list(_python_ints(object))
            if ints and all(type(v) in (bool, int) for v in _flat_scalars(object)):
                target = dt if dt is not None else dtypes.default_int_dtype()
                for v in ints:
                    dtypes.check_int_fits(v, target, f"tracer.numpy.{fname}")
            elif dt is not None:
                for v in ints:
                    dtypes.check_int_fits(v, dt, f"tracer.numpy.{fname}")
        if isinstance(object, np.ndarray) and type(object) is not np.ndarray:
            check_not_masked(object)
        arr = np.array(object, copy=True)
        if arr.dtype.kind == "O" and isinstance(object, (list, tuple)) and \
                _all_python_scalars(object):
            # Ints beyond 64 bits beside floats: NumPy keeps objects, JAX makes floats.
            kinds = {type(v) for v in _flat_scalars(object)}
            arr = np.array(object, np.complex128 if complex in kinds else np.float64)
        if arr.dtype.kind in "OUSV" and not dtypes.is_lowp(arr.dtype):   # (ml_dtypes: "V")
            raise TypeError(f"array: cannot convert {type(object).__name__} with dtype "
                            f"{arr.dtype} to a numeric array; arrays hold one of "
                            f"{', '.join(dtypes.SUPPORTED_NAMES)}")
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


def _flat_scalars(obj):
    if isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _flat_scalars(o)
    else:
        yield obj


def _all_python_scalars(obj):
    if isinstance(obj, (list, tuple)):
        return all(_all_python_scalars(o) for o in obj)
    return isinstance(obj, (bool, int, float, complex))


def asarray(a, dtype=None, order=None, copy=None, *, device=None):
    """``numpy.asarray``: like ``array`` without copying Arrays and tracers."""
    if isinstance(a, (Tracer, Array)):
        dt = _canon_dtype(dtype)
        if dt is not None and get_aval(a).dtype != dt:
            return lax.convert_element_type(a, dt)
        return a
    return _array(a, dtype, 0, "asarray")


def _shape_arg(shape, fname):
    if isinstance(shape, (int, np.integer)):
        return (operator.index(shape),)
    try:
        return tuple(operator.index(s) for s in shape)
    except TypeError:
        raise TypeError(f"{fname}: shape must be an int or a sequence of ints, got "
                        f"{shape!r}") from None


def full(shape, fill_value, dtype=None, *, device=None):
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
        if type(fill_value) in (bool, int, float, complex):
            dt = dtypes.dtype_and_weak_type(fill_value)[0]
            dtypes.check_int_fits(fill_value, dt, "tracer.numpy.full")
            return lax.full(shape, fill_value, dt)
        return lax.full(shape, fill_value)
    dtypes.check_int_fits(fill_value, dt, "tracer.numpy.full")
    return lax.full(shape, fill_value, dt)


def zeros(shape, dtype=None, *, device=None):
    """Zeros of ``shape`` (default dtype: float64, or float32 without x64)."""
    return lax.full(_shape_arg(shape, "zeros"), 0,
                    _canon_dtype(dtype) or dtypes.default_float_dtype())


def ones(shape, dtype=None, *, device=None):
    """Ones of ``shape`` (default dtype: the default float)."""
    return lax.full(_shape_arg(shape, "ones"), 1,
                    _canon_dtype(dtype) or dtypes.default_float_dtype())


def empty(shape, dtype=None, *, device=None):
    """Like ``zeros`` (Arrays are immutable, so no uninitialised memory is exposed)."""
    return zeros(shape, dtype)


def _like(a, dtype, shape):
    aval = get_aval(as_operand(a))
    return (aval.shape if shape is None else _shape_arg(shape, "*_like"),
            _canon_dtype(dtype) or aval.dtype)


def zeros_like(a, dtype=None, shape=None, *, device=None):
    """Zeros with the shape and dtype of ``a`` (unless given) (``numpy.zeros_like``)."""
    shape, dt = _like(a, dtype, shape)
    return lax.full(shape, 0, dt)


def ones_like(a, dtype=None, shape=None, *, device=None):
    """Ones with the shape and dtype of ``a`` (unless given) (``numpy.ones_like``)."""
    shape, dt = _like(a, dtype, shape)
    return lax.full(shape, 1, dt)


def empty_like(a, dtype=None, shape=None, *, device=None):
    """Like ``zeros_like`` (Arrays are immutable) (``numpy.empty_like``)."""
    return zeros_like(a, dtype, shape)


def full_like(a, fill_value, dtype=None, shape=None, *, device=None):
    """``fill_value`` with the shape and dtype of ``a`` (unless given)
    (``numpy.full_like``)."""
    shape, dt = _like(a, dtype, shape)
    return full(shape, fill_value, dt)


def arange(start, stop=None, step=None, dtype=None, *, device=None):
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


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *,
             device=None):
    """``numpy.linspace`` (traced start/stop allowed; ``num`` static)."""
    from tracer.numpy import ufuncs as uf
    num = operator.index(num)
    if num < 0:
        raise ValueError(f"linspace: number of samples, {num}, must be non-negative")
    start_a, stop_a = asarray(start), asarray(stop)
    dt = _canon_dtype(dtype) or dtypes.result_type(start_a, stop_a, dtypes.default_float_dtype())
    calc_dt = dt if dtypes.is_inexact(dt) else \
        dtypes.result_type(dt, dtypes.default_float_dtype())
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


def eye(N, M=None, k=0, dtype=None, *, device=None):
    """2-D identity-like array with ones on diagonal ``k`` (``numpy.eye``)."""
    N = operator.index(N)
    M = N if M is None else operator.index(M)
    dt = _canon_dtype(dtype) or dtypes.default_float_dtype()
    r = lax.broadcasted_iota(dtypes.default_int_dtype(), (N, M), 0)
    c = lax.broadcasted_iota(dtypes.default_int_dtype(), (N, M), 1)
    return lax.convert_element_type(lax.eq(lax.add(r, k), c), dt)


def identity(n, dtype=None):
    """The n x n identity matrix (``numpy.identity``)."""
    return eye(n, dtype=dtype)


# ============================== grids, triangles, windows ================================

def tri(N, M=None, k=0, dtype=None):
    """``numpy.tri``: ones at and below diagonal ``k`` of an (N, M) array."""
    N = operator.index(N)
    M = N if M is None else operator.index(M)
    dt = _canon_dtype(dtype) or dtypes.default_float_dtype()
    r = lax.broadcasted_iota(np.int64, (N, M), 0)
    c = lax.broadcasted_iota(np.int64, (N, M), 1)
    return lax.convert_element_type(lax.le(lax.sub(c, r), lax.full((), operator.index(k),
                                                                     np.int64)), dt)


def vander(x, N=None, increasing=False):
    """``numpy.vander``: columns are powers of the 1-D ``x`` (decreasing unless
    ``increasing``), computed by a running product (exact for integers)."""
    from tracer.numpy.reductions import cumprod
    x = as_operand(x, "vander")
    if get_aval(x).ndim != 1:
        raise ValueError(f"vander: x must be one-dimensional, got shape {get_aval(x).shape}")
    n = get_aval(x).shape[0]
    N = n if N is None else operator.index(N)
    if N < 0:
        raise ValueError("vander: N must be nonnegative")
    if N == 0:
        return lax.full((n, 0), 0, get_aval(x).dtype)
    xb = lax.broadcast_in_dim(x, (n, N - 1), (0,))
    ones = lax.full((n, 1), 1, get_aval(x).dtype)
    out = lax.concatenate([ones, cumprod(xb, axis=1, dtype=get_aval(x).dtype)], 1) if N > 1 \
        else ones
    return out if increasing else lax.rev(out, (1,))


def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    """``numpy.meshgrid``: coordinate arrays from 1-D coordinate vectors ('xy' swaps the
    first two output axes; ``sparse`` keeps size-1 axes)."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    from tracer.numpy.manipulation import ravel
    args = [ravel(as_operand(x)) for x in xi]
    shape = [get_aval(a).shape[0] for a in args]
    nd = len(args)
    if indexing == "xy" and nd > 1:
        shape[0], shape[1] = shape[1], shape[0]
    outs = []
    for i, a in enumerate(args):
        dim = i
        if indexing == "xy" and nd > 1 and i < 2:
            dim = 1 - i
        if sparse:
            s = [1] * nd
            s[dim] = shape[dim]
            outs.append(lax.reshape(a, tuple(s)))
        else:
            outs.append(lax.broadcast_in_dim(a, tuple(shape), (dim,)))
    return outs


def indices(dimensions, dtype=None, sparse=False):
    """``numpy.indices``: the index grid of an array of shape ``dimensions``."""
    dims = tuple(operator.index(d) for d in dimensions)
    dt = _canon_dtype(dtype) or dtypes.default_int_dtype()
    nd = len(dims)
    outs = []
    for i, n in enumerate(dims):
        if sparse:
            s = [1] * nd
            s[i] = n
            outs.append(lax.broadcasted_iota(dt, tuple(s), i))
        else:
            outs.append(lax.broadcasted_iota(dt, dims, i))
    if sparse:
        return tuple(outs)
    if not outs:
        return lax.full((0,), 0, dt)
    return lax.concatenate([lax.reshape(o, (1,) + dims) for o in outs], 0)


def ix_(*args):
    """``numpy.ix_``: open-mesh index arrays from 1-D sequences (booleans become the
    positions of their True entries, which needs concrete values)."""
    from tracer.numpy.manipulation import ravel
    n = len(args)
    outs = []
    for i, a in enumerate(args):
        a = as_operand(a)
        if get_aval(a).ndim != 1:
            raise ValueError(f"ix_: cross index must be 1 dimensional, got shape "
                             f"{get_aval(a).shape}")
        if get_aval(a).dtype == np.bool_:
            from tracer.core import concrete_or_error
            v = concrete_or_error(np.asarray, a, "in ix_ with a boolean index (its True "
                                                 "count sets the shape)")
            a = Array(np.nonzero(v)[0].astype(dtypes.default_int_dtype()))
        shape = [1] * n
        shape[i] = get_aval(a).shape[0]
        outs.append(lax.reshape(ravel(a), tuple(shape)))
    return tuple(outs)


def _index_pair(mask_np):
    r, c = np.nonzero(mask_np)
    dt = dtypes.default_int_dtype()
    return Array(r.astype(dt)), Array(c.astype(dt))


def tril_indices(n, k=0, m=None):
    """``numpy.tril_indices``: row and column indices of the lower triangle."""
    n = operator.index(n)
    m = n if m is None else operator.index(m)
    return _index_pair(np.tri(n, m, k=operator.index(k), dtype=bool))


def triu_indices(n, k=0, m=None):
    """``numpy.triu_indices``: row and column indices of the upper triangle."""
    n = operator.index(n)
    m = n if m is None else operator.index(m)
    return _index_pair(~np.tri(n, m, k=operator.index(k) - 1, dtype=bool))


def tril_indices_from(arr, k=0):
    """``numpy.tril_indices_from``: ``tril_indices`` for the shape of the 2-D ``arr``."""
    s = get_aval(as_operand(arr)).shape
    if len(s) != 2:
        raise ValueError(f"tril_indices_from: input array must be 2-d, got shape {s}")
    return tril_indices(s[0], k, s[1])


def triu_indices_from(arr, k=0):
    """``numpy.triu_indices_from``: ``triu_indices`` for the shape of the 2-D ``arr``."""
    s = get_aval(as_operand(arr)).shape
    if len(s) != 2:
        raise ValueError(f"triu_indices_from: input array must be 2-d, got shape {s}")
    return triu_indices(s[0], k, s[1])


def diag_indices(n, ndim=2):
    """``numpy.diag_indices``: ``ndim`` copies of arange(n)."""
    n, ndim = operator.index(n), operator.index(ndim)
    if n < 0 or ndim < 0:
        raise ValueError("diag_indices: n and ndim must be non-negative")
    idx = lax.iota(dtypes.default_int_dtype(), n)
    return (idx,) * ndim


def diag_indices_from(arr):
    """``numpy.diag_indices_from``: ``diag_indices`` for an array with equal dims."""
    s = get_aval(as_operand(arr)).shape
    if len(s) < 2 or any(d != s[0] for d in s):
        raise ValueError(f"diag_indices_from: input must be at least 2-d with all dimensions "
                         f"of equal length, got shape {s}")
    return diag_indices(s[0], len(s))


def mask_indices(n, mask_func, k=0, *, size=None):
    """``numpy.mask_indices``: the (row, col) indices where ``mask_func(ones((n, n)), k)``
    is nonzero (``mask_func`` is evaluated eagerly)."""
    n = operator.index(n)
    m = mask_func(ones((n, n), dtype=np.int32), k)
    from tracer.core import concrete_or_error
    mv = concrete_or_error(np.asarray, as_operand(m), "in mask_indices")
    r, c = _index_pair(mv != 0)
    if size is not None:
        dt = dtypes.default_int_dtype()
        rv = np.zeros(size, dt)
        cv = np.zeros(size, dt)
        cnt = min(size, r.shape[0])
        rv[:cnt] = np.asarray(r)[:cnt]
        cv[:cnt] = np.asarray(c)[:cnt]
        return Array(rv), Array(cv)
    return r, c


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    """``numpy.logspace``: ``base ** linspace(start, stop)``."""
    from tracer.numpy import ufuncs as uf
    dt = _canon_dtype(dtype)
    calc = dtypes.result_type(as_operand(start), as_operand(stop), dtypes.default_float_dtype())
    if dt is not None and dtypes.is_complex(dt):
        calc = dtypes.result_type(calc, dt)
    lin = linspace(start, stop, num, endpoint=endpoint, dtype=calc, axis=axis)
    out = uf.power(lax.convert_element_type(as_operand(base), calc) if not
                   isinstance(base, (int, float)) else base, lin)
    return lax.convert_element_type(out, dt) if dt is not None else out


def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    """``numpy.geomspace``: a geometric progression from ``start`` to ``stop`` (same
    sign; complex allowed), with exact endpoints."""
    from tracer.numpy import ufuncs as uf
    from tracer.numpy.util import promote_dtypes_inexact, broadcast_to_shape
    s, e = promote_dtypes_inexact(start, stop)
    calc = get_aval(s).dtype
    dt = _canon_dtype(dtype) or calc
    num = operator.index(num)
    if dtypes.is_complex(calc):
        ls, le = uf.log(s), uf.log(e)
        out = uf.exp(linspace(ls, le, num, endpoint=endpoint, dtype=calc, axis=0))
        if num > 0:
            out = _set_ends(out, s, e, num, endpoint)
    else:
        from tracer.core import concrete_value
        sv, ev = concrete_value(s), concrete_value(e)
        if sv is not None and np.any(sv == 0) or ev is not None and np.any(ev == 0):
            raise ValueError("geomspace: start and stop must be non-zero")
        sign = uf.sign(s)
        ls, le = uf.log10(uf.absolute(s)), uf.log10(uf.absolute(e))
        out = logspace(ls, le, num, endpoint=endpoint, base=10.0, dtype=calc, axis=0)
        bshape = get_aval(out).shape
        out = uf.multiply(out, lax.broadcast_in_dim(broadcast_to_shape(sign, bshape[1:]),
                                                    bshape, tuple(range(1, len(bshape)))))
        if num > 0:
            out = _set_ends(out, s, e, num, endpoint)
    if axis != 0:
        from tracer.numpy.manipulation import moveaxis
        out = moveaxis(out, 0, axis)
    return lax.convert_element_type(out, dt)


def _set_ends(out, s, e, num, endpoint):
    from tracer.numpy.util import broadcast_to_shape
    shape = get_aval(out).shape
    first = lax.reshape(broadcast_to_shape(s, shape[1:]), (1,) + shape[1:])
    parts = [first]
    if num > 1:
        hi = num - 1 if endpoint else num
        parts.append(lax.slice_in_dim(out, 1, hi, 1, 0))
        if endpoint:
            parts.append(lax.reshape(broadcast_to_shape(e, shape[1:]), (1,) + shape[1:]))
    return lax.concatenate(parts, 0) if len(parts) > 1 else first


def fromfunction(function, shape, *, dtype=float, **kwargs):
    """``numpy.fromfunction``: ``function`` called once on the index grids of ``shape``
    (of ``dtype``)."""
    grids = indices(shape, dtype=dtype)
    return function(*[lax.index_in_dim(grids, i, 0, keepdims=False)
                      for i in range(len(tuple(shape)))], **kwargs)


def _window(M, fn):
    M = operator.index(M)
    dt = dtypes.default_float_dtype()
    if M < 1:
        return lax.full((0,), 0, dt)
    if M == 1:
        return lax.full((1,), 1, dt)
    n = lax.iota(dt, M)
    return fn(n, M, dt)


def bartlett(M):
    """``numpy.bartlett``: the triangular window of length ``M``."""
    from tracer.numpy import ufuncs as uf
    return _window(M, lambda n, M, dt: lax.sub(
        lax.full((), 1, dt), uf.absolute(lax.div(lax.sub(lax.mul(n, lax.full((), 2, dt)),
                                                          lax.full((), M - 1, dt)),
                                                  lax.full((), M - 1, dt)))))


def _cosine_window(coefs):
    def fn(n, M, dt):
        out = lax.full_like(n, coefs[0])
        for j, c in enumerate(coefs[1:], 1):
            out = lax.add(out, lax.mul(lax.full((), c, dt), lax.cos(
                lax.mul(n, lax.full((), 2 * np.pi * j / (M - 1), dt)))))
        return out
    return fn


def blackman(M):
    """``numpy.blackman``: 0.42 - 0.5 cos(2 pi n/(M-1)) + 0.08 cos(4 pi n/(M-1))."""
    return _window(M, _cosine_window((0.42, -0.5, 0.08)))


def hamming(M):
    """``numpy.hamming``: 0.54 - 0.46 cos(2 pi n/(M-1))."""
    return _window(M, _cosine_window((0.54, -0.46)))


def hanning(M):
    """``numpy.hanning``: 0.5 - 0.5 cos(2 pi n/(M-1))."""
    return _window(M, _cosine_window((0.5, -0.5)))


def kaiser(M, beta):
    """``numpy.kaiser``: i0(beta sqrt(1 - (2n/(M-1) - 1)^2)) / i0(beta)."""
    from tracer.numpy import ufuncs as uf

    def fn(n, M, dt):
        b = lax.convert_element_type(as_operand(beta), dt)
        r = lax.sub(lax.div(lax.mul(n, lax.full((), 2, dt)), lax.full((), M - 1, dt)),
                    lax.full((), 1, dt))
        arg = uf.multiply(b, uf.sqrt(uf.maximum(lax.sub(lax.full((), 1, dt), lax.mul(r, r)), 0.0)))
        return uf.true_divide(uf.i0(arg), uf.i0(b))
    return _window(M, fn)


# ============================== from buffers, files, iterables ===========================
# These read host data; they wrap NumPy's readers and return Arrays (canonical dtypes).

def _from_numpy(arr):
    return array(arr)


def frombuffer(buffer, dtype=float, count=-1, offset=0):
    """``numpy.frombuffer``: a 1-D Array of the data in ``buffer``."""
    return _from_numpy(np.frombuffer(buffer, dtype=dtype, count=count, offset=offset))


def fromstring(string, dtype=float, count=-1, *, sep):
    """``numpy.fromstring`` (text mode only, as in NumPy 2: ``sep`` is required)."""
    return _from_numpy(np.fromstring(string, dtype=dtype, count=count, sep=sep))


def fromiter(iter, dtype, count=-1):
    """``numpy.fromiter``: a 1-D Array from an iterable of numbers."""
    return _from_numpy(np.fromiter(iter, dtype=dtype, count=count))


def fromfile(file, dtype=float, count=-1, sep="", offset=0):
    """``numpy.fromfile``: an Array of the data read from ``file``."""
    return _from_numpy(np.fromfile(file, dtype=dtype, count=count, sep=sep, offset=offset))


def from_dlpack(x, /, *, device=None, copy=None):
    """An Array from an object with ``__dlpack__`` and ``__dlpack_device__`` (a CPU
    tensor of another library, or an Array), through ``numpy.from_dlpack``.

    ``copy``: True copies; None shares the producer's memory when the dtype is canonical
    (float64 with ``enable_x64`` off is converted, a copy); False always shares
    (BufferError where it cannot). Shared memory that the producer later writes changes
    the Array too (as in JAX): pass ``copy=True`` to be safe. ``device``: None or 'cpu'
    (ValueError otherwise)."""
    if device not in (None, "cpu"):
        raise ValueError(f"from_dlpack: unknown device {device!r}; the only device is 'cpu'")
    arr = np.from_dlpack(x, copy=copy)
    if dtypes.canonicalize_dtype(arr.dtype) == arr.dtype:
        if not copy:
            # a read-only view shares the producer's memory (Array() copies memory a
            # caller can still write) and leaves the producer's own array writable
            arr = arr.view()
            arr.flags.writeable = False
            return core._new_array(arr, ShapedArray(arr.shape, arr.dtype))
        return Array(arr)
    if copy is False:
        raise BufferError(f"from_dlpack: dtype {arr.dtype} needs a conversion (a copy) to "
                          f"{dtypes.canonicalize_dtype(arr.dtype)} with enable_x64 off; "
                          "pass copy=None or True")
    return _from_numpy(arr)


def load(file, *args, **kwargs):
    """``numpy.load``: .npy files give an Array; .npz archives give NumPy's lazy
    NpzFile (index it and pass the arrays to ``asarray``)."""
    out = np.load(file, *args, **kwargs)
    if isinstance(out, np.ndarray) and out.dtype != object:
        return _from_numpy(out)
    return out


def _np_args(args):
    return [np.asarray(a) if isinstance(a, Array) else a for a in args]


def save(file, arr, allow_pickle=True):
    """``numpy.save`` of an Array (or anything NumPy accepts)."""
    np.save(file, np.asarray(to_numpy(arr) if isinstance(arr, (Array, Tracer)) else arr),
            allow_pickle=allow_pickle)


def savez(file, *args, **kwds):
    """``numpy.savez``: several Arrays into one uncompressed .npz archive."""
    np.savez(file, *_np_args(args), **{k: np.asarray(v) if isinstance(v, Array) else v
                                      for k, v in kwds.items()})
