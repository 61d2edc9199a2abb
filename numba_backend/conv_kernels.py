"""Numba kernels of the convolution family (lowering/convolution.py).

Both kernels see a canonical problem with three spatial dims (missing ones have extent 1)
and read the input through explicit element strides, so one compiled specialisation per
dtype serves every layout, rank and parameter set:

- ``geo`` (int64[24]): per spatial dim d, ``geo[8 d: 8 d + 8]`` = (input extent, output
  extent, kernel extent, window stride, low padding, lhs dilation, rhs dilation, input
  element stride);
- ``sN``/``sC``: element strides of the batch and feature dims; ``gstride``: the offset
  between groups (``I * sC`` for feature groups, ``(N / B) * sN`` for batch groups);
- output rows are (n, o0, o1, o2) in row-major order.

A kernel tap reads input index ``q = (o * stride + k * rhs_dil - pad_lo) / lhs_dil`` only
when that division is exact and ``0 <= q < extent`` (else the tap is on padding or
between dilated inputs and contributes zero), so every load is in bounds by construction.

``im2col`` writes patch rows ``P[g, r - r0, (k, i)]`` (a flat buffer) for the rows
``r0 <= r < r1`` (the caller multiplies them with the weights on BLAS); ``conv_direct`` is
the loop nest used where a matrix product does not pay (integer types, one output per
group).
"""
from __future__ import annotations

import numba_backend._numba  # noqa: F401  (first: Numba the cheap way)
from numba_backend._numba import njit
import numpy as np


@njit(cache=True, nogil=True, inline="always")
def _u(i):
    # Indices are non-negative by construction: unsigned indices skip Numba's negative
    # index wraparound, which otherwise keeps LLVM from vectorizing the copy loops.
    return np.uint64(i)


@njit(cache=True, nogil=True, inline="always")
def _tap(geo, d, o, k):
    """Input index of output position ``o`` and kernel tap ``k`` along spatial dim ``d``,
    or -1 when the tap falls on padding or between dilated inputs."""
    b = 8 * d
    c = o * geo[b + 3] + k * geo[b + 6] - geo[b + 4]
    if c < 0:
        return -1
    ld = geo[b + 5]
    q = c // ld
    if q * ld != c or q >= geo[b]:
        return -1
    return q


@njit(cache=True, nogil=True)
def _taps(geo, d):
    """Table of ``_tap`` over (output position, kernel tap) along spatial dim ``d``."""
    b = 8 * d
    t = np.empty((geo[b + 1], geo[b + 2]), np.int64)
    for o in range(geo[b + 1]):
        for k in range(geo[b + 2]):
            t[o, k] = _tap(geo, d, o, k)
    return t


@njit(cache=True, nogil=True, inline="always")
def _advance(n, o0, o1, o2, O0, O1, O2):
    """The next output row (row-major odometer: no divisions per row)."""
    o2 += 1
    if o2 == O2:
        o2 = 0
        o1 += 1
        if o1 == O1:
            o1 = 0
            o0 += 1
            if o0 == O0:
                o0 = 0
                n += 1
    return n, o0, o1, o2


@njit(cache=True, nogil=True)
def im2col(x, geo, sN, sC, gstride, G, I, r0, r1, P):
    """Patch rows r0 <= r < r1 into the flat ``P`` laid out (G, r1 - r0, taps * I)."""
    O0, O1, O2 = geo[1], geo[9], geo[17]
    K0, K1, K2 = geo[2], geo[10], geo[18]
    s0, s1, s2 = geo[7], geo[15], geo[23]
    t0, t1, t2 = _taps(geo, 0), _taps(geo, 1), _taps(geo, 2)
    # Where the innermost taps of an output position read consecutive inputs whose
    # channels are contiguous (stride 1, no dilation, inside the image), the K2 * I
    # patch entries are one contiguous run of the input.
    run2 = np.zeros(O2, np.bool_)
    if sC == 1 and s2 == I:
        for o in range(O2):
            ok = t2[o, 0] >= 0
            for k in range(1, K2):
                ok = ok and t2[o, k] == t2[o, 0] + k
            run2[o] = ok
    KI = K0 * K1 * K2 * I
    RI = K2 * I
    m = r1 - r0
    t = r0
    o2 = t % O2
    t //= O2
    o1 = t % O1
    t //= O1
    o0 = t % O0
    n = t // O0
    for row in range(m):
        for g in range(G):
            gbase = n * sN + g * gstride
            col = (g * m + row) * KI
            for k0 in range(K0):
                q0 = t0[o0, k0]
                for k1 in range(K1):
                    q1 = t1[o1, k1]
                    if q0 < 0 or q1 < 0:
                        for i in range(RI):
                            P[_u(col + i)] = 0
                        col += RI
                        continue
                    base01 = gbase + q0 * s0 + q1 * s1
                    if run2[o2]:
                        base = base01 + t2[o2, 0] * s2
                        for i in range(RI):
                            P[_u(col + i)] = x[_u(base + i)]
                        col += RI
                        continue
                    for k2 in range(K2):
                        q2 = t2[o2, k2]
                        if q2 < 0:
                            for i in range(I):
                                P[_u(col + i)] = 0
                        else:
                            base = base01 + q2 * s2
                            for i in range(I):
                                P[_u(col + i)] = x[_u(base + i * sC)]
                        col += I
        n, o0, o1, o2 = _advance(n, o0, o1, o2, O0, O1, O2)
    return 0


@njit(cache=True, nogil=True)
def conv_direct(x, geo, sN, sC, gstride, G, I, Og, w, out):
    """out[r, g * Og + j] = sum over taps k and channels i of x[tap] * w[k, i, g * Og + j]
    with ``w`` flat (taps, I, G * Og) and ``out`` flat (rows, G * Og), summed in (k, i)
    order. One input channel and one output per group (depthwise) runs the groups
    innermost (a unit-stride loop over channel-last inputs); otherwise the outputs of a
    group are innermost."""
    O0, O1, O2 = geo[1], geo[9], geo[17]
    K0, K1, K2 = geo[2], geo[10], geo[18]
    s0, s1, s2 = geo[7], geo[15], geo[23]
    t0, t1, t2 = _taps(geo, 0), _taps(geo, 1), _taps(geo, 2)
    C = G * Og
    depthwise = I == 1 and Og == 1
    n = o0 = o1 = o2 = 0
    for r in range(out.shape[0] // C if C > 0 else 0):
        ob = r * C
        for c in range(C):
            out[_u(ob + c)] = 0
        kk = 0
        for k0 in range(K0):
            q0 = t0[o0, k0]
            for k1 in range(K1):
                q1 = t1[o1, k1]
                for k2 in range(K2):
                    q2 = t2[o2, k2]
                    if q0 >= 0 and q1 >= 0 and q2 >= 0:
                        base = n * sN + q0 * s0 + q1 * s1 + q2 * s2
                        if depthwise:
                            wb = kk * G
                            for g in range(G):
                                out[_u(ob + g)] += x[_u(base + g * gstride)] * w[_u(wb + g)]
                        else:
                            for g in range(G):
                                gb = base + g * gstride
                                for i in range(I):
                                    xv = x[_u(gb + i * sC)]
                                    wb = (kk * I + i) * C + g * Og
                                    for j in range(Og):
                                        out[_u(ob + g * Og + j)] += xv * w[_u(wb + j)]
                    kk += 1
        n, o0, o1, o2 = _advance(n, o0, o1, o2, O0, O1, O2)
    return 0


@njit(cache=True, nogil=True)
def tap_gather(Z, geo, G, Og, Mg, K, out):
    """out[r * G * Og + g * Og + j] = sum over valid taps k of Z[g, row(r, k), k, j] (both
    flat; ``out`` has G * Og > 0 columns per row): the second half
    of a convolution computed as Z = X @ W (every input row times every tap's weights,
    ``Z`` flat (G, Mg, K, Og)), where ``row(r, k)`` is the input position (n, q0, q1, q2)
    that tap k of output row r reads, numbered row-major over the input extents."""
    O0, O1, O2 = geo[1], geo[9], geo[17]
    K0, K1, K2 = geo[2], geo[10], geo[18]
    S2 = geo[16]
    S1 = geo[8] * S2
    S = geo[0] * S1
    t0, t1, t2 = _taps(geo, 0), _taps(geo, 1), _taps(geo, 2)
    n = o0 = o1 = o2 = 0
    C = G * Og
    acc = np.empty(C, out.dtype)
    for r in range(out.shape[0] // C):
        for c in range(C):
            acc[c] = 0
        kk = 0
        for k0 in range(K0):
            q0 = t0[o0, k0]
            for k1 in range(K1):
                q1 = t1[o1, k1]
                for k2 in range(K2):
                    q2 = t2[o2, k2]
                    if q0 >= 0 and q1 >= 0 and q2 >= 0:
                        row = n * S + q0 * S1 + q1 * S2 + q2
                        for g in range(G):
                            zb = ((g * Mg + row) * K + kk) * Og
                            for j in range(Og):
                                acc[_u(g * Og + j)] += Z[_u(zb + j)]
                    kk += 1
        ob = r * C
        for c in range(C):
            out[_u(ob + c)] = acc[c]
        n, o0, o1, o2 = _advance(n, o0, o1, o2, O0, O1, O2)
    return 0
