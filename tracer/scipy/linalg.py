"""tracer.scipy.linalg: SciPy's linear-algebra API (``jax.scipy.linalg``) on lax.linalg.

Singular inputs give inf/NaN results instead of raising (as JAX). ``check_finite`` and
``overwrite_*`` arguments are accepted and ignored (Arrays are immutable).
"""
from __future__ import annotations

import numpy as np

import lax
from tracer import dtypes
from tracer.core import concrete_value, get_aval
from tracer.numpy import linalg as _la
from tracer.numpy import manipulation as _m
from tracer.numpy import reductions as _r
from tracer.numpy import ufuncs as _u
from tracer.numpy.util import as_operand, promote_dtypes_inexact


def _aval(x):
    return get_aval(x)


def _inexact(*xs):
    return promote_dtypes_inexact(*[as_operand(x) for x in xs])


def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    """``scipy.linalg.cholesky``: the upper factor U (a = U^H U) by default, the lower L
    (a = L L^H) with ``lower=True``. As SciPy (LAPACK's potrf) and JAX, only the triangle
    named by ``lower`` is read, and a derivative reaches that triangle only;
    ``numpy.linalg.cholesky`` symmetrizes instead (as ``jax.numpy``). NaNs where ``a``
    is not positive definite."""
    (a,) = _inexact(a)
    _la._check_square("cholesky", a)
    return _la.cholesky(a if lower else _la._H(a), upper=not lower, symmetrize_input=False)


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """``scipy.linalg.cho_factor``: (factor, lower) for ``cho_solve``."""
    return cholesky(a, lower=lower), lower


def _rhs_is_vector(name, a, b, what):
    """Whether ``b`` is a vector (shape (..., n)) rather than a matrix ((..., n, k)) for
    the (..., n, n) matrix ``a`` (named ``what`` in errors): a vector when it has one
    dimension fewer than ``a``, as JAX tells them apart. Raises LinAlgError for a
    non-square ``a`` and ValueError (SciPy's error; the products and solves inside would
    name themselves instead) for a ``b`` of neither shape: of another length along the
    solved dimension, or with other batch dimensions than ``a``'s. SciPy >= 1.15 takes a
    ``b`` of more than one dimension as a matrix and broadcasts batch dimensions; here
    they are ``a``'s (broadcast first, or vmap)."""
    _la._check_square(name, a)
    sa, sb = _aval(a).shape, _aval(b).shape
    vec = len(sb) == len(sa) - 1
    n, batch = sa[-1], sa[:-2]
    if sb != batch + (n,) and (len(sb) != len(sa) or sb[:-1] != batch + (n,)):
        vector = str(batch + (n,))
        matrix = str(batch + (n,))[:-1].rstrip(",") + ", k)"
        raise ValueError(f"{name}: shapes of {what} {sa} and b {sb} are incompatible; b "
                         f"must have shape {vector} or {matrix} ({what}'s batch "
                         f"dimensions, if any, then n or n and k; broadcast both to the "
                         f"same batch dimensions first, or vmap over them)")
    return vec


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """Solve a x = b given ``cho_factor(a)``: ``b`` of shape (n,) or (n, k). Raises
    ValueError for a ``b`` of another length, LinAlgError for a non-square factor."""
    c, lower = c_and_lower
    c, b = _inexact(c, b)
    vec = _rhs_is_vector("cho_solve", c, b, "c")
    if vec:
        b = lax.expand_dims(b, (_aval(b).ndim,))
    if lower:
        y = lax.linalg.triangular_solve(c, b, left_side=True, lower=True)
        x = lax.linalg.triangular_solve(c, y, left_side=True, lower=True, transpose_a=True,
                                        conjugate_a=True)
    else:
        y = lax.linalg.triangular_solve(c, b, left_side=True, lower=False, transpose_a=True,
                                        conjugate_a=True)
        x = lax.linalg.triangular_solve(c, y, left_side=True, lower=False)
    return x[..., 0] if vec else x


def _trans(name, trans):
    """0, 1 or 2 for ``trans`` given as 0/'N', 1/'T', 2/'C'; ValueError otherwise."""
    t = {"N": 0, "T": 1, "C": 2}.get(trans, trans) if isinstance(trans, str) else trans
    if isinstance(t, (bool, np.bool_)) or t not in (0, 1, 2) or \
            not isinstance(t, (int, np.integer)):
        raise ValueError(f"{name}: trans must be 0/'N', 1/'T' or 2/'C'; got {trans!r}")
    return int(t)


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     debug=None, check_finite=True):
    """``scipy.linalg.solve_triangular``: trans 0/'N', 1/'T', 2/'C'; ``b`` of shape (n,)
    or (n, k). Raises ValueError for another ``trans`` or length of ``b``."""
    a, b = _inexact(a, b)
    trans = _trans("solve_triangular", trans)
    vec = _rhs_is_vector("solve_triangular", a, b, "a")
    if vec:
        b = lax.expand_dims(b, (_aval(b).ndim,))
    x = lax.linalg.triangular_solve(a, b, left_side=True, lower=lower,
                                    transpose_a=trans in (1, 2), conjugate_a=trans == 2,
                                    unit_diagonal=unit_diagonal)
    return x[..., 0] if vec else x


def lu_factor(a, overwrite_a=False, check_finite=True):
    """``scipy.linalg.lu_factor``: (lu, piv) with LAPACK's 0-based pivots."""
    (a,) = _inexact(a)
    lu_, piv, _ = lax.linalg.lu(a)
    return lu_, piv


def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    """Solve a x = b (trans=0 or 'N'), a^T x = b (1, 'T') or a^H x = b (2, 'C') from
    ``lu_factor``; ``b`` of shape (n,) or (n, k). Raises ValueError for any other
    ``trans`` or length of ``b``."""
    trans = _trans("lu_solve", trans)
    lu_, piv = lu_and_piv
    lu_, b = _inexact(lu_, b)
    vec = _rhs_is_vector("lu_solve", lu_, b, "lu")
    n = _aval(lu_).shape[-1]
    perm = _perm_from_pivots(piv, n)
    if vec:
        b = lax.expand_dims(b, (_aval(b).ndim,))
    dt = _aval(lu_).dtype
    pshape = _aval(perm).shape + (n,)
    P = lax.convert_element_type(
        lax.eq(lax.broadcast_in_dim(perm, pshape, tuple(range(_aval(perm).ndim))),
               lax.broadcasted_iota(dtypes.int32, pshape, len(pshape) - 1)), dt)
    if trans == 0:
        y = lax.linalg.triangular_solve(lu_, _m.matmul(P, b), left_side=True, lower=True,
                                        unit_diagonal=True)
        x = lax.linalg.triangular_solve(lu_, y, left_side=True, lower=False)
    else:
        conj = trans == 2
        y = lax.linalg.triangular_solve(lu_, b, left_side=True, lower=False, transpose_a=True,
                                        conjugate_a=conj)
        z = lax.linalg.triangular_solve(lu_, y, left_side=True, lower=True, transpose_a=True,
                                        conjugate_a=conj, unit_diagonal=True)
        x = _m.matmul(_m.matrix_transpose(P), z)
    return x[..., 0] if vec else x


def _perm_from_pivots(piv, n):
    """The row permutation (int32, shape ``piv.shape[:-1] + (n,)``) that LAPACK's pivots
    (row i swapped with row piv[i], in order) make."""
    pv = concrete_value(piv)
    if pv is None:
        return _traced_perm_from_pivots(as_operand(piv), n)
    batch = pv.shape[:-1]
    flat = pv.reshape(-1, pv.shape[-1])
    perms = np.tile(np.arange(n, dtype=np.int32), (flat.shape[0], 1))
    for r in range(flat.shape[0]):
        for i, p in enumerate(flat[r]):
            perms[r, i], perms[r, p] = perms[r, p], perms[r, i]
    from tracer.core import Array
    return Array(perms.reshape(batch + (n,)))


def _traced_perm_from_pivots(piv, n):
    # The swaps in a fori_loop over pivots known only when the program runs (under jit,
    # or vmap of a lu_factor result): each swap selects by comparing with an iota.
    pa = _aval(piv)
    shape = pa.shape[:-1] + (n,)
    iota = lax.broadcasted_iota(dtypes.int32, shape, len(shape) - 1)
    piv = lax.convert_element_type(piv, dtypes.int32)
    nd = len(shape)

    def swap(i, perm):
        p = lax.expand_dims(lax.dynamic_index_in_dim(piv, i, nd - 1, keepdims=False), (nd - 1,))
        at_i = lax.eq(iota, lax.full_like(iota, i))
        at_p = lax.eq(iota, lax.broadcast_in_dim(p, shape, tuple(range(nd))))
        zero = lax.full_like(perm, 0)
        pi = lax.reduce_sum(lax.select(at_i, perm, zero), (nd - 1,))
        pp = lax.reduce_sum(lax.select(at_p, perm, zero), (nd - 1,))
        bcast = lambda v: lax.broadcast_in_dim(v, shape, tuple(range(nd - 1)))  # noqa: E731
        return lax.select(at_i, bcast(pp), lax.select(at_p, bcast(pi), perm))

    return lax.fori_loop(0, pa.shape[-1], swap, iota)


def lu(a, permute_l=False, overwrite_a=False, check_finite=True):
    """``scipy.linalg.lu``: (p, l, u) with a = p @ l @ u (or (p @ l, u) with permute_l)."""
    (a,) = _inexact(a)
    lu_, _, perm = lax.linalg.lu(a)
    m, n = _aval(a).shape[-2:]
    k = min(m, n)
    dt = _aval(a).dtype
    l = _m.where(lax.lt(lax.broadcasted_iota(dtypes.int32, (m, k), 1),
                        lax.broadcasted_iota(dtypes.int32, (m, k), 0)),
                 lu_[..., :, :k], 0.0)
    l = _u.add(l, lax.convert_element_type(
        lax.eq(lax.broadcasted_iota(dtypes.int32, (m, k), 0),
               lax.broadcasted_iota(dtypes.int32, (m, k), 1)), dt))
    u = _m.where(lax.le(lax.broadcasted_iota(dtypes.int32, (k, n), 0),
                        lax.broadcasted_iota(dtypes.int32, (k, n), 1)), lu_[..., :k, :], 0.0)
    pshape = _aval(perm).shape + (m,)
    # p[perm[i], i] = 1 so that a = p l u.
    P = lax.convert_element_type(
        lax.eq(lax.broadcast_in_dim(perm, pshape, tuple(range(_aval(perm).ndim))),
               lax.broadcasted_iota(dtypes.int32, pshape, len(pshape) - 1)), dt)
    p = _m.matrix_transpose(P)
    if permute_l:
        return _m.matmul(p, l), u
    return p, l, u


def qr(a, overwrite_a=False, lwork=None, mode="full", pivoting=False, check_finite=True):
    """``scipy.linalg.qr`` with mode 'full', 'economic' or 'r'."""
    if pivoting:
        raise NotImplementedError("qr: pivoting=True is not supported")
    if mode not in ("full", "economic", "r"):
        raise ValueError(f"qr: unsupported mode {mode!r}")
    (a,) = _inexact(a)
    q, r = lax.linalg.qr(a, full_matrices=mode != "economic")
    return (r,) if mode == "r" else (q, r)


def eigh(a, b=None, lower=True, eigvals_only=False, overwrite_a=False, overwrite_b=False,
         type=1, check_finite=True, subset_by_index=None, subset_by_value=None, driver=None):
    """``scipy.linalg.eigh`` for the standard problem (b=None)."""
    if b is not None:
        raise NotImplementedError("eigh: the generalized problem (b=...) is not supported")
    w, v = _la.eigh(a, UPLO="L" if lower else "U")
    return w if eigvals_only else (w, v)


def svd(a, full_matrices=True, compute_uv=True, overwrite_a=False, check_finite=True,
        lapack_driver="gesdd"):
    """``scipy.linalg.svd``: (U, s, Vh) or s."""
    return _la.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)


def det(a, overwrite_a=False, check_finite=True):
    """``scipy.linalg.det`` via LU."""
    return _la.det(a)


def inv(a, overwrite_a=False, check_finite=True):
    """``scipy.linalg.inv`` via LU (inf/NaN for singular matrices)."""
    return _la.inv(a)


def solve(a, b, lower=False, overwrite_a=False, overwrite_b=False, check_finite=True,
          assume_a="gen"):
    """``scipy.linalg.solve`` (assume_a 'gen'; 'sym'/'her'/'pos' use the same LU path,
    'pos' uses Cholesky)."""
    if assume_a == "pos":
        return cho_solve(cho_factor(a, lower=True), b)
    return _la.solve(a, b)


def block_diag(*arrs):
    """``scipy.linalg.block_diag``: the arrays (promoted to 2-D) on the diagonal."""
    if not arrs:
        return lax.full((1, 0), 0, dtypes.default_float_dtype())
    from tracer.numpy.util import promote_dtypes
    arrs = promote_dtypes(*arrs)
    arrs = [_m.atleast_2d(a) for a in arrs]
    rows = sum(_aval(a).shape[0] for a in arrs)
    cols = sum(_aval(a).shape[1] for a in arrs)
    out_rows = []
    c = 0
    for a in arrs:
        r, k = _aval(a).shape
        zero = lax.full((), 0, _aval(a).dtype)
        out_rows.append(lax.pad(a, zero, [(0, 0, 0), (c, cols - c - k, 0)]))
        c += k
    del rows
    return lax.concatenate(out_rows, 0)


# Padé coefficients b_0..b_13 of the [13/13] approximant (Higham 2005, "The scaling and
# squaring method for the matrix exponential revisited"), and its theta_13 bound.
_PADE13 = (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800.,
           129060195264000., 10559470521600., 670442572800., 33522128640., 1323241920.,
           40840800., 960960., 16380., 182., 1.)
_THETA13 = 5.371920351148152
_MAX_SQUARINGS = 24


def expm(A, *, upper_triangular=False, max_squarings=16):
    """``scipy.linalg.expm`` by scaling and squaring with the [13/13] Padé approximant.
    The number of squarings is data dependent; under tracing it is bounded by
    ``max_squarings`` (squarings beyond the need are skipped with select)."""
    (A,) = _inexact(A)
    if _aval(A).ndim < 2 or _aval(A).shape[-1] != _aval(A).shape[-2]:
        raise ValueError(f"expm: expected square matrices, got shape {_aval(A).shape}")
    dt = _aval(A).dtype
    n = _aval(A).shape[-1]
    norm1 = _r.max(_r.sum(_u.absolute(A), axis=-2), axis=-1)
    s = _u.maximum(_u.ceil(_u.log2(_u.divide(norm1, _THETA13))), 0.0)
    s = _m.where(_u.isfinite(s), s, 0.0)
    s_conc = concrete_value(s)
    scale = _u.power(2.0, _u.negative(s))
    As = _u.multiply(A, lax.convert_element_type(scale, dt)[..., None, None])
    ident = _m.broadcast_to(lax.convert_element_type(
        lax.eq(lax.broadcasted_iota(dtypes.int32, (n, n), 0),
               lax.broadcasted_iota(dtypes.int32, (n, n), 1)), dt), _aval(A).shape)
    b = [lax.full((), c, dt) for c in _PADE13]
    A2 = _m.matmul(As, As)
    A4 = _m.matmul(A2, A2)
    A6 = _m.matmul(A4, A2)
    mul = _u.multiply
    add = _u.add
    U = _m.matmul(As, add(_m.matmul(A6, add(add(mul(b[13], A6), mul(b[11], A4)),
                                            mul(b[9], A2))),
                          add(add(add(mul(b[7], A6), mul(b[5], A4)), mul(b[3], A2)),
                              mul(b[1], ident))))
    V = add(_m.matmul(A6, add(add(mul(b[12], A6), mul(b[10], A4)), mul(b[8], A2))),
            add(add(add(mul(b[6], A6), mul(b[4], A4)), mul(b[2], A2)), mul(b[0], ident)))
    R = _la.solve(_u.subtract(V, U), add(U, V))
    if s_conc is not None:
        for _ in range(int(np.max(s_conc))):
            R = _m.matmul(R, R)
        return R
    for i in range(max_squarings):
        R = _m.where(_u.less(float(i), s)[..., None, None], _m.matmul(R, R), R)
    return R
