"""Eager semantics of the ml_dtypes low-precision types against XLA's CPU backend: every
element-wise op over each format's edge values (every encoding of the 8- and 4-bit
formats and of the 2-/4-bit integers; bfloat16's edges and random encodings), compared
bit for bit with the tables recorded from JAX 0.10.2 (tests/data/lowp_elementwise_jax.npz,
``tools/record_lowp_elementwise_jax.py``), up to the departures listed in lowp_cases.py;
reductions, dot_general and conv accumulating in float32; refusals."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import lax
import tracer
import tracer.numpy as tnp
import lowp_cases as L

CASES = L.cases()


@pytest.fixture(autouse=True)
def _x32():
    tracer.config.update("enable_x64", False)
    yield
    tracer.config.update("enable_x64", True)


def test_tables_are_complete():
    keys = {c[0] for c in CASES}
    assert len(CASES) > 800
    for f in L.FLOATS:
        for op in ("add", "mul", "div", "exp", "sqrt", "from_f32", "to_f32", "max", "lt"):
            assert f"{f}/{op}" in keys, (f, op)
    for i in L.INTS:
        for op in ("add", "mul", "shift_right_logical", "population_count", "from_f32"):
            assert f"{i}/{op}" in keys, (i, op)
    # refusals JAX recorded: erfc of float8/float4 (an XLA legalization failure), abs of
    # the narrow integers (a JAX front-end limit; the spec allows it, tracer computes it)
    assert L.refused("float8_e4m3fn") == ["erfc: JaxRuntimeError"]
    assert L.refused("int4") == ["abs: TypeError"]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_matches_jax_bits(case):
    key, fn, args, want = case
    got = L.bits(np.asarray(fn(*args)))
    bad, _ = L.unexplained(key, args, got, want)
    assert not len(bad), (f"{key}: {len(bad)} of {len(want)} differ, first at inputs "
                          f"{[a[bad[0]] for a in args]}: {got[bad[0]]:#x}, JAX {want[bad[0]]:#x}")


EXACT = ["add", "sub", "mul", "div", "rem", "max", "min", "neg", "abs", "sign", "floor",
         "ceil", "round", "sqrt", "square", "eq", "lt", "ge", "from_f32", "to_f32",
         "to_float16", "from_int32", "shift_left", "shift_right_logical", "and", "clz"]


def test_arithmetic_and_conversions_are_exact_outside_nans_and_flushes():
    # The ulp allowance covers expanded transcendentals only: arithmetic, rounding,
    # comparisons and conversions are exact, everywhere but NaN encodings and the
    # float32-subnormal flushes of XLA's CPU backend.
    seen = 0
    for key, fn, args, want in CASES:
        if key.split("/", 1)[1] in EXACT:
            got = L.bits(np.asarray(fn(*args)))
            _, worst = L.unexplained(key, args, got, want)
            assert worst == 0 or key in L.QUIRKS, (key, worst)
            seen += 1
    assert seen > 200


def test_narrow_integers_wrap():
    x = np.array([7, -8, 5], ml_dtypes.int4)
    np.testing.assert_array_equal(np.asarray(lax.add(x, x)).astype(int), [-2, 0, -6])
    np.testing.assert_array_equal(np.asarray(lax.mul(x, x)).astype(int), [1, 0, -7])
    u = np.array([15, 3], ml_dtypes.uint2 if False else ml_dtypes.uint4)
    np.testing.assert_array_equal(np.asarray(lax.add(u, u)).astype(int), [14, 6])
    np.testing.assert_array_equal(
        np.asarray(lax.convert_element_type(np.int32([100, -100]), tnp.int4)).astype(int),
        [4, -4])


def _bf16(v):
    return np.asarray(v, np.float32).astype(ml_dtypes.bfloat16)


def test_reductions_accumulate_in_float32_and_round_once():
    rng = np.random.default_rng(0)
    x = _bf16(rng.uniform(0.5, 1.5, 4096))
    want = np.float32(x.astype(np.float32).sum(dtype=np.float32)).astype(ml_dtypes.bfloat16)
    got = np.asarray(lax.reduce_sum(x, (0,)))
    assert got.dtype == ml_dtypes.bfloat16 and got == want
    assert int(got.view(np.uint16)) == 17791          # jnp.sum(x), JAX 0.10.2
    # a bfloat16 running sum would stall at 2^(8+1): 4096 ones sum to 4096 here
    assert float(np.asarray(tnp.sum(tnp.ones(4096, tnp.bfloat16)))) == 4096.0
    c = np.asarray(lax.cumsum(_bf16(np.ones(1000)), 0))
    assert c.dtype == ml_dtypes.bfloat16 and float(c[-1]) == 1000.0
    w = np.asarray(lax.reduce_window_sum(_bf16(np.ones(600)), (600,), (1,), [(0, 0)]))
    assert float(w[0]) == 600.0
    assert np.asarray(tnp.prod(_bf16([2.0] * 10))) == 1024.0
    assert np.asarray(tnp.max(_bf16([1.0, 3.0, 2.0]))) == 3.0


def test_dot_general_and_conv_preferred_element_type():
    rng = np.random.default_rng(1)
    a, b = _bf16(rng.normal(size=(8, 300))), _bf16(rng.normal(size=(300, 4)))
    exact = a.astype(np.float32) @ b.astype(np.float32)
    dn = (((1,), (0,)), ((), ()))
    f32 = np.asarray(lax.dot_general(a, b, dn, preferred_element_type=np.float32))
    assert f32.dtype == np.float32
    np.testing.assert_allclose(f32, exact, rtol=1e-5, atol=1e-4)
    bf = np.asarray(lax.dot_general(a, b, dn))
    assert bf.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(bf.view(np.uint16), f32.astype(ml_dtypes.bfloat16).view(np.uint16))
    assert np.asarray(tnp.matmul(a, b)).dtype == ml_dtypes.bfloat16
    i4 = np.array([[7, -8], [1, 2]], ml_dtypes.int4)
    np.testing.assert_array_equal(
        np.asarray(lax.dot_general(i4, i4, dn, preferred_element_type=np.int32)),
        [[49 - 8, -56 - 16], [7 + 2, -8 + 4]])
    lhs, rhs = _bf16(rng.normal(size=(1, 2, 9, 9))), _bf16(rng.normal(size=(3, 2, 3, 3)))
    c32 = np.asarray(lax.conv_general_dilated(lhs, rhs, (1, 1), "VALID",
                                              preferred_element_type=np.float32))
    want = np.asarray(lax.conv_general_dilated(lhs.astype(np.float32), rhs.astype(np.float32),
                                               (1, 1), "VALID"))
    assert c32.dtype == np.float32
    np.testing.assert_allclose(c32, want, rtol=1e-5, atol=1e-5)
    cb = np.asarray(lax.conv_general_dilated(lhs, rhs, (1, 1), "VALID"))
    assert cb.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(cb.view(np.uint16),
                                  c32.astype(ml_dtypes.bfloat16).view(np.uint16))


def test_refusals_name_function_dtype_and_fix():
    i4 = np.array([1, 2], ml_dtypes.int4)
    with pytest.raises(TypeError, match=r"exp does not accept dtype int4.*astype"):
        lax.exp(i4)
    with pytest.raises(TypeError, match=r"shift_left does not accept dtype bfloat16"):
        lax.shift_left(_bf16([1.0]), _bf16([1.0]))
    with pytest.raises(TypeError, match=r"requires arguments of the same dtype.*bfloat16"):
        lax.add(_bf16([1.0]), np.float32([1.0]))
    # bitwise ops take the narrow integers
    np.testing.assert_array_equal(np.asarray(lax.bitwise_xor(i4, i4)).astype(int), [0, 0])


def test_random_bits_match_jax():
    # jax.random.uniform/normal(PRNGKey(0), (6,), dtype) with JAX 0.10.2, as bits
    key = tracer.random.PRNGKey(0)
    want = {"bfloat16": ([16166, 16146, 15904, 15952, 16182, 16004],
                         [16070, 15931, 49024, 48979, 16144, 48933]),
            "float8_e4m3fn": ([50, 48, 32, 32, 50, 40], [44, 26, 183, 183, 44, 177])}
    for name, (u, n) in want.items():
        dt = L.dtype_of(name)
        assert L.bits(np.asarray(tracer.random.uniform(key, (6,), dt))).tolist() == u
        assert L.bits(np.asarray(tracer.random.normal(key, (6,), dt))).tolist() == n


def test_arrays_of_ml_dtypes_values():
    x = np.array([1.5, -2.0], np.float32).astype(ml_dtypes.bfloat16)
    a = tnp.asarray(x)
    assert a.dtype == ml_dtypes.bfloat16 and "bfloat16" in repr(a)
    assert tnp.asarray(x, dtype=tnp.float8_e4m3fn).dtype == ml_dtypes.float8_e4m3fn
    assert tnp.array([1, 2], dtype=tnp.int4).dtype == ml_dtypes.int4
    np.testing.assert_array_equal(np.asarray(a.at[1].set(5.0)).astype(np.float32), [1.5, 5.0])
    np.testing.assert_array_equal(np.asarray(a + a).astype(np.float32), [3.0, -4.0])


def test_bitcast_convert_type_at_sub_byte_widths():
    # as JAX 0.10.2: equal widths reinterpret; 4-bit pieces split/join low-order first
    x = np.array([-1, -8, 7], ml_dtypes.int4)
    np.testing.assert_array_equal(np.asarray(lax.bitcast_convert_type(x, tnp.uint4)).astype(int),
                                  [15, 8, 7])
    np.testing.assert_array_equal(
        np.asarray(lax.bitcast_convert_type(x, tnp.float4_e2m1fn)).astype(np.float32),
        [-6.0, -0.0, 6.0])
    np.testing.assert_array_equal(np.asarray(lax.bitcast_convert_type(
        np.array([[1, 0], [-1, -1]], ml_dtypes.int4), np.int8)), [1, -1])
    np.testing.assert_array_equal(np.asarray(lax.bitcast_convert_type(
        np.array([0x1234], np.uint16), tnp.uint4)).astype(int), [[4, 3, 2, 1]])
    assert np.asarray(lax.bitcast_convert_type(np.int8([1, 2]), tnp.int4)).shape == (2, 2)
    with pytest.raises(TypeError, match=r"int4\[3\] to the wider int8 needs a last dimension "
                                        r"of size 2"):
        lax.bitcast_convert_type(x, np.int8)
    b = _bf16([1.0, -2.0])
    assert L.bits(np.asarray(lax.bitcast_convert_type(b, np.uint16))).tolist() == [0x3f80, 0xc000]


def test_numpy_functions_keep_the_low_precision_dtype():
    b = _bf16([0.5, 1.0])
    # jnp.spacing(bf16 [0.5, 1.0]) and jnp.float_power's dtype, JAX 0.10.2
    np.testing.assert_array_equal(np.asarray(tnp.spacing(b)).astype(np.float32),
                                  [0.00390625, 0.0078125])
    assert tnp.float_power(b, b).dtype == ml_dtypes.bfloat16
    f8 = np.array([0.5, 1.0, -1.0], ml_dtypes.float8_e4m3fn)
    assert tnp.float_power(f8, f8).dtype == ml_dtypes.float8_e4m3fn
    # float8_e4m3fn has no inf: spacing steps towards its max (JAX refuses 8-bit spacing)
    np.testing.assert_array_equal(np.asarray(tnp.spacing(f8)).astype(np.float32),
                                  [0.0625, 0.125, -0.125])
    # narrow integers sum in the default int, as int8 does (JAX 0.10.2 raises in np.iinfo)
    assert tnp.sum(np.array([7, 7], ml_dtypes.int4)).dtype == np.int32


def test_cumlogsumexp_takes_bfloat16():
    x = _bf16([0.0, 0.0, 0.0, 0.0])
    got = np.asarray(lax.cumlogsumexp(x, 0))
    assert got.dtype == ml_dtypes.bfloat16
    want = np.log(np.arange(1, 5, dtype=np.float32)).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_mulhi_at_the_narrow_width_and_weak_float_refusal():
    x = np.array([7, -8, -3, 5], ml_dtypes.int4)
    y = np.array([7, -8, 4, -2], ml_dtypes.int4)
    np.testing.assert_array_equal(np.asarray(lax.mulhi(x, y)).astype(int),
                                  [(int(a) * int(b)) >> 4 for a, b in zip(x, y)])
    u = np.array([15, 9], ml_dtypes.uint4)
    np.testing.assert_array_equal(np.asarray(lax.mulhi(u, u)).astype(int), [14, 5])
    with pytest.raises(TypeError, match=r"add: cannot combine the float scalar 1.5 with an "
                                        r"integer array of dtype int4"):
        lax.add(x, 1.5)


def test_debug_nans_sees_bfloat16_nans():
    tracer.config.update("debug_nans", True)
    try:
        with pytest.raises(FloatingPointError, match=r"nan.*log.*bfloat16"):
            tracer.jit(lambda v: tnp.log(v))(_bf16([-1.0]))
    finally:
        tracer.config.update("debug_nans", False)
