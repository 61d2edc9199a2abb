"""tracer.numpy.linalg: NumPy's linear-algebra API on lax.linalg primitives.

Functions batch over leading dimensions like NumPy's. Singular or non-positive-definite
inputs give inf/NaN results (as JAX does) rather than raising LinAlgError. Gradients
follow JAX's rules (e.g. eigh assumes distinct eigenvalues).
"""
from __future__ import annotations

import builtins
import collections
import operator

import numpy as np

import lax
from tracer import dtypes
from tracer.core import concrete_or_error, get_aval
from tracer.numpy import manipulation as _m
from tracer.numpy import reductions as _r
from tracer.numpy import ufuncs as _u
from tracer.numpy.util import as_operand, broadcast_shapes, promote_dtypes_inexact

LinAlgError = np.linalg.LinAlgError

# The named results of NumPy >= 2 and the Array API (fields by name or by position; they
# are tuples, so pytrees, jit and vmap carry them through).
EighResult = collections.namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
EigResult = collections.namedtuple("EigResult", ["eigenvalues", "eigenvectors"])
QRResult = collections.namedtuple("QRResult", ["Q", "R"])
SlogdetResult = collections.namedtuple("SlogdetResult", ["sign", "logabsdet"])
SVDResult = collections.namedtuple("SVDResult", ["U", "S", "Vh"])


def _aval(x):
    return get_aval(x)


def _inexact(*xs):
    return promote_dtypes_inexact(*[as_operand(x) for x in xs])


def _check_square(name, a):
    s = _aval(a).shape
    if len(s) < 2 or s[-1] != s[-2]:
        raise LinAlgError(f"{name}: expected square matrices in the last two dimensions, got "
                          f"shape {s}")


def _check_2d(name, a):
    if _aval(a).ndim < 2:
        raise LinAlgError(f"{name}: expected an array with at least 2 dimensions, got shape "
                          f"{_aval(a).shape}")


def _H(x):
    x = _m.matrix_transpose(x)
    return _u.conjugate(x)


def _mm(a, b):
    return _m.matmul(a, b)


def _eye_like(a):
    s = _aval(a).shape
    r = lax.broadcasted_iota(dtypes.int32, s, len(s) - 2)
    c = lax.broadcasted_iota(dtypes.int32, s, len(s) - 1)
    return lax.convert_element_type(lax.eq(r, c), _aval(a).dtype)


# -------------------------------------- decompositions --------------------------------------

def cholesky(a, *, upper=False, symmetrize_input=True):
    """``numpy.linalg.cholesky``: lower factor L (upper with ``upper``); NaNs if ``a`` is
    not positive definite."""
    (a,) = _inexact(a)
    _check_square("cholesky", a)
    L = lax.linalg.cholesky(a, symmetrize_input=symmetrize_input)
    return _H(L) if upper else L


def qr(a, mode="reduced"):
    """``numpy.linalg.qr`` with mode 'reduced', 'complete' (a ``QRResult(Q, R)``) or 'r'
    (R alone), over the last two axes of ``a`` (..., m, n)."""
    (a,) = _inexact(a)
    _check_2d("qr", a)
    if mode not in ("reduced", "complete", "r", "raw"):
        raise ValueError(f"qr: unsupported mode {mode!r}")
    if mode == "raw":
        raise NotImplementedError("qr: mode='raw' is not supported")
    q, r = lax.linalg.qr(a, full_matrices=mode == "complete")
    return r if mode == "r" else QRResult(q, r)


def eigh(a, UPLO=None, symmetrize_input=True):
    """``numpy.linalg.eigh``: ``EighResult(eigenvalues, eigenvectors)``, eigenvalues
    ascending (real dtype), eigenvectors as columns."""
    (a,) = _inexact(a)
    _check_square("eigh", a)
    lower = UPLO in (None, "L")
    v, w = lax.linalg.eigh(a, lower=lower, symmetrize_input=symmetrize_input)
    return EighResult(w, v)


def eigvalsh(a, UPLO="L"):
    """``numpy.linalg.eigvalsh``: eigenvalues of Hermitian matrices, ascending (real dtype)."""
    return eigh(a, UPLO)[0]


def eig(a):
    """``numpy.linalg.eig`` (host evaluation): ``EigResult(eigenvalues, eigenvectors)``,
    complex, with the right eigenvectors as columns."""
    (a,) = _inexact(a)
    _check_square("eig", a)
    w, v = lax.linalg.eig(a)
    return EigResult(w, v)


def eigvals(a):
    """``numpy.linalg.eigvals``: complex eigenvalues of square matrices (host step)."""
    (a,) = _inexact(a)
    _check_square("eigvals", a)
    return lax.linalg.eig(a, compute_right_eigenvectors=False)[0]


def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    """``numpy.linalg.svd``: ``SVDResult(U, S, Vh)`` with S descending (real dtype), or
    S alone with ``compute_uv=False``."""
    (a,) = _inexact(a)
    _check_2d("svd", a)
    out = lax.linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)
    return SVDResult(*out) if compute_uv else out


def svdvals(x):
    """Singular values, descending, of the last two axes (``numpy.linalg.svdvals``)."""
    return svd(x, compute_uv=False)


# ------------------------------------------ solves ------------------------------------------

def _lu_solve(lu_, perm, b, b_is_vector):
    n = _aval(lu_).shape[-1]
    if b_is_vector:
        b = lax.expand_dims(b, (_aval(b).ndim,))
    # Rows of b permuted like the factorisation, P b with P one-hot (O(n^2 k), below the
    # O(n^3) of the factorisation itself).
    dt = _aval(lu_).dtype
    pshape = _aval(perm).shape + (n,)
    P = lax.convert_element_type(
        lax.eq(lax.broadcast_in_dim(perm, pshape, tuple(range(_aval(perm).ndim))),
               lax.broadcasted_iota(dtypes.int32, pshape, len(pshape) - 1)), dt)
    pb = _mm(P, b)
    bshape = _aval(pb).shape[:-2]
    lu_b = _m.broadcast_to(lu_, bshape + (n, n))
    y = lax.linalg.triangular_solve(lu_b, pb, left_side=True, lower=True, unit_diagonal=True)
    x = lax.linalg.triangular_solve(lu_b, y, left_side=True, lower=False)
    return x[..., 0] if b_is_vector else x


def solve(a, b):
    """``numpy.linalg.solve``: x with a @ x = b (b a vector (..., n) or matrices (..., n,
    k)). Singular ``a`` gives inf/NaN."""
    a, b = _inexact(a, b)
    _check_square("solve", a)
    n = _aval(a).shape[-1]
    bs = _aval(b).shape
    b_is_vector = _aval(b).ndim == 1 or (_aval(b).ndim == _aval(a).ndim - 1 and bs[-1] == n)
    if (b_is_vector and bs[-1] != n) or (not b_is_vector and bs[-2] != n):
        raise ValueError(f"solve: b of shape {bs} does not match a of shape {_aval(a).shape}")
    if n == 0:  # nothing to factor: the (empty) solution has the broadcast shape
        batch = broadcast_shapes(_aval(a).shape[:-2], bs[:-1] if b_is_vector else bs[:-2])
        return lax.full(batch + ((0,) if b_is_vector else (0, bs[-1])), 0, _aval(b).dtype)
    lu_, _, perm = lax.linalg.lu(a)
    return _lu_solve(lu_, perm, b, b_is_vector)


def inv(a):
    """``numpy.linalg.inv`` via LU (inf/NaN for singular matrices)."""
    (a,) = _inexact(a)
    _check_square("inv", a)
    return solve(a, _m.broadcast_to(_eye_like(a), _aval(a).shape))


def det(a):
    """``numpy.linalg.det`` via LU (product of U's diagonal times the permutation sign).

    a: (..., n, n) -> (...). Its derivative is the cofactor matrix, computed from the LU
    factors as jax.numpy.linalg.det does, so it is finite at singular matrices too (the
    gradient of det at [[1, 2], [2, 4]] is [[4, -2], [-2, 1]]), and exactly zero at
    matrices of rank below n - 1. LinAlgError for non-square input."""
    (a,) = _inexact(a)
    _check_square("det", a)
    global _det_with_jvp
    if _det_with_jvp is None:
        from tracer.custom_derivatives import custom_jvp
        _det_with_jvp = custom_jvp(_det_value)
        _det_with_jvp.defjvp(_det_jvp)
    return _det_with_jvp(a)


_det_with_jvp = None


def _det_value(a):
    sign, logdet = slogdet(a)
    return _u.multiply(sign, _u.exp(logdet))


def _det_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    y, z = _cofactor_solve(a, da)
    return y, _r.sum(_m.diagonal(z, axis1=-2, axis2=-1), axis=-1)   # tr(adj(a) da)


def _cofactor_solve(a, b):
    """(det(a), adj(a) @ b) for square a, b (..., n, n), finite for singular a.

    With a[perm] = L U, adj(a) = det(a) U^-1 L^-1 P. The last pivot u_nn (the one that
    vanishes first when a loses rank) is kept out of the division: det(a) scales every
    row of L^-1 P b but the last, and the last row is divided by det(U) / u_nn instead,
    which is nonzero while rank(a) >= n - 1. Below that rank adj(a) is 0."""
    import tracer.numpy as tnp
    n = _aval(a).shape[-1]
    dt = _aval(a).dtype
    if n == 1:
        return a[..., 0, 0], b
    lu_, piv, perm = lax.linalg.lu(a)
    diag = _m.diagonal(lu_, axis1=-2, axis2=-1)
    parity = _r.count_nonzero(_u.not_equal(piv, lax.iota(dtypes.int32, n)), axis=-1)
    sign = lax.convert_element_type(_u.subtract(1, _u.multiply(2, _u.remainder(parity, 2))),
                                    dt)
    partial = _u.multiply(_r.cumprod(diag, axis=-1), _m.expand_dims(sign, -1))
    det_a, det_rest = partial[..., -1], partial[..., -2]
    # U with its last pivot replaced: solving with it divides the last row by det_rest
    last = _u.logical_and(_u.equal(lax.broadcasted_iota(dtypes.int32, (n, n), 0), n - 1),
                          _u.equal(lax.broadcasted_iota(dtypes.int32, (n, n), 1), n - 1))
    u_mod = _m.where(last, _m.expand_dims(_u.reciprocal(det_rest), (-1, -2)), lu_)
    # rank(a) < n - 1: det_rest == 0, and solving with U leaves infs or NaNs
    probe = lax.linalg.triangular_solve(u_mod, tnp.ones_like(lu_[..., :1, :]), left_side=False,
                                        lower=False)
    low_rank = _r.any(_u.logical_not(_u.isfinite(probe)), axis=(-2, -1))
    low_rank = _m.expand_dims(low_rank, (-1, -2))
    zero = tnp.zeros_like(b)
    b = _m.where(low_rank, zero, b)
    x = tnp.take_along_axis(b, _m.expand_dims(perm, -1), axis=-2)
    x = lax.linalg.triangular_solve(lu_, x, left_side=True, lower=True, unit_diagonal=True)
    x = _m.concatenate([_u.multiply(x[..., :-1, :], _m.expand_dims(det_a, (-1, -2))),
                        x[..., -1:, :]], axis=-2)
    x = lax.linalg.triangular_solve(u_mod, x, left_side=True, lower=False)
    return det_a, _m.where(low_rank, zero, x)


def slogdet(a, *, method=None):
    """``numpy.linalg.slogdet``: ``SlogdetResult(sign, logabsdet)``; a singular matrix
    gives (0, -inf)."""
    (a,) = _inexact(a)
    _check_square("slogdet", a)
    n = _aval(a).shape[-1]
    dt = _aval(a).dtype
    if n == 0:
        shape = _aval(a).shape[:-2]
        return SlogdetResult(lax.full(shape, 1, dt), lax.full(shape, 0, dtypes.real_dtype(dt)))
    lu_, piv, _ = lax.linalg.lu(a)
    diag = _r.sum(_u.multiply(lu_, _eye_like(lu_)), axis=-1)
    parity = _r.count_nonzero(_u.not_equal(piv, lax.iota(dtypes.int32, n)), axis=-1)
    absd = _u.absolute(diag)
    logdet = _r.sum(_u.log(absd), axis=-1)
    if dtypes.is_complex(dt):
        phase = _u.divide(diag, lax.convert_element_type(absd, dt))
        sign = _r.prod(phase, axis=-1)
    else:
        sign = _r.prod(_u.sign(diag), axis=-1)
    flip = lax.convert_element_type(_u.remainder(parity, 2), dt)
    sign = _u.multiply(sign, _u.subtract(lax.full((), 1, dt), _u.multiply(flip, 2)))
    sign = _m.where(_u.isinf(logdet), lax.full((), 0, dt), sign) if not dtypes.is_complex(dt) \
        else sign
    return SlogdetResult(sign, logdet)


def lstsq(a, b, rcond=None, *, numpy_resid=False):
    """``numpy.linalg.lstsq`` via the SVD: (x, residuals, rank, singular values).

    As in JAX, residuals are always the squared norms of b - a x per column unless
    ``numpy_resid=True``, which gives NumPy's empty residuals when rank < n or m <= n
    (then the rank must be concrete).
    """
    a, b = _inexact(a, b)
    if _aval(a).ndim != 2:
        raise LinAlgError(f"lstsq: a must be 2-D, got shape {_aval(a).shape}")
    b_vec = _aval(b).ndim == 1
    if b_vec:
        b = lax.expand_dims(b, (1,))
    if _aval(b).shape[0] != _aval(a).shape[0]:
        raise LinAlgError(f"lstsq: incompatible shapes a {_aval(a).shape}, b {_aval(b).shape}")
    m, n = _aval(a).shape
    u, s, vh = lax.linalg.svd(a, full_matrices=False)
    rdt = _aval(s).dtype
    if rcond is None:
        rcond = np.finfo(rdt).eps * builtins.max(m, n)
    cutoff = _u.multiply(_r.max(s, initial=0.0), rcond)
    mask = _u.greater(s, cutoff)
    s_inv = _m.where(mask, _u.divide(1.0, _m.where(mask, s, 1.0)), 0.0)
    uTb = _mm(_H(u), b)
    x = _mm(_H(vh), _u.multiply(lax.convert_element_type(s_inv, _aval(a).dtype)[:, None], uTb))
    rank = _r.sum(mask, dtype=dtypes.int32)
    resid = _r.sum(_u.square(_u.absolute(_u.subtract(b, _mm(a, x)))), axis=0)
    if numpy_resid:
        r = concrete_or_error(lambda v: int(np.asarray(v)), rank,
                              "in lstsq(numpy_resid=True) (the rank decides the shape)")
        if r < n or m <= n:
            resid = lax.full((0,), 0, rdt)
    if b_vec:
        x = x[:, 0]
    return x, resid, rank, s


def pinv(a, rtol=None, hermitian=False, *, rcond=None):
    """``numpy.linalg.pinv`` via the SVD, cutting singular values below rtol * max(s)."""
    (a,) = _inexact(a)
    _check_2d("pinv", a)
    if rcond is not None:
        rtol = rcond
    m, n = _aval(a).shape[-2:]
    u, s, vh = lax.linalg.svd(a, full_matrices=False)
    rdt = _aval(s).dtype
    if rtol is None:
        rtol = np.finfo(rdt).eps * builtins.max(m, n)
    cutoff = _u.multiply(_r.max(s, axis=-1, keepdims=True, initial=0.0), rtol)
    mask = _u.greater(s, cutoff)
    s_inv = _m.where(mask, _u.divide(1.0, _m.where(mask, s, 1.0)), 0.0)
    s_inv = lax.convert_element_type(s_inv, _aval(a).dtype)
    return _mm(_u.multiply(_H(vh), s_inv[..., None, :]), _H(u))


def matrix_power(a, n):
    """``numpy.linalg.matrix_power`` for a static int ``n`` (negative: of the inverse)."""
    a = as_operand(a)
    _check_square("matrix_power", a)
    n = operator.index(n)
    if n == 0:
        return _m.broadcast_to(_eye_like(a), _aval(a).shape)
    if n < 0:
        a = inv(a)
        n = -n
    result = None
    base = a
    while n:
        if n & 1:
            result = base if result is None else _mm(result, base)
        n >>= 1
        if n:
            base = _mm(base, base)
    return result


def matrix_rank(M, rtol=None, *, tol=None):
    """``numpy.linalg.matrix_rank``: singular values above the tolerance."""
    (M,) = _inexact(M)
    if _aval(M).ndim < 2:
        return lax.convert_element_type(_r.any(_u.not_equal(M, 0)), dtypes.default_int_dtype())
    s = svd(M, compute_uv=False)
    m, n = _aval(M).shape[-2:]
    if tol is None:
        if rtol is None:
            rtol = np.finfo(_aval(s).dtype).eps * builtins.max(m, n)
        tol = _u.multiply(_r.max(s, axis=-1, keepdims=True, initial=0.0), rtol)
    return _r.sum(_u.greater(s, tol), axis=-1)


# ------------------------------------------- norms -------------------------------------------

def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """``numpy.linalg.vector_norm`` (ord: any real, inf, -inf, 0)."""
    (x,) = _inexact(x)
    ax = _aval(x)
    if axis is None:
        x = _m.ravel(x)
        axis = 0
        if keepdims:
            raise NotImplementedError("vector_norm: keepdims with axis=None")
    a = _u.absolute(x)
    if ord == 2:
        return _u.sqrt(_r.sum(_u.real(_u.multiply(_u.conjugate(x), x)) if
                               dtypes.is_complex(ax.dtype) else _u.square(x),
                               axis=axis, keepdims=keepdims))
    if ord == np.inf:
        return _r.max(a, axis=axis, keepdims=keepdims, initial=0.0)
    if ord == -np.inf:
        return _r.min(a, axis=axis, keepdims=keepdims)
    if ord == 0:
        return _r.sum(_u.not_equal(a, 0), axis=axis, keepdims=keepdims,
                      dtype=_aval(a).dtype)
    if ord == 1:
        return _r.sum(a, axis=axis, keepdims=keepdims)
    p = float(ord)
    return _u.power(_r.sum(_u.power(a, p), axis=axis, keepdims=keepdims), 1.0 / p)


def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    """``numpy.linalg.matrix_norm`` over the last two axes ('fro', 'nuc', ±1, ±2, ±inf)."""
    return norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


def norm(x, ord=None, axis=None, keepdims=False):
    """``numpy.linalg.norm``: vector norms for one axis, matrix norms for two."""
    (x,) = _inexact(x)
    nd = _aval(x).ndim
    if axis is None:
        if ord is None:
            r = vector_norm(x, axis=None, ord=2)
            return lax.reshape(r, (1,) * nd) if keepdims else r
        axis = tuple(range(nd))
    if isinstance(axis, (int, np.integer)):
        axis = (int(axis),)
    axis = tuple(a % nd for a in axis)
    if len(axis) == 1:
        return vector_norm(x, axis=axis[0], keepdims=keepdims, ord=2 if ord is None else ord)
    if len(axis) != 2:
        raise ValueError(f"norm: improper number of dimensions to norm: axis={axis}")
    r0, c0 = axis
    if ord in (None, "fro", "f"):
        return _u.sqrt(_r.sum(_u.square(_u.absolute(x)), axis=axis, keepdims=keepdims))
    a = _u.absolute(x)
    if ord in (1, -1):
        s = _r.sum(a, axis=r0, keepdims=True)
        f = _r.max if ord == 1 else _r.min
        out = f(s, axis=c0, keepdims=True)
    elif ord in (np.inf, -np.inf):
        s = _r.sum(a, axis=c0, keepdims=True)
        f = _r.max if ord == np.inf else _r.min
        out = f(s, axis=r0, keepdims=True)
    elif ord in (2, -2, "nuc"):
        y = _m.moveaxis(x, (r0, c0), (-2, -1))
        s = svd(y, compute_uv=False)
        if ord == "nuc":
            out = _r.sum(s, axis=-1)
        else:
            out = (_r.max if ord == 2 else _r.min)(s, axis=-1)
        if keepdims:
            for ax in sorted(axis):
                out = lax.expand_dims(out, (ax,))
        return out
    else:
        raise ValueError(f"norm: invalid norm order {ord!r} for matrices")
    if not keepdims:
        out = lax.squeeze(out, tuple(sorted(axis)))
    return out


def cond(x, p=None):
    """``numpy.linalg.cond``: ratio of extreme singular values (p None/2/-2) or
    norm(x, p) * norm(inv(x), p)."""
    (x,) = _inexact(x)
    if p in (None, 2, -2):
        s = svd(x, compute_uv=False)
        hi, lo = _r.max(s, axis=-1), _r.min(s, axis=-1)
        return _u.divide(hi, lo) if p != -2 else _u.divide(lo, hi)
    return _u.multiply(norm(x, p, axis=(-2, -1)), norm(inv(x), p, axis=(-2, -1)))


# ---------------------------------------- the rest ---------------------------------------------

def cross(x1, x2, /, *, axis=-1):
    """``numpy.linalg.cross`` of 3-vectors along ``axis``."""
    from tracer.numpy.util import promote_args
    a, b = promote_args("cross", x1, x2)
    if _aval(a).shape[axis] != 3 or _aval(b).shape[axis] != 3:
        raise ValueError(f"cross: both inputs must have size 3 along axis {axis}, got "
                         f"{_aval(a).shape} and {_aval(b).shape}")
    a = _m.moveaxis(a, axis, -1)
    b = _m.moveaxis(b, axis, -1)
    c = [_u.subtract(_u.multiply(a[..., (i + 1) % 3], b[..., (i + 2) % 3]),
                     _u.multiply(a[..., (i + 2) % 3], b[..., (i + 1) % 3])) for i in range(3)]
    return _m.moveaxis(_m.stack(c, axis=-1), -1, axis)


def diagonal(x, /, *, offset=0):
    """The diagonal of the last two axes (``numpy.linalg.diagonal``)."""
    from tracer.numpy import diagonal as _diagonal
    return _diagonal(x, offset=offset, axis1=-2, axis2=-1)


def trace(x, /, *, offset=0, dtype=None):
    """Sum of the ``offset`` diagonal of the last two axes (``numpy.linalg.trace``)."""
    return _r.sum(diagonal(x, offset=offset), axis=-1, dtype=dtype)


def outer(x1, x2, /):
    """Outer product of two flattened vectors (``numpy.linalg.outer``)."""
    return _m.outer(x1, x2)


def matmul(x1, x2, /):
    """``numpy.linalg.matmul``: same as ``tracer.numpy.matmul``."""
    return _m.matmul(x1, x2)


def matrix_transpose(x, /):
    """Swap the last two axes (``numpy.linalg.matrix_transpose``)."""
    return _m.matrix_transpose(x)


def tensordot(x1, x2, /, *, axes=2):
    """``numpy.linalg.tensordot``: same as ``tracer.numpy.tensordot``."""
    return _m.tensordot(x1, x2, axes)


def vecdot(x1, x2, /, *, axis=-1):
    """Conjugated dot product along ``axis`` (``numpy.linalg.vecdot``)."""
    return _m.vecdot(x1, x2, axis=axis)


def multi_dot(arrays, *, precision=None):
    """``numpy.linalg.multi_dot`` in the order opt_einsum finds cheapest."""
    arrays = [as_operand(a) for a in arrays]
    if len(arrays) < 2:
        raise ValueError("multi_dot: need at least two arrays")
    first_vec = _aval(arrays[0]).ndim == 1
    last_vec = _aval(arrays[-1]).ndim == 1
    if first_vec:
        arrays[0] = lax.expand_dims(arrays[0], (0,))
    if last_vec:
        arrays[-1] = lax.expand_dims(arrays[-1], (1,))
    shapes = [tuple(_aval(a).shape) for a in arrays]
    given = list(shapes)     # as the caller passed them (vectors without the added axis)
    given[0] = given[0][1:] if first_vec else given[0]
    given[-1] = given[-1][:-1] if last_vec else given[-1]
    if any(len(sh) != 2 for sh in shapes):
        raise ValueError(f"multi_dot: the first and last arrays must be 1-D or 2-D and the "
                         f"others 2-D; got array shapes {given}")
    if any(a[1] != b[0] for a, b in zip(shapes, shapes[1:])):
        raise ValueError(f"multi_dot: the last dimension of each array must match the first "
                         f"dimension of the next; got array shapes {given}")
    if any(0 in sh for sh in shapes):
        # (every product of a chain with an empty dimension costs nothing, and opt_einsum
        # then pairs operands that are not neighbours: left to right instead)
        out = arrays[0]
        for a in arrays[1:]:
            out = _mm(out, a)
        return _unexpand(out, first_vec, last_vec)
    import opt_einsum
    sym = opt_einsum.get_symbol      # (any number of arrays: 26 letters would not do)
    subs = [sym(i) + sym(i + 1) for i in range(len(arrays))]
    spec = ",".join(subs) + "->" + sym(0) + sym(len(arrays))
    _, path_info = opt_einsum.contract_path(spec, *shapes, shapes=True)
    # opt_einsum appends each product to the end of its operand list, so list order is
    # not chain order: each operand carries the first link of the chain it covers, and
    # the one that starts earlier is the left factor.
    ops = [(i, a) for i, a in enumerate(arrays)]
    for contraction in path_info.contraction_list:
        inds = sorted(contraction[0], reverse=True)
        (lo, left), (_, right) = sorted((ops.pop(i) for i in inds), key=lambda o: o[0])
        ops.append((lo, _mm(left, right)))
    return _unexpand(ops[0][1], first_vec, last_vec)


def _unexpand(out, first_vec, last_vec):
    if first_vec:
        out = out[0]
    if last_vec:
        out = out[..., 0]
    return out


def tensorinv(a, ind=2):
    """``numpy.linalg.tensorinv``: inverse of ``a`` as a matrix split after ``ind`` axes."""
    a = as_operand(a)
    s = _aval(a).shape
    out_shape = s[ind:] + s[:ind]
    n = int(np.prod(s[:ind]))
    return _m.reshape(inv(_m.reshape(a, (n, -1))), out_shape)


def tensorsolve(a, b, axes=None):
    """``numpy.linalg.tensorsolve``: x with tensordot(a, x, x.ndim) = b."""
    a, b = _inexact(a, b)
    if axes is not None:
        nd = _aval(a).ndim
        allaxes = [i for i in range(nd) if i not in [x % nd for x in axes]]
        a = _m.transpose(a, allaxes + [x % nd for x in axes])
    bshape = _aval(b).shape
    out_shape = _aval(a).shape[len(bshape):]
    n = int(np.prod(bshape))
    x = solve(_m.reshape(a, (n, -1)), _m.ravel(b))
    return _m.reshape(x, out_shape)
