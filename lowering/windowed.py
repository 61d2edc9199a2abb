"""Lowering of the windowed family (lax/windowed.py): pooling, the max-pool gradient pair,
SelectAndScatter and cumulative reductions, mostly as library calls of kinds
``"reduce_window"`` (``op``: 0 sum, 1 max, 2 min), ``"select_and_scatter_add"``,
``"select_and_gather_add"`` and ``"cumulative"`` (``op``: 0 sum, 1 prod, 2 max, 3 min,
4 logsumexp), which the backend runs with compiled window loops as described here.

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

- ``select_and_scatter`` with user ``select``/``scatter`` computations: spliced in before
  fusion (``inline_rules``) as two ``reduce`` folds with the computations inside -- the
  sequential select over each window, then, for each operand position, the scatters of
  the windows that chose it in row-major window order (see the section below) -- which
  the reduction rule compiles. Bit for bit equal to the eager impl; a computation that
  is not element-wise on scalars keeps the eager impl (host step).

Complex operands of the select pair and bool sources run the eager impl (host step).
"""
from __future__ import annotations

import numpy as np

from lax import windowed as wn
from lowering.passes import inline_rules
from lowering.rules import limit, lowering_rules

_BOOL = np.dtype(np.bool_)


# -------------------------------------- reduce_window_* -------------------------------------

_RW = {wn.reduce_window_sum_p: 0, wn.reduce_window_max_p: 1, wn.reduce_window_min_p: 2}


def _rw_lower(prim):
    op = _RW[prim]

    def rule(ctx, in_avals, out_avals, x, **params):
        name = f"{prim.name} (Numba window loop)"
        return ctx.library_call(name, "reduce_window", [x], out_avals, op=op,
                                out_shape=tuple(out_avals[0].shape), **params)
    return rule


def _rw_limits(prim):
    def check(in_avals, out_avals, **params):
        if in_avals[0].dtype.kind == "c" and _RW[prim] != 0:
            return f"{prim.name}: complex operands"
        return None
    return check


for _p in _RW:
    lowering_rules[_p] = _rw_lower(_p)
    limit("structured", _p, _rw_limits(_p))


# ------------------------------ select_and_scatter / gather ---------------------------------

def _select_limits(prim):
    def check(in_avals, out_avals, **params):
        src, operand = in_avals
        if operand.dtype.kind == "c":
            return f"{prim.name}: complex operands"
        if prim is wn.select_and_scatter_add_p and src.dtype == _BOOL:
            return f"{prim.name}: bool sources"
        return None
    return check


def _sas_lower(ctx, in_avals, out_avals, source, operand, **params):
    name = "select_and_scatter_add (Numba select + scatter)"
    return ctx.library_call(name, "select_and_scatter_add", [source, operand], out_avals,
                            **params)


def _sga_lower(ctx, in_avals, out_avals, tangent, operand, **params):
    name = "select_and_gather_add (Numba select + gather)"
    return ctx.library_call(name, "select_and_gather_add", [tangent, operand], out_avals,
                            out_shape=tuple(out_avals[0].shape), **params)


lowering_rules[wn.select_and_scatter_add_p] = _sas_lower
lowering_rules[wn.select_and_gather_add_p] = _sga_lower
for _p in (wn.select_and_scatter_add_p, wn.select_and_gather_add_p):
    limit("structured", _p, _select_limits(_p))


# ----------------------------------------- cumulative ---------------------------------------

_CUM = {wn.cumsum_p: 0, wn.cumprod_p: 1, wn.cummax_p: 2, wn.cummin_p: 3,
        wn.cumlogsumexp_p: 4}


def _cum_lower(prim):
    op = _CUM[prim]

    def rule(ctx, in_avals, out_avals, x, *, axis, reverse):
        name = f"{prim.name} (Numba scan)"
        return ctx.library_call(name, "cumulative", [x], out_avals, op=op, axis=axis,
                                reverse=reverse)
    return rule


for _p in _CUM:
    lowering_rules[_p] = _cum_lower(_p)


# --------------------------- select_and_scatter (user computations) -------------------------
# Spliced in before fusion (``inline_rules``) as two ``reduce`` folds, both compiled by the
# reduction rule of lowering/reductions.py (the select and scatter computations become
# their element expressions):
#
# 1. select: over the iteration space (*windows, *window) the fold from "nothing chosen"
#    of (value, offset in the window, chosen) triples: an element on the operand (not on
#    padding) is taken when nothing is chosen yet or ``select(current, element)`` is
#    false -- the eager impl's sequential select, window elements in row-major order. The
#    operand and an in-bounds mask are read padded, by gathers.
# 2. scatter: over (*operand, *candidates) -- along each dim the ceil(window / stride)
#    windows that can hold an operand position, in row-major window order -- the fold from
#    ``init_value`` applying ``scatter(acc, source[w])`` for each window w whose choice is
#    this position. The eager impl applies the same scatters to each position in the
#    same (row-major window) order, so the results are equal bit for bit.
#
# Shape-dependent integers come from the arrays' runtime extents (gathers clamp to them;
# the window choices are padded so that no clamp is ever taken), so the kernels depend on
# the window parameters only, like the other kernels.

def _ss_fold(ops, inits, fn, dims):
    """``reduce_p`` of ``fn`` (on pytrees of scalars) over ``dims``, bound as it is: a size-1
    dim still applies ``fn`` once (``lax.reduce`` would return the operands)."""
    import lax
    from lax import reductions as rd
    from tracer.core import ShapedArray, get_aval
    from tracer.pytree import tree_flatten
    _, tree = tree_flatten(tuple(ops))
    inits = [v if hasattr(v, "aval") else lax.full((), v, np.asarray(v).dtype) for v in inits]
    avals = tuple(ShapedArray((), get_aval(v).dtype) for v in inits)
    closed, _ = rd._reduction_jaxpr(fn, avals, tree, cache=False)
    return rd.reduce_p.bind(*ops, *inits, computation=closed, dimensions=tuple(dims))


def _point_gather(x, coords):
    """``x[coords[0], ..., coords[n-1]]`` elementwise (coordinates of one shape, in bounds)."""
    import lax
    nd = len(coords)
    shape = tuple(coords[0].aval.shape) if hasattr(coords[0], "aval") else np.shape(coords[0])
    idx = lax.concatenate([lax.broadcast_in_dim(c, shape + (1,), tuple(range(len(shape))))
                           for c in coords], len(shape))
    dn = lax.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=tuple(range(nd)),
                                    start_index_map=tuple(range(nd)))
    return lax.gather(x, idx, dn, (1,) * nd)


def _ss_decomposition(operand, source, init_value, *, select_jaxpr, scatter_jaxpr,
                      window_dimensions, window_strides, padding):
    import lax
    from tracer import dtypes
    from tracer.core import get_aval
    from tracer.jaxpr import eval_jaxpr
    shape, out = tuple(get_aval(operand).shape), tuple(get_aval(source).shape)
    nd = len(shape)
    wd, ws = tuple(window_dimensions), tuple(window_strides)
    pad = tuple(tuple(p) for p in padding)
    if nd == 0:       # one window holding the one element
        (r,) = eval_jaxpr(scatter_jaxpr.jaxpr, scatter_jaxpr.consts, init_value, source)
        return [r]
    if 0 in shape or 0 in out or 0 in wd:
        return [lax.broadcast_in_dim(init_value, shape, ())]
    it = dtypes.canonicalize_dtype(np.int64)
    w_strides = [int(np.prod(wd[d + 1:])) for d in range(nd)]

    def c(v):
        return np.asarray(v, it)

    # 1. select, over (*out, *wd), reading the padded operand
    space = out + wd
    cfg = [(lo, hi, 0) for lo, hi in pad]
    xp = lax.pad(operand, lax.full((), 0, get_aval(operand).dtype), cfg)
    okp = lax.pad(lax.full(shape, True, np.bool_), np.bool_(False), cfg)
    coords = [lax.add(lax.mul(lax.broadcasted_iota(it, space, d), c(ws[d])),
                      lax.broadcasted_iota(it, space, nd + d)) for d in range(nd)]
    koff = None
    for d in range(nd):
        t = lax.mul(lax.broadcasted_iota(it, space, nd + d), c(w_strides[d]))
        koff = t if koff is None else lax.add(koff, t)

    def select_step(a, b):
        (av, ak, ah), (bv, bk, bh) = a, b
        (keep,) = eval_jaxpr(select_jaxpr.jaxpr, select_jaxpr.consts, av, bv)
        take = lax.bitwise_and(bh, lax.bitwise_or(lax.bitwise_not(ah), lax.bitwise_not(keep)))
        return lax.select(take, bv, av), lax.select(take, bk, ak), lax.bitwise_or(ah, bh)

    _, sel, have = _ss_fold((_point_gather(xp, coords), koff, _point_gather(okp, coords)),
                            (lax.full((), 0, get_aval(operand).dtype), c(0), np.bool_(False)),
                            select_step, range(nd, 2 * nd))
    # 2. scatter, over (*shape, *cand); windows past the last read as "nothing chosen"
    cand = tuple(-(-w // s) for w, s in zip(wd, ws))
    tail = [(0, k, 0) for k in cand]
    sel = lax.pad(sel, c(-1), tail)
    have = lax.pad(have, np.bool_(False), tail)
    src = lax.pad(source, lax.full((), 0, get_aval(source).dtype), tail)
    space = shape + cand
    wins, hit, kflat = [], None, None
    for d in range(nd):
        lo = pad[d][0]
        p = lax.broadcasted_iota(it, space, d)
        q = lax.add(p, c(lo - wd[d] + 1))
        first = lax.div(lax.add(lax.max(q, c(0)), c(ws[d] - 1)), c(ws[d]))
        w = lax.add(first, lax.broadcasted_iota(it, space, nd + d))
        k = lax.sub(lax.add(p, c(lo)), lax.mul(w, c(ws[d])))      # offset of p in window w
        inw = lax.ge(k, c(0))
        wins.append(w)
        hit = inw if hit is None else lax.bitwise_and(hit, inw)
        t = lax.mul(lax.clamp(c(0), k, c(wd[d] - 1)), c(w_strides[d]))
        kflat = t if kflat is None else lax.add(kflat, t)
    hit = lax.bitwise_and(hit, lax.bitwise_and(_point_gather(have, wins),
                                               lax.eq(_point_gather(sel, wins), kflat)))

    def scatter_step(a, b):
        (acc, ah), (s, h) = a, b
        (r,) = eval_jaxpr(scatter_jaxpr.jaxpr, scatter_jaxpr.consts, acc, s)
        return lax.select(h, r, acc), lax.bitwise_or(ah, h)

    res, _ = _ss_fold((_point_gather(src, wins), hit), (init_value, np.bool_(False)),
                      scatter_step, range(nd, 2 * nd))
    return [res]


def _inline_select_and_scatter(eqn):
    from lowering.passes import inline_calls
    from lowering.rules import scalar_jaxpr_why_not
    from tracer.core import new_base_main
    from tracer.interpreters import partial_eval as pe
    params = dict(eqn.params)
    for k in ("select_jaxpr", "scatter_jaxpr"):
        params[k] = inline_calls(params[k])
        if scalar_jaxpr_why_not(params[k]) is not None:
            return None          # the computation does not compile: the eager impl runs
    with new_base_main():
        return pe.trace_to_closed_jaxpr(lambda *a: _ss_decomposition(*a, **params),
                                        [v.aval for v in eqn.invars])


inline_rules[wn.select_and_scatter_p] = _inline_select_and_scatter
