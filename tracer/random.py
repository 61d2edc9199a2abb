"""Counter-based pseudo-random numbers with explicit keys (``jax.random``).

Keys are uint32 arrays of shape (2,) (JAX's "raw" keys, as made by ``PRNGKey``): plain
arrays that jit, vmap and scan carry like any other value. ``key`` returns the same raw
key (JAX's typed key arrays are not implemented; ``key_data``/``wrap_key_data`` are
identities). The same key always gives the same numbers, eagerly, under jit and under
vmap; reusing a key is allowed (and gives the same numbers again) — split it for fresh
randomness.

The bit streams are JAX's default ones (Threefry-2x32, "partitionable" counters): key,
split, fold_in, bits, uniform, normal, randint, bernoulli, permutation, choice and
categorical reproduce JAX's outputs on CPU bit for bit for the same seed, shapes and
dtypes (tests/data/random_jax_*.json). uniform emulates the fused multiply-add XLA uses
for its scaling exactly; normal uses XLA's erf_inv and log1p approximations -- float64
normals are bit for bit, float32 ones within 3 ulps (XLA's float32 log is not NumPy's).
Samplers built on other transcendental functions (exponential, gumbel, logistic,
laplace, cauchy, truncated_normal, ...) follow JAX's formulas but inherit NumPy's
elementary functions, so they may differ from JAX in the last bits. gamma, beta and
dirichlet use their own rejection sampler: same distributions, different streams.
"""
from __future__ import annotations

import math
import operator

import numpy as np

import lax
from tracer import dtypes
from tracer.core import Array, Tracer, get_aval
from tracer.config import config
import tracer.numpy as tnp

UINT_DTYPES = {8: dtypes.uint8, 16: dtypes.uint16, 32: dtypes.uint32, 64: dtypes.uint64}


# ---------------------------------------- keys ----------------------------------------------

def _check_key(name, key):
    try:
        aval = get_aval(key)
    except TypeError:
        raise TypeError(f"random.{name}: expected a PRNG key (uint32 array of shape (2,), "
                        f"from random.PRNGKey / random.key / random.split), got "
                        f"{type(key).__name__}") from None
    if aval.dtype != dtypes.uint32 or aval.shape != (2,):
        raise TypeError(f"random.{name}: expected a PRNG key (uint32 array of shape (2,), "
                        f"from random.PRNGKey / random.key / random.split), got "
                        f"{aval.str_short()}" + (
                            "; for a batch of keys use vmap" if aval.dtype == dtypes.uint32
                            and aval.shape[-1:] == (2,) else ""))
    if not isinstance(key, (Array, Tracer)):
        key = Array(np.asarray(key, np.uint32))
    return key


def _seed_words(seed):
    """(hi, lo) uint32 words of an integer seed: a 64-bit seed is bit-cast into two words;
    without x64 the seed is an int32 and hi is 0 (as in JAX)."""
    if isinstance(seed, (bool, np.bool_)) or (hasattr(seed, "dtype") and
                                               not dtypes.is_integer(np.dtype(seed.dtype))):
        raise TypeError(f"PRNG key seed must be an integer; got {seed!r}")
    if isinstance(seed, (int, np.integer)):
        s = int(seed)
        if config.enable_x64:
            if not -2 ** 63 <= s < 2 ** 64:
                raise OverflowError(f"PRNG key seed {s} does not fit in 64 bits")
            u = s & (2 ** 64 - 1)
            return (Array(np.asarray(u >> 32, np.uint32)),
                    Array(np.asarray(u & 0xFFFFFFFF, np.uint32)))
        if not -2 ** 31 <= s < 2 ** 32:
            raise OverflowError(f"PRNG key seed {s} does not fit in 32 bits (enable x64 for "
                                "64-bit seeds)")
        return Array(np.asarray(0, np.uint32)), Array(np.asarray(s & 0xFFFFFFFF, np.uint32))
    aval = get_aval(seed)
    if aval.shape:
        raise TypeError(f"PRNG key seed must be a scalar; got shape {aval.shape} (use vmap "
                        "to make a batch of keys)")
    if not dtypes.is_integer(aval.dtype):
        raise TypeError(f"PRNG key seed must be an integer; got {aval.str_short()}")
    if aval.dtype.itemsize == 8:
        u = lax.convert_element_type(seed, dtypes.uint64) if dtypes.is_signed_integer(
            aval.dtype) else seed
        hi = lax.convert_element_type(lax.shift_right_logical(u, lax.full((), 32, u.dtype)),
                                      dtypes.uint32)
        lo = lax.convert_element_type(lax.bitwise_and(u, lax.full((), 0xFFFFFFFF, u.dtype)),
                                      dtypes.uint32)
        return hi, lo
    lo = lax.convert_element_type(seed, dtypes.uint32) if aval.dtype.itemsize == 4 else \
        lax.convert_element_type(lax.convert_element_type(seed, dtypes.int32), dtypes.uint32)
    return lax.full((), 0, dtypes.uint32), lo


def PRNGKey(seed, *, impl=None):
    """A PRNG key from an integer seed: uint32[2] = the seed's 64 bits as (hi, lo)
    (``jax.random.PRNGKey``, threefry2x32). Raises TypeError for non-integer or non-scalar
    seeds."""
    if impl not in (None, "threefry2x32"):
        raise ValueError(f"random.PRNGKey: only impl='threefry2x32' is supported, got {impl!r}")
    if np.ndim(seed) if not isinstance(seed, (Array, Tracer)) else get_aval(seed).ndim:
        raise TypeError(f"random.PRNGKey accepts a scalar seed, got an array of shape "
                        f"{np.shape(seed)}; use vmap for batching")
    hi, lo = _seed_words(seed)
    return lax.concatenate([lax.reshape(hi, (1,)), lax.reshape(lo, (1,))], 0)


def key(seed, *, impl=None):
    """``jax.random.key``: here the same raw uint32[2] key as ``PRNGKey``."""
    return PRNGKey(seed, impl=impl)


def key_data(keys):
    """The uint32 data of keys: keys are raw data here, so this is the identity."""
    return keys


def wrap_key_data(key_bits_array, *, impl=None):
    """Keys from their uint32 data: the identity (keys are raw data)."""
    return key_bits_array


def _key_words(key):
    return lax.index_in_dim(key, 0, 0, False), lax.index_in_dim(key, 1, 0, False)


def _iota_2x32(shape):
    """The flat index of each position of ``shape`` as a 64-bit counter (hi, lo words)."""
    size = math.prod(shape)
    if size >= 2 ** 32:
        raise NotImplementedError(f"random: sampling {size} >= 2**32 values at once")
    lo = lax.reshape(lax.iota(dtypes.uint32, size), shape)
    return lax.full((), 0, dtypes.uint32), lo


def _threefry_bits(key, shape):
    k1, k2 = _key_words(key)
    hi, lo = _iota_2x32(shape)
    return lax.threefry2x32(k1, k2, hi, lo)


def split(key, num=2):
    """Split a key into ``num`` new keys (an int or a shape), shape (*num, 2)."""
    key = _check_key("split", key)
    shape = (operator.index(num),) if not isinstance(num, (tuple, list)) else \
        tuple(operator.index(n) for n in num)
    if any(n < 0 for n in shape):
        raise ValueError(f"random.split: num must be non-negative, got {num}")
    b1, b2 = _threefry_bits(key, shape)
    return lax.concatenate([lax.expand_dims(b1, (len(shape),)),
                            lax.expand_dims(b2, (len(shape),))], len(shape))


def fold_in(key, data):
    """A new key from ``key`` and a 32-bit integer ``data``."""
    key = _check_key("fold_in", key)
    if np.ndim(data) if not isinstance(data, (Array, Tracer)) else get_aval(data).ndim:
        raise TypeError(f"random.fold_in: data must be a scalar, got shape {np.shape(data)}")
    d = tnp.asarray(data, dtype=dtypes.uint32)    # as JAX: Python ints must fit in uint32
    k1, k2 = _key_words(key)
    y1, y2 = lax.threefry2x32(k1, k2, lax.full((), 0, dtypes.uint32), d)
    return lax.concatenate([lax.reshape(y1, (1,)), lax.reshape(y2, (1,))], 0)


def _shape(shape, name):
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    try:
        out = tuple(operator.index(s) for s in shape)
    except TypeError:
        raise TypeError(f"random.{name}: shape must be a tuple of ints, got {shape!r}") from None
    if any(d < 0 for d in out):
        raise ValueError(f"random.{name}: shape {out} has a negative dimension")
    return out


def _random_bits(key, bit_width, shape):
    b1, b2 = _threefry_bits(key, shape)
    dt = UINT_DTYPES[bit_width]
    if bit_width == 64:
        hi = lax.convert_element_type(b1, dt)
        lo = lax.convert_element_type(b2, dt)
        return lax.bitwise_or(lax.shift_left(hi, lax.full((), 32, dt)), lo)
    x = lax.bitwise_xor(b1, b2)
    return x if bit_width == 32 else lax.convert_element_type(x, dt)


def bits(key, shape=(), dtype=None):
    """Uniform random bits of an unsigned ``dtype`` (default uint64 with x64, else
    uint32)."""
    key = _check_key("bits", key)
    dt = dtypes.default_uint_dtype() if dtype is None else dtypes.canonicalize_dtype(dtype)
    if not dtypes.is_unsigned_integer(dt):
        raise ValueError(f"random.bits: dtype must be an unsigned int dtype, got {dt.name}")
    return _random_bits(key, dt.itemsize * 8, _shape(shape, "bits"))


def _float_dtype(dtype, name):
    dt = dtypes.default_float_dtype() if dtype is None else dtypes.canonicalize_dtype(dtype)
    if not dtypes.is_floating(dt):
        raise TypeError(f"random.{name} only accepts floating point dtypes, got {dt.name}")
    return dt


# --- the fused multiply-add of uniform's scaling ---
# XLA on CPU fuses uniform's ``floats * (maxval - minval) + minval`` into one fused
# multiply-add for float32 and float64 (float16 is computed op by op, each op rounded).
# NumPy has no fma, so to give JAX's bits it is emulated exactly with lax operations.
# float32: the float64 product is exact and TwoSum gives the float64 sum s with its
# error e; rounding s to float32 is the correct rounding of s + e except when s is
# exactly halfway between two float32 values and e != 0 (then e's sign decides).
# float64: Boldo & Melquiond, "Emulation of FMA and correctly rounded sums: proved
# algorithms using rounding to odd" (IEEE Trans. Computers 57(4), 2008): Dekker's exact
# product, Knuth's TwoSum, one addition rounded to odd. Exact while the product's error
# terms do not underflow; spans of magnitude >= 2**995 (the splitting would overflow) and
# non-finite values take the plain ``a * b + c``.

def _two_sum(a, b):
    """(s, e) with s = fl(a + b) and a + b = s + e exactly (Knuth)."""
    s = lax.add(a, b)
    bb = lax.sub(s, a)
    return s, lax.add(lax.sub(a, lax.sub(s, bb)), lax.sub(b, bb))


def _two_prod(a, b):
    """(p, e) with p = fl(a * b) and a * b = p + e exactly (Dekker, Veltkamp splitting);
    float64."""
    def split(x):
        t = lax.mul(lax.full_like(x, 2.0 ** 27 + 1), x)
        hi = lax.sub(t, lax.sub(t, x))
        return hi, lax.sub(x, hi)
    p = lax.mul(a, b)
    (ah, al), (bh, bl) = split(a), split(b)
    e = lax.add(lax.add(lax.add(lax.sub(lax.mul(ah, bh), p), lax.mul(ah, bl)),
                        lax.mul(al, bh)), lax.mul(al, bl))
    return p, e


def _add_round_to_odd(a, b):
    """float64 a + b rounded to odd: the neighbour with an odd last bit when inexact."""
    s, e = _two_sum(a, b)
    u64 = dtypes.uint64
    even = lax.eq(lax.bitwise_and(lax.bitcast_convert_type(s, u64), lax.full((), 1, u64)),
                  lax.full((), 0, u64))
    inf, zero = lax.full_like(s, np.inf), lax.full_like(s, 0)
    toward = lax.next_after(s, lax.select(lax.gt(e, zero), inf, lax.neg(inf)))
    inexact = lax.bitwise_and(lax.ne(e, zero), lax.is_finite(s))
    return lax.select(lax.bitwise_and(inexact, even), toward, s)


def _fma32(a, b, c):
    # float64 values made by conversion: lax.full would give float32 without x64.
    f64 = lambda v: lax.convert_element_type_p.bind(v, new_dtype=dtypes.float64,
                                                    weak_type=False)
    s, e = _two_sum(lax.mul(f64(a), f64(b)), f64(c))
    r = lax.convert_element_type(s, dtypes.float32)
    back = f64(r)
    inf = lax.full_like(r, np.inf)
    other = lax.next_after(r, lax.select(lax.lt(back, s), inf, lax.neg(inf)))
    tie = lax.bitwise_and(lax.ne(back, s), lax.eq(lax.add(f64(other), back), lax.add(s, s)))
    zero = f64(lax.full_like(r, 0))
    fixed = lax.select(lax.gt(e, zero), lax.max(r, other), lax.min(r, other))
    return lax.select(lax.bitwise_and(tie, lax.ne(e, zero)), fixed, r)


def _fma64(a, b, c):
    uh, ul = _two_prod(a, b)
    th, tl = _two_sum(c, uh)
    r = lax.add(th, _add_round_to_odd(tl, ul))
    ok = lax.bitwise_and(lax.is_finite(r), lax.lt(lax.abs(b), lax.full_like(b, 2.0 ** 995)))
    return lax.select(ok, r, lax.add(lax.mul(a, b), c))


def _fma_emulated(a, b, c):
    """RN(a * b + c) with one rounding, for float32 or float64 operands of one shape."""
    return (_fma32 if get_aval(a).dtype == dtypes.float32 else _fma64)(a, b, c)


def _fma(a, b, c):
    """a * b + c rounded once (see above); differentiable as a * b + c."""
    from tracer.custom_derivatives import custom_jvp
    f = custom_jvp(_fma_emulated)

    @f.defjvp
    def _fma_jvp(primals, tangents):
        (x, y, z), (dx, dy, dz) = primals, tangents
        return f(x, y, z), lax.add(lax.add(lax.mul(dx, y), lax.mul(x, dy)), dz)
    return f(a, b, c)


def _uniform(key, shape, dt, minval, maxval):
    # JAX's construction: random mantissa bits under the exponent of 1.0 give a float in
    # [1, 2); minus 1, scaled by (maxval - minval) (one fused multiply-add in XLA, except
    # float16), plus minval, and clamped below at minval.
    finfo = np.finfo(dt)
    nbits, nmant = finfo.bits, finfo.nmant
    rng_bits = 8 if nmant < 8 else nbits
    b = _random_bits(key, rng_bits, shape)
    udt = UINT_DTYPES[nbits]
    if rng_bits != nbits:
        b = lax.convert_element_type(b, udt)
    fb = lax.shift_right_logical(b, lax.full((), rng_bits - nmant, udt))
    one_bits = np.array(1.0, dt).view(udt)
    fb = lax.bitwise_or(fb, lax.full((), one_bits, udt))
    floats = lax.sub(lax.bitcast_convert_type(fb, dt), lax.full((), 1.0, dt))
    minval = lax.broadcast_to_rank(lax.convert_element_type(tnp.asarray(minval), dt), len(shape))
    maxval = lax.broadcast_to_rank(lax.convert_element_type(tnp.asarray(maxval), dt), len(shape))
    from tracer.numpy.util import broadcast_to_shape
    mn, mx = broadcast_to_shape(minval, shape), broadcast_to_shape(maxval, shape)
    span = lax.sub(mx, mn)
    if dt in (dtypes.float32, dtypes.float64):
        scaled = _fma(floats, span, mn)
    else:
        scaled = lax.add(lax.mul(floats, span), mn)
    return lax.max(mn, scaled)


def _check_param_shape(name, shape, *params):
    for p in params:
        ps = np.shape(p) if not isinstance(p, (Array, Tracer)) else get_aval(p).shape
        try:
            if np.broadcast_shapes(shape, ps) != tuple(shape):
                raise ValueError
        except ValueError:
            raise ValueError(f"random.{name}: parameter shape {ps} is incompatible with the "
                             f"requested shape {tuple(shape)}") from None


def uniform(key, shape=(), dtype=None, minval=0.0, maxval=1.0):
    """Samples of U[minval, maxval) (``jax.random.uniform``)."""
    key = _check_key("uniform", key)
    dt = _float_dtype(dtype, "uniform")
    shape = _shape(shape, "uniform")
    _check_param_shape("uniform", shape, minval, maxval)
    return _uniform(key, shape, dt, minval, maxval)


def _erf_inv(x):
    # XLA's erf_inv (what JAX's samplers use), for the same bits as JAX; XLA computes
    # the low-precision floats' in float32 and rounds once.
    dt = x.aval.dtype if hasattr(x, "aval") else np.asarray(x).dtype
    if dtypes.is_lowp(dt):
        wide = lax.random_bits.erf_inv_giles(lax.convert_element_type(x, np.float32))
        return lax.convert_element_type(wide, dt)
    return lax.random_bits.erf_inv_giles(x)


def _normal_real(key, shape, dt):
    lo = np.nextafter(np.array(-1.0, dt), np.array(0.0, dt))
    u = _uniform(key, shape, dt, lo, 1.0)
    return lax.mul(lax.full((), np.sqrt(2), dt), _erf_inv(u))


def normal(key, shape=(), dtype=None):
    """Standard normal samples (inverse-CDF of a uniform, as JAX); complex dtypes give
    circular complex normals."""
    key = _check_key("normal", key)
    dt = dtypes.default_float_dtype() if dtype is None else dtypes.canonicalize_dtype(dtype)
    shape = _shape(shape, "normal")
    if dtypes.is_complex(dt):
        rdt = dtypes.real_dtype(dt)
        kr, ki = split(key)
        re = _normal_real(kr, shape, rdt)
        im = _normal_real(ki, shape, rdt)
        return lax.div(lax.complex(re, im), lax.full((), np.sqrt(2), dt))
    if not dtypes.is_floating(dt):
        raise TypeError(f"random.normal only accepts floating point dtypes, got {dt.name}")
    return _normal_real(key, shape, dt)


def _clip_int(val, dt):
    vdt = get_aval(val).dtype
    lo = max(dtypes.iinfo(dt).min, dtypes.iinfo(vdt).min)
    hi = min(dtypes.iinfo(dt).max, dtypes.iinfo(vdt).max)
    return lax.convert_element_type(lax.clamp(lax.full((), lo, vdt), val,
                                              lax.full((), hi, vdt)), dt)


def randint(key, shape, minval, maxval, dtype=None):
    """Uniform integers in [minval, maxval) (``jax.random.randint``: 2*nbits random bits
    reduced modulo the span; maxval <= minval gives minval)."""
    key = _check_key("randint", key)
    dt = dtypes.default_int_dtype() if dtype is None else dtypes.canonicalize_dtype(dtype)
    if not dtypes.is_integer(dt):
        raise TypeError(f"random.randint only accepts integer dtypes, got {dt.name}")
    shape = _shape(shape, "randint")
    _check_param_shape("randint", shape, minval, maxval)
    mn, mx = tnp.asarray(minval), tnp.asarray(maxval)
    if not dtypes.is_integer(get_aval(mn).dtype):
        mn = lax.convert_element_type(mn, dtypes.default_int_dtype())
    if not dtypes.is_integer(get_aval(mx).dtype):
        mx = lax.convert_element_type(mx, dtypes.default_int_dtype())
    mxdt = get_aval(mx).dtype
    max_in_mx = _clip_int(Array(np.asarray(dtypes.iinfo(dt).max, dt)), mxdt)
    out_of_range = lax.gt(mx, max_in_mx)
    mn = lax.broadcast_to_rank(_clip_int(mn, dt), len(shape))
    mx_c = lax.broadcast_to_rank(_clip_int(mx, dt), len(shape))
    out_of_range = lax.broadcast_to_rank(out_of_range, len(shape))
    nbits = dtypes.iinfo(dt).bits
    k1, k2 = split(key)
    higher = _random_bits(k1, nbits, shape)
    lower = _random_bits(k2, nbits, shape)
    udt = UINT_DTYPES[nbits]
    from tracer.numpy.util import broadcast_to_shape
    mn, mx_c = broadcast_to_shape(mn, shape), broadcast_to_shape(mx_c, shape)
    out_of_range = broadcast_to_shape(out_of_range, shape)
    span = lax.convert_element_type(lax.sub(mx_c, mn), udt)
    span = lax.select(lax.le(mx_c, mn), lax.full_like(span, 1), span)
    span = lax.select(lax.bitwise_and(out_of_range, lax.gt(mx_c, mn)),
                      lax.add(span, lax.full((), 1, udt)), span)
    mult = lax.rem(lax.full_like(span, 2 ** (nbits // 2)), span)
    mult = lax.rem(lax.mul(mult, mult), span)
    off = lax.add(lax.mul(lax.rem(higher, span), mult), lax.rem(lower, span))
    off = lax.rem(off, span)
    return lax.add(mn, lax.convert_element_type(off, dt))


def bernoulli(key, p=0.5, shape=None):
    """Boolean samples, True with probability ``p`` (``uniform < p``)."""
    key = _check_key("bernoulli", key)
    p = tnp.asarray(p)
    if not dtypes.is_floating(get_aval(p).dtype):
        p = lax.convert_element_type(p, dtypes.default_float_dtype())
    shape = get_aval(p).shape if shape is None else _shape(shape, "bernoulli")
    _check_param_shape("bernoulli", shape, p)
    from tracer.numpy.util import broadcast_to_shape
    return lax.lt(_uniform(key, shape, get_aval(p).dtype, 0.0, 1.0), broadcast_to_shape(p, shape))


def _sort_key_val(keys, vals, axis):
    return lax.sort_key_val(keys, vals, axis)


def _shuffle(key, x, axis):
    # Sort by fresh 32-bit random keys, repeated enough rounds that key collisions are
    # negligible (the heuristic of JAX/TensorFlow: ceil(3 ln n / ln(2**32 - 1)) rounds).
    size = get_aval(x).size
    rounds = int(np.ceil(3 * np.log(max(1, size)) / np.log(dtypes.iinfo(np.uint32).max)))
    for _ in range(rounds):
        key, sub = split(key)
        sort_keys = _random_bits(sub, 32, get_aval(x).shape)
        _, x = _sort_key_val(sort_keys, x, axis)
    return x


def permutation(key, x, axis=0, independent=False):
    """A random permutation of ``arange(x)`` (int ``x``) or of ``x`` along ``axis``."""
    key = _check_key("permutation", key)
    if isinstance(x, (int, np.integer)):
        if x < 0:
            raise ValueError(f"random.permutation: x must be non-negative, got {x}")
        return _shuffle(key, lax.iota(dtypes.default_int_dtype(), int(x)), 0)
    x = tnp.asarray(x)
    aval = get_aval(x)
    if aval.ndim == 0:
        raise TypeError("random.permutation: x must be an integer or at least 1-D")
    axis = axis % aval.ndim
    if independent or aval.ndim == 1:
        return _shuffle(key, x, axis)
    ind = _shuffle(key, lax.iota(dtypes.default_int_dtype(), aval.shape[axis]), 0)
    return tnp.take(x, ind, axis=axis)


def shuffle(key, x, axis=0):
    """Deprecated in JAX; same as ``permutation(key, x, axis, independent=True)``."""
    return permutation(key, x, axis, independent=True)


def gumbel(key, shape=(), dtype=None, mode="low"):
    """Standard Gumbel samples: -log(-log(U)), U uniform on [tiny, 1)."""
    key = _check_key("gumbel", key)
    dt = _float_dtype(dtype, "gumbel")
    shape = _shape(shape, "gumbel")
    u = _uniform(key, shape, dt, np.finfo(dt).tiny, 1.0)
    return lax.neg(lax.log(lax.neg(lax.log(u))))


def categorical(key, logits, axis=-1, shape=None, replace=True):
    """Samples of category indices with probabilities softmax(logits) along ``axis`` (the
    Gumbel-max trick, as JAX)."""
    key = _check_key("categorical", key)
    logits = tnp.asarray(logits)
    laval = get_aval(logits)
    axis = axis % laval.ndim if laval.ndim else 0
    batch_shape = tuple(d for i, d in enumerate(laval.shape) if i != axis)
    if shape is None:
        shape = batch_shape
    else:
        shape = _shape(shape, "categorical")
        if shape[len(shape) - len(batch_shape):] != batch_shape:
            raise ValueError(f"random.categorical: shape {shape} must end with the logits' "
                             f"batch shape {batch_shape}")
    prefix = shape[:len(shape) - len(batch_shape)]
    if not replace:
        # Gumbel top-k: the k largest perturbed logits are a sample without replacement.
        k = math.prod(prefix)
        if k > laval.shape[axis]:
            raise ValueError(f"random.categorical: cannot take {k} samples without "
                             f"replacement from {laval.shape[axis]} categories")
        perturbed = lax.add(logits, gumbel(key, laval.shape, laval.dtype))
        moved = tnp.moveaxis(perturbed, axis, -1)
        _, idx = lax.top_k(moved, k)                       # batch_shape + (k,)
        idx = tnp.moveaxis(idx, -1, 0)                     # (k,) + batch_shape
        return lax.reshape(idx, tuple(shape))              # int32, as in JAX
    logits_shape = list(shape[len(shape) - len(batch_shape):])
    logits_shape.insert(axis, laval.shape[axis])
    g = gumbel(key, tuple(prefix) + tuple(logits_shape), laval.dtype)
    lg = lax.broadcast_in_dim(logits, tuple(prefix) + tuple(logits_shape),
                              tuple(range(len(prefix), len(prefix) + laval.ndim)))
    return tnp.argmax(lax.add(g, lg), axis=len(prefix) + axis)


def choice(key, a, shape=(), replace=True, p=None, axis=0):
    """Random samples from ``a`` (an int n means arange(n)), with or without replacement,
    optionally weighted by ``p``."""
    key = _check_key("choice", key)
    shape = _shape(shape, "choice")
    if isinstance(a, (int, np.integer)):
        n = int(a)
        arr = None
    else:
        arr = tnp.asarray(a)
        if get_aval(arr).ndim == 0:
            raise ValueError("random.choice: a must be an integer or at least 1-D")
        n = get_aval(arr).shape[axis]
    if n <= 0 and math.prod(shape):
        raise ValueError("random.choice: a must be greater than 0 unless no samples are taken")
    k = math.prod(shape)
    if not replace and k > n:
        raise ValueError(f"random.choice: cannot take a larger sample ({k}) than the "
                         f"population ({n}) when replace=False")
    if p is None:
        if replace:
            ind = randint(key, shape, 0, n)
        else:
            ind = lax.reshape(lax.slice(permutation(key, n), (0,), (k,)), shape)
    else:
        p = tnp.asarray(p)
        if get_aval(p).shape != (n,):
            raise ValueError(f"random.choice: p must have shape ({n},), got {get_aval(p).shape}")
        if replace:
            cdf = tnp.cumsum(p)
            r = lax.mul(cdf[-1], lax.sub(lax.full((), 1.0, get_aval(cdf).dtype),
                                         uniform(key, shape, get_aval(cdf).dtype)))
            ind = tnp.searchsorted(cdf, r, side="left")
        else:
            g = lax.sub(gumbel(key, (n,), get_aval(p).dtype), lax.neg(tnp.log(p)))
            _, ind = lax.top_k(g, k)
            ind = lax.convert_element_type(lax.reshape(ind, shape), dtypes.default_int_dtype())
    if arr is None:
        return ind
    return tnp.take(arr, ind, axis=axis)


def truncated_normal(key, lower, upper, shape=None, dtype=None):
    """Normal samples truncated to (lower, upper)."""
    key = _check_key("truncated_normal", key)
    dt = _float_dtype(dtype, "truncated_normal")
    lower = lax.convert_element_type(tnp.asarray(lower), dt)
    upper = lax.convert_element_type(tnp.asarray(upper), dt)
    if shape is None:
        shape = np.broadcast_shapes(get_aval(lower).shape, get_aval(upper).shape)
    shape = _shape(shape, "truncated_normal")
    sqrt2 = lax.full((), np.sqrt(2), dt)
    a = lax.erf(lax.div(lower, sqrt2))
    b = lax.erf(lax.div(upper, sqrt2))
    u = _uniform(key, shape, dt, a, b)
    out = lax.mul(sqrt2, _erf_inv(u))
    lo = tnp.nextafter(lower, np.inf) if hasattr(tnp, "nextafter") else lower
    hi = tnp.nextafter(upper, -np.inf) if hasattr(tnp, "nextafter") else upper
    return tnp.clip(out, lo, hi)


def exponential(key, shape=(), dtype=None):
    """Exponential(1) samples: -log1p(-U)."""
    key = _check_key("exponential", key)
    dt = _float_dtype(dtype, "exponential")
    u = uniform(key, shape, dt)
    return lax.neg(lax.log1p(lax.neg(u)))


def laplace(key, shape=(), dtype=None):
    """Laplace(0, 1) samples: sign(U) log1p(-|U|), U uniform on (-1, 1) (JAX's formula;
    the distribution is symmetric)."""
    key = _check_key("laplace", key)
    dt = _float_dtype(dtype, "laplace")
    u = uniform(key, shape, dt, minval=-1.0 + np.finfo(dt).epsneg, maxval=1.0)
    return lax.mul(lax.sign(u), lax.log1p(lax.neg(lax.abs(u))))


def logistic(key, shape=(), dtype=None):
    """Standard logistic samples: log(U / (1 - U))."""
    key = _check_key("logistic", key)
    dt = _float_dtype(dtype, "logistic")
    u = uniform(key, shape, dt, minval=np.finfo(dt).tiny, maxval=1.0)
    return lax.log(lax.div(u, lax.sub(lax.full((), 1.0, dt), u)))


def cauchy(key, shape=(), dtype=None):
    """Standard Cauchy samples: tan(pi (U - 1/2))."""
    key = _check_key("cauchy", key)
    dt = _float_dtype(dtype, "cauchy")
    u = uniform(key, shape, dt, minval=np.finfo(dt).eps, maxval=1.0)
    return lax.tan(lax.mul(lax.full((), np.pi, dt), lax.sub(u, lax.full((), 0.5, dt))))


def _gamma_one(key, alpha, dt):
    # Marsaglia & Tsang (2000): for alpha >= 1, d = alpha - 1/3, c = 1/sqrt(9d), accept
    # v = (1 + c x)^3 when log U < x^2/2 + d - d v + d log v. alpha < 1 is boosted by
    # U^(1/alpha). A fixed number of proposals (vectorized) replaces the rejection loop;
    # the first accepted proposal is used (acceptance > 95% each, 16 proposals).
    n_prop = 16
    boost = lax.lt(alpha, lax.full((), 1.0, dt))
    a = lax.select(boost, lax.add(alpha, lax.full((), 1.0, dt)), alpha)
    d = lax.sub(a, lax.full((), 1.0 / 3.0, dt))
    c = lax.div(lax.full((), 1.0, dt), lax.sqrt(lax.mul(lax.full((), 9.0, dt), d)))
    k1, k2, k3 = split(key, 3)
    x = normal(k1, (n_prop,), dt)
    u = uniform(k2, (n_prop,), dt)
    v = lax.integer_pow(lax.add(lax.full((), 1.0, dt), lax.mul(c, x)), 3)
    safe_v = lax.max(v, lax.full((), np.finfo(dt).tiny, dt))
    ok = lax.bitwise_and(
        lax.gt(v, lax.full((), 0.0, dt)),
        lax.lt(lax.log(u), lax.add(lax.mul(lax.full((), 0.5, dt), lax.mul(x, x)),
                                   lax.mul(d, lax.add(lax.sub(lax.full((), 1.0, dt), safe_v),
                                                      lax.log(safe_v))))))
    first = tnp.argmax(ok)
    sample = lax.mul(d, tnp.take(safe_v, first))
    ub = uniform(k3, (), dt)
    boosted = lax.mul(sample, lax.pow(ub, lax.div(lax.full((), 1.0, dt), alpha)))
    return lax.select(boost, boosted, sample)


def gamma(key, a, shape=None, dtype=None):
    """Gamma(a, 1) samples (Marsaglia-Tsang). The bit stream differs from JAX's; the
    distribution is the same."""
    from tracer.api import vmap
    key = _check_key("gamma", key)
    dt = _float_dtype(dtype, "gamma")
    a = lax.convert_element_type(tnp.asarray(a), dt)
    shape = get_aval(a).shape if shape is None else _shape(shape, "gamma")
    _check_param_shape("gamma", shape, a)
    n = math.prod(shape)
    from tracer.numpy.util import broadcast_to_shape
    a_flat = lax.reshape(broadcast_to_shape(a, shape), (n,))
    keys = split(key, n)
    if n == 0:
        return lax.full(shape, 0, dt)
    out = vmap(lambda k, al: _gamma_one(k, al, dt))(keys, a_flat)
    return lax.reshape(out, shape)


def beta(key, a, b, shape=None, dtype=None):
    """Beta(a, b) samples via two gammas; ``shape`` defaults to the broadcast shape of
    ``a`` and ``b``."""
    key = _check_key("beta", key)
    dt = _float_dtype(dtype, "beta")
    a, b = tnp.asarray(a, dt), tnp.asarray(b, dt)
    if shape is None:
        shape = np.broadcast_shapes(get_aval(a).shape, get_aval(b).shape)
    shape = _shape(shape, "beta")
    _check_param_shape("beta", shape, a, b)
    ka, kb = split(key)
    ga = gamma(ka, tnp.broadcast_to(a, shape), None, dt)
    gb = gamma(kb, tnp.broadcast_to(b, shape), None, dt)
    return lax.div(ga, lax.add(ga, gb))


def dirichlet(key, alpha, shape=None, dtype=None):
    """Dirichlet(alpha) samples (normalized gammas) of shape ``shape + alpha.shape[-1:]``;
    ``shape`` (default ``alpha.shape[:-1]``) must be a broadcast of alpha's batch shape."""
    key = _check_key("dirichlet", key)
    dt = _float_dtype(dtype, "dirichlet")
    alpha = tnp.asarray(alpha, dt)
    if get_aval(alpha).ndim < 1:
        raise ValueError("random.dirichlet: alpha must be at least 1-D")
    batch = get_aval(alpha).shape[:-1]
    shape = batch if shape is None else _shape(shape, "dirichlet")
    if len(batch) > len(shape) or any(b not in (1, d) for b, d in
                                      zip(batch[::-1], shape[::-1])):
        raise ValueError(f"random.dirichlet: alpha's batch shape {batch} (all but its last "
                         f"axis) does not broadcast to shape {shape}")
    full = tuple(shape) + get_aval(alpha).shape[-1:]
    g = gamma(key, tnp.broadcast_to(alpha, full), None, dt)
    return tnp.divide(g, tnp.sum(g, axis=-1, keepdims=True))


def multivariate_normal(key, mean, cov, shape=None, dtype=None, method="cholesky"):
    """Multivariate normal samples ``mean + L z`` with ``cov = L L^T`` (Cholesky, or
    ``method='eigh'``/``'svd'`` via tracer.numpy.linalg)."""
    key = _check_key("multivariate_normal", key)
    dt = _float_dtype(dtype, "multivariate_normal")
    mean, cov = tnp.asarray(mean, dt), tnp.asarray(cov, dt)
    n = get_aval(mean).shape[-1]
    if get_aval(cov).shape[-2:] != (n, n):
        raise ValueError(f"random.multivariate_normal: cov must have shape (..., {n}, {n}), "
                         f"got {get_aval(cov).shape}")
    if shape is None:
        shape = np.broadcast_shapes(get_aval(mean).shape[:-1], get_aval(cov).shape[:-2])
    import tracer.numpy.linalg as tla  # noqa: F401  (provided by the linalg family)
    if method == "cholesky":
        factor = tla.cholesky(cov)
    elif method == "eigh":
        w, v = tla.eigh(cov)
        factor = v * tnp.sqrt(w)[..., None, :]
    elif method == "svd":
        u, s, _ = tla.svd(cov)
        factor = u * tnp.sqrt(s)[..., None, :]
    else:
        raise ValueError(f"random.multivariate_normal: unknown method {method!r}")
    z = normal(key, tuple(shape) + (n,), dt)
    return mean + tnp.einsum("...ij,...j->...i", factor, z)
