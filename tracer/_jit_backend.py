"""The bridge from ``jit`` to the compiler: ``run`` executes a traced program, ``lower``
returns the object behind ``jitted.lower(...)``.

``run(closed_jaxpr, args, name)`` lowers the jaxpr once (``lowering.pipeline``), builds an
``Executable`` (``numba_backend.executor``: generated kernels, compiled by Numba and cached
in memory and on disk) and runs it; executables are kept per ClosedJaxpr (a jitted
function's trace cache keeps its jaxprs alive). Numba is imported here, on the first jit
call, never by ``import tracer``.
"""
from __future__ import annotations

import logging
import time
from collections import OrderedDict

import numpy as np

from tracer import dtypes
from tracer.config import config
from tracer.core import Array, Token, may_change, memory_owner, new_base_main, to_numpy
from tracer.jaxpr import ClosedJaxpr, Literal, _Namer, _pp_eqn

logger = logging.getLogger("tracer")

_MAX_EXECUTABLES = 512
_executables: "OrderedDict[int, tuple]" = OrderedDict()


def prestart_compile_worker():
    """Start one compile worker now, at ``import tracer``, when the default tier (async)
    will use it: it takes about a second to import Numba and warm up, time the program
    spends importing, building inputs and tracing (``numba_backend.workers``: plain
    subprocesses, no Numba in this process). It warms up only where the kernel cache is
    empty (a first run: compiles will come; a later run mostly loads from the cache). It
    idles, and ends with the program, where nothing is ever compiled;
    ``jit_compile="sync"`` or ``"none"`` at import start none."""
    if config.jit_compile != "async":
        return
    try:
        import os
        from numba_backend.workers import pool
        kernels = os.path.join(config.cache_dir, "kernels")
        try:
            with os.scandir(kernels) as it:
                empty = not any(e.name.endswith(".py") for e in it)
        except OSError:
            empty = True
        pool.prestart(warm_up=empty)
    except Exception:   # an optimisation: the first compile starts the pool anyway
        pass


def _lower_program(closed: ClosedJaxpr):
    from lowering import pipeline
    return pipeline.lower(closed)


def get_executable(closed: ClosedJaxpr, name: str):
    key = id(closed)
    hit = _executables.get(key)
    if hit is not None and hit[0] is closed:
        _executables.move_to_end(key)
        return hit[1]
    from numba_backend import executor
    t0 = time.perf_counter()
    try:
        program = _lower_program(closed)
    except Exception as e:
        if executor.STRICT:
            raise
        # a lowering rule's bug: the program still runs, through the NumPy impls
        logger.warning("tracer: lowering %s failed (%s: %s); it runs through the NumPy "
                       "impls. This is a bug in tracer's compiler; please report it.",
                       name, type(e).__name__, e)
        ex = _NumPyOnly(closed, f"{type(e).__name__}: {e}")
    else:
        ex = executor.compile_program(program, name)
    if config.log_compiles:
        logger.warning("Lowered jit(%s) in %.1f ms", name, (time.perf_counter() - t0) * 1e3)
    _executables[key] = (closed, ex)
    if len(_executables) > _MAX_EXECUTABLES:
        _executables.popitem(last=False)
    return ex


class _NumPyOnly:
    """The executable of a program that could not be lowered: the NumPy tier only."""

    state = "failed"
    sources = ()        # (no generated code: ``Lowered.as_text`` says why)

    def __init__(self, closed: ClosedJaxpr, error: str = ""):
        self.closed = closed
        self.error = error

    def ensure_compiled(self):
        """Nothing to compile: this program runs on the NumPy tier only."""

    def __call__(self, args):
        from numba_backend.executor import eval_numpy
        return eval_numpy(self.closed.jaxpr, self.closed.consts, args)

    def wait(self):
        pass


def run(closed: ClosedJaxpr, args, name: str):
    """Run the jitted program ``closed`` on concrete NumPy ``args`` (jit_p's impl); returns
    NumPy arrays of the jaxpr's output dtypes (eval_primitive wraps them)."""
    ex = get_executable(closed, name)
    outs = ex(args)
    if config.debug_nans:
        _check_nans(closed, args, outs, name)
    return outs


def run_arrays(closed: ClosedJaxpr, leaves, name: str, out_avals=None):
    """``run`` on the values of ``leaves`` (Arrays, NumPy arrays, scalars), returning
    Arrays with the jaxpr's output avals (weak types included), or with ``out_avals``
    (equal ones: the jit cache's own objects, so that a result passed back in builds a
    key that compares by identity)."""
    args = []
    mutable = None      # owners of the memory of arguments that can still change
    for x in leaves:
        if type(x) is Array:
            args.append(x._value)       # (read-only, its memory the Array's)
            continue
        a = to_numpy(x)
        args.append(a)
        if isinstance(a, np.ndarray) and may_change(a):
            if mutable is None:
                mutable = set()
            mutable.add(id(memory_owner(a)))
    outs = run(closed, args, name)
    res = []
    new = Array.__new__
    for o, aval in zip(outs, out_avals or closed.out_avals):
        if type(o) is not np.ndarray:
            res.append(o if isinstance(o, Token) else Array(o, aval.weak_type))
            continue
        if mutable is not None and (o.base is None and id(o) in mutable or
                                    o.base is not None and id(memory_owner(o)) in mutable):
            # an output passing a caller's array through (or a view the program made of
            # it): a copy, so writing to that array later never changes the Array
            o = o.copy()
        o.setflags(False)       # (core._new_array inline: a call less per result)
        a = new(Array)
        a._value, a._weak_type, a._aval = o, aval.weak_type, aval
        res.append(a)
    return res


# ------------------------------------------ debug_nans ------------------------------------------

def _has_nan(x) -> bool:
    x = np.asarray(x)
    # (the ml_dtypes floats have kind "V": ask the dtype layer)
    return (x.dtype.kind in "fc" or dtypes.is_lowp_float(x.dtype)) and bool(np.isnan(x).any())


def _check_nans(closed, args, outs, name):
    if not any(_has_nan(o) for o in outs):
        return
    # re-run eagerly, equation by equation, to name the first primitive producing a NaN
    from lowering import passes
    flat = passes.inline_calls(closed)
    jaxpr = flat.jaxpr
    env = {v: np.asarray(c) for v, c in zip(jaxpr.constvars, flat.consts)}
    env.update({v: np.asarray(a) for v, a in zip(jaxpr.invars, args)})
    namer = _Namer()
    for v in jaxpr.constvars + jaxpr.invars:
        namer.decl(v)

    def read(a):
        return np.asarray(a.val) if isinstance(a, Literal) else env[a]

    with new_base_main(), np.errstate(all="ignore"):
        for eqn in jaxpr.eqns:
            text = _pp_eqn(eqn, namer, 0)
            ins = [read(a) for a in eqn.invars]
            res = eqn.primitive.impl(*ins, **eqn.params)
            res = res if eqn.primitive.multiple_results else [res]
            for v, r in zip(eqn.outvars, res):
                env[v] = np.asarray(r)
            if any(_has_nan(r) for r in res) and not any(_has_nan(i) for i in ins):
                raise FloatingPointError(
                    f"invalid value (nan) encountered in {eqn.primitive.name} inside "
                    f"jit({name}) (debug_nans): {text[:200]}")
    raise FloatingPointError(f"invalid value (nan) in the output of jit({name}) "
                             "(debug_nans); the eager re-run produced it from NaN inputs")


# -------------------------------------------- lower ---------------------------------------------

class Lowered:
    """``jitted.lower(*args)``: ``as_text()`` shows the optimized jaxpr, the loop IR and
    the generated source of every kernel; ``compile()`` returns a callable."""

    def __init__(self, traced, wrapped):
        self.traced = traced
        self.wrapped = wrapped
        self._ex = None

    def _executable(self):
        if self._ex is None:
            self._ex = get_executable(self.traced.jaxpr, self.traced.name)
        return self._ex

    def as_text(self) -> str:
        ex = self._executable()
        if isinstance(ex, _NumPyOnly):
            return "\n".join([f"# jaxpr of {self.traced.name}", str(self.traced.jaxpr), "",
                              f"# lowering failed ({ex.error}): the program runs through "
                              "the NumPy impls; this is a bug in tracer's compiler"])
        p = ex.program
        parts = [f"# jaxpr of {self.traced.name}", str(self.traced.jaxpr),
                 "", "# optimized jaxpr", str(p.jaxpr),
                 "", "# loop IR", p.pretty()]
        for i, src in enumerate(ex.sources):
            parts += ["", f"# generated source of kernel {i} ({src.key[:12]})", src.text]
        from lowering.ir import LibraryCall
        from numba_backend.library import generated_source
        for step in p.steps:
            # library calls that generate code of their own (compiled control flow)
            src = generated_source(step) if isinstance(step, LibraryCall) else None
            if src is not None:
                parts += ["", f"# generated source of {step.name}", src]
        return "\n".join(parts)

    def compile(self):
        ex = self._executable()
        ex.ensure_compiled()
        return Compiled(self.wrapped, ex)


class Compiled:
    """The callable returned by ``Lowered.compile()``: the jitted function, with its
    kernels compiled."""

    def __init__(self, wrapped, executable):
        self.wrapped = wrapped
        self.executable = executable

    def __call__(self, *args, **kwargs):
        return self.wrapped(*args, **kwargs)

    def as_text(self) -> str:
        return "\n\n".join(s.text for s in self.executable.sources)


def lower(traced, wrapped):
    return Lowered(traced, wrapped)
