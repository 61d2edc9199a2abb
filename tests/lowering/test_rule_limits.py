"""Rules declare the operands they do not handle (``lowering.rules.limit``) and fusion
classifies equations by those declarations: it never runs a rule to see whether it
raises, and an exception from a rule is a bug that propagates (it does not quietly turn
the equation into a host step). These tests build loop IR but compile nothing."""
import ast
import pathlib

import numpy as np
import pytest

import lax
import tracer
import tracer.numpy as tnp
from lowering import fusion, ir, pipeline, rules
from tracer.core import Primitive, ShapedArray

pipeline.load_rule_modules()


def _eqns(f, *args):
    return tracer.make_jaxpr(f)(*args).jaxpr.eqns


def _kind(eqn):
    return rules.classify(eqn.primitive, [a.aval for a in eqn.invars],
                          [v.aval for v in eqn.outvars], eqn.params)


def _steps(f, *args):
    program = pipeline.lower(tracer.make_jaxpr(f)(*args))
    return [type(s).__name__ for s in program.steps], program


def test_fusion_catches_no_exception():
    src = pathlib.Path(fusion.__file__).read_text()
    tries = [n for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Try)]
    caught = sorted((ast.unparse(h.type) if h.type is not None else "everything",
                     ast.unparse(t.body[0])) for t in tries for h in t.handlers)
    # a root that does not fit a kernel (fusion's own signal) and a buffer's first use
    assert caught == [("ValueError", "k = self.inputs.index(buffer)"),
                      ("_Conflict", "build(kb)")], \
        "fusion must classify by declared limits, not by catching what a rule raises"


@pytest.mark.parametrize("f, args, kind, reason", [
    # complex operands outside the rule's limits: the next registry, then a host step
    (tnp.exp2, (np.ones(3),), "scalar", None),
    (tnp.exp2, (np.ones(3, np.complex128),), "host", "np.exp2 of complex"),
    (lax.logistic, (np.ones(3, np.complex64),), "host", "complex logistic"),
    (lambda x: lax.bitcast_convert_type(x, np.int16), (np.ones(3, np.float32),), "host",
     "width change"),
    (lambda x: lax.bitcast_convert_type(x, np.int32), (np.ones(3, np.float32),), "scalar",
     None),
    (lambda x: lax.nextafter(x, x), (np.ones(3, np.float16),), "host",
     "float16 next_after (values are carried as float32)"),
    (lax.lgamma, (np.ones(3, np.float32),), "scalar", None),
    # dot_general: element-wise without contraction, BLAS with one
    (lambda a, b: a @ b, (np.ones((3, 1)), np.ones((1, 2))), "remap", None),
    (lambda a, b: a @ b, (np.ones((2, 3)), np.ones((3, 2))), "structured",
     "a real contraction: BLAS"),
    (lambda x: lax.reduce_window(x, 0j, lax.add, (2,), (1,), "VALID"),
     (np.ones(4, np.complex128),), "structured", None),
    (lambda x: lax.reduce_window(x, -np.inf, lax.max, (2,), (1,), "VALID"),
     (np.ones(4),), "structured", None),
])
def test_classify_follows_the_declared_limits(f, args, kind, reason):
    (eqn,) = [e for e in _eqns(f, *args) if e.primitive.name not in ("broadcast_in_dim",
                                                                      "reshape")]
    assert _kind(eqn) == kind
    in_avals = [a.aval for a in eqn.invars]
    out_avals = [v.aval for v in eqn.outvars]
    first = rules.rule_kind(eqn.primitive)
    assert rules.why_not(first, eqn.primitive, in_avals, out_avals, eqn.params) == reason


def test_limits_route_to_host_steps_and_library_calls():
    x = np.linspace(-1, 1, 6)
    names, _ = _steps(lambda z: tnp.exp2(z) + 1.0, x.astype(np.complex128))
    assert names == ["HostStep", "KernelStep"], names
    names, _ = _steps(lambda z: tnp.exp2(z) + 1.0, x)
    assert names == ["KernelStep"], names
    names, program = _steps(lambda a, b, c, d: a @ b + c @ d, np.ones((3, 1)),
                            np.ones((1, 2)), np.ones((3, 4)), np.ones((4, 2)))
    kinds = [s.kind for s in program.steps if isinstance(s, ir.LibraryCall)]
    assert kinds == ["dot_general"], program.pretty()      # the second product only


def test_a_failing_rule_propagates():
    # a rule with a bug (not a declared limit) is not hidden as a host step
    p = Primitive("l2_buggy")
    p.def_impl(lambda x: x)
    p.def_abstract_eval(lambda x: ShapedArray(x.shape, x.dtype))

    def buggy(ctx, x):
        raise ZeroDivisionError("the rule's own bug")

    rules.scalar_exprs[p] = buggy
    try:
        with pytest.raises(ZeroDivisionError, match="the rule's own bug"):
            _steps(lambda x: p.bind(x) + 1.0, np.ones(3))
        # with a declared limit for these operands, it is a host step and never runs
        rules.limit("scalar", p, lambda in_avals, out_avals: "not float64"
                    if in_avals[0].dtype == np.float64 else None)
        names, _ = _steps(lambda x: p.bind(x) + 1.0, np.ones(3))
        assert names == ["HostStep", "KernelStep"], names
        with pytest.raises(ZeroDivisionError):
            _steps(lambda x: p.bind(x) + 1.0, np.ones(3, np.float32))
    finally:
        del rules.scalar_exprs[p]
        rules.rule_limits.pop(("scalar", p), None)


def test_limit_names_a_registry():
    with pytest.raises(ValueError, match="unknown registry kind 'elementwise'"):
        rules.limit("elementwise", lax.exp_p, lambda *a, **k: None)
