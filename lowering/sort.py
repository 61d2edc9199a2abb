"""Lowering of ``sort`` and ``top_k`` (lax/sort.py): library calls of kinds ``"sort"``
and ``"top_k"`` (the primitives' params), which the backend runs with compiled kernels as
described here.

Key operands become uint64 order keys ordered like the eager impl's keys
(``lax.sort._sort_key_arrays``: for sort -0.0 == +0.0 and every NaN a positive NaN
sorting last; for top_k IEEE totalOrder; complex as (real, imag)): floats through a
Numba kernel on their bit patterns, integers widened order-preservingly to unsigned 64
bits. The kernels compute the stable permutation (sort) or the top-k indices
(descending, or ascending for ``largest=False``; ties to the lower index); the outputs are the operands gathered along it,
so values (signed zeros, NaN payloads) are the eager impl's bit for bit.
"""
from __future__ import annotations

from lax.sort import sort_p, top_k_p
from lowering.rules import lowering_rules


def _sort_lower(ctx, in_avals, out_avals, *ops, dimension, is_stable, num_keys):
    name = "sort (Numba stable merge sort)"
    return ctx.library_call(name, "sort", list(ops), out_avals, dimension=dimension,
                            is_stable=is_stable, num_keys=num_keys)


def _top_k_lower(ctx, in_avals, out_avals, x, *, k, axis, largest):
    return ctx.library_call("top_k (Numba selection)", "top_k", [x], out_avals,
                            k=k, axis=axis, largest=largest)


lowering_rules[sort_p] = _sort_lower
lowering_rules[top_k_p] = _top_k_lower
