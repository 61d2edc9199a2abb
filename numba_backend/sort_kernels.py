"""Numba kernels of the sort family (lowering/sort.py): stable sorts and top-k on rows of
order keys.

The caller maps every key operand to uint64 *order keys* whose unsigned order is the
sort's total order (floats with -0.0 == +0.0 and NaN last, as lax/sort.py defines it;
complex numbers give two keys), so one compiled specialisation serves every dtype.

- ``sort_perm(keys, perm)``: ``keys`` (nk, R, n); writes each row's stable
  lexicographic sort permutation into ``perm`` (R, n). One key sorts (key, index) pairs by
  a bottom-up merge sort over insertion-sorted runs; several keys sort indices with a
  lexicographic comparison. Equal keys keep their order (stable), so the permutation is
  the unique one the eager impl's stable argsort/lexsort gives.
- ``top_k_rows(keys, k, out)``: ``keys`` (R, n); the indices of the k largest keys per row
  in descending order, ties to the lower index first (a sorted insertion buffer; for large
  k the caller sorts instead).
"""
from __future__ import annotations

import numba
import numpy as np

_RUN = 24


@numba.njit(cache=True, nogil=True, inline="always")
def _u(i):
    # non-negative by construction; unsigned indices skip the wraparound check
    return np.uint64(i)


@numba.njit(cache=True, nogil=True)
def _sort_pairs(kv, iv, kt, it, n):
    """Stable sort of kv[:n] carrying iv; returns the arrays holding the result."""
    for s in range(0, n, _RUN):
        e = min(n, s + _RUN)
        for i in range(s + 1, e):
            key = kv[_u(i)]
            ix = iv[_u(i)]
            j = i - 1
            while j >= s and kv[_u(j)] > key:
                kv[_u(j + 1)] = kv[_u(j)]
                iv[_u(j + 1)] = iv[_u(j)]
                j -= 1
            kv[_u(j + 1)] = key
            iv[_u(j + 1)] = ix
    width = _RUN
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            a, b, o = lo, mid, lo
            while a < mid and b < hi:
                if kv[_u(b)] < kv[_u(a)]:
                    kt[_u(o)] = kv[_u(b)]
                    it[_u(o)] = iv[_u(b)]
                    b += 1
                else:
                    kt[_u(o)] = kv[_u(a)]
                    it[_u(o)] = iv[_u(a)]
                    a += 1
                o += 1
            while a < mid:
                kt[_u(o)] = kv[_u(a)]
                it[_u(o)] = iv[_u(a)]
                a += 1
                o += 1
            while b < hi:
                kt[_u(o)] = kv[_u(b)]
                it[_u(o)] = iv[_u(b)]
                b += 1
                o += 1
        kv, kt = kt, kv
        iv, it = it, iv
        width *= 2
    return kv, iv


@numba.njit(cache=True, nogil=True, inline="always")
def _less(keys, r, a, b):
    for k in range(keys.shape[0]):
        x = keys[k, r, a]
        y = keys[k, r, b]
        if x < y:
            return True
        if x > y:
            return False
    return False


@numba.njit(cache=True, nogil=True)
def _sort_indices(keys, r, iv, it, n):
    """Stable lexicographic index sort of row r of ``keys`` (nk, R, n)."""
    for s in range(0, n, _RUN):
        e = min(n, s + _RUN)
        for i in range(s + 1, e):
            ix = iv[i]
            j = i - 1
            while j >= s and _less(keys, r, ix, iv[j]):
                iv[j + 1] = iv[j]
                j -= 1
            iv[j + 1] = ix
    width = _RUN
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            a, b, o = lo, mid, lo
            while a < mid and b < hi:
                if _less(keys, r, iv[b], iv[a]):
                    it[o] = iv[b]
                    b += 1
                else:
                    it[o] = iv[a]
                    a += 1
                o += 1
            while a < mid:
                it[o] = iv[a]
                a += 1
                o += 1
            while b < hi:
                it[o] = iv[b]
                b += 1
                o += 1
        iv, it = it, iv
        width *= 2
    return iv


@numba.njit(cache=True, nogil=True)
def sort_perm(keys, perm):
    nk, R, n = keys.shape
    iv = np.empty(n, np.int64)
    it = np.empty(n, np.int64)
    if nk == 1:
        kv = np.empty(n, np.uint64)
        kt = np.empty(n, np.uint64)
        for r in range(R):
            for i in range(n):
                kv[i] = keys[0, r, i]
                iv[i] = i
            _, res = _sort_pairs(kv, iv, kt, it, n)
            for i in range(n):
                perm[r, i] = res[i]
    else:
        for r in range(R):
            for i in range(n):
                iv[i] = i
            res = _sort_indices(keys, r, iv, it, n)
            for i in range(n):
                perm[r, i] = res[i]
    return 0


@numba.njit(cache=True, nogil=True)
def top_k_rows(keys, k, out):
    R, n = keys.shape
    bk = np.empty(k, np.uint64)
    bi = np.empty(k, np.int64)
    for r in range(R):
        cnt = 0
        for i in range(n):
            key = keys[r, i]
            if cnt < k:
                j = cnt
                cnt += 1
            elif key > bk[k - 1]:
                j = k - 1
            else:
                continue
            # shift smaller keys down; equal keys stay ahead (lower index first)
            while j > 0 and bk[j - 1] < key:
                bk[j] = bk[j - 1]
                bi[j] = bi[j - 1]
                j -= 1
            bk[j] = key
            bi[j] = i
        for j in range(k):
            out[r, j] = bi[j]
    return 0
