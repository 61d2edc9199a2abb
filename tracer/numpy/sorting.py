"""Sorting, searching, order statistics, set operations and histograms: sort, argsort,
lexsort, partition, searchsorted, digitize, median/quantile/percentile (and nan-versions),
unique and the set functions, isin, bincount, histogram*.

Built on lax.sort (stable; NaNs last; -0.0 == 0.0), lax.gather and lax.scatter_add, so
grad/vmap/jit go through them. Functions whose output size depends on the data (unique,
the set functions) run eagerly on concrete input; under jit they take JAX's ``size=`` and
``fill_value=`` or raise ConcretizationTypeError naming that way out.
"""
from __future__ import annotations

import builtins
import operator

import numpy as np

import lax
from tracer import dtypes
from tracer.core import Array, concrete_value, get_aval
from tracer.errors import ConcretizationTypeError
from tracer.numpy.util import (as_operand, canonicalize_axis_tuple, check_arraylike,
                               promote_dtypes, promote_dtypes_inexact)


def _aval(x):
    return get_aval(x)


def _dt(x):
    return get_aval(x).dtype


def _int_dtype():
    return dtypes.default_int_dtype()


def _axis1(axis, nd, fname):
    return canonicalize_axis_tuple(axis, nd, fname)[0]


# ==================================== gathers ============================================

def _take_along_last(arr, idx):
    """``arr[..., idx]`` per leading index: ``arr`` is (*R, n), ``idx`` is (*Q, *R) with
    integer entries in [0, n) (clamped); the result has ``idx``'s shape. One gather with
    batching dims R."""
    ra = _aval(arr).ndim - 1
    qi = _aval(idx).ndim - ra
    dn = lax.GatherDimensionNumbers(
        offset_dims=(), collapsed_slice_dims=(ra,), start_index_map=(ra,),
        operand_batching_dims=tuple(range(ra)),
        start_indices_batching_dims=tuple(range(qi, qi + ra)))
    return lax.gather(arr, lax.expand_dims(idx, (_aval(idx).ndim,)), dn, (1,) * (ra + 1),
                      mode="clip")


def _take_along_axis(arr, idx, axis):
    """``numpy.take_along_axis`` with clamped indices (``idx`` has ``arr``'s rank and its
    shape except along ``axis``)."""
    nd = _aval(arr).ndim
    arr_m = lax.transpose(arr, tuple(i for i in range(nd) if i != axis) + (axis,))
    idx_m = lax.transpose(idx, tuple(i for i in range(nd) if i != axis) + (axis,))
    # (*R, k) indices into (*R, n): move k to the front as the "query" dim.
    idx_q = lax.transpose(idx_m, (nd - 1,) + tuple(range(nd - 1)))
    out = _take_along_last(arr_m, idx_q)
    out = lax.transpose(out, tuple(range(1, nd)) + (0,))
    inv = list(range(nd - 1))
    inv.insert(axis, nd - 1)
    return lax.transpose(out, tuple(inv))


def _take1d(a, idx):
    """``a[idx]`` for a 1-D ``a`` and integer ``idx`` of any shape (clamped)."""
    dn = lax.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(0,),
                                    start_index_map=(0,))
    return lax.gather(a, lax.expand_dims(idx, (_aval(idx).ndim,)), dn, (1,), mode="clip")


# ===================================== sorting ===========================================

def _iota_like(shape, axis):
    return lax.broadcasted_iota(_int_dtype(), shape, axis)


def sort(a, axis=-1, kind=None, order=None, *, stable=True, descending=False):
    """``numpy.sort`` (NaNs last; ``axis=None`` sorts the flattened array). ``descending``
    reverses the order (JAX's extension). ``kind`` is accepted and ignored (the sort is
    always stable); ``order`` (structured arrays) is not supported."""
    if order is not None:
        raise TypeError("sort: the order argument (structured arrays) is not supported")
    a = as_operand(a, "sort")
    if axis is None:
        a = lax.reshape(a, (_aval(a).size,))
        axis = 0
    if _aval(a).ndim == 0:
        raise np.exceptions.AxisError("sort: axis out of bounds for a 0-d array; use "
                                      "axis=None")
    axis = _axis1(axis, _aval(a).ndim, "sort")
    out = lax.sort(a, dimension=axis, is_stable=True)
    return lax.rev(out, (axis,)) if descending else out


def argsort(a, axis=-1, kind=None, order=None, *, stable=True, descending=False):
    """``numpy.argsort``: the stable sorting permutation along ``axis`` (NaNs last). With
    ``descending``, ties keep their original order (as in JAX)."""
    if order is not None:
        raise TypeError("argsort: the order argument (structured arrays) is not supported")
    a = as_operand(a, "argsort")
    if axis is None:
        a = lax.reshape(a, (_aval(a).size,))
        axis = 0
    if _aval(a).ndim == 0:
        raise np.exceptions.AxisError("argsort: axis out of bounds for a 0-d array")
    axis = _axis1(axis, _aval(a).ndim, "argsort")
    shape = _aval(a).shape
    n = shape[axis]
    iota = _iota_like(shape, axis)
    if descending:
        # Sorting the reversed array and mapping back keeps ties in original order once
        # the result is reversed again.
        _, idx = lax.sort_key_val(lax.rev(a, (axis,)), iota, axis)
        return lax.rev(lax.sub(lax.full((), n - 1, _dt(idx)), idx), (axis,))
    _, idx = lax.sort_key_val(a, iota, axis)
    return idx


def lexsort(keys, axis=-1):
    """``numpy.lexsort``: the stable permutation sorting by the last key first."""
    keys = [as_operand(k, "lexsort") for k in keys] if not hasattr(keys, "aval") and \
        not isinstance(keys, np.ndarray) else \
        [lax.index_in_dim(as_operand(keys), i, 0, False) for i in range(len(keys))]
    if not keys:
        raise TypeError("lexsort: need sequence of keys with len > 0")
    shape = _aval(keys[0]).shape
    for k in keys:
        if _aval(k).shape != shape:
            raise ValueError(f"lexsort: all keys need to be the same shape, got "
                             f"{[_aval(k).shape for k in keys]}")
    if not shape:
        return lax.full((), 0, _int_dtype())
    axis = _axis1(axis, len(shape), "lexsort")
    iota = _iota_like(shape, axis)
    outs = lax.sort(list(keys[::-1]) + [iota], dimension=axis, is_stable=True,
                    num_keys=len(keys))
    return outs[-1]


def _kth_check(a, kth, axis, fname):
    n = _aval(a).shape[axis]
    k = np.asarray(kth)
    if np.any((k < -n) | (k >= n)):
        raise ValueError(f"{fname}: kth {kth} out of bounds for axis of size {n}")


def partition(a, kth, axis=-1):
    """``numpy.partition``: the k-th element in its sorted place, smaller ones before and
    larger ones after. Implemented as a full sort (a valid partition; NumPy leaves the
    order within each side unspecified)."""
    a = as_operand(a, "partition")
    axis = _axis1(axis, _aval(a).ndim, "partition")
    _kth_check(a, kth, axis, "partition")
    return sort(a, axis)


def argpartition(a, kth, axis=-1):
    """``numpy.argpartition``: indices that partition ``a`` (a stable full argsort)."""
    a = as_operand(a, "argpartition")
    axis = _axis1(axis, _aval(a).ndim, "argpartition")
    _kth_check(a, kth, axis, "argpartition")
    return argsort(a, axis)


def sort_complex(a):
    """``numpy.sort_complex``: sorted along the last axis, as a complex array."""
    a = as_operand(a, "sort_complex")
    if not dtypes.is_complex(_dt(a)):
        a = lax.convert_element_type(a, dtypes.complex_dtype_for(
            _dt(a) if dtypes.is_floating(_dt(a)) else dtypes.default_float_dtype()))
    return sort(a, -1)


# ===================================== searching =========================================

def _nan_less(x, y):
    """x < y in the order where NaN is larger than everything (and equal to itself)."""
    if not dtypes.is_inexact(_dt(x)):
        return lax.lt(x, y)
    if dtypes.is_complex(_dt(x)):
        xr, xi, yr, yi = lax.real(x), lax.imag(x), lax.real(y), lax.imag(y)
        return lax.bitwise_or(_nan_less(xr, yr),
                              lax.bitwise_and(lax.eq(xr, yr), _nan_less(xi, yi)))
    x_nan, y_nan = lax.ne(x, x), lax.ne(y, y)
    return lax.bitwise_or(lax.lt(x, y), lax.bitwise_and(lax.bitwise_not(x_nan), y_nan))


def searchsorted(a, v, side="left", sorter=None, *, method="scan"):
    """``numpy.searchsorted``: insertion indices of ``v`` into the sorted 1-D ``a`` (NaN
    sorts last). A binary search of ceil(log2(n + 1)) gather steps; ``method`` is
    accepted for JAX compatibility ('scan', 'scan_unrolled', 'sort' search the same way,
    'compare_all' compares every pair)."""
    a = as_operand(a, "searchsorted")
    v = as_operand(v, "searchsorted")
    if _aval(a).ndim != 1:
        raise ValueError(f"searchsorted: a must be 1-D, got shape {_aval(a).shape}")
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    if method not in ("scan", "scan_unrolled", "sort", "compare_all"):
        raise ValueError(f"searchsorted: unknown method {method!r}")
    if sorter is not None:
        a = _take1d(a, as_operand(sorter))
    a, v = promote_dtypes(a, v)
    n = _aval(a).shape[0]
    idt = _int_dtype()
    vshape = _aval(v).shape
    if n == 0:
        return lax.full(vshape, 0, idt)

    def goes_right(av, vv):
        # left: a[i] < v;  right: a[i] <= v, i.e. not (v < a[i]).
        return _nan_less(av, vv) if side == "left" else lax.bitwise_not(_nan_less(vv, av))

    if method == "compare_all":
        ab = lax.broadcast_in_dim(a, vshape + (n,), (len(vshape),))
        vb = lax.broadcast_in_dim(v, vshape + (n,), tuple(range(len(vshape))))
        cnt = lax.convert_element_type(goes_right(ab, vb), idt)
        return lax.reduce_sum(cnt, (len(vshape),))
    lo = lax.full(vshape, 0, idt)
    hi = lax.full(vshape, n, idt)
    one, two = lax.full((), 1, idt), lax.full((), 2, idt)
    for _ in range(int(n).bit_length()):
        active = lax.lt(lo, hi)
        mid = lax.div(lax.add(lo, hi), two)
        right = lax.bitwise_and(active, goes_right(_take1d(a, mid), v))
        left = lax.bitwise_and(active, lax.bitwise_not(right))
        lo = lax.select(right, lax.add(mid, one), lo)
        hi = lax.select(left, mid, hi)
    return lo


def digitize(x, bins, right=False, *, method=None):
    """``numpy.digitize``: bin indices of ``x`` for monotonic (increasing or decreasing)
    1-D ``bins``."""
    x = as_operand(x, "digitize")
    bins = as_operand(bins, "digitize")
    if _aval(bins).ndim != 1:
        raise ValueError(f"digitize: bins must be a 1-dimensional array, got shape "
                         f"{_aval(bins).shape}")
    n = _aval(bins).shape[0]
    if n == 0:
        return lax.full(_aval(x).shape, 0, _int_dtype())
    kw = {} if method is None else {"method": method}
    inc = searchsorted(bins, x, side="left" if right else "right", **kw)
    dec = lax.sub(lax.full((), n, _int_dtype()),
                  searchsorted(lax.rev(bins, (0,)), x, side="left" if right else "right",
                               **kw))
    first, last = lax.index_in_dim(bins, 0, 0, False), lax.index_in_dim(bins, n - 1, 0, False)
    increasing = lax.bitwise_not(_nan_less(last, first))
    return lax.select(lax.broadcast_in_dim(increasing, _aval(inc).shape, ()), inc, dec)


# ================================ quantiles and medians ==================================

_METHODS = ("linear", "lower", "higher", "midpoint", "nearest", "inverted_cdf",
            "averaged_inverted_cdf", "closest_observation", "interpolated_inverted_cdf",
            "hazen", "weibull", "median_unbiased", "normal_unbiased")

# (alpha, beta) of the continuous methods (Hyndman & Fan), as NumPy names them.
_ALPHA_BETA = {"linear": (1, 1), "interpolated_inverted_cdf": (0, 1), "hazen": (0.5, 0.5),
               "weibull": (0, 0), "median_unbiased": (1 / 3, 1 / 3),
               "normal_unbiased": (3 / 8, 3 / 8)}


def _quantile(a, q, axis, method, keepdims, fname, ignore_nan, percent=False, middle=False):
    check_arraylike(fname, a, q)
    if method not in _METHODS:
        raise ValueError(f"{fname}: method must be one of {_METHODS}, got {method!r}")
    a = as_operand(a, fname)
    q = as_operand(q, fname)
    if dtypes.is_complex(_dt(a)):
        raise TypeError(f"{fname} does not support complex input")
    in_dtype = _dt(a)
    a, q = promote_dtypes_inexact(a, q)
    if percent:
        q = lax.div(q, lax.full((), 100, _dt(q)))
    qv = concrete_value(q)
    if qv is not None and np.any((qv < 0) | (qv > 1)):
        what = "percentiles must be in the range [0, 100]" if percent else \
            "quantiles must be in the range [0, 1]"
        raise ValueError(f"{fname}: {what}")
    nd = _aval(a).ndim
    if axis is None:
        axes = tuple(range(nd))
    else:
        axes = canonicalize_axis_tuple(axis, nd, fname)
    keep = [i for i in range(nd) if i not in axes]
    shape = _aval(a).shape
    red = [shape[i] for i in keep]
    n = int(np.prod([shape[i] for i in axes], dtype=np.int64))
    x = lax.reshape(lax.transpose(a, tuple(keep) + axes), tuple(red) + (n,))
    if n == 0:
        out = lax.full(_aval(q).shape + tuple(red), np.nan, _dt(a))
        return _quantile_keepdims(out, q, axes, nd, keepdims)
    xs = lax.sort(x, dimension=len(red))
    fdt = _dt(xs)
    isnan_any = None
    if ignore_nan:
        cnt = lax.reduce_sum(lax.convert_element_type(lax.eq(x, x), _int_dtype()), (len(red),))
        nvalid = cnt
    else:
        nvalid = lax.full(tuple(red), n, _int_dtype())
        last = lax.index_in_dim(xs, n - 1, len(red), False)
        isnan_any = lax.ne(last, last)  # NaNs sort last
    qs = _aval(q).shape
    full_shape = qs + tuple(red)
    qb = lax.broadcast_in_dim(q, full_shape, tuple(range(len(qs))))
    nb = lax.broadcast_in_dim(lax.convert_element_type(nvalid, fdt), full_shape,
                              tuple(range(len(qs), len(full_shape))))
    nmax = lax.sub(nb, lax.full((), 1, fdt))
    idt = _int_dtype()

    def at(pos_float):
        idx = lax.convert_element_type(lax.clamp(lax.full((), 0, fdt), pos_float,
                                                 lax.max(nmax, lax.full((), 0, fdt))), idt)
        return _take_along_last(xs, idx)

    one, half, zero = (lax.full((), v, fdt) for v in (1, 0.5, 0))

    def interpolate(virt, gamma_fix=None):
        # NumPy's _get_indexes: below 0 both neighbours are the first value, at or above
        # n - 1 both are the last; then _lerp(previous, next, gamma).
        prev = lax.floor(virt)
        gamma = lax.sub(virt, prev)
        if gamma_fix is not None:
            gamma = gamma_fix(gamma, virt)
        above = lax.ge(virt, nmax)
        below = lax.lt(virt, zero)
        p_idx = lax.select(above, nmax, lax.select(below, lax.full_like(prev, 0), prev))
        n_idx = lax.select(above, nmax, lax.select(below, lax.full_like(prev, 0),
                                                   lax.add(prev, one)))
        return _lerp(at(p_idx), at(n_idx), gamma)

    def discrete(index, take_previous):
        # NumPy's _discrete_interpolation_to_boundaries.
        prev = lax.floor(index)
        gamma = lax.sub(index, prev)
        return at(lax.select(take_previous(gamma, prev), prev, lax.add(prev, one)))

    nq = lax.mul(nb, qb)
    if middle:
        # median (NumPy's and JAX's): the middle value, or the mean of the middle two
        # (no interpolation, so [0, 0, inf] gives 0 where linear gives 0 + inf * 0)
        v = lax.mul(nmax, qb)
        lo, hi = at(lax.floor(v)), at(lax.ceil(v))
        out = lax.select(lax.eq(lax.floor(v), lax.ceil(v)), lo,
                         lax.mul(lax.add(lo, hi), half))
    elif method in _ALPHA_BETA:
        alpha, beta = _ALPHA_BETA[method]
        # NumPy's virtual index n q + (alpha + q (1 - alpha - beta)) - 1.
        virt = lax.sub(lax.add(nq, lax.add(lax.full((), alpha, fdt), lax.mul(
            qb, lax.full((), 1 - alpha - beta, fdt)))), one)
        out = interpolate(virt)
    elif method == "lower":
        out = at(lax.floor(lax.mul(nmax, qb)))
    elif method == "higher":
        out = at(lax.ceil(lax.mul(nmax, qb)))
    elif method == "nearest":
        out = at(lax.round_nearest_even(lax.mul(nmax, qb)))
    elif method == "midpoint":
        v = lax.mul(nmax, qb)
        virt = lax.mul(half, lax.add(lax.floor(v), lax.ceil(v)))
        out = interpolate(virt, lambda g, vi: lax.select(lax.eq(vi, lax.floor(vi)),
                                                         lax.full_like(g, 0),
                                                         lax.full_like(g, 0.5)))
    elif method == "averaged_inverted_cdf":
        out = interpolate(lax.sub(nq, one), lambda g, vi: lax.select(
            lax.eq(g, zero), lax.full_like(g, 0.5), lax.full_like(g, 1)))
    elif method == "inverted_cdf":
        out = discrete(lax.sub(nq, one), lambda g, prev: lax.eq(g, zero))
    else:  # closest_observation: the nearest even order statistic (1-based) at ties
        two = lax.full((), 2, fdt)
        out = discrete(lax.sub(nq, lax.full((), 1.5, fdt)), lambda g, prev: lax.bitwise_and(
            lax.eq(g, zero), lax.eq(lax.sub(prev, lax.mul(two, lax.floor(lax.div(prev, two)))),
                                    one)))
    if ignore_nan:
        empty = lax.broadcast_in_dim(lax.eq(nvalid, lax.full((), 0, idt)), full_shape,
                                     tuple(range(len(qs), len(full_shape))))
        out = lax.select(empty, lax.full_like(out, np.nan), out)
    else:
        nan_b = lax.broadcast_in_dim(isnan_any, full_shape, tuple(range(len(qs),
                                                                        len(full_shape))))
        out = lax.select(nan_b, lax.full_like(out, np.nan), out)
    if method in _DISCRETE and not dtypes.is_inexact(in_dtype):
        # NumPy keeps the input's integer dtype for the methods that pick an element.
        out = lax.convert_element_type(out, in_dtype)
    return _quantile_keepdims(out, q, axes, nd, keepdims)


_DISCRETE = ("lower", "higher", "nearest", "inverted_cdf", "closest_observation")


def _lerp(a, b, t):
    # NumPy's formula: a + (b - a) t, or b - (b - a)(1 - t) for t >= 0.5 (monotone and
    # exact at both ends).
    d = lax.sub(b, a)
    one = lax.full((), 1, _dt(t))
    return lax.select(lax.ge(t, lax.full((), 0.5, _dt(t))),
                      lax.sub(b, lax.mul(d, lax.sub(one, t))), lax.add(a, lax.mul(d, t)))


def _quantile_keepdims(out, q, axes, nd, keepdims):
    if not keepdims:
        return out
    qn = _aval(q).ndim
    shape = list(_aval(out).shape[qn:])
    for ax in sorted(axes):
        shape.insert(ax, 1)
    return lax.reshape(out, _aval(q).shape + tuple(shape))


def _check_unused(out, overwrite_input, fname, interpolation=None):
    if out is not None:
        raise NotImplementedError(f"{fname}: the out argument is not supported")
    if interpolation is not None:
        raise TypeError(f"{fname}: 'interpolation' was renamed 'method' (NumPy 1.22)")


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, *, interpolation=None):
    """``numpy.quantile`` with all of NumPy's methods; NaN where a slice holds a NaN. The
    leading dimensions of the result are those of ``q``."""
    _check_unused(out, overwrite_input, "quantile", interpolation)
    return _quantile(a, q, axis, method, keepdims, "quantile", False)


def nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                keepdims=False, *, interpolation=None):
    """``numpy.nanquantile``: quantiles of the non-NaN values (NaN for all-NaN slices)."""
    _check_unused(out, overwrite_input, "nanquantile", interpolation)
    return _quantile(a, q, axis, method, keepdims, "nanquantile", True)


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, *, interpolation=None):
    """``numpy.percentile``: ``quantile`` with ``q`` in percent."""
    _check_unused(out, overwrite_input, "percentile", interpolation)
    return _quantile(a, q, axis, method, keepdims, "percentile", False, percent=True)


def nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                  keepdims=False, *, interpolation=None):
    """``numpy.nanpercentile``: ``nanquantile`` with ``q`` in percent."""
    _check_unused(out, overwrite_input, "nanpercentile", interpolation)
    return _quantile(a, q, axis, method, keepdims, "nanpercentile", True, percent=True)


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """``numpy.median`` (NaN where a slice holds a NaN)."""
    _check_unused(out, overwrite_input, "median")
    return _quantile(a, 0.5, axis, "linear", keepdims, "median", False, middle=True)


def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """``numpy.nanmedian``: the median of the non-NaN values."""
    _check_unused(out, overwrite_input, "nanmedian")
    return _quantile(a, 0.5, axis, "linear", keepdims, "nanmedian", True, middle=True)


# ================================ unique and set functions ===============================

def _concrete(x):
    """The NumPy value of ``x`` if it is a plain Array (no transformation traces it), else
    None. Tracers whose value is known (eager grad) take the differentiable path with the
    output size read off their value (``_known_size``)."""
    return x._value if isinstance(x, Array) else None


def _known_size(fname, size, xs, count):
    """``size`` if given; else, when the values of the operands ``xs`` are known (eager
    grad), ``count(*values)``; else a ConcretizationTypeError asking for size=."""
    if size is not None:
        return operator.index(size)
    vals = [concrete_value(x) for x in xs]
    for x, v in zip(xs, vals):
        if v is None:
            _need_size(fname, x)
    return int(count(*vals))


def _need_size(fname, x):
    raise ConcretizationTypeError(
        x, f"in {fname}: the size of its output depends on the values. Pass size= (and "
           f"optionally fill_value=) to get a fixed-size result under jit/vmap")


def _neq_adjacent(s, equal_nan):
    """True where s[i] differs from s[i-1] (first entry True); NaNs equal if asked."""
    n = _aval(s).shape[0]
    hi, lo = lax.slice_in_dim(s, 1, n, 1, 0), lax.slice_in_dim(s, 0, n - 1, 1, 0)
    ne = lax.ne(hi, lo)
    if equal_nan and dtypes.is_inexact(_dt(s)):
        both_nan = lax.bitwise_and(lax.ne(hi, hi), lax.ne(lo, lo))
        ne = lax.bitwise_and(ne, lax.bitwise_not(both_nan))
    return lax.concatenate([lax.full((1,), True, np.bool_), ne], 0)


def _kth_true(mask, size):
    """Positions of the first ``size`` True entries of the 1-D ``mask`` (clamped to the
    last position past the count): searchsorted on the running count."""
    from tracer.numpy.reductions import cumsum
    c = cumsum(lax.convert_element_type(mask, _int_dtype()))
    k = lax.add(lax.iota(_int_dtype(), size), lax.full((), 1, _int_dtype()))
    return searchsorted(c, k, side="left"), lax.index_in_dim(c, _aval(c).shape[0] - 1, 0,
                                                               False)


def _fill(vals, count, size, fill):
    valid = lax.lt(lax.iota(_int_dtype(), size), lax.broadcast_in_dim(count, (size,), ()))
    if _aval(vals).ndim > 1:
        valid = lax.broadcast_in_dim(valid, _aval(vals).shape, (0,))
    fill = lax.convert_element_type(as_operand(fill), _dt(vals))
    return lax.select(valid, vals, lax.broadcast_in_dim(fill, _aval(vals).shape, ()))


def _unique_traced(x, return_index, return_inverse, return_counts, equal_nan, size,
                   fill_value):
    """unique of a 1-D array with a static output ``size``, by sort + searchsorted."""
    n = _aval(x).shape[0]
    idt = _int_dtype()
    if n == 0:
        vals = lax.full((size,), 0 if fill_value is None else fill_value, _dt(x))
        outs = [vals]
        if return_index:
            outs.append(lax.full((size,), 0, idt))
        if return_inverse:
            outs.append(lax.full((0,), 0, idt))
        if return_counts:
            outs.append(lax.full((size,), 0, idt))
        return outs
    s, perm = lax.sort_key_val(x, lax.iota(idt, n), 0)
    first = _neq_adjacent(s, equal_nan)
    pos, count = _kth_true(first, size)
    vals = _take1d(s, pos)
    fill = _take1d(s, lax.full((), 0, idt)) if fill_value is None else fill_value
    outs = [_fill(vals, count, size, fill)]
    if return_index:
        idx = _take1d(perm, pos)
        outs.append(_fill(idx, count, size, _take1d(idx, lax.full((), 0, idt))))
    if return_inverse:
        from tracer.numpy.reductions import cumsum
        gid = lax.sub(cumsum(lax.convert_element_type(first, idt)), lax.full((), 1, idt))
        _, inv_perm = lax.sort_key_val(perm, lax.iota(idt, n), 0)
        outs.append(_take1d(gid, inv_perm))
    if return_counts:
        # End of group k = start of group k + 1 (n past the last group).
        ends, _ = _kth_true(first, size + 1)
        ends = lax.slice_in_dim(ends, 1, size + 1, 1, 0)
        outs.append(_fill(lax.sub(ends, pos), count, size, 0))
    return outs


def _pad_eager(res, size, fill_value, fname, n_idx):
    """Pad/cut eager NumPy results to ``size`` with JAX's fill conventions."""
    vals = res[0]
    k = vals.shape[0]
    out = []
    if k >= size:
        return [r[:size] if i != n_idx.get("inverse", -1) else r for i, r in enumerate(res)]
    fv = vals[:1] if fill_value is None else np.asarray(fill_value, vals.dtype)
    for i, r in enumerate(res):
        if i == 0:
            pad = np.broadcast_to(fv if fill_value is not None or k else
                                  np.zeros((), vals.dtype), (size - k,) + r.shape[1:])
            out.append(np.concatenate([r, pad.astype(r.dtype)]))
        elif i == n_idx.get("index"):
            out.append(np.concatenate([r, np.full(size - k, r[0] if k else 0, r.dtype)]))
        elif i == n_idx.get("counts"):
            out.append(np.concatenate([r, np.zeros(size - k, r.dtype)]))
        else:
            out.append(r)
    return out


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None,
           *, equal_nan=True, size=None, fill_value=None, sorted=True):
    """``numpy.unique``: the sorted unique values (and first indices, inverse, counts).

    Eagerly the output has one entry per distinct value. Under jit/vmap pass ``size`` (the
    output length; missing entries get ``fill_value``, default the smallest value; index
    fill is the first index, count fill 0), or a ConcretizationTypeError says so. The
    inverse has ``ar``'s shape (NumPy 2)."""
    ar = as_operand(ar, "unique")
    xv = _concrete(ar)
    idt = _int_dtype()
    if xv is not None:
        res = np.unique(xv, return_index=True, return_inverse=True,
                        return_counts=True, axis=axis, equal_nan=equal_nan)
        vals, index, inverse, counts = res
        index, counts = index.astype(idt), counts.astype(idt)
        inverse = inverse.astype(idt)
        if axis is None:
            inverse = inverse.reshape(xv.shape)
        items = [vals, index, inverse, counts]
        if size is not None:
            size = operator.index(size)
            items = _pad_eager(items, size, fill_value, "unique",
                               {"index": 1, "counts": 3, "inverse": 2})
        flags = [True, return_index, return_inverse, return_counts]
        outs = [Array(np.asarray(v)) for v, f in zip(items, flags) if f]
        return outs[0] if len(outs) == 1 else tuple(outs)
    if axis is not None:
        cv = concrete_value(ar)
        if cv is None:
            raise NotImplementedError("unique: axis= needs concrete input (it is not "
                                      "supported under jit/vmap)")
        # A tracer with a known value (eager grad): indices from NumPy, values gathered
        # from the tracer so that they stay differentiable.
        from tracer.numpy.indexing_funcs import take
        _, index, inverse, counts = np.unique(cv, return_index=True, return_inverse=True,
                                              return_counts=True, axis=axis,
                                              equal_nan=equal_nan)
        outs = [take(ar, Array(index.astype(idt)), axis=axis)]
        for flag, v in ((return_index, index), (return_inverse, inverse),
                        (return_counts, counts)):
            if flag:
                outs.append(Array(v.astype(idt)))
        return outs[0] if len(outs) == 1 else tuple(outs)
    size = _known_size("unique", size, [ar],
                       lambda v: np.unique(v, equal_nan=equal_nan).size)
    x = lax.reshape(ar, (_aval(ar).size,))
    outs = _unique_traced(x, return_index, return_inverse, return_counts, equal_nan,
                          size, fill_value)
    if return_inverse:
        k = 1 + int(return_index)
        outs[k] = lax.reshape(outs[k], _aval(ar).shape)
    return outs[0] if len(outs) == 1 else tuple(outs)


def unique_values(x, /, *, size=None, fill_value=None):
    """Array API ``unique_values``: the sorted distinct values (NaNs distinct, as the
    Array API's unique_* functions treat them)."""
    return unique(x, size=size, fill_value=fill_value, equal_nan=False)


def unique_counts(x, /, *, size=None, fill_value=None):
    """Array API ``unique_counts``: (values, counts)."""
    v, c = unique(x, return_counts=True, size=size, fill_value=fill_value, equal_nan=False)
    return _UniqueCounts(v, c)


def unique_inverse(x, /, *, size=None, fill_value=None):
    """Array API ``unique_inverse``: (values, inverse_indices) with ``x``'s shape."""
    v, inv = unique(x, return_inverse=True, size=size, fill_value=fill_value,
                    equal_nan=False)
    return _UniqueInverse(v, inv)


def unique_all(x, /, *, size=None, fill_value=None):
    """Array API ``unique_all``: (values, indices, inverse_indices, counts)."""
    v, i, inv, c = unique(x, return_index=True, return_inverse=True, return_counts=True,
                          size=size, fill_value=fill_value, equal_nan=False)
    return _UniqueAll(v, i, inv, c)


from typing import NamedTuple  # noqa: E402


class _UniqueCounts(NamedTuple):
    values: object
    counts: object


class _UniqueInverse(NamedTuple):
    values: object
    inverse_indices: object


class _UniqueAll(NamedTuple):
    values: object
    indices: object
    inverse_indices: object
    counts: object


def isin(element, test_elements, assume_unique=False, invert=False, *, method="auto"):
    """``numpy.isin``: whether each element occurs in ``test_elements`` (by a sort of
    the test elements and a binary search; NaN is never found, as in NumPy)."""
    e = as_operand(element, "isin")
    t = as_operand(test_elements, "isin")
    e, t = promote_dtypes(e, t)
    t = lax.reshape(t, (_aval(t).size,))
    if _aval(t).size == 0:
        out = lax.full(_aval(e).shape, False, np.bool_)
    else:
        ts = lax.sort(t, dimension=0)
        idx = searchsorted(ts, e, side="left")
        found = _take1d(ts, idx)
        out = lax.bitwise_and(lax.lt(idx, lax.full((), _aval(t).size, _dt(idx))),
                              lax.eq(found, e))
    return lax.bitwise_not(out) if invert else out


def _set_result(fname, vals_np, size, fill_value, default_fill):
    if size is None:
        return Array(vals_np)
    size = operator.index(size)
    k = vals_np.shape[0]
    if k >= size:
        return Array(vals_np[:size])
    fv = default_fill(vals_np) if fill_value is None else fill_value
    return Array(np.concatenate([vals_np, np.full(size - k, fv, vals_np.dtype)]))


def _compact(vals, mask, size, fill):
    """The entries of 1-D ``vals`` where ``mask`` holds, in order, padded to ``size``."""
    pos, count = _kth_true(mask, size)
    return _fill(_take1d(vals, pos), count, size, fill)


def _min_fill(vals_np):
    return vals_np[0] if vals_np.size else 0


def _flat(x, fname):
    x = as_operand(x, fname)
    return lax.reshape(x, (_aval(x).size,))


def union1d(ar1, ar2, *, size=None, fill_value=None):
    """``numpy.union1d``: the sorted distinct values of both arrays (``size`` /
    ``fill_value`` under jit; the default fill is the smallest value)."""
    a, b = promote_dtypes(_flat(ar1, "union1d"), _flat(ar2, "union1d"))
    return unique(lax.concatenate([a, b], 0), size=size, fill_value=fill_value)


def intersect1d(ar1, ar2, assume_unique=False, return_indices=False, *, size=None,
                fill_value=None):
    """``numpy.intersect1d``: the sorted common values (and their first indices in each
    array with ``return_indices``; index fill is the array's length, as in JAX)."""
    a, b = promote_dtypes(_flat(ar1, "intersect1d"), _flat(ar2, "intersect1d"))
    av, bv = _concrete(a), _concrete(b)
    idt = _int_dtype()
    if av is not None and bv is not None:
        res = np.intersect1d(av, bv, assume_unique=assume_unique, return_indices=True)
        vals = _set_result("intersect1d", res[0], size, fill_value, _min_fill)
        if not return_indices:
            return vals
        i1 = _set_result("intersect1d", res[1].astype(idt), size, _aval(a).size, _min_fill)
        i2 = _set_result("intersect1d", res[2].astype(idt), size, _aval(b).size, _min_fill)
        return vals, i1, i2
    size = _known_size("intersect1d", size, [a, b], lambda u, v: np.intersect1d(u, v).size)
    na, nb = _aval(a).shape[0], _aval(b).shape[0]
    ua, ia, ca = unique(a, return_index=True, return_counts=True, size=na)
    ub, ib, cb = unique(b, return_index=True, return_counts=True, size=nb)
    # Fill entries of ua/ub (count 0) are not values of the arrays.
    real_a = lax.gt(ca, lax.full((), 0, _dt(ca)))
    real_b = lax.gt(cb, lax.full((), 0, _dt(cb)))
    mask = lax.bitwise_and(real_a, isin(ua, b))
    pos, count = _kth_true(mask, size)
    raw = _take1d(ua, pos)
    fill = _take1d(raw, lax.full((), 0, idt)) if fill_value is None else fill_value
    vals = _fill(raw, count, size, fill)
    if not return_indices:
        return vals
    i1 = _fill(_take1d(ia, pos), count, size, na)
    # Where each common value sits among b's unique values (fills sorted past them).
    pos_b = searchsorted(lax.select(real_b, ub, _max_like(ub)), raw)
    i2 = _fill(_take1d(ib, pos_b), count, size, nb)
    return vals, i1, i2


def _max_like(x):
    dt = _dt(x)
    if dtypes.is_inexact(dt):
        v = np.nan if not dtypes.is_complex(dt) else np.nan
    elif dt == np.bool_:
        v = True
    else:
        v = dtypes.iinfo(dt).max
    return lax.full_like(x, v)


def setdiff1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """``numpy.setdiff1d``: the sorted distinct values of ``ar1`` not in ``ar2``
    (``size``/``fill_value`` under jit; the default fill is 0, as in JAX)."""
    a0 = _flat(ar1, "setdiff1d")
    a, b = promote_dtypes(a0, _flat(ar2, "setdiff1d"))
    av, bv = _concrete(a), _concrete(b)
    if av is not None and bv is not None:
        # The values come from ar1: its dtype is kept (NumPy and JAX).
        res = np.setdiff1d(av, bv, assume_unique).astype(_dt(a0))
        return _set_result("setdiff1d", res, size, fill_value, lambda v: 0)
    size = _known_size("setdiff1d", size, [a, b], lambda u, v: np.setdiff1d(u, v).size)
    na = _aval(a).shape[0]
    ua, ca = unique(a, return_counts=True, size=na)
    mask = lax.bitwise_and(lax.gt(ca, lax.full((), 0, _dt(ca))), isin(ua, b, invert=True))
    out = _compact(ua, mask, size, 0 if fill_value is None else fill_value)
    return lax.convert_element_type(out, _dt(a0))


def setxor1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """``numpy.setxor1d``: the sorted values in exactly one of the arrays (default fill:
    the smallest value)."""
    a, b = promote_dtypes(_flat(ar1, "setxor1d"), _flat(ar2, "setxor1d"))
    av, bv = _concrete(a), _concrete(b)
    if av is not None and bv is not None:
        return _set_result("setxor1d", np.setxor1d(av, bv, assume_unique), size, fill_value,
                           _min_fill)
    size = _known_size("setxor1d", size, [a, b], lambda u, v: np.setxor1d(u, v).size)
    na, nb = _aval(a).shape[0], _aval(b).shape[0]
    ua, ca = unique(a, return_counts=True, size=na)
    ub, cb = unique(b, return_counts=True, size=nb)
    in_a = lax.bitwise_and(lax.gt(ca, lax.full((), 0, _dt(ca))), isin(ua, b, invert=True))
    in_b = lax.bitwise_and(lax.gt(cb, lax.full((), 0, _dt(cb))), isin(ub, a, invert=True))
    both = lax.concatenate([ua, ub], 0)
    mask = lax.concatenate([in_a, in_b], 0)
    # Sort the kept values (dropped ones last), then compact.
    s_vals, s_mask = _sort_masked(both, mask)
    fill = fill_value
    if fill is None:
        fill = _take1d(s_vals, lax.full((), 0, _int_dtype()))
    return _compact(s_vals, s_mask, size, fill)


def _sort_masked(vals, mask):
    """``vals`` sorted with the masked-out entries last (mask permuted alike)."""
    key = lax.convert_element_type(lax.bitwise_not(mask), np.int8)
    k, v, m = lax.sort([key, vals, mask], dimension=0, num_keys=2)
    return v, m


# ====================================== histograms =======================================

def bincount(x, weights=None, minlength=0, *, length=None):
    """``numpy.bincount``: counts (or summed ``weights``) of each non-negative integer.
    The output length is max(x) + 1 (at least ``minlength``) eagerly; under jit pass
    ``length`` (as in JAX: negative values count as 0, values >= length are dropped)."""
    x = as_operand(x, "bincount")
    if not (dtypes.is_integer(_dt(x)) or _dt(x) == np.bool_):
        raise TypeError(f"bincount: x must be an integer array, got {_dt(x).name}")
    if _aval(x).ndim != 1:
        raise ValueError(f"bincount: x must be 1-D, got shape {_aval(x).shape}")
    minlength = operator.index(minlength)
    if minlength < 0:
        raise ValueError("bincount: minlength must be non-negative")
    if length is None:
        xv = _concrete(x)
        if xv is None:
            raise ConcretizationTypeError(x, "in bincount: the output length max(x) + 1 "
                                             "depends on the values; pass length= under "
                                             "jit/vmap")
        if xv.size and xv.min() < 0:
            raise ValueError("bincount: x must contain only non-negative values")
        length = builtins.max(minlength, int(xv.max()) + 1 if xv.size else 0)
    length = operator.index(length)
    idt = _int_dtype()
    if weights is None:
        upd = lax.full(_aval(x).shape, 1, idt)
        out_dt = idt
    else:
        w = as_operand(weights, "bincount")
        if _aval(w).shape != _aval(x).shape:
            raise ValueError(f"bincount: weights shape {_aval(w).shape} must match x shape "
                             f"{_aval(x).shape}")
        (w,) = promote_dtypes(w)
        out_dt = dtypes.result_type(_dt(w), dtypes.default_float_dtype()) if not \
            dtypes.is_inexact(_dt(w)) else _dt(w)
        upd = lax.convert_element_type(w, out_dt)
    idx = lax.max(lax.convert_element_type(x, idt), lax.full((), 0, idt))
    dn = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                     scatter_dims_to_operand_dims=(0,))
    return lax.scatter_add(lax.full((length,), 0, out_dt), lax.expand_dims(idx, (1,)), upd,
                           dn, mode="drop")


def _bin_edges(a, bins, range, weights, fname):
    """Bin edges as an Array (``bins`` an int count or a 1-D array of edges)."""
    from tracer.numpy.creation import linspace
    if isinstance(bins, str):
        raise NotImplementedError(f"{fname}: string bin estimators ({bins!r}) are not "
                                  f"supported; pass a number of bins or the edges")
    if isinstance(bins, (int, np.integer)):
        nb = operator.index(bins)
        if nb < 1:
            raise ValueError(f"{fname}: bins must be a positive integer, got {nb}")
        if range is None:
            if _aval(a).size == 0:
                lo = lax.full((), 0, _dt(a))
                hi = lax.full((), 1, _dt(a))
            else:
                lo = lax.reduce_min(a, tuple(builtins.range(_aval(a).ndim)))
                hi = lax.reduce_max(a, tuple(builtins.range(_aval(a).ndim)))
        else:
            lo, hi = (lax.convert_element_type(as_operand(v), _dt(a)) for v in range)
            lv, hv = _concrete(lo), _concrete(hi)
            if lv is not None and hv is not None and lv > hv:
                raise ValueError(f"{fname}: max must be larger than min in range parameter")
        # Equal ends widen by 0.5 each way (NumPy).
        eq = lax.eq(lo, hi)
        half = lax.full((), 0.5, _dt(a))
        lo = lax.select(eq, lax.sub(lo, half), lo)
        hi = lax.select(eq, lax.add(hi, half), hi)
        return linspace(lo, hi, nb + 1, dtype=_dt(a))
    e = as_operand(bins, fname)
    if _aval(e).ndim != 1:
        raise ValueError(f"{fname}: bins must be 1-D, got shape {_aval(e).shape}")
    return lax.convert_element_type(e, dtypes.result_type(_dt(e), _dt(a)))


def histogram_bin_edges(a, bins=10, range=None, weights=None):
    """``numpy.histogram_bin_edges`` (integer ``bins`` or explicit edges)."""
    a = as_operand(a, "histogram_bin_edges")
    (a,) = promote_dtypes_inexact(a)
    return _bin_edges(lax.reshape(a, (_aval(a).size,)), bins, range, weights,
                      "histogram_bin_edges")


def _bin_index(a, edges):
    """The bin of each value: edges[i] <= a < edges[i+1], the last bin closed; -1 / nbins
    outside (dropped by the scatter)."""
    nb = _aval(edges).shape[0] - 1
    idx = lax.sub(searchsorted(edges, a, side="right"), lax.full((), 1, _int_dtype()))
    last = lax.index_in_dim(edges, nb, 0, False)
    on_last = lax.eq(a, lax.broadcast_in_dim(last, _aval(a).shape, ()))
    idx = lax.select(on_last, lax.full_like(idx, nb - 1), idx)
    out = lax.bitwise_or(lax.lt(idx, lax.full((), 0, _dt(idx))),
                         lax.ge(idx, lax.full((), nb, _dt(idx))))
    return lax.select(out, lax.full_like(idx, nb), idx)


def histogram(a, bins=10, range=None, weights=None, density=None):
    """``numpy.histogram``: (counts, edges); ``weights`` sum instead of counting,
    ``density`` normalises to a probability density."""
    a = as_operand(a, "histogram")
    (a,) = promote_dtypes_inexact(a)
    a = lax.reshape(a, (_aval(a).size,))
    edges = _bin_edges(a, bins, range, weights, "histogram")
    nb = _aval(edges).shape[0] - 1
    idx = _bin_index(a, edges)
    if weights is not None:
        w = as_operand(weights, "histogram")
        if _aval(w).size != _aval(a).size:
            raise ValueError(f"histogram: weights should have the same shape as a, got "
                             f"{_aval(w).shape}")
        w = lax.reshape(w, (_aval(w).size,))
    counts = bincount(idx, weights if weights is None else w, length=nb)
    if density:
        from tracer.numpy.ufuncs import true_divide
        widths = lax.sub(lax.slice_in_dim(edges, 1, nb + 1, 1, 0),
                         lax.slice_in_dim(edges, 0, nb, 1, 0))
        total = lax.reduce_sum(counts, (0,))
        counts = true_divide(true_divide(counts, total), widths)
    return counts, edges


def histogramdd(sample, bins=10, range=None, weights=None, density=None):
    """``numpy.histogramdd``: the D-dimensional histogram of N points (an (N, D) array):
    (counts of shape bins, list of edges)."""
    s = as_operand(sample, "histogramdd")
    (s,) = promote_dtypes_inexact(s)
    if _aval(s).ndim == 1:
        s = lax.reshape(s, (_aval(s).shape[0], 1))
    if _aval(s).ndim != 2:
        raise ValueError(f"histogramdd: sample must be (N, D), got shape {_aval(s).shape}")
    N, D = _aval(s).shape
    if isinstance(bins, (int, np.integer)):
        bins = [bins] * D
    if len(bins) != D:
        raise ValueError(f"histogramdd: the dimension of bins ({len(bins)}) must equal the "
                         f"dimension of the sample ({D})")
    ranges = [None] * D if range is None else list(range)
    edges, idxs, nbs = [], [], []
    for d in builtins.range(D):
        col = lax.index_in_dim(s, d, 1, False)
        e = _bin_edges(col, bins[d], ranges[d], None, "histogramdd")
        edges.append(e)
        nbs.append(_aval(e).shape[0] - 1)
        idxs.append(_bin_index(col, e))
    idt = _int_dtype()
    flat = lax.full((N,), 0, idt)
    outside = lax.full((N,), False, np.bool_)
    for d in builtins.range(D):
        outside = lax.bitwise_or(outside, lax.eq(idxs[d], lax.full((), nbs[d], idt)))
        flat = lax.add(lax.mul(flat, lax.full((), nbs[d], idt)), idxs[d])
    total = int(np.prod(nbs))
    flat = lax.select(outside, lax.full_like(flat, total), flat)
    w = None
    if weights is not None:
        w = lax.reshape(as_operand(weights), (N,))
    counts = bincount(flat, w, length=total)
    if not dtypes.is_inexact(_dt(counts)):
        counts = lax.convert_element_type(counts, dtypes.default_float_dtype())
    counts = lax.reshape(counts, tuple(nbs))
    if density:
        from tracer.numpy.ufuncs import true_divide
        counts = true_divide(counts, lax.reduce_sum(counts, tuple(builtins.range(D))))
        for d in builtins.range(D):
            e = edges[d]
            wd = lax.sub(lax.slice_in_dim(e, 1, nbs[d] + 1, 1, 0),
                         lax.slice_in_dim(e, 0, nbs[d], 1, 0))
            counts = true_divide(counts, lax.broadcast_in_dim(wd, tuple(nbs), (d,)))
    return counts, edges


def histogram2d(x, y, bins=10, range=None, weights=None, density=None):
    """``numpy.histogram2d``: (counts, x edges, y edges)."""
    from tracer.numpy.manipulation import stack
    x, y = as_operand(x, "histogram2d"), as_operand(y, "histogram2d")
    x, y = promote_dtypes_inexact(x, y)
    if not isinstance(bins, (int, np.integer)) and len(bins) == 2 and not (
            hasattr(bins, "aval") or isinstance(bins, np.ndarray) and bins.ndim == 1):
        b = list(bins)
    elif isinstance(bins, (int, np.integer)):
        b = [bins, bins]
    else:
        b = [bins, bins]
    counts, edges = histogramdd(stack([x, y], axis=1), b, range, weights, density)
    return counts, edges[0], edges[1]
