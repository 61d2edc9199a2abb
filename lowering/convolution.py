"""Lowering of ``conv_general_dilated`` (lax/convolution.py): one library call of kind
``"conv_general_dilated"`` (the primitive's params plus ``out_shape``), which the backend
runs with compiled kernels and BLAS as described here.

Every layout, padding (negative too), dilation and group count is one canonical problem:
the input is read through element strides (batch, spatial..., feature), the weights are
brought to (taps, I, O) by a transpose of the small kernel array, and the output is
produced channel-last and transposed to ``out_spec`` at the end (free for NHWC-style
outputs). Batch groups are feature groups whose group offset steps through the batch.

Three strategies, chosen by dtype and a rough count of memory traffic (``_strategy``):

- im2col + BLAS (floats and complex, the usual case): patch rows ``(taps x I)`` are built
  by a Numba kernel in chunks that stay in cache (copying contiguous channel runs; the
  input is first copied channel-last if its features are not contiguous) and each chunk
  is multiplied with the weights by ``np.matmul`` (OpenBLAS), one product per group;
- gather (floats, when outputs have fewer features than inputs or most taps fall
  between dilated inputs, as in the data gradient of a strided convolution):
  ``Z = X @ W`` multiplies every input row by every tap's weights on BLAS, then a Numba
  kernel sums, per output row, the Z entries of its valid taps -- no work for the
  zeros that lhs dilation inserts;
- a direct loop nest (integer operands, accumulated in 64 bits like the eager impl; and
  groups with a single output feature, e.g. depthwise, where a product per group would
  be a matrix-vector product; depthwise runs the groups innermost).

The compute dtype is the eager impl's: float16 computes in float32, integers in int64
(uint64), and ``preferred_element_type`` promotes; the result is cast once. Float results
differ from the eager impl (NumPy tensordot) by summation order only; integer results are
exact (wrapping, as in the eager impl).
"""
from __future__ import annotations

import numpy as np

from lax import convolution as cv
from tracer import dtypes
from lowering.rules import limit, lowering_rules

MAX_SPATIAL = 3          # the backend's kernels take up to 3 spatial dims


def compute_dtype(in_dt, out_dt):
    """The eager impl's compute dtype (lax/convolution.py: _conv_impl)."""
    ct = np.promote_types(in_dt, out_dt) if out_dt != in_dt else np.dtype(in_dt)
    if dtypes.is_integer(ct) or ct == np.bool_:
        ct = np.dtype(np.uint64) if dtypes.is_unsigned_integer(ct) else np.dtype(np.int64)
    if ct == np.float16:
        ct = np.dtype(np.float32)
    return np.dtype(ct)


def _conv_lower(ctx, in_avals, out_avals, lhs, rhs, **params):
    ct = compute_dtype(in_avals[0].dtype, out_avals[0].dtype)
    how = "direct loops" if ct.kind in "iub" else "im2col/gather + BLAS or direct loops"
    name = f"conv_general_dilated (Numba {how})"
    return ctx.library_call(name, "conv_general_dilated", [lhs, rhs], out_avals,
                            out_shape=tuple(out_avals[0].shape), **params)


lowering_rules[cv.conv_general_dilated_p] = _conv_lower
limit("structured", cv.conv_general_dilated_p, lambda in_avals, out_avals, **params: (
    "conv_general_dilated: more than 3 spatial dims"
    if in_avals[0].ndim - 2 > MAX_SPATIAL else None))
