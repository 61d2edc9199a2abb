"""``vectorize``: NumPy's generalized-ufunc vectorization (``numpy.vectorize``,
``jax.numpy.vectorize``) built on ``vmap``, so the loop is batched primitives, not Python.
"""
from __future__ import annotations

import functools
import re

import numpy as np

from tracer.core import Array, Tracer, get_aval
from tracer.pytree import tree_map

# A gufunc signature: "(m,n),(n)->(m)"; dimension names are words (NumPy's rule).
_DIM = r"\w+"
_CORE = rf"\((?:{_DIM}(?:,{_DIM})*)?\)"
_ARGS = rf"{_CORE}(?:,{_CORE})*"
_SIGNATURE = re.compile(rf"^{_ARGS}->{_ARGS}$")


def _parse_signature(signature: str):
    """``'(m,n),(n)->(m)'`` -> ([('m', 'n'), ('n',)], [('m',)])."""
    if not isinstance(signature, str):
        raise TypeError(f"vectorize: signature must be a string like '(m,n),(n)->(m)', got "
                        f"{signature!r}")
    compact = re.sub(r"\s+", "", signature)
    if not _SIGNATURE.match(compact):
        raise ValueError(f"vectorize: {signature!r} is not a valid gufunc signature; expected "
                         "comma-separated parenthesised dimension names on both sides of "
                         "'->', e.g. '(m,n),(n)->(m)' or '(),()->()'")
    ins, outs = compact.split("->")

    def groups(part):
        return [tuple(re.findall(_DIM, g)) for g in re.findall(r"\(([^)]*)\)", part)]

    return groups(ins), groups(outs)


def _fmt(core) -> str:
    return "(" + ",".join(core) + ")"


def _record_sizes(sizes, where, shape, core, signature, fname, is_output=False):
    """Check ``shape``'s trailing dims against the core dims ``core`` and record their
    sizes in ``sizes`` (name -> (size, where it was first seen))."""
    if (len(shape) != len(core)) if is_output else (len(shape) < len(core)):
        need = "exactly" if is_output else "at least"
        raise ValueError(f"vectorize({fname}): {where} has shape {tuple(shape)}, but the signature "
                         f"{signature!r} gives it core dimensions {_fmt(core)}: it needs "
                         f"{need} {len(core)} dimension{'s' if len(core) != 1 else ''}")
    core_shape = shape[len(shape) - len(core):] if core else ()
    for name, n in zip(core, core_shape):
        seen = sizes.get(name)
        if seen is None:
            sizes[name] = (n, where, tuple(shape))
        elif seen[0] != n:
            raise ValueError(f"vectorize({fname}): inconsistent size for core dimension {name!r} of the "
                             f"signature {signature!r}: {seen[0]} in {seen[1]} (shape "
                             f"{seen[2]}) but {n} in {where} (shape {tuple(shape)})")


def _broadcast_loop_shapes(shapes, descs, fname):
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for k in range(ndim):
        size = 1
        for s, d in zip(shapes, descs):
            j = k - (ndim - len(s))
            if j < 0 or s[j] == 1:
                continue
            if size != 1 and s[j] != size:
                listing = ", ".join(f"{dd} {tuple(ss)}" for ss, dd in zip(shapes, descs))
                raise ValueError(f"vectorize({fname}): the loop (non-core) dimensions of the inputs do "
                                 f"not broadcast together: {listing}")
            size = s[j]
        out.append(size)
    return tuple(out)


def vectorize(pyfunc, *, excluded=frozenset(), signature=None):
    """Vectorize ``pyfunc`` like a NumPy generalized ufunc (``numpy.vectorize`` /
    ``jax.numpy.vectorize``), computed with ``vmap``: batched primitives, no Python loop.

    Without ``signature``, ``pyfunc`` is written for scalars; the arguments are broadcast
    against each other (NumPy rules) and ``pyfunc`` is mapped over every element. With
    ``signature`` (e.g. ``'(m,n),(n)->(m)'`` for a matrix-vector product, ``'(n),(n)->()'``
    for a dot product, ``'()->(),()'`` for two scalar outputs), the trailing dimensions of
    each input named in the signature are its *core* dimensions, passed whole to
    ``pyfunc``; the leading (loop) dimensions broadcast against each other and are mapped
    over. Outputs get the broadcast loop shape followed by their core dimensions; several
    outputs in the signature mean ``pyfunc`` returns a tuple.

    ``excluded``: positions (ints) or keyword names (strs) of arguments passed through
    unvectorized. ``None`` arguments are passed through too. Other keyword arguments are
    vectorized like positional ones without a signature; with a signature they must be
    excluded (the signature covers positional arguments only).

    Size-1 loop dimensions broadcast without being materialised: an argument whose loop
    dimension is 1 (or missing) is not mapped over it.

    Raises ValueError for a malformed signature, an input with fewer dimensions than its
    core dimensions, a core dimension with different sizes, loop dimensions that do not
    broadcast, or outputs that do not match the signature's core dimensions; TypeError
    for the wrong number of arguments or outputs.
    """
    from tracer.api import vmap
    from tracer import numpy as tnp

    excluded = frozenset(excluded)
    for e in excluded:
        if not isinstance(e, (int, str)) or isinstance(e, bool) or (isinstance(e, int) and
                                                                      e < 0):
            raise TypeError(f"vectorize: excluded must hold non-negative argument positions "
                            f"(ints) and keyword names (strs), got {e!r}")
    if signature is not None:
        in_core_sig, out_core_sig = _parse_signature(signature)
    fname = getattr(pyfunc, "__name__", type(pyfunc).__name__)

    @functools.wraps(pyfunc)
    def wrapped(*args, **kwargs):
        static_pos = {i: a for i, a in enumerate(args) if i in excluded or a is None}
        static_kw = {k: v for k, v in kwargs.items() if k in excluded}
        dyn = [(f"input {i}", a) for i, a in enumerate(args) if i not in static_pos]
        dyn_kw = {k: v for k, v in kwargs.items() if k not in excluded}
        if signature is not None:
            if dyn_kw:
                raise TypeError(f"vectorize({fname}): keyword argument(s) {sorted(dyn_kw)} are "
                                f"not covered by the signature {signature!r}; pass them "
                                "positionally or list them in excluded")
            if len(dyn) != len(in_core_sig):
                raise TypeError(f"vectorize({fname}): the signature {signature!r} has "
                                f"{len(in_core_sig)} input{'s' if len(in_core_sig) != 1 else ''}"
                                f", but {len(dyn)} vectorized positional argument"
                                f"{'s were' if len(dyn) != 1 else ' was'} given")
            in_core = list(in_core_sig)
        else:
            in_core = [()] * (len(dyn) + len(dyn_kw))
        kw_names = sorted(dyn_kw)
        dyn += [(f"keyword argument {k!r}", dyn_kw[k]) for k in kw_names]
        descs = [d for d, _ in dyn]
        # Python scalars stay Python scalars (weakly typed); everything else becomes an array.
        vals = [a if type(a) in (bool, int, float, complex) else tnp.asarray(a)
                for _, a in dyn]
        shapes = [tuple(get_aval(v).shape) for v in vals]
        sizes: dict = {}
        for d, s, core in zip(descs, shapes, in_core):
            _record_sizes(sizes, d, s, core, signature, fname)
        loop_shapes = [s[:len(s) - len(core)] for s, core in zip(shapes, in_core)]
        bshape = _broadcast_loop_shapes(loop_shapes, descs, fname)
        nloop = len(bshape)

        def core_fun(*xs):
            it = iter(xs[:len(xs) - len(kw_names)])
            full = [static_pos[i] if i in static_pos else next(it)
                    for i in range(len(args))]
            kw = dict(zip(kw_names, xs[len(xs) - len(kw_names):]))
            out = pyfunc(*full, **kw, **static_kw)
            if signature is not None:
                _check_outputs(out, dict(sizes))
            return out

        def _check_outputs(out, out_sizes):
            n = len(out_core_sig)
            if n > 1 and not isinstance(out, tuple):
                raise TypeError(f"vectorize({fname}): the signature {signature!r} has {n} "
                                f"outputs, so the function must return a tuple, got "
                                f"{type(out).__name__}")
            outs = (out,) if n == 1 else out
            if len(outs) != n:
                raise TypeError(f"vectorize({fname}): the signature {signature!r} has {n} "
                                f"output{'s' if n != 1 else ''}, but the function returned "
                                f"{len(outs)}")
            for j, (o, core) in enumerate(zip(outs, out_core_sig)):
                _record_sizes(out_sizes, f"output {j}", get_aval(o).shape, core, signature,
                              fname, is_output=True)

        # Drop size-1 loop dims (and pad missing ones): an argument is mapped over loop
        # dim k only where it has a real extent there.
        filled = [(1,) * (nloop - len(ls)) + ls for ls in loop_shapes]
        squeezed = []
        for v, ls in zip(vals, loop_shapes):
            drop = tuple(i for i, n in enumerate(ls) if n == 1)
            squeezed.append(tnp.squeeze(v, axis=drop) if drop else v)
        f = core_fun
        expand = []
        for k in reversed(range(nloop)):
            axes = tuple(None if fs[k] == 1 else 0 for fs in filled)
            if all(a is None for a in axes):
                expand.append(k)  # every input has size 1 here: add the dim afterwards
            else:
                f = vmap(f, in_axes=axes)
        out = f(*squeezed)
        if expand:
            out = tree_map(lambda o: tnp.expand_dims(o, tuple(sorted(expand))), out)
        return out

    return wrapped
