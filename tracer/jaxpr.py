"""Jaxprs: the small graph language programs are traced into.

``Jaxpr(constvars, invars, eqns, outvars)`` where each ``JaxprEqn`` applies a primitive
with static params to Vars and Literals. ``ClosedJaxpr`` pairs a jaxpr with the values of
its constvars. The printer writes JAX's text format::

    { lambda ; a:f64[3]. let b:f64[3] = sin a in (b,) }
"""
from __future__ import annotations

import itertools
from typing import Any, NamedTuple

import numpy as np

from tracer import dtypes
from tracer.core import (AbstractToken, Array, Primitive, ShapedArray, abstract_eval_cached,
                         get_aval, to_numpy)


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
    __slots__ = ("constvars", "invars", "eqns", "outvars")

    def __init__(self, constvars, invars, eqns, outvars):
        self.constvars = list(constvars)
        self.invars = list(invars)
        self.eqns = list(eqns)
        self.outvars = list(outvars)

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

    __slots__ = ("jaxpr", "consts")

    def __init__(self, jaxpr: Jaxpr, consts):
        assert len(consts) == len(jaxpr.constvars), (len(consts), len(jaxpr.constvars))
        self.jaxpr = jaxpr
        self.consts = list(consts)

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

class _Namer:
    def __init__(self):
        self.names: dict = {}

    def __call__(self, v) -> str:
        if type(v) is DropVar:
            return "_"
        if type(v) is Literal:
            return _pp_literal(v)
        name = self.names.get(v)
        if name is None:
            n = len(self.names)
            name = self.names[v] = _alpha(n)
        return name

    def decl(self, v) -> str:
        if type(v) is DropVar:
            return f"_:{v.aval.str_short()}"
        return f"{self(v)}:{v.aval.str_short()}"


def _alpha(n: int) -> str:
    # 0->a ... 25->z, 26->ba, 27->bb ... (JAX's numbering, which skips the "a" prefix)
    if n < 26:
        return chr(ord("a") + n)
    digits = []
    while n:
        digits.append(n % 26)
        n //= 26
    return "".join(chr(ord("a") + d) for d in reversed(digits))


def _pp_literal(lit: Literal) -> str:
    v = lit.val
    aval = lit.aval
    if isinstance(v, Array):
        v = v._value
    v = np.asarray(v)
    if v.dtype == np.bool_:
        s = "True" if v else "False"
    elif dtypes.is_floating(v.dtype):
        f = float(v)
        s = repr(f) if np.isfinite(f) else ("nan" if np.isnan(f) else ("inf" if f > 0 else "-inf"))
    elif dtypes.is_complex(v.dtype):
        s = repr(complex(v))
    else:
        s = str(int(v))
    return f"{s}:{aval.str_short()}"


def _pp_param(v, names, indent) -> str:
    if isinstance(v, ClosedJaxpr):
        return _pp_jaxpr_body(v.jaxpr, _Namer(), indent + 2)
    if isinstance(v, Jaxpr):
        return _pp_jaxpr_body(v, _Namer(), indent + 2)
    if isinstance(v, np.dtype):
        return v.name
    if isinstance(v, type) and issubclass(v, np.generic):
        return np.dtype(v).name
    if isinstance(v, (tuple, list)) and v and all(isinstance(x, (ClosedJaxpr, Jaxpr)) for x in v):
        return "(\n" + "\n".join(" " * (indent + 4) + _pp_param(x, names, indent + 2) for x in v) + \
            "\n" + " " * (indent + 2) + ")"
    if callable(v) and not isinstance(v, (tuple, list)) and hasattr(v, "__name__"):
        return v.__name__
    return str(v)


def _pp_eqn(eqn: JaxprEqn, names: _Namer, indent: int) -> str:
    outs = " ".join(names.decl(v) for v in eqn.outvars)
    params = ""
    if eqn.params:
        items = [f"{k}={_pp_param(v, names, indent)}" for k, v in sorted(eqn.params.items())]
        params = "[" + " ".join(items) + "]"
        if len(params) > 100 or "\n" in params:
            pad = " " * (indent + 2)
            params = "[\n" + "\n".join(pad + it for it in items) + "\n" + " " * indent + "]"
    args = " ".join(names(x) for x in eqn.invars)
    return f"{outs} = {eqn.primitive.name}{params} {args}".rstrip()


def _pp_jaxpr_body(jaxpr: Jaxpr, names: _Namer, indent: int) -> str:
    consts = " ".join(names.decl(v) for v in jaxpr.constvars)
    ins = " ".join(names.decl(v) for v in jaxpr.invars)
    head = f"{{ lambda {consts}{' ' if consts else ''}; {ins}. let"
    eqn_lines = [_pp_eqn(e, names, indent + 4) for e in jaxpr.eqns]
    outs = "(" + ", ".join(names(v) for v in jaxpr.outvars) + ("," if len(jaxpr.outvars) == 1 else "") + ")"
    one_line = f"{head} {' '.join(eqn_lines)} in {outs} }}"
    if len(jaxpr.eqns) <= 1 and len(one_line) <= 80 and "\n" not in one_line:
        return one_line
    pad = " " * (indent + 4)
    body = "\n".join(pad + ln for ln in eqn_lines)
    return f"{head}\n{body}\n{' ' * (indent + 2)}in {outs} }}" if eqn_lines else \
        f"{head}\n{' ' * (indent + 2)}in {outs} }}"


def pp_jaxpr(jaxpr: Jaxpr) -> str:
    return _pp_jaxpr_body(jaxpr, _Namer(), 0)


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
