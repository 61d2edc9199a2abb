"""Shape manipulation and combination: reshape, ravel, transpose, moveaxis, swapaxes,
squeeze, expand_dims, broadcast_to, broadcast_arrays, concatenate, stack, where, clip,
matmul, dot, vdot, outer, inner, tensordot (NumPy's signatures)."""
from __future__ import annotations

import builtins
import operator

import numpy as np

import lax
from tracer import dtypes
from tracer.core import get_aval
from tracer.numpy.util import (as_operand, broadcast_shapes, broadcast_to_shape,
                               canonicalize_axis_tuple, check_arraylike, promote_args,
                               promote_dtypes)


def _aval(x):
    return get_aval(x)


def reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    """``numpy.reshape`` (one dimension may be -1). Only C order is supported."""
    if shape is None:
        shape = newshape
    if order != "C":
        raise NotImplementedError("reshape: only order='C' is supported")
    a = as_operand(a, "reshape")
    size = _aval(a).size
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    shape = [operator.index(s) for s in shape]
    if shape.count(-1) > 1:
        raise ValueError("reshape: can only specify one unknown dimension (-1)")
    if -1 in shape:
        known = int(np.prod([s for s in shape if s != -1], dtype=np.int64))
        if known == 0 or size % known:
            raise ValueError(f"cannot reshape array of size {size} into shape "
                             f"{tuple(shape)}")
        shape[shape.index(-1)] = size // known
    if int(np.prod(shape, dtype=np.int64)) != size:
        raise ValueError(f"cannot reshape array of shape {_aval(a).shape} (size {size}) into "
                         f"shape {tuple(shape)}")
    return lax.reshape(a, tuple(shape))


def ravel(a, order="C"):
    a = as_operand(a, "ravel")
    return reshape(a, (_aval(a).size,), order)


def transpose(a, axes=None):
    """``numpy.transpose``: reverse the axes, or permute them by ``axes``."""
    a = as_operand(a, "transpose")
    nd = _aval(a).ndim
    if axes is None:
        perm = tuple(range(nd))[::-1]
    else:
        perm = tuple(operator.index(x) % nd if nd else 0 for x in axes)
        if sorted(perm) != list(range(nd)):
            raise ValueError(f"transpose: axes {axes} don't match array of dimension {nd}")
    return lax.transpose(a, perm)


permute_dims = transpose


def matrix_transpose(x):
    x = as_operand(x)
    nd = _aval(x).ndim
    if nd < 2:
        raise ValueError(f"matrix_transpose requires at least 2 dimensions, got {nd}")
    return lax.transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def moveaxis(a, source, destination):
    a = as_operand(a, "moveaxis")
    nd = _aval(a).ndim
    src = canonicalize_axis_tuple(source, nd, "moveaxis")
    dst = canonicalize_axis_tuple(destination, nd, "moveaxis")
    if len(src) != len(dst):
        raise ValueError("moveaxis: source and destination must have the same number of "
                         "elements")
    order = [i for i in range(nd) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return lax.transpose(a, tuple(order))


def swapaxes(a, axis1, axis2):
    a = as_operand(a, "swapaxes")
    nd = _aval(a).ndim
    (i,) = canonicalize_axis_tuple(axis1, nd, "swapaxes")
    (j,) = canonicalize_axis_tuple(axis2, nd, "swapaxes")
    perm = list(range(nd))
    perm[i], perm[j] = perm[j], perm[i]
    return lax.transpose(a, tuple(perm))


def squeeze(a, axis=None):
    a = as_operand(a, "squeeze")
    shape = _aval(a).shape
    if axis is None:
        axes = tuple(i for i, s in enumerate(shape) if s == 1)
    else:
        axes = canonicalize_axis_tuple(axis, len(shape), "squeeze")
        for i in axes:
            if shape[i] != 1:
                raise ValueError(f"squeeze: cannot select an axis to squeeze out which has "
                                 f"size not equal to one (axis {i} of shape {shape})")
    return lax.squeeze(a, axes)


def expand_dims(a, axis):
    a = as_operand(a, "expand_dims")
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    return lax.expand_dims(a, axes)


def broadcast_to(array, shape):
    """``numpy.broadcast_to`` (ValueError naming both shapes when incompatible)."""
    a = as_operand(array, "broadcast_to")
    shape = (operator.index(shape),) if isinstance(shape, (int, np.integer)) else \
        tuple(operator.index(s) for s in shape)
    s = _aval(a).shape
    try:
        if broadcast_shapes(s, shape) != shape:
            raise ValueError
    except ValueError:
        raise ValueError(f"broadcast_to: cannot broadcast an array of shape {s} to shape "
                         f"{shape}") from None
    return broadcast_to_shape(a, shape)


def broadcast_arrays(*args):
    args = [as_operand(a) for a in args]
    shape = broadcast_shapes(*[_aval(a).shape for a in args], fname="broadcast_arrays")
    return [broadcast_to_shape(a, shape) for a in args]


def atleast_1d(*arys):
    outs = [as_operand(a) for a in arys]
    outs = [lax.reshape(a, (1,)) if _aval(a).ndim == 0 else a for a in outs]
    return outs[0] if len(outs) == 1 else outs


def atleast_2d(*arys):
    outs = []
    for a in arys:
        a = as_operand(a)
        nd = _aval(a).ndim
        outs.append(lax.reshape(a, (1,) * (2 - nd) + _aval(a).shape) if nd < 2 else a)
    return outs[0] if len(outs) == 1 else outs


def atleast_3d(*arys):
    outs = []
    for a in arys:
        a = as_operand(a)
        s = _aval(a).shape
        if len(s) == 0:
            a = lax.reshape(a, (1, 1, 1))
        elif len(s) == 1:
            a = lax.reshape(a, (1, s[0], 1))
        elif len(s) == 2:
            a = lax.reshape(a, s + (1,))
        outs.append(a)
    return outs[0] if len(outs) == 1 else outs


def concatenate(arrays, axis=0, dtype=None):
    """``numpy.concatenate`` with dtype promotion; ``axis=None`` flattens first."""
    if not isinstance(arrays, (list, tuple)):
        arrays = [arrays[i] for i in range(len(arrays))]
    if not arrays:
        raise ValueError("need at least one array to concatenate")
    arrays = promote_dtypes(*arrays)
    if dtype is not None:
        arrays = [lax.convert_element_type(a, dtype) for a in arrays]
    if axis is None:
        arrays = [ravel(a) for a in arrays]
        axis = 0
    nd = _aval(arrays[0]).ndim
    if nd == 0:
        raise ValueError("zero-dimensional arrays cannot be concatenated")
    for a in arrays:
        if _aval(a).ndim != nd:
            raise ValueError(f"concatenate: all the input arrays must have the same number of "
                             f"dimensions, got shapes {[_aval(x).shape for x in arrays]}")
    (ax,) = canonicalize_axis_tuple(axis, nd, "concatenate")
    for a in arrays:
        for i in range(nd):
            if i != ax and _aval(a).shape[i] != _aval(arrays[0]).shape[i]:
                raise ValueError(f"concatenate: all the input array dimensions except for the "
                                 f"concatenation axis must match exactly, got shapes "
                                 f"{[_aval(x).shape for x in arrays]}")
    return lax.concatenate(arrays, ax)


concat = concatenate


def stack(arrays, axis=0, dtype=None):
    """``numpy.stack``: join along a new axis (all shapes equal)."""
    arrays = [as_operand(a) for a in arrays]
    if not arrays:
        raise ValueError("need at least one array to stack")
    shape = _aval(arrays[0]).shape
    for a in arrays:
        if _aval(a).shape != shape:
            raise ValueError(f"stack: all input arrays must have the same shape, got "
                             f"{[_aval(x).shape for x in arrays]}")
    (ax,) = canonicalize_axis_tuple(axis, len(shape) + 1, "stack")
    return concatenate([lax.expand_dims(a, (ax,)) for a in arrays], ax, dtype)


def vstack(tup, dtype=None):
    return concatenate([atleast_2d(a) for a in tup], 0, dtype)


def hstack(tup, dtype=None):
    arrs = [atleast_1d(a) for a in tup]
    return concatenate(arrs, 0 if _aval(arrs[0]).ndim == 1 else 1, dtype)


def dstack(tup, dtype=None):
    return concatenate([atleast_3d(a) for a in tup], 2, dtype)


def column_stack(tup):
    arrs = []
    for a in tup:
        a = as_operand(a)
        arrs.append(lax.reshape(a, (_aval(a).size, 1)) if _aval(a).ndim < 2 else a)
    return concatenate(arrs, 1)


def where(condition, x=None, y=None, /, *, size=None, fill_value=None):
    """``numpy.where(condition, x, y)``: element-wise selection with broadcasting. The
    one-argument form is ``nonzero``."""
    if x is None and y is None:
        from tracer.numpy import nonzero
        return nonzero(condition, size=size, fill_value=fill_value)
    if x is None or y is None:
        raise ValueError("where: either both or neither of x and y must be given")
    c = as_operand(condition)
    if _aval(c).dtype != np.bool_:
        c = lax.ne(c, lax.full_like(c, 0))
    x, y = promote_dtypes(x, y)
    shape = broadcast_shapes(_aval(c).shape, _aval(x).shape, _aval(y).shape, fname="where")
    c, x, y = (broadcast_to_shape(v, shape) for v in (c, x, y))
    return lax.select(c, x, y)


def clip(arr=None, /, min=None, max=None, *, a=None, a_min=None, a_max=None):
    """``numpy.clip``: ``minimum(maximum(arr, min), max)``; either bound may be None."""
    from tracer.numpy.ufuncs import maximum, minimum
    if arr is None:
        arr = a
    if min is None:
        min = a_min
    if max is None:
        max = a_max
    out = as_operand(arr)
    if min is not None:
        out = maximum(out, min)
    if max is not None:
        out = minimum(out, max)
    return out


def _dot_dtype_args(a, b, fname):
    check_arraylike(fname, a, b)
    return promote_dtypes(a, b)


def matmul(a, b, /, *, precision=None, preferred_element_type=None):
    """``numpy.matmul`` (``@``): 1-D operands are promoted to matrices and the added
    dimension removed; leading dimensions broadcast. One dot_general."""
    a, b = _dot_dtype_args(a, b, "matmul")
    sa, sb = _aval(a).shape, _aval(b).shape
    if len(sa) == 0 or len(sb) == 0:
        raise ValueError(f"matmul: input operands must not be scalars, got shapes {sa} and "
                         f"{sb}")
    a_vec, b_vec = len(sa) == 1, len(sb) == 1
    if a_vec:
        a = lax.reshape(a, (1,) + sa)
    if b_vec:
        b = lax.reshape(b, sb + (1,))
    sa, sb = _aval(a).shape, _aval(b).shape
    if sa[-1] != sb[-2]:
        raise ValueError(f"matmul: input operand 1 has a mismatch in its core dimension 0 "
                         f"(size {sb[-2]} is different from {sa[-1]}); shapes "
                         f"{_aval(a).shape} and {_aval(b).shape}")
    batch = broadcast_shapes(sa[:-2], sb[:-2], fname="matmul")
    nb = len(batch)
    # Unbroadcast batch dims that are absent: keep them as free dims when possible.
    if sa[:-2] != batch:
        a = broadcast_to_shape(a, batch + sa[-2:])
    if sb[:-2] != batch:
        b = broadcast_to_shape(b, batch + sb[-2:])
    bd = tuple(range(nb))
    out = lax.dot_general(a, b, (((nb + 1,), (nb,)), (bd, bd)), precision=precision,
                          preferred_element_type=preferred_element_type)
    shape = _aval(out).shape
    if a_vec and b_vec:
        return lax.reshape(out, shape[:-2])
    if a_vec:
        return lax.reshape(out, shape[:-2] + shape[-1:])
    if b_vec:
        return lax.reshape(out, shape[:-1])
    return out


def dot(a, b, *, precision=None, preferred_element_type=None):
    """``numpy.dot``: scalars multiply; otherwise contract the last axis of ``a`` with the
    second-to-last (or only) axis of ``b``."""
    a, b = _dot_dtype_args(a, b, "dot")
    na, nb = _aval(a).ndim, _aval(b).ndim
    if na == 0 or nb == 0:
        return lax.mul(*promote_args("dot", a, b))
    bc = 0 if nb == 1 else nb - 2
    if _aval(a).shape[-1] != _aval(b).shape[bc]:
        raise ValueError(f"dot: shapes {_aval(a).shape} and {_aval(b).shape} not aligned: "
                         f"{_aval(a).shape[-1]} (dim {na - 1}) != {_aval(b).shape[bc]} "
                         f"(dim {bc})")
    return lax.dot_general(a, b, (((na - 1,), (bc,)), ((), ())), precision=precision,
                           preferred_element_type=preferred_element_type)


def vdot(a, b, *, precision=None):
    from tracer.numpy.ufuncs import conjugate
    a, b = _dot_dtype_args(a, b, "vdot")
    if dtypes.is_complex(_aval(a).dtype):
        a = conjugate(a)
    return dot(ravel(a), ravel(b), precision=precision)


def inner(a, b):
    a, b = _dot_dtype_args(a, b, "inner")
    na, nb = _aval(a).ndim, _aval(b).ndim
    if na == 0 or nb == 0:
        return lax.mul(*promote_args("inner", a, b))
    return lax.dot_general(a, b, (((na - 1,), (nb - 1,)), ((), ())))


def outer(a, b, out=None):
    a, b = _dot_dtype_args(a, b, "outer")
    a, b = ravel(a), ravel(b)
    return lax.mul(lax.broadcast_in_dim(a, (_aval(a).size, _aval(b).size), (0,)),
                   lax.broadcast_in_dim(b, (_aval(a).size, _aval(b).size), (1,)))


def tensordot(a, b, axes=2, *, precision=None):
    a, b = _dot_dtype_args(a, b, "tensordot")
    na, nb = _aval(a).ndim, _aval(b).ndim
    if isinstance(axes, (int, np.integer)):
        axes = int(axes)
        ca = tuple(range(na - axes, na))
        cb = tuple(range(axes))
    else:
        ax_a, ax_b = axes
        ca = canonicalize_axis_tuple(ax_a, na, "tensordot")
        cb = canonicalize_axis_tuple(ax_b, nb, "tensordot")
    return lax.dot_general(a, b, ((ca, cb), ((), ())), precision=precision)


def vecdot(x1, x2, /, *, axis=-1):
    from tracer.numpy.ufuncs import conjugate, multiply
    from tracer.numpy.reductions import sum as _sum
    x1, x2 = _dot_dtype_args(x1, x2, "vecdot")
    if dtypes.is_complex(_aval(x1).dtype):
        x1 = conjugate(x1)
    return _sum(multiply(x1, x2), axis=axis)


def flip(m, axis=None):
    m = as_operand(m)
    axes = canonicalize_axis_tuple(axis, _aval(m).ndim, "flip")
    return lax.rev(m, axes)


def fliplr(m):
    return flip(m, 1)


def flipud(m):
    return flip(m, 0)


def tile(A, reps):
    A = as_operand(A)
    reps = (reps,) if isinstance(reps, (int, np.integer)) else tuple(reps)
    nd = builtins.max(len(reps), _aval(A).ndim)
    A = lax.reshape(A, (1,) * (nd - _aval(A).ndim) + _aval(A).shape)
    reps = (1,) * (nd - len(reps)) + tuple(reps)
    return lax.tile(A, reps)


def repeat(a, repeats, axis=None, *, total_repeat_length=None):
    """``numpy.repeat`` with a static int ``repeats`` (or a static sequence)."""
    a = as_operand(a)
    if axis is None:
        a = ravel(a)
        axis = 0
    shape = _aval(a).shape
    (ax,) = canonicalize_axis_tuple(axis, len(shape), "repeat")
    if isinstance(repeats, (int, np.integer)):
        r = int(repeats)
        b = lax.broadcast_in_dim(a, shape[:ax + 1] + (r,) + shape[ax + 1:],
                                 tuple(range(ax + 1)) + tuple(range(ax + 2, len(shape) + 1)))
        return lax.reshape(b, shape[:ax] + (shape[ax] * r,) + shape[ax + 1:])
    from tracer.core import concrete_or_error
    reps = concrete_or_error(np.asarray, repeats, "in repeat's repeats (pass "
                             "total_repeat_length under jit)")
    pieces = []
    for i, r in enumerate(np.broadcast_to(reps, (shape[ax],))):
        piece = lax.slice_in_dim(a, i, i + 1, 1, ax)
        if r:
            pieces.append(repeat(piece, int(r), axis=ax))
    if not pieces:
        return lax.slice_in_dim(a, 0, 0, 1, ax)
    return concatenate(pieces, ax)
