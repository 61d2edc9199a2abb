"""Collectives over named axes: psum, pmean, pmax, pmin, all_gather, axis_index, axis_size,
and the permuting/scattering ones (ppermute, pshuffle, pbroadcast, psum_scatter,
all_to_all, pswapaxes, psend/precv, ragged_all_to_all, pcast) further down.

XLA's AllReduce / CrossReplicaSum / AllGather / ReplicaId (spec sections of those names)
run across replicas; here the "replicas" are the members of a ``vmap`` with an
``axis_name``: ``vmap(lambda x: x / lax.psum(x, 'i'), axis_name='i')`` normalises over the
mapped axis. A collective has meaning only inside a vmap binding its name (or a
``tracer.pmap`` / ``tracer.shard_map``, which bind it with vmap's machinery); anywhere
else it raises NameError (``unbound axis name``), at trace time or when run.

Across processes: when the binding vmap is a multi-process pmap axis
(``axis_data.group``, tracer/distributed.py), each rule combines this process's members
as below, then the processes through the MPI steps of lax/mpi.py (process-major global
member order: process p holds members p*L ... p*L + L-1).

How it works: the primitives' ``bind`` finds the vmap binding their axis names
(``batching.trace_for_axes``) even when no operand is traced by it (``axis_index`` has no
operands); their batching rules (in ``batching.primitive_batchers``, run even on unmapped
operands: ``batching.batch_when_unmapped``) turn a collective over the vmap's own name
into an ordinary reduction over its batch axis (an unmapped operand is the same on every
member: ``psum`` multiplies it by the axis size) and pass collectives over other names
through. The results of psum/pmax/pmin/all_gather are the
same for every member, so they are unmapped. Jaxprs show them as
``psum[axes=('i',)]`` equations until a vmap batches them away.
"""
from __future__ import annotations

import numpy as np

from tracer import dtypes
from tracer.core import Array, Primitive, ShapedArray, abstract_token, get_aval
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


def _reducing_batcher(p, reduce_mapped, reduce_unmapped, mpi_op):
    """Rule of psum/pmax/pmin: over this vmap's name, reduce the batch axis (the result is
    the same for every member: unmapped); other names pass through with the bdims. Over a
    multi-process pmap axis, the local members are reduced first, then the processes
    (``mpi_op`` through MPI, lax/mpi.py): an unmapped value may differ between processes
    (a process's own constant), so it is reduced across them too."""

    def rule(axis_data, vals, dims, *, axes):
        if axis_data.name not in axes:
            return p.bind(*vals, axes=axes), list(dims)
        if axis_data.group is not None:
            from lax.shapes import index_in_dim
            # one local member (one device per process, the default): its value as it is
            # (a view), not a reduction over an axis of one (a pass over the buffer)
            outs = [reduce_unmapped(v, axis_data.size) if d is None else
                    index_in_dim(v, 0, d, keepdims=False) if axis_data.size == 1 else
                    reduce_mapped(v, d) for v, d in zip(vals, dims)]
            outs = _allreduce_packed(outs, mpi_op, axis_data.group)
        else:
            outs = [reduce_unmapped(v, axis_data.size) if d is None else reduce_mapped(v, d)
                    for v, d in zip(vals, dims)]
        rest = tuple(a for a in axes if a != axis_data.name)
        if rest:
            outs = p.bind(*outs, axes=rest)
        return list(outs), [None] * len(outs)

    batching.primitive_batchers[p] = rule
    batching.batch_when_unmapped.add(p)
    batching.axis_name_params[p] = "axes"


def _allreduce_packed(vals, op, group):
    """One MPI allreduce per dtype for all of ``vals`` (a psum of a pytree, such as a
    model's gradients): the operands of one dtype travel raveled and concatenated, so a
    step pays one round of latency per dtype rather than one per leaf."""
    from lax import mpi
    from lax.shapes import concatenate, reshape, slice_in_dim
    out = list(vals)
    by_dtype: dict = {}
    for i, v in enumerate(vals):
        by_dtype.setdefault(get_aval(v).dtype, []).append(i)
    for idxs in by_dtype.values():
        if len(idxs) == 1:
            out[idxs[0]] = mpi.allreduce(vals[idxs[0]], op, group)
            continue
        sizes = [get_aval(vals[i]).size for i in idxs]
        flat = concatenate([reshape(vals[i], (n,)) for i, n in zip(idxs, sizes)], 0)
        total = mpi.allreduce(flat, op, group)
        start = 0
        for i, n in zip(idxs, sizes):
            out[i] = reshape(slice_in_dim(total, start, start + n), get_aval(vals[i]).shape)
            start += n
    return out


def _make_reducing(name, allowed, reduce_mapped, reduce_unmapped, mpi_op):
    p = AxisPrimitive(name)
    p.multiple_results = True
    p.def_abstract_eval(_same_avals(name, allowed))
    p.def_impl(_unbound_impl(p))
    _reducing_batcher(p, reduce_mapped, reduce_unmapped, mpi_op)
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
    axis_name=...)`` binding the name. Bool operands are counted (int32, as jax.lax.psum)."""
    _check_groups("psum", axis_index_groups)
    names = _axis_names(axis_name)
    leaves, tree = _leaves("psum", x)
    if not leaves:
        return x
    # bools count, as in jax.lax.psum (int32 counts)
    from lax.elementwise import convert_element_type
    leaves = [convert_element_type(v, np.int32) if get_aval(v).dtype == np.bool_ else v
              for v in leaves]
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


psum_p = _make_reducing("psum", _num, _reduce_sum, _times_size, "sum")
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


pmax_p = _make_reducing("pmax", _ordered, _reduce_max, lambda v, size: v, "max")
pmin_p = _make_reducing("pmin", _ordered, _reduce_min, lambda v, size: v, "min")


# ========================================= pmean ========================================

def pmean(x, axis_name, *, axis_index_groups=None):
    """Mean of ``x`` over the members of the named axis (jax.lax.pmean): ``psum(x) /
    psum(1)``. Integer and bool operands give floating results (the default float dtype),
    like a true division."""
    _check_groups("pmean", axis_index_groups)
    from lax.elementwise import convert_element_type, div
    names = _axis_names(axis_name)

    def inexact(leaf):
        if is_python_scalar(leaf):
            dt, weak = dtypes.dtype_and_weak_type(leaf)
            leaf = Array(np.asarray(leaf, dt), weak)
        if not dtypes.is_inexact(get_aval(leaf).dtype):
            leaf = convert_element_type(leaf, dtypes.default_float_dtype())
        return leaf

    leaves, tree = tree_flatten(tree_map(inexact, x))
    if not leaves:
        return x
    # the member count is static (psum(1) would be one more collective over MPI); one
    # psum of every leaf (over processes: one allreduce per dtype)
    n = 1
    for name in names:
        n *= batching.axis_size(name, "pmean")
    totals = psum_p.bind(*leaves, axes=names)
    return tree_unflatten(tree, [div(t, Array(np.asarray(n, get_aval(t).dtype), weak_type=True))
                                 for t in totals])


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
        # the gathered axis is inserted among the per-member dims: keep this vmap's axis
        # in front of them
        return _pass_through(all_gather_p, axis_data, x, d, dict(
            axes=axes, axis=axis, tiled=tiled, axis_size=axis_size), ("axis",))
    _check_size("all_gather", axis_data, axis_size)
    if axis_data.group is not None:
        # this process's members [L, ...], then every process's: [P * L, ...] in global
        # member order (process-major)
        from lax import mpi
        from lax.shapes import reshape
        g = mpi.allgather(_stacked(x, d, axis_data.size), axis_data.group)
        shape = get_aval(g).shape
        stacked = batching.moveaxis(reshape(g, (shape[0] * shape[1],) + shape[2:]), 0, axis)
    elif d is None:
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
batching.primitive_batchers[all_gather_p] = _all_gather_batch
batching.batch_when_unmapped.add(all_gather_p)
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
    idx = iota(dtypes.int32, axis_data.size)
    if axis_data.group is not None:
        # global member index: process-major (process p holds members p*L ... p*L + L-1)
        from lax.elementwise import add
        offset = axis_data.group.rank * axis_data.size
        idx = add(idx, Array(np.asarray(offset, np.int32), weak_type=True))
    return [idx], [0]


axis_index_p = _AxisIndexPrimitive("axis_index")
axis_index_p.def_abstract_eval(lambda *, axis_name: ShapedArray((), dtypes.int32, False))
axis_index_p.def_impl(_unbound_impl(axis_index_p))
ad.defjvp_zero(axis_index_p)
batching.primitive_batchers[axis_index_p] = _axis_index_batch
batching.batch_when_unmapped.add(axis_index_p)
batching.axis_name_params[axis_index_p] = "axis_name"


# ============================ axis-permuting and scattering collectives =====================
# ppermute / pshuffle / pbroadcast / psum_scatter / all_to_all / pswapaxes / psend / precv
# / ragged_all_to_all / pcast / axis_size. Their batching rules see the members' values
# stacked along the vmap's axis (moved to the front) and rearrange that stack; a
# collective over another vmap's name is handed down with this vmap's axis first and its
# positional params shifted past it (``_pass_through``).

def _one_name(fname, axis_name):
    names = _axis_names(axis_name)
    if len(names) != 1:
        raise NotImplementedError(f"{fname}: one axis name at a time, got {names}")
    return names


def _pass_through(p, axis_data, x, d, params, positional=()):
    """Rule for a one-operand collective over names this vmap does not bind: bind it one
    level down on the stacked value, the stack axis first and the positional params
    (dimension numbers of the per-member value) moved past it."""
    if d is None:
        return [p.bind(x, **params)], [None]
    x = batching.moveaxis(x, d, 0)
    params = dict(params)
    for k in positional:
        params[k] = params[k] + 1
    return [p.bind(x, **params)], [0]


def _stacked(x, d, size):
    """The members' values stacked along axis 0 (an unmapped value is the same for all)."""
    return batching.bdim_at_front(x, d, size)


def _take_rows(x, idx):
    """``x[idx]`` along axis 0 for a static integer index list (a clamped gather)."""
    from lax.indexing import index_take
    return index_take(x, (Array(np.asarray(idx, np.int32)),), (0,))


def _rows_where(x, keep):
    """``x`` with the rows (axis 0) where ``keep`` is False replaced by zeros."""
    from lax.elementwise import select
    from lax.shapes import broadcast_in_dim, full
    shape = get_aval(x).shape
    mask = broadcast_in_dim(Array(np.asarray(keep, bool)), shape, (0,))
    return select(mask, x, full(shape, 0, get_aval(x).dtype))


# ======================================== axis_size ========================================

def axis_size(axis_name):
    """The size of the named mapped axis (jax.lax.axis_size), a Python int; for a tuple of
    names the product of their sizes. NameError outside a vmap binding the name."""
    size = 1
    for name in _axis_names(axis_name):
        size *= batching.axis_size(name, "axis_size")
    return size


# ================================ ppermute / pshuffle ======================================

def _canon_perm(fname, perm, size):
    try:
        pairs = tuple((int(s), int(t)) for s, t in perm)
    except (TypeError, ValueError):
        raise TypeError(f"{fname}: perm must be a sequence of (source, destination) pairs "
                        f"of ints, got {perm!r}") from None
    srcs, dsts = [s for s, _ in pairs], [t for _, t in pairs]
    if len(set(srcs)) != len(srcs) or len(set(dsts)) != len(dsts):
        raise ValueError(f"{fname}: perm {pairs} repeats a source or a destination index "
                         "(each member sends to at most one and receives from at most one)")
    bad = [i for i in srcs + dsts if not 0 <= i < size]
    if bad:
        raise ValueError(f"{fname}: perm {pairs} has indices outside the axis of size {size}")
    return pairs


def ppermute(x, axis_name, perm):
    """Collective permutation (jax.lax.ppermute; XLA 'CollectivePermute'): member
    ``dst`` receives member ``src``'s value for each ``(src, dst)`` pair of ``perm``;
    members that receive nothing get zeros. ``x`` is a pytree of arrays; shapes and dtypes
    are kept. Sources and destinations must be distinct and within the axis (ValueError).
    JAX's vmap rule accepts only full permutations; partial ones (zeros elsewhere, as
    JAX documents for devices) work here too. One axis name."""
    names = _one_name("ppermute", axis_name)
    pairs = _canon_perm("ppermute", perm, batching.axis_size(names[0], "ppermute"))
    leaves, tree = _leaves("ppermute", x)
    return tree_unflatten(tree, [ppermute_p.bind(leaf, axes=names, perm=pairs)
                                 for leaf in leaves])


def pshuffle(x, axis_name, perm):
    """``ppermute`` with the permutation given as a list (jax.lax.pshuffle): member ``i``
    receives member ``perm[i]``'s value. ``perm`` must be a permutation of
    ``range(axis size)`` (ValueError otherwise)."""
    names = _one_name("pshuffle", axis_name)
    size = batching.axis_size(names[0], "pshuffle")
    perm = [int(p) for p in perm]
    if sorted(perm) != list(range(size)):
        raise ValueError(f"pshuffle: perm {perm} is not a permutation of range({size}), the "
                         f"size of axis {names[0]!r}")
    return ppermute(x, axis_name, [(src, dst) for dst, src in enumerate(perm)])


def _apply_perm(v, pairs, size):
    src_of = dict((t, s) for s, t in pairs)
    idx = [src_of.get(b, 0) for b in range(size)]
    out = _take_rows(v, idx)
    if len(src_of) < size:
        out = _rows_where(out, [b in src_of for b in range(size)])
    return out


def _ppermute_batch(axis_data, vals, dims, *, axes, perm):
    (x,), (d,) = vals, dims
    if axis_data.name not in axes:
        return _pass_through(ppermute_p, axis_data, x, d, dict(axes=axes, perm=perm))
    size = axis_data.size
    if axis_data.group is not None:
        from lax import mpi
        return [mpi.ppermute(_stacked(x, d, size), perm, axis_data.group)], [0]
    if d is None and len(perm) == size:
        return [x], [None]  # every member gets the common value
    return [_apply_perm(_stacked(x, d, size), perm, size)], [0]


def _ppermute_transpose(cts, x, *, axes, perm):
    (ct,) = cts
    if type(ct) is Zero:
        return [None]
    return [ppermute_p.bind(ct, axes=axes, perm=tuple((t, s) for s, t in perm))]


ppermute_p = AxisPrimitive("ppermute")
ppermute_p.def_abstract_eval(lambda x, *, axes, perm: x)
ppermute_p.def_impl(_unbound_impl(ppermute_p))
ad.deflinear(ppermute_p, _ppermute_transpose)
batching.primitive_batchers[ppermute_p] = _ppermute_batch
batching.batch_when_unmapped.add(ppermute_p)
batching.axis_name_params[ppermute_p] = "axes"


# ======================================== pbroadcast =======================================

def pbroadcast(x, axis_name, source):
    """Every member receives member ``source``'s value of ``x`` (jax.lax.pbroadcast; XLA
    'CollectiveBroadcast'); equal to ``psum(where(axis_index == source, x, 0))``. The
    result is the same on every member. ValueError for a source outside the axis."""
    names = _one_name("pbroadcast", axis_name)
    size = batching.axis_size(names[0], "pbroadcast")
    source = int(source)
    if not 0 <= source < size:
        raise ValueError(f"pbroadcast: source {source} is outside axis {names[0]!r} of size "
                         f"{size}")
    leaves, tree = _leaves("pbroadcast", x)
    return tree_unflatten(tree, [pbroadcast_p.bind(leaf, axes=names, source=source)
                                 for leaf in leaves])


def _pbroadcast_batch(axis_data, vals, dims, *, axes, source):
    (x,), (d,) = vals, dims
    if axis_data.name not in axes:
        return _pass_through(pbroadcast_p, axis_data, x, d, dict(axes=axes, source=source))
    from lax.shapes import index_in_dim
    if axis_data.group is not None:
        # the source member lives on process source // L, as its row source % L
        from lax import mpi
        root, row = divmod(source, axis_data.size)
        v = x if d is None else index_in_dim(x, row, d, keepdims=False)
        return [mpi.bcast(v, root, axis_data.group)], [None]
    if d is None:
        return [x], [None]
    return [index_in_dim(x, source, d, keepdims=False)], [None]


def _pbroadcast_transpose(cts, x, *, axes, source):
    (ct,) = cts
    if type(ct) is Zero:
        return [None]
    from lax.elementwise import eq, select
    from lax.shapes import broadcast_in_dim, full
    (total,) = psum_p.bind(ct, axes=axes)
    aval = get_aval(total)
    here = eq(axis_index_p.bind(axis_name=axes[0]), Array(np.int32(source)))
    return [select(broadcast_in_dim(here, aval.shape, ()), total,
                   full(aval.shape, 0, aval.dtype))]


pbroadcast_p = AxisPrimitive("pbroadcast")
pbroadcast_p.def_abstract_eval(lambda x, *, axes, source: x)
pbroadcast_p.def_impl(_unbound_impl(pbroadcast_p))
ad.deflinear(pbroadcast_p, _pbroadcast_transpose)
batching.primitive_batchers[pbroadcast_p] = _pbroadcast_batch
batching.batch_when_unmapped.add(pbroadcast_p)
batching.axis_name_params[pbroadcast_p] = "axes"


# ======================================= psum_scatter ======================================

def psum_scatter(x, axis_name, *, scatter_dimension=0, axis_index_groups=None, tiled=False):
    """Sum over the members of the named axis, scattered (jax.lax.psum_scatter; XLA
    'ReduceScatter'): member ``b`` gets block ``b`` of the sum along
    ``scatter_dimension``. Untiled, that dimension must have the axis size and is removed
    (member b gets ``sum[b]``); tiled, its size must be a multiple of the axis size and
    shrinks by that factor. The transpose is ``all_gather``. ValueError for sizes that do
    not fit."""
    _check_groups("psum_scatter", axis_index_groups)
    names = _one_name("psum_scatter", axis_name)
    size = batching.axis_size(names[0], "psum_scatter")
    leaves, tree = _leaves("psum_scatter", x)

    def one(leaf):
        check_dtype("psum_scatter", get_aval(leaf), _num)
        shape = get_aval(leaf).shape
        nd = len(shape)
        if not -nd <= scatter_dimension < nd:
            raise ValueError(f"psum_scatter: scatter_dimension {scatter_dimension} is out of "
                             f"range for an operand of shape {shape}")
        sd = scatter_dimension % nd
        if (shape[sd] % size if tiled else shape[sd] != size):
            want = "a multiple of" if tiled else "equal to"
            raise ValueError(f"psum_scatter: dimension {sd} of the operand (shape {shape}) "
                             f"must be {want} the size {size} of axis {names[0]!r}")
        return reduce_scatter_p.bind(leaf, axes=names, scatter_dimension=sd,
                                     tiled=bool(tiled), axis_size=size)

    return tree_unflatten(tree, [one(leaf) for leaf in leaves])


def _reduce_scatter_abstract_eval(x, *, axes, scatter_dimension, tiled, axis_size):
    shape = list(x.shape)
    if tiled:
        shape[scatter_dimension] //= axis_size
    else:
        del shape[scatter_dimension]
    return ShapedArray(tuple(shape), x.dtype, x.weak_type)


def _reduce_scatter_batch(axis_data, vals, dims, *, axes, scatter_dimension, tiled,
                          axis_size):
    (x,), (d,) = vals, dims
    params = dict(axes=axes, scatter_dimension=scatter_dimension, tiled=tiled,
                  axis_size=axis_size)
    if axis_data.name not in axes:
        return _pass_through(reduce_scatter_p, axis_data, x, d, params, ("scatter_dimension",))
    _check_size("psum_scatter", axis_data, axis_size)
    total = _times_size(x, axis_data.size) if d is None else _reduce_sum(x, d)
    sd = scatter_dimension
    if tiled:
        from lax.shapes import reshape
        shape = get_aval(total).shape
        total = reshape(total, shape[:sd] + (axis_size, shape[sd] // axis_size)
                        + shape[sd + 1:])
    blocks = batching.moveaxis(total, sd, 0)   # [N, ...]: block b for member b
    if axis_data.group is not None:
        # this process's partial sums of every block; the sum over processes of blocks
        # [rank * L, (rank + 1) * L) comes here
        from lax import mpi
        from lax.shapes import reshape
        grp = axis_data.group
        shape = get_aval(blocks).shape
        blocks = reshape(blocks, (grp.size, axis_data.size) + shape[1:])
        return [mpi.reduce_scatter(blocks, grp)], [0]
    return [blocks], [0]


def _reduce_scatter_transpose(cts, x, *, axes, scatter_dimension, tiled, axis_size):
    (ct,) = cts
    if type(ct) is Zero:
        return [None]
    return [all_gather_p.bind(ct, axes=axes, axis=scatter_dimension, tiled=tiled,
                              axis_size=axis_size)]


def _check_size(fname, axis_data, traced_size):
    if axis_data.global_size != traced_size:
        raise ValueError(f"{fname} over axis {axis_data.name!r}: traced for an axis of size "
                         f"{traced_size}, but the axis has size {axis_data.global_size} (a "
                         "jitted function traced under another vmap was reused; retrace it)")


reduce_scatter_p = AxisPrimitive("reduce_scatter")
reduce_scatter_p.def_abstract_eval(_reduce_scatter_abstract_eval)
reduce_scatter_p.def_impl(_unbound_impl(reduce_scatter_p))
ad.deflinear(reduce_scatter_p, _reduce_scatter_transpose)
batching.primitive_batchers[reduce_scatter_p] = _reduce_scatter_batch
batching.batch_when_unmapped.add(reduce_scatter_p)
batching.axis_name_params[reduce_scatter_p] = "axes"


# ===================================== all_to_all / pswapaxes ==============================

def all_to_all(x, axis_name, split_axis, concat_axis, *, axis_index_groups=None, tiled=False):
    """Exchange blocks between the members of the named axis (jax.lax.all_to_all; XLA
    'AllToAll'): each member splits its value along ``split_axis`` into one block per
    member, sends block ``b`` to member ``b``, and joins what it receives along
    ``concat_axis`` in member order. Untiled, ``split_axis`` must have the axis size and is
    removed, and a new dimension of that size is inserted at ``concat_axis`` (a position in
    the result); tiled, the split dimension shrinks and the concat dimension grows by the
    axis size. Its transpose is the all_to_all with the axes swapped. ValueError for sizes
    that do not fit."""
    _check_groups("all_to_all", axis_index_groups)
    names = _one_name("all_to_all", axis_name)
    size = batching.axis_size(names[0], "all_to_all")
    leaves, tree = _leaves("all_to_all", x)

    def one(leaf):
        shape = get_aval(leaf).shape
        nd = len(shape)
        if not (-nd <= split_axis < nd and -nd <= concat_axis < nd):
            raise ValueError(f"all_to_all: split_axis {split_axis} / concat_axis "
                             f"{concat_axis} out of range for an operand of shape {shape}")
        s, c = split_axis % nd, concat_axis % nd
        if (shape[s] % size if tiled else shape[s] != size):
            want = "a multiple of" if tiled else "equal to"
            raise ValueError(f"all_to_all: split_axis {s} of the operand (shape {shape}) "
                             f"must be {want} the size {size} of axis {names[0]!r}")
        return all_to_all_p.bind(leaf, axes=names, split_axis=s, concat_axis=c,
                                 tiled=bool(tiled), axis_size=size)

    return tree_unflatten(tree, [one(leaf) for leaf in leaves])


def pswapaxes(x, axis_name, axis, *, axis_index_groups=None):
    """Swap the named mapped axis with positional ``axis`` of ``x`` (jax.lax.pswapaxes):
    ``all_to_all(x, axis_name, axis, axis)``; ``x.shape[axis]`` must equal the axis size."""
    return all_to_all(x, axis_name, axis, axis, axis_index_groups=axis_index_groups)


def _all_to_all_abstract_eval(x, *, axes, split_axis, concat_axis, tiled, axis_size):
    shape = list(x.shape)
    if tiled:
        shape[split_axis] //= axis_size
        shape[concat_axis] *= axis_size
    else:
        del shape[split_axis]
        shape.insert(concat_axis, axis_size)
    return ShapedArray(tuple(shape), x.dtype, x.weak_type)


def _all_to_all_batch(axis_data, vals, dims, *, axes, split_axis, concat_axis, tiled,
                      axis_size):
    (x,), (d,) = vals, dims
    params = dict(axes=axes, split_axis=split_axis, concat_axis=concat_axis, tiled=tiled,
                  axis_size=axis_size)
    if axis_data.name not in axes:
        return _pass_through(all_to_all_p, axis_data, x, d, params,
                             ("split_axis", "concat_axis"))
    _check_size("all_to_all", axis_data, axis_size)
    from lax.shapes import reshape
    n = axis_size                              # members (across every process)
    v = _stacked(x, d, axis_data.size)        # [m, ...]: member m's value (this process's)
    s = split_axis + 1                         # the split dim in the stacked value
    grp = axis_data.group

    def exchange(v):
        # [b, m, ...] over this process's senders m -> over this process's receivers b
        # and every sender m (process-major), through MPI_Alltoall of the blocks
        if grp is None:
            return v
        from lax import mpi
        shape = get_aval(v).shape
        v = reshape(v, (grp.size, shape[0] // grp.size) + shape[1:])
        v = batching.moveaxis(mpi.alltoall(v, grp), 0, 1)    # [b, q, m_q, ...]
        shape = get_aval(v).shape
        return reshape(v, (shape[0], shape[1] * shape[2]) + shape[3:])

    if not tiled:
        v = exchange(batching.moveaxis(v, s, 0))   # [b, m, ...]: the block m sends to b
        return [batching.moveaxis(v, 1, concat_axis + 1)], [0]
    shape = get_aval(v).shape
    v = reshape(v, shape[:s] + (n, shape[s] // n) + shape[s + 1:])
    # where the concat dim is now: after the split into (n, k) (concatenating along the
    # split dim itself joins the k parts), then after moving the n part to the front
    c = concat_axis + 1
    c = c + 1 if c >= s else c
    c = c + 1 if c < s else c
    v = exchange(batching.moveaxis(v, s, 0))   # [b, m, ...]
    # joined along the concat dim, member-major: m goes right before it, then they merge
    v = batching.moveaxis(v, 1, c - 1)
    shape = get_aval(v).shape
    v = reshape(v, shape[:c - 1] + (shape[c - 1] * shape[c],) + shape[c + 1:])
    return [v], [0]


def _all_to_all_transpose(cts, x, *, axes, split_axis, concat_axis, tiled, axis_size):
    (ct,) = cts
    if type(ct) is Zero:
        return [None]
    return [all_to_all_p.bind(ct, axes=axes, split_axis=concat_axis, concat_axis=split_axis,
                              tiled=tiled, axis_size=axis_size)]


all_to_all_p = AxisPrimitive("all_to_all")
all_to_all_p.def_abstract_eval(_all_to_all_abstract_eval)
all_to_all_p.def_impl(_unbound_impl(all_to_all_p))
ad.deflinear(all_to_all_p, _all_to_all_transpose)
batching.primitive_batchers[all_to_all_p] = _all_to_all_batch
batching.batch_when_unmapped.add(all_to_all_p)
batching.axis_name_params[all_to_all_p] = "axes"


# ======================================== psend / precv ====================================
# A send and its receive meet through a mailbox of the vmap that binds the axis: psend's
# rule posts the members' stacked values (per permutation), precv's rule takes the oldest
# matching post and applies the permutation. The token only orders them, as in XLA.
# Over a multi-process pmap axis the post holds this process's members [L, ...] and the
# precv moves them between the processes: one mpi_ppermute (lax/mpi.py: a header check,
# then one MPI_Sendrecv per process shift along perm; both ends derive the counts from
# perm, so no sizes travel and a pair cannot deadlock). The data moves at the precv, as
# an XLA Send completes only when its Recv does; under jit it is a host step in program
# order, like every MPI step.

_mailboxes: dict = {}   # id(AxisData) -> (AxisData, {perm: [stacked values]})


def _mailbox(axis_data):
    from tracer import core
    live = {id(m.global_data) for m in core.current_trace_stack()}
    for k in [k for k in _mailboxes if k not in live]:
        del _mailboxes[k]                     # vmaps that ended: drop unreceived sends
    entry = _mailboxes.get(id(axis_data))
    if entry is None or entry[0] is not axis_data:
        entry = _mailboxes[id(axis_data)] = (axis_data, {})
    return entry[1]


def psend(x, axis_name, perm):
    """Send ``x`` (a pytree of arrays) along the permutation ``perm`` of ``(source,
    destination)`` pairs (jax.lax.psend; XLA 'Send'); returns a token per array for the
    matching ``precv``. Under vmap the value travels to the ``precv`` with the same
    ``perm`` that follows in the same vmapped function (first sent, first received);
    JAX's own vmap rules for psend/precv fail, so this pairing is tracer's. Over a
    multi-process ``pmap`` axis the global members (process-major) exchange across the
    processes at the matching ``precv`` (one MPI_Sendrecv per process shift); results equal
    the single-process vmap's bit for bit. Differentiable from outside the map only:
    ``grad`` of a function that vmaps / pmaps them differentiates what their rules become
    (a gather of rows; across processes ``mpi_ppermute``, whose transpose is the inverse
    permutation). ``grad`` inside the mapped function raises NotImplementedError (JAX
    defines no jvp for psend/precv either)."""
    names = _one_name("psend", axis_name)
    pairs = _canon_perm("psend", perm, batching.axis_size(names[0], "psend"))
    leaves, tree = _leaves("psend", x)
    return tree_unflatten(tree, [psend_p.bind(leaf, axes=names, perm=pairs)
                                 for leaf in leaves])


def precv(token, out_shape, axis_name, perm):
    """Receive what the matching ``psend`` sent along ``perm`` (jax.lax.precv; XLA
    'Recv'): member ``dst`` gets member ``src``'s value for each pair; members receiving
    nothing get zeros. ``out_shape`` (a ShapeDtypeStruct) is the per-member shape and
    dtype, checked against the sent value (TypeError). ``token`` orders the receive
    after ``psend`` (or comes from ``create_token``). ValueError when nothing was sent
    along ``perm`` in this vmap (or pmap). Over a multi-process ``pmap`` axis this is where
    the data crosses the processes (``lax.mpi.ppermute``: MPI_Sendrecv); processes whose
    posted values disagree in shape or dtype raise ValueError on every process before any
    data moves."""
    names = _one_name("precv", axis_name)
    pairs = _canon_perm("precv", perm, batching.axis_size(names[0], "precv"))
    aval = ShapedArray(tuple(out_shape.shape), dtypes.canonicalize_dtype(out_shape.dtype))
    return precv_p.bind(token, axes=names, perm=pairs, out_aval=aval)


def _psend_batch(axis_data, vals, dims, *, axes, perm):
    from lax.tokens import create_token_p
    (x,), (d,) = vals, dims
    if axis_data.name not in axes:
        return _pass_through(psend_p, axis_data, x, d, dict(axes=axes, perm=perm))
    _mailbox(axis_data).setdefault(perm, []).append(_stacked(x, d, axis_data.size))
    return [create_token_p.bind()], [None]


def _precv_abstract_eval(token, *, axes, perm, out_aval):
    from tracer.core import AbstractToken
    if not isinstance(token, AbstractToken):
        raise TypeError(f"precv: the first argument must be a token (from psend or "
                        f"create_token), got {token.str_short()}")
    return out_aval


def _precv_batch(axis_data, vals, dims, *, axes, perm, out_aval):
    (token,), _ = vals, dims
    if axis_data.name not in axes:
        out = precv_p.bind(token, axes=axes, perm=perm,
                           out_aval=_batched(out_aval, axis_data.size))
        return [out], [0]
    posts = _mailbox(axis_data).get(perm)
    if not posts:
        raise ValueError(f"precv over axis {axis_data.name!r} with perm {perm}: nothing was "
                         "sent with psend along this permutation in this vmap (call psend "
                         "first, in the same vmapped or pmapped function)")
    v = posts.pop(0)
    got = get_aval(v)
    if got.shape[1:] != out_aval.shape or got.dtype != out_aval.dtype:
        raise TypeError(f"precv: out_shape {out_aval.str_short()} does not match the value "
                        f"sent by psend ({got.update(shape=got.shape[1:]).str_short()})")
    if axis_data.group is not None:
        from lax import mpi
        return [mpi.ppermute(v, perm, axis_data.group)], [0]
    return [_apply_perm(v, perm, axis_data.size)], [0]


def _not_across_processes(fname, axis_data):
    if axis_data.group is not None:
        raise NotImplementedError(
            f"{fname} over the pmap axis {axis_data.name!r}, which spans "
            f"{axis_data.group.size} processes, is not supported yet; use ppermute (or "
            "all_to_all) over it, or run it over a vmap axis inside the pmap")


def _batched(aval, size):
    return aval.update(shape=(size,) + aval.shape)


psend_p = AxisPrimitive("psend")
psend_p.def_abstract_eval(lambda x, *, axes, perm: abstract_token)
psend_p.def_impl(_unbound_impl(psend_p))
batching.primitive_batchers[psend_p] = _psend_batch
batching.batch_when_unmapped.add(psend_p)
batching.axis_name_params[psend_p] = "axes"

precv_p = AxisPrimitive("precv")
precv_p.def_abstract_eval(_precv_abstract_eval)
precv_p.def_impl(_unbound_impl(precv_p))
batching.primitive_batchers[precv_p] = _precv_batch
batching.batch_when_unmapped.add(precv_p)
batching.axis_name_params[precv_p] = "axes"


# =========================================== pcast ========================================

_PCAST_TO = ("varying", "reduced", "unreduced")


def pcast(x, axis_name, *, to: str):
    """Change how ``x`` is typed with respect to the named axes (jax.lax.pcast): JAX
    tracks, inside shard_map, whether a value varies across an axis (and whether it is a
    pending reduction); ``to`` is one of 'varying', 'reduced', 'unreduced'. vmap has no
    such types (every value may vary), so the values are returned unchanged, after
    checking ``to`` (ValueError) and that the names are bound (NameError). An empty
    ``axis_name`` returns ``x``."""
    if isinstance(axis_name, (set, frozenset)):
        raise TypeError(f"pcast: axis_name must be a name or a tuple of names, got "
                        f"{axis_name!r}")
    if axis_name == () or axis_name is None:
        return x
    if to not in _PCAST_TO:
        raise ValueError(f"pcast: unexpected to={to!r}; allowed values are {_PCAST_TO}")
    for name in _axis_names(axis_name):
        batching.axis_size(name, "pcast")
    return tree_map(lambda leaf: _leaves("pcast", leaf)[0][0], x)


# ==================================== ragged_all_to_all ===================================

def ragged_all_to_all(operand, output, input_offsets, send_sizes, output_offsets, recv_sizes,
                      *, axis_name, axis_index_groups=None):
    """All-to-all of ragged slices (jax.lax.ragged_all_to_all). The four offset/size
    arrays are 1-D integers of one length ``N``, a multiple of the axis size ``M``
    (``N // M`` slices per peer). Each member sends, for ``i < N``, the rows
    ``operand[input_offsets[i] : input_offsets[i] + send_sizes[i]]`` to member
    ``i // (N // M)``, which writes them into its copy of ``output`` at the offset this
    sender gives in ``output_offsets[i]``; the receiver's ``recv_sizes`` say how many rows
    arrive from each slot (they must equal the senders' ``send_sizes``, as in JAX). Rows of
    ``output`` nobody writes keep their values. ``operand`` and ``output`` share a dtype
    and their trailing dims.

    JAX supports this only across devices (its vmap rule raises NotImplementedError);
    here it works inside ``vmap(..., axis_name=...)``, in the order of JAX's reference
    pseudo-code (later slots overwrite earlier ones where write ranges overlap; ranges
    must stay inside the arrays). Linear in (operand, output): jvp and grad work; the
    transpose assumes the write ranges do not overlap."""
    _check_groups("ragged_all_to_all", axis_index_groups)
    names = _one_name("ragged_all_to_all", axis_name)
    size = batching.axis_size(names[0], "ragged_all_to_all")
    args = []
    for x in (operand, output, input_offsets, send_sizes, output_offsets, recv_sizes):
        (leaf,), _ = _leaves("ragged_all_to_all", x)
        args.append(leaf)
    # checked here: under vmap the batching rule runs without the per-member shape rule
    _ragged_a2a_abstract_eval(*[get_aval(a) for a in args], axes=names, axis_size=size)
    return ragged_all_to_all_p.bind(*args, axes=names, axis_size=size)


def _ragged_a2a_abstract_eval(op, out, io, ss, oo, rs, *, axes, axis_size):
    f = "ragged_all_to_all"
    if op.ndim < 1 or op.dtype != out.dtype or op.shape[1:] != out.shape[1:]:
        raise TypeError(f"{f}: operand {op.str_short()} and output {out.str_short()} must "
                        "share a dtype and all but their leading dimension")
    lengths = set()
    for name, a in (("input_offsets", io), ("send_sizes", ss), ("output_offsets", oo),
                    ("recv_sizes", rs)):
        if a.ndim != 1 or not dtypes.is_integer(a.dtype):
            raise TypeError(f"{f}: {name} must be a 1-D integer array, got {a.str_short()}")
        lengths.add(a.shape[0])
    if len(lengths) != 1:
        raise TypeError(f"{f}: input_offsets, send_sizes, output_offsets and recv_sizes "
                        f"must have one length, got {sorted(lengths)}")
    (n,) = lengths
    if n % axis_size:
        raise TypeError(f"{f}: the offset arrays' length {n} must be a multiple of the size "
                        f"{axis_size} of axis {axes[0]!r}")
    return ShapedArray(out.shape, out.dtype, out.weak_type and op.weak_type)


def _int_like(x, ref):
    from lax.elementwise import convert_element_type
    dt = get_aval(ref).dtype
    return x if get_aval(x).dtype == dt else convert_element_type(x, dt)


def _window_rows(src_rows, starts, lengths, dst_starts, count):
    """For ``count`` destination rows r: (mask r in [dst_start, dst_start + length),
    source row index dst->src clamped into [0, src_rows)). ``starts``/``lengths``/
    ``dst_starts`` are [P] vectors (one per destination array): results are [P, count]."""
    from lax import elementwise as ew
    from lax.shapes import broadcast_in_dim, broadcasted_iota, full
    p = get_aval(starts).shape[0]
    shape = (p, count)
    dt = get_aval(starts).dtype
    q = broadcasted_iota(dt, shape, 1)
    b = lambda v: broadcast_in_dim(v, shape, (0,))
    lo = b(dst_starts)
    inside = ew.bitwise_and(ew.le(lo, q), ew.lt(q, ew.add(lo, b(lengths))))
    src = ew.add(b(starts), ew.sub(q, lo))
    src = ew.clamp(full((), 0, dt), src, full((), src_rows - 1, dt))
    return inside, src


def _gather_rows(x, rows):
    """``x[rows]`` along axis 0 for a traced [P, count] index array: [P, count, ...]."""
    from lax.indexing import index_take
    from lax.shapes import reshape
    p, c = get_aval(rows).shape
    flat = index_take(x, (reshape(rows, (p * c,)),), (0,))
    return reshape(flat, (p, c) + get_aval(x).shape[1:])


def _select_rows(mask, new, old):
    from lax.elementwise import select
    from lax.shapes import broadcast_in_dim
    shape = get_aval(old).shape
    return select(broadcast_in_dim(mask, shape, tuple(range(get_aval(mask).ndim))), new, old)


def _ragged_a2a_batch(axis_data, vals, dims, *, axes, axis_size):
    from lax.shapes import index_in_dim, slice_in_dim
    if axis_data.name not in axes:
        # every operand with this vmap's axis in front (per-member leading dims shift by
        # one: the row dimension becomes dim 1, which the primitive does not support)
        raise NotImplementedError(
            "ragged_all_to_all inside a vmap over another axis name than its own is not "
            "supported; put the vmap over its axis innermost")
    _not_across_processes("ragged_all_to_all", axis_data)
    _check_size("ragged_all_to_all", axis_data, axis_size)
    m_size = axis_data.size
    op, out, io, ss, oo, rs = (_stacked(v, d, m_size) for v, d in zip(vals, dims))
    io, ss, oo, rs = (_int_like(v, io) for v in (io, ss, oo, rs))
    n = get_aval(io).shape[1]
    spd = n // m_size
    n0, k = get_aval(op).shape[1], get_aval(out).shape[1]
    result = out
    if n0 == 0 or k == 0:
        return [result], [0]
    for i in range(n):
        m, t = divmod(i, spd)
        # sender m's slot for each receiver j is its entry j * spd + t
        in_j = slice_in_dim(index_in_dim(io, m, 0, keepdims=False), t, n, spd)
        off_j = slice_in_dim(index_in_dim(oo, m, 0, keepdims=False), t, n, spd)
        size_j = index_in_dim(rs, i, 1, keepdims=False)
        inside, src = _window_rows(n0, in_j, size_j, off_j, k)
        rows = _gather_rows(index_in_dim(op, m, 0, keepdims=False), src)
        result = _select_rows(inside, rows, result)
    return [result], [0]


def _ragged_a2a_jvp(primals, tangents, *, axes, axis_size):
    out = ragged_all_to_all_p.bind(*primals, axes=axes, axis_size=axis_size)
    t_op, t_out = tangents[:2]
    if type(t_op) is Zero and type(t_out) is Zero:
        return [out], [Zero.from_primal_value(out)]
    t = ragged_all_to_all_p.bind(ad.instantiate_zeros(t_op), ad.instantiate_zeros(t_out),
                                 *primals[2:], axes=axes, axis_size=axis_size)
    return [out], [t]


def _ragged_a2a_transpose(cts, op, out, io, ss, oo, rs, *, axes, axis_size):
    from lax import elementwise as ew
    from lax.shapes import full, index_in_dim, reshape
    (ct,) = cts
    if type(ct) is Zero:
        return [None] * 6
    io, ss, oo, rs = (_int_like(v, io) for v in (io, ss, oo, rs))
    n = get_aval(io).shape[0]
    spd = n // axis_size
    op_aval = op.aval if ad.is_undefined_primal(op) else get_aval(op)
    n0 = op_aval.shape[0]
    k = get_aval(ct).shape[0]
    ct_out = ct_op = None
    if ad.is_undefined_primal(out):
        # rows this member received were overwritten: no cotangent flows to them
        (oo_here,) = [all_to_all_p.bind(oo, axes=axes, split_axis=0, concat_axis=0,
                                        tiled=True, axis_size=axis_size)]
        one = lambda v: reshape(v, (1,))
        written = None
        for i in range(n):
            inside, _ = _window_rows(1, one(index_in_dim(oo_here, i, 0, False)),
                                     one(index_in_dim(rs, i, 0, False)),
                                     one(index_in_dim(oo_here, i, 0, False)), k)
            written = inside if written is None else ew.bitwise_or(written, inside)
        keep = ew.bitwise_not(reshape(written, (k,)))
        ct_out = _select_rows(keep, ct, full(get_aval(ct).shape, 0, get_aval(ct).dtype))
    if ad.is_undefined_primal(op) and n0 and k:
        # slot s of this member was written on receiver s // spd at oo[s]: read it back
        gathered = all_gather_p.bind(ct, axes=axes, axis=0, tiled=False,
                                     axis_size=axis_size)
        acc = full(op_aval.shape, 0, get_aval(ct).dtype)
        one = lambda v: reshape(v, (1,))
        for s in range(n):
            idx = lambda v: one(index_in_dim(v, s, 0, False))
            inside, src = _window_rows(k, idx(oo), idx(ss), idx(io), n0)
            rows = _gather_rows(index_in_dim(gathered, s // spd, 0, keepdims=False), src)
            rows = reshape(rows, op_aval.shape)
            acc = ew.add(acc, _select_rows(reshape(inside, (n0,)), rows,
                                           full(op_aval.shape, 0, op_aval.dtype)))
        ct_op = acc
    elif ad.is_undefined_primal(op):
        ct_op = full(op_aval.shape, 0, op_aval.dtype)
    return [ct_op, ct_out, None, None, None, None]


ragged_all_to_all_p = AxisPrimitive("ragged_all_to_all")
ragged_all_to_all_p.def_abstract_eval(_ragged_a2a_abstract_eval)
ragged_all_to_all_p.def_impl(_unbound_impl(ragged_all_to_all_p))
ad.primitive_jvps[ragged_all_to_all_p] = _ragged_a2a_jvp
ad.primitive_transposes[ragged_all_to_all_p] = _ragged_a2a_transpose
batching.primitive_batchers[ragged_all_to_all_p] = _ragged_a2a_batch
batching.batch_when_unmapped.add(ragged_all_to_all_p)
batching.axis_name_params[ragged_all_to_all_p] = "axes"
