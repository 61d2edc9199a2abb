"""Random-bit primitives: the Threefry-2x32 hash (JAX's counter-based PRNG), XLA's
RngBitGenerator, RngUniform and RngNormal.

``threefry2x32(k1, k2, x1, x2)`` hashes 64-bit counters (x1, x2) with the 64-bit key
(k1, k2) by the 20-round Threefry-2x32 of Salmon et al., "Parallel random numbers: as easy
as 1, 2, 3" (SC 2011). All operands are uint32; rank-0 operands broadcast. The key
schedule adds the parity constant 0x1BD11BDA; rotations alternate between
(13, 15, 26, 6) and (17, 29, 16, 24).
"""
from __future__ import annotations

import math

import numpy as np

from tracer import dtypes
from tracer.core import Primitive, ShapedArray, get_aval
from tracer.interpreters import ad, batching
from tracer.interpreters import partial_eval as pe
from lax.utils import canonicalize_shape, check_same_shapes_dtypes

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = 0x1BD11BDA


def threefry2x32(k1, k2, x1, x2):
    """Threefry-2x32 (20 rounds) of counters (x1, x2) under key (k1, k2); all uint32 of
    one shape (rank-0 operands broadcast). Returns the two uint32 output words."""
    return threefry2x32_p.bind(k1, k2, x1, x2)


def _threefry2x32_abstract_eval(*args):
    for a in args:
        if a.dtype != dtypes.uint32:
            raise TypeError(f"threefry2x32: operands must be uint32, got "
                            f"{', '.join(x.str_short() for x in args)}")
    shape = check_same_shapes_dtypes("threefry2x32", args, allow_scalars=True)
    return [ShapedArray(shape, dtypes.uint32)] * 2


def _rotl(x, r):
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def threefry2x32_numpy(k1, k2, x1, x2):
    """The reference hash on NumPy uint32 arrays (wrapping arithmetic)."""
    k1, k2 = np.asarray(k1, np.uint32), np.asarray(k2, np.uint32)
    shape = np.broadcast_shapes(np.shape(k1), np.shape(k2), np.shape(x1), np.shape(x2))
    x = [np.broadcast_to(np.asarray(x1, np.uint32), shape).copy(),
         np.broadcast_to(np.asarray(x2, np.uint32), shape).copy()]
    ks = [k1, k2, k1 ^ k2 ^ np.uint32(_PARITY)]
    with np.errstate(over="ignore"):
        x[0] = x[0] + ks[0]
        x[1] = x[1] + ks[1]
        for i in range(5):
            for r in _ROTATIONS[i % 2]:
                x[0] = x[0] + x[1]
                x[1] = _rotl(x[1], r)
                x[1] = x[0] ^ x[1]
            x[0] = x[0] + ks[(i + 1) % 3]
            x[1] = x[1] + ks[(i + 2) % 3] + np.uint32(i + 1)
    return [x[0].astype(np.uint32), x[1].astype(np.uint32)]


threefry2x32_p = Primitive("threefry2x32")
threefry2x32_p.multiple_results = True
threefry2x32_p.def_abstract_eval(_threefry2x32_abstract_eval)
threefry2x32_p.def_impl(threefry2x32_numpy)
ad.defjvp_zero(threefry2x32_p)
batching.defbroadcasting(threefry2x32_p)


# ------------------------------------ RngBitGenerator -------------------------------------
# The bit streams are XLA's CPU expansion of RngBitGenerator (xla/hlo/builder/lib/prng.cc
# and the RngBitGenerator expander), so the bits and the new state are JAX's on CPU:
#   - the state is u64[2] (Threefry, Philox) or u64[3] (Philox), as the spec says; a
#     u32[4] state (JAX's usual form, no x64 needed) is the u64[2] state bit-cast
#     little-endian: (s0 | s1 << 32, s2 | s3 << 32).
#   - key = state[0]. Threefry's counter is state[1] (64 bits): element i of a 64-bit
#     output is Threefry-2x32(key, counter + i); 32-bit outputs split the shape into two
#     halves (XLA's SplitShapeIntoHalves) and take the two output words of one counter
#     for one element of each half. The new counter is counter + the number of hashes.
#   - Philox's counter is 128 bits: (state[1], state[2]) for u64[3], (state[1], state[0])
#     for u64[2] (the state reversed, as XLA does; the new state keeps the low word).
#     Block i = Philox-4x32-10(key, counter + i) gives 4 words; the output is the word
#     stream (64-bit outputs: consecutive word pairs, low word first).
#   - 8/16-bit outputs are the 32-bit stream truncated (one word per element).
#   - RNG_DEFAULT is Philox (XLA's CPU default).
# Leading dimensions of the state are batch dimensions (how vmap over states works: each
# state gives the bits it gives alone).

class RandomAlgorithm:
    """The algorithm of ``rng_bit_generator`` (``jax.lax.RandomAlgorithm``)."""
    RNG_DEFAULT = 0
    RNG_THREE_FRY = 1
    RNG_PHILOX = 2


_ALGORITHM_NAMES = {0: "RNG_DEFAULT", 1: "RNG_THREE_FRY", 2: "RNG_PHILOX"}


def rng_bit_generator(key, shape, dtype=np.uint32, algorithm=RandomAlgorithm.RNG_DEFAULT):
    """XLA 'RngBitGenerator' (spec: "RngBitGenerator"): ``(new_state, bits)``.

    ``key`` is the generator state: uint64[2] (RNG_THREE_FRY, RNG_PHILOX, RNG_DEFAULT),
    uint64[3] (RNG_PHILOX, RNG_DEFAULT), or uint32[4] (the uint64[2] state as 32-bit
    words, little-endian; works without x64). ``bits`` has ``shape`` and an unsigned
    ``dtype`` (uint8/16/32/64); ``new_state`` has the state's shape and dtype. The bits
    and the new state are those of XLA on CPU (so JAX's ``lax.rng_bit_generator`` on
    CPU), bit for bit; RNG_DEFAULT is Philox-4x32-10 there. Raises TypeError for another
    state shape/dtype or a signed/float ``dtype``, ValueError for an unknown algorithm.
    """
    shape = canonicalize_shape(shape, "rng_bit_generator")
    dtype = np.dtype(dtype)
    return tuple(rng_bit_generator_p.bind(key, shape=shape, dtype=dtype,
                                          algorithm=int(algorithm)))


def _rbg_abstract_eval(key, *, shape, dtype, algorithm):
    if algorithm not in _ALGORITHM_NAMES:
        raise ValueError(f"rng_bit_generator: unknown algorithm {algorithm} (expected "
                         f"lax.RandomAlgorithm.RNG_DEFAULT, RNG_THREE_FRY or RNG_PHILOX)")
    n = key.shape[-1] if key.shape else None
    ok = (key.dtype == dtypes.uint32 and n == 4) or (key.dtype == dtypes.uint64 and (
        n == 2 or (n == 3 and algorithm != RandomAlgorithm.RNG_THREE_FRY)))
    if not ok:
        valid = ("uint64[2] or uint32[4]" if algorithm == RandomAlgorithm.RNG_THREE_FRY
                 else "uint64[2], uint64[3] or uint32[4]")
        raise TypeError(f"rng_bit_generator: the state for {_ALGORITHM_NAMES[algorithm]} "
                        f"must be {valid}, got {key.str_short()}")
    if not dtypes.is_unsigned_integer(dtype):
        raise TypeError(f"rng_bit_generator: dtype must be an unsigned integer type "
                        f"(uint8/16/32/64), got {np.dtype(dtype).name}")
    batch = key.shape[:-1]
    return [ShapedArray(key.shape, key.dtype), ShapedArray(batch + tuple(shape), dtype)]


_PHILOX_M = (0xD2511F53, 0xCD9E8D57)
_PHILOX_W = (0x9E3779B9, 0xBB67AE85)
_M32 = 0xFFFFFFFF
_M64 = (1 << 64) - 1


def philox4x32_numpy(k0, k1, c0, c1, c2, c3):
    """Philox-4x32-10 on uint32 arrays: key (k0, k1), counter words (c0..c3), least
    significant first. Returns the four uint32 output words."""
    k0, k1 = np.uint64(k0), np.uint64(k1)
    c = [np.asarray(x, np.uint32).astype(np.uint64) for x in (c0, c1, c2, c3)]
    mask = np.uint64(_M32)
    for _ in range(10):
        p0 = np.uint64(_PHILOX_M[0]) * c[0]
        p1 = np.uint64(_PHILOX_M[1]) * c[2]
        hi0, lo0 = p0 >> np.uint64(32), p0 & mask
        hi1, lo1 = p1 >> np.uint64(32), p1 & mask
        c = [hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0]
        k0 = (k0 + np.uint64(_PHILOX_W[0])) & mask
        k1 = (k1 + np.uint64(_PHILOX_W[1])) & mask
    return [x.astype(np.uint32) for x in c]


def _words64(ctr):
    """(lo, hi) uint32 words of a uint64 array."""
    return ((ctr & np.uint64(_M32)).astype(np.uint32),
            (ctr >> np.uint64(32)).astype(np.uint32))


def _split_halves(shape):
    """XLA's SplitShapeIntoHalves: the dimension whose halves take a counter's two words
    (the first even one, else the largest)."""
    even = [i for i, d in enumerate(shape) if d % 2 == 0]
    return even[0] if even else max(range(len(shape)), key=lambda i: (shape[i], -i))


def _threefry_stream(key, ctr, shape, dtype, threefry):
    """Bits of one RNG_THREE_FRY call and the number of counters used."""
    k0, k1 = np.uint32(key & _M32), np.uint32(key >> 32)
    if dtype.itemsize == 8:
        n = math.prod(shape)
        lo, hi = _words64(np.arange(n, dtype=np.uint64) + np.uint64(ctr))
        y0, y1 = threefry(k0, k1, lo, hi)
        bits = y0.astype(np.uint64) | (y1.astype(np.uint64) << np.uint64(32))
        return bits.reshape(shape), n
    if not shape:
        lo, hi = _words64(np.array([ctr], np.uint64))
        bits, n = threefry(k0, k1, lo, hi)[0].reshape(()), 1
    else:
        sd = _split_halves(shape)
        half = shape[:sd] + ((shape[sd] + 1) // 2,) + shape[sd + 1:]
        n = math.prod(half)
        lo, hi = _words64(np.arange(n, dtype=np.uint64) + np.uint64(ctr))
        y0, y1 = (y.reshape(half) for y in threefry(k0, k1, lo, hi))
        both = np.stack([y0, y1], axis=sd + 1)
        full = shape[:sd] + (2 * half[sd],) + shape[sd + 1:]
        bits = both.reshape(full)[(slice(None),) * sd + (slice(0, shape[sd]),)]
    return bits.astype(dtype), n


def _philox_stream(key, ctr128, shape, dtype, philox):
    """Bits of one RNG_PHILOX call and the number of 128-bit blocks used."""
    size = math.prod(shape)
    n_words = size * (2 if dtype.itemsize == 8 else 1)
    n_blocks = (n_words + 3) // 4
    lo = np.arange(n_blocks, dtype=np.uint64) + np.uint64(ctr128 & _M64)
    hi = np.full(n_blocks, (ctr128 >> 64) & _M64, np.uint64)
    with np.errstate(over="ignore"):
        hi = hi + (lo < np.uint64(ctr128 & _M64)).astype(np.uint64)  # carry of the add
    words = np.stack(philox(np.uint32(key & _M32), np.uint32(key >> 32),
                            *_words64(lo), *_words64(hi)), axis=1).ravel()[:n_words]
    if dtype.itemsize == 8:
        bits = words.astype(np.uint64)
        bits = bits[0::2] | (bits[1::2] << np.uint64(32))
    else:
        bits = words.astype(dtype)
    return bits.reshape(shape), n_blocks


def rng_bit_generator_reference(state, *, shape, dtype, algorithm,
                                threefry=None, philox=None):
    """``[new_state, bits]`` of RngBitGenerator on a NumPy state (leading dims batch),
    with the hash functions ``threefry(k0, k1, x0, x1)`` / ``philox(k0, k1, c0..c3)`` on
    uint32 arrays (the NumPy ones by default; the compiled path passes Numba's)."""
    threefry = threefry or threefry2x32_numpy
    philox = philox or philox4x32_numpy
    dtype, shape = np.dtype(dtype), tuple(shape)
    state = np.asarray(state)
    batch = state.shape[:-1]
    flat = state.reshape(-1, state.shape[-1])
    new_states = np.empty_like(flat)
    bits = np.empty((flat.shape[0],) + shape, dtype)
    for b, s in enumerate(flat):
        w = [int(x) for x in s]
        u64 = [w[0] | (w[1] << 32), w[2] | (w[3] << 32)] if s.dtype == np.uint32 else w
        if algorithm == RandomAlgorithm.RNG_THREE_FRY:
            bits[b], used = _threefry_stream(u64[0], u64[1], shape, dtype, threefry)
            new = [u64[0], (u64[1] + used) & _M64]
        else:
            hi = u64[2] if len(u64) == 3 else u64[0]
            bits[b], used = _philox_stream(u64[0], u64[1] | (hi << 64), shape, dtype,
                                           philox)
            c = ((u64[1] | (hi << 64)) + used) & ((1 << 128) - 1)
            new = [u64[0], c & _M64] + ([c >> 64] if len(u64) == 3 else [])
        if s.dtype == np.uint32:
            new = [new[0] & _M32, new[0] >> 32, new[1] & _M32, new[1] >> 32]
        new_states[b] = np.array(new, s.dtype)
    return [new_states.reshape(state.shape), bits.reshape(batch + shape)]


def _rbg_impl(key, *, shape, dtype, algorithm):
    return rng_bit_generator_reference(key, shape=shape, dtype=dtype, algorithm=algorithm)


def _rbg_batch(axis_data, vals, dims, *, shape, dtype, algorithm):
    (key,), (d,) = vals, dims
    key = batching.moveaxis(key, d, 0)
    return rng_bit_generator_p.bind(key, shape=shape, dtype=dtype, algorithm=algorithm), [0, 0]


rng_bit_generator_p = Primitive("rng_bit_generator")
rng_bit_generator_p.multiple_results = True
rng_bit_generator_p.def_abstract_eval(_rbg_abstract_eval)
rng_bit_generator_p.def_impl(_rbg_impl)
ad.defjvp_zero(rng_bit_generator_p)
batching.primitive_batchers[rng_bit_generator_p] = _rbg_batch


# ----------------------------------- RngUniform / RngNormal ---------------------------------
# XLA's stateful generators: no key, the backend owns the state. They are effectful (never
# removed by DCE, never constant-folded) and not reproducible across runs unless seeded
# with ``rng_seed``. The spec's operands are scalars; leading dimensions of the operands
# (both of one shape) are batch dimensions, prepended to the output: that is how vmap over
# batched bounds works (each batch element is drawn from its own bounds).

_global_rng = np.random.default_rng()


def rng_seed(seed: int) -> None:
    """Seed the state behind ``rng_uniform`` / ``rng_normal``."""
    global _global_rng
    _global_rng = np.random.default_rng(seed)


def _check_scalar_operands(name, *args):
    avals = [get_aval(x) for x in args]
    if any(a.shape for a in avals):
        raise TypeError(f"{name}: the operands must be scalars, got "
                        f"{', '.join(a.str_short() for a in avals)} (vmap for batches)")


def rng_uniform(a, b, shape):
    """XLA 'RngUniform': samples of U[a, b) (floats) or uniform integers in [a, b) with
    ``a``/``b`` scalars of one dtype. If b <= a the result is a (the spec leaves it
    implementation-defined). Under vmap, batched ``a``/``b`` give each batch element its
    own bounds."""
    import lax
    a, b = lax.utils.promote_weak_scalars("rng_uniform", a, b)
    _check_scalar_operands("rng_uniform", a, b)
    return rng_uniform_p.bind(a, b, shape=canonicalize_shape(shape, "rng_uniform"))


def _rng_uniform_abstract_eval(a, b, *, shape):
    if a.shape != b.shape:
        raise TypeError(f"rng_uniform: a and b must be scalars (or share a batch shape), "
                        f"got {a.str_short()}, {b.str_short()}")
    if a.dtype != b.dtype or a.dtype == dtypes.bool_ or dtypes.is_complex(a.dtype):
        raise TypeError(f"rng_uniform: a and b must share an integer or float dtype, got "
                        f"{a.str_short()}, {b.str_short()}")
    return ShapedArray(a.shape + tuple(shape), a.dtype)


def _rng_uniform_impl(a, b, *, shape):
    out_shape = a.shape + tuple(shape)
    lo, hi = (np.asarray(v).reshape(a.shape + (1,) * len(shape)) for v in (a, b))
    empty = hi <= lo
    if dtypes.is_integer(a.dtype):
        # integers() refuses empty ranges: draw from [lo, lo + 1) there, i.e. lo.
        hi = np.where(empty, lo + np.ones((), a.dtype), hi)
        return _global_rng.integers(lo, hi, size=out_shape, dtype=a.dtype)
    out = _global_rng.uniform(lo.astype(np.float64), hi.astype(np.float64), size=out_shape)
    return np.where(empty, lo, out.astype(a.dtype)).astype(a.dtype)


def _rng_bounds_batch(prim, axis_size, vals, dims, *, shape):
    """Both operands with the batch axis first (an unbatched one broadcast): a batch
    dimension of the operands, so of the output."""
    vals = [batching.bdim_at_front(v, d, axis_size) for v, d in zip(vals, dims)]
    return [prim.bind(*vals, shape=shape)], [0]


rng_uniform_p = Primitive("rng_uniform")
rng_uniform_p.def_abstract_eval(_rng_uniform_abstract_eval)
rng_uniform_p.def_impl(_rng_uniform_impl)
ad.defjvp_zero(rng_uniform_p)
pe.effectful_primitives.add(rng_uniform_p)
batching.primitive_batchers[rng_uniform_p] = (
    lambda axis_data, vals, dims, **p: _rng_bounds_batch(rng_uniform_p, axis_data.size, vals,
                                                         dims, **p))


def rng_normal(mu, sigma, shape):
    """XLA 'RngNormal': samples of N(mu, sigma) with float scalar ``mu``/``sigma``. Under
    vmap, batched ``mu``/``sigma`` give each batch element its own parameters."""
    import lax
    mu, sigma = lax.utils.promote_weak_scalars("rng_normal", mu, sigma)
    _check_scalar_operands("rng_normal", mu, sigma)
    return rng_normal_p.bind(mu, sigma, shape=canonicalize_shape(shape, "rng_normal"))


def _rng_normal_abstract_eval(mu, sigma, *, shape):
    if mu.shape != sigma.shape or mu.dtype != sigma.dtype or not dtypes.is_floating(mu.dtype):
        raise TypeError(f"rng_normal: mu and sigma must be float scalars of one dtype, got "
                        f"{mu.str_short()}, {sigma.str_short()}")
    return ShapedArray(mu.shape + tuple(shape), mu.dtype)


def _rng_normal_impl(mu, sigma, *, shape):
    loc, scale = (np.asarray(v, np.float64).reshape(mu.shape + (1,) * len(shape))
                  for v in (mu, sigma))
    return _global_rng.normal(loc, scale, size=mu.shape + tuple(shape)).astype(mu.dtype)


rng_normal_p = Primitive("rng_normal")
rng_normal_p.def_abstract_eval(_rng_normal_abstract_eval)
rng_normal_p.def_impl(_rng_normal_impl)
ad.defjvp_zero(rng_normal_p)
pe.effectful_primitives.add(rng_normal_p)
batching.primitive_batchers[rng_normal_p] = (
    lambda axis_data, vals, dims, **p: _rng_bounds_batch(rng_normal_p, axis_data.size, vals,
                                                         dims, **p))


# ------------------------------ the normal sampler's erf_inv -------------------------------
# JAX samples normals as sqrt(2) * erf_inv(u). To give the same bits, the inverse error
# function here is the one XLA evaluates: M. Giles, "Approximating the erfinv function"
# (GPU Computing Gems, 2011) -- single precision: two polynomial branches in
# w = -log1p(-x^2); double precision: three -- evaluated by Horner's rule with fused
# multiply-adds (emulated exactly: ``fma_numpy``), w through XLA's own log1p. float64
# gives XLA's bits; float32 agrees to a few ulps (XLA's float32 log is not NumPy's).
# lax.erf_inv remains the more accurate general-purpose function.

_GILES32 = (
    (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
     -0.00125372503, -0.00417768164, 0.246640727, 1.50140941),
    (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
     -0.0076224613, 0.00943887047, 1.00167406, 2.83297682))
_GILES64 = (
    (-3.6444120640178196996e-21, -1.685059138182016589e-19, 1.2858480715256400167e-18,
     1.115787767802518096e-17, -1.333171662854620906e-16, 2.0972767875968561637e-17,
     6.6376381343583238325e-15, -4.0545662729752068639e-14, -8.1519341976054721522e-14,
     2.6335093153082322977e-12, -1.2975133253453532498e-11, -5.4154120542946279317e-11,
     1.051212273321532285e-09, -4.1126339803469836976e-09, -2.9070369957882005086e-08,
     4.2347877827932403518e-07, -1.3654692000834678645e-06, -1.3882523362786468719e-05,
     0.0001867342080340571352, -0.00074070253416626697512, -0.0060336708714301490533,
     0.24015818242558961693, 1.6536545626831027356),
    (2.2137376921775787049e-09, 9.0756561938885390979e-08, -2.7517406297064545428e-07,
     1.8239629214389227755e-08, 1.5027403968909827627e-06, -4.013867526981545969e-06,
     2.9234449089955446044e-06, 1.2475304481671778723e-05, -4.7318229009055733981e-05,
     6.8284851459573175448e-05, 2.4031110387097893999e-05, -0.0003550375203628474796,
     0.00095328937973738049703, -0.0016882755560235047313, 0.0024914420961078508066,
     -0.0037512085075692412107, 0.005370914553590063617, 1.0052589676941592334,
     3.0838856104922207635),
    (-2.7109920616438573243e-11, -2.5556418169965252055e-10, 1.5076572693500548083e-09,
     -3.7894654401267369937e-09, 7.6157012080783393804e-09, -1.4960026627149240478e-08,
     2.9147953450901080826e-08, -6.7711997758452339498e-08, 2.2900482228026654717e-07,
     -9.9298272942317002539e-07, 4.5260625972231537039e-06, -1.9681778105531670567e-05,
     7.5995277030017761139e-05, -0.00021503011930044477347, -0.00013871931833623122026,
     1.0103004648645343977, 4.8499064014085844221))


def _two_sum_numpy(a, b):
    """(s, e): s = fl(a + b), a + b = s + e exactly (Knuth's TwoSum)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _add_round_to_odd_numpy(a, b):
    """float64 a + b rounded to odd (the neighbour with an odd last bit when inexact)."""
    s, e = _two_sum_numpy(a, b)
    odd = (s.view(np.uint64) & np.uint64(1)) == 1
    fix = (e != 0) & ~odd & np.isfinite(s)
    return np.where(fix, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)


def fma_numpy(a, b, c):
    """a * b + c with one rounding (an exact fused multiply-add) on float32/float64 NumPy
    arrays of one dtype. float32: the exact float64 product plus a float64 sum rounded to
    odd, then rounded to float32. float64: Boldo & Melquiond, "Emulation of FMA and
    correctly rounded sums: proved algorithms using rounding to odd" (IEEE Trans.
    Computers 57(4), 2008) -- Dekker's exact product, TwoSum, one sum rounded to odd.
    Exact unless the product's error terms underflow; operands of magnitude >= 2**995 and
    non-finite values take the plain a * b + c. (tracer/random.py builds the same from
    lax operations for uniform's scaling.)"""
    dt = np.result_type(a, b, c)
    with np.errstate(all="ignore"):
        if dt == np.float32:
            a64, b64, c64 = (np.asarray(v, np.float64) for v in (a, b, c))
            return _add_round_to_odd_numpy(a64 * b64, c64).astype(np.float32)
        a, b, c = (np.asarray(v, np.float64) for v in (a, b, c))

        def split(x):
            t = (2.0 ** 27 + 1) * x
            hi = t - (t - x)
            return hi, x - hi
        p = a * b
        (ah, al), (bh, bl) = split(a), split(b)
        ep = ((ah * bh - p) + ah * bl + al * bh) + al * bl
        th, tl = _two_sum_numpy(c, p)
        r = th + _add_round_to_odd_numpy(tl, ep)
        ok = np.isfinite(r) & (np.abs(a) < 2.0 ** 995) & (np.abs(b) < 2.0 ** 995)
        return np.where(ok, r, p + c)


def _horner_fma(coefs, w, dtype, p0=None):
    p = np.full(w.shape, coefs[0], dtype) if p0 is None else p0
    for c in coefs[p0 is None:]:
        p = fma_numpy(p, w, np.full(w.shape, c, dtype))
    return p


# XLA's log1p on CPU (xla/codegen/intrinsic/log1p.cc): log(1 + x) for |x| >= sqrt(2) - 1,
# else Cephes' rational approximation x - x^2/2 + x^3 P(x)/Q(x) (Horner steps fused).
_LOG1P_P = (4.5270000862445199635215E-5, 4.9854102823193375972212E-1,
            6.5787325942061044846969E0, 2.9911919328553073277375E1,
            6.0949667980987787057556E1, 5.7112963590585538103336E1,
            2.0039553499201281259648E1)
_LOG1P_Q = (1., 1.5062909083469192043167E1, 8.3047565967967209469434E1,
            2.2176239823732856465394E2, 3.0909872225312059774938E2,
            2.1642788614495947685003E2, 6.0118660497603843919306E1)


def _log1p_xla(x):
    dt = x.dtype
    zero = np.zeros_like(x)
    x2 = x * x
    ratio = _horner_fma(_LOG1P_P, x, dt, zero) / _horner_fma(_LOG1P_Q, x, dt, zero)
    small = x + (dt.type(-0.5) * x2 + (x * x2) * ratio)
    return np.where(np.abs(x) < dt.type(0.41421356237309504880), small, np.log(x + dt.type(1)))


def _erf_inv_giles_impl(x):
    dt = x.dtype
    if dt not in (np.float32, np.float64):
        raise TypeError(f"erf_inv_giles: float32 or float64 operand required, got {dt}")
    with np.errstate(all="ignore"):
        w = (-_log1p_xla((-x * x).astype(dt))).astype(dt)
        if dt == np.float32:
            a, b = _GILES32
            p = np.where(w < dt.type(5), _horner_fma(a, (w - dt.type(2.5)).astype(dt), dt),
                         _horner_fma(b, (np.sqrt(w) - dt.type(3)).astype(dt), dt))
        else:
            a, b, c = _GILES64
            s = np.sqrt(w)
            p = np.where(w < 6.25, _horner_fma(a, w - 3.125, dt),
                         np.where(w < 16.0, _horner_fma(b, s - 3.25, dt),
                                  _horner_fma(c, s - 5.0, dt)))
        out = (p * x).astype(dt)
        return np.where(np.abs(x) == 1, x * dt.type(np.inf), out).astype(dt)


def erf_inv_giles(x):
    """The inverse error function as XLA computes it (see above); float32/float64."""
    return erf_inv_giles_p.bind(x)


def _erf_inv_giles_jvp(g, ans, x):
    import lax as _lax
    c = _lax.full_like(ans, np.sqrt(np.pi) / 2)
    return _lax.mul(g, _lax.mul(c, _lax.exp(_lax.mul(ans, ans))))


def _erf_inv_giles_abstract_eval(x):
    if x.dtype not in (dtypes.float32, dtypes.float64):
        raise TypeError(f"erf_inv_giles: float32 or float64 operand required, got "
                        f"{x.str_short()}")
    return ShapedArray(x.shape, x.dtype, x.weak_type)


erf_inv_giles_p = Primitive("erf_inv_giles")
erf_inv_giles_p.def_abstract_eval(_erf_inv_giles_abstract_eval)
erf_inv_giles_p.def_impl(_erf_inv_giles_impl)
ad.defjvp(erf_inv_giles_p, _erf_inv_giles_jvp, with_ans=True)
batching.defvectorized(erf_inv_giles_p)
