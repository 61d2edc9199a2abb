"""tracer.numpy: NumPy's API on tracer Arrays, traceable by grad, vmap and jit.

Every function is a composition of lax primitives. Promotion follows JAX's lattice with
weak Python scalars (``tracer.numpy.promote_types`` / ``result_type``); 64-bit defaults
unless ``config.update("enable_x64", False)``.
"""
import numpy as _np

from tracer import dtypes as _dtypes
from tracer.core import Array as ndarray  # noqa: F401  (isinstance checks, as in JAX)
from tracer.dtypes import (bool_, complex64, complex128, float16, float32, float64, int8,
                           int16, int32, int64, uint8, uint16, uint32, uint64, float0)
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

iinfo = _np.iinfo
finfo = _np.finfo
issubdtype = _np.issubdtype
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
    return _np.shape(a) if not hasattr(a, "aval") else a.aval.shape


def ndim(a):
    return len(shape(a))


def size(a, axis=None):
    s = shape(a)
    return int(_np.prod(s)) if axis is None else s[axis]


def isscalar(element):
    if hasattr(element, "aval"):
        return element.aval.ndim == 0
    return _np.isscalar(element)


def iscomplexobj(x):
    return _dtypes.is_complex(dtype(x))


def can_cast(from_, to, casting="safe"):
    return _np.can_cast(from_, to, casting)
