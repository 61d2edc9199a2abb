"""Buffers of the compiled tier: large kernel outputs that die within a call are reused by
the next call (never one the caller holds), and the allocator policy of
``numba_backend.memory``."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tracer
import tracer.numpy as tnp

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def sync_tier():
    old = tracer.config.jit_compile
    tracer.config.update("jit_compile", "sync")
    yield
    tracer.config.update("jit_compile", old)


def _executable(jf, *args):
    return tracer._jit_backend.get_executable(jf.trace(*args).jaxpr, "f")


def test_temporaries_are_reused_and_results_stay_intact(sync_tier):
    # t is a large kernel output read by two later kernels (a reduction and an
    # element-wise pass), then dead: the next call's kernel writes into it again
    def f(x):
        t = tnp.exp(x * 0.5) + 1.0
        return t / tnp.sum(t, axis=1, keepdims=True), tnp.max(t, axis=0)

    jf = tracer.jit(f)
    rng = np.random.default_rng(0)
    xs = [rng.normal(size=(64, 512)) for _ in range(4)]
    xs[1][3, 7] = np.nan
    xs[2][:, 0] = -0.0
    results, copies = [], []
    for x in xs:
        results.append([np.asarray(r) for r in jf(x)])
        copies.append([r.copy() for r in results[-1]])
    ex = _executable(jf, xs[0])
    assert sum(len(v) for v in ex._pool.values()) >= 1, "no temporary was kept"
    for x, got, copy in zip(xs, results, copies):
        for g, c, w in zip(got, copy, f(x)):
            np.testing.assert_array_equal(g, c)       # not written over by later calls
            # (compiled exp is within an ulp of NumPy's)
            np.testing.assert_allclose(g, np.asarray(w), rtol=1e-15, atol=0)


def test_an_output_viewing_a_temporary_is_never_reused(sync_tier):
    # the result is a view (reshape) of a kernel's output: that buffer must not go back
    # to the pool while the caller holds the view
    def f(x):
        t = tnp.sin(x) * 3.0 + x
        return t.reshape(-1), tnp.sum(t * t)

    jf = tracer.jit(f)
    x1, x2 = np.linspace(-1, 1, 64 * 256).reshape(64, 256), np.full((64, 256), 2.5)
    r1 = jf(x1)
    keep = np.asarray(r1[0]).copy()
    jf(x2)
    jf(x2)
    np.testing.assert_array_equal(np.asarray(r1[0]), keep)


def test_a_caller_keeping_a_returned_array_is_never_written(sync_tier):
    jf = tracer.jit(lambda x: (x * 2.0 + 1.0, tnp.tanh(x * 2.0 + 1.0) * 0.5))
    x = np.ones((128, 128))
    a, b = jf(x)
    a0, b0 = np.asarray(a).copy(), np.asarray(b).copy()
    for k in range(3):
        jf(x * (k + 2))
    np.testing.assert_array_equal(np.asarray(a), a0)
    np.testing.assert_array_equal(np.asarray(b), b0)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_malloc_policy_applies_once_and_respects_the_user():
    code = ("import numba_backend.executor, sys; from numba_backend import memory; "
            "print(memory.tuned)")
    env = dict(os.environ, PYTHONPATH=ROOT)
    for extra, want in (({}, "True"), ({"TRACER_MALLOC_TUNING": "0"}, "False"),
                        ({"MALLOC_TRIM_THRESHOLD_": "1000000"}, "False")):
        res = subprocess.run([sys.executable, "-c", code], env=dict(env, **extra),
                             capture_output=True, text=True, timeout=300, cwd=ROOT)
        assert res.returncode == 0, res.stderr[-2000:]
        assert res.stdout.strip() == want, (extra, res.stdout)


def test_straight_line_runner_equals_the_plan_loop(sync_tier):
    # kernels (with a parallel variant and a pooled temporary), reshape views, library
    # calls (dot_general, sort) and a literal output: the generated runner gives the
    # plan loop's results bit for bit, call after call, and takes the pool's buffers
    def f(w, x):
        h = tnp.tanh(x @ w + 1.0)                  # dot_general, then a kernel
        t = tnp.exp(h * 0.5)                        # a large temporary
        s = tnp.sort(t.reshape(-1))                 # a view, then a library call
        return t / tnp.sum(t, axis=1, keepdims=True), s[:5], tnp.max(h, axis=0), 2.0

    jf = tracer.jit(f)
    rng = np.random.default_rng(1)
    w = rng.normal(size=(32, 256))
    xs = [rng.normal(size=(128, 32)) for _ in range(3)]
    xs[1][0, 0] = np.nan
    xs[2][:, 3] = -0.0
    ex = _executable(jf, w, xs[0])
    for x in xs:
        want = [np.asarray(o) for o in f(w, x)]             # eager
        got_fast = ex.run_compiled([w, x])
        assert ex._straight is not None and "def run(args):" in ex._straight.source
        got_loop = ex.run_compiled([w, x], plan=ex._plan_compiled)
        for a, b, e in zip(got_fast, got_loop, want):
            a, b = np.asarray(a), np.asarray(b)
            assert a.tobytes() == b.tobytes()
            # (compiled exp and tanh may differ from NumPy's by an ulp: README)
            np.testing.assert_allclose(a, e, rtol=1e-14, atol=0)
        assert not any(a.flags.writeable for a in got_fast[:3])   # (the 4th: a literal)
    assert ex._pool, "the temporary went back to the pool"


def test_straight_line_runner_calls_products_by_their_plan(sync_tier):
    # dot_general in the generated runner calls its shapes' plan directly: each transpose
    # arrangement of two matrices, a batched product, an int product, empty and size-1
    # dims, NaN and -0.0: the eager values bit for bit, read-only, C-contiguous, never
    # an operand's memory
    from tracer import lax
    dn = lambda lc, rc: (((lc,), (rc,)), ((), ()))

    def f(a, at, b, bt, c, i):
        return (a @ b, lax.dot_general(at, b, dn(0, 0)), lax.dot_general(a, bt, dn(1, 1)),
                lax.dot_general(at, bt, dn(0, 1)), c @ c, i @ i.T)

    rng = np.random.default_rng(3)
    for m, k, n in ((5, 3, 4), (1, 1, 1), (0, 3, 2), (4, 0, 2), (3, 2, 0)):
        a = rng.normal(size=(m, k)).astype(np.float32)
        b = rng.normal(size=(k, n)).astype(np.float32)
        if a.size:
            a.flat[0], a.flat[-1] = np.nan, -0.0
        args = [a, a.T.copy(), b, b.T.copy(), rng.normal(size=(2, 3, 3)),
                rng.integers(-5, 5, size=(3, 4)).astype(np.int32)]
        jf = tracer.jit(f)
        ex = _executable(jf, *args)
        got = ex.run_compiled(args)
        src = ex._straight.source
        assert "ex._store(" not in src, src
        if (m, k, n) == (5, 3, 4):     # (smaller products may become kernels)
            assert src.count("a.setflags(False)") == 6, src
        want = f(*map(tnp.asarray, args))
        for g, w in zip(got, want):
            g, w = np.asarray(g), np.asarray(w)
            assert g.dtype == w.dtype and g.shape == w.shape
            assert g.tobytes() == w.tobytes()
            assert not g.flags.writeable and g.flags.c_contiguous
            assert not any(np.shares_memory(g, x) for x in args)


def test_straight_line_runner_is_skipped_where_the_plan_has_fallbacks(sync_tier):
    # float16 kernels travel as bits through their own path: the plan loop runs them
    jf = tracer.jit(lambda x: tnp.exp(x) * 2)
    x = np.linspace(-2, 2, 50).astype(np.float16)
    ex = _executable(jf, x)
    got = ex.run_compiled([x])
    assert ex._straight is None
    np.testing.assert_array_equal(np.asarray(got[0]), np.asarray(jf(x)))


def test_the_collector_is_frozen_at_exit_and_exit_handlers_still_run(tmp_path):
    # the backend's exit hook freezes the collector (its last collections would walk
    # Numba's registries); handlers registered before it still run afterwards, and
    # open files are still flushed
    out = tmp_path / "out.txt"
    code = textwrap.dedent(f"""
        import atexit, gc
        f = open({str(out)!r}, "w")
        f.write("written ")
        atexit.register(lambda: f.write(f"frozen={{gc.get_freeze_count() > 0}}"))
        import numpy as np, tracer, tracer.numpy as tnp
        tracer.config.update("jit_compile", "sync")
        print(float(tracer.jit(lambda x: tnp.sum(x * 2.0))(np.ones(3))))
    """)
    env = dict(os.environ, PYTHONPATH=ROOT, TRACER_CACHE_DIR=str(tmp_path / "cache"))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "6.0"
    assert out.read_text() == "written frozen=True"
