"""Numba lowerings of the structured families under jit against the eager NumPy impls:
convolution (every strategy: im2col + BLAS, gather, direct loops), pooling, SelectAndScatter
and its gather transpose, cumulative scans, sort / top_k, threefry2x32 and
rng_bit_generator. Bit for bit where the eager result is order-independent (integers,
selection, sorting, random bits, scans), tight tolerances for float sums and
convolutions; grads and vmap of convolution and pooling under jit; and ``as_text`` shows
library calls, not host steps.

Compile time: the kernels are shape-generic with one specialisation per dtype, so the
cases below share a handful of compiled kernels (float64 mostly, one or two other dtypes
per kernel).
"""
import numpy as np
import pytest

import lax
import numba_backend.library as library
import tracer
import tracer.numpy as tnp
from tracer.test_util import check_jit

rng = np.random.default_rng(0)
F64 = dict(rtol=1e-12, atol=1e-12)
F32 = dict(rtol=2e-5, atol=2e-5)


def edge_floats(shape, dtype=np.float64, seed=0):
    """Small integers (ties) salted with NaN, +-inf and signed zeros."""
    r = np.random.default_rng(seed)
    x = r.integers(-3, 4, size=shape).astype(dtype)
    flat = x.reshape(-1)
    specials = [np.nan, np.inf, -np.inf, -0.0, 0.0]
    if flat.size >= 10:
        pos = r.choice(flat.size, size=len(specials), replace=False)
        flat[pos] = specials
    return x


def lowered_text(f, *args):
    return tracer.jit(f).lower(*args).as_text()


def assert_lowered(f, args, prim_names):
    text = lowered_text(f, *args)
    for name in prim_names:
        assert f"library_call {name}" in text, text
        assert f"host_step {name}" not in text, text


# ------------------------------------------ convolution -------------------------------------

CONV_CASES = [
    # lhs shape, rhs shape, dimension numbers, strides, padding, lhs_dil, rhs_dil, G, B
    ((2, 3, 6, 5), (4, 3, 3, 2), None, (1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1), 1, 1),
    ((1, 2, 7, 6), (2, 2, 3, 2), None, (2, 1), ((1, 2), (-1, 1)), (1, 2), (2, 1), 1, 1),
    ((2, 5, 5, 6), (3, 3, 2, 6), ("NHWC", "HWIO", "NHWC"), (2, 1), ((1, 1), (2, 1)),
     (3, 1), (1, 2), 3, 1),
    ((6, 4, 5, 5), (6, 4, 3, 3), ("NCHW", "OIHW", "NHWC"), (2, 1), ((1, -1), (0, 2)),
     (1, 2), (1, 1), 1, 3),
    ((2, 3, 9), (2, 3, 4), None, (3,), ((2, 1),), (2,), (1,), 1, 1),
    ((2, 3, 4, 5, 3), (2, 3, 2, 2, 2), None, (1, 2, 1), ((0, 1), (1, 0), (-1, 0)),
     (1, 1, 2), (2, 1, 1), 1, 1),
    ((2, 4, 4, 3), (3, 3, 1, 3), ("NHWC", "HWIO", "NHWC"), (1, 1), ((1, 1), (1, 1)),
     (1, 1), (1, 1), 3, 1),                                   # depthwise
    ((2, 3), (4, 3), None, (), (), (), (), 1, 1),              # no spatial dims
]


def _conv_fn(case):
    _, _, dn, strides, pad, ld, rd, G, B = case
    return lambda x, w: lax.conv_general_dilated(
        x, w, strides, pad, ld, rd, dimension_numbers=dn, feature_group_count=G,
        batch_group_count=B)


@pytest.mark.parametrize("strategy", ["im2col", "gather", "direct"])
@pytest.mark.parametrize("case", range(len(CONV_CASES)))
def test_conv_every_strategy_matches_eager(case, strategy, monkeypatch):
    c = CONV_CASES[case]
    monkeypatch.setattr(library, "_strategy", lambda *a: strategy)
    x, w = rng.standard_normal(c[0]), rng.standard_normal(c[1])
    check_jit(_conv_fn(c), (x, w), **F64)


def test_conv_default_strategy_dtypes_and_edges():
    c = CONV_CASES[1]
    f = _conv_fn(c)
    # integers accumulate in 64 bits and wrap like the eager impl: exact
    xi = rng.integers(-100, 100, size=c[0]).astype(np.int32)
    wi = rng.integers(-100, 100, size=c[1]).astype(np.int32)
    check_jit(f, (xi, wi))
    check_jit(f, (xi.astype(np.int8), wi.astype(np.int8)))
    x, w = rng.standard_normal(c[0]), rng.standard_normal(c[1])
    check_jit(f, (x.astype(np.float32), w.astype(np.float32)), **F32)
    check_jit(f, (x.astype(np.float16), w.astype(np.float16)), rtol=2e-3, atol=2e-3)
    check_jit(f, (x + 1j * w.sum(), w - 2j), **F64)
    # preferred_element_type promotes before computing
    g = lambda a, b: lax.conv_general_dilated(a, b, (1, 1), "SAME",
                                              preferred_element_type=np.float64)
    check_jit(g, (x.astype(np.float32), w.astype(np.float32)), **F64)
    # NaN and infinities propagate as in the eager impl
    xe = edge_floats(c[0])
    got = np.asarray(tracer.jit(f)(xe, w))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(np.asarray(f(xe, w))))
    # size-1 and empty dims
    check_jit(f, (x[:1, :, :1], w), **F64)
    check_jit(f, (x[:0], w), **F64)
    check_jit(f, (x, w[:0]), **F64)
    check_jit(lambda a, b: lax.conv(a, b, (1, 1), "VALID"),
              (np.zeros((1, 2, 2, 2)), np.zeros((3, 2, 3, 3))))   # window > input: empty


def test_conv_as_text_and_layout_transposes():
    x = rng.standard_normal((2, 6, 6, 4)).astype(np.float32)
    w = rng.standard_normal((3, 3, 4, 5)).astype(np.float32)
    for dn in [("NHWC", "HWIO", "NHWC"), ("NHWC", "HWIO", "NCHW"), ("HWNC", "OHWI", "CNHW")]:
        lhs_perm = [("NHWC".index(ch)) for ch in dn[0]]
        rhs_perm = [("HWIO".index(ch)) for ch in dn[1]]
        xs, ws = x.transpose(lhs_perm), w.transpose(rhs_perm)
        f = lambda a, b, dn=dn: lax.conv_general_dilated(a, b, (2, 1), "SAME",
                                                         dimension_numbers=dn)
        check_jit(f, (xs, ws), **F32)
    assert_lowered(f, (xs, ws), ["conv_general_dilated"])


def test_conv_grad_and_vmap_under_jit():
    x = rng.standard_normal((2, 3, 7, 6))
    w = rng.standard_normal((4, 3, 3, 2)) / 4
    conv = lambda a, b: lax.conv_general_dilated(a, b, (2, 1), ((1, 1), (0, 1)), (1, 1),
                                                 (1, 2))
    loss = lambda a, b: tnp.sum(tnp.sin(conv(a, b)))
    check_jit(tracer.grad(loss, argnums=(0, 1)), (x, w), **F64)
    # grouped: the kernel gradient is a batch-grouped convolution
    xg = rng.standard_normal((2, 4, 5, 5))
    wg = rng.standard_normal((6, 2, 3, 3)) / 4
    grouped = lambda a, b: tnp.sum(lax.conv_general_dilated(a, b, (1, 1), "SAME",
                                                            feature_group_count=2) ** 2)
    check_jit(tracer.grad(grouped, argnums=(0, 1)), (xg, wg), **F64)
    # vmap folds the batch into the batch or feature dimension
    xs = np.stack([x, -2 * x])
    ws = np.stack([w, w[::-1]])
    check_jit(tracer.vmap(conv, in_axes=(0, None)), (xs, w), **F64)
    check_jit(tracer.vmap(conv, in_axes=(None, 0)), (x, ws), **F64)
    check_jit(tracer.vmap(conv, in_axes=(0, 0)), (xs, ws), **F64)
    text = lowered_text(tracer.grad(loss, argnums=(0, 1)), x, w)
    assert "host_step conv_general_dilated" not in text
    assert text.count("library_call conv_general_dilated") == 3


# -------------------------------------------- pooling ---------------------------------------

WINDOWS = [
    # window, strides, padding, base dilation, window dilation
    ((1, 2, 2), (1, 2, 2), ((0, 0), (0, 0), (0, 0)), (1, 1, 1), (1, 1, 1)),
    ((1, 3, 2), (1, 1, 2), ((0, 0), (1, 1), (0, 1)), (1, 1, 1), (1, 1, 1)),
    ((2, 2, 2), (1, 2, 1), ((1, 0), (-1, 2), (2, 0)), (1, 2, 1), (1, 1, 2)),
    ((1, 3, 1), (1, 1, 1), ((0, 0), (-1, -1), (0, 0)), (1, 1, 1), (1, 2, 1)),
    ((1, 1, 0), (1, 1, 1), ((0, 0), (0, 0), (0, 0)), (1, 1, 1), (1, 1, 1)),   # empty window
]


def _window_fns(win):
    wd, ws, pad, bd, wdl = win
    return [lambda x, f=f: f(x, wd, ws, pad, bd, wdl)
            for f in (lax.reduce_window_sum, lax.reduce_window_max, lax.reduce_window_min)]


@pytest.mark.parametrize("win", range(len(WINDOWS)))
def test_reduce_window_matches_eager(win):
    s, mx, mn = _window_fns(WINDOWS[win])
    x = edge_floats((2, 7, 6))
    check_jit(s, (x,), **F64)
    check_jit(mx, (x,))
    check_jit(mn, (x,))
    xi = rng.integers(-128, 128, size=(2, 7, 6)).astype(np.int8)
    check_jit(s, (xi,))          # wraps like the eager impl
    check_jit(mx, (xi,))
    if win == 0:
        b = rng.random((2, 7, 6)) < 0.5
        check_jit(mx, (b,))
        check_jit(mn, (b,))
        h = edge_floats((2, 7, 6), np.float16)
        check_jit(s, (h,), rtol=1e-3, atol=1e-3)
        check_jit(mx, (h,))
        check_jit(s, (x + 1j,), **F64)
        check_jit(mx, (x[:, :0],))
        check_jit(mx, (x[:1, :1],))


def test_reduce_window_signed_zeros_and_rank0():
    x = np.array([[[-0.0, 0.0, 0.0, -0.0, -0.0, -0.0]]])
    for f in _window_fns(WINDOWS[0]):
        got = np.asarray(tracer.jit(f)(x))
        np.testing.assert_array_equal(np.signbit(got), np.signbit(np.asarray(f(x))))
    check_jit(lambda a: lax.reduce_window_max(a, (), (), ()), (np.array(2.5),))
    assert_lowered(_window_fns(WINDOWS[1])[1], (x,), ["reduce_window_max"])


@pytest.mark.parametrize("win", range(len(WINDOWS) - 1))
def test_select_and_scatter_gather_match_eager(win):
    wd, ws, pad, bd, wdl = WINDOWS[win]
    operand = edge_floats((2, 7, 6), seed=win)
    out = np.asarray(lax.reduce_window_max(operand, wd, ws, pad, bd, wdl)).shape
    source = rng.integers(-5, 6, size=out).astype(np.float64) + 0.25
    for ge, sel in ((True, lax.ge), (False, lax.le)):
        sas = lambda s, o, sel=sel: lax.select_and_scatter_add(s, o, sel, wd, ws, pad, bd, wdl)
        check_jit(sas, (source, operand))
        sga = lambda t, o, ge=ge: lax.select_and_gather_add_p.bind(
            t, o, select_ge=ge, window_dimensions=wd, window_strides=ws, padding=pad,
            base_dilation=bd, window_dilation=wdl)
        check_jit(sga, (rng.standard_normal(operand.shape), operand))
    if win == 1:
        oi = rng.integers(-3, 3, size=operand.shape).astype(np.int32)
        check_jit(sas, (source.astype(np.float16), oi))      # float16 sums round per add
        check_jit(sas, (source.astype(np.int64), oi > 0))
        check_jit(sga, (operand.astype(np.float16), oi))
        assert_lowered(sas, (source, operand), ["select_and_scatter_add"])


def _bits(x):
    x = np.asarray(x)
    return x.view(f"u{x.dtype.itemsize}") if x.dtype.kind == "f" else x


def _assert_compiled_bits(f, *args):
    text = lowered_text(f, *args)
    assert "host_step" not in text, text
    eager, got = f(*args), tracer.jit(f)(*args)
    assert eager.dtype == got.dtype and eager.shape == got.shape
    np.testing.assert_array_equal(_bits(got), _bits(eager))


# select_and_scatter with user computations: (operand shape, window, strides, padding,
# select, scatter, operand dtype, source dtype). Overlapping windows (two windows may
# choose one position: scatter order matters), strides past the window, negative padding,
# ties, NaN and signed zeros in the operand.
_SS_CASES = [
    ((5, 6), (2, 3), (1, 2), ((0, 1), (1, 1)), "gt", "twice_max", np.float64, np.float64),
    ((5, 6), (3, 2), (1, 1), ((1, 1), (0, 0)), "ge", "mul_sub", np.float64, np.float32),
    ((7,), (2,), (3,), ((-1, 2),), "le", "last", np.float32, np.float64),
    ((2, 4, 3), (1, 2, 2), (1, 1, 2), ((0, 0), (1, 0), (0, 1)), "abs_lt", "add", np.float64,
     np.int32),
    ((4, 5), (2, 2), (2, 2), "SAME", "ge", "add", np.int32, np.float16),
    ((3, 3), (3, 3), (1, 1), "SAME", "gt", "xor", np.float64, np.bool_),
]
_SS_SELECT = {"gt": lax.gt, "ge": lax.ge, "le": lax.le,
              "abs_lt": lambda a, b: lax.lt(lax.abs(a), lax.abs(b))}
_SS_SCATTER = {"twice_max": lambda a, b: lax.mul(lax.max(a, b), 2.0 * np.ones((), a.dtype)),
               "mul_sub": lambda a, b: lax.sub(lax.mul(a, np.full((), 3, a.dtype)), b),
               "last": lambda a, b: b, "add": lax.add, "xor": lax.bitwise_xor}


@pytest.mark.parametrize("case", range(len(_SS_CASES)))
def test_select_and_scatter_with_computations_compiles_bit_for_bit(case):
    shape, wd, ws, pad, sel, sct, dt, sdt = _SS_CASES[case]
    r = np.random.default_rng(case)
    x = r.choice(np.array([0.0, -0.0, 1.0, 2.0, np.nan, -np.inf]), size=shape)
    x = np.nan_to_num(x, nan=3, neginf=-4).astype(dt) if dt == np.int32 else x.astype(dt)
    ones = (1,) * len(shape)
    n = lax.reduce_window_shape_tuple(shape, wd, ws, pad, ones, ones)
    src = r.integers(-5, 5, n).astype(sdt) if sdt != np.bool_ else r.random(n) > 0.5
    init = np.ones((), sdt)
    f = lambda x, s: lax.select_and_scatter(x, _SS_SELECT[sel], wd, ws, pad, s, init,
                                            _SS_SCATTER[sct])
    _assert_compiled_bits(f, x, src)
    if case == 0:   # vmap under jit; a runtime init value
        _assert_compiled_bits(tracer.vmap(f), np.stack([x, -x]), np.stack([src, src * 2]))
        g = lambda x, s, v: lax.select_and_scatter(x, lax.gt, wd, ws, pad, s, v, lax.add)
        _assert_compiled_bits(g, x, src, np.float64(0.5))


def test_select_and_scatter_with_computations_edges_under_jit():
    add = lax.add
    _assert_compiled_bits(lambda x, s: lax.select_and_scatter(
        x, lax.ge, (), (), (), s, 1.0, lax.mul), np.float64(3.0), np.float64(2.0))
    _assert_compiled_bits(lambda x, s: lax.select_and_scatter(
        x, lax.ge, (1, 1), (1, 1), "VALID", s, 0.0, add), np.zeros((0, 3)), np.zeros((0, 3)))
    # window 0 lies in the padding only
    f = lambda x, s: lax.select_and_scatter(x, lax.ge, (1,), (1,), ((1, 0),), s, 0.5, add)
    _assert_compiled_bits(f, np.ones(2), np.array([7.0, 1.0, 2.0]))
    np.testing.assert_array_equal(np.asarray(tracer.jit(f)(np.ones(2), np.array([7.0, 1.0,
                                                                                   2.0]))),
                                  [1.5, 2.5])
    # non-element-wise computations keep the eager impl (host step)
    sel = lambda a, b: lax.reshape(lax.ge(lax.reshape(a, (1,)), lax.reshape(b, (1,))), ())
    h = lambda x, s: lax.select_and_scatter(x, sel, (2,), (2,), "VALID", s, 0.0, add)
    x, s = np.array([1.0, 3.0, 2.0, 2.0]), np.array([5.0, 6.0])
    assert "host_step select_and_scatter" in lowered_text(h, x, s)
    np.testing.assert_array_equal(np.asarray(tracer.jit(h)(x, s)), [0, 5, 6, 0])


def test_pooling_grad_jvp_vmap_under_jit():
    x = edge_floats((2, 8, 6, 3), seed=3)
    x[np.isnan(x)] = 1.0                       # NaN-free, ties and infinities stay
    x[np.isinf(x)] = 2.0
    pool = lambda a: lax.reduce_window_max(a, (1, 2, 3, 1), (1, 2, 2, 1), "SAME")
    loss = lambda a: tnp.sum(pool(a) ** 2)
    check_jit(tracer.grad(loss), (x,))        # select_and_scatter_add, exact
    check_jit(lambda a, t: tracer.jvp(pool, (a,), (t,)), (x, rng.standard_normal(x.shape)))
    avg = lambda a: tnp.sum(tnp.cos(lax.reduce_window_sum(a, (1, 3, 3, 1), (1, 2, 2, 1),
                                                          "SAME")))
    check_jit(tracer.grad(avg), (x,), **F64)
    pool3 = lambda a: lax.reduce_window_max(a, (1, 2, 3), (1, 2, 2), "SAME")
    check_jit(tracer.vmap(pool3, in_axes=3), (x,))
    check_jit(tracer.vmap(tracer.grad(loss)), (np.stack([x, -x]),))
    # ties: the first maximum in row-major window order takes the gradient
    t = np.array([[1.0, 3.0, 3.0, 2.0]])
    g = tracer.jit(tracer.grad(lambda a: lax.reduce_window_max(a, (1, 4), (1, 1),
                                                               "VALID").sum()))(t)
    np.testing.assert_array_equal(np.asarray(g), [[0, 1, 0, 0]])
    text = lowered_text(tracer.grad(loss), x)
    assert "library_call select_and_scatter_add" in text and "host_step" not in text


# ------------------------------------------- cumulative -------------------------------------

CUMS = [lax.cumsum, lax.cumprod, lax.cummax, lax.cummin, lax.cumlogsumexp]


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16, np.int8, np.uint32,
                                   np.bool_, np.complex64])
def test_cumulative_bit_for_bit(dtype):
    dt = np.dtype(dtype)
    if dt == np.bool_:
        x = rng.random((3, 5, 4)) < 0.6
    elif dt.kind in "iu":
        x = rng.integers(0 if dt.kind == "u" else -128, 128, size=(3, 5, 4)).astype(dt)
    else:
        x = edge_floats((3, 5, 4), np.float64, seed=5).astype(dt)
        if dt.kind == "c":
            x.imag = x[::-1].real
    fns = [f for f in CUMS if not ((f in (lax.cummax, lax.cummin) and dt.kind == "c") or
                                   (f is lax.cumlogsumexp and dt.kind != "f") or
                                   (f in (lax.cumsum, lax.cumprod) and dt.kind == "b"))]

    def all_scans(a):
        return [f(a, axis, rev) for f in fns for axis in (0, 2) for rev in (False, True)]

    with np.errstate(all="ignore"):
        check_jit(all_scans, (x,))
    if dt == np.float64:
        check_jit(lambda a: [f(a, 0) for f in fns], (x[:, :0],))
        check_jit(lambda a: [f(a, 0) for f in fns], (np.array(1.5),))
        assert_lowered(lambda a: lax.cumsum(a, 1, True), (x,), ["cumsum"])


# ----------------------------------------- sort and top_k -----------------------------------

def test_sort_bit_for_bit():
    x = edge_floats((4, 9), seed=7)
    x[0, :4] = [0.0, -0.0, 0.0, -0.0]                 # equal keys keep their order
    x[1, :3] = [np.nan, -np.nan, np.nan]
    check_jit(lambda a: lax.sort(a, 1), (x,))
    check_jit(lambda a: lax.sort(a, 0), (x,))
    check_jit(lambda a: lax.sort(a.astype(np.float32), 1), (x,))
    check_jit(lambda a: lax.sort(a.astype(np.float16), 1), (x,))
    ints = rng.integers(-3, 3, size=(4, 9))
    for dt in (np.int8, np.uint16, np.int64, np.bool_):
        check_jit(lambda a, dt=dt: lax.sort(a.astype(dt), 1), (ints,))
    z = x.astype(np.complex128)
    z.imag = x[::-1]
    check_jit(lambda a: lax.sort(a, 1), (z,))
    # multi-operand, lexicographic on the first num_keys, stable
    k1 = rng.integers(0, 2, size=(3, 40))
    k2 = edge_floats((3, 40), seed=8)
    v = np.arange(120.0).reshape(3, 40)
    for nk in (1, 2, 3):
        check_jit(lambda a, b, c, nk=nk: lax.sort((a, b, c), 1, num_keys=nk), (k1, k2, v))
    check_jit(lambda a, b: lax.sort_key_val(a, b, 0), (k2, v))
    check_jit(lambda a: lax.sort(a, 0), (np.array(3.0),))
    check_jit(lambda a: lax.sort(a, 1), (x[:, :0],))
    check_jit(lambda a: lax.sort(a, 1), (np.sort(x, 1)[:, ::-1].copy(),))   # long runs
    big = rng.integers(0, 50, size=(2, 300)).astype(np.float64)
    check_jit(lambda a: lax.sort(a, 1), (big,))
    assert_lowered(lambda a: lax.sort(a, 1), (x,), ["sort"])


def test_top_k_bit_for_bit():
    x = edge_floats((3, 50), seed=9)
    x[0, :3] = [-0.0, 0.0, -0.0]
    for k in (0, 1, 5, 50):
        check_jit(lambda a, k=k: lax.top_k(a, k), (x,))
    check_jit(lambda a: lax.top_k(a.astype(np.float32), 40), (x,))   # the sorting path
    ints = rng.integers(-2, 3, size=(2, 4, 30)).astype(np.int16)
    check_jit(lambda a: lax.top_k(a, 7), (ints,))
    check_jit(lambda a: lax.top_k(a, 3), (np.zeros((0, 5)),))
    check_jit(lambda a: tracer.jvp(lambda b: lax.top_k(b, 4)[0], (a,), (a * 2,)), (x,))
    assert_lowered(lambda a: lax.top_k(a, 2), (x,), ["top_k"])


# ------------------------------------------ random bits -------------------------------------

def test_threefry_and_rng_bit_generator_bit_for_bit():
    u32 = lambda *s: rng.integers(0, 2 ** 32, size=s, dtype=np.uint64).astype(np.uint32)
    k1, k2 = u32(), u32()
    x1, x2 = u32(5, 7), u32(5, 7)
    check_jit(lax.threefry2x32, (k1, k2, x1, x2))
    check_jit(lax.threefry2x32, (x1, k2, x2, k1))
    check_jit(lax.threefry2x32, (k1, k2, u32(0), u32(0)))
    assert_lowered(lax.threefry2x32, (k1, k2, x1, x2), ["threefry2x32"])
    key = np.array([1, 2, 0xFFFFFFFF, 0xFFFFFFFE], np.uint32)      # the counter wraps
    for alg in (lax.RandomAlgorithm.RNG_DEFAULT, lax.RandomAlgorithm.RNG_PHILOX):
        for dt, shape in ((np.uint32, (3, 5)), (np.uint8, (7,)), (np.uint64, (2, 3)),
                          (np.uint16, ())):
            check_jit(lambda k, dt=dt, shape=shape, alg=alg:
                      lax.rng_bit_generator(k, shape, dt, alg), (key,))
    check_jit(lambda k: lax.rng_bit_generator(k, (4,)), (u32(2, 4),))   # batched states
    assert_lowered(lambda k: lax.rng_bit_generator(k, (4,)), (key,), ["rng_bit_generator"])
    # tracer.random under jit gives the eager samples bit for bit
    check_jit(lambda k: tracer.random.normal(k, (6, 3)), (tracer.random.PRNGKey(3),))
