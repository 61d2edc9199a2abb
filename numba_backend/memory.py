"""The process's memory policies: the allocator's for large arrays (glibc only), and a
garbage collector frozen at exit (``freeze_gc_at_exit``).

Every array a program computes is a NumPy allocation, and glibc serves one of more than
128 KB from a fresh ``mmap`` that it returns to the system when freed (its thresholds
adapt, but a program holding two such temporaries at once keeps hitting them): each
new buffer then page-faults on its first writes. Measured on one machine: a kernel
writing two 1 MB float64 temporaries per pass took 0.87-0.98 ms instead of 0.06 ms, and
``np.tanh(np.tanh(y))`` over 2**17 doubles 1.22 ms instead of 0.53 ms; and a 4096 x 4096
float32 softmax (64 MB results, which the caller keeps) took 21 ms a call with a 64 MB
threshold against 16 ms below it, its second call 146 ms (a 128 MB trim threshold: 105
ms) against 21 ms. So when the backend loads, arrays below 128 MB come from the heap and
up to 256 MB of freed memory is kept for reuse (``mallopt``: M_MMAP_THRESHOLD, M_TRIM_THRESHOLD), the policy of
allocators made for array workloads. It applies to the whole process, NumPy included;
``TRACER_MALLOC_TUNING=0``, or the user's own ``MALLOC_MMAP_THRESHOLD_`` or
``MALLOC_TRIM_THRESHOLD_``, leaves glibc's defaults alone.
"""
from __future__ import annotations

import atexit
import ctypes
import gc
import os
import sys

MMAP_THRESHOLD = 128 << 20
TRIM_THRESHOLD = 256 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3     # glibc's malloc.h

tuned = False


def tune_malloc() -> bool:
    """Apply the policy above once; whether it is in force."""
    global tuned
    if tuned:
        return True
    if not sys.platform.startswith("linux") or \
            os.environ.get("TRACER_MALLOC_TUNING", "1") == "0" or \
            "MALLOC_MMAP_THRESHOLD_" in os.environ or "MALLOC_TRIM_THRESHOLD_" in os.environ:
        return False
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version     # glibc (musl has no mallopt thresholds)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    tuned = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and \
        bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return tuned


def freeze_gc_at_exit() -> None:
    """At exit, move every object to the garbage collector's permanent generation
    (``gc.freeze``), once per process.

    Python's last collections at exit traverse every live object, and a process that
    loaded Numba's compiler holds hundreds of thousands (its typing and lowering
    registries): measured, a process exited 0.17 s after compiling one Numba function,
    and 0.32-0.37 s after a cold run of the benchmarks' mlp_train_step; frozen first,
    0.08 s. Objects are still freed by their reference counts as the modules are torn
    down; only the finalizers of cyclic garbage still alive at exit do not run, which
    CPython does not promise either."""
    global _frozen_at_exit
    if not _frozen_at_exit:
        _frozen_at_exit = True
        atexit.register(gc.freeze)


_frozen_at_exit = False
