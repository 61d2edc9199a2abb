"""Shared machinery of tracer.numpy: argument checks, NumPy-style dtype promotion (JAX's
lattice, weak types) and shape broadcasting, both expressed with lax primitives."""
from __future__ import annotations

import operator

import numpy as np

import lax
from tracer import dtypes
from tracer.core import Array, Tracer, describe, get_aval, to_numpy

_PY_SCALARS = (bool, int, float, complex)


def check_arraylike(fname: str, *args):
    """TypeError naming ``fname`` unless every argument is array-like (and every NumPy
    one of a supported dtype)."""
    for i, a in enumerate(args):
        if isinstance(a, (np.ndarray, np.generic)) and not dtypes.is_supported(a.dtype):
            raise dtypes.unsupported_array(fname, f"argument {i}", a)
        if not is_arraylike(a):
            raise TypeError(f"{fname} requires array-like arguments (Array, NumPy array or "
                            f"Python scalar); argument {i} is {describe(a)}: convert it with "
                            "tracer.numpy.asarray first")


def is_arraylike(x) -> bool:
    """True for Arrays, tracers, NumPy values, Python scalars and objects with
    ``__array__`` (not strings)."""
    return isinstance(x, (Array, Tracer, np.ndarray, np.generic) + _PY_SCALARS) or \
        hasattr(x, "__array__") and not isinstance(x, (str, bytes))


def as_operand(x, fname="tracer.numpy"):
    """``x`` as something lax accepts: Tracers and Arrays pass; NumPy values and Python
    scalars (weakly typed) become Arrays; lists/tuples of numbers become arrays."""
    if isinstance(x, (Tracer, Array)):
        return x
    if isinstance(x, _PY_SCALARS):
        dt, weak = dtypes.dtype_and_weak_type(x)
        dtypes.check_int_fits(x, dt, fname)
        return Array(np.asarray(x, dt), weak)
    if isinstance(x, (list, tuple)):
        from tracer.numpy.creation import array
        return array(x)
    if isinstance(x, (str, bytes)) or x is None:
        raise TypeError(f"{fname}: {type(x).__name__} {x!r} is not a valid array argument")
    if isinstance(x, (np.ndarray, np.generic)) and not dtypes.is_supported(x.dtype):
        raise dtypes.unsupported_array(fname, "an argument", x)
    try:
        return Array(to_numpy(x))
    except TypeError:
        raise TypeError(f"{fname}: {type(x).__name__} is not a valid array argument") from None


def promote_dtypes(*args):
    """Convert ``args`` to their common dtype (weak types taken into account)."""
    if len(args) < 1:
        return []
    dt, weak = dtypes.result_type(*args, return_weak_type_flag=True)
    return [_convert(a if type(a) in _PY_SCALARS else as_operand(a), dt, weak) for a in args]


def _convert(a, dt, weak):
    if type(a) in _PY_SCALARS:
        # A Python scalar becomes a constant of the promoted type directly. A Python int
        # must fit its own (weak) dtype first, as in JAX: int8 + 300 wraps, but
        # int64 + 2**63 is an OverflowError, not a silent wrap.
        if type(a) is int and -2 ** 63 <= a < 2 ** 64:    # (wider: scalar_to_dtype says)
            dtypes.check_int_fits(a, dtypes.dtype_and_weak_type(a)[0], "tracer.numpy")
        return Array(dtypes.scalar_to_dtype(a, dt), weak)
    aval = get_aval(a)
    if aval.dtype == dt and aval.weak_type == weak:
        return a
    if isinstance(a, Array):
        # Constants convert now (no equation in traced programs), as JAX's literals do.
        from lax.elementwise import _convert_np
        return Array(np.asarray(_convert_np(a._value, dt)), weak)
    return lax.convert_element_type_p.bind(a, new_dtype=dt, weak_type=weak)


def promote_dtypes_numeric(*args):
    """Like ``promote_dtypes`` but bools go to int32 (strongly typed, whatever
    enable_x64 says), as JAX's arithmetic that has no bool meaning does (``power``,
    ``square``: ``jax.numpy``'s ``to_numeric_dtype``)."""
    dt, weak = dtypes.result_type(*args, return_weak_type_flag=True)
    if dt == np.bool_:
        dt, weak = np.dtype(np.int32), False
    return [_convert(a if type(a) in _PY_SCALARS else as_operand(a), dt, weak) for a in args]


def promote_dtypes_inexact(*args):
    """Like ``promote_dtypes`` but integers and bools go to the default float."""
    dt, weak = dtypes.result_type(*args, return_weak_type_flag=True)
    if not dtypes.is_inexact(dt):
        dt = dtypes.default_float_dtype()
        weak = weak  # a weak int promotes to a weak float, as in JAX
    return [_convert(as_operand(a), dt, weak) for a in args]


def broadcast_shapes(*shapes, fname="broadcast_shapes"):
    """NumPy's broadcasting of shapes; ValueError naming all shapes when incompatible."""
    nd = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(nd):
        size = 1
        for s in shapes:
            k = len(s) - nd + i
            if k < 0:
                continue
            d = s[k]
            if d == 1:
                continue
            if size == 1:
                size = d
            elif d != size:
                raise ValueError(f"{fname}: incompatible shapes for broadcasting: "
                                 f"{', '.join(str(tuple(s)) for s in shapes)}")
        out.append(size)
    return tuple(out)


def broadcast_to_shape(x, shape):
    """``x`` broadcast to ``shape`` (NumPy's rules) with one broadcast_in_dim."""
    aval = get_aval(x)
    if aval.shape == tuple(shape):
        return x
    nd = len(shape)
    if aval.ndim > nd:
        raise ValueError(f"cannot broadcast an array of shape {aval.shape} to shape {shape}")
    dims = tuple(range(nd - aval.ndim, nd))
    for i, d in enumerate(dims):
        if aval.shape[i] not in (1, shape[d]):
            raise ValueError(f"cannot broadcast an array of shape {aval.shape} to shape "
                             f"{tuple(shape)}")
    # Size-1 dims that must grow: squeeze them out first, then broadcast_in_dim.
    keep = [i for i in range(aval.ndim) if not (aval.shape[i] == 1 and shape[dims[i]] != 1)]
    if len(keep) != aval.ndim:
        x = lax.reshape(x, tuple(aval.shape[i] for i in keep))
        dims = tuple(dims[i] for i in keep)
    return lax.broadcast_in_dim(x, tuple(shape), dims)


def promote_shapes(fname, *args):
    """Broadcast ``args`` to a common shape; rank-0 operands are left as they are (lax's
    element-wise ops broadcast scalars)."""
    shapes = [get_aval(a).shape for a in args]
    nonscalar = [s for s in shapes if s]
    if all(s == nonscalar[0] for s in nonscalar):
        return list(args)  # equal shapes, rank-0 operands broadcast inside lax
    shape = broadcast_shapes(*shapes, fname=fname)
    return [a if get_aval(a).shape == () else broadcast_to_shape(a, shape) for a in args]


def _same_avals(args):
    """The common aval when every argument is an Array/Tracer of one shape, dtype and
    weak type (the common case, served without promotion work), else None."""
    first = None
    for a in args:
        if not isinstance(a, (Array, Tracer)):
            return None
        av = a.aval
        if first is None:
            first = av
        elif av != first:
            return None
    return first


def promote_args(fname, *args):
    """Promote dtypes (JAX's lattice) and broadcast shapes of NumPy-style
    arguments; ``fname`` names the caller in errors."""
    if _same_avals(args) is not None:
        return list(args)
    check_arraylike(fname, *args)
    return promote_shapes(fname, *promote_dtypes(*args))


def promote_args_inexact(fname, *args):
    """Like ``promote_args``, with integers and bools promoted to the
    default float."""
    av = _same_avals(args)
    if av is not None and dtypes.is_inexact(av.dtype):
        return list(args)
    check_arraylike(fname, *args)
    return promote_shapes(fname, *promote_dtypes_inexact(*args))


def axis_index(a, fname) -> int:
    """An axis as a Python int (``operator.index``, as NumPy: a float or string axis is a
    TypeError, never truncated)."""
    try:
        return operator.index(a)
    except TypeError:
        raise TypeError(f"{fname}: axis must be an integer or a tuple of integers, got "
                        f"{describe(a)} of type {type(a).__name__}") from None


def canonicalize_axis_tuple(axis, ndim, fname):
    """``axis`` (None, int or sequence) as a tuple of non-negative axes;
    AxisError / ValueError naming ``fname`` when out of range or repeated."""
    if axis is None:
        return tuple(range(ndim))
    axes = tuple(axis_index(a, fname) for a in axis) if isinstance(axis, (tuple, list)) \
        else (axis_index(axis, fname),)
    out = []
    for a in axes:
        if not -ndim <= a < max(ndim, 1) or (ndim == 0 and a not in (0, -1)):
            raise np.exceptions.AxisError(f"{fname}: axis {a} is out of bounds for array of "
                                          f"dimension {ndim}")
        out.append(a % ndim if ndim else 0)
    if len(set(out)) != len(out):
        raise ValueError(f"{fname}: repeated axis in {axis}")
    return tuple(out)
