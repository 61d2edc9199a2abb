"""Host callbacks inside compiled loop drivers (numba_backend/host_callbacks.py): a scan,
fori_loop, while_loop or cond whose body calls pure_callback, io_callback or
debug.print/callback stays a compiled driver that calls back into Python once per
iteration, in program order, with the iteration's values; exceptions and result checks
behave as eagerly; vmap and grad of such loops still compile; the driver's source names
no user function, so it is cached on disk and compiled by workers."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
import traceback

import numpy as np
import pytest

import tracer
import tracer.numpy as jnp
from tracer import lax

S = tracer.ShapeDtypeStruct
F64 = np.float64
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def sync_tier():
    tracer.config.update("jit_compile", "sync")
    yield


def _text(f, *args):
    return f.lower(*args).as_text()


def _assert_compiled(f, *args):
    text = _text(f, *args)
    assert "a Python loop" not in text, text
    assert "hc_call(IP[" in text, text
    return text


class _Counters:
    """host_loops (Python loops run) and calls back from compiled drivers, as deltas."""

    def __init__(self):
        from numba_backend import control_flow, host_callbacks
        self.cf, self.hc = control_flow, host_callbacks
        self.loops0 = control_flow.stats["host_loops"]
        self.calls0 = host_callbacks.stats["calls"]

    @property
    def host_loops(self):
        return self.cf.stats["host_loops"] - self.loops0

    @property
    def driver_calls(self):
        return self.hc.stats["calls"] - self.calls0


# ----------------------------------- stays compiled ----------------------------------------

def test_long_fori_loop_with_io_and_pure_callbacks_stays_compiled():
    n = 20_000
    seen = []

    def log(i, c):
        seen.append((int(i), float(c[0])))

    def step(c):
        return np.asarray(c) * 0.5 + 1.0

    def body(i, c):
        tracer.io_callback(log, None, i, c, ordered=True)
        return tracer.pure_callback(step, S(c.shape, c.dtype), c) - 0.25 * jnp.sin(c)

    f = tracer.jit(lambda c: lax.fori_loop(0, n, body, c))
    c0 = np.array([0.0, 1.0, 8.0])
    _assert_compiled(f, c0)
    k = _Counters()
    out = f(c0)
    assert k.host_loops == 0                   # the loop never ran from Python
    assert k.driver_calls == 2 * n             # every call came from the compiled driver
    want, vals = c0.copy(), []
    for _ in range(n):
        vals.append(float(want[0]))
        want = want * 0.5 + 1.0 - 0.25 * np.sin(want)
    assert [i for i, _ in seen] == list(range(n))
    assert [v for _, v in seen] == vals
    np.testing.assert_allclose(out, want, rtol=1e-12)


def test_debug_print_in_a_compiled_scan_prints_once_per_iteration(capsys):
    def body(c, x):
        tracer.debug.print("c={} x={x}", c, x=x)
        return c + x, c * x

    f = tracer.jit(lambda c, xs: lax.scan(body, c, xs))
    xs = jnp.arange(1., 5.)
    _assert_compiled(f, 0.5, xs)
    k = _Counters()
    c, ys = f(0.5, xs)
    assert k.host_loops == 0 and k.driver_calls == 4
    assert capsys.readouterr().out.splitlines() == [
        "c=0.5 x=1.0", "c=1.5 x=2.0", "c=3.5 x=3.0", "c=6.5 x=4.0"]
    assert float(c) == 10.5
    np.testing.assert_array_equal(ys, [0.5, 3.0, 10.5, 26.0])
    f(1.0, xs[:2])                             # a new shape: run-time values again
    assert capsys.readouterr().out.splitlines() == ["c=1.0 x=1.0", "c=2.0 x=2.0"]


def test_two_ordered_io_callbacks_alternate_in_program_order():
    calls = []

    def body(i, c):
        tracer.io_callback(lambda v: calls.append(("a", float(v))), None, c, ordered=True)
        d = c * 2.0
        tracer.io_callback(lambda v: calls.append(("b", float(v))), None, d, ordered=True)
        return d + 1.0

    f = tracer.jit(lambda c: lax.fori_loop(0, 5, body, c))
    _assert_compiled(f, 1.0)
    assert float(f(1.0)) == 63.0
    want, c = [], 1.0
    for _ in range(5):
        want += [("a", c), ("b", 2 * c)]
        c = 2 * c + 1
    assert calls == want


def test_pure_callback_in_the_carry_matches_eager_and_a_python_loop():
    def host(c, x):
        return np.tanh(np.asarray(c) * np.asarray(x)) + np.asarray(c)[::-1]

    def body(c, x):
        y = tracer.pure_callback(host, S(c.shape, c.dtype), c, x)
        return y * 0.5 + jnp.cos(c), y.sum()

    run = lambda c, xs: lax.scan(body, c, xs)
    c0 = np.array([0.1, -0.4, 0.9])
    xs = np.linspace(-1, 1, 24).reshape(8, 3)
    f = tracer.jit(run)
    _assert_compiled(f, c0, xs)
    k = _Counters()
    c, ys = f(c0, xs)
    assert k.host_loops == 0 and k.driver_calls == 8
    ce, yse = run(c0, xs)                      # eagerly
    wc, wys = c0.copy(), []
    for x in xs:
        y = host(wc, x)
        wc, _ = y * 0.5 + np.cos(wc), wys.append(y.sum())
    np.testing.assert_allclose(c, ce, rtol=1e-14)
    np.testing.assert_allclose(ys, yse, rtol=1e-14)
    np.testing.assert_allclose(c, wc, rtol=1e-14)
    np.testing.assert_allclose(ys, wys, rtol=1e-14)


def test_while_loop_and_nested_cond_with_callbacks_stay_compiled():
    calls = []

    def body(c):
        i, x = c
        x = lax.cond(i % 2 == 0,
                     lambda x: tracer.pure_callback(lambda v: np.asarray(v) + 10.0,
                                                    S((), F64), x),
                     lambda x: (tracer.debug.callback(lambda v: calls.append(float(v)), x),
                                x * 2.0)[1], x)
        return i + 1, x

    f = tracer.jit(lambda x: lax.while_loop(lambda c: c[0] < 5, body, (0, x)))
    _assert_compiled(f, 1.0)
    k = _Counters()
    i, x = f(1.0)
    assert k.host_loops == 0 and k.driver_calls == 5
    assert int(i) == 5 and float(x) == ((1 + 10) * 2 + 10) * 2 + 10
    assert calls == [11.0, 32.0]


def test_cond_with_callbacks_in_both_branches_compiles():
    calls = []
    h = tracer.jit(lambda p, x: lax.cond(
        p, lambda x: (tracer.debug.callback(lambda v: calls.append(("T", float(v))), x),
                      x + 1)[1],
        lambda x: (tracer.debug.callback(lambda v: calls.append(("F", float(v))), x),
                   x - 1)[1], x))
    _assert_compiled(h, True, 1.0)
    assert [float(h(True, 1.0)), float(h(False, 1.0))] == [2.0, 0.0]
    assert calls == [("T", 1.0), ("F", 1.0)]


def test_callbacks_get_their_own_copies_of_the_operands_and_other_dtypes():
    kept = []

    def keep(c, flags, half):
        kept.append((c, flags, half))          # kept across iterations: must not change
        return np.asarray(half) * np.float16(2), np.asarray(c) + np.asarray(flags)

    def body(c, x):
        h, s = tracer.pure_callback(keep, (S((2,), np.float16), S((2,), np.int32)),
                                    c, c % 2 == 0, x)
        return s + 1, h

    f = tracer.jit(lambda c, xs: lax.scan(body, c, xs))
    xs = np.array([[1.5, -2.0], [0.25, 3.0], [8.0, 0.5]], np.float16)
    c0 = np.array([0, 1], np.int32)
    _assert_compiled(f, c0, xs)
    c, ys = f(c0, xs)
    assert ys.dtype == np.float16 and c.dtype == np.int32
    np.testing.assert_array_equal(ys, xs * 2)
    want = c0.copy()
    for k, (kc, kf, kh) in enumerate(kept):
        np.testing.assert_array_equal(np.asarray(kc), want)
        np.testing.assert_array_equal(np.asarray(kf), want % 2 == 0)
        np.testing.assert_array_equal(np.asarray(kh), xs[k])
        want = want + (want % 2 == 0) + 1
    np.testing.assert_array_equal(c, want)


def test_a_driver_calling_a_user_kernel_and_a_callback():
    import numba
    from tracer.ffi import numba_call

    @numba.njit
    def halve(c, out):
        for i in range(c.size):
            out.flat[i] = c.flat[i] * 0.5

    seen = []

    def body(i, c):
        c = numba_call(halve, S(c.shape, c.dtype), c)
        tracer.io_callback(lambda v: seen.append(float(v[0])), None, c)
        return c + 1.0

    f = tracer.jit(lambda c: lax.fori_loop(0, 4, body, c))
    _assert_compiled(f, np.ones(2))
    k = _Counters()
    np.testing.assert_array_equal(f(np.ones(2)), [1.9375, 1.9375])
    assert k.host_loops == 0 and seen == [0.5, 0.75, 0.875, 0.9375]


# ------------------------------------ errors ----------------------------------------------

class _Boom(KeyError):
    pass


def _raise_at_three(i):
    if int(i) == 3:
        raise _Boom(f"boom at {int(i)}")


@pytest.mark.parametrize("where", ["fori", "scan", "while", "cond"])
def test_exception_in_a_callback_inside_a_compiled_loop_propagates(where):
    from numba_backend import host_callbacks
    body = lambda i, c: (tracer.io_callback(_raise_at_three, None, i), c + 1.0)[1]
    loops = {
        "fori": lambda x: lax.fori_loop(0, 10, body, x),
        "scan": lambda x: lax.scan(lambda c, i: (body(i, c), i), x, jnp.arange(10))[0],
        "while": lambda x: lax.while_loop(lambda c: c[0] < 10,
                                          lambda c: (c[0] + 1, body(c[0], c[1])), (0, x))[1],
        "cond": lambda x: lax.fori_loop(0, 10, lambda i, c: lax.cond(
            i > 1, lambda c: body(i, c), lambda c: c - 1.0, c), x),
    }
    f = tracer.jit(loops[where])
    _assert_compiled(f, 1.0)
    with pytest.raises(_Boom, match="boom at 3") as info:
        f(1.0)
    assert traceback.extract_tb(info.value.__traceback__)[-1].name == "_raise_at_three"
    assert host_callbacks.take_pending() is None        # nothing left behind
    # the driver still works afterwards
    g = tracer.jit(lambda x: lax.fori_loop(0, 3, body, x))
    assert float(g(1.0)) == 4.0


def test_a_wrapped_callback_exception_is_raised_as_the_original(monkeypatch):
    """Should Numba turn an exception leaving an object-mode block into another one, the
    driver's caller raises the callback's own (kept by host_callbacks)."""
    from numba_backend import control_flow
    f = tracer.jit(lambda x: lax.fori_loop(
        0, 10, lambda i, c: (tracer.io_callback(_raise_at_three, None, i), c * 2.0)[1], x))
    _assert_compiled(f, 1.0)
    drivers = {id(r.driver): r.driver for r in control_flow._runners.values()
               if isinstance(r, control_flow.CompiledRunner) and any(
                   e.params["callback"].callback_func is _raise_at_three for e in r.callbacks)}
    assert drivers

    class Wrapping:       # the driver's dispatcher, its exceptions replaced
        def __init__(self, fn):
            self.fn = fn

        def __getattr__(self, name):
            return getattr(self.fn, name)

        def __call__(self, *args):
            try:
                return self.fn(*args)
            except _Boom:
                raise SystemError("an object-mode block failed") from None

    for d in drivers.values():
        monkeypatch.setattr(d, "fn", Wrapping(d.fn))
    with pytest.raises(_Boom, match="boom at 3") as info:
        f(1.0)
    assert traceback.extract_tb(info.value.__traceback__)[-1].name == "_raise_at_three"


def test_wrong_result_shape_or_dtype_in_a_compiled_loop_raises_clearly():
    def short(c):
        return np.asarray(c)[:2]

    def run(cb):
        f = tracer.jit(lambda c: lax.fori_loop(
            0, 4, lambda i, c: tracer.pure_callback(cb, S((3,), F64), c), c))
        _assert_compiled(f, np.zeros(3))
        return f(np.zeros(3))

    with pytest.raises(RuntimeError, match=r"short.*shape \(2,\).*expects shape \(3,\)"):
        run(short)
    with pytest.raises(RuntimeError, match=r"dtype float32.*expects.*dtype float64"):
        run(lambda c: np.asarray(c, np.float32))
    with pytest.raises(RuntimeError, match=r"returned 2 arrays, expected 1"):
        run(lambda c: (c, c))


# ------------------------------------ vmap and grad ---------------------------------------

@pytest.mark.parametrize("method", ["sequential", "expand_dims"])
def test_vmap_of_a_jitted_scan_with_a_pure_callback(method):
    calls = []

    def host(c, x):
        calls.append(np.shape(c))
        return np.sin(np.asarray(c)) + np.asarray(x)

    def run(c, xs):
        def body(c, x):
            y = tracer.pure_callback(host, S(c.shape, c.dtype), c, x, vmap_method=method)
            return y * 0.5, y
        return lax.scan(body, c, xs)

    cs = np.array([[0.1, 0.2], [0.3, -0.4], [1.5, 2.0]])
    xs = np.linspace(0, 1, 8).reshape(4, 2)
    f = tracer.jit(tracer.vmap(run, in_axes=(0, None)))
    _assert_compiled(f, cs, xs)
    k = _Counters()
    c, ys = f(cs, xs)
    assert k.host_loops == 0
    # expand_dims: one call per iteration on the whole batch; sequential: one per member
    assert k.driver_calls == (4 if method == "expand_dims" else 12)
    assert set(calls) == ({(3, 2)} if method == "expand_dims" else {(2,)})
    for b in range(3):
        wc, wys = cs[b].copy(), []
        for x in xs:
            y = np.sin(wc) + x
            wc, _ = y * 0.5, wys.append(y)
        np.testing.assert_allclose(c[b], wc, rtol=1e-14)
        np.testing.assert_allclose(ys[b], wys, rtol=1e-14)


# the custom_jvp / custom_vjp wrappers of callbacks that test_callbacks differentiates
from test_callbacks import _csin, _vsin  # noqa: E402


@pytest.mark.parametrize("fun", [_csin, _vsin], ids=["custom_jvp", "custom_vjp"])
def test_grad_through_a_compiled_scan_with_custom_rules_around_callbacks(fun):
    def loss(c, xs):
        c, ys = lax.scan(lambda c, x: (fun(c) * x, c.sum()), c, xs)
        return c.sum() + ys.sum()

    c0, xs = np.array([0.3, -1.2]), np.array([0.5, 1.5, -0.75])
    g = tracer.jit(tracer.grad(loss))
    text = _text(g, c0, xs)
    assert "a Python loop" not in text and "hc_call(IP[" in text, text
    eps, want = 1e-6, []
    for i in range(2):
        d = np.eye(2)[i] * eps
        want.append((float(loss(c0 + d, xs)) - float(loss(c0 - d, xs))) / (2 * eps))
    np.testing.assert_allclose(g(c0, xs), want, rtol=1e-6)
    np.testing.assert_allclose(g(c0, xs), tracer.grad(loss)(c0, xs), rtol=1e-13)


# ------------------------------ disk cache and compile workers -------------------------------

def test_a_callback_driver_is_cached_on_disk_and_calls_this_process_function(tmp_path):
    """The driver's source names no user function: a second process loads it from Numba's
    disk cache, and it calls that process's (different) callback."""
    code = textwrap.dedent("""
        import sys, warnings
        import numpy as np
        import tracer
        from tracer import lax
        from numba_backend import control_flow
        tracer.config.update("jit_compile", "sync")
        k = float(sys.argv[1])
        seen = []
        def body(i, c):
            tracer.io_callback(lambda v: seen.append(float(v)), None, c)
            return tracer.pure_callback(lambda v: np.asarray(v) * k, tracer.ShapeDtypeStruct((), np.float64), c)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            out = tracer.jit(lambda x: lax.fori_loop(0, 3, body, x))(1.0)
        (d,) = [d for d in control_flow._drivers.values() if "hc_call" in d.text]
        print(float(out), seen, sum(d.fn.stats.cache_hits.values()), control_flow.stats["host_loops"],
              [str(x.message) for x in w if "cache" in str(x.message)])
    """)
    env = dict(os.environ, PYTHONPATH=ROOT, TRACER_CACHE_DIR=str(tmp_path))
    env.pop("NUMBA_CACHE_DIR", None)
    runs = [subprocess.run([sys.executable, "-c", code, k], env=env, capture_output=True,
                           text=True, timeout=600) for k in ("2", "3")]
    for r in runs:
        assert r.returncode == 0, r.stderr
    first, second = (r.stdout.strip() for r in runs)
    assert first == "8.0 [1.0, 2.0, 4.0] 0 0 []", first
    assert second == "27.0 [1.0, 3.0, 9.0] 1 0 []", second     # a disk-cache load


@pytest.fixture
def async_tier(monkeypatch):
    from numba_backend import cache
    tracer.config.update("jit_compile", "async")
    monkeypatch.setattr(cache, "on_disk", lambda path, func: False)   # as if a cold cache
    try:
        yield
    finally:
        tracer.config.update("jit_compile", "sync")


def test_a_callback_driver_compiles_in_a_worker(async_tier):
    from numba_backend import cache, control_flow
    seen = []
    body = lambda i, s: (tracer.io_callback(lambda v: seen.append(float(v[0])), None, s),
                         s * 0.5 + jnp.cos(s) * 0.25)[1]
    f = tracer.jit(lambda s: lax.fori_loop(0, 7, body, s))
    s = np.array([0.5, 1.5])
    want = s.copy()
    for _ in range(7):
        want = want * 0.5 + np.cos(want) * 0.25
    np.testing.assert_allclose(np.asarray(f(s)), want, rtol=1e-14)   # the host loop
    (runner,) = [r for r in control_flow._runners.values()
                 if isinstance(r, control_flow.CompiledRunner) and r.callbacks
                 and r.driver.job is not None]
    assert runner._job() is not None                # not confined to this process
    deadline = time.monotonic() + 300
    while not runner.driver.compiled and time.monotonic() < deadline:
        np.testing.assert_allclose(np.asarray(f(s)), want, rtol=1e-14)
        time.sleep(0.2)
    assert runner.driver.compiled, "the driver never switched"
    assert runner.driver.job.result()["ok"]
    compiled = cache.stats["compiled"]
    k = _Counters()
    seen.clear()
    np.testing.assert_allclose(np.asarray(f(s)), want, rtol=1e-14)
    assert k.host_loops == 0 and k.driver_calls == 7 and len(seen) == 7
    assert cache.stats["compiled"] == compiled
