"""Loop bodies pasted into their compiled drivers (numba_backend/control_flow.py,
``_inline_plan``): a body kernel of a few elements runs as straight-line code inside the
driver's loop, a larger one is called. Both give the eager answer bit for bit (the same
IEEE operations in the same order), for carries of shape () and (3,), zero iterations,
and under vmap and grad."""
from __future__ import annotations

import numpy as np
import pytest

import lax
import tracer
import tracer.numpy as tnp
from numba_backend import control_flow

DT = 0.001


def lorenz(s):
    x, y, z = s[0], s[1], s[2]
    return tnp.stack([10.0 * (y - x), x * (28.0 - z) - y, x * y - (8.0 / 3.0) * z])


def rk4(s):
    k1 = lorenz(s)
    k2 = lorenz(s + DT / 2 * k1)
    k3 = lorenz(s + DT / 2 * k2)
    k4 = lorenz(s + DT * k3)
    return s + DT / 6 * (k1 + 2 * k2 + 2 * k3 + k4)


@pytest.fixture(autouse=True)
def _drivers(monkeypatch):
    # (pasting is what generated drivers do: every scan here gets one, including those
    # the loop runner would take)
    monkeypatch.setattr(control_flow, "LOOP_RUNNER", False)


def _source(f, *args):
    text = tracer.jit(f).lower(*args).as_text()
    return text[text.index("# generated source of"):]


def _compiled(f, *args):
    """jit(f)(*args), checking it ran through a compiled driver (no Python loop)."""
    before = control_flow.stats["host_loops"]
    out = tracer.jit(f)(*args)
    assert control_flow.stats["host_loops"] == before
    return out


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a.reshape(-1).view(np.uint8), b.reshape(-1).view(np.uint8))


@pytest.mark.parametrize("n", [0, 1, 7, 200])
def test_inlined_rk4_equals_eager_bit_for_bit(n):
    s0 = np.array([1.0, 1.0, 1.0])

    def f(s):
        return lax.fori_loop(0, n, lambda i, s: rk4(s), s)
    src = _source(f, s0)
    assert "kernel inlined" in src and "K_" not in src
    _same(_compiled(f, s0), f(s0))


def test_called_kernels_equal_eager_bit_for_bit():
    # 200 elements per step: above the inlining limit, the driver calls its kernels
    s0 = np.linspace(-1.0, 1.0, 200)
    assert 200 > control_flow.INLINE_MAX_ELEMENTS

    def f(s):
        return lax.fori_loop(0, 50, lambda i, s: s * 0.999 + tnp.sin(s) * 1e-3 - s * s * 1e-4,
                             s)
    src = _source(f, s0)
    # (only the loop counter's kernel is inlined)
    assert "K_" in src and src.count("kernel inlined") == 1
    # (sin: compiled within an ulp of NumPy's; the rest bit for bit)
    np.testing.assert_allclose(np.asarray(_compiled(f, s0)), np.asarray(f(s0)), rtol=1e-14)

    def g(s):
        return lax.fori_loop(0, 50, lambda i, s: s * 0.999 + s * s * 1e-4 - 0.5, s)
    assert "K_" in _source(g, s0)
    _same(_compiled(g, s0), g(s0))


@pytest.mark.parametrize("n", [0, 3, 50])
def test_scalar_carries(n):
    # carries of shape (): a float and the loop's int counter, a while loop and a scan
    def f(x):
        return lax.fori_loop(0, n, lambda i, x: x * 1.0001 + i.astype(x.dtype) * 1e-3, x)

    def w(x):
        return lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 0.5 + 1.0),
                              (0, x))

    def s(x):
        return lax.scan(lambda c, t: (c + t * c, c * 2.0), x, np.arange(n, dtype=np.float64))
    x = np.float64(1.25)
    for fn in (f, w, s):
        assert "kernel inlined" in _source(fn, x)
        got, want = _compiled(fn, x), fn(x)
        for a, b in zip(tracer.tree_util.tree_leaves(got), tracer.tree_util.tree_leaves(want)):
            _same(a, b)


def test_vector_carry_while_loop_with_zero_iterations():
    s0 = np.array([1.0, 2.0, 3.0])

    def f(s, m):
        return lax.while_loop(lambda c: c[0] < m, lambda c: (c[0] + 1, rk4(c[1])), (0, s))
    for m in (0, 1, 5):
        got, want = _compiled(f, s0, m), f(s0, m)
        _same(got[0], want[0])
        _same(got[1], want[1])
    assert "kernel inlined" in _source(f, s0, 3)


def test_mixed_inlined_and_called():
    # one body with a small kernel (a (3,) carry) and a large one (a (300,) carry)
    a0, b0 = np.array([0.5, 1.0, 1.5]), np.linspace(0.0, 1.0, 300)

    def f(a, b):
        def body(i, c):
            a, b = c
            return a * 0.9 + 0.1, b * 0.99 + a[0] * 1e-3
        return lax.fori_loop(0, 20, body, (a, b))
    src = _source(f, a0, b0)
    assert "kernel inlined" in src and "K_" in src
    got, want = _compiled(f, a0, b0), f(a0, b0)
    _same(got[0], want[0])
    _same(got[1], want[1])


def test_vmap_through_inlined_loop():
    s0 = np.array([[1.0, 1.0, 1.0], [0.5, -1.0, 2.0]])

    def f(s):
        return lax.fori_loop(0, 30, lambda i, s: rk4(s), s)
    g = tracer.vmap(f)
    assert "kernel inlined" in _source(g, s0)
    _same(_compiled(g, s0), g(s0))
    want = np.stack([np.asarray(f(s)) for s in s0])
    _same(_compiled(g, s0), want)


def test_grad_through_inlined_loop():
    s0 = np.array([1.0, 1.0, 1.0])

    def loss(s):
        return tnp.sum(lax.fori_loop(0, 20, lambda i, s: rk4(s), s) ** 2)
    g = tracer.grad(loss)
    assert "kernel inlined" in _source(g, s0)
    got, want = _compiled(g, s0), g(s0)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-13, atol=0)
    # against a central finite difference
    eps = 1e-6
    fd = [(float(loss(s0 + eps * e)) - float(loss(s0 - eps * e))) / (2 * eps)
          for e in np.eye(3)]
    np.testing.assert_allclose(np.asarray(got), fd, rtol=1e-5)


def test_new_shape_of_inlined_body_gets_its_own_driver():
    # the inlined kernels' extents are constants of the driver's source: another shape
    # gets another driver (content-keyed), with the right answer
    def f(s):
        return lax.fori_loop(0, 10, lambda i, s: s * 0.5 + 1.0, s)
    a, b = np.ones(3), np.ones(5)
    ta, tb = _source(f, a), _source(f, b)
    assert ta != tb and _source(f, a) == ta
    _same(_compiled(f, a), f(a))
    _same(_compiled(f, b), f(b))
