"""The element-wise cases recorded from JAX in tests/data/lowp_elementwise_jax.npz
(``tools/record_lowp_elementwise_jax.py``), as (format, op, fn, inputs, expected bits)
for the eager and the jitted comparisons."""
from __future__ import annotations

import pathlib

import ml_dtypes
import numpy as np

import lax

DATA = np.load(pathlib.Path(__file__).parent.parent / "data" / "lowp_elementwise_jax.npz")
FLOATS = ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
          "float8_e4m3b11fnuz", "float8_e3m4", "float8_e4m3", "float8_e8m0fnu",
          "float4_e2m1fn"]
INTS = ["int4", "uint4", "int2", "uint2"]
UNARY = {"integer_pow3": lambda x: lax.integer_pow(x, 3),
         "reduce_precision_e4m2": lambda x: lax.reduce_precision(x, exponent_bits=4,
                                                                  mantissa_bits=2),
         "not": lax.bitwise_not}
BINARY = {"and": lax.bitwise_and, "or": lax.bitwise_or, "xor": lax.bitwise_xor}
UNARY_F = ["neg", "abs", "sign", "floor", "ceil", "round", "is_finite", "exp", "exp2",
           "expm1", "log", "log1p", "sqrt", "rsqrt", "cbrt", "sin", "cos", "tan", "tanh",
           "logistic", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh",
           "erf", "erfc", "erf_inv", "lgamma", "digamma", "square", "integer_pow3",
           "reduce_precision_e4m2"]
BINARY_F = ["add", "sub", "mul", "div", "rem", "pow", "max", "min", "atan2", "nextafter",
            "eq", "ne", "lt", "le", "gt", "ge"]
UNARY_I = ["neg", "abs", "sign", "not", "population_count", "clz", "square", "integer_pow3"]
BINARY_I = ["add", "sub", "mul", "div", "rem", "max", "min", "and", "or", "xor",
            "shift_left", "shift_right_arithmetic", "shift_right_logical", "eq", "lt", "ge"]


def dtype_of(name):
    return np.dtype(getattr(ml_dtypes, name, None) or name)


def uint_of(dt):
    return {1: np.uint8, 2: np.uint16, 4: np.uint32}[np.dtype(dt).itemsize]


def from_bits(b, dt):
    return np.asarray(b).astype(uint_of(dt)).view(dt)


def bits(x):
    x = np.asarray(x)
    return x.view(uint_of(x.dtype)) if x.dtype != np.bool_ else x.astype(np.uint8)


def _unary(op):
    return UNARY.get(op) or getattr(lax, op)


def _binary(op):
    return BINARY.get(op) or getattr(lax, op)


def cases():
    """(id, fn, args, expected bits, result dtype)."""
    out = []
    for name in FLOATS + INTS:
        dt = dtype_of(name)
        x = from_bits(DATA[f"{name}/x"], dt)
        floating = name in FLOATS
        sub = from_bits(DATA[f"{name}/pair_values"], dt) if floating else x
        a, b = np.repeat(sub, len(sub)), np.tile(sub, len(sub))
        for op in (UNARY_F if floating else UNARY_I):
            key = f"{name}/{op}"
            if key in DATA:
                out.append((key, _unary(op), (x,), DATA[key]))
        for op in (BINARY_F if floating else BINARY_I):
            key = f"{name}/{op}"
            if key in DATA:
                out.append((key, _binary(op), (a, b), DATA[key]))
        conv = lambda t: (lambda v: lax.convert_element_type(v, t))  # noqa: E731
        if floating:
            c = DATA[f"{name}/from_f32_in"].view(np.float32)
            out.append((f"{name}/from_f32", conv(dt), (c,), DATA[f"{name}/from_f32"]))
        else:
            out.append((f"{name}/from_f32", conv(dt), (DATA["f32_in"],), DATA[f"{name}/from_f32"]))
        out.append((f"{name}/from_int32", conv(dt), (DATA["int32_in"],),
                    DATA[f"{name}/from_int32"]))
        for key in DATA.files:
            if key.startswith(f"{name}/to_"):
                t = dtype_of(key.split("/to_")[1].replace("f32", "float32"))
                out.append((key, conv(t), (x,), DATA[key]))
    return out


def refused(name):
    return [r for r in str(DATA[f"{name}/refused"]).split("\n") if r]


# Where tracer departs from XLA's CPU results on purpose (README, "Low-precision dtypes"):
# - NaN encodings: any NaN matches any NaN (XLA's NaN signs and payloads follow its own
#   code paths; tracer's follow NumPy/ml_dtypes);
# - subnormal float32 values: XLA's CPU backend flushes them to zero, on input and on
#   output, so bfloat16 subnormals (and float8_e8m0fnu's 2^-127) are zeros there (and NaN
#   for e8m0fnu, which has no zero); tracer keeps them, as it does for float32;
# - functions XLA expands into several narrow-type steps (asin, atanh, lgamma...): within
#   ULP_OPS[op] units in the last place of the format, not bit-exact;
# - three XLA quirks, listed in QUIRKS: nextafter towards 0 from the smallest negative
#   subnormal gives -0 there (a NaN in the fnuz formats), float4_e2m1fn's max 6.0
#   converts to integers as if it were inf, and float32 ties between two float8_e8m0fnu
#   powers of two round up;
# - and where XLA's multi-step expansions leave the function's domain or exact points:
#   digamma(0) (XLA NaN, tracer -inf as for float32), bfloat16 lgamma(1) (XLA 2^-21),
#   float4_e2m1fn asin/acos past +-1 (XLA clamps), and float8_e8m0fnu's transcendental
#   functions and nextafter (a format without zero or sign: XLA's steps give NaN).
ULP_OPS = {"asin": 2, "acos": 2, "atan": 1, "asinh": 2, "acosh": 2, "atanh": 2,
           "erf_inv": 2, "lgamma": 3, "digamma": 3, "sinh": 1, "cosh": 1, "expm1": 1,
           "tan": 1, "atan2": 1, "pow": 2, "erfc": 1, "log1p": 1, "erf": 1, "cbrt": 1,
           "logistic": 1, "exp": 1, "exp2": 1, "log": 1, "tanh": 1, "sin": 1, "cos": 1,
           "rsqrt": 1}
QUIRKS = {"float8_e4m3fnuz/nextafter", "float8_e5m2fnuz/nextafter",
          "float8_e4m3b11fnuz/nextafter", "float4_e2m1fn/to_int32", "float4_e2m1fn/to_int8",
          "float4_e2m1fn/to_uint8", "float4_e2m1fn/to_int4", "float8_e8m0fnu/from_f32",
          "bfloat16/lgamma", "float4_e2m1fn/asin", "float4_e2m1fn/acos",
          *(f"{f}/digamma" for f in ("bfloat16", "float8_e5m2", "float8_e3m4", "float8_e4m3",
                                     "float4_e2m1fn")),
          *(f"float8_e8m0fnu/{op}" for op in ("exp2", "asin", "asinh", "atanh", "lgamma",
                                              "nextafter"))}
_FTZ_FORMATS = ("bfloat16", "float8_e8m0fnu")


def _ordinal(b, dt):
    """Position of each encoding in the format's value order (sign-magnitude)."""
    b = np.asarray(b).astype(np.int64)
    nbits = 4 if dt == np.dtype(ml_dtypes.float4_e2m1fn) else dt.itemsize * 8
    if dt == np.dtype(ml_dtypes.float8_e8m0fnu):
        return b
    sign = 1 << (nbits - 1)
    return np.where(b & sign, -(b & (sign - 1)), b)


def _is_f32_subnormal(v):
    with np.errstate(all="ignore"):
        v = np.abs(np.asarray(v).astype(np.float64))
    return (v > 0) & (v < 2.0 ** -126)


def unexplained(key, args, got, want):
    """Indices where tracer's bits ``got`` differ from JAX's ``want`` beyond the departures
    above; and the largest ulp distance seen."""
    name, op = key.split("/", 1)
    if key in QUIRKS or got.shape != want.shape:
        return (np.arange(0) if key in QUIRKS else np.arange(max(len(got), 1))), 0
    diff = got != want
    if not diff.any():
        return np.flatnonzero(diff), 0
    out_dt = np.asarray(got).dtype
    # the result's format: the op's own, or the conversion's target
    rdt = dtype_of(op[3:].replace("f32", "float32")) if op.startswith("to_") else (
        dtype_of(name) if not op.startswith("from_") else dtype_of(name))
    if op in ("eq", "ne", "lt", "le", "gt", "ge", "is_finite"):
        rdt = np.dtype(np.bool_)
    if rdt.itemsize == out_dt.itemsize and (name in FLOATS or op.startswith("to_")) \
            and rdt != np.bool_ and rdt.kind not in "iu" and rdt.name not in INTS:
        with np.errstate(all="ignore"):
            g, w = from_bits(got, rdt).astype(np.float32), from_bits(want, rdt).astype(np.float32)
        diff &= ~(np.isnan(g) & np.isnan(w))
        ulps = np.abs(_ordinal(got, rdt) - _ordinal(want, rdt))
    else:
        ulps = np.where(diff, 99, 0)
    if name in _FTZ_FORMATS:
        src = [from_bits(a.view(uint_of(a.dtype)), a.dtype) if a.dtype != np.float32 else a
               for a in args]
        flushed = np.zeros(diff.shape, bool)
        for a in src:
            flushed |= _is_f32_subnormal(a)
        if rdt.kind not in "biu" and rdt.itemsize == out_dt.itemsize and rdt != np.bool_ \
                and rdt.name not in INTS:
            flushed |= _is_f32_subnormal(from_bits(got, rdt))
            flushed |= _is_f32_subnormal(from_bits(want, rdt))
            exact = from_bits(got, rdt).astype(np.float64)
            flushed |= (exact != 0) & (np.abs(exact) < 2.0 ** -125)
        diff &= ~flushed
    if op == "pow" and len(args) == 2:
        # pow(1, NaN) and pow(NaN, +-0) are 1 by C99 (NumPy's and libm's powf, and
        # XLA:CPU's on an AVX-512 machine: JAX 0.10.2 gives 1 there), NaN in the table
        # (recorded where XLA's bfloat16 pow gave NaN): either is accepted
        with np.errstate(all="ignore"):
            x, y = (from_bits(a.view(uint_of(a.dtype)), a.dtype).astype(np.float32)
                    if a.dtype != np.float32 else a for a in args)
            one = from_bits(got, rdt).astype(np.float32) == 1
        diff &= ~(one & (((x == 1) & np.isnan(y)) | (np.isnan(x) & (y == 0))))
    worst = int(ulps[diff].max()) if diff.any() else 0
    diff &= ~(ulps <= ULP_OPS.get(op, 0))
    return np.flatnonzero(diff), worst
