"""NumPy indexing on Arrays and tracers (``x[idx]``).

Static indices (Python ints, slices with steps, None, Ellipsis) lower to lax.slice, rev,
reshape and broadcast_in_dim. Integer-array, boolean-mask and traced-integer indices are
dispatched to ``advanced_getitem`` (gather), installed by the indexing family."""
from __future__ import annotations

import operator

import numpy as np

import lax
from tracer.core import Array, Tracer, get_aval


def _is_static_int(i):
    return isinstance(i, (int, np.integer)) and not isinstance(i, bool)


def _is_basic(i):
    return i is None or i is Ellipsis or isinstance(i, slice) or _is_static_int(i)


def _normalize_index(idx):
    if not isinstance(idx, tuple):
        idx = (idx,)
    return idx


def _slice_ok(s):
    for v in (s.start, s.stop, s.step):
        if v is not None and not _is_static_int(v):
            if isinstance(v, (Tracer, Array)) and getattr(v, "ndim", 1) == 0:
                return False
            raise TypeError(f"slice indices must be integers or None, got {type(v).__name__}")
    return True


advanced_getitem = None  # set by tracer.numpy.advanced_indexing


def getitem(x, idx):
    """``x[idx]`` with NumPy semantics (see module docstring)."""
    idx = _normalize_index(idx)
    if all(_is_basic(i) and (not isinstance(i, slice) or _slice_ok(i)) for i in idx):
        return _basic_getitem(x, idx)
    if advanced_getitem is None:
        raise NotImplementedError("advanced (array) indexing is not available")
    return advanced_getitem(x, idx)


def expand_ellipsis(idx, ndim):
    n_ell = sum(1 for i in idx if i is Ellipsis)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    n_real = sum(1 for i in idx if i is not None and i is not Ellipsis and
                 not (_is_bool_array(i)))
    n_real += sum(get_aval(i).ndim for i in idx if _is_bool_array(i))
    if n_real > ndim:
        raise IndexError(f"too many indices for array: array is {ndim}-dimensional, but "
                         f"{n_real} were indexed")
    if n_ell:
        k = idx.index(Ellipsis)
        return idx[:k] + (slice(None),) * (ndim - n_real) + idx[k + 1:]
    return idx + (slice(None),) * (ndim - n_real)


def _is_bool_array(i):
    if isinstance(i, (bool, np.bool_)):
        return False
    try:
        return get_aval(i).dtype == np.bool_ if not isinstance(i, (slice, type(None))) and \
            i is not Ellipsis else False
    except TypeError:
        return False


def _basic_getitem(x, idx):
    shape = get_aval(x).shape
    idx = expand_ellipsis(idx, len(shape))
    starts, limits, strides, revs, squeeze_dims, out_shape_with_new = [], [], [], [], [], []
    dim = 0
    new_axes = []
    out_pos = 0
    for i in idx:
        if i is None:
            new_axes.append(out_pos)
            out_pos += 1
            continue
        n = shape[dim]
        if _is_static_int(i):
            k = operator.index(i)
            if not -n <= k < n:
                raise IndexError(f"index {k} is out of bounds for axis {dim} with size {n}")
            k %= n
            starts.append(k)
            limits.append(k + 1)
            strides.append(1)
            squeeze_dims.append(dim)
        else:
            start, stop, step = i.indices(n)
            if step < 0:
                revs.append(dim)
                count = len(range(start, stop, step))
                start = n - 1 - start
                step = -step
                stop = start + (count - 1) * step + 1 if count else start
            else:
                count = len(range(start, stop, step))
                stop = start + (count - 1) * step + 1 if count else start
            starts.append(start)
            limits.append(stop)
            strides.append(step)
            out_pos += 1
        dim += 1
    out = x
    if revs:
        out = lax.rev(out, tuple(revs))
    out = lax.slice(out, starts, limits, strides)
    if squeeze_dims:
        out = lax.squeeze(out, squeeze_dims)
    if new_axes:
        out = lax.expand_dims(out, new_axes)
    return out
