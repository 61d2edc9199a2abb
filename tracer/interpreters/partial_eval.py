"""Staging into jaxprs and partial evaluation.

- ``JaxprTrace``: the dynamic trace behind ``make_jaxpr``/``jit``: every bind becomes an
  equation of the jaxpr being built (JAX's DynamicJaxprTrace).
- ``PartialEvalTrace``: splits a computation into a known part, computed now, and an
  unknown part, staged into a jaxpr (used by ``linearize``: known primals, unknown
  tangents).
- ``partial_eval_jaxpr``: the same split applied to a jaxpr (used by rules of primitives
  holding sub-jaxprs: jit, cond, scan).
- ``dce_jaxpr``: dead-code elimination.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numpy as np

from tracer.core import (Array, MainTrace, ShapedArray, Trace, Tracer, abstract_eval_cached,
                         full_raise, get_aval, new_dynamic, new_main, safe_map, safe_zip)
from tracer.jaxpr import (ClosedJaxpr, DropVar, Jaxpr, JaxprEqn, Literal, Var, literalable,
                          make_literal)

# Primitives whose staging needs more than one plain equation (e.g. custom_jvp_call keeps
# its rule): prim -> rule(trace, tracers, **params) -> out tracers
custom_staging_rules: dict = {}

# ------------------------------- dynamic jaxpr tracing ----------------------------------


class JaxprTracer(Tracer):
    __slots__ = ("_aval",)

    def __init__(self, trace, aval):
        self._trace = trace
        self._aval = aval

    @property
    def aval(self):
        return self._aval


class JaxprBuilder:
    def __init__(self):
        self.eqns: list[JaxprEqn] = []
        self.tracer_to_var: dict[int, Var] = {}
        self.const_tracers: dict[int, JaxprTracer] = {}
        self.constvar_to_val: dict[Var, Any] = {}
        self.tracers: list[JaxprTracer] = []

    def new_tracer(self, trace, aval) -> JaxprTracer:
        t = JaxprTracer(trace, aval)
        self.tracers.append(t)
        return t

    def add_var(self, tracer) -> Var:
        assert id(tracer) not in self.tracer_to_var
        v = self.tracer_to_var[id(tracer)] = Var(tracer.aval)
        return v

    def getvar(self, tracer) -> Var:
        v = self.tracer_to_var.get(id(tracer))
        assert v is not None, "tracer not known to this jaxpr"
        return v

    def add_const(self, tracer, val) -> Var:
        var = self.add_var(tracer)
        self.constvar_to_val[var] = val
        return var

    def build(self, in_tracers, out_tracers):
        constvars, constvals = list(self.constvar_to_val), list(self.constvar_to_val.values())
        invars = [self.getvar(t) for t in in_tracers]
        outvars = [self.getvar(t) for t in out_tracers]
        jaxpr = Jaxpr(constvars, invars, self.eqns, outvars)
        jaxpr, constvals = _inline_literals(jaxpr, constvals)
        return jaxpr, constvals


def _inline_literals(jaxpr: Jaxpr, consts):
    """Scalar constants become Literals inside equations (as JAX prints them)."""
    lit = {}
    keep_vars, keep_vals = [], []
    for v, c in zip(jaxpr.constvars, consts):
        if not isinstance(c, Tracer) and literalable(c):
            lit[v] = make_literal(c)
        else:
            keep_vars.append(v)
            keep_vals.append(c)
    if not lit:
        return jaxpr, consts
    eqns = [JaxprEqn(e.primitive, [lit.get(x, x) if type(x) is Var else x for x in e.invars],
                     e.params, e.outvars) for e in jaxpr.eqns]
    # An output that is a literal stays a constvar-free Literal in outvars.
    outvars = [lit.get(x, x) if type(x) is Var else x for x in jaxpr.outvars]
    return Jaxpr(keep_vars, jaxpr.invars, eqns, outvars), keep_vals


class JaxprTrace(Trace):
    def new_arg(self, aval) -> JaxprTracer:
        b = self.builder
        t = b.new_tracer(self, aval)
        b.add_var(t)
        return t

    def get_or_make_const_tracer(self, val) -> JaxprTracer:
        b = self.builder
        t = b.const_tracers.get(id(val))
        if t is None:
            aval = get_aval(val)
            t = b.new_tracer(self, aval)
            b.add_const(t, val)
            b.const_tracers[id(val)] = t
            b.tracers.append(val)  # keep alive so id() stays unique
        return t

    pure = lift = get_or_make_const_tracer

    def process_primitive(self, primitive, tracers, params):
        rule = custom_staging_rules.get(primitive)
        if rule is not None:
            return rule(self, tracers, **params)
        avals_in = [t.aval for t in tracers]
        avals_out = abstract_eval_cached(primitive, avals_in, params)
        return self.emit(primitive, tracers, params, avals_out)

    def emit(self, primitive, tracers, params, avals_out):
        b = self.builder
        out_tracers = [b.new_tracer(self, a) for a in avals_out]
        invars = [b.getvar(t) for t in tracers]
        outvars = [b.add_var(t) for t in out_tracers]
        b.eqns.append(JaxprEqn(primitive, invars, params, outvars))
        return out_tracers

    @property
    def builder(self) -> JaxprBuilder:
        return self.main.global_data


def trace_to_jaxpr_dynamic(fun: Callable, in_avals):
    """Trace ``fun`` (flat list of args -> flat list of outputs) into (jaxpr, consts)."""
    builder = JaxprBuilder()
    with new_main(JaxprTrace, builder) as main:
        with new_dynamic(main):
            trace = JaxprTrace(main)
            tracers_in = [trace.new_arg(a) for a in in_avals]
            outs = fun(*tracers_in)
            tracers_out = [full_raise(trace, o) for o in outs]
            jaxpr, consts = builder.build(tracers_in, tracers_out)
    return jaxpr, consts


def trace_to_closed_jaxpr(fun, in_avals) -> ClosedJaxpr:
    jaxpr, consts = trace_to_jaxpr_dynamic(fun, in_avals)
    return ClosedJaxpr(jaxpr, consts)


def convert_constvars_jaxpr(jaxpr: Jaxpr) -> Jaxpr:
    """Constvars become leading invars."""
    return Jaxpr([], jaxpr.constvars + jaxpr.invars, jaxpr.eqns, jaxpr.outvars)


def closed_jaxpr_without_consts(closed: ClosedJaxpr):
    """(jaxpr taking consts as leading args, consts)."""
    return ClosedJaxpr(convert_constvars_jaxpr(closed.jaxpr), []), closed.consts


# ---------------------------------- partial eval ----------------------------------------

class PartialVal(NamedTuple):
    aval: Any
    const: Any | None

    @classmethod
    def known(cls, val):
        return PartialVal(get_aval(val), val)

    @classmethod
    def unknown(cls, aval):
        return PartialVal(aval, None)

    is_known = property(lambda self: self.const is not None)
    is_unknown = property(lambda self: self.const is None)


class LambdaBindingRecipe(NamedTuple):
    pass


class ConstRecipe(NamedTuple):
    val: Any


class JaxprEqnRecipe(NamedTuple):
    prim: Any
    tracers_in: list
    params: dict
    avals_out: list
    tracer_refs_out: list


class PartialEvalTracer(Tracer):
    __slots__ = ("pval", "recipe")
    conversion_drops_information = False   # a known value is just a value

    def __init__(self, trace, pval, recipe):
        self._trace = trace
        self.pval = pval
        self.recipe = recipe

    @property
    def aval(self):
        return self.pval.aval

    def full_lower(self):
        if self.pval.is_known:
            from tracer.core import full_lower
            return full_lower(self.pval.const)
        return self

    def to_concrete_value(self):
        if self.pval.is_known:
            c = self.pval.const
            return c.to_concrete_value() if isinstance(c, (Tracer, Array)) else c
        return None


# Rules for primitives with sub-jaxprs under PartialEvalTrace:
#   prim -> rule(trace, tracers, **params) -> out tracers
partial_eval_rules: dict = {}
# Rules for splitting an equation inside partial_eval_jaxpr:
#   prim -> rule(unks_in, eqn) -> (eqn1 | None, eqn2 | None, unks_out, residual vars)
partial_eval_jaxpr_rules: dict = {}


class PartialEvalTrace(Trace):
    def new_arg(self, pval: PartialVal):
        if pval.is_known:
            return PartialEvalTracer(self, pval, None)
        return PartialEvalTracer(self, pval, LambdaBindingRecipe())

    def lift(self, val):
        return PartialEvalTracer(self, PartialVal.known(val), None)

    pure = lift

    def instantiate_const(self, tracer):
        if tracer.pval.is_unknown:
            return tracer
        if isinstance(tracer.pval.const, Tracer) or not literalable(tracer.pval.const):
            pval = PartialVal.unknown(get_aval(tracer.pval.const))
            return PartialEvalTracer(self, pval, ConstRecipe(tracer.pval.const))
        pval = PartialVal.unknown(get_aval(tracer.pval.const))
        return PartialEvalTracer(self, pval, ConstRecipe(tracer.pval.const))

    def process_primitive(self, primitive, tracers, params):
        if all(t.pval.is_known for t in tracers):
            return [full_raise(self, o) for o in
                    _as_list(primitive.bind(*[t.pval.const for t in tracers], **params),
                             primitive)]
        rule = partial_eval_rules.get(primitive)
        if rule is not None:
            return rule(self, tracers, **params)
        tracers_in = [self.instantiate_const(t) for t in tracers]
        avals_in = [t.aval for t in tracers_in]
        avals_out = abstract_eval_cached(primitive, avals_in, params)
        tracers_out = [PartialEvalTracer(self, PartialVal.unknown(a), None) for a in avals_out]
        recipe = JaxprEqnRecipe(primitive, tracers_in, params, avals_out,
                                [_WeakRef(t) for t in tracers_out])
        for t in tracers_out:
            t.recipe = recipe
        return tracers_out


class _WeakRef:
    # Tracers hold __weakref__ slots; a plain weakref keeps recipes from forming cycles.
    __slots__ = ("ref",)

    def __init__(self, obj):
        import weakref
        self.ref = weakref.ref(obj)

    def __call__(self):
        return self.ref()


def _as_list(out, primitive):
    return out if primitive.multiple_results else [out]


def partial_eval_flat(f: Callable, pvals_in: list[PartialVal]):
    """Run ``f`` with some inputs known: returns (jaxpr of the unknown part,
    out PartialVals, consts of that jaxpr). The jaxpr takes the unknown inputs."""
    with new_main(PartialEvalTrace) as main:
        trace = PartialEvalTrace(main)
        tracers_in = [trace.new_arg(pval) for pval in pvals_in]
        outs = f(*tracers_in)
        tracers_out = [full_raise(trace, out) for out in outs]
        pvals_out = [t.pval for t in tracers_out]
        unk_tracers_in = [t for t in tracers_in if t.pval.is_unknown]
        unk_tracers_out = [t for t in tracers_out if t.pval.is_unknown]
        jaxpr, consts = tracers_to_jaxpr(unk_tracers_in, unk_tracers_out)
    return jaxpr, pvals_out, consts


def tracers_to_jaxpr(tracers_in, tracers_out):
    tracer_to_var = {id(t): Var(t.aval) for t in tracers_in}
    constvar_to_val: dict = {}
    constid_to_var: dict = {}
    processed_eqns: set = set()
    eqns: list = []
    for t in toposort(tracers_out, _tracer_parents):
        if isinstance(t.recipe, LambdaBindingRecipe):
            assert id(t) in tracer_to_var
        elif isinstance(t.recipe, ConstRecipe):
            val = t.recipe.val
            var = constid_to_var.get(id(val))
            if var is None:
                aval = get_aval(val)
                var = constid_to_var[id(val)] = Var(aval)
                constvar_to_val[var] = val
            tracer_to_var[id(t)] = var
        elif isinstance(t.recipe, JaxprEqnRecipe):
            if id(t.recipe) not in processed_eqns:
                eqns.append(_recipe_to_eqn(tracer_to_var, t.recipe))
                processed_eqns.add(id(t.recipe))
        else:
            raise TypeError(t.recipe)
    constvars, constvals = list(constvar_to_val), list(constvar_to_val.values())
    in_binders = constvars + [tracer_to_var[id(t)] for t in tracers_in]
    out_vars = [tracer_to_var[id(t)] for t in tracers_out]
    jaxpr = Jaxpr([], in_binders, eqns, out_vars)
    return jaxpr, constvals


def _recipe_to_eqn(tracer_to_var, r: JaxprEqnRecipe) -> JaxprEqn:
    inputs = [tracer_to_var[id(t)] for t in r.tracers_in]
    out_binders = [Var(a) for a in r.avals_out]
    for t_ref, var in zip(r.tracer_refs_out, out_binders):
        t = t_ref()
        if t is not None:
            tracer_to_var[id(t)] = var
    return JaxprEqn(r.prim, inputs, r.params, out_binders)


def _tracer_parents(t):
    return t.recipe.tracers_in if isinstance(t.recipe, JaxprEqnRecipe) else []


def toposort(out_nodes, parents):
    if not out_nodes:
        return []
    out_nodes = _remove_duplicates(out_nodes)
    child_counts: dict = {}
    stack = list(out_nodes)
    while stack:
        node = stack.pop()
        if id(node) in child_counts:
            child_counts[id(node)] += 1
        else:
            child_counts[id(node)] = 1
            stack.extend(parents(node))
    for node in out_nodes:
        child_counts[id(node)] -= 1
    sorted_nodes = []
    childless = [n for n in out_nodes if not child_counts[id(n)]]
    while childless:
        node = childless.pop()
        sorted_nodes.append(node)
        for parent in parents(node):
            if child_counts[id(parent)] == 1:
                childless.append(parent)
            else:
                child_counts[id(parent)] -= 1
    sorted_nodes = sorted_nodes[::-1]
    return sorted_nodes


def _remove_duplicates(lst):
    seen = set()
    return [x for x in lst if id(x) not in seen and not seen.add(id(x))]


# ------------------------------ partial_eval_jaxpr ---------------------------------------

def partial_eval_jaxpr(jaxpr: Jaxpr, in_unknowns, instantiate=None):
    """Split ``jaxpr`` (no constvars) by which inputs are unknown.

    Returns (jaxpr1, jaxpr2, out_unknowns, num_res): jaxpr1 takes the known inputs and
    returns the known outputs followed by residuals; jaxpr2 takes the residuals followed
    by the unknown inputs and returns the unknown outputs. ``instantiate[i]`` forces
    output i to be unknown.
    """
    env: dict = {}
    residuals: set = set()
    residual_list: list = []

    def read(x):
        return False if type(x) is Literal else env[x]

    def write(unk, v):
        env[v] = unk

    def new_res(x):
        if type(x) is Var and x not in residuals:
            residuals.add(x)
            residual_list.append(x)
        return x

    eqns1, eqns2 = [], []
    for v, unk in zip(jaxpr.invars, in_unknowns):
        write(unk, v)
    for eqn in jaxpr.eqns:
        unks_in = [read(x) for x in eqn.invars]
        rule = partial_eval_jaxpr_rules.get(eqn.primitive)
        if rule is not None and any(unks_in):
            eqn1, eqn2, unks_out, res = rule(unks_in, eqn)
            if eqn1 is not None:
                eqns1.append(eqn1)
            if eqn2 is not None:
                eqns2.append(eqn2)
            for r in res:
                new_res(r)
            for v, u in zip(eqn.outvars, unks_out):
                write(u, v)
        elif any(unks_in):
            for x, unk in zip(eqn.invars, unks_in):
                if not unk:
                    new_res(x)
            eqns2.append(eqn)
            for v in eqn.outvars:
                write(True, v)
        else:
            eqns1.append(eqn)
            for v in eqn.outvars:
                write(False, v)
    out_unknowns = [read(x) for x in jaxpr.outvars]
    if instantiate is None:
        instantiate = [False] * len(out_unknowns)
    elif isinstance(instantiate, bool):
        instantiate = [instantiate] * len(out_unknowns)
    out_unknowns = [u or inst for u, inst in zip(out_unknowns, instantiate)]
    # Known outputs that must be unknown: pass them through as residuals.
    for x, u, inst in zip(jaxpr.outvars, [read(x) for x in jaxpr.outvars], instantiate):
        if inst and not u:
            new_res(x)
    # Residuals that are known inputs are fine; residuals must not be unknown vars.
    residual_list = [r for r in residual_list if not env.get(r, False)]
    ins1 = [v for v, unk in zip(jaxpr.invars, in_unknowns) if not unk]
    outs1 = [x for x, unk in zip(jaxpr.outvars, out_unknowns) if not unk]
    jaxpr1 = Jaxpr([], ins1, eqns1, outs1 + residual_list)
    ins2 = [v for v, unk in zip(jaxpr.invars, in_unknowns) if unk]
    outs2 = [x for x, unk in zip(jaxpr.outvars, out_unknowns) if unk]
    jaxpr2 = Jaxpr([], residual_list + ins2, eqns2, outs2)
    return jaxpr1, jaxpr2, out_unknowns, len(residual_list)


# -------------------------------------- DCE ---------------------------------------------

# prim -> rule(used_outputs, eqn) -> (used_inputs, new_eqn | None)
dce_rules: dict = {}
# Primitives with side effects (callbacks, printing, stateful random bits): never removed
# by DCE, never merged by CSE, never constant-folded. The one registry of effects: the jit
# pipeline's passes (lowering.passes) read it too.
effectful_primitives: set = set()


def jaxpr_has_effects(jaxpr: Jaxpr) -> bool:
    """Whether an equation of ``jaxpr``, or of a jaxpr nested in one (the body of a scan,
    the branches of a cond...), binds an effectful primitive. Cached on the jaxpr, as long
    as its list of equations is the same."""
    cached = jaxpr._effects
    if cached is not None and cached[0] is jaxpr.eqns and cached[1] == len(jaxpr.eqns):
        return cached[2]
    found = any(eqn_has_effects(e) for e in jaxpr.eqns)
    jaxpr._effects = (jaxpr.eqns, len(jaxpr.eqns), found)
    return found


def eqn_has_effects(eqn: JaxprEqn) -> bool:
    """Whether ``eqn`` has side effects: its primitive is effectful, or a sub-jaxpr of its
    params has an effectful equation (a loop around an io_callback has its effect)."""
    if eqn.primitive in effectful_primitives:
        return True
    for v in eqn.params.values():
        for item in (v if isinstance(v, (tuple, list)) else (v,)):
            sub = item.jaxpr if isinstance(item, ClosedJaxpr) else item
            if isinstance(sub, Jaxpr) and jaxpr_has_effects(sub):
                return True
    return False


def dce_jaxpr(jaxpr: Jaxpr, used_outputs=None, prune_inputs: bool = False):
    """Drop equations whose outputs are unused. Returns (new jaxpr, used_inputs).
    With ``prune_inputs``, unused invars are removed too."""
    if used_outputs is None:
        used_outputs = [True] * len(jaxpr.outvars)
    outvars = [v for v, u in zip(jaxpr.outvars, used_outputs) if u]
    live = {v for v in outvars if type(v) is Var}
    new_eqns = []
    for eqn in reversed(jaxpr.eqns):
        used = [type(v) is not DropVar and v in live for v in eqn.outvars]
        effects = eqn_has_effects(eqn)
        if not any(used) and not effects:
            continue
        # an effectful equation none of whose results is used is kept whole (a rule would
        # drop it: nothing it computes is needed)
        rule = dce_rules.get(eqn.primitive) if any(used) or not effects else None
        if rule is not None:
            # used_ins lines up with the inputs of the equation given to the rule (the new
            # equation may have dropped some of them).
            old_invars = eqn.invars
            used_ins, new_eqn = rule(used, eqn)
            if new_eqn is None:
                continue
            eqn = new_eqn
            for x, u in zip(old_invars, used_ins):
                if u and type(x) is Var:
                    live.add(x)
        else:
            for x in eqn.invars:
                if type(x) is Var:
                    live.add(x)
        new_eqns.append(eqn)
    new_eqns.reverse()
    used_inputs = [v in live for v in jaxpr.invars]
    invars = [v for v, u in zip(jaxpr.invars, used_inputs) if u] if prune_inputs else jaxpr.invars
    constvars = [v for v in jaxpr.constvars if v in live] if prune_inputs else jaxpr.constvars
    return Jaxpr(constvars, invars, new_eqns, outvars), used_inputs
