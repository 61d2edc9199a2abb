"""Reductions (XLA Operation semantics, 'Reduce'): reduce_sum, reduce_prod, reduce_max,
reduce_min, reduce_and, reduce_or, reduce_xor, argmax, argmin, and the variadic
``reduce`` with a user computation.

Empty reductions give the computation's identity: 0 for sum, 1 for prod, -inf / the
integer minimum for max, +inf / the integer maximum for min (XLA's init values)."""
from __future__ import annotations

import math

import numpy as np

from tracer import dtypes
from tracer.core import Primitive, ShapedArray, get_aval
from tracer.interpreters import ad, batching
from tracer.interpreters.ad import Zero, deflinear
from lax.utils import (_bool_or_int, _num, _ordered, as_lax_value, canonicalize_axis,
                       check_dtype, lowp_widening, np_errstate)
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
    # the low-precision types accumulate in float32 (or 8 bits) and round once
    p.def_impl(lowp_widening(name, impl))
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
    # (np.sum's own reduction, without its Python wrapper: the eager path calls this)
    return np.add.reduce(x, axis=axes, dtype=x.dtype)


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
    return np.multiply.reduce(x, axis=axes, dtype=x.dtype)


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
    info = dtypes.iinfo(dt)
    return info.min if is_max else info.max


def _float_minmax(x, axes, is_max):
    """Float max/min as integer keys in IEEE total order (-0.0 < +0.0), NaN mapped to the
    extreme key so any NaN wins: the compiled reduction's algorithm
    (lowering/reductions.py), order-independent. A NaN result is the canonical quiet NaN
    (XLA:CPU passes some operand NaN through, which depends on its reduction order)."""
    it = np.dtype(f"i{x.dtype.itemsize}")
    top = dtypes.iinfo(it).max
    i = np.ascontiguousarray(x).view(it)
    keys = np.where(i < 0, i ^ top, i)
    ext = top if is_max else dtypes.iinfo(it).min
    keys = np.where(np.isnan(x), np.asarray(ext, it), keys)
    start = np.asarray(-np.inf if is_max else np.inf, x.dtype).view(it)
    fn = np.max if is_max else np.min
    k = np.asarray(fn(keys, axis=axes, initial=start if start >= 0 else start ^ top))
    out = np.where(k < 0, k ^ top, k).astype(it).view(x.dtype)
    return np.where((k == top) | (k == dtypes.iinfo(it).min), np.asarray(np.nan, x.dtype), out)


def _fast_float_minmax(x, axes, is_max):
    """``_float_minmax`` through NumPy's own max/min (several times faster): a nonzero
    extreme has one bit pattern, NaN becomes the canonical NaN, and where an extreme is
    a zero (whose sign NumPy leaves to the order it meets them in) the integer-key
    reduction decides."""
    fn = np.maximum.reduce if is_max else np.minimum.reduce
    m = np.asarray(fn(x, axis=axes, initial=-np.inf if is_max else np.inf))
    if m.ndim == 0:     # (a full reduction: Python-level tests, cheaper on one element)
        v = m[()]
        if v == 0:
            return _float_minmax(x, axes, is_max)
        return np.asarray(np.nan, x.dtype) if v != v else m
    if (m == 0).any():
        return _float_minmax(x, axes, is_max)
    return np.where(np.isnan(m), np.asarray(np.nan, x.dtype), m)


def _max_impl(x, *, axes):
    if dtypes.is_floating(x.dtype):
        return _fast_float_minmax(x, axes, True)
    return np.max(x, axis=axes, initial=_minmax_identity(x.dtype, True))


def _min_impl(x, *, axes):
    if dtypes.is_floating(x.dtype):
        return _fast_float_minmax(x, axes, False)
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
reduce_max.__doc__ = """Maximum over ``axes`` (-inf / INT_MIN when empty). XLA 'Reduce' with
Max: -0.0 < +0.0, and any NaN gives NaN (the canonical quiet NaN: payloads and the NaN's
sign are not kept). Ties share the gradient equally (JAX)."""
reduce_min = _wrap(reduce_min_p, "reduce_min")
reduce_min.__doc__ = """Minimum over ``axes`` (+inf / INT_MAX when empty; -0.0 < +0.0; NaN as in
``reduce_max``)."""


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
    def rule(axis_data, vals, dims, *, axes, index_dtype):
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


# ------------------------------ reduce (user computation) -------------------------------

def reduce(operands, init_values, computation, dimensions):
    """Reduce ``operands`` over ``dimensions`` with a user ``computation`` (jax.lax.reduce;
    XLA 'Reduce').

    ``operands`` is an array or a pytree of arrays of one shape; ``init_values`` has the
    same structure, with scalars of the operands' dtypes. ``computation(acc, x)`` takes
    two such structures of scalars and returns one. Results: the operands' shapes without
    ``dimensions``, their dtypes, in ``operands``' structure.

    Order: each result element is the left fold from ``init_values`` over its reduced
    elements in row-major order of ``dimensions`` (``acc = computation(acc, x)``, one
    element at a time), in every tier (eager, jit, and the fold that jvp/grad
    differentiate), so a computation need not be associative. This is XLA:CPU's order as
    JAX runs it for every variadic reduction and for single-operand reductions whose
    reduced dims all have size <= 32; for larger ones XLA:CPU folds windows of 32 first
    (README, "Differences"). Where each result element has exactly one reduced element
    (``dimensions`` empty, or all of size 1) the operands are returned as they are,
    without the computation or ``init_values`` (as JAX: XLA treats the init value as the
    identity there); with no reduced element (a dimension of size 0) the result is
    ``init_values``. The eager impl takes one NumPy step (over all result elements) per
    reduced element; under jit the fold is a compiled loop.
    A single-operand computation that is one add/mul/max/min/and/or with its identity as
    init value becomes the dedicated primitive (``reduce_sum``, ...), as in JAX; anything
    else is a ``reduce`` equation holding the traced computation. Raises ValueError when
    the structures disagree, TypeError for shape/dtype mismatches, NotImplementedError
    when the computation closes over traced values.
    """
    from tracer.pytree import tree_flatten, tree_unflatten
    flat_ops, tree = tree_flatten(operands)
    flat_inits, init_tree = tree_flatten(init_values)
    if tree != init_tree:
        raise ValueError(f"reduce: operands and init_values must have the same structure, "
                         f"got {tree} and {init_tree}")
    if not flat_ops:
        raise ValueError("reduce: needs at least one operand")
    flat_ops = [as_lax_value(x) for x in flat_ops]
    flat_init_values = flat_inits
    flat_inits = [_init_like(v, x) for v, x in zip(flat_inits, flat_ops)]
    nd = get_aval(flat_ops[0]).ndim
    dims = _canon_axes(dimensions, nd, "reduce")
    init_avals = [ShapedArray((), get_aval(v).dtype, get_aval(v).weak_type) for v in flat_inits]
    closed, out_tree = _reduction_jaxpr(computation, tuple(init_avals), tree)
    if out_tree != tree:
        raise TypeError(f"reduce: the computation must return the structure of the operands "
                        f"{tree}, got {out_tree}")
    monoid = _monoid_reducer(closed, flat_inits)
    if monoid is None:
        for v, x in zip(flat_init_values, flat_ops):
            if type(v) is float and math.isinf(v) and get_aval(x).dtype.kind in "iub":
                raise TypeError(
                    f"reduce: init value {v!r} with operands of dtype {get_aval(x).dtype} "
                    f"is the identity of max or min only; with this computation pass a "
                    f"value of that dtype")
    if monoid is not None:
        out = monoid(flat_ops[0], dims) if dims else flat_ops[0]
        weak = get_aval(flat_ops[0]).weak_type and get_aval(flat_inits[0]).weak_type
        if get_aval(out).weak_type != weak:
            out = ew.convert_element_type_p.bind(out, new_dtype=get_aval(out).dtype,
                                                 weak_type=weak)
        return tree_unflatten(tree, [out])
    shape = get_aval(flat_ops[0]).shape
    if all(shape[d] == 1 for d in dims):
        # one element per result: nothing is combined (XLA returns it unchanged)
        out_avals = _generic_reduce_abstract_eval(*map(get_aval, flat_ops), *map(get_aval, flat_inits),
                                          computation=closed, dimensions=dims)
        outs = []
        for x, a in zip(flat_ops, out_avals):
            y = shapes.reshape(x, a.shape) if dims else x
            if get_aval(y).weak_type != a.weak_type:
                y = ew.convert_element_type_p.bind(y, new_dtype=a.dtype, weak_type=a.weak_type)
            outs.append(y)
        return tree_unflatten(tree, outs)
    outs = reduce_p.bind(*flat_ops, *flat_inits, computation=closed, dimensions=dims)
    return tree_unflatten(tree, outs)


def scalar_init(fname, v, dtype, saturate=False):
    """A Python scalar init value as a NumPy scalar of the operand's ``dtype``: exactly,
    or, with ``saturate``, -inf/+inf as an integer or bool dtype's least/greatest value
    (max's and min's identities there, as JAX reads such an init value). Raises
    TypeError naming ``fname``, the value and the dtype where the value is not one of
    the dtype's (NaN, inf or a fraction for integers, out of range)."""
    dt = np.dtype(dtype)
    if dt.kind in "iub" and type(v) is float:
        if saturate and math.isinf(v):
            return np.asarray(_minmax_identity(dt, v < 0), dt)
        if not (math.isfinite(v) and v == int(v)):
            raise TypeError(f"{fname}: init value {v!r} is not a value of the operands' "
                            f"dtype {dt.name}; pass one of that dtype (for max, "
                            f"{_minmax_identity(dt, True)!r}; for min, "
                            f"{_minmax_identity(dt, False)!r})")
        v = int(v)
    try:
        with np.errstate(all="ignore"):
            out = np.asarray(v, dt)
    except (OverflowError, TypeError, ValueError):
        out = None
    if out is None or (dt.kind in "iu" and int(out) != v):
        raise TypeError(f"{fname}: init value {v!r} is out of range for the operands' dtype "
                        f"{dt.name}; pass a value of that dtype")
    return out


def _init_like(v, x):
    # Python scalar init values take the operand's dtype (weakly typed, like lax's
    # binary ops); arrays must already match.
    if type(v) in (bool, int, float, complex):
        from tracer.core import Array
        return Array(scalar_init("reduce", v, get_aval(x).dtype, saturate=True),
                     weak_type=type(v) is not bool)
    return as_lax_value(v)


_reduction_jaxpr_cache: dict = {}


def _reduction_jaxpr(computation, init_avals, tree, cache=True):
    """The computation traced on scalars: (ClosedJaxpr over 2n scalars, output treedef);
    cached by ``computation`` unless ``cache`` is false (a closure made per call)."""
    from tracer.core import Tracer
    from tracer.interpreters import partial_eval as pe
    from tracer.pytree import PyTreeDef, flatten_fun
    key = (computation, init_avals, tree)
    try:
        hit = _reduction_jaxpr_cache.get(key) if cache else None
    except TypeError:
        key, hit = None, None
    if not cache:
        key = None
    if hit is not None:
        return hit
    # computation(acc, x): both arguments have the operands' structure ``tree``.
    flat_fun, out = flatten_fun(computation, PyTreeDef(tuple, None, (tree, tree)))
    jaxpr, consts = pe.trace_to_jaxpr_dynamic(flat_fun, list(init_avals) * 2)
    if any(isinstance(c, Tracer) for c in consts):
        raise NotImplementedError("reduce: the computation closes over a traced value; pass "
                                  "it as an operand instead (reduction computations must "
                                  "be functions of their two arguments)")
    for v, a in zip(jaxpr.outvars, init_avals):
        if v.aval.shape != () or v.aval.dtype != a.dtype:
            raise TypeError(f"reduce: the computation must return scalars of the operands' "
                            f"dtypes {[x.dtype.name for x in init_avals]}, got "
                            f"{[o.aval.str_short() for o in jaxpr.outvars]}")
    res = (pe.ClosedJaxpr(jaxpr, consts), out.tree)
    if key is not None and len(_reduction_jaxpr_cache) < 1000:
        _reduction_jaxpr_cache[key] = res
    return res


def _monoid_reducer(closed, inits):
    """The dedicated reducer when the computation is one add/mul/max/min/and/or of its two
    arguments and the (concrete) init value is that operation's identity; else None."""
    from tracer.core import concrete_value
    jaxpr = closed.jaxpr
    if len(inits) != 1 or len(jaxpr.eqns) != 1 or closed.consts:
        return None
    (eqn,) = jaxpr.eqns
    if set(map(id, eqn.invars)) != set(map(id, jaxpr.invars)) or len(eqn.invars) != 2 or \
            jaxpr.outvars[0] is not eqn.outvars[0]:
        return None
    init = concrete_value(inits[0])
    if init is None:
        return None
    dt = np.dtype(init.dtype)
    prim = eqn.primitive
    if prim is ew.add_p and init == 0:
        return reduce_sum
    if prim is ew.mul_p and init == 1:
        return reduce_prod
    if prim is ew.max_p and init == _minmax_identity(dt, True):
        return reduce_max
    if prim is ew.min_p and init == _minmax_identity(dt, False):
        return reduce_min
    if prim is ew.and_p and init == (True if dt == np.bool_ else np.array(-1).astype(dt)):
        return reduce_and
    if prim is ew.or_p and init == (False if dt == np.bool_ else 0):
        return reduce_or
    return None


def _generic_reduce_abstract_eval(*avals, computation, dimensions):
    n = len(avals) // 2
    ops, inits = avals[:n], avals[n:]
    shape = ops[0].shape
    for a in ops:
        if a.shape != shape:
            raise TypeError(f"reduce: operands must share one shape, got "
                            f"{', '.join(o.str_short() for o in ops)}")
    for a, v in zip(ops, inits):
        if v.shape != () or v.dtype != a.dtype:
            raise TypeError(f"reduce: init values must be scalars of the operands' dtypes; "
                            f"operand {a.str_short()} has init value {v.str_short()}")
    if any(not 0 <= d < len(shape) for d in dimensions) or \
            len(set(dimensions)) != len(dimensions):
        raise TypeError(f"reduce: dimensions {dimensions} out of range or repeated for "
                        f"operands of shape {shape}")
    out_shape = tuple(s for i, s in enumerate(shape) if i not in dimensions)
    return [ShapedArray(out_shape, a.dtype, a.weak_type and v.weak_type)
            for a, v in zip(ops, inits)]


def _scalar_jaxpr_runner(closed):
    """A function running the computation's equations by their NumPy impls on a list of
    arrays (its operands), each result cast to its var's dtype, floating-point errors
    ignored: the jaxpr walked once, so that a fold calling it once per element pays
    little per call."""
    from tracer.jaxpr import Literal
    jaxpr = closed.jaxpr
    slot: dict = {}
    for v in list(jaxpr.constvars) + list(jaxpr.invars):
        slot[v] = len(slot)
    consts = [np.asarray(c) for c in closed.consts]
    n_in = len(jaxpr.invars)

    def ref(a):
        return ("lit", np.asarray(a.val)) if isinstance(a, Literal) else ("var", slot[a])

    prog = []
    for eqn in jaxpr.eqns:
        ins = [ref(a) for a in eqn.invars]
        for v in eqn.outvars:
            slot[v] = len(slot)
        impl = eqn.primitive.impl
        impl = getattr(impl, "impl_without_errstate", impl)      # ``run`` sets it once
        prog.append((impl, ins, eqn.params, eqn.primitive.multiple_results,
                     [np.dtype(v.aval.dtype) for v in eqn.outvars]))
    outs_ref = [ref(v) for v in jaxpr.outvars]

    def run(args):
        if len(args) != n_in:
            raise TypeError(f"computation: {len(args)} operands for {n_in} inputs")
        env = consts + [np.asarray(a) for a in args]
        for impl, ins, params, multiple, dts in prog:
            outs = impl(*[env[i] if k == "var" else i for k, i in ins], **params)
            for o, dt in zip(outs if multiple else [outs], dts):
                o = np.asarray(o)
                env.append(o if o.dtype == dt else o.astype(dt))
        return [env[i] if k == "var" else i for k, i in outs_ref]
    return np_errstate(run)


def _run_scalar_jaxpr_np(closed, args):
    """The computation's equations run by their NumPy impls on ``args`` (arrays)."""
    return _scalar_jaxpr_runner(closed)(list(args))


def _eval_computation_np(closed, xs, ys):
    """The scalar computation applied element-wise to NumPy arrays ``xs``, ``ys`` of one
    shape. Element-wise primitives are shape-agnostic, so the equations run once on whole
    arrays; a computation whose results come out with another shape (it used a
    non-element-wise primitive) is run element by element instead."""
    shape = np.shape(xs[0])
    try:
        outs = _run_scalar_jaxpr_np(closed, list(xs) + list(ys))
        if all(np.shape(o) in (shape, ()) for o in outs):
            return [np.broadcast_to(o, shape).astype(v.aval.dtype)
                    for o, v in zip(outs, closed.jaxpr.outvars)]
    except (ValueError, TypeError, IndexError):
        pass
    outs = [np.empty(shape, v.aval.dtype) for v in closed.jaxpr.outvars]
    for idx in np.ndindex(*shape):
        for o, r in zip(outs, _run_scalar_jaxpr_np(closed, [x[idx] for x in xs] +
                                                   [y[idx] for y in ys])):
            o[idx] = r
    return outs


def _reduced_elements(x, dimensions):
    """``x`` (NumPy) as (k, *kept shape): its reduced elements in row-major order of
    ``dimensions`` along the leading axis."""
    kept = [i for i in range(x.ndim) if i not in dimensions]
    k = int(np.prod([x.shape[i] for i in dimensions], dtype=np.int64))
    return np.transpose(x, list(dimensions) + kept).reshape(
        (k,) + tuple(x.shape[i] for i in kept))


def _reduce_impl(*args, computation, dimensions):
    # The left fold from the init values, over the reduced elements in row-major order
    # of ``dimensions``: every result element at once, one reduced element per step (a
    # computation that is not element-wise on arrays: element by element).
    n = len(args) // 2
    ops, inits = args[:n], args[n:]
    xs = [_reduced_elements(np.asarray(x), dimensions) for x in ops]
    out_shape = xs[0].shape[1:]
    dts = [np.asarray(v).dtype for v in inits]
    accs = [np.array(np.broadcast_to(v, out_shape)) for v in inits]
    run = _scalar_jaxpr_runner(computation)
    whole = True
    for i in range(xs[0].shape[0]):
        elems = [x[i] for x in xs]
        outs = None
        if whole:
            try:
                outs = run(accs + elems)
            except (ValueError, TypeError, IndexError):
                outs = None
            if outs is None or any(o.shape not in (out_shape, ()) for o in outs):
                whole, outs = False, None
        if outs is None:
            outs = _eval_computation_np(computation, accs, elems)
        accs = [o if o.shape == out_shape else np.broadcast_to(o, out_shape) for o in outs]
    return [np.asarray(a).astype(dt, copy=False) for a, dt in zip(accs, dts)]


def _apply_computation(computation, xs, ys):
    """The scalar computation applied element-wise to arrays, with lax operations (so it
    can be differentiated): vmapped over the flattened elements."""
    from tracer.jaxpr import eval_jaxpr
    shape = get_aval(xs[0]).shape
    size = int(np.prod(shape, dtype=np.int64))
    flat = [shapes.reshape(a, (size,)) for a in list(xs) + list(ys)]
    fun = lambda *a: eval_jaxpr(computation.jaxpr, computation.consts, *a)
    outs, out_dims = batching.vmap_flat(fun, size, None, [0] * len(flat), flat)
    outs = [batching.bdim_at_front(o, d, size) for o, d in zip(outs, out_dims)]
    return [shapes.reshape(o, shape) for o in outs]


def _reduce_fold(ops, inits, computation, dimensions):
    """``reduce`` written with lax operations, to be differentiated: the impl's left fold
    from the init values, as a scan over the reduced elements in row-major order."""
    from lax.control_flow import scan
    aval = get_aval(ops[0])
    kept = tuple(i for i in range(aval.ndim) if i not in dimensions)
    out_shape = tuple(aval.shape[i] for i in kept)
    k = int(np.prod([aval.shape[i] for i in dimensions], dtype=np.int64))
    init_b = [shapes.broadcast_in_dim(v, out_shape, ()) for v in inits]
    if k == 0 or 0 in out_shape:
        return init_b
    xs = [shapes.reshape(shapes.transpose(x, tuple(dimensions) + kept), (k,) + out_shape)
          for x in ops]

    def step(accs, elems):
        return _apply_computation(computation, accs, elems), None

    outs, _ = scan(step, init_b, xs)
    return outs


def _reduce_jvp(primals, tangents, *, computation, dimensions):
    from tracer.interpreters.ad import jvp_flat
    n = len(primals) // 2
    outs = reduce_p.bind(*primals, computation=computation, dimensions=dimensions)
    if all(type(t) is Zero for t in tangents):
        return outs, [Zero.from_primal_value(o) for o in outs]
    tree = lambda *a: _reduce_fold(a[:n], a[n:], computation, dimensions)
    _, t_out = jvp_flat(tree, list(primals), list(tangents), instantiate=False)
    t_out = [Zero.from_primal_value(o) if type(t) is Zero else t for o, t in zip(outs, t_out)]
    return outs, t_out


def _reduce_batch(axis_data, vals, dims, *, computation, dimensions):
    n = len(vals) // 2
    if any(d is not None for d in dims[n:]):
        raise NotImplementedError("vmap of reduce with batched init values is not "
                                  "supported (as in JAX); pass them unbatched")
    ops = [batching.bdim_at_front(x, d, axis_data.size) for x, d in zip(vals[:n], dims[:n])]
    outs = reduce_p.bind(*ops, *vals[n:], computation=computation,
                         dimensions=tuple(d + 1 for d in dimensions))
    return outs, [0] * n


reduce_p = Primitive("reduce")
reduce_p.multiple_results = True
reduce_p.def_abstract_eval(_generic_reduce_abstract_eval)
reduce_p.def_impl(np_errstate(_reduce_impl))
ad.primitive_jvps[reduce_p] = _reduce_jvp
batching.primitive_batchers[reduce_p] = _reduce_batch
