"""Sorting, searching, quantiles, unique and set functions, histograms of tracer.numpy
against NumPy; the size=/fill_value= forms under jit against JAX's conventions;
ConcretizationTypeError without them; grad / vmap samples."""
from __future__ import annotations

import numpy as np
import pytest

import tracer
import tracer.numpy as tnp
from tracer.errors import ConcretizationTypeError
from tracer.test_util import check_grads, check_jit, check_vmap

from np_util import BOOL, C128, F32, F64, I8, I32, U8, assert_matches, rand

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _with_specials(rng, shape, dt):
    x = rand(rng, shape, dt, (-3, 3))
    if np.issubdtype(dt, np.floating):
        flat = x.reshape(-1)
        flat[::5] = np.nan
        flat[1::7] = -0.0
        flat[2::9] = np.inf
    return x


@pytest.mark.parametrize("dt", [F64, F32, I8, U8, BOOL, C128])
def test_sort_argsort(dt, rng):
    x = _with_specials(rng, (3, 8), dt)
    for axis in (0, 1, -1, None):
        assert_matches(tnp.sort(x, axis=axis), np.sort(x, axis=axis))
        assert_matches(tnp.argsort(x, axis=axis), np.argsort(x, axis=axis, kind="stable"))
    if dt != C128:
        assert_matches(tnp.sort(x, axis=1, descending=True), np.sort(x, axis=1)[:, ::-1])
        ties = np.array([1, 0, 1, 0, 2])
        assert_matches(tnp.argsort(ties, descending=True), np.array([4, 0, 2, 1, 3]))


def test_lexsort_partition_sort_complex(rng):
    a = rng.integers(0, 3, 10)
    b = rng.integers(0, 3, 10)
    assert_matches(tnp.lexsort((a, b)), np.lexsort((a, b)))
    assert_matches(tnp.lexsort(np.stack([a, b])), np.lexsort(np.stack([a, b])))
    x = rng.standard_normal((2, 7))
    for k in (0, 3, -1):
        p = np.asarray(tnp.partition(x, k, axis=1))
        np.testing.assert_array_equal(p[:, k], np.partition(x, k, axis=1)[:, k])
        assert np.all(p[:, :k % 7] <= p[:, k % 7:k % 7 + 1])
        idx = np.asarray(tnp.argpartition(x, k, axis=1))
        np.testing.assert_array_equal(np.take_along_axis(x, idx, 1)[:, k],
                                      np.partition(x, k, axis=1)[:, k])
    z = np.array([1 + 2j, 1 - 1j, -3 + 0j, 1 + 0j])
    assert_matches(tnp.sort_complex(z), np.sort_complex(z))
    assert_matches(tnp.sort_complex(np.array([3, 1, 2])), np.sort_complex(np.array([3, 1, 2])))
    with pytest.raises(ValueError, match="kth"):
        tnp.partition(x, 9, axis=1)


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("method", ["scan", "compare_all"])
def test_searchsorted(side, method, rng):
    a = np.sort(np.concatenate([rng.integers(0, 6, 9).astype(float), [np.nan]]))
    v = np.array([[-1.0, 0.0, 2.5], [3.0, 6.0, np.nan]])
    assert_matches(tnp.searchsorted(a, v, side=side, method=method),
                   np.searchsorted(a, v, side=side))
    unsorted = rng.permutation(a)
    sorter = np.argsort(unsorted)
    assert_matches(tnp.searchsorted(unsorted, v, side=side, sorter=sorter),
                   np.searchsorted(unsorted, v, side=side, sorter=sorter))
    assert_matches(tnp.searchsorted(np.array([], float), v), np.zeros((2, 3), np.int64))


def test_digitize(rng):
    x = np.array([0.2, 6.4, 3.0, 1.6, 10.0, -1.0, 1.0])
    for bins in (np.array([0.0, 1.0, 2.5, 4.0, 10.0]), np.array([10.0, 4.0, 2.5, 1.0, 0.0])):
        for right in (False, True):
            assert_matches(tnp.digitize(x, bins, right), np.digitize(x, bins, right))


METHODS = ["linear", "lower", "higher", "midpoint", "nearest", "inverted_cdf",
           "averaged_inverted_cdf", "closest_observation", "interpolated_inverted_cdf",
           "hazen", "weibull", "median_unbiased", "normal_unbiased"]


@pytest.mark.parametrize("method", METHODS)
def test_quantile_methods(method, rng):
    x = rng.standard_normal((3, 7))
    q = np.array([0.0, 0.1, 0.5, 0.77, 1.0])
    for axis in (None, 1, 0):
        assert_matches(tnp.quantile(x, q, axis=axis, method=method),
                       np.quantile(x, q, axis=axis, method=method), err=f"{method} {axis}")
    assert_matches(tnp.percentile(x, 30.0, axis=1, method=method, keepdims=True),
                   np.percentile(x, 30.0, axis=1, method=method, keepdims=True))
    xi = rng.integers(0, 9, 11)
    assert_matches(tnp.quantile(xi, np.array([0.3, 0.5]), method=method),
                   np.quantile(xi, [0.3, 0.5], method=method))


def test_medians_and_nan_quantiles(rng):
    x = rng.standard_normal((4, 5))
    x[1, 2] = np.nan
    x[3, :] = np.nan
    for axis in (None, 0, 1, (0, 1)):
        for keepdims in (False, True):
            assert_matches(tnp.median(x, axis=axis, keepdims=keepdims),
                           np.median(x, axis=axis, keepdims=keepdims))
            assert_matches(tnp.nanmedian(x, axis=axis, keepdims=keepdims),
                           np.nanmedian(x, axis=axis, keepdims=keepdims))
    q = np.array([0.25, 0.9])
    assert_matches(tnp.nanquantile(x, q, axis=1), np.nanquantile(x, q, axis=1))
    assert_matches(tnp.nanpercentile(x, 40.0, axis=0, method="nearest"),
                   np.nanpercentile(x, 40.0, axis=0, method="nearest"))
    assert_matches(tnp.median(np.zeros((0,))), np.array(np.nan))
    with pytest.raises(ValueError, match="range"):
        tnp.quantile(x, 1.5)
    with pytest.raises(ValueError, match="method"):
        tnp.quantile(x, 0.5, method="bogus")


def test_quantile_grads_vmap_jit(rng):
    x = rng.standard_normal(7)
    check_grads(lambda x: tnp.median(x), (x,), order=1)
    check_grads(lambda x: tnp.quantile(x, np.array([0.2, 0.7])), (x,), order=1)
    check_grads(lambda x: tnp.sort(x * x), (x,), order=2)
    xs = rng.standard_normal((3, 6))
    check_vmap(lambda x: tnp.percentile(x, 30.0), (xs,))
    check_vmap(lambda x: tnp.argsort(x), (xs,), in_axes=1)
    check_jit(lambda x: (tnp.median(x), tnp.sort(x), tnp.searchsorted(np.arange(3.0), x)),
              (x,))


def test_unique_eager(rng):
    x = np.array([[3.0, 1.0, np.nan], [1.0, np.nan, 2.0]])
    got = tnp.unique(x, return_index=True, return_inverse=True, return_counts=True)
    want = np.unique(x, return_index=True, return_inverse=True, return_counts=True)
    for g, w in zip(got, want):
        assert_matches(g, w)
    got = tnp.unique(x, equal_nan=False, return_counts=True)
    want = np.unique(x, equal_nan=False, return_counts=True)
    for g, w in zip(got, want):
        assert_matches(g, w)
    a = rng.integers(0, 3, (5, 2))
    for g, w in zip(tnp.unique(a, axis=0, return_counts=True),
                    np.unique(a, axis=0, return_counts=True)):
        assert_matches(g, w)
    ua = tnp.unique_all(x)
    wa = np.unique_all(x)
    assert_matches(ua.values, wa.values)
    assert_matches(ua.counts, wa.counts)
    assert_matches(ua.inverse_indices, wa.inverse_indices)
    assert_matches(tnp.unique_values(np.array([2, 1, 2])), np.array([1, 2]))
    assert_matches(tnp.unique_counts(np.array([2, 1, 2])).counts, np.array([1, 2]))
    assert_matches(tnp.unique_inverse(np.array([2, 1, 2])).inverse_indices, np.array([1, 0, 1]))


def test_unique_size_under_jit():
    x = np.array([3.0, 1.0, 3.0, 2.0, np.nan, 1.0])
    f = tracer.jit(lambda x: tnp.unique(x, size=7, return_index=True, return_inverse=True,
                                        return_counts=True))
    vals, idx, inv, cnt = f(x)
    # JAX's conventions: values filled with the smallest value, indices with the first
    # index, counts with 0.
    assert_matches(vals, np.array([1.0, 2.0, 3.0, np.nan, 1.0, 1.0, 1.0]))
    assert_matches(idx, np.array([1, 3, 0, 4, 1, 1, 1]))
    assert_matches(inv, np.array([2, 0, 2, 1, 3, 0]))
    assert_matches(cnt, np.array([2, 1, 2, 1, 0, 0, 0]))
    eager = tnp.unique(x, size=7, return_index=True, return_inverse=True, return_counts=True)
    for g, e in zip(eager, (vals, idx, inv, cnt)):
        assert_matches(g, e)
    v3, c3 = tracer.jit(lambda x: tnp.unique(x, size=3, fill_value=-5.0,
                                             return_counts=True))(x)
    assert_matches(v3, np.array([1.0, 2.0, 3.0]))
    assert_matches(c3, np.array([2, 1, 2]))
    with pytest.raises(ConcretizationTypeError, match="size="):
        tracer.jit(lambda x: tnp.unique(x))(x)
    check_vmap(lambda r: tnp.unique(r, size=4, fill_value=0.0),
               (np.array([[1.0, 1.0, 2.0, 5.0], [3.0, 3.0, 3.0, 3.0]]),))


SETS = ["union1d", "intersect1d", "setdiff1d", "setxor1d"]


@pytest.mark.parametrize("name", SETS)
def test_set_functions(name, rng):
    a = rng.integers(0, 8, 9)
    b = rng.integers(3, 12, 6)
    want = getattr(np, name)(a, b)
    assert_matches(getattr(tnp, name)(a, b), want)
    size = want.shape[0] + 2
    # The traced (fixed-size) composition: under vmap (no compile) for every function,
    # under jit for one; both against the eager NumPy path with the same size.
    f = lambda a, b: getattr(tnp, name)(a, b, size=size)  # noqa: E731
    got_traced = (tracer.jit(f)(a, b) if name == "setxor1d" else
                  tracer.vmap(f, in_axes=(0, None))(a[None], b)[0])
    got_eager = getattr(tnp, name)(a, b, size=size)
    assert_matches(got_traced, got_eager)
    np.testing.assert_array_equal(np.asarray(got_traced)[:want.shape[0]], want)
    cut = tracer.vmap(lambda a, b: getattr(tnp, name)(a, b, size=1, fill_value=-1),
                      in_axes=(0, None))(a[None], b)[0]
    np.testing.assert_array_equal(np.asarray(cut), want[:1] if want.size else [-1])
    with pytest.raises(ConcretizationTypeError, match="size="):
        tracer.jit(lambda a, b: getattr(tnp, name)(a, b))(a, b)


def test_intersect1d_indices():
    a, b = np.array([1, 2, 3, 4, 2]), np.array([2, 9, 4])
    want = np.intersect1d(a, b, return_indices=True)
    for g, w in zip(tnp.intersect1d(a, b, return_indices=True), want):
        assert_matches(g, w)
    got = tracer.vmap(lambda a, b: tnp.intersect1d(a, b, return_indices=True, size=3),
                      in_axes=(0, None))(a[None], b)
    for g, w in zip(got, ([2, 4, 2], [1, 3, 5], [0, 2, 3])):
        np.testing.assert_array_equal(np.asarray(g)[0], w)


def test_isin(rng):
    e = rng.integers(0, 10, (3, 4))
    t = rng.integers(0, 10, 5)
    for invert in (False, True):
        assert_matches(tnp.isin(e, t, invert=invert), np.isin(e, t, invert=invert))
    assert_matches(tnp.isin(np.array([np.nan, 1.0]), np.array([np.nan, 1.0])),
                   np.isin(np.array([np.nan, 1.0]), np.array([np.nan, 1.0])))
    check_jit(lambda e, t: tnp.isin(e, t), (e, t))


def test_bincount(rng):
    x = rng.integers(0, 6, 20)
    w = rng.standard_normal(20)
    assert_matches(tnp.bincount(x), np.bincount(x))
    assert_matches(tnp.bincount(x, w, minlength=9), np.bincount(x, w, minlength=9))
    assert_matches(tnp.bincount(x.astype(np.uint8), minlength=2), np.bincount(x, minlength=2))
    # Under jit: length=; JAX's rules (negative -> bin 0, too large dropped).
    got = tracer.jit(lambda x: tnp.bincount(x, length=4))(np.array([-1, 0, 2, 5]))
    np.testing.assert_array_equal(np.asarray(got), [2, 0, 1, 0])
    with pytest.raises(ConcretizationTypeError, match="length="):
        tracer.jit(lambda x: tnp.bincount(x))(x)
    with pytest.raises(ValueError, match="non-negative"):
        tnp.bincount(np.array([-1, 2]))
    check_grads(lambda w: tnp.bincount(x, w, length=7), (w,), order=1)


def test_histograms(rng):
    a = rng.standard_normal(50)
    y = rng.standard_normal(50)
    w = rng.uniform(0.5, 2.0, 50)
    for bins in (5, np.array([-2.0, -1.0, 0.0, 0.5, 3.0])):
        for kw in ({}, {"range": (-1.0, 1.0)}, {"density": True}, {"weights": w}):
            c1, e1 = np.histogram(a, bins, **kw)
            c2, e2 = tnp.histogram(a, bins, **kw)
            assert_matches(c2, c1, check_dtype=False)
            assert_matches(e2, e1)
    assert_matches(tnp.histogram_bin_edges(a, 4), np.histogram_bin_edges(a, 4))
    c1, ex1, ey1 = np.histogram2d(a, y, bins=(3, 4), density=True)
    c2, ex2, ey2 = tnp.histogram2d(a, y, bins=(3, 4), density=True)
    assert_matches(c2, c1)
    assert_matches(ex2, ex1)
    assert_matches(ey2, ey1)
    s = np.stack([a, y, a * y], 1)
    c1, e1 = np.histogramdd(s, bins=(2, 3, 2), weights=w)
    c2, e2 = tnp.histogramdd(s, bins=(2, 3, 2), weights=w)
    assert_matches(c2, c1)
    check_jit(lambda a: tnp.histogram(a, 6)[0], (a,))
    with pytest.raises(NotImplementedError, match="estimator"):
        tnp.histogram(a, "auto")


def test_data_dependent_functions_under_eager_grad():
    # Under eager grad the values are known: the output size comes from them and the
    # result stays differentiable (NumPy's path would cut the gradient).
    x = np.array([3.0, 1.0, 3.0, 2.0])
    np.testing.assert_array_equal(tracer.grad(lambda x: tnp.sum(tnp.unique(x) ** 2))(x),
                                  [6.0, 2.0, 0.0, 4.0])
    np.testing.assert_array_equal(
        tracer.grad(lambda x: tnp.sum(tnp.setdiff1d(x, np.array([2.0])) ** 2))(x),
        [6.0, 2.0, 0.0, 0.0])
    np.testing.assert_array_equal(
        tracer.grad(lambda x: tnp.sum(tnp.intersect1d(x, np.array([3.0, 2.0]))))(x),
        [1.0, 0.0, 0.0, 1.0])
    g = tracer.grad(lambda x: tnp.sum(tnp.unique(tnp.reshape(x, (2, 2)), axis=0) ** 2))(x)
    np.testing.assert_array_equal(g, [6.0, 2.0, 6.0, 4.0])
