"""Shape manipulation and combination: reshape, ravel, transpose, moveaxis, swapaxes,
squeeze, expand_dims, broadcast_to, broadcast_arrays, concatenate, stack, where, clip,
matmul, dot, vdot, outer, inner, tensordot (NumPy's signatures)."""
from __future__ import annotations

import math
import builtins
import operator

import numpy as np

import lax
from tracer import dtypes
from tracer import core
from tracer.config import config
from tracer.core import Array, get_aval
from lax.utils import eager_unary
from tracer.numpy.util import (as_operand, broadcast_shapes, broadcast_to_shape,
                               canonicalize_axis_tuple, check_arraylike, promote_args,
                               promote_dtypes)


def _aval(x):
    return get_aval(x)


def _index_order(name, order):
    """'C' or 'F' for NumPy's ``order`` argument, which NumPy reads case-insensitively (a
    str or bytes), with None meaning 'C'. As NumPy: TypeError for another type,
    ValueError for any other value and for 'K' in ``reshape``. NotImplementedError for
    'A' and 'K', which follow an array's memory layout: an Array has none (as JAX)."""
    o = "C" if order is None else order
    if isinstance(o, bytes):
        o = o.decode("latin-1")
    if not isinstance(o, str):
        raise TypeError(f"{name}: order must be str, not {type(order).__name__}")
    if o.upper() not in ("C", "F", "A", "K"):
        raise ValueError(f"{name}: order must be one of 'C', 'F', 'A', or 'K' (got "
                         f"{order!r})")
    o = o.upper()
    if o == "K" and name == "reshape":
        raise ValueError("reshape: order 'K' is not permitted for reshaping")
    if o in ("A", "K"):
        raise NotImplementedError(f"{name}: order={order!r} follows an array's memory "
                                  f"layout, which an Array does not have; use 'C' or 'F'")
    return o


def reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    """``numpy.reshape`` (one dimension may be -1), in C (row-major) or F (column-major)
    index order: F reads and writes the elements with the first index changing fastest,
    as ``transpose(reshape(transpose(a), shape[::-1]))``. ``order`` is read as NumPy reads
    it (any case; None is 'C'); 'A' raises NotImplementedError (as JAX: arrays have no
    memory layout to follow), 'K' and unknown orders ValueError (as NumPy)."""
    if shape is None:
        shape = newshape
    order = _index_order("reshape", order)
    a = as_operand(a, "reshape")
    size = _aval(a).size
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    shape = [operator.index(s) for s in shape]
    if shape.count(-1) > 1:
        raise ValueError("reshape: can only specify one unknown dimension (-1)")
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        if known == 0 or size % known:
            raise ValueError(f"cannot reshape array of size {size} into shape "
                             f"{tuple(shape)}")
        shape[shape.index(-1)] = size // known
    if math.prod(shape) != size:
        raise ValueError(f"cannot reshape array of shape {_aval(a).shape} (size {size}) into "
                         f"shape {tuple(shape)}")
    shape = tuple(shape)
    if order == "F":
        return transpose(reshape(transpose(a), shape[::-1]))
    if shape != _aval(a).shape:     # (lax.reshape's bind, at once for a concrete Array)
        out = eager_unary(lax.reshape_p, a, {"new_sizes": shape, "dimensions": None})
        if out is not None:
            return out
    return lax.reshape(a, shape)


def ravel(a, order="C"):
    """The flattened array (``numpy.ravel``) in C or F order (``reshape``); 'A' and 'K'
    raise NotImplementedError, unknown orders ValueError."""
    order = _index_order("ravel", order)
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
    if perm != tuple(range(nd)):    # (lax.transpose's bind, at once for a concrete Array)
        out = eager_unary(lax.transpose_p, a, {"permutation": perm})
        if out is not None:
            return out
    return lax.transpose(a, perm)


permute_dims = transpose


def matrix_transpose(x):
    """Swap the last two axes (Array API ``matrix_transpose``, ``x.mT``)."""
    x = as_operand(x)
    nd = _aval(x).ndim
    if nd < 2:
        raise ValueError(f"matrix_transpose requires at least 2 dimensions, got {nd}")
    return lax.transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def moveaxis(a, source, destination):
    """Move the axes ``source`` to the positions ``destination`` (``numpy.moveaxis``)."""
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
    """Exchange two axes (``numpy.swapaxes``)."""
    a = as_operand(a, "swapaxes")
    nd = _aval(a).ndim
    (i,) = canonicalize_axis_tuple(axis1, nd, "swapaxes")
    (j,) = canonicalize_axis_tuple(axis2, nd, "swapaxes")
    perm = list(range(nd))
    perm[i], perm[j] = perm[j], perm[i]
    return lax.transpose(a, tuple(perm))


def squeeze(a, axis=None):
    """Remove size-1 axes (all, or the given ones; ValueError for others)
    (``numpy.squeeze``)."""
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
    """Insert size-1 axes at the positions ``axis`` (an int or a tuple; positions in the
    result, negative ones counted from its end) (``numpy.expand_dims``). An axis outside
    ``[-(ndim + k), ndim + k)`` for ``k`` new axes raises ``numpy.exceptions.AxisError``
    (an IndexError, as the Array API asks, and a ValueError); a repeated axis ValueError."""
    a = as_operand(a, "expand_dims")
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    axes = canonicalize_axis_tuple(axes, _aval(a).ndim + len(axes), "expand_dims")
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
    """The arguments broadcast to their common shape (``numpy.broadcast_arrays``)."""
    args = [as_operand(a) for a in args]
    shape = broadcast_shapes(*[_aval(a).shape for a in args], fname="broadcast_arrays")
    return [broadcast_to_shape(a, shape) for a in args]


def atleast_1d(*arys):
    """Arrays with at least one dimension (``numpy.atleast_1d``)."""
    outs = [as_operand(a) for a in arys]
    outs = [lax.reshape(a, (1,)) if _aval(a).ndim == 0 else a for a in outs]
    return outs[0] if len(outs) == 1 else outs


def atleast_2d(*arys):
    """Arrays with at least two dimensions (``numpy.atleast_2d``)."""
    outs = []
    for a in arys:
        a = as_operand(a)
        nd = _aval(a).ndim
        outs.append(lax.reshape(a, (1,) * (2 - nd) + _aval(a).shape) if nd < 2 else a)
    return outs[0] if len(outs) == 1 else outs


def atleast_3d(*arys):
    """Arrays with at least three dimensions, as NumPy places them
    (``numpy.atleast_3d``)."""
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
    """Stack along axis 0 after ``atleast_2d`` (``numpy.vstack``)."""
    return concatenate([atleast_2d(a) for a in tup], 0, dtype)


def hstack(tup, dtype=None):
    """Stack along axis 1 (axis 0 for 1-D) (``numpy.hstack``)."""
    arrs = [atleast_1d(a) for a in tup]
    return concatenate(arrs, 0 if _aval(arrs[0]).ndim == 1 else 1, dtype)


def dstack(tup, dtype=None):
    """Stack along axis 2 after ``atleast_3d`` (``numpy.dstack``)."""
    return concatenate([atleast_3d(a) for a in tup], 2, dtype)


def column_stack(tup):
    """1-D arrays as columns of a 2-D array (``numpy.column_stack``)."""
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
    for v in (out, min, max):
        # lax.max/min order complex numbers lexicographically; jax.numpy.clip refuses them
        if v is not None and np.dtype(_clip_dtype(v)).kind == "c":
            raise ValueError("clip: received a complex value (through the input or the "
                             "min/max bounds); complex values have no ordering and cannot "
                             "be clipped (as in jax.numpy.clip): clip the real part, or "
                             "use lax.max/lax.min for their lexicographic order")
    # the bounds first, as jax.numpy.clip: with lax.max/min's rules this order fixes the
    # sign of a NaN (and -0.0 vs +0.0) that JAX returns
    if min is not None:
        out = maximum(min, out)
    if max is not None:
        out = minimum(max, out)
    return out


def _clip_dtype(v):
    return get_aval(v).dtype if hasattr(v, "aval") else np.asarray(v).dtype


def _dot_dtype_args(a, b, fname):
    check_arraylike(fname, a, b)
    return promote_dtypes(a, b)


_eager_matmul_plans: dict = {}


def _eager_matmul(a, b):
    """``matmul(a, b)`` of two concrete Arrays of one float or complex dtype (neither
    weakly typed), each 1-D or 2-D, with no transformation active: the general path's
    impls (reshape, dot_general, reshape) run on the values at once, with its result
    aval, without the tracing machinery around them (13-25 us an eager ``W @ h``). None
    where that does not apply (the general path then gives the result or the error)."""
    if type(a) is not Array or type(b) is not Array or core.dynamic_level():
        return None
    key = (a.aval, b.aval, config.enable_x64)
    plan = _eager_matmul_plans.get(key)
    if plan is None:
        ax, bx, _ = key
        sa, sb = ax.shape, bx.shape
        if (ax.dtype != bx.dtype or ax.dtype.kind not in "fc" or dtypes.is_lowp(ax.dtype)
                or dtypes.canonicalize_dtype(ax.dtype) != ax.dtype     # (x64 switched off)
                or ax.weak_type or bx.weak_type or not 1 <= len(sa) <= 2
                or not 1 <= len(sb) <= 2 or sa[-1] != sb[0]):
            return None
        a2 = sa if len(sa) == 2 else (1,) + sa
        b2 = sb if len(sb) == 2 else sb + (1,)
        params = {"dimension_numbers": (((1,), (0,)), ((), ())), "precision": None,
                  "preferred_element_type": None}
        avals = [core.ShapedArray(a2, ax.dtype), core.ShapedArray(b2, bx.dtype)]
        (dot_aval,), fn, quiet = core.eval_plan(None, lax.dot_general_p, avals, params)
        shape = sa[:-1] + sb[1:]
        if len(_eager_matmul_plans) >= 1024:
            _eager_matmul_plans.clear()
        plan = _eager_matmul_plans[key] = (a2, b2, fn, params, quiet,
                                           core.ShapedArray(shape, dot_aval.dtype))
    a2, b2, fn, params, quiet, out_aval = plan
    o = core.call_impl(fn, quiet, a._value.reshape(a2), b._value.reshape(b2), **params)
    return core.impl_result(lax.dot_general_p, np.reshape(o, out_aval.shape), out_aval)


def matmul(a, b, /, *, precision=None, preferred_element_type=None):
    """``numpy.matmul`` (``@``): 1-D operands are promoted to matrices and the added
    dimension removed; leading dimensions broadcast. One dot_general."""
    if precision is None and preferred_element_type is None:
        out = _eager_matmul(a, b)
        if out is not None:
            return out
    a, b = _dot_dtype_args(a, b, "matmul")
    sa, sb = _aval(a).shape, _aval(b).shape
    if len(sa) == 0 or len(sb) == 0:
        raise ValueError(f"matmul: input operands must not be scalars, got shapes {sa} and "
                         f"{sb}")
    a_vec, b_vec = len(sa) == 1, len(sb) == 1
    if sa[-1] != sb[0 if b_vec else -2]:
        raise ValueError(f"matmul: input operand 1 has a mismatch in its core dimension 0 "
                         f"(size {sb[0 if b_vec else -2]} is different from {sa[-1]}); "
                         f"shapes {sa} and {sb}")
    if a_vec:
        a = lax.reshape(a, (1,) + sa)
    if b_vec:
        b = lax.reshape(b, sb + (1,))
    sa, sb = _aval(a).shape, _aval(b).shape
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
    """The dot product of the flattened arrays, conjugating the first
    (``numpy.vdot``)."""
    from tracer.numpy.ufuncs import conjugate
    a, b = _dot_dtype_args(a, b, "vdot")
    if dtypes.is_complex(_aval(a).dtype):
        a = conjugate(a)
    return dot(ravel(a), ravel(b), precision=precision)


def inner(a, b):
    """Sum over the last axes of both (``numpy.inner``)."""
    a, b = _dot_dtype_args(a, b, "inner")
    na, nb = _aval(a).ndim, _aval(b).ndim
    if na == 0 or nb == 0:
        return lax.mul(*promote_args("inner", a, b))
    return lax.dot_general(a, b, (((na - 1,), (nb - 1,)), ((), ())))


def outer(a, b, out=None):
    """The outer product of the flattened arrays (``numpy.outer``)."""
    a, b = _dot_dtype_args(a, b, "outer")
    a, b = ravel(a), ravel(b)
    return lax.mul(lax.broadcast_in_dim(a, (_aval(a).size, _aval(b).size), (0,)),
                   lax.broadcast_in_dim(b, (_aval(a).size, _aval(b).size), (1,)))


def tensordot(a, b, axes=2, *, precision=None):
    """Contract ``axes`` (a count, or two axis lists) of a and b with one
    dot_general (``numpy.tensordot``)."""
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
    """``sum(conj(x1) * x2)`` along ``axis`` (``numpy.vecdot``, the Array API's vecdot).

    ``axis`` is taken in each operand (as NumPy's gufunc does) and must have the same
    size in both (ValueError otherwise: it does not broadcast); the other axes
    broadcast. The result has the promoted dtype of the inputs (``uint8`` stays
    ``uint8``, unlike ``sum``)."""
    from tracer.numpy.ufuncs import conjugate, multiply
    from tracer.numpy.reductions import sum as _sum
    x1, x2 = _dot_dtype_args(x1, x2, "vecdot")
    s1, s2 = _aval(x1).shape, _aval(x2).shape
    if not s1 or not s2:
        raise ValueError(f"vecdot: operands must have at least one dimension, got shapes "
                         f"{s1} and {s2}")
    a1 = canonicalize_axis_tuple(axis, len(s1), "vecdot")[0]
    a2 = canonicalize_axis_tuple(axis, len(s2), "vecdot")[0]
    if s1[a1] != s2[a2]:
        raise ValueError(f"vecdot: axis {axis} has size {s1[a1]} in x1 (shape {s1}) and "
                         f"{s2[a2]} in x2 (shape {s2}); the contracted axis must match")
    if dtypes.is_complex(_aval(x1).dtype):
        x1 = conjugate(x1)
    prod = multiply(moveaxis(x1, a1, -1), moveaxis(x2, a2, -1))
    return _sum(prod, axis=-1, dtype=_aval(prod).dtype)


def _repeat_traced(a, repeats, ax, total):
    from tracer.numpy.reductions import cumsum
    from tracer.numpy.sorting import searchsorted
    from tracer.numpy.indexing_funcs import take
    n = _aval(a).shape[ax]
    reps = broadcast_to(lax.convert_element_type(repeats, dtypes.default_int_dtype()), (n,))
    ends = cumsum(reps)
    # Output position k comes from the first element whose running total exceeds k.
    src = searchsorted(ends, lax.iota(dtypes.default_int_dtype(), total), side="right")
    src = lax.min(src, lax.full((), builtins.max(n - 1, 0), _aval(src).dtype))
    return take(a, src, axis=ax, mode="clip")


def flip(m, axis=None):
    """Reverse the order of elements along ``axis`` (all axes if None) (``numpy.flip``)."""
    m = as_operand(m)
    axes = canonicalize_axis_tuple(axis, _aval(m).ndim, "flip")
    return lax.rev(m, axes)


def fliplr(m):
    """Reverse axis 1 (``numpy.fliplr``)."""
    return flip(m, 1)


def flipud(m):
    """Reverse axis 0 (``numpy.flipud``)."""
    return flip(m, 0)


def tile(A, reps):
    """Repeat the whole array ``reps`` times per axis (``numpy.tile``)."""
    A = as_operand(A)
    reps = (reps,) if isinstance(reps, (int, np.integer)) else tuple(reps)
    nd = builtins.max(len(reps), _aval(A).ndim)
    A = lax.reshape(A, (1,) * (nd - _aval(A).ndim) + _aval(A).shape)
    reps = (1,) * (nd - len(reps)) + tuple(reps)
    return lax.tile(A, reps)


def repeat(a, repeats, axis=None, *, total_repeat_length=None):
    """``numpy.repeat`` with a static int ``repeats`` (or a static sequence); traced
    ``repeats`` need the static ``total_repeat_length`` (the output length along ``axis``;
    the last element fills any excess, as in JAX)."""
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
    from tracer.core import concrete_or_error, concrete_value
    if total_repeat_length is not None and concrete_value(as_operand(repeats)) is None:
        return _repeat_traced(a, as_operand(repeats), ax, operator.index(total_repeat_length))
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


# ================================ more shape functions ===================================

def _static_int(v, fname, what):
    from tracer.core import concrete_or_error
    return operator.index(concrete_or_error(lambda x: np.asarray(x).item() if
                                            np.ndim(x) == 0 else x, v,
                                            f"in {fname}'s {what} (it must be static)"))


def _static_array(v, fname, what):
    from tracer.core import concrete_or_error
    return concrete_or_error(np.asarray, v, f"in {fname}'s {what}: it must be static (a "
                                            f"Python value or a concrete array) because it "
                                            f"determines the output shape")


def copy(a, order=None):
    """A copy of ``a`` (``numpy.copy``); Arrays are immutable, so this only matters for
    NumPy input."""
    a = as_operand(a, "copy")
    from tracer.core import Array
    if isinstance(a, Array):
        return Array(a._value.copy(), a.weak_type)
    return a


def astype(x, dtype, /, *, copy=False, device=None):
    """``x`` converted to ``dtype`` (Array API ``astype``; complex to real keeps the real
    part, float to int truncates)."""
    x = as_operand(x, "astype")
    return lax.convert_element_type(x, dtypes.canonicalize_dtype(dtype))


def append(arr, values, axis=None):
    """``numpy.append``: ``values`` after ``arr`` (both flattened if ``axis`` is None)."""
    if axis is None:
        return concatenate([ravel(arr), ravel(values)], 0)
    return concatenate([arr, values], axis)


def _split_points(n, indices_or_sections, fname, exact):
    if isinstance(indices_or_sections, (int, np.integer)):
        k = int(indices_or_sections)
        if k <= 0:
            raise ValueError(f"{fname}: number of sections must be larger than 0, got {k}")
        if exact and n % k:
            raise ValueError(f"{fname}: array split does not result in an equal division "
                             f"({n} into {k} sections); use array_split")
        q, r = divmod(n, k)
        sizes = [q + 1] * r + [q] * (k - r)
        return list(np.cumsum([0] + sizes))
    idx = [int(i) for i in _static_array(indices_or_sections, fname, "indices")]
    pts = [0]
    for i in idx:
        i = i + n if i < 0 else i
        pts.append(builtins.min(builtins.max(i, 0), n))
    pts.append(n)
    return pts


def _split(ary, indices_or_sections, axis, fname, exact):
    ary = as_operand(ary, fname)
    (axis,) = canonicalize_axis_tuple(axis, _aval(ary).ndim, fname)
    n = _aval(ary).shape[axis]
    pts = _split_points(n, indices_or_sections, fname, exact)
    out = []
    for s, e in zip(pts[:-1], pts[1:]):
        e = builtins.max(e, s)
        out.append(lax.slice_in_dim(ary, s, e, 1, axis))
    return out


def split(ary, indices_or_sections, axis=0):
    """``numpy.split``: equal sections (ValueError otherwise) or split points."""
    return _split(ary, indices_or_sections, axis, "split", True)


def array_split(ary, indices_or_sections, axis=0):
    """``numpy.array_split``: like ``split`` but sections may differ by one."""
    return _split(ary, indices_or_sections, axis, "array_split", False)


def hsplit(ary, indices_or_sections):
    """``numpy.hsplit``: split along axis 1 (axis 0 for 1-D)."""
    ary = as_operand(ary)
    if _aval(ary).ndim == 0:
        raise ValueError("hsplit only works on arrays of 1 or more dimensions")
    return split(ary, indices_or_sections, 1 if _aval(ary).ndim > 1 else 0)


def vsplit(ary, indices_or_sections):
    """``numpy.vsplit``: split along axis 0 (arrays of 2 or more dimensions)."""
    ary = as_operand(ary)
    if _aval(ary).ndim < 2:
        raise ValueError("vsplit only works on arrays of 2 or more dimensions")
    return split(ary, indices_or_sections, 0)


def dsplit(ary, indices_or_sections):
    """``numpy.dsplit``: split along axis 2 (arrays of 3 or more dimensions)."""
    ary = as_operand(ary)
    if _aval(ary).ndim < 3:
        raise ValueError("dsplit only works on arrays of 3 or more dimensions")
    return split(ary, indices_or_sections, 2)


def unstack(x, /, *, axis=0):
    """Array API ``unstack``: the slices of ``x`` along ``axis``, as a tuple."""
    x = as_operand(x, "unstack")
    if _aval(x).ndim == 0:
        raise ValueError("unstack requires an array of rank >= 1")
    (axis,) = canonicalize_axis_tuple(axis, _aval(x).ndim, "unstack")
    return tuple(lax.index_in_dim(x, i, axis, keepdims=False)
                 for i in range(_aval(x).shape[axis]))


def block(arrays):
    """``numpy.block``: assemble an array from nested lists of blocks (the innermost
    lists concatenate along the last axis)."""
    def depth(a):
        return 1 + depth(a[0]) if isinstance(a, list) and a else (1 if isinstance(a, list)
                                                                  else 0)

    def max_ndim(a):
        if isinstance(a, list):
            return builtins.max((max_ndim(b) for b in a), default=0)
        return _aval(as_operand(a)).ndim

    if isinstance(arrays, tuple):
        raise TypeError("block: arrays is a tuple; only lists can be used to arrange blocks")
    d = depth(arrays)
    nd = builtins.max(max_ndim(arrays), d)

    def rec(a, level):
        if isinstance(a, tuple):
            raise TypeError("block: tuples cannot be used to arrange blocks; use lists")
        if isinstance(a, list):
            if not a:
                raise ValueError("block: lists cannot be empty")
            parts = [rec(b, level + 1) for b in a]
            return concatenate(parts, axis=nd - d + level)
        x = as_operand(a)
        return lax.reshape(x, (1,) * (nd - _aval(x).ndim) + _aval(x).shape)

    return rec(arrays, 0) if isinstance(arrays, list) else as_operand(arrays)


def _take_static(a, idx, axis):
    """``a`` indexed by a static list of in-range integers along ``axis``: runs of
    consecutive indices become slices, joined by one concatenate."""
    pieces = []
    start = prev = None
    for i in idx:
        if start is None:
            start = prev = i
        elif i == prev + 1:
            prev = i
        else:
            pieces.append((start, prev + 1))
            start = prev = i
    if start is not None:
        pieces.append((start, prev + 1))
    if not pieces:
        return lax.slice_in_dim(a, 0, 0, 1, axis)
    parts = [lax.slice_in_dim(a, s, e, 1, axis) for s, e in pieces]
    return parts[0] if len(parts) == 1 else lax.concatenate(parts, axis)


def delete(arr, obj, axis=None, *, assume_unique_indices=False):
    """``numpy.delete``: drop the entries ``obj`` (int, slice, static int sequence or
    boolean mask) along ``axis`` (flattened if None)."""
    arr = as_operand(arr, "delete")
    if axis is None:
        arr = ravel(arr)
        axis = 0
    (axis,) = canonicalize_axis_tuple(axis, _aval(arr).ndim, "delete")
    n = _aval(arr).shape[axis]
    if isinstance(obj, slice):
        drop = set(range(n)[obj])
    else:
        o = _static_array(obj, "delete", "obj")
        if o.dtype == np.bool_:
            if o.shape != (n,):
                raise ValueError(f"delete: boolean array argument obj to delete must be "
                                 f"one dimensional and match the axis length of {n}")
            drop = set(np.nonzero(o)[0].tolist())
        else:
            if o.dtype.kind not in "iu":
                raise IndexError("delete: arrays used as indices must be of integer (or "
                                 "boolean) type")
            o = o.ravel()
            if np.any((o < -n) | (o >= n)):
                raise IndexError(f"delete: index out of bounds for axis {axis} with size {n}")
            drop = set((o % n).tolist()) if n else set()
    return _take_static(arr, [i for i in range(n) if i not in drop], axis)


def insert(arr, obj, values, axis=None):
    """``numpy.insert``: ``values`` inserted before the indices ``obj`` (static) along
    ``axis`` (flattened if None)."""
    arr = as_operand(arr, "insert")
    if axis is None:
        arr = ravel(arr)
        axis = 0
    (axis,) = canonicalize_axis_tuple(axis, _aval(arr).ndim, "insert")
    shape = _aval(arr).shape
    n = shape[axis]
    values = as_operand(values)
    (values,) = [lax.convert_element_type(values, _aval(arr).dtype)]
    if isinstance(obj, slice):
        idx = np.arange(*obj.indices(n))
        scalar = False
    else:
        o = _static_array(obj, "insert", "obj")
        if o.dtype == np.bool_:
            raise IndexError("insert: boolean obj is not supported; use integer indices")
        scalar = o.ndim == 0
        idx = o.ravel().astype(np.int64)
    if np.any((idx < -n) | (idx > n)):
        raise IndexError(f"insert: index out of bounds for axis {axis} with size {n}")
    idx = np.where(idx < 0, idx + n, idx)
    if scalar:
        # As NumPy: values get at least arr's rank (leading ones), then their first axis
        # goes along ``axis`` and all of it is inserted before the index.
        v = values
        if _aval(v).ndim < len(shape):
            v = lax.reshape(v, (1,) * (len(shape) - _aval(v).ndim) + _aval(v).shape)
        v = moveaxis(v, 0, axis)
        vshape = list(shape)
        vshape[axis] = _aval(v).shape[axis]
        v = broadcast_to(v, tuple(vshape))
        k = int(idx[0])
        return concatenate([lax.slice_in_dim(arr, 0, k, 1, axis), v,
                            lax.slice_in_dim(arr, k, n, 1, axis)], axis)
    m = len(idx)
    vshape = list(shape)
    vshape[axis] = m
    v = values
    if _aval(v).ndim == 1 and len(shape) > 1 and _aval(v).shape[0] == m:
        v = lax.broadcast_in_dim(v, tuple(vshape), (axis,))
    v = broadcast_to(v, tuple(vshape))
    order = np.argsort(idx, kind="stable")
    sorted_idx = idx[order]
    pieces = []
    prev = 0
    for j, (pos, src) in enumerate(zip(sorted_idx, order)):
        if pos > prev:
            pieces.append(lax.slice_in_dim(arr, prev, int(pos), 1, axis))
            prev = int(pos)
        pieces.append(lax.slice_in_dim(v, int(src), int(src) + 1, 1, axis))
    if prev < n:
        pieces.append(lax.slice_in_dim(arr, prev, n, 1, axis))
    if not pieces:
        return arr
    return lax.concatenate(pieces, axis)


def diff(a, n=1, axis=-1, prepend=None, append=None):
    """``numpy.diff``: the ``n``-th discrete difference along ``axis`` (bool input gives
    ``!=``)."""
    from tracer.numpy.ufuncs import not_equal, subtract
    a = as_operand(a, "diff")
    nd = _aval(a).ndim
    if nd == 0:
        raise ValueError("diff requires input that is at least one dimensional")
    n = operator.index(n)
    if n < 0:
        raise ValueError(f"diff: order must be non-negative but got {n}")
    (axis,) = canonicalize_axis_tuple(axis, nd, "diff")
    parts = []
    for extra, name in ((prepend, "prepend"), (None, None), (append, "append")):
        if name is None:
            parts.append(a)
        elif extra is not None:
            e = as_operand(extra)
            if _aval(e).ndim == 0:
                shape = list(_aval(a).shape)
                shape[axis] = 1
                e = broadcast_to_shape(e, tuple(shape))
            parts.append(e)
    if len(parts) > 1:
        a = concatenate(parts, axis)
    for _ in range(n):
        m = _aval(a).shape[axis]
        hi = lax.slice_in_dim(a, 1, m, 1, axis)
        lo = lax.slice_in_dim(a, 0, builtins.max(m - 1, 0), 1, axis)
        a = not_equal(hi, lo) if _aval(a).dtype == np.bool_ else subtract(hi, lo)
    return a


def ediff1d(ary, to_end=None, to_begin=None):
    """``numpy.ediff1d``: differences of the flattened array, with optional values
    before and after."""
    a = ravel(as_operand(ary))
    d = diff(a)
    parts = []
    if to_begin is not None:
        parts.append(lax.convert_element_type(ravel(as_operand(to_begin)), _aval(d).dtype))
    parts.append(d)
    if to_end is not None:
        parts.append(lax.convert_element_type(ravel(as_operand(to_end)), _aval(d).dtype))
    return lax.concatenate(parts, 0) if len(parts) > 1 else d


def roll(a, shift, axis=None):
    """``numpy.roll``: elements shifted along ``axis`` (flattened if None) with wrap
    around. A static ``shift`` is two slices and a concatenate; a traced one is a
    dynamic_slice of the axis repeated twice."""
    from tracer.core import concrete_value
    a = as_operand(a, "roll")
    if axis is None:
        return reshape(roll(ravel(a), shift, 0), _aval(a).shape)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    sv = concrete_value(as_operand(shift))
    if sv is None:
        shifts = as_operand(shift)
        if not dtypes.is_integer(_aval(shifts).dtype):
            raise TypeError(f"roll: shift must be integer, got {_aval(shifts).dtype}")
        shifts = [lax.reshape(lax.slice_in_dim(ravel(shifts), i, i + 1, 1, 0), ())
                  for i in range(_aval(shifts).size)]
    else:
        shifts = np.asarray(sv).ravel().tolist()
    if len(shifts) == 1:
        shifts = shifts * len(axes)
    elif len(axes) == 1:
        axes = axes * len(shifts)
    if len(shifts) != len(axes):
        raise ValueError(f"roll: shift {shift} and axis {axis} must have the same length")
    for s, ax in zip(shifts, axes):
        (ax,) = canonicalize_axis_tuple(ax, _aval(a).ndim, "roll")
        n = _aval(a).shape[ax]
        if n == 0:
            continue
        if isinstance(s, (int, np.integer)):
            s = int(s) % n
            if s:
                a = lax.concatenate([lax.slice_in_dim(a, n - s, n, 1, ax),
                                     lax.slice_in_dim(a, 0, n - s, 1, ax)], ax)
        else:
            from tracer.numpy.ufuncs import remainder
            start = remainder(lax.sub(lax.full((), n, _aval(s).dtype), s), n)
            a = lax.dynamic_slice_in_dim(lax.concatenate([a, a], ax), start, n, ax)
    return a


def rollaxis(a, axis, start=0):
    """``numpy.rollaxis``: move ``axis`` to before position ``start``."""
    a = as_operand(a, "rollaxis")
    nd = _aval(a).ndim
    (axis,) = canonicalize_axis_tuple(axis, nd, "rollaxis")
    start = operator.index(start)
    if not -nd <= start <= nd:
        raise np.exceptions.AxisError(f"rollaxis: start {start} out of range for rank {nd}")
    if start < 0:
        start += nd
    if axis < start:
        start -= 1
    return moveaxis(a, axis, start)


def rot90(m, k=1, axes=(0, 1)):
    """``numpy.rot90``: rotate by 90 degrees ``k`` times in the plane ``axes``."""
    m = as_operand(m, "rot90")
    nd = _aval(m).ndim
    if len(axes) != 2:
        raise ValueError("rot90: len(axes) must be 2")
    a0, a1 = canonicalize_axis_tuple(tuple(axes), nd, "rot90")
    k = operator.index(k) % 4
    if k == 0:
        return m
    if k == 2:
        return lax.rev(m, (a0, a1))
    perm = list(range(nd))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return lax.transpose(lax.rev(m, (a1,)), tuple(perm))
    return lax.rev(lax.transpose(m, tuple(perm)), (a1,))


def resize(a, new_shape):
    """``numpy.resize``: the flattened data repeated (or cut) to fill ``new_shape``."""
    a = ravel(as_operand(a, "resize"))
    new_shape = (operator.index(new_shape),) if isinstance(new_shape, (int, np.integer)) \
        else tuple(operator.index(s) for s in new_shape)
    if builtins.any(s < 0 for s in new_shape):
        raise ValueError("resize: all elements of new_shape must be non-negative")
    size = int(np.prod(new_shape, dtype=np.int64))
    n = _aval(a).size
    if n == 0 or size == 0:
        return lax.full(new_shape, 0, _aval(a).dtype)
    reps = -(-size // n)
    flat = lax.tile(a, (reps,)) if reps > 1 else a
    return lax.reshape(lax.slice_in_dim(flat, 0, size, 1, 0), new_shape)


def trim_zeros(filt, trim="fb", axis=None):
    """``numpy.trim_zeros`` of a 1-D array. The output length depends on the data, so
    ``filt`` must be concrete (ConcretizationTypeError under jit)."""
    filt = as_operand(filt, "trim_zeros")
    v = _static_array(filt, "trim_zeros", "filt")
    if v.ndim != 1:
        raise ValueError(f"trim_zeros: expected a 1-D array, got shape {v.shape}")
    nz = np.flatnonzero(v)
    trim = trim.lower()
    if nz.size == 0:
        return lax.slice_in_dim(filt, 0, 0, 1, 0)
    start = int(nz[0]) if "f" in trim else 0
    stop = int(nz[-1]) + 1 if "b" in trim else v.shape[0]
    return lax.slice_in_dim(filt, start, stop, 1, 0)


# ============================== diagonals and triangles ==================================

def _diag_from_last_two(a, offset):
    """The diagonal ``offset`` of the last two axes, by a strided slice of their
    flattening (no gather)."""
    shape = _aval(a).shape
    n, m = shape[-2], shape[-1]
    lead = shape[:-2]
    if offset >= 0:
        length = builtins.max(0, builtins.min(n, m - offset))
        start = offset
    else:
        length = builtins.max(0, builtins.min(n + offset, m))
        start = -offset * m
    flat = lax.reshape(a, lead + (n * m,))
    if length == 0:
        return lax.full(lead + (0,), 0, _aval(a).dtype)
    nd = len(lead)
    end = start + (length - 1) * (m + 1) + 1
    return lax.slice(flat, (0,) * nd + (start,), lead + (end,), (1,) * nd + (m + 1,))


def _diagonal(a, offset=0, axis1=0, axis2=1):
    a = as_operand(a)
    nd = _aval(a).ndim
    if nd < 2:
        raise ValueError(f"diagonal requires an array of at least two dimensions, got shape "
                         f"{_aval(a).shape}")
    i, j = canonicalize_axis_tuple((axis1, axis2), nd, "diagonal")
    rest = [k for k in range(nd) if k not in (i, j)]
    return _diag_from_last_two(lax.transpose(a, tuple(rest) + (i, j)), operator.index(offset))


def _place_diagonal(v, n, m, offset):
    """An (n, m) matrix with the 1-D ``v`` on diagonal ``offset`` and zeros elsewhere: an
    interior pad puts consecutive entries m + 1 apart in the flattening."""
    length = _aval(v).shape[0]
    start = offset if offset >= 0 else -offset * m
    if length == 0 or n * m == 0:
        return lax.full((n, m), 0, _aval(v).dtype)
    last = start + (length - 1) * (m + 1)
    flat = lax.pad(v, lax.full((), 0, _aval(v).dtype), [(start, n * m - last - 1, m)])
    return lax.reshape(flat, (n, m))


def diag(v, k=0):
    """``numpy.diag``: the k-th diagonal of a 2-D array, or a 2-D array with the 1-D
    ``v`` on its k-th diagonal."""
    v = as_operand(v, "diag")
    k = operator.index(k)
    nd = _aval(v).ndim
    if nd == 1:
        n = _aval(v).shape[0] + builtins.abs(k)
        return _place_diagonal(v, n, n, k)
    if nd == 2:
        return _diag_from_last_two(v, k)
    raise ValueError(f"diag: input must be 1-D or 2-D, got shape {_aval(v).shape}")


def diagonal(a, offset=0, axis1=0, axis2=1):
    """``numpy.diagonal``: the ``offset`` diagonal of the (axis1, axis2) planes, moved to
    the last axis (length max(0, min(n, m - offset)) for offset >= 0). A strided slice
    of the flattened plane, so it differentiates and batches like any slice."""
    return _diagonal(as_operand(a, "diagonal"), operator.index(offset), axis1, axis2)


def diagflat(v, k=0):
    """``numpy.diagflat``: the flattened ``v`` on the k-th diagonal of a 2-D array."""
    return diag(ravel(as_operand(v, "diagflat")), k)


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """``numpy.trace``: the sum along a diagonal."""
    from tracer.numpy.reductions import sum as _sum
    if out is not None:
        raise NotImplementedError("trace: the out argument is not supported")
    return _sum(_diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


def fill_diagonal(a, val, wrap=False, *, inplace=True):
    """``numpy.fill_diagonal`` as a function (Arrays are immutable, so pass
    ``inplace=False``, as in JAX): ``a`` with its main diagonal set to ``val`` (repeated
    cyclically); ``wrap`` continues the diagonal of tall 2-D matrices."""
    if inplace:
        raise NotImplementedError("fill_diagonal: Arrays are immutable; call "
                                  "fill_diagonal(a, val, inplace=False) and use the result")
    a = as_operand(a, "fill_diagonal")
    shape = _aval(a).shape
    nd = len(shape)
    if nd < 2:
        raise ValueError("fill_diagonal: array must be at least 2-d")
    if nd > 2 and builtins.any(s != shape[0] for s in shape):
        raise ValueError(f"fill_diagonal: all dimensions of input must be of equal length, "
                         f"got shape {shape}")
    total = int(np.prod(shape, dtype=np.int64))
    if nd == 2:
        n, m = shape
        step = m + 1
        count = builtins.min(n, m) if not wrap else -(-total // step)
    else:
        step = int(np.sum(np.cumprod((1,) + shape[:0:-1])))
        count = shape[0]
    if total == 0 or count == 0:
        return a
    v = lax.convert_element_type(ravel(as_operand(val)), _aval(a).dtype)
    nv = _aval(v).shape[0]
    if nv == 0:
        return a
    reps = -(-count // nv)
    vals = lax.slice_in_dim(lax.tile(v, (reps,)) if reps > 1 else v, 0, count, 1, 0)
    last = (count - 1) * step
    placed = lax.pad(vals, lax.full((), 0, _aval(a).dtype), [(0, total - last - 1, step - 1)])
    iota = lax.iota(np.int64 if total > 2 ** 31 - 1 else np.int32, total)
    idx_dt = _aval(iota).dtype
    on_diag = lax.bitwise_and(
        lax.eq(lax.rem(iota, lax.full((), step, idx_dt)), lax.full((), 0, idx_dt)),
        lax.le(iota, lax.full((), last, idx_dt)))
    return lax.reshape(lax.select(on_diag, placed, ravel(a)), shape)


def _tri_mask(n, m, k, lower):
    r = lax.broadcasted_iota(np.int64, (n, m), 0)
    c = lax.broadcasted_iota(np.int64, (n, m), 1)
    d = lax.sub(c, r)
    kk = lax.full((), k, np.int64)
    return lax.le(d, kk) if lower else lax.ge(d, kk)


def tril(m, k=0):
    """``numpy.tril``: zeros above diagonal ``k`` of the last two axes."""
    m = as_operand(m, "tril")
    shape = _aval(m).shape
    if len(shape) < 2:
        raise ValueError(f"tril: input must be at least 2-D, got shape {shape}")
    mask = lax.broadcast_in_dim(_tri_mask(shape[-2], shape[-1], operator.index(k), True),
                                shape, (len(shape) - 2, len(shape) - 1))
    return lax.select(mask, m, lax.full_like(m, 0))


def triu(m, k=0):
    """``numpy.triu``: zeros below diagonal ``k`` of the last two axes."""
    m = as_operand(m, "triu")
    shape = _aval(m).shape
    if len(shape) < 2:
        raise ValueError(f"triu: input must be at least 2-D, got shape {shape}")
    mask = lax.broadcast_in_dim(_tri_mask(shape[-2], shape[-1], operator.index(k), False),
                                shape, (len(shape) - 2, len(shape) - 1))
    return lax.select(mask, m, lax.full_like(m, 0))


# =================================== products ============================================

def kron(a, b):
    """``numpy.kron``: the Kronecker product (ranks aligned by leading ones)."""
    from tracer.numpy.ufuncs import multiply
    a, b = promote_dtypes(a, b)
    na, nb = _aval(a).ndim, _aval(b).ndim
    nd = builtins.max(na, nb)
    a = lax.reshape(a, (1,) * (nd - na) + _aval(a).shape)
    b = lax.reshape(b, (1,) * (nd - nb) + _aval(b).shape)
    sa, sb = _aval(a).shape, _aval(b).shape
    ea = lax.reshape(a, tuple(x for s in sa for x in (s, 1)))
    eb = lax.reshape(b, tuple(x for s in sb for x in (1, s)))
    out = multiply(ea, eb)
    return lax.reshape(out, tuple(x * y for x, y in zip(sa, sb)))


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """``numpy.cross``: the cross product of 2- or 3-vectors along the given axes (2-vectors
    get a zero third component; two 2-vectors give the scalar z component)."""
    from tracer.numpy.ufuncs import multiply, subtract
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = promote_dtypes(a, b)
    a = moveaxis(a, axisa, -1)
    b = moveaxis(b, axisb, -1)
    na, nb = _aval(a).shape[-1], _aval(b).shape[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise ValueError(f"cross: incompatible dimensions for cross product (dimension must "
                         f"be 2 or 3), got {na} and {nb}")

    def comp(x, i):
        return lax.index_in_dim(x, i, -1 % _aval(x).ndim, keepdims=False)

    a0, a1 = comp(a, 0), comp(a, 1)
    b0, b1 = comp(b, 0), comp(b, 1)
    z = subtract(multiply(a0, b1), multiply(a1, b0))
    if na == 2 and nb == 2:
        return z
    a2 = comp(a, 2) if na == 3 else None
    b2 = comp(b, 2) if nb == 3 else None
    if a2 is None:
        x = multiply(a1, b2)
        y = subtract(lax.full_like(x, 0), multiply(a0, b2))
    elif b2 is None:
        x = subtract(lax.full_like(a2, 0), multiply(a2, b1))
        y = multiply(a2, b0)
    else:
        x = subtract(multiply(a1, b2), multiply(a2, b1))
        y = subtract(multiply(a2, b0), multiply(a0, b2))
    x, y, z = broadcast_arrays(x, y, z)
    out = stack([x, y, z], axis=-1)
    return moveaxis(out, -1, axisc)


def matvec(x1, x2, /):
    """``numpy.matvec``: matrix-vector products over broadcast leading dimensions,
    (..., m, n) x (..., n) -> (..., m)."""
    x1, x2 = _dot_dtype_args(x1, x2, "matvec")
    if _aval(x1).ndim < 2 or _aval(x2).ndim < 1:
        raise ValueError(f"matvec: need a matrix and a vector, got shapes {_aval(x1).shape} "
                         f"and {_aval(x2).shape}")
    return lax.squeeze(matmul(x1, lax.expand_dims(x2, (-1 % (_aval(x2).ndim + 1),))),
                       (-1 % (builtins.max(_aval(x1).ndim, _aval(x2).ndim + 1)),))


def vecmat(x1, x2, /):
    """``numpy.vecmat``: conj(vector)-matrix products over broadcast leading dimensions,
    (..., n) x (..., n, m) -> (..., m)."""
    from tracer.numpy.ufuncs import conjugate
    x1, x2 = _dot_dtype_args(x1, x2, "vecmat")
    if _aval(x1).ndim < 1 or _aval(x2).ndim < 2:
        raise ValueError(f"vecmat: need a vector and a matrix, got shapes {_aval(x1).shape} "
                         f"and {_aval(x2).shape}")
    x1 = conjugate(x1)
    out = matmul(lax.expand_dims(x1, (_aval(x1).ndim - 1,)), x2)
    return lax.squeeze(out, (_aval(out).ndim - 2,))


# ================================ functional helpers =====================================

def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """``numpy.apply_along_axis``: ``func1d`` applied to the 1-D slices along ``axis``
    (by vmap over the other axes); the result's axes replace ``axis``."""
    from tracer.api import vmap
    arr = as_operand(arr, "apply_along_axis")
    nd = _aval(arr).ndim
    (axis,) = canonicalize_axis_tuple(axis, nd, "apply_along_axis")

    def f(x):
        return func1d(x, *args, **kwargs)

    for i in range(1, nd - axis):
        f = vmap(f, in_axes=-1, out_axes=-1)
    for i in range(axis):
        f = vmap(f, in_axes=0, out_axes=0)
    return f(arr)


def apply_over_axes(func, a, axes):
    """``numpy.apply_over_axes``: ``func(a, axis)`` for each axis in turn, keeping the
    rank (a result one rank lower gets the axis back)."""
    a = as_operand(a, "apply_over_axes")
    for ax in ((axes,) if isinstance(axes, (int, np.integer)) else axes):
        b = func(a, ax)
        if _aval(b).ndim == _aval(a).ndim - 1:
            b = expand_dims(b, ax)
        elif _aval(b).ndim != _aval(a).ndim:
            raise ValueError("apply_over_axes: function is not returning an array of the "
                             "correct shape")
        a = b
    return a


def piecewise(x, condlist, funclist, *args, **kw):
    """``numpy.piecewise``: ``funclist[i]`` (or a constant) where ``condlist[i]``, later
    conditions winning; one extra function is the default where no condition holds.
    Every function is evaluated on all of ``x`` (as JAX does under jit)."""
    x = as_operand(x, "piecewise")
    if isinstance(condlist, (list, tuple)):
        conds = [as_operand(c) for c in condlist]
    else:
        c = as_operand(condlist)
        conds = [c] if _aval(c).ndim == _aval(x).ndim or _aval(c).ndim == 0 else \
            [lax.index_in_dim(c, i, 0, False) for i in range(_aval(c).shape[0])]
    n = len(conds)
    if len(funclist) not in (n, n + 1):
        raise ValueError(f"piecewise: with {n} condition(s), either {n} or {n + 1} functions "
                         f"are needed, got {len(funclist)}")

    def value(f):
        if callable(f):
            return as_operand(f(x, *args, **kw))
        return as_operand(f)

    out_dt = _aval(x).dtype
    if len(funclist) == n + 1:
        out = value(funclist[-1])
    else:
        out = lax.full_like(x, 0)
    out = broadcast_to_shape(lax.convert_element_type(out, out_dt), _aval(x).shape)
    for c, f in zip(conds, funclist[:n]):
        c = broadcast_to_shape(c if _aval(c).dtype == np.bool_ else
                               lax.ne(c, lax.full_like(c, 0)), _aval(x).shape)
        v = broadcast_to_shape(lax.convert_element_type(value(f), out_dt), _aval(x).shape)
        out = lax.select(c, v, out)
    return out


# ========================================= pad ===========================================

def _pad_pairs(value, nd, fname, what):
    """NumPy's broadcasting of pad widths / values to one (before, after) pair per axis."""
    arr = np.asarray(value, dtype=object)
    if arr.ndim == 0:
        return [(value, value)] * nd
    if arr.shape == (1,):
        return [(arr[0], arr[0])] * nd
    if arr.shape == (2,):
        return [(arr[0], arr[1])] * nd
    if arr.shape == (1, 2):
        return [(arr[0, 0], arr[0, 1])] * nd
    if arr.shape == (nd, 1):
        return [(arr[i, 0], arr[i, 0]) for i in range(nd)]
    if arr.shape == (nd, 2):
        return [(arr[i, 0], arr[i, 1]) for i in range(nd)]
    raise ValueError(f"{fname}: {what} of shape {arr.shape} cannot be broadcast to "
                     f"({nd}, 2)")


def _edge(x, axis, side, width):
    n = _aval(x).shape[axis]
    e = lax.slice_in_dim(x, 0, 1, 1, axis) if side == 0 else \
        lax.slice_in_dim(x, n - 1, n, 1, axis)
    shape = list(_aval(x).shape)
    shape[axis] = width
    return broadcast_to_shape(e, tuple(shape))


def _cat(parts, axis):
    parts = [p for p in parts if p is not None and _aval(p).shape[axis] > 0] or parts[1:2]
    return parts[0] if len(parts) == 1 else lax.concatenate(parts, axis)


def _pad_reflect(x, axis, before, after, include_edge, odd):
    from tracer.numpy.ufuncs import multiply, subtract
    n = _aval(x).shape[axis]
    while before > 0 or after > 0:
        L = _aval(x).shape[axis]
        limit = (L // n) * n if include_edge else ((L - 1) // (n - 1)) * (n - 1)
        left = right = None
        if before > 0:
            c = builtins.min(limit, before)
            chunk = lax.rev(lax.slice_in_dim(x, 0 if include_edge else 1,
                                             c + (0 if include_edge else 1), 1, axis), (axis,))
            if odd:
                chunk = subtract(multiply(2, _edge(x, axis, 0, c)), chunk)
            left, before = chunk, before - c
        if after > 0:
            c = builtins.min(limit, after)
            stop = L if include_edge else L - 1
            chunk = lax.rev(lax.slice_in_dim(x, stop - c, stop, 1, axis), (axis,))
            if odd:
                chunk = subtract(multiply(2, _edge(x, axis, 1, c)), chunk)
            right, after = chunk, after - c
        x = _cat([left, x, right], axis)
    return x


def _pad_wrap(x, axis, before, after):
    n = _aval(x).shape[axis]
    total = n + before + after
    start = (-before) % n
    reps = -(-(start + total) // n)
    nd = _aval(x).ndim
    tiled = lax.tile(x, tuple(reps if i == axis else 1 for i in range(nd))) if reps > 1 else x
    return lax.slice_in_dim(tiled, start, start + total, 1, axis)


def _pad_stat(x, axis, before, after, stat_length, mode):
    from tracer.numpy import reductions as red
    n = _aval(x).shape[axis]
    dt = _aval(x).dtype
    parts = []
    for side, width, sl in ((0, before, stat_length[0]), (1, after, stat_length[1])):
        if width == 0:
            parts.append(None)
            continue
        k = n if sl is None else builtins.min(builtins.max(int(sl), 0), n)
        if k == 0:
            raise ValueError(f"pad: stat_length of 0 for axis {axis} makes mode {mode!r} "
                             f"undefined")
        region = lax.slice_in_dim(x, 0, k, 1, axis) if side == 0 else \
            lax.slice_in_dim(x, n - k, n, 1, axis)
        if mode == "maximum":
            v = red.max(region, axis=axis, keepdims=True)
        elif mode == "minimum":
            v = red.min(region, axis=axis, keepdims=True)
        elif mode == "mean":
            v = red.mean(region, axis=axis, keepdims=True)
        else:
            from tracer.numpy.sorting import median
            v = median(region, axis=axis, keepdims=True)
        if dtypes.is_integer(dt) and dtypes.is_inexact(_aval(v).dtype):
            from tracer.numpy.ufuncs import rint
            v = rint(v)
        v = lax.convert_element_type(v, dt)
        shape = list(_aval(x).shape)
        shape[axis] = width
        parts.append(broadcast_to_shape(v, tuple(shape)))
    return _cat([parts[0], x, parts[1]], axis)


def _pad_linear_ramp(x, axis, before, after, ends):
    from tracer.numpy.creation import linspace
    dt = _aval(x).dtype
    parts = []
    for side, width, end in ((0, before, ends[0]), (1, after, ends[1])):
        if width == 0:
            parts.append(None)
            continue
        edge = _edge(x, axis, side, 1)
        endv = broadcast_to_shape(lax.convert_element_type(as_operand(end), dt),
                                  _aval(edge).shape)
        ramp = linspace(endv, edge, width, endpoint=False, dtype=dt, axis=axis)
        ramp = lax.squeeze(ramp, (axis + 1,))
        parts.append(ramp if side == 0 else lax.rev(ramp, (axis,)))
    return _cat([parts[0], x, parts[1]], axis)


def pad(array, pad_width, mode="constant", **kwargs):
    """``numpy.pad`` with static widths. Modes: constant (``constant_values``), empty (as
    zeros), edge, wrap, reflect and symmetric (``reflect_type`` 'even'/'odd'),
    linear_ramp (``end_values``), maximum, minimum, mean, median (``stat_length``), or a
    callable ``f(vector, iaxis_pad_width, iaxis, kwargs)`` returning the padded vector."""
    x = as_operand(array, "pad")
    nd = _aval(x).ndim
    widths = _pad_pairs(_static_array(pad_width, "pad", "pad_width").tolist()
                        if not isinstance(pad_width, (int, np.integer)) else pad_width,
                        nd, "pad", "pad_width")
    widths = [(operator.index(b), operator.index(a)) for b, a in widths]
    if builtins.any(b < 0 or a < 0 for b, a in widths):
        raise ValueError(f"pad: index can't contain negative values, got {pad_width}")
    if callable(mode):
        return _pad_callable(x, widths, mode, kwargs)
    allowed = {"constant": {"constant_values"}, "empty": set(), "edge": set(), "wrap": set(),
               "reflect": {"reflect_type"}, "symmetric": {"reflect_type"},
               "linear_ramp": {"end_values"}, "maximum": {"stat_length"},
               "minimum": {"stat_length"}, "mean": {"stat_length"},
               "median": {"stat_length"}}
    if mode not in allowed:
        raise ValueError(f"pad: mode {mode!r} is not supported; choose one of "
                         f"{sorted(allowed)} or pass a function")
    extra = set(kwargs) - allowed[mode]
    if extra:
        raise ValueError(f"pad: unsupported keyword arguments for mode {mode!r}: "
                         f"{sorted(extra)}")
    if mode in ("constant", "empty"):
        vals = _pad_pairs(kwargs.get("constant_values", 0), nd, "pad", "constant_values")
        for ax, ((b, a), (vb, va)) in enumerate(zip(widths, vals)):
            for side, w, v in ((0, b, vb), (1, a, va)):
                if w:
                    cfg = [(0, 0, 0)] * nd
                    cfg[ax] = (w, 0, 0) if side == 0 else (0, w, 0)
                    v = lax.convert_element_type(as_operand(v), _aval(x).dtype)
                    x = lax.pad(x, v, cfg)
        return x
    for ax, (b, a) in enumerate(widths):
        if b == 0 and a == 0:
            continue
        n = _aval(x).shape[ax]
        if n == 0:
            raise ValueError(f"pad: can't extend empty axis {ax} using modes other than "
                             f"'constant' or 'empty'")
        if mode == "edge" or (mode == "reflect" and n == 1):
            x = _cat([_edge(x, ax, 0, b), x, _edge(x, ax, 1, a)], ax)
        elif mode == "wrap":
            x = _pad_wrap(x, ax, b, a)
        elif mode in ("reflect", "symmetric"):
            rt = kwargs.get("reflect_type", "even")
            if rt not in ("even", "odd"):
                raise ValueError(f"pad: reflect_type must be 'even' or 'odd', got {rt!r}")
            x = _pad_reflect(x, ax, b, a, mode == "symmetric", rt == "odd")
        elif mode == "linear_ramp":
            ends = _pad_pairs(kwargs.get("end_values", 0), nd, "pad", "end_values")[ax]
            x = _pad_linear_ramp(x, ax, b, a, ends)
        else:
            sl = _pad_pairs(kwargs.get("stat_length", None), nd, "pad", "stat_length")[ax]
            x = _pad_stat(x, ax, b, a, sl, mode)
    return x


def _pad_callable(x, widths, fn, kwargs):
    """NumPy's callable pad mode: zero-pad, then call ``fn`` on every 1-D slice along each
    axis in turn (by vmap over the other axes)."""
    from tracer.api import vmap
    x = pad(x, [list(w) for w in widths], "constant")
    nd = _aval(x).ndim
    for ax in range(nd):
        def f(v, ax=ax):
            out = fn(v, widths[ax], ax, kwargs)
            return as_operand(out)
        g = f
        for _ in range(nd - 1):
            g = vmap(g)
        x = moveaxis(g(moveaxis(x, ax, -1)), -1, ax)
    return x
