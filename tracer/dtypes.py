"""dtypes and JAX's type-promotion lattice, with weak types for Python scalars.

The lattice (JAX's, see "Type promotion semantics" in JAX's docs)::

    b1 -> i* -> u8 -> u16 -> u32 -> u64 -> f*
          i* -> i8 -> i16 -> i32 -> i64 -> f*
          u8 -> i16,  u16 -> i32,  u32 -> i64
    f* -> f16 -> f32 -> f64 -> c128,  f* -> c* -> c64 -> c128,  f32 -> c64
    f* -> bf16 -> f32
    i* -> i4, i2, u4, u2 (leaves);  f* -> each float8 and float4 type (leaves)

and without enable_x64, u32 -> i32 replaces u32 -> i64 (no promotion creates a 64-bit type).

``i*``, ``f*`` and ``c*`` are the weak kinds of Python int, float and complex scalars: they
take the width of whatever they meet (``float32_array * 2.0`` stays float32). A result that
lands on a weak kind is weakly typed and materialises as the default dtype of that kind
(int64/float64/complex128 with ``enable_x64``, else the 32-bit ones).

The low-precision types come from ml_dtypes, as in JAX. The float8/float4 types and the
2- and 4-bit integers are leaves: only weak scalars (and bool, for the integers) promote
to them, and mixing one with another concrete dtype raises ``TypePromotionError``, as
JAX's 'standard' mode does -- an implicit float8 -> float32 widening would hide the
precision a model chose.
"""
from __future__ import annotations

import functools
import sys

import numpy as np

from tracer.config import config

bool_ = np.dtype(np.bool_)
int8, int16, int32, int64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
uint8, uint16, uint32, uint64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
float16, float32, float64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64))
complex64, complex128 = np.dtype(np.complex64), np.dtype(np.complex128)

# JAX's tangent dtype for integer and boolean primals.
float0 = np.dtype([("float0", np.void, 0)])

BASE_DTYPES = (bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
               float16, float32, float64, complex64, complex128)

# ------------------------------- the ml_dtypes types ---------------------------------------
# Importing ml_dtypes costs about 0.7 s (NumPy registers its ufunc loops one by one), more
# than the rest of ``import tracer``. No array can have one of its dtypes before ml_dtypes
# is imported, so tracer imports it on first need: a name below read from this module
# (``dtypes.bfloat16``, ``tracer.numpy.bfloat16``), or a dtype check made after the user
# (or another library) imported ml_dtypes. Until then the sets below are empty.

FLOAT8_NAMES = ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
                "float8_e4m3b11fnuz", "float8_e3m4", "float8_e4m3", "float8_e8m0fnu")
LOWP_FLOAT_NAMES = ("bfloat16",) + FLOAT8_NAMES + ("float4_e2m1fn",)
LOWP_INT_NAMES = ("int4", "int2", "uint4", "uint2")
LOWP_NAMES = LOWP_FLOAT_NAMES + LOWP_INT_NAMES
_LAZY_NAMES = frozenset(LOWP_NAMES + (
    "FLOAT8_DTYPES", "LOWP_FLOAT_DTYPES", "LOWP_SINT_DTYPES", "LOWP_UINT_DTYPES",
    "LOWP_INT_DTYPES", "LOWP_DTYPES"))

_lowp_loaded = False
_LOWP = _LOWP_FLOAT = _LOWP_SINT = _LOWP_UINT = _F16_COMPUTED = frozenset()
_SUPPORTED = frozenset(BASE_DTYPES)
SUPPORTED_NAMES = tuple(d.name for d in BASE_DTYPES) + LOWP_NAMES


def load_lowp() -> None:
    """Import ml_dtypes and add its types to every dtype set and to the lattice. Idempotent;
    called on first need (see above)."""
    global _lowp_loaded, _LOWP, _LOWP_FLOAT, _LOWP_SINT, _LOWP_UINT, _F16_COMPUTED, \
        _SUPPORTED, _UB
    if _lowp_loaded:
        return
    import ml_dtypes
    g = globals()
    for n in LOWP_NAMES:
        g[n] = np.dtype(getattr(ml_dtypes, n))
    g["FLOAT8_DTYPES"] = tuple(g[n] for n in FLOAT8_NAMES)
    g["LOWP_FLOAT_DTYPES"] = tuple(g[n] for n in LOWP_FLOAT_NAMES)
    g["LOWP_SINT_DTYPES"] = (g["int4"], g["int2"])
    g["LOWP_UINT_DTYPES"] = (g["uint4"], g["uint2"])
    g["LOWP_INT_DTYPES"] = g["LOWP_SINT_DTYPES"] + g["LOWP_UINT_DTYPES"]
    g["LOWP_DTYPES"] = g["LOWP_FLOAT_DTYPES"] + g["LOWP_INT_DTYPES"]
    # The ml_dtypes floats: NumPy knows none of them as np.floating (their kind is mostly
    # "V"), so every classification below goes through these sets.
    _LOWP_FLOAT = frozenset(g["LOWP_FLOAT_DTYPES"])
    _LOWP_SINT = frozenset(g["LOWP_SINT_DTYPES"])
    _LOWP_UINT = frozenset(g["LOWP_UINT_DTYPES"])
    _F16_COMPUTED = frozenset(g["FLOAT8_DTYPES"] + (g["float4_e2m1fn"],)) - {g["float8_e8m0fnu"]}
    _UB = {x64: _upper_bounds(_lattice(x64, True)) for x64 in (True, False)}
    _lub.cache_clear()
    _SUPPORTED = frozenset(BASE_DTYPES + g["LOWP_DTYPES"])
    _LOWP = frozenset(g["LOWP_DTYPES"])
    _lowp_loaded = True     # (last: a concurrent reader sees complete sets or none)


def __getattr__(name):
    if name in _LAZY_NAMES:
        load_lowp()
        return globals()[name]
    if name == "SUPPORTED_DTYPES":
        return supported_dtypes()
    raise AttributeError(f"module 'tracer.dtypes' has no attribute {name!r}")


def _sync() -> bool:
    """Load the ml_dtypes types if ml_dtypes has been imported (only then can a dtype of
    theirs exist). True when they are loaded."""
    if not _lowp_loaded and "ml_dtypes" in sys.modules:
        load_lowp()
    return _lowp_loaded


_LOWP_NAME_SET = frozenset(LOWP_NAMES)


def as_np_dtype(x) -> np.dtype:
    """``np.dtype(x)``, loading the ml_dtypes types first when ``x`` names one of them
    (NumPy knows the name ``'bfloat16'`` only once ml_dtypes is imported)."""
    if type(x) is str and not _lowp_loaded and x in _LOWP_NAME_SET:
        load_lowp()
    return np.dtype(x)


def supported_dtypes() -> tuple:
    """Every dtype tracer supports, the ml_dtypes types included (this imports ml_dtypes)."""
    load_lowp()
    return BASE_DTYPES + globals()["LOWP_DTYPES"]


_64_TO_32 = {int64: int32, uint64: uint32, float64: float32, complex128: complex64}


def default_int_dtype() -> np.dtype:
    return int64 if config.enable_x64 else int32


def default_uint_dtype() -> np.dtype:
    return uint64 if config.enable_x64 else uint32


def default_float_dtype() -> np.dtype:
    return float64 if config.enable_x64 else float32


def default_complex_dtype() -> np.dtype:
    return complex128 if config.enable_x64 else complex64


def is_supported(dtype) -> bool:
    """Whether arrays of ``dtype`` (a NumPy dtype) are tracer values."""
    return dtype in _SUPPORTED or dtype == float0 or (_sync() and dtype in _SUPPORTED)


def unsupported_array(fname: str, where: str, x) -> TypeError:
    """The error for a NumPy array (or scalar) ``x`` of a dtype outside tracer's set,
    passed to ``fname`` as ``where``."""
    return TypeError(f"{fname}: {where} is an array of shape {tuple(np.shape(x))} and dtype "
                     f"{np.asarray(x).dtype}, which tracer does not support (arrays hold one "
                     f"of {', '.join(SUPPORTED_NAMES)}): convert it first, e.g. with "
                     "x.astype(numpy.float32)")


def canonicalize_dtype(dtype) -> np.dtype:
    """The dtype arrays of ``dtype`` get: 64-bit types become 32-bit without enable_x64.

    Raises TypeError for dtypes outside the supported set (strings, objects, float128...).
    """
    x64 = config.enable_x64
    hit = _canonical.get((dtype, x64)) if isinstance(dtype, np.dtype) else None
    if hit is not None:
        return hit
    dt = as_np_dtype(dtype)
    if dt == float0:
        return dt
    if dt not in _SUPPORTED and not (_sync() and dt in _SUPPORTED):
        raise TypeError(f"dtype {dt} is not supported by tracer; supported dtypes are "
                        f"{', '.join(SUPPORTED_NAMES)}: convert the array first, e.g. "
                        "with x.astype(numpy.float32)")
    res = dt if x64 else _64_TO_32.get(dt, dt)
    if isinstance(dtype, np.dtype):
        _canonical[(dtype, x64)] = res
    return res


# (np.dtype, enable_x64) -> canonicalize_dtype's answer, for the supported dtypes (on every
# jitted call's path)
_canonical: dict = {}


def _as_dtype(dtype):
    if not _lowp_loaded:
        _sync()
    try:
        return as_np_dtype(dtype)
    except TypeError:
        return None


def is_lowp(dtype) -> bool:
    """One of the ml_dtypes types (bfloat16, float8/float4, 2- and 4-bit integers)."""
    return _as_dtype(dtype) in _LOWP


def is_lowp_float(dtype) -> bool:
    return _as_dtype(dtype) in _LOWP_FLOAT


def is_lowp_int(dtype) -> bool:
    dt = _as_dtype(dtype)
    return dt in _LOWP_SINT or dt in _LOWP_UINT


def _memoised(pred):
    """``pred`` (a test on a dtype) answered once per argument: the tests run on every
    eager operation, and NumPy's ``issubdtype`` costs more than a small ufunc call. The
    answers never change (an ml_dtypes dtype exists only once ml_dtypes is loaded, and
    ``_as_dtype`` loads our view of it first)."""
    memo: dict = {}

    def f(dtype) -> bool:
        try:
            return memo[dtype]
        except KeyError:
            out = memo[dtype] = pred(dtype)
            if len(memo) > 512:
                memo.clear()
            return out
        except TypeError:    # (unhashable: the test's own answer or error)
            return pred(dtype)
    f.__name__, f.__doc__, f.__wrapped__ = pred.__name__, pred.__doc__, pred
    return f


@_memoised
def is_integer(dtype) -> bool:
    dt = _as_dtype(dtype)
    if dt is not None and (dt in _LOWP_SINT or dt in _LOWP_UINT):
        return True
    return dt not in _LOWP and np.issubdtype(dtype, np.integer)


@_memoised
def is_signed_integer(dtype) -> bool:
    dt = _as_dtype(dtype)
    return dt in _LOWP_SINT or (dt not in _LOWP and np.issubdtype(dtype, np.signedinteger))


@_memoised
def is_unsigned_integer(dtype) -> bool:
    dt = _as_dtype(dtype)
    return dt in _LOWP_UINT or (dt not in _LOWP and
                                np.issubdtype(dtype, np.unsignedinteger))


@_memoised
def is_floating(dtype) -> bool:
    dt = _as_dtype(dtype)
    # (float8_e5m2's kind is "f", but NumPy's issubdtype still says no)
    return dt in _LOWP_FLOAT or (dt not in _LOWP and np.issubdtype(dtype, np.floating))


@_memoised
def is_complex(dtype) -> bool:
    return _as_dtype(dtype) not in _LOWP and np.issubdtype(dtype, np.complexfloating)


def is_inexact(dtype) -> bool:
    return is_floating(dtype) or is_complex(dtype)


def is_bool(dtype) -> bool:
    return as_np_dtype(dtype) == bool_


_ABSTRACT_OF_LOWP = (np.floating, np.inexact, np.number, np.generic, np.integer,
                     np.signedinteger, np.unsignedinteger)


def issubdtype(a, b) -> bool:
    """``numpy.issubdtype`` that knows the ml_dtypes types as JAX does
    (``issubdtype(bfloat16, floating)`` and ``issubdtype(int4, signedinteger)`` hold)."""
    da = _as_dtype(a) if not (isinstance(a, type) and a in _ABSTRACT_OF_LOWP) else None
    if da is not None and da in _LOWP:
        if isinstance(b, type) and b in _ABSTRACT_OF_LOWP:
            if b in (np.generic, np.number):
                return True
            if b in (np.floating, np.inexact):
                return da in _LOWP_FLOAT
            if b is np.integer:
                return da in _LOWP_SINT or da in _LOWP_UINT
            return da in (_LOWP_SINT if b is np.signedinteger else _LOWP_UINT)
        return da == _as_dtype(b)
    db = _as_dtype(b) if not (isinstance(b, type) and b in _ABSTRACT_OF_LOWP) else None
    if db is not None and db in _LOWP:
        return False
    return np.issubdtype(a, b)


def finfo(dtype):
    """Machine limits of a floating dtype; ml_dtypes' for its types (as jax.numpy.finfo)."""
    if is_lowp(dtype):
        import ml_dtypes
        return ml_dtypes.finfo(as_np_dtype(dtype))
    return np.finfo(dtype)


def iinfo(dtype):
    if is_lowp(dtype):
        import ml_dtypes
        return ml_dtypes.iinfo(as_np_dtype(dtype))
    return np.iinfo(dtype)


def dtype_key(dtype) -> str:
    """A string that tells ``dtype`` from every other: ``dtype.str``, except for the
    ml_dtypes types, most of which share theirs ('<V1'): their names."""
    dt = as_np_dtype(dtype)
    return dt.name if dt in _LOWP else dt.str


def compute_dtype(dtype) -> np.dtype:
    """The dtype the eager impls compute a low-precision type in, as XLA's CPU backend
    widens them (and rounds each result once): float32 for bfloat16 and float8_e8m0fnu
    (whose range float16 lacks), float16 for the other float8 and float4 formats (a
    float32 widening would round differently, e.g. float8_e3m4 sqrt), int8/uint8 for the
    2- and 4-bit integers; other dtypes are their own."""
    dt = as_np_dtype(dtype)
    if dt in _F16_COMPUTED:
        return float16
    if dt in _LOWP_FLOAT:
        return float32
    if dt in _LOWP_SINT:
        return int8
    if dt in _LOWP_UINT:
        return uint8
    return dt


def real_dtype(dtype) -> np.dtype:
    """complex64 -> float32, complex128 -> float64, others unchanged."""
    dt = as_np_dtype(dtype)
    if dt == complex64:
        return float32
    if dt == complex128:
        return float64
    return dt


def complex_dtype_for(dtype) -> np.dtype:
    """float32/float16/bfloat16... -> complex64, float64 -> complex128, complex unchanged."""
    dt = as_np_dtype(dtype)
    if is_complex(dt):
        return dt
    return complex128 if dt == float64 else complex64


# --------------------------------- the lattice ---------------------------------------

# Lattice nodes: concrete dtypes plus the three weak kinds.
_I, _F, _C = "i*", "f*", "c*"
_WEAK_KINDS = (_I, _F, _C)

def _lattice(x64: bool, with_lowp: bool) -> dict:
    lowp = globals() if with_lowp else None
    f8 = tuple(lowp[n] for n in FLOAT8_NAMES + ("float4_e2m1fn",)) if lowp else ()
    ints = tuple(lowp[n] for n in LOWP_INT_NAMES) if lowp else ()
    bf16 = (lowp["bfloat16"],) if lowp else ()
    lattice = {
        bool_: [_I],
        _I: [uint8, int8, *ints],
        uint8: [int16, uint16], uint16: [int32, uint32], uint32: [int64, uint64],
        uint64: [_F],
        int8: [int16], int16: [int32], int32: [int64], int64: [_F],
        _F: [*f8, *bf16, float16, _C],
        **{t: [] for t in f8 + ints},
        **{t: [float32] for t in bf16},
        float16: [float32], float32: [float64, complex64], float64: [complex128],
        _C: [complex64], complex64: [complex128], complex128: [],
    }
    if not x64:
        # Without enable_x64 no promotion forms a 64-bit type from narrower inputs: JAX
        # replaces the one edge that would (uint32 x int32 -> int64) by uint32 -> int32.
        lattice[uint32] = [int32, uint64]
    return lattice


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


_UB = {x64: _upper_bounds(_lattice(x64, False)) for x64 in (True, False)}


@functools.lru_cache(maxsize=None)
def _lub(nodes: frozenset, x64: bool = True):
    ub = _UB[x64]
    common = frozenset.intersection(*(ub[n] for n in nodes))
    # The least upper bound is the common bound that every other common bound lies above.
    for c in common:
        if all(o in ub[c] for o in common):
            return c
    raise _promotion_error(nodes)


class TypePromotionError(TypeError, ValueError):
    """No implicit promotion between two dtypes (JAX raises a ValueError of this name;
    it is a TypeError too, as tracer's other dtype errors)."""


def _promotion_error(nodes):
    names = sorted(_node_name(n) for n in nodes)
    leaves = [n for n in nodes if n in _LOWP and n.name != "bfloat16"]
    if any(n in _LOWP_SINT or n in _LOWP_UINT for n in leaves):
        what, to = "2-bit and 4-bit integers", "int32"
    elif any(n.name == "float4_e2m1fn" for n in leaves):
        what, to = "4-bit floats", "float32"
    else:
        what, to = "8-bit floats", "float32"
    return TypePromotionError(
        f"promote_types: dtypes {', '.join(names)} have no implicit promotion path: {what} "
        f"do not promote implicitly, to keep a low-precision choice from widening "
        f"unnoticed; convert explicitly, e.g. x.astype('{to}')")


def _node_name(n):
    return {_I: "int (Python scalar)", _F: "float (Python scalar)",
            _C: "complex (Python scalar)"}.get(n) or np.dtype(n).name


def _node_of(dtype, weak: bool):
    dt = as_np_dtype(dtype)
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
    if dt not in _SUPPORTED and not (_sync() and dt in _SUPPORTED):
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
    dt = as_np_dtype(dtype)
    if type(x) is not int or not is_integer(dt):
        return
    info = iinfo(dt)
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
    dt = as_np_dtype(dtype)
    if type(x) is int and not -2**63 <= x < 2**64 and not is_inexact(dt):
        raise OverflowError(f"Python int {x} is too large to combine with an array of dtype "
                            f"{dt.name}: Python ints in array operations must fit in 64 bits "
                            "(int64 or uint64); use a float, or an array of the values")
    if type(x) is int and is_integer(dt):
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
        return as_np_dtype(x), False
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
    if dt in _LOWP:     # JAX prints these by their full names (bfloat16[3])
        return dt.name
    if dt == bool_:
        return "bool"
    kind = {"f": "f", "i": "i", "u": "u", "c": "c"}[dt.kind]
    return f"{kind}{dt.itemsize * 8}"
