"""Helpers shared by the tracer.numpy tests: NumPy as the oracle for values and dtypes,
random inputs per dtype and domain, and the special float values every element-wise
function is checked on."""
from __future__ import annotations

import numpy as np

import tracer.numpy as tnp
from tracer import dtypes

F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
C64, C128 = np.dtype(np.complex64), np.dtype(np.complex128)
I8, I16, I32, I64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
U8, U32 = np.dtype(np.uint8), np.dtype(np.uint32)
BOOL = np.dtype(np.bool_)

FLOATS = (F32, F64)
INTS = (I8, I32, I64, U8, U32)
COMPLEX = (C64, C128)

SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, np.inf, -np.inf, np.nan, 1e-300,
                    -1e-30, 1e30, 700.0, -700.0])

TOL = {F16: 2e-3, F32: 2e-5, F64: 1e-12, C64: 2e-5, C128: 1e-12}


def tol_for(dt, scale=1.0):
    return TOL.get(np.dtype(dt), 0) * scale


def rand(rng, shape, dtype, domain=None):
    """Random values of ``dtype``; ``domain`` (lo, hi) for the real parts of floats."""
    dt = np.dtype(dtype)
    if dt == BOOL:
        return rng.random(shape) < 0.5
    if dtypes.is_integer(dt):
        lo, hi = domain if domain is not None else (-5, 6)
        if dtypes.is_unsigned_integer(dt):
            lo = max(lo, 0)
        return rng.integers(lo, hi, size=shape).astype(dt)
    lo, hi = domain if domain is not None else (-3.0, 3.0)
    v = rng.uniform(lo, hi, size=shape)
    if dtypes.is_complex(dt):
        v = v + 1j * rng.uniform(lo, hi, size=shape)
    return np.asarray(v).astype(dt)


def assert_matches(got, want, rtol=None, atol=None, check_dtype=True, err=""):
    """``got`` (tracer) against ``want`` (NumPy): shape, dtype (optionally) and values
    (NaN equal; -0.0 and 0.0 equal)."""
    g = np.asarray(got)
    w = np.asarray(want)
    assert g.shape == w.shape, f"shape {g.shape} != NumPy's {w.shape} {err}"
    if check_dtype:
        assert g.dtype == w.dtype, f"dtype {g.dtype} != NumPy's {w.dtype} {err}"
    if w.dtype == BOOL or g.dtype == BOOL or (dtypes.is_integer(w.dtype) and
                                                 dtypes.is_integer(g.dtype)):
        np.testing.assert_array_equal(g, w, err_msg=err)
        return
    dt = np.result_type(g.dtype, w.dtype)
    r = tol_for(g.dtype) if rtol is None else rtol
    a = r if atol is None else atol
    cdt = np.complex128 if dtypes.is_complex(dt) else np.float64
    np.testing.assert_allclose(g.astype(cdt), w.astype(cdt), rtol=r, atol=a, equal_nan=True,
                               err_msg=err)


def jax_result_dtype(*dts, inexact=False):
    """The dtype tracer (JAX's lattice, 64-bit mode) gives an operation on ``dts``."""
    dt = tnp.result_type(*dts)
    if inexact and not dtypes.is_inexact(dt):
        dt = dtypes.default_float_dtype()
    return np.dtype(dt)
