"""Small arrays of a loop driver kept in scalar locals (``numba_backend.control_flow``).

A loop body's kernels pasted into a driver pass their results through buffers: a
3-element ``jnp.stack`` of an ODE's right-hand side is stored by one kernel and loaded by
the next in the same iteration. LLVM cannot keep those values in registers (the buffers
are views of one arena, so every store may alias every load), and each such round trip
lengthens the loop's dependency chain. Here:

- ``unroll`` repeats the body of a ``for v in range(N)`` loop of a few trips N times with
  ``v`` a literal, so every index of a small array becomes a constant;
- ``scalarize`` then rewrites every buffer of a few elements whose accesses all have
  constant indices into one local per element (``b7[2]`` -> ``b7_2``); a store becomes an
  assignment converted to the buffer's dtype, as the store did. A loop carry of a few
  elements becomes locals too; the carry's array gets its final value after the loop.

Any other use of a buffer (passed to a call, indexed by a loop variable, viewed) keeps it
an array: the rewrite changes no value, only where values live.
"""
from __future__ import annotations

import ast
import re

import numpy as np

UNROLL_MAX_TRIPS = 8        # a loop of at most this many trips is unrolled ...
# ... when its copies hold at most this many lines in all (Numba types each line: a
# (2, 3) RK4 body unrolled whole took its driver's compile from 0.73 to 1.03 s)
UNROLL_MAX_LINES = 160
SCALAR_MAX_ELEMENTS = 8     # a buffer of at most this many elements may become locals

_FOR = re.compile(r"^(\s*)for (\w+) in range\((\d+)\):\s*$")
NAME = re.compile(r"(?<![\w.])[A-Za-z_]\w*")     # a name in code (not an attribute)
_FOLDABLE = re.compile(r"^[\d\s+\-*%()/]+$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def substitute(line: str, names: dict) -> str:
    """``line`` with the names in its code (not its comment) replaced per ``names``."""
    code, sep, comment = line.partition("#")
    return NAME.sub(lambda m: names.get(m.group(0), m.group(0)), code) + sep + comment


def unroll(lines: list) -> list:
    """``lines`` with each ``for v in range(N):`` (N a literal, at most
    ``UNROLL_MAX_TRIPS``, its copies at most ``UNROLL_MAX_LINES`` lines) replaced by N
    copies of its body, ``v`` replaced by 0, 1, ... N - 1 in each; inner loops likewise."""
    out: list = []
    k = 0
    while k < len(lines):
        line = lines[k]
        m = _FOR.match(line.partition("#")[0])
        if m is None:
            out.append(line)
            k += 1
            continue
        level = len(m.group(1))
        end = k + 1
        while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > level):
            end += 1
        block = unroll(lines[k + 1:end])
        trips = int(m.group(3))
        jumps = any(re.search(r"\b(break|continue)\b", b.partition("#")[0]) for b in block)
        if trips <= UNROLL_MAX_TRIPS and trips * len(block) <= UNROLL_MAX_LINES and block \
                and not jumps:
            cut = min(_indent(b) for b in block if b.strip()) - level
            for t in range(trips):
                out.extend(substitute(b[cut:], {m.group(2): str(t)}) for b in block)
        else:
            out.append(line)
            out.extend(block)
        k = end
    return out


_ASSIGN = re.compile(r"^(\s*)(\w+) = (.*)$")


def _targets(code: str) -> set:
    """The names a statement (or a block's header) binds."""
    text = code.strip()
    if not text:
        return set()
    if text.endswith(":"):
        text += " pass"
    for head in ("elif ", "else:"):
        if text.startswith(head):   # (on its own, not a statement)
            text = "if 0: pass\n" + text
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return {m.group(0) for m in NAME.finditer(text)}     # (any: not constants)
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and
            isinstance(n.ctx, (ast.Store, ast.Del))}


def _fold(expr: str):
    """The int an expression of literals and integer operators spells, or None."""
    expr = expr.strip()
    if not expr or not _FOLDABLE.match(expr) or "/" in expr.replace("//", ""):
        return None
    try:
        v = eval(expr, {"__builtins__": {}})     # only digits and integer operators
    except Exception:
        return None
    return v if isinstance(v, int) else None


_INT = r"(-?\d+|\(-?\d+\))"
_COMPARE = re.compile(rf"^\(?\s*{_INT}\s*(<|<=|>|>=|==|!=)\s*{_INT}\s*\)?$")
_CHOICE = re.compile(r"^\((\S+) if (True|False) else (\S+)\)$")
_SIMPLE = re.compile(r"^(\(?-?\d+\)?|True|False|[A-Za-z_]\w*)$")


def _simplify(value: str):
    """(the value's text, simplified when it is a comparison of integers or a choice on
    a constant condition; whether it is now a constant or a plain name)."""
    value = value.strip()
    v = _fold(value)
    if v is not None:
        return (str(v) if v >= 0 else f"({v})"), True
    m = _COMPARE.match(value)
    if m is not None:
        a, b = _fold(m.group(1)), _fold(m.group(3))
        if a is not None and b is not None:
            return str({"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b,
                        "!=": a != b}[m.group(2)]), True
    m = _CHOICE.match(value)
    if m is not None:
        value = m.group(1) if m.group(2) == "True" else m.group(3)
    return value, _SIMPLE.match(value) is not None


def _kill(env: dict, name: str):
    """``name`` is assigned: neither it nor a name standing for it is known any more."""
    env.pop(name, None)
    for k in [k for k, v in env.items() if v == name]:
        del env[k]


def fold(lines: list) -> list:
    """``lines`` with each name whose top-level assignment is a constant (an unrolled
    loop's index arithmetic ``t1 = (0 + 1)``, a comparison of two integers) or another
    name (a choice on a constant condition, ``t5 = (t3 if True else t4)``) replaced by
    it where it is read, until either is assigned again; then the assignments left
    unread dropped. A name assigned inside a block is not constant there nor after it."""
    env: dict = {}
    out = []
    k = 0
    while k < len(lines):
        line = lines[k]
        code, sep, comment = line.partition("#")
        level = _indent(line)
        if code.rstrip().endswith(":"):
            # a block: whatever it assigns is not a constant from here on
            end = k + 1
            while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > level):
                for name in _targets(lines[end].partition("#")[0]):
                    _kill(env, name)
                end += 1
        m = _ASSIGN.match(code.rstrip())
        if m is not None:
            value, simple = _simplify(substitute(m.group(3), env))
            name = m.group(2)
            out.append(f"{m.group(1)}{name} = {value}" + (" " + sep + comment
                                                          if sep else ""))
            _kill(env, name)
            if simple and level == 0 and value != name:
                env[name] = value
        else:
            for name in _targets(code):
                _kill(env, name)
            out.append(substitute(code, env) + sep + comment if env else line)
        k += 1
    return _drop_unread(out)


def _drop_unread(lines: list) -> list:
    """``lines`` without the top-level assignments of a constant or a name to a name no
    line reads."""
    while True:
        reads: set = set()
        for line in lines:
            code = line.partition("#")[0].rstrip()
            m = _ASSIGN.match(code)
            if m is not None:
                code = m.group(3)
            reads.update(t.group(0) for t in NAME.finditer(code))
        keep = []
        for line in lines:
            m = _ASSIGN.match(line.partition("#")[0].rstrip())
            if m is not None and not m.group(1) and m.group(2) not in reads and \
                    _SIMPLE.match(m.group(3).strip()):
                continue
            keep.append(line)
        if len(keep) == len(lines):
            return keep
        lines = keep


def _index(text: str):
    """The constant index a subscript's text spells (a tuple of ints, ``()`` for a 0-d
    array's), or None."""
    text = text.strip()
    if text == "()":
        return ()
    parts = [p.strip() for p in text.split(",")]
    if parts and parts[-1] == "":
        parts.pop()
    idx = [_fold(p) for p in parts]
    return None if not idx or None in idx else tuple(idx)


def _subscript_end(code: str, start: int):
    """The position after the ``]`` closing the ``[`` at ``start``, or None."""
    depth = 0
    for p in range(start, len(code)):
        c = code[p]
        if c in "[(":
            depth += 1
        elif c in "])":
            depth -= 1
            if depth == 0:
                return p + 1 if c == "]" else None
    return None


def local_name(name: str, idx: tuple) -> str:
    """The local holding element ``idx`` of buffer ``name`` (``b7_2``; ``b7_s`` for a
    0-d buffer's one element)."""
    return f"{name}_s" if not idx else name + "".join(f"_{i}" for i in idx)


def _uses(lines, candidates):
    """The candidate buffers (name -> shape) some line uses otherwise than through a
    constant in-range subscript, or stores into otherwise than by a plain assignment
    (the swap lines are not among ``lines``)."""
    bad = set()
    for line in lines:
        code = line.partition("#")[0]
        for m in NAME.finditer(code):
            name = m.group(0)
            if name not in candidates or name in bad:
                continue
            shape = candidates[name]
            end = m.end()
            if end >= len(code) or code[end] != "[":
                bad.add(name)
                continue
            close = _subscript_end(code, end)
            idx = None if close is None else _index(code[end + 1:close - 1])
            if idx is None or len(idx) != len(shape) or \
                    any(not 0 <= i < n for i, n in zip(idx, shape)):
                bad.add(name)
                continue
            if not code[:m.start()].strip():
                # a store: a plain assignment only
                rest = code[close:]
                if not rest.startswith(" = "):
                    bad.add(name)
    return bad


def _rewrite(line, names, convert):
    code, sep, comment = line.partition("#")
    out, pos, store = [], 0, None
    for m in NAME.finditer(code):
        if m.start() < pos or m.group(0) not in names:
            continue
        close = _subscript_end(code, m.end())
        idx = _index(code[m.end() + 1:close - 1])
        out.append(code[pos:m.start()])
        out.append(local_name(m.group(0), idx))
        pos = close
        if not code[:m.start()].strip():
            store = m.group(0)
    out.append(code[pos:])
    code = "".join(out)
    if store is not None:
        target, _, value = code.partition(" = ")
        code = f"{target} = {convert[store]}({value.rstrip()})"
        if comment:
            code += "  "
    return code + sep + comment


def scalarize(lines, candidates, carries, convert):
    """Rewrite ``lines`` (a driver's statements) keeping the ``candidates`` (buffer name
    -> shape; intermediates and loop carries of a few elements whose dtype converts with
    ``convert[name]``, e.g. ``np.float64``) in locals where every use allows it.
    ``carries``: (index of the swap line in ``lines``, current buffers, next buffers);
    a pair becomes locals only as a whole. -> (new lines, the names made locals -> their
    shapes)."""
    swap_lines = {at for at, _, _ in carries}
    body = [line for k, line in enumerate(lines) if k not in swap_lines]
    bad = _uses(body, candidates)
    for at, cur, nxt in carries:
        for c, n in zip(cur, nxt):
            if c in candidates or n in candidates:
                if c in bad or n in bad or c not in candidates or n not in candidates:
                    bad.update((c, n))
    done = {n: s for n, s in candidates.items() if n not in bad}
    out = []
    for k, line in enumerate(lines):
        if k in swap_lines:
            swap = _swap_line(line, next(c for c in carries if c[0] == k), done)
            if swap is not None:
                out.append(swap)
            continue
        out.append(_rewrite(line, done, convert) if done else line)
    return out, done


def _swap_line(line, carry, done):
    _, cur, nxt = carry
    level = " " * _indent(line)
    left, right = [], []
    for c, n in zip(cur, nxt):
        if c in done:
            for idx in np.ndindex(*done[c]):
                left.append(local_name(c, idx))
                right.append(local_name(n, idx))
        else:
            left += [c, n]
            right += [n, c]
    if not left:
        return None
    return f"{level}{', '.join(left)}, = {', '.join(right)},"


def write_back(name, shape) -> list:
    """Statements storing a carry kept in locals into its array."""
    return [f"{name}[{', '.join(map(str, idx)) if idx else '()'}] = {local_name(name, idx)}"
            for idx in np.ndindex(*shape)]
