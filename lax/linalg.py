"""Contractions: DotGeneral and Dot (XLA Operation semantics, 'DotGeneral', 'Dot').

Decompositions (cholesky, triangular_solve, lu, qr, eigh, svd) are added to this family
by their own work item."""
from __future__ import annotations

import functools
import itertools
import math
import operator

import numpy as np

from tracer import dtypes
from tracer.core import Primitive, ShapedArray, get_aval
from tracer.interpreters import ad, batching
from tracer.interpreters.ad import Zero
from lax.utils import _any, _bool, check_dtype, np_errstate, promote_weak_scalars
from lax import shapes

DotDimensionNumbers = tuple  # ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))


class Precision:
    DEFAULT = "DEFAULT"
    HIGH = "HIGH"
    HIGHEST = "HIGHEST"


def _canon_dimension_numbers(dimension_numbers):
    (lc, rc), (lb, rb) = dimension_numbers
    t = lambda xs: tuple(operator.index(i) for i in xs)
    return ((t(lc), t(rc)), (t(lb), t(rb)))


def _canon_precision(precision):
    if precision is None:
        return None
    if isinstance(precision, (tuple, list)):
        return tuple(str(p) for p in precision)
    return str(precision)


def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None):
    """General tensor contraction (XLA 'DotGeneral').

    ``dimension_numbers = ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))``.
    Output shape: batch dims, then lhs free dims, then rhs free dims (each in order).
    Operands share a dtype (bool: logical or-of-ands); ``preferred_element_type`` sets the
    result dtype (accumulation happens in it). ``precision`` is accepted and ignored on CPU.
    Raises TypeError for mismatched contracting/batch sizes or dtypes.
    """
    lhs, rhs = promote_weak_scalars("dot_general", lhs, rhs)
    dn = _canon_dimension_numbers(dimension_numbers)
    pet = None if preferred_element_type is None else \
        dtypes.canonicalize_dtype(preferred_element_type)
    return dot_general_p.bind(lhs, rhs, dimension_numbers=dn,
                              precision=_canon_precision(precision),
                              preferred_element_type=pet)


def _dot_general_abstract_eval(lhs, rhs, *, dimension_numbers, precision,
                               preferred_element_type):
    (lc, rc), (lb, rb) = dimension_numbers
    name = "dot_general"
    check_dtype(name, lhs, _any, "lhs")
    if lhs.dtype != rhs.dtype:
        raise TypeError(f"{name} requires operands of the same dtype, got {lhs.str_short()} "
                        f"and {rhs.str_short()}; convert one (tracer.numpy promotes)")
    for side, dims, aval in (("lhs contracting", lc, lhs), ("rhs contracting", rc, rhs),
                             ("lhs batch", lb, lhs), ("rhs batch", rb, rhs)):
        if any(not 0 <= d < aval.ndim for d in dims) or len(set(dims)) != len(dims):
            raise TypeError(f"{name}: {side} dimensions {dims} out of range or repeated for "
                            f"{aval.str_short()}")
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise TypeError(f"{name}: contracting {lc}/{rc} and batch {lb}/{rb} dimensions must "
                        "pair up")
    if set(lc) & set(lb) or set(rc) & set(rb):
        raise TypeError(f"{name}: a dimension cannot be both contracting and batch")
    for a, b in zip(lc, rc):
        if lhs.shape[a] != rhs.shape[b]:
            raise TypeError(f"{name}: contracting dimension sizes differ: lhs {lhs.str_short()} "
                            f"dim {a} vs rhs {rhs.str_short()} dim {b}")
    for a, b in zip(lb, rb):
        if lhs.shape[a] != rhs.shape[b]:
            raise TypeError(f"{name}: batch dimension sizes differ: lhs {lhs.str_short()} "
                            f"dim {a} vs rhs {rhs.str_short()} dim {b}")
    lfree = [lhs.shape[i] for i in range(lhs.ndim) if i not in lc and i not in lb]
    rfree = [rhs.shape[i] for i in range(rhs.ndim) if i not in rc and i not in rb]
    shape = tuple(lhs.shape[i] for i in lb) + tuple(lfree) + tuple(rfree)
    dt = lhs.dtype if preferred_element_type is None else preferred_element_type
    return ShapedArray(shape, dt, lhs.weak_type and rhs.weak_type)


@functools.lru_cache(maxsize=4096)
def _dot_general_plan(lshape, rshape, ldt, out_dt, dimension_numbers):
    """The transposes and shapes of one dot_general as a batched matmul, cached by shapes:
    loops on the NumPy tier call the same dot thousands of times."""
    (lc, rc), (lb, rb) = dimension_numbers
    lfree = [i for i in range(len(lshape)) if i not in lc and i not in lb]
    rfree = [i for i in range(len(rshape)) if i not in rc and i not in rb]
    B = math.prod(lshape[i] for i in lb)
    M = math.prod(lshape[i] for i in lfree)
    N = math.prod(rshape[i] for i in rfree)
    K = math.prod(lshape[i] for i in lc)
    lperm = tuple(lb) + tuple(lfree) + tuple(lc)
    rperm = tuple(rb) + tuple(rc) + tuple(rfree)
    shape = tuple(lshape[i] for i in lb) + tuple(lshape[i] for i in lfree) + \
        tuple(rshape[i] for i in rfree)
    if dtypes.is_lowp(ldt) or dtypes.is_lowp(out_dt):
        # bf16 x bf16 (float8, int4...) accumulates in float32 (int32) and rounds once to
        # the result dtype, as XLA's CPU dot does; a wider preferred type accumulates in it
        wide = np.dtype(np.int32) if dtypes.is_integer(ldt) else np.dtype(np.float32)
        compute_dt = out_dt if not dtypes.is_lowp(out_dt) and \
            out_dt.itemsize >= wide.itemsize else wide
    else:
        compute_dt = out_dt if dtypes.promote_types(ldt, out_dt) == out_dt else ldt
    return lperm, (B, M, K), rperm, (B, K, N), shape, compute_dt


def _dot_general_impl(lhs, rhs, *, dimension_numbers, precision, preferred_element_type):
    out_dt = lhs.dtype if preferred_element_type is None else np.dtype(preferred_element_type)
    try:
        fn = dot_general_fn(lhs.shape, rhs.shape, lhs.dtype, rhs.dtype, out_dt,
                            dimension_numbers)
    except TypeError:   # dimension numbers given as lists (a rule that built its own)
        (lc, rc), (lb, rb) = dimension_numbers
        dn = ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb)))
        fn = dot_general_fn(lhs.shape, rhs.shape, lhs.dtype, rhs.dtype, out_dt, dn)
    return fn(lhs, rhs)


@functools.lru_cache(maxsize=4096)
def dot_general_fn(lshape, rshape, ldt, rdt, out_dt, dimension_numbers):
    """``(lhs, rhs) -> out``: one dot_general on NumPy arrays of these shapes and dtypes, as
    NumPy's matmul of the operands' transposes reshaped to ``(B, M, K) @ (B, K, N)``.
    Made once per shapes: the NumPy tier runs a loop body's products thousands of times,
    and the compiled tier's library calls use the same functions (the same bits). A
    product of two matrices, or of their transposes, needs no reshape or cast: it calls
    matmul on the operands or their ``.T`` views, as the batched form does inside."""
    lperm, (B, M, K), rperm, (_, _, N), shape, compute_dt = _dot_general_plan(
        lshape, rshape, ldt, out_dt, dimension_numbers)
    lid = lperm == tuple(range(len(lshape)))
    rid = rperm == tuple(range(len(rshape)))
    matmul = np.matmul
    if (B == 1 and ldt != np.bool_ and compute_dt == ldt == rdt == out_dt
            and len(lshape) == 2 == len(rshape) and shape == (M, N)):
        if lid and rid:
            return matmul
        if rid:
            return lambda lhs, rhs: matmul(lhs.T, rhs)
        if lid:
            return lambda lhs, rhs: matmul(lhs, rhs.T)
        return lambda lhs, rhs: matmul(lhs.T, rhs.T)
    lshape3, rshape3 = (B, M, K), (B, K, N)

    def dot(lhs, rhs):
        a = (lhs if lid else lhs.transpose(lperm)).reshape(lshape3)
        b = (rhs if rid else rhs.transpose(rperm)).reshape(rshape3)
        if ldt == np.bool_:
            out = (a.astype(np.int64) @ b.astype(np.int64)) > 0
        else:
            out = matmul(a.astype(compute_dt, copy=False), b.astype(compute_dt, copy=False))
        return out.reshape(shape).astype(out_dt, copy=False)

    return dot


def _ranges_like(*xs):
    start = 0
    for x in xs:
        yield range(start, start + len(x))
        start += len(x)


def _remaining(original, *removed_lists):
    removed = set(itertools.chain(*removed_lists))
    return [i for i in original if i not in removed]


def _dot_general_transpose_lhs(ct, x, y, *, dimension_numbers, precision,
                               preferred_element_type, swap_ans=False):
    (x_contract, y_contract), (x_batch, y_batch) = dimension_numbers
    x_aval = x.aval if ad.is_undefined_primal(x) else get_aval(x)
    x_ndim = x_aval.ndim
    y_ndim = (y.aval if ad.is_undefined_primal(y) else get_aval(y)).ndim
    x_kept = _remaining(range(x_ndim), x_contract, x_batch)
    y_kept = _remaining(range(y_ndim), y_contract, y_batch)
    if swap_ans:
        ans_batch, ans_y, _ = _ranges_like(x_batch, y_kept, x_kept)
    else:
        ans_batch, _, ans_y = _ranges_like(x_batch, x_kept, y_kept)
    dims = ((tuple(ans_y), tuple(y_kept)), (tuple(ans_batch), tuple(y_batch)))
    x_contract_sorted_by_y = list(np.take(x_contract, np.argsort(y_contract))) if x_contract \
        else []
    out_axes = np.argsort(list(x_batch) + x_kept + x_contract_sorted_by_y)
    pet = None if preferred_element_type is None else x_aval.dtype
    if pet is not None and pet == get_aval(ct).dtype:
        pet = None
    from lax.elementwise import convert_element_type
    ct_ = ct
    if get_aval(ct).dtype != get_aval(y).dtype:
        ct_ = convert_element_type(ct, get_aval(y).dtype)
    out = dot_general(ct_, y, dims, precision=precision, preferred_element_type=None)
    out = shapes.transpose(out, tuple(int(i) for i in out_axes))
    if get_aval(out).dtype != x_aval.dtype:
        out = convert_element_type(out, x_aval.dtype)
    return out


def _dot_general_transpose_rhs(ct, x, y, *, dimension_numbers, precision,
                               preferred_element_type):
    (x_contract, y_contract), (x_batch, y_batch) = dimension_numbers
    swapped = ((y_contract, x_contract), (y_batch, x_batch))
    return _dot_general_transpose_lhs(ct, y, x, dimension_numbers=swapped, precision=precision,
                                      preferred_element_type=preferred_element_type,
                                      swap_ans=True)


def _dot_general_jvp(primals, tangents, **params):
    (x, y), (gx, gy) = primals, tangents
    out = dot_general_p.bind(x, y, **params)
    t = None
    if type(gx) is not Zero:
        t = dot_general_p.bind(gx, y, **params)
    if type(gy) is not Zero:
        ty = dot_general_p.bind(x, gy, **params)
        t = ty if t is None else ad.add_tangents(t, ty)
    return [out], [Zero.from_primal_value(out) if t is None else t]


def _dot_general_transpose(cts, x, y, **params):
    (ct,) = cts
    if type(ct) is Zero:
        return [None, None]
    if ad.is_undefined_primal(x) and ad.is_undefined_primal(y):
        raise ValueError("dot_general transpose: both operands are linear")
    if ad.is_undefined_primal(x):
        return [_dot_general_transpose_lhs(ct, x, y, **params), None]
    return [None, _dot_general_transpose_rhs(ct, x, y, **params)]


def _bump(dims, d):
    """Operand dimension indices after inserting a new axis at position ``d``."""
    return tuple(i + (i >= d) for i in dims)


def _dot_general_batch(axis_data, vals, dims, *, dimension_numbers, precision,
                       preferred_element_type):
    # The batch axis stays where it is: only the dimension numbers change, so no operand
    # is transposed or copied.
    (x, y), (dx, dy) = vals, dims
    (lc, rc), (lb, rb) = dimension_numbers
    params = dict(precision=precision, preferred_element_type=preferred_element_type)
    if dx is not None and dy is not None:
        dn = ((_bump(lc, dx), _bump(rc, dy)), ((dx,) + _bump(lb, dx), (dy,) + _bump(rb, dy)))
        return [dot_general_p.bind(x, y, dimension_numbers=dn, **params)], [0]
    if dx is not None:
        lc2, lb2 = _bump(lc, dx), _bump(lb, dx)
        dn = ((lc2, rc), (lb2, rb))
        # The batch axis is a free lhs dim: free dims keep their order after the batch dims.
        n_before = sum(1 for i in range(dx) if i not in lc2 and i not in lb2)
        return [dot_general_p.bind(x, y, dimension_numbers=dn, **params)], [len(lb) + n_before]
    rc2, rb2 = _bump(rc, dy), _bump(rb, dy)
    dn = ((lc, rc2), (lb, rb2))
    x_ndim = get_aval(x).ndim
    n_lfree = x_ndim - len(lc) - len(lb)
    n_before = sum(1 for i in range(dy) if i not in rc2 and i not in rb2)
    return [dot_general_p.bind(x, y, dimension_numbers=dn, **params)], \
        [len(lb) + n_lfree + n_before]


dot_general_p = Primitive("dot_general")
dot_general_p.def_abstract_eval(_dot_general_abstract_eval)
dot_general_p.def_impl(np_errstate(_dot_general_impl))
ad.primitive_jvps[dot_general_p] = _dot_general_jvp
ad.primitive_transposes[dot_general_p] = _dot_general_transpose
batching.primitive_batchers[dot_general_p] = _dot_general_batch


def dot(lhs, rhs, precision=None, preferred_element_type=None):
    """Vector/matrix products (XLA 'Dot'): 1-D·1-D -> scalar, 2-D·1-D, 1-D·2-D, 2-D·2-D.
    Contracts the last dim of ``lhs`` with the first of ``rhs``."""
    la, ra = get_aval(lhs), get_aval(rhs)
    if la.ndim not in (1, 2) or ra.ndim not in (1, 2):
        raise TypeError(f"dot: operands must be 1-D or 2-D, got {la.str_short()} and "
                        f"{ra.str_short()}; use dot_general for higher ranks")
    return dot_general(lhs, rhs, (((la.ndim - 1,), (0,)), ((), ())), precision,
                       preferred_element_type)


def batch_matmul(lhs, rhs, precision=None):
    """Batched matrix product over leading dims: (..., m, k) @ (..., k, n)."""
    la, ra = get_aval(lhs), get_aval(rhs)
    if la.ndim < 2 or la.ndim != ra.ndim:
        raise ValueError(f"batch_matmul: operands need equal rank >= 2, got {la.str_short()} "
                         f"and {ra.str_short()}")
    nb = la.ndim - 2
    batch = tuple(range(nb))
    return dot_general(lhs, rhs, (((la.ndim - 1,), (ra.ndim - 2,)), (batch, batch)), precision)


# The decompositions live in their own module; ``lax.linalg.cholesky`` etc. as in JAX.
from lax.decompositions import (cholesky, eig, eigh, lu, qr, svd,  # noqa: E402
                                triangular_solve)
