"""dtypes and JAX's type promotion: the full 14x14 ``promote_types`` / ``result_type``
tables, each dtype with Python bool/int/float/complex scalars (weak types), and the dtype
and weak_type of real binary operations, with enable_x64 on and off, against values
recorded from JAX 0.10.2 (``tests/data/promotion_jax.json``; recorded once with
``jax.numpy.promote_types``, ``jax.numpy.result_type`` and ``jax.numpy.multiply``)."""
from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import tracer
import lax
import tracer.numpy as tnp
from tracer import dtypes
from tracer.core import Array

DATA = json.loads((pathlib.Path(__file__).parent.parent / "data" /
                   "promotion_jax.json").read_text())
DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128"]
SCALARS = {"bool": True, "int": 1, "float": 1.0, "complex": 1j}
MODES = ["x64", "x32"]


@pytest.fixture(params=MODES)
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
            except Exception as e:  # report, don't stop at the first
                got = f"{type(e).__name__}: {e}"
            if got != want:
                bad.append(f"{a} with {b}: got {got}, JAX {want}")
    return bad


def test_promote_types_table(mode):
    # jnp.promote_types does not canonicalize (int64 stays int64 with x64 off).
    bad = _mismatches(mode["promote_types"], lambda a, b: str(tnp.promote_types(a, b)))
    assert not bad, "\n".join(bad)


def test_result_type_table(mode):
    bad = _mismatches(mode["result_type"], lambda a, b: str(tnp.result_type(a, b)))
    assert not bad, "\n".join(bad)


def test_result_type_with_python_scalars(mode):
    bad = _mismatches(mode["result_type_scalar"],
                      lambda a, k: str(tnp.result_type(tnp.zeros(2, a), SCALARS[k])))
    assert not bad, "\n".join(bad)


def _info(x):
    return [str(x.dtype), bool(x.weak_type)]


def test_binary_op_dtypes_array_array(mode):
    bad = _mismatches(mode["binop_array_array"],
                      lambda a, b: _info(tnp.multiply(tnp.ones(2, a), tnp.ones(2, b))))
    assert not bad, "\n".join(bad)


def test_binary_op_dtypes_with_python_scalars(mode):
    bad = _mismatches(mode["binop_array_scalar"],
                      lambda a, k: _info(tnp.multiply(tnp.ones(2, a), SCALARS[k])))
    bad += _mismatches(mode["binop_scalar_array"],
                       lambda a, k: _info(tnp.multiply(SCALARS[k], tnp.ones(2, a))))
    # and the operator forms, which go through the same promotion
    bad += _mismatches(mode["binop_array_scalar"],
                       lambda a, k: _info(tnp.ones(2, a) * SCALARS[k]))
    bad += _mismatches(mode["binop_scalar_array"],
                       lambda a, k: _info(SCALARS[k] * tnp.ones(2, a)))
    assert not bad, "\n".join(bad)


def test_weak_scalars_and_weak_arrays(mode):
    bad = _mismatches(mode["binop_scalar_scalar"],
                      lambda k, l: _info(tnp.multiply(tnp.asarray(SCALARS[k]), SCALARS[l])))
    bad += _mismatches({"asarray": mode["asarray_scalar"]},
                       lambda _, k: _info(tnp.asarray(SCALARS[k])))
    bad += _mismatches(mode["binop_weakarray_array"],
                       lambda k, a: _info(tnp.multiply(tnp.asarray(SCALARS[k]) * 1,
                                                       tnp.ones(2, a))))
    bad += _mismatches(mode["result_type_weak_pairs"],
                       lambda k, l: [str(tnp.result_type(SCALARS[k], SCALARS[l]))])
    assert not bad, "\n".join(bad)


def test_lattice_examples():
    # The cases that differ from NumPy's value-based table, spelled out.
    assert tnp.promote_types(np.int8, np.uint8) == np.int16
    assert tnp.promote_types(np.int64, np.uint64) == np.float64
    assert tnp.promote_types(np.float16, np.int64) == np.float16
    assert tnp.promote_types(np.uint64, np.float16) == np.float16
    x = tnp.ones(3, np.float32)
    assert (x * 2.0).dtype == np.float32 and (x * 2).dtype == np.float32
    i = tnp.ones(3, np.int8)
    assert (i * 2.5).dtype == np.float64       # the weak float materialises at the default


def test_python_ints_wrap_to_the_array_dtype():
    # As in JAX: a weak int takes the array's dtype modulo its width.
    np.testing.assert_array_equal(np.asarray(tnp.ones(2, np.int8) + 300), [45, 45])
    np.testing.assert_array_equal(np.asarray(tnp.ones(2, np.uint8) + (-1)), [0, 0])
    np.testing.assert_array_equal(np.asarray(lax.add(tnp.ones(2, np.int32), 2**40)), [1, 1])
    assert (tnp.ones(2, np.int8) + 300).dtype == np.int8
    with pytest.raises(OverflowError, match="too large"):
        tnp.ones(2, np.int32) + 2**70
    np.testing.assert_array_equal(np.asarray(tnp.ones(2, np.float16) * 1e6), [np.inf, np.inf])


def test_canonicalize_dtype(x32):
    assert dtypes.canonicalize_dtype(np.float64) == np.float32
    assert dtypes.canonicalize_dtype(np.uint64) == np.uint32
    assert dtypes.canonicalize_dtype(np.complex128) == np.complex64
    assert tnp.zeros(2, np.float64).dtype == np.float32
    assert tnp.asarray(np.arange(3)).dtype == np.int32


def test_unsupported_dtypes_are_rejected():
    for bad in ("U3", "O", np.longdouble if np.dtype(np.longdouble) != np.float64 else "S2"):
        with pytest.raises(TypeError, match="not supported"):
            dtypes.canonicalize_dtype(bad)
    with pytest.raises(TypeError, match="not a valid array value"):
        tracer.core.get_aval("ab")


def test_float0_does_not_promote():
    with pytest.raises(TypeError, match="float0"):
        tnp.promote_types(dtypes.float0, np.float32)


def test_short_names_used_in_jaxprs():
    names = {d: dtypes.short_name(np.dtype(d)) for d in DTYPES}
    assert names == {"bool": "bool", "int8": "i8", "int16": "i16", "int32": "i32",
                     "int64": "i64", "uint8": "u8", "uint16": "u16", "uint32": "u32",
                     "uint64": "u64", "float16": "f16", "float32": "f32", "float64": "f64",
                     "complex64": "c64", "complex128": "c128"}
    assert dtypes.short_name(dtypes.float0) == "float0"
