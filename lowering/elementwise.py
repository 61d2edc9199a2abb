"""Lowering rules of the element-wise family (lax/elementwise.py): scalar expressions.

Each rule mirrors the primitive's NumPy impl operation by operation, so that the fused
kernel gives the eager answer (bit for bit where NumPy's scalar math is used: +, -, *, /,
sqrt, comparisons, integer ops, conversions; to a few ulp for libm functions, whose NumPy
versions are vectorized differently). A rule declares the dtypes it does not handle
(``lowering.rules.limit``); such an equation runs as a host step.
"""
from __future__ import annotations

import numpy as np

import lax
from lax import elementwise as ew
from lowering.rules import limit, scalar_exprs
from tracer.interpreters import ad


def _dt(x):
    return np.dtype(x.dtype)


def _only(pred, why):
    """A limit: the rule handles operand 0 when ``pred(its dtype)``, else ``why``."""
    def check(in_avals, out_avals, **params):
        return None if pred(np.dtype(in_avals[0].dtype)) else why
    return check


def _not_complex(why):
    return _only(lambda dt: dt.kind != "c", why)


def _binop(name):
    def rule(ctx, x, y):
        return ctx.op(name, x, y)
    return rule


for _p, _name in [(ew.add_p, "add"), (ad.add_any_p, "add"), (ew.sub_p, "sub"),
                  (ew.mul_p, "mul"), (ew.div_p, "div"), (ew.rem_p, "rem"), (ew.pow_p, "pow"),
                  (ew.max_p, "max"), (ew.min_p, "min"), (ew.and_p, "and"), (ew.or_p, "or"),
                  (ew.xor_p, "xor"), (ew.shift_left_p, "shl"),
                  (ew.shift_right_arithmetic_p, "shr_a"), (ew.shift_right_logical_p, "shr_l"),
                  (ew.eq_p, "eq"), (ew.ne_p, "ne"), (ew.lt_p, "lt"), (ew.le_p, "le"),
                  (ew.gt_p, "gt"), (ew.ge_p, "ge")]:
    scalar_exprs[_p] = _binop(_name)


# rem/pow of complex numbers: NumPy's definitions (its own complex pow) are not Numba's
for _p in (ew.rem_p, ew.pow_p):
    limit("scalar", _p, _not_complex("complex"))


def _minmax(name):
    cmp = "gt" if name == "max" else "lt"

    def rule(ctx, x, y):
        dt = _dt(x)
        if dt.kind != "c":
            return ctx.op(name, x, y)
        # complex: the impl's lexicographic choice (lax.elementwise._complex_pick), x where
        # cmp holds on the real parts, or on the imaginary parts where the real parts are
        # equal, else y; a select, so both operands' bits pass unchanged
        rdt = np.finfo(dt).dtype      # the real dtype of the complex one
        xr, yr = (ctx.call("scalar.real", v, dtype=rdt) for v in (x, y))
        xi, yi = (ctx.call("scalar.imag", v, dtype=rdt) for v in (x, y))
        pick = ctx.select(ctx.op("eq", xr, yr), ctx.op(cmp, xi, yi), ctx.op(cmp, xr, yr))
        return ctx.select(pick, x, y)
    return rule


scalar_exprs[ew.max_p] = _minmax("max")
scalar_exprs[ew.min_p] = _minmax("min")


def _rem(ctx, x, y):
    r = _rem_base(ctx, x, y)
    if _dt(x).kind != "f":
        return r
    # C fmod (NumPy's) returns a NaN dividend as it is, even when the divisor is a NaN
    # too; Numba's np.fmod returns the divisor's then
    return ctx.select(ctx.op("ne", x, x), x, r)


_rem_base = scalar_exprs[ew.rem_p]
scalar_exprs[ew.rem_p] = _rem


def _zero_safe(name):
    # lax.elementwise.safe_mul / safe_div: t where t == 0, else t (op) d, like the impl.
    def rule(ctx, t, d):
        return ctx.select(ctx.op("eq", t, ctx.const(0, _dt(t))), t, ctx.op(name, t, d))
    return rule


scalar_exprs[ew.safe_mul_p] = _zero_safe("mul")
scalar_exprs[ew.safe_div_p] = _zero_safe("div")


def _neg(ctx, x):
    return ctx.op("neg", x)


def _not(ctx, x):
    return ctx.op("not", x)


def _abs(ctx, x):
    return ctx.op("abs", x, dtype=ctx.out_avals[0].dtype)


scalar_exprs[ew.neg_p] = _neg
scalar_exprs[ew.not_p] = _not
scalar_exprs[ew.abs_p] = _abs


def _sign(ctx, x):
    dt = _dt(x)
    if dt.kind == "u":
        return ctx.cast(ctx.op("ne", x, ctx.const(0, dt)), dt)
    if dt.kind == "f":
        return ctx.call("scalar.sign_f", x, dtype=dt)
    zero, one, mone = ctx.const(0, dt), ctx.const(1, dt), ctx.const(-1, dt)
    return ctx.select(ctx.op("gt", x, zero), one,
                      ctx.select(ctx.op("lt", x, zero), mone, zero))


scalar_exprs[ew.sign_p] = _sign
limit("scalar", ew.sign_p, _not_complex("complex sign"))


def _float_call(fn):
    def rule(ctx, x, **params):
        return ctx.call(fn, x, dtype=ctx.out_avals[0].dtype)
    return rule


# Complex exp, log, sqrt, sin, cos, tan, tanh stay host steps: Numba's cmath versions
# differ from NumPy's (C99 Annex G) at signed zeros, infinities and NaNs (tanh(-0j) is
# +0j, sin(nanj) is nan+nanj), and by many ulps near cancellations; NumPy's is the eager
# answer both tiers must give.
for _p, _fn in [(ew.floor_p, "np.floor"), (ew.ceil_p, "np.ceil"),
                (ew.is_finite_p, "np.isfinite"), (ew.exp_p, "np.exp"),
                (ew.exp2_p, "np.exp2"), (ew.log_p, "np.log"), (ew.expm1_p, "np.expm1"),
                (ew.log1p_p, "np.log1p"), (ew.tanh_p, "np.tanh"), (ew.sin_p, "np.sin"),
                (ew.cos_p, "np.cos"), (ew.tan_p, "np.tan"), (ew.sqrt_p, "np.sqrt"),
                (ew.erf_p, "math.erf")]:
    scalar_exprs[_p] = _float_call(_fn)
    limit("scalar", _p, _not_complex(f"{_fn} of complex"))


def _nan_kept(fn):
    # np.cbrt under Numba turns a NaN operand into +NaN; NumPy returns the operand
    def rule(ctx, x):
        y = ctx.call(fn, x, dtype=ctx.out_avals[0].dtype)
        return ctx.select(ctx.op("ne", x, x), x, y)
    return rule


scalar_exprs[ew.cbrt_p] = _nan_kept("np.cbrt")
limit("scalar", ew.cbrt_p, _not_complex("np.cbrt of complex"))


# Vectorizable versions (the backend's "vecmath" helpers, pasted into the loop) where the
# scalar libm call would keep the loop scalar; float16 goes through float32 like NumPy's loops.
_VECMATH = {
    (ew.exp_p, "f4"): "exp_f32", (ew.exp_p, "f2"): "exp_f32", (ew.exp_p, "f8"): "exp_f64",
    (ew.log_p, "f4"): "log_f32", (ew.log_p, "f2"): "log_f32",
    (ew.sin_p, "f4"): "sin_f32", (ew.sin_p, "f2"): "sin_f32",
    (ew.cos_p, "f4"): "cos_f32", (ew.cos_p, "f2"): "cos_f32",
    (ew.tanh_p, "f4"): "tanh_f32", (ew.tanh_p, "f2"): "tanh_f32",
}


def _vecmath_or(prim, fallback):
    def rule(ctx, x):
        name = _VECMATH.get((prim, _dt(x).str[1:]))
        if name is None:
            return fallback(ctx, x)
        return ctx.call(f"vecmath.{name}", x, dtype=_dt(x))
    return rule


for _p in (ew.exp_p, ew.log_p, ew.sin_p, ew.cos_p, ew.tanh_p):
    scalar_exprs[_p] = _vecmath_or(_p, scalar_exprs[_p])


def _atan2(ctx, x, y):
    return ctx.call("np.arctan2", x, y, dtype=ctx.out_avals[0].dtype)


scalar_exprs[ew.atan2_p] = _atan2
# complex atan2 is made of complex log and sqrt: NumPy's routines, as those (above)
limit("scalar", ew.atan2_p, _not_complex("complex atan2"))


def _round(ctx, x, *, rounding_method):
    if rounding_method == ew.RoundingMethod.TO_NEAREST_EVEN:
        return ctx.call("np.rint", x, dtype=_dt(x))
    return ctx.call("scalar.round_away", x, dtype=_dt(x))


scalar_exprs[ew.round_p] = _round


def _logistic(ctx, x):
    dt = _dt(x)
    # scipy.special.expit (the impl) has float32 and float64 loops: float16 is computed
    # in float32 and rounded once
    wt = np.dtype(np.float32) if dt == np.float16 else dt
    xw = ctx.cast(x, wt)
    one = ctx.const(1, wt)
    y = ctx.op("div", one, ctx.op("add", one, ctx.call("np.exp", ctx.op("neg", xw), dtype=wt)))
    return ctx.cast(y, dt)


scalar_exprs[ew.logistic_p] = _logistic
limit("scalar", ew.logistic_p, _only(lambda dt: dt.kind == "f", "complex logistic"))


def _rsqrt(ctx, x):
    dt = _dt(x)
    return ctx.op("div", ctx.const(1, dt), ctx.call("np.sqrt", x, dtype=dt))


scalar_exprs[ew.rsqrt_p] = _rsqrt
limit("scalar", ew.rsqrt_p, _only(lambda dt: dt.kind == "f", "complex rsqrt"))


def _square(ctx, x):
    return ctx.op("mul", x, x)


scalar_exprs[ew.square_p] = _square


def _integer_pow(ctx, x, *, y):
    # the impl's exact multiplication order (repeated squaring), so rounding matches
    dt = _dt(x)
    if y == 0:
        return ctx.const(1, dt)
    n = -y if y < 0 else y
    acc = None
    base = x
    while n:
        if n & 1:
            acc = base if acc is None else ctx.op("mul", acc, base)
        n >>= 1
        if n:
            base = ctx.op("mul", base, base)
    return ctx.op("div", ctx.const(1, dt), acc) if y < 0 else acc


scalar_exprs[ew.integer_pow_p] = _integer_pow


def _popcount(ctx, x):
    dt = _dt(x)
    u = ctx.op("cast", ctx.op("bitcast", x, dtype=np.dtype(f"u{dt.itemsize}")),
               dtype=np.uint64)
    return ctx.cast(ctx.call("scalar.popcount", u, dtype=np.int64), dt)


def _clz(ctx, x):
    dt = _dt(x)
    u = ctx.op("cast", ctx.op("bitcast", x, dtype=np.dtype(f"u{dt.itemsize}")),
               dtype=np.uint64)
    bits = ctx.const(dt.itemsize * 8, np.int64)
    return ctx.cast(ctx.call("scalar.clz", u, bits, dtype=np.int64), dt)


scalar_exprs[ew.population_count_p] = _popcount
scalar_exprs[ew.clz_p] = _clz


def _real(ctx, x):
    if _dt(x).kind != "c":
        return x            # XLA 'Real' of a floating operand: the operand itself
    return ctx.call("scalar.real", x, dtype=ctx.out_avals[0].dtype)


def _imag(ctx, x):
    if _dt(x).kind != "c":
        return ctx.const(0, _dt(x))     # XLA 'Imag' of a floating operand: +0.0
    return ctx.call("scalar.imag", x, dtype=ctx.out_avals[0].dtype)


def _conj(ctx, x, *, input_dtype):
    out = ctx.out_avals[0].dtype
    if _dt(x).kind != "c":
        return ctx.cast(x, out)
    return ctx.call("scalar.conj", x, dtype=out)


def _complex(ctx, x, y):
    return ctx.call("scalar.make_complex", x, y, dtype=ctx.out_avals[0].dtype)


scalar_exprs[ew.real_p] = _real
scalar_exprs[ew.imag_p] = _imag
scalar_exprs[ew.conj_p] = _conj
scalar_exprs[ew.complex_p] = _complex


def _total_key(ctx, x):
    dt = _dt(x)
    if dt.kind != "f":
        return x
    fn = {2: "total_key_16", 4: "total_key_32", 8: "total_key_64"}[dt.itemsize]
    return ctx.call(f"scalar.{fn}", x, dtype=np.dtype(f"i{dt.itemsize}"))


def _total_compare(name):
    def rule(ctx, x, y):
        return ctx.op(name, _total_key(ctx, x), _total_key(ctx, y))
    return rule


scalar_exprs[ew.eq_to_p] = _total_compare("eq")
scalar_exprs[ew.lt_to_p] = _total_compare("lt")
scalar_exprs[ew.le_to_p] = _total_compare("le")
scalar_exprs[ew.ne_to_p] = _total_compare("ne")
scalar_exprs[ew.gt_to_p] = _total_compare("gt")
scalar_exprs[ew.ge_to_p] = _total_compare("ge")


def _reduce_precision(ctx, x, *, exponent_bits, mantissa_bits):
    # the eager impl's bit arithmetic per element, on the bits (a float16 carried as
    # float32 would quiet a signalling NaN on its way back)
    dt = _dt(x)
    u = np.dtype(f"u{dt.itemsize}")
    bits = ctx.call("scalar.reduce_precision_u", ctx.op("bitcast", x, dtype=u),
                    ctx.const(8 * dt.itemsize, np.int64), ctx.const(exponent_bits, np.int64),
                    ctx.const(mantissa_bits, np.int64), dtype=u)
    return ctx.op("bitcast", bits, dtype=dt)


scalar_exprs[ew.reduce_precision_p] = _reduce_precision


def _select_n(ctx, which, *cases):
    if len(cases) == 1:
        return cases[0]
    if _dt(which) == np.bool_:
        return ctx.select(which, cases[1], cases[0])
    # int which: clamped to [0, n) like the impl; chain of selects from the last case
    wdt = _dt(which)
    out = cases[-1]
    for k in range(len(cases) - 2, -1, -1):
        out = ctx.select(ctx.op("le", which, ctx.const(k, wdt)), cases[k], out)
    return out


scalar_exprs[ew.select_n_p] = _select_n


def _clamp(ctx, lo, x, hi):
    # the impl's order (lax/elementwise.py): max(lo, x) first
    return ctx.op("min", ctx.op("max", lo, x), hi)


scalar_exprs[ew.clamp_p] = _clamp


def _convert(ctx, x, *, new_dtype, weak_type):
    return ctx.cast(x, new_dtype)


scalar_exprs[ew.convert_element_type_p] = _convert


def _bitcast(ctx, x, *, new_dtype):
    return ctx.op("bitcast", x, dtype=new_dtype)


def _bitcast_limits(in_avals, out_avals, *, new_dtype):
    old, new = np.dtype(in_avals[0].dtype), np.dtype(new_dtype)
    if new.itemsize != old.itemsize:
        return "width change"
    if old == np.bool_ or new == np.bool_:
        return "bool bitcast"
    if old.kind == "c" or new.kind == "c":
        return "complex bitcast"
    return None


scalar_exprs[ew.bitcast_convert_type_p] = _bitcast
limit("scalar", ew.bitcast_convert_type_p, _bitcast_limits)

del lax
