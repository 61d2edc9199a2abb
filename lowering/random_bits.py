"""Lowering of the random-bit primitives (lax/random_bits.py): ``threefry2x32`` and
``rng_bit_generator`` as library calls running numba_backend/random_kernels.py (the
latter: the NumPy reference's counter layout around the compiled hashes).

``threefry2x32`` has two outputs, so it cannot be an element-wise expression of the fused
kernels (one output each): it is one Numba loop over the broadcast operands. Bits are the
NumPy reference's exactly (wrapping uint32 arithmetic).
"""
from __future__ import annotations

import numpy as np

from lax import random_bits as rb
from lowering.convolution import readonly_flat
from lowering.rules import lowering_rules


def threefry_call(k1, k2, x1, x2, *, out_shape):
    """threefry2x32 on NumPy uint32 arrays (rank-0 operands broadcast)."""
    from numba_backend.random_kernels import threefry2x32

    n = int(np.prod(out_shape, dtype=np.int64))
    ops = [np.asarray(a, np.uint32) for a in (k1, k2, x1, x2)]
    steps = np.asarray([0 if a.size == 1 else 1 for a in ops], np.int64)
    y0 = np.empty(n, np.uint32)
    y1 = np.empty(n, np.uint32)
    if n:
        threefry2x32(*(readonly_flat(a) for a in ops), steps, y0, y1)
    return [y0.reshape(out_shape), y1.reshape(out_shape)]


def _philox_numba(k0, k1, c0, c1, c2, c3):
    from numba_backend.random_kernels import philox4x32

    outs = [np.empty(np.shape(c0), np.uint32) for _ in range(4)]
    if outs[0].size:
        philox4x32(np.uint32(k0), np.uint32(k1),
                   *(readonly_flat(np.asarray(c, np.uint32)) for c in (c0, c1, c2, c3)),
                   *(o.reshape(-1) for o in outs))
    return outs


def _threefry_numba(k0, k1, x0, x1):
    return threefry_call(k0, k1, x0, x1, out_shape=np.shape(x0))


def rng_bit_generator_call(key, *, shape, dtype, algorithm):
    """rng_bit_generator on a NumPy state (leading dims batch): the reference stream of
    lax/random_bits.py with the hashes compiled."""
    return rb.rng_bit_generator_reference(key, shape=shape, dtype=dtype, algorithm=algorithm,
                                          threefry=_threefry_numba, philox=_philox_numba)


def _threefry_lower(ctx, in_avals, out_avals, *ins):
    return ctx.library_call("threefry2x32 (Numba loop)", threefry_call, list(ins), out_avals,
                            out_shape=tuple(out_avals[0].shape))


def _rbg_lower(ctx, in_avals, out_avals, key, *, shape, dtype, algorithm):
    return ctx.library_call("rng_bit_generator (Numba counter stream)",
                            rng_bit_generator_call, [key], out_avals, shape=shape,
                            dtype=dtype, algorithm=algorithm)


lowering_rules[rb.threefry2x32_p] = _threefry_lower
lowering_rules[rb.rng_bit_generator_p] = _rbg_lower
