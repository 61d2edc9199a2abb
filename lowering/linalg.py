"""Lowering rules of the linalg family (lax/linalg.py): contractions as library calls.

``dot_general`` is a library call of kind ``"dot_general"`` (the primitive's params): the
backend runs it on BLAS through ``np.matmul`` on whole arrays (any dimension numbers,
batched), and calls BLAS directly from compiled loop bodies. The plan is made once per
shapes: operands are brought to (batch, free, contracting) order by strided views, so
BLAS sees transposes as flags and nothing is copied for the usual layouts; without batch
dimensions the product is a 2-D matmul (one GEMM call). Like the eager impl, the product
accumulates in the result dtype when it is wider (``preferred_element_type``), and bool
is an or-of-ands.
"""
from __future__ import annotations

import numpy as np

from lax import linalg as la
from lowering.rules import limit, lowering_rules, remap_rules
from tracer import dtypes


def _dot_general_lower(ctx, in_avals, out_avals, lhs, rhs, *, dimension_numbers, precision,
                       preferred_element_type):
    (lc, rc), (lb, rb) = dimension_numbers
    name = f"dot_general[contract {lc}x{rc}, batch {lb}x{rb}] (BLAS via np.matmul)"
    return ctx.library_call(name, "dot_general", [lhs, rhs], out_avals,
                            dimension_numbers=dimension_numbers, precision=precision,
                            preferred_element_type=preferred_element_type)


def _dot_general_outer(ctx, idx, lhs, rhs, *, dimension_numbers, precision,
                       preferred_element_type):
    """Without contraction (every contracting dim of size 1: outer products, per-example
    gradients) dot_general is element-wise, out[b, i, j] = lhs[b, i] * rhs[b, j], and
    fuses with its producers and consumers instead of calling BLAS per batch member."""
    (lc, rc), (lb, rb) = dimension_numbers
    out_dt = np.dtype(ctx.out_avals[0].dtype)
    in_dt = np.dtype(lhs.aval.dtype)
    lfree = [i for i in range(lhs.aval.ndim) if i not in lc and i not in lb]
    rfree = [i for i in range(rhs.aval.ndim) if i not in rc and i not in rb]
    nb = len(lb)
    li = [None] * lhs.aval.ndim
    ri = [None] * rhs.aval.ndim
    for k, (a, b) in enumerate(zip(lb, rb)):
        li[a] = idx[k]
        ri[b] = idx[k]
    for k, a in enumerate(lfree):
        li[a] = idx[nb + k]
    for k, b in enumerate(rfree):
        ri[b] = idx[nb + len(lfree) + k]
    for a, b in zip(lc, rc):
        li[a] = ctx.index(0)
        ri[b] = ctx.index(0)
    x, y = lhs.read(tuple(li)), rhs.read(tuple(ri))
    if in_dt == np.bool_:
        return ctx.cast(ctx.op("and", x, y), out_dt)
    compute = out_dt if dtypes.promote_types(in_dt, out_dt) == out_dt else in_dt
    prod = ctx.op("mul", ctx.cast(x, compute), ctx.cast(y, compute))
    if compute.kind in "fc":
        # NumPy's matmul adds the one product to a zero (its loop without BLAS), so a
        # -0.0 product gives 0.0, as eager and the NumPy tier give it
        prod = ctx.op("add", ctx.const(0, compute), prod)
    return ctx.cast(prod, out_dt)


lowering_rules[la.dot_general_p] = _dot_general_lower
def _no_contraction(in_avals, out_avals, *, dimension_numbers, **params):
    (lc, _), _ = dimension_numbers
    return "a real contraction: BLAS" if any(in_avals[0].shape[d] != 1 for d in lc) else None


remap_rules[la.dot_general_p] = _dot_general_outer
limit("remap", la.dot_general_p, _no_contraction)
