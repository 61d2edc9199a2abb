"""The thread policy of compiled programs: one BLAS pool a thread per core, and the cores
busy compile workers hold taken from the program's pools, given back when they finish.

A compiled program computes with two kinds of thread pools: the BLAS libraries its matrix
products and factorizations call and Numba's pool for its parallel kernels, each one
thread per core by default. Installed from wheels, NumPy and SciPy each bring their own
OpenBLAS (NumPy's serves a program's products, the loops' too (``numpy_blas``), and most
factorizations, SciPy's the triangular solves and, where NumPy's library is not found,
the loops' products through Numba), and an OpenBLAS pool's
threads spin for a while after each call: two pools of a thread per core take turns
fighting over the cores. Measured on this 2-core machine, steady state per call with
(NumPy's, SciPy's) threads: gp_fit (``benchmarks/cold_start_jobs.py``) 12.3 ms with
(2, 2), 4.1 with (1, 1), 4.4 with (2, 1); mlp_train_step 5.4, 6.1, 3.7. And while
tracer's compile workers compile, they hold cores too: the 8 matrix products of
tutorials/05's training step took 942 us on OpenBLAS's 2 threads beside one busy
process, 206 us on 1 (130 us on 2 threads when idle); mlp_train_step's cold run (100
calls) took 4.7-6.2 s with the default pools, 1.4-2.3 s with this policy.

The policy, from the first jitted call on:

- where more than one BLAS library is loaded, the one NumPy links keeps its pool and the
  others get one thread;
- while compile workers are busy, a pool of more threads gets ``max(1, cores - busy
  workers)`` (``cores``: the CPUs this process may run on), and its size back once they
  are idle; parallel kernels run their serial versions while that leaves one thread.

Sizes change when a jitted call starts, on the calling thread (so no product is running in
the program meanwhile). Pools the user sized are left alone:

- the BLAS pools when ``OPENBLAS_NUM_THREADS``, ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``,
  ``GOTO_NUM_THREADS``, ``BLIS_NUM_THREADS`` or ``VECLIB_MAXIMUM_THREADS`` is set, and a
  pool whose size changed since tracer last set it (a ``threadpoolctl`` limit of the
  user's, ``tracer.distributed``'s per-process share), from then on;
- Numba's pool when ``NUMBA_NUM_THREADS`` is set (Numba's ``set_num_threads`` is per
  calling thread: a user's own setting on that thread, once it differs from tracer's).

OpenBLAS splits some products differently for different thread counts, so a product made
while the pools are smaller may differ in its last bits from the same product made before
or after (measured here: float32/float64 (64, 9000) @ (9000, 64), a dot of 11000 float64
elements; products of fewer than 4096 terms agreed in every shape tried). Only the BLAS
products are affected (parallel kernels give the same bits for any thread count); set one
of the variables above to keep one size throughout.

Other processes' load is not watched: on a shared machine, set the variables above.
"""
from __future__ import annotations

import os
import sys
import threading

_BLAS_ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
             "GOTO_NUM_THREADS", "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")
# (the modules whose import loads SciPy's BLAS: triangular solves, and Numba's BLAS
# wrappers, whose check ``numba_backend._numba`` makes at a process's first compile,
# taking SciPy's module out of ``sys.modules`` again)
_SCIPY_BLAS = ("scipy.linalg.cython_blas", "numba.np.arraymath")

pending = True           # the next jitted call calls apply() (checked on its path)
_dirty = True            # sizes to set: the target changed, or a library appeared
_scipy_seen = False      # SciPy's BLAS was loaded at the last scan
_target = None           # threads the pools should have now; None: their defaults
_lock = threading.Lock()
_blas = None             # {library path: [threadpoolctl controller, size, size set]}
_user_sized: set = set()     # library paths whose size the user changed
_numba_default = None
_numba_set = threading.local()   # (Numba's size is per thread) .size: tracer's last


def cores() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def workers_busy(n: int) -> None:
    """``n`` compile workers are compiling now (``workers.Pool`` calls this as jobs go out
    and come back)."""
    global _target, pending, _dirty
    want = None if n <= 0 else max(1, cores() - n)
    with _lock:
        if want != _target:
            _target = want
            _dirty = pending = True


def _scan(known: dict) -> dict:
    """The BLAS libraries this process has loaded, each with the size tracer gives it
    when no worker is busy (``known``'s entries kept as they are); {} when the user sized
    them through the environment (or without threadpoolctl)."""
    if any(os.environ.get(v) for v in _BLAS_ENV):
        return {}
    try:
        from threadpoolctl import ThreadpoolController
        libs = ThreadpoolController().select(user_api="blas").lib_controllers
    except Exception:       # (no threadpoolctl, or a library it cannot read)
        return {}
    pools = {lib.filepath: known.get(lib.filepath) or [lib, lib.num_threads, lib.num_threads]
             for lib in libs if lib.filepath not in _user_sized}
    numpys = [k for k in pools if "numpy" in os.path.basename(os.path.dirname(k))]
    if len(pools) > 1 and len(numpys) == 1:
        # two libraries' pools, each a thread per core, spin beside each other: the one
        # NumPy links keeps its pool, the others (SciPy's) get one thread
        for k, p in pools.items():
            if k != numpys[0]:
                p[1] = 1
    return pools


def apply() -> None:
    """Size the pools for the current target: called as a jitted call starts, on its
    thread, while ``pending``."""
    global pending, _dirty, _scipy_seen, _blas, _numba_default
    scipy_now = any(m in sys.modules for m in _SCIPY_BLAS)
    with _lock:
        if _blas is None or scipy_now != _scipy_seen:
            _blas = _scan(_blas or {})
            _scipy_seen = scipy_now
            _dirty = True
        # (until SciPy's BLAS is loaded, each call looks for it: two dict lookups)
        pending = not _scipy_seen
        if not _dirty:
            return
        _dirty = False
        target = _target
        for path, entry in list(_blas.items()):
            lib, size, last = entry
            if lib.num_threads != last:     # the user's own setting: keep it from now on
                _user_sized.add(path)
                del _blas[path]
                continue
            if target is not None:
                size = min(target, size)
            if size != last:
                lib.set_num_threads(size)
                entry[2] = size
    if "NUMBA_NUM_THREADS" in os.environ or "numba.np.ufunc.parallel" not in sys.modules:
        return      # (no parallel kernel has run: Numba's pool does not exist)
    import numba
    from numba.np.ufunc import parallel
    if not parallel._is_initialized:
        # (asking Numba would start its pool: a program that runs no parallel kernel
        # needs none; ``parallel_ok`` keeps them serial while the target is 1)
        return
    if _numba_default is None:
        _numba_default = numba.config.NUMBA_NUM_THREADS
    mine = getattr(_numba_set, "size", _numba_default)
    now = numba.get_num_threads()
    if now != mine:         # the user's own setting on this thread: keep it from now on
        _numba_set.size = now
        _numba_set.user = True
    if getattr(_numba_set, "user", False):
        return
    size = _numba_default if target is None else min(target, _numba_default)
    if now != size:
        numba.set_num_threads(size)
        _numba_set.size = size


def parallel_ok() -> bool:
    """Whether a parallel kernel has more than one thread to run on now (else its serial
    version runs: the same bits)."""
    return _target is None or _target > 1 or "NUMBA_NUM_THREADS" in os.environ
