"""``lax.reduce`` with a user computation: dispatch to the dedicated reducers, the
``reduce`` primitive's jaxpr, gradients through init values, and its errors; the order
of the fold against values recorded from JAX, and jit (a compiled reduction) against
eager bit for bit. (Values, grads and vmap over shapes and dtypes come from the op
records ``reduce_*``.)"""
from __future__ import annotations

import numpy as np
import pytest

import tracer
import tracer.numpy as tnp
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
    # The init value enters once, as the start of the left fold (the spec allows more
    # often; this implementation documents exactly once).
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


# ------------------------------- order of the fold: JAX's --------------------------------
# Values recorded with JAX 0.10.2 on CPU (x64): jax.lax.reduce on the inputs below. Each
# result element is the left fold from the init value over its reduced elements in
# row-major order of the reduced dims (XLA:CPU's order for reduced dims of size <= 32 and
# for every variadic reduction).

_MIX_X = (np.arange(24).reshape(2, 3, 4) % 7 - 3).astype(np.float64)
_MIX_JAX = {   # init 3.0, computation a * 0.5 + b * 1.25 - 0.125
    (0,): [[1.1875, 3.0625, -3.8125, -1.9375], [-0.0625, 1.8125, 3.6875, 1.1875],
           [3.0625, -3.8125, -1.9375, -0.0625]],
    (1,): [[-2.65625, -0.46875, 1.71875, -0.46875], [3.90625, -2.65625, -2.65625, -0.46875]],
    (2,): [[-1.765625, -1.140625, 0.578125], [-3.171875, 2.921875, -3.015625]],
    (0, 2): [-3.4697265625, 2.6630859375, -3.1669921875],
    (1, 2): [0.30072021484375, -3.04461669921875],
    (0, 1, 2): -3.045275703072548,
}
_V = np.array([[1., np.nan, 3., -0., 0., 3.], [-0., 0., -0., 0., -1., -2.],
               [2., 2., np.nan, 2., 1., 0.]])
_NAN_BITS = 9221120237041090560          # 0x7ff8000000000000


def _mix(a, b):
    return lax.sub(lax.add(lax.mul(a, 0.5), lax.mul(b, 1.25)), 0.125)


def _gt_pick(a, b):
    return lax.select(lax.gt(a, b), a, b)


def _argmax_last(a, b):
    # (value, index), the later element on ties, a NaN element always taken: not
    # associative, so the result names the order
    (av, ai), (bv, bi) = a, b
    pick_b = lax.bitwise_or(lax.ge(bv, av), lax.ne(bv, bv))
    return lax.select(pick_b, bv, av), lax.select(pick_b, bi, ai)


def _bits(x):
    x = np.asarray(x)
    return x.view(f"u{x.dtype.itemsize}") if x.dtype.kind == "f" else x


def test_left_fold_matches_jax():
    sub = lambda a, b: lax.sub(a, b)
    # 100-1-2-3-4-5; the former balanced tree gave 105
    assert float(lax.reduce(np.arange(1.0, 6.0), 100.0, sub, (0,))) == 85.0
    for dims, want in _MIX_JAX.items():
        np.testing.assert_array_equal(np.asarray(lax.reduce(_MIX_X, 3.0, _mix, dims)), want)
    x32 = np.array([[0.1, -2.5, 3.3, 1e-3, 7.0], [1.5, 0.2, -0.7, 4.4, -1e4]], np.float32)
    mix32 = lambda a, b: lax.add(lax.mul(a, np.float32(0.3)), lax.mul(b, np.float32(1.7)))
    np.testing.assert_array_equal(np.asarray(lax.reduce(x32, np.float32(0.9), mix32, (1,))),
                                  np.array([12.294224739074707, -16997.83203125], np.float32))
    assert lax.reduce(x32, np.float32(0.9), mix32, (0, 1)) == np.float32(-16997.802734375)
    xi = (np.arange(12).reshape(3, 4) * 37 % 11 - 5).astype(np.int32)
    out = lax.reduce(xi, np.int32(7), lambda a, b: lax.sub(lax.mul(a, np.int32(3)), b), (1,))
    np.testing.assert_array_equal(np.asarray(out), np.array([706, 539, 449], np.int32))


def test_left_fold_at_ties_nan_and_signed_zeros_matches_jax():
    # select(a > b, a, b) from -1: a NaN element is taken, then dropped by the next
    # comparison; among zeros the later one wins (+0.0 in row 1)
    out = lax.reduce(_V, -1.0, _gt_pick, (1,))
    np.testing.assert_array_equal(_bits(out), np.array([4613937818241073152, 0,
                                                        4611686018427387904], np.uint64))
    # lax.max with a non-identity init (-0.0): a reduce equation, NaN propagates
    out = lax.reduce(_V, -0.0, lax.max, (1,))
    assert tracer.make_jaxpr(lambda v: lax.reduce(v, -0.0, lax.max, (1,)))(_V).jaxpr.eqns[
        0].primitive.name == "reduce"
    np.testing.assert_array_equal(_bits(out), np.array([_NAN_BITS, 0, _NAN_BITS], np.uint64))
    # variadic (value, index), later ties win
    idx = np.broadcast_to(np.arange(6), _V.shape)
    v, i = lax.reduce((_V, idx), (-np.inf, -1), _argmax_last, (1,))
    np.testing.assert_array_equal(_bits(v), np.array([_NAN_BITS, 0, _NAN_BITS], np.uint64))
    np.testing.assert_array_equal(np.asarray(i), [1, 3, 2])


def test_variadic_fold_over_more_than_32_elements_matches_jax():
    x = (np.arange(40) % 5 - 2).astype(np.float64)
    comp = lambda a, b: (lax.add(lax.mul(a[0], 0.5), b[0]), lax.sub(lax.mul(a[1], 3), b[1]))
    v, i = lax.reduce((x, np.arange(40)), (1.0, 0), comp, (0,))
    assert float(v) == 2.3225806451600874
    assert int(i) == -3039416364764232180         # int64 wraps, as in XLA


def test_single_operand_over_32_elements_is_a_plain_fold_unlike_xla_cpu():
    # README "Differences": XLA:CPU folds windows of 32 elements first when one reduced
    # dim is longer than 32 (JAX gives 720.0 here); tracer keeps the left fold.
    out = lax.reduce(np.arange(1.0, 41.0), 100.0, lambda a, b: lax.sub(a, b), (0,))
    assert float(out) == 100.0 - 820.0


def test_one_element_per_result_is_returned_unchanged():
    # as JAX (XLA treats the init value as the identity there): no computation applied
    sub = lambda a, b: lax.sub(a, b)
    x = np.array([[2.0], [3.0]])
    np.testing.assert_array_equal(np.asarray(lax.reduce(x, 100.0, sub, (1,))), [2.0, 3.0])
    np.testing.assert_array_equal(np.asarray(lax.reduce(x[:, 0], 100.0, sub, ())), [2.0, 3.0])
    assert _prims(lambda x: lax.reduce(x, 100.0, sub, (1,)), x) == ["reshape"]
    assert _prims(lambda x: lax.reduce(x, 100.0, sub, (0, 1)), x[:1]) == ["reshape"]
    v, i = lax.reduce((x, np.ones((2, 1), np.int32)), (1.0, np.int32(5)), _argmax_last, (1,))
    np.testing.assert_array_equal(np.asarray(i), [1, 1])
    assert i.dtype == np.int32
    with pytest.raises(TypeError, match="init values must be scalars"):
        lax.reduce(x, np.float32(0), sub, (1,))
    # empty reduced dims: the init value
    np.testing.assert_array_equal(np.asarray(lax.reduce(np.zeros((0, 2)), 100.0, sub, (0,))),
                                  [100.0, 100.0])


# ------------------------- derivatives and vmap of the fold ------------------------------

def test_grads_of_the_fold_against_finite_differences():
    x = np.array([[0.5, -1.25, 2.0], [1.5, 0.75, -0.5]])
    mul = lambda a, b: lax.mul(a, b)
    check_grads(lambda x: lax.reduce(x, 1.5, mul, (1,)), (x,), order=2)
    check_grads(lambda x: lax.reduce(x, 1.5, mul, (0, 1)), (x,), order=2)
    # max with a non-identity init: the first maximum's path (no ties here)
    check_grads(lambda x, v: lax.reduce(x, v, lax.max, (0,)), (x, np.float64(0.6)), order=1)
    check_grads(lambda x: lax.reduce(x, 0.25, _mix, (0, 1)), (x,), order=2)
    g = tracer.grad(lambda x: lax.reduce(x, 1.5, mul, (1,)).sum())(x)
    np.testing.assert_allclose(np.asarray(g), 1.5 * np.prod(x, 1, keepdims=True) / x,
                               rtol=1e-14)


def test_vmap_of_the_fold_is_a_loop():
    from tracer.test_util import check_vmap
    x = (np.arange(60).reshape(3, 4, 5) % 7 - 3).astype(np.float64)
    for dims in ((0,), (1,), (0, 1)):
        f = lambda x, dims=dims: lax.reduce(x, 3.0, _mix, dims)
        check_vmap(f, (x,), in_axes=0)
        check_vmap(f, (x,), in_axes=2)
        for b in range(3):
            np.testing.assert_array_equal(np.asarray(tracer.vmap(f)(x)[b]),
                                          np.asarray(f(x[b])))


# ------------------------------ jit: a compiled reduction --------------------------------

def _assert_jit_bits(f, *args):
    text = tracer.jit(f).lower(*args).as_text()
    assert "host_step" not in text, text
    eager, got = f(*args), tracer.jit(f)(*args)
    eager = eager if isinstance(eager, (tuple, list)) else (eager,)
    got = got if isinstance(got, (tuple, list)) else (got,)
    for e, g in zip(eager, got):
        assert e.dtype == g.dtype and e.shape == g.shape and e.weak_type == g.weak_type
        np.testing.assert_array_equal(_bits(g), _bits(e))
    return text


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_jit_fold_is_compiled_and_bit_equal(dtype):
    x = np.random.default_rng(1).standard_normal((3, 4, 5)).astype(dtype)
    x[0, 1, :2] = [np.nan, -0.0]
    half, big, c = dtype(0.5), dtype(1.25), dtype(0.3)
    comp = lambda a, b: lax.add(lax.mul(a, half), lax.mul(b, big))
    for dims in ((0,), (1,), (2,), (0, 2), (1, 2), (0, 1, 2)):
        text = _assert_jit_bits(lambda x: lax.reduce(x, c, comp, dims), x)
    assert "reduce dims (0, 1, 2)" in text
    _assert_jit_bits(lambda x: lax.reduce(x, dtype(-1), _gt_pick, (1,)), x)
    # the operand's producers fuse in; the init value is a runtime operand
    _assert_jit_bits(lambda x, v: lax.reduce(lax.mul(x, dtype(2)) - 1, v, comp, (2,)), x,
                     np.asarray(dtype(0.7)))


def test_jit_fold_other_dtypes_ties_nan_and_signed_zeros():
    _assert_jit_bits(lambda v: lax.reduce(v, -1.0, _gt_pick, (1,)), _V)
    _assert_jit_bits(lambda v: lax.reduce(v, -0.0, lax.max, (1,)), _V)
    _assert_jit_bits(lambda v: lax.reduce(v, 0.0, lax.min, (0,)), _V)
    idx = np.broadcast_to(np.arange(6, dtype=np.int32), _V.shape).copy()
    _assert_jit_bits(lambda v, i: lax.reduce((v, i), (-np.inf, np.int32(-1)), _argmax_last,
                                             (1,)), _V, idx)
    x3, i3 = np.random.default_rng(2).integers(-2, 3, (3, 4, 5)).astype(float), \
        np.arange(60).reshape(3, 4, 5)
    _assert_jit_bits(lambda v, i: lax.reduce((v, i), (-np.inf, 0), _argmax_last, (0, 2)),
                     x3, i3)
    xi = np.random.default_rng(3).integers(-100, 100, (7, 9)).astype(np.int8)
    _assert_jit_bits(lambda x: lax.reduce(x, np.int8(3), lambda a, b: lax.add(
        lax.mul(a, np.int8(3)), b), (0,)), xi)
    xb = np.random.default_rng(4).random((5, 6)) > 0.5
    _assert_jit_bits(lambda x: lax.reduce(x, True, lambda a, b: lax.bitwise_xor(
        a, lax.bitwise_not(b)), (0,)), xb)
    # the computation through tracer.numpy (nested jit calls inlined)
    _assert_jit_bits(lambda x: lax.reduce(x, 0.0, lambda a, b: tnp.where(a > b, a - b, b * 2),
                                          (0,)), x3)


def test_jit_fold_edges_vmap_and_grad():
    sub = lambda a, b: lax.sub(a, b)
    _assert_jit_bits(lambda x: lax.reduce(x, 7.0, sub, (0,)), np.zeros((0, 3)))
    _assert_jit_bits(lambda x: lax.reduce(x, 7.0, sub, (1,)), np.zeros((0, 3)))
    _assert_jit_bits(lambda x: lax.reduce(x, 7.0, sub, (1,)), np.ones((3, 1)))
    _assert_jit_bits(lambda x: lax.reduce(x, 7.0, sub, (0, 2)), np.arange(6.0).reshape(2, 1, 3))
    x = (np.arange(60).reshape(3, 4, 5) % 7 - 3).astype(np.float64)
    _assert_jit_bits(tracer.vmap(lambda x: lax.reduce(x, 3.0, _mix, (1,))), x)
    _assert_jit_bits(tracer.grad(lambda x: lax.reduce(x, 1.5, lambda a, b: lax.mul(
        a, lax.sin(b)), (0, 1)).sum()), x[0] / 4)
    _assert_jit_bits(tracer.grad(lambda x: lax.reduce(x, 0.0, lax.max, (1,)).sum()), x[0])


def test_jit_fold_with_a_non_elementwise_computation_is_a_host_step():
    comp = lambda a, b: lax.reshape(lax.add(lax.reshape(a, (1,)), lax.reshape(b, (1,))), ())
    x = np.arange(6.0).reshape(2, 3)
    f = lambda x: lax.reduce(x, 0.5, comp, (1,))
    assert "host_step reduce" in tracer.jit(f).lower(x).as_text()
    np.testing.assert_array_equal(np.asarray(tracer.jit(f)(x)), np.asarray(f(x)))


def test_infinite_init_values_with_integer_operands_are_the_max_min_identities():
    """Recorded from JAX 0.10.2: -inf / +inf init values with integer or bool operands
    make lax.max / lax.min reductions and windows their integer monoids (JAX compares an
    init value with the identity of its own dtype); other init values an integer operand
    cannot hold -- inf with another computation, NaN, fractions, out of range -- raise a
    TypeError naming the function, the value and the dtype."""
    import tracer.numpy as jnp
    x = np.array([-3, -1, -2, -5], np.int8)
    np.testing.assert_array_equal(
        np.asarray(lax.reduce_window(x, -jnp.inf, lax.max, (2,), (2,), "VALID")), [-1, -2])
    np.testing.assert_array_equal(
        np.asarray(lax.reduce_window(-x, jnp.inf, lax.min, (2,), (2,), "VALID")), [1, 2])
    assert int(lax.reduce(x, -jnp.inf, lax.max, (0,))) == -1
    assert int(lax.reduce(x, jnp.inf, lax.min, (0,))) == -5
    u = np.array([[3, 200], [1, 2]], np.uint8)
    np.testing.assert_array_equal(
        np.asarray(lax.reduce_window(u, float("inf"), lax.min, (1, 2), (1, 2), "VALID")),
        [[3], [1]])
    np.testing.assert_array_equal(np.asarray(lax.reduce(u, -np.inf, lax.max, (1,))), [200, 2])
    assert bool(lax.reduce(np.array([True, False]), -np.inf, lax.max, (0,)))
    g = tracer.grad(lambda v: lax.reduce_window(v, -jnp.inf, lax.max, (2,), (2,),
                                                "VALID").sum())(np.array([1.0, 3.0, 3.0, 2.0]))
    np.testing.assert_array_equal(np.asarray(g), [0, 1, 1, 0])
    bad = [(lambda: lax.reduce_window(x, -np.inf, lambda a, b: lax.max(a, b), (2,), (2,),
                                      "VALID"), "reduce_window: init value -inf.*int8"),
           (lambda: lax.reduce(x, 0.5, lax.add, (0,)), "reduce: init value 0.5.*int8"),
           (lambda: lax.reduce(x, float("nan"), lax.max, (0,)), "reduce: init value nan"),
           (lambda: lax.reduce(x, 1000, lax.add, (0,)), "reduce: init value 1000.*int8"),
           (lambda: lax.reduce_window(x, 1000, lax.add, (2,), (2,), "VALID"),
            "reduce_window: init value 1000 .*int8"),
           (lambda: lax.reduce_window(x, np.float32(-np.inf), lambda a, b: lax.max(a, b),
                                      (2,), (2,), "VALID"),
            "reduce_window: init value .*dtype float32, the operands int8"),
           (lambda: lax.reduce_window(x, np.int64(300), lax.max, (2,), (2,), "SAME"),
            "reduce_window: init value .*dtype int64, the operands int8")]
    # a NumPy scalar equal to max's identity in its own dtype is max's monoid (JAX)
    np.testing.assert_array_equal(
        np.asarray(lax.reduce_window(x, np.float32(-np.inf), lax.max, (2,), (2,), "VALID")),
        [-1, -2])
    for call, match in bad:
        with pytest.raises(TypeError, match=match):
            call()
