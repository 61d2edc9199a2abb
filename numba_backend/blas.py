"""BLAS matrix products for generated loop drivers, without ``np.dot``'s typing.

``np.dot(a, b, out)`` inside a driver costs about 0.3 s of every driver's compile: Numba
types and compiles its general implementation (shape checks, layouts, exceptions) into
each driver. ``matmul_into`` is the call that implementation ends in, GEMM with the
arguments Numba's own wrapper (``numba_xxgemm``) gets, as an intrinsic: a few LLVM
instructions at each call site. The library called is the one NumPy's matmul calls
(``numba_backend.numpy_blas``, by the symbols ``_register`` names for LLVM), so a
driver's products have the bits of the NumPy tier's; Numba's wrapper calls SciPy's
BLAS, another OpenBLAS in wheels, and stays where NumPy's is not found.
"""
from __future__ import annotations

import numba_backend._numba  # noqa: F401  (first: Numba the cheap way)
from llvmlite import binding as llvm_binding
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic
from numba.np.linalg import call_xxgemm, call_xxgemv, get_blas_kind, make_constant_slot

from numba_backend import numpy_blas

_I8P = ir.IntType(8).as_pointer()


def _register():
    """Name NumPy's BLAS functions for LLVM in this process, before any driver is
    compiled or loaded from the cache (its machine code refers to them by name)."""
    fns = numpy_blas.functions()
    for name, addr in (fns or {}).items():
        if name != "int_bytes":
            llvm_binding.add_symbol(f"tracer_numpy_blas_{name}", addr)


_register()


def _symbol(name: str):
    """The LLVM symbol of NumPy's BLAS function ``name`` ("sgemm", ...), with the width
    of the library's integers in bytes."""
    return f"tracer_numpy_blas_{name}", numpy_blas.functions()["int_bytes"]


def _fortran_call(context, builder, dtype, op, args):
    """Call NumPy's BLAS ``op`` ("gemm"/"gemv") of ``dtype`` through its Fortran interface
    (every argument by reference): ``args`` are ("char", c), ("int", an integer value),
    ("scalar", a float constant of ``dtype``) or ("ptr", a data pointer)."""
    sym, width = _symbol(get_blas_kind(dtype) + op)
    int_t = ir.IntType(8 * width)
    refs = []
    for kind, v in args:
        if kind == "char":
            slot = cgutils.alloca_once_value(builder, ir.Constant(ir.IntType(8), ord(v)))
        elif kind == "int":
            slot = cgutils.alloca_once(builder, int_t)
            builder.store(builder.trunc(v, int_t) if width < 8 else v, slot)
        elif kind == "scalar":
            slot = make_constant_slot(context, builder, dtype, v)
        else:
            slot = v
        refs.append(builder.bitcast(slot, _I8P))
    fnty = ir.FunctionType(ir.VoidType(), [_I8P] * len(refs))
    builder.call(cgutils.get_or_insert_function(builder.module, fnty, sym), refs)


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
        if numpy_blas.functions() is None:
            call_xxgemm(context, builder, *parts)
            return context.get_dummy_value()
        # call_xxgemm's arguments: the row-major product as the column-major
        # out.T = y.T @ x.T
        (xt, (m, k), xd), (yt, (_, n), yd), (_, (_, ldc), od) = \
            parts[0:3], parts[3:6], parts[6:9]

        def param(t, shape, data):
            return ("char", "n" if t.layout == "C" else "t"), \
                ("int", shape[1] if t.layout == "C" else shape[0]), ("ptr", data)
        ta, lda, pa = param(yt, parts[4], yd)
        tb, ldb, pb = param(xt, parts[1], xd)
        _fortran_call(context, builder, sig.args[2].dtype, "gemm",
                      [ta, tb, ("int", n), ("int", m), ("int", k), ("scalar", 1.0), pa,
                       lda, pb, ldb, ("scalar", 0.0), ("ptr", od), ("int", ldc)])
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
            shape = cgutils.unpack_tuple(builder, m.shape)
            if numpy_blas.functions() is None:
                call_xxgemv(context, builder, do_trans, mty, shape, m.data, v.data,
                            arr[2].data)
                return context.get_dummy_value()
            # call_xxgemv's arguments (numba_xxgemv passes unit increments)
            if mty.layout == "F":
                mm, nn, lda = shape[0], shape[1], shape[0]
            else:
                mm, nn, lda = shape[1], shape[0], shape[1]
            one = ("int", context.get_constant(types.intp, 1))
            _fortran_call(context, builder, mty.dtype, "gemv",
                          [("char", "t" if do_trans else "n"), ("int", mm), ("int", nn),
                           ("scalar", 1.0), ("ptr", m.data), ("int", lda),
                           ("ptr", v.data), one, ("scalar", 0.0), ("ptr", arr[2].data),
                           one])
            return context.get_dummy_value()

        return types.none(p, q, out), codegen

    return intrinsic(impl)


matvec_into = _gemv_intrinsic(True)
vecmat_into = _gemv_intrinsic(False)
