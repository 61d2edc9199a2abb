"""vmap: the batching interpreter.

A ``BatchTracer`` holds a value and the axis of it that is the batch axis (``bdim``), or
``not_mapped`` (None) when the value is the same for every batch member. Rules:

    primitive_batchers[p](axis_size, vals_in, dims_in, **params) -> (vals_out, dims_out)

with lists on both sides. Family helpers: ``defvectorized`` (element-wise unary ops: the
bdim passes through), ``defbroadcasting`` (n-ary element-wise ops with NumPy-style
broadcasting: unmapped operands are not broadcast), ``defreducer`` (ops with an ``axes``
param).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from tracer.core import Trace, Tracer, full_lower, full_raise, get_aval, new_main

not_mapped = None
primitive_batchers: dict = {}
# Rules that also need the axis name (collectives): p -> rule(axis_data, vals, dims, **params)
axis_primitive_batchers: dict = {}


class AxisData:
    __slots__ = ("size", "name")

    def __init__(self, size, name):
        self.size = size
        self.name = name


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
        if all(d is not_mapped for d in dims_in):
            outs = primitive.bind(*vals_in, **params)
            outs = outs if primitive.multiple_results else [outs]
            return [BatchTracer(self, o, not_mapped) for o in outs]
        axis_rule = axis_primitive_batchers.get(primitive)
        if axis_rule is not None:
            vals_out, dims_out = axis_rule(self.axis_data, vals_in, dims_in, **params)
        else:
            rule = primitive_batchers.get(primitive)
            if rule is None:
                raise NotImplementedError(f"Batching rule for '{primitive.name}' not "
                                          "implemented")
            vals_out, dims_out = rule(self.axis_data.size, vals_in, dims_in, **params)
        return [BatchTracer(self, x, d) for x, d in zip(vals_out, dims_out)]


def vmap_flat(f: Callable, axis_size: int, axis_name, in_dims, args, out_dims_fn=None):
    """Batch ``f`` over flat ``args`` with batch axes ``in_dims`` (None: not mapped).
    Returns (outs, out_dims) as the rules left them."""
    with new_main(BatchTrace, AxisData(axis_size, axis_name)) as main:
        trace = BatchTrace(main)
        tracers_in = [BatchTracer(trace, x, d) if d is not not_mapped else x
                      for x, d in zip(args, in_dims)]
        outs = f(*tracers_in)
        tracers_out = [full_raise(trace, o) for o in outs]
        vals_out = [t.val for t in tracers_out]
        dims_out = [t.batch_dim for t in tracers_out]
    return vals_out, dims_out


# --------------------------- helpers shared by batching rules ----------------------------

def _lax():
    import lax  # deferred: lax registers its rules here (JAX defers this import too)
    return lax


def moveaxis(x, src: int, dst: int):
    """Move axis ``src`` of ``x`` to position ``dst`` (a transpose, no copy in NumPy)."""
    ndim = np.ndim(x) if not hasattr(x, "aval") else x.aval.ndim
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
    """Insert a new axis of length ``size`` at ``axis`` (a broadcast_in_dim)."""
    aval = get_aval(x)
    shape = list(aval.shape)
    axis = axis % (len(shape) + 1)
    shape.insert(axis, size)
    dims = tuple(i for i in range(len(shape)) if i != axis)
    return _lax().broadcast_in_dim(x, tuple(shape), dims)


def matchaxis(size, src, dst, x):
    """``x`` with batch axis ``src`` moved (or broadcast) to ``dst``."""
    if src == dst:
        return x
    if src is not_mapped:
        return broadcast(x, size, dst)
    if dst is not_mapped:
        raise ValueError("cannot unbatch a mapped value")
    return moveaxis(x, src, dst)


def defvectorized(primitive):
    """Element-wise unary primitive: batched value in, same bdim out."""

    def rule(axis_size, vals, dims, **params):
        (x,), (d,) = vals, dims
        out = primitive.bind(x, **params)
        outs = out if primitive.multiple_results else [out]
        return outs, [d] * len(outs)

    primitive_batchers[primitive] = rule
    return rule


def defbroadcasting(primitive):
    """Element-wise n-ary primitive whose operands share a shape, rank-0 operands
    broadcasting. Unmapped scalars stay scalars; other unmapped operands are broadcast
    along the batch axis; mapped operands get a common batch axis."""

    def rule(axis_size, vals, dims, **params):
        ranks = [get_aval(v).ndim - (d is not not_mapped) for v, d in zip(vals, dims)]
        full_rank = builtins_max(ranks)
        mapped = [d for d in dims if d is not not_mapped]
        out_dim = mapped[0] if all(d == mapped[0] for d in mapped) else 0
        if full_rank == 0:
            out_dim = 0
        args = []
        full_shape = None
        for v, d, r in zip(vals, dims, ranks):
            if d is not_mapped and r == 0:
                args.append(v)          # an unmapped scalar broadcasts by itself
            elif r == 0 and full_rank > 0:
                args.append((v, d))     # a mapped scalar: broadcast below
            else:
                v = matchaxis(axis_size, d, out_dim, v)
                full_shape = get_aval(v).shape
                args.append(v)
        if full_shape is None:
            full_shape = (axis_size,) if full_rank == 0 else None
        args = [_lax().broadcast_in_dim(a[0], full_shape, (out_dim,)) if type(a) is tuple else a
                for a in args]
        out = primitive.bind(*args, **params)
        outs = out if primitive.multiple_results else [out]
        return outs, [out_dim] * len(outs)

    primitive_batchers[primitive] = rule
    return rule


builtins_max = max


def defreducer(primitive):
    """Primitive with an ``axes`` param reducing over those axes of its one operand."""

    def rule(axis_size, vals, dims, *, axes, **params):
        (x,), (d,) = vals, dims
        axes = tuple(a + (a >= d) for a in axes)
        out = primitive.bind(x, axes=axes, **params)
        out_dim = d - sum(a < d for a in axes)
        outs = out if primitive.multiple_results else [out]
        return outs, [out_dim] * len(outs)

    primitive_batchers[primitive] = rule
    return rule
