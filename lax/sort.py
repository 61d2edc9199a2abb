"""Sorting primitives: Sort (XLA Operation semantics, 'Sort') and TopK ('TopK').

Order: ``sort`` orders floats by IEEE total order after canonicalisation as JAX does it
-- -0.0 and +0.0 compare equal (a stable sort keeps their order) and every NaN is a
positive NaN, so NaNs (of either sign) sort last. ``top_k`` uses the total order itself,
as XLA's TopK does: -NaN < -inf < ... < -0.0 < +0.0 < ... < inf < +NaN (NaN payloads
ordered by their bits), ties to the lower index. Complex numbers sort lexicographically
by (real, imag). Multi-operand sort orders all operands by the first ``num_keys``
(lexicographically); ``is_stable`` keeps the original order of ties (the NumPy impl is
always stable).
"""
from __future__ import annotations

import operator

import numpy as np

from tracer import dtypes
from tracer.core import Primitive, ShapedArray, get_aval
from tracer.interpreters import ad, batching
from tracer.interpreters.ad import Zero
from lax.utils import _complex, canonicalize_axis


def _sort_key_arrays(x, total=False):
    """NumPy arrays whose lexicographic integer order is the sort order of ``x``: sort's
    (-0.0 == +0.0, every NaN last), or with ``total`` IEEE totalOrder on the bits
    (top_k's: -NaN < -inf < ... < -0.0 < +0.0 < ... < inf < +NaN, payloads ordered)."""
    if dtypes.is_complex(x.dtype):
        return _sort_key_arrays(np.real(x), total) + _sort_key_arrays(np.imag(x), total)
    if dtypes.is_floating(x.dtype):
        if not total:
            x = np.where(x == 0, np.zeros_like(x), x)
            x = np.where(np.isnan(x), np.full_like(x, np.nan), x)
        it = np.dtype(f"i{x.dtype.itemsize}")
        i = np.ascontiguousarray(x).view(it)
        return [np.where(i < 0, i ^ np.asarray(dtypes.iinfo(it).max, it), i)]
    if x.dtype == np.bool_:
        return [x.astype(np.int8)]
    return [x]


def _sort_perm(keys, axis):
    """Stable lexicographic sort permutation along ``axis`` for the key operands."""
    moved = [np.moveaxis(k, axis, -1) for k in keys]
    cols = []
    for k in moved:
        cols.extend(_sort_key_arrays(k))
    shape = moved[0].shape
    n = shape[-1] if shape else 1
    if len(cols) == 1:
        return np.argsort(cols[0], axis=-1, kind="stable")
    if cols[0].size == 0:
        return np.zeros(cols[0].shape, np.int64)
    flat = [c.reshape(-1, n) for c in cols]
    perm = np.empty((flat[0].shape[0], n), np.int64)
    for r in range(flat[0].shape[0]):
        # np.lexsort sorts by the LAST key first.
        perm[r] = np.lexsort([c[r] for c in reversed(flat)])
    return perm.reshape(shape)


# -------------------------------------------- sort ------------------------------------------

def sort(operand, dimension: int = -1, is_stable: bool = True, num_keys: int = 1):
    """Sort ``operand`` (an array, or a sequence of arrays sorted together by the first
    ``num_keys``) along ``dimension``. XLA 'Sort'. Returns the sorted array(s)."""
    if isinstance(operand, (list, tuple)):
        ops = list(operand)
        single = False
    else:
        ops = [operand]
        single = True
    if not ops:
        raise ValueError("sort: needs at least one operand")
    nd = get_aval(ops[0]).ndim
    dimension = canonicalize_axis(dimension, nd, "sort dimension")
    num_keys = operator.index(num_keys)
    if not 1 <= num_keys <= len(ops):
        raise ValueError(f"sort: num_keys={num_keys} must be in [1, {len(ops)}]")
    outs = sort_p.bind(*ops, dimension=dimension, is_stable=bool(is_stable), num_keys=num_keys)
    return outs[0] if single else tuple(outs)


def sort_key_val(keys, values, dimension: int = -1, is_stable: bool = True):
    """Sort ``keys`` along ``dimension`` and permute ``values`` alike; returns both."""
    k, v = sort([keys, values], dimension, is_stable, 1)
    return k, v


def _sort_abstract_eval(*ops, dimension, is_stable, num_keys):
    shape = ops[0].shape
    for o in ops:
        if o.shape != shape:
            raise TypeError(f"sort: all operands must have the same shape, got "
                            f"{', '.join(a.str_short() for a in ops)}")
    if not 0 <= dimension < max(len(shape), 1):
        raise TypeError(f"sort: dimension {dimension} out of range for {ops[0].str_short()}")
    return list(ops)


def _sort_impl(*ops, dimension, is_stable, num_keys):
    if ops[0].ndim == 0:
        return [np.array(o, copy=True) for o in ops]
    perm = _sort_perm(ops[:num_keys], dimension)
    perm = np.moveaxis(perm, -1, dimension)
    return [np.take_along_axis(o, perm, axis=dimension) for o in ops]


def _take_along(x, idx, axis):
    """``x`` permuted along ``axis`` by ``idx`` (same shape): one gather whose other
    dimensions are batching dimensions."""
    from lax.indexing import GatherDimensionNumbers, gather
    from lax.shapes import expand_dims
    nd = get_aval(x).ndim
    axis = axis % nd
    others = tuple(i for i in range(nd) if i != axis)
    dnums = GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(axis,),
                                   start_index_map=(axis,), operand_batching_dims=others,
                                   start_indices_batching_dims=others)
    return gather(x, expand_dims(idx, (nd,)), dnums, (1,) * nd, mode="promise_in_bounds")


def _sort_jvp(primals, tangents, *, dimension, is_stable, num_keys):
    import lax
    shape = get_aval(primals[0]).shape
    iota = lax.broadcasted_iota(dtypes.int64 if dtypes.default_int_dtype() == dtypes.int64
                                else dtypes.int32, shape, dimension)
    outs = sort_p.bind(*primals, iota, dimension=dimension, is_stable=is_stable,
                       num_keys=num_keys)
    perm = outs[-1]
    sorted_primals = outs[:-1]
    t_out = []
    for t, p in zip(tangents, sorted_primals):
        if type(t) is Zero:
            t_out.append(Zero.from_primal_value(p))
        else:
            t_out.append(_take_along(t, perm, dimension))
    return sorted_primals, t_out


def _sort_batch(axis_data, vals, dims, *, dimension, is_stable, num_keys):
    vals = [batching.bdim_at_front(v, d, axis_data.size) for v, d in zip(vals, dims)]
    outs = sort_p.bind(*vals, dimension=dimension + 1, is_stable=is_stable, num_keys=num_keys)
    return outs, [0] * len(outs)


sort_p = Primitive("sort")
sort_p.multiple_results = True
sort_p.def_abstract_eval(_sort_abstract_eval)
sort_p.def_impl(_sort_impl)
ad.primitive_jvps[sort_p] = _sort_jvp
batching.primitive_batchers[sort_p] = _sort_batch


# -------------------------------------------- top_k -----------------------------------------

def top_k(operand, k: int, *, axis: int = -1, largest: bool = True):
    """The ``k`` largest (``largest=False``: smallest) entries of ``operand`` along
    ``axis``, and their indices (int32), in descending (ascending) order.

    Semantics: XLA Operation semantics, 'TopK' (``largest``), with jax.lax.top_k's
    ``axis`` (JAX 0.10, keyword-only). The result shapes are ``operand.shape`` with
    ``axis`` replaced by ``k``. Floats are ordered by IEEE totalOrder, as XLA:CPU's TopK
    under JAX: -NaN < -inf < ... < -0.0 < +0.0 < ... < inf < +NaN (payloads by their
    bits), so ``+0.0`` comes before ``-0.0``, a positive NaN is the largest value and a
    NaN with the sign bit set the smallest; equal entries (equal bits) keep the lower
    index first in both directions. Values are the operand's, bit for bit.

    Raises TypeError for a rank-0, complex or bool operand, ValueError for an ``axis``
    outside ``[-ndim, ndim)`` or a ``k`` outside ``[0, operand.shape[axis]]``.
    """
    k = operator.index(k)
    aval = get_aval(operand)
    if aval.ndim == 0:
        raise TypeError(f"top_k: operand must have at least one dimension, got "
                        f"{aval.str_short()}; reshape a scalar to shape (1,)")
    axis = operator.index(axis)
    if not -aval.ndim <= axis < aval.ndim:
        raise ValueError(f"top_k: axis={axis} is out of range for operand {aval.str_short()} "
                         f"(rank {aval.ndim}); pass an axis in [{-aval.ndim}, {aval.ndim})")
    return tuple(top_k_p.bind(operand, k=k, axis=axis % aval.ndim, largest=bool(largest)))


def _top_k_abstract_eval(x, *, k, axis, largest):
    if x.ndim == 0:
        raise TypeError("top_k: operand must have at least one dimension")
    if dtypes.is_complex(x.dtype) or x.dtype == dtypes.bool_:
        raise TypeError(f"top_k: operand must be real numeric (integer or float), got "
                        f"{x.str_short()}; compare a real part or convert bools to int")
    if not 0 <= axis < x.ndim:
        raise ValueError(f"top_k: axis={axis} out of range for operand {x.str_short()}")
    if not 0 <= k <= x.shape[axis]:
        raise ValueError(f"top_k: k={k} must be in [0, {x.shape[axis]}] (the size of axis "
                         f"{axis}) for operand {x.str_short()}")
    shape = x.shape[:axis] + (k,) + x.shape[axis + 1:]
    return [ShapedArray(shape, x.dtype, x.weak_type), ShapedArray(shape, dtypes.int32)]


def _top_k_impl(x, *, k, axis, largest):
    xm = np.moveaxis(x, axis, -1)
    (key,) = _sort_key_arrays(xm, total=True)
    # Ties keep index order both ways: a stable ascending sort of the keys, or of the
    # order-reversed keys (~key reverses integer order without overflow) for largest.
    if key.dtype == np.bool_:
        key = key.astype(np.int8)
    idx = np.argsort(~key if largest else key, axis=-1, kind="stable")[..., :k]
    vals = np.take_along_axis(xm, idx, axis=-1)
    return [np.moveaxis(vals, -1, axis), np.moveaxis(idx.astype(np.int32), -1, axis)]


def _top_k_jvp(primals, tangents, *, k, axis, largest):
    (x,), (t,) = primals, tangents
    vals, idx = top_k_p.bind(x, k=k, axis=axis, largest=largest)
    if type(t) is Zero:
        return [vals, idx], [Zero.from_primal_value(vals), Zero.from_primal_value(idx)]
    return [vals, idx], [_take_along(t, idx, axis), Zero.from_primal_value(idx)]


def _top_k_batch(axis_data, vals, dims, *, k, axis, largest):
    (x,), (d,) = vals, dims
    x = batching.bdim_at_front(x, d, axis_data.size)
    outs = top_k_p.bind(x, k=k, axis=axis + 1, largest=largest)
    return outs, [0, 0]


top_k_p = Primitive("top_k")
top_k_p.multiple_results = True
top_k_p.def_abstract_eval(_top_k_abstract_eval)
top_k_p.def_impl(_top_k_impl)
ad.primitive_jvps[top_k_p] = _top_k_jvp
batching.primitive_batchers[top_k_p] = _top_k_batch
