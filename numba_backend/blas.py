"""BLAS matrix products for generated loop drivers, without ``np.dot``'s typing.

``np.dot(a, b, out)`` inside a driver costs about 0.3 s of every driver's compile: Numba
types and compiles its general implementation (shape checks, layouts, exceptions) into
each driver. ``matmul_into`` is the call that implementation ends in, Numba's own GEMM
wrapper (``numba_xxgemm``, which finds SciPy's ``cython_blas`` at its first call), as an
intrinsic: a few LLVM instructions at each call site, and the same BLAS call, so the same
bits as ``np.dot`` gave.
"""
from __future__ import annotations

import numba_backend._numba  # noqa: F401  (first: Numba the cheap way)
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic
from numba.np.linalg import call_xxgemm


@intrinsic
def matmul_into(typingctx, x, y, out):
    """``out[:] = x @ y`` for 2-D float32/64 or complex64/128 arrays of one dtype, each of
    C or F layout (a transpose is an F-layout view), ``out`` of C layout, shapes
    ``(m, k) @ (k, n) -> (m, n)`` with m, n, k >= 1 (the caller checks: BLAS rejects a
    zero leading dimension). Nothing else is checked."""
    arrays = (x, y, out)
    if not all(isinstance(t, types.Array) and t.ndim == 2 for t in arrays):
        return None
    if len({t.dtype for t in arrays}) != 1 or out.layout != "C" or \
            str(out.dtype) not in ("float32", "float64", "complex64", "complex128") or \
            any(t.layout not in "CF" for t in arrays):
        return None

    def codegen(context, builder, sig, args):
        parts = []
        for t, v in zip(sig.args, args):
            a = context.make_array(t)(context, builder, v)
            parts += [t, cgutils.unpack_tuple(builder, a.shape), a.data]
        call_xxgemm(context, builder, *parts)
        return context.get_dummy_value()

    return types.none(x, y, out), codegen
