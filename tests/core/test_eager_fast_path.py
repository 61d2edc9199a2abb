"""The eager fast path of binary ufuncs (``lax.utils.eager_binary``) gives what the general
path gives -- values bit for bit, dtype, weak type and errors -- and stays out of the way of
every transformation."""
import itertools
import math

import numpy as np
import pytest

import tracer
import tracer.numpy as jnp
from lax import elementwise as lax_ew
from tracer.numpy import ufuncs

_FAST = {
    "add": ufuncs._add_or, "subtract": lax_ew.sub, "multiply": lax_ew.mul,
    "maximum": lax_ew.max, "minimum": lax_ew.min, "equal": lax_ew.eq,
    "not_equal": lax_ew.ne, "less": lax_ew.lt, "less_equal": lax_ew.le,
    "greater": lax_ew.gt, "greater_equal": lax_ew.ge,
}
# the general path: the same ufunc without its primitive (what every call took before)
_ORDERING = ("less", "less_equal", "greater", "greater_equal")
_GENERAL = {n: ufuncs._binary(fn, name=n, scalar_fast=True) for n, fn in _FAST.items()
            if n not in _ORDERING}
# (complex operands of order comparisons compare lexicographically, after promotion)
_GENERAL.update({n: ufuncs._binary(ufuncs._lexicographic(_FAST[n]), name=n)
                 for n in _ORDERING})

_VALUES = [0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan, 65504.0, 1e-8]
_SCALARS = [0.0, -0.0, 2.0, -1.5, math.inf, -math.inf, math.nan, 1e40, 3, -7, 0, 2 ** 40]


def _arrays():
    for dt in ("float16", "float32", "float64", "complex64", "complex128"):
        vals = np.array(_VALUES, dt)
        if dt.startswith("complex"):
            vals = vals.copy()
            vals.imag = np.array(_VALUES[::-1], vals.real.dtype)
        yield jnp.asarray(vals)
        yield jnp.asarray(vals[:1].reshape(()))
        yield jnp.asarray(vals[:0])
    yield jnp.asarray(np.array([0, 1, -3, 7], np.int32))
    yield jnp.asarray(np.array([0, 255, 3], np.uint8))
    yield jnp.asarray(np.array([True, False]))
    yield jnp.asarray(2.5)            # weakly typed
    yield jnp.asarray(np.float32(2.5))


def _same(a, b):
    assert type(a) is type(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    assert a.aval.weak_type == b.aval.weak_type
    av, bv = np.asarray(a), np.asarray(b)
    if av.dtype.kind in "fc":
        u = {2: np.uint16, 4: np.uint32, 8: np.uint64}[np.finfo(av.dtype).bits // 8]
        np.testing.assert_array_equal(av.reshape(-1).view(u), bv.reshape(-1).view(u))
    else:
        np.testing.assert_array_equal(av, bv)


def _outcome(f, *args):
    try:
        return f(*args), None
    except Exception as e:   # the same error, or the same result
        return None, (type(e), str(e))


def _outcome_twice(f, *args):
    """``_outcome`` of the second call, after checking it equals the first's: the first
    meeting of an aval pair takes ``eager_binary`` and remembers its plan; the second
    runs the remembered plan (``eager_binary_op``)."""
    first, first_err = _outcome(f, *args)
    got, err = _outcome(f, *args)
    assert err == first_err
    if got is not None:
        _same(got, first)
    return got, err


@pytest.mark.parametrize("name", sorted(_FAST))
def test_array_and_python_scalar_as_the_general_path(name):
    fast, general = getattr(jnp, name), _GENERAL[name]
    for x, s in itertools.product(list(_arrays()), _SCALARS):
        for args in ((x, s), (s, x)):
            got, err = _outcome_twice(fast, *args)
            want, want_err = _outcome(general, *args)
            assert err == want_err, (name, args)
            if got is not None:
                _same(got, want)


@pytest.mark.parametrize("name", sorted(_FAST))
def test_two_arrays_as_the_general_path(name):
    fast, general = getattr(jnp, name), _GENERAL[name]
    arrays = list(_arrays())
    for x in arrays:
        for y in (x, jnp.asarray(np.flip(np.asarray(x)).copy()), jnp.asarray(np.asarray(x))):
            got, err = _outcome_twice(fast, x, y)
            want, want_err = _outcome(general, x, y)
            assert err == want_err, (name, x, y)
            if got is not None:
                _same(got, want)


def test_operators_take_it_and_keep_their_semantics():
    x = jnp.asarray(np.array([1.0, -0.0, np.nan], np.float32))
    y = x * 1.0001
    assert y.dtype == np.float32 and not y.aval.weak_type
    np.testing.assert_array_equal(np.asarray(y), np.array([1.0, -0.0, np.nan], np.float32)
                                  * np.float32(1.0001))
    assert np.signbit(np.asarray(x + -0.0))[1]          # -0.0 + -0.0 is -0.0
    assert (2.0 - x).dtype == np.float32
    with pytest.raises(TypeError, match="integer array"):
        lax_ew.add(jnp.asarray(np.int32(3)), 1.5)


@pytest.mark.parametrize("op,name", [(lambda a, b: a + b, "add"),
                                     (lambda a, b: a - b, "subtract"),
                                     (lambda a, b: a * b, "multiply")])
def test_operators_and_reflected_operators_as_the_general_path(op, name):
    """``x + y``, ``2.0 - x``, ``x * 1.5``: the operators carry the remembered plans too
    (the reflected ones with the operands swapped back); met twice, equal to the ufunc's
    general path bit for bit, weak types included."""
    general = _GENERAL[name]
    arrays = [a for a in _arrays() if a.dtype != np.bool_]
    for x in arrays:
        for y in [x, jnp.asarray(np.flip(np.asarray(x)).copy()), *_SCALARS]:
            for args in ((x, y), (y, x)):
                got, err = _outcome_twice(op, *args)
                want, want_err = _outcome(general, *args)
                assert err == want_err, (name, args)
                if got is not None:
                    _same(got, want)


_UNARY = ["exp", "exp2", "log", "log1p", "sqrt", "sin", "cos", "tan", "tanh", "negative"]


@pytest.mark.parametrize("name", _UNARY)
def test_unary_ufuncs_as_the_general_path(name):
    """``jnp.sin(x)``, ``-x``...: the remembered plan of ``eager_unary_op`` gives the
    general path's result (``lax.<op>`` after NumPy's promotion) bit for bit, dtype and
    weak type included, met once and twice; bool's error for ``negative`` stays."""
    fast = getattr(jnp, name)
    general = fast.__wrapped_general__
    for x in _arrays():
        got, err = _outcome_twice(fast, x)
        want, want_err = _outcome(general, x)
        assert err == want_err, (name, x)
        if got is not None:
            _same(got, want)
    if name == "negative":
        x = jnp.asarray(np.array([1.0, -0.0], np.float32))
        _same(-x, general(x))
        _same(-(-x), x)


def test_remembered_plans_follow_the_aval_not_its_address():
    """Plans are keyed by the operands' aval objects, held by the plan: arrays of other
    avals (shape, dtype, weak type) never take a plan made for another, also after the
    plans are dropped and new avals are made."""
    for _ in range(3):
        a = jnp.asarray(np.array([1.0, 2.0], np.float32))
        b = jnp.asarray(np.array([1.0, 2.0, 3.0], np.float64))
        w = jnp.asarray(2.0)
        for _ in range(2):
            assert (a * 1.5).dtype == np.float32 and not (a * 1.5).aval.weak_type
            assert (b * 1.5).dtype == np.float64 and (b * 1.5).shape == (3,)
            assert (w * 1.5).aval.weak_type and (1.5 * w).aval.weak_type
            assert (a + a).shape == (2,) and (b - b).shape == (3,)
        for op in (jnp.multiply, type(a).__mul__, type(a).__rmul__, type(a).__add__):
            op.eager_plans.clear()


def test_plan_used_last_is_per_operand_pair_and_not_used_under_tracing():
    """Each op remembers the plan it used last by its operands' avals (or Python float):
    alternating operand pairs of other shapes, dtypes, weak types and sides never reuse
    it, and a primed op still stages out under make_jaxpr."""
    a = jnp.asarray(np.array([1.0, 2.0], np.float32))
    b = jnp.asarray(np.array([1.0, 2.0, 3.0], np.float64))
    i = jnp.asarray(np.array([3, 4], np.int32))
    w = jnp.asarray(2.0)
    cases = [(a, a, np.float32, (2,), False), (a, 0.5, np.float32, (2,), False),
             (0.5, a, np.float32, (2,), False), (b, b, np.float64, (3,), False),
             (w, 0.5, w.dtype, (), True), (a, w, np.float32, (2,), False),
             (i, i, np.int32, (2,), False), (i, 0.5, np.float64, (2,), True)]
    for _ in range(3):
        for x, y, dt, shape, weak in cases + cases[::-1]:
            for op, f in ((jnp.subtract, np.subtract), (type(a).__sub__, np.subtract),
                          (type(a).__rsub__, lambda u, v: np.subtract(v, u))):
                if op is type(a).__rsub__ and type(y) is not float:
                    continue
                if type(x) is float and op is not jnp.subtract:
                    continue
                got = op(x, y)
                assert got.dtype == dt and got.shape == shape and got.aval.weak_type == weak
                want = f(np.asarray(x, dt), np.asarray(y, dt))
                np.testing.assert_array_equal(np.asarray(got), want)
    c = jnp.asarray(np.arange(3.0, dtype=np.float32))
    for _ in range(2):
        _ = c * 2.0, c * c
    jaxpr = tracer.make_jaxpr(lambda y: c * 2.0 + c * c + y)(np.ones(3, np.float32))
    assert [e.primitive.name for e in jaxpr.jaxpr.eqns].count("mul") == 2


def test_staged_not_evaluated_under_tracing():
    """Under make_jaxpr (and jit) an op on concrete Arrays is staged out, as in JAX: the
    fast path must not evaluate it eagerly."""
    c = jnp.asarray(np.arange(3.0, dtype=np.float32))
    jaxpr = tracer.make_jaxpr(lambda y: c * 2.0 + y)(np.ones(3, np.float32))
    prims = [e.primitive.name for e in jaxpr.jaxpr.eqns]
    assert "mul" in prims and "add" in prims
    f = tracer.jit(lambda y: (c * 2.0) + (c + c) + y)
    np.testing.assert_array_equal(np.asarray(f(np.ones(3, np.float32))),
                                  np.arange(3.0, dtype=np.float32) * 4 + 1)


def test_transformations_see_tracers_not_the_fast_path():
    f = lambda x: jnp.sum(x * 3.0 + x * x)
    x = np.array([1.0, -2.0, 0.5])
    np.testing.assert_allclose(np.asarray(tracer.grad(f)(x)), 3.0 + 2 * x)
    np.testing.assert_allclose(np.asarray(tracer.vmap(tracer.grad(f))(np.stack([x, 2 * x]))),
                               np.stack([3.0 + 2 * x, 3.0 + 4 * x]))


def test_eval_plans_keep_error_state_and_low_precision_dispatch():
    """``core.eval_primitive``'s memoised plan runs the bare NumPy function under an
    ignoring error state: a user's ``np.errstate(all="raise")`` neither raises inside an
    op (IEEE results are the semantics) nor is lost after it; a primitive first met on
    float32 operands still widens and rounds when it meets bfloat16 ones (the plan is
    per aval), and results stay read-only."""
    import ml_dtypes
    big = jnp.asarray(np.array([3e38, -3e38, 1.0], np.float32))
    with np.errstate(all="raise"):
        s = big + big                     # overflow: inf, no FloatingPointError
        q = jnp.sqrt(jnp.asarray(np.float32(-1.0)))
        lg = jnp.log(jnp.asarray(np.array([0.0, -1.0], np.float32)))
        with pytest.raises(FloatingPointError):
            np.float32(3e38) * np.float32(10)   # the user's state is still in force
    np.testing.assert_array_equal(np.asarray(s), [np.inf, -np.inf, 2.0])
    assert np.isnan(np.asarray(q)) and np.asarray(lg)[0] == -np.inf
    assert not np.asarray(s).flags.writeable
    x32 = np.array([1.0, 1.0078125, 3.0], np.float32)     # bf16-representable
    want = (x32 * x32).astype(ml_dtypes.bfloat16)          # 1.0078125**2 rounds
    a32 = jnp.asarray(x32)
    _ = a32 * a32, jnp.sin(a32)
    b = jnp.asarray(x32.astype(ml_dtypes.bfloat16))
    got = b * b
    assert got.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(np.asarray(got).view(np.uint16), want.view(np.uint16))
    np.testing.assert_array_equal(
        np.asarray(jnp.sin(b)).view(np.uint16),
        np.sin(x32.astype(ml_dtypes.bfloat16).astype(np.float32))
        .astype(ml_dtypes.bfloat16).view(np.uint16))


_BASIC_INDICES = [
    0, -1, 2, 3, -4, 7, -9, (1, 2), (-1, -3, 0), (), Ellipsis, None, (None, 1),
    slice(None), slice(1, 3), slice(None, None, -1), slice(5, -9, -2), slice(10, 20),
    slice(-100, 100, 3), (Ellipsis, 1), (0, Ellipsis, None, slice(None, None, 2)),
    (slice(0, 0), 1), (1, Ellipsis, -1), (None, Ellipsis, None),
    # not basic indexing in range (the general path: clamps, NumPy ints, arrays, masks)
    5, -6, (0, 9), np.int32(1), (slice(np.int64(1), None),), [0, 2], (True,),
]


@pytest.mark.parametrize("weak", [False, True])
@pytest.mark.parametrize("idx", _BASIC_INDICES, ids=repr)
def test_eager_indexing_fast_path_equals_the_traced_path(idx, weak):
    # tracer.numpy.indexing._eager_basic_getitem: concrete Arrays, no transformation
    # active, in-range Python ints, slices, None and Ellipsis; what it gives must be what
    # the slice/rev/squeeze path gives under jit (values, shape, dtype, weak type), and
    # every other index still takes that path (JAX's clamping of static ints)
    a = np.arange(60, dtype=np.float32).reshape(4, 3, 5) - 7.5
    x = jnp.asarray(a)
    if weak:
        x = tracer.core.Array(a, weak_type=True)
    eager = x[idx]
    traced = tracer.jit(lambda v: v[idx])(x)
    assert eager.shape == traced.shape and eager.dtype == traced.dtype
    assert eager.aval.weak_type == traced.aval.weak_type == weak
    np.testing.assert_array_equal(np.asarray(eager), np.asarray(traced))
    with pytest.raises(TypeError, match="immutable"):
        eager[...] = 0
    assert not eager._value.flags.writeable


def test_eager_indexing_fast_path_leaves_transformations_alone():
    # under grad/vmap the index goes through the primitives (a tracer, or a concrete Array
    # closed over while a transformation is active)
    a = np.arange(6.0)
    g = tracer.grad(lambda v: v[1] * 3.0 + v[-1])(jnp.asarray(a))
    np.testing.assert_array_equal(np.asarray(g), [0, 3, 0, 0, 0, 1])
    c = jnp.asarray(a)
    out = tracer.vmap(lambda s: c[2] * s + s[1:2].sum())(jnp.asarray(a.reshape(3, 2)))
    np.testing.assert_array_equal(np.asarray(out), a[2] * a.reshape(3, 2) + a.reshape(3, 2)[:, 1:2])
    jaxpr = tracer.make_jaxpr(lambda v: c[2] + v)(1.0)
    assert "slice" in str(jaxpr) or "squeeze" in str(jaxpr)


def _reduction_arrays():
    import ml_dtypes
    vals = [0.0, -0.0, 1.5, -2.0, 1.5, np.inf, -np.inf, np.nan, 1e-8, -0.0, 3.0, 3.0]
    for dt in ("float16", "float32", "float64", ml_dtypes.bfloat16):
        a = np.array(vals, dt)
        yield jnp.asarray(a.reshape(3, 4))
        yield jnp.asarray(np.array([-0.0, 0.0, -0.0], dt))       # zeros of both signs
        yield jnp.asarray(np.array([-0.0, -0.0], dt))
        yield jnp.asarray(np.array([2.0, 2.0, -1.0], dt))         # a repeated maximum
        yield jnp.asarray(a[:1].reshape(()))
        yield jnp.asarray(np.zeros((0, 3), dt))
        yield jnp.asarray(np.ones((1, 5), dt))
    yield jnp.asarray(np.array([[0, 1, -3], [7, 2, 2]], np.int32))
    yield jnp.asarray(np.array([True, False]))
    yield jnp.asarray(2.5)                                         # weakly typed
    yield jnp.asarray(np.array([1 + 2j, -0.0 - 1j], np.complex64))


@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "mean"])
def test_eager_reductions_equal_the_traced_path(name):
    # tracer.numpy.reductions._eager_reduction and mean's fast path: what they give must
    # be what the traced program gives on the NumPy tier (the same impls through jit):
    # values bit for bit (signed zeros, NaN, ties), dtype, weak type, shape, errors
    fn = getattr(jnp, name)
    with _jit_compile("none"):
        for x in _reduction_arrays():
            for axis in [None, 0, -1, (1, 0), ()]:
                if x.ndim == 0 and axis not in (None, 0, -1, ()):
                    continue
                for keepdims in (False, True):
                    kw = dict(axis=axis, keepdims=keepdims)
                    got, err = _outcome(lambda v: fn(v, **kw), x)
                    want, want_err = _outcome(tracer.jit(lambda v: fn(v, **kw)), x)
                    assert (err is None) == (want_err is None), (name, x, kw, err, want_err)
                    if got is not None:
                        _same(got, want)
                        assert not got.aval.weak_type


class _jit_compile:
    def __init__(self, mode):
        self.mode = mode

    def __enter__(self):
        self.old = tracer.config.jit_compile
        tracer.config.update("jit_compile", self.mode)

    def __exit__(self, *exc):
        tracer.config.update("jit_compile", self.old)


def test_eager_reductions_leave_transformations_alone():
    x = np.array([[1.0, -2.0], [0.5, 4.0]])
    np.testing.assert_array_equal(np.asarray(tracer.grad(lambda v: jnp.max(v) + v.sum())(x)),
                                  [[1, 1], [1, 2]])
    np.testing.assert_array_equal(np.asarray(tracer.vmap(jnp.mean)(jnp.asarray(x))),
                                  x.mean(1))
    c = jnp.asarray(x)
    jaxpr = tracer.make_jaxpr(lambda v: c.sum() + v)(1.0)
    assert "reduce_sum" in str(jaxpr)
    with pytest.raises(ValueError, match="zero-size array to reduction operation max"):
        jnp.max(jnp.zeros((0, 2)))


def test_eager_matmul_equals_the_general_path(monkeypatch):
    """``W @ h`` of concrete Arrays (1-D and 2-D, one float or complex dtype) runs the
    general path's impls at once (``manipulation._eager_matmul``): the same bits, dtype,
    shape and weak type as the traced route, also for transposed and strided operands,
    empty and size-1 dimensions, inf and NaN; a shape mismatch keeps the general error."""
    from tracer.numpy import manipulation
    rng = np.random.default_rng(0)
    shapes = [((3, 4), (4, 5)), ((4,), (4, 2)), ((3, 4), (4,)), ((4,), (4,)),
              ((0, 4), (4, 2)), ((3, 0), (0, 2)), ((1, 1), (1, 1)), ((1,), (1,)),
              ((2, 7), (7, 0))]
    cases = []
    for dt in ("float32", "float64", "complex64", "complex128"):
        for sa, sb in shapes:
            a = rng.normal(size=sa).astype(dt)
            b = rng.normal(size=sb).astype(dt)
            if a.size > 2:
                a.reshape(-1)[:2] = [np.inf, np.nan]
            cases.append((jnp.asarray(a), jnp.asarray(b)))
        w = jnp.asarray(rng.normal(size=(5, 6)).astype(dt))
        cases += [(w.T, w[:, 1]), (w[:, 2], w), (w, w.T)]
    cases.append((jnp.asarray(2.0) * jnp.ones(3), jnp.ones(3)))       # weak: general
    got = [_outcome_twice(lambda a, b: a @ b, a, b) for a, b in cases]
    monkeypatch.setattr(manipulation, "_eager_matmul", lambda a, b: None)
    for (a, b), (g, err) in zip(cases, got):
        want, want_err = _outcome(lambda a, b: a @ b, a, b)
        assert err == want_err
        if g is not None:
            _same(g, want)
    with pytest.raises(ValueError, match="matmul"):
        jnp.ones((2, 3)) @ jnp.ones((2, 3))


@pytest.mark.parametrize("sa,sb", [((2, 3), (2,)), ((3,), (2, 4)), ((5, 2, 3), (4, 1))])
def test_matmul_mismatch_names_the_shapes_given(sa, sb):
    """The error names the operands' shapes as given (not the matrices a 1-D operand
    becomes inside), eagerly and under jit."""
    want = rf"shapes \({sa[0]},.*\) and \({sb[0]},"
    with pytest.raises(ValueError, match=want):
        jnp.ones(sa) @ jnp.ones(sb)
    with pytest.raises(ValueError, match=want):
        tracer.jit(lambda a, b: a @ b)(np.ones(sa, np.float32), np.ones(sb, np.float32))


def test_eager_matmul_follows_enable_x64():
    """float64 Arrays made before ``enable_x64`` is switched off multiply as the general
    path does then (float32), and as float64 again once it is back on."""
    a = jnp.asarray(np.ones((2, 2)))
    assert (a @ a).dtype == np.float64
    tracer.config.update("enable_x64", False)
    try:
        assert (a @ a).dtype == np.float32
    finally:
        tracer.config.update("enable_x64", True)
    assert (a @ a).dtype == np.float64


def test_remembered_plans_run_ufuncs_quietly_on_every_thread():
    """A remembered plan calls a NumPy ufunc in the quiet context (``core.quiet_run``):
    overflow, 0/0 and log(-1) give IEEE values without a warning or a FloatingPointError
    under a user's ``np.errstate(all="raise")``, call after call, and the user's state is
    in force again right after; four threads doing the same on large arrays (the ufuncs
    release the GIL, so a thread finds the context entered by another and switches the
    error state instead) get the same bytes, with no error."""
    import threading
    import warnings
    big = jnp.asarray(np.array([3e38, -3e38, 1.0, 0.0], np.float32))
    zero = jnp.asarray(np.zeros(4, np.float32))
    for _ in range(3):                       # first meeting, then the remembered plans
        with np.errstate(all="raise"), warnings.catch_warnings():
            warnings.simplefilter("error")
            s, m, d, lg, ng = big + big, big * 10.0, zero / zero, jnp.log(-big), -big
            with pytest.raises(FloatingPointError):
                np.float32(3e38) * np.float32(10)
        np.testing.assert_array_equal(np.asarray(s), [np.inf, -np.inf, 2.0, 0.0])
        np.testing.assert_array_equal(np.asarray(m), [np.inf, -np.inf, 10.0, 0.0])
        assert np.isnan(np.asarray(d)).all() and np.isnan(np.asarray(lg)[0])
        assert not np.asarray(s).flags.writeable
    x = jnp.asarray(np.linspace(-1e38, 3e38, 1 << 18).astype(np.float32))
    want = np.asarray(x + x), np.asarray(jnp.exp(x))
    errors, results = [], []

    def work():
        try:
            with np.errstate(all="raise"):
                for _ in range(20):
                    got = x + x, jnp.exp(x)
            results.append(got)
        except Exception as e:          # (a context entered twice: RuntimeError)
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 4
    for got in results:
        for g, w in zip(got, want):
            assert np.asarray(g).tobytes() == w.tobytes()


def test_quiet_context_entered_again_and_ndarray_subclasses():
    """An eager op run while its thread's quiet context is entered (a finalizer the
    collector runs inside a ufunc) switches the error state instead, with the same
    result; an ndarray subclass given to a primitive (np.memmap, a user's with
    ``__array_ufunc__``) becomes a plain ndarray value, so no Python hook runs inside
    the context."""
    from tracer import core, lax
    a = jnp.asarray(np.array([3e38, 1.0, 0.0], np.float32))
    want = [np.asarray(a + a), np.asarray(a * 2.0), np.asarray(jnp.exp(a))]
    _ = a + a, a * 2.0, jnp.exp(a)             # (the plans are remembered)
    with np.errstate(all="raise"):
        got = core.quiet_run()(lambda: [a + a, a * 2.0, jnp.exp(a)])
    for g, w in zip(got, want):
        assert np.asarray(g).tobytes() == w.tobytes()
    calls = []

    class Logged(np.ndarray):
        def __array_ufunc__(self, uf, method, *inputs, **kw):
            calls.append(jnp.ones(2) * 2.0)
            inputs = [i.view(np.ndarray) if isinstance(i, Logged) else i for i in inputs]
            return getattr(uf, method)(*inputs, **kw)

    for make in (lambda v: lax.reshape(v, (4,)), tracer.Array, lambda v: jnp.reshape(v, 4)):
        x = make(np.arange(4.0).view(Logged))
        assert type(np.asarray(x)) is np.ndarray and type(x._value) is np.ndarray
        for _ in range(3):
            np.testing.assert_array_equal(np.asarray(x + x), [0.0, 2.0, 4.0, 6.0])
    assert not calls


def test_tracing_in_one_thread_leaves_eager_ops_of_others_eager():
    """The trace stack and the dynamic trace are per thread (as JAX's): while one thread
    is inside a jitted function's tracing, a grad and a vmap, another thread's ops on
    concrete Arrays run eagerly -- Arrays with the right values, none of them staged into
    the first thread's program -- and its own jit, grad and vmap work meanwhile."""
    import threading
    started, release = threading.Event(), threading.Event()
    seen = {}

    def f(x):
        def inner(v):
            y = jnp.sin(v) * 2.0
            started.set()
            release.wait(30)
            return jnp.sum(y + 1.0)
        return tracer.vmap(tracer.grad(inner))(x)

    def traced():
        seen["jaxpr"] = tracer.make_jaxpr(f)(np.ones((2, 3)))
        seen["jit"] = np.asarray(tracer.jit(f)(np.ones((2, 3))))

    t = threading.Thread(target=traced)
    t.start()
    assert started.wait(30)
    x = jnp.asarray(np.array([1.0, 2.0], np.float32))
    got = [x + x, 2.0 * x, jnp.exp(x), x.sum(), x @ x, x[0], jnp.sin(x)]
    assert all(type(g) is tracer.Array for g in got)
    np.testing.assert_allclose(np.asarray(got[0]), [2.0, 4.0])
    np.testing.assert_allclose(float(got[4]), 5.0)
    np.testing.assert_allclose(np.asarray(tracer.grad(lambda v: jnp.sum(v * v))(x)), [2, 4])
    np.testing.assert_allclose(np.asarray(tracer.jit(lambda v: v * 3.0)(x)), [3, 6])
    np.testing.assert_allclose(np.asarray(tracer.vmap(lambda v: v + 1.0)(x)), [2, 3])
    release.set()
    started.clear()
    t.join(60)
    assert not t.is_alive()
    names = [e.primitive.name for e in seen["jaxpr"].jaxpr.eqns]
    assert "exp" not in names and "dot_general" not in names
    np.testing.assert_allclose(seen["jit"], 2 * np.cos(np.ones((2, 3))))
