"""Reductions (XLA Operation semantics, 'Reduce'): reduce_sum, reduce_prod, reduce_max,
reduce_min, reduce_and, reduce_or, reduce_xor, argmax, argmin, and the variadic
``reduce`` with a user computation.

Empty reductions give the computation's identity: 0 for sum, 1 for prod, -inf / the
integer minimum for max, +inf / the integer maximum for min (XLA's init values)."""
from __future__ import annotations

import operator

import numpy as np

from tracer import dtypes
from tracer.core import Primitive, ShapedArray, get_aval
from tracer.interpreters import ad, batching
from tracer.interpreters.ad import Zero, deflinear
from lax.utils import (_any, _bool_or_int, _num, _ordered, as_lax_value, canonicalize_axis,
                       check_dtype, np_errstate)
from lax import elementwise as ew
from lax import shapes


def _canon_axes(axes, ndim, name):
    axes = (axes,) if isinstance(axes, (int, np.integer)) else tuple(axes)
    out = tuple(sorted({canonicalize_axis(a, ndim, f"{name} axis") for a in axes}))
    if len(out) != len(axes):
        raise ValueError(f"{name}: repeated axis in {axes}")
    return out


def _reduce_abstract_eval(name, allowed):
    def rule(x, *, axes):
        check_dtype(name, x, allowed)
        if any(not 0 <= a < x.ndim for a in axes) or len(set(axes)) != len(axes):
            raise TypeError(f"{name}: axes {axes} out of range or repeated for operand "
                            f"{x.str_short()}")
        shape = tuple(n for i, n in enumerate(x.shape) if i not in axes)
        return ShapedArray(shape, x.dtype, x.weak_type)
    return rule


def _make_reducer(name, impl, allowed):
    p = Primitive(name)
    p.def_abstract_eval(_reduce_abstract_eval(name, allowed))
    p.def_impl(impl)
    batching.defreducer(p)
    return p


def _wrap(p, name):
    def reducer(operand, axes):
        nd = get_aval(operand).ndim
        ax = _canon_axes(axes, nd, name)
        if not ax:
            return as_lax_value(operand)
        return p.bind(operand, axes=ax)
    return reducer


# -------------------------------------- reduce_sum --------------------------------------

def _sum_impl(x, *, axes):
    return np.sum(x, axis=axes, dtype=x.dtype)


reduce_sum_p = _make_reducer("reduce_sum", np_errstate(_sum_impl), _num)


def _reduce_sum_transpose(cts, x, *, axes):
    (ct,) = cts
    if type(ct) is Zero:
        return [None]
    shape = x.aval.shape
    kept = tuple(i for i in range(len(shape)) if i not in axes)
    return [shapes.broadcast_in_dim(ct, shape, kept)]


deflinear(reduce_sum_p, _reduce_sum_transpose)
reduce_sum = _wrap(reduce_sum_p, "reduce_sum")
reduce_sum.__doc__ = """Sum over ``axes``. Shape: operand's without ``axes``; dtype kept
(integers wrap). XLA 'Reduce' with add."""


# -------------------------------------- reduce_prod -------------------------------------

def _prod_impl(x, *, axes):
    return np.prod(x, axis=axes, dtype=x.dtype)


reduce_prod_p = _make_reducer("reduce_prod", np_errstate(_prod_impl), _num)


def _reduce_prod_tree(x, axes):
    """Product over ``axes`` as a balanced tree of multiplications: differentiable with
    zeros in the input (each factor's derivative is the product of the others)."""
    nd = get_aval(x).ndim
    kept = [i for i in range(nd) if i not in axes]
    x = shapes.transpose(x, tuple(kept) + tuple(axes))
    shape = get_aval(x).shape
    n = int(np.prod(shape[len(kept):], dtype=np.int64))
    x = shapes.reshape(x, shape[:len(kept)] + (n,))
    k = len(kept)
    if n == 0:
        return shapes.full(shape[:k], 1, get_aval(x).dtype)
    while get_aval(x).shape[k] > 1:
        m = get_aval(x).shape[k]
        if m % 2:
            one = ew._const(x, 1)
            x = shapes.pad(x, one, [(0, 0, 0)] * k + [(0, 1, 0)])
            m += 1
        a = shapes.slice_in_dim(x, 0, m // 2, 1, k)
        b = shapes.slice_in_dim(x, m // 2, m, 1, k)
        x = ew.mul(a, b)
    return shapes.reshape(x, shape[:k])


def _reduce_prod_jvp(primals, tangents, *, axes):
    from tracer.interpreters.ad import jvp_flat
    (x,), (g,) = primals, tangents
    out = reduce_prod_p.bind(x, axes=axes)
    if type(g) is Zero:
        return [out], [Zero.from_primal_value(out)]
    _, (t,) = jvp_flat(lambda x: [_reduce_prod_tree(x, axes)], [x], [g])
    return [out], [t]


ad.primitive_jvps[reduce_prod_p] = _reduce_prod_jvp
reduce_prod = _wrap(reduce_prod_p, "reduce_prod")
reduce_prod.__doc__ = """Product over ``axes``. XLA 'Reduce' with multiply."""


# -------------------------------------- max / min ---------------------------------------

def _minmax_identity(dtype, is_max):
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return not is_max
    if dtypes.is_floating(dt):
        return -np.inf if is_max else np.inf
    info = np.iinfo(dt)
    return info.min if is_max else info.max


def _max_impl(x, *, axes):
    return np.max(x, axis=axes, initial=_minmax_identity(x.dtype, True))


def _min_impl(x, *, axes):
    return np.min(x, axis=axes, initial=_minmax_identity(x.dtype, False))


reduce_max_p = _make_reducer("reduce_max", np_errstate(_max_impl), _ordered)
reduce_min_p = _make_reducer("reduce_min", np_errstate(_min_impl), _ordered)


def _reduce_chooser_jvp(p):
    def rule(primals, tangents, *, axes):
        (x,), (g,) = primals, tangents
        ans = p.bind(x, axes=axes)
        if type(g) is Zero:
            return [ans], [Zero.from_primal_value(ans)]
        shape = get_aval(x).shape
        kept = tuple(i for i in range(len(shape)) if i not in axes)
        ans_b = shapes.broadcast_in_dim(ans, shape, kept)
        loc = ew.convert_element_type(ew.eq(x, ans_b), get_aval(g).dtype)
        counts = reduce_sum_p.bind(loc, axes=axes)
        return [ans], [ew.div(reduce_sum_p.bind(ew.mul(g, loc), axes=axes), counts)]
    ad.primitive_jvps[p] = rule


_reduce_chooser_jvp(reduce_max_p)
_reduce_chooser_jvp(reduce_min_p)
reduce_max = _wrap(reduce_max_p, "reduce_max")
reduce_max.__doc__ = """Maximum over ``axes`` (NaN propagates; -inf / INT_MIN when empty).
Ties share the gradient equally (JAX)."""
reduce_min = _wrap(reduce_min_p, "reduce_min")
reduce_min.__doc__ = """Minimum over ``axes`` (NaN propagates; +inf / INT_MAX when empty)."""


# ----------------------------------- and / or / xor -------------------------------------

def _logical(npfn, boolfn):
    def impl(x, *, axes):
        if x.dtype == np.bool_:
            return boolfn.reduce(x, axis=axes)
        return npfn.reduce(x, axis=axes).astype(x.dtype)
    return impl


reduce_and_p = _make_reducer("reduce_and", _logical(np.bitwise_and, np.logical_and),
                             _bool_or_int)
reduce_or_p = _make_reducer("reduce_or", _logical(np.bitwise_or, np.logical_or), _bool_or_int)
reduce_xor_p = _make_reducer("reduce_xor", _logical(np.bitwise_xor, np.logical_xor),
                             _bool_or_int)
for _p in (reduce_and_p, reduce_or_p, reduce_xor_p):
    ad.defjvp_zero(_p)
reduce_and = _wrap(reduce_and_p, "reduce_and")
reduce_and.__doc__ = "Logical/bitwise and over ``axes`` (True / all ones when empty)."
reduce_or = _wrap(reduce_or_p, "reduce_or")
reduce_or.__doc__ = "Logical/bitwise or over ``axes`` (False / 0 when empty)."
reduce_xor = _wrap(reduce_xor_p, "reduce_xor")
reduce_xor.__doc__ = "Logical/bitwise xor over ``axes`` (False / 0 when empty)."


# ------------------------------------- argmax/argmin ------------------------------------

def _arg_abstract_eval(name):
    def rule(x, *, axes, index_dtype):
        check_dtype(name, x, _ordered)
        if len(axes) != 1 or not 0 <= axes[0] < x.ndim:
            raise TypeError(f"{name}: needs exactly one axis within the rank of "
                            f"{x.str_short()}, got {axes}")
        if x.shape[axes[0]] == 0:
            raise ValueError(f"{name}: cannot take the arg{name[3:]} of an empty axis "
                             f"(operand {x.str_short()}, axis {axes[0]})")
        if not dtypes.is_integer(index_dtype):
            raise TypeError(f"{name}: index_dtype must be an integer dtype, got {index_dtype}")
        shape = tuple(n for i, n in enumerate(x.shape) if i != axes[0])
        return ShapedArray(shape, index_dtype, False)
    return rule


def _argmax_impl(x, *, axes, index_dtype):
    # NaN counts as the maximum (the first NaN wins), as in NumPy and JAX.
    return np.argmax(x, axis=axes[0]).astype(index_dtype)


def _argmin_impl(x, *, axes, index_dtype):
    return np.argmin(x, axis=axes[0]).astype(index_dtype)


def _arg_batch(p):
    def rule(axis_size, vals, dims, *, axes, index_dtype):
        (x,), (d,) = vals, dims
        ax = tuple(a + (a >= d) for a in axes)
        out_d = d - (axes[0] < d)
        return [p.bind(x, axes=ax, index_dtype=index_dtype)], [out_d]
    batching.primitive_batchers[p] = rule


argmax_p = Primitive("argmax")
argmax_p.def_abstract_eval(_arg_abstract_eval("argmax"))
argmax_p.def_impl(_argmax_impl)
ad.defjvp_zero(argmax_p)
_arg_batch(argmax_p)

argmin_p = Primitive("argmin")
argmin_p.def_abstract_eval(_arg_abstract_eval("argmin"))
argmin_p.def_impl(_argmin_impl)
ad.defjvp_zero(argmin_p)
_arg_batch(argmin_p)


def argmax(operand, axis: int, index_dtype):
    """Index of the maximum along ``axis`` (first one on ties; NaN counts as maximal).
    ValueError on an empty axis."""
    axis = canonicalize_axis(axis, get_aval(operand).ndim)
    return argmax_p.bind(operand, axes=(axis,), index_dtype=dtypes.canonicalize_dtype(index_dtype))


def argmin(operand, axis: int, index_dtype):
    """Index of the minimum along ``axis`` (first one on ties; NaN counts as minimal)."""
    axis = canonicalize_axis(axis, get_aval(operand).ndim)
    return argmin_p.bind(operand, axes=(axis,), index_dtype=dtypes.canonicalize_dtype(index_dtype))
