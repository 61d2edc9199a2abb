"""Helpers shared by the primitive families: argument normalisation, shape/dtype checks
and the ``standard_unop`` / ``standard_naryop`` constructors (JAX's ``unop``/``naryop``)
that create an element-wise primitive with its abstract eval, impl and batching rule."""
from __future__ import annotations

import operator
from typing import Callable, Sequence

import numpy as np

from tracer import core, dtypes
from tracer.core import Array, Primitive, ShapedArray, Tracer, get_aval, to_numpy
from tracer.interpreters import batching

# dtype groups (names used in error messages)
_bool = (dtypes.bool_,)
_int = tuple(d for d in dtypes.SUPPORTED_DTYPES if dtypes.is_integer(d))
_uint = tuple(d for d in _int if dtypes.is_unsigned_integer(d))
_sint = tuple(d for d in _int if dtypes.is_signed_integer(d))
_float = (dtypes.float16, dtypes.float32, dtypes.float64)
_complex = (dtypes.complex64, dtypes.complex128)
_inexact = _float + _complex
_num = _int + _inexact
_any = dtypes.SUPPORTED_DTYPES
_bool_or_int = _bool + _int
_signed_num = _sint + _inexact
_ordered = _bool + _int + _float

_GROUP_NAMES = {
    _bool: "bool", _int: "integer", _uint: "unsigned integer", _sint: "signed integer",
    _float: "floating", _complex: "complex", _inexact: "floating or complex",
    _num: "numeric", _any: "any", _bool_or_int: "bool or integer",
    _signed_num: "signed numeric", _ordered: "bool, integer or floating",
}


def group_name(group) -> str:
    return _GROUP_NAMES.get(tuple(group), ", ".join(np.dtype(d).name for d in group))


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
    dtype: the eager path meets the same constants again and again; zeros are made anew,
    as -0.0 == 0.0 would share a key, and NaNs, which equal no key)."""
    key = (type(a), a, dt)
    cache = a and a == a      # (not zeros, not NaNs: those never find their key)
    hit = _weak_scalars.get(key) if cache else None
    if hit is not None:
        return hit
    if dt.kind in "iu" and type(a) is float:
        raise TypeError(f"{fname}: cannot combine the float scalar {a!r} with an "
                        f"integer array of dtype {dt}; convert explicitly")
    if dt.kind != "c" and type(a) is complex:
        raise TypeError(f"{fname}: cannot combine the complex scalar {a!r} with "
                        f"an array of dtype {dt}")
    out = Array(dtypes.scalar_to_dtype(a, dt), weak_type=True)
    if cache:
        if len(_weak_scalars) > 4096:
            _weak_scalars.clear()
        _weak_scalars[key] = out
    return out


def eager_binary(p: Primitive, fname: str, x, y):
    """``p.bind(*promote_weak_scalars(fname, x, y))`` for the eager hot path, or None where
    it does not apply (the caller then takes the general path, with the same result).

    It applies to a concrete Array of a float or complex dtype with a Python float or int
    (``x * 2.0``; such a scalar takes the array's dtype, weakly), or two concrete Arrays
    of one aval (``x + y``), with no transformation active: then nothing needs promoting,
    broadcasting or a trace, and the primitive's impl runs at once (``core.eval_primitive``:
    the memoised abstract eval, the impl and the result's aval)."""
    if core._dynamic_trace.level:
        return None
    tx, ty = type(x), type(y)
    if tx is Array:
        if ty is Array:
            ax, ay = x._aval or x.aval, y._aval or y.aval
            if ax != ay or ax.dtype.kind not in "fciu":
                return None
        elif ty is float or (ty is int and -2 ** 63 <= y < 2 ** 63):
            dt = (x._aval or x.aval).dtype
            if dt.kind not in "fc":
                return None
            y = _weak_scalar(fname, y, dt)
        else:
            return None
    elif ty is Array and (tx is float or (tx is int and -2 ** 63 <= x < 2 ** 63)):
        dt = (y._aval or y.aval).dtype
        if dt.kind not in "fc":
            return None
        x = _weak_scalar(fname, x, dt)
    else:
        return None
    return core.eval_primitive(p, (x, y), {})[0]


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


def standard_unop(name: str, impl: Callable, allowed=_num, result_dtype=None,
                  keep_weak: bool = True) -> Primitive:
    """An element-wise unary primitive: abstract eval (dtype check, shape kept), impl
    (a NumPy function), vectorized batching rule."""
    p = Primitive(name)

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


try:    # NumPy >= 2: the error state is a context variable holding an "extobj"
    from numpy._core._multiarray_umath import _make_extobj
    from numpy._core._ufunc_config import _extobj_contextvar
except ImportError:     # another layout: np.errstate itself
    _extobj_contextvar = None
_quiet = [None, None]   # [the state it was made from, the same state ignoring all errors]


def _ignoring_state():
    """The current error state with every floating-point error ignored (made once per
    state: ``np.errstate`` costs more than a small ufunc call, the eager path's impls
    need only this)."""
    cur = _extobj_contextvar.get()
    last, quiet = _quiet
    if cur is not last:
        quiet = _make_extobj(all="ignore")
        _quiet[:] = [cur, quiet]
    return quiet


def np_errstate(fn):
    """Run a NumPy impl without floating-point warnings (IEEE results are the semantics)."""

    if _extobj_contextvar is None:
        def wrapped(*args, **kw):
            with np.errstate(all="ignore"):
                return fn(*args, **kw)
    else:
        def wrapped(*args, **kw):
            token = _extobj_contextvar.set(_ignoring_state())
            try:
                return fn(*args, **kw)
            finally:
                _extobj_contextvar.reset(token)

    wrapped.__name__ = getattr(fn, "__name__", "impl")
    # eval_jaxpr_impls enters errstate once per jaxpr and calls the impl itself
    wrapped.impl_without_errstate = fn
    return wrapped
