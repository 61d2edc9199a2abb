"""Lowering of ``sort`` and ``top_k`` (lax/sort.py): library calls running the Numba
kernels of numba_backend/sort_kernels.py.

Key operands become uint64 order keys ordered like the eager impl's keys
(``lax.sort._sort_key_arrays``: for sort -0.0 == +0.0 and every NaN a positive NaN
sorting last; for top_k IEEE totalOrder; complex as (real, imag)): floats through a
Numba kernel on their bit patterns, integers widened order-preservingly to unsigned 64
bits. The kernels compute the stable permutation (sort) or the top-k indices
(descending, ties to the lower index); the outputs are the operands gathered along it,
so values (signed zeros, NaN payloads) are the eager impl's bit for bit.
"""
from __future__ import annotations

import numpy as np

from lax.sort import _sort_key_arrays, sort_p, top_k_p
from lowering.rules import lowering_rules

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


def top_k_call(x, *, k):
    """top_k on a NumPy array: values and int32 indices of the k largest entries along
    the last axis, descending, ties to the lower index."""
    from numba_backend.sort_kernels import sort_perm, top_k_rows

    shape = x.shape[:-1] + (k,)
    if k == 0 or x.size == 0:
        return [np.empty(shape, x.dtype), np.empty(shape, np.int32)]
    (key,) = order_keys(x, total=True)
    n = x.shape[-1]
    rows = np.ascontiguousarray(key.reshape(-1, n))
    if k <= _TOPK_BUFFER:
        idx = np.empty((rows.shape[0], k), np.int64)
        top_k_rows(rows, k, idx)
    else:
        # descending with ties in index order: a stable ascending sort of reversed keys
        perm = np.empty(rows.shape, np.int64)
        sort_perm((~rows)[None], perm)
        idx = np.ascontiguousarray(perm[:, :k])
    idx = idx.reshape(shape)
    return [np.take_along_axis(x, idx, axis=-1), idx.astype(np.int32)]


def _sort_lower(ctx, in_avals, out_avals, *ops, dimension, is_stable, num_keys):
    name = "sort (Numba stable merge sort)"
    return ctx.library_call(name, sort_call, list(ops), out_avals, dimension=dimension,
                            is_stable=is_stable, num_keys=num_keys)


def _top_k_lower(ctx, in_avals, out_avals, x, *, k):
    return ctx.library_call("top_k (Numba selection)", top_k_call, [x], out_avals,
                            k=k)


lowering_rules[sort_p] = _sort_lower
lowering_rules[top_k_p] = _top_k_lower
