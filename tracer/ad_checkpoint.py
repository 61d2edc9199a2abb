"""Rematerialization: ``checkpoint`` (alias ``remat``), ``checkpoint_policies`` and
``checkpoint_name`` (JAX's ``jax.checkpoint`` / ``jax.ad_checkpoint``).

``checkpoint(f)`` stages ``f`` as one ``checkpoint`` equation holding its jaxpr. Its
partial-evaluation rule is what makes it a checkpoint: when reverse mode splits the jvp of
``f`` into a known (primal) part, run now, and an unknown (linear) part, kept for the
backward pass, the unknown part does not receive ``f``'s intermediate values as residuals;
it keeps ``f``'s inputs and recomputes the intermediates it needs on the backward pass.
A ``policy(prim, *avals, **params) -> bool`` names the intermediates that may be saved
instead (e.g. ``checkpoint_policies.dots_saveable``).
"""
from __future__ import annotations

import functools
import operator
from typing import Callable

from tracer.core import Primitive, get_aval
from tracer.interpreters import ad, batching
from tracer.interpreters import partial_eval as pe
from tracer.interpreters.ad import Zero
from tracer.interpreters.call import _call_dce, batch_jaxpr
from tracer.jaxpr import ClosedJaxpr, Jaxpr, JaxprEqn, Literal, Var, eval_jaxpr
from tracer.pytree import flatten_fun, tree_flatten, tree_unflatten

__all__ = ["checkpoint", "remat", "checkpoint_policies", "checkpoint_name", "checkpoint_p",
           "name_p"]


def checkpoint(fun: Callable | None = None, *, prevent_cse: bool = True, policy=None,
               static_argnums=()):
    """``fun`` made rematerializing for reverse mode (``jax.checkpoint``, alias ``remat``):
    under grad/vjp/linearize its intermediate values are recomputed on the backward pass
    from the saved inputs instead of being stored. Values and derivatives are unchanged.

    Args:
      fun: the function (arrays or pytrees of arrays in and out). Usable as
        ``@checkpoint`` or ``@partial(checkpoint, policy=...)``.
      prevent_cse: kept as a param of the ``checkpoint`` equation for the compiler (which
        must not merge a rematerialized computation with the original).
      policy: None (save nothing but the inputs) or ``policy(prim, *avals, **params) ->
        bool`` telling which intermediates may be saved (see ``checkpoint_policies``).
      static_argnums: an int or ints: positional arguments passed as Python values (not
        traced).

    Returns:
      A function with ``fun``'s signature and results. Without a transformation it calls
      ``fun``; under one it stages ``fun`` as one ``checkpoint`` equation.

    Raises:
      TypeError: ``fun`` not callable, ``static_argnums`` not ints.
      ValueError: a ``static_argnums`` entry out of range for the call.
    """
    if fun is None:
        return lambda f: checkpoint(f, prevent_cse=prevent_cse, policy=policy,
                                    static_argnums=static_argnums)
    if isinstance(static_argnums, int):
        static_argnums = (static_argnums,)
    static_argnums = tuple(operator.index(i) for i in static_argnums)

    if not callable(fun):
        raise TypeError(f"checkpoint: expected a callable value, got {fun!r:.100} of type "
                        f"{type(fun).__name__}")

    @functools.wraps(fun)
    def remat_f(*args, **kwargs):
        nargs = len(args)
        for i in static_argnums:   # checked eagerly too, as JAX does
            if not -nargs <= i < nargs:
                raise ValueError(f"checkpoint({getattr(fun, '__name__', fun)}): "
                                 f"static_argnums entry {i} is out of range for a call with "
                                 f"{nargs} positional arguments")
        if ad.no_transformation_active():
            return fun(*args, **kwargs)
        static = {i % nargs for i in static_argnums}
        dyn = [a for i, a in enumerate(args) if i not in static]
        leaves, in_tree = tree_flatten((dyn, kwargs))

        def with_static(*d, **kw):
            it = iter(d)
            return fun(*[args[i] if i in static else next(it) for i in range(nargs)], **kw)

        flat_fun, out = flatten_fun(with_static, in_tree, kwargs=True)
        closed, hoisted = ad.trace_to_call_jaxpr(flat_fun, [get_aval(x) for x in leaves])
        outs = checkpoint_p.bind(*hoisted, *leaves, jaxpr=closed, prevent_cse=prevent_cse,
                                 differentiated=False, policy=policy)
        return tree_unflatten(out.tree, outs)

    return remat_f


remat = checkpoint


# ------------------------------------- policies -----------------------------------------

def _is_dot(prim):
    return prim.name == "dot_general"


class checkpoint_policies:
    """Policies for ``checkpoint(policy=...)``: which intermediates may be saved."""

    @staticmethod
    def everything_saveable(prim, *avals, **params):
        return True

    @staticmethod
    def nothing_saveable(prim, *avals, **params):
        return False

    @staticmethod
    def dots_saveable(prim, *avals, **params):
        return _is_dot(prim)

    checkpoint_dots = dots_saveable

    @staticmethod
    def dots_with_no_batch_dims_saveable(prim, *avals, **params):
        if not _is_dot(prim):
            return False
        dn = params.get("dimension_numbers")
        try:
            (_, _), (lhs_b, rhs_b) = dn
        except (TypeError, ValueError):
            return False
        return not lhs_b and not rhs_b

    checkpoint_dots_with_no_batch_dims = dots_with_no_batch_dims_saveable

    @staticmethod
    def save_only_these_names(*names):
        names = set(names)
        return lambda prim, *avals, **params: prim is name_p and params["name"] in names

    @staticmethod
    def save_anything_except_these_names(*names):
        names = set(names)
        return lambda prim, *avals, **params: not (prim is name_p and params["name"] in names)


# --------------------------------- checkpoint_name --------------------------------------

name_p = Primitive("name")
name_p.def_abstract_eval(lambda x, *, name: x)
name_p.def_impl(lambda x, *, name: x)


def checkpoint_name(x, name: str):
    """``x`` unchanged, labelled ``name`` for the ``save_only_these_names`` /
    ``save_anything_except_these_names`` policies (``jax.ad_checkpoint.checkpoint_name``)."""
    from tracer.pytree import tree_map
    return tree_map(lambda v: name_p.bind(v, name=name), x)


def _name_jvp(primals, tangents, *, name):
    return [name_p.bind(primals[0], name=name)], [tangents[0]]


ad.primitive_jvps[name_p] = _name_jvp
ad.primitive_transposes[name_p] = lambda cts, x, *, name: [cts[0]]
batching.primitive_batchers[name_p] = lambda axis_data, vals, dims, *, name: (
    [name_p.bind(vals[0], name=name)], [dims[0]])


# ------------------------------------ the primitive -------------------------------------

def _checkpoint_abstract_eval(*avals, jaxpr, **_):
    if len(avals) != len(jaxpr.in_avals):
        raise TypeError(f"checkpoint: {len(avals)} operands for a jaxpr of "
                        f"{len(jaxpr.in_avals)}")
    return list(jaxpr.out_avals)


def _checkpoint_impl(*args, jaxpr, **_):
    return eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *args)


def _jvp_jaxpr(closed: ClosedJaxpr, nonzeros):
    """(jvp jaxpr over primals and nonzero tangents returning primals and the nonzero
    output tangents, mask of the nonzero output tangents)."""
    in_avals = closed.in_avals
    n = len(in_avals)
    out_nz: list = []

    def fun(*args):
        it = iter(args[n:])
        tans = [next(it) if nz else Zero(a.at_least_vspace())
                for a, nz in zip(in_avals, nonzeros)]
        outs, t_outs = ad.jvp_flat(lambda *xs: eval_jaxpr(closed.jaxpr, closed.consts, *xs),
                                   list(args[:n]), tans, instantiate=False)
        out_nz[:] = [type(t) is not Zero for t in t_outs]
        return [*outs, *[t for t in t_outs if type(t) is not Zero]]

    t_avals = [a.at_least_vspace().strip_weak_type() for a, nz in zip(in_avals, nonzeros) if nz]
    return pe.trace_to_closed_jaxpr(fun, list(in_avals) + t_avals), out_nz


def _checkpoint_jvp(primals, tangents, *, jaxpr, **params):
    nonzeros = [type(t) is not Zero for t in tangents]
    if not any(nonzeros):
        outs = checkpoint_p.bind(*primals, jaxpr=jaxpr, **params)
        return outs, [Zero.from_primal_value(o) for o in outs]
    new, out_nz = _jvp_jaxpr(jaxpr, nonzeros)
    outs = checkpoint_p.bind(*primals, *[t for t in tangents if type(t) is not Zero],
                             jaxpr=new, **params)
    m = len(jaxpr.out_avals)
    it = iter(outs[m:])
    return outs[:m], [next(it) if nz else Zero(a.at_least_vspace())
                      for a, nz in zip(jaxpr.out_avals, out_nz)]


def _checkpoint_batch(axis_data, vals, dims, *, jaxpr, **params):
    if all(d is None for d in dims) and (
            axis_data.name is None or
            axis_data.name not in batching.jaxpr_axis_names(jaxpr.jaxpr)):
        outs = checkpoint_p.bind(*vals, jaxpr=jaxpr, **params)
        return outs, [None] * len(outs)
    new, dims_out = batch_jaxpr(jaxpr, axis_data.size, dims, axis_data.name, axis_data.group)
    return checkpoint_p.bind(*vals, jaxpr=new, **params), dims_out


class _RematSplit:
    """The known/unknown split of a checkpointed jaxpr (constvars count as known):
    ``known_eqns`` compute the known outputs and the ``saved`` residuals; the unknown part
    runs ``recompute_eqns`` (known intermediates rebuilt from known inputs) then
    ``unknown_eqns``, taking ``saved`` + ``known_used`` (known invars/constvars) + the
    unknown invars."""

    def __init__(self, jaxpr: Jaxpr, in_unknowns, policy):
        unk: dict = {}
        producer: dict = {}
        for v in jaxpr.constvars:
            unk[v] = False
        for v, u in zip(jaxpr.invars, in_unknowns):
            unk[v] = u
        known_eqns, unknown_eqns = [], []
        for eqn in jaxpr.eqns:
            uks = [type(x) is Var and unk[x] for x in eqn.invars]
            rule = pe.partial_eval_jaxpr_rules.get(eqn.primitive)
            if any(uks) and not all(uks) and rule is not None:
                # an equation with sub-jaxprs (cond, scan, ...) computes known outputs from
                # known inputs too: its own rule splits it, so a primal computed beside a
                # tangent stays known
                eqn1, eqn2, out_uk, _ = rule(uks, eqn)
                if eqn1 is not None:
                    known_eqns.append(eqn1)
                    for v in eqn1.outvars:
                        unk[v] = False
                        producer[v] = eqn1
                unknown_eqns.append(eqn2)
                for v, u in zip(eqn.outvars, out_uk):
                    unk[v] = u
                continue
            if any(uks):
                unknown_eqns.append(eqn)
                for v in eqn.outvars:
                    unk[v] = True
            else:
                known_eqns.append(eqn)
                for v in eqn.outvars:
                    unk[v] = False
                    producer[v] = eqn
        self.out_unknowns = [type(x) is Var and unk[x] for x in jaxpr.outvars]
        needed = [x for e in unknown_eqns for x in e.invars if type(x) is Var and not unk[x]]
        boundary = set(jaxpr.constvars) | set(jaxpr.invars)
        saved, known_used, recompute, seen = [], set(), set(), set()
        while needed:
            v = needed.pop()
            if v in seen:
                continue
            seen.add(v)
            if v in boundary:
                known_used.add(v)
                continue
            e = producer[v]
            if policy is not None and policy(e.primitive, *[_aval(x) for x in e.invars],
                                             **e.params):
                saved.append(v)
                continue
            if id(e) in recompute:
                continue
            recompute.add(id(e))
            needed.extend(x for x in e.invars if type(x) is Var)
        self.saved = saved
        self.known_constvars = [v for v in jaxpr.constvars if v in known_used]
        self.known_invars = [v for v, u in zip(jaxpr.invars, in_unknowns)
                             if not u and v in known_used]
        self.recompute_eqns = [e for e in known_eqns if id(e) in recompute]
        self.unknown_eqns = unknown_eqns
        known_outs = [x for x, u in zip(jaxpr.outvars, self.out_unknowns) if not u]
        ins1 = [v for v, u in zip(jaxpr.invars, in_unknowns) if not u]
        j1 = Jaxpr(jaxpr.constvars, ins1, known_eqns, known_outs + saved)
        self.jaxpr_known, _ = pe.dce_jaxpr(j1)
        unk_ins = [v for v, u in zip(jaxpr.invars, in_unknowns) if u]
        self.jaxpr_unknown = Jaxpr(self.known_constvars,
                                   saved + self.known_invars + unk_ins,
                                   self.recompute_eqns + unknown_eqns,
                                   [x for x, u in zip(jaxpr.outvars, self.out_unknowns) if u])


def _aval(x):
    return x.aval


def _checkpoint_partial_eval(trace, tracers, *, jaxpr, prevent_cse, differentiated, policy):
    unknowns = [t.pval.is_unknown for t in tracers]
    split = _RematSplit(jaxpr.jaxpr, unknowns, policy)
    params = dict(prevent_cse=prevent_cse, policy=policy)
    consts = dict(zip(jaxpr.jaxpr.constvars, jaxpr.consts))
    known_vals = [t.pval.const for t in tracers if t.pval.is_known]
    outs1 = checkpoint_p.bind(*known_vals, jaxpr=ClosedJaxpr(split.jaxpr_known, jaxpr.consts),
                              differentiated=differentiated, **params)
    n_known = len(outs1) - len(split.saved)
    known_outs, saved = outs1[:n_known], outs1[n_known:]
    by_var = dict(zip(jaxpr.jaxpr.invars, tracers))

    def known_tracer(v):
        return trace.instantiate_const(pe.PartialEvalTracer(trace, pe.PartialVal.known(v),
                                                            None))

    tracers_in = ([known_tracer(s) for s in saved] +
                  [trace.instantiate_const(by_var[v]) for v in split.known_invars] +
                  [trace.instantiate_const(t) for t in tracers if t.pval.is_unknown])
    closed2 = ClosedJaxpr(split.jaxpr_unknown, [consts[v] for v in split.known_constvars])
    avals_out = [v.aval for v in split.jaxpr_unknown.outvars]
    outs2 = [pe.PartialEvalTracer(trace, pe.PartialVal.unknown(a), None) for a in avals_out]
    eqn_params = dict(params, jaxpr=closed2, differentiated=True)
    recipe = pe.JaxprEqnRecipe(checkpoint_p, tracers_in, eqn_params, avals_out,
                               [pe._WeakRef(t) for t in outs2])
    for t in outs2:
        t.recipe = recipe
    it1, it2 = iter(known_outs), iter(outs2)
    return [next(it2) if u else pe.PartialEvalTracer(trace, pe.PartialVal.known(next(it1)),
                                                      None)
            for u in split.out_unknowns]


def _checkpoint_partial_eval_jaxpr(unks_in, eqn):
    closed = eqn.params["jaxpr"]
    policy = eqn.params["policy"]
    split = _RematSplit(closed.jaxpr, unks_in, policy)
    consts = dict(zip(closed.jaxpr.constvars, closed.consts))
    params = {k: v for k, v in eqn.params.items() if k not in ("jaxpr", "differentiated")}
    known_outvars = [v for v, u in zip(eqn.outvars, split.out_unknowns) if not u]
    saved_vars = [Var(v.aval) for v in split.saved]
    eqn1 = JaxprEqn(checkpoint_p, [x for x, u in zip(eqn.invars, unks_in) if not u],
                    dict(params, jaxpr=ClosedJaxpr(split.jaxpr_known, closed.consts),
                         differentiated=eqn.params["differentiated"]),
                    known_outvars + saved_vars)
    outer = dict(zip(closed.jaxpr.invars, eqn.invars))
    known_in_outer = [outer[v] for v in split.known_invars]
    ins2 = saved_vars + known_in_outer + [x for x, u in zip(eqn.invars, unks_in) if u]
    closed2 = ClosedJaxpr(split.jaxpr_unknown, [consts[v] for v in split.known_constvars])
    eqn2 = JaxprEqn(checkpoint_p, ins2, dict(params, jaxpr=closed2, differentiated=True),
                    [v for v, u in zip(eqn.outvars, split.out_unknowns) if u])
    res = saved_vars + [x for x in known_in_outer if type(x) is not Literal]
    return eqn1, eqn2, split.out_unknowns, res


def _checkpoint_transpose(cts, *args, jaxpr, **_):
    # The backward pass evaluates the equations that do not touch the linear inputs (the
    # recomputed primal intermediates) before transposing the linear ones.
    open_jaxpr = pe.convert_constvars_jaxpr(jaxpr.jaxpr)
    cts_in = iter(ad.backward_pass(open_jaxpr, list(jaxpr.consts) + list(args), cts))
    return [next(cts_in) if ad.is_undefined_primal(a) else None for a in args]


def _stage(trace, tracers, **params):
    avals = _checkpoint_abstract_eval(*[t.aval for t in tracers], **params)
    return trace.emit(checkpoint_p, tracers, params, avals)


checkpoint_p = Primitive("checkpoint")
checkpoint_p.multiple_results = True
checkpoint_p.def_abstract_eval(_checkpoint_abstract_eval)
checkpoint_p.def_impl(_checkpoint_impl)
ad.primitive_jvps[checkpoint_p] = _checkpoint_jvp
ad.primitive_transposes[checkpoint_p] = _checkpoint_transpose
batching.primitive_batchers[checkpoint_p] = _checkpoint_batch
batching.batch_when_unmapped.add(checkpoint_p)
pe.custom_staging_rules[checkpoint_p] = _stage
pe.partial_eval_rules[checkpoint_p] = _checkpoint_partial_eval
pe.partial_eval_jaxpr_rules[checkpoint_p] = _checkpoint_partial_eval_jaxpr
pe.dce_rules[checkpoint_p] = _call_dce
