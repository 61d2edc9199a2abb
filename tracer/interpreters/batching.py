"""vmap: the batching interpreter.

A ``BatchTracer`` holds a value and the axis of it that is the batch axis (``batch_dim``),
or ``not_mapped`` (None) when the value is the same for every batch member. Rules:

    primitive_batchers[p](axis_data, vals_in, dims_in, **params) -> (vals_out, dims_out)

with lists on both sides; ``axis_data`` is the ``AxisData`` (``.size``, ``.name``) of the
trace processing the primitive. A rule runs when at least one operand is mapped (else the
primitive is bound on the unbatched values), or always when the primitive is in
``batch_when_unmapped``. A rule may put the batch axis of its outputs wherever is
cheapest and reports where; it must not broadcast an unmapped operand unless the
primitive's shape rule requires it. Family helpers: ``defvectorized`` (element-wise unary
ops: the bdim passes through), ``defbroadcasting`` (n-ary element-wise ops: unmapped
scalars stay scalars, mapped operands keep their common bdim), ``defreducer`` (ops with an
``axes`` param).

Named axes. ``vmap(..., axis_name='i')`` records ``AxisData(size, 'i')`` on its main
trace, so collectives (``lax.psum(x, 'i')``, ``lax.axis_index('i')``) can find the
transformation that gives the name its meaning. Their rules, and those of primitives
holding sub-jaxprs (which may contain collectives), are in ``batch_when_unmapped``: they
run even when no operand is mapped (``psum`` of an unmapped value is still a sum over the
axis), and must pass primitives over other names on unchanged. ``axis_name_params`` tells
which param of a collective holds its axis names, so that primitives holding sub-jaxprs
(jit, control flow) can route themselves to the right trace (``trace_for_axes``).
"""
from __future__ import annotations

from collections import Counter
from typing import Callable

import numpy as np

from tracer import core
from tracer.core import Trace, Tracer, full_lower, full_raise, get_aval, new_main

not_mapped = None
# p -> rule(axis_data, vals, dims, **params) -> (vals_out, dims_out).
primitive_batchers: dict = {}
# Primitives whose rule runs even when no operand is mapped: collectives and primitives
# holding sub-jaxprs, whose meaning under a named vmap does not depend on mapped operands.
batch_when_unmapped: set = set()
# Collectives: p -> name of the param holding the tuple of axis names it operates over.
axis_name_params: dict = {}


class AxisData:
    """The size and (optional) name of the axis a ``BatchTrace`` maps over.

    ``group``: for a multi-process ``pmap`` axis, the ``tracer.distributed.ProcessGroup``
    the axis spans (None otherwise). ``size`` is then this process's share (its local
    devices) and ``global_size`` the whole axis (``size * group.size``): a collective over
    the axis combines the local members with the batched primitives, then the processes
    over MPI (lax/collectives.py, lax/mpi.py)."""

    __slots__ = ("size", "name", "group")

    def __init__(self, size, name, group=None):
        self.size = size
        self.name = name
        self.group = group

    @property
    def global_size(self):
        return self.size if self.group is None else self.size * self.group.size

    def __repr__(self):
        extra = "" if self.group is None else f", group={self.group!r}"
        return f"AxisData(size={self.size}, name={self.name!r}{extra})"


class BatchTracer(Tracer):
    __slots__ = ("val", "batch_dim")

    def __init__(self, trace, val, batch_dim):
        self._trace = trace
        self.val = val
        self.batch_dim = batch_dim

    @property
    def aval(self):
        aval = get_aval(self.val)
        if self.batch_dim is not_mapped:
            return aval
        shape = list(aval.shape)
        del shape[self.batch_dim]
        return aval.update(shape=tuple(shape))

    def full_lower(self):
        if self.batch_dim is not_mapped:
            return full_lower(self.val)
        return self

    def to_concrete_value(self):
        if self.batch_dim is not_mapped:
            v = self.val
            if isinstance(v, Tracer):
                return v.to_concrete_value()
            return getattr(v, "_value", v)
        return None


class BatchTrace(Trace):
    def pure(self, val):
        return BatchTracer(self, val, not_mapped)

    lift = pure

    @property
    def axis_data(self) -> AxisData:
        return self.main.global_data

    def process_primitive(self, primitive, tracers, params):
        vals_in = [t.val for t in tracers]
        dims_in = [t.batch_dim for t in tracers]
        if (primitive not in batch_when_unmapped
                and all(d is not_mapped for d in dims_in)):
            outs = primitive.bind(*vals_in, **params)
            outs = outs if primitive.multiple_results else [outs]
            return [BatchTracer(self, o, not_mapped) for o in outs]
        rule = primitive_batchers.get(primitive)
        if rule is None:
            shapes = ", ".join(t.aval.str_short() for t in tracers)
            raise NotImplementedError(
                f"vmap: batching rule for '{primitive.name}' not implemented (operands "
                f"{shapes}, batch dims {dims_in}); add one to "
                "batching.primitive_batchers beside the primitive's definition")
        vals_out, dims_out = rule(self.axis_data, vals_in, dims_in, **params)
        return [BatchTracer(self, x, d) for x, d in zip(vals_out, dims_out)]


def vmap_flat(f: Callable, axis_size: int, axis_name, in_dims, args, group=None):
    """Batch ``f`` (flat list of args -> flat list of outputs) over ``args`` with batch
    axes ``in_dims`` (None: not mapped). Returns ``(outs, out_dims)`` as the rules left
    them: an output's batch axis may be anywhere, or None when it does not depend on the
    mapped inputs. ``group``: the process group of a multi-process pmap axis
    (``AxisData.group``); rules re-batching a sub-jaxpr pass their ``axis_data.group``."""
    with new_main(BatchTrace, AxisData(axis_size, axis_name, group)) as main:
        trace = BatchTrace(main)
        tracers_in = [BatchTracer(trace, x, d) if d is not not_mapped else x
                      for x, d in zip(args, in_dims)]
        outs = f(*tracers_in)
        tracers_out = [full_raise(trace, o) for o in outs]
        vals_out = [t.val for t in tracers_out]
        dims_out = [t.batch_dim for t in tracers_out]
    return vals_out, dims_out


# ------------------------------------ named axes -----------------------------------------

def _named_mains():
    """The active vmaps with an axis name, innermost last."""
    return [m for m in core.current_trace_stack()
            if m.trace_type is BatchTrace and m.global_data.name is not None]


def bound_axis_names() -> list:
    """Names of the axes of the active vmaps, outermost first."""
    return [m.global_data.name for m in _named_mains()]


def unbound_axis_error(name, fname: str) -> NameError:
    bound = bound_axis_names()
    avail = (f"the axis names bound here are {bound}" if bound else
             "no axis name is bound here")
    return NameError(f"unbound axis name: {name!r} (used by {fname}). Collectives need an "
                     f"enclosing vmap(..., axis_name={name!r}); {avail}")


def find_axis_main(name, fname: str = "a collective"):
    """The innermost active vmap main trace named ``name``; NameError if there is none."""
    for m in reversed(_named_mains()):
        if m.global_data.name == name:
            return m
    raise unbound_axis_error(name, fname)


def axis_size(name, fname: str = "a collective") -> int:
    """The size of the mapped axis ``name`` (NameError when unbound): for a
    multi-process pmap axis, the whole axis across the processes."""
    return find_axis_main(name, fname).global_data.global_size


def trace_for_axes(args, names, fname: str, strict: bool = True):
    """The trace that must process a primitive over axis ``names`` applied to ``args``:
    the innermost of the operands' trace (or the dynamic trace) and the vmaps binding
    ``names``. With ``strict``, an unbound name raises NameError; otherwise it is ignored
    (None is returned when nothing is traced)."""
    top = core.find_top_trace(args)
    for name in names:
        try:
            m = find_axis_main(name, fname)
        except NameError:
            if strict:
                raise
            continue
        if top is None or top.main.level < m.level:
            top = BatchTrace(m)
    return top


def _sub_jaxprs(params):
    from tracer.jaxpr import ClosedJaxpr, Jaxpr
    for v in params.values():
        items = v if isinstance(v, (tuple, list)) else (v,)
        for item in items:
            if isinstance(item, ClosedJaxpr):
                yield item.jaxpr
            elif isinstance(item, Jaxpr):
                yield item


def jaxpr_axis_names(jaxpr) -> set:
    """The axis names the collectives in ``jaxpr`` (and its sub-jaxprs) operate over."""
    names: set = set()
    for eqn in jaxpr.eqns:
        pname = axis_name_params.get(eqn.primitive)
        if pname is not None:
            v = eqn.params[pname]
            names.update(v if isinstance(v, tuple) else (v,))
        for sub in _sub_jaxprs(eqn.params):
            names |= jaxpr_axis_names(sub)
    return names


def bind_with_axes(primitive, args, params, names, fname: str, strict: bool = True):
    """``primitive.bind`` that also reaches the vmaps binding ``names`` when no operand is
    traced by them (``axis_index('i')`` has no operands; ``psum(1., 'i')`` has a constant
    one)."""
    trace = trace_for_axes(args, names, fname, strict)
    if trace is None:  # nothing traced and no vmap binds the names: evaluate eagerly
        return core.Primitive.bind(primitive, *args, **params)
    return primitive.bind_with_trace(trace, args, params)


# --------------------------- helpers shared by batching rules ----------------------------

def _lax():
    import lax  # deferred: lax registers its rules here (JAX defers this import too)
    return lax


def moveaxis(x, src: int, dst: int):
    """Move axis ``src`` of ``x`` to position ``dst`` (a transpose; nothing when equal)."""
    ndim = get_aval(x).ndim
    src, dst = src % ndim, dst % ndim
    if src == dst:
        return x
    perm = [i for i in range(ndim) if i != src]
    perm.insert(dst, src)
    return _lax().transpose(x, tuple(perm))


def bdim_at_front(x, bdim, size):
    """``x`` with its batch axis first; an unmapped ``x`` is broadcast to ``size``."""
    if bdim is not_mapped:
        return broadcast(x, size, 0)
    return moveaxis(x, bdim, 0)


def broadcast(x, size: int, axis: int):
    """Insert a new axis of length ``size`` at ``axis`` (a broadcast_in_dim: a view in the
    NumPy impl, fused into its consumers when compiled)."""
    aval = get_aval(x)
    shape = list(aval.shape)
    axis = axis % (len(shape) + 1)
    shape.insert(axis, size)
    dims = tuple(i for i in range(len(shape)) if i != axis)
    return _lax().broadcast_in_dim(x, tuple(shape), dims)


def matchaxis(size, src, dst, x):
    """``x`` with batch axis ``src`` moved (or, when unmapped, broadcast) to ``dst``."""
    if src == dst:
        return x
    if src is not_mapped:
        return broadcast(x, size, dst)
    if dst is not_mapped:
        raise ValueError(f"vmap: cannot return a value batched along axis {src} "
                         f"({get_aval(x).str_short()}) as unmapped (out_axes=None)")
    return moveaxis(x, src, dst)


def defvectorized(primitive):
    """Element-wise unary primitive: batched value in, same bdim out."""

    def rule(axis_data, vals, dims, **params):
        (x,), (d,) = vals, dims
        out = primitive.bind(x, **params)
        outs = out if primitive.multiple_results else [out]
        return outs, [d] * len(outs)

    primitive_batchers[primitive] = rule
    return rule


def defbroadcasting(primitive):
    """Element-wise n-ary primitive whose operands share one shape, rank-0 operands
    broadcasting (``mul b 2.0:f32[]``).

    The output's batch axis is the one most mapped operands already have, so operands
    batched alike are passed through untouched; unmapped scalars stay scalars. Unmapped
    arrays, and mapped per-example scalars beside arrays, are broadcast (broadcast_in_dim,
    a view): the lax shape rule needs equal shapes."""

    def rule(axis_data, vals, dims, **params):
        avals = [get_aval(v) for v in vals]
        ranks = [a.ndim - (d is not not_mapped) for a, d in zip(avals, dims)]
        full_rank = _builtin_max(ranks)
        full_dims = [d for d, r in zip(dims, ranks) if d is not not_mapped and r == full_rank]
        if full_dims:
            counts = Counter(full_dims)
            out_dim = _builtin_max(full_dims, key=lambda d: (counts[d], -full_dims.index(d)))
        else:
            out_dim = 0
        # The unbatched full shape, from any full-rank operand.
        base = None
        for a, d, r in zip(avals, dims, ranks):
            if r == full_rank:
                base = list(a.shape)
                if d is not not_mapped:
                    del base[d]
                break
        full_shape = tuple(base[:out_dim]) + (axis_data.size,) + tuple(base[out_dim:])
        args = []
        for v, d, r in zip(vals, dims, ranks):
            if d is not_mapped:
                args.append(v if r == 0 else broadcast(v, axis_data.size, out_dim))
            elif r == full_rank:
                args.append(moveaxis(v, d, out_dim))
            else:
                args.append(_lax().broadcast_in_dim(v, full_shape, (out_dim,)))
        out = primitive.bind(*args, **params)
        outs = out if primitive.multiple_results else [out]
        return outs, [out_dim] * len(outs)

    primitive_batchers[primitive] = rule
    return rule


_builtin_max = max


def defreducer(primitive):
    """Primitive with an ``axes`` param reducing over those axes of its one operand: the
    batch axis is kept out of ``axes`` and stays where it is (no transpose)."""

    def rule(axis_data, vals, dims, *, axes, **params):
        (x,), (d,) = vals, dims
        axes = tuple(a + (a >= d) for a in axes)
        out = primitive.bind(x, axes=axes, **params)
        out_dim = d - sum(a < d for a in axes)
        outs = out if primitive.multiple_results else [out]
        return outs, [out_dim] * len(outs)

    primitive_batchers[primitive] = rule
    return rule
