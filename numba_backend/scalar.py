"""Scalar helpers called by generated kernels: the places where Numba's scalar semantics
differ from the eager NumPy impls (lax/elementwise.py) and an explicit implementation
gives the eager answer. Each is ``register_jitable``: callable from njit code (inlined by
LLVM) and from plain Python (the ``debug_kernels`` mode).

The generated code passes operands already widened to 64 bits where noted and casts the
result back to the output dtype (integer casts wrap, as NumPy's do).
"""
from __future__ import annotations

import math

import numpy as np
from numba_backend.lazy_numba import register_jitable

# ----------------------------------- float16 --------------------------------------------
# Numba has no float16 on the CPU: float16 arrays are passed as uint16 bit patterns and
# values are carried as float32 holding a float16-representable value.

_TWO_M24 = 5.960464477539063e-08   # 2**-24, the smallest float16 subnormal


@register_jitable
def f16_to_f32(bits):
    """float16 bit pattern (uint16) -> the exact float32 value."""
    h = np.uint32(bits)
    sign = (h & np.uint32(0x8000)) << np.uint32(16)
    e = (h >> np.uint32(10)) & np.uint32(0x1F)
    m = h & np.uint32(0x3FF)
    if e == np.uint32(0x1F):
        out = sign | np.uint32(0x7F800000) | (m << np.uint32(13))
    elif e == np.uint32(0):
        v = np.float32(np.float64(m) * _TWO_M24)
        return -v if sign else v
    else:
        out = sign | ((e + np.uint32(112)) << np.uint32(23)) | (m << np.uint32(13))
    return np.uint32(out).view(np.float32)


@register_jitable
def f16_bits(x):
    """float64 -> the float16 bit pattern nearest to it (ties to even, overflow to inf,
    NaN keeps its sign and top payload bits, as NumPy's npy_double_to_half)."""
    b = np.float64(x).view(np.uint64)
    sign = np.uint16((b >> np.uint64(48)) & np.uint64(0x8000))
    e = (b >> np.uint64(52)) & np.uint64(0x7FF)
    if e == np.uint64(0x7FF):
        m = b & np.uint64(0xFFFFFFFFFFFFF)
        if m == np.uint64(0):
            return np.uint16(sign | np.uint16(0x7C00))
        r = np.uint16(0x7C00) | np.uint16(m >> np.uint64(42))
        if r == np.uint16(0x7C00):
            r = np.uint16(0x7C01)
        return np.uint16(sign | r)
    ax = abs(np.float64(x))
    if ax >= 65520.0:
        return np.uint16(sign | np.uint16(0x7C00))
    if ax < 6.103515625e-05:   # 2**-14: subnormal (or zero): a multiple of 2**-24
        q = np.rint(ax * 16777216.0)
        return np.uint16(sign | np.uint16(q))
    mant, ex = math.frexp(ax)          # ax = mant * 2**ex, mant in [0.5, 1)
    q = np.rint(mant * 2048.0)         # 11 significant bits
    if q == 2048.0:
        q = 1024.0
        ex += 1
    return np.uint16(sign | np.uint16(((ex + 14) << 10) | (np.int64(q) - 1024)))


@register_jitable
def f16r(x):
    """Round a float (carried as float32/float64) to float16; returns the float32 value."""
    return f16_to_f32(f16_bits(np.float64(x)))


# --------------------------- ml_dtypes low-precision types --------------------------------
# Carried like float16 (numba_backend.codegen.carrier): bfloat16 and float8_e8m0fnu as a
# float32 holding a representable value, the other float8/float4 formats as a float32
# holding a value of the format (each also a float16 value: eager computes them in
# float16), 2-/4-bit integers as int8/uint8. Rounding reproduces ml_dtypes (the eager
# impls' ``lax.utils.narrow``), which rounds from the source value once: from float64,
# not through float32 or float16.

@register_jitable
def round_sig(x, p, emin):
    """float64 ``x`` rounded to nearest even to ``p`` significant bits, with exponents
    below ``emin`` subnormal (quantum 2**(emin - p + 1)); no overflow: the caller's
    format decides what a value beyond its maximum becomes. NaN, inf and zeros stay."""
    ax = abs(x)
    if not (ax > 0.0) or ax == np.inf:
        return x
    _, e = math.frexp(ax)               # ax in [2**(e-1), 2**e)
    ex = e - 1
    if ex < emin:
        ex = emin
    q = math.ldexp(1.0, ex - p + 1)
    r = np.rint(ax / q) * q             # (exact: q is a power of two)
    return r if x > 0.0 else -r


_BF16_MAX = 3.3895313892515355e38


@register_jitable
def bf16_to_f32(bits):
    """bfloat16 bit pattern (uint16) -> its float32 value."""
    return np.uint32(np.uint32(bits) << np.uint32(16)).view(np.float32)


@register_jitable
def bf16_store(x):
    """A float32 carrier (a bfloat16 value, NaN payload and all) -> its bit pattern."""
    return np.uint16(np.float32(x).view(np.uint32) >> np.uint32(16))


@register_jitable
def bf16_round(x):
    """float64 -> the nearest bfloat16 (ties to even, overflow to inf), as a float32;
    NaN becomes the quiet NaN of its sign (ml_dtypes: 0x7FC0 / 0xFFC0)."""
    if x != x:
        neg = np.float64(x).view(np.uint64) >> np.uint64(63)
        return np.uint32(np.uint32(0xFFC00000) if neg else np.uint32(0x7FC00000)).view(
            np.float32)
    r = round_sig(np.float64(x), 8, -126)
    if abs(r) > _BF16_MAX:
        return np.float32(np.inf) if r > 0.0 else np.float32(-np.inf)
    return np.float32(r)


@register_jitable
def bf16_round32(x):
    """float32 -> the nearest bfloat16 as a float32: ``bf16_round`` for a float32 source
    (exact there: the two share their exponent range), by the bits -- the low half
    rounded off to nearest even, NaN to the quiet NaN of its sign."""
    b = np.float32(x).view(np.uint32)
    if (b & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000):
        q = (b & np.uint32(0x80000000)) | np.uint32(0x7FC00000)
        return np.uint32(q).view(np.float32)
    b = b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))
    return np.uint32(b & np.uint32(0xFFFF0000)).view(np.float32)


@register_jitable
def lowp_decode(bits, dec):
    """An 8-bit (or 4-bit) float's bit pattern -> its float32 value, by its table."""
    return dec[np.int64(bits)]


@register_jitable
def f8_round(x, p, emin, enc, dec):
    """float64 -> the nearest value of a float8/float4 format (``p`` significant bits,
    minimum exponent ``emin``), as a float32: rounded once, then the value (exactly a
    float16 one, or beyond the format's range) encoded by the format's own float16 ->
    bits table (saturation, NaN and signed-zero rules from ml_dtypes)."""
    return dec[np.int64(enc[np.int64(f16_bits(round_sig(np.float64(x), p, emin)))])]


@register_jitable
def lowp_widen(x):
    """A float8/float4 carrier as the value conversions out of the format give: a NaN
    becomes the quiet NaN of its sign (ml_dtypes' decoding), other values stay."""
    if x != x:
        neg = np.float32(x).view(np.uint32) >> np.uint32(31)
        return np.uint32(np.uint32(0xFFC00000) if neg else np.uint32(0x7FC00000)).view(
            np.float32)
    return np.float32(x)


@register_jitable
def f16_bits_exact(x):
    """The float16 bit pattern of a float32 that is a float16 value (a float16 carrier,
    a float8/float4 one), by the bits: ``f16_bits`` without its rounding (the same
    pattern, NaN payloads included)."""
    b = np.float32(x).view(np.uint32)
    sign = np.uint16((b >> np.uint32(16)) & np.uint32(0x8000))
    e = (b >> np.uint32(23)) & np.uint32(0xFF)
    m = b & np.uint32(0x7FFFFF)
    if e == np.uint32(0xFF):
        r = np.uint16(0x7C00) | np.uint16(m >> np.uint32(13))
        if m != np.uint32(0) and r == np.uint16(0x7C00):
            r = np.uint16(0x7C01)
        return np.uint16(sign | r)
    if e >= np.uint32(113):
        return np.uint16(sign | np.uint16(((e - np.uint32(112)) << np.uint32(10)) |
                                          (m >> np.uint32(13))))
    if e == np.uint32(0):
        return sign
    # a float16 subnormal: the significand in units of 2**-24
    return np.uint16(sign | np.uint16((m | np.uint32(0x800000)) >> (np.uint32(126) - e)))


@register_jitable
def f8_from16(x, enc, dec):
    """``f8_round`` of a float16 value (a float16 carrier): the format's table alone."""
    return dec[np.int64(enc[np.int64(f16_bits_exact(x))])]


@register_jitable
def f8_store(x, enc_store):
    """A float32 carrier (a value of the format, NaN payloads kept) -> its bit pattern."""
    return np.uint8(enc_store[np.int64(f16_bits_exact(x))])


@register_jitable
def e8m0_round(x):
    """float64 -> float8_e8m0fnu (powers of two 2**-127 .. 2**127), as a float32, as
    ml_dtypes converts: the nearer power of two, halfway (1.5 * 2**k) rounding up;
    below 2**-127 it is 2**-127; zero, negatives, inf, NaN and overflow give NaN."""
    if not (x > 0.0) or x == np.inf:
        return np.float32(np.nan)
    m, e = math.frexp(np.float64(x))     # x = m * 2**e, m in [0.5, 1)
    ex = e - 1 if m < 0.75 else e
    if ex > 127:
        return np.float32(np.nan)
    if ex < -127:
        ex = -127
    return np.float32(math.ldexp(1.0, ex))


@register_jitable
def e8m0_store(x):
    """A float32 carrier of float8_e8m0fnu (a power of two or NaN) -> its bit pattern."""
    if x != x:
        return np.uint8(255)
    return np.uint8((np.float32(x).view(np.uint32) >> np.uint32(23)) & np.uint32(0xFF))


@register_jitable
def wrap_s(x, bits):
    """An integer's low ``bits`` bits as a signed ``bits``-bit value (int8): int4/int2
    wrap, and their bytes (ml_dtypes keeps the low bits only) decode, this way."""
    h = np.int64(1) << np.int64(bits - 1)
    return np.int8(((np.int64(x) & ((h << np.int64(1)) - np.int64(1))) ^ h) - h)


@register_jitable
def wrap_u(x, bits):
    """An integer's low ``bits`` bits (uint8): uint4/uint2 wrap and store this way, and
    int4/int2 store."""
    return np.uint8(np.int64(x) & ((np.int64(1) << np.int64(bits)) - np.int64(1)))


def _lowp_tables():
    """Per float8/float4 format ``t``: ``DEC_<t>`` (256 bit patterns -> float32 carriers),
    ``ENC_<t>`` (float16 bit patterns -> the format's bits, as ``lax.utils.narrow``
    converts float16) and ``STORE_<t>`` (the same, except that each carrier in DEC gives
    back its own bits). Built from ml_dtypes itself, so rounding is ml_dtypes'.

    ml_dtypes decodes every NaN of a format to the one quiet NaN of its sign; DEC gives
    each NaN pattern its own payload instead (the pattern's low 7 bits, in float32
    mantissa bits 13..19, which float16 keeps), so that moved elements (a transpose, a
    select) keep their bits, as eager's moves do; conversions out of the format drop it
    again (``lowp_widen``)."""
    from lax.utils import narrow
    from tracer import dtypes
    halves = np.arange(65536, dtype=np.uint16).view(np.float16)
    out = {}
    for t in dtypes.FLOAT8_DTYPES + (dtypes.float4_e2m1fn,):
        t = np.dtype(t)
        dec = np.arange(256, dtype=np.uint8).view(t).astype(np.float32)
        if t == np.dtype(dtypes.float8_e8m0fnu):    # (one NaN; stores by e8m0_store)
            dec.flags.writeable = False
            out[f"DEC_{t.name}"] = dec
            continue
        dbits = dec.view(np.uint32)
        nan = np.isnan(dec)
        low = np.arange(256, dtype=np.uint32)[nan] & np.uint32(0x7F)
        dbits[nan] |= low << np.uint32(13)
        enc = narrow(halves, t).view(np.uint8).copy()
        store = enc.copy()
        n = 16 if t == np.dtype(dtypes.float4_e2m1fn) else 256  # (its 16 patterns)
        for b in range(n):
            store[int(f16_bits(np.float64(dec[b])))] = b
        for b in range(n):
            if store[int(f16_bits(np.float64(dec[b])))] != b:
                raise AssertionError(f"{t}: stored bits {b} do not round-trip")
        for name, arr in (("DEC", dec), ("ENC", enc), ("STORE", store)):
            arr.flags.writeable = False
            out[f"{name}_{t.name}"] = arr
    return out


def __getattr__(name):
    # the tables are built on first use (they import ml_dtypes: ``tracer.dtypes``)
    if name.startswith(("DEC_", "ENC_", "STORE_")):
        tables = _lowp_tables()
        globals().update(tables)
        if name in tables:
            return tables[name]
    raise AttributeError(f"module 'numba_backend.scalar' has no attribute {name!r}")


# ------------------------------------ integers -------------------------------------------

@register_jitable
def idiv_s(x, y):
    """Signed division on int64 operands: truncates toward zero; x / 0 = -1;
    INT_MIN / -1 = INT_MIN (after the caller's cast back to the narrow dtype)."""
    if y == 0:
        return np.int64(-1)
    if y == -1:
        return np.int64(0) - x          # wraps: -INT64_MIN == INT64_MIN
    q = x // y
    if q < 0 and q * y != x:
        q += 1
    return q


@register_jitable
def idiv_u(x, y):
    """Unsigned division on uint64 operands; x / 0 = all ones."""
    if y == np.uint64(0):
        return np.uint64(0xFFFFFFFFFFFFFFFF)
    return np.uint64(x // y)


@register_jitable
def irem_s(x, y):
    """Signed remainder with the dividend's sign (C fmod); x % 0 = x; x % -1 = 0."""
    if y == 0:
        return x
    if y == -1:
        return np.int64(0)
    r = x % y                            # Python-style: has the sign of y
    if r != 0 and (r < 0) != (x < 0):
        r -= y
    return r


@register_jitable
def irem_u(x, y):
    if y == np.uint64(0):
        return x
    return np.uint64(x % y)


@register_jitable
def ipow_s(x, y):
    """x ** y on int64 with wrapping; negative y: 1 for x == 1, +-1 for x == -1, else 0."""
    if y < 0:
        if x == 1:
            return np.int64(1)
        if x == -1:
            return np.int64(1) if y % 2 == 0 else np.int64(-1)
        return np.int64(0)
    acc = np.int64(1)
    base = x
    n = y
    while n > 0:
        if n & 1:
            acc = acc * base
        n >>= 1
        base = base * base
    return acc


@register_jitable
def ipow_u(x, y):
    acc = np.uint64(1)
    base = x
    n = y
    while n > np.uint64(0):
        if n & np.uint64(1):
            acc = acc * base
        n >>= np.uint64(1)
        base = base * base
    return acc


@register_jitable
def shl(x, y, bits):
    """x << y on 64-bit x; y (int64, negative = huge) >= bits gives 0."""
    if y < 0 or y >= bits:
        return x - x
    return x << y


@register_jitable
def shr_a(x, y, bits):
    """Arithmetic x >> y on sign-extended int64 x; y >= bits gives -1 or 0."""
    if y < 0 or y >= bits:
        return np.int64(-1) if x < 0 else np.int64(0)
    return x >> y


@register_jitable
def shr_l(x, y, bits):
    """Logical x >> y on zero-extended uint64 x; y >= bits gives 0."""
    if y < 0 or y >= bits:
        return np.uint64(0)
    return x >> np.uint64(y)


@register_jitable
def popcount(x):
    """Set bits of a zero-extended uint64."""
    n = np.int64(0)
    v = x
    while v:
        v &= v - np.uint64(1)
        n += 1
    return n


@register_jitable
def clz(x, bits):
    """Leading zeros of a zero-extended uint64 within a ``bits``-wide integer."""
    n = np.int64(bits)
    v = x
    while v:
        v >>= np.uint64(1)
        n -= 1
    return n


# ---------------------------------- conversions ------------------------------------------

@register_jitable
def f2i(x, lo_f, hi_f, lo, hi):
    """float64 -> int64 as convert_element_type: truncate; NaN -> 0; saturate at
    [lo, hi] (reached when trunc(x) <= lo_f or >= hi_f, the limits as float64)."""
    t = np.trunc(x)
    if t != t:
        return np.int64(0)
    if t <= lo_f:
        return lo
    if t >= hi_f:
        return hi
    return np.int64(t)


@register_jitable
def f2u64(x):
    """float64 -> uint64 as convert_element_type (truncate, NaN -> 0, saturate)."""
    t = np.trunc(x)
    if t != t or t <= 0.0:
        return np.uint64(0)
    if t >= 18446744073709551615.0:
        return np.uint64(0xFFFFFFFFFFFFFFFF)
    return np.uint64(t)


@register_jitable
def real(x):
    return x.real


@register_jitable
def imag(x):
    return x.imag


@register_jitable
def conj(x):
    return x.conjugate()


@register_jitable
def make_complex(re, im):
    return complex(re, im)


# ----------------------------------- floating --------------------------------------------

@register_jitable
def fmax(a, b):
    """lax.max of floats, bit for bit lax/elementwise.py's impl (XLA:CPU's rule): a NaN
    ``a`` is returned as it is; else the larger, and on a tie or a NaN ``b``, ``b`` with
    the sign bits of a and b and-ed (max(-0.0, +0.0) = +0.0, max(1.0, -NaN) = +NaN)."""
    if a != a:
        return a
    if a > b:
        return a
    if a < b:
        return b
    return b if math.copysign(1.0, a) < 0 else abs(b)


@register_jitable
def fmin(a, b):
    """lax.min of floats: as ``fmax`` with the sign bits or-ed on ties and a NaN ``b``
    (min(+0.0, -0.0) = -0.0, min(-1.0, +NaN) = -NaN)."""
    if a != a:
        return a
    if a < b:
        return a
    if a > b:
        return b
    return -abs(b) if math.copysign(1.0, a) < 0 else b


@register_jitable
def round_away(x):
    """Round half away from zero, exactly as lax.round's impl (x - trunc(x) is exact)."""
    t = np.trunc(x)
    if abs(x - t) >= 0.5:
        return t + np.sign(x)
    return t


@register_jitable
def sign_f(x):
    """np.sign for floats: -1, +-0 or 1; NaN stays NaN."""
    if x > 0:
        return 1.0
    if x < 0:
        return -1.0
    return np.float64(x)          # +-0 keep their sign, NaN stays NaN (as NumPy)


@register_jitable
def total_key_32(x):
    """float32 -> int32 whose order is IEEE totalOrder."""
    i = np.float32(x).view(np.int32)
    return i ^ np.int32(0x7FFFFFFF) if i < 0 else i


@register_jitable
def total_key_64(x):
    i = np.float64(x).view(np.int64)
    return i ^ np.int64(0x7FFFFFFFFFFFFFFF) if i < 0 else i


@register_jitable
def total_key_16(x):
    i = np.uint16(f16_bits(np.float64(x))).view(np.int16)
    return np.int16(i ^ np.int16(0x7FFF)) if i < 0 else i


# ------------------------------------- complex --------------------------------------------
# Numba raises on complex division by zero; NumPy's loop (Smith's method) gives inf/nan.

@register_jitable
def cdiv64(a, b):
    """complex64 a / b exactly as NumPy's complex64 divide loop."""
    ar, ai, br, bi = np.float32(a.real), np.float32(a.imag), np.float32(b.real), np.float32(b.imag)
    abr, abi = abs(br), abs(bi)
    if abr >= abi:
        if abr == 0 and abi == 0:
            return np.complex64(complex(ar / abr, ai / abr))
        rat = bi / br
        scl = np.float32(1.0) / (br + bi * rat)
        return np.complex64(complex((ar + ai * rat) * scl, (ai - ar * rat) * scl))
    rat = br / bi
    scl = np.float32(1.0) / (bi + br * rat)
    return np.complex64(complex((ar * rat + ai) * scl, (ai * rat - ar) * scl))


@register_jitable
def cdiv128(a, b):
    """complex128 a / b exactly as NumPy's complex128 divide loop."""
    ar, ai, br, bi = a.real, a.imag, b.real, b.imag
    abr, abi = abs(br), abs(bi)
    if abr >= abi:
        if abr == 0 and abi == 0:
            return complex(ar / abr, ai / abr)
        rat = bi / br
        scl = 1.0 / (br + bi * rat)
        return complex((ar + ai * rat) * scl, (ai - ar * rat) * scl)
    rat = br / bi
    scl = 1.0 / (bi + br * rat)
    return complex((ar * rat + ai) * scl, (ai * rat - ar) * scl)


# ------------------------------------ reduce_precision ------------------------------------
# lax.reduce_precision's eager impl on one element's bits: uint64 arithmetic masked to the
# source width, so the rounding carry wraps exactly as NumPy's uintN does. Kernels pass
# and get back the bits (bitcasts in the IR), so no float conversion touches a NaN.

@register_jitable
def reduce_precision_bits(b, nbits, src_exp_bits, src_mant, exponent_bits, mantissa_bits):
    one = np.uint64(1)
    mask = ~np.uint64(0) >> np.uint64(64 - nbits)
    if mantissa_bits < src_mant:
        drop = np.uint64(src_mant - mantissa_bits)
        last_kept = (b >> drop) & one
        bias = (one << (drop - one)) - one + last_kept
        b = ((b + bias) & mask) & ~((one << drop) - one)
    if exponent_bits < src_exp_bits:
        src_bias = (1 << (src_exp_bits - 1)) - 1
        dst_bias = (1 << (exponent_bits - 1)) - 1
        exp_mask = np.uint64(((1 << src_exp_bits) - 1) << src_mant)
        e = (b & exp_mask) >> np.uint64(src_mant)
        sign = b & (one << np.uint64(nbits - 1))
        if e > np.uint64(src_bias + dst_bias):
            b = sign | exp_mask
        elif e <= np.uint64(src_bias - dst_bias):
            b = sign
    return b


@register_jitable
def reduce_precision_u(u, nbits, exponent_bits, mantissa_bits):
    """``u``: the bits (uint16/32/64) of a float16/32/64; returns the reduced bits, of
    the same width. A NaN keeps its bits (sign and payload, signalling ones too)."""
    b = np.uint64(u)
    if nbits == 16:
        src_exp_bits, src_mant = 5, 10
    elif nbits == 32:
        src_exp_bits, src_mant = 8, 23
    else:
        src_exp_bits, src_mant = 11, 52
    exp_mask = np.uint64(((1 << src_exp_bits) - 1) << src_mant)
    magnitude = b & (~np.uint64(0) >> np.uint64(65 - nbits))
    if magnitude <= exp_mask:
        b = reduce_precision_bits(b, nbits, src_exp_bits, src_mant, exponent_bits,
                                  mantissa_bits)
    return b


# ---------------------------- keys of max/min reductions -----------------------------------

@register_jitable
def unkey_f32(k):
    """The float32 of a max/min reduction key (numba_backend.vecmath.max_key_f32); the
    extreme keys stand for NaN."""
    if k == np.int32(0x7FFFFFFF) or k == np.int32(-0x80000000):
        return np.float32(np.nan)
    return np.int32(k ^ ((k >> 31) & np.int32(0x7FFFFFFF))).view(np.float32)


@register_jitable
def unkey_f64(k):
    if k == np.int64(0x7FFFFFFFFFFFFFFF) or k == np.int64(-0x8000000000000000):
        return np.nan
    return np.int64(k ^ ((k >> 63) & np.int64(0x7FFFFFFFFFFFFFFF))).view(np.float64)
