"""The rest of NumPy's surface: numerical calculus (trapezoid, gradient, interp, unwrap),
bit packing (packbits, unpackbits), flat/multi index conversion (ravel_multi_index,
unravel_index), dtype queries (isdtype, iterable), printing options, and frompyfunc.
"""
from __future__ import annotations

import builtins
import operator

import numpy as np

import lax
from tracer import dtypes
from tracer.core import Array, Tracer, concrete_value, get_aval
from tracer.numpy.util import (as_operand, canonicalize_axis_tuple, check_arraylike,
                               promote_dtypes, promote_dtypes_inexact)


def _aval(x):
    return get_aval(x)


def _dt(x):
    return get_aval(x).dtype


# ====================================== calculus =========================================

def trapezoid(y, x=None, dx=1.0, axis=-1):
    """``numpy.trapezoid``: the integral of ``y`` along ``axis`` by the trapezoidal
    rule, with sample points ``x`` (1-D or y's shape) or spacing ``dx``."""
    from tracer.numpy.manipulation import diff, moveaxis
    from tracer.numpy.ufuncs import add, multiply
    from tracer.numpy.reductions import sum as _sum
    check_arraylike("trapezoid", y)
    (y,) = promote_dtypes_inexact(as_operand(y))
    y = moveaxis(y, axis, -1)
    n = _aval(y).shape[-1]
    if x is None:
        d = dx
    else:
        x = as_operand(x)
        if _aval(x).ndim == 1:
            d = diff(x)
        else:
            d = diff(moveaxis(x, axis, -1), axis=-1)
    nd = _aval(y).ndim
    lo = lax.slice_in_dim(y, 0, builtins.max(n - 1, 0), 1, nd - 1)
    hi = lax.slice_in_dim(y, builtins.min(1, n), n, 1, nd - 1)
    return multiply(_sum(multiply(d, add(lo, hi)), axis=-1), 0.5)


def gradient(f, *varargs, axis=None, edge_order=None):
    """``numpy.gradient``: second-order central differences inside, first- or
    second-order (``edge_order``) one-sided differences at the edges; spacing per axis
    as a scalar or a coordinate array. Returns one array per axis (a single array for a
    single axis)."""
    from tracer.numpy.ufuncs import add, multiply, subtract, true_divide
    check_arraylike("gradient", f)
    (f,) = promote_dtypes_inexact(as_operand(f))
    nd = _aval(f).ndim
    axes = tuple(range(nd)) if axis is None else canonicalize_axis_tuple(axis, nd, "gradient")
    edge_order = 1 if edge_order is None else operator.index(edge_order)
    if edge_order not in (1, 2):
        raise ValueError("gradient: edge_order must be 1 or 2")
    if not varargs:
        spacings = [1.0] * len(axes)
    elif len(varargs) == 1 and np.ndim(varargs[0]) == 0:
        spacings = [varargs[0]] * len(axes)
    elif len(varargs) == len(axes):
        spacings = list(varargs)
    else:
        raise TypeError(f"gradient: invalid number of spacing arguments ({len(varargs)}) for "
                        f"{len(axes)} axes")
    outs = []
    for ax, h in zip(axes, spacings):
        n = _aval(f).shape[ax]
        if n < edge_order + 1:
            raise ValueError(f"gradient: shape of the array along axis {ax} ({n}) must be at "
                             f"least edge_order + 1 = {edge_order + 1}")

        def sl(a, b, x=f):
            return lax.slice_in_dim(x, a, b, 1, ax)

        def bcast(v):
            shape = [1] * nd
            shape[ax] = _aval(v).shape[0]
            return lax.reshape(v, tuple(shape))

        uniform = np.ndim(h) == 0 if not isinstance(h, (Array, Tracer)) else \
            _aval(h).ndim == 0
        if uniform:
            h = as_operand(h)
            inner = true_divide(subtract(sl(2, n), sl(0, n - 2)), multiply(h, 2.0))
            if edge_order == 1:
                first = true_divide(subtract(sl(1, 2), sl(0, 1)), h)
                last = true_divide(subtract(sl(n - 1, n), sl(n - 2, n - 1)), h)
            else:
                first = true_divide(add(add(multiply(-1.5, sl(0, 1)), multiply(2.0, sl(1, 2))),
                                        multiply(-0.5, sl(2, 3))), h)
                last = true_divide(add(add(multiply(0.5, sl(n - 3, n - 2)),
                                           multiply(-2.0, sl(n - 2, n - 1))),
                                       multiply(1.5, sl(n - 1, n))), h)
        else:
            x = as_operand(h)
            if _aval(x).ndim != 1 or _aval(x).shape[0] != n:
                raise ValueError(f"gradient: coordinates along axis {ax} must be 1-D of "
                                 f"length {n}, got shape {_aval(x).shape}")
            (x,) = promote_dtypes_inexact(x)
            dx = subtract(lax.slice_in_dim(x, 1, n, 1, 0), lax.slice_in_dim(x, 0, n - 1, 1, 0))
            dx1 = bcast(lax.slice_in_dim(dx, 0, n - 2, 1, 0))
            dx2 = bcast(lax.slice_in_dim(dx, 1, n - 1, 1, 0))
            # NumPy's non-uniform second-order interior weights.
            a = true_divide(multiply(-1.0, dx2), multiply(dx1, add(dx1, dx2)))
            b = true_divide(subtract(dx2, dx1), multiply(dx1, dx2))
            c = true_divide(dx1, multiply(dx2, add(dx1, dx2)))
            inner = add(add(multiply(a, sl(0, n - 2)), multiply(b, sl(1, n - 1))),
                        multiply(c, sl(2, n)))
            d0 = bcast(lax.slice_in_dim(dx, 0, 1, 1, 0))
            dl = bcast(lax.slice_in_dim(dx, n - 2, n - 1, 1, 0))
            if edge_order == 1:
                first = true_divide(subtract(sl(1, 2), sl(0, 1)), d0)
                last = true_divide(subtract(sl(n - 1, n), sl(n - 2, n - 1)), dl)
            else:
                e1 = d0
                e2 = bcast(lax.slice_in_dim(dx, 1, 2, 1, 0))
                a0 = true_divide(multiply(-1.0, add(multiply(2.0, e1), e2)),
                                 multiply(e1, add(e1, e2)))
                b0 = true_divide(add(e1, e2), multiply(e1, e2))
                c0 = true_divide(multiply(-1.0, e1), multiply(e2, add(e1, e2)))
                first = add(add(multiply(a0, sl(0, 1)), multiply(b0, sl(1, 2))),
                            multiply(c0, sl(2, 3)))
                g1 = bcast(lax.slice_in_dim(dx, n - 3, n - 2, 1, 0))
                g2 = dl
                a1 = true_divide(g2, multiply(g1, add(g1, g2)))
                b1 = true_divide(multiply(-1.0, add(g2, g1)), multiply(g1, g2))
                c1 = true_divide(add(multiply(2.0, g2), g1), multiply(g2, add(g1, g2)))
                last = add(add(multiply(a1, sl(n - 3, n - 2)), multiply(b1, sl(n - 2, n - 1))),
                           multiply(c1, sl(n - 1, n)))
        first, inner, last = promote_dtypes(first, inner, last)
        outs.append(lax.concatenate([first, inner, last], ax))
    return outs[0] if len(outs) == 1 else outs


def interp(x, xp, fp, left=None, right=None, period=None):
    """``numpy.interp``: piecewise-linear interpolation of (xp, fp) at ``x`` (xp
    increasing); outside, ``left``/``right`` (default fp[0]/fp[-1]); ``period`` makes
    the data periodic."""
    from tracer.numpy.sorting import searchsorted, _take1d
    from tracer.numpy.ufuncs import remainder
    check_arraylike("interp", x, xp, fp)
    x, xp = promote_dtypes_inexact(as_operand(x), as_operand(xp))
    fp = as_operand(fp)
    (fp,) = promote_dtypes_inexact(fp)
    if dtypes.is_complex(_dt(x)):
        raise TypeError("interp: x and xp must be real")
    if _aval(xp).ndim != 1 or _aval(fp).ndim != 1 or _aval(xp).shape != _aval(fp).shape:
        raise ValueError(f"interp: xp and fp must be 1-D of equal length, got shapes "
                         f"{_aval(xp).shape} and {_aval(fp).shape}")
    n = _aval(xp).shape[0]
    if n == 0:
        raise ValueError("interp: array of sample points is empty")
    if period is not None:
        if left is not None or right is not None:
            raise ValueError("interp: left and right are not allowed with period")
        per = lax.abs(lax.convert_element_type(as_operand(period), _dt(x)))
        x = remainder(x, per)
        xp = remainder(xp, per)
        from tracer.numpy.sorting import argsort
        order = argsort(xp)
        xp = _take1d(xp, order)
        fp = _take1d(fp, order)
        first_x, last_x = lax.index_in_dim(xp, 0, 0), lax.index_in_dim(xp, n - 1, 0)
        xp = lax.concatenate([lax.sub(last_x, lax.reshape(per, (1,))), xp,
                              lax.add(first_x, lax.reshape(per, (1,)))], 0)
        fp = lax.concatenate([lax.index_in_dim(fp, n - 1, 0), fp, lax.index_in_dim(fp, 0, 0)],
                             0)
        n += 2
    i = lax.clamp(lax.full((), 1, dtypes.default_int_dtype()),
                  searchsorted(xp, x, side="right"),
                  lax.full((), builtins.max(n - 1, 1), dtypes.default_int_dtype()))
    one = lax.full((), 1, _dt(i))
    x0, x1 = _take1d(xp, lax.sub(i, one)), _take1d(xp, i)
    f0, f1 = _take1d(fp, lax.sub(i, one)), _take1d(fp, i)
    dxp = lax.sub(x1, x0)
    t = lax.div(lax.sub(x, x0), dxp)
    if dtypes.is_complex(_dt(fp)):
        t = lax.convert_element_type(t, _dt(fp))
    df = lax.sub(f1, f0)
    out = lax.add(f0, lax.mul(t, df))
    # Coinciding sample points: take the right value (as NumPy).
    out = lax.select(lax.eq(dxp, lax.full_like(dxp, 0)), f0, out)
    if n == 1:
        out = lax.broadcast_in_dim(lax.index_in_dim(fp, 0, 0, False), _aval(x).shape, ())
    if period is None:
        lval = lax.index_in_dim(fp, 0, 0, False) if left is None else \
            lax.convert_element_type(as_operand(left), _dt(fp))
        rval = lax.index_in_dim(fp, n - 1, 0, False) if right is None else \
            lax.convert_element_type(as_operand(right), _dt(fp))
        shape = _aval(x).shape
        out = lax.select(lax.lt(x, lax.broadcast_in_dim(lax.index_in_dim(xp, 0, 0, False),
                                                         shape, ())),
                         lax.broadcast_in_dim(lval, shape, ()), out)
        out = lax.select(lax.gt(x, lax.broadcast_in_dim(lax.index_in_dim(xp, n - 1, 0, False),
                                                         shape, ())),
                         lax.broadcast_in_dim(rval, shape, ()), out)
    return out


def unwrap(p, discont=None, axis=-1, period=2 * np.pi):
    """``numpy.unwrap``: remove jumps larger than ``discont`` (default period / 2) along
    ``axis`` by adding multiples of ``period``."""
    from tracer.numpy.manipulation import diff
    from tracer.numpy.reductions import cumsum
    from tracer.numpy.manipulation import where as where_select
    from tracer.numpy.ufuncs import (absolute, add, less, logical_and, remainder, subtract,
                                     equal, greater)
    check_arraylike("unwrap", p)
    (p,) = promote_dtypes_inexact(as_operand(p))
    nd = _aval(p).ndim
    (ax,) = canonicalize_axis_tuple(axis, nd, "unwrap")
    n = _aval(p).shape[ax]
    if n == 0:
        return p
    per = lax.convert_element_type(as_operand(period), _dt(p))
    half = lax.div(per, lax.full((), 2, _dt(p)))
    disc = half if discont is None else lax.convert_element_type(as_operand(discont), _dt(p))
    dd = diff(p, axis=ax)
    # NumPy: ddmod = mod(dd + half, period) - half, with -half kept for positive jumps.
    ddmod = subtract(remainder(add(dd, half), per), half)
    ddmod = where_select(logical_and(equal(ddmod, lax.neg(half)), greater(dd, 0)), half, ddmod)
    corr = subtract(ddmod, dd)
    corr = where_select(less(absolute(dd), disc), lax.full((), 0, _dt(p)), corr)
    csum = cumsum(corr, axis=ax)
    cfg = [(0, 0, 0)] * nd
    cfg[ax] = (1, 0, 0)
    return add(p, lax.pad(csum, lax.full((), 0, _dt(csum)), cfg))


# ==================================== bit packing ========================================

def packbits(a, axis=None, bitorder="big"):
    """``numpy.packbits``: groups of 8 truth values into uint8 (zero padded), along
    ``axis`` (the flattened array if None); ``bitorder`` 'big' or 'little'."""
    from tracer.numpy.manipulation import moveaxis
    check_arraylike("packbits", a)
    a = as_operand(a)
    if not (dtypes.is_integer(_dt(a)) or _dt(a) == np.bool_):
        raise TypeError(f"packbits: expected an integer or boolean array, got {_dt(a).name}")
    if bitorder not in ("big", "little"):
        raise ValueError("packbits: bitorder must be 'big' or 'little'")
    bits = lax.convert_element_type(lax.ne(a, lax.full_like(a, 0)), np.uint8)
    if axis is None:
        bits = lax.reshape(bits, (_aval(bits).size,))
        axis = 0
    (axis,) = canonicalize_axis_tuple(axis, _aval(bits).ndim, "packbits")
    bits = moveaxis(bits, axis, -1)
    n = _aval(bits).shape[-1]
    m = -(-n // 8)
    nd = _aval(bits).ndim
    bits = lax.pad(bits, lax.full((), 0, np.uint8), [(0, 0, 0)] * (nd - 1) + [(0, 8 * m - n, 0)])
    bits = lax.reshape(bits, _aval(bits).shape[:-1] + (m, 8))
    shifts = np.arange(7, -1, -1) if bitorder == "big" else np.arange(8)
    sh = lax.broadcast_in_dim(Array(shifts.astype(np.uint8)), _aval(bits).shape, (nd,))
    packed = lax.reduce_sum(lax.shift_left(bits, sh), (nd,))
    return moveaxis(packed, -1, axis)


def unpackbits(a, axis=None, count=None, bitorder="big"):
    """``numpy.unpackbits``: the bits of a uint8 array, along ``axis`` (flattened if
    None); ``count`` keeps that many bits (negative: drops from the end)."""
    from tracer.numpy.manipulation import moveaxis
    check_arraylike("unpackbits", a)
    a = as_operand(a)
    if _dt(a) != np.uint8:
        raise TypeError(f"unpackbits: expected an input array of unsigned byte data type, "
                        f"got {_dt(a).name}")
    if bitorder not in ("big", "little"):
        raise ValueError("unpackbits: bitorder must be 'big' or 'little'")
    if axis is None:
        a = lax.reshape(a, (_aval(a).size,))
        axis = 0
    (axis,) = canonicalize_axis_tuple(axis, _aval(a).ndim, "unpackbits")
    a = moveaxis(a, axis, -1)
    nd = _aval(a).ndim
    shape = _aval(a).shape + (8,)
    shifts = np.arange(7, -1, -1) if bitorder == "big" else np.arange(8)
    sh = lax.broadcast_in_dim(Array(shifts.astype(np.uint8)), shape, (nd,))
    ab = lax.broadcast_in_dim(a, shape, tuple(range(nd)))
    bits = lax.bitwise_and(lax.shift_right_logical(ab, sh), lax.full((), 1, np.uint8))
    bits = lax.reshape(bits, shape[:-2] + (shape[-2] * 8,))
    if count is not None:
        total = shape[-2] * 8
        count = operator.index(count)
        keep = count if count >= 0 else builtins.max(total + count, 0)
        if keep <= total:
            bits = lax.slice_in_dim(bits, 0, keep, 1, nd - 1)
        else:
            bits = lax.pad(bits, lax.full((), 0, np.uint8),
                           [(0, 0, 0)] * (nd - 1) + [(0, keep - total, 0)])
    return moveaxis(bits, -1, axis)


# =================================== index conversion ====================================

def ravel_multi_index(multi_index, dims, mode="raise", order="C", *, dtype=None):
    """``numpy.ravel_multi_index``: flat indices from a tuple of index arrays. ``mode``
    'raise' (checked on concrete input; under jit it behaves like 'clip'), 'wrap' or
    'clip'; ``order`` 'C' or 'F'."""
    dims = tuple(operator.index(d) for d in dims)
    if len(multi_index) != len(dims):
        raise ValueError(f"ravel_multi_index: parameter multi_index must be a sequence of "
                         f"length {len(dims)}")
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(f"ravel_multi_index: invalid mode={mode!r}")
    if order not in ("C", "F"):
        raise ValueError("ravel_multi_index: only 'C' or 'F' order is permitted")
    idt = dtypes.canonicalize_dtype(dtype) if dtype is not None else dtypes.default_int_dtype()
    idx = []
    for i, d in zip(multi_index, dims):
        i = as_operand(i)
        if not dtypes.is_integer(_dt(i)):
            raise TypeError(f"ravel_multi_index: only int indices permitted, got "
                            f"{_dt(i).name}")
        i = lax.convert_element_type(i, idt)
        if mode == "raise":
            v = concrete_value(i)
            if v is not None and np.any((v < 0) | (v >= d)):
                raise ValueError("ravel_multi_index: invalid entry in coordinates array")
            i = lax.clamp(lax.full((), 0, idt), i, lax.full((), builtins.max(d - 1, 0), idt))
        elif mode == "clip":
            i = lax.clamp(lax.full((), 0, idt), i, lax.full((), builtins.max(d - 1, 0), idt))
        else:
            from tracer.numpy.ufuncs import remainder
            i = remainder(i, lax.full((), d, idt))
        idx.append(i)
    from tracer.numpy.util import promote_shapes
    idx = promote_shapes("ravel_multi_index", *idx)
    order_dims = list(range(len(dims)))
    if order == "F":
        order_dims = order_dims[::-1]
    out = lax.full(np.broadcast_shapes(*(_aval(i).shape for i in idx)), 0, idt)
    for k in order_dims:
        out = lax.add(lax.mul(out, lax.full((), dims[k], idt)), idx[k])
    return out


def unravel_index(indices, shape):
    """``numpy.unravel_index``: a tuple of coordinate arrays from flat indices (negative
    indices count from the end; out-of-range ones are clamped, as in JAX)."""
    indices = as_operand(indices)
    if not dtypes.is_integer(_dt(indices)):
        raise TypeError(f"unravel_index: only int indices permitted, got "
                        f"{_dt(indices).name}")
    shape = (operator.index(shape),) if isinstance(shape, (int, np.integer)) else \
        tuple(operator.index(s) for s in shape)
    v = concrete_value(indices)
    total = int(np.prod(shape, dtype=np.int64))
    if v is not None and np.any((v < -total) | (v >= total)):
        raise ValueError(f"unravel_index: index out of bounds for array of size {total}")
    idt = dtypes.default_int_dtype()
    i = lax.convert_element_type(indices, idt)
    i = lax.select(lax.lt(i, lax.full_like(i, 0)), lax.add(i, lax.full_like(i, total)), i)
    i = lax.clamp(lax.full((), 0, idt), i, lax.full((), builtins.max(total - 1, 0), idt))
    outs = []
    for d in reversed(shape):
        dd = lax.full((), builtins.max(d, 1), idt)
        outs.append(lax.rem(i, dd))
        i = lax.div(i, dd)
    return tuple(reversed(outs))


# ==================================== dtype queries ======================================

_KINDS = {
    "bool": lambda d: d == np.bool_,
    "signed integer": dtypes.is_signed_integer,
    "unsigned integer": dtypes.is_unsigned_integer,
    "integral": dtypes.is_integer,
    "real floating": dtypes.is_floating,
    "complex floating": dtypes.is_complex,
    "numeric": lambda d: d != np.bool_,
}


def isdtype(dtype, kind):
    """Array API ``isdtype``: whether ``dtype`` is of ``kind`` (a dtype, one of 'bool',
    'signed integer', 'unsigned integer', 'integral', 'real floating', 'complex
    floating', 'numeric', or a tuple of these)."""
    dt = dtypes.as_np_dtype(dtype)
    kinds = kind if isinstance(kind, tuple) else (kind,)
    for k in kinds:
        if isinstance(k, str):
            if k not in _KINDS:
                raise ValueError(f"isdtype: unrecognized kind {k!r}; expected one of "
                                 f"{sorted(_KINDS)} or a dtype")
            if _KINDS[k](dt):
                return True
        else:
            try:
                if dt == np.dtype(k):
                    return True
            except TypeError:
                raise TypeError(f"isdtype: kind must be a string or a dtype, got {k!r}") \
                    from None
    return False


def iterable(y):
    """``numpy.iterable``: whether ``iter(y)`` works (0-d arrays are not iterable)."""
    try:
        iter(y)
    except TypeError:
        return False
    return True


# ====================================== printing =========================================
# Arrays print through NumPy, so NumPy's print options are ours.

get_printoptions = np.get_printoptions
set_printoptions = np.set_printoptions
printoptions = np.printoptions


def array_repr(arr, max_line_width=None, precision=None, suppress_small=None):
    """``numpy.array_repr`` of an Array (its NumPy value)."""
    return np.array_repr(np.asarray(arr), max_line_width, precision, suppress_small)


def array_str(a, max_line_width=None, precision=None, suppress_small=None):
    """``numpy.array_str`` of an Array (its NumPy value)."""
    return np.array_str(np.asarray(a), max_line_width, precision, suppress_small)


# ===================================== frompyfunc ========================================

class ufunc:
    """A NumPy-style ufunc built from a Python function on scalars (``frompyfunc``):
    calls broadcast and map the function with vmap; ``outer``, ``reduce`` and
    ``accumulate`` (binary ufuncs) are supported."""

    def __init__(self, func, nin, nout, *, identity=None, name=None):
        self._func = func
        self.nin = operator.index(nin)
        self.nout = operator.index(nout)
        self.nargs = self.nin + self.nout
        self.identity = identity
        self.__name__ = name or getattr(func, "__name__", "ufunc")

    def __repr__(self):
        return f"<tracer ufunc '{self.__name__}'>"

    def __call__(self, *args, out=None, where=None):
        from tracer.api import vmap
        from tracer.numpy.manipulation import broadcast_arrays
        if out is not None or where is not None:
            raise NotImplementedError(f"{self.__name__}: out= and where= are not supported")
        if len(args) != self.nin:
            raise TypeError(f"{self.__name__} takes {self.nin} arguments, got {len(args)}")
        args = broadcast_arrays(*[as_operand(a) for a in args])
        f = self._func
        shape = _aval(args[0]).shape
        flat = [lax.reshape(a, (_aval(a).size,)) for a in args]
        if shape:
            res = vmap(f)(*flat)
        else:
            res = f(*[lax.reshape(a, ()) for a in args])
        if self.nout == 1:
            r = as_operand(res)
            return lax.reshape(r, shape) if shape else r
        return tuple(lax.reshape(as_operand(r), shape) if shape else as_operand(r)
                     for r in res)

    def outer(self, A, B):
        """f(a, b) for every pair (the result has A's then B's dimensions)."""
        if self.nin != 2:
            raise ValueError(f"{self.__name__}.outer is only defined for binary ufuncs")
        A, B = as_operand(A), as_operand(B)
        na, nb = _aval(A).ndim, _aval(B).ndim
        shape = _aval(A).shape + _aval(B).shape
        Ab = lax.broadcast_in_dim(A, shape, tuple(range(na)))
        Bb = lax.broadcast_in_dim(B, shape, tuple(range(na, na + nb)))
        return self(Ab, Bb)

    def _check_binary(self, what):
        if self.nin != 2 or self.nout != 1:
            raise ValueError(f"{self.__name__}.{what} is only defined for binary ufuncs with "
                             f"one output")

    def reduce(self, a, axis=0, dtype=None, out=None, keepdims=False, initial=None,
               where=None):
        """Fold the function over ``axis`` (left to right, unrolled)."""
        self._check_binary("reduce")
        from tracer.numpy.manipulation import moveaxis
        a = as_operand(a)
        if axis is None:
            a = lax.reshape(a, (_aval(a).size,))
            axis = 0
        (ax,) = canonicalize_axis_tuple(axis, _aval(a).ndim, f"{self.__name__}.reduce")
        a = moveaxis(a, ax, 0)
        n = _aval(a).shape[0]
        if initial is None:
            initial = self.identity
        if n == 0:
            if initial is None:
                raise ValueError(f"zero-size array to reduction operation {self.__name__} "
                                 f"which has no identity")
            acc = lax.full(_aval(a).shape[1:], initial, _dt(a))
        else:
            acc = lax.index_in_dim(a, 0, 0, False)
            if initial is not None:
                acc = self(lax.full_like(acc, initial), acc)
            for i in range(1, n):
                acc = self(acc, lax.index_in_dim(a, i, 0, False))
        if keepdims:
            acc = lax.expand_dims(acc, (ax,))
        return acc

    def accumulate(self, a, axis=0, dtype=None, out=None):
        """Running fold over ``axis`` (unrolled)."""
        self._check_binary("accumulate")
        from tracer.numpy.manipulation import moveaxis, stack
        a = as_operand(a)
        (ax,) = canonicalize_axis_tuple(axis, _aval(a).ndim, f"{self.__name__}.accumulate")
        a = moveaxis(a, ax, 0)
        n = _aval(a).shape[0]
        if n == 0:
            return moveaxis(a, 0, ax)
        acc = lax.index_in_dim(a, 0, 0, False)
        outs = [acc]
        for i in range(1, n):
            acc = self(acc, lax.index_in_dim(a, i, 0, False))
            outs.append(acc)
        return moveaxis(stack(outs, 0), 0, ax)


def frompyfunc(func, /, nin, nout, *, identity=None):
    """``numpy.frompyfunc``: a ufunc from a scalar function (see ``ufunc``)."""
    return ufunc(func, nin, nout, identity=identity)


# ================================ Array API inspection ===================================

class ArrayNamespaceInfo:
    """``__array_namespace_info__()`` of the Array API (2024.12): one host device ('cpu'),
    the supported dtypes and the default ones (64-bit unless ``enable_x64`` is off)."""

    def capabilities(self):
        # Boolean-mask indexing and unique/nonzero have data-dependent shapes: eager only.
        # Arrays are NumPy arrays underneath, hence NumPy's limit on dimensions.
        return {"boolean indexing": True, "data-dependent shapes": True,
                "max dimensions": 64}

    def default_device(self):
        return "cpu"

    def devices(self):
        return ["cpu"]

    def default_dtypes(self, *, device=None):
        return {"real floating": np.dtype(dtypes.default_float_dtype()),
                "complex floating": np.dtype(dtypes.default_complex_dtype()),
                "integral": np.dtype(dtypes.default_int_dtype()),
                "indexing": np.dtype(dtypes.default_int_dtype())}

    def dtypes(self, *, device=None, kind=None):
        names = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                 "uint64", "float32", "float64", "complex64", "complex128"]
        out = {}
        for n in names:
            dt = np.dtype(n)
            if kind is None or isdtype(dt, kind):
                if dt == dtypes.canonicalize_dtype(dt):
                    out[n] = dt
        return out


class finfo:
    """Machine limits of a floating dtype: ``numpy.finfo`` with the Array API's types.

    ``type`` is a floating or complex dtype, a scalar type, or an array (its dtype is
    used); a complex dtype describes its real part (``finfo(complex64).dtype`` is
    float32). ``bits`` is an int and the limits ``eps``, ``epsneg``, ``max``, ``min``,
    ``resolution``, ``smallest_normal``, ``smallest_subnormal`` and ``tiny`` are Python
    floats, as the Array API requires (``numpy.finfo`` gives NumPy scalars; a Python
    float is weakly typed, so ``x * finfo(x).eps`` keeps ``x``'s dtype all the same).
    The other attributes (``nmant``, ``precision``, ``iexp``...) are NumPy's. A
    non-floating dtype raises NumPy's ValueError."""

    _FLOAT_ATTRS = ("eps", "epsneg", "max", "min", "resolution", "smallest_normal",
                    "smallest_subnormal", "tiny")

    def __init__(self, type):
        if not isinstance(type, (np.dtype, builtins.type, str)) and hasattr(type, "dtype"):
            type = type.dtype
        info = dtypes.finfo(type)   # ml_dtypes.finfo knows its own types too
        self._info = info
        self.dtype = info.dtype
        self.bits = int(info.bits)
        for name in self._FLOAT_ATTRS:
            setattr(self, name, float(getattr(info, name)))

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._info, name)

    def __eq__(self, other):
        return isinstance(other, finfo) and self.dtype == other.dtype

    def __hash__(self):
        return hash(("finfo", self.dtype))

    def __repr__(self):
        return (f"finfo(resolution={self.resolution}, min={self.min}, max={self.max}, "
                f"dtype={self.dtype})")
