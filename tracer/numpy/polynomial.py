"""Polynomials (coefficient arrays, highest power first) and 1-D convolutions:
convolve, correlate, poly, polyadd, polysub, polymul, polydiv, polyder, polyint, polyval,
polyfit, roots.

convolve/correlate are one lax.conv_general_dilated each (the sliding window of XLA's
convolution is a correlation: convolve flips the kernel). polyfit solves the scaled
Vandermonde least-squares problem with tracer.numpy.linalg.lstsq; roots takes the
eigenvalues of the companion matrix (tracer.numpy.linalg.eigvals).
"""
from __future__ import annotations

import operator

import numpy as np

import lax
from tracer import dtypes
from tracer.core import concrete_value, get_aval
from tracer.numpy.util import as_operand, check_arraylike, promote_dtypes, promote_dtypes_inexact


def _aval(x):
    return get_aval(x)


def _dt(x):
    return get_aval(x).dtype


def _1d(x, fname, what):
    x = as_operand(x, fname)
    if _aval(x).ndim != 1:
        raise ValueError(f"{fname}: {what} must be one-dimensional, got shape "
                         f"{_aval(x).shape}")
    return x


# ==================================== convolutions =======================================

def _correlate_full(a, v, precision, preferred_element_type):
    """Full cross-correlation c[k] = sum_n a[n + k - (m - 1)] v[n] (length n + m - 1)."""
    m = _aval(v).shape[0]
    pet = None if preferred_element_type is None else \
        dtypes.canonicalize_dtype(preferred_element_type)
    if _dt(a) == np.bool_:
        a, v = (lax.convert_element_type(t, dtypes.default_int_dtype()) for t in (a, v))
    out = lax.conv_general_dilated(lax.reshape(a, (1, 1, _aval(a).shape[0])),
                                   lax.reshape(v, (1, 1, m)), (1,), [(m - 1, m - 1)],
                                   precision=precision, preferred_element_type=pet)
    return lax.reshape(out, (_aval(out).shape[2],))


def _conv_mode(full, n, m, mode, fname):
    """The part of the full result NumPy returns for ``mode`` (n >= m)."""
    if mode == "full":
        return full
    if mode == "same":
        s = (m - 1) // 2
        return lax.slice_in_dim(full, s, s + n, 1, 0)
    if mode == "valid":
        return lax.slice_in_dim(full, m - 1, n, 1, 0)
    raise ValueError(f"{fname}: mode must be one of 'full', 'same', 'valid', got {mode!r}")


def convolve(a, v, mode="full", *, precision=None, preferred_element_type=None):
    """``numpy.convolve``: the discrete linear convolution of two 1-D arrays ('full',
    'same' (length max(n, m)) or 'valid' (length max - min + 1))."""
    check_arraylike("convolve", a, v)
    a, v = promote_dtypes(_1d(a, "convolve", "a"), _1d(v, "convolve", "v"))
    n, m = _aval(a).shape[0], _aval(v).shape[0]
    if n == 0 or m == 0:
        raise ValueError("convolve: inputs cannot be empty")
    if m > n:
        a, v, n, m = v, a, m, n
    was_bool = _dt(a) == np.bool_
    full = _correlate_full(a, lax.rev(v, (0,)), precision, preferred_element_type)
    out = _conv_mode(full, n, m, mode, "convolve")
    return lax.ne(out, lax.full_like(out, 0)) if was_bool else out


def correlate(a, v, mode="valid", *, precision=None, preferred_element_type=None):
    """``numpy.correlate``: c[k] = sum_n a[n + k] conj(v[n]) for 1-D arrays ('valid' by
    default, 'same' or 'full')."""
    check_arraylike("correlate", a, v)
    a, v = promote_dtypes(_1d(a, "correlate", "a"), _1d(v, "correlate", "v"))
    n, m = _aval(a).shape[0], _aval(v).shape[0]
    if n == 0 or m == 0:
        raise ValueError("correlate: inputs cannot be empty")
    from tracer.numpy.ufuncs import conjugate
    if m > n:
        # NumPy: c_av[k] = conj(c_va[-k]).
        out = correlate(v, a, mode, precision=precision,
                        preferred_element_type=preferred_element_type)
        return conjugate(lax.rev(out, (0,)))
    was_bool = _dt(a) == np.bool_
    full = _correlate_full(a, conjugate(v), precision, preferred_element_type)
    out = _conv_mode(full, n, m, mode, "correlate")
    return lax.ne(out, lax.full_like(out, 0)) if was_bool else out


# ===================================== polynomials =======================================

def _trim_zeros_front(p, fname):
    pv = concrete_value(p)
    if pv is None:
        return p
    nz = np.flatnonzero(pv)
    start = int(nz[0]) if nz.size else pv.shape[0]
    return lax.slice_in_dim(p, start, pv.shape[0], 1, 0)


def polyval(p, x, *, unroll=16):
    """``numpy.polyval``: p[0] x^(n-1) + ... + p[n-1] by Horner's rule (broadcast over
    ``x``; ``unroll`` is accepted for JAX compatibility)."""
    check_arraylike("polyval", p, x)
    p, x = promote_dtypes(as_operand(p), as_operand(x))
    if _aval(p).ndim != 1:
        raise ValueError(f"polyval: p must be one-dimensional, got shape {_aval(p).shape}")
    n = _aval(p).shape[0]
    from tracer.numpy.ufuncs import add, multiply
    y = lax.full_like(x, 0)
    for i in range(n):
        y = add(multiply(y, x), lax.index_in_dim(p, i, 0, False))
    return y


def _align(a1, a2):
    n1, n2 = _aval(a1).shape[0], _aval(a2).shape[0]
    z = lax.full((), 0, _dt(a1))
    if n1 < n2:
        a1 = lax.pad(a1, z, [(n2 - n1, 0, 0)])
    elif n2 < n1:
        a2 = lax.pad(a2, z, [(n1 - n2, 0, 0)])
    return a1, a2


def polyadd(a1, a2):
    """``numpy.polyadd``: the sum of two polynomials (aligned at the constant term)."""
    check_arraylike("polyadd", a1, a2)
    a1, a2 = promote_dtypes(_1d(a1, "polyadd", "a1"), _1d(a2, "polyadd", "a2"))
    return lax.add(*_align(a1, a2))


def polysub(a1, a2):
    """``numpy.polysub``: a1 - a2."""
    check_arraylike("polysub", a1, a2)
    a1, a2 = promote_dtypes(_1d(a1, "polysub", "a1"), _1d(a2, "polysub", "a2"))
    return lax.sub(*_align(a1, a2))


def polymul(a1, a2, *, trim_leading_zeros=False):
    """``numpy.polymul``: the product (a full convolution). ``trim_leading_zeros``
    (concrete input only) drops leading zero coefficients first, as NumPy does."""
    check_arraylike("polymul", a1, a2)
    a1, a2 = promote_dtypes(as_operand(a1), as_operand(a2))
    if _aval(a1).ndim == 0:
        a1 = lax.reshape(a1, (1,))
    if _aval(a2).ndim == 0:
        a2 = lax.reshape(a2, (1,))
    if trim_leading_zeros:
        a1, a2 = _trim_zeros_front(a1, "polymul"), _trim_zeros_front(a2, "polymul")
    if _aval(a1).shape[0] == 0:
        a1 = lax.full((1,), 0, _dt(a1))
    if _aval(a2).shape[0] == 0:
        a2 = lax.full((1,), 0, _dt(a2))
    return convolve(a1, a2, mode="full")


def polydiv(u, v, *, trim_leading_zeros=False):
    """``numpy.polydiv``: quotient and remainder of u / v (long division unrolled over
    the static degrees). The remainder keeps u's length unless ``trim_leading_zeros``
    (concrete input only), which removes its leading (near-)zeros as NumPy does."""
    check_arraylike("polydiv", u, v)
    u, v = promote_dtypes_inexact(_1d(u, "polydiv", "u"), _1d(v, "polydiv", "v"))
    n, m = _aval(u).shape[0], _aval(v).shape[0]
    if m == 0:
        raise ValueError("polydiv: the divisor must not be empty")
    lead = lax.index_in_dim(v, 0, 0, False)
    q_parts = []
    r = u
    for k in range(max(n - m + 1, 0)):
        qk = lax.div(lax.index_in_dim(r, k, 0, False), lead)
        q_parts.append(qk)
        sub = lax.mul(v, lax.broadcast_in_dim(qk, (m,), ()))
        sub = lax.pad(sub, lax.full((), 0, _dt(sub)), [(k, n - k - m, 0)])
        r = lax.sub(r, sub)
    q = lax.concatenate([lax.reshape(t, (1,)) for t in q_parts], 0) if q_parts else \
        lax.full((1,), 0, _dt(u))
    if trim_leading_zeros:
        rv = concrete_value(r)
        if rv is None:
            from tracer.errors import ConcretizationTypeError
            raise ConcretizationTypeError(r, "in polydiv(trim_leading_zeros=True): the "
                                             "remainder's length depends on its values")
        start = 0
        while start < rv.shape[0] - 1 and np.allclose(rv[start], 0, rtol=1e-14):
            start += 1
        r = lax.slice_in_dim(r, start, rv.shape[0], 1, 0)
    return q, r


def polyder(p, m=1):
    """``numpy.polyder``: the m-th derivative's coefficients."""
    check_arraylike("polyder", p)
    p = _1d(p, "polyder", "p")
    m = operator.index(m)
    if m < 0:
        raise ValueError("polyder: order of derivative must be positive")
    (p,) = promote_dtypes(p)
    for _ in range(m):
        n = _aval(p).shape[0]
        if n <= 1:
            return lax.slice_in_dim(p, 0, 0, 1, 0)
        powers = lax.convert_element_type(lax.rev(lax.iota(dtypes.default_int_dtype(), n),
                                                  (0,)), _dt(p))
        p = lax.slice_in_dim(lax.mul(p, powers), 0, n - 1, 1, 0)
    return p


def polyint(p, m=1, k=None):
    """``numpy.polyint``: the m-th antiderivative, with integration constants ``k`` (a
    scalar or m values)."""
    check_arraylike("polyint", p)
    p = _1d(p, "polyint", "p")
    m = operator.index(m)
    if m < 0:
        raise ValueError("polyint: order of integral must be positive")
    if m == 0:
        return p
    k = [0] * m if k is None else list(np.ravel(np.asarray(k, dtype=object)))
    if len(k) == 1 and m > 1:
        k = k * m
    if len(k) != m:
        raise ValueError("polyint: k must be a scalar or a sequence of length m")
    (p,) = promote_dtypes_inexact(p)
    for j in range(m):
        n = _aval(p).shape[0]
        div = lax.convert_element_type(lax.rev(lax.add(lax.iota(dtypes.default_int_dtype(), n),
                                                       lax.full((), 1, dtypes.default_int_dtype()
                                                                )), (0,)), _dt(p))
        kk = lax.reshape(lax.convert_element_type(as_operand(k[j]), _dt(p)), (1,))
        p = lax.concatenate([lax.div(p, div), kk], 0)
    return p


def poly(seq_of_zeros):
    """``numpy.poly``: the monic polynomial with the given roots (or the characteristic
    polynomial of a square matrix, through its eigenvalues)."""
    check_arraylike("poly", seq_of_zeros)
    z = as_operand(seq_of_zeros)
    real_out = False
    if _aval(z).ndim == 2 and _aval(z).shape[0] == _aval(z).shape[1] and _aval(z).shape[0]:
        from tracer.numpy import linalg
        # The characteristic polynomial of a real matrix is real.
        real_out = not dtypes.is_complex(_dt(z))
        z = linalg.eigvals(z)
    elif _aval(z).ndim != 1:
        raise ValueError(f"poly: input must be 1-D or a non-empty square 2-D array, got "
                         f"shape {_aval(z).shape}")
    (z,) = promote_dtypes_inexact(z)
    a = lax.full((1,), 1, _dt(z))
    for i in range(_aval(z).shape[0]):
        r = lax.index_in_dim(z, i, 0, False)
        factor = lax.concatenate([lax.full((1,), 1, _dt(z)), lax.reshape(lax.neg(r), (1,))],
                                 0)
        a = convolve(a, factor)
    if dtypes.is_complex(_dt(a)) and not real_out:
        # NumPy: roots that come in conjugate pairs give real coefficients (checked on
        # concrete input only).
        zv = concrete_value(z)
        real_out = zv is not None and np.all(np.sort_complex(zv) ==
                                             np.sort_complex(np.conj(zv)))
    return lax.real(a) if real_out and dtypes.is_complex(_dt(a)) else a


def roots(p, *, strip_zeros=True):
    """``numpy.roots``: the roots of the polynomial (complex; eigenvalues of the companion
    matrix). ``strip_zeros`` removes leading zeros (needs concrete ``p``) and turns
    trailing zeros into zero roots."""
    from tracer.numpy import linalg
    check_arraylike("roots", p)
    p = _1d(p, "roots", "p")
    (p,) = promote_dtypes_inexact(p)
    n_zero_roots = 0
    if strip_zeros:
        pv = concrete_value(p)
        if pv is None:
            from tracer.errors import ConcretizationTypeError
            raise ConcretizationTypeError(p, "in roots(strip_zeros=True): pass "
                                             "strip_zeros=False under jit")
        nz = np.flatnonzero(pv)
        if nz.size == 0:
            return lax.full((0,), 0, dtypes.complex_dtype_for(_dt(p)))
        n_zero_roots = pv.shape[0] - 1 - int(nz[-1])
        p = lax.slice_in_dim(p, int(nz[0]), int(nz[-1]) + 1, 1, 0)
    n = _aval(p).shape[0]
    cdt = dtypes.complex_dtype_for(_dt(p))
    if n < 2:
        r = lax.full((0,), 0, cdt)
    else:
        # Companion matrix: first row -p[1:]/p[0], ones on the subdiagonal.
        first = lax.div(lax.neg(lax.slice_in_dim(p, 1, n, 1, 0)),
                        lax.broadcast_in_dim(lax.index_in_dim(p, 0, 0, False), (n - 1,), ()))
        from tracer.numpy.creation import eye
        sub = eye(n - 1, n - 1, k=-1, dtype=_dt(p))
        A = lax.concatenate([lax.reshape(first, (1, n - 1)),
                             lax.slice_in_dim(sub, 1, n - 1, 1, 0)], 0)
        r = lax.convert_element_type(linalg.eigvals(A), cdt)
    if n_zero_roots:
        r = lax.concatenate([r, lax.full((n_zero_roots,), 0, cdt)], 0)
    return r


def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """``numpy.polyfit``: least-squares polynomial coefficients of degree ``deg``
    (highest first) for points (x, y); ``y`` may be 2-D (one fit per column), ``w``
    weighs the residuals, ``full`` also returns (residuals, rank, singular values,
    rcond), ``cov`` the scaled covariance of the coefficients."""
    from tracer.numpy import linalg
    from tracer.numpy.creation import vander
    from tracer.numpy.ufuncs import sqrt, true_divide, multiply
    from tracer.numpy.reductions import sum as _sum
    check_arraylike("polyfit", x, y)
    deg = operator.index(deg)
    if deg < 0:
        raise ValueError("polyfit: expected deg >= 0")
    x, y = promote_dtypes_inexact(as_operand(x), as_operand(y))
    if _aval(x).ndim != 1:
        raise TypeError("polyfit: expected 1D vector for x")
    if _aval(x).shape[0] == 0:
        raise TypeError("polyfit: expected non-empty vector for x")
    if _aval(y).ndim not in (1, 2):
        raise TypeError("polyfit: expected 1D or 2D array for y")
    n = _aval(x).shape[0]
    if _aval(y).shape[0] != n:
        raise TypeError("polyfit: expected x and y to have same length")
    order = deg + 1
    if rcond is None:
        rcond = n * float(np.finfo(dtypes.real_dtype(_dt(x))).eps)
    lhs = vander(x, order)
    rhs = y
    if w is not None:
        (w,) = promote_dtypes_inexact(as_operand(w))
        if _aval(w).shape != (n,):
            raise TypeError("polyfit: expected a 1-d w of the same length as x")
        w = lax.convert_element_type(w, _dt(x))
        lhs = multiply(lhs, lax.broadcast_in_dim(w, (n, order), (0,)))
        rhs = multiply(rhs, w if _aval(rhs).ndim == 1 else
                       lax.broadcast_in_dim(w, _aval(rhs).shape, (0,)))
    # Column scaling improves the conditioning (NumPy does the same).
    scale = sqrt(_sum(multiply(lhs, lhs), axis=0))
    lhs = true_divide(lhs, lax.broadcast_in_dim(scale, (n, order), (1,)))
    c, resids, rank, s = linalg.lstsq(lhs, rhs, rcond)
    c = true_divide(c, scale if _aval(c).ndim == 1 else
                    lax.broadcast_in_dim(scale, _aval(c).shape, (0,)))
    if full:
        return c, resids, rank, s, lax.full((), rcond, dtypes.real_dtype(_dt(x)))
    if cov:
        lhs_t = lax.transpose(lhs, (1, 0))
        Vbase = linalg.inv(lax.dot_general(lhs_t, lhs, (((1,), (0,)), ((), ()))))
        Vbase = true_divide(Vbase, lax.mul(lax.broadcast_in_dim(scale, (order, order), (0,)),
                                           lax.broadcast_in_dim(scale, (order, order), (1,))))
        if cov == "unscaled":
            fac = 1.0
        else:
            if n <= order:
                raise ValueError("polyfit: the number of data points must exceed order to "
                                 "scale the covariance matrix")
            fac = true_divide(resids, n - order)
        if _aval(y).ndim == 1:
            return c, multiply(Vbase, fac)
        fac = lax.broadcast_in_dim(as_operand(fac), (order, order, _aval(y).shape[1]), (2,)) \
            if not isinstance(fac, float) else fac
        return c, multiply(lax.broadcast_in_dim(Vbase, (order, order, _aval(y).shape[1]),
                                                (0, 1)), fac)
    return c
