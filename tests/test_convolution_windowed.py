"""Convolutions, windowed reductions, SelectAndScatter, cumulative reductions and batch norm:
against direct-loop NumPy references written from the spec, check_grads, check_vmap."""
import itertools

import numpy as np
import pytest

import lax
import tracer
import tracer.numpy as tnp
from lax import windowed as W
from tracer.test_util import check_grads, check_jit, check_vmap

rng = np.random.default_rng(0)


def conv_reference(lhs, rhs, strides, padding, lhs_dil, rhs_dil, G=1):
    """The spec's loop: NCHW / OIHW layouts, dilations as index maps, feature groups."""
    N, C = lhs.shape[:2]
    O, I = rhs.shape[:2]
    sp = lhs.shape[2:]
    K = rhs.shape[2:]
    dil_in = [(n - 1) * d + 1 for n, d in zip(sp, lhs_dil)]
    dil_k = [(k - 1) * d + 1 for k, d in zip(K, rhs_dil)]
    out_sp = [(n + lo + hi - k) // s + 1 for n, (lo, hi), k, s in
              zip(dil_in, padding, dil_k, strides)]
    out = np.zeros((N, O) + tuple(out_sp))
    Og = O // G
    for n, o in itertools.product(range(N), range(O)):
        g = o // Og
        for pos in itertools.product(*(range(x) for x in out_sp)):
            acc = 0.0
            for i in range(I):
                c = g * I + i
                for k in itertools.product(*(range(x) for x in K)):
                    idx = []
                    ok = True
                    for p, s, kk, rd, (lo, _), ld, n_in in zip(pos, strides, k, rhs_dil,
                                                              padding, lhs_dil, sp):
                        q = p * s + kk * rd - lo
                        if q < 0 or q % ld or q // ld >= n_in:
                            ok = False
                            break
                        idx.append(q // ld)
                    if ok:
                        acc += lhs[(n, c) + tuple(idx)] * rhs[(o, i) + k]
            out[(n, o) + pos] = acc
    return out


CONV_CASES = [
    dict(ls=(2, 3, 6, 5), rs=(4, 3, 3, 2), strides=(1, 1), padding=((0, 0), (0, 0)),
         lhs_dil=(1, 1), rhs_dil=(1, 1), G=1),
    dict(ls=(1, 2, 7, 6), rs=(2, 2, 3, 2), strides=(2, 1), padding=((1, 2), (-1, 1)),
         lhs_dil=(1, 2), rhs_dil=(2, 1), G=1),
    dict(ls=(2, 4, 5, 5), rs=(4, 2, 3, 3), strides=(1, 2), padding=((1, 1), (1, 1)),
         lhs_dil=(1, 1), rhs_dil=(1, 1), G=2),
    dict(ls=(2, 3, 9), rs=(2, 3, 4), strides=(3,), padding=((2, 1),), lhs_dil=(2,),
         rhs_dil=(1,), G=1),
]


@pytest.mark.parametrize("case", range(len(CONV_CASES)))
def test_conv_against_loop_reference_and_grads(case):
    c = CONV_CASES[case]
    lhs, rhs = rng.standard_normal(c["ls"]), rng.standard_normal(c["rs"])
    f = lambda l, r: lax.conv_general_dilated(l, r, c["strides"], c["padding"], c["lhs_dil"],
                                              c["rhs_dil"], feature_group_count=c["G"])
    np.testing.assert_allclose(np.asarray(f(lhs, rhs)),
                               conv_reference(lhs, rhs, c["strides"], c["padding"],
                                              c["lhs_dil"], c["rhs_dil"], c["G"]),
                               rtol=1e-10, atol=1e-10)
    check_grads(f, (lhs, rhs), order=2 if case == 0 else 1)
    check_vmap(f, (np.stack([lhs, 2 * lhs]), rhs), in_axes=(0, None))
    check_vmap(f, (lhs, np.stack([rhs, -rhs])), in_axes=(None, 0))
    check_vmap(f, (np.stack([lhs, 2 * lhs], 3), np.stack([rhs, -rhs], 1)), in_axes=(3, 1))


def test_conv_layouts_and_batch_groups():
    x = rng.standard_normal((2, 6, 5, 3))       # NHWC
    k = rng.standard_normal((3, 2, 3, 4))       # HWIO
    out = lax.conv_general_dilated(x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO",
                                                                            "NHWC"))
    ref = conv_reference(x.transpose(0, 3, 1, 2), k.transpose(3, 2, 0, 1), (1, 1),
                         ((1, 1), (0, 1)), (1, 1), (1, 1)).transpose(0, 2, 3, 1)
    np.testing.assert_allclose(np.asarray(out), ref, atol=1e-10)
    # batch_group_count: lhs batch split into groups paired with output-feature groups.
    lhs = rng.standard_normal((4, 3, 5, 5))
    rhs = rng.standard_normal((4, 3, 2, 2))
    out = np.asarray(lax.conv_general_dilated(lhs, rhs, (1, 1), "VALID", batch_group_count=2))
    for b in range(2):
        ref = conv_reference(lhs[2 * b:2 * b + 2], rhs[2 * b:2 * b + 2], (1, 1),
                             ((0, 0), (0, 0)), (1, 1), (1, 1))
        np.testing.assert_allclose(out[:, 2 * b:2 * b + 2], ref, atol=1e-10)
    check_grads(lambda l, r: lax.conv_general_dilated(l, r, (1, 1), "VALID",
                                                      batch_group_count=2), (lhs, rhs), order=1)


def test_conv_bad_shapes():
    with pytest.raises(ValueError, match="feature"):
        lax.conv_general_dilated(np.ones((1, 3, 4, 4)), np.ones((2, 2, 2, 2)), (1, 1), "VALID")
    with pytest.raises(ValueError, match="groups|feature_group_count"):
        lax.conv_general_dilated(np.ones((1, 4, 4, 4)), np.ones((3, 2, 2, 2)), (1, 1), "VALID",
                                 feature_group_count=2)
    with pytest.raises(ValueError, match="strides"):
        lax.conv_general_dilated(np.ones((1, 1, 4, 4)), np.ones((1, 1, 2, 2)), (-1, 1), "VALID")
    with pytest.raises(TypeError, match="dtype"):
        lax.conv_general_dilated(np.ones((1, 1, 4, 4)), np.ones((1, 1, 2, 2), np.float32),
                                 (1, 1), "VALID")
    with pytest.raises(ValueError, match="rank"):
        lax.conv_general_dilated(np.ones((1, 3, 4)), np.ones((2, 3, 2, 2)), (1, 1), "VALID")
    with pytest.raises(ValueError, match="padding"):
        lax.conv(np.ones((1, 1, 4, 4)), np.ones((1, 1, 2, 2)), (1, 1), "FULL")


def test_conv_transpose_matches_recorded_jax_values():
    import json
    import os
    with open(os.path.join(os.path.dirname(__file__), "data", "conv_transpose_jax.json")) as f:
        data = json.load(f)
    x = np.array(data["x"])
    for c in data["cases"]:
        got = lax.conv_transpose(x, np.array(c["k"]), tuple(c["strides"]), c["pad"],
                                 dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                 transpose_kernel=c["tk"])
        np.testing.assert_allclose(np.asarray(got), np.array(c["y"]), rtol=1e-10, atol=1e-12)


def test_patches_and_jit():
    x = rng.standard_normal((2, 3, 5, 5))
    p = np.asarray(lax.conv_general_dilated_patches(x, (2, 3), (1, 2), "VALID"))
    assert p.shape == (2, 3 * 6, 4, 2)
    np.testing.assert_allclose(p[1, 5, 2, 1], x[1, 0, 2 + 1, 2 * 1 + 2])  # c=0, ky=1, kx=2
    k = rng.standard_normal((4, 3, 2, 2))
    check_jit(lambda a, b: lax.conv(a, b, (1, 1), "SAME"), (x, k), atol=1e-12, rtol=1e-12)


# ----------------------------------------- windows --------------------------------------------

def window_reference(x, init, op, wd, ws, pad, bd, wdl):
    padded_shape = [(n - 1) * b + 1 + lo + hi for n, b, (lo, hi) in zip(x.shape, bd, pad)]
    base = np.full(padded_shape, init, float)
    idx = tuple(slice(lo, lo + (n - 1) * b + 1, b) for n, b, (lo, _) in zip(x.shape, bd, pad))
    base[idx] = x
    dw = [(w - 1) * d + 1 for w, d in zip(wd, wdl)]
    out_shape = [(p - w) // s + 1 for p, w, s in zip(padded_shape, dw, ws)]
    out = np.empty(out_shape)
    for pos in itertools.product(*(range(o) for o in out_shape)):
        acc = init
        for k in itertools.product(*(range(w) for w in wd)):
            acc = op(acc, base[tuple(p * s + kk * d for p, s, kk, d in zip(pos, ws, k, wdl))])
        out[pos] = acc
    return out


WINDOW_CASES = [((1, 3, 2), (1, 2, 1), ((0, 0), (0, 0), (0, 0)), (1, 1, 1), (1, 1, 1)),
                ((1, 2, 2), (1, 1, 2), ((0, 0), (1, 2), (0, 1)), (1, 2, 1), (1, 1, 2)),
                ((2, 3, 3), (1, 2, 2), ((0, 1), (1, 1), (2, 2)), (1, 1, 1), (1, 2, 1))]


@pytest.mark.parametrize("case", range(len(WINDOW_CASES)))
def test_reduce_window_against_reference(case):
    wd, ws, pad, bd, wdl = WINDOW_CASES[case]
    x = rng.standard_normal((2, 7, 6))
    for fn, init, op in [(lax.add, 0.0, np.add), (lax.max, -np.inf, np.maximum),
                         (lax.min, np.inf, np.minimum), (lax.mul, 1.0, np.multiply)]:
        ref = window_reference(x, init, op, wd, ws, pad, bd, wdl)
        got = lax.reduce_window(x, init, fn, wd, ws, pad, bd, wdl)
        np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-12)
        # A lambda defeats the monoid fast path: the generic composition gives the same.
        got2 = lax.reduce_window(x, init, lambda a, b: fn(a, b), wd, ws, pad, bd, wdl)
        np.testing.assert_allclose(np.asarray(got2), ref, rtol=1e-12)


def test_reduce_window_variadic_argmax_style():
    x = rng.standard_normal((6,))
    idx = tnp.arange(6.0)

    def comp(a, b):
        take_b = lax.gt(b[0], a[0])
        return (lax.select(take_b, b[0], a[0]), lax.select(take_b, b[1], a[1]))

    v, i = lax.reduce_window((x, idx), (-np.inf, -1.0), comp, (3,), (1,), "VALID")
    windows = np.lib.stride_tricks.sliding_window_view(x, 3)
    np.testing.assert_allclose(np.asarray(v), windows.max(1))
    np.testing.assert_allclose(np.asarray(i), windows.argmax(1) + np.arange(4))


def test_pooling_gradients_ties_and_vmap():
    x = rng.standard_normal((2, 6, 5))
    f = lambda a: lax.reduce_window_max(a, (1, 2, 3), (1, 2, 1), "VALID")
    check_grads(f, (x,), order=2)
    check_grads(lambda a: lax.reduce_window_sum(a, (1, 2, 3), (1, 2, 1), "SAME", (1, 1, 2),
                                                (1, 2, 1)), (x,), order=1)
    # A tie: the first element of the window (row-major) receives the whole gradient.
    t = np.array([[1.0, 3.0, 3.0, 2.0]])
    g = tracer.grad(lambda a: lax.reduce_window_max(a, (1, 4), (1, 1), "VALID").sum())(t)
    np.testing.assert_array_equal(np.asarray(g), [[0, 1, 0, 0]])
    check_vmap(f, (np.stack([x, -x], 1),), in_axes=1)
    check_jit(f, (x,))


def test_select_and_scatter_add_matches_spec():
    operand = np.array([[7.0, 2.0, 5.0, 3.0, 10.0, 2.0],
                        [3.0, 8.0, 9.0, 3.0, 4.0, 2.0],
                        [1.0, 5.0, 7.0, 5.0, 6.0, 1.0],
                        [0.0, 6.0, 2.0, 7.0, 2.0, 8.0]])
    source = np.array([[2.0, 6.0], [3.0, 1.0]])
    out = lax.select_and_scatter_add(source, operand, lax.ge, (2, 3), (2, 3), "VALID")
    # Spec example: windows [[7,2,5],[3,8,9]] -> 9, [[3,10,2],[3,4,2]] -> 10,
    # [[1,5,7],[0,6,2]] -> 7, [[5,6,1],[7,2,8]] -> 8.
    expected = np.zeros_like(operand)
    expected[1, 2] += 2.0
    expected[0, 4] += 6.0
    expected[2, 2] += 3.0
    expected[3, 5] += 1.0
    np.testing.assert_array_equal(np.asarray(out), expected)


@pytest.mark.parametrize("seed", range(4))
def test_select_and_gather_scatter_on_tiling_windows_equal_the_general_path(seed,
                                                                           monkeypatch):
    """Pooling windows that tile the operand (strides equal to the window, no padding or
    dilation) take a reshape path in the NumPy impls; its bytes equal the general path's
    at ties, NaN, -0.0 sources, trailing elements no window covers, 1-3 dims, both
    selects and integer dtypes."""
    rng = np.random.default_rng(seed)
    shape, wd = [((9,), (2,)), ((4, 7), (2, 3)), ((3, 5, 4), (1, 2, 2)), ((6, 6), (3, 1))][seed]
    dt = [np.float32, np.float64, np.int32, np.float32][seed]
    operand = rng.integers(-2, 3, shape).astype(dt)     # (many ties)
    if dt != np.int32:
        operand.flat[rng.integers(0, operand.size, 3)] = np.nan
        operand.flat[rng.integers(0, operand.size, 2)] = -0.0
    out = W._out_shape(shape, wd, wd, [(0, 0)] * len(shape), (1,) * len(shape),
                       (1,) * len(shape))
    source = rng.integers(-3, 4, out).astype(dt)
    if dt != np.int32:
        source.flat[: max(1, source.size // 3)] = -0.0
    tangent = rng.standard_normal(shape).astype(dt)
    params = dict(window_dimensions=wd, window_strides=wd,
                  padding=((0, 0),) * len(shape), base_dilation=(1,) * len(shape),
                  window_dilation=(1,) * len(shape))
    assert W._tiling(operand, wd, wd, params["padding"], params["base_dilation"],
                     params["window_dilation"]) is not None
    for ge in (True, False):
        fast = (W._sas_impl(source, operand, select_ge=ge, **params),
                W._sga_impl(tangent, operand, select_ge=ge, **params))
        with monkeypatch.context() as m:
            m.setattr(W, "_tiling", lambda *a: None)
            general = (W._sas_impl(source, operand, select_ge=ge, **params),
                       W._sga_impl(tangent, operand, select_ge=ge, **params))
        for f, g in zip(fast, general):
            assert f.dtype == g.dtype and f.shape == g.shape
            assert f.tobytes() == g.tobytes()


def _select_and_scatter_ref(operand, select, wd, ws, pad, source, init, scatter):
    """The spec's loop, scalar by scalar: windows in row-major order; a window's in-bounds
    elements in row-major order, the current choice kept while select(current, next)."""
    out = np.full(operand.shape, init, source.dtype)
    for w in np.ndindex(*source.shape):
        best = None
        for off in np.ndindex(*wd):
            at = tuple(w[d] * ws[d] + off[d] - pad[d][0] for d in range(operand.ndim))
            if not all(0 <= a < n for a, n in zip(at, operand.shape)):
                continue
            if best is None or not select(operand[best], operand[at]):
                best = at
        if best is not None:
            out[best] = scatter(out[best], source[w])
    return out


# JAX 0.10.2 (x64): jax._src.lax.windowed_reductions._select_and_scatter on _SS_X, recorded
_SS_X = np.array([[1., 5., 5., 2., -0.], [5., 0., 3., 3., 0.], [4., 4., np.nan, 9., 9.]])
_SS_JAX = [
    # select a > b (ties: the later element), scatter 2 * max(a, b), init -1, padded
    (lambda a, b: lax.gt(a, b), lambda a, b: lax.max(a, b) * 2.0, -1.0, (2, 3), (1, 2),
     ((0, 1), (1, 1)), [[-1, -1, 4, -1, -1], [8, -1, -1, 6, -1], [-1, 14, -1, 20, 24]]),
    # select a >= b (ties: the first), scatter add
    (lambda a, b: lax.ge(a, b), lambda a, b: a + b, 0.0, (2, 3), (1, 2), ((0, 1), (1, 1)),
     [[0, 3, 0, 0, 0], [4, 0, 0, 3, 0], [7, 0, 0, 28, 0]]),
    # select a <= b (min pooling), overlapping windows
    (lambda a, b: lax.le(a, b), lambda a, b: a + b, 0.0, (2, 2), (1, 1), ((0, 0), (0, 0)),
     [[0, 0, 0, 3, 4], [0, 8, 0, 0, 8], [0, 0, 6, 7, 0]]),
]


@pytest.mark.parametrize("case", range(len(_SS_JAX)))
def test_select_and_scatter_matches_jax(case):
    sel, sct, init, wd, ws, pad, want = _SS_JAX[case]
    ones = (1,) * 2
    n = lax.reduce_window_shape_tuple(_SS_X.shape, wd, ws, pad, ones, ones)
    source = np.arange(1.0, 1.0 + np.prod(n)).reshape(n)
    f = lambda x, s: lax.select_and_scatter(x, sel, wd, ws, pad, s, init, sct)
    for fn in (f, tracer.jit(f)):
        np.testing.assert_array_equal(np.asarray(fn(_SS_X, source)), want)


def test_select_and_scatter_spec_example_and_select_and_scatter_add():
    operand = np.array([[7.0, 2.0, 5.0, 3.0, 10.0, 2.0],
                        [3.0, 8.0, 9.0, 3.0, 4.0, 2.0],
                        [1.0, 5.0, 7.0, 5.0, 6.0, 1.0],
                        [0.0, 6.0, 2.0, 7.0, 2.0, 8.0]])
    source = np.array([[2.0, 6.0], [3.0, 1.0]])
    out = lax.select_and_scatter(operand, lax.ge, (2, 3), (2, 3), "VALID", source, 0.0,
                                 lax.add)
    np.testing.assert_array_equal(
        np.asarray(out),
        np.asarray(lax.select_and_scatter_add(source, operand, lax.ge, (2, 3), (2, 3),
                                              "VALID")))
    assert np.asarray(out)[1, 2] == 2.0 and np.asarray(out)[3, 5] == 1.0


@pytest.mark.parametrize("seed", range(3))
def test_select_and_scatter_against_the_spec_loop(seed):
    r = np.random.default_rng(seed)
    # few distinct values: many ties; -0.0/+0.0 compare equal under ge (the first wins)
    operand = r.choice(np.array([0.0, -0.0, 1.0, 2.0, np.inf]), size=(5, 6))
    wd, ws, pad = (2, 3), (2, 1), ((1, 0), (1, 2))
    ones = (1, 1)
    n = lax.reduce_window_shape_tuple(operand.shape, wd, ws, pad, ones, ones)
    source = r.integers(-5, 5, n).astype(np.int32)       # source dtype differs
    cases = [(lambda a, b: a >= b, lax.add, np.add),
             (lambda a, b: a > b, lax.max, np.maximum),
             (lambda a, b: a <= b, lambda a, b: b, lambda a, b: b),       # last write wins
             (lambda a, b: a < b, lax.mul, np.multiply)]
    for sel, sct, np_sct in cases:
        init = np.int32(1)
        want = _select_and_scatter_ref(operand, sel, wd, ws, pad, source, init, np_sct)
        f = lambda x, s: lax.select_and_scatter(x, lambda a, b: sel(a, b), wd, ws, pad, s,
                                                init, sct)
        got = f(operand, source)
        assert np.asarray(got).dtype == np.int32
        np.testing.assert_array_equal(np.asarray(got), want)
        check_jit(f, (operand, source))
    # signed zeros pass through the select untouched: ties keep the first
    z = np.array([[-0.0, 0.0]])
    out = lax.select_and_scatter(z, lax.ge, (1, 2), (1, 1), "VALID", np.array([[5.0]]), 0.0,
                                 lax.add)
    np.testing.assert_array_equal(np.asarray(out), [[5.0, 0.0]])


def test_select_and_scatter_edges_vmap_and_errors():
    sel, sct = lax.ge, lax.add
    # an empty operand, a window entirely in padding, rank 0
    e = lax.select_and_scatter(np.zeros((0, 3)), sel, (1, 1), (1, 1), "VALID",
                               np.zeros((0, 3)), 0.0, sct)
    assert e.shape == (0, 3)
    out = lax.select_and_scatter(np.ones(2), sel, (1,), (1,), ((1, 0),), np.array([7.0, 1.0, 2.0]),
                                 0.5, sct)
    np.testing.assert_array_equal(np.asarray(out), [1.5, 2.5])    # window 0 is padding only
    assert float(lax.select_and_scatter(np.float64(3.0), sel, (), (), (), np.float64(2.0), 1.0,
                                        lax.mul)) == 2.0
    x = rng.standard_normal((3, 4, 6))
    s = rng.standard_normal((3, 2, 3))
    f = lambda x, s: lax.select_and_scatter(x, sel, (2, 2), (2, 2), "VALID", s, 0.0, sct)
    check_vmap(f, (x, s), in_axes=(0, 0))
    check_vmap(f, (np.moveaxis(x, 0, 2), s[0]), in_axes=(2, None))
    with pytest.raises(TypeError, match=r"select_and_scatter: source f64\[3\] must have the "
                                        r"windowed shape \(2, 3\)"):
        lax.select_and_scatter(x[0], sel, (2, 2), (2, 2), "VALID", np.ones(3), 0.0, sct)
    with pytest.raises(TypeError, match="select must return a bool"):
        lax.select_and_scatter(x[0], lax.add, (2, 2), (2, 2), "VALID", s[0], 0.0, sct)
    with pytest.raises(TypeError, match="init_value must be a scalar of source's dtype"):
        lax.select_and_scatter(x[0], sel, (2, 2), (2, 2), "VALID", s[0], np.float32(0), sct)
    with pytest.raises(TypeError, match="scatter must return a scalar of source's dtype"):
        lax.select_and_scatter(x[0], sel, (2, 2), (2, 2), "VALID", s[0], 0.0, lax.lt)
    with pytest.raises(TypeError, match="window_dimensions"):
        lax.select_and_scatter(x[0], sel, (2,), (2, 2), "VALID", s[0], 0.0, sct)


def test_cumulative_reductions():
    x = rng.standard_normal((3, 5))
    np.testing.assert_allclose(np.asarray(lax.cumsum(x, 1)), np.cumsum(x, 1))
    np.testing.assert_allclose(np.asarray(lax.cumsum(x, 0, reverse=True)),
                               np.cumsum(x[::-1], 0)[::-1])
    np.testing.assert_allclose(np.asarray(lax.cumprod(x, 1)), np.cumprod(x, 1))
    np.testing.assert_allclose(np.asarray(lax.cummax(x, 1)), np.maximum.accumulate(x, 1))
    np.testing.assert_allclose(np.asarray(lax.cummin(x, 0)), np.minimum.accumulate(x, 0))
    np.testing.assert_allclose(np.asarray(lax.cumlogsumexp(x, 1)),
                               np.logaddexp.accumulate(x, 1))
    assert np.asarray(lax.cumsum(np.arange(5, dtype=np.int8), 0)).dtype == np.int8
    for f in (lambda a: lax.cumsum(a, 1), lambda a: lax.cumprod(a, 1, reverse=True),
              lambda a: lax.cummax(a, 1), lambda a: lax.cumlogsumexp(a, 0)):
        check_grads(f, (x,), order=2)
        check_vmap(f, (np.stack([x, 2 * x], 2),), in_axes=2)


def test_batch_norm_ops():
    x = rng.standard_normal((4, 3, 5))
    scale, offset = rng.standard_normal(3), rng.standard_normal(3)
    out, mean, var = lax.batch_norm_training(x, scale, offset, 1e-5, 1)
    m = x.mean((0, 2), keepdims=True)
    v = x.var((0, 2), keepdims=True)
    np.testing.assert_allclose(np.asarray(out), (x - m) / np.sqrt(v + 1e-5) * scale[:, None]
                               + offset[:, None], rtol=1e-10)
    np.testing.assert_allclose(np.asarray(mean), m.ravel())
    np.testing.assert_allclose(np.asarray(var), v.ravel())
    inf = lax.batch_norm_inference(x, scale, offset, mean, var, 1e-5, 1)
    np.testing.assert_allclose(np.asarray(inf), np.asarray(out), rtol=1e-12)
    dy = rng.standard_normal(x.shape)
    grads = lax.batch_norm_grad(x, scale, mean, var, dy, 1e-5, 1)
    _, vjp = tracer.vjp(lambda a, s, o: lax.batch_norm_training(a, s, o, 1e-5, 1)[0],
                        x, scale, offset)
    for a, b in zip(grads, vjp(dy)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("case", range(6))
def test_conv_impl_by_taps_equals_the_window_contraction(case, monkeypatch):
    # lax.convolution._conv_by_taps (a matrix product per kernel tap) and _conv_im2col
    # (one product over all taps' patches, for few input channels) against the
    # window-view contraction they replace for small kernels: integers exactly, floats to
    # rounding, over feature groups, strides, kernel dilation and 1-3 spatial dims
    from lax import convolution as C
    cases = [((2, 6, 11, 9), (9, 2, 3, 2), (2, 1), [(1, 2), (0, 1)], (1, 1), (2, 1), 3),
             ((3, 4, 7), (6, 4, 5), (3,), [(2, 2)], (1,), (1,), 1),
             ((2, 4, 5, 6, 7), (6, 2, 2, 3, 2), (1, 1, 2), [(0, 1), (1, 1), (0, 0)],
              (1, 1, 1), (1, 2, 1), 2),
             ((1, 1, 4, 4), (1, 1, 1, 1), (1, 1), [(0, 0), (0, 0)], (1, 1), (1, 1), 1),
             ((2, 3, 6, 6), (4, 3, 3, 3), (1, 1), [(1, 1), (1, 1)], (2, 1), (1, 1), 1),
             ((2, 2, 3, 3), (2, 2, 3, 3), (1, 1), [(0, 0), (0, 0)], (1, 1), (1, 1), 1)]
    xs, ws, st, pad, ld, rd, G = cases[case]
    rng = np.random.default_rng(case)

    def both(x, w):
        monkeypatch.setattr(C, "_TAPS_MIN_SIZE", 0)
        monkeypatch.setattr(C, "_IM2COL_MAX_CHANNELS", 0)
        taps = C._conv_nchw(x, w, st, pad, ld, rd, G)
        monkeypatch.setattr(C, "_IM2COL_MAX_CHANNELS", 1 << 30)
        im2col = C._conv_nchw(x, w, st, pad, ld, rd, G)
        monkeypatch.setattr(C, "_OFFSET_LOOP_MAX_TAPS", 0)
        window = C._conv_nchw(x, w, st, pad, ld, rd, G)
        monkeypatch.undo()
        assert taps.shape == window.shape == im2col.shape
        assert taps.dtype == window.dtype == im2col.dtype
        np.testing.assert_allclose(im2col, window, rtol=1e-12, atol=1e-12)
        return taps, window

    taps, window = both(rng.integers(-9, 9, xs), rng.integers(-9, 9, ws))
    np.testing.assert_array_equal(taps, window)
    taps, window = both(rng.standard_normal(xs), rng.standard_normal(ws))
    np.testing.assert_allclose(taps, window, rtol=1e-12, atol=1e-12)
