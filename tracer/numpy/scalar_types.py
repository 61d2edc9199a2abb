"""jax.numpy's scalar types: ``tnp.float32`` & co. are both dtypes and constructors.

Each is a class (of the metaclass ``_ScalarMeta``, as in JAX) with a ``dtype`` attribute,
so NumPy and tracer accept it wherever a dtype goes (``np.dtype(tnp.float32)``,
``dtype=``, ``astype``, ``x.dtype == tnp.float32``, ``tnp.issubdtype(t, tnp.floating)``),
and calling it converts: ``tnp.float32(x)`` is ``tnp.asarray(x, dtype=float32)`` -- a
0-d Array for a scalar, an array for array data, a ``convert_element_type`` under tracing.
Without x64 the 64-bit types give 32-bit arrays (``tnp.float64(1.0).dtype == float32``),
as in JAX. ``isinstance(v, tnp.float32)`` is ``isinstance(v, numpy.float32)``.
"""
from __future__ import annotations

import numpy as np

from tracer import dtypes as _dtypes


class _ScalarMeta(type):
    def __hash__(cls):
        return hash(cls.dtype.type)

    def __eq__(cls, other):
        return cls is other or cls.dtype.type == other

    def __ne__(cls, other):
        return not cls == other

    def __call__(cls, x):
        from tracer.numpy.creation import asarray
        return asarray(x, dtype=cls.dtype)

    def __instancecheck__(cls, instance):
        return isinstance(instance, cls.dtype.type)


def _make_scalar_type(np_type, name=None):
    name = name or np_type.__name__
    t = _ScalarMeta(name, (object,), {
        "dtype": np.dtype(np_type),
        "__doc__": f"The {np.dtype(np_type).name} scalar type: a dtype (``dtype=tnp.{name}``) "
                   f"and a converter (``tnp.{name}(x)`` is ``tnp.asarray(x, "
                   f"dtype=tnp.{name})``; jax.numpy.{name})."})
    t.__module__ = "tracer.numpy"
    return t


bool_ = _make_scalar_type(np.bool_, "bool_")
int8, int16, int32, int64 = (_make_scalar_type(t) for t in (np.int8, np.int16, np.int32,
                                                           np.int64))
uint8, uint16, uint32, uint64 = (_make_scalar_type(t) for t in (np.uint8, np.uint16,
                                                               np.uint32, np.uint64))
float16, float32, float64 = (_make_scalar_type(t) for t in (np.float16, np.float32,
                                                           np.float64))
complex64, complex128 = _make_scalar_type(np.complex64), _make_scalar_type(np.complex128)

# The ml_dtypes types, under jax.numpy's names: made on first use (importing ml_dtypes
# costs about 0.7 s; ``tracer.dtypes``).
LOWP_NAMES = _dtypes.LOWP_NAMES


def __getattr__(name):
    if name in LOWP_NAMES:
        t = globals()[name] = _make_scalar_type(getattr(_dtypes, name).type, name)
        return t
    raise AttributeError(f"module 'tracer.numpy.scalar_types' has no attribute {name!r}")


# jax.numpy's aliases (the 64-bit types: 32-bit arrays without x64).
bool = bool_
int_, uint, float_, complex_ = int64, uint64, float64, complex128
single, double, csingle, cdouble = float32, float64, complex64, complex128
