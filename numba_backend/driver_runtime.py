"""What generated loop drivers (``numba_backend.control_flow``) call besides their
kernels: a call through a kernel's address, views into the drivers' scratch arenas and
the copy loops. All fixed code, so a driver's compile types none of it anew.

Compiling a driver is mostly LLVM's and the argument wrappers' work, not the driver's
own statements:

- A driver calling a kernel's dispatcher by name links the kernel's code into its own
  module, and LLVM optimizes and compiles it a second time, as part of the driver (the
  linked tanh kernel of scan_rnn's forward driver: a third of that driver's compile).
  ``call_kernel`` calls the kernel's compiled function through its address instead
  (Numba's own calling convention, the address read from an array the caller fills
  in), so the driver holds a call instruction only, whether it is compiled or loaded
  from the disk cache, and a kernel error (an index out of bounds under
  ``NUMBA_BOUNDSCHECK``) still propagates.
- Every array argument costs the driver about 10 ms of compile (its unboxing in the
  Python wrapper, its fields in the function's signature): a driver of 56 arrays spent
  0.6 s on them. The scratch buffers of one dtype are carved out of one array (an
  arena) by ``arena_view``, a few instructions each.
- ``copy_c`` and ``dot_mm`` replace per-driver ``register_jitable`` copy loops and
  matrix products: compiled once per argument types and kept in Numba's disk cache.
  Drivers call them by address too (``call_kernel``, their addresses in ``KP`` beside
  the kernels'): called by name, each linked a copy of its code into every driver that
  LLVM optimized again (0.05-0.1 s of compile per function and driver, measured on
  scan_rnn's drivers).
"""
from __future__ import annotations

import numba_backend._numba  # noqa: F401  (first: Numba the cheap way)
from numba_backend._numba import njit
import numba
import numpy as np
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from numba_backend.blas import matmul_into, matvec_into, vecmat_into
from numba_backend.compile_worker import array_spec
from numba_backend.views import c_view, reshape_c

# A kernel's return type (it ends in ``return 0``): what ``call_kernel`` reserves for
# the result, which it drops. ``control_flow`` checks each kernel it calls has it.
KERNEL_RETURN = types.int64


@intrinsic
def call_kernel(typingctx, addr, *args):
    """Call the Numba-compiled function at address ``addr`` (an integer) with ``args``,
    as Numba calls a compiled function it links (status and exception propagated).
    The caller guarantees that the function was compiled for these argument types up
    to read-only-ness (the same data model; layouts included: a kernel takes
    C-contiguous arrays, ``dot_mm`` a transposed view as an F-layout one) and returns
    ``KERNEL_RETURN``."""
    if not isinstance(addr, types.Integer):
        return None

    def codegen(context, builder, sig, llargs):
        argtys = tuple(sig.args[1])
        argvals = cgutils.unpack_tuple(builder, llargs[1], len(argtys))
        fnty = context.call_conv.get_function_type(KERNEL_RETURN, argtys)
        fn = builder.inttoptr(llargs[0], fnty.as_pointer())
        status, _ = context.call_conv.call_function(builder, fn, KERNEL_RETURN, argtys,
                                                    argvals)
        with cgutils.if_unlikely(builder, status.is_error):
            context.call_conv.return_status_propagate(builder, status)
        return context.get_dummy_value()

    return types.none(addr, types.StarArgTuple.from_types(args)), codegen


@intrinsic(prefer_literal=True)
def arena_view(typingctx, arena, ip, k, nd):
    """A C-contiguous view of ``arena`` (a 1-D C-contiguous array) of rank ``nd``, from
    element ``ip[k]`` on, of extents ``ip[k + 1 : k + 1 + nd]`` (``ip``: a 1-D int64
    array; ``k`` and ``nd`` constants), sharing the arena's data and owner. The reads
    of ``ip`` are plain loads (a driver's ``IP[j]`` each costs an indexing's typing and
    lowering). Nothing is checked: the caller sized the arena and ``ip``."""
    if not isinstance(arena, types.Array) or arena.layout != "C" or arena.ndim != 1 or \
            not isinstance(ip, types.Array) or ip.ndim != 1 or ip.layout != "C" or \
            ip.dtype != types.int64 or not isinstance(k, types.IntegerLiteral) or \
            not isinstance(nd, types.IntegerLiteral):
        return None
    first_k, rank = k.literal_value, nd.literal_value
    ret = arena.copy(ndim=rank, layout="C")

    def codegen(context, builder, sig, args):
        aryty, ipty = sig.args[:2]
        ary = context.make_array(aryty)(context, builder, args[0])
        ipa = context.make_array(ipty)(context, builder, args[1])
        vals = [builder.load(builder.gep(ipa.data, [context.get_constant(types.intp, j)]))
                for j in range(first_k, first_k + 1 + rank)]
        first, dims = vals[0], vals[1:]
        return c_view(context, builder, sig.return_type, ary, builder.gep(ary.data, [first]),
                      dims)

    return ret(arena, ip, k, nd), codegen


@njit(cache=True, nogil=True, error_model="numpy")
def copy_c(src, dst):
    """``dst[...] = src`` for C-contiguous arrays of one shape (any rank >= 1), as one
    flat loop; returns 0 (``KERNEL_RETURN``: drivers call it by address). Numba compiles an array assignment through its broadcasting setitem,
    which costs seconds of compile per driver."""
    n = src.size
    s = reshape_c(src, (n,))
    d = reshape_c(dst, (n,))
    for j in range(n):
        d[j] = s[j]
    return 0


def dot_mm_call(lhs_aval, rhs_aval, out_aval, dimension_numbers):
    """How a ``dot_general`` step runs as ``dot_mm``: (transpose lhs, transpose rhs,
    ``compile_worker.array_spec`` signature; a transposed operand is an F-layout view),
    or None where it is not a product of two float or complex matrices of the result's
    dtype with one contracted dim and no batch dims (float16 excluded)."""
    (lc, rc), (lb, _) = dimension_numbers
    dt = np.dtype(out_aval.dtype)
    if lb or len(lc) != 1 or lhs_aval.ndim != 2 or rhs_aval.ndim != 2 or \
            np.dtype(lhs_aval.dtype) != dt or np.dtype(rhs_aval.dtype) != dt or \
            dt.kind not in "fc" or dt == np.float16:
        return None
    ta, tb = tuple(lc) != (1,), tuple(rc) != (0,)
    return ta, tb, [array_spec(dt, 2, False, "F" if ta else "C"),
                    array_spec(dt, 2, False, "F" if tb else "C"), array_spec(dt, 2, False)]


@njit(cache=True, nogil=True, error_model="numpy")
def dot_mm(a, b, out):
    """``out[:] = a @ b`` for 2-D arrays of one float or complex dtype, ``a`` (m, k) and
    ``b`` (k, n) each C or F layout (a transpose is an F-layout view), ``out`` (m, n)
    C-contiguous: the matrix products of the drivers' ``dot_general`` steps, compiled
    once per dtype and layouts instead of typed by each driver; returns 0
    (``KERNEL_RETURN``: drivers call it by address). The same BLAS calls as
    NumPy's matmul makes, in NumPy's library (``numba_backend.blas``), so the NumPy
    tier's bits."""
    m, k = a.shape
    n = b.shape[1]
    if k == 1:
        # a single contracted element (an outer product): BLAS GEMM with k = 1 is slow;
        # the loop gives the same exact products, added to a zero as NumPy's matmul
        # adds them (a -0.0 product gives 0.0)
        for i in range(m):
            for j in range(n):
                out[i, j] = 0
                out[i, j] += a[i, 0] * b[0, j]
    elif k == 0:
        # (BLAS takes no empty operand)
        for i in range(m):
            for j in range(n):
                out[i, j] = 0
    elif n == 1 and m > 1:
        # a matrix times a vector: GEMV, as NumPy's matmul and dot call it (GEMM with
        # n = 1 costs 3-8 times as much at 128 x 128); 1 x 1 products stay with GEMM
        matvec_into(a, b, out)
    elif m == 1 and n > 1:
        vecmat_into(a, b, out)
    elif m != 0 and n != 0:
        matmul_into(a, b, out)
    return 0
