"""dtypes and JAX's type-promotion lattice, with weak types for Python scalars.

The lattice (JAX's, see "Type promotion semantics" in JAX's docs)::

    b1 -> i* -> u8 -> u16 -> u32 -> u64 -> f*
          i* -> i8 -> i16 -> i32 -> i64 -> f*
          u8 -> i16,  u16 -> i32,  u32 -> i64
    f* -> f16 -> f32 -> f64 -> c128,  f* -> c* -> c64 -> c128,  f32 -> c64

and without enable_x64, u32 -> i32 replaces u32 -> i64 (no promotion creates a 64-bit type).

``i*``, ``f*`` and ``c*`` are the weak kinds of Python int, float and complex scalars: they
take the width of whatever they meet (``float32_array * 2.0`` stays float32). A result that
lands on a weak kind is weakly typed and materialises as the default dtype of that kind
(int64/float64/complex128 with ``enable_x64``, else the 32-bit ones).
"""
from __future__ import annotations

import functools

import numpy as np

from tracer.config import config

bool_ = np.dtype(np.bool_)
int8, int16, int32, int64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
uint8, uint16, uint32, uint64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
float16, float32, float64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64))
complex64, complex128 = np.dtype(np.complex64), np.dtype(np.complex128)

# JAX's tangent dtype for integer and boolean primals.
float0 = np.dtype([("float0", np.void, 0)])

SUPPORTED_DTYPES = (bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
                    float16, float32, float64, complex64, complex128)
_SUPPORTED = frozenset(SUPPORTED_DTYPES)

_64_TO_32 = {int64: int32, uint64: uint32, float64: float32, complex128: complex64}


def default_int_dtype() -> np.dtype:
    return int64 if config.enable_x64 else int32


def default_uint_dtype() -> np.dtype:
    return uint64 if config.enable_x64 else uint32


def default_float_dtype() -> np.dtype:
    return float64 if config.enable_x64 else float32


def default_complex_dtype() -> np.dtype:
    return complex128 if config.enable_x64 else complex64


def canonicalize_dtype(dtype) -> np.dtype:
    """The dtype arrays of ``dtype`` get: 64-bit types become 32-bit without enable_x64.

    Raises TypeError for dtypes outside the supported set (strings, objects, float128...).
    """
    dt = np.dtype(dtype)
    if dt == float0:
        return dt
    if dt not in _SUPPORTED:
        raise TypeError(f"dtype {dt} is not supported by tracer; supported dtypes are "
                        f"{', '.join(d.name for d in SUPPORTED_DTYPES)}")
    if not config.enable_x64:
        return _64_TO_32.get(dt, dt)
    return dt


def is_integer(dtype) -> bool:
    return np.issubdtype(dtype, np.integer)


def is_signed_integer(dtype) -> bool:
    return np.issubdtype(dtype, np.signedinteger)


def is_unsigned_integer(dtype) -> bool:
    return np.issubdtype(dtype, np.unsignedinteger)


def is_floating(dtype) -> bool:
    return np.issubdtype(dtype, np.floating)


def is_complex(dtype) -> bool:
    return np.issubdtype(dtype, np.complexfloating)


def is_inexact(dtype) -> bool:
    return np.issubdtype(dtype, np.inexact)


def is_bool(dtype) -> bool:
    return np.dtype(dtype) == bool_


def issubdtype(a, b) -> bool:
    return np.issubdtype(a, b)


def finfo(dtype):
    return np.finfo(dtype)


def iinfo(dtype):
    return np.iinfo(dtype)


def real_dtype(dtype) -> np.dtype:
    """complex64 -> float32, complex128 -> float64, others unchanged."""
    dt = np.dtype(dtype)
    if dt == complex64:
        return float32
    if dt == complex128:
        return float64
    return dt


def complex_dtype_for(dtype) -> np.dtype:
    """float32/float16 -> complex64, float64 -> complex128, complex unchanged."""
    dt = np.dtype(dtype)
    if is_complex(dt):
        return dt
    return complex128 if dt == float64 else complex64


# --------------------------------- the lattice ---------------------------------------

# Lattice nodes: concrete dtypes plus the three weak kinds.
_I, _F, _C = "i*", "f*", "c*"
_WEAK_KINDS = (_I, _F, _C)

_LATTICE = {
    bool_: [_I],
    _I: [uint8, int8],
    uint8: [int16, uint16], uint16: [int32, uint32], uint32: [int64, uint64], uint64: [_F],
    int8: [int16], int16: [int32], int32: [int64], int64: [_F],
    _F: [float16, _C],
    float16: [float32], float32: [float64, complex64], float64: [complex128],
    _C: [complex64], complex64: [complex128], complex128: [],
}


# Without enable_x64 no promotion forms a 64-bit type from narrower inputs: JAX replaces
# the one edge that would (uint32 x int32 -> int64) by uint32 -> int32.
_LATTICE_X32 = {**_LATTICE, uint32: [int32, uint64]}


def _upper_bounds(lattice):
    ub = {}

    def visit(n):
        if n not in ub:
            s = {n}
            for m in lattice[n]:
                s |= visit(m)
            ub[n] = frozenset(s)
        return ub[n]

    for n in lattice:
        visit(n)
    return ub


_UB = {True: _upper_bounds(_LATTICE), False: _upper_bounds(_LATTICE_X32)}


@functools.lru_cache(maxsize=None)
def _lub(nodes: frozenset, x64: bool = True):
    ub = _UB[x64]
    common = frozenset.intersection(*(ub[n] for n in nodes))
    # The least upper bound is the common bound that every other common bound lies above.
    for c in common:
        if all(o in ub[c] for o in common):
            return c
    raise TypeError(f"no common type for {nodes}")  # unreachable for this lattice


def _node_of(dtype, weak: bool):
    dt = np.dtype(dtype)
    if weak:
        if dt == bool_:
            return bool_
        if is_integer(dt):
            return _I
        if is_floating(dt):
            return _F
        if is_complex(dt):
            return _C
    if dt == float0:
        raise TypeError("float0 arrays (tangents of integer values) do not take part in "
                        "type promotion")
    if dt not in _SUPPORTED:
        raise TypeError(f"dtype {dt} is not supported by tracer")
    return dt


def _materialize(node) -> np.dtype:
    if node == _I:
        return default_int_dtype()
    if node == _F:
        return default_float_dtype()
    if node == _C:
        return default_complex_dtype()
    return canonicalize_dtype(node)


def promote_types(a, b) -> np.dtype:
    """The dtype two (non-weak) dtypes promote to (``jax.numpy.promote_types``).

    Example: int8 with uint8 -> int16; int64 with uint64 -> float64; float16 with int64 ->
    float16 (JAX's lattice, not NumPy's value-preserving table). Like JAX's, the result is
    not canonicalized: int64 with int64 is int64 even with enable_x64 off (``result_type``
    gives the canonical dtype).
    """
    node = _lub(frozenset((_node_of(a, False), _node_of(b, False))), config.enable_x64)
    return {_I: int64, _F: float64, _C: complex128}.get(node, node)


def check_int_fits(x, dtype, fname: str) -> None:
    """OverflowError (as JAX raises) when the Python int ``x`` does not fit the integer
    ``dtype`` an array of it would get, naming the value, the dtype and a way out."""
    dt = np.dtype(dtype)
    if type(x) is not int or dt.kind not in "iu":
        return
    info = np.iinfo(dt)
    if info.min <= x <= info.max:
        return
    if not -2 ** 63 <= x < 2 ** 64:
        hint = ("integers wider than 64 bits are not supported; use a float (float(x)) or "
                "split the value into words")
    else:
        wide = "int64" if x < 2 ** 63 else "uint64"
        hint = f"pass dtype={wide}" + ("" if config.enable_x64 else
                                       " with 64-bit types enabled "
                                       "(tracer.config.update('enable_x64', True))")
    raise OverflowError(f"{fname}: Python int {x} is out of range for {dt.name} "
                        f"({info.min} to {info.max}); {hint}")


def scalar_to_dtype(x, dtype) -> np.ndarray:
    """Python scalar ``x`` as a 0-d NumPy array of ``dtype``, as JAX converts weak scalars:
    integers wrap modulo the width (``int8_array + 300`` adds 44) and floats round (to inf
    past the range); an int outside the int64/uint64 range is an OverflowError."""
    dt = np.dtype(dtype)
    if type(x) is int and not -2**63 <= x < 2**64 and dt.kind not in "fc":
        raise OverflowError(f"Python int {x} is too large to combine with an array of dtype "
                            f"{dt.name}: Python ints in array operations must fit in 64 bits "
                            "(int64 or uint64); use a float, or an array of the values")
    if type(x) is int and dt.kind in "iu":
        return np.asarray(x, np.uint64 if x >= 2**63 else np.int64).astype(dt)
    with np.errstate(over="ignore"):
        return np.asarray(x).astype(dt) if type(x) is not complex or dt.kind == "c" \
            else np.asarray(x, dt)


def dtype_and_weak_type(x):
    """(dtype, weak_type) of any value: Python scalar, NumPy array/scalar, dtype, or Array."""
    # Exact types: NumPy scalars (np.float64 subclasses float) are strongly typed.
    t = type(x)
    if t is bool:
        return bool_, False
    if t is int:
        return default_int_dtype(), True
    if t is float:
        return default_float_dtype(), True
    if t is complex:
        return default_complex_dtype(), True
    aval = getattr(x, "aval", None)
    if aval is not None:
        return aval.dtype, aval.weak_type
    if hasattr(x, "dtype") and not isinstance(x, type):  # np.float32 (a type) has .dtype too
        return np.dtype(x.dtype), False
    try:
        return np.dtype(x), False
    except TypeError:
        raise TypeError(f"cannot determine the dtype of {type(x).__name__} {x!r}") from None


def result_type(*args, return_weak_type_flag: bool = False):
    """The dtype of a NumPy-style operation on ``args`` (``jax.numpy.result_type``).

    ``args`` may mix dtypes, arrays and Python scalars; Python scalars are weakly typed.
    Returns the canonical dtype (and the weak-type flag when asked).
    """
    if not args:
        raise ValueError("result_type: at least one argument is required")
    key = tuple(dtype_and_weak_type(a) for a in args)
    out, weak = _result_type_of(key, config.enable_x64)
    return (out, weak) if return_weak_type_flag else out


@functools.lru_cache(maxsize=4096)
def _result_type_of(key, x64):
    # Inputs are canonicalized first (uint64 is uint32 with enable_x64 off), as in JAX.
    node = _lub(frozenset(_node_of(dt if weak or dt == float0 else canonicalize_dtype(dt), weak)
                          for dt, weak in key), x64)
    return _materialize(node), node in _WEAK_KINDS


def dtype(x) -> np.dtype:
    """The canonical dtype of a value (``jax.numpy.dtype``)."""
    return canonicalize_dtype(dtype_and_weak_type(x)[0])


def short_name(dt) -> str:
    """JAX's short dtype names used in jaxprs: f32, i64, u8, bool, c64, float0."""
    dt = np.dtype(dt)
    if dt == float0:
        return "float0"
    if dt == bool_:
        return "bool"
    kind = {"f": "f", "i": "i", "u": "u", "c": "c"}[dt.kind]
    return f"{kind}{dt.itemsize * 8}"
