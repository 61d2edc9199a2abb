"""Control flow: Conditional (``cond``, ``switch``), While (``while_loop``, ``fori_loop``),
Scan (``scan``, ``map``), ``associative_scan``, OptimizationBarrier, CompositeCall and
Call (``closed_call``) — XLA Operation semantics sections of those names.

Each primitive holds closed sub-jaxprs in its params (``branches``; ``cond_jaxpr`` and
``body_jaxpr``; ``jaxpr``) and applies them to its operands. The wrappers trace the
user's Python functions once, over abstract values, with
``partial_eval.trace_to_jaxpr_dynamic``; whatever the functions close over (arrays,
tracers of enclosing transformations) is hoisted into leading operands, as in JAX, so
the sub-jaxprs themselves close over nothing and every transformation sees every value.

Operand layout (as in JAX's jaxprs):

- ``cond[branches=(b0, b1, ...)] index *ops`` runs ``branches[index]``; an index out of
  [0, N) runs the last branch (the spec's default branch). ``lax.cond`` passes
  ``int32(pred)`` with branches (false, true); ``lax.switch`` clamps its index first, as
  ``jax.lax.switch`` does.
- ``while[cond_jaxpr body_jaxpr cond_nconsts body_nconsts] *cond_consts *body_consts
  *carry``.
- ``scan[jaxpr num_consts num_carry length reverse unroll] *consts *init *xs``; the body
  maps (consts, carry, x) to (carry, y); xs and ys are stacked along axis 0.

Rules beside each primitive: abstract eval (types checked), NumPy impl (runs the
sub-jaxprs with ``eval_jaxpr``), jvp, batching, partial evaluation (for the
PartialEvalTrace of ``linearize`` and for jaxprs nested in other jaxprs), transpose and
DCE. Reverse mode through ``scan`` saves residuals per iteration (stacked, like JAX);
loop-invariant residuals are computed once. ``while_loop`` is forward-differentiable
only: its transpose raises JAX's error pointing to ``scan`` / static ``fori_loop``.
"""
from __future__ import annotations

import builtins
import functools
import operator

import numpy as np

from tracer import core, dtypes
from tracer.config import config
from tracer.core import (Array, Primitive, ShapedArray, Tracer, get_aval, new_base_main,
                         to_numpy, valid_jaxtype)
from tracer.errors import ConcretizationTypeError
from tracer.interpreters import ad, batching
from tracer.interpreters import partial_eval as pe
from tracer.interpreters.ad import Zero
from tracer.interpreters.call import closed_call_p
from tracer.jaxpr import (ClosedJaxpr, DropVar, Jaxpr, JaxprEqn, Literal, Var, eval_jaxpr,
                          eval_jaxpr_impls, impl_runner, numpy_tier_scope)
from tracer.pytree import (flatten_fun, keystr, tree_flatten, tree_flatten_with_path,
                           tree_structure, tree_unflatten)

_map, _zip = builtins.map, builtins.zip


# ===================================== shared helpers ======================================

class _ControlFlowPrimitive(Primitive):
    """A primitive holding sub-jaxprs. Like the call primitives, its ``bind`` also reaches
    a vmap whose axis name a collective inside uses, even when no operand is batched by
    that vmap (``lax.cond(p, lambda: lax.axis_index('i'), ...)``)."""

    multiple_results = True

    def bind(self, *args, **params):
        if batching.bound_axis_names():
            names: set = set()
            for j in _param_jaxprs(params):
                names |= batching.jaxpr_axis_names(j.jaxpr)
            if names:
                return batching.bind_with_axes(self, args, params, sorted(names, key=repr),
                                               self.name, strict=False)
        return Primitive.bind(self, *args, **params)


def _param_jaxprs(params):
    for v in params.values():
        for item in (v if isinstance(v, (tuple, list)) else (v,)):
            if isinstance(item, ClosedJaxpr):
                yield item


def _uses_axis(axis_data, jaxprs) -> bool:
    if axis_data.name is None:
        return False
    return any(axis_data.name in batching.jaxpr_axis_names(j.jaxpr) for j in jaxprs)


def _fun_name(f) -> str:
    return getattr(f, "__name__", None) or type(f).__name__


def _check_operand(x, fname, what):
    if isinstance(x, (Tracer, Array)):
        return x
    if not valid_jaxtype(x):
        raise TypeError(f"{fname}: {what} of type {type(x).__name__} is not a valid array "
                        "type (expected an Array, a NumPy array or a Python scalar)")
    return x


def _flatten_operands(tree, fname, what):
    pairs, treedef = tree_flatten_with_path(tree)
    leaves = [_check_operand(x, fname, f"{what}{keystr(p)}") for p, x in pairs]
    return leaves, treedef


def _trace(flat_fun, in_avals):
    """Trace ``flat_fun`` to a closed jaxpr whose consts are hoisted: returns
    (ClosedJaxpr taking the consts as leading invars, consts)."""
    jaxpr, consts = pe.trace_to_jaxpr_dynamic(flat_fun, in_avals)
    return ClosedJaxpr(pe.convert_constvars_jaxpr(jaxpr), []), list(consts)


def _trace_fun(fun, in_tree, in_avals, fname, what):
    """Trace the Python function ``fun(*args)`` (args: the pytree ``in_tree`` of
    ``in_avals``). Returns (ClosedJaxpr with hoisted consts as leading invars, consts,
    out_tree)."""

    def check_out(pairs):
        for p, leaf in pairs:
            if not isinstance(leaf, (Tracer, Array)) and not valid_jaxtype(leaf):
                raise TypeError(f"{fname}: {what} must return arrays, but output{keystr(p)} "
                                f"is a {type(leaf).__name__}")

    flat_fun, out = flatten_fun(fun, in_tree, check_out=check_out)
    closed, consts = _trace(flat_fun, in_avals)
    return closed, consts, out.tree


def _eval_closed(closed: ClosedJaxpr, args):
    """Run a closed jaxpr through its NumPy impls (on a fresh trace stack)."""
    with new_base_main():
        return eval_jaxpr_impls(closed.jaxpr, closed.consts, [to_numpy(a) for a in args])


def _typematch(a, b) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype


def _join_weak(avals_list):
    """Outputs of alternatives (branches) are weakly typed only when all of them are."""
    return [ShapedArray(col[0].shape, col[0].dtype, builtins.all(a.weak_type for a in col))
            for col in _zip(*avals_list)]


def _paths(tree):
    n = tree.num_leaves
    return [keystr(p) for p, _ in tree_flatten_with_path(tree_unflatten(tree, [0] * n))[0]]


def _check_same_types(fname, what, label_a, tree_a, avals_a, label_b, tree_b, avals_b,
                      root="output", fix=""):
    """TypeError naming the pytree path and both types where two structures differ."""
    if tree_a != tree_b:
        raise TypeError(f"{fname}: {what} must have the same pytree structure, but "
                        f"{label_a} gives {tree_a} and {label_b} gives {tree_b}." + (" " + fix if fix else ""))
    diffs = []
    for p, a, b in _zip(_paths(tree_a), avals_a, avals_b):
        if not _typematch(a, b):
            why = "shapes" if a.shape != b.shape else "dtypes"
            diffs.append(f"  {root}{p}: {label_a} has type {a.str_short()} but {label_b} has "
                         f"type {b.str_short()} (the {why} differ)")
    if diffs:
        raise TypeError(f"{fname}: {what} must have identical types (shapes and dtypes), "
                        f"but they differ:\n" + "\n".join(diffs) + (f"\n{fix}" if fix else ""))


def _promote_weak_carry(leaves, in_avals, out_avals):
    """Weakly typed initial carries (Python scalars) adopt the dtype the body gives them,
    as in JAX (``fori_loop(0, n, lambda i, x: x * w32, 1.0)`` carries float32). Returns
    (new leaves, changed)."""
    changed = False
    new = list(leaves)
    for i, (a, b) in enumerate(_zip(in_avals, out_avals)):
        if a.weak_type and a.shape == b.shape and a.dtype != b.dtype:
            from lax.elementwise import convert_element_type
            dt = dtypes.result_type(Array(np.zeros((), a.dtype), weak_type=True),
                                    Array(np.zeros((), b.dtype), weak_type=b.weak_type))
            if dt == b.dtype:
                new[i] = convert_element_type(leaves[i], dt)
                changed = True
    return new, changed


def _tangent_aval(aval):
    return aval.at_least_vspace().strip_weak_type()


def _is_inexact(aval) -> bool:
    return dtypes.is_inexact(aval.dtype)


def _nonzero(t, aval) -> bool:
    return type(t) is not Zero and _is_inexact(aval)


def _split(xs, *sizes):
    out, start = [], 0
    for n in sizes:
        out.append(list(xs[start:start + n]))
        start += n
    out.append(list(xs[start:]))
    return out


def _or(a, b):
    return [x or y for x, y in _zip(a, b)]


def _jvp_jaxpr(closed: ClosedJaxpr, nonzeros, instantiate):
    """The jvp of a closed jaxpr: (ClosedJaxpr taking (primals, nonzero tangents) and
    returning (primals_out, tangents of the outputs in ``out_nz``), out_nz). An output's
    tangent is included when it is nonzero or ``instantiate`` asks for it (inexact outputs
    only: integer outputs have no tangent)."""
    in_avals = closed.in_avals
    n = len(in_avals)
    nonzeros = [nz and _is_inexact(a) for nz, a in _zip(nonzeros, in_avals)]
    t_avals = [_tangent_aval(a) for a, nz in _zip(in_avals, nonzeros) if nz]
    box = []

    def fun(*args):
        primals, it = args[:n], iter(args[n:])
        tans = [next(it) if nz else Zero(a.at_least_vspace()) for a, nz in _zip(in_avals,
                                                                                 nonzeros)]
        outs, touts = ad.jvp_flat(functools.partial(eval_jaxpr, closed.jaxpr, closed.consts),
                                  primals, tans, instantiate=False)
        out_nz = [(type(t) is not Zero or inst) and _is_inexact(get_aval(o))
                  for o, t, inst in _zip(outs, touts, instantiate)]
        box.append(out_nz)
        t_out = [ad.instantiate_zeros(t) if type(t) is Zero else t
                 for t, nz in _zip(touts, out_nz) if nz]
        return [*outs, *t_out]

    new = pe.trace_to_closed_jaxpr(fun, list(in_avals) + t_avals)
    return new, box[0]


def _batched_aval(aval, size, axis=0):
    shape = list(aval.shape)
    shape.insert(axis, size)
    return aval.update(shape=tuple(shape))


def _batch_jaxpr(closed: ClosedJaxpr, axis_data, in_batched, instantiate):
    """Batch a closed jaxpr over axis 0 of the inputs marked in ``in_batched``: returns
    (ClosedJaxpr, out_batched); batched outputs carry the batch axis at 0, and an output
    is batched when it depends on a batched input or ``instantiate`` asks for it."""
    size = axis_data.size
    in_avals = [_batched_aval(a, size) if b else a for a, b in _zip(closed.in_avals,
                                                                     in_batched)]
    box = []

    def fun(*args):
        dims = [0 if b else None for b in in_batched]
        outs, out_dims = batching.vmap_flat(
            functools.partial(eval_jaxpr, closed.jaxpr, closed.consts), size, axis_data.name,
            dims, list(args), axis_data.group)
        out_bat = [d is not None or inst for d, inst in _zip(out_dims, instantiate)]
        box.append(out_bat)
        return [batching.matchaxis(size, d, 0, o) if b else o
                for o, d, b in _zip(outs, out_dims, out_bat)]

    new = pe.trace_to_closed_jaxpr(fun, in_avals)
    return new, box[0]


def _permute_jaxpr(closed: ClosedJaxpr, in_order, out_order=None) -> ClosedJaxpr:
    """A closed jaxpr whose invars (and outvars) are the old ones taken in the given order."""
    j = closed.jaxpr
    invars = [j.invars[i] for i in in_order]
    outvars = j.outvars if out_order is None else [j.outvars[i] for i in out_order]
    return ClosedJaxpr(Jaxpr(j.constvars, invars, j.eqns, outvars), closed.consts)


def _open(closed: ClosedJaxpr) -> Jaxpr:
    """The jaxpr taking the closed consts as leading invars."""
    return pe.convert_constvars_jaxpr(closed.jaxpr)


def _transpose_jaxpr(closed: ClosedJaxpr, linear, ct_nonzero):
    """A closed jaxpr mapping (non-linear inputs, nonzero output cotangents) to the
    cotangents of the ``linear`` inputs (zeros instantiated)."""
    in_avals = closed.in_avals
    res_avals = [a for a, lin in _zip(in_avals, linear) if not lin]
    ct_avals = [_tangent_aval(a) for a in closed.out_avals]

    def fun(*args):
        res, cts = args[:len(res_avals)], iter(args[len(res_avals):])
        it = iter(res)
        call_args = [ad.UndefinedPrimal(a) if lin else next(it)
                     for a, lin in _zip(in_avals, linear)]
        call_cts = [next(cts) if nz else Zero(a) for a, nz in _zip(ct_avals, ct_nonzero)]
        outs = ad.backward_pass(_open(closed), list(closed.consts) + call_args, call_cts)
        lin_avals = [a for a, lin in _zip(in_avals, linear) if lin]
        return [_instantiate(o, a) for o, a in _zip(outs, lin_avals)]

    return pe.trace_to_closed_jaxpr(
        fun, res_avals + [a for a, nz in _zip(ct_avals, ct_nonzero) if nz])


def _instantiate(ct, aval):
    if type(ct) is Zero or ct is None:
        return ad.zeros_like_aval(_tangent_aval(aval))
    return ct


def _stage(trace, primitive, tracers, params, avals_out):
    """Stage one equation on the PartialEvalTrace (all inputs made unknown)."""
    tracers_in = [trace.instantiate_const(t) for t in tracers]
    outs = [pe.PartialEvalTracer(trace, pe.PartialVal.unknown(a), None) for a in avals_out]
    recipe = pe.JaxprEqnRecipe(primitive, tracers_in, params, list(avals_out),
                               [pe._WeakRef(t) for t in outs])
    for t in outs:
        t.recipe = recipe
    return outs


def _known_tracer(trace, val):
    return trace.instantiate_const(pe.PartialEvalTracer(trace, pe.PartialVal.known(val), None))


def _stage_all(primitive):
    """Default partial evaluation of an equation with some unknown input: all of it is
    staged (the rule of primitives with no better one)."""

    def rule(trace, tracers, **params):
        from tracer.core import abstract_eval_cached
        avals_out = abstract_eval_cached(primitive, [t.aval for t in tracers], params)
        return _stage(trace, primitive, tracers, params, avals_out)

    return rule


def _res_vars_for(unks_in, eqn):
    return [x for x, u in _zip(eqn.invars, unks_in) if not u and type(x) is Var]


def _dce_closed(closed: ClosedJaxpr, used_outputs, keep_inputs):
    """DCE a closed jaxpr: only the used outputs remain, and the invars marked in
    ``keep_inputs``."""
    j, _ = pe.dce_jaxpr(closed.jaxpr, used_outputs)
    invars = [v for v, k in _zip(j.invars, keep_inputs) if k]
    return ClosedJaxpr(Jaxpr(j.constvars, invars, j.eqns, j.outvars), closed.consts)


def _used_inputs(closed: ClosedJaxpr, used_outputs):
    _, used = pe.dce_jaxpr(closed.jaxpr, used_outputs)
    return used


# ================================== Conditional ============================================

_NO_OPERAND = object()


def cond(pred, true_fun, false_fun, *operands, operand=_NO_OPERAND):
    """``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``, staged as one
    ``cond`` equation, so that a traced ``pred`` works under jit/vmap/grad
    (``jax.lax.cond``; XLA 'Conditional').

    ``pred``: a scalar; bool, or a number (nonzero is true, as in JAX). ``true_fun`` and
    ``false_fun`` take the same operands (a pytree; none at all is allowed) and must
    return the same pytree structure with identical shapes and dtypes. Only the selected
    branch runs, except under vmap with a batched ``pred``, where both run and the result
    is selected element-wise. The old form ``cond(pred, true_operand, true_fun,
    false_operand, false_fun)`` is accepted too.

    Raises TypeError for a non-scalar or non-numeric predicate, non-callable branches, or
    branches whose outputs differ (naming the output's pytree path and both types).
    """
    if operand is not _NO_OPERAND:
        if operands:
            raise TypeError("cond: pass operands either positionally or with operand=, not "
                            "both")
        operands = (operand,)
    if (not callable(true_fun) and callable(false_fun) and len(operands) == 2
            and callable(operands[1])):
        # cond(pred, true_operand, true_fun, false_operand, false_fun)
        true_op, t_fun, false_op, f_fun = true_fun, false_fun, operands[0], operands[1]
        return cond(pred, lambda ops: t_fun(ops[0]), lambda ops: f_fun(ops[1]),
                    (true_op, false_op))
    if not (callable(true_fun) and callable(false_fun)):
        raise TypeError("cond: true_fun and false_fun must be callable, got "
                        f"{type(true_fun).__name__} and {type(false_fun).__name__}")
    pred = _check_operand(pred, "cond", "pred")
    aval = get_aval(pred)
    if aval.shape != ():
        raise TypeError(f"cond: the predicate must be a scalar (bool[] or a number), got "
                        f"{aval.str_short()}; reduce it (e.g. with .all() or .any()) or use "
                        "lax.select / tracer.numpy.where for an element-wise choice")
    if aval.dtype != dtypes.bool_:
        if dtypes.is_integer(aval.dtype) or dtypes.is_floating(aval.dtype):
            from lax.elementwise import ne
            pred = ne(pred, Array(np.zeros((), aval.dtype)))
        else:
            raise TypeError(f"cond: the predicate must be bool[] (or a real number), got "
                            f"{aval.str_short()}")
    if config.disable_jit and not isinstance(pred, Tracer):
        return (true_fun if bool(np.asarray(to_numpy(pred))) else false_fun)(*operands)
    from lax.elementwise import convert_element_type
    index = convert_element_type(pred, dtypes.int32)
    return _cond(index, (false_fun, true_fun), operands, "cond", ("false_fun", "true_fun"))


def switch(index, branches, *operands, operand=_NO_OPERAND):
    """``branches[index](*operands)`` with ``index`` clamped into [0, len(branches) - 1]
    (``jax.lax.switch``; XLA 'Conditional' with branch computations, whose own rule for an
    out-of-range index, the last branch, is what the ``cond`` primitive implements).

    So ``switch(-1, branches)`` runs ``branches[0]``, as in JAX, where the spec's
    Conditional (StableHLO ``case``) given -1 runs the last branch: JAX too clamps in
    ``switch`` and binds a cond primitive that runs the last branch. Binding
    ``lax.cond_p`` directly gives the spec's rule (eager, jit, vmap and grad alike).

    ``index``: an integer scalar. ``branches``: a non-empty sequence of callables taking
    the same operands and returning identical pytrees of shapes and dtypes.
    Raises TypeError for a non-integer or non-scalar index and mismatched branch outputs,
    ValueError for no branches.
    """
    if operand is not _NO_OPERAND:
        if operands:
            raise TypeError("switch: pass operands either positionally or with operand=, not "
                            "both")
        operands = (operand,)
    branches = tuple(branches)
    if not branches:
        raise ValueError("switch: empty branch sequence")
    for i, b in enumerate(branches):
        if not callable(b):
            raise TypeError(f"switch: branches[{i}] is a {type(b).__name__}, not a callable")
    index = _check_operand(index, "switch", "index")
    aval = get_aval(index)
    if aval.shape != ():
        raise TypeError(f"switch: the index must be an integer scalar, got {aval.str_short()}")
    if not dtypes.is_integer(aval.dtype):
        raise TypeError(f"switch: the index must be an integer scalar, got {aval.str_short()}"
                        "; convert it with astype(int32)")
    if len(branches) == 1:
        return branches[0](*operands)
    from lax.elementwise import clamp, convert_element_type
    # Clamp in the index's own dtype, then narrow: a huge int64 index must not wrap.
    lo, hi = Array(np.zeros((), aval.dtype)), Array(np.asarray(len(branches) - 1, aval.dtype))
    index = clamp(lo, index, hi)
    if config.disable_jit and not isinstance(index, Tracer):
        return branches[int(np.asarray(to_numpy(index)))](*operands)
    index = convert_element_type(index, dtypes.int32)
    names = tuple(f"branches[{i}]" for i in range(len(branches)))
    return _cond(index, branches, operands, "switch", names)


def _cond(index, funs, operands, fname, names):
    leaves, in_tree = _flatten_operands(tuple(operands), fname, "operand")
    in_avals = [get_aval(x) for x in leaves]
    traced = [_trace_fun(f, in_tree, in_avals, fname, name) for f, name in _zip(funs, names)]
    jaxprs0, _, tree0 = traced[0]
    # Report mismatches against the first branch the user wrote (true_fun for cond).
    ref = len(traced) - 1 if fname == "cond" else 0
    for i, (j, _, tree) in enumerate(traced):
        if i != ref:
            _check_same_types(fname, "branch outputs", names[ref], traced[ref][2],
                              traced[ref][0].out_avals, names[i], tree, j.out_avals,
                              fix="Revise the branches so that all output types match.")
    branches, consts = _join_consts([(j, c) for j, c, _ in traced])
    outs = cond_p.bind(index, *consts, *leaves, branches=tuple(branches))
    return tree_unflatten(tree0, outs)


def _join_consts(traced):
    """Branches traced separately close over different values: each branch gets all of
    them as leading operands (ignoring the others')."""
    all_consts, pos = [], {}
    for _, consts in traced:
        for c in consts:
            if id(c) not in pos:
                pos[id(c)] = len(all_consts)
                all_consts.append(c)
    out = []
    for closed, consts in traced:
        j = closed.jaxpr
        nc = len(consts)
        mine = {pos[id(c)]: v for c, v in _zip(consts, j.invars[:nc])}
        invars = [mine.get(k) or Var(get_aval(c)) for k, c in enumerate(all_consts)]
        out.append(ClosedJaxpr(Jaxpr(j.constvars, invars + j.invars[nc:], j.eqns, j.outvars),
                               closed.consts))
    return out, all_consts


def _cond_abstract_eval(index, *ops, branches):
    if index.shape != () or index.dtype != dtypes.int32:
        raise TypeError(f"cond: the branch index must be int32[], got {index.str_short()}")
    if not branches:
        raise TypeError("cond: needs at least one branch")
    for i, b in enumerate(branches):
        if len(b.in_avals) != len(ops) or not builtins.all(
                _typematch(a, e) for a, e in _zip(ops, b.in_avals)):
            raise TypeError(
                f"cond: branch {i} takes ({', '.join(a.str_short() for a in b.in_avals)}) "
                f"but the operands are ({', '.join(a.str_short() for a in ops)})")
        outs0 = branches[0].out_avals
        if len(b.out_avals) != len(outs0) or not builtins.all(
                _typematch(a, e) for a, e in _zip(b.out_avals, outs0)):
            raise TypeError(
                f"cond: branch {i} returns ({', '.join(a.str_short() for a in b.out_avals)}) "
                f"but branch 0 returns ({', '.join(a.str_short() for a in outs0)})")
    return _join_weak([b.out_avals for b in branches])


def _clamp_branch(i, n):
    # the spec's Conditional: an index < 0 or >= N runs branch N-1, the default branch
    # (not a clamp: -1 runs the last one); the compiled driver and the batching rule do
    # the same
    return n - 1 if i < 0 or i >= n else i


def _cond_impl(index, *ops, branches):
    i = _clamp_branch(int(index), len(branches))
    return _eval_closed(branches[i], ops)


def _cond_jvp(primals, tangents, *, branches):
    index, *ops = primals
    _, *tops = tangents
    nz = [_nonzero(t, get_aval(p)) for p, t in _zip(ops, tops)]
    n_out = len(branches[0].out_avals)
    out_nz = [False] * n_out
    for b in branches:
        out_nz = _or(out_nz, _jvp_jaxpr(b, nz, [False] * n_out)[1])
    new = tuple(_jvp_jaxpr(b, nz, out_nz)[0] for b in branches)
    outs = cond_p.bind(index, *ops, *[t for t, z in _zip(tops, nz) if z], branches=new)
    primals_out, t_iter = outs[:n_out], iter(outs[n_out:])
    return primals_out, [next(t_iter) if z else Zero.from_primal_value(p)
                         for p, z in _zip(primals_out, out_nz)]


def _cond_batch(axis_data, vals, dims, *, branches):
    index, *ops = vals
    idim, *odims = dims
    size = axis_data.size
    if builtins.all(d is None for d in dims) and not _uses_axis(axis_data, branches):
        outs = cond_p.bind(*vals, branches=branches)
        return outs, [None] * len(outs)
    if idim is not None:
        # A batched index: every branch runs on the whole batch; each member's result is
        # selected from its own branch.
        from lax.elementwise import bitwise_or, eq, ge, lt, select, select_n
        from lax.shapes import broadcast_in_dim, full_like
        n = len(branches)
        index = batching.moveaxis(index, idim, 0)
        bad = bitwise_or(lt(index, full_like(index, 0)), ge(index, full_like(index, n)))
        index = select(bad, full_like(index, n - 1), index)
        # Differentiating the selects later would push a zero cotangent through the
        # branch each member did not take, and its rules may turn it into NaN there
        # (0 * inf: the untaken branch's derivative can be infinite at that member's
        # values). So, as in JAX, each branch sees its inexact operands through
        # select(taken, x, stop_gradient(x)): members that did not take it get no
        # derivative from it at all, in every later jvp or transposition. Unbatched
        # operands are broadcast for that (their cotangent is a sum over members, each
        # masked). Concrete operands (eager vmap) cannot be differentiated afterwards and
        # are passed as they are.
        masked = core.find_top_trace(ops) is not None
        branch_outs = []
        for i, b in enumerate(branches):
            b_ops, b_dims = ops, odims
            if masked:
                taken = eq(index, full_like(index, i))
                b_ops, b_dims = [], []
                for v, d in _zip(ops, odims):
                    if dtypes.is_inexact(get_aval(v).dtype):
                        v = batching.bdim_at_front(v, d, size)
                        which = broadcast_in_dim(taken, get_aval(v).shape, (0,))
                        v, d = select(which, v, ad.stop_gradient(v)), 0
                    b_ops.append(v)
                    b_dims.append(d)
            outs, out_dims = batching.vmap_flat(
                functools.partial(eval_jaxpr, b.jaxpr, b.consts), size, axis_data.name,
                b_dims, b_ops, axis_data.group)
            branch_outs.append([batching.matchaxis(size, d, 0, o)
                                for o, d in _zip(outs, out_dims)])
        results = []
        for cases in _zip(*branch_outs):
            shape = get_aval(cases[0]).shape
            which = broadcast_in_dim(index, shape, (0,))
            results.append(select_n(which, *cases))
        return results, [0] * len(results)
    ops_bat = [d is not None for d in odims]
    n_out = len(branches[0].out_avals)
    out_bat = [False] * n_out
    for b in branches:
        out_bat = _or(out_bat, _batch_jaxpr(b, axis_data, ops_bat, [False] * n_out)[1])
    new = tuple(_batch_jaxpr(b, axis_data, ops_bat, out_bat)[0] for b in branches)
    ops = [batching.moveaxis(v, d, 0) if d is not None else v for v, d in _zip(ops, odims)]
    outs = cond_p.bind(index, *ops, branches=new)
    return outs, [0 if b else None for b in out_bat]


def _cond_split(branches, ops_uk):
    """Split each branch into a known and an unknown part. The known branches all return
    (known outputs, residuals of every branch) — zeros for the other branches' residuals —
    and the unknown branches take all residuals. Returns (known branches, unknown branches,
    out_unknowns, residual avals)."""
    n_out = len(branches[0].out_avals)
    out_uk = [False] * n_out
    for b in branches:
        nc = len(b.consts)
        _, _, uk, _ = pe.partial_eval_jaxpr(_open(b), [False] * nc + list(ops_uk))
        out_uk = _or(out_uk, uk)
    splits = []
    for b in branches:
        nc = len(b.consts)
        j1, j2, _, nres = pe.partial_eval_jaxpr(_open(b), [False] * nc + list(ops_uk),
                                                instantiate=out_uk)
        splits.append((b, j1, j2, nres))
    res_avals = [[v.aval for v in j2.invars[:nres]] for _, _, j2, nres in splits]
    all_res = [a for ra in res_avals for a in ra]
    offsets = np.cumsum([0] + [len(r) for r in res_avals]).tolist()
    known_in = [a for a, u in _zip(branches[0].in_avals, ops_uk) if not u]
    unknown_in = [a for a, u in _zip(branches[0].in_avals, ops_uk) if u]
    known, unknown = [], []
    for k, (b, j1, j2, nres) in enumerate(splits):
        def kfun(*args, b=b, j1=j1, k=k, nres=nres):
            outs = eval_jaxpr(j1, [], *b.consts, *args)
            n_known = len(outs) - nres
            res = outs[n_known:]
            zeros = [ad.zeros_like_aval(a.strip_weak_type()) for a in all_res]
            return [*outs[:n_known], *zeros[:offsets[k]], *res, *zeros[offsets[k + 1]:]]

        def ufun(*args, j2=j2, k=k):
            res, ins = args[:len(all_res)], args[len(all_res):]
            return eval_jaxpr(j2, [], *res[offsets[k]:offsets[k + 1]], *ins)

        known.append(pe.trace_to_closed_jaxpr(kfun, known_in))
        unknown.append(pe.trace_to_closed_jaxpr(ufun, all_res + unknown_in))
    return tuple(known), tuple(unknown), out_uk, all_res


def _cond_partial_eval(trace, tracers, *, branches):
    index_t, *op_ts = tracers
    if index_t.pval.is_unknown:
        return _stage_all(cond_p)(trace, tracers, branches=branches)
    ops_uk = [t.pval.is_unknown for t in op_ts]
    known, unknown, out_uk, res_avals = _cond_split(branches, ops_uk)
    index = index_t.pval.const
    outs = cond_p.bind(index, *[t.pval.const for t in op_ts if t.pval.is_known],
                       branches=known)
    n_known = len(outs) - len(res_avals)
    known_outs, res = outs[:n_known], outs[n_known:]
    tracers_in = ([trace.instantiate_const(index_t)] + [_known_tracer(trace, r) for r in res]
                  + [t for t in op_ts if t.pval.is_unknown])
    staged = _stage(trace, cond_p, tracers_in, dict(branches=unknown), unknown[0].out_avals)
    k_it, u_it = iter(known_outs), iter(staged)
    return [next(u_it) if uk else pe.PartialEvalTracer(trace, pe.PartialVal.known(next(k_it)),
                                                        None) for uk in out_uk]


def _cond_partial_eval_jaxpr(unks_in, eqn):
    index_uk, *ops_uk = unks_in
    branches = eqn.params["branches"]
    if index_uk:
        return None, eqn, [True] * len(eqn.outvars), _res_vars_for(unks_in, eqn)
    known, unknown, out_uk, res_avals = _cond_split(branches, ops_uk)
    index = eqn.invars[0]
    ops = eqn.invars[1:]
    res_vars = [Var(a) for a in res_avals]
    eqn1 = JaxprEqn(cond_p, [index] + [x for x, u in _zip(ops, ops_uk) if not u],
                    dict(branches=known),
                    [v for v, u in _zip(eqn.outvars, out_uk) if not u] + res_vars)
    eqn2 = JaxprEqn(cond_p, [index] + res_vars + [x for x, u in _zip(ops, ops_uk) if u],
                    dict(branches=unknown), [v for v, u in _zip(eqn.outvars, out_uk) if u])
    return eqn1, eqn2, out_uk, ([index] if type(index) is Var else []) + res_vars


def _cond_transpose(cts, index, *ops, branches):
    if ad.is_undefined_primal(index):
        raise ValueError("cond: cannot transpose with respect to the branch index")
    linear = [ad.is_undefined_primal(x) for x in ops]
    ct_nz = [type(c) is not Zero for c in cts]
    if not builtins.any(ct_nz):
        return [None] * (1 + len(ops))
    new = tuple(_transpose_jaxpr(b, linear, ct_nz) for b in branches)
    res = [x for x, lin in _zip(ops, linear) if not lin]
    outs = iter(cond_p.bind(index, *res, *[c for c in cts if type(c) is not Zero],
                            branches=new))
    return [None] + [next(outs) if lin else None for lin in linear]


def _cond_dce(used_outputs, eqn):
    branches = eqn.params["branches"]
    if not builtins.any(used_outputs):
        return [False] * len(eqn.invars), None
    used_ops = [False] * (len(eqn.invars) - 1)
    for b in branches:
        used_ops = _or(used_ops, _used_inputs(b, used_outputs))
    new = tuple(_dce_closed(b, used_outputs, used_ops) for b in branches)
    new_eqn = JaxprEqn(cond_p, [eqn.invars[0]] + [x for x, u in _zip(eqn.invars[1:], used_ops)
                                                  if u],
                       dict(branches=new), [v for v, u in _zip(eqn.outvars, used_outputs) if u])
    return [True] + used_ops, new_eqn


cond_p = _ControlFlowPrimitive("cond")
cond_p.def_abstract_eval(_cond_abstract_eval)
cond_p.def_impl(_cond_impl)
ad.primitive_jvps[cond_p] = _cond_jvp
ad.primitive_transposes[cond_p] = _cond_transpose
batching.primitive_batchers[cond_p] = _cond_batch
batching.batch_when_unmapped.add(cond_p)
pe.partial_eval_rules[cond_p] = _cond_partial_eval
pe.partial_eval_jaxpr_rules[cond_p] = _cond_partial_eval_jaxpr
pe.dce_rules[cond_p] = _cond_dce


# ======================================= While =============================================

def while_loop(cond_fun, body_fun, init_val):
    """``val = init_val; while cond_fun(val): val = body_fun(val); return val``, staged as
    one ``while`` equation (``jax.lax.while_loop``; XLA 'While').

    ``init_val``: a pytree of arrays (the loop carry). ``cond_fun(val)`` must return a
    boolean scalar; ``body_fun(val)`` must return a pytree of the carry's structure, shapes
    and dtypes (weakly typed initial values such as Python scalars adopt the body's
    dtype). Differentiable in forward mode (jvp, jacfwd, linearize); reverse mode raises
    ValueError: use ``scan`` or ``fori_loop`` with static bounds. Under vmap a batched
    condition keeps the loop running until every batch member is done, freezing the
    carries of the members that finished.

    Raises TypeError when ``cond_fun`` does not return a boolean scalar or ``body_fun``
    changes the carry's structure or types (naming the carry's pytree path).
    """
    if not callable(cond_fun) or not callable(body_fun):
        raise TypeError("while_loop: cond_fun and body_fun must be callable, got "
                        f"{type(cond_fun).__name__} and {type(body_fun).__name__}")
    if config.disable_jit:
        try:
            val = init_val
            while bool(cond_fun(val)):
                val = body_fun(val)
            return val
        except ConcretizationTypeError:
            pass
    return _while_loop(cond_fun, body_fun, init_val, "while_loop")


def _while_loop(cond_fun, body_fun, init_val, fname, carry_root="carry"):
    leaves, in_tree = _flatten_operands(init_val, fname, "init_val")
    for _ in range(2):
        avals = [get_aval(x) for x in leaves]
        body, body_consts, body_tree = _trace_fun(lambda *c: (body_fun(tree_unflatten(
            in_tree, list(c))),), tree_structure(tuple(range(len(avals)))), avals, fname,
            "body_fun")
        body_tree = body_tree.children[0]
        if body_tree != in_tree:
            break
        leaves, changed = _promote_weak_carry(leaves, avals, body.out_avals)
        if not changed:
            break
    _check_same_types(fname, "body_fun's output (the new carry) and its input (the carry)",
                      "the input", in_tree, avals, "body_fun's output", body_tree,
                      body.out_avals, root=carry_root,
                      fix="Revise body_fun so that it returns a carry of the same structure, "
                          "shapes and dtypes as its input.")
    cond, cond_consts, cond_tree = _trace_fun(lambda *c: (cond_fun(tree_unflatten(
        in_tree, list(c))),), tree_structure(tuple(range(len(avals)))), avals, fname,
        "cond_fun")
    couts = cond.out_avals
    if len(couts) != 1 or couts[0].shape != () or couts[0].dtype != dtypes.bool_:
        got = ", ".join(a.str_short() for a in couts)
        raise TypeError(f"{fname}: cond_fun must return a boolean scalar (bool[]), but it "
                        f"returned ({got}); compare with a value (e.g. i < n) or reduce with "
                        ".all() / .any()")
    outs = while_p.bind(*cond_consts, *body_consts, *leaves, cond_jaxpr=cond,
                        body_jaxpr=body, cond_nconsts=len(cond_consts),
                        body_nconsts=len(body_consts))
    return tree_unflatten(in_tree, outs)


def _while_abstract_eval(*avals, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    cc, bc, carry = _split(avals, cond_nconsts, body_nconsts)
    if len(cond_jaxpr.in_avals) != len(cc) + len(carry) or not builtins.all(
            _typematch(a, e) for a, e in _zip(cc + carry, cond_jaxpr.in_avals)):
        raise TypeError("while: cond_jaxpr takes "
                        f"({', '.join(a.str_short() for a in cond_jaxpr.in_avals)}), the "
                        f"operands are ({', '.join(a.str_short() for a in cc + carry)})")
    co = cond_jaxpr.out_avals
    if len(co) != 1 or co[0].shape != () or co[0].dtype != dtypes.bool_:
        raise TypeError(f"while: cond_jaxpr must return bool[], returns "
                        f"({', '.join(a.str_short() for a in co)})")
    if len(body_jaxpr.in_avals) != len(bc) + len(carry) or not builtins.all(
            _typematch(a, e) for a, e in _zip(bc + carry, body_jaxpr.in_avals)):
        raise TypeError("while: body_jaxpr takes "
                        f"({', '.join(a.str_short() for a in body_jaxpr.in_avals)}), the "
                        f"operands are ({', '.join(a.str_short() for a in bc + carry)})")
    bo = body_jaxpr.out_avals
    if len(bo) != len(carry) or not builtins.all(_typematch(a, e) for a, e in _zip(bo, carry)):
        raise TypeError(f"while: body_jaxpr returns ({', '.join(a.str_short() for a in bo)})"
                        f" but the carry is ({', '.join(a.str_short() for a in carry)})")
    return [ShapedArray(a.shape, a.dtype, a.weak_type and b.weak_type)
            for a, b in _zip(carry, bo)]


def _while_impl(*args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    cc, bc, carry = _split(args, cond_nconsts, body_nconsts)
    cc, bc, carry = ([to_numpy(a) for a in part] for part in (cc, bc, carry))
    cond = impl_runner(cond_jaxpr.jaxpr, cond_jaxpr.consts)
    body = impl_runner(body_jaxpr.jaxpr, body_jaxpr.consts)
    with numpy_tier_scope():
        while bool(cond(cc + carry)[0]):
            carry = body(bc + carry)
    return carry


def _add_invars(closed: ClosedJaxpr, avals) -> ClosedJaxpr:
    """The jaxpr with extra trailing invars it ignores."""
    j = closed.jaxpr
    return ClosedJaxpr(Jaxpr(j.constvars, j.invars + [Var(a) for a in avals], j.eqns,
                             j.outvars), closed.consts)


def _while_jvp(primals, tangents, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    cc, bc, init = _split(primals, cond_nconsts, body_nconsts)
    _, bct, initt = _split(tangents, cond_nconsts, body_nconsts)
    bc_nz = [_nonzero(t, get_aval(p)) for p, t in _zip(bc, bct)]
    carry_nz = [_nonzero(t, get_aval(p)) for p, t in _zip(init, initt)]
    for _ in range(len(init) + 1):
        _, out_nz = _jvp_jaxpr(body_jaxpr, bc_nz + carry_nz, carry_nz)
        new = _or(carry_nz, out_nz)
        if new == carry_nz:
            break
        carry_nz = new
    if not builtins.any(carry_nz):
        outs = while_p.bind(*primals, cond_jaxpr=cond_jaxpr, body_jaxpr=body_jaxpr,
                            cond_nconsts=cond_nconsts, body_nconsts=body_nconsts)
        return outs, [Zero.from_primal_value(o) for o in outs]
    body_jvp, _ = _jvp_jaxpr(body_jaxpr, bc_nz + carry_nz, carry_nz)
    nb, nk = len(bc), len(init)
    nbt, nkt = builtins.sum(bc_nz), builtins.sum(carry_nz)
    # invars (bc, carry, bc_t, carry_t) -> (bc, bc_t, carry, carry_t)
    order = (list(range(nb)) + list(range(nb + nk, nb + nk + nbt)) + list(range(nb, nb + nk))
             + list(range(nb + nk + nbt, nb + nk + nbt + nkt)))
    body_new = _permute_jaxpr(body_jvp, order)
    t_avals = [_tangent_aval(get_aval(p)) for p, z in _zip(init, carry_nz) if z]
    cond_new = _add_invars(cond_jaxpr, t_avals)
    init_t = [_instantiate(t, get_aval(p)) for p, t, z in _zip(init, initt, carry_nz) if z]
    outs = while_p.bind(*cc, *bc, *[t for t, z in _zip(bct, bc_nz) if z], *init, *init_t,
                        cond_jaxpr=cond_new, body_jaxpr=body_new, cond_nconsts=cond_nconsts,
                        body_nconsts=nb + nbt)
    primals_out, t_it = outs[:nk], iter(outs[nk:])
    return primals_out, [next(t_it) if z else Zero.from_primal_value(p)
                         for p, z in _zip(primals_out, carry_nz)]


def _while_batch(axis_data, vals, dims, *, cond_jaxpr, body_jaxpr, cond_nconsts,
                 body_nconsts):
    size = axis_data.size
    params = dict(cond_jaxpr=cond_jaxpr, body_jaxpr=body_jaxpr, cond_nconsts=cond_nconsts,
                  body_nconsts=body_nconsts)
    if builtins.all(d is None for d in dims) and not _uses_axis(axis_data,
                                                                 [cond_jaxpr, body_jaxpr]):
        outs = while_p.bind(*vals, **params)
        return outs, [None] * len(outs)
    cc, bc, init = _split(vals, cond_nconsts, body_nconsts)
    ccd, bcd, initd = _split(dims, cond_nconsts, body_nconsts)
    cc_bat = [d is not None for d in ccd]
    bc_bat = [d is not None for d in bcd]
    carry_bat = [d is not None for d in initd]
    for _ in range(len(init) + 1):
        _, out_bat = _batch_jaxpr(body_jaxpr, axis_data, bc_bat + carry_bat, carry_bat)
        new = _or(carry_bat, out_bat)
        if new == carry_bat:
            break
        carry_bat = new
    _, (pred_bat,) = _batch_jaxpr(cond_jaxpr, axis_data, cc_bat + carry_bat, [False])
    if pred_bat:
        carry_bat = [True] * len(init)
    body_b, _ = _batch_jaxpr(body_jaxpr, axis_data, bc_bat + carry_bat, carry_bat)
    cond_b, _ = _batch_jaxpr(cond_jaxpr, axis_data, cc_bat + carry_bat, [False])
    cc = [batching.moveaxis(v, d, 0) if d is not None else v for v, d in _zip(cc, ccd)]
    bc = [batching.moveaxis(v, d, 0) if d is not None else v for v, d in _zip(bc, bcd)]
    init = [batching.matchaxis(size, d, 0, v) if b else v
            for v, d, b in _zip(init, initd, carry_bat)]
    if not pred_bat:
        outs = while_p.bind(*cc, *bc, *init, cond_jaxpr=cond_b, body_jaxpr=body_b,
                            cond_nconsts=cond_nconsts, body_nconsts=body_nconsts)
        return outs, [0 if b else None for b in carry_bat]
    # A batched predicate: loop while any member's predicate holds; members that are done
    # keep their carry (the body still runs on it; select discards the result).
    from lax.elementwise import select
    from lax.reductions import reduce_or
    from lax.shapes import broadcast_in_dim
    nc = len(cc)
    cc_avals = [get_aval(v) for v in cc]
    bc_avals = [get_aval(v) for v in bc]
    carry_avals = [get_aval(v) for v in init]

    def cond_any(*args):
        (pred,) = eval_jaxpr(cond_b.jaxpr, cond_b.consts, *args)
        return [reduce_or(pred, (0,))]

    def body_sel(*args):
        ccs, bcs, carry = _split(args, nc, len(bc))
        (pred,) = eval_jaxpr(cond_b.jaxpr, cond_b.consts, *ccs, *carry)
        new = eval_jaxpr(body_b.jaxpr, body_b.consts, *bcs, *carry)
        return [select(broadcast_in_dim(pred, get_aval(n).shape, (0,)), n, c)
                for n, c in _zip(new, carry)]

    cond_new = pe.trace_to_closed_jaxpr(cond_any, cc_avals + carry_avals)
    body_new = pe.trace_to_closed_jaxpr(body_sel, cc_avals + bc_avals + carry_avals)
    outs = while_p.bind(*cc, *cc, *bc, *init, cond_jaxpr=cond_new, body_jaxpr=body_new,
                        cond_nconsts=nc, body_nconsts=nc + len(bc))
    return outs, [0] * len(outs)


def _while_split(cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts, unks_in):
    """Which carries are unknown, and (when the loop condition is known) the jaxprs of
    the loop over the known carries only. Returns (carry_uk, known cond jaxpr | None,
    known body jaxpr, kept cond consts, kept body consts)."""
    cc_uk, bc_uk, carry_uk = _split(unks_in, cond_nconsts, body_nconsts)
    ncb = len(body_jaxpr.consts)
    open_body = _open(body_jaxpr)
    for _ in range(len(carry_uk) + 1):
        _, _, out_uk, _ = pe.partial_eval_jaxpr(open_body, [False] * ncb + bc_uk + carry_uk)
        new = _or(carry_uk, out_uk)
        if new == carry_uk:
            break
        carry_uk = new
    ncc = len(cond_jaxpr.consts)
    _, _, (pred_uk,), _ = pe.partial_eval_jaxpr(_open(cond_jaxpr),
                                                [False] * ncc + cc_uk + carry_uk)
    if pred_uk or builtins.all(carry_uk):
        return carry_uk, None, None
    known_carry = [not u for u in carry_uk]
    cond_keep = [not u for u in cc_uk] + known_carry
    if not builtins.all(k or not used for k, used in _zip(cond_keep,
                                                          _used_inputs(cond_jaxpr, [True]))):
        return carry_uk, None, None
    # The condition reads known values only: drop its unknown operands.
    cond_k = _dce_closed(cond_jaxpr, [True], cond_keep)
    j1, _, _, nres = pe.partial_eval_jaxpr(open_body, [False] * ncb + bc_uk + carry_uk,
                                           instantiate=carry_uk)
    j1 = Jaxpr([], j1.invars, j1.eqns, j1.outvars[:len(j1.outvars) - nres])
    j1, _ = pe.dce_jaxpr(j1)
    body_k = ClosedJaxpr(Jaxpr(j1.invars[:ncb], j1.invars[ncb:], j1.eqns, j1.outvars),
                         body_jaxpr.consts)
    return carry_uk, cond_k, body_k


def _while_partial_eval(trace, tracers, *, cond_jaxpr, body_jaxpr, cond_nconsts,
                        body_nconsts):
    params = dict(cond_jaxpr=cond_jaxpr, body_jaxpr=body_jaxpr, cond_nconsts=cond_nconsts,
                  body_nconsts=body_nconsts)
    unks_in = [t.pval.is_unknown for t in tracers]
    carry_uk, cond_k, body_k = _while_split(cond_jaxpr, body_jaxpr, cond_nconsts,
                                            body_nconsts, unks_in)
    avals_out = _while_abstract_eval(*[t.aval for t in tracers], **params)
    if cond_k is None:
        return _stage(trace, while_p, tracers, params, avals_out)
    # The known carries are computed now by a loop over them alone; the unknown ones by
    # the whole loop, staged (it recomputes the known part: forward mode only needs it).
    cc, bc, carry = _split(tracers, cond_nconsts, body_nconsts)
    kc = [t.pval.const for t in cc if t.pval.is_known]
    kb = [t.pval.const for t in bc if t.pval.is_known]
    kk = [t.pval.const for t, u in _zip(carry, carry_uk) if not u]
    known = while_p.bind(*kc, *kb, *kk, cond_jaxpr=cond_k, body_jaxpr=body_k,
                         cond_nconsts=len(kc), body_nconsts=len(kb))
    staged = _stage(trace, while_p, tracers, params, avals_out)
    k_it = iter(known)
    return [s if u else pe.PartialEvalTracer(trace, pe.PartialVal.known(next(k_it)), None)
            for s, u in _zip(staged, carry_uk)]


def _while_partial_eval_jaxpr(unks_in, eqn):
    p = eqn.params
    carry_uk, cond_k, body_k = _while_split(p["cond_jaxpr"], p["body_jaxpr"],
                                            p["cond_nconsts"], p["body_nconsts"], unks_in)
    res = _res_vars_for(unks_in, eqn)
    if cond_k is None:
        return None, eqn, [True] * len(eqn.outvars), res
    nc, nb = p["cond_nconsts"], p["body_nconsts"]
    cc, bc, carry = _split(eqn.invars, nc, nb)
    cc_uk, bc_uk, _ = _split(unks_in, nc, nb)
    kc = [x for x, u in _zip(cc, cc_uk) if not u]
    kb = [x for x, u in _zip(bc, bc_uk) if not u]
    kk = [x for x, u in _zip(carry, carry_uk) if not u]
    eqn1 = JaxprEqn(while_p, kc + kb + kk, dict(cond_jaxpr=cond_k, body_jaxpr=body_k,
                                                cond_nconsts=len(kc), body_nconsts=len(kb)),
                    [v for v, u in _zip(eqn.outvars, carry_uk) if not u])
    # The whole loop, staged; the known carries it recomputes are dropped.
    outvars2 = [v if u else DropVar(v.aval) for v, u in _zip(eqn.outvars, carry_uk)]
    eqn2 = JaxprEqn(while_p, eqn.invars, eqn.params, outvars2)
    return eqn1, eqn2, carry_uk, res


def _while_transpose(cts, *args, **params):
    raise ValueError("Reverse-mode differentiation does not work for lax.while_loop or "
                     "lax.fori_loop with dynamic start/stop values. Try using lax.scan, or "
                     "using fori_loop with static start/stop.")


def _while_dce(used_outputs, eqn):
    p = eqn.params
    cond_jaxpr, body_jaxpr = p["cond_jaxpr"], p["body_jaxpr"]
    nc, nb = p["cond_nconsts"], p["body_nconsts"]
    if not builtins.any(used_outputs):
        return [False] * len(eqn.invars), None
    cond_used = _used_inputs(cond_jaxpr, [True])
    used = _or(used_outputs, cond_used[nc:])
    for _ in range(len(used) + 1):
        body_used = _used_inputs(body_jaxpr, used)
        new = _or(used, body_used[nb:])
        if new == used:
            break
        used = new
    body_used = _used_inputs(body_jaxpr, used)
    used_bc = body_used[:nb]
    used_cc = cond_used[:nc]
    if builtins.all(used) and builtins.all(used_bc) and builtins.all(used_cc):
        return [True] * len(eqn.invars), eqn
    cond_new = _dce_closed(cond_jaxpr, [True], used_cc + used)
    body_new = _dce_closed(body_jaxpr, used, used_bc + used)
    cc, bc, carry = _split(eqn.invars, nc, nb)
    invars = ([x for x, u in _zip(cc, used_cc) if u] + [x for x, u in _zip(bc, used_bc) if u]
              + [x for x, u in _zip(carry, used) if u])
    new_eqn = JaxprEqn(while_p, invars, dict(cond_jaxpr=cond_new, body_jaxpr=body_new,
                                             cond_nconsts=builtins.sum(used_cc),
                                             body_nconsts=builtins.sum(used_bc)),
                       [v for v, u in _zip(eqn.outvars, used) if u])
    return used_cc + used_bc + used, new_eqn


while_p = _ControlFlowPrimitive("while")
while_p.def_abstract_eval(_while_abstract_eval)
while_p.def_impl(_while_impl)
ad.primitive_jvps[while_p] = _while_jvp
ad.primitive_transposes[while_p] = _while_transpose
batching.primitive_batchers[while_p] = _while_batch
batching.batch_when_unmapped.add(while_p)
pe.partial_eval_rules[while_p] = _while_partial_eval
pe.partial_eval_jaxpr_rules[while_p] = _while_partial_eval_jaxpr
pe.dce_rules[while_p] = _while_dce


# ===================================== fori_loop ===========================================

def fori_loop(lower, upper, body_fun, init_val, *, unroll=None):
    """``val = init_val; for i in range(lower, upper): val = body_fun(i, val); return val``
    (``jax.lax.fori_loop``).

    With concrete (Python or eager) bounds the loop is a ``scan`` of ``upper - lower``
    steps, so it is reverse-differentiable; with traced bounds it is a ``while_loop``
    (forward mode only). ``i`` has the promoted dtype of ``lower`` and ``upper`` (the
    default integer for Python ints). ``unroll`` is passed to scan. Raises TypeError for
    non-integer or non-scalar bounds and for a body that changes the carry's types.
    """
    if not callable(body_fun):
        raise TypeError(f"fori_loop: body_fun must be callable, got {type(body_fun).__name__}")
    for name, b in (("lower", lower), ("upper", upper)):
        _check_operand(b, "fori_loop", name)
        a = get_aval(b)
        if a.shape != () or not dtypes.is_integer(a.dtype):
            raise TypeError(f"fori_loop: {name} must be an integer scalar, got {a.str_short()}")
    dt = dtypes.result_type(lower, upper)
    try:
        lo, hi = operator.index(lower), operator.index(upper)
    except (TypeError, IndexError):
        lo = hi = None
    if lo is not None:
        from lax.elementwise import add
        one = Array(np.ones((), dt))

        def scan_body(carry, _):
            i, x = carry
            return (add(i, one), body_fun(i, x)), None

        (_, out), _ = _scan(scan_body, (Array(np.asarray(lo, dt)), init_val), None,
                            builtins.max(hi - lo, 0), False,
                            1 if unroll is None else unroll, "fori_loop",
                            carry_root="(i, val)")
        return out
    from lax.elementwise import add, convert_element_type, lt
    lower = convert_element_type(lower, dt)
    upper = convert_element_type(upper, dt)

    def w_cond(c):
        return lt(c[0], c[1])

    def w_body(c):
        i, u, x = c
        return add(i, Array(np.ones((), dt))), u, body_fun(i, x)

    _, _, out = _while_loop(w_cond, w_body, (lower, upper, init_val), "fori_loop",
                            carry_root="(i, upper, val)")
    return out


# ======================================== Scan =============================================

def scan(f, init, xs=None, length=None, reverse=False, unroll=1, _split_transpose=False):
    """Loop ``f`` over the leading axis of ``xs``, carrying state (``jax.lax.scan``; XLA
    'Scan', chlo.scan)::

        def scan(f, init, xs, length=None):
            carry, ys = init, []
            for x in xs:                     # reversed(xs) with reverse=True
                carry, y = f(carry, x)
                ys.append(y)
            return carry, stack(ys)

    ``init``: a pytree (the carry); ``xs``: a pytree of arrays sharing a leading axis of
    size ``length`` (or None with ``length`` given); ``f(carry, x) -> (carry, y)`` with the
    carry's structure, shapes and dtypes unchanged. Returns ``(final carry, ys)`` with ys
    stacked along a new leading axis (ys are stored at the index of their x with
    ``reverse``). ``unroll`` (a positive int, or True for the whole loop) is a hint to
    the compiler. Reverse-mode differentiation stores the residuals of every step.

    Raises ValueError for inconsistent or missing lengths, TypeError for a body that does
    not return a pair or changes the carry's structure or types (naming the carry's pytree
    path and both types).
    """
    if not callable(f):
        raise TypeError(f"scan: f must be callable, got {type(f).__name__}")
    del _split_transpose
    return _scan(f, init, xs, length, reverse, unroll, "scan")


def _scan(f, init, xs, length, reverse, unroll, fname, carry_root="carry"):
    xs_pairs, xs_tree = tree_flatten_with_path(xs)
    xs_leaves = [_check_operand(x, fname, f"xs{keystr(p)}") for p, x in xs_pairs]
    x_avals = []
    lengths = []
    for (p, _), x in _zip(xs_pairs, xs_leaves):
        a = get_aval(x)
        if a.ndim == 0:
            raise ValueError(f"{fname}: xs{keystr(p)} is a scalar ({a.str_short()}); every "
                             "leaf of xs needs a leading axis to scan over")
        lengths.append((keystr(p), a.shape[0]))
        x_avals.append(a.update(shape=a.shape[1:]))
    if length is not None:
        try:
            length = operator.index(length)
        except TypeError:
            if isinstance(length, Tracer):
                raise ConcretizationTypeError(length, "was given as scan's length, which must "
                                                      "be a static integer") from None
            raise TypeError(f"{fname}: length must be an integer, got {length!r}") from None
        if length < 0:
            raise ValueError(f"{fname}: length must be non-negative, got {length}")
        bad = [(p, n) for p, n in lengths if n != length]
        if bad:
            raise ValueError(f"{fname}: length={length} disagrees with the leading axis sizes "
                             f"of xs: " + ", ".join(f"xs{p} has {n}" for p, n in lengths))
    elif lengths:
        if len({n for _, n in lengths}) > 1:
            raise ValueError(f"{fname}: the leaves of xs must share their leading axis size, "
                             "got " + ", ".join(f"xs{p}: {n}" for p, n in lengths))
        length = lengths[0][1]
    else:
        raise ValueError(f"{fname}: got no xs to scan over and no length; pass length=")
    if unroll is True:
        unroll = builtins.max(length, 1)
    elif unroll is False:
        unroll = 1
    unroll = operator.index(unroll)
    if unroll < 1:
        raise ValueError(f"{fname}: unroll must be a positive int or a bool, got {unroll}")
    init_leaves, init_tree = _flatten_operands(init, fname, "init")
    nk = len(init_leaves)
    box = []

    def flat_body(*flat):
        carry = tree_unflatten(init_tree, list(flat[:nk]))
        x = tree_unflatten(xs_tree, list(flat[nk:]))
        out = f(carry, x)
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise TypeError(f"{fname}: the body function must return a pair (carry, y), got "
                            f"{core.describe(out)}; return (new_carry, None) when there is "
                            "no per-step output")
        c_pairs, c_tree = tree_flatten_with_path(out[0])
        y_pairs, y_tree = tree_flatten_with_path(out[1])
        for what, pairs in (("carry", c_pairs), ("y", y_pairs)):
            for p, leaf in pairs:
                if not isinstance(leaf, (Tracer, Array)) and not valid_jaxtype(leaf):
                    raise TypeError(f"{fname}: the body function must return arrays, but its "
                                    f"{what}{keystr(p)} is a {type(leaf).__name__}")
        box.append((c_tree, y_tree))
        return [x for _, x in c_pairs] + [y for _, y in y_pairs]

    for _ in range(2):
        carry_avals = [get_aval(x) for x in init_leaves]
        box.clear()
        jaxpr, consts = _trace(flat_body, carry_avals + x_avals)
        c_tree, y_tree = box[0]
        if c_tree != init_tree:
            break
        init_leaves, changed = _promote_weak_carry(init_leaves, carry_avals,
                                                   jaxpr.out_avals[:nk])
        if not changed:
            break
    _check_same_types(fname, "the body function's carry output and carry input",
                      "the input carry", init_tree, carry_avals, "the output carry", c_tree,
                      jaxpr.out_avals[:len(carry_avals)] if c_tree == init_tree else [],
                      root=carry_root,
                      fix="Revise the body so that it returns a carry of the same structure, "
                          "shapes and dtypes as its input.")
    outs = scan_p.bind(*consts, *init_leaves, *xs_leaves, jaxpr=jaxpr, num_consts=len(consts),
                       num_carry=nk, length=length, reverse=builtins.bool(reverse),
                       unroll=unroll)
    return tree_unflatten(init_tree, outs[:nk]), tree_unflatten(y_tree, outs[nk:])


def _scan_abstract_eval(*avals, jaxpr, num_consts, num_carry, length, reverse, unroll):
    consts, carry, xs = _split(avals, num_consts, num_carry)
    j_in = jaxpr.in_avals
    if len(j_in) != len(avals):
        raise TypeError(f"scan: the body takes {len(j_in)} operands, got {len(avals)}")
    for what, got, exp in (("const", consts, j_in[:num_consts]),
                           ("carry", carry, j_in[num_consts:num_consts + num_carry])):
        for i, (a, e) in enumerate(_zip(got, exp)):
            if not _typematch(a, e):
                raise TypeError(f"scan: {what} {i} has type {a.str_short()}, the body expects "
                                f"{e.str_short()}")
    for i, (a, e) in enumerate(_zip(xs, j_in[num_consts + num_carry:])):
        if a.shape[:1] != (length,) or not _typematch(a.update(shape=a.shape[1:]), e):
            raise TypeError(f"scan: xs {i} has type {a.str_short()}, expected {e.str_short()} "
                            f"stacked {length} times")
    outs = jaxpr.out_avals
    for i, (a, e) in enumerate(_zip(outs[:num_carry], carry)):
        if not _typematch(a, e):
            raise TypeError(f"scan: the body returns carry {i} of type {a.str_short()} for a "
                            f"carry of type {e.str_short()}")
    return list(outs[:num_carry]) + [ShapedArray((length,) + a.shape, a.dtype, a.weak_type)
                                     for a in outs[num_carry:]]


def _scan_impl(*args, jaxpr, num_consts, num_carry, length, reverse, unroll):
    consts, carry, xs = _split(args, num_consts, num_carry)
    ys = [np.empty((length,) + a.shape, a.dtype) for a in jaxpr.out_avals[num_carry:]]
    j, jc = jaxpr.jaxpr, jaxpr.consts
    consts, carry, xs = ([to_numpy(a) for a in part] for part in (consts, carry, xs))
    run = impl_runner(j, jc)
    with numpy_tier_scope():
        for k in range(length):
            i = length - 1 - k if reverse else k
            outs = run(consts + carry + [x[i] for x in xs])
            carry = outs[:num_carry]
            for y, o in _zip(ys, outs[num_carry:]):
                y[i] = o
    return carry + ys


def _scan_jvp(primals, tangents, *, jaxpr, num_consts, num_carry, length, reverse, unroll):
    nz = [_nonzero(t, get_aval(p)) for p, t in _zip(primals, tangents)]
    const_nz, init_nz, xs_nz = _split(nz, num_consts, num_carry)
    ny = len(jaxpr.out_avals) - num_carry
    carry_nz = init_nz
    for _ in range(num_carry + 1):
        _, out_nz = _jvp_jaxpr(jaxpr, const_nz + carry_nz + xs_nz, carry_nz + [False] * ny)
        new = _or(carry_nz, out_nz[:num_carry])
        if new == carry_nz:
            break
        carry_nz = new
    jvp_j, out_nz = _jvp_jaxpr(jaxpr, const_nz + carry_nz + xs_nz, carry_nz + [False] * ny)
    ys_nz = out_nz[num_carry:]
    nc, nk, nx = num_consts, num_carry, len(xs_nz)
    nct, nkt, nxt = builtins.sum(const_nz), builtins.sum(carry_nz), builtins.sum(xs_nz)
    nyt = builtins.sum(ys_nz)
    base = nc + nk + nx
    # invars (c, k, x, ct, kt, xt) -> (c, ct, k, kt, x, xt)
    in_order = (list(range(nc)) + list(range(base, base + nct))
                + list(range(nc, nc + nk)) + list(range(base + nct, base + nct + nkt))
                + list(range(nc + nk, base)) + list(range(base + nct + nkt,
                                                          base + nct + nkt + nxt)))
    # outvars (k, y, kt, yt) -> (k, kt, y, yt)
    out_order = (list(range(nk)) + list(range(nk + ny, nk + ny + nkt))
                 + list(range(nk, nk + ny)) + list(range(nk + ny + nkt, nk + ny + nkt + nyt)))
    new = _permute_jaxpr(jvp_j, in_order, out_order)
    consts, init, xs = _split(primals, num_consts, num_carry)
    ct, kt, xt = _split(tangents, num_consts, num_carry)
    init_t = [_instantiate(t, get_aval(p)) for p, t, z in _zip(init, kt, carry_nz) if z]
    outs = scan_p.bind(*consts, *[t for t, z in _zip(ct, const_nz) if z], *init, *init_t,
                       *xs, *[t for t, z in _zip(xt, xs_nz) if z], jaxpr=new,
                       num_consts=nc + nct, num_carry=nk + nkt, length=length,
                       reverse=reverse, unroll=unroll)
    carry_out, carry_t, ys, ys_t = _split(outs, nk, nkt, ny)
    kt_it, yt_it = iter(carry_t), iter(ys_t)
    return carry_out + ys, ([next(kt_it) if z else Zero.from_primal_value(p)
                             for p, z in _zip(carry_out, carry_nz)]
                            + [next(yt_it) if z else Zero.from_primal_value(p)
                               for p, z in _zip(ys, ys_nz)])


def _scan_batch(axis_data, vals, dims, *, jaxpr, num_consts, num_carry, length, reverse,
                unroll):
    params = dict(num_consts=num_consts, num_carry=num_carry, length=length,
                  reverse=reverse, unroll=unroll)
    if builtins.all(d is None for d in dims) and not _uses_axis(axis_data, [jaxpr]):
        outs = scan_p.bind(*vals, jaxpr=jaxpr, **params)
        return outs, [None] * len(outs)
    size = axis_data.size
    consts, init, xs = _split(vals, num_consts, num_carry)
    cd, kd, xd = _split(dims, num_consts, num_carry)
    c_bat, x_bat = [d is not None for d in cd], [d is not None for d in xd]
    carry_bat = [d is not None for d in kd]
    ny = len(jaxpr.out_avals) - num_carry
    for _ in range(num_carry + 1):
        _, out_bat = _batch_jaxpr(jaxpr, axis_data, c_bat + carry_bat + x_bat,
                                  carry_bat + [False] * ny)
        new = _or(carry_bat, out_bat[:num_carry])
        if new == carry_bat:
            break
        carry_bat = new
    new_j, out_bat = _batch_jaxpr(jaxpr, axis_data, c_bat + carry_bat + x_bat,
                                  carry_bat + [False] * ny)
    consts = [batching.moveaxis(v, d, 0) if d is not None else v for v, d in _zip(consts, cd)]
    init = [batching.matchaxis(size, d, 0, v) if b else v
            for v, d, b in _zip(init, kd, carry_bat)]
    # The body sees x batched at 0, so the stacked xs are batched at 1 (0 is the scan axis).
    xs = [batching.moveaxis(v, d, 1) if d is not None else v for v, d in _zip(xs, xd)]
    outs = scan_p.bind(*consts, *init, *xs, jaxpr=new_j, **params)
    return outs, ([0 if b else None for b in carry_bat]
                  + [1 if b else None for b in out_bat[num_carry:]])


class _ScanSplit:
    """How a scan with some unknown operands splits into a known scan, run first, and an
    unknown scan consuming its residuals.

    Residuals of the body fall in four groups, as in JAX: known consts (passed to the
    unknown scan as consts), loop-invariant values computed from consts only (computed
    once, outside the loop, then consts), known xs (passed on as xs), and everything else,
    which the known scan stacks as extra ys (one per iteration)."""


def _scan_split(jaxpr: ClosedJaxpr, num_consts, num_carry, unks_in, length):
    ncl = len(jaxpr.consts)
    open_j = _open(jaxpr)
    const_uk, carry_uk, xs_uk = _split(unks_in, num_consts, num_carry)
    ny = len(jaxpr.out_avals) - num_carry
    for _ in range(num_carry + 1):
        _, _, out_uk, _ = pe.partial_eval_jaxpr(open_j, [False] * ncl + const_uk + carry_uk +
                                                xs_uk, instantiate=carry_uk + [False] * ny)
        new = _or(carry_uk, out_uk[:num_carry])
        if new == carry_uk:
            break
        carry_uk = new
    in_uk = [False] * ncl + const_uk + carry_uk + xs_uk
    j1, j2, out_uk, nres = pe.partial_eval_jaxpr(open_j, in_uk,
                                                 instantiate=carry_uk + [False] * ny)
    res_vars = j2.invars[:nres]
    n_known_out = len(j1.outvars) - nres
    # j1's invars: closed consts, known consts, known carry, known xs.
    nkc = num_consts - builtins.sum(const_uk)
    nkk = num_carry - builtins.sum(carry_uk)
    const_pos = {v: i for i, v in enumerate(j1.invars[:ncl + nkc])}
    xs_pos = {v: i for i, v in enumerate(j1.invars[ncl + nkc + nkk:])}
    variant = set(j1.invars[ncl + nkc:])
    for eqn in j1.eqns:
        if builtins.any(type(x) is Var and x in variant for x in eqn.invars):
            variant.update(eqn.outvars)
    s = _ScanSplit()
    s.out_uk, s.carry_uk, s.const_uk, s.xs_uk = out_uk, carry_uk, const_uk, xs_uk
    s.ncl, s.nkc, s.nkk = ncl, nkc, nkk
    closed_consts = {}      # residual var -> value (closed-over const of the body)
    res_const, res_xs = [], []   # (kind, index) in the unknown scan's operand order
    inv_vars, stacked_vars = [], []
    for r in res_vars:
        if r in const_pos:
            k = const_pos[r]
            if k < ncl:
                closed_consts[r] = jaxpr.consts[k]
            else:
                res_const.append((r, "const", k - ncl))
        elif r in xs_pos:
            res_xs.append((r, "xs", xs_pos[r]))
        elif r not in variant:
            res_const.append((r, "inv", len(inv_vars)))
            inv_vars.append(r)
        else:
            res_xs.append((r, "stacked", len(stacked_vars)))
            stacked_vars.append(r)
    # The known scan: its body returns (known carry, known ys, stacked residuals).
    jk = Jaxpr([], j1.invars, j1.eqns, list(j1.outvars[:n_known_out]) + stacked_vars)
    jk, _ = pe.dce_jaxpr(jk)
    s.known_jaxpr = ClosedJaxpr(Jaxpr(jk.invars[:ncl], jk.invars[ncl:], jk.eqns, jk.outvars),
                                jaxpr.consts)
    s.n_known_out = n_known_out
    s.n_stacked = len(stacked_vars)
    # Loop-invariant residuals: a jaxpr over (closed consts, known consts).
    if inv_vars:
        ji = Jaxpr([], j1.invars[:ncl + nkc], j1.eqns, inv_vars)
        ji, _ = pe.dce_jaxpr(ji)
        s.inv_jaxpr = ji
    else:
        s.inv_jaxpr = None
    s.closed = [jaxpr.consts[k] for k in range(ncl)]
    s.res_const, s.res_xs = res_const, res_xs
    # The unknown scan: (res consts, unknown consts, unknown carry, res xs, unknown xs).
    n_uc = builtins.sum(const_uk)
    n_uk = builtins.sum(carry_uk)
    unk_ins = j2.invars[nres:]
    invars = ([r for r, _, _ in res_const] + unk_ins[:n_uc + n_uk] + [r for r, _, _ in res_xs]
              + unk_ins[n_uc + n_uk:])
    cvars = list(closed_consts)
    s.unknown_jaxpr = ClosedJaxpr(Jaxpr(cvars, invars, j2.eqns, j2.outvars),
                                  [closed_consts[v] for v in cvars])
    s.unknown_num_consts = len(res_const) + n_uc
    s.unknown_num_carry = n_uk
    return s


def _scan_run_known(s, known_vals, params):
    """Run the known scan (and the loop-invariant residuals) on the known operands:
    returns (known outputs, residual consts, residual xs) for the unknown scan."""
    kc, kk, kx = _split(known_vals, s.nkc, s.nkk)
    inv = eval_jaxpr(s.inv_jaxpr, [], *s.closed, *kc) if s.inv_jaxpr is not None else []
    outs = scan_p.bind(*kc, *kk, *kx, jaxpr=s.known_jaxpr, num_consts=len(kc),
                       num_carry=len(kk), **params)
    known_outs, stacked = outs[:s.n_known_out], outs[s.n_known_out:]
    res_c = [kc[i] if kind == "const" else inv[i] for _, kind, i in s.res_const]
    res_x = [kx[i] if kind == "xs" else stacked[i] for _, kind, i in s.res_xs]
    return known_outs, res_c, res_x


def _scan_partial_eval(trace, tracers, *, jaxpr, num_consts, num_carry, length, reverse,
                       unroll):
    params = dict(length=length, reverse=reverse, unroll=unroll)
    unks_in = [t.pval.is_unknown for t in tracers]
    s = _scan_split(jaxpr, num_consts, num_carry, unks_in, length)
    split_uk = _split_carry_uk(unks_in, s, num_consts, num_carry)
    known_vals = [t.pval.const for t, u in _zip(tracers, split_uk) if not u]
    known_outs, res_c, res_x = _scan_run_known(s, known_vals, params)
    consts, carry, xs = _split(tracers, num_consts, num_carry)
    tracers_in = ([_known_tracer(trace, r) for r in res_c]
                  + [t for t in consts if t.pval.is_unknown]
                  + [trace.instantiate_const(t) for t, u in _zip(carry, s.carry_uk) if u]
                  + [_known_tracer(trace, r) for r in res_x]
                  + [t for t in xs if t.pval.is_unknown])
    uparams = dict(params, jaxpr=s.unknown_jaxpr, num_consts=s.unknown_num_consts,
                   num_carry=s.unknown_num_carry)
    from tracer.core import abstract_eval_cached
    avals_out = abstract_eval_cached(scan_p, [t.aval for t in tracers_in], uparams)
    staged = _stage(trace, scan_p, tracers_in, uparams, avals_out)
    k_it, u_it = iter(known_outs), iter(staged)
    return [next(u_it) if u else pe.PartialEvalTracer(trace, pe.PartialVal.known(next(k_it)),
                                                       None) for u in s.out_uk]


def _scan_partial_eval_jaxpr(unks_in, eqn):
    p = eqn.params
    nc, nk = p["num_consts"], p["num_carry"]
    params = dict(length=p["length"], reverse=p["reverse"], unroll=p["unroll"])
    s = _scan_split(p["jaxpr"], nc, nk, unks_in, p["length"])
    consts, carry, xs = _split(eqn.invars, nc, nk)
    known_in = [x for x, u in _zip(eqn.invars, _split_carry_uk(unks_in, s, nc, nk)) if not u]
    kc, kk, kx = _split(known_in, s.nkc, s.nkk)
    out_known = [v for v, u in _zip(eqn.outvars, s.out_uk) if not u]
    inv_vars = [Var(r.aval) for r, kind, _ in s.res_const if kind == "inv"]
    stacked_vars = [Var(_batched_aval(r.aval, p["length"])) for r, kind, _ in s.res_xs
                    if kind == "stacked"]
    if s.inv_jaxpr is None:
        eqn1 = JaxprEqn(scan_p, known_in, dict(params, jaxpr=s.known_jaxpr,
                                               num_consts=s.nkc, num_carry=s.nkk),
                        out_known + stacked_vars)
    else:
        # Loop-invariant residuals are computed outside the loop: one call holds both.
        def known_fun(*vals):
            outs, res_c, res_x = _scan_run_known(s, list(vals), params)
            inv = [r for r, (_, kind, _) in _zip(res_c, s.res_const) if kind == "inv"]
            st = [r for r, (_, kind, _) in _zip(res_x, s.res_xs) if kind == "stacked"]
            return [*outs, *inv, *st]

        call = pe.trace_to_closed_jaxpr(known_fun, [x.aval for x in known_in])
        eqn1 = JaxprEqn(closed_call_p, known_in, dict(jaxpr=call),
                        out_known + inv_vars + stacked_vars)
    inv_it, st_it = iter(inv_vars), iter(stacked_vars)
    res_c = [kc[i] if kind == "const" else next(inv_it) for _, kind, i in s.res_const]
    res_x = [kx[i] if kind == "xs" else next(st_it) for _, kind, i in s.res_xs]
    ins2 = (res_c + [x for x, u in _zip(consts, s.const_uk) if u]
            + [x for x, u in _zip(carry, s.carry_uk) if u] + res_x
            + [x for x, u in _zip(xs, s.xs_uk) if u])
    eqn2 = JaxprEqn(scan_p, ins2, dict(params, jaxpr=s.unknown_jaxpr,
                                       num_consts=s.unknown_num_consts,
                                       num_carry=s.unknown_num_carry),
                    [v for v, u in _zip(eqn.outvars, s.out_uk) if u])
    res = [x for x in res_c + res_x if type(x) is Var]
    # A carry known outside but unknown in the loop is instantiated: it is a residual.
    res += [x for x, u0, u in _zip(carry, _split(unks_in, nc, nk)[1], s.carry_uk)
            if u and not u0 and type(x) is Var]
    return eqn1, eqn2, s.out_uk, res


def _split_carry_uk(unks_in, s, nc, nk):
    c, _, x = _split(unks_in, nc, nk)
    return c + s.carry_uk + x


def _scan_transpose(cts, *args, jaxpr, num_consts, num_carry, length, reverse, unroll):
    consts, init, xs = _split(args, num_consts, num_carry)
    c_lin = [ad.is_undefined_primal(x) for x in consts]
    k_lin = [ad.is_undefined_primal(x) for x in init]
    x_lin = [ad.is_undefined_primal(x) for x in xs]
    # A carry that is a known value in a linear loop can only be an instantiated zero
    # tangent: it is transposed like the others and its cotangent dropped.
    ct_carry, ct_ys = _split(cts, num_carry)
    j_in = jaxpr.in_avals
    c_avals, k_avals, x_avals = _split(j_in, num_consts, num_carry)
    ct_carry = [_instantiate(c, a) for c, a in _zip(ct_carry, k_avals)]
    ys_nz = [type(c) is not Zero for c in ct_ys]
    res_c = [x for x, lin in _zip(consts, c_lin) if not lin]
    res_x = [x for x, lin in _zip(xs, x_lin) if not lin]
    lin_c_avals = [_tangent_aval(a) for a, lin in _zip(c_avals, c_lin) if lin]
    y_avals = [_tangent_aval(a) for a in jaxpr.out_avals[num_carry:]]
    ct_c_init = [ad.zeros_like_aval(a) for a in lin_c_avals]
    n_rc, n_lc, n_y = len(res_c), len(lin_c_avals), builtins.sum(ys_nz)

    def body(*args):
        rc, acc, ck, cy, rx = _split(args, n_rc, n_lc, num_carry, n_y)
        rc_it, rx_it, cy_it = iter(rc), iter(rx), iter(cy)
        call_args = ([ad.UndefinedPrimal(a) if lin else next(rc_it)
                      for a, lin in _zip(c_avals, c_lin)]
                     + [ad.UndefinedPrimal(a) for a in k_avals]
                     + [ad.UndefinedPrimal(a) if lin else next(rx_it)
                        for a, lin in _zip(x_avals, x_lin)])
        call_cts = list(ck) + [next(cy_it) if nz else Zero(a) for a, nz in _zip(y_avals,
                                                                                 ys_nz)]
        outs = ad.backward_pass(_open(jaxpr), list(jaxpr.consts) + call_args, call_cts)
        ct_c, ct_k, ct_x = _split(outs, n_lc, num_carry)
        lin_x_avals = [a for a, lin in _zip(x_avals, x_lin) if lin]
        new_acc = [ad.add_tangents(a, c) if type(c) is not Zero else a
                   for a, c in _zip(acc, ct_c)]
        return ([*new_acc] + [_instantiate(c, a) for c, a in _zip(ct_k, k_avals)]
                + [_instantiate(c, a) for c, a in _zip(ct_x, lin_x_avals)])

    in_avals = ([get_aval(r) for r in res_c] + lin_c_avals + [_tangent_aval(a) for a in k_avals]
                + [a for a, nz in _zip(y_avals, ys_nz) if nz]
                + [a for a, lin in _zip(x_avals, x_lin) if not lin])
    t_jaxpr = pe.trace_to_closed_jaxpr(body, in_avals)
    outs = scan_p.bind(*res_c, *ct_c_init, *ct_carry, *[c for c in ct_ys if type(c) is not Zero],
                       *res_x, jaxpr=t_jaxpr, num_consts=n_rc, num_carry=n_lc + num_carry,
                       length=length, reverse=not reverse, unroll=unroll)
    ct_consts, ct_init, ct_xs = _split(outs, n_lc, num_carry)
    c_it, x_it = iter(ct_consts), iter(ct_xs)
    return ([next(c_it) if lin else None for lin in c_lin]
            + [c if lin else None for c, lin in _zip(ct_init, k_lin)]
            + [next(x_it) if lin else None for lin in x_lin])


def _scan_dce(used_outputs, eqn):
    p = eqn.params
    jaxpr, nc, nk = p["jaxpr"], p["num_consts"], p["num_carry"]
    if not builtins.any(used_outputs):
        return [False] * len(eqn.invars), None
    used_carry, used_ys = _split(used_outputs, nk)
    for _ in range(nk + 1):
        used_in = _used_inputs(jaxpr, used_carry + used_ys)
        new = _or(used_carry, used_in[nc:nc + nk])
        if new == used_carry:
            break
        used_carry = new
    used_in = _used_inputs(jaxpr, used_carry + used_ys)
    used_c, _, used_x = _split(used_in, nc, nk)
    keep = used_c + used_carry + used_x
    if builtins.all(keep) and builtins.all(used_outputs):
        return keep, eqn
    new_j = _dce_closed(jaxpr, used_carry + used_ys, keep)
    outvars = ([v for v, u in _zip(eqn.outvars[:nk], used_carry) if u]
               + [v for v, u in _zip(eqn.outvars[nk:], used_ys) if u])
    new_eqn = JaxprEqn(scan_p, [x for x, u in _zip(eqn.invars, keep) if u],
                       dict(p, jaxpr=new_j, num_consts=builtins.sum(used_c),
                            num_carry=builtins.sum(used_carry)), outvars)
    return keep, new_eqn


scan_p = _ControlFlowPrimitive("scan")
scan_p.def_abstract_eval(_scan_abstract_eval)
scan_p.def_impl(_scan_impl)
ad.primitive_jvps[scan_p] = _scan_jvp
ad.primitive_transposes[scan_p] = _scan_transpose
batching.primitive_batchers[scan_p] = _scan_batch
batching.batch_when_unmapped.add(scan_p)
pe.partial_eval_rules[scan_p] = _scan_partial_eval
pe.partial_eval_jaxpr_rules[scan_p] = _scan_partial_eval_jaxpr
pe.dce_rules[scan_p] = _scan_dce


# ========================================= map =============================================

def map(f, xs, batch_size=None):
    """``stack([f(x) for x in xs])`` over the leading axis of the pytree ``xs``, as a
    ``scan`` with no carry (``jax.lax.map``). With ``batch_size``, ``f`` is vmapped over
    chunks of that many elements (the remainder in one more vmapped call), trading memory
    for fewer loop steps."""
    if not callable(f):
        raise TypeError(f"map: f must be callable, got {type(f).__name__}")
    if batch_size is None:
        _, ys = _scan(lambda _, x: ((), f(x)), (), xs, None, False, 1, "map")
        return ys
    batch_size = operator.index(batch_size)
    if batch_size < 1:
        raise ValueError(f"map: batch_size must be a positive integer, got {batch_size}")
    leaves, tree = _flatten_operands(xs, "map", "xs")
    if not leaves:
        raise ValueError("map: got no xs to map over")
    n = get_aval(leaves[0]).shape[0] if get_aval(leaves[0]).ndim else 0
    for x in leaves:
        a = get_aval(x)
        if a.ndim == 0 or a.shape[0] != n:
            raise ValueError(f"map: the leaves of xs must share a leading axis, got "
                             f"{', '.join(get_aval(y).str_short() for y in leaves)}")
    from lax.shapes import concatenate, reshape, slice_in_dim
    n_main = (n // batch_size) * batch_size
    n_rem = n - n_main

    out_tree_box = []

    def vf(*flat):
        def g(*xs):
            out = f(tree_unflatten(tree, list(xs)))
            out_leaves, out_tree = tree_flatten(out)
            out_tree_box.append(out_tree)
            return out_leaves

        size = get_aval(flat[0]).shape[0]
        outs, dims = batching.vmap_flat(g, size, None, [0] * len(flat), list(flat))
        return [batching.matchaxis(size, d, 0, o) for o, d in _zip(outs, dims)]

    parts = []
    if n_main:
        main = [reshape(slice_in_dim(x, 0, n_main, 1, 0),
                        (n_main // batch_size, batch_size) + get_aval(x).shape[1:])
                for x in leaves]
        _, ys = _scan(lambda _, x: ((), vf(*x)), (), main, None, False, 1, "map")
        parts.append([reshape(y, (n_main,) + get_aval(y).shape[2:]) for y in ys])
    if n_rem:
        rem = [slice_in_dim(x, n_main, n, 1, 0) for x in leaves]
        parts.append(vf(*rem))
    if not parts:
        _, ys = _scan(lambda _, x: ((), f(x)), (), xs, None, False, 1, "map")
        return ys
    flat = parts[0] if len(parts) == 1 else [concatenate(list(p), 0) for p in _zip(*parts)]
    return tree_unflatten(out_tree_box[0], flat)


# ================================= associative_scan =======================================

def associative_scan(fn, elems, reverse=False, axis=0):
    """All prefix combinations ``[e0, fn(e0, e1), fn(fn(e0, e1), e2), ...]`` along ``axis``
    for an associative ``fn`` (``jax.lax.associative_scan``), computed in O(log n)
    vectorized rounds (the odd/even parallel-prefix scheme): ``fn`` is called on whole
    slices of ``elems`` (a pytree of arrays sharing the size of ``axis``) and must return
    the same pytree. ``reverse`` scans from the end. Raises ValueError for mismatched
    sizes along ``axis``."""
    from lax.shapes import concatenate, expand_dims, reshape, rev, slice_in_dim
    leaves, tree = _flatten_operands(elems, "associative_scan", "elems")
    if not leaves:
        return elems
    ndims = [get_aval(x).ndim for x in leaves]
    if builtins.min(ndims) == 0:
        raise ValueError("associative_scan: elems must have at least one axis, got "
                         f"{', '.join(get_aval(x).str_short() for x in leaves)}")
    axes = [axis % nd if -nd <= axis < nd else None for nd in ndims]
    if None in axes:
        raise ValueError(f"associative_scan: axis {axis} is out of range for elems of rank "
                         f"{builtins.min(ndims)}")
    sizes = {get_aval(x).shape[a] for x, a in _zip(leaves, axes)}
    if len(sizes) != 1:
        raise ValueError("associative_scan: elems must share the size of axis "
                         f"{axis}, got {', '.join(get_aval(x).str_short() for x in leaves)}")
    if reverse:
        leaves = [rev(x, (a,)) for x, a in _zip(leaves, axes)]

    def combine(a, b):
        out = fn(tree_unflatten(tree, a), tree_unflatten(tree, b))
        out_leaves, out_tree = tree_flatten(out)
        if out_tree != tree:
            raise TypeError(f"associative_scan: fn must return the structure of elems, "
                            f"{tree}; got {out_tree}")
        return out_leaves

    def sl(xs, start, stop, step=1):
        return [slice_in_dim(x, start, stop, step, a) for x, a in _zip(xs, axes)]

    def interleave(evens, odds):
        # evens[k] goes to position 2k, odds[k] to 2k + 1; len(evens) - len(odds) is 0 or 1.
        out = []
        for e, o, a in _zip(evens, odds, axes):
            ne, no = get_aval(e).shape[a], get_aval(o).shape[a]
            head = slice_in_dim(e, 0, no, 1, a)
            pair = concatenate([expand_dims(head, (a + 1,)), expand_dims(o, (a + 1,))], a + 1)
            shape = list(get_aval(o).shape)
            shape[a] = 2 * no
            merged = reshape(pair, tuple(shape))
            if ne > no:
                merged = concatenate([merged, slice_in_dim(e, no, ne, 1, a)], a)
            out.append(merged)
        return out

    def prefix(xs):
        n = get_aval(xs[0]).shape[axes[0]]
        if n < 2:
            return xs
        # Combine neighbours (0,1), (2,3), ...; their scan gives the odd positions.
        odds = prefix(combine(sl(xs, 0, n - 1, 2), sl(xs, 1, n, 2)))
        # Even positions 2, 4, ...: the odd result just before, combined with the element.
        n_even_rest = (n - 1) // 2
        if n_even_rest:
            evens_rest = combine(sl(odds, 0, n_even_rest), sl(xs, 2, n, 2))
            evens = [concatenate([f, r], a) for f, r, a in _zip(sl(xs, 0, 1), evens_rest,
                                                                 axes)]
        else:
            evens = sl(xs, 0, 1)
        return interleave(evens, odds)

    out = prefix(leaves)
    if reverse:
        out = [rev(x, (a,)) for x, a in _zip(out, axes)]
    return tree_unflatten(tree, out)


# ================================ OptimizationBarrier =====================================

def optimization_barrier(operand):
    """Identity on a pytree of arrays that no optimization moves computation across: all
    of ``operand`` is computed before anything that uses the result
    (``jax.lax.optimization_barrier``; XLA 'OptimizationBarrier')."""
    leaves, tree = _flatten_operands(operand, "optimization_barrier", "operand")
    if not leaves:
        return operand
    return tree_unflatten(tree, optimization_barrier_p.bind(*leaves))


def _barrier_jvp(primals, tangents):
    outs = optimization_barrier_p.bind(*primals)
    nz = [type(t) is not Zero for t in tangents]
    if not builtins.any(nz):
        return outs, [Zero.from_primal_value(o) for o in outs]
    t_outs = iter(optimization_barrier_p.bind(*[t for t in tangents if type(t) is not Zero]))
    return outs, [next(t_outs) if z else Zero.from_primal_value(o) for o, z in _zip(outs, nz)]


def _barrier_transpose(cts, *args):
    nz = [type(c) is not Zero for c, a in _zip(cts, args) if ad.is_undefined_primal(a)]
    lin_cts = [c for c, a in _zip(cts, args) if ad.is_undefined_primal(a)
               and type(c) is not Zero]
    outs = iter(optimization_barrier_p.bind(*lin_cts) if lin_cts else [])
    nz_it = iter(nz)
    res = []
    for c, a in _zip(cts, args):
        if not ad.is_undefined_primal(a):
            res.append(None)
        else:
            res.append(next(outs) if next(nz_it) else None)
    return res


def _barrier_batch(axis_data, vals, dims):
    return optimization_barrier_p.bind(*vals), list(dims)


optimization_barrier_p = Primitive("optimization_barrier")
optimization_barrier_p.multiple_results = True
optimization_barrier_p.def_abstract_eval(lambda *avals: list(avals))
optimization_barrier_p.def_impl(lambda *xs: list(xs))
ad.primitive_jvps[optimization_barrier_p] = _barrier_jvp
ad.primitive_transposes[optimization_barrier_p] = _barrier_transpose
batching.primitive_batchers[optimization_barrier_p] = _barrier_batch


# =================================== CompositeCall ========================================

def composite(decomposition, name: str, version: int = 0):
    """Mark ``decomposition`` as the named composite operation ``name`` (a decorator;
    ``jax.lax.composite``; XLA 'CompositeCall'): calling the result stages one
    ``composite`` equation holding the decomposition's jaxpr, with the keyword arguments
    as static attributes. A backend may implement the op by name or inline the
    decomposition, which defines its semantics; differentiation and vmap inline it.
    Keyword arguments must be hashable (they are part of the equation's params)."""
    if not callable(decomposition):
        raise TypeError(f"composite: decomposition must be callable, got "
                        f"{type(decomposition).__name__}")
    if not isinstance(name, str) or not name:
        raise TypeError(f"composite: name must be a non-empty string, got {name!r}")

    @functools.wraps(decomposition)
    def composite_fun(*args, **kwargs):
        for k, v in kwargs.items():
            try:
                hash(v)
            except TypeError:
                raise TypeError(f"composite {name}: attribute {k}={v!r} is not hashable; "
                                "attributes are static (use tuples instead of lists)") from None
        leaves, in_tree = _flatten_operands(tuple(args), f"composite {name}", "argument")
        avals = [get_aval(x) for x in leaves]
        closed, consts, out_tree = _trace_fun(
            functools.partial(decomposition, **kwargs), in_tree, avals, f"composite {name}",
            "the decomposition")
        outs = composite_p.bind(*consts, *leaves, jaxpr=closed, name=name,
                                attributes=tuple(sorted(kwargs.items())),
                                version=operator.index(version))
        return tree_unflatten(out_tree, outs)

    return composite_fun


def _composite_abstract_eval(*avals, jaxpr, name, attributes, version):
    exp = jaxpr.in_avals
    if len(exp) != len(avals) or not builtins.all(_typematch(a, e) for a, e in _zip(avals,
                                                                                     exp)):
        raise TypeError(f"composite {name}: the decomposition takes "
                        f"({', '.join(a.str_short() for a in exp)}), got "
                        f"({', '.join(a.str_short() for a in avals)})")
    return list(jaxpr.out_avals)


def _composite_jvp(primals, tangents, *, jaxpr, name, attributes, version):
    return ad.jvp_flat(functools.partial(eval_jaxpr, jaxpr.jaxpr, jaxpr.consts), list(primals),
                       list(tangents), instantiate=False)


def _composite_batch(axis_data, vals, dims, *, jaxpr, name, attributes, version):
    if builtins.all(d is None for d in dims) and not _uses_axis(axis_data, [jaxpr]):
        outs = composite_p.bind(*vals, jaxpr=jaxpr, name=name, attributes=attributes,
                                version=version)
        return outs, [None] * len(outs)
    return batching.vmap_flat(functools.partial(eval_jaxpr, jaxpr.jaxpr, jaxpr.consts),
                              axis_data.size, axis_data.name, list(dims), list(vals),
                              axis_data.group)


composite_p = _ControlFlowPrimitive("composite")
composite_p.def_abstract_eval(_composite_abstract_eval)
composite_p.def_impl(lambda *args, jaxpr, **_: _eval_closed(jaxpr, args))
ad.primitive_jvps[composite_p] = _composite_jvp
batching.primitive_batchers[composite_p] = _composite_batch
batching.batch_when_unmapped.add(composite_p)


# ===================================== closed_call ========================================

def closed_call(fun, *args, **kwargs):
    """Call ``fun(*args, **kwargs)`` as one ``closed_call`` equation holding its jaxpr (XLA
    'Call'): the call survives tracing, so a program keeps its structure; all
    transformations apply to it as to ``jit`` calls. Returns ``fun``'s output pytree."""
    if not callable(fun):
        raise TypeError(f"closed_call: fun must be callable, got {type(fun).__name__}")
    leaves, in_tree = _flatten_operands((args, kwargs), "closed_call", "argument")
    avals = [get_aval(x) for x in leaves]
    closed, consts, out_tree = _trace_fun(lambda a, k: fun(*a, **k), in_tree, avals,
                                          "closed_call", _fun_name(fun))
    outs = closed_call_p.bind(*consts, *leaves, jaxpr=closed)
    return tree_unflatten(out_tree, outs)


# ================================= platform_dependent =====================================

_PLATFORMS = ("cpu", "cuda", "rocm", "tpu")


def platform_dependent(*args, default=None, **per_platform):
    """``per_platform[platform](*args)`` for the platform the program runs on
    (``jax.lax.platform_dependent``). Programs here always run on the CPU (NumPy eagerly,
    Numba under jit), so the ``cpu`` branch is taken, else ``default``. Raises TypeError
    for an unknown platform name or a non-callable branch, NotImplementedError when
    neither ``cpu`` nor ``default`` is given."""
    for name, fn in per_platform.items():
        if name not in _PLATFORMS:
            raise TypeError(f"platform_dependent: unknown platform {name!r}; expected one of "
                            f"{', '.join(_PLATFORMS)}")
        if not callable(fn):
            raise TypeError(f"platform_dependent: the branch for {name} must be callable, "
                            f"got {type(fn).__name__}")
    fn = per_platform.get("cpu", default)
    if fn is None:
        raise NotImplementedError(
            f"platform_dependent: no branch for platform 'cpu' and no default (branches for "
            f"{', '.join(sorted(per_platform)) or 'none'})")
    if not callable(fn):
        raise TypeError(f"platform_dependent: default must be callable, got "
                        f"{type(fn).__name__}")
    return fn(*args)
