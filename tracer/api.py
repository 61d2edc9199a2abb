"""The public transformations: make_jaxpr, eval_shape, jvp, linearize, vjp, grad,
value_and_grad, jacfwd, jacrev, hessian, vmap, jit. Names, signatures and semantics follow
JAX's (``jax.grad`` etc.); every function works on pytrees of arrays."""
from __future__ import annotations

import collections
import functools
import inspect
import operator
import time
import logging
from typing import Any, Callable, Sequence

import numpy as np

from tracer import dtypes
from tracer.config import config
from tracer import core
from tracer import pytree
from tracer.core import (Array, ShapeDtypeStruct, ShapedArray, Tracer, get_aval, to_numpy,
                         valid_jaxtype)
from tracer.interpreters import ad, batching
from tracer.interpreters import partial_eval as pe
from tracer.interpreters.call import jit_p
from tracer.jaxpr import ClosedJaxpr, eval_jaxpr
from tracer.pytree import (broadcast_prefix, flatten_fun, keystr, tree_flatten,
                           tree_flatten_with_path,
                           tree_map, tree_structure, tree_unflatten, treedef_is_leaf)

logger = logging.getLogger("tracer")


def _fun_name(f) -> str:
    return getattr(f, "__name__", None) or type(f).__name__


def _check_callable(fun, who):
    if not callable(fun):
        raise TypeError(f"{who}: expected a callable value, got {fun!r:.100} of type "
                        f"{type(fun).__name__}")


def _check_arg(x, fname, path=""):
    if isinstance(x, (Tracer, Array)):
        return x
    # (vmap's paths say "argument x" themselves)
    where = path if path.startswith("argument") else f"argument{' ' + path if path else ''}"
    if isinstance(x, (np.ndarray, np.generic)):
        if not dtypes.is_supported(x.dtype):
            raise dtypes.unsupported_array(fname, where, x)
        return x
    if isinstance(x, (bool, int, float, complex)):
        return x
    if not valid_jaxtype(x):
        raise TypeError(f"{fname}: {where} of type "
                        f"{type(x).__name__} is not a valid array type (expected an Array, a "
                        "NumPy array or a Python scalar); mark it static if it is not data")
    return x


def _as_array(x):
    """Arguments enter transformations as Arrays (NumPy data is snapshotted, so later
    mutation by the caller does not change traced results)."""
    if isinstance(x, (Tracer, Array)):
        return x
    if type(x) in (bool, int, float, complex):     # (NumPy scalars: canonicalized below)
        dt, weak = dtypes.dtype_and_weak_type(x)
        return Array(np.asarray(x, dt), weak)
    return Array(np.array(to_numpy(x), copy=True))


_jit_backend = None     # tracer._jit_backend, once jit has run a program

# argument types that are pytree leaves with an aval of their own (jit's fast path)
_PLAIN_LEAVES = frozenset({np.ndarray, Array})
# leaves a jit call's structure check accepts as they are (valid data, never nodes)
_MATCHED_LEAVES = frozenset({np.ndarray, Array, float, int, bool, complex})


def _flatten_args(fname, args, kwargs=None, positions=None):
    """(leaves, treedef) of ``(tuple(args), kwargs)``, each leaf checked to be data.
    ``positions``: the caller's position of each of ``args`` (static ones left out), for
    the error message."""
    tree = (tuple(args), kwargs or {})
    # Paths are only needed for the error message: flatten without them first (this is
    # on every jit call's path).
    leaves, treedef = tree_flatten(tree)
    for x in leaves:
        if type(x) not in _PLAIN_LEAVES and not isinstance(
                x, (Tracer, Array, np.ndarray, np.generic, bool, int, float, complex)) or \
                isinstance(x, (np.ndarray, np.generic)) and not dtypes.is_supported(x.dtype):
            pairs, treedef = tree_flatten_with_path(tree)
            return [_check_arg(x, fname, _arg_path(path, positions))
                    for path, x in pairs], treedef
    return leaves, treedef


def _arg_path(path, positions=None) -> str:
    """A leaf's key path in ``(args, kwargs)`` as the caller wrote it: ``1``, ``0['w']``,
    ``'x'[2]``."""
    head, rest = path[1], keystr(path[2:])
    if path[0].idx == 0:
        i = head.idx
        return f"{positions[i] if positions else i}{rest}"
    return f"{head.key!r}{rest}"


# ------------------------------------- make_jaxpr ----------------------------------------

def _split_static(args, static_argnums, who="make_jaxpr"):
    static_argnums = _normalize_argnums(static_argnums, len(args), who)
    dyn = [a for i, a in enumerate(args) if i not in static_argnums]
    static = tuple((i, args[i]) for i in sorted(static_argnums))
    return dyn, static


def _normalize_argnums(argnums, nargs, who="jit"):
    if argnums is None:
        return ()
    if isinstance(argnums, int):
        argnums = (argnums,)
    out = []
    for a in argnums:
        a = operator.index(a)
        if not -nargs <= a < nargs:
            raise ValueError(f"{who}: static_argnums entry {a} is out of range for a call "
                             f"with {nargs} positional argument{'s' if nargs != 1 else ''}")
        out.append(a % nargs)
    return tuple(out)


def _merge_static(dyn, static, nargs):
    it = iter(dyn)
    smap = dict(static)
    return [smap[i] if i in smap else next(it) for i in range(nargs)]


def make_jaxpr(fun: Callable, static_argnums=(), return_shape: bool = False):
    """The jaxpr of ``fun`` (``jax.make_jaxpr``), without running it.

    Args:
      fun: the function to trace; it takes arrays, scalars or pytrees of them.
      static_argnums: an int or ints: positional arguments passed through as Python values
        (not traced); they may be any Python objects.
      return_shape: also return the output's ``ShapeDtypeStruct`` pytree.

    Returns:
      A function with ``fun``'s signature: ``make_jaxpr(f)(*args, **kwargs)`` traces
      ``fun`` at the shapes and dtypes of ``args`` (arrays, Python scalars, NumPy values or
      ``ShapeDtypeStruct``s) and returns the ``ClosedJaxpr`` (printable in JAX's text
      format), or ``(jaxpr, shapes)`` with ``return_shape``.

    Raises:
      TypeError: ``fun`` not callable, or an argument that is not an array type (mark it
        static).
      ValueError: a ``static_argnums`` entry out of range for the call.
      ConcretizationTypeError & co.: Python control flow on traced values inside ``fun``.
    """
    _check_callable(fun, "make_jaxpr")

    @functools.wraps(fun)
    def make(*args, **kwargs):
        nargs = len(args)
        dyn, static = _split_static(args, static_argnums, f"make_jaxpr({_fun_name(fun)})")
        leaves, in_tree = _flatten_args("make_jaxpr", dyn, kwargs,
                                        [i for i in range(nargs)
                                         if i not in {j for j, _ in static}])
        in_avals = [get_aval(x) for x in leaves]

        flat_fun, out = flatten_fun(
            lambda *d, **kw: fun(*_merge_static(list(d), static, nargs), **kw), in_tree,
            kwargs=True)
        closed = pe.trace_to_closed_jaxpr(flat_fun, in_avals)
        if return_shape:
            shapes = [ShapeDtypeStruct(a.shape, a.dtype, a.weak_type) for a in closed.out_avals]
            return closed, tree_unflatten(out.tree, shapes)
        return closed

    return make


def eval_shape(fun: Callable, *args, **kwargs):
    """The output shapes and dtypes of ``fun(*args, **kwargs)`` (``jax.eval_shape``), found
    by tracing: no array computation runs.

    Args:
      fun: the function; ``args``/``kwargs`` are arrays, scalars, ``ShapeDtypeStruct``s or
        pytrees of them.

    Returns:
      The output pytree with a ``ShapeDtypeStruct`` (shape, dtype, weak_type) per leaf.

    Raises:
      TypeError: ``fun`` not callable or a non-array argument; errors of tracing ``fun``.
    """
    _check_callable(fun, "eval_shape")
    closed, shape = make_jaxpr(fun, return_shape=True)(*args, **kwargs)
    return shape


# ---------------------------------------- jvp --------------------------------------------

def _check_tangent(p, t, fname, i):
    pa, ta = get_aval(p), get_aval(t)
    if ta.shape != pa.shape:
        raise ValueError(f"{fname}: primal and tangent arguments must have equal shapes; "
                         f"argument {i} has primal {pa.str_short()} and tangent "
                         f"{ta.str_short()}")
    if dtypes.is_inexact(pa.dtype) and ta.dtype != pa.dtype:
        raise TypeError(f"{fname}: primal and tangent arguments must have equal dtypes; "
                        f"argument {i} has primal {pa.str_short()} and tangent "
                        f"{ta.str_short()} (expected dtype {pa.dtype.name})")
    if not dtypes.is_inexact(pa.dtype) and ta.dtype != dtypes.float0:
        raise TypeError(f"{fname}: the tangent of the integer/bool primal {i} "
                        f"({pa.str_short()}) must have dtype float0 (e.g. "
                        f"np.zeros(shape, tracer.dtypes.float0)), got {ta.str_short()}")


def _tangent_in(p, t):
    """The tangent a transformation starts from: symbolic zeros for integer primals."""
    if not dtypes.is_inexact(get_aval(p).dtype):
        return ad.Zero.from_primal_value(p)
    return _as_array(t)


def jvp(fun: Callable, primals, tangents, has_aux: bool = False):
    """Forward-mode derivative (``jax.jvp``): ``fun``'s value and its directional
    derivative, ``(fun(*primals), J(primals) @ tangents)``.

    Args:
      fun: a function of positional arguments returning a pytree of arrays.
      primals: a tuple (or list) of the positional arguments, pytrees of arrays.
      tangents: a tuple (or list) with the structure, shapes and dtypes of ``primals``;
        integer and bool primals take float0 tangents (``np.zeros(shape,
        tracer.dtypes.float0)``).
      has_aux: ``fun`` returns ``(output, aux)``; aux is returned undifferentiated.

    Returns:
      ``(primals_out, tangents_out)`` with ``fun``'s output structure (float0 tangents for
      integer outputs), or ``(primals_out, tangents_out, aux)`` with ``has_aux``.

    Raises:
      TypeError: ``fun`` not callable; ``primals``/``tangents`` not tuples or lists, of
        different structures or dtypes, or a non-float0 tangent for an integer primal;
        ``has_aux`` with an output that is not a pair.
      ValueError: a tangent whose shape differs from its primal's.
    """
    _check_callable(fun, "jvp")
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("jvp: primal and tangent arguments must be tuples or lists of "
                        f"positional arguments; found {type(primals).__name__} and "
                        f"{type(tangents).__name__}")
    p_leaves, p_tree = tree_flatten(tuple(primals))
    t_leaves, t_tree = tree_flatten(tuple(tangents))
    if p_tree != t_tree:
        raise TypeError(f"jvp: primal and tangent arguments must have the same tree "
                        f"structure; got {p_tree} and {t_tree}")
    p_leaves = [_as_array(_check_arg(x, "jvp")) for x in p_leaves]
    for i, (p, t) in enumerate(zip(p_leaves, t_leaves)):
        _check_arg(t, "jvp", f"(tangent {i})")
        _check_tangent(p, t, "jvp", i)
    tans = [_tangent_in(p, t) for p, t in zip(p_leaves, t_leaves)]
    flat_fun, out = flatten_fun(fun, p_tree, has_aux=has_aux, fname="jvp")
    outs, t_outs = ad.jvp_flat(flat_fun, p_leaves, tans, instantiate=True)
    out_tree = out.tree
    res = (tree_unflatten(out_tree, outs), tree_unflatten(out_tree, t_outs))
    if has_aux:
        return res + (_lower_aux(out.aux),)
    return res


def _lower_aux(aux):
    return tree_map(ad.lower_escaped, aux)


# -------------------------------------- linearize ----------------------------------------

def linearize(fun: Callable, *primals, has_aux: bool = False):
    """Linearize ``fun`` at ``primals`` (``jax.linearize``): the value now, and a function
    evaluating the jvp at those primals for any tangents.

    Args:
      fun: a function of positional arguments returning a pytree of arrays.
      *primals: its arguments (pytrees of arrays).
      has_aux: ``fun`` returns ``(output, aux)``.

    Returns:
      ``(fun(*primals), f_jvp)`` (plus ``aux`` with ``has_aux``). The primal computation
      runs once, now; ``f_jvp(*tangents)`` replays only the linear tangent program (a
      jaxpr built by partial evaluation of the jvp), with tangents matching the primals'
      structure, shapes and dtypes (float0 for integer primals).

    Raises:
      TypeError: ``fun`` not callable or a non-array primal; from ``f_jvp``: tangents of
        another structure or dtype. ValueError: a tangent of another shape.
    """
    _check_callable(fun, "linearize")
    p_leaves, p_tree = tree_flatten(tuple(primals))
    p_leaves = [_as_array(_check_arg(x, "linearize")) for x in p_leaves]
    flat_fun, out = flatten_fun(fun, p_tree, has_aux=has_aux, fname="linearize")
    outs, lin = ad._linearize(flat_fun, p_leaves)
    out_tree = out.tree

    def f_jvp(*tangents):
        t_leaves, t_tree = tree_flatten(tuple(tangents))
        if t_tree != p_tree:
            raise TypeError(f"linearize: the tangents must have the structure of the primals, "
                            f"{p_tree}; got {t_tree}")
        for i, (p, t) in enumerate(zip(p_leaves, t_leaves)):
            _check_arg(t, "linearize", f"(tangent {i})")
            _check_tangent(p, t, "linearize", i)
        return tree_unflatten(out_tree, lin(*t_leaves))

    res = (tree_unflatten(out_tree, outs), f_jvp)
    return res + (_lower_aux(out.aux),) if has_aux else res


# ----------------------------------------- vjp -------------------------------------------

def vjp(fun: Callable, *primals, has_aux: bool = False):
    """Reverse mode (``jax.vjp``): ``fun``'s value and its vector-Jacobian product
    function.

    Args:
      fun: a function of positional arguments returning a pytree of arrays.
      *primals: its arguments (pytrees of arrays).
      has_aux: ``fun`` returns ``(output, aux)``.

    Returns:
      ``(fun(*primals), f_vjp)`` (plus ``aux`` with ``has_aux``). ``f_vjp(ct)`` takes a
      cotangent with the output's structure, shapes and dtypes and returns a tuple with
      one cotangent per primal (float0 for integer primals; integer outputs take float0,
      or any, ignored, cotangents). The forward pass runs once; ``f_vjp`` may be called
      many times. Complex values follow JAX's convention: ``f_vjp`` transposes the
      (R-linear) jvp without conjugation, so ``grad`` of a real function of complex inputs
      is ``df/dx - i df/dy``.

    Raises:
      TypeError: ``fun`` not callable, a non-array primal, ``has_aux`` with an output that
        is not a pair; from ``f_vjp``: a cotangent of another structure or dtype.
      ValueError: from ``f_vjp``, a cotangent of another shape.
    """
    _check_callable(fun, "vjp")
    p_leaves, p_tree = tree_flatten(tuple(primals))
    p_leaves = [_as_array(_check_arg(x, "vjp")) for x in p_leaves]
    flat_fun, out = flatten_fun(fun, p_tree, has_aux=has_aux, fname="vjp")
    outs, lin = ad._linearize(flat_fun, p_leaves)
    out_tree = out.tree
    out_avals = [get_aval(o) for o in outs]

    def f_vjp(ct):
        ct_leaves, ct_tree = tree_flatten(ct)
        if ct_tree != out_tree:
            raise TypeError(f"vjp: the cotangent passed to the VJP function must have the "
                            f"structure of the differentiated function's output, "
                            f"{out_tree}; got {ct_tree}")
        cts = []
        for i, (c, a) in enumerate(zip(ct_leaves, out_avals)):
            _check_arg(c, "vjp", f"(cotangent {i})")
            ca = get_aval(c)
            if ca.shape != a.shape:
                raise ValueError(f"vjp: cotangent {i} has type {ca.str_short()}, but the "
                                 f"corresponding output of the differentiated function has "
                                 f"type {a.str_short()} (expected shape {a.shape})")
            if not dtypes.is_inexact(a.dtype) or ca.dtype == dtypes.float0:
                cts.append(ad.Zero(a.at_least_vspace()))
                continue
            if ca.dtype != a.dtype:
                raise TypeError(f"vjp: cotangent {i} has type {ca.str_short()}, but the "
                                f"corresponding output of the differentiated function has "
                                f"type {a.str_short()} (expected dtype {a.dtype.name})")
            cts.append(_as_array(c))
        cts_in = lin.transpose(cts)
        return tree_unflatten(p_tree, cts_in)

    res = (tree_unflatten(out_tree, outs), f_vjp)
    return res + (_lower_aux(out.aux),) if has_aux else res


# ------------------------------------- grad family ---------------------------------------

def _diff_argnums(argnums, nargs, fname, who):
    """``argnums`` (int or sequence of ints, negative counting from the end) as a tuple of
    non-negative positions; TypeError naming what was expected and what came."""
    single = isinstance(argnums, (int, np.integer)) and not isinstance(argnums, bool)
    if single:
        nums = (argnums,)
    elif isinstance(argnums, (tuple, list)) and all(
            isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in argnums):
        nums = tuple(argnums)
        if not nums:
            raise TypeError(f"{who} of {fname}: argnums is empty; give at least one argument "
                            "position to differentiate with respect to")
    else:
        raise TypeError(f"{who} of {fname}: argnums must be an int or a tuple of ints, got "
                        f"{argnums!r}")
    out = []
    for a in nums:
        a = int(a)
        if not -nargs <= a < nargs:
            # JAX's error types: TypeError from grad for a missing argument, ValueError for
            # an index out of range (negative ones, and any from jacfwd/jacrev/hessian).
            err = TypeError if who == "grad" and a >= 0 else ValueError
            raise err(f"{who} of {fname}: differentiating with respect to argnums={a} "
                      f"requires at least {a + 1 if a >= 0 else -a} positional "
                      f"argument{'s' if (a + 1 if a >= 0 else -a) != 1 else ''} to be passed "
                      f"by the caller, but got only {nargs}")
        out.append(a % nargs)
    return tuple(out), single


def _check_input_dtype_revderiv(who, fname, holomorphic, allow_int, x, where):
    _check_arg(x, f"{who} of {fname}", where)
    dt = get_aval(x).dtype
    if holomorphic:
        if not dtypes.is_complex(dt):
            raise TypeError(f"{who} of {fname} with holomorphic=True requires inputs with "
                            f"complex dtype, but got {dt.name} for argument {where}")
    if not dtypes.is_inexact(dt) and not allow_int:
        raise TypeError(f"{who} of {fname} requires real- or complex-valued inputs (input "
                        f"dtype that is a sub-dtype of np.inexact), but got {dt.name} for "
                        f"argument {where}. If you want to use Boolean- or integer-valued "
                        "inputs, use vjp or set allow_int to True.")


def _check_output_dtype_revderiv(who, fname, holomorphic, aval):
    dt = aval.dtype
    if holomorphic:
        if not dtypes.is_complex(dt):
            raise TypeError(f"{who} of {fname} with holomorphic=True requires outputs with "
                            f"complex dtype, but got {dt.name}")
    elif dtypes.is_complex(dt):
        raise TypeError(f"{who} of {fname} requires real-valued outputs (output dtype that "
                        f"is a sub-dtype of np.floating), but got {dt.name}. For holomorphic "
                        "differentiation, pass holomorphic=True. For differentiation of "
                        "non-holomorphic functions involving complex outputs, use vjp "
                        "directly.")
    elif not dtypes.is_floating(dt):
        raise TypeError(f"{who} of {fname} requires real-valued outputs (output dtype that "
                        f"is a sub-dtype of np.floating), but got {dt.name}. For "
                        "differentiation of functions with integer outputs, use vjp "
                        "directly.")


def value_and_grad(fun: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False,
                   allow_int: bool = False):
    """``fun``'s value and gradient in one pass (``jax.value_and_grad``).

    Args: as ``grad``: ``fun`` (scalar real output), ``argnums``, ``has_aux``,
      ``holomorphic``, ``allow_int``.

    Returns:
      A function with ``fun``'s signature returning ``(value, gradient)``, or
      ``((value, aux), gradient)`` with ``has_aux``; ``gradient`` as for ``grad``.

    Raises: as ``grad``.
    """
    _check_callable(fun, "value_and_grad")
    fname = _fun_name(fun)
    _diff_argnums(argnums, 1 << 30, fname, "grad")  # validate the argnums type early

    @functools.wraps(fun)
    def value_and_grad_f(*args, **kwargs):
        nums, single = _diff_argnums(argnums, len(args), fname, "grad")
        diff_args = [args[i] for i in nums]
        for i, a in zip(nums, diff_args):
            for path, leaf in tree_flatten_with_path(a)[0]:
                _check_input_dtype_revderiv("grad", fname, holomorphic, allow_int, leaf,
                                            f"{i}{keystr(path)}")

        def f_partial(*dargs):
            full = list(args)
            for i, a in zip(nums, dargs):
                full[i] = a
            return fun(*full, **kwargs)

        if has_aux:
            ans, f_vjp, aux = vjp(f_partial, *diff_args, has_aux=True)
        else:
            ans, f_vjp = vjp(f_partial, *diff_args)
        _check_scalar(ans, fname, holomorphic)
        aval = get_aval(ans)
        # The seed keeps the output's weak type, so that gradients of weakly typed
        # (Python scalar) computations stay weakly typed, as in JAX.
        g = f_vjp(Array(np.ones((), aval.dtype), aval.weak_type))
        g = g[0] if single else tuple(g)
        return ((ans, aux), g) if has_aux else (ans, g)

    return value_and_grad_f


def _check_scalar(x, fname, holomorphic):
    if not isinstance(x, (Array, Tracer)) and not np.isscalar(x):
        raise TypeError(f"Gradient only defined for scalar-output functions. Output of "
                        f"{fname} was a {type(x).__name__}: {x!r:.200}")
    aval = get_aval(x)
    if aval.shape != ():
        raise TypeError(f"Gradient only defined for scalar-output functions. Output of "
                        f"{fname} had shape: {aval.shape}. Use jacrev/jacfwd or vjp for "
                        "non-scalar outputs.")
    _check_output_dtype_revderiv("grad", fname, holomorphic, aval)


def grad(fun: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False,
         allow_int: bool = False):
    """The gradient of scalar-valued ``fun`` (``jax.grad``), by reverse mode.

    Args:
      fun: a function whose output is a real floating scalar (complex with
        ``holomorphic=True``); its arguments are arrays or pytrees of arrays.
      argnums: an int or a tuple of ints: the positional arguments to differentiate
        (negative counts from the end).
      has_aux: ``fun`` returns ``(value, aux)``; aux is passed through.
      holomorphic: ``fun`` is holomorphic in complex inputs: inputs and output must be
        complex and the result is ``f'(z)``.
      allow_int: integer/bool inputs allowed (their gradient is float0 zeros).

    Returns:
      A function with ``fun``'s signature returning the gradient: with an int
      ``argnums``, a pytree like that argument; with a tuple, a tuple of them;
      ``(gradient, aux)`` with ``has_aux``. Complex inputs follow JAX's convention: for
      real ``f(z)`` the result is ``df/dx - i df/dy`` (e.g. ``grad(lambda z: abs(z)**2)(z)
      == 2 * conj(z)``).

    Raises:
      TypeError: ``fun`` not callable; ``argnums`` not an int or a tuple of ints (or
        empty), or naming a positional argument the call does not pass (JAX's types: a
        negative one out of range is a ValueError); a non-scalar, integer or (without
        ``holomorphic``) complex output; integer inputs without ``allow_int``; non-array
        arguments; ``has_aux`` with an output that is not a pair.
    """
    _check_callable(fun, "grad")
    vg = value_and_grad(fun, argnums, has_aux, holomorphic, allow_int)

    @functools.wraps(fun)
    def grad_f(*args, **kwargs):
        (v, g) = vg(*args, **kwargs)
        if has_aux:
            return g, v[1]
        return g

    return grad_f


# ----------------------------------------- vmap ------------------------------------------

def _check_axes_spec(spec, what, fname):
    """``spec`` must be an int, None, or a container of those (TypeError otherwise)."""
    def bad(x):
        raise TypeError(f"{fname}: {what} must be an int, None, or a (nested) tuple/list/dict "
                        f"of ints and None matching the {'arguments' if what == 'in_axes' else 'outputs'}"
                        f", got {spec!r} (a leaf {x!r} of type {type(x).__name__})")

    def go(x):
        if x is None:
            return
        if isinstance(x, (bool, np.bool_)):
            bad(x)
        if isinstance(x, (int, np.integer)):
            return
        t, nt = _pytree_node_type(x)
        if nt is None:
            bad(x)
        for c in nt.to_iterable(x)[0]:
            go(c)

    go(spec)


def _pytree_node_type(x):
    from tracer.pytree import _node_type
    return _node_type(x)


def _describe_node(x) -> str:
    t, nt = _pytree_node_type(x)
    if nt is None:
        return f"a leaf of type {type(x).__name__}"
    children, aux = nt.to_iterable(x)
    if isinstance(x, dict):
        return f"a {t.__name__} with keys {sorted(x, key=repr)}"
    if isinstance(x, (tuple, list)):
        return f"a {t.__name__} of length {len(children)}"
    return f"a {t.__name__} with {len(children)} children"


def _broadcast_axes(spec, full, spec_name, full_name, fname, what):
    """The leaves of the axes ``spec`` repeated over the matching subtrees of ``full`` (a
    tree prefix). ValueError naming both paths when ``spec`` is not a prefix of ``full``."""
    out = []

    def go(s, f, spath, fpath):
        if s is None or isinstance(s, (int, np.integer)):
            out.extend([None if s is None else int(s)] * tree_structure(f).num_leaves)
            return
        st, snt = _pytree_node_type(s)
        ft, fnt = _pytree_node_type(f)
        ok = st is ft
        if ok:
            sc, saux = snt.to_iterable(s)
            fc, faux = fnt.to_iterable(f)
            ok = saux == faux and len(sc) == len(fc)
        if not ok:
            raise ValueError(
                f"{fname}: {what} must be a tree prefix of the {full_name.split()[0]}s: "
                f"{spec_name}{keystr(spath)} is {_describe_node(s)}, but "
                f"{full_name}{keystr(fpath)} is {_describe_node(f)}. Give one entry per "
                "element (or one int/None for the whole subtree)")
        from tracer.pytree import _keys_for
        for k, c_s, c_f in zip(_keys_for(f, fnt, faux, len(fc)), sc, fc):
            go(c_s, c_f, spath + (k,), fpath + (k,))

    go(spec, full, (), ())
    return out


def _positional_names(fun):
    """Names for positional arguments in messages: the parameter names when the signature
    is known, with ``*args`` entries as ``args[i]``."""
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        return [], None
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    var = next((p.name for p in params if p.kind is p.VAR_POSITIONAL), None)
    return names, var


def _arg_name(i, names, var):
    if i < len(names):
        return f"argument {names[i]}"
    if var is not None:
        return f"argument {var}[{i - len(names)}]"
    return f"argument args[{i}]"


def _out_name(path, single):
    if single:
        return "the output"
    return f"output{keystr(path)}"


def vmap(fun: Callable, in_axes=0, out_axes=0, axis_name=None, axis_size=None,
         spmd_axis_name=None):
    """Vectorize ``fun`` over a mapped axis of its arguments (``jax.vmap``).

    ``vmap(f)(xs)`` equals stacking ``f(x)`` over the slices ``x`` of ``xs`` along the
    mapped axis, computed by batched primitives (no Python loop): a matmul of a batch of
    vectors becomes one ``dot_general``.

    - ``in_axes``: an int, None, or a tuple/list with one entry per positional argument,
      each entry an int, None, or a pytree prefix of that argument (dicts, nested tuples,
      namedtuples...) with int/None leaves. An int is the mapped axis of each array leaf
      (negative counts from the end); None passes the leaf unchanged to every call.
      Keyword arguments are mapped along axis 0.
    - ``out_axes``: likewise for the output pytree: where the mapped axis goes in each
      output leaf; None for outputs that do not depend on the mapped axis (returned once).
    - ``axis_size``: the mapped size when no argument is mapped (e.g. ``in_axes=None``).
    - ``axis_name``: names the mapped axis for collectives inside ``fun``
      (``lax.psum(x, name)``, ``lax.pmean``, ``lax.pmax``, ``lax.pmin``,
      ``lax.all_gather``, ``lax.axis_index``).
    - ``spmd_axis_name``: accepted for compatibility; there is one device, so it has no
      effect.

    Composes with ``grad``, ``jit``, ``jvp`` and nested ``vmap`` in any order.

    Returns a function with ``fun``'s signature returning ``fun``'s output pytree with the
    mapped axis inserted at ``out_axes`` in each leaf.

    Raises TypeError for a ``fun`` that is not callable, in_axes/out_axes that are not
    ints/None/containers of them, or outputs that are not arrays, and ValueError naming the argument (or output) path, the axis and the sizes when mapped
    axes have different sizes, an axis is out of range for its argument, ``in_axes`` is not
    a tree prefix of the arguments, no argument is mapped and ``axis_size`` is missing,
    or ``out_axes`` is None for an output that depends on the mapped axis.
    """
    _check_callable(fun, "vmap")
    return _vmap(fun, in_axes, out_axes, axis_name, axis_size, f"vmap({_fun_name(fun)})")


def _vmap(fun, in_axes, out_axes, axis_name, axis_size, fname, group=None,
          check_size=None):
    """vmap's body. ``group``: the process group of a multi-process pmap axis (the
    collectives over ``axis_name`` then span the processes); ``check_size(size)``: pmap's
    check of the mapped size against the local devices."""
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    _check_axes_spec(in_axes, "in_axes", fname)
    _check_axes_spec(out_axes, "out_axes", fname)
    if axis_size is not None:
        try:
            axis_size = operator.index(axis_size)
        except TypeError:
            raise TypeError(f"{fname}: axis_size must be an int, got {axis_size!r}") from None
        if axis_size < 0:
            raise ValueError(f"{fname}: axis_size must be >= 0, got {axis_size}")
    if axis_name is not None:
        try:
            hash(axis_name)
        except TypeError:
            raise TypeError(f"{fname}: axis_name must be hashable, got {axis_name!r}") from None
    pos_names, var_name = _positional_names(fun)

    @functools.wraps(fun, updated=())
    def vmapped(*args, **kwargs):
        nargs = len(args)
        if isinstance(in_axes, tuple):
            if len(in_axes) != nargs:
                raise ValueError(
                    f"{fname}: in_axes must be an int, None, or a tuple with one entry per "
                    f"positional argument, but got a tuple of length {len(in_axes)} for "
                    f"{nargs} positional argument{'s' if nargs != 1 else ''} "
                    f"(in_axes={in_axes!r})")
            per_arg = in_axes
        else:
            per_arg = (in_axes,) * nargs
        # Per-leaf (description, value, axis), in the flattening order of (args, kwargs).
        described = []
        for i, (a, ax) in enumerate(zip(args, per_arg)):
            name = _arg_name(i, pos_names, var_name)
            leaf_axes = _broadcast_axes(ax, a, f"in_axes[{i}]", name, fname, "in_axes")
            pairs, _ = tree_flatten_with_path(a)
            for (path, x), lax_ in zip(pairs, leaf_axes):
                described.append((name + keystr(path), x, lax_))
        for path, x in tree_flatten_with_path(kwargs)[0]:
            described.append((f"keyword argument {path[0].key}{keystr(path[1:])}", x, 0))
        leaves, args_tree = tree_flatten((tuple(args), kwargs))
        assert len(leaves) == len(described)

        mapped = []          # (description, aval, axis, size)
        norm_axes = []
        for desc, x, ax in described:
            if ax is None:
                norm_axes.append(None)
                continue
            _check_arg(x, fname, desc)
            aval = get_aval(x)
            if not -aval.ndim <= ax < aval.ndim:
                rank_need = ax + 1 if ax >= 0 else -ax
                raise ValueError(
                    f"{fname} was asked to map {desc} along axis {ax}, which needs rank at "
                    f"least {rank_need}, but it has rank {aval.ndim} ({aval.str_short()})"
                    + ("; use in_axes=None for arguments that are not mapped"
                       if aval.ndim == 0 else ""))
            norm_axes.append(ax % aval.ndim)
            mapped.append((desc, aval, ax, aval.shape[ax]))
        sizes = {m[3] for m in mapped}
        if len(sizes) > 1:
            counts = collections.Counter(m[3] for m in mapped)
            lines = []
            for s, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
                examples = [m for m in mapped if m[3] == s]
                d, aval, ax, _ = examples[0]
                if n == 1:
                    lines.append(f"  * one axis had size {s}: axis {ax} of {d} "
                                 f"({aval.str_short()})")
                else:
                    lines.append(f"  * {n} axes had size {s}, e.g. axis {ax} of {d} "
                                 f"({aval.str_short()})")
            raise ValueError(f"{fname} got inconsistent sizes for the mapped axes:\n"
                             + "\n".join(lines))
        if sizes:
            size = sizes.pop()
            if axis_size is not None and axis_size != size:
                d, aval, ax, _ = mapped[0]
                raise ValueError(f"{fname}: axis_size={axis_size} differs from the size {size} "
                                 f"of the mapped axes (axis {ax} of {d}, {aval.str_short()})")
        elif axis_size is not None:
            size = axis_size
        else:
            raise ValueError(f"{fname} must map at least one argument (a non-None value in "
                             "in_axes, or a keyword argument), or be given axis_size")
        if check_size is not None:
            check_size(size)
        leaves = [x if a is None else _as_array(x) for x, a in zip(leaves, norm_axes)]
        if group is not None:
            # unmapped inputs are one value held by every process (lax/mpi.py)
            from lax import mpi
            leaves = [mpi.replicated_in(x, group) if a is None and isinstance(x, Tracer)
                      else x for x, a in zip(leaves, norm_axes)]

        def check_out(pairs):
            for path, o in pairs:
                if not valid_jaxtype(o):
                    raise TypeError(
                        f"{fname}: {_out_name(path, len(pairs) == 1 and not path)} has type "
                        f"{type(o).__name__}, which is not an array; vmapped functions return "
                        "pytrees of arrays")

        flat_fun, out = flatten_fun(fun, args_tree, kwargs=True, check_out=check_out)
        outs, out_dims = batching.vmap_flat(flat_fun, size, axis_name, norm_axes, leaves,
                                            group)
        out_tree, out_paths = out.tree, out.paths
        out_example = tree_unflatten(out_tree, outs)   # the output's structure, for out_axes
        single = len(out_paths) == 1 and not out_paths[0]
        o_axes = _broadcast_axes(out_axes, out_example, "out_axes", "output", fname,
                                 "out_axes")
        final = []
        for o, d, oa, path in zip(outs, out_dims, o_axes, out_paths):
            aval = get_aval(o)
            if d is not None:
                shape = list(aval.shape)
                del shape[d]
                aval = aval.update(shape=tuple(shape))
            what = _out_name(path, single)
            if oa is None:
                if d is not None:
                    raise ValueError(
                        f"{fname}: out_axes{keystr(path)} is None (unmapped), but {what} "
                        f"({aval.str_short()} per member) depends on the mapped axis of size "
                        f"{size}. Give it an int out_axes to stack it, or reduce over the "
                        "axis first (e.g. with lax.psum and an axis_name)")
                if group is not None and isinstance(o, Tracer):
                    from lax import mpi    # one value held by every process (lax/mpi.py)
                    o = mpi.replicated_out(o, group)
                final.append(o)
                continue
            nd = aval.ndim + 1
            if not -nd <= oa < nd:
                raise ValueError(f"{fname}: out_axes{keystr(path)}={oa} is out of range for "
                                 f"{what}, which has rank {nd} with the mapped axis "
                                 f"({aval.str_short()} per member); valid axes are "
                                 f"{-nd}..{nd - 1}")
            final.append(batching.matchaxis(size, d, oa % nd, o))
        return tree_unflatten(out_tree, final)

    return vmapped


# ------------------------------------------ pmap -----------------------------------------

def pmap(fun: Callable, axis_name=None, *, in_axes=0, out_axes=0,
         static_broadcasted_argnums=(), devices=None, backend=None, axis_size=None,
         donate_argnums=()):
    """Map ``fun`` over the devices, SPMD across processes (``jax.pmap``, with JAX's
    multi-process convention).

    Each process calls the pmapped function on its *local* block: every mapped argument
    has this process's local device count (``tracer.local_device_count()``, 1 by default;
    ``TRACER_NUM_CPU_DEVICES``) along its ``in_axes`` axis, and the result is this
    process's block, stacked along ``out_axes``. The mapped axis as a whole has
    ``tracer.device_count()`` members, process-major: process p holds global members
    ``p * L ... p * L + L - 1``. Collectives over ``axis_name`` (``lax.psum``, ``pmean``,
    ``pmax``, ``pmin``, ``all_gather``, ``psum_scatter``, ``all_to_all``, ``ppermute``,
    ``pbroadcast``, ``axis_index``) span every process: the local members are combined
    by vmap's batched primitives, then the processes by one MPI call (lax/mpi.py: its
    module docstring gives each collective's MPI call and a float psum's summation order).

    On one process, ``pmap`` is ``vmap(fun, in_axes, out_axes, axis_name=axis_name)``
    over the local devices, as JAX's pmap on local devices computes. Under MPI
    (``mpiexec -n 4 python prog.py``, see ``tracer.distributed``) every process must make
    the same pmapped calls, in the same order, with the same shapes and dtypes (checked
    by each collective before it communicates: ValueError).

    - ``in_axes`` / ``out_axes``: as vmap's (ints, None, pytree prefixes).
    - ``static_broadcasted_argnums``: positional arguments passed to ``fun`` as they are
      (Python values, not mapped, not traced), as jit's static_argnums.
    - ``axis_size``: the local size when no argument is mapped.
    - ``devices``, ``backend``, ``donate_argnums``: accepted for compatibility; the
      devices are this process's CPU devices, and nothing is donated.

    It does not compile ``fun`` by itself: ``jit(pmap(f))`` (or ``pmap(jit(f))``) runs
    it compiled, the MPI calls as host steps between kernels (a loop holding a
    collective stays compiled).

    Raises ValueError when the mapped size exceeds the local device count (one process;
    JAX's "requires N logical devices" error) or differs from it (several processes,
    where every process maps exactly its local devices), and vmap's errors otherwise.
    """
    _check_callable(fun, "pmap")
    fname = f"pmap({_fun_name(fun)})"
    if isinstance(static_broadcasted_argnums, int):
        static_broadcasted_argnums = (static_broadcasted_argnums,)
    static = tuple(operator.index(i) for i in static_broadcasted_argnums)
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)

    @functools.wraps(fun, updated=())
    def pmapped(*args, **kwargs):
        from tracer import distributed
        w = distributed.world()
        nargs = len(args)
        st = sorted({i % nargs if -nargs <= i < nargs else i for i in static})
        bad = [i for i in st if not 0 <= i < nargs]
        if bad:
            raise ValueError(f"{fname}: static_broadcasted_argnums {static} names argument "
                             f"{bad[0]}, but the call has {nargs} positional arguments")
        dyn = [i for i in range(nargs) if i not in st]

        def f(*dyn_args, **kw):
            full = list(args)
            for i, a in zip(dyn, dyn_args):
                full[i] = a
            return fun(*full, **kw)

        axes = in_axes
        if isinstance(in_axes, tuple) and st:
            if len(in_axes) != nargs:
                raise ValueError(f"{fname}: in_axes has {len(in_axes)} entries for {nargs} "
                                 "positional arguments (static ones included)")
            axes = tuple(in_axes[i] for i in dyn)

        def check_size(size):
            n = w.local_size
            if w.size == 1 and size > n:
                raise ValueError(
                    f"{fname}: the mapped axis has size {size}, which needs {size} devices, "
                    f"but this process has {n} (tracer.local_devices()); give it more with "
                    f"TRACER_NUM_CPU_DEVICES={size} (as JAX's "
                    f"--xla_force_host_platform_device_count), or use vmap")
            if w.size > 1 and size != n:
                raise ValueError(
                    f"{fname}: process {w.rank} of {w.size} passed a block of {size} along "
                    f"the mapped axis; under several processes each passes exactly its "
                    f"local device count, {n} (the whole axis has {n * w.size} members)")

        mapped = _vmap(f, axes, out_axes, axis_name, axis_size, fname,
                       group=w if w.size > 1 else None, check_size=check_size)
        return mapped(*[args[i] for i in dyn], **kwargs)

    return pmapped


# ------------------------------------ jacobians ------------------------------------------

def _std_basis(leaves):
    """Identity matrices over the flattened leaves, one block per leaf: leaf i gets shape
    (n,) + leaf.shape, n the total size; dtype of the leaf."""
    sizes = [get_aval(x).size for x in leaves]
    n = sum(sizes)
    out = []
    start = 0
    for x, s in zip(leaves, sizes):
        aval = get_aval(x)
        eye = np.zeros((n, s), aval.dtype)
        eye[start:start + s] = np.eye(s, dtype=aval.dtype)
        out.append(Array(eye.reshape((n,) + aval.shape)))
        start += s
    return out, n


def _split_jac_axis(x, axis, shapes):
    """Split axis ``axis`` of ``x`` (the flattened basis) into blocks reshaped to
    ``shapes``: one array per shape, the block's shape in place of the axis."""
    import lax
    aval = get_aval(x)
    axis = axis % aval.ndim
    before, after = aval.shape[:axis], aval.shape[axis + 1:]
    parts, start = [], 0
    for shp in shapes:
        size = int(np.prod(shp, dtype=np.int64))
        part = lax.slice_in_dim(x, start, start + size, 1, axis)
        parts.append(lax.reshape(part, before + tuple(shp) + after))
        start += size
    return parts


def _jac_setup(who, fun, args, kwargs, argnums):
    fname = _fun_name(fun)
    nums, single = _diff_argnums(argnums, len(args), fname, who)
    dyn = tuple(args[i] for i in nums)

    def f_partial(*d):
        full = list(args)
        for i, a in zip(nums, d):
            full[i] = a
        return fun(*full, **kwargs)

    return fname, nums, single, dyn, f_partial


def jacfwd(fun: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False):
    """The Jacobian of ``fun`` by forward mode (``jax.jacfwd``): ``vmap`` of ``jvp`` over
    the standard basis of the inputs ``argnums``.

    Args:
      fun: a function of arrays (pytrees allowed) returning a pytree of arrays.
      argnums: an int or tuple of ints: the positional arguments to differentiate.
      has_aux: ``fun`` returns ``(output, aux)``.
      holomorphic: complex inputs and outputs, holomorphic ``fun``.

    Returns:
      A function with ``fun``'s signature returning the Jacobian: for an output leaf of
      shape O and an input leaf of shape I the block has shape O + I; the result has the
      output's structure with, at each leaf, the input's structure (a tuple over
      ``argnums`` when it is a tuple); ``(jacobian, aux)`` with ``has_aux``.

    Raises:
      TypeError: ``fun`` not callable, ``argnums`` not ints; non-floating inputs (complex
        ones need ``holomorphic=True``; use ``jvp`` for non-holomorphic complex
        functions); non-complex values with ``holomorphic``.
      ValueError: ``argnums`` out of range for the call (as in JAX).
    """
    _check_callable(fun, "jacfwd")
    _diff_argnums(argnums, 1 << 30, _fun_name(fun), "jacfwd")  # the argnums type, early

    @functools.wraps(fun)
    def jacfun(*args, **kwargs):
        fname, nums, single, dyn, f_partial = _jac_setup("jacfwd", fun, args, kwargs, argnums)
        d_leaves, d_tree = tree_flatten(dyn)
        for path, x in tree_flatten_with_path(dyn)[0]:
            _check_arg(x, f"jacfwd of {fname}", keystr(path))
            dt = get_aval(x).dtype
            if holomorphic and not dtypes.is_complex(dt):
                raise TypeError(f"jacfwd of {fname} with holomorphic=True requires inputs with "
                                f"complex dtype, but got {dt.name} for argument {keystr(path)}")
            if not holomorphic and not dtypes.is_floating(dt):
                raise TypeError(f"jacfwd of {fname} requires real-valued inputs (input dtype "
                                f"that is a sub-dtype of np.floating), but got {dt.name} for "
                                f"argument {keystr(path)}. For holomorphic differentiation, "
                                "pass holomorphic=True. For differentiation of non-holomorphic "
                                "functions involving complex inputs or integer inputs, use "
                                "jvp directly.")
        d_leaves = [_as_array(x) for x in d_leaves]
        basis, n = _std_basis(d_leaves)

        def pushfwd(*tans):
            return jvp(lambda *xs: f_partial(*tree_unflatten(d_tree, xs)), tuple(d_leaves),
                       tuple(tans), has_aux=has_aux)

        out_axes = (None, -1, None) if has_aux else (None, -1)
        res = vmap(pushfwd, in_axes=tuple(0 for _ in basis), out_axes=out_axes)(*basis)
        y, jac = res[0], res[1]
        if holomorphic:
            for leaf in tree_flatten(y)[0]:
                if not dtypes.is_complex(get_aval(leaf).dtype):
                    raise TypeError(f"jacfwd of {fname} with holomorphic=True requires outputs "
                                    f"with complex dtype, but got {get_aval(leaf).dtype.name}")
        shapes = [get_aval(x).shape for x in d_leaves]

        def split(o):
            parts = tree_unflatten(d_tree, _split_jac_axis(o, -1, shapes))
            return parts[0] if single else parts

        jac = tree_map(split, jac)
        return (jac, res[2]) if has_aux else jac

    return jacfun


def jacrev(fun: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False,
           allow_int: bool = False):
    """The Jacobian of ``fun`` by reverse mode (``jax.jacrev``): ``vmap`` of ``vjp`` over
    the standard basis of the outputs.

    Args:
      fun: a function of arrays (pytrees allowed) returning a pytree of real arrays.
      argnums: an int or tuple of ints: the positional arguments to differentiate.
      has_aux: ``fun`` returns ``(output, aux)``.
      holomorphic: complex inputs and outputs, holomorphic ``fun``.
      allow_int: integer inputs allowed (their blocks are float0).

    Returns:
      A function returning the Jacobian in ``jacfwd``'s layout (output shape + input shape
      per block); ``(jacobian, aux)`` with ``has_aux``.

    Raises:
      TypeError: ``fun`` not callable, ``argnums`` not ints; integer inputs without
        ``allow_int``; complex outputs without ``holomorphic``; integer outputs.
      ValueError: ``argnums`` out of range for the call (as in JAX).
    """
    _check_callable(fun, "jacrev")
    _diff_argnums(argnums, 1 << 30, _fun_name(fun), "jacrev")  # the argnums type, early

    @functools.wraps(fun)
    def jacfun(*args, **kwargs):
        fname, nums, single, dyn, f_partial = _jac_setup("jacrev", fun, args, kwargs, argnums)
        for path, x in tree_flatten_with_path(dyn)[0]:
            _check_input_dtype_revderiv("jacrev", fname, holomorphic, allow_int, x,
                                        keystr(path))
        if has_aux:
            y, f_vjp, aux = vjp(f_partial, *dyn, has_aux=True)
        else:
            y, f_vjp = vjp(f_partial, *dyn)
        y_leaves, y_tree = tree_flatten(y)
        for leaf in y_leaves:
            _check_output_dtype_revderiv("jacrev", fname, holomorphic, get_aval(leaf))
        basis, n = _std_basis(y_leaves)
        # cts: a tuple over the differentiated arguments, each leaf with a leading axis of
        # size n (the flattened outputs).
        cts = vmap(lambda *b: f_vjp(tree_unflatten(y_tree, list(b))),
                   in_axes=tuple(0 for _ in basis))(*basis)
        out_shapes = [get_aval(o).shape for o in y_leaves]

        def split(c):
            if get_aval(c).dtype == dtypes.float0:
                return [Array(np.zeros(s + get_aval(c).shape[1:], dtypes.float0))
                        for s in out_shapes]
            return _split_jac_axis(c, 0, out_shapes)

        per_arg = [tree_map(split, c) for c in cts]
        results = []
        for k in range(len(y_leaves)):
            arg_trees = tuple(tree_map(lambda parts: parts[k], pa,
                                       is_leaf=lambda x: isinstance(x, list)) for pa in per_arg)
            results.append(arg_trees[0] if single else arg_trees)
        jac = tree_unflatten(y_tree, results)
        return (jac, aux) if has_aux else jac

    return jacfun


def hessian(fun: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False):
    """The Hessian of scalar ``fun`` (``jax.hessian``): ``jacfwd(jacrev(fun))``.

    Args:
      fun: a function with a real scalar output (complex with ``holomorphic``).
      argnums, has_aux, holomorphic: as for ``jacfwd``/``jacrev``.

    Returns:
      A function returning the Hessian: for input leaves of shapes I and J the block has
      shape I + J (nested by the inputs' structure twice); ``(hessian, aux)`` with
      ``has_aux``.

    Raises: as ``jacrev`` and ``jacfwd``.
    """
    _check_callable(fun, "hessian")
    return jacfwd(jacrev(fun, argnums, has_aux=has_aux, holomorphic=holomorphic), argnums,
                  has_aux=has_aux, holomorphic=holomorphic)


# ------------------------------------------ jit ------------------------------------------

class _HashableStatic:
    __slots__ = ("val", "_hash")

    def __init__(self, val, fname, where):
        try:
            self._hash = hash(val)
        except TypeError:
            raise TypeError(f"jit({fname}): static argument {where} of type "
                            f"{type(val).__name__} is not hashable; static arguments must be "
                            "hashable (use a tuple instead of a list, or pass it as an array "
                            "argument)") from None
        self.val = val

    def __eq__(self, other):
        return type(self.val) is type(other.val) and self.val == other.val

    def __hash__(self):
        return self._hash


class Traced:
    """The result of tracing a jitted function for given argument types."""

    def __init__(self, closed: ClosedJaxpr, in_tree, out_tree, name):
        self.jaxpr = closed
        self.in_tree = in_tree
        self.out_tree = out_tree
        self.name = name
        self.out_avals = None     # (set by jit's cache: closed's, as the key's objects)


def _argnums_tuple(value, what, fname):
    """``static_argnums``-style value (None, an int or a sequence of ints) as a tuple."""
    if value is None:
        return ()
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return (int(value),)
    try:
        return tuple(operator.index(v) for v in value)
    except TypeError:
        raise TypeError(f"jit({fname}): {what} must be an int or a sequence of ints, got "
                        f"{value!r}") from None


def _argnames_tuple(value, what, fname):
    """``static_argnames``-style value (None, a str or an iterable of str) as a tuple."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    try:
        out = tuple(value)
    except TypeError:
        out = None
    if out is None or not all(isinstance(v, str) for v in out):
        raise TypeError(f"jit({fname}): {what} must be a str or a sequence of str, got "
                        f"{value!r}")
    return out


class JitWrapped:
    """A function compiled by ``jit``: traced once per (input avals incl. weak_type, pytree
    structure, static argument values), then run as one ``jit`` equation.

    Calling it runs the compiled program. ``.lower(*args)`` gives a ``Lowered`` object
    (``.as_text()``, ``.compile()``), ``.trace(*args)`` the traced jaxpr, ``.eval_shape``
    the output shapes, ``.clear_cache()`` forgets the traces."""

    def __init__(self, fun, static_argnums=(), static_argnames=(), donate_argnums=(),
                 inline=False, donate_argnames=()):
        fname = _fun_name(fun)
        self.fun = fun
        self.__name__ = fname
        self.__doc__ = getattr(fun, "__doc__", None)
        self.__wrapped__ = fun
        self.static_argnums = _argnums_tuple(static_argnums, "static_argnums", fname)
        self.static_argnames = _argnames_tuple(static_argnames, "static_argnames", fname)
        self.donate_argnums = _argnums_tuple(donate_argnums, "donate_argnums", fname)
        self.donate_argnames = _argnames_tuple(donate_argnames, "donate_argnames", fname)
        # Check the argument numbers and names against the signature and map static
        # argnames <-> argnums through it, as JAX does (ValueError at definition).
        try:
            params = list(inspect.signature(fun).parameters.values())
        except (TypeError, ValueError):
            params = None
        if params is not None:
            names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY,
                                                          p.POSITIONAL_OR_KEYWORD)]
            named = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD,
                                                          p.KEYWORD_ONLY)}
            var_pos = any(p.kind is p.VAR_POSITIONAL for p in params)
            var_kw = any(p.kind is p.VAR_KEYWORD for p in params)
            for what, nums in (("static_argnums", self.static_argnums),
                               ("donate_argnums", self.donate_argnums)):
                bad = [i for i in nums if not -len(names) <= i < len(names)]
                if bad and not var_pos:
                    takes = (f"accepts only {len(names)} positional argument"
                             f"{'s' if len(names) != 1 else ''} ({', '.join(names)}); valid "
                             f"positions are {-len(names)}..{len(names) - 1}") if names \
                        else "takes no positional arguments"
                    raise ValueError(f"jit({fname}): {what}={nums} but {fname} {takes}")
            for what, argnames in (("static_argnames", self.static_argnames),
                                   ("donate_argnames", self.donate_argnames)):
                bad = sorted(set(argnames) - named)
                if bad and not var_kw:
                    raise ValueError(
                        f"jit({fname}): invalid argnames {bad} in {what}: {fname} takes no "
                        f"such argument (its parameters: {', '.join(sorted(named)) or 'none'})")
            norm = lambda nums: {i for i in nums if 0 <= i < len(names)}
            self.static_argnums = tuple(sorted(
                set(self.static_argnums) | {names.index(n) for n in self.static_argnames
                                            if n in names}))
            self.static_argnames = tuple(sorted(
                set(self.static_argnames) | {names[i] for i in norm(self.static_argnums)}))
            donated = {names[i] for i in norm(self.donate_argnums)} | set(self.donate_argnames)
            both = sorted(donated & set(self.static_argnames))
            if both:
                raise ValueError(f"jit({fname}): the arguments {both} are both static and "
                                 "donated; static arguments cannot be donated")
        self._cache: dict = {}
        self._flat_trees: dict = {}     # nargs -> the tree of that many plain array args
        self._matchers: dict = {}       # nargs -> ((in_tree, pytree.matcher of its args),)
        self._matcher_budget = 16
        self.trace_count = 0
        # updated=(): merging fun's __dict__ would copy a wrapped JitWrapped's own ``fun``
        # and ``_cache`` over ours (jit(vmap(jit(f))) would then run the inner function).
        functools.update_wrapper(self, fun, updated=())

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self, obj)

    def _key_and_args(self, args, kwargs):
        nargs = len(args)
        if not kwargs and not self.static_argnums:
            # the common call (arrays, positionally, nothing static): its tree depends on
            # the number of arguments only, and each leaf's aval is read directly
            tree = self._flat_trees.get(nargs)
            try:    # (an unsupported dtype: the general path below names it)
                if tree is not None and all(type(a) in _PLAIN_LEAVES for a in args):
                    leaves = list(args)
                    avals = tuple(a.aval if type(a) is Array else ShapedArray(
                        a.shape, dtypes.canonicalize_dtype(a.dtype), False) for a in leaves)
                    key = (tree, avals, (), (), nargs, config.enable_x64)
                    return key, leaves, tree, (), (), (), nargs
                # pytrees of arrays met before: their structure checked by generated code
                for tree, match in self._matchers.get(nargs, ()):
                    leaves = match(args)
                    if leaves is not None:
                        avals = tuple(a.aval if type(a) is Array else get_aval(a)
                                      for a in leaves)
                        key = (tree, avals, (), (), nargs, config.enable_x64)
                        return key, leaves, tree, (), (), (), nargs
            except TypeError:
                pass
        fname = self.__name__
        snums = _normalize_argnums(tuple(i for i in self.static_argnums if -nargs <= i < nargs),
                                   nargs) if nargs else ()
        static_pos = tuple((i, _HashableStatic(args[i], fname, f"{i}")) for i in snums)
        dyn_args = [a for i, a in enumerate(args) if i not in snums]
        static_kw = tuple(sorted((k, _HashableStatic(v, fname, repr(k)))
                                 for k, v in kwargs.items() if k in self.static_argnames))
        dyn_kw = {k: v for k, v in kwargs.items() if k not in self.static_argnames}
        leaves, in_tree = _flatten_args(f"jit({fname})", dyn_args, dyn_kw,
                                        [i for i in range(nargs) if i not in snums])
        if not kwargs and not snums:
            if len(leaves) == nargs and all(type(a) in _PLAIN_LEAVES for a in args):
                self._flat_trees[nargs] = in_tree
            else:
                # (a few structures per argument count; those made before a node type was
                # registered are dropped; a function called with ever new structures
                # stops making matchers)
                known = tuple((t, m) for t, m in self._matchers.get(nargs, ())
                              if pytree.matcher_current(m))
                if self._matcher_budget > 0 and all(t is not in_tree for t, _ in known):
                    self._matcher_budget -= 1
                    match = pytree.matcher(in_tree.children[0], _MATCHED_LEAVES)
                    if match is not None:
                        known = ((in_tree, match),) + known[:3]
                self._matchers[nargs] = known
        avals = tuple(x.aval if type(x) is Array else get_aval(x) for x in leaves)
        key = (in_tree, avals, static_pos, static_kw, nargs, config.enable_x64)
        return key, leaves, in_tree, snums, static_pos, static_kw, nargs

    def trace(self, *args, **kwargs) -> Traced:
        key, leaves, in_tree, snums, static_pos, static_kw, nargs = \
            self._key_and_args(args, kwargs)
        return self._get_traced(key, leaves, in_tree, static_pos, static_kw, nargs)[0]

    def _get_traced(self, key, leaves, in_tree, static_pos, static_kw, nargs):
        hit = self._cache.get(key)
        if hit is not None:
            return hit, False
        t0 = time.perf_counter()
        fun = self.fun
        spos = {i: s.val for i, s in static_pos}
        skw = {k: s.val for k, s in static_kw}

        def with_static(*dyn_args, **dyn_kw):
            it = iter(dyn_args)
            full = [spos[i] if i in spos else next(it) for i in range(nargs)]
            return fun(*full, **dyn_kw, **skw)

        flat_fun, out = flatten_fun(with_static, in_tree, kwargs=True)
        in_avals = [get_aval(x) for x in leaves]
        jaxpr, consts = pe.trace_to_jaxpr_dynamic(flat_fun, in_avals)
        self.trace_count += 1
        has_tracer_consts = any(isinstance(c, Tracer) for c in consts)
        if has_tracer_consts:
            # Closed-over tracers of an enclosing transformation become operands.
            closed = ClosedJaxpr(pe.convert_constvars_jaxpr(jaxpr), [])
            traced = Traced(closed, in_tree, out.tree, self.__name__)
            traced.hoisted_consts = list(consts)
        else:
            # a NumPy array the function closes over is taken as it is now (JAX's
            # constants are copied to the device at trace time): the caller's later writes
            # change neither the results returned nor those of later calls
            consts = [np.array(c) if isinstance(c, np.ndarray) and core.may_change(c)
                      else c for c in consts]
            closed = ClosedJaxpr(jaxpr, consts)
            traced = Traced(closed, in_tree, out.tree, self.__name__)
            traced.hoisted_consts = []
            # results get the key's aval objects where equal: a result passed back in
            # (a training step's parameters) then makes a key that compares by identity
            mine = {a: a for a in key[1] if type(a) is ShapedArray}
            traced.out_avals = [mine.get(a, a) if type(a) is ShapedArray else a
                                for a in closed.out_avals]
            self._cache[key] = traced
        if config.log_compiles:
            logger.warning("Finished tracing %s for args %s in %.1f ms", self.__name__,
                           ", ".join(a.str_short() for a in in_avals),
                           (time.perf_counter() - t0) * 1e3)
        return traced, True

    def __call__(self, *args, **kwargs):
        if config.disable_jit:
            return self.fun(*args, **kwargs)
        key, leaves, in_tree, snums, static_pos, static_kw, nargs = \
            self._key_and_args(args, kwargs)
        traced, _ = self._get_traced(key, leaves, in_tree, static_pos, static_kw, nargs)
        if not traced.hoisted_consts and (not core._traces_active or len(
                core.current_trace_stack()) == 1) and \
                core.find_top_trace(leaves) is None:
            # no transformation active (an enclosing vmap may bind axis names even with
            # no mapped operand): run the compiled program directly (the same as
            # jit_p's impl, without the per-call work of eager primitive evaluation)
            global _jit_backend
            if _jit_backend is None:    # (an import statement per call costs more)
                from tracer import _jit_backend
            outs = _jit_backend.run_arrays(traced.jaxpr, leaves, self.__name__,
                                           traced.out_avals)
        else:
            outs = jit_p.bind(*traced.hoisted_consts, *leaves, jaxpr=traced.jaxpr,
                              name=self.__name__)
        return tree_unflatten(traced.out_tree, outs)

    def lower(self, *args, **kwargs):
        """Trace and lower for these arguments: ``.as_text()`` shows the optimized jaxpr, the
        loop IR and the generated source; ``.compile()`` returns a callable."""
        traced = self.trace(*args, **kwargs)
        from tracer import _jit_backend
        return _jit_backend.lower(traced, self)

    def eval_shape(self, *args, **kwargs):
        traced = self.trace(*args, **kwargs)
        shapes = [ShapeDtypeStruct(a.shape, a.dtype, a.weak_type) for a in traced.jaxpr.out_avals]
        return tree_unflatten(traced.out_tree, shapes)

    def _cache_size(self):
        return len(self._cache)

    def clear_cache(self):
        self._cache.clear()


def jit(fun: Callable | None = None, /, *, in_shardings=None, out_shardings=None,
        static_argnums=None, static_argnames=None, donate_argnums=None, donate_argnames=None,
        keep_unused: bool = False, device=None, backend=None, inline: bool = False,
        compiler_options=None):
    """Compile ``fun`` (``jax.jit``): trace it once per input signature into a jaxpr, lower
    the jaxpr to Numba-compiled loops and run those. Usable as ``jit(f)``, ``@jit`` and
    ``@partial(jit, static_argnums=...)`` (or ``@jit(static_argnums=...)``).

    Args:
      fun: the function to compile; its arguments are arrays, scalars or pytrees of them
        (non-array arguments must be static), its result a pytree of arrays.
      static_argnums: an int or ints: positional arguments passed as Python values instead
        of being traced. They must be hashable; each new value retraces (use them for
        shapes, flags, Python control flow). Negative numbers count from the end.
      static_argnames: a str or strs: the same for arguments passed by keyword. Names and
        numbers are mapped onto each other through ``fun``'s signature, so a static
        argument is static however it is passed.
      donate_argnums, donate_argnames: accepted for compatibility and ignored (Arrays are
        immutable and host memory is not reused); an argument cannot be both static and
        donated.
      in_shardings, out_shardings, device, backend, keep_unused, compiler_options:
        accepted for compatibility and ignored: there is one device (the CPU) and all
        arguments are kept.
      inline: accepted for compatibility; a jitted call inside a trace stays one ``jit``
        equation either way.

    Returns:
      A ``JitWrapped`` callable with ``fun``'s signature. Each call looks its arguments'
      shapes, dtypes, weak types, pytree structure and static values up in a cache and
      traces on a miss (``config.log_compiles`` logs traces and compiles). Inside another
      transformation (grad, vmap, an outer jit) the call is one ``jit`` equation holding
      the traced sub-jaxpr. It also offers:

      - ``.lower(*args, **kwargs)`` -> ``Lowered`` for those argument types: ``.as_text()``
        prints the traced jaxpr, the optimized jaxpr (DCE, CSE, folding), the loop IR
        (kernels, library calls, host steps) and the generated Numba source of each
        kernel; ``.compile()`` compiles the kernels now (synchronously, whatever
        ``config.jit_compile`` says) and returns a ``Compiled`` object: calling it runs
        the jitted function, ``.as_text()`` is the source of its kernels.
      - ``.trace(*args, **kwargs)`` -> the ``Traced`` jaxpr (``.jaxpr``, ``.in_tree``,
        ``.out_tree``); ``.eval_shape(*args, **kwargs)`` -> output ShapeDtypeStructs;
        ``.clear_cache()``.

    Under ``config.disable_jit`` the function is called directly.

    Raises:
      TypeError: ``fun`` is not callable; an unknown keyword argument; argnums that are not
        ints or argnames that are not strs; at call time, an unhashable static argument or
        a non-array dynamic argument.
      ValueError: ``static_argnums``/``donate_argnums`` out of range for ``fun``'s
        positional parameters, ``static_argnames``/``donate_argnames`` that ``fun`` does not
        take (unless it has ``*args``/``**kwargs``), or an argument both static and donated.
      ConcretizationTypeError (and the other tracer errors, at trace time): Python control
        flow or conversion on a traced value; mark the argument static or use lax.cond.
    """
    if fun is None:
        return lambda f: jit(f, static_argnums=static_argnums, static_argnames=static_argnames,
                             donate_argnums=donate_argnums, donate_argnames=donate_argnames,
                             inline=inline)
    _check_callable(fun, "jit")
    if isinstance(fun, JitWrapped) and not (static_argnums or static_argnames):
        return fun
    return JitWrapped(fun, static_argnums, static_argnames, donate_argnums, inline,
                      donate_argnames)


def _jit_impl(*args, jaxpr, name, **params):
    from tracer import _jit_backend
    return _jit_backend.run(jaxpr, args, name)


jit_p.def_impl(_jit_impl)


# ------------------------------------------ misc -----------------------------------------

def device_put(x, device=None):
    """Arrays live in host memory: returns ``x`` as Arrays (pytrees allowed)."""
    return tree_map(_as_array, x)


def block_until_ready(x):
    """Arrays are computed synchronously: returns ``x`` (jax.block_until_ready)."""
    return x


def device_get(x):
    """Arrays in a pytree as NumPy arrays (jax.device_get)."""
    return tree_map(lambda v: np.asarray(v) if isinstance(v, Array) else v, x)
