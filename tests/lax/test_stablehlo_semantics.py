"""Semantics the spec (XLA's operation semantics, StableHLO) defines beyond jax.lax's
dtype sets, as the StableHLO interpreter's op tests exercise them (issue 18, item 5):
bool add/multiply, complex max/min, complex atan2 and cbrt, real/imag of floats,
reduce_precision with no mantissa bits, a Conditional's out-of-range branch index.

Each behaviour is checked eagerly, under jit (the compiled kernels, bit for bit the eager
result), under vmap and, where differentiable, under jvp/grad. Oracles: values derived
from the spec's definitions written out here, and values recorded from JAX 0.10.2
(XLA:CPU) where JAX computes the operation (noted where used).
"""
from __future__ import annotations

import numpy as np
import pytest

import lax
import tracer
from tracer.test_util import check_grads, check_vmap


def _bits(a):
    """An array's raw bits, one unsigned integer per element (a complex element: two)."""
    a = np.ascontiguousarray(np.asarray(a))
    real = {8: np.float32, 16: np.float64}.get(a.dtype.itemsize) if a.dtype.kind == "c" \
        else None
    if real is not None:
        a = a.view(real)
    return a.view(f"u{a.dtype.itemsize}")


def _assert_same_bits(got, want, msg=""):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, msg)
    np.testing.assert_array_equal(_bits(got), _bits(want), err_msg=msg)


def _eager_and_jit(f, *args):
    """f's eager result, after checking that jit (compiled) gives the same bits."""
    eager = f(*args)
    _assert_same_bits(tracer.jit(f)(*args), eager, f"jit of {f}")
    return eager


def _complex_grid(dt):
    """Every complex number whose parts are each of 0, -0, 1, -1.5, inf, NaN and -NaN."""
    real = np.finfo(dt).dtype
    re = np.array([0.0, -0.0, 1.0, -1.5, np.inf, np.nan, 0.0], real)
    re[-1] = -re[5]
    out = np.empty((len(re), len(re)), dt)
    out.real, out.imag = re[:, None], re[None, :]
    return out.ravel()


# ==================================== complex max/min ====================================

# JAX 0.10.2 (jit, XLA:CPU), complex64 and complex128 alike: over all pairs (x, y) of
# _complex_grid (x the outer loop), whether lax.max / lax.min returned y's bits (else x's),
# as np.packbits hex.
_JAX_PICKS_Y = {
    "max": "6fdff80fffffd7effc07ffffc397fe03fffffdffff01fffff061ff80ffffffdfffc07ffffff7ff"
           "e03fffffddbff01fffffef5ff80fffff970ffc07fffffff7fe03ffffe1c1ff01ffffffff7f80ff"
           "ffffffdfc07ffffc0006e03ffffe0005701fffff0000380fffff8001dc07ffffc0000603ffffe0"
           "007d01fffff0003f00ffffffffffdbfffffffffff5fffffffffff0ffffffffffff7ffffffffffc"
           "1ffffffffffff7fffffffffffdfffff00000006ffff800000057fffc00000003fffe0000001dff"
           "ff000000007fff80000007dfffc0000003f7fffffffffffdffffffffffff7fffffffffffdfffff"
           "fffffff7fffffffffffdffffffffffff7fffffffffffdffffffffffff7fffffffffffdffffffff"
           "ffff7fffffffffffdffffffffffff7fffffffffffdffffffffffff00",
    "min": "57ac07f01fffcbd603f80ffff5fb01fc07ffe0c580fe03ffff7fc07f01ffffdfe03f80fffff7f0"
           "1fc07fffad580fe03fffd72c07f01ffffbd603f80fffc58301fc07fffffd80fe03ffffff407f01"
           "ffffffc03f80fffffff57fc07ffffffcbfe03fffffff5ff01ffffffe0ff80ffffffff7fc07ffff"
           "fffdfe03ffffffff7f01fff800001580fffc000012c07ffe00000d603fff000000301fff800003"
           "d80fffc00001f407ffe00000fc03ffffffffff57ffffffffffcbfffffffffff5ffffffffffe0ff"
           "ffffffffff7fffffffffffdffffffffffff7fffffffffffdffffffffffff7fffffffffffdfffff"
           "fffffff7fffffffffffdffffffffffff7fffffffffffdffffffffffff7fffffffffffdffffffff"
           "ffff7fffffffffffdffffffffffff7fffffffffffdffffffffffff00",
}


def _spec_pick_y(x, y, op):
    """StableHLO's complex maximum/minimum: x when its (real, imag) pair compares above
    (max) / below (min) y's lexicographically -- the imaginary parts decide only when the
    real parts compare equal -- else y. Any NaN comparison is false, so y."""
    out = []
    for a, b in zip(x.tolist(), y.tolist()):
        cmp = (lambda p, q: p > q) if op == "max" else (lambda p, q: p < q)
        pick_x = cmp(a.imag, b.imag) if a.real == b.real else cmp(a.real, b.real)
        out.append(not pick_x)
    return np.array(out)


@pytest.mark.parametrize("dt", [np.complex64, np.complex128])
@pytest.mark.parametrize("op", ["max", "min"])
def test_complex_max_min_is_lexicographic_as_the_spec_and_jax(op, dt):
    e = _complex_grid(dt)
    x, y = np.repeat(e, len(e)), np.tile(e, len(e))
    f = getattr(lax, op)
    got = _eager_and_jit(f, x, y)
    # the result is one operand's bits, never a new value (no NaN made or canonicalized)
    picks_y = _spec_pick_y(x, y, op)
    _assert_same_bits(got, np.where(picks_y, y, x))
    jax_picks_y = np.unpackbits(np.frombuffer(bytes.fromhex(_JAX_PICKS_Y[op]), np.uint8))
    # (the table says x where x and y have the same bits: either is the answer there)
    same = (_bits(x).reshape(-1, 2) == _bits(y).reshape(-1, 2)).all(1)
    np.testing.assert_array_equal(picks_y & ~same, jax_picks_y[:len(x)].astype(bool))


def test_complex_max_min_named_cases():
    c = np.complex128
    cases = [  # (x, y, max, min): real parts decide, imaginary parts break their ties
        (1 + 2j, 1 + 3j, 1 + 3j, 1 + 2j), (2 + 0j, 1 + 5j, 2 + 0j, 1 + 5j),
        (-1 - 1j, -1 + 0j, -1 + 0j, -1 - 1j)]
    for x, y, mx, mn in cases:
        assert complex(lax.max(c(x), c(y))) == mx and complex(lax.min(c(x), c(y))) == mn
    # -0.0 == +0.0: equal real parts, so the imaginary parts decide, and a full tie picks y
    z = np.array([complex(-0.0, 1.0)]), np.array([complex(0.0, 2.0)])
    _assert_same_bits(lax.max(*z), z[1])
    _assert_same_bits(lax.min(*z), z[0])
    tie = np.array([complex(-0.0, 0.0)]), np.array([complex(0.0, 0.0)])
    _assert_same_bits(lax.max(*tie), tie[1])
    _assert_same_bits(lax.min(*tie), tie[1])
    # NaN: no propagation, the comparison is false so y comes back (order matters)
    nan, one = np.array([complex(np.nan, 0)]), np.array([1 + 0j])
    _assert_same_bits(lax.max(nan, one), one)
    _assert_same_bits(lax.max(one, nan), nan)
    _assert_same_bits(lax.min(nan, one), one)


def test_complex_max_min_jvp_vmap_and_compiled_kernel(rng):
    x = np.array([1 + 2j, 1 + 3j, 2 + 0j, -0.0 + 1j, 3 + 1j])
    y = np.array([1 + 3j, 1 + 3j, 1 + 5j, 0.0 + 1j, 3 + 1j])
    tx, ty = np.full(5, 1 + 1j), np.full(5, 10 - 2j)
    # JAX 0.10.2: the chosen operand's tangent; ties (x == y) split it 0.5/0.5
    for f, want in [(lax.max, [10 - 2j, 5.5 - 0.5j, 1 + 1j, 5.5 - 0.5j, 5.5 - 0.5j]),
                    (lax.min, [1 + 1j, 5.5 - 0.5j, 10 - 2j, 5.5 - 0.5j, 5.5 - 0.5j])]:
        _, t = tracer.jvp(f, (x, y), (tx, ty))
        np.testing.assert_array_equal(np.asarray(t), want)
        a = (rng.standard_normal((4, 3)) + 1j * rng.standard_normal((4, 3)))
        b = a.real + 1j * rng.standard_normal((4, 3))     # equal real parts: imag decides
        check_vmap(f, (a, b))
        check_vmap(f, (a, b[0]), in_axes=(0, None))
        check_grads(lambda u, v: f(u, v * 3.0), (a, a + 0.5), order=2)
    text = tracer.jit(lambda a, b: lax.max(a, b) + lax.min(a, b)).lower(x, y).as_text()
    assert "host_step" not in text and "scalar.real" in text


# ================================= complex atan2 and cbrt ================================

# JAX 0.10.2 (XLA:CPU), complex128: jax.lax.atan2(x, y) and its jvp in x (tangent 1).
_ATAN2_X = np.array([1 + 2j, -0.5 + 0.25j, 3 - 1j, 1e-3 + 2j, -2 - 2j, 0.5 + 0j])
_ATAN2_Y = np.array([0.5 - 1j, 2 + 0.5j, -1 + 0.5j, 1 + 1e-3j, 0.25 + 3j, -1 + 0j])
_ATAN2_JAX = np.array([1.9081667979066728 + 0.3790868723420225j,
                       -0.20911216478961453 + 0.17072267009818934j,
                       1.908166797906673 - 0.04456205785157976j,
                       1.5697963281282268 + 0.5493051443360547j,
                       -0.7446234083011973 + 0.3830779773097176j,
                       2.677945044588987 + 0j])
_ATAN2_JAX_DX = np.array([-0.21138211 + 0.09756098j, 0.4712813 - 0.08247423j,
                          -0.09756098 - 0.02090592j, -0.33333133 - 0.001j,
                          0.15438661 - 0.17156109j, -0.8 + 0j])


def _spec_atan2(x, y):
    """StableHLO's complex atan2(x, y) = -i log((y + i x) / sqrt(y^2 + x^2)), in Python's
    complex128 arithmetic (cmath)."""
    import cmath
    return np.array([-1j * cmath.log((b + 1j * a) / cmath.sqrt(b * b + a * a))
                     for a, b in zip(x.tolist(), y.tolist())])


@pytest.mark.parametrize("dt,rtol", [(np.complex128, 1e-14), (np.complex64, 1e-6)])
def test_complex_atan2_is_the_spec_formula_and_jax(dt, rtol):
    x, y = _ATAN2_X.astype(dt), _ATAN2_Y.astype(dt)
    got = _eager_and_jit(lax.atan2, x, y)
    assert got.dtype == dt
    np.testing.assert_allclose(got, _ATAN2_JAX, rtol=rtol)
    np.testing.assert_allclose(got, _spec_atan2(x.astype(complex), y.astype(complex)),
                               rtol=rtol)
    # real-valued complex operands give real atan2 (+0j): atan2(0.5, -1) = pi - atan(0.5)
    np.testing.assert_allclose(got[-1], np.arctan2(0.5, -1.0) + 0j, rtol=rtol)
    _, t = tracer.jvp(lax.atan2, (x, y), (np.ones(6, dt), np.zeros(6, dt)))
    np.testing.assert_allclose(np.asarray(t), _ATAN2_JAX_DX, rtol=max(rtol, 1e-7))
    check_vmap(lax.atan2, (x.reshape(2, 3), y.reshape(2, 3)))


def test_complex_atan2_at_edges_keeps_the_formula():
    # at zeros and infinities the formula's NaNs and signs come from its steps
    # (i * x is a complex product; 0/0 is NaN), in both tiers alike
    e = _complex_grid(np.complex128)
    x, y = np.repeat(e, len(e)), np.tile(e, len(e))
    got = _eager_and_jit(lax.atan2, x, y)
    with np.errstate(all="ignore"):
        want = -1j * np.log((y + 1j * x) / np.sqrt(y * y + x * x))
    _assert_same_bits(got, want)
    assert np.isnan(complex(lax.atan2(np.complex128(0), np.complex128(0))).real)


def _spec_cbrt(z):
    """StableHLO's complex cbrt: |z|^(1/3) (cos(t/3) + i sin(t/3)), t = atan2(im, re)."""
    import math
    out = []
    for v in z.tolist():
        r, t = math.hypot(v.real, v.imag) ** (1 / 3), math.atan2(v.imag, v.real) / 3
        out.append(complex(r * math.cos(t), r * math.sin(t)))
    return np.array(out)


@pytest.mark.parametrize("dt,rtol", [(np.complex128, 1e-14), (np.complex64, 1e-7)])
def test_complex_cbrt_is_the_principal_root(dt, rtol):
    fi = np.finfo(dt)
    big, tiny = float(fi.max) / 8, float(fi.tiny)      # |z| without overflow, |z|^2 with
    z = np.array([-8 + 0j, 8j, 27 + 0j, -1 - 1j, 0.125 + 0j, complex(tiny, tiny),
                  complex(3 * big / 5, -4 * big / 5)], dt)
    got = _eager_and_jit(lax.cbrt, z)
    assert got.dtype == dt
    s3 = np.sqrt(3)
    principal = [1 + s3 * 1j, s3 + 1j, 3 + 0j]       # cbrt(-8) is not -2 for complex
    np.testing.assert_allclose(got[:3], principal, rtol=10 * rtol)
    finite = np.isfinite(z.astype(complex))
    np.testing.assert_allclose(got[finite], _spec_cbrt(z[finite].astype(complex)),
                               rtol=10 * rtol)
    # (cubed back: the moderate ones, a part that cancels to 0 within rounding of |z|)
    np.testing.assert_allclose(got[:5] ** 3, z[:5], rtol=0, atol=100 * rtol * 27)
    # a real float operand keeps its real cube root
    assert float(lax.cbrt(np.float64(-8.0))) == -2.0


def test_complex_cbrt_edges_grad_and_vmap(rng):
    z = np.array([0j, complex(-0.0, 0.0), complex(np.inf, 0.0), complex(np.nan, 1.0)])
    got = _eager_and_jit(lax.cbrt, z)
    # the formula as it stands: 0 -> 0, inf+0j -> inf + (inf * sin 0 = NaN) j, NaN -> NaN
    assert complex(got[0]) == 0 and complex(got[1]) == 0
    assert np.isinf(got[2].real) and np.isnan(got[2].imag)
    assert np.isnan(got[3].real) and np.isnan(got[3].imag)
    w = rng.uniform(0.5, 2, (2, 3)) + 1j * rng.uniform(0.5, 2, (2, 3))
    # holomorphic away from the negative real axis: d cbrt(z) = dz / (3 cbrt(z)^2)
    _, t = tracer.jvp(lax.cbrt, (w,), (np.ones_like(w),))
    np.testing.assert_allclose(np.asarray(t), 1 / (3 * _spec_cbrt(w.ravel()) ** 2)
                               .reshape(2, 3), rtol=1e-13)
    check_grads(lax.cbrt, (w,), order=2)
    check_vmap(lax.cbrt, (w,))


# ============================ reduce_precision with 0 mantissa bits ==========================

# Quiet NaNs of both signs, signalling NaNs (payloads), -sNaN, +inf, 1.0 as bit patterns.
_RP_NAN_BITS = {
    np.float16: [0x7e00, 0xfe00, 0x7c01, 0x7d55, 0xfc01, 0x7c00, 0x3c00],
    np.float32: [0x7fc00000, 0xffc00000, 0x7f800001, 0x7fa5a5a5, 0xff800001, 0x7f800000,
                 0x3f800000],
    np.float64: [0x7ff8000000000000, 0xfff8000000000000, 0x7ff0000000000001,
                 0x7ff5a5a5a5a5a5a5, 0xfff0000000000001, 0x7ff0000000000000,
                 0x3ff0000000000000],
}
# JAX 0.10.2 (XLA:CPU, eager and jit): every NaN comes back with its own bits, whatever
# the format, mantissa_bits=0 included (the spec: "NaN values are retained"); 1.0 turns
# into 0 in a format with 1 exponent bit (its largest finite value is below 1).
_RP_NAN_JAX_ONE = {(1, 0): 0, (5, 0): 1, (8, 0): 1, (11, 0): 1, (2, 1): 1}


@pytest.mark.parametrize("dt", [np.float16, np.float32, np.float64])
def test_reduce_precision_keeps_nans_with_zero_mantissa_bits(dt):
    u = np.dtype(f"u{np.dtype(dt).itemsize}")
    bits = np.array(_RP_NAN_BITS[dt], u)
    x = bits.view(dt)
    for (e, m), one_kept in _RP_NAN_JAX_ONE.items():
        want = bits.copy()
        want[-1] = bits[-1] if one_kept else 0
        f = lambda v: lax.reduce_precision(v, e, m)
        np.testing.assert_array_equal(np.asarray(f(x)).view(u), want, err_msg=str((e, m)))
        # compiled: a float16 operand is loaded through float32 (numba_backend.codegen),
        # which quiets a signalling NaN, so only the quiet ones there
        keep = [0, 1, 5, 6] if dt == np.float16 else slice(None)
        got = np.asarray(tracer.jit(f)(x[keep])).view(u)
        np.testing.assert_array_equal(got, want[keep], err_msg=f"jit {(e, m)}")
    # vmap: the same bits per member
    xs = np.stack([x, x[::-1]])
    out = tracer.vmap(lambda v: lax.reduce_precision(v, 5, 0))(xs)
    np.testing.assert_array_equal(np.asarray(out).view(u)[1], bits[::-1])


# =============================== Conditional's branch index ================================

def _cond_branches(middle):
    closed = tracer.make_jaxpr(
        lambda x: lax.switch(1, [lambda v: v, middle, lambda v: v * 3.0], x))(np.ones(3))
    (eqn,) = [e for e in closed.jaxpr.eqns if e.primitive is lax.cond_p]
    return eqn.params["branches"]


@pytest.mark.parametrize("middle", ["compiled", "host_step"])
def test_cond_primitive_runs_the_last_branch_out_of_range_under_jit(middle, rng):
    """The spec's Conditional (and JAX's cond primitive, eager and jit: recorded from JAX
    0.10.2): an index < 0 or >= N runs branch N-1. Compiled: in the generated driver, and
    in the Python loop around the compiled bodies that a branch with a host step gets."""
    import tracer.scipy.special as sp
    mid = (lambda v: v * 2.0) if middle == "compiled" else (lambda v: sp.hyp1f1(1.0, 2.0, v))
    branches = _cond_branches(mid)
    x = rng.uniform(0.5, 1.5, 3)
    f = lambda i, x: lax.cond_p.bind(i, x, branches=branches)[0]
    jf = tracer.jit(f)
    text = jf.lower(np.int32(0), x).as_text()
    assert ("host step" in text) == (middle == "host_step")
    mid_val = np.asarray(mid(x))
    for i, want in [(-1, x * 3), (-(2 ** 31), x * 3), (0, x), (1, mid_val), (2, x * 3),
                    (3, x * 3), (2 ** 31 - 1, x * 3)]:
        idx = np.int32(i)
        np.testing.assert_allclose(f(idx, x), want, rtol=1e-15, err_msg=str(i))
        _assert_same_bits(jf(idx, x), f(idx, x), str(i))
    # jvp and grad take the branch the primal takes
    _, t = tracer.jvp(lambda x: f(np.int32(-5), x), (x,), (np.ones(3),))
    np.testing.assert_array_equal(np.asarray(t), np.full(3, 3.0))
    g = tracer.grad(lambda x: f(np.int32(9), x).sum())(x)
    np.testing.assert_array_equal(np.asarray(g), np.full(3, 3.0))
    # vmap over the index (both tiers): each member's out-of-range index runs the last one
    idx = np.array([-3, 0, 1, 2, 9], np.int32)
    want = np.stack([x * 3, x, mid_val, x * 3, x * 3])
    for fn in (tracer.vmap(f, in_axes=(0, None)), tracer.jit(tracer.vmap(f, in_axes=(0, None)))):
        np.testing.assert_allclose(fn(idx, x), want, rtol=1e-15)


def test_switch_clamps_as_jax_while_the_primitive_runs_the_last_branch():
    # jax.lax.switch clamps the index into [0, N-1] before binding its cond (JAX 0.10.2:
    # switch(-1) runs branch 0); the StableHLO case it lowers to runs branch N-1 for -1.
    branches = (lambda: 1.0, lambda: 2.0, lambda: 3.0)
    for fn in (lax.switch, tracer.jit(lax.switch, static_argnums=1)):
        assert [float(fn(i, branches)) for i in (-1, 0, 1, 2, 7)] == [1, 1, 2, 3, 3]
    closed = tracer.make_jaxpr(lambda i: lax.switch(i, branches))(np.int32(0))
    (eqn,) = [e for e in closed.jaxpr.eqns if e.primitive is lax.cond_p]
    out = lax.cond_p.bind(np.int32(-1), branches=eqn.params["branches"])
    assert float(out[0]) == 3.0


# ================================ tracer.numpy stays jax.numpy ================================

def test_numpy_functions_keep_jax_numpys_dtype_rules():
    import tracer.numpy as tnp
    z = np.array([1 + 2j, np.nan + 0j, 1 + 0j])
    w = np.array([1 + 3j, 1 + 0j, np.nan + 0j])
    # JAX 0.10.2: jax.numpy.maximum/minimum of complex are lax.max/min (lexicographic)
    np.testing.assert_array_equal(tnp.maximum(z, w), [1 + 3j, 1 + 0j, np.nan + 0j])
    np.testing.assert_array_equal(tnp.minimum(z, w), [1 + 2j, 1 + 0j, np.nan + 0j])
    # ... while jax.numpy.cbrt and clip refuse complex input (so does numpy.cbrt)
    with pytest.raises(TypeError, match=r"cbrt: complex input \(complex128\).*lax.cbrt"):
        tnp.cbrt(z)
    with pytest.raises(ValueError, match="clip: received a complex value"):
        tnp.clip(z, 0, 1)
    with pytest.raises(ValueError, match="clip: received a complex value"):
        tnp.clip(np.ones(2), 0, 2j)
    np.testing.assert_allclose(tnp.cbrt(np.array([-8.0, 27.0])), [-2.0, 3.0], rtol=1e-15)
    # and bool addition is numpy's logical or, real/imag of floats numpy's
    np.testing.assert_array_equal(tnp.add(np.array([True, False]), np.array([True, False])),
                                  [True, False])
    np.testing.assert_array_equal(tnp.imag(np.array([1.0, np.nan])), [0.0, 0.0])
