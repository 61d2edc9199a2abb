"""The compile worker: a separate process that compiles generated modules into Numba's
disk cache, so that the program that asked neither waits for the compile nor holds its GIL.

The program (``numba_backend.workers``) writes one JSON job a line to the worker's standard
input and reads one JSON reply a line from its standard output. A job names a generated
module by path (the cache directory already holds it), the function to compile, Numba's
options and the argument types (``type_spec`` below); the worker imports the module under
the name the program uses, compiles with ``cache=True`` and replies ``{"id", "ok",
"seconds"}`` or ``{"id", "ok": false, "error"}``. The program then loads the compiled code
from the disk cache in milliseconds.

When the program ends, its end of the pipe closes: the worker finishes the jobs it has
already received (within ``TRACER_COMPILE_AFTER_EXIT_S`` seconds, default 120), so that
the next run finds them in the cache, and exits. Replies that no one reads are dropped.

A job may instead carry ``"library"``: a library call (kind, params and operand avals,
pickled) that the worker runs once on zeros of those avals, so that the Numba kernels of
``numba_backend.library`` that it uses compile into the disk cache before the program
switches to its compiled tier (they are fixed ``cache=True`` functions, compiled per
argument types on first use: seconds for a convolution).

This module imports only NumPy, Numba and the generated modules (which import
``numba_backend``'s njit helpers); a library job imports ``numba_backend.library`` (and
with it ``tracer``) when it runs.
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
import time


# ---------------------------------- argument types ----------------------------------------

def array_spec(dtype, ndim: int, readonly: bool, layout: str = "C") -> list:
    """The JSON form of an array type, C-contiguous unless ``layout`` says otherwise
    (float16 and the ml_dtypes types travel as their bits: ``numba_backend.storage``)."""
    from numba_backend.storage import storage_dtype
    dtype = storage_dtype(dtype)
    spec = [dtype.str, int(ndim), bool(readonly)]
    return spec if layout == "C" else spec + [layout]


def numba_types(spec) -> tuple:
    """Numba argument types from a list of ``array_spec`` entries."""
    import numba_backend._numba  # noqa: F401  (Numba the cheap way)
    import numba
    import numpy as np
    from numba import types
    return tuple(types.Array(numba.from_dtype(np.dtype(s[0])), s[1],
                             s[3] if len(s) > 3 else "C", readonly=s[2])
                 for s in spec)


# ---------------------------------- modules and jobs --------------------------------------

PACKAGE = "tracer_kernels"     # the package name of the generated modules


def ensure_package() -> None:
    """Make the generated modules' package (``tracer_kernels``, a package without files:
    its modules are imported from the cache directory by path) importable by name, so
    that ``tracer_kernels.d_<key>`` resolves through ``sys.modules``: pickle, and with it
    Numba's serialization of a driver's object-mode block (``host_callbacks``), finds a
    generated function by its module and name. Without it Numba embeds the block's
    address in the code and cannot cache the driver."""
    if PACKAGE not in sys.modules:
        import types
        pkg = types.ModuleType(PACKAGE, "tracer's generated kernels and drivers")
        pkg.__path__ = []
        sys.modules.setdefault(PACKAGE, pkg)


def load_module(name: str, path: str):
    """Import a generated module from ``path`` as ``name`` (once per process)."""
    mod = sys.modules.get(name)
    if mod is None:
        import numba_backend._numba  # noqa: F401  (before the module's ``import numba``)
        ensure_package()
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        sys.modules[name] = mod
    return mod


def dispatcher(module, func: str, opts: dict):
    from numba_backend._numba import njit   # (Numba the cheap way)
    fast = set(opts["fastmath"]) if opts.get("fastmath") else False
    kw = dict(cache=opts.get("cache", True), nogil=opts.get("nogil", True),
              error_model="numpy", fastmath=fast)
    if opts.get("parallel"):
        kw["parallel"] = True
    return njit(**kw)(getattr(module, func))


def library_job(kind: str, params: dict, in_avals) -> dict:
    """The job that primes a library call's Numba kernels (``in_avals``: (shape, dtype)
    pairs)."""
    import base64
    import pickle
    payload = pickle.dumps((kind, params, [(tuple(s), str(d)) for s, d in in_avals]))
    return {"library": base64.b64encode(payload).decode("ascii")}


def _run_library(payload: str) -> None:
    import base64
    import pickle

    import numpy as np
    from numba_backend import library
    kind, params, in_avals = pickle.loads(base64.b64decode(payload))
    args = []
    for shape, dtype in in_avals:
        a = np.zeros(shape, dtype)
        a.flags.writeable = False     # as the executor passes operands
        args.append(a)
    with np.errstate(all="ignore"):
        library.impl(kind)(*args, **params)


def run_job(job: dict) -> None:
    """Compile one job's function into the disk cache."""
    if "library" in job:
        _run_library(job["library"])
        return
    if "runtime" in job:
        # functions of the backend's own modules (the loop runner and what it calls),
        # into Numba's disk cache: (module, function, signature) entries
        for mod_name, func, sig in job["runtime"]:
            getattr(importlib.import_module(mod_name), func).compile(numba_types(sig))
        return
    mod = load_module(job["module"], job["path"])
    # a loop driver calls its kernels by address (``driver_runtime.call_kernel``), which
    # its compile does not need; the program loads them for that signature once the
    # driver is ready: compiled here first, that is a disk-cache load
    for k in job.get("globals", ()):
        if "runtime" in k:      # a driver_runtime function (its own disk cache)
            from numba_backend import driver_runtime
            getattr(driver_runtime, k["runtime"]).compile(numba_types(k["sig"]))
            continue
        kmod = load_module(k["module"], k["path"])
        dispatcher(kmod, k["func"], k["opts"]).compile(numba_types(k["sig"]))
    disp = dispatcher(mod, job["func"], job["opts"])
    disp.compile(numba_types(job["sig"]))
    if job.get("native"):
        from numba_backend import native
        native.save(disp, job["sig"], job["path"])


def _reply(out, msg: dict) -> None:
    try:
        out.write(json.dumps(msg) + "\n")
        out.flush()
    except (BrokenPipeError, OSError, ValueError):
        pass   # the program has ended: the cache entry is what counts


def _job_waiting(stream) -> bool:
    """Whether a job is already in the pipe (no job has been read yet: no buffered data)."""
    if os.name != "posix":
        return True     # no select on pipes: skip the warm-up
    import select
    try:
        return bool(select.select([stream], [], [], 0)[0])
    except (OSError, ValueError):
        return True


def _warm_numba():
    from numba_backend._numba import njit   # (Numba the cheap way)
    njit(cache=False, nogil=True)(lambda x: x + 1)(1)


def _warm_pairwise_sums():
    import numpy as np
    from numba_backend import pairwise as pw
    from numba_backend._numba import njit

    def sums(b32, b64):
        return pw.pairwise_cached(b32, 0, b32.shape[0]) + \
            pw.pairwise_cached(b64, 0, b64.shape[0])
    njit(cache=False, nogil=True, error_model="numpy")(sums)(
        np.zeros(8, np.float32), np.zeros(8))


def _warm_kernel_idioms():
    # what generated kernels call besides arithmetic, each an overload that Numba compiles
    # once per process and argument types (0.6 s of softmax_rows' reduction kernel when
    # it is a worker's first): scratch arrays, bit views of the float formats, fma, rint,
    # max of sizes
    import numpy as np
    from numba_backend._numba import njit
    from numba_backend.vecmath import fma

    def idioms(n, x32, x64):
        a = np.empty(n, np.int64)
        b = np.empty(n, np.float32)
        c = np.empty(n, np.float64)
        a[0] = max(n, 0)
        b[0] = np.int32(n).view(np.float32) + fma(x32, x32, x32) + np.rint(x32)
        c[0] = np.int64(n).view(np.float64) + fma(x64, x64, x64) + np.rint(x64)
        return a[0] + b[0] + c[0] + np.uint32(n).view(np.float32) + \
            np.uint64(n).view(np.float64)
    njit(cache=False, nogil=True, error_model="numpy")(idioms)(
        4, np.float32(1), np.float64(1))


def _warm_driver_runtime():
    # the cached copy and matrix-product functions loop drivers call, for the common
    # float types: compiled into (or loaded from) Numba's disk cache before the first
    # driver's compile needs them
    import numpy as np
    from numba_backend.driver_runtime import copy_c, dot_mm
    for dt in (np.float32, np.float64):
        for shape in ((2,), (2, 2)):
            copy_c(np.zeros(shape, dt), np.zeros(shape, dt))
        a = np.ones((2, 2), dt)
        dot_mm(a, a, np.zeros((2, 2), dt))


def _warm_loop_runner():
    # the loop runner (numba_backend.loop_runner.run_scan): compiled once per installation
    from numba_backend.loop_runner import RUN_SCAN_SIG, run_scan
    run_scan.compile(numba_types(RUN_SCAN_SIG))


# in order: Numba's import (the cheap way) with its typing and target contexts; the
# compiled pairwise-sum helpers every float reduction kernel calls (typed once per
# process and argument types: 0.4 s of the first such kernel); the kernels' other
# idioms; the loop drivers' shared functions; the loop runner
WARM_UP_STEPS = (_warm_numba, _warm_pairwise_sums, _warm_kernel_idioms,
                 _warm_driver_runtime, _warm_loop_runner)


def warm_up(stream=None) -> None:
    """Pay this process's first-compile costs before the first job comes, step by step
    (``WARM_UP_STEPS``), stopping as soon as a job is waiting. A worker started ahead of
    the program's first compile (``workers.Pool.prestart``) does this while the program
    is still importing and tracing."""
    for step in WARM_UP_STEPS:
        if stream is not None and _job_waiting(stream):
            return
        try:
            step()
        except Exception:   # a warm-up is an optimisation: the jobs report real errors
            return


def main() -> None:
    out = sys.stdout
    sys.stdout = sys.stderr   # stray prints of compiled code must not break the protocol
    if os.environ.get("TRACER_COMPILE_WARM_UP", "1") != "0":
        warm_up(sys.stdin)
    grace = float(os.environ.get("TRACER_COMPILE_AFTER_EXIT_S", "120"))
    parent = os.getppid()
    deadline = None
    for line in sys.stdin:   # jobs still in the pipe when the program ends are still read
        job = json.loads(line)
        t0 = time.perf_counter()
        try:
            run_job(job)
            _reply(out, {"id": job["id"], "ok": True, "seconds": time.perf_counter() - t0})
        except Exception as e:   # reported to the program, which keeps its baseline tier
            _reply(out, {"id": job["id"], "ok": False,
                         "error": f"{type(e).__name__}: {e}"[:4000]})
        if deadline is None and os.getppid() != parent:
            deadline = time.monotonic() + grace     # the program has ended
        if deadline is not None and time.monotonic() > deadline:
            break


if __name__ == "__main__":
    main()
