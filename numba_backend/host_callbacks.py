"""Host callbacks called back from compiled loop drivers.

A ``pure_callback``, ``io_callback`` or ``debug_callback`` equation (lax/callbacks.py) has
no lowering: it is a ``HostStep``, a call of its NumPy impl. Inside a scan / while / cond
body, ``numba_backend.control_flow`` emits it as a call back into Python from the
compiled driver, through a ``numba.objmode`` block::

    with objmode():
        hc_call(IP[7], b3, b5)      # operand buffers, then result buffers

The driver's source names neither the user's function nor anything of this process: the
step is registered here (``register``) as an ``Entry`` (the primitive's impl, its
params, the avals of its operands and results) under a token unique in the process, and
the token travels in the driver's integer parameter vector ``IP``, read at run time. So
a driver's source and cache key are the same in every process, compile workers compile
it, and Numba's disk cache holds it (the object-mode block refers to ``call`` below by
its module and name, never to a user's function): a changed callback cannot reuse stale
code, since no code holds it.

``call(token, *buffers)`` runs the step as the executor's host step does (the impl on
the operands, under ``np.errstate(all="ignore")``): the callback gets copies of the
operands as ``tracer.Array`` values (the driver reuses its buffers every iteration), its
results are checked against ``result_shape_dtypes`` (RuntimeError naming the callback,
by ``lax.callbacks``), and copied into the driver's result buffers. An exception raised
by the callback propagates out of the object-mode block as it is, with its traceback; in
case a Numba version wraps it, it is also kept (``take_pending``) for the driver's caller
to raise instead of the wrapper (``control_flow.CompiledRunner``).

The table holds its entries weakly: a driver's runner holds the entries of the tokens in
its ``IP``, so an entry lives as long as the loop that calls it.

This module imports NumPy only: a compile worker imports it with a driver's module
(``register`` is for the program's process, which has traced the step).
"""
from __future__ import annotations

import itertools
import threading
import weakref

import numpy as np

# The primitives a driver may call back (their impls take and return arrays only): the
# callbacks, and the MPI steps of the collectives over a multi-process pmap axis
# (lax/mpi.py's PRIMITIVE_NAMES), so that a loop holding a psum stays compiled.
PRIMITIVES = frozenset({"pure_callback", "io_callback", "debug_callback",
                        "mpi_allreduce", "mpi_allgather", "mpi_reduce_scatter",
                        "mpi_alltoall", "mpi_ppermute", "mpi_bcast"})

stats = {"calls": 0}        # calls from compiled drivers (tests read it)

_F16 = np.dtype(np.float16)
_table: "weakref.WeakValueDictionary" = weakref.WeakValueDictionary()   # token -> Entry
_tokens = itertools.count(1)
_lock = threading.Lock()
_pending = threading.local()


class Entry:
    """One host step a driver calls back: run ``impl(*operands, **params)`` and copy its
    results into the driver's buffers."""

    __slots__ = ("token", "name", "impl", "params", "multiple_results", "n_in",
                 "in_f16", "any_f16", "out_avals", "out_f16", "__weakref__")

    def __init__(self, token, primitive, params, in_avals, out_avals):
        self.token = token
        cb = params.get("callback")
        self.name = f"{primitive.name} {getattr(cb, '__name__', None) or repr(cb)}"
        self.impl = primitive.impl
        self.params = params
        self.multiple_results = primitive.multiple_results
        self.n_in = len(in_avals)
        self.in_f16 = tuple(np.dtype(a.dtype) == _F16 for a in in_avals)
        self.out_avals = tuple((tuple(a.shape), np.dtype(a.dtype)) for a in out_avals)
        self.out_f16 = tuple(dt == _F16 for _, dt in self.out_avals)
        self.any_f16 = any(self.in_f16)

    def run(self, arrays):
        n = self.n_in
        ins = arrays[:n]
        if self.any_f16:
            ins = [a.view(_F16) if f16 else a for a, f16 in zip(ins, self.in_f16)]
        with np.errstate(all="ignore"):     # as the executor runs host steps
            outs = self.impl(*ins, **self.params)
        if not self.out_avals:
            return
        if not self.multiple_results:
            outs = [outs]
        for buf, v, (shape, dt), f16 in zip(arrays[n:], outs, self.out_avals, self.out_f16):
            v = np.asarray(v)
            if v.dtype != dt:
                v = v.astype(dt)
            if v.shape != shape:
                raise AssertionError(f"{self.name} returned shape {v.shape}, expected {shape}")
            np.copyto(buf.view(_F16) if f16 else buf, v)


def compilable(step) -> bool:
    """Whether a driver can call the host step ``step`` back (a callback primitive)."""
    return step.primitive.name in PRIMITIVES


def register(primitive, params: dict, in_avals, out_avals) -> Entry:
    """A new entry (and token) for a host step; the caller keeps it alive."""
    with _lock:
        token = next(_tokens)
        entry = Entry(token, primitive, params, in_avals, out_avals)
        _table[token] = entry
    return entry


def call(token, *arrays):
    """The call a driver's object-mode block makes: the entry of ``token`` on the operand
    buffers, then the result buffers."""
    entry = _table.get(token)
    if entry is None:
        raise RuntimeError(f"tracer: no host callback {token} in this process (a compiled "
                           "loop driver ran without the runner that registered it)")
    try:
        entry.run(arrays)
    except BaseException as e:
        _pending.exc = e
        raise
    stats["calls"] += 1


def calls_host_callbacks(text: str) -> bool:
    """Whether generated source ``text`` calls host callbacks back (through ``call``)."""
    return f"from {__name__} import call " in text


def take_pending():
    """The exception a callback raised in a driver on this thread since the last call
    (None if none), cleared."""
    e = getattr(_pending, "exc", None)
    _pending.exc = None
    return e
