"""Record JAX's (XLA CPU's) element-wise results on the ml_dtypes low-precision types into
tests/data/lowp_elementwise_jax.npz, as bit patterns (run with a JAX install, e.g.
/work/jaxvenv/bin/python; tracer never imports JAX).

Inputs per format: every encoding of the 8- and 4-bit floats and of the 2-/4-bit
integers; for bfloat16 its edge encodings (±0, the smallest and largest subnormals, min
normal, max, ±inf, NaNs of both signs, quiet and signalling, values around 1) and random
ones. Binary ops run over all pairs of a subset holding the edges. Conversions from
float32 cover every format's rounding ties, the points just past them, the saturation
and overflow points, NaN and inf. Keys are "<format>/<what>"; refused ops are listed in
"<format>/refused" (as text).
"""
import pathlib

import jax
import ml_dtypes
import numpy as np
from jax import lax

jax.config.update("jax_enable_x64", False)

FLOATS = ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
          "float8_e4m3b11fnuz", "float8_e3m4", "float8_e4m3", "float8_e8m0fnu",
          "float4_e2m1fn"]
INTS = ["int4", "uint4", "int2", "uint2"]
UNARY_F = ["neg", "abs", "sign", "floor", "ceil", "round", "is_finite", "exp", "exp2",
           "expm1", "log", "log1p", "sqrt", "rsqrt", "cbrt", "sin", "cos", "tan", "tanh",
           "logistic", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh",
           "erf", "erfc", "erf_inv", "lgamma", "digamma", "square", "integer_pow3",
           "reduce_precision_e4m2"]
BINARY_F = ["add", "sub", "mul", "div", "rem", "pow", "max", "min", "atan2", "nextafter",
            "eq", "ne", "lt", "le", "gt", "ge"]
UNARY_I = ["neg", "abs", "sign", "not", "population_count", "clz", "square",
           "integer_pow3"]
BINARY_I = ["add", "sub", "mul", "div", "rem", "max", "min", "and", "or", "xor",
            "shift_left", "shift_right_arithmetic", "shift_right_logical", "eq", "lt", "ge"]


def uint_of(dt):
    return {1: np.uint8, 2: np.uint16, 4: np.uint32}[np.dtype(dt).itemsize]


def bits(x):
    x = np.asarray(x)
    return x.view(uint_of(x.dtype)) if x.dtype != np.bool_ else x.astype(np.uint8)


def from_bits(b, dt):
    return np.asarray(b, uint_of(dt)).view(dt)


def unary(name, x):
    if name == "integer_pow3":
        return lax.integer_pow(x, 3)
    if name == "reduce_precision_e4m2":
        return lax.reduce_precision(x, exponent_bits=4, mantissa_bits=2)
    if name == "not":
        return lax.bitwise_not(x)
    return getattr(lax, name)(x)


def binary(name, x, y):
    name = {"and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor"}.get(name, name)
    return getattr(lax, name)(x, y)


def float_inputs(name):
    dt = np.dtype(getattr(ml_dtypes, name))
    if dt.itemsize == 1:
        nbits = 4 if name.startswith("float4") else 8
        codes = np.arange(2 ** nbits, dtype=np.uint8)
        sub = codes if nbits == 4 else np.unique(np.concatenate([
            codes[:6], codes[0x78:0x88], codes[0xf8:], codes[0x7a:0x7c] ^ 0x80,
            np.array([0x38, 0x3c, 0x40, 0x44, 0xb8, 0xc0, 0x30, 0x20, 0x10, 0x01, 0x81])]))
        return from_bits(codes, dt), from_bits(sub, dt)
    rng = np.random.default_rng(0)
    edge = np.array([0x0000, 0x8000, 0x0001, 0x8001, 0x007f, 0x0080, 0x8080, 0x7f7f, 0xff7f,
                     0x7f80, 0xff80, 0x7fc0, 0xffc0, 0x7f81, 0x7fff, 0x3f80, 0x3f81, 0xbf80,
                     0x4000, 0x4049, 0x3f00, 0x3c00, 0x4300, 0x42f7, 0x3fc0, 0xc2c8, 0x0040,
                     0x7f00, 0x4b00, 0x4b80], np.uint16)
    finite = rng.integers(0, 2 ** 16, 400).astype(np.uint16)
    codes = np.unique(np.concatenate([edge, finite]))
    sub = np.unique(np.concatenate([edge, finite[:20]]))
    return from_bits(codes, dt), from_bits(sub, dt)


def f32_conversion_inputs(dt):
    """float32 values at and around every rounding tie of ``dt``, its overflow points."""
    codes = np.arange(256 if dt.itemsize == 1 else 2 ** 16, dtype=uint_of(dt))
    if dt.itemsize == 2:
        codes = codes[::97]
    v = from_bits(codes, dt).astype(np.float32)
    v = np.sort(v[np.isfinite(v)])
    v = np.unique(v)
    mids = (v[:-1].astype(np.float64) + v[1:]) / 2
    mx = float(ml_dtypes.finfo(dt).max)
    extra = np.array([mx, mx * 1.0625, mx * 1.125, mx * 1.25, mx * 1.5, mx * 2, mx * 1e3,
                      np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0, 1e-45, -1e-45,
                      float(ml_dtypes.finfo(dt).smallest_subnormal) / 2,
                      float(ml_dtypes.finfo(dt).smallest_subnormal) * 0.5000001,
                      float(ml_dtypes.finfo(dt).smallest_subnormal) * 0.4999],
                     np.float64)
    allv = np.concatenate([v, mids, np.nextafter(mids.astype(np.float32), np.float32(np.inf)),
                           np.nextafter(mids.astype(np.float32), np.float32(-np.inf)),
                           extra, -extra])
    return allv.astype(np.float32)


def try_record(out, refused, key, fn):
    try:
        out[key] = bits(np.asarray(fn()))
    except Exception as e:  # noqa: BLE001  (the refusal is recorded)
        refused.append(f"{key.split('/', 1)[1]}: {type(e).__name__}")


def record():
    out = {}
    for name in FLOATS:
        dt = np.dtype(getattr(ml_dtypes, name))
        x, sub = float_inputs(name)
        out[f"{name}/x"], out[f"{name}/pair_values"] = bits(x), bits(sub)
        a, b = np.repeat(sub, len(sub)), np.tile(sub, len(sub))
        refused = []
        for op in UNARY_F:
            try_record(out, refused, f"{name}/{op}", lambda: jax.jit(
                lambda v: unary(op, v))(x))
        for op in BINARY_F:
            try_record(out, refused, f"{name}/{op}", lambda: jax.jit(
                lambda u, v: binary(op, u, v))(a, b))
        c = f32_conversion_inputs(dt)
        out[f"{name}/from_f32_in"] = bits(c)
        try_record(out, refused, f"{name}/from_f32", lambda: lax.convert_element_type(c, dt))
        try_record(out, refused, f"{name}/to_f32", lambda: lax.convert_element_type(x, np.float32))
        for other in FLOATS + ["float16", "int32", "int8", "uint8", "int4", "uint2", "bool"]:
            if other != name:
                odt = np.dtype(getattr(ml_dtypes, other, None) or other)
                try_record(out, refused, f"{name}/to_{other}",
                           lambda: lax.convert_element_type(x, odt))
        ints = np.array([-2**31, -1000, -129, -128, -17, -16, -9, -8, -3, -2, -1, 0, 1, 2, 3,
                         7, 8, 15, 16, 127, 128, 255, 256, 1000, 2**24 + 1, 2**31 - 1],
                        np.int32)
        out["int32_in"] = ints
        try_record(out, refused, f"{name}/from_int32", lambda: lax.convert_element_type(ints, dt))
        out[f"{name}/refused"] = np.array("\n".join(refused))
    for name in INTS:
        dt = np.dtype(getattr(ml_dtypes, name))
        n = int(name[-1])
        lo = -(2 ** (n - 1)) if not name.startswith("u") else 0
        x = np.arange(lo, lo + 2 ** n).astype(dt)
        out[f"{name}/x"] = bits(x)
        a, b = np.repeat(x, len(x)), np.tile(x, len(x))
        refused = []
        for op in UNARY_I:
            try_record(out, refused, f"{name}/{op}", lambda: jax.jit(lambda v: unary(op, v))(x))
        for op in BINARY_I:
            try_record(out, refused, f"{name}/{op}", lambda: jax.jit(
                lambda u, v: binary(op, u, v))(a, b))
        ints = out["int32_in"]
        try_record(out, refused, f"{name}/from_int32", lambda: lax.convert_element_type(ints, dt))
        fl = np.array([-1e10, -100.5, -9.5, -8.5, -8.0, -2.5, -1.5, -0.5, -0.0, 0.0, 0.5, 1.5,
                       2.5, 3.5, 7.5, 7.9, 8.0, 15.5, 16.0, 1e10, np.inf, -np.inf, np.nan],
                      np.float32)
        out["f32_in"] = fl
        try_record(out, refused, f"{name}/from_f32", lambda: lax.convert_element_type(fl, dt))
        for other in ["int32", "uint8", "float32", "bfloat16", "float8_e4m3fn"] + INTS:
            if other != name:
                odt = np.dtype(getattr(ml_dtypes, other, None) or other)
                try_record(out, refused, f"{name}/to_{other}",
                           lambda: lax.convert_element_type(x, odt))
        out[f"{name}/refused"] = np.array("\n".join(refused))
    return out


if __name__ == "__main__":
    path = pathlib.Path(__file__).parent.parent / "tests" / "data" / "lowp_elementwise_jax.npz"
    np.savez_compressed(path, jax_version=np.array(jax.__version__), **record())
    print("wrote", path, path.stat().st_size)
