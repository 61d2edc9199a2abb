"""The BLAS that NumPy's own matmul calls, for the loop runner's matrix products.

A wheel of NumPy and a wheel of SciPy each bring their own OpenBLAS, often of different
versions (here: NumPy's 0.3.31, SciPy's 0.3.30), and Numba's BLAS wrappers
(``numba_xxgemm``/``numba_xxgemv``) call SciPy's. The two give different last bits for
some products (a 7 x 7 float32 matrix times a vector), so a scan whose products ran
through Numba's wrappers could differ from the same program run primitive by primitive
with NumPy (jit's NumPy tier, ``jit_compile="none"``). The loop runner calls the functions
found here instead: NumPy's library, through its Fortran interface (every argument a
pointer), with the arguments NumPy's matmul passes its CBLAS interface for the same
shapes and layouts (``numpy/_core/src/umath/matmul.c.src``; the CBLAS functions of
OpenBLAS reach the same kernels as these).

``functions()`` is None where NumPy's library is not found (NumPy built against a system
BLAS, which SciPy then shares: no mismatch to avoid), and the runner keeps Numba's
wrappers.
"""
from __future__ import annotations

import ctypes
import glob
import os
import threading

_found = False
_functions = None
_lock = threading.Lock()


def _library_paths():
    import numpy
    root = os.path.dirname(os.path.abspath(numpy.__file__))
    # the wheels' vendored libraries: Linux (auditwheel), macOS (delocate), Windows
    pats = [os.path.join(root, os.pardir, "numpy.libs", "*blas*"),
            os.path.join(root, ".dylibs", "*blas*"),
            os.path.join(root, os.pardir, "numpy.libs", "*blas*.dll")]
    return sorted({p for pat in pats for p in glob.glob(pat)})


def identity() -> str:
    """Which library ``functions()`` found (part of the generated code's cache keys: the
    drivers' machine code calls it, with its integer width)."""
    fns = functions()
    return "none" if fns is None else f"{os.path.basename(_path)} int{8 * fns['int_bytes']}"


_path = None


def functions() -> dict | None:
    """{"sgemm", "dgemm", "cgemm", "zgemm", "sgemv", ... : address} of NumPy's BLAS
    (Fortran interface), with "int_bytes": the width of its integer arguments (8 for an
    ILP64 build); None when not found."""
    global _found
    if _found:
        return _functions
    with _lock:     # (a second thread must not see the search begun and None found)
        if not _found:
            _search()
            _found = True
    return _functions


def _search() -> None:
    global _functions, _path
    for path in _library_paths():
        try:
            lib = ctypes.CDLL(path)    # (already loaded by NumPy: the same instance)
        except OSError:
            continue
        for prefix, suffix, width in (("scipy_", "_64_", 8), ("", "_64_", 8),
                                      ("scipy_", "_", 4), ("", "_", 4)):
            names = {f"{k}{op}": f"{prefix}{k}{op}{suffix}" for k in "sdcz"
                     for op in ("gemm", "gemv")}
            try:
                addrs = {key: ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
                         for key, name in names.items()}
            except AttributeError:
                continue
            _functions = dict(addrs, int_bytes=width)
            _path = path
            return
