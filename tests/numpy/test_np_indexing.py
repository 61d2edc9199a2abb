"""NumPy indexing (x[idx]), x.at[idx] updates and the index functions of tracer.numpy
against NumPy: generated index expressions (hypothesis), eager and under jit with static
and traced indices; JAX's out-of-range rules; errors naming the shapes; grad and vmap
through indexing."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracer
import tracer.numpy as tnp
from tracer.errors import ConcretizationTypeError
from tracer.test_util import check_grads, check_jit, check_vmap

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ------------------------------ generated index expressions -----------------------------

@st.composite
def index_cases(draw):
    """(shape, index tuple) with every integer in range (NumPy's IndexError cases are
    tested separately)."""
    ndim = draw(st.integers(0, 3))
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=ndim, max_size=ndim)))
    adv_shape = tuple(draw(st.lists(st.integers(1, 3), min_size=0, max_size=2)))
    entries = []
    d = 0
    while d < ndim:
        n = shape[d]
        kinds = ["slice", "full"] + (["int", "array", "array"] if n else []) + ["bool"]
        if d + 1 < ndim:
            kinds.append("bool2")
        kind = draw(st.sampled_from(kinds))
        if kind == "full":
            entries.append(slice(None))
        elif kind == "slice":
            bound = st.one_of(st.none(), st.integers(-n - 2, n + 2))
            step = draw(st.sampled_from([None, 1, 2, 3, -1, -2]))
            entries.append(slice(draw(bound), draw(bound), step))
        elif kind == "int":
            entries.append(draw(st.integers(-n, n - 1)))
        elif kind == "array":
            k = draw(st.integers(0, len(adv_shape)))
            ashape = tuple(s if draw(st.booleans()) else 1 for s in adv_shape[k:])
            vals = draw(st.lists(st.integers(-n, n - 1), min_size=int(np.prod(ashape)),
                                 max_size=int(np.prod(ashape))))
            entries.append(np.array(vals, dtype=draw(st.sampled_from(
                [np.int64, np.int32, np.int8] if n <= 4 else [np.int64]))).reshape(ashape))
        elif kind == "bool":
            entries.append(np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)),
                                    dtype=bool))
        else:
            m = shape[d] * shape[d + 1]
            entries.append(np.array(draw(st.lists(st.booleans(), min_size=m, max_size=m)),
                                    dtype=bool).reshape(shape[d], shape[d + 1]))
            d += 1
        d += 1
    # New axes and scalar booleans anywhere.
    for _ in range(draw(st.integers(0, 2))):
        pos = draw(st.integers(0, len(entries)))
        entries.insert(pos, draw(st.sampled_from([None, None, True, False])))
    # Trailing full slices may be left out; a run of them may become an Ellipsis.
    form = draw(st.sampled_from(["full", "truncate", "ellipsis"]))
    if form == "truncate":
        while entries and isinstance(entries[-1], slice) and entries[-1] == slice(None):
            entries.pop()
    elif form == "ellipsis":
        pos = draw(st.integers(0, len(entries)))
        end = pos
        while end < len(entries) and isinstance(entries[end], slice) and \
                entries[end] == slice(None):
            end += 1
        entries[pos:end] = [Ellipsis]
    idx = tuple(entries)
    if len(idx) == 1 and draw(st.booleans()):
        idx = idx[0]  # a bare (non-tuple) index
    return shape, idx


def _numpy_result(a, idx):
    try:
        return a[idx], None
    except IndexError as e:  # e.g. index arrays that do not broadcast together
        return None, e


def _arrays_as_args(idx):
    """The integer index arrays of ``idx`` as function arguments (traced under jit)."""
    items = idx if isinstance(idx, tuple) else (idx,)
    arrs = [i for i in items if isinstance(i, np.ndarray) and i.dtype != bool]

    def rebuild(*vals):
        it = iter(vals)
        out = tuple(next(it) if isinstance(i, np.ndarray) and i.dtype != bool else i
                    for i in items)
        return out if isinstance(idx, tuple) else out[0]
    return arrs, rebuild


@SETTINGS
@given(index_cases())
def test_getitem_matches_numpy(case):
    shape, idx = case
    a = np.asarray(np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape) * 1.5 - 3)
    want, err = _numpy_result(a, idx)
    x = tnp.asarray(a)
    if err is not None:
        with pytest.raises(IndexError):
            x[idx]
        return
    got = x[idx]
    assert got.shape == want.shape, (idx, got.shape, want.shape)
    np.testing.assert_array_equal(np.asarray(got), want)
    got_jit = tracer.jit(lambda x: x[idx])(x)
    np.testing.assert_array_equal(np.asarray(got_jit), want)
    arrs, rebuild = _arrays_as_args(idx)
    if arrs:
        got_traced = tracer.jit(lambda x, *ar: x[rebuild(*ar)])(x, *arrs)
        np.testing.assert_array_equal(np.asarray(got_traced), want)


@SETTINGS
@given(index_cases(), st.sampled_from(["set", "add", "multiply", "min", "max", "get"]))
def test_at_update_matches_numpy_copy_and_update(case, op):
    shape, idx = case
    a = np.asarray(np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape) - 2.5)
    sel, err = _numpy_result(a, idx)
    if err is not None:
        return
    x = tnp.asarray(a)
    if op == "get":
        np.testing.assert_array_equal(np.asarray(x.at[idx].get()), sel)
        return
    # Values that depend only on the target position: repeated targets get equal values,
    # so the result does not depend on the order in which duplicates are applied.
    targets = np.arange(a.size).reshape(shape)[idx]
    vals = (targets % 7) * 0.5 - 1.25
    want = a.copy()
    ufunc = {"add": np.add, "multiply": np.multiply, "min": np.minimum, "max": np.maximum}
    if op == "set":
        want[idx] = vals
    else:
        ufunc[op].at(want, idx, vals)
    got = getattr(x.at[idx], op)(vals)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)
    arrs, rebuild = _arrays_as_args(idx)
    got_jit = tracer.jit(lambda x, v, *ar: getattr(x.at[rebuild(*ar)], op)(v))(x, vals, *arrs)
    np.testing.assert_allclose(np.asarray(got_jit), want, rtol=1e-12)


# ----------------------------------- placement rules ------------------------------------

@pytest.mark.parametrize("idx", [
    (0, slice(None), [0, 1]),                  # int + array, not adjacent: front
    ([0, 1], None, [0, 1]),                    # a new axis between arrays: front
    (slice(None), [0, 1], None),
    (None, [0, 1], [0, 1]),
    (slice(None), 0, [0, 1]),                  # adjacent: in place
    (Ellipsis, [[0], [2]], [1, 3]),
    ([[1]], slice(None), slice(1, 3)),
    (slice(None, None, -1), [2, 0], slice(4, 0, -2)),
    (True, [0, 1]),
    (False, Ellipsis, 0),
    (np.array(1), slice(None), np.array([[0, 1]])),
    ([], slice(None)),
])
def test_advanced_index_placement(idx):
    a = np.arange(60.).reshape(3, 4, 5)
    got = tnp.asarray(a)[idx]
    want = a[idx]
    assert got.shape == want.shape
    np.testing.assert_array_equal(np.asarray(got), want)


def test_getitem_paths_in_jaxpr():
    x = np.arange(12.).reshape(3, 4)
    assert "slice[" in str(tracer.make_jaxpr(lambda x: x[1:, ::2])(x))
    text = str(tracer.make_jaxpr(lambda x, i: x[i, 1:3])(x, 2))
    assert "dynamic_slice[" in text and "gather" not in text
    assert "gather[" in str(tracer.make_jaxpr(lambda x, i: x[i])(x, np.array([2, 0])))
    assert "rev[" in str(tracer.make_jaxpr(lambda x: x[::-1])(x))


# ---------------------------------- out-of-range rules ----------------------------------

def test_out_of_range_get_clamps_like_jax():
    x = tnp.arange(5.)
    assert float(x[10]) == 4.0 and float(x[-10]) == 0.0  # static ints clamp too
    np.testing.assert_array_equal(np.asarray(x[np.array([10, -10, -1])]), [4., 0., 4.])
    f = tracer.jit(lambda x, i: x[i])
    assert float(f(x, 7)) == 4.0 and float(f(x, -1)) == 4.0 and float(f(x, -6)) == 0.0
    y = tnp.arange(6.).reshape(2, 3)
    assert float(y[5, -9]) == 3.0


def test_at_modes():
    x = tnp.arange(5.)
    idx = np.array([7, -1, -6, 2])
    np.testing.assert_array_equal(np.asarray(x.at[idx].get(mode="fill", fill_value=-1.)),
                                  [-1., 4., -1., 2.])
    np.testing.assert_array_equal(np.asarray(x.at[idx].get(mode="fill")),
                                  [np.nan, 4., np.nan, 2.])
    np.testing.assert_array_equal(np.asarray(x.at[idx].get(mode="clip")), [4., 4., 0., 2.])
    np.testing.assert_array_equal(np.asarray(x.at[idx].get()), [4., 4., 0., 2.])
    np.testing.assert_array_equal(np.asarray(tnp.arange(5).at[9].get(mode="fill")),
                                  np.iinfo(np.int64).min)
    np.testing.assert_array_equal(np.asarray(x.at[idx].set(9.)), [0., 1., 9., 3., 9.])
    np.testing.assert_array_equal(np.asarray(x.at[idx].set(9., mode="drop")),
                                  [0., 1., 9., 3., 9.])
    np.testing.assert_array_equal(np.asarray(x.at[idx].add(1., mode="clip")),
                                  [1., 1., 3., 3., 6.])
    np.testing.assert_array_equal(np.asarray(x.at[idx].add(1., mode="promise_in_bounds")),
                                  [0., 1., 3., 3., 5.])
    np.testing.assert_array_equal(np.asarray(x.at[7].set(9.)), np.arange(5.))
    np.testing.assert_array_equal(np.asarray(x.at[-1].set(9., wrap_negative_indices=False)),
                                  np.arange(5.))
    np.testing.assert_array_equal(
        np.asarray(x.at[np.array([1, 1, 3])].add(1., unique_indices=False,
                                                 indices_are_sorted=True)),
        [0., 3., 2., 4., 4.])


def test_at_operations_jax_semantics():
    x = tnp.arange(5.)
    xi = tnp.arange(5)
    d = np.array([1, 1])
    np.testing.assert_array_equal(np.asarray(x.at[d].set(np.array([5., 6.]))),
                                  [0., 6., 2., 3., 4.])
    np.testing.assert_array_equal(np.asarray(x.at[d].subtract(np.array([5., 6.]))),
                                  [0., -10., 2., 3., 4.])
    np.testing.assert_array_equal(np.asarray(x.at[d].multiply(3.)), [0., 9., 2., 3., 4.])
    np.testing.assert_array_equal(np.asarray(x.at[d].mul(3.)), [0., 9., 2., 3., 4.])
    np.testing.assert_array_equal(np.asarray(x.at[d].divide(2.)), [0., .25, 2., 3., 4.])
    out = xi.at[1].divide(2)
    assert out.dtype == np.float64
    np.testing.assert_array_equal(np.asarray(out), [0., .5, 2., 3., 4.])
    out = xi.at[2].power(3)
    assert out.dtype == xi.dtype
    np.testing.assert_array_equal(np.asarray(out), [0, 1, 8, 3, 4])
    np.testing.assert_array_equal(np.asarray(x.at[d].min(np.array([-1., -3.]))),
                                  [0., -3., 2., 3., 4.])
    np.testing.assert_array_equal(np.asarray(x.at[d].max(np.array([7., 3.]))),
                                  [0., 7., 2., 3., 4.])
    np.testing.assert_array_equal(np.asarray(x.at[d].apply(lambda v: v * 2)),
                                  [0., 4., 2., 3., 4.])
    # values are cast to the array's dtype; leading size-1 dims may be dropped
    np.testing.assert_array_equal(np.asarray(xi.at[0].set(2.7)), [2, 1, 2, 3, 4])
    y = tnp.zeros((3, 4))
    np.testing.assert_array_equal(np.asarray(y.at[1].set(np.ones((1, 4))))[1], np.ones(4))
    assert y.at[True].set(2.).shape == (3, 4)
    np.testing.assert_array_equal(np.asarray(y.at[True].set(2.)), np.full((3, 4), 2.))
    np.testing.assert_array_equal(np.asarray(y.at[False].set(2.)), np.zeros((3, 4)))
    # weak types are kept
    assert tnp.asarray(1.0).at[()].set(2.0).dtype == np.float64


def test_traced_mask_updates_use_where():
    x = tnp.arange(5.)
    m = np.array([True, False, True, False, True])
    for op, want in [("set", [0., 1., 0., 3., 0.]), ("add", [1., 1., 3., 3., 5.]),
                     ("multiply", [0., 1., 4., 3., 8.]), ("min", [0., 1., 1., 3., 1.]),
                     ("max", [1., 1., 2., 3., 4.]), ("subtract", [-1., 1., 1., 3., 3.]),
                     ("divide", [0., 1., 1., 3., 2.])]:
        val = 0. if op == "set" else (2. if op in ("multiply", "divide") else 1.)
        f = tracer.jit(lambda x, m: getattr(x.at[m], op)(val))
        np.testing.assert_array_equal(np.asarray(f(x, m)), want, err_msg=op)
        np.testing.assert_array_equal(np.asarray(getattr(x.at[m], op)(val)), want, err_msg=op)
    f = tracer.jit(lambda x, m: x.at[m].apply(lambda v: v * 10))
    np.testing.assert_array_equal(np.asarray(f(x, m)), [0., 1., 20., 3., 40.])
    y = tnp.arange(6.).reshape(2, 3)
    f = tracer.jit(lambda y, m: y.at[m].set(-1.))
    np.testing.assert_array_equal(np.asarray(f(y, np.array([False, True]))),
                                  [[0., 1., 2.], [-1., -1., -1.]])


# ------------------------------------ errors --------------------------------------------

def test_indexing_errors():
    x = tnp.zeros((3, 4))
    with pytest.raises(IndexError, match=r"too many indices.*2-dimensional.*3 were"):
        x[0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., 0, ...]
    with pytest.raises(TypeError, match="integer or boolean type.*float64"):
        x[np.array([1.0])]
    with pytest.raises(TypeError, match="float"):
        x[1.0]
    with pytest.raises(TypeError, match="str"):
        x["a"]
    with pytest.raises(IndexError, match=r"boolean index.*\(4,\).*\(3,\)"):
        x[np.array([True, False, True, False])]
    with pytest.raises(IndexError, match=r"boolean index.*\(3, 3\)"):
        x[np.ones((3, 3), bool)]
    with pytest.raises(IndexError, match="shape mismatch"):
        x[[0, 1], [0, 1, 2]]
    with pytest.raises(IndexError, match="too many indices"):
        x[np.ones((3, 4, 1), bool)]
    with pytest.raises(ConcretizationTypeError, match="boolean index.*size="):
        tracer.jit(lambda x, m: x[m])(x, np.ones((3, 4), bool))
    with pytest.raises(ConcretizationTypeError, match="boolean index"):
        tracer.jit(lambda x, m: x.at[m].set(np.ones(12)))(x, np.ones((3, 4), bool))
    with pytest.raises(IndexError, match="static start/stop/step.*dynamic_slice_in_dim"):
        tracer.jit(lambda x, i: x[i:])(x, 1)
    with pytest.raises(IndexError, match="out of bounds for axis 0 with size 0"):
        tnp.zeros((0, 3))[np.array([0])]
    with pytest.raises(IndexError, match="size 0"):
        tnp.zeros((0, 3))[1]
    with pytest.raises(ValueError, match=r"\(2,\) cannot be broadcast.*\(4,\)"):
        x.at[0].set(np.ones(2))
    assert tnp.zeros((0, 3))[np.array([], int)].shape == (0, 3)
    np.testing.assert_array_equal(np.asarray(tnp.zeros((0, 3)).at[np.array([], int)].set(1.)),
                                  np.zeros((0, 3)))


def test_index_with_arrays_of_other_kinds():
    a = np.arange(12.).reshape(3, 4)
    x = tnp.asarray(a)
    np.testing.assert_array_equal(np.asarray(x[tnp.asarray([2, 0])]), a[[2, 0]])
    np.testing.assert_array_equal(np.asarray(x[np.int8(-1)]), a[-1])
    np.testing.assert_array_equal(np.asarray(x[tnp.asarray(1), 1:]), a[1, 1:])
    np.testing.assert_array_equal(np.asarray(x[tnp.asarray([True, False, True])]),
                                  a[[True, False, True]])
    np.testing.assert_array_equal(np.asarray(x[np.array([1, 2], np.uint8)]), a[[1, 2]])
    np.testing.assert_array_equal(np.asarray(x[[[0, 1], [1, 2]]]), a[[[0, 1], [1, 2]]])
    np.testing.assert_array_equal(np.asarray(x[tnp.asarray(1):tnp.asarray(3)]), a[1:3])


# -------------------------------- grad / vmap / jit -------------------------------------

def test_grad_through_indexing(rng):
    a = rng.standard_normal((4, 5))
    check_grads(lambda x: x[np.array([0, 2, 2]), 1:4:2], (a,), order=2)
    check_grads(lambda x: x[::-1, None, [4, -1, 0]], (a,), order=2)
    check_grads(lambda x: x[a > 0], (a,), order=2)
    check_grads(lambda x: x.at[np.array([1, 1]), 2].set(x[0, 0] * 3.), (a,), order=2)
    check_grads(lambda x, v: x.at[:, np.array([0, 0, 3])].add(v), (a, rng.standard_normal(3)),
                order=2)
    check_grads(lambda x: x.at[np.array([3, 3, 1])].multiply(x[0]), (a,), order=1)
    g = tracer.grad(lambda x: x[np.array([1, 1, 3])].sum())(np.zeros(4))
    np.testing.assert_array_equal(np.asarray(g), [0., 2., 0., 1.])
    g = tracer.grad(lambda x, i: x[i] * 2.)(np.arange(3.), 1)
    np.testing.assert_array_equal(np.asarray(g), [0., 2., 0.])


def test_vmap_through_indexing(rng):
    a = rng.standard_normal((3, 4, 5))
    idx = np.array([[0, 3], [1, 1], [3, 2]])
    check_vmap(lambda x, i: x[i, 1:], (a, idx))
    check_vmap(lambda x, i: tnp.asarray(x)[:, i], (a[0], idx), in_axes=(None, 0))
    check_vmap(lambda x, i: x[i], (a, np.array([0, 3, -1])))
    check_vmap(lambda x, i, v: x.at[i].add(v), (a, idx, rng.standard_normal((3, 2, 5))))
    check_vmap(lambda x, i: x.at[i, 0].set(-1.), (a, idx))
    check_vmap(lambda x: x[::2, np.array([1, 0])], (a,), in_axes=1)


def test_jit_matches_eager(rng):
    a = tnp.asarray(rng.standard_normal((3, 4)))
    check_jit(lambda x, i: x[i, ::-1], (a, np.array([2, 0])))
    check_jit(lambda x, i: x.at[i].max(0.), (a, np.array([2, 2])))
    check_jit(lambda x, i: x[i], (a, np.int64(-1)))


# ------------------------------------ index functions -----------------------------------

@pytest.mark.parametrize("mode", [None, "fill", "clip", "wrap"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_take(mode, axis, rng):
    a = rng.standard_normal((3, 4))
    idx = np.array([[0, 5], [-1, -7]])
    got = tnp.take(a, idx, axis=axis, mode=mode, fill_value=-9.)
    n = a.size if axis is None else a.shape[axis]
    np_mode = {"clip": "clip", "wrap": "wrap"}.get(mode)
    if np_mode:
        want = np.take(a, idx, axis=axis, mode=np_mode)
    else:
        wrapped = np.where(idx < 0, idx + n, idx)
        want = np.take(a, np.clip(wrapped, 0, n - 1), axis=axis)
        bad = (wrapped < 0) | (wrapped >= n)
        mask = np.expand_dims(bad, tuple(range(idx.ndim, want.ndim))) if axis in (None, 0) \
            else bad
        if axis in (1, -1):
            mask = bad[None]
        want = np.where(mask, -9., want)
    np.testing.assert_array_equal(np.asarray(got), want)


def test_take_raise_and_edge_cases():
    a = np.arange(5.)
    np.testing.assert_array_equal(np.asarray(tnp.take(a, [1, -1], mode="raise")), [1., 4.])
    with pytest.raises(IndexError, match="out of bounds"):
        tnp.take(a, [5], mode="raise")
    with pytest.raises(NotImplementedError, match="mode='raise'"):
        tracer.jit(lambda a, i: tnp.take(a, i, mode="raise"))(a, np.array([1]))
    assert tnp.take(np.zeros((0, 2)), np.zeros(0, int), axis=0).shape == (0, 2)
    with pytest.raises(IndexError, match="empty axis"):
        tnp.take(np.zeros((0, 2)), [0], axis=0)
    with pytest.raises(TypeError, match="integer dtype"):
        tnp.take(a, np.array([1.0]))
    check_grads(lambda x: tnp.take(x, np.array([[0, 1], [1, 3]]), axis=0), (a,), order=2)


@pytest.mark.parametrize("arr_shape,idx_shape,axis", [
    ((3, 4), (3, 2), 1), ((3, 4), (1, 6), 1), ((3, 1, 5), (3, 4, 2), 2),
    ((2, 3, 4), (2, 3, 4), 0), ((5,), (7,), None), ((3, 4), (5, 4), 0), ((2, 3), (2, 0), 1)])
def test_take_along_axis_and_put_along_axis(arr_shape, idx_shape, axis, rng):
    a = rng.standard_normal(arr_shape)
    n = a.size if axis is None else a.shape[axis]
    idx = rng.integers(-n, n, idx_shape)
    np.testing.assert_array_equal(np.asarray(tnp.take_along_axis(a, idx, axis)),
                                  np.take_along_axis(a, idx, axis))
    check_grads(lambda x: tnp.take_along_axis(x, idx, axis), (a,), order=1)
    if axis is not None and all(i == s or i == 1 for d, (i, s) in
                                enumerate(zip(idx_shape, arr_shape)) if d != axis % a.ndim):
        if all(i == s for d, (i, s) in enumerate(zip(idx_shape, arr_shape))
               if d != axis % a.ndim):
            vals = np.arange(np.prod(idx_shape), dtype=float).reshape(idx_shape)
            # order-independent values for repeated targets
            tgt = np.take_along_axis(np.arange(a.size).reshape(a.shape), idx, axis)
            vals = tgt * 0.5
            want = a.copy()
            np.put_along_axis(want, idx, vals, axis)
            got = tnp.put_along_axis(a, idx, vals, axis, inplace=False)
            np.testing.assert_array_equal(np.asarray(got), want)


def test_take_along_axis_modes_and_errors():
    x = np.arange(5.)
    np.testing.assert_array_equal(np.asarray(tnp.take_along_axis(x, np.array([7, -1]), 0)),
                                  [np.nan, 4.])
    np.testing.assert_array_equal(
        np.asarray(tnp.take_along_axis(x, np.array([7, -1]), 0, mode="clip")), [4., 4.])
    np.testing.assert_array_equal(
        np.asarray(tnp.take_along_axis(x, np.array([7]), 0, fill_value=0.)), [0.])
    with pytest.raises(ValueError, match="same number of dimensions"):
        tnp.take_along_axis(np.zeros((2, 3)), np.zeros(3, int), 1)
    with pytest.raises(ValueError, match="do not broadcast"):
        tnp.take_along_axis(np.zeros((2, 3)), np.zeros((3, 3), int), 1)
    with pytest.raises(ValueError, match="inplace=False"):
        tnp.put_along_axis(x, np.array([1]), 1., 0)
    np.testing.assert_array_equal(
        np.asarray(tnp.put_along_axis(x, np.array([1, 9]), np.array([10., 20.]), axis=0,
                                      inplace=False)), [0., 10., 2., 3., 4.])
    np.testing.assert_array_equal(
        np.asarray(tnp.put_along_axis(x, np.array([1, 9]), 7., axis=0, inplace=False,
                                      mode="clip")), [0., 7., 2., 3., 7.])
    check_vmap(lambda a, i: tnp.take_along_axis(a, i, 0),
               (np.arange(12.).reshape(3, 4), np.array([[3, 0], [1, 1], [2, -1]])))


def test_nonzero_family(rng):
    a = (rng.random((3, 4)) > 0.5) * rng.integers(1, 5, (3, 4))
    for got, want in zip(tnp.nonzero(a), np.nonzero(a)):
        assert got.dtype == np.int64
        np.testing.assert_array_equal(np.asarray(got), want)
    np.testing.assert_array_equal(np.asarray(tnp.argwhere(a)), np.argwhere(a))
    np.testing.assert_array_equal(np.asarray(tnp.flatnonzero(a)), np.flatnonzero(a))
    for w, v in zip(tnp.where(a), np.where(a)):
        np.testing.assert_array_equal(np.asarray(w), v)
    k = int(np.count_nonzero(a))
    for size, fill in [(k, None), (k + 3, -1), (max(k - 2, 0), None), (k + 1, (7, 8)), (0, 3)]:
        f = lambda a: tnp.nonzero(a, size=size, fill_value=fill)  # noqa: E731
        want = [np.asarray(w) for w in np.nonzero(a)]
        fills = fill if isinstance(fill, tuple) else (fill or 0,) * 2
        want = [np.concatenate([w[:size], np.full(max(size - len(w), 0), fv)])
                for w, fv in zip(want, fills)]
        for got in (f(a), tracer.jit(f)(a)):
            for g, w in zip(got, want):
                np.testing.assert_array_equal(np.asarray(g), w)
    got = tracer.jit(lambda a: tnp.argwhere(a, size=k + 1, fill_value=-1))(a)
    np.testing.assert_array_equal(np.asarray(got),
                                  np.concatenate([np.argwhere(a), [[-1, -1]]]))
    got = tracer.jit(lambda a: tnp.flatnonzero(a, size=2))(a)
    np.testing.assert_array_equal(np.asarray(got), np.flatnonzero(a)[:2])
    check_vmap(lambda a: tnp.nonzero(a, size=4, fill_value=-1)[0], (a,))
    assert tnp.argwhere(np.array(True)).shape == (1, 0)
    assert tnp.argwhere(np.array(0)).shape == (0, 0)
    with pytest.raises(ConcretizationTypeError, match="size="):
        tracer.jit(tnp.nonzero)(a)
    with pytest.raises(ConcretizationTypeError, match="size="):
        tracer.jit(lambda a: tnp.where(a > 1))(a)
    with pytest.raises(ValueError, match="0-d"):
        tnp.nonzero(np.array(1))
    assert tnp.nonzero(np.zeros((2, 0)), size=3)[1].shape == (3,)
    assert tracer.jit(lambda a: tnp.nonzero(a, size=2))(np.zeros((0,)))[0].shape == (2,)


def test_compress_extract_choose_select(rng):
    a = rng.standard_normal((3, 4))
    cond = np.array([True, False, True])
    np.testing.assert_array_equal(np.asarray(tnp.compress(cond, a, axis=0)),
                                  np.compress(cond, a, axis=0))
    np.testing.assert_array_equal(np.asarray(tnp.compress([0, 1], a, axis=1)),
                                  np.compress([0, 1], a, axis=1))
    np.testing.assert_array_equal(np.asarray(tnp.compress(cond, a)), np.compress(cond, a))
    got = tracer.jit(lambda c, a: tnp.compress(c, a, axis=1, size=3, fill_value=-5.))(
        np.array([True, False, False, True]), a)
    np.testing.assert_array_equal(np.asarray(got),
                                  np.concatenate([a[:, [0, 3]], np.full((3, 1), -5.)], 1))
    with pytest.raises(IndexError, match="out of"):
        tnp.compress([0, 0, 0, 1], a, axis=0)
    m = a > 0
    np.testing.assert_array_equal(np.asarray(tnp.extract(m, a)), np.extract(m, a))
    got = tracer.jit(lambda m, a: tnp.extract(m, a, size=12, fill_value=0.))(m, a)
    np.testing.assert_array_equal(np.asarray(got)[:m.sum()], np.extract(m, a))
    np.testing.assert_array_equal(np.asarray(got)[m.sum():], 0.)

    choices = [np.arange(3), 10 + np.arange(3), 20 + np.arange(3)]
    idx = np.array([0, 1, 2])
    np.testing.assert_array_equal(np.asarray(tnp.choose(idx, choices)), np.choose(idx, choices))
    for mode in ("wrap", "clip"):
        bad = np.array([3, -1, 5])
        np.testing.assert_array_equal(np.asarray(tnp.choose(bad, choices, mode=mode)),
                                      np.choose(bad, choices, mode=mode))
        np.testing.assert_array_equal(
            np.asarray(tracer.jit(lambda i: tnp.choose(i, choices, mode=mode))(bad)),
            np.choose(bad, choices, mode=mode))
    with pytest.raises(IndexError, match=r"\[0, 3\)"):
        tnp.choose(np.array([3]), choices)
    with pytest.raises(ConcretizationTypeError, match="mode='wrap'"):
        tracer.jit(lambda i: tnp.choose(i, choices))(idx)
    np.testing.assert_array_equal(
        np.asarray(tnp.choose(np.array([[0], [1]]), [np.zeros(3), np.ones((2, 3))])),
        np.choose(np.array([[0], [1]]), [np.zeros(3), np.ones((2, 3))]))
    check_grads(lambda x, y: tnp.choose(np.array([0, 1, 1]), [x, y]),
                (rng.standard_normal(3), rng.standard_normal(3)), order=1)

    x = np.arange(6.)
    conds, chs = [x < 2, x > 3, x < 5], [x, x ** 2, -x]
    np.testing.assert_array_equal(np.asarray(tnp.select(conds, chs, 7.)),
                                  np.select(conds, chs, 7.))
    np.testing.assert_array_equal(np.asarray(tnp.select([x > 2], [1])), np.select([x > 2], [1]))
    with pytest.raises(TypeError, match="boolean"):
        tnp.select([x], [x])
    with pytest.raises(ValueError, match="same length"):
        tnp.select([x > 1], [x, x])


def test_put_and_place():
    x = np.arange(6.).reshape(2, 3)
    got = tnp.put(x, [0, 4, 9], [9., 8.], inplace=False)
    np.testing.assert_array_equal(np.asarray(got), [[9., 1., 2.], [3., 8., 5.]])
    for mode in ("clip", "wrap"):
        want = x.copy()
        np.put(want, [0, 4, 9, -8], [9., 8.], mode=mode)
        got = tnp.put(x, [0, 4, 9, -8], [9., 8.], mode=mode, inplace=False)
        np.testing.assert_array_equal(np.asarray(got), want)
    want = x.copy()
    np.place(want, x > 2, [10., 20.])
    np.testing.assert_array_equal(np.asarray(tnp.place(x, x > 2, [10., 20.], inplace=False)),
                                  want)
    with pytest.raises(ValueError, match="inplace=False"):
        tnp.put(x, [0], 1.)
    with pytest.raises(ConcretizationTypeError, match="place"):
        tracer.jit(lambda x: tnp.place(x, x > 2, [1.], inplace=False))(x)


def test_index_functions_keep_jit_and_eager_equal(rng):
    a = rng.standard_normal((4, 3))
    check_jit(lambda a, i: tnp.take(a, i, axis=1), (a, np.array([2, -1, 7])))
    check_jit(lambda a, i: tnp.take_along_axis(a, i, 0), (a, np.array([[3, 0, 1]])))
    check_jit(lambda a: tnp.nonzero(a > 0, size=5, fill_value=-1), (a,))
    check_jit(lambda a: tnp.select([a > 0.5, a < -0.5], [a, -a]), (a,))
