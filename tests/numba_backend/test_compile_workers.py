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


@pytest.fixture
def nothing_on_disk(monkeypatch):
    """As if the disk cache were empty (a developer's warm cache would otherwise load the
    drivers at once and skip the paths under test)."""
    from numba_backend import cache
    monkeypatch.setattr(cache, "on_disk", lambda path, func: False)


def test_async_loop_driver_compiles_in_a_worker(async_tier, nothing_on_disk):
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
    # (compiled arcsinh is libm's, NumPy's may be its own SIMD routine: an ulp apart, and
    # the first call is compiled already where an earlier run left the kernel on disk)
    np.testing.assert_allclose(np.asarray(jf(x)), np.asarray(f(x)), rtol=1e-14)
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


def test_import_starts_one_warm_worker_and_jobs_reach_it(tmp_path):
    """``import tracer`` (default tier) starts one worker; the queue hands the jobs to it
    (and to the workers started while it is busy) and every job is answered."""
    code = textwrap.dedent("""
        import json, sys
        import tracer
        from numba_backend import workers
        print(len(workers.pool._workers), "numba" in sys.modules)
        futs = [workers.pool.submit({"module": "tracer_kernels.nothing",
                                     "path": "/nonexistent%d.py" % i, "func": "kernel",
                                     "opts": {}, "sig": []}, lambda: None) for i in range(5)]
        replies = [f.result(timeout=300) for f in futs]
        print(all(r["ok"] is False and "nonexistent%d" % i in r["error"]
                  for i, r in enumerate(replies)))
        print(len(workers.pool._queue), 1 <= len(workers.pool._workers) <= workers.pool_size())
    """)
    env = dict(os.environ, TRACER_CACHE_DIR=str(tmp_path), TRACER_JIT_COMPILE="async",
               PYTHONPATH=ROOT)
    res = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.split() == ["1", "False", "True", "0", "True"], res.stdout


def test_workers_that_end_as_they_start_fail_the_job_after_one_retry(monkeypatch):
    # (a job goes to a worker as soon as one is idle; two that end leave it failed, and
    # nothing restarts workers once the queue is empty)
    from numba_backend import workers
    monkeypatch.setattr(workers, "_BOOT", "import sys; sys.exit(3)")
    p = workers.Pool()
    fut = p.submit({"module": "m", "path": "/x.py", "func": "kernel", "opts": {},
                    "sig": []}, lambda: None)
    reply = fut.result(timeout=120)
    assert reply["ok"] is False and "exit status 3" in reply["error"], reply
    time.sleep(0.5)
    assert p._queue == [] and p._live() == []



class _FakeWorker:
    """A worker that holds what it is sent until the test ends its jobs."""
    started = []

    def __init__(self, pool, warm_up=True):
        self.pool, self.pending, self.alive = pool, {}, True
        _FakeWorker.started.append(self)

    def send(self, entry):
        self.pending[entry[0]["id"]] = entry

    def finish_one(self):
        job_id, (_, fut, _) = next(iter(self.pending.items()))
        del self.pending[job_id]
        fut.set_result({"id": job_id, "ok": True})
        self.pool._dispatch()


def test_the_program_keeps_a_core_unless_it_waits(monkeypatch):
    """On 2 cores one worker compiles while the program runs; while it blocks on its
    compiles (``Pool.waiting``) a second one starts; at exit queued jobs are shared by as
    many workers as waiting allows."""
    from numba_backend import workers
    monkeypatch.delenv("TRACER_COMPILE_WORKERS", raising=False)
    monkeypatch.setattr(workers.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(workers, "_Worker", _FakeWorker)
    monkeypatch.setattr(_FakeWorker, "started", [])
    assert (workers.pool_size(False), workers.pool_size(True)) == (1, 2)
    p = workers.Pool()
    futs = [p.submit({"path": f"/k{i}.py"}, lambda: None) for i in range(5)]
    assert len(_FakeWorker.started) == 1 and len(p._queue) == 4
    with p.waiting():
        assert len(_FakeWorker.started) == 2 and len(p._queue) == 3
        _FakeWorker.started[0].finish_one()          # an idle worker takes the next job
        assert len(p._queue) == 2 and all(w.pending for w in _FakeWorker.started)
    _FakeWorker.started[1].finish_one()              # running again: one compiles at a time
    assert len(p._queue) == 2 and sum(bool(w.pending) for w in _FakeWorker.started) == 1
    p._flush()
    assert p._queue == [] and len(_FakeWorker.started) == 2
    for w in _FakeWorker.started:
        while w.pending:
            w.finish_one()
    assert all(f.result(timeout=1)["ok"] for f in futs)
    monkeypatch.setenv("TRACER_COMPILE_WORKERS", "3")
    assert (workers.pool_size(False), workers.pool_size(True)) == (3, 3)


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
    env.pop("NUMBA_CACHE_DIR", None)     # Numba's cache beside the kernels, looked at below
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


def test_async_while_hands_its_carry_to_the_driver(async_tier, nothing_on_disk, monkeypatch):
    """A while loop runs in Python only until its driver is compiled, then the driver
    resumes from the carry reached: the answer is that of one uninterrupted loop."""
    from numba_backend import control_flow
    seen = {"iterations": 0}
    run_while = control_flow.HostRunner.run_while

    def three_then_wait(self, arrays, stop):
        def after_three():
            seen["iterations"] += 1
            if seen["iterations"] < 3:
                return False
            stop.__self__.result()       # the driver's compile (a Future): wait for it
            return True
        return run_while(self, arrays, after_three)

    monkeypatch.setattr(control_flow.HostRunner, "run_while", three_then_wait)
    body = lambda c: (c[0] + 1, c[1] * 0.96875 + 0.40625)     # exact in binary
    f = lambda s: lax.while_loop(lambda c: c[0] < 37, body, (0, s))
    s = np.array([0.5, -3.0, 8.0])
    want = s.copy()
    for _ in range(37):
        want = want * 0.96875 + 0.40625
    n, out = tracer.jit(f)(s)
    assert int(n) == 37 and seen["iterations"] == 3
    np.testing.assert_array_equal(np.asarray(out), want)


def test_async_long_scan_waits_for_its_driver(async_tier):
    """A scan too long for the Python loop (its estimated time) waits for its compiled
    driver instead: no host loop runs, and the answer is the loop's."""
    from numba_backend import control_flow
    step = lambda c, x: (c * 0.5 + x * 0.21875, c - x)
    f = tracer.jit(lambda c, xs: lax.scan(step, c, xs))
    c, xs = np.array([1.0, -2.0]), np.linspace(-1, 1, 20000 * 2).reshape(20000, 2)
    host_before = control_flow.stats["host_loops"]
    carry, ys = f(c, xs)
    assert control_flow.stats["host_loops"] == host_before
    want_c, want_ys = c.copy(), np.empty_like(xs)
    for i, x in enumerate(xs):
        want_c, want_ys[i] = want_c * 0.5 + x * 0.21875, want_c - x
    np.testing.assert_allclose(np.asarray(carry), want_c, rtol=1e-14)
    np.testing.assert_allclose(np.asarray(ys), want_ys, rtol=1e-14)


LOOP_SCRIPT = textwrap.dedent("""
    import numpy as np
    import tracer, lax
    f = tracer.jit(lambda s: lax.fori_loop(0, 3, lambda i, s: s * 0.8125 + 1.0, s))
    print(np.asarray(f(np.array([1.0, 2.0]))).tolist())
    from numba_backend import control_flow
    print(control_flow.stats["host_loops"])
""")


def test_a_cached_driver_loads_at_once_with_numba_cache_dir(tmp_path):
    """With NUMBA_CACHE_DIR set, Numba keeps its cache there: a warm run still finds the
    driver and loads it on the first call instead of running the loop in Python."""
    env = dict(os.environ, TRACER_CACHE_DIR=str(tmp_path / "t"),
               NUMBA_CACHE_DIR=str(tmp_path / "numba"), PYTHONPATH=ROOT)
    run = lambda mode: subprocess.run([sys.executable, "-c", LOOP_SCRIPT], cwd=ROOT,
                                      env=dict(env, TRACER_JIT_COMPILE=mode),
                                      capture_output=True, text=True, timeout=600)
    first = run("sync")                            # compiles and fills both caches
    assert first.returncode == 0, first.stderr
    second = run("async")
    assert second.returncode == 0, second.stderr
    assert second.stdout.splitlines()[0] == first.stdout.splitlines()[0]
    assert second.stdout.splitlines()[1] == "0", second.stdout


LIBRARY_SCRIPT = textwrap.dedent("""
    import numpy as np
    import lax, tracer, tracer.numpy as tnp
    def f(x, w):
        y = lax.conv_general_dilated(x, w, (1, 1), "SAME")
        return tnp.tanh(y) * 0.5 + 1.0
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=(2, 3, 9, 9)), rng.normal(size=(4, 3, 3, 3))
    jf = tracer.jit(f)
    first = np.asarray(jf(x, w))                 # NumPy tier; the worker primes the conv
    ex = tracer._jit_backend.get_executable(jf.trace(x, w).jaxpr, "f")
    ex.wait()
    assert ex.state == "ready", ex.state
    second = np.asarray(jf(x, w))                # compiled tier
    np.testing.assert_allclose(second, first, rtol=1e-12, atol=1e-12)
    import numba
    from numba_backend import conv_kernels as ck
    disps = [v for v in vars(ck).values() if isinstance(v, numba.core.registry.CPUDispatcher)]
    hits = sum(sum(d.stats.cache_hits.values()) for d in disps)
    misses = sum(sum(d.stats.cache_misses.values()) for d in disps)
    print(hits, misses)
""")


def test_library_kernels_compile_in_a_worker_before_the_switch(tmp_path):
    """A convolution's Numba kernels (fixed cache=True functions) are compiled by a worker
    running the call once on zeros: after the switch this process loads them from the
    disk cache instead of compiling them (seconds) on its first compiled call."""
    env = dict(os.environ, TRACER_CACHE_DIR=str(tmp_path / "t"), TRACER_JIT_COMPILE="async",
               NUMBA_CACHE_DIR=str(tmp_path / "n"), PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", LIBRARY_SCRIPT], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    hits, misses = map(int, out.stdout.split()[-2:])
    assert hits >= 1 and misses == 0, out.stdout


PENDING_PRIME_SCRIPT = textwrap.dedent("""
    from concurrent.futures import Future
    import numpy as np
    import lax, tracer, tracer.numpy as tnp
    def f(x, w):
        y = lax.conv_general_dilated(x, w, (1, 1), "SAME")
        z = lax.conv_general_dilated(y, w[:, :4], (1, 1), "SAME")   # the same kernels
        return tnp.tanh(z) * 0.5 + 1.0
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=(2, 4, 9, 9)), rng.normal(size=(4, 4, 3, 3))
    jf = tracer.jit(f)
    first = np.asarray(jf(x, w))                 # NumPy tier; compiles start
    ex = tracer._jit_backend.get_executable(jf.trace(x, w).jaxpr, "f")
    print(len(ex._primes), len(ex._prime_of))
    for _, fut in ex._jobs:
        fut.result()
    for p in ex._primes:
        p.result()
    pending = Future()                           # as if the conv's priming went on
    ex._primes = [pending]
    ex._prime_of = {k: pending for k in ex._prime_of}
    second = np.asarray(jf(x, w))
    assert ex.state == "ready", ex.state         # switched: the conv runs in NumPy
    print(sorted({e[0] for e in ex._plan_compiled}))
    pending.set_result({"ok": True})
    third = np.asarray(jf(x, w))                 # the conv's kernels, from the cache
    fourth = np.asarray(jf(x, w))
    print(sorted({e[0] for e in ex._plan_compiled}))
    for r in (second, third, fourth):
        np.testing.assert_allclose(r, first, rtol=1e-10, atol=1e-10)
""")


def test_the_program_switches_while_a_conv_is_primed(tmp_path):
    """Convolutions of one strategy and dtype share one priming job; while it is pending
    the program switches to its compiled kernels all the same and runs the convolution
    through its NumPy fallback, then through its Numba kernels once they are cached."""
    env = dict(os.environ, TRACER_CACHE_DIR=str(tmp_path / "t"), TRACER_JIT_COMPILE="async",
               NUMBA_CACHE_DIR=str(tmp_path / "n"), PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", PENDING_PRIME_SCRIPT], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert lines[0] == "1 2", lines
    assert "p" in lines[1] and "p" not in lines[2], lines


LOADED_THEN_UFUNC = textwrap.dedent("""
    import numpy as np
    import tracer, tracer.numpy as tnp, lax
    tracer.config.update("jit_compile", "sync")
    f = tracer.jit(lambda x: tnp.sum(tnp.exp(-x * x) * 0.625 + x, axis=-1))
    print(np.asarray(f(np.linspace(-1, 1, 12).reshape(3, 4))).tolist())
    x = np.array([0.0, 0.5, 3.0, -2.0], np.float32)
    print(np.asarray(lax.erfc(x)).tolist())
""")


def test_eager_ufunc_after_loading_cached_kernels(tmp_path):
    """A process whose first Numba work is loading cached kernels (no registries
    installed) can then build a special function's ufunc from Numba's cache: the second
    run used to fail in Numba's lowering of the ufunc's loop wrapper."""
    env = dict(os.environ, TRACER_CACHE_DIR=str(tmp_path / "t"),
               NUMBA_CACHE_DIR=str(tmp_path / "numba"), PYTHONPATH=ROOT)
    run = lambda: subprocess.run([sys.executable, "-c", LOADED_THEN_UFUNC], env=env,
                                 cwd=ROOT, capture_output=True, text=True, timeout=600)
    first = run()
    assert first.returncode == 0, first.stderr
    second = run()
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout
    from scipy.special import erfc
    got = eval(second.stdout.splitlines()[1])
    np.testing.assert_allclose(got, erfc(np.array([0.0, 0.5, 3.0, -2.0])), rtol=1e-6)


LOAD_THEN_COMPILE = textwrap.dedent("""
    import sys
    import numpy as np, tracer, tracer.numpy as tnp
    tracer.config.update("jit_compile", "sync")
    # a pairwise sum of 3000 elements: the kernel allocates its buffers through NRT
    f = tracer.jit(lambda x: tnp.sum(tnp.tanh(x) * 2.0 + x))
    x = np.linspace(-3, 3, 3000)
    print(repr(float(f(x))))
    from numba.core.runtime import rtsys
    print(rtsys._init, "numba.np.linalg" in sys.modules)
    if sys.argv[1] == "compile":       # a kernel no run has compiled, in this process
        g = tracer.jit(lambda x: tnp.sum(tnp.sin(x) * 3.0 - x))
        print(repr(float(g(x))), rtsys._init)
""")


def test_loading_cached_kernels_registers_nrt_without_compiling_it(tmp_path):
    """A warm process loads its kernels with NRT's C functions registered and NRT's own
    LLVM module left uncompiled (numba_backend._numba._register_nrt_symbols), and without
    Numba's linear algebra (codegen.helper_hash reads numba_backend.blas as a file);
    kernels that allocate still run, and a later compile in the process initializes NRT
    fully."""
    env = dict(os.environ, TRACER_CACHE_DIR=str(tmp_path / "t"),
               NUMBA_CACHE_DIR=str(tmp_path / "numba"), PYTHONPATH=ROOT)
    run = lambda mode: subprocess.run([sys.executable, "-c", LOAD_THEN_COMPILE, mode],
                                      env=env, cwd=ROOT, capture_output=True, text=True,
                                      timeout=600)
    first = run("load")
    assert first.returncode == 0, first.stderr
    assert first.stdout.split()[1] == "True"       # it compiled
    for mode in ("load", "compile"):
        out = run(mode)
        assert out.returncode == 0, out.stderr
        lines = out.stdout.split()
        assert lines[0] == first.stdout.split()[0]
        assert lines[1:3] == ["False", "False"], lines  # loaded only
        if mode == "compile":
            x = np.linspace(-3, 3, 3000)
            np.testing.assert_allclose(float(lines[3]), np.sum(np.sin(x) * 3.0 - x),
                                       rtol=1e-12)
            assert lines[4] == "True"


FMA_SCRIPT = textwrap.dedent("""
    import numpy as np, tracer, tracer.numpy as tnp
    f = tracer.jit(lambda x: tnp.exp(x) + 0.0)
    x = np.float32([-100.0, -88.0, 0.5, 88.7, np.nan, -0.0])
    print(np.asarray(f(x)).view(np.uint32).tolist())
    from numba_backend import cache
    print(cache.stats["compiled"], cache.stats["cache_loads"])
""")


def test_a_kernel_calling_fma_loads_from_the_disk_cache_in_a_fresh_process(tmp_path):
    """exp_f32's kernel imports vecmath.fma (an intrinsic behind an overload): compiled in
    a worker, then loaded from Numba's disk cache by a new process, same bits."""
    env = dict(os.environ, TRACER_CACHE_DIR=str(tmp_path), TRACER_JIT_COMPILE="sync",
               PYTHONPATH=ROOT)
    env.pop("NUMBA_CACHE_DIR", None)
    run = lambda: subprocess.run([sys.executable, "-c", FMA_SCRIPT], env=env, cwd=ROOT,
                                 capture_output=True, text=True, timeout=600)
    first = run()
    assert first.returncode == 0, first.stderr
    srcs = list((tmp_path / "kernels").glob("k_*.py"))
    assert any("import fma" in p.read_text() for p in srcs)
    second = run()
    assert second.returncode == 0, second.stderr
    assert second.stdout.splitlines()[0] == first.stdout.splitlines()[0]
    compiled, loads = map(int, second.stdout.splitlines()[1].split())
    assert compiled == 0 and loads >= 1, second.stdout
    with np.errstate(all="ignore"):
        x32 = np.float32([-100.0, -88.0, 0.5, 88.7, np.nan, -0.0])
        want = np.exp(x32.astype(np.float64)).astype(np.float32)
    got = np.array(eval(first.stdout.splitlines()[0]), np.uint32).view(np.float32)
    assert np.isnan(got[4])
    keep = [0, 1, 2, 3, 5]
    assert (np.abs(got[keep].view(np.int32) - want[keep].view(np.int32)) <= 1).all()


@pytest.mark.parametrize("step", ["_warm_numba", "_warm_pairwise_sums", "_warm_kernel_idioms",
                                  "_warm_driver_runtime"])
def test_warm_up_steps_compile(step):
    # warm_up swallows a failing step (it is an optimisation): each step must work, or
    # every worker silently loses what it was meant to save
    from numba_backend import compile_worker
    fn = getattr(compile_worker, step)
    assert fn in compile_worker.WARM_UP_STEPS
    fn()


def test_kernel_jobs_go_before_queued_drivers(monkeypatch):
    # a driver job (one with globals) takes seconds; kernels and library primes switch
    # steps of the running program in a fraction of one: they overtake queued drivers,
    # and keep their own order
    from numba_backend import workers
    p = workers.Pool()
    monkeypatch.setattr(p, "_dispatch", lambda: None)     # (nothing leaves the queue)
    p.submit({"path": "d1", "globals": []}, None)
    p.submit({"path": "k1"}, None)
    p.submit({"path": "d2", "globals": []}, None)
    p.submit({"library": "x"}, None)
    p.submit({"path": "k2"}, None)
    order = [j.get("path", j.get("library")) for j, _, _ in p._queue]
    assert order == ["k1", "x", "k2", "d1", "d2"]
    p._queue = []
