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
- ``copy_c`` replaces the per-driver ``register_jitable`` copy loops: compiled once per
  dtype and rank and kept in Numba's disk cache, a driver calling it types a call only.
"""
from __future__ import annotations

import numba_backend._numba  # noqa: F401  (first: Numba the cheap way)
import numba
from numba import types
from numba.core import cgutils
from numba.core.imputils import impl_ret_borrowed
from numba.extending import intrinsic
from numba.np.arrayobj import populate_array

from numba_backend.views import reshape_c

# A kernel's return type (it ends in ``return 0``): what ``call_kernel`` reserves for
# the result, which it drops. ``control_flow`` checks each kernel it calls has it.
KERNEL_RETURN = types.int64


@intrinsic
def call_kernel(typingctx, addr, *args):
    """Call the Numba-compiled function at address ``addr`` (an integer) with ``args``,
    as Numba calls a compiled function it links (status and exception propagated).
    Every array argument must be C-contiguous; the caller guarantees that the function
    was compiled for these argument types up to read-only-ness (the same data model)
    and returns ``KERNEL_RETURN``."""
    if not isinstance(addr, types.Integer):
        return None
    if any(isinstance(t, types.Array) and t.layout != "C" for t in args):
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


@intrinsic
def arena_view(typingctx, arena, start, shape):
    """A C-contiguous view of ``arena`` (a 1-D C-contiguous array) from element
    ``start`` on, of ``shape`` (a tuple of integers, every extent >= 0), sharing the
    arena's data and owner. Nothing is checked: the caller sized the arena."""
    if not isinstance(arena, types.Array) or arena.layout != "C" or arena.ndim != 1 or \
            not isinstance(start, types.Integer):
        return None
    if isinstance(shape, types.UniTuple) and isinstance(shape.dtype, types.Integer):
        nd = shape.count
    elif isinstance(shape, types.Tuple) and len(shape) == 0:
        nd = 0
    else:
        return None
    ret = arena.copy(ndim=nd, layout="C")

    def codegen(context, builder, sig, args):
        aryty, startty, shapety = sig.args
        ary = context.make_array(aryty)(context, builder, args[0])
        intp = context.get_value_type(types.intp)
        dims = [context.cast(builder, d, shapety[k], types.intp)
                for k, d in enumerate(cgutils.unpack_tuple(builder, args[2], nd))]
        first = context.cast(builder, args[1], startty, types.intp)
        strides = [None] * nd
        step = ary.itemsize
        for k in reversed(range(nd)):
            strides[k] = step
            step = builder.mul(step, dims[k])
        out = context.make_array(sig.return_type)(context, builder)
        populate_array(out, data=builder.gep(ary.data, [first]),
                       shape=cgutils.pack_array(builder, dims, ty=intp),
                       strides=cgutils.pack_array(builder, strides, ty=intp),
                       itemsize=ary.itemsize, meminfo=ary.meminfo, parent=ary.parent)
        return impl_ret_borrowed(context, builder, sig.return_type, out._getvalue())

    return ret(arena, start, shape), codegen


@numba.njit(cache=True, nogil=True, error_model="numpy")
def copy_c(src, dst):
    """``dst[...] = src`` for C-contiguous arrays of one shape (any rank >= 1), as one
    flat loop. Numba compiles an array assignment through its broadcasting setitem,
    which costs seconds of compile per driver."""
    n = src.size
    s = reshape_c(src, (n,))
    d = reshape_c(dst, (n,))
    for j in range(n):
        d[j] = s[j]
