"""Element-wise integer primitives beyond XLA's basic set: ``mulhi`` (jax.lax.mulhi, the
CHLO-style multiply-high). Lowering: lowering/integer_ops.py."""
from __future__ import annotations

import numpy as np

from tracer.interpreters.ad import defjvp_zero
from lax.utils import LOWP_IMPLS, _int, narrow, promote_weak_scalars, standard_naryop


def mulhi(x, y, /):
    """Element-wise multiply-high (jax.lax.mulhi): for N-bit integers, the upper N bits
    of the exact 2N-bit product ``x * y`` (signed operands: the signed product, so
    ``mulhi(-1, 1) == -1``; unsigned: the unsigned one). Operands share an integer dtype
    and a shape (rank-0 operands and Python ints broadcast/adopt the dtype). Not
    differentiable (integer output: zero tangents). TypeError for non-integer operands
    or mismatched dtypes."""
    x, y = promote_weak_scalars("mulhi", x, y)
    return mulhi_p.bind(x, y)


_LOW32 = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)


def mulhi_u64(a, b):
    """High 64 bits of the 128-bit product of uint64 arrays, from 32-bit halves (the
    partial products fit in 64 bits; sums wrap only where the carry is accounted for)."""
    a_lo, a_hi = a & _LOW32, a >> _S32
    b_lo, b_hi = b & _LOW32, b >> _S32
    lo_lo, hi_lo = a_lo * b_lo, a_hi * b_lo
    lo_hi, hi_hi = a_lo * b_hi, a_hi * b_hi
    cross = (lo_lo >> _S32) + (hi_lo & _LOW32) + lo_hi
    return (hi_lo >> _S32) + (cross >> _S32) + hi_hi


def _mulhi_impl(x, y):
    dt = np.dtype(x.dtype)
    bits = dt.itemsize * 8
    with np.errstate(over="ignore"):
        if bits < 64:
            wide = np.int64 if dt.kind == "i" else np.uint64
            return ((x.astype(wide) * y.astype(wide)) >> wide(bits)).astype(dt)
        ux, uy = x.view(np.uint64), y.view(np.uint64)
        hi = mulhi_u64(ux, uy)
        if dt.kind == "i":
            # two's complement: x_u = x + 2^64 [x < 0], so the unsigned high part exceeds
            # the signed one by y_u [x < 0] + x_u [y < 0] (mod 2^64)
            zero = np.uint64(0)
            hi = hi - np.where(x < 0, uy, zero) - np.where(y < 0, ux, zero)
        return np.asarray(hi).view(dt).reshape(np.shape(hi))


mulhi_p = standard_naryop("mulhi", _mulhi_impl, _int)


def _lowp_mulhi(x, y):
    # the high half of the 2N-bit product at the narrow type's own width N
    n = {"int4": 4, "uint4": 4, "int2": 2, "uint2": 2}[np.dtype(x.dtype).name]
    p = x.astype(np.int32) * y.astype(np.int32)
    return narrow((p >> n).astype(np.int8), x.dtype)


LOWP_IMPLS["mulhi"] = _lowp_mulhi
defjvp_zero(mulhi_p)
