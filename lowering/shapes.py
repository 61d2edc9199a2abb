"""Lowering rules of the shape family (lax/shapes.py): index remaps fused into consumers.

Each rule answers "which operand element is output element ``idx``?" (loopy-style index
algebra, stated per rule). Sizes and offsets are runtime ``IParam``s; only size-1 dims
(broadcasting), permutations, strides and interior padding are baked into the source.
"""
from __future__ import annotations

import numpy as np

from lax import shapes as sh
from lowering.ir import INDEX, Const
from lowering.rules import remap_rules


def _zero():
    return Const(0, INDEX)


def _broadcast_in_dim(ctx, idx, x, *, shape, broadcast_dimensions):
    """operand[j] = out[i] with i[bd[k]] -> j[k]; size-1 operand dims read index 0."""
    src = tuple(_zero() if x.aval.shape[k] == 1 else idx[d]
                for k, d in enumerate(broadcast_dimensions))
    return x.read(src)


remap_rules[sh.broadcast_in_dim_p] = _broadcast_in_dim


def _transpose(ctx, idx, x, *, permutation):
    """out[i] = operand[j] with j[perm[k]] = i[k]."""
    src = [None] * len(permutation)
    for k, p in enumerate(permutation):
        src[p] = idx[k]
    return x.read(tuple(src))


remap_rules[sh.transpose_p] = _transpose


def _rev(ctx, idx, x, *, dimensions):
    """j[d] = n_d - 1 - i[d] for reversed dims d."""
    src = tuple((x.dim(d) - 1 - i) if d in dimensions else i for d, i in enumerate(idx))
    return x.read(src)


remap_rules[sh.rev_p] = _rev


def _slice(ctx, idx, x, *, start_indices, limit_indices, strides):
    """j[d] = start[d] + i[d] * stride[d] (start at run time, stride baked)."""
    st = strides or (1,) * len(idx)
    src = []
    for d, (i, s, k) in enumerate(zip(idx, start_indices, st)):
        j = i * ctx.index(k) if k != 1 else i
        if x.aval.shape[d] != 1:
            j = j + ctx.iparam(s, f"slice start, dim {d}")
        src.append(j)
    return x.read(tuple(src))


remap_rules[sh.slice_p] = _slice


def _reshape_groups(in_shape, out_shape):
    """Pair minimal groups of input and output dims with equal products (size-1 dims
    left out): [(in_dims, out_dims), ...]; None if the shapes have a zero."""
    if 0 in in_shape or 0 in out_shape:
        return None
    ins = [d for d, n in enumerate(in_shape) if n != 1]
    outs = [d for d, n in enumerate(out_shape) if n != 1]
    groups = []
    a = b = 0
    while a < len(ins) or b < len(outs):
        gi, go = [ins[a]], [outs[b]]
        pi, po = in_shape[ins[a]], out_shape[outs[b]]
        a += 1
        b += 1
        while pi != po:
            if pi < po:
                gi.append(ins[a])
                pi *= in_shape[ins[a]]
                a += 1
            else:
                go.append(outs[b])
                po *= out_shape[outs[b]]
                b += 1
        groups.append((gi, go))
    return groups


def _reshape(ctx, idx, x, *, new_sizes, dimensions):
    """Row-major reshape, per group of dims with equal products: the group's linear index
    l = sum_k i[o_k] * prod(out sizes after o_k), then j[i_k] = l // prod(in sizes after
    i_k) % n[i_k] (the mod dropped for the group's first dim, the division for its last).
    Size-1 dims read index 0; a group of one dim on each side is a plain rename."""
    in_shape, out_shape = x.aval.shape, tuple(new_sizes)
    groups = _reshape_groups(in_shape, out_shape)
    src = [_zero()] * len(in_shape)
    if groups is None:       # an empty array: no element is ever read
        return x.read(tuple(src))
    for gi, go in groups:
        if len(gi) == 1 and len(go) == 1:
            src[gi[0]] = idx[go[0]]
            continue
        lin = None
        for k, o in enumerate(go):
            after = int(np.prod([out_shape[q] for q in go[k + 1:]], dtype=np.int64))
            term = idx[o] if after == 1 else idx[o] * ctx.iparam(after, f"reshape stride, out dim {o}")
            lin = term if lin is None else lin + term
        for k, i in enumerate(gi):
            after = int(np.prod([in_shape[q] for q in gi[k + 1:]], dtype=np.int64))
            j = lin if after == 1 else lin // ctx.iparam(after, f"reshape stride, in dim {i}")
            if k > 0:
                j = j % x.dim(i)
            src[i] = j
    return x.read(tuple(src))


remap_rules[sh.reshape_p] = _reshape


def _pad(ctx, idx, x, v, *, padding_config):
    """j = i - lo; an operand element iff 0 <= j, j % (it+1) == 0, j // (it+1) < n; then
    operand[j // (it+1)] (index clamped into range), else the padding value."""
    pad_value = v.read(())
    if x.aval.size == 0:
        return pad_value
    valid = None
    src = []
    for d, (i, (lo, hi, it)) in enumerate(zip(idx, padding_config)):
        n = x.dim(d)
        j = i - ctx.iparam(lo, f"pad low, dim {d}")
        conds = [ctx.op("ge", j, ctx.index(0))]
        if it:
            conds.append(ctx.op("eq", j % ctx.index(it + 1), ctx.index(0)))
            j = j // ctx.index(it + 1)
        conds.append(ctx.op("lt", j, n))
        for c in conds:
            valid = c if valid is None else ctx.op("and", valid, c)
        src.append(ctx.op("min", ctx.op("max", j, ctx.index(0)), n - 1))
    return ctx.select(valid, x.read(tuple(src)), pad_value)


remap_rules[sh.pad_p] = _pad


def _concatenate(ctx, idx, *xs, dimension):
    """Operand k covers [off_k, off_k + n_k) of ``dimension``: the last operand whose
    offset is <= i[dimension], read at i[dimension] - off_k (clamped)."""
    parts = [x for x in xs if x.aval.shape[dimension] != 0]
    if not parts:
        return ctx.const(0, ctx.out_avals[0].dtype)
    out = None
    off = 0
    reads = []
    for k, x in enumerate(parts):
        o = ctx.iparam(off, f"concatenate offset {k}") if k else ctx.index(0)
        j = idx[dimension] - o if k else idx[dimension]
        j = ctx.op("min", ctx.op("max", j, ctx.index(0)), x.dim(dimension) - 1)
        src = tuple(j if d == dimension else i for d, i in enumerate(idx))
        reads.append((o, x.read(src)))
        off += x.aval.shape[dimension]
    out = reads[-1][1]
    for k in range(len(reads) - 2, -1, -1):
        out = ctx.select(ctx.op("lt", idx[dimension], reads[k + 1][0]), reads[k][1], out)
    return out


remap_rules[sh.concatenate_p] = _concatenate


def _iota(ctx, idx, *, dtype, shape, dimension):
    return ctx.cast(idx[dimension], dtype)


remap_rules[sh.iota_p] = _iota
