"""Passes on jaxprs, each ``ClosedJaxpr -> ClosedJaxpr`` (pure: the input is not changed).

- ``inline_calls``: splice the sub-jaxprs of ``jit``/``closed_call`` equations (and of any
  primitive registered in ``inline_rules``) into the caller;
- ``dce``: drop equations whose outputs are unused (unless effectful);
- ``cse``: one equation per (primitive, operands, params);
- ``fold_constants``: evaluate scalar equations of literals now (their NumPy impl);
- ``simplify``: algebraic identities that are exact in IEEE arithmetic (x * 1, x - 0,
  x / 1 (real dtypes only), neg(neg x), transpose(transpose x) as one transpose, no-op
  converts/reshapes/transposes/broadcasts...);
- ``swap_transposed_dots``: ``transpose(dot_general(a, b))`` that only swaps the two
  operands' free dims is ``dot_general(b, a)`` (BLAS writes the wanted layout; no copy;
  real dtypes only);
- ``fold_transposed_operands``: ``dot_general(transpose(a), b)`` contracts ``a``'s own
  dims instead (BLAS reads a transposed operand in place; no transpose kernel).

Output avals of the program are kept by the caller (a simplification may replace an
output by a var with a different weak_type; the executor uses the original avals).
"""
from __future__ import annotations

import numpy as np

from tracer import dtypes
from tracer.core import ShapedArray
from tracer.jaxpr import ClosedJaxpr, DropVar, Jaxpr, JaxprEqn, Literal, Var
from tracer.ad_checkpoint import checkpoint_p, name_p
from tracer.custom_derivatives import custom_jvp_call_p, custom_vjp_call_p
from tracer.interpreters.ad import stop_gradient_p
from tracer.interpreters.call import closed_call_p, jit_p
from tracer.interpreters.partial_eval import eqn_has_effects, effectful_primitives


def _identity(eqn) -> ClosedJaxpr:
    v = Var(eqn.outvars[0].aval)
    return ClosedJaxpr(Jaxpr([], [v], [], [v]), [])


# prim -> function(eqn) -> ClosedJaxpr to splice in place of the equation (same operands
# and results), or None to keep it. The call-like primitives of tracer's core are here;
# a rule module of lowering registers those of its lax family (composite, linear_solve).
#
# Under jit a custom_jvp/custom_vjp call is its primal function, and a checkpointed
# function is spliced into its caller: differentiation, and the rematerialization that
# partial evaluation decides, happen before lowering. (CSE may then merge a recomputed
# value with the original: faster, without the memory saving.) stop_gradient and
# checkpoint_name are the identity.
inline_rules: dict = {
    jit_p: lambda eqn: eqn.params["jaxpr"],
    closed_call_p: lambda eqn: eqn.params["jaxpr"],
    custom_jvp_call_p: lambda eqn: eqn.params["call_jaxpr"],
    custom_vjp_call_p: lambda eqn: eqn.params["call_jaxpr"],
    checkpoint_p: lambda eqn: eqn.params["jaxpr"],
    stop_gradient_p: _identity,
    name_p: _identity,
}

# Equations that must never be removed, merged or folded (callbacks, printing, stateful
# random bits): those of ``partial_eval.effectful_primitives`` (the one registry; imported
# here as ``effectful_primitives`` for the rule modules), and those holding a sub-jaxpr
# with such an equation (a loop around an io_callback).
def is_effectful(eqn) -> bool:
    return eqn_has_effects(eqn) or bool(getattr(eqn.primitive, "has_effects", False))


# ------------------------------------------ inline -----------------------------------------

def inline_calls(closed: ClosedJaxpr) -> ClosedJaxpr:
    constvars, consts = list(closed.jaxpr.constvars), list(closed.consts)
    eqns: list = []
    env: dict = {}

    def read(a):
        return a if isinstance(a, Literal) else env.get(a, a)

    def splice(sub: ClosedJaxpr, invals):
        sub = inline_calls(sub)
        local: dict = {}
        for v, c in zip(sub.jaxpr.constvars, sub.consts):
            nv = Var(v.aval)
            constvars.append(nv)
            consts.append(c)
            local[v] = nv
        for v, x in zip(sub.jaxpr.invars, invals):
            local[v] = x

        def sread(a):
            return a if isinstance(a, Literal) else local[a]

        for e in sub.jaxpr.eqns:
            outs = []
            for v in e.outvars:
                nv = Var(v.aval) if type(v) is not DropVar else DropVar(v.aval)
                local[v] = nv
                outs.append(nv)
            eqns.append(JaxprEqn(e.primitive, [sread(a) for a in e.invars], e.params, outs))
        return [sread(a) for a in sub.jaxpr.outvars]

    for eqn in closed.jaxpr.eqns:
        rule = inline_rules.get(eqn.primitive)
        sub = rule(eqn) if rule is not None else None
        if sub is None:
            eqns.append(JaxprEqn(eqn.primitive, [read(a) for a in eqn.invars], eqn.params,
                                 eqn.outvars))
            continue
        outs = splice(sub, [read(a) for a in eqn.invars])
        for v, o in zip(eqn.outvars, outs):
            if type(v) is not DropVar:
                env[v] = o
    outvars = [read(a) for a in closed.jaxpr.outvars]
    return ClosedJaxpr(Jaxpr(constvars, closed.jaxpr.invars, eqns, outvars), consts)


# ------------------------------------------- DCE -------------------------------------------

def dce(closed: ClosedJaxpr) -> ClosedJaxpr:
    jaxpr = closed.jaxpr
    live = {v for v in jaxpr.outvars if isinstance(v, Var)}
    kept = []
    for eqn in reversed(jaxpr.eqns):
        if is_effectful(eqn) or any(v in live for v in eqn.outvars):
            kept.append(eqn)
            live.update(a for a in eqn.invars if isinstance(a, Var))
    kept.reverse()
    cv = [(v, c) for v, c in zip(jaxpr.constvars, closed.consts) if v in live]
    return ClosedJaxpr(Jaxpr([v for v, _ in cv], jaxpr.invars, kept, jaxpr.outvars),
                       [c for _, c in cv])


# ------------------------------------------- CSE -------------------------------------------

def _atom_key(a):
    # (a literal's weak_type only steered promotion while tracing: the equation's output
    # avals, in the key beside it, hold the outcome, and the operand's value is the same)
    if isinstance(a, Literal):
        v = np.asarray(a.val)
        return ("lit", dtypes.dtype_key(v.dtype), v.tobytes())
    return ("var", id(a))


def cse(closed: ClosedJaxpr) -> ClosedJaxpr:
    jaxpr = closed.jaxpr
    env: dict = {}
    seen: dict = {}
    eqns = []

    def read(a):
        return a if isinstance(a, Literal) else env.get(a, a)

    for eqn in jaxpr.eqns:
        invars = [read(a) for a in eqn.invars]
        key = None
        if not is_effectful(eqn):
            try:
                key = (eqn.primitive, tuple(_atom_key(a) for a in invars),
                       tuple(sorted(eqn.params.items())),
                       tuple((v.aval.weak_type, v.aval.dtype) for v in eqn.outvars))
                hash(key)
            except TypeError:
                key = None
        prev = seen.get(key) if key is not None else None
        if prev is not None:
            for v, p in zip(eqn.outvars, prev):
                env[v] = p
            continue
        new = JaxprEqn(eqn.primitive, invars, eqn.params, eqn.outvars)
        eqns.append(new)
        if key is not None and not any(type(v) is DropVar for v in eqn.outvars):
            # (an equation with a dropped output cannot stand in for a later one whose
            # same output is read)
            seen[key] = eqn.outvars
    outvars = [read(a) for a in jaxpr.outvars]
    return ClosedJaxpr(Jaxpr(jaxpr.constvars, jaxpr.invars, eqns, outvars), closed.consts)


# ------------------------------------- constant folding -------------------------------------

def fold_constants(closed: ClosedJaxpr) -> ClosedJaxpr:
    """Equations whose operands are all literals and whose results are scalars become
    literals (evaluated by the NumPy impl, so the value is the eager one)."""
    jaxpr = closed.jaxpr
    env: dict = {}
    eqns = []

    def read(a):
        return a if isinstance(a, Literal) else env.get(a, a)

    for eqn in jaxpr.eqns:
        invars = [read(a) for a in eqn.invars]
        prim = eqn.primitive
        if (invars and all(isinstance(a, Literal) for a in invars) and prim.impl is not None
                and not is_effectful(eqn) and not prim.multiple_results
                and all(isinstance(v.aval, ShapedArray) and v.aval.shape == ()
                        for v in eqn.outvars)):
            try:
                with np.errstate(all="ignore"):
                    out = prim.impl(*[np.asarray(a.val) for a in invars], **eqn.params)
                (v,) = eqn.outvars
                val = np.asarray(out).astype(v.aval.dtype)
                env[v] = Literal(val, v.aval)
                continue
            except Exception:
                pass
        eqns.append(JaxprEqn(prim, invars, eqn.params, eqn.outvars))
    outvars = [read(a) for a in jaxpr.outvars]
    return ClosedJaxpr(Jaxpr(jaxpr.constvars, jaxpr.invars, eqns, outvars), closed.consts)


# ---------------------------------------- simplify ------------------------------------------

def _is_lit(a, value) -> bool:
    if not isinstance(a, Literal):
        return False
    v = np.asarray(a.val)
    if v.shape != ():
        return False
    # (is_floating, not kind "f": ml_dtypes' bfloat16 and float8 types are kind "V")
    if value == "-0.0":
        return dtypes.is_floating(v.dtype) and v == 0 and bool(np.signbit(v))
    return bool(v == value) and not (dtypes.is_floating(v.dtype) and value == 0
                                     and np.signbit(v))


def _same_type(a, v) -> bool:
    return a.aval.shape == v.aval.shape and a.aval.dtype == v.aval.dtype


def _simplify_eqn(eqn, invars):
    """The atom equal to the equation's single output, or None."""
    name = eqn.primitive.name
    (out,) = eqn.outvars if len(eqn.outvars) == 1 else (None,)
    if out is None:
        return None
    p = eqn.params
    if name == "mul":
        # (not complex: (a+bj)(1+0j) is NaN in both parts where a or b is not finite,
        # as NumPy computes it)
        x, y = invars
        if out.aval.dtype.kind == "c":
            return None
        if _is_lit(y, 1) and _same_type(x, out):
            return x
        if _is_lit(x, 1) and _same_type(y, out):
            return y
    elif name in ("add", "add_any"):
        x, y = invars
        for a, b in ((x, y), (y, x)):
            if _same_type(a, out) and (
                    (_is_lit(b, 0) and b.aval.dtype.kind in "iu") or _is_lit(b, "-0.0")):
                return a
    elif name == "sub":
        x, y = invars
        # x - (+0) is x for every x; x - (-0) is x + 0, which turns -0 into +0
        if _same_type(x, out) and _is_lit(y, 0):
            return x
    elif name == "div":
        x, y = invars
        if _is_lit(y, 1) and _same_type(x, out) and out.aval.dtype.kind != "c":
            return x
    elif name == "convert_element_type":
        (x,) = invars
        if x.aval.dtype == p["new_dtype"]:
            return x
    elif name == "reshape":
        (x,) = invars
        if x.aval.shape == tuple(p["new_sizes"]):
            return x
    elif name == "transpose":
        (x,) = invars
        if tuple(p["permutation"]) == tuple(range(len(p["permutation"]))):
            return x
    elif name == "broadcast_in_dim":
        (x,) = invars
        if x.aval.shape == tuple(p["shape"]):
            return x
    elif name == "select_n":
        if len(invars) == 2:
            return invars[1]
        # All cases one var (a vmapped cond selects x or stop_gradient(x), the same value
        # once stop_gradient is gone).
        cases = invars[1:]
        if isinstance(cases[0], Var) and all(c is cases[0] for c in cases) \
                and _same_type(cases[0], out):
            return cases[0]
    elif name == "integer_pow":
        if p["y"] == 1:
            return invars[0]
    return None


def simplify(closed: ClosedJaxpr) -> ClosedJaxpr:
    jaxpr = closed.jaxpr
    env: dict = {}
    producer: dict = {}
    eqns = []

    def read(a):
        return a if isinstance(a, Literal) else env.get(a, a)

    for eqn in jaxpr.eqns:
        invars = [read(a) for a in eqn.invars]
        if eqn.primitive.name == "neg":
            src = producer.get(invars[0]) if isinstance(invars[0], Var) else None
            if src is not None and src.primitive.name == "neg":
                env[eqn.outvars[0]] = src.invars[0]
                continue
        params = eqn.params
        if eqn.primitive.name == "transpose":
            # transpose(transpose(x, p1), p2) is transpose(x, p1[p2]): one copy, or none
            src = producer.get(invars[0]) if isinstance(invars[0], Var) else None
            if src is not None and src.primitive.name == "transpose":
                p1 = src.params["permutation"]
                perm = tuple(p1[i] for i in params["permutation"])
                invars, params = [src.invars[0]], {**params, "permutation": perm}
        if not is_effectful(eqn):
            rep = _simplify_eqn(JaxprEqn(eqn.primitive, invars, params, eqn.outvars), invars)
            if rep is not None:
                env[eqn.outvars[0]] = rep
                continue
        new = JaxprEqn(eqn.primitive, invars, params, eqn.outvars)
        for v in eqn.outvars:
            producer[v] = new
        eqns.append(new)
    outvars = [read(a) for a in jaxpr.outvars]
    return ClosedJaxpr(Jaxpr(jaxpr.constvars, jaxpr.invars, eqns, outvars), closed.consts)


# ------------------------------------ transposed dots ---------------------------------------

def _use_counts(jaxpr: Jaxpr) -> dict:
    """var -> how many times the equations and the outputs of ``jaxpr`` read it."""
    uses: dict = {}
    for e in jaxpr.eqns:
        for a in e.invars:
            if isinstance(a, Var):
                uses[a] = uses.get(a, 0) + 1
    for v in jaxpr.outvars:
        if isinstance(v, Var):
            uses[v] = uses.get(v, 0) + 1
    return uses


def swap_transposed_dots(closed: ClosedJaxpr) -> ClosedJaxpr:
    jaxpr = closed.jaxpr
    uses = _use_counts(jaxpr)
    producer = {e.outvars[0]: e for e in jaxpr.eqns if len(e.outvars) == 1}
    replace: dict = {}      # id(dot eqn) -> None (dropped); id(transpose eqn) -> new eqn
    for e in jaxpr.eqns:
        if e.primitive.name != "transpose" or not isinstance(e.invars[0], Var):
            continue
        d = producer.get(e.invars[0])
        if d is None or d.primitive.name != "dot_general" or uses.get(e.invars[0]) != 1:
            continue
        (lc, rc), (lb, rb) = d.params["dimension_numbers"]
        lhs, rhs = d.invars
        nb = len(lb)
        nl = lhs.aval.ndim - len(lc) - nb
        nr = rhs.aval.ndim - len(rc) - nb
        want = tuple(range(nb)) + tuple(range(nb + nl, nb + nl + nr)) + tuple(range(nb, nb + nl))
        if tuple(e.params["permutation"]) != want or nl == 0 or nr == 0:
            continue
        if np.dtype(d.outvars[0].aval.dtype).kind == "c":
            # (BLAS's complex GEMM with the operands' roles swapped rounds differently:
            # einsum('bij,jk->bik') of complex64 differed from eager in its last bits)
            continue
        params = dict(d.params, dimension_numbers=((rc, lc), (rb, lb)))
        replace[id(d)] = None
        replace[id(e)] = JaxprEqn(d.primitive, [rhs, lhs], params, e.outvars)
    if not replace:
        return closed
    eqns = []
    for e in jaxpr.eqns:
        if id(e) in replace:
            if replace[id(e)] is not None:
                eqns.append(replace[id(e)])
        else:
            eqns.append(e)
    # the swapped dot takes the transpose's place: its operands are defined before it
    return ClosedJaxpr(Jaxpr(jaxpr.constvars, jaxpr.invars, eqns, jaxpr.outvars),
                       closed.consts)


def fold_transposed_operands(closed: ClosedJaxpr) -> ClosedJaxpr:
    """Drop a ``transpose`` whose result only feeds ``dot_general`` operands: each such
    dot names the transpose's operand instead, its contracting and batch dims mapped
    through the permutation. Only where the permutation keeps the order of the operand's
    free dims (they give the result's layout, so the result is the same array)."""
    jaxpr = closed.jaxpr
    consumers: dict = {}
    for e in jaxpr.eqns:
        for a in e.invars:
            if isinstance(a, Var):
                consumers.setdefault(a, []).append(e)
    outs = {v for v in jaxpr.outvars if isinstance(v, Var)}
    new_params: dict = {}     # id(dot eqn) -> (invars, params) so far
    dropped = set()
    for e in jaxpr.eqns:
        if e.primitive.name != "transpose" or not isinstance(e.invars[0], Var):
            continue
        t = e.outvars[0]
        users = consumers.get(t, [])
        if t in outs or not users or any(d.primitive.name != "dot_general" for d in users):
            continue
        perm = tuple(e.params["permutation"])
        plan = {}
        for d in {id(d): d for d in users}.values():
            invars, params = new_params.get(id(d), (list(d.invars), dict(d.params)))
            (lc, rc), (lb, rb) = params["dimension_numbers"]
            dims = [[lc, rc], [lb, rb]]
            for side in (0, 1):
                if invars[side] is not t:
                    continue
                c, b = dims[0][side], dims[1][side]
                free = [k for k in range(len(perm)) if k not in c and k not in b]
                mapped = [perm[k] for k in free]
                if mapped != sorted(mapped):
                    break
                dims[0][side] = tuple(perm[k] for k in c)
                dims[1][side] = tuple(perm[k] for k in b)
                invars[side] = e.invars[0]
            else:
                plan[id(d)] = (invars, dict(params, dimension_numbers=(
                    (dims[0][0], dims[0][1]), (dims[1][0], dims[1][1]))))
                continue
            break
        else:
            new_params.update(plan)
            dropped.add(id(e))
    if not dropped:
        return closed
    eqns = []
    for e in jaxpr.eqns:
        if id(e) in dropped:
            continue
        if id(e) in new_params:
            invars, params = new_params[id(e)]
            e = JaxprEqn(e.primitive, invars, params, e.outvars)
        eqns.append(e)
    return ClosedJaxpr(Jaxpr(jaxpr.constvars, jaxpr.invars, eqns, jaxpr.outvars),
                       closed.consts)


# ------------------------------------- scan accumulations -------------------------------------

# Stacked operands a hoisted accumulation may keep, in bytes (both together).
HOIST_MAX_BYTES = 64 << 20


def hoist_scan_products(closed: ClosedJaxpr) -> ClosedJaxpr:
    """A scan carry that only accumulates products, ``c = c + dot_general(x, y)``, becomes
    one product after the loop: the scan returns ``x`` and ``y`` of every iteration
    stacked (an ``xs`` operand is used as it is), and ``c = c_init + dot_general(X, Y)``
    contracts the iteration axis besides ``x``'s and ``y``'s own contracting dims.

    This is the weight gradient of a recurrent network: the reverse scan of ``grad``
    adds an outer product of two vectors into a matrix at every step (128x128 floats
    read and written per step), where one matrix product after the loop does the same
    work at BLAS speed. Applied where the carry is read by that add alone and the add's
    result only becomes the carry (nothing else in the body reads either), the product's
    result is at least twice the size of its two operands together, both operands vary
    per iteration (each depends on a carry or an ``xs``), the dtype is a float, the scan runs
    at least once and the stacked operands take at most ``HOIST_MAX_BYTES``. The sum's
    order changes: the result differs from the loop's by rounding, as any reassociated
    float sum (an all-zero sum's sign included: the product adds to +0.0)."""
    jaxpr = closed.jaxpr
    eqns, changed = [], False
    for eqn in jaxpr.eqns:
        rep = _hoist_scan(eqn) if eqn.primitive.name == "scan" else None
        if rep is None:
            eqns.append(eqn)
        else:
            eqns.extend(rep)
            changed = True
    if not changed:
        return closed
    return ClosedJaxpr(Jaxpr(jaxpr.constvars, jaxpr.invars, eqns, jaxpr.outvars),
                       closed.consts)


def _hoist_scan(eqn):
    """The equations replacing scan ``eqn`` with its product accumulations hoisted, or
    None."""
    if is_effectful(eqn):
        return None
    p = eqn.params
    body, nc, nk, length = cse(p["jaxpr"]), p["num_consts"], p["num_carry"], p["length"]
    bj = body.jaxpr
    if length < 1:
        return None
    carry_in, carry_out = bj.invars[nc:nc + nk], bj.outvars[:nk]
    xs_in = bj.invars[nc + nk:]
    varying = set(carry_in) | set(xs_in)      # vars that change from one iteration to the next
    for e in bj.eqns:
        if any(isinstance(a, Var) and a in varying for a in e.invars):
            varying.update(e.outvars)
    uses = _use_counts(bj)
    producer = {v: e for e in bj.eqns for v in e.outvars}
    hoisted = {}        # carry index -> (add eqn, dot eqn)
    for k, (cin, cout) in enumerate(zip(carry_in, carry_out)):
        add = producer.get(cout) if isinstance(cout, Var) else None
        if add is None or add.primitive.name not in ("add", "add_any") or \
                uses.get(cin) != 1 or uses.get(cout) != 1:
            continue    # (the carry, old or new, read by anything but the accumulation)
        a, b = add.invars
        t = b if a is cin else a if b is cin else None
        dot = producer.get(t) if isinstance(t, Var) else None
        if dot is None or dot.primitive.name != "dot_general":
            continue
        x, y = dot.invars
        aval = cin.aval
        if not (isinstance(x, Var) and isinstance(y, Var)) or x not in varying or \
                y not in varying or x is cin or y is cin:
            continue
        if not (t.aval.shape == aval.shape == add.outvars[0].aval.shape and
                t.aval.dtype == aval.dtype == add.outvars[0].aval.dtype and
                np.dtype(aval.dtype).kind == "f" and not dtypes.is_lowp(aval.dtype)):
            continue
        sx, sy = x.aval.size, y.aval.size
        if aval.size < 2 * (sx + sy) or \
                length * (sx + sy) * np.dtype(aval.dtype).itemsize > HOIST_MAX_BYTES:
            continue
        hoisted[k] = (add, dot)
    if not hoisted:
        return None
    adds = {id(add) for add, _ in hoisted.values()}
    keep = [k for k in range(nk) if k not in hoisted]
    stacked_of: dict = {}     # body var -> outer var holding it stacked (xs operands)
    for v, outer in zip(xs_in, eqn.invars[nc + nk:]):
        stacked_of.setdefault(v, outer)
    new_ys = []               # body vars the scan returns stacked, besides its own ys
    for add, dot in hoisted.values():
        for v in dot.invars:
            if v not in stacked_of and v not in new_ys:
                new_ys.append(v)
    for v in new_ys:
        stacked_of[v] = Var(ShapedArray((length,) + tuple(v.aval.shape), v.aval.dtype))
    new_body = dce(ClosedJaxpr(Jaxpr(
        bj.constvars, bj.invars[:nc] + [carry_in[k] for k in keep] + xs_in,
        [e for e in bj.eqns if id(e) not in adds],
        [carry_out[k] for k in keep] + bj.outvars[nk:] + new_ys), body.consts))
    outs = eqn.outvars
    scan = JaxprEqn(eqn.primitive,
                    eqn.invars[:nc] + [eqn.invars[nc + k] for k in keep] + eqn.invars[nc + nk:],
                    dict(p, jaxpr=new_body, num_carry=len(keep)),
                    [outs[k] for k in keep] + outs[nk:] + [stacked_of[v] for v in new_ys])
    rep = [scan]
    for k, (add, dot) in hoisted.items():
        if type(outs[k]) is DropVar:
            continue
        (lc, rc), (lb, rb) = dot.params["dimension_numbers"]
        dn = (((0,) + tuple(d + 1 for d in lc), (0,) + tuple(d + 1 for d in rc)),
              (tuple(d + 1 for d in lb), tuple(d + 1 for d in rb)))
        acc = Var(dot.outvars[0].aval)
        rep.append(JaxprEqn(dot.primitive, [stacked_of[v] for v in dot.invars],
                            dict(dot.params, dimension_numbers=dn), [acc]))
        rep.append(JaxprEqn(add.primitive, [eqn.invars[nc + k], acc], add.params, [outs[k]]))
    return rep
