"""The compile pool: worker processes (``numba_backend.compile_worker``) that compile
kernels and loop drivers into the disk cache while the program runs on.

A compile in a worker holds no lock of the program: the program keeps its GIL (and, on a
machine with several cores, several workers compile at once). One worker starts at
``import tracer`` where the default tier will use it (``prestart``); the others start on
demand while every worker is busy, up to ``pool_size()`` compiling at once: the cores less
one while the program runs, more while it waits for its compiles (``Pool.waiting``), or
``TRACER_COMPILE_WORKERS``. Jobs wait in one queue and go to the first idle worker. Workers live in their own process group
and outlive the program by a bounded time, finishing the compiles it had asked for so that
the next run finds them in the cache (``compile_worker``).

``submit(job) -> Future`` resolves to the worker's reply (``{"ok": True, ...}`` or
``{"ok": False, "error": ...}``); it never raises. A worker that dies takes its jobs to a
fresh worker once; a job that kills a second worker fails with the worker's exit status.
Where processes cannot be started at all, ``submit`` compiles on a background thread of
this process instead (the fallback the caller passes).
"""
from __future__ import annotations

import atexit
import contextlib
import itertools
import json
import logging
import os
import subprocess
import sys
import threading
from concurrent.futures import Future

from numba_backend import threads

logger = logging.getLogger("tracer")

_BOOT = ("import json, sys; sys.path[:0] = json.loads(sys.argv[1]); "
         "from numba_backend.compile_worker import main; main()")


def pool_size(waiting: bool = True) -> int:
    """How many workers may compile at once: ``TRACER_COMPILE_WORKERS`` if set; else, while
    the program runs, the cores less one (its own thread keeps a core: on 2 cores a second
    worker made an MLP's 100 cold calls 1.3-1.6 s -> 2.1-2.5 s), and while it waits for
    its compiles (``Pool.waiting``) at least 2 where there are 2 cores (its core is idle
    then); at most 4."""
    env = os.environ.get("TRACER_COMPILE_WORKERS")
    if env:
        return max(1, int(env))
    cores = os.cpu_count() or 1
    if waiting:
        return min(4, max(cores - 1, min(cores, 2)))
    return min(4, max(cores - 1, 1))


class _Worker:
    def __init__(self, pool: "Pool", warm_up: bool = True):
        self.pool = pool
        self.pending: dict = {}     # job id -> (job, future, fallback), sent to this worker
        path = [p for p in sys.path if p]   # '' would mean the worker's cwd, not ours
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _BOOT, json.dumps(path)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1,
            start_new_session=True,
            env=None if warm_up else dict(os.environ, TRACER_COMPILE_WARM_UP="0"))
        threading.Thread(target=self._read, name="tracer-compile-reader", daemon=True).start()

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, entry) -> None:
        """Hand one queued job to this worker (the pool's lock is held)."""
        job = entry[0]
        self.pending[job["id"]] = entry
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
            with self.pool._lock:
                entry = self.pending.pop(msg.get("id"), None)
            if entry is not None:
                if msg.get("ok"):
                    from tracer import config
                    if config.log_compiles:
                        job = entry[0]
                        what = job.get("path") or ("a library call's kernels"
                                                   if "library" in job else "a job")
                        logger.warning("tracer: a compile worker finished %s in %.2f s",
                                       what, msg.get("seconds", float("nan")))
                entry[1].set_result(msg)
            self.pool._dispatch()
        code = self.proc.wait()
        with self.pool._lock:
            orphans, self.pending = list(self.pending.values()), {}
        for job, fut, fallback in orphans:
            self.pool._orphaned(job, fut, code, fallback)
        self.pool._dispatch()


class Pool:
    """Jobs wait in one queue here and go to the first worker that is idle (one job per
    worker at a time), so a slow compile never holds up jobs another worker could take.
    Jobs still queued when the program ends are handed to the workers then (``atexit``),
    so they too reach the disk cache."""

    def __init__(self):
        self._workers: list = []
        self._queue: list = []      # (job, future, fallback) not yet sent to a worker
        self._lock = threading.RLock()
        self._ids = itertools.count()
        self.broken = False         # processes cannot be started here
        self._waiters = 0           # threads of the program blocked on a compile
        atexit.register(self._flush)

    @contextlib.contextmanager
    def waiting(self):
        """While the program blocks on its compiles: its core is free, so more workers
        may compile at once (``pool_size``)."""
        with self._lock:
            self._waiters += 1
        self._dispatch()
        try:
            yield
        finally:
            with self._lock:
                self._waiters -= 1

    def _live(self) -> list:
        self._workers = [w for w in self._workers if w.alive]
        return self._workers

    def _worker(self) -> _Worker:
        """A live worker (started if there is none)."""
        with self._lock:
            live = self._live()
            if not live:
                live.append(_Worker(self))
            return min(live, key=lambda w: len(w.pending))

    def prestart(self, warm_up: bool = True) -> None:
        """Start one worker now, ahead of the first compile. With ``warm_up`` it imports
        Numba and warms up (``compile_worker.warm_up``) while the program imports and
        traces, so the first job finds it ready (about 1 s earlier on a cold start);
        without, it only waits (a run that will load its kernels from the cache should
        not spend a core on a warm-up). Never raises."""
        with self._lock:
            if self._workers or self.broken:
                return
            try:
                self._workers.append(_Worker(self, warm_up))
            except OSError:
                self.broken = True

    def submit(self, job: dict | None, fallback) -> Future:
        """Compile ``job`` in a worker; ``fallback()`` (in a thread of this process)
        where no worker can be started, or when ``job`` is None (code calling users'
        Numba functions, which only this process holds)."""
        fut: Future = Future()
        if job is not None and not self.broken:
            with self._lock:
                entry = (dict(job, id=next(self._ids), tries=0), fut, fallback)
                if "globals" in job:
                    self._queue.append(entry)
                else:
                    # kernels, library primes and the loop runner's functions go before
                    # loop drivers (jobs with globals), in the order asked: each switches
                    # a step of the running program to compiled code within a fraction
                    # of a second, where a driver takes seconds (and finds its kernels in
                    # the cache then)
                    at = next((i for i, (j, _, _) in enumerate(self._queue)
                               if "globals" in j), len(self._queue))
                    self._queue.insert(at, entry)
            self._dispatch()
            return fut
        return _fallback(fallback)

    def _dispatch(self) -> None:
        """Send queued jobs to idle workers while fewer than ``pool_size()`` compile,
        starting workers while every live one is busy."""
        stranded = []
        with self._lock:
            while self._queue and not self.broken:
                live = self._live()
                limit = pool_size(self._waiters > 0)
                busy = sum(1 for w in live if w.pending)
                if busy >= limit:
                    break
                idle = [w for w in live if not w.pending]
                if idle:
                    idle[0].send(self._queue.pop(0))
                    continue
                try:
                    live.append(_Worker(self))
                except OSError as e:
                    self.broken = True
                    logger.warning("tracer: compile workers cannot start (%s); compiling "
                                   "on a thread of this process", e)
            if self.broken:
                stranded, self._queue = self._queue, []
            # the program's thread pools give busy workers their cores (numba_backend.threads)
            threads.workers_busy(sum(1 for w in self._live() if w.pending))
        for _, fut, fallback in stranded:
            _fallback(fallback, fut)

    def _orphaned(self, job, fut, code, fallback=None):
        """A worker ended holding ``job``: it goes to another worker once, then fails."""
        if job["tries"] >= 1:
            fut.set_result({"id": job["id"], "ok": False,
                            "error": f"the compile worker ended with exit status {code}"})
            return
        with self._lock:
            self._queue.insert(0, (dict(job, tries=job["tries"] + 1), fut, fallback))

    def _flush(self):
        """At exit: every queued job to a live worker (they finish them after the program
        has ended, compile_worker.main); the program's core is free then, so the
        waiting-time number of workers share them."""
        with self._lock:
            live = self._live()
            if not live or not self._queue:
                return
            while len(live) < min(pool_size(True), len(self._queue)):
                try:
                    live.append(_Worker(self, warm_up=False))
                except OSError:
                    break
            queued, self._queue = self._queue, []
            for i, entry in enumerate(queued):
                live[i % len(live)].send(entry)

    def shutdown(self):
        """Close the workers' input (they finish what they hold, then exit)."""
        self._flush()
        with self._lock:
            workers, self._workers = self._workers, []
        for w in workers:
            try:
                w.proc.stdin.close()
            except OSError:
                pass


def _fallback(fallback, fut: Future | None = None) -> Future:
    """Run ``fallback`` on the background thread of this process; resolve ``fut`` (or a
    new Future) with the reply a worker would have sent."""
    from numba_backend.executor import _background
    inner = _background.submit(lambda: _run_fallback(fallback))
    if fut is None:
        return inner
    inner.add_done_callback(lambda f: fut.set_result(f.result()))
    return fut


def _run_fallback(fn) -> dict:
    try:
        fn()
        return {"ok": True}
    except Exception as e:
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}


pool = Pool()
