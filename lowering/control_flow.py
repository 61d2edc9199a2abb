"""Lowering rules of the control-flow family (lax/control_flow.py).

``cond``, ``while`` and ``scan`` become one library call each whose function runs the
whole loop (or branch) in compiled code: their sub-jaxprs are lowered recursively through
this same pipeline into Programs (kernels, library calls, nested control flow), and
``numba_backend.control_flow`` emits them as statements of one generated Numba function,
with a real ``for``/``while`` loop or ``if``/``elif`` around them: kernels are called
directly from compiled code, carries stay in buffers, nested loops are nested loops, and
the loop count is a runtime value (the source, hence the compiled code, does not depend
on shapes). When some step of a body cannot be called from Numba (a host step, a library
call with no compiled form), the loop runs in Python around the body's compiled
Executable instead — correct, slower per iteration.

``composite`` is inlined (the spec lets a backend replace it by its decomposition) and
``optimization_barrier`` is the identity on materialized buffers (its operands are all
computed before anything reading its results, which is what the barrier promises).
"""
from __future__ import annotations

from lax import control_flow as cf
from lowering.passes import inline_rules
from lowering.rules import lowering_rules


class ControlFlowSpec:
    """What a control-flow library call runs: ``kind`` ("scan", "while", "cond"), the
    lowered sub-programs, the primitive's params, and the operand/result avals."""

    def __init__(self, kind, programs, params, in_avals, out_avals):
        self.kind = kind
        self.programs = programs
        self.params = params
        self.in_avals = tuple(in_avals)
        self.out_avals = tuple(out_avals)

    def describe(self) -> str:
        p = self.params
        if self.kind == "scan":
            return (f"scan[length={p['length']} num_consts={p['num_consts']} "
                    f"num_carry={p['num_carry']} reverse={p['reverse']}]")
        if self.kind == "while":
            return f"while[cond_nconsts={p['cond_nconsts']} body_nconsts={p['body_nconsts']}]"
        return f"cond[{len(self.programs)} branches]"


class ControlFlowCall:
    """The function of a control-flow library call: ``fn(*arrays) -> [arrays]``. Numba
    is imported only when it first runs (``numba_backend.control_flow``)."""

    def __init__(self, spec: ControlFlowSpec):
        self.spec = spec
        self.runner = None

    def __call__(self, *arrays):
        if self.runner is None:
            from numba_backend.control_flow import make_runner
            self.runner = make_runner(self.spec)
        return self.runner(arrays)

    @property
    def __name__(self):
        return self.spec.kind

    def generated_source(self) -> str:
        """The generated Numba source running this call (or why it runs in Python)."""
        from numba_backend.control_flow import describe_runner
        if self.runner is None:
            from numba_backend.control_flow import make_runner
            self.runner = make_runner(self.spec)
        return describe_runner(self.runner)


class TaggedCall:
    """A library-call function with what compiled loops need to call an equivalent from
    Numba: the primitive's name, avals and params (``dot_general`` bodies call BLAS
    directly). Calling it calls the wrapped function."""

    def __init__(self, fn, kind, in_avals, out_avals, params):
        self.fn = fn
        self.kind = kind
        self.in_avals = tuple(in_avals)
        self.out_avals = tuple(out_avals)
        self.params = params

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


class _TaggingContext:
    """A StructuredContext whose library calls carry a TaggedCall."""

    def __init__(self, ctx, kind, in_avals, out_avals, params):
        self._ctx = ctx
        self._tag = (kind, in_avals, out_avals, params)

    def library_call(self, name, fn, ins, out_avals, **static):
        kind, in_avals, o_avals, params = self._tag
        return self._ctx.library_call(name, TaggedCall(fn, kind, in_avals, o_avals, params),
                                      ins, out_avals, **static)

    def __getattr__(self, name):
        return getattr(self._ctx, name)


def _tagging(prim, kind):
    rule = lowering_rules[prim]

    def tagged_rule(ctx, in_avals, out_avals, *ins, **params):
        return rule(_TaggingContext(ctx, kind, in_avals, out_avals, params), in_avals,
                    out_avals, *ins, **params)

    tagged_rule.wrapped = rule
    lowering_rules[prim] = tagged_rule


def _lower_sub(closed):
    from lowering import pipeline
    return pipeline.lower(closed)


def _call(ctx, kind, programs, params, in_avals, out_avals, ins):
    spec = ControlFlowSpec(kind, programs, params, in_avals, out_avals)
    fn = ControlFlowCall(spec)
    return ctx.library_call(spec.describe(), fn, list(ins), out_avals)


def _scan_lower(ctx, in_avals, out_avals, *ins, jaxpr, num_consts, num_carry, length, reverse,
                unroll):
    params = dict(num_consts=num_consts, num_carry=num_carry, length=length,
                  reverse=reverse, unroll=unroll)
    return _call(ctx, "scan", [_lower_sub(jaxpr)], params, in_avals, out_avals, ins)


def _while_lower(ctx, in_avals, out_avals, *ins, cond_jaxpr, body_jaxpr, cond_nconsts,
                 body_nconsts):
    params = dict(cond_nconsts=cond_nconsts, body_nconsts=body_nconsts)
    return _call(ctx, "while", [_lower_sub(cond_jaxpr), _lower_sub(body_jaxpr)], params,
                 in_avals, out_avals, ins)


def _cond_lower(ctx, in_avals, out_avals, *ins, branches):
    return _call(ctx, "cond", [_lower_sub(b) for b in branches], {}, in_avals, out_avals, ins)


def _barrier_lower(ctx, in_avals, out_avals, *ins):
    return list(ins)


lowering_rules[cf.scan_p] = _scan_lower
lowering_rules[cf.while_p] = _while_lower
lowering_rules[cf.cond_p] = _cond_lower
lowering_rules[cf.optimization_barrier_p] = _barrier_lower
inline_rules[cf.composite_p] = lambda eqn: eqn.params["jaxpr"]

import lowering.linalg  # noqa: E402  (its rules first: modules load in name order)
from lax import linalg as _la  # noqa: E402

if not hasattr(lowering_rules[_la.dot_general_p], "wrapped"):
    _tagging(_la.dot_general_p, "dot_general")
