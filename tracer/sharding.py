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

Supported: 1-D meshes over every device of the job (``Mesh(tracer.devices(), ('x',))``),
in any pytree of specs that is a prefix of the arguments / outputs. 2-D meshes (MPI
sub-communicators per mesh axis) are not implemented yet: NotImplementedError.
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


def _spec_dim(spec, name, ndim, what, fname):
    """The dimension ``spec`` partitions over the mesh axis ``name`` (None: replicated)."""
    if not isinstance(spec, PartitionSpec):
        raise TypeError(f"{fname}: {what} must be a PartitionSpec, got {spec!r}")
    if len(spec) > ndim:
        raise ValueError(f"{fname}: {what} {spec} has {len(spec)} entries, more than the "
                         f"rank {ndim} of the array")
    dims = []
    for k, part in enumerate(spec):
        names = part if isinstance(part, tuple) else (part,)
        for n in names:
            if n is None:
                continue
            if n != name:
                raise ValueError(f"{fname}: {what} {spec} names mesh axis {n!r}; the mesh's "
                                 f"axis is {name!r}")
            dims.append(k)
    if len(dims) > 1:
        raise ValueError(f"{fname}: {what} {spec} partitions more than one dimension over "
                         f"mesh axis {name!r}")
    return dims[0] if dims else None


def _out_axes(specs, name, fname):
    """out_specs as vmap's out_axes prefix: each PartitionSpec -> its partitioned
    dimension (ranks are checked after the call), None for replicated."""
    if isinstance(specs, PartitionSpec):
        dims = [k for k, part in enumerate(specs)
                for n in (part if isinstance(part, tuple) else (part,)) if n is not None]
        for k in dims:
            _spec_dim(specs, name, k + 1, "out_specs entry", fname)
        return dims[0] if dims else None
    if isinstance(specs, (tuple, list)):
        return type(specs)(_out_axes(s, name, fname) for s in specs)
    if isinstance(specs, dict):
        return {k: _out_axes(v, name, fname) for k, v in specs.items()}
    raise TypeError(f"{fname}: out_specs must be a PartitionSpec or a tuple / list / dict "
                    f"of them, got {specs!r}")


def shard_map(f=None, mesh=None, in_specs=None, out_specs=None, *, check_vma=True,
              check_rep=None, axis_names=frozenset()):
    """Map ``f`` over the shards of its arguments on the devices of ``mesh``
    (jax.shard_map; see the module docstring for the per-process shards). Usable as
    ``shard_map(f, mesh, in_specs, out_specs)``, with keywords, or as a decorator
    ``@partial(shard_map, mesh=..., in_specs=..., out_specs=...)``.

    - ``mesh``: a 1-D ``Mesh`` of every device of the job, in ``tracer.devices()`` order.
    - ``in_specs``: a PartitionSpec, or a pytree of them that is a prefix of the
      positional arguments (a tuple with one entry per argument). A dimension
      partitioned over the mesh axis is split into one block per local device.
    - ``out_specs``: likewise for the output; blocks are concatenated along the
      partitioned dimension; a replicated output must not vary over the axis.
    - ``check_vma`` / ``check_rep`` / ``axis_names``: accepted for compatibility (the
      vmap machinery itself rejects a replicated output that varies).

    Raises NotImplementedError for a mesh of rank > 1 or a mesh that is not every device
    in order, ValueError for a partitioned dimension not divisible by the local device
    count or a spec naming another axis, TypeError for specs that are not
    PartitionSpecs."""
    if f is None:
        return functools.partial(shard_map, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                                 check_vma=check_vma, check_rep=check_rep,
                                 axis_names=axis_names)
    from tracer import api, distributed
    from tracer.core import get_aval
    from tracer.pytree import broadcast_prefix, tree_flatten, tree_unflatten
    fname = f"shard_map({getattr(f, '__name__', 'f')})"
    if not isinstance(mesh, Mesh):
        raise TypeError(f"{fname}: mesh must be a tracer.sharding.Mesh, got {mesh!r}")
    if len(mesh.axis_names) != 1:
        raise NotImplementedError(
            f"{fname}: meshes of rank {len(mesh.axis_names)} ({mesh}) are not supported "
            "yet (they need an MPI sub-communicator per mesh axis); use a 1-D mesh")
    if in_specs is None or out_specs is None:
        raise TypeError(f"{fname}: in_specs and out_specs are required")
    (name,) = mesh.axis_names
    out_axes = _out_axes(out_specs, name, fname)

    @functools.wraps(f)
    def wrapped(*args):
        w = distributed.world()
        want = [d.id for d in distributed.devices()]
        if [d.id for d in mesh.devices.flat] != want:
            raise NotImplementedError(
                f"{fname}: the mesh's devices {[d.id for d in mesh.devices.flat]} must be "
                f"every device of the job in order ({want}, tracer.devices())")
        L = w.local_size
        leaves, tree = tree_flatten(args)
        specs = broadcast_prefix(tuple(in_specs) if isinstance(in_specs, list) else in_specs,
                                 args)
        split, axes = [], []
        for i, (x, spec) in enumerate(zip(leaves, specs)):
            x = api._as_array(x)
            shape = get_aval(x).shape
            k = _spec_dim(spec, name, len(shape), f"in_specs entry for argument leaf {i}",
                          fname)
            if k is not None:
                if shape[k] % L:
                    raise ValueError(
                        f"{fname}: argument leaf {i} of shape {shape} is partitioned along "
                        f"dimension {k} over {L} local devices, but {shape[k]} is not "
                        f"divisible by {L}")
                from lax.shapes import reshape
                x = reshape(x, shape[:k] + (L, shape[k] // L) + shape[k + 1:])
            split.append(x)
            axes.append(k)

        def flat(*xs):
            return f(*tree_unflatten(tree, list(xs)))

        mapped = api._vmap(flat, tuple(axes), out_axes, name, None, fname,
                           group=w if w.size > 1 else None, check_size=None)
        out = mapped(*split)
        out_leaves, out_tree = tree_flatten(out)
        dims = broadcast_prefix(out_axes, out)   # ints and None (replicated) are leaves
        merged = []
        from lax.shapes import reshape
        for o, k in zip(out_leaves, dims):
            if k is not None:
                shape = get_aval(o).shape
                o = reshape(o, shape[:k] + (shape[k] * shape[k + 1],) + shape[k + 2:])
            merged.append(o)
        return tree_unflatten(out_tree, merged)

    return wrapped

