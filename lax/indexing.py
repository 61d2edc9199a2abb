"""Indexing primitives: Gather, Scatter (replace, add, sub, mul, min, max and a user
update computation), DynamicSlice and DynamicUpdateSlice (XLA Operation semantics sections
of those names; https://openxla.org/xla/operation_semantics#gather and following), with the
jax.lax helpers built on them (dynamic_index_in_dim, dynamic_slice_in_dim,
dynamic_update_slice_in_dim, dynamic_update_index_in_dim, index_take, scatter_apply).

Conventions (as in jax.lax): the index vector of ``start_indices`` / ``scatter_indices``
is always their last dimension (XLA's ``index_vector_dim = rank - 1``).

Out-of-range indices never read or write outside an array:

- gather: ``mode=CLIP`` and ``PROMISE_IN_BOUNDS`` clamp each start index to
  ``[0, operand_dim - slice_size]`` (XLA's native semantics); ``FILL_OR_DROP`` returns
  ``fill_value`` for every slice whose start is out of range.
- scatter: ``CLIP`` clamps like gather; ``FILL_OR_DROP`` and ``PROMISE_IN_BOUNDS`` drop
  every update window whose start is out of range (the whole window, as XLA does).
- dynamic_slice / dynamic_update_slice clamp their start indices.

Duplicate scatter indices: add/sub/mul/min/max accumulate; replace keeps the update that
comes last in row-major order of the update scatter dimensions (the spec leaves the order
open; ours is deterministic and the gradient rule agrees with it); a user computation is
applied to the duplicates one after another in that order.
"""
from __future__ import annotations

import builtins
import enum
import operator
from typing import Callable, NamedTuple

import numpy as np

from tracer import dtypes
from tracer.core import Array, Primitive, ShapedArray, Tracer, describe, get_aval, new_base_main
from tracer.interpreters import ad, batching
from tracer.interpreters.ad import Zero
from lax.utils import (_any, _num, _ordered, canonicalize_axis, canonicalize_shape,
                       check_dtype)
from lax import elementwise as _ew
from lax import shapes as _shapes


# ================================ dimension numbers ====================================

class GatherDimensionNumbers(NamedTuple):
    """How a gather maps output dimensions to operand dimensions (XLA
    'GatherDimensionNumbers'; jax.lax.GatherDimensionNumbers).

    offset_dims: output dimensions that index into a slice (sorted).
    collapsed_slice_dims: operand dimensions of slice size 1 that the output drops (sorted).
    start_index_map: operand dimension of each entry of the index vector.
    operand_batching_dims: operand dimensions indexed by the position along
        ``start_indices_batching_dims`` (slice size 1, dropped from the output; sorted).
    start_indices_batching_dims: the matching dimensions of ``start_indices``.
    """
    offset_dims: tuple
    collapsed_slice_dims: tuple
    start_index_map: tuple
    operand_batching_dims: tuple = ()
    start_indices_batching_dims: tuple = ()


class ScatterDimensionNumbers(NamedTuple):
    """How a scatter maps update dimensions to operand dimensions (XLA
    'ScatterDimensionNumbers'; jax.lax.ScatterDimensionNumbers).

    update_window_dims: dimensions of ``updates`` that are window dimensions (sorted).
    inserted_window_dims: operand dimensions with an implicit window size 1 (sorted).
    scatter_dims_to_operand_dims: operand dimension of each entry of the index vector.
    operand_batching_dims / scatter_indices_batching_dims: as for gather.
    """
    update_window_dims: tuple
    inserted_window_dims: tuple
    scatter_dims_to_operand_dims: tuple
    operand_batching_dims: tuple = ()
    scatter_indices_batching_dims: tuple = ()


class GatherScatterMode(enum.Enum):
    """Out-of-range index handling (jax.lax.GatherScatterMode).

    CLIP: clamp start indices so the slice / window lies inside the operand.
    FILL_OR_DROP: gather returns ``fill_value`` for out-of-range slices; scatter drops
        out-of-range update windows. The scatters' default (``mode=None``).
    PROMISE_IN_BOUNDS: the caller promises indices are in range; out-of-range behaviour
        is the implementation's: here gather clamps and scatter drops. The gather's
        default (``mode=None``), as in jax.lax.
    """
    CLIP = "clip"
    FILL_OR_DROP = "fill"
    PROMISE_IN_BOUNDS = "promise_in_bounds"

    def __repr__(self):
        return f"GatherScatterMode.{self.name}"

    __str__ = __repr__

    @staticmethod
    def from_any(s) -> "GatherScatterMode":
        if isinstance(s, GatherScatterMode):
            return s
        if s == "clip":
            return GatherScatterMode.CLIP
        if s is None or s == "fill" or s == "drop":
            return GatherScatterMode.FILL_OR_DROP
        if s == "promise_in_bounds":
            return GatherScatterMode.PROMISE_IN_BOUNDS
        raise ValueError(f"Unknown gather/scatter mode {s!r}: use 'clip', 'fill', 'drop', "
                         "'promise_in_bounds' or a GatherScatterMode")


CLIP = GatherScatterMode.CLIP
FILL_OR_DROP = GatherScatterMode.FILL_OR_DROP
PROMISE_IN_BOUNDS = GatherScatterMode.PROMISE_IN_BOUNDS


def _int_tuple(xs, what):
    try:
        return tuple(operator.index(x) for x in xs)
    except TypeError:
        raise TypeError(f"{what} must be a sequence of Python ints, got {xs!r}") from None


def _canon_gather_dnums(dn) -> GatherDimensionNumbers:
    if not isinstance(dn, GatherDimensionNumbers):
        raise TypeError(f"gather: dimension_numbers must be a GatherDimensionNumbers, got "
                        f"{type(dn).__name__}")
    return GatherDimensionNumbers(*(_int_tuple(f, f"gather dimension_numbers.{name}")
                                    for f, name in zip(dn, dn._fields)))


def _canon_scatter_dnums(dn) -> ScatterDimensionNumbers:
    if not isinstance(dn, ScatterDimensionNumbers):
        raise TypeError(f"scatter: dimension_numbers must be a ScatterDimensionNumbers, got "
                        f"{type(dn).__name__}")
    return ScatterDimensionNumbers(*(_int_tuple(f, f"scatter dimension_numbers.{name}")
                                     for f, name in zip(dn, dn._fields)))


def _is_sorted_unique(xs):
    return all(a < b for a, b in zip(xs, xs[1:]))


def _as_index_operand(x, name):
    """Python ints and NumPy integer arrays as Arrays of a canonical integer dtype."""
    if isinstance(x, (Tracer, Array)):
        return x
    arr = np.asarray(x)
    if arr.dtype == object or not (dtypes.is_integer(arr.dtype)):
        raise TypeError(f"{name} must be integers, got {arr.dtype} values {x!r}")
    if type(x) is int or (isinstance(x, (list, tuple)) and arr.dtype == np.int64):
        arr = arr.astype(dtypes.default_int_dtype())
    return Array(arr.astype(dtypes.canonicalize_dtype(arr.dtype)))


def _default_fill_value(dtype):
    """JAX's fill for out-of-range gathers: NaN, the minimum signed or the maximum
    unsigned integer, True."""
    dtype = np.dtype(dtype)
    if dtypes.is_inexact(dtype):
        return np.nan
    if dtypes.is_signed_integer(dtype):
        return int(dtypes.iinfo(dtype).min)
    if dtypes.is_unsigned_integer(dtype):
        return int(dtypes.iinfo(dtype).max)
    return True


def _check_int_indices(prim, indices):
    if not dtypes.is_integer(indices.dtype):
        raise TypeError(f"{prim}: indices must have an integer dtype, got "
                        f"{indices.str_short()}")
    if indices.ndim < 1:
        raise TypeError(f"{prim}: indices must have rank >= 1 (the last dimension is the "
                        f"index vector), got {indices.str_short()}")


def _check_batching_dims(prim, operand, indices, obd, ibd, obd_name, ibd_name, other):
    """Shared checks of operand_batching_dims / *_indices_batching_dims."""
    if not _is_sorted_unique(obd) or any(not 0 <= d < operand.ndim for d in obd):
        raise TypeError(f"{prim}: {obd_name} {obd} must be sorted, unique and within the "
                        f"rank of operand {operand.str_short()}")
    if len(set(ibd)) != len(ibd) or any(not 0 <= d < indices.ndim - 1 for d in ibd):
        raise TypeError(f"{prim}: {ibd_name} {ibd} must be unique dimensions of the indices "
                        f"{indices.str_short()} other than the last (index vector) dimension")
    if len(obd) != len(ibd):
        raise TypeError(f"{prim}: {obd_name} {obd} and {ibd_name} {ibd} must have the same "
                        "length")
    for o, i in zip(obd, ibd):
        if operand.shape[o] != indices.shape[i]:
            raise TypeError(f"{prim}: operand {operand.str_short()} batching dimension {o} "
                            f"and indices {indices.str_short()} batching dimension {i} "
                            "differ in size")
    for name, dims in other:
        if set(dims) & set(obd):
            raise TypeError(f"{prim}: {obd_name} {obd} overlaps {name} {dims}")


# ------------------------ shared NumPy machinery of the impls ---------------------------

def _full_starts(indices, rank, index_map, operand_batching_dims, indices_batching_dims):
    """The full operand start index of every slice: int64 [*batch_shape, rank]."""
    batch_shape = indices.shape[:-1]
    if indices.dtype == np.uint64:
        # Huge unsigned indices stay huge (out of range) instead of wrapping negative.
        indices = np.minimum(indices, np.uint64(dtypes.iinfo(np.int64).max))
    idx = indices.astype(np.int64)
    starts = np.zeros(batch_shape + (rank,), np.int64)
    for k, d in enumerate(index_map):
        starts[..., d] = idx[..., k]
    for od, idd in zip(operand_batching_dims, indices_batching_dims):
        shape = [1] * len(batch_shape)
        shape[idd] = batch_shape[idd]
        starts[..., od] = np.arange(batch_shape[idd]).reshape(shape)
    return starts


def _element_indices(starts, window_dims, window_sizes):
    """Per operand dimension, the index of each element of each window, broadcastable to
    [*batch_shape, *window_sizes] (window dims in operand order)."""
    batch_shape = starts.shape[:-1]
    nb, nw = len(batch_shape), len(window_dims)
    out = []
    for d in range(starts.shape[-1]):
        s = starts[..., d].reshape(batch_shape + (1,) * nw)
        if d in window_dims:
            j = window_dims.index(d)
            s = s + np.arange(window_sizes[j]).reshape((1,) * (nb + j) + (-1,) +
                                                         (1,) * (nw - j - 1))
        out.append(s)
    return out


# ====================================== gather =========================================

def gather(operand, start_indices, dimension_numbers: GatherDimensionNumbers, slice_sizes,
           *, unique_indices: bool = False, indices_are_sorted: bool = False, mode=None,
           fill_value=None):
    """Gather slices of ``operand`` at ``start_indices`` (XLA 'Gather';
    https://openxla.org/xla/operation_semantics#gather; jax.lax.gather).

    Args:
      operand: array of any dtype.
      start_indices: integer array ``[*batch_shape, K]``; the last dimension is the index
        vector, its entry k indexes operand dimension ``start_index_map[k]``.
      dimension_numbers: a ``GatherDimensionNumbers``.
      slice_sizes: one size per operand dimension (1 for collapsed and batching dims).
      unique_indices, indices_are_sorted: promises by the caller (kept for the backend).
      mode: ``GatherScatterMode`` or 'clip' / 'fill' / 'promise_in_bounds'; None means
        PROMISE_IN_BOUNDS (as in jax.lax.gather), which clamps here.
      fill_value: the value of out-of-range slices in FILL_OR_DROP mode; default NaN for
        inexact dtypes, the minimum signed / maximum unsigned integer, True for bool.

    Returns:
      An array of ``operand``'s dtype of rank ``len(batch_shape) + len(offset_dims)``:
      offset dimensions (at ``offset_dims``) have the slice sizes of the operand dimensions
      that are neither collapsed nor batching, in order; the other dimensions are
      ``batch_shape``.

    Raises:
      TypeError naming the shapes when the dimension numbers are inconsistent.

    >>> import numpy as np, lax
    >>> dn = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
    ...                                 start_index_map=(0,))
    >>> lax.gather(np.arange(6.).reshape(3, 2), np.array([[2], [0]]), dn, (1, 2)).tolist()
    [[4.0, 5.0], [0.0, 1.0]]
    """
    dnums = _canon_gather_dnums(dimension_numbers)
    mode = PROMISE_IN_BOUNDS if mode is None else GatherScatterMode.from_any(mode)
    slice_sizes = canonicalize_shape(slice_sizes, "gather slice_sizes")
    if mode == FILL_OR_DROP and fill_value is not None:
        fill_value = _static_scalar(fill_value, "gather fill_value")
    else:
        fill_value = None
    start_indices = _as_index_operand(start_indices, "gather start_indices")
    return gather_p.bind(operand, start_indices, dimension_numbers=dnums,
                         slice_sizes=slice_sizes, indices_are_sorted=bool(indices_are_sorted),
                         unique_indices=bool(unique_indices), mode=mode,
                         fill_value=fill_value)


def _static_scalar(v, what):
    if isinstance(v, Tracer):
        v = v.to_concrete_value()
        if v is None:
            raise TypeError(f"{what} must be a concrete scalar, got a traced value")
    arr = np.asarray(v)
    if arr.shape != ():
        raise TypeError(f"{what} must be a scalar, got shape {arr.shape}")
    return arr.item()


def _gather_offset_operand_dims(rank, dn):
    return [d for d in range(rank)
            if d not in dn.collapsed_slice_dims and d not in dn.operand_batching_dims]


def _gather_abstract_eval(operand, indices, *, dimension_numbers, slice_sizes,
                          indices_are_sorted, unique_indices, mode, fill_value):
    dn = dimension_numbers
    _check_int_indices("gather", indices)
    rank = operand.ndim
    ops = f"operand {operand.str_short()}, indices {indices.str_short()}"
    if len(slice_sizes) != rank:
        raise TypeError(f"gather: slice_sizes {slice_sizes} must have one entry per operand "
                        f"dimension ({ops})")
    for d, (s, n) in enumerate(zip(slice_sizes, operand.shape)):
        if not 0 <= s <= n:
            raise TypeError(f"gather: slice_sizes[{d}] = {s} must be within [0, {n}] "
                            f"({ops})")
    if indices.shape[-1] != len(dn.start_index_map):
        raise TypeError(f"gather: start_index_map {dn.start_index_map} must have one entry "
                        f"per element of the index vector (last dimension of the indices, "
                        f"{indices.shape[-1]}; {ops})")
    if len(set(dn.start_index_map)) != len(dn.start_index_map) or \
            any(not 0 <= d < rank for d in dn.start_index_map):
        raise TypeError(f"gather: start_index_map {dn.start_index_map} must hold unique "
                        f"operand dimensions ({ops})")
    cs = dn.collapsed_slice_dims
    if not _is_sorted_unique(cs) or any(not 0 <= d < rank for d in cs):
        raise TypeError(f"gather: collapsed_slice_dims {cs} must be sorted, unique operand "
                        f"dimensions ({ops})")
    for d in cs:
        if slice_sizes[d] > 1:
            raise TypeError(f"gather: collapsed dimension {d} needs slice size <= 1, got "
                            f"slice_sizes {slice_sizes} ({ops})")
    _check_batching_dims("gather", operand, indices, dn.operand_batching_dims,
                         dn.start_indices_batching_dims, "operand_batching_dims",
                         "start_indices_batching_dims",
                         [("collapsed_slice_dims", cs), ("start_index_map", dn.start_index_map)])
    for d in dn.operand_batching_dims:
        if slice_sizes[d] > 1:
            raise TypeError(f"gather: batching dimension {d} needs slice size <= 1, got "
                            f"slice_sizes {slice_sizes} ({ops})")
    od = _gather_offset_operand_dims(rank, dn)
    if len(od) != len(dn.offset_dims):
        raise TypeError(f"gather: operand rank {rank} must equal len(offset_dims) "
                        f"{len(dn.offset_dims)} + len(collapsed_slice_dims) {len(cs)} + "
                        f"len(operand_batching_dims) {len(dn.operand_batching_dims)} ({ops})")
    batch_shape = indices.shape[:-1]
    out_rank = len(batch_shape) + len(od)
    if not _is_sorted_unique(dn.offset_dims) or any(not 0 <= d < out_rank
                                                     for d in dn.offset_dims):
        raise TypeError(f"gather: offset_dims {dn.offset_dims} must be sorted, unique and "
                        f"within the output rank {out_rank} ({ops})")
    shape, b = [], iter(batch_shape)
    for i in range(out_rank):
        if i in dn.offset_dims:
            shape.append(slice_sizes[od[dn.offset_dims.index(i)]])
        else:
            shape.append(next(b))
    return ShapedArray(tuple(shape), operand.dtype, operand.weak_type)


def _gather_impl(operand, indices, *, dimension_numbers, slice_sizes, indices_are_sorted,
                 unique_indices, mode, fill_value):
    dn = dimension_numbers
    out_aval = _gather_abstract_eval(get_aval(operand), get_aval(indices),
                                     dimension_numbers=dn, slice_sizes=slice_sizes,
                                     indices_are_sorted=indices_are_sorted,
                                     unique_indices=unique_indices, mode=mode,
                                     fill_value=fill_value)
    if out_aval.size == 0:
        return np.zeros(out_aval.shape, operand.dtype)
    rank = operand.ndim
    batch_shape = indices.shape[:-1]
    nb = len(batch_shape)
    starts = _full_starts(indices, rank, dn.start_index_map, dn.operand_batching_dims,
                          dn.start_indices_batching_dims)
    upper = np.asarray(operand.shape, np.int64) - np.asarray(slice_sizes, np.int64)
    in_bounds = None
    if mode == FILL_OR_DROP:
        in_bounds = np.all((starts >= 0) & (starts <= upper), axis=-1)
    starts = np.clip(starts, 0, upper)
    od = _gather_offset_operand_dims(rank, dn)
    win = [slice_sizes[d] for d in od]
    idx = _element_indices(starts, od, win)
    tmp = np.broadcast_to(operand[tuple(idx)] if idx else operand, batch_shape + tuple(win))
    if in_bounds is not None and not in_bounds.all():
        fill = _default_fill_value(operand.dtype) if fill_value is None else fill_value
        with np.errstate(invalid="ignore"):
            fill_arr = np.asarray(fill).astype(operand.dtype)
        tmp = np.where(in_bounds.reshape(batch_shape + (1,) * len(od)), tmp, fill_arr)
    perm, b = [], iter(range(nb))
    for i in range(nb + len(od)):
        perm.append(nb + dn.offset_dims.index(i) if i in dn.offset_dims else next(b))
    return np.array(np.transpose(tmp, perm), order="C")


def _gather_jvp(primals, tangents, **params):
    operand, indices = primals
    out = gather_p.bind(operand, indices, **params)
    t = tangents[0]
    if type(t) is Zero:
        return [out], [Zero.from_primal_value(out)]
    # Out-of-range slices are constant (the fill value): their tangent is 0.
    tparams = dict(params, fill_value=0 if params["mode"] == FILL_OR_DROP else None)
    return [out], [gather_p.bind(t, indices, **tparams)]


def _gather_transpose(cts, operand, indices, *, dimension_numbers, slice_sizes,
                      indices_are_sorted, unique_indices, mode, fill_value):
    (ct,) = cts
    if ad.is_undefined_primal(indices):
        raise ValueError("gather: cannot transpose with respect to the indices")
    if type(ct) is Zero or not ad.is_undefined_primal(operand):
        return [None, None]
    dn = dimension_numbers
    aval = operand.aval
    sdn = ScatterDimensionNumbers(
        update_window_dims=dn.offset_dims, inserted_window_dims=dn.collapsed_slice_dims,
        scatter_dims_to_operand_dims=dn.start_index_map,
        operand_batching_dims=dn.operand_batching_dims,
        scatter_indices_batching_dims=dn.start_indices_batching_dims)
    # The gradient of what the forward computed: clamped gathers (CLIP and, here,
    # PROMISE_IN_BOUNDS) send their cotangent to the clamped slice, filled ones nowhere.
    smode = FILL_OR_DROP if mode == FILL_OR_DROP else CLIP
    zeros = _shapes.full(aval.shape, 0, aval.dtype)
    out = scatter_add_p.bind(zeros, indices, ct, dimension_numbers=sdn,
                             indices_are_sorted=indices_are_sorted,
                             unique_indices=unique_indices, mode=smode, update_jaxpr=None)
    return [out, None]


def _gather_batch(axis_data, vals, dims, *, dimension_numbers, slice_sizes, **params):
    operand, indices = vals
    od, idd = dims
    dn = dimension_numbers
    inc = lambda ds: tuple(d + 1 for d in ds)  # noqa: E731
    if idd is None:
        # The batch axis becomes a full-size window (offset) dimension at the front.
        operand = batching.moveaxis(operand, od, 0)
        new = GatherDimensionNumbers(
            offset_dims=(0,) + inc(dn.offset_dims), collapsed_slice_dims=inc(dn.collapsed_slice_dims),
            start_index_map=inc(dn.start_index_map),
            operand_batching_dims=inc(dn.operand_batching_dims),
            start_indices_batching_dims=dn.start_indices_batching_dims)
        sizes = (axis_data.size,) + tuple(slice_sizes)
    elif od is None:
        # A new leading batch dimension of the indices: the output's first batch dim.
        indices = batching.moveaxis(indices, idd, 0)
        new = dn._replace(offset_dims=inc(dn.offset_dims),
                          start_indices_batching_dims=inc(dn.start_indices_batching_dims))
        sizes = tuple(slice_sizes)
    else:
        # Both mapped: pair them with a new batching dimension.
        operand = batching.moveaxis(operand, od, 0)
        indices = batching.moveaxis(indices, idd, 0)
        new = GatherDimensionNumbers(
            offset_dims=inc(dn.offset_dims), collapsed_slice_dims=inc(dn.collapsed_slice_dims),
            start_index_map=inc(dn.start_index_map),
            operand_batching_dims=(0,) + inc(dn.operand_batching_dims),
            start_indices_batching_dims=(0,) + inc(dn.start_indices_batching_dims))
        sizes = (1,) + tuple(slice_sizes)
    out = gather_p.bind(operand, indices, dimension_numbers=new, slice_sizes=sizes, **params)
    return [out], [0]


gather_p = Primitive("gather")
gather_p.def_abstract_eval(_gather_abstract_eval)
gather_p.def_impl(_gather_impl)
ad.primitive_jvps[gather_p] = _gather_jvp
ad.primitive_transposes[gather_p] = _gather_transpose
batching.primitive_batchers[gather_p] = _gather_batch


# ====================================== scatter ========================================
# One abstract eval, impl, batching rule for the family; jvp/transpose per combiner.

def _scatter_window_dims(rank, dn):
    return [d for d in range(rank)
            if d not in dn.inserted_window_dims and d not in dn.operand_batching_dims]


def _make_scatter_abstract_eval(name, allowed):
    def abstract_eval(operand, indices, updates, *, dimension_numbers, indices_are_sorted,
                      unique_indices, mode, update_jaxpr):
        dn = dimension_numbers
        check_dtype(name, operand, allowed)
        _check_int_indices(name, indices)
        ops = (f"operand {operand.str_short()}, indices {indices.str_short()}, updates "
               f"{updates.str_short()}")
        if updates.dtype != operand.dtype:
            raise TypeError(f"{name}: updates dtype {updates.dtype.name} must equal the "
                            f"operand dtype {operand.dtype.name} ({ops})")
        rank = operand.ndim
        uwd, iwd, sdtod = (dn.update_window_dims, dn.inserted_window_dims,
                           dn.scatter_dims_to_operand_dims)
        if not _is_sorted_unique(uwd) or any(not 0 <= d < updates.ndim for d in uwd):
            raise TypeError(f"{name}: update_window_dims {uwd} must be sorted, unique "
                            f"dimensions of the updates ({ops})")
        if not _is_sorted_unique(iwd) or any(not 0 <= d < rank for d in iwd):
            raise TypeError(f"{name}: inserted_window_dims {iwd} must be sorted, unique "
                            f"operand dimensions ({ops})")
        if indices.shape[-1] != len(sdtod):
            raise TypeError(f"{name}: scatter_dims_to_operand_dims {sdtod} must have one "
                            f"entry per element of the index vector (last dimension of the "
                            f"indices, {indices.shape[-1]}; {ops})")
        if len(set(sdtod)) != len(sdtod) or any(not 0 <= d < rank for d in sdtod):
            raise TypeError(f"{name}: scatter_dims_to_operand_dims {sdtod} must hold unique "
                            f"operand dimensions ({ops})")
        _check_batching_dims(name, operand, indices, dn.operand_batching_dims,
                             dn.scatter_indices_batching_dims, "operand_batching_dims",
                             "scatter_indices_batching_dims",
                             [("inserted_window_dims", iwd),
                              ("scatter_dims_to_operand_dims", sdtod)])
        wd = _scatter_window_dims(rank, dn)
        if len(wd) != len(uwd):
            raise TypeError(f"{name}: operand rank {rank} must equal len(update_window_dims) "
                            f"{len(uwd)} + len(inserted_window_dims) {len(iwd)} + "
                            f"len(operand_batching_dims) {len(dn.operand_batching_dims)} "
                            f"({ops})")
        batch_shape = indices.shape[:-1]
        if updates.ndim != len(uwd) + len(batch_shape):
            raise TypeError(f"{name}: updates must have rank len(update_window_dims) + "
                            f"indices rank - 1 = {len(uwd) + len(batch_shape)} ({ops})")
        usd = [d for d in range(updates.ndim) if d not in uwd]
        for d, n in zip(usd, batch_shape):
            if updates.shape[d] != n:
                raise TypeError(f"{name}: updates scatter dimension {d} (size "
                                f"{updates.shape[d]}) must match the indices batch shape "
                                f"{batch_shape} ({ops})")
        for k, d in zip(uwd, wd):
            if updates.shape[k] > operand.shape[d]:
                raise TypeError(f"{name}: window dimension {k} of the updates (size "
                                f"{updates.shape[k]}) exceeds operand dimension {d} (size "
                                f"{operand.shape[d]}) ({ops})")
        if update_jaxpr is not None:
            j_in = [v.aval for v in update_jaxpr.jaxpr.invars]
            j_out = [v.aval for v in update_jaxpr.jaxpr.outvars]
            if len(j_out) != 1 or j_out[0].shape != () or j_out[0].dtype != operand.dtype \
                    or len(j_in) != 2:
                raise TypeError(f"{name}: the update computation must map two scalars of "
                                f"dtype {operand.dtype.name} to one scalar of that dtype, "
                                f"got {j_in} -> {j_out}")
        return ShapedArray(operand.shape, operand.dtype, operand.weak_type)

    return abstract_eval


def _scatter_targets(operand_shape, indices, updates, dn, mode):
    """The flat operand position of every kept update element and those elements (in
    row-major order of [*scatter dims, *window dims])."""
    rank = len(operand_shape)
    batch_shape = indices.shape[:-1]
    wd = _scatter_window_dims(rank, dn)
    uwd = dn.update_window_dims
    win = [updates.shape[k] for k in uwd]
    sizes = np.ones(rank, np.int64)
    for d, s in zip(wd, win):
        sizes[d] = s
    starts = _full_starts(indices, rank, dn.scatter_dims_to_operand_dims,
                          dn.operand_batching_dims, dn.scatter_indices_batching_dims)
    upper = np.asarray(operand_shape, np.int64) - sizes
    if mode == CLIP:
        keep = np.broadcast_to(np.all(upper >= 0), batch_shape)
        starts = np.clip(starts, 0, np.maximum(upper, 0))
    else:
        keep = np.all((starts >= 0) & (starts <= upper), axis=-1)
    usd = [d for d in range(updates.ndim) if d not in uwd]
    u = np.transpose(updates, usd + list(uwd))
    full = batch_shape + tuple(win)
    keep_full = np.broadcast_to(keep.reshape(batch_shape + (1,) * len(wd)), full).ravel()
    u = u.reshape(-1)[keep_full]
    if rank == 0:
        return np.zeros(u.shape, np.int64), u
    starts = np.where(keep[..., None], starts, 0)
    idx = [np.broadcast_to(i, full).ravel()[keep_full]
           for i in _element_indices(starts, wd, win)]
    return np.ravel_multi_index(idx, operand_shape), u


def _occurrence_rank(lin):
    """For each position of ``lin``, how many earlier positions hold the same value."""
    order = np.argsort(lin, kind="stable")
    s = lin[order]
    new_group = np.ones(len(s), bool)
    new_group[1:] = s[1:] != s[:-1]
    group_start = np.maximum.accumulate(np.where(new_group, np.arange(len(s)), 0))
    rank = np.empty(len(s), np.int64)
    rank[order] = np.arange(len(s)) - group_start
    return rank


def _apply_update_jaxpr(closed, x, u):
    """The scalar update computation applied element-wise to equal-shape arrays x, u
    (vectorised with vmap over the flattened elements; traceable)."""
    from tracer.jaxpr import eval_jaxpr
    shape = get_aval(x).shape
    n = int(np.prod(shape, dtype=np.int64))
    xf, uf = _shapes.reshape(x, (n,)), _shapes.reshape(u, (n,))
    outs, out_dims = batching.vmap_flat(
        lambda a, b: eval_jaxpr(closed.jaxpr, closed.consts, a, b), n, None, [0, 0], [xf, uf])
    out = batching.matchaxis(n, out_dims[0], 0, outs[0])
    return _shapes.reshape(out, shape)


def _make_scatter_impl(combine):
    def impl(operand, indices, updates, *, dimension_numbers, indices_are_sorted,
             unique_indices, mode, update_jaxpr):
        out = np.array(operand, copy=True, order="C")  # flat view below must not copy
        if out.size == 0 or updates.size == 0:
            return out
        lin, u = _scatter_targets(operand.shape, indices, updates, dimension_numbers, mode)
        flat = out.reshape(-1)
        with np.errstate(all="ignore"):
            combine(flat, lin, u, update_jaxpr)
        return out

    return impl


def _combine_replace(flat, lin, u, update_jaxpr):
    if update_jaxpr is None:
        # The last update to each position wins (row-major order of the updates).
        if len(lin) == 0:
            return
        _, first_from_end = np.unique(lin[::-1], return_index=True)
        last = len(lin) - 1 - first_from_end
        flat[lin[last]] = u[last]
        return
    if len(lin) == 0:
        return
    rank = _occurrence_rank(lin)
    with new_base_main():
        for r in range(int(rank.max()) + 1):
            sel = rank == r
            t = lin[sel]
            new = _apply_update_jaxpr(update_jaxpr, Array(flat[t]), Array(u[sel]))
            flat[t] = np.asarray(new)


def _combine_ufunc(ufunc):
    def combine(flat, lin, u, update_jaxpr):
        ufunc.at(flat, lin, u)
    return combine


def _scatter_batch(prim):
    def rule(axis_data, vals, dims, *, dimension_numbers, **params):
        operand, indices, updates = vals
        od, idd, ud = dims
        dn = dimension_numbers
        inc = lambda ds: tuple(d + 1 for d in ds)  # noqa: E731
        operand = batching.bdim_at_front(operand, od, axis_data.size)
        updates = batching.bdim_at_front(updates, ud, axis_data.size)
        if idd is None:
            # Every batch member scatters to the same places: the batch axis is a window.
            new = ScatterDimensionNumbers(
                update_window_dims=(0,) + inc(dn.update_window_dims),
                inserted_window_dims=inc(dn.inserted_window_dims),
                scatter_dims_to_operand_dims=inc(dn.scatter_dims_to_operand_dims),
                operand_batching_dims=inc(dn.operand_batching_dims),
                scatter_indices_batching_dims=dn.scatter_indices_batching_dims)
        else:
            indices = batching.moveaxis(indices, idd, 0)
            new = ScatterDimensionNumbers(
                update_window_dims=inc(dn.update_window_dims),
                inserted_window_dims=inc(dn.inserted_window_dims),
                scatter_dims_to_operand_dims=inc(dn.scatter_dims_to_operand_dims),
                operand_batching_dims=(0,) + inc(dn.operand_batching_dims),
                scatter_indices_batching_dims=(0,) + inc(dn.scatter_indices_batching_dims))
        return [prim.bind(operand, indices, updates, dimension_numbers=new, **params)], [0]

    return rule


def _scatter_wrapper(prim, operand, scatter_indices, updates, dimension_numbers,
                     indices_are_sorted, unique_indices, mode, update_jaxpr=None):
    from lax.utils import promote_weak_scalars
    dnums = _canon_scatter_dnums(dimension_numbers)
    mode = GatherScatterMode.from_any(mode)
    operand, updates = promote_weak_scalars(prim.name, operand, updates)
    scatter_indices = _as_index_operand(scatter_indices, f"{prim.name} scatter_indices")
    return prim.bind(operand, scatter_indices, updates, dimension_numbers=dnums,
                     indices_are_sorted=bool(indices_are_sorted),
                     unique_indices=bool(unique_indices), mode=mode,
                     update_jaxpr=update_jaxpr)


_SCATTER_DOC = """Scatter ``updates`` into ``operand`` at ``scatter_indices``, combining with
    {what} (XLA 'Scatter'; https://openxla.org/xla/operation_semantics#scatter;
    jax.lax.{name}).

    Args:
      operand: array{dtypes}.
      scatter_indices: integer array ``[*batch_shape, K]``, the last dimension the index
        vector (entry k indexes operand dimension ``scatter_dims_to_operand_dims[k]``).
      updates: array of operand's dtype with the indices' batch dimensions (in order) and
        the window dimensions at ``update_window_dims``.
      dimension_numbers: a ``ScatterDimensionNumbers``.
      indices_are_sorted, unique_indices: promises by the caller.
      mode: None / 'fill' / 'drop' (FILL_OR_DROP, default: out-of-range windows are
        dropped), 'clip' (clamped into range) or 'promise_in_bounds' (dropped here).

    Returns:
      An array of operand's shape and dtype. {dups}

    Raises:
      TypeError naming the shapes when they or the dimension numbers are inconsistent.
    """


def scatter_add(operand, scatter_indices, updates, dimension_numbers, *,
                indices_are_sorted=False, unique_indices=False, mode=None):
    return _scatter_wrapper(scatter_add_p, operand, scatter_indices, updates,
                            dimension_numbers, indices_are_sorted, unique_indices, mode)


def scatter_sub(operand, scatter_indices, updates, dimension_numbers, *,
                indices_are_sorted=False, unique_indices=False, mode=None):
    return _scatter_wrapper(scatter_sub_p, operand, scatter_indices, updates,
                            dimension_numbers, indices_are_sorted, unique_indices, mode)


def scatter_mul(operand, scatter_indices, updates, dimension_numbers, *,
                indices_are_sorted=False, unique_indices=False, mode=None):
    return _scatter_wrapper(scatter_mul_p, operand, scatter_indices, updates,
                            dimension_numbers, indices_are_sorted, unique_indices, mode)


def scatter_min(operand, scatter_indices, updates, dimension_numbers, *,
                indices_are_sorted=False, unique_indices=False, mode=None):
    return _scatter_wrapper(scatter_min_p, operand, scatter_indices, updates,
                            dimension_numbers, indices_are_sorted, unique_indices, mode)


def scatter_max(operand, scatter_indices, updates, dimension_numbers, *,
                indices_are_sorted=False, unique_indices=False, mode=None):
    return _scatter_wrapper(scatter_max_p, operand, scatter_indices, updates,
                            dimension_numbers, indices_are_sorted, unique_indices, mode)


def scatter(operand, scatter_indices, updates, dimension_numbers, *,
            indices_are_sorted=False, unique_indices=False, mode=None):
    return _scatter_wrapper(scatter_p, operand, scatter_indices, updates, dimension_numbers,
                            indices_are_sorted, unique_indices, mode)


scatter_add.__doc__ = _SCATTER_DOC.format(
    what="addition", name="scatter_add", dtypes=" of a numeric dtype",
    dups="Duplicate indices accumulate.")
scatter_sub.__doc__ = _SCATTER_DOC.format(
    what="subtraction (operand - update)", name="scatter_sub", dtypes=" of a numeric dtype",
    dups="Duplicate indices accumulate.")
scatter_mul.__doc__ = _SCATTER_DOC.format(
    what="multiplication", name="scatter_mul", dtypes=" of a numeric dtype",
    dups="Duplicate indices accumulate.")
scatter_min.__doc__ = _SCATTER_DOC.format(
    what="the minimum", name="scatter_min", dtypes=" of a bool, integer or floating dtype",
    dups="Duplicate indices accumulate; NaN propagates as in lax.min.")
scatter_max.__doc__ = _SCATTER_DOC.format(
    what="the maximum", name="scatter_max", dtypes=" of a bool, integer or floating dtype",
    dups="Duplicate indices accumulate; NaN propagates as in lax.max.")
scatter.__doc__ = _SCATTER_DOC.format(
    what="replacement", name="scatter", dtypes=" of any dtype",
    dups="With duplicate indices the update last in row-major order of the update scatter "
         "dimensions wins (deterministic here; the spec leaves the order open).")


def _trace_update_computation(fn, dtype, fname):
    from tracer.interpreters.partial_eval import trace_to_closed_jaxpr
    aval = ShapedArray((), dtype)
    closed = trace_to_closed_jaxpr(lambda x, u: [fn(x, u)], [aval, aval])
    if any(isinstance(c, Tracer) for c in closed.consts):
        raise TypeError(f"{fname}: the update computation closes over a traced value; pass "
                        "it as an operand or make it a constant")
    out = closed.jaxpr.outvars[0].aval
    if out.shape != () or out.dtype != np.dtype(dtype):
        from lax.elementwise import convert_element_type
        closed = trace_to_closed_jaxpr(
            lambda x, u: [convert_element_type(_shapes.reshape(fn(x, u), ()), dtype)],
            [aval, aval])
    return closed


def scatter_with_computation(operand, scatter_indices, updates, update_computation,
                             dimension_numbers, *, indices_are_sorted=False,
                             unique_indices=False, mode=None):
    """XLA 'Scatter' with a user ``update_computation(current, update) -> new`` on scalars
    of operand's dtype (https://openxla.org/xla/operation_semantics#scatter).

    The computation is traced once to a jaxpr (the ``update_jaxpr`` param of ``scatter``).
    Duplicate indices apply it one after another in row-major order of the update scatter
    dimensions. Arguments, modes and errors as ``scatter``. Differentiable with
    ``unique_indices=True`` (NotImplementedError otherwise, as in JAX).

    >>> import numpy as np, lax
    >>> dn = lax.ScatterDimensionNumbers((), (0,), (0,))
    >>> lax.scatter_with_computation(np.ones(3), np.array([[1], [1]]), np.array([2., 3.]),
    ...                              lambda x, u: x * u + 1, dn).tolist()
    [1.0, 10.0, 1.0]
    """
    dt = get_aval(operand).dtype
    closed = _trace_update_computation(update_computation, dt, "scatter_with_computation")
    return _scatter_wrapper(scatter_p, operand, scatter_indices, updates, dimension_numbers,
                            indices_are_sorted, unique_indices, mode, update_jaxpr=closed)


def scatter_apply(operand, scatter_indices, func: Callable, dimension_numbers, *,
                  update_shape=(), indices_are_sorted=False, unique_indices=False, mode=None):
    """Apply ``func`` (scalar -> scalar) to ``operand`` at the scattered positions
    (jax.lax.scatter_apply): a scatter whose update computation ignores the update.
    ``update_shape`` is the shape updates would have (batch and window dimensions).
    A position hit k times gets ``func`` applied k times."""
    dt = get_aval(operand).dtype
    closed = _trace_update_computation(lambda x, _: func(x), dt, "scatter_apply")
    unused = _shapes.full(canonicalize_shape(update_shape, "scatter_apply update_shape"), 0,
                          dt)
    return _scatter_wrapper(scatter_p, operand, scatter_indices, unused, dimension_numbers,
                            indices_are_sorted, unique_indices, mode, update_jaxpr=closed)


# ---------------------------- helpers of the scatter rules ------------------------------

def _gather_at_updates(x, indices, dn, updates_shape, mode, fill=0):
    """The values of operand-shaped ``x`` at every update element's target: an array of
    ``updates_shape``. Out-of-range windows read ``fill`` unless ``mode`` is CLIP."""
    xa = get_aval(x)
    if any(n == 0 for n in xa.shape):
        return _shapes.full(updates_shape, fill, xa.dtype)
    wd = _scatter_window_dims(xa.ndim, dn)
    sizes = [1] * xa.ndim
    for d, k in zip(wd, dn.update_window_dims):
        sizes[d] = updates_shape[k]
    gdn = GatherDimensionNumbers(
        offset_dims=dn.update_window_dims, collapsed_slice_dims=dn.inserted_window_dims,
        start_index_map=dn.scatter_dims_to_operand_dims,
        operand_batching_dims=dn.operand_batching_dims,
        start_indices_batching_dims=dn.scatter_indices_batching_dims)
    gmode = CLIP if mode == CLIP else FILL_OR_DROP
    return gather_p.bind(x, indices, dimension_numbers=gdn, slice_sizes=tuple(sizes),
                         indices_are_sorted=False, unique_indices=False, mode=gmode,
                         fill_value=None if gmode == CLIP else fill)


def _zeros(aval):
    return _shapes.full(aval.shape, 0, aval.dtype)


def _aval(x):
    return x.aval if ad.is_undefined_primal(x) else get_aval(x)


def _scatter_linear_jvp(primals, tangents, *, _prim, **params):
    # scatter-add and scatter-sub are linear in (operand, updates) jointly.
    operand, indices, updates = primals
    t_op, _, t_up = tangents
    out = _prim.bind(operand, indices, updates, **params)
    if type(t_op) is Zero and type(t_up) is Zero:
        return [out], [Zero.from_primal_value(out)]
    return [out], [_prim.bind(ad.instantiate_zeros(t_op), indices, ad.instantiate_zeros(t_up),
                              **params)]


def _scatter_add_jvp(primals, tangents, **params):
    return _scatter_linear_jvp(primals, tangents, _prim=scatter_add_p, **params)


def _scatter_sub_jvp(primals, tangents, **params):
    return _scatter_linear_jvp(primals, tangents, _prim=scatter_sub_p, **params)


def _scatter_add_transpose_rule(negate):
    def transpose(cts, operand, indices, updates, *, dimension_numbers, indices_are_sorted,
                  unique_indices, mode, update_jaxpr):
        (ct,) = cts
        if ad.is_undefined_primal(indices):
            raise ValueError("scatter: cannot transpose with respect to the indices")
        if type(ct) is Zero:
            return [None, None, None]
        ct_op = ct if ad.is_undefined_primal(operand) else None
        ct_up = None
        if ad.is_undefined_primal(updates):
            ct_up = _gather_at_updates(ct, indices, dimension_numbers, updates.aval.shape, mode)
            if negate:
                ct_up = _ew.neg(ct_up)
        return [ct_op, None, ct_up]

    return transpose


def _scatter_mul_jvp(primals, tangents, *, dimension_numbers, indices_are_sorted,
                     unique_indices, mode, update_jaxpr):
    operand, indices, updates = primals
    t_op, _, t_up = tangents
    params = dict(dimension_numbers=dimension_numbers, indices_are_sorted=indices_are_sorted,
                  unique_indices=unique_indices, mode=mode, update_jaxpr=update_jaxpr)
    out = scatter_mul_p.bind(operand, indices, updates, **params)
    if type(t_op) is Zero and type(t_up) is Zero:
        return [out], [Zero.from_primal_value(out)]
    t_out = None
    if type(t_op) is not Zero:
        t_out = scatter_mul_p.bind(t_op, indices, updates, **params)
    if type(t_up) is not Zero:
        # d out[i] / d u_k = operand[i] * prod of the other updates hitting i. Zero-safe:
        # count the zero updates per position and multiply the non-zero ones.
        up_aval = get_aval(updates)
        op_aval = get_aval(operand)
        add_params = dict(params, update_jaxpr=None)
        if unique_indices:
            others = _shapes.full(up_aval.shape, 1, up_aval.dtype)
        else:
            zero = _ew.eq(updates, _ew._const(updates, 0))
            one_u = _shapes.full(up_aval.shape, 1, up_aval.dtype)
            zero_u = _shapes.full(up_aval.shape, 0, up_aval.dtype)
            n_zero = scatter_add_p.bind(_zeros(op_aval), indices,
                                        _ew.select(zero, one_u, zero_u), **add_params)
            nz_prod = scatter_mul_p.bind(_shapes.full(op_aval.shape, 1, op_aval.dtype),
                                         indices, _ew.select(zero, one_u, updates), **params)
            n_zero_k = _gather_at_updates(n_zero, indices, dimension_numbers, up_aval.shape,
                                          mode)
            nz_prod_k = _gather_at_updates(nz_prod, indices, dimension_numbers, up_aval.shape,
                                           mode)
            safe_u = _ew.select(zero, one_u, updates)
            others = _ew.select(
                zero,
                _ew.select(_ew.eq(n_zero_k, one_u), nz_prod_k, zero_u),
                _ew.select(_ew.eq(n_zero_k, zero_u), _ew.div(nz_prod_k, safe_u), zero_u))
        contrib = scatter_add_p.bind(_zeros(op_aval), indices, _ew.mul(t_up, others),
                                     **add_params)
        contrib = _ew.mul(operand, contrib)
        t_out = contrib if t_out is None else ad.add_tangents(t_out, contrib)
    return [out], [t_out]


def _scatter_mul_transpose(cts, operand, indices, updates, *, dimension_numbers,
                           indices_are_sorted, unique_indices, mode, update_jaxpr):
    (ct,) = cts
    if ad.is_undefined_primal(updates):
        raise NotImplementedError("scatter_mul: transposition with respect to the updates "
                                  "is not linear; differentiate with jvp/grad instead")
    if type(ct) is Zero or not ad.is_undefined_primal(operand):
        return [None, None, None]
    return [scatter_mul_p.bind(ct, indices, updates, dimension_numbers=dimension_numbers,
                               indices_are_sorted=indices_are_sorted,
                               unique_indices=unique_indices, mode=mode,
                               update_jaxpr=update_jaxpr), None, None]


def _make_scatter_extremal_jvp(prim):
    def jvp(primals, tangents, *, dimension_numbers, **params):
        operand, indices, updates = primals
        t_op, _, t_up = tangents
        out = prim.bind(operand, indices, updates, dimension_numbers=dimension_numbers,
                        **params)
        if type(t_op) is Zero and type(t_up) is Zero:
            return [out], [Zero.from_primal_value(out)]
        # Ties share the tangent equally among the operand and the winning updates.
        dn = dimension_numbers
        op_aval, up_aval = get_aval(operand), get_aval(updates)
        mode = params["mode"]
        add_params = dict(params, update_jaxpr=None)
        one_u = _shapes.full(up_aval.shape, 1, up_aval.dtype)
        zero_u = _shapes.full(up_aval.shape, 0, up_aval.dtype)
        applied = _gather_at_updates(_shapes.full(op_aval.shape, True, dtypes.bool_), indices,
                                     dn, up_aval.shape, mode, fill=False)
        out_k = _gather_at_updates(out, indices, dn, up_aval.shape, mode)
        won = _ew.bitwise_and(applied, _ew.eq(updates, out_k))
        n_won = scatter_add_p.bind(_zeros(op_aval), indices, _ew.select(won, one_u, zero_u),
                                   dimension_numbers=dn, **add_params)
        kept = _ew.eq(operand, out)
        one_o = _shapes.full(op_aval.shape, 1, op_aval.dtype)
        zero_o = _shapes.full(op_aval.shape, 0, op_aval.dtype)
        denom = _ew.add(n_won, _ew.select(kept, one_o, zero_o))
        denom = _ew.select(_ew.eq(denom, zero_o), one_o, denom)
        t_out = None
        if type(t_op) is not Zero:
            t_out = _ew.select(kept, t_op, _zeros(op_aval))
        if type(t_up) is not Zero:
            s = scatter_add_p.bind(_zeros(op_aval), indices,
                                   _ew.select(won, t_up, _zeros(up_aval)),
                                   dimension_numbers=dn, **add_params)
            t_out = s if t_out is None else _ew.add(t_out, s)
        return [out], [_ew.div(t_out, denom)]

    return jvp


def _scatter_jvp(primals, tangents, *, dimension_numbers, indices_are_sorted, unique_indices,
                 mode, update_jaxpr):
    operand, indices, updates = primals
    t_op, _, t_up = tangents
    dn = dimension_numbers
    params = dict(dimension_numbers=dn, indices_are_sorted=indices_are_sorted,
                  unique_indices=unique_indices, mode=mode, update_jaxpr=update_jaxpr)
    if update_jaxpr is not None:
        if not unique_indices:
            raise NotImplementedError(
                "Differentiation of scatter with an update computation (scatter_apply, "
                "scatter_with_computation, .at[].apply) needs unique_indices=True: with "
                "repeated indices the computation is applied several times in sequence.")
        up_shape = get_aval(updates).shape

        def composed(x, u):
            cur = _gather_at_updates(x, indices, dn, up_shape, mode)
            new = _apply_update_jaxpr(update_jaxpr, cur, u)
            return [scatter_p.bind(x, indices, new, **dict(params, update_jaxpr=None))]

        outs, t_outs = ad.jvp_flat(composed, [operand, updates], [t_op, t_up],
                                   instantiate=False)
        return outs, t_outs
    out = scatter_p.bind(operand, indices, updates, **params)
    if type(t_op) is Zero and type(t_up) is Zero:
        return [out], [Zero.from_primal_value(out)]
    if unique_indices:
        return [out], [scatter_p.bind(ad.instantiate_zeros(t_op), indices,
                                      ad.instantiate_zeros(t_up), **params)]
    # Repeated indices: scatter the ids of the updates to find, per position, which update
    # (if any) won; the tangent comes from the same place as the value.
    op_aval, up_aval = get_aval(operand), get_aval(updates)
    idt = dtypes.default_int_dtype()
    uwd = dn.update_window_dims
    usd = tuple(d for d in range(up_aval.ndim) if d not in uwd)
    n_scatter = int(np.prod([up_aval.shape[d] for d in usd], dtype=np.int64))
    ids = _ew.add(_shapes.iota(idt, n_scatter), Array(np.ones((), idt)))
    ids = _shapes.broadcast_in_dim(
        _shapes.reshape(ids, tuple(up_aval.shape[d] for d in usd)), up_aval.shape, usd)
    id_params = dict(params, update_jaxpr=None)
    placed = scatter_p.bind(_shapes.full(op_aval.shape, 0, idt), indices, ids, **id_params)
    won = _ew.eq(_gather_at_updates(placed, indices, dn, up_aval.shape, mode), ids)
    kept = _ew.eq(placed, _ew._const(placed, 0))
    t_out = None
    if type(t_op) is not Zero:
        t_out = _ew.select(kept, t_op, _zeros(op_aval))
    if type(t_up) is not Zero:
        s = scatter_add_p.bind(_zeros(op_aval), indices,
                               _ew.select(won, t_up, _zeros(up_aval)), **id_params)
        t_out = s if t_out is None else _ew.add(t_out, s)
    return [out], [t_out]


def _scatter_transpose(cts, operand, indices, updates, *, dimension_numbers,
                       indices_are_sorted, unique_indices, mode, update_jaxpr):
    (ct,) = cts
    if update_jaxpr is not None or not unique_indices:
        raise NotImplementedError("scatter: transposition is only defined for a replacing "
                                  "scatter with unique_indices=True")
    if ad.is_undefined_primal(indices):
        raise ValueError("scatter: cannot transpose with respect to the indices")
    if type(ct) is Zero:
        return [None, None, None]
    up_aval = _aval(updates)
    params = dict(dimension_numbers=dimension_numbers, indices_are_sorted=indices_are_sorted,
                  unique_indices=unique_indices, mode=mode, update_jaxpr=None)
    ct_op = ct_up = None
    if ad.is_undefined_primal(operand):
        ct_op = scatter_p.bind(ct, indices, _zeros(up_aval), **params)
    if ad.is_undefined_primal(updates):
        ct_up = _gather_at_updates(ct, indices, dimension_numbers, up_aval.shape, mode)
    return [ct_op, None, ct_up]


def _int_zero_jvp(prim, jvp):
    """Integer and bool scatters have no tangents (symbolic zeros)."""
    def rule(primals, tangents, **params):
        if not dtypes.is_inexact(get_aval(primals[0]).dtype):
            out = prim.bind(*primals, **params)
            return [out], [Zero.from_primal_value(out)]
        return jvp(primals, tangents, **params)
    return rule


def _def_scatter(name, allowed, combine, jvp, transpose):
    p = Primitive(name)
    p.def_abstract_eval(_make_scatter_abstract_eval(name, allowed))
    p.def_impl(_make_scatter_impl(combine))
    if jvp is not None:
        ad.primitive_jvps[p] = _int_zero_jvp(p, jvp)
    if transpose is not None:
        ad.primitive_transposes[p] = transpose
    batching.primitive_batchers[p] = _scatter_batch(p)
    return p


scatter_add_p = _def_scatter("scatter-add", _num, _combine_ufunc(np.add), _scatter_add_jvp,
                             _scatter_add_transpose_rule(False))
scatter_sub_p = _def_scatter("scatter-sub", _num, _combine_ufunc(np.subtract),
                             _scatter_sub_jvp, _scatter_add_transpose_rule(True))
scatter_mul_p = _def_scatter("scatter-mul", _num, _combine_ufunc(np.multiply),
                             _scatter_mul_jvp, _scatter_mul_transpose)
scatter_min_p = _def_scatter("scatter-min", _ordered, _combine_ufunc(np.minimum), None, None)
scatter_max_p = _def_scatter("scatter-max", _ordered, _combine_ufunc(np.maximum), None, None)
ad.primitive_jvps[scatter_min_p] = _int_zero_jvp(scatter_min_p,
                                                 _make_scatter_extremal_jvp(scatter_min_p))
ad.primitive_jvps[scatter_max_p] = _int_zero_jvp(scatter_max_p,
                                                 _make_scatter_extremal_jvp(scatter_max_p))
scatter_p = _def_scatter("scatter", _any, _combine_replace, _scatter_jvp, _scatter_transpose)


# =================================== dynamic_slice =====================================

def _start_index_operands(start_indices, operand_shape, fname, allow_negative_indices=True):
    """Start indices as scalar integer operands of one dtype; negative ones count from the
    end when ``allow_negative_indices`` (jax.lax's default)."""
    if isinstance(start_indices, (Array, Tracer, np.ndarray)):
        aval = get_aval(start_indices)
        if aval.ndim != 1:
            raise TypeError(f"{fname}: start_indices must be a sequence of scalars or a 1-D "
                            f"array, got shape {aval.shape}")
        start_indices = [start_indices[i] for i in range(aval.shape[0])]
    start_indices = list(start_indices)
    if len(start_indices) != len(operand_shape):
        raise TypeError(f"{fname}: need one start index per operand dimension, got "
                        f"{len(start_indices)} for operand shape {operand_shape}")
    if isinstance(allow_negative_indices, bool):
        allow_negative_indices = [allow_negative_indices] * len(start_indices)
    arr_dts = [get_aval(i).dtype for i in start_indices
               if not isinstance(i, (int, np.integer))]
    for i in start_indices:
        if isinstance(i, (bool, float, complex)) or (
                not isinstance(i, (int, np.integer)) and
                not dtypes.is_integer(get_aval(i).dtype)):
            raise TypeError(f"{fname}: start indices must be integers, got {describe(i)}")
        if not isinstance(i, (int, np.integer)) and get_aval(i).ndim != 0:
            raise TypeError(f"{fname}: each start index must be a scalar, got shape "
                            f"{get_aval(i).shape}")
    dt = arr_dts[0] if arr_dts and all(d == arr_dts[0] for d in arr_dts) else \
        dtypes.default_int_dtype()
    out = []
    for i, n, neg in zip(start_indices, operand_shape, allow_negative_indices):
        if isinstance(i, (Array, np.ndarray)):
            i = int(np.asarray(i))  # concrete: wrap now, no equations for constants
        if isinstance(i, (int, np.integer)):
            i = int(i)
            if neg and i < 0:
                i += n
            info = dtypes.iinfo(dt)
            out.append(Array(np.asarray(builtins.min(builtins.max(i, info.min), info.max), dt)))
            continue
        if get_aval(i).dtype != dt:
            i = _ew.convert_element_type(i, dt)
        if neg and not dtypes.is_unsigned_integer(dt):
            i = _ew.select(_ew.lt(i, _ew._const(i, 0)), _ew.add(i, _ew._const(i, n)), i)
        out.append(i)
    return out


def dynamic_slice(operand, start_indices, slice_sizes, *, allow_negative_indices=True):
    """The slice of ``operand`` of size ``slice_sizes`` starting at the (traced or static)
    ``start_indices`` (XLA 'DynamicSlice'; jax.lax.dynamic_slice).

    Start indices (one integer scalar per dimension, or a 1-D integer array) are clamped
    to ``[0, operand_dim - slice_size]``, so the slice is always in bounds; negative
    indices first count from the end unless ``allow_negative_indices=False``.
    Returns an array of shape ``slice_sizes`` and operand's dtype.

    >>> import numpy as np, lax
    >>> lax.dynamic_slice(np.arange(5.), (3,), (3,)).tolist()
    [2.0, 3.0, 4.0]
    """
    shape = get_aval(operand).shape
    starts = _start_index_operands(start_indices, shape, "dynamic_slice",
                                   allow_negative_indices)
    sizes = canonicalize_shape(slice_sizes, "dynamic_slice slice_sizes")
    return dynamic_slice_p.bind(operand, *starts, slice_sizes=sizes)


def _check_starts(prim, operand, starts):
    if len(starts) != operand.ndim:
        raise TypeError(f"{prim}: need {operand.ndim} start indices for operand "
                        f"{operand.str_short()}, got {len(starts)}")
    for s in starts:
        if s.ndim != 0 or not dtypes.is_integer(s.dtype):
            raise TypeError(f"{prim}: start indices must be integer scalars, got "
                            f"{', '.join(a.str_short() for a in starts)}")


def _dynamic_slice_abstract_eval(operand, *starts, slice_sizes):
    _check_starts("dynamic_slice", operand, starts)
    if len(slice_sizes) != operand.ndim or any(not 0 <= s <= n for s, n in
                                               zip(slice_sizes, operand.shape)):
        raise TypeError(f"dynamic_slice: slice_sizes {slice_sizes} must have one entry per "
                        f"dimension, each within [0, size] of operand {operand.str_short()}")
    return ShapedArray(slice_sizes, operand.dtype, operand.weak_type)


def _clamped_starts(shape, sizes, starts):
    out = []
    for n, s, i in zip(shape, sizes, starts):
        i = np.asarray(i)
        if i.dtype == np.uint64:
            i = np.minimum(i, np.uint64(dtypes.iinfo(np.int64).max))
        out.append(int(np.clip(i.astype(np.int64), 0, n - s)))
    return out


def _dynamic_slice_impl(operand, *starts, slice_sizes):
    st = _clamped_starts(operand.shape, slice_sizes, starts)
    return np.array(operand[tuple(builtins.slice(i, i + s) for i, s in zip(st, slice_sizes))])


def _dynamic_slice_jvp(primals, tangents, *, slice_sizes):
    operand, *starts = primals
    out = dynamic_slice_p.bind(operand, *starts, slice_sizes=slice_sizes)
    t = tangents[0]
    if type(t) is Zero:
        return [out], [Zero.from_primal_value(out)]
    return [out], [dynamic_slice_p.bind(t, *starts, slice_sizes=slice_sizes)]


def _dynamic_slice_transpose(cts, operand, *starts, slice_sizes):
    (ct,) = cts
    if any(ad.is_undefined_primal(s) for s in starts):
        raise ValueError("dynamic_slice: cannot transpose with respect to the start indices")
    if type(ct) is Zero or not ad.is_undefined_primal(operand):
        return [None] * (1 + len(starts))
    zeros = _zeros(operand.aval)
    return [dynamic_update_slice_p.bind(zeros, ct, *starts)] + [None] * len(starts)


def _stack_batched_starts(axis_size, starts, sdims):
    """The start indices of every batch member as an index array [axis_size, n]."""
    dts = {get_aval(s).dtype for s in starts}
    dt = dts.pop() if len(dts) == 1 else dtypes.default_int_dtype()
    cols = []
    for s, d in zip(starts, sdims):
        if get_aval(s).dtype != dt:
            s = _ew.convert_element_type(s, dt)
        s = batching.bdim_at_front(s, d, axis_size)
        cols.append(_shapes.reshape(s, (axis_size, 1)))
    if not cols:
        return _shapes.full((axis_size, 0), 0, dtypes.default_int_dtype())
    return _shapes.concatenate(cols, 1)


def _dynamic_slice_batch(axis_data, vals, dims, *, slice_sizes):
    operand, *starts = vals
    od, *sdims = dims
    if all(d is None for d in sdims):
        zero = Array(np.zeros((), get_aval(starts[0]).dtype if starts else
                              dtypes.default_int_dtype()))
        new_starts = list(starts)
        new_starts.insert(od, zero)
        sizes = list(slice_sizes)
        sizes.insert(od, axis_data.size)
        return [dynamic_slice_p.bind(operand, *new_starts, slice_sizes=tuple(sizes))], [od]
    # Batched starts: a clamping gather with one index vector per batch member.
    idx = _stack_batched_starts(axis_data.size, starts, sdims)
    rank = len(slice_sizes)
    if od is None:
        dn = GatherDimensionNumbers(offset_dims=tuple(range(1, rank + 1)),
                                    collapsed_slice_dims=(), start_index_map=tuple(range(rank)))
        sizes = tuple(slice_sizes)
    else:
        operand = batching.moveaxis(operand, od, 0)
        dn = GatherDimensionNumbers(offset_dims=tuple(range(1, rank + 1)),
                                    collapsed_slice_dims=(),
                                    start_index_map=tuple(range(1, rank + 1)),
                                    operand_batching_dims=(0,), start_indices_batching_dims=(0,))
        sizes = (1,) + tuple(slice_sizes)
    out = gather_p.bind(operand, idx, dimension_numbers=dn, slice_sizes=sizes,
                        indices_are_sorted=False, unique_indices=False, mode=CLIP,
                        fill_value=None)
    return [out], [0]


dynamic_slice_p = Primitive("dynamic_slice")
dynamic_slice_p.def_abstract_eval(_dynamic_slice_abstract_eval)
dynamic_slice_p.def_impl(_dynamic_slice_impl)
ad.primitive_jvps[dynamic_slice_p] = _dynamic_slice_jvp
ad.primitive_transposes[dynamic_slice_p] = _dynamic_slice_transpose
batching.primitive_batchers[dynamic_slice_p] = _dynamic_slice_batch


# =============================== dynamic_update_slice ==================================

def dynamic_update_slice(operand, update, start_indices, *, allow_negative_indices=True):
    """``operand`` with ``update`` written at ``start_indices`` (XLA 'DynamicUpdateSlice';
    jax.lax.dynamic_update_slice).

    ``update`` has operand's rank and dtype and no larger sizes. Start indices are clamped
    to ``[0, operand_dim - update_dim]`` (the update always lands entirely inside);
    negative ones first count from the end unless ``allow_negative_indices=False``.

    >>> import numpy as np, lax
    >>> lax.dynamic_update_slice(np.zeros(4), np.ones(2), (3,)).tolist()
    [0.0, 0.0, 1.0, 1.0]
    """
    from lax.utils import promote_weak_scalars
    operand, update = promote_weak_scalars("dynamic_update_slice", operand, update)
    shape = get_aval(operand).shape
    starts = _start_index_operands(start_indices, shape, "dynamic_update_slice",
                                   allow_negative_indices)
    return dynamic_update_slice_p.bind(operand, update, *starts)


def _dynamic_update_slice_abstract_eval(operand, update, *starts):
    _check_starts("dynamic_update_slice", operand, starts)
    if update.dtype != operand.dtype:
        raise TypeError(f"dynamic_update_slice: update dtype {update.dtype.name} must equal "
                        f"the operand dtype {operand.dtype.name}")
    if update.ndim != operand.ndim or any(u > n for u, n in zip(update.shape, operand.shape)):
        raise TypeError(f"dynamic_update_slice: update {update.str_short()} must have the "
                        f"rank of operand {operand.str_short()} and no larger dimensions")
    return ShapedArray(operand.shape, operand.dtype, operand.weak_type)


def _dynamic_update_slice_impl(operand, update, *starts):
    st = _clamped_starts(operand.shape, update.shape, starts)
    out = np.array(operand, copy=True)
    out[tuple(builtins.slice(i, i + s) for i, s in zip(st, update.shape))] = update
    return out


def _dynamic_update_slice_jvp(primals, tangents):
    operand, update, *starts = primals
    t_op, t_up = tangents[:2]
    out = dynamic_update_slice_p.bind(operand, update, *starts)
    if type(t_op) is Zero and type(t_up) is Zero:
        return [out], [Zero.from_primal_value(out)]
    return [out], [dynamic_update_slice_p.bind(ad.instantiate_zeros(t_op),
                                               ad.instantiate_zeros(t_up), *starts)]


def _dynamic_update_slice_transpose(cts, operand, update, *starts):
    (ct,) = cts
    if any(ad.is_undefined_primal(s) for s in starts):
        raise ValueError("dynamic_update_slice: cannot transpose with respect to the start "
                         "indices")
    nones = [None] * len(starts)
    if type(ct) is Zero:
        return [None, None] + nones
    up_aval = _aval(update)
    ct_op = ct_up = None
    if ad.is_undefined_primal(operand):
        ct_op = dynamic_update_slice_p.bind(ct, _zeros(up_aval), *starts)
    if ad.is_undefined_primal(update):
        ct_up = dynamic_slice_p.bind(ct, *starts, slice_sizes=up_aval.shape)
    return [ct_op, ct_up] + nones


def _dynamic_update_slice_batch(axis_data, vals, dims):
    operand, update, *starts = vals
    od, ud, *sdims = dims
    operand = batching.bdim_at_front(operand, od, axis_data.size)
    update = batching.bdim_at_front(update, ud, axis_data.size)
    if all(d is None for d in sdims):
        zero = Array(np.zeros((), get_aval(starts[0]).dtype if starts else
                              dtypes.default_int_dtype()))
        return [dynamic_update_slice_p.bind(operand, update, zero, *starts)], [0]
    # Batched starts: a clamping replace-scatter, one window per batch member.
    idx = _stack_batched_starts(axis_data.size, starts, sdims)
    rank = len(starts)
    dn = ScatterDimensionNumbers(update_window_dims=tuple(range(1, rank + 1)),
                                 inserted_window_dims=(),
                                 scatter_dims_to_operand_dims=tuple(range(1, rank + 1)),
                                 operand_batching_dims=(0,), scatter_indices_batching_dims=(0,))
    out = scatter_p.bind(operand, idx, update, dimension_numbers=dn, indices_are_sorted=True,
                         unique_indices=True, mode=CLIP, update_jaxpr=None)
    return [out], [0]


dynamic_update_slice_p = Primitive("dynamic_update_slice")
dynamic_update_slice_p.def_abstract_eval(_dynamic_update_slice_abstract_eval)
dynamic_update_slice_p.def_impl(_dynamic_update_slice_impl)
ad.primitive_jvps[dynamic_update_slice_p] = _dynamic_update_slice_jvp
ad.primitive_transposes[dynamic_update_slice_p] = _dynamic_update_slice_transpose
batching.primitive_batchers[dynamic_update_slice_p] = _dynamic_update_slice_batch


# ==================================== helpers ==========================================

def dynamic_slice_in_dim(operand, start_index, slice_size: int, axis: int = 0, *,
                         allow_negative_indices=True):
    """``dynamic_slice`` along one ``axis``: ``slice_size`` elements from ``start_index``
    (clamped), the other dimensions whole (jax.lax.dynamic_slice_in_dim)."""
    shape = get_aval(operand).shape
    axis = canonicalize_axis(axis, len(shape))
    starts = [0] * len(shape)
    starts[axis] = start_index
    sizes = list(shape)
    sizes[axis] = operator.index(slice_size)
    return dynamic_slice(operand, starts, sizes, allow_negative_indices=allow_negative_indices)


def dynamic_index_in_dim(operand, index, axis: int = 0, keepdims: bool = True, *,
                         allow_negative_indices=True):
    """The entry at ``index`` (traced or static, clamped) along ``axis``; the axis is kept
    with size 1 when ``keepdims`` (jax.lax.dynamic_index_in_dim)."""
    out = dynamic_slice_in_dim(operand, index, 1, axis,
                               allow_negative_indices=allow_negative_indices)
    if keepdims:
        return out
    return _shapes.squeeze(out, (canonicalize_axis(axis, get_aval(operand).ndim),))


def dynamic_update_slice_in_dim(operand, update, start_index, axis: int, *,
                                allow_negative_indices=True):
    """``dynamic_update_slice`` at ``start_index`` along ``axis``, 0 elsewhere
    (jax.lax.dynamic_update_slice_in_dim)."""
    shape = get_aval(operand).shape
    axis = canonicalize_axis(axis, len(shape))
    starts = [0] * len(shape)
    starts[axis] = start_index
    return dynamic_update_slice(operand, update, starts,
                                allow_negative_indices=allow_negative_indices)


def dynamic_update_index_in_dim(operand, update, index, axis: int, *,
                                allow_negative_indices=True):
    """Write ``update`` (operand's shape without ``axis``, or with it of size 1) at
    ``index`` along ``axis`` (jax.lax.dynamic_update_index_in_dim)."""
    shape = get_aval(operand).shape
    axis = canonicalize_axis(axis, len(shape))
    if get_aval(update).ndim == len(shape) - 1:
        update = _shapes.expand_dims(update, (axis,))
    return dynamic_update_slice_in_dim(operand, update, index, axis,
                                       allow_negative_indices=allow_negative_indices)


def index_take(src, idxs, axes):
    """``src`` indexed by the integer arrays ``idxs`` (equal shapes ``[N]``) along
    ``axes``: shape ``[N, *remaining dims]`` (jax.lax.index_take; a gather with clamped
    indices)."""
    axes = tuple(canonicalize_axis(a, get_aval(src).ndim) for a in axes)
    if len(idxs) != len(axes):
        raise ValueError(f"index_take: need one index array per axis, got {len(idxs)} "
                         f"arrays for axes {axes}")
    idxs = [_as_index_operand(i, "index_take indices") for i in idxs]
    shapes = {get_aval(i).shape for i in idxs}
    if len(shapes) != 1 or len(next(iter(shapes))) != 1:
        raise ValueError(f"index_take: index arrays must be 1-D with equal lengths, got "
                         f"shapes {sorted(shapes)}")
    dts = {get_aval(i).dtype for i in idxs}
    dt = dts.pop() if len(dts) == 1 else dtypes.default_int_dtype()
    cols = [_shapes.expand_dims(i if get_aval(i).dtype == dt
                                else _ew.convert_element_type(i, dt), (1,)) for i in idxs]
    indices = _shapes.concatenate(cols, 1)
    shape = get_aval(src).shape
    sizes = tuple(1 if d in axes else n for d, n in enumerate(shape))
    offset = tuple(range(1, len(shape) - len(axes) + 1))
    dn = GatherDimensionNumbers(offset_dims=offset, collapsed_slice_dims=tuple(sorted(axes)),
                                start_index_map=axes)
    return gather(src, indices, dn, sizes, mode=CLIP)
