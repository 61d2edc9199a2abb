"""jax.lax helpers that are compositions of the primitives of the other families: shape and
dtype utilities (``broadcast_shapes``, ``broadcast_like``, ``dtype``, ``empty``,
``split``, ``stack``, ``unstack``, ``conv_transpose_shape_tuple``,
``reduce_window_shape_tuple``, ``shape_as_value``, ``get_dimension_size``), the single-device no-ops
(``with_sharding_constraint``, ``stage``), XLA's Map (``xla_map``), ``approx_max_k`` /
``approx_min_k`` (exact),
the unshared convolution ``conv_general_dilated_local`` and ``scaled_dot``.

Being compositions, they need no rules of their own: jvp, transpose, batching and the
Numba lowering come from the primitives they are built of.
"""
from __future__ import annotations

import operator
from typing import Sequence, Union

import numpy as np

from tracer import dtypes
from tracer.core import Array, Tracer, find_top_trace, full_raise, get_aval
from tracer.pytree import tree_map
from lax import elementwise as ew
from lax import shapes
from lax.convolution import (_deconv_padding, _sdims, conv_dimension_numbers,
                             conv_general_dilated_patches)
from lax.linalg import Precision, dot_general
from lax.utils import as_lax_value, canonicalize_axis, canonicalize_shape

# jax.lax.PrecisionLike: what the ``precision`` argument of the contractions accepts.
PrecisionLike = Union[None, str, Precision, tuple]


# ===================================== shapes and dtypes ===================================

def broadcast_shapes(*shapes_):
    """The shape NumPy-style broadcasting of ``shapes_`` gives (jax.lax.broadcast_shapes):
    shapes align at their trailing dimensions; a dimension of size 1 stretches. No shapes
    give ``()`` (as ``np.broadcast_shapes``). Raises ValueError naming the shapes when two
    sizes differ and neither is 1."""
    shapes_ = [canonicalize_shape(s, "broadcast_shapes") for s in shapes_]
    if not shapes_:
        return ()
    nd = max(len(s) for s in shapes_)
    out = []
    for i in range(nd):
        sizes = {s[len(s) - nd + i] for s in shapes_ if len(s) - nd + i >= 0}
        big = sizes - {1}
        if len(big) > 1:
            raise ValueError(f"Incompatible shapes for broadcasting: shapes={list(shapes_)}")
        out.append(big.pop() if big else 1)
    return tuple(out)


def _broadcast_to(x, shape, fname):
    x = as_lax_value(x)
    aval = get_aval(x)
    shape = canonicalize_shape(shape, fname)
    if aval.shape == shape:
        return x
    nd = len(shape)
    lead = nd - aval.ndim
    ok = lead >= 0 and all(d == 1 or d == shape[lead + i] for i, d in enumerate(aval.shape))
    if not ok:
        raise ValueError(f"{fname}: cannot broadcast an operand of shape {aval.shape} to "
                         f"{shape} (sizes must match or be 1, aligned at the trailing "
                         "dimensions)")
    # size-1 dimensions that stretch are squeezed first: broadcast_in_dim then maps the
    # remaining ones one-to-one
    keep = [i for i, d in enumerate(aval.shape) if d == shape[lead + i]]
    if len(keep) != aval.ndim:
        x = shapes.reshape(x, tuple(aval.shape[i] for i in keep))
    return shapes.broadcast_in_dim(x, shape, tuple(lead + i for i in keep))


def broadcast_like(arr, like_arr):
    """``arr`` broadcast (NumPy-style, trailing alignment) to the shape of ``like_arr``
    (jax.lax.broadcast_like); ``arr``'s dtype and weak type are kept. ValueError when the
    shapes are not broadcast-compatible."""
    return _broadcast_to(arr, get_aval(like_arr).shape, "broadcast_like")


def dtype(x):
    """The canonical dtype of a value or dtype-like (jax.lax.dtype): Python scalars give
    the default dtypes (64-bit unless ``enable_x64`` is off), NumPy arrays/scalars and
    tracer values their own, dtype-likes (``np.float32``, ``'int8'``) themselves.
    Raises ValueError for None and TypeError for values without a dtype (lists)."""
    if x is None:
        raise ValueError("Invalid argument to dtype: None.")
    if isinstance(x, (list, tuple, dict, set)):
        raise TypeError(f"Cannot determine dtype of {x!r}: pass an array, a scalar or a "
                        "dtype (convert sequences with tracer.numpy.asarray first)")
    return dtypes.dtype(x)


def empty(shape, dtype, *, out_sharding=None):
    """An array of ``shape`` and ``dtype`` whose contents are unspecified
    (jax.lax.empty). Here they are zeros (what JAX's CPU backend gives too); do not rely on
    it. ``out_sharding`` is accepted and ignored (one device)."""
    del out_sharding
    return shapes.full(canonicalize_shape(shape, "empty"), 0, dtypes.canonicalize_dtype(dtype))


def split(operand, sizes: Sequence[int], axis: int = 0):
    """``operand`` cut along ``axis`` into consecutive pieces of the given ``sizes``
    (jax.lax.split); returns a list. The sizes (non-negative ints) must add up to the
    dimension's size, else ValueError."""
    operand = as_lax_value(operand)
    aval = get_aval(operand)
    axis = canonicalize_axis(axis, aval.ndim, "split axis")
    sizes = tuple(operator.index(s) for s in sizes)
    if any(s < 0 for s in sizes):
        raise ValueError(f"split: sizes must be non-negative, got {sizes}")
    if sum(sizes) != aval.shape[axis]:
        raise ValueError(f"split: sum of sizes {sum(sizes)} must be equal to dimension "
                         f"{axis} of the operand shape {list(aval.shape)}")
    out, start = [], 0
    for s in sizes:
        out.append(shapes.slice_in_dim(operand, start, start + s, axis=axis))
        start += s
    return out


def stack(operands: Sequence, axis: int = 0):
    """``operands`` (arrays of one shape and dtype) joined along a new dimension ``axis``
    (jax.lax.stack; ``axis`` may be negative, counted in the result's rank). ValueError
    for no operands or unequal shapes."""
    operands = [as_lax_value(x) for x in operands]
    if not operands:
        raise ValueError("stack: needs at least one operand")
    avals = [get_aval(x) for x in operands]
    if any(a.shape != avals[0].shape for a in avals[1:]):
        raise ValueError(f"stack: operands must have equal shapes, got "
                         f"{[a.shape for a in avals]}")
    axis = canonicalize_axis(axis, avals[0].ndim + 1, "stack axis")
    return shapes.concatenate([shapes.expand_dims(x, (axis,)) for x in operands], axis)


def unstack(x, axis: int = 0):
    """The slices of ``x`` along ``axis``, that dimension removed (jax.lax.unstack):
    a tuple of ``x.shape[axis]`` arrays."""
    x = as_lax_value(x)
    aval = get_aval(x)
    axis = canonicalize_axis(axis, aval.ndim, "unstack axis")
    return tuple(shapes.index_in_dim(x, i, axis, keepdims=False)
                 for i in range(aval.shape[axis]))


def conv_transpose_shape_tuple(lhs_shape, rhs_shape, window_strides, padding,
                               dimension_numbers):
    """The output shape of ``conv_transpose(lhs, rhs, window_strides, padding,
    dimension_numbers=...)`` for operands of these shapes (jax.lax): per spatial dim
    ``(in - 1) * stride - k + 2 + pad_lo + pad_hi`` with 'SAME'/'VALID' converted as
    conv_transpose does; batch from lhs, features from the kernel's 'O' dimension, laid
    out by the output spec."""
    dn = conv_dimension_numbers(tuple(lhs_shape), tuple(rhs_shape), dimension_numbers)
    lhs_sp = [lhs_shape[i] for i in _sdims(dn.lhs_spec)]
    k_sp = [rhs_shape[i] for i in _sdims(dn.rhs_spec)]
    if len(window_strides) != len(k_sp):
        raise ValueError(f"conv_transpose_shape_tuple: {len(window_strides)} strides for "
                         f"{len(k_sp)} spatial dimensions")
    if isinstance(padding, str):
        pads = [_deconv_padding(k, s, padding) for k, s in zip(k_sp, window_strides)]
    else:
        pads = [tuple(p) for p in padding]
    out_sp = [(i - 1) * s - k + 2 + lo + hi
              for i, k, s, (lo, hi) in zip(lhs_sp, k_sp, window_strides, pads)]
    logical = [lhs_shape[dn.lhs_spec[0]], rhs_shape[dn.rhs_spec[0]]] + out_sp
    out = [0] * len(logical)
    for pos, size in zip(dn.out_spec, logical):
        out[pos] = int(size)
    return tuple(out)


def reduce_window_shape_tuple(operand_shape, window_dimensions, window_strides, padding,
                              base_dilation=None, window_dilation=None):
    """The output shape of ``reduce_window`` over an operand of ``operand_shape``
    (jax.lax): per dimension ``(dilated size + pads - dilated window) // stride + 1``, 0
    when the window does not fit. ``padding`` is (low, high) pairs ('SAME'/'VALID' are
    accepted too)."""
    from lax.windowed import _out_shape, _window_params
    operand_shape = canonicalize_shape(operand_shape, "reduce_window_shape_tuple")
    wd, ws, pad, bd, wdl = _window_params(operand_shape, window_dimensions, window_strides,
                                          padding, base_dilation, window_dilation,
                                          "reduce_window_shape_tuple")
    return _out_shape(operand_shape, wd, ws, pad, bd, wdl)


def shape_as_value(shape):
    """``shape`` as a 1-D integer array (jax.lax.shape_as_value): int32 when every size
    fits, else int64. JAX returns a NumPy array for a non-empty constant shape; this
    returns a tracer Array either way."""
    shape = canonicalize_shape(shape, "shape_as_value")
    big = any(d > dtypes.iinfo(np.int32).max for d in shape)
    return Array(np.asarray(shape, np.int64 if big else np.int32).reshape(len(shape)))


def get_dimension_size(operand, dimension: int):
    """The size of ``operand``'s ``dimension`` as an int32 scalar. Semantics: XLA
    Operation semantics, 'GetDimensionSize' (StableHLO get_dimension_size: a
    ``tensor<i32>``). Shapes are static here, so the result is a constant: under jit it
    folds into the program, under vmap it is the size of the per-example operand (the
    batch axis is not counted) and it carries no derivative.

    ``operand``: an array of rank n >= 1 (any dtype, a tracer included); ``dimension``:
    an int in ``[0, n)``, as the spec requires (no negative indexing). Raises TypeError
    for a non-integer ``dimension`` or a rank-0 operand, ValueError for a dimension out of
    range or a size that does not fit int32."""
    aval = get_aval(operand)
    try:
        d = operator.index(dimension)
    except TypeError:
        raise TypeError(f"get_dimension_size: dimension must be a Python int, got "
                        f"{type(dimension).__name__}; pass a static dimension number") from None
    if aval.ndim == 0:
        raise TypeError(f"get_dimension_size: operand {aval.str_short()} has no dimensions; "
                        f"the spec asks for an array of rank >= 1")
    if not 0 <= d < aval.ndim:
        raise ValueError(f"get_dimension_size: dimension {d} is not in [0, {aval.ndim}) for "
                         f"operand {aval.str_short()}; pass a dimension in [0, {aval.ndim})")
    size = aval.shape[d]
    if size > dtypes.iinfo(np.int32).max:
        raise ValueError(f"get_dimension_size: size {size} of dimension {d} of "
                         f"{aval.str_short()} does not fit the int32 result")
    return Array(np.asarray(size, np.int32))


# ================================== single-device no-ops ===================================

def with_sharding_constraint(x, shardings):
    """``x`` (a pytree) unchanged (jax.lax.with_sharding_constraint). Programs here run on
    one device, so there is no layout to constrain; ``shardings`` is accepted and ignored
    (JAX rejects None there; this does not check it)."""
    del shardings
    return tree_map(as_lax_value, x)


def stage(x, /):
    """``x`` lifted into the innermost active trace (jax.lax.stage): logically the
    identity. Under ``make_jaxpr``/``jit`` tracing a constant becomes a value of the
    jaxpr being built (a constvar, or a literal for a scalar); outside any trace the
    result is an Array; a traced value is returned as it is."""
    if isinstance(x, Tracer):
        return x
    x = as_lax_value(x)
    trace = find_top_trace([x])
    return x if trace is None else full_raise(trace, x)


# ========================================= xla_map =========================================

def xla_map(computation, *operands, dimensions):
    """``computation`` applied to the operands element by element. Semantics: XLA
    Operation semantics, 'Map' (StableHLO map); not ``lax.map``, JAX's sequential map
    over a leading axis.

    ``operands``: N >= 1 arrays of one shape (dtypes may differ); ``computation``: a
    Python function of N scalars returning one scalar (an array of shape ``()``, any
    dtype S); ``dimensions``: the mapped dimensions, which must be ``(0, ..., rank-1)``
    as StableHLO requires (every element is mapped). The result has the operands' shape
    and dtype S. The spec's ``static_operands`` are the values ``computation`` closes
    over (Python closures, traced values included).

    It is a composition, not a primitive: ``computation`` runs under one ``vmap`` per
    dimension, so the jaxpr holds its primitives, batched; jvp, transpose, vmap and jit
    (where they fuse into one kernel with their neighbours) reuse their rules. Raises
    TypeError for a non-callable computation, operands of different shapes or a
    computation that does not return one scalar; ValueError for other ``dimensions``.
    """
    from tracer.interpreters import batching
    if not callable(computation):
        raise TypeError(f"xla_map: computation must be callable, got "
                        f"{type(computation).__name__}")
    if not operands:
        raise TypeError("xla_map: needs at least one operand")
    ops = [as_lax_value(x) for x in operands]
    avals = [get_aval(x) for x in ops]
    shape = avals[0].shape
    if any(a.shape != shape for a in avals):
        raise TypeError(f"xla_map: operands must share one shape, got "
                        f"{', '.join(a.str_short() for a in avals)}; broadcast them first")
    try:
        dims = tuple(operator.index(d) for d in dimensions)
    except TypeError:
        raise TypeError(f"xla_map: dimensions must be a sequence of ints, got "
                        f"{dimensions!r}") from None
    if dims != tuple(range(len(shape))):
        raise ValueError(f"xla_map: dimensions must be {tuple(range(len(shape)))} (every "
                         f"dimension of the operands {avals[0].str_short()}, in order), got "
                         f"{dims}")

    def scalar_call(*xs):
        out = computation(*xs)
        if isinstance(out, (tuple, list)) or get_aval(as_lax_value(out)).shape != ():
            what = (f"a {type(out).__name__}" if isinstance(out, (tuple, list))
                    else get_aval(as_lax_value(out)).str_short())
            raise TypeError(f"xla_map: computation must return one scalar for scalar "
                            f"operands {', '.join(a.dtype.name for a in avals)}, got {what}")
        return [as_lax_value(out)]

    def mapped(level, xs):
        if level == len(shape):
            return scalar_call(*xs)
        size = shape[level]
        outs, out_dims = batching.vmap_flat(lambda *ys: mapped(level + 1, ys), size, None,
                                            [0] * len(xs), list(xs))
        # an output that ignores its operands comes back unmapped: broadcast it
        return [batching.matchaxis(size, d, 0, o) for o, d in zip(outs, out_dims)]

    (out,) = mapped(0, ops)
    return out


# ================================ approx_max_k / approx_min_k ==============================

def _approx_k(fname, operand, k, reduction_dimension, recall_target, is_max_k,
              reduction_input_size_override, aggregate_to_topk):
    from lax.sort import sort, top_k
    operand = as_lax_value(operand)
    aval = get_aval(operand)
    k = operator.index(k)
    if aval.ndim == 0:
        raise TypeError(f"{fname}: operand must have at least one dimension, got "
                        f"{aval.str_short()}")
    dim = canonicalize_axis(reduction_dimension, aval.ndim, f"{fname} reduction_dimension")
    if k <= 0:
        raise ValueError(f"{fname}: k must be positive, got {k}")
    if aval.shape[dim] < k:
        raise ValueError(f"{fname}: k must be at most the size of reduction dimension {dim} "
                         f"({aval.shape[dim]}), got {k}")
    if not dtypes.is_floating(aval.dtype):
        raise TypeError(f"{fname}: operand must be a floating type, got {aval.str_short()} "
                        "(convert with lax.convert_element_type)")
    if not 0 < float(recall_target) <= 1:
        raise ValueError(f"{fname}: recall_target must be in (0, 1], got {recall_target}")
    del reduction_input_size_override, aggregate_to_topk  # exact: nothing to tune
    last = aval.ndim - 1
    perm = tuple(i for i in range(aval.ndim) if i != dim) + (dim,)
    x = shapes.transpose(operand, perm) if dim != last else operand
    if is_max_k:
        # JAX orders approx_max_k like sort (a comparator, not top_k's total order): -0.0
        # ties +0.0 (the lower index first); NaN here counts as larger than every number
        from lax.sort import _take_along
        zero = shapes.full_like(x, 0)
        canon = ew.select(ew.eq(x, zero), zero, x)
        canon = ew.select(ew.ne(x, x), shapes.full_like(x, np.nan), canon)
        _, idx = top_k(canon, k)
        vals = _take_along(x, idx, last)
    else:
        # ascending stable sort: ties keep the lower index, NaN last (never among the
        # smallest unless there are fewer than k numbers)
        iota = shapes.broadcasted_iota(dtypes.int32, get_aval(x).shape, last)
        vals, idx = sort((x, iota), dimension=last, num_keys=1)
        vals = shapes.slice_in_dim(vals, 0, k, axis=last)
        idx = shapes.slice_in_dim(idx, 0, k, axis=last)
    if dim != last:
        inv = tuple(int(i) for i in np.argsort(perm))
        vals, idx = shapes.transpose(vals, inv), shapes.transpose(idx, inv)
    return vals, idx


def approx_max_k(operand, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True):
    """The ``k`` largest values of a floating ``operand`` along ``reduction_dimension``,
    descending, and their int32 indices (jax.lax.approx_max_k). This implementation is
    exact (recall 1.0 whatever ``recall_target`` asks): ``lax.top_k`` along that
    dimension with -0.0 equal to +0.0 (as JAX's comparator sort), ties to the lower
    index, NaN larger than every number (JAX's CPU result with NaNs depends on its sort
    algorithm). With
    ``aggregate_to_topk=False`` JAX may return more than ``k`` candidates, unsorted; here
    the size is always ``k`` (the smallest size allowed), sorted.
    Errors: TypeError for non-float or rank-0 operands, ValueError for k <= 0 or k larger
    than the dimension."""
    return _approx_k("approx_max_k", operand, k, reduction_dimension, recall_target, True,
                     reduction_input_size_override, aggregate_to_topk)


def approx_min_k(operand, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True):
    """The ``k`` smallest values of a floating ``operand`` along ``reduction_dimension``,
    ascending, and their int32 indices (jax.lax.approx_min_k). Exact (recall 1.0): a
    stable sort along the dimension, ties to the lower index, NaN after every number.
    See ``approx_max_k`` for ``aggregate_to_topk`` and the errors."""
    return _approx_k("approx_min_k", operand, k, reduction_dimension, recall_target, False,
                     reduction_input_size_override, aggregate_to_topk)


# ============================== conv_general_dilated_local ================================

def _moveaxis(x, src, dst):
    nd = get_aval(x).ndim
    order = [i for i in range(nd) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return shapes.transpose(x, tuple(order))


def conv_general_dilated_local(lhs, rhs, window_strides, padding, filter_shape,
                               lhs_dilation=None, rhs_dilation=None, dimension_numbers=None,
                               precision=None):
    """Unshared ("locally connected") convolution (jax.lax.conv_general_dilated_local):
    like ``conv_general_dilated`` but with a separate kernel at every output position.

    ``rhs`` is laid out by the kernel spec of ``dimension_numbers`` with its spatial
    dimensions indexing OUTPUT positions and its 'I' dimension holding the input features
    and the receptive window fused, C-major: size ``C * prod(filter_shape)``
    (``filter_shape`` in the kernel spec's spatial order). Computed as
    ``conv_general_dilated_patches`` contracted with ``rhs`` (one dot_general batched over
    the output positions). ``precision`` may be one value or a (lhs, rhs) pair.
    Shape errors come from the patches and the contraction (TypeError naming the
    sizes)."""
    lhs = as_lax_value(lhs)
    la = get_aval(lhs)
    filter_shape = tuple(operator.index(f) for f in filter_shape)
    if len(filter_shape) != la.ndim - 2:
        raise ValueError(f"conv_general_dilated_local: filter_shape {filter_shape} needs one "
                         f"entry per spatial dimension of lhs {la.shape}")
    patches = conv_general_dilated_patches(lhs, filter_shape, window_strides, padding,
                                           lhs_dilation, rhs_dilation, dimension_numbers)
    dn = conv_dimension_numbers(la.shape, (1, 1) + filter_shape, dimension_numbers)
    out_sp, rhs_sp = list(_sdims(dn.out_spec)), list(_sdims(dn.rhs_spec))
    order = sorted(range(len(out_sp)), key=lambda i: out_sp[i])
    contract = ((dn.out_spec[1],), (dn.rhs_spec[1],))
    batch = (tuple(out_sp[i] for i in order), tuple(rhs_sp[i] for i in order))
    out = dot_general(patches, rhs, (contract, batch), precision=precision)
    nd = la.ndim
    return _moveaxis(out, (nd - 2, nd - 1), (dn.out_spec[0], dn.out_spec[1]))


# ======================================== scaled_dot ======================================

def _expand_scale(fname, side, scale, operand_shape, contracting):
    """``scale`` repeated along the contracting dims up to the operand's shape (each scale
    entry covers a block of ``size // scale size`` consecutive operand entries)."""
    sa = get_aval(scale)
    if sa.ndim != len(operand_shape):
        raise TypeError(f"{fname}: {side}_scale must have the operand's rank "
                        f"{len(operand_shape)}, got shape {sa.shape}")
    for i, (n, s) in enumerate(zip(operand_shape, sa.shape)):
        if i in contracting:
            if s == 0 or n % s or n // s < 2:
                raise TypeError(f"{fname}: {side} contracting dim {i} of size {n} must be a "
                                f"multiple (at least 2x) of its scale's size {s}")
        elif n != s:
            raise TypeError(f"{fname}: {side} dim {i} of size {n} does not match its scale's "
                            f"size {s}")
    for i in sorted(contracting):
        shape = get_aval(scale).shape
        n, s = operand_shape[i], shape[i]
        block = n // s
        bshape = shape[:i + 1] + (block,) + shape[i + 1:]
        dims = tuple(range(i + 1)) + tuple(range(i + 2, len(bshape)))
        scale = shapes.broadcast_in_dim(scale, bshape, dims)
        scale = shapes.reshape(scale, shape[:i] + (n,) + shape[i + 1:])
    return scale


def scaled_dot(lhs, rhs, *, lhs_scale=None, rhs_scale=None, dimension_numbers=None,
               preferred_element_type=None):
    """``dot_general(lhs * lhs_scale, rhs * rhs_scale)`` with block scales
    (jax.lax.scaled_dot): a scale has its operand's rank and shape except along the
    contracting dims, where it is smaller by an integer factor >= 2 (each scale entry
    multiplies a block of that many consecutive entries). Without ``dimension_numbers``:
    ``(((n-1,), (n-2,)), (batch dims 0..n-3))`` for rank-n operands (n >= 2).

    Differences from JAX: JAX targets float8 operands and defaults the result to bfloat16;
    tracer has neither dtype, so the operands and scales are converted to
    ``preferred_element_type`` (default: the operands' promoted dtype) and multiplied
    exactly there. Differentiable and batchable (a composition). TypeError for rank < 2
    without dimension numbers and for scale shapes that do not fit."""
    lhs, rhs = as_lax_value(lhs), as_lax_value(rhs)
    la, ra = get_aval(lhs), get_aval(rhs)
    if dimension_numbers is None:
        if la.ndim < 2:
            raise TypeError("scaled_dot does not support 0-rank and 1-rank operands without "
                            "dimension_numbers")
        n = la.ndim
        dimension_numbers = (((n - 1,), (n - 2,)), (tuple(range(n - 2)), tuple(range(n - 2))))
    (lc, rc), (lb, rb) = dimension_numbers
    lc, rc, lb, rb = (tuple(operator.index(i) for i in d) for d in (lc, rc, lb, rb))
    if la.ndim != ra.ndim:
        raise TypeError(f"scaled_dot: all operands must have the same rank, got lhs "
                        f"{la.shape} and rhs {ra.shape}")
    if preferred_element_type is None:
        dt = dtypes.result_type(lhs, rhs)
    else:
        dt = dtypes.canonicalize_dtype(preferred_element_type)
    if not dtypes.is_inexact(dt):
        raise TypeError(f"scaled_dot: the element type must be floating or complex, got "
                        f"{np.dtype(dt).name}")

    def scaled(x, scale, shape, contracting, side):
        x = ew.convert_element_type(x, dt)
        if scale is None:
            return x
        scale = ew.convert_element_type(as_lax_value(scale), dt)
        return ew.mul(x, _expand_scale("scaled_dot", side, scale, shape, contracting))

    return dot_general(scaled(lhs, lhs_scale, la.shape, lc, "lhs"),
                       scaled(rhs, rhs_scale, ra.shape, rc, "rhs"),
                       ((lc, rc), (lb, rb)), preferred_element_type=dt)
