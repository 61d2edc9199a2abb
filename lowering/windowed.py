"""Lowering of the windowed family (lax/windowed.py): pooling, the max-pool gradient pair
and cumulative reductions, as library calls running the Numba kernels of
numba_backend/window_kernels.py.

- ``reduce_window_sum/max/min``: the operand is padded and dilated with the reduction's
  identity only when the parameters need it (NumPy's ``_pad_impl``, negative padding
  included); the kernel then walks every window with precomputed element offsets, the
  last output dim innermost (channel-last pooling is a unit-stride loop). Max/min are
  exact; float sums run in row-major window order (they may differ from NumPy's
  pairwise order by rounding); float16 sums accumulate in float32 and round once.
- ``select_and_scatter_add`` / ``select_and_gather_add``: the eager impl's sequential
  select (ties to the first element in row-major window order, the padding holding the
  select identity) on the padded operand; scatter-adds run in row-major output order
  into a buffer laid out like the padded operand, from which the operand's positions are
  cut out (positions on padding are dropped, as in the eager impl). Bit for bit equal to
  the eager impl, float16 sums rounded after every add like NumPy's.
- ``cumsum/cumprod/cummax/cummin/cumlogsumexp``: sequential scans along the axis (the
  order of NumPy's accumulate, max/min by lax.max's rule, so the results are the eager
  impl's bit for bit), reverse scanning from the end.

Complex operands of the select pair and bool sources run the eager impl (host step).
"""
from __future__ import annotations

import numpy as np

from lax import shapes as lax_shapes
from lax import windowed as wn
from lowering.convolution import readonly_flat
from lowering.rules import NotLowerable, lowering_rules

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


# -------------------------------------- reduce_window_* -------------------------------------

_RW = {wn.reduce_window_sum_p: 0, wn.reduce_window_max_p: 1, wn.reduce_window_min_p: 2}
_RW_IDENT = {0: wn._sum_identity, 1: wn._max_identity, 2: wn._min_identity}


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


def _rw_lower(prim):
    op = _RW[prim]

    def rule(ctx, in_avals, out_avals, x, **params):
        if in_avals[0].dtype.kind == "c" and op != 0:
            raise NotLowerable(f"{prim.name}: complex operands")
        name = f"{prim.name} (Numba window loop)"
        return ctx.library_call(name, reduce_window_call, [x], out_avals, op=op,
                                out_shape=tuple(out_avals[0].shape), **params)
    return rule


for _p in _RW:
    lowering_rules[_p] = _rw_lower(_p)


# ------------------------------ select_and_scatter / gather ---------------------------------

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


def _select_check(prim, in_avals):
    src, operand = in_avals
    if operand.dtype.kind == "c":
        raise NotLowerable(f"{prim.name}: complex operands")
    if prim is wn.select_and_scatter_add_p and src.dtype == _BOOL:
        raise NotLowerable(f"{prim.name}: bool sources")


def _sas_lower(ctx, in_avals, out_avals, source, operand, **params):
    _select_check(wn.select_and_scatter_add_p, in_avals)
    name = "select_and_scatter_add (Numba select + scatter)"
    return ctx.library_call(name, select_and_scatter_call, [source, operand], out_avals,
                            **params)


def _sga_lower(ctx, in_avals, out_avals, tangent, operand, **params):
    _select_check(wn.select_and_gather_add_p, in_avals)
    name = "select_and_gather_add (Numba select + gather)"
    return ctx.library_call(name, select_and_gather_call, [tangent, operand], out_avals,
                            out_shape=tuple(out_avals[0].shape), **params)


lowering_rules[wn.select_and_scatter_add_p] = _sas_lower
lowering_rules[wn.select_and_gather_add_p] = _sga_lower


# ----------------------------------------- cumulative ---------------------------------------

_CUM = {wn.cumsum_p: 0, wn.cumprod_p: 1, wn.cummax_p: 2, wn.cummin_p: 3,
        wn.cumlogsumexp_p: 4}


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


def _cum_lower(prim):
    op = _CUM[prim]

    def rule(ctx, in_avals, out_avals, x, *, axis, reverse):
        name = f"{prim.name} (Numba scan)"
        return ctx.library_call(name, cumulative_call, [x], out_avals, op=op, axis=axis,
                                reverse=reverse)
    return rule


for _p in _CUM:
    lowering_rules[_p] = _cum_lower(_p)
