"""Meshes, partition specs and ``shard_map`` over the process devices (jax.sharding.Mesh,
jax.sharding.PartitionSpec, jax.shard_map), for SPMD programs over MPI processes.

``shard_map(f, mesh, in_specs, out_specs)`` runs ``f`` once per device of ``mesh`` on
that device's shard; collectives over the mesh's axis name inside ``f`` span the devices
of every process (the same two-stage collectives as ``pmap``: the local devices through
vmap's batched primitives, then the processes through MPI; lax/mpi.py).

How it differs from JAX: JAX's arguments are *global* arrays (sharded by jax.Array).
tracer has no global arrays: **each process passes its own shard**, the blocks of its
local devices concatenated along each sharded dimension, and gets its own shard of the
outputs back. With one process the local shard is the whole array, so ``shard_map``
computes exactly what JAX's does (``TRACER_NUM_CPU_DEVICES`` sets the device count). A
dimension partitioned over the mesh axis must be divisible by the local device count;
replicated inputs (``PartitionSpec()``) are passed whole to every device, and a
replicated output (``PartitionSpec()``) must not vary over the axis (e.g. the result of
a ``psum``), as JAX's replication check requires.

Meshes are over every device of the job, in ``tracer.devices()`` order (a reshape of
it). A 1-D mesh works with any number of devices per process. A mesh of rank 2 or more
(``Mesh(devices.reshape(2, 2), ('data', 'model'))``) works on one process (all its axes
local) or with one device per process: then each mesh axis is an MPI sub-communicator
(``MPI_Comm_split`` of the processes that differ only in that axis's coordinate), so a
collective over 'model' talks only to the processes of its data row. Each mesh axis is a
nested vmap (the first axis outermost); a spec may partition a dimension over several
axes (``PartitionSpec(('data', 'model'))``, major to minor).
"""
from __future__ import annotations

import collections
import functools

import numpy as np

__all__ = ["Mesh", "PartitionSpec", "P", "shard_map"]


class PartitionSpec:
    """How each dimension of an array is partitioned over mesh axes
    (jax.sharding.PartitionSpec): one entry per leading dimension, each a mesh axis
    name, a tuple of names, or None (not partitioned); missing trailing entries are
    None. ``PartitionSpec()`` is fully replicated. A pytree leaf (so specs can be given
    as a pytree prefix of the arguments)."""

    __slots__ = ("parts",)

    def __init__(self, *parts):
        self.parts = tuple(parts)

    def __iter__(self):
        return iter(self.parts)

    def __len__(self):
        return len(self.parts)

    def __getitem__(self, i):
        return self.parts[i]

    def __eq__(self, other):
        return isinstance(other, PartitionSpec) and other.parts == self.parts

    def __hash__(self):
        return hash((PartitionSpec, self.parts))

    def __repr__(self):
        return f"PartitionSpec({', '.join(map(repr, self.parts))})"


P = PartitionSpec


class Mesh:
    """An array of devices with named axes (jax.sharding.Mesh): ``Mesh(devices,
    axis_names)``, ``devices`` an array-like of ``tracer.devices()`` entries whose rank
    is ``len(axis_names)``. ``.shape`` (an OrderedDict name -> size), ``.axis_names``,
    ``.size``, ``.devices`` (an object array). ValueError for a rank / name-count
    mismatch, repeated names or repeated devices."""

    def __init__(self, devices, axis_names):
        if isinstance(axis_names, str):
            axis_names = (axis_names,)
        axis_names = tuple(axis_names)
        arr = np.empty(np.shape(devices), dtype=object)
        arr[...] = devices if np.ndim(devices) else [devices]
        if arr.ndim != len(axis_names):
            raise ValueError(f"Mesh: devices of shape {arr.shape} (rank {arr.ndim}) need "
                             f"{arr.ndim} axis names, got {axis_names}")
        if len(set(axis_names)) != len(axis_names):
            raise ValueError(f"Mesh: repeated axis names {axis_names}")
        ids = [getattr(d, "id", None) for d in arr.flat]
        if None in ids or len(set(ids)) != len(ids):
            raise ValueError(f"Mesh: devices must be distinct entries of tracer.devices(), "
                             f"got {list(arr.flat)}")
        self.devices = arr
        self.axis_names = axis_names
        self.shape = collections.OrderedDict(zip(axis_names, arr.shape))
        self.size = arr.size

    def __repr__(self):
        return f"Mesh({', '.join(f'{n!r}: {s}' for n, s in self.shape.items())})"


def _spec_axes(spec, names, ndim, what, fname):
    """For each dimension of an array of rank ``ndim``, the mesh axes ``spec``
    partitions it over (in the spec's order; [] for a dimension not partitioned)."""
    if not isinstance(spec, PartitionSpec):
        raise TypeError(f"{fname}: {what} must be a PartitionSpec, got {spec!r}")
    if len(spec) > ndim:
        raise ValueError(f"{fname}: {what} {spec} has {len(spec)} entries, more than the "
                         f"rank {ndim} of the array")
    out, seen = [], set()
    for k in range(ndim):
        part = spec[k] if k < len(spec) else None
        axes = [n for n in (part if isinstance(part, tuple) else (part,)) if n is not None]
        for n in axes:
            if n not in names:
                raise ValueError(f"{fname}: {what} {spec} names mesh axis {n!r}; the mesh's "
                                 f"axes are {names}")
            if n in seen:
                raise ValueError(f"{fname}: {what} {spec} uses mesh axis {n!r} twice")
            seen.add(n)
        out.append(axes)
    return out


def _mesh_groups(mesh, w):
    """Per mesh axis: (local size, ProcessGroup or None). One process holds the whole
    mesh (every axis local, no MPI); one device per process makes every axis a
    sub-communicator of the processes that differ only in that axis's coordinate
    (MPI_Comm_split, made once per mesh: every process creates them together)."""
    from tracer.distributed import ProcessGroup
    if w.size == 1:
        return [(n, None) for n in mesh.devices.shape]
    if len(mesh.axis_names) == 1:
        return [(w.local_size, w)]
    if w.local_size != 1:
        raise NotImplementedError(
            f"shard_map: a mesh of rank {len(mesh.axis_names)} over several processes needs "
            f"one device per process (this process has {w.local_size}); unset "
            "TRACER_NUM_CPU_DEVICES or use a 1-D mesh")
    cached = getattr(mesh, "_groups", None)
    if cached is not None:
        return cached
    shape = mesh.devices.shape
    coords = np.unravel_index(w.rank, shape)
    groups = []
    for j, size in enumerate(shape):
        rest = [c for i, c in enumerate(coords) if i != j]
        color = int(np.ravel_multi_index(rest, [s for i, s in enumerate(shape) if i != j])) \
            if rest else 0
        sub = w.comm.Split(color, int(coords[j]))
        groups.append((1, ProcessGroup(sub, int(coords[j]), size, 1)))
    mesh._groups = groups
    return groups


def _out_axes_tree(specs, fname):
    """out_specs with each PartitionSpec kept as a leaf (for broadcast_prefix)."""
    if isinstance(specs, PartitionSpec):
        return specs
    if isinstance(specs, (tuple, list)):
        return type(specs)(_out_axes_tree(s, fname) for s in specs)
    if isinstance(specs, dict):
        return {k: _out_axes_tree(v, fname) for k, v in specs.items()}
    raise TypeError(f"{fname}: out_specs must be a PartitionSpec or a tuple / list / dict "
                    f"of them, got {specs!r}")


def shard_map(f=None, mesh=None, in_specs=None, out_specs=None, *, check_vma=True,
              check_rep=None, axis_names=frozenset()):
    """Map ``f`` over the shards of its arguments on the devices of ``mesh``
    (jax.shard_map; see the module docstring for the per-process shards). Usable as
    ``shard_map(f, mesh, in_specs, out_specs)``, with keywords, or as a decorator
    ``@partial(shard_map, mesh=..., in_specs=..., out_specs=...)``.

    - ``mesh``: a ``Mesh`` of every device of the job, in ``tracer.devices()`` order.
    - ``in_specs``: a PartitionSpec, or a pytree of them that is a prefix of the
      positional arguments (a tuple with one entry per argument). A dimension
      partitioned over the mesh axis is split into one block per local device.
    - ``out_specs``: likewise for the output; blocks are concatenated along the
      partitioned dimension; a replicated output must not vary over the axis.
    - ``check_vma`` / ``check_rep`` / ``axis_names``: accepted for compatibility (the
      vmap machinery itself rejects a replicated output that varies).

    Raises NotImplementedError for a mesh that is not every device in order, or of rank
    > 1 over several processes with several devices each; ValueError for a partitioned
    dimension not divisible by its devices here, a spec naming an unknown axis or one
    axis twice, or a replicated output that varies; TypeError for specs that are not
    PartitionSpecs."""
    if f is None:
        return functools.partial(shard_map, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                                 check_vma=check_vma, check_rep=check_rep,
                                 axis_names=axis_names)
    from tracer import api, distributed
    from tracer.core import Tracer, get_aval
    from tracer.pytree import broadcast_prefix, tree_flatten, tree_unflatten
    from tracer.interpreters import batching
    from lax import mpi
    from lax.shapes import reshape, transpose
    fname = f"shard_map({getattr(f, '__name__', 'f')})"
    if not isinstance(mesh, Mesh):
        raise TypeError(f"{fname}: mesh must be a tracer.sharding.Mesh, got {mesh!r}")
    if in_specs is None or out_specs is None:
        raise TypeError(f"{fname}: in_specs and out_specs are required")
    names = mesh.axis_names
    out_tree_specs = _out_axes_tree(out_specs, fname)

    @functools.wraps(f)
    def wrapped(*args):
        w = distributed.world()
        want = [d.id for d in distributed.devices()]
        if [d.id for d in mesh.devices.flat] != want:
            raise NotImplementedError(
                f"{fname}: the mesh's devices {[d.id for d in mesh.devices.flat]} must be "
                f"every device of the job in order ({want}, tracer.devices())")
        groups = _mesh_groups(mesh, w)
        local = dict(zip(names, (n for n, _ in groups)))
        leaves, tree = tree_flatten(args)
        specs = broadcast_prefix(tuple(in_specs) if isinstance(in_specs, list) else in_specs,
                                 args)
        # Each leaf: every partitioned dim k split into (local size of each of its mesh
        # axes..., block), then those axes moved to the front in mesh-axis order, so that
        # the nested vmaps (one per mesh axis, outermost first) each map axis 0.
        split, mapped = [], []
        for i, (x, spec) in enumerate(zip(leaves, specs)):
            x = api._as_array(x)
            shape = get_aval(x).shape
            per_dim = _spec_axes(spec, names, len(shape), f"in_specs entry for argument "
                                 f"leaf {i}", fname)
            new_shape, lead, rest = [], {}, []
            for k, axes in enumerate(per_dim):
                n = int(np.prod([local[m] for m in axes])) if axes else 1
                if shape[k] % n:
                    raise ValueError(
                        f"{fname}: argument leaf {i} of shape {shape} is partitioned along "
                        f"dimension {k} over mesh axes {axes} ({n} devices here), but "
                        f"{shape[k]} is not divisible by {n}")
                for m in axes:
                    lead[m] = len(new_shape)
                    new_shape.append(local[m])
                rest.append(len(new_shape))
                new_shape.append(shape[k] // n)
            order = [m for m in names if m in lead]
            x = reshape(x, tuple(new_shape))
            x = transpose(x, tuple(lead[m] for m in order) + tuple(rest))
            split.append(x)
            mapped.append(set(order))

        out_specs_flat, out_tree = [], []

        def innermost(*xs):
            out = f(*tree_unflatten(tree, list(xs)))
            o_leaves, o_tree = tree_flatten(out)
            o_specs = broadcast_prefix(out_tree_specs, out)
            out_tree[:] = [o_tree]
            out_specs_flat[:] = [
                _spec_axes(sp, names, get_aval(o).ndim, f"out_specs entry for output leaf "
                           f"{i}", fname) for i, (o, sp) in enumerate(zip(o_leaves, o_specs))]
            return o_leaves

        def make_level(inner, name, in_dims, size, group):
            # vmap over mesh axis ``name``: the leaves partitioned over it are mapped
            # along their axis 0 (at this level); outputs partitioned over it get its
            # axis first, replicated ones must not vary over it (JAX's replication check)
            cross = group is not None and group.size > 1
            def level(*xs):
                if cross:   # inputs not split over this axis: one value on every process
                    xs = [mpi.replicated_in(x, group) if d is None and isinstance(x, Tracer)
                          else x for x, d in zip(xs, in_dims)]
                outs, dims = batching.vmap_flat(inner, size, name, in_dims, list(xs), group)
                res = []
                for i, (o, d) in enumerate(zip(outs, dims)):
                    if any(name in axes for axes in out_specs_flat[i]):
                        res.append(batching.matchaxis(size, d, 0, o))
                    elif d is not None:
                        raise ValueError(
                            f"{fname}: output leaf {i} varies over mesh axis {name!r}, but "
                            f"its out_specs entry does not partition it over {name!r} "
                            "(replicated outputs must be the same on every device: reduce "
                            "them with psum/pmean first, or partition them)")
                    elif cross and isinstance(o, Tracer):
                        res.append(mpi.replicated_out(o, group))   # (lax/mpi.py)
                    else:
                        res.append(o)
                return res
            return level

        fun = innermost
        for j in reversed(range(len(names))):     # the innermost mesh axis first
            fun = make_level(fun, names[j], [0 if names[j] in m else None for m in mapped],
                             *groups[j])
        o_leaves = fun(*split)
        merged = []
        for o, per_dim in zip(o_leaves, out_specs_flat):
            order = [m for m in names if any(m in axes for axes in per_dim)]
            q = len(order)
            shape = get_aval(o).shape
            perm, final = [], []
            for k, axes in enumerate(per_dim):
                perm += [order.index(m) for m in axes]
                perm.append(q + k)
                final.append(int(np.prod([shape[order.index(m)] for m in axes]))
                             * shape[q + k])
            if q:
                o = reshape(transpose(o, tuple(perm)), tuple(final))
            merged.append(o)
        return tree_unflatten(out_tree[0], merged)

    return wrapped
