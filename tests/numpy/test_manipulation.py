"""Shape manipulation and combination functions of tracer.numpy against NumPy: split and
stack families, insert/delete/append, diff, pad (all modes), roll/rot90, diagonals and
triangles, products (kron, cross, matvec), functional helpers; with grad / vmap / jit."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import tracer
import tracer.numpy as tnp
from tracer.errors import ConcretizationTypeError
from tracer.test_util import check_grads, check_jit, check_vmap

from np_util import C128, F32, F64, I32, assert_matches, rand

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _list_match(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_matches(g, w)


X = np.arange(24.0).reshape(2, 3, 4)


CASES = [
    ("split", (X, 2, 0)), ("split", (X, [1, 3], 2)), ("array_split", (X, 3, 2)),
    ("array_split", (X, [1, 5, 2], 1)), ("hsplit", (X, 3)), ("vsplit", (X, 2)),
    ("dsplit", (X, [1])), ("append", (X, X[:1], 0)), ("append", (X, np.arange(3.0))),
    ("delete", (X, 1, 1)), ("delete", (X, [0, 2], 2)), ("delete", (X, slice(0, 3, 2), 2)),
    ("delete", (X, np.array([True, False, True]), 1)), ("delete", (np.arange(5), -1)),
    ("insert", (X, 1, 99.0, 1)), ("insert", (X, [0, 2, 2], np.array([7.0, 8.0, 9.0]), 2)),
    ("insert", (np.arange(5), 2, np.array([10, 11]))), ("insert", (X, 3, X[:, :1], 1)),
    ("insert", (np.arange(6).reshape(2, 3), slice(0, 3), 9, 1)),
    ("diff", (X,)), ("diff", (X, 2, 1)), ("diff", (np.array([True, False, False]),)),
    ("ediff1d", (X,)), ("roll", (X, 2)), ("roll", (X, -1, 1)), ("roll", (X, (1, 2), (0, 2))),
    ("rollaxis", (X, 2)), ("rollaxis", (X, 0, 3)), ("rot90", (X,)), ("rot90", (X, 2)),
    ("rot90", (X, -1, (1, 2))), ("rot90", (X, 3, (2, 0))), ("resize", (X, (5, 7))),
    ("resize", (np.arange(3), (2, 2))), ("trim_zeros", (np.array([0, 0, 1, 2, 0, 3, 0]),)),
    ("trim_zeros", (np.array([0, 0, 1, 2, 0]), "f")), ("unstack", (X,)),
    ("diag", (np.arange(3.0),)), ("diag", (np.arange(3.0), 2)), ("diag", (np.arange(3.0), -1)),
    ("diag", (X[0],)), ("diag", (X[0], 1)), ("diag", (X[0], -1)), ("diag", (X[0], 5)),
    ("diagflat", (X[0, :2, :2], 1)), ("trace", (X,)), ("trace", (X, 1, 1, 2)),
    ("trace", (X, -1, 0, 2)), ("tril", (X,)), ("tril", (X, 1)), ("triu", (X, -1)),
    ("triu", (X[0],)), ("kron", (X[0], np.eye(2))), ("kron", (np.arange(3), X)),
    ("cross", (np.arange(6.0).reshape(2, 3), np.arange(3.0) - 1)),
    ("cross", (np.arange(4.0).reshape(2, 2), np.arange(6.0).reshape(2, 3))),
    ("cross", (np.arange(4.0).reshape(2, 2), np.arange(4.0).reshape(2, 2) + 2)),
    ("cross", (np.arange(6.0).reshape(3, 2), np.arange(6.0).reshape(3, 2) - 1, 0, 0)),
    ("matvec", (X, np.arange(4.0))), ("vecmat", (np.arange(3.0), X)),
    ("block", ([[np.eye(2), np.zeros((2, 3))], [np.ones((1, 2)), np.full((1, 3), 7.0)]],)),
    ("block", ([np.arange(2.0), np.arange(3.0)],)), ("block", ([[X[0]], [X[1]]],)),
    ("atleast_3d", (np.arange(3.0),)), ("column_stack", ((np.arange(3), np.ones((3, 2))),)),
    ("moveaxis", (X, (0, 1), (2, 0))), ("swapaxes", (X, 0, 2)), ("flip", (X, (0, 2))),
    ("tile", (X[0], (2, 1, 2))), ("repeat", (X, 2, 1)), ("repeat", (X, [1, 0, 2], 1)),
    ("squeeze", (X[:1, :, :1],)), ("expand_dims", (X, (0, 4))),
]


@pytest.mark.parametrize("name,args", CASES, ids=[c[0] for c in CASES])
def test_against_numpy(name, args):
    with warnings.catch_warnings():
        # (NumPy 2 deprecates cross of 2-element vectors; tracer keeps them, as JAX does)
        warnings.simplefilter("ignore", DeprecationWarning)
        want = getattr(np, name)(*args)
    got = getattr(tnp, name)(*args)
    if isinstance(want, (list, tuple)):
        _list_match(got, want)
    else:
        assert_matches(got, want)


PAD_MODES = [("constant", {}), ("constant", {"constant_values": ((1, 2), (3, 4))}),
             ("edge", {}), ("wrap", {}), ("reflect", {}), ("symmetric", {}),
             ("reflect", {"reflect_type": "odd"}), ("symmetric", {"reflect_type": "odd"}),
             ("linear_ramp", {"end_values": (5, -1)}), ("maximum", {}),
             ("minimum", {"stat_length": 2}), ("mean", {"stat_length": ((1, 2), (3, 1))}),
             ("median", {})]


@pytest.mark.parametrize("mode,kw", PAD_MODES, ids=[m + str(len(k)) for m, k in PAD_MODES])
def test_pad_against_numpy(mode, kw):
    for x in (np.arange(12.0).reshape(3, 4) ** 1.5, np.arange(12).reshape(3, 4)):
        for width in (2, ((1, 2), (0, 3)), ((7, 9), (5, 11))):
            if mode == "linear_ramp" and x.dtype.kind == "i":
                continue  # NumPy rounds integer ramps differently (towards -inf vs ours)
            want = np.pad(x, width, mode, **kw)
            got = tnp.pad(x, width, mode, **kw)
            assert_matches(got, want, err=f"{mode} {kw} {width} {x.dtype}")


def test_pad_callable_and_errors():
    def pad_with(vector, pad_width, iaxis, kwargs):
        v = tnp.asarray(vector)
        n = v.shape[0]
        left = tnp.full((pad_width[0],), 10.0)
        right = tnp.full((pad_width[1],), -10.0)
        return tnp.concatenate([left, v[pad_width[0]:n - pad_width[1]], right])

    def pad_with_np(vector, pad_width, iaxis, kwargs):
        vector[:pad_width[0]] = 10.0
        if pad_width[1]:
            vector[-pad_width[1]:] = -10.0

    x = np.arange(6.0).reshape(2, 3)
    assert_matches(tnp.pad(x, 1, pad_with), np.pad(x, 1, pad_with_np))
    with pytest.raises(ValueError, match="mode"):
        tnp.pad(x, 1, "bogus")
    with pytest.raises(ValueError, match="negative"):
        tnp.pad(x, -1)
    with pytest.raises(ValueError, match="empty axis"):
        tnp.pad(np.zeros((0, 2)), 1, "edge")


def test_fill_diagonal():
    a = np.zeros((4, 3))
    for val in (5.0, np.array([1.0, 2.0])):
        for wrap in (False, True):
            b = np.zeros((7, 3))
            np.fill_diagonal(b, val, wrap=wrap)
            assert_matches(tnp.fill_diagonal(np.zeros((7, 3)), val, wrap=wrap, inplace=False), b)
    c = np.zeros((3, 3, 3))
    np.fill_diagonal(c, 4.0)
    assert_matches(tnp.fill_diagonal(np.zeros((3, 3, 3)), 4.0, inplace=False), c)
    with pytest.raises(NotImplementedError, match="inplace=False"):
        tnp.fill_diagonal(a, 1.0)


def test_apply_along_and_over_axes():
    x = np.arange(24.0).reshape(2, 3, 4)
    for axis in (0, 1, 2):
        assert_matches(tnp.apply_along_axis(lambda v: tnp.sum(v ** 2), axis, x),
                       np.apply_along_axis(lambda v: np.sum(v ** 2), axis, x))
        assert_matches(tnp.apply_along_axis(lambda v: v[::-1] * 2, axis, x),
                       np.apply_along_axis(lambda v: v[::-1] * 2, axis, x))
    assert_matches(tnp.apply_over_axes(tnp.sum, x, [0, 2]), np.apply_over_axes(np.sum, x, [0, 2]))


def test_piecewise():
    x = np.linspace(-2.5, 2.5, 7)
    conds = [x < 0, x >= 0]
    funcs = [lambda v: -v, lambda v: v ** 2]
    assert_matches(tnp.piecewise(x, conds, funcs), np.piecewise(x, conds, funcs))
    assert_matches(tnp.piecewise(x, [x < -1, x > 1], [0.0, 1.0, lambda v: v]),
                   np.piecewise(x, [x < -1, x > 1], [0.0, 1.0, lambda v: v]))


def test_static_argument_errors():
    f = tracer.jit(lambda x: tnp.trim_zeros(x))
    with pytest.raises(ConcretizationTypeError, match="trim_zeros"):
        f(np.array([0.0, 1.0, 0.0]))
    with pytest.raises(ValueError, match="equal division"):
        tnp.split(np.arange(5), 2)
    with pytest.raises(IndexError, match="out of bounds"):
        tnp.delete(np.arange(3), 5)
    with pytest.raises(ValueError, match="diag"):
        tnp.diag(np.zeros((2, 2, 2)))


@pytest.mark.parametrize("name,f", [
    ("pad_reflect", lambda x: tnp.pad(x, ((2, 3), (1, 1)), "reflect")),
    ("pad_mean", lambda x: tnp.pad(x, 2, "mean")),
    ("roll", lambda x: tnp.roll(x, 1, 1)), ("diff", lambda x: tnp.diff(x, 2, 0)),
    ("diag", lambda x: tnp.diag(tnp.diag(x, 1), -1) + tnp.diag(tnp.diag(x))),
    ("trace", lambda x: tnp.trace(x) * tnp.tril(x)), ("kron", lambda x: tnp.kron(x, x)),
    ("insert_delete", lambda x: tnp.delete(tnp.insert(x, 1, x[0], 0), 0, 1)),
    ("cross", lambda x: tnp.cross(x[:, :3], x[:, 1:])),
    ("fill_diagonal", lambda x: tnp.fill_diagonal(x, 0.0, inplace=False)),
    ("rot90_resize", lambda x: tnp.resize(tnp.rot90(x), (5, 3))),
])
def test_grads_and_vmap(name, f, rng):
    x = rng.standard_normal((4, 4))
    check_grads(f, (x,), order=1, atol=1e-6, rtol=1e-6)
    check_vmap(f, (rng.standard_normal((2, 4, 4)),))


def test_manipulation_under_jit(rng):
    x = rng.standard_normal((3, 4))
    check_jit(lambda x: (tnp.pad(x, 2, "symmetric"), tnp.roll(x, 3), tnp.triu(x, 1),
                         tnp.diag(x), tnp.split(x, 2, axis=1)), (x,))


def test_roll_with_traced_shift(rng):
    x = rng.standard_normal((2, 5))
    f = tracer.jit(lambda x, s: tnp.roll(x, s, axis=1))
    for s in (0, 2, -3, 7):
        assert_matches(f(x, s), np.roll(x, s, axis=1))
    check_vmap(lambda s: tnp.roll(x, s), (np.array([1, 2, -1]),))
    check_grads(lambda x: tnp.roll(x, np.int64(3), 1), (x,), order=1)


def test_repeat_with_traced_repeats(rng):
    x = rng.standard_normal((2, 3))
    r = np.array([1, 0, 3])
    f = tracer.jit(lambda x, r: tnp.repeat(x, r, axis=1, total_repeat_length=4))
    assert_matches(f(x, r), np.repeat(x, r, axis=1))
    longer = tracer.jit(lambda x, r: tnp.repeat(x, r, axis=1, total_repeat_length=6))(x, r)
    assert_matches(longer, np.repeat(x, [1, 0, 5], axis=1))  # the last element fills
    with pytest.raises(ConcretizationTypeError, match="total_repeat_length"):
        tracer.jit(lambda x, r: tnp.repeat(x, r, axis=1))(x, r)
    check_grads(lambda x: tnp.repeat(x, r, axis=1, total_repeat_length=4), (x,), order=1)


BASICS = [
    ("atleast_1d", (3.0,)), ("atleast_2d", (np.arange(3.0),)), ("atleast_3d", (X[0],)),
    ("broadcast_arrays", (np.ones((2, 1)), np.arange(3.0))), ("dstack", ((X[0], X[1]),)),
    ("hstack", ((np.arange(2.0), np.arange(3.0)),)), ("vstack", ((np.arange(3.0), X[0, 0, :3]),)),
    ("fliplr", (X[0],)), ("flipud", (X[0],)), ("transpose", (X,)), ("transpose", (X, (1, 2, 0))),
    ("dot", (X, np.arange(4.0))), ("dot", (X[0], X[1].T)), ("dot", (2.0, X[0])),
    ("inner", (X[0], X[1])), ("vdot", (X[0] + 1j, X[1])), ("matmul", (X, X[0].T)),
    ("matmul", (np.arange(4.0), X[0].T)), ("outer", (np.arange(3.0), np.arange(2.0))),
    ("tensordot", (X, X, ([1, 2], [1, 2]))), ("concatenate", ((X, X), None)),
    ("stack", ((X[0], X[1]), -1)), ("ravel", (X,)), ("reshape", (X, (4, -1))),
]


@pytest.mark.parametrize("name,args", BASICS, ids=[c[0] for c in BASICS])
def test_basics_against_numpy(name, args):
    want = getattr(np, name)(*args)
    got = getattr(tnp, name)(*args)
    if isinstance(want, (list, tuple)):
        _list_match(got, want)
    else:
        assert_matches(got, want)


def test_shape_queries():
    x = np.ones((2, 3))
    assert tnp.shape(x) == (2, 3) and tnp.ndim(x) == 2 and tnp.size(x) == 6
    assert tnp.size(x, 1) == 3 and tnp.shape(tnp.asarray(x)) == (2, 3)
    assert tnp.broadcast_shapes((2, 1), (3,)) == (2, 3)
    assert tnp.isscalar(1.0) and tnp.isscalar(tnp.asarray(1.0)) and not tnp.isscalar(x)
    assert tnp.iscomplexobj(np.ones(2, np.complex64)) and tnp.isrealobj(x)
    assert tnp.promote_types(np.int8, np.uint8) == np.int16
    assert tnp.result_type(np.float32, 2.0) == np.float32
    assert tnp.can_cast(np.int8, np.int32) and not tnp.can_cast(np.float64, np.int8)
    with pytest.raises(ValueError, match="broadcast"):
        tnp.broadcast_shapes((2,), (3,))


@pytest.mark.parametrize("shape", [(4, 6), (6, -1), (24,), (2, 3, 4), (3, 2, 4), (1, 24, 1)])
def test_reshape_in_fortran_order(shape):
    """order='F' as NumPy: eager, jit, the Array method, ravel and flatten; its gradient
    is the cotangent reshaped back in F order; vmap maps it per example."""
    want = np.reshape(X, shape, order="F")
    np.testing.assert_array_equal(np.asarray(tnp.reshape(X, shape, order="F")), want)
    np.testing.assert_array_equal(
        np.asarray(tracer.jit(lambda x: tnp.reshape(x, shape, order="F"))(X)), want)
    np.testing.assert_array_equal(np.asarray(tnp.asarray(X).reshape(shape, order="F")), want)
    w = np.arange(24.0).reshape(want.shape) ** 2
    g = tracer.grad(lambda x: (tnp.reshape(x, shape, order="F") * w).sum())(X)
    np.testing.assert_array_equal(np.asarray(g), np.reshape(w, X.shape, order="F"))
    per = tracer.vmap(lambda x: tnp.reshape(x, (4, 3), order="F"))(X)
    np.testing.assert_array_equal(np.asarray(per), [np.reshape(x, (4, 3), order="F") for x in X])
    np.testing.assert_array_equal(np.asarray(tnp.ravel(X, order="F")), np.ravel(X, order="F"))
    np.testing.assert_array_equal(np.asarray(tnp.asarray(X).flatten(order="F")),
                                  X.flatten(order="F"))


def test_reshape_orders_without_a_layout_are_not_supported():
    # NumPy reads order in any case and None as 'C'; 'A' and 'K' follow a memory layout
    # an Array does not have (NotImplementedError naming the function, as JAX); unknown
    # orders and reshape's 'K' are NumPy's ValueErrors
    x = tnp.asarray(X)
    for order in ("f", "F", "c", None, b"F", b"c"):
        for got, want in ((tnp.reshape(X, (4, 6), order=order), np.reshape(X, (4, 6), order=order)),
                          (tnp.ravel(X, order=order), np.ravel(X, order=order)),
                          (x.flatten(order=order), X.flatten(order=order)),
                          (x.reshape((6, 4), order=order), X.reshape((6, 4), order=order))):
            np.testing.assert_array_equal(np.asarray(got), want)
    for order in ("A", "a", "K", "k"):
        for name, fn in (("ravel", lambda: tnp.ravel(X, order=order)),
                         ("ravel", lambda: x.ravel(order=order)),
                         ("flatten", lambda: x.flatten(order=order))):
            with pytest.raises(NotImplementedError, match=f"{name}: order='{order}'"):
                fn()
    for order in ("A", "a"):
        with pytest.raises(NotImplementedError, match=f"reshape: order='{order}'"):
            tnp.reshape(X, (24,), order=order)
    with pytest.raises(ValueError, match="reshape: order 'K' is not permitted"):
        tnp.reshape(X, (24,), order="K")
    for order, error, says in (("X", ValueError, "must be one of"),
                               ("", ValueError, "must be one of"),
                               (1, TypeError, "must be str, not int")):
        for name, fn in (("reshape", lambda: tnp.reshape(X, (24,), order=order)),
                         ("ravel", lambda: tnp.ravel(X, order=order)),
                         ("ravel", lambda: x.ravel(order=order)),
                         ("flatten", lambda: x.flatten(order=order))):
            with pytest.raises(error, match=f"{name}: order {says}"):
                fn()
