"""Random small programs for the property tests: one generator, two users.

- ``tests/lowering/test_fuzz_jit.py``: each program jitted and compared with its eager run;
- ``tests/test_compositions.py``: each program under grad, jvp/vjp, vmap, jit and their
  compositions, against finite differences, Python loops and each other.

A program is a tuple of ops, each ``Op(kind, a, b, c)`` of small integers (control-flow ops
carry sub-programs in ``body``), interpreted over a *pool* of values that starts with the
inputs: every op reads earlier pool values (``a``, ``c`` pick them counting back from the
newest, so one value is often consumed by several later ops, or used as both operands of
one op) and appends its result.
Integers shrink well: hypothesis reduces a failing program towards few ops, kind 0, the
first variant and the first operands. The kinds:

- ``unary``/``binary``: the element-wise records of ``op_records.RECORDS`` (those with a
  gradient and a float64 result), each argument first mapped smoothly into the domain the
  record's ``rng`` draws from (``lo + (hi - lo) * logistic(u)``, or ``3 tanh(u / 3)`` for
  ops that overflow on the real line), so programs stay finite at any input; operands of
  different shapes meet through ``broadcast_in_dim`` or as scalars;
- ``composite``: NumPy-level functions users call (logaddexp, maximum, where, relu, clip,
  sort, logsumexp, cumulative ops, pools, solve, the custom_jvp xlogy, ...): composites of
  primitives, where ties hide;
- ``remap``: transpose, rev, slices, pad, reshape, concatenate, broadcast_in_dim;
- ``reduce``: the reduction records (sum, max, min, prod) over one axis, all axes or none;
- ``index``: gather ``x[idx]`` with repeated indices, dynamic_slice with constant (clamped)
  or data-dependent (argmax) starts, scatter-add ``x.at[idx].add``, dynamic_update_slice;
- ``dot``: dot_general of two values (or of a value with itself);
- ``cond``: ``lax.cond``/``lax.switch`` on a data-dependent predicate ``sum(s) > 0``, the
  branches sub-programs that close over an outer value; the ``guarded`` variant applies a
  domain-restricted op (log, sqrt, ...) to ``s`` unmapped in the true branch, as users
  write ``cond(x > 0, lambda x: log(x), ...)``;
- ``loop``: ``fori_loop`` and ``scan`` (forward or reverse) with sub-program bodies that
  close over an outer value;
- ``call``: a sub-program as an inner ``jit``, under ``checkpoint``, or as a
  ``custom_jvp`` function.

``run(prog, args)`` returns the outputs (the last value and the pool's middle one);
``describe(prog, args)`` prints the program as readable pseudo-Python (what a failing test
shows); ``analyze`` says whether a program is smooth (no kinks or jumps, so finite
differences are valid at any point, ties included). ``inputs(sig, mode, seed)`` draws
arguments at random points or at ties (equal inputs, repeated values, zeros).
"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import NamedTuple

import numpy as np
from hypothesis import strategies as st

import tracer
import tracer.numpy as tnp
import tracer.scipy.special  # noqa: F401  (xlogy)
import lax
from tracer import nn

from op_records import ELEMENTWISE_PRIMS, RECORDS, RECORDS_BY_NAME

MAX_SIZE = 36      # elements in any pool value
MAX_RANK = 3


# ===================================== the op table =====================================

@dataclasses.dataclass(frozen=True)
class Elementwise:
    """One element-wise op: ``fn(*args)``, the domain of each argument (``None``: the real
    line, else an open interval), and whether it is smooth everywhere on that domain."""
    name: str
    fn: object
    nargs: int
    domains: tuple
    smooth: bool = True


# Records whose derivatives have kinks or jumps on their domain (finite differences are not
# valid at those points): |x| at 0, max/min at ties, rem where x / y crosses an integer.
_KINKED_RECORDS = {"abs", "max", "min", "rem"}
# atan2 has no derivative at the origin: its arguments are kept away from zero (the domain
# its gradient test draws from).
_GRAD_DOMAIN_RECORDS = {"atan2"}


def _probe_domain(rec, i):
    """The interval a record's ``rng`` draws argument ``i`` from: (lo, hi), or None for the
    real line. A two-sided nonzero domain (reciprocal) keeps its positive half."""
    rng = rec.grad_rng if rec.name in _GRAD_DOMAIN_RECORDS else rec.rng
    rng = rng[i] if isinstance(rng, tuple) else rng
    s = np.asarray(rng(np.random.default_rng(0), (4096,), np.dtype(np.float64)), np.float64)
    lo, hi, amin = float(s.min()), float(s.max()), float(np.abs(s).min())
    if hi - lo > 10:
        return None
    if lo >= 0:
        return (lo, hi)
    if amin > 0.1:
        return (amin, hi)
    return (lo, hi)


def _grows(rec):
    """Whether the op overflows on the real line (exp and friends): its argument is then
    bounded to (-3, 3)."""
    with np.errstate(all="ignore"):
        v = np.asarray(rec.op(*[tracer.numpy.asarray(10.0)] * rec.nargs))
    return not np.all(np.isfinite(v)) or np.max(np.abs(v)) > 1e3


def _record_ops(nargs):
    out = []
    for rec in RECORDS:
        if (rec.nargs != nargs or rec.grad_order < 1 or not set(rec.prims) <= ELEMENTWISE_PRIMS
                or np.dtype(np.float64) not in rec.dtypes or rec.nondiff_argnums
                or any(case.params for case in rec.cases)):
            continue
        probe = rec.op(*[tracer.numpy.asarray(0.5)] * nargs)
        if np.asarray(probe).dtype != np.float64:     # conj, complex: complex results
            continue
        doms = tuple(_probe_domain(rec, i) for i in range(nargs))
        if all(d is None for d in doms) and _grows(rec):
            doms = ("bounded",) * nargs
        out.append(Elementwise(rec.name, rec.op, nargs, doms, rec.name not in _KINKED_RECORDS))
    return tuple(out)


UNARY = _record_ops(1)
BINARY = _record_ops(2)

# NumPy-level composites (the functions users call); smooth=False where they have kinks.
_R = None   # real-line domain
COMPOSITE = (
    Elementwise("logaddexp", tnp.logaddexp, 2, (_R, _R)),
    Elementwise("maximum", tnp.maximum, 2, (_R, _R), smooth=False),
    Elementwise("minimum", tnp.minimum, 2, (_R, _R), smooth=False),
    Elementwise("where_gt", lambda a, b: tnp.where(a > b, a, b), 2, (_R, _R), smooth=False),
    Elementwise("relu", nn.relu, 1, (_R,), smooth=False),
    Elementwise("softplus", nn.softplus, 1, (_R,)),
    Elementwise("clip", lambda a: tnp.clip(a, -0.5, 0.5), 1, (_R,), smooth=False),
    Elementwise("logaddexp2", tnp.logaddexp2, 2, (_R, _R)),
    Elementwise("fmax", tnp.fmax, 2, (_R, _R), smooth=False),
    Elementwise("hypot", tnp.hypot, 2, ((0.5, 3.0), _R)),
    # custom_jvp functions of the library
    Elementwise("xlogy", tracer.scipy.special.xlogy, 2, (_R, (0.5, 3.0))),
    Elementwise("xlog1py", tracer.scipy.special.xlog1py, 2, (_R, (0.5, 3.0))),
)


def _last(fn):
    """``fn`` along the last axis (a rank-0 value as a length-2 vector)."""
    def along(a):
        if a.ndim == 0:
            a = lax.broadcast_in_dim(a, (2,), ())
        return fn(a)
    return along


def _pool_last(op, init):
    # A window of 2 along the last axis, stride 1 (max- or sum-pooling).
    def pool(a):
        window = (1,) * (a.ndim - 1) + (2,)
        return lax.reduce_window(a, init, op, window, (1,) * a.ndim, "VALID")
    return pool


def _solve_last(a):
    """solve(M, a) along the last axis with a well-conditioned M = 2 I + 0.5 v v^T built
    from the value itself (v = tanh of its first row): LU with pivoting in the middle."""
    n = a.shape[-1]
    rows = a.reshape(-1, n)
    v = lax.tanh(rows[0])
    m = tnp.eye(n, dtype=a.dtype) * 2.0 + v[:, None] * v[None, :] * 0.5
    return tnp.linalg.solve(m, rows.T).T.reshape(a.shape)


# Composites along the last axis (value -> value; smooth or not).
AXIS_COMPOSITE = (
    ("sort", _last(lambda a: tnp.sort(a, axis=-1)), False),
    ("logsumexp", _last(lambda a: nn.logsumexp(a, axis=-1, keepdims=True) + a * 0.0), True),
    ("softmax", _last(lambda a: nn.softmax(a, axis=-1)), True),
    ("cumsum", _last(lambda a: tnp.cumsum(a, axis=-1)), True),
    ("cummax", _last(lambda a: lax.cummax(a, axis=a.ndim - 1)), False),
    ("var", _last(lambda a: tnp.var(a, axis=-1, keepdims=True) + a), True),
    ("cumprod", _last(lambda a: tnp.cumprod(a, axis=-1)), True),
    ("cumlogsumexp", _last(lambda a: lax.cumlogsumexp(a, axis=a.ndim - 1)), True),
    ("max_pool", _last(_pool_last(lax.max, -np.inf)), False),
    ("sum_pool", _last(_pool_last(lax.add, 0.0)), True),
    ("top_k", _last(lambda a: lax.top_k(a, 2)[0]), False),
    ("solve", _last(_solve_last), True),
)
REDUCTIONS = ("reduce_sum", "reduce_max", "reduce_min", "reduce_prod")
REMAPS = ("transpose", "rev", "slice", "pad", "reshape", "reshape_rows", "concatenate",
          "broadcast_in_dim", "strided")
INDEXING = ("gather", "gather_axis1", "dynamic_slice", "dynamic_slice_argmax", "scatter_add",
            "dynamic_update_slice", "gather_argsort", "scatter_set", "scatter_max")
CONDS = ("cond", "guarded", "switch")
LOOPS = ("fori_loop", "scan", "scan_reverse")
CALLS = ("jit", "checkpoint", "custom_jvp")
# Ops guarded by ``s > 0`` in a ``guarded`` cond: their true domain is (0, inf) (or wider),
# and outside it they give NaN or inf (log, sqrt, rsqrt, reciprocal, ...).
GUARDED = tuple(op for op in UNARY if op.domains[0] not in (None, "bounded")
                and op.domains[0][0] >= 0)

KINDS = ("unary", "binary", "composite", "remap", "reduce", "index", "dot", "cond", "loop",
         "call")
_VARIANTS = {"unary": UNARY, "binary": BINARY,
             "composite": tuple(c.name for c in COMPOSITE) + tuple(n for n, _, _ in AXIS_COMPOSITE),
             "remap": REMAPS, "reduce": REDUCTIONS, "index": INDEXING, "dot": ("dot",),
             "cond": CONDS, "loop": LOOPS, "call": CALLS}


def _variant_name(kind, v):
    return v.name if isinstance(v, Elementwise) else v


class Op(NamedTuple):
    """``kind`` (index into KINDS), ``a``/``c`` pick operands, ``b`` the variant (modulo
    the kind's table), ``body`` the sub-programs of cond/loop ops."""
    kind: int
    a: int
    b: int
    c: int
    body: tuple = ()

    def __repr__(self):
        kind = KINDS[self.kind % len(KINDS)]
        table = _VARIANTS[kind]
        name = _variant_name(kind, table[self.b % len(table)])
        k = f", k={self.b // len(table)}" if self.b >= len(table) else ""
        body = f", body={self.body!r}" if self.body else ""
        return f"op({kind!r}, {name!r}, a={self.a}, c={self.c}{k}{body})"


def op(kind: str, variant: str, a: int = 0, c: int = 0, k: int = 0, body=()):
    """The ``Op`` of a kind and variant named in words (``@example``s and repros); ``k``
    is the rest of ``b`` (cond/loop: which outer value the body closes over, and which
    op a guarded cond guards)."""
    table = _VARIANTS[kind]
    b = [_variant_name(kind, v) for v in table].index(variant) + k * len(table)
    return Op(KINDS.index(kind), a, b, c, tuple(tuple(p) for p in body))


# ====================================== strategies ======================================

_CTRL_KINDS = tuple(KINDS.index(k) for k in ("cond", "loop", "call"))
_LEAF_KINDS = tuple(i for i in range(len(KINDS)) if i not in _CTRL_KINDS)


def _leaf_op(kinds=_LEAF_KINDS):
    return st.builds(Op, st.sampled_from(kinds), st.integers(0, 15), st.integers(0, 63),
                     st.integers(0, 15))


def ops(depth: int = 1, max_ops: int = 3):
    """One op: a leaf, or (``depth`` > 0) a cond/loop whose two sub-programs are drawn at
    ``depth - 1``."""
    if depth == 0:
        return _leaf_op()
    sub = st.lists(ops(depth - 1, max_ops), min_size=1, max_size=max_ops).map(tuple)
    ctrl = st.builds(Op, st.sampled_from(_CTRL_KINDS), st.integers(0, 15), st.integers(0, 63),
                     st.integers(0, 15), st.tuples(sub, sub))
    # One op in four is control flow.
    return st.one_of(_leaf_op(), _leaf_op(), _leaf_op(), ctrl)


def programs(max_ops: int = 6, depth: int = 1, kinds=None):
    """Programs of 1..max_ops ops; control flow nests to ``depth``. ``kinds`` (names)
    restricts the leaf ops."""
    if kinds is not None:
        leaf = _leaf_op(tuple(KINDS.index(k) for k in kinds))
        return st.lists(leaf, min_size=1, max_size=max_ops).map(tuple)
    return st.lists(ops(depth), min_size=1, max_size=max_ops).map(tuple)


# Input signatures: the shapes of the program's arguments (scalars and lower-rank
# arguments meet the others through broadcasting).
SIGNATURES = (((3,), (3,)), ((2, 3), (3,)), ((2, 3), ()), ((2, 3), (2, 3)), ((3,), ()),
              ((2, 3), (3,), ()), ((3, 4), (3, 4)))
MODES = ("random", "equal", "repeated", "zeros")


def inputs(sig: int, mode: str, seed: int, dtype=np.float64):
    """Arguments of signature ``SIGNATURES[sig]``. ``random``: normal values (distinct
    almost surely); ``equal``: every argument equal to the first where they meet
    (``y = x[0]`` for a lower-rank y), so binary ops see equal operands; ``repeated``:
    small integers (repeated maxima, equal operands and zeros); ``zeros``: all zeros."""
    shapes = SIGNATURES[sig % len(SIGNATURES)]
    r = np.random.default_rng(seed)
    if mode == "zeros":
        return tuple(np.zeros(s, dtype) for s in shapes)
    if mode == "repeated":
        return tuple(r.integers(-1, 3, s).astype(dtype) for s in shapes)
    xs = [r.normal(size=s).astype(dtype) for s in shapes]
    if mode == "equal":
        first = xs[0]
        xs = [first] + [np.array(first[(0,) * (first.ndim - len(s))], dtype) for s in shapes[1:]]
    return tuple(np.asarray(x, dtype) for x in xs)


# ===================================== interpreter ======================================

@contextlib.contextmanager
def flags(**values):
    """``tracer.config`` flags set for a block, restored after it."""
    old = {k: tracer.config.read(k) for k in values}
    try:
        for k, v in values.items():
            tracer.config.update(k, v)
        yield
    finally:
        for k, v in old.items():
            tracer.config.update(k, v)


def _weights(shape, dtype):
    """Fixed non-uniform weights (a cotangent that tells permuted entries apart)."""
    n = int(np.prod(shape))
    return np.linspace(0.5, 1.5, n).reshape(shape).astype(dtype) if n > 1 else \
        np.full(shape, 0.75, dtype)


def _bcast_dims(src, dst):
    """broadcast_in_dim dimensions aligning ``src`` to the trailing axes of ``dst`` (NumPy
    broadcasting), or None when they do not broadcast."""
    if len(src) > len(dst):
        return None
    off = len(dst) - len(src)
    for i, n in enumerate(src):
        if n not in (1, dst[off + i]):
            return None
    return tuple(range(off, len(dst)))


class _Interp:
    """Runs a program; with ``log`` it also writes the program as pseudo-Python and records
    whether it is smooth."""

    def __init__(self, log=None):
        self.log = log
        self.names = {}
        self.counter = 0
        self.smooth = True
        self.indent = 0

    # -- naming and the listing
    def name(self, v):
        return self.names.get(id(v), "?")

    def emit(self, v, expr, prefix="v"):
        if self.log is not None:
            nm = f"{prefix}{self.counter}"
            self.counter += 1
            self.names[id(v)] = nm
            self.log.append("    " * self.indent + f"{nm} = {expr}")
        return v

    def bind_name(self, v, nm):
        if self.log is not None:
            self.names[id(v)] = nm

    def line(self, text):
        if self.log is not None:
            self.log.append("    " * self.indent + text)

    def kink(self):
        self.smooth = False

    # -- helpers
    def fit(self, v, shape):
        """``v`` as a value of ``shape``: itself, broadcast, or its sum broadcast."""
        if tuple(v.shape) == tuple(shape):
            return v
        dims = _bcast_dims(v.shape, shape)
        if dims is None:
            v = lax.reduce_sum(v, tuple(range(v.ndim)))
            dims = ()
        return lax.broadcast_in_dim(v, tuple(shape), dims)

    def align(self, u, v):
        """Operands of one shape for a binary op, and their names: equal shapes, a scalar,
        or the smaller broadcast to the larger (``broadcast_in_dim``); else ``v``'s sum."""
        nu, nv = self.name(u), self.name(v)
        if u.shape == v.shape or v.ndim == 0 or u.ndim == 0:
            return u, v, [nu, nv]
        if _bcast_dims(v.shape, u.shape) is not None:
            return u, self.fit(v, u.shape), [nu, f"bcast({nv}, {u.shape})"]
        if _bcast_dims(u.shape, v.shape) is not None:
            return self.fit(u, v.shape), v, [f"bcast({nu}, {v.shape})", nv]
        return u, lax.reduce_sum(v, tuple(range(v.ndim))), [nu, f"sum({nv})"]

    @staticmethod
    def adapt(u, dom):
        """``u`` mapped smoothly into an argument domain."""
        if dom is None:
            return u
        if dom == "bounded":
            return lax.tanh(u * (1 / 3)) * 3.0
        lo, hi = dom
        return lax.logistic(u) * (hi - lo) + lo

    @staticmethod
    def adapt_text(txt, dom):
        if dom is None:
            return txt
        if dom == "bounded":
            return f"3*tanh({txt}/3)"
        return f"into({txt}, ({dom[0]:.3g}, {dom[1]:.3g}))"

    def elementwise(self, e: Elementwise, args, names):
        if not e.smooth:
            self.kink()
        xs = [self.adapt(x, d) for x, d in zip(args, e.domains)]
        return e.fn(*xs), f"{e.name}(" + ", ".join(
            self.adapt_text(n, d) for n, d in zip(names, e.domains)) + ")"

    # -- the program
    def run(self, prog, pool, prefix="v"):
        pool = list(pool)
        for o in prog:
            kind = KINDS[o.kind % len(KINDS)]
            out = getattr(self, "op_" + kind)(o, pool)
            for v, expr in out:
                if v.size > MAX_SIZE or v.ndim > MAX_RANK:     # keep values small
                    v, expr = lax.reduce_sum(v, tuple(range(v.ndim))), f"sum({expr})"
                pool.append(self.emit(v, expr, prefix))
        return pool

    @staticmethod
    def pick(pool, i):
        """Pool value ``i`` counted from the newest: 0 chains ops, larger ones reach back
        (and two picks of one value reuse it)."""
        return pool[-1 - i % len(pool)]

    def op_unary(self, o, pool):
        u = self.pick(pool, o.a)
        e = UNARY[o.b % len(UNARY)]
        return [self.elementwise(e, [u], [self.name(u)])]

    def op_binary(self, o, pool):
        u, v, names = self.align(self.pick(pool, o.a), self.pick(pool, o.c))
        return [self.elementwise(BINARY[o.b % len(BINARY)], [u, v], names)]

    def op_composite(self, o, pool):
        u = self.pick(pool, o.a)
        k = o.b % (len(COMPOSITE) + len(AXIS_COMPOSITE))
        if k >= len(COMPOSITE):
            name, fn, smooth = AXIS_COMPOSITE[k - len(COMPOSITE)]
            if not smooth:
                self.kink()
            return [(fn(u), f"{name}({self.name(u)}, axis=-1)")]
        e = COMPOSITE[k]
        if e.nargs == 1:
            return [self.elementwise(e, [u], [self.name(u)])]
        u, v, names = self.align(u, self.pick(pool, o.c))
        return [self.elementwise(e, [u, v], names)]

    def op_remap(self, o, pool):
        u = self.pick(pool, o.a)
        nm = self.name(u)
        nd = u.ndim
        which = REMAPS[o.b % len(REMAPS)]
        if nd == 0:
            return [(lax.broadcast_in_dim(u, (2,), ()), f"broadcast_in_dim({nm}, (2,), ())")]
        if which == "transpose" and nd >= 2:
            perm = tuple(reversed(range(nd)))
            return [(lax.transpose(u, perm), f"transpose({nm}, {perm})")]
        if which == "slice" and u.shape[0] > 1:
            return [(u[1:], f"{nm}[1:]")]
        if which == "pad":
            cfg = [(1, 0, 1)] + [(0, 0, 0)] * (nd - 1)
            return [(lax.pad(u, 0.5, cfg), f"pad({nm}, 0.5, {cfg})")]
        if which == "reshape" and nd >= 2:
            return [(u.reshape(-1), f"{nm}.reshape(-1)")]
        if which == "reshape_rows" and nd == 1 and u.shape[0] % 2 == 0:
            return [(u.reshape(2, -1), f"{nm}.reshape(2, -1)")]
        if which == "concatenate":
            v = self.pick(pool, o.c)
            if v.shape[1:] == u.shape[1:] and v.ndim == nd:
                return [(lax.concatenate([u, v], 0), f"concatenate([{nm}, {self.name(v)}], 0)")]
            return [(lax.concatenate([u, u * 0.5], 0), f"concatenate([{nm}, {nm} * 0.5], 0)")]
        if which == "broadcast_in_dim" and nd < MAX_RANK and 2 * u.size <= MAX_SIZE:
            shape = (2,) + tuple(u.shape)
            return [(lax.broadcast_in_dim(u, shape, tuple(range(1, nd + 1))),
                     f"broadcast_in_dim({nm}, {shape}, {tuple(range(1, nd + 1))})")]
        if which == "strided" and u.shape[-1] > 1:
            return [(u[..., ::2], f"{nm}[..., ::2]")]
        ax = o.c % nd
        return [(lax.rev(u, (ax,)), f"rev({nm}, ({ax},))")]

    def op_reduce(self, o, pool):
        u = self.pick(pool, o.a)
        name = REDUCTIONS[o.b % len(REDUCTIONS)]
        if name in ("reduce_max", "reduce_min"):
            self.kink()
        choices = [(k,) for k in range(u.ndim)] + [tuple(range(u.ndim)), ()]
        if u.ndim == 3:
            choices.append((0, 2))
        axes = choices[o.c % len(choices)]
        return [(RECORDS_BY_NAME[name].op(u, axes=axes), f"{name}({self.name(u)}, axes={axes})")]

    def _int_index(self, n, c):
        """Three indices into an axis of length n, with repeats (and a negative one)."""
        idx = [(c + k * k) % n for k in range(3)]
        if c % 2:
            idx[-1] -= n
        return np.array(idx, np.int32)

    def op_index(self, o, pool):
        u = self.pick(pool, o.a)
        nm = self.name(u)
        if u.ndim == 0:
            u = lax.broadcast_in_dim(u, (3,), ())
            nm = f"bcast({nm}, (3,))"
        which = INDEXING[o.b % len(INDEXING)]
        n = u.shape[0]
        if which == "gather_axis1" and u.ndim >= 2:
            idx = self._int_index(u.shape[1], o.c)
            return [(u[:, idx], f"{nm}[:, {idx.tolist()}]")]
        if which in ("dynamic_slice", "dynamic_slice_argmax"):
            sizes = (max(1, n - 1),) + tuple(u.shape[1:])
            if which == "dynamic_slice":
                start, stxt = o.c % (n + 2), str(o.c % (n + 2))    # past the end: clamped
            else:
                self.kink()   # piecewise: the start jumps where the argmax changes
                src = self.pick(pool, o.c)
                start = tnp.argmax(src)
                stxt = f"argmax({self.name(src)})"
            starts = [start] + [0] * (u.ndim - 1)
            return [(lax.dynamic_slice(u, starts, sizes),
                     f"dynamic_slice({nm}, [{stxt}, ...], {sizes})")]
        if which == "scatter_add":
            idx = self._int_index(n, o.c)
            w = self.pick(pool, o.c + 1)
            upd = self.fit(w, (3,) + tuple(u.shape[1:]))
            return [(u.at[idx].add(upd), f"{nm}.at[{idx.tolist()}].add(fit({self.name(w)}))")]
        if which == "gather_argsort":
            self.kink()   # a data-dependent permutation: jumps where the order changes
            src = self.pick(pool, o.c)
            key = self.fit(src, (n,)) if src.ndim != 1 or src.shape[0] != n else src
            perm = tnp.argsort(key)
            return [(u[perm], f"{nm}[argsort(fit({self.name(src)}, ({n},)))]")]
        if which in ("scatter_set", "scatter_max"):
            # set: distinct indices (a repeated one has no defined winner); max: repeated,
            # with ties between the updates and the operand.
            idx = np.array([0, n - 1] if which == "scatter_set" else self._int_index(n, o.c))
            if which == "scatter_set" and n == 1:
                idx = idx[:1]
            w = self.pick(pool, o.c + 1)
            upd = self.fit(w, (len(idx),) + tuple(u.shape[1:]))
            if which == "scatter_set":
                return [(u.at[idx].set(upd), f"{nm}.at[{idx.tolist()}].set(fit({self.name(w)}))")]
            self.kink()
            return [(u.at[idx].max(upd), f"{nm}.at[{idx.tolist()}].max(fit({self.name(w)}))")]
        if which == "dynamic_update_slice":
            w = self.pick(pool, o.c + 1)
            upd = self.fit(w, (1,) + tuple(u.shape[1:]))
            start = o.c % (n + 1)
            starts = [start] + [0] * (u.ndim - 1)
            return [(lax.dynamic_update_slice(u, upd, starts),
                     f"dynamic_update_slice({nm}, fit({self.name(w)}), [{start}, ...])")]
        idx = self._int_index(n, o.c)
        return [(u[idx], f"{nm}[{idx.tolist()}]")]

    def op_dot(self, o, pool):
        u, v = self.pick(pool, o.a), self.pick(pool, o.c)
        nu, nv = self.name(u), self.name(v)
        if u.ndim == 0 or v.ndim == 0:
            return [(u * v, f"{nu} * {nv}")]
        if u.shape[-1] == v.shape[0]:
            dn = (((u.ndim - 1,), (0,)), ((), ()))
        elif u.shape[-1] == v.shape[-1]:
            dn = (((u.ndim - 1,), (v.ndim - 1,)), ((), ()))
        else:
            v, nv = u, nu            # a value with itself
            dn = (((u.ndim - 1,), (u.ndim - 1,)), ((), ()))
        return [(RECORDS_BY_NAME["dot_general"].op(u, v, dimension_numbers=dn),
                 f"dot_general({nu}, {nv}, {dn})")]

    def _sub(self, body, pool, names, out_shape, label, extra=None):
        """Run sub-program ``body`` over ``pool`` (named ``names``), after appending
        ``extra`` (a (thunk, text) pair computed inside the block); its last value, fit to
        ``out_shape``."""
        self.line(f"{label}({', '.join(names)}):")
        self.indent += 1
        outer = {id(v): self.names.get(id(v)) for v in pool}
        for v, nm in zip(pool, names):
            self.bind_name(v, nm)
        if extra is not None:
            pool = pool + [self.emit(extra[0](), extra[1], "b")]
        res = self.run(body, pool, prefix="b")
        last = res[-1]
        out = self.fit(last, out_shape)
        self.line(f"return fit({self.name(last)}, {tuple(out_shape)})")
        self.indent -= 1
        for i, nm in outer.items():      # an outer value passed in keeps its outer name
            if nm is not None:
                self.names[i] = nm
        return out, last

    def op_cond(self, o, pool):
        self.kink()   # a jump where the predicate flips
        u = self.pick(pool, o.a)
        src = self.pick(pool, o.c)
        captured = self.pick(pool, o.b // len(CONDS))
        cn = self.name(captured)
        which = CONDS[o.b % len(CONDS)]
        s = lax.reduce_sum(src, tuple(range(src.ndim)))
        nu, ns = self.name(u), f"sum({self.name(src)})"
        bt, bf = (o.body + ((), ()))[:2]
        shape = tuple(u.shape)
        if which == "guarded":
            g = GUARDED[(o.b // len(CONDS)) % len(GUARDED)]

            def true_fun(x, s):
                # g(s) as is: defined only where the predicate holds.
                return self._sub(bt, [x, s, captured], ["x", "s", cn], shape, "def true",
                                 extra=(lambda: g.fn(s), f"{g.name}(s)  # s > 0 here"))[0]
        else:
            def true_fun(x, s):
                return self._sub(bt, [x, s, captured], ["x", "s", cn], shape, "def true")[0]

        def false_fun(x, s):
            return self._sub(bf, [x, s, captured], ["x", "s", cn], shape, "def false")[0]

        if which == "switch":
            index = (s > 0.0).astype(np.int32) + (s > 1.0).astype(np.int32)
            out = lax.switch(index, [false_fun, true_fun, lambda x, s: x * 0.5], u, s)
            return [(out, f"switch(({ns} > 0) + ({ns} > 1), [false, true, 0.5x], {nu}, s={ns})")]
        out = lax.cond(s > 0.0, true_fun, false_fun, u, s)
        return [(out, f"cond({ns} > 0, true, false, {nu}, s={ns})")]

    def op_loop(self, o, pool):
        u = self.pick(pool, o.a)
        captured = self.pick(pool, o.b // len(LOOPS))
        cn = self.name(captured)
        which = LOOPS[o.b % len(LOOPS)]
        body = (o.body + ((),))[0]
        if which == "fori_loop":
            n = 1 + o.c % 3

            def fbody(i, carry):
                return self._sub(body, [carry, captured], ["carry", cn],
                                 tuple(carry.shape), "def body",
                                 extra=(lambda: lax.convert_element_type(i, carry.dtype) * 0.5,
                                        "0.5 * i"))[0]
            return [(lax.fori_loop(0, n, fbody, u), f"fori_loop(0, {n}, body, {self.name(u)})")]
        xs = u if u.ndim else lax.broadcast_in_dim(u, (2,), ())
        init = self.pick(pool, o.c)

        def sbody(carry, x):
            new, last = self._sub(body, [carry, x, captured], ["carry", "x", cn],
                                  tuple(carry.shape), "def body")
            y = last if last.size * xs.shape[0] <= MAX_SIZE else \
                lax.reduce_sum(last, tuple(range(last.ndim)))
            return new, y
        reverse = which == "scan_reverse"
        carry, ys = lax.scan(sbody, init, xs, reverse=reverse)
        xn = self.name(u) if u.ndim else f"bcast({self.name(u)}, (2,))"
        head = f"scan(body, {self.name(init)}, {xn}{', reverse=True' if reverse else ''})"
        return [(carry, head + "[0]"), (ys, head + "[1]")]

    def op_call(self, o, pool):
        """The sub-program as an inner ``jit`` (closing over an outer value), under
        ``checkpoint``, or as a ``custom_jvp`` function whose rule is the sub-program's own
        jvp (the outer value an explicit argument: a custom_jvp function must not close
        over traced values)."""
        u, k = self.pick(pool, o.a), self.pick(pool, o.c)
        which = CALLS[o.b % len(CALLS)]
        body = (o.body + ((),))[0]
        shape = tuple(u.shape)

        def fn(x, kk):
            return self._sub(body, [x, kk], ["x", "k"], shape, f"def {which}_body")[0]
        head = f"{which}(body)({self.name(u)}, k={self.name(k)})"
        if which == "jit":
            return [(tracer.jit(lambda x: fn(x, k))(u), head)]
        if which == "checkpoint":
            return [(tracer.checkpoint(lambda x: fn(x, k))(u), head)]
        g = tracer.custom_jvp(fn)
        g.defjvp(lambda primals, tangents: tracer.jvp(fn, primals, tangents))
        return [(g(u, k), head)]


def run(prog, args):
    """The outputs of ``prog`` on ``args``: (last value, the pool's middle value)."""
    pool = _Interp().run(prog, [tnp.asarray(a) for a in args])
    return pool[-1], pool[len(pool) // 2]


def build(prog):
    """``prog`` as a Python function of its arguments."""
    return lambda *args: run(prog, args)


def analyze(prog, args):
    """(listing, smooth): the program as pseudo-Python, and whether it has no kinks or
    jumps (finite differences valid at every point, ties included)."""
    log = []
    interp = _Interp(log)

    def traced(*xs):
        for i, x in enumerate(xs):
            interp.bind_name(x, f"v{i}")
        interp.counter = len(xs)
        pool = interp.run(prog, list(xs))
        outs = pool[-1], pool[len(pool) // 2]
        log.append(f"return {interp.name(outs[0])}, {interp.name(outs[1])}")
        return outs
    tracer.make_jaxpr(traced)(*args)
    head = "def f(" + ", ".join(f"v{i}: {tuple(np.shape(a))}" for i, a in enumerate(args)) + "):"
    return "\n".join([head] + ["    " + ln for ln in log]), interp.smooth


def describe(prog, args):
    return analyze(prog, args)[0]


def scalarize(outs):
    """A scalar objective of a program's outputs: sum(out * fixed weights) over outputs."""
    total = 0.0
    for o in outs:
        total = total + tnp.sum(o * _weights(o.shape, o.dtype))
    return total
