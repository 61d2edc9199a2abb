"""The loop runner (numba_backend.loop_runner): scans whose bodies are calls run on one
installation-wide compiled function, with the same bits as a generated driver and as the
loop run eagerly, at edge shapes and in compositions (grad, vmap)."""
from __future__ import annotations

import numba
import numpy as np
import pytest

import lax
import tracer
import tracer.numpy as tnp
from numba_backend import control_flow, loop_runner


def _leaves(x):
    return [np.asarray(v) for v in tracer.tree_util.tree_leaves(x)]


def _bits(a):
    a = np.asarray(a)
    if a.dtype.kind == "c":
        a = a.view(f"f{a.dtype.itemsize // 2}")
    return a.view(f"u{a.dtype.itemsize}") if a.dtype.kind == "f" else a


def _run(f, args, runner, monkeypatch):
    monkeypatch.setattr(control_flow, "LOOP_RUNNER", runner)
    jf = tracer.jit(f)
    text = jf.lower(*args).as_text()
    return _leaves(jf(*args)), text


def _same_as_driver(f, args, monkeypatch, runs=True):
    got, text = _run(f, args, True, monkeypatch)
    want, dtext = _run(f, args, False, monkeypatch)
    if runs is not None:
        assert ("scan on the loop runner" in text) == runs, text[-2000:]
    assert "def driver(" in dtext or "Python loop" in dtext
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(_bits(g), _bits(w))
    return got


RNG = np.random.default_rng(3)
W = RNG.standard_normal((70, 70)) / 9
X = RNG.standard_normal(70)
XS = RNG.standard_normal((6, 70))


def _rnn(w, h, xs):
    return lax.scan(lambda h, x: (tnp.tanh(w @ h + x), h * 2.0), h, xs)


def _two_carries_swapped(w, h, xs):
    # carries swapped each step, one passed through, ys of rank 0 and 2
    def body(c, x):
        a, b, n = c
        y = w @ a + x
        return (b, y, n), (tnp.sum(y), tnp.outer(y[:3], b[:2]))
    return lax.scan(body, (h, h * 0.5, np.float64(3.0)), xs)


def _reverse_with_consts(w, h, xs):
    return lax.scan(lambda h, x: (w.T @ h * 0.25 + x[::-1], x), h, xs, reverse=True)


def _literal_carry(w, h, xs):
    # a carry whose next value is a constant, one the body computes twice
    def body(c, x):
        h, k = c
        g = w @ h
        return (g + g * 0.5 + x, 1.5), k + x[0]
    return lax.scan(body, (h, 0.0), xs)


@pytest.mark.parametrize("f", [_rnn, _two_carries_swapped, _reverse_with_consts,
                               _literal_carry])
def test_runner_equals_the_driver_bit_for_bit(f, monkeypatch):
    got = _same_as_driver(f, (W, X, XS), monkeypatch)
    # and the eager loop (tanh: compiled within a few ulps of NumPy's)
    for g, e in zip(got, _leaves(f(W, X, XS))):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("n", [0, 1, 2, 7])
def test_lengths_and_parity_of_the_carry_buffers(n, monkeypatch):
    # the final carry lies in one buffer of its pair or the other by the parity of n
    xs = RNG.standard_normal((n, 70))
    got = _same_as_driver(_rnn, (W, X, xs), monkeypatch)
    h, hs = X.copy(), []
    for x in xs:
        hs.append(h * 2.0)
        h = np.tanh(W @ h + x)
    np.testing.assert_allclose(got[0], h, rtol=1e-12)
    assert got[1].shape == (n, 70)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64, np.complex128, np.int32,
                                   np.float16])
def test_dtypes(dtype, monkeypatch):
    w = (RNG.standard_normal((65, 65)) * 3).astype(dtype)
    h = (RNG.standard_normal(65) * 3).astype(dtype)
    xs = (RNG.standard_normal((4, 65)) * 3).astype(dtype)
    # (integer and float16 matrix products have no call: the body's kernels alone)
    f = (lambda w, h, xs: lax.scan(lambda h, x: (h * 2 - x + w[0], h + x), h, xs)) \
        if np.dtype(dtype).kind == "i" or dtype == np.float16 else \
        (lambda w, h, xs: lax.scan(lambda h, x: ((w @ h) * 0.5 + x, h), h, xs))
    got = _same_as_driver(f, (w, h, xs), monkeypatch)
    assert got[0].dtype == dtype


def test_empty_and_size_one_dims(monkeypatch):
    # an empty body array: its kernels are not called (nothing to write), the results
    # have their shapes; size-1 matrices go through the outer-product path of dot_mm
    w0, h0, xs0 = np.zeros((0, 0)), np.zeros(0), np.zeros((3, 0))
    got = _same_as_driver(lambda w, h, xs: lax.scan(
        lambda h, x: (tnp.sin(w @ h + x) + h, h), h, xs), (w0, h0, xs0), monkeypatch,
        runs=True)
    assert got[0].shape == (0,) and got[1].shape == (3, 0)
    w1, h1 = np.full((1, 1), 0.5), np.ones((1, 100))
    _same_as_driver(lambda w, h: lax.scan(lambda h, _: (w @ h + 1.0, None), h, None,
                                          length=3)[0], (w1, h1), monkeypatch)


@pytest.mark.parametrize("m,k,n,ta,tb,dtype", [
    (3, 4, 5, False, False, np.float64), (3, 4, 5, True, False, np.float64),
    (3, 4, 5, False, True, np.float64), (3, 4, 5, True, True, np.float64),
    (3, 4, 5, True, True, np.float32), (3, 4, 5, False, True, np.complex64),
    (5, 4, 1, False, False, np.float64), (5, 4, 1, True, False, np.float32),
    (1, 4, 5, False, False, np.float64), (1, 4, 5, False, True, np.complex128),
    (1, 4, 1, True, True, np.float64), (3, 1, 5, False, False, np.float64)])
def test_matrix_products_of_every_layout(m, k, n, ta, tb, dtype, monkeypatch):
    # the runner calls BLAS GEMM/GEMV itself with the arguments dot_mm passes (a
    # transposed operand read in place): the driver's bits for every layout and shape
    # class (matrix times vector either side, 1 x 1, and k = 1)
    cplx = np.dtype(dtype).kind == "c"

    def rand(*shape):
        x = RNG.standard_normal(shape) + (1j * RNG.standard_normal(shape) if cplx else 0)
        return x.astype(dtype)
    a = rand(*((k, m) if ta else (m, k)))
    h = rand(*((n, k) if tb else (k, n)))
    xs = rand(6, *h.shape)

    def f(a, h, xs):
        def body(h, x):
            return h * 0.5 + x, (a.T if ta else a) @ (h.T if tb else h)
        return lax.scan(body, h, xs)
    # (k = 1: an outer product, a kernel the driver pastes in)
    got = _same_as_driver(f, (a, h, xs), monkeypatch, runs=None if k == 1 else True)
    if k > 1:
        text = _run(f, (a, h, xs), True, monkeypatch)[1]
        blas = "gemm(" if (m > 1 and n > 1) or (m == 1 and n == 1) else "gemv("
        assert blas in text, text[-1500:]
    hh, want = h, []
    for x in xs:
        want.append((a.T if ta else a) @ (hh.T if tb else hh))
        hh = hh * 0.5 + x
    tol = 1e-5 if np.dtype(dtype).itemsize <= 8 and dtype != np.float64 else 1e-12
    np.testing.assert_allclose(got[1], np.stack(want), rtol=tol, atol=tol)


def test_grad_and_vmap_of_a_scan(monkeypatch):
    def loss(w, h):
        return tnp.sum(_rnn(w, h, XS)[0] ** 2)
    g = _same_as_driver(tracer.grad(loss, argnums=(0, 1)), (W, X), monkeypatch)
    eps = 1e-6
    d = np.zeros_like(W)
    d[3, 5] = eps
    fd = (float(loss(W + d, X)) - float(loss(W - d, X))) / (2 * eps)
    np.testing.assert_allclose(g[0][3, 5], fd, rtol=1e-6)
    hs = RNG.standard_normal((3, 70))
    vf = tracer.vmap(lambda h: _rnn(W, h, XS)[0])
    # (the batched product (70, 70) x (3, 70)^T: a generated helper, so a driver)
    got = _same_as_driver(vf, (hs,), monkeypatch, runs=None)
    for i in range(3):
        np.testing.assert_allclose(got[0][i], np.asarray(_rnn(W, hs[i], XS)[0]), rtol=1e-12)


def test_bodies_it_does_not_take_get_a_driver(monkeypatch):
    # nested control flow, a while loop, a body whose every kernel a driver pastes
    nested = lambda w, h, xs: lax.scan(lambda h, x: (lax.fori_loop(
        0, 2, lambda i, h: tnp.tanh(w @ h + x), h), h), h, xs)
    _same_as_driver(nested, (W, X, XS), monkeypatch, runs=False)
    small = lambda h: lax.scan(lambda h, _: (h * 0.5 + 1.0, None), h, None, length=5)[0]
    _same_as_driver(small, (np.ones(3),), monkeypatch, runs=False)


def test_a_callee_error_propagates():
    @numba.njit(cache=False)
    def boom(a):
        if a[0] > 0:
            raise ValueError("boom from a callee")
        return 0
    a = np.array([1.0])
    sig = (numba.typeof(a),)
    boom.compile(sig)
    cres = boom.overloads[sig]
    addr = cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name)
    words = np.array([0, 0, 1, 8, a.__array_interface__["data"][0], 1, 8]
                     + [0] * loop_runner.BUCKETS[-1], np.int64)
    sites = np.array([[addr, 0, 7, 0, 0, loop_runner.CALL]], np.int64)
    args = (sites, np.zeros((0, 5), np.int64), words, np.zeros(1, np.int64))
    loop_runner.run_scan(np.array([0, 0], np.int64), *args)        # no iteration
    with pytest.raises(ValueError, match="boom from a callee"):
        loop_runner.run_scan(np.array([3, 0], np.int64), *args)


def test_async_scan_switches_to_the_runner_without_a_driver(monkeypatch):
    # in "async" mode the host loop runs until the body's kernels and the runner's
    # functions are ready, then the runner: no driver is ever compiled
    tracer.config.update("jit_compile", "async")
    try:
        before = control_flow.stats["drivers_compiled"]
        f = tracer.jit(lambda w, h, xs: _rnn(w, h, xs)[0])
        want = np.asarray(f(W, X, XS))
        for _ in range(400):
            got = np.asarray(f(W, X, XS))
            (step,) = [s for s in tracer._jit_backend.get_executable(
                f.trace(W, X, XS).jaxpr, "f").program.steps if getattr(s, "kind", "") == "scan"]
            runner = control_flow.runner_for(dict(step.params)["spec"])
            if runner.sites is not None:
                break
            import time
            time.sleep(0.05)
        assert isinstance(runner, loop_runner.ScanRunner) and runner.sites is not None
        got = np.asarray(f(W, X, XS))
        np.testing.assert_allclose(got, want, rtol=1e-12)
        assert control_flow.stats["drivers_compiled"] == before
    finally:
        tracer.config.update("jit_compile", "sync")


@pytest.mark.parametrize("runner", [True, False])
@pytest.mark.parametrize("shape,dtype", [((7, 7), np.float32), ((5, 5), np.float64),
                                         ((16, 5), np.float32), ((5, 16), np.complex64)])
def test_products_equal_the_numpy_tier_bit_for_bit(shape, dtype, runner, monkeypatch):
    # the runner's and the drivers' GEMV/GEMM are NumPy's library's
    # (numba_backend.numpy_blas), as the NumPy tier's np.matmul calls them: a wheel of
    # SciPy brings another OpenBLAS, whose float32 GEMV of a 7 x 7 matrix differed in its
    # last bits (in a scan on the runner, and in a fori_loop's driver)
    from numba_backend import numpy_blas
    cplx = np.dtype(dtype).kind == "c"

    def rand(*s):
        x = RNG.standard_normal(s) + (1j * RNG.standard_normal(s) if cplx else 0)
        return x.astype(dtype)
    w, h, x = rand(*shape), rand(shape[0]), rand(3, shape[0])

    def f(w, h, x):
        def body(h, _):
            y = (w.T @ h) * 0.5
            return w @ y + (x @ w).sum(0) @ w.T + (w.T @ x.T).sum(1) @ w.T, (y, x @ w)
        return lax.scan(body, h, None, length=5)

    def g(w, h, x):
        return lax.fori_loop(0, 4, lambda i, h: (w @ (w.T @ h)) * 0.5, h)
    monkeypatch.setattr(control_flow, "LOOP_RUNNER", runner)
    out = {}
    try:
        for mode in ("none", "sync"):
            tracer.config.update("jit_compile", mode)
            out[mode] = _leaves(tracer.jit(f)(w, h, x)) + _leaves(tracer.jit(g)(w, h, x))
    finally:
        tracer.config.update("jit_compile", "sync")
    text = tracer.jit(f).lower(w, h, x).as_text()
    assert ("scan on the loop runner" in text) == runner, text[-1500:]
    if runner and numpy_blas.functions() is not None:
        assert "xxgem" not in text and "gemv(" in text and "gemm(" in text, text[-1500:]
    for a, b in zip(out["none"], out["sync"]):
        np.testing.assert_array_equal(_bits(a), _bits(b))


@pytest.mark.parametrize("runner", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
def test_a_single_contracted_element_gives_numpys_signed_zeros(dtype, runner, monkeypatch):
    # NumPy's matmul adds a k = 1 product to a zero (its loop without BLAS): a -0.0
    # product is 0.0, eagerly, in the NumPy tier, and in every compiled form (a fused
    # kernel, the runner's dot_mm, a driver's product helper)
    a = np.array([[-1.0], [2.0], [-0.0]]).astype(dtype)
    b = np.array([[0.0, -0.0, 3.0, -2.0]]).astype(dtype)
    want = a @ b
    assert np.signbit(want.real).sum() == 2       # (-1 * 3, -0 * -2 is +0)
    progs = [lambda a, b: a @ b,
             lambda a, b: lax.scan(lambda c, _: (c + 1.0, (a * c) @ b), 1.0, None,
                                   length=2)[1][0],
             lambda a, b: lax.fori_loop(0, 1, lambda i, c: a @ b - c,
                                        tnp.zeros((3, 4), a.dtype))]
    monkeypatch.setattr(control_flow, "LOOP_RUNNER", runner)
    for f in progs:
        eager = np.asarray(f(a, b))
        got = np.asarray(tracer.jit(f)(a, b))
        np.testing.assert_array_equal(_bits(got), _bits(eager))
    np.testing.assert_array_equal(_bits(np.asarray(tracer.jit(progs[0])(a, b))), _bits(want))


def test_threads_asking_for_numpys_blas_at_once_all_find_it(monkeypatch):
    # numba_backend.numpy_blas.functions: a thread that asked while another was still
    # searching got None (its kernels then keyed "none" BLAS in the helper hash, and the
    # next process recompiled them); every caller now gets the one search's answer
    import threading
    import time

    from numba_backend import numpy_blas
    want = numpy_blas.functions()
    paths = numpy_blas._library_paths

    def slow_paths():
        time.sleep(0.05)
        return paths()
    monkeypatch.setattr(numpy_blas, "_library_paths", slow_paths)
    monkeypatch.setattr(numpy_blas, "_found", False)
    monkeypatch.setattr(numpy_blas, "_functions", None)
    start = threading.Barrier(4)
    got = []

    def ask():
        start.wait()
        got.append(numpy_blas.functions())
    threads = [threading.Thread(target=ask) for _ in range(4)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert got == [want] * 4, got
