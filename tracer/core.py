"""The core: abstract values, primitives, the trace stack, tracers and eager Arrays.

A ``Primitive`` is bound to arguments with ``bind``; ``bind`` finds the innermost active
transformation (the trace of highest level among the arguments, or the dynamic trace of
``make_jaxpr``/``jit``) and hands the primitive to its ``process_primitive``. With no
transformation active, the ``EvalTrace`` runs the primitive's NumPy impl on concrete
values and wraps the result in an ``Array``.

This module imports nothing of ours except config, dtypes and errors; ``lax`` and the
interpreters register their rules with it. Methods of ``Array`` and ``Tracer`` that are
array operations (``+``, ``sum``, ``reshape``...) are attached once, for both classes, by
``tracer.numpy.array_methods``.
"""
from __future__ import annotations

import contextvars
import math
import operator
import sys
import threading
from contextlib import contextmanager
from typing import Callable

import numpy as np

from tracer import dtypes
from tracer.errors import (ConcretizationTypeError, TracerArrayConversionError,
                           TracerBoolConversionError, TracerIntegerConversionError,
                           UnexpectedTracerError)

map_, zip_ = map, zip


def safe_map(f, *args):
    args = list(map_(list, args))
    n = len(args[0])
    for a in args[1:]:
        assert len(a) == n, f"length mismatch: {list(map_(len, args))}"
    return list(map_(f, *args))


def safe_zip(*args):
    args = list(map_(list, args))
    n = len(args[0])
    for a in args[1:]:
        assert len(a) == n, f"length mismatch: {list(map_(len, args))}"
    return list(zip_(*args))


# ------------------------------------ avals ---------------------------------------------

class AbstractValue:
    __slots__ = ()


class ShapedArray(AbstractValue):
    """The abstract value of an array: a shape, a dtype and JAX's ``weak_type`` flag."""

    __slots__ = ("shape", "dtype", "weak_type", "_hash")
    array_abstraction_level = 1

    def __init__(self, shape, dtype, weak_type: bool = False):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.weak_type = bool(weak_type)
        self._hash = None

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(math.prod(self.shape)))

    def update(self, shape=None, dtype=None, weak_type=None) -> "ShapedArray":
        return ShapedArray(self.shape if shape is None else shape,
                           self.dtype if dtype is None else dtype,
                           self.weak_type if weak_type is None else weak_type)

    def strip_weak_type(self) -> "ShapedArray":
        return ShapedArray(self.shape, self.dtype, False) if self.weak_type else self

    def str_short(self) -> str:
        return f"{dtypes.short_name(self.dtype)}[{','.join(map_(str, self.shape))}]"

    def __eq__(self, other):
        return (type(other) is ShapedArray and self.shape == other.shape
                and self.dtype == other.dtype and self.weak_type == other.weak_type)

    def __hash__(self):
        h = self._hash
        if h is None:
            h = self._hash = hash((self.shape, self.dtype, self.weak_type))
        return h

    def __repr__(self):
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapedArray({self.dtype.name}[{','.join(map_(str, self.shape))}]{weak})"

    def at_least_vspace(self) -> "ShapedArray":
        """The aval of this value's tangents: float0 for integer and bool values."""
        if dtypes.is_inexact(self.dtype):
            return self
        return ShapedArray(self.shape, dtypes.float0, False)


class AbstractToken(AbstractValue):
    """The aval of an ordering token (``after_all``, infeed/outfeed)."""

    __slots__ = ()
    shape = ()
    dtype = np.dtype(np.bool_)
    weak_type = False

    def str_short(self):
        return "Tok"

    def __eq__(self, other):
        return type(other) is AbstractToken

    def __hash__(self):
        return hash("AbstractToken")

    def at_least_vspace(self):
        return self

    def strip_weak_type(self):
        return self


abstract_token = AbstractToken()


class Token:
    """The concrete value of an ordering token (``lax.create_token``, ``lax.after_all``,
    ``lax.psend``): it carries no data, only the order of effects in a program."""

    __slots__ = ("__weakref__",)
    aval = abstract_token

    def __repr__(self):
        return "Token()"

    def block_until_ready(self):
        return self


class ShapeDtypeStruct:
    """A shape and dtype without data: the result type of ``eval_shape`` and an input to it."""

    __slots__ = ("shape", "dtype", "weak_type")

    def __init__(self, shape, dtype, weak_type: bool = False):
        self.shape = tuple(int(d) for d in shape)
        self.dtype = dtypes.canonicalize_dtype(dtype)
        self.weak_type = weak_type

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(math.prod(self.shape)))

    @property
    def aval(self):
        return ShapedArray(self.shape, self.dtype, self.weak_type)

    def __repr__(self):
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name})"

    def __eq__(self, other):
        return (isinstance(other, ShapeDtypeStruct) and self.shape == other.shape
                and self.dtype == other.dtype)

    def __hash__(self):
        return hash((self.shape, self.dtype))


# ----------------------------------- primitives -----------------------------------------

class Primitive:
    """A named operation. Its rules live in registries keyed by the primitive: the impl
    and abstract eval here, jvp/transpose in ``interpreters.ad``, batching in
    ``interpreters.batching``, lowering in ``lowering``.
    """

    multiple_results = False

    def __init__(self, name: str):
        self.name = name
        self.impl: Callable | None = None
        self.abstract_eval: Callable | None = None

    def __repr__(self):
        return self.name

    def def_impl(self, impl):
        self.impl = impl
        return impl

    def def_abstract_eval(self, abstract_eval):
        self.abstract_eval = abstract_eval
        return abstract_eval

    def bind(self, *args, **params):
        """Apply the primitive through the innermost active transformation.

        Returns one value, or a list when ``multiple_results``.
        """
        trace = find_top_trace(args)
        if trace is None:  # eager fast path: no tracers, no dynamic trace
            outs = eval_primitive(self, args, params)
            return outs if self.multiple_results else outs[0]
        tracers = [full_raise(trace, a) for a in args]
        outs = trace.process_primitive(self, tracers, params)
        if self.multiple_results:
            return [full_lower(o) for o in outs]
        return full_lower(outs[0])

    def bind_with_trace(self, trace, args, params):
        tracers = [full_raise(trace, a) for a in args]
        outs = trace.process_primitive(self, tracers, params)
        return [full_lower(o) for o in outs] if self.multiple_results else full_lower(outs[0])


# ----------------------------------- the trace stack ------------------------------------

class MainTrace:
    """One active transformation: its level in the stack, its Trace class and the data
    shared by all its tracers (e.g. the jaxpr builder)."""

    __slots__ = ("level", "trace_type", "global_data")

    def __init__(self, level, trace_type, global_data=None):
        self.level = level
        self.trace_type = trace_type
        self.global_data = global_data

    def __repr__(self):
        return f"MainTrace({self.level}, {self.trace_type.__name__})"


class Trace:
    """How one transformation interprets primitives. ``pure`` boxes a constant, ``lift``
    boxes a tracer of a lower-level transformation."""

    def __init__(self, main: MainTrace):
        self.main = main

    def pure(self, val):
        raise NotImplementedError(f"{type(self).__name__}.pure")

    def lift(self, tracer):
        raise NotImplementedError(f"{type(self).__name__}.lift")

    def process_primitive(self, primitive, tracers, params):
        raise NotImplementedError(f"{type(self).__name__}.process_primitive")


class EvalTrace(Trace):
    pure = lift = lambda self, x: x

    def process_primitive(self, primitive, tracers, params):
        return eval_primitive(primitive, tracers, params)


class _TraceState(threading.local):
    """This thread's trace stack and dynamic trace (the make_jaxpr/jit tracing, which
    catches every bind, even one whose arguments are all constants, so that the staged
    program contains it). Per thread, as JAX's: eager ops in one thread run eagerly while
    another thread traces."""

    def __init__(self):
        self.trace_stack: list[MainTrace] = [MainTrace(0, EvalTrace, None)]
        self.dynamic: MainTrace = self.trace_stack[0]


_trace_state = _TraceState()
# Transformations and dynamic traces entered and not yet left, in all threads: while it
# is 0 every thread evaluates eagerly, and the eager fast paths need not read their
# thread's state (``not (_traces_active and _trace_state.dynamic.level)``: 11 ns, where
# the thread-local read alone costs 65).
_traces_active = 0
_traces_lock = threading.Lock()


def _count_traces(k: int) -> None:
    global _traces_active
    with _traces_lock:
        _traces_active += k


def current_trace_stack() -> list:
    """This thread's active transformations, the eager base (level 0) first."""
    return _trace_state.trace_stack


def dynamic_level() -> int:
    """The level of this thread's dynamic trace (0: none)."""
    return _traces_active and _trace_state.dynamic.level


@contextmanager
def new_main(trace_type, global_data=None):
    stack = _trace_state.trace_stack
    main = MainTrace(len(stack), trace_type, global_data)
    stack.append(main)
    _count_traces(1)
    try:
        yield main
    finally:
        _count_traces(-1)
        stack.pop()


@contextmanager
def new_dynamic(main: MainTrace):
    state = _trace_state
    prev, state.dynamic = state.dynamic, main
    _count_traces(1)
    try:
        yield
    finally:
        _count_traces(-1)
        state.dynamic = prev


@contextmanager
def new_base_main():
    """Run with a fresh, empty stack (used to trace a jaxpr independently of outer
    transformations, e.g. inside jit)."""
    state = _trace_state
    prev_stack, prev_dyn = state.trace_stack, state.dynamic
    state.trace_stack = [MainTrace(0, EvalTrace, None)]
    state.dynamic = state.trace_stack[0]
    try:
        yield
    finally:
        state.trace_stack, state.dynamic = prev_stack, prev_dyn


def _check_alive(tracer):
    main = tracer._trace.main
    lvl = main.level
    stack = _trace_state.trace_stack
    if lvl >= len(stack) or stack[lvl] is not main:
        raise UnexpectedTracerError(tracer)


def find_top_trace(xs):
    """The Trace that must process an operation on ``xs``, or None for eager evaluation."""
    top = None
    for x in xs:
        if isinstance(x, Tracer):
            _check_alive(x)
            m = x._trace.main
            if top is None or m.level > top.level:
                top = m
    if top is None:
        if not _traces_active:
            return None
        dyn = _trace_state.dynamic
        if dyn.level == 0:
            return None
        return dyn.trace_type(dyn)
    dyn = _trace_state.dynamic
    if dyn.level > top.level:
        top = dyn
    return top.trace_type(top)


def full_raise(trace: Trace, val):
    if not isinstance(val, Tracer):
        return trace.pure(val)
    level = trace.main.level
    vmain = val._trace.main
    if vmain is trace.main:
        return val
    if vmain.level < level:
        return trace.lift(val)
    if vmain.level > level:
        raise UnexpectedTracerError(val, f"It belongs to a transformation at level {vmain.level} "
                                         f"but was used at level {level}.")
    raise UnexpectedTracerError(val, "It belongs to a different transformation at the same "
                                     "level (it escaped an earlier one).")


def full_lower(val):
    if isinstance(val, Tracer):
        return val.full_lower()
    return val


# ------------------------------------- tracers ------------------------------------------

def describe(x, limit: int = 80) -> str:
    """``x`` as an error message shows it: a traced value by its aval (its repr names
    the trace, which means nothing to the caller), a list or tuple by its length and
    first elements, anything else by a repr cut to ``limit`` characters."""
    if isinstance(x, Tracer):
        return f"a traced {x.aval.str_short()} value"
    if isinstance(x, (list, tuple)):
        items = ", ".join(describe(v, 24) for v in x[:3])
        more = ", ..." if len(x) > 3 else ""
        return f"{type(x).__name__} of {len(x)} [{items}{more}]"
    r = repr(x)
    return r if len(r) <= limit else r[:limit - 3] + "..."


class Tracer:
    """A value inside a transformation. Array operations on tracers are attached by
    ``tracer.numpy.array_methods`` (shared with ``Array``)."""

    __slots__ = ("_trace", "__weakref__")
    __array_priority__ = 1000

    @property
    def aval(self):
        raise NotImplementedError

    def full_lower(self):
        return self

    def to_concrete_value(self):
        """The concrete value behind this tracer if the transformation knows it (e.g. the
        primal of an eager jvp), else None."""
        return None

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: len(self.aval.shape))
    size = property(lambda self: self.aval.size)
    weak_type = property(lambda self: self.aval.weak_type)

    def __len__(self):
        if not self.aval.shape:
            raise TypeError(f"len() of unsized object (a traced scalar {self.aval.str_short()})")
        return self.aval.shape[0]

    def __bool__(self):
        v = self.to_concrete_value()
        if v is None:
            raise TracerBoolConversionError(self)
        return bool(v)

    def _scalar_conversion(self, conv, err_cls):
        v = self.to_concrete_value()
        if v is None:
            raise err_cls(self)
        return conv(v)

    def __int__(self):
        return self._scalar_conversion(int, TracerIntegerConversionError)

    def __index__(self):
        return self._scalar_conversion(operator.index, TracerIntegerConversionError)

    # float(), complex() and np.asarray() would silently drop what the transformation
    # tracks (a tangent, a batch): they raise even when the value is known, as in JAX.
    # bool(), int() and index use a known value (Python control flow under grad works).
    # Tracers whose known values carry nothing else (partial evaluation's known values)
    # set this False and convert.
    conversion_drops_information = True

    def _known_value(self):
        if self.conversion_drops_information:
            return None
        return self.to_concrete_value()

    def __float__(self):
        v = self._known_value()
        if v is None:
            raise ConcretizationTypeError(self, "was converted to a Python float (float() "
                                                "drops derivatives; keep the value an array)")
        return float(v)

    def __complex__(self):
        v = self._known_value()
        if v is None:
            raise ConcretizationTypeError(self, "was converted to a Python complex")
        return complex(v)

    def __array__(self, dtype=None, copy=None):
        v = self._known_value()
        if v is None:
            raise TracerArrayConversionError(self)
        return np.asarray(v, dtype=dtype)

    def __hash__(self):
        raise TypeError(f"unhashable type: {type(self).__name__} (tracers, like Arrays, are "
                        "not hashable; use a Python value or mark the argument static)")

    def __setitem__(self, idx, value):
        _immutable_setitem(self)

    def __iter__(self):
        if not self.aval.shape:
            raise TypeError(f"iteration over a 0-d traced array {self.aval.str_short()}")
        return (self[i] for i in range(self.aval.shape[0]))

    def __repr__(self):
        return f"Traced<{self.aval}>with<{type(self._trace).__name__}>"

    def __getattr__(self, name):
        # Forward aval attributes for convenience (e.g. tracer.str_short()).
        if name.startswith("__"):
            raise AttributeError(name)
        aval = object.__getattribute__(self, "aval")
        try:
            return getattr(aval, name)
        except AttributeError:
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r}") from None


def _immutable_setitem(x):
    what = "Arrays" if isinstance(x, Array) else "Traced arrays"
    raise TypeError(f"{what} are immutable and do not support in-place item "
                    "assignment. Instead of x[idx] = y, use x = x.at[idx].set(y) (or "
                    ".add/.mul/.min/.max/.get) or another .at[] method.")


# ------------------------------------- Arrays -------------------------------------------

class Array:
    """An immutable, concrete array: a read-only NumPy ndarray plus a weak_type flag.

    Created by every eager operation; ``np.asarray(x)`` returns the underlying ndarray
    without copying (read-only). Arithmetic, comparison and reduction methods are shared
    with tracers (``tracer.numpy.array_methods``).
    """

    __slots__ = ("_value", "_weak_type", "_aval", "__weakref__")
    __array_priority__ = 100

    def __init__(self, value, weak_type: bool = False):
        # Internal: ``value`` is a NumPy array of a supported, canonical dtype.
        if type(value) is not np.ndarray:
            value = np.asarray(value)       # (an ndarray subclass's view: plain ndarray)
        if not dtypes.is_supported(value.dtype):
            raise dtypes.unsupported_array("Array", "its value", value)
        if value.flags.writeable or value.base is not None and may_change(value):
            # the caller's NumPy array (or a read-only view of memory the caller can
            # still write): copy it (as jax.device_put does), so the Array never changes
            # when the caller writes to it and the caller's flags stay
            value = value.copy()
            value.flags.writeable = False
        self._value = value
        self._weak_type = weak_type
        self._aval = None

    @property
    def aval(self) -> ShapedArray:
        a = self._aval
        if a is None:
            a = self._aval = ShapedArray(self._value.shape, self._value.dtype, self._weak_type)
        return a

    shape = property(lambda self: self._value.shape)
    dtype = property(lambda self: self._value.dtype)
    ndim = property(lambda self: self._value.ndim)
    size = property(lambda self: self._value.size)
    itemsize = property(lambda self: self._value.itemsize)
    nbytes = property(lambda self: self._value.nbytes)
    weak_type = property(lambda self: self._weak_type)

    def __array__(self, dtype=None, copy=None):
        if dtype is None or np.dtype(dtype) == self._value.dtype:
            if copy:
                return self._value.copy()
            # a read-only view: NumPy refuses to make it writable again (the value itself,
            # owning its memory, could be; JAX refuses too)
            return self._value.view()
        return self._value.astype(dtype)

    def __len__(self):
        if self._value.ndim == 0:
            raise TypeError("len() of unsized object (a 0-d Array)")
        return len(self._value)

    def __iter__(self):
        if self._value.ndim == 0:
            raise TypeError("iteration over a 0-d Array")
        return (self[i] for i in range(self._value.shape[0]))

    def __bool__(self):
        return bool(self._value)

    def __int__(self):
        return int(self._value)

    def __float__(self):
        return float(self._value)

    def __complex__(self):
        return complex(self._value)

    def __index__(self):
        if not dtypes.is_integer(self._value.dtype) and self._value.dtype != np.bool_:
            raise TypeError(f"only integer scalar Arrays can be converted to an index, "
                            f"got dtype {self._value.dtype}")
        return operator.index(self._value)

    __hash__ = None  # unhashable, like JAX's Array

    def __setitem__(self, idx, value):
        _immutable_setitem(self)

    def item(self, *args):
        return self._value.item(*args)

    def tolist(self):
        return self._value.tolist()

    def to_concrete_value(self):
        return self._value

    def block_until_ready(self):
        return self

    def copy(self):
        return Array(self._value.copy(), self._weak_type)

    def __reduce__(self):
        return (_rebuild_array, (np.array(self._value), self._weak_type))

    def __repr__(self):
        v = self._value
        if v.size:
            body = np.array2string(v, separator=", ", prefix="Array(")
        else:  # as JAX: the shape is all an empty array has to show
            body = f"[], shape={v.shape}"
        dt = v.dtype.name
        if v.dtype == np.bool_:
            dt = "bool"
        weak = ", weak_type=True" if self._weak_type else ""
        return f"Array({body}, dtype={dt}{weak})"

    def __str__(self):
        return str(self._value)

    def __format__(self, spec):
        if self._value.ndim == 0:
            return format(self._value.item(), spec)
        return format(str(self), spec)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule of the data (the Array API's ``__dlpack__``, through NumPy's).

        A DLPack >= 1.0 capsule (``max_version=(1, 0)`` or later) is flagged read-only.
        A 0.x capsule (``max_version`` None or (0, x)) cannot say so; it still shares
        the memory unless ``copy=True`` (as JAX exports), and the consumer must not
        write to it. BufferError (NumPy's) for a device other than the CPU."""
        v = self._value
        legacy = max_version is None or max_version[0] < 1
        if legacy and not copy:
            v = np.asarray(_WritableAlias(v))
        return v.__dlpack__(stream=stream, max_version=max_version, dl_device=dl_device,
                            copy=copy)

    def __dlpack_device__(self):
        return self._value.__dlpack_device__()


class _WritableAlias:
    """The memory of a read-only ndarray seen as writable (through the array interface),
    for NumPy's 0.x DLPack export, which refuses read-only arrays because it cannot
    flag them. Holds the array, so the memory outlives the capsule."""

    def __init__(self, a):
        self._base = a
        iface = dict(a.__array_interface__)
        iface["data"] = (iface["data"][0], False)
        self.__array_interface__ = iface


def _rebuild_array(value, weak_type):
    return Array(value, weak_type)


# ------------------------------ eager evaluation ----------------------------------------

def get_aval(x) -> ShapedArray:
    """The aval of any value: Tracer, Array, NumPy array/scalar, Python scalar."""
    if isinstance(x, (Tracer, Array)):
        return x.aval
    if isinstance(x, np.ndarray):
        return ShapedArray(x.shape, dtypes.canonicalize_dtype(x.dtype), False)
    if type(x) in _PY_SCALAR_TYPES:
        dt, weak = dtypes.dtype_and_weak_type(x)
        return ShapedArray((), dt, weak)
    if isinstance(x, np.generic):
        return ShapedArray((), dtypes.canonicalize_dtype(x.dtype), False)
    if isinstance(x, (ShapedArray, AbstractToken)):
        return x
    if isinstance(x, Token):
        return abstract_token
    if isinstance(x, ShapeDtypeStruct):
        return x.aval
    if x is None or isinstance(x, (str, bytes)):
        raise TypeError(f"{x!r} of type {type(x).__name__} is not a valid array value")
    try:
        arr = np.asarray(x)
    except Exception:
        raise TypeError(f"value of type {type(x).__name__} is not a valid array value") from None
    if arr.dtype == object:
        raise TypeError(f"value of type {type(x).__name__} is not a valid array value")
    return ShapedArray(arr.shape, dtypes.canonicalize_dtype(arr.dtype), False)


_PY_SCALAR_TYPES = (bool, int, float, complex)


def _python_scalar_to_numpy(x):
    dt, _ = dtypes.dtype_and_weak_type(x)
    try:
        return np.asarray(x, dtype=dt)
    except OverflowError:
        info = dtypes.iinfo(dt)
        raise OverflowError(
            f"Python int {x} is out of range for {dt} ({info.min} to {info.max}), the "
            f"dtype of a Python int argument; pass np.uint64({x}) or float({x}) for "
            "a wider range") from None


def to_numpy(x) -> np.ndarray:
    """A NumPy array of the canonical dtype for any concrete value (no copy when possible)."""
    if isinstance(x, Array):
        return x._value
    if isinstance(x, np.ndarray):
        if type(x) is not np.ndarray:
            # (a subclass: np.memmap, np.matrix, a user's; impls would keep it, and its
            # Python hooks would run inside every ufunc an Array's value goes through)
            check_not_masked(x)
            x = np.asarray(x)
        dt = dtypes.canonicalize_dtype(x.dtype)
        return x if dt == x.dtype else x.astype(dt)
    if type(x) in _PY_SCALAR_TYPES:
        return _python_scalar_to_numpy(x)
    if isinstance(x, Tracer):
        v = x.to_concrete_value()
        if v is None:
            raise TracerArrayConversionError(x)
        return to_numpy(v)
    if isinstance(x, Token):
        return x  # impls of token primitives take and return Tokens
    arr = np.asarray(x)
    if arr.dtype == object:
        raise TypeError(f"value of type {type(x).__name__} is not a valid array value")
    dt = dtypes.canonicalize_dtype(arr.dtype)
    return arr if dt == arr.dtype else arr.astype(dt)


def check_not_masked(x):
    """ValueError for a NumPy masked array (as JAX): converting one keeps its data and
    drops its mask, so that a sum would add the masked elements, silently."""
    ma = sys.modules.get("numpy.ma")
    if ma is not None and isinstance(x, ma.MaskedArray):
        raise ValueError("NumPy masked arrays are not supported as inputs (their mask "
                         "would be dropped); pass arr.filled(value) with the value masked "
                         "elements should take, or arr.compressed() for the unmasked ones")


_abstract_eval_cache: dict = {}


def abstract_eval_cached(primitive, avals, params):
    """``primitive.abstract_eval`` memoised on (primitive, avals, params) when hashable."""
    try:
        key = (primitive, tuple(avals), tuple(params.items()) if params else ())
        hit = _abstract_eval_cache.get(key)
    except TypeError:
        key, hit = None, None
    if hit is not None:
        return hit
    if primitive.abstract_eval is None:
        raise NotImplementedError(f"Abstract evaluation for '{primitive.name}' not implemented")
    out = primitive.abstract_eval(*avals, **params)
    if not primitive.multiple_results:
        out = [out] if not isinstance(out, (list, tuple)) else list(out)
    out = list(out)
    if key is not None:
        if len(_abstract_eval_cache) >= 20_000:
            # Keys may hold sub-jaxprs that are traced anew per call (grad of jit):
            # bound the memory rather than keep every one of them alive.
            _abstract_eval_cache.clear()
        _abstract_eval_cache[key] = out
    return out


try:    # NumPy >= 2: the floating-point error state is a context variable ("extobj")
    from numpy._core._multiarray_umath import _make_extobj
    from numpy._core._ufunc_config import _extobj_contextvar as extobj_contextvar
except ImportError:     # another layout: impls enter np.errstate themselves
    extobj_contextvar = None
_quiet = [None, None]   # [the state it was made from, the same state ignoring all errors]
_quiet_run = []         # [the quiet context's run], made on first use


def quiet_run():
    """The ``run`` of one context in which NumPy ignores every floating-point error
    (None where NumPy keeps its error state elsewhere): ``quiet_run()(ufunc, *arrays)``
    calls a NumPy ufunc that way (0.01 us more than the bare call, where setting and
    resetting the error state costs 0.25 us: an eager ``x + y`` costs 0.9 us). Only for
    a ufunc on plain ndarrays (an Array's value is one: ``to_numpy`` and ``Array`` take
    ndarray subclasses' plain views), which runs no Python code of its own. A context
    is entered by one thread at a time: a caller that finds it entered already
    (RuntimeError) -- by another thread inside a ufunc that released the GIL, or by a
    finalizer the collector ran inside it, which sees the quiet state -- switches the
    error state instead."""
    if not _quiet_run:
        if extobj_contextvar is None:
            return None
        token = extobj_contextvar.set(_make_extobj(all="ignore"))
        try:
            _quiet_run.append(contextvars.copy_context().run)
        finally:
            extobj_contextvar.reset(token)
    return _quiet_run[0]


def ignoring_fp_errors():
    """The current NumPy error state with every floating-point error ignored, to set on
    ``extobj_contextvar`` around an impl (made once per state: ``np.errstate`` costs
    more than a small ufunc call)."""
    cur = extobj_contextvar.get()
    last, quiet = _quiet
    if cur is not last:
        quiet = _make_extobj(all="ignore")
        _quiet[:] = [cur, quiet]
    return quiet


def np_errstate(fn):
    """Run a NumPy impl without floating-point warnings (IEEE results are the semantics)."""

    if extobj_contextvar is None:
        def wrapped(*args, **kw):
            with np.errstate(all="ignore"):
                return fn(*args, **kw)
    else:
        def wrapped(*args, **kw):
            token = extobj_contextvar.set(ignoring_fp_errors())
            try:
                return fn(*args, **kw)
            finally:
                extobj_contextvar.reset(token)

    wrapped.__name__ = getattr(fn, "__name__", "impl")
    # eval_jaxpr_impls enters errstate once per jaxpr and calls the impl itself
    wrapped.impl_without_errstate = fn
    return wrapped


_eval_plans: dict = {}


def eval_plan(key, primitive, avals, params):
    """(out avals, the function to call, whether to call it with floating-point errors
    ignored) for ``eval_primitive``, memoised in ``_eval_plans`` under ``key``
    (``(primitive, *avals, *params.items())``, or None when a param is unhashable). An impl made by ``np_errstate`` exposes
    ``impl_without_errstate``, and one made by ``lax.utils.lowp_widening`` its
    ``plain_impl`` for operands of no low-precision dtype: calling those directly under
    one error-state switch skips two Python frames per operation."""
    out_avals = abstract_eval_cached(primitive, avals, params)
    impl = primitive.impl
    inner = getattr(impl, "impl_without_errstate", None)
    if inner is None or extobj_contextvar is None:
        plan = out_avals, impl, False
    elif not any(dtypes.is_lowp(getattr(a, "dtype", None)) for a in avals):
        plan = out_avals, getattr(inner, "plain_impl", inner), True
    else:
        plan = out_avals, inner, True
    if key is not None:
        if len(_eval_plans) >= 20_000:    # (bounded, as abstract_eval_cached)
            _eval_plans.clear()
        _eval_plans[key] = plan
    return plan


def call_impl(fn, quiet, /, *args, **params):
    """``fn(*args, **params)``, with every floating-point error ignored where ``quiet``
    (the third item of an ``eval_plan``). ``fn`` and ``quiet`` are positional only: a
    primitive's params may use those names (``numba_call``'s ``fn``)."""
    if not quiet:
        return fn(*args, **params)
    token = extobj_contextvar.set(ignoring_fp_errors())
    try:
        return fn(*args, **params)
    finally:
        extobj_contextvar.reset(token)


def eval_primitive(primitive, args, params):
    """Run ``primitive``'s NumPy impl on concrete values; returns a list of Arrays.

    This is the eager hot path (one call per operation): Arrays are unpacked without
    re-deriving their avals, and the abstract eval and the choice of impl are memoised
    per (primitive, avals, params).
    """
    if primitive.impl is None:
        raise NotImplementedError(f"Evaluation rule for '{primitive.name}' not implemented")
    avals = []
    vals = []
    mutable = None      # owners of the memory of NumPy operands that can still change
    for a in args:
        if type(a) is Array:
            av = a._aval
            if av is None:
                av = a.aval
            avals.append(av)
            vals.append(a._value)
        else:
            if isinstance(a, (np.ndarray, np.generic)) and not dtypes.is_supported(a.dtype):
                raise dtypes.unsupported_array(primitive.name, f"operand {len(vals)}", a)
            avals.append(get_aval(a))
            v = to_numpy(a)
            vals.append(v)
            if isinstance(v, np.ndarray) and may_change(v):
                mutable = (mutable or set()) | {id(memory_owner(v))}
    try:
        key = (primitive, *avals, *params.items()) if params else (primitive, *avals)
        plan = _eval_plans.get(key)
    except TypeError:       # an unhashable param
        key, plan = None, None
    out_avals, fn, quiet = plan or eval_plan(key, primitive, avals, params)
    outs = call_impl(fn, quiet, *vals, **params)
    if not primitive.multiple_results:
        outs = (outs,)
    result = []
    for o, aval in zip_(outs, out_avals):
        if mutable is not None and isinstance(o, np.ndarray) and \
                id(memory_owner(o)) in mutable:
            o = o.copy()    # (the operand itself, or a view of it: the Array must not change)
        result.append(impl_result(primitive, o, aval) if type(aval) is ShapedArray else o)
    return result


def memory_owner(a: np.ndarray):
    """The object owning ``a``'s memory: the end of its chain of bases (an ndarray, or a
    buffer such as a bytearray). A view of ``a`` has the same owner."""
    b = a.base
    while b is not None:
        if not isinstance(b, np.ndarray):
            return b
        a, b = b, b.base
    return a


def may_change(a: np.ndarray) -> bool:
    """Whether ``a``'s values can change later without an Array's knowing: ``a`` is
    writable, or a view whose memory is (a writable array along its chain of bases, or a
    buffer other than ``bytes``). An Array never keeps such memory (JAX copies every
    NumPy argument onto its device); a read-only array owning its memory is kept."""
    if a.flags.writeable:
        return True
    b = a.base
    while b is not None:
        if not isinstance(b, np.ndarray):
            return type(b) is not bytes
        if b.flags.writeable:
            return True
        b = b.base
    return False


def impl_result(primitive, o, aval: ShapedArray) -> "Array":
    """An impl's result as the Array of ``aval``: NumPy scalars become arrays, and the
    dtype becomes the aval's (NumPy's own result dtype can differ from JAX's)."""
    if type(o) is not np.ndarray:
        o = np.asarray(o)
    if o.dtype != aval.dtype:
        o = o.astype(aval.dtype)
    if o.shape != aval.shape:
        raise AssertionError(f"impl of {primitive.name} returned shape {o.shape}, abstract "
                             f"eval says {aval.str_short()}")
    return _new_array(o, aval)


def _new_array(value: np.ndarray, aval: ShapedArray) -> "Array":
    """An Array around a fresh impl result whose aval is already known."""
    # A fresh result (impls get read-only operands); setflags costs less than reading
    # .flags first, and clearing the flag of an array that has it cleared is harmless.
    value.setflags(False)        # (write=False; the keyword costs twice as much)
    a = Array.__new__(Array)
    a._value = value
    a._weak_type = aval.weak_type
    a._aval = aval
    return a


# ------------------------- concreteness helpers for rules --------------------------------

def concrete_or_error(fn, val, context: str = ""):
    """``fn(concrete value of val)``; ConcretizationTypeError naming ``context`` if traced."""
    if isinstance(val, Tracer):
        v = val.to_concrete_value()
        if v is None:
            raise ConcretizationTypeError(val, context)
        return fn(v)
    if isinstance(val, Array):
        return fn(val._value)
    return fn(val)


def is_concrete(x) -> bool:
    return not isinstance(x, Tracer) or x.to_concrete_value() is not None


def concrete_value(x):
    """The concrete NumPy value of ``x``, or None if it is traced."""
    if isinstance(x, Tracer):
        v = x.to_concrete_value()
        return None if v is None else to_numpy(v)
    return to_numpy(x)


def valid_jaxtype(x) -> bool:
    try:
        get_aval(x)
    except TypeError:
        return False
    return True


def check_valid_jaxtype(x, fun_name: str, what: str = "argument"):
    if not valid_jaxtype(x):
        raise TypeError(f"{fun_name}: {what} {x!r} of type {type(x).__name__} is not a valid "
                        "array type (expected an Array, a NumPy array or a Python scalar)")


def cur_level() -> int:
    return len(_trace_state.trace_stack) - 1


def raise_to_shaped(aval):
    return aval


def typeof(x):
    return get_aval(x)
