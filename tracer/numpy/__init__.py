"""tracer.numpy: NumPy's API on tracer Arrays, traceable by grad, vmap and jit.

Every function is a composition of lax primitives. Promotion follows JAX's lattice with
weak Python scalars (``tracer.numpy.promote_types`` / ``result_type``); 64-bit defaults
unless ``config.update("enable_x64", False)``.
"""
import numpy as _np

from tracer import dtypes as _dtypes
from tracer.core import Array as ndarray  # noqa: F401  (isinstance checks, as in JAX)
from tracer.dtypes import float0
from tracer.numpy.scalar_types import (bool_, complex64, complex128, float16, float32,
                                       float64, int8, int16, int32, int64, uint8, uint16,
                                       uint32, uint64, int_, uint, float_, complex_, single,
                                       double, csingle, cdouble)
from tracer.dtypes import promote_types, result_type, canonicalize_dtype as _canon
from tracer.numpy.util import broadcast_shapes
from tracer.numpy.creation import (arange, array, asarray, empty, empty_like, eye, full,
                                   full_like, identity, linspace, ones, ones_like, zeros,
                                   zeros_like)
from tracer.numpy.ufuncs import (abs, absolute, add, arctan2, atan2, bitwise_and,
                                 bitwise_invert, bitwise_left_shift, bitwise_not, bitwise_or,
                                 bitwise_right_shift, bitwise_xor, cbrt, ceil, conj,
                                 conjugate, cos, divide, divmod, equal, exp, exp2, expm1, fabs,
                                 fix, float_power, floor, floor_divide, fmod, greater,
                                 greater_equal, imag, invert, isfinite, isinf, isnan,
                                 isneginf, isposinf, left_shift, less, less_equal, log, log10,
                                 log1p, log2, logical_and, logical_not, logical_or,
                                 logical_xor, maximum, minimum, mod, multiply, negative,
                                 not_equal, positive, pow, power, real, reciprocal, remainder,
                                 right_shift, rint, round, around, sign, sin, sqrt, square,
                                 subtract, tan, tanh, true_divide, trunc)
from tracer.numpy.reductions import (all, amax, amin, any, argmax, argmin, count_nonzero, max,
                                     mean, min, prod, ptp, std, sum, var)
from tracer.numpy.manipulation import (atleast_1d, atleast_2d, atleast_3d, broadcast_arrays,
                                       broadcast_to, clip, column_stack, concat, concatenate,
                                       dot, dstack, expand_dims, flip, fliplr, flipud, hstack,
                                       inner, matmul, matrix_transpose, moveaxis, outer,
                                       permute_dims, ravel, repeat, reshape, squeeze, stack,
                                       swapaxes, tensordot, tile, transpose, vdot, vecdot,
                                       vstack, where)
from tracer.numpy.vectorize import vectorize
from tracer.numpy.ufuncs import (acos, acosh, angle, arccos, arccosh, arcsin, arcsinh,
                                 arctan, arctanh, asin, asinh, atan, atanh, bitwise_count,
                                 copysign, cosh, deg2rad, degrees, fmax, fmin, frexp, gcd,
                                 heaviside, hypot, i0, iscomplex, isclose, isreal, isrealobj,
                                 lcm, ldexp, logaddexp, logaddexp2, modf, nan_to_num,
                                 nextafter, rad2deg, radians, signbit, sinc, sinh, spacing)
from tracer.numpy.reductions import (allclose, array_equal, array_equiv, average, corrcoef,
                                     cov, cumprod, cumsum, cumulative_prod, cumulative_sum,
                                     nanargmax, nanargmin, nancumprod, nancumsum, nanmax,
                                     nanmean, nanmin, nanprod, nanstd, nansum, nanvar)
from tracer.numpy.manipulation import (append, apply_along_axis, apply_over_axes,
                                       array_split, astype, block, copy, cross, delete, diag,
                                       diagflat, diagonal, diff, dsplit, ediff1d, fill_diagonal, hsplit,
                                       insert, kron, matvec, pad, piecewise, resize, roll,
                                       rollaxis, rot90, split, trace, tril, triu, trim_zeros,
                                       unstack, vecmat, vsplit)
from tracer.numpy.creation import (bartlett, blackman, diag_indices, diag_indices_from,
                                   from_dlpack, frombuffer, fromfile, fromfunction, fromiter,
                                   fromstring, geomspace, hamming, hanning, indices, ix_,
                                   kaiser, load, logspace, mask_indices, meshgrid, save,
                                   savez, tri, tril_indices, tril_indices_from, triu_indices,
                                   triu_indices_from, vander)
from tracer.numpy.sorting import (argpartition, argsort, bincount, digitize, histogram,
                                  histogram2d, histogram_bin_edges, histogramdd, intersect1d,
                                  isin, lexsort, median, nanmedian, nanpercentile,
                                  nanquantile, partition, percentile, quantile, searchsorted,
                                  setdiff1d, setxor1d, sort, sort_complex, union1d, unique,
                                  unique_all, unique_counts, unique_inverse, unique_values)
from tracer.numpy.einsum import einsum, einsum_path
from tracer.numpy.polynomial import (convolve, correlate, poly, polyadd, polyder, polydiv,
                                     polyfit, polyint, polymul, polysub, polyval, roots)
from tracer.numpy.misc import (array_repr, array_str, finfo, frompyfunc, get_printoptions,
                               gradient, interp, isdtype, iterable, packbits, printoptions,
                               ravel_multi_index, set_printoptions, trapezoid, ufunc,
                               unpackbits, unravel_index, unwrap)
from tracer.numpy.indexing_funcs import (argwhere, choose, compress, extract, flatnonzero,
                                         nonzero, place, put, put_along_axis, select, take,
                                         take_along_axis)
from tracer.numpy import array_methods as _array_methods  # noqa: F401  (installs methods)

pi = _np.pi
e = _np.e
inf = _np.inf
nan = _np.nan
newaxis = None
euler_gamma = _np.euler_gamma

iinfo = _dtypes.iinfo      # ml_dtypes' (NumPy's for NumPy's types), as jax.numpy's
issubdtype = _dtypes.issubdtype
integer = _np.integer
signedinteger = _np.signedinteger
unsignedinteger = _np.unsignedinteger
floating = _np.floating
complexfloating = _np.complexfloating
inexact = _np.inexact
number = _np.number
generic = _np.generic
bool = bool_


def dtype(x):
    """The dtype of ``x`` (a value, a dtype or a type), canonicalized."""
    return _dtypes.dtype(x)


def shape(a):
    """The shape of ``a`` (``numpy.shape``)."""
    return _np.shape(a) if not hasattr(a, "aval") else a.aval.shape


def ndim(a):
    """The number of dimensions of ``a`` (``numpy.ndim``)."""
    return len(shape(a))


def size(a, axis=None):
    """The number of elements of ``a``, or along ``axis`` (``numpy.size``)."""
    s = shape(a)
    return int(_np.prod(s)) if axis is None else s[axis]


def isscalar(element):
    """True for scalars and 0-d arrays (``numpy.isscalar``, extended to Arrays)."""
    if hasattr(element, "aval"):
        return element.aval.ndim == 0
    return _np.isscalar(element)


def iscomplexobj(x):
    """True if ``x`` has a complex dtype (``numpy.iscomplexobj``)."""
    return _dtypes.is_complex(dtype(x))


def can_cast(from_, to, casting="safe"):
    """Whether ``from_`` casts to ``to`` under ``casting`` (``numpy.can_cast``)."""
    from_, to = (_dtypes.as_np_dtype(t) if type(t) is str else t for t in (from_, to))
    return _np.can_cast(from_, to, casting)


# The Array API: ``x.__array_namespace__()`` is this module.
__array_api_version__ = "2024.12"


def __array_namespace_info__():
    """The Array API inspection object (devices, default dtypes, supported dtypes)."""
    from tracer.numpy.misc import ArrayNamespaceInfo
    return ArrayNamespaceInfo()
from tracer.numpy import fft, linalg  # noqa: E402


def __getattr__(name):
    # bfloat16, float8_*, float4_e2m1fn, int4, uint4, int2, uint2: made on first use, when
    # ml_dtypes is imported (``tracer.dtypes``)
    if name in _dtypes.LOWP_NAMES:
        from tracer.numpy import scalar_types
        t = globals()[name] = getattr(scalar_types, name)
        return t
    raise AttributeError(f"module 'tracer.numpy' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_dtypes.LOWP_NAMES))
