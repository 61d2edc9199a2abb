"""Matrix decompositions and solves (exposed as ``lax.linalg.*``): Cholesky and
TriangularSolve (XLA Operation semantics, 'Cholesky', 'TriangularSolve'), and the
decompositions JAX provides as lax.linalg primitives: lu, qr, eigh, svd, eig.

All operate on the two innermost dimensions and batch over the leading ones. The NumPy
impls call LAPACK through NumPy/SciPy. Failures follow XLA: a matrix that is not positive
definite gives NaNs from cholesky, a singular triangular system gives inf/NaN, never an
exception. jvp rules are the standard matrix-calculus results (Murray 2016 for Cholesky;
Townsend 2016 / Walter & Lehmann for QR and SVD; the classic first-order perturbation
formulas for eigh), written with lax primitives so they can be differentiated again.
"""
from __future__ import annotations

import numpy as np

from tracer import dtypes
from tracer.core import Primitive, ShapedArray, get_aval
from tracer.interpreters import ad, batching
from tracer.interpreters.ad import Zero
from lax import elementwise as ew
from lax import shapes
from lax import reductions as red
from lax.linalg import dot_general
from lax.utils import _inexact, check_dtype

# ---------------------------------------- helpers -------------------------------------------




def _batched(x):
    """``x`` as a stack of its matrices, shape (batch size, m, n): the batch size is
    counted, since reshape(-1, m, n) cannot infer it when a matrix dimension is 0."""
    return x.reshape((int(np.prod(x.shape[:-2], dtype=np.int64)),) + x.shape[-2:])

def _scipy_linalg():
    # imported on first use, not with tracer: SciPy's import costs every start time
    import scipy.linalg
    return scipy.linalg

def _aval(x):
    return x.aval if ad.is_undefined_primal(x) else get_aval(x)


def _T(x):
    nd = _aval(x).ndim
    return shapes.transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _H(x):
    x = _T(x)
    return ew.conj(x) if dtypes.is_complex(_aval(x).dtype) else x


def _mm(a, b):
    """Batched matrix product over the leading dims (both operands have the same rank)."""
    nd = _aval(a).ndim
    bd = tuple(range(nd - 2))
    return dot_general(a, b, (((nd - 1,), (nd - 2,)), (bd, bd)))


def _tri_mask(shape, k, lower):
    r = shapes.broadcasted_iota(dtypes.int32, shape, len(shape) - 2)
    c = shapes.broadcasted_iota(dtypes.int32, shape, len(shape) - 1)
    return ew.ge(ew.add(r, np.int32(k)), c) if lower else ew.le(ew.add(r, np.int32(k)), c)


def _tril(x, k=0):
    aval = _aval(x)
    return ew.select(_tri_mask(aval.shape, k, True), x, shapes.full_like(x, 0))


def _triu(x, k=0):
    aval = _aval(x)
    return ew.select(_tri_mask(aval.shape, k, False), x, shapes.full_like(x, 0))


def _eye(shape, dtype):
    r = shapes.broadcasted_iota(dtypes.int32, shape, len(shape) - 2)
    c = shapes.broadcasted_iota(dtypes.int32, shape, len(shape) - 1)
    return ew.convert_element_type(ew.eq(r, c), dtype)


def _diag(x):
    """The diagonal of the two innermost dims of a square-or-not matrix."""
    aval = _aval(x)
    m, n = aval.shape[-2:]
    k = min(m, n)
    x = shapes.slice(x, (0,) * aval.ndim, aval.shape[:-2] + (k, k))
    masked = ew.mul(x, _eye(get_aval(x).shape, aval.dtype))
    return red.reduce_sum(masked, (aval.ndim - 1,))


def _diag_embed(v, dtype=None):
    aval = get_aval(v)
    n = aval.shape[-1]
    shape = aval.shape + (n,)
    b = shapes.broadcast_in_dim(v, shape, tuple(range(aval.ndim)))
    return ew.mul(b, _eye(shape, aval.dtype if dtype is None else dtype))


def _check_matrix(name, x, square=True):
    if x.ndim < 2:
        raise ValueError(f"{name}: expected a matrix (or a batch of matrices) with at least 2 "
                         f"dimensions, got {x.str_short()}")
    if square and x.shape[-1] != x.shape[-2]:
        raise ValueError(f"{name}: expected square matrices in the two innermost dimensions, "
                         f"got {x.str_short()}")
    check_dtype(name, x, _inexact)


def _front_batch(axis_size, vals, dims):
    return [batching.bdim_at_front(v, d, axis_size) for v, d in zip(vals, dims)]


# ---------------------------------------- cholesky ------------------------------------------

def cholesky(x, *, symmetrize_input: bool = True):
    """Lower Cholesky factor L with L L^H = x (XLA 'Cholesky', jax.lax.linalg.cholesky).

    x: (..., n, n) float or complex, Hermitian positive definite. With
    ``symmetrize_input`` the factor of (x + x^H)/2 is computed. A matrix that is not
    positive definite gives NaNs (no exception).
    """
    if symmetrize_input:
        x = ew.div(ew.add(x, _H(x)), shapes.full((), 2, get_aval(x).dtype))
    return cholesky_p.bind(x)


def _cholesky_abstract_eval(x):
    _check_matrix("cholesky", x)
    return ShapedArray(x.shape, x.dtype)


def _cholesky_one(m):
    try:
        return np.linalg.cholesky(m)
    except np.linalg.LinAlgError:
        return np.full_like(m, np.nan)


def _cholesky_impl(x):
    if x.size == 0:
        return x.copy()
    flat = _batched(x)
    # Only the lower triangle is read, as LAPACK does.
    out = np.stack([_cholesky_one(np.tril(m) + np.tril(m, -1).conj().T) for m in flat])
    return out.reshape(x.shape).astype(x.dtype)


def _cholesky_jvp(primals, tangents):
    (x,), (g,) = primals, tangents
    L = cholesky_p.bind(x)
    if type(g) is Zero:
        return [L], [Zero.from_primal_value(L)]
    # dL = L Phi(L^-1 dA L^-H), Phi = lower triangle with the diagonal halved, where dA is
    # the Hermitian matrix of the tangent's lower triangle: the impl reads that triangle
    # only (as LAPACK), so a tangent in the upper one changes nothing (with
    # ``symmetrize_input`` the tangent arrives Hermitian and this is the identity).
    sym = ew.add(_tril(g), _H(_tril(g, -1)))
    tmp = triangular_solve(L, sym, left_side=False, lower=True, transpose_a=True,
                           conjugate_a=True)
    inner = triangular_solve(L, tmp, left_side=True, lower=True)
    n = get_aval(x).shape[-1]
    half = ew.sub(shapes.full((), 1, get_aval(x).dtype),
                  ew.mul(shapes.full((), 0.5, get_aval(x).dtype), _eye(get_aval(x).shape,
                                                                       get_aval(x).dtype)))
    del n
    phi = ew.mul(_tril(inner), half)
    return [L], [_mm(L, phi)]


def _cholesky_batch(axis_data, vals, dims):
    (x,) = _front_batch(axis_data.size, vals, dims)
    return [cholesky_p.bind(x)], [0]


cholesky_p = Primitive("cholesky")
cholesky_p.def_abstract_eval(_cholesky_abstract_eval)
cholesky_p.def_impl(_cholesky_impl)
ad.primitive_jvps[cholesky_p] = _cholesky_jvp
batching.primitive_batchers[cholesky_p] = _cholesky_batch


# ------------------------------------- triangular_solve -------------------------------------

def triangular_solve(a, b, *, left_side: bool = False, lower: bool = False,
                     transpose_a: bool = False, conjugate_a: bool = False,
                     unit_diagonal: bool = False):
    """Solve op(a) x = b (``left_side``) or x op(a) = b for x (XLA 'TriangularSolve').

    a: (..., m, m) triangular (only the ``lower`` or upper triangle is read; with
    ``unit_diagonal`` the diagonal is taken as ones); b: (..., m, n) for left_side else
    (..., n, m); op(a) is a, a^T (``transpose_a``) or a^H (``transpose_a`` and
    ``conjugate_a``). Leading dims must match. A singular system gives inf/NaN.
    """
    return triangular_solve_p.bind(a, b, left_side=bool(left_side), lower=bool(lower),
                                   transpose_a=bool(transpose_a),
                                   conjugate_a=bool(conjugate_a),
                                   unit_diagonal=bool(unit_diagonal))


def _ts_abstract_eval(a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    _check_matrix("triangular_solve", a)
    if b.ndim != a.ndim or b.shape[:-2] != a.shape[:-2]:
        raise ValueError(f"triangular_solve: a {a.str_short()} and b {b.str_short()} must "
                         "have the same rank and batch dimensions")
    m = a.shape[-1]
    k = b.shape[-2] if left_side else b.shape[-1]
    if k != m:
        raise ValueError(f"triangular_solve: b {b.str_short()} does not match a "
                         f"{a.str_short()} for left_side={left_side} (need dimension "
                         f"{-2 if left_side else -1} of size {m})")
    if a.dtype != b.dtype:
        raise TypeError(f"triangular_solve: a and b must share a dtype, got {a.str_short()} "
                        f"and {b.str_short()}")
    return ShapedArray(b.shape, b.dtype)


def _subst(M, B, lower):
    """Forward/back substitution with IEEE results for singular M (no exception)."""
    n = M.shape[0]
    X = np.zeros_like(B)
    rng = range(n) if lower else range(n - 1, -1, -1)
    with np.errstate(all="ignore"):
        for i in rng:
            if lower:
                s = B[i] - M[i, :i] @ X[:i]
            else:
                s = B[i] - M[i, i + 1:] @ X[i + 1:]
            X[i] = s / M[i, i]
    return X


def _ts_one(a, b, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    m = a.shape[-1]
    a = np.tril(a) if lower else np.triu(a)
    if unit_diagonal:
        a = a.copy()
        a[np.arange(m), np.arange(m)] = 1
    op = a
    if conjugate_a:
        op = op.conj()
    if transpose_a:
        op = op.T
    op_lower = lower != transpose_a
    if np.all(np.diagonal(op) != 0):
        if left_side:
            return _scipy_linalg().solve_triangular(op, b, lower=op_lower, check_finite=False)
        return _scipy_linalg().solve_triangular(op.T, b.T, lower=not op_lower, check_finite=False).T
    if left_side:
        return _subst(op, b, op_lower)
    # x op = b  <=>  op^T x^T = b^T
    return _subst(op.T, b.T, not op_lower).T


def _ts_impl(a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    if b.size == 0:
        return b.copy()
    fa = _batched(a)
    fb = _batched(b)
    out = np.stack([_ts_one(x, y, left_side, lower, transpose_a, conjugate_a, unit_diagonal)
                    for x, y in zip(fa, fb)])
    return out.reshape(b.shape).astype(b.dtype)


def _ts_jvp(primals, tangents, **params):
    (a, b), (ga, gb) = primals, tangents
    x = triangular_solve_p.bind(a, b, **params)
    t = None
    if type(gb) is not Zero:
        t = triangular_solve_p.bind(a, gb, **params)
    if type(ga) is not Zero:
        k = 1 if params["unit_diagonal"] else 0
        ga = _tril(ga, -k) if params["lower"] else _triu(ga, k)
        op_ga = ga
        if params["conjugate_a"] and dtypes.is_complex(get_aval(op_ga).dtype):
            op_ga = ew.conj(op_ga)
        if params["transpose_a"]:
            op_ga = _T(op_ga)
        # d(op(A)^-1 B) = -op(A)^-1 d op(A) X ; d(B op(A)^-1) = -X d op(A) op(A)^-1
        if params["left_side"]:
            ta = ew.neg(triangular_solve_p.bind(a, _mm(op_ga, x), **params))
        else:
            ta = ew.neg(triangular_solve_p.bind(a, _mm(x, op_ga), **params))
        t = ta if t is None else ad.add_tangents(t, ta)
    return [x], [Zero.from_primal_value(x) if t is None else t]


def _ts_transpose(cts, a, b, **params):
    (ct,) = cts
    assert not ad.is_undefined_primal(a) and ad.is_undefined_primal(b)
    if type(ct) is Zero:
        return [None, None]
    p = dict(params, transpose_a=not params["transpose_a"])
    return [None, triangular_solve_p.bind(a, ct, **p)]


def _ts_batch(axis_data, vals, dims, **params):
    a, b = _front_batch(axis_data.size, vals, dims)
    return [triangular_solve_p.bind(a, b, **params)], [0]


triangular_solve_p = Primitive("triangular_solve")
triangular_solve_p.def_abstract_eval(_ts_abstract_eval)
triangular_solve_p.def_impl(_ts_impl)
ad.primitive_jvps[triangular_solve_p] = _ts_jvp
ad.primitive_transposes[triangular_solve_p] = _ts_transpose
batching.primitive_batchers[triangular_solve_p] = _ts_batch


# -------------------------------------------- lu --------------------------------------------

def lu(x):
    """LU decomposition with partial pivoting (jax.lax.linalg.lu): returns (lu, pivots,
    permutation) with x[..., permutation, :] = L U, L unit lower (below the diagonal of
    ``lu``), U upper; pivots (..., min(m, n)) int32 are LAPACK's 0-based row swaps."""
    return tuple(lu_p.bind(x))


def _lu_abstract_eval(x):
    _check_matrix("lu", x, square=False)
    m, n = x.shape[-2:]
    batch = x.shape[:-2]
    return [ShapedArray(x.shape, x.dtype), ShapedArray(batch + (min(m, n),), dtypes.int32),
            ShapedArray(batch + (m,), dtypes.int32)]


def _lu_one(a):
    m, n = a.shape
    if a.size == 0:
        return a.copy(), np.zeros(min(m, n), np.int32), np.arange(m, dtype=np.int32)
    getrf, = _scipy_linalg().get_lapack_funcs(("getrf",), (a,))
    lu_, piv, info = getrf(a, overwrite_a=False)
    piv = piv.astype(np.int32)
    perm = np.arange(m, dtype=np.int32)
    for i, p in enumerate(piv):
        perm[i], perm[p] = perm[p], perm[i]
    return lu_.astype(a.dtype), piv, perm


def _lu_impl(x):
    batch = x.shape[:-2]
    flat = _batched(x)
    m, n = x.shape[-2:]
    if flat.shape[0] == 0:
        return [x.copy(), np.zeros(batch + (min(m, n),), np.int32),
                np.zeros(batch + (m,), np.int32)]
    outs = [_lu_one(a) for a in flat]
    return [np.stack([o[0] for o in outs]).reshape(x.shape),
            np.stack([o[1] for o in outs]).reshape(batch + (min(m, n),)),
            np.stack([o[2] for o in outs]).reshape(batch + (m,))]


def _lu_jvp(primals, tangents):
    (x,), (g,) = primals, tangents
    lu_, piv, perm = lu_p.bind(x)
    outs = [lu_, piv, perm]
    zeros = [Zero.from_primal_value(piv), Zero.from_primal_value(perm)]
    if type(g) is Zero:
        return outs, [Zero.from_primal_value(lu_)] + zeros
    aval = get_aval(x)
    m, n = aval.shape[-2:]
    if m != n:
        raise NotImplementedError(f"lu: the derivative of the LU decomposition of non-square "
                                  f"matrices is not implemented (got {aval.str_short()})")
    dt = aval.dtype
    # Rows of the tangent permuted like the factorisation: P dA, with P one-hot.
    P = ew.convert_element_type(
        ew.eq(shapes.broadcast_in_dim(perm, aval.shape, tuple(range(aval.ndim - 1))),
              shapes.broadcasted_iota(dtypes.int32, aval.shape, aval.ndim - 1)), dt)
    pg = _mm(P, g)
    eye = _eye(aval.shape, dt)
    L = ew.add(_tril(lu_, -1), eye)
    U = _triu(lu_)
    la = triangular_solve(L, pg, left_side=True, lower=True, unit_diagonal=True)
    lau = triangular_solve(U, la, left_side=False, lower=False)
    dlu = ew.add(_mm(L, _tril(lau, -1)), _mm(_triu(lau), U))
    return outs, [dlu] + zeros


def _lu_batch(axis_data, vals, dims):
    (x,) = _front_batch(axis_data.size, vals, dims)
    return lu_p.bind(x), [0, 0, 0]


lu_p = Primitive("lu")
lu_p.multiple_results = True
lu_p.def_abstract_eval(_lu_abstract_eval)
lu_p.def_impl(_lu_impl)
ad.primitive_jvps[lu_p] = _lu_jvp
batching.primitive_batchers[lu_p] = _lu_batch


# -------------------------------------------- qr --------------------------------------------

def qr(x, *, full_matrices: bool = True):
    """QR decomposition (jax.lax.linalg.qr): x = Q R with Q unitary, R upper triangular.
    (..., m, n) -> Q (..., m, m), R (..., m, n) with ``full_matrices``, else Q (..., m, k),
    R (..., k, n) with k = min(m, n)."""
    return tuple(qr_p.bind(x, full_matrices=bool(full_matrices)))


def _qr_abstract_eval(x, *, full_matrices):
    _check_matrix("qr", x, square=False)
    m, n = x.shape[-2:]
    k = m if full_matrices else min(m, n)
    batch = x.shape[:-2]
    return [ShapedArray(batch + (m, k), x.dtype), ShapedArray(batch + (k, n), x.dtype)]


def _qr_impl(x, *, full_matrices):
    m, n = x.shape[-2:]
    k = m if full_matrices else min(m, n)
    batch = x.shape[:-2]
    if x.size == 0:
        q = np.zeros(batch + (m, k), x.dtype)
        if m and k:
            q[..., np.arange(min(m, k)), np.arange(min(m, k))] = 1
        return [q, np.zeros(batch + (k, n), x.dtype)]
    q, r = np.linalg.qr(x, mode="complete" if full_matrices else "reduced")
    return [q.astype(x.dtype), r.astype(x.dtype)]


def _qr_jvp(primals, tangents, *, full_matrices):
    (x,), (g,) = primals, tangents
    q, r = qr_p.bind(x, full_matrices=full_matrices)
    if type(g) is Zero:
        return [q, r], [Zero.from_primal_value(q), Zero.from_primal_value(r)]
    aval = get_aval(x)
    m, n = aval.shape[-2:]
    if m < n or (full_matrices and m != n):
        raise NotImplementedError(f"qr: the derivative is implemented for m >= n with "
                                  f"full_matrices=False (or square matrices); got "
                                  f"{aval.str_short()}, full_matrices={full_matrices}")
    # With C = Q^H dA R^-1: dQ = Q (Omega - C) + dA R^-1 and dR = (C - Omega) R, where
    # Omega is the skew-Hermitian matrix built from the strictly lower part of C.
    dx_rinv = triangular_solve(r, g, left_side=False, lower=False)
    c = _mm(_H(q), dx_rinv)
    low = _tril(c, -1)
    omega = ew.sub(low, _H(low))
    if dtypes.is_complex(aval.dtype):
        eye = _eye(get_aval(c).shape, aval.dtype)
        omega = ew.add(omega, ew.mul(eye, ew.sub(c, ew.convert_element_type(ew.real(c),
                                                                             aval.dtype))))
    dq = ew.add(_mm(q, ew.sub(omega, c)), dx_rinv)
    dr = _mm(ew.sub(c, omega), r)
    return [q, r], [dq, dr]


def _qr_batch(axis_data, vals, dims, *, full_matrices):
    (x,) = _front_batch(axis_data.size, vals, dims)
    return qr_p.bind(x, full_matrices=full_matrices), [0, 0]


qr_p = Primitive("qr")
qr_p.multiple_results = True
qr_p.def_abstract_eval(_qr_abstract_eval)
qr_p.def_impl(_qr_impl)
ad.primitive_jvps[qr_p] = _qr_jvp
batching.primitive_batchers[qr_p] = _qr_batch


# ------------------------------------------- eigh --------------------------------------------

def eigh(x, *, lower: bool = True, symmetrize_input: bool = True):
    """Eigendecomposition of Hermitian matrices (jax.lax.linalg.eigh): returns (v, w) with
    x v = v diag(w), eigenvalues w ascending (real dtype), eigenvectors in the columns of
    v. Only the ``lower`` (or upper) triangle is read unless ``symmetrize_input``."""
    if symmetrize_input:
        x = ew.div(ew.add(x, _H(x)), shapes.full((), 2, get_aval(x).dtype))
    return tuple(eigh_p.bind(x, lower=bool(lower)))


def _eigh_abstract_eval(x, *, lower):
    _check_matrix("eigh", x)
    return [ShapedArray(x.shape, x.dtype),
            ShapedArray(x.shape[:-1], dtypes.real_dtype(x.dtype))]


def _eigh_impl(x, *, lower):
    if x.size == 0:
        return [x.copy(), np.zeros(x.shape[:-1], dtypes.real_dtype(x.dtype))]
    w, v = np.linalg.eigh(x, UPLO="L" if lower else "U")
    return [v.astype(x.dtype), w.astype(dtypes.real_dtype(x.dtype))]


def _eigh_jvp(primals, tangents, *, lower):
    (x,), (g,) = primals, tangents
    v, w = eigh_p.bind(x, lower=lower)
    if type(g) is Zero:
        return [v, w], [Zero.from_primal_value(v), Zero.from_primal_value(w)]
    aval = get_aval(x)
    dt = aval.dtype
    sym = ew.div(ew.add(g, _H(g)), shapes.full((), 2, dt))
    wc = ew.convert_element_type(w, dt)
    n = aval.shape[-1]
    shape = aval.shape
    wi = shapes.broadcast_in_dim(wc, shape, tuple(range(aval.ndim - 2)) + (aval.ndim - 1,))
    wj = shapes.broadcast_in_dim(wc, shape, tuple(range(aval.ndim - 1)))
    eye = _eye(shape, dt)
    # F_ij = 1 / (w_j - w_i) off the diagonal, 0 on it (distinct eigenvalues assumed).
    F = ew.sub(ew.div(shapes.full((), 1, dt), ew.add(eye, ew.sub(wi, wj))), eye)
    del n
    vav = _mm(_mm(_H(v), sym), v)
    dv = _mm(v, ew.mul(F, vav))
    dw = _diag(vav)
    if dtypes.is_complex(dt):
        dw = ew.real(dw)
    return [v, w], [dv, dw]


def _eigh_batch(axis_data, vals, dims, *, lower):
    (x,) = _front_batch(axis_data.size, vals, dims)
    return eigh_p.bind(x, lower=lower), [0, 0]


eigh_p = Primitive("eigh")
eigh_p.multiple_results = True
eigh_p.def_abstract_eval(_eigh_abstract_eval)
eigh_p.def_impl(_eigh_impl)
ad.primitive_jvps[eigh_p] = _eigh_jvp
batching.primitive_batchers[eigh_p] = _eigh_batch


# ------------------------------------------- svd ---------------------------------------------

def svd(x, *, full_matrices: bool = True, compute_uv: bool = True):
    """Singular value decomposition (jax.lax.linalg.svd): returns (u, s, vh) with
    x = u diag(s) vh and s descending (real dtype), or s alone without ``compute_uv``."""
    outs = svd_p.bind(x, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv))
    if compute_uv:
        s, u, vh = outs
        return u, s, vh
    return outs[0]


def _svd_abstract_eval(x, *, full_matrices, compute_uv):
    _check_matrix("svd", x, square=False)
    m, n = x.shape[-2:]
    k = min(m, n)
    batch = x.shape[:-2]
    s = ShapedArray(batch + (k,), dtypes.real_dtype(x.dtype))
    if not compute_uv:
        return [s]
    if full_matrices:
        return [s, ShapedArray(batch + (m, m), x.dtype), ShapedArray(batch + (n, n), x.dtype)]
    return [s, ShapedArray(batch + (m, k), x.dtype), ShapedArray(batch + (k, n), x.dtype)]


def _svd_impl(x, *, full_matrices, compute_uv):
    rdt = dtypes.real_dtype(x.dtype)
    m, n = x.shape[-2:]
    k = min(m, n)
    batch = x.shape[:-2]
    if x.size == 0:
        s = np.zeros(batch + (k,), rdt)
        if not compute_uv:
            return [s]
        um, vn = (m, n) if full_matrices else (k, k)
        u = np.zeros(batch + (m, um), x.dtype)
        vh = np.zeros(batch + (vn, n), x.dtype)
        for a, d in ((u, min(m, um)), (vh, min(vn, n))):
            a[..., np.arange(d), np.arange(d)] = 1
        return [s, u, vh]
    if not compute_uv:
        return [np.linalg.svd(x, compute_uv=False).astype(rdt)]
    u, s, vh = np.linalg.svd(x, full_matrices=full_matrices)
    return [s.astype(rdt), u.astype(x.dtype), vh.astype(x.dtype)]


def _svd_jvp(primals, tangents, *, full_matrices, compute_uv):
    (x,), (g,) = primals, tangents
    aval = get_aval(x)
    m, n = aval.shape[-2:]
    if compute_uv and full_matrices and m != n:
        raise NotImplementedError("svd: the derivative with full_matrices=True is only "
                                  f"defined for square matrices, got {aval.str_short()}; use "
                                  "full_matrices=False")
    s, U, Vt = svd_p.bind(x, full_matrices=False, compute_uv=True)
    outs = svd_p.bind(x, full_matrices=full_matrices, compute_uv=compute_uv)
    if type(g) is Zero:
        return outs, [Zero.from_primal_value(o) for o in outs]
    dt = aval.dtype
    Ut, V = _H(U), _H(Vt)
    dS = _mm(_mm(Ut, g), V)
    ds = _diag(dS)
    if dtypes.is_complex(dt):
        ds = ew.real(ds)
    if not compute_uv:
        return outs, [ds]
    k = min(m, n)
    sc = ew.convert_element_type(s, dt)
    kshape = aval.shape[:-2] + (k, k)
    nb = aval.ndim - 2
    s_row = shapes.broadcast_in_dim(sc, kshape, tuple(range(nb)) + (nb + 1,))  # s_j
    s_col = shapes.broadcast_in_dim(sc, kshape, tuple(range(nb)) + (nb,))      # s_i
    eye = _eye(kshape, dt)
    diffs = ew.mul(ew.add(s_row, s_col), ew.sub(s_row, s_col))                 # s_j^2 - s_i^2
    F = ew.sub(ew.div(shapes.full((), 1, dt), ew.add(diffs, eye)), eye)
    dSS = ew.mul(s_row, dS)
    SdS = ew.mul(s_col, dS)
    zero_s = ew.convert_element_type(ew.eq(sc, shapes.full((), 0, dt)), dt)
    s_inv = ew.sub(ew.div(shapes.full((), 1, dt), ew.add(sc, zero_s)), zero_s)
    s_inv_mat = _diag_embed(s_inv)
    dUdV_diag = ew.mul(ew.mul(shapes.full((), 0.5, dt), ew.sub(dS, _H(dS))), s_inv_mat)
    dU = _mm(U, ew.add(ew.mul(F, ew.add(dSS, _H(dSS))), dUdV_diag))
    dV = _mm(V, ew.mul(F, ew.add(SdS, _H(SdS))))

    def s_like(y):  # s along the last axis of y
        return shapes.broadcast_in_dim(sc, get_aval(y).shape, tuple(range(nb)) + (nb + 1,))

    if m > n:
        dAV = _mm(g, V)
        proj = ew.sub(dAV, _mm(U, _mm(Ut, dAV)))
        dU = ew.add(dU, ew.div(proj, s_like(proj)))
    if n > m:
        dAHU = _mm(_H(g), U)
        proj = ew.sub(dAHU, _mm(V, _mm(Vt, dAHU)))
        dV = ew.add(dV, ew.div(proj, s_like(proj)))
    return outs, [ds, dU, _H(dV)]


def _svd_batch(axis_data, vals, dims, **params):
    (x,) = _front_batch(axis_data.size, vals, dims)
    outs = svd_p.bind(x, **params)
    return outs, [0] * len(outs)


svd_p = Primitive("svd")
svd_p.multiple_results = True
svd_p.def_abstract_eval(_svd_abstract_eval)
svd_p.def_impl(_svd_impl)
ad.primitive_jvps[svd_p] = _svd_jvp
batching.primitive_batchers[svd_p] = _svd_batch


# ------------------------------------------- eig ---------------------------------------------

def eig(x, *, compute_left_eigenvectors: bool = False, compute_right_eigenvectors: bool = True):
    """General eigendecomposition (jax.lax.linalg.eig; evaluated on the host): returns
    (w,) + (vl,) + (vr,) as requested; complex dtypes. Not differentiable w.r.t. the
    eigenvectors (eigenvalue derivatives are supported)."""
    return tuple(eig_p.bind(x, compute_left_eigenvectors=bool(compute_left_eigenvectors),
                            compute_right_eigenvectors=bool(compute_right_eigenvectors)))


def _eig_abstract_eval(x, *, compute_left_eigenvectors, compute_right_eigenvectors):
    _check_matrix("eig", x)
    cdt = dtypes.complex_dtype_for(x.dtype)
    outs = [ShapedArray(x.shape[:-1], cdt)]
    if compute_left_eigenvectors:
        outs.append(ShapedArray(x.shape, cdt))
    if compute_right_eigenvectors:
        outs.append(ShapedArray(x.shape, cdt))
    return outs


def _eig_impl(x, *, compute_left_eigenvectors, compute_right_eigenvectors):
    cdt = dtypes.complex_dtype_for(x.dtype)
    batch = x.shape[:-2]
    n = x.shape[-1]
    flat = _batched(x)
    ws, vls, vrs = [], [], []
    for a in flat:
        w, vl, vr = _scipy_linalg().eig(a, left=True, right=True)
        ws.append(w)
        vls.append(vl)
        vrs.append(vr)
    outs = [np.asarray(ws, cdt).reshape(batch + (n,))]
    if compute_left_eigenvectors:
        outs.append(np.asarray(vls, cdt).reshape(x.shape))
    if compute_right_eigenvectors:
        outs.append(np.asarray(vrs, cdt).reshape(x.shape))
    return outs


def _eig_jvp(primals, tangents, *, compute_left_eigenvectors, compute_right_eigenvectors):
    (x,), (g,) = primals, tangents
    outs = eig_p.bind(x, compute_left_eigenvectors=compute_left_eigenvectors,
                      compute_right_eigenvectors=compute_right_eigenvectors)
    if type(g) is Zero:
        return outs, [Zero.from_primal_value(o) for o in outs]
    if compute_left_eigenvectors or compute_right_eigenvectors:
        raise NotImplementedError("eig: derivatives of eigenvectors are not implemented; "
                                  "use compute_right_eigenvectors=False for eigenvalue "
                                  "derivatives")
    w, vl, vr = eig_p.bind(x, compute_left_eigenvectors=True, compute_right_eigenvectors=True)
    cdt = get_aval(w).dtype
    gc = ew.convert_element_type(g, cdt)
    # dw_i = (vl_i^H dA vr_i) / (vl_i^H vr_i)
    num = _diag(_mm(_mm(_H(vl), gc), vr))
    den = _diag(_mm(_H(vl), vr))
    return outs, [ew.div(num, den)]


def _eig_batch(axis_data, vals, dims, **params):
    (x,) = _front_batch(axis_data.size, vals, dims)
    outs = eig_p.bind(x, **params)
    return outs, [0] * len(outs)


eig_p = Primitive("eig")
eig_p.multiple_results = True
eig_p.def_abstract_eval(_eig_abstract_eval)
eig_p.def_impl(_eig_impl)
ad.primitive_jvps[eig_p] = _eig_jvp
batching.primitive_batchers[eig_p] = _eig_batch
