"""The ml_dtypes low-precision types in tracer's dtype layer: classification, finfo/iinfo,
and JAX's promotion lattice with them -- every pair of the 28 dtypes through
``promote_types``/``result_type``, each with Python scalars and weak arrays, with
enable_x64 on and off, against ``tests/data/promotion_lowp_jax.json`` (recorded from JAX
0.10.2 by ``tools/record_lowp_promotion_jax.py``; refusals recorded as
"TypePromotionError")."""
from __future__ import annotations

import json
import pathlib

import ml_dtypes
import numpy as np
import pytest

import tracer
import tracer.numpy as tnp
from tracer import dtypes

DATA = json.loads((pathlib.Path(__file__).parent.parent / "data" /
                   "promotion_lowp_jax.json").read_text())
SCALARS = {"bool": True, "int": 1, "float": 1.0, "complex": 1j}
LOWP = ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
        "float8_e4m3b11fnuz", "float8_e3m4", "float8_e4m3", "float8_e8m0fnu",
        "float4_e2m1fn", "int4", "uint4", "int2", "uint2"]
LOWP_FLOATS = LOWP[:10]
LOWP_INTS = LOWP[10:]


@pytest.fixture(params=["x64", "x32"])
def mode(request):
    tracer.config.update("enable_x64", request.param == "x64")
    try:
        yield DATA[request.param]
    finally:
        tracer.config.update("enable_x64", True)


def _mismatches(table, fn):
    bad = []
    for a, row in table.items():
        for b, want in row.items():
            try:
                got = fn(a, b)
            except dtypes.TypePromotionError:
                got = "TypePromotionError"
            except Exception as e:  # report, don't stop at the first
                got = f"{type(e).__name__}: {e}"
            if got != want:
                bad.append(f"{a} with {b}: got {got}, JAX {want}")
    return bad


def _info(x):
    return [str(x.dtype), bool(x.weak_type)]


def test_tables_cover_every_pair():
    assert len(DATA["x64"]["promote_types"]) == 28
    assert all(len(row) == 28 for row in DATA["x64"]["promote_types"].values())
    refused = sum(v == "TypePromotionError" for row in DATA["x64"]["promote_types"].values()
                  for v in row.values())
    assert refused > 300     # the leaves refuse most of the table


def test_promote_types_table(mode):
    bad = _mismatches(mode["promote_types"], lambda a, b: str(tnp.promote_types(a, b)))
    assert not bad, "\n".join(bad[:40])


def test_result_type_table(mode):
    bad = _mismatches(mode["result_type"], lambda a, b: str(tnp.result_type(a, b)))
    assert not bad, "\n".join(bad[:40])


def test_binary_op_dtypes(mode):
    bad = _mismatches(mode["binop_array_array"],
                      lambda a, b: _info(tnp.multiply(tnp.ones(2, a), tnp.ones(2, b))))
    bad += _mismatches(mode["binop_array_scalar"],
                       lambda a, k: _info(tnp.multiply(tnp.ones(2, a), SCALARS[k])))
    bad += _mismatches(mode["binop_array_scalar"],
                       lambda a, k: _info(tnp.ones(2, a) * SCALARS[k]))
    bad += _mismatches(mode["binop_weakarray_array"],
                       lambda k, a: _info(tnp.multiply(tnp.asarray(SCALARS[k]) * 1,
                                                       tnp.ones(2, a))))
    assert not bad, "\n".join(bad[:40])


def test_refusal_names_both_dtypes_and_the_fix():
    with pytest.raises(TypeError, match=r"bfloat16, float8_e4m3fn.*astype\('float32'\)"):
        tnp.promote_types(tnp.bfloat16, tnp.float8_e4m3fn)
    with pytest.raises(ValueError, match=r"int4, int8.*4-bit integers.*astype\('int32'\)"):
        tnp.ones(2, tnp.int4) + tnp.ones(2, tnp.int8)
    with pytest.raises(TypeError, match=r"float \(Python scalar\), uint2"):
        tnp.ones(2, tnp.uint2) * 1.5


def test_classification():
    for n in LOWP_FLOATS:
        dt = np.dtype(getattr(ml_dtypes, n))
        assert dtypes.is_floating(dt) and dtypes.is_inexact(dt), n
        assert not (dtypes.is_integer(dt) or dtypes.is_complex(dt)), n
        assert tnp.issubdtype(dt, tnp.floating) and tnp.issubdtype(getattr(tnp, n), tnp.inexact)
        assert not tnp.issubdtype(dt, tnp.integer)
    for n in LOWP_INTS:
        dt = np.dtype(getattr(ml_dtypes, n))
        signed = not n.startswith("u")
        assert dtypes.is_integer(dt) and not dtypes.is_floating(dt), n
        assert dtypes.is_signed_integer(dt) == signed and dtypes.is_unsigned_integer(dt) != signed
        assert tnp.issubdtype(dt, tnp.signedinteger) == signed
        assert tnp.issubdtype(dt, tnp.integer) and tnp.issubdtype(dt, tnp.number)
    assert not tnp.issubdtype(np.float32, tnp.bfloat16)
    assert tnp.issubdtype(tnp.bfloat16, tnp.bfloat16)
    assert tnp.issubdtype(np.float32, tnp.floating)       # NumPy's own types unchanged


def test_names_and_constructors():
    for n in LOWP:
        t = getattr(tnp, n)
        assert np.dtype(t) == np.dtype(getattr(ml_dtypes, n))
        assert t == getattr(ml_dtypes, n)
        x = t(1)
        assert x.dtype == np.dtype(t) and x.shape == ()
        assert np.asarray(tnp.zeros(3, t)).dtype == np.dtype(t)
        assert tracer.make_jaxpr(lambda v: v)(tnp.zeros(2, t)).jaxpr.invars[0].aval.str_short() \
            == f"{n}[2]"


def test_finfo_iinfo_as_jax():
    for n in LOWP_FLOATS:
        want, got = ml_dtypes.finfo(getattr(ml_dtypes, n)), tnp.finfo(getattr(tnp, n))
        for attr in ("eps", "max", "min", "tiny", "smallest_normal", "smallest_subnormal"):
            assert getattr(got, attr) == float(getattr(want, attr)), (n, attr)
        assert got.bits == want.bits and got.nmant == want.nmant and got.dtype == want.dtype
    assert tnp.finfo(tnp.bfloat16).max == float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)
    assert tnp.finfo(tnp.float8_e4m3fn).max == 448.0
    assert tnp.finfo(tnp.float8_e8m0fnu).min == 2.0 ** -127
    assert tnp.finfo(np.complex64).dtype == np.float32
    for n, lo, hi in (("int4", -8, 7), ("uint4", 0, 15), ("int2", -2, 1), ("uint2", 0, 3)):
        info = tnp.iinfo(getattr(tnp, n))
        assert (info.min, info.max, info.bits) == (lo, hi, int(n[-1]))
    assert tnp.iinfo(np.int8).max == 127


def test_weak_python_ints_wrap_into_the_narrow_integers():
    # JAX: int4 + 100 adds 100 mod 16, as int8 + 300 adds 44.
    np.testing.assert_array_equal(np.asarray(tnp.ones(2, tnp.int4) + 100).astype(int), [5, 5])
    np.testing.assert_array_equal(np.asarray(tnp.ones(2, tnp.uint2) + 3).astype(int), [0, 0])
