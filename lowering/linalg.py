"""Lowering rules of the linalg family (lax/linalg.py): contractions as library calls.

``dot_general`` runs on BLAS through ``np.matmul`` on whole arrays (any dimension numbers,
batched). The plan is made once per program: operands are brought to (batch, free,
contracting) order by strided views, so BLAS sees transposes as flags and nothing is
copied for the usual layouts; without batch dimensions the product is a 2-D matmul (one
GEMM call). Like the eager impl, the product accumulates in the result dtype when it is
wider (``preferred_element_type``), and bool is an or-of-ands.
"""
from __future__ import annotations

import numpy as np

from lax import linalg as la
from lowering.rules import NotLowerable, lowering_rules, remap_rules
from tracer import dtypes


def _prod(xs):
    return int(np.prod(xs, dtype=np.int64))


def make_dot_general(lhs_aval, rhs_aval, out_aval, dimension_numbers,
                     preferred_element_type=None):
    """A function ``(lhs, rhs) -> [out]`` computing dot_general for these avals."""
    (lc, rc), (lb, rb) = dimension_numbers
    ls, rs = lhs_aval.shape, rhs_aval.shape
    lfree = [i for i in range(len(ls)) if i not in lc and i not in lb]
    rfree = [i for i in range(len(rs)) if i not in rc and i not in rb]
    lperm = tuple(lb) + tuple(lfree) + tuple(lc)
    rperm = tuple(rb) + tuple(rc) + tuple(rfree)
    B = _prod([ls[i] for i in lb])
    M = _prod([ls[i] for i in lfree])
    N = _prod([rs[i] for i in rfree])
    K = _prod([ls[i] for i in lc])
    out_dt = np.dtype(out_aval.dtype)
    in_dt = np.dtype(lhs_aval.dtype)
    out_shape = tuple(out_aval.shape)
    is_bool = in_dt == np.bool_
    compute_dt = out_dt if dtypes.promote_types(in_dt, out_dt) == out_dt else in_dt
    lid = lperm == tuple(range(len(ls)))
    rid = rperm == tuple(range(len(rs)))

    def dot(lhs, rhs):
        a = lhs if lid else lhs.transpose(lperm)
        b = rhs if rid else rhs.transpose(rperm)
        if is_bool:
            a, b = a.astype(np.int64), b.astype(np.int64)
        elif compute_dt != in_dt:
            a, b = a.astype(compute_dt), b.astype(compute_dt)
        if B == 1:
            out = np.matmul(a.reshape(M, K), b.reshape(K, N))
        else:
            out = np.matmul(a.reshape(B, M, K), b.reshape(B, K, N))
        if is_bool:
            out = out > 0
        out = out.reshape(out_shape)
        return [out if out.dtype == out_dt else out.astype(out_dt)]

    return dot


_plans: dict = {}


def _dot_general_call(lhs, rhs, *, dimension_numbers, precision=None,
                      preferred_element_type=None):
    """The library function of ``dot_general`` steps (its params are the primitive's):
    plans are made once per shapes and dtypes."""
    key = (lhs.shape, rhs.shape, lhs.dtype, dimension_numbers, preferred_element_type)
    fn = _plans.get(key)
    if fn is None:
        from tracer.core import ShapedArray
        la = ShapedArray(lhs.shape, lhs.dtype)
        ra = ShapedArray(rhs.shape, rhs.dtype)
        out = la_abstract(la, ra, dimension_numbers, preferred_element_type)
        fn = make_dot_general(la, ra, out, dimension_numbers, preferred_element_type)
        if len(_plans) > 4096:
            _plans.clear()
        _plans[key] = fn
    return fn(lhs, rhs)


def la_abstract(la, ra, dimension_numbers, preferred_element_type):
    return la_mod._dot_general_abstract_eval(la, ra, dimension_numbers=dimension_numbers,
                                             precision=None,
                                             preferred_element_type=preferred_element_type)


def _dot_general_lower(ctx, in_avals, out_avals, lhs, rhs, *, dimension_numbers, precision,
                       preferred_element_type):
    (lc, rc), (lb, rb) = dimension_numbers
    name = f"dot_general[contract {lc}x{rc}, batch {lb}x{rb}] (BLAS via np.matmul)"
    return ctx.library_call(name, _dot_general_call, [lhs, rhs], out_avals,
                            dimension_numbers=dimension_numbers, precision=precision,
                            preferred_element_type=preferred_element_type)


def _dot_general_outer(ctx, idx, lhs, rhs, *, dimension_numbers, precision,
                       preferred_element_type):
    """Without contraction (every contracting dim of size 1: outer products, per-example
    gradients) dot_general is element-wise, out[b, i, j] = lhs[b, i] * rhs[b, j], and
    fuses with its producers and consumers instead of calling BLAS per batch member."""
    (lc, rc), (lb, rb) = dimension_numbers
    if any(lhs.aval.shape[d] != 1 for d in lc):
        raise NotLowerable("a real contraction: BLAS")
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
    return ctx.cast(ctx.op("mul", ctx.cast(x, compute), ctx.cast(y, compute)), out_dt)


lowering_rules[la.dot_general_p] = _dot_general_lower
remap_rules[la.dot_general_p] = _dot_general_outer
la_mod = la
