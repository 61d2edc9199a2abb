"""``lax.reduce`` with a user computation: dispatch to the dedicated reducers, the
``reduce`` primitive's jaxpr, gradients through init values, and its errors. (Values,
grads and vmap over shapes and dtypes come from the op records ``reduce_*``.)"""
from __future__ import annotations

import numpy as np
import pytest

import tracer
import lax
from tracer.core import Array
from tracer.test_util import check_grads


def _prims(f, *args):
    return [e.primitive.name for e in tracer.make_jaxpr(f)(*args).jaxpr.eqns]


@pytest.mark.parametrize("comp,init,prim", [
    (lax.add, 0.0, "reduce_sum"), (lax.mul, 1.0, "reduce_prod"),
    (lax.max, -np.inf, "reduce_max"), (lax.min, np.inf, "reduce_min"),
    (lambda a, b: lax.add(b, a), 0.0, "reduce_sum"),
])
def test_monoids_become_dedicated_reducers(comp, init, prim):
    x = np.arange(6.0).reshape(2, 3)
    assert _prims(lambda x: lax.reduce(x, init, comp, (1,)), x) == [prim]


@pytest.mark.parametrize("comp,init,prim", [
    (lax.bitwise_and, True, "reduce_and"), (lax.bitwise_or, False, "reduce_or"),
    (lax.max, False, "reduce_max"),
])
def test_bool_monoids(comp, init, prim):
    x = np.array([[True, False], [True, True]])
    assert _prims(lambda x: lax.reduce(x, init, comp, (0,)), x) == [prim]
    np.testing.assert_array_equal(np.asarray(lax.reduce(x, init, comp, (0,))),
                                  {"reduce_and": x.all(0), "reduce_or": x.any(0),
                                   "reduce_max": x.any(0)}[prim])


def test_integer_and_identity_is_all_ones():
    x = np.array([[6, 3], [5, 7]], np.int32)
    assert _prims(lambda x: lax.reduce(x, np.int32(-1), lax.bitwise_and, (0,)), x) == \
        ["reduce_and"]
    np.testing.assert_array_equal(np.asarray(lax.reduce(x, np.int32(-1), lax.bitwise_and, (0,))),
                                  [4, 3])


def test_non_identity_init_is_not_a_monoid():
    x = np.arange(6.0).reshape(2, 3)
    assert _prims(lambda x: lax.reduce(x, 1.0, lax.add, (1,)), x) == ["reduce"]
    # The init value enters once, at the root of the tree (the spec allows more often;
    # this implementation documents exactly once).
    np.testing.assert_array_equal(np.asarray(lax.reduce(x, 1.0, lax.add, (1,))), x.sum(1) + 1)
    np.testing.assert_array_equal(np.asarray(lax.reduce(np.ones((2, 5)), 1.0, lax.add, (1,))),
                                  [6.0, 6.0])


def test_reduce_jaxpr_holds_the_computation():
    x = np.ones((2, 3), np.float32)
    text = str(tracer.make_jaxpr(
        lambda x: lax.reduce(x, np.float32(0), lambda a, b: lax.add(a, lax.abs(b)), (0, 1)))(x))
    assert "reduce[" in text and "computation={ lambda ; " in text
    assert "dimensions=(0, 1)" in text and "abs" in text


def test_variadic_results_keep_the_structure():
    x = np.array([[1.0, 5.0, 3.0], [4.0, 2.0, 6.0]])
    i = np.tile(np.arange(3, dtype=np.int32), (2, 1))

    def comp(a, b):
        pick = lax.gt(b["v"], a["v"])
        return {"v": lax.select(pick, b["v"], a["v"]), "i": lax.select(pick, b["i"], a["i"])}

    out = lax.reduce({"v": x, "i": i}, {"v": -np.inf, "i": np.int32(0)}, comp, (1,))
    assert set(out) == {"v", "i"}
    np.testing.assert_array_equal(np.asarray(out["v"]), [5.0, 6.0])
    np.testing.assert_array_equal(np.asarray(out["i"]), [1, 2])
    assert out["i"].dtype == np.int32


def test_empty_reduction_gives_the_init_value():
    out = lax.reduce(np.zeros((0, 3)), 7.0, lambda a, b: lax.max(a, lax.abs(b)), (0,))
    np.testing.assert_array_equal(np.asarray(out), [7.0, 7.0, 7.0])


def test_weak_types():
    weak = Array(np.arange(3.0), weak_type=True)
    assert lax.reduce(weak, 0.0, lax.add, (0,)).weak_type
    assert not lax.reduce(np.arange(3.0), 0.0, lax.add, (0,)).weak_type
    hyp = lambda a, b: lax.sqrt(lax.add(lax.mul(a, a), lax.mul(b, b)))
    assert lax.reduce(weak, 0.0, hyp, (0,)).weak_type
    assert not lax.reduce(np.arange(3.0), 0.0, hyp, (0,)).weak_type


def test_gradient_reaches_the_init_value():
    hyp = lambda a, b: lax.sqrt(lax.add(lax.mul(a, a), lax.mul(b, b)))
    x = np.array([3.0, 4.0, 12.0])
    check_grads(lambda x, v: lax.reduce(x, v, hyp, (0,)), (x, np.float64(0.5)), order=2)
    # d/dv sqrt(v^2 + |x|^2) = v / 13.0...
    g = tracer.grad(lambda v: lax.reduce(x, v, hyp, (0,)))(np.float64(5.0))
    np.testing.assert_allclose(float(g), 5.0 / np.sqrt(25.0 + 169.0), rtol=1e-12)


def test_vmap_over_init_values_is_rejected():
    hyp = lambda a, b: lax.sqrt(lax.add(lax.mul(a, a), lax.mul(b, b)))
    with pytest.raises(NotImplementedError, match="batched init values"):
        tracer.vmap(lambda v: lax.reduce(np.ones(3), v, hyp, (0,)))(np.ones(2))


def test_bad_input():
    x = np.ones((2, 3))
    with pytest.raises(ValueError, match="same structure"):
        lax.reduce((x, x), 0.0, lax.add, (0,))
    with pytest.raises(TypeError, match="init values must be scalars of the operands' dtypes"):
        lax.reduce(x, np.float32(0), lambda a, b: lax.add(a, lax.abs(b)), (0,))
    with pytest.raises(ValueError, match="out of bounds"):
        lax.reduce(x, 0.0, lax.add, (2,))
    with pytest.raises(TypeError, match="must return scalars"):
        lax.reduce(x, 0.0, lambda a, b: lax.lt(a, b), (0,))
    with pytest.raises(NotImplementedError, match="closes over a traced value"):
        tracer.grad(lambda w: lax.reduce(x, 0.0, lambda a, b: lax.add(a, lax.mul(b, w)),
                                         (0,)).sum())(2.0)


def test_computation_with_non_elementwise_primitives():
    # reshapes of scalars cannot run on whole arrays: the impl goes element by element
    comp = lambda a, b: lax.reshape(lax.add(lax.reshape(a, (1,)), lax.reshape(b, (1,))), ())
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(np.asarray(lax.reduce(x, 0.0, comp, (1,))), [3.0, 12.0])
    g = tracer.grad(lambda x: lax.reduce(x, 0.0, comp, (0, 1)))(x)
    np.testing.assert_array_equal(np.asarray(g), np.ones((2, 3)))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("is_max", [True, False])
def test_float_max_min_fast_path_equals_the_total_order_reduction(dtype, is_max):
    # The NumPy impl reduces with NumPy's max/min and falls back to integer keys only
    # where the extreme is a zero: its bits must be the total-order reduction's.
    from lax import reductions
    nan, inf = np.nan, np.inf
    rows = [[1.0, 2.0, 2.0, -3.0], [0.0, -0.0, -1.0, -2.0], [-0.0, -0.0, -1.0, -5.0],
            [-nan, 1.0, nan, 2.0], [-inf, -inf, -inf, -inf], [inf, 3.0, -inf, 0.0],
            [-0.0, 0.0, 0.0, -0.0], [5.0, 5.0, 5.0, 5.0]]
    x = np.array(rows, dtype)
    for sub in (x, x[[0, 3, 4, 5, 7]], x[:0], x.T):
        for axes in ((0,), (1,), (0, 1)):
            if sub.size == 0 and axes != (1,):
                continue
            want = reductions._float_minmax(sub, axes, is_max)
            got = (reductions._max_impl if is_max else reductions._min_impl)(sub, axes=axes)
            it = np.dtype(f"u{np.dtype(dtype).itemsize}")
            np.testing.assert_array_equal(np.asarray(got).view(it), np.asarray(want).view(it))
