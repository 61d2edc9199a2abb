"""Host callbacks: tracer.pure_callback, tracer.io_callback, tracer.debug.print and
tracer.debug.callback (lax/callbacks.py). The expected call counts, orders, shapes seen by
the callback and printed lines are JAX 0.10's, recorded from runs of the same programs."""
from __future__ import annotations

import traceback

import numpy as np
import pytest

import tracer
import tracer.numpy as jnp
from tracer import lax

S = tracer.ShapeDtypeStruct
F64 = np.float64


class Recorder:
    """Callbacks that record their calls (tag and operand values) and return their first
    operand, or nothing (``returns=False``)."""

    def __init__(self):
        self.calls = []

    def __call__(self, tag, returns=True):
        def cb(*args):
            self.calls.append((tag,) + tuple(np.asarray(a).tolist() for a in args))
            return np.asarray(args[0]) if returns else None
        return cb

    def tags(self):
        return [c[0] for c in self.calls]


@pytest.fixture
def rec():
    return Recorder()


# ------------------------------------------ counts -----------------------------------------

def test_eager_calls_run_once_with_tracer_arrays(rec):
    seen = []

    def cb(x):
        seen.append(type(x))
        return np.sin(x)

    x = jnp.arange(3.)
    np.testing.assert_allclose(tracer.pure_callback(cb, S((3,), F64), x), np.sin(np.arange(3.)))
    tracer.io_callback(cb, S((3,), F64), x)
    tracer.debug.callback(lambda v: seen.append(type(v)), x)
    assert seen == [tracer.Array] * 3


@pytest.mark.parametrize("kind", ["pure", "io", "debug"])
def test_jit_traces_once_and_calls_back_on_every_call(kind, rec):
    traces = []

    def f(x):
        traces.append(1)
        if kind == "pure":
            return tracer.pure_callback(rec("cb"), S((3,), F64), x) * 2
        if kind == "io":
            return tracer.io_callback(rec("cb"), S((3,), F64), x) * 2
        tracer.debug.callback(rec("cb"), x)
        return x * 2

    jf = tracer.jit(f)
    x = jnp.arange(3.)
    jf.lower(x)
    tracer.make_jaxpr(jf)(x)
    assert rec.calls == []                      # never at trace time
    for i in range(3):
        np.testing.assert_array_equal(jf(x + i), (np.arange(3.) + i) * 2)
    assert rec.calls == [("cb", [0., 1., 2.]), ("cb", [1., 2., 3.]), ("cb", [2., 3., 4.])]
    assert len(traces) <= 2                     # lower's trace may be kept or not; not per call
    n = len(traces)
    jf(x)
    assert len(traces) == n


# ------------------------------------ effects: DCE, CSE, order ------------------------------

def test_ordered_io_callbacks_run_in_program_order_under_jit(rec):
    def g(x):
        tracer.io_callback(rec("a", False), None, x, ordered=True)
        y = x * 2
        tracer.io_callback(rec("b", False), None, y, ordered=True)
        tracer.io_callback(rec("c", False), None, x, ordered=True)
        return y

    tracer.jit(g)(jnp.arange(3.))
    assert rec.tags() == ["a", "b", "c"]        # JAX: ['a', 'b', 'c']
    assert rec.calls[1] == ("b", [0., 2., 4.])


def test_io_callback_is_never_removed_or_merged(rec):
    x = jnp.arange(3.)
    unused = tracer.jit(lambda x: (tracer.io_callback(rec("io"), S((3,), F64), x), x + 1)[1])
    np.testing.assert_array_equal(unused(x), np.arange(3.) + 1)
    assert rec.tags() == ["io"]                 # JAX: ['io']
    rec.calls.clear()
    cb = rec("io")
    twice = tracer.jit(lambda x: tracer.io_callback(cb, S((3,), F64), x)
                       + tracer.io_callback(cb, S((3,), F64), x))
    twice(x)
    assert rec.tags() == ["io", "io"]           # JAX: ['io', 'io']
    text = twice.lower(x).as_text()
    opt = text.split("optimized jaxpr", 1)[-1] if "optimized jaxpr" in text else text
    assert opt.count("io_callback") >= 2


def test_io_callback_in_a_loop_with_unused_result_still_runs(rec):
    def body(i, c):
        tracer.io_callback(rec("io", False), None, c)
        return c + 1.0

    f = tracer.jit(lambda x: (lax.fori_loop(0, 3, body, x), x + 1)[1])
    assert float(f(1.0)) == 2.0
    assert rec.calls == [("io", 1.0), ("io", 2.0), ("io", 3.0)]    # JAX's


def test_unused_pure_callback_is_removed_under_jit(rec):
    x = jnp.arange(3.)
    f = tracer.jit(lambda x: (tracer.pure_callback(rec("p"), S((3,), F64), x), x + 1)[1])
    np.testing.assert_array_equal(f(x), np.arange(3.) + 1)
    assert rec.calls == []                      # JAX: []

    def pbody(i, c):
        tracer.pure_callback(rec("p"), S((), F64), c)
        return c + 1.0

    assert float(tracer.jit(lambda x: lax.fori_loop(0, 3, pbody, x))(1.0)) == 4.0
    assert rec.calls == []                      # JAX: []
    # eagerly, the call happens
    tracer.pure_callback(rec("p"), S((3,), F64), x)
    assert rec.tags() == ["p"]


def test_effectful_equations_survive_the_tracing_dce():
    from tracer.interpreters import partial_eval as pe
    def f(x):
        tracer.io_callback(lambda v: None, None, x)
        tracer.pure_callback(lambda v: v, S((), F64), x)
        lax.fori_loop(0, 2, lambda i, c: (tracer.debug.print("{}", c), c)[1], x)
        return x

    closed = tracer.make_jaxpr(f)(1.0)
    jaxpr, _ = pe.dce_jaxpr(closed.jaxpr)
    names = [e.primitive.name for e in jaxpr.eqns]
    assert "io_callback" in names and "pure_callback" not in names
    assert any(n in ("scan", "while") for n in names)


# ------------------------------------------ vmap -------------------------------------------

def _cbv(log):
    def cb(x, y):
        log.append((np.shape(x), np.shape(y)))
        return np.asarray(x) + np.asarray(y)
    return cb


def _fn(log, method):
    def fn(x, y):
        shape = np.broadcast_shapes(x.shape, y.shape)
        return tracer.pure_callback(_cbv(log), S(shape, F64), x, y, vmap_method=method)
    return fn


# (method) -> shapes the callback saw in JAX for the four cases below
VMAP_SHAPES = {
    "sequential": ([((), ())] * 4, [((2,), (2,))] * 3, [((), ())] * 6),
    "expand_dims": ([((4,), (1,))], [((3, 2), (1, 2))], [((1, 2), (3, 1))]),
    "broadcast_all": ([((4,), (4,))], [((3, 2), (3, 2))], [((3, 2), (3, 2))]),
}


@pytest.mark.parametrize("method", sorted(VMAP_SHAPES))
@pytest.mark.parametrize("jit", [False, True])
def test_pure_callback_vmap_methods_match_a_loop(method, jit):
    log = []
    fn = _fn(log, method)
    wrap = tracer.jit if jit else (lambda f: f)
    shapes_flat, shapes_axis1, shapes_nested = VMAP_SHAPES[method]

    x, y = np.arange(4.), np.float64(1.0)
    out = wrap(tracer.vmap(fn, in_axes=(0, None)))(x, y)
    np.testing.assert_array_equal(out, [xi + y for xi in x])
    assert log == shapes_flat
    log.clear()

    x, y = np.arange(6.).reshape(2, 3), np.arange(2.) * 10
    out = wrap(tracer.vmap(fn, in_axes=(1, None)))(x, y)
    np.testing.assert_array_equal(out, np.stack([x[:, i] + y for i in range(3)]))
    assert log == shapes_axis1
    log.clear()

    x, y = np.arange(2.), np.arange(3.) * 10
    out = wrap(tracer.vmap(tracer.vmap(fn, in_axes=(0, None)), in_axes=(None, 0)))(x, y)
    np.testing.assert_array_equal(out, [[xi + yj for xi in x] for yj in y])
    assert log == shapes_nested


@pytest.mark.parametrize("method,shapes", [("sequential_unrolled", [((), ())] * 3),
                                           ("legacy_vectorized", [((3,), ())])])
def test_pure_callback_other_vmap_methods(method, shapes):
    log = []
    out = tracer.vmap(_fn(log, method), in_axes=(0, None))(np.arange(3.), np.float64(1.0))
    np.testing.assert_array_equal(out, [1., 2., 3.])
    assert log == shapes                        # JAX's


def test_pure_callback_vmap_needs_a_vmap_method():
    f = lambda x: tracer.pure_callback(np.sin, S((), F64), x)
    with pytest.raises(NotImplementedError, match="vmap_method=None"):
        tracer.vmap(f)(jnp.arange(3.))
    with pytest.raises(ValueError, match="vmap_method"):
        tracer.pure_callback(np.sin, S((), F64), 1.0, vmap_method="bogus")
    # nothing batched: no batching rule, one call
    assert float(tracer.vmap(lambda x: f(2.0) + x)(jnp.arange(3.))[0]) == np.sin(2.0)


def test_io_callback_vmap_runs_per_member_and_refuses_ordered(rec):
    seen = []

    def h(x):
        return tracer.io_callback(lambda v: (seen.append(np.shape(v)), v)[1], S((3,), F64), x)

    np.testing.assert_array_equal(tracer.vmap(h)(jnp.ones((2, 3))), np.ones((2, 3)))
    assert seen == [(3,), (3,)]                 # JAX's
    seen.clear()
    tracer.jit(tracer.vmap(h))(jnp.ones((2, 3)))
    assert seen == [(3,), (3,)]
    with pytest.raises(ValueError, match="Cannot `vmap` ordered IO callback"):
        tracer.vmap(lambda x: tracer.io_callback(rec("a", False), None, x, ordered=True))(
            jnp.ones((2, 3)))


# ------------------------------------------ autodiff ---------------------------------------

def test_differentiating_callbacks_raises_as_jax():
    with pytest.raises(ValueError, match="Pure callbacks do not support JVP"):
        tracer.grad(lambda x: tracer.pure_callback(np.sin, S((), F64), x))(1.0)
    with pytest.raises(ValueError, match="Pure callbacks do not support JVP"):
        tracer.jvp(lambda x: tracer.pure_callback(np.sin, S((), F64), x), (1.0,), (1.0,))
    with pytest.raises(ValueError, match="IO callbacks do not support JVP"):
        tracer.grad(lambda x: tracer.io_callback(np.sin, S((), F64), x))(1.0)
    # a callback of values that do not depend on the argument is fine
    g = tracer.grad(lambda x: x * tracer.pure_callback(np.sin, S((), F64), 2.0))(1.0)
    assert float(g) == np.sin(2.0)


@tracer.custom_jvp
def _csin(x):
    return tracer.pure_callback(np.sin, S(x.shape, x.dtype), x, vmap_method="expand_dims")


@_csin.defjvp
def _csin_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    cos = tracer.pure_callback(np.cos, S(x.shape, x.dtype), x, vmap_method="expand_dims")
    return _csin(x), cos * t


@tracer.custom_vjp
def _vsin(x):
    return tracer.pure_callback(np.sin, S(x.shape, x.dtype), x, vmap_method="sequential")


_vsin.defvjp(lambda x: (_vsin(x), x),
             lambda x, g: (g * tracer.pure_callback(np.cos, S(x.shape, x.dtype), x,
                                                    vmap_method="sequential"),))


def _fd(f, x, eps=1e-6):
    return (f(x + eps) - f(x - eps)) / (2 * eps)


@pytest.mark.parametrize("fun", [_csin, _vsin], ids=["custom_jvp", "custom_vjp"])
def test_grad_through_custom_rules_around_callbacks_matches_finite_differences(fun):
    loss = lambda x: jnp.sum(fun(x) ** 2 * 1.5)
    x = np.array([0.3, -1.2, 2.0])
    want = np.array([_fd(lambda v: np.sum(np.sin(np.where(np.arange(3) == i, v, x)) ** 2 * 1.5),
                         x[i]) for i in range(3)])
    np.testing.assert_allclose(tracer.grad(loss)(x), want, rtol=1e-6)
    np.testing.assert_allclose(tracer.jit(tracer.grad(loss))(x), want, rtol=1e-6)
    np.testing.assert_allclose(tracer.vmap(tracer.grad(lambda v: fun(v)))(x), np.cos(x),
                               rtol=1e-12)


# ------------------------------------ errors and exceptions --------------------------------

class _Boom(KeyError):
    pass


def _raiser(*args):
    raise _Boom("boom")


@pytest.mark.parametrize("case", ["eager", "jit", "io", "debug", "scan", "vmap"])
def test_exceptions_propagate_with_their_type_and_traceback(case):
    x = jnp.arange(3.)
    fns = {
        "eager": lambda x: tracer.pure_callback(_raiser, S((3,), F64), x),
        "jit": tracer.jit(lambda x: tracer.pure_callback(_raiser, S((3,), F64), x)),
        "io": tracer.jit(lambda x: tracer.io_callback(_raiser, S((3,), F64), x)),
        "debug": tracer.jit(lambda x: tracer.debug.callback(_raiser, x)),
        "scan": tracer.jit(lambda x: lax.scan(
            lambda c, v: (c, tracer.io_callback(_raiser, S((), F64), v)), 0., x)),
        "vmap": tracer.jit(tracer.vmap(lambda v: tracer.pure_callback(
            _raiser, S((), F64), v, vmap_method="sequential"))),
    }
    with pytest.raises(_Boom) as info:
        fns[case](x)
    frames = traceback.extract_tb(info.value.__traceback__)
    assert frames[-1].name == "_raiser"


@pytest.mark.parametrize("jit", [False, True])
def test_results_that_do_not_match_result_shape_dtypes_raise_clearly(jit):
    def run(cb, spec=S((3,), F64)):
        f = lambda x: tracer.pure_callback(cb, spec, x)
        return (tracer.jit(f) if jit else f)(jnp.arange(3.))

    def short(x):
        return np.asarray(x)[:2]

    with pytest.raises(RuntimeError, match=r"short.*shape \(2,\).*expects shape \(3,\)"):
        run(short)
    with pytest.raises(RuntimeError, match=r"dtype float32.*expects.*dtype float64"):
        run(lambda x: np.asarray(x, np.float32))
    with pytest.raises(RuntimeError, match=r"returned 2 arrays, expected 1"):
        run(lambda x: (x, x))
    with pytest.raises(TypeError, match="shape and .dtype"):
        run(lambda x: x, spec=[3])


def test_result_specs_are_pytrees_of_shape_dtype_objects():
    def cb(x):
        return {"a": np.asarray(x) * 2, "b": (np.int32(7),)}

    spec = {"a": np.zeros(3), "b": (S((), np.int32),)}
    for f in (lambda x: tracer.pure_callback(cb, spec, x),
              tracer.jit(lambda x: tracer.io_callback(cb, spec, x))):
        out = f(jnp.arange(3.))
        np.testing.assert_array_equal(out["a"], [0., 2., 4.])
        assert out["b"][0].dtype == np.int32 and int(out["b"][0]) == 7


def test_64_bit_results_without_x64_raise(x32):
    with pytest.raises(ValueError, match="64-bit"):
        tracer.pure_callback(lambda x: x, np.zeros((), np.float64), 1.0)
    # (tracer.ShapeDtypeStruct canonicalizes its dtype: float32 here)
    assert tracer.pure_callback(lambda x: x, S((), np.float64), np.float32(1.0)).dtype == \
        np.float32


# --------------------------------------- debug.print ---------------------------------------

def _lines(capsys):
    return capsys.readouterr().out.splitlines()


def test_debug_print_eager_and_jit_print_run_time_values(capsys):
    x = jnp.arange(3.)
    tracer.debug.print("x={} y={y}", x, y=x[0] * 2)
    assert _lines(capsys) == ["x=[0. 1. 2.] y=0.0"]
    f = tracer.jit(lambda x: (tracer.debug.print("jit x={x}", x=x), x * 2)[1])
    f.lower(x)
    assert _lines(capsys) == []
    f(x)
    f(x + 1)
    assert _lines(capsys) == ["jit x=[0. 1. 2.]", "jit x=[1. 2. 3.]"]   # JAX's
    tracer.debug.print("hello")
    tracer.debug.print("{:.3f}", jnp.float64(1 / 3))
    tracer.debug.print("{x:.2f}", x=jnp.float64(2 / 3))
    assert _lines(capsys) == ["hello", "0.333", "0.67"]


def test_debug_print_under_vmap_prints_per_member(capsys):
    x = jnp.arange(3.)
    tracer.vmap(lambda v: tracer.debug.print("v={} c={}", v, 7))(x)
    assert _lines(capsys) == ["v=0.0 c=7", "v=1.0 c=7", "v=2.0 c=7"]   # JAX's
    tracer.jit(tracer.vmap(lambda v: tracer.debug.print("v={}", v)))(x)
    assert _lines(capsys) == ["v=0.0", "v=1.0", "v=2.0"]
    tracer.vmap(lambda v: tracer.debug.print("u={}", 5.0))(x)
    assert _lines(capsys) == ["u=5.0"]                                   # nothing batched


def _loss(w):
    tracer.debug.print("w={}", w)
    y = jnp.sin(w)
    tracer.debug.print("y={}", y)
    return y * 3


@pytest.mark.parametrize("how", ["grad", "jit_grad", "grad_jit", "jvp"])
def test_debug_print_under_differentiation_prints_primals(how, capsys):
    run = {"grad": lambda: tracer.grad(_loss)(0.5),
           "jit_grad": lambda: tracer.jit(tracer.grad(_loss))(0.5),
           "grad_jit": lambda: tracer.grad(tracer.jit(_loss))(0.5),
           "jvp": lambda: tracer.jvp(_loss, (0.5,), (1.0,))[1]}[how]
    assert float(run()) == pytest.approx(2.6327476856711183)
    assert _lines(capsys) == ["w=0.5", "y=0.479425538604203"]          # JAX's


def test_debug_print_checks_its_format():
    with pytest.raises(IndexError):
        tracer.debug.print("{} {}", 1.0)
    with pytest.raises(ValueError, match=r"Unused positional arguments.*\[2.0\]"):
        tracer.debug.print("{}", 1.0, 2.0)
    with pytest.raises(ValueError, match=r"Unused keyword arguments.*\['z'\]"):
        tracer.debug.print("{}", 1.0, z=2.0)


def test_debug_callback_static_arguments_kwargs_and_two_call_form(capsys):
    x = jnp.arange(3.)
    tracer.debug.callback(lambda a, b, s=None: print("cb", a, b["k"], s), x, {"k": x[1]},
                          s="static")
    tracer.jit(lambda x: tracer.debug.callback(lambda a, s: print("jcb", a, s), x, s="st"))(x)
    tracer.debug.callback(ordered=True)(lambda a: print("two", a), x[2])
    tracer.debug.print(ordered=True)("p {}", x[0])
    assert _lines(capsys) == ["cb [0. 1. 2.] 1.0 static", "jcb [0. 1. 2.] st", "two 2.0",
                              "p 0.0"]
    assert tracer.debug.callback(lambda a: 3, x) is None
    with pytest.raises(TypeError, match="must be callable"):
        tracer.debug.callback(3, x)


# ------------------------------------ inside control flow ----------------------------------

def test_callbacks_inside_jitted_loops_and_conds(rec, capsys):
    def body(i, c):
        return c + tracer.io_callback(rec("io"), S((), F64), c * 1.0, ordered=True)

    f = tracer.jit(lambda c: lax.fori_loop(0, 4, body, c))
    assert float(f(1.0)) == 16.0
    assert float(f(2.0)) == 32.0
    assert rec.calls == [("io", v) for v in (1., 2., 4., 8., 2., 4., 8., 16.)]    # JAX's
    rec.calls.clear()

    def sbody(c, x):
        return c + 1, tracer.pure_callback(rec("p"), S((), F64), x * c)

    c, ys = tracer.jit(lambda xs: lax.scan(sbody, 1.0, xs))(jnp.arange(3.))
    assert float(c) == 4.0
    np.testing.assert_array_equal(ys, [0., 2., 6.])
    assert rec.calls == [("p", 0.0), ("p", 2.0), ("p", 6.0)]                    # JAX's
    rec.calls.clear()

    def h(p, x):
        return lax.cond(p, lambda x: (tracer.debug.callback(rec("T"), x), x + 1)[1],
                        lambda x: (tracer.debug.callback(rec("F"), x), x - 1)[1], x)

    hj = tracer.jit(h)
    assert [float(hj(True, 1.0)), float(hj(False, 1.0)), float(hj(True, 5.0))] == [2., 0., 6.]
    assert rec.calls == [("T", 1.0), ("F", 1.0), ("T", 5.0)]                    # JAX's
    rec.calls.clear()
    r = tracer.vmap(h)(jnp.array([True, False]), jnp.array([1., 2.]))
    np.testing.assert_array_equal(r, [2., 1.])
    assert rec.calls == [("F", 1.0), ("F", 2.0), ("T", 1.0), ("T", 2.0)]        # JAX's

    def w(x):
        def b(c):
            tracer.debug.print("it {} {}", c[0], c[1])
            return c[0] + 1, c[1] * 2
        return lax.while_loop(lambda c: c[0] < 3, b, (0, x))

    assert float(tracer.jit(w)(1.5)[1]) == 12.0
    tracer.jit(lambda x: lax.fori_loop(
        0, 3, lambda i, c: (tracer.debug.print("i={} c={}", i, c), c + i)[1], x))(10)
    assert _lines(capsys) == ["it 0 1.5", "it 1 3.0", "it 2 6.0",
                              "i=0 c=10", "i=1 c=10", "i=2 c=11"]                 # JAX's


def test_debug_print_in_a_differentiated_scan_prints_once_per_iteration(capsys):
    def sb(c, x):
        tracer.debug.print("c={} x={}", c, x)
        return c * x, c

    f = lambda c: lax.scan(sb, c, jnp.arange(1., 4.))[0]
    want = ["c=2.0 x=1.0", "c=2.0 x=2.0", "c=4.0 x=3.0"]                        # JAX's
    assert float(tracer.grad(f)(2.0)) == 6.0
    assert _lines(capsys) == want
    assert float(tracer.jit(tracer.grad(f))(2.0)) == 6.0
    assert _lines(capsys) == want
    tracer.vmap(lambda c: lax.scan(sb, c, jnp.arange(1., 3.))[0])(jnp.array([1., 2.]))
    # JAX prints the same lines in another order (its unordered effects may move)
    assert sorted(_lines(capsys)) == sorted(["c=2.0 x=1.0", "c=1.0 x=1.0", "c=2.0 x=2.0",
                                             "c=1.0 x=2.0"])
