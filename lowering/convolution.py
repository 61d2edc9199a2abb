"""Lowering of ``conv_general_dilated`` (lax/convolution.py): a library call running Numba
kernels (numba_backend/conv_kernels.py) and BLAS.

Every layout, padding (negative too), dilation and group count is one canonical problem:
the input is read through element strides (batch, spatial..., feature), the weights are
brought to (taps, I, O) by a transpose of the small kernel array, and the output is
produced channel-last and transposed to ``out_spec`` at the end (free for NHWC-style
outputs). Batch groups are feature groups whose group offset steps through the batch.

Three strategies, chosen by dtype and a rough count of memory traffic (``_strategy``):

- im2col + BLAS (floats and complex, the usual case): patch rows ``(taps x I)`` are built
  by a Numba kernel in chunks that stay in cache (copying contiguous channel runs; the
  input is first copied channel-last if its features are not contiguous) and each chunk
  is multiplied with the weights by ``np.matmul`` (OpenBLAS), one product per group;
- gather (floats, when outputs have fewer features than inputs or most taps fall
  between dilated inputs, as in the data gradient of a strided convolution):
  ``Z = X @ W`` multiplies every input row by every tap's weights on BLAS, then a Numba
  kernel sums, per output row, the Z entries of its valid taps -- no work for the
  zeros that lhs dilation inserts;
- a direct loop nest (integer operands, accumulated in 64 bits like the eager impl; and
  groups with a single output feature, e.g. depthwise, where a product per group would
  be a matrix-vector product; depthwise runs the groups innermost).

The compute dtype is the eager impl's: float16 computes in float32, integers in int64
(uint64), and ``preferred_element_type`` promotes; the result is cast once. Float results
differ from the eager impl (NumPy tensordot) by summation order only; integer results are
exact (wrapping, as in the eager impl).
"""
from __future__ import annotations

import threading

import numpy as np

from lax import convolution as cv
from tracer import dtypes
from lowering.rules import NotLowerable, lowering_rules

# Patch rows per BLAS call are chosen so that a chunk of patches stays near this size: a
# chunk is written by im2col and read by the product while it is still in cache.
_CHUNK_BYTES = 1 << 20
_MAX_SPATIAL = 3


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


def _compute_dtype(in_dt, out_dt):
    """The eager impl's compute dtype (lax/convolution.py: _conv_impl)."""
    ct = np.promote_types(in_dt, out_dt) if out_dt != in_dt else np.dtype(in_dt)
    if dtypes.is_integer(ct) or ct == np.bool_:
        ct = np.dtype(np.uint64) if dtypes.is_unsigned_integer(ct) else np.dtype(np.int64)
    if ct == np.float16:
        ct = np.dtype(np.float32)
    return np.dtype(ct)


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
    pad = _MAX_SPATIAL - len(in_sp)
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


def conv_call(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
              dimension_numbers, feature_group_count, batch_group_count, precision,
              preferred_element_type, out_shape):
    """``conv_general_dilated`` on NumPy arrays (the lowered form; same params as the
    primitive, plus the output shape)."""
    from numba_backend import conv_kernels as ck

    dn = dimension_numbers
    out_dt = lhs.dtype if preferred_element_type is None else np.dtype(preferred_element_type)
    ct = _compute_dtype(lhs.dtype, out_dt)
    nsp = lhs.ndim - 2
    x = lhs if lhs.dtype == ct else lhs.astype(ct)
    x = np.ascontiguousarray(x)
    w = rhs if rhs.dtype == ct else rhs.astype(ct)
    N, C = x.shape[dn.lhs_spec[0]], x.shape[dn.lhs_spec[1]]
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
    if M == 0 or O == 0 or K == 0 or C == 0:
        return [np.zeros(out_shape, out_dt)]
    strategy = _strategy(ct, I, Og, K, M, N * int(np.prod(in_sp, dtype=np.int64)))
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


def _conv_lower(ctx, in_avals, out_avals, lhs, rhs, **params):
    if in_avals[0].ndim - 2 > _MAX_SPATIAL:
        raise NotLowerable("conv_general_dilated: more than 3 spatial dims")
    ct = _compute_dtype(in_avals[0].dtype, out_avals[0].dtype)
    how = "direct loops" if ct.kind in "iub" else "im2col/gather + BLAS or direct loops"
    name = f"conv_general_dilated (Numba {how})"
    return ctx.library_call(name, conv_call, [lhs, rhs], out_avals,
                            out_shape=tuple(out_avals[0].shape), **params)


lowering_rules[cv.conv_general_dilated_p] = _conv_lower
