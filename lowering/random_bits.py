"""Lowering of the random-bit primitives (lax/random_bits.py): ``threefry2x32`` and
``rng_bit_generator`` as library calls running numba_backend/random_kernels.py.

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


def _rbg_one(key, shape, dtype, algorithm):
    from numba_backend import random_kernels as rk

    size = int(np.prod(shape, dtype=np.int64))
    nbytes = size * dtype.itemsize
    n_words = (nbytes + 3) // 4
    start = (int(key[2]) << 32) | int(key[3])
    if algorithm == rb.RandomAlgorithm.RNG_PHILOX:
        used = (n_words + 3) // 4
        words = np.empty(4 * used, np.uint32)
        rk.philox_stream(np.uint64(key[0]), np.uint64(key[1]), np.uint64(start), words)
    else:
        used = (n_words + 1) // 2
        words = np.empty(2 * used, np.uint32)
        rk.threefry_stream(np.uint64(key[0]), np.uint64(key[1]), np.uint64(start), words)
    bits = words.view(np.uint8)[:nbytes].view(dtype).reshape(shape)
    new = (start + used) & ((1 << 64) - 1)
    new_key = np.array([key[0], key[1], new >> 32, new & 0xFFFFFFFF], np.uint32)
    return new_key, bits


def rng_bit_generator_call(key, *, shape, dtype, algorithm):
    """rng_bit_generator on a NumPy uint32[..., 4] state (leading dims batch)."""
    dtype = np.dtype(dtype)
    batch = key.shape[:-1]
    keys = key.reshape(-1, 4)
    new_keys = np.empty(keys.shape, np.uint32)
    bits = np.empty((keys.shape[0],) + tuple(shape), dtype)
    for b in range(keys.shape[0]):
        new_keys[b], bits[b] = _rbg_one(keys[b], shape, dtype, algorithm)
    return [new_keys.reshape(key.shape), bits.reshape(batch + tuple(shape))]


def _threefry_lower(ctx, in_avals, out_avals, *ins):
    return ctx.library_call("threefry2x32 (Numba loop)", threefry_call, list(ins), out_avals,
                            out_shape=tuple(out_avals[0].shape))


def _rbg_lower(ctx, in_avals, out_avals, key, *, shape, dtype, algorithm):
    return ctx.library_call("rng_bit_generator (Numba counter stream)",
                            rng_bit_generator_call, [key], out_avals, shape=shape,
                            dtype=dtype, algorithm=algorithm)


lowering_rules[rb.threefry2x32_p] = _threefry_lower
lowering_rules[rb.rng_bit_generator_p] = _rbg_lower
