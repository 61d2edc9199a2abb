"""User-defined derivatives: ``custom_jvp`` and ``custom_vjp`` (JAX's
``jax.custom_jvp`` / ``jax.custom_vjp``).

A call of a decorated function under a transformation traces the function into a jaxpr and
binds one primitive holding it together with the rule:

- ``custom_jvp_call[call_jaxpr=... jvp=... num_consts=n symbolic_zeros=b name=f]``: eager
  evaluation and ``vmap`` use ``call_jaxpr``; ``jvp``/``grad`` run the user's rule, whose
  primal computation lands one level down (so it is itself differentiable: any order).
- ``custom_vjp_call[call_jaxpr=... fwd=... bwd=... ...]``: ``jvp`` runs ``fwd`` and binds
  ``custom_lin`` (a linear primitive over the residuals and the input tangents); reverse
  mode transposes ``custom_lin`` by calling ``bwd``. Forward mode alone (``jvp``,
  ``jacfwd``) is an error, as in JAX.

Values the function closes over that are traced by an outer transformation (``vmap``,
``jit``) become leading operands (``num_consts`` of them), so every transformation sees
them. ``vmap`` batches the function's jaxpr and wraps the rule in the same vmap.

Differences from JAX (documented limitations):
- A custom function or rule may not close over a value that is being differentiated by
  the same jvp/grad that applies the rule (JAX raises UnexpectedTracerError; we raise a
  TypeError saying which function and what to do). Pass such values as arguments.
- A rule that closes over values traced inside a ``jit``-decorated function cannot be run
  after that jit's tracing ended (e.g. by ``grad`` of the jitted function): JAX has the
  same limitation; pass those values as arguments.
"""
from __future__ import annotations

import functools
import inspect
from typing import Callable

import numpy as np

from tracer import core, dtypes
from tracer.core import Primitive, ShapedArray, Tracer, get_aval
from tracer.errors import UnexpectedTracerError
from tracer.interpreters import ad, batching
from tracer.interpreters import partial_eval as pe
from tracer.interpreters.ad import Zero, trace_to_call_jaxpr
from tracer.interpreters.call import closed_call_p
from tracer.jaxpr import ClosedJaxpr, JaxprEqn, eval_jaxpr
from tracer.pytree import (flatten_fun, keystr, tree_flatten, tree_flatten_with_path,
                           tree_unflatten)

__all__ = ["custom_jvp", "custom_vjp", "SymbolicZero", "CustomVJPPrimal", "zero_from_primal",
           "custom_jvp_call_p", "custom_vjp_call_p", "custom_lin_p", "closure_convert",
           "stop_gradient", "checkpoint", "remat", "checkpoint_policies", "custom_gradient"]

stop_gradient = ad.stop_gradient


# ------------------------------------ symbolic zeros ------------------------------------

class SymbolicZero:
    """A zero tangent/cotangent that is known to be zero without being materialized.

    Rules registered with ``symbolic_zeros=True`` receive these for inputs that are not
    being differentiated, and may return them (or ``zero_from_primal(x)``) for outputs with
    a zero derivative. ``aval`` is the tangent type (float0 for integer primals).
    """

    __slots__ = ("aval",)

    def __init__(self, aval):
        self.aval = aval

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: len(self.aval.shape))

    def __repr__(self):
        return f"SymbolicZero({self.aval.str_short()})"

    def __bool__(self):
        raise TypeError("a SymbolicZero has no truth value; test `isinstance(t, SymbolicZero)`")

    def instantiate(self):
        """A materialized zero array of this tangent type."""
        return ad.zeros_like_aval(self.aval)


def zero_from_primal(x, symbolic_zeros: bool = True):
    """The zero tangent of each leaf of ``x``: ``SymbolicZero``s, or materialized zeros with
    ``symbolic_zeros=False``."""
    from tracer.pytree import tree_map

    def z(v):
        aval = get_aval(v).at_least_vspace()
        return SymbolicZero(aval) if symbolic_zeros else ad.zeros_like_aval(aval)
    return tree_map(z, x)


class CustomVJPPrimal:
    """What a ``custom_vjp`` fwd rule with ``symbolic_zeros=True`` receives for each input:
    the ``value`` and whether it is ``perturbed`` (has a nonzero tangent)."""

    __slots__ = ("value", "perturbed")

    def __init__(self, value, perturbed: bool):
        self.value = value
        self.perturbed = perturbed

    def __repr__(self):
        return f"CustomVJPPrimal(value={self.value!r}, perturbed={self.perturbed})"


# --------------------------------------- helpers ----------------------------------------

def _fun_name(f) -> str:
    f = getattr(f, "func", f)  # functools.partial
    return getattr(f, "__name__", None) or type(f).__name__


def _resolve_kwargs(fun, args, kwargs, who):
    """Keyword arguments become positional (rules take positional arguments only)."""
    if not kwargs:
        return tuple(args)
    try:
        ba = inspect.signature(fun).bind(*args, **kwargs)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{who}: could not bind the call's arguments to the signature of "
                        f"{_fun_name(fun)}: {e}") from None
    ba.apply_defaults()
    if ba.kwargs:
        raise TypeError(f"{who}: keyword arguments {sorted(ba.kwargs)} could not be resolved "
                        f"to positions of {_fun_name(fun)}; pass them positionally")
    return tuple(ba.args)


def _normalize_nondiff(nondiff_argnums, nargs, who):
    out = []
    for i in nondiff_argnums:
        if not -nargs <= i < nargs:
            raise ValueError(f"{who}: nondiff_argnums entry {i} is out of range for a call "
                             f"with {nargs} positional arguments")
        out.append(i % nargs)
    return tuple(sorted(set(out)))


def _check_leaves(leaves, paths, who):
    for path, x in zip(paths, leaves):
        if not core.valid_jaxtype(x):
            raise TypeError(f"{who}: argument args{keystr(path)} of type {type(x).__name__} is "
                            "not an array; non-array arguments must be listed in "
                            "nondiff_argnums")


def _same_type(a, b) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype


def _tangent_aval(aval):
    return aval.at_least_vspace().strip_weak_type()


def _closure_error(kind, name, what="rule"):
    return TypeError(
        f"{kind} {what} of {name!r} uses a value that is being differentiated by the same "
        f"jvp/grad that applies the rule (it closes over a traced value of that "
        f"transformation). Pass that value as an explicit argument of the {kind} function "
        "instead of closing over it (mark it with nondiff_argnums, or wrap it in "
        "lax.stop_gradient, if it should not be differentiated).")


# While a custom rule runs for a JVPTrace, that trace must not be re-entered: only values
# the rule closes over could reach it, and they would be differentiated wrongly.
_active_rule_mains: list = []


def _run_rule_guarded(kind, name, fn, *args):
    main = ad.running_jvp_main()
    if any(m is main for m in _active_rule_mains):
        raise _closure_error(kind, name)
    _active_rule_mains.append(main)
    try:
        outs = fn(*args)
    except UnexpectedTracerError as e:
        e.args = (f"{e.args[0] if e.args else ''} While running the {kind} rule of {name!r}: "
                  "a rule may not close over values traced inside a jit-compiled function "
                  "(they are gone once the function has been traced); pass such values as "
                  f"arguments of the {kind} function instead (JAX has the same "
                  "restriction).",)
        raise
    finally:
        _active_rule_mains.pop()
    for group in outs:
        for o in (group if isinstance(group, (list, tuple)) else ()):
            if isinstance(o, Tracer) and o._trace.main is main:
                raise _closure_error(kind, name)
    return outs


def _check_const_tangents(tangents, kind, name):
    if any(type(t) is not Zero for t in tangents):
        raise _closure_error(kind, name, "function")


def _coerce_tangent(t, expected, where):
    """Validate a tangent/cotangent ``t`` a user rule returned against the tangent type
    ``expected``; returns a value of exactly that type, or Zero."""
    if t is None or isinstance(t, SymbolicZero):
        return Zero(expected)
    if isinstance(t, Zero):
        return t
    if not core.valid_jaxtype(t):
        raise TypeError(f"{where}: expected an array of type {expected.str_short()}, got a "
                        f"{type(t).__name__}")
    a = get_aval(t)
    if a.shape != expected.shape:
        raise ValueError(f"{where}: expected shape {expected.shape} ({expected.str_short()}), "
                         f"got shape {a.shape} ({a.str_short()})")
    if expected.dtype == dtypes.float0:
        if a.dtype == dtypes.float0:
            return Zero(expected)
        raise TypeError(f"{where}: the tangent of an integer or bool value must have dtype "
                        f"float0 (or be None / a SymbolicZero), got {a.str_short()}")
    if a.dtype != expected.dtype:
        same_kind = (dtypes.is_floating(a.dtype) and dtypes.is_floating(expected.dtype)) or (
            dtypes.is_complex(a.dtype) and dtypes.is_complex(expected.dtype))
        if a.weak_type and same_kind:
            import lax
            return lax.convert_element_type(t, expected.dtype)
        raise TypeError(f"{where}: expected dtype {expected.dtype.name} "
                        f"({expected.str_short()}), got {a.str_short()}")
    return t


def _insert_axis(aval, size, d):
    if d is None:
        return aval
    shape = list(aval.shape)
    shape.insert(d, size)
    return aval.update(shape=tuple(shape))


def _remove_axis(aval, d):
    if d is None:
        return aval
    shape = list(aval.shape)
    del shape[d]
    return aval.update(shape=tuple(shape))


def _run_batched(axis_data, fun, in_dims, args):
    """Batch ``fun`` over ``args`` (batch axes ``in_dims``) inside the vmap that owns
    ``axis_data`` when it is still running (so that values the rule closes over, batched
    by that vmap, are understood), else inside a fresh vmap of the same size."""
    main = None
    for m in core.current_trace_stack():
        if m.global_data is axis_data and m.trace_type is batching.BatchTrace:
            main = m
    if main is None:
        return batching.vmap_flat(fun, axis_data.size, axis_data.name, in_dims, args,
                                  axis_data.group)
    trace = batching.BatchTrace(main)
    tracers = [batching.BatchTracer(trace, x, d) if d is not None else x
               for x, d in zip(args, in_dims)]
    outs = [core.full_raise(trace, o) for o in fun(*tracers)]
    return [t.val for t in outs], [t.batch_dim for t in outs]


def batch_jaxpr_at_front(closed: ClosedJaxpr, axis_data, dims):
    """``closed`` batched over operands with batch axes ``dims``; every output carries the
    batch axis first (a rule batched alongside must produce outputs of the same types)."""
    size = axis_data.size
    in_avals = [_insert_axis(a, size, d) for a, d in zip(closed.in_avals, dims)]

    def fun(*args):
        outs, out_dims = batching.vmap_flat(
            lambda *xs: eval_jaxpr(closed.jaxpr, closed.consts, *xs), size, axis_data.name,
            dims, args, axis_data.group)
        return [batching.matchaxis(size, d, 0, o) for o, d in zip(outs, out_dims)]

    return pe.trace_to_closed_jaxpr(fun, in_avals)


def _nothing_to_batch(axis_data, dims, closed) -> bool:
    return all(d is None for d in dims) and (
        axis_data.name is None or
        axis_data.name not in batching.jaxpr_axis_names(closed.jaxpr))


class _Named:
    """A callable param shown by its user-facing name in printed jaxprs. Unhashable, so
    that equations holding one per call are not memoized (``abstract_eval_cached`` skips
    unhashable params) and do not keep the user's values alive."""

    __hash__ = None

    def __init__(self, name):
        self.__name__ = name

    def __repr__(self):
        return self.__name__


# ======================================= custom_jvp =====================================

class custom_jvp:
    """A function with a user-defined JVP rule (``jax.custom_jvp``).

    Usage::

        @tracer.custom_jvp
        def f(x, y):
            return tnp.sin(x) * y

        @f.defjvp
        def f_jvp(primals, tangents):
            x, y = primals
            x_dot, y_dot = tangents
            return f(x, y), tnp.cos(x) * x_dot * y + tnp.sin(x) * y_dot

    ``primals`` and ``tangents`` are tuples with the structure of the (differentiable)
    arguments; the rule returns ``(primal_out, tangent_out)`` with the structure, shapes and
    dtypes of the function's output (float0 tangents for integer outputs). Reverse mode is
    derived by linearizing and transposing the rule, so the tangent output must be linear
    in the tangents. ``nondiff_argnums`` lists arguments that are not differentiated
    (non-array values such as functions, or arrays): the rule receives them first,
    ``jvp(*nondiff_args, primals, tangents)``. With ``defjvp(..., symbolic_zeros=True)``
    the rule gets ``SymbolicZero`` objects for tangents that are zero.

    Args:
      fun: the function (positional arguments: arrays or pytrees of arrays, or non-array
        values at ``nondiff_argnums``).
      nondiff_argnums: positions of arguments not differentiated; the rule receives them
        first.

    Returns (the object): a callable with ``fun``'s signature and results; under
    jvp/grad/vjp/jacfwd/jacrev (any order and depth, and under vmap and jit) its
    derivative is the rule's. ``defjvp(rule, symbolic_zeros=False)`` sets the rule (and
    returns it, for use as a decorator); ``defjvps(*rules)`` sets one rule per argument,
    ``rule_i(tangent_i, primal_out, *primals)``, whose contributions are summed.

    Raises TypeError naming the rule when its output has the wrong structure, shapes or
    dtypes, and AttributeError when called before a rule is defined.
    """

    def __init__(self, fun: Callable, nondiff_argnums: tuple = ()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.jvp = None
        self.symbolic_zeros = False

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        return functools.partial(self, instance)

    def defjvp(self, jvp: Callable, symbolic_zeros: bool = False) -> Callable:
        """Set the JVP rule ``jvp(primals, tangents) -> (primal_out, tangent_out)``.
        Returns ``jvp`` (so it can be used as a decorator)."""
        self.jvp = jvp
        self.symbolic_zeros = bool(symbolic_zeros)
        return jvp

    def defjvps(self, *jvps):
        """One rule per argument: ``jvp_i(tangent_i, primal_out, *primals)`` gives argument
        i's contribution to the output tangent (None: the output does not depend on it);
        the contributions are summed."""
        if self.nondiff_argnums:
            raise TypeError("custom_jvp.defjvps cannot be used with nondiff_argnums; use "
                            "defjvp")

        def jvp(primals, tangents):
            primal_out = self(*primals)
            out_leaves, out_tree = tree_flatten(primal_out)
            total = [None] * len(out_leaves)
            for rule, t in zip(jvps, tangents):
                if rule is None:
                    continue
                contrib = rule(t, primal_out, *primals)
                c_leaves, c_tree = tree_flatten(contrib)
                if c_tree != out_tree:
                    raise TypeError(f"custom_jvp.defjvps rule {_fun_name(rule)} of "
                                    f"{_fun_name(self.fun)} returned structure {c_tree}, "
                                    f"expected the output's {out_tree}")
                total = [c if s is None else s + c for s, c in zip(total, c_leaves)]
            total = [zero_from_primal(o, symbolic_zeros=False) if s is None else s
                     for s, o in zip(total, out_leaves)]
            return primal_out, tree_unflatten(out_tree, total)

        jvp.__name__ = "defjvps_rule"
        self.defjvp(jvp)

    def __call__(self, *args, **kwargs):
        name = _fun_name(self.fun)
        if self.jvp is None:
            raise AttributeError(f"No JVP defined for custom_jvp function {name} using "
                                 "defjvp.")
        args = _resolve_kwargs(self.fun, args, kwargs, f"custom_jvp function {name}")
        if ad.no_transformation_active():
            return self.fun(*args)
        nondiff = _normalize_nondiff(self.nondiff_argnums, len(args),
                                     f"custom_jvp function {name}")
        nondiff_vals = [_stop_gradient_data(args[i]) for i in nondiff]
        diff_pos = [i for i in range(len(args)) if i not in nondiff]
        dyn = tuple(args[i] for i in diff_pos)
        pairs, in_tree = tree_flatten_with_path(dyn)
        leaves = [x for _, x in pairs]
        _check_leaves(leaves, [p for p, _ in pairs], f"custom_jvp function {name}")
        fun = self.fun

        def full_args(dyn_vals):
            full = list(args)
            for i, v in zip(nondiff, nondiff_vals):
                full[i] = v
            for i, v in zip(diff_pos, dyn_vals):
                full[i] = v
            return full

        flat_fun, out = flatten_fun(lambda *dyn_vals: fun(*full_args(dyn_vals)), in_tree)
        closed, hoisted = trace_to_call_jaxpr(flat_fun, [get_aval(x) for x in leaves])
        out_tree = out.tree
        operands = [*hoisted, *leaves]
        if core.find_top_trace(operands) is None:
            outs = eval_jaxpr(closed.jaxpr, closed.consts, *operands)
        else:
            flat_jvp = _FlatJVP(self.jvp, nondiff_vals, in_tree, out_tree, closed.out_avals,
                                name)
            outs = custom_jvp_call_p.bind(*operands, call_jaxpr=closed, jvp=flat_jvp,
                                          num_consts=len(hoisted),
                                          symbolic_zeros=self.symbolic_zeros, name=name)
        return tree_unflatten(out_tree, outs)


def _stop_gradient_data(x):
    # nondiff arguments may be anything (functions, strings...); only their array leaves
    # go through stop_gradient (so that the rule may close over them safely).
    from tracer.pytree import tree_map
    return tree_map(lambda v: ad.stop_gradient(v) if isinstance(v, (Tracer, core.Array,
                                                                     np.ndarray)) else v, x)


class _FlatJVP(_Named):
    """The user's JVP rule on flat lists, with its output validated:
    ``(primals, tangents) -> (primals_out, tangents_out)``; zero tangents come out as
    ``Zero``."""

    def __init__(self, jvp, nondiff_vals, in_tree, out_tree, out_avals, name):
        super().__init__(_fun_name(jvp))
        self.jvp, self.nondiff_vals = jvp, nondiff_vals
        self.in_tree, self.out_tree, self.out_avals = in_tree, out_tree, list(out_avals)
        self.name = name

    def __call__(self, primals, tangents):
        who = f"Custom JVP rule {self.__name__} for function {self.name}"
        py_primals = tree_unflatten(self.in_tree, primals)
        py_tangents = tree_unflatten(self.in_tree, tangents)
        res = self.jvp(*self.nondiff_vals, py_primals, py_tangents)
        if not (isinstance(res, (tuple, list)) and len(res) == 2):
            raise TypeError(f"{who} must produce a pair (list or tuple of length two) "
                            f"representing primal and tangent outputs, but got "
                            f"{type(res).__name__}" +
                            (f" of length {len(res)}" if isinstance(res, (tuple, list)) else ""))
        p_out, t_out = res
        p_leaves, p_tree = tree_flatten(p_out)
        if p_tree != self.out_tree:
            raise TypeError(f"{who} must produce primal outputs with the same container "
                            f"(pytree) structure as the output of {self.name}: the function "
                            f"gives {self.out_tree}, the rule gave {p_tree}")
        t_leaves, t_tree = tree_flatten(t_out, is_leaf=lambda x: isinstance(x, SymbolicZero))
        if t_tree != p_tree:
            raise TypeError(f"{who} must produce primal and tangent outputs with equal "
                            f"container (pytree) structures, but got {p_tree} and {t_tree}")
        tangents_out = []
        for i, (p, t, a) in enumerate(zip(p_leaves, t_leaves, self.out_avals)):
            pa = get_aval(p)
            if not _same_type(pa, a):
                raise TypeError(f"{who} must produce primal outputs with the shapes and dtypes "
                                f"of the primal function's outputs: output {i} of the rule is "
                                f"{pa.str_short()}, of the function {a.str_short()}")
            tangents_out.append(_coerce_tangent(
                t, _tangent_aval(a), f"{who}: tangent output {i} (of primal {a.str_short()})"))
        return p_leaves, tangents_out


def _custom_jvp_call_abstract_eval(*avals, call_jaxpr, num_consts, **_):
    expected = call_jaxpr.in_avals
    if len(avals) != len(expected):
        raise TypeError(f"custom_jvp_call: {len(avals)} operands for a function of "
                        f"{len(expected)}")
    return list(call_jaxpr.out_avals)


def _custom_call_impl(*args, call_jaxpr, **_):
    return eval_jaxpr(call_jaxpr.jaxpr, call_jaxpr.consts, *args)


def _custom_jvp_call_jvp(primals, tangents, *, call_jaxpr, jvp, num_consts, symbolic_zeros,
                         name):
    _check_const_tangents(tangents[:num_consts], "custom_jvp", name)
    args, tans = primals[num_consts:], tangents[num_consts:]
    if all(type(t) is Zero for t in tans):
        outs = custom_jvp_call_p.bind(*primals, call_jaxpr=call_jaxpr, jvp=jvp,
                                      num_consts=num_consts, symbolic_zeros=symbolic_zeros,
                                      name=name)
        return outs, [Zero.from_primal_value(o) for o in outs]
    if symbolic_zeros:
        tans = [SymbolicZero(t.aval) if type(t) is Zero else t for t in tans]
    else:
        tans = [ad.instantiate_zeros(t) for t in tans]
    return _run_rule_guarded("custom_jvp", name, jvp, list(args), tans)


class _BatchedJVP(_Named):
    """A custom JVP rule batched by vmap: primals arrive batched along ``arg_dims`` (their
    tangents likewise); all outputs leave with the batch axis first, like the batched
    ``call_jaxpr``."""

    def __init__(self, jvp, axis_data, arg_dims, out_avals):
        super().__init__(jvp.__name__)
        self.jvp, self.axis_data, self.arg_dims = jvp, axis_data, list(arg_dims)
        self.out_avals = list(out_avals)  # unbatched

    def __call__(self, primals, tangents):
        size, n = self.axis_data.size, len(primals)
        nz = [not isinstance(t, SymbolicZero) for t in tangents]
        zero_avals = [None if z else _remove_axis(t.aval, d)
                      for t, z, d in zip(tangents, nz, self.arg_dims)]
        in_vals = list(primals) + [t for t, z in zip(tangents, nz) if z]
        in_dims = self.arg_dims + [d for d, z in zip(self.arg_dims, nz) if z]
        zero_box = []

        def inner(*xs):
            it = iter(xs[n:])
            ts = [next(it) if z else SymbolicZero(za) for z, za in zip(nz, zero_avals)]
            p_out, t_out = self.jvp(list(xs[:n]), ts)
            zero_box.append([type(t) is Zero for t in t_out])
            return list(p_out) + [t for t in t_out if type(t) is not Zero]

        vals, dims = _run_batched(self.axis_data, inner, in_dims, in_vals)
        vals = [batching.matchaxis(size, d, 0, v) for v, d in zip(vals, dims)]
        m = len(self.out_avals)
        t_it = iter(vals[m:])
        t_out = [Zero(_insert_axis(_tangent_aval(a), size, 0)) if z else next(t_it)
                 for a, z in zip(self.out_avals, zero_box[-1])]
        return vals[:m], t_out


def _custom_jvp_call_batch(axis_data, vals, dims, *, call_jaxpr, jvp, num_consts,
                           symbolic_zeros, name):
    if _nothing_to_batch(axis_data, dims, call_jaxpr):
        outs = custom_jvp_call_p.bind(*vals, call_jaxpr=call_jaxpr, jvp=jvp,
                                      num_consts=num_consts, symbolic_zeros=symbolic_zeros,
                                      name=name)
        return outs, [None] * len(outs)
    new_call = batch_jaxpr_at_front(call_jaxpr, axis_data, dims)
    new_jvp = _BatchedJVP(jvp, axis_data, dims[num_consts:], call_jaxpr.out_avals)
    outs = custom_jvp_call_p.bind(*vals, call_jaxpr=new_call, jvp=new_jvp,
                                  num_consts=num_consts, symbolic_zeros=symbolic_zeros,
                                  name=name)
    return outs, [0] * len(outs)


def _stage_with_call_avals(prim):
    def rule(trace, tracers, **params):
        avals = prim.abstract_eval(*[t.aval for t in tracers], **params)
        return trace.emit(prim, tracers, params, avals)
    return rule


def _inline_partial_eval(trace, tracers, *, call_jaxpr, **_):
    # Partial evaluation with unknown inputs only happens once the rule has been applied
    # (the unknowns are tangents of a rule that maps tangents through a custom function):
    # the rule is no longer needed and the function is inlined, as JAX does.
    return eval_jaxpr(call_jaxpr.jaxpr, call_jaxpr.consts, *tracers)


def _partial_eval_jaxpr_as_call(unks_in, eqn):
    as_call = JaxprEqn(closed_call_p, eqn.invars, {"jaxpr": eqn.params["call_jaxpr"]},
                       eqn.outvars)
    return pe.partial_eval_jaxpr_rules[closed_call_p](unks_in, as_call)


def _transpose_as_call(cts, *args, call_jaxpr, **_):
    return ad.primitive_transposes[closed_call_p](cts, *args, jaxpr=call_jaxpr)


custom_jvp_call_p = Primitive("custom_jvp_call")
custom_jvp_call_p.multiple_results = True
custom_jvp_call_p.def_abstract_eval(_custom_jvp_call_abstract_eval)
custom_jvp_call_p.def_impl(_custom_call_impl)
ad.primitive_jvps[custom_jvp_call_p] = _custom_jvp_call_jvp
ad.primitive_transposes[custom_jvp_call_p] = _transpose_as_call
batching.primitive_batchers[custom_jvp_call_p] = _custom_jvp_call_batch
batching.batch_when_unmapped.add(custom_jvp_call_p)
pe.custom_staging_rules[custom_jvp_call_p] = _stage_with_call_avals(custom_jvp_call_p)
pe.partial_eval_rules[custom_jvp_call_p] = _inline_partial_eval
pe.partial_eval_jaxpr_rules[custom_jvp_call_p] = _partial_eval_jaxpr_as_call


# ======================================= custom_vjp =====================================

class custom_vjp:
    """A function with a user-defined VJP (``jax.custom_vjp``).

    Usage::

        @tracer.custom_vjp
        def f(x, y):
            return tnp.sin(x) * y

        def f_fwd(x, y):
            return f(x, y), (tnp.cos(x), tnp.sin(x), y)      # (output, residuals)

        def f_bwd(res, g):
            cos_x, sin_x, y = res
            return (cos_x * g * y, sin_x * g)                # one cotangent per argument

        f.defvjp(f_fwd, f_bwd)

    ``fwd`` takes the function's arguments and returns ``(output, residuals)`` (residuals:
    any pytree of arrays); ``bwd(*nondiff_args, residuals, output_cotangent)`` returns a
    tuple with one cotangent per differentiable argument, each with the argument's
    structure, shapes and dtypes (None for a zero cotangent; float0 or None for integer
    arguments). Reverse mode (grad, vjp, jacrev, and higher orders when fwd/bwd are
    differentiable) uses the rule; forward mode (jvp, jacfwd) raises TypeError, as in JAX.
    ``nondiff_argnums`` must name non-array arguments (e.g. functions); they are passed to
    ``bwd`` first. With ``defvjp(..., symbolic_zeros=True)``, fwd receives
    ``CustomVJPPrimal(value, perturbed)`` objects and bwd may receive ``SymbolicZero``
    cotangents.

    Args:
      fun: the function (positional arguments: arrays or pytrees of arrays, or non-array
        values at ``nondiff_argnums``).
      nondiff_argnums: positions of non-array arguments, passed to ``bwd`` first.

    Returns (the object): a callable with ``fun``'s signature and results whose reverse
    derivative is ``bwd``'s; ``defvjp(fwd, bwd, symbolic_zeros=False)`` sets the rules.

    Raises TypeError/ValueError naming the rule when fwd or bwd return the wrong structure,
    shapes or dtypes, AttributeError when called before ``defvjp``, and TypeError under
    forward mode.
    """

    def __init__(self, fun: Callable, nondiff_argnums: tuple = ()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.fwd = None
        self.bwd = None
        self.symbolic_zeros = False

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        return functools.partial(self, instance)

    def defvjp(self, fwd: Callable, bwd: Callable, symbolic_zeros: bool = False,
               optimize_remat: bool = False) -> None:
        """Set the forward rule ``fwd(*args) -> (out, residuals)`` and the backward rule
        ``bwd(*nondiff_args, residuals, cotangent) -> tuple of argument cotangents``.
        ``optimize_remat`` is accepted for compatibility and has no effect."""
        self.fwd = fwd
        self.bwd = bwd
        self.symbolic_zeros = bool(symbolic_zeros)

    def __call__(self, *args, **kwargs):
        name = _fun_name(self.fun)
        if self.fwd is None or self.bwd is None:
            raise AttributeError(f"No VJP defined for custom_vjp function {name} using "
                                 "defvjp.")
        args = _resolve_kwargs(self.fun, args, kwargs, f"custom_vjp function {name}")
        nondiff = _normalize_nondiff(self.nondiff_argnums, len(args),
                                     f"custom_vjp function {name}")
        for i in nondiff:
            for leaf in tree_flatten(args[i])[0]:
                if isinstance(leaf, Tracer):
                    raise TypeError(
                        f"custom_vjp function {name}: argument {i} is listed in "
                        "nondiff_argnums but is a traced array. nondiff_argnums should only "
                        "name arguments that are not arrays (e.g. functions); pass arrays as "
                        "regular arguments (their cotangent can be None).")
        if ad.no_transformation_active():
            return self.fun(*args)
        nondiff_vals = [args[i] for i in nondiff]
        diff_pos = [i for i in range(len(args)) if i not in nondiff]
        dyn = tuple(args[i] for i in diff_pos)
        pairs, in_tree = tree_flatten_with_path(dyn)
        leaves = [x for _, x in pairs]
        _check_leaves(leaves, [p for p, _ in pairs], f"custom_vjp function {name}")
        fun = self.fun

        def full_args(dyn_vals):
            full = list(args)
            for i, v in zip(diff_pos, dyn_vals):
                full[i] = v
            return full

        flat_fun, out = flatten_fun(lambda *dyn_vals: fun(*full_args(dyn_vals)), in_tree)
        in_avals = [get_aval(x) for x in leaves]
        closed, hoisted = trace_to_call_jaxpr(flat_fun, in_avals)
        out_tree = out.tree
        operands = [*hoisted, *leaves]
        if core.find_top_trace(operands) is None:
            outs = eval_jaxpr(closed.jaxpr, closed.consts, *operands)
        else:
            flat_fwd = _FlatFwd(self.fwd, full_args, in_tree, out_tree, closed.out_avals,
                                name, self.symbolic_zeros)
            flat_bwd = _FlatBwd(self.bwd, nondiff_vals, in_tree, in_avals, out_tree,
                                closed.out_avals, name)
            outs = custom_vjp_call_p.bind(*operands, call_jaxpr=closed, fwd=flat_fwd,
                                          bwd=flat_bwd, num_consts=len(hoisted),
                                          symbolic_zeros=self.symbolic_zeros, name=name)
        return tree_unflatten(out_tree, outs)


class _FlatFwd(_Named):
    """``(args, perturbed) -> (outs, residuals, res_info)`` on flat lists, validated."""

    def __init__(self, fwd, full_args, in_tree, out_tree, out_avals, name, symbolic_zeros):
        super().__init__(_fun_name(fwd))
        self.fwd, self.full_args = fwd, full_args
        self.in_tree, self.out_tree, self.out_avals = in_tree, out_tree, list(out_avals)
        self.name, self.symbolic_zeros = name, symbolic_zeros

    def __call__(self, args, perturbed):
        who = f"Custom VJP fwd rule {self.__name__} for function {self.name}"
        if self.symbolic_zeros:
            args = [CustomVJPPrimal(a, p) for a, p in zip(args, perturbed)]
        res = self.fwd(*self.full_args(tree_unflatten(self.in_tree, args)))
        if not (isinstance(res, (tuple, list)) and len(res) == 2):
            raise TypeError(f"{who} must produce a pair (list or tuple of length two) where "
                            "the first element represents the primal output (equal to the "
                            f"output of the custom_vjp-decorated function {self.name}) and "
                            "the second element represents residuals (values stored from the "
                            "forward pass for use on the backward pass), but got "
                            f"{type(res).__name__}" +
                            (f" of length {len(res)}" if isinstance(res, (tuple, list)) else ""))
        out, residuals = res
        o_leaves, o_tree = tree_flatten(out)
        if o_tree != self.out_tree:
            raise TypeError(f"{who}: the primal output (first element of the pair) must have "
                            f"the structure of the output of {self.name}, {self.out_tree}; "
                            f"got {o_tree}")
        for i, (o, a) in enumerate(zip(o_leaves, self.out_avals)):
            oa = get_aval(o)
            if not _same_type(oa, a):
                raise TypeError(f"{who}: primal output {i} is {oa.str_short()}, but the "
                                f"function {self.name} gives {a.str_short()}")
        r_pairs, r_tree = tree_flatten_with_path(residuals)
        for path, r in r_pairs:
            if not core.valid_jaxtype(r) or isinstance(r, (str, bytes)):
                raise TypeError(f"{who}: residuals must be a pytree of arrays; residual"
                                f"{keystr(path)} has type {type(r).__name__}")
        return o_leaves, [r for _, r in r_pairs], r_tree


class _FlatBwd(_Named):
    """``(res_info, residuals, cts_out) -> cts_in`` on flat lists (one per differentiable
    input leaf; ``Zero`` for zero cotangents), validated against the inputs' types."""

    def __init__(self, bwd, nondiff_vals, in_tree, in_avals, out_tree, out_avals, name):
        super().__init__(_fun_name(bwd))
        self.bwd, self.nondiff_vals = bwd, nondiff_vals
        self.in_tree, self.in_avals = in_tree, list(in_avals)
        self.out_tree, self.out_avals = out_tree, list(out_avals)
        self.name = name

    def __call__(self, res_tree, residuals, cts):
        who = f"Custom VJP bwd rule {self.__name__} for function {self.name}"
        res = tree_unflatten(res_tree, residuals)
        ct = tree_unflatten(self.out_tree, cts)
        out = self.bwd(*self.nondiff_vals, res, ct)
        n_args = len(self.in_tree.children)
        if not isinstance(out, (tuple, list)) or len(out) != n_args:
            got = (f"a {type(out).__name__} of length {len(out)}"
                   if isinstance(out, (tuple, list)) else f"a {type(out).__name__}")
            raise TypeError(f"{who} must produce a tuple with one cotangent per argument of "
                            f"{self.name} ({n_args} argument(s), structure {self.in_tree}), "
                            f"but got {got}")
        results = []
        leaf_avals = iter(self.in_avals)
        for k, (arg_def, ct_k) in enumerate(zip(self.in_tree.children, out)):
            n = arg_def.num_leaves
            avals = [next(leaf_avals) for _ in range(n)]
            if ct_k is None:
                results.extend(Zero(_tangent_aval(a)) for a in avals)
                continue
            c_pairs, c_tree = tree_flatten_with_path(
                ct_k, is_leaf=lambda x: x is None or isinstance(x, SymbolicZero))
            if c_tree != arg_def:
                raise TypeError(f"{who} must produce an output with the same container "
                                f"(pytree) structure as the args tuple of the primal "
                                f"function: for argument {k} it produced {c_tree}, "
                                f"expected {arg_def}")
            for (path, c), a in zip(c_pairs, avals):
                results.append(_coerce_tangent(
                    c, _tangent_aval(a),
                    f"{who}: the cotangent for argument {k}{keystr(path)} (of primal "
                    f"{a.str_short()})"))
        return results


def _custom_vjp_call_jvp(primals, tangents, *, call_jaxpr, fwd, bwd, num_consts,
                         symbolic_zeros, name):
    _check_const_tangents(tangents[:num_consts], "custom_vjp", name)
    args, tans = primals[num_consts:], tangents[num_consts:]
    if all(type(t) is Zero for t in tans):
        outs = custom_vjp_call_p.bind(*primals, call_jaxpr=call_jaxpr, fwd=fwd, bwd=bwd,
                                      num_consts=num_consts, symbolic_zeros=symbolic_zeros,
                                      name=name)
        return outs, [Zero.from_primal_value(o) for o in outs]
    perturbed = [type(t) is not Zero for t in tans]
    outs, res, res_info = _run_rule_guarded("custom_vjp", name, fwd, list(args), perturbed)
    in_avals = tuple(_tangent_aval(get_aval(a)) for a in args)
    out_avals = tuple(_tangent_aval(a) for a in call_jaxpr.out_avals)
    out_nz = tuple(a.dtype != dtypes.float0 for a in out_avals)
    lin_outs = custom_lin_p.bind(
        *res, *[t for t in tans if type(t) is not Zero], num_res=len(res),
        bwd=_BoundBwd(bwd, res_info), in_avals=in_avals, in_nz=tuple(perturbed),
        out_avals=out_avals, out_nz=out_nz, symbolic_zeros=symbolic_zeros, name=name)
    it = iter(lin_outs)
    return outs, [next(it) if nz else Zero(a) for a, nz in zip(out_avals, out_nz)]


class _BoundBwd(_Named):
    """A bwd rule with the residual structure of one fwd run bound in."""

    def __init__(self, bwd, res_info):
        super().__init__(bwd.__name__)
        self.bwd, self.res_info = bwd, res_info

    def __call__(self, residuals, cts):
        return self.bwd(self.res_info, residuals, cts)


class _BatchedFwd(_Named):
    def __init__(self, fwd, axis_data, arg_dims, n_out):
        super().__init__(fwd.__name__)
        self.fwd, self.axis_data, self.arg_dims, self.n_out = fwd, axis_data, list(arg_dims), n_out

    def __call__(self, args, perturbed):
        info_box = []

        def inner(*xs):
            outs, res, info = self.fwd(list(xs), perturbed)
            info_box.append(info)
            return list(outs) + list(res)

        vals, dims = _run_batched(self.axis_data, inner, self.arg_dims, args)
        size, m = self.axis_data.size, self.n_out
        outs = [batching.matchaxis(size, d, 0, v) for v, d in zip(vals[:m], dims[:m])]
        return outs, vals[m:], (info_box[-1], tuple(dims[m:]))


class _BatchedBwd(_Named):
    def __init__(self, bwd, axis_data, arg_dims, arg_avals, out_avals):
        super().__init__(bwd.__name__)
        self.bwd, self.axis_data = bwd, axis_data
        self.arg_dims, self.arg_avals = list(arg_dims), list(arg_avals)  # unbatched avals
        self.out_avals = list(out_avals)  # unbatched

    def __call__(self, res_info, residuals, cts):
        import lax
        inner_info, res_dims = res_info
        size, nres = self.axis_data.size, len(residuals)
        nz = [not isinstance(c, SymbolicZero) for c in cts]
        in_vals = list(residuals) + [c for c, z in zip(cts, nz) if z]
        in_dims = list(res_dims) + [0 for z in nz if z]
        zero_box = []

        def inner(*xs):
            it = iter(xs[nres:])
            c = [next(it) if z else SymbolicZero(_tangent_aval(a))
                 for z, a in zip(nz, self.out_avals)]
            cts_in = self.bwd(inner_info, list(xs[:nres]), c)
            zero_box.append([type(x) is Zero for x in cts_in])
            return [x for x in cts_in if type(x) is not Zero]

        vals, dims = _run_batched(self.axis_data, inner, in_dims, in_vals)
        it = iter(zip(vals, dims))
        out = []
        for a, target, z in zip(self.arg_avals, self.arg_dims, zero_box[-1]):
            if z:
                out.append(Zero(_insert_axis(_tangent_aval(a), size, target)))
                continue
            v, d = next(it)
            if target is None:
                # An unbatched input receives the sum of the per-example cotangents.
                out.append(v if d is None else lax.reduce_sum(v, (d,)))
            else:
                out.append(batching.matchaxis(size, d, target, v))
        return out


def _custom_vjp_call_batch(axis_data, vals, dims, *, call_jaxpr, fwd, bwd, num_consts,
                           symbolic_zeros, name):
    if _nothing_to_batch(axis_data, dims, call_jaxpr):
        outs = custom_vjp_call_p.bind(*vals, call_jaxpr=call_jaxpr, fwd=fwd, bwd=bwd,
                                      num_consts=num_consts, symbolic_zeros=symbolic_zeros,
                                      name=name)
        return outs, [None] * len(outs)
    new_call = batch_jaxpr_at_front(call_jaxpr, axis_data, dims)
    arg_dims = dims[num_consts:]
    arg_avals = call_jaxpr.in_avals[num_consts:]
    new_fwd = _BatchedFwd(fwd, axis_data, arg_dims, len(call_jaxpr.out_avals))
    new_bwd = _BatchedBwd(bwd, axis_data, arg_dims, arg_avals, call_jaxpr.out_avals)
    outs = custom_vjp_call_p.bind(*vals, call_jaxpr=new_call, fwd=new_fwd, bwd=new_bwd,
                                  num_consts=num_consts, symbolic_zeros=symbolic_zeros,
                                  name=name)
    return outs, [0] * len(outs)


custom_vjp_call_p = Primitive("custom_vjp_call")
custom_vjp_call_p.multiple_results = True
custom_vjp_call_p.def_abstract_eval(_custom_jvp_call_abstract_eval)
custom_vjp_call_p.def_impl(_custom_call_impl)
ad.primitive_jvps[custom_vjp_call_p] = _custom_vjp_call_jvp
ad.primitive_transposes[custom_vjp_call_p] = _transpose_as_call
batching.primitive_batchers[custom_vjp_call_p] = _custom_vjp_call_batch
batching.batch_when_unmapped.add(custom_vjp_call_p)
pe.custom_staging_rules[custom_vjp_call_p] = _stage_with_call_avals(custom_vjp_call_p)
pe.partial_eval_rules[custom_vjp_call_p] = _inline_partial_eval
pe.partial_eval_jaxpr_rules[custom_vjp_call_p] = _partial_eval_jaxpr_as_call


# ------------------------------------- custom_lin ---------------------------------------
# The linear map of a custom_vjp function at a point: operands are the residuals and the
# nonzero input tangents; it only exists to be transposed (into a call of bwd).

def _custom_lin_abstract_eval(*avals, num_res, out_avals, out_nz, **_):
    return [a for a, nz in zip(out_avals, out_nz) if nz]


def _forward_mode_error(*_, name="", **__):
    raise TypeError(f"can't apply forward-mode autodiff (jvp) to a custom_vjp function "
                    f"({name}). Use reverse mode (grad, vjp, jacrev), or define the function "
                    "with custom_jvp instead.")


def _custom_lin_transpose(cts, *args, num_res, bwd, in_avals, in_nz, out_avals, out_nz,
                          symbolic_zeros, name):
    res = list(args[:num_res])
    it = iter(cts)
    cts_full = []
    for aval, nz in zip(out_avals, out_nz):
        ct = next(it) if nz else Zero(aval)
        if type(ct) is Zero:
            ct = SymbolicZero(aval) if symbolic_zeros else ad.zeros_like_aval(aval)
        cts_full.append(ct)
    try:
        cts_in = bwd(res, cts_full)
    except UnexpectedTracerError as e:
        e.args = (f"{e.args[0] if e.args else ''} While running the custom_vjp bwd rule of "
                  f"{name!r}: bwd may not close over traced values (use residuals, or "
                  "closure_convert).",)
        raise
    return [None] * num_res + [None if type(c) is Zero else c
                               for c, nz in zip(cts_in, in_nz) if nz]


def _custom_lin_partial_eval(trace, tracers, **params):
    tracers_in = [trace.instantiate_const(t) for t in tracers]
    avals_out = _custom_lin_abstract_eval(*[t.aval for t in tracers_in], **params)
    outs = [pe.PartialEvalTracer(trace, pe.PartialVal.unknown(a), None) for a in avals_out]
    recipe = pe.JaxprEqnRecipe(custom_lin_p, tracers_in, params, avals_out,
                               [pe._WeakRef(t) for t in outs])
    for t in outs:
        t.recipe = recipe
    return outs


def _custom_lin_batch(axis_data, vals, dims, **params):
    _forward_mode_error(name=params.get("name", ""))


custom_lin_p = Primitive("custom_lin")
custom_lin_p.multiple_results = True
custom_lin_p.def_abstract_eval(_custom_lin_abstract_eval)
custom_lin_p.def_impl(_forward_mode_error)
ad.primitive_transposes[custom_lin_p] = _custom_lin_transpose
ad.primitive_jvps[custom_lin_p] = lambda primals, tangents, **p: _forward_mode_error(**p)
batching.primitive_batchers[custom_lin_p] = _custom_lin_batch
pe.custom_staging_rules[custom_lin_p] = _stage_with_call_avals(custom_lin_p)
pe.partial_eval_rules[custom_lin_p] = _custom_lin_partial_eval


# ----------------------------------- custom_gradient ------------------------------------

class _GradRuleResiduals:
    """Residuals of ``custom_gradient``: the traced gradient rule's jaxpr (static) and the
    values it closes over (the pytree's leaves)."""

    def __init__(self, jaxpr, consts, in_tree, ct_tree):
        self.jaxpr, self.consts, self.in_tree, self.ct_tree = jaxpr, consts, in_tree, ct_tree


def _grad_rule_flatten(r):
    return list(r.consts), (r.jaxpr, r.in_tree, r.ct_tree)


def _grad_rule_unflatten(aux, consts):
    return _GradRuleResiduals(aux[0], list(consts), aux[1], aux[2])


from tracer.pytree import register_pytree_node  # noqa: E402

register_pytree_node(_GradRuleResiduals, _grad_rule_flatten, _grad_rule_unflatten)


def custom_gradient(fun: Callable):
    """``jax.custom_gradient``: ``fun(*args)`` returns ``(output, vjp_rule)`` where
    ``vjp_rule(output_cotangent)`` gives the cotangents of the arguments (a tuple, or a
    single value for a one-argument function). Returns a function computing ``output``
    whose reverse-mode derivative is ``vjp_rule`` (a custom_vjp; forward mode raises)."""
    name = _fun_name(fun)

    @custom_vjp
    def wrapped(*args):
        return fun(*args)[0]

    def fwd(*args):
        ans, rule = fun(*args)
        a_leaves, ct_tree = tree_flatten(ans)
        store = []

        def flat_rule(*cts):
            res = rule(tree_unflatten(ct_tree, cts))
            leaves, tree = tree_flatten(res, is_leaf=lambda x: x is None)
            store.append((tree, [x is None for x in leaves]))
            return [x for x in leaves if x is not None]

        jaxpr, consts = pe.trace_to_jaxpr_dynamic(
            flat_rule, [_tangent_aval(get_aval(a)) for a in a_leaves])
        return ans, _GradRuleResiduals(jaxpr, consts, store[0], ct_tree)

    def bwd(res, ct):
        c_leaves, c_tree = tree_flatten(ct)
        if c_tree != res.ct_tree:
            raise TypeError(f"custom_gradient of {name}: cotangent structure {c_tree} does not "
                            f"match the output structure {res.ct_tree}")
        tree, none_mask = res.in_tree
        it = iter(eval_jaxpr(res.jaxpr, res.consts, *c_leaves))
        outs = tree_unflatten(tree, [None if z else next(it) for z in none_mask])
        return outs if isinstance(outs, tuple) else (outs,)

    wrapped.defvjp(fwd, bwd)
    functools.update_wrapper(wrapped, fun)
    return wrapped


# ----------------------------------- closure_convert ------------------------------------

def closure_convert(fun: Callable, *example_args):
    """``(converted, consts)``: ``converted(*args, *consts)`` computes ``fun(*args)`` with
    the traced values ``fun`` closes over made explicit arguments (``jax.closure_convert``),
    so that they can be passed to a custom_vjp function and receive cotangents."""
    leaves, in_tree = tree_flatten(example_args)
    flat_fun, out = flatten_fun(fun, in_tree)
    closed, hoisted = trace_to_call_jaxpr(flat_fun, [get_aval(x) for x in leaves])
    out_tree = out.tree
    n = len(leaves)

    def converted(*args):
        a_leaves, a_tree = tree_flatten(args[:len(args) - len(hoisted)])
        consts = args[len(args) - len(hoisted):]
        if a_tree != in_tree or len(a_leaves) != n:
            raise TypeError(f"closure_convert({_fun_name(fun)}): called with argument "
                            f"structure {a_tree}, traced with {in_tree}")
        outs = eval_jaxpr(closed.jaxpr, closed.consts, *consts, *a_leaves)
        return tree_unflatten(out_tree, outs)

    return converted, list(hoisted)


# Re-exported here so that ``tracer.custom_derivatives`` holds the whole derivative API.
from tracer.ad_checkpoint import checkpoint, checkpoint_name, checkpoint_policies, remat  # noqa: E402,F401
