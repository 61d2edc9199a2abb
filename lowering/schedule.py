"""Scheduling passes on kernels: pure ``Kernel -> Kernel`` (and step) rewrites.

``flatten``: an element-wise kernel whose every array access is the identity index on an
array of the iteration shape (or a scalar) runs over one flat index instead:
``out[i_0, ..., i_{n-1}] = f(in[i_0, ..., i_{n-1}])`` becomes ``out'[l] = f(in'[l])`` with
``l = sum_k i_k * prod(n_{k+1:})`` and ``x' = x.reshape(-1)`` (a view: our arrays are
C-contiguous). One loop vectorizes better than a nest with a short inner extent, and the
same source then serves every rank, so fewer kernels are compiled.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from lowering.ir import (IParam, Kernel, KernelArg, KernelStep, Load, LoopIndex, Program,
                         map_expr, walk)


def _flattenable(k: Kernel) -> bool:
    if k.reductions or k.ndim < 2:
        return False
    ident = tuple(LoopIndex(d) for d in range(k.ndim))
    for st in k.stores:
        if isinstance(st.value, LoopIndex):   # a bare iota stored as is
            return False
        for n in walk(st.value):
            if isinstance(n, Load) and n.index not in ((), ident):
                return False
            # a loop index anywhere but in an identity load (iota) keeps its dimension
            if not isinstance(n, Load) and any(isinstance(c, LoopIndex)
                                               for c in getattr(n, "args", ())):
                return False
    return True


def flatten_kernel(k: Kernel) -> Kernel:
    """The one-loop form of a flattenable kernel (module docstring); IParam slots >= ndim
    move down to start at 1."""
    shift = k.ndim - 1

    def fix(node):
        if isinstance(node, Load) and node.index:
            return Load(node.arg, (LoopIndex(0),), node.dtype, node.origin)
        if isinstance(node, IParam) and node.slot >= k.ndim:
            return IParam(node.slot - shift, node.label)
        return node

    memo: dict = {}
    stores = tuple(dataclasses.replace(s, value=map_expr(s.value, fix, memo)) for s in k.stores)
    flat = lambda args: tuple(KernelArg(a.dtype, 1 if a.ndim else 0) for a in args)
    return dataclasses.replace(
        k, inputs=flat(k.inputs), outputs=flat(k.outputs), ndim=1, stores=stores,
        n_iparams=k.n_iparams - shift, parallel_dim=0, unit_dims=(),
        param_labels=("extent (flattened)",) + tuple(k.param_labels[k.ndim:]))


def flatten(p: Program) -> Program:
    steps = []
    for s in p.steps:
        if isinstance(s, KernelStep) and _flattenable(s.kernel):
            total = int(np.prod(s.iparams[:s.kernel.ndim], dtype=np.int64))
            s = dataclasses.replace(s, kernel=flatten_kernel(s.kernel),
                                    iparams=(total,) + tuple(s.iparams[s.kernel.ndim:]),
                                    flat=True)
        steps.append(s)
    return dataclasses.replace(p, steps=steps)
