"""The mixed tier: while compiles are pending, a program runs each kernel compiled as soon
as its worker has finished and every other step through its slice of the optimized
jaxpr on the NumPy impls; a kernel that fails to compile keeps running its slice.
Results equal the NumPy tier bit for bit (exact operations only here: the tiers agree
on them exactly, docs/ARCHITECTURE.md section 3)."""
import logging
from concurrent.futures import Future

import numpy as np
import pytest

import lax
import tracer
import tracer.numpy as tnp
from lowering import pipeline
from lowering.ir import KernelStep, LibraryCall
from numba_backend import cache, executor


def _done(ok=True):
    f = Future()
    f.set_result({"ok": ok, "error": None if ok else "a test's failure"})
    return f


def _loss(w, b, x, y):
    h = tnp.maximum(x @ w + b, 0.0)
    return tnp.sum((h - y) ** 2) / x.shape[0]


def _rows(x):
    z = x - tnp.max(x, axis=1, keepdims=True)
    return z / (tnp.sum(tnp.abs(z), axis=1, keepdims=True) + 1.0), tnp.min(x, axis=0)


def _sorted_sums(x):
    y = lax.sort(x * 2.0 + 1.0, dimension=0)
    return tnp.cumsum(y, axis=0) - x, tnp.max(y, axis=1)


def _edge(shape, rng):
    x = rng.normal(size=shape)
    flat = x.reshape(-1)
    flat[:6] = [np.nan, -0.0, 0.0, np.inf, -np.inf, 3.0]
    flat[6:9] = 3.0                      # ties with a maximum
    return x


def _programs():
    rng = np.random.default_rng(0)
    w, b = rng.normal(size=(6, 5)), rng.normal(size=5)
    x, y = rng.normal(size=(7, 6)), rng.normal(size=(7, 5))
    x[0, 0] = -0.0
    return [("mlp grad", tracer.value_and_grad(_loss, argnums=(0, 1)), (w, b, x, y)),
            ("rows", _rows, (_edge((5, 9), rng),)),
            ("size-1 rows", _rows, (_edge((1, 9), rng),)),
            ("sort cumsum", _sorted_sums, (_edge((6, 4), rng),))]


def _executable(f, args):
    """An Executable of ``f`` in a fresh in-memory kernel cache (its kernels not loaded)."""
    cache.clear_memory_cache()
    closed = tracer.jit(f).trace(*args).jaxpr
    return executor.Executable(pipeline.lower(closed), "t"), \
        [np.asarray(a) for a in tracer.tree_util.tree_leaves(args)]


def _bits_equal(got, want):
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g.view(f"u{g.dtype.itemsize}"),
                                      w.view(f"u{w.dtype.itemsize}"))


@pytest.mark.parametrize("name,f,args", _programs(), ids=[p[0] for p in _programs()])
def test_every_step_has_a_slice_and_slices_alone_give_the_numpy_tier(name, f, args):
    ex, flat = _executable(f, args)
    want = ex.run_numpy(flat)
    kernels = [s for s in ex.program.steps if isinstance(s, KernelStep)]
    assert kernels
    for step in ex.program.steps:
        if isinstance(step, KernelStep) or (isinstance(step, LibraryCall)
                                            and step.kind != "reshape_view"):
            fb = ex._fallback(step)
            assert fb is not None, step
            # the slice ends at exactly the variables of the step's outputs
            assert fb.jaxpr.outvars == [ex.program.buffer_vars[o] for o in step.outs]
    ex._broken.update(ex.handles)        # every kernel through its slice
    _bits_equal(ex.run_compiled(flat), want)


@pytest.mark.parametrize("name,f,args", _programs(), ids=[p[0] for p in _programs()])
def test_kernels_switch_one_by_one_with_the_same_bits(name, f, args):
    ex, flat = _executable(f, args)
    want = ex.run_numpy(flat)
    pending = [Future() for _ in ex.handles]
    ex._jobs = list(zip(ex.handles, pending))
    lib = [s for s in ex.program.steps if isinstance(s, LibraryCall)
           and s.kind not in executor._UNPRIMED_KINDS]
    primes = {id(s): Future() for s in lib}       # primed library calls still compiling
    ex._prime_of, ex._primes = primes, list(primes.values())
    assert ex._mixed() is False                   # nothing compiled: the NumPy tier
    seen = []
    for k, (h, fut) in enumerate(ex._jobs):
        h.serial()                                # (what the worker left in the cache)
        fut.set_result({"ok": True})
        plan = ex._mixed()
        assert plan, k
        n_sliced = sum(1 for e in plan if e[0] == "f")
        seen.append(n_sliced)
        _bits_equal(ex.run_compiled(flat, plan=plan), want)
    assert seen == sorted(seen, reverse=True) and seen[-1] == len(lib)
    for fut in primes.values():
        fut.set_result({"ok": True})
    plan = ex._mixed()
    assert not any(e[0] == "f" for e in plan)
    _bits_equal(ex.run_compiled(flat, plan=plan), want)


def test_a_kernel_that_fails_to_compile_runs_its_slice(caplog):
    name, f, args = _programs()[1]
    ex, flat = _executable(f, args)
    want = ex.run_numpy(flat)
    for h in ex.handles[1:]:
        h.serial()
    ex._jobs = [(ex.handles[0], _done(False))] + [(h, _done()) for h in ex.handles[1:]]
    ex._primes = []
    with caplog.at_level(logging.WARNING, logger="tracer"):
        ex._switch()
    assert ex.state == "ready" and ex._broken == {ex.handles[0]}
    assert ex.handles[0].path in caplog.text and "failed to compile" in caplog.text
    plan = ex._compiled_steps()
    assert [e[0] for e in plan].count("f") == 1
    for _ in range(2):
        _bits_equal(ex.run_compiled(flat), want)


def test_the_async_tier_runs_mixed_and_answers_as_the_numpy_tier():
    name, f, args = _programs()[0]
    jf = tracer.jit(f)
    want = [np.asarray(a) for a in tracer.tree_util.tree_leaves(f(*args))]
    old = tracer.config.jit_compile
    tracer.config.update("jit_compile", "async")
    try:
        for _ in range(3):
            got = tracer.tree_util.tree_leaves(jf(*args))
            for g, w in zip(got, want):
                np.testing.assert_allclose(np.asarray(g), w, rtol=1e-13)
    finally:
        tracer.config.update("jit_compile", old)


def test_numpy_tier_estimate_counts_loop_bodies_times_trips():
    """``control_flow.numpy_tier_seconds``: equations times a scan's trips, a cond's
    costliest branch, a while loop unbounded."""
    from numba_backend.control_flow import _SECONDS_PER_EQN, numpy_tier_seconds

    def est(f, *args):
        return numpy_tier_seconds(tracer.make_jaxpr(f)(*args).jaxpr) / _SECONDS_PER_EQN

    x = np.ones(3)
    body = lambda c, _: (tnp.sin(c) * 2.0 + 1.0, None)      # 3 equations
    assert est(lambda c: lax.scan(body, c, None, length=40)[0], x) == pytest.approx(120)
    assert est(lambda c: lax.scan(lambda c, _: lax.scan(body, c, None, length=5),
                                  c, None, length=7)[0], x) == pytest.approx(105)
    two = lambda c: lax.cond(c[0] > 0, lambda c: c * 2.0, lambda c: tnp.sin(c) + c, c)
    assert est(lambda c: lax.scan(lambda c, _: (two(c), None), c, None, length=10)[0],
               x) == pytest.approx(10 * (4 + 2))   # (c[0]: slice, reshape; gt; convert)
    assert est(lambda c: lax.while_loop(lambda c: c[0] < 5, lambda c: c + 1.0, c), x) \
        == float("inf")


def test_async_short_loop_runs_the_numpy_tier_instead_of_waiting(monkeypatch):
    """In "async" mode a program whose loops are short on the NumPy impls answers from
    there while its kernels compile (a never-ending compile here: it must not wait), a
    long one waits; the answer is the NumPy tier's bit for bit."""
    tracer.config.update("jit_compile", "async")
    try:
        step = lambda c, x: (c * 0.5 + x, c - x)      # (exact: the same bits compiled)
        xs = np.linspace(-1, 1, 30).reshape(10, 3)
        ex, flat = _executable(lambda c, xs: lax.scan(step, c, xs), (np.ones(3), xs))
        assert ex._loops() and ex._numpy_tier_is_short()
        monkeypatch.setattr(ex, "_compile_in_background", lambda: None)
        ex._jobs = [(h, Future()) for h in ex.handles]        # compiles never end
        monkeypatch.setattr(ex, "wait", lambda: pytest.fail("a short loop waited"))
        _bits_equal(ex(flat), ex.run_numpy(flat))
        long_xs = np.zeros((100000, 3))
        ex2, _ = _executable(lambda c, xs: lax.scan(step, c, xs), (np.ones(3), long_xs))
        assert not ex2._numpy_tier_is_short()
    finally:
        tracer.config.update("jit_compile", "sync")


def test_a_program_with_a_scan_runs_mixed_before_its_own_kernels(monkeypatch):
    """While none of a program's own kernels is compiled, a scan in it runs through its
    runner (its body switching to compiled kernels as they come), not equation by
    equation on the NumPy tier to the end; and the body's kernels are queued before the
    program's own (a body runs once per iteration). Same bits as the NumPy tier."""
    from numba_backend import control_flow
    tracer.config.update("jit_compile", "async")
    try:
        # (a product the runner calls; small integers and halves: exact in any order,
        # so the same bits compiled)
        w = np.array([[1.0, -2.0, 0.0], [2.0, 1.0, -1.0], [0.0, 1.0, 2.0]])
        step = lambda c, x: ((w @ c) * 0.5 + x, c - x)
        f = lambda c, xs: tnp.sin(lax.scan(step, tnp.cos(c), xs)[0]) * 3.0
        xs = np.arange(30.0).reshape(10, 3) - 15.0
        ex, flat = _executable(f, (np.ones(3), xs))
        (spec,) = ex._loops()
        body = control_flow.runner_for(spec).host.exes[0]
        asked = []

        def submit(job, fallback):
            asked.append(job and job.get("path"))
            return Future()                               # compiles never end
        monkeypatch.setattr(executor.pool, "submit", submit)
        ex._compile_in_background()
        paths = [h.path for h in dict.fromkeys(body.handles)]
        assert asked[:len(paths)] == paths and \
            set(asked) >= {h.path for h in ex.handles}, asked
        plan = ex._mixed()
        assert plan and not any(e[0] == "k" for e in plan)
        assert any(e[0] == "l" and e[1].kind == "scan" for e in plan)
        _bits_equal(ex.run_compiled(flat, plan=plan), ex.run_numpy(flat))
    finally:
        tracer.config.update("jit_compile", "sync")


def test_a_loop_body_waits_on_the_numpy_tier_until_all_its_kernels_are_compiled(monkeypatch):
    """A scan body that the Python loop calls once per iteration skips the mixed tier: with
    one of its kernels compiled and the other pending it runs the NumPy tier (a partly
    compiled body of small arrays costs more per iteration than the NumPy impls), and it
    switches to its compiled tier once every kernel is done. Same bits throughout (exact
    operations)."""
    from numba_backend import control_flow
    tracer.config.update("jit_compile", "async")
    try:
        w = np.array([[1.0, -2.0, 0.0], [2.0, 1.0, -1.0], [0.0, 1.0, 2.0]])
        step = lambda c, x: (tnp.maximum(w @ tnp.abs(c), -x) * 0.5 + x, tnp.abs(c - x))
        f = lambda c, xs: lax.scan(step, c * 2.0, xs)
        c0, xs = np.array([1.0, -0.0, 3.0]), np.arange(12.0).reshape(4, 3) - 6.0
        ex, flat = _executable(f, (c0, xs))
        (spec,) = ex._loops()
        body = control_flow.runner_for(spec).host.exes[0]
        assert body.loop_body and not ex.loop_body
        monkeypatch.setattr(executor.pool, "submit", lambda job, fallback: Future())
        handles = list(dict.fromkeys(body.handles))
        assert len(handles) >= 2
        pending = {h: Future() for h in handles}
        body._jobs = [(h, pending[h]) for h in body.handles]   # (compiles never end)
        host = control_flow.runner_for(spec).host
        tiers, mixed, runs = [], [], []
        real_tier, real_call = body.tier, control_flow.HostRunner.__call__

        def tier():
            tiers.append(real_tier())
            return tiers[-1]

        def call(self, arrays):
            out = real_call(self, arrays)
            runs.append((arrays, out))
            return out
        monkeypatch.setattr(body, "tier", tier)
        monkeypatch.setattr(body, "_mixed", lambda: mixed.append(1))
        monkeypatch.setattr(control_flow.HostRunner, "__call__", call)
        want = ex.run_numpy(flat)
        _bits_equal(ex(flat), want)
        handles[0].serial()                            # its worker has finished
        pending[handles[0]].set_result({"ok": True})
        _bits_equal(ex(flat), want)
        assert body.state == "pending" and not mixed and len(runs) == 2
        assert [t for t, _ in tiers] == ["numpy", "numpy"]   # (once per loop)
        for h in handles[1:]:
            h.serial()
            pending[h].set_result({"ok": True})
        _bits_equal(host(runs[0][0]), runs[0][1])
        assert body.state == "ready" and not mixed
        assert [t for t, _ in tiers] == ["numpy", "numpy", "compiled"] + ["compiled"] * 4
    finally:
        tracer.config.update("jit_compile", "sync")
