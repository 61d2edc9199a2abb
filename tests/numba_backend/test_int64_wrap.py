"""Signed 64-bit arithmetic wraps in compiled code as it does eagerly (two's complement,
as XLA and NumPy): Numba's int64 add/sub/mul/neg carry LLVM's no-signed-wrap flag, under
which LLVM folded ``x + 1 > x`` to True at the maximum, so the generated code does them
in uint64 (numba_backend/codegen.py). A loop that stops on the wrap must stop."""
from __future__ import annotations

import numpy as np
import pytest

import lax
import tracer
import tracer.numpy as tnp

MAX, MIN = np.iinfo(np.int64).max, np.iinfo(np.int64).min


@pytest.fixture(autouse=True)
def _sync():
    old = tracer.config.jit_compile
    tracer.config.update("jit_compile", "sync")
    try:
        yield
    finally:
        tracer.config.update("jit_compile", old)


PROGRAMS = {
    "x+1>x": lambda c: c + 1 > c,
    "max(x,x+1)": lambda c: tnp.maximum(c, c + 1),
    "sign(x+1)": lambda c: tnp.sign(c + 1),
    "abs(x-3)": lambda c: tnp.abs(c - 3),
    "(2x)//2==x": lambda c: (c * 2) // 2 == c,
    "min(x-1,x)": lambda c: tnp.minimum(c - 1, c),
    "abs(x)>=0": lambda c: tnp.abs(c) >= 0,
    "-x>0": lambda c: -c > 0,
    "x*x": lambda c: c * c,
    "where(x+1<x)": lambda c: tnp.where(c + 1 < c, 1, 0),
    "x*3+i32": lambda c: c * 3 + tnp.int32(-7),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_int64_arithmetic_wraps_as_eager(name):
    f = PROGRAMS[name]
    x = np.array([MAX, MIN, MAX - 1, MIN + 1, 0, -1, 3], dtype=np.int64)
    want = np.asarray(f(tnp.asarray(x)))
    got = np.asarray(tracer.jit(f)(x))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    with np.errstate(over="ignore"):
        # (NumPy's own wrapping arithmetic, for the expressions it spells the same way)
        if name == "x+1>x":
            np.testing.assert_array_equal(got, x + 1 > x)
        if name == "x*x":
            np.testing.assert_array_equal(got, x * x)


def test_while_loop_stopping_on_the_wrap_stops():
    def f(c):
        return lax.while_loop(lambda s: s[0] > 0, lambda s: (s[0] * 2, s[1] + 1), (c, 0))
    got = tracer.jit(f)(np.int64(1))
    assert int(got[0]) == MIN and int(got[1]) == 63
    want = f(tnp.int64(1))
    assert int(want[0]) == MIN and int(want[1]) == 63
