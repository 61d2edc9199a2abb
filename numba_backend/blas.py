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
from numba.np.linalg import call_xxgemm, call_xxgemv


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


def _gemv_intrinsic(matrix_first: bool):
    """``out[:] = a @ x`` (``matrix_first``) or ``out[:] = x @ a``: a 2-D float/complex
    matrix ``a`` of C or F layout times a vector held as a 2-D C/F array with one
    extent 1 (so its data is contiguous), into such an ``out``. BLAS GEMV as ``np.dot``
    (and NumPy's own matmul and dot) call it for a matrix times a vector: a 128 x 128
    float32 product costs 1.1 us through GEMV against 3.4 us through GEMM with n = 1,
    and 0.9 against 7.4 us for a transposed (F-layout) matrix. Extents must be >= 1 (the
    caller checks). Nothing else is checked."""

    def impl(typingctx, p, q, out):
        arrays = (p, q, out)
        if not all(isinstance(t, types.Array) and t.ndim == 2 for t in arrays):
            return None
        if len({t.dtype for t in arrays}) != 1 or \
                str(out.dtype) not in ("float32", "float64", "complex64", "complex128") or \
                any(t.layout not in "CF" for t in arrays):
            return None
        mty = p if matrix_first else q

        def codegen(context, builder, sig, args):
            arr = [context.make_array(t)(context, builder, v)
                   for t, v in zip(sig.args, args)]
            m, v = (arr[0], arr[1]) if matrix_first else (arr[1], arr[0])
            # np.dot's choice (numba.np.linalg.dot_3_vm): the matrix's layout sets the
            # transpose flag of Numba's GEMV wrapper
            do_trans = (mty.layout == "C") if matrix_first else (mty.layout == "F")
            call_xxgemv(context, builder, do_trans, mty,
                        cgutils.unpack_tuple(builder, m.shape), m.data, v.data,
                        arr[2].data)
            return context.get_dummy_value()

        return types.none(p, q, out), codegen

    return intrinsic(impl)


matvec_into = _gemv_intrinsic(True)
vecmat_into = _gemv_intrinsic(False)
