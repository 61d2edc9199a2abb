"""User Numba kernels as primitives: ``numba_call`` and ``numba_elementwise`` (the
compiled counterpart of the host callbacks; XLA's CustomCall, as ``jax.ffi.ffi_call``
offers it for C++ kernels).

Two primitives, each holding the user's ``numba.njit`` dispatcher as a param (a
``NumbaKernel``: one per dispatcher, equal by identity):

- ``numba_call``: ``kernel(*ins, *outs, **static)`` writes its results into output arrays
  that tracer allocates from ``result_shape_dtypes``. Eagerly the impl calls the
  dispatcher on NumPy arrays; under jit it is a library call of kind "numba_call" (the
  executor calls the dispatcher), and inside a compiled loop driver the driver calls the
  kernel natively, as a Numba function (numba_backend.control_flow). vmap follows
  ``vmap_method`` (as ``pure_callback``); differentiating raises ValueError (wrap it in
  ``custom_jvp``/``custom_vjp``).
- ``numba_elementwise``: a scalar function applied element by element, with ufunc
  broadcasting; batching is the element-wise one; its optional partial derivatives give
  jvp and (through ``mul``'s transpose) grad. Under jit its lowering rule is a scalar
  call, so it fuses into the neighbouring element-wise kernels.

Generated code names the user's function by its ``token`` (``u<n>_<name>``, unique per
dispatcher in this process) through the backend's helper module ``ffi``; the backend
resolves the token in this process (``kernel_by_token``), compiles such code in this
process and never from its disk cache (a token means another function in another
process, and Numba's cache does not track callees): a changed kernel never reuses stale
compiled code.

Typing happens at trace time: Numba types (and compiles) the kernel for the operands'
dtypes and ranks when the call is traced, so a typing failure is a ``KernelCompileError``
(a TypeError) naming the kernel and the shapes, with Numba's message, raised where the
call is made. This module imports Numba only inside functions (``import tracer`` does not
load it); a user holding a dispatcher has loaded it already.
"""
from __future__ import annotations

import inspect
import itertools
import re
import sys
import threading
from typing import Any, Callable, Sequence

import numpy as np

from tracer import dtypes
from tracer.core import Primitive, ShapedArray, get_aval
from tracer.interpreters import ad, batching
from tracer.interpreters.ad import Zero

from lax import callbacks as _cb
from lax.utils import as_lax_value, check_same_shapes_dtypes

_F16 = np.dtype(np.float16)


class KernelCompileError(TypeError):
    """A user's Numba kernel failed to compile (type) for the operands it is called with;
    the message names the kernel and the operand types and holds Numba's message."""


# ======================================= the kernels =======================================

class NumbaKernel:
    """The param holding a user's ``numba.njit`` dispatcher: one per dispatcher (so equal
    calls are one under CSE and in the trace caches), with the ``token`` generated code
    names it by. Not callable: library-call params hold data, not functions."""

    __slots__ = ("dispatcher", "name", "token", "__weakref__")

    def __init__(self, dispatcher, token):
        self.dispatcher = dispatcher
        self.name = _name(dispatcher)
        self.token = token

    @property
    def __name__(self):    # what the jaxpr printer shows for the param
        return self.name

    def __repr__(self):
        return f"<numba kernel {self.name}>"

    def __reduce__(self):
        raise TypeError(f"the Numba kernel {self.name} is not picklable (its generated code "
                        "runs in the process that traced it)")


_lock = threading.Lock()
_by_dispatcher: dict = {}     # id(dispatcher) -> NumbaKernel (holds the dispatcher: ids stay)
_by_token: dict = {}
_counter = itertools.count(1)


def _name(fn) -> str:
    py = getattr(fn, "py_func", fn)
    return getattr(py, "__qualname__", None) or getattr(py, "__name__", None) or repr(fn)


def _is_njit(fn) -> bool:
    if "numba" not in sys.modules:     # a Numba dispatcher means Numba is loaded
        return False
    from numba.core.dispatcher import Dispatcher
    return isinstance(fn, Dispatcher) and getattr(fn, "_required_target_backend", None) \
        in (None, "cpu")


def kernel_of(fn, fname: str) -> NumbaKernel:
    """The ``NumbaKernel`` of the dispatcher ``fn`` (TypeError unless it is one)."""
    if not _is_njit(fn):
        raise TypeError(f"{fname}: expected a numba.njit function, got {_name(fn)} of type "
                        f"{type(fn).__name__}; decorate it with @numba.njit (a plain Python "
                        "function can be called through tracer.pure_callback)")
    with _lock:
        k = _by_dispatcher.get(id(fn))
        if k is None:
            stem = re.sub(r"\W", "_", _name(fn))[:40]
            k = NumbaKernel(fn, f"u{next(_counter)}_{stem}")
            _by_dispatcher[id(fn)] = k
            _by_token[k.token] = k
        return k


def kernel_by_token(token: str):
    """The ``NumbaKernel`` generated code calls by ``token`` in this process, or None."""
    return _by_token.get(token)


def _numba_type(dt, ndim=None, readonly=False):
    import numba
    from numba import types
    t = numba.from_dtype(np.dtype(dt))
    return t if ndim is None else types.Array(t, ndim, "C", readonly=readonly)


def _typing_error():
    from numba.core.errors import NumbaError
    return NumbaError


def _numba_message(e) -> str:
    msg = str(e).strip()
    return re.sub(r"\x1b\[[0-9;]*m", "", msg)    # Numba may colour its messages


def _describe(avals) -> str:
    return ", ".join(a.str_short() for a in avals) or "none"


def _no_numba_type(dt) -> bool:
    # float16 and the ml_dtypes types (bfloat16, float8, int4...): Numba has none
    return np.dtype(dt) == _F16 or dtypes.is_lowp(dt)


def _check_dtypes(fname, name, avals, what):
    for a in avals:
        if _no_numba_type(a.dtype):
            dn = np.dtype(a.dtype).name
            raise TypeError(f"{fname}: the kernel {name} gets a {dn} {what} "
                            f"({a.str_short()}); Numba kernels take no {dn} arrays: "
                            "convert to float32 (int32 for the narrow integers) around "
                            "the call")


# ======================================== numba_call =======================================

def numba_call(kernel: Callable, result_shape_dtypes: Any, *args: Any,
               vmap_method: str | None = None, **static: Any):
    """Call the user's Numba kernel ``kernel(*args, *outs, **static)`` from traced or
    jitted code, ``outs`` being new arrays of ``result_shape_dtypes`` that the kernel
    writes (the shape of ``jax.ffi.ffi_call`` for a kernel written with Numba).

    - ``kernel``: a ``numba.njit`` function of positional array parameters, the operands
      first (C-contiguous, read-only: writing one is a typing error) and then one output
      array per result (C-contiguous, uninitialized: the kernel writes every element). It
      returns nothing. Rank-0 operands and results are 0-d arrays (``x[()]``).
    - ``result_shape_dtypes``: a pytree of objects with ``.shape`` and ``.dtype``
      (``tracer.ShapeDtypeStruct``, arrays); the call returns that pytree of Arrays.
    - ``args``: arrays (any shapes; Python scalars become 0-d arrays of their default
      dtype). float16 operands or results raise TypeError.
    - ``static``: Python ``int``/``float``/``bool`` values passed to the kernel *by
      keyword* (parameters after the outputs, typed by Numba as int64/float64/bool).
      They are part of the traced program: a new value compiles anew.

    The kernel must be pure: under jit an unused result drops the call, two equal calls
    may run once. Numba types and compiles the kernel for the operands when the call is
    traced. Under jit the compiled program calls the dispatcher itself at top level, and
    a ``scan``/``while``/``fori_loop``/``cond`` body holding the call is compiled into
    the loop's driver, which calls the kernel as a Numba function (no Python per
    iteration). Such code compiles in this process, without Numba's disk cache.

    ``vmap_method`` as in ``pure_callback``: ``"sequential"`` (a scan over the batch:
    under jit a compiled loop), ``"expand_dims"`` / ``"broadcast_all"`` (one call on the
    whole batch, batch axis first; the kernel gets operands of one more rank and writes
    results of one more rank), ``"legacy_vectorized"``; None: vmap raises
    NotImplementedError. Differentiating raises ValueError: wrap the call in
    ``tracer.custom_jvp`` / ``custom_vjp``.

    Raises TypeError when ``kernel`` is not a ``numba.njit`` function, when its parameters
    do not take the operands, the outputs and the static arguments (the message names the
    kernel and the shapes), for static values that are not Python scalars, and for float16;
    ``KernelCompileError`` (a TypeError) when Numba fails to type the kernel for these
    operands, with Numba's message; ValueError for an unknown ``vmap_method`` and for
    64-bit result dtypes with ``enable_x64`` off. An exception raised inside the kernel
    propagates as Numba raises it."""
    k = kernel_of(kernel, "numba_call")
    if vmap_method not in _cb._VMAP_METHODS:
        raise ValueError(f"numba_call: vmap_method must be one of "
                         f"{list(_cb._VMAP_METHODS)}, got {vmap_method!r}")
    result_avals, out_tree = _cb._result_avals("numba_call", result_shape_dtypes)
    statics = []
    for n, v in static.items():
        if isinstance(v, np.generic) and v.ndim == 0:
            v = v.item()
        if type(v) not in (bool, int, float):
            raise TypeError(f"numba_call: static argument {n}={v!r} of the kernel {k.name} "
                            f"must be a Python int, float or bool, got {type(v).__name__} "
                            "(pass arrays as operands)")
        statics.append((n, v))
    vals = [as_lax_value(a) for a in args]
    in_avals = [get_aval(v) for v in vals]
    _check_dtypes("numba_call", k.name, in_avals, "operand")
    _check_dtypes("numba_call", k.name, result_avals, "result")
    _check_arity(k, in_avals, result_avals, dict(statics))
    outs = numba_call_p.bind(*vals, kernel=k, result_avals=result_avals,
                             statics=tuple(statics), vmap_method=vmap_method)
    return _cb.tree_unflatten(out_tree, outs)


def _check_arity(k, in_avals, result_avals, statics):
    try:
        sig = inspect.signature(k.dispatcher.py_func)
    except (TypeError, ValueError):
        return
    n = len(in_avals) + len(result_avals)
    try:
        sig.bind(*range(n), **statics)
    except TypeError as e:
        raise TypeError(
            f"numba_call: the kernel {k.name}{sig} cannot take {len(in_avals)} operands "
            f"({_describe(in_avals)}), then {len(result_avals)} output arrays "
            f"(result_shape_dtypes: {_describe(result_avals)})"
            f"{', then the static arguments ' + ', '.join(statics) if statics else ''}: "
            f"{e}") from None


_typed: dict = {}     # (kernel, ranks and dtypes, statics): Numba typed the call


def check_kernel_call(k, in_avals, result_avals, statics):
    """Type (and compile) ``k`` for operands of ``in_avals`` (read-only arrays), outputs of
    ``result_avals`` and the static keyword values: KernelCompileError on a typing
    failure, TypeError when the kernel returns a value."""
    # Numba's array types hold ranks and dtypes, not shapes
    key = (k, tuple((a.ndim, str(a.dtype)) for a in in_avals),
           tuple((a.ndim, str(a.dtype)) for a in result_avals), statics)
    if key in _typed:
        return
    import numba
    args = tuple(_numba_type(a.dtype, a.ndim, readonly=True) for a in in_avals) + \
        tuple(_numba_type(a.dtype, a.ndim) for a in result_avals)
    kws = {n: numba.typeof(v) for n, v in statics}
    try:
        template, *_ = k.dispatcher.get_call_template(args, kws)
        ret = template.cases[0].return_type
    except _typing_error() as e:
        raise KernelCompileError(
            f"numba_call: the kernel {k.name} failed to compile for operands "
            f"({_describe(in_avals)}) and outputs ({_describe(result_avals)})"
            f"{' with ' + ', '.join(f'{n}={v!r}' for n, v in statics) if statics else ''}."
            f" Numba reports:\n{_numba_message(e)}") from None
    if ret != numba.types.none:
        raise TypeError(f"numba_call: the kernel {k.name} returns a value of type {ret}; a "
                        "numba_call kernel writes its results into its output arrays "
                        f"(result_shape_dtypes: {_describe(result_avals)}) and returns "
                        "nothing")
    _typed[key] = None


def _readonly(a):
    a = np.asarray(a)
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    if a.flags.writeable:
        a = a.view()
        a.flags.writeable = False
    return a


stats = {"calls": 0}    # calls of a kernel from Python (eager, top-level library calls)


def run_kernel(k, args, result_avals, statics):
    """Call ``k`` on NumPy operands: the results, freshly allocated, as the kernel wrote
    them (the impl, and the backend's top-level library call)."""
    ins = [_readonly(a) for a in args]
    check_kernel_call(k, [ShapedArray(a.shape, a.dtype) for a in ins], result_avals,
                      statics)
    outs = [np.empty(a.shape, a.dtype) for a in result_avals]
    stats["calls"] += 1
    k.dispatcher(*ins, *outs, **dict(statics))
    return outs


def _numba_call_impl(*args, kernel, result_avals, statics, vmap_method):
    return run_kernel(kernel, args, result_avals, statics)


def _numba_call_abstract_eval(*avals, kernel, result_avals, statics, vmap_method):
    check_kernel_call(kernel, avals, result_avals, statics)
    return list(result_avals)


def _numba_call_jvp(primals, tangents, *, kernel, **params):
    if any(type(t) is not Zero for t in tangents):
        raise ValueError(f"numba_call: the Numba kernel {kernel.name} has no derivative "
                         "rule. Wrap the call in `tracer.custom_jvp` or `tracer.custom_vjp` "
                         "to differentiate through it.")
    outs = numba_call_p.bind(*primals, kernel=kernel, **params)
    return outs, [Zero.from_primal_value(o) for o in outs]


def _numba_call_batch(axis_data, vals, dims, *, kernel, result_avals, statics, vmap_method):
    params = dict(kernel=kernel, result_avals=result_avals, statics=statics,
                  vmap_method=vmap_method)
    if vmap_method in ("sequential", "sequential_unrolled"):
        return _cb._sequential(numba_call_p, axis_data, vals, dims, params,
                               unroll=vmap_method == "sequential_unrolled")
    if vmap_method not in ("expand_dims", "broadcast_all", "legacy_vectorized"):
        raise NotImplementedError(
            f"vmap of numba_call (kernel {kernel.name}) needs vmap_method: one of "
            "'sequential', 'sequential_unrolled', 'expand_dims', 'broadcast_all' or "
            f"'legacy_vectorized'. Got vmap_method={vmap_method!r}.")
    from lax import shapes
    size = axis_data.size
    vals = [v if d is None else batching.moveaxis(v, d, 0) for v, d in zip(vals, dims)]
    if vmap_method != "legacy_vectorized":
        n = size if vmap_method == "broadcast_all" else 1
        vals = [shapes.broadcast(v, (n,)) if d is None else v for v, d in zip(vals, dims)]
    params["result_avals"] = tuple(_cb._batched(a, size) for a in result_avals)
    outs = numba_call_p.bind(*vals, **params)
    return outs, [0] * len(outs)


numba_call_p = Primitive("numba_call")
numba_call_p.multiple_results = True
numba_call_p.def_abstract_eval(_numba_call_abstract_eval)
numba_call_p.def_impl(_numba_call_impl)
ad.primitive_jvps[numba_call_p] = _numba_call_jvp
batching.primitive_batchers[numba_call_p] = _numba_call_batch


# ==================================== numba_elementwise ====================================

class NumbaElementwise:
    """The element-wise function ``numba_elementwise`` returns: call it on arrays."""

    def __init__(self, scalar_fn, partials, out_dtype):
        self.kernel = kernel_of(scalar_fn, "numba_elementwise")
        self.partials = partials          # tuple of NumbaElementwise | None, or None
        self.out_dtype = None if out_dtype is None else np.dtype(out_dtype)
        self.__name__ = self.kernel.name
        self.__doc__ = getattr(scalar_fn, "__doc__", None)
        self._ufuncs: dict = {}
        self._types: dict = {}

    def __repr__(self):
        return f"<numba_elementwise {self.kernel.name}>"

    def __call__(self, *args):
        vals = [as_lax_value(a) for a in args]
        avals = [get_aval(v) for v in vals]
        if self.partials is not None and len(self.partials) != len(vals):
            raise TypeError(f"numba_elementwise: {self.kernel.name} has "
                            f"{len(self.partials)} partial derivatives (jvp=) but is called "
                            f"with {len(vals)} operands")
        from lax.helpers_extra import broadcast_shapes
        try:
            shape = broadcast_shapes(*[a.shape for a in avals])
        except ValueError:
            raise ValueError(f"numba_elementwise: the operands of {self.kernel.name} do not "
                             f"broadcast together: {_describe(avals)}") from None
        from lax import shapes
        # rank-0 operands stay scalars (the element-wise rules broadcast them)
        vals = [v if a.shape in ((), shape) else shapes.broadcast_in_dim(
            v, shape, tuple(range(len(shape) - a.ndim, len(shape))))
            for v, a in zip(vals, avals)]
        return numba_elementwise_p.bind(*vals, fn=self, out_dtype=self.result_dtype(avals))

    # -- typing --
    def result_dtype(self, avals) -> np.dtype:
        """The output dtype for operands of these dtypes: ``out_dtype`` or Numba's return
        type (KernelCompileError when Numba fails to type the function)."""
        in_dts = tuple(np.dtype(a.dtype) for a in avals)
        dt = self._types.get(in_dts)
        if dt is None:
            dt = self._types[in_dts] = self._numba_result_dtype(in_dts, avals)
        # with enable_x64 off a 64-bit result is rounded to 32 bits, as every dtype is
        return dtypes.canonicalize_dtype(dt)

    def _numba_result_dtype(self, in_dts, avals) -> np.dtype:
        for a in avals:
            if _no_numba_type(a.dtype):
                dn = np.dtype(a.dtype).name
                raise TypeError(f"numba_elementwise: {self.kernel.name} gets a {dn} "
                                f"operand ({a.str_short()}); Numba has no {dn} scalars: "
                                "convert to float32 (int32 for the narrow integers) around "
                                "the call")
        from numba.np.numpy_support import as_dtype
        args = tuple(_numba_type(d) for d in in_dts)
        try:
            template, *_ = self.kernel.dispatcher.get_call_template(args, {})
            # the template lists every signature compiled so far, in compile order: the
            # one for these argument types, not the first
            ret = next((c.return_type for c in template.cases if tuple(c.args) == args),
                       None)
            if ret is None:
                ret = self.kernel.dispatcher.overloads[args].signature.return_type
            typed = as_dtype(ret)
        except _typing_error() as e:
            raise KernelCompileError(
                f"numba_elementwise: the function {self.kernel.name} failed to compile for "
                f"scalar operands ({', '.join(d.name for d in in_dts)}). Numba reports:\n"
                f"{_numba_message(e)}") from None
        except NotImplementedError:
            raise TypeError(f"numba_elementwise: {self.kernel.name} returns {ret} for "
                            f"operands ({', '.join(d.name for d in in_dts)}); it must return "
                            "a scalar number or bool") from None
        dt = np.dtype(typed if self.out_dtype is None else self.out_dtype)
        if _no_numba_type(dt):
            raise TypeError(f"numba_elementwise: a {dt.name} result is not supported (Numba "
                            f"has no {dt.name} scalars)")
        return dt

    def ufunc(self, in_dts, out_dt):
        """The NumPy ufunc of the scalar function for these dtypes (the eager impl: Numba
        compiles the same function once more, as a ufunc loop)."""
        key = (tuple(in_dts), out_dt)
        u = self._ufuncs.get(key)
        if u is None:
            import numba
            sig = _numba_type(out_dt)(*[_numba_type(d) for d in in_dts])
            u = self._ufuncs[key] = numba.vectorize([sig])(self.kernel.dispatcher)
        return u


def numba_elementwise(scalar_fn: Callable, jvp: Callable | Sequence | None = None, *,
                      out_dtype=None) -> NumbaElementwise:
    """An element-wise function from a scalar ``numba.njit`` function ``scalar_fn(x...)``
    (as ``numba.vectorize``, but a tracer primitive: traced, jitted, vmapped and
    differentiated like the built-in element-wise ops).

    The returned ``f(*xs)`` broadcasts its operands as a NumPy ufunc does (rank-0 operands
    are scalars) and applies ``scalar_fn`` to each element. Each operand keeps its own
    dtype (no promotion; a Python scalar has its default dtype, float64 / int64 under
    x64); the result dtype is ``out_dtype`` when given, else the return type Numba infers
    for the operands' dtypes (computed once per dtype combination, at trace time;
    canonicalized: float64 becomes float32 with ``enable_x64`` off).
    Under ``vmap`` the batch axis is one more broadcast axis; under ``jit`` the function
    is called from the generated loops and fuses with neighbouring element-wise ops into
    one kernel (that code compiles in this process, without Numba's disk cache).

    ``jvp``: the partial derivatives, one scalar ``numba.njit`` function per operand,
    ``d_i(x...) -> df/dx_i`` (a single function for a unary ``scalar_fn``; None for an
    operand not differentiated). The tangent is ``sum_i t_i * d_i(x)``, computed in the
    result dtype, so ``jvp``, ``grad``, ``vjp`` and ``linearize`` work; the partials have
    no derivatives of their own (a second derivative raises ValueError). Without ``jvp``
    differentiating raises ValueError.

    Raises TypeError for a ``scalar_fn`` (or a partial) that is not a ``numba.njit``
    function, for float16 operands and for results that are not numbers;
    ``KernelCompileError`` (a TypeError) with Numba's message when Numba cannot type
    ``scalar_fn`` for the operands' dtypes; ValueError for operands that do not broadcast.
    """
    kernel_of(scalar_fn, "numba_elementwise")
    partials = None
    if jvp is not None:
        ds = (jvp,) if callable(jvp) else tuple(jvp)
        partials = tuple(None if d is None else NumbaElementwise(d, None, None)
                         for d in ds)
    return NumbaElementwise(scalar_fn, partials, out_dtype)


def _elementwise_abstract_eval(*avals, fn, out_dtype):
    shape = check_same_shapes_dtypes(f"numba_elementwise {fn.kernel.name}", avals,
                                     same_dtype=False, allow_scalars=True)
    return ShapedArray(shape, out_dtype)


def _elementwise_impl(*args, fn, out_dtype):
    arrays = [np.asarray(a) for a in args]
    u = fn.ufunc([a.dtype for a in arrays], np.dtype(out_dtype))
    with np.errstate(all="ignore"):
        out = np.asarray(u(*arrays))
    return out if out.dtype == out_dtype else out.astype(out_dtype)


def _elementwise_jvp(primals, tangents, *, fn, out_dtype):
    from lax import elementwise as ew
    out = numba_elementwise_p.bind(*primals, fn=fn, out_dtype=out_dtype)
    active = [i for i, t in enumerate(tangents)
              if type(t) is not Zero and get_aval(t).dtype != dtypes.float0]
    if not active or not dtypes.is_inexact(out_dtype):
        return [out], [Zero.from_primal_value(out)]
    if fn.partials is None:
        raise ValueError(f"numba_elementwise: {fn.kernel.name} has no derivative; pass its "
                         "partial derivatives as jvp= to tracer.ffi.numba_elementwise")
    result = None
    for i in active:
        d = fn.partials[i]
        if d is None:
            continue
        partial = ew.convert_element_type(d(*primals), out_dtype)
        t = ew.convert_element_type(tangents[i], out_dtype)
        contrib = ad._match_shape(ew.mul(t, partial), out)
        result = contrib if result is None else ew.add(result, contrib)
    return [out], [Zero.from_primal_value(out) if result is None else result]


numba_elementwise_p = Primitive("numba_elementwise")
numba_elementwise_p.def_abstract_eval(_elementwise_abstract_eval)
numba_elementwise_p.def_impl(_elementwise_impl)
ad.primitive_jvps[numba_elementwise_p] = _elementwise_jvp
batching.defbroadcasting(numba_elementwise_p)
