"""Compiled kernels, in memory and on disk.

A kernel's generated source is written to ``<cache_dir>/kernels/k_<sha256>.py`` (atomic
rename: two processes writing the same entry is safe; a truncated or foreign file is
rewritten), imported as a real module, and compiled with ``numba.njit(cache=True)`` --
Numba can only disk-cache functions defined in a file (numba/numba#3501), which is why
the source is not ``exec``'d. The key hashes the source, which names the helper module's
hash and any flag changing the machine code (boundscheck), so stale entries are never
reused. A corrupt Numba cache entry is recompiled; a failing disk is worked around (a
temporary directory); neither is ever fatal.

In memory, ``get_kernel(source)`` returns one ``CompiledKernel`` per key, shared by all
programs and shapes: a new shape of the same program finds its kernels here and compiles
nothing. ``stats`` counts compiles and disk-cache loads (tests use it).
"""
from __future__ import annotations

import importlib.util
import logging
import os
import sys
import tempfile
import threading
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")   # Numba's OpenMP pool beside OpenBLAS's

import numpy as np  # noqa: E402

from numba_backend import codegen, lazy_numba, native  # noqa: E402
from numba_backend.compile_worker import (PACKAGE, array_spec, dispatcher,  # noqa: E402
                                          ensure_package, numba_types)
from tracer.config import config  # noqa: E402

logger = logging.getLogger("tracer")

stats = {"compiled": 0, "cache_loads": 0, "native_loads": 0, "kernels": 0,
         "compile_seconds": 0.0}
_kernels: dict = {}
_lock = threading.RLock()
_fallback_dir = None


def _kernel_dir() -> str:
    global _fallback_dir
    d = os.path.join(config.cache_dir, "kernels")
    try:
        os.makedirs(d, exist_ok=True)
        if os.access(d, os.W_OK):
            return d
    except OSError:
        pass
    if _fallback_dir is None:
        _fallback_dir = tempfile.mkdtemp(prefix="tracer-kernels-")
        logger.warning("tracer: cache directory %s is not writable; using %s for this "
                       "process (set TRACER_CACHE_DIR)", config.cache_dir, _fallback_dir)
    return _fallback_dir


def _write_source(path: str, text: str, force: bool = False) -> None:
    """Write ``text`` unless the file already holds the same code (its comments, which name
    shapes, may differ: rewriting would change the file's stamp and void Numba's cache)."""
    if not force:
        try:
            with open(path, encoding="utf-8") as f:
                if codegen.code_only(f.read()) == codegen.code_only(text):
                    return
        except (OSError, UnicodeDecodeError):
            pass
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def signature_spec(kernel) -> list:
    """The kernel's argument types in ``compile_worker``'s JSON form: read-only inputs,
    writable outputs, then the integer and float parameter vectors."""
    return ([array_spec(a.dtype, a.ndim, True) for a in kernel.inputs]
            + [array_spec(a.dtype, a.ndim, False) for a in kernel.outputs]
            + [array_spec(np.int64, 1, True), array_spec(np.float64, 1, True)])


def signature(kernel) -> tuple:
    return numba_types(signature_spec(kernel))


class CompiledKernel:
    """One kernel module: its Python functions and, once compiled, its dispatchers."""

    def __init__(self, source, kernel):
        self.key = source.key
        self.source = source
        self.kernel = kernel
        self.spec = signature_spec(kernel)
        self.path = os.path.join(_kernel_dir(), f"k_{self.key[:32]}.py")
        _write_source(self.path, source.text)
        self._module = None
        self._serial = None
        self._numba = None      # the serial variant's Numba dispatcher
        self._par = None
        self.par_job = None    # Future of a compile worker's reply (parallel variant)
        self.failed = None
        # calls users' functions: compiled here, never from or into Numba's disk cache
        self.in_process = source.in_process
        self._lock = threading.RLock()    # (serial() imports the module under it)

    @property
    def sig(self) -> tuple:
        """Numba's argument types of the serial and parallel variants."""
        return numba_types(self.spec)

    @property
    def module(self):
        """The generated module (imported on first use: a kernel loaded from its native
        file never needs it)."""
        if self._module is None:
            with self._lock:
                if self._module is None:
                    self._module = self._import()
        return self._module

    @property
    def py(self):
        return self.module.kernel

    @property
    def py_par(self):
        return getattr(self.module, "kernel_par", None)

    def _import(self):
        name = self.module_name
        mod = sys.modules.get(name)
        if mod is not None:
            return mod
        import numba_backend._numba  # noqa: F401  (before the module's ``import numba``)
        ensure_package()
        spec = importlib.util.spec_from_file_location(name, self.path)
        mod = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(mod)
        except Exception:
            # a file damaged on disk after our check: rewrite it and try once more
            _write_source(self.path, self.source.text, force=True)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
        sys.modules[name] = mod
        return mod

    def on_disk(self) -> bool:
        """Whether the disk cache probably holds this kernel: its native file
        (``numba_backend.native``) or Numba's entry (see ``on_disk``)."""
        return not self.in_process and (os.path.exists(native.path_for(self.path))
                                        or on_disk(self.path, "kernel"))

    @property
    def ready(self) -> bool:
        return self._serial is not None

    def ready_parallel(self) -> bool:
        return self._par is not None

    def opts(self, parallel: bool) -> dict:
        """Numba's options for this kernel, in ``compile_worker``'s form (no fast-math
        flags: float sums keep their pairwise order, see ``numba_backend.pairwise``)."""
        opts = {"fastmath": [], "parallel": parallel}
        if self.in_process:
            opts["cache"] = False
        return opts

    def job(self, parallel: bool) -> dict | None:
        """The compile of one variant, as a compile worker's job (None: it compiles in
        this process, ``workers.Pool.submit``)."""
        if self.in_process:
            return None
        job = {"module": self.module_name, "path": self.path,
               "func": "kernel_par" if parallel else "kernel",
               "opts": self.opts(parallel), "sig": self.spec}
        if not parallel:
            job["native"] = True        # (the worker writes the native file too)
        return job

    @property
    def module_name(self) -> str:
        return f"{PACKAGE}.k_{self.key[:32]}"

    def _compile(self, parallel: bool):
        opts = self.opts(parallel)
        func = "kernel_par" if parallel else "kernel"
        t0 = time.perf_counter()
        disp = dispatcher(self.module, func, opts)
        try:
            disp.compile(self.sig)
        except Exception as e:   # a corrupt cache entry: compile without the cache
            if not _is_cache_error(e) or self.in_process:
                raise
            logger.warning("tracer: kernel cache entry %s unreadable (%s); recompiling",
                           self.path, e)
            opts["cache"] = False
            disp = dispatcher(self.module, func, opts)
            disp.compile(self.sig)
        dt = time.perf_counter() - t0
        hits = sum(disp.stats.cache_hits.values()) if opts.get("cache", True) else 0
        if not hits and not parallel and not self.in_process:
            native.save(disp, self.spec, self.path)
        with _lock:
            if hits:
                stats["cache_loads"] += 1
            else:
                stats["compiled"] += 1
            stats["compile_seconds"] += dt
        if config.log_compiles:
            logger.warning("%s kernel %s%s in %.1f ms", "Loaded" if hits else "Compiled",
                           self.key[:12], " (parallel)" if parallel else "", dt * 1e3)
        return disp

    def serial(self):
        """The compiled serial kernel, a callable: loaded from its native file where that
        works (``numba_backend.native``), else Numba's dispatcher (its disk cache, or a
        compile)."""
        if self._serial is None:
            with self._lock:
                if self._serial is None:
                    fn = None if self.in_process else \
                        native.load(self.path, self.spec, self.dispatcher)
                    if fn is None:
                        fn = self.dispatcher()
                    else:
                        with _lock:
                            stats["cache_loads"] += 1
                            stats["native_loads"] += 1
                        if config.log_compiles:
                            logger.warning("Loaded kernel %s (native)", self.key[:12])
                    self._serial = fn
        return self._serial

    def dispatcher(self):
        """The serial kernel's Numba dispatcher: for the loop runner and drivers, which
        call kernels by address, and for a call that the native kernel's argument check
        turns away."""
        if self._numba is None:
            with self._lock:
                if self._numba is None:
                    self._numba = self._compile(False)
        return self._numba

    def parallel(self):
        if self._par is None:
            with self._lock:
                if self._par is None:
                    self._par = self._compile(True)
        return self._par


_listing: dict = {}


def on_disk(path: str, func: str) -> bool:
    """Whether Numba's cache probably holds function ``func`` of the generated module at
    ``path`` (its index file exists): then loading it takes milliseconds and is worth
    doing at once, even in "async" mode."""
    cache_dir = lazy_numba.setting("CACHE_DIR", "NUMBA_CACHE_DIR", str, "")
    if cache_dir:     # NUMBA_CACHE_DIR: where Numba's locator puts it
        import numba_backend._numba  # noqa: F401  (Numba the cheap way)
        from numba.core.caching import UserProvidedCacheLocator
        d = os.path.join(cache_dir,
                         UserProvidedCacheLocator.get_suitable_cache_subpath(path))
    else:
        d = os.path.join(os.path.dirname(path), "__pycache__")
    stem = os.path.basename(path)[:-3] + f".{func}-"
    try:
        return any(f.startswith(stem) and f.endswith(".nbi") for f in _listdir(d))
    except OSError:
        return False


def _listdir(d):
    """os.listdir, cached briefly (one listing serves all kernels of a program)."""
    now = time.monotonic()
    hit = _listing.get(d)
    if hit is None or now - hit[0] > 1.0:
        hit = _listing[d] = (now, os.listdir(d))
    return hit[1]


def _is_cache_error(e: Exception) -> bool:
    import pickle

    from numba.core.errors import NumbaError
    return isinstance(e, (EOFError, pickle.UnpicklingError, OSError, AttributeError,
                          ImportError, IndexError, KeyError, TypeError)) and \
        not isinstance(e, NumbaError)


def get_kernel(source, kernel) -> CompiledKernel:
    with _lock:
        ck = _kernels.get(source.key)
        if ck is None:
            ck = _kernels[source.key] = CompiledKernel(source, kernel)
            stats["kernels"] += 1
        return ck


def clear_memory_cache() -> None:
    """Forget in-memory kernels (tests: force the next use through the disk cache)."""
    with _lock:
        _kernels.clear()
