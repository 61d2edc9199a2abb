"""Polynomials, convolutions, numerical calculus, bit packing, index conversion, dtype
queries, printing and frompyfunc of tracer.numpy against NumPy."""
from __future__ import annotations

import numpy as np
import pytest

import tracer
import tracer.numpy as tnp
from tracer.errors import ConcretizationTypeError
from tracer.test_util import check_grads, check_jit, check_vmap

from np_util import assert_matches

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


@pytest.mark.parametrize("name", ["convolve", "correlate"])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_convolutions(name, mode, rng):
    for n, m in [(5, 3), (3, 5), (4, 4), (1, 3), (6, 1), (7, 2)]:
        a, v = rng.standard_normal(n), rng.standard_normal(m)
        for x, y in [(a, v), (a + 1j * rng.standard_normal(n), v - 2j * v),
                     (np.round(3 * a).astype(int), np.round(3 * v).astype(int))]:
            assert_matches(getattr(tnp, name)(x, y, mode), getattr(np, name)(x, y, mode),
                           err=f"{name} {mode} {n} {m} {x.dtype}")


def test_polynomial_arithmetic(rng):
    p = np.array([1.0, -3.0, 2.0, 5.0])
    q = np.array([2.0, 1.0])
    x = np.linspace(-2, 2, 7)
    assert_matches(tnp.polyval(p, x), np.polyval(p, x))
    assert_matches(tnp.polyval(p, 2.5), np.polyval(p, 2.5))
    assert_matches(tnp.polyadd(p, q), np.polyadd(p, q))
    assert_matches(tnp.polysub(q, p), np.polysub(q, p))
    assert_matches(tnp.polymul(p, q), np.polymul(p, q))
    assert_matches(tnp.polymul(np.array([0.0, 1.0, 2.0]), q, trim_leading_zeros=True),
                   np.polymul(np.array([0.0, 1.0, 2.0]), q))
    for d in (q, np.array([2.0, 1.0, 1.0])):
        qt, rt = tnp.polydiv(p, d, trim_leading_zeros=True)
        qn, rn = np.polydiv(p, d)
        assert_matches(qt, qn)
        assert_matches(rt, rn)
    assert_matches(tnp.polyder(p), np.polyder(p))
    assert_matches(tnp.polyder(p, 3), np.polyder(p, 3))
    assert_matches(tnp.polyder(np.array([5.0])), np.polyder(np.array([5.0])))
    assert_matches(tnp.polyint(p), np.polyint(p))
    assert_matches(tnp.polyint(np.array([1, 2, 3]), 2, k=[1, 2]),
                   np.polyint(np.array([1, 2, 3]), 2, k=[1, 2]))
    assert_matches(tnp.poly(np.array([1.0, 2.0, -1.0])), np.poly([1.0, 2.0, -1.0]))
    assert_matches(tnp.poly(np.array([1j, -1j])), np.poly([1j, -1j]))
    m = np.array([[1.0, 2.0], [3.0, 4.0]])
    assert_matches(tnp.poly(m), np.poly(m))


def test_roots_and_polyfit(rng):
    p = np.array([0.0, 1.0, -3.0, 2.0, 0.0])
    assert_matches(np.sort_complex(np.asarray(tnp.roots(p))), np.sort_complex(np.roots(p)))
    p2 = np.array([1.0, 0.0, 1.0])
    assert_matches(np.sort_complex(np.asarray(tnp.roots(p2))), np.sort_complex(np.roots(p2)))
    r = tracer.jit(lambda p: tnp.roots(p, strip_zeros=False))(np.array([1.0, -3.0, 2.0]))
    assert_matches(np.sort_complex(np.asarray(r)), np.array([1.0 + 0j, 2.0 + 0j]))
    with pytest.raises(ConcretizationTypeError, match="strip_zeros"):
        tracer.jit(lambda p: tnp.roots(p))(p)
    x = np.linspace(0, 1, 20)
    y = 3 * x ** 2 - x + 0.5 + 0.01 * rng.standard_normal(20)
    assert_matches(tnp.polyfit(x, y, 2), np.polyfit(x, y, 2), rtol=1e-8)
    c, cov = tnp.polyfit(x, y, 2, cov=True)
    cn, covn = np.polyfit(x, y, 2, cov=True)
    assert_matches(cov, covn, rtol=1e-8)
    y2 = np.stack([y, 2 * y], 1)
    w = np.linspace(1, 2, 20)
    assert_matches(tnp.polyfit(x, y2, 3, w=w), np.polyfit(x, y2, 3, w=w), rtol=1e-8)
    full_t = tnp.polyfit(x, y, 1, full=True)
    full_n = np.polyfit(x, y, 1, full=True)
    assert_matches(full_t[0], full_n[0], rtol=1e-8)
    assert_matches(full_t[1], full_n[1], rtol=1e-8)


def test_polynomial_grads_vmap_jit(rng):
    p = rng.standard_normal(4)
    x = rng.standard_normal(3)
    check_grads(tnp.polyval, (p, x), order=2)
    check_grads(lambda a, b: tnp.convolve(a, b, "same"), (p, x), order=1)
    check_grads(lambda a, b: tnp.correlate(a, b, "full"), (p, x), order=1)
    check_grads(lambda a: tnp.polydiv(a, np.array([1.0, 2.0]))[0], (p,), order=1)
    check_vmap(tnp.polyval, (rng.standard_normal((2, 4)), rng.standard_normal((2, 3))))
    check_vmap(lambda a: tnp.convolve(a, np.array([1.0, -1.0])), (rng.standard_normal((3, 5)),))
    check_jit(lambda a, b: (tnp.polymul(a, b), tnp.polyder(a)), (p, x), rtol=1e-14,
              atol=1e-14)


def test_trapezoid_gradient_interp_unwrap(rng):
    y = rng.standard_normal((3, 6))
    x = np.sort(rng.standard_normal(6))
    assert_matches(tnp.trapezoid(y), np.trapezoid(y))
    assert_matches(tnp.trapezoid(y, x), np.trapezoid(y, x))
    assert_matches(tnp.trapezoid(y, dx=0.5, axis=0), np.trapezoid(y, dx=0.5, axis=0))
    for eo in (1, 2):
        for got, want in zip(tnp.gradient(y, edge_order=eo), np.gradient(y, edge_order=eo)):
            assert_matches(got, want)
        for got, want in zip(tnp.gradient(y, 2.0, x, edge_order=eo),
                             np.gradient(y, 2.0, x, edge_order=eo)):
            assert_matches(got, want)
        assert_matches(tnp.gradient(y, x, axis=1, edge_order=eo),
                       np.gradient(y, x, axis=1, edge_order=eo))
    xp = np.array([0.0, 1.0, 2.0, 4.0])
    fp = np.array([1.0, 3.0, 2.0, 0.0])
    xs = np.array([-1, 0, 0.5, 1.5, 3, 4, 5.0])
    assert_matches(tnp.interp(xs, xp, fp), np.interp(xs, xp, fp))
    assert_matches(tnp.interp(xs, xp, fp, left=-1.0, right=9.0),
                   np.interp(xs, xp, fp, left=-1.0, right=9.0))
    assert_matches(tnp.interp(xs, xp, fp, period=3.0), np.interp(xs, xp, fp, period=3.0))
    assert_matches(tnp.interp(xs, xp, fp + 1j), np.interp(xs, xp, fp + 1j))
    ph = np.cumsum(rng.uniform(-3, 3, 20))
    assert_matches(tnp.unwrap(ph), np.unwrap(ph))
    assert_matches(tnp.unwrap(ph, period=5.0), np.unwrap(ph, period=5.0))
    assert_matches(tnp.unwrap(ph, discont=4.0), np.unwrap(ph, discont=4.0))
    check_grads(lambda f: tnp.interp(xs, xp, f), (fp,), order=1)
    check_grads(lambda y: tnp.gradient(y, x, axis=1), (y,), order=1)
    check_vmap(lambda v: tnp.interp(v, xp, fp), (rng.uniform(-1, 5, (3, 4)),))


def test_packbits_unpackbits(rng):
    b = rng.integers(0, 2, (3, 11))
    for axis in (None, 0, 1):
        for order in ("big", "little"):
            assert_matches(tnp.packbits(b, axis, order), np.packbits(b, axis, bitorder=order))
    pk = np.packbits(b, 1)
    assert_matches(tnp.unpackbits(pk, 1), np.unpackbits(pk, 1))
    assert_matches(tnp.unpackbits(pk, 1, count=11, bitorder="little"),
                   np.unpackbits(pk, 1, count=11, bitorder="little"))
    assert_matches(tnp.unpackbits(pk, None, count=-3), np.unpackbits(pk, None, count=-3))
    with pytest.raises(TypeError, match="unsigned byte"):
        tnp.unpackbits(b)


def test_index_conversions():
    mi = (np.array([3, 6, 6]), np.array([4, 5, 1]))
    assert_matches(tnp.ravel_multi_index(mi, (7, 6)), np.ravel_multi_index(mi, (7, 6)))
    assert_matches(tnp.ravel_multi_index(mi, (7, 6), order="F"),
                   np.ravel_multi_index(mi, (7, 6), order="F"))
    assert_matches(tnp.ravel_multi_index(mi, (4, 6), mode="clip"),
                   np.ravel_multi_index(mi, (4, 6), mode="clip"))
    assert_matches(tnp.ravel_multi_index(mi, (4, 4), mode="wrap"),
                   np.ravel_multi_index(mi, (4, 4), mode="wrap"))
    with pytest.raises(ValueError, match="invalid entry"):
        tnp.ravel_multi_index(mi, (4, 4))
    for got, want in zip(tnp.unravel_index(np.array([22, 41, 37, -1]), (7, 6)),
                         np.unravel_index([22, 41, 37, 41], (7, 6))):
        assert_matches(got, want)
    with pytest.raises(ValueError, match="out of bounds"):
        tnp.unravel_index(np.array([42]), (7, 6))
    got = tracer.jit(lambda i: tnp.unravel_index(i, (2, 3)))(np.array([5, 7]))
    np.testing.assert_array_equal(np.asarray(got[0]), [1, 1])  # clamped, as in JAX


def test_dtype_queries_and_printing():
    assert tnp.isdtype(np.float32, "real floating")
    assert tnp.isdtype(np.uint8, ("bool", "unsigned integer"))
    assert not tnp.isdtype(np.int8, "unsigned integer")
    assert tnp.isdtype(np.complex64, np.complex64)
    assert tnp.isdtype(np.int16, "numeric") and not tnp.isdtype(np.bool_, "numeric")
    with pytest.raises(ValueError, match="kind"):
        tnp.isdtype(np.float32, "floats")
    assert tnp.iterable(tnp.ones(2)) and not tnp.iterable(tnp.ones(()))
    assert tnp.array_repr(tnp.arange(3)) == np.array_repr(np.arange(3))
    assert tnp.array_str(tnp.arange(3.0)) == np.array_str(np.arange(3.0))
    with tnp.printoptions(precision=2):
        assert tnp.get_printoptions()["precision"] == 2
        assert str(tnp.array([1.23456])) == "[1.23]"


def test_frompyfunc():
    u = tnp.frompyfunc(lambda a, b: a * b + 1, 2, 1)
    x = np.arange(3.0)
    assert_matches(u(x, 2.0), x * 2 + 1)
    assert_matches(u.outer(np.arange(2.0), x), np.multiply.outer(np.arange(2.0), x) + 1)
    assert_matches(u.reduce(np.arange(1.0, 4.0)), np.array(10.0))
    assert_matches(u.accumulate(np.arange(1.0, 4.0)), np.array([1.0, 3.0, 10.0]))
    two = tnp.frompyfunc(lambda a: (a + 1, a * 2), 1, 2)
    p, q = two(x)
    assert_matches(p, x + 1)
    assert_matches(q, x * 2)
    check_grads(lambda x: u(x, x), (x + 0.5,), order=1)
