"""Index-based functions of tracer.numpy: take, take_along_axis, put_along_axis, put, place,
nonzero, flatnonzero, argwhere, compress, extract, choose, select.

Out-of-range indices follow jax.numpy: ``take``/``take_along_axis`` return ``fill_value``
for them by default (NaN for inexact dtypes, the minimum signed / maximum unsigned integer,
True for bool), after wrapping negative indices once; ``put*`` drop them.

Functions whose output size depends on data (nonzero, flatnonzero, argwhere, compress,
extract) run eagerly on concrete values; under jit/vmap they need JAX's static ``size=``
(results truncated or padded with ``fill_value``) and raise ConcretizationTypeError
without it.
"""
from __future__ import annotations

import builtins
import operator

import numpy as np

import lax
from tracer import dtypes
from tracer.core import Array, Tracer, get_aval
from tracer.errors import ConcretizationTypeError
from tracer.numpy.util import as_operand, broadcast_shapes, broadcast_to_shape


def _axis(axis, ndim, fname):
    try:
        axis = operator.index(axis)
    except TypeError:
        raise TypeError(f"{fname}: axis must be an int or None, got {axis!r}") from None
    if not -ndim <= axis < builtins.max(ndim, 1):
        raise np.exceptions.AxisError(f"{fname}: axis {axis} is out of bounds for an array "
                                      f"of dimension {ndim}")
    return axis % builtins.max(ndim, 1)


def _int_operand(x, fname, what="indices"):
    if isinstance(x, (list, tuple)) and np.asarray(x).size == 0:
        x = np.zeros(np.shape(x), dtypes.default_int_dtype())  # [] indexes nothing
    x = as_operand(x, fname)
    dt = get_aval(x).dtype
    if not dtypes.is_integer(dt):
        raise TypeError(f"{fname}: {what} must have an integer dtype, got {dt.name} with "
                        f"shape {get_aval(x).shape}")
    return x


def _concrete(x):
    if isinstance(x, Tracer):
        v = x.to_concrete_value()
        return None if v is None else np.asarray(v)
    if isinstance(x, Array):
        return x._value
    return np.asarray(x)


def _wrap_negative(idx, n):
    dt = get_aval(idx).dtype
    if dtypes.is_unsigned_integer(dt):
        return idx
    return lax.select(lax.lt(idx, Array(np.zeros((), dt))),
                      lax.add(idx, Array(np.asarray(n, dt))), idx)


def _index_as_default_int(idx):
    dt = dtypes.default_int_dtype()
    if get_aval(idx).dtype == dt:
        return idx
    c = idx._value if isinstance(idx, Array) else None
    if c is not None:
        return Array(c.astype(dt))
    return lax.convert_element_type(idx, dt)


def _take_mode(mode, fname):
    if mode is None or mode == "fill":
        return lax.GatherScatterMode.FILL_OR_DROP
    if mode == "clip":
        return lax.GatherScatterMode.CLIP
    if mode == "promise_in_bounds":
        return lax.GatherScatterMode.PROMISE_IN_BOUNDS
    if isinstance(mode, lax.GatherScatterMode):
        return mode
    raise ValueError(f"{fname}: invalid mode {mode!r}; use 'fill' (default), 'clip', 'wrap', "
                     "'raise' or 'promise_in_bounds'")


# ========================================= take =========================================

def take(a, indices, axis=None, out=None, mode=None, unique_indices=False,
         indices_are_sorted=False, fill_value=None):
    """``numpy.take`` with jax.numpy's modes: elements of ``a`` at ``indices`` along
    ``axis`` (of the flattened ``a`` when None). Result shape
    ``a.shape[:axis] + indices.shape + a.shape[axis+1:]``.

    mode: None/'fill' (default) returns ``fill_value`` for out-of-range indices after
    wrapping negative ones once; 'clip' clamps into range (negative -> 0, as NumPy);
    'wrap' takes indices modulo the axis length; 'raise' raises IndexError (concrete
    indices only); 'promise_in_bounds' trusts the caller.
    """
    fname = "take"
    if out is not None:
        raise NotImplementedError("take: the 'out' argument is not supported (arrays are "
                                  "immutable); use the return value")
    a = as_operand(a, fname)
    indices = _index_as_default_int(_int_operand(indices, fname))
    if axis is None:
        a = lax.reshape(a, (get_aval(a).size,))
        axis = 0
    shape = get_aval(a).shape
    axis = _axis(axis, len(shape), fname)
    n = shape[axis]
    ishape = get_aval(indices).shape
    out_shape = shape[:axis] + ishape + shape[axis + 1:]
    if mode == "raise":
        c = _concrete(indices)
        if c is None:
            raise NotImplementedError(
                "take: mode='raise' needs concrete indices (it cannot raise inside jit); use "
                "mode='fill', 'clip' or 'wrap'")
        if c.size and (c.min() < -n or c.max() >= n):
            raise IndexError(f"take: index {int(c.min() if c.min() < -n else c.max())} is out "
                             f"of bounds for axis {axis} with size {n}")
        indices, gmode = _wrap_negative(indices, n), lax.GatherScatterMode.PROMISE_IN_BOUNDS
    elif mode == "wrap":
        if n == 0 and get_aval(indices).size:
            raise IndexError("take: cannot take from an empty axis with mode='wrap'")
        if n:
            from tracer.numpy.ufuncs import mod
            indices = mod(indices, n)
        gmode = lax.GatherScatterMode.PROMISE_IN_BOUNDS
    else:
        gmode = _take_mode(mode, fname)
        if gmode == lax.GatherScatterMode.FILL_OR_DROP:
            indices = _wrap_negative(indices, n)
    if n == 0:
        if get_aval(indices).size:
            raise IndexError(f"take: cannot take {ishape} indices from the empty axis {axis} "
                             f"of an array of shape {shape}")
        return lax.full(out_shape, 0, get_aval(a).dtype)
    if int(np.prod(out_shape, dtype=np.int64)) == 0:
        return lax.full(out_shape, 0, get_aval(a).dtype)
    k = len(ishape)
    dn = lax.GatherDimensionNumbers(
        offset_dims=tuple(range(axis)) + tuple(range(axis + k, len(shape) + k - 1)),
        collapsed_slice_dims=(axis,), start_index_map=(axis,))
    sizes = tuple(1 if d == axis else s for d, s in enumerate(shape))
    return lax.gather(a, lax.expand_dims(indices, (k,)), dn, sizes, mode=gmode,
                      fill_value=fill_value, unique_indices=unique_indices,
                      indices_are_sorted=indices_are_sorted)


def _along_axis_shapes(arr_shape, idx_shape, axis, fname):
    if len(arr_shape) != len(idx_shape):
        raise ValueError(f"{fname}: indices and arr must have the same number of "
                         f"dimensions; got indices shape {idx_shape} and arr shape "
                         f"{arr_shape}")
    a1 = tuple(1 if d == axis else s for d, s in enumerate(arr_shape))
    try:
        return broadcast_shapes(a1, idx_shape, fname=fname)
    except ValueError:
        raise ValueError(f"{fname}: indices of shape {idx_shape} do not broadcast against arr "
                         f"of shape {arr_shape} outside axis {axis}") from None


def take_along_axis(arr, indices, axis=-1, mode=None, fill_value=None):
    """``numpy.take_along_axis``: ``out[..., i, ...] = arr[..., indices[..., i, ...], ...]``
    along ``axis`` (flattened ``arr`` and 1-D ``indices`` when None), the other dimensions
    broadcast. One gather with batching dimensions. ``mode``/``fill_value`` as ``take``
    (default 'fill'; negative indices wrap once unless 'promise_in_bounds')."""
    fname = "take_along_axis"
    a = as_operand(arr, fname)
    indices = _index_as_default_int(_int_operand(indices, fname))
    if axis is None:
        if get_aval(indices).ndim != 1:
            raise ValueError(f"{fname}: indices must be 1-D when axis=None, got shape "
                             f"{get_aval(indices).shape}")
        a = lax.reshape(a, (get_aval(a).size,))
        axis = 0
    shape = get_aval(a).shape
    axis = _axis(axis, len(shape), fname)
    idx_shape = get_aval(indices).shape
    out_shape = _along_axis_shapes(shape, idx_shape, axis, fname)
    n = shape[axis]
    gmode = _take_mode(mode, fname)
    if n == 0 or int(np.prod(out_shape, dtype=np.int64)) == 0:
        return lax.full(out_shape, 0, get_aval(a).dtype)
    if gmode != lax.GatherScatterMode.PROMISE_IN_BOUNDS:
        indices = _wrap_negative(indices, n)
    indices = broadcast_to_shape(indices, out_shape)
    # Dimensions where arr is full size pair up with the indices' (batching dims); where
    # arr has size 1 it is read at 0 (a collapsed dim without an index column).
    batching_dims = tuple(d for d in range(len(shape)) if d != axis and shape[d] != 1)
    if any(shape[d] != out_shape[d] for d in batching_dims):
        a = broadcast_to_shape(a, tuple(out_shape[d] if d != axis else n
                                        for d in range(len(shape))))
    collapsed = tuple(d for d in range(len(shape)) if d not in batching_dims)
    dn = lax.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=collapsed,
                                    start_index_map=(axis,),
                                    operand_batching_dims=batching_dims,
                                    start_indices_batching_dims=batching_dims)
    return lax.gather(a, lax.expand_dims(indices, (len(shape),)), dn, (1,) * len(shape),
                      mode=gmode, fill_value=fill_value)


def put_along_axis(arr, indices, values, axis, inplace=True, *, mode=None):
    """``numpy.put_along_axis`` returning the updated array (jax.numpy's form: pass
    ``inplace=False``, arrays are immutable). ``values`` broadcast to the indices' shape;
    negative indices wrap once; ``mode``: None/'drop' drops out-of-range updates, 'clip'
    clamps them; with repeated indices the last update wins."""
    fname = "put_along_axis"
    if inplace:
        raise ValueError(f"{fname}: arrays are immutable and cannot be modified in place; "
                         "pass inplace=False and use the returned array")
    a = as_operand(arr, fname)
    indices = _index_as_default_int(_int_operand(indices, fname))
    if axis is None:
        if get_aval(indices).ndim != 1:
            raise ValueError(f"{fname}: indices must be 1-D when axis=None, got shape "
                             f"{get_aval(indices).shape}")
        flat = put_along_axis(lax.reshape(a, (get_aval(a).size,)), indices, values, 0,
                              inplace=False, mode=mode)
        return lax.reshape(flat, get_aval(a).shape)
    shape = get_aval(a).shape
    axis = _axis(axis, len(shape), fname)
    idx_shape = get_aval(indices).shape
    bshape = _along_axis_shapes(shape, idx_shape, axis, fname)
    full_shape = tuple(idx_shape[axis] if d == axis else shape[d] for d in range(len(shape)))
    if any(bshape[d] != full_shape[d] for d in range(len(shape)) if d != axis):
        raise ValueError(f"{fname}: indices of shape {idx_shape} do not match arr of shape "
                         f"{shape} outside axis {axis}")
    if int(np.prod(full_shape, dtype=np.int64)) == 0 or shape[axis] == 0:
        return a
    indices = broadcast_to_shape(_wrap_negative(indices, shape[axis]), full_shape)
    vals = as_operand(values, fname)
    if get_aval(vals).dtype != get_aval(a).dtype:
        vals = lax.convert_element_type(vals, get_aval(a).dtype)
    try:
        vals = broadcast_to_shape(vals, full_shape)
    except ValueError:
        raise ValueError(f"{fname}: values of shape {get_aval(vals).shape} do not broadcast "
                         f"to the indices' shape {full_shape}") from None
    others = tuple(d for d in range(len(shape)) if d != axis)
    dn = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(axis,),
                                     scatter_dims_to_operand_dims=(axis,),
                                     operand_batching_dims=others,
                                     scatter_indices_batching_dims=others)
    return lax.scatter(a, lax.expand_dims(indices, (len(shape),)), vals, dn,
                       mode="clip" if mode == "clip" else None)


def put(a, ind, v, mode=None, *, inplace=True):
    """``numpy.put`` returning the updated array (pass ``inplace=False``): the flattened
    ``a`` gets ``v`` (repeated to the number of indices) at ``ind``. mode: None (drop
    out-of-range indices), 'clip', 'wrap'."""
    fname = "put"
    if inplace:
        raise ValueError(f"{fname}: arrays are immutable and cannot be modified in place; "
                         "pass inplace=False and use the returned array")
    a = as_operand(a, fname)
    ind = _index_as_default_int(_int_operand(ind, fname))
    ind = lax.reshape(ind, (get_aval(ind).size,))
    vals = as_operand(v, fname)
    vals = lax.reshape(vals, (get_aval(vals).size,))
    size = get_aval(a).size
    k = get_aval(ind).shape[0]
    if size == 0 or k == 0 or get_aval(vals).shape[0] == 0:
        return a
    reps = -(-k // get_aval(vals).shape[0])
    vals = lax.slice(lax.tile(vals, (reps,)), (0,), (k,))
    flat = lax.reshape(a, (size,))
    if mode == "wrap":
        from tracer.numpy.ufuncs import mod
        ind, smode = mod(ind, size), "clip"
    elif mode == "clip":
        smode = "clip"
    elif mode is None:
        ind, smode = _wrap_negative(ind, size), None
    else:
        raise ValueError(f"{fname}: mode must be None, 'clip' or 'wrap', got {mode!r} "
                         "('raise' cannot be checked inside jit)")
    if get_aval(vals).dtype != get_aval(a).dtype:
        vals = lax.convert_element_type(vals, get_aval(a).dtype)
    dn = lax.ScatterDimensionNumbers((), (0,), (0,))
    out = lax.scatter(flat, lax.reshape(ind, (k, 1)), vals, dn, mode=smode)
    return lax.reshape(out, get_aval(a).shape)


def place(arr, mask, vals, *, inplace=True):
    """``numpy.place`` returning the updated array (pass ``inplace=False``): the positions
    where ``mask`` is true get the values of ``vals`` in order, repeated as needed. Needs a
    concrete mask."""
    fname = "place"
    if inplace:
        raise ValueError(f"{fname}: arrays are immutable and cannot be modified in place; "
                         "pass inplace=False and use the returned array")
    a = as_operand(arr, fname)
    m = as_operand(mask, fname)
    mv = _concrete(m)
    if mv is None:
        raise ConcretizationTypeError(m, "used as the mask of place (its number of true "
                                         "entries decides the shape); use tnp.where instead")
    if mv.shape != get_aval(a).shape:
        raise ValueError(f"{fname}: mask shape {mv.shape} must equal the array shape "
                         f"{get_aval(a).shape}")
    (pos,) = np.nonzero(mv.ravel())
    if pos.size == 0:
        return a
    vals = as_operand(vals, fname)
    if get_aval(vals).size == 0:
        raise ValueError(f"{fname}: cannot place from an empty vals into {pos.size} positions")
    return put(a, Array(pos.astype(dtypes.default_int_dtype())), vals, inplace=False)


# ==================================== nonzero & co =======================================

def _prefix_count(x):
    """Inclusive running sum along the only axis (log-step recursive doubling)."""
    n = get_aval(x).shape[0]
    zero = Array(np.zeros((), get_aval(x).dtype))
    k = 1
    while k < n:
        x = lax.add(x, lax.pad(x, zero, ((k, -k, 0),)))
        k *= 2
    return x


def _fill_values(fill_value, ndim, fname):
    if fill_value is None:
        return [0] * ndim
    if isinstance(fill_value, (tuple, list)):
        if len(fill_value) != ndim:
            raise ValueError(f"{fname}: fill_value tuple needs one entry per dimension "
                             f"({ndim}), got {len(fill_value)}")
        vals = list(fill_value)
    else:
        vals = [fill_value] * ndim
    out = []
    for v in vals:
        if get_aval(v).shape != ():
            raise ValueError(f"{fname}: fill_value must be a scalar or a tuple of scalars, "
                             f"got shape {get_aval(v).shape}")
        out.append(v)
    return out


def nonzero(a, *, size=None, fill_value=None):
    """``numpy.nonzero``: a tuple of index arrays (default int dtype), one per dimension,
    of the nonzero elements in row-major order.

    ``size`` (static int): return exactly ``size`` indices, truncated or padded with
    ``fill_value`` (default 0; a scalar or one per dimension). Needed under jit/vmap
    (ConcretizationTypeError without it). ValueError for 0-d input, as NumPy.
    """
    fname = "nonzero"
    a = as_operand(a, fname)
    aval = get_aval(a)
    if aval.ndim == 0:
        raise ValueError("nonzero: calling nonzero on a 0-d array is not allowed; use "
                         "tnp.atleast_1d(a).nonzero()")
    idt = dtypes.default_int_dtype()
    fills = _fill_values(fill_value, aval.ndim, fname)
    if size is not None:
        size = operator.index(size)
        if size < 0:
            raise ValueError(f"{fname}: size must be >= 0, got {size}")
    c = _concrete(a)
    if c is not None:
        res = [r.astype(idt) for r in np.nonzero(c)]
        if size is None:
            return tuple(Array(r) for r in res)
        out = []
        for r, f in zip(res, fills):
            r = r[:size]
            if r.shape[0] < size:
                fv = _concrete(as_operand(f, fname))
                if fv is None:
                    raise ConcretizationTypeError(f, "used as the fill_value of nonzero")
                r = np.concatenate([r, np.full(size - r.shape[0], fv, idt)])
            out.append(Array(r))
        return tuple(out)
    if size is None:
        raise ConcretizationTypeError(
            a, "passed to nonzero (or argwhere, flatnonzero, compress, extract, boolean "
               "indexing) without size=: the number of results depends on the values. "
               "Pass a static size=N (results are truncated or padded with fill_value)")
    n = aval.size
    flat = lax.reshape(a, (n,))
    mask = lax.ne(flat, Array(np.zeros((), aval.dtype)))
    if n == 0 or size == 0:
        return tuple(lax.broadcast_in_dim(_as_idt(f, idt), (size,), ()) for f in fills)
    pos = lax.sub(_prefix_count(lax.convert_element_type(mask, idt)), Array(np.ones((), idt)))
    # Positions of false entries (and true ones past ``size``) are out of range: dropped.
    target = lax.select(mask, pos, lax.full((n,), size, idt))
    sentinel = lax.full((size,), n, idt)
    dn = lax.ScatterDimensionNumbers((), (0,), (0,))
    flat_idx = lax.scatter(sentinel, lax.reshape(target, (n, 1)), lax.iota(idt, n), dn,
                           mode="drop")
    missing = lax.eq(flat_idx, Array(np.asarray(n, idt)))
    out = []
    rem = flat_idx
    strides = [int(np.prod(aval.shape[d + 1:], dtype=np.int64)) for d in range(aval.ndim)]
    for d, st in enumerate(strides):
        coord = lax.div(rem, Array(np.asarray(st, idt)))
        rem = lax.rem(rem, Array(np.asarray(st, idt)))
        f = lax.broadcast_in_dim(_as_idt(fills[d], idt), (size,), ())
        out.append(lax.select(missing, f, coord))
    return tuple(out)


def _as_idt(v, idt):
    v = as_operand(v, "nonzero fill_value")
    return v if get_aval(v).dtype == idt else lax.convert_element_type(v, idt)


def flatnonzero(a, *, size=None, fill_value=None):
    """``numpy.flatnonzero``: indices of the nonzero elements of the flattened ``a``
    (``size``/``fill_value`` as ``nonzero``)."""
    a = as_operand(a, "flatnonzero")
    return nonzero(lax.reshape(a, (get_aval(a).size,)), size=size,
                   fill_value=fill_value)[0]


def argwhere(a, *, size=None, fill_value=None):
    """``numpy.argwhere``: the indices of the nonzero elements as rows, shape
    ``(N, a.ndim)`` (``size``/``fill_value`` as ``nonzero``; a 0-d ``a`` gives
    ``(N, 0)``)."""
    a = as_operand(a, "argwhere")
    nd = get_aval(a).ndim
    cols = nonzero(a if nd else lax.reshape(a, (1,)), size=size, fill_value=fill_value)
    res = lax.concatenate([lax.expand_dims(c, (1,)) for c in cols], 1)
    if nd == 0:
        res = lax.slice(res, (0, 0), (get_aval(res).shape[0], 0))
    return res


def compress(condition, a, axis=None, *, size=None, fill_value=0, out=None):
    """``numpy.compress``: the slices of ``a`` along ``axis`` (flattened when None) where
    the 1-D ``condition`` is true; a shorter condition counts as false beyond its end.
    ``size``/``fill_value``: a static number of slices, padded with ``fill_value``."""
    fname = "compress"
    if out is not None:
        raise NotImplementedError(f"{fname}: the 'out' argument is not supported")
    a = as_operand(a, fname)
    cond = as_operand(condition, fname)
    if get_aval(cond).ndim != 1:
        raise ValueError(f"{fname}: condition must be 1-D, got shape {get_aval(cond).shape}")
    if get_aval(cond).dtype != np.bool_:
        cond = lax.ne(cond, Array(np.zeros((), get_aval(cond).dtype)))
    if axis is None:
        a = lax.reshape(a, (get_aval(a).size,))
        axis = 0
    shape = get_aval(a).shape
    axis = _axis(axis, len(shape), fname)
    n, m = shape[axis], get_aval(cond).shape[0]
    if m > n:
        extra = _concrete(lax.slice(cond, (n,), (m,)))
        if extra is not None and extra.any():
            raise IndexError(f"{fname}: condition of length {m} selects index >= {n}, out of "
                             f"bounds for axis {axis} of shape {shape}")
        cond = lax.slice(cond, (0,), (n,))
    (idx,) = nonzero(cond, size=size, fill_value=n)
    if size is None:
        return take(a, idx, axis=axis, mode="clip") if get_aval(idx).shape[0] else \
            lax.full(shape[:axis] + (0,) + shape[axis + 1:], 0, get_aval(a).dtype)
    if n == 0:
        return lax.full(shape[:axis] + (size,) + shape[axis + 1:], fill_value,
                        get_aval(a).dtype)
    return take(a, idx, axis=axis, mode="fill", fill_value=fill_value)


def extract(condition, arr, *, size=None, fill_value=0):
    """``numpy.extract``: the elements of ``arr`` where ``condition`` is nonzero, both
    flattened (``size``/``fill_value`` as ``compress``)."""
    cond = as_operand(condition, "extract")
    arr = as_operand(arr, "extract")
    return compress(lax.reshape(cond, (get_aval(cond).size,)),
                    lax.reshape(arr, (get_aval(arr).size,)), size=size, fill_value=fill_value)


# =================================== choose & select ====================================

def choose(a, choices, out=None, mode="raise"):
    """``numpy.choose``: ``choices[a[i]][i]`` with ``a`` and every choice broadcast
    together. mode: 'raise' (default; concrete ``a`` only, IndexError when out of
    range), 'wrap' (modulo the number of choices) or 'clip' (clamped)."""
    fname = "choose"
    if out is not None:
        raise NotImplementedError(f"{fname}: the 'out' argument is not supported")
    from tracer.numpy.util import promote_dtypes
    a = _int_operand(a, fname, "the index array a")
    if isinstance(choices, (Array, Tracer, np.ndarray)):
        choices = [choices[i] for i in range(get_aval(choices).shape[0])]
    choices = list(choices)
    n = len(choices)
    if n == 0:
        raise ValueError(f"{fname}: choices must not be empty")
    if mode == "raise":
        c = _concrete(a)
        if c is None:
            raise ConcretizationTypeError(
                a, "passed to choose with mode='raise' (it cannot raise inside jit); use "
                   "mode='wrap' or mode='clip'")
        if c.size and (c.min() < 0 or c.max() >= n):
            raise IndexError(f"{fname}: index array values must be in [0, {n}) for {n} "
                             f"choices, got values in [{c.min()}, {c.max()}]")
    elif mode == "wrap":
        from tracer.numpy.ufuncs import mod
        a = mod(a, n)
    elif mode != "clip":
        raise ValueError(f"{fname}: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    choices = promote_dtypes(*choices)
    shape = broadcast_shapes(get_aval(a).shape, *[get_aval(c).shape for c in choices],
                             fname=fname)
    a = broadcast_to_shape(a, shape)
    choices = [broadcast_to_shape(c, shape) for c in choices]
    return lax.select_n(a, *choices)  # select_n clamps (mode='clip')


def select(condlist, choicelist, default=0):
    """``numpy.select``: per element, the entry of the first choice whose condition holds,
    ``default`` where none does. Conditions must be boolean; all arguments broadcast."""
    fname = "select"
    from tracer.numpy.manipulation import where
    condlist, choicelist = list(condlist), list(choicelist)
    if len(condlist) != len(choicelist):
        raise ValueError(f"{fname}: condlist and choicelist must have the same length, got "
                         f"{len(condlist)} and {len(choicelist)}")
    if not condlist:
        raise ValueError(f"{fname}: select with an empty condition list is not possible")
    for i, c in enumerate(condlist):
        c = as_operand(c, fname)
        if get_aval(c).dtype != np.bool_:
            raise TypeError(f"{fname}: invalid entry {i} in condlist: should be boolean, got "
                            f"dtype {get_aval(c).dtype.name}")
    from tracer.numpy.util import promote_dtypes
    *choices, default = promote_dtypes(*choicelist, default)
    shape = broadcast_shapes(*[get_aval(as_operand(c)).shape for c in condlist],
                             *[get_aval(c).shape for c in choices], get_aval(default).shape,
                             fname=fname)
    out = broadcast_to_shape(default, shape)
    for c, ch in reversed(list(zip(condlist, choices))):
        out = where(c, ch, out)
    return out
