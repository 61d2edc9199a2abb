"""The lowering pipeline of a jitted program, top to bottom:

    ClosedJaxpr
      -> inline_calls     splice jit/closed_call sub-jaxprs into the caller
      -> optimize_subjaxprs   loop bodies and branches through this same list first
      -> dce              drop unused equations
      -> cse              merge equal equations
      -> fold_constants   scalar equations of literals become literals
      -> simplify         exact algebraic identities (x * 1, x - 0, no-op reshapes...)
      -> swap_transposed_dots   transpose(dot(a, b)) -> dot(b, a)
      -> fold_transposed_operands   dot(transpose(a), b) -> dot(a, b), dims mapped
      -> hoist_scan_products   a scan carry c += dot(x, y) -> one dot of the stacked x, y
      -> dce              drop what the previous passes made dead
      -> fuse             group equations into kernels / library calls / host steps
      -> flatten          element-wise kernels over contiguous arrays: one flat loop
      -> verify           (TRACER_VERIFY_IR=1) check the loop IR
    Program

The Program is data (``lowering.ir``); a backend turns it into source, compiled code and
an Executable. The rules each equation is lowered by are registered by the modules of
``RULE_MODULES``, imported on the first ``lower``.
"""
from __future__ import annotations

import importlib
import logging
import os

from lowering import fusion, passes, schedule, verify
from lowering.ir import Program
from tracer.jaxpr import ClosedJaxpr, Jaxpr, JaxprEqn


def optimize_subjaxprs(closed: ClosedJaxpr) -> ClosedJaxpr:
    """The bodies and branches of scan, while and cond equations through ``optimize``
    before their caller's passes: ``hoist_scan_products`` then reads a body's
    accumulations simplified (the weight gradient of a recurrent cell reaches its carry
    through two transposes that cancel), and the NumPy tier, which runs the caller's
    optimized jaxpr, runs optimized bodies too. A body keeps its invars and the number
    and avals of its outvars."""
    eqns, changed = [], False
    for eqn in closed.jaxpr.eqns:
        names = SUBJAXPR_PARAMS.get(eqn.primitive.name, ())
        params = dict(eqn.params)
        for name in names:
            sub = params.get(name)
            if isinstance(sub, ClosedJaxpr):
                params[name] = optimize(sub)
            elif isinstance(sub, (tuple, list)) and all(isinstance(b, ClosedJaxpr) for b in sub):
                params[name] = type(sub)(optimize(b) for b in sub)
        if names:
            eqn = JaxprEqn(eqn.primitive, eqn.invars, params, eqn.outvars)
            changed = True
        eqns.append(eqn)
    if not changed:
        return closed
    j = closed.jaxpr
    return ClosedJaxpr(Jaxpr(j.constvars, j.invars, eqns, j.outvars), closed.consts)


# primitive name -> its params holding sub-jaxprs that ``optimize_subjaxprs`` optimizes
SUBJAXPR_PARAMS = {"scan": ("jaxpr",), "while": ("cond_jaxpr", "body_jaxpr"),
                   "cond": ("branches",)}

JAXPR_PASSES = (
    passes.inline_calls,
    optimize_subjaxprs,
    passes.dce,
    passes.cse,
    passes.fold_constants,
    passes.simplify,
    passes.swap_transposed_dots,
    passes.fold_transposed_operands,
    passes.hoist_scan_products,
    passes.dce,
)

# The modules of this package that register lowering rules (``lowering.rules``), one per
# family of primitives. A new family module must be listed here (tests/lowering/
# test_layering.py checks that every module of the package is either listed or one of
# the pipeline's own).
RULE_MODULES = (
    "elementwise", "integer_ops", "special", "special_extra", "shapes", "indexing",
    "reductions", "linalg", "convolution", "windowed", "sort", "random_bits",
    "control_flow", "solves", "tokens", "ffi",
)

_rules_loaded = False


failed_rule_modules: dict = {}


def load_rule_modules() -> None:
    """Import every module of ``RULE_MODULES`` once: each registers its rules. A module
    that fails to import is reported (``failed_rule_modules``, a logged warning); its
    primitives then run as host steps, the rest of jit keeps working."""
    global _rules_loaded
    if _rules_loaded:
        return
    for name in RULE_MODULES:
        try:
            importlib.import_module(f"lowering.{name}")
        except Exception as e:
            failed_rule_modules[name] = e
            logging.getLogger("tracer").warning(
                "tracer: lowering rules in lowering/%s.py failed to load (%s: %s); its "
                "primitives run as host steps", name, type(e).__name__, e)
    _rules_loaded = True


def optimize(closed: ClosedJaxpr) -> ClosedJaxpr:
    for p in JAXPR_PASSES:
        closed = p(closed)
    return closed


def lower(closed: ClosedJaxpr) -> Program:
    """ClosedJaxpr -> Program (see the module docstring)."""
    load_rule_modules()
    opt = optimize(closed)
    program = fusion.fuse(opt)
    program = schedule.flatten(program)
    if os.environ.get("TRACER_VERIFY_IR", "") not in ("", "0"):
        verify.check_program(program)
    return program
