"""lax indexing primitives: gather, the scatter family, dynamic_slice and
dynamic_update_slice against loop references written from the spec's formal definitions;
out-of-range handling per mode; duplicate indices; check_grads in both modes; check_vmap
over every combination of batched arguments; jit against eager; errors naming shapes."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import tracer
import lax
from lax import GatherDimensionNumbers as GDN, ScatterDimensionNumbers as SDN
from tracer.core import Array
from tracer.test_util import check_grads, check_jit, check_vmap

CLIP, FILL, PROMISE = "clip", "fill", "promise_in_bounds"


# ------------------------------ references from the spec -------------------------------

def gather_ref(operand, indices, dn, slice_sizes, mode="clip", fill=None):
    """XLA 'Gather' (General Semantics), one output element at a time."""
    operand, indices = np.asarray(operand), np.asarray(indices)
    batch_shape = indices.shape[:-1]
    offset_operand = [d for d in range(operand.ndim)
                      if d not in dn.collapsed_slice_dims and d not in dn.operand_batching_dims]
    out_rank = len(batch_shape) + len(dn.offset_dims)
    out_shape, b = [], iter(batch_shape)
    for i in range(out_rank):
        out_shape.append(slice_sizes[offset_operand[dn.offset_dims.index(i)]]
                         if i in dn.offset_dims else next(b))
    out = np.zeros(out_shape, operand.dtype)
    batch_dims = [i for i in range(out_rank) if i not in dn.offset_dims]
    for out_idx in np.ndindex(*out_shape):
        G = tuple(out_idx[i] for i in batch_dims)
        S = indices[G] if batch_shape else indices
        start = [0] * operand.ndim
        for k, d in enumerate(dn.start_index_map):
            start[d] = int(S[k])
        for od, idd in zip(dn.operand_batching_dims, dn.start_indices_batching_dims):
            start[od] = G[idd]
        ok = all(0 <= s <= n - z for s, n, z in zip(start, operand.shape, slice_sizes))
        start = [min(max(s, 0), n - z) for s, n, z in zip(start, operand.shape, slice_sizes)]
        full = list(start)
        for k, od in enumerate(dn.offset_dims):
            full[offset_operand[k]] += out_idx[od]
        if mode == FILL and not ok:
            out[out_idx] = fill
        else:
            out[out_idx] = operand[tuple(full)]
    return out


def scatter_ref(operand, indices, updates, dn, combine, mode="fill"):
    """XLA 'Scatter', windows visited in row-major order of the update scatter dims; a
    window whose start is out of range is dropped (or clamped with mode='clip')."""
    out = np.array(operand, copy=True)
    indices, updates = np.asarray(indices), np.asarray(updates)
    batch_shape = indices.shape[:-1]
    uwd = dn.update_window_dims
    usd = [d for d in range(updates.ndim) if d not in uwd]
    wd = [d for d in range(out.ndim)
          if d not in dn.inserted_window_dims and d not in dn.operand_batching_dims]
    win = [updates.shape[k] for k in uwd]
    sizes = [1] * out.ndim
    for d, s in zip(wd, win):
        sizes[d] = s
    for G in np.ndindex(*batch_shape):
        S = indices[G] if batch_shape else indices
        start = [0] * out.ndim
        for k, d in enumerate(dn.scatter_dims_to_operand_dims):
            start[d] = int(S[k])
        for od, idd in zip(dn.operand_batching_dims, dn.scatter_indices_batching_dims):
            start[od] = G[idd]
        if mode == CLIP:
            if any(n - z < 0 for n, z in zip(out.shape, sizes)):
                continue
            start = [min(max(s, 0), n - z) for s, n, z in zip(start, out.shape, sizes)]
        elif not all(0 <= s <= n - z for s, n, z in zip(start, out.shape, sizes)):
            continue
        for W in np.ndindex(*win):
            U = [0] * updates.ndim
            for d, g in zip(usd, G):
                U[d] = g
            for k, w in zip(uwd, W):
                U[k] = w
            target = list(start)
            for d, w in zip(wd, W):
                target[d] += w
            target = tuple(target)
            out[target] = combine(out[target], updates[tuple(U)])
    return out


COMBINE = {
    "scatter": lambda old, new: new,
    "scatter_add": lambda old, new: old + new,
    "scatter_sub": lambda old, new: old - new,
    "scatter_mul": lambda old, new: old * new,
    "scatter_min": lambda old, new: np.minimum(old, new),
    "scatter_max": lambda old, new: np.maximum(old, new),
}


# ------------------------------------ configurations ------------------------------------
# (operand shape, indices shape, dimension numbers, slice sizes, index range)

GATHER_CASES = {
    "take_rows": ((5, 3), (4, 1), GDN((1,), (0,), (0,)), (1, 3)),
    "gather_nd": ((4, 5), (2, 3, 2), GDN((), (0, 1), (0, 1)), (1, 1)),
    "windows": ((6, 7), (3, 2), GDN((1, 2), (), (0, 1)), (2, 3)),
    "offset_middle": ((4, 3, 5), (2, 1), GDN((0, 2), (1,), (1,)), (4, 1, 5)),
    "permuted_map": ((4, 5, 3), (2, 2), GDN((1,), (0, 2), (2, 0)), (1, 5, 1)),
    "batching": ((3, 4, 2), (3, 5, 1), GDN((2,), (1,), (1,), (0,), (0,)), (1, 1, 2)),
    "batching_inner": ((4, 3), (2, 3, 1), GDN((), (0,), (0,), (1,), (1,)), (1, 1)),
    "no_index_vector": ((4, 3), (2, 0), GDN((1, 2), (), ()), (2, 3)),
    "scalar_batch": ((5, 2), (1,), GDN((0,), (0,), (0,)), (1, 2)),
    "rank0_operand": ((), (3, 0), GDN((), (), ()), ()),
}


def _rand_indices(rng, shape, lo, hi):
    return rng.integers(lo, hi, size=shape).astype(np.int64)


def _gather_inputs(name, rng, oob=False, dtype=np.float64):
    oshape, ishape, dn, sizes = GATHER_CASES[name]
    x = rng.standard_normal(oshape).astype(dtype)
    hi = max(oshape) if oshape else 1
    lo, hi = (-3, hi + 3) if oob else (0, hi)
    idx = _rand_indices(rng, ishape, lo, hi)
    if not oob:
        # In range for the mapped dims.
        for k, d in enumerate(dn.start_index_map):
            idx[..., k] %= max(oshape[d] - sizes[d] + 1, 1)
    return x, idx, dn, sizes


@pytest.mark.parametrize("name", list(GATHER_CASES))
@pytest.mark.parametrize("mode", [CLIP, FILL, PROMISE])
def test_gather_matches_spec_reference(name, mode, rng):
    x, idx, dn, sizes = _gather_inputs(name, rng, oob=True)
    got = lax.gather(x, idx, dn, sizes, mode=mode, fill_value=-7.0)
    want = gather_ref(x, idx, dn, sizes, FILL if mode == FILL else CLIP, fill=-7.0)
    assert got.shape == want.shape and got.dtype == x.dtype
    np.testing.assert_array_equal(np.asarray(got), want)


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint16, np.int32, np.float16,
                                   np.float32, np.complex64])
def test_gather_dtypes_and_default_fill(dtype, rng):
    x = (rng.standard_normal((5, 3)) * 10).astype(dtype)
    idx = np.array([[0], [4], [5], [-1]])
    dn = GATHER_CASES["take_rows"][2]
    got = np.asarray(lax.gather(x, idx, dn, (1, 3), mode=FILL))
    np.testing.assert_array_equal(got[:2], x[[0, 4]])
    dt = np.dtype(dtype)
    expect_fill = (np.nan if dt.kind in "fc" else np.iinfo(dt).min if dt.kind == "i"
                   else np.iinfo(dt).max if dt.kind == "u" else True)
    np.testing.assert_array_equal(got[2:], np.full((2, 3), expect_fill, dt))
    np.testing.assert_array_equal(np.asarray(lax.gather(x, idx, dn, (1, 3), mode=CLIP)),
                                  x[[0, 4, 4, 0]])


def test_gather_index_dtypes(rng):
    x = rng.standard_normal((300, 2))
    dn = GATHER_CASES["take_rows"][2]
    for dt in (np.int8, np.uint8, np.int16, np.uint64, np.int32):
        idx = np.array([[0], [100], [127]], dtype=dt)
        np.testing.assert_array_equal(np.asarray(lax.gather(x, idx, dn, (1, 2))),
                                      x[idx[:, 0].astype(np.int64)])
    huge = np.array([[2 ** 64 - 1]], dtype=np.uint64)  # clamps to the end, never wraps
    np.testing.assert_array_equal(np.asarray(lax.gather(x, huge, dn, (1, 2), mode=CLIP)),
                                  x[[299]])


def test_gather_default_mode_clamps_scatter_default_drops():
    # jax.lax defaults: gather mode=None is PROMISE_IN_BOUNDS (clamped here), scatter
    # mode=None is FILL_OR_DROP.
    x = np.arange(5.)
    gdn, sdn = GDN((), (0,), (0,)), SDN((), (0,), (0,))
    idx = np.array([[7], [-3]])
    np.testing.assert_array_equal(np.asarray(lax.gather(x, idx, gdn, (1,))), [4., 0.])
    np.testing.assert_array_equal(np.asarray(lax.scatter_add(x, idx, np.ones(2), sdn)), x)


def test_gather_empty_and_size_one():
    x = np.arange(6.).reshape(3, 2)
    dn = GATHER_CASES["take_rows"][2]
    out = lax.gather(x, np.zeros((0, 1), np.int64), dn, (1, 2))
    assert out.shape == (0, 2)
    out = lax.gather(np.zeros((1, 0)), np.array([[0], [0]]), dn, (1, 0))
    assert out.shape == (2, 0)
    np.testing.assert_array_equal(np.asarray(lax.gather(x[:1], np.array([[3]]), dn, (1, 2),
                                                        mode=CLIP)), x[:1])


@pytest.mark.parametrize("name", ["take_rows", "gather_nd", "windows", "offset_middle",
                                  "batching", "no_index_vector"])
@pytest.mark.parametrize("mode", [CLIP, FILL])
def test_gather_grads(name, mode, rng):
    x, idx, dn, sizes = _gather_inputs(name, rng, oob=True)
    check_grads(lambda x: lax.gather(x, idx, dn, sizes, mode=mode, fill_value=0.5), (x,),
                order=2)


def test_gather_transpose_accumulates_duplicates_and_clamped():
    x = np.arange(4.)
    idx = np.array([[1], [1], [9], [-2]])
    dn = GDN((), (0,), (0,))
    g = tracer.grad(lambda x: lax.gather(x, idx, dn, (1,), mode=CLIP).sum())(x)
    np.testing.assert_array_equal(np.asarray(g), [1., 2., 0., 1.])
    g = tracer.grad(lambda x: lax.gather(x, idx, dn, (1,), mode=FILL).sum())(x)
    np.testing.assert_array_equal(np.asarray(g), [0., 2., 0., 0.])


def _vmap_axes_cases(nargs):
    # every subset batched, the batch axis at the front or the back
    for mask in itertools.product([False, True], repeat=nargs):
        if not any(mask):
            continue
        for where in ("front", "back"):
            yield mask, where


def _batched(arg, mapped, where, size, rng):
    arg = np.asarray(arg)
    if not mapped:
        return arg, None
    reps = []
    for i in range(size):
        if arg.dtype.kind in "iu":
            reps.append(np.clip(arg + rng.integers(-1, 2, arg.shape), -2, None))
        else:
            reps.append(arg + i + rng.standard_normal(arg.shape).astype(arg.dtype))
    axis = 0 if where == "front" else arg.ndim
    return np.stack(reps, axis=axis), axis


@pytest.mark.parametrize("name", ["take_rows", "windows", "batching", "no_index_vector",
                                  "permuted_map"])
@pytest.mark.parametrize("mode", [CLIP, FILL])
def test_gather_vmap(name, mode, rng):
    x, idx, dn, sizes = _gather_inputs(name, rng)
    for mask, where in _vmap_axes_cases(2):
        (bx, ax), (bi, ai) = (_batched(x, mask[0], where, 3, rng),
                              _batched(idx, mask[1], where, 3, rng))
        check_vmap(lambda x, i: lax.gather(x, i, dn, sizes, mode=mode), (bx, bi),
                   in_axes=(ax, ai))


def test_gather_jit_and_jaxpr(rng):
    x, idx, dn, sizes = _gather_inputs("windows", rng)
    check_jit(lambda x, i: lax.gather(x, i, dn, sizes, mode=FILL), (x, idx))
    text = str(tracer.make_jaxpr(lambda x, i: lax.gather(x, i, dn, sizes))(x, idx))
    assert "gather[" in text and "slice_sizes=(2, 3)" in text


# --------------------------------------- scatter ----------------------------------------

SCATTER_CASES = {
    "rows": ((5, 3), (4, 1), SDN((1,), (0,), (0,)), (4, 3)),
    "elements": ((4, 5), (2, 3, 2), SDN((), (0, 1), (0, 1)), (2, 3)),
    "windows": ((6, 7), (3, 2), SDN((1, 2), (), (0, 1)), (3, 2, 3)),
    "window_first": ((6, 4), (3, 1), SDN((0,), (0,), (0,)), (4, 3)),
    "batching": ((3, 4, 2), (3, 5, 1), SDN((2,), (1,), (1,), (0,), (0,)), (3, 5, 2)),
    "no_index_vector": ((4, 3), (2, 0), SDN((1, 2), (), ()), (2, 2, 3)),
}


def _scatter_inputs(name, rng, dups=True, oob=True, dtype=np.float64):
    oshape, ishape, dn, ushape = SCATTER_CASES[name]
    x = rng.standard_normal(oshape).astype(dtype)
    u = rng.standard_normal(ushape).astype(dtype)
    hi = max(oshape)
    idx = rng.integers(-2 if oob else 0, hi + 2 if oob else hi, ishape)
    if not oob:
        uwd = dn.update_window_dims
        wd = [d for d in range(len(oshape)) if d not in dn.inserted_window_dims
              and d not in dn.operand_batching_dims]
        win = dict(zip(wd, [ushape[k] for k in uwd]))
        for k, d in enumerate(dn.scatter_dims_to_operand_dims):
            idx[..., k] %= oshape[d] - win.get(d, 1) + 1
    if dups and idx.size:
        idx.reshape(-1, ishape[-1])[-1] = idx.reshape(-1, ishape[-1])[0]
    return x, idx, dn, u


@pytest.mark.parametrize("name", list(SCATTER_CASES))
@pytest.mark.parametrize("op", list(COMBINE))
@pytest.mark.parametrize("mode", [CLIP, FILL, PROMISE])
def test_scatter_matches_spec_reference(name, op, mode, rng):
    x, idx, dn, u = _scatter_inputs(name, rng)
    got = getattr(lax, op)(x, idx, u, dn, mode=mode)
    want = scatter_ref(x, idx, u, dn, COMBINE[op], CLIP if mode == CLIP else FILL)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-12)


def test_scatter_duplicates_accumulate_and_out_of_range_dropped():
    dn = SDN((), (0,), (0,))
    idx = np.array([[1], [1], [3], [7], [-1], [1]])
    u = np.array([1., 2., 3., 4., 5., 6.])
    np.testing.assert_array_equal(np.asarray(lax.scatter_add(np.zeros(4), idx, u, dn)),
                                  [0., 9., 0., 3.])
    np.testing.assert_array_equal(np.asarray(lax.scatter_add(np.zeros(4), idx, u, dn,
                                                             mode=CLIP)),
                                  [5., 9., 0., 7.])
    np.testing.assert_array_equal(np.asarray(lax.scatter(np.zeros(4), idx, u, dn)),
                                  [0., 6., 0., 3.])  # the last update wins
    np.testing.assert_array_equal(np.asarray(lax.scatter_mul(np.ones(4), idx, u, dn)),
                                  [1., 12., 1., 3.])
    np.testing.assert_array_equal(np.asarray(lax.scatter_min(np.full(4, 2.5), idx, u, dn)),
                                  [2.5, 1., 2.5, 2.5])
    np.testing.assert_array_equal(np.asarray(lax.scatter_max(np.zeros(4), idx, u, dn)),
                                  [0., 6., 0., 3.])
    np.testing.assert_array_equal(np.asarray(lax.scatter_sub(np.zeros(4), idx, u, dn)),
                                  [0., -9., 0., -3.])


def test_scatter_partial_window_dropped_whole():
    # XLA drops the whole window when its start is out of range (no partial writes).
    dn = SDN((1,), (), (0,))
    out = lax.scatter_add(np.zeros(4), np.array([[3], [1], [-1]]), np.ones((3, 2)), dn)
    np.testing.assert_array_equal(np.asarray(out), [0., 1., 1., 0.])
    out = lax.scatter_add(np.zeros(4), np.array([[3], [1], [-1]]), np.ones((3, 2)), dn,
                          mode=CLIP)
    np.testing.assert_array_equal(np.asarray(out), [1., 2., 2., 1.])


@pytest.mark.parametrize("dtype", [np.int8, np.uint32, np.int64, np.float16, np.float32,
                                   np.complex128, np.bool_])
def test_scatter_dtypes(dtype, rng):
    dt = np.dtype(dtype)
    x = (rng.standard_normal((5, 3)) * 4).astype(dt)
    u = (rng.standard_normal((4, 3)) * 4).astype(dt)
    idx = np.array([[0], [2], [2], [9]])
    dn = SCATTER_CASES["rows"][2]
    ops = ["scatter"] + ([] if dt == np.bool_ else ["scatter_add", "scatter_mul"]) + \
        ([] if dt.kind == "c" else ["scatter_min", "scatter_max"])
    for op in ops:
        got = getattr(lax, op)(x, idx, u, dn)
        assert got.dtype == dt
        with np.errstate(all="ignore"):
            want = scatter_ref(x, idx, u, dn, COMBINE[op])
        np.testing.assert_array_equal(np.asarray(got), want)


def test_scatter_nan_and_empty():
    dn = SDN((), (0,), (0,))
    out = lax.scatter_max(np.array([1., np.nan, 3.]), np.array([[0], [2]]),
                          np.array([np.nan, 1.]), dn)
    np.testing.assert_array_equal(np.asarray(out), [np.nan, np.nan, 3.])
    assert lax.scatter_add(np.zeros(0), np.zeros((0, 1), np.int64), np.zeros(0), dn).shape \
        == (0,)
    np.testing.assert_array_equal(
        np.asarray(lax.scatter_add(np.ones(3), np.zeros((0, 1), np.int64), np.zeros(0), dn)),
        np.ones(3))
    # An operand with a zero-size inserted dim: every window is dropped.
    assert lax.scatter(np.zeros(0), np.array([[0]]), np.ones(1), dn, mode=CLIP).shape == (0,)


@pytest.mark.parametrize("name", ["rows", "windows", "window_first", "batching",
                                  "no_index_vector"])
@pytest.mark.parametrize("op", ["scatter_add", "scatter_sub", "scatter_mul", "scatter"])
@pytest.mark.parametrize("mode", [CLIP, FILL])
def test_scatter_grads_with_duplicates(name, op, mode, rng):
    x, idx, dn, u = _scatter_inputs(name, rng, dups=True, oob=True)
    check_grads(lambda x, u: getattr(lax, op)(x, idx, u, dn, mode=mode), (x, u), order=2)


@pytest.mark.parametrize("op", ["scatter", "scatter_mul"])
def test_scatter_grads_unique_indices(op, rng):
    x, idx, dn, u = _scatter_inputs("rows", rng, dups=False, oob=False)
    idx = np.array([[3], [0], [4], [1]])
    check_grads(lambda x, u: getattr(lax, op)(x, idx, u, dn, unique_indices=True), (x, u),
                order=2)


def test_scatter_mul_grad_with_zero_updates():
    dn = SDN((), (0,), (0,))
    idx = np.array([[0], [0], [1], [1], [1], [2]])
    u = np.array([0., 3., 0., 0., 2., 5.])
    x = np.array([2., 3., 4.])
    check_grads(lambda x, u: lax.scatter_mul(x, idx, u, dn), (x, u), order=1)
    g = tracer.grad(lambda u: lax.scatter_mul(x, idx, u, dn).sum())(u)
    # position 0: 2*u0*u1 -> d/du0 = 2*3; position 1 has two zeros -> all 0; position 2: 4.
    np.testing.assert_allclose(np.asarray(g), [6., 0., 0., 0., 0., 4.])


@pytest.mark.parametrize("op", ["scatter_min", "scatter_max"])
def test_scatter_extremal_grads(op, rng):
    x, idx, dn, u = _scatter_inputs("rows", rng, dups=True, oob=True)
    check_grads(lambda x, u: getattr(lax, op)(x, idx, u, dn), (x, u), order=1)
    # Ties split the gradient equally between operand and winning updates.
    d1 = SDN((), (0,), (0,))
    g_x, g_u = tracer.grad(lambda x, u: getattr(lax, op)(x, np.array([[0], [0], [1]]), u,
                                                         d1).sum(), argnums=(0, 1))(
        np.array([1., 5.]), np.array([1., 1., 2.]))
    if op == "scatter_min":
        np.testing.assert_allclose(np.asarray(g_x), [1 / 3, 0.])
        np.testing.assert_allclose(np.asarray(g_u), [1 / 3, 1 / 3, 1.])
    else:
        np.testing.assert_allclose(np.asarray(g_x), [1 / 3, 1.])
        np.testing.assert_allclose(np.asarray(g_u), [1 / 3, 1 / 3, 0.])


@pytest.mark.parametrize("name", ["rows", "windows", "batching", "no_index_vector"])
@pytest.mark.parametrize("op", list(COMBINE))
def test_scatter_vmap(name, op, rng):
    x, idx, dn, u = _scatter_inputs(name, rng, dups=True, oob=True)
    for mask, where in _vmap_axes_cases(3):
        bx, ax = _batched(x, mask[0], where, 2, rng)
        bi, ai = _batched(idx, mask[1], where, 2, rng)
        bu, au = _batched(u, mask[2], where, 2, rng)
        check_vmap(lambda x, i, u: getattr(lax, op)(x, i, u, dn), (bx, bi, bu),
                   in_axes=(ax, ai, au))


def test_scatter_jit(rng):
    x, idx, dn, u = _scatter_inputs("windows", rng)
    for op in COMBINE:
        check_jit(lambda x, i, u: getattr(lax, op)(x, i, u, dn), (x, idx, u))


def test_scatter_with_computation_and_apply(rng):
    dn = SDN((), (0,), (0,))
    idx = np.array([[1], [1], [5], [0]])
    u = np.array([2., 3., 4., 5.])
    out = lax.scatter_with_computation(np.ones(3), idx, u, lambda x, v: x * v + 1, dn)
    np.testing.assert_array_equal(np.asarray(out), [6., 10., 1.])  # (1*2+1)*3+1 = 10
    out = lax.scatter_apply(np.array([1., 2., 3.]), idx, lambda x: x * 10, dn,
                            update_shape=(4,))
    np.testing.assert_array_equal(np.asarray(out), [10., 200., 3.])
    f = lambda x: lax.scatter_apply(x, np.array([[2], [0]]), tracer.numpy.sin, dn,  # noqa
                                    update_shape=(2,), unique_indices=True)
    check_grads(f, (np.array([0.3, 0.5, 0.7]),), order=2)
    check_vmap(f, (rng.standard_normal((3, 3)),))
    check_jit(f, (np.array([0.3, 0.5, 0.7]),))
    g = lambda x, u: lax.scatter_with_computation(x, np.array([[2], [0]]), u,  # noqa
                                                  lambda a, b: a * b + b, dn,
                                                  unique_indices=True)
    check_grads(g, (np.array([0.3, 0.5, 0.7]), np.array([1.5, -2.])), order=2)
    with pytest.raises(NotImplementedError, match="unique_indices"):
        tracer.grad(lambda x: lax.scatter_apply(x, idx, tracer.numpy.sin, dn,
                                                update_shape=(4,)).sum())(np.ones(3))
    int_out = lax.scatter_apply(np.arange(4), np.array([[1], [1]]), lambda v: v * 3, dn,
                                update_shape=(2,))
    np.testing.assert_array_equal(np.asarray(int_out), [0, 9, 2, 3])


# ----------------------------------- dynamic slices -------------------------------------

def _ds_ref(x, starts, sizes):
    st = [min(max(s + (n if s < 0 else 0), 0), n - z) for s, n, z in zip(starts, x.shape, sizes)]
    return x[tuple(slice(s, s + z) for s, z in zip(st, sizes))]


def _dus_ref(x, u, starts):
    st = [min(max(s + (n if s < 0 else 0), 0), n - z) for s, n, z in zip(starts, x.shape,
                                                                          u.shape)]
    out = x.copy()
    out[tuple(slice(s, s + z) for s, z in zip(st, u.shape))] = u
    return out


@pytest.mark.parametrize("starts", [(0, 0), (1, 2), (3, 4), (-1, 1), (-9, 9), (100, -100)])
def test_dynamic_slice_clamps(starts, rng):
    x = rng.standard_normal((4, 5))
    for sizes in [(2, 3), (4, 5), (0, 1), (1, 0)]:
        got = lax.dynamic_slice(x, starts, sizes)
        np.testing.assert_array_equal(np.asarray(got), _ds_ref(x, starts, sizes))
        traced = tracer.jit(lambda x, i, j: lax.dynamic_slice(x, (i, j), sizes))(
            x, np.int32(starts[0]), np.int64(starts[1]))
        np.testing.assert_array_equal(np.asarray(traced), _ds_ref(x, starts, sizes))
    u = rng.standard_normal((2, 3))
    np.testing.assert_array_equal(np.asarray(lax.dynamic_update_slice(x, u, starts)),
                                  _dus_ref(x, u, starts))
    traced = tracer.jit(lambda x, u, i, j: lax.dynamic_update_slice(x, u, (i, j)))(
        x, u, starts[0], starts[1])
    np.testing.assert_array_equal(np.asarray(traced), _dus_ref(x, u, starts))


def test_dynamic_slice_negative_indices_flag():
    x = np.arange(5.)
    np.testing.assert_array_equal(np.asarray(lax.dynamic_slice(x, (-1,), (2,))), [3., 4.])
    np.testing.assert_array_equal(
        np.asarray(lax.dynamic_slice(x, (-1,), (2,), allow_negative_indices=False)), [0., 1.])
    np.testing.assert_array_equal(np.asarray(lax.dynamic_index_in_dim(x, -1)), [4.])
    assert lax.dynamic_index_in_dim(x, 2, keepdims=False).shape == ()
    np.testing.assert_array_equal(np.asarray(lax.dynamic_slice_in_dim(x, -2, 2)), [3., 4.])
    y = np.zeros((3, 4))
    np.testing.assert_array_equal(
        np.asarray(lax.dynamic_update_slice_in_dim(y, np.ones((3, 2)), 3, axis=1)),
        np.pad(np.ones((3, 2)), ((0, 0), (2, 0))))
    np.testing.assert_array_equal(
        np.asarray(lax.dynamic_update_index_in_dim(y, np.ones(4), -1, 0)),
        np.concatenate([np.zeros((2, 4)), np.ones((1, 4))]))
    np.testing.assert_array_equal(
        np.asarray(lax.dynamic_update_index_in_dim(y, np.ones((3, 1)), 1, 1))[:, 1], 1.)
    # uint8 starts beyond the axis clamp instead of wrapping
    np.testing.assert_array_equal(np.asarray(lax.dynamic_slice(x, (np.uint8(250),), (2,))),
                                  [3., 4.])


def test_dynamic_slice_grads_vmap_jit(rng):
    x = rng.standard_normal((4, 5))
    ds = lambda x, i, j: lax.dynamic_slice(x, (i, j), (2, 3))  # noqa: E731
    check_grads(lambda x: ds(x, 1, 9), (x,), order=2)
    check_grads(lambda x: ds(x, -1, 0), (x,), order=2)
    xb = rng.standard_normal((3, 4, 5))
    starts_i, starts_j = np.array([0, 3, -1]), np.array([1, 7, 2])
    check_vmap(ds, (xb, starts_i, starts_j))
    check_vmap(ds, (x, starts_i, starts_j), in_axes=(None, 0, 0))
    check_vmap(ds, (x, starts_i, 2), in_axes=(None, 0, None))
    check_vmap(ds, (np.moveaxis(xb, 0, 2), 1, 1), in_axes=(2, None, None))
    check_vmap(ds, (np.moveaxis(xb, 0, 1), starts_i, 1), in_axes=(1, 0, None))
    check_jit(ds, (x, np.int64(1), np.int64(-3)))
    text = str(tracer.make_jaxpr(tracer.vmap(ds, (None, 0, 0)))(x, starts_i, starts_j))
    assert "gather[" in text and "mode=GatherScatterMode.CLIP" in text


def test_dynamic_update_slice_grads_vmap_jit(rng):
    x, u = rng.standard_normal((4, 5)), rng.standard_normal((2, 3))
    dus = lambda x, u, i, j: lax.dynamic_update_slice(x, u, (i, j))  # noqa: E731
    check_grads(lambda x, u: dus(x, u, 1, 9), (x, u), order=2)
    check_grads(lambda x, u: dus(x, u, -7, 1), (x, u), order=2)
    xb, ub = rng.standard_normal((3, 4, 5)), rng.standard_normal((3, 2, 3))
    si, sj = np.array([0, 3, -1]), np.array([1, 7, 2])
    check_vmap(dus, (xb, ub, si, sj))
    check_vmap(dus, (x, ub, si, sj), in_axes=(None, 0, 0, 0))
    check_vmap(dus, (xb, u, si, 0), in_axes=(0, None, 0, None))
    check_vmap(dus, (xb, u, 1, 2), in_axes=(0, None, None, None))
    check_vmap(dus, (x, np.moveaxis(ub, 0, 2), 1, 2), in_axes=(None, 2, None, None))
    check_jit(dus, (x, u, np.int64(3), np.int64(3)))


def test_index_take(rng):
    x = rng.standard_normal((4, 3, 5))
    i0, i2 = np.array([0, 3, 3, 9]), np.array([1, -1, 4, 2])
    got = lax.index_take(x, (i0, i2), (0, 2))
    want = x[np.clip(i0, 0, 3), :, np.clip(i2, 0, 4)]
    np.testing.assert_array_equal(np.asarray(got), want)
    got = lax.index_take(x, (i2, i0), (2, 0))
    np.testing.assert_array_equal(np.asarray(got), want)


# --------------------------------------- errors -----------------------------------------

def test_gather_errors_name_shapes():
    x = np.zeros((4, 3))
    with pytest.raises(TypeError, match=r"gather.*slice_sizes.*f64\[4,3\]"):
        lax.gather(x, np.zeros((2, 1), np.int64), GDN((1,), (0,), (0,)), (1, 4))
    with pytest.raises(TypeError, match="start_index_map"):
        lax.gather(x, np.zeros((2, 2), np.int64), GDN((1,), (0,), (0,)), (1, 3))
    with pytest.raises(TypeError, match="must be integers"):
        lax.gather(x, np.zeros((2, 1)), GDN((1,), (0,), (0,)), (1, 3))
    with pytest.raises(TypeError, match=r"gather: indices must have an integer dtype.*f64"):
        lax.gather_p.bind(x, Array(np.zeros((2, 1))), dimension_numbers=GDN((1,), (0,), (0,)),
                          slice_sizes=(1, 3), indices_are_sorted=False, unique_indices=False,
                          mode=lax.GatherScatterMode.CLIP, fill_value=None)
    with pytest.raises(TypeError, match="collapsed dimension 0 needs slice size"):
        lax.gather(x, np.zeros((2, 1), np.int64), GDN((1,), (0,), (0,)), (2, 3))
    with pytest.raises(TypeError, match="operand rank"):
        lax.gather(x, np.zeros((2, 1), np.int64), GDN((1,), (), (0,)), (1, 3))
    with pytest.raises(TypeError, match="GatherDimensionNumbers"):
        lax.gather(x, np.zeros((2, 1), np.int64), ((1,), (0,), (0,)), (1, 3))
    with pytest.raises(TypeError, match="differ in size"):
        lax.gather(x, np.zeros((3, 1), np.int64), GDN((), (1,), (1,), (0,), (0,)), (1, 1))
    with pytest.raises(ValueError, match="Unknown gather/scatter mode"):
        lax.gather(x, np.zeros((2, 1), np.int64), GDN((1,), (0,), (0,)), (1, 3), mode="wrap")


def test_scatter_and_dynamic_slice_errors():
    dn = SDN((1,), (0,), (0,))
    with pytest.raises(TypeError, match=r"scatter-add.*updates.*f64\[4,3\]"):
        lax.scatter_add(np.zeros((5, 3)), np.zeros((3, 1), np.int64), np.zeros((4, 3)), dn)
    with pytest.raises(TypeError, match="exceeds operand dimension"):
        lax.scatter_add(np.zeros((5, 3)), np.zeros((4, 1), np.int64), np.zeros((4, 4)), dn)
    with pytest.raises(TypeError, match="dtype"):
        lax.scatter_add(np.zeros((5, 3)), np.zeros((4, 1), np.int64),
                        np.zeros((4, 3), np.float32), dn)
    with pytest.raises(TypeError, match="scatter-add does not accept dtype bool"):
        lax.scatter_add(np.zeros(3, bool), np.zeros((1, 1), np.int64), np.ones(1, bool),
                        SDN((), (0,), (0,)))
    with pytest.raises(TypeError, match="one start index per operand dimension"):
        lax.dynamic_slice(np.zeros((4, 3)), (1,), (2, 2))
    with pytest.raises(TypeError, match="slice_sizes"):
        lax.dynamic_slice(np.zeros((4, 3)), (1, 1), (5, 2))
    with pytest.raises(TypeError, match="start indices must be integers"):
        lax.dynamic_slice(np.zeros((4, 3)), (1.0, 1), (2, 2))
    with pytest.raises(TypeError, match="no larger"):
        lax.dynamic_update_slice(np.zeros((4, 3)), np.zeros((5, 1)), (0, 0))


def test_index_arguments_as_arrays():
    x = np.arange(10.).reshape(5, 2)
    got = lax.dynamic_slice(x, Array(np.array([4, 1])), (2, 1))
    np.testing.assert_array_equal(np.asarray(got), [[7.], [9.]])
    dn = GDN((1,), (0,), (0,))
    np.testing.assert_array_equal(np.asarray(lax.gather(x, [[1], [2]], dn, (1, 2))), x[[1, 2]])


# -------------------------------- lowering (jit on Numba) -------------------------------

@pytest.mark.parametrize("name", list(GATHER_CASES))
@pytest.mark.parametrize("mode", [CLIP, FILL])
def test_gather_compiled_matches_eager(name, mode, rng):
    x, idx, dn, sizes = _gather_inputs(name, rng, oob=True)
    check_jit(lambda x, i: lax.gather(x, i, dn, sizes, mode=mode, fill_value=-2.0), (x, idx))


@pytest.mark.parametrize("name", list(SCATTER_CASES))
@pytest.mark.parametrize("mode", [CLIP, FILL])
def test_scatter_compiled_matches_eager(name, mode, rng):
    x, idx, dn, u = _scatter_inputs(name, rng, dups=True, oob=True)
    for op in COMBINE:
        check_jit(lambda x, i, u: getattr(lax, op)(x, i, u, dn, mode=mode), (x, idx, u))


@pytest.mark.parametrize("dtype", [np.float16, np.int8, np.uint64, np.bool_, np.complex64])
def test_indexing_compiled_dtypes(dtype, rng):
    x = (rng.standard_normal((5, 3)) * 5).astype(dtype)
    u = (rng.standard_normal((4, 3)) * 5).astype(dtype)
    idx = np.array([[0], [4], [4], [-3]])
    dn = SCATTER_CASES["rows"][2]
    check_jit(lambda x, i: lax.gather(x, i, GATHER_CASES["take_rows"][2], (1, 3), mode=FILL),
              (x, idx))
    check_jit(lambda x, u, i: lax.dynamic_update_slice(x, u[:2], (i, 0)), (x, u, np.int8(4)))
    check_jit(lambda x, i, u: lax.scatter(x, i, u, dn), (x, idx, u))
    if np.dtype(dtype).kind not in "bc":
        check_jit(lambda x, i, u: lax.scatter_max(x, i, u, dn), (x, idx, u))


def test_lowered_program_shapes():
    x = np.arange(12.).reshape(3, 4)
    text = tracer.jit(lambda x, i: x[i] * 2.).lower(x, np.array([0, 2])).as_text()
    loop_ir = text[text.index("# loop IR"):]
    assert "host_step" not in loop_ir and "kernel(" in loop_ir
    text = tracer.jit(lambda x, i, j: lax.dynamic_slice(x, (i, j), (2, 2)) + 1.).lower(
        x, 1, 2).as_text()
    assert "host_step" not in text[text.index("# loop IR"):]
    text = tracer.jit(lambda x, u, i: lax.dynamic_update_slice(x, u, (i, i))).lower(
        x, np.ones((2, 2)), 1).as_text()
    assert "host_step" not in text[text.index("# loop IR"):]
    dn = SDN((), (0,), (0,))
    text = tracer.jit(lambda x, i, u: lax.scatter_add(x, i, u, dn)).lower(
        np.zeros(4), np.array([[1], [1]]), np.ones(2)).as_text()
    assert "library_call scatter-add (Numba window loop" in text
    text = tracer.jit(lambda x: lax.scatter_apply(x, np.array([[1]]), lambda v: v * 2, dn,
                                                  update_shape=(1,))).lower(np.ones(3)).as_text()
    assert "host_step scatter" in text


def test_compiled_empty_and_clamped(rng):
    # Zero-size results and starts far out of range never read outside the operands
    # (the suite also runs with NUMBA_BOUNDSCHECK=1).
    x = rng.standard_normal((4, 5))
    check_jit(lambda x, i: lax.dynamic_slice(x, (i, i), (0, 3)), (x, 10 ** 9))
    check_jit(lambda x, i: lax.dynamic_slice(x, (i, -i), (4, 5)), (x, 10 ** 9))
    check_jit(lambda x, i: lax.gather(x, i, GDN((1,), (0,), (0,)), (1, 0)),
              (np.zeros((3, 0)), np.array([[7], [-7]])))
    check_jit(lambda x, u, i: lax.dynamic_update_slice(x, u, (i, i)),
              (x, np.zeros((0, 2)), -(10 ** 9)))
    big = np.array([[2 ** 63 + 5]], dtype=np.uint64)
    check_jit(lambda x, i: lax.gather(x, i, GDN((1,), (0,), (0,)), (1, 5), mode=CLIP),
              (x, big))
    check_jit(lambda x, i: lax.gather(x, i, GDN((1,), (0,), (0,)), (1, 5), mode=FILL),
              (x, big))
