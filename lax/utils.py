"""Helpers shared by the primitive families: argument normalisation, shape/dtype checks
and the ``standard_unop`` / ``standard_naryop`` constructors (JAX's ``unop``/``naryop``)
that create an element-wise primitive with its abstract eval, impl and batching rule."""
from __future__ import annotations

import math
import operator
from typing import Callable

import numpy as np

from tracer import core, dtypes
from tracer.core import Array, Primitive, ShapedArray, Tracer, get_aval, to_numpy
from tracer.interpreters import batching

class DtypeGroup:
    """A named set of dtypes that a primitive accepts, by a test on the dtype, so that the
    ml_dtypes types belong once they are loaded (``tracer.dtypes``) without importing them
    here. ``dt in group``; the name goes into errors."""
    __slots__ = ("name", "_test", "_seen")

    def __init__(self, name: str, test: Callable):
        self.name, self._test, self._seen = name, test, {}

    def __contains__(self, dt) -> bool:
        try:
            return self._seen[dt]
        except (KeyError, TypeError):
            pass
        try:
            d = np.dtype(dt)
        except TypeError:
            return False
        out = self._seen[d] = bool(self._test(d)) and d in dtypes._SUPPORTED
        return out

    def __repr__(self):
        return f"DtypeGroup({self.name!r})"


# dtype groups (names used in error messages)
_bool = DtypeGroup("bool", dtypes.is_bool)
_int = DtypeGroup("integer", dtypes.is_integer)
_uint = DtypeGroup("unsigned integer", dtypes.is_unsigned_integer)
_sint = DtypeGroup("signed integer", dtypes.is_signed_integer)
_float = DtypeGroup("floating", dtypes.is_floating)
_complex = DtypeGroup("complex", dtypes.is_complex)
_inexact = DtypeGroup("floating or complex", dtypes.is_inexact)
_num = DtypeGroup("numeric", lambda d: not dtypes.is_bool(d))
_any = DtypeGroup("any", lambda d: True)
_bool_or_int = DtypeGroup("bool or integer", lambda d: dtypes.is_bool(d) or dtypes.is_integer(d))
_signed_num = DtypeGroup("signed numeric",
                         lambda d: dtypes.is_signed_integer(d) or dtypes.is_inexact(d))
_ordered = DtypeGroup("bool, integer or floating", lambda d: not dtypes.is_complex(d))


def group_name(group) -> str:
    if isinstance(group, DtypeGroup):
        return group.name
    return ", ".join(np.dtype(d).name for d in group)


def as_aval(x):
    return get_aval(x)


def canonicalize_axis(axis: int, ndim: int, name: str = "axis") -> int:
    axis = operator.index(axis)
    if not -ndim <= axis < max(ndim, 1) or (ndim == 0 and axis not in (0, -1)):
        raise ValueError(f"{name} {axis} is out of bounds for an array of rank {ndim}")
    return axis % ndim if ndim else 0


def canonicalize_shape(shape, context: str = "") -> tuple:
    if isinstance(shape, (int, np.integer)) or (hasattr(shape, "ndim") and np.ndim(shape) == 0
                                                 and not isinstance(shape, (tuple, list))):
        shape = (shape,)
    try:
        out = tuple(operator.index(d) for d in shape)
    except TypeError as e:
        from tracer.errors import TracerIntegerConversionError
        for d in shape:
            if isinstance(d, Tracer):
                raise TracerIntegerConversionError(d) from None
        raise TypeError(f"{context or 'shape'}: shapes must be sequences of integers, got "
                        f"{shape!r}") from e
    for d in out:
        if d < 0:
            raise ValueError(f"{context or 'shape'}: negative dimension in shape {out}")
    return out


_PY_SCALAR_TYPES = (bool, int, float, complex)


def is_python_scalar(x) -> bool:
    return type(x) in (bool, int, float, complex)


_weak_scalars: dict = {}


def _weak_scalar(fname, a, dt):
    """Python scalar ``a`` as a weakly typed Array of ``dt`` (made once per type, value and
    dtype: the eager path meets the same constants again and again, ``maximum(x, 0.0)``
    above all; a float zero's key has its sign, as -0.0 == 0.0; complex zeros and NaNs,
    which equal no key, are made anew)."""
    ta = type(a)
    key = (ta, a, dt, math.copysign(1.0, a)) if ta is float and not a else (ta, a, dt)
    cache = a == a and (a or ta is not complex)
    hit = _weak_scalars.get(key) if cache else None
    if hit is not None:
        return hit
    if dtypes.is_integer(dt) and type(a) is float:
        raise TypeError(f"{fname}: cannot combine the float scalar {a!r} with an "
                        f"integer array of dtype {dt}; convert explicitly")
    if not dtypes.is_complex(dt) and type(a) is complex:
        raise TypeError(f"{fname}: cannot combine the complex scalar {a!r} with "
                        f"an array of dtype {dt}")
    out = Array(dtypes.scalar_to_dtype(a, dt), weak_type=True)
    if cache:
        if len(_weak_scalars) > 4096:
            _weak_scalars.clear()
        _weak_scalars[key] = out
    return out


def eager_binary(p: Primitive, fname: str, x, y, kinds: str = "fciu",
                 plans: dict | None = None):
    """``p.bind(*promote_weak_scalars(fname, x, y))`` for the eager hot path, or None where
    it does not apply (the caller then takes the general path, with the same result).

    It applies to a concrete Array of a float or complex dtype with a Python float or int
    (``x * 2.0``; such a scalar takes the array's dtype, weakly), or two concrete Arrays
    of one aval (``x + y``), where the dtype's kind is in ``kinds``, with no transformation
    active: then nothing needs promoting, broadcasting or a trace, and the primitive's
    impl runs at once, through the memoised plan (result aval and impl) that
    ``core.eval_primitive`` uses, without its loops over operands and results. With
    ``plans`` (an ``eager_binary_op``'s), the plan is remembered there for the operands'
    avals."""
    if core.dynamic_level():
        return None
    x0, y0 = x, y
    tx, ty = type(x), type(y)
    if tx is Array:
        if ty is Array:
            ax, ay = x._aval or x.aval, y._aval or y.aval
            if ax != ay or ax.dtype.kind not in kinds:
                return None
        elif ty is float or (ty is int and -2 ** 63 <= y < 2 ** 63):
            dt = (x._aval or x.aval).dtype
            if dt.kind not in "fc" or dt.kind not in kinds:
                return None
            y = _weak_scalar(fname, y, dt)
        else:
            return None
    elif ty is Array and (tx is float or (tx is int and -2 ** 63 <= x < 2 ** 63)):
        dt = (y._aval or y.aval).dtype
        if dt.kind not in "fc" or dt.kind not in kinds:
            return None
        x = _weak_scalar(fname, x, dt)
    else:
        return None
    ax, ay = x._aval or x.aval, y._aval or y.aval
    key = (p, ax, ay)
    (out_aval,), fn, quiet = (core._eval_plans.get(key)
                              or core.eval_plan(key, p, [ax, ay], {}))
    if type(out_aval) is not ShapedArray:
        return core.eval_primitive(p, (x, y), {})[0]
    if plans is not None:
        _remember_fast_plan(plans, x0, y0, fn, out_aval, quiet)
    return core.impl_result(p, core.call_impl(fn, quiet, x._value, y._value), out_aval)


# An eager_binary_op's plans: {key of x: {key of y: (the function to call, the result's
# aval, its dtype, how to call it (``_quiet_kind``), its weak type, the operands' avals)}}.
# An Array's key is the id of its aval, kept alive by the entry (so the id cannot name
# another aval meanwhile); a Python float's key is the id of ``float``. Filled by
# ``eager_binary``, read by the op.

# Python floats go to a ufunc as they are only where NumPy gives them the array's dtype
# (NEP 50), as the weak-typed scalar does.
_FLOATS_AS_WEAK = np.lib.NumpyVersion(np.__version__) >= "2.0.0"


_NO_KEY = object()     # (no operand's key: the initial "plan used last")


def _fast_key(v):
    return id(float if type(v) is float else v._aval)


def _remember_fast_plan(plans, x, y, fn, out_aval, quiet):
    tx, ty = type(x), type(y)
    if not (tx is Array or tx is float) or not (ty is Array or ty is float):
        return      # (an int scalar: its weak Array is made per value, by _weak_scalar)
    if (tx is float or ty is float) and not (_FLOATS_AS_WEAK and isinstance(fn, np.ufunc)):
        fn = _float_as_0d(fn, tx is float, (y if tx is float else x).dtype)
        quiet = True        # (the conversion rounds 1e40 to inf without a warning)
    kx = _fast_key(x)
    row = plans.get(kx)
    if row is None:
        if len(plans) >= 256:
            plans.clear()
        row = plans[kx] = {}
    elif len(row) >= 16:    # (arrays made anew each time bring new aval objects)
        row.clear()
    row[_fast_key(y)] = (
        fn, out_aval, out_aval.dtype, _quiet_kind(fn, quiet), out_aval.weak_type,
        (getattr(x, "_aval", None), getattr(y, "_aval", None)))


def _quiet_kind(fn, quiet: bool) -> int:
    """How a remembered plan calls ``fn``: 0 as it is; 2, a NumPy ufunc, in this thread's
    quiet context (``core.quiet_run``); 1, any other function needing its errors ignored,
    under a switch of the error state."""
    return 0 if not quiet else 2 if type(fn) is np.ufunc else 1


def _float_as_0d(fn, first: bool, dt):
    """``fn`` taking the Python float operand as the 0-d array of ``dt`` that
    ``_weak_scalar`` makes of it (``dtypes.scalar_to_dtype``: the float rounded to
    ``dt``), for impls other than NumPy's ufuncs (``maximum``'s)."""
    if first:
        return lambda a, b: fn(np.asarray(a, dt), b)
    return lambda a, b: fn(a, np.asarray(b, dt))


def eager_binary_op(p: Primitive, fname: str, general: Callable, kinds: str = "fciu",
                    swap: bool = False) -> Callable:
    """``general`` (a binary function: a jax.numpy ufunc or an Array operator, which is
    ``p.bind(*promote_weak_scalars(fname, x, y))`` wherever ``eager_binary(..., kinds)``
    applies) with the eager fast path in front. Two concrete Arrays, or a concrete Array
    and a Python float, with no transformation active, go to ``eager_binary`` the first
    time their avals meet, which remembers the plan in this op's own table; the next
    time the remembered impl runs at once with floating-point errors ignored (a ufunc in
    the quiet context, ``core.quiet_run``; another impl under one error-state switch).
    The result is the general path's (the same impl, the same aval); anything else --
    another operand type, an active trace, an impl result of another type or dtype --
    takes ``general``. ``swap``: the function computes ``p(y, x)`` (a reflected operator,
    ``__radd__``)."""
    plans: dict = {}
    get = plans.get
    ndarray, new = np.ndarray, Array.__new__
    cv, qc = core.extobj_contextvar, core._quiet
    run = core.quiet_run()
    # The plan used last, unpacked, with the operands' keys (an aval, or ``float``): a
    # loop doing one op on the same avals skips the table. One tuple, replaced whole, so
    # a thread never sees half of another's.
    last = (_NO_KEY, _NO_KEY, None, None, None, None, None)

    def slow(x, y):
        out = eager_binary(p, fname, x, y, kinds, plans)
        if out is not None:
            return out
        return general(y, x) if swap else general(x, y)

    def op(x, y, /):
        nonlocal last
        if type(x) is Array:
            if type(y) is Array:
                ay, vy = y._aval, y._value
            elif type(y) is float:
                ay = float
                vy = y
            else:
                return slow(x, y)
            ax, vx = x._aval, x._value
        elif type(y) is Array and type(x) is float:
            ax, vx, ay, vy = float, x, y._aval, y._value
        else:
            return slow(x, y)
        if core._traces_active and core._trace_state.dynamic.level:  # (dynamic_level())
            return slow(x, y)
        lx, ly, fn, out_aval, dt, q, weak = last
        if lx is not ax or ly is not ay:
            row = get(id(ax))
            plan = None if row is None else row.get(id(ay))
            if plan is None:
                return slow(x, y)
            fn, out_aval, dt, q, weak, _ = plan
            last = (ax, ay, fn, out_aval, dt, q, weak)
        if q == 2:
            try:
                o = run(fn, vx, vy)
            except RuntimeError:    # (entered already: by another thread, or Python
                o = core.call_impl(fn, True, vx, vy)    # code ran inside it)
            # (a ufunc's result dtype follows from the operands' dtypes alone)
            if type(o) is ndarray:
                # (core._new_array inline: a call less per operation)
                o.setflags(False)
                a = new(Array)
                a._value, a._weak_type, a._aval = o, weak, out_aval
                return a
            return core.impl_result(p, o, out_aval)
        if q:       # (core.call_impl inline: the call took 1.2 -> 1.56 us an add)
            token = cv.set(qc[1] if cv.get() is qc[0] else core.ignoring_fp_errors())
            try:
                o = fn(vx, vy)
            finally:
                cv.reset(token)
        else:
            o = fn(vx, vy)
        if type(o) is ndarray and o.dtype is dt:
            o.setflags(False)
            a = new(Array)
            a._value, a._weak_type, a._aval = o, weak, out_aval
            return a
        return core.impl_result(p, o, out_aval)

    if swap:        # (general takes the operands as the reflected operator got them)
        direct = op

        def op(x, y, /):
            return direct(y, x)

    op.__name__ = getattr(general, "__name__", p.name)
    op.__doc__ = general.__doc__
    op.eager_plans = plans           # (tests drop them)
    op.__wrapped_general__ = general
    return op


def eager_unary_op(p: Primitive, general: Callable, kinds: str) -> Callable:
    """``general`` (a jax.numpy function of one operand that is ``p.bind(x)`` for an
    Array ``x`` whose dtype's kind is in ``kinds``: no promotion, no params) with the
    eager fast path in front: a concrete Array with no transformation active runs the
    impl of ``core.eval_plan`` at once with floating-point errors ignored, remembered per
    aval object (as ``eager_binary_op``). Anything else takes ``general``."""
    plans: dict = {}
    ndarray, new = np.ndarray, Array.__new__
    cv, qc = core.extobj_contextvar, core._quiet
    run = core.quiet_run()

    def op(x, /):
        if type(x) is not Array or core._traces_active and core._trace_state.dynamic.level:
            return general(x)
        plan = plans.get(id(x._aval))
        if plan is None:
            ax = x.aval
            if ax.dtype.kind not in kinds:
                return general(x)
            key = (p, ax)
            (out_aval,), fn, quiet = (core._eval_plans.get(key)
                                      or core.eval_plan(key, p, [ax], {}))
            if type(out_aval) is not ShapedArray:
                return general(x)
            if len(plans) >= 1024:
                plans.clear()
            plan = plans[id(ax)] = (fn, out_aval, out_aval.dtype, _quiet_kind(fn, quiet), ax)
        fn, out_aval, dt, q, _ = plan
        if q == 2:
            try:
                o = run(fn, x._value)
            except RuntimeError:        # (as in eager_binary_op)
                o = core.call_impl(fn, True, x._value)
        elif q:         # (core.call_impl inline, as in eager_binary_op)
            token = cv.set(qc[1] if cv.get() is qc[0] else core.ignoring_fp_errors())
            try:
                o = fn(x._value)
            finally:
                cv.reset(token)
        else:
            o = fn(x._value)
        if type(o) is ndarray and o.dtype is dt:
            o.setflags(False)       # (core._new_array inline, as in eager_binary_op)
            a = new(Array)
            a._value, a._weak_type, a._aval = o, out_aval.weak_type, out_aval
            return a
        return core.impl_result(p, o, out_aval)

    op.__name__ = getattr(general, "__name__", p.name)
    op.__doc__ = general.__doc__
    op.__wrapped_general__ = general      # (tests compare the two)
    return op


def eager_unary(p: Primitive, x, params: dict):
    """``p.bind(x, **params)`` for a concrete Array ``x`` with no transformation active,
    through the memoised plan of ``core.eval_primitive`` (the eager hot path of reductions:
    ``x.sum()``), or None where that does not apply (the caller takes the general path,
    with the same result). ``params`` must be hashable and exactly what ``bind`` gets."""
    if type(x) is not Array or core._traces_active and core._trace_state.dynamic.level:
        return None
    ax = x._aval or x.aval
    key = (p, ax, *params.items())
    (out_aval,), fn, quiet = (core._eval_plans.get(key)
                              or core.eval_plan(key, p, [ax], params))
    if not quiet or type(out_aval) is not ShapedArray:
        return core.eval_primitive(p, (x,), params)[0]
    return core.impl_result(p, core.call_impl(fn, quiet, x._value, **params), out_aval)


def promote_weak_scalars(fname: str, *args):
    """lax-style binary ops take arrays of one dtype; Python scalars (weak) adopt the
    dtype of the array operands (``lax.mul(x_f32, 2.0)`` is float32)."""
    for a in args:
        if type(a) in _PY_SCALAR_TYPES:
            break
    else:
        return args
    strong = [a for a in args if type(a) not in _PY_SCALAR_TYPES]
    if strong:
        dt = get_aval(strong[0]).dtype
        out = []
        for a in args:
            if type(a) in _PY_SCALAR_TYPES:
                out.append(_weak_scalar(fname, a, dt))
            else:
                out.append(a)
        return tuple(out)
    dt, _ = dtypes.result_type(*args, return_weak_type_flag=True)
    return tuple(Array(np.asarray(a, dtype=dt), weak_type=True) for a in args)


def as_lax_value(x):
    """``x`` itself if it is an Array or a Tracer, else an Array of it (Python scalars
    weakly typed): lax wrappers that short-cut an identity operation (a reshape to the
    same shape, an empty reduction...) still return Arrays, as jax.lax does."""
    if isinstance(x, (Array, Tracer)):
        return x
    if is_python_scalar(x):
        (x,) = promote_weak_scalars("lax", x)
        return x
    return Array(to_numpy(x))


def scalar_like(x, value):
    """``value`` as a weak scalar of ``x``'s dtype."""
    return Array(np.asarray(value, dtype=get_aval(x).dtype), weak_type=True)


def check_dtype(prim_name: str, aval, allowed, argname: str = "operand"):
    if aval.dtype not in allowed:
        raise TypeError(f"{prim_name} does not accept dtype {aval.dtype.name} for its "
                        f"{argname} (shape {aval.str_short()}); it accepts {group_name(allowed)} "
                        f"dtypes. Convert with lax.convert_element_type or .astype().")


def check_same_shapes_dtypes(prim_name: str, avals, same_dtype=True, allow_scalars=False):
    """Equal shapes (rank-0 operands broadcast when ``allow_scalars``) and dtypes.
    Returns the common shape."""
    shapes = [a.shape for a in avals]
    nonscalar = [s for s in shapes if s != ()] if allow_scalars else shapes
    if any(s != nonscalar[0] for s in nonscalar[1:]):
        raise TypeError(f"{prim_name} requires arguments of equal shapes, got "
                        f"{', '.join(a.str_short() for a in avals)}; broadcast them first "
                        f"(lax.broadcast_in_dim, or use tracer.numpy which broadcasts)")
    if same_dtype:
        dts = [a.dtype for a in avals]
        if any(d != dts[0] for d in dts[1:]):
            raise TypeError(f"{prim_name} requires arguments of the same dtype, got "
                            f"{', '.join(a.str_short() for a in avals)}; convert with "
                            f"lax.convert_element_type (tracer.numpy promotes automatically)")
    return nonscalar[0] if nonscalar else ()


# Bit-level integer ops that see the operand's own width: a signed 2-/4-bit operand
# widens to its bits (masked, unsigned), not to its sign-extended value. (XLA's
# population_count does count the sign extension: popcount(int4 -8) is 5.)
_BITWISE_WIDTH_OPS = frozenset({"clz", "shift_right_logical"})
# Impls for the low-precision types that replace the widened one: XLA computes these
# as a composition in the narrow type (JAX lowers exp2 to exp(log(2) * x), rounding the
# product), so each step rounds. Registered by the family modules: name -> impl.
LOWP_IMPLS: dict = {}
# The names of the primitives whose impl is ``lowp_widening``'s (filled as they are made).
LOWP_WIDENED: set = set()


def narrow(x, dt):
    """``x`` (float32/float16, or 8-bit integers) rounded to nearest even (or wrapped)
    into ``dt``, as XLA converts: float4_e2m1fn, which has no NaN, takes NaN to -0."""
    with np.errstate(all="ignore"):
        out = np.asarray(x).astype(dt)
    if np.dtype(dt).name == "float4_e2m1fn" and dtypes.is_floating(np.asarray(x).dtype):
        out = np.where(np.isnan(x), np.asarray(0x8, np.uint8).view(dt), out)
    return out


def _widen(x, name):
    dt = x.dtype
    # (XLA counts int4's bits sign-extended to 8, int2's as they are)
    if (name in _BITWISE_WIDTH_OPS or (name == "population_count" and dt == dtypes.int2)) \
            and dtypes.is_signed_integer(dt):
        return (x.astype(np.int8).view(np.uint8) & np.uint8((1 << _bit_width(dt)) - 1))
    if name == "shift_right_arithmetic" and dt in (dtypes.uint4, dtypes.uint2):
        # XLA shifts the top bit of the narrow type in, unsigned or not
        w = x.astype(np.int8)
        return np.where(w >= 1 << (_bit_width(dt) - 1), w - (1 << _bit_width(dt)),
                        w).astype(np.int8)
    return x.astype(dtypes.compute_dtype(dt))


def _bit_width(dt):
    return {dtypes.int4: 4, dtypes.uint4: 4, dtypes.int2: 2, dtypes.uint2: 2}.get(
        dt, dt.itemsize * 8)


def plain_widening(name: str, dts) -> bool:
    """Whether ``lowp_widening``'s impl of ``name`` on operands of dtypes ``dts`` is the
    plain composition: each low-precision operand widened to ``dtypes.compute_dtype`` (a
    conversion), the impl there, one rounding (or wrap) to the result dtype -- no
    ``LOWP_IMPLS`` replacement, no widening of a signed operand's bits as unsigned, no
    count corrected for the narrow width. Compiled code (lowering.rules) does exactly
    this composition and nothing else."""
    if name not in LOWP_WIDENED or name in LOWP_IMPLS:
        return False
    for dt in dts:
        if dt is None or np.dtype(dt) not in dtypes._LOWP:
            continue
        if name == "clz" and dtypes.is_lowp_int(dt):
            return False
        if (name in _BITWISE_WIDTH_OPS or (name == "population_count" and dt == dtypes.int2)) \
                and dtypes.is_signed_integer(dt):
            return False
        if name == "shift_right_arithmetic" and dt in (dtypes.uint4, dtypes.uint2):
            return False
    return True


def lowp_widening(name: str, impl: Callable, result_dtype=None) -> Callable:
    """``impl`` for the ml_dtypes types as XLA's CPU backend computes them: operands
    widen (``dtypes.compute_dtype``: float32 for bfloat16 and float8_e8m0fnu, float16
    for the other float8/float4 formats, 8 bits for the 2-/4-bit integers), the impl
    runs there, and
    the result rounds once (to nearest even, floats) or wraps (integers) to the result
    dtype. Other operands go straight to ``impl``."""
    LOWP_WIDENED.add(name)

    def wrapped(*args, **params):
        for a in args:
            if getattr(a, "dtype", None) in dtypes._LOWP:
                break
        else:
            return impl(*args, **params)
        dt = next(a.dtype for a in args if getattr(a, "dtype", None) in dtypes._LOWP)
        special = LOWP_IMPLS.get(name)
        if special is not None:
            return special(*args, **params)
        wide = [_widen(a, name) if getattr(a, "dtype", None) in dtypes._LOWP else a for a in args]
        with np.errstate(all="ignore"):   # (float16's NaN loops warn where float32's do not)
            out = impl(*wide, **params)
        want = dt if result_dtype is None else np.dtype(result_dtype(dt))
        if name == "clz" and dtypes.is_lowp_int(dt):
            out = out - (8 - _bit_width(dt))
        return narrow(out, want)

    wrapped.__name__ = getattr(impl, "__name__", name)
    wrapped.plain_impl = impl     # what runs on operands of no low-precision dtype
    inner = getattr(impl, "impl_without_errstate", None)
    if inner is not None:
        wrapped.impl_without_errstate = lowp_widening(name, inner, result_dtype)
    return wrapped


def standard_unop(name: str, impl: Callable, allowed=_num, result_dtype=None,
                  keep_weak: bool = True) -> Primitive:
    """An element-wise unary primitive: abstract eval (dtype check, shape kept), impl
    (a NumPy function, run on the low-precision types through ``lowp_widening``),
    vectorized batching rule."""
    p = Primitive(name)
    impl = lowp_widening(name, impl, result_dtype)

    def abstract_eval(x, **params):
        check_dtype(name, x, allowed)
        dt = x.dtype if result_dtype is None else result_dtype(x.dtype)
        return ShapedArray(x.shape, dt, x.weak_type and keep_weak)

    p.def_abstract_eval(abstract_eval)
    p.def_impl(impl)
    batching.defvectorized(p)
    return p


def standard_naryop(name: str, impl: Callable, allowed=_num, nargs: int = 2,
                    result_dtype=None, same_dtype: bool = True) -> Primitive:
    """An element-wise n-ary primitive over operands of one dtype and equal shapes, where
    rank-0 operands broadcast (as in JAX's jaxprs: ``mul b 2.0:f32[]``)."""
    p = Primitive(name)
    impl = lowp_widening(name, impl, result_dtype)

    def abstract_eval(*avals, **params):
        if len(avals) != nargs:
            raise TypeError(f"{name} takes {nargs} operands, got {len(avals)}")
        for i, a in enumerate(avals):
            check_dtype(name, a, allowed, f"operand {i}")
        shape = check_same_shapes_dtypes(name, avals, same_dtype, allow_scalars=True)
        dt = avals[0].dtype if result_dtype is None else result_dtype(avals[0].dtype)
        return ShapedArray(shape, dt, all(a.weak_type for a in avals))

    p.def_abstract_eval(abstract_eval)
    p.def_impl(impl)
    batching.defbroadcasting(p)
    return p


np_errstate = core.np_errstate


_SPECIAL_UFUNCS: dict = {}


def scipy_special(name: str):
    """``scipy.special.<name>``, the same ufunc, without importing ``scipy.special``.

    The package's import costs about 0.12 s (its array-API wrappers and docstring
    parsing), paid by every program whose NumPy tier evaluates a logistic or an erf: a
    cold start's first calls. SciPy keeps most of its element-wise functions in one
    extension module, ``scipy.special._special_ufuncs``, which loads on its own in about
    a millisecond. It is loaded as ``numba_backend._numba`` loads SciPy's BLAS module:
    by file, then taken out of ``sys.modules`` again, so that a later
    ``import scipy.special`` (the user's) imports the package the normal way. Where that
    module is missing or lacks ``name`` (another SciPy), the package is imported.
    """
    fn = _SPECIAL_UFUNCS.get(name)
    if fn is None:
        import sys
        mod = None if "scipy.special" in sys.modules else _special_ufuncs_module()
        if mod is None or not hasattr(mod, name):
            import scipy.special as mod
        fn = _SPECIAL_UFUNCS[name] = getattr(mod, name)
    return fn


def _special_ufuncs_module():
    import _imp
    import importlib.machinery as machinery
    import importlib.util as util
    import os
    import sys
    name = "scipy.special._special_ufuncs"
    try:
        import scipy
        d = os.path.join(scipy.__path__[0], "special")
        fn = next(f for f in os.listdir(d) if f.startswith("_special_ufuncs.")
                  and f.endswith(tuple(machinery.EXTENSION_SUFFIXES)))
    except Exception:          # no SciPy, another layout: the package import decides
        return None
    # The extension enters itself in ``sys.modules`` while it loads: the interpreter's
    # import lock (reentrant) keeps another thread's ``import scipy.special`` from finding
    # it there, where the package would not bind it as its attribute.
    _imp.acquire_lock()
    try:
        if "scipy.special" in sys.modules:
            return None
        loader = machinery.ExtensionFileLoader(name, os.path.join(d, fn))
        mod = util.module_from_spec(util.spec_from_loader(name, loader))
        loader.exec_module(mod)
    except Exception:
        return None
    finally:
        if "scipy.special" not in sys.modules:
            sys.modules.pop(name, None)
        _imp.release_lock()
    return mod
