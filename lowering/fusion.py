"""Fusion: group the equations of an optimized jaxpr into kernels and build the Program.

1. Classify each equation by its rule (``lowering.rules.classify``): fusible (scalar
   expression or index remap), reduction, structured (library call) or host step -- the
   latter when no rule's declared limits admit these operands.
2. Decide which values are *materialized* (become arrays): program inputs/outputs, results
   of non-fusible equations, operands of structured/host steps, and values with several
   consumers (or broadcast to a larger shape) whose recomputation is not cheap
   (``RECOMPUTE_COST``). Everything else is recomputed inside each consumer's loop.
3. Each materialized fusible value and each reduction is a *root*; a root's scalar
   expression is built by substituting producers' rules down to loads of materialized
   buffers. Roots join the latest kernel with the same iteration space (and the same
   reduced dims) that comes after all the buffers they read -- a buffer produced by that
   same kernel is used directly when read at the same element -- else open a new kernel.
   So ``e = exp(x - max(x)); s = sum(e)`` computes ``e`` and ``s`` in one loop nest.
"""
from __future__ import annotations

import math

import numpy as np

from lowering import ir
from lowering.ir import (INDEX, AccRef, Const, FParam, HostStep, IParam, Kernel, KernelArg,
                         KernelStep, LibraryCall, Load, LoopIndex, PartRef, Program,
                         Reduction, Store)
from lowering.rules import (CALL_COST, ExprContext, Operand, StructuredContext,
                            apply_scalar_rule, classify, loop_body, lowering_rules,
                            python_scalar, reduction_rules, remap_rules)
from tracer.core import ShapedArray
from tracer.jaxpr import Literal, Var, _Namer, _pp_eqn

RECOMPUTE_COST = 4           # a value with several consumers is stored if it costs more
BAKED_FLOATS = {0.0, 1.0, -1.0, 2.0, 0.5, -0.5}


class _Conflict(Exception):
    """A root cannot join the candidate kernel."""


def _eqn_text(eqn, namer) -> str:
    # One line: it becomes a comment in the generated source (long params wrap).
    text = " ".join(_pp_eqn(eqn, namer, 0).split())
    return text if len(text) <= 160 else text[:157] + "..."


# ----------------------------------- classification --------------------------------------

def _classify_eqn(eqn):
    """Kind of ``eqn`` for these operands ("scalar", "remap", "reduction", "structured" or
    "host": ``lowering.rules.classify``, by the rules' declared limits) and, for a scalar or
    remap equation, a rough per-element cost: the ops and calls of its rule's expression
    built on placeholder operands (constants)."""
    prim = eqn.primitive
    if any(not isinstance(v.aval, ShapedArray) for v in list(eqn.outvars) + [
            a for a in eqn.invars if isinstance(a, Var)]):
        return "host", 0
    in_avals = [a.aval for a in eqn.invars]
    out_avals = [v.aval for v in eqn.outvars]
    kind = classify(prim, in_avals, out_avals, eqn.params)
    if kind not in ("scalar", "remap"):
        return kind, 0
    ctx = ExprContext(in_avals, out_avals, "", lambda v, label: IParam(99, label))
    if kind == "scalar":
        args = [Const(python_scalar(0, a.dtype), a.dtype) for a in in_avals]
        e = _apply_scalar(prim, ctx, args, eqn.params)
    else:
        ops = [Operand(a, lambda idx, a=a: Const(python_scalar(0, a.dtype), a.dtype), ctx, "")
               for a in in_avals]
        idx = tuple(LoopIndex(d) for d in range(len(out_avals[0].shape)))
        e = remap_rules[prim](ctx, idx, *ops, **eqn.params)
    cost = sum(CALL_COST if isinstance(n, ir.Call) else 1 for n in ir.walk(e)
               if isinstance(n, (ir.Op, ir.Call)) and n.dtype != INDEX)
    return kind, cost


_apply_scalar = apply_scalar_rule


# ------------------------------------- kernel builder -------------------------------------

class _KernelBuilder:
    def __init__(self, shape, reduce_dims, position):
        self.shape = tuple(shape)
        self.reduce_dims = tuple(reduce_dims)
        self.position = position
        self.inputs: list = []          # buffer names
        self.input_avals: list = []
        self.outputs: list = []
        self.output_avals: list = []
        self.iparams: list = [int(n) for n in self.shape]
        self.labels: list = [f"extent {d}" for d in range(len(self.shape))]
        self.fparams: list = []
        self.fparam_dtypes: list = []
        self.stores: list = []
        self.reductions: list = []
        self.n_acc = 0
        self.produced: dict = {}        # var -> Expr of its element (store roots)
        self.reduced_outs: set = set()
        self.texts: list = []

    @property
    def ndim(self):
        return len(self.shape)

    def identity(self):
        return tuple(LoopIndex(d) for d in range(self.ndim))

    def snapshot(self):
        return (len(self.inputs), len(self.iparams), len(self.fparams), len(self.stores),
                len(self.reductions), len(self.outputs), self.n_acc, dict(self.produced),
                set(self.reduced_outs), len(self.texts), self.reduce_dims)

    def rollback(self, s):
        (ni, nip, nfp, ns, nr, no, nacc, produced, reduced, nt, rdims) = s
        del self.inputs[ni:], self.input_avals[ni:]
        del self.iparams[nip:], self.labels[nip:]
        del self.fparams[nfp:], self.fparam_dtypes[nfp:]
        del self.stores[ns:], self.reductions[nr:]
        del self.outputs[no:], self.output_avals[no:]
        del self.texts[nt:]
        self.n_acc, self.produced, self.reduced_outs = nacc, produced, reduced
        self.reduce_dims = rdims

    def new_iparam(self, value, label):
        self.iparams.append(int(value))
        self.labels.append(label)
        return IParam(len(self.iparams) - 1, label)

    def load(self, buffer, aval, index):
        try:
            k = self.inputs.index(buffer)
        except ValueError:
            self.inputs.append(buffer)
            self.input_avals.append(aval)
            k = len(self.inputs) - 1
        return Load(k, tuple(index), aval.dtype)

    def add_output(self, buffer, aval):
        self.outputs.append(buffer)
        self.output_avals.append(aval)
        return len(self.outputs) - 1

    def finish(self):
        kept = [d for d in range(self.ndim) if d not in self.reduce_dims]
        rd = self.reduce_dims
        unit = tuple(d for d, n in enumerate(self.shape) if n == 1)
        pairwise = any(r.summands for r in self.reductions)
        run = ir.reduce_run(self.ndim, rd, unit) if pairwise else ()
        outer = bool(rd) and rd != tuple(range(self.ndim - len(rd), self.ndim))
        if run:
            # prange over the outermost loop outside the run when it is kept (its
            # iterations write disjoint outputs), or in chunks of the run's recursion
            rest = [d for d in range(self.ndim) if d not in unit and d not in run]
            kept = rest[:1] if rest and rest[0] not in rd else []
            outer = bool(rest) and not kept      # a reduced outermost loop: serial
        elif outer:   # prange only over a leading kept dim (accumulators indexed by it)
            kept = [0] if 0 not in rd else []
        # a reduction over everything runs its parallel variant in chunks when every
        # reduction can merge partial results in any grouping (pairwise sums: in the
        # grouping of their recursion)
        chunked = bool(self.reductions) and not kept and self.ndim > 0 and not outer and \
            all(r.merge and (run or not r.summands) for r in self.reductions)
        k = Kernel(inputs=tuple(KernelArg(np.dtype(a.dtype), len(a.shape))
                                for a in self.input_avals),
                   outputs=tuple(KernelArg(np.dtype(a.dtype), len(a.shape))
                                 for a in self.output_avals),
                   ndim=self.ndim, reduce_dims=self.reduce_dims, stores=tuple(self.stores),
                   reductions=tuple(self.reductions), n_iparams=len(self.iparams),
                   fparam_dtypes=tuple(self.fparam_dtypes),
                   parallel_dim=kept[0] if kept else (0 if chunked else None),
                   param_labels=tuple(self.labels), chunked=chunked, unit_dims=unit,
                   run_elements=int(np.prod([self.shape[d] for d in run], dtype=np.int64))
                   if run else 0)
        return KernelStep(k, tuple(self.inputs), tuple(self.outputs), tuple(self.iparams),
                          tuple(self.fparams), "\n".join(self.texts))


# --------------------------------------- the pass ----------------------------------------

class _Fuser(StructuredContext):
    def __init__(self, closed):
        self.closed = closed
        self.jaxpr = closed.jaxpr
        self.buffers: dict = {}
        self.names: dict = {}           # var -> buffer name
        self.steps: list = []           # KernelBuilder | LibraryCall | HostStep
        self.step_of: dict = {}         # buffer name -> step position
        self.consts: list = []
        self.namer = _Namer()
        self.producer: dict = {}
        self.kind: dict = {}
        self.cost: dict = {}
        self.origin: dict = {}

    # -- buffers --
    def _new_buffer(self, aval, prefix="b"):
        name = f"{prefix}{len(self.buffers)}"
        self.buffers[name] = aval
        return name

    def buffer_of(self, var):
        return self.names[var]

    def _literal_buffer(self, lit):
        name = self._new_buffer(lit.aval, "c")
        self.consts.append((name, np.asarray(lit.val, dtype=lit.aval.dtype)))
        return name

    # -- StructuredContext --
    def library_call(self, name, kind, ins, out_avals, **static):
        if not isinstance(kind, str):
            raise TypeError(f"library_call({name!r}): kind must be a string naming the "
                            f"operation (got {type(kind).__name__})")
        in_avals = tuple(self.buffers[i] for i in ins)
        outs = tuple(self._new_buffer(a) for a in out_avals)
        step = LibraryCall(name, kind, tuple(ins), outs, tuple(sorted(static.items())),
                           in_avals, tuple(out_avals), self._current_text)
        for o in outs:
            self.step_of[o] = len(self.steps)
        self.steps.append(step)
        return list(outs)

    def lower_subjaxpr(self, closed_jaxpr):
        from lowering import pipeline    # (pipeline imports this module)
        with loop_body():
            return pipeline.lower(closed_jaxpr)

    # -- main --
    def run(self) -> Program:
        jaxpr = self.jaxpr
        for v in jaxpr.constvars + jaxpr.invars:
            self.namer.decl(v)
        for eqn in jaxpr.eqns:
            text = _eqn_text(eqn, self.namer)
            for v in eqn.outvars:
                self.producer[v] = eqn
                self.origin[v] = text
        consts = []
        for v, c in zip(jaxpr.constvars, self.closed.consts):
            self.names[v] = self._new_buffer(v.aval, "c")
            consts.append((self.names[v], np.asarray(c)))
        invars = []
        for v in jaxpr.invars:
            self.names[v] = self._new_buffer(v.aval, "a")
            invars.append(self.names[v])
        self.consts = consts
        self._classify()
        self._decide_materialized()
        for eqn in jaxpr.eqns:
            self._lower_eqn(eqn)
        steps = [s.finish() if isinstance(s, _KernelBuilder) else s for s in self.steps]
        outvars = []
        for a in jaxpr.outvars:
            if isinstance(a, Literal):
                outvars.append(("lit", np.asarray(a.val, dtype=a.aval.dtype)))
            else:
                outvars.append(self.names[a])
        return Program(tuple(invars), tuple(self.consts), tuple(outvars),
                       tuple(v.aval for v in jaxpr.outvars), self.buffers, steps, self.closed,
                       {b: v for v, b in self.names.items()})

    def _classify(self):
        for eqn in self.jaxpr.eqns:
            kind, cost = _classify_eqn(eqn)
            self.kind[id(eqn)] = kind
            for v in eqn.outvars:
                self.cost[v] = cost

    def _decide_materialized(self):
        jaxpr = self.jaxpr
        mat = set(jaxpr.constvars) | set(jaxpr.invars)
        mat |= {v for v in jaxpr.outvars if isinstance(v, Var)}
        consumers: dict = {}
        expanding: set = set()
        for eqn in jaxpr.eqns:
            kind = self.kind[id(eqn)]
            if kind not in ("scalar", "remap"):
                mat.update(eqn.outvars)
            for a in eqn.invars:
                if not isinstance(a, Var):
                    continue
                consumers.setdefault(a, set()).add(id(eqn))
                if kind in ("structured", "host"):
                    mat.add(a)
            if eqn.primitive.name == "broadcast_in_dim" and isinstance(eqn.invars[0], Var):
                if eqn.outvars[0].aval.size > eqn.invars[0].aval.size:
                    expanding.add(eqn.invars[0])
        # recompute cost through unmaterialized producers, in program order
        total: dict = {}
        for eqn in jaxpr.eqns:
            if self.kind[id(eqn)] not in ("scalar", "remap"):
                continue
            c = self.cost[eqn.outvars[0]] + sum(
                total.get(a, 0) for a in eqn.invars if isinstance(a, Var) and a not in mat)
            v = eqn.outvars[0]
            total[v] = c
            if v in mat:
                continue
            if (len(consumers.get(v, ())) > 1 and c > RECOMPUTE_COST) or \
                    (v in expanding and c > 1) or _is_view_of(eqn, mat):
                mat.add(v)
        self.materialized = mat

    # -- one equation --
    def _lower_eqn(self, eqn):
        kind = self.kind[id(eqn)]
        text = self.origin[eqn.outvars[0]] if eqn.outvars else eqn.primitive.name
        self._current_text = text
        if kind in ("scalar", "remap"):
            (v,) = eqn.outvars
            if v in self.materialized:
                if not self._try_view(eqn, v):
                    self._add_store_root(v)
            return
        if kind == "reduction":
            self._add_reduction_root(eqn)
            return
        ins = []
        for a in eqn.invars:
            ins.append(self._literal_buffer(a) if isinstance(a, Literal) else self.names[a])
        in_avals = [a.aval for a in eqn.invars]
        out_avals = [v.aval for v in eqn.outvars]
        if kind == "structured":
            outs = lowering_rules[eqn.primitive](self, in_avals, out_avals, *ins,
                                                 **eqn.params)
            for v, o in zip(eqn.outvars, outs):
                self.names[v] = o
            return
        outs = tuple(self._new_buffer(v.aval) for v in eqn.outvars)
        for v, o in zip(eqn.outvars, outs):
            self.names[v] = o
            self.step_of[o] = len(self.steps)
        self.steps.append(HostStep(eqn.primitive, tuple(sorted(eqn.params.items())),
                                   tuple(ins), outs, text))

    def _try_view(self, eqn, v) -> bool:
        """A row-major reshape of a materialized array is a view (no kernel, no copy); so
        are broadcasts that only add unit dims and transposes that only move them."""
        x = eqn.invars[0] if eqn.invars else None
        if not isinstance(x, Var) or x not in self.materialized:
            return False
        name = eqn.primitive.name
        out = v.aval
        unit_transpose = name == "transpose" and [
            p for p in eqn.params["permutation"] if x.aval.shape[p] != 1] == sorted(
            p for p in eqn.params["permutation"] if x.aval.shape[p] != 1)
        if name == "reshape" or unit_transpose or (
                name == "broadcast_in_dim" and x.aval.size == out.size):
            shape = tuple(out.shape)
            buf = self.library_call(f"view {name} -> {out.str_short()}", "reshape_view",
                                    [self.names[x]], [out], shape=shape)[0]
            self.names[v] = buf
            return True
        return False

    # -- roots --
    def _candidates(self, shape, reduce_dims):
        for pos in range(len(self.steps) - 1, -1, -1):
            s = self.steps[pos]
            if isinstance(s, _KernelBuilder) and s.shape == tuple(shape) and \
                    (not s.reductions or not reduce_dims or s.reduce_dims == tuple(reduce_dims)):
                yield s

    def _place(self, shape, reduce_dims, build):
        """Run ``build(kb)`` on the latest compatible kernel that accepts it, else on a
        new kernel."""
        for kb in self._candidates(shape, reduce_dims):
            snap = kb.snapshot()
            try:
                build(kb)
                return kb
            except _Conflict:
                kb.rollback(snap)
        kb = _KernelBuilder(shape, reduce_dims, len(self.steps))
        self.steps.append(kb)
        build(kb)
        return kb

    def _add_store_root(self, v):
        def build(kb):
            memo: dict = {}
            e = self._value(kb, v, kb.identity(), memo, root=True)
            name = self._new_buffer(v.aval)
            out = kb.add_output(name, v.aval)
            kb.stores.append(Store(out, e))
            kb.produced[v] = e
            kb.texts.append(self.origin[v])
            self.names[v] = name
            self.step_of[name] = kb.position

        self._place(v.aval.shape, (), build)

    def _add_reduction_root(self, eqn):
        x = eqn.invars[0]
        in_avals = [a.aval for a in eqn.invars]
        out_avals = [o.aval for o in eqn.outvars]
        text = self.origin[eqn.outvars[0]]
        # (the axes only: operands read as placeholders)
        axes_ctx = ExprContext(in_avals, out_avals, text, lambda v, l: IParam(0, l),
                               lambda k: Const(python_scalar(0, in_avals[k].dtype),
                                               np.dtype(in_avals[k].dtype)))
        spec = reduction_rules[eqn.primitive](axes_ctx, *in_avals, **eqn.params)
        shape = x.aval.shape
        axes = tuple(sorted(spec.axes))

        def build(kb):
            if kb.reductions and kb.reduce_dims != axes:
                raise _Conflict()
            if not kb.reductions:
                kb.reduce_dims = axes
            memo: dict = {}
            idx = kb.identity()

            def read(k):
                a = eqn.invars[k]
                if isinstance(a, Literal):
                    return self._literal(kb, a)
                if a.aval.shape not in ((), x.aval.shape):
                    raise ValueError(f"reduction rule of {eqn.primitive.name} read operand "
                                     f"{k} ({a.aval.str_short()}), neither rank 0 nor of "
                                     f"the reduced operand's shape {x.aval.shape}")
                return self._value(kb, a, idx, memo)

            ctx = ExprContext(in_avals, out_avals, text, kb.new_iparam, read)
            val = read(0)
            base = kb.n_acc
            accs = [AccRef(base + j, np.dtype(dt)) for j, dt in enumerate(spec.acc_dtypes)]
            spec2 = reduction_rules[eqn.primitive](ctx, *in_avals, **eqn.params)
            combine = spec2.combine(ctx, accs, val, idx)
            outs = []
            for o in eqn.outvars:
                name = self._new_buffer(o.aval)
                outs.append(kb.add_output(name, o.aval))
                self.names[o] = name
                self.step_of[name] = kb.position
                kb.reduced_outs.add(o)
            if spec2.finals is not None:
                finals = spec2.finals(ctx, accs)
            else:
                finals = [accs[r] for r in spec2.results]
            merge = ()
            if spec2.merge is not None:
                parts = [PartRef(base + j, np.dtype(dt))
                         for j, dt in enumerate(spec2.acc_dtypes)]
                merge = tuple(spec2.merge(ctx, accs, parts))
            summands = tuple(spec2.summand(ctx, val)) if spec2.summand is not None else ()
            kinds = {np.dtype(e.dtype).kind for r in kb.reductions for e in r.summands} | \
                {np.dtype(e.dtype).kind for e in summands}
            if len(kinds) > 1:   # complex and real pairwise sums split runs differently
                raise _Conflict()
            kb.reductions.append(Reduction(tuple(outs), tuple(spec2.init), tuple(combine),
                                           tuple(np.dtype(d) for d in spec2.acc_dtypes),
                                           tuple(finals), text, merge, summands,
                                           spec2.round_dtype))
            kb.n_acc += len(spec2.acc_dtypes)
            kb.texts.append(text)

        self._place(shape, axes, build)

    # -- expressions --
    def _literal(self, kb, lit):
        dt = np.dtype(lit.aval.dtype)
        val = python_scalar(np.asarray(lit.val), dt)
        if dt.kind == "f" and not (math.isnan(val) or math.isinf(val) or val in BAKED_FLOATS):
            kb.fparams.append(float(val))
            kb.fparam_dtypes.append(dt)
            return FParam(len(kb.fparams) - 1, dt)
        return Const(val, dt)

    def _value(self, kb, var, idx, memo, root=False):
        """The scalar Expr of ``var`` at index ``idx`` inside kernel ``kb``."""
        if isinstance(var, Literal):
            return self._literal(kb, var)
        if len(var.aval.shape) == 0:
            idx = ()
        key = (var, idx)
        hit = memo.get(key)
        if hit is not None:
            return hit
        if var in kb.produced:
            if idx != kb.identity():
                raise _Conflict()
            return kb.produced[var]
        if var in kb.reduced_outs:
            raise _Conflict()
        if var in self.materialized and not root:
            name = self.names[var]
            pos = self.step_of.get(name, -1)
            if pos >= kb.position:
                raise _Conflict()
            e = kb.load(name, var.aval, idx)
        else:
            e = self._expand(kb, self.producer[var], idx, memo)
        memo[key] = e
        return e

    def _expand(self, kb, eqn, idx, memo):
        prim = eqn.primitive
        in_avals = [a.aval for a in eqn.invars]
        out_avals = [v.aval for v in eqn.outvars]
        ctx = ExprContext(in_avals, out_avals, self.origin[eqn.outvars[0]], kb.new_iparam)
        out_rank = len(out_avals[0].shape)
        if self.kind[id(eqn)] == "scalar":
            args = [self._value(kb, a, idx if len(a.aval.shape) == out_rank else (), memo)
                    for a in eqn.invars]
            e = _apply_scalar(prim, ctx, args, eqn.params)
        else:
            ops = [Operand(a.aval, (lambda index, a=a: self._value(kb, a, index, memo)), ctx,
                           f"operand {k}") for k, a in enumerate(eqn.invars)]
            e = remap_rules[prim](ctx, idx, *ops, **eqn.params)
        if e.dtype != out_avals[0].dtype:
            raise TypeError(f"lowering rule of {prim.name} built a {e.dtype} expression for "
                            f"output {out_avals[0].str_short()}")
        return e


def _is_view_of(eqn, mat) -> bool:
    """A reshape of an array that exists anyway is a free view: its consumers then read
    the view with plain indices (no div/mod index algebra)."""
    x = eqn.invars[0] if eqn.invars else None
    return (eqn.primitive.name == "reshape" and isinstance(x, Var) and x in mat)


def fuse(closed) -> Program:
    """The Program of an optimized ClosedJaxpr (see the module docstring)."""
    return _Fuser(closed).run()
