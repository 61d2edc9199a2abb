"""Lowering rules of the linalg family (lax/linalg.py): contractions as library calls.

``dot_general`` runs on BLAS through ``np.matmul`` on whole arrays (any dimension numbers,
batched): operands are brought to (batch, free, contracting) order by strided views, so
BLAS sees transposes as flags and nothing is copied for the usual layouts. This is the
primitive's eager impl itself, so jit and eager agree bit for bit.
"""
from __future__ import annotations

from lax import linalg as la
from lowering.rules import lowering_rules


def _dot_general_call(lhs, rhs, **params):
    return [la._dot_general_impl(lhs, rhs, **params)]


def _dot_general_lower(ctx, in_avals, out_avals, lhs, rhs, **params):
    (lc, rc), (lb, rb) = params["dimension_numbers"]
    name = f"dot_general[lc={lc} rc={rc} lb={lb} rb={rb}] (BLAS via np.matmul)"
    return ctx.library_call(name, _dot_general_call, [lhs, rhs], out_avals, **params)


lowering_rules[la.dot_general_p] = _dot_general_lower
