"""Numba kernels of the sort family (lowering/sort.py): stable sorts and top-k on rows of
order keys.

The caller maps every key operand to uint64 *order keys* whose unsigned order is the
sort's total order (floats with -0.0 == +0.0 and NaN last for sort, IEEE totalOrder for
top_k, as lax/sort.py defines them; complex numbers give two keys), so one compiled
specialisation serves every dtype.

- ``sort_perm(keys, perm)``: ``keys`` (nk, R, n); writes each row's stable
  lexicographic sort permutation into ``perm`` (R, n): (key, index) pairs sorted by a
  stable LSD radix sort (long rows) or a bottom-up merge sort over insertion-sorted runs
  (short rows), one stable pass per key from the last key to the first. Equal keys keep
  their order (stable), so the permutation is the unique one the eager impl's stable
  argsort/lexsort gives.
- ``float_keys``: the order keys of floats, from their bit patterns.
- ``top_k_rows(keys, k, out)``: ``keys`` (R, n); the indices of the k largest keys per row
  in descending order, ties to the lower index first (a sorted insertion buffer; for large
  k the caller sorts instead).
"""
from __future__ import annotations

import numba_backend._numba  # noqa: F401  (first: Numba the cheap way)
from numba_backend._numba import njit
import numpy as np

_RUN = 24
# rows longer than this sort by radix passes (a pass costs 256 buckets of overhead)
_RADIX_MIN = 256


@njit(cache=True, nogil=True, inline="always")
def _u(i):
    # non-negative by construction; unsigned indices skip the wraparound check
    return np.uint64(i)


@njit(cache=True, nogil=True)
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


@njit(cache=True, nogil=True)
def _radix_pairs(kv, iv, kt, it, n, cnt):
    """Stable LSD radix sort (8-bit digits) of kv[:n] carrying iv; digits above the
    highest set bit and digits shared by every key are skipped. Returns the arrays
    holding the result."""
    ored = np.uint64(0)
    for i in range(n):
        ored |= kv[_u(i)]
    shift = 0
    while shift < 64 and (ored >> np.uint64(shift)) != np.uint64(0):
        sh = np.uint64(shift)
        for b in range(256):
            cnt[b] = 0
        for i in range(n):
            cnt[_u((kv[_u(i)] >> sh) & np.uint64(255))] += 1
        uniform = False
        total = 0
        for b in range(256):
            c = cnt[b]
            if c == n:
                uniform = True
            cnt[b] = total
            total += c
        if not uniform:
            for i in range(n):
                k = kv[_u(i)]
                d = _u((k >> sh) & np.uint64(255))
                p = cnt[d]
                cnt[d] = p + 1
                kt[_u(p)] = k
                it[_u(p)] = iv[_u(i)]
            kv, kt = kt, kv
            iv, it = it, iv
        shift += 8
    return kv, iv


@njit(cache=True, nogil=True)
def sort_perm(keys, perm):
    nk, R, n = keys.shape
    kv = np.empty(n, np.uint64)
    kt = np.empty(n, np.uint64)
    iv = np.empty(n, np.int64)
    it = np.empty(n, np.int64)
    cnt = np.empty(256, np.int64)
    for r in range(R):
        for i in range(n):
            iv[i] = i
        # least significant key first: each stable pass keeps the order of the later keys
        # among equal earlier ones (np.lexsort's scheme)
        for k in range(nk - 1, -1, -1):
            for i in range(n):
                kv[i] = keys[k, r, iv[i]]
            if n > _RADIX_MIN:
                _, ires = _radix_pairs(kv, iv, kt, it, n, cnt)
            else:
                _, ires = _sort_pairs(kv, iv, kt, it, n)
            for i in range(n):      # (a no-op copy when the result is already in iv)
                iv[i] = ires[i]
        for i in range(n):
            perm[r, i] = iv[i]
    return 0


@njit(cache=True, nogil=True)
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


@njit(cache=True, nogil=True)
def float_keys(u, nbits, expm, qnan, canonical, out):
    """Order keys of floats given as their bit patterns ``u`` (a flat uint16/32/64 view).
    With ``canonical`` NaNs become the positive quiet NaN ``qnan`` and zeros +0.0 (sort's
    canonicalisation in lax/sort.py); then negatives flip every bit and non-negatives set
    the sign bit, so unsigned order is IEEE totalOrder (top_k's order when not
    ``canonical``; NaN last when it is). Keys stay below 2**nbits."""
    one = np.uint64(1)
    sign = one << np.uint64(nbits - 1)
    mask = (sign << one) - one
    for i in range(u.shape[0]):
        v = np.uint64(u[i])
        if canonical:
            mag = v & ~sign & mask
            if mag > expm:
                v = qnan
            elif mag == 0:
                v = np.uint64(0)
        out[i] = (v ^ mask) if (v & sign) else (v | sign)
    return 0
