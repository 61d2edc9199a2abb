"""Numba kernels of the random-bits family (lowering/random_bits.py): Threefry-2x32 and
Philox-4x32-10, the hashes behind RngBitGenerator's counter streams.

Words are carried in uint64 and masked to 32 bits after every addition (Numba widens
uint32 arithmetic), so the results are the wrapping uint32 results of the NumPy reference
(lax/random_bits.py) bit for bit.
"""
from __future__ import annotations

import numba_backend._numba  # noqa: F401  (first: Numba the cheap way)
from numba_backend._numba import njit
import numpy as np

_M32 = np.uint64(0xFFFFFFFF)
_PARITY = np.uint64(0x1BD11BDA)


@njit(cache=True, nogil=True, inline="always")
def _rotl(x, r):
    return ((x << np.uint64(r)) | (x >> np.uint64(32 - r))) & _M32


@njit(cache=True, nogil=True, inline="always")
def _mix4(x0, x1, r0, r1, r2, r3):
    x0 = (x0 + x1) & _M32
    x1 = _rotl(x1, r0) ^ x0
    x0 = (x0 + x1) & _M32
    x1 = _rotl(x1, r1) ^ x0
    x0 = (x0 + x1) & _M32
    x1 = _rotl(x1, r2) ^ x0
    x0 = (x0 + x1) & _M32
    x1 = _rotl(x1, r3) ^ x0
    return x0, x1


@njit(cache=True, nogil=True, inline="always")
def _threefry(k0, k1, x0, x1):
    """Threefry-2x32, 20 rounds, on 32-bit values held in uint64."""
    k2 = k0 ^ k1 ^ _PARITY
    x0 = (x0 + k0) & _M32
    x1 = (x1 + k1) & _M32
    x0, x1 = _mix4(x0, x1, 13, 15, 26, 6)
    x0 = (x0 + k1) & _M32
    x1 = (x1 + k2 + np.uint64(1)) & _M32
    x0, x1 = _mix4(x0, x1, 17, 29, 16, 24)
    x0 = (x0 + k2) & _M32
    x1 = (x1 + k0 + np.uint64(2)) & _M32
    x0, x1 = _mix4(x0, x1, 13, 15, 26, 6)
    x0 = (x0 + k0) & _M32
    x1 = (x1 + k1 + np.uint64(3)) & _M32
    x0, x1 = _mix4(x0, x1, 17, 29, 16, 24)
    x0 = (x0 + k1) & _M32
    x1 = (x1 + k2 + np.uint64(4)) & _M32
    x0, x1 = _mix4(x0, x1, 13, 15, 26, 6)
    x0 = (x0 + k2) & _M32
    x1 = (x1 + k0 + np.uint64(5)) & _M32
    return x0, x1


@njit(cache=True, nogil=True)
def threefry2x32(k0, k1, x0, x1, steps, out0, out1):
    """Element i of each flat uint32 operand is operand[i * steps[j]] (step 0: a
    broadcast scalar)."""
    s0, s1, s2, s3 = steps[0], steps[1], steps[2], steps[3]
    for i in range(out0.shape[0]):
        y0, y1 = _threefry(np.uint64(k0[i * s0]), np.uint64(k1[i * s1]),
                           np.uint64(x0[i * s2]), np.uint64(x1[i * s3]))
        out0[i] = np.uint32(y0)
        out1[i] = np.uint32(y1)
    return 0


@njit(cache=True, nogil=True)
def philox4x32(k0, k1, c0, c1, c2, c3, out0, out1, out2, out3):
    """Philox-4x32-10 under the scalar key (k0, k1) of the flat uint32 counter words
    (c0, c1, c2, c3), least significant first; the four output words into out0..out3."""
    m0 = np.uint64(0xD2511F53)
    m1 = np.uint64(0xCD9E8D57)
    w0 = np.uint64(0x9E3779B9)
    w1 = np.uint64(0xBB67AE85)
    for i in range(out0.shape[0]):
        x0 = np.uint64(c0[i])
        x1 = np.uint64(c1[i])
        x2 = np.uint64(c2[i])
        x3 = np.uint64(c3[i])
        a = np.uint64(k0)
        b = np.uint64(k1)
        for _ in range(10):
            p0 = m0 * x0
            p1 = m1 * x2
            hi0, lo0 = p0 >> np.uint64(32), p0 & _M32
            hi1, lo1 = p1 >> np.uint64(32), p1 & _M32
            x0, x1, x2, x3 = (hi1 ^ x1 ^ a) & _M32, lo1, (hi0 ^ x3 ^ b) & _M32, lo0
            a = (a + w0) & _M32
            b = (b + w1) & _M32
        out0[i] = np.uint32(x0)
        out1[i] = np.uint32(x1)
        out2[i] = np.uint32(x2)
        out3[i] = np.uint32(x3)
    return 0
