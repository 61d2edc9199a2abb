"""Element-wise tracer.numpy functions against NumPy: a table of records drives value and
dtype checks over shapes (broadcasting included) and dtypes, the special float values,
and sampled grad / vmap / jit checks."""
from __future__ import annotations

import numpy as np
import pytest

import tracer
import tracer.numpy as tnp
from tracer.test_util import check_grads, check_jit, check_vmap

from np_util import (BOOL, C128, COMPLEX, F32, F64, FLOATS, I8, I32, I64, INTS,
                     SPECIAL, U8, assert_matches, jax_result_dtype, rand, tol_for)

# NumPy warns on the special values (0/0, log(-1), ...) that these tests feed it on purpose.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


class R:
    """One element-wise function: its name in both modules, input dtypes, the domain of
    random inputs, whether it maps ints to floats, and whether it is differentiable."""

    def __init__(self, name, nargs, dts, domain=None, inexact=False, grad=True,
                 np_name=None, tol=1.0, special=True, grad_domain=None):
        self.name, self.nargs, self.dts = name, nargs, dts
        self.domain, self.inexact, self.grad = domain, inexact, grad
        self.np_name = np_name or name
        self.tol, self.special = tol, special
        self.grad_domain = grad_domain or domain

    def __repr__(self):
        return self.name


FC = FLOATS + COMPLEX
UNARY = [
    R("exp", 1, FC + (I32,), (-5, 5), True), R("exp2", 1, FLOATS + (I8,), (-5, 5), True),
    R("expm1", 1, FLOATS, (-5, 5), True), R("log", 1, FC, (0.1, 5), True),
    R("log1p", 1, FLOATS, (-0.9, 5), True), R("log2", 1, FLOATS + (I32,), (0.1, 5), True),
    R("log10", 1, FLOATS, (0.1, 5), True), R("sqrt", 1, FC + (I32,), (0.1, 5), True),
    R("cbrt", 1, FLOATS, (-5, 5), True, grad_domain=(0.5, 5)),
    R("sin", 1, FC, None, True), R("cos", 1, FC, None, True),
    R("tan", 1, FLOATS, (-1.2, 1.2), True), R("tanh", 1, FC, None, True),
    R("arcsin", 1, FLOATS + (C128,), (-0.95, 0.95), True),
    R("arccos", 1, FLOATS + (C128,), (-0.95, 0.95), True),
    R("arctan", 1, FLOATS + (C128,), (-0.9, 0.9), True),
    R("sinh", 1, FC, None, True), R("cosh", 1, FC, None, True),
    R("arcsinh", 1, FLOATS + (C128,), (-0.9, 0.9), True),
    R("arccosh", 1, FLOATS, (1.1, 5), True), R("arctanh", 1, FLOATS + (C128,), (-0.9, 0.9), True),
    R("deg2rad", 1, FLOATS + (I32,), None, True), R("rad2deg", 1, FLOATS, None, True),
    R("radians", 1, FLOATS, None, True), R("degrees", 1, FLOATS, None, True),
    R("sinc", 1, FLOATS, None, True), R("i0", 1, FLOATS, (-30, 30), True, tol=10,
                                         special=False),
    R("abs", 1, FC + INTS, None, grad_domain=(0.5, 2)),
    R("negative", 1, FC + INTS), R("positive", 1, FC + INTS), R("square", 1, FC + INTS),
    R("sign", 1, FLOATS + INTS, grad=False), R("floor", 1, FLOATS + INTS, grad=False),
    R("ceil", 1, FLOATS + INTS, grad=False), R("trunc", 1, FLOATS + INTS, grad=False),
    R("fix", 1, FLOATS, grad=False), R("rint", 1, FLOATS + (C128,), grad=False),
    R("signbit", 1, FLOATS + INTS, grad=False), R("isfinite", 1, FC + INTS, grad=False),
    R("isinf", 1, FC + INTS, grad=False), R("isnan", 1, FC + INTS, grad=False),
    R("isposinf", 1, FLOATS + INTS, grad=False), R("isneginf", 1, FLOATS + INTS, grad=False),
    R("spacing", 1, FLOATS, grad=False), R("nan_to_num", 1, FC + INTS, grad=False),
    R("iscomplex", 1, FC + INTS, grad=False), R("isreal", 1, FC + INTS, grad=False),
    R("reciprocal", 1, FC, (0.5, 3), grad_domain=(0.5, 3)),
    R("bitwise_count", 1, INTS, grad=False, special=False),
    R("invert", 1, INTS + (BOOL,), grad=False, special=False),
    R("logical_not", 1, FLOATS + INTS + (BOOL,), grad=False),
    R("real", 1, FC + INTS), R("imag", 1, FC, grad=False), R("conj", 1, FC + INTS),
    R("angle", 1, FC, grad_domain=(0.5, 2)),
]

BINARY = [
    R("add", 2, FC + INTS + (BOOL,)), R("subtract", 2, FC + INTS), R("multiply", 2, FC + INTS),
    R("divide", 2, FC + (I32,), (0.5, 3), True), R("true_divide", 2, FLOATS, (0.5, 3)),
    R("floor_divide", 2, FLOATS + INTS, (1, 5), grad=False),
    R("remainder", 2, FLOATS + INTS, (1, 5), grad=False),
    R("mod", 2, FLOATS + (I32,), (-5, 5), grad=False), R("fmod", 2, FLOATS + INTS, (1, 5),
                                                         grad=False),
    R("power", 2, FLOATS + (C128,), (0.5, 2)), R("float_power", 2, FLOATS, (0.5, 2)),
    R("maximum", 2, FLOATS + INTS), R("minimum", 2, FLOATS + INTS),
    R("fmax", 2, FLOATS + INTS), R("fmin", 2, FLOATS + INTS),
    R("arctan2", 2, FLOATS, None, True), R("hypot", 2, FLOATS, grad_domain=(0.5, 2)),
    R("copysign", 2, FLOATS, grad_domain=(0.5, 2)), R("nextafter", 2, FLOATS, grad=False),
    R("logaddexp", 2, FLOATS), R("logaddexp2", 2, FLOATS),
    R("heaviside", 2, FLOATS, grad=False),
    R("equal", 2, FC + INTS, grad=False), R("not_equal", 2, FC + INTS, grad=False),
    R("less", 2, FLOATS + INTS, grad=False), R("less_equal", 2, FLOATS + INTS, grad=False),
    R("greater", 2, FLOATS + INTS, grad=False),
    R("greater_equal", 2, FLOATS + INTS, grad=False),
    R("logical_and", 2, FLOATS + INTS + (BOOL,), grad=False),
    R("logical_or", 2, FLOATS + (I32, BOOL), grad=False),
    R("logical_xor", 2, FLOATS + (I32, BOOL), grad=False),
    R("bitwise_and", 2, INTS + (BOOL,), grad=False, special=False),
    R("bitwise_or", 2, INTS + (BOOL,), grad=False, special=False),
    R("bitwise_xor", 2, INTS + (BOOL,), grad=False, special=False),
    R("left_shift", 2, (I32, I64, U8), (0, 5), grad=False, special=False),
    R("right_shift", 2, (I8, I32, I64, U8), (0, 5), grad=False, special=False),
    R("gcd", 2, (I8, I32, I64, U8), (-30, 30), grad=False, special=False),
    R("lcm", 2, (I8, I32, I64), (-12, 12), grad=False, special=False),
]

SHAPES_1 = [(), (4,), (2, 3)]
SHAPES_2 = [((2, 3), (2, 3)), ((2, 3), (3,)), ((), (2, 1)), ((3, 1), (1, 4))]


def _np_fn(rec):
    return getattr(np, rec.np_name)


def _expected(rec, dt, *args):
    """NumPy's values; the dtype the JAX lattice gives (NumPy differs for small ints
    promoted to floats, e.g. sqrt(int8) is float16 in NumPy)."""
    with np.errstate(all="ignore"):
        out = _np_fn(rec)(*args)
        if rec.name == "floor_divide" and np.issubdtype(dt, np.floating):
            # The Array API's special cases (README "Differences"): with exactly one
            # infinite operand, x1 // x2 is x1 / x2 (inf // 2 = inf, -1 // inf = -0),
            # where NumPy's fmod-based formula gives NaN or -1.
            x1, x2 = np.broadcast_arrays(*args)
            out = np.where(np.isinf(x1) != np.isinf(x2), x1 / x2, out)
        return out


def _dtype_agrees(rec, dt):
    # Our integer -> float promotion goes to the default float (float64), NumPy's to the
    # smallest float holding the integer type: compare dtypes for non-promoting cases.
    return not (rec.inexact and not np.issubdtype(dt, np.inexact))


@pytest.mark.parametrize("rec", UNARY, ids=repr)
def test_unary_against_numpy(rec, rng):
    for dt in rec.dts:
        for shape in SHAPES_1:
            x = rand(rng, shape, dt, rec.domain)
            got = getattr(tnp, rec.name)(x)
            want = _expected(rec, dt, x)
            if not _dtype_agrees(rec, dt):
                assert np.asarray(got).dtype == jax_result_dtype(dt, inexact=True)
            assert_matches(got, want, rtol=tol_for(np.asarray(got).dtype, rec.tol),
                           check_dtype=_dtype_agrees(rec, dt) and rec.name != "rint",
                           err=f"{rec.name}({dt}, {shape})")


@pytest.mark.parametrize("rec", [r for r in UNARY if r.special], ids=repr)
def test_unary_special_values(rec):
    for dt in [d for d in rec.dts if d in (F32, F64)]:
        x = SPECIAL.astype(dt)
        got = getattr(tnp, rec.name)(x)
        want = _expected(rec, dt, x)
        assert_matches(got, want, rtol=tol_for(dt, rec.tol * 10), atol=tol_for(dt) * 1e-3,
                       err=f"{rec.name}({dt}) on {x}")


@pytest.mark.parametrize("rec", BINARY, ids=repr)
def test_binary_against_numpy(rec, rng):
    for dt in rec.dts:
        for sx, sy in SHAPES_2:
            x = rand(rng, sx, dt, rec.domain)
            y = rand(rng, sy, dt, rec.domain)
            got = getattr(tnp, rec.name)(x, y)
            want = _expected(rec, dt, x, y)
            assert_matches(got, want, rtol=tol_for(np.asarray(got).dtype, rec.tol),
                           check_dtype=_dtype_agrees(rec, dt),
                           err=f"{rec.name}({dt}, {sx}, {sy})")


@pytest.mark.parametrize("rec", [r for r in BINARY if r.special], ids=repr)
def test_binary_special_values(rec):
    x = np.repeat(SPECIAL, SPECIAL.size)
    y = np.tile(SPECIAL, SPECIAL.size)
    for dt in [d for d in rec.dts if d in (F32, F64)][:1]:
        got = getattr(tnp, rec.name)(x.astype(dt), y.astype(dt))
        want = _expected(rec, dt, x.astype(dt), y.astype(dt))
        assert_matches(got, want, rtol=tol_for(dt, 10), atol=tol_for(dt) * 1e-3,
                       err=f"{rec.name}({dt})")


def _grad_points(rec, rng, n):
    lo, hi = rec.grad_domain or (-2, 2)
    return rng.uniform(lo, hi, n)


@pytest.mark.parametrize("rec", [r for r in UNARY if r.grad], ids=repr)
def test_unary_grads(rec, rng):
    x = _grad_points(rec, rng, 3)
    if rec.name == "sinc":
        x = np.array([0.0, 0.3, -1.7])  # the removable singularity included
    f = getattr(tnp, rec.name)
    check_grads(f, (x,), order=1, modes=("fwd", "rev"), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("rec", [r for r in BINARY if r.grad], ids=repr)
def test_binary_grads(rec, rng):
    x, y = _grad_points(rec, rng, 3), _grad_points(rec, rng, 3) + 0.1
    check_grads(getattr(tnp, rec.name), (x, y), order=1, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ["sinh", "arcsin", "logaddexp", "hypot", "sinc", "i0",
                                  "arctanh"])
def test_second_order_grads(name, rng):
    rec = next(r for r in UNARY + BINARY if r.name == name)
    args = tuple(_grad_points(rec, rng, 2) for _ in range(rec.nargs))
    check_grads(getattr(tnp, name), args, order=2, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("rec", UNARY[::4] + BINARY[::5], ids=repr)
def test_vmap(rec, rng):
    dt = rec.dts[0]
    args = [rand(rng, (3, 2), dt, rec.domain) for _ in range(rec.nargs)]
    check_vmap(getattr(tnp, rec.name), args)
    if rec.nargs == 2:
        check_vmap(getattr(tnp, rec.name), [args[0], args[1][0]], in_axes=(0, None))


@pytest.mark.parametrize("name", ["arcsinh", "logaddexp", "frexp_parts", "gcd", "nextafter",
                                  "sinc"])
def test_jit_matches_eager(name, rng):
    if name == "frexp_parts":
        check_jit(lambda x: tnp.frexp(x), (SPECIAL,))
        return
    rec = next(r for r in UNARY + BINARY if r.name == name)
    # gcd unrolls Euclid's steps for the dtype's width: the narrow one compiles fastest.
    for dt in rec.dts[:1 if name == "gcd" else 2]:
        args = tuple(rand(rng, (5,), dt, rec.domain) for _ in range(rec.nargs))
        # The compiled float32 kernels may differ from NumPy's by an ulp.
        check_jit(getattr(tnp, name), args, rtol=4 * np.finfo(dt).eps
                  if np.issubdtype(dt, np.floating) else 0, atol=1e-300)


# ---------------------------------- special cases ----------------------------------------

def test_weak_scalar_promotion():
    x = np.ones(3, np.float32)
    assert tnp.add(x, 2.0).dtype == np.float32
    assert tnp.multiply(np.ones(3, np.int8), 3).dtype == np.int8
    assert tnp.hypot(x, 2.0).dtype == np.float32
    assert tnp.logaddexp(x, 1).dtype == np.float32
    assert tnp.arcsin(np.ones(2, np.int32)).dtype == np.float64
    assert tnp.arcsin(np.ones(2, np.float16)).dtype == np.float16


def test_frexp_ldexp_modf():
    x = np.concatenate([SPECIAL, [5e-324, -3e-310, 1.5, 1024.0]])
    m, e = tnp.frexp(x)
    mn, en = np.frexp(x)
    assert_matches(m, mn, rtol=0, atol=0)
    np.testing.assert_array_equal(np.asarray(e), en)
    assert np.asarray(e).dtype == np.int32
    for dt in (np.float32, np.float16):
        m, e = tnp.frexp(SPECIAL.astype(dt))
        mn, en = np.frexp(SPECIAL.astype(dt))
        assert_matches(m, mn, rtol=0, atol=0)
        np.testing.assert_array_equal(np.asarray(e), en)
    k = np.array([0, 1, -1, 10, -1074, 1023, 2000, -2000, 1100])
    v = np.array([1.0, 1.5, -3.0, 2.0 ** -1060, 1.0, 1.9, 1e-300, 1e300, 2.0 ** -60])
    assert_matches(tnp.ldexp(v, k), np.ldexp(v, k), rtol=0, atol=0)
    assert_matches(tnp.ldexp(np.float32(3.0), np.arange(-3, 4)),
                   np.ldexp(np.float32(3.0), np.arange(-3, 4)), rtol=0, atol=0)
    f, w = tnp.modf(SPECIAL)
    fn, wn = np.modf(SPECIAL)
    assert_matches(f, fn, rtol=0, atol=0)
    assert_matches(w, wn, rtol=0, atol=0)
    np.testing.assert_array_equal(np.signbit(np.asarray(f)), np.signbit(fn))


def test_integer_division_semantics():
    a = np.array([7, -7, 7, -7, 5], np.int32)
    b = np.array([2, 2, -2, -2, 0], np.int32)
    np.testing.assert_array_equal(tnp.floor_divide(a, b)[:4], np.floor_divide(a, b)[:4])
    np.testing.assert_array_equal(tnp.remainder(a, b)[:4], np.remainder(a, b)[:4])
    # XLA's definitions where NumPy warns: x // 0 = -1, x % 0 = x.
    assert int(tnp.floor_divide(a, b)[4]) == -1
    assert int(tnp.remainder(a, b)[4]) == 5
    np.testing.assert_array_equal(tnp.floor_divide(np.array([-3, 3]), 0), [-1, -1])
    np.testing.assert_array_equal(tnp.remainder(np.array([-3, 3]), 0), [-3, 3])
    np.testing.assert_array_equal(tnp.left_shift(np.array([True, False]), True), [2, 0])
    np.testing.assert_array_equal(tnp.square(np.array([True, False])), [True, False])


def test_gcd_lcm_extremes():
    a = np.array([0, 0, 12, -12, 2 ** 40, 97], np.int64)
    b = np.array([0, 5, 18, 18, 2 ** 35 * 3, 89], np.int64)
    np.testing.assert_array_equal(tnp.gcd(a, b), np.gcd(a, b))
    np.testing.assert_array_equal(tnp.lcm(a[:4], b[:4]), np.lcm(a[:4], b[:4]))
    with pytest.raises(TypeError, match="gcd"):
        tnp.gcd(np.ones(2), np.ones(2))


def test_isclose_and_nan_to_num():
    a = np.array([1.0, np.inf, np.inf, np.nan, 1e10, 0.0])
    b = np.array([1.0 + 1e-9, np.inf, -np.inf, np.nan, 1.0001e10, 1e-9])
    for eq in (False, True):
        assert_matches(tnp.isclose(a, b, equal_nan=eq), np.isclose(a, b, equal_nan=eq))
    assert bool(tnp.allclose(a[:2], b[:2])) and not bool(tnp.allclose(a, b))
    assert_matches(tnp.nan_to_num(SPECIAL, nan=-1.0, posinf=9.0),
                   np.nan_to_num(SPECIAL, nan=-1.0, posinf=9.0))
    z = np.array([complex(np.nan, np.inf)])
    assert_matches(tnp.nan_to_num(z), np.nan_to_num(z))


def test_inverse_trig_near_edges_and_large():
    x = np.array([1 - 1e-12, -1 + 1e-15, 1e-20, 1.0, -1.0, 1.5])
    assert_matches(tnp.arcsin(x), np.arcsin(x), rtol=1e-14)
    assert_matches(tnp.arccos(x), np.arccos(x), rtol=1e-12, atol=1e-15)
    assert_matches(tnp.arctanh(x), np.arctanh(x), rtol=1e-12)
    big = np.array([1e300, -1e300, 1e-300, 710.0, -710.0])
    assert_matches(tnp.arcsinh(big), np.arcsinh(big), rtol=1e-14)
    assert_matches(tnp.arccosh(np.abs(big[:2]) + 1), np.arccosh(np.abs(big[:2]) + 1))
    assert_matches(tnp.sinh(big[3:]), np.sinh(big[3:]), rtol=1e-13)
    assert_matches(tnp.cosh(big[3:]), np.cosh(big[3:]), rtol=1e-13)


def test_bad_input_errors():
    with pytest.raises(TypeError, match="hypot"):
        tnp.hypot(np.ones(2, np.complex64), 1.0)
    with pytest.raises(TypeError, match="ldexp"):
        tnp.ldexp(np.ones(2), np.ones(2))
    with pytest.raises(ValueError, match="broadcast"):
        tnp.add(np.ones(3), np.ones(4))
    with pytest.raises(TypeError, match="bitwise_count"):
        tnp.bitwise_count(np.ones(2))


def test_sinc_derivatives_at_zero():
    # The Taylor branch gives the derivatives of the limit: sinc'(0) = 0,
    # sinc''(0) = -pi^2 / 3.
    assert float(tracer.grad(tnp.sinc)(0.0)) == 0.0
    assert float(tracer.grad(tracer.grad(tnp.sinc))(0.0)) == pytest.approx(-np.pi ** 2 / 3,
                                                                           rel=1e-12)


ALIASES = [("absolute", "abs"), ("acos", "arccos"), ("acosh", "arccosh"), ("asin", "arcsin"),
           ("asinh", "arcsinh"), ("atan", "arctan"), ("atanh", "arctanh"),
           ("conjugate", "conj"), ("fabs", "fabs"), ("around", "round"),
           ("bitwise_not", "invert"), ("bitwise_invert", "invert")]


@pytest.mark.parametrize("name,np_name", ALIASES)
def test_unary_aliases(name, np_name, rng):
    x = rand(rng, (2, 3), F64, (1.1, 1.9)) if "h" in name and "acosh" in name else \
        rand(rng, (2, 3), F64, (-0.9, 0.9))
    if "bitwise" in name:
        x = rand(rng, (2, 3), I32)
    assert_matches(getattr(tnp, name)(x), getattr(np, np_name)(x))


@pytest.mark.parametrize("name,np_name", [("atan2", "arctan2"), ("pow", "power"),
                                          ("bitwise_left_shift", "left_shift"),
                                          ("bitwise_right_shift", "right_shift")])
def test_binary_aliases(name, np_name, rng):
    dt = F64 if name in ("atan2", "pow") else I32
    x, y = rand(rng, (2, 3), dt, (0.5, 3)), rand(rng, (3,), dt, (1, 3))
    assert_matches(getattr(tnp, name)(x, y), getattr(np, np_name)(x, y))


def test_divmod(rng):
    for dt in (F64, I32):
        x, y = rand(rng, (2, 3), dt, (-5, 5)), rand(rng, (2, 3), dt, (1, 4))
        for g, w in zip(tnp.divmod(x, y), np.divmod(x, y)):
            assert_matches(g, w)


# ---- JAX's rules where they differ from NumPy's (expected values recorded from JAX) ----

def test_complex_order_comparisons_are_lexicographic():
    x = tnp.array([1 + 1j, 1 + 2j, 2 + 0j, complex(np.nan, 0), complex(0, np.nan)])
    y = tnp.array([1 + 2j, 1 + 2j, 1 + 5j, 1 + 1j, 0 + 1j])
    xs, ys = np.asarray(x), np.asarray(y)

    def lexicographic(name, a, b):
        # JAX's rule: the imaginary parts decide only where the real parts are equal, so
        # 0+nanj < 1+0j is True (NumPy says False wherever a NaN appears)
        op = getattr(np, name)
        return np.where(a.real == b.real, op(a.imag, b.imag), op(a.real, b.real))
    for name in ("less", "less_equal", "greater", "greater_equal"):
        want = lexicographic(name, xs, ys)
        np.testing.assert_array_equal(np.asarray(getattr(tnp, name)(x, y)), want)
        np.testing.assert_array_equal(np.asarray(tracer.jit(getattr(tnp, name))(x, y)), want)
        got = tracer.vmap(getattr(tnp, name))(x, y)
        np.testing.assert_array_equal(np.asarray(got), want)
    np.testing.assert_array_equal(np.asarray(x < 1 + 1.5j),
                                  lexicographic("less", xs, np.complex128(1 + 1.5j)))
    np.testing.assert_array_equal(np.asarray(2 + 0j >= x),
                                  lexicographic("greater_equal", np.complex128(2), xs))
    # recorded from JAX: [nan+0j < 1+1j, 0+nanj < 0+1j, 1+1j < 1+1j]
    np.testing.assert_array_equal(
        np.asarray(tnp.array([complex(np.nan, 0), complex(0, np.nan), 1 + 1j])
                   < tnp.array([1 + 1j, 0 + 1j, 1 + 1j])), [False, False, False])
    # ties: equal real parts decide on the imaginary part, equal pairs are not less
    assert not bool(tnp.less(tnp.array(1 + 2j), tnp.array(1 + 2j)))
    assert bool(tnp.less_equal(tnp.array(1 + 2j), tnp.array(1 + 2j)))
    # real operands keep the primitive (no real/imag split in the jaxpr)
    jaxpr = tracer.make_jaxpr(tnp.less)(1.0, 2.0)
    assert [e.primitive.name for e in jaxpr.jaxpr.eqns] == ["lt"]


def test_power_and_square_of_bool_compute_as_int32():
    # JAX: bool ** 2 and square(bool) are int32, with enable_x64 too (NumPy keeps
    # square(bool) bool)
    for got in (tnp.array([True, False]) ** 2, tnp.square(tnp.array([True, False])),
                tnp.power(tnp.array([True, False]), tnp.array([True, True]))):
        assert got.dtype == np.int32 and not got.aval.weak_type
        np.testing.assert_array_equal(np.asarray(got), [1, 0])
    got = tnp.array(True) ** 2.0
    assert got.dtype == np.float64 and got.aval.weak_type
    with pytest.raises(ValueError, match="negative integer powers"):
        tnp.power(tnp.array([True]), -1)
    np.testing.assert_array_equal(np.asarray(tracer.jit(tnp.square)(tnp.array([True]))), [1])
