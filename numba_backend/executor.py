"""Executables: run a lowered Program on NumPy arrays.

``Executable(program)`` generates each kernel's source, looks it up in the kernel cache
(``numba_backend.cache``) and runs the steps in order over a list of array slots:

- kernels get their inputs as read-only C-contiguous arrays (float16 and the
  ml_dtypes types as their bits: ``numba_backend.storage``) and
  their outputs allocated by NumPy (large buffers allocated inside njit code
  page-fault heavily), or, for an output of at least 64 KB, an earlier call's temporary
  of that shape and dtype: a kernel output that dies within a call, with nothing else
  referring to it, is kept for the next (at most 256 MB per program);
  ``numba_backend.memory`` sets the process's allocator policy for the rest; the
  parallel variant runs when the iteration count reaches
  ``config.parallel_threshold`` and Numba has more than one thread;
- library calls run their kind's implementation (``numba_backend.library``) and host
  steps their primitive's NumPy impl, on whole arrays; their results are cast to the
  step's avals like eager evaluation does;
- a slot is released after its last use.

Tiers (``config.jit_compile``): "sync" compiles every kernel before the first run;
"async" runs the optimized jaxpr through the NumPy impls (the eager reference), then each
step compiled as soon as its kernel is (the mixed tier, ``_mixed``), while
compile workers (``numba_backend.workers``: other processes, so the program keeps its
GIL) compile into the disk cache, then loads the kernels from there and switches; "none"
never compiles. With
``config.debug_kernels`` the generated kernels run as plain Python.
"""
from __future__ import annotations

import gc
import logging
import os
import queue
import threading
import time
from sys import getrefcount
from concurrent.futures import Future

import numpy as np

from lowering.ir import HostStep, KernelStep, LibraryCall, Program
from numba_backend import cache, codegen, lazy_numba, library, memory, threads
from numba_backend.compile_worker import library_job
from numba_backend.storage import needs_view, to_storage
from numba_backend.workers import pool
from tracer.config import config
from tracer.core import Token
from tracer.jaxpr import Jaxpr, Var, eval_jaxpr_impls, numpy_tier_scope

logger = logging.getLogger("tracer")
memory.tune_malloc()
memory.freeze_gc_at_exit()
STRICT = os.environ.get("TRACER_STRICT_LOWERING", "") not in ("", "0")
# Library calls whose implementation compiles nothing (or has its own compile path; a
# user's kernel, numba_call, exists in this process only).
_UNPRIMED_KINDS = {"dot_general", "reshape_view", "scan", "while", "cond", "numba_call"}
_PRIME_MAX_BYTES = 64 << 20
# Kernel outputs of at least this size that die within a call are kept for the next
# call's kernels (up to _POOL_MAX_BYTES per program): a fresh large buffer comes from
# mmap and page-faults on its first writes (two live 1 MB float64 temporaries: 0.87 ms
# per pass instead of 0.03 ms).
_POOL_MIN_BYTES = 1 << 16
_POOL_MAX_BYTES = 256 << 20


class _Background:
    """One daemon thread compiling kernels in submission order, where compile workers
    cannot be started. Daemon: a script that exits while a compile is pending does not
    wait for it (Numba writes its cache files atomically, so an abandoned compile leaves
    no damaged entry)."""

    def __init__(self):
        self._queue: queue.Queue = queue.Queue()
        self._thread = None
        self._lock = threading.Lock()

    def submit(self, fn) -> Future:
        fut: Future = Future()
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="tracer-compile",
                                                daemon=True)
                self._thread.start()
        self._queue.put((fn, fut))
        return fut

    def _run(self):
        while True:
            fn, fut = self._queue.get()
            try:
                fut.set_result(fn())
            except BaseException as e:   # reported through the future
                fut.set_exception(e)


_background = _Background()


def _flags() -> str:
    return "boundscheck" if lazy_numba.setting("BOUNDSCHECK", "NUMBA_BOUNDSCHECK", int,
                                               None) else ""


def _prep(a) -> np.ndarray:
    """A read-only, C-contiguous array (a view when ``a`` already is contiguous)."""
    if type(a) is np.ndarray:       # (an Array's value: already both, most often)
        f = a.flags
        if f.c_contiguous and not f.writeable:
            return a
    elif isinstance(a, Token):  # ordering tokens pass through host steps as they are
        return a
    a = np.asarray(a)
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    if a.flags.writeable:
        a = a.view()
        a.flags.writeable = False
    return a


_kernel_arg = to_storage


def _frozen(values, dtype):
    arr = np.array(values, dtype=dtype)
    arr.flags.writeable = False
    return arr


class Executable:
    """A Program with its kernels, callable on a list of NumPy arrays."""

    def __init__(self, program: Program, name: str = "jit"):
        self.program = program
        self.name = name
        flags = _flags()
        self.sources = []
        self.handles = []
        for k in program.kernels():
            src = codegen.generate(k, flags)
            self.sources.append(src)
            self.handles.append(cache.get_kernel(src, k))
        self._plan()
        self.state = "ready" if not self.handles else "pending"
        self._jobs = None    # [(kernel handle, Future of its compile worker's reply)]
        self._primes = []    # Futures of the library calls' priming jobs (numba-backed)
        self._prime_of = {}  # id(library step) -> the Future of its priming job
        self._lock = threading.Lock()
        self._plan_compiled = None
        self._straight = None     # the plan as straight-line Python (_straight_line)
        self._ndims = None
        # (shape, dtype) -> kernel output arrays of earlier calls, free for reuse
        self._pool: dict = {}
        self._pool_bytes = 0
        # the mixed tier: the plan running compiled what is compiled (None: not made;
        # False: not possible), and the compile jobs whose end changes it
        self._plan_mixed = None
        self._numpy_short = None     # _numpy_tier_is_short
        self._mixed_waits: list = []
        self._fallbacks: dict = {}   # id(step) -> its NumPy slice (``_slice_fallback``)
        self._broken: set = set()    # kernel handles whose compile failed: their slices run
        # A loop body that a Python loop calls once per iteration (control_flow.HostRunner):
        # without loops of its own it skips the mixed tier. On small arrays a partly
        # compiled body costs more than the NumPy tier (a GRU cell on (8, 64): 15 ms a
        # call on the NumPy tier, 17-24 ms with 1 to 5 of its 6 kernels compiled: each
        # kernel's call through Numba's dispatcher and each slice's interpreter entry).
        self.loop_body = False

    # -- planning: slots, per-step closures --
    def _plan(self):
        p = self.program
        slot = {}
        for n in p.invars:
            slot[n] = len(slot)
        for n, _ in p.consts:
            slot[n] = len(slot)
        for s in p.steps:
            for o in s.outs:
                slot.setdefault(o, len(slot))
        self.n_slots = len(slot)
        self.in_slots = [slot[n] for n in p.invars]
        self.const_values = [(slot[n], _prep(v)) for n, v in p.consts]
        last_use: dict = {}
        for i, s in enumerate(p.steps):
            for x in s.ins:
                if isinstance(x, str):
                    last_use[slot[x]] = i
        keep = {slot[o] for o in p.outvars if isinstance(o, str)} | \
            {s for s, _ in self.const_values}
        self.frees = [[] for _ in p.steps]
        for sl, i in last_use.items():
            if sl not in keep:
                self.frees[i].append(sl)
        self.out_refs = [("slot", slot[o]) if isinstance(o, str) else ("lit", o[1])
                         for o in p.outvars]
        self.slot = slot
        self.kernel_params = {id(s): (_frozen(s.iparams, np.int64), _frozen(s.fparams, np.float64))
                              for s in p.steps if isinstance(s, KernelStep)}
        # each library call's implementation and params, looked up once
        self.library_calls = {id(s): (library.impl(s.kind), dict(s.params))
                              for s in p.steps if isinstance(s, LibraryCall)}

    # -- tiers --
    def ensure_compiled(self):
        """Compile every kernel now (serial variants)."""
        if self.state == "ready":
            return
        try:
            before = cache.stats["compiled"]
            for h in self.handles:
                if h not in self._broken:
                    h.serial()
            self.state = "ready"
            if cache.stats["compiled"] - before >= 4:
                # Numba leaves many cyclic objects behind; collect them now rather than in
                # a full collection that would land on a later (fast) call
                gc.collect()
        except Exception as e:
            self._failed(e)

    def _failed(self, e):
        if STRICT:
            raise
        self.state = "failed"
        logger.warning("tracer: compiling %s failed (%s: %s); it runs through the NumPy "
                       "impls. This is a bug in tracer's backend; please report it.",
                       self.name, type(e).__name__, e)

    def _compile_in_background(self):
        with self._lock:
            if self._jobs is None:
                self._jobs = []
                # the loops' compiles first (their bodies' kernels, the loop runner's
                # functions; drivers still queue after every kernel, workers.Pool): a
                # loop's body runs once per iteration, so its kernels switch more of a
                # call's time to compiled code than the program's own do
                from numba_backend.control_flow import runner_for
                try:
                    for spec in self._loops():
                        runner_for(spec).prefetch()
                finally:
                    # (steps of the same code share one handle: one job each)
                    self._jobs = [(h, pool.submit(h.job(False), h.serial))
                                  for h in dict.fromkeys(self.handles) if not h.ready]
                self._primes = []
                by_job = {}
                for sid, key, job in self._library_jobs():
                    fut = by_job.get(key)
                    if fut is None:
                        fut = by_job[key] = pool.submit(job, lambda: None)
                        self._primes.append(fut)
                    self._prime_of[sid] = fut

    def _library_jobs(self) -> list:
        """(id(step), key, worker job) triples: jobs that run this program's Numba-backed
        library calls once (on zeros), so that their kernels are in the disk cache when
        the program uses them (they would otherwise compile in this process on the first
        compiled call); steps of equal keys (``library.prime_key``) share one job.
        Operands larger than ``_PRIME_MAX_BYTES`` in all are left to compile here."""
        jobs = []
        for s in self.program.steps:
            if not isinstance(s, LibraryCall) or s.kind in _UNPRIMED_KINDS:
                continue
            nbytes = sum(int(np.prod(a.shape, dtype=np.int64)) * np.dtype(a.dtype).itemsize
                         for a in s.in_avals)
            if nbytes > _PRIME_MAX_BYTES:
                continue
            avals = [(a.shape, np.dtype(a.dtype)) for a in s.in_avals]
            try:
                job = library_job(s.kind, dict(s.params), avals)
            except Exception:   # params that do not pickle: compiled here on first use
                continue
            try:
                key = library.prime_key(s.kind, dict(s.params), avals)
            except Exception:
                key = None
            jobs.append((id(s), job["library"] if key is None else key, job))
        return jobs

    def _primes_allow_switch(self) -> bool:
        """Whether every pending priming job is of a library call with a NumPy fallback
        (the compiled tier runs those calls through it until their kernels are cached)."""
        pending = {id(f) for f in self._primes if not f.done()}
        if not pending:
            return True
        kinds = {id(s): s.kind for s in self.program.steps if isinstance(s, LibraryCall)}
        return all(library.numpy_fallback(kinds[sid]) is not None
                   for sid, f in self._prime_of.items() if id(f) in pending)

    def _numpy_tier_is_short(self) -> bool:
        """Whether a run of this program on the NumPy tier is expected to take no longer
        than a loop's Python run may (``control_flow._HOST_BUDGET_S``)."""
        short = self._numpy_short
        if short is None:
            from numba_backend.control_flow import _HOST_BUDGET_S, numpy_tier_seconds
            short = self._numpy_short = \
                numpy_tier_seconds(self.program.jaxpr.jaxpr) < _HOST_BUDGET_S
        return short

    def _loops(self) -> list:
        """The ControlFlowSpecs of this program's scan and while steps."""
        return [dict(s.params)["spec"] for s in self.program.steps
                if isinstance(s, LibraryCall) and s.kind in ("scan", "while")]

    def _switch(self):
        """The background compiles have ended: load their kernels from the disk cache
        (milliseconds each) and switch to the compiled tier, or stay on the NumPy tier for
        good if one of them failed (its answers are the same)."""
        with self._lock:
            if self.state != "pending":
                return
            failed = [(h, f.result()) for h, f in self._jobs if not f.result()["ok"]]
            if failed:
                self._broken.update(h for h, _ in failed)
                kernel_steps = [st for st in self.program.steps if isinstance(st, KernelStep)]
                sliced = all(self._fallback(st) is not None
                             for st, h in zip(kernel_steps, self.handles) if h in self._broken)
                for h, r in failed:
                    logger.warning("tracer: kernel %s of %s failed to compile (%s); %s runs "
                                   "its equations through the NumPy impls. This is a bug in "
                                   "tracer's backend; please report it.", h.path, self.name,
                                   r.get("error"), "it" if sliced else self.name)
                if not sliced:
                    self.state = "failed"
                    return
            t0 = time.perf_counter()
            self.ensure_compiled()
            if self.state == "ready" and config.log_compiles:
                logger.warning("tracer: %s switches to its compiled tier (%d kernels loaded "
                               "in %.1f ms)", self.name, len(self.handles),
                               (time.perf_counter() - t0) * 1e3)

    def __call__(self, args):
        tier, plan = self.tier()
        if tier == "numpy":
            return self.run_numpy(args)
        return self.run_compiled(args, debug=tier == "debug", plan=plan)

    def tier(self):
        """Which tier the next call runs, moving the compiles on (queueing them, loading
        what the workers finished, switching): ("compiled", None), ("mixed", its plan),
        ("debug", None) or ("numpy", None). A loop calling a body on the NumPy tier asks
        once per loop, not once per iteration (``control_flow.HostRunner``)."""
        if threads.pending:       # compile workers started or finished (their cores)
            threads.apply()
        if config.debug_kernels:
            return "debug", None
        if self.state == "ready":
            return "compiled", None
        mode = config.jit_compile
        if mode == "sync" and self.state == "pending":
            self.ensure_compiled()
        elif mode == "async" and self.state == "pending":
            if self._jobs is None and all(h.ready or h.on_disk() for h in self.handles):
                self.ensure_compiled()           # loads from the disk cache: milliseconds
            elif self._jobs is not None and all(f.done() for _, f in self._jobs) and \
                    self._primes_allow_switch():
                # a library call still being primed runs its NumPy fallback meanwhile
                self._switch()
            else:
                self._compile_in_background()
                if threads.pending:
                    threads.apply()
                if self._loops() and not self._numpy_tier_is_short():
                    # The NumPy tier would run each loop iteration equation by equation
                    # from Python: rather wait for this program's own kernels (the loops
                    # then follow their drivers' policy, numba_backend.control_flow).
                    # Short loops run there meanwhile (scan_rnn's value and grad, 2 x
                    # 1000 steps: 0.08 s a call, where a fresh worker's first kernels
                    # take 0.5 s to compile).
                    self.wait()
                else:
                    plan = None if self.loop_body and not self._loops() else self._mixed()
                    if plan:
                        return "mixed", plan
        if self.state == "ready":
            return "compiled", None
        return "numpy", None

    # -- the mixed tier --
    def _mixed(self):
        """The plan of the mixed tier, rebuilt when a compile it waits for has ended:
        compiled kernels (loaded from the disk cache as their workers finish) and primed
        library calls run as in the compiled tier, every other step through its slice of
        the optimized jaxpr (``_slice_fallback``). None (the NumPy tier runs) while no
        kernel is compiled and the program has no scan, or where a pending step has no
        slice."""
        plan = self._plan_mixed
        if plan is None or any(f.done() for f in self._mixed_waits):
            with self._lock:
                if self.state != "pending" or self._jobs is None:
                    return None
                plan = self._compiled_steps(mixed=True)
                if not plan:
                    # tried again when any compile ends
                    self._mixed_waits = [f for _, f in self._jobs if not f.done()] + \
                        [f for f in self._primes if not f.done()]
                    plan = False
                self._plan_mixed = plan
        return plan

    def _fallback(self, step):
        fb = self._fallbacks.get(id(step), 0)
        if fb == 0:
            fb = self._fallbacks[id(step)] = _slice_fallback(self.program, step)
        return fb

    def wait(self):
        """Block until the background compiles (if any) are done, then switch tiers."""
        jobs = self._jobs
        if jobs is not None:
            with pool.waiting():
                for _, f in jobs:
                    f.result()
                for f in self._primes:
                    f.result()
            self._switch()

    # -- NumPy tier --
    def run_numpy(self, args):
        closed = self.program.jaxpr
        return eval_numpy(closed.jaxpr, closed.consts, args)

    # -- compiled tier --
    def _compiled_steps(self, mixed=False):
        """The steps as tuples of what running them needs, looked up once: slots, output
        shapes and dtypes, kernel params, implementations (the per-step dictionary and
        attribute lookups cost more than a small kernel's run). ``mixed``: the mixed
        tier's plan (see ``_mixed``), or None."""
        p = self.program
        bufs = p.buffers
        slot = self.slot
        plan = []
        pooled = {}     # slot -> (shape, dtype) of large plain kernel outputs
        k = 0
        waits, compiled, loops = [], 0, 0
        jobs = dict(self._jobs or ())
        for i, step in enumerate(p.steps):
            frees = tuple(self.frees[i])
            if isinstance(step, KernelStep) and (mixed or self._broken):
                h = self.handles[k]
                fut = jobs.get(h)
                if not h.ready and h not in self._broken and mixed:
                    if fut is not None and fut.done() and fut.result()["ok"]:
                        try:
                            h.serial()          # a disk-cache load: milliseconds
                        except Exception as e:
                            self._failed(e)
                            return None
                    elif fut is not None and fut.done():
                        self._broken.add(h)
                if not h.ready:
                    fb = self._fallback(step)
                    if fb is None:
                        return None
                    if fut is not None and not fut.done():
                        waits.append(fut)
                    k += 1
                    plan.append(("f", step, fb, tuple(slot[x] for x in step.ins), frees))
                    continue
                compiled += 1
            if isinstance(step, KernelStep):
                h = self.handles[k]
                k += 1
                kern = step.kernel
                f16 = any(needs_view(bufs[x].dtype) for x in step.ins + step.outs)
                work = 1
                for n in step.iparams[:kern.ndim]:
                    work *= n
                ip, fp = self.kernel_params[id(step)]
                plan.append(("k", step, h, tuple(slot[x] for x in step.ins),
                             tuple((slot[o], tuple(bufs[o].shape), np.dtype(bufs[o].dtype))
                                   for o in step.outs),
                             step.flat, f16, ip, fp,
                             work if kern.parallel_dim is not None else None,
                             bool(kern.reductions or all(step.iparams[:kern.ndim])), frees))
                if not f16:
                    for o in step.outs:
                        a = bufs[o]
                        if a.size * np.dtype(a.dtype).itemsize >= _POOL_MIN_BYTES:
                            pooled[slot[o]] = (tuple(a.shape), np.dtype(a.dtype))
            elif isinstance(step, LibraryCall) and step.kind == "reshape_view":
                # a view of a read-only C-contiguous array is one, of the same dtype
                plan.append(("v", slot[step.ins[0]], slot[step.outs[0]],
                             tuple(dict(step.params)["shape"]), frees))
            elif isinstance(step, LibraryCall):
                fn, params = self.library_calls[id(step)]
                loops += step.kind == "scan"
                fut = self._prime_of.get(id(step))
                fb = library.numpy_fallback(step.kind)
                if mixed and fut is not None and not fut.done():
                    waits.append(fut)
                    if fb is None:
                        sl = self._fallback(step)
                        if sl is None:
                            return None
                        plan.append(("f", step, sl, tuple(slot[x] for x in step.ins),
                                     frees))
                        continue
                if fut is not None and fb is not None and not fut.done():
                    plan.append(("p", step, fn, params, tuple(slot[x] for x in step.ins),
                                 fut, fb, frees))
                else:
                    plan.append(("l", step, fn, params, tuple(slot[x] for x in step.ins),
                                 frees))
            else:
                plan.append(("h", step, frees))
        # (every entry ends with its frees) a freed slot holding a large kernel output
        # goes back to the pool (if nothing else refers to it then): its key, else None
        keep = {sl for sl, _ in self.const_values} | {
            self.slot[o] for o in p.outvars if isinstance(o, str)}
        plan = [entry[:-1] + (tuple((sl, pooled.get(sl) if sl not in keep else None)
                                    for sl in entry[-1]),) for entry in plan]
        if mixed:
            if not (compiled or loops):
                # the whole-jaxpr NumPy tier is the same, and cheaper; but a scan runs
                # here through its runner (numba_backend.control_flow), which switches
                # to its body's compiled kernels as they come (they compile first,
                # _compile_in_background), where the NumPy tier would run every
                # iteration equation by equation to the end
                return None
            if config.log_compiles:
                kernels = set(self.handles)    # (steps of the same code share one)
                logger.warning("tracer: %s runs %d of its %d kernels compiled, the rest "
                               "through the NumPy impls", self.name,
                               sum(h.ready for h in kernels), len(kernels))
            self._mixed_waits = waits
        return plan

    def run_compiled(self, args, debug=False, plan=None):
        if debug:
            return self._run_compiled_debug(args)
        if plan is None:
            fast = self._straight
            if fast is not None:
                return fast(args)
            plan = self._plan_compiled
            if plan is None:
                plan = self._plan_compiled = self._compiled_steps()
                self._straight = _straight_line(self, plan)
                if self._straight is not None:
                    return self._straight(args)
        env = [None] * self.n_slots
        for s, a in zip(self.in_slots, args):
            env[s] = _prep(a)
        for s, v in self.const_values:
            env[s] = v
        pool = self._pool
        for entry in plan:
            kind = entry[0]
            if kind == "k":
                (_, step, h, ins, outs, flat, f16, ip, fp, work, run, frees) = entry
                if f16:     # (float16 and ml_dtypes types travel as their bits)
                    self._run_kernel(step, h, env, False, config.parallel_threshold)
                else:
                    vals = [env[s] for s in ins]
                    res = [self._take((shape, dt)) for _, shape, dt in outs]
                    fn = h._serial
                    if fn is None:
                        fn = h.serial()
                    if work is not None and work >= config.parallel_threshold and \
                            _parallel_ok():
                        fn = self._parallel_fn(h, fn)
                    if run:
                        if flat:
                            fn(*[v.reshape(-1) if v.ndim > 1 else v for v in vals],
                               *[o.reshape(-1) if o.ndim > 1 else o for o in res], ip, fp)
                        else:
                            fn(*vals, *res, ip, fp)
                    for (sl, _, _), a in zip(outs, res):
                        a.flags.writeable = False
                        env[sl] = a
                    vals = res = a = None     # (references the pool's check counts)
            elif kind == "v":
                _, src, dst, shape, frees = entry
                env[dst] = env[src].reshape(shape)
            elif kind == "f":
                # not compiled (yet): the step's slice of the jaxpr, on the NumPy impls
                _, step, fn, ins, frees = entry
                self._store(step.outs, fn([env[s] for s in ins]), env)
            elif kind == "l":
                _, step, fn, params, ins, frees = entry
                self._store(step.outs, fn(*[env[s] for s in ins], **params), env)
            elif kind == "p":
                # its kernels are still compiling in a worker: the NumPy fallback, until
                # they are in the disk cache
                _, step, fn, params, ins, fut, fb, frees = entry
                if fut.done():
                    self._plan_compiled = None    # replanned without the fallbacks
                else:
                    fn = fb
                with np.errstate(all="ignore"):
                    outs = fn(*[env[s] for s in ins], **params)
                self._store(step.outs, outs, env)
            else:
                _, step, frees = entry
                self._run_host(step, env)
            for s, key in frees:
                a = env[s]
                env[s] = None
                # (2: ``a`` and getrefcount's argument: no view, caller or cache holds it)
                if key is not None and getrefcount(a) == 2 and \
                        self._pool_bytes + a.nbytes <= _POOL_MAX_BYTES:
                    pool.setdefault(key, []).append(a)
                    self._pool_bytes += a.nbytes
        return [env[r] if kind == "slot" else r for kind, r in self.out_refs]

    def _run_compiled_debug(self, args):
        """The compiled tier with the kernels' Python functions (``debug_kernels``)."""
        p = self.program
        debug = True
        env = [None] * self.n_slots
        for s, a in zip(self.in_slots, args):
            env[s] = _prep(a)
        for s, v in self.const_values:
            env[s] = v
        k = 0
        threshold = config.parallel_threshold
        for i, step in enumerate(p.steps):
            if isinstance(step, KernelStep):
                self._run_kernel(step, self.handles[k], env, debug, threshold)
                k += 1
            elif isinstance(step, LibraryCall):
                vals = [env[self.slot[x]] for x in step.ins]
                fn, params = self.library_calls[id(step)]
                outs = fn(*vals, **params)
                self._store(step.outs, outs, env)
            else:
                self._run_host(step, env)
            for s in self.frees[i]:
                env[s] = None
        return [env[r] if kind == "slot" else r for kind, r in self.out_refs]

    def _run_kernel(self, step, handle, env, debug, threshold):
        slot = self.slot
        bufs = self.program.buffers
        ins = [_kernel_arg(env[slot[x]]) for x in step.ins]
        outs = []
        for o in step.outs:
            a = bufs[o]
            outs.append(np.empty(a.shape, a.dtype))
        if step.flat:        # one flat loop over C-contiguous arrays: raveled views
            ins = [x.reshape(-1) if x.ndim > 1 else x for x in ins]
            kouts = [_kernel_arg(o.reshape(-1) if o.ndim > 1 else o) for o in outs]
        else:
            kouts = [_kernel_arg(o) for o in outs]
        ip, fp = self.kernel_params[id(step)]
        kern = step.kernel
        if debug:
            fn = handle.py
        else:
            fn = handle.serial()
            if kern.parallel_dim is not None and _parallel_ok():
                work = 1
                for n in step.iparams[:kern.ndim]:
                    work *= n
                if work >= threshold:
                    fn = self._parallel_fn(handle, fn)
        # An empty iteration space without reductions writes nothing; running it could
        # still evaluate loop-invariant loads hoisted out of the (empty) loops.
        if kern.reductions or all(n for n in step.iparams[:kern.ndim]):
            if debug:
                # (the Python run warns of nothing the compiled kernel would not: NumPy
                # scalars warn where int64 index arithmetic wraps through uint64)
                with np.errstate(all="ignore"):
                    fn(*ins, *kouts, ip, fp)
            else:
                fn(*ins, *kouts, ip, fp)
        for o, a in zip(step.outs, outs):
            a.flags.writeable = False
            env[slot[o]] = a

    def _parallel_fn(self, handle, serial):
        if handle.ready_parallel():
            return handle._par
        if config.jit_compile == "async":
            if handle.par_job is None:
                handle.par_job = pool.submit(handle.job(True), handle.parallel)
            if not handle.par_job.done():
                return serial
            if not handle.par_job.result()["ok"]:
                logger.warning("tracer: the parallel variant of kernel %s failed to compile "
                               "(%s); serial loops are used", handle.path,
                               handle.par_job.result().get("error"))
                handle._par = serial
                return serial
        try:
            return handle.parallel()       # after a worker's compile: a disk-cache load
        except Exception as e:
            if STRICT:
                raise
            logger.warning("tracer: parallel kernel failed to compile (%s); serial loops "
                           "are used", e)
            handle._par = serial
            return serial

    def _take(self, key):
        """A buffer of ``key`` = (shape, dtype) for a kernel's output: one the pool holds
        (writable again), else a new one."""
        free = self._pool.get(key)
        if free:
            try:        # (another thread may have taken the last one)
                a = free.pop()
            except IndexError:
                a = None
            if a is not None:
                self._pool_bytes -= a.nbytes
                a.flags.writeable = True
                return a
        return np.empty(*key)

    def _slot_ndim(self, sl) -> int:
        """The rank of the array in slot ``sl`` (its buffer's aval)."""
        if self._ndims is None:
            bufs = self.program.buffers
            self._ndims = {s: len(bufs[n].shape) for n, s in self.slot.items() if n in bufs}
        return self._ndims[sl]

    def _store(self, names, outs, env):
        bufs = self.program.buffers
        for o, v in zip(names, outs):
            a = bufs[o]
            if isinstance(v, Token):
                env[self.slot[o]] = v
                continue
            v = np.asarray(v)
            if v.dtype != a.dtype:
                v = v.astype(a.dtype)
            if v.shape != tuple(a.shape):
                raise AssertionError(f"a library call returned shape {v.shape}, expected "
                                     f"{a.str_short()}")
            env[self.slot[o]] = _prep(v)

    def _run_host(self, step: HostStep, env):
        vals = [env[self.slot[x]] if isinstance(x, str) else x[1] for x in step.ins]
        prim = step.primitive
        with numpy_tier_scope():
            outs = prim.impl(*vals, **dict(step.params))
        if not prim.multiple_results:
            outs = [outs]
        self._store(step.outs, outs, env)


def _straight_line(ex: "Executable", plan):
    """The compiled tier's plan as one generated Python function ``run(args) -> outs``,
    or None where the plan holds entries it does not cover (float16 kernels, fallbacks).

    The same steps as ``run_compiled``'s loop over the plan, bit for bit, without its
    per-step interpretation (the kind dispatch, tuple unpacking, list building): a
    program of many small steps spent about 2.8 us per step there (tutorials/05's
    training step: 34 steps, 95 us of 370 us). Kernels are resolved when they are ready;
    a step with a parallel variant still picks it per call."""
    if not plan or any(e[0] not in "kvlh" or (e[0] == "k" and e[6]) for e in plan):
        return None
    g = {"np": np, "empty": np.empty, "_prep": _prep, "getrefcount": getrefcount,
         "config": config, "_parallel_ok": _parallel_ok, "ex": ex, "pool": ex._pool,
         "_POOL_MAX_BYTES": _POOL_MAX_BYTES}
    lines = ["def run(args):", f"    env = [None] * {ex.n_slots}",
             "    threshold = config.parallel_threshold"]
    for j, s in enumerate(ex.in_slots):
        lines.append(f"    env[{s}] = _prep(args[{j}])")
    for j, (s, v) in enumerate(ex.const_values):
        g[f"C{j}"] = v
        lines.append(f"    env[{s}] = C{j}")
    for i, entry in enumerate(plan):
        kind = entry[0]
        lines.append(f"    # {i}: {kind}")
        if kind == "k":
            (_, step, h, ins, outs, flat, _f16, ip, fp, work, run, frees) = entry
            fn = h._serial if h._serial is not None else h.serial()
            g[f"K{i}"], g[f"H{i}"], g[f"IP{i}"], g[f"FP{i}"] = fn, h, ip, fp
            for sl, shape, dt in outs:
                g[f"D{sl}"] = dt
                if (shape, dt) in _poolable_keys(plan):
                    g[f"P{sl}"] = (shape, dt)
                    lines.append(f"    env[{sl}] = ex._take(P{sl})")
                else:
                    lines.append(f"    env[{sl}] = empty({shape!r}, D{sl})")
            if run:
                def arg(sl, ndim):
                    return f"env[{sl}].reshape(-1)" if flat and ndim > 1 else f"env[{sl}]"
                ndims = {sl: len(shape) for sl, shape, _ in outs}
                args_ = [arg(sl, ex._slot_ndim(sl)) for sl in ins] + \
                    [arg(sl, ndims[sl]) for sl, _, _ in outs] + [f"IP{i}", f"FP{i}"]
                call = ", ".join(args_)
                if work is not None:
                    g[f"W{i}"] = work
                    lines += [f"    if W{i} >= threshold and _parallel_ok():",
                              f"        ex._parallel_fn(H{i}, K{i})({call})",
                              "    else:",
                              f"        K{i}({call})"]
                else:
                    lines.append(f"    K{i}({call})")
            for sl, _, _ in outs:
                lines.append(f"    env[{sl}].setflags(False)")     # (write=False)
        elif kind == "v":
            _, src, dst, shape, frees = entry
            lines.append(f"    env[{dst}] = env[{src}].reshape({shape!r})")
        elif kind == "l":
            _, step, fn, params, ins, frees = entry
            call = ", ".join(f"env[{sl}]" for sl in ins)
            if step.kind == "dot_general":
                # its plan for these shapes, called directly: a fresh C-contiguous product
                # of the buffer's dtype and shape (what _store would check and freeze)
                lhs, rhs = (ex.program.buffers[x] for x in step.ins)
                g[f"L{i}"] = library.dot_general_plan(
                    tuple(lhs.shape), tuple(rhs.shape), np.dtype(lhs.dtype),
                    params["dimension_numbers"], params.get("preferred_element_type"))
                out = ex.slot[step.outs[0]]
                lines += [f"    env[{out}] = a = L{i}({call})[0]",
                          "    a.setflags(False)"]
            else:
                g[f"L{i}"], g[f"A{i}"], g[f"O{i}"] = fn, params, step.outs
                lines.append(f"    ex._store(O{i}, L{i}({call}, **A{i}), env)")
        else:
            _, step, frees = entry
            g[f"S{i}"] = step
            lines.append(f"    ex._run_host(S{i}, env)")
        for sl, key in frees:
            if key is None:
                lines.append(f"    env[{sl}] = None")
            else:
                # (as run_compiled: 2 is ``a`` and getrefcount's argument)
                g[f"F{sl}"] = key
                lines += [f"    a = env[{sl}]",
                          f"    env[{sl}] = None",
                          "    if getrefcount(a) == 2 and "
                          "ex._pool_bytes + a.nbytes <= _POOL_MAX_BYTES:",
                          f"        pool.setdefault(F{sl}, []).append(a)",
                          "        ex._pool_bytes += a.nbytes",
                          "    a = None"]
    refs = ", ".join(f"env[{r}]" if kind == "slot" else f"R{j}"
                     for j, (kind, r) in enumerate(ex.out_refs))
    for j, (kind, r) in enumerate(ex.out_refs):
        if kind != "slot":
            g[f"R{j}"] = r
    lines.append(f"    return [{refs}]")
    src = "\n".join(lines) + "\n"
    exec(compile(src, f"<tracer straight-line runner of {ex.name}>", "exec"), g)
    run = g["run"]
    run.source = src
    return run


def _poolable_keys(plan) -> set:
    """The (shape, dtype) keys the plan's frees return to the buffer pool."""
    return {key for e in plan for _, key in e[-1] if key is not None}


_par_ok = None


def _parallel_ok() -> bool:
    global _par_ok
    if _par_ok is None:
        _par_ok = lazy_numba.setting("NUMBA_NUM_THREADS", "NUMBA_NUM_THREADS", int,
                                     lazy_numba.default_num_threads) > 1
    return _par_ok and threads.parallel_ok()


def _slice_fallback(program: Program, step):
    """``fn(input arrays) -> output arrays`` computing ``step``'s outputs from its inputs
    through the NumPy impls: the equations of the program's optimized jaxpr between the
    variables its input buffers hold and those its output buffers hold (what the step's
    kernel fused, its recomputed values included). None when a buffer holds no variable
    (a structured rule's own) or the slice would read a value the step does not get."""
    bv = program.buffer_vars
    consts = {name for name, _ in program.consts}
    outs = [bv.get(o) for o in step.outs]
    if any(v is None for v in outs):
        return None
    picks, in_vars = [], []
    for k, x in enumerate(step.ins):
        if not isinstance(x, str):
            return None                  # (a host step's literal operand)
        v = bv.get(x)
        if v is None:
            if x in consts:
                continue                 # a literal's buffer: the jaxpr holds the literal
            return None
        if v not in in_vars:
            picks.append(k)
            in_vars.append(v)
    jaxpr = program.jaxpr.jaxpr
    producer = {v: e for e in jaxpr.eqns for v in e.outvars}
    avail, used, stack = set(in_vars), set(), list(outs)
    while stack:
        v = stack.pop()
        if not isinstance(v, Var) or v in avail:
            continue
        e = producer.get(v)
        if e is None:
            return None
        if id(e) not in used:
            used.add(id(e))
            stack.extend(e.invars)
    sub = Jaxpr([], in_vars, [e for e in jaxpr.eqns if id(e) in used], outs)

    def run(vals):
        with numpy_tier_scope():
            return eval_jaxpr_impls(sub, [], [vals[k] for k in picks])
    run.jaxpr = sub
    return run


def eval_numpy(jaxpr, consts, args):
    """The NumPy tier: ``jaxpr`` through the NumPy impls (the eager reference)."""
    with numpy_tier_scope():
        return eval_jaxpr_impls(jaxpr, consts, args)


def compile_program(program: Program, name: str = "jit") -> Executable:
    t0 = time.perf_counter()
    ex = Executable(program, name)
    if config.log_compiles:
        logger.warning("Lowered %s: %d kernels, %d steps in %.1f ms", name, len(ex.handles),
                       len(program.steps), (time.perf_counter() - t0) * 1e3)
    return ex
