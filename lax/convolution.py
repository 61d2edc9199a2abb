"""Convolution (XLA Operation semantics, 'Conv (Convolution)' / 'ConvGeneralDilated') and
the jax.lax helpers around it: conv, conv_with_general_padding, conv_transpose,
conv_general_dilated_patches, conv_dimension_numbers, padtype_to_pads, shape tuples.

``conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
dimension_numbers, feature_group_count, batch_group_count, precision,
preferred_element_type)``: lhs is (batch, features, spatial...) and rhs (out features,
in features, spatial...) in the layouts given by ``dimension_numbers`` (a
ConvDimensionNumbers of dimension indices, or strings such as ("NHWC", "HWIO", "NHWC")).
Like XLA's convolution it is a cross-correlation (the kernel is not flipped).

The NumPy impl gathers sliding windows (im2col as strided views) and contracts them with
one tensordot per feature group (BLAS).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from tracer import dtypes
from tracer.core import Primitive, ShapedArray, get_aval
from tracer.interpreters import ad, batching
from tracer.interpreters.ad import Zero
from lax import shapes
from lax.utils import _num, check_dtype, promote_weak_scalars


class ConvDimensionNumbers(NamedTuple):
    """Dimension indices: lhs_spec = (batch, feature, spatial...), rhs_spec = (out feature,
    in feature, spatial...), out_spec = (batch, feature, spatial...)."""
    lhs_spec: tuple
    rhs_spec: tuple
    out_spec: tuple


ConvGeneralDilatedDimensionNumbers = ConvDimensionNumbers


def conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers) -> ConvDimensionNumbers:
    """Canonical ConvDimensionNumbers from None (NCHW/OIHW/NCHW), a ConvDimensionNumbers,
    or a triple of layout strings like ("NHWC", "HWIO", "NHWC")."""
    nd = len(lhs_shape)
    if len(rhs_shape) != nd:
        raise ValueError(f"conv: lhs and rhs must have the same rank, got shapes {lhs_shape} "
                        f"and {rhs_shape}")
    if dimension_numbers is None:
        iota = tuple(range(nd))
        return ConvDimensionNumbers(iota, iota, iota)
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return ConvDimensionNumbers(*(tuple(int(i) for i in s) for s in dimension_numbers))
    if len(dimension_numbers) != 3:
        raise ValueError(f"conv: dimension_numbers must be a triple, got {dimension_numbers!r}")
    lhs, rhs, out = dimension_numbers
    if all(isinstance(s, str) for s in (lhs, rhs, out)):
        for s in (lhs, rhs, out):
            if len(s) != nd:
                raise ValueError(f"conv: layout {s!r} must have {nd} letters for rank-{nd} "
                                "operands")
        spatial = [c for c in rhs if c not in "OI"]
        lhs_perm = (lhs.index("N"), lhs.index("C")) + tuple(
            sorted((lhs.index(c) for c in lhs if c not in "NC"),
                   key=lambda i: spatial.index(lhs[i])))
        rhs_perm = (rhs.index("O"), rhs.index("I")) + tuple(
            sorted((rhs.index(c) for c in rhs if c not in "OI"),
                   key=lambda i: spatial.index(rhs[i])))
        out_perm = (out.index("N"), out.index("C")) + tuple(
            sorted((out.index(c) for c in out if c not in "NC"),
                   key=lambda i: spatial.index(out[i])))
        return ConvDimensionNumbers(lhs_perm, rhs_perm, out_perm)
    return ConvDimensionNumbers(*(tuple(int(i) for i in s) for s in dimension_numbers))


def _dilate_shape(shape, dilation):
    return tuple(0 if s == 0 else 1 + d * (s - 1) for s, d in zip(shape, dilation))


def padtype_to_pads(in_shape, window_shape, window_strides, padding):
    """(low, high) pads for "SAME", "SAME_LOWER" or "VALID" padding (XLA's definitions)."""
    if isinstance(padding, str):
        p = padding.upper()
        if p == "VALID":
            return [(0, 0)] * len(in_shape)
        if p in ("SAME", "SAME_LOWER"):
            out = [-(-n // s) for n, s in zip(in_shape, window_strides)]
            total = [max(0, (o - 1) * s + w - n) for o, s, w, n in
                     zip(out, window_strides, window_shape, in_shape)]
            if p == "SAME":
                return [(t // 2, t - t // 2) for t in total]
            return [(t - t // 2, t // 2) for t in total]
        raise ValueError(f"conv: unknown padding {padding!r}; use 'SAME', 'SAME_LOWER', "
                         "'VALID' or a sequence of (low, high) pairs")
    return [(int(lo), int(hi)) for lo, hi in padding]


def _sdims(spec):
    return spec[2:]


def conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=None,
                         rhs_dilation=None, dimension_numbers=None, feature_group_count=1,
                         batch_group_count=1, precision=None, preferred_element_type=None):
    """General dilated convolution (XLA 'ConvGeneralDilated'; jax.lax.conv_general_dilated).

    Output spatial size per dimension: floor((padded dilated input - dilated window) /
    stride) + 1. ``padding``: (low, high) pairs (negative allowed) or "SAME",
    "SAME_LOWER", "VALID". ``feature_group_count`` G: lhs features = G * rhs in features,
    rhs out features divisible by G. ``batch_group_count`` B: lhs batch divisible by B,
    rhs out features divisible by B. Raises TypeError naming the shapes on mismatch.
    """
    lhs, rhs = promote_weak_scalars("conv_general_dilated", lhs, rhs)
    la, ra = get_aval(lhs), get_aval(rhs)
    dn = conv_dimension_numbers(la.shape, ra.shape, dimension_numbers)
    nsp = la.ndim - 2
    window_strides = tuple(int(s) for s in window_strides) if window_strides is not None \
        else (1,) * nsp
    lhs_dilation = tuple(int(s) for s in lhs_dilation) if lhs_dilation is not None else (1,) * nsp
    rhs_dilation = tuple(int(s) for s in rhs_dilation) if rhs_dilation is not None else (1,) * nsp
    if isinstance(padding, str):
        in_sp = _dilate_shape(tuple(la.shape[i] for i in _sdims(dn.lhs_spec)), lhs_dilation)
        win_sp = _dilate_shape(tuple(ra.shape[i] for i in _sdims(dn.rhs_spec)), rhs_dilation)
        padding = padtype_to_pads(in_sp, win_sp, window_strides, padding)
    padding = tuple((int(lo), int(hi)) for lo, hi in padding)
    pet = None if preferred_element_type is None else \
        dtypes.canonicalize_dtype(preferred_element_type)
    return conv_general_dilated_p.bind(
        lhs, rhs, window_strides=window_strides, padding=padding, lhs_dilation=lhs_dilation,
        rhs_dilation=rhs_dilation, dimension_numbers=dn,
        feature_group_count=int(feature_group_count), batch_group_count=int(batch_group_count),
        precision=None if precision is None else str(precision), preferred_element_type=pet)


def _conv_out_shape(lhs_shape, rhs_shape, window_strides, padding, lhs_dilation,
                    rhs_dilation, dn, batch_group_count):
    lhs_sp = tuple(lhs_shape[i] for i in _sdims(dn.lhs_spec))
    rhs_sp = tuple(rhs_shape[i] for i in _sdims(dn.rhs_spec))
    in_d = _dilate_shape(lhs_sp, lhs_dilation)
    win_d = _dilate_shape(rhs_sp, rhs_dilation)
    out_sp = []
    for n, (lo, hi), w, s in zip(in_d, padding, win_d, window_strides):
        size = n + lo + hi - w
        out_sp.append(0 if size < 0 else size // s + 1)
    out = [0] * len(lhs_shape)
    out[dn.out_spec[0]] = lhs_shape[dn.lhs_spec[0]] // batch_group_count
    out[dn.out_spec[1]] = rhs_shape[dn.rhs_spec[0]]
    for i, o in zip(_sdims(dn.out_spec), out_sp):
        out[i] = o
    return tuple(out)


def _conv_abstract_eval(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                        dimension_numbers, feature_group_count, batch_group_count, precision,
                        preferred_element_type):
    name = "conv_general_dilated"
    dn = dimension_numbers
    check_dtype(name, lhs, _num, "lhs")
    if lhs.dtype != rhs.dtype:
        raise TypeError(f"{name}: lhs and rhs must have the same dtype, got {lhs.str_short()} "
                        f"and {rhs.str_short()}")
    nd = lhs.ndim
    if rhs.ndim != nd or nd < 2:
        raise ValueError(f"{name}: lhs {lhs.str_short()} and rhs {rhs.str_short()} must have "
                        "the same rank >= 2")
    for spec, what in ((dn.lhs_spec, "lhs_spec"), (dn.rhs_spec, "rhs_spec"),
                       (dn.out_spec, "out_spec")):
        if sorted(spec) != list(range(nd)):
            raise ValueError(f"{name}: dimension_numbers.{what} {spec} is not a permutation of "
                            f"the {nd} dimensions")
    nsp = nd - 2
    for v, what in ((window_strides, "window_strides"), (lhs_dilation, "lhs_dilation"),
                    (rhs_dilation, "rhs_dilation"), (padding, "padding")):
        if len(v) != nsp:
            raise ValueError(f"{name}: {what} {v} needs {nsp} entries (one per spatial dim)")
    if any(s < 1 for s in window_strides + lhs_dilation + rhs_dilation):
        raise ValueError(f"{name}: strides and dilations must be >= 1")
    G, B = feature_group_count, batch_group_count
    if G < 1 or B < 1 or (G > 1 and B > 1):
        raise ValueError(f"{name}: feature_group_count ({G}) and batch_group_count ({B}) must "
                        "be >= 1 and at most one of them > 1")
    c_in = lhs.shape[dn.lhs_spec[1]]
    i_rhs = rhs.shape[dn.rhs_spec[1]]
    o_rhs = rhs.shape[dn.rhs_spec[0]]
    if c_in != G * i_rhs:
        raise ValueError(f"{name}: lhs feature dimension ({c_in}) must equal "
                        f"feature_group_count ({G}) * rhs input feature dimension ({i_rhs}); "
                        f"lhs {lhs.str_short()}, rhs {rhs.str_short()}")
    if o_rhs % G or o_rhs % B:
        raise ValueError(f"{name}: rhs output feature dimension ({o_rhs}) must be divisible by "
                        f"feature_group_count ({G}) and batch_group_count ({B})")
    if lhs.shape[dn.lhs_spec[0]] % B:
        raise ValueError(f"{name}: lhs batch dimension ({lhs.shape[dn.lhs_spec[0]]}) must be "
                        f"divisible by batch_group_count ({B})")
    shape = _conv_out_shape(lhs.shape, rhs.shape, window_strides, padding, lhs_dilation,
                            rhs_dilation, dn, B)
    dt = lhs.dtype if preferred_element_type is None else preferred_element_type
    return ShapedArray(shape, dt, lhs.weak_type and rhs.weak_type)


def _pad_dilate_np(x, padding, dilation, value=0, trailing=0):
    """Interior-dilate then (possibly negatively) pad x's spatial dims: its last ones, or
    those before its last ``trailing`` dims."""
    from lax.shapes import _pad_impl
    k = len(padding)
    cfg = ((0, 0, 0),) * (x.ndim - k - trailing) + tuple(
        (lo, hi, d - 1) for (lo, hi), d in zip(padding, dilation)) + ((0, 0, 0),) * trailing
    return _pad_impl(x, np.asarray(value, x.dtype), padding_config=cfg)


# Kernels with at most this many taps, over outputs of some size, are computed tap by tap
# (below); larger kernels (the weight gradient's, whose "kernel" is the image) and small
# problems (where a tap's overhead outweighs its copy) contract a window view at once.
_OFFSET_LOOP_MAX_TAPS = 64
_TAPS_MIN_SIZE = 16384          # N * prod(out) * I, one tap's column buffer


def _tap_view(tap, rhs_dil, out_sp, strides):
    """The index of kernel tap ``tap``'s input elements, one per output position, in a
    channels-last padded operand (N, *S, C)."""
    return (slice(None),) + tuple(slice(k * d, k * d + (o - 1) * s + 1, s)
                                  for k, d, o, s in zip(tap, rhs_dil, out_sp, strides))


def _conv_by_taps(x, rhs, strides, rhs_dil, out_sp, G):
    """x (N, C, *S) padded, rhs (O, I, *K) -> (N, O, *out), one matrix product per tap
    and feature group, summed: each tap's shifted view is copied channels-last into a
    contiguous (N * out, I) buffer. (np.tensordot of the whole window view copies it one
    element at a time, in the order of its strides: 2-3x slower for a 3x3 kernel.)"""
    N = x.shape[0]
    O, I = rhs.shape[:2]
    K = rhs.shape[2:]
    xt = np.moveaxis(x, 1, -1)                                  # (N, *S, C)
    M = N * math.prod(out_sp)
    dt = np.result_type(x, rhs)
    buf = np.empty((N,) + out_sp + (I,), x.dtype)
    prod = np.empty((M, O // G), dt)
    Og = O // G
    outs = []
    for g in range(G):
        xg = xt[..., g * I:(g + 1) * I]
        wg = np.moveaxis(rhs[g * Og:(g + 1) * Og], (0, 1), (-1, -2))   # (*K, I, Og)
        acc = np.zeros((M, Og), dt)
        for tap in np.ndindex(*K):
            np.copyto(buf, xg[_tap_view(tap, rhs_dil, out_sp, strides)])
            np.matmul(buf.reshape(M, I), wg[tap], out=prod)
            acc += prod
        outs.append(acc)
    out = np.concatenate(outs, axis=1) if G > 1 else outs[0]
    return np.moveaxis(out.reshape((N,) + out_sp + (O,)), -1, 1)


# Up to this many input channels per group, the taps' patches go into one buffer and one
# matrix product (a product per tap contracts too few channels to pay for its sum: an
# image's first layer, 1-3 channels, took 1.9 ms by taps and 0.8 ms so).
_IM2COL_MAX_CHANNELS = 4


def _conv_im2col(x, rhs, strides, rhs_dil, out_sp, G):
    """As ``_conv_by_taps``, with each tap's shifted view copied into its columns of one
    (N * out, K * I) buffer and one matrix product per feature group."""
    N = x.shape[0]
    O, I = rhs.shape[:2]
    K = rhs.shape[2:]
    Og, KI = O // G, math.prod(K) * I
    xt = np.moveaxis(x, 1, -1)                                  # (N, *S, C)
    lead = (slice(None),) * (1 + len(K))
    cols = np.empty((N,) + out_sp + K + (I,), x.dtype)
    outs = []
    for g in range(G):
        xg = xt[..., g * I:(g + 1) * I]
        for tap in np.ndindex(*K):
            cols[lead + tap] = xg[_tap_view(tap, rhs_dil, out_sp, strides)]
        wg = np.moveaxis(rhs[g * Og:(g + 1) * Og], (0, 1), (-1, -2)).reshape(KI, Og)
        outs.append(cols.reshape(-1, KI) @ wg)
    out = np.concatenate(outs, axis=1) if G > 1 else outs[0]
    return np.moveaxis(out.reshape((N,) + out_sp + (O,)), -1, 1)


def _conv_nchw(lhs, rhs, strides, padding, lhs_dil, rhs_dil, G):
    """Canonical layout: lhs (N, C, *S), rhs (O, I, *K) -> (N, O, *out)."""
    # padded into channels-last memory, (N, *S, C) seen as (N, C, *S): each tap's copy
    # below reads runs of contiguous channels (from an NHWC input, no transpose at all)
    xl = _pad_dilate_np(np.moveaxis(lhs, 1, -1), padding, lhs_dil, trailing=1)
    x = np.moveaxis(np.ascontiguousarray(xl), -1, 1)
    N, C = x.shape[:2]
    O, I = rhs.shape[:2]
    K = rhs.shape[2:]
    Kd = _dilate_shape(K, rhs_dil)
    nsp = len(K)
    out_sp = tuple(max(0, (n - w) // s + 1) if n >= w else 0
                   for n, w, s in zip(x.shape[2:], Kd, strides))
    if N == 0 or O == 0 or any(o == 0 for o in out_sp) or C == 0 or any(k == 0 for k in K):
        return np.zeros((N, O) + out_sp, lhs.dtype)
    if math.prod(K) <= _OFFSET_LOOP_MAX_TAPS and N * math.prod(out_sp) * I >= _TAPS_MIN_SIZE:
        if I <= _IM2COL_MAX_CHANNELS:
            return _conv_im2col(x, rhs, strides, rhs_dil, out_sp, G)
        return _conv_by_taps(x, rhs, strides, rhs_dil, out_sp, G)
    x = np.ascontiguousarray(x)     # (the contraction below copies in x's memory order)
    win = np.lib.stride_tricks.sliding_window_view(x, Kd, axis=tuple(range(2, 2 + nsp)))
    sl = (slice(None), slice(None)) + tuple(slice(None, None, s) for s in strides) + \
        tuple(slice(None, None, d) for d in rhs_dil)
    win = win[sl]  # (N, C, *out, *K)
    win = win[(slice(None), slice(None)) + tuple(slice(0, o) for o in out_sp)]
    Og = O // G
    outs = []
    sp_axes = tuple(range(2 + nsp, 2 + 2 * nsp))
    for g in range(G):
        wg = win[:, g * I:(g + 1) * I]
        rg = rhs[g * Og:(g + 1) * Og]
        # contract C and K: (N, I, *out, *K) x (Og, I, *K) -> (N, *out, Og)
        t = np.tensordot(wg, rg, axes=((1,) + sp_axes, (1,) + tuple(range(2, 2 + nsp))))
        outs.append(np.moveaxis(t, -1, 1))
    return np.concatenate(outs, axis=1) if G > 1 else outs[0]


def _conv_impl(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
               dimension_numbers, feature_group_count, batch_group_count, precision,
               preferred_element_type):
    dn = dimension_numbers
    out_dt = lhs.dtype if preferred_element_type is None else np.dtype(preferred_element_type)
    x = np.transpose(lhs, dn.lhs_spec)
    w = np.transpose(rhs, dn.rhs_spec)
    G = feature_group_count
    B = batch_group_count
    if B > 1:
        # Batch groups become feature groups: split the batch (group-major) into features.
        N, C = x.shape[:2]
        x = x.reshape((B, N // B, C) + x.shape[2:])
        x = np.moveaxis(x, 0, 1).reshape((N // B, B * C) + x.shape[3:])
        G = B
    if dtypes.is_lowp(x.dtype) or dtypes.is_lowp(out_dt):
        # as dot_general: accumulate in float32 (int64 for the narrow integers), round once
        x, w = x.astype(dtypes.compute_dtype(x.dtype)), w.astype(dtypes.compute_dtype(w.dtype))
        compute_dt = np.dtype(np.float32) if dtypes.is_floating(x.dtype) else np.dtype(np.int64)
        if not dtypes.is_lowp(out_dt) and out_dt.itemsize > compute_dt.itemsize:
            compute_dt = out_dt
    else:
        compute_dt = np.promote_types(x.dtype, out_dt) if out_dt != x.dtype else x.dtype
    if dtypes.is_integer(compute_dt) or compute_dt == np.bool_:
        compute_dt = np.dtype(np.int64) if not dtypes.is_unsigned_integer(compute_dt) else \
            np.dtype(np.uint64)
    if compute_dt == np.float16:
        compute_dt = np.dtype(np.float32)
    with np.errstate(all="ignore"):
        out = _conv_nchw(x.astype(compute_dt, copy=False), w.astype(compute_dt, copy=False),
                         window_strides, padding, lhs_dilation, rhs_dilation, G)
    out = out.astype(out_dt, copy=False)
    return np.transpose(out, np.argsort(dn.out_spec))


# ------------------------------------ transposes -------------------------------------------

def _spec_swap(spec):
    return (spec[1], spec[0]) + tuple(spec[2:])


def _split_axis(x, axis, size):
    """Reshape ``axis`` of size n into (size, n // size), the new major axis first."""
    shape = list(get_aval(x).shape)
    n = shape[axis]
    shape[axis:axis + 1] = [size, n // size]
    return shapes.reshape(x, tuple(shape))


def _merge_into(x, src, dst):
    """Move axis ``src`` just before axis ``dst`` and merge them (src major)."""
    nd = get_aval(x).ndim
    perm = [i for i in range(nd) if i != src]
    pos = perm.index(dst)
    perm.insert(pos, src)
    x = shapes.transpose(x, tuple(perm))
    shape = list(get_aval(x).shape)
    shape[pos:pos + 2] = [shape[pos] * shape[pos + 1]]
    return shapes.reshape(x, tuple(shape))


def _split_merge(x, axis, size, dst):
    """_split_axis(axis) then merge the new major part into ``dst`` (indices refer to the
    original rank)."""
    x = _split_axis(x, axis, size)
    # After the split, indices >= axis shift by one; the major part sits at ``axis``.
    d = dst + 1 if dst > axis else dst
    return _merge_into(x, axis, d)


def _lhs_vjp_padding(in_shape, window, strides, out_shape, padding, lhs_dil, rhs_dil):
    lhs_d = _dilate_shape(in_shape, lhs_dil)
    rhs_d = _dilate_shape(window, rhs_dil)
    out_d = _dilate_shape(out_shape, strides)
    before = [w - lo - 1 for w, (lo, _) in zip(rhs_d, padding)]
    after = [l + w - 1 - o - b for l, w, o, b in zip(lhs_d, rhs_d, out_d, before)]
    return tuple(zip(before, after))


def _rhs_vjp_padding(in_shape, window, strides, out_shape, padding, lhs_dil, rhs_dil):
    lhs_d = _dilate_shape(in_shape, lhs_dil)
    rhs_d = _dilate_shape(window, rhs_dil)
    out_d = _dilate_shape(out_shape, strides)
    los = [lo for lo, _ in padding]
    his = [o - l + w - lo - 1 for o, l, w, lo in zip(out_d, lhs_d, rhs_d, los)]
    return tuple(zip(los, his))


def _ct_in_dtype(ct, dtype):
    """The cotangent of a ``preferred_element_type`` result (bf16 x bf16 -> f32) in the
    operands' dtype, for the transposed convolution (operands share one dtype)."""
    if get_aval(ct).dtype == dtype:
        return ct
    from lax.elementwise import convert_element_type
    return convert_element_type(ct, dtype)


def _conv_transpose_lhs(ct, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                        dimension_numbers, feature_group_count, batch_group_count, precision,
                        preferred_element_type):
    dn = dimension_numbers
    lhs_shape = lhs.aval.shape
    lhs_sp = tuple(lhs_shape[i] for i in _sdims(dn.lhs_spec))
    G, B = feature_group_count, batch_group_count
    if G > 1:
        rhs = _split_merge(rhs, dn.rhs_spec[0], G, dn.rhs_spec[1])
    elif B > 1:
        rhs = _split_merge(rhs, dn.rhs_spec[0], B, dn.rhs_spec[1])
        G = B
    ra = get_aval(rhs)
    rhs_sp = tuple(ra.shape[i] for i in _sdims(dn.rhs_spec))
    ct_sp = tuple(get_aval(ct).shape[i] for i in _sdims(dn.out_spec))
    pads = _lhs_vjp_padding(lhs_sp, rhs_sp, window_strides, ct_sp, padding, lhs_dilation,
                            rhs_dilation)
    trans_dn = ConvDimensionNumbers(dn.out_spec, _spec_swap(dn.rhs_spec), dn.lhs_spec)
    flipped = shapes.rev(rhs, tuple(_sdims(dn.rhs_spec)))
    ct = _ct_in_dtype(ct, ra.dtype)
    out = conv_general_dilated(ct, flipped, window_strides=lhs_dilation, padding=pads,
                               lhs_dilation=window_strides, rhs_dilation=rhs_dilation,
                               dimension_numbers=trans_dn, feature_group_count=G,
                               batch_group_count=1, precision=precision,
                               preferred_element_type=preferred_element_type)
    if B > 1:
        out = _split_merge(out, dn.lhs_spec[1], B, dn.lhs_spec[0])
    return _fix_ct_shape(out, lhs_shape, dn.lhs_spec, window_strides, lhs.aval.dtype)


def _fix_ct_shape(out, shape, spec, strides, dtype):
    """Strided convolutions can drop trailing input rows: pad the cotangent back."""
    oa = get_aval(out)
    if oa.shape != tuple(shape):
        cfg = [(0, 0, 0)] * len(shape)
        for i in range(len(shape)):
            if oa.shape[i] != shape[i]:
                cfg[i] = (0, shape[i] - oa.shape[i], 0)
        out = shapes.pad(out, shapes.full((), 0, oa.dtype), cfg)
    if get_aval(out).dtype != dtype:
        from lax.elementwise import convert_element_type
        out = convert_element_type(out, dtype)
    return out


def _conv_transpose_rhs(ct, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                        dimension_numbers, feature_group_count, batch_group_count, precision,
                        preferred_element_type):
    dn = dimension_numbers
    rhs_shape = rhs.aval.shape
    if np.prod(get_aval(ct).shape) == 0:
        return shapes.full(rhs_shape, 0, rhs.aval.dtype)
    la = get_aval(lhs)
    lhs_sp = tuple(la.shape[i] for i in _sdims(dn.lhs_spec))
    rhs_sp = tuple(rhs_shape[i] for i in _sdims(dn.rhs_spec))
    ct_sp = tuple(get_aval(ct).shape[i] for i in _sdims(dn.out_spec))
    G, B = feature_group_count, batch_group_count
    if B > 1:
        G, B = B, 1
    elif G > 1:
        G, B = 1, G
    trans_dn = ConvDimensionNumbers(_spec_swap(dn.lhs_spec), _spec_swap(dn.out_spec),
                                    _spec_swap(dn.rhs_spec))
    pads = _rhs_vjp_padding(lhs_sp, rhs_sp, window_strides, ct_sp, padding, lhs_dilation,
                            rhs_dilation)
    ct = _ct_in_dtype(ct, la.dtype)
    out = conv_general_dilated(lhs, ct, window_strides=rhs_dilation, padding=pads,
                               lhs_dilation=lhs_dilation, rhs_dilation=window_strides,
                               dimension_numbers=trans_dn, feature_group_count=G,
                               batch_group_count=B, precision=precision,
                               preferred_element_type=preferred_element_type)
    return _fix_ct_shape(out, rhs_shape, dn.rhs_spec, rhs_dilation, rhs.aval.dtype)


def _conv_transpose(cts, lhs, rhs, **params):
    (ct,) = cts
    if type(ct) is Zero:
        return [None, None]
    if ad.is_undefined_primal(lhs) and ad.is_undefined_primal(rhs):
        raise ValueError("conv_general_dilated transpose: both operands are linear")
    if ad.is_undefined_primal(lhs):
        return [_conv_transpose_lhs(ct, lhs, rhs, **params), None]
    return [None, _conv_transpose_rhs(ct, lhs, rhs, **params)]


def _conv_jvp(primals, tangents, **params):
    (x, y), (gx, gy) = primals, tangents
    out = conv_general_dilated_p.bind(x, y, **params)
    t = None
    if type(gx) is not Zero:
        t = conv_general_dilated_p.bind(gx, y, **params)
    if type(gy) is not Zero:
        ty = conv_general_dilated_p.bind(x, gy, **params)
        t = ty if t is None else ad.add_tangents(t, ty)
    return [out], [Zero.from_primal_value(out) if t is None else t]


# ------------------------------------------ batching ----------------------------------------

def _conv_batch(axis_data, vals, dims, *, dimension_numbers, feature_group_count,
                batch_group_count, **params):
    (lhs, rhs), (dl, dr) = vals, dims
    dn = dimension_numbers
    G, B = feature_group_count, batch_group_count
    size = axis_data.size
    bind = lambda l, r, g, b: conv_general_dilated_p.bind(
        l, r, dimension_numbers=dn, feature_group_count=g, batch_group_count=b, **params)
    if dl is not None and dr is not None and B == 1:
        # The batch becomes extra feature groups.
        lhs = batching.moveaxis(lhs, dl, 0)
        rhs = batching.moveaxis(rhs, dr, 0)
        lhs = _merge_b(lhs, dn.lhs_spec[1])
        rhs = _merge_b(rhs, dn.rhs_spec[0])
        out = bind(lhs, rhs, G * size, 1)
        return [_split_b(out, dn.out_spec[1], size)], [0]
    if dl is not None and dr is None and B == 1:
        lhs = batching.moveaxis(lhs, dl, 0)
        lhs = _merge_b(lhs, dn.lhs_spec[0])
        out = bind(lhs, rhs, G, 1)
        return [_split_b(out, dn.out_spec[0], size)], [0]
    if dl is None and dr is not None and G == 1 and B == 1:
        rhs = batching.moveaxis(rhs, dr, 0)
        rhs = _merge_b(rhs, dn.rhs_spec[0])
        out = bind(lhs, rhs, 1, 1)
        return [_split_b(out, dn.out_spec[1], size)], [0]
    if dl is None or dr is None:
        lhs = batching.bdim_at_front(lhs, dl, size)
        rhs = batching.bdim_at_front(rhs, dr, size)
        return _conv_batch(axis_data, [lhs, rhs], [0, 0], dimension_numbers=dn,
                           feature_group_count=G, batch_group_count=B, **params)
    # Both batched with batch groups (the rhs gradient of a grouped convolution under
    # vmap): one convolution per batch member.
    from lax.shapes import index_in_dim, concatenate, expand_dims
    lhs = batching.moveaxis(lhs, dl, 0)
    rhs = batching.moveaxis(rhs, dr, 0)
    outs = [expand_dims(bind(index_in_dim(lhs, i, 0, False), index_in_dim(rhs, i, 0, False),
                             G, B), (0,)) for i in range(size)]
    return [concatenate(outs, 0)], [0]


def _merge_b(x, dst):
    """Merge leading batch axis 0 into axis ``dst`` (an index of the unbatched operand),
    batch-major."""
    return _merge_into(x, 0, dst + 1)


def _split_b(x, axis, size):
    """Split ``axis`` (size*n, batch-major) into a new leading batch axis."""
    x = _split_axis(x, axis, size)
    return batching.moveaxis(x, axis, 0)


conv_general_dilated_p = Primitive("conv_general_dilated")
conv_general_dilated_p.def_abstract_eval(_conv_abstract_eval)
conv_general_dilated_p.def_impl(_conv_impl)
ad.primitive_jvps[conv_general_dilated_p] = _conv_jvp
ad.primitive_transposes[conv_general_dilated_p] = _conv_transpose
batching.primitive_batchers[conv_general_dilated_p] = _conv_batch


# ------------------------------------------ helpers -----------------------------------------

def conv(lhs, rhs, window_strides, padding, precision=None, preferred_element_type=None):
    """NCHW/OIHW convolution with "SAME"/"VALID" or explicit padding (jax.lax.conv)."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                              precision=None, preferred_element_type=None):
    """NCHW/OIHW convolution with explicit padding and dilations."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                                precision=precision,
                                preferred_element_type=preferred_element_type)


def _deconv_padding(k, s, pad):
    """Padding of the dilated input that makes conv_transpose the transpose of a strided
    convolution with "SAME" / "VALID" padding (window k, stride s)."""
    if isinstance(pad, str):
        p = pad.upper()
        if p == "SAME":
            total = k + s - 2
            before = k - 1 if s > k - 1 else int(np.ceil(total / 2))
        elif p == "VALID":
            total = k + s - 2 + max(k - s, 0)
            before = k - 1
        else:
            raise ValueError(f"conv_transpose: padding must be 'SAME', 'VALID' or pairs, got "
                             f"{pad!r}")
        return (before, total - before)
    return pad


def conv_transpose(lhs, rhs, strides, padding, rhs_dilation=None, dimension_numbers=None,
                   transpose_kernel=False, precision=None, preferred_element_type=None):
    """Transposed ("fractionally strided") convolution (jax.lax.conv_transpose): the
    gradient of a strided convolution w.r.t. its input when ``transpose_kernel`` is True;
    otherwise the TensorFlow convention (lhs dilated by ``strides``)."""
    la, ra = get_aval(lhs), get_aval(rhs)
    nd = la.ndim
    if dimension_numbers is None:
        if nd == 3:
            dimension_numbers = ("NHC", "HIO", "NHC")
        elif nd == 4:
            dimension_numbers = ("NHWC", "HWIO", "NHWC")
        elif nd == 5:
            dimension_numbers = ("NHWDC", "HWDIO", "NHWDC")
        else:
            raise ValueError("conv_transpose: give dimension_numbers for this rank")
    dn = conv_dimension_numbers(la.shape, ra.shape, dimension_numbers)
    k_sdims = tuple(ra.shape[i] for i in _sdims(dn.rhs_spec))
    nsp = nd - 2
    rhs_dilation = tuple(rhs_dilation) if rhs_dilation is not None else (1,) * nsp
    effective_k = _dilate_shape(k_sdims, rhs_dilation)
    if isinstance(padding, str):
        pads = [_deconv_padding(k, s, padding) for k, s in zip(effective_k, strides)]
    else:
        pads = list(padding)
    if transpose_kernel:
        rhs = shapes.rev(rhs, tuple(_sdims(dn.rhs_spec)))
        rs = list(dn.rhs_spec)
        rs[0], rs[1] = rs[1], rs[0]
        dn = ConvDimensionNumbers(dn.lhs_spec, tuple(rs), dn.out_spec)
    return conv_general_dilated(lhs, rhs, (1,) * nsp, pads, lhs_dilation=tuple(strides),
                                rhs_dilation=rhs_dilation, dimension_numbers=dn,
                                precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_general_dilated_patches(lhs, filter_shape, window_strides, padding, lhs_dilation=None,
                                 rhs_dilation=None, dimension_numbers=None, precision=None,
                                 preferred_element_type=None):
    """The patches a convolution with a ``filter_shape`` window sees (jax.lax): output
    features are C * prod(filter_shape), C-major. A convolution with a one-hot kernel."""
    la = get_aval(lhs)
    nd = la.ndim
    dn = conv_dimension_numbers(la.shape, la.shape, dimension_numbers)
    C = la.shape[dn.lhs_spec[1]]
    fs = tuple(int(f) for f in filter_shape)
    n_f = int(np.prod(fs))
    eye = np.eye(C * n_f, dtype=la.dtype).reshape((C * n_f, C) + fs)
    # Kernel in (O, I, spatial...) layout, placed according to rhs_spec.
    rhs_spec = dn.rhs_spec
    kernel = np.transpose(eye, np.argsort(rhs_spec))
    from tracer.core import Array
    del nd
    return conv_general_dilated(lhs, Array(kernel.astype(la.dtype)), window_strides, padding,
                                lhs_dilation, rhs_dilation, dn, 1, 1, precision,
                                preferred_element_type)


def conv_shape_tuple(lhs_shape, rhs_shape, strides, pads, batch_group_count=1):
    """Output shape of an NCHW/OIHW convolution with the given strides and padding."""
    dn = conv_dimension_numbers(lhs_shape, rhs_shape, None)
    nsp = len(lhs_shape) - 2
    pads = padtype_to_pads(lhs_shape[2:], rhs_shape[2:], strides, pads)
    return _conv_out_shape(lhs_shape, rhs_shape, tuple(strides), tuple(pads), (1,) * nsp,
                           (1,) * nsp, dn, batch_group_count)


def conv_general_shape_tuple(lhs_shape, rhs_shape, window_strides, padding,
                             dimension_numbers):
    """Output shape of ``conv_general_dilated`` without dilation."""
    dn = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    nsp = len(lhs_shape) - 2
    if isinstance(padding, str):
        padding = padtype_to_pads(tuple(lhs_shape[i] for i in _sdims(dn.lhs_spec)),
                                  tuple(rhs_shape[i] for i in _sdims(dn.rhs_spec)),
                                  window_strides, padding)
    return _conv_out_shape(lhs_shape, rhs_shape, tuple(window_strides), tuple(padding),
                           (1,) * nsp, (1,) * nsp, dn, 1)


def conv_general_permutations(dimension_numbers):
    """The (lhs, rhs, out) permutations of string dimension numbers."""
    lhs, rhs, out = dimension_numbers
    dn = conv_dimension_numbers((0,) * len(lhs), (0,) * len(rhs), dimension_numbers)
    return dn.lhs_spec, dn.rhs_spec, dn.out_spec
