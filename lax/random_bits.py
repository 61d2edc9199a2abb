"""Random-bit primitives: the Threefry-2x32 hash (JAX's counter-based PRNG), XLA's
RngBitGenerator, RngUniform and RngNormal.

``threefry2x32(k1, k2, x1, x2)`` hashes 64-bit counters (x1, x2) with the 64-bit key
(k1, k2) by the 20-round Threefry-2x32 of Salmon et al., "Parallel random numbers: as easy
as 1, 2, 3" (SC 2011). All operands are uint32; rank-0 operands broadcast. The key
schedule adds the parity constant 0x1BD11BDA; rotations alternate between
(13, 15, 26, 6) and (17, 29, 16, 24).
"""
from __future__ import annotations

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

class RandomAlgorithm:
    RNG_DEFAULT = 0
    RNG_THREE_FRY = 1
    RNG_PHILOX = 2


def rng_bit_generator(key, shape, dtype=np.uint32, algorithm=RandomAlgorithm.RNG_DEFAULT):
    """XLA 'RngBitGenerator': ``(new_key, bits)`` from a uint32[4] state.

    ``bits`` has ``shape`` and an unsigned ``dtype`` (uint8/16/32/64); the output is a
    deterministic function of the state (the spec does not fix the bit stream across
    backends; here: Threefry-2x32 for RNG_DEFAULT/RNG_THREE_FRY with key = state[0:2] and a
    64-bit counter starting at state[2:4]; Philox-4x32-10 for RNG_PHILOX). The new state
    advances the counter past the words consumed.
    """
    shape = canonicalize_shape(shape, "rng_bit_generator")
    dtype = np.dtype(dtype)
    return rng_bit_generator_p.bind(key, shape=shape, dtype=dtype, algorithm=int(algorithm))


def _rbg_abstract_eval(key, *, shape, dtype, algorithm):
    # Leading dimensions of the state are batch dimensions (how vmap over keys works).
    if key.dtype != dtypes.uint32 or not key.shape or key.shape[-1] != 4:
        raise TypeError(f"rng_bit_generator: the state must be uint32[4], got "
                        f"{key.str_short()}")
    if not dtypes.is_unsigned_integer(dtype):
        raise TypeError(f"rng_bit_generator: dtype must be an unsigned integer type, got "
                        f"{np.dtype(dtype).name}")
    if algorithm not in (0, 1, 2):
        raise ValueError(f"rng_bit_generator: unknown algorithm {algorithm}")
    batch = key.shape[:-1]
    return [ShapedArray(key.shape, dtypes.uint32), ShapedArray(batch + tuple(shape), dtype)]


_PHILOX_M = (0xD2511F53, 0xCD9E8D57)
_PHILOX_W = (0x9E3779B9, 0xBB67AE85)


def _philox4x32(key, ctr):
    """Philox-4x32-10 on uint32 arrays: key (k0, k1), counters (c0..c3)."""
    k0, k1 = (np.asarray(k, np.uint64) for k in key)
    c = [np.asarray(x, np.uint64) for x in ctr]
    mask = np.uint64(0xFFFFFFFF)
    for _ in range(10):
        p0 = np.uint64(_PHILOX_M[0]) * c[0]
        p1 = np.uint64(_PHILOX_M[1]) * c[2]
        hi0, lo0 = p0 >> np.uint64(32), p0 & mask
        hi1, lo1 = p1 >> np.uint64(32), p1 & mask
        c = [(hi1 ^ c[1] ^ k1) & mask, lo1, (hi0 ^ c[3] ^ k0) & mask, lo0]
        k0 = (k0 + np.uint64(_PHILOX_W[0])) & mask
        k1 = (k1 + np.uint64(_PHILOX_W[1])) & mask
    return [x.astype(np.uint32) for x in c]


def _rbg_impl(key, *, shape, dtype, algorithm):
    if key.ndim > 1:
        outs = [_rbg_impl(k, shape=shape, dtype=dtype, algorithm=algorithm)
                for k in key.reshape(-1, 4)]
        batch = key.shape[:-1]
        return [np.stack([o[0] for o in outs]).reshape(key.shape),
                np.stack([o[1] for o in outs]).reshape(batch + tuple(shape))]
    dtype = np.dtype(dtype)
    size = int(np.prod(shape, dtype=np.int64))
    nbytes = size * dtype.itemsize
    n_words = (nbytes + 3) // 4
    start = (int(key[2]) << 32) | int(key[3])
    if algorithm == RandomAlgorithm.RNG_PHILOX:
        n_blocks = (n_words + 3) // 4
        ctr = np.arange(n_blocks, dtype=np.uint64) + np.uint64(start)
        lo = (ctr & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        hi = (ctr >> np.uint64(32)).astype(np.uint32)
        zeros = np.zeros_like(lo)
        words = np.stack(_philox4x32((key[0], key[1]), (lo, hi, zeros, zeros)), axis=1).ravel()
        used = n_blocks
    else:
        n_pairs = (n_words + 1) // 2
        ctr = np.arange(n_pairs, dtype=np.uint64) + np.uint64(start)
        lo = (ctr & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        hi = (ctr >> np.uint64(32)).astype(np.uint32)
        y0, y1 = threefry2x32_numpy(key[0], key[1], hi, lo)
        words = np.stack([y0, y1], axis=1).ravel()
        used = n_pairs
    words = words[:n_words]
    bits = np.frombuffer(words.tobytes()[:nbytes], dtype=dtype).reshape(shape)
    new = (start + used) & ((1 << 64) - 1)
    new_key = np.array([key[0], key[1], new >> 32, new & 0xFFFFFFFF], np.uint32)
    return [new_key, bits.copy()]


def _rbg_batch(axis_size, vals, dims, *, shape, dtype, algorithm):
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
# with ``rng_seed``.

_global_rng = np.random.default_rng()


def rng_seed(seed: int) -> None:
    """Seed the state behind ``rng_uniform`` / ``rng_normal``."""
    global _global_rng
    _global_rng = np.random.default_rng(seed)


def rng_uniform(a, b, shape):
    """XLA 'RngUniform': samples of U[a, b) (floats) or uniform integers in [a, b) with
    ``a``/``b`` scalars of one dtype. If b <= a the result is a (the spec leaves it
    implementation-defined)."""
    import lax
    a, b = lax.utils.promote_weak_scalars("rng_uniform", a, b)
    return rng_uniform_p.bind(a, b, shape=canonicalize_shape(shape, "rng_uniform"))


def _rng_uniform_abstract_eval(a, b, *, shape):
    if a.shape or b.shape:
        raise TypeError(f"rng_uniform: a and b must be scalars, got {a.str_short()}, "
                        f"{b.str_short()}")
    if a.dtype != b.dtype or a.dtype == dtypes.bool_ or dtypes.is_complex(a.dtype):
        raise TypeError(f"rng_uniform: a and b must share an integer or float dtype, got "
                        f"{a.str_short()}, {b.str_short()}")
    return ShapedArray(shape, a.dtype)


def _rng_uniform_impl(a, b, *, shape):
    if b <= a:
        return np.full(shape, a, a.dtype)
    if dtypes.is_integer(a.dtype):
        return _global_rng.integers(int(a), int(b), size=shape).astype(a.dtype)
    return _global_rng.uniform(float(a), float(b), size=shape).astype(a.dtype)


rng_uniform_p = Primitive("rng_uniform")
rng_uniform_p.def_abstract_eval(_rng_uniform_abstract_eval)
rng_uniform_p.def_impl(_rng_uniform_impl)
ad.defjvp_zero(rng_uniform_p)
pe.effectful_primitives.add(rng_uniform_p)


def rng_normal(mu, sigma, shape):
    """XLA 'RngNormal': samples of N(mu, sigma) with float scalar ``mu``/``sigma``."""
    import lax
    mu, sigma = lax.utils.promote_weak_scalars("rng_normal", mu, sigma)
    return rng_normal_p.bind(mu, sigma, shape=canonicalize_shape(shape, "rng_normal"))


def _rng_normal_abstract_eval(mu, sigma, *, shape):
    if mu.shape or sigma.shape or mu.dtype != sigma.dtype or not dtypes.is_floating(mu.dtype):
        raise TypeError(f"rng_normal: mu and sigma must be float scalars of one dtype, got "
                        f"{mu.str_short()}, {sigma.str_short()}")
    return ShapedArray(shape, mu.dtype)


rng_normal_p = Primitive("rng_normal")
rng_normal_p.def_abstract_eval(_rng_normal_abstract_eval)
rng_normal_p.def_impl(lambda mu, sigma, *, shape: _global_rng.normal(
    float(mu), float(sigma), size=shape).astype(mu.dtype))
ad.defjvp_zero(rng_normal_p)
pe.effectful_primitives.add(rng_normal_p)


# ------------------------------ the normal sampler's erf_inv -------------------------------
# JAX samples normals as sqrt(2) * erf_inv(u). To give the same bits, the inverse error
# function here is the one XLA evaluates: M. Giles, "Approximating the erfinv function"
# (GPU Computing Gems, 2011) -- single precision: two polynomial branches in
# w = -log1p(-x^2); double precision: three -- evaluated by Horner's rule with fused
# multiply-adds (emulated: float32 steps in float64, float64 steps in long double).
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


def _horner_fma(coefs, w, dtype):
    wide = np.float64 if dtype == np.float32 else np.longdouble
    ww = w.astype(wide)
    p = np.full(w.shape, coefs[0], dtype)
    for c in coefs[1:]:
        p = (p.astype(wide) * ww + wide(dtype.type(c))).astype(dtype)
    return p


def _erf_inv_giles_impl(x):
    dt = x.dtype
    if dt not in (np.float32, np.float64):
        raise TypeError(f"erf_inv_giles: float32 or float64 operand required, got {dt}")
    with np.errstate(all="ignore"):
        w = (-np.log1p(-x * x)).astype(dt)
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
ad.defjvp2(erf_inv_giles_p, _erf_inv_giles_jvp)
batching.defvectorized(erf_inv_giles_p)
