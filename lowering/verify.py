"""An IR checker run between pipeline stages when ``TRACER_VERIFY_IR=1`` (tests set it):
every buffer is defined before use, kernel arguments match their buffers' dtypes and
ranks, loads index with one int64 expression per dim, parameters are in range, pairwise
sums are well formed."""
from __future__ import annotations

import numpy as np

from lowering.ir import (INDEX, AccRef, FParam, HostStep, IParam, KernelStep, LibraryCall, Load,
                         LoopIndex, Program, walk)


class IRError(AssertionError):
    pass


def check_program(p: Program) -> None:
    defined = set(p.invars) | {n for n, _ in p.consts}
    for i, s in enumerate(p.steps):
        ins = [x for x in s.ins if isinstance(x, str)]
        for b in ins:
            if b not in defined:
                raise IRError(f"step {i}: buffer {b} used before it is defined\n{p.pretty()}")
        if isinstance(s, KernelStep):
            _check_kernel_step(i, s, p)
        elif not isinstance(s, (LibraryCall, HostStep)):
            raise IRError(f"step {i}: unknown step {type(s).__name__}")
        defined.update(s.outs)
    for o in p.outvars:
        if isinstance(o, str) and o not in defined:
            raise IRError(f"output buffer {o} is never defined\n{p.pretty()}")


def _check_kernel_step(i, s: KernelStep, p: Program):
    k = s.kernel
    where = f"step {i} (kernel)"
    if len(s.ins) != len(k.inputs) or len(s.outs) != len(k.outputs):
        raise IRError(f"{where}: argument count mismatch")
    for b, arg in zip(tuple(s.ins) + tuple(s.outs), k.inputs + k.outputs):
        a = p.buffers[b]
        rank = (1 if a.shape else 0) if s.flat else len(a.shape)
        if np.dtype(a.dtype) != arg.dtype or rank != arg.ndim:
            raise IRError(f"{where}: buffer {b}:{a.str_short()} passed as "
                          f"{arg.dtype}[{arg.ndim}d]")
    if len(s.iparams) != k.n_iparams or len(s.fparams) != len(k.fparam_dtypes):
        raise IRError(f"{where}: runtime parameter count mismatch")
    out_shape = p.buffers[s.outs[0]].shape
    if s.flat:
        out_shape = (int(np.prod(out_shape, dtype=np.int64)),)
    if tuple(s.iparams[:k.ndim]) != tuple(out_shape) and not k.reductions:
        raise IRError(f"{where}: extents {s.iparams[:k.ndim]} differ from the output shape")
    roots = [st.value for st in k.stores]
    for r in k.reductions:
        roots += list(r.init) + list(r.combine) + list(r.finals) + list(r.summands)
        if not k.reduce_dims:
            raise IRError(f"{where}: a reduction without reduce dims")
        if r.summands and (len(r.summands) != len(r.init) or not r.merge or
                           any(np.dtype(e.dtype) != np.dtype(dt)
                               for e, dt in zip(r.summands, r.acc_dtypes)) or
                           any(isinstance(n, AccRef) for e in r.summands for n in walk(e))):
            raise IRError(f"{where}: a pairwise sum needs one summand per accumulator, of "
                          f"its dtype and free of accumulators, and a merge")
    if any(not 0 <= d < k.ndim or s.iparams[d] != 1 for d in k.unit_dims):
        raise IRError(f"{where}: unit dims {k.unit_dims} are not of extent 1 "
                      f"(extents {s.iparams[:k.ndim]})")
    n_acc = sum(len(r.init) for r in k.reductions)
    for root in roots:
        for n in walk(root):
            if isinstance(n, Load):
                if n.arg >= len(k.inputs) or len(n.index) != k.inputs[n.arg].ndim:
                    raise IRError(f"{where}: bad load {n}")
                if any(ix.dtype != INDEX for ix in n.index):
                    raise IRError(f"{where}: non-int64 index in {n}")
                if n.dtype != k.inputs[n.arg].dtype:
                    raise IRError(f"{where}: load dtype {n.dtype} of input {n.arg} "
                                  f"({k.inputs[n.arg].dtype})")
            elif isinstance(n, IParam) and n.slot >= k.n_iparams:
                raise IRError(f"{where}: iparam {n.slot} out of range")
            elif isinstance(n, FParam) and n.slot >= len(k.fparam_dtypes):
                raise IRError(f"{where}: fparam {n.slot} out of range")
            elif isinstance(n, LoopIndex) and n.dim >= k.ndim:
                raise IRError(f"{where}: loop index {n.dim} out of range")
            elif isinstance(n, AccRef) and n.slot >= n_acc:
                raise IRError(f"{where}: accumulator {n.slot} out of range")
    for st in k.stores:
        if k.outputs[st.out].ndim != k.ndim:
            raise IRError(f"{where}: store into a rank-{k.outputs[st.out].ndim} output")
