"""Jaxprs: the printer (JAX's text format and layout, checked against output recorded
from JAX 0.10.2 in tests/data), a readable 20-line NumPy-style program, check_jaxpr's
errors, eval_jaxpr, make_jaxpr over pytrees and static arguments, eval_shape."""
from __future__ import annotations

import json
import pathlib
import re

import numpy as np
import pytest

import tracer
import lax
import tracer.numpy as tnp
from tracer import jaxpr as jx
from tracer.core import ShapedArray
from tracer.jaxpr import (ClosedJaxpr, DropVar, Jaxpr, JaxprEqn, JaxprTypeError, Literal, Var,
                          check_jaxpr, eval_jaxpr)

DATA = pathlib.Path(__file__).parent.parent / "data"
f32 = np.float32


# ------------------------------- goldens recorded from JAX ------------------------------
# The same programs written with jax.lax / jax.numpy gave these texts in JAX (the file
# says which version); their primitives and params coincide with ours.

def _programs():
    P = {}
    P["sin"] = (lambda x: lax.sin(x), [np.ones(3, f32)])
    P["two_eqns"] = (lambda x: lax.mul(lax.sin(x), f32(2.0)), [np.ones(3, f32)])
    P["literal_int"] = (lambda x: lax.add(x, np.int32(3)), [np.ones((2, 2), np.int32)])
    P["literal_bool"] = (lambda x: lax.bitwise_and(x, np.bool_(True)), [np.ones(4, bool)])
    P["literal_float_repr"] = (lambda x: lax.mul(x, f32(0.1)), [np.ones(2, f32)])
    P["identity"] = (lambda x: x, [np.ones(3, f32)])
    P["outputs_literal"] = (lambda x: (x, f32(1.0)), [np.ones(3, f32)])
    P["multi_out"] = (lambda x, y: (lax.add(x, y), lax.sub(x, y), lax.mul(x, y)),
                      [np.ones((2, 3), f32)] * 2)
    P["transpose"] = (lambda x: lax.transpose(lax.exp(x), (1, 0)), [np.ones((2, 3), f32)])

    def chain(x):
        for _ in range(30):
            x = lax.sin(x)
        return x
    P["thirty_vars"] = (chain, [np.ones(2, f32)])

    def many_inputs(*xs):
        acc = xs[0]
        for x in xs[1:]:
            acc = lax.add(acc, x)
        return acc
    P["many_inputs"] = (many_inputs, [np.ones((128, 256), f32)] * 9)
    P["many_outputs"] = (lambda x: tuple(lax.mul(x, f32(i)) for i in range(12)),
                         [np.ones((16, 16), f32)])

    def mlp_like(x, w, b):
        h = lax.tanh(lax.add(lax.mul(x, w), b))
        e = lax.exp(lax.sub(h, lax.max(h, f32(0.0))))
        return lax.div(e, lax.add(e, f32(1.0)))
    P["mlp_like"] = (mlp_like, [np.ones((4, 5), f32)] * 3)
    P["f64"] = (lambda x: lax.cos(lax.neg(x)), [np.ones((), np.float64)])
    P["compare_select"] = (lambda x, y: lax.select(lax.lt(x, y), x, y), [np.ones(3, f32)] * 2)
    P["long_line_single"] = (lambda x: lax.atan2(lax.sqrt(x), x),
                             [np.ones((1000, 1000, 10), f32)])
    g = tracer.jit(lambda x: tnp.sin(x) * 2)
    P["jit_shared"] = (lambda x: g(x) + g(x + 1), [np.ones(3)])
    P["jit_once"] = (lambda x: g(x) * 3, [np.ones(3)])
    return P


_GOLDENS = json.loads((DATA / "jaxpr_goldens_jax.json").read_text())["goldens"]
_PROGRAMS = _programs()


@pytest.mark.parametrize("name", sorted(_PROGRAMS))
def test_printed_exactly_like_jax(name):
    f, args = _PROGRAMS[name]
    assert str(tracer.make_jaxpr(f)(*args)) == _GOLDENS[name]


def test_golden_set_is_complete():
    assert set(_PROGRAMS) == set(_GOLDENS)


def test_one_line_form():
    x = np.ones(3, f32)
    assert str(tracer.make_jaxpr(lax.sin)(x)) == \
        "{ lambda ; a:f32[3]. let b:f32[3] = sin a in (b,) }"


# ------------------------------ the layout algorithm ------------------------------------

def _build(d):
    kind = d[0]
    if kind == "text":
        return jx._Text(d[1])
    if kind == "brk":
        return jx._Break(d[1])
    if kind == "concat":
        return jx._Concat([_build(c) for c in d[1]])
    if kind == "group":
        return jx._Group(_build(d[1]))
    return jx._Nest(d[1], _build(d[2]))


def test_layout_matches_jax_on_random_documents():
    cases = json.loads((DATA / "pp_layout_jax.json").read_text())["cases"]
    bad = [c for c in cases if jx._format(_build(c["doc"])) != c["jax"]]
    assert not bad, f"{len(bad)} of {len(cases)} documents laid out differently, e.g. " \
                    f"{bad[0]['doc']!r}"


# -------------------------------- nested and special ------------------------------------

def test_nested_jaxpr_names_continue_from_the_outer_ones():
    text = str(tracer.make_jaxpr(
        lambda x: lax.reduce(x, 0.0, lambda a, b: lax.add(a, lax.mul(b, b)), (0,)))(np.ones(3)))
    assert text == """{ lambda ; a:f64[3]. let
    b:f64[] = reduce[
      computation={ lambda ; c:f64[] d:f64[]. let
          e:f64[] = mul d d
          f:f64[] = add c e
        in (f,) }
      dimensions=(0,)
    ] a 0.0:f64[]
  in (b,) }"""


def test_constvars_and_dropvars_print():
    a, b, c = Var(ShapedArray((3,), np.float32)), Var(ShapedArray((), np.float32)), \
        DropVar(ShapedArray((3,), np.float32))
    d = Var(ShapedArray((3,), np.float32))
    eqns = [JaxprEqn(lax.mul_p, [a, b], {}, [c]), JaxprEqn(lax.add_p, [a, b], {}, [d])]
    text = jx.pp_jaxpr(Jaxpr([a], [b], eqns, [d]))
    assert text == "{ lambda a:f32[3]; b:f32[]. let _:f32[3] = mul a b; c:f32[3] = add a b " \
                   "in (c,) }"


def test_literal_formats():
    lit = lambda v, dt: jx._pp_literal(Literal(np.asarray(v, dt), ShapedArray((), dt)))
    assert lit(2.0, np.float32) == "2.0:f32[]"
    assert lit(0.1, np.float32) == "0.10000000149011612:f32[]"   # the float32's exact value
    assert lit(np.inf, np.float64) == "inf:f64[]"
    assert lit(np.nan, np.float16) == "nan:f16[]"
    assert lit(-3, np.int8) == "-3:i8[]"
    assert lit(True, np.bool_) == "True:bool[]"
    assert lit(1 + 2j, np.complex64) == "(1+2j):c64[]"


def test_variable_names_run_past_z():
    assert [jx._alpha(n) for n in (0, 25, 26, 27, 51, 52, 26 * 27)] == \
        ["a", "z", "ba", "bb", "bz", "ca", "bba"]


def test_params_print_sorted_with_dtypes_by_name():
    text = str(tracer.make_jaxpr(lambda x: lax.convert_element_type(
        lax.reduce_sum(x, (0, 1)), np.int32))(np.ones((2, 3))))
    assert "reduce_sum[axes=(0, 1)]" in text
    assert "convert_element_type[new_dtype=int32 weak_type=False]" in text


# ------------------------------- a readable program -------------------------------------

def _softmax_regression(params, x, y):
    """20 lines of NumPy-style code: a 2-layer network's regularized cross-entropy."""
    w1, b1, w2, b2 = params
    h = x @ w1 + b1
    h = tnp.where(h > 0, h, 0.01 * h)              # leaky relu
    logits = h @ w2 + b2
    m = tnp.max(logits, axis=-1, keepdims=True)
    z = logits - m
    lse = tnp.log(tnp.sum(tnp.exp(z), axis=-1, keepdims=True))
    logp = z - lse
    nll = -tnp.sum(y * logp, axis=-1)
    loss = tnp.mean(nll)
    reg = tnp.sum(w1 * w1) + tnp.sum(w2 * w2)
    loss = loss + 1e-3 * reg
    acc = tnp.mean((tnp.argmax(logits, axis=-1) == tnp.argmax(y, axis=-1)) * 1.0)
    scale = tnp.sqrt(tnp.abs(loss) + 1.0)
    clipped = tnp.clip(loss / scale, -10.0, 10.0)
    return clipped, acc


def _model_args():
    r = np.random.default_rng(0)
    params = (r.standard_normal((4, 8), f32), np.zeros(8, f32),
              r.standard_normal((8, 3), f32), np.zeros(3, f32))
    x = r.standard_normal((5, 4), f32)
    y = np.eye(3, dtype=f32)[r.integers(0, 3, 5)]
    return params, x, y


_EQN = re.compile(r"^ {4}(_|[a-z]+):(bool|[fiuc]\d+)\[[\d,]*\]( (_|[a-z]+):\S+)* = [a-z_\-]+")


def test_numpy_style_program_prints_readably():
    params, x, y = _model_args()
    closed = tracer.make_jaxpr(_softmax_regression)(params, x, y)
    text = str(closed)
    lines = text.splitlines()
    assert lines[0].startswith("{ lambda ; a:f32[4,8] b:f32[8] c:f32[8,3] d:f32[3] e:f32[5,4]")
    assert lines[-1].startswith("  in (") and lines[-1].endswith(") }")
    # equation lines (the others continue a multi-line params list: "      k=v", "    ] a b")
    body = [ln for ln in lines[1:-1] if not ln.startswith(("     ", "    ]"))]
    assert all(_EQN.match(ln) for ln in body), [ln for ln in body if not _EQN.match(ln)]
    assert max(map(len, lines)) <= 100
    for prim in ("dot_general", "reduce_max", "exp", "log", "reduce_sum", "argmax", "sqrt"):
        assert f" = {prim}" in text, prim
    check_jaxpr(closed.jaxpr)
    got = eval_jaxpr(closed.jaxpr, closed.consts, *tracer.tree_util.tree_leaves((params, x, y)))
    want = _softmax_regression(params, x, y)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)


def test_lax_program_golden():
    """A 20-equation lax program: the exact text (our own golden, JAX's layout)."""
    def f(x, w):
        y = lax.dot_general(x, w, (((1,), (0,)), ((), ())))
        y = lax.add(y, lax.broadcast_in_dim(lax.reduce_sum(w, (0,)), (2, 3), (1,)))
        y = lax.max(y, f32(0.0))
        m = lax.reduce_max(y, (1,))
        z = lax.sub(y, lax.broadcast_in_dim(m, (2, 3), (0,)))
        e = lax.exp(z)
        s = lax.reduce_sum(e, (1,))
        p = lax.div(e, lax.broadcast_in_dim(s, (2, 3), (0,)))
        return lax.reduce_sum(lax.mul(p, lax.log(p)), (0, 1)), lax.argmax(p, 1, np.int32)

    text = str(tracer.make_jaxpr(f)(np.ones((2, 4), f32), np.ones((4, 3), f32)))
    assert text == """{ lambda ; a:f32[2,4] b:f32[4,3]. let
    c:f32[2,3] = dot_general[
      dimension_numbers=(((1,), (0,)), ((), ()))
      precision=None
      preferred_element_type=None
    ] a b
    d:f32[3] = reduce_sum[axes=(0,)] b
    e:f32[2,3] = broadcast_in_dim[broadcast_dimensions=(1,) shape=(2, 3)] d
    f:f32[2,3] = add c e
    g:f32[2,3] = max f 0.0:f32[]
    h:f32[2] = reduce_max[axes=(1,)] g
    i:f32[2,3] = broadcast_in_dim[broadcast_dimensions=(0,) shape=(2, 3)] h
    j:f32[2,3] = sub g i
    k:f32[2,3] = exp j
    l:f32[2] = reduce_sum[axes=(1,)] k
    m:f32[2,3] = broadcast_in_dim[broadcast_dimensions=(0,) shape=(2, 3)] l
    n:f32[2,3] = div k m
    o:f32[2,3] = log n
    p:f32[2,3] = mul n o
    q:f32[] = reduce_sum[axes=(0, 1)] p
    r:i32[2] = argmax[axes=(1,) index_dtype=int32] n
  in (q, r) }"""


# ------------------------------------- check_jaxpr --------------------------------------

def _v(shape=(3,), dt=np.float32):
    return Var(ShapedArray(shape, dt))


def test_check_jaxpr_accepts_traced_programs():
    params, x, y = _model_args()
    check_jaxpr(tracer.make_jaxpr(_softmax_regression)(params, x, y).jaxpr)


def test_check_jaxpr_use_before_definition():
    a, b, c = _v(), _v(), _v()
    bad = Jaxpr([], [a], [JaxprEqn(lax.add_p, [a, b], {}, [c])], [c])
    with pytest.raises(JaxprTypeError, match=r"used before it is defined[\s\S]*>>> .* = add"):
        check_jaxpr(bad)


def test_check_jaxpr_double_definition():
    a, b = _v(), _v()
    bad = Jaxpr([], [a], [JaxprEqn(lax.sin_p, [a], {}, [b]), JaxprEqn(lax.cos_p, [a], {}, [b])],
                [b])
    with pytest.raises(JaxprTypeError, match="defined twice"):
        check_jaxpr(bad)


def test_check_jaxpr_wrong_output_type():
    a, b = _v(), _v((4,))
    bad = Jaxpr([], [a], [JaxprEqn(lax.sin_p, [a], {}, [b])], [b])
    with pytest.raises(JaxprTypeError, match=r"declares output f32\[4\] but its rule gives "
                                             r"f32\[3\]"):
        check_jaxpr(bad)


def test_check_jaxpr_rule_failure():
    a, b, c = _v(), _v((4,)), _v()
    bad = Jaxpr([], [a, b], [JaxprEqn(lax.add_p, [a, b], {}, [c])], [c])
    with pytest.raises(JaxprTypeError, match=r"equation 0 \(add\) fails abstract evaluation"):
        check_jaxpr(bad)


def test_check_jaxpr_undefined_output():
    a, b = _v(), _v()
    with pytest.raises(JaxprTypeError, match="used before it is defined"):
        check_jaxpr(Jaxpr([], [a], [], [b]))


# ------------------------------ evaluation and make_jaxpr -------------------------------

def test_eval_jaxpr_round_trip_and_arity():
    closed = tracer.make_jaxpr(lambda x, y: (lax.mul(x, y), lax.sin(x)))(np.ones(3), np.ones(3))
    out = eval_jaxpr(closed.jaxpr, closed.consts, np.arange(3.0), np.full(3, 2.0))
    np.testing.assert_array_equal(np.asarray(out[0]), np.arange(3.0) * 2)
    np.testing.assert_array_equal(np.asarray(out[1]), np.sin(np.arange(3.0)))
    with pytest.raises(TypeError, match="takes 2 arguments, got 1"):
        eval_jaxpr(closed.jaxpr, closed.consts, np.ones(3))


def test_closed_over_arrays_become_constvars():
    c = np.arange(3.0)
    closed = tracer.make_jaxpr(lambda x: lax.mul(x, c))(np.ones(3))
    assert isinstance(closed, ClosedJaxpr)
    assert len(closed.jaxpr.constvars) == 1 and np.array_equal(np.asarray(closed.consts[0]), c)
    assert str(closed).startswith("{ lambda a:f64[3]; b:f64[3]. let")


def test_make_jaxpr_pytrees_and_static_argnums():
    def f(d, n, flag):
        out = lax.mul(d["x"], d["y"])
        for _ in range(n):
            out = lax.sin(out)
        return {"out": out, "neg": lax.neg(out)} if flag else out

    closed = tracer.make_jaxpr(f, static_argnums=(1, 2))({"y": np.ones(2), "x": np.ones(2)}, 2,
                                                         True)
    assert [e.primitive.name for e in closed.jaxpr.eqns] == ["mul", "sin", "sin", "neg"]
    # dict leaves in sorted key order: x, y; outputs likewise: neg, out
    assert len(closed.jaxpr.invars) == 2 and len(closed.jaxpr.outvars) == 2
    assert closed.jaxpr.outvars[0] is closed.jaxpr.eqns[3].outvars[0]


def test_make_jaxpr_return_shape():
    closed, shape = tracer.make_jaxpr(lambda x: (x, lax.reduce_sum(x, (0,))),
                                      return_shape=True)(np.ones((2, 3), f32))
    assert shape[0].shape == (2, 3) and shape[1].shape == (3,) and shape[1].dtype == f32


def test_make_jaxpr_of_shape_dtype_structs():
    s = tracer.ShapeDtypeStruct((2, 5), np.float32)
    closed = tracer.make_jaxpr(lambda x: lax.exp(x))(s)
    assert closed.in_avals == [ShapedArray((2, 5), np.float32)]


def test_eval_shape():
    out = tracer.eval_shape(lambda x, y: {"z": lax.dot(x, y)}, tracer.ShapeDtypeStruct((2, 3),
                                                                                      np.float32),
                            np.ones((3, 4), np.float32))
    assert isinstance(out["z"], tracer.ShapeDtypeStruct)
    assert out["z"].shape == (2, 4) and out["z"].dtype == np.float32


def test_weak_types_show_in_avals_not_in_text():
    closed = tracer.make_jaxpr(lambda x: lax.mul(x, 2.0))(2.0)
    assert closed.jaxpr.invars[0].aval.weak_type
    assert str(closed) == "{ lambda ; a:f64[]. let b:f64[] = mul a 2.0:f64[] in (b,) }"
