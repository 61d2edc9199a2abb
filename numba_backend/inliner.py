"""Source-level inlining of scalar functions into generated kernels.

Numba compiles a called ``register_jitable`` function separately; LLVM inlines it only when
it is small, and a loop with an out-of-line call does not vectorize. Numba's own IR
inlining (``inline="always"``) works but costs seconds of compile time. A function marked
``@inline_source`` is instead pasted into the kernel's source where it is called: its
locals renamed with a unique prefix, its parameters bound to the argument expressions, its
module constants replaced by their values (arrays, and functions marked
``@kernel_import`` -- Numba intrinsics with a Python fallback, like ``vecmath.fma`` --
are imported by the kernel module by name), calls to other
``@inline_source`` functions expanded the same way, and its final ``return`` turned into
an assignment. The function stays an ordinary ``register_jitable`` too (the debug mode and
tests call it directly).

Restrictions (checked): the body is straight-line Python (assignments and one final
``return``), calls to other inline functions appear as the whole right-hand side of an
assignment.
"""
from __future__ import annotations

import ast
import inspect
import linecache
import textwrap

import numpy as np
from numba_backend.lazy_numba import register_jitable

_INLINE: dict = {}          # (module, qualname) -> python function


def inline_source(fn):
    """Mark ``fn`` for source inlining into kernels (and make it ``register_jitable``)."""
    _INLINE[(fn.__module__, fn.__qualname__)] = fn
    fn._tracer_inline = True
    register_jitable(fn)
    return fn


def kernel_import(fn):
    """Mark a module-level function that ``@inline_source`` functions may call and that is
    imported into the kernel module rather than pasted in (e.g. an ``@overload``-ed Python
    function whose compiled version is an intrinsic, so it runs in both tiers)."""
    fn._tracer_kernel_import = True
    return fn


def is_inline(module: str, name: str) -> bool:
    if (module, name) in _INLINE:
        return True
    try:
        import importlib
        mod = importlib.import_module(module)
    except ImportError:
        return False
    return getattr(getattr(mod, name, None), "_tracer_inline", False)


def _function_source(fn) -> str:
    """``fn``'s source (decorators included), read through ``linecache`` from its first
    line to the end of its last statement (its code object's positions).
    ``inspect.getsource`` finds the end by tokenizing the file, and the tokenizer's first
    use in a process costs a warm program's first call 5-10 ms."""
    code = fn.__code__
    lines = linecache.getlines(code.co_filename)
    try:
        end = max(p[1] for p in code.co_positions() if p[1] is not None)
    except (AttributeError, ValueError):    # Python 3.10: no co_positions
        return inspect.getsource(fn)
    if end > len(lines) or end < code.co_firstlineno:
        return inspect.getsource(fn)
    return "".join(lines[code.co_firstlineno - 1:end])


class _Parsed:
    def __init__(self, fn):
        src = textwrap.dedent(_function_source(fn))
        tree = ast.parse(src)
        (fdef,) = tree.body
        self.params = [a.arg for a in fdef.args.args]
        body = [s for s in fdef.body
                if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        if not body or not isinstance(body[-1], ast.Return):
            raise ValueError(f"inline_source {fn.__qualname__}: must end with a return")
        for s in body[:-1]:
            if not isinstance(s, ast.Assign):
                raise ValueError(f"inline_source {fn.__qualname__}: only assignments and a "
                                 f"final return are allowed, got {ast.unparse(s)}")
        self.body = body
        self.globals = fn.__globals__
        self.module = fn.__module__
        self.locals = set(self.params)
        for s in body[:-1]:
            for t in s.targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        self.locals.add(n.id)


_parsed: dict = {}


def _parse(fn) -> _Parsed:
    p = _parsed.get(fn)
    if p is None:
        p = _parsed[fn] = _Parsed(fn)
    return p


def _resolve_inline_call(node, g):
    """The inline function called by ``node`` (an ast.Call), or None."""
    if not isinstance(node, ast.Call):
        return None
    f = node.func
    obj = None
    if isinstance(f, ast.Name):
        obj = g.get(f.id)
    elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
        mod = g.get(f.value.id)
        obj = getattr(mod, f.attr, None) if mod is not None else None
    return obj if getattr(obj, "_tracer_inline", False) else None


class _Rewriter(ast.NodeTransformer):
    def __init__(self, parsed: _Parsed, prefix: str, imports: set):
        self.p = parsed
        self.prefix = prefix
        self.imports = imports

    def visit_Name(self, node):
        if node.id in self.p.locals:
            return ast.copy_location(ast.Name(f"{self.prefix}{node.id}", node.ctx), node)
        if node.id in ("np", "math", "abs", "min", "max", "True", "False", "None"):
            return node
        val = self.p.globals.get(node.id)
        if isinstance(val, (bool, int, float)) and not isinstance(val, np.ndarray):
            return ast.copy_location(ast.Constant(val), node)
        if isinstance(val, np.ndarray) or getattr(val, "_tracer_kernel_import", False):
            alias = f"g_{self.p.module.replace('.', '_')}_{node.id}"
            self.imports.add((self.p.module, node.id, alias))
            return ast.copy_location(ast.Name(alias, node.ctx), node)
        raise ValueError(f"inline_source: cannot inline a reference to {node.id!r} "
                         f"(module {self.p.module})")


_expanded: dict = {}


def expand(fn, args: list, result: str, prefix: str, imports: set) -> list:
    """Statements computing ``result = fn(*args)`` (``args`` are code strings). Memoized:
    a new shape of a program generates the same kernels and should not pay again."""
    key = (fn, tuple(args), result, prefix)
    hit = _expanded.get(key)
    if hit is None:
        sub_imports: set = set()
        hit = _expanded[key] = (_expand(fn, list(args), result, prefix, sub_imports),
                                frozenset(sub_imports))
        if len(_expanded) > 10000:
            _expanded.clear()
    imports.update(hit[1])
    return list(hit[0])


def _copy(node):
    """A copy of an AST (``copy.deepcopy``'s result, at a fifth of its cost: it took half
    of a warm process's code generation for kernels with sin/cos)."""
    if isinstance(node, ast.AST):
        new = node.__class__()
        for f in node._fields:
            setattr(new, f, _copy(getattr(node, f, None)))
        for a in node._attributes:
            if hasattr(node, a):
                setattr(new, a, getattr(node, a))
        return new
    if isinstance(node, list):
        return [_copy(x) for x in node]
    return node


def _expand(fn, args: list, result: str, prefix: str, imports: set) -> list:
    p = _parse(fn)
    lines = [f"{prefix}{name} = {a}" for name, a in zip(p.params, args)]
    counter = [0]
    for s in p.body:
        s = _copy(s)        # the rewriters change nodes in place
        if isinstance(s, ast.Assign):
            callee = _resolve_inline_call(s.value, p.globals)
            if callee is not None:
                counter[0] += 1
                sub = f"{prefix}c{counter[0]}_"
                rw = _Rewriter(p, prefix, imports)
                call_args = [ast.unparse(rw.visit(a)) for a in s.value.args]
                tmp = f"{sub}_ret"
                lines += _expand(callee, call_args, tmp, sub, imports)
                target = ast.unparse(_Rewriter(p, prefix, imports).visit(s.targets[0]))
                lines.append(f"{target} = {tmp}")
                continue
            new = _Rewriter(p, prefix, imports).visit(s)
            lines.append(ast.unparse(new))
        else:   # the final return
            value = _Rewriter(p, prefix, imports).visit(s.value)
            lines.append(f"{result} = {ast.unparse(value)}")
    return lines
