"""Host callbacks: ``pure_callback``, ``io_callback`` and the debug callbacks behind
``tracer.debug.print`` / ``tracer.debug.callback`` (JAX's jax.pure_callback,
jax.experimental.io_callback, jax.debug.callback and jax.debug.print, as JAX 0.10 has them).

Three primitives, each holding the Python function it calls (``callback``, a param):

- ``pure_callback``: a pure function of its operands. Dead-code elimination may drop it
  when its results are unused, and CSE may merge two equal calls (JAX's contract: it may
  run any number of times, or not at all). Not differentiable (ValueError); wrap it in
  ``custom_jvp``/``custom_vjp``. vmap follows its ``vmap_method``.
- ``io_callback``: effectful (``partial_eval.effectful_primitives``): never removed, never
  merged. Not differentiable; vmap runs it once per batch member, and raises for an
  ordered one (as JAX).
- ``debug_callback``: effectful, no results. Under jvp/grad it sees the primal values;
  under vmap it runs once per batch member.

None has a lowering rule: under jit each runs as a host step, in program order (so an
``ordered=True`` io_callback is ordered). Inside a scan / while / cond body the compiled
loop driver calls it back, once per iteration (numba_backend.host_callbacks): the loop
stays compiled.

The callback gets ``tracer.Array`` operands (JAX passes its Arrays) and runs on a fresh
trace stack, so tracer operations inside it are eager. Its results are checked against
the declared shapes and dtypes (RuntimeError naming the callback, as JAX's check). An
exception raised by the callback propagates as it is, with its traceback, eagerly and
under jit (JAX re-raises it as an XlaRuntimeError holding the traceback's text).
"""
from __future__ import annotations

import string
import sys
from typing import Any, Callable

import numpy as np

from tracer import dtypes
from tracer.core import Array, Primitive, ShapedArray, Token, new_base_main, valid_jaxtype
from tracer.interpreters import ad, batching
from tracer.interpreters import partial_eval as pe
from tracer.interpreters.ad import Zero
from tracer.pytree import tree_flatten, tree_leaves, tree_unflatten

_VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
                 "legacy_vectorized", None)


def _callback_name(fn) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    return name if isinstance(name, str) else repr(fn)


class _FlatCallback:
    """The user's callback as a function of the flat operands, returning flat results.
    Equal (and of equal hash) for the same function and argument structure, so that equal
    pure calls are one in CSE and in the trace caches, as JAX's _FlatCallback."""

    __slots__ = ("callback_func", "in_tree", "static_args", "_positional")

    def __init__(self, callback_func, in_tree, static_args=()):
        self.callback_func = callback_func
        self.in_tree = in_tree
        # (position, value) of leaves that are not arrays (debug callbacks pass them on)
        self.static_args = tuple(static_args)
        # the common case, called without rebuilding the tree: array operands passed
        # positionally, no keywords, nothing static
        n = in_tree.num_leaves
        self._positional = not self.static_args and \
            in_tree == tree_flatten(((None,) * n, {}), is_leaf=lambda x: x is None)[1]

    def __call__(self, *flat_args):
        if self._positional:
            out = self.callback_func(*flat_args)
        else:
            leaves = list(flat_args)
            for i, v in self.static_args:
                leaves.insert(i, v)
            args, kwargs = tree_unflatten(self.in_tree, leaves)
            out = self.callback_func(*args, **kwargs)
        if out is None:
            return []
        if type(out) is np.ndarray or type(out) is Array:
            return [out]
        return tree_leaves(out)

    def _key(self):
        return (self.callback_func, self.in_tree, self.static_args)

    def __eq__(self, other):
        return type(other) is _FlatCallback and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    @property
    def __name__(self):   # what the jaxpr printer shows for the param
        return _callback_name(self.callback_func)

    def __repr__(self):
        return f"<callback {_callback_name(self.callback_func)}>"


def _result_avals(fname, result_shape_dtypes):
    leaves, out_tree = tree_flatten(result_shape_dtypes)
    avals = []
    for leaf in leaves:
        shape, dt = getattr(leaf, "shape", None), getattr(leaf, "dtype", None)
        if shape is None or dt is None:
            raise TypeError(f"{fname}: result_shape_dtypes must be a pytree of objects with "
                            f".shape and .dtype (tracer.ShapeDtypeStruct, arrays), got "
                            f"{leaf!r} of type {type(leaf).__name__}")
        dt = np.dtype(dt)
        if dtypes.canonicalize_dtype(dt) != dt:
            raise ValueError("result_shape_dtypes cannot specify 64-bit types when "
                             "`enable_x64` is disabled")
        avals.append(ShapedArray(tuple(int(d) for d in shape), dt))
    return tuple(avals), out_tree


def _call(kind, callback, args, result_avals):
    """Run the callback on NumPy operands (the impls' inputs); its results as NumPy
    arrays of the declared shapes and dtypes."""
    with new_base_main():   # tracer operations inside the callback run eagerly
        outs = callback(*[a if isinstance(a, Token) else Array(np.asarray(a)) for a in args])
    if result_avals is None:
        return []
    name = _callback_name(callback.callback_func)
    if len(outs) != len(result_avals):
        raise RuntimeError(
            f"{kind}: the callback {name} returned {len(outs)} arrays, expected "
            f"{len(result_avals)} (result_shape_dtypes: "
            f"{', '.join(a.str_short() for a in result_avals) or 'none'})")
    res = []
    for i, (o, aval) in enumerate(zip(outs, result_avals)):
        v = np.asarray(o)
        try:
            dt = dtypes.canonicalize_dtype(v.dtype)
        except TypeError:
            dt = v.dtype
        if dt != v.dtype:
            v = v.astype(dt)
        if v.shape != aval.shape or v.dtype != aval.dtype:
            raise RuntimeError(
                f"{kind}: the callback {name} returned result #{i} with shape {v.shape} "
                f"and dtype {v.dtype.name}; result_shape_dtypes expects shape "
                f"{aval.shape} and dtype {aval.dtype.name}")
        res.append(v)
    return res


def _batched(aval, size):
    return ShapedArray((size,) + tuple(aval.shape), aval.dtype)


def _sequential(prim, axis_data, vals, dims, params, unroll=False):
    """One call per batch member: a scan over the batched operands (JAX's lax.map), or a
    Python loop of calls when unrolled. Results are batched along axis 0."""
    from lax import control_flow, shapes
    size = axis_data.size
    vals = [v if d is None else batching.moveaxis(v, d, 0) for v, d in zip(vals, dims)]
    batched = [d is not None for d in dims]

    def call(members):
        it = iter(members)
        return prim.bind(*[next(it) if b else v for v, b in zip(vals, batched)], **params)

    members = [v for v, b in zip(vals, batched) if b]
    if unroll:
        outs = [call([shapes.index_in_dim(m, i, 0, keepdims=False) for m in members])
                for i in range(size)]
        n = len(params.get("result_avals") or ())
        results = [shapes.concatenate([shapes.expand_dims(o[k], (0,)) for o in outs], 0)
                   for k in range(n)]
    else:
        _, results = control_flow.scan(lambda c, xs: (c, call(xs)), (), members)
    return list(results), [0] * len(results)


# ======================================= pure_callback =====================================

def pure_callback(callback: Callable[..., Any], result_shape_dtypes: Any, *args: Any,
                  sharding=None, vmap_method: str | None = None, **kwargs: Any):
    """Call the Python function ``callback(*args, **kwargs)`` from traced or jitted code
    (jax.pure_callback, as JAX 0.10 defines it).

    ``callback`` must be pure: its results depend on its operands only. It receives the
    array leaves of ``args``/``kwargs`` as ``tracer.Array`` values (their shapes and
    dtypes) and returns a pytree of arrays matching ``result_shape_dtypes``: a pytree of
    objects with ``.shape`` and ``.dtype`` (``tracer.ShapeDtypeStruct``, NumPy arrays).
    Returns that pytree as Arrays of those shapes and dtypes.

    Being pure, it may run any number of times or not at all: under jit an unused result
    drops the call and two equal calls may become one. Under vmap, ``vmap_method`` says
    how the callback sees the batch:

    - ``"sequential"``: once per batch member (a scan over the members);
      ``"sequential_unrolled"``: the same as a Python loop;
    - ``"expand_dims"``: once, batched operands with the batch axis first, unbatched ones
      with a new leading axis of size 1; the callback returns results with the batch axis
      first;
    - ``"broadcast_all"``: as ``"expand_dims"``, unbatched operands broadcast to the batch
      size;
    - ``"legacy_vectorized"``: once, batched operands with the batch axis first, unbatched
      ones unchanged;
    - ``None``: vmap raises NotImplementedError (as JAX 0.10).

    Raises ValueError for an unknown ``vmap_method``, when differentiated (use
    ``tracer.custom_jvp``/``custom_vjp`` around it) and for 64-bit result dtypes with
    ``enable_x64`` off; TypeError for result_shape_dtypes leaves without shape/dtype;
    RuntimeError, naming the callback and the shapes and dtypes expected and got, when the
    callback's results do not match ``result_shape_dtypes``. An exception the callback
    raises propagates unchanged (with its traceback), eagerly and under jit.
    ``sharding`` is accepted and ignored (one device)."""
    del sharding
    if vmap_method not in _VMAP_METHODS:
        raise ValueError(f"pure_callback: vmap_method must be one of {list(_VMAP_METHODS)}, "
                         f"got {vmap_method!r}")
    if not callable(callback):
        raise TypeError(f"pure_callback: callback must be callable, got "
                        f"{type(callback).__name__}")
    result_avals, out_tree = _result_avals("pure_callback", result_shape_dtypes)
    flat_args, in_tree = tree_flatten((args, kwargs))
    outs = pure_callback_p.bind(*flat_args, callback=_FlatCallback(callback, in_tree),
                                result_avals=result_avals, vmap_method=vmap_method)
    return tree_unflatten(out_tree, outs)


def _pure_callback_impl(*args, callback, result_avals, vmap_method):
    return _call("pure_callback", callback, args, result_avals)


def _callback_abstract_eval(*avals, result_avals, **_):
    return list(result_avals)


def _pure_callback_jvp(primals, tangents, **params):
    if any(type(t) is not Zero for t in tangents):
        raise ValueError("Pure callbacks do not support JVP. Please use `tracer.custom_jvp` "
                         "to use callbacks while taking gradients.")
    outs = pure_callback_p.bind(*primals, **params)
    return outs, [Zero.from_primal_value(o) for o in outs]


def _pure_callback_batch(axis_data, vals, dims, *, callback, result_avals, vmap_method):
    params = dict(callback=callback, result_avals=result_avals, vmap_method=vmap_method)
    if vmap_method in ("sequential", "sequential_unrolled"):
        return _sequential(pure_callback_p, axis_data, vals, dims, params,
                           unroll=vmap_method == "sequential_unrolled")
    if vmap_method not in ("expand_dims", "broadcast_all", "legacy_vectorized"):
        raise NotImplementedError(
            "vmap is only supported for the pure_callback primitive when vmap_method is "
            "one of 'sequential', 'sequential_unrolled', 'expand_dims', 'broadcast_all', "
            f"or 'legacy_vectorized'. Got vmap_method={vmap_method!r}.")
    from lax import shapes
    size = axis_data.size
    vals = [v if d is None else batching.moveaxis(v, d, 0) for v, d in zip(vals, dims)]
    if vmap_method != "legacy_vectorized":
        n = size if vmap_method == "broadcast_all" else 1
        vals = [shapes.broadcast(v, (n,)) if d is None else v for v, d in zip(vals, dims)]
    params["result_avals"] = tuple(_batched(a, size) for a in result_avals)
    outs = pure_callback_p.bind(*vals, **params)
    return outs, [0] * len(outs)


pure_callback_p = Primitive("pure_callback")
pure_callback_p.multiple_results = True
pure_callback_p.def_abstract_eval(_callback_abstract_eval)
pure_callback_p.def_impl(_pure_callback_impl)
ad.primitive_jvps[pure_callback_p] = _pure_callback_jvp
batching.primitive_batchers[pure_callback_p] = _pure_callback_batch


# ======================================== io_callback ======================================

def io_callback(callback: Callable[..., Any], result_shape_dtypes: Any, *args: Any,
                sharding=None, ordered: bool = False, **kwargs: Any):
    """Call the impure Python function ``callback(*args, **kwargs)`` from traced or jitted
    code (jax.experimental.io_callback, as JAX 0.10 defines it).

    Operands and results as in ``pure_callback`` (``result_shape_dtypes`` may be None for
    a callback returning nothing). It is an effect: under jit it runs on every call, even
    when its results are unused, and two equal calls both run. With ``ordered=True``
    calls run in program order (under jit every callback runs in program order; the flag
    is what JAX guarantees). Under vmap an unordered callback runs once per batch member;
    an ordered one raises ValueError (as JAX). Raises ValueError when differentiated, and
    the errors of ``pure_callback`` for results that do not match. ``sharding`` is
    accepted and ignored."""
    del sharding
    if not callable(callback):
        raise TypeError(f"io_callback: callback must be callable, got "
                        f"{type(callback).__name__}")
    result_avals, out_tree = _result_avals("io_callback", result_shape_dtypes)
    flat_args, in_tree = tree_flatten((args, kwargs))
    outs = io_callback_p.bind(*flat_args, callback=_FlatCallback(callback, in_tree),
                              result_avals=result_avals, ordered=bool(ordered))
    return tree_unflatten(out_tree, outs)


def _io_callback_impl(*args, callback, result_avals, ordered):
    return _call("io_callback", callback, args, result_avals)


def _io_callback_jvp(primals, tangents, **params):
    if any(type(t) is not Zero for t in tangents):
        raise ValueError("IO callbacks do not support JVP.")
    outs = io_callback_p.bind(*primals, **params)
    return outs, [Zero.from_primal_value(o) for o in outs]


def _io_callback_batch(axis_data, vals, dims, *, callback, result_avals, ordered):
    if ordered:
        raise ValueError("Cannot `vmap` ordered IO callback.")
    return _sequential(io_callback_p, axis_data, vals, dims,
                       dict(callback=callback, result_avals=result_avals, ordered=False))


io_callback_p = Primitive("io_callback")
io_callback_p.multiple_results = True
io_callback_p.def_abstract_eval(_callback_abstract_eval)
io_callback_p.def_impl(_io_callback_impl)
ad.primitive_jvps[io_callback_p] = _io_callback_jvp
batching.primitive_batchers[io_callback_p] = _io_callback_batch
pe.effectful_primitives.add(io_callback_p)


# ====================================== debug callbacks ====================================

def _split_static(args, kwargs):
    """The flat array operands, their tree, and the (position, value) of the other leaves
    (strings, objects), which the callback gets as they are (JAX's _split_callback_args)."""
    flat, in_tree = tree_flatten((args, kwargs))
    dyn, static = [], []
    for i, leaf in enumerate(flat):
        if valid_jaxtype(leaf):
            dyn.append(leaf)
        else:
            static.append((i, leaf))
    return dyn, in_tree, static


def debug_callback(callback: Callable[..., None] | None = None, *args: Any,
                   ordered: bool = False, partitioned: bool = False, **kwargs: Any):
    """Call ``callback(*args, **kwargs)`` for its side effects with the run-time values of
    ``args`` (jax.debug.callback, as JAX 0.10 defines it). Returns None.

    Array leaves of ``args``/``kwargs`` reach the callback as ``tracer.Array`` values;
    other leaves (strings, objects) as they are. Eagerly it runs at once; under jit on
    every call (never at trace time, never removed); under jvp/grad with the primal
    values, once per evaluation; under vmap once per batch member (once in all when no
    operand is batched). Its return value is ignored. Two-call form:
    ``debug_callback(ordered=True)(callback, *args)``. ``partitioned`` is accepted and
    ignored (one device). TypeError if ``callback`` is not callable."""
    def _debug_callback(callback, *c_args, **c_kwargs):
        if not callable(callback):
            raise TypeError("first argument to tracer.debug.callback must be callable, "
                            f"but got an object of type {type(callback)}")
        dyn, in_tree, static = _split_static(c_args, c_kwargs)
        debug_callback_p.bind(*dyn, callback=_FlatCallback(callback, in_tree, static),
                              ordered=bool(ordered))

    if callback is not None:
        _debug_callback(callback, *args, **kwargs)
        return None
    if args or kwargs:
        raise TypeError("debug_callback received unexpected arguments in the two-call form: "
                        f"args={args} kwargs={kwargs}")
    return _debug_callback


class _PrintFormatChecker(string.Formatter):
    """Checks the format string against the arguments at trace time (JAX's check): an
    argument the format does not use is an error."""

    def format_field(self, value, format_spec):
        return ""

    def check_unused_args(self, used_args, args, kwargs):
        unused = [a for i, a in enumerate(args) if i not in used_args]
        unused_kw = [k for k in kwargs if k not in used_args]
        if unused:
            raise ValueError(f"Unused positional arguments to `tracer.debug.print`: {unused}")
        if unused_kw:
            raise ValueError(
                f"Unused keyword arguments to `tracer.debug.print`: {unused_kw}. You may be "
                "passing an f-string (i.e, `f\"{x}\"`) into `tracer.debug.print` and "
                "instead should pass in a regular string.")


_format_checker = _PrintFormatChecker()


class _Printer:
    """The callback of one ``debug.print``: formats with the run-time values and writes a
    line to sys.stdout (with NumPy's print options of the call's trace, as JAX)."""

    __slots__ = ("fmt", "has_placeholders", "np_printoptions")

    def __init__(self, fmt, has_placeholders, np_printoptions):
        self.fmt = fmt
        self.has_placeholders = has_placeholders
        self.np_printoptions = np_printoptions

    def __call__(self, *args, **kwargs):
        if self.has_placeholders:
            with np.printoptions(**dict(self.np_printoptions)):
                msg = self.fmt.format(*args, **kwargs)
        else:
            msg = " ".join((self.fmt, *(str(a) for a in args)))
        sys.stdout.write(msg + "\n")

    def _key(self):
        return (self.fmt, self.has_placeholders, self.np_printoptions)

    def __repr__(self):
        return f"debug.print({self.fmt!r})"

    def __eq__(self, other):
        return type(other) is _Printer and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())


def debug_print(fmt: str | None = None, *args, ordered: bool = False,
                partitioned: bool = False, skip_format_check: bool = False, **kwargs):
    """Print ``fmt.format(*args, **kwargs)`` with the run-time values of the arguments
    (jax.debug.print, as JAX 0.10 defines it): one line on sys.stdout per evaluation.

    Eagerly it prints at once; under jit on every call (never at trace time); under
    jvp/grad the primal values; under vmap one line per batch member (one in all when no
    argument is batched). Array arguments format as ``tracer.Array`` values (``{}`` is
    their ``str``; format specs such as ``{:.3f}`` apply to 0-d ones), with NumPy's print
    options of the call. A format without placeholders prints the format alone. Not an
    f-string: formatting is delayed to run time. Raises ValueError for arguments the
    format does not use and IndexError/KeyError for placeholders without an argument
    (``skip_format_check`` skips that check). Two-call form:
    ``debug_print(ordered=True)("x={x}", x=x)``; ``partitioned`` is accepted and ignored."""
    def _debug_print(fmt: str, *c_args, **c_kwargs):
        if not skip_format_check:
            _format_checker.format(fmt, *c_args, **c_kwargs)
        has_placeholders = False
        if fmt:
            _, field_name, *_ = next(iter(string.Formatter().parse(fmt)))
            has_placeholders = field_name is not None
        printer = _Printer(fmt, has_placeholders, tuple(np.get_printoptions().items()))
        dyn, in_tree, static = _split_static(c_args, c_kwargs)
        debug_callback_p.bind(*dyn, callback=_FlatCallback(printer, in_tree, static),
                              ordered=bool(ordered))

    if fmt is not None:
        _debug_print(fmt, *args, **kwargs)
        return None
    if args or kwargs:
        raise TypeError("debug_print received unexpected arguments in the two-call form: "
                        f"args={args} kwargs={kwargs}")
    return _debug_print


def _debug_callback_impl(*args, callback, ordered):
    _call("debug_callback", callback, args, None)
    return []


def _debug_callback_jvp(primals, tangents, **params):
    # The callback sees the primal values; it has no results, so no tangents.
    debug_callback_p.bind(*primals, **params)
    return [], []


def _debug_callback_batch(axis_data, vals, dims, **params):
    """One call per batch member, in order (JAX unrolls the same way)."""
    from lax import shapes
    for i in range(axis_data.size):
        debug_callback_p.bind(*[v if d is None else
                                shapes.index_in_dim(v, i, d, keepdims=False)
                                for v, d in zip(vals, dims)], **params)
    return [], []


debug_callback_p = Primitive("debug_callback")
debug_callback_p.multiple_results = True
debug_callback_p.def_abstract_eval(lambda *avals, **_: [])
debug_callback_p.def_impl(_debug_callback_impl)
ad.primitive_jvps[debug_callback_p] = _debug_callback_jvp
batching.primitive_batchers[debug_callback_p] = _debug_callback_batch
pe.effectful_primitives.add(debug_callback_p)
