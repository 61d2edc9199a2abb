"""The async tier's compile workers: compiles happen in other processes, reach the disk
cache even when the program has ended, and a failing or dying worker is never fatal."""
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import lax
import tracer
import tracer.numpy as tnp

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def async_tier():
    tracer.config.update("jit_compile", "async")
    try:
        yield
    finally:
        tracer.config.update("jit_compile", "sync")


def _executable(jf, *args):
    return tracer._jit_backend.get_executable(jf.trace(*args).jaxpr, "f")


def test_async_compiles_in_a_worker_and_switches(async_tier):
    from numba_backend import cache
    f = lambda x: tnp.tanh(x) * 1.25 + tnp.sum(x * x, axis=0)   # a program no other test has
    x = np.random.default_rng(3).normal(size=(4, 3))
    jf = tracer.jit(f)
    before = cache.stats["compiled"]
    first = np.asarray(jf(x))              # the NumPy tier answers at once
    # within an ulp, not bit-equal: when another test already put these kernels in the
    # disk cache, the first call is compiled, and compiled tanh is libm's, not NumPy's
    np.testing.assert_allclose(first, np.asarray(f(x)), rtol=1e-14)
    ex = _executable(jf, x)
    ex.wait()
    assert ex.state == "ready"
    assert cache.stats["compiled"] == before     # compiled elsewhere, loaded from disk here
    np.testing.assert_allclose(np.asarray(jf(x)), first, rtol=1e-14)


def test_async_loop_driver_compiles_in_a_worker(async_tier):
    from numba_backend import control_flow
    f = tracer.jit(lambda s: lax.fori_loop(0, 50, lambda i, s: s * 0.75 + tnp.cos(s) * 0.5, s))
    s = np.array([0.5, 1.5, -2.0])
    want = np.asarray(lax.fori_loop(0, 50, lambda i, s: s * 0.75 + tnp.cos(s) * 0.5, s))
    np.testing.assert_allclose(np.asarray(f(s)), want, rtol=1e-14)   # the host loop
    deadline = time.monotonic() + 300
    before = control_flow.stats["drivers_compiled"]
    while control_flow.stats["drivers_compiled"] == before and time.monotonic() < deadline:
        np.testing.assert_allclose(np.asarray(f(s)), want, rtol=1e-14)
        time.sleep(0.2)
    assert control_flow.stats["drivers_compiled"] > before, "the driver never switched"
    np.testing.assert_allclose(np.asarray(f(s)), want, rtol=1e-14)


def test_a_failing_worker_job_is_reported(async_tier):
    from numba_backend import workers
    fut = workers.pool.submit({"module": "tracer_kernels.nothing", "path": "/nonexistent.py",
                               "func": "kernel", "opts": {}, "sig": []}, lambda: None)
    reply = fut.result(timeout=300)
    assert reply["ok"] is False and "nonexistent" in reply["error"]


def test_a_killed_worker_is_replaced(async_tier):
    from numba_backend import workers
    w = workers.pool._worker()
    w.proc.kill()
    w.proc.wait()
    f = lambda x: tnp.arcsinh(x) - 0.375 * x     # compiled by a fresh worker
    x = np.linspace(-2, 2, 7)
    jf = tracer.jit(f)
    np.testing.assert_array_equal(np.asarray(jf(x)), np.asarray(f(x)))
    ex = _executable(jf, x)
    ex.wait()
    assert ex.state == "ready"
    np.testing.assert_allclose(np.asarray(jf(x)), np.asarray(f(x)), rtol=1e-14)


def test_orphaned_job_is_retried_once_then_fails():
    from concurrent.futures import Future
    from numba_backend import workers
    fut = Future()
    workers.pool._orphaned({"id": -1, "tries": 1}, fut, -9)
    assert fut.result(timeout=1) == {"id": -1, "ok": False,
                                     "error": "the compile worker ended with exit status -9"}


SCRIPT = textwrap.dedent("""
    import sys, time
    import numpy as np
    import tracer, tracer.numpy as tnp
    f = tracer.jit(lambda x: tnp.sum(tnp.exp(-x * x) * 0.625 + x, axis=-1))
    x = np.linspace(-1, 1, 12).reshape(3, 4)
    print(np.asarray(f(x)).tolist())
    from numba_backend import cache
    print(cache.stats["compiled"], cache.stats["cache_loads"])
""")


def test_compiles_pending_at_exit_reach_the_cache(tmp_path):
    """A program that ends before its compile did leaves the kernel in the cache: the next
    run loads it instead of compiling, and neither run waits for the compile to exit."""
    env = dict(os.environ, TRACER_CACHE_DIR=str(tmp_path), TRACER_JIT_COMPILE="async",
               PYTHONPATH=ROOT)
    run = lambda: subprocess.run([sys.executable, "-c", SCRIPT], env=env, cwd=ROOT,
                                 capture_output=True, text=True, timeout=600)
    first = run()
    assert first.returncode == 0, first.stderr
    kernels = tmp_path / "kernels" / "__pycache__"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not any(p.suffix == ".nbi" for p in
                                                  (kernels.glob("k_*") if kernels.exists() else [])):
        time.sleep(0.5)
    assert any(p.suffix == ".nbi" for p in kernels.glob("k_*")), "the worker left no entry"
    second = run()
    assert second.returncode == 0, second.stderr
    lines1, lines2 = first.stdout.splitlines(), second.stdout.splitlines()
    np.testing.assert_allclose(eval(lines2[0]), eval(lines1[0]), rtol=1e-14)
    compiled, loads = map(int, lines2[1].split())
    assert compiled == 0 and loads >= 1, lines2
