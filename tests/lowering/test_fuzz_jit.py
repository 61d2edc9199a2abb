"""A random-program fuzzer: chains of element-wise ops, index remaps and reductions, jitted
and compared with eager. Most programs run their generated kernels as plain Python
(``debug_kernels``: the fusion and index algebra are exercised without Numba compiles); a
few are compiled."""
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lax
import tracer
import tracer.numpy as tnp


def _unary(x, k):
    return [lax.neg, tnp.sin, lambda a: tnp.exp(a * 0.25), tnp.abs,
            lambda a: tnp.sqrt(tnp.abs(a)), lambda a: a * 2.0 + 1.0][k % 6](x)


def _binary(x, y, k):
    return [lax.add, lax.mul, lax.sub, lax.max, lax.min,
            lambda a, b: lax.select(lax.gt(a, b), a, b)][k % 6](x, y)


def _remap(x, k):
    nd = x.ndim
    if nd == 0:
        return x
    choice = k % 7
    if choice == 0 and nd >= 2:
        return lax.transpose(x, tuple(reversed(range(nd))))
    if choice == 1:
        return lax.rev(x, (k % nd,))
    if choice == 2 and x.shape[0] > 1:
        return x[1:]
    if choice == 3:
        return lax.pad(x, 0.5, [(1, 0, 1)] + [(0, 0, 0)] * (nd - 1))
    if choice == 4:
        return x.reshape(-1)
    if choice == 5 and nd == 1 and x.shape[0] % 2 == 0:
        return x.reshape(2, -1)
    if choice == 6:
        return lax.concatenate([x, x * 0.5], 0)
    return x[::-1]


def _reduce(x, k):
    if x.ndim == 0:
        return x
    axis = k % x.ndim
    return [lambda a: tnp.sum(a, axis=axis), lambda a: tnp.max(a, axis=axis)][k % 2](x)


def build(ops):
    def f(x, y):
        pool = [x, y]
        for kind, a, b in ops:
            u = pool[a % len(pool)]
            if kind == 0:
                pool.append(_unary(u, b))
            elif kind == 1:
                same = [v for v in pool if v.shape == u.shape]
                pool.append(_binary(u, same[b % len(same)], b // 7))
            elif kind == 2:
                pool.append(_remap(u, b))
            else:
                pool.append(_reduce(u, b))
        return pool[-1], pool[len(pool) // 2]
    return f


OPS = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 20), st.integers(0, 50)),
               min_size=1, max_size=8)
X = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
Y = np.random.default_rng(1).normal(size=(3, 4)).astype(np.float32)


def _check(ops):
    f = build(ops)
    eager = f(X, Y)
    got = tracer.jit(f)(X, Y)
    for e, g in zip(eager, got):
        assert e.shape == g.shape and e.dtype == g.dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=2e-6, atol=1e-6,
                                   err_msg=str(ops))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_random_programs_python_kernels(ops):
    tracer.config.update("debug_kernels", True)
    try:
        _check(ops)
    finally:
        tracer.config.update("debug_kernels", False)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow],
          derandomize=True)
@given(OPS)
def test_random_programs_compiled(ops):
    _check(ops)
