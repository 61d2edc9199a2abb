"""The implementations of the loop IR's library calls: ``library_impls[kind]``.

A ``LibraryCall`` step (``lowering.ir``) names a ``kind`` and its static ``params``; the
executor runs it as ``library_impls[kind](*arrays, **params) -> list of arrays`` (the
results are cast to the step's ``out_avals``), and the compiled loops of
``numba_backend.control_flow`` emit some kinds inline instead (``dot_general`` through
BLAS, ``reshape_view``, nested ``scan``/``while``/``cond``). The lowering rule of each
primitive (``lowering/<family>.py``) decides the kind and params; this module holds
what runs:

- ``reshape_view``: a row-major reshape of a materialized array (a view);
- ``dot_general``: BLAS through ``np.matmul`` on strided views (a plan per shapes);
- ``conv_general_dilated``: im2col + BLAS, a tap gather, or direct loops (the
  strategies of ``lowering/convolution.py``; kernels in ``conv_kernels``);
- ``sort``, ``top_k``: order keys and the kernels of ``sort_kernels``;
- ``scatter``: window starts in NumPy, the windows applied by ``indexing_kernels``;
- ``reduce_window``, ``select_and_scatter_add``, ``select_and_gather_add``,
  ``cumulative``: padding in NumPy around the kernels of ``window_kernels``;
- ``threefry2x32``, ``rng_bit_generator``: the hashes of ``random_kernels``;
- ``numba_call``: a user's Numba kernel (``lax.ffi``), called on the operands;
- ``scan``, ``while``, ``cond``: the control-flow runners (``numba_backend.control_flow``:
  a generated driver, or a Python loop around the bodies' Executables).

The kernel modules are imported when a call first runs (their import compiles nothing,
but jit programs without such calls never need them).
"""
from __future__ import annotations

import threading

import numpy as np

from lax import indexing as ix
from lax import linalg as la
from lax import random_bits as rb
from lax import shapes as lax_shapes
from lax import windowed as wn
from lax.sort import _sort_key_arrays
from lowering.convolution import MAX_SPATIAL, compute_dtype

library_impls: dict = {}      # kind -> fn(*arrays, **params) -> list of arrays
# kind -> fn(*arrays, **params) -> list of arrays that compiles nothing (NumPy only): what
# a compiled program runs while the kind's Numba kernels are still being primed elsewhere
numpy_fallbacks: dict = {}


def register(*kinds):
    """Decorator: ``fn`` implements the library calls of these kinds."""
    def deco(fn):
        for k in kinds:
            library_impls[k] = fn
        return fn
    return deco


def impl(kind: str):
    """The implementation of library calls of ``kind`` (KeyError naming the known kinds
    when the backend has none)."""
    fn = library_impls.get(kind)
    if fn is None:
        raise KeyError(f"numba_backend.library: no implementation of library calls of kind "
                       f"{kind!r}; known kinds: {sorted(library_impls)}")
    return fn


def numpy_fallback(kind: str):
    """A NumPy-only implementation of library calls of ``kind`` (same arguments and
    results as ``impl(kind)``), or None."""
    return numpy_fallbacks.get(kind)


def generated_source(step):
    """The source a library call generates of its own (a compiled control-flow driver,
    or why it runs as a Python loop), or None."""
    if step.kind in CONTROL_FLOW_KINDS:
        from numba_backend.control_flow import generated_source as cf_source
        return cf_source(dict(step.params)["spec"])
    return None


# ------------------------------------------ views -----------------------------------------

@register("reshape_view")
def reshape_view(x, *, shape):
    """``x.reshape(shape)``: a view of a C-contiguous array."""
    return [x.reshape(shape)]


# --------------------------------------- dot_general --------------------------------------

def make_dot_general(lhs_aval, rhs_aval, out_aval, dimension_numbers,
                     preferred_element_type=None):
    """A function ``(lhs, rhs) -> [out]`` computing dot_general for these avals: the NumPy
    impl's own function for them (``lax.linalg.dot_general_fn``), so both tiers give the
    same bits."""
    (lc, rc), (lb, rb) = dimension_numbers
    dn = ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb)))
    fn = la.dot_general_fn(tuple(lhs_aval.shape), tuple(rhs_aval.shape),
                           np.dtype(lhs_aval.dtype), np.dtype(rhs_aval.dtype),
                           np.dtype(out_aval.dtype), dn)
    return lambda lhs, rhs: [fn(lhs, rhs)]


_plans: dict = {}


@register("dot_general")
def dot_general_call(lhs, rhs, *, dimension_numbers, precision=None,
                     preferred_element_type=None):
    """dot_general on NumPy arrays (the primitive's params): plans are made once per
    shapes and dtypes."""
    key = (lhs.shape, rhs.shape, lhs.dtype, dimension_numbers, preferred_element_type)
    fn = _plans.get(key)
    if fn is None:
        fn = dot_general_plan(lhs.shape, rhs.shape, lhs.dtype, dimension_numbers,
                              preferred_element_type)
    return fn(lhs, rhs)


def dot_general_plan(lhs_shape, rhs_shape, dtype, dimension_numbers,
                     preferred_element_type=None):
    """``dot_general_call`` for these operand shapes and dtype, as a function
    ``(lhs, rhs) -> [out]`` (made once per shapes and dtype)."""
    key = (lhs_shape, rhs_shape, dtype, dimension_numbers, preferred_element_type)
    fn = _plans.get(key)
    if fn is None:
        from tracer.core import ShapedArray
        lhs_aval = ShapedArray(lhs_shape, dtype)
        rhs_aval = ShapedArray(rhs_shape, dtype)
        out = la._dot_general_abstract_eval(lhs_aval, rhs_aval,
                                            dimension_numbers=dimension_numbers,
                                            precision=None,
                                            preferred_element_type=preferred_element_type)
        fn = make_dot_general(lhs_aval, rhs_aval, out, dimension_numbers,
                              preferred_element_type)
        if len(_plans) > 4096:
            _plans.clear()
        _plans[key] = fn
    return fn


# --------------------------------------- convolution --------------------------------------

# Patch rows per BLAS call are chosen so that a chunk of patches stays near this size: a
# chunk is written by im2col and read by the product while it is still in cache.
_CHUNK_BYTES = 1 << 20


_SCRATCH_KEEP = 1 << 26


_local = threading.local()


def _scratch(n, dtype):
    """A reusable buffer of ``n`` elements (per thread): a fresh multi-megabyte buffer per
    call would page-fault on every first touch."""
    nbytes = n * np.dtype(dtype).itemsize
    if nbytes > _SCRATCH_KEEP:
        return np.empty(n, dtype)
    buf = getattr(_local, "buf", None)
    if buf is None or buf.nbytes < nbytes:
        buf = _local.buf = np.empty(max(nbytes, 1 << 16), np.uint8)
    return buf[:nbytes].view(dtype)


def readonly_flat(a):
    """A read-only 1-D view of C-contiguous ``a`` (copied if not contiguous): kernels get
    one array type whatever produced their input (one compiled specialisation)."""
    a = np.ascontiguousarray(a).reshape(-1)
    if a.flags.writeable:
        a = a.view()
        a.flags.writeable = False
    return a


def _elem_strides(a):
    return [s // a.itemsize for s in a.strides]


def _geometry(in_sp, out_sp, k_sp, strides, padding, lhs_dil, rhs_dil, sp_strides):
    """int64[24] of the kernels (see numba_backend/conv_kernels.py), padded to 3 dims."""
    pad = MAX_SPATIAL - len(in_sp)
    rows = [(1, 1, 1, 1, 0, 1, 1, 0)] * pad
    for d in range(len(in_sp)):
        rows.append((in_sp[d], out_sp[d], k_sp[d], strides[d], padding[d][0], lhs_dil[d],
                     rhs_dil[d], sp_strides[d]))
    return np.ascontiguousarray(np.asarray(rows, np.int64).reshape(-1))


def _strategy(ct, I, Og, K, M_out, M_in):
    """"direct", "im2col" or "gather" by a rough count of memory traffic and flops.

    im2col copies K * I entries per output row and multiplies them (K * I * Og flops);
    gather multiplies every input row by every tap's weights (Z = X @ W: I * K * Og flops
    and K * Og entries per input row) and sums K * Og entries per output row. Gather wins
    when outputs have fewer features than inputs or most taps fall between dilated inputs
    (the data gradient of strided convolutions)."""
    if ct.kind in "iub":
        return "direct"
    if Og == 1 and (I == 1 or I * K <= 64):
        return "direct"     # one output per group (depthwise): a GEMV per group otherwise
    im2col = M_out * K * I * (Og + 4)
    gather = M_in * K * Og * (I + 4) + 8 * M_out * K * Og   # a gather costs more than a copy
    return "gather" if gather < im2col else "im2col"


def conv_strategy(lhs_shape, lhs_dtype, rhs_shape, *, dimension_numbers, feature_group_count,
                  batch_group_count, preferred_element_type, out_shape, **_):
    """(compute dtype, strategy) of a convolution: the strategy of ``_strategy``, or None
    for an empty problem (no kernel runs). The two name the kernels it runs (one
    specialisation per strategy and dtype)."""
    dn = dimension_numbers
    out_dt = np.dtype(lhs_dtype) if preferred_element_type is None else \
        np.dtype(preferred_element_type)
    ct = compute_dtype(np.dtype(lhs_dtype), out_dt)
    N, C = lhs_shape[dn.lhs_spec[0]], lhs_shape[dn.lhs_spec[1]]
    O, I = rhs_shape[dn.rhs_spec[0]], rhs_shape[dn.rhs_spec[1]]
    in_sp = [lhs_shape[d] for d in dn.lhs_spec[2:]]
    k_sp = [rhs_shape[d] for d in dn.rhs_spec[2:]]
    out_sp = [out_shape[d] for d in dn.out_spec[2:]]
    B = batch_group_count
    groups = B if B > 1 else feature_group_count
    Og = O // groups
    K = int(np.prod(k_sp, dtype=np.int64))
    M = (N // B) * int(np.prod(out_sp, dtype=np.int64))
    if M == 0 or O == 0 or K == 0 or C == 0:
        return ct, None
    return ct, _strategy(ct, I, Og, K, M, N * int(np.prod(in_sp, dtype=np.int64)))


def prime_key(kind, params, in_avals):
    """What determines the Numba kernels a library call of ``kind`` compiles (calls with
    equal keys need one priming between them), or None (each call its own)."""
    if kind == "conv_general_dilated":
        (ls, ldt), (rs, _) = in_avals[:2]
        ct, strategy = conv_strategy(tuple(ls), ldt, tuple(rs), **params)
        return kind, str(ct), strategy
    return None


@register("conv_general_dilated")
def conv_call(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
              dimension_numbers, feature_group_count, batch_group_count, precision,
              preferred_element_type, out_shape):
    """``conv_general_dilated`` on NumPy arrays (the lowered form; same params as the
    primitive, plus the output shape)."""
    from numba_backend import conv_kernels as ck

    dn = dimension_numbers
    out_dt = lhs.dtype if preferred_element_type is None else np.dtype(preferred_element_type)
    ct, strategy = conv_strategy(lhs.shape, lhs.dtype, rhs.shape,
                                 dimension_numbers=dn, feature_group_count=feature_group_count,
                                 batch_group_count=batch_group_count,
                                 preferred_element_type=preferred_element_type,
                                 out_shape=out_shape)
    nsp = lhs.ndim - 2
    x = lhs if lhs.dtype == ct else lhs.astype(ct)
    x = np.ascontiguousarray(x)
    w = rhs if rhs.dtype == ct else rhs.astype(ct)
    N = x.shape[dn.lhs_spec[0]]
    O, I = w.shape[dn.rhs_spec[0]], w.shape[dn.rhs_spec[1]]
    in_sp = [x.shape[d] for d in dn.lhs_spec[2:]]
    k_sp = [w.shape[d] for d in dn.rhs_spec[2:]]
    out_sp = [out_shape[d] for d in dn.out_spec[2:]]
    B = batch_group_count
    groups = B if B > 1 else feature_group_count
    Nb = N // B
    Og = O // groups
    K = int(np.prod(k_sp, dtype=np.int64))
    M = Nb * int(np.prod(out_sp, dtype=np.int64))
    # canonical output: (Nb, *out_sp, O) -> out_spec order
    perm = [0] * lhs.ndim
    perm[dn.out_spec[0]] = 0
    perm[dn.out_spec[1]] = nsp + 1
    for d in range(nsp):
        perm[dn.out_spec[2 + d]] = 1 + d
    if strategy is None:
        return [np.zeros(out_shape, out_dt)]
    if strategy == "im2col" and I > 1 and x.strides[dn.lhs_spec[1]] != x.itemsize or \
            strategy == "gather":
        # channel-last copy (a no-op for channel-last inputs): patch rows copy runs of I
        # contiguous channels; the gather strategy multiplies input rows
        x = np.ascontiguousarray(np.transpose(x, (dn.lhs_spec[0],) + tuple(dn.lhs_spec[2:])
                                              + (dn.lhs_spec[1],)))
        st = _elem_strides(x)
        sN, sC, sp_st = st[0], st[-1], st[1:-1]
    else:
        st = _elem_strides(x)
        sN, sC = st[dn.lhs_spec[0]], st[dn.lhs_spec[1]]
        sp_st = [st[d] for d in dn.lhs_spec[2:]]
    gstride = Nb * sN if B > 1 else I * sC
    geo = _geometry(in_sp, out_sp, k_sp, window_strides, padding, lhs_dilation, rhs_dilation,
                    sp_st)
    # weights (taps, I, O)
    wc = np.ascontiguousarray(np.transpose(w, tuple(dn.rhs_spec[2:]) +
                                           (dn.rhs_spec[1], dn.rhs_spec[0]))).reshape(K, I, O)
    out = np.empty((M, O), ct)
    if strategy == "direct":
        ck.conv_direct(readonly_flat(x), geo, sN, sC, gstride, groups, I, Og, wc.reshape(-1),
                       out.reshape(-1))
    elif strategy == "gather":
        Mg = x.size // (groups * I)
        if B > 1:
            xg = x.reshape(groups, Mg, I)
        else:
            xg = x.reshape(Mg, groups, I).transpose(1, 0, 2)
        # (G, I, K * Og): tap-major columns per group
        wz = np.ascontiguousarray(wc.reshape(K, I, groups, Og).transpose(2, 1, 0, 3)
                                  ).reshape(groups, I, K * Og)
        Z = np.matmul(xg, wz)
        ck.tap_gather(readonly_flat(Z), geo, groups, Og, Mg, K, out.reshape(-1))
    else:
        flat = readonly_flat(x)
        KI = K * I
        wg = np.ascontiguousarray(wc.reshape(KI, groups, Og).transpose(1, 0, 2))
        # each chunk's product re-reads the weights: chunks stay well above their size
        chunk = max(_CHUNK_BYTES, 4 * wg.nbytes)
        rows = max(1, min(M, chunk // max(1, groups * KI * ct.itemsize)))
        buf = _scratch(groups * rows * KI, ct)
        for r0 in range(0, M, rows):
            r1 = min(M, r0 + rows)
            m = r1 - r0
            ck.im2col(flat, geo, sN, sC, gstride, groups, I, r0, r1, buf)
            Pm = buf[:groups * m * KI].reshape(groups, m, KI)
            if groups == 1:
                np.matmul(Pm[0], wg[0], out=out[r0:r1])
            else:
                res = np.matmul(Pm, wg)                       # (G, m, Og)
                out[r0:r1].reshape(m, groups, Og)[...] = res.transpose(1, 0, 2)
    res = out.reshape((Nb,) + tuple(out_sp) + (O,))
    res = np.transpose(res, perm)
    return [res.astype(out_dt, copy=False)]


def conv_numpy(lhs, rhs, *, out_shape, **params):
    """``conv_general_dilated`` through the primitive's NumPy impl (per-tap BLAS
    products, or one im2col product for few input channels, ``lax.convolution``): no
    kernel to compile, 2-5x slower than ``conv_call``."""
    from lax.convolution import _conv_impl
    return [_conv_impl(lhs, rhs, **params)]


numpy_fallbacks["conv_general_dilated"] = conv_numpy


# ------------------------------------------ sort ------------------------------------------

_SIGN = np.uint64(1 << 63)


# top_k keeps a sorted buffer of k candidates per row (cheap for small k); beyond this it
# sorts the whole row
_TOPK_BUFFER = 32


def order_keys(x, total=False):
    """uint64 arrays (one, or two for complex) whose unsigned order is x's sort order
    (``total``: IEEE totalOrder, top_k's). Keys of narrow types stay below 2**bits (signed
    ones are offset by 2**(bits - 1)), so a radix sort skips the high digits."""
    if x.dtype.kind == "c":
        return order_keys(np.real(x), total) + order_keys(np.imag(x), total)
    if x.dtype.kind == "f":
        from numba_backend.sort_kernels import float_keys
        nbits = 8 * x.dtype.itemsize
        mant = np.finfo(x.dtype).nmant
        expm = ((1 << (nbits - 1)) - 1) >> mant << mant
        qnan = expm | (1 << (mant - 1))
        bits = np.ascontiguousarray(x).view(f"u{x.dtype.itemsize}").reshape(-1)
        out = np.empty(bits.shape, np.uint64)
        float_keys(bits, nbits, np.uint64(expm), np.uint64(qnan), not total, out)
        return [out.reshape(x.shape)]
    out = []
    for c in _sort_key_arrays(x):
        if c.dtype.kind == "i":
            if c.dtype.itemsize == 8:
                out.append(c.view(np.uint64) ^ _SIGN)
            else:
                bits = 8 * c.dtype.itemsize
                out.append((c.astype(np.int64) + (1 << (bits - 1))).view(np.uint64))
        else:
            out.append(c.astype(np.uint64))
    return out


@register("sort")
def sort_call(*ops, dimension, is_stable, num_keys):
    """sort on NumPy arrays: every operand ordered by the stable lexicographic
    permutation of the first ``num_keys`` along ``dimension``."""
    from numba_backend.sort_kernels import sort_perm

    x0 = ops[0]
    if x0.ndim == 0 or x0.size == 0:
        return [np.array(o, copy=True) for o in ops]
    cols = []
    for k in ops[:num_keys]:
        cols.extend(order_keys(np.moveaxis(k, dimension, -1)))
    moved_shape = cols[0].shape
    n = moved_shape[-1]
    if len(cols) == 1:
        keys = np.ascontiguousarray(cols[0]).reshape(1, -1, n)
    else:
        keys = np.stack([c.reshape(-1, n) for c in cols])
    perm = np.empty(keys.shape[1:], np.int64)
    sort_perm(keys, perm)
    perm = np.moveaxis(perm.reshape(moved_shape), -1, dimension)
    return [np.take_along_axis(o, perm, axis=dimension) for o in ops]


@register("top_k")
def top_k_call(x, *, k, axis=None, largest=True):
    """top_k on a NumPy array: values and int32 indices of the k largest (``largest``
    False: smallest) entries along ``axis`` (default the last), descending (ascending),
    ties to the lower index."""
    from numba_backend.sort_kernels import sort_perm, top_k_rows

    axis = x.ndim - 1 if axis is None else axis
    x = np.moveaxis(x, axis, -1)
    shape = x.shape[:-1] + (k,)
    if k == 0 or x.size == 0:
        return [np.moveaxis(np.empty(shape, x.dtype), -1, axis),
                np.moveaxis(np.empty(shape, np.int32), -1, axis)]
    (key,) = order_keys(x, total=True)
    n = x.shape[-1]
    rows = np.ascontiguousarray(key.reshape(-1, n))
    if not largest:
        # the k largest reversed keys are the k smallest keys; equal keys keep index order
        rows = ~rows
    if k <= _TOPK_BUFFER:
        idx = np.empty((rows.shape[0], k), np.int64)
        top_k_rows(rows, k, idx)
    else:
        # descending with ties in index order: a stable ascending sort of reversed keys
        perm = np.empty(rows.shape, np.int64)
        sort_perm((~rows)[None], perm)
        idx = np.ascontiguousarray(perm[:, :k])
    idx = idx.reshape(shape)
    vals = np.take_along_axis(x, idx, axis=-1)
    return [np.moveaxis(vals, -1, axis), np.moveaxis(idx.astype(np.int32), -1, axis)]


# ----------------------------------------- scatter ----------------------------------------

def _scatter_windows(operand_shape, indices, updates, dn, mode):
    """Per update window (row-major over the scatter dims): its operand start (clamped in
    CLIP mode), whether it is applied, and its elements as rows [W, window size]."""
    rank = len(operand_shape)
    batch_shape = indices.shape[:-1]
    wd = ix._scatter_window_dims(rank, dn)
    uwd = dn.update_window_dims
    win = np.ones(rank, np.int64)
    for d, k in zip(wd, uwd):
        win[d] = updates.shape[k]
    starts = ix._full_starts(indices, rank, dn.scatter_dims_to_operand_dims,
                             dn.operand_batching_dims, dn.scatter_indices_batching_dims)
    upper = np.asarray(operand_shape, np.int64) - win
    if mode == ix.CLIP:
        keep = np.broadcast_to(np.all(upper >= 0), batch_shape)
        starts = np.clip(starts, 0, np.maximum(upper, 0))
    else:
        keep = np.all((starts >= 0) & (starts <= upper), axis=-1)
    usd = [d for d in range(updates.ndim) if d not in uwd]
    n_w = int(np.prod(batch_shape, dtype=np.int64))
    rows = np.ascontiguousarray(np.transpose(updates, usd + list(uwd))).reshape(n_w, -1)
    return (np.ascontiguousarray(starts.reshape(n_w, rank)),
            np.ascontiguousarray(keep.reshape(n_w)), rows, win)


@register("scatter")
def scatter_call(operand, indices, updates, *, op, dimension_numbers, mode, **_):
    """The scatter family on NumPy arrays (``op``: 0 replace, 1 add, 2 sub, 3 mul, 4 min,
    5 max): the operand copied, then each kept update window applied in order."""
    out = np.array(operand, copy=True, order="C")
    if out.size == 0 or updates.size == 0:
        return [out]
    starts, keep, rows, win = _scatter_windows(operand.shape, indices, updates,
                                               dimension_numbers, mode)
    strides = np.asarray([s // out.itemsize for s in out.strides], np.int64) if out.ndim \
        else np.zeros(0, np.int64)
    from numba_backend.indexing_kernels import scatter_windows
    scatter_windows(out.reshape(-1), strides, starts, keep, rows, win, op)
    return [out]


# ---------------------------------------- windowed ----------------------------------------

_F16 = np.dtype(np.float16)


_BOOL = np.dtype(np.bool_)


def _canonical(shape, params):
    """Window params as tuples; a rank-0 operand becomes a one-element rank-1 problem."""
    wd, ws, pad = params["window_dimensions"], params["window_strides"], params["padding"]
    bd, wdl = params["base_dilation"], params["window_dilation"]
    if len(shape) == 0:
        return (1,), (1,), (1,), ((0, 0),), (1,), (1,)
    return tuple(shape), tuple(wd), tuple(ws), tuple(pad), tuple(bd), tuple(wdl)


def _pad_config(pad, bd):
    if all(lo == 0 and hi == 0 for lo, hi in pad) and all(b == 1 for b in bd):
        return None
    return tuple((lo, hi, b - 1) for (lo, hi), b in zip(pad, bd))


def _padded(x, cfg, value):
    if cfg is None:
        return x
    return lax_shapes._pad_impl(x, np.asarray(value, x.dtype), padding_config=cfg)


def _walk(xp_shape, out, wd, ws, wdl):
    """Kernel geometry over a C-ordered base of shape ``xp_shape``: outer_shape,
    outer_step, off, L, istep (see numba_backend/window_kernels.py)."""
    nd = len(xp_shape)
    es = [1] * nd
    for d in range(nd - 2, -1, -1):
        es[d] = es[d + 1] * xp_shape[d + 1]
    outer_shape = np.asarray(out[:-1], np.int64)
    outer_step = np.asarray([ws[d] * es[d] for d in range(nd - 1)], np.int64)
    grids = np.indices(wd).reshape(nd, -1)
    off = np.zeros(grids.shape[1], np.int64)
    for d in range(nd):
        off += grids[d] * (wdl[d] * es[d])
    return outer_shape, outer_step, off, int(out[-1]), int(ws[-1] * es[-1])


def _unpad(rp, shape, pad, bd):
    """The operand positions of an array laid out like the padded/dilated operand
    (positions cropped by negative padding are zero)."""
    out = np.zeros(shape, rp.dtype)
    src, dst = [], []
    for n, (lo, _), b, P in zip(shape, pad, bd, rp.shape):
        qmin = max(0, -(lo // b))
        qmax = min(n, (P - 1 - lo) // b + 1)
        if qmax <= qmin:
            return out
        src.append(slice(lo + qmin * b, lo + (qmax - 1) * b + 1, b))
        dst.append(slice(qmin, qmax))
    out[tuple(dst)] = rp[tuple(src)]
    return out


_RW_IDENT = {0: wn._sum_identity, 1: wn._max_identity, 2: wn._min_identity}


@register("reduce_window")
def reduce_window_call(x, *, op, out_shape, **params):
    """reduce_window_{sum,max,min} (op 0, 1, 2) on a NumPy array."""
    from numba_backend import window_kernels as wk

    dt = x.dtype
    identity = _RW_IDENT[op](dt)
    if int(np.prod(out_shape, dtype=np.int64)) == 0:
        return [np.empty(out_shape, dt)]
    shape, wd, ws, pad, bd, wdl = _canonical(x.shape, params)
    if any(w == 0 for w in wd):
        return [np.full(out_shape, identity, dt)]
    xc = x.reshape(shape)
    if dt == _BOOL:            # sum of bools is "any", like max
        xc, op = xc.view(np.uint8), 1 if op == 0 else op
    elif dt == _F16:
        xc = xc.astype(np.float32)
    xp = _padded(xc, _pad_config(pad, bd), identity)
    out = wn._out_shape(shape, wd, ws, pad, bd, wdl)
    geo = _walk(xp.shape, out, wd, ws, wdl)
    res = np.empty(int(np.prod(out)), xp.dtype)
    if op == 0:
        wk.window_sum(readonly_flat(xp), *geo, res)
    else:
        wk.window_minmax(readonly_flat(xp), *geo, op == 1, res)
    if dt == _BOOL:
        res = res.view(_BOOL)
    return [res.reshape(out_shape).astype(dt, copy=False)]


def _select_base(operand, select_ge, params):
    """Padded operand carrier, kernel geometry and the canonical window params."""
    shape, wd, ws, pad, bd, wdl = _canonical(operand.shape, params)
    x = operand.reshape(shape)
    init = wn._max_identity(x.dtype) if select_ge else wn._min_identity(x.dtype)
    if x.dtype == _BOOL:
        x, init = x.view(np.uint8), int(init)
    elif x.dtype == _F16:
        x = x.astype(np.float32)
    cfg = _pad_config(pad, bd)
    xp = _padded(x, cfg, init)
    out = wn._out_shape(shape, wd, ws, pad, bd, wdl)
    return xp, cfg, _walk(xp.shape, out, wd, ws, wdl), (shape, wd, pad, bd, out)


@register("select_and_scatter_add")
def select_and_scatter_call(source, operand, *, select_ge, **params):
    """select_and_scatter_add on NumPy arrays (see the module docstring)."""
    from numba_backend import window_kernels as wk

    dt = source.dtype
    shape = operand.shape
    if operand.size == 0 or source.size == 0 or any(w == 0 for w in
                                                     params["window_dimensions"]):
        return [np.zeros(shape, dt)]
    xp, cfg, geo, (cshape, wd, pad, bd, out) = _select_base(operand, select_ge, params)
    src = source.astype(np.float32) if dt == _F16 else source
    dst = np.zeros(xp.size, src.dtype)
    kernel = wk.select_scatter_f16 if dt == _F16 else wk.select_scatter
    kernel(readonly_flat(xp), *geo, select_ge, readonly_flat(src), dst)
    rp = dst.reshape(xp.shape)
    res = rp if cfg is None else _unpad(rp, cshape, pad, bd)
    return [res.reshape(shape).astype(dt, copy=False)]


def _carrier(a):
    """Gathers copy values: float16 and bool travel as their bits."""
    if a.dtype == _F16:
        return a.view(np.uint16)
    if a.dtype == _BOOL:
        return a.view(np.uint8)
    return a


@register("select_and_gather_add")
def select_and_gather_call(tangent, operand, *, select_ge, out_shape, **params):
    """select_and_gather_add on NumPy arrays (see the module docstring)."""
    from numba_backend.window_kernels import select_gather

    dt = tangent.dtype
    n_out = int(np.prod(out_shape, dtype=np.int64))
    if n_out == 0 or any(w == 0 for w in params["window_dimensions"]):
        return [np.zeros(out_shape, dt)]
    xp, cfg, geo, (cshape, *_rest) = _select_base(operand, select_ge, params)
    t = _carrier(tangent).reshape(cshape)
    tp = t if cfg is None else _padded(t, cfg, 0)
    res = np.empty(n_out, t.dtype)
    select_gather(readonly_flat(xp), *geo, select_ge, readonly_flat(tp), res)
    return [res.view(dt).reshape(out_shape)]


@register("cumulative")
def cumulative_call(x, *, op, axis, reverse):
    """cumsum/cumprod/cummax/cummin/cumlogsumexp (op 0..4) on a NumPy array."""
    from numba_backend import window_kernels as wk

    dt = x.dtype
    if x.ndim == 0 or x.size == 0:
        return [np.array(x, copy=True)]
    A = int(np.prod(x.shape[:axis], dtype=np.int64))
    n = x.shape[axis]
    B = int(np.prod(x.shape[axis + 1:], dtype=np.int64))
    if dt == _BOOL:            # add is "or" (max), mul is "and" (min) on bools
        xc = x.view(np.uint8)
        op = {0: 2, 1: 3}.get(op, op)
    elif dt == _F16:
        xc = x.astype(np.float32)
    else:
        xc = x
    out = np.empty(x.size, xc.dtype)
    flat = readonly_flat(xc)
    if dt == _F16:
        wk.scan_f16(flat, A, n, B, op, reverse, out)
    elif op == 4:
        (wk.scan_logaddexp32 if dt == np.float32 else wk.scan_logaddexp64)(
            flat, A, n, B, reverse, out)
    elif op <= 1:
        wk.scan_arith(flat, A, n, B, op == 1, reverse, out)
    else:
        wk.scan_minmax(flat, A, n, B, op == 2, reverse, out)
    if dt == _BOOL:
        out = out.view(_BOOL)
    elif op in (0, 4) and dt.kind in "fc":
        out += 0       # the scan starts from XLA's +0.0 / -inf: a leading -0.0 is +0.0
    return [out.reshape(x.shape).astype(dt, copy=False)]


# --------------------------------------- random bits --------------------------------------

@register("threefry2x32")
def threefry_call(k1, k2, x1, x2, *, out_shape):
    """threefry2x32 on NumPy uint32 arrays (rank-0 operands broadcast)."""
    from numba_backend.random_kernels import threefry2x32

    n = int(np.prod(out_shape, dtype=np.int64))
    ops = [np.asarray(a, np.uint32) for a in (k1, k2, x1, x2)]
    steps = np.asarray([0 if a.size == 1 else 1 for a in ops], np.int64)
    y0 = np.empty(n, np.uint32)
    y1 = np.empty(n, np.uint32)
    if n:
        threefry2x32(*(readonly_flat(a) for a in ops), steps, y0, y1)
    return [y0.reshape(out_shape), y1.reshape(out_shape)]


def _philox_numba(k0, k1, c0, c1, c2, c3):
    from numba_backend.random_kernels import philox4x32

    outs = [np.empty(np.shape(c0), np.uint32) for _ in range(4)]
    if outs[0].size:
        philox4x32(np.uint32(k0), np.uint32(k1),
                   *(readonly_flat(np.asarray(c, np.uint32)) for c in (c0, c1, c2, c3)),
                   *(o.reshape(-1) for o in outs))
    return outs


def _threefry_numba(k0, k1, x0, x1):
    return threefry_call(k0, k1, x0, x1, out_shape=np.shape(x0))


@register("rng_bit_generator")
def rng_bit_generator_call(key, *, shape, dtype, algorithm):
    """rng_bit_generator on a NumPy state (leading dims batch): the reference stream of
    lax/random_bits.py with the hashes compiled."""
    return rb.rng_bit_generator_reference(key, shape=shape, dtype=dtype, algorithm=algorithm,
                                          threefry=_threefry_numba, philox=_philox_numba)


# -------------------------------------- control flow --------------------------------------

CONTROL_FLOW_KINDS = ("scan", "while", "cond")


@register(*CONTROL_FLOW_KINDS)
def control_flow_call(*arrays, spec):
    """scan/while/cond (``spec``: a ``lowering.ir.ControlFlowSpec``) through its runner."""
    global _runner_for
    if _runner_for is None:     # (imported on first use: an import statement per call
        from numba_backend.control_flow import runner_for as _runner_for   # costs more)
    return _runner_for(spec)(arrays)


_runner_for = None


# --------------------------------------- user kernels -------------------------------------

@register("numba_call")
def numba_call_call(*arrays, kernel, result_avals, statics):
    """A user's Numba kernel (``lax.ffi.numba_call``) on the operands: its dispatcher
    called from here, outputs allocated here. Inside a compiled loop the driver calls the
    kernel itself (numba_backend.control_flow)."""
    from lax.ffi import run_kernel
    return run_kernel(kernel, arrays, result_avals, statics)
