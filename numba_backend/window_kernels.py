"""Numba kernels of the windowed family (lowering/windowed.py): window reductions,
SelectAndScatter / its gather transpose, and cumulative scans.

Window kernels read a flat base array ``xp`` (the operand, padded and dilated by the
caller when the window parameters need it). Output element (r, j) -- r the row-major
position over all output dims but the last, j the last -- has window element k at
``base(r) + off[k] + j * istep``: ``base`` advances by ``outer_step[d]`` along output dim d
(window stride times the base's element stride), ``off`` lists the window elements in
row-major window order, ``istep`` is the last dim's step. Keeping the last output dim
innermost makes the common channel-last pooling a unit-stride, vectorizable loop. Every
offset lies inside ``xp`` by construction (the output shape is derived from it).

Comparisons follow the eager NumPy impls exactly: max/min fold the accumulator with
each new element by lax.max's (lax.min's) rule, XLA:CPU's bit for bit (a NaN accumulator
stays, ties and a NaN element take the element with the sign bits and-ed (or-ed), so
-0.0 < +0.0); selection keeps the current element while ``cur >= e`` (``<=``), ties
going to the first element in window order, as lax/windowed.py does.
"""
from __future__ import annotations

import math

import numba_backend._numba  # noqa: F401  (first: Numba the cheap way)
from numba_backend._numba import njit
import numpy as np

from numba_backend.scalar import f16r

_LOGE2 = math.log(2.0)


@njit(cache=True, nogil=True, inline="always")
def _u(i):
    # non-negative by construction; unsigned indices skip the wraparound check
    return np.uint64(i)


@njit(cache=True, nogil=True, inline="always")
def _max(a, v):
    # lax.max's rule (numba_backend.scalar.fmax): a NaN accumulator stays; a tie or a NaN
    # v gives v with the sign bits and-ed (integers: the larger)
    if a != a or a > v:
        return a
    if a < v:
        return v
    return v if math.copysign(1.0, a) < 0 else abs(v)


@njit(cache=True, nogil=True, inline="always")
def _min(a, v):
    # lax.min's rule (numba_backend.scalar.fmin): the sign bits or-ed
    if a != a or a < v:
        return a
    if a > v:
        return v
    return -abs(v) if math.copysign(1.0, a) < 0 else v


@njit(cache=True, nogil=True, inline="always")
def _step(pos, base, outer_shape, outer_step):
    """Advance the odometer over the outer output dims; returns the new base."""
    d = outer_shape.shape[0] - 1
    while d >= 0:
        pos[d] += 1
        base += outer_step[d]
        if pos[d] < outer_shape[d]:
            return base
        base -= pos[d] * outer_step[d]
        pos[d] = 0
        d -= 1
    return base


# ------------------------------------- window reductions -----------------------------------

@njit(cache=True, nogil=True)
def window_sum(xp, outer_shape, outer_step, off, L, istep, out):
    """out[r * L + j] = sum over window k in row-major order of
    xp[base(r) + off[k] + j * istep]. ``off`` is non-empty."""
    pos = np.zeros(outer_shape.shape[0], np.int64)
    R = out.shape[0] // L if L > 0 else 0
    base = 0
    for r in range(R):
        row = r * L
        b0 = base + off[0]
        for j in range(L):
            out[_u(row + j)] = xp[_u(b0 + j * istep)]
        for k in range(1, off.shape[0]):
            bk = base + off[k]
            for j in range(L):
                out[_u(row + j)] += xp[_u(bk + j * istep)]
        base = _step(pos, base, outer_shape, outer_step)
    return 0


@njit(cache=True, nogil=True)
def window_minmax(xp, outer_shape, outer_step, off, L, istep, is_max, out):
    """Like ``window_sum`` with max (``is_max``) or min (ordered dtypes only; float16
    values carried as float32)."""
    pos = np.zeros(outer_shape.shape[0], np.int64)
    R = out.shape[0] // L if L > 0 else 0
    base = 0
    for r in range(R):
        row = r * L
        b0 = base + off[0]
        for j in range(L):
            out[_u(row + j)] = xp[_u(b0 + j * istep)]
        for k in range(1, off.shape[0]):
            bk = base + off[k]
            if is_max:
                for j in range(L):
                    out[_u(row + j)] = _max(out[_u(row + j)], xp[_u(bk + j * istep)])
            else:
                for j in range(L):
                    out[_u(row + j)] = _min(out[_u(row + j)], xp[_u(bk + j * istep)])
        base = _step(pos, base, outer_shape, outer_step)
    return 0


# ---------------------------------- select and scatter/gather ------------------------------

@njit(cache=True, nogil=True, inline="always")
def _select_row(xp, base, off, L, istep, ge, cur, sel):
    """Sequential select over the window of each element of one output row."""
    b0 = base + off[0]
    for j in range(L):
        cur[j] = xp[_u(b0 + j * istep)]
        sel[j] = 0
    for k in range(1, off.shape[0]):
        bk = base + off[k]
        for j in range(L):
            e = xp[_u(bk + j * istep)]
            c = cur[j]
            keep = c >= e if ge else c <= e
            if not keep:
                cur[j] = e
                sel[j] = k


@njit(cache=True, nogil=True)
def select_scatter(xp, outer_shape, outer_step, off, L, istep, ge, src, dst):
    """dst[base(r) + off[sel] + j * istep] += src[r * L + j] in row-major output order,
    ``sel`` the window element selected in xp; ``dst`` is laid out like ``xp``."""
    pos = np.zeros(outer_shape.shape[0], np.int64)
    cur = np.empty(L, xp.dtype)
    sel = np.empty(L, np.int64)
    R = src.shape[0] // L if L > 0 else 0
    base = 0
    for r in range(R):
        _select_row(xp, base, off, L, istep, ge, cur, sel)
        for j in range(L):
            p = _u(base + off[sel[j]] + j * istep)
            dst[p] = dst[p] + src[_u(r * L + j)]
        base = _step(pos, base, outer_shape, outer_step)
    return 0


@njit(cache=True, nogil=True)
def select_scatter_f16(xp, outer_shape, outer_step, off, L, istep, ge, src, dst):
    """``select_scatter`` for float16 sources carried as float32: every sum is rounded
    to float16, as NumPy's float16 ``add.at`` does."""
    pos = np.zeros(outer_shape.shape[0], np.int64)
    cur = np.empty(L, xp.dtype)
    sel = np.empty(L, np.int64)
    R = src.shape[0] // L if L > 0 else 0
    base = 0
    for r in range(R):
        _select_row(xp, base, off, L, istep, ge, cur, sel)
        for j in range(L):
            p = _u(base + off[sel[j]] + j * istep)
            dst[p] = f16r(dst[p] + src[_u(r * L + j)])
        base = _step(pos, base, outer_shape, outer_step)
    return 0


@njit(cache=True, nogil=True)
def select_gather(xp, outer_shape, outer_step, off, L, istep, ge, tp, out):
    """out[r * L + j] = tp[base(r) + off[sel] + j * istep]; ``tp`` is laid out like xp."""
    pos = np.zeros(outer_shape.shape[0], np.int64)
    cur = np.empty(L, xp.dtype)
    sel = np.empty(L, np.int64)
    R = out.shape[0] // L if L > 0 else 0
    base = 0
    for r in range(R):
        _select_row(xp, base, off, L, istep, ge, cur, sel)
        for j in range(L):
            out[_u(r * L + j)] = tp[_u(base + off[sel[j]] + j * istep)]
        base = _step(pos, base, outer_shape, outer_step)
    return 0


# ------------------------------------------ scans ------------------------------------------
# x and out are flat C-ordered (A, n, B) arrays scanned along n (from the end if reverse),
# the B contiguous lanes innermost.

@njit(cache=True, nogil=True)
def scan_arith(x, A, n, B, is_mul, reverse, out):
    """Inclusive sum (product if ``is_mul``) scan, in NumPy's accumulate order."""
    for a in range(A):
        for t in range(n):
            j = n - 1 - t if reverse else t
            row = (a * n + j) * B
            if t == 0:
                for b in range(B):
                    out[_u(row + b)] = x[_u(row + b)]
                continue
            prev = row + B if reverse else row - B
            if is_mul:
                for b in range(B):
                    out[_u(row + b)] = out[_u(prev + b)] * x[_u(row + b)]
            else:
                for b in range(B):
                    out[_u(row + b)] = out[_u(prev + b)] + x[_u(row + b)]
    return 0


@njit(cache=True, nogil=True)
def scan_minmax(x, A, n, B, is_max, reverse, out):
    """Inclusive max (min) scan with ``np.maximum``'s (``np.minimum``'s) rule."""
    for a in range(A):
        for t in range(n):
            j = n - 1 - t if reverse else t
            row = (a * n + j) * B
            if t == 0:
                for b in range(B):
                    out[_u(row + b)] = x[_u(row + b)]
                continue
            prev = row + B if reverse else row - B
            if is_max:
                for b in range(B):
                    out[_u(row + b)] = _max(out[_u(prev + b)], x[_u(row + b)])
            else:
                for b in range(B):
                    out[_u(row + b)] = _min(out[_u(prev + b)], x[_u(row + b)])
    return 0


@njit(cache=True, nogil=True, inline="always")
def _logaddexp(x, y):
    # NumPy's npy_logaddexp, branch for branch
    if x == y:
        return x + _LOGE2
    tmp = x - y
    if tmp > 0:
        return x + math.log1p(math.exp(-tmp))
    if tmp <= 0:
        return y + math.log1p(math.exp(tmp))
    return tmp


@njit(cache=True, nogil=True, inline="always")
def _logaddexp32(x, y):
    # npy_logaddexpf: float32 throughout (expf, log1pf)
    if x == y:
        return np.float32(x + np.float32(_LOGE2))
    tmp = np.float32(x - y)
    if tmp > 0:
        return np.float32(x + np.float32(math.log1p(np.float32(math.exp(-tmp)))))
    if tmp <= 0:
        return np.float32(y + np.float32(math.log1p(np.float32(math.exp(tmp)))))
    return tmp


@njit(cache=True, nogil=True)
def scan_f16(x, A, n, B, op, reverse, out):
    """Scans (op 0 add, 1 mul, 2 max, 3 min, 4 logaddexp) of float16 values carried as
    float32: every step computes in float32 and rounds to float16, as NumPy's float16
    loops do."""
    for a in range(A):
        for t in range(n):
            j = n - 1 - t if reverse else t
            row = (a * n + j) * B
            if t == 0:
                for b in range(B):
                    out[_u(row + b)] = x[_u(row + b)]
                continue
            prev = row + B if reverse else row - B
            for b in range(B):
                p, v = out[_u(prev + b)], x[_u(row + b)]
                if op == 0:
                    r = f16r(p + v)
                elif op == 1:
                    r = f16r(p * v)
                elif op == 2:
                    r = _max(p, v)
                elif op == 3:
                    r = _min(p, v)
                else:
                    r = f16r(_logaddexp32(p, v))
                out[_u(row + b)] = r
    return 0


@njit(cache=True, nogil=True)
def scan_logaddexp64(x, A, n, B, reverse, out):
    """Inclusive logaddexp scan of float64 values (NumPy's formula)."""
    for a in range(A):
        for t in range(n):
            j = n - 1 - t if reverse else t
            row = (a * n + j) * B
            if t == 0:
                for b in range(B):
                    out[_u(row + b)] = x[_u(row + b)]
                continue
            prev = row + B if reverse else row - B
            for b in range(B):
                out[_u(row + b)] = _logaddexp(out[_u(prev + b)], x[_u(row + b)])
    return 0


@njit(cache=True, nogil=True)
def scan_logaddexp32(x, A, n, B, reverse, out):
    """Inclusive logaddexp scan of float32 values (NumPy's float32 formula)."""
    for a in range(A):
        for t in range(n):
            j = n - 1 - t if reverse else t
            row = (a * n + j) * B
            if t == 0:
                for b in range(B):
                    out[_u(row + b)] = x[_u(row + b)]
                continue
            prev = row + B if reverse else row - B
            for b in range(B):
                out[_u(row + b)] = _logaddexp32(out[_u(prev + b)], x[_u(row + b)])
    return 0
