"""Lowering of the random-bit primitives (lax/random_bits.py): ``threefry2x32`` and
``rng_bit_generator`` as library calls of those kinds, which the backend runs with
compiled hashes (the latter: the NumPy reference's counter layout around them).

``threefry2x32`` has two outputs, so it cannot be an element-wise expression of the fused
kernels (one output each): it is one Numba loop over the broadcast operands. Bits are the
NumPy reference's exactly (wrapping uint32 arithmetic).
"""
from __future__ import annotations

from lax import random_bits as rb
from lowering.rules import lowering_rules


def _threefry_lower(ctx, in_avals, out_avals, *ins):
    return ctx.library_call("threefry2x32 (Numba loop)", "threefry2x32", list(ins), out_avals,
                            out_shape=tuple(out_avals[0].shape))


def _rbg_lower(ctx, in_avals, out_avals, key, *, shape, dtype, algorithm):
    return ctx.library_call("rng_bit_generator (Numba counter stream)",
                            "rng_bit_generator", [key], out_avals, shape=shape,
                            dtype=dtype, algorithm=algorithm)


lowering_rules[rb.threefry2x32_p] = _threefry_lower
lowering_rules[rb.rng_bit_generator_p] = _rbg_lower
