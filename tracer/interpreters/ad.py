"""Automatic differentiation: forward mode (JVPTrace), linearize (jvp + partial eval) and
reverse mode (transposition of the linear jaxpr).

Rule registries (filled by ``lax``):

- ``primitive_jvps[p](primals, tangents, **params) -> (primals_out, tangents_out)``, lists;
  tangents may be symbolic ``Zero``s, which rules never materialize without need.
- ``primitive_transposes[p](cts, *args, **params) -> [ct | None]``: linear inputs arrive
  as ``UndefinedPrimal(aval)``; cts may be ``Zero``.

Family helpers: ``defjvp`` (one rule per argument, optionally given the output),
``defjvp_zero`` (non-differentiable outputs, e.g. comparisons), ``deflinear`` (jvp and
transpose from one linear rule), ``defbilinear``. A rule that must recognise the values of
the transformation running it (custom_jvp_call / custom_vjp_call guard against user rules
closing over its tracers) asks ``running_jvp_main()``: the signature stays the same.

Symbolic zeros: a tangent or cotangent that is known to be zero is a ``Zero(aval)``; rules
skip work for it and it is materialized only at the API boundary (e.g. the gradient of an
argument the output does not depend on). A JVP tracer whose tangent is a symbolic zero
lowers to its primal, so constants never carry tangents. As a result the jaxpr of a
simple gradient holds no zero arrays::

    >>> print(tracer.make_jaxpr(tracer.grad(lambda x: tnp.sum(tnp.sin(x) * x)))(x))
    { lambda ; a:f64[3]. let
        b:f64[3] = sin a
        c:f64[3] = cos a
        d:f64[3] = mul b a
        e:f64[] = reduce_sum[axes=(0,)] d
        f:f64[3] = broadcast_in_dim[broadcast_dimensions=() shape=(3,)] 1.0:f64[]
        g:f64[3] = mul b f
        h:f64[3] = mul f a
        i:f64[3] = mul h c
        j:f64[3] = add_any g i
      in (j,) }

(the broadcast of 1.0 is the output cotangent seeded by grad, pushed through reduce_sum's
transpose, exactly as in JAX). Integer and bool values have float0 tangents.

Also here: ``stop_gradient`` (the identity with a zero derivative) and
``trace_to_call_jaxpr``, used by the primitives that hold a user function's jaxpr
(custom_jvp_call, custom_vjp_call, checkpoint).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from tracer import core, dtypes
from tracer.core import (Array, Primitive, ShapedArray, Trace, Tracer, full_lower, full_raise,
                         get_aval, new_main, safe_map, safe_zip)
from tracer.interpreters import batching
from tracer.interpreters import partial_eval as pe
from tracer.jaxpr import ClosedJaxpr, DropVar, Jaxpr, Literal, Var, eval_jaxpr

primitive_jvps: dict = {}
primitive_transposes: dict = {}
# The mains of the JVPTraces whose jvp rules are running: JVPTrace.process_primitive
# pushes its main around each rule call, so in a rule's own code the last entry is its
# trace's (the rules it starts in turn have returned and popped theirs).
_running_mains: list = []


def running_jvp_main():
    """The ``MainTrace`` of the JVPTrace whose jvp rule is running: for rules that must
    tell the tracers of their own transformation from others (custom_jvp/custom_vjp's
    guard against user rules closing over traced values). Only valid inside a rule."""
    return _running_mains[-1]


class Zero:
    """A symbolic zero tangent/cotangent of a given aval."""

    __slots__ = ("aval",)

    def __init__(self, aval):
        self.aval = aval

    def __repr__(self):
        return f"Zero({self.aval.str_short()})"

    @staticmethod
    def from_primal_value(x):
        return Zero(get_aval(x).at_least_vspace())


class UndefinedPrimal:
    """A linear input of an equation being transposed."""

    __slots__ = ("aval",)

    def __init__(self, aval):
        self.aval = aval

    def __repr__(self):
        return f"UndefinedPrimal({self.aval.str_short()})"


def is_undefined_primal(x) -> bool:
    return type(x) is UndefinedPrimal


def zeros_like_aval(aval):
    """A materialized zero of ``aval`` (traceable: a broadcast of a scalar)."""
    if isinstance(aval, core.AbstractToken):  # a token's "zero" tangent is a token
        return core.Token()
    if aval.dtype == dtypes.float0:
        return Array(np.zeros(aval.shape, dtypes.float0))
    import lax  # lax registers its rules with us; the import is deferred to break the cycle
    return lax.full(aval.shape, 0, aval.dtype)


def unbroadcast(aval, ct):
    """Sum ``ct`` down to ``aval``'s shape when the operand was a broadcasting scalar."""
    if type(ct) is Zero or ct is None:
        return ct
    if aval.shape == () and get_aval(ct).shape != ():
        import lax
        return lax.reduce_sum(ct, tuple(range(get_aval(ct).ndim)))
    return ct


def instantiate_zeros(t):
    return zeros_like_aval(t.aval) if type(t) is Zero else t


# ---------------------------------- add_any ---------------------------------------------
# Tangent and cotangent accumulation: x + y for two values of the same aval.

add_any_p = Primitive("add_any")


def _add_any_abstract_eval(x, y):
    if x.shape != y.shape or x.dtype != y.dtype:
        raise TypeError(f"add_any: operands must have equal types, got {x.str_short()} and "
                        f"{y.str_short()}")
    return ShapedArray(x.shape, x.dtype, x.weak_type and y.weak_type)


add_any_p.def_abstract_eval(_add_any_abstract_eval)
# inf + -inf is NaN, as in JAX, without a NumPy warning
add_any_p.def_impl(core.np_errstate(np.add))


def add_tangents(x, y):
    if type(x) is Zero:
        return y
    if type(y) is Zero:
        return x
    return add_any_p.bind(x, y)


def _add_any_jvp(primals, tangents):
    return [add_any_p.bind(*primals)], [add_tangents(*tangents)]


def _add_any_transpose(cts, x, y):
    (ct,) = cts
    return [ct, ct]


def _add_any_batch(axis_data, vals, dims):
    # The two summands of an accumulation often differ in batching: under vmap(grad(f)) a
    # value used twice gets one cotangent that depends on the example and one that does
    # not (f32[] and f32[8]), or both are batched on different axes. add_any's operands
    # must have equal types, so the unbatched one is broadcast and the other moved to the
    # first mapped operand's batch axis (add's rule would keep an unbatched scalar as it is).
    x, y = vals
    dx, dy = dims
    out_dim = dx if dx is not batching.not_mapped else dy
    x = batching.matchaxis(axis_data.size, dx, out_dim, x)
    y = batching.matchaxis(axis_data.size, dy, out_dim, y)
    return [add_any_p.bind(x, y)], [out_dim]


primitive_jvps[add_any_p] = _add_any_jvp
primitive_transposes[add_any_p] = _add_any_transpose
batching.primitive_batchers[add_any_p] = _add_any_batch


# -------------------------------- stop_gradient -----------------------------------------
# The identity with a zero derivative. It lives beside the AD machinery (as JAX's ad_util
# does) because ``lax`` and the custom-derivative code both use it.

stop_gradient_p = Primitive("stop_gradient")
stop_gradient_p.def_abstract_eval(lambda x: x)
stop_gradient_p.def_impl(lambda x: x)


def _stop_gradient_jvp(primals, tangents):
    (x,) = primals
    out = stop_gradient_p.bind(x)
    return [out], [Zero.from_primal_value(out)]


primitive_jvps[stop_gradient_p] = _stop_gradient_jvp


def _stop_gradient_batch(axis_data, vals, dims):
    return [stop_gradient_p.bind(vals[0])], [dims[0]]


batching.primitive_batchers[stop_gradient_p] = _stop_gradient_batch


def stop_gradient(x):
    """The identity on a pytree of arrays whose derivative is zero (``jax.lax.stop_gradient``).

    Floating and complex leaves pass through the ``stop_gradient`` primitive (it shows in
    jaxprs; jvp gives a symbolic zero tangent, so grad contributes nothing through it);
    integer and bool leaves, which have no derivative anyway, are returned as they are.
    Works under every transformation (vmap batches it as the identity).
    """
    from tracer.pytree import tree_map

    def stop(v):
        if not dtypes.is_inexact(get_aval(v).dtype):
            return v
        return stop_gradient_p.bind(v)

    return tree_map(stop, x)


# ---------------------------------- forward mode ----------------------------------------

class JVPTracer(Tracer):
    __slots__ = ("primal", "tangent")

    def __init__(self, trace, primal, tangent):
        self._trace = trace
        self.primal = primal
        self.tangent = tangent

    @property
    def aval(self):
        return get_aval(self.primal)

    def full_lower(self):
        # A value with a symbolic zero tangent is a constant to this transformation: hand it
        # down as the lower-level value (JAX's ``maybe_jvp_tracer``), so that closures over
        # it (custom rules, nested transformations) never see this trace's tracers.
        if type(self.tangent) is Zero:
            return full_lower(self.primal)
        return self

    def to_concrete_value(self):
        p = self.primal
        if isinstance(p, Tracer):
            return p.to_concrete_value()
        if isinstance(p, Array):
            return p._value
        return p


class JVPTrace(Trace):
    def pure(self, val):
        return JVPTracer(self, val, Zero.from_primal_value(val))

    lift = pure

    def process_primitive(self, primitive, tracers, params):
        primals_in = [t.primal for t in tracers]
        tangents_in = [t.tangent for t in tracers]
        rule = primitive_jvps.get(primitive)
        if rule is None:
            raise NotImplementedError(f"Differentiation rule for '{primitive.name}' not "
                                      "implemented")
        _running_mains.append(self.main)
        try:
            primals_out, tangents_out = rule(primals_in, tangents_in, **params)
        finally:
            _running_mains.pop()
        return [JVPTracer(self, x, t) for x, t in zip(primals_out, tangents_out)]


def jvp_flat(f: Callable, primals, tangents, instantiate=True):
    """Forward mode on flat lists. ``tangents`` may hold Zeros. Returns (primals_out,
    tangents_out); with ``instantiate`` zero tangents are materialized."""
    with new_main(JVPTrace) as main:
        trace = JVPTrace(main)
        tracers_in = [JVPTracer(trace, x, t) for x, t in zip(primals, tangents)]
        outs = f(*tracers_in)
        tracers_out = [full_raise(trace, o) for o in outs]
        primals_out = [full_lower(t.primal) for t in tracers_out]
        tangents_out = [t.tangent for t in tracers_out]
    if instantiate is True:
        instantiate = [True] * len(tangents_out)
    elif instantiate is False:
        instantiate = [False] * len(tangents_out)
    tangents_out = [instantiate_zeros(t) if inst else t
                    for t, inst in zip(tangents_out, instantiate)]
    tangents_out = [t if type(t) is Zero else full_lower(t) for t in tangents_out]
    return primals_out, tangents_out


# ------------------------------------- helpers ------------------------------------------

def _match_shape(contrib, out):
    # Rank-0 operands of element-wise ops broadcast: so does their tangent contribution.
    shape = get_aval(out).shape
    if get_aval(contrib).shape != shape:
        import lax
        contrib = lax.broadcast_in_dim(contrib, shape, ())
    return contrib


def defjvp(primitive, *jvp_rules, with_ans: bool = False):
    """The jvp of a single-output primitive from one rule per argument:
    ``rule(g, *primals, **params) -> tangent contribution`` (JAX's ``defjvp``), or with
    ``with_ans`` ``rule(g, ans, *primals, **params)``, ``ans`` the primitive's output, for
    derivatives best written with it (``exp``: ``g * ans``; JAX's ``defjvp2``). None for
    arguments the output does not depend on differentiably. Contributions of rank-0
    operands are broadcast to the output's shape and summed; symbolic-zero tangents are
    skipped."""

    def rule(primals, tangents, **params):
        out = primitive.bind(*primals, **params)
        ans = (out,) if with_ans else ()
        result = None
        for r, t in zip(jvp_rules, tangents):
            if r is None or type(t) is Zero:
                continue
            contrib = _match_shape(r(t, *ans, *primals, **params), out)
            result = contrib if result is None else add_tangents(result, contrib)
        if result is None:
            result = Zero.from_primal_value(out)
        return [out], [result]

    primitive_jvps[primitive] = rule
    return rule


def defjvp_zero(primitive):
    """The outputs are not differentiable (integer/bool results, e.g. comparisons)."""

    def rule(primals, tangents, **params):
        outs = primitive.bind(*primals, **params)
        outs = outs if primitive.multiple_results else [outs]
        return outs, [Zero.from_primal_value(o) for o in outs]

    primitive_jvps[primitive] = rule
    return rule


def deflinear(primitive, transpose_rule):
    """A primitive linear in all its array arguments: its jvp applies it to the tangents
    (zeros stay symbolic). ``transpose_rule(cts, *args, **params) -> [ct | None]``."""

    def jvp(primals, tangents, **params):
        out = primitive.bind(*primals, **params)
        outs = out if primitive.multiple_results else [out]
        if all(type(t) is Zero for t in tangents):
            return outs, [Zero.from_primal_value(o) for o in outs]
        t_out = primitive.bind(*[instantiate_zeros(t) for t in tangents], **params)
        return outs, (t_out if primitive.multiple_results else [t_out])

    primitive_jvps[primitive] = jvp
    primitive_transposes[primitive] = transpose_rule


def defbilinear(primitive, lhs_rule, rhs_rule):
    """``primitive(x, y)`` linear in each argument separately (mul, dot_general).
    ``lhs_rule(ct, x_undefined, y, **params)`` gives x's cotangent, ``rhs_rule`` y's."""
    defjvp(primitive,
           lambda g, x, y, **params: primitive.bind(g, y, **params),
           lambda g, x, y, **params: primitive.bind(x, g, **params))

    def transpose(cts, x, y, **params):
        (ct,) = cts
        if type(ct) is Zero:
            return [None, None]
        if is_undefined_primal(x) and is_undefined_primal(y):
            raise ValueError(f"transpose of {primitive.name}: both operands are linear "
                             "(the program is not linear in its inputs)")
        if is_undefined_primal(x):
            return [unbroadcast(x.aval, lhs_rule(ct, x, y, **params)), None]
        return [None, unbroadcast(y.aval, rhs_rule(ct, x, y, **params))]

    primitive_transposes[primitive] = transpose


# ------------------------------------ linearize -----------------------------------------

def tangent_aval(x):
    return get_aval(x).at_least_vspace().strip_weak_type()


def linearize(f: Callable, primals):
    """Flat linearize: returns (primals_out, f_lin) where f_lin maps input tangents (one
    per primal; ignored for integer primals) to output tangents (materialized)."""
    primals_out, lin = _linearize(f, primals)
    return primals_out, lin


def _linearize(f, primals):
    """jvp + partial evaluation: the primal computation runs now (known), the tangent
    computation is staged into a linear jaxpr (unknown)."""
    inexact = [dtypes.is_inexact(get_aval(x).dtype) for x in primals]
    n = len(primals)
    info: dict = {}

    def f_jvp(*args):
        prims, tans_known = args[:n], iter(args[n:])
        tans = [next(tans_known) if ok else Zero.from_primal_value(x)
                for x, ok in zip(prims, inexact)]
        primals_out, tangents_out = jvp_flat(f, prims, tans, instantiate=False)
        info["zero_out"] = [type(t) is Zero for t in tangents_out]
        info["out_avals"] = [tangent_aval(p) for p in primals_out]
        return [*primals_out, *[t for t in tangents_out if type(t) is not Zero]]

    pvals_in = ([pe.PartialVal.known(x) for x in primals] +
                [pe.PartialVal.unknown(tangent_aval(x))
                 for x, ok in zip(primals, inexact) if ok])
    with new_main(pe.PartialEvalTrace) as main:
        trace = pe.PartialEvalTrace(main)
        tracers_in = [trace.new_arg(pval) for pval in pvals_in]
        outs = f_jvp(*tracers_in)
        tracers_out = [full_raise(trace, o) for o in outs]
        m = len(info["zero_out"])
        primal_pvals = [t.pval for t in tracers_out[:m]]
        assert all(p.is_known for p in primal_pvals), "primal output depends on a tangent"
        tangent_tracers = [trace.instantiate_const(t) for t in tracers_out[m:]]
        unk_in = [t for t in tracers_in if t.pval.is_unknown]
        jaxpr, consts = pe.tracers_to_jaxpr(unk_in, tangent_tracers)
    primals_out = [full_lower(p.const) for p in primal_pvals]
    lin = LinearFunction(jaxpr, consts, inexact, [get_aval(x) for x in primals],
                         info["out_avals"], info["zero_out"])
    return primals_out, lin


class LinearFunction:
    """The linear map of ``linearize``: a jaxpr over (consts, tangents of inexact inputs)."""

    def __init__(self, jaxpr, consts, inexact, in_avals, out_avals, zero_out):
        self.jaxpr = jaxpr
        self.consts = consts
        self.inexact = inexact
        self.in_avals = in_avals
        self.out_avals = out_avals
        self.zero_out = zero_out

    def __call__(self, *tangents):
        if len(tangents) != len(self.inexact):
            raise TypeError(f"linearized function takes {len(self.inexact)} tangents, got "
                            f"{len(tangents)}")
        tans = [t for t, ok in zip(tangents, self.inexact) if ok]
        outs = iter(eval_jaxpr(self.jaxpr, [], *self.consts, *tans))
        return [zeros_like_aval(a) if z else next(outs)
                for a, z in zip(self.out_avals, self.zero_out)]

    def transpose(self, cts):
        """Cotangents of the inputs (float0 zeros for integer inputs) given output cts."""
        cts_nonzero = [ct for ct, z in zip(cts, self.zero_out) if not z]
        n_consts = len(self.consts)
        args = list(self.consts) + [UndefinedPrimal(v.aval)
                                    for v in self.jaxpr.invars[n_consts:]]
        cts_in = iter(backward_pass(self.jaxpr, args, cts_nonzero))
        out = []
        for aval, ok in zip(self.in_avals, self.inexact):
            if ok:
                ct = next(cts_in)
                out.append(instantiate_zeros(ct) if type(ct) is Zero else ct)
            else:
                out.append(Array(np.zeros(aval.shape, dtypes.float0)))
        return out


# ---------------------------------- transposition ---------------------------------------

def backward_pass(jaxpr: Jaxpr, args, cts):
    """Transpose ``jaxpr``: ``args`` holds values for the non-linear inputs and
    ``UndefinedPrimal`` for the linear ones; returns the cotangents (possibly ``Zero``) of
    the linear inputs, in order."""
    primal_env: dict = {}
    ct_env: dict = {}

    def read_primal(x):
        if type(x) is Literal:
            return x.val
        return primal_env.get(x, UndefinedPrimal(x.aval))

    def write_primal(v, val):
        if not is_undefined_primal(val):
            primal_env[v] = val

    def read_cotangent(v):
        return ct_env.pop(v, Zero(v.aval.at_least_vspace().strip_weak_type()))

    def write_cotangent(x, ct):
        if type(x) is not Var or ct is None or type(ct) is Zero:
            return
        prev = ct_env.get(x)
        ct_env[x] = ct if prev is None else add_tangents(prev, ct)

    for v, a in zip(jaxpr.invars, args):
        write_primal(v, a)
    # Forward: evaluate the equations that do not touch linear inputs (non-linear parts
    # that partial evaluation left in, e.g. inside sub-jaxprs).
    linear_eqns = []
    for eqn in jaxpr.eqns:
        ins = [read_primal(x) for x in eqn.invars]
        if any(is_undefined_primal(x) for x in ins):
            linear_eqns.append(eqn)
        else:
            outs = eqn.primitive.bind(*ins, **eqn.params)
            outs = outs if eqn.primitive.multiple_results else [outs]
            for v, o in zip(eqn.outvars, outs):
                write_primal(v, o)
    for v, ct in zip(jaxpr.outvars, cts):
        write_cotangent(v, ct)
    for eqn in reversed(linear_eqns):
        cts_in = [read_cotangent(v) if type(v) is not DropVar else Zero(v.aval)
                  for v in eqn.outvars]
        if all(type(c) is Zero for c in cts_in):
            continue
        primals_in = [read_primal(x) for x in eqn.invars]
        rule = primitive_transposes.get(eqn.primitive)
        if rule is None:
            raise NotImplementedError(f"Transpose rule (for reverse-mode differentiation) for "
                                      f"'{eqn.primitive.name}' not implemented")
        cts_out = rule(cts_in, *primals_in, **eqn.params)
        for x, ct in zip(eqn.invars, cts_out):
            if type(x) is Var and is_undefined_primal(read_primal(x)):
                write_cotangent(x, ct)
    return [read_cotangent(v) for v, a in zip(jaxpr.invars, args) if is_undefined_primal(a)]


def vjp_flat(f: Callable, primals):
    """Returns (primals_out, f_vjp) with f_vjp(cts_out) -> cts_in (one per primal)."""
    primals_out, lin = _linearize(f, primals)
    return primals_out, lin.transpose, lin


# ------------------------------ tracing user functions ----------------------------------

def trace_to_call_jaxpr(flat_fun: Callable, in_avals):
    """Trace ``flat_fun`` into ``(closed_jaxpr, hoisted)``: the jaxpr's leading invars are
    the values ``flat_fun`` closes over that are traced by an enclosing transformation;
    ``hoisted`` lists them, to be passed as the first operands of the primitive holding the
    jaxpr (custom_jvp_call, custom_vjp_call, checkpoint). Concrete closed-over values stay
    consts of the ClosedJaxpr."""
    jaxpr, consts = pe.trace_to_jaxpr_dynamic(flat_fun, in_avals)
    is_tracer = [isinstance(c, Tracer) for c in consts]
    if not any(is_tracer):
        return ClosedJaxpr(jaxpr, consts), []
    hoisted_vars = [v for v, t in zip(jaxpr.constvars, is_tracer) if t]
    kept_vars = [v for v, t in zip(jaxpr.constvars, is_tracer) if not t]
    new = Jaxpr(kept_vars, hoisted_vars + list(jaxpr.invars), jaxpr.eqns, jaxpr.outvars)
    return (ClosedJaxpr(new, [c for c, t in zip(consts, is_tracer) if not t]),
            [c for c, t in zip(consts, is_tracer) if t])


def no_transformation_active() -> bool:
    """True when nothing is being traced (user functions may then simply be called)."""
    from tracer import core
    return len(core.current_trace_stack()) == 1 and core.dynamic_level() == 0


def lower_escaped(x):
    """``x`` with the tracers of transformations that have ended peeled off (a JVP tracer
    becomes its primal, a known partial value its constant): how auxiliary outputs
    (``has_aux``) leave jvp/linearize/vjp/grad."""
    from tracer import core
    while isinstance(x, Tracer):
        main = x._trace.main
        stack = core.current_trace_stack()
        if main.level < len(stack) and stack[main.level] is main:
            return x.full_lower()
        if isinstance(x, JVPTracer):
            x = x.primal
        elif isinstance(x, pe.PartialEvalTracer) and x.pval.is_known:
            x = x.pval.const
        else:
            return x
    return x
