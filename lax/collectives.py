"""Collectives over named axes: psum, pmean, pmax, pmin, all_gather, axis_index.

XLA's AllReduce / CrossReplicaSum / AllGather / ReplicaId (spec sections of those names)
run across replicas; here the "replicas" are the members of a ``vmap`` with an
``axis_name``: ``vmap(lambda x: x / lax.psum(x, 'i'), axis_name='i')`` normalises over the
mapped axis. A collective has meaning only inside a vmap binding its name; anywhere else
it raises NameError (``unbound axis name``), at trace time or when run.

How it works: the primitives' ``bind`` finds the vmap binding their axis names
(``batching.trace_for_axes``) even when no operand is traced by it (``axis_index`` has no
operands); their batching rules (``batching.axis_primitive_batchers``) turn a collective
over the vmap's own name into an ordinary reduction over its batch axis (an unmapped
operand is the same on every member: ``psum`` multiplies it by the axis size) and pass
collectives over other names through. The results of psum/pmax/pmin/all_gather are the
same for every member, so they are unmapped. Jaxprs show them as
``psum[axes=('i',)]`` equations until a vmap batches them away.
"""
from __future__ import annotations

import numpy as np

from tracer import dtypes
from tracer.core import Array, Primitive, ShapedArray, get_aval
from tracer.interpreters import ad, batching
from tracer.interpreters.ad import Zero
from tracer.pytree import tree_flatten, tree_map, tree_unflatten
from lax.utils import _num, _ordered, check_dtype, is_python_scalar


class AxisPrimitive(Primitive):
    """A primitive over named axes: ``bind`` reaches the vmap binding the names (NameError
    when none does)."""

    names_param = "axes"

    def bind(self, *args, **params):
        names = params[self.names_param]
        names = names if isinstance(names, tuple) else (names,)
        return batching.bind_with_axes(self, args, params, names, self.name)


def _axis_names(axis_name) -> tuple:
    names = tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)
    for n in names:
        try:
            hash(n)
        except TypeError:
            raise TypeError(f"axis names must be hashable (like the axis_name given to vmap), "
                            f"got {n!r}") from None
    return names


def _leaves(fname, x):
    leaves, tree = tree_flatten(x)
    out = []
    for leaf in leaves:
        if is_python_scalar(leaf):
            dt, weak = dtypes.dtype_and_weak_type(leaf)
            leaf = Array(np.asarray(leaf, dt), weak)
        else:
            get_aval(leaf)  # TypeError for non-arrays
        out.append(leaf)
    return out, tree


def _check_groups(fname, axis_index_groups):
    if axis_index_groups is not None:
        raise NotImplementedError(f"{fname}: axis_index_groups is not supported; reduce over "
                                  "the whole named axis")


def _unbound_impl(p):
    def impl(*args, **params):
        names = params[p.names_param]
        names = names if isinstance(names, tuple) else (names,)
        raise batching.unbound_axis_error(names[0], p.name)
    return impl


def _same_avals(name, allowed):
    def rule(*avals, axes):
        for i, a in enumerate(avals):
            check_dtype(name, a, allowed, f"operand {i}")
        return list(avals)
    return rule


def _reducing_batcher(p, reduce_mapped, reduce_unmapped):
    """Rule of psum/pmax/pmin: over this vmap's name, reduce the batch axis (the result is
    the same for every member: unmapped); other names pass through with the bdims."""

    def rule(axis_data, vals, dims, *, axes):
        if axis_data.name not in axes:
            return p.bind(*vals, axes=axes), list(dims)
        outs = [reduce_unmapped(v, axis_data.size) if d is None else reduce_mapped(v, d)
                for v, d in zip(vals, dims)]
        rest = tuple(a for a in axes if a != axis_data.name)
        if rest:
            outs = p.bind(*outs, axes=rest)
        return list(outs), [None] * len(outs)

    batching.axis_primitive_batchers[p] = rule
    batching.axis_name_params[p] = "axes"


def _make_reducing(name, allowed, reduce_mapped, reduce_unmapped):
    p = AxisPrimitive(name)
    p.multiple_results = True
    p.def_abstract_eval(_same_avals(name, allowed))
    p.def_impl(_unbound_impl(p))
    _reducing_batcher(p, reduce_mapped, reduce_unmapped)
    return p


def _reduce_sum(v, d):
    from lax.reductions import reduce_sum
    return reduce_sum(v, (d,))


def _reduce_max(v, d):
    from lax.reductions import reduce_max
    return reduce_max(v, (d,))


def _reduce_min(v, d):
    from lax.reductions import reduce_min
    return reduce_min(v, (d,))


def _times_size(v, size):
    from lax.elementwise import mul
    return mul(v, Array(np.asarray(size, get_aval(v).dtype), weak_type=True))


# ======================================== psum ==========================================

def psum(x, axis_name, *, axis_index_groups=None):
    """Sum of ``x`` over the members of the named mapped axis (or axes: a tuple), the same
    result on every member (jax.lax.psum; XLA 'CrossReplicaSum'/'AllReduce' with add).

    ``x`` is a pytree of numeric arrays/scalars; shapes and dtypes are kept. ``psum(1,
    'i')`` is the size of axis 'i'. Raises NameError outside a ``vmap(...,
    axis_name=...)`` binding the name, TypeError for bool operands."""
    _check_groups("psum", axis_index_groups)
    names = _axis_names(axis_name)
    leaves, tree = _leaves("psum", x)
    if not leaves:
        return x
    return tree_unflatten(tree, psum_p.bind(*leaves, axes=names))


def _psum_transpose(cts, *args, axes):
    # psum maps per-member x_b to sum_b' x_b' on every member: a symmetric all-ones
    # matrix over the members, its own transpose.
    nz = [i for i, c in enumerate(cts) if type(c) is not Zero]
    summed = psum_p.bind(*[cts[i] for i in nz], axes=axes) if nz else []
    out = [None] * len(args)
    for i, s in zip(nz, summed):
        if ad.is_undefined_primal(args[i]):
            out[i] = s
    return out


psum_p = _make_reducing("psum", _num, _reduce_sum, _times_size)
ad.deflinear(psum_p, _psum_transpose)


# ======================================= pmax/pmin ======================================

def pmax(x, axis_name, *, axis_index_groups=None):
    """Element-wise maximum of ``x`` over the members of the named axis (jax.lax.pmax; XLA
    'AllReduce' with max). NaN propagates. Not differentiable."""
    _check_groups("pmax", axis_index_groups)
    leaves, tree = _leaves("pmax", x)
    if not leaves:
        return x
    return tree_unflatten(tree, pmax_p.bind(*leaves, axes=_axis_names(axis_name)))


def pmin(x, axis_name, *, axis_index_groups=None):
    """Element-wise minimum of ``x`` over the members of the named axis (jax.lax.pmin)."""
    _check_groups("pmin", axis_index_groups)
    leaves, tree = _leaves("pmin", x)
    if not leaves:
        return x
    return tree_unflatten(tree, pmin_p.bind(*leaves, axes=_axis_names(axis_name)))


pmax_p = _make_reducing("pmax", _ordered, _reduce_max, lambda v, size: v)
pmin_p = _make_reducing("pmin", _ordered, _reduce_min, lambda v, size: v)


# ========================================= pmean ========================================

def pmean(x, axis_name, *, axis_index_groups=None):
    """Mean of ``x`` over the members of the named axis (jax.lax.pmean): ``psum(x) /
    psum(1)``. Integer and bool operands give floating results (the default float dtype),
    like a true division."""
    _check_groups("pmean", axis_index_groups)
    from lax.elementwise import convert_element_type, div
    names = _axis_names(axis_name)

    def mean(leaf):
        if is_python_scalar(leaf):
            dt, weak = dtypes.dtype_and_weak_type(leaf)
            leaf = Array(np.asarray(leaf, dt), weak)
        dt = get_aval(leaf).dtype
        if not dtypes.is_inexact(dt):
            leaf = convert_element_type(leaf, dtypes.default_float_dtype())
            dt = get_aval(leaf).dtype
        (n,) = psum_p.bind(Array(np.asarray(1, dt), weak_type=True), axes=names)
        (total,) = psum_p.bind(leaf, axes=names)
        return div(total, n)

    return tree_map(mean, x)


# ====================================== all_gather ======================================

def all_gather(x, axis_name, *, axis: int = 0, tiled: bool = False, axis_index_groups=None):
    """The members' values of ``x`` stacked along a new dimension ``axis`` (concatenated
    along existing dimension ``axis`` with ``tiled``), the same on every member
    (jax.lax.all_gather; XLA 'AllGather'). One axis name. Raises NameError outside a vmap
    binding it, ValueError for an out-of-range ``axis``."""
    _check_groups("all_gather", axis_index_groups)
    names = _axis_names(axis_name)
    if len(names) != 1:
        raise NotImplementedError(f"all_gather: one axis name at a time, got {names}")
    size = batching.axis_size(names[0], "all_gather")
    leaves, tree = _leaves("all_gather", x)

    def one(leaf):
        nd = get_aval(leaf).ndim
        hi = nd if tiled else nd + 1
        if not -hi <= axis < hi:
            raise ValueError(f"all_gather: axis {axis} is out of range for an operand of rank "
                             f"{nd}{' (tiled)' if tiled else ''}")
        return all_gather_p.bind(leaf, axes=names, axis=axis % hi, tiled=bool(tiled),
                                 axis_size=size)

    return tree_unflatten(tree, [one(leaf) for leaf in leaves])


def _all_gather_abstract_eval(x, *, axes, axis, tiled, axis_size):
    shape = list(x.shape)
    if tiled:
        if not shape:
            raise TypeError("all_gather: tiled gathering needs an operand of rank >= 1")
        shape[axis] *= axis_size
    else:
        shape.insert(axis, axis_size)
    return ShapedArray(tuple(shape), x.dtype, x.weak_type)


def _all_gather_batch(axis_data, vals, dims, *, axes, axis, tiled, axis_size):
    (x,), (d,) = vals, dims
    if axis_data.name not in axes:
        return [all_gather_p.bind(x, axes=axes, axis=axis, tiled=tiled,
                                  axis_size=axis_size)], [d]
    if axis_data.size != axis_size:
        raise ValueError(f"all_gather over axis {axis_data.name!r}: traced for an axis of size "
                         f"{axis_size}, but the axis has size {axis_data.size} (a jitted "
                         "function traced under another vmap was reused; retrace it)")
    if d is None:
        stacked = batching.broadcast(x, axis_data.size, axis)
    else:
        stacked = batching.moveaxis(x, d, axis)
    if tiled:
        from lax.shapes import reshape
        shape = list(get_aval(stacked).shape)
        shape[axis:axis + 2] = [shape[axis] * shape[axis + 1]]
        stacked = reshape(stacked, tuple(shape))
    return [stacked], [None]


def _all_gather_transpose(cts, x, *, axes, axis, tiled, axis_size):
    (ct,) = cts
    if type(ct) is Zero:
        return [None]
    # Member b's operand feeds slot b of every member's output.
    (summed,) = psum_p.bind(ct, axes=axes)
    idx = axis_index_p.bind(axis_name=axes[0])
    from lax.shapes import reshape
    shape = get_aval(summed).shape
    if tiled:
        n = shape[axis] // axis_size
        split = shape[:axis] + (axis_size, n) + shape[axis + 1:]
        summed = reshape(summed, split)
    return [_take_member(summed, idx, axis)]


def _take_member(x, idx, axis):
    """``x[..., idx, ...]`` along ``axis`` for a traced scalar ``idx`` (one-hot contraction:
    only the primitives of the core families are needed)."""
    from lax.elementwise import convert_element_type, eq, mul
    from lax.reductions import reduce_sum
    from lax.shapes import broadcast_in_dim, broadcasted_iota
    shape = get_aval(x).shape
    dt = get_aval(x).dtype
    pos = broadcasted_iota(dtypes.int32, shape, axis)
    hit = eq(pos, broadcast_in_dim(idx, shape, ()))
    return reduce_sum(mul(x, convert_element_type(hit, dt)), (axis,))


all_gather_p = AxisPrimitive("all_gather")
all_gather_p.def_abstract_eval(_all_gather_abstract_eval)
all_gather_p.def_impl(_unbound_impl(all_gather_p))
ad.deflinear(all_gather_p, _all_gather_transpose)
batching.axis_primitive_batchers[all_gather_p] = _all_gather_batch
batching.axis_name_params[all_gather_p] = "axes"


# ====================================== axis_index ======================================

def axis_index(axis_name):
    """This member's position (int32 scalar) along the named mapped axis: 0, 1, ...,
    size-1 across the vmap (jax.lax.axis_index; XLA 'ReplicaId'). Raises NameError outside
    a vmap binding the name."""
    if isinstance(axis_name, (tuple, list)):
        raise NotImplementedError(f"axis_index: one axis name at a time, got {axis_name!r}")
    (name,) = _axis_names(axis_name)
    return axis_index_p.bind(axis_name=name)


class _AxisIndexPrimitive(AxisPrimitive):
    names_param = "axis_name"


def _axis_index_batch(axis_data, vals, dims, *, axis_name):
    if axis_data.name != axis_name:
        # Only reached if a vmap over another name processes it: hand it to its own.
        main = batching.find_axis_main(axis_name, "axis_index")
        out = axis_index_p.bind_with_trace(batching.BatchTrace(main), [], dict(
            axis_name=axis_name))
        return [out], [None]
    from lax.shapes import iota
    return [iota(dtypes.int32, axis_data.size)], [0]


axis_index_p = _AxisIndexPrimitive("axis_index")
axis_index_p.def_abstract_eval(lambda *, axis_name: ShapedArray((), dtypes.int32, False))
axis_index_p.def_impl(_unbound_impl(axis_index_p))
ad.defjvp_zero(axis_index_p)
batching.axis_primitive_batchers[axis_index_p] = _axis_index_batch
batching.axis_name_params[axis_index_p] = "axis_name"
