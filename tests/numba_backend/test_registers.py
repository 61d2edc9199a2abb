"""Small arrays of a compiled loop kept in scalar locals (numba_backend/registers.py):
the loops of a few trips unrolled, every buffer of a few elements whose indices are all
constants rewritten into one local per element, small carries too. The rewrite moves
values, never changes them: each program here equals its eager run bit for bit, and its
driver's source shows which arrays became locals."""
from __future__ import annotations

import re

import numpy as np
import pytest

import lax
import tracer
import tracer.numpy as tnp
from numba_backend import control_flow, registers
from tests.numba_backend.test_loop_inlining import _compiled, _same, _source, rk4


@pytest.fixture(autouse=True)
def _drivers(monkeypatch):
    monkeypatch.setattr(control_flow, "LOOP_RUNNER", False)


def _driver(src):
    return src[src.index("def driver("):]


def _check(f, *args):
    got, want = _compiled(f, *args), f(*args)
    for a, b in zip(tracer.tree_util.tree_leaves(got), tracer.tree_util.tree_leaves(want)):
        _same(a, b)
    return _driver(_source(f, *args))


def test_rk4_runs_in_locals():
    s0 = np.array([1.0, -2.0, 20.0])

    def f(s):
        return lax.fori_loop(0, 300, lambda i, s: rk4(s), s)
    src = _check(f, s0)
    # no buffer left in the loop: no arena, the (3,) carry as three locals, stored into
    # the result after the loop
    assert "arena_view" not in src
    for k in range(3):
        assert re.search(rf"\bc\d+_{k} = np\.float64\(a\d+\[{k}\]\)", src)
        assert re.search(rf"\bc\d+\[{k}\] = c\d+_{k}", src)
    assert "for q" not in src        # the (3,) kernels' loops unrolled
    # their extents and offsets are constants in the code: no slice of IP is left, and
    # the concatenations' choices on constant conditions are gone
    assert not re.search(r"\bip\d+ = IP\[", src) and " if True else " not in src
    assert not re.search(r"= (True|False)$", src, re.M)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8, np.int64])
def test_small_carries_of_other_dtypes(dtype):
    s0 = np.array([3, 1, 2, 7], dtype=dtype)

    def f(s):
        def body(i, s):
            t = tnp.stack([s[1] + s[0], s[2] * s[3], s[3] - s[1], s[0]])
            return tnp.where(t > s, t // 2 if s.dtype.kind in "iu" else t * 0.5, t + s)
        return lax.fori_loop(0, 9, body, s)
    src = _check(f, s0)
    assert "arena_view" not in src
    assert f"np.{np.dtype(dtype).name}(" in src


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.float16, np.float32])
def test_narrow_dtypes_wrap_and_round_as_stored(dtype):
    # Numba computes int8 + int8 in int64 and float16 in float32: a store into the
    # buffer wrapped or rounded the value, and its local must hold the same
    s0 = np.array([3, 100, 250 if np.dtype(dtype).kind == "u" else -7], dtype=dtype)
    a, b, c = (37, 11, 3) if np.dtype(dtype).kind in "iu" else (0.3, 0.7, 1.1)

    def f(s):
        def body(i, s):
            t = s * s.dtype.type(a) + s.dtype.type(b)
            return tnp.stack([t[2], t[0] - t[1], t[1]]) * s.dtype.type(c)
        return lax.fori_loop(0, 7, body, s)
    _check(f, s0)
    want = s0.copy()
    with np.errstate(all="ignore"):
        for _ in range(7):
            t = want * dtype(a) + dtype(b)
            want = np.stack([t[2], t[0] - t[1], t[1]]) * dtype(c)
    _same(_compiled(f, s0), want)


def test_bool_and_0d_values_in_a_while_loop():
    # the predicate (a 0-d bool) and a bool (3,) mask as locals
    def f(s):
        def cond(c):
            return tnp.sum(c[1]) < 40.0

        def body(c):
            k, s = c
            m = s > tnp.mean(s)
            return k + 1, tnp.where(m, s * 1.5, s + 1.0)
        return lax.while_loop(cond, body, (0, s))
    src = _check(f, np.array([0.5, -0.25, 1.0]))
    assert re.search(r"if not b\d+_s:", src)
    assert "np.bool_(" in src


def test_small_2d_carry_and_per_step_outputs():
    x0 = np.arange(6.0).reshape(2, 3) / 7

    def f(x):
        def body(c, t):
            c = c.T[::-1].T * 0.5 + t
            return c, c[:, 1] * 2.0
        return lax.scan(body, x, np.linspace(0.0, 1.0, 11))
    src = _check(f, x0)
    # the (11, 2) per-step output is written element by element from locals
    assert re.search(r"ys\d+\[i\d+, 1\] = ", src)


def test_reverse_scan_nested_while_and_cond():
    def f(s, xs):
        def body(c, x):
            def inner(d):
                return d[0] + 1, d[1] * 0.75 + x
            k, c = lax.while_loop(lambda d: d[0] < 3, inner, (0, c))
            c = lax.cond(c[0] > c[1], lambda c: c[::-1], lambda c: c - 0.125, c)
            return c, tnp.stack([c[0], c[1], c[0] * c[1]])
        return lax.scan(body, s, xs, reverse=True)
    _check(f, np.array([1.0, 2.0]), np.linspace(-1.0, 1.0, 9))


def test_grad_and_vmap_of_a_loop_in_locals():
    s0 = np.array([[1.0, 1.0, 1.0], [0.5, -1.0, 2.0]])

    def f(s):
        return lax.fori_loop(0, 25, lambda i, s: rk4(s), s)
    # (a (2, 3) body: unrolled only partly, within UNROLL_MAX_LINES; its values must
    # not change either way)
    _check(tracer.vmap(f), s0)

    def loss(s):
        return tnp.sum(f(s) ** 2)
    g = tracer.grad(loss)
    _check(g, s0[0])
    want = np.stack([np.asarray(g(s)) for s in s0])
    _same(_compiled(tracer.vmap(g), s0), want)


# -- the text passes on their own --

def test_unroll_repeats_small_loops_and_keeps_large_ones():
    lines = ["a = 1", "for i in range(3):", "    x[i] = i * 2  # i", "for j in range(100):",
             "    y[j] = j", "z = 2"]
    out = registers.unroll(lines)
    assert out[:4] == ["a = 1", "x[0] = 0 * 2  # i", "x[1] = 1 * 2  # i", "x[2] = 2 * 2  # i"]
    assert out[4:] == ["for j in range(100):", "    y[j] = j", "z = 2"]
    # nested: both unrolled while their copies stay small
    nested = registers.unroll(["for i in range(2):", "    for j in range(2):",
                               "        x[i, j] = i + j"])
    assert nested == ["x[0, 0] = 0 + 0", "x[0, 1] = 0 + 1", "x[1, 0] = 1 + 0",
                      "x[1, 1] = 1 + 1"]
    jumps = ["for i in range(2):", "    if x[i]:", "        break"]
    assert registers.unroll(jumps) == jumps
    big = ["for i in range(8):"] + [f"    t{k} = i" for k in range(30)]
    assert registers.unroll(big) == big       # 240 lines of copies: too many


def test_scalarize_keeps_arrays_whose_uses_need_them():
    lines = ["    b1[0] = x + 1", "    b1[1] = b1[0] * 2", "    y = b1[1]",
             "    b2[0] = 1", "    call(b2)",                # passed to a call
             "    b3[i] = 1",                               # a variable index
             "    b4[0] += 1",                              # not a plain store
             "    b5[3] = 0",                               # out of range
             "    b6[(1 + 1) * 2 - 3] = 5.0"]               # a constant expression
    cands = {f"b{k}": (2,) for k in range(1, 7)}
    out, done = registers.scalarize(lines, cands, [], {k: "np.float32" for k in cands})
    assert set(done) == {"b1", "b6"}
    assert out[:3] == ["    b1_0 = np.float32(x + 1)", "    b1_1 = np.float32(b1_0 * 2)",
                       "    y = b1_1"]
    assert out[3:8] == lines[3:8] and out[8] == "    b6_1 = np.float32(5.0)"


def test_scalarize_carries_in_pairs():
    lines = ["c1[0] = a[0]", "c3[0] = a[1]", "for it in range(n):",
             "    n2[0] = c1[0] + 1.0", "    n4[0] = f(c3)",
             "    c1, c3, n2, n4, = n2, n4, c1, c3,"]
    cands = {k: (1,) for k in ("c1", "n2", "c3", "n4")}
    out, done = registers.scalarize(lines, cands, [(5, ["c1", "c3"], ["n2", "n4"])],
                                    {k: "np.float64" for k in cands})
    # c3 goes to a call: it and its partner stay arrays, swapped as before
    assert set(done) == {"c1", "n2"}
    assert out[-1] == "    c1_0, c3, n4, = n2_0, n4, c3,"
    assert registers.write_back("c1", (1,)) == ["c1[0] = c1_0"]


def test_fold_stops_at_reassignments_and_blocks():
    lines = ["t = 2", "x[t] = 1  # t", "u = (t + 1) * 2", "w[u] = t", "u += 1", "w[u] = 0",
             "for i in range(n):", "    y[t] = 0", "    t = i", "z[t] = 3",
             "v = 4", "if c:", "    v = 5", "q[v] = 1"]
    assert registers.fold(lines) == [
        "t = 2", "x[2] = 1  # t", "u = 6", "w[6] = 2", "u += 1", "w[u] = 0",
        # the loop reassigns t: not a constant in it (a second iteration) nor after it
        "for i in range(n):", "    y[t] = 0", "    t = i", "z[t] = 3",
        "v = 4", "if c:", "    v = 5", "q[v] = 1"]


def test_fold_chooses_on_constant_conditions_and_drops_unread_names():
    lines = ["c = (0 < 1)", "d = (2 >= (-1))", "e = (3 == 4)",
             "s = (a if c else b)", "r = (a if e else b)", "o[0] = s + r",
             "a = 7", "o[1] = s",        # s stood for the old a: known no more
             "k = s", "m = k * 2"]
    assert registers.fold(lines) == [
        "s = a", "o[0] = a + b", "a = 7", "o[1] = s", "m = s * 2"]
