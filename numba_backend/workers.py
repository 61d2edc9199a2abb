"""The compile pool: worker processes (``numba_backend.compile_worker``) that compile
kernels and loop drivers into the disk cache while the program runs on.

A compile in a worker holds no lock of the program: the program keeps its GIL (and, on a
machine with several cores, several workers compile at once). The pool starts lazily, on
the first background compile, with ``TRACER_COMPILE_WORKERS`` processes (default: the
cores less one, at least one and at most four). Workers live in their own process group
and outlive the program by a bounded time, finishing the compiles it had asked for so that
the next run finds them in the cache (``compile_worker``).

``submit(job) -> Future`` resolves to the worker's reply (``{"ok": True, ...}`` or
``{"ok": False, "error": ...}``); it never raises. A worker that dies takes its jobs to a
fresh worker once; a job that kills a second worker fails with the worker's exit status.
Where processes cannot be started at all, ``submit`` compiles on a background thread of
this process instead (the fallback the caller passes).
"""
from __future__ import annotations

import itertools
import json
import logging
import os
import subprocess
import sys
import threading
from concurrent.futures import Future

logger = logging.getLogger("tracer")

_BOOT = ("import json, sys; sys.path[:0] = json.loads(sys.argv[1]); "
         "from numba_backend.compile_worker import main; main()")


def pool_size() -> int:
    env = os.environ.get("TRACER_COMPILE_WORKERS")
    if env:
        return max(1, int(env))
    return max(1, min(4, (os.cpu_count() or 2) - 1))


class _Worker:
    def __init__(self, pool: "Pool"):
        self.pool = pool
        self.pending: dict = {}     # job id -> (job, future)
        self.lock = threading.Lock()
        path = [p for p in sys.path if p]   # '' would mean the worker's cwd, not ours
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _BOOT, json.dumps(path)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1,
            start_new_session=True)
        threading.Thread(target=self._read, name="tracer-compile-reader", daemon=True).start()

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def submit(self, job: dict, fut: Future) -> None:
        with self.lock:
            self.pending[job["id"]] = (job, fut)
        try:
            self.proc.stdin.write(json.dumps(job) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass   # the reader sees the end of the worker and hands its jobs on

    def _read(self):
        for line in self.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            with self.lock:
                entry = self.pending.pop(msg.get("id"), None)
            if entry is not None:
                entry[1].set_result(msg)
        code = self.proc.wait()
        with self.lock:
            orphans, self.pending = list(self.pending.values()), {}
        for job, fut in orphans:
            self.pool._orphaned(job, fut, code)


class Pool:
    def __init__(self):
        self._workers: list = []
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self.broken = False     # processes cannot be started here

    def _worker(self) -> _Worker:
        """The live worker with the fewest jobs, starting workers up to the pool size."""
        with self._lock:
            self._workers = [w for w in self._workers if w.alive]
            if len(self._workers) < pool_size():
                w = _Worker(self)
                self._workers.append(w)
                return w
            return min(self._workers, key=lambda w: len(w.pending))

    def submit(self, job: dict | None, fallback) -> Future:
        """Compile ``job`` in a worker; ``fallback()`` (in a thread of this process)
        where no worker can be started, or when ``job`` is None (code calling users'
        Numba functions, which only this process holds)."""
        fut: Future = Future()
        if job is not None and not self.broken:
            job = dict(job, id=next(self._ids), tries=0)
            try:
                self._worker().submit(job, fut)
                return fut
            except OSError as e:
                self.broken = True
                logger.warning("tracer: compile workers cannot start (%s); compiling on a "
                               "thread of this process", e)
        from numba_backend.executor import _background
        return _background.submit(lambda: _run_fallback(fallback))

    def _orphaned(self, job, fut, code):
        if job["tries"] >= 1:
            fut.set_result({"id": job["id"], "ok": False,
                            "error": f"the compile worker ended with exit status {code}"})
            return
        job = dict(job, tries=job["tries"] + 1)
        try:
            self._worker().submit(job, fut)
        except OSError as e:
            fut.set_result({"id": job["id"], "ok": False, "error": str(e)})

    def shutdown(self):
        """Close the workers' input (they finish what they hold, then exit)."""
        with self._lock:
            workers, self._workers = self._workers, []
        for w in workers:
            try:
                w.proc.stdin.close()
            except OSError:
                pass


def _run_fallback(fn) -> dict:
    try:
        fn()
        return {"ok": True}
    except Exception as e:
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}


pool = Pool()
