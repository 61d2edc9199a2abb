"""tracer.numpy as an Array API namespace: ``x.__array_namespace__()`` is tracer.numpy, and
code written against the standard (its names and keyword signatures) runs on it and on
NumPy (itself an Array API namespace) with the same results, also under grad and jit."""
from __future__ import annotations


import numpy as np
import pytest

import tracer
import tracer.numpy as tnp
from tracer.test_util import check_jit

from np_util import assert_matches


def _standard_program(x, data_dependent=True):
    """A computation that only uses the Array API through the namespace of ``x``."""
    xp = x.__array_namespace__()
    y = xp.permute_dims(xp.reshape(x, (2, 3, 2)), (2, 0, 1))
    z = xp.concat([y, xp.flip(y, axis=0)], axis=0)
    m = xp.matrix_transpose(z) @ z
    s = xp.sum(m, axis=(1, 2), keepdims=False)
    v = xp.vecdot(z, xp.ones_like(z), axis=-1)
    c = xp.cumulative_sum(xp.astype(s, xp.float64), axis=0, include_initial=True)
    st = xp.std(z, axis=1, correction=1)
    order = xp.argsort(xp.reshape(v, (-1,)), stable=True)
    top = xp.take(xp.reshape(v, (-1,)), order[:3], axis=0)
    # unique_values has a data-dependent size: eager only.
    u = xp.unique_values(xp.round(x)) if data_dependent else x
    w = xp.where(xp.isdtype(x.dtype, "real floating") and x > 0, xp.sqrt(xp.abs(x)),
                 xp.zeros_like(x))
    e = xp.expand_dims(xp.clip(x, min=-1.0, max=1.0), axis=0)
    return (s, v, c, st, top, u, w, e, xp.unstack(z, axis=0)[0],
            xp.moveaxis(z, 0, -1), xp.roll(x, 1, axis=0), xp.stack([x, x], axis=1),
            xp.tensordot(z, z, axes=([1, 2], [1, 2])), xp.count_nonzero(x > 0, axis=0),
            xp.searchsorted(xp.sort(x), xp.asarray([0.0, 0.5])))


def test_same_program_on_numpy_and_tracer(rng):
    x = rng.standard_normal(12)
    xt = tnp.asarray(x)
    assert xt.__array_namespace__() is tnp
    got = _standard_program(xt)
    want = _standard_program(x)
    for g, w in zip(got, want):
        assert_matches(g, w, rtol=1e-12, atol=1e-12)


def test_namespace_grad_and_jit(rng):
    x = rng.standard_normal(12)

    def loss(x):
        xp = x.__array_namespace__()
        return xp.sum(xp.square(xp.permute_dims(xp.reshape(x, (3, 4)), (1, 0))))

    g = tracer.grad(loss)(x)
    assert_matches(g, 2 * x)
    check_jit(lambda x: _standard_program(x, False), (x,), rtol=1e-13, atol=1e-13)


def test_namespace_info_and_constants():
    info = tnp.__array_namespace_info__()
    assert info.default_device() == "cpu" and info.devices() == ["cpu"]
    assert info.default_dtypes()["real floating"] == np.float64
    assert set(info.dtypes(kind="real floating")) == {"float32", "float64"}
    assert "bool" in info.dtypes()
    assert tnp.__array_api_version__ == "2023.12"
    for name in ("e", "pi", "inf", "nan", "newaxis"):
        assert hasattr(tnp, name)
    assert tnp.zeros((2,), dtype=tnp.float32, device="cpu").dtype == np.float32
    assert tnp.asarray([1, 2], device="cpu").shape == (2,)
    assert tnp.arange(3, device="cpu").shape == (3,)


def test_32_bit_defaults(x32):
    info = tnp.__array_namespace_info__()
    assert info.default_dtypes()["integral"] == np.int32
    assert "float64" not in info.dtypes()


# ------------------------------------- special values -------------------------------------

def _assert_same_floats(got, want):
    """Equal values with NaNs equal, and the same sign on every zero (both parts of
    complex numbers)."""
    g, w = np.asarray(got), np.asarray(want)
    assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
    parts = [(g.real, w.real), (g.imag, w.imag)] if np.iscomplexobj(w) else [(g, w)]
    for gp, wp in parts:
        np.testing.assert_array_equal(gp, wp)
        num = ~np.isnan(wp)  # a NaN's sign bit means nothing
        np.testing.assert_array_equal(np.signbit(gp[num]), np.signbit(wp[num]))


INF, NAN = np.inf, np.nan
# (x1, x2, x1 // x2, x1 % x2). Where NumPy gives the standard's values they are NumPy's;
# the rows marked "standard" are the Array API's special cases where NumPy differs.
_DIV_CASES = [
    (7.5, 2.0, 3.0, 1.5), (-7.5, 2.0, -4.0, 0.5), (7.5, -2.0, -4.0, -0.5),
    (-4.0, 2.0, -2.0, 0.0), (4.0, -2.0, -2.0, -0.0), (-4.0, -2.0, 2.0, -0.0),
    (0.0, 3.0, 0.0, 0.0), (-0.0, 3.0, -0.0, 0.0), (0.0, -3.0, -0.0, -0.0),
    (-0.0, -3.0, 0.0, -0.0), (5.0, 0.0, INF, NAN), (-5.0, 0.0, -INF, NAN),
    (5.0, -0.0, -INF, NAN), (0.0, 0.0, NAN, NAN), (NAN, 1.0, NAN, NAN),
    (1.0, INF, 0.0, 1.0), (-1.0, -INF, 0.0, -1.0),
    (-1.0, INF, -0.0, INF),      # standard (NumPy: -1 // inf == -1)
    (1.0, -INF, -0.0, -INF),     # standard (NumPy: -1)
    (0.0, -INF, -0.0, -0.0), (-0.0, INF, -0.0, 0.0),
    (INF, 2.0, INF, NAN),        # standard (NumPy: NaN)
    (INF, -2.0, -INF, NAN),      # standard
    (-INF, 2.0, -INF, NAN),      # standard
    (-INF, -2.0, INF, NAN),      # standard
    (INF, INF, NAN, NAN), (INF, 0.0, INF, NAN), (NAN, INF, NAN, NAN),
    (1e308, 1e-10, INF, np.remainder(1e308, 1e-10)),
]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_floor_divide_remainder_special_values(dt):
    with np.errstate(over="ignore"):
        x1, x2, q, r = (np.array(c, dt) for c in zip(*_DIV_CASES))
    if dt == np.float32:  # 1e308 is inf in float32
        q[-1], r[-1] = INF, NAN
    for f, want in ((tnp.floor_divide, q), (tnp.remainder, r),
                    (lambda a, b: tnp.divmod(a, b)[0], q),
                    (lambda a, b: tnp.divmod(a, b)[1], r),
                    (lambda a, b: tnp.asarray(a) // b, q), (lambda a, b: tnp.asarray(a) % b, r)):
        _assert_same_floats(f(x1, x2), want)
        _assert_same_floats(tracer.jit(f)(x1, x2), want)
        _assert_same_floats(tracer.vmap(f)(x1, x2), want)
    # The finite, nonzero cases where NumPy and the standard agree are NumPy's exactly.
    agree = np.isfinite(x1) & np.isfinite(x2) & (x2 != 0)
    with np.errstate(all="ignore"):
        _assert_same_floats(np.asarray(tnp.floor_divide(x1, x2))[agree],
                            np.floor_divide(x1, x2)[agree])
        _assert_same_floats(np.asarray(tnp.remainder(x1, x2))[agree],
                            np.remainder(x1, x2)[agree])


def test_floor_divide_remainder_random_and_grad(rng):
    x = rng.uniform(-6, 6, 64)
    y = rng.uniform(0.2, 3, 64) * rng.choice([-1.0, 1.0], 64)
    gy = tracer.grad(lambda b: tnp.sum(tnp.remainder(x, b)))(y)
    np.testing.assert_allclose(gy, -np.floor_divide(x, y))
    # Exact multiples (zero remainders, signed by the divisor) and rounding ties.
    x = np.concatenate([[-4.0, 4.0, -0.0, 6.0, 3.0, -3.0, 1.0, -1.0], x])
    y = np.concatenate([[2.0, -2.0, 2.0, -3.0, 1.5, 1.5, 0.1, 0.1], y])
    for dt in (np.float32, np.float64):
        a, b = x.astype(dt), y.astype(dt)
        _assert_same_floats(tnp.floor_divide(a, b), np.floor_divide(a, b))
        _assert_same_floats(tnp.remainder(a, b), np.remainder(a, b))
    # d(x % y)/dx is 1 everywhere, also where the remainder is an exactly signed zero
    # (x a multiple of y), and x // y is piecewise constant (as in JAX).
    g = tracer.grad(lambda a: tnp.sum(tnp.remainder(a, y)))(x)
    np.testing.assert_array_equal(g, np.ones_like(x))
    gq = tracer.grad(lambda a: tnp.sum(tnp.floor_divide(a, y)))(x)
    np.testing.assert_array_equal(gq, np.zeros_like(x))
    vg = tracer.vmap(tracer.grad(lambda a, b: tnp.remainder(a, b)))(x, y)
    np.testing.assert_array_equal(vg, np.ones_like(x))


def test_sign_of_zero_is_positive():
    x = np.array([0.0, -0.0, -2.0, 3.0, NAN, -INF])
    _assert_same_floats(tnp.sign(x), np.sign(x))
    z = np.array([0j, complex(-0.0, 0.0), complex(0.0, -0.0), complex(-0.0, -0.0)])
    _assert_same_floats(tnp.sign(z), np.zeros(4, complex))
    _assert_same_floats(tracer.jit(tnp.sign)(z), np.zeros(4, complex))
    np.testing.assert_allclose(tnp.sign(np.array([3 - 4j, -1e-300j])), [0.6 - 0.8j, -1j],
                               rtol=1e-15)
    _assert_same_floats(tracer.jit(tnp.sign)(x), np.sign(x))
    np.testing.assert_array_equal(tnp.sign(np.array([-3, 0, 2], np.int8)), [-1, 0, 1])


def test_expm1_complex():
    # The C99 / Array API special values (NumPy's expm1 gives inf + nanj for the first).
    z = np.array([complex(INF, 0.0), complex(INF, -0.0), complex(-INF, INF),
                  complex(-INF, NAN), complex(NAN, 0.0), complex(0.0, 0.0),
                  complex(-0.0, -0.0), complex(1.0, 0.0), complex(-1.0, -0.0)])
    want = np.array([complex(INF, 0.0), complex(INF, -0.0), complex(-1.0, 0.0),
                     complex(-1.0, 0.0), complex(NAN, 0.0), complex(0.0, 0.0),
                     complex(-0.0, -0.0), complex(np.expm1(1.0), 0.0),
                     complex(np.expm1(-1.0), -0.0)])
    for f in (tnp.expm1, tracer.jit(tnp.expm1)):
        got = np.asarray(f(z))
        np.testing.assert_array_equal(got.real, want.real)
        np.testing.assert_array_equal(np.abs(got.imag), np.abs(want.imag))  # ± 0 allowed
        np.testing.assert_array_equal(np.signbit(got.imag[[0, 1, 5, 6, 7, 8]]),
                                      np.signbit(want.imag[[0, 1, 5, 6, 7, 8]]))
        # inf + inf j and inf + nan j: real part ±inf, imaginary NaN.
        w = np.asarray(f(np.array([complex(INF, INF), complex(INF, NAN)])))
        assert np.isinf(w.real).all() and np.isnan(w.imag).all()
    # Accurate near 0, where exp(z) - 1 loses every digit: the series z + z^2/2 + z^3/6.
    for c in (1e-10 + 1e-10j, -3e-9 + 2e-12j, 1e-5 - 1e-5j):
        series = c + c * c / 2 + c ** 3 / 6 + c ** 4 / 24
        got = complex(tnp.expm1(np.complex128(c)))
        assert abs(got.real - series.real) <= 1e-15 * abs(series.real)
        assert abs(got.imag - series.imag) <= 1e-15 * abs(series.imag)
    zs = np.array([1 + 2j, -0.5 + 3j, 2 - 1j], np.complex64)
    np.testing.assert_allclose(tnp.expm1(zs), np.exp(zs.astype(complex)) - 1, rtol=1e-6)
    assert tnp.expm1(zs).dtype == np.complex64
    check_jit(tnp.expm1, (zs,), rtol=1e-6)
    # d/dt Re expm1(t + 0.5j) = exp(t) cos(0.5).
    g = tracer.grad(lambda t: tnp.real(tnp.expm1(t + 0.5j)))(0.3)
    np.testing.assert_allclose(g, np.exp(0.3) * np.cos(0.5), rtol=1e-13)
    vm = tracer.vmap(tnp.expm1)(zs)
    np.testing.assert_allclose(vm, tnp.expm1(zs), rtol=1e-6)
