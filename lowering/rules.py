"""Lowering-rule registries: how each primitive becomes loop IR. Extend them for your
primitives in ``lowering/<family>.py`` (a new module is listed in
``lowering.pipeline.RULE_MODULES``: they are imported on the first ``jit``); a primitive
with no rule still works under jit as a *host step* (its NumPy impl on whole arrays), and
``jitted.lower(...).as_text()`` says so.

Four registries, tried in this order for an equation ``outs = prim[params] ins``; a rule
that does not handle some operands (say, complex ones) declares it with its *limits*
(``limit(kind, prim, check)``, next to the rule), which pass such an equation on to the
next registry, and finally to a host step. Fusion classifies every equation by
``classify`` before lowering it -- a rule never raises to say "not these operands", and
an exception raised by a rule is a bug that propagates:

1. ``scalar_exprs[prim]`` -- element-wise primitives; fused into their consumers.
   Either a function name (``"np.sin"``, ``"math.erf"``: called on the operands, result
   cast to the output dtype) or a rule ``(ctx, *args, **params) -> Expr`` where ``args``
   are the operands' scalar ``Expr``s at the current element and ``ctx`` an
   ``ExprContext`` (``ctx.op``, ``ctx.call``, ``ctx.cast``, ``ctx.select``, ``ctx.const``,
   ``ctx.in_avals``, ``ctx.out_avals``). Rank-0 operands broadcast automatically.

2. ``remap_rules[prim]`` -- fusible ops that read their operands at other indices
   (broadcast, transpose, slice, pad, concatenate, gather...): a rule
   ``(ctx, idx, *operands, **params) -> Expr`` returning the output element at ``idx``
   (a tuple of int64 ``Expr``s), reading operand ``k`` with ``operands[k].read(index)``.
   Every index must be in bounds by construction (Numba does not check), whether or not
   the loaded value is selected in the end: clamp with ``ctx.op("max"/"min", ...)``.
   Shape-dependent integers (sizes, starts) must be ``ctx.iparam(value)`` or
   ``operand.dim(d)`` -- runtime values -- never Python ints baked into the expression,
   so that kernels stay shape-generic (a new shape reuses the compiled kernel).

3. ``reduction_rules[prim]`` -- ``(ctx, *in_avals, **params) -> ReductionSpec``: which
   axes are reduced, the accumulators (dtype, initial ``Expr``), the combine step and
   which accumulator feeds each output. The reduced operand's producers fuse in as a
   prologue; reductions with the same iteration space share one loop nest. A rule
   reading more than operand 0 (a variadic reduction, a runtime init value) calls
   ``ctx.read(k)``: operand ``k``'s element at the current iteration index when it has
   operand 0's shape, its value when it is rank 0 (only such reads may appear in
   ``init``). A primitive holding a scalar computation (``reduce``'s) builds its
   expression with ``scalar_jaxpr_exprs``.

4. ``lowering_rules[prim]`` -- everything structured (library calls, control flow):
   ``(ctx, in_avals, out_avals, *ins, **params) -> outs`` where ``ins`` are buffer
   names (materialized arrays) and the rule returns the output buffer names made by
   ``ctx.library_call(name, kind, ins, out_avals, **static)``: a ``LibraryCall`` step
   (``lowering.ir``) that names what to compute -- ``kind``, a string such as "sort" --
   and its static params; ``name`` is what ``as_text`` shows. The rule holds no code that
   runs: the backend implements each kind (its registry of library implementations maps
   ``kind`` to ``fn(*arrays, **static) -> list of arrays``), so a new kind needs an entry
   there too. For sub-jaxprs, ``ctx.lower_subjaxpr(closed_jaxpr)`` returns their
   ``Program`` (lowered through this same pipeline), to pass as a static param.

Worked example -- a new element-wise primitive ``erfc_p`` (float operands)::

    # lowering/special.py
    import numpy as np
    from lowering.rules import limit, scalar_exprs    # (never import Numba here)

    scalar_exprs[erfc_p] = "math.erfc"               # one-liner: math.erfc(x), cast back

    # or, with explicit dtype handling (here: compute in float64, round on the way out):
    def _erfc_lower(ctx, x):
        x64 = ctx.cast(x, np.float64)
        return ctx.cast(ctx.call("math.erfc", x64, dtype=np.float64), ctx.out_avals[0].dtype)
    scalar_exprs[erfc_p] = _erfc_lower

    # the operands it does not handle run as host steps: declared, never raised
    limit("scalar", erfc_p, lambda in_avals, out_avals, **params:
          None if np.dtype(in_avals[0].dtype).kind == "f" else "complex erfc")

and a structured one -- a library call of a new kind, implemented by the backend::

    # lowering/<family>.py: what to compute (static params: hashable values)
    def _cumlog_lower(ctx, in_avals, out_avals, x, *, axis):
        return ctx.library_call("cumlog (sequential scan)", "cumlog", [x], out_avals,
                                axis=axis)
    lowering_rules[cumlog_p] = _cumlog_lower

    # the backend's library module: how (NumPy arrays in, a list of arrays out)
    @register("cumlog")
    def cumlog_call(x, *, axis):
        return [np.log(np.cumsum(x, axis=axis))]

A scalar helper with the eager semantics where the backend's scalar code differs is
referenced by a backend-neutral name: ``ctx.call("scalar.idiv_s", x, y, dtype=...)``,
``ctx.call("vecmath.exp_f32", x, ...)``. The backend maps the module names ``scalar``
and ``vecmath`` to its own helper modules (Numba's: ``register_jitable`` functions, or
straight-line functions pasted into the loop so that it still vectorizes), imports them
in the generated kernel and hashes their source into the kernel's cache key (a changed
helper never reuses a stale compiled kernel). ``lax`` and ``lowering`` never import
Numba or the backend.

Dtype rules (the eager NumPy impl is the reference): operands arrive with their jaxpr
dtypes; float16 values are carried as float32 rounded to float16 after every op (the
codegen does this for ``ctx.op``; a ``ctx.call`` returning float16 is rounded once);
integer ops wrap; ``ctx.op`` semantics are listed in the backend's code generator.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable

import numpy as np

from tracer import dtypes

from lowering.ir import (BOOL, COMPARE, INDEX, INDEX_OPS, Call, Const, Expr, FnRef, IParam,
                         Op, SCALAR_OPS, index_op)

scalar_exprs: dict = {}       # prim -> "module.fn" | (ctx, *args, **params) -> Expr
remap_rules: dict = {}        # prim -> (ctx, idx, *operands, **params) -> Expr
reduction_rules: dict = {}    # prim -> (ctx, *in_avals, **params) -> ReductionSpec
lowering_rules: dict = {}     # prim -> (ctx, in_avals, out_avals, *ins, **params) -> outs

# Rough per-element cost of a scalar function (fusion recomputes cheap values, stores
# expensive ones with several consumers). Unlisted calls count as CALL_COST.
CALL_COST = 20


# The registries in the order they are tried, by kind.
REGISTRIES = (("scalar", scalar_exprs), ("remap", remap_rules),
              ("reduction", reduction_rules), ("structured", lowering_rules))

# (kind, prim) -> check(in_avals, out_avals, **params) -> str | None: why the rule of
# registry ``kind`` does not handle these operands, or None when it does. Declared with
# the rule (``limit``); a rule without limits handles every operand its primitive accepts.
rule_limits: dict = {}


def limit(kind: str, prim, check: Callable) -> None:
    """Declare that the ``kind`` rule of ``prim`` handles only the operands for which
    ``check(in_avals, out_avals, **params)`` returns None (else: the reason, a string)."""
    if kind not in dict(REGISTRIES):
        raise ValueError(f"limit: unknown registry kind {kind!r}; known: "
                         f"{[k for k, _ in REGISTRIES]}")
    rule_limits[(kind, prim)] = check


def why_not(kind: str, prim, in_avals, out_avals, params) -> str | None:
    """Why the ``kind`` rule of ``prim`` does not lower these operands (None: it does)."""
    if prim not in dict(REGISTRIES)[kind]:
        return f"no {kind} rule"
    if kind in ("scalar", "remap") and len(out_avals) != 1:
        return f"{len(out_avals)} results (a {kind} rule has one)"
    check = rule_limits.get((kind, prim))
    return None if check is None else check(list(in_avals), list(out_avals), **params)


def _is_lowp(aval) -> bool:
    dt = getattr(aval, "dtype", None)
    return dt is not None and dtypes.is_lowp(dt)


# Index remaps that only move elements (and a padding or update operand's elements):
# they lower for the low-precision types as for any other, kernels carrying the bits.
_LOWP_REMAPS = frozenset({"broadcast_in_dim", "concatenate", "dynamic_slice",
                          "dynamic_update_slice", "pad", "reshape", "rev", "slice",
                          "transpose"})
# Integer sources that float64 does not hold exactly: ml_dtypes rounds them to a
# low-precision float from the integer itself.
_WIDE_INTS = (np.dtype(np.int64), np.dtype(np.uint64))
_F16 = np.dtype(np.float16)
# float32 functions whose compiled results (the backend's vectorizable math, libm)
# differ from NumPy's SIMD loops by an ulp (docs/ARCHITECTURE.md, section 3; exp2 to
# atanh on CPUs with AVX-512, where NumPy has its own routines for them): rounded to
# bfloat16, a float8 format or float8_e8m0fnu, such an ulp can change the result, so
# these stay host steps for the types eager computes in float32 or float16 (whose
# NumPy loops compute in float32).
_F32_WITHIN_ULPS = frozenset({"exp", "log", "sin", "cos", "tanh", "cbrt", "erf", "exp2",
                              "expm1", "log1p", "tan", "pow", "atan2", "asin", "acos",
                              "atan", "sinh", "cosh", "asinh", "acosh", "atanh"})
_VIA_F32 = (np.dtype(np.float32), _F16)


def _widened(aval):
    return aval.update(dtype=dtypes.compute_dtype(aval.dtype)) if _is_lowp(aval) else aval


def lowp_plan(prim, in_avals, out_avals, params):
    """How an equation touching a low-precision (ml_dtypes) type lowers: None when none
    of its operands or results has one; "host" when it stays a host step; "direct" when
    its rule handles the types itself (conversions, selects, element moves: kernels
    load, convert and store them); else the operand and result
    avals in the types eager computes them in (``lax.utils.lowp_widening``): the rule
    runs there, between a widening and a rounding conversion (``apply_scalar_rule``)."""
    if not (any(map(_is_lowp, in_avals)) or any(map(_is_lowp, out_avals))):
        return None
    name = prim.name
    if name == "convert_element_type":
        src, dst = np.dtype(in_avals[0].dtype), np.dtype(out_avals[0].dtype)
        if src in _WIDE_INTS and dtypes.is_lowp_float(dst):
            return "host"
        if src.name == "bfloat16" and dst == _F16:
            # NumPy keeps a signalling NaN's payload from float32 to float16 (eager's
            # route), which the float16 carrier, rounding through float64, does not
            return "host"
        return "direct"
    if name == "select_n" or name in _LOWP_REMAPS:
        return "direct"
    from lax.utils import plain_widening
    if len(out_avals) != 1 or not plain_widening(name, [a.dtype for a in in_avals]):
        return "host"
    if name in _F32_WITHIN_ULPS and any(
            _is_lowp(a) and dtypes.compute_dtype(a.dtype) in _VIA_F32 for a in in_avals):
        return "host"
    return [_widened(a) for a in in_avals], [_widened(a) for a in out_avals]


# Element-wise functions whose NumPy loops (SIMD where the CPU has it: AVX2 here) outrun
# the backend's compiled versions (libm, one element at a time) by far. Measured over
# 2**17 elements, compiled kernel / NumPy, float64 then float32: log 5.9 / 3.1, tanh
# 5.6 / 5.3, expm1 8.2 / 34, log1p 9.6 / 23, atan 8.0 / 20, sinh 11 / 50, cosh 8.3 / 17,
# asinh 6.7 / 20, tan 11 / 31, exp2 4.2 / 9.4, cbrt 10 / 41, atanh 13 / 34, asin 7.3 /
# 17, acos 5.0 / 18, acosh 6.6 / 20, pow 5.6 / 8.5 (exp 1.9 / 1.1, sin and cos 1.0-1.7
# and sqrt 0.6-0.9 stay fused: the loads and stores a separate pass costs eat the
# rest). On float32/float64 arrays of at least ``NUMPY_LOOP_MIN_ELEMENTS`` elements
# outside loop bodies they are host steps, whose eager impl is that NumPy loop (so their
# results are eager's, bit for bit). Inside a loop body a host step would make the loop
# run from Python: there they stay fused.
NUMPY_LOOPS = frozenset({"log", "tanh", "expm1", "log1p", "atan", "sinh", "cosh", "asinh",
                         "tan", "exp2", "cbrt", "atanh", "asin", "acos", "acosh", "pow"})
NUMPY_LOOP_MIN_ELEMENTS = 4096
_NUMPY_LOOP_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_body_depth = threading.local()    # (programs may be lowered on several threads)


class loop_body:
    """``with loop_body():`` around the lowering of a loop body's or a branch's jaxpr
    (its Program runs inside a compiled driver, where a host step costs the loop)."""

    def __enter__(self):
        _body_depth.n = getattr(_body_depth, "n", 0) + 1

    def __exit__(self, *exc):
        _body_depth.n -= 1


def numpy_loop_faster(prim, in_avals, out_avals) -> bool:
    """Whether ``prim`` on these operands runs as its NumPy loop (``NUMPY_LOOPS``)."""
    return (prim.name in NUMPY_LOOPS and not getattr(_body_depth, "n", 0)
            and len(out_avals) == 1
            and np.dtype(out_avals[0].dtype) in _NUMPY_LOOP_DTYPES
            and all(np.dtype(a.dtype) == out_avals[0].dtype for a in in_avals)
            and out_avals[0].size >= NUMPY_LOOP_MIN_ELEMENTS)


def classify(prim, in_avals, out_avals, params) -> str:
    """The registry that lowers ``outs = prim[params] ins`` with these avals: "scalar",
    "remap", "reduction" or "structured" (the first whose rule exists and whose limits
    admit them), else "host".

    With a low-precision (ml_dtypes) operand or result, ``lowp_plan`` decides: element-
    wise primitives lower as their rule does on the widened types, conversions, selects
    and element moves as they are; everything else (reductions, library calls, the
    primitives eager computes in a special way for these types) is a host step, whose
    eager impl is the reference. So are the functions of ``NUMPY_LOOPS`` on large arrays
    outside loop bodies (NumPy's loops are the faster code)."""
    plan = lowp_plan(prim, in_avals, out_avals, params)
    if plan == "host" or (plan is None and numpy_loop_faster(prim, in_avals, out_avals)):
        return "host"
    if isinstance(plan, tuple):
        wide = why_not("scalar", prim, plan[0], plan[1], params) is None
        return "scalar" if wide else "host"
    for kind, _ in REGISTRIES:
        if plan == "direct" and kind not in ("scalar", "remap"):
            continue
        if why_not(kind, prim, in_avals, out_avals, params) is None:
            return kind
    return "host"


def rule_kind(prim) -> str | None:
    """Which registry lowers ``prim`` ("scalar", "remap", "reduction", "structured") for
    operands within its limits, or None (host step)."""
    for kind, registry in REGISTRIES:
        if prim in registry:
            return kind
    return None


# ----------------------------------- expression rules ------------------------------------

def _np_dtype(dt) -> np.dtype:
    return np.dtype(dt)


class ExprContext:
    """What element-wise, remap and reduction rules build expressions with."""

    def __init__(self, in_avals, out_avals, origin: str, new_iparam: Callable,
                 reader: Callable | None = None):
        self.in_avals = list(in_avals)
        self.out_avals = list(out_avals)
        self.origin = origin
        self._new_iparam = new_iparam
        self._reader = reader

    def read(self, k: int) -> Expr:
        """Reduction rules: operand ``k``'s element at the current iteration index (an
        operand of operand 0's shape), or its value (a rank-0 operand)."""
        if self._reader is None:
            raise ValueError(f"ExprContext.read({k}): operands are read only by reduction "
                             f"rules ({self.origin})")
        if not 0 <= k < len(self.in_avals):
            raise ValueError(f"ExprContext.read({k}): no operand {k} among "
                             f"{[a.str_short() for a in self.in_avals]} ({self.origin})")
        return self._reader(k)

    # -- scalars --
    def const(self, value, dtype) -> Const:
        """A constant baked into the kernel source (structural: 0, 1, 0.5, dtype limits...)."""
        dtype = _np_dtype(dtype)
        return Const(python_scalar(value, dtype), dtype, self.origin)

    def op(self, name: str, *args: Expr, dtype=None) -> Expr:
        """An IR op (``lowering.ir.SCALAR_OPS``) on operands of one dtype. Result dtype:
        bool for comparisons, the case dtype for select, ``dtype`` for cast/bitcast,
        else the operands'."""
        if name not in SCALAR_OPS:
            raise ValueError(f"ExprContext.op: unknown op {name!r}; known: {sorted(SCALAR_OPS)}")
        if name in INDEX_OPS or (dtype is None and all(a.dtype == INDEX for a in args)
                                 and name in ("add", "sub", "mul", "max", "min")):
            return index_op(name, *args) if name != "max" and name != "min" else \
                Op(name, tuple(args), INDEX, self.origin)
        if name in COMPARE:
            out = BOOL
        elif name == "select":
            out = args[1].dtype
        elif name in ("cast", "bitcast"):
            if dtype is None:
                raise ValueError(f"ExprContext.op({name!r}) needs dtype=")
            out = _np_dtype(dtype)
            if out == args[0].dtype:
                return args[0]
        else:
            out = args[0].dtype if dtype is None else _np_dtype(dtype)
        return Op(name, tuple(args), out, self.origin)

    def cast(self, x: Expr, dtype) -> Expr:
        """Convert with ``convert_element_type``'s semantics (float->int truncates and
        saturates, NaN -> 0; x -> bool is x != 0; complex -> real keeps the real part)."""
        return self.op("cast", x, dtype=dtype)

    def select(self, pred: Expr, on_true: Expr, on_false: Expr) -> Expr:
        return self.op("select", pred, on_true, on_false)

    def call(self, fn, *args: Expr, dtype=None) -> Expr:
        """``fn(*args)`` for a scalar function named "module.name" ("np.exp", "math.erf",
        a backend helper "scalar.sign_f" / "vecmath.exp_f32", a kernel of an importable
        module "lax.special_kernels.lgamma_f64"); the result is cast to ``dtype``
        (default: the first output's dtype)."""
        dtype = self.out_avals[0].dtype if dtype is None else _np_dtype(dtype)
        return Call(FnRef.of(fn), tuple(args), dtype, self.origin)

    # -- index arithmetic --
    def index(self, value: int) -> Const:
        """A structural int64 constant (a stride, an interior padding)."""
        return Const(int(value), INDEX)

    def iparam(self, value: int, label: str = "") -> IParam:
        """A shape-dependent int64 passed at run time (the kernel source does not change
        when it does)."""
        return self._new_iparam(int(value), label)


class Operand:
    """An operand of a remap rule: ``aval``, ``read(index) -> Expr`` and ``dim(d)``, its
    runtime extent along ``d``."""

    def __init__(self, aval, read: Callable, ctx: ExprContext, label: str):
        self.aval = aval
        self._read = read
        self._ctx = ctx
        self._label = label

    def read(self, index) -> Expr:
        index = tuple(i if isinstance(i, Expr) else Const(int(i), INDEX) for i in index)
        if len(index) != self.aval.ndim:
            raise ValueError(f"Operand.read: {len(index)} indices for an operand of rank "
                             f"{self.aval.ndim} ({self.aval.str_short()})")
        return self._read(index)

    def dim(self, d: int) -> Expr:
        n = self.aval.shape[d]
        if n == 1:
            return Const(1, INDEX)   # size-1 dims are structural (like broadcasting)
        return self._ctx.iparam(n, f"{self._label} dim {d}")


@dataclass
class ReductionSpec:
    """What a reduction rule returns.

    ``axes``: reduced dims of operand 0. ``acc_dtypes``/``init``: one accumulator each,
    ``init`` a list of ``Expr``. ``combine(ctx, accs, x, idx) -> [Expr]``: the new
    accumulators from the old (``accs``), the operand element ``x`` and the iteration
    index ``idx`` (a tuple of int64 Exprs over the operand's dims, e.g. for argmax).
    ``results[k]``: the accumulator written to output ``k`` (cast to its dtype), unless
    ``finals(ctx, accs) -> [Expr]`` computes the outputs from the final accumulators.
    ``merge(ctx, accs, parts) -> [Expr]``: combine the accumulators with partial ones
    (``parts``): another chunk's (earlier chunks first; only for a result independent of
    the order: a reduction over all dims then runs in parallel chunks), or, with
    ``summand``, a run's pairwise sum.
    ``summand(ctx, x) -> [Expr]`` (float and complex sums): the value each element adds
    to each accumulator; the kernel then adds the elements up in NumPy's order (pairwise
    along a contiguous run of reduced dims; ``lowering.ir.Reduction``).
    ``round_dtype``: the dtype NumPy's loop rounds the accumulators to after each inner
    run (float16 sums and products, accumulated in float32 within a run).
    """
    axes: tuple
    acc_dtypes: tuple
    init: list
    combine: Callable
    results: tuple = (0,)
    finals: Callable | None = None
    merge: Callable | None = None
    summand: Callable | None = None
    round_dtype: np.dtype | None = None


# ------------------------------- scalar computations -------------------------------------

def apply_scalar_rule(prim, ctx: ExprContext, args, params) -> Expr:
    """The ``scalar_exprs`` rule of ``prim`` applied to the operand Exprs ``args``; on
    low-precision operands, as eager computes them (``lowp_plan``): the operands
    converted to the widened types, the rule there, the result converted (rounded once)
    to its own type."""
    plan = lowp_plan(prim, ctx.in_avals, ctx.out_avals, params)
    if isinstance(plan, tuple):
        wide_in, wide_out = plan
        wctx = ExprContext(wide_in, wide_out, ctx.origin, ctx._new_iparam, ctx._reader)
        wargs = [wctx.cast(x, a.dtype) for x, a in zip(args, wide_in)]
        return ctx.cast(apply_scalar_rule(prim, wctx, wargs, params), ctx.out_avals[0].dtype)
    rule = scalar_exprs[prim]
    if isinstance(rule, str):
        return ctx.call(rule, *args, dtype=ctx.out_avals[0].dtype)
    return rule(ctx, *args, **params)


def scalar_jaxpr_why_not(closed) -> str | None:
    """Why ``scalar_jaxpr_exprs`` cannot build the expression of the ClosedJaxpr
    ``closed`` (rank-0 operands and results), or None when it can: every equation must
    be lowered by a scalar or remap rule for its operands, every const a scalar."""
    jaxpr = closed.jaxpr
    for v, c in zip(jaxpr.constvars, closed.consts):
        if np.ndim(c) != 0:
            return f"the computation captures a {np.shape(c)} array"
    for v in list(jaxpr.invars) + list(jaxpr.outvars):
        if getattr(v.aval, "shape", None) != ():
            return f"the computation has a non-scalar operand or result {v.aval}"
    for eqn in jaxpr.eqns:
        in_avals = [a.aval for a in eqn.invars]
        out_avals = [v.aval for v in eqn.outvars]
        if any(getattr(a, "shape", None) != () for a in in_avals + out_avals):
            return f"the computation's {eqn.primitive.name} has non-scalar operands"
        if classify(eqn.primitive, in_avals, out_avals, eqn.params) not in ("scalar", "remap"):
            return f"the computation's {eqn.primitive.name} has no element-wise lowering"
    return None


def scalar_jaxpr_exprs(ctx: ExprContext, closed, args) -> list:
    """The result Exprs of the ClosedJaxpr ``closed`` (rank-0 operands and results; see
    ``scalar_jaxpr_why_not``) applied to the operand Exprs ``args``: each equation's
    scalar or remap rule in turn, literals and consts as constants."""
    from tracer.jaxpr import Literal
    jaxpr = closed.jaxpr
    env = {}
    for v, c in zip(jaxpr.constvars, closed.consts):
        env[v] = ctx.const(np.asarray(c), v.aval.dtype)
    env.update(zip(jaxpr.invars, args))

    def read(a):
        if isinstance(a, Literal):
            return ctx.const(np.asarray(a.val), a.aval.dtype)
        return env[a]

    for eqn in jaxpr.eqns:
        in_avals = [a.aval for a in eqn.invars]
        out_avals = [v.aval for v in eqn.outvars]
        sub = ExprContext(in_avals, out_avals, ctx.origin, ctx._new_iparam)
        vals = [read(a) for a in eqn.invars]
        if classify(eqn.primitive, in_avals, out_avals, eqn.params) == "scalar":
            e = apply_scalar_rule(eqn.primitive, sub, vals, eqn.params)
        else:
            ops = [Operand(a, (lambda index, x=x: x), sub, f"operand {k}")
                   for k, (a, x) in enumerate(zip(in_avals, vals))]
            e = remap_rules[eqn.primitive](sub, (), *ops, **eqn.params)
        if e.dtype != np.dtype(out_avals[0].dtype):
            raise TypeError(f"lowering rule of {eqn.primitive.name} built a {e.dtype} "
                            f"expression for output {out_avals[0].str_short()}")
        env[eqn.outvars[0]] = e
    return [read(v) for v in jaxpr.outvars]


# --------------------------------- structured rules --------------------------------------

class StructuredContext:
    """What ``lowering_rules`` build steps with (implemented by ``lowering.fusion``)."""

    def library_call(self, name: str, kind: str, ins, out_avals, **static) -> list:
        """Append a ``LibraryCall`` of ``kind`` on buffers ``ins`` with the static params
        ``static`` (hashable values, or data such as a ``ControlFlowSpec``); returns the
        names of its new output buffers (avals ``out_avals``)."""
        raise NotImplementedError

    def lower_subjaxpr(self, closed_jaxpr):
        """The ``Program`` of a sub-jaxpr (a loop body, a branch), lowered through the
        whole pipeline."""
        raise NotImplementedError


def python_scalar(value, dtype: np.dtype):
    """``value`` as an exact Python scalar of ``dtype``'s kind (hashable, repr-exact)."""
    dtype = np.dtype(dtype)
    if dtypes.is_lowp(dtype):      # (their .item() is a NumPy scalar of the type)
        v = np.asarray(value).astype(dtype).astype(dtypes.compute_dtype(dtype)
                                                   if dtypes.is_lowp_int(dtype) else np.float32)
        return int(v) if dtypes.is_lowp_int(dtype) else float(v)
    v = np.asarray(value).astype(dtype).item() if not isinstance(value, (bool, int, float,
                                                                          complex)) else value
    if dtype == np.bool_:
        return bool(v)
    if dtype.kind in "iu":
        return int(v)
    if dtype.kind == "f":
        return float(np.asarray(v, dtype))
    if dtype.kind == "c":
        return complex(np.asarray(v, dtype))
    raise TypeError(f"python_scalar: unsupported dtype {dtype}")
