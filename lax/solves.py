"""Implicit differentiation: ``custom_linear_solve`` and ``custom_root`` (jax.lax's).

Both run a user's solver (which need not be differentiable: Newton iterations in a
``while_loop``, conjugate gradients...) and define derivatives from the equation the
solution satisfies instead of by differentiating through the solver:

- ``custom_root(f, x0, solve, tangent_solve)``: ``x* = solve(f, x0)`` with ``f(x*) = 0``.
  By the implicit function theorem, for parameters ``p`` that ``f`` closes over,
  ``dx* = -(df/dx)^-1 (df/dp) dp``, where the linear solve is the user's
  ``tangent_solve(g, y)`` with ``g`` the jvp of ``f`` in x at the root. Built on
  ``tracer.custom_jvp``: the rule is the formula above; reverse mode transposes it, so
  ``tangent_solve`` must be linear in ``y`` (``y / g(1.0)``, ``linalg.solve(J, y)``).
- ``custom_linear_solve(matvec, b, solve, transpose_solve)``: ``x = solve(matvec, b)``
  with ``matvec(x) = b``. ``dx = solve(matvec, db - dmatvec(x))``; reverse mode needs the
  transposed system, solved by ``transpose_solve(vecmat, ct)`` with ``vecmat`` the
  transpose of ``matvec``. Forward and reverse mode each need their own solver, which a
  ``custom_jvp`` rule cannot express (its tangent map would be transposed by
  differentiating through ``solve``), so this is a primitive, ``custom_linear_solve``,
  holding the four traced functions (matvec, vecmat, solve, transpose_solve) as closed
  jaxprs, with jvp (itself a linear solve), transpose (the transposed solve), batching
  (all four jaxprs batched) and, under jit, a host step running ``solve``.

Values the functions close over, traced or not, become leading operands (their consts),
so every transformation sees them; derivatives flow to ``b`` and to what ``matvec`` (or
``f``) closes over, never through ``solve``'s own internals.
"""
from __future__ import annotations

import functools

from tracer import dtypes
from tracer.core import get_aval
from tracer.interpreters import ad, batching
from tracer.interpreters import partial_eval as pe
from tracer.interpreters.ad import Zero
from tracer.jaxpr import ClosedJaxpr, eval_jaxpr
from tracer.pytree import tree_flatten, tree_unflatten
from lax.control_flow import (_batch_jaxpr, _check_same_types, _eval_closed,
                              _flatten_operands, _trace_fun, _ControlFlowPrimitive)


def _run(closed: ClosedJaxpr, args):
    """Apply a closed jaxpr (hoisted consts first) under the current transformations."""
    return eval_jaxpr(closed.jaxpr, closed.consts, *args)


def _split(xs, lengths):
    out, i = [], 0
    for n in lengths:
        out.append(list(xs[i:i + n]))
        i += n
    out.append(list(xs[i:]))
    return out


def _check_like_b(fname, what, tree, avals, b_tree, b_avals, has_aux):
    """The output of ``what`` (its solution part, with ``has_aux``) must match b's
    structure and types."""
    if has_aux:
        out = tree_unflatten(tree, list(range(tree.num_leaves)))
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise TypeError(f"{fname}: with has_aux=True, {what} must return a pair "
                            "(solution, aux)")
        idx, tree = tree_flatten(out[0])
        avals = [avals[i] for i in idx]
    _check_same_types(fname, f"the output of {what} and b", what, tree, avals, "b", b_tree,
                      b_avals, root="value")


# ================================== custom_linear_solve ====================================

def custom_linear_solve(matvec, b, solve, transpose_solve=None, symmetric=False,
                        has_aux=False):
    """``solve(matvec, b)`` with derivatives defined by implicit differentiation of
    ``matvec(x) == b`` (jax.lax.custom_linear_solve).

    ``matvec``: a linear function (differentiable in what it closes over) from pytrees
    like ``b`` to pytrees like ``b``. ``solve(matvec, b)`` returns x with ``matvec(x) ==
    b`` (not checked; need not be differentiable). ``transpose_solve(vecmat, b)`` solves
    the transposed system, ``vecmat`` being matvec's transpose (computed by autodiff); it
    is required for reverse mode unless ``symmetric=True`` (then ``solve`` serves).
    ``has_aux``: the solvers return ``(x, aux)``; aux gets zero derivatives.

    Derivatives: w.r.t. ``b`` and what ``matvec`` closes over, as if x were the exact
    solution. TypeError when a function returns the wrong structure, shapes or dtypes, and
    (at differentiation time) when reverse mode needs a missing ``transpose_solve``."""
    fname = "custom_linear_solve"
    if transpose_solve is None and symmetric:
        transpose_solve = solve
    b_leaves, b_tree = _flatten_operands(b, fname, "b")
    b_avals = [get_aval(x) for x in b_leaves]

    args_tree = tree_flatten((tree_unflatten(b_tree, b_leaves),))[1]

    def traced(fun, what, aux):
        closed, consts, out_tree = _trace_fun(fun, args_tree, b_avals, fname, what)
        # the transpose of matvec is traced from a vjp: drop its unused primal part
        closed = ClosedJaxpr(pe.dce_jaxpr(closed.jaxpr)[0], closed.consts)
        out_avals = closed.out_avals
        _check_like_b(fname, what, out_tree, out_avals, b_tree, b_avals, aux)
        return closed, consts, out_tree

    mv, mv_consts, _ = traced(matvec, "matvec", False)
    sv, sv_consts, out_tree = traced(functools.partial(solve, matvec), "solve", has_aux)
    if transpose_solve is None:
        vm = tsv = None
        vm_consts, tsv_consts = [], []
    else:
        if symmetric:
            vecmat = matvec
        else:
            vecmat = _transpose_linear(matvec, b_tree, b_avals)
        vm, vm_consts, _ = traced(vecmat, "the transpose of matvec", False)
        if not symmetric:
            # the solver calls the traced (dead-code-free) transpose, not the vjp itself
            def vecmat(y, vm=vm, vm_consts=vm_consts):
                y_leaves, _ = tree_flatten(y)
                return tree_unflatten(b_tree, _run(vm, [*vm_consts, *y_leaves]))
        tsv, tsv_consts, tout_tree = traced(functools.partial(transpose_solve, vecmat),
                                            "transpose_solve", has_aux)
        if tout_tree != out_tree:
            raise TypeError(f"{fname}: transpose_solve returns {tout_tree}, solve returns "
                            f"{out_tree}; they must have the same structure")
    lengths = (len(mv_consts), len(vm_consts), len(sv_consts), len(tsv_consts))
    args = [*mv_consts, *vm_consts, *sv_consts, *tsv_consts, *b_leaves]
    outs = linear_solve_p.bind(*args, const_lengths=lengths, jaxprs=(mv, vm, sv, tsv))
    return tree_unflatten(out_tree, outs)


def _transpose_linear(fun, tree, avals):
    """The transpose of the linear pytree function ``fun`` (a vjp at zero)."""
    from lax.shapes import full

    def vecmat(y):
        y_leaves, y_tree = tree_flatten(y)
        if y_tree != tree:
            raise TypeError(f"custom_linear_solve: the transpose of matvec takes {tree}, got "
                            f"{y_tree}")

        def flat(*xs):
            out_leaves, _ = tree_flatten(fun(tree_unflatten(tree, list(xs))))
            return out_leaves

        zeros = [full(a.shape, 0, a.dtype) for a in avals]
        _, f_vjp, _ = ad.vjp_flat(flat, zeros)
        return tree_unflatten(tree, f_vjp(list(y_leaves)))

    return vecmat


def _ls_abstract_eval(*avals, const_lengths, jaxprs):
    return list(jaxprs[2].out_avals)


def _ls_impl(*args, const_lengths, jaxprs):
    _, _, sv_c, _, b = _split(args, const_lengths)
    return _eval_closed(jaxprs[2], sv_c + b)


def _ls_jvp(primals, tangents, *, const_lengths, jaxprs):
    mv_c, _, _, _, _ = _split(primals, const_lengths)
    mv_t, _, _, _, b_t = _split(tangents, const_lengths)
    outs = linear_solve_p.bind(*primals, const_lengths=const_lengths, jaxprs=jaxprs)
    nb = len(b_t)
    x = outs[:nb]
    # d(matvec(x) - b) = 0  =>  matvec(dx) = db - dmatvec(x)
    rhs = [None if type(t) is Zero else t for t in b_t]
    if any(type(t) is not Zero and dtypes.is_inexact(get_aval(c).dtype)
           for c, t in zip(mv_c, mv_t)):
        tans = [t if type(t) is not Zero and dtypes.is_inexact(get_aval(c).dtype)
                else Zero(get_aval(c).at_least_vspace()) for c, t in zip(mv_c, mv_t)]
        _, mv_dot = ad.jvp_flat(lambda *cs: _run(jaxprs[0], [*cs, *x]), mv_c, tans,
                                instantiate=False)
        from lax.elementwise import neg, sub
        rhs = [(None if type(d) is Zero else neg(d)) if r is None else
               (r if type(d) is Zero else sub(r, d)) for r, d in zip(rhs, mv_dot)]
    zero_outs = [Zero(get_aval(o).at_least_vspace().strip_weak_type()) for o in outs]
    if all(r is None for r in rhs):
        return outs, zero_outs
    rhs = [ad.zeros_like_aval(get_aval(xi).at_least_vspace().strip_weak_type()) if r is None
           else r for r, xi in zip(rhs, x)]
    n_c = sum(const_lengths)
    x_dot = linear_solve_p.bind(*primals[:n_c], *rhs, const_lengths=const_lengths,
                                jaxprs=jaxprs)[:nb]
    return outs, list(x_dot) + zero_outs[nb:]


def _ls_transpose(cts, *args, const_lengths, jaxprs):
    mv_c, vm_c, sv_c, tsv_c, b = _split(args, const_lengths)
    if any(ad.is_undefined_primal(c) for c in mv_c + vm_c + sv_c + tsv_c):
        raise ValueError("custom_linear_solve transpose: the solution is linear in b only, "
                         "not in the values matvec or the solvers close over")
    if jaxprs[3] is None:
        raise TypeError("custom_linear_solve: reverse-mode differentiation needs "
                        "transpose_solve (or symmetric=True when matvec is symmetric)")
    nb = len(b)
    cts_x = [ad.instantiate_zeros(Zero(a.aval.at_least_vspace().strip_weak_type()))
             if type(ct) is Zero else ct for ct, a in zip(cts[:nb], b)]
    if all(type(ct) is Zero for ct in cts[:nb]):
        return [None] * len(args)
    t_lengths = (const_lengths[1], const_lengths[0], const_lengths[3], const_lengths[2])
    t_jaxprs = (jaxprs[1], jaxprs[0], jaxprs[3], jaxprs[2])
    ct_b = linear_solve_p.bind(*vm_c, *mv_c, *tsv_c, *sv_c, *cts_x,
                               const_lengths=t_lengths, jaxprs=t_jaxprs)[:nb]
    return [None] * (len(args) - nb) + list(ct_b)


def _ls_batch(axis_data, vals, dims, *, const_lengths, jaxprs):
    if all(d is None for d in dims):
        return linear_solve_p.bind(*vals, const_lengths=const_lengths,
                                   jaxprs=jaxprs), [None] * len(jaxprs[2].out_avals)
    size = axis_data.size
    parts = _split(list(zip(vals, dims)), const_lengths)
    b = parts[-1]
    new_jaxprs, new_vals = [], []
    for closed, consts in zip(jaxprs, parts[:-1]):
        if closed is None:
            new_jaxprs.append(None)
            continue
        in_batched = [d is not None for _, d in consts] + [True] * len(b)
        bj, _ = _batch_jaxpr(closed, axis_data, in_batched,
                             [True] * len(closed.out_avals))
        new_jaxprs.append(bj)
        new_vals += [v if d is None else batching.moveaxis(v, d, 0) for v, d in consts]
    # x and b are batched in every function, so that matvec maps batched to batched
    new_vals += [batching.bdim_at_front(v, d, size) for v, d in b]
    outs = linear_solve_p.bind(*new_vals, const_lengths=const_lengths,
                               jaxprs=tuple(new_jaxprs))
    return outs, [0] * len(outs)


linear_solve_p = _ControlFlowPrimitive("custom_linear_solve")
linear_solve_p.def_abstract_eval(_ls_abstract_eval)
linear_solve_p.def_impl(_ls_impl)
ad.primitive_jvps[linear_solve_p] = _ls_jvp
ad.primitive_transposes[linear_solve_p] = _ls_transpose
batching.primitive_batchers[linear_solve_p] = _ls_batch
batching.batch_when_unmapped.add(linear_solve_p)


# ======================================= custom_root =======================================

def custom_root(f, initial_guess, solve, tangent_solve, has_aux=False):
    """``solve(f, initial_guess)``, a root of ``f``, differentiated by the implicit
    function theorem (jax.lax.custom_root).

    ``f`` maps a pytree like ``initial_guess`` to one like it. ``solve(f, x0)`` returns x
    with ``f(x) == 0`` (assumed, not checked; need not be differentiable).
    ``tangent_solve(g, y)`` solves the linear system ``g(x) == y``, ``g`` being ``f``'s
    jvp in x at the root: ``lambda g, y: y / g(1.0)`` for scalars, a
    ``linalg.solve(jacobian(g)(y), y)`` for small vectors. ``has_aux``: ``solve`` returns
    ``(solution, aux)``; aux gets zero derivatives.

    Derivatives flow to what ``f`` closes over (``dx = -tangent_solve(g, df/dp dp)``), in
    forward and reverse mode (reverse mode needs ``tangent_solve`` linear in y). TypeError
    when ``f`` or ``solve`` returns the wrong structure, shapes or dtypes."""
    fname = "custom_root"
    g_leaves, g_tree = _flatten_operands(initial_guess, fname, "initial_guess")
    g_avals = [get_aval(x) for x in g_leaves]
    args_tree = tree_flatten((tree_unflatten(g_tree, g_leaves),))[1]
    f_j, f_c, f_tree = _trace_fun(f, args_tree, g_avals, fname, "f")
    _check_same_types(fname, "the output of f and initial_guess", "f", f_tree,
                      f_j.out_avals, "initial_guess", g_tree, g_avals, root="value")
    s_j, s_c, out_tree = _trace_fun(functools.partial(solve, f), args_tree, g_avals, fname,
                                    "solve")
    _check_like_b(fname, "solve", out_tree, s_j.out_avals, g_tree, g_avals, has_aux)
    n = len(g_leaves)

    def linearize_and_solve(x, y):
        xs, _ = tree_flatten(x)

        def g(t):
            ts, t_tree = tree_flatten(t)
            if t_tree != g_tree:
                raise TypeError(f"{fname}: the linear map given to tangent_solve takes "
                                f"{g_tree}, got {t_tree}")
            _, out = ad.jvp_flat(lambda *v: _run(f_j, [*f_c, *v]), xs, list(ts))
            return tree_unflatten(g_tree, out)

        return tangent_solve(g, y)

    guess = tree_unflatten(g_tree, g_leaves)
    ls_tree = tree_flatten((guess, guess))[1]
    ls_j, ls_c, ls_out = _trace_fun(linearize_and_solve, ls_tree, g_avals + g_avals, fname,
                                    "tangent_solve")
    _check_same_types(fname, "the output of tangent_solve and initial_guess",
                      "tangent_solve", ls_out, ls_j.out_avals, "initial_guess", g_tree,
                      g_avals, root="value")
    lengths = (len(f_c), len(s_c), len(ls_c))
    outs = _custom_root()(lengths, (f_j, s_j, ls_j, n), *f_c, *s_c, *ls_c, *g_leaves)
    return tree_unflatten(out_tree, outs)


_custom_root_fn = None


def _custom_root():
    """The custom_jvp function (tracer.custom_derivatives sits above lax in the import
    order: built on first use)."""
    global _custom_root_fn
    if _custom_root_fn is None:
        from tracer.custom_derivatives import custom_jvp

        def root(lengths, jaxprs, *args):
            _, s_c, _, guess = _split(args, lengths)
            return list(_run(jaxprs[1], s_c + guess))

        root = custom_jvp(root, nondiff_argnums=(0, 1))

        @root.defjvp
        def _root_jvp(lengths, jaxprs, primals, tangents):
            f_j, _, ls_j, n = jaxprs
            f_c, _, ls_c, _ = _split(primals, lengths)
            f_t = _split(tangents, lengths)[0]
            sol = root(lengths, jaxprs, *primals)
            x = sol[:n]
            # f(p, x*(p)) = 0  =>  df/dx dx* = -df/dp dp
            tans = [t if dtypes.is_inexact(get_aval(c).dtype)
                    else Zero(get_aval(c).at_least_vspace()) for c, t in zip(f_c, f_t)]
            _, rhs = ad.jvp_flat(lambda *cs: _run(f_j, [*cs, *x]), f_c, tans)
            from lax.elementwise import neg
            x_dot = [neg(v) for v in _run(ls_j, [*ls_c, *x, *rhs])]
            aux_dot = [ad.zeros_like_aval(get_aval(a).at_least_vspace()) for a in sol[n:]]
            return sol, x_dot + aux_dot

        _custom_root_fn = root
    return _custom_root_fn
