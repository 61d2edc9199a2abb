"""Call primitives: equations that hold a closed sub-jaxpr and apply it to their operands.

``jit_p`` (printed ``jit[name=f jaxpr={...}]``) is what a ``tracer.jit``-decorated function
binds; ``closed_call_p`` is a plain call that stays one equation. Both share the rules
below: abstract eval from the sub-jaxpr, jvp and batching by transforming the sub-jaxpr,
partial evaluation by splitting it (known part runs now, unknown part is staged),
transposition by transposing it, and DCE. The impl of ``jit_p`` (compile and run) is
installed by the public API once the backend is importable; until then it interprets.
"""
from __future__ import annotations

from tracer.core import Primitive, ShapedArray, get_aval
from tracer.interpreters import ad, batching
from tracer.interpreters import partial_eval as pe
from tracer.interpreters.ad import Zero
from tracer.jaxpr import (ClosedJaxpr, Jaxpr, JaxprEqn, Var, _pp_eqn_doc, eval_jaxpr,
                          pp_eqn_rules)


def _abstract_eval(*avals, jaxpr: ClosedJaxpr, **params):
    expected = jaxpr.in_avals
    if len(avals) != len(expected):
        raise TypeError(f"call: the sub-jaxpr takes {len(expected)} operands, got {len(avals)}")
    for i, (a, e) in enumerate(zip(avals, expected)):
        if a.shape != e.shape or a.dtype != e.dtype:
            raise TypeError(f"call: operand {i} has type {a.str_short()}, the sub-jaxpr expects "
                            f"{e.str_short()}")
    return list(jaxpr.out_avals)


def _interpret(*args, jaxpr: ClosedJaxpr, **params):
    return eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *args)


class CallPrimitive(Primitive):
    """A call primitive. Its ``bind`` also reaches a vmap whose axis name a collective in
    the sub-jaxpr uses, even when no operand is batched by it (``jit(lambda:
    lax.axis_index('i'))()`` inside ``vmap(..., axis_name='i')``)."""

    multiple_results = True

    def bind(self, *args, jaxpr, **params):
        params = dict(params, jaxpr=jaxpr)
        if batching.bound_axis_names():
            names = batching.jaxpr_axis_names(jaxpr.jaxpr)
            if names:
                return batching.bind_with_axes(self, args, params, sorted(names, key=repr),
                                               self.name, strict=False)
        return Primitive.bind(self, *args, **params)


def make_call_primitive(name: str) -> Primitive:
    p = CallPrimitive(name)
    p.def_abstract_eval(_abstract_eval)
    p.def_impl(_interpret)
    ad.primitive_jvps[p] = lambda primals, tangents, **params: _call_jvp(p, primals, tangents,
                                                                         **params)
    ad.primitive_transposes[p] = lambda cts, *args, **params: _call_transpose(p, cts, *args,
                                                                              **params)
    batching.primitive_batchers[p] = lambda axis_data, vals, dims, **params: _call_batch(
        p, axis_data, vals, dims, **params)
    batching.batch_when_unmapped.add(p)
    pe.partial_eval_rules[p] = lambda trace, tracers, **params: _call_partial_eval(
        p, trace, tracers, **params)
    pe.partial_eval_jaxpr_rules[p] = lambda unks, eqn: _call_partial_eval_jaxpr(p, unks, eqn)
    pe.dce_rules[p] = _call_dce
    return p


# ------------------------------------------ jvp -------------------------------------------

def jvp_jaxpr(closed: ClosedJaxpr, nonzeros):
    """A closed jaxpr computing (primals_out, tangents_out) from (primals, nonzero
    tangents); all output tangents are instantiated. Memoised per (jaxpr, nonzeros)."""
    key = ("jvp", tuple(nonzeros))
    hit = closed.memo.get(key)
    if hit is None:
        hit = closed.memo[key] = _jvp_jaxpr(closed, nonzeros)
    return hit


def _jvp_jaxpr(closed: ClosedJaxpr, nonzeros):
    in_avals = closed.in_avals
    t_avals = [a.at_least_vspace().strip_weak_type() for a, nz in zip(in_avals, nonzeros) if nz]
    n = len(in_avals)

    def fun(*args):
        primals, nz_tans = args[:n], iter(args[n:])
        tans = [next(nz_tans) if nz else Zero(a.at_least_vspace())
                for a, nz in zip(in_avals, nonzeros)]
        outs, t_outs = ad.jvp_flat(lambda *xs: eval_jaxpr(closed.jaxpr, closed.consts, *xs),
                                   primals, tans, instantiate=True)
        return [*outs, *t_outs]

    return pe.trace_to_closed_jaxpr(fun, list(in_avals) + t_avals)


def _call_jvp(p, primals, tangents, *, jaxpr, **params):
    nonzeros = [type(t) is not Zero for t in tangents]
    new = jvp_jaxpr(jaxpr, nonzeros)
    nz_tans = [t for t in tangents if type(t) is not Zero]
    outs = p.bind(*primals, *nz_tans, jaxpr=new, **params)
    m = len(jaxpr.out_avals)
    return outs[:m], outs[m:]


# ---------------------------------------- batching ----------------------------------------

def batch_jaxpr(closed: ClosedJaxpr, axis_size, dims_in, axis_name=None, group=None):
    """Batch a closed jaxpr: ``(new_closed, dims_out)`` where ``new_closed`` takes the
    operands batched along ``dims_in`` (None: unmapped) and returns each output batched
    along axis 0, or unmapped (``dims_out`` entry None) when it does not depend on the
    mapped operands. ``axis_name`` names the axis for collectives inside; ``group`` is its
    process group (``AxisData.group``) when it is a multi-process pmap axis."""
    in_avals = []
    for a, d in zip(closed.in_avals, dims_in):
        if d is None:
            in_avals.append(a)
        else:
            shape = list(a.shape)
            shape.insert(d, axis_size)
            in_avals.append(a.update(shape=tuple(shape)))
    dims_out: list = []

    def fun(*args):
        outs, out_dims = batching.vmap_flat(
            lambda *xs: eval_jaxpr(closed.jaxpr, closed.consts, *xs), axis_size, axis_name,
            dims_in, args, group)
        dims_out[:] = [None if d is None else 0 for d in out_dims]
        return [o if d is None else batching.moveaxis(o, d, 0) for o, d in zip(outs, out_dims)]

    new = pe.trace_to_closed_jaxpr(fun, in_avals)
    return new, dims_out


def _call_batch(p, axis_data, vals, dims, *, jaxpr, **params):
    if all(d is None for d in dims) and (
            axis_data.name is None or axis_data.name not in batching.jaxpr_axis_names(
                jaxpr.jaxpr)):
        outs = p.bind(*vals, jaxpr=jaxpr, **params)
        return outs, [None] * len(outs)
    new, dims_out = batch_jaxpr(jaxpr, axis_data.size, dims, axis_data.name, axis_data.group)
    outs = p.bind(*vals, jaxpr=new, **params)
    return outs, dims_out


# ----------------------------------- partial evaluation ----------------------------------

def _closed_from_open(jaxpr: Jaxpr) -> ClosedJaxpr:
    return ClosedJaxpr(jaxpr, [])


def _inline_consts(closed: ClosedJaxpr) -> tuple[Jaxpr, list]:
    """(jaxpr taking consts as leading invars, consts)."""
    return pe.convert_constvars_jaxpr(closed.jaxpr), list(closed.consts)


def _split_jaxpr(closed: ClosedJaxpr, in_unknowns):
    """partial_eval_jaxpr of a call's jaxpr (consts as leading known inputs), memoised."""
    key = ("pe", tuple(in_unknowns))
    hit = closed.memo.get(key)
    if hit is None:
        open_jaxpr, _ = _inline_consts(closed)
        jaxpr1, jaxpr2, out_unknowns, num_res = pe.partial_eval_jaxpr(open_jaxpr, in_unknowns)
        hit = closed.memo[key] = (_closed_from_open(jaxpr1), jaxpr2, out_unknowns, num_res)
    return hit


def _call_partial_eval(p, trace, tracers, *, jaxpr, **params):
    consts = jaxpr.consts
    in_unknowns = [False] * len(consts) + [t.pval.is_unknown for t in tracers]
    closed1, jaxpr2, out_unknowns, num_res = _split_jaxpr(jaxpr, in_unknowns)
    known_vals = list(consts) + [t.pval.const for t in tracers if t.pval.is_known]
    outs1_res = p.bind(*known_vals, jaxpr=closed1, **params)
    n_known_out = len(outs1_res) - num_res
    outs1, res = outs1_res[:n_known_out], outs1_res[n_known_out:]
    res_tracers = [trace.instantiate_const(pe.PartialEvalTracer(
        trace, pe.PartialVal.known(r), None)) for r in res]
    unk_tracers = [trace.instantiate_const(t) for t in tracers if t.pval.is_unknown]
    tracers_in = res_tracers + unk_tracers
    closed2 = jaxpr.memo.get(("pe2", tuple(in_unknowns)))
    if closed2 is None:
        closed2 = jaxpr.memo[("pe2", tuple(in_unknowns))] = _closed_from_open(jaxpr2)
    outs2 = [pe.PartialEvalTracer(trace, pe.PartialVal.unknown(v.aval), None)
             for v in jaxpr2.outvars]
    eqn_params = dict(params, jaxpr=closed2)
    recipe = pe.JaxprEqnRecipe(p, tracers_in, eqn_params, [v.aval for v in jaxpr2.outvars],
                               [pe._WeakRef(t) for t in outs2])
    for t in outs2:
        t.recipe = recipe
    outs1_iter, outs2_iter = iter(outs1), iter(outs2)
    return [next(outs2_iter) if unk else pe.PartialEvalTracer(
        trace, pe.PartialVal.known(next(outs1_iter)), None) for unk in out_unknowns]


def _call_partial_eval_jaxpr(p, unks_in, eqn):
    closed = eqn.params["jaxpr"]
    nconsts = len(closed.consts)
    jaxpr1, jaxpr2, out_unknowns, num_res = pe.partial_eval_jaxpr(
        pe.convert_constvars_jaxpr(closed.jaxpr), [False] * nconsts + list(unks_in))
    params = {k: v for k, v in eqn.params.items() if k != "jaxpr"}
    # The known half closes over the consts again; the unknown half gets what it needs of
    # them as residuals.
    c1 = ClosedJaxpr(Jaxpr(jaxpr1.invars[:nconsts], jaxpr1.invars[nconsts:], jaxpr1.eqns,
                           jaxpr1.outvars), closed.consts)
    ins1 = [x for x, u in zip(eqn.invars, unks_in) if not u]
    out_known_vars = [v for v, u in zip(eqn.outvars, out_unknowns) if not u]
    res_vars = [Var(v.aval) for v in jaxpr1.outvars[len(jaxpr1.outvars) - num_res:]]
    eqn1 = JaxprEqn(p, ins1, dict(params, jaxpr=c1), out_known_vars + res_vars)
    ins2 = res_vars + [x for x, u in zip(eqn.invars, unks_in) if u]
    out_unk_vars = [v for v, u in zip(eqn.outvars, out_unknowns) if u]
    eqn2 = JaxprEqn(p, ins2, dict(params, jaxpr=_closed_from_open(jaxpr2)), out_unk_vars)
    return eqn1, eqn2, out_unknowns, res_vars


# ---------------------------------------- transpose ---------------------------------------

def _call_transpose(p, cts, *args, jaxpr, **params):
    undef = [ad.is_undefined_primal(a) for a in args]
    res = [a for a in args if not ad.is_undefined_primal(a)]
    ct_avals = [a.at_least_vspace().strip_weak_type() for a in jaxpr.out_avals]
    nonzero_cts = [type(c) is not Zero for c in cts]
    res_avals = [get_aval(r) for r in res]
    lin_avals = [a.aval for a in args if ad.is_undefined_primal(a)]

    def fun(*flat):
        res_vals = flat[:len(res)]
        ct_vals = iter(flat[len(res):])
        it = iter(res_vals)
        call_args = [ad.UndefinedPrimal(a.aval) if u else next(it) for a, u in zip(args, undef)]
        call_cts = [next(ct_vals) if nz else Zero(a) for a, nz in zip(ct_avals, nonzero_cts)]
        open_jaxpr, consts = _inline_consts(jaxpr)
        outs = ad.backward_pass(open_jaxpr, list(consts) + call_args, call_cts)
        return [ad.instantiate_zeros(o) for o in outs]

    key = ("transpose", tuple(undef), tuple(nonzero_cts), tuple(res_avals))
    t_jaxpr = jaxpr.memo.get(key)
    if t_jaxpr is None:
        t_jaxpr = jaxpr.memo[key] = pe.trace_to_closed_jaxpr(
            fun, res_avals + [a for a, nz in zip(ct_avals, nonzero_cts) if nz])
    del lin_avals
    outs = p.bind(*res, *[c for c in cts if type(c) is not Zero], jaxpr=t_jaxpr, **params)
    outs = iter(outs)
    return [next(outs) if u else None for u in undef]


# ------------------------------------------- DCE ------------------------------------------

def _call_dce(used_outputs, eqn):
    closed = eqn.params["jaxpr"]
    new_jaxpr, used_inputs = pe.dce_jaxpr(closed.jaxpr, used_outputs, prune_inputs=True)
    new_closed = ClosedJaxpr(new_jaxpr, [c for c, v in zip(closed.consts, closed.jaxpr.constvars)
                                         if v in set(new_jaxpr.constvars)])
    invars = [x for x, u in zip(eqn.invars, used_inputs) if u]
    outvars = [v for v, u in zip(eqn.outvars, used_outputs) if u]
    new_eqn = JaxprEqn(eqn.primitive, invars, dict(eqn.params, jaxpr=new_closed), outvars)
    return used_inputs, new_eqn


jit_p = make_call_primitive("jit")
closed_call_p = make_call_primitive("closed_call")


def _pp_call_eqn(eqn, names):
    # name= first, the easier to scan, and the sub-jaxpr's inputs and outputs named like
    # the equation's (JAX prints its jit equations this way).
    sub = eqn.params.get("jaxpr")
    if isinstance(sub, ClosedJaxpr) and sub.jaxpr not in getattr(names, "shared", {}):
        names.suggest_same(sub.jaxpr.invars, eqn.invars)
        names.suggest_same(sub.jaxpr.outvars, eqn.outvars)
    rest = sorted(k for k in eqn.params if k != "name")
    return _pp_eqn_doc(eqn, names, params=(["name"] if "name" in eqn.params else []) + rest)


pp_eqn_rules[jit_p] = pp_eqn_rules[closed_call_p] = _pp_call_eqn
