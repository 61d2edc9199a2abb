"""Numba kernels of the indexing family (lowering/indexing.py): the scatter window loop.

``scatter_windows`` applies update windows to a flat, C-ordered output in order. Window
starts arrive already clamped (CLIP) or with ``keep`` false for dropped windows, and a
kept window lies inside the operand, so every position written is in bounds.
The combiner code is 0 replace, 1 add, 2 sub, 3 mul, 4 min, 5 max. Three kernels (replace;
arithmetic; ordering) so that each dtype only meets operations it has (bool has no
subtraction, complex no ordering); one compiled specialisation per dtype pair.
"""
from __future__ import annotations

import numba_backend._numba  # noqa: F401  (first: Numba the cheap way)
from numba_backend._numba import njit


@njit(cache=True, nogil=True, inline="always")
def _window_position(base, j, strides, win):
    # unravel j over the window shape (row-major) into an operand offset
    pos = base
    for d in range(win.shape[0] - 1, -1, -1):
        pos += (j % win[d]) * strides[d]
        j //= win[d]
    return pos


@njit(cache=True, nogil=True, inline="always")
def _window_base(starts, w, strides):
    base = 0
    for d in range(starts.shape[1]):
        base += starts[w, d] * strides[d]
    return base


@njit(cache=True, nogil=True)
def _scatter_replace(out, strides, starts, keep, rows, win):
    for w in range(starts.shape[0]):
        if keep[w]:
            base = _window_base(starts, w, strides)
            for j in range(rows.shape[1]):
                out[_window_position(base, j, strides, win)] = rows[w, j]
    return 0


@njit(cache=True, nogil=True)
def _scatter_arith(out, strides, starts, keep, rows, win, op):
    for w in range(starts.shape[0]):
        if keep[w]:
            base = _window_base(starts, w, strides)
            for j in range(rows.shape[1]):
                pos = _window_position(base, j, strides, win)
                if op == 1:
                    out[pos] = out[pos] + rows[w, j]
                elif op == 2:
                    out[pos] = out[pos] - rows[w, j]
                else:
                    out[pos] = out[pos] * rows[w, j]
    return 0


@njit(cache=True, nogil=True)
def _scatter_order(out, strides, starts, keep, rows, win, op):
    for w in range(starts.shape[0]):
        if keep[w]:
            base = _window_base(starts, w, strides)
            for j in range(rows.shape[1]):
                pos = _window_position(base, j, strides, win)
                old, new = out[pos], rows[w, j]
                # NaN propagates, like np.minimum / np.maximum (lax.min / lax.max)
                if old != old:
                    continue
                if new != new or (new < old if op == 4 else new > old):
                    out[pos] = new
    return 0


def scatter_windows(out, strides, starts, keep, rows, win, op):
    """Apply ``rows[w]`` (window w's elements, row-major over ``win``) at ``starts[w]`` of
    the flat ``out`` (element ``strides``) for every kept window, combining with ``op``."""
    if op == 0:
        _scatter_replace(out, strides, starts, keep, rows, win)
    elif op <= 3:
        _scatter_arith(out, strides, starts, keep, rows, win, op)
    else:
        _scatter_order(out, strides, starts, keep, rows, win, op)
