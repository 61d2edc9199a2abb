"""Lowering rules of the user-kernel primitives (lax/ffi.py).

``numba_elementwise`` is a scalar expression: a call of the user's function by its token,
``ffi.<token>`` (the backend maps the module ``ffi`` to its users' functions), so it fuses
like a built-in element-wise op. Its operands arrive in their own dtypes, the types the
function was typed for at trace time. ``numba_call`` is a library call of kind
"numba_call": the backend calls the kernel on materialized buffers (and a loop driver
calls it from compiled code).
"""
from __future__ import annotations

from lax import ffi
from lowering.rules import lowering_rules, scalar_exprs


def _elementwise_lower(ctx, *args, fn, out_dtype):
    return ctx.call(f"ffi.{fn.kernel.token}", *args, dtype=out_dtype)


def _numba_call_lower(ctx, in_avals, out_avals, *ins, kernel, result_avals, statics,
                      vmap_method):
    return ctx.library_call(f"numba_call {kernel.name}", "numba_call", list(ins), out_avals,
                            kernel=kernel, result_avals=tuple(result_avals), statics=statics)


scalar_exprs[ffi.numba_elementwise_p] = _elementwise_lower
lowering_rules[ffi.numba_call_p] = _numba_call_lower
