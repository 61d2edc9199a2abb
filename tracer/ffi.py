"""User Numba kernels as primitives (``jax.ffi``'s role, for kernels written with Numba):
``numba_call`` calls a ``numba.njit`` kernel that writes its outputs, ``numba_elementwise``
turns a scalar ``numba.njit`` function into an element-wise op that fuses under jit.
Both are defined in ``lax/ffi.py`` (its docstring tells how the compiled code calls the
user's function and why that code is never taken from a disk cache)."""
from lax.ffi import KernelCompileError, numba_call, numba_elementwise

__all__ = ["KernelCompileError", "numba_call", "numba_elementwise"]
