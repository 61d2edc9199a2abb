"""Lowering rules of the control-flow family (lax/control_flow.py).

``cond``, ``while`` and ``scan`` become one library call each, of kind "cond", "while" or
"scan", whose static param ``spec`` (a ``lowering.ir.ControlFlowSpec``) holds the lowered
Programs of their sub-jaxprs (lowered recursively through this same pipeline: kernels,
library calls, nested control flow) and the primitive's params. The backend runs the
whole loop (or branch) in compiled code where it can: the Numba backend emits the
sub-programs as statements of one generated function, with a real ``for``/``while``
loop or ``if``/``elif`` around them (kernels called directly from compiled code, carries
in buffers, nested loops as nested loops, ``dot_general`` through BLAS, the loop count a
runtime value); when some step of a body has no compiled form (a host step, another
library call) the loop runs in Python around the body's compiled Executable instead.

``composite`` is inlined (the spec lets a backend replace it by its decomposition) and
``optimization_barrier`` is the identity on materialized buffers (its operands are all
computed before anything reading its results, which is what the barrier promises).
"""
from __future__ import annotations

from lax import control_flow as cf
from lax import mpi
from lowering.ir import ControlFlowSpec
from lowering.passes import inline_rules
from lowering.rules import lowering_rules


def _call(ctx, kind, programs, params, in_avals, out_avals, ins):
    spec = ControlFlowSpec(kind, programs, params, in_avals, out_avals)
    return ctx.library_call(spec.describe(), kind, list(ins), out_avals, spec=spec)


def _scan_lower(ctx, in_avals, out_avals, *ins, jaxpr, num_consts, num_carry, length, reverse,
                unroll):
    params = dict(num_consts=num_consts, num_carry=num_carry, length=length,
                  reverse=reverse, unroll=unroll)
    return _call(ctx, "scan", [ctx.lower_subjaxpr(jaxpr)], params, in_avals, out_avals, ins)


def _while_lower(ctx, in_avals, out_avals, *ins, cond_jaxpr, body_jaxpr, cond_nconsts,
                 body_nconsts):
    params = dict(cond_nconsts=cond_nconsts, body_nconsts=body_nconsts)
    programs = [ctx.lower_subjaxpr(cond_jaxpr), ctx.lower_subjaxpr(body_jaxpr)]
    return _call(ctx, "while", programs, params, in_avals, out_avals, ins)


def _cond_lower(ctx, in_avals, out_avals, *ins, branches):
    programs = [ctx.lower_subjaxpr(b) for b in branches]
    return _call(ctx, "cond", programs, {}, in_avals, out_avals, ins)


def _barrier_lower(ctx, in_avals, out_avals, *ins):
    return list(ins)


lowering_rules[cf.scan_p] = _scan_lower
lowering_rules[cf.while_p] = _while_lower
lowering_rules[cf.cond_p] = _cond_lower
lowering_rules[cf.optimization_barrier_p] = _barrier_lower
# (the cross-process boundary identities matter to grad only: lax/mpi.py)
lowering_rules[mpi.replicated_in_p] = lambda ctx, in_avals, out_avals, x, *, group: [x]
lowering_rules[mpi.replicated_out_p] = lambda ctx, in_avals, out_avals, x, *, group: [x]
inline_rules[cf.composite_p] = lambda eqn: eqn.params["jaxpr"]
