"""Shape primitives: BroadcastInDim, Reshape, Transpose, Rev, Slice, ConcatInDim, Pad, Iota
(XLA Operation semantics sections of those names), and the jax.lax helpers built on them
(broadcast, expand_dims, squeeze, collapse, full, broadcasted_iota, slice_in_dim,
index_in_dim, tile...)."""
from __future__ import annotations

import builtins
import math
import operator

import numpy as np

from tracer import dtypes
from tracer.core import Array, Primitive, ShapedArray, get_aval
from tracer.interpreters import ad, batching
from tracer.interpreters.ad import Zero, deflinear
from lax.utils import (as_lax_value, canonicalize_axis, canonicalize_shape,
                       promote_weak_scalars)


def _ndim(x):
    return get_aval(x).ndim


def _shape(x):
    return get_aval(x).shape


def _as_operand(x):
    if type(x) in (bool, int, float, complex):
        (x,) = promote_weak_scalars("shape op", x)
    return x


# ================================== broadcast_in_dim ===================================

def broadcast_in_dim(operand, shape, broadcast_dimensions):
    """Broadcast ``operand`` to ``shape``; operand dimension i maps to output dimension
    ``broadcast_dimensions[i]`` (strictly increasing) and must be 1 or equal to it.
    XLA 'BroadcastInDim'."""
    operand = _as_operand(operand)
    shape = canonicalize_shape(shape, "broadcast_in_dim")
    bdims = tuple(operator.index(d) for d in broadcast_dimensions)
    aval = get_aval(operand)
    if aval.shape == shape and bdims == tuple(range(len(shape))):
        return as_lax_value(operand)
    return broadcast_in_dim_p.bind(operand, shape=shape, broadcast_dimensions=bdims)


def _broadcast_in_dim_abstract_eval(x, *, shape, broadcast_dimensions):
    bd = broadcast_dimensions
    if len(bd) != x.ndim:
        raise TypeError(f"broadcast_in_dim: broadcast_dimensions {bd} must have one entry per "
                        f"operand dimension (operand {x.str_short()})")
    if any(not 0 <= d < len(shape) for d in bd) or any(a >= b for a, b in zip(bd, bd[1:])):
        raise TypeError(f"broadcast_in_dim: broadcast_dimensions {bd} must be strictly "
                        f"increasing and within the output rank {len(shape)}")
    for i, d in enumerate(bd):
        if x.shape[i] != 1 and x.shape[i] != shape[d]:
            raise TypeError(f"broadcast_in_dim: operand {x.str_short()} dimension {i} (size "
                            f"{x.shape[i]}) cannot broadcast to output dimension {d} of shape "
                            f"{shape}; it must be 1 or {shape[d]}")
    return ShapedArray(shape, x.dtype, x.weak_type)


def _broadcast_in_dim_impl(x, *, shape, broadcast_dimensions):
    expanded = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        expanded[d] = x.shape[i]
    x = x.reshape(expanded)
    if math.prod(shape) <= 1024:
        # a small result is cheaper to fill than np.broadcast_to's view is to build
        out = np.empty(shape, x.dtype)
        out[...] = x
        return out
    return np.broadcast_to(x, shape)


def _broadcast_in_dim_transpose(cts, x, *, shape, broadcast_dimensions):
    (ct,) = cts
    if type(ct) is Zero:
        return [None]
    in_shape = x.aval.shape
    bd = broadcast_dimensions
    unit = tuple(d for i, d in enumerate(bd) if in_shape[i] == 1 and shape[d] != 1)
    new = tuple(d for d in range(len(shape)) if d not in bd)
    from lax.reductions import reduce_sum
    summed = reduce_sum(ct, tuple(sorted(new + unit)))
    return [reshape(summed, in_shape)]


def _broadcast_in_dim_batch(axis_data, vals, dims, *, shape, broadcast_dimensions):
    (x,), (d,) = vals, dims
    x = batching.moveaxis(x, d, 0)
    new_shape = (axis_data.size,) + shape
    new_bd = (0,) + tuple(b + 1 for b in broadcast_dimensions)
    return [broadcast_in_dim_p.bind(x, shape=new_shape, broadcast_dimensions=new_bd)], [0]


broadcast_in_dim_p = Primitive("broadcast_in_dim")
broadcast_in_dim_p.def_abstract_eval(_broadcast_in_dim_abstract_eval)
broadcast_in_dim_p.def_impl(_broadcast_in_dim_impl)
deflinear(broadcast_in_dim_p, _broadcast_in_dim_transpose)
batching.primitive_batchers[broadcast_in_dim_p] = _broadcast_in_dim_batch


def broadcast(operand, sizes):
    """Prepend dimensions ``sizes`` to ``operand`` (XLA 'Broadcast')."""
    sizes = canonicalize_shape(sizes, "broadcast")
    nd = _ndim(operand)
    return broadcast_in_dim(operand, sizes + _shape(operand),
                            tuple(range(len(sizes), len(sizes) + nd)))


def broadcast_to_rank(x, rank: int):
    """``x`` with leading size-1 dimensions added up to ``rank``."""
    nd = _ndim(x)
    if nd >= rank:
        return x
    return broadcast(x, (1,) * (rank - nd))


def expand_dims(array, dimensions):
    """Insert size-1 dimensions at ``dimensions`` (positions in the output)."""
    shape = list(_shape(array))
    nd_out = len(shape) + len(dimensions)
    dims = sorted(canonicalize_axis(d, nd_out, "expand_dims dimension") for d in dimensions)
    for d in dims:
        shape.insert(d, 1)
    kept = [i for i in range(nd_out) if i not in dims]
    return broadcast_in_dim(array, tuple(shape), tuple(kept))


def full(shape, fill_value, dtype=None):
    """An array of ``shape`` filled with ``fill_value`` (jax.lax.full). Without ``dtype``
    the fill value's dtype is used (Python scalars stay weakly typed)."""
    from lax.elementwise import convert_element_type
    shape = canonicalize_shape(shape, "full")
    if np.ndim(fill_value) != 0 and _ndim(fill_value) != 0:
        raise TypeError(f"full: fill_value must be a scalar, got shape {_shape(fill_value)}")
    if dtype is None:
        if type(fill_value) in (bool, int, float, complex):
            dt, weak = dtypes.dtype_and_weak_type(fill_value)
            fill = Array(np.asarray(fill_value, dt), weak_type=weak)
        else:
            fill = fill_value
    else:
        dt = dtypes.canonicalize_dtype(dtype)
        if type(fill_value) in (bool, int, float, complex) or isinstance(fill_value, np.generic):
            fill = Array(np.asarray(fill_value).astype(dt))
        else:
            fill = convert_element_type(fill_value, dt)
    if isinstance(fill, np.ndarray):
        fill = Array(fill.astype(dtypes.canonicalize_dtype(fill.dtype)))
    return broadcast_in_dim(fill, shape, ())


def full_like(x, fill_value, dtype=None, shape=None):
    """An array like ``x`` (shape and dtype unless given) filled with ``fill_value``."""
    aval = get_aval(x)
    return full(aval.shape if shape is None else shape, fill_value,
                aval.dtype if dtype is None else dtype)


def zeros_like_array(x):
    """Zeros with ``x``'s shape and dtype."""
    return full_like(x, 0)


# ====================================== reshape ========================================

def reshape(operand, new_sizes, dimensions=None):
    """Reshape ``operand`` to ``new_sizes`` (row-major), after transposing by
    ``dimensions`` if given. XLA 'Reshape'."""
    operand = _as_operand(operand)
    new_sizes = canonicalize_shape(new_sizes, "reshape")
    if dimensions is not None:
        dims = tuple(operator.index(d) for d in dimensions)
        if dims != tuple(range(_ndim(operand))):
            operand = transpose(operand, dims)
    if _shape(operand) == new_sizes:
        return as_lax_value(operand)
    return reshape_p.bind(operand, new_sizes=new_sizes, dimensions=None)


def _reshape_abstract_eval(x, *, new_sizes, dimensions):
    if math.prod(new_sizes) != x.size:
        raise TypeError(f"reshape: cannot reshape {x.str_short()} (size {x.size}) to shape "
                        f"{new_sizes} (size {math.prod(new_sizes)})")
    return ShapedArray(new_sizes, x.dtype, x.weak_type)


def _reshape_impl(x, *, new_sizes, dimensions):
    return np.reshape(x, new_sizes)


def _reshape_transpose(cts, x, *, new_sizes, dimensions):
    (ct,) = cts
    if type(ct) is Zero:
        return [None]
    return [reshape(ct, x.aval.shape)]


def _reshape_batch(axis_data, vals, dims, *, new_sizes, dimensions):
    (x,), (d,) = vals, dims
    x = batching.moveaxis(x, d, 0)
    return [reshape_p.bind(x, new_sizes=(axis_data.size,) + new_sizes, dimensions=None)], [0]


reshape_p = Primitive("reshape")
reshape_p.def_abstract_eval(_reshape_abstract_eval)
reshape_p.def_impl(_reshape_impl)
deflinear(reshape_p, _reshape_transpose)
batching.primitive_batchers[reshape_p] = _reshape_batch


def squeeze(array, dimensions):
    """Remove the size-1 ``dimensions`` (jax.lax.squeeze). ValueError if one is not 1."""
    shape = _shape(array)
    dims = sorted({canonicalize_axis(d, len(shape), "squeeze dimension") for d in dimensions})
    for d in dims:
        if shape[d] != 1:
            raise ValueError(f"squeeze: dimension {d} of shape {shape} has size {shape[d]}, "
                             "not 1")
    return reshape(array, tuple(s for i, s in enumerate(shape) if i not in dims))


def collapse(operand, start_dimension: int, stop_dimension: int | None = None):
    """Merge dimensions [start, stop) into one (XLA 'Collapse')."""
    shape = _shape(operand)
    stop = len(shape) if stop_dimension is None else stop_dimension
    size = int(np.prod(shape[start_dimension:stop], dtype=np.int64))
    return reshape(operand, shape[:start_dimension] + (size,) + shape[stop:])


# ===================================== transpose =======================================

def transpose(operand, permutation):
    """Permute the dimensions: output dim i is input dim ``permutation[i]``. XLA
    'Transpose'."""
    operand = _as_operand(operand)
    perm = tuple(operator.index(p) for p in permutation)
    if perm == tuple(range(_ndim(operand))):
        return as_lax_value(operand)
    return transpose_p.bind(operand, permutation=perm)


def _transpose_abstract_eval(x, *, permutation):
    if sorted(permutation) != list(range(x.ndim)):
        raise TypeError(f"transpose: permutation {permutation} is not a permutation of the "
                        f"operand dimensions of {x.str_short()}")
    return ShapedArray(tuple(x.shape[p] for p in permutation), x.dtype, x.weak_type)


def _transpose_transpose(cts, x, *, permutation):
    (ct,) = cts
    if type(ct) is Zero:
        return [None]
    return [transpose(ct, tuple(np.argsort(permutation)))]


def _transpose_batch(axis_data, vals, dims, *, permutation):
    (x,), (d,) = vals, dims
    perm = (d,) + tuple(p + (p >= d) for p in permutation)
    return [transpose_p.bind(x, permutation=perm)], [0]


transpose_p = Primitive("transpose")
transpose_p.def_abstract_eval(_transpose_abstract_eval)
transpose_p.def_impl(lambda x, *, permutation: np.transpose(x, permutation))
deflinear(transpose_p, _transpose_transpose)
batching.primitive_batchers[transpose_p] = _transpose_batch


# ======================================== rev ==========================================

def rev(operand, dimensions):
    """Reverse the order of elements along ``dimensions``. XLA 'Rev'."""
    dims = tuple(sorted(canonicalize_axis(d, _ndim(operand), "rev dimension")
                        for d in dimensions))
    if not dims:
        return as_lax_value(operand)
    return rev_p.bind(operand, dimensions=dims)


def _rev_abstract_eval(x, *, dimensions):
    if len(set(dimensions)) != len(dimensions) or any(not 0 <= d < x.ndim for d in dimensions):
        raise TypeError(f"rev: dimensions {dimensions} must be unique and within the rank of "
                        f"{x.str_short()}")
    return x


def _rev_batch(axis_data, vals, dims, *, dimensions):
    (x,), (d,) = vals, dims
    return [rev_p.bind(x, dimensions=tuple(a + (a >= d) for a in dimensions))], [d]


rev_p = Primitive("rev")
rev_p.def_abstract_eval(_rev_abstract_eval)
rev_p.def_impl(lambda x, *, dimensions: np.flip(x, dimensions))
deflinear(rev_p, lambda cts, x, *, dimensions: [None if type(cts[0]) is Zero
                                                else rev_p.bind(cts[0], dimensions=dimensions)])
batching.primitive_batchers[rev_p] = _rev_batch


# ======================================= slice =========================================

def slice(operand, start_indices, limit_indices, strides=None):
    """The sub-array [start, limit) with ``strides`` per dimension. XLA 'Slice'."""
    nd = _ndim(operand)
    start = tuple(operator.index(i) for i in start_indices)
    limit = tuple(operator.index(i) for i in limit_indices)
    st = None if strides is None else tuple(operator.index(s) for s in strides)
    if st is not None and all(s == 1 for s in st):
        st = None
    if start == (0,) * nd and limit == _shape(operand) and st is None:
        return as_lax_value(operand)
    return slice_p.bind(operand, start_indices=start, limit_indices=limit, strides=st)


def _slice_abstract_eval(x, *, start_indices, limit_indices, strides):
    nd = x.ndim
    if len(start_indices) != nd or len(limit_indices) != nd or \
            (strides is not None and len(strides) != nd):
        raise TypeError(f"slice: start_indices {start_indices}, limit_indices {limit_indices} "
                        f"and strides {strides} need one entry per dimension of {x.str_short()}")
    st = strides or (1,) * nd
    for i, (s, l, k, n) in enumerate(zip(start_indices, limit_indices, st, x.shape)):
        if not 0 <= s <= l <= n:
            raise TypeError(f"slice: dimension {i}: need 0 <= start ({s}) <= limit ({l}) <= "
                            f"size ({n}) for operand {x.str_short()}")
        if k < 1:
            raise TypeError(f"slice: strides must be positive, got {strides}")
    shape = tuple((l - s + k - 1) // k for s, l, k in zip(start_indices, limit_indices, st))
    return ShapedArray(shape, x.dtype, x.weak_type)


def _slice_impl(x, *, start_indices, limit_indices, strides):
    st = strides or (1,) * x.ndim
    return x[tuple(builtins.slice(s, l, k) for s, l, k in zip(start_indices, limit_indices, st))]


def _slice_transpose(cts, x, *, start_indices, limit_indices, strides):
    (ct,) = cts
    if type(ct) is Zero:
        return [None]
    shape = x.aval.shape
    st = strides or (1,) * len(shape)
    out_shape = _shape(ct)
    pads = []
    for n, s, k, o in zip(shape, start_indices, st, out_shape):
        real_limit = s + (o - 1) * k + 1 if o > 0 else s
        pads.append((s, n - real_limit, k - 1 if o > 0 else 0))
    if any(o == 0 for o in out_shape):
        return [full(shape, 0, ct.dtype if hasattr(ct, "dtype") else get_aval(ct).dtype)]
    from lax.elementwise import _const
    return [pad(ct, _const(ct, 0), pads)]


def _slice_batch(axis_data, vals, dims, *, start_indices, limit_indices, strides):
    (x,), (d,) = vals, dims
    start = list(start_indices)
    limit = list(limit_indices)
    start.insert(d, 0)
    limit.insert(d, axis_data.size)
    st = None
    if strides is not None:
        st = list(strides)
        st.insert(d, 1)
        st = tuple(st)
    return [slice_p.bind(x, start_indices=tuple(start), limit_indices=tuple(limit),
                         strides=st)], [d]


slice_p = Primitive("slice")
slice_p.def_abstract_eval(_slice_abstract_eval)
slice_p.def_impl(_slice_impl)
deflinear(slice_p, _slice_transpose)
batching.primitive_batchers[slice_p] = _slice_batch


def slice_in_dim(operand, start_index, limit_index, stride=1, axis=0):
    """``slice`` along one axis (negative and None indices as in Python)."""
    shape = _shape(operand)
    axis = canonicalize_axis(axis, len(shape))
    n = shape[axis]
    start, limit, stride = builtins.slice(start_index, limit_index, stride).indices(n)
    if limit < start:
        limit = start
    s = [0] * len(shape)
    l = list(shape)
    k = [1] * len(shape)
    s[axis], l[axis], k[axis] = start, limit, stride
    return slice(operand, s, l, k)


def index_in_dim(operand, index, axis=0, keepdims=True):
    """The slice at ``index`` along ``axis`` (kept as a size-1 dim with ``keepdims``)."""
    shape = _shape(operand)
    axis = canonicalize_axis(axis, len(shape))
    n = shape[axis]
    index = operator.index(index)
    if not -n <= index < n:
        raise IndexError(f"index_in_dim: index {index} is out of bounds for axis {axis} of "
                         f"size {n}")
    index %= n
    out = slice_in_dim(operand, index, index + 1, 1, axis)
    return out if keepdims else squeeze(out, (axis,))


# ==================================== concatenate ======================================

def concatenate(operands, dimension: int):
    """Join ``operands`` (same rank and dtype, equal sizes except along ``dimension``).
    XLA 'ConcatInDim'."""
    operands = [_as_operand(o) for o in operands]
    if not operands:
        raise ValueError("concatenate: need at least one operand")
    if len(operands) == 1:
        return as_lax_value(operands[0])
    dimension = canonicalize_axis(dimension, _ndim(operands[0]), "concatenate dimension")
    return concatenate_p.bind(*operands, dimension=dimension)


def _concatenate_abstract_eval(*xs, dimension):
    nd = xs[0].ndim
    for x in xs:
        if x.ndim != nd or x.dtype != xs[0].dtype:
            raise TypeError(f"concatenate: operands must share rank and dtype, got "
                            f"{', '.join(a.str_short() for a in xs)}")
        for i in range(nd):
            if i != dimension and x.shape[i] != xs[0].shape[i]:
                raise TypeError(f"concatenate: operands must have equal sizes outside "
                                f"dimension {dimension}, got "
                                f"{', '.join(a.str_short() for a in xs)}")
    shape = list(xs[0].shape)
    shape[dimension] = sum(x.shape[dimension] for x in xs)
    return ShapedArray(shape, xs[0].dtype, all(x.weak_type for x in xs))


def _concatenate_transpose(cts, *xs, dimension):
    (ct,) = cts
    outs = []
    start = 0
    for x in xs:
        n = (x.aval if ad.is_undefined_primal(x) else get_aval(x)).shape[dimension]
        if ad.is_undefined_primal(x) and type(ct) is not Zero:
            outs.append(slice_in_dim(ct, start, start + n, 1, dimension))
        else:
            outs.append(None)
        start += n
    return outs


def _concatenate_batch(axis_data, vals, dims, *, dimension):
    mapped = [d for d in dims if d is not None]
    if all(d == mapped[0] for d in mapped):
        # Keep the common batch axis; only unmapped operands are broadcast to it.
        d = mapped[0]
        xs = [batching.matchaxis(axis_data.size, dx, d, x) for x, dx in zip(vals, dims)]
        return [concatenate_p.bind(*xs, dimension=dimension + (d <= dimension))], [d]
    xs = [batching.bdim_at_front(x, d, axis_data.size) for x, d in zip(vals, dims)]
    return [concatenate_p.bind(*xs, dimension=dimension + 1)], [0]


concatenate_p = Primitive("concatenate")
concatenate_p.def_abstract_eval(_concatenate_abstract_eval)
concatenate_p.def_impl(lambda *xs, dimension: np.concatenate(xs, axis=dimension))
deflinear(concatenate_p, _concatenate_transpose)
batching.primitive_batchers[concatenate_p] = _concatenate_batch


# ========================================= pad =========================================

def pad(operand, padding_value, padding_config):
    """Pad with ``padding_value`` (a scalar): ``padding_config`` holds (low, high,
    interior) per dimension; negative low/high remove elements. XLA 'Pad'."""
    operand, padding_value = promote_weak_scalars("pad", operand, padding_value)
    config = tuple((operator.index(lo), operator.index(hi), operator.index(it))
                   for lo, hi, it in padding_config)
    return pad_p.bind(operand, padding_value, padding_config=config)


def _pad_abstract_eval(x, v, *, padding_config):
    if v.shape != ():
        raise TypeError(f"pad: padding_value must be a scalar, got {v.str_short()}")
    if v.dtype != x.dtype:
        raise TypeError(f"pad: padding_value dtype {v.dtype.name} differs from the operand's "
                        f"{x.dtype.name}")
    if len(padding_config) != x.ndim:
        raise TypeError(f"pad: padding_config needs one (low, high, interior) per dimension "
                        f"of {x.str_short()}, got {padding_config}")
    shape = []
    for n, (lo, hi, it) in zip(x.shape, padding_config):
        if it < 0:
            raise TypeError(f"pad: interior padding must be >= 0, got {padding_config}")
        size = lo + hi + n + builtins.max(n - 1, 0) * it
        if size < 0:
            raise TypeError(f"pad: padding_config {padding_config} gives a negative size for "
                            f"operand {x.str_short()}")
        shape.append(size)
    return ShapedArray(shape, x.dtype, x.weak_type)


def _pad_impl(x, v, *, padding_config):
    # Interior padding first, then (possibly negative) edge padding.
    dil_shape = [n + builtins.max(n - 1, 0) * it for n, (_, _, it) in zip(x.shape, padding_config)]
    dil = np.full(dil_shape, v, dtype=x.dtype)
    dil[tuple(builtins.slice(None, None, it + 1) for _, _, it in padding_config)] = x
    pads = [(builtins.max(lo, 0), builtins.max(hi, 0)) for lo, hi, _ in padding_config]
    out = np.pad(dil, pads, constant_values=v) if any(p != (0, 0) for p in pads) else dil
    crop = tuple(builtins.slice(-lo if lo < 0 else 0, (out.shape[i] + hi) if hi < 0 else None)
                 for i, (lo, hi, _) in enumerate(padding_config))
    return out[crop]


def _pad_transpose(cts, x, v, *, padding_config):
    (ct,) = cts
    if type(ct) is Zero:
        return [None, None]
    from lax.reductions import reduce_sum
    from lax.elementwise import sub, _const
    t_operand = None
    if ad.is_undefined_primal(x):
        unpad = tuple((-lo, -hi, 0) for lo, hi, _ in padding_config)
        unpadded = pad(ct, _const(ct, 0), unpad)
        t_operand = slice(unpadded, (0,) * len(padding_config), _shape(unpadded),
                          tuple(it + 1 for _, _, it in padding_config))
    t_v = None
    if ad.is_undefined_primal(v):
        total = reduce_sum(ct, tuple(range(_ndim(ct))))
        if t_operand is not None:
            t_v = sub(total, reduce_sum(t_operand, tuple(range(_ndim(t_operand)))))
        else:
            xs = get_aval(x).shape
            inner = pad(ct, _const(ct, 0), tuple((-lo, -hi, 0) for lo, hi, _ in padding_config))
            inner = slice(inner, (0,) * len(xs), _shape(inner),
                          tuple(it + 1 for _, _, it in padding_config))
            t_v = sub(total, reduce_sum(inner, tuple(range(len(xs)))))
    return [t_operand, t_v]


def _pad_batch(axis_data, vals, dims, *, padding_config):
    (x, v), (dx, dv) = vals, dims
    if dv is None:
        config = list(padding_config)
        config.insert(dx, (0, 0, 0))
        return [pad_p.bind(x, v, padding_config=tuple(config))], [dx]
    # A batched padding value: pad with zeros, then select the padding positions.
    from lax.elementwise import select, _const
    x = batching.bdim_at_front(x, dx, axis_data.size)
    config = ((0, 0, 0),) + tuple(padding_config)
    padded = pad_p.bind(x, _const(x, 0), padding_config=config)
    mask = pad(full(_shape(x), True, dtypes.bool_), False, config)
    vb = broadcast_in_dim(v, _shape(padded), (0,))
    return [select(mask, padded, vb)], [0]


pad_p = Primitive("pad")
pad_p.def_abstract_eval(_pad_abstract_eval)
pad_p.def_impl(_pad_impl)
deflinear(pad_p, _pad_transpose)
batching.primitive_batchers[pad_p] = _pad_batch


# ========================================= iota ========================================

def iota(dtype, size: int):
    """[0, 1, ..., size-1] of ``dtype``. XLA 'Iota'."""
    return broadcasted_iota(dtype, (operator.index(size),), 0)


def broadcasted_iota(dtype, shape, dimension: int):
    """An array of ``shape`` whose values count along ``dimension``."""
    dtype = dtypes.canonicalize_dtype(dtype)
    shape = canonicalize_shape(shape, "iota")
    dimension = canonicalize_axis(dimension, len(shape), "iota dimension")
    return iota_p.bind(dtype=dtype, shape=shape, dimension=dimension)


def _iota_abstract_eval(*, dtype, shape, dimension):
    if dtype == dtypes.bool_:
        raise TypeError("iota: dtype must be numeric, got bool")
    if not 0 <= dimension < len(shape):
        raise TypeError(f"iota: dimension {dimension} out of range for shape {shape}")
    return ShapedArray(shape, dtype, False)


def _iota_impl(*, dtype, shape, dimension):
    r = np.arange(shape[dimension], dtype=dtype)
    expanded = [1] * len(shape)
    expanded[dimension] = shape[dimension]
    return np.broadcast_to(r.reshape(expanded), shape)


iota_p = Primitive("iota")
iota_p.def_abstract_eval(_iota_abstract_eval)
iota_p.def_impl(_iota_impl)
ad.defjvp_zero(iota_p)


# ==================================== small helpers ====================================

def tile(operand, reps):
    """Repeat ``operand`` ``reps[i]`` times along dimension i (jax.lax.tile)."""
    reps = tuple(operator.index(r) for r in reps)
    shape = _shape(operand)
    if len(reps) != len(shape):
        raise ValueError(f"tile: reps {reps} needs one entry per dimension of shape {shape}")
    bshape = []
    bdims = []
    for i, (r, n) in enumerate(zip(reps, shape)):
        bshape += [r, n]
        bdims.append(2 * i + 1)
    b = broadcast_in_dim(operand, tuple(bshape), tuple(bdims))
    return reshape(b, tuple(r * n for r, n in zip(reps, shape)))
