"""Lowering rules of the indexing family (lax/indexing.py).

gather, dynamic_slice and dynamic_update_slice are index remaps fused into their
consumers: each output element reads one operand element whose index is computed from the
start indices, clamped into range (XLA's rule), so every load is in bounds by
construction. FILL_OR_DROP gathers select the fill value for out-of-range slices (the
load itself still uses the clamped index).

The scatter family runs as a library call of kind ``"scatter"`` (``op``: 0 replace, 1 add,
2 sub, 3 mul, 4 min, 5 max, plus the primitive's params): the backend computes each update
window's start (clamped, or a keep flag for dropped windows) and a compiled kernel applies
the windows in order (row-major over the update scatter dimensions, so the last of
repeated indices wins for replace, as in the eager impl). float16 operands and user
update computations keep the eager impl.
"""
from __future__ import annotations

import numpy as np

from lax import indexing as ix
from lowering.ir import INDEX
from lowering.rules import limit, lowering_rules, remap_rules

_I64_MAX = int(np.iinfo(np.int64).max)


def _as_index(ctx, v):
    """An integer index value as int64; uint64 values beyond int64 saturate (they are out
    of range either way, and must not wrap to negative)."""
    if v.dtype == np.uint64:
        big = ctx.const(_I64_MAX, np.uint64)
        return ctx.select(ctx.op("gt", v, big), ctx.index(_I64_MAX), ctx.cast(v, INDEX))
    return ctx.cast(v, INDEX)


def _clamp(ctx, v, hi):
    return ctx.op("min", ctx.op("max", v, ctx.index(0)), hi)


def _empty(ctx):
    # No element is computed; emit no loads (loop-invariant loads may be hoisted out of
    # loops that run zero times, and an empty operand has nothing to read).
    return ctx.out_avals[0].size == 0


# ---------------------------------------- gather -----------------------------------------

def _gather(ctx, idx, x, indices, *, dimension_numbers, slice_sizes, indices_are_sorted,
            unique_indices, mode, fill_value):
    """out[i] = operand[start(G) + offset(i)] with G the batch part of i, start read from
    the index vector of G (clamped to [0, dim - slice_size]) and offset the offset dims
    of i scattered over the non-collapsed operand dims."""
    if _empty(ctx):
        return ctx.const(0, x.aval.dtype)
    dn = dimension_numbers
    rank = x.aval.ndim
    batch_pos = [i for i in range(len(idx)) if i not in dn.offset_dims]
    G = [idx[i] for i in batch_pos]
    starts = [ctx.index(0)] * rank
    valid = None
    for k, d in enumerate(dn.start_index_map):
        s = _as_index(ctx, indices.read(tuple(G) + (ctx.index(k),)))
        hi = x.dim(d) - ctx.iparam(slice_sizes[d], f"gather slice size, dim {d}")
        if mode == ix.FILL_OR_DROP:
            ok = ctx.op("and", ctx.op("ge", s, ctx.index(0)), ctx.op("le", s, hi))
            valid = ok if valid is None else ctx.op("and", valid, ok)
        starts[d] = _clamp(ctx, s, hi)
    for od, idd in zip(dn.operand_batching_dims, dn.start_indices_batching_dims):
        starts[od] = G[idd]
    offset_operand = ix._gather_offset_operand_dims(rank, dn)
    src = list(starts)
    for k, od in enumerate(dn.offset_dims):
        src[offset_operand[k]] = starts[offset_operand[k]] + idx[od]
    value = x.read(tuple(src))
    if valid is not None:
        fill = ix._default_fill_value(x.aval.dtype) if fill_value is None else fill_value
        value = ctx.select(valid, value, ctx.const(fill, x.aval.dtype))
    return value


remap_rules[ix.gather_p] = _gather


# ------------------------------------ dynamic slices -------------------------------------

def _dynamic_slice(ctx, idx, x, *starts, slice_sizes):
    """out[i] = operand[clamp(start, 0, dim - size) + i]."""
    if _empty(ctx):
        return ctx.const(0, x.aval.dtype)
    src = []
    for d, (i, s) in enumerate(zip(idx, starts)):
        hi = x.dim(d) - ctx.iparam(slice_sizes[d], f"dynamic_slice size, dim {d}")
        src.append(_clamp(ctx, _as_index(ctx, s.read(())), hi) + i)
    return x.read(tuple(src))


remap_rules[ix.dynamic_slice_p] = _dynamic_slice


def _dynamic_update_slice(ctx, idx, x, update, *starts):
    """out[i] = update[i - s] inside the window s = clamp(start, 0, dim - update_dim),
    operand[i] elsewhere (the update index clamped too, so the load is always valid)."""
    if _empty(ctx):
        return ctx.const(0, x.aval.dtype)
    old = x.read(tuple(idx))
    if update.aval.size == 0:
        return old
    inside = None
    src = []
    for d, (i, s) in enumerate(zip(idx, starts)):
        usize = update.dim(d)
        lo = _clamp(ctx, _as_index(ctx, s.read(())), x.dim(d) - usize)
        j = i - lo
        ok = ctx.op("and", ctx.op("ge", j, ctx.index(0)), ctx.op("lt", j, usize))
        inside = ok if inside is None else ctx.op("and", inside, ok)
        src.append(_clamp(ctx, j, usize - 1))
    if inside is None:   # rank 0: the update replaces the operand
        return update.read(())
    return ctx.select(inside, update.read(tuple(src)), old)


remap_rules[ix.dynamic_update_slice_p] = _dynamic_update_slice


# ---------------------------------------- scatter ----------------------------------------

_OPS = {ix.scatter_p: 0, ix.scatter_add_p: 1, ix.scatter_sub_p: 2, ix.scatter_mul_p: 3,
        ix.scatter_min_p: 4, ix.scatter_max_p: 5}


def _scatter_lower(prim):
    def rule(ctx, in_avals, out_avals, operand, indices, updates, **params):
        name = f"{prim.name} (Numba window loop, {params['mode'].name.lower()})"
        return ctx.library_call(name, "scatter", [operand, indices, updates], out_avals,
                                op=_OPS[prim], **params)
    return rule


def _scatter_limits(prim):
    def check(in_avals, out_avals, **params):
        if params["update_jaxpr"] is not None or in_avals[0].dtype == np.float16:
            return f"{prim.name}: user update computations and float16 run the eager impl"
        return None
    return check


for _p in _OPS:
    lowering_rules[_p] = _scatter_lower(_p)
    limit("structured", _p, _scatter_limits(_p))
