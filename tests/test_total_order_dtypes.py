"""Signed zeros, NaNs and total order, eager against compiled against JAX; the dtypes of
reductions and cumulative functions against NumPy and JAX.

Part 1 runs every case of tests/total_order_cases.py (max/min, comparisons, clamp,
reductions, scans, sort, top_k, ... on inputs of +-0.0, +-NaN, a NaN payload, +-inf and
+-1) eagerly and under jit, and compares the bit patterns with JAX's, recorded once in
tests/data/total_order_jax.json (tools/record_total_order_jax.py; JAX 0.10.2, x64), and
eager with jit bit for bit. Where a case's policy is not "bits" (total_order_cases.py
says why) NaNs are compared by isnan only against JAX, and exactly between eager and
jit.

Part 2 pins the dtype rules of sum/prod/mean/var/std and the cumulative functions
(cumsum, cumprod, nancumsum, nancumprod, cumulative_sum, cumulative_prod) with and
without ``dtype=``, against NumPy's values and jax.numpy's dtypes (x64), eagerly, under
jit and under grad.
"""
from __future__ import annotations

import base64
import json
import pathlib
import warnings
import zlib

import numpy as np
import pytest

import lax
import tracer
import tracer.numpy as tnp
from tracer import dtypes

from total_order_cases import CASES, DTYPES, inputs, policy

_DATA = json.loads((pathlib.Path(__file__).parent / "data" /
                    "total_order_jax.json").read_text())["cases"]
_KINDS = sorted({kind for kind, _, _ in CASES.values()})
# Eager and compiled may pick different NaNs (payload, sign) in arithmetic: which operand's
# NaN x86 passes through a + b is an evaluation-order detail, and compiled float16
# arithmetic runs in float32 and rounds through a NaN-canonicalising conversion. Both
# give NaN there; everything else is bit for bit.
_ARITH = {"add", "mul", "reduce_sum", "reduce_prod"}
_ARITH_F16 = {"cumsum", "cumprod", "cumsum_rev", "jnp.cumsum"}


def _decode(e):
    raw = zlib.decompress(base64.b64decode(e["data"]))
    return np.frombuffer(raw, np.dtype(e["dtype"])).reshape(e["shape"])


def _bits(v):
    v = np.asarray(v)
    return v.view(f"u{v.dtype.itemsize}") if v.dtype.kind == "f" else v


def _first_bad(bad, got, want, what):
    i = np.unravel_index(np.argmax(bad), bad.shape)
    return (f"{what}: {int(bad.sum())} element(s) differ, first at {i}: got {got[i]!r} "
            f"(bits {_bits(got)[i]:#x}), want {want[i]!r} (bits {_bits(want)[i]:#x})")


def assert_bits(got, want, pol, what):
    """``got`` against ``want`` by ``pol`` ("bits", "nan" or "close", see
    total_order_cases.py)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, \
        f"{what}: {got.dtype}{got.shape} != {want.dtype}{want.shape}"
    if want.dtype.kind != "f":
        bad = got != want
        assert not bad.any(), _first_bad(bad, got, want, what)
        return
    wnan, gnan = np.isnan(want), np.isnan(got)
    if pol == "bits":
        bad = _bits(got) != _bits(want)
    elif pol == "nan":
        bad = (wnan != gnan) | (~wnan & (_bits(got) != _bits(want)))
    else:
        close = np.isclose(got.astype(np.float64), want.astype(np.float64),
                           rtol=8 * np.finfo(want.dtype).eps, atol=0)
        bad = (wnan != gnan) | (~wnan & ((np.signbit(got) != np.signbit(want)) | ~close))
    assert not bad.any(), _first_bad(bad, got, want, what)


def _outputs(r):
    return list(r) if isinstance(r, (tuple, list)) else [r]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", _KINDS)
def test_matches_jax_eager_and_jit(kind, dtype):
    """Every case of this input kind, eagerly and in one jitted function."""
    names = [n for n, (k, _, _) in CASES.items() if k == kind]
    fns = [CASES[n][1](lax, tnp) for n in names]
    args = inputs(kind, dtype)

    def every_case(*a):
        return [f(*a) for f in fns]

    eager = every_case(*args)
    jitted = tracer.jit(every_case)(*args)
    for name, e, j in zip(names, eager, jitted):
        want = [_decode(w) for w in _DATA[f"{name}[{dtype}]"]]
        e, j = _outputs(e), _outputs(j)
        assert len(e) == len(want), name
        for k, (ek, jk, wk) in enumerate(zip(e, j, want)):
            what = f"{name}[{dtype}] output {k}"
            assert_bits(ek, wk, policy(name, dtype), what + " eager vs JAX")
            assert_bits(jk, wk, policy(name, dtype), what + " jit vs JAX")
            relaxed = name in _ARITH or (dtype == "float16" and name in _ARITH_F16)
            assert_bits(jk, ek, "nan" if relaxed else "bits", what + " jit vs eager")


# ------------------------------- the rules, spelled out -------------------------------

def _f(*bits):
    return np.array(bits, np.uint64).view(np.float64)


_PNAN, _NNAN = 0x7FF8000000000005, 0xFFF8000000000005
_NEG = 0x8000000000000000


@pytest.mark.parametrize("jit", [False, True])
def test_max_min_signed_zero_and_nan_sign(jit):
    """XLA's Max/Min: -0.0 < +0.0; a NaN first operand is returned as is; a NaN second
    operand comes back with the sign bits and-ed (max) / or-ed (min) with the first's."""
    f = (lambda a, b: (lax.max(a, b), lax.min(a, b)))
    f = tracer.jit(f) if jit else f
    a = _f(0, _NEG, 0, _NEG, _PNAN, _NNAN, 0x3FF0000000000000)
    b = _f(_NEG, 0, _NNAN, _PNAN, 0, 0, _NNAN)
    mx, mn = (np.asarray(v).view(np.uint64) for v in f(a, b))
    np.testing.assert_array_equal(mx, [0, 0, _PNAN, _PNAN, _PNAN, _NNAN, _PNAN])
    np.testing.assert_array_equal(mn, [_NEG, _NEG, _NNAN, _NNAN, _PNAN, _NNAN, _NNAN])


@pytest.mark.parametrize("jit", [False, True])
def test_reduce_max_of_signed_zeros_is_layout_independent(jit):
    """reduce_max([0.0, -0.0]) is +0.0 in every layout (NumPy's 1-D and 2-D loops pick
    differently); any NaN gives the canonical NaN; empty gives the identity."""
    f = (lambda x: (lax.reduce_max(x, (x.ndim - 1,)), lax.reduce_min(x, (x.ndim - 1,))))
    f = tracer.jit(f) if jit else f
    for x in (np.array([0.0, -0.0]), np.array([-0.0, 0.0]), np.array([[0.0, -0.0]] * 3),
              np.array([0.0, -0.0] * 9, np.float32), np.array([-0.0, 0.0], np.float16)):
        mx, mn = f(x)
        assert not np.signbit(mx).any() and np.signbit(mn).all(), x
    mx, mn = f(_f(0, _NNAN, _NEG))
    assert _bits(mx) == 0x7FF8000000000000 and _bits(mn) == 0x7FF8000000000000
    mx, mn = f(np.zeros((2, 0), np.float32))
    np.testing.assert_array_equal(mx, [-np.inf] * 2)
    np.testing.assert_array_equal(mn, [np.inf] * 2)


def test_top_k_total_order_example():
    """The issue's example: JAX's answer, eagerly and compiled, with sign bits."""
    x = np.array([0.0, -0.0, np.nan, 1.0, -np.nan])
    for fn in (lambda x: lax.top_k(x, 5), tracer.jit(lambda x: lax.top_k(x, 5))):
        v, i = fn(x)
        np.testing.assert_array_equal(i, [2, 3, 0, 1, 4])
        np.testing.assert_array_equal(np.signbit(v), [False, False, False, True, True])
        assert np.isnan(v[0]) and np.isnan(v[4]) and v[1] == 1


def test_top_k_total_order_long_rows_and_ints():
    """Rows longer than the top_k buffer take the sorting path: same order; integer and
    float16 operands too."""
    rng = np.random.default_rng(0)
    x = rng.choice(np.array([0.0, -0.0, np.nan, -np.nan, 1.0, -1.0, np.inf]), (3, 80))
    # the total-order key, descending (~ reverses integer order), ties by index
    i = x.view(np.int64)
    key = np.where(i < 0, i ^ np.int64(0x7FFFFFFFFFFFFFFF), i)
    want = np.argsort(~key, axis=-1, kind="stable")
    for k in (5, 40, 80):
        for fn in (lax.top_k, tracer.jit(lax.top_k, static_argnums=1)):
            v, i = fn(x, k)
            np.testing.assert_array_equal(i, want[:, :k])
            np.testing.assert_array_equal(_bits(v), _bits(np.take_along_axis(x, want[:, :k],
                                                                             -1)))
    for dt in (np.int8, np.uint8, np.int32, np.float16):
        xi = rng.integers(0, 4, (2, 9)).astype(dt)
        v, i = tracer.jit(lax.top_k, static_argnums=1)(xi, 4)
        want = np.argsort(-xi.astype(np.int64), axis=-1, kind="stable")[:, :4]
        np.testing.assert_array_equal(i, want)


def test_sort_keeps_zeros_and_nans_in_input_order():
    """lax.sort (JAX's): -0.0 == +0.0 and every NaN equal and last, stable."""
    x = _f(_PNAN, 0, _NEG, _NNAN, 0x3FF0000000000000, _NEG, 0)
    for fn in (lambda x: lax.sort(x), tracer.jit(lambda x: lax.sort(x))):
        np.testing.assert_array_equal(_bits(fn(x)), _bits(x)[[1, 2, 5, 6, 4, 0, 3]])


def test_cumsum_and_cumlogsumexp_start_from_plus_zero():
    """XLA scans from the identity: cumsum([-0.0, -0.0]) is [+0.0, +0.0] (NumPy: -0.0);
    cumprod keeps -0.0 (1 * -0.0)."""
    x = np.array([-0.0, -0.0, 1.0])
    for jit in (False, True):
        cs = (tracer.jit(lax.cumsum) if jit else lax.cumsum)(x)
        cl = (tracer.jit(lax.cumlogsumexp) if jit else lax.cumlogsumexp)(x[:1])
        cp = (tracer.jit(lax.cumprod) if jit else lax.cumprod)(x)
        np.testing.assert_array_equal(np.signbit(cs), [False, False, False])
        assert not np.signbit(cl[0]) and cl[0] == 0
        np.testing.assert_array_equal(np.signbit(cp), [True, False, False])


def test_max_pool_and_cummax_grad_at_signed_zero_ties():
    """Compositions: grad of max-reductions where the maximum is a tie of -0.0 and +0.0
    splits equally (JAX's rule: the zeros compare equal), eagerly and under jit."""
    x = np.array([0.0, -0.0, -1.0])
    g = tracer.grad(lambda x: lax.reduce_max(x, (0,)))
    np.testing.assert_array_equal(g(x), [0.5, 0.5, 0.0])
    np.testing.assert_array_equal(tracer.jit(g)(x), [0.5, 0.5, 0.0])
    gm = tracer.grad(lambda a: lax.max(a, -0.0))
    assert gm(0.0) == 0.5 and tracer.jit(gm)(0.0) == 0.5
    # top_k's gradient follows its (total-order) selection: +0.0 first, then -0.0
    gt = tracer.grad(lambda x: lax.top_k(x, 1)[0][0])
    np.testing.assert_array_equal(gt(np.array([-0.0, 0.0, -1.0])), [0.0, 1.0, 0.0])
    np.testing.assert_array_equal(tracer.jit(gt)(np.array([-0.0, 0.0, -1.0])),
                                  [0.0, 1.0, 0.0])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_eager_equals_jit_on_longer_axes(dtype):
    """Longer axes than the JAX cases (vectorized and blocked compiled loops, top_k past
    its buffer, windows of 3x3 with padding): compiled bits equal eager bits."""
    from total_order_cases import specials
    rng = np.random.default_rng(1)
    x = rng.choice(specials(dtype), (37, 41))

    def f(x):
        return (lax.reduce_max(x, (0,)), lax.reduce_min(x, (1,)), lax.reduce_max(x, (0, 1)),
                lax.argmax(x, 0, np.int32), lax.argmin(x, 1, np.int32),
                lax.cummax(x, axis=0), lax.cummin(x, axis=1, reverse=True),
                lax.cumsum(x, axis=1), lax.max(x, x[::-1]), lax.min(x, x[::-1, ::-1]),
                lax.reduce_window(x, -np.inf, lax.max, (3, 3), (2, 1), "SAME"),
                lax.reduce_window(x, np.inf, lax.min, (1, 4), (1, 3), "VALID"),
                lax.sort(x, dimension=0), lax.top_k(x, 35), lax.top_k(x.T, 3),
                lax.clamp(x[::-1], x, x[:, ::-1]), tnp.clip(x, x[0], x[1]))

    for k, (e, j) in enumerate(zip(tracer.tree_util.tree_leaves(f(x)),
                                   tracer.tree_util.tree_leaves(tracer.jit(f)(x)))):
        assert_bits(j, e, "bits", f"output {k}")


def test_vmap_of_top_k_and_cummax_matches_a_loop():
    x = np.array([[0.0, -0.0, np.nan, -np.nan], [-0.0, 0.0, -1.0, -0.0]])
    v, i = tracer.vmap(lambda r: lax.top_k(r, 3))(x)
    for r in range(2):
        vr, ir = lax.top_k(x[r], 3)
        np.testing.assert_array_equal(_bits(v[r]), _bits(vr))
        np.testing.assert_array_equal(i[r], ir)
    c = tracer.jit(tracer.vmap(lambda r: lax.cummax(r, axis=0)))(x)
    for r in range(2):
        np.testing.assert_array_equal(_bits(c[r]), _bits(lax.cummax(x[r], axis=0)))


def _spec_rank(v):
    """A sortable key from the spec's chain -NaN < -Inf < -Finite < -0 < +0 < +Finite <
    +Inf < +NaN, written from the classes (not the bits); NaNs of one sign are ordered by
    payload as IEEE totalOrder does (larger payload farther from zero)."""
    v = np.asarray(v)
    neg = bool(np.signbit(v))
    if np.isnan(v):
        payload = int(v.view(f"u{v.itemsize}")) & ((1 << (8 * v.itemsize - 1)) - 1)
        return (0, -payload) if neg else (7, payload)
    if np.isinf(v):
        return (1, 0) if neg else (6, 0)
    if v == 0:
        return (3, 0) if neg else (4, 0)
    return (2 if neg else 5, float(v))


_TOTAL = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
          "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(_TOTAL))
def test_total_order_compare_matches_the_spec(name, dtype):
    """All six TOTALORDER directions on every pair of specials (+-0, +-NaN with and without
    payload, +-inf, +-1) and of ordinary values, eager and jit, against the spec's chain;
    broadcast_compare(..., "TOTALORDER") gives the same."""
    s = np.concatenate([inputs("unary", dtype)[0], np.array([2.5, -2.5, 1e-3], dtype)])
    a, b = (v.ravel() for v in np.meshgrid(s, s, indexing="ij"))
    want = np.array([_TOTAL[name](_spec_rank(x), _spec_rank(y)) for x, y in zip(a, b)])
    fn = getattr(lax, f"{name}_total_order")
    for f in (fn, tracer.jit(fn),
              lambda x, y: lax.broadcast_compare(x, y, name.upper(), "TOTALORDER")):
        got = np.asarray(f(a, b))
        assert got.dtype == np.bool_
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, (f"{name}_total_order({a[bad[0]]!r}, {b[bad[0]]!r}) = "
                               f"{got[bad[0]]}, spec says {want[bad[0]]}")
    # integers compare by value; a scalar broadcasts; -0.0 vs +0.0 both ways
    i = np.array([-3, 0, 2, 2], np.int32)
    np.testing.assert_array_equal(np.asarray(tracer.jit(fn)(i, np.int32(2))),
                                  _TOTAL[name](i, 2))
    z = np.array([-0.0, 0.0], dtype)
    np.testing.assert_array_equal(np.asarray(fn(z, z[::-1])),
                                  [_TOTAL[name](0, 1), _TOTAL[name](1, 0)])


def test_total_order_compare_errors_and_vmap():
    from tracer.test_util import check_vmap
    x = np.array([[0.0, -0.0], [np.nan, 1.0]])
    for name in ("ne", "gt", "ge"):
        fn = getattr(lax, f"{name}_total_order")
        check_vmap(fn, (x, x[::-1]), in_axes=(0, 1))
        with pytest.raises(TypeError, match=f"{name}_to"):
            fn(np.ones(3), np.ones(3, np.float32))
        with pytest.raises(TypeError, match=f"{name}_to"):
            fn(np.ones(3, np.complex128), np.ones(3, np.complex128))
    assert tracer.grad(lambda x: lax.select(lax.gt_total_order(x, 0.0), x, -x))(-0.0) == -1.0


# ===================================== dtypes ==========================================

_IN = ("bool", "int8", "uint8", "int16", "int32", "float16", "float32", "complex64")


def _data(dt):
    if dt == "bool":
        return np.array([[True, False, True], [True, True, False]])
    if dt.startswith("u"):
        return np.array([[250, 1, 7], [3, 0, 9]], dt)
    return np.array([[-1, 1, 2], [3, 0, -4]]).astype(dt)


def _jax_cum_dtype(name, dt, dtype):
    """jax.numpy's result dtype (x64), recorded from JAX 0.10.2."""
    if dtype is not None:
        return np.dtype(dtype)
    dt = np.dtype(dt)
    if dt == np.bool_:
        return np.dtype(np.int64)
    if name == "cumulative_sum" and dtypes.is_integer(dt):
        return np.dtype(np.uint64 if dtypes.is_unsigned_integer(dt) else np.int64)
    return dt


def _check_eager_jit(fn, x, want, what):
    got = fn(x)
    got_jit = tracer.jit(fn)(x)
    for g, w in ((got, want), (got_jit, want)):
        g = np.asarray(g)
        assert g.dtype == w.dtype, f"{what}: dtype {g.dtype}, want {w.dtype}"
        if w.dtype.kind in "fc":
            # NumPy rounds intermediates to a float16 input's dtype in places
            f16 = np.float16 in (w.dtype, np.asarray(x).dtype)
            np.testing.assert_allclose(g, w, rtol=2e-3 if f16 else 1e-6, err_msg=what)
        else:
            np.testing.assert_array_equal(g, w, err_msg=what)
    assert_bits(got_jit, got, "bits", what + " jit vs eager")


_CUM = ("cumsum", "cumprod", "nancumsum", "nancumprod", "cumulative_sum", "cumulative_prod")


@pytest.mark.parametrize("name", _CUM)
@pytest.mark.parametrize("dtype", [None, "bool", "int8", "int32", "float32", "complex64"])
def test_cumulative_dtypes(name, dtype):
    """Values as NumPy's (computed in the result dtype), dtypes as jax.numpy's; dtype=bool
    is a running any (sum) / all (prod) of ``x != 0``: cumsum([-1, 1], dtype=bool) is
    [True, True]."""
    for dt in _IN:
        if dt.startswith("u") and dtype in ("int8", "int32"):
            continue          # 250 does not fit; NumPy's out-of-range casts are undefined
        x = _data(dt)
        rd = _jax_cum_dtype(name, dt, dtype)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")        # complex -> real discards imaginary
            if dtype == "bool":
                want = getattr(np, name)(x, axis=1, dtype=bool)
            else:
                want = getattr(np, name)(x.astype(rd), axis=1)
        fn = lambda v: getattr(tnp, name)(v, axis=1, dtype=dtype)
        _check_eager_jit(fn, x, np.asarray(want).astype(rd), f"{name}({dt}, dtype={dtype})")
    assert tnp.cumsum(np.array([-1, 1]), dtype=bool).tolist() == [True, True]
    assert tnp.cumulative_sum(np.array([0, 2, 0]), dtype=bool, include_initial=True
                              ).tolist() == [False, False, True, True]


def test_cumulative_under_grad():
    x = np.array([1.5, -2.0, 3.0], np.float32)
    g = tracer.grad(lambda v: tnp.sum(tnp.cumsum(v, dtype=np.float64)))(x)
    assert g.dtype == np.float32
    np.testing.assert_array_equal(g, [3, 2, 1])
    gj = tracer.jit(tracer.grad(lambda v: tnp.sum(tnp.cumprod(v))))(x)
    np.testing.assert_allclose(gj, [1 + -2 + -6, 1.5 + 4.5, -3.0], rtol=1e-6)
    gn = tracer.grad(lambda v: tnp.sum(tnp.nancumsum(v)))(np.array([1.0, np.nan, 2.0]))
    np.testing.assert_array_equal(gn, [3.0, 0.0, 1.0])


_RED = ("sum", "prod", "nansum", "nanprod", "mean", "nanmean", "var", "nanvar", "std",
        "nanstd")


@pytest.mark.parametrize("name", _RED)
@pytest.mark.parametrize("dtype", [None, "bool", "int8", "int64", "float16", "float32",
                                   "complex64"])
def test_reduction_dtypes(name, dtype):
    """sum/prod: NumPy's values and dtypes (jax.numpy's agree with x64: small integers
    widen to int64 / uint64, bool to int64; dtype=bool is any / all). mean/var/std: the
    default float for integers (NumPy's float64; JAX 0.10 returns float32 for integers
    up to 32 bits, see README), or ``dtype`` computed in, with NumPy's values; dtype=bool
    raises TypeError (as JAX) and std with an integer dtype ValueError (as JAX)."""
    stat = name.lstrip("nan") in ("mean", "var", "std")
    for dt in _IN:
        x = _data(dt)
        fn = lambda v: getattr(tnp, name)(v, axis=1, dtype=dtype)
        if stat and dtype == "bool":
            with pytest.raises((TypeError, ValueError), match=name):
                fn(x)
            continue
        if name.endswith("std") and dtype is not None and dtype[0] in "ib":
            with pytest.raises(ValueError, match=f"{name}: dtype must be a float"):
                fn(x)
            continue
        if name.endswith(("var", "std")) and dt == "complex64" and dtype is not None and \
                dtype != "complex64":
            with pytest.raises(ValueError, match="complex"):
                fn(x)
            continue
        if stat and dtype in ("int8", "int64") and dt != dtype:
            continue          # NumPy computes x - mean in the promoted input dtype here
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            want = np.asarray(getattr(np, name)(x, axis=1, dtype=dtype))
        _check_eager_jit(fn, x, want, f"{name}({dt}, dtype={dtype})")


def test_reduction_dtype_examples():
    """The cases the issue names, spelled out."""
    x8 = np.full(300, 100, np.int8)
    assert tnp.sum(x8).dtype == np.int64 and int(tnp.sum(x8)) == 30000
    assert tnp.sum(np.array([-1, 1]), dtype=bool).item() is True
    assert tnp.prod(np.array([-1, 0]), dtype=bool).item() is False
    assert tnp.sum(np.array([True, True])).dtype == np.int64
    assert tnp.mean(np.array([1, 2], np.int8), dtype=np.int8).item() == 1
    assert tnp.mean(np.array([1, 2], np.int32)).dtype == np.float64
    assert tnp.mean(np.array([1, 2], np.float16)).dtype == np.float16
    # float16 means accumulate in float32 (as NumPy and JAX): no overflow at 65504 * 2
    assert float(tnp.mean(np.array([60000, 60000], np.float16))) == 60000
    # sum with where= and initial= and dtype=bool
    w = np.array([True, False, True])
    assert tnp.sum(np.array([0, 5, 0]), dtype=bool, where=w).item() is False
    assert tnp.prod(np.array([0, 5, 2]), dtype=bool, initial=True, where=~w).item() is True


def test_reduction_dtypes_under_grad_and_x32(x32):
    """grad through a dtype= reduction casts the cotangent back; with enable_x64 off the
    default integer is int32 (small integers widen to it; cumsum keeps int8)."""
    x = np.array([1.0, 2.0, 4.0], np.float32)
    g = tracer.grad(lambda v: tnp.mean(v, dtype=np.float16))(x)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, [1 / 3] * 3, rtol=1e-3)
    assert tnp.sum(np.array([1, 2], np.int8)).dtype == np.int32
    assert tnp.cumsum(np.array([1, 2], np.int8)).dtype == np.int8
    assert tnp.cumsum(np.array([True, True])).dtype == np.int32
    assert tnp.mean(np.array([1, 2], np.int8)).dtype == np.float32
