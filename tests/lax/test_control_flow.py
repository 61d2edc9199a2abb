"""Control flow (lax/control_flow.py): cond, switch, while_loop, fori_loop, scan, map,
associative_scan, optimization_barrier, composite, closed_call.

Each primitive against an unrolled Python reference, eagerly and under jit; derivatives
against finite differences (check_grads, both modes where defined); vmap against a Python
loop with batched and unbatched predicates/operands; nested control flow; the partial
evaluation and DCE rules; and the errors for bad input."""
from __future__ import annotations

import numpy as np
import pytest

import lax
import tracer
import tracer.numpy as tnp
from tracer.core import Array
from tracer.interpreters import partial_eval as pe
from tracer.jaxpr import check_jaxpr
from tracer.test_util import check_grads, check_jit, check_vmap


def cjit(f, args):
    """jit against eager: compiled transcendental functions (libm) may be a few ulp from
    NumPy's vectorized ones, and loops carry such differences along."""
    return check_jit(f, args, rtol=1e-12, atol=1e-14)


@pytest.fixture
def rng():
    return np.random.default_rng(7)


def prims(closed):
    """Names of the primitives of a jaxpr's top-level equations."""
    return [e.primitive.name for e in closed.jaxpr.eqns]


def all_prims(jaxpr):
    """Names of all primitives, in sub-jaxprs too."""
    out = []
    for e in jaxpr.eqns:
        out.append(e.primitive.name)
        for v in e.params.values():
            for item in (v if isinstance(v, (tuple, list)) else (v,)):
                if hasattr(item, "jaxpr") and hasattr(item, "consts"):
                    out += all_prims(item.jaxpr)
    return out


# ========================================= cond ==========================================

def _branchy(p, x):
    return lax.cond(p > 0, lambda x: tnp.sin(x) * 2.0, lambda x: tnp.cos(x) + x, x)


def _branchy_ref(p, x):
    return np.sin(x) * 2.0 if p > 0 else np.cos(x) + x


@pytest.mark.parametrize("p", [1.5, -0.5, 0.0])
def test_cond_matches_python(rng, p):
    x = rng.standard_normal(4)
    np.testing.assert_allclose(_branchy(p, x), _branchy_ref(p, x), rtol=1e-15)
    cjit(_branchy, (p, x))


def test_cond_only_runs_the_selected_branch():
    calls = []

    def count(x):
        calls.append(1)
        return x

    # Tracing runs both branches once; evaluation runs only the selected one (a branch
    # that would fail on the data is harmless when not selected).
    out = lax.cond(True, lambda x: x + 1, lambda x: tnp.log(x - 10.0), 1.0)
    assert float(out) == 2.0
    lax.cond(False, count, count, 1.0)
    assert len(calls) == 2


def test_cond_staged_jaxpr():
    closed = tracer.make_jaxpr(lambda p, x: lax.cond(p, lambda x: x + 1.0,
                                                     lambda x: x * 2.0, x))(True, 1.0)
    assert prims(closed) == ["convert_element_type", "cond"]
    eqn = closed.jaxpr.eqns[1]
    false_b, true_b = eqn.params["branches"]
    assert [e.primitive.name for e in false_b.jaxpr.eqns] == ["mul"]
    assert [e.primitive.name for e in true_b.jaxpr.eqns] == ["add"]
    check_jaxpr(closed.jaxpr)
    assert "cond[" in str(closed)


def test_cond_pytrees_and_operand_forms(rng):
    x, y = rng.standard_normal(3), rng.standard_normal(2)
    out = lax.cond(True, lambda a, b: {"s": a * 2, "t": (b, a.sum())},
                   lambda a, b: {"s": a, "t": (b * 0, a.max())}, x, y)
    np.testing.assert_allclose(out["s"], x * 2)
    np.testing.assert_allclose(out["t"][0], y)
    np.testing.assert_allclose(out["t"][1], x.sum())
    # No operands at all.
    assert float(lax.cond(False, lambda: 1.0, lambda: 2.0)) == 2.0
    # operand= keyword and the old per-branch operand form.
    assert float(lax.cond(True, lambda v: v + 1, lambda v: v, operand=1.0)) == 2.0
    assert float(lax.cond(False, 1.0, lambda a: a + 1, 10.0, lambda b: b * 2)) == 20.0


def test_cond_numeric_predicates():
    # A number is a predicate, nonzero meaning true (as in JAX): ints, floats, -0.0, nan.
    f = lambda p: lax.cond(p, lambda: 1, lambda: 0)
    assert [int(f(v)) for v in (0, 3, -1, 0.0, -0.0, 0.5, np.nan)] == [0, 1, 1, 0, 0, 1, 1]
    assert int(tracer.jit(f)(np.int32(0))) == 0
    assert int(tracer.jit(f)(np.float32(2))) == 1


def test_cond_closure_over_outer_values(rng):
    w = rng.standard_normal(3)
    x = rng.standard_normal(3)

    def f(w, x):
        return lax.cond(x[0] > 0, lambda: w * x, lambda: w + x)

    check_grads(f, (w, x), order=2)
    check_grads(f, (w, -np.abs(x)), order=2)
    cjit(f, (w, x))
    check_vmap(f, (rng.standard_normal((4, 3)), rng.standard_normal((4, 3))))


@pytest.mark.parametrize("p", [1.0, -1.0])
def test_cond_grads(rng, p):
    x = rng.standard_normal(3)
    check_grads(lambda x: _branchy(p, x), (x,), order=2)
    check_grads(lambda x: tracer.jit(lambda x: _branchy(p, x))(x), (x,), order=1)


def test_cond_grad_with_integer_outputs(rng):
    x = rng.standard_normal(3)

    def f(x):
        i, y = lax.cond(x[0] > 0, lambda x: (1, x * 3), lambda x: (2, tnp.exp(x)), x)
        return y * i

    check_grads(f, (x,), order=2)
    check_grads(f, (-np.abs(x),), order=2)


def test_cond_vmap(rng):
    ps, xs = rng.standard_normal(5), rng.standard_normal((5, 3))
    check_vmap(_branchy, (ps, xs))                              # both batched
    check_vmap(_branchy, (ps, xs[0]), in_axes=(0, None))         # batched predicate only
    check_vmap(_branchy, (1.0, xs), in_axes=(None, 0))           # batched operand only
    check_vmap(_branchy, (ps, xs.T), in_axes=(0, 1))
    # A batched predicate is a select of both branches.
    closed = tracer.make_jaxpr(tracer.vmap(_branchy))(ps, xs)
    assert "cond" not in prims(closed) and "select_n" in prims(closed)
    # An unbatched predicate stays a cond; unbatched outputs stay unbatched.
    closed = tracer.make_jaxpr(tracer.vmap(_branchy, in_axes=(None, 0)))(1.0, xs)
    assert "cond" in prims(closed)
    out = tracer.vmap(lambda p, x: lax.cond(p > 0, lambda: (x, 1.0), lambda: (x, 2.0)),
                      in_axes=(None, 0))(1.0, xs)
    np.testing.assert_array_equal(out[0], xs)
    assert out[1].shape == (5,)


def test_cond_vmap_grad_composition(rng):
    ps, xs = rng.standard_normal(4), rng.standard_normal((4, 3))
    g = tracer.vmap(tracer.grad(lambda p, x: tnp.sum(_branchy(p, x)), argnums=1))
    expect = np.stack([np.where(p > 0, 2 * np.cos(x), 1 - np.sin(x)) for p, x in zip(ps, xs)])
    np.testing.assert_allclose(g(ps, xs), expect, rtol=1e-12)
    check_grads(lambda x: tracer.vmap(_branchy)(ps, x), (xs,), order=1)


def test_cond_weak_types():
    out = lax.cond(True, lambda: 1.0, lambda: 2.0)
    assert out.weak_type
    out = lax.cond(True, lambda: 1.0, lambda: np.array(2.0))
    assert not out.weak_type


# ======================================== switch =========================================

_BRANCHES = [lambda x: x, lambda x: tnp.sin(x), lambda x: x * 3.0]


def _sw(i, x):
    return lax.switch(i, _BRANCHES, x)


@pytest.mark.parametrize("i,branch", [(-5, 0), (-1, 0), (0, 0), (1, 1), (2, 2), (3, 2),
                                      (2 ** 40, 2)])
def test_switch_clamps_index(rng, i, branch):
    x = rng.standard_normal(3)
    ref = [x, np.sin(x), x * 3.0][branch]
    np.testing.assert_allclose(_sw(i, x), ref, rtol=1e-15)
    cjit(_sw, (i, x))


def test_cond_primitive_runs_last_branch_out_of_range(rng):
    # The spec's Conditional: an index < 0 or >= N runs branch N-1 (the default branch).
    x = rng.standard_normal(3)
    closed = tracer.make_jaxpr(lambda x: _sw(1, x))(x)
    branches = closed.jaxpr.eqns[-1].params["branches"]
    for i, expect in [(-1, x * 3.0), (7, x * 3.0), (1, np.sin(x)), (0, x)]:
        out = lax.cond_p.bind(Array(np.int32(i)), Array(x), branches=branches)
        np.testing.assert_allclose(out[0], expect, rtol=1e-15)
    # ... also when the index is batched (vmap turns the cond into a select).
    f = lambda i, x: lax.cond_p.bind(i, x, branches=branches)[0]
    idx = np.array([-3, 0, 1, 2, 9], np.int32)
    got = tracer.vmap(f, in_axes=(0, None))(idx, x)
    np.testing.assert_allclose(got, np.stack([x * 3, x, np.sin(x), x * 3, x * 3]), rtol=1e-15)


def test_switch_grads_and_vmap(rng):
    x = rng.standard_normal(3)
    for i in (0, 1, 2):
        check_grads(lambda x: _sw(i, x), (x,), order=2)
    check_vmap(_sw, (np.array([-1, 0, 1, 2, 5]), rng.standard_normal((5, 3))))
    check_vmap(_sw, (np.array([2, 0, 1]), x), in_axes=(0, None))
    check_vmap(_sw, (1, rng.standard_normal((4, 3))), in_axes=(None, 0))


def test_switch_single_branch_and_operandless():
    assert float(lax.switch(3, [lambda: 4.0])) == 4.0
    assert [int(lax.switch(i, [lambda: 10, lambda: 20])) for i in (0, 1)] == [10, 20]


# ====================================== while_loop =======================================

def _wl(x):
    return lax.while_loop(lambda c: c[0] < 5,
                          lambda c: (c[0] + 1, tnp.sin(c[1]) * 1.1 + 0.1), (0, x))[1]


def _wl_ref(x):
    v = np.asarray(x)
    for _ in range(5):
        v = np.sin(v) * 1.1 + 0.1
    return v


def test_while_loop_matches_python(rng):
    x = rng.standard_normal(3)
    np.testing.assert_allclose(_wl(x), _wl_ref(x), rtol=1e-15)
    cjit(_wl, (x,))
    assert int(lax.while_loop(lambda c: c < 10, lambda c: c + 3, 0)) == 12
    # A condition false at the start: the initial value comes back.
    assert float(lax.while_loop(lambda c: c > 10, lambda c: c + 1, 2.5)) == 2.5
    closed = tracer.make_jaxpr(_wl)(x)
    assert prims(closed) == ["while"]
    check_jaxpr(closed.jaxpr)


def test_while_loop_traced_bound(rng):
    def count_to(n, x):
        return lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 2.0), (0, x))

    x = rng.standard_normal(2)
    i, v = tracer.jit(count_to)(4, x)
    assert int(i) == 4
    np.testing.assert_allclose(v, x * 16)


def test_while_loop_forward_mode(rng):
    x = rng.standard_normal(3)
    check_grads(_wl, (x,), order=2, modes=("fwd",))
    check_grads(lambda x: tracer.jit(_wl)(x), (x,), order=1, modes=("fwd",))
    # linearize (jvp + partial evaluation) works too: the known carries run now.
    y, f_jvp = tracer.linearize(_wl, x)
    t = rng.standard_normal(3)
    np.testing.assert_allclose(y, _wl_ref(x), rtol=1e-15)
    np.testing.assert_allclose(f_jvp(t), tracer.jvp(_wl, (x,), (t,))[1], rtol=1e-12)
    y, f_jvp = tracer.linearize(tracer.jit(_wl), x)
    np.testing.assert_allclose(f_jvp(t), tracer.jvp(_wl, (x,), (t,))[1], rtol=1e-12)
    jac = tracer.jacfwd(_wl)(x)
    np.testing.assert_allclose(jac, np.diag(np.diag(jac)), atol=0)


def test_while_loop_reverse_mode_raises(rng):
    x = rng.standard_normal(3)
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work for "
                                         "lax.while_loop.*lax.scan.*fori_loop with static"):
        tracer.grad(lambda x: tnp.sum(_wl(x)))(x)
    with pytest.raises(ValueError, match="Try using lax.scan"):
        tracer.grad(lambda x: tnp.sum(tracer.jit(_wl)(x)))(x)


def _collatz_steps(n):
    return lax.while_loop(
        lambda c: c[0] > 1,
        lambda c: (tnp.where(c[0] % 2 == 0, c[0] // 2, 3 * c[0] + 1), c[1] + 1),
        (n, 0))[1]


def test_while_loop_vmap_batched_predicate():
    ns = np.array([1, 2, 3, 6, 7, 27])
    check_vmap(_collatz_steps, (ns,))
    np.testing.assert_array_equal(tracer.vmap(_collatz_steps)(ns), [0, 1, 7, 8, 16, 111])
    # Members that finish early keep their carry while the others go on: also for carries
    # that no member's predicate reads.
    f = lambda n, x: lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 2.0),
                                    (0, x))
    check_vmap(f, (np.array([0, 3, 1]), np.ones(2)), in_axes=(0, None))
    check_vmap(f, (np.array([0, 3, 1]), np.ones((3, 2))), in_axes=(0, 0))


def test_while_loop_vmap_unbatched_predicate(rng):
    xs = rng.standard_normal((4, 3))
    check_vmap(_wl, (xs,))
    closed = tracer.make_jaxpr(tracer.vmap(_wl))(xs)
    (eqn,) = closed.jaxpr.eqns
    # The predicate stays unbatched: no reduction over the batch in the condition.
    assert "reduce_or" not in [e.primitive.name for e in eqn.params["cond_jaxpr"].jaxpr.eqns]
    check_vmap(lambda n, x: lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * x),
                                           (0, 1.0))[1], (3, rng.standard_normal(4)),
               in_axes=(None, 0))


def test_while_loop_vmap_of_jvp(rng):
    xs, ts = rng.standard_normal((3, 2)), rng.standard_normal((3, 2))
    f = lambda x, t: tracer.jvp(_wl, (x,), (t,))
    check_vmap(f, (xs, ts))
    ns = np.array([2, 0, 5])
    g = lambda n, x: tracer.jvp(lambda x: lax.while_loop(
        lambda c: c[0] < n, lambda c: (c[0] + 1, tnp.sin(c[1])), (0, x))[1], (x,), (x,))
    check_vmap(g, (ns, xs[:, 0]))


# ======================================= fori_loop =======================================

def _fl(x, lo=0, hi=4):
    return lax.fori_loop(lo, hi, lambda i, c: tnp.sin(c) * i + c, x)


def _fl_ref(x, lo=0, hi=4):
    v = np.asarray(x)
    for i in range(lo, hi):
        v = np.sin(v) * i + v
    return v


@pytest.mark.parametrize("lo,hi", [(0, 4), (2, 5), (3, 3), (5, 2), (-2, 1)])
def test_fori_loop_matches_python(rng, lo, hi):
    x = rng.standard_normal(3)
    np.testing.assert_allclose(_fl(x, lo, hi), _fl_ref(x, lo, hi), rtol=1e-14)
    cjit(lambda x: _fl(x, lo, hi), (x,))
    np.testing.assert_allclose(tracer.jit(_fl)(x, lo, hi), _fl_ref(x, lo, hi), rtol=1e-14)


def test_fori_loop_static_is_scan_dynamic_is_while(rng):
    x = rng.standard_normal(3)
    assert prims(tracer.make_jaxpr(_fl)(x)) == ["scan"]
    assert "while" in prims(tracer.make_jaxpr(lambda x, n: _fl(x, 0, n))(x, 4))
    # The loop index has the bounds' dtype.
    assert lax.fori_loop(0, 3, lambda i, c: c + i, 0).dtype == np.int64
    assert lax.fori_loop(np.int32(0), np.int32(3), lambda i, c: i, np.int32(0)).dtype == np.int32


def test_fori_loop_grads(rng):
    x = rng.standard_normal(3)
    check_grads(_fl, (x,), order=2)                       # static bounds: both modes
    check_grads(lambda x: tracer.jit(_fl)(x), (x,), order=1)
    dyn = tracer.jit(lambda x, n: _fl(x, 0, n))
    check_grads(lambda x: dyn(x, 4), (x,), order=2, modes=("fwd",))
    with pytest.raises(ValueError, match="fori_loop with static start/stop"):
        tracer.grad(lambda x: tnp.sum(dyn(x, 4)))(x)


def test_fori_loop_vmap(rng):
    check_vmap(_fl, (rng.standard_normal((4, 3)),))
    check_vmap(lambda x, n: _fl(x, 0, n), (rng.standard_normal((3, 2)), np.array([0, 2, 5])))


def test_fori_loop_x32(x32):
    out = lax.fori_loop(0, 3, lambda i, c: c + i, 0)
    assert out.dtype == np.int32 and int(out) == 3
    out = lax.fori_loop(0, 3, lambda i, c: c * np.float32(2), 1.0)
    assert out.dtype == np.float32 and float(out) == 8.0


# ========================================= scan ==========================================

def _sc_body(c, x):
    return tnp.tanh(c * x + 1.0), c * x


def _sc(c, xs, reverse=False):
    return lax.scan(_sc_body, c, xs, reverse=reverse)


def _sc_ref(c, xs, reverse=False):
    c = np.asarray(c)
    ys = [None] * len(xs)
    order = range(len(xs) - 1, -1, -1) if reverse else range(len(xs))
    for i in order:
        c, ys[i] = np.tanh(c * xs[i] + 1.0), c * xs[i]
    return c, np.stack(ys) if ys else np.zeros((0,) + c.shape)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("n", [0, 1, 5])
def test_scan_matches_python(rng, reverse, n):
    c, xs = rng.standard_normal(3), rng.standard_normal((n, 3))
    got = _sc(c, xs, reverse)
    want = _sc_ref(c, xs, reverse)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-15)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-15)
    assert got[1].shape == (n, 3)
    cjit(lambda c, xs: _sc(c, xs, reverse), (c, xs))


def test_scan_pytrees_length_and_unroll(rng):
    xs = {"a": rng.standard_normal((4, 2)), "b": np.arange(4)}

    def f(carry, x):
        s, n = carry
        return (s + x["a"] * x["b"], n + 1), {"sq": x["a"] ** 2, "n": n}

    (s, n), ys = lax.scan(f, (np.zeros(2), 0), xs, unroll=2)
    np.testing.assert_allclose(s, (xs["a"] * xs["b"][:, None]).sum(0), rtol=1e-14)
    assert int(n) == 4
    np.testing.assert_array_equal(ys["n"], np.arange(4))
    np.testing.assert_allclose(ys["sq"], xs["a"] ** 2)
    # xs=None with length; ys=None.
    c, ys = lax.scan(lambda c, _: (c * 2, None), 1.0, None, length=5)
    assert float(c) == 32.0 and ys is None
    c, ys = lax.scan(lambda c, _: (c + 1, c), 0, None, length=3, unroll=True)
    np.testing.assert_array_equal(ys, [0, 1, 2])
    cjit(lambda xs: lax.scan(f, (np.zeros(2), 0), xs), (xs,))


def test_scan_staged_jaxpr(rng):
    closed = tracer.make_jaxpr(_sc)(np.ones(3), np.ones((5, 3)))
    (eqn,) = closed.jaxpr.eqns
    assert eqn.primitive.name == "scan"
    assert eqn.params["length"] == 5 and eqn.params["num_carry"] == 1
    assert eqn.params["num_consts"] == 0 and eqn.params["reverse"] is False
    check_jaxpr(closed.jaxpr)
    # Closed-over arrays become consts operands.
    w = rng.standard_normal(3)
    closed = tracer.make_jaxpr(lambda c, xs: lax.scan(lambda c, x: (c * w + x, None), c,
                                                      xs))(np.ones(3), np.ones((2, 3)))
    assert closed.jaxpr.eqns[0].params["num_consts"] == 1


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_grads(rng, reverse):
    c, xs = rng.standard_normal(3), rng.standard_normal((4, 3))
    check_grads(lambda c, xs: _sc(c, xs, reverse), (c, xs), order=2)
    check_grads(lambda c, xs: tracer.jit(lambda c, xs: _sc(c, xs, reverse))(c, xs), (c, xs),
                order=1)


def test_scan_grad_with_consts_and_int_carry(rng):
    w = rng.standard_normal((3, 3)) * 0.5
    xs = rng.standard_normal((4, 3))

    def f(w, h0):
        def body(carry, x):
            h, k = carry
            return (tnp.tanh(w.T @ h + x * k), k + 1), tnp.sum(h * h)
        (h, k), ys = lax.scan(body, (h0, 0), xs)
        return tnp.sum(h) + tnp.sum(ys)

    check_grads(f, (w, np.ones(3)), order=2)
    check_grads(tracer.jit(f), (w, np.ones(3)), order=1)


def test_scan_grad_saves_residuals_per_step(rng):
    # The forward scan stacks one residual per iteration; loop-invariant residuals (here
    # w.T, computed from a const only) are computed once outside the loop, not stacked.
    w, xs = rng.standard_normal((4, 4)), rng.standard_normal((6, 4))

    def loss(w, h0):
        h, _ = lax.scan(lambda h, x: (tnp.tanh(w.T @ h + x), None), h0, xs)
        return tnp.sum(h)

    for g in (tracer.grad(loss), tracer.grad(lambda w, h: tracer.jit(loss)(w, h))):
        closed = tracer.make_jaxpr(g)(w, np.ones(4))
        scans = [e for e in _walk(closed.jaxpr) if e.primitive.name == "scan"]
        fwd = [e for e in scans if not e.params["reverse"]]
        bwd = [e for e in scans if e.params["reverse"]]
        assert len(fwd) == 1 and len(bwd) == 1
        stacked = [v.aval.shape for v in fwd[0].outvars[1:]]
        assert stacked and all(s[0] == 6 for s in stacked)
        assert (6, 4, 4) not in stacked
        np.testing.assert_allclose(g(w, np.ones(4)), _fd_grad(loss, w, np.ones(4)),
                                   rtol=1e-6, atol=1e-8)


def _walk(jaxpr):
    for e in jaxpr.eqns:
        yield e
        for v in e.params.values():
            for item in (v if isinstance(v, (tuple, list)) else (v,)):
                if hasattr(item, "jaxpr") and hasattr(item, "consts"):
                    yield from _walk(item.jaxpr)


def _fd_grad(f, w, h, eps=1e-6):
    g = np.zeros_like(w)
    for idx in np.ndindex(w.shape):
        d = np.zeros_like(w)
        d[idx] = eps
        g[idx] = (float(f(w + d, h)) - float(f(w - d, h))) / (2 * eps)
    return g


def test_scan_vmap(rng):
    c, xs = rng.standard_normal((2, 3)), rng.standard_normal((2, 5, 3))
    check_vmap(_sc, (c, xs))
    check_vmap(_sc, (c[0], xs), in_axes=(None, 0))
    check_vmap(_sc, (c, xs[0]), in_axes=(0, None))
    check_vmap(_sc, (c.T, np.moveaxis(xs, 0, 2)), in_axes=(1, 2))
    check_vmap(lambda c, xs: _sc(c, xs, True), (c, xs))
    # Batched consts only.
    check_vmap(lambda w: lax.scan(lambda c, x: (c * w + x, c), np.zeros(3), np.ones((4, 3))),
               (rng.standard_normal((2, 3)),))
    # vmap of grad and grad of vmap.
    g = tracer.vmap(tracer.grad(lambda c, xs: tnp.sum(_sc(c, xs)[1])))
    want = np.stack([tracer.grad(lambda c: tnp.sum(_sc(c, x)[1]))(ci) for ci, x in zip(c, xs)])
    np.testing.assert_allclose(g(c, xs), want, rtol=1e-12)
    check_grads(lambda c: tracer.vmap(_sc)(c, xs), (c,), order=1)


def test_rnn_grad_matches_unrolled(rng):
    hidden, n_in, steps = 5, 3, 6
    params = (rng.standard_normal((hidden, hidden)) * 0.4,
              rng.standard_normal((hidden, n_in)) * 0.4, rng.standard_normal(hidden) * 0.1)
    xs = rng.standard_normal((steps, n_in))
    h0 = np.zeros(hidden)

    def cell(params, h, x):
        w, u, b = params
        return tnp.tanh(w @ h + u @ x + b)

    def loss_scan(params):
        def body(h, x):
            h = cell(params, h, x)
            return h, tnp.sum(h ** 2)
        h, per_step = lax.scan(body, h0, xs)
        return tnp.sum(per_step) + tnp.sum(h)

    def loss_unrolled(params):
        h, total = h0, 0.0
        for t in range(steps):
            h = cell(params, h, xs[t])
            total = total + tnp.sum(h ** 2)
        return total + tnp.sum(h)

    np.testing.assert_allclose(loss_scan(params), loss_unrolled(params), rtol=1e-14)
    g_scan = tracer.grad(loss_scan)(params)
    g_unrolled = tracer.grad(loss_unrolled)(params)
    g_jit = tracer.jit(tracer.grad(loss_scan))(params)
    for a, b, c in zip(g_scan, g_unrolled, g_jit):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(c, b, rtol=1e-12, atol=1e-14)
    check_grads(lambda w, u, b: loss_scan((w, u, b)), params, order=1)


def test_scan_x32(x32, rng):
    c, ys = lax.scan(lambda c, x: (c + x, c * 2), 0.0, np.arange(4, dtype=np.float32))
    assert c.dtype == np.float32 and ys.dtype == np.float32
    np.testing.assert_array_equal(ys, [0, 0, 2, 6])


# ========================================== map ==========================================

@pytest.mark.parametrize("batch_size", [None, 1, 2, 3, 5, 8])
def test_map(rng, batch_size):
    xs = {"a": rng.standard_normal((5, 2)), "b": rng.standard_normal(5)}
    f = lambda x: (tnp.sum(x["a"]) * x["b"], x["a"] * 2)
    got = lax.map(f, xs, batch_size=batch_size)
    want = [f({"a": xs["a"][i], "b": xs["b"][i]}) for i in range(5)]
    np.testing.assert_allclose(got[0], np.stack([w[0] for w in want]), rtol=1e-14)
    np.testing.assert_allclose(got[1], np.stack([w[1] for w in want]), rtol=1e-14)
    cjit(lambda xs: lax.map(f, xs, batch_size=batch_size), (xs,))
    check_grads(lambda a: lax.map(lambda x: tnp.sin(x) * x, a, batch_size=batch_size),
                (xs["a"],), order=1)


# =================================== associative_scan ====================================

@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 7, 8, 9, 16])
def test_associative_scan_cumsum(rng, n):
    a = rng.standard_normal(n)
    np.testing.assert_allclose(lax.associative_scan(lax.add, a), np.cumsum(a), rtol=1e-12)
    np.testing.assert_allclose(lax.associative_scan(lax.add, a, reverse=True),
                               np.cumsum(a[::-1])[::-1], rtol=1e-12)
    np.testing.assert_array_equal(lax.associative_scan(lax.max, a), np.maximum.accumulate(a))


def test_associative_scan_axis_and_pytrees(rng):
    m = rng.standard_normal((2, 5, 3))
    np.testing.assert_allclose(lax.associative_scan(lax.add, m, axis=1), np.cumsum(m, 1),
                               rtol=1e-12)
    np.testing.assert_allclose(lax.associative_scan(lax.mul, m, axis=-1), np.cumprod(m, -1),
                               rtol=1e-12)
    # A linear recurrence h_t = a_t h_{t-1} + b_t as an associative scan over pairs.
    a, b = rng.uniform(0.5, 1.0, 7), rng.standard_normal(7)

    def comb(x, y):
        return (x[0] * y[0], y[0] * x[1] + y[1])

    _, h = lax.associative_scan(comb, (a, b))
    ref, hv = [], 0.0
    for t in range(7):
        hv = a[t] * hv + b[t]
        ref.append(hv)
    np.testing.assert_allclose(h, ref, rtol=1e-12)
    # Non-commutative: 2x2 matrix products keep their order.
    ms = rng.standard_normal((6, 2, 2))
    got = lax.associative_scan(lambda x, y: tnp.matmul(x, y), ms)
    acc, want = np.eye(2), []
    for t in range(6):
        acc = acc @ ms[t]
        want.append(acc)
    np.testing.assert_allclose(got, np.stack(want), rtol=1e-12)


def test_associative_scan_transforms(rng):
    a = rng.standard_normal((3, 6))
    f = lambda a: lax.associative_scan(lax.add, a, axis=1)
    cjit(f, (a,))
    check_grads(f, (a,), order=1)
    check_vmap(lambda r: lax.associative_scan(lax.mul, r), (a,))


# ============================ barrier, composite, closed_call ============================

def test_optimization_barrier(rng):
    x = rng.standard_normal(3)
    f = lambda x: lax.optimization_barrier((x, x * 2.0))[1] * x
    np.testing.assert_allclose(f(x), 2 * x * x)
    assert "optimization_barrier" in prims(tracer.make_jaxpr(f)(x))
    check_grads(f, (x,), order=2)
    check_vmap(f, (rng.standard_normal((2, 3)),))
    cjit(f, (x,))
    assert lax.optimization_barrier(()) == ()


def test_composite(rng):
    x = rng.standard_normal(3)

    def tanh_scaled(x, scale=2.0):
        return tnp.tanh(x) * scale

    op = lax.composite(tanh_scaled, "my.tanh_scaled", version=1)
    np.testing.assert_allclose(op(x, scale=3.0), np.tanh(x) * 3.0, rtol=1e-15)
    closed = tracer.make_jaxpr(lambda x: op(x, scale=3.0))(x)
    (eqn,) = closed.jaxpr.eqns
    assert eqn.primitive.name == "composite" and eqn.params["name"] == "my.tanh_scaled"
    assert eqn.params["attributes"] == (("scale", 3.0),) and eqn.params["version"] == 1
    check_grads(lambda x: op(x, scale=3.0), (x,), order=2)
    check_vmap(lambda x: op(x), (rng.standard_normal((2, 3)),))
    cjit(lambda x: op(x, scale=0.5), (x,))
    with pytest.raises(TypeError, match="not hashable"):
        op(x, scale=[1.0])


def test_closed_call(rng):
    x = rng.standard_normal(3)
    w = rng.standard_normal(3)
    f = lambda x: lax.closed_call(lambda a, b: tnp.sin(a) * b * w, x, 2.0)
    assert prims(tracer.make_jaxpr(f)(x)) == ["closed_call"]
    np.testing.assert_allclose(f(x), np.sin(x) * 2 * w, rtol=1e-15)
    check_grads(f, (x,), order=2)
    check_vmap(f, (rng.standard_normal((2, 3)),))
    cjit(f, (x,))


# =================================== nested control flow =================================

def _nested(x):
    """A while loop whose body branches; one branch runs a scan."""
    def body(c):
        i, v = c

        def with_scan(v):
            return lax.scan(lambda h, _: (tnp.sin(h) + 1.0, None), v, None, length=2)[0]

        return i + 1, lax.cond(i % 2 == 0, with_scan, lambda v: v * 0.5, v)

    return lax.while_loop(lambda c: c[0] < 3, body, (0, x))[1]


def _nested_ref(x):
    v = np.asarray(x)
    for i in range(3):
        if i % 2 == 0:
            for _ in range(2):
                v = np.sin(v) + 1.0
        else:
            v = v * 0.5
    return v


def test_nested_scan_in_cond_in_while(rng):
    x = rng.standard_normal(3)
    np.testing.assert_allclose(_nested(x), _nested_ref(x), rtol=1e-15)
    cjit(_nested, (x,))
    check_grads(_nested, (x,), order=2, modes=("fwd",))
    check_vmap(_nested, (rng.standard_normal((3, 3)),))
    assert all_prims(tracer.make_jaxpr(_nested)(x).jaxpr).count("scan") == 1


def _nested_rev(x):
    """scan( cond( scan ) ): reverse-differentiable all the way down."""
    def outer(c, s):
        def inner(c):
            return lax.scan(lambda h, _: (tnp.sin(h) * s, None), c, None, length=2)[0]
        c = lax.cond(tnp.sum(c) > 0, inner, lambda c: c * s, c)
        return c, tnp.sum(c)

    return lax.scan(outer, x, tnp.arange(1.0, 4.0))


def test_nested_reverse_mode(rng):
    x = rng.standard_normal(3)
    check_grads(_nested_rev, (x,), order=2)
    check_grads(lambda x: tracer.jit(_nested_rev)(x), (x,), order=1)
    check_vmap(_nested_rev, (rng.standard_normal((2, 3)),))
    cjit(_nested_rev, (x,))
    g = tracer.jit(tracer.grad(lambda x: tnp.sum(_nested_rev(x)[1])))
    np.testing.assert_allclose(g(x), tracer.grad(lambda x: tnp.sum(_nested_rev(x)[1]))(x),
                               rtol=1e-12)


def test_collectives_inside_control_flow():
    v = np.arange(3.0)
    out = tracer.vmap(lambda v: lax.cond(True, lambda: lax.psum(v, "i"), lambda: v),
                      axis_name="i")(v)
    np.testing.assert_array_equal(out, [3.0, 3.0, 3.0])
    # psum of an unbatched constant inside a scan still reaches the named vmap.
    out = tracer.vmap(lambda v: lax.scan(lambda c, _: (c + lax.psum(1.0, "i"), None), v, None,
                                         length=2)[0], axis_name="i")(v)
    np.testing.assert_array_equal(out, v + 6.0)
    op = lax.composite(lambda x: x + lax.psum(1.0, "i"), "my.add_axis_size")
    np.testing.assert_array_equal(tracer.vmap(lambda v: op(2.0), axis_name="i")(v), [5.0] * 3)
    np.testing.assert_array_equal(tracer.vmap(op, axis_name="i")(v), v + 3.0)


# ================================ partial eval and DCE rules =============================

def test_dce_rules_prune_unused_loop_state(rng):
    def f(x, xs):
        (a, b), ys = lax.scan(lambda c, x: ((c[0] + x, c[1] * 2.0), (c[0] * x, x + 1.0)),
                              (x, x), xs)
        w = lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] + 1.0, c[2] * 3.0),
                           (0, x, x))
        k = lax.cond(x[0] > 0, lambda: (x, x * 2.0), lambda: (x * 3.0, x))
        return a, ys[0], w[1], k[0]

    x, xs = rng.standard_normal(2), rng.standard_normal((3, 2))
    closed = tracer.make_jaxpr(f)(x, xs)
    jaxpr, used = pe.dce_jaxpr(closed.jaxpr, [True, False, True, False])
    check_jaxpr(jaxpr)
    names = [e.primitive.name for e in jaxpr.eqns]
    assert "cond" not in names                                   # wholly unused
    (scan_eqn,) = [e for e in jaxpr.eqns if e.primitive.name == "scan"]
    (while_eqn,) = [e for e in jaxpr.eqns if e.primitive.name == "while"]
    assert scan_eqn.params["num_carry"] == 1 and len(scan_eqn.outvars) == 1
    assert len(while_eqn.outvars) == 2                      # counter and the used carry
    from tracer.jaxpr import eval_jaxpr
    outs = eval_jaxpr(jaxpr, closed.consts, x, xs)
    want = f(x, xs)
    np.testing.assert_allclose(outs[0], want[0])
    np.testing.assert_allclose(outs[1], want[2])


def test_dce_cond_drops_unused_outputs_and_operands(rng):
    x, y = rng.standard_normal(2), rng.standard_normal(2)
    closed = tracer.make_jaxpr(lambda p, x, y: lax.cond(p, lambda x, y: (x * 2.0, y + 1.0),
                                                        lambda x, y: (x, y), x, y))(True, x, y)
    jaxpr, used = pe.dce_jaxpr(closed.jaxpr, [True, False], prune_inputs=True)
    (cond_eqn,) = [e for e in jaxpr.eqns if e.primitive.name == "cond"]
    assert len(cond_eqn.outvars) == 1 and len(cond_eqn.invars) == 2   # index and x
    assert used == [True, True, False]
    check_jaxpr(jaxpr)


def test_partial_eval_jaxpr_rules(rng):
    # linearize through jit exercises the jaxpr-level rules (known part now, unknown part
    # staged) of every loop primitive.
    x = rng.standard_normal(3)
    fns = [lambda x: _branchy(1.0, x), lambda x: _sc(x, np.ones((3, 3)))[0], _wl, _nested,
           lambda x: _nested_rev(x)[1]]
    for f in fns:
        t = rng.standard_normal(3)
        y, f_lin = tracer.linearize(tracer.jit(f), x)
        np.testing.assert_allclose(y, f(x), rtol=1e-14)
        np.testing.assert_allclose(f_lin(t), tracer.jvp(f, (x,), (t,))[1], rtol=1e-12)


# ================================== Python control flow ==================================

def test_python_control_flow_on_tracers_points_to_lax():
    @tracer.jit
    def f(x):
        if x > 0:
            return x
        return -x

    with pytest.raises(tracer.ConcretizationTypeError) as e:
        f(1.0)
    msg = str(e.value)
    assert "lax.cond" in msg and "lax.while_loop" in msg and "static_argnums" in msg
    with pytest.raises(tracer.ConcretizationTypeError, match="lax.while_loop"):
        tracer.jit(lambda n: [i for i in range(n)])(3)
    # With the argument static it works.
    assert float(tracer.jit(lambda x: x if x > 0 else -x, static_argnums=0)(-2.0)) == 2.0


def test_disable_jit_runs_python():
    tracer.config.update("disable_jit", True)
    try:
        assert float(lax.cond(True, lambda: 1.0, lambda: 2.0)) == 1.0
        assert int(lax.switch(7, [lambda: 0, lambda: 1])) == 1
        assert int(lax.while_loop(lambda c: c < 4, lambda c: c + 1, 0)) == 4
    finally:
        tracer.config.update("disable_jit", False)


# ======================================= bad input =======================================

def test_cond_branch_type_mismatch_names_path_and_types():
    with pytest.raises(TypeError, match=r"(?s)cond: branch outputs must have identical types.*"
                                        r"output\['b'\]: true_fun has type f64\[3\] but "
                                        r"false_fun has type f32\[3\]"):
        lax.cond(True, lambda x: {"a": x, "b": x},
                 lambda x: {"a": x, "b": x.astype(np.float32)}, np.ones(3))
    with pytest.raises(TypeError, match=r"output\[1\]: true_fun has type f64\[3\] but "
                                        r"false_fun has type f64\[2\] \(the shapes differ\)"):
        lax.cond(True, lambda: (1.0, np.ones(3)), lambda: (1.0, np.ones(2)))
    with pytest.raises(TypeError, match="same pytree structure.*true_fun gives"):
        lax.cond(True, lambda x: (x, x), lambda x: x, 1.0)
    with pytest.raises(TypeError, match=r"branches\[0\] has type f64\[\] but branches\[2\] "
                                        r"has type i64\[\]"):
        lax.switch(0, [lambda: 1.0, lambda: 1.0, lambda: 1], )


def test_bad_predicates_and_indices():
    with pytest.raises(TypeError, match=r"predicate must be a scalar.*got bool\[2\]"):
        lax.cond(np.array([True, False]), lambda: 1, lambda: 2)
    with pytest.raises(TypeError, match=r"predicate must be bool\[\].*got c128\[\]"):
        lax.cond(1j, lambda: 1, lambda: 2)
    with pytest.raises(TypeError, match="must be callable"):
        lax.cond(True, 1, 2)
    with pytest.raises(TypeError, match=r"index must be an integer scalar, got f64\[\]"):
        lax.switch(1.0, [lambda: 1, lambda: 2])
    with pytest.raises(TypeError, match=r"index must be an integer scalar, got i64\[2\]"):
        lax.switch(np.array([0, 1]), [lambda: 1, lambda: 2])
    with pytest.raises(ValueError, match="empty branch sequence"):
        lax.switch(0, [])
    with pytest.raises(TypeError, match=r"cond_fun must return a boolean scalar.*\(i64\[\]\)"):
        lax.while_loop(lambda c: 1, lambda c: c, 1.0)
    with pytest.raises(TypeError, match=r"cond_fun must return a boolean scalar.*bool\[2\]"):
        lax.while_loop(lambda c: c < 1.0, lambda c: c, np.zeros(2))
    with pytest.raises(TypeError, match=r"fori_loop: upper must be an integer scalar"):
        lax.fori_loop(0, 2.5, lambda i, c: c, 1.0)


def test_carry_type_errors_name_path_and_types():
    with pytest.raises(TypeError, match=r"carry\[1\]: the input carry has type f64\[\] but "
                                        r"the output carry has type i32\[\] \(the dtypes "
                                        r"differ\)"):
        lax.scan(lambda c, x: ((c[0], c[1].astype(np.int32)), x), (1.0, 2.0), np.ones(3))
    with pytest.raises(TypeError, match=r"carry\['h'\]: the input carry has type f64\[2\] "
                                        r"but the output carry has type f64\[1,2\]"):
        lax.scan(lambda c, x: ({"h": c["h"][None]}, x), {"h": np.ones(2)}, np.ones(3))
    # (the value the body returned by its aval, not its tracer's class)
    with pytest.raises(TypeError, match=r"scan: the body function must return a pair "
                                        r"\(carry, y\), got a traced f64\[\] value; return "
                                        r"\(new_carry, None\)"):
        lax.scan(lambda c, x: c, 1.0, np.ones(3))
    with pytest.raises(TypeError, match=r"must return a pair \(carry, y\), got tuple of 3 "):
        lax.scan(lambda c, x: (c, x, x), 1.0, np.ones(3))
    with pytest.raises(TypeError, match="same pytree structure"):
        lax.scan(lambda c, x: ((c, c), x), 1.0, np.ones(3))
    with pytest.raises(TypeError, match=r"carry\[1\]: the input has type f64\[\] but "
                                        r"body_fun's output has type f64\[2\]"):
        lax.while_loop(lambda c: c[0] < 2, lambda c: (c[0] + 1, c[1] * np.ones(2)), (0, 1.0))
    with pytest.raises(TypeError, match=r"\(i, val\)\[1\]: the input carry has type i64\[\] "
                                        r"but the output carry has type f64\[\]"):
        lax.fori_loop(0, 3, lambda i, c: c * 1.5, np.int64(1))


def test_scan_length_errors():
    with pytest.raises(ValueError, match=r"share their leading axis size.*xs\['a'\]: 3, "
                                         r"xs\['b'\]: 4"):
        lax.scan(lambda c, x: (c, x), 1.0, {"a": np.ones(3), "b": np.ones(4)})
    with pytest.raises(ValueError, match="no xs to scan over and no length"):
        lax.scan(lambda c, x: (c, x), 1.0, None)
    with pytest.raises(ValueError, match="length=4 disagrees"):
        lax.scan(lambda c, x: (c, x), 1.0, np.ones(3), length=4)
    with pytest.raises(ValueError, match="scalar"):
        lax.scan(lambda c, x: (c, x), 1.0, 2.0)
    with pytest.raises(ValueError, match="unroll must be a positive int"):
        lax.scan(lambda c, x: (c, x), 1.0, np.ones(3), unroll=0)
    with pytest.raises(tracer.ConcretizationTypeError):
        tracer.jit(lambda n: lax.scan(lambda c, x: (c, x), 1.0, None, length=n))(3)


# ==================================== compiled loops =====================================
# Under jit, scan/while/cond run as generated Numba drivers: real loops calling the body
# kernels (numba_backend/control_flow.py), or a Python loop when a body step has no
# compiled form.

def _driver_text(f, *args):
    return tracer.jit(f).lower(*args).as_text()


@pytest.fixture(params=["runner", "driver"])
def loop_path(request, monkeypatch):
    """Scans of calls on the loop runner (the default), or on generated drivers as every
    other loop."""
    from numba_backend import control_flow
    monkeypatch.setattr(control_flow, "LOOP_RUNNER", request.param == "runner")
    return request.param


def _uses(path, text):
    """Whether ``text`` (as_text) shows a scan run by ``path``."""
    return ("loop runner" in text) if path == "runner" else ("def driver(" in text)


def test_a_scan_of_calls_runs_on_the_loop_runner(rng):
    # (a body calling kernels and BLAS (GEMV here): no generated driver; the text lists
    # the calls)
    w, x = rng.standard_normal((100, 100)), rng.standard_normal(100)
    f = lambda w, x: lax.scan(lambda h, _: (tnp.tanh(w @ h) + h, h), x, None, length=4)
    text = _driver_text(f, w, x)
    assert "scan on the loop runner" in text and "def driver(" not in text
    assert "gemv(a, b) f64[100,100] x f64[100,1]" in text and "copy -> ys 0[i]" in text
    got, want = tracer.jit(f)(w, x), f(w, x)
    for g, e in zip(tracer.tree_util.tree_leaves(got), tracer.tree_util.tree_leaves(want)):
        # (tanh: compiled within a few ulps of NumPy's)
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-12, atol=1e-15)


def test_compiled_loops_are_generated(rng, monkeypatch):
    from numba_backend import control_flow
    monkeypatch.setattr(control_flow, "LOOP_RUNNER", False)
    x = rng.standard_normal(3)
    text = _driver_text(lambda x: _sc(x, np.ones((4, 3)))[0], x)
    # (a body of a few elements: its kernels are pasted into the loop)
    assert "def driver(" in text and "for it" in text and "kernel inlined" in text
    assert "K_" not in text
    # a larger body calls its kernels
    big = rng.standard_normal(100)
    text = _driver_text(lambda x: _sc(x, np.ones((4, 100)))[0], big)
    assert "def driver(" in text and "for it" in text and "K_" in text
    assert "kernel inlined" not in text
    text = _driver_text(_wl, x)
    assert "while True:" in text and "break" in text
    text = _driver_text(lambda x: _sw(1, x), x)
    assert "elif" in text and "else:" in text
    # Nested control flow is nested loops inside one driver.
    text = _driver_text(_nested, x)
    src = text[text.index("# generated source of while"):]
    assert src.count("def driver(") == 1 and "while True:" in src and "for it" in src
    # A loop over dot_general calls BLAS from the compiled loop.
    w = rng.standard_normal((3, 3))
    text = _driver_text(lambda w, x: lax.scan(lambda h, _: (tnp.tanh(w @ h), None), x, None,
                                              length=3)[0], w, x)
    # (through driver_runtime.dot_mm, numba_backend.blas's GEMM/GEMV: the product is
    # (3, 3) x (3, 1))
    assert "R_dot_mm_" in text and "np.dot(" not in text


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("m,k,n", [(3, 4, 5), (1, 4, 1), (3, 1, 5), (3, 0, 5), (0, 4, 5),
                                   (3, 4, 0), (3, 4, 1), (1, 4, 5)])
def test_driver_matrix_products_equal_the_python_loop(dtype, m, k, n, rng, loop_path):
    # w @ h and w.T-style contractions in a compiled scan (GEMM from the driver, the
    # outer-product loop at k = 1, zeros at k = 0, nothing for an empty result) against
    # the same loop in NumPy
    def mk(*shape):
        a = rng.standard_normal(shape) + (1j * rng.standard_normal(shape)
                                          if np.dtype(dtype).kind == "c" else 0)
        return (a / 4).astype(dtype)
    w, wt, h0 = mk(m, k), mk(k, m), mk(k, n)
    h0 = np.concatenate([h0, h0], axis=0)[:k] if k else h0   # (k, n)
    a, b = mk(m, m), mk(m, m)

    def body(c, _):
        h, g = c
        y = lax.dot_general(wt, h, (((0,), (0,)), ((), ()))) + w @ h   # (m, n)
        return (h, a @ y + lax.dot_general(b, y, (((0,), (0,)), ((), ())))), None

    f = tracer.jit(lambda h, g: lax.scan(body, (h, g), None, length=2)[0])
    text = f.lower(h0, np.zeros((m, n), dtype)).as_text()
    assert _uses(loop_path, text) and ("R_dot_mm_" in text or loop_path == "runner")
    h, g = f(h0, np.zeros((m, n), dtype))
    eh, eg = h0, np.zeros((m, n), dtype)
    for _ in range(2):
        y = wt.T @ eh + w @ eh
        eg = a @ y + b.T @ y
    tol = 1e-5 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-12
    assert np.asarray(g).dtype == dtype and np.asarray(g).shape == (m, n)
    np.testing.assert_allclose(np.asarray(g), eg, rtol=tol, atol=tol)
    np.testing.assert_array_equal(np.asarray(h), eh)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
def test_driver_matrix_vector_products_equal_eager(dtype, rng, loop_path):
    # A matrix times a vector in a compiled loop goes through GEMV (driver_runtime.dot_mm:
    # matvec_into, vecmat_into), as NumPy's matmul does eagerly: the same bits, in C and F (transposed)
    # layouts, a value used twice, forward and reverse (grad) scans, vmap of a scan and
    # grad of a fori_loop.
    def mk(*shape):
        a = rng.standard_normal(shape) + (1j * rng.standard_normal(shape)
                                          if np.dtype(dtype).kind == "c" else 0)
        return (a / 4).astype(dtype)
    w, h0, xs = mk(5, 5), mk(5), mk(4, 5)

    def body(h, x):
        a = w @ h                      # (5, 5) x (5,)
        b = w.T @ a                    # transposed matrix, a used twice
        c = h @ w + (a @ w.T)          # vector x matrix
        return (a + b + c) * 0.25 + x, a      # (no tanh: compiled within 1 ulp)

    f = lambda w0, h, xs: lax.scan(lambda h, x: body(h, x), h, xs)
    text = tracer.jit(f).lower(w, h0, xs).as_text()
    assert _uses(loop_path, text) and ("R_dot_mm_" in text or loop_path == "runner")
    got, want = tracer.jit(f)(w, h0, xs), f(w, h0, xs)
    for g, e in zip(tracer.tree_util.tree_leaves(got), tracer.tree_util.tree_leaves(want)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(e))
    if np.dtype(dtype).kind == "c":
        return
    # grad of a scan (reverse scan with transposed products)
    def loss(w, h):
        return tnp.sum(lax.scan(lambda h, x: (tnp.tanh(w @ h + x), None), h, xs)[0])
    tol = 1e-5 if dtype == np.float32 else 1e-12
    gj, ge = tracer.jit(tracer.grad(loss))(w, h0), tracer.grad(loss)(w, h0)
    np.testing.assert_allclose(np.asarray(gj), np.asarray(ge), rtol=tol, atol=tol)
    # vmap of a scan: a batch of initial states
    hs = mk(3, 5)
    vf = tracer.vmap(lambda h: lax.scan(lambda h, x: (tnp.tanh(w @ h + x), None), h, xs)[0])
    np.testing.assert_allclose(np.asarray(tracer.jit(vf)(hs)), np.asarray(vf(hs)),
                               rtol=tol, atol=tol)
    # grad of a fori_loop
    def floss(w):
        return tnp.sum(lax.fori_loop(0, 3, lambda i, h: tnp.tanh(w @ h), h0))
    np.testing.assert_allclose(np.asarray(tracer.jit(tracer.grad(floss))(w)),
                               np.asarray(tracer.grad(floss)(w)), rtol=tol, atol=tol)


def test_a_driver_links_its_kernels_as_compiled_for_the_executor(rng, monkeypatch):
    from numba_backend import control_flow
    monkeypatch.setattr(control_flow, "LOOP_RUNNER", False)
    # A driver's buffers are writable, a kernel's own signature takes read-only inputs:
    # the driver must call that one compiled overload (the one the kernel's own compile
    # job and the Python loop use), not compile a second one for writable arrays; its
    # buffers and reshaped views come from the caller, not from np.empty/reshape inside.
    from lowering.ir import LibraryCall
    from numba_backend import cache
    from numba_backend.control_flow import runner_for
    # as on a first run (a driver already on disk loads without typing its kernels)
    monkeypatch.setattr(cache, "on_disk", lambda path, func: False)
    # (80 elements: above control_flow.INLINE_MAX_ELEMENTS, the kernels are called)
    w = rng.standard_normal((80, 80)) / 9
    f = tracer.jit(lambda w, x: lax.scan(lambda h, _: (tnp.tanh(w @ h) * 0.5 + h, h),
                                         x, None, length=5))
    x = rng.standard_normal(80)
    got = f(w, x)
    h, hs = x, []
    for _ in range(5):
        hs.append(h)
        h = np.tanh(w @ h) * 0.5 + h
    np.testing.assert_allclose(np.asarray(got[0]), h, rtol=1e-13)
    np.testing.assert_allclose(np.asarray(got[1]), np.stack(hs), rtol=1e-13)
    ex = tracer._jit_backend.get_executable(f.trace(w, x).jaxpr, "f")
    (step,) = [s for s in ex.program.steps if isinstance(s, LibraryCall) and s.kind == "scan"]
    driver = runner_for(dict(step.params)["spec"]).driver
    assert driver.compiled and driver.kernels
    assert list(driver.kernel_fns) == list(driver.kernels) and len(driver.kp) == len(driver.kernels)
    from numba_backend.compile_worker import numba_types
    from numba_backend.control_flow import RuntimeFunction
    assert any(isinstance(h, RuntimeFunction) for h, _ in driver.kernels.values())
    for k, (name, (handle, spec)) in enumerate(driver.kernels.items()):
        disp = driver.kernel_fns[name]
        if isinstance(handle, RuntimeFunction):
            # (driver_runtime's copy and product functions: one dispatcher, an overload
            # per argument types)
            sigs = [numba_types(spec)]
            assert name.startswith("R_" + handle.func)
        else:
            sigs = list(disp.overloads)
            assert len(sigs) == 1 and sigs[0] == handle.sig, (name, sigs)
        # the driver calls that overload's code by its address (its module constant
        # ``name`` is the index into KP), not a copy linked into the driver
        cres = disp.overloads[sigs[0]]
        assert getattr(driver.module, name) == k
        assert driver.kp[k] == cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name)
    src = driver.text[driver.text.index("def driver("):]
    assert "np.empty(" not in src and ".copy()" not in src


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.complex64,
                                   np.int8, np.int32, np.uint16, np.bool_])
def test_compiled_loop_dtypes(dtype):
    xs = (np.arange(15).reshape(5, 3) % 3).astype(dtype)
    op = (lambda a, b: a ^ b) if dtype == np.bool_ else (lambda a, b: a + b)

    def f(xs):
        def body(c, x):
            c2 = op(c, x)
            return c2, (c, c2[0])
        return lax.scan(body, xs[0], xs, reverse=True)

    check_jit(f, (xs,))
    check_jit(lambda xs: lax.fori_loop(0, 4, lambda i, c: op(
        c, lax.dynamic_index_in_dim(xs, i, 0, keepdims=False)), xs[4]), (xs,))


def test_compiled_loop_reuses_driver_across_shapes(rng):
    from numba_backend import control_flow as ncf
    g = tracer.jit(lambda c, xs: lax.scan(lambda c, x: (tnp.sin(c) * x, c), c, xs))
    # (bodies above control_flow.INLINE_MAX_ELEMENTS: the kernels are called, their
    # extents read at run time; a body of a few elements is pasted into the driver with
    # its extents as constants, so each such shape has its own driver)
    g(np.ones(100), np.ones((5, 100)))
    n = len(ncf._drivers)
    out = g(np.ones(120), np.ones((7, 120)))
    assert len(ncf._drivers) == n          # same source: the compiled driver is reused
    np.testing.assert_allclose(out[0], lax.scan(lambda c, x: (tnp.sin(c) * x, c),
                                                np.ones(120), np.ones((7, 120)))[0],
                               rtol=1e-14)


def test_loop_without_compiled_form_runs_in_python(rng):
    xs = rng.standard_normal((4, 3))
    f = lambda xs: lax.scan(lambda c, x: (c + tnp.sort(x), c), xs[0], xs)
    cjit(f, (xs,))
    text = _driver_text(f, xs)
    assert "a Python loop around compiled bodies" in text


@pytest.mark.parametrize("mode", ["none", "async"])
def test_compiled_loops_follow_jit_compile_mode(rng, mode):
    x = rng.standard_normal(3)
    old = tracer.config.jit_compile
    tracer.config.update("jit_compile", mode)
    try:
        for f in (_nested, lambda x: _nested_rev(x)[0], lambda x: _sw(2, x)):
            jf = tracer.jit(f)
            for _ in range(2):
                np.testing.assert_allclose(jf(x), f(x), rtol=1e-12)
    finally:
        tracer.config.update("jit_compile", old)
        from numba_backend.executor import _background
        _background.submit(lambda: None).result()    # let background compiles finish


def test_platform_dependent():
    assert float(lax.platform_dependent(2.0, cpu=lambda x: x * 3, default=lambda x: x)) == 6.0
    assert float(lax.platform_dependent(2.0, tpu=lambda x: x * 3, default=lambda x: -x)) == -2.0
    assert float(tracer.jit(lambda x: lax.platform_dependent(x, cpu=tnp.sin,
                                                             cuda=tnp.cos))(0.0)) == 0.0
    with pytest.raises(NotImplementedError, match="no branch for platform 'cpu'"):
        lax.platform_dependent(1.0, cuda=lambda x: x)
    with pytest.raises(TypeError, match="unknown platform 'gpu'"):
        lax.platform_dependent(1.0, gpu=lambda x: x)


@pytest.mark.parametrize("ls,rs,dn", [
    ((3, 1), (1, 4), (((1,), (0,)), ((), ()))), ((1, 3), (1, 4), (((0,), (0,)), ((), ()))),
    ((3, 1), (4, 1), (((1,), (1,)), ((), ()))), ((1,), (1, 4), (((0,), (0,)), ((), ()))),
    ((3, 1), (1,), (((1,), (0,)), ((), ()))), ((1,), (1,), (((0,), (0,)), ((), ()))),
    ((3, 5), (5, 4), (((1,), (0,)), ((), ()))), ((5, 3), (4, 5), (((0,), (1,)), ((), ()))),
    ((2, 3, 5), (2, 5, 4), (((2,), (1,)), ((0,), (0,)))), ((3,), (4,), (((), ()), ((), ())))])
def test_compiled_loop_dot_general(rng, ls, rs, dn, loop_path):
    # dot_general inside a compiled loop (BLAS, outer products, batched), accumulated into
    # a multi-dimensional carry.
    a, b = rng.standard_normal(ls), rng.standard_normal(rs)

    def f(a, b):
        shape = lax.dot_general(a, b, dn).shape
        return lax.scan(lambda c, _: (c * 0.5 + lax.dot_general(a, b, dn), None),
                        tnp.zeros(shape), None, length=3)[0]

    np.testing.assert_allclose(tracer.jit(f)(a, b), f(a, b), rtol=1e-13, atol=1e-15)
    text = _driver_text(f, a, b)
    # (the runner takes matrix products of two matrices; the other shapes a driver)
    assert _uses(loop_path, text) or (loop_path == "runner" and "def driver(" in text)
