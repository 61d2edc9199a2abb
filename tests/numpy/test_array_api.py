"""tracer.numpy as an Array API namespace: ``x.__array_namespace__()`` is tracer.numpy, and
code written against the standard (its names and keyword signatures) runs on it and on
NumPy (itself an Array API namespace) with the same results, also under grad and jit."""
from __future__ import annotations

import inspect

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
    assert tnp.__array_api_version__ == "2024.12"
    assert info.capabilities()["max dimensions"] == 64
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
                  complex(-0.0, -0.0), complex(1.0, 0.0), complex(-1.0, -0.0),
                  complex(-0.0, 0.0)])
    # A zero real part is +0 (Re(exp(z)) - 1), even for -0 + 0j, unlike real expm1(-0).
    want = np.array([complex(INF, 0.0), complex(INF, -0.0), complex(-1.0, 0.0),
                     complex(-1.0, 0.0), complex(NAN, 0.0), complex(0.0, 0.0),
                     complex(0.0, -0.0), complex(np.expm1(1.0), 0.0),
                     complex(np.expm1(-1.0), -0.0), complex(0.0, 0.0)])
    for f in (tnp.expm1, tracer.jit(tnp.expm1)):
        got = np.asarray(f(z))
        # (real expm1 at +-1 is libm's or NumPy's own SIMD routine, an ulp apart on CPUs
        # with AVX-512: within 2 ulp there, exact everywhere else)
        special = [0, 1, 2, 3, 4, 5, 6, 9]
        np.testing.assert_array_equal(got.real[special], want.real[special])
        np.testing.assert_allclose(got.real[[7, 8]], want.real[[7, 8]], rtol=4.5e-16, atol=0)
        np.testing.assert_array_equal(np.abs(got.imag), np.abs(want.imag))  # ± 0 allowed
        exact = [0, 1, 5, 6, 7, 8, 9]
        np.testing.assert_array_equal(np.signbit(got.imag[exact]),
                                      np.signbit(want.imag[exact]))
        np.testing.assert_array_equal(np.signbit(got.real[exact]),
                                      np.signbit(want.real[exact]))
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


# ----------------------------------- shapes and dtypes ------------------------------------

def test_expand_dims_every_axis():
    x = np.arange(6.0).reshape(2, 3)
    for axis in range(-3, 3):
        assert_matches(tnp.expand_dims(x, axis), np.expand_dims(x, axis))
    assert_matches(tnp.expand_dims(x, (0, -1)), np.expand_dims(x, (0, -1)))
    assert_matches(tnp.expand_dims(x, (1, 3)), np.expand_dims(x, (1, 3)))
    assert_matches(tnp.expand_dims(np.float64(2.0), -1), np.expand_dims(np.float64(2.0), -1))
    for axis in (3, -4, 7, (0, 4)):
        # The Array API asks for an IndexError; NumPy's AxisError is one (and a
        # ValueError).
        with pytest.raises(IndexError, match="expand_dims"):
            tnp.expand_dims(x, axis)
        with pytest.raises(np.exceptions.AxisError):
            np.expand_dims(x, axis)
    with pytest.raises(ValueError, match="repeated"):
        tnp.expand_dims(x, (0, -4))
    check_jit(lambda a: tnp.expand_dims(a, -3), (x,))
    out = tracer.vmap(lambda a: tnp.expand_dims(a, 1))(x)
    assert out.shape == (2, 3, 1)


@pytest.mark.parametrize("vecdot", [tnp.vecdot, tnp.linalg.vecdot])
def test_vecdot_dtype_axis_and_shapes(vecdot, rng):
    for dt in (np.uint8, np.int8, np.int16, np.float32, np.complex64):
        a = rng.integers(0, 4, (2, 3)).astype(dt)
        b = rng.integers(0, 4, (3,)).astype(dt)
        if np.dtype(dt).kind == "c":
            a = a + 1j * a[::-1]
        assert_matches(vecdot(a, b), np.vecdot(a, b))          # the dtype is kept
    x = rng.standard_normal((4, 1, 3)) + 1j * rng.standard_normal((4, 1, 3))
    y = rng.standard_normal((2, 3))
    assert_matches(vecdot(x, y), np.vecdot(x, y), rtol=1e-13)
    x2, y2 = rng.standard_normal((2, 3, 4)), rng.standard_normal((3, 4))
    assert_matches(vecdot(x2, y2, axis=-2), np.vecdot(x2, y2, axis=-2), rtol=1e-13)
    assert_matches(vecdot(x2, x2, axis=0), np.vecdot(x2, x2, axis=0), rtol=1e-13)
    # The contracted axis does not broadcast: (3, 1) . (3, 4) is an error (NumPy's too).
    with pytest.raises(ValueError, match="vecdot: axis -1 has size 1"):
        vecdot(np.ones((3, 1)), np.ones((3, 4)))
    with pytest.raises(ValueError):
        np.vecdot(np.ones((3, 1)), np.ones((3, 4)))
    with pytest.raises(ValueError, match="at least one dimension"):
        vecdot(np.float64(1.0), np.ones(3))
    g = tracer.grad(lambda u: tnp.sum(vecdot(u, y2, axis=-2)))(x2)
    np.testing.assert_allclose(g, np.broadcast_to(y2, x2.shape))
    check_jit(lambda u, v: vecdot(u, v, axis=-2), (x2, y2), rtol=1e-14)
    vm = tracer.vmap(lambda u: vecdot(u, y2[0]))(x2[:, 0])
    np.testing.assert_allclose(vm, np.vecdot(x2[:, 0], y2[0]), rtol=1e-13)


# ---------------------------------------- linalg ------------------------------------------

def test_linalg_named_results(rng):
    a = rng.standard_normal((2, 4, 3))
    s = a[..., :3, :] @ np.swapaxes(a[..., :3, :], -1, -2) + 3 * np.eye(3)
    cases = [(tnp.linalg.eigh, np.linalg.eigh, s, ("eigenvalues", "eigenvectors")),
             (tnp.linalg.eig, np.linalg.eig, s, ("eigenvalues", "eigenvectors")),
             (tnp.linalg.qr, np.linalg.qr, a, ("Q", "R")),
             (tnp.linalg.slogdet, np.linalg.slogdet, s, ("sign", "logabsdet")),
             (tnp.linalg.svd, np.linalg.svd, a, ("U", "S", "Vh"))]
    for f, npf, x, fields in cases:
        got, want = f(x), npf(x)
        assert got._fields == fields == want._fields
        assert type(got).__name__ == type(want).__name__
        if f in (tnp.linalg.slogdet, tnp.linalg.eigh):  # unique up to nothing
            for name in fields:
                np.testing.assert_allclose(getattr(got, name), getattr(want, name),
                                           rtol=1e-12, atol=1e-12)
    # The eigenvalues/singular values (sign conventions aside) match NumPy's.
    np.testing.assert_allclose(tnp.linalg.svd(a).S, np.linalg.svd(a).S, rtol=1e-12)
    q, r = tnp.linalg.qr(a)
    np.testing.assert_allclose(np.asarray(q) @ np.asarray(r), a, atol=1e-12)
    assert not isinstance(tnp.linalg.svd(a, compute_uv=False), tuple)
    # jit and vmap carry the named tuple through (it is a pytree node).
    out = tracer.jit(tnp.linalg.eigh)(s)
    assert type(out) is tnp.linalg.EighResult
    np.testing.assert_allclose(out.eigenvalues, np.linalg.eigh(s).eigenvalues, rtol=1e-12)
    out = tracer.vmap(tnp.linalg.slogdet)(s)
    assert type(out) is tnp.linalg.SlogdetResult
    np.testing.assert_allclose(out.logabsdet, np.linalg.slogdet(s).logabsdet, rtol=1e-12)
    g = tracer.grad(lambda m: tnp.sum(tnp.linalg.slogdet(m).logabsdet))(s)
    np.testing.assert_allclose(g, np.swapaxes(np.linalg.inv(s), -1, -2), rtol=1e-10)


def test_solve_and_inv_of_empty_matrices():
    for a_shape, b_shape in [((0, 0), (0,)), ((0, 0), (0, 3)), ((2, 0, 0), (2, 0, 1)),
                             ((2, 0, 0), (0, 4)), ((0, 0), (5, 0, 2))]:
        a, b = np.zeros(a_shape), np.ones(b_shape)
        assert_matches(tnp.linalg.solve(a, b), np.linalg.solve(a, b))
    for shape in ((0, 0), (3, 0, 0)):
        assert_matches(tnp.linalg.inv(np.zeros(shape, np.float32)),
                       np.linalg.inv(np.zeros(shape, np.float32)))
    assert_matches(tnp.linalg.det(np.zeros((0, 0))), np.linalg.det(np.zeros((0, 0))))
    check_jit(tnp.linalg.inv, (np.zeros((0, 0)),))


# ------------------------------------- finfo, devices -------------------------------------

def test_finfo_gives_python_scalars():
    for arg, real in [(tnp.float32, np.float32), (np.dtype("float64"), np.float64),
                      (tnp.complex64, np.float32), (tnp.asarray(1.0, dtype=tnp.float32),
                                                     np.float32),
                      (np.complex128, np.float64), ("float16", np.float16)]:
        info, ref = tnp.finfo(arg), np.finfo(real)
        assert info.dtype == np.dtype(real) and isinstance(info.dtype, np.dtype)
        assert type(info.bits) is int and info.bits == ref.bits
        for name in ("eps", "max", "min", "smallest_normal", "tiny", "resolution",
                     "epsneg", "smallest_subnormal"):
            v = getattr(info, name)
            assert type(v) is float and v == float(getattr(ref, name)), name
        assert info.nmant == ref.nmant and info.precision == ref.precision
        assert info == tnp.finfo(real) and hash(info) == hash(tnp.finfo(real))
    with pytest.raises(ValueError, match="not inexact"):
        tnp.finfo(np.int32)
    # eps is a (weak) Python float: it keeps a float32 computation in float32.
    x = tnp.ones(3, dtype=tnp.float32)
    assert (x * tnp.finfo(x).eps).dtype == np.float32
    assert tracer.jit(lambda v: v + tnp.finfo(v).eps)(x).dtype == np.float32


def test_device_and_to_device():
    x = tnp.arange(3.0)
    assert x.device == "cpu" and x.to_device("cpu") is x
    with pytest.raises(ValueError, match="to_device: unknown device 'gpu'"):
        x.to_device("gpu")
    with pytest.raises(ValueError, match="stream"):
        x.to_device("cpu", stream=1)
    # Traced values have them too, so Array API code runs under jit and vmap.
    out = tracer.jit(lambda v: v.to_device(v.device) * 2)(x)
    np.testing.assert_array_equal(out, [0.0, 2.0, 4.0])
    out = tracer.vmap(lambda v: v.to_device("cpu") + 1)(x)
    np.testing.assert_array_equal(out, [1.0, 2.0, 3.0])
    assert tnp.fft.fftfreq(4, device="cpu").shape == (4,)
    assert tnp.fft.rfftfreq(4, device="cpu").shape == (3,)


def test_array_method_signatures():
    sig = inspect.signature(tnp.asarray(1.0).__dlpack__)
    assert list(sig.parameters) == ["stream", "max_version", "dl_device", "copy"]
    assert all(p.kind is p.KEYWORD_ONLY and p.default is None
               for p in sig.parameters.values())
    sig = inspect.signature(tnp.asarray(1.0).to_device)
    assert [(p.name, p.kind) for p in sig.parameters.values()] == [
        ("device", inspect.Parameter.POSITIONAL_ONLY),
        ("stream", inspect.Parameter.KEYWORD_ONLY)]


# ----------------------------------------- DLPack -----------------------------------------

class _LegacyConsumerView:
    """A producer that only speaks DLPack 0.x (no keywords), wrapping ``x``: NumPy's
    from_dlpack falls back to it after a TypeError."""

    def __init__(self, x, **kwargs):
        self.x, self.kwargs = x, kwargs

    def __dlpack__(self, stream=None):
        return self.x.__dlpack__(**self.kwargs)

    def __dlpack_device__(self):
        return self.x.__dlpack_device__()


@pytest.mark.parametrize("dt", [np.float64, np.float32, np.int8, np.uint16, np.bool_,
                                np.complex64])
def test_dlpack_export(dt, rng):
    x = tnp.asarray(rng.integers(0, 2, (2, 3)).astype(dt))
    base = np.asarray(x)
    assert x.__dlpack_device__() == (1, 0)
    # DLPack 1.x (NumPy's from_dlpack asks for it): shared and flagged read-only.
    y = np.from_dlpack(x)
    np.testing.assert_array_equal(y, base)
    assert np.shares_memory(y, base) and not y.flags.writeable
    assert not np.shares_memory(np.from_dlpack(x, copy=True), base)
    # DLPack 0.x cannot flag read-only: shared unless copy=True (NumPy refuses to export
    # its own read-only arrays there).
    for kwargs, shared in [({}, True), ({"copy": False}, True), ({"max_version": (0, 9)},
                                                                  True),
                           ({"copy": True}, False), ({"dl_device": (1, 0)}, True)]:
        y = np.from_dlpack(_LegacyConsumerView(x, **kwargs))
        np.testing.assert_array_equal(y, base)
        assert np.shares_memory(y, base) == shared, kwargs
    for kwargs in ({}, {"max_version": (1, 0)}, {"max_version": (2, 0), "copy": False},
                   {"copy": True, "max_version": (0, 0)}):
        assert "dltensor" in repr(x.__dlpack__(**kwargs))
    with pytest.raises(BufferError):
        x.__dlpack__(dl_device=(2, 0))
    # The Array itself is untouched and still read-only.
    assert not base.flags.writeable


def test_from_dlpack(rng):
    src = rng.standard_normal((2, 3))
    shared = tnp.from_dlpack(src)
    assert np.shares_memory(np.asarray(shared), src) and src.flags.writeable
    assert np.shares_memory(np.asarray(tnp.from_dlpack(src, copy=False)), src)
    copied = tnp.from_dlpack(src, copy=True)
    assert not np.shares_memory(np.asarray(copied), src)
    np.testing.assert_array_equal(copied, src)
    x = tnp.asarray(src)
    for kwargs in ({}, {"copy": True}, {"copy": False}, {"device": "cpu"}):
        y = tnp.from_dlpack(x, **kwargs)
        assert type(y) is type(x) and y.device == "cpu"
        np.testing.assert_array_equal(y, x)
    with pytest.raises(ValueError, match="from_dlpack: unknown device 'gpu'"):
        tnp.from_dlpack(src, device="gpu")
    np.testing.assert_array_equal(tnp.from_dlpack(tnp.asarray([True, False])), [True, False])


def test_from_dlpack_32_bit(x32):
    src = np.arange(3.0)
    y = tnp.from_dlpack(src)
    assert y.dtype == np.float32 and not np.shares_memory(np.asarray(y), src)
    with pytest.raises(BufferError, match="from_dlpack: dtype float64 needs a conversion"):
        tnp.from_dlpack(src, copy=False)
