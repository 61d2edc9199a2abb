"""Lowering of the windowed family (lax/windowed.py): pooling, the max-pool gradient pair
and cumulative reductions, as library calls of kinds ``"reduce_window"`` (``op``: 0 sum,
1 max, 2 min), ``"select_and_scatter_add"``, ``"select_and_gather_add"`` and
``"cumulative"`` (``op``: 0 sum, 1 prod, 2 max, 3 min, 4 logsumexp), which the backend
runs with compiled window loops as described here.

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

from lax import windowed as wn
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
