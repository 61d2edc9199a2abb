"""Lowering rules of the reduction family (lax/reductions.py): ``ReductionSpec``s.

Accumulators mirror the eager impls, and so does the order of float arithmetic: float
and complex sums are added up in NumPy's order (pairwise along the contiguous run of
reduced dims, else element by element: ``lowering.ir.reduce_run``), float products one
element at a time in C order as NumPy's multiply loop does (so they do not run in
parallel chunks); float16 sums and products accumulate in float32 and round to float16
where NumPy's loop does (after each inner run, or each element when the innermost dim is
kept). Integer sums wrap like NumPy's, max/min propagate NaN, argmax/argmin take the first
extremum (NaN counts as the extremum, the first NaN wins).

``reduce`` with a user computation is the eager impl's left fold: the accumulators start
at the init values (runtime operands) and, once per reduced element in row-major order
of the reduced dims, become the computation's element expression (its equations'
scalar rules, ``lowering.rules.scalar_jaxpr_exprs``) of (accumulators, elements); no
merge, so never split into parallel chunks (kept dims may still run in parallel). Eager
and compiled results are the same bit for bit wherever the computation's element-wise
ops are (README). A computation with an equation that has no element-wise lowering runs
the eager impl (host step).
"""
from __future__ import annotations

import numpy as np

from lax import reductions as rd
from lowering.passes import inline_calls
from lowering.rules import (ReductionSpec, limit, reduction_rules, scalar_jaxpr_exprs,
                            scalar_jaxpr_why_not)


def _acc_dtype(dt):
    dt = np.dtype(dt)
    return np.dtype(np.float32) if dt == np.float16 else dt


def _monoid(op, identity):
    def rule(ctx, x, *, axes):
        dt = np.dtype(x.dtype)
        acc_dt = _acc_dtype(dt)
        inexact = dt.kind in "fc" and op in ("add", "mul")

        def combine(ctx, accs, v, idx):
            return [ctx.op(op, accs[0], ctx.cast(v, acc_dt))]

        def merge(ctx, accs, parts):
            return [ctx.op(op, accs[0], parts[0])]

        def summand(ctx, v):
            return [ctx.cast(v, acc_dt)]

        return ReductionSpec(axes=tuple(axes), acc_dtypes=(acc_dt,),
                             init=[ctx.const(identity(dt), acc_dt)], combine=combine,
                             merge=None if inexact and op == "mul" else merge,
                             summand=summand if inexact and op == "add" else None,
                             round_dtype=dt if inexact and dt != acc_dt else None)
    return rule


def _max_identity(dt):
    return rd._minmax_identity(dt, True)


def _min_identity(dt):
    return rd._minmax_identity(dt, False)


def _and_identity(dt):
    return True if dt == np.bool_ else -1 if dt.kind == "i" else np.iinfo(dt).max


def _float_minmax(op, fallback):
    """Float max/min reduced over integer keys (the helpers "vecmath.max_key_*"): the loop
    vectorizes, NaN still propagates, and -0.0 < +0.0."""
    def rule(ctx, x, *, axes):
        dt = np.dtype(x.dtype)
        if dt.kind != "f":
            return fallback(ctx, x, axes=axes)
        bits = 64 if dt == np.float64 else 32
        key_dt = np.dtype(f"i{bits // 8}")
        kind = "max" if op == "max" else "min"
        start = -np.inf if op == "max" else np.inf
        start_key = _key(start, bits)

        def combine(ctx, accs, v, idx):
            k = ctx.call(f"vecmath.{kind}_key_f{bits}", v, dtype=key_dt)
            return [ctx.op(op, accs[0], k)]

        def finals(ctx, accs):
            return [ctx.call(f"scalar.unkey_f{bits}", accs[0],
                             dtype=np.float64 if bits == 64 else np.float32)]

        def merge(ctx, accs, parts):
            return [ctx.op(op, accs[0], parts[0])]

        return ReductionSpec(axes=tuple(axes), acc_dtypes=(key_dt,),
                             init=[ctx.const(start_key, key_dt)], combine=combine,
                             finals=finals, merge=merge)
    return rule


def _key(value, bits):
    ft, it = (np.float64, np.int64) if bits == 64 else (np.float32, np.int32)
    i = int(np.asarray(value, ft).view(it))
    return i ^ ((1 << (bits - 1)) - 1) if i < 0 else i


reduction_rules[rd.reduce_sum_p] = _monoid("add", lambda dt: 0)
reduction_rules[rd.reduce_prod_p] = _monoid("mul", lambda dt: 1)
reduction_rules[rd.reduce_max_p] = _float_minmax("max", _monoid("max", _max_identity))
reduction_rules[rd.reduce_min_p] = _float_minmax("min", _monoid("min", _min_identity))
for _p in (rd.reduce_max_p, rd.reduce_min_p):
    limit("reduction", _p, lambda in_avals, out_avals, **params: "complex max/min" if np.dtype(
        in_avals[0].dtype).kind == "c" else None)
reduction_rules[rd.reduce_and_p] = _monoid("and", _and_identity)
reduction_rules[rd.reduce_or_p] = _monoid("or", lambda dt: False if dt == np.bool_ else 0)
reduction_rules[rd.reduce_xor_p] = _monoid("xor", lambda dt: False if dt == np.bool_ else 0)


def _arg(is_max):
    def rule(ctx, x, *, axes, index_dtype):
        dt = np.dtype(x.dtype)
        acc_dt = _acc_dtype(dt)
        (axis,) = axes
        start = _max_identity(dt) if is_max else _min_identity(dt)

        def combine(ctx, accs, v, idx):
            best, pos = accs
            v = ctx.cast(v, acc_dt)
            better = ctx.op("gt" if is_max else "lt", v, best)
            if acc_dt.kind == "f":
                # NaN is the extremum: taken when the best so far is not NaN
                better = ctx.op("or", better, ctx.op("and", ctx.op("ne", v, v),
                                                     ctx.op("eq", best, best)))
            # the first element always replaces the start value (which may equal it)
            better = ctx.op("or", better, ctx.op("eq", idx[axis], ctx.index(0)))
            return [ctx.select(better, v, best), ctx.select(better, idx[axis], pos)]

        return ReductionSpec(axes=(axis,), acc_dtypes=(acc_dt, np.dtype(np.int64)),
                             init=[ctx.const(start, acc_dt), ctx.index(0)],
                             combine=combine, results=(1,))
    return rule


reduction_rules[rd.argmax_p] = _arg(True)
reduction_rules[rd.argmin_p] = _arg(False)


# ------------------------------- reduce (user computation) ------------------------------

def _carrier(dt):
    # float16 accumulators are carried as float32 holding float16 values (each combine's
    # result is a float16 expression, rounded by the code generator)
    return _acc_dtype(dt)


def _reduce_rule(ctx, *in_avals, computation, dimensions):
    """The eager impl's left fold: accumulators start at the init values (operands n..2n-1,
    read at run time) and take the computation's element expression of (accumulators,
    elements) once per reduced element, in row-major order of ``dimensions`` (the
    kernel's loops; no merge, so never reassociated into parallel chunks)."""
    n = len(in_avals) // 2
    computation = inline_calls(computation)
    dts = [np.dtype(a.dtype) for a in in_avals[:n]]
    accs_dt = tuple(_carrier(dt) for dt in dts)

    def combine(ctx, accs, x, idx):
        olds = [ctx.cast(a, dt) for a, dt in zip(accs, dts)]
        elems = [x] + [ctx.read(k) for k in range(1, n)]
        return [ctx.cast(e, cd) for e, cd in zip(
            scalar_jaxpr_exprs(ctx, computation, olds + elems), accs_dt)]

    def finals(ctx, accs):
        return [ctx.cast(a, dt) for a, dt in zip(accs, dts)]

    return ReductionSpec(axes=tuple(dimensions), acc_dtypes=accs_dt,
                         init=[ctx.cast(ctx.read(n + j), cd) for j, cd in enumerate(accs_dt)],
                         combine=combine, finals=finals)


def _reduce_limits(in_avals, out_avals, *, computation, dimensions):
    if not dimensions:
        return "no reduced dimensions"
    return scalar_jaxpr_why_not(inline_calls(computation))


reduction_rules[rd.reduce_p] = _reduce_rule
limit("reduction", rd.reduce_p, _reduce_limits)
