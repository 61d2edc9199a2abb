"""How arrays travel into and out of generated Numba code: Numba has no float16 on the
CPU and none of the ml_dtypes types, so arrays of those dtypes are passed as views of a
same-width unsigned integer (their bit patterns) and viewed back on the way out. Kernels
decode and encode the bits (``numba_backend.codegen``, helpers in
``numba_backend.scalar``). Imports NumPy only (compile workers and the program use it
before Numba loads)."""
from __future__ import annotations

import numpy as np

from tracer import dtypes

_F16_BITS = {np.dtype(np.float16): np.dtype(np.uint16)}
_U16, _U8 = np.dtype(np.uint16), np.dtype(np.uint8)


def _bits(dt):
    """The unsigned integer dtype of ``dt``'s bits, or None when Numba has ``dt``.
    (ml_dtypes stores every 8-, 4- and 2-bit type in one byte each; the 2-/4-bit
    integers as their low bits, not sign-extended: int4 -1 is the byte 0x0F.)"""
    b = _F16_BITS.get(dt)
    if b is None and dt in dtypes._LOWP:
        return _U16 if dt.itemsize == 2 else _U8
    return b


def storage_dtype(dt) -> np.dtype:
    """The dtype an array of ``dt`` has inside generated code: its bits' unsigned integer
    for float16 and the ml_dtypes types, else ``dt`` itself."""
    dt = np.dtype(dt)
    return _bits(dt) or dt


def needs_view(dt) -> bool:
    return _bits(np.dtype(dt)) is not None


def to_storage(a):
    """``a`` as generated code reads it (a view, no copy)."""
    a = np.asarray(a)
    bits = _bits(a.dtype)
    return a if bits is None else a.view(bits)


def from_storage(a, dt):
    """A buffer written by generated code, as an array of ``dt`` (a view)."""
    a = np.asarray(a)
    dt = np.dtype(dt)
    return a if _bits(dt) is None else a.view(dt)
