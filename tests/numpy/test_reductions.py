"""Reductions, NaN-aware reductions, cumulative functions, averages and statistics of
tracer.numpy against NumPy (axis, keepdims, dtype, where, initial), with grad / vmap /
jit samples."""
from __future__ import annotations

import numpy as np
import pytest

import tracer
import tracer.numpy as tnp
from tracer.test_util import check_grads, check_jit, check_vmap

from np_util import BOOL, C128, F32, F64, I8, I32, U8, assert_matches, rand

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

AXES = [None, 0, 1, -1, (0, 2)]

REDUCTIONS = ["sum", "prod", "max", "min", "mean", "var", "std", "any", "all", "argmax",
              "argmin", "ptp", "count_nonzero", "nansum", "nanprod", "nanmax", "nanmin",
              "nanmean", "nanvar", "nanstd", "nanargmax", "nanargmin", "median", "nanmedian"]
MULTI_AXIS = {"sum", "prod", "max", "min", "mean", "var", "std", "any", "all", "ptp",
              "count_nonzero", "nansum", "nanprod", "nanmax", "nanmin", "nanmean", "nanvar",
              "nanstd", "median", "nanmedian"}
NO_KEEPDIMS = {"count_nonzero"}


def _dtypes_for(name):
    if name in ("any", "all", "count_nonzero"):
        return (BOOL, I32, F64)
    if name.startswith("nan") or name in ("median",):
        return (F32, F64)
    if name in ("argmax", "argmin", "ptp", "max", "min"):
        return (F64, I8, U8)
    return (F32, F64, I32, U8, C128) if name in ("sum", "prod", "mean") else (F64, I32)


@pytest.mark.parametrize("name", REDUCTIONS)
def test_reduction_against_numpy(name, rng):
    x_shape = (2, 3, 4)
    for dt in _dtypes_for(name):
        x = rand(rng, x_shape, dt, (-2, 3))
        if name.startswith("nan") and np.issubdtype(dt, np.floating):
            x[0, 1, :2] = np.nan
            x[1, 2, 3] = np.nan
        for axis in AXES:
            if isinstance(axis, tuple) and name not in MULTI_AXIS:
                continue
            for keepdims in (False, True):
                if keepdims and name in NO_KEEPDIMS:
                    continue
                kw = dict(axis=axis, keepdims=keepdims)
                with np.errstate(all="ignore"):
                    want = getattr(np, name)(x, **kw)
                got = getattr(tnp, name)(x, **kw)
                # Small ints accumulate in int64 in both; NumPy's float16-free rules agree
                # with ours except for the int->float promotion of mean/var on uint8.
                assert_matches(got, want, rtol=2e-5 if dt == F32 else 1e-12,
                               atol=1e-5 if dt == F32 else 1e-12,
                               check_dtype=not (name in ("mean", "var", "std") and dt != F64
                                                and dt != C128 and dt != F32),
                               err=f"{name}({dt}, axis={axis}, keepdims={keepdims})")


@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "mean", "any", "all"])
def test_where_and_initial(name, rng):
    x = rand(rng, (3, 4), F64, (0.5, 2))
    where = rng.random((3, 4)) < 0.6
    where[:, 0] = True
    kw = {"where": where}
    if name in ("max", "min"):
        kw["initial"] = -5.0 if name == "max" else 5.0
    assert_matches(getattr(tnp, name)(x, axis=1, **kw), getattr(np, name)(x, axis=1, **kw))
    if name in ("sum", "prod", "max", "min"):
        assert_matches(getattr(tnp, name)(x, initial=3.0), getattr(np, name)(x, initial=3.0))


def test_dtype_argument_and_accumulation():
    x = np.full(300, 100, np.int8)
    assert_matches(tnp.sum(x), np.sum(x))
    assert tnp.sum(x).dtype == np.int64
    assert_matches(tnp.sum(x, dtype=np.float32), np.sum(x, dtype=np.float32))
    assert tnp.mean(np.arange(4, dtype=np.int32)).dtype == np.float64
    assert_matches(tnp.var(np.array([1 + 1j, 2 - 1j])), np.var(np.array([1 + 1j, 2 - 1j])))
    assert_matches(tnp.std(np.arange(5.), ddof=1), np.std(np.arange(5.), ddof=1))


def test_empty_reductions():
    e = np.zeros((0, 3))
    assert_matches(tnp.sum(e, axis=0), np.sum(e, axis=0))
    assert_matches(tnp.prod(e, axis=0), np.prod(e, axis=0))
    assert_matches(tnp.mean(e, axis=0), np.full(3, np.nan))
    with pytest.raises(ValueError, match="max"):
        tnp.max(e, axis=0)
    with pytest.raises(ValueError, match="argmax"):
        tnp.argmax(e, axis=0)
    assert_matches(tnp.max(e, axis=0, initial=-1.0), np.max(e, axis=0, initial=-1.0))


def test_nan_reductions_all_nan():
    x = np.array([[np.nan, np.nan], [1.0, np.nan]])
    assert_matches(tnp.nanmax(x, axis=1), np.array([np.nan, 1.0]))
    assert_matches(tnp.nanmin(x, axis=1), np.array([np.nan, 1.0]))
    assert_matches(tnp.nanmean(x, axis=1), np.array([np.nan, 1.0]))
    # JAX's convention for all-NaN slices (NumPy raises).
    np.testing.assert_array_equal(tnp.nanargmax(x, axis=1), [-1, 0])
    assert_matches(tnp.nansum(x), np.nansum(x))


CUMULATIVE = ["cumsum", "cumprod", "nancumsum", "nancumprod"]


@pytest.mark.parametrize("name", CUMULATIVE)
def test_cumulative_against_numpy(name, rng):
    for dt in (F64, F32, I8, I32, BOOL, C128):
        if name.startswith("nan") and dt in (I8, BOOL):
            continue
        x = rand(rng, (3, 5), dt, (-2, 3))
        if name.startswith("nan") and np.issubdtype(dt, np.floating):
            x[1, 2] = np.nan
        for axis in (None, 0, 1, -1):
            want = getattr(np, name)(x, axis=axis)
            if dt in (I8, I32):
                # jax.numpy's dtype: integers keep theirs (NumPy widens to int64); the
                # values here do not overflow
                want = want.astype(dt)
            got = getattr(tnp, name)(x, axis=axis)
            assert_matches(got, want, rtol=1e-5 if dt == F32 else 1e-12,
                           err=f"{name}({dt}, axis={axis})")
    x = np.arange(1, 7)
    assert_matches(getattr(tnp, name)(x, dtype=np.float32),
                   getattr(np, name)(x, dtype=np.float32))


def test_cumulative_array_api():
    x = np.arange(1.0, 7.0).reshape(2, 3)
    assert_matches(tnp.cumulative_sum(x, axis=1), np.cumulative_sum(x, axis=1))
    assert_matches(tnp.cumulative_prod(x, axis=0, include_initial=True),
                   np.cumulative_prod(x, axis=0, include_initial=True))
    assert_matches(tnp.cumulative_sum(np.arange(4), include_initial=True),
                   np.cumulative_sum(np.arange(4), include_initial=True))
    with pytest.raises(ValueError, match="axis"):
        tnp.cumulative_sum(x)


def test_average(rng):
    x = rng.standard_normal((3, 4))
    w = rng.uniform(0.5, 2, (3, 4))
    assert_matches(tnp.average(x), np.average(x))
    assert_matches(tnp.average(x, axis=1, weights=w), np.average(x, axis=1, weights=w))
    w1 = rng.uniform(0.5, 2, 4)
    assert_matches(tnp.average(x, axis=1, weights=w1), np.average(x, axis=1, weights=w1))
    a, s = tnp.average(x, axis=0, weights=w, returned=True)
    an, sn = np.average(x, axis=0, weights=w, returned=True)
    assert_matches(a, an)
    assert_matches(s, sn)
    assert_matches(tnp.average(x, axis=1, keepdims=True), np.average(x, axis=1, keepdims=True))
    with pytest.raises(ValueError, match="axis"):
        tnp.average(x, weights=w1)


def test_cov_corrcoef(rng):
    x = rng.standard_normal((3, 6))
    y = rng.standard_normal((2, 6))
    assert_matches(tnp.cov(x), np.cov(x))
    assert_matches(tnp.cov(x, rowvar=False), np.cov(x, rowvar=False))
    assert_matches(tnp.cov(x, y), np.cov(x, y))
    assert_matches(tnp.cov(x, bias=True), np.cov(x, bias=True))
    assert_matches(tnp.cov(x[0]), np.cov(x[0]))
    fw = rng.integers(1, 4, 6)
    aw = rng.uniform(0.5, 2, 6)
    assert_matches(tnp.cov(x, fweights=fw, aweights=aw), np.cov(x, fweights=fw, aweights=aw))
    assert_matches(tnp.cov(x, ddof=0, aweights=aw), np.cov(x, ddof=0, aweights=aw))
    assert_matches(tnp.corrcoef(x), np.corrcoef(x))
    assert_matches(tnp.corrcoef(x[0], x[1]), np.corrcoef(x[0], x[1]))
    z = x + 1j * rng.standard_normal((3, 6))
    assert_matches(tnp.cov(z), np.cov(z))


def test_array_comparisons():
    a = np.array([1.0, np.nan, 3.0])
    assert bool(tnp.array_equal(a, a, equal_nan=True))
    assert not bool(tnp.array_equal(a, a))
    assert not bool(tnp.array_equal(a, a[:2]))
    assert bool(tnp.array_equiv(np.ones((2, 3)), np.ones(3)))
    assert not bool(tnp.array_equiv(np.ones((2, 3)), np.ones(2)))
    assert bool(tnp.allclose(np.ones(3), np.ones(3) + 1e-10))


@pytest.mark.parametrize("name", ["sum", "prod", "mean", "var", "std", "max", "nanmean",
                                  "nansum", "cumsum", "cumprod", "median", "logsumexp_like",
                                  "average"])
def test_reduction_grads(name, rng):
    x = rng.uniform(0.5, 2.0, (2, 3))
    if name == "logsumexp_like":
        f = lambda x: tnp.log(tnp.sum(tnp.exp(x), axis=1))  # noqa: E731
    elif name == "average":
        f = lambda x: tnp.average(x, axis=0, weights=np.array([1.0, 3.0]))  # noqa: E731
    elif name in ("cumsum", "cumprod"):
        f = lambda x: getattr(tnp, name)(x, axis=1)  # noqa: E731
    else:
        f = lambda x: getattr(tnp, name)(x, axis=1)  # noqa: E731
    check_grads(f, (x,), order=2 if name in ("var", "cumprod") else 1, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ["sum", "nanmax", "cumsum", "argmax", "var", "median"])
def test_reduction_vmap(name, rng):
    x = rng.standard_normal((3, 2, 4))
    check_vmap(lambda x: getattr(tnp, name)(x, axis=-1), (x,))
    check_vmap(lambda x: getattr(tnp, name)(x, axis=0), (x,), in_axes=1)


def test_reductions_under_jit(rng):
    x = rng.standard_normal((3, 4))
    check_jit(lambda x: (tnp.var(x, axis=0), tnp.nanmean(x), tnp.cumsum(x, axis=1),
                         tnp.argmax(x, axis=1)), (x,), rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "ptp", "mean", "cumsum",
                                  "nansum", "nanmax"])
@pytest.mark.parametrize("value", [2.0, 3])
def test_reductions_of_weak_values_are_strongly_typed(name, value):
    # JAX: jnp.sum(jnp.asarray(2.0)) is a strongly typed float (a weak input does not
    # make a weak reduction), so adding it to a float32 array gives float64 here
    w = tnp.asarray(value)
    assert w.aval.weak_type
    for got in (getattr(tnp, name)(w), tracer.jit(getattr(tnp, name))(w)):
        assert not got.aval.weak_type, (name, got.aval)
    r = getattr(tnp, name)(w) + tnp.ones(2, tnp.float32)
    assert r.dtype == tnp.result_type(getattr(tnp, name)(w).dtype, np.float32)


def test_mean_and_var_of_bfloat16_accumulate_in_float32():
    # JAX: the sum of 3000 bf16(0.01) is taken in float32 and divided by 3000 (not by
    # bf16(3000) = 3008), then rounded once: the mean is bf16(0.01) itself
    x = tnp.full(3000, 0.01, dtype=tnp.bfloat16)
    want = np.asarray(x)[0]
    for got in (tnp.mean(x), x.mean(), tracer.jit(tnp.mean)(x)):
        assert got.dtype == tnp.bfloat16
        assert np.asarray(got).view(np.uint16) == want.view(np.uint16)
    assert float(tnp.mean(tnp.arange(70000).astype(tnp.bfloat16))) == 35072.0   # JAX's
    assert float(tnp.var(x)) == 0.0 and tnp.var(x).dtype == tnp.bfloat16


@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "mean", "var"])
def test_reductions_of_a_scalar_over_axis_0_raise_axis_error(name):
    s = tnp.asarray(3.0)
    with pytest.raises(np.exceptions.AxisError, match=f"{name}: axis 0 is out of bounds"):
        getattr(tnp, name)(s, axis=0)
    assert float(getattr(tnp, name)(s, axis=())) == float(getattr(np, name)(3.0, axis=()))
    with pytest.raises(ValueError, match=f"{name}: repeated axis"):
        getattr(tnp, name)(tnp.ones((2, 3)), axis=(0, -2))


@pytest.mark.parametrize("axis", [1.0, 0.9, 1.5, "0", np.float64(1.0), (0, 1.0)])
@pytest.mark.parametrize("name", ["sum", "max", "mean", "argmax", "cumsum", "sort", "flip",
                                  "concatenate", "stack", "squeeze", "expand_dims"])
def test_a_non_integer_axis_is_a_type_error_as_in_numpy(name, axis):
    # (it was truncated: sum(x, axis=1.5) summed over axis 1)
    x = np.arange(6.0).reshape(1, 2, 3)
    calls = {"concatenate": lambda m, a: m.concatenate([x, x], axis=a),
             "stack": lambda m, a: m.stack([x, x], axis=a),
             "expand_dims": lambda m, a: m.expand_dims(x, a)}
    call = calls.get(name, lambda m, a: getattr(m, name)(x, axis=a))
    if not (name in ("argmax", "cumsum", "sort", "expand_dims", "concatenate", "stack")
            and isinstance(axis, tuple)):
        with pytest.raises(TypeError):
            call(np, axis)
    # (expand_dims's and squeeze's messages do not name them yet)
    with pytest.raises(TypeError, match=None if name in ("squeeze", "expand_dims") else name):
        call(tnp, axis)


def test_mean_divides_as_numpy_does():
    # NumPy's mean divides the sum by its count as an intp: a complex64 sum is divided in
    # complex128 and rounded back (complex division rounds more than once, so dividing
    # in complex64 differed in the last bit on a quarter of these); real sums divide
    # alike either way. Bit for bit, eagerly and under jit
    rng = np.random.default_rng(3)
    for shape, axis in [((4, 3), 1), ((50, 7), 0), ((5, 6, 7), (0, 2)), ((9,), None)]:
        for dt in (np.complex64, np.complex128, np.float32, np.float16, np.float64):
            x = rng.standard_normal(shape) * 7
            if np.dtype(dt).kind == "c":
                x = x + 1j * rng.standard_normal(shape)
            x = x.astype(dt)
            want = np.atleast_1d(np.mean(x, axis=axis))
            for f in (tnp.mean, tracer.jit(tnp.mean, static_argnames="axis")):
                got = np.atleast_1d(np.asarray(f(x, axis=axis)))
                assert got.dtype == want.dtype, (shape, dt)
                assert got.tobytes() == want.tobytes(), (shape, axis, dt, got, want)
    # per row under vmap (and jit of vmap) as NumPy's per-row means; the gradient through
    # the complex128 division is the complex64 one of sum / n
    x = (rng.standard_normal((6, 5)) + 1j * rng.standard_normal((6, 5))).astype(np.complex64)
    want = np.mean(x, axis=1)
    for f in (tracer.vmap(tnp.mean), tracer.jit(tracer.vmap(tnp.mean))):
        got = np.asarray(f(x))
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    g = tracer.grad(lambda z: tnp.real(tnp.mean(z * tnp.conj(z))))(x)
    assert np.asarray(g).dtype == np.complex64
    np.testing.assert_allclose(np.asarray(g), 2 * np.conj(x) / x.size, rtol=1e-6)
