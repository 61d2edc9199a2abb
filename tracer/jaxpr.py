"""Jaxprs: the small graph language programs are traced into.

``Jaxpr(constvars, invars, eqns, outvars)`` where each ``JaxprEqn`` applies a primitive
with static params to Vars and Literals. ``ClosedJaxpr`` pairs a jaxpr with the values of
its constvars. The printer writes JAX's text format::

    { lambda ; a:f64[3]. let b:f64[3] = sin a in (b,) }
"""
from __future__ import annotations

import contextlib
import itertools
from typing import Any, NamedTuple

import numpy as np

from tracer import dtypes
from tracer.core import (AbstractToken, Array, Primitive, ShapedArray, abstract_eval_cached,
                         get_aval, new_base_main, to_numpy)


class Var:
    """A variable of a jaxpr; identity is the object. ``count`` orders vars for printing."""

    __slots__ = ("aval", "count")
    _counter = itertools.count()

    def __init__(self, aval):
        self.aval = aval
        self.count = next(Var._counter)

    def __repr__(self):
        return f"Var({self.count}:{self.aval.str_short()})"


class DropVar(Var):
    """An output nobody reads; printed as ``_``."""

    __slots__ = ()


class Literal:
    """A scalar constant inlined into an equation."""

    __slots__ = ("val", "aval")

    def __init__(self, val, aval):
        self.val = val
        self.aval = aval

    def __repr__(self):
        return f"Literal({self.val})"


Atom = Any  # Var | Literal


class JaxprEqn(NamedTuple):
    primitive: Primitive
    invars: list
    params: dict
    outvars: list


class Jaxpr:
    __slots__ = ("constvars", "invars", "eqns", "outvars", "_impl_plan", "_effects")

    def __init__(self, constvars, invars, eqns, outvars):
        self.constvars = list(constvars)
        self.invars = list(invars)
        self.eqns = list(eqns)
        self.outvars = list(outvars)
        self._impl_plan = None
        self._effects = None    # partial_eval.jaxpr_has_effects's cache

    @property
    def in_avals(self):
        return [v.aval for v in self.invars]

    @property
    def out_avals(self):
        return [v.aval for v in self.outvars]

    def __repr__(self):
        return pp_jaxpr(self)

    __str__ = __repr__

    def pretty_print(self, **kw):
        return pp_jaxpr(self)


class ClosedJaxpr:
    """A jaxpr and the values of its constvars (hashable by identity, as in JAX)."""

    __slots__ = ("jaxpr", "consts", "memo")

    def __init__(self, jaxpr: Jaxpr, consts):
        assert len(consts) == len(jaxpr.constvars), (len(consts), len(jaxpr.constvars))
        self.jaxpr = jaxpr
        self.consts = list(consts)
        # Derived jaxprs (jvp, partial eval, transpose) memoised by the rules that make
        # them, so that transforming the same jit again reuses them (and their compiled
        # code) instead of retracing.
        self.memo = {}

    in_avals = property(lambda self: self.jaxpr.in_avals)
    out_avals = property(lambda self: self.jaxpr.out_avals)
    eqns = property(lambda self: self.jaxpr.eqns)

    def __repr__(self):
        return pp_jaxpr(self.jaxpr)

    __str__ = __repr__

    def pretty_print(self, **kw):
        return pp_jaxpr(self.jaxpr)


# ---------------------------------- evaluation -----------------------------------------

def eval_jaxpr(jaxpr: Jaxpr, consts, *args):
    """Interpret ``jaxpr`` by binding each equation's primitive (so it can be traced by an
    enclosing transformation). Returns the list of outputs."""
    env: dict = {}

    def read(x):
        return x.val if type(x) is Literal else env[x]

    def write(v, val):
        if type(v) is not DropVar:
            env[v] = val

    if len(args) != len(jaxpr.invars):
        raise TypeError(f"eval_jaxpr: the jaxpr takes {len(jaxpr.invars)} arguments, got "
                        f"{len(args)}")
    for v, val in zip(jaxpr.constvars, consts):
        write(v, val)
    for v, val in zip(jaxpr.invars, args):
        write(v, val)
    for eqn in jaxpr.eqns:
        outs = eqn.primitive.bind(*map(read, eqn.invars), **eqn.params)
        if not eqn.primitive.multiple_results:
            outs = [outs]
        for v, o in zip(eqn.outvars, outs):
            write(v, o)
    return [read(v) for v in jaxpr.outvars]


def _impl_plan(jaxpr: Jaxpr):
    """``jaxpr`` as a flat list of steps over numbered slots, built once per jaxpr: loop
    bodies on the NumPy tier run thousands of times, and a dict lookup per variable and a
    dispatch on its type per output are most of their cost."""
    plan = jaxpr._impl_plan
    if plan is not None and plan[0] is jaxpr.eqns and plan[1] == len(jaxpr.eqns):
        return plan[2]
    slot: dict = {}
    literals: list = []

    def ref(a):
        # a literal is a negative index into ``literals``; a variable its slot number
        if type(a) is Literal:
            literals.append(np.asarray(a.val))
            return -len(literals)
        return slot[a]

    for v in list(jaxpr.constvars) + list(jaxpr.invars):
        slot[v] = len(slot)
    steps = []
    for eqn in jaxpr.eqns:
        ins = tuple(ref(a) for a in eqn.invars)
        outs = []
        for v in eqn.outvars:
            slot[v] = len(slot)
            aval = v.aval
            outs.append((slot[v], aval.dtype if isinstance(aval, ShapedArray) else None))
        impl = eqn.primitive.impl
        impl = getattr(impl, "impl_without_errstate", impl)
        if not any(dtypes.is_lowp(getattr(a.aval, "dtype", None)) for a in eqn.invars):
            # (``lax.utils.lowp_widening``'s impl without its per-call dtype test)
            impl = getattr(impl, "plain_impl", impl)
        steps.append((impl, ins, eqn.params, eqn.primitive.multiple_results,
                      tuple(outs)))
    results = tuple(ref(a) for a in jaxpr.outvars)
    plan = (len(jaxpr.constvars), len(slot), literals, steps, results)
    jaxpr._impl_plan = (jaxpr.eqns, len(jaxpr.eqns), plan)
    return plan


def eval_jaxpr_impls(jaxpr: Jaxpr, consts, args) -> list:
    """Interpret ``jaxpr`` on NumPy values by calling each primitive's impl directly: the
    eager reference without the trace machinery (no ``bind``), a few microseconds per
    equation. Control-flow impls run their bodies this way, and so does jit's NumPy tier.
    Results are cast to the equations' avals exactly as eager evaluation casts them.
    Call it on a fresh trace stack (``core.new_base_main``): impls may bind internally."""
    run = impl_runner(jaxpr, consts)
    with np.errstate(all="ignore"):
        return run(args)


@contextlib.contextmanager
def numpy_tier_scope():
    """Where ``impl_runner``'s functions run: a fresh trace stack (impls may bind
    internally) with NumPy's floating-point errors ignored (IEEE results are the
    semantics)."""
    with new_base_main(), np.errstate(all="ignore"):
        yield


def impl_runner(jaxpr: Jaxpr, consts):
    """``args -> outputs``: ``eval_jaxpr_impls(jaxpr, consts, args)`` with the constants
    and literals placed once, to call inside one ``numpy_tier_scope`` (entered once around
    a loop: a loop body on the NumPy tier runs it per iteration). ``args`` must be as many
    as the jaxpr's invars."""
    nconst, nslots, literals, steps, results = _impl_plan(jaxpr)
    template = [None] * nslots
    for i, c in enumerate(consts):
        template[i] = np.asarray(c)
    # literals sit at the end, reached by negative indices
    template.extend(reversed(literals))
    hi = nconst + len(jaxpr.invars)

    def run(args):
        env = template.copy()
        env[nconst:hi] = args
        _run_plan(env, steps)
        return [env[i] for i in results]

    return run


def _run_plan(env, steps):
    asarray = np.asarray
    for impl, ins, params, multiple, outs in steps:
        o = impl(*[env[i] for i in ins], **params)
        if not multiple:
            k, dt = outs[0]
            if dt is not None:
                o = asarray(o)
                if o.dtype != dt:
                    o = o.astype(dt)
            env[k] = o
            continue
        for (k, dt), o in zip(outs, o):
            if dt is not None:
                o = asarray(o)
                if o.dtype != dt:
                    o = o.astype(dt)
            env[k] = o


def jaxpr_as_fun(closed: ClosedJaxpr):
    return lambda *args: eval_jaxpr(closed.jaxpr, closed.consts, *args)


# --------------------------------- type checking ---------------------------------------

class JaxprTypeError(TypeError):
    pass


def _aval_matches(a, b) -> bool:
    if isinstance(a, AbstractToken) or isinstance(b, AbstractToken):
        return type(a) is type(b)
    return a.shape == b.shape and a.dtype == b.dtype


def check_jaxpr(jaxpr: Jaxpr) -> None:
    """Type-check a jaxpr: every var defined once before use, every equation's output
    avals equal to its primitive's abstract eval. Raises JaxprTypeError with context."""
    env: set = set()

    def read(x, i):
        if type(x) is Literal:
            return x.aval
        if x not in env:
            raise JaxprTypeError(f"variable {x} used before it is defined"
                                 f"{_eqn_context(jaxpr, i)}")
        return x.aval

    def write(v, i):
        if v in env:
            raise JaxprTypeError(f"variable {v} defined twice{_eqn_context(jaxpr, i)}")
        env.add(v)

    for v in jaxpr.constvars:
        write(v, -1)
    for v in jaxpr.invars:
        write(v, -1)
    for i, eqn in enumerate(jaxpr.eqns):
        in_avals = [read(x, i) for x in eqn.invars]
        try:
            out_avals = abstract_eval_cached(eqn.primitive, in_avals, eqn.params)
        except Exception as e:
            raise JaxprTypeError(f"equation {i} ({eqn.primitive.name}) fails abstract "
                                 f"evaluation: {e}{_eqn_context(jaxpr, i)}") from e
        for v, a in zip(eqn.outvars, out_avals):
            if not _aval_matches(v.aval, a):
                raise JaxprTypeError(f"equation {i} ({eqn.primitive.name}) declares output "
                                     f"{v.aval.str_short()} but its rule gives {a.str_short()}"
                                     f"{_eqn_context(jaxpr, i)}")
            write(v, i)
    for v in jaxpr.outvars:
        read(v, len(jaxpr.eqns))


def _eqn_context(jaxpr, i, radius=5):
    names = _Namer()
    lines = []
    for j in range(max(0, i - radius), min(len(jaxpr.eqns), i + radius + 1)):
        mark = ">>> " if j == i else "    "
        lines.append(mark + _pp_eqn(jaxpr.eqns[j], names, 0))
    return "\nwhile checking:\n" + "\n".join(lines) if lines else ""


# ----------------------------------- printer -------------------------------------------
# JAX's text format and layout: the jaxpr becomes a document of texts, breaks, groups and
# nests (Wadler's "prettier printer"), laid out at width 80. A group prints on one line
# when its flat text fits the rest of the line, else its breaks become newlines. This is
# the algorithm of JAX's printer (checked against it on random documents), so jaxprs
# print line for line as JAX prints them.

class _Doc:
    __slots__ = ()


class _Text(_Doc):
    __slots__ = ("text",)

    def __init__(self, text):
        self.text = text


class _Concat(_Doc):
    __slots__ = ("children",)

    def __init__(self, children):
        self.children = list(children)


class _Break(_Doc):
    """A space (or ``text``) in a flat group; a newline plus indentation in a broken one."""
    __slots__ = ("text",)

    def __init__(self, text=" "):
        self.text = text


class _Group(_Doc):
    __slots__ = ("child",)

    def __init__(self, child):
        self.child = child


class _Nest(_Doc):
    __slots__ = ("n", "child")

    def __init__(self, n, child):
        self.n, self.child = n, child


_NIL = _Concat([])


def _join(sep, docs):
    out = []
    for i, d in enumerate(docs):
        if i:
            out.append(sep)
        out.append(d)
    return _Concat(out)


def _fits(doc, width) -> bool:
    agenda = [doc]
    while width >= 0 and agenda:
        d = agenda.pop()
        t = type(d)
        if t is _Text or t is _Break:
            width -= len(d.text)
        elif t is _Concat:
            agenda.extend(reversed(d.children))
        else:
            agenda.append(d.child)
    return width >= 0


def _format(doc, width: int = 80) -> str:
    lines, line, col = [], [], 0
    agenda = [(0, True, doc)]  # (indent, broken?, doc)
    while agenda:
        indent, broken, d = agenda.pop()
        t = type(d)
        if t is _Text:
            line.append(d.text)
            col += len(d.text)
        elif t is _Concat:
            agenda.extend((indent, broken, c) for c in reversed(d.children))
        elif t is _Break:
            if broken:
                lines.append("".join(line))
                line, col = [" " * indent], indent
            else:
                line.append(d.text)
                col += len(d.text)
        elif t is _Nest:
            agenda.append((indent + d.n, broken, d.child))
        else:  # a group: flat if it fits in what is left of the line
            agenda.append((indent, not _fits(d.child, width - col), d.child))
    lines.append("".join(line))
    return "\n".join(lines)


class _Namer:
    """Variable names for one printed jaxpr and all the jaxprs nested in it: a, b, ...,
    z, ba, bb, ... in order of first appearance (JAX's JaxprPpContext)."""

    def __init__(self, reserved=()):
        self.names: dict = {}
        self.reserved = set(reserved)
        self.count = 0

    def __call__(self, v) -> str:
        if type(v) is DropVar:
            return "_"
        if type(v) is Literal:
            return _pp_literal(v)
        name = self.names.get(v)
        if name is None:
            name = _alpha(self.count)
            self.count += 1
            while name in self.reserved:
                name = _alpha(self.count)
                self.count += 1
            self.names[v] = name
        return name

    def decl(self, v) -> str:
        return f"{self(v)}:{v.aval.str_short()}"

    def suggest_same(self, for_vars, like_vars):
        """Name the (unnamed) ``for_vars`` like ``like_vars``: a call's sub-jaxpr then
        reads with its caller's names (JAX's suggest_same_var_names)."""
        if len(for_vars) != len(like_vars):
            return
        used = set()
        for f, l in zip(for_vars, like_vars):
            if type(l) is Literal or type(l) is DropVar or l in used or f in self.names \
                    or not isinstance(f, Var):
                continue
            used.add(l)
            self.names[f] = self(l)


def _alpha(n: int) -> str:
    # 0->a ... 25->z, 26->ba, 27->bb ... (JAX's numbering: base 26 with a = 0)
    s = ""
    while not s or n:
        n, i = divmod(n, 26)
        s = chr(ord("a") + i) + s
    return s


def _pp_literal(lit: Literal) -> str:
    v = lit.val
    if isinstance(v, Array):
        v = v._value
    v = np.asarray(v)
    s = str(v.item()) if v.ndim == 0 else "[...]"
    return f"{s}:{lit.aval.str_short()}"


def _pp_vars(vs, names, sep: str = "", shapes: bool = False) -> _Doc:
    docs = [_Text(names.decl(v) if shapes and type(v) is not Literal else names(v))
            for v in vs]
    return _Nest(2, _Group(_join(_Concat([_Text(sep), _Group(_Break())]), docs)))


# Custom printers for equations of some primitives (e.g. to list only non-default
# params): primitive -> rule(eqn, names) -> _Doc (see _pp_eqn_doc for the default).
pp_eqn_rules: dict = {}


def _jaxprs_in(v):
    if isinstance(v, ClosedJaxpr):
        return [v.jaxpr]
    if isinstance(v, Jaxpr):
        return [v]
    if isinstance(v, (tuple, list)) and v and all(isinstance(x, (ClosedJaxpr, Jaxpr)) for x in v):
        return [x.jaxpr if isinstance(x, ClosedJaxpr) else x for x in v]
    return []


def _pp_param_value(v, names) -> _Doc:
    subs = _jaxprs_in(v)
    if subs and not isinstance(v, (tuple, list)):
        return _pp_jaxpr_doc(subs[0], names)
    if subs:
        return _Group(_Concat([
            _Nest(2, _Concat([_Text("("), _Break(""),
                              _join(_Break(), [_pp_jaxpr_doc(j, names) for j in subs])])),
            _Break(""), _Text(")")]))
    if isinstance(v, np.dtype):
        return _Text(v.name)
    if isinstance(v, type) and issubclass(v, np.generic):
        return _Text(np.dtype(v).name)
    if isinstance(v, frozenset):
        return _Text(f"frozenset({{{', '.join(repr(e) for e in sorted(v))}}})")
    if callable(v) and not isinstance(v, (tuple, list)) and hasattr(v, "__name__"):
        return _Text(v.__name__)
    return _Text(str(v))


def _pp_kv_pairs(items, names) -> _Doc:
    if not items:
        return _NIL
    pairs = [_Concat([_Text(f"{k}="), _pp_param_value(v, names)]) for k, v in items]
    return _Group(_Concat([_Nest(2, _Concat([_Text("["), _Break(""), _join(_Break(), pairs)])),
                           _Break(""), _Text("]")]))


def _pp_eqn_doc(eqn: JaxprEqn, names, params=None) -> _Doc:
    rule = pp_eqn_rules.get(eqn.primitive)
    if rule is not None and params is None:
        return rule(eqn, names)
    keys = sorted(eqn.params) if params is None else params
    lhs = _pp_vars(eqn.outvars, names, shapes=True)  # outputs are named first, as in JAX
    rhs = [_Text(eqn.primitive.name), _pp_kv_pairs([(k, eqn.params[k]) for k in keys], names),
           _Concat([_Text(" "), _pp_vars(eqn.invars, names)])]
    if not eqn.outvars:
        return _Concat(rhs)
    return _Concat([lhs, _Text(" = ")] + rhs)


def _pp_jaxpr_doc(jaxpr: Jaxpr, names) -> _Doc:
    shared = getattr(names, "shared", {}).get(jaxpr)
    if shared is not None:
        return _Text(shared)
    constvars = _pp_vars(jaxpr.constvars, names, shapes=True)
    invars = _pp_vars(jaxpr.invars, names, shapes=True)
    eqns = _join(_Break("; "), [_pp_eqn_doc(e, names) for e in jaxpr.eqns])
    n = len(jaxpr.outvars)
    outvars = _Concat([_Text("("), _pp_vars(jaxpr.outvars, names, sep=","),
                       _Text(")" if n != 1 else ",)")])
    return _Concat([_Group(_Nest(2, _Concat([
        _Text("{ "), _Text("lambda "), constvars, _Text("; "), invars, _Text(". "),
        _Text("let"), _Nest(2, _Concat([_Break(), eqns])), _Break(), _Text("in "), outvars]))),
        _Text(" }")])


def _shared_jaxprs(top: Jaxpr):
    """Sub-jaxprs printed once, before the program, and referred to by name: those used by
    more than one equation, and large ones (over 10 equations), as JAX does."""
    counts: dict = {}
    label: dict = {}
    queue = [top]
    while queue:
        j = queue.pop(0)
        counts[j] = counts.get(j, 0) + 1 + (j is not top and len(j.eqns) > 10)
        for eqn in j.eqns:
            name = eqn.params.get("name")
            for v in eqn.params.values():
                for sub in _jaxprs_in(v):
                    queue.append(sub)
                    if isinstance(name, str):
                        label.setdefault(sub, name.strip("<>"))
    shared, used = {}, {}
    for j, c in counts.items():
        if c == 1 or j is top:
            continue
        name = label.get(j, "jaxpr")
        k = used.get(name, 0)
        used[name] = k + 1
        if k:
            name += str(k)
            used[name] = used.get(name, 0) + 1
        shared[j] = name
    return shared


def _pp_eqn(eqn: JaxprEqn, names, indent: int) -> str:
    """One equation as text (continuation lines indented by ``indent``)."""
    return _format(_Concat([_Text(" " * indent), _Nest(indent, _pp_eqn_doc(eqn, names))])
                   )[indent:]


def pp_jaxpr(jaxpr: Jaxpr, width: int = 80) -> str:
    """``jaxpr`` in JAX's text format, laid out as JAX lays it out at ``width``."""
    shared = _shared_jaxprs(jaxpr)
    names = _Namer(reserved=shared.values())
    names.shared = {}
    docs = []
    for j, name in shared.items():
        docs.append(_Concat([_Text(f"let {name} = "), _pp_jaxpr_doc(j, names), _Text(" in"),
                             _Break()]))
        names.shared[j] = name
    docs.append(_pp_jaxpr_doc(jaxpr, names))
    return _format(_Concat(docs), width)


# --------------------------------- small helpers ----------------------------------------

def literalable(x) -> bool:
    """Scalars (Python or 0-d arrays) are inlined as Literals in printed jaxprs."""
    if isinstance(x, (bool, int, float, complex, np.generic)):
        return True
    if isinstance(x, (np.ndarray, Array)):
        return x.ndim == 0
    return False


def make_literal(x) -> Literal:
    aval = get_aval(x)
    if isinstance(x, (bool, int, float, complex)):
        val = np.asarray(x, aval.dtype)
    else:
        val = to_numpy(x)
    return Literal(val, aval)
