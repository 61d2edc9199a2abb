"""The fixed pieces loop drivers call (numba_backend.driver_runtime): the shared copy and
matrix-product functions against NumPy bit for bit, calls by address, arena views, and
drivers loading from the disk cache in a fresh process."""
import os
import subprocess
import sys
import textwrap

import numba
import numpy as np
import pytest

import tracer
import tracer.numpy as tnp
from tracer import lax
from numba_backend import control_flow
from numba_backend.driver_runtime import arena_view, call_kernel, copy_c, dot_mm

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.int8,
                                   np.int64, np.uint16, np.bool_])
@pytest.mark.parametrize("shape", [(5,), (0,), (1,), (3, 4), (1, 1), (0, 3), (2, 1, 3)])
def test_copy_c_every_dtype_and_rank(dtype, shape):
    rng = np.random.default_rng(0)
    src = (rng.standard_normal(shape) * 50).astype(dtype)
    src.flags.writeable = False      # as drivers pass IP slices and read-only operands
    dst = np.zeros(shape, dtype)
    copy_c(src, dst)
    assert dst.tobytes() == src.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("m,k,n", [(4, 3, 5), (1, 3, 5), (4, 3, 1), (1, 1, 1), (4, 1, 5),
                                   (4, 0, 5), (0, 3, 5), (3, 2, 0), (1, 4, 1)])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_dot_mm_bit_equal_to_numpy(dtype, m, k, n, ta, tb):
    rng = np.random.default_rng(1)

    def mat(r, c, t):
        x = rng.standard_normal((r, c)) + (1j * rng.standard_normal((r, c))
                                           if np.dtype(dtype).kind == "c" else 0)
        x = x.astype(dtype)
        return np.ascontiguousarray(x.T).T if t else x      # an F-layout view
    a, b = mat(m, k, ta), mat(k, n, tb)
    out = np.full((m, n), 7, dtype)
    dot_mm(a, b, out)
    if (k == 1 and np.dtype(dtype).kind == "c") or (m == n == 1 and k > 1):
        # (an outer product is a loop, as it was in the generated helpers: complex
        # products where BLAS may fuse a multiply-add, the documented exception; a
        # 1 x 1 product stays with GEMM, where np.dot takes a dot product)
        np.testing.assert_allclose(out, np.dot(a, b), rtol=1e-5)
    else:
        assert out.tobytes() == np.dot(a, b).tobytes()


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.bool_, np.float32])
def test_integer_bool_and_float_dot_in_a_compiled_scan_equal_eager(dtype):
    rng = np.random.default_rng(2)
    w = (rng.integers(-3, 4, (6, 6)) if dtype != np.bool_ else
         rng.integers(0, 2, (6, 6))).astype(dtype)
    if dtype == np.float32:
        w = (rng.standard_normal((6, 6)) / 3).astype(dtype)
    h0 = w[0]

    def f(w, h0):
        def body(h, _):
            h2 = tnp.dot(w, h) if dtype != np.bool_ else tnp.dot(w, h) ^ h
            return h2, tnp.dot(h, w)
        return lax.scan(body, h0, None, length=4)
    with _sync():
        got = tracer.jit(f)(w, h0)
    want = f(w, h0)
    for g, e in zip(got, want):
        g, e = np.asarray(g), np.asarray(e)
        assert g.dtype == e.dtype
        if dtype == np.float32:     # (GEMV/GEMM against NumPy's choice of BLAS call)
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
        else:
            assert g.tobytes() == e.tobytes()


class _sync:
    def __enter__(self):
        from tracer.config import config
        self.old = config.jit_compile
        config.update("jit_compile", "sync")

    def __exit__(self, *a):
        from tracer.config import config
        config.update("jit_compile", self.old)


def test_call_kernel_by_address_propagates_errors():
    @numba.njit(error_model="numpy")
    def k(a, b, ip):
        for i in range(a.shape[0]):
            b[i] = a[i] * 2 + ip[0]
        if ip[0] == 7:
            raise IndexError("from the kernel")
        return 0
    ro = numba.types.Array(numba.float64, 1, "C", readonly=True)
    ri = numba.types.Array(numba.int64, 1, "C", readonly=True)
    sig = (ro, numba.float64[::1], ri)
    k.compile(sig)
    cres = k.overloads[sig]
    addr = cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name)

    @numba.njit
    def drv(kp, a, b, ip):
        for _ in range(2):
            call_kernel(kp[0], a, b, ip)
        return b
    kp = np.array([addr], np.int64)
    ip = np.array([5])
    ip.flags.writeable = False
    out = drv(kp, np.arange(4.0), np.zeros(4), ip)
    assert out.tolist() == [5.0, 7.0, 9.0, 11.0]
    ip = np.array([7])
    ip.flags.writeable = False
    with pytest.raises(IndexError, match="from the kernel"):
        drv(kp, np.arange(4.0), np.zeros(4), ip)


def test_arena_views():
    @numba.njit
    def views(arena, ip):
        a = arena_view(arena, ip, 0, 2)
        b = arena_view(arena, ip, 3, 1)
        z = arena_view(arena, ip, 5, 0)
        a[1, 2] = 1.5
        b[0] = 2.5
        z[()] = 3.5
        return a.shape, b.shape
    arena = np.zeros(40)
    ip = np.array([0, 2, 3, 16, 4, 32], np.int64)
    ip.flags.writeable = False
    assert views(arena, ip) == ((2, 3), (4,))
    assert arena[5] == 1.5 and arena[16] == 2.5 and arena[32] == 3.5


def test_returned_buffers_are_not_arena_views(rng, monkeypatch):
    monkeypatch.setattr(control_flow, "LOOP_RUNNER", False)
    # a scan's carries (both of each pair) and stacked ys are arguments of their own: a
    # result never holds the scratch arena alive nor shares it with another result
    w = rng.standard_normal((80, 80)) / 9
    x = rng.standard_normal(80)
    f = tracer.jit(lambda w, x: lax.scan(lambda h, _: (tnp.tanh(w @ h) * 0.5 + h, h),
                                         x, None, length=3))
    with _sync():
        h, hs = f(w, x)
    text = f.lower(w, x).as_text()
    assert "arena_view(A0, IP, " in text and "call_kernel(KP[K_" in text
    header = text[text.index("def driver("):].split("\n", 1)[0]
    assert "A0" in header and "c1" in header and "n2" in header and "ys" in header
    h, hs = np.asarray(h), np.asarray(hs)
    assert not np.shares_memory(h, hs)
    want = x
    for k in range(3):       # (compiled tanh: within an ulp of NumPy's)
        np.testing.assert_allclose(hs[k], want, rtol=1e-12, atol=1e-14)
        want = np.tanh(w @ want) * 0.5 + want
    np.testing.assert_allclose(h, want, rtol=1e-12, atol=1e-14)


def test_debug_kernels_runs_the_host_loop():
    from tracer.config import config
    f = tracer.jit(lambda x: lax.fori_loop(0, 3, lambda i, c: c * 2.0 + 1.0, x))
    before = control_flow.stats["host_loops"]
    old = config.debug_kernels
    config.update("debug_kernels", True)
    try:
        got = f(np.ones(3))
    finally:
        config.update("debug_kernels", old)
    assert control_flow.stats["host_loops"] > before
    np.testing.assert_array_equal(np.asarray(got), np.full(3, 15.0))


_CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    import tracer, tracer.numpy as tnp
    from tracer import lax
    from numba_backend import control_flow
    tracer.config.update("jit_compile", "sync")
    control_flow.LOOP_RUNNER = False      # (a scan of calls: a driver all the same)
    w = np.arange(100.0).reshape(10, 10) / 500
    f = tracer.jit(lambda w, x: lax.scan(lambda h, _: (tnp.tanh(w @ h) + h, h), x, None,
                                         length=4))
    h, hs = f(w, np.ones(10))
    (d,) = control_flow._drivers.values()
    hits = sum(d.fn.stats.cache_hits.values())
    print(hits, repr(np.asarray(h).tobytes()))
""")


def test_a_driver_loads_from_the_disk_cache_in_a_fresh_process(tmp_path):
    env = dict(os.environ, TRACER_CACHE_DIR=str(tmp_path),
               NUMBA_CACHE_DIR=str(tmp_path / "numba"), TRACER_COMPILE_WARM_UP="0",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    runs = [subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                           text=True, timeout=300, cwd=ROOT) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr[-3000:]
    first, second = (r.stdout.split(" ", 1) for r in runs)
    assert first[0] == "0" and second[0] == "1"     # compiled, then loaded
    assert first[1] == second[1]
