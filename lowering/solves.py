"""Lowering of lax/solves.py. Under jit (after differentiation, which needs the four
functions of ``custom_linear_solve``) only ``solve`` remains to run: the equation is
replaced by solve's jaxpr, applied to its consts and the right-hand side, so the solver
(loops included) is compiled with the rest of the program instead of running as a host
step."""
from __future__ import annotations

from lax.solves import linear_solve_p
from lowering.passes import inline_rules
from tracer.core import new_base_main
from tracer.interpreters import partial_eval as pe
from tracer.jaxpr import eval_jaxpr


def _inline_solve(eqn):
    lengths = eqn.params["const_lengths"]
    solve = eqn.params["jaxprs"][2]
    start = lengths[0] + lengths[1]
    stop = start + lengths[2]
    n_consts = sum(lengths)

    def run(*args):
        return eval_jaxpr(solve.jaxpr, solve.consts, *args[start:stop], *args[n_consts:])

    with new_base_main():
        return pe.trace_to_closed_jaxpr(run, [v.aval for v in eqn.invars])


inline_rules[linear_solve_p] = _inline_solve
