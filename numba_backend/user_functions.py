"""The users' Numba functions, as generated code calls them: ``lowering`` names a user's
function ``ffi.<token>`` (``lax.ffi.NumbaKernel.token``), ``codegen`` maps the module
``ffi`` here, and this module's attributes are the dispatchers of this process's tokens
(resolved when Numba types the generated code).

A token means a function of this process only: code importing this module is compiled in
the process that traced it (never by a compile worker) and with ``cache=False`` (Numba's
disk cache keys a function by its own file, not by the functions it calls, so an entry
would hold whatever function that token meant in an earlier process)."""
from __future__ import annotations

MODULE = __name__


def __getattr__(token: str):
    from lax.ffi import kernel_by_token
    k = kernel_by_token(token)
    if k is None:
        raise AttributeError(f"{MODULE}: no user Numba function {token!r} in this process "
                             "(generated code calling user functions runs where it was "
                             "traced)")
    return k.dispatcher


def calls_user_functions(text: str) -> bool:
    """Whether generated source ``text`` calls users' functions (through this module)."""
    return f"import {MODULE} " in text
