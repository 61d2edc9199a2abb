"""User Numba kernels as primitives: tracer.ffi.numba_call and tracer.ffi.numba_elementwise
(lax/ffi.py, lowering/ffi.py, numba_backend/user_functions.py): eager, jit (top level and
inside compiled loop drivers), vmap, AD, errors, and that a changed kernel never reuses
stale compiled code."""
from __future__ import annotations

import importlib.util
import sys
import textwrap

import numba
import numpy as np
import pytest

import tracer
import tracer.numpy as jnp
from tracer import lax
from tracer.ffi import KernelCompileError, numba_call, numba_elementwise

S = tracer.ShapeDtypeStruct
F64 = np.float64


@numba.njit
def axpy(x, y, out, a=1.0):
    for i in range(x.shape[0]):
        out[i] = a * x[i] + y[i]


@numba.njit
def sum_and_scale(m, total, scaled, k):
    # two results: the sum of each row and the matrix scaled by the static k
    for i in range(m.shape[0]):
        s = 0.0
        for j in range(m.shape[1]):
            s += m[i, j]
            scaled[i, j] = m[i, j] * k
        total[i] = s


@numba.njit
def halve_plus_one(c, out):
    for i in range(c.size):
        out.flat[i] = c.flat[i] * 0.5 + 1.0


@numba.njit
def rowsum(x, out):
    # any rank: sums the last axis (vmap expand_dims passes one more rank)
    flat = x.reshape((-1, x.shape[-1]))
    o = out.reshape((-1,))
    for i in range(flat.shape[0]):
        s = 0.0
        for j in range(flat.shape[1]):
            s += flat[i, j]
        o[i] = s


@numba.njit
def poly(x, y):
    return x * x * y + 3.0 * y


@numba.njit
def dpoly_dx(x, y):
    return 2.0 * x * y


@numba.njit
def dpoly_dy(x, y):
    return x * x + 3.0


@numba.njit
def relu_like(x):
    return x if x > 0 else 0.0 * x


@pytest.fixture(autouse=True)
def _sync():
    old = tracer.config.jit_compile
    tracer.config.update("jit_compile", "sync")
    yield
    tracer.config.update("jit_compile", old)


def _kernels_in(text: str) -> int:
    return text.count("# generated source of kernel")


# ---------------------------------------- numba_call ---------------------------------------

def test_numba_call_eager_and_jit_against_numpy():
    x, y = np.arange(5.0), np.linspace(-1, 1, 5)
    want = 2.5 * x + y
    np.testing.assert_array_equal(numba_call(axpy, S((5,), F64), x, y, a=2.5), want)
    f = tracer.jit(lambda x, y: numba_call(axpy, S(x.shape, x.dtype), x, y, a=2.5) * 2)
    np.testing.assert_array_equal(f(x, y), want * 2)
    # a new shape reuses the trace rules; the kernel compiles for it
    np.testing.assert_array_equal(f(np.ones(2), np.zeros(2)), [5.0, 5.0])
    # defaults of the kernel's own parameters apply when a static is not passed
    np.testing.assert_array_equal(numba_call(axpy, S((5,), F64), x, y), x + y)


def test_numba_call_two_results_and_pytree_result_shapes():
    m = np.arange(12.0).reshape(3, 4)
    shapes = {"total": S((3,), F64), "scaled": S((3, 4), F64)}

    @numba.njit
    def kern(m, scaled, total, k):     # results in the pytree's leaf order (dict keys)
        sum_and_scale(m, total, scaled, k)

    for fn in (lambda m: numba_call(kern, shapes, m, k=3),
               tracer.jit(lambda m: numba_call(kern, shapes, m, k=3))):
        out = fn(m)
        np.testing.assert_array_equal(out["total"], m.sum(1))
        np.testing.assert_array_equal(out["scaled"], m * 3)


def test_numba_call_edge_values():
    f = tracer.jit(lambda x: numba_call(halve_plus_one, S(x.shape, x.dtype), x))
    for x in (np.zeros((0,)), np.zeros((3, 0)), np.ones((1, 1)), np.float64(4.0),
              np.array([np.nan, np.inf, -np.inf, -0.0])):
        want = np.asarray(x) * 0.5 + 1.0
        np.testing.assert_array_equal(numba_call(halve_plus_one, S(np.shape(x), F64), x), want)
        np.testing.assert_array_equal(f(x), want)


def test_numba_call_vmap_methods():
    xs = np.arange(12.0).reshape(3, 4)
    want = xs.sum(1)
    for method in ("expand_dims", "broadcast_all", "sequential", "legacy_vectorized"):
        g = lambda x: numba_call(rowsum, S((), F64), x, vmap_method=method)  # noqa: E731
        np.testing.assert_array_equal(tracer.vmap(g)(xs), want, err_msg=method)
        np.testing.assert_array_equal(tracer.jit(tracer.vmap(g))(xs), want, err_msg=method)
    # an unbatched operand beside a batched one
    g = lambda x, y: numba_call(axpy, S((4,), F64), x, y, vmap_method="broadcast_all")  # noqa
    # (axpy's loop over the leading axis works on rows as well: Numba types it anew)
    np.testing.assert_array_equal(tracer.vmap(g, in_axes=(0, None))(xs, np.ones(4)), xs + 1)
    g = lambda x, y: numba_call(axpy, S((4,), F64), x, y, vmap_method="sequential")  # noqa
    np.testing.assert_array_equal(tracer.jit(tracer.vmap(g, in_axes=(0, None)))(xs, np.ones(4)),
                                  xs + 1)
    with pytest.raises(NotImplementedError, match="vmap_method"):
        tracer.vmap(lambda x: numba_call(rowsum, S((), F64), x))(xs)


def test_fori_loop_around_numba_call_runs_in_the_compiled_driver():
    from lax import ffi as lax_ffi
    from numba_backend import control_flow

    def loop(c):
        return lax.fori_loop(0, 20_000, lambda i, c: numba_call(
            halve_plus_one, S(c.shape, c.dtype), c) - 0.25 * jnp.sin(c), c)

    f = tracer.jit(loop)
    c0 = np.array([0.0, 1.0, 8.0])
    text = f.lower(c0).as_text()
    token = lax_ffi.kernel_of(halve_plus_one, "test").token
    # the driver (a compiled fori_loop) calls the user's kernel itself
    assert f"uf.{token}(" in text, text
    assert "a Python loop" not in text, text
    calls, host_loops = lax_ffi.stats["calls"], control_flow.stats["host_loops"]
    out = f(c0)
    out = f(c0)
    assert lax_ffi.stats["calls"] == calls       # no call from Python: not one per iteration
    assert control_flow.stats["host_loops"] == host_loops
    want = c0.copy()
    for _ in range(20_000):
        want = want * 0.5 + 1.0 - 0.25 * np.sin(want)
    np.testing.assert_allclose(out, want, rtol=1e-12)


def test_scan_with_numba_call_and_elementwise_in_its_body():
    sq = numba_elementwise(poly)

    def body(c, x):
        y = numba_call(axpy, S(c.shape, c.dtype), c, x, a=0.5)
        return y, sq(y, 2.0).sum()

    xs = np.arange(12.0).reshape(4, 3) / 10
    f = tracer.jit(lambda c, xs: lax.scan(body, c, xs))
    c, ys = f(np.ones(3), xs)
    wc, wys = np.ones(3), []
    for x in xs:
        wc = 0.5 * wc + x
        wys.append((wc * wc * 2.0 + 6.0).sum())
    np.testing.assert_allclose(c, wc, rtol=1e-14)
    np.testing.assert_allclose(ys, wys, rtol=1e-14)
    assert "a Python loop" not in f.lower(np.ones(3), xs).as_text()


def test_custom_jvp_around_numba_call():
    @tracer.custom_jvp
    def f(x):
        return numba_call(halve_plus_one, S(x.shape, x.dtype), x) ** 3

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        h = numba_call(halve_plus_one, S(x.shape, x.dtype), x)
        return h ** 3, 3 * h ** 2 * 0.5 * t

    x = np.array([0.3, -1.2, 2.0])
    want = 1.5 * (x * 0.5 + 1.0) ** 2
    np.testing.assert_allclose(tracer.grad(lambda x: f(x).sum())(x), want, rtol=1e-14)
    np.testing.assert_allclose(tracer.jit(tracer.grad(lambda x: f(x).sum()))(x), want,
                               rtol=1e-14)
    with pytest.raises(ValueError, match="halve_plus_one.*custom_jvp"):
        tracer.grad(lambda x: numba_call(halve_plus_one, S((3,), F64), x).sum())(x)


# ------------------------------------- numba_elementwise -----------------------------------

def test_numba_elementwise_broadcasts_like_a_ufunc():
    f = numba_elementwise(poly)
    x = np.linspace(-2, 2, 4)
    y = np.arange(3.0)[:, None]
    want = x * x * y + 3.0 * y
    np.testing.assert_array_equal(f(x, y), want)
    np.testing.assert_array_equal(tracer.jit(f)(x, y), want)
    np.testing.assert_array_equal(f(x, 2.0), x * x * 2 + 6)
    np.testing.assert_array_equal(tracer.jit(f)(x, 2.0), x * x * 2 + 6)
    # Numba's typing gives the result dtype: int64 operands give int64 here
    h = numba_elementwise(numba.njit(lambda x, y: x * y + 1))
    r = h(np.arange(3), np.int64(2))
    assert r.dtype == np.int64 and r.tolist() == [1, 3, 5]
    assert tracer.jit(h)(np.arange(3), np.int64(2)).tolist() == [1, 3, 5]
    # ... or out_dtype= fixes it
    g = numba_elementwise(poly, out_dtype=np.float32)
    assert g(x, y).dtype == np.float32
    np.testing.assert_array_equal(tracer.jit(g)(x, y), want.astype(np.float32))
    b = numba_elementwise(numba.njit(lambda x: x > 1.0))
    assert b(x).dtype == np.bool_ and tracer.jit(b)(x).tolist() == (x > 1).tolist()


def test_numba_elementwise_edge_values():
    f = numba_elementwise(poly)
    jf = tracer.jit(f)
    for x, y in [(np.zeros(0), np.zeros(0)), (np.zeros((2, 0)), 1.0), (np.ones((1, 1)), 2.0),
                 (np.float64(1.5), np.float64(2.0)),
                 (np.array([np.nan, np.inf, -0.0]), np.array([1.0, np.nan, 1.0]))]:
        want = np.asarray(x) ** 2 * y + 3.0 * np.asarray(y)
        np.testing.assert_array_equal(f(x, y), want)
        np.testing.assert_array_equal(jf(x, y), want)


def test_numba_elementwise_fuses_into_one_kernel():
    f = numba_elementwise(poly)
    g = tracer.jit(lambda x: jnp.sin(f(x, 2.0) * 2) + 1)
    x = np.linspace(-1, 1, 7)
    text = g.lower(x).as_text()
    assert _kernels_in(text) == 1, text
    assert "host_step" not in text and "library_call" not in text, text
    np.testing.assert_allclose(g(x), np.sin((x * x * 2 + 6) * 2) + 1, rtol=1e-15)


def test_numba_elementwise_vmap():
    f = numba_elementwise(poly)
    xs, y = np.arange(6.0).reshape(2, 3), np.arange(3.0)
    np.testing.assert_array_equal(tracer.vmap(f, in_axes=(1, None))(xs, 2.0),
                                  (xs * xs * 2 + 6).T)
    np.testing.assert_array_equal(tracer.jit(tracer.vmap(f, in_axes=(0, None)))(xs, y),
                                  xs * xs * y + 3 * y)


def _fd(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e.flat[i] = eps
        g.flat[i] = (float(f(x + e)) - float(f(x - e))) / (2 * eps)
    return g


def test_numba_elementwise_jvp_and_grad_against_finite_differences():
    f = numba_elementwise(poly, jvp=(dpoly_dx, dpoly_dy))
    x, y = np.array([0.3, -1.1, 2.0]), np.array([1.5, 0.2, -0.7])
    loss = lambda x, y: jnp.sum(jnp.tanh(f(x, y)))   # noqa: E731
    for grad in (tracer.grad(loss, argnums=(0, 1)), tracer.jit(tracer.grad(loss, (0, 1)))):
        gx, gy = grad(x, y)
        np.testing.assert_allclose(gx, _fd(lambda x: loss(x, y), x), rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(gy, _fd(lambda y: loss(x, y), y), rtol=1e-6, atol=1e-9)
    tx, ty = np.array([1.0, 0.5, -2.0]), np.array([0.1, 0.0, 1.0])
    out, tan = tracer.jvp(f, (x, y), (tx, ty))
    np.testing.assert_allclose(tan, 2 * x * y * tx + (x * x + 3) * ty, rtol=1e-14)
    # a rank-0 operand: its tangent contribution is broadcast
    _, tan = tracer.jvp(lambda s: f(x, s), (np.float64(2.0),), (np.float64(1.0),))
    np.testing.assert_allclose(tan, x * x + 3, rtol=1e-14)
    # unary: a single derivative function; vmap of grad
    r = numba_elementwise(relu_like, jvp=numba.njit(lambda x: 1.0 if x > 0 else 0.0))
    np.testing.assert_array_equal(tracer.vmap(tracer.grad(lambda v: r(v).sum()))(
        np.array([[1.0, -1.0], [-2.0, 3.0]])), [[1.0, 0.0], [0.0, 1.0]])


def test_numba_elementwise_without_derivatives_raises():
    f = numba_elementwise(poly)
    with pytest.raises(ValueError, match="poly has no derivative.*jvp="):
        tracer.grad(lambda x: f(x, 1.0).sum())(np.ones(2))
    g = numba_elementwise(poly, jvp=(dpoly_dx, None))    # y not differentiated: fine
    np.testing.assert_array_equal(tracer.grad(lambda y: g(2.0, y))(1.0), 0.0)
    # the partials have no derivatives of their own
    with pytest.raises(ValueError, match="dpoly_dx has no derivative"):
        tracer.grad(tracer.grad(lambda x: g(x, 1.0)))(1.0)


# ------------------------------------------ errors -----------------------------------------

def test_not_a_numba_function():
    with pytest.raises(TypeError, match="expected a numba.njit function, got .*<lambda> of type function"):
        numba_call(lambda x, o: None, S((3,), F64), np.ones(3))
    with pytest.raises(TypeError, match="numba.njit"):
        numba_elementwise(np.sin)
    with pytest.raises(TypeError, match="numba.njit"):
        numba_elementwise(poly, jvp=lambda x, y: x)


def test_kernel_arity_and_shapes_mismatch():
    with pytest.raises(TypeError, match=r"halve_plus_one\(c, out\) cannot take 1 operands "
                                        r"\(f64\[3\]\), then 2 output arrays "
                                        r"\(result_shape_dtypes: f64\[3\], f64\[2\]\)"):
        numba_call(halve_plus_one, (S((3,), F64), S((2,), F64)), np.ones(3))
    with pytest.raises(TypeError, match="static arguments b"):
        numba_call(axpy, S((3,), F64), np.ones(3), np.ones(3), b=1.0)
    with pytest.raises(TypeError, match="Python int, float or bool"):
        numba_call(axpy, S((3,), F64), np.ones(3), np.ones(3), a=np.ones(2))


def test_typing_failure_is_the_kernels_compile_error():
    @numba.njit
    def wants_2d(x, out):
        for i in range(x.shape[0]):
            out[i, 0] = x[i]

    # result_shape_dtypes that do not match what the kernel writes (1-d, not 2-d)
    for fn in (lambda x: numba_call(wants_2d, S((3,), F64), x),
               tracer.jit(lambda x: numba_call(wants_2d, S((3,), F64), x))):
        with pytest.raises(KernelCompileError) as info:
            fn(np.ones(3))
        msg = str(info.value)
        assert "the kernel" in msg and "wants_2d failed to compile" in msg, msg
        assert "operands (f64[3]) and outputs (f64[3])" in msg, msg
        assert "Numba reports:\nFailed in nopython mode" in msg and "setitem" in msg, msg
        assert info.value.__cause__ is None and info.value.__suppress_context__

    @numba.njit
    def writes_input(x, out):
        x[0] = 1.0

    with pytest.raises(KernelCompileError, match="writes_input"):
        numba_call(writes_input, S((3,), F64), np.ones(3))

    @numba.njit
    def returns(x, out):
        return x[0]

    with pytest.raises(TypeError, match="returns a value"):
        numba_call(returns, S((3,), F64), np.ones(3))

    bad = numba_elementwise(numba.njit(lambda x: x.nope))
    with pytest.raises(KernelCompileError, match=r"failed to compile for scalar operands "
                                                 r"\(float64\)"):
        tracer.jit(bad)(np.ones(2))
    with pytest.raises(TypeError, match="float16"):
        numba_call(axpy, S((3,), np.float16), np.ones(3), np.ones(3))
    # nor any ml_dtypes type (bfloat16, float8, int4...)
    with pytest.raises(TypeError, match=r"gets a bfloat16 operand.*convert to float32"):
        numba_call(axpy, S((3,), F64), np.ones(3, jnp.bfloat16), np.ones(3))
    with pytest.raises(TypeError, match=r"gets a int4 operand.*Numba has no int4"):
        numba_elementwise(numba.njit(lambda x: x + 1))(np.ones(2, jnp.int4))


# ---------------------------------- changed kernels ----------------------------------------

def _make(scale):
    @numba.njit
    def kernel(x, out):
        for i in range(x.shape[0]):
            out[i] = x[i] * scale

    @numba.njit
    def scalar(x):
        return x * scale
    return kernel, scalar


def test_two_functions_with_one_name_never_share_compiled_code():
    x = np.arange(3.0)
    results = []
    for scale in (2.0, 3.0):
        kernel, scalar = _make(scale)
        ew = numba_elementwise(scalar)
        top = tracer.jit(lambda x: numba_call(kernel, S(x.shape, x.dtype), x) + ew(x))
        loop = tracer.jit(lambda x: lax.fori_loop(
            0, 3, lambda i, c: numba_call(kernel, S(c.shape, c.dtype), c) + ew(c) * 0, x))
        results.append((top(x), loop(x)))
    np.testing.assert_array_equal(results[0][0], 4 * x)
    np.testing.assert_array_equal(results[1][0], 6 * x)
    np.testing.assert_array_equal(results[0][1], 8 * x)
    np.testing.assert_array_equal(results[1][1], 27 * x)


def test_a_redefined_module_gives_new_results(tmp_path):
    x = np.arange(4.0)

    def load(body):
        path = tmp_path / "user_kernels_mod.py"
        path.write_text(textwrap.dedent(f"""
            import numba

            @numba.njit
            def f(x):
                return {body}

            @numba.njit
            def k(x, out):
                for i in range(x.shape[0]):
                    out[i] = f(x[i])
            """))
        sys.modules.pop("user_kernels_mod", None)
        spec = importlib.util.spec_from_file_location("user_kernels_mod", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    outs = []
    for body in ("x + 1.0", "x * 10.0"):
        mod = load(body)
        ew = numba_elementwise(mod.f)
        g = tracer.jit(lambda x: (ew(x), lax.fori_loop(
            0, 2, lambda i, c: numba_call(mod.k, S(c.shape, c.dtype), c), x)))
        outs.append(g(x))
    np.testing.assert_array_equal(outs[0][0], x + 1)
    np.testing.assert_array_equal(outs[0][1], x + 2)
    np.testing.assert_array_equal(outs[1][0], x * 10)
    np.testing.assert_array_equal(outs[1][1], x * 100)


def test_code_calling_user_functions_stays_out_of_the_disk_cache():
    from numba_backend import cache
    f = numba_elementwise(poly)
    tracer.jit(lambda x: f(x, x) + 1)(np.ones(3))
    handles = [h for h in cache._kernels.values() if h.in_process]
    assert handles and all(not h.on_disk() and h.job(False) is None for h in handles)
    assert all(h.opts(False)["cache"] is False for h in handles)


@pytest.mark.parametrize("mode", ["async", "none"])
def test_other_tiers(mode):
    tracer.config.update("jit_compile", mode)
    f = numba_elementwise(poly)
    g = tracer.jit(lambda x: lax.fori_loop(0, 50, lambda i, c: numba_call(
        halve_plus_one, S(c.shape, c.dtype), c) + f(c, 0.0), x))
    want = np.array([0.0, 3.0])
    for _ in range(50):
        want = want * 0.5 + 1.0
    for _ in range(3):
        np.testing.assert_allclose(g(np.array([0.0, 3.0])), want, rtol=1e-14)
        tracer.jit(lambda x: f(x, 1.0))(np.ones(2))


def test_numba_elementwise_result_dtype_is_canonicalized(x32):
    f = numba_elementwise(numba.njit(lambda x: x * 2.0))    # float64 in Numba's typing
    x = np.array([1.5, -2.0], np.float32)
    assert f(x).dtype == np.float32
    np.testing.assert_array_equal(tracer.jit(f)(x), x * 2)


_MAIN_SCRIPT = textwrap.dedent("""
    import sys
    import numba, numpy as np
    import tracer
    from tracer import lax
    from tracer.ffi import numba_call, numba_elementwise
    tracer.config.update("jit_compile", "sync")

    @numba.njit
    def f(x):
        return x BODY

    @numba.njit
    def k(x, out):
        for i in range(x.shape[0]):
            out[i] = f(x[i])

    ew = numba_elementwise(f)
    g = tracer.jit(lambda x: (ew(x) + 1, lax.fori_loop(0, 2, lambda i, c: numba_call(
        k, tracer.ShapeDtypeStruct(c.shape, c.dtype), c), x)))
    a, b = g(np.arange(3.0))
    print(list(map(float, a)), list(map(float, b)))
""")


def test_a_kernel_changed_between_processes_is_recompiled(tmp_path):
    # the same script with another body: the same tokens (u1_f, u2_k) and generated
    # sources, in one cache directory; the second run must not load the first's code
    import os
    import subprocess
    env = dict(os.environ, TRACER_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    outs = []
    for body in ("+ 1.0", "* 10.0"):
        script = tmp_path / "main.py"
        script.write_text(_MAIN_SCRIPT.replace("BODY", body))
        res = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                             text=True, timeout=300)
        assert res.returncode == 0, res.stderr[-3000:]
        outs.append(res.stdout.strip().splitlines()[-1])
    assert outs == ["[2.0, 3.0, 4.0] [2.0, 3.0, 4.0]",
                    "[1.0, 11.0, 21.0] [0.0, 100.0, 200.0]"], outs


def test_numba_elementwise_result_dtype_follows_each_operand_dtype():
    # Numba's call template lists every signature compiled so far: the result dtype is the
    # one for the operands' dtypes, not the first one compiled (which would truncate)
    @numba.njit
    def twice(x):
        return x * 2

    e = numba_elementwise(twice)
    i = e(jnp.asarray(np.array([1, 2], np.int32)))
    assert i.dtype == np.int64 and np.asarray(i).tolist() == [2, 4]
    f = np.array([1.25, 2.75])
    for got in (e(jnp.asarray(f)), tracer.jit(e)(jnp.asarray(f)),
                numba_elementwise(twice)(jnp.asarray(f))):
        assert got.dtype == np.float64
        np.testing.assert_array_equal(np.asarray(got), f * 2)
