"""Checks that tests (ours and users') apply to any function (after JAX's
``public_test_util``):

- ``check_grads(f, args, order, modes)``: jvp against central finite differences, and vjp
  against jvp by the inner-product identity <J v, u> = <v, J^T u>, recursively to ``order``.
- ``check_vmap(f, args, in_axes, out_axes)``: the vmapped result equals stacking ``f`` over
  a Python loop.
- ``check_jit(f, args)``: ``jit(f)`` equals the eager run (bit for bit by default).
"""
from __future__ import annotations

import numpy as np

from tracer import dtypes
from tracer.core import Array, get_aval
from tracer.pytree import tree_flatten, tree_map, tree_unflatten

EPS = 1e-4

_default_tols = {
    np.dtype(np.float16): 1e-2, np.dtype(np.float32): 1e-3, np.dtype(np.float64): 1e-5,
    np.dtype(np.complex64): 1e-3, np.dtype(np.complex128): 1e-5,
}


def _tol(dtype, tol):
    if tol is not None:
        return tol
    return _default_tols.get(np.dtype(dtype), 1e-5)


def _np(x):
    return np.asarray(x)


def check_close(xs, ys, atol=None, rtol=None, err_msg=""):
    xl, xt = tree_flatten(xs)
    yl, yt = tree_flatten(ys)
    assert xt == yt, f"tree structures differ: {xt} vs {yt} {err_msg}"
    for x, y in zip(xl, yl):
        x, y = _np(x), _np(y)
        assert x.shape == y.shape, f"shapes differ: {x.shape} vs {y.shape} {err_msg}"
        dt = np.result_type(x.dtype, y.dtype) if x.dtype != dtypes.float0 else np.float64
        if dt == dtypes.float0 or x.dtype == dtypes.float0:
            continue
        np.testing.assert_allclose(x.astype(np.complex128 if dtypes.is_complex(dt) else
                                            np.float64),
                                   y.astype(np.complex128 if dtypes.is_complex(dt) else
                                            np.float64),
                                   atol=_tol(dt, atol), rtol=_tol(dt, rtol), err_msg=err_msg,
                                   equal_nan=True)


def _rand_like(rng, x):
    aval = get_aval(x)
    if not dtypes.is_inexact(aval.dtype):
        return Array(np.zeros(aval.shape, dtypes.float0))
    v = rng.standard_normal(aval.shape)
    if dtypes.is_complex(aval.dtype):
        v = v + 1j * rng.standard_normal(aval.shape)
    return Array(np.asarray(v, aval.dtype))


def _add_scaled(x, t, eps):
    aval = get_aval(x)
    if not dtypes.is_inexact(aval.dtype):
        return x
    return Array(np.asarray(_np(x) + eps * _np(t), aval.dtype))


def numerical_jvp(f, primals, tangents, eps=EPS):
    """Central finite difference of ``f`` at ``primals`` along ``tangents``."""
    plus = [_add_scaled(p, t, eps) for p, t in zip(primals, tangents)]
    minus = [_add_scaled(p, t, -eps) for p, t in zip(primals, tangents)]
    fp, fm = f(*plus), f(*minus)
    return tree_map(lambda a, b: Array(np.asarray((_np(a).astype(np.complex128 if
                                                                   np.iscomplexobj(_np(a))
                                                                   else np.float64)
                                                   - _np(b)) / (2 * eps))), fp, fm)


def _conj(x):
    a = _np(x)
    return Array(np.conj(a)) if np.iscomplexobj(a) else x


def _inner(xs, ys):
    xl, _ = tree_flatten(xs)
    yl, _ = tree_flatten(ys)
    total = 0.0
    for x, y in zip(xl, yl):
        x, y = _np(x), _np(y)
        if x.dtype == dtypes.float0 or y.dtype == dtypes.float0:
            continue
        total = total + np.sum(np.conj(x).astype(np.complex128) * y).real \
            if np.iscomplexobj(x) or np.iscomplexobj(y) else \
            total + np.sum(x.astype(np.float64) * y.astype(np.float64))
    return total


def check_jvp(f, f_jvp, args, atol=None, rtol=None, eps=EPS, rng=None):
    rng = rng or np.random.default_rng(0)
    tangents = [_rand_like(rng, a) for a in args]
    v_out, t_out = f_jvp(args, tangents)
    v_expected = f(*args)
    check_close(v_out, v_expected, atol, rtol, "(jvp primal output)")
    t_expected = numerical_jvp(f, args, tangents, eps)
    check_close(t_out, t_expected, atol, rtol, "(jvp tangent vs finite differences)")


def check_vjp(f, f_vjp, args, atol=None, rtol=None, eps=EPS, rng=None,
              finite_differences: bool = False):
    """The vjp against the jvp by the inner-product identity; the jvp is forward-mode AD,
    or central finite differences with ``finite_differences`` (as in JAX's check_vjp; for
    functions without forward mode, e.g. custom_vjp ones)."""
    from tracer.api import jvp
    rng = rng or np.random.default_rng(1)
    v_out, vjpfun = f_vjp(*args)
    v_expected = f(*args)
    check_close(v_out, v_expected, atol, rtol, "(vjp primal output)")
    tangents = [_rand_like(rng, a) for a in args]
    cts = tree_map(lambda o: _rand_like(rng, o), v_out)
    # JAX's convention for complex values: the vjp maps conj(ct) to conj(J^H ct), so the
    # inner-product identity holds after conjugating on both sides (no-op for reals).
    ct_in = tree_map(_conj, vjpfun(tree_map(_conj, cts)))
    if finite_differences:
        t_out = numerical_jvp(f, args, tangents, eps)
    else:
        _, t_out = jvp(f, tuple(args), tuple(tangents))
    ip_fwd = _inner(cts, t_out)
    ip_rev = _inner(tangents, ct_in)
    tol = max(_tol(get_aval(a).dtype, atol) for a in args) if args else 1e-5
    np.testing.assert_allclose(ip_fwd, ip_rev, atol=tol * 10, rtol=tol * 10,
                               err_msg="vjp inconsistent with jvp (<J v, u> != <v, J^T u>)")


def check_grads(f, args, order: int = 2, modes=("fwd", "rev"), atol=None, rtol=None, eps=None):
    """Check ``f``'s derivatives to ``order`` in ``modes`` (JAX's ``check_grads``):
    raises AssertionError with the mismatch. Use float64 arguments for tight checks."""
    from tracer.api import jvp, vjp
    args = tuple(Array(np.asarray(a)) if not isinstance(a, Array) else a for a in args)
    eps = eps or EPS

    def _check(order, f, args):
        if "fwd" in modes:
            check_jvp(f, lambda a, t: jvp(f, tuple(a), tuple(t)), args, atol, rtol, eps)
            if order > 1:
                _check(order - 1, lambda *xs: jvp(f, xs, tuple(
                    _rand_like(np.random.default_rng(2), x) for x in xs))[1], args)
        if "rev" in modes:
            # Without "fwd" the function may lack forward mode (custom_vjp): the identity
            # is checked against finite differences, as JAX does.
            check_vjp(f, lambda *a: vjp(f, *a), args, atol, rtol, eps,
                      finite_differences="fwd" not in modes)
            if order > 1:
                def f_vjp(*xs):
                    out, pull = vjp(f, *xs)
                    ct = tree_map(lambda o: _rand_like(np.random.default_rng(3), o), out)
                    return pull(ct)
                _check(order - 1, f_vjp, args)

    _check(order, f, args)


def check_vmap(f, args, in_axes=0, out_axes=0, atol=None, rtol=None):
    """``vmap(f, in_axes, out_axes)(*args)`` against a Python loop of ``f`` over the mapped
    axis, stacked along ``out_axes``."""
    from tracer.api import vmap
    n_args = len(args)
    axes = in_axes if isinstance(in_axes, (tuple, list)) else (in_axes,) * n_args
    sizes = {np.shape(_np(a))[ax] for a, ax in zip(args, axes) if ax is not None}
    assert len(sizes) == 1, f"check_vmap: inconsistent mapped sizes {sizes}"
    n = sizes.pop()
    results = []
    for i in range(n):
        sl = [a if ax is None else Array(np.take(_np(a), i, axis=ax)) for a, ax in zip(args, axes)]
        results.append(f(*sl))
    got = vmap(f, in_axes=tuple(axes), out_axes=out_axes)(*args)
    leaves_list = [tree_flatten(r)[0] for r in results]
    got_leaves, got_tree = tree_flatten(got)
    oax = out_axes if isinstance(out_axes, (tuple, list)) else (out_axes,) * len(got_leaves)
    expected = []
    for k in range(len(got_leaves)):
        if oax[k] is None:
            expected.append(_np(leaves_list[0][k]))
        else:
            expected.append(np.stack([_np(l[k]) for l in leaves_list], axis=oax[k]))
    for g, e in zip(got_leaves, expected):
        g = _np(g)
        assert g.shape == e.shape, f"check_vmap: shape {g.shape} != expected {e.shape}"
        assert g.dtype == e.dtype, f"check_vmap: dtype {g.dtype} != expected {e.dtype}"
        if atol is None and rtol is None:
            np.testing.assert_allclose(g, e, rtol=1e-6 if dtypes.is_inexact(g.dtype) else 0,
                                       atol=1e-6 if dtypes.is_inexact(g.dtype) else 0,
                                       equal_nan=True)
        else:
            np.testing.assert_allclose(g, e, atol=atol or 0, rtol=rtol or 0, equal_nan=True)


def check_jit(f, args, atol=0, rtol=0, static_argnums=()):
    """``jit(f)(*args)`` equals ``f(*args)`` eagerly: same pytree, shapes, dtypes and weak
    types; values bit for bit unless tolerances are given (NaNs compare equal)."""
    from tracer.api import jit
    eager = f(*args)
    got = jit(f, static_argnums=static_argnums)(*args)
    el, et = tree_flatten(eager)
    gl, gt = tree_flatten(got)
    assert et == gt, f"check_jit: output structure {gt} != eager {et}"
    for e, g in zip(el, gl):
        ea, ga = get_aval(e), get_aval(g)
        assert ea.shape == ga.shape and ea.dtype == ga.dtype, \
            f"check_jit: jit gives {ga.str_short()}, eager {ea.str_short()}"
        assert ea.weak_type == ga.weak_type, \
            f"check_jit: weak_type differs (jit {ga.weak_type}, eager {ea.weak_type})"
        if atol == 0 and rtol == 0:
            np.testing.assert_array_equal(_np(g), _np(e))
        else:
            np.testing.assert_allclose(_np(g), _np(e), atol=atol, rtol=rtol, equal_nan=True)
    return got
