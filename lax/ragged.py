"""Ragged contractions: ``ragged_dot`` and ``ragged_dot_general`` (jax.lax), with
``RaggedDotDimensionNumbers``.

``group_sizes`` splits the lhs "ragged" dimension into consecutive groups: group ``i``
covers positions ``[sum(group_sizes[:i]), sum(group_sizes[:i+1]))``; positions past the
last group belong to none. Three modes, after the kind of the ragged dimension
(``g`` groups, ``b`` batch, ``m``/``n`` free, ``k`` contracting dims):

1. ragged free dim of lhs: ``[b,m,k] x [g,b,k,n] -> [b,m,n]``, rows of group i use
   ``rhs[i]`` (rows in no group give 0);
2. ragged contracting dim: ``[b,m,k] x [b,k,n] -> [g,b,m,n]``, output ``i`` contracts only
   over group i's part of k;
3. ragged batch dim: ``[b,m,k] x [b,k,n] -> [b,m,n]``: a plain dot_general (the groups
   do not change the result, as in JAX's reference implementation).

``group_sizes`` has shape ``[g]``, or ``[prefix..., g]`` where the prefix dims are the
lhs batch dims and the dims of the ragged kind outer to the ragged one (JAX's rule).

Built as a composition (as JAX's reference lowering is): the operand(s) are expanded
with a group axis and masked (``select``), then one ``dot_general`` contracts the group
axis (mode 1) or batches over it (mode 2). Gradients (w.r.t. lhs and rhs) and vmap come
from those primitives; the cost is ``g`` times a dense dot, fine for the moderate group
counts of mixture-of-experts layers on CPU.
"""
from __future__ import annotations

import operator

from tracer import dtypes
from tracer.core import get_aval
from lax import elementwise as ew
from lax import shapes
from lax.linalg import dot_general
from lax.utils import as_lax_value


class RaggedDotDimensionNumbers:
    """The dimension numbers of ``ragged_dot_general`` (jax.lax.RaggedDotDimensionNumbers):
    ``dot_dimension_numbers`` as for ``dot_general``, ``lhs_ragged_dimensions`` (exactly
    one lhs dim) and ``rhs_group_dimensions`` (one rhs dim in mode 1, none otherwise)."""

    __slots__ = ("dot_dimension_numbers", "lhs_ragged_dimensions", "rhs_group_dimensions")

    def __init__(self, dot_dimension_numbers, lhs_ragged_dimensions, rhs_group_dimensions):
        t = lambda xs: tuple(operator.index(i) for i in xs)
        (lc, rc), (lb, rb) = dot_dimension_numbers
        object.__setattr__(self, "dot_dimension_numbers", ((t(lc), t(rc)), (t(lb), t(rb))))
        object.__setattr__(self, "lhs_ragged_dimensions", t(lhs_ragged_dimensions))
        object.__setattr__(self, "rhs_group_dimensions", t(rhs_group_dimensions))

    def __setattr__(self, name, value):
        raise AttributeError("RaggedDotDimensionNumbers is immutable")

    def _key(self):
        return (self.dot_dimension_numbers, self.lhs_ragged_dimensions,
                self.rhs_group_dimensions)

    def __eq__(self, other):
        return isinstance(other, RaggedDotDimensionNumbers) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        return (f"RaggedDotDimensionNumbers(dot_dimension_numbers="
                f"{self.dot_dimension_numbers}, lhs_ragged_dimensions="
                f"{self.lhs_ragged_dimensions}, rhs_group_dimensions="
                f"{self.rhs_group_dimensions})")


_BASIC = RaggedDotDimensionNumbers((((1,), (1,)), ((), ())), (0,), (0,))

_NONCONTRACTING, _CONTRACTING, _BATCH = "ragged free", "ragged contracting", "ragged batch"


def _remaining(n, *removed):
    gone = set().union(*map(set, removed))
    return [i for i in range(n) if i not in gone]


def _mode(fname, lhs_ndim, rdn):
    if len(rdn.lhs_ragged_dimensions) != 1:
        raise TypeError(f"{fname} expects exactly one lhs ragged dimension, got "
                        f"{rdn.lhs_ragged_dimensions}")
    (lc, _), (lb, _) = rdn.dot_dimension_numbers
    r = rdn.lhs_ragged_dimensions[0]
    if not 0 <= r < lhs_ndim:
        raise TypeError(f"{fname}: lhs ragged dimension {r} is out of range for an lhs of "
                        f"rank {lhs_ndim}")
    if r in lc:
        return _CONTRACTING, r
    if r in lb:
        return _BATCH, r
    return _NONCONTRACTING, r


def _prefix_dims(mode, ndim, ragged, batch, contract):
    """The dims of the operand that group_sizes' leading dims correspond to."""
    batch, contract = list(batch), list(contract)
    free = _remaining(ndim, contract, batch)
    if mode == _NONCONTRACTING:
        return batch + free[:free.index(ragged)]
    if mode == _CONTRACTING:
        return batch + contract[:contract.index(ragged)]
    return batch[:batch.index(ragged)]


def _expand(x, ragged, group_sizes, prefix):
    """``x`` with a leading group axis: entry ``[i, ...]`` is x where the ragged position
    lies in group i, else 0."""
    from lax.windowed import cumsum
    xa, ga = get_aval(x), get_aval(group_sizes)
    g = ga.shape[-1]
    shape = (g,) + xa.shape
    ends = cumsum(group_sizes, axis=ga.ndim - 1)
    starts = ew.sub(ends, group_sizes)
    # group_sizes' axes go to (prefix dims..., the new group axis 0); broadcast_in_dim
    # wants them in increasing order
    targets = (0,) if ga.ndim == 1 else tuple(1 + d for d in prefix) + (0,)
    order = sorted(range(len(targets)), key=lambda i: targets[i])
    gdims = tuple(targets[i] for i in order)

    def spread(v):
        if order != list(range(len(order))):
            v = shapes.transpose(v, tuple(order))
        return shapes.broadcast_in_dim(v, shape, gdims)

    pos = shapes.broadcasted_iota(ga.dtype, shape, 1 + ragged)
    inside = ew.bitwise_and(ew.le(spread(starts), pos), ew.lt(pos, spread(ends)))
    xb = shapes.broadcast_in_dim(x, shape, tuple(range(1, len(shape))))
    return ew.select(inside, xb, shapes.full(shape, 0, xa.dtype))


def ragged_dot_general(lhs, rhs, group_sizes, ragged_dot_dimension_numbers, precision=None,
                       preferred_element_type=None, group_offset=None, out_sharding=None):
    """Ragged matrix multiplication (jax.lax.ragged_dot_general); the modes are described
    in this module's docstring. ``group_sizes`` must be an integer array of shape ``[g]``
    or ``[prefix..., g]``. The result is ``dot_general``'s, with a leading group dim of
    size g in the ragged-contracting mode. ``precision``/``preferred_element_type`` as
    for dot_general; ``out_sharding`` is ignored (one device).

    Errors (TypeError, naming the dims): not exactly one lhs ragged dim; the wrong number
    of rhs group dims for the mode; an rhs group dim that is also contracting/batch or
    whose size is not g; a group_sizes shape that does not fit. ``group_offset`` raises
    NotImplementedError, as in JAX."""
    fname = "ragged_dot_general"
    del out_sharding
    if group_offset is not None:
        raise NotImplementedError(f"{fname}: group_offset is not supported (JAX does not "
                                  "implement it either); slice group_sizes and rhs instead")
    rdn = ragged_dot_dimension_numbers
    if not isinstance(rdn, RaggedDotDimensionNumbers):
        raise TypeError(f"{fname}: ragged_dot_dimension_numbers must be a "
                        f"RaggedDotDimensionNumbers, got {type(rdn).__name__}")
    lhs, rhs, group_sizes = (as_lax_value(x) for x in (lhs, rhs, group_sizes))
    la, ra, ga = get_aval(lhs), get_aval(rhs), get_aval(group_sizes)
    if not dtypes.is_integer(ga.dtype):
        raise TypeError(f"{fname}: group_sizes must be integers, got {ga.str_short()}")
    if ga.ndim == 0:
        raise TypeError(f"{fname}: expected rank of group_sizes to be >= 1, got a scalar")
    mode, ragged = _mode(fname, la.ndim, rdn)
    (lc, rc), (lb, rb) = rdn.dot_dimension_numbers
    g = ga.shape[-1]
    l_prefix = _prefix_dims(mode, la.ndim, ragged, lb, lc)
    if ga.ndim != 1:
        want = tuple(la.shape[i] for i in l_prefix) + (g,)
        if ga.shape != want:
            raise TypeError(f"{fname}: expected group_sizes to have shape {want} or ({g},), "
                            f"got {ga.shape}")
    groups = rdn.rhs_group_dimensions
    if mode == _NONCONTRACTING:
        if len(groups) != 1:
            raise TypeError(f"{fname} requires exactly one rhs group dimension when the lhs "
                            f"ragged dimension is a free (non-contracting) one, got {groups}")
        (rg,) = groups
        if not 0 <= rg < ra.ndim:
            raise TypeError(f"{fname}: rhs group dimension {rg} is out of range for an rhs "
                            f"of rank {ra.ndim}")
        if rg in rc or rg in rb:
            raise TypeError(f"{fname} requires the rhs group dimension {rg} to be distinct "
                            f"from the contracting {rc} and batch {rb} dimensions")
        if ra.shape[rg] != g:
            raise TypeError(f"{fname}: expected rhs group dimension {rg} to have size {g} "
                            f"(the number of groups), got {ra.shape[rg]} (rhs {ra.shape})")
    elif groups:
        raise TypeError(f"{fname} requires zero rhs group dimensions when the lhs ragged "
                        f"dimension is a contracting or batch one, got {groups}")
    dot = lambda a, b, dn: dot_general(a, b, dn, precision=precision,
                                       preferred_element_type=preferred_element_type)
    inc = lambda dims: tuple(d + 1 for d in dims)
    if mode == _BATCH:
        return dot(lhs, rhs, rdn.dot_dimension_numbers)
    lhs_x = _expand(lhs, ragged, group_sizes, l_prefix)
    if mode == _NONCONTRACTING:
        return dot(lhs_x, rhs, ((inc(lc) + (0,), rc + (groups[0],)), (inc(lb), rb)))
    r_ragged = rc[lc.index(ragged)]
    r_prefix = _prefix_dims(mode, ra.ndim, r_ragged, rb, rc)
    rhs_x = _expand(rhs, r_ragged, group_sizes, r_prefix)
    return dot(lhs_x, rhs_x, ((inc(lc), inc(rc)), ((0,) + inc(lb), (0,) + inc(rb))))


def ragged_dot(lhs, rhs, group_sizes, precision=None, preferred_element_type=None,
               group_offset=None, out_sharding=None):
    """Grouped matmul (jax.lax.ragged_dot): ``lhs [m, k]``, ``rhs [g, k, n]``, integer
    ``group_sizes [g]`` -> ``[m, n]`` where row r of lhs, in group i (the groups are
    consecutive runs of rows of the given sizes), is multiplied by ``rhs[i]``; rows past
    ``sum(group_sizes)`` give zeros. Groups running past m are cut at m. TypeError for
    other ranks or mismatched sizes (see ``ragged_dot_general``)."""
    la, ra = get_aval(lhs), get_aval(rhs)
    if la.ndim != 2 or ra.ndim != 3:
        raise TypeError(f"ragged_dot: expected lhs [m, k] and rhs [g, k, n], got shapes "
                        f"{la.shape} and {ra.shape}")
    if la.shape[1] != ra.shape[1]:
        raise TypeError(f"ragged_dot: contracting sizes differ: lhs {la.shape} has k="
                        f"{la.shape[1]}, rhs {ra.shape} has k={ra.shape[1]}")
    return ragged_dot_general(lhs, rhs, group_sizes, _BASIC, precision=precision,
                              preferred_element_type=preferred_element_type,
                              group_offset=group_offset, out_sharding=out_sharding)
