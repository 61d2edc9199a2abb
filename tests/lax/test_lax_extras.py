"""The rest of jax.lax's surface: shape/dtype helpers (lax/helpers_extra.py), approx top-k,
unshared convolution, scaled_dot, ragged dots (lax/ragged.py), mulhi
(lax/integer_ops.py), tokens and dce_sink (lax/tokens.py), custom_linear_solve and
custom_root (lax/solves.py), and the permuting/scattering collectives
(lax/collectives.py).

Oracles: NumPy loops written from the definitions, Python integers (mulhi), values recorded
from JAX 0.10 (noted where used), finite differences (check_grads), Python loops
(check_vmap) and eager runs (check_jit). Error cases check the message names the function
and what is wrong."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import lax
import tracer
import tracer.numpy as tnp
from tracer.core import Array, ShapeDtypeStruct, Token
from tracer.interpreters import partial_eval as pe
from tracer.test_util import check_grads, check_jit, check_vmap


@pytest.fixture
def rng():
    return np.random.default_rng(11)


def _np(x):
    return np.asarray(x)


def _eqns(closed):
    return [e.primitive.name for e in closed.jaxpr.eqns]


# ============================================ helpers =======================================

def test_broadcast_shapes():
    # recorded from jax.lax.broadcast_shapes
    assert lax.broadcast_shapes((2, 1, 3), (4, 3)) == (2, 4, 3)
    assert lax.broadcast_shapes((1,), (5,)) == (5,)
    assert lax.broadcast_shapes((0, 1), (1,)) == (0, 1)
    assert lax.broadcast_shapes((3,)) == (3,)
    assert lax.broadcast_shapes() == ()
    with pytest.raises(ValueError, match=r"Incompatible shapes for broadcasting: "
                                         r"shapes=\[\(2, 3\), \(4, 3\)\]"):
        lax.broadcast_shapes((2, 3), (4, 3))


def test_broadcast_like():
    got = lax.broadcast_like(np.arange(3.0), np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(got, np.broadcast_to(np.arange(3.0), (2, 3)))
    assert got.dtype == np.float64           # arr's dtype, not like_arr's
    got = lax.broadcast_like(2.0, np.zeros((2,), np.float32))
    assert got.aval.weak_type and got.shape == (2,)
    got = lax.broadcast_like(np.ones((2, 1)), np.zeros((4, 2, 5)))
    assert got.shape == (4, 2, 5)
    with pytest.raises(ValueError, match=r"broadcast_like: cannot broadcast .*\(2,\) to "
                                         r"\(2, 3\)"):
        lax.broadcast_like(np.ones(2), np.zeros((2, 3)))
    check_grads(lambda x: lax.broadcast_like(x, np.zeros((3, 2, 4))), (np.ones((2, 1)),), 1)


def test_dtype(x32):
    assert lax.dtype(1.0) == np.float32 and lax.dtype(1) == np.int32
    assert lax.dtype(np.zeros(2, np.float64)) == np.float32   # canonicalized, as JAX


def test_dtype_x64():
    assert lax.dtype(1.0) == np.float64 and lax.dtype(1) == np.int64
    assert lax.dtype(1j) == np.complex128 and lax.dtype(True) == np.bool_
    assert lax.dtype(np.int8(1)) == np.int8 and lax.dtype("float16") == np.float16
    assert lax.dtype(np.float32) == np.float32
    assert lax.dtype(Array(np.zeros(2, np.int16))) == np.int16
    with pytest.raises(ValueError, match="Invalid argument to dtype: None"):
        lax.dtype(None)
    with pytest.raises(TypeError, match="Cannot determine dtype"):
        lax.dtype([1, 2])


def test_empty():
    e = lax.empty((2, 3), np.float32)
    assert e.shape == (2, 3) and e.dtype == np.float32
    assert lax.empty(3, np.int16).shape == (3,)
    assert _eqns(tracer.make_jaxpr(lambda: lax.empty((2,), np.int32))()) == ["broadcast_in_dim"]


def test_split():
    x = np.arange(10.0)
    parts = lax.split(x, [3, 0, 7])
    assert isinstance(parts, list) and [p.shape for p in parts] == [(3,), (0,), (7,)]
    np.testing.assert_array_equal(np.concatenate([_np(p) for p in parts]), x)
    y = np.arange(24.0).reshape(2, 3, 4)
    parts = lax.split(y, [1, 3], axis=-1)
    np.testing.assert_array_equal(parts[1], y[..., 1:])
    with pytest.raises(ValueError, match=r"split: sum of sizes 9 must be equal to dimension "
                                         r"0 of the operand shape \[10\]"):
        lax.split(x, [3, 6])
    with pytest.raises(ValueError, match="non-negative"):
        lax.split(x, [11, -1])
    check_grads(lambda v: lax.split(v, [2, 1], axis=1), (y[:, :, :1].copy(),), 2)
    check_vmap(lambda v: lax.split(v, [1, 2]), (np.arange(6.0).reshape(2, 3),))


def test_stack_unstack(rng):
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    np.testing.assert_array_equal(lax.stack([a, b]), np.stack([a, b]))
    np.testing.assert_array_equal(lax.stack([a, b], axis=-1), np.stack([a, b], -1))
    np.testing.assert_array_equal(lax.stack([a, b], axis=1), np.stack([a, b], 1))
    parts = lax.unstack(np.arange(6).reshape(2, 3), axis=1)
    assert isinstance(parts, tuple) and len(parts) == 3
    np.testing.assert_array_equal(parts[2], [2, 5])
    assert lax.unstack(np.ones((0, 2))) == ()
    with pytest.raises(ValueError, match="stack: needs at least one operand"):
        lax.stack([])
    with pytest.raises(ValueError, match=r"stack: operands must have equal shapes"):
        lax.stack([np.ones(2), np.ones(3)])
    with pytest.raises(ValueError, match="out of bounds"):
        lax.unstack(np.ones((2, 3)), axis=2)
    check_grads(lambda u, v: lax.stack([u, v], axis=1), (a, b), 2)
    check_grads(lambda u: lax.unstack(u, axis=1), (a,), 2)
    check_vmap(lambda u, v: lax.stack([u, v], axis=0), (a, b))
    check_vmap(lambda u: lax.unstack(u), (rng.standard_normal((4, 2, 3)),), in_axes=1)


def test_conv_transpose_shape_tuple():
    # recorded from jax.lax.conv_transpose_shape_tuple
    assert lax.conv_transpose_shape_tuple((1, 3, 8, 8), (4, 3, 3, 3), (2, 2), "SAME",
                                          ("NCHW", "OIHW", "NCHW")) == (1, 4, 16, 16)
    assert lax.conv_transpose_shape_tuple((1, 8, 8, 3), (3, 3, 3, 4), (2, 1),
                                          ((1, 1), (0, 2)),
                                          ("NHWC", "HWIO", "NHWC")) == (1, 15, 8, 4)
    assert lax.conv_transpose_shape_tuple((1, 8, 8, 3), (3, 3, 3, 4), (2, 1), "VALID",
                                          ("NHWC", "HWIO", "NHWC")) == (1, 17, 10, 4)
    # and what conv_transpose itself gives
    for pad in ("SAME", "VALID", ((1, 1), (0, 2))):
        out = lax.conv_transpose(np.ones((1, 5, 4, 3)), np.ones((3, 2, 3, 4)), (2, 3), pad,
                                 dimension_numbers=("NHWC", "HWIO", "NHWC"))
        assert out.shape == lax.conv_transpose_shape_tuple(
            (1, 5, 4, 3), (3, 2, 3, 4), (2, 3), pad, ("NHWC", "HWIO", "NHWC"))


def test_reduce_window_shape_tuple():
    # recorded from jax.lax.reduce_window_shape_tuple
    assert lax.reduce_window_shape_tuple((4, 6), (2, 3), (1, 2), ((0, 1), (1, 1)), (2, 1),
                                         (1, 2)) == (7, 2)
    assert lax.reduce_window_shape_tuple((4, 6), (2, 3), (1, 2), ((0, 0), (0, 0))) == (3, 2)
    assert lax.reduce_window_shape_tuple((1,), (3,), (1,), ((0, 0),)) == (0,)
    x = np.ones((5, 7))
    out = lax.reduce_window(x, 0.0, lax.add, (2, 3), (2, 1), ((1, 0), (0, 2)),
                            base_dilation=(1, 2), window_dilation=(2, 1))
    assert out.shape == lax.reduce_window_shape_tuple((5, 7), (2, 3), (2, 1),
                                                      ((1, 0), (0, 2)), (1, 2), (2, 1))


def test_shape_as_value_and_sharding_noop():
    v = lax.shape_as_value((2, 3))
    assert v.dtype == np.int32 and v.tolist() == [2, 3]
    assert lax.shape_as_value(()).shape == (0,)
    assert lax.shape_as_value((2 ** 40,)).dtype == np.int64
    tree = {"a": np.ones(2), "b": (1.0, np.arange(3))}
    out = lax.with_sharding_constraint(tree, None)
    assert isinstance(out["a"], Array) and out["b"][0].aval.weak_type
    np.testing.assert_array_equal(out["b"][1], np.arange(3))
    assert lax.PrecisionLike is not None


def test_get_dimension_size():
    x = np.zeros((3, 0, 1, 7), np.float32)
    for d, n in enumerate(x.shape):                   # empty and size-1 dims included
        v = lax.get_dimension_size(x, d)
        assert v.dtype == np.int32 and v.shape == () and int(v) == n
        assert not v.aval.weak_type
    # under jit a constant of the traced operand's shape; under vmap the per-example size
    f = tracer.jit(lambda x: x.sum() * lax.get_dimension_size(x, 1))
    assert float(f(np.ones((2, 5)))) == 50.0
    check_jit(lambda x: lax.get_dimension_size(x, 0) + x, (np.arange(4),))
    assert "get_dimension_size" not in str(tracer.make_jaxpr(
        lambda x: lax.get_dimension_size(x, 0))(np.ones(3)))
    out = tracer.vmap(lambda r: lax.get_dimension_size(r, 0) * r)(np.ones((4, 6)))
    np.testing.assert_array_equal(np.asarray(out), np.full((4, 6), 6.0))
    g = tracer.grad(lambda x: (x * lax.get_dimension_size(x, 0)).sum())(np.ones(3))
    np.testing.assert_array_equal(np.asarray(g), [3.0, 3.0, 3.0])
    with pytest.raises(ValueError, match=r"get_dimension_size: dimension 4 is not in "
                                         r"\[0, 4\) for operand f32\[3,0,1,7\]"):
        lax.get_dimension_size(x, 4)
    with pytest.raises(ValueError, match="dimension -1"):
        lax.get_dimension_size(x, -1)
    with pytest.raises(TypeError, match="get_dimension_size: operand f32\\[\\] has no"):
        lax.get_dimension_size(np.float32(1), 0)
    with pytest.raises(TypeError, match="get_dimension_size: dimension must be"):
        lax.get_dimension_size(x, 1.0)


def test_xla_map_spec_example_and_numpy_reference(rng):
    # the spec's example: Map(op1, op2, op3, computation, par1) maps
    # elem_out <- computation(elem1, elem2, elem3, par1); par1 is a closed-over value
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    c = rng.integers(-2, 3, (3, 4)).astype(np.int32)
    par1 = np.float64(0.25)
    comp = lambda e1, e2, e3: lax.select(lax.gt(e3, np.int32(0)), e1 * e2 + par1,
                                         lax.max(e1, e2))
    want = np.where(c > 0, a * b + par1, np.maximum(a, b))
    out = lax.xla_map(comp, a, b, c, dimensions=(0, 1))
    np.testing.assert_array_equal(np.asarray(out), want)
    check_jit(lambda a, b, c: lax.xla_map(comp, a, b, c, dimensions=(0, 1)), (a, b, c))
    # the result dtype is the computation's (S), not the operands'
    ge = lax.xla_map(lambda u, v: lax.ge(u, v), a, b, dimensions=(0, 1))
    assert ge.dtype == np.bool_ and np.array_equal(np.asarray(ge), a >= b)
    # edge values pass through the computation element by element
    e = np.array([0.0, -0.0, np.inf, -np.inf, np.nan])
    out = lax.xla_map(lambda u: lax.neg(u), e, dimensions=(0,))
    np.testing.assert_array_equal(np.signbit(np.asarray(out)), np.signbit(-e))
    # rank 0, empty and size-1 dimensions
    assert float(lax.xla_map(lambda u: u * 2.0, np.float64(1.5), dimensions=())) == 3.0
    assert lax.xla_map(lambda u: u + 1.0, np.zeros((0, 3)), dimensions=(0, 1)).shape == (0, 3)
    one = lax.xla_map(lambda u: u + 1.0, np.zeros((1, 1, 2)), dimensions=(0, 1, 2))
    np.testing.assert_array_equal(np.asarray(one), np.ones((1, 1, 2)))
    # a constant computation broadcasts to the operands' shape
    np.testing.assert_array_equal(np.asarray(lax.xla_map(lambda u: 7, c, dimensions=(0, 1))),
                                  np.full((3, 4), 7))


def test_xla_map_fuses_under_jit_and_lax_map_is_unchanged():
    x = np.arange(6.0).reshape(2, 3)
    f = lambda x: lax.xla_map(lambda u: lax.sin(u) * 2.0 + 1.0, x * 3.0, dimensions=(0, 1))
    text = tracer.jit(f).lower(x).as_text()
    program = text.split("# loop IR")[1].split("# generated source")[0]
    assert program.count("kernel(") == 2 and "host_step" not in program   # one step
    assert "np.sin" in program and "xla_map" not in text
    # lax.map is JAX's sequential map over the leading axis, a scan
    assert "scan" in str(tracer.make_jaxpr(lambda x: lax.map(lambda r: r.sum(), x))(x))


def test_xla_map_grad_transpose_vmap(rng):
    a, b = rng.standard_normal((3, 2)), rng.uniform(0.5, 2.0, (3, 2))
    comp = lambda u, v: lax.sin(u) * lax.log(v) + u * v
    fn = lambda a, b: lax.xla_map(comp, a, b, dimensions=tuple(range(np.ndim(a))))
    check_grads(fn, (a, b), order=2)
    lin = lambda a: lax.xla_map(lambda u: 3.0 * u - u, a, dimensions=(0, 1))
    _, vjp = tracer.vjp(lin, a)
    np.testing.assert_allclose(np.asarray(vjp(np.ones((3, 2)))[0]), np.full((3, 2), 2.0))
    check_vmap(fn, (a, b[0]), in_axes=(0, None))
    check_vmap(fn, (a, b), in_axes=(1, 1))
    check_vmap(lambda a: lax.xla_map(lambda u: u * 2.0, a, dimensions=(0,)),
               (rng.standard_normal((4, 5)),), in_axes=1)


def test_xla_map_errors():
    x = np.ones((2, 3))
    with pytest.raises(ValueError, match=r"xla_map: dimensions must be \(0, 1\).*got \(1,\)"):
        lax.xla_map(lambda u: u, x, dimensions=(1,))
    with pytest.raises(TypeError, match=r"xla_map: operands must share one shape, got "
                                        r"f64\[2,3\], f64\[3\]"):
        lax.xla_map(lambda u, v: u + v, x, np.ones(3), dimensions=(0, 1))
    with pytest.raises(TypeError, match="xla_map: computation must return one scalar"):
        lax.xla_map(lambda u: (u, u), x, dimensions=(0, 1))
    with pytest.raises(TypeError, match=r"must return one scalar.*f64\[2\]"):
        lax.xla_map(lambda u: lax.broadcast(u, (2,)), x, dimensions=(0, 1))
    with pytest.raises(TypeError, match="xla_map: computation must be callable"):
        lax.xla_map(3, x, dimensions=(0, 1))
    with pytest.raises(TypeError, match="at least one operand"):
        lax.xla_map(lambda: 1.0, dimensions=())


def test_stage():
    s = lax.stage(2.0)
    assert isinstance(s, Array) and s.aval.weak_type
    closed = tracer.make_jaxpr(lambda x: lax.stage(np.ones(2)) + x)(1.0)
    assert len(closed.jaxpr.constvars) == 1          # the staged array is a jaxpr value
    text = str(tracer.make_jaxpr(lambda x: lax.stage(2.0) + x)(1.0))
    assert "add 2.0:f64[] a" in text                 # a scalar becomes a literal, as in JAX
    seen = []
    tracer.make_jaxpr(lambda x: seen.append(lax.stage(x) is x) or x)(1.0)
    assert seen == [True]                            # traced values are returned as they are
    assert float(tracer.grad(lambda x: lax.stage(x) * 3.0)(2.0)) == 3.0


# ======================================= approx top-k ======================================

def _np_topk(x, k, largest):
    order = np.argsort(-x if largest else x, axis=-1, kind="stable")
    if largest:  # NaN first (largest), then descending with ties to the lower index
        key = np.where(np.isnan(x), -np.inf, -x)
        order = np.lexsort((np.broadcast_to(np.arange(x.shape[-1]), x.shape),
                            key, ~np.isnan(x)), axis=-1)
    idx = order[..., :k]
    return np.take_along_axis(x, idx, -1), idx


def test_approx_max_min_k(rng):
    x = np.array([[3.0, 1.0, np.nan, 2.0, 5.0, 5.0], [0, -1, -2, 7, 1, 1]], np.float32)
    v, i = lax.approx_max_k(x, 2)
    # recorded from jax.lax.approx_max_k
    np.testing.assert_array_equal(v, [[np.nan, 5.0], [7.0, 1.0]])
    np.testing.assert_array_equal(i, [[2, 4], [3, 4]])
    assert i.dtype == np.int32 and v.dtype == np.float32
    v, i = lax.approx_min_k(x, 3)
    np.testing.assert_array_equal(v, [[1.0, 2.0, 3.0], [-2.0, -1.0, 0.0]])
    np.testing.assert_array_equal(i, [[1, 3, 0], [2, 1, 0]])
    v, i = lax.approx_max_k(x, 1, reduction_dimension=0)
    np.testing.assert_array_equal(i, [[0, 0, 0, 1, 0, 0]])
    y = rng.standard_normal((3, 7, 2))
    for largest, fn in ((True, lax.approx_max_k), (False, lax.approx_min_k)):
        v, i = fn(y, 4, reduction_dimension=1, recall_target=0.5, aggregate_to_topk=False)
        ev, ei = _np_topk(np.moveaxis(y, 1, -1), 4, largest)
        np.testing.assert_array_equal(v, np.moveaxis(ev, -1, 1))
        np.testing.assert_array_equal(i, np.moveaxis(ei, -1, 1))
    # ties keep the lower index; -0.0 and 0.0 tie
    v, i = lax.approx_min_k(np.array([0.0, -1.0, -0.0, -1.0]), 3)
    np.testing.assert_array_equal(i, [1, 3, 0])


def test_approx_k_derivatives_and_errors(rng):
    y = rng.permutation(12).astype(np.float64).reshape(3, 4)
    check_grads(lambda a: lax.approx_max_k(a, 2)[0], (y,), 2)
    check_grads(lambda a: lax.approx_min_k(a, 2, reduction_dimension=0)[0], (y,), 2)
    check_vmap(lambda a: lax.approx_min_k(a, 3), (y,))
    with pytest.raises(TypeError, match="approx_max_k: operand must be a floating type"):
        lax.approx_max_k(np.arange(4), 2)
    with pytest.raises(ValueError, match=r"approx_min_k: k must be at most .*\(4\), got 5"):
        lax.approx_min_k(np.ones(4), 5)
    with pytest.raises(ValueError, match="k must be positive"):
        lax.approx_max_k(np.ones(4), 0)
    with pytest.raises(TypeError, match="at least one dimension"):
        lax.approx_max_k(np.float64(1.0), 1)


# =================================== unshared convolution ==================================

def _local_conv_nchw(lhs, rhs, strides, pads, fs, rhs_dil=(1, 1)):
    """conv_general_dilated_local by its definition (NCHW / OIHW, patches C-major)."""
    n, c = lhs.shape[:2]
    lp = np.pad(lhs, ((0, 0), (0, 0)) + tuple(tuple(p) for p in pads))
    o, _, oh, ow = rhs.shape
    fh, fw = fs
    out = np.zeros((n, o, oh, ow))
    for i, j, cc, a, b in itertools.product(range(oh), range(ow), range(c), range(fh),
                                            range(fw)):
        pix = lp[:, cc, i * strides[0] + a * rhs_dil[0], j * strides[1] + b * rhs_dil[1]]
        out[:, :, i, j] += pix[:, None] * rhs[None, :, cc * fh * fw + a * fw + b, i, j]
    return out


def test_conv_general_dilated_local(rng):
    lhs = rng.standard_normal((2, 3, 5, 6))
    rhs = rng.standard_normal((4, 18, 2, 3))
    pads = ((0, 0), (1, 0))
    got = lax.conv_general_dilated_local(lhs, rhs, (2, 2), pads, (2, 3))
    np.testing.assert_allclose(got, _local_conv_nchw(lhs, rhs, (2, 2), pads, (2, 3)),
                               rtol=1e-12, atol=1e-12)
    got = lax.conv_general_dilated_local(lhs, rhs[:, :12], (2, 2), pads, (2, 2),
                                         rhs_dilation=(1, 2))
    np.testing.assert_allclose(got, _local_conv_nchw(lhs, rhs[:, :12], (2, 2), pads, (2, 2),
                                                     (1, 2)), rtol=1e-12, atol=1e-12)
    nhwc = lax.conv_general_dilated_local(lhs.transpose(0, 2, 3, 1), rhs.transpose(2, 3, 1, 0),
                                          (2, 2), pads, (2, 3),
                                          dimension_numbers=("NHWC", "HWIO", "NHWC"))
    np.testing.assert_allclose(_np(nhwc).transpose(0, 3, 1, 2),
                               _local_conv_nchw(lhs, rhs, (2, 2), pads, (2, 3)),
                               rtol=1e-12, atol=1e-12)
    small_l, small_r = lhs[:1, :2, :3, :3], rng.standard_normal((2, 8, 2, 2))
    f = lambda a, b: lax.conv_general_dilated_local(a, b, (1, 1), "VALID", (2, 2))
    check_grads(f, (small_l, small_r), 1)
    check_vmap(f, (np.stack([small_l, 2 * small_l]), small_r), in_axes=(0, None))
    with pytest.raises(ValueError, match="filter_shape"):
        lax.conv_general_dilated_local(lhs, rhs, (1, 1), "VALID", (2,))


# ========================================= scaled_dot ======================================

def test_scaled_dot(rng):
    l, r = rng.standard_normal((2, 4)), rng.standard_normal((4, 3))
    ls, rs = rng.standard_normal((2, 2)), rng.standard_normal((2, 3))
    got = lax.scaled_dot(l, r, lhs_scale=ls, rhs_scale=rs)
    want = (l * np.repeat(ls, 2, axis=1)) @ (r * np.repeat(rs, 2, axis=0))
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert got.dtype == np.float64
    got = lax.scaled_dot(l.astype(np.float32), r.astype(np.float32))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, l @ r, rtol=1e-5)
    lb, rb = rng.standard_normal((3, 2, 6)), rng.standard_normal((3, 6, 2))
    lbs = rng.standard_normal((3, 2, 3))
    got = lax.scaled_dot(lb, rb, lhs_scale=lbs, preferred_element_type=np.float32)
    want = np.einsum("bmk,bkn->bmn", lb * np.repeat(lbs, 2, axis=2), rb)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5)
    f = lambda a, b, s: lax.scaled_dot(a, b, lhs_scale=s)
    check_grads(f, (l, r, ls), 2)
    check_vmap(f, (np.stack([l, l]), r, np.stack([ls, 2 * ls])), in_axes=(0, None, 0))
    with pytest.raises(TypeError, match="does not support 0-rank and 1-rank"):
        lax.scaled_dot(np.ones(3), np.ones(3))
    with pytest.raises(TypeError, match="multiple .*at least 2x"):
        lax.scaled_dot(l, r, lhs_scale=np.ones((2, 4)))
    with pytest.raises(TypeError, match=r"lhs dim 0 of size 2 does not match"):
        lax.scaled_dot(l, r, lhs_scale=np.ones((3, 2)))


# ========================================= ragged dots =====================================

def _ragged_rows(m, sizes):
    """group id of each of m rows (-1: no group)."""
    gid = np.full(m, -1)
    start = 0
    for g, s in enumerate(sizes):
        gid[start:min(start + s, m)] = g
        start += s
    return gid


def test_ragged_dot(rng):
    lhs, rhs = rng.standard_normal((6, 3)), rng.standard_normal((3, 3, 4))
    for sizes in ([2, 1, 3], [1, 0, 2], [0, 0, 0], [3, 4, 5]):
        got = lax.ragged_dot(lhs, rhs, np.array(sizes, np.int32))
        gid = _ragged_rows(6, sizes)
        want = np.stack([lhs[r] @ rhs[g] if g >= 0 else np.zeros(4) for r, g in
                         enumerate(gid)])
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    got = lax.ragged_dot(lhs.astype(np.int32), rhs.astype(np.int32), np.array([6, 0, 0]))
    assert got.dtype == np.int32
    got = lax.ragged_dot(lhs, rhs, np.array([2, 2, 2]), preferred_element_type=np.float32)
    assert got.dtype == np.float32
    gs = np.array([2, 3, 1], np.int32)
    check_grads(lambda a, b: lax.ragged_dot(a, b, gs), (lhs, rhs), 2)
    check_vmap(lambda a, b, g: lax.ragged_dot(a, b, g),
               (np.stack([lhs, -lhs]), rhs, np.array([[1, 2, 3], [4, 0, 2]], np.int32)),
               in_axes=(0, None, 0))
    check_jit(lambda a, b: lax.ragged_dot(a, b, gs), (lhs, rhs), rtol=1e-12, atol=1e-14)


def test_ragged_dot_general_modes(rng):
    gs = np.array([2, 2], np.int32)
    # ragged contracting dim: one output per group
    dn = lax.RaggedDotDimensionNumbers((([1], [0]), ([], [])), [1], [])
    l, r = rng.standard_normal((2, 5)), rng.standard_normal((5, 3))
    got = lax.ragged_dot_general(l, r, gs, dn)
    assert got.shape == (2, 2, 3)
    np.testing.assert_allclose(got[0], l[:, :2] @ r[:2], rtol=1e-12)
    np.testing.assert_allclose(got[1], l[:, 2:4] @ r[2:4], rtol=1e-12)
    check_grads(lambda a, b: lax.ragged_dot_general(a, b, gs, dn), (l, r), 1)
    # ragged batch dim: a plain batched product (as JAX's reference implementation)
    dn = lax.RaggedDotDimensionNumbers((([2], [1]), ([0], [0])), [0], [])
    l, r = rng.standard_normal((5, 2, 3)), rng.standard_normal((5, 3, 4))
    np.testing.assert_allclose(lax.ragged_dot_general(l, r, gs, dn),
                               np.einsum("bmk,bkn->bmn", l, r), rtol=1e-12)
    # batch dims with per-batch group sizes [b, g], rhs group dim last
    dn = lax.RaggedDotDimensionNumbers((([2], [1]), ([0], [0])), [1], [3])
    l, r = rng.standard_normal((2, 4, 3)), rng.standard_normal((2, 3, 5, 2))
    sizes = np.array([[1, 3], [4, 0]], np.int32)
    got = lax.ragged_dot_general(l, r, sizes, dn)
    for b in range(2):
        gid = _ragged_rows(4, sizes[b])
        for row in range(4):
            np.testing.assert_allclose(got[b, row], l[b, row] @ r[b, :, :, gid[row]],
                                       rtol=1e-12)
    assert repr(dn).startswith("RaggedDotDimensionNumbers(dot_dimension_numbers=")
    assert dn == lax.RaggedDotDimensionNumbers((([2], [1]), ([0], [0])), [1], [3])


def test_ragged_dot_errors(rng):
    lhs, rhs = np.ones((6, 3)), np.ones((3, 3, 4))
    with pytest.raises(TypeError, match="group_sizes must be integers"):
        lax.ragged_dot(lhs, rhs, np.ones(3))
    with pytest.raises(TypeError, match="expected rhs group dimension 0 to have size 2"):
        lax.ragged_dot(lhs, rhs, np.array([1, 2]))
    with pytest.raises(TypeError, match=r"ragged_dot: expected lhs \[m, k\]"):
        lax.ragged_dot(np.ones(3), rhs, np.array([1, 2, 3]))
    with pytest.raises(NotImplementedError, match="group_offset"):
        lax.ragged_dot(lhs, rhs, np.array([1, 2, 3]), group_offset=np.array([1]))
    dn = lax.RaggedDotDimensionNumbers((([1], [0]), ([], [])), [1], [0])
    with pytest.raises(TypeError, match="zero rhs group dimensions"):
        lax.ragged_dot_general(np.ones((2, 5)), np.ones((5, 3)), np.array([2, 3]), dn)
    dn = lax.RaggedDotDimensionNumbers((([2], [1]), ([0], [0])), [1], [3])
    with pytest.raises(TypeError, match=r"expected group_sizes to have shape \(2, 2\)"):
        lax.ragged_dot_general(np.ones((2, 4, 3)), np.ones((2, 3, 5, 2)),
                               np.ones((3, 2), np.int32), dn)


# ============================================ mulhi ========================================

_INT_DTYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
               np.uint64]


def _edge_ints(dt):
    info = np.iinfo(dt)
    vals = {info.min, info.min + 1, 0, 1, 3, 1000 % (int(info.max) + 1), info.max - 1,
            info.max, int(info.max) // 3}
    if info.min < 0:
        vals |= {-1, -7}
    return np.array(sorted(vals), dt)


@pytest.mark.parametrize("dt", _INT_DTYPES)
def test_mulhi_against_python_ints(dt):
    v = _edge_ints(dt)
    x, y = np.repeat(v, len(v)), np.tile(v, len(v))
    got = lax.mulhi(x, y)
    assert got.dtype == dt
    bits = np.dtype(dt).itemsize * 8
    want = [(int(a) * int(b)) >> bits for a, b in zip(x.tolist(), y.tolist())]
    np.testing.assert_array_equal(_np(got).astype(object), np.array(want, object))
    check_jit(lambda a, b: lax.mulhi(a, b), (x, y))


def test_mulhi_recorded_and_transformations():
    # recorded from jax.lax.mulhi
    np.testing.assert_array_equal(
        lax.mulhi(np.array([-128, -128, 127, -1], np.int8), np.array([-128, 127, 127, 1],
                                                                     np.int8)),
        [64, -64, 63, -1])
    np.testing.assert_array_equal(
        lax.mulhi(np.array([2 ** 64 - 1, 2 ** 63], np.uint64),
                  np.array([2 ** 64 - 1, 3], np.uint64)),
        np.array([2 ** 64 - 2, 1], np.uint64))
    x = np.array([5, -9, 2 ** 30], np.int32)
    np.testing.assert_array_equal(lax.mulhi(x, 2 ** 31 - 1), [2, -5, 2 ** 29 - 1])
    check_vmap(lambda a, b: lax.mulhi(a, b), (x, x[::-1].copy()))
    check_vmap(lambda a: lax.mulhi(a, np.int32(7)), (x,))
    _, t = tracer.jvp(lambda a: lax.mulhi(a, a), (x,), (np.zeros(3, tracer.dtypes.float0),))
    assert t.dtype == tracer.dtypes.float0
    text = tracer.jit(lambda a: lax.mulhi(a, a)).lower(x).as_text()
    assert "host_step" not in text and "shr_a" in text
    with pytest.raises(TypeError, match="mulhi does not accept dtype float64"):
        lax.mulhi(np.ones(2), np.ones(2))
    with pytest.raises(TypeError, match="mulhi requires arguments of the same dtype"):
        lax.mulhi(np.ones(2, np.int32), np.ones(2, np.int64))


# ====================================== tokens, dce_sink ===================================

def test_tokens_eager_traced_and_jitted():
    t = lax.create_token()
    assert isinstance(t, Token) and isinstance(lax.after_all(t, t), Token)
    assert isinstance(lax.after_all(), Token) and repr(t) == "Token()"
    closed = tracer.make_jaxpr(lambda x: lax.after_all(lax.create_token(),
                                                       lax.create_token("ignored")))(1.0)
    assert str(closed) == ("{ lambda ; a:f64[]. let\n    b:Tok = create_token \n"
                           "    c:Tok = create_token \n    d:Tok = after_all b c\n  in (d,) }")
    assert isinstance(tracer.jit(lambda: lax.create_token())(), Token)
    tok, y = tracer.jit(lambda t, x: (lax.after_all(t), x + 1))(t, 1.0)
    assert isinstance(tok, Token) and float(y) == 2.0
    (tok, y), (ttok, ty) = tracer.jvp(lambda x: (lax.create_token(), 2 * x), (1.0,), (1.0,))
    assert isinstance(ttok, Token) and float(ty) == 2.0
    with pytest.raises(TypeError, match="after_all: arguments must be tokens .* got f64"):
        lax.after_all(np.ones(2))


def test_dce_sink_keeps_its_operand_alive():
    def f(x):
        lax.dce_sink(tnp.sin(x))        # nothing uses sin(x) but the sink
        lax.dce_sink({"a": x})
        return x + 1

    assert f(1.0) == 2.0
    closed = tracer.make_jaxpr(f)(1.0)
    dced, _ = pe.dce_jaxpr(closed.jaxpr)
    assert [e.primitive.name for e in dced.eqns] == ["sin", "dce_sink", "dce_sink", "add"]
    text = tracer.jit(f).lower(1.0).as_text()
    assert "host_step dce_sink" in text and "sin" in text.split("# loop IR")[1]
    assert float(tracer.jit(f)(1.0)) == 2.0
    assert float(tracer.grad(f)(1.0)) == 1.0
    np.testing.assert_array_equal(tracer.vmap(f)(np.arange(3.0)), [1.0, 2.0, 3.0])
    no_sink = tracer.make_jaxpr(lambda x: (tnp.sin(x), x + 1)[1])(1.0)
    assert _eqns(no_sink) == ["sin", "add"]
    assert [e.primitive.name for e in pe.dce_jaxpr(no_sink.jaxpr)[0].eqns] == ["add"]


# =================================== custom_linear_solve ===================================

def _richardson(matvec, b):
    """A non-differentiable iterative solver (while_loop): x <- x + w (b - A x)."""
    def body(state):
        x, k = state
        return x + 0.1 * (b - matvec(x)), k + 1

    def cond(state):
        x, k = state
        return (tnp.max(tnp.abs(b - matvec(x))) > 1e-13) & (k < 5000)

    x, _ = lax.while_loop(cond, body, (tnp.zeros_like(b), 0))
    return x


def _spd(rng, n=3):
    a = rng.standard_normal((n, n))
    return a @ a.T / n + 2.0 * np.eye(n)


def _lsolve(a, b):
    return lax.custom_linear_solve(lambda x: a @ x, b, _richardson,
                                   transpose_solve=_richardson)


def test_custom_linear_solve_values_and_gradients(rng):
    a, b = _spd(rng), rng.standard_normal(3)
    a[0, 1] += 0.3  # not symmetric
    x = _lsolve(a, b)
    np.testing.assert_allclose(a @ _np(x), b, atol=1e-11)
    # the implicit gradients equal those of differentiating a direct solve
    loss = lambda f: (lambda a, b: tnp.sum(f(a, b) ** 2 * tnp.arange(1.0, 4.0)))
    g_ours = tracer.grad(loss(_lsolve), argnums=(0, 1))(a, b)
    g_direct = tracer.grad(loss(tnp.linalg.solve), argnums=(0, 1))(a, b)
    for u, v in zip(g_ours, g_direct):
        np.testing.assert_allclose(u, v, rtol=1e-9, atol=1e-11)
    check_grads(_lsolve, (a, b), 2, atol=1e-6, rtol=1e-6)
    # jvp needs no transpose_solve; grad does
    fwd_only = lambda a, b: lax.custom_linear_solve(lambda x: a @ x, b, _richardson)
    _, t = tracer.jvp(fwd_only, (a, b), (np.zeros((3, 3)), b))
    np.testing.assert_allclose(t, np.linalg.solve(a, b), rtol=1e-9)
    with pytest.raises(TypeError, match="reverse-mode differentiation needs transpose_solve"):
        tracer.grad(lambda b: tnp.sum(fwd_only(a, b)))(b)


def test_custom_linear_solve_vmap_jit_pytrees_aux(rng):
    a, b = _spd(rng), rng.standard_normal(3)
    check_vmap(_lsolve, (np.stack([a, a + np.eye(3)]), np.stack([b, 2 * b])), atol=1e-10)
    check_vmap(_lsolve, (a, np.stack([b, -b, 3 * b])), in_axes=(None, 0), atol=1e-10)
    check_jit(_lsolve, (a, b), rtol=1e-12, atol=1e-13)
    closed = tracer.make_jaxpr(_lsolve)(a, b)
    assert _eqns(closed) == ["custom_linear_solve"]
    # under jit only solve is left: it is inlined and compiled (no host step)
    text = tracer.jit(_lsolve).lower(a, b).as_text()
    assert "host_step" not in text and "while[" in text.split("# optimized jaxpr")[1]
    g = tracer.grad(lambda a, b: tnp.sum(_lsolve(a, b) ** 2), argnums=(0, 1))
    check_jit(g, (a, b), rtol=1e-10, atol=1e-12)
    # pytree right-hand sides, symmetric=True (the matrix is built symmetric from q, so
    # perturbations keep it symmetric), has_aux
    def f(q, u, v):
        s = q + q.T
        mv = lambda t: (lambda y: {"u": y[:2], "v": y[2:]})(s @ tnp.concatenate([t["u"],
                                                                                 t["v"]]))

        def solve_tree(mv, rhs):
            flat = tnp.concatenate([rhs["u"], rhs["v"]])
            sol = tnp.linalg.solve(s, flat)
            return {"u": sol[:2], "v": sol[2:]}, tnp.sum(flat)

        return lax.custom_linear_solve(mv, {"u": u, "v": v}, solve_tree, symmetric=True,
                                       has_aux=True)

    (sol, aux) = f(a, b[:2], b[2:])
    np.testing.assert_allclose(np.concatenate([sol["u"], sol["v"]]),
                               np.linalg.solve(a + a.T, b), rtol=1e-12)
    assert float(aux) == pytest.approx(b.sum())
    check_grads(lambda q, u, v: f(q, u, v)[0], (a, b[:2], b[2:]), 1)
    with pytest.raises(TypeError, match=r"custom_linear_solve: the output of solve and b"):
        lax.custom_linear_solve(lambda x: a @ x, b, lambda mv, y: y[:2])


# ======================================= custom_root =======================================

def _newton(f, x0):
    def body(x):
        fx, dfx = tracer.jvp(f, (x,), (tnp.ones_like(x),))
        return x - fx / dfx
    return lax.while_loop(lambda x: tnp.abs(f(x)) > 1e-14, body, x0)


def _root_sqrt(a):
    return lax.custom_root(lambda x: x ** 2 - a, 1.0 + 0 * a, _newton,
                           lambda g, y: y / g(1.0))


def test_custom_root_scalar():
    assert float(_root_sqrt(2.0)) == pytest.approx(np.sqrt(2.0), rel=1e-14)
    assert float(tracer.grad(_root_sqrt)(2.0)) == pytest.approx(0.5 / np.sqrt(2.0), rel=1e-12)
    assert float(tracer.grad(tracer.grad(_root_sqrt))(2.0)) == pytest.approx(
        -0.25 * 2.0 ** -1.5, rel=1e-10)
    check_grads(_root_sqrt, (3.0,), 2)
    check_vmap(_root_sqrt, (np.array([1.0, 2.0, 9.0]),))
    check_jit(_root_sqrt, (2.0,), rtol=1e-14)


def test_custom_root_vector_aux_and_errors(rng):
    m = _spd(rng)

    def solve(f, x0):                  # Newton with a dense Jacobian, fixed iterations
        def body(_, x):
            return x - tnp.linalg.solve(tracer.jacfwd(f)(x), f(x))
        return lax.fori_loop(0, 30, body, x0), 30

    def tangent_solve(g, y):
        return tnp.linalg.solve(tracer.jacfwd(g)(y), y)

    def root(c):
        # f(x) = M x + x**3 - c has the root x*(c); dx*/dc = (M + 3 diag(x*^2))^-1
        return lax.custom_root(lambda x: m @ x + x ** 3 - c, tnp.zeros(3), solve,
                               tangent_solve, has_aux=True)

    c = rng.standard_normal(3)
    x, iters = root(c)
    assert int(iters) == 30
    np.testing.assert_allclose(m @ _np(x) + _np(x) ** 3, c, atol=1e-12)
    jac = tracer.jacrev(lambda c: root(c)[0])(c)
    np.testing.assert_allclose(jac, np.linalg.inv(m + 3 * np.diag(_np(x) ** 2)), rtol=1e-10)
    check_grads(lambda c: root(c)[0], (c,), 1)
    with pytest.raises(TypeError, match="custom_root: the output of f and initial_guess"):
        lax.custom_root(lambda x: x[:2], np.zeros(3), solve, tangent_solve)


# ============================ permuting and scattering collectives ==========================

def _vm(f, *args, **kw):
    return tracer.vmap(f, axis_name="i", **kw)(*args)


def test_ppermute_pshuffle_pbroadcast_axis_size():
    x = np.arange(12.0).reshape(3, 4)
    # recorded from jax (vmap with axis_name)
    np.testing.assert_array_equal(_vm(lambda a: lax.ppermute(a, "i", [(0, 1), (1, 2), (2, 0)]),
                                      x), x[[2, 0, 1]])
    np.testing.assert_array_equal(_vm(lambda a: lax.pshuffle(a, "i", [2, 0, 1]), x), x[[2, 0, 1]])
    np.testing.assert_array_equal(_vm(lambda a: lax.pbroadcast(a, "i", 1), x), x[[1, 1, 1]])
    np.testing.assert_array_equal(_vm(lambda a: lax.axis_size("i") * a[0], x), [0, 12, 24])
    # a partial permutation: members receiving nothing get zeros (JAX's documented semantics)
    got = _vm(lambda a: lax.ppermute({"k": a}, "i", [(0, 1), (1, 2)]), x)["k"]
    np.testing.assert_array_equal(got, np.stack([np.zeros(4), x[0], x[1]]))
    # unmapped operands
    got = _vm(lambda a, c: lax.ppermute(c, "i", [(2, 0)]) + 0 * a, x, np.ones(4),
              in_axes=(0, None))
    np.testing.assert_array_equal(got, [[1] * 4, [0] * 4, [0] * 4])
    both = tracer.vmap(tracer.vmap(lambda a: a * lax.axis_size(("i", "j")), axis_name="i"),
                       axis_name="j")
    np.testing.assert_array_equal(both(np.ones((3, 2))), np.full((3, 2), 6.0))


def test_collective_gradients_vmap_of_grad_match_grad_of_vmap(rng):
    x = rng.standard_normal((3, 3, 2))          # 3 members, each a (3, 2) value
    w = rng.standard_normal((3, 4))
    cases = [
        lambda a: lax.ppermute(a, "i", [(0, 1), (1, 2)]),
        lambda a: lax.pshuffle(a, "i", [1, 2, 0]),
        lambda a: lax.pbroadcast(a, "i", 2),
        lambda a: lax.psum_scatter(a, "i"),
        lambda a: lax.psum_scatter(a, "i", tiled=True),
        lambda a: lax.all_to_all(a, "i", 0, 1),
        lambda a: lax.all_to_all(a, "i", 0, 1, tiled=True),
        lambda a: lax.pswapaxes(a, "i", 0),
        lambda a: lax.all_gather(a, "i", axis=1),
    ]
    for coll in cases:
        def loss(a, w_row):
            return tnp.sum(tnp.sin(coll(a)) * tnp.sum(w_row))

        per_member = tracer.vmap(tracer.grad(loss), axis_name="i")(x, w)
        total = tracer.grad(lambda a: tnp.sum(tracer.vmap(loss, axis_name="i")(a, w)))(x)
        np.testing.assert_allclose(per_member, total, rtol=1e-12, atol=1e-14)
        check_grads(lambda a: tracer.vmap(coll, axis_name="i")(a), (x,), 2)


def test_psum_scatter():
    y = np.arange(18.0).reshape(3, 3, 2)
    # recorded from jax.lax.psum_scatter under vmap
    np.testing.assert_array_equal(_vm(lambda a: lax.psum_scatter(a, "i"), y),
                                  [[18, 21], [24, 27], [30, 33]])
    np.testing.assert_array_equal(
        _vm(lambda a: lax.psum_scatter(a, "i", scatter_dimension=1),
            np.arange(18.0).reshape(3, 2, 3)), [[18, 27], [21, 30], [24, 33]])
    np.testing.assert_array_equal(
        _vm(lambda a: lax.psum_scatter(a, "i", tiled=True), np.arange(36.0).reshape(3, 6, 2)),
        [[[36, 39], [42, 45]], [[48, 51], [54, 57]], [[60, 63], [66, 69]]])
    got = _vm(lambda a, c: lax.psum_scatter(c, "i") + 0 * a, np.ones(3), np.arange(3.0),
              in_axes=(0, None))
    np.testing.assert_array_equal(got, [0, 3, 6])          # unmapped: 3 * c[b]
    with pytest.raises(ValueError, match=r"psum_scatter: dimension 0 .* must be equal to "
                                         r"the size 3"):
        _vm(lambda a: lax.psum_scatter(a, "i"), np.ones((3, 2)))
    with pytest.raises(ValueError, match="must be a multiple of the size 3"):
        _vm(lambda a: lax.psum_scatter(a, "i", tiled=True), np.ones((3, 4)))


def _a2a_ref(x, s, c, tiled):
    n = x.shape[0]
    outs = []
    for b in range(n):
        if tiled:
            k = x.shape[1 + s] // n
            blocks = [np.take(x[m], range(b * k, (b + 1) * k), axis=s) for m in range(n)]
            outs.append(np.concatenate(blocks, axis=c))
        else:
            outs.append(np.stack([np.take(x[m], b, axis=s) for m in range(n)], axis=c))
    return np.stack(outs)


def test_all_to_all_and_pswapaxes(rng):
    for tiled, s, c in itertools.product((False, True), range(3), range(3)):
        shape = [2, 4, 5]
        shape[s] = 6 if tiled else 3
        x = rng.standard_normal([3] + shape)
        got = _vm(lambda a: lax.all_to_all(a, "i", s, c, tiled=tiled), x)
        np.testing.assert_array_equal(got, _a2a_ref(x, s, c, tiled))
    # recorded from jax: split 1, concat 0
    got = _vm(lambda a: lax.all_to_all(a, "i", 1, 0), np.arange(18.0).reshape(3, 2, 3))
    assert got.tolist()[1] == [[1.0, 4.0], [7.0, 10.0], [13.0, 16.0]]
    got = _vm(lambda a: lax.pswapaxes(a, "i", 1), np.arange(18.0).reshape(3, 2, 3))
    assert got.tolist()[0] == [[0.0, 6.0, 12.0], [3.0, 9.0, 15.0]]
    with pytest.raises(ValueError, match=r"all_to_all: split_axis 1 .* must be equal to"):
        _vm(lambda a: lax.all_to_all(a, "i", 1, 0), np.ones((3, 2, 4)))


def test_nested_vmaps_pass_other_names_through(rng):
    x = rng.standard_normal((3, 2, 3, 4))       # axes i, j, then per-member (3, 4)
    inner = lambda a: lax.all_to_all(a, "i", 0, 1)
    got = tracer.vmap(tracer.vmap(inner, axis_name="j"), axis_name="i")(x)
    for j in range(2):
        np.testing.assert_array_equal(got[:, j], _a2a_ref(x[:, j], 0, 1, False))
    got = tracer.vmap(tracer.vmap(lambda a: lax.ppermute(a, "i", [(0, 2), (2, 0), (1, 1)]),
                                  axis_name="j"), axis_name="i")(x)
    np.testing.assert_array_equal(got, x[[2, 1, 0]])
    # all_gather over the outer name of a value mapped by both vmaps
    y = rng.standard_normal((2, 3, 4))
    got = tracer.vmap(tracer.vmap(lambda a: lax.all_gather(a, "i"), axis_name="j"),
                      axis_name="i")(y)
    np.testing.assert_array_equal(got, np.broadcast_to(y.transpose(1, 0, 2)[None], (2, 3, 2, 4)))
    # inside jit, inside vmap
    got = _vm(tracer.jit(lambda a: lax.psum_scatter(a, "i")), np.arange(18.0).reshape(3, 3, 2))
    np.testing.assert_array_equal(got, [[18, 21], [24, 27], [30, 33]])


def test_psend_precv():
    x = np.arange(12.0).reshape(3, 4)
    perm = [(0, 1), (1, 2), (2, 0)]

    def f(a):
        tok = lax.psend(a, "i", perm)
        return lax.precv(tok, ShapeDtypeStruct((4,), np.float64), "i", perm)

    np.testing.assert_array_equal(_vm(f, x), x[[2, 0, 1]])
    np.testing.assert_array_equal(tracer.jit(tracer.vmap(f, axis_name="i"))(x), x[[2, 0, 1]])

    def g(a):          # the receive may use a fresh token; values pair up first-in first-out
        lax.psend(a, "i", [(0, 1)])
        lax.psend(2 * a, "i", [(0, 1)])
        r1 = lax.precv(lax.create_token(), ShapeDtypeStruct((4,), np.float64), "i", [(0, 1)])
        r2 = lax.precv(lax.create_token(), ShapeDtypeStruct((4,), np.float64), "i", [(0, 1)])
        return r1, r2

    r1, r2 = _vm(g, x)
    np.testing.assert_array_equal(r1, [np.zeros(4), x[0], np.zeros(4)])
    np.testing.assert_array_equal(r2, [np.zeros(4), 2 * x[0], np.zeros(4)])
    with pytest.raises(ValueError, match="precv over axis 'i' .* nothing was sent"):
        _vm(lambda a: lax.precv(lax.create_token(), ShapeDtypeStruct((4,), np.float64), "i",
                                perm), x)
    with pytest.raises(TypeError, match="precv: out_shape f32"):
        _vm(lambda a: lax.precv(lax.psend(a, "i", perm),
                                ShapeDtypeStruct((4,), np.float32), "i", perm), x)


def test_pcast_and_collective_errors():
    x = np.arange(6.0).reshape(3, 2)
    np.testing.assert_array_equal(_vm(lambda a: lax.pcast(a, "i", to="varying"), x), x)
    assert lax.pcast(x, (), to="varying") is x
    with pytest.raises(ValueError, match="pcast: unexpected to='bogus'"):
        _vm(lambda a: lax.pcast(a, "i", to="bogus"), x)
    for fn in (lambda a: lax.ppermute(a, "i", [(0, 1)]), lambda a: lax.pbroadcast(a, "i", 0),
               lambda a: lax.psum_scatter(a, "i"), lambda a: lax.all_to_all(a, "i", 0, 0),
               lambda a: lax.psend(a, "i", [(0, 1)]), lambda a: lax.axis_size("i"),
               lambda a: lax.pcast(a, "i", to="varying")):
        with pytest.raises(NameError, match=r"unbound axis name: 'i'"):
            fn(x)
        with pytest.raises(NameError, match=r"unbound axis name: 'i'"):
            tracer.make_jaxpr(fn)(x)
    with pytest.raises(ValueError, match="repeats a source or a destination"):
        _vm(lambda a: lax.ppermute(a, "i", [(0, 1), (2, 1)]), x)
    with pytest.raises(ValueError, match="outside the axis of size 3"):
        _vm(lambda a: lax.ppermute(a, "i", [(0, 3)]), x)
    with pytest.raises(ValueError, match=r"pshuffle: perm \[0, 0, 1\] is not a permutation"):
        _vm(lambda a: lax.pshuffle(a, "i", [0, 0, 1]), x)
    with pytest.raises(ValueError, match="pbroadcast: source 5 is outside axis 'i'"):
        _vm(lambda a: lax.pbroadcast(a, "i", 5), x)


# ==================================== ragged_all_to_all ====================================

def _ragged_a2a_ref(op, out, io, ss, oo, rs):
    """By JAX's pseudo-code, receivers first: member axis leading everywhere."""
    m_size, n = io.shape
    spd = n // m_size
    res = out.copy()
    for j in range(m_size):
        for i in range(n):
            m, t = divmod(i, spd)
            s = j * spd + t
            for p in range(rs[j, i]):
                res[j, oo[m, s] + p] = op[m, io[m, s] + p]
    return res


def _ragged_case(rng):
    op, out = rng.standard_normal((2, 8, 2)), rng.standard_normal((2, 9, 2))
    ss = np.array([[1, 2, 2, 0], [2, 1, 1, 2]], np.int32)
    io = np.array([[0, 1, 3, 6], [0, 2, 3, 5]], np.int32)
    rs = np.array([[ss[m, j * 2 + t] for m in range(2) for t in range(2)] for j in range(2)],
                  np.int32)
    oo = np.array([[0, 1, 0, 2], [4, 6, 5, 6]], np.int32)
    return op, out, io, ss, oo, rs


def test_ragged_all_to_all(rng):
    args = _ragged_case(rng)
    f = lambda *a: lax.ragged_all_to_all(*a, axis_name="i")
    np.testing.assert_array_equal(_vm(f, *args), _ragged_a2a_ref(*args))
    op, out, io, ss, oo, rs = args
    # 1-D rows, one slot per peer (the example of JAX's docstring, shrunk)
    op1, out1 = np.arange(1, 13.0).reshape(2, 6), -np.ones((2, 7))
    io1, ss1 = np.array([[0, 2], [0, 3]], np.int32), np.array([[2, 3], [3, 1]], np.int32)
    oo1, rs1 = np.array([[0, 0], [2, 3]], np.int32), np.array([[2, 3], [3, 1]], np.int32)
    np.testing.assert_array_equal(_vm(f, op1, out1, io1, ss1, oo1, rs1),
                                  [[1, 2, 7, 8, 9, -1, -1], [3, 4, 5, 10, -1, -1, -1]])

    def loss(op, out, io, ss, oo, rs):
        return tnp.sum(f(op, out, io, ss, oo, rs) ** 2 * tnp.arange(9.0)[:, None])

    per_member = tracer.vmap(tracer.grad(loss, argnums=(0, 1)), axis_name="i")(*args)
    total = tracer.grad(lambda a, b: tnp.sum(tracer.vmap(loss, axis_name="i")(
        a, b, io, ss, oo, rs)), argnums=(0, 1))(op, out)
    for u, v in zip(per_member, total):
        np.testing.assert_allclose(u, v, rtol=1e-12, atol=1e-14)
    check_grads(lambda a, b: tracer.vmap(f, axis_name="i")(a, b, io, ss, oo, rs), (op, out), 1)
    with pytest.raises(TypeError, match="must be a multiple of the size 2"):
        _vm(f, op, out, io[:, :3], ss[:, :3], oo[:, :3], rs[:, :3])
    with pytest.raises(NameError, match="unbound axis name"):
        f(op[0], out[0], io[0], ss[0], oo[0], rs[0])
