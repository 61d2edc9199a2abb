"""``x.at[idx].set(y)`` and friends: JAX's functional index updates (jax.numpy.ndarray.at).

``x.at[idx]`` returns an ``IndexUpdateRef``; its methods return a new array:

============================  =====================================================
``.get()``                    ``x[idx]`` (with ``mode``/``fill_value`` for gathers)
``.set(y)``                   ``x[idx] = y``
``.add(y)`` / ``.subtract(y)``  ``x[idx] += y`` / ``-= y``, repeated indices accumulate
``.multiply(y)`` / ``.mul``   ``x[idx] *= y``
``.divide(y)``                ``x / ones.at[idx].multiply(y)`` (JAX's definition)
``.power(y)``                 ``x ** ones.at[idx].multiply(y)`` (JAX's definition)
``.min(y)`` / ``.max(y)``     ``x[idx] = minimum(x[idx], y)`` / ``maximum``
``.apply(f)``                 ``x[idx] = f(x[idx])``, once per occurrence of an index
============================  =====================================================

Indices follow NumPy (see tracer.numpy.indexing); ``y`` broadcasts to ``x[idx]``'s shape
(leading size-1 dims of ``y`` may be dropped) and is cast to ``x``'s dtype.
``mode``: None or 'drop'/'fill' drop out-of-range updates (default), 'clip' clamps them
into range, 'promise_in_bounds' promises there are none (dropped here). For ``.get()``
the default clamps and 'fill' returns ``fill_value`` (NaN / INT_MIN / UINT_MAX / True by
default) for out-of-range integers. Negative indices count from the end unless
``wrap_negative_indices=False``.

A traced boolean mask can't become indices under jit; ``x.at[mask].<op>(scalar)`` with a
mask covering leading dimensions of ``x`` is computed element-wise with ``where`` instead.
"""
from __future__ import annotations

import numpy as np

import lax
from tracer.core import Array, Tracer, get_aval
from tracer.numpy import indexing


class IndexUpdateRef:
    """The object returned by ``x.at[idx]``."""

    __slots__ = ("array", "index")

    def __init__(self, array, index):
        self.array = array
        self.index = index

    def __repr__(self):
        return f"_IndexUpdateRef({self.array!r}, {self.index!r})"

    def get(self, *, indices_are_sorted=False, unique_indices=False, mode=None,
            fill_value=None, wrap_negative_indices=True):
        """``x[idx]``; ``mode='fill'`` returns ``fill_value`` for out-of-range indices."""
        return indexing.rewriting_take(self.array, self.index,
                                       indices_are_sorted=indices_are_sorted,
                                       unique_indices=unique_indices, mode=mode,
                                       fill_value=fill_value,
                                       wrap_negative_indices=wrap_negative_indices,
                                       fname="x.at[idx].get")

    def set(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            wrap_negative_indices=True):
        """``x[idx] = values`` (the last of repeated indices wins)."""
        return _scatter_update(self.array, self.index, values, lax.scatter, "set",
                               indices_are_sorted, unique_indices, mode,
                               wrap_negative_indices)

    def add(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            wrap_negative_indices=True):
        """``x[idx] += values`` (repeated indices accumulate)."""
        return _scatter_update(self.array, self.index, values, lax.scatter_add, "add",
                               indices_are_sorted, unique_indices, mode,
                               wrap_negative_indices)

    def subtract(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
                 wrap_negative_indices=True):
        """``x[idx] -= values`` (repeated indices accumulate)."""
        return _scatter_update(self.array, self.index, values, lax.scatter_sub, "subtract",
                               indices_are_sorted, unique_indices, mode,
                               wrap_negative_indices)

    def multiply(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
                 wrap_negative_indices=True):
        """``x[idx] *= values`` (repeated indices accumulate)."""
        return _scatter_update(self.array, self.index, values, lax.scatter_mul, "multiply",
                               indices_are_sorted, unique_indices, mode,
                               wrap_negative_indices)

    mul = multiply

    def divide(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
               wrap_negative_indices=True):
        """``x / ones_like(x).at[idx].multiply(values)`` (true division, as JAX)."""
        from tracer.numpy.ufuncs import divide
        from tracer.numpy.creation import ones_like
        denom = _scatter_update(ones_like(self.array), self.index, values, lax.scatter_mul,
                                "divide", indices_are_sorted, unique_indices, mode,
                                wrap_negative_indices)
        return divide(self.array, denom)

    def power(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
              wrap_negative_indices=True):
        """``x ** ones_like(x).at[idx].multiply(values)`` (as JAX)."""
        from tracer.numpy.ufuncs import power
        from tracer.numpy.creation import ones_like
        expo = _scatter_update(ones_like(self.array), self.index, values, lax.scatter_mul,
                               "power", indices_are_sorted, unique_indices, mode,
                               wrap_negative_indices)
        return power(self.array, expo)

    def min(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            wrap_negative_indices=True):
        """``x[idx] = minimum(x[idx], values)``."""
        return _scatter_update(self.array, self.index, values, lax.scatter_min, "min",
                               indices_are_sorted, unique_indices, mode,
                               wrap_negative_indices)

    def max(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            wrap_negative_indices=True):
        """``x[idx] = maximum(x[idx], values)``."""
        return _scatter_update(self.array, self.index, values, lax.scatter_max, "max",
                               indices_are_sorted, unique_indices, mode,
                               wrap_negative_indices)

    def apply(self, func, *, indices_are_sorted=False, unique_indices=False, mode=None,
              wrap_negative_indices=True):
        """``x[idx] = func(x[idx])`` with ``func`` a scalar function; a position indexed k
        times gets ``func`` applied k times."""
        def scatter_apply(x, indices, updates, dnums, **kw):
            return lax.scatter_apply(x, indices, func, dnums,
                                     update_shape=get_aval(updates).shape, **kw)
        zero = Array(np.zeros((), get_aval(self.array).dtype))
        return _scatter_update(self.array, self.index, zero, scatter_apply, "apply",
                               indices_are_sorted, unique_indices, mode,
                               wrap_negative_indices, func=func)


def _strip_leading_ones(y, ndim):
    shape = get_aval(y).shape
    k = 0
    while len(shape) - k > ndim and shape[k] == 1:
        k += 1
    return lax.reshape(y, shape[k:]) if k else y


def _mask_only(index, shape):
    """The traced boolean mask when ``index`` is just one (covering leading dims)."""
    m = index[0] if isinstance(index, tuple) and len(index) == 1 else index
    if isinstance(m, Tracer) and get_aval(m).dtype == np.bool_ and \
            m.to_concrete_value() is None:
        ms = get_aval(m).shape
        if ms and tuple(shape[:len(ms)]) == ms:
            return m
    return None


def _where_update(x, mask, y, op, func):
    """``x.at[mask].<op>(y)`` for a traced mask and scalar ``y``: element-wise select."""
    from tracer.numpy import ufuncs
    xa = get_aval(x)
    mask = lax.broadcast_in_dim(mask, xa.shape, tuple(range(get_aval(mask).ndim)))
    if op == "apply":
        new = _elementwise_apply(func, x)
    else:
        y = lax.convert_element_type(y, xa.dtype) if get_aval(y).dtype != xa.dtype else y
        new = {"set": lambda: lax.broadcast_in_dim(y, xa.shape, ()),
               "add": lambda: ufuncs.add(x, y), "subtract": lambda: ufuncs.subtract(x, y),
               "multiply": lambda: ufuncs.multiply(x, y),
               "min": lambda: ufuncs.minimum(x, y), "max": lambda: ufuncs.maximum(x, y),
               "divide": lambda: ufuncs.multiply(x, y),
               "power": lambda: ufuncs.multiply(x, y)}[op]()
        if get_aval(new).dtype != xa.dtype:
            new = lax.convert_element_type(new, xa.dtype)
    return lax.select(mask, new, x)


def _elementwise_apply(func, x):
    from tracer.interpreters import batching
    xa = get_aval(x)
    flat = lax.reshape(x, (xa.size,))
    outs, dims = batching.vmap_flat(lambda v: [func(v)], xa.size, None, [0], [flat])
    out = batching.matchaxis(xa.size, dims[0], 0, outs[0])
    return lax.reshape(lax.convert_element_type(out, xa.dtype), xa.shape)


def _scatter_update(x, index, values, scatter_fn, op, indices_are_sorted, unique_indices,
                    mode, wrap_negative_indices, func=None):
    from tracer.numpy.util import as_operand, broadcast_to_shape
    fname = f"x.at[idx].{op}"
    x = as_operand(x, fname)
    values = as_operand(values, fname)
    xa = get_aval(x)
    mask = _mask_only(index, xa.shape)
    if mask is not None and get_aval(values).ndim == 0:
        if op in ("divide", "power"):
            # x.at[mask].divide(y) builds ones.at[mask].multiply(y): plain multiply here.
            return _where_update(x, mask, values, "multiply", func)
        return _where_update(x, mask, values, op, func)
    parsed = indexing.parse_index(xa.shape, index, fname)
    operand = lax.reshape(x, parsed.shape) if parsed.inserted else x
    g = indexing.index_to_gather(parsed.shape, parsed.entries, wrap_negative_indices)
    if g.empty:
        return x
    if get_aval(values).dtype != xa.dtype:
        values = lax.convert_element_type(values, xa.dtype)
    values = _strip_leading_ones(values, len(g.out_shape))
    try:
        values = broadcast_to_shape(values, g.out_shape)
    except ValueError:
        raise ValueError(f"{fname}: values of shape {get_aval(values).shape} cannot be "
                         f"broadcast to the indexed shape {g.out_shape} (array shape "
                         f"{xa.shape})") from None
    smode = lax.GatherScatterMode.from_any(mode)
    out = scatter_fn(operand, g.indices, values, g.scatter_dnums,
                     indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                     mode=smode)
    if parsed.inserted:
        out = lax.reshape(out, xa.shape)
    return out

