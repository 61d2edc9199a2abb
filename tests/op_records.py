"""One table of op records drives the generic primitive checks (STYLE_ANCHORS 7.7).

Each ``OpRecord`` says how to call one lax wrapper (``op``), which primitives it binds,
which argument shapes/params and dtypes to try, how to draw inputs (``rng``), the
independent NumPy/SciPy reference (``ref``), tolerances, and the facts the AD and vmap
checks need (``grad_order``, ``linear``, ``nondiff_argnums``). The tests in ``tests/lax``
iterate over ``RECORDS``:

- ``test_lax.py``: impl vs ``ref`` over sampled shapes x dtypes, edge values, abstract
  eval vs impl avals;
- ``test_lax_autodiff.py``: ``check_grads`` to ``grad_order`` in both modes, and the
  dot-product test <ct, f(x)> = <T(ct), x> for the ``linear`` argument groups;
- ``test_lax_vmap.py``: ``check_vmap`` over combinations of batch dims (negative and None
  included).

``TRACER_NUM_GENERATED_CASES`` (default 5) sets how many (shapes, dtype) cases each record
samples, like ``JAX_NUM_GENERATED_CASES``.
"""
from __future__ import annotations

import builtins
import dataclasses
import decimal
import itertools
import math
import os
import zlib
from typing import Any, Callable

import ml_dtypes
import numpy as np
import scipy.special as sps

import tracer  # noqa: F401  (the package first: it imports lax)
import lax
from lax import elementwise as ew, linalg, reductions, shapes
from tracer import dtypes
from tracer.interpreters import ad

NUM_CASES = int(os.environ.get("TRACER_NUM_GENERATED_CASES", "5"))

bool_ = np.dtype(np.bool_)
i8, i16, i32, i64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
u8, u16, u32, u64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
f16, f32, f64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64))
c64, c128 = np.dtype(np.complex64), np.dtype(np.complex128)

BOOL = (bool_,)
SINT = (i8, i16, i32, i64)
UINT = (u8, u16, u32, u64)
INT = SINT + UINT
FLOAT = (f16, f32, f64)
COMPLEX = (c64, c128)
INEXACT = FLOAT + COMPLEX
NUM = INT + INEXACT
ALL = BOOL + NUM
ORDERED = BOOL + INT + FLOAT
# The ml_dtypes low-precision types (issue 18). Records list the ones their op takes in
# ``lowp``; the generic sampled tests keep to ``dtypes``, the low-precision checks run the
# records over each format's edge values (``lowp_edge_values``) against ``lowp_ref``.
bf16 = np.dtype(ml_dtypes.bfloat16)
LOWP_FLOAT = tuple(np.dtype(getattr(ml_dtypes, n)) for n in (
    "bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
    "float8_e4m3b11fnuz", "float8_e3m4", "float8_e4m3", "float8_e8m0fnu", "float4_e2m1fn"))
LOWP_INT = tuple(np.dtype(getattr(ml_dtypes, n)) for n in ("int4", "uint4", "int2", "uint2"))
LOWP = LOWP_FLOAT + LOWP_INT


# ===================================== shapes ==========================================

@dataclasses.dataclass(frozen=True)
class Case:
    """Argument shapes plus the static params that go with them."""
    shapes: tuple
    params: tuple = ()          # sorted (name, value) pairs, hashable

    @property
    def kw(self):
        return dict(self.params)

    def __str__(self):
        s = ",".join("x".join(map(str, sh)) or "s" for sh in self.shapes)
        if self.params:
            s += "-" + "-".join(f"{k}={_short(v)}" for k, v in self.params)
        return s


def _short(v):
    return str(v).replace(" ", "")


def C(*shapes, **params):
    return Case(tuple(tuple(s) for s in shapes), tuple(sorted(params.items())))


UNARY = (C(()), C((4,)), C((2, 3)), C((0, 3)), C((1, 5)))
BINARY = (C((), ()), C((4,), (4,)), C((2, 3), (2, 3)), C((), (2, 3)), C((2, 3), ()),
          C((0, 3), (0, 3)), C((1, 5), (1, 5)))
GRAD_UNARY = (C(()), C((2, 3)))
GRAD_BINARY = (C((2, 3), (2, 3)), C((), (3,)))


# ================================ input generators =====================================

def _is_int(dt):
    return np.dtype(dt).kind in "iu"


def rand_default(scale=3.0):
    def rng(r, shape, dt):
        dt = np.dtype(dt)
        if dt == bool_:
            return r.random(shape) < 0.5
        if _is_int(dt):
            lo = 0 if dt.kind == "u" else -50
            return r.integers(lo, 50, shape).astype(dt)
        v = scale * r.standard_normal(shape)
        if dt.kind == "c":
            v = v + 1j * scale * r.standard_normal(shape)
        return np.asarray(v).astype(dt)
    return rng


def rand_positive(lo=0.5, hi=3.0):
    def rng(r, shape, dt):
        dt = np.dtype(dt)
        if _is_int(dt):
            return r.integers(1, 20, shape).astype(dt)
        v = r.uniform(lo, hi, shape)
        if dt.kind == "c":
            v = v + 1j * r.uniform(-1, 1, shape)
        return np.asarray(v).astype(dt)
    return rng


def rand_uniform(lo=-0.9, hi=0.9):
    def rng(r, shape, dt):
        dt = np.dtype(dt)
        v = r.uniform(lo, hi, shape)
        if dt.kind == "c":
            v = v + 1j * r.uniform(lo, hi, shape)
        return np.asarray(v).astype(dt)
    return rng


def rand_nonzero():
    def rng(r, shape, dt):
        dt = np.dtype(dt)
        if dt == bool_:
            return np.ones(shape, bool)
        if _is_int(dt):
            v = r.integers(1, 30, shape)
            if dt.kind == "i":
                v = v * r.choice([-1, 1], shape)
            return v.astype(dt)
        v = r.uniform(0.5, 3, shape) * r.choice([-1, 1], shape)
        if dt.kind == "c":
            v = v + 1j * r.uniform(0.5, 3, shape)
        return np.asarray(v).astype(dt)
    return rng


def rand_full_int():
    """Integers over the dtype's whole range (bit operations)."""
    def rng(r, shape, dt):
        dt = np.dtype(dt)
        if dt == bool_:
            return r.random(shape) < 0.5
        info = np.iinfo(dt)
        return r.integers(info.min, info.max, shape, dtype=dt, endpoint=True)
    return rng


def rand_bits():
    """Random bit patterns of any dtype (NaN payloads and subnormals included)."""
    def rng(r, shape, dt):
        dt = np.dtype(dt)
        raw = r.integers(0, 256, tuple(shape) + (dt.itemsize,), dtype=np.uint8)
        return raw.view(dt).reshape(shape) if dt != bool_ else raw[..., 0] % 2 == 1
    return rng


def rand_shift():
    """Shift amounts from 0 to past the bit width."""
    def rng(r, shape, dt):
        dt = np.dtype(dt)
        return r.integers(0, dt.itemsize * 8 + 3, shape).astype(dt)
    return rng


def rand_distinct():
    """Values without ties or near-ties (max/min/clamp/argmax gradients are smooth there)."""
    def rng(r, shape, dt):
        dt = np.dtype(dt)
        n = int(np.prod(shape))
        if dt == bool_:
            return r.random(shape) < 0.5
        if _is_int(dt):
            return r.integers(0 if dt.kind == "u" else -50, 50, shape).astype(dt)
        v = (r.permutation(n) - n / 2 + r.uniform(0.1, 0.4, n)).reshape(shape)
        return np.asarray(v * 0.5 + r.uniform(-0.02, 0.02, shape)).astype(dt)
    return rng


def rand_bool():
    return lambda r, shape, dt: r.random(shape) < 0.5


# ===================================== refs ============================================

def _hp(dt):
    """The higher-precision dtype references compute in."""
    dt = np.dtype(dt)
    if dt.kind == "f":
        return f64
    if dt.kind == "c":
        return c128
    return dt


def _hpfn(fn, out=None):
    """Reference ``fn`` computed in float64/complex128 and cast back to the input's dtype
    (or ``out(dtype)``)."""
    def ref(*xs, **kw):
        dt = xs[0].dtype
        with np.errstate(all="ignore"):
            r = fn(*[np.asarray(x).astype(_hp(x.dtype)) for x in xs], **kw)
            return np.asarray(r).astype(dt if out is None else out(dt))
    return ref


def _bcast(*xs):
    return np.broadcast_arrays(*xs)


def _pyelementwise(fn, out_dtype=None):
    """Reference through Python scalars: ``fn`` applied to each (broadcast) element."""
    def ref(*xs, **kw):
        xs = _bcast(*xs)
        dt = xs[0].dtype if out_dtype is None else np.dtype(out_dtype(xs[0].dtype))
        flat = [x.ravel().tolist() for x in xs]
        vals = [fn(*args, dtype=xs[0].dtype, **kw) for args in zip(*flat)]
        return np.array(vals, dtype=object).reshape(xs[0].shape).astype(dt) \
            if vals else np.zeros(xs[0].shape, dt)
    return ref


def _wrap_int(v, dt):
    """Python int ``v`` wrapped to integer dtype ``dt`` (two's complement)."""
    bits = np.dtype(dt).itemsize * 8
    v &= (1 << bits) - 1
    if np.dtype(dt).kind == "i" and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


def _ref_int_div(x, y, *, dtype):
    if y == 0:
        return _wrap_int(-1, dtype)
    q = builtins.abs(x) // builtins.abs(y)
    return _wrap_int(q if (x < 0) == (y < 0) else -q, dtype)


def _ref_int_rem(x, y, *, dtype):
    if y == 0:
        return x
    r = builtins.abs(x) % builtins.abs(y)
    return _wrap_int(-r if x < 0 else r, dtype)


def _ref_div(x, y):
    if _is_int(x.dtype):
        return _pyelementwise(_ref_int_div)(x, y)
    return _hpfn(np.true_divide)(x, y)


def _ref_rem(x, y):
    if _is_int(x.dtype):
        return _pyelementwise(_ref_int_rem)(x, y)
    return _hpfn(np.fmod)(x, y)


def _ref_pow(x, y):
    if _is_int(x.dtype):
        def p(a, b, *, dtype):
            if b >= 0:
                return _wrap_int(builtins.pow(a, b, 1 << _bits(dtype)), dtype)
            return {1: 1, -1: (-1) ** (-b)}.get(a, 0)
        return _pyelementwise(p)(x, y)
    return _hpfn(np.power)(x, y)


def _bits(dt):
    return np.dtype(dt).itemsize * 8


def _unsigned(v, dt):
    return v & ((1 << _bits(dt)) - 1)


def _ref_shift_left(x, y, *, dtype):
    s = _unsigned(y, dtype)
    return 0 if s >= _bits(dtype) else _wrap_int(x << s, dtype)


def _ref_sra(x, y, *, dtype):
    s = _unsigned(y, dtype)
    xs = _wrap_int(x, np.dtype(f"i{np.dtype(dtype).itemsize}"))
    r = xs >> builtins.min(s, _bits(dtype) - 1)
    return _wrap_int(r, dtype)


def _ref_srl(x, y, *, dtype):
    s = _unsigned(y, dtype)
    return 0 if s >= _bits(dtype) else _wrap_int(_unsigned(x, dtype) >> s, dtype)


def _ref_clz(x, *, dtype):
    return _bits(dtype) - _unsigned(x, dtype).bit_length()


def _ref_popcount(x, *, dtype):
    return bin(_unsigned(x, dtype)).count("1")


def _ref_round(rounding):
    # Exact decimal rounding of the float's exact value; the zero keeps x's sign.
    ctx = decimal.Context(prec=400)

    def ref(x, *, dtype):
        if not np.isfinite(x):
            return x
        d = decimal.Decimal(x).quantize(decimal.Decimal(1), rounding=rounding, context=ctx)
        return float(np.copysign(float(d), x))
    return ref


def _ref_integer_pow_complex(x, y):
    # XLA's definition (binary powering, the first factor taken as is): with infinities
    # and NaNs, complex products depend on the grouping, so the reference follows it.
    with np.errstate(all="ignore"):
        if y == 0:
            return np.ones_like(x)
        n, acc, base = builtins.abs(y), None, x.astype(c128)
        while n:
            if n & 1:
                acc = base if acc is None else acc * base
            n >>= 1
            if n:
                base = base * base
        return (1 / acc if y < 0 else acc).astype(x.dtype)


def _ref_sign(x):
    dt = x.dtype
    if dt.kind == "c":
        a = np.abs(x.astype(c128))
        with np.errstate(all="ignore"):
            # A zero keeps its signs (XLA).
            return np.where(a == 0, x, x.astype(c128) / np.where(a == 0, 1, a)).astype(dt)
    if dt.kind == "u":
        return (x > 0).astype(dt)
    # -0.0 keeps its sign, NaN stays NaN (XLA 'Sign').
    return np.where(x > 0, 1, np.where(x < 0, -1, x)).astype(dt)


def _ref_cbrt(x):
    if x.dtype.kind != "c":
        return _hpfn(np.cbrt)(x)

    def principal(v, dtype):
        # StableHLO's complex cbrt: |z|**(1/3) * (cos(t/3) + i sin(t/3)), t = arg z, in
        # Python's float64 math (inf * sin(0) is NaN there too)
        r = math.hypot(v.real, v.imag) ** (1 / 3)
        t = math.atan2(v.imag, v.real) / 3
        return builtins.complex(r * math.cos(t), r * math.sin(t))
    return _pyelementwise(principal)(x)


def _ref_atan2(x, y):
    if x.dtype.kind != "c":
        return _hpfn(np.arctan2)(x, y)
    # StableHLO's complex atan2(x, y) = -i log((y + i x) / sqrt(y^2 + x^2)), in complex128
    return _hpfn(lambda a, b: -1j * np.log((b + 1j * a) / np.sqrt(b * b + a * a)))(x, y)


def _ref_complex_pick(x, y, greater):
    """StableHLO's complex maximum (``greater``) / minimum, element by element through
    Python floats: x if its (real, imag) pair is lexicographically above (below) y's, the
    real parts deciding unless they compare equal; else y (so a NaN part picks y)."""
    out = np.empty(x.shape, x.dtype)
    for i in np.ndindex(*x.shape):
        a, b = x[i], y[i]
        ar, ai, br, bi = float(a.real), float(a.imag), float(b.real), float(b.imag)
        if greater:
            pick = ai > bi if ar == br else ar > br
        else:
            pick = ai < bi if ar == br else ar < br
        out[i] = a if pick else b
    return out


def _ref_max(x, y):
    x, y = _bcast(x, y)
    if x.dtype.kind == "c":
        return _ref_complex_pick(x, y, True)
    if x.dtype.kind == "f":
        # +0.0 is above -0.0; NaN in either gives NaN.
        with np.errstate(invalid="ignore"):
            both0 = (x == 0) & (y == 0)
            r = np.where(x > y, x, y)
            r = np.where(both0, np.where(np.signbit(x) & np.signbit(y), x, np.abs(x)), r)
            return np.where(np.isnan(x) | np.isnan(y), np.nan, r).astype(x.dtype)
    return np.where(x > y, x, y).astype(x.dtype)


def _ref_min(x, y):
    x, y = _bcast(x, y)
    if x.dtype.kind == "c":
        return _ref_complex_pick(x, y, False)
    if x.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            both0 = (x == 0) & (y == 0)
            r = np.where(x < y, x, y)
            r = np.where(both0, np.where(np.signbit(x) | np.signbit(y), -np.abs(x), x), r)
            return np.where(np.isnan(x) | np.isnan(y), np.nan, r).astype(x.dtype)
    return np.where(x < y, x, y).astype(x.dtype)


def _total_key(v):
    """A Python sort key for IEEE totalOrder on a float."""
    neg = np.signbit(v)
    if np.isnan(v):
        return (-2,) if neg else (2,)
    if v == 0:
        return (0, 0.0, -1 if neg else 1)
    return (0, float(v), 0)


def _ref_total(cmp):
    def ref(x, y):
        x, y = _bcast(x, y)
        if x.dtype.kind != "f":
            return cmp(x, y)
        out = [cmp(_total_key(a), _total_key(b)) for a, b in zip(x.ravel(), y.ravel())]
        return np.array(out, bool).reshape(x.shape)
    return ref


def _ref_cmp(fn):
    def ref(x, y):
        with np.errstate(invalid="ignore"):
            return np.asarray(fn(x, y)).astype(bool)
    return ref


def _ref_convert(x, *, new_dtype):
    new = np.dtype(new_dtype)
    if x.dtype.kind == "c" and new.kind != "c":
        x = x.real
    if new == bool_:
        return x != 0
    if x.dtype.kind in "fc" and new.kind in "iu":
        info = np.iinfo(new)

        def conv(v, dtype):
            if np.isnan(v):
                return 0
            if np.isinf(v):
                return info.max if v > 0 else info.min
            return builtins.max(info.min, builtins.min(info.max, int(v)))  # int() truncates
        return _pyelementwise(conv, lambda _: new)(x)
    if x.dtype.kind in "iub" and new.kind in "iu":
        return _pyelementwise(lambda v, dtype: _wrap_int(int(v), new), lambda _: new)(x)
    with np.errstate(all="ignore"):
        return x.astype(new)


def _ref_bitcast(x, *, new_dtype):
    new = np.dtype(new_dtype)
    b = np.ascontiguousarray(x).tobytes()
    flat = np.frombuffer(b, dtype=new)
    if new.itemsize == x.dtype.itemsize:
        return flat.reshape(x.shape)
    if new.itemsize < x.dtype.itemsize:
        return flat.reshape(x.shape + (x.dtype.itemsize // new.itemsize,))
    return flat.reshape(x.shape[:-1])


def _ref_reduce_precision(x, *, exponent_bits, mantissa_bits):
    # Only the formats of real dtypes are tested: rounding to the narrower dtype (NumPy
    # rounds to nearest even, overflows to inf), with the narrower format's subnormals
    # flushed to (signed) zero as XLA does.
    target = {(5, 10): f16, (8, 23): f32, (11, 52): f64}[(exponent_bits, mantissa_bits)]
    with np.errstate(all="ignore"):
        r = x.astype(target).astype(x.dtype)
    if exponent_bits < np.finfo(x.dtype).iexp:
        tiny = np.finfo(target).tiny
        r = np.where(np.abs(r) < tiny, np.copysign(0, x), r).astype(x.dtype)
    return r


def _ref_select_n(which, *cases):
    which = np.broadcast_to(which, cases[0].shape)
    out = np.empty(cases[0].shape, cases[0].dtype)
    for idx in np.ndindex(*cases[0].shape):
        out[idx] = cases[int(which[idx])][idx]
    return out


def _ref_pad(x, v, *, padding_config):
    # Each output index maps back to an operand index, or to the padding value.
    out_shape = tuple(lo + hi + n + builtins.max(n - 1, 0) * it
                      for n, (lo, hi, it) in zip(x.shape, padding_config))
    out = np.full(out_shape, v, x.dtype)
    for idx in np.ndindex(*out_shape):
        src = []
        for o, n, (lo, hi, it) in zip(idx, x.shape, padding_config):
            p = o - lo
            if p < 0 or p % (it + 1) or p // (it + 1) >= n:
                break
            src.append(p // (it + 1))
        else:
            out[idx] = x[tuple(src)]
    return out


def _ref_broadcast_in_dim(x, *, shape, broadcast_dimensions):
    expanded = x
    for d in range(len(shape)):
        if d not in broadcast_dimensions:
            expanded = np.expand_dims(expanded, d)
    return np.broadcast_to(expanded, shape).copy()


def _ref_dot_general(lhs, rhs, *, dimension_numbers, precision=None,
                     preferred_element_type=None):
    (lc, rc), (lb, rb) = dimension_numbers
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    lsub = [next(letters) for _ in range(lhs.ndim)]
    rsub = [None] * rhs.ndim
    for a, b in zip(lc, rc):
        rsub[b] = lsub[a]
    for a, b in zip(lb, rb):
        rsub[b] = lsub[a]
    rsub = [s or next(letters) for s in rsub]
    out = [lsub[i] for i in lb] + [lsub[i] for i in range(lhs.ndim) if i not in lc + lb] + \
        [rsub[i] for i in range(rhs.ndim) if i not in rc + rb]
    spec = f"{''.join(lsub)},{''.join(rsub)}->{''.join(out)}"
    out_dt = lhs.dtype if preferred_element_type is None else np.dtype(preferred_element_type)
    if lhs.dtype == bool_:
        return np.einsum(spec, lhs.astype(np.int64), rhs.astype(np.int64)) > 0
    if _is_int(lhs.dtype) and out_dt.kind in "fc":
        # Converted first, then contracted (exact for these small integers).
        return np.einsum(spec, lhs.astype(np.float64), rhs.astype(np.float64)).astype(out_dt)
    if _is_int(lhs.dtype):
        # Integer products wrap in the result dtype: compute exactly, then wrap.
        r = np.einsum(spec, lhs.astype(object), rhs.astype(object)) if lhs.size and rhs.size \
            else np.einsum(spec, lhs.astype(np.int64), rhs.astype(np.int64))
        return np.vectorize(lambda v: _wrap_int(int(v), out_dt), otypes=[object])(r) \
            .astype(out_dt) if np.size(r) else np.zeros(np.shape(r), out_dt)
    hp = c128 if (lhs.dtype.kind == "c" or out_dt.kind == "c") else f64
    return np.einsum(spec, lhs.astype(hp), rhs.astype(hp)).astype(out_dt)


def _ref_reduce(npfn, **extra):
    def ref(x, *, axes):
        with np.errstate(all="ignore"):
            if x.dtype.kind in "fc":
                return np.asarray(npfn(x.astype(_hp(x.dtype)), axis=axes, **extra)
                                  ).astype(x.dtype)
            if _is_int(x.dtype) and npfn in (np.sum, np.prod):
                r = npfn(x.astype(object), axis=axes) if x.size else \
                    npfn(x.astype(np.int64), axis=axes)
                return np.vectorize(lambda v: _wrap_int(int(v), x.dtype), otypes=[object])(
                    np.asarray(r)).astype(x.dtype) if np.size(r) else \
                    np.zeros(np.shape(r), x.dtype)
            return np.asarray(npfn(x, axis=axes, **extra)).astype(x.dtype)
    return ref


def _minmax_init(dt, is_max):
    if dt == bool_:
        return not is_max
    if dt.kind == "f":
        return -np.inf if is_max else np.inf
    info = np.iinfo(dt)
    return info.min if is_max else info.max


def _ref_reduce_max(x, *, axes):
    return np.max(x, axis=axes, initial=_minmax_init(x.dtype, True))


def _ref_reduce_min(x, *, axes):
    return np.min(x, axis=axes, initial=_minmax_init(x.dtype, False))


def _ref_reduce_bits(op, identity):
    def ref(x, *, axes):
        kept = [i for i in range(x.ndim) if i not in axes]
        y = np.transpose(x, kept + list(axes)).reshape(
            tuple(x.shape[i] for i in kept) + (-1,))
        out = np.empty(y.shape[:-1], x.dtype)
        for idx in np.ndindex(*out.shape):
            acc = identity(x.dtype)
            for v in y[idx]:
                acc = op(acc, v)
            out[idx] = acc
        return out
    return ref


# ===================================== records =========================================

@dataclasses.dataclass(frozen=True)
class OpRecord:
    """How to test one lax wrapper.

    name: test id. op: ``op(*args, **params)``. prims: the primitives ``op`` binds (for the
    registry's coverage check). nargs: array arguments. cases: ``Case``s (argument shapes
    and the static params that go with them). dtypes: dtypes of the first argument (the
    others take the same unless ``arg_dtypes(dtype)`` says otherwise). rng: ``rng(np_rng,
    shape, dtype)`` for each argument (a tuple gives one per argument). ref: the
    independent NumPy/SciPy reference. tol: {dtype: rtol} overrides. grad_order: 0 when
    not differentiable; grad_dtypes/grad_cases/grad_rng: inputs for check_grads.
    nondiff_argnums: arguments held fixed under grad (predicates, integers). linear:
    groups of arguments the op is jointly linear in (the transpose test), e.g. ((0,), (1,))
    for mul, ((0, 1),) for pad. vmap: False for nullary ops.
    """
    name: str
    op: Callable
    prims: tuple
    nargs: int
    cases: tuple
    dtypes: tuple
    rng: Any = dataclasses.field(default_factory=rand_default)
    ref: Callable | None = None
    tol: dict | None = None
    grad_order: int = 0
    grad_dtypes: tuple = (f64,)
    grad_cases: tuple | None = None
    grad_rng: Any = None
    grad_tol: float | None = None
    nondiff_argnums: tuple = ()
    linear: tuple = ()
    arg_dtypes: Callable | None = None
    edge: bool = True
    vmap: bool = True
    lowp: tuple = ()                 # the low-precision dtypes the op takes
    lowp_ulps: int = 0               # allowed error in units of the format's last place

    def __str__(self):
        return self.name

    def dtypes_for(self, dt):
        if self.arg_dtypes is not None:
            return tuple(np.dtype(d) for d in self.arg_dtypes(np.dtype(dt)))
        return (np.dtype(dt),) * self.nargs

    def rng_for(self, i):
        return self.rng[i] if isinstance(self.rng, tuple) else self.rng

    def make_args(self, r, case, dt, rng=None):
        dts = self.dtypes_for(dt)
        out = []
        for i, (shape, d) in enumerate(zip(case.shapes, dts)):
            g = rng[i] if isinstance(rng, tuple) else rng
            g = g if g is not None else self.rng_for(i)
            out.append(np.asarray(g(r, shape, d)).astype(d))
        return out


def _p(*prims):
    return tuple(prims)


def unop(name, op, prim, dts, ref, *, cases=UNARY, grad=0, grad_dtypes=(f64,),
         rng=None, grad_rng=None, linear=(), tol=None, **kw):
    return OpRecord(name, op, _p(prim), 1, cases, dts, rng or rand_default(), ref, tol,
                    grad, grad_dtypes, kw.pop("grad_cases", GRAD_UNARY), grad_rng,
                    linear=linear, **kw)


def binop(name, op, prim, dts, ref, *, cases=BINARY, grad=0, grad_dtypes=(f64,),
          rng=None, grad_rng=None, linear=(), tol=None, **kw):
    return OpRecord(name, op, _p(prim), 2, cases, dts, rng or rand_default(), ref, tol,
                    grad, grad_dtypes, kw.pop("grad_cases", GRAD_BINARY), grad_rng,
                    linear=linear, **kw)


def _complex_of(dt):
    return c128 if dt == f64 else c64


def _real_of(dt):
    return {c64: f32, c128: f64}.get(dt, dt)


R = []

# ---------------------------------- unary element-wise ----------------------------------
_INEX_GRAD = (f64, c128)
R += [
    unop("neg", lax.neg, ew.neg_p, NUM, lambda x: np.negative(x), grad=2,
         grad_dtypes=_INEX_GRAD, linear=((0,),)),
    unop("sign", lax.sign, ew.sign_p, SINT + UINT + INEXACT, _ref_sign),
    unop("floor", lax.floor, ew.floor_p, FLOAT, lambda x: np.floor(x)),
    unop("ceil", lax.ceil, ew.ceil_p, FLOAT, lambda x: np.ceil(x)),
    unop("round", lax.round, ew.round_p, FLOAT, _pyelementwise(_ref_round(decimal.ROUND_HALF_UP))),
    unop("round_nearest_even",
         lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN), ew.round_p, FLOAT,
         _pyelementwise(_ref_round(decimal.ROUND_HALF_EVEN))),
    unop("is_finite", lax.is_finite, ew.is_finite_p, FLOAT, lambda x: np.isfinite(x)),
    unop("exp", lax.exp, ew.exp_p, INEXACT, _hpfn(np.exp), grad=2, grad_dtypes=_INEX_GRAD),
    unop("exp2", lax.exp2, ew.exp2_p, INEXACT, _hpfn(np.exp2), grad=2,
         grad_dtypes=_INEX_GRAD),
    unop("log", lax.log, ew.log_p, INEXACT, _hpfn(np.log), rng=rand_positive(), grad=2,
         grad_dtypes=_INEX_GRAD),
    unop("expm1", lax.expm1, ew.expm1_p, INEXACT, _hpfn(np.expm1), grad=2,
         grad_dtypes=_INEX_GRAD),
    unop("log1p", lax.log1p, ew.log1p_p, INEXACT, _hpfn(np.log1p), rng=rand_positive(),
         grad=2, grad_dtypes=_INEX_GRAD),
    unop("tanh", lax.tanh, ew.tanh_p, INEXACT, _hpfn(np.tanh), rng=rand_uniform(-2, 2),
         grad=2, grad_dtypes=_INEX_GRAD),
    unop("logistic", lax.logistic, ew.logistic_p, INEXACT,
         _hpfn(lambda x: 1 / (1 + np.exp(-x))), grad=2, grad_dtypes=_INEX_GRAD),
    unop("sin", lax.sin, ew.sin_p, INEXACT, _hpfn(np.sin), grad=2, grad_dtypes=_INEX_GRAD),
    unop("cos", lax.cos, ew.cos_p, INEXACT, _hpfn(np.cos), grad=2, grad_dtypes=_INEX_GRAD),
    unop("tan", lax.tan, ew.tan_p, INEXACT, _hpfn(np.tan), rng=rand_uniform(-1.2, 1.2),
         grad=2, grad_dtypes=_INEX_GRAD, tol={f16: 2e-2, c64: 1e-5, f32: 1e-5}),
    unop("sqrt", lax.sqrt, ew.sqrt_p, INEXACT, _hpfn(np.sqrt), rng=rand_positive(), grad=2,
         grad_dtypes=_INEX_GRAD),
    unop("rsqrt", lax.rsqrt, ew.rsqrt_p, INEXACT, _hpfn(lambda x: 1 / np.sqrt(x)),
         rng=rand_positive(), grad=2, grad_dtypes=_INEX_GRAD),
    unop("cbrt", lax.cbrt, ew.cbrt_p, INEXACT, _ref_cbrt, rng=rand_nonzero(), grad=2,
         grad_dtypes=(f64, c128)),
    unop("erf", lax.erf, ew.erf_p, FLOAT, _hpfn(sps.erf), grad=2),
    unop("abs", lax.abs, ew.abs_p, SINT + INEXACT,
         lambda x: np.abs(x.astype(_hp(x.dtype))).astype(_real_of(x.dtype))
         if x.dtype.kind in "fc" else np.abs(x),
         grad=2, grad_dtypes=_INEX_GRAD, grad_rng=rand_nonzero()),
    unop("not", lax.bitwise_not, ew.not_p, BOOL + INT,
         lambda x: ~x, rng=rand_full_int()),
    unop("population_count", lax.population_count, ew.population_count_p, INT,
         _pyelementwise(_ref_popcount), rng=rand_full_int()),
    unop("clz", lax.clz, ew.clz_p, INT, _pyelementwise(_ref_clz), rng=rand_full_int()),
    # XLA 'Real'/'Imag' of a floating operand: the operand itself / zeros
    unop("real", lax.real, ew.real_p, INEXACT, lambda x: x.copy() if x.dtype.kind == "f"
         else np.real(x).copy(), grad=2, grad_dtypes=(f64, c128), linear=((0,),)),
    unop("imag", lax.imag, ew.imag_p, INEXACT, lambda x: np.zeros_like(x)
         if x.dtype.kind == "f" else np.imag(x).copy(), grad=2, grad_dtypes=(f64, c128),
         linear=((0,),)),
    unop("conj", lax.conj, ew.conj_p, FLOAT + COMPLEX,
         lambda x: x.astype(_complex_of(x.dtype)) if x.dtype.kind == "f" else np.conj(x),
         grad=2, grad_dtypes=(f64, c128), linear=((0,),)),
    unop("square", lax.square, ew.square_p, NUM,
         lambda x: (x * x) if _is_int(x.dtype) else _hpfn(np.square)(x), grad=2,
         grad_dtypes=_INEX_GRAD),
    unop("reciprocal", lax.reciprocal, ew.integer_pow_p, INEXACT, _hpfn(lambda x: 1 / x),
         rng=rand_nonzero(), grad=2, grad_dtypes=_INEX_GRAD),
]
for _y in (0, 1, 2, 3, 5, -2):
    R.append(unop(
        f"integer_pow_{_y}".replace("-", "m"), lambda x, _y=_y: lax.integer_pow(x, _y),
        ew.integer_pow_p, INEXACT if _y < 0 else NUM,
        lambda x, _y=_y: (_pyelementwise(lambda v, dtype: _wrap_int(v ** _y, dtype))(x)
                          if _is_int(x.dtype) else _ref_integer_pow_complex(x, _y)
                          if x.dtype.kind == "c" else _hpfn(lambda v: v ** _y)(x)),
        rng=rand_nonzero() if _y < 0 else rand_uniform(-2, 2),
        grad=2, grad_dtypes=_INEX_GRAD, tol={f16: 1e-2}))

# ---------------------------------- binary element-wise ---------------------------------
R += [
    # bool: StableHLO's add on i1 is the logical or
    binop("add", lax.add, ew.add_p, ALL,
          lambda x, y: (x | y) if x.dtype == bool_ else np.add(x, y)
          if _is_int(x.dtype) else _hpfn(np.add)(x, y),
          grad=2, grad_dtypes=_INEX_GRAD, linear=((0, 1),)),
    binop("sub", lax.sub, ew.sub_p, NUM,
          lambda x, y: np.subtract(x, y) if _is_int(x.dtype) else _hpfn(np.subtract)(x, y),
          grad=2, grad_dtypes=_INEX_GRAD, linear=((0, 1),)),
    binop("mul", lax.mul, ew.mul_p, ALL,
          lambda x, y: (x & y) if x.dtype == bool_ else np.multiply(x, y)
          if _is_int(x.dtype) else _hpfn(np.multiply)(x, y),
          grad=2, grad_dtypes=_INEX_GRAD, linear=((0,), (1,))),
    binop("div", lax.div, ew.div_p, NUM, _ref_div, rng=(rand_default(), rand_nonzero()),
          grad=2, grad_dtypes=_INEX_GRAD, linear=((0,),)),
    binop("rem", lax.rem, ew.rem_p, INT + FLOAT, _ref_rem,
          rng=(rand_default(), rand_nonzero()), grad=2,
          grad_rng=(rand_uniform(0.1, 0.9), rand_uniform(1.1, 2.0))),
    binop("pow", lax.pow, ew.pow_p, INEXACT + INT, _ref_pow,
          rng=(rand_positive(), rand_uniform(-2, 2)), grad=2, grad_dtypes=_INEX_GRAD,
          tol={f16: 1e-2, c64: 1e-5}),
    binop("max", lax.max, ew.max_p, ORDERED + COMPLEX, _ref_max, rng=rand_distinct(),
          grad=2, grad_dtypes=(f64, c128)),
    binop("min", lax.min, ew.min_p, ORDERED + COMPLEX, _ref_min, rng=rand_distinct(),
          grad=2, grad_dtypes=(f64, c128)),
    binop("atan2", lax.atan2, ew.atan2_p, INEXACT, _ref_atan2, grad=2,
          grad_dtypes=(f64, c128), grad_rng=rand_nonzero()),
    binop("and", lax.bitwise_and, ew.and_p, BOOL + INT, lambda x, y: x & y,
          rng=rand_full_int()),
    binop("or", lax.bitwise_or, ew.or_p, BOOL + INT, lambda x, y: x | y,
          rng=rand_full_int()),
    binop("xor", lax.bitwise_xor, ew.xor_p, BOOL + INT, lambda x, y: x ^ y,
          rng=rand_full_int()),
    binop("shift_left", lax.shift_left, ew.shift_left_p, INT,
          _pyelementwise(_ref_shift_left), rng=(rand_full_int(), rand_shift())),
    binop("shift_right_arithmetic", lax.shift_right_arithmetic,
          ew.shift_right_arithmetic_p, INT, _pyelementwise(_ref_sra),
          rng=(rand_full_int(), rand_shift())),
    binop("shift_right_logical", lax.shift_right_logical, ew.shift_right_logical_p, INT,
          _pyelementwise(_ref_srl), rng=(rand_full_int(), rand_shift())),
    binop("complex", lax.complex, ew.complex_p, (f32, f64),
          _pyelementwise(lambda a, b, dtype: builtins.complex(a, b), _complex_of),
          grad=2, linear=((0, 1),)),
]
def _rand_ties():
    """Small integers-valued inputs, so that comparisons see ties."""
    def rng(r, shape, dt):
        dt = np.dtype(dt)
        if dt == bool_:
            return r.random(shape) < 0.5
        v = r.integers(0 if dt.kind == "u" else -2, 3, shape)
        if dt.kind == "c":
            v = v + 1j * r.integers(-1, 2, shape)
        return v.astype(dt)
    return rng


for _name, _fn, _np in (("eq", lax.eq, np.equal), ("ne", lax.ne, np.not_equal),
                        ("lt", lax.lt, np.less), ("le", lax.le, np.less_equal),
                        ("gt", lax.gt, np.greater), ("ge", lax.ge, np.greater_equal)):
    R.append(binop(_name, _fn, getattr(ew, f"{_name}_p"),
                   ALL if _name in ("eq", "ne") else ORDERED, _ref_cmp(_np),
                   rng=_rand_ties()))
R += [
    binop("eq_total_order", lax.eq_total_order, ew.eq_to_p, ORDERED,
          _ref_total(lambda a, b: a == b)),
    binop("lt_total_order", lax.lt_total_order, ew.lt_to_p, ORDERED,
          _ref_total(lambda a, b: a < b)),
    binop("le_total_order", lax.le_total_order, ew.le_to_p, ORDERED,
          _ref_total(lambda a, b: a <= b)),
    binop("ne_total_order", lax.ne_total_order, ew.ne_to_p, ORDERED,
          _ref_total(lambda a, b: a != b)),
    binop("gt_total_order", lax.gt_total_order, ew.gt_to_p, ORDERED,
          _ref_total(lambda a, b: a > b)),
    binop("ge_total_order", lax.ge_total_order, ew.ge_to_p, ORDERED,
          _ref_total(lambda a, b: a >= b)),
]

# ------------------------------------ select / clamp ------------------------------------
R += [
    OpRecord("select_n_bool", lax.select_n, _p(ew.select_n_p), 3,
             (C((), (), ()), C((4,), (4,), (4,)), C((), (2, 3), (2, 3)),
              C((2, 3), (2, 3), (2, 3)), C((0, 2), (0, 2), (0, 2))),
             ALL, (rand_bool(), rand_default(), rand_default()), _ref_select_n,
             arg_dtypes=lambda d: (bool_, d, d), grad_order=2, grad_dtypes=(f64, c128),
             grad_cases=(C((2, 3), (2, 3), (2, 3)), C((), (3,), (3,))),
             nondiff_argnums=(0,), linear=((1, 2),)),
    OpRecord("select_n_int", lax.select_n, _p(ew.select_n_p), 4,
             (C((4,), (4,), (4,), (4,)), C((), (2, 3), (2, 3), (2, 3)),
              C((2, 3), (2, 3), (2, 3), (2, 3))),
             NUM, (lambda r, s, d: r.integers(0, 3, s).astype(d), rand_default(),
                   rand_default(), rand_default()),
             _ref_select_n, arg_dtypes=lambda d: (i32, d, d, d), grad_order=2,
             grad_cases=(C((2, 3), (2, 3), (2, 3), (2, 3)),), nondiff_argnums=(0,),
             linear=((1, 2, 3),)),
    OpRecord("clamp", lax.clamp, _p(ew.clamp_p), 3,
             (C((), (4,), ()), C((2, 3), (2, 3), (2, 3)), C((), (), ()), C((), (0, 3), ())),
             ORDERED, (lambda r, s, d: rand_default()(r, s, d) - (1 if d.kind != "b" else 0)
                       if d.kind in "fi" else rand_default()(r, s, d),
                       rand_default(), lambda r, s, d: rand_default()(r, s, d)),
             lambda lo, x, hi: np.minimum(np.maximum(x, lo), hi).astype(x.dtype)
             if x.dtype.kind != "b" else np.minimum(np.maximum(x, lo), hi),
             grad_order=2, grad_rng=(lambda r, s, d: np.full(s, -1.0, d), rand_distinct(),
                                     lambda r, s, d: np.full(s, 1.0, d)),
             grad_cases=(C((), (2, 3), ()), C((2, 3), (2, 3), (2, 3)))),
]

# ---------------------------------- dtype conversions -----------------------------------
_CONVERT_PAIRS = [(a, b) for a in ALL for b in ALL]


def _convert_record(name, pairs, **kw):
    # The destination dtype rides along as a param: one case per (src, dst) pair.
    cases = tuple(C((2, 3), new_dtype=b) for b in sorted({p[1] for p in pairs}, key=str))
    return OpRecord(name, lambda x, new_dtype: lax.convert_element_type(x, new_dtype),
                    _p(ew.convert_element_type_p), 1, cases,
                    tuple(sorted({p[0] for p in pairs}, key=str)), rand_default(),
                    _ref_convert, **kw)


R += [
    _convert_record("convert_element_type", _CONVERT_PAIRS),
    OpRecord("convert_element_type_float",
             lambda x, new_dtype: lax.convert_element_type(x, new_dtype),
             _p(ew.convert_element_type_p), 1,
             (C((2, 3), new_dtype=f32), C((), new_dtype=f64), C((3,), new_dtype=c128)),
             (f32, f64), rand_default(), _ref_convert, grad_order=2,
             grad_cases=(C((2, 3), new_dtype=f32), C((3,), new_dtype=f64),
                         C((3,), new_dtype=c128)),
             grad_tol=1e-2, linear=((0,),)),
    OpRecord("bitcast_convert_type",
             lambda x, new_dtype: lax.bitcast_convert_type(x, new_dtype),
             _p(ew.bitcast_convert_type_p), 1,
             (C((2, 3), new_dtype=u8), C((3,), new_dtype=i16), C((2, 4), new_dtype=f32),
              C((3, 2), new_dtype=i64), C((3, 8), new_dtype=c128), C((4,), new_dtype=u32),
              C((0, 2), new_dtype=i32)),
             (u8, i16, i32, u32, f32, f64, i64, c64), rand_bits(), _ref_bitcast),
    OpRecord("reduce_precision",
             lambda x, exponent_bits, mantissa_bits: lax.reduce_precision(
                 x, exponent_bits, mantissa_bits),
             _p(ew.reduce_precision_p), 1,
             (C((2, 3), exponent_bits=5, mantissa_bits=10),
              C((4,), exponent_bits=8, mantissa_bits=23),
              C((), exponent_bits=11, mantissa_bits=52)),
             (f32, f64), rand_default(1e3), _ref_reduce_precision,
             # JAX's convention: linear (its tangent is rounded the same way).
             linear=((0,),), grad_dtypes=(f64,)),
]

# ------------------------------------------ shapes --------------------------------------
R += [
    OpRecord("broadcast_in_dim",
             lambda x, shape, broadcast_dimensions: lax.broadcast_in_dim(
                 x, shape, broadcast_dimensions), _p(shapes.broadcast_in_dim_p), 1,
             (C((), shape=(2, 3), broadcast_dimensions=()),
              C((3,), shape=(2, 3), broadcast_dimensions=(1,)),
              C((2,), shape=(2, 3), broadcast_dimensions=(0,)),
              C((1, 3), shape=(4, 2, 3), broadcast_dimensions=(1, 2)),
              C((2, 1), shape=(2, 0), broadcast_dimensions=(0, 1)),
              C((0,), shape=(2, 0), broadcast_dimensions=(1,))),
             ALL, rand_default(), _ref_broadcast_in_dim, grad_order=2,
             grad_dtypes=(f64, c128), linear=((0,),)),
    OpRecord("broadcast", lambda x, sizes: lax.broadcast(x, sizes),
             _p(shapes.broadcast_in_dim_p), 1,
             (C((3,), sizes=(2,)), C((), sizes=(2, 3)), C((2, 3), sizes=(1, 2))),
             NUM, rand_default(),
             lambda x, sizes: np.broadcast_to(x, tuple(sizes) + x.shape).copy(),
             grad_order=2, linear=((0,),)),
    OpRecord("expand_dims", lambda x, dimensions: lax.expand_dims(x, dimensions),
             _p(shapes.broadcast_in_dim_p), 1,
             (C((3,), dimensions=(0,)), C((2, 3), dimensions=(1, 3)), C((), dimensions=(0,)),
              C((2, 3), dimensions=(-1,))),
             ALL, rand_default(),
             lambda x, dimensions: np.expand_dims(x, dimensions), grad_order=2,
             linear=((0,),)),
    OpRecord("reshape", lambda x, new_sizes, dimensions: lax.reshape(x, new_sizes, dimensions),
             _p(shapes.reshape_p), 1,
             (C((2, 3), new_sizes=(3, 2), dimensions=None),
              C((2, 3), new_sizes=(6,), dimensions=None),
              C((6,), new_sizes=(1, 2, 3), dimensions=None),
              C((), new_sizes=(1, 1), dimensions=None),
              C((2, 3), new_sizes=(6,), dimensions=(1, 0)),
              C((0, 3), new_sizes=(3, 0), dimensions=None)),
             ALL, rand_default(),
             lambda x, new_sizes, dimensions: np.reshape(
                 x if dimensions is None else np.transpose(x, dimensions), new_sizes),
             grad_order=2, grad_dtypes=(f64, c128), linear=((0,),)),
    OpRecord("squeeze", lambda x, dimensions: lax.squeeze(x, dimensions),
             _p(shapes.reshape_p), 1,
             (C((1, 3), dimensions=(0,)), C((2, 1, 1), dimensions=(1, 2)),
              C((1,), dimensions=(0,)), C((2, 1), dimensions=(-1,))),
             ALL, rand_default(), lambda x, dimensions: np.squeeze(x, tuple(dimensions)),
             grad_order=2, linear=((0,),)),
    OpRecord("collapse",
             lambda x, start, stop: lax.collapse(x, start, stop), _p(shapes.reshape_p), 1,
             (C((2, 3, 4), start=0, stop=2), C((2, 3, 4), start=1, stop=None),
              C((2, 3), start=0, stop=None), C((2, 0, 3), start=1, stop=3)),
             ALL, rand_default(),
             lambda x, start, stop: x.reshape(
                 x.shape[:start] + (-1,) + x.shape[(x.ndim if stop is None else stop):])
             if x.size else x.reshape(x.shape[:start] + (int(np.prod(
                 x.shape[start:stop])),) + x.shape[(x.ndim if stop is None else stop):]),
             grad_order=2, linear=((0,),)),
    OpRecord("transpose", lambda x, permutation: lax.transpose(x, permutation),
             _p(shapes.transpose_p), 1,
             (C((2, 3), permutation=(1, 0)), C((2, 3, 4), permutation=(2, 0, 1)),
              C((2, 0, 3), permutation=(1, 2, 0)), C((3,), permutation=(0,))),
             ALL, rand_default(), lambda x, permutation: np.transpose(x, permutation).copy(),
             grad_order=2, grad_dtypes=(f64, c128), linear=((0,),)),
    OpRecord("rev", lambda x, dimensions: lax.rev(x, dimensions), _p(shapes.rev_p), 1,
             (C((4,), dimensions=(0,)), C((2, 3), dimensions=(1,)),
              C((2, 3, 2), dimensions=(0, 2)), C((0, 3), dimensions=(0, 1))),
             ALL, rand_default(), lambda x, dimensions: np.flip(x, dimensions).copy(),
             grad_order=2, linear=((0,),)),
    OpRecord("slice",
             lambda x, start_indices, limit_indices, strides: lax.slice(
                 x, start_indices, limit_indices, strides), _p(shapes.slice_p), 1,
             (C((5,), start_indices=(1,), limit_indices=(4,), strides=None),
              C((6, 5), start_indices=(0, 1), limit_indices=(6, 5), strides=(2, 3)),
              C((7,), start_indices=(1,), limit_indices=(6,), strides=(2,)),
              C((4, 3), start_indices=(2, 0), limit_indices=(2, 3), strides=None),
              C((5, 4), start_indices=(1, 1), limit_indices=(5, 4), strides=(3, 5))),
             ALL, rand_default(),
             lambda x, start_indices, limit_indices, strides: x[tuple(
                 builtins.slice(s, l, k) for s, l, k in zip(
                     start_indices, limit_indices, strides or (1,) * x.ndim))].copy(),
             grad_order=2, grad_dtypes=(f64, c128), linear=((0,),)),
    OpRecord("slice_in_dim",
             lambda x, start, limit, stride, axis: lax.slice_in_dim(x, start, limit, stride,
                                                                    axis),
             _p(shapes.slice_p), 1,
             (C((5, 3), start=1, limit=-1, stride=2, axis=0),
              C((2, 6), start=None, limit=None, stride=3, axis=-1)),
             NUM, rand_default(),
             lambda x, start, limit, stride, axis: x[(builtins.slice(None),) * (
                 axis % x.ndim) + (builtins.slice(start, limit, stride),)].copy(),
             grad_order=1, linear=((0,),)),
    OpRecord("concatenate", lambda *xs, dimension: lax.concatenate(xs, dimension),
             _p(shapes.concatenate_p), 3,
             (C((2,), (3,), (1,), dimension=0), C((2, 3), (2, 1), (2, 2), dimension=1),
              C((1, 3), (0, 3), (2, 3), dimension=0), C((2, 3), (2, 3), (2, 3), dimension=-1)),
             ALL, rand_default(), lambda *xs, dimension: np.concatenate(xs, dimension),
             grad_order=2, grad_dtypes=(f64, c128), linear=((0, 1, 2),)),
    OpRecord("pad", lambda x, v, padding_config: lax.pad(x, v, padding_config),
             _p(shapes.pad_p), 2,
             (C((3,), (), padding_config=((1, 2, 0),)),
              C((3,), (), padding_config=((0, 0, 2),)),
              C((2, 3), (), padding_config=((1, -1, 1), (-2, 2, 0))),
              C((4,), (), padding_config=((-1, -2, 1),)),
              C((2, 3), (), padding_config=((0, 0, 0), (2, -3, 3))),
              C((0, 2), (), padding_config=((1, 1, 2), (0, 1, 0))),
              C((1, 2), (), padding_config=((-1, 0, 0), (0, 0, 0)))),
             ALL, rand_default(), _ref_pad, grad_order=2, grad_dtypes=(f64, c128),
             linear=((0, 1),)),
    OpRecord("iota", lambda dtype, size: lax.iota(dtype, size), _p(shapes.iota_p), 0,
             (C(dtype=i32, size=5), C(dtype=f32, size=0), C(dtype=u8, size=3),
              C(dtype=f64, size=4), C(dtype=c64, size=2), C(dtype=i64, size=1)),
             (None,), rand_default(), lambda dtype, size: np.arange(size).astype(dtype),
             vmap=False),
    OpRecord("broadcasted_iota",
             lambda dtype, shape, dimension: lax.broadcasted_iota(dtype, shape, dimension),
             _p(shapes.iota_p), 0,
             (C(dtype=i32, shape=(2, 3), dimension=1), C(dtype=f32, shape=(3, 2), dimension=0),
              C(dtype=i16, shape=(2, 0, 2), dimension=2)),
             (None,), rand_default(),
             lambda dtype, shape, dimension: np.broadcast_to(np.arange(shape[dimension]).reshape(
                 [-1 if i == dimension else 1 for i in range(len(shape))]), shape
             ).astype(dtype), vmap=False),
]

# ---------------------------------------- reductions ------------------------------------
_RED_CASES = (C((3, 4), axes=(0,)), C((3, 4), axes=(1,)), C((2, 3, 4), axes=(0, 2)),
              C((5,), axes=(0,)), C((0, 3), axes=(0,)), C((2, 0), axes=(1,)),
              C((2, 3), axes=(0, 1)), C((1, 3), axes=(0,)))
_RED_GRAD = (C((3, 4), axes=(1,)), C((2, 3, 2), axes=(0, 2)))
R += [
    OpRecord("reduce_sum", lambda x, axes: lax.reduce_sum(x, axes),
             _p(reductions.reduce_sum_p), 1, _RED_CASES, NUM, rand_default(),
             _ref_reduce(np.sum), grad_order=2, grad_dtypes=(f64, c128),
             grad_cases=_RED_GRAD, linear=((0,),), tol={f16: 1e-2}),
    OpRecord("reduce_prod", lambda x, axes: lax.reduce_prod(x, axes),
             _p(reductions.reduce_prod_p), 1, _RED_CASES, NUM, rand_uniform(-1.5, 1.5),
             _ref_reduce(np.prod), grad_order=2, grad_dtypes=(f64, c128),
             grad_cases=_RED_GRAD + (C((5,), axes=(0,)),), tol={f16: 1e-2}),
    OpRecord("reduce_max", lambda x, axes: lax.reduce_max(x, axes),
             _p(reductions.reduce_max_p), 1, _RED_CASES, ORDERED, rand_distinct(),
             _ref_reduce_max, grad_order=2, grad_cases=_RED_GRAD),
    OpRecord("reduce_min", lambda x, axes: lax.reduce_min(x, axes),
             _p(reductions.reduce_min_p), 1, _RED_CASES, ORDERED, rand_distinct(),
             _ref_reduce_min, grad_order=2, grad_cases=_RED_GRAD),
    OpRecord("reduce_and", lambda x, axes: lax.reduce_and(x, axes),
             _p(reductions.reduce_and_p), 1, _RED_CASES, BOOL + INT, rand_full_int(),
             _ref_reduce_bits(lambda a, b: a & b,
                              lambda d: np.array(True if d == bool_ else -1).astype(d))),
    OpRecord("reduce_or", lambda x, axes: lax.reduce_or(x, axes),
             _p(reductions.reduce_or_p), 1, _RED_CASES, BOOL + INT, rand_full_int(),
             _ref_reduce_bits(lambda a, b: a | b, lambda d: np.zeros((), d))),
    OpRecord("reduce_xor", lambda x, axes: lax.reduce_xor(x, axes),
             _p(reductions.reduce_xor_p), 1, _RED_CASES, BOOL + INT, rand_full_int(),
             _ref_reduce_bits(lambda a, b: a ^ b, lambda d: np.zeros((), d))),
    OpRecord("argmax", lambda x, axis, index_dtype: lax.argmax(x, axis, index_dtype),
             _p(reductions.argmax_p), 1,
             (C((3, 4), axis=0, index_dtype=i32), C((3, 4), axis=1, index_dtype=i64),
              C((5,), axis=0, index_dtype=u8), C((2, 3, 2), axis=-1, index_dtype=i32),
              C((0, 3), axis=1, index_dtype=i32)),
             ORDERED, rand_default(1),
             lambda x, axis, index_dtype: np.argmax(x, axis).astype(index_dtype)),
    OpRecord("argmin", lambda x, axis, index_dtype: lax.argmin(x, axis, index_dtype),
             _p(reductions.argmin_p), 1,
             (C((3, 4), axis=0, index_dtype=i32), C((3, 4), axis=1, index_dtype=i64),
              C((5,), axis=0, index_dtype=i16), C((2, 3, 2), axis=1, index_dtype=i32)),
             ORDERED, rand_default(1),
             lambda x, axis, index_dtype: np.argmin(x, axis).astype(index_dtype)),
]

# ----------------------------------------- linalg ---------------------------------------
_DN = lambda lc, rc, lb=(), rb=(): ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb)))
R += [
    OpRecord("dot_general",
             lambda x, y, dimension_numbers: lax.dot_general(x, y, dimension_numbers),
             _p(linalg.dot_general_p), 2,
             (C((2, 3), (3, 4), dimension_numbers=_DN([1], [0])),
              C((3,), (3,), dimension_numbers=_DN([0], [0])),
              C((2, 3, 4), (2, 4, 5), dimension_numbers=_DN([2], [1], [0], [0])),
              C((3, 2), (4, 3), dimension_numbers=_DN([0], [1])),
              C((2, 3), (4,), dimension_numbers=_DN([], [])),
              C((2, 0), (0, 3), dimension_numbers=_DN([1], [0])),
              C((4, 2, 3), (3, 4, 5), dimension_numbers=_DN([0, 2], [1, 0])),
              C((2, 3, 4), (4, 2), dimension_numbers=_DN([2], [0], [0], [1]))),
             ALL, rand_default(1), _ref_dot_general, tol={f16: 1e-2},
             grad_order=2, grad_dtypes=(f64, c128),
             grad_cases=(C((2, 3), (3, 4), dimension_numbers=_DN([1], [0])),
                         C((2, 3, 4), (2, 4, 5), dimension_numbers=_DN([2], [1], [0], [0])),
                         C((4, 2, 3), (3, 4, 5), dimension_numbers=_DN([0, 2], [1, 0]))),
             linear=((0,), (1,))),
    OpRecord("dot_general_preferred",
             lambda x, y, dimension_numbers, preferred_element_type: lax.dot_general(
                 x, y, dimension_numbers, precision=lax.Precision.HIGHEST,
                 preferred_element_type=preferred_element_type),
             _p(linalg.dot_general_p), 2,
             (C((2, 3), (3, 4), dimension_numbers=_DN([1], [0]), preferred_element_type=i32),
              C((3,), (3,), dimension_numbers=_DN([0], [0]), preferred_element_type=i64),
              C((2, 3), (3,), dimension_numbers=_DN([1], [0]), preferred_element_type=f64)),
             (i8, u8, i16), rand_full_int(),
             _ref_dot_general),
    OpRecord("dot_general_preferred_float",
             lambda x, y, dimension_numbers, preferred_element_type: lax.dot_general(
                 x, y, dimension_numbers, preferred_element_type=preferred_element_type),
             _p(linalg.dot_general_p), 2,
             (C((2, 3), (3, 4), dimension_numbers=_DN([1], [0]), preferred_element_type=f64),
              C((2, 3, 2), (2, 2), dimension_numbers=_DN([2], [0], [0], [1]),
                preferred_element_type=f64)),
             (f16, f32), rand_default(1), _ref_dot_general, grad_order=2,
             grad_dtypes=(f32,), grad_tol=3e-2, linear=((0,), (1,)), tol={f16: 1e-3}),
    OpRecord("dot", lambda x, y: lax.dot(x, y), _p(linalg.dot_general_p), 2,
             (C((2, 3), (3, 4)), C((3,), (3,)), C((2, 3), (3,)), C((3,), (3, 2)),
              C((0, 3), (3, 2))),
             NUM, rand_default(1),
             lambda x, y: _ref_dot_general(x, y, dimension_numbers=_DN([x.ndim - 1], [0])),
             tol={f16: 1e-2}, grad_order=2, grad_dtypes=(f64, c128),
             grad_cases=(C((2, 3), (3, 4)), C((3,), (3,))), linear=((0,), (1,))),
]

# ------------------------------------ variadic reduce -----------------------------------

def _hypot(a, b):
    return lax.sqrt(lax.add(lax.mul(a, a), lax.mul(b, b)))


def _argmax_pair(a, b):
    # (value, index) of the larger value; the lower index on ties (associative).
    (av, ai), (bv, bi) = a, b
    pick_b = lax.bitwise_or(lax.gt(bv, av), lax.bitwise_and(lax.eq(bv, av), lax.lt(bi, ai)))
    return lax.select(pick_b, bv, av), lax.select(pick_b, bi, ai)


def _ref_argmax_pair(x, idx, *, dimensions):
    kept = [i for i in range(x.ndim) if i not in dimensions]
    y = np.transpose(x, kept + list(dimensions)).reshape(
        tuple(x.shape[i] for i in kept) + (-1,))
    j = np.transpose(idx, kept + list(dimensions)).reshape(y.shape)
    if y.shape[-1] == 0:
        return (np.full(y.shape[:-1], -np.inf, x.dtype),
                np.full(y.shape[:-1], np.iinfo(idx.dtype).max, idx.dtype))
    am = np.argmax(y, -1)[..., None]
    return (np.take_along_axis(y, am, -1)[..., 0], np.take_along_axis(j, am, -1)[..., 0])


_REDUCE_CASES = (C((3, 4), dimensions=(1,)), C((2, 3, 4), dimensions=(0, 2)),
                 C((5,), dimensions=(0,)), C((0, 3), dimensions=(0,)), C((2, 3), dimensions=()),
                 C((3, 5), dimensions=(0, 1)))
R += [
    OpRecord("reduce_hypot",
             lambda x, dimensions: lax.reduce(x, 0.0, _hypot, dimensions),
             _p(reductions.reduce_p), 1, _REDUCE_CASES, FLOAT, rand_nonzero(),
             _hpfn(lambda x, dimensions: np.sqrt(np.sum(x * x, axis=dimensions)) if any(
                 x.shape[d] != 1 for d in dimensions) else x),   # one element: returned
             tol={f16: 1e-2, f32: 1e-5}, grad_order=2,
             grad_cases=(C((3, 4), dimensions=(1,)), C((2, 3, 2), dimensions=(0, 2)))),
    OpRecord("reduce_argmax_pair",
             lambda x, i, dimensions: lax.reduce((x, i), (-np.inf, np.iinfo(i.dtype).max),
                                                 _argmax_pair, dimensions),
             _p(reductions.reduce_p), 2,
             tuple(Case((c.shapes[0], c.shapes[0]), c.params) for c in _REDUCE_CASES),
             (f32, f64), (rand_distinct(), lambda r, s, d: np.arange(int(np.prod(s))).reshape(s)
                                                            .astype(d)),
             _ref_argmax_pair, arg_dtypes=lambda d: (d, i32), grad_order=2,
             grad_cases=(C((3, 4), (3, 4), dimensions=(1,)),), nondiff_argnums=(1,)),
    OpRecord("reduce_monoid_dispatch",
             lambda x, which, dimensions: lax.reduce(
                 x, {"add": 0.0, "mul": 1.0, "max": -np.inf, "min": np.inf}[which],
                 getattr(lax, which), dimensions),
             _p(reductions.reduce_sum_p, reductions.reduce_prod_p, reductions.reduce_max_p,
                reductions.reduce_min_p), 1,
             (C((3, 4), which="add", dimensions=(1,)), C((3, 4), which="mul", dimensions=(0,)),
              C((2, 3), which="max", dimensions=(0, 1)), C((0, 2), which="min", dimensions=(0,))),
             (f32, f64), rand_distinct(),
             lambda x, which, dimensions: {"add": np.sum, "mul": np.prod}.get(
                 which, lambda x, axis: _ref_reduce_max(x, axes=axis) if which == "max"
                 else _ref_reduce_min(x, axes=axis))(x, axis=dimensions).astype(x.dtype)),
]

# Tangent accumulation is a primitive too: it batches and transposes like add.
R.append(binop("add_any", lambda x, y: ad.add_any_p.bind(x, y), ad.add_any_p, NUM,
               lambda x, y: np.add(x, y) if _is_int(x.dtype) else _hpfn(np.add)(x, y),
               cases=(C((4,), (4,)), C((2, 3), (2, 3)), C((0, 3), (0, 3))),
               grad=2, grad_cases=(C((2, 3), (2, 3)),), linear=((0, 1),), edge=False))

# Zero-safe scaling of (co)tangents (the derivative rules of sqrt, log, div, ...): t where
# t == 0 (even where d is inf or NaN), else t * d or t / d.
R += [
    binop("safe_mul", ew.safe_mul, ew.safe_mul_p, INEXACT,
          _hpfn(lambda t, d: np.where(t == 0, t, t * d)), grad=2, grad_dtypes=_INEX_GRAD,
          linear=((0,), (1,))),
    binop("safe_div", ew.safe_div, ew.safe_div_p, INEXACT,
          _hpfn(lambda t, d: np.where(t == 0, t, t / d)), rng=(rand_default(), rand_nonzero()),
          grad=2, grad_dtypes=_INEX_GRAD, linear=((0,),)),
]

# ------------------------------ low-precision dtypes ------------------------------------
# Which records take the ml_dtypes types (what each primitive's abstract eval accepts, the
# spec's sets), and how close to ``lowp_ref`` their results must be: 0 ulps for the ops
# XLA computes with one correctly rounded operation in the widened type (so the result is
# the reference's bits), 1 ulp of the format where NumPy's float16/float32 function and
# the float64-then-round reference may round differently, or where the op is several
# widened operations (rsqrt). Integer powers are JAX's multiplications, each rounded to
# the narrow type (exact against that). Not here: exp2 and logistic, which XLA expands into
# several steps rounded to the narrow type (exp2(-2.5) in float8_e5m2 is 0.125, logistic(-3)
# in float8_e3m4 is 0: exp(3) overflows the format); tests/lowp checks them against
# XLA's recorded results.
_LF, _LI = LOWP_FLOAT, LOWP_INT
_LOWP_TABLE = {
    **{n: (_LF + _LI, 0) for n in (
        "neg", "sign", "square", "integer_pow_0", "integer_pow_1", "integer_pow_2",
        "integer_pow_3", "integer_pow_5", "add",
        "sub", "mul", "div", "rem", "max", "min", "eq", "ne", "lt", "le", "gt", "ge",
        "eq_total_order", "lt_total_order", "le_total_order", "ne_total_order",
        "gt_total_order", "ge_total_order", "select_n_bool", "clamp", "reduce_max",
        "reduce_min")},
    "pow": (_LF + _LI, 1),
    **{n: (_LF, 0) for n in ("floor", "ceil", "round", "round_nearest_even", "is_finite",
                             "sqrt", "reciprocal", "integer_pow_m2")},
    **{n: (_LF, 1) for n in ("exp", "log", "expm1", "log1p", "tanh", "sin", "cos", "tan",
                             "rsqrt", "cbrt", "erf", "atan2")},
    "abs": (_LF + (_LI[0], _LI[2]), 0),
    # population_count: XLA counts int4's bits sign-extended to 8 (popcount(-8) == 5) but
    # int2's as they are; the widened reference models the first (tests/lowp checks int2
    # against XLA's recorded results)
    "population_count": ((_LI[0], _LI[1], _LI[3]), 0),
    **{n: (_LI, 0) for n in ("not", "clz", "and", "or", "xor",
                             "shift_left", "shift_right_arithmetic", "shift_right_logical",
                             "reduce_and", "reduce_or", "reduce_xor")},
}
R = [dataclasses.replace(r, lowp=_LOWP_TABLE[r.name][0], lowp_ulps=_LOWP_TABLE[r.name][1])
     if r.name in _LOWP_TABLE else r for r in R]
assert {r.name for r in R if r.lowp} == set(_LOWP_TABLE)

RECORDS: list[OpRecord] = R
# The primitives defined by lax.elementwise (element-wise semantics: edge values apply).
ELEMENTWISE_PRIMS = frozenset(v for v in vars(ew).values() if isinstance(v, tracer.Primitive))
RECORDS_BY_NAME = {r.name: r for r in RECORDS}
assert len(RECORDS_BY_NAME) == len(RECORDS), "duplicate record names"


# ================================== case sampling ======================================

def _seed(*parts) -> int:
    return zlib.crc32("/".join(map(str, parts)).encode())


def sample(items, n, *key):
    """A deterministic sample of ``n`` of ``items`` (all of them when n >= len)."""
    items = list(items)
    if n >= len(items):
        return items
    r = np.random.default_rng(_seed(*key))
    idx = sorted(r.choice(len(items), n, replace=False))
    return [items[i] for i in idx]


def case_dtype_ok(rec: OpRecord, case: Case, dt) -> bool:
    """Some (case, dtype) pairs are not meaningful (e.g. a bitcast to the same width with
    different element counts)."""
    kw = case.kw
    if rec.name == "bitcast_convert_type":
        old, new = np.dtype(dt).itemsize, np.dtype(kw["new_dtype"]).itemsize
        return old >= new or (case.shapes[0] and case.shapes[0][-1] == new // old)
    if rec.name == "convert_element_type":
        return True
    return True


def record_cases(rec: OpRecord, n: int = NUM_CASES):
    """Sampled (case, dtype) pairs of a record, the first few dtypes and cases favoured
    in rotation so that small samples still see different shapes and dtypes."""
    combos = [(c, d) for c in rec.cases for d in rec.dtypes if case_dtype_ok(rec, c, d)]
    return sample(combos, n, rec.name)


def rng_for(*key):
    return np.random.default_rng(_seed(*key))


# ==================================== edge values ======================================

def edge_values(dt) -> np.ndarray:
    """The values where implementations disagree: zeros of both signs, infinities, NaN,
    the dtype's extremes, halves (rounding ties), subnormals; integer extremes."""
    dt = np.dtype(dt)
    if dt == bool_:
        return np.array([False, True])
    if _is_int(dt):
        info = np.iinfo(dt)
        bits = dt.itemsize * 8
        vals = [0, 1, 2, 3, 7, bits - 1, bits, bits + 1, info.max, info.max - 1, info.min,
                info.min + 1]
        if dt.kind == "i":
            vals += [-1, -2, -7]
        return np.array(sorted(set(vals)), dtype=object).astype(dt)
    if dt.kind == "f":
        fi = np.finfo(dt)
        vals = [0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 1.5, 2.5, -2.5, 3.0, np.inf, -np.inf,
                np.nan, float(fi.max), -float(fi.max), float(fi.tiny), float(fi.smallest_subnormal),
                0.49999997]
        out = np.array(vals + [0.0], dt)
        out[-1] = -out[12]          # a NaN with its sign bit set (totalOrder puts it first)
        return out
    re = np.array([0.0, -0.0, 1.0, -1.5, np.inf, np.nan], _real_of(dt))
    out = np.empty((len(re), len(re)), dt)   # not re + 1j * im: 1j * inf has a NaN real part
    out.real, out.imag = re[:, None], re[None, :]
    return out.ravel()


def edge_args(rec: OpRecord, dt):
    """Arguments made of edge values: every pair for binary ops (so x / 0, INT_MIN / -1,
    shifts >= the width, NaN against inf all appear)."""
    dts = rec.dtypes_for(dt)
    if rec.nargs == 1:
        return [edge_values(dts[0])]
    if rec.nargs == 2:
        a, b = edge_values(dts[0]), edge_values(dts[1])
        return [np.repeat(a, len(b)), np.tile(b, len(a))]
    raise ValueError(rec.name)


# ==================================== comparisons ======================================

DEFAULT_RTOL = {f16: 2e-3, f32: 2e-6, f64: 1e-13, c64: 2e-6, c128: 1e-13}


def tolerance(rec: OpRecord, dt) -> float:
    dt = np.dtype(dt)
    if rec.tol and dt in rec.tol:
        return rec.tol[dt]
    return DEFAULT_RTOL.get(dt, 0.0)


def assert_matches(got, want, rtol: float = 0.0, signed_zeros: bool = False, msg: str = ""):
    """Several outputs (tuples) are compared one by one. ``got`` (a tracer Array) equals the NumPy ``want``: same shape and dtype; integers and
    bools exactly; inexact values within ``rtol`` (and the same absolute tolerance), NaN
    where NaN, infinities exactly, and with ``signed_zeros`` the sign of every zero."""
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want), (got, want)
        for g, w in zip(got, want):
            assert_matches(g, w, rtol, signed_zeros, msg)
        return
    got_np = np.asarray(got)
    want = np.asarray(want)
    assert got_np.shape == want.shape, f"shape {got_np.shape} != expected {want.shape} {msg}"
    assert got_np.dtype == want.dtype, f"dtype {got_np.dtype} != expected {want.dtype} {msg}"
    if want.dtype.kind not in "fc":
        np.testing.assert_array_equal(got_np, want, err_msg=msg)
        return
    parts = [(got_np, want)] if want.dtype.kind == "f" else \
        [(got_np.real, want.real), (got_np.imag, want.imag)]
    for g, w in parts:
        g, w = g.astype(np.float64), w.astype(np.float64)
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=f"NaN positions {msg}")
        inf = np.isinf(w)
        np.testing.assert_array_equal(g[inf], w[inf], err_msg=f"infinities {msg}")
        fin = ~np.isnan(w) & ~inf
        np.testing.assert_allclose(g[fin], w[fin], rtol=rtol, atol=rtol, err_msg=msg)
        if signed_zeros:
            z = (w == 0) & (g == 0)
            np.testing.assert_array_equal(np.signbit(g[z]), np.signbit(w[z]),
                                          err_msg=f"signs of zeros {msg}")


# ================================ low-precision dtypes ==================================

def lowp_wide(dt):
    """The dtype XLA's CPU backend computes a low-precision dtype's element-wise ops in:
    float32 for bfloat16 and float8_e8m0fnu, float16 for the other float8/float4 formats,
    int8/uint8 for the 2-/4-bit integers."""
    dt = np.dtype(dt)
    if dt in LOWP_INT:
        return i8 if ml_dtypes.iinfo(dt).min < 0 else u8
    return f32 if dt in (bf16, np.dtype(ml_dtypes.float8_e8m0fnu)) else f16


def lowp_bits(x):
    """One unsigned integer per element: a low-precision value's encoding."""
    x = np.asarray(x)
    return x.view({1: np.uint8, 2: np.uint16}[x.dtype.itemsize]).astype(np.int64)


def _lowp_encodings(dt):
    """Every encoding of a 2-/4-/8-bit type (bfloat16: None)."""
    if dt == bf16:
        return None
    nbits = 4 if dt.name in ("float4_e2m1fn", "int4", "uint4") else \
        2 if dt.name in ("int2", "uint2") else 8
    if dt in LOWP_INT:
        info = ml_dtypes.iinfo(dt)
        return np.arange(info.min, info.max + 1).astype(dt)
    return np.arange(1 << nbits, dtype=np.uint8).view(dt)


def lowp_edge_values(dt) -> np.ndarray:
    """A format's edge values: zeros, ±0.5, ±1, 1.5, ±2.5 (ties of the rounding ops), 3,
    the infinities (where the format has them; else they convert to its NaN or max), the
    max, the min normal, the smallest and the largest subnormal, each with both signs,
    and every NaN encoding (bfloat16: quiet and signalling of both signs). Integers:
    every value."""
    dt = np.dtype(dt)
    if dt in LOWP_INT:
        return _lowp_encodings(dt)
    fi = ml_dtypes.finfo(dt)
    mags = [0.0, 0.5, 1.0, 1.5, 2.5, 3.0, np.inf, float(fi.max), float(fi.tiny),
            float(fi.smallest_subnormal), float(fi.tiny) - float(fi.smallest_subnormal)]
    with np.errstate(all="ignore"):
        vals = np.array(mags + [-m for m in mags], np.float64).astype(dt)
    enc = _lowp_encodings(dt)
    nans = np.array([0x7FC0, 0xFFC0, 0x7F81, 0xFFFF], np.uint16).view(dt) if enc is None \
        else enc[np.isnan(enc.astype(np.float32))]
    out, seen = [], set()
    for v in np.concatenate([vals, nans]):
        b = int(lowp_bits(v))
        if b not in seen:
            seen.add(b)
            out.append(v)
    return np.array(out, dt)


def lowp_edge_args(rec: OpRecord, dt):
    """Edge-value arguments of a record taking a low-precision dtype: every pair for
    binary ops; select_n of a pattern between the edge values and their reversal; clamp of
    every pair (lo, x) with hi = 1 (bool for ints: the type's max)."""
    a = lowp_edge_values(dt)
    if rec.nargs == 1:
        return [a]
    if rec.nargs == 2:
        return [np.repeat(a, len(a)), np.tile(a, len(a))]
    if rec.name == "select_n_bool":
        return [np.arange(len(a)) % 3 == 1, a, a[::-1].copy()]
    if rec.name == "clamp":
        hi = np.array(1, np.float32).astype(dt)
        return [np.repeat(a, len(a)), np.tile(a, len(a)), np.full(len(a) ** 2, hi, dt)]
    raise ValueError(rec.name)


def lowp_ref(rec: OpRecord, *args, **kw):
    """XLA's semantics for the low-precision types: each low-precision argument widened
    (``lowp_wide``), the record's reference computed on the widened arguments (rounded
    once to the widened type), the result rounded (floats, to nearest even; a NaN to -0 in
    float4_e2m1fn, which has no NaN) or wrapped (integers) to the argument's type. The
    2-/4-bit integer shifts and clz are computed at their own width (population count is
    XLA's: of the sign-extended 8-bit value). Integer powers are JAX's products (binary
    powering), each product rounded to the type, and a reciprocal for negative powers."""
    lowp = [np.asarray(a).dtype for a in args if np.asarray(a).dtype in LOWP]
    dt = lowp[0]
    if rec.name.startswith("integer_pow_"):
        y = int(rec.name.split("_")[-1].replace("m", "-"))
        mul = lambda a, b: lowp_ref(RECORDS_BY_NAME["mul"], a, b)  # noqa: E731
        x = np.asarray(args[0])
        if y == 0:
            return np.ones_like(x)
        n, acc = builtins.abs(y), None
        while n:
            if n & 1:
                acc = x if acc is None else mul(acc, x)
            n >>= 1
            if n:
                x = mul(x, x)
        return lowp_ref(RECORDS_BY_NAME["div"], np.ones_like(acc), acc) if y < 0 else acc
    if dt in LOWP_INT and rec.name in ("shift_right_logical", "shift_right_arithmetic",
                                       "clz"):
        bits = 4 if dt.name in ("int4", "uint4") else 2
        mask = (1 << bits) - 1
        xs = [[int(v) & mask for v in np.asarray(a).astype(np.int64).ravel()] for a in args]
        signed = lambda v: v - (1 << bits) if v >> (bits - 1) else v  # noqa: E731
        if rec.name == "shift_right_logical":
            out = [x >> y if y < bits else 0 for x, y in zip(*xs)]
        elif rec.name == "shift_right_arithmetic":
            out = [(signed(x) >> builtins.min(y, bits - 1)) & mask for x, y in zip(*xs)]
        else:
            out = [bits - x.bit_length() for x in xs[0]]
        out = [v - (1 << bits) if ml_dtypes.iinfo(dt).min < 0 and v >> (bits - 1) else v
               for v in out]
        return np.array(out, np.int64).astype(dt).reshape(np.shape(args[0]))
    if rec.name == "select_n_bool":        # a move: the chosen encodings, NaNs' too
        return _ref_select_n(*[np.asarray(a) for a in args])
    wide = lowp_wide(dt)
    wargs = [np.asarray(a).astype(wide) if np.asarray(a).dtype in LOWP else np.asarray(a)
             for a in args]
    if rec.name == "clamp":
        out = _ref_min(_ref_max(wargs[1], wargs[0]), wargs[2])
    elif rec.name.endswith("_total_order") and dt in LOWP_FLOAT:
        # totalOrder on the widened float32 encodings (NaN payloads ordered too)
        k = [np.asarray(a, np.float32).view(np.int32).astype(np.int64) for a in wargs]
        k = [np.where(v < 0, -(v & 0x7FFFFFFF) - 1, v) for v in k]
        cmp = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
               "gt": np.greater, "ge": np.greater_equal}[rec.name.split("_")[0]]
        return cmp(*k)
    else:
        out = rec.ref(*wargs, **kw)
    out = np.asarray(out)
    if out.dtype != wide:
        return out
    if dt in LOWP_INT:
        info = ml_dtypes.iinfo(dt)
        span = info.max - info.min + 1
        return ((out.astype(np.int64) - info.min) % span + info.min).astype(dt)
    with np.errstate(all="ignore"):
        r = out.astype(dt)
    if dt.name == "float4_e2m1fn":
        r[np.isnan(out)] = np.array(-0.0, np.float32).astype(dt)
    return r


def assert_lowp_matches(got, want, ulps=0, msg="", nan_bits=False):
    """Low-precision results: same dtype and shape; NaN where NaN (any encoding, or with
    ``nan_bits`` the same); else the same encoding (zeros' signs included), or with
    ``ulps`` within that many units of the format's last place."""
    got = np.asarray(got)
    want = np.asarray(want)
    assert (got.dtype, got.shape) == (want.dtype, want.shape), \
        f"{got.dtype}{got.shape} != expected {want.dtype}{want.shape} {msg}"
    if want.dtype not in LOWP_FLOAT:
        np.testing.assert_array_equal(got, want, err_msg=msg)
        return
    with np.errstate(invalid="ignore"):     # (a NaN's cast warns in some NumPy versions)
        g, w = got.astype(np.float64).ravel(), want.astype(np.float64).ravel()
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=f"NaN positions {msg}")
    bad = (lowp_bits(got).ravel() != lowp_bits(want).ravel()) & \
        (np.True_ if nan_bits else ~np.isnan(w))
    if ulps:
        fi = ml_dtypes.finfo(want.dtype)
        with np.errstate(all="ignore"):
            close = np.isfinite(w) & np.isfinite(g) & (np.abs(g - w) <= ulps * np.maximum(
                float(fi.eps) * np.abs(w), float(fi.smallest_subnormal)))
        bad &= ~close
    i = np.flatnonzero(bad)
    assert not i.size, f"{msg}: at {i[:8]} got {got.ravel()[i[:8]]}, expected " \
                       f"{want.ravel()[i[:8]]}"


def _format_table(dt):
    """(magnitudes, encodings) of a low-precision float format's non-negative finite
    values, ascending (decoded from every encoding)."""
    enc = _lowp_encodings(dt) if dt != bf16 else np.arange(1 << 16, dtype=np.uint16).view(dt)
    with np.errstate(invalid="ignore"):
        v = enc.astype(np.float64)
    keep = np.isfinite(v) & ~np.signbit(v)
    order = np.argsort(v[keep], kind="stable")
    return v[keep][order], lowp_bits(enc[keep])[order]


def round_to_format(x, dt):
    """A float64 value converted to a low-precision float format as XLA converts: to the
    nearest value, ties to the even encoding (float8_e8m0fnu, which has no significand
    bits: ties up, as its power of two rounds), decided on the exact value; past the
    largest value's rounding range, inf where the format has it, else NaN (the FN/FNUZ
    formats and float8_e8m0fnu), float4_e2m1fn (no inf, no NaN) saturating to ±max and
    taking NaN to -0; zeros keep their sign unless the format has no -0 (FNUZ);
    float8_e8m0fnu (no sign, no zero) gives NaN for zero and negative values and its
    smallest value, 2^-127, below it. Returns the encoding."""
    dt = np.dtype(dt)
    mags, encs = _format_table(dt)
    name = dt.name
    nan_enc = {"float4_e2m1fn": 0x8, "float8_e8m0fnu": 0xFF, "float8_e4m3fnuz": 0x80,
               "float8_e5m2fnuz": 0x80, "float8_e4m3b11fnuz": 0x80}
    sign_bit = {"bfloat16": 0x8000, "float4_e2m1fn": 0x8}.get(name, 0x80)
    has_inf = name in ("bfloat16", "float8_e5m2", "float8_e3m4", "float8_e4m3")
    fnuz = name.endswith("fnuz")
    if np.isnan(x):
        return nan_enc.get(name, 0x7FC0 if name == "bfloat16" else 0x7F)
    if name == "float8_e8m0fnu":
        if x <= 0:
            return 0xFF
        if x < mags[0]:
            return int(encs[0])
    neg = bool(np.signbit(x))
    a = abs(float(x))
    top = mags[-1]
    # (float8_e8m0fnu: the next power of two is twice the max)
    half_ulp_top = top / 2 if name == "float8_e8m0fnu" else (top - mags[-2]) / 2
    if np.isinf(a) or a > top + half_ulp_top or (
            a == top + half_ulp_top and (int(encs[-1]) & 1 or name == "float8_e8m0fnu")):
        if has_inf:
            e = int(lowp_bits(np.array(np.inf, np.float32).astype(dt)))
        elif name == "float4_e2m1fn":
            e = int(encs[-1])
        else:
            return nan_enc.get(name, 0x7F) | (0 if fnuz or name == "float8_e8m0fnu"
                                              else sign_bit * neg)
        return e | sign_bit * neg
    i = int(np.searchsorted(mags, a))
    if i == len(mags):
        e = int(encs[-1])
    elif mags[i] == a:
        e = int(encs[i])
    else:
        lo, hi = mags[i - 1], mags[i]
        d_lo, d_hi = a - lo, hi - a
        if d_lo != d_hi:
            e = int(encs[i - 1] if d_lo < d_hi else encs[i])
        elif name == "float8_e8m0fnu":
            e = int(encs[i])
        else:
            e = int(encs[i - 1] if int(encs[i - 1]) % 2 == 0 else encs[i])
    if e == 0 and fnuz:
        return 0
    if name == "float8_e8m0fnu":
        return e
    return e | sign_bit * neg


def lowp_saturation_points(dt) -> np.ndarray:
    """float64 values around a format's rounding and saturation points: its max, the tie
    between max and the next power (and the values just beside it), twice the max, the
    half of the smallest subnormal (a tie with zero) and beside it, the min normal and
    the subnormal just below it, ties at 1 (1 + eps/2 rounds to 1, 1 + 3 eps/2 to
    1 + 2 eps), the infinities and NaN; each with both signs."""
    fi = ml_dtypes.finfo(dt)
    mx, sub, tiny, eps = (float(fi.max), float(fi.smallest_subnormal), float(fi.tiny),
                          float(fi.eps))
    mags, _ = _format_table(np.dtype(dt))
    tie = mx + (mx / 2 if np.dtype(dt).name == "float8_e8m0fnu" else (mx - mags[-2]) / 2)
    vals = [mx, tie, np.nextafter(tie, 0), np.nextafter(tie, np.inf), 2 * mx,
            np.nextafter(mx, np.inf), sub, sub / 2, np.nextafter(sub / 2, 0),
            np.nextafter(sub / 2, 1), tiny, tiny - sub, 1 + eps / 2, 1 + 1.5 * eps,
            np.nextafter(1 + eps / 2, 2), 0.0, np.inf, np.nan, 0.3, 100.5]
    return np.array(vals + [-v for v in vals], np.float64)
