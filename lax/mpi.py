"""The cross-process steps of the collectives of a multi-process ``pmap`` axis.

A collective over a pmap axis that spans several processes (``AxisData.group``, see
tracer/distributed.py) runs in two stages (lax/collectives.py): the members on this
process's local devices are combined by the vmap rules' batched primitives, then the
processes by one of the primitives below, whose impl is one MPI call on the NumPy
buffers (mpi4py's buffer interface: no pickling, no copy of a contiguous operand):

    mpi_allreduce    x -> the elementwise sum / max / min over processes     MPI_Allreduce
    mpi_allgather    x -> [P, *x.shape], row p = process p's x               MPI_Allgather
    mpi_reduce_scatter  [P, ...] -> row ``rank`` of the sum over processes   MPI_Reduce_scatter_block
    mpi_alltoall     [P, ...] -> row q = process q's row ``rank``            MPI_Alltoall
    mpi_ppermute     [L, ...] (this process's members) -> the rows the global
                     permutation sends here, zeros elsewhere                 MPI_Sendrecv (per shift)
    mpi_bcast        x -> process ``root``'s x                              MPI_Bcast

Each call runs under a watchdog (``_Watchdog``): past ``TRACER_MPI_TIMEOUT`` seconds
(default 600, 0 for none) in one call, waiting for the other processes, the job is
aborted with a message naming the process and the collective, so a process that exited
early cannot leave the others hanging.

They have no lowering rule: under ``jit`` each is a host step, run in program order
between kernels, and inside a scan / while / cond body the compiled loop driver calls it
back (numba_backend/host_callbacks.py lists them), so a loop holding a psum stays
compiled. Their ``has_effects`` keeps the jit pipeline from folding, merging or dropping
them (every process must make the same MPI calls in the same order).

Before communicating, every call checks a small header (the primitive, its static
params, the operand's shape and dtype) with one Allgather of its 128-bit digest
(``_check_header``): processes that disagree raise ValueError on every process, naming
each rank's operand, instead of exchanging mismatched buffers or hanging. Outputs the
MPI call overwrites whole come from a pool of buffers that nobody references any more
(``_output``), sparing a large output's page faults.

Reduction order (determinism): a float ``psum`` over a pmap axis sums the local members
first (reduce_sum over the local batch axis, NumPy's pairwise order), then the processes
with ``MPI_Allreduce(MPI_SUM)``. For a fixed process count and message size MPICH picks
one algorithm and one order (the MPI standard's advice to implementors, section 6.9.1 of
MPI 4.0: the same result for the same arguments in the same order), so results repeat
run to run; they can differ in the last bits from a single-process vmap's sum.
``TRACER_MPI_SUM=ordered`` sums the processes instead in rank order, ``((p0 + p1) + p2)
+ ...``, after an Allgather (P times the traffic; bitwise independent of the MPI
implementation). Dtypes MPI has no sum for (float16, bfloat16, ...) take that path too.
max/min always gather and reduce locally with the project's rules (NaN propagates, as in
XLA; MPI_MAX does not), exact in any order. Integer sums wrap as NumPy's do.

Differentiation: allreduce-sum, allgather / reduce_scatter, alltoall, ppermute and bcast
are linear; their transposes are (JAX's shard_map rules, per process) allreduce-sum,
reduce_scatter / allgather, alltoall, ppermute with the inverse permutation, and the sum
of the cotangents onto the root.
"""
from __future__ import annotations

import os
import sys

import numpy as np

from tracer.core import Primitive, ShapedArray
from tracer.interpreters import ad, batching
from tracer.interpreters.ad import Zero

__all__ = ["allreduce", "allgather", "reduce_scatter", "alltoall", "ppermute", "bcast",
           "replicated_in", "replicated_out", "PRIMITIVE_NAMES"]

# MPI has a predefined datatype and MPI_SUM for these (mpi4py maps them from the buffer).
_MPI_SUM_DTYPES = frozenset(np.dtype(t) for t in (
    np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float32, np.float64, np.complex64, np.complex128))


def _ordered_sum() -> bool:
    return os.environ.get("TRACER_MPI_SUM", "") == "ordered"


def _mpi():
    from mpi4py import MPI
    return MPI


class _MpiPrimitive(Primitive):
    # read by lowering.passes.is_effectful: never folded, merged (CSE) or dropped (DCE)
    has_effects = True


_HEADER_BYTES = 256


def _timeout_s() -> float:
    raw = os.environ.get("TRACER_MPI_TIMEOUT", "")
    try:
        return float(raw) if raw else 600.0
    except ValueError:
        raise ValueError(f"TRACER_MPI_TIMEOUT={raw!r} must be a number of seconds (0: wait "
                         "forever)") from None


class _Watchdog:
    """Aborts the job when a collective has waited past TRACER_MPI_TIMEOUT seconds.

    The collectives are MPI's blocking calls (their own progress engine; a polling loop of
    ``Test`` with sleeps stalled the multi-round algorithms of large messages 2-3x).
    mpi4py releases the GIL inside them, so one daemon thread, started with the first
    collective, checks once a second whether the call in flight started too long ago; it
    then prints which process and which collective, and calls MPI_Abort (the launcher
    ends every process). Cost per collective: two attribute writes."""

    def __init__(self):
        self.current = None          # (what, group, start) of the call in flight
        self.thread = None

    def run(self, group, what, call):
        limit = _timeout_s()
        if limit and self.thread is None:
            import threading
            self.thread = threading.Thread(target=self._watch, args=(limit,), daemon=True,
                                           name="tracer-mpi-watchdog")
            self.thread.start()
        import time
        start = time.perf_counter()
        self.current = (what, group, time.monotonic())
        try:
            return call()
        finally:
            self.current = None
            stats["calls"] += 1
            stats["seconds"] += time.perf_counter() - start

    def _watch(self, limit):
        import time
        while True:
            time.sleep(min(1.0, limit / 4))
            cur = self.current
            if cur is None:
                continue
            what, group, start = cur
            waited = time.monotonic() - start
            if waited > limit and self.current is cur:
                sys.stderr.write(
                    f"tracer.distributed: process {group.rank} of {group.size} waited "
                    f"{waited:.0f} s (TRACER_MPI_TIMEOUT) in {what} for the other processes; "
                    "one of them has exited, hangs, or did not make this collective call. "
                    "Aborting the MPI job\n")
                sys.stderr.flush()
                try:
                    _mpi().COMM_WORLD.Abort(2)
                finally:
                    os._exit(2)


_watchdog = _Watchdog()
# MPI calls made by this process and the seconds spent in them (waiting for the other
# processes included): the tutorial's communication share reads it.
stats = {"calls": 0, "seconds": 0.0}


def _wait(group, what, call):
    """Run the blocking MPI call ``call()`` of the collective ``what`` under the watchdog:
    past ``TRACER_MPI_TIMEOUT`` seconds (default 600; 0: no limit) of waiting, the other
    processes are taken to be gone and the job is aborted, naming this process and the
    collective, never a hang."""
    return _watchdog.run(group, what, call)


_digests: dict = {}     # (name, key, shape, dtype) -> (header text, its 128-bit digest)


def _header(name, key, x):
    k = (name, key, tuple(x.shape), np.dtype(x.dtype).name)
    got = _digests.get(k)
    if got is None:
        import hashlib
        text = repr(k).encode()
        if len(text) > _HEADER_BYTES:    # a long perm: its digest identifies it
            pd = hashlib.sha256(repr(key).encode()).hexdigest()[:16]
            text = repr((name, f"perm#{pd}", k[2], k[3])).encode()
        h = np.frombuffer(hashlib.blake2b(text, digest_size=16).digest(), np.uint64)
        got = _digests[k] = (text, h.copy())
        if len(_digests) > 4096:
            _digests.clear()
    return got


def _check_header(group, name, key, x):
    """Every process's (primitive, static params, shape, dtype), compared before any
    buffer moves; ValueError on every process when they differ.

    One MPI_Allgather of a 128-bit digest of the header (cached per header), compared
    row by row, so every process reaches the same verdict from the same message. Only on
    a mismatch every process gathers the full headers (``_HEADER_BYTES`` each) to name
    each rank's operand. Headers that collide in 128 bits would pass: 2**-128 per pair.
    (A 32-byte Allreduce(MAX) of the digest and its complement measured 10.8 us against
    this Allgather's 7.9 us on 2 processes, and 2.8 ms against 2.6 ms on 4 oversubscribed
    ones: MPICH's small Allgather is the cheaper round.)"""
    text, mine = _header(name, key, x)
    everyone_h = np.empty((group.size, mine.size), mine.dtype)
    _wait(group, f"{name} (its header)", lambda: group.comm.Allgather(mine, everyone_h))
    if (everyone_h == mine).all():
        return
    row = np.zeros(_HEADER_BYTES, np.uint8)
    row[:len(text)] = np.frombuffer(text, np.uint8)
    everyone = np.empty((group.size, _HEADER_BYTES), np.uint8)
    _wait(group, f"{name} (its header)", lambda: group.comm.Allgather(row, everyone))
    import ast
    headers = [ast.literal_eval(bytes(r).rstrip(b"\0").decode()) for r in everyone]
    lines = "\n".join(f"  rank {r}: {h[0]}{'' if h[1] is None else f' {h[1]}'} of an "
                      f"operand of shape {h[2]} and dtype {h[3]}"
                      for r, h in enumerate(headers))
    raise ValueError(
        f"tracer.pmap: the processes called mismatched collectives (each process must "
        f"make the same collective calls, in the same order, on operands of the same "
        f"shape and dtype; nothing was exchanged):\n{lines}")


# ===================================== output buffers ====================================
# A fresh 64 MB output costs its page faults on first write (measured: 6% of a 2-process
# Allreduce, up to 45% on 4 oversubscribed processes). Outputs that every element of the
# MPI call overwrites come from a pool instead: one buffer per (shape, dtype), handed out
# again only when the pool holds the last reference to it (CPython's reference count: an
# output still held by the caller, by an Array, by a view of it (its ``base``), or by a
# Numba array (its meminfo owns a reference) is never reused).

_pool: dict = {}      # (shape, dtype) -> ndarray, oldest first
_POOL_MIN_BYTES = 1 << 16


def _pool_limit() -> int:
    raw = os.environ.get("TRACER_MPI_BUFFER_POOL_MB", "")
    try:
        return int(float(raw) * (1 << 20)) if raw else 1 << 30
    except ValueError:
        raise ValueError(f"TRACER_MPI_BUFFER_POOL_MB={raw!r} must be a number of MiB (0: "
                         "no pool, a fresh output per collective)") from None


def _output(shape, dtype):
    """An uninitialised C-contiguous array of ``shape`` and ``dtype`` for an MPI call
    that writes all of it: a pooled one that nobody else references, else a new one
    (kept in the pool when it is at least 64 KiB and the pool, ``TRACER_MPI_BUFFER_POOL_MB``
    MiB in all, default 1024, has room, dropping the oldest entries)."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if nbytes < _POOL_MIN_BYTES:
        return np.empty(shape, dtype)
    key = (tuple(shape), dtype)
    buf = _pool.get(key)
    # references: the pool's, ``buf`` here, getrefcount's argument
    if buf is not None and sys.getrefcount(buf) == 3:
        buf.flags.writeable = True    # results are handed out read-only; it owns its data
        return buf
    buf = np.empty(shape, dtype)
    limit = _pool_limit()
    if nbytes <= limit:
        _pool.pop(key, None)
        total = sum(b.nbytes for b in _pool.values())
        while _pool and total + nbytes > limit:
            total -= _pool.pop(next(iter(_pool))).nbytes
        _pool[key] = buf
    return buf


def _contig(x):
    """``x`` as a C-contiguous array of its own shape (np.ascontiguousarray makes a 0-d
    array 1-d)."""
    x = np.asarray(x)
    return x if x.flags.c_contiguous else np.ascontiguousarray(x).reshape(x.shape)


def _buf(x):
    x = _contig(x)
    if np.dtype(x.dtype) in _MPI_SUM_DTYPES or x.dtype == np.bool_:
        return x, x
    # dtypes without an MPI datatype (float16, bfloat16...) travel as bytes
    return x, x.view(np.uint8)


def _gather(group, x):
    """[P, *x.shape]: every process's x (MPI_Allgather)."""
    x, send = _buf(x)
    out = _output((group.size,) + x.shape, x.dtype)
    recv = out.view(np.uint8) if send.dtype != x.dtype else out
    _wait(group, "allgather", lambda: group.comm.Allgather(send, recv))
    return out


# ========================================= allreduce ======================================

def _allreduce_impl(x, *, op, group):
    x = np.asarray(x)
    _check_header(group, "allreduce", op, x)
    if op == "sum" and np.dtype(x.dtype) in _MPI_SUM_DTYPES and not _ordered_sum():
        x = _contig(x)
        out = _output(x.shape, x.dtype)
        _wait(group, "allreduce", lambda: group.comm.Allreduce(x, out, op=_mpi().SUM))
        return out
    g = _gather(group, x)
    if op == "sum":
        acc = g[0]
        for p in range(1, group.size):    # rank order, documented above
            acc = (acc + g[p]).astype(x.dtype)
        return acc
    # the project's max/min (XLA's NaN and signed-zero rules), exact in any order
    from lax.reductions import reduce_max_p, reduce_min_p
    p = reduce_max_p if op == "max" else reduce_min_p
    return np.asarray(p.impl(g, axes=(0,)))


def _allreduce_transpose(cts, x, *, op, group):
    (ct,) = cts
    if type(ct) is Zero:
        return [None]
    # y_p = sum_q x_q on every process p: ct_x_q = sum_p ct_y_p
    return [allreduce(ct, "sum", group)]


def _leading_batch(p, lead):
    """Batching rule (a vmap outside the pmap): the primitive treats its first ``lead``
    dims specially; the batch axis goes right after them, and comes out where the
    output's shift puts it."""
    def rule(axis_data, vals, dims, **params):
        (x,), (d,) = vals, dims
        if d < lead:
            x, d = batching.moveaxis(x, d, lead), lead
        out = p.bind(x, **params)
        shift = {"allgather": 1, "reduce_scatter": -1}.get(p.name[4:], 0)
        return [out], [d + shift]
    return rule


allreduce_p = _MpiPrimitive("mpi_allreduce")
allreduce_p.def_abstract_eval(lambda x, *, op, group: x)
allreduce_p.def_impl(_allreduce_impl)
ad.deflinear(allreduce_p, _allreduce_transpose)   # the sum only: the rule checks op below
batching.primitive_batchers[allreduce_p] = _leading_batch(allreduce_p, 0)


def _allreduce_jvp(primals, tangents, *, op, group):
    (x,), (t,) = primals, tangents
    if op != "sum":
        raise NotImplementedError(f"pmax/pmin over a multi-process pmap axis are not "
                                  f"differentiable (as over a vmap axis); got op {op!r}")
    y = allreduce_p.bind(x, op=op, group=group)
    if type(t) is Zero:
        return [y], [Zero.from_primal_value(y)]
    return [y], [allreduce_p.bind(t, op=op, group=group)]


ad.primitive_jvps[allreduce_p] = _allreduce_jvp


def allreduce(x, op, group):
    """The elementwise ``op`` ("sum", "max", "min") of ``x`` over the processes of
    ``group``, the same on every process."""
    return allreduce_p.bind(x, op=op, group=group)


# ================================ allgather / reduce_scatter ==============================

def _allgather_impl(x, *, group):
    x = np.asarray(x)
    _check_header(group, "allgather", None, x)
    return _gather(group, x)


def _allgather_abstract_eval(x, *, group):
    return ShapedArray((group.size,) + x.shape, x.dtype, x.weak_type)


def _reduce_scatter_impl(x, *, group):
    x = np.asarray(x)
    _check_header(group, "reduce_scatter", None, x)
    if np.dtype(x.dtype) in _MPI_SUM_DTYPES and not _ordered_sum():
        x = _contig(x)
        out = _output(x.shape[1:], x.dtype)
        _wait(group, "reduce_scatter",
              lambda: group.comm.Reduce_scatter_block(x, out, op=_mpi().SUM))
        return out
    # rank-ordered: every process's row ``rank`` ...
    rows = alltoall_p.impl(x, group=group)
    acc = rows[0]
    for p in range(1, group.size):
        acc = (acc + rows[p]).astype(x.dtype)
    return acc


def _reduce_scatter_abstract_eval(x, *, group):
    if x.ndim < 1 or x.shape[0] != group.size:
        raise TypeError(f"mpi_reduce_scatter: the operand's leading dim must be the process "
                        f"count {group.size}, got {x.str_short()}")
    return ShapedArray(x.shape[1:], x.dtype, x.weak_type)


allgather_p = _MpiPrimitive("mpi_allgather")
allgather_p.def_abstract_eval(_allgather_abstract_eval)
allgather_p.def_impl(_allgather_impl)
batching.primitive_batchers[allgather_p] = _leading_batch(allgather_p, 0)

reduce_scatter_p = _MpiPrimitive("mpi_reduce_scatter")
reduce_scatter_p.def_abstract_eval(_reduce_scatter_abstract_eval)
reduce_scatter_p.def_impl(_reduce_scatter_impl)
batching.primitive_batchers[reduce_scatter_p] = _leading_batch(reduce_scatter_p, 1)


def _allgather_transpose(cts, x, *, group):
    (ct,) = cts
    # process q's x is row q of every process's output: ct_x_q = sum_p ct_p[q]
    return [None if type(ct) is Zero else reduce_scatter_p.bind(ct, group=group)]


def _reduce_scatter_transpose(cts, x, *, group):
    (ct,) = cts
    return [None if type(ct) is Zero else allgather_p.bind(ct, group=group)]


ad.deflinear(allgather_p, _allgather_transpose)
ad.deflinear(reduce_scatter_p, _reduce_scatter_transpose)


def allgather(x, group):
    """``[P, *x.shape]``: row p is process p's ``x``."""
    return allgather_p.bind(x, group=group)


def reduce_scatter(x, group):
    """``x`` is ``[P, ...]``; row ``rank`` of the sum of every process's ``x``."""
    return reduce_scatter_p.bind(x, group=group)


# ========================================= alltoall =======================================

def _alltoall_impl(x, *, group):
    x = np.asarray(x)
    _check_header(group, "alltoall", None, x)
    x, send = _buf(x)
    out = _output(x.shape, x.dtype)
    recv = out.view(np.uint8) if send.dtype != x.dtype else out
    _wait(group, "alltoall", lambda: group.comm.Alltoall(send, recv))
    return out


def _alltoall_abstract_eval(x, *, group):
    if x.ndim < 1 or x.shape[0] != group.size:
        raise TypeError(f"mpi_alltoall: the operand's leading dim must be the process count "
                        f"{group.size}, got {x.str_short()}")
    return x


alltoall_p = _MpiPrimitive("mpi_alltoall")
alltoall_p.def_abstract_eval(_alltoall_abstract_eval)
alltoall_p.def_impl(_alltoall_impl)
# out_p[q] = x_q[p]: its own transpose
ad.deflinear(alltoall_p, lambda cts, x, *, group: [
    None if type(cts[0]) is Zero else alltoall_p.bind(cts[0], group=group)])
batching.primitive_batchers[alltoall_p] = _leading_batch(alltoall_p, 1)


def alltoall(x, group):
    """``x`` is ``[P, ...]``; row q of the result is process q's row ``rank``."""
    return alltoall_p.bind(x, group=group)


# ========================================= ppermute =======================================

def _ppermute_impl(x, *, perm, group):
    """``x``: this process's members ``[L, ...]`` (global member ``rank * L + i`` is row
    i); ``perm``: (source, destination) pairs of global members. Shift k = 0 .. P-1: send
    to process rank + k the rows it receives from here, receive from process rank - k the
    rows it sends here (one MPI_Sendrecv per shift; both sides derive the counts from
    ``perm``, so no sizes travel)."""
    x = _contig(x)
    _check_header(group, "ppermute", perm, x)
    L, P, me = group.local_size, group.size, group.rank
    out = np.zeros_like(x)
    for k in range(P):
        dst, src = (me + k) % P, (me - k) % P
        send_rows = [(s % L, t % L) for s, t in perm if s // L == me and t // L == dst]
        recv_rows = [(s % L, t % L) for s, t in perm if s // L == src and t // L == me]
        if k == 0:
            for s, t in send_rows:
                out[t] = x[s]
            continue
        if not send_rows and not recv_rows:
            continue
        # A side with nothing to move talks to MPI_PROC_NULL: the peers' counts agree (both
        # derive them from perm), so no process waits for a message nobody sends.
        null = _mpi().PROC_NULL
        sendbuf = _contig(x[[s for s, _ in send_rows]])
        recvbuf = np.empty((len(recv_rows),) + x.shape[1:], x.dtype)
        _, sb = _buf(sendbuf)
        _, rb = _buf(recvbuf)
        _wait(group, "ppermute", lambda: group.comm.Sendrecv(
            sb, dest=dst if send_rows else null, sendtag=k, recvbuf=rb,
            source=src if recv_rows else null, recvtag=k))
        for i, (_, t) in enumerate(recv_rows):
            out[t] = recvbuf[i]
    return out


def _ppermute_abstract_eval(x, *, perm, group):
    if x.ndim < 1 or x.shape[0] != group.local_size:
        raise TypeError(f"mpi_ppermute: the operand's leading dim must be the local device "
                        f"count {group.local_size}, got {x.str_short()}")
    return x


ppermute_p = _MpiPrimitive("mpi_ppermute")
ppermute_p.def_abstract_eval(_ppermute_abstract_eval)
ppermute_p.def_impl(_ppermute_impl)
ad.deflinear(ppermute_p, lambda cts, x, *, perm, group: [
    None if type(cts[0]) is Zero else ppermute_p.bind(
        cts[0], perm=tuple((t, s) for s, t in perm), group=group)])
batching.primitive_batchers[ppermute_p] = _leading_batch(ppermute_p, 1)


def ppermute(x, perm, group):
    """This process's members ``[L, ...]`` permuted along the global members by
    ``perm`` ((source, destination) pairs); rows receiving nothing are zeros."""
    return ppermute_p.bind(x, perm=tuple(perm), group=group)


# =========================================== bcast ========================================

def _bcast_impl(x, *, root, group):
    x = np.asarray(x)
    _check_header(group, "bcast", root, x)
    out = np.array(x, copy=True, order="C") if group.rank == root else np.empty_like(x)
    _, b = _buf(out)
    _wait(group, "bcast", lambda: group.comm.Bcast(b, root=root))
    return out


def _bcast_transpose(cts, x, *, root, group):
    (ct,) = cts
    if type(ct) is Zero:
        return [None]
    # every process's output is the root's x: the root's x gets the sum of the
    # cotangents, the others' nothing
    total = allreduce(ct, "sum", group)
    if group.rank == root:
        return [total]
    from lax.shapes import full
    from tracer.core import get_aval
    aval = get_aval(total)
    return [full(aval.shape, 0, aval.dtype)]


bcast_p = _MpiPrimitive("mpi_bcast")
bcast_p.def_abstract_eval(lambda x, *, root, group: x)
bcast_p.def_impl(_bcast_impl)
ad.deflinear(bcast_p, _bcast_transpose)
batching.primitive_batchers[bcast_p] = _leading_batch(bcast_p, 0)


def bcast(x, root, group):
    """Process ``root``'s ``x`` on every process."""
    return bcast_p.bind(x, root=int(root), group=group)


PRIMITIVE_NAMES = frozenset(p.name for p in (allreduce_p, allgather_p, reduce_scatter_p,
                                             alltoall_p, ppermute_p, bcast_p))


# ========================= values replicated across the processes =========================
# A pmap/shard_map input that is not mapped over the processes (in_axes None, a spec
# without the mesh axis) and an output replicated across them (out_axes None, out_specs
# without it) are one global value, held by every process: the vmap over the stacked
# blocks of all processes, which the cross-process program must equal, has it once. Under
# grad, each process seeds (or receives) a cotangent for its own copy, so these two
# identities at the boundary make the copies count once: a replicated output's cotangent
# is shared among the P processes (each holds 1/P of it), and a replicated input's
# cotangent is the sum of every process's part (JAX's shard_map: an unmapped input's
# cotangent is psum-ed over the mesh axis). Neither communicates in the forward pass.

def _replicated_out_transpose(cts, x, *, group):
    (ct,) = cts
    if type(ct) is Zero:
        return [None]
    from lax.elementwise import div
    return [div(ct, group.size)]


def _replicated_in_transpose(cts, x, *, group):
    (ct,) = cts
    if type(ct) is Zero:
        return [None]
    return [allreduce(ct, "sum", group)]


def _identity_batcher(p):
    def rule(axis_data, vals, dims, **params):
        return [p.bind(vals[0], **params)], list(dims)
    return rule


replicated_out_p = Primitive("mpi_replicated_out")
replicated_in_p = Primitive("mpi_replicated_in")
for _p, _t in ((replicated_out_p, _replicated_out_transpose),
               (replicated_in_p, _replicated_in_transpose)):
    _p.def_abstract_eval(lambda x, *, group: x)
    _p.def_impl(lambda x, *, group: x)
    ad.deflinear(_p, _t)
    batching.primitive_batchers[_p] = _identity_batcher(_p)


def replicated_out(x, group):
    """``x`` (a pmap/shard_map output replicated across the processes of ``group``) as it
    is; under grad its cotangent is divided among the processes (see above)."""
    return replicated_out_p.bind(x, group=group)


def replicated_in(x, group):
    """``x`` (a pmap/shard_map input not mapped over the processes of ``group``) as it is;
    under grad its cotangent is summed over the processes (see above)."""
    return replicated_in_p.bind(x, group=group)
