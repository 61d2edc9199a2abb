"""Hand-written Numba versions of some workloads, as a Numba user would write them: one
``@njit`` function of loops over the arrays, no fastmath, serial unless the benchmark's
thread count is above one (``parallel=True`` then, with ``prange`` on the outer loop).
They give ``run.py``'s "numba" column: the speed a program reaches with no tracing at all,
against which compiled loops are judged (while_ode's target: within 1.3x of it)."""
from __future__ import annotations

import math
import os

import numba
import numpy as np

_PARALLEL = int(os.environ.get("NUMBA_NUM_THREADS", "0") or 0) > 1
prange = numba.prange if _PARALLEL else range


@numba.njit(parallel=_PARALLEL, cache=False)
def elementwise(x):
    out = np.empty_like(x)
    for i in prange(x.size):
        v = x[i]
        out[i] = math.sin(v) * math.cos(v) + math.exp(-v * v) / (1 + v * v)
    return out


@numba.njit(parallel=_PARALLEL, cache=False)
def softmax_rows(x):
    n, m = x.shape
    out = np.empty_like(x)
    for i in prange(n):
        mx = x[i, 0]
        for j in range(1, m):
            mx = max(mx, x[i, j])
        s = np.float32(0.0)
        for j in range(m):
            e = math.exp(x[i, j] - mx)
            out[i, j] = e
            s += e
        for j in range(m):
            out[i, j] /= s
    return out


@numba.njit(cache=False)
def _lorenz(x, y, z):
    return 10.0 * (y - x), x * (28.0 - z) - y, x * y - (8.0 / 3.0) * z


@numba.njit(cache=False)
def while_ode(s, n, dt):
    x, y, z = s[0], s[1], s[2]
    for _ in range(n):
        a1, b1, c1 = _lorenz(x, y, z)
        a2, b2, c2 = _lorenz(x + dt / 2 * a1, y + dt / 2 * b1, z + dt / 2 * c1)
        a3, b3, c3 = _lorenz(x + dt / 2 * a2, y + dt / 2 * b2, z + dt / 2 * c2)
        a4, b4, c4 = _lorenz(x + dt * a3, y + dt * b3, z + dt * c3)
        x = x + dt / 6 * (a1 + 2 * a2 + 2 * a3 + a4)
        y = y + dt / 6 * (b1 + 2 * b2 + 2 * b3 + b4)
        z = z + dt / 6 * (c1 + 2 * c2 + 2 * c3 + c4)
    return np.array([x, y, z])
