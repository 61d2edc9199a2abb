"""tracer.ops: segment reductions (``jax.ops.segment_sum`` & co.).

``segment_<op>(data, segment_ids, num_segments)`` reduces the rows of ``data`` (slices
along its leading axis) that share a segment id: ``out[s] = op over {data[i] :
segment_ids[i] == s}``, of shape ``(num_segments,) + data.shape[1:]`` and ``data``'s
dtype. Segments no row maps to hold the operation's identity, as in JAX: 0 for sums, 1
for products, the dtype's lowest value (-inf for floats, the minimum integer, False) for
maxima, its highest for minima. Ids outside ``[0, num_segments)`` -- negative ones
included -- are dropped by default (``mode=None``, FILL_OR_DROP); ``mode='clip'`` clamps
them instead. Each is an ``x.at[segment_ids].<op>`` scatter into the identity-filled
output, so it differentiates (sum and product by their scatter rules; max/min through
the selected entries, ties splitting the cotangent as the scatter's rule does), batches
under ``vmap`` and compiles under ``jit`` -- there ``num_segments`` must be given, as a
Python int, since it fixes the output shape.
"""
from __future__ import annotations

import operator

import numpy as np

import lax
from tracer import dtypes
from tracer.core import concrete_value, get_aval
from tracer.errors import ConcretizationTypeError

__all__ = ["segment_sum", "segment_prod", "segment_max", "segment_min"]


def _identity(op, dtype):
    if op == "add":
        return 0
    if op == "multiply":
        return 1
    lowest = op == "max"
    if dtype == dtypes.bool_:
        return not lowest
    if dtypes.is_integer(dtype):
        info = dtypes.iinfo(dtype)
        return int(info.min if lowest else info.max)
    return -np.inf if lowest else np.inf


def _segment_update(name, data, segment_ids, op, num_segments, indices_are_sorted,
                    unique_indices, bucket_size, reducer, mode):
    import tracer.numpy as tnp
    fname = f"ops.{name}"
    data, segment_ids = tnp.asarray(data), tnp.asarray(segment_ids)
    daval, iaval = get_aval(data), get_aval(segment_ids)
    if not dtypes.is_integer(iaval.dtype):
        raise TypeError(f"{fname}: segment_ids must be integers, got {iaval.str_short()}")
    if iaval.ndim != 1 or daval.ndim < 1 or daval.shape[0] != iaval.shape[0]:
        raise ValueError(f"{fname}: segment_ids must be 1-D with one id per row of data "
                         f"(data.shape[0]); got data {daval.str_short()} and segment_ids "
                         f"{iaval.str_short()}")
    if num_segments is None:
        ids = concrete_value(segment_ids)
        if ids is None:
            raise ConcretizationTypeError(
                segment_ids, f"{fname}: num_segments is None, so the output size would be "
                "max(segment_ids) + 1 of traced ids; pass num_segments as a Python int")
        if ids.size == 0:
            raise ValueError(f"{fname}: num_segments is None and segment_ids is empty; "
                             "pass num_segments")
        num_segments = int(ids.max()) + 1
    try:
        num_segments = operator.index(num_segments)
    except TypeError:
        raise TypeError(f"{fname}: num_segments must be a Python int (it fixes the output "
                        f"shape), got {num_segments!r}") from None
    if num_segments < 0:
        raise ValueError(f"{fname}: num_segments must be non-negative, got {num_segments}")
    mode = lax.GatherScatterMode.FILL_OR_DROP if mode is None else mode
    kw = dict(indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
              mode=mode, wrap_negative_indices=False)
    rest, dt = daval.shape[1:], daval.dtype
    if bucket_size is None:
        out = tnp.full((num_segments,) + rest, _identity(op, dt), dtype=dt)
        return getattr(out.at[segment_ids], op)(data, **kw)
    # Buckets of ``bucket_size`` consecutive rows reduce separately, then across buckets
    # (JAX's option for the accuracy of long sums and products).
    try:
        bucket_size = operator.index(bucket_size)
    except TypeError:
        raise TypeError(f"{fname}: bucket_size must be a Python int, got "
                        f"{bucket_size!r}") from None
    if bucket_size < 1:
        raise ValueError(f"{fname}: bucket_size must be positive, got {bucket_size}")
    n_buckets = -(-iaval.shape[0] // bucket_size)
    out = tnp.full((n_buckets, num_segments) + rest, _identity(op, dt), dtype=dt)
    bucket = tnp.arange(iaval.shape[0]) // bucket_size
    out = getattr(out.at[bucket, segment_ids], op)(data, **kw)
    return reducer(out, axis=0).astype(dt)


_ARGS_DOC = """
    Args:
      data: the values, an array of shape ``(n,) + rest``.
      segment_ids: integer array of shape ``(n,)``: the segment of each row of ``data``.
        Ids may repeat and need not be sorted.
      num_segments: the number of segments (a Python int, required under ``jit``);
        default ``max(segment_ids) + 1`` of concrete ids.
      indices_are_sorted, unique_indices: promises about ``segment_ids`` passed to the
        scatter (results are the same either way).
      bucket_size: reduce groups of ``bucket_size`` consecutive rows separately, then
        across the groups; None (default): one pass.
      mode: out-of-range ids: None/'drop' (default: dropped), 'clip' (clamped), or a
        ``lax.GatherScatterMode``.

    Returns:
      An array of shape ``(num_segments,) + rest`` and ``data``'s dtype; segments without
      rows hold {identity}.

    Raises:
      TypeError: non-integer ``segment_ids``, ``num_segments``/``bucket_size`` not ints.
      ValueError: ``segment_ids`` not 1-D of length ``data.shape[0]``, negative
        ``num_segments``, or ``num_segments=None`` with no ids.
      ConcretizationTypeError: ``num_segments=None`` with traced ids (under ``jit``).
    """


def segment_sum(data, segment_ids, num_segments=None, indices_are_sorted=False,
                unique_indices=False, bucket_size=None, mode=None):
    """Sums of the rows of ``data`` per segment (``jax.ops.segment_sum``)."""
    import tracer.numpy as tnp
    return _segment_update("segment_sum", data, segment_ids, "add", num_segments,
                           indices_are_sorted, unique_indices, bucket_size, tnp.sum, mode)


def segment_prod(data, segment_ids, num_segments=None, indices_are_sorted=False,
                 unique_indices=False, bucket_size=None, mode=None):
    """Products of the rows of ``data`` per segment (``jax.ops.segment_prod``)."""
    import tracer.numpy as tnp
    return _segment_update("segment_prod", data, segment_ids, "multiply", num_segments,
                           indices_are_sorted, unique_indices, bucket_size, tnp.prod, mode)


def segment_max(data, segment_ids, num_segments=None, indices_are_sorted=False,
                unique_indices=False, bucket_size=None, mode=None):
    """Maxima of the rows of ``data`` per segment (``jax.ops.segment_max``); NaNs
    propagate."""
    import tracer.numpy as tnp
    return _segment_update("segment_max", data, segment_ids, "max", num_segments,
                           indices_are_sorted, unique_indices, bucket_size, tnp.max, mode)


def segment_min(data, segment_ids, num_segments=None, indices_are_sorted=False,
                unique_indices=False, bucket_size=None, mode=None):
    """Minima of the rows of ``data`` per segment (``jax.ops.segment_min``); NaNs
    propagate."""
    import tracer.numpy as tnp
    return _segment_update("segment_min", data, segment_ids, "min", num_segments,
                           indices_are_sorted, unique_indices, bucket_size, tnp.min, mode)


for _f, _ident in ((segment_sum, "0"), (segment_prod, "1"),
                   (segment_max, "the dtype's lowest value (-inf, the minimum integer, "
                                 "False)"),
                   (segment_min, "the dtype's highest value (inf, the maximum integer, "
                                 "True)")):
    _f.__doc__ += "\n" + _ARGS_DOC.format(identity=_ident)
del _f, _ident
