"""Lowering of lax/integer_ops.py: ``mulhi`` as a fused scalar expression.

Up to 32 bits the exact product fits a 64-bit integer: widen, multiply, shift right by
the width (arithmetic for signed types, so the high half keeps the product's sign),
narrow. For 64 bits the product is assembled from 32-bit halves in uint64 arithmetic,
then corrected for signed operands, step for step as the NumPy impl
(``lax.integer_ops._mulhi_impl``), so eager and jit agree bit for bit.
"""
from __future__ import annotations

import numpy as np

from lax.integer_ops import mulhi_p
from lowering.rules import scalar_exprs

_U64 = np.dtype(np.uint64)


def _mulhi_u64(ctx, a, b):
    low = ctx.const(0xFFFFFFFF, _U64)
    s32 = ctx.const(32, _U64)
    a_lo, a_hi = ctx.op("and", a, low), ctx.op("shr_l", a, s32)
    b_lo, b_hi = ctx.op("and", b, low), ctx.op("shr_l", b, s32)
    lo_lo, hi_lo = ctx.op("mul", a_lo, b_lo), ctx.op("mul", a_hi, b_lo)
    lo_hi, hi_hi = ctx.op("mul", a_lo, b_hi), ctx.op("mul", a_hi, b_hi)
    cross = ctx.op("add", ctx.op("add", ctx.op("shr_l", lo_lo, s32),
                                 ctx.op("and", hi_lo, low)), lo_hi)
    return ctx.op("add", ctx.op("add", ctx.op("shr_l", hi_lo, s32),
                                ctx.op("shr_l", cross, s32)), hi_hi)


def _mulhi(ctx, x, y):
    dt = np.dtype(ctx.out_avals[0].dtype)
    bits = dt.itemsize * 8
    signed = dt.kind == "i"
    if bits < 64:
        wide = np.dtype(np.int64 if signed else np.uint64)
        prod = ctx.op("mul", ctx.cast(x, wide), ctx.cast(y, wide))
        hi = ctx.op("shr_a" if signed else "shr_l", prod, ctx.const(bits, wide))
        return ctx.cast(hi, dt)
    if not signed:
        return _mulhi_u64(ctx, x, y)
    ux = ctx.op("bitcast", x, dtype=_U64)
    uy = ctx.op("bitcast", y, dtype=_U64)
    hi = _mulhi_u64(ctx, ux, uy)
    zero_u = ctx.const(0, _U64)
    zero_s = ctx.const(0, dt)
    hi = ctx.op("sub", hi, ctx.select(ctx.op("lt", x, zero_s), uy, zero_u))
    hi = ctx.op("sub", hi, ctx.select(ctx.op("lt", y, zero_s), ux, zero_u))
    return ctx.op("bitcast", hi, dtype=dt)


scalar_exprs[mulhi_p] = _mulhi
