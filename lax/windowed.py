"""Windowed and cumulative reductions (XLA Operation semantics, 'ReduceWindow',
'SelectAndScatter'), cumulative reductions and batch normalization ('BatchNormTraining',
'BatchNormInference', 'BatchNormGrad').

- ``reduce_window_sum`` / ``_max`` / ``_min`` are primitives (the pooling fast paths);
  ``reduce_window`` with any computation (and variadic operands) is a composition: the
  input is padded and dilated with the init value, and the computation folds the strided
  slices of each window offset together, so every transformation applies.
- ``select_and_scatter_add`` is the spec's SelectAndScatter with select ``ge``/``le``
  (first element of a window wins ties, in row-major window order) and scatter ``add``:
  the gradient of max/min pooling. Its transpose, ``select_and_gather_add``, picks the
  tangent at each window's selected position (the jvp of max/min pooling).
- ``select_and_scatter`` is the spec's SelectAndScatter with user ``select`` and
  ``scatter`` computations (traced to scalar jaxprs, held as params); its NumPy impl is
  the spec's loop (windows in row-major order, each window's elements in row-major order,
  padding never selected). Under jit it compiles (lowering/windowed.py: two folds of
  the computations' element expressions), bit for bit the impl's result; like JAX it
  has no derivative.
- ``cumsum``, ``cumprod``, ``cummax``, ``cummin``, ``cumlogsumexp`` along one axis (with
  ``reverse``): primitives with NumPy impls (sequential folds from the identity, max/min
  by lax.max's rule, as XLA:CPU); derivatives differentiate a prefix-doubling scan
  written with lax ops.
- Batch normalization ops are compositions of lax primitives, with the spec's semantics.
"""
from __future__ import annotations

import itertools
import math
import operator

import numpy as np

from tracer import dtypes
from tracer.core import Array, Primitive, ShapedArray, get_aval
from tracer.interpreters import ad, batching
from tracer.interpreters.ad import Zero
from lax import elementwise as ew
from lax import reductions as red
from lax import shapes
from lax.utils import _float, _num, _ordered, canonicalize_axis, check_dtype, lowp_widening


def _dilate(shape, dil):
    return tuple(0 if s == 0 else 1 + d * (s - 1) for s, d in zip(shape, dil))


def _window_params(operand_shape, window_dimensions, window_strides, padding, base_dilation,
                   window_dilation, name):
    nd = len(operand_shape)
    wd = tuple(operator.index(w) for w in window_dimensions)
    ws = tuple(operator.index(s) for s in window_strides) if window_strides is not None \
        else (1,) * nd
    bd = tuple(operator.index(b) for b in base_dilation) if base_dilation is not None \
        else (1,) * nd
    wdl = tuple(operator.index(b) for b in window_dilation) if window_dilation is not None \
        else (1,) * nd
    if isinstance(padding, str):
        from lax.convolution import padtype_to_pads
        padding = padtype_to_pads(_dilate(operand_shape, bd), _dilate(wd, wdl), ws, padding)
    pad = tuple((int(lo), int(hi)) for lo, hi in padding)
    for v, what in ((wd, "window_dimensions"), (ws, "window_strides"), (pad, "padding"),
                    (bd, "base_dilation"), (wdl, "window_dilation")):
        if len(v) != nd:
            raise TypeError(f"{name}: {what} {v} needs one entry per operand dimension "
                            f"(operand shape {tuple(operand_shape)})")
    if any(x < 1 for x in ws + bd + wdl) or any(w < 0 for w in wd):
        raise TypeError(f"{name}: strides and dilations must be >= 1 and window dimensions "
                        f">= 0, got strides {ws}, base_dilation {bd}, window_dilation {wdl}, "
                        f"window {wd}")
    return wd, ws, pad, bd, wdl


def _out_shape(shape, wd, ws, pad, bd, wdl):
    padded = [d + lo + hi for d, (lo, hi) in zip(_dilate(shape, bd), pad)]
    win = _dilate(wd, wdl)
    return tuple(0 if p < w else (p - w) // s + 1 for p, w, s in zip(padded, win, ws))


def _windows_np(x, init, wd, ws, pad, bd, wdl):
    """Strided view (*out, *window) of x padded/dilated with ``init``."""
    from lax.shapes import _pad_impl
    cfg = tuple((lo, hi, b - 1) for (lo, hi), b in zip(pad, bd))
    xp = _pad_impl(x, np.asarray(init, x.dtype), padding_config=cfg)
    out = _out_shape(x.shape, wd, ws, pad, bd, wdl)
    win = _dilate(wd, wdl)
    nd = x.ndim
    if any(o == 0 for o in out) or any(w == 0 for w in wd):
        return None, out
    v = np.lib.stride_tricks.sliding_window_view(xp, win)
    sl = tuple(slice(0, o * s, s) for o, s in zip(out, ws)) + \
        tuple(slice(None, None, d) for d in wdl)
    v = v[sl]
    del nd
    return v, out


# ------------------------------------ reduce_window_* ---------------------------------------

def _rw_abstract_eval(name, allowed):
    def rule(x, *, window_dimensions, window_strides, padding, base_dilation,
             window_dilation):
        check_dtype(name, x, allowed)
        out = _out_shape(x.shape, window_dimensions, window_strides, padding, base_dilation,
                         window_dilation)
        return ShapedArray(out, x.dtype, x.weak_type)
    return rule


def _rw_impl(npfn, identity):
    def impl(x, *, window_dimensions, window_strides, padding, base_dilation,
             window_dilation):
        init = identity(x.dtype)
        v, out = _windows_np(x, init, window_dimensions, window_strides, padding,
                             base_dilation, window_dilation)
        if v is None:
            return np.full(out, init, x.dtype)
        axes = tuple(range(x.ndim, 2 * x.ndim))
        with np.errstate(all="ignore"):
            return npfn(v, axis=axes).astype(x.dtype)
    return impl


def _sum_identity(dt):
    return 0


def _max_identity(dt):
    return red._minmax_identity(dt, True)


def _min_identity(dt):
    return red._minmax_identity(dt, False)


def _rw_batch(p):
    def rule(axis_data, vals, dims, *, window_dimensions, window_strides, padding,
             base_dilation, window_dilation):
        (x,), (d,) = vals, dims
        ins = lambda t, v: t[:d] + (v,) + t[d:]
        out = p.bind(x, window_dimensions=ins(window_dimensions, 1),
                     window_strides=ins(window_strides, 1), padding=ins(padding, (0, 0)),
                     base_dilation=ins(base_dilation, 1),
                     window_dilation=ins(window_dilation, 1))
        return [out], [d]
    batching.primitive_batchers[p] = rule


def _make_rw(name, npfn, identity, allowed):
    p = Primitive(name)
    p.def_abstract_eval(_rw_abstract_eval(name, allowed))
    p.def_impl(lowp_widening(name, _rw_impl(npfn, identity)))   # f32 accumulation
    _rw_batch(p)
    return p


def _window_fold(binop, npfn):
    """Reduce the trailing window ``axis`` of a float operand by folding ``binop`` over
    its elements in row-major window order, from the first (XLA:CPU's order: lax.max's
    rule makes NaN sign bits depend on it); other dtypes reduce with ``npfn``."""
    def reduce(v, axis):
        if not dtypes.is_floating(v.dtype):
            return npfn(v, axis=axis)
        flat = v.reshape(v.shape[:v.ndim - len(axis)] + (-1,))
        acc = flat[..., 0]
        for k in range(1, flat.shape[-1]):
            acc = binop(acc, flat[..., k])
        return np.asarray(acc)
    return reduce


reduce_window_sum_p = _make_rw("reduce_window_sum", np.sum, _sum_identity, _num)
reduce_window_max_p = _make_rw("reduce_window_max", _window_fold(ew._max_impl, np.max),
                               _max_identity, _ordered)
reduce_window_min_p = _make_rw("reduce_window_min", _window_fold(ew._min_impl, np.min),
                               _min_identity, _ordered)


def _rw_sum_transpose(cts, x, *, window_dimensions, window_strides, padding, base_dilation,
                      window_dilation):
    (ct,) = cts
    if type(ct) is Zero:
        return [None]
    from lax.convolution import _lhs_vjp_padding
    in_shape = x.aval.shape
    ct_shape = get_aval(ct).shape
    pads = _lhs_vjp_padding(in_shape, window_dimensions, window_strides, ct_shape, padding,
                            base_dilation, window_dilation)
    cfg = [(lo, hi, s - 1) for (lo, hi), s in zip(pads, window_strides)]
    padded = shapes.pad(ct, ew._const(ct, 0), cfg)
    nd = len(in_shape)
    out = reduce_window_sum_p.bind(padded, window_dimensions=window_dimensions,
                                   window_strides=base_dilation, padding=((0, 0),) * nd,
                                   base_dilation=(1,) * nd, window_dilation=window_dilation)
    oa = get_aval(out)
    if oa.shape != in_shape:  # strides that skip trailing inputs
        out = shapes.pad(out, ew._const(out, 0),
                         [(0, n - m, 0) for n, m in zip(in_shape, oa.shape)])
    return [out]


ad.deflinear(reduce_window_sum_p, _rw_sum_transpose)


def _rw_chooser_jvp(p, select_ge):
    def rule(primals, tangents, **params):
        (x,), (g,) = primals, tangents
        out = p.bind(x, **params)
        if type(g) is Zero:
            return [out], [Zero.from_primal_value(out)]
        return [out], [select_and_gather_add_p.bind(g, x, select_ge=select_ge, **params)]
    ad.primitive_jvps[p] = rule


_rw_chooser_jvp(reduce_window_max_p, True)
_rw_chooser_jvp(reduce_window_min_p, False)


def _rw_call(p, operand, window_dimensions, window_strides, padding, base_dilation,
             window_dilation, name):
    wd, ws, pad, bd, wdl = _window_params(get_aval(operand).shape, window_dimensions,
                                          window_strides, padding, base_dilation,
                                          window_dilation, name)
    return p.bind(operand, window_dimensions=wd, window_strides=ws, padding=pad,
                  base_dilation=bd, window_dilation=wdl)


def reduce_window_sum(operand, window_dimensions, window_strides=None, padding="VALID",
                      base_dilation=None, window_dilation=None):
    """Sum over sliding windows (XLA 'ReduceWindow' with add; padding with 0)."""
    return _rw_call(reduce_window_sum_p, operand, window_dimensions, window_strides, padding,
                    base_dilation, window_dilation, "reduce_window_sum")


def reduce_window_max(operand, window_dimensions, window_strides=None, padding="VALID",
                      base_dilation=None, window_dilation=None):
    """Max over sliding windows (max pooling; padding with -inf / the integer minimum)."""
    return _rw_call(reduce_window_max_p, operand, window_dimensions, window_strides, padding,
                    base_dilation, window_dilation, "reduce_window_max")


def reduce_window_min(operand, window_dimensions, window_strides=None, padding="VALID",
                      base_dilation=None, window_dilation=None):
    """Min over sliding windows (padding with +inf / the integer maximum)."""
    return _rw_call(reduce_window_min_p, operand, window_dimensions, window_strides, padding,
                    base_dilation, window_dilation, "reduce_window_min")


# -------------------------------------- generic form ----------------------------------------

def reduce_window(operand, init_value, computation, window_dimensions, window_strides=None,
                  padding="VALID", base_dilation=None, window_dilation=None):
    """XLA 'ReduceWindow' with a user ``computation`` (jax.lax.reduce_window).

    ``operand``/``init_value`` may be pytrees (the variadic form): ``computation`` takes
    two such trees of scalars and returns one. The result has the windowed output shape.
    Recognised monoids (lax.add/max/min with their identities) use the fast primitives.
    """
    from tracer.pytree import tree_flatten, tree_unflatten
    ops, tree = tree_flatten(operand)
    inits, init_tree = tree_flatten(init_value)
    if tree != init_tree:
        raise TypeError(f"reduce_window: operand structure {tree} and init_value structure "
                        f"{init_tree} differ")
    shape = get_aval(ops[0]).shape
    for o in ops:
        if get_aval(o).shape != shape:
            raise TypeError(f"reduce_window: operands must share a shape, got "
                            f"{[get_aval(x).shape for x in ops]}")
    wd, ws, pad, bd, wdl = _window_params(shape, window_dimensions, window_strides, padding,
                                          base_dilation, window_dilation, "reduce_window")
    if len(ops) == 1:
        fast = _monoid(computation, ops[0], inits[0])
        if fast is not None:
            return fast.bind(ops[0], window_dimensions=wd, window_strides=ws, padding=pad,
                             base_dilation=bd, window_dilation=wdl)
    inits = [_window_init(v, get_aval(o).dtype) for v, o in zip(inits, ops)]
    padded = [shapes.pad(o, i, [(lo, hi, b - 1) for (lo, hi), b in zip(pad, bd)])
              for o, i in zip(ops, inits)]
    out = _out_shape(shape, wd, ws, pad, bd, wdl)
    nd = len(shape)
    if any(o == 0 for o in out):
        return tree_unflatten(tree, [shapes.broadcast_in_dim(i, out, ()) for i in inits])
    acc = []
    first = True
    for offset in itertools.product(*(range(w) for w in wd)):
        start = [k * d for k, d in zip(offset, wdl)]
        limit = [s + (o - 1) * st + 1 if o > 0 else s for s, o, st in zip(start, out, ws)]
        sl = [shapes.slice(p, start, limit, ws) for p in padded]
        if first:
            # Fold starts from the init value, as the spec's accumulator does.
            acc = [shapes.broadcast_in_dim(i, out, ()) for i in inits]
            first = False
        res = computation(tree_unflatten(tree, acc), tree_unflatten(tree, sl))
        acc, _ = tree_flatten(res)
    if first:
        acc = [shapes.broadcast_in_dim(i, out, ()) for i in inits]
    del nd
    return tree_unflatten(tree, acc)


def _window_init(v, dtype):
    """reduce_window's init value for operands of ``dtype`` on the general path: a Python
    scalar taken as a value of that dtype (``reductions.scalar_init``), anything else
    of that dtype already. Raises TypeError otherwise (JAX: inconsistent dtypes)."""
    if type(v) in (bool, int, float):
        return shapes.full((), red.scalar_init("reduce_window", v, dtype), dtype)
    dt = get_aval(v).dtype if hasattr(v, "aval") else np.asarray(v).dtype
    if dt != dtype:
        raise TypeError(f"reduce_window: init value {v!r} has dtype {np.dtype(dt).name}, the "
                        f"operands {np.dtype(dtype).name}; pass an init value of the "
                        f"operands' dtype (e.g. np.{np.dtype(dtype).name}(...)) or a Python "
                        f"scalar")
    return v if hasattr(v, "aval") or np.ndim(v) else shapes.full((), v, dtype)


def _monoid(computation, operand, init):
    import lax as _lax
    try:
        iv = np.asarray(init.to_concrete_value() if hasattr(init, "to_concrete_value") else init)
    except Exception:
        return None
    if iv.shape != () or iv.dtype == object:
        return None
    # the identity of the operand's dtype or of the init value's own, as JAX tests it
    # (-inf with an integer operand is max's identity too)
    dts = (get_aval(operand).dtype, iv.dtype)
    if computation is _lax.add and iv == 0:
        return reduce_window_sum_p
    if computation is _lax.max and any(iv == red._minmax_identity(d, True) for d in dts):
        return reduce_window_max_p
    if computation is _lax.min and any(iv == red._minmax_identity(d, False) for d in dts):
        return reduce_window_min_p
    return None


# ----------------------------- select_and_gather / scatter ----------------------------------

def _tiling(x, wd, ws, pad, bd, wdl):
    """For windows that tile ``x`` (strides equal to the window, no padding or dilation:
    a pooling layer's), (the part of ``x`` they cover as a view, a function taking an
    array of that shape to a (*out, window size) copy, and one taking such an array back);
    else None. Every element then lies in one window at most."""
    if not (tuple(ws) == tuple(wd) and all(p == (0, 0) for p in pad)
            and all(b == 1 for b in bd) and all(d == 1 for d in wdl)) \
            or x.ndim == 0 or any(w == 0 for w in wd):
        return None
    out = tuple(n // w for n, w in zip(x.shape, wd))
    crop = tuple(slice(0, o * w) for o, w in zip(out, wd))
    split = tuple(v for o, w in zip(out, wd) for v in (o, w))          # (o0, w0, o1, ...)
    perm = tuple(range(0, 2 * x.ndim, 2)) + tuple(range(1, 2 * x.ndim, 2))
    shape = out + (math.prod(wd),)

    def windows(a):
        return a.reshape(split).transpose(perm).reshape(shape)

    def back(w):
        return w.reshape(out + tuple(wd)).transpose(np.argsort(perm)).reshape(
            tuple(o * k for o, k in zip(out, wd)))

    return x[crop], windows, back


def _first_selected(flat, select_ge):
    """Index along the last axis that the spec's sequential select keeps: the first
    element wins ties, and a NaN is passed over as the comparison says."""
    cur = flat[..., 0]
    idx = np.zeros(flat.shape[:-1], np.int64)
    with np.errstate(invalid="ignore"):
        for k in range(1, flat.shape[-1]):
            e = flat[..., k]
            keep = cur >= e if select_ge else cur <= e
            cur = np.where(keep, cur, e)
            idx = np.where(keep, idx, k)
    return idx


def _select_positions(x, select_ge, wd, ws, pad, bd, wdl):
    """Flat window index selected in each window: the spec's sequential select (first
    element wins ties; the scan runs in row-major window order)."""
    init = _max_identity(x.dtype) if select_ge else _min_identity(x.dtype)
    v, out = _windows_np(x, init, wd, ws, pad, bd, wdl)
    if v is None:
        return None, out
    return _first_selected(v.reshape(out + (-1,)), select_ge), out


def _padded_coords(idx, out, wd, ws, wdl):
    """Coordinates (in the padded/dilated base) of the selected elements."""
    coords = np.unravel_index(idx, wd)
    grids = np.indices(out)
    return [g * s + c * d for g, s, c, d in zip(grids, ws, coords, wdl)]


def _base_coords(padded_coords, pad, bd, shape):
    """Map padded coordinates back to the operand: None where they fall on padding."""
    valid = np.ones(padded_coords[0].shape, bool)
    base = []
    for c, (lo, _), b, n in zip(padded_coords, pad, bd, shape):
        q = c - lo
        valid &= (q >= 0) & (q % b == 0) & (q // b < n)
        base.append(np.where(valid, q // b, 0))
    return base, valid


def _sgs_impl_common(source_shape, operand, select_ge, wd, ws, pad, bd, wdl):
    idx, out = _select_positions(operand, select_ge, wd, ws, pad, bd, wdl)
    if idx is None:
        return None, None, out
    pc = _padded_coords(idx, out, wd, ws, wdl)
    base, valid = _base_coords(pc, pad, bd, operand.shape)
    return base, valid, out


def _sas_abstract_eval(source, operand, *, select_ge, window_dimensions, window_strides,
                       padding, base_dilation, window_dilation):
    out = _out_shape(operand.shape, window_dimensions, window_strides, padding, base_dilation,
                     window_dilation)
    if source.shape != out:
        raise TypeError(f"select_and_scatter_add: source {source.str_short()} must have the "
                        f"windowed shape {out} of operand {operand.str_short()}")
    if source.dtype != operand.dtype:
        check_dtype("select_and_scatter_add", source, _num, "source")
    return ShapedArray(operand.shape, source.dtype)


def _sas_impl(source, operand, *, select_ge, window_dimensions, window_strides, padding,
              base_dilation, window_dilation):
    if operand.ndim == 0:  # one window holding the one element
        return np.array(source, copy=True)
    result = np.zeros(operand.shape, source.dtype)
    tiles = _tiling(operand, window_dimensions, window_strides, padding, base_dilation,
                    window_dilation)
    if tiles is not None:   # (no window overlaps another: 0 + source where selected)
        covered, windows, back = tiles
        flat = windows(covered)
        idx = _first_selected(flat, select_ge)
        hit = idx[..., None] == np.arange(flat.shape[-1])
        result[tuple(slice(0, n) for n in covered.shape)] = back(
            np.where(hit, source[..., None] + np.zeros((), source.dtype), 0))
        return result
    base, valid, out = _sgs_impl_common(source.shape, operand, select_ge, window_dimensions,
                                        window_strides, padding, base_dilation,
                                        window_dilation)
    if base is None:
        return result
    np.add.at(result, tuple(b[valid] for b in base), source[valid])
    return result


def _sga_abstract_eval(tangent, operand, *, select_ge, window_dimensions, window_strides,
                       padding, base_dilation, window_dilation):
    if tangent.shape != operand.shape:
        raise TypeError(f"select_and_gather_add: tangent {tangent.str_short()} and operand "
                        f"{operand.str_short()} must share a shape")
    out = _out_shape(operand.shape, window_dimensions, window_strides, padding, base_dilation,
                     window_dilation)
    return ShapedArray(out, tangent.dtype)


def _sga_impl(tangent, operand, *, select_ge, window_dimensions, window_strides, padding,
              base_dilation, window_dilation):
    if operand.ndim == 0:
        return np.array(tangent, copy=True)
    tiles = _tiling(operand, window_dimensions, window_strides, padding, base_dilation,
                    window_dilation)
    if tiles is not None:
        covered, windows, _ = tiles
        idx = _first_selected(windows(covered), select_ge)
        crop = tuple(slice(0, n) for n in covered.shape)
        return np.take_along_axis(windows(tangent[crop]), idx[..., None], -1)[..., 0]
    base, valid, out = _sgs_impl_common(None, operand, select_ge, window_dimensions,
                                        window_strides, padding, base_dilation,
                                        window_dilation)
    if base is None:
        return np.zeros(out, tangent.dtype)
    vals = tangent[tuple(base)]
    return np.where(valid, vals, 0).astype(tangent.dtype)


def _sas_transpose(cts, source, operand, **params):
    (ct,) = cts
    assert ad.is_undefined_primal(source) and not ad.is_undefined_primal(operand)
    if type(ct) is Zero:
        return [None, None]
    return [select_and_gather_add_p.bind(ct, operand, **params), None]


def _sga_transpose(cts, tangent, operand, **params):
    (ct,) = cts
    assert ad.is_undefined_primal(tangent) and not ad.is_undefined_primal(operand)
    if type(ct) is Zero:
        return [None, None]
    return [select_and_scatter_add_p.bind(ct, operand, **params), None]


def _sel_jvp(p):
    def rule(primals, tangents, **params):
        (s, x), (gs, _) = primals, tangents   # (the selection is constant in x)
        out = p.bind(s, x, **params)
        if type(gs) is Zero:
            return [out], [Zero.from_primal_value(out)]
        return [out], [p.bind(gs, x, **params)]
    ad.primitive_jvps[p] = rule


def _sel_batch(p):
    def rule(axis_data, vals, dims, *, select_ge, window_dimensions, window_strides, padding,
             base_dilation, window_dilation):
        a, b = (batching.bdim_at_front(v, d, axis_data.size) for v, d in zip(vals, dims))
        ins = lambda t, v: (v,) + tuple(t)
        out = p.bind(a, b, select_ge=select_ge, window_dimensions=ins(window_dimensions, 1),
                     window_strides=ins(window_strides, 1), padding=ins(padding, (0, 0)),
                     base_dilation=ins(base_dilation, 1),
                     window_dilation=ins(window_dilation, 1))
        return [out], [0]
    batching.primitive_batchers[p] = rule


select_and_scatter_add_p = Primitive("select_and_scatter_add")
select_and_scatter_add_p.def_abstract_eval(_sas_abstract_eval)
select_and_scatter_add_p.def_impl(_sas_impl)
ad.primitive_transposes[select_and_scatter_add_p] = _sas_transpose
_sel_jvp(select_and_scatter_add_p)
_sel_batch(select_and_scatter_add_p)

select_and_gather_add_p = Primitive("select_and_gather_add")
select_and_gather_add_p.def_abstract_eval(_sga_abstract_eval)
select_and_gather_add_p.def_impl(_sga_impl)
ad.primitive_transposes[select_and_gather_add_p] = _sga_transpose
_sel_jvp(select_and_gather_add_p)
_sel_batch(select_and_gather_add_p)


def select_and_scatter_add(source, operand, select_prim, window_dimensions, window_strides,
                           padding, base_dilation=None, window_dilation=None):
    """XLA 'SelectAndScatter' with scatter = add and select = ``select_prim`` (lax.ge for
    max pooling, lax.le for min pooling): each window of ``operand`` selects one element
    (ties: the first in row-major window order) and ``source``'s value for that window is
    added there; the result has operand's shape, zero elsewhere."""
    import lax as _lax
    if select_prim in (_lax.ge, _lax.ge_p, "ge"):
        ge = True
    elif select_prim in (_lax.le, _lax.le_p, "le"):
        ge = False
    else:
        raise ValueError("select_and_scatter_add: select_prim must be lax.ge or lax.le")
    wd, ws, pad, bd, wdl = _window_params(get_aval(operand).shape, window_dimensions,
                                          window_strides, padding, base_dilation,
                                          window_dilation, "select_and_scatter_add")
    return select_and_scatter_add_p.bind(source, operand, select_ge=ge, window_dimensions=wd,
                                         window_strides=ws, padding=pad, base_dilation=bd,
                                         window_dilation=wdl)


def _scalar_computation(fn, avals, name, what):
    """``fn`` traced on scalars of ``avals``: a ClosedJaxpr with one scalar output."""
    from tracer.core import Tracer
    from tracer.interpreters import partial_eval as pe
    from tracer.pytree import tree_flatten
    if not callable(fn):
        raise TypeError(f"{name}: {what} must be callable, got {type(fn).__name__}")

    def flat(*xs):
        leaves, _ = tree_flatten(fn(*xs))
        return leaves

    jaxpr, consts = pe.trace_to_jaxpr_dynamic(flat, list(avals))
    if any(isinstance(c, Tracer) for c in consts):
        raise NotImplementedError(f"{name}: {what} closes over a traced value; computations "
                                  f"must be functions of their two scalar arguments")
    outs = [v.aval for v in jaxpr.outvars]
    if len(outs) != 1 or outs[0].shape != ():
        raise TypeError(f"{name}: {what} must return one scalar for arguments "
                        f"{', '.join(a.str_short() for a in avals)}, got "
                        f"{[o.str_short() for o in outs]}")
    return pe.ClosedJaxpr(jaxpr, consts)


def select_and_scatter(operand, select, window_dimensions, window_strides, padding, source,
                       init_value, scatter):
    """XLA 'SelectAndScatter' with user computations (the signature of JAX's internal
    ``jax._src.lax.windowed_reductions._select_and_scatter``).

    Every window of ``operand`` (``window_dimensions``, ``window_strides``, ``padding``: a
    sequence of (low, high) pairs or "SAME"/"VALID") selects one element: its elements
    are visited in row-major order and the current choice ``a`` is kept while
    ``select(a, b)`` (two scalars of operand's dtype -> bool) is true, so on ties a
    ``ge``/``le`` select keeps the first. Padding positions are never selected. The
    output starts as ``init_value`` everywhere (operand's shape, source's dtype) and,
    window by window in row-major order, the selected position becomes
    ``scatter(current, source[window])``. ``source`` must have the windowed shape.
    Under jit this compiles (element-wise computations) with the same result bit for bit.

    Raises TypeError for a source of the wrong shape, an ``init_value`` that is not a
    scalar of source's dtype, or computations that do not return one scalar (``select``
    a bool); NotImplementedError for computations closing over traced values. Not
    differentiable (JAX defines no derivative either: use ``select_and_scatter_add``).
    """
    from lax.reductions import _init_like
    from lax.utils import as_lax_value
    operand, source = as_lax_value(operand), as_lax_value(source)
    oa, sa = get_aval(operand), get_aval(source)
    init_value = _init_like(init_value, source)
    ia = get_aval(init_value)
    wd, ws, pad, _, _ = _window_params(oa.shape, window_dimensions, window_strides, padding,
                                       None, None, "select_and_scatter")
    sel = _scalar_computation(select, [ShapedArray((), oa.dtype)] * 2, "select_and_scatter",
                              "select")
    if sel.jaxpr.outvars[0].aval.dtype != dtypes.bool_:
        raise TypeError(f"select_and_scatter: select must return a bool scalar, got "
                        f"{sel.jaxpr.outvars[0].aval.str_short()}")
    sct = _scalar_computation(scatter, [ShapedArray((), sa.dtype)] * 2, "select_and_scatter",
                              "scatter")
    if sct.jaxpr.outvars[0].aval.dtype != sa.dtype:
        raise TypeError(f"select_and_scatter: scatter must return a scalar of source's dtype "
                        f"{sa.dtype.name}, got {sct.jaxpr.outvars[0].aval.str_short()}")
    del ia
    return select_and_scatter_p.bind(operand, source, init_value, select_jaxpr=sel,
                                     scatter_jaxpr=sct, window_dimensions=wd,
                                     window_strides=ws, padding=pad)


def _ss_abstract_eval(operand, source, init_value, *, select_jaxpr, scatter_jaxpr,
                      window_dimensions, window_strides, padding):
    ones = (1,) * operand.ndim
    out = _out_shape(operand.shape, window_dimensions, window_strides, padding, ones, ones)
    if source.shape != out:
        raise TypeError(f"select_and_scatter: source {source.str_short()} must have the "
                        f"windowed shape {out} of operand {operand.str_short()} (window "
                        f"{window_dimensions}, strides {window_strides}, padding {padding})")
    if init_value.shape != () or init_value.dtype != source.dtype:
        raise TypeError(f"select_and_scatter: init_value must be a scalar of source's dtype, "
                        f"got {init_value.str_short()} for source {source.str_short()}")
    return ShapedArray(operand.shape, source.dtype)


def _ss_impl(operand, source, init_value, *, select_jaxpr, scatter_jaxpr, window_dimensions,
             window_strides, padding):
    from lax.reductions import _eval_computation_np, _run_scalar_jaxpr_np
    out = np.full(operand.shape, init_value, source.dtype)
    if source.size == 0:
        return out
    nd = operand.ndim
    wshape = source.shape
    # every window at once: the padded coordinates of window offset ``off`` for each window
    grids = np.indices(wshape) if nd else np.zeros((0,), np.int64)
    sel_val = sel_pos = have = None
    for off in itertools.product(*(range(w) for w in window_dimensions)):
        pos = [grids[d] * window_strides[d] + off[d] - padding[d][0] for d in range(nd)]
        ok = np.ones(wshape, bool)
        for d in range(nd):
            ok &= (pos[d] >= 0) & (pos[d] < operand.shape[d])
        pos = [np.clip(p, 0, max(n - 1, 0)) for p, n in zip(pos, operand.shape)]
        val = operand[tuple(pos)]
        if have is None:
            sel_val, sel_pos, have = np.array(val), [p.copy() for p in pos], ok.copy()
            continue
        (keep,) = _eval_computation_np(select_jaxpr, [sel_val], [val])
        take = ok & (~have | ~keep.astype(bool))
        sel_val = np.where(take, val, sel_val)
        sel_pos = [np.where(take, p, q) for p, q in zip(pos, sel_pos)]
        have |= ok
    if have is None:       # an empty window: nothing is selected
        return out
    # scatter window by window (two windows may select one position: order matters)
    for w in np.ndindex(*wshape):
        if not have[w]:
            continue
        at = tuple(int(p[w]) for p in sel_pos)
        (out[at],) = _run_scalar_jaxpr_np(scatter_jaxpr, [out[at], source[w]])
    return out


def _ss_batch(axis_data, vals, dims, *, select_jaxpr, scatter_jaxpr, window_dimensions,
              window_strides, padding):
    (x, src, init), (dx, ds, di) = vals, dims
    if di is not None:
        raise NotImplementedError("select_and_scatter: vmap over a batched init_value is not "
                                  "supported; pass it unbatched")
    x = batching.bdim_at_front(x, dx, axis_data.size)
    src = batching.bdim_at_front(src, ds, axis_data.size)
    out = select_and_scatter_p.bind(
        x, src, init, select_jaxpr=select_jaxpr, scatter_jaxpr=scatter_jaxpr,
        window_dimensions=(1,) + tuple(window_dimensions),
        window_strides=(1,) + tuple(window_strides), padding=((0, 0),) + tuple(padding))
    return [out], [0]


select_and_scatter_p = Primitive("select_and_scatter")
select_and_scatter_p.def_abstract_eval(_ss_abstract_eval)
select_and_scatter_p.def_impl(_ss_impl)
batching.primitive_batchers[select_and_scatter_p] = _ss_batch


# ---------------------------------------- cumulative ----------------------------------------

def _cum_abstract_eval(name, allowed):
    def rule(x, *, axis, reverse):
        check_dtype(name, x, allowed)
        if not 0 <= axis < max(x.ndim, 1):
            raise TypeError(f"{name}: axis {axis} out of range for {x.str_short()}")
        return ShapedArray(x.shape, x.dtype, x.weak_type)
    return rule


def _cum_impl(npfn):
    def impl(x, *, axis, reverse):
        if x.ndim == 0:
            return np.array(x, copy=True)
        y = np.flip(x, axis) if reverse else x
        with np.errstate(all="ignore"):
            r = np.asarray(npfn(y, axis)).astype(x.dtype)
        return np.flip(r, axis) if reverse else r
    return impl


def _plus_zero(fn):
    """A float scan started from XLA's +0.0 identity / logaddexp's -inf (``0 + x[0]``, as
    XLA:CPU's reduce_window scan): a leading -0.0 becomes +0.0, nothing else changes."""
    def scan(y, axis):
        r = fn(y, axis)
        return r + np.zeros((), r.dtype) if dtypes.is_inexact(r.dtype) else r
    return scan


def _cum_minmax(is_max):
    """The fold acc = max(acc, y[i]) with lax.max's rule (lax.min's), bit for bit,
    vectorized: NumPy's accumulate gives the values; zeros take the sign the fold gives
    them (+0.0 for max once a +0.0 was seen), and from the first NaN on the result is that
    NaN with the sign bits of the accumulator before it and-ed (or-ed) in."""
    accumulate = np.maximum.accumulate if is_max else np.minimum.accumulate

    def scan(y, axis):
        r = accumulate(y, axis=axis)
        if not dtypes.is_floating(y.dtype) or y.size == 0:
            return r
        nan = np.isnan(y)
        # elements whose sign bit wins the fold: sign 0 for max, sign 1 for min
        wins = (np.signbit(y) ^ is_max) & ~nan
        won = np.logical_or.accumulate(wins & (y == 0), axis=axis)
        hi, lo = (0.0, -0.0) if is_max else (-0.0, 0.0)
        r = np.where(r == 0, np.where(won, hi, lo).astype(y.dtype), r)
        if nan.any():
            first = np.argmax(nan, axis=axis, keepdims=True)
            v = np.take_along_axis(y, first, axis)
            before = np.take_along_axis(np.logical_or.accumulate(wins, axis=axis),
                                        np.maximum(first - 1, 0), axis) & (first > 0)
            v = np.where(before, np.abs(v) if is_max else -np.abs(v), v)
            r = np.where(np.logical_or.accumulate(nan, axis=axis), v, r)
        return r
    return scan


def _prefix_scan(x, axis, reverse, combine, identity):
    """Hillis-Steele inclusive scan with lax ops (log2(n) shifted combines): the
    differentiable reference of the cumulative primitives."""
    n = get_aval(x).shape[axis]
    if reverse:
        x = shapes.rev(x, (axis,))
    shift = 1
    nd = get_aval(x).ndim
    while shift < n:
        cfg = [(0, 0, 0)] * nd
        cfg[axis] = (shift, -shift, 0)
        shifted = shapes.pad(x, shapes.full((), identity, get_aval(x).dtype), cfg)
        x = combine(shifted, x)
        shift *= 2
    return shapes.rev(x, (axis,)) if reverse else x


def _logaddexp(a, b):
    m = ew.max(a, b)
    safe = ew.select(ew.is_finite(m), m, shapes.full_like(m, 0))
    return ew.add(safe, ew.log(ew.add(ew.exp(ew.sub(a, safe)), ew.exp(ew.sub(b, safe)))))


def _make_cum(name, npfn, allowed, combine, identity):
    p = Primitive(name)
    p.def_abstract_eval(_cum_abstract_eval(name, allowed))
    p.def_impl(lowp_widening(name, _cum_impl(npfn)))   # f32 accumulation, one rounding

    def jvp(primals, tangents, *, axis, reverse):
        (x,), (g,) = primals, tangents
        out = p.bind(x, axis=axis, reverse=reverse)
        if type(g) is Zero:
            return [out], [Zero.from_primal_value(out)]
        ident = identity(get_aval(x).dtype)
        _, (t,) = ad.jvp_flat(lambda v: [_prefix_scan(v, axis, reverse, combine, ident)],
                              [x], [g])
        return [out], [t]

    ad.primitive_jvps[p] = jvp

    def batch(axis_data, vals, dims, *, axis, reverse):
        (x,), (d,) = vals, dims
        return [p.bind(x, axis=axis + (d <= axis), reverse=reverse)], [d]

    batching.primitive_batchers[p] = batch
    return p


cumsum_p = _make_cum("cumsum", _plus_zero(lambda y, a: np.cumsum(y, a, dtype=y.dtype)), _num,
                     ew.add, lambda dt: 0)
cumprod_p = _make_cum("cumprod", lambda y, a: np.cumprod(y, a, dtype=y.dtype), _num, ew.mul,
                      lambda dt: 1)
cummax_p = _make_cum("cummax", _cum_minmax(True), _ordered, ew.max, _max_identity)
cummin_p = _make_cum("cummin", _cum_minmax(False), _ordered, ew.min, _min_identity)
cumlogsumexp_p = _make_cum("cumlogsumexp", _plus_zero(np.logaddexp.accumulate),
                           _float, _logaddexp,
                           lambda dt: -np.inf)


def _cumsum_transpose(cts, x, *, axis, reverse):
    (ct,) = cts
    if type(ct) is Zero:
        return [None]
    return [cumsum_p.bind(ct, axis=axis, reverse=not reverse)]


ad.deflinear(cumsum_p, _cumsum_transpose)


def _cum_wrapper(p, name):
    def f(operand, axis: int = 0, reverse: bool = False):
        nd = get_aval(operand).ndim
        axis = canonicalize_axis(axis, nd) if nd else 0
        return p.bind(operand, axis=axis, reverse=bool(reverse))
    f.__name__ = name
    f.__doc__ = (f"Cumulative {name[3:]} along ``axis`` (jax.lax.{name}); ``reverse`` "
                 "accumulates from the end. Same shape and dtype as the operand. As "
                 "XLA:CPU's scan, element i folds the elements up to i into the "
                 "accumulator in order, starting from the identity (so cumsum's leading "
                 "-0.0 is +0.0); max/min by lax.max/lax.min's rules (signed zeros, NaN "
                 "signs). TypeError for dtypes the operation does not take.")
    return f


cumsum = _cum_wrapper(cumsum_p, "cumsum")
cumprod = _cum_wrapper(cumprod_p, "cumprod")
cummax = _cum_wrapper(cummax_p, "cummax")
cummin = _cum_wrapper(cummin_p, "cummin")
cumlogsumexp = _cum_wrapper(cumlogsumexp_p, "cumlogsumexp")


# -------------------------------------- batch norm ------------------------------------------

def _bn_axes(operand, feature_index):
    nd = get_aval(operand).ndim
    fi = canonicalize_axis(feature_index, nd)
    return fi, tuple(i for i in range(nd) if i != fi)


def _bcast_feature(v, operand, fi):
    return shapes.broadcast_in_dim(v, get_aval(operand).shape, (fi,))


def batch_norm_training(operand, scale, offset, epsilon, feature_index):
    """XLA 'BatchNormTraining': normalize over every dimension but ``feature_index``.
    Returns (output, batch_mean, batch_var) with the biased (population) variance."""
    fi, axes = _bn_axes(operand, feature_index)
    n = int(np.prod([get_aval(operand).shape[i] for i in axes]))
    dt = get_aval(operand).dtype
    mean = ew.div(red.reduce_sum(operand, axes), shapes.full((), n, dt))
    centered = ew.sub(operand, _bcast_feature(mean, operand, fi))
    var = ew.div(red.reduce_sum(ew.mul(centered, centered), axes), shapes.full((), n, dt))
    out = batch_norm_inference(operand, scale, offset, mean, var, epsilon, fi)
    return out, mean, var


def batch_norm_inference(operand, scale, offset, mean, variance, epsilon, feature_index):
    """XLA 'BatchNormInference': (x - mean) * scale / sqrt(variance + epsilon) + offset,
    the per-feature vectors broadcast along ``feature_index``."""
    fi, _ = _bn_axes(operand, feature_index)
    dt = get_aval(operand).dtype
    inv = ew.rsqrt(ew.add(variance, shapes.full((), epsilon, dt)))
    norm = ew.mul(ew.sub(operand, _bcast_feature(mean, operand, fi)),
                  _bcast_feature(ew.mul(inv, scale), operand, fi))
    return ew.add(norm, _bcast_feature(offset, operand, fi))


def batch_norm_grad(operand, scale, mean, variance, grad_output, epsilon, feature_index):
    """XLA 'BatchNormGrad': (grad_operand, grad_scale, grad_offset) of batch norm training
    at (mean, variance), by the spec's formulas."""
    fi, axes = _bn_axes(operand, feature_index)
    dt = get_aval(operand).dtype
    n = int(np.prod([get_aval(operand).shape[i] for i in axes]))
    inv = ew.rsqrt(ew.add(variance, shapes.full((), epsilon, dt)))
    xc = ew.sub(operand, _bcast_feature(mean, operand, fi))
    grad_offset = red.reduce_sum(grad_output, axes)
    grad_scale = ew.mul(red.reduce_sum(ew.mul(grad_output, xc), axes), inv)
    # dx = scale * inv / n * (n * dy - sum(dy) - xc * inv^2 * sum(dy * xc))
    t = ew.sub(ew.mul(grad_output, shapes.full((), n, dt)),
               _bcast_feature(grad_offset, operand, fi))
    t = ew.sub(t, ew.mul(xc, _bcast_feature(ew.mul(ew.mul(inv, inv),
                                                   red.reduce_sum(ew.mul(grad_output, xc),
                                                                  axes)), operand, fi)))
    coef = ew.div(ew.mul(scale, inv), shapes.full((), n, dt))
    grad_operand = ew.mul(t, _bcast_feature(coef, operand, fi))
    return grad_operand, grad_scale, grad_offset
