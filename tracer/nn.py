"""tracer.nn: neural-network activation functions and friends (``jax.nn``'s API).

Every function is a composition of lax primitives (grad, vmap and jit go through them),
written for numerical stability: ``logsumexp``/``softmax``/``log_softmax`` subtract the
maximum (rows of -inf give -inf / NaN as in JAX), ``softplus`` and ``log_sigmoid`` never
overflow, ``elu``/``celu``/``selu`` see a clamped argument in their exponential branch so
that the untaken branch cannot put NaN into gradients. Derivatives at the kinks follow
JAX: relu'(0) = 0, relu6'(0) = relu6'(6) = 0, leaky_relu'(0) = 1, hard_tanh'(±1) = 1
(each is written with ``select`` so the derivative is that of the chosen branch).
"""
from __future__ import annotations

import operator

import numpy as np

import lax
from tracer import dtypes
from tracer.core import get_aval
from tracer.numpy import reductions as _red
from tracer.numpy import ufuncs as _uf
from tracer.numpy.util import (as_operand, canonicalize_axis_tuple, check_arraylike,
                               promote_dtypes_inexact)
from tracer.numpy.ufuncs import tanh  # noqa: F401  (jax.nn.tanh is jnp.tanh)

__all__ = ["celu", "dot_product_attention", "elu", "gelu", "glu", "hard_sigmoid", "hard_silu",
           "hard_swish", "hard_tanh", "identity", "leaky_relu", "log1mexp", "log_sigmoid",
           "log_softmax", "logmeanexp", "logsumexp", "mish", "one_hot", "relu", "relu6",
           "scaled_dot_general", "get_scaled_dot_general_config", "scaled_matmul", "selu", "sigmoid", "silu", "soft_sign", "softmax", "softplus",
           "sparse_plus", "sparse_sigmoid", "squareplus", "standardize", "normalize",
           "swish", "tanh"]


def _x(name, x):
    check_arraylike(name, x)
    (x,) = promote_dtypes_inexact(x)
    return x


def _c(x, v):
    return lax.full((), v, get_aval(x).dtype)


def _zeros(x):
    return lax.full_like(x, 0)


def _stop_gradient(x):
    from tracer.interpreters import ad
    sg = getattr(ad, "stop_gradient", None)
    return x if sg is None else sg(x)


# ===================================== activations =======================================

def identity(x):
    """The identity ``x`` (``jax.nn.identity``)."""
    return as_operand(x)


def _nan_through(x, y):
    """``y``, except NaN where ``x`` is NaN, with a zero derivative there (as JAX's
    relu, ``maximum(x, 0)`` with its own jvp, gives)."""
    if not dtypes.is_inexact(get_aval(x).dtype):
        return y
    return lax.select(lax.ne(x, x), _stop_gradient(x), y)


def relu(x):
    """max(x, 0), with relu'(0) = 0 (``jax.nn.relu``): NaN stays NaN, -0.0 gives 0.0."""
    x = as_operand(x)
    check_arraylike("relu", x)
    return _nan_through(x, lax.select(lax.gt(x, _c(x, 0)), x, _zeros(x)))


def relu6(x):
    """min(max(x, 0), 6), with zero derivative at 0 and 6 (``jax.nn.relu6``); NaN stays
    NaN."""
    x = as_operand(x)
    inside = lax.select(lax.lt(x, _c(x, 6)), x, lax.full_like(x, 6))
    return _nan_through(x, lax.select(lax.gt(x, _c(x, 0)), inside, _zeros(x)))


def sigmoid(x):
    """1 / (1 + exp(-x)) (``jax.nn.sigmoid``, lax.logistic). Integer and bool inputs are
    promoted to the default float dtype, as NumPy-style functions do (JAX raises
    TypeError for them)."""
    return lax.logistic(_x("sigmoid", x))


def log_sigmoid(x):
    """log(sigmoid(x)) = -softplus(-x), without overflow (``jax.nn.log_sigmoid``)."""
    x = _x("log_sigmoid", x)
    return lax.neg(softplus(lax.neg(x)))


def softplus(x):
    """log(1 + exp(x)) = logaddexp(x, 0), exact for large |x| (``jax.nn.softplus``)."""
    x = _x("softplus", x)
    return _uf.logaddexp(x, _zeros(x))


def sparse_plus(x):
    """0 for x <= -1, x for x >= 1, (x + 1)^2 / 4 between (``jax.nn.sparse_plus``)."""
    x = _x("sparse_plus", x)
    quad = lax.mul(_c(x, 0.25), lax.square(lax.add(x, _c(x, 1))))
    return lax.select(lax.le(x, _c(x, -1)), _zeros(x),
                      lax.select(lax.ge(x, _c(x, 1)), x, quad))


def sparse_sigmoid(x):
    """0.5 clip(x + 1, 0, 2), the derivative of sparse_plus (``jax.nn.sparse_sigmoid``)."""
    x = _x("sparse_sigmoid", x)
    return lax.mul(_c(x, 0.5), _uf.minimum(_uf.maximum(lax.add(x, _c(x, 1)), _c(x, 0)),
                                           _c(x, 2)))


def soft_sign(x):
    """x / (|x| + 1) (``jax.nn.soft_sign``)."""
    x = _x("soft_sign", x)
    return lax.div(x, lax.add(lax.abs(x), _c(x, 1)))


def silu(x):
    """x * sigmoid(x) (``jax.nn.silu``; also ``swish``)."""
    x = _x("silu", x)
    return lax.mul(x, lax.logistic(x))


swish = silu


def hard_sigmoid(x):
    """relu6(x + 3) / 6 (``jax.nn.hard_sigmoid``)."""
    x = _x("hard_sigmoid", x)
    return lax.div(relu6(lax.add(x, _c(x, 3))), _c(x, 6))


def hard_silu(x):
    """x * hard_sigmoid(x) (``jax.nn.hard_silu``; also ``hard_swish``)."""
    x = _x("hard_silu", x)
    return lax.mul(x, hard_sigmoid(x))


hard_swish = hard_silu


def hard_tanh(x):
    """-1 below -1, 1 above 1, x between (derivative 1 at ±1) (``jax.nn.hard_tanh``)."""
    x = _x("hard_tanh", x)
    return lax.select(lax.gt(x, _c(x, 1)), lax.full_like(x, 1),
                      lax.select(lax.lt(x, _c(x, -1)), lax.full_like(x, -1), x))


def leaky_relu(x, negative_slope=1e-2):
    """x for x >= 0, negative_slope * x below (``jax.nn.leaky_relu``)."""
    x = _x("leaky_relu", x)
    return _select_b(lax.ge(x, _c(x, 0)), x, _uf.multiply(negative_slope, x))


def _select_b(pred, a, b):
    from tracer.numpy.manipulation import where
    return where(pred, a, b)


def elu(x, alpha=1.0):
    """x for x > 0, alpha (exp(x) - 1) otherwise (``jax.nn.elu``)."""
    x = _x("elu", x)
    pos = lax.gt(x, _c(x, 0))
    safe = lax.select(pos, _zeros(x), x)
    return _select_b(pos, x, _uf.multiply(alpha, lax.expm1(safe)))


def selu(x):
    """scale * elu(x, alpha) with the self-normalizing constants (``jax.nn.selu``)."""
    alpha = 1.6732632423543772848170429916717
    scale = 1.0507009873554804934193349852946
    x = _x("selu", x)
    return lax.mul(_c(x, scale), elu(x, alpha))


def celu(x, alpha=1.0):
    """max(x, 0) + alpha expm1(min(x, 0) / alpha) (``jax.nn.celu``)."""
    x = _x("celu", x)
    return _uf.add(_uf.maximum(x, _c(x, 0)),
                   _uf.multiply(alpha, lax.expm1(_uf.true_divide(_uf.minimum(x, _c(x, 0)),
                                                                 alpha))))


def gelu(x, approximate: bool = True):
    """The Gaussian error linear unit (``jax.nn.gelu``): the tanh approximation by
    default, x * Phi(x) = x (1 + erf(x / sqrt 2)) / 2 when ``approximate=False``."""
    x = _x("gelu", x)
    if approximate:
        c = float(np.sqrt(2 / np.pi))
        inner = lax.mul(_c(x, c), lax.add(x, lax.mul(_c(x, 0.044715), lax.integer_pow(x, 3))))
        return lax.mul(lax.mul(_c(x, 0.5), x), lax.add(_c(x, 1), lax.tanh(inner)))
    if dtypes.is_complex(get_aval(x).dtype):
        raise TypeError("gelu(approximate=False) is not defined for complex input")
    cdf = lax.mul(_c(x, 0.5), lax.add(_c(x, 1), lax.erf(lax.mul(x, _c(x, 1 / np.sqrt(2))))))
    return lax.mul(x, cdf)


def glu(x, axis=-1):
    """Gated linear unit: a * sigmoid(b) for the two halves a, b of ``axis``
    (``jax.nn.glu``)."""
    x = _x("glu", x)
    (axis,) = canonicalize_axis_tuple(axis, get_aval(x).ndim, "glu")
    n = get_aval(x).shape[axis]
    if n % 2:
        raise ValueError(f"glu: axis {axis} of size {n} must be even to split in halves")
    a = lax.slice_in_dim(x, 0, n // 2, 1, axis)
    b = lax.slice_in_dim(x, n // 2, n, 1, axis)
    return lax.mul(a, lax.logistic(b))


def mish(x):
    """x * tanh(softplus(x)) (``jax.nn.mish``)."""
    x = _x("mish", x)
    return lax.mul(x, lax.tanh(softplus(x)))


def squareplus(x, b=4):
    """(x + sqrt(x^2 + b)) / 2 (``jax.nn.squareplus``)."""
    x = _x("squareplus", x)
    y = _uf.sqrt(_uf.add(lax.square(x), b))
    return _uf.multiply(_uf.add(x, y), 0.5)


def log1mexp(x):
    """log(1 - exp(-x)) for x >= 0, accurate for small and large x (``jax.nn.log1mexp``;
    Maechler's switch at log 2)."""
    x = _x("log1mexp", x)
    small = lax.le(x, _c(x, np.log(2.0)))
    return lax.select(small, lax.log(lax.neg(lax.expm1(lax.neg(x)))),
                      lax.log1p(lax.neg(lax.exp(lax.neg(x)))))


# ====================================== reductions =======================================

def _axes(axis, nd, fname):
    return canonicalize_axis_tuple(axis, nd, fname)


def _where(name, where, x):
    """``where`` as a boolean operand of ``x``'s shape, or None. Raises ValueError (as
    JAX) for a mask that is not boolean or does not broadcast to ``x``."""
    if where is None:
        return None
    from tracer.numpy.manipulation import broadcast_to
    w = as_operand(where)
    wa, shape = get_aval(w), get_aval(x).shape
    if wa.dtype != np.bool_:
        raise ValueError(f"{name}: where must be None or a boolean array; got "
                         f"{wa.str_short()} (a mask of numbers: pass where=(mask != 0))")
    try:
        ok = np.broadcast_shapes(wa.shape, shape) == shape
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"{name}: where of shape {wa.shape} does not broadcast to the "
                         f"input's shape {shape}")
    return broadcast_to(w, shape)


def _masked(x, where, fill):
    """``x`` with ``fill`` where the mask (from ``_where``) is False."""
    if where is None:
        return x
    return lax.select(where, x, lax.full_like(x, fill))


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False, where=None):
    """log(sum(b * exp(a))) over ``axis``, computed as max + log(sum(exp(a - max)))
    (``jax.nn.logsumexp`` / ``jax.scipy.special.logsumexp``). A slice of -inf gives -inf,
    +inf gives +inf; with ``b`` the sum may be negative: ``return_sign`` returns
    (log|sum|, sign), otherwise a negative sum gives NaN."""
    a = _x("logsumexp", a)
    if b is not None:
        a, b = promote_dtypes_inexact(a, b)
        try:
            np.broadcast_shapes(get_aval(a).shape, get_aval(b).shape)
        except ValueError:
            raise ValueError(f"logsumexp: b of shape {get_aval(b).shape} does not "
                             f"broadcast with a of shape {get_aval(a).shape}") from None
        from tracer.numpy.manipulation import broadcast_arrays
        a, b = broadcast_arrays(a, b)
        # terms weighted 0 take no part, not even in the shift (as JAX and SciPy): a
        # large, infinite or NaN entry there would make the sum -inf or NaN
        a = lax.select(lax.ne(b, lax.full_like(b, 0)), a, lax.full_like(a, -np.inf))
    nd = get_aval(a).ndim
    axes = _axes(axis, nd, "logsumexp")
    where = _where("logsumexp", where, a)
    am = _masked(a, where, -np.inf)
    is_complex = dtypes.is_complex(get_aval(a).dtype)
    if is_complex:
        amax = lax.reduce_max(lax.real(am), axes) if axes else lax.real(am)
    else:
        amax = lax.reduce_max(am, axes) if axes else am
    amax = lax.select(_uf.isfinite(amax), amax, lax.full_like(amax, 0))
    amax = _stop_gradient(amax)
    shape_keep = list(get_aval(a).shape)
    for i in axes:
        shape_keep[i] = 1
    amax_k = lax.reshape(amax, tuple(shape_keep))
    amax_b = lax.broadcast_in_dim(amax_k, get_aval(a).shape, tuple(range(nd))) if nd else amax_k
    if is_complex:
        amax_b = lax.convert_element_type(amax_b, get_aval(a).dtype)
    # the masked input (-inf where ``where`` is False) inside the exp: exp(inf - max) of a
    # masked-out entry times its zero cotangent would make its derivative NaN
    e = lax.exp(lax.sub(am, amax_b))
    if b is not None:
        e = lax.mul(e, b)
    e = _masked(e, where, 0)
    s = lax.reduce_sum(e, axes) if axes else e
    sign = lax.sign(s)
    if not is_complex or return_sign:
        s = lax.abs(s)
    out = lax.add(lax.log(s), amax if not is_complex else
                  lax.convert_element_type(amax, get_aval(s).dtype))
    if keepdims:
        out = lax.reshape(out, tuple(shape_keep))
        sign = lax.reshape(sign, tuple(shape_keep))
    if return_sign:
        return out, sign
    if b is not None and not is_complex:
        out = lax.select(lax.lt(sign, lax.full_like(sign, 0)), lax.full_like(out, np.nan), out)
    return out


def logmeanexp(x, axis=None, where=None, keepdims=False):
    """log(mean(exp(x))) over ``axis`` (``jax.nn.logmeanexp``): logsumexp - log(count)."""
    x = _x("logmeanexp", x)
    nd = get_aval(x).ndim
    axes = _axes(axis, nd, "logmeanexp")
    lse = logsumexp(x, axes, keepdims=keepdims, where=where)
    if where is None:
        n = 1
        for i in axes:
            n *= get_aval(x).shape[i]
        return lax.sub(lse, _c(lse, np.log(n) if n else np.nan))
    from tracer.numpy.manipulation import broadcast_to
    w = broadcast_to(as_operand(where), get_aval(x).shape)
    cnt = _red.sum(w, axis=axes, keepdims=keepdims, dtype=get_aval(x).dtype)
    return lax.sub(lse, lax.log(cnt))


def softmax(x, axis=-1, where=None, initial=None):
    """exp(x - max) / sum(exp(x - max)) over ``axis`` (``jax.nn.softmax``); entries
    masked out by ``where`` (a boolean array that broadcasts to ``x``) are 0, and so are
    a row masked out entirely and its derivatives (as JAX). Raises ValueError for a mask
    that is not boolean or does not broadcast, TypeError for complex ``x`` (which JAX
    accepts)."""
    x = _x("softmax", x)
    nd = get_aval(x).ndim
    axes = _axes(axis, nd, "softmax")
    where = _where("nn.softmax", where, x)
    _no_complex("nn.softmax", x)
    _, e, s = _shifted_exp_sum(x, axes, where)
    if where is not None:
        s = _masked_row_sum_safe(s)
    out = lax.div(e, lax.broadcast_in_dim(s, get_aval(x).shape, tuple(range(nd)))
                  if nd else s)
    return _masked(out, where, 0)


def _shifted_exp_sum(x, axes, where):
    """(x - max, masked-out entries -inf; its exp; their sum over ``axes``, keepdims). The
    mask is applied before the exp: a masked entry's exp(x - max) may be inf, and its
    derivative times a zero cotangent NaN."""
    nd = get_aval(x).ndim
    xm = _masked(x, where, -np.inf)
    m = _red.max(xm, axis=axes, keepdims=True, initial=-np.inf)
    # As in JAX, a non-finite maximum is not replaced: rows of -inf (or with +inf) give
    # NaN, where logsumexp gives -inf (+inf).
    m = _stop_gradient(m)
    shifted = _masked(lax.sub(x, lax.broadcast_in_dim(m, get_aval(x).shape,
                                                      tuple(range(nd))) if nd else m),
                      where, -np.inf)
    e = lax.exp(shifted)
    return shifted, e, _red.sum(e, axis=axes, keepdims=True)


def _no_complex(name, x):
    if dtypes.is_complex(get_aval(x).dtype):
        raise TypeError(f"{name}: complex input ({get_aval(x).str_short()}) is not "
                        f"supported; pass real numbers")


def _masked_row_sum_safe(s):
    # A row masked out entirely sums to 0 (a row with an entry in sums to at least 1, or
    # NaN): 1 there keeps 0/0 and log(0) out of the values and the derivatives; the
    # caller's final mask gives such a row its value.
    return lax.select(lax.eq(s, lax.full_like(s, 0)), lax.full_like(s, 1), s)


def log_softmax(x, axis=-1, where=None, initial=None):
    """x - logsumexp(x) over ``axis``, computed as (x - max) - log(sum(exp(x - max)))
    (``jax.nn.log_softmax``); entries masked out by ``where`` are -inf, with derivative 0
    (a row masked out entirely too, as JAX). Raises as ``softmax`` does."""
    x = _x("log_softmax", x)
    nd = get_aval(x).ndim
    axes = _axes(axis, nd, "log_softmax")
    where = _where("nn.log_softmax", where, x)
    _no_complex("nn.log_softmax", x)
    shifted, _, s = _shifted_exp_sum(x, axes, where)
    if where is not None:
        s = _masked_row_sum_safe(s)
    lse = lax.log(s)
    out = lax.sub(shifted, lax.broadcast_in_dim(lse, get_aval(x).shape, tuple(range(nd)))
                  if nd else lse)
    return _masked(out, where, -np.inf)


def standardize(x, axis=-1, mean=None, variance=None, epsilon=1e-5, where=None, *,
                algorithm="fast"):
    """(x - mean) / sqrt(variance + epsilon) over ``axis`` (``jax.nn.standardize``):
    ``algorithm='fast'`` uses mean(x^2) - mean(x)^2 clipped at 0, 'stable' the two-pass
    variance."""
    x = _x("standardize", x)
    axes = _axes(axis, get_aval(x).ndim, "standardize")
    if mean is None:
        mean = _red.mean(x, axes, keepdims=True, where=where)
    if variance is None:
        if algorithm == "stable":
            variance = _red.mean(lax.square(_uf.subtract(x, mean)), axes, keepdims=True,
                                 where=where)
        elif algorithm == "fast":
            variance = _uf.subtract(_red.mean(lax.square(x), axes, keepdims=True,
                                              where=where), _uf.square(mean))
            variance = _uf.maximum(variance, 0)
        else:
            raise ValueError(f"standardize: unknown algorithm {algorithm!r}; expected "
                             f"'fast' or 'stable'")
    return _uf.multiply(_uf.subtract(x, mean), lax.rsqrt(_uf.add(variance, epsilon)))


normalize = standardize


def one_hot(x, num_classes, *, dtype=None, axis=-1):
    """One-hot encoding of the integers ``x``: a new axis of size ``num_classes`` (at
    ``axis``) holding 1 at the index and 0 elsewhere; out-of-range values give all zeros
    (``jax.nn.one_hot``; default dtype the default float)."""
    x = as_operand(x, "one_hot")
    num_classes = operator.index(num_classes)
    dt = dtypes.canonicalize_dtype(dtype) if dtype is not None else \
        dtypes.default_float_dtype()
    nd = get_aval(x).ndim
    (ax,) = canonicalize_axis_tuple(axis, nd + 1, "one_hot")
    out_shape = list(get_aval(x).shape)
    out_shape.insert(ax, num_classes)
    out_shape = tuple(out_shape)
    xdt = get_aval(x).dtype
    if dtypes.is_complex(xdt):
        raise TypeError("one_hot: x must be real-valued")
    cmp_dt = xdt if xdt != np.bool_ else dtypes.default_int_dtype()
    iota = lax.broadcasted_iota(cmp_dt, out_shape, ax)
    xb = lax.broadcast_in_dim(lax.convert_element_type(x, cmp_dt), out_shape,
                              tuple(i for i in range(nd + 1) if i != ax))
    return lax.convert_element_type(lax.eq(xb, iota), dt)


# ====================================== attention ========================================

def dot_product_attention(query, key, value, bias=None, mask=None, *, scale=None,
                          is_causal=False, query_seq_lengths=None,
                          key_value_seq_lengths=None, local_window_size=None,
                          implementation=None, return_residual=False):
    """Scaled dot-product attention (``jax.nn.dot_product_attention``, the 'xla' path):
    softmax(Q K^T * scale + bias, masked) V.

    Shapes: query (B, T, N, H) or (T, N, H); key and value (B, S, K, H) with N divisible
    by K (grouped-query attention repeats each key/value head N/K times). ``bias`` and
    ``mask`` broadcast to (B, N, T, S); ``is_causal`` masks keys after the query position;
    ``query_seq_lengths`` / ``key_value_seq_lengths`` (B,) mask padding;
    ``local_window_size`` (left, right) keeps keys within the window. Returns (B, T, N, H)
    (and the logsumexp residual (B, N, T) with ``return_residual``)."""
    if implementation not in (None, "xla"):
        raise ValueError(f"dot_product_attention: implementation {implementation!r} is not "
                         f"available; only 'xla' (the reference computation) is")
    q, k, v = promote_dtypes_inexact(query, key, value)
    unbatched = get_aval(q).ndim == 3
    if unbatched:
        q, k, v = (lax.expand_dims(t, (0,)) for t in (q, k, v))
    for name, t in (("query", q), ("key", k), ("value", v)):
        if get_aval(t).ndim != 4:
            raise ValueError(f"dot_product_attention: {name} must have rank 3 or 4, got "
                             f"shape {get_aval(t).shape}")
    B, T, N, H = get_aval(q).shape
    _, S, K, Hk = get_aval(k).shape
    if get_aval(v).shape[:3] != (B, S, K) or Hk != H or get_aval(k).shape[0] != B:
        raise ValueError(f"dot_product_attention: incompatible shapes query "
                         f"{get_aval(q).shape}, key {get_aval(k).shape}, value "
                         f"{get_aval(v).shape}")
    if N % K:
        raise ValueError(f"dot_product_attention: the number of query heads ({N}) must be a "
                         f"multiple of the number of key/value heads ({K})")
    G = N // K
    scale = 1.0 / np.sqrt(H) if scale is None else scale
    dt = get_aval(q).dtype
    # logits (B, N, T, S) with query head n = k * G + g attending to key head k.
    qg = lax.reshape(q, (B, T, K, G, H))
    logits = lax.dot_general(qg, k, (((4,), (3,)), ((0, 2), (0, 2))))  # (B, K, T, G, S)
    logits = lax.transpose(logits, (0, 1, 3, 2, 4))
    logits = lax.reshape(logits, (B, N, T, S))
    logits = _uf.multiply(logits, lax.full((), scale, dt))
    if bias is not None:
        bias = as_operand(bias)
        if unbatched and get_aval(bias).ndim == 3:
            bias = lax.expand_dims(bias, (0,))
        logits = _uf.add(logits, bias)
    keep = None

    def and_(m, c):
        return c if m is None else lax.bitwise_and(m, c)

    shape4 = (B, N, T, S)
    if mask is not None:
        mask = as_operand(mask)
        if unbatched and get_aval(mask).ndim == 3:
            mask = lax.expand_dims(mask, (0,))
        from tracer.numpy.manipulation import broadcast_to
        keep = and_(keep, broadcast_to(lax.ne(mask, lax.full_like(mask, 0)) if
                                       get_aval(mask).dtype != np.bool_ else mask, shape4))
    tpos = lax.broadcasted_iota(np.int32, shape4, 2)
    spos = lax.broadcasted_iota(np.int32, shape4, 3)
    if is_causal:
        keep = and_(keep, lax.le(spos, tpos))
    if local_window_size is not None:
        left, right = (local_window_size, local_window_size) if isinstance(
            local_window_size, int) else local_window_size
        keep = and_(keep, lax.ge(spos, lax.sub(tpos, lax.full((), left, np.int32))))
        keep = and_(keep, lax.le(spos, lax.add(tpos, lax.full((), right, np.int32))))
    if query_seq_lengths is not None:
        ql = lax.convert_element_type(as_operand(query_seq_lengths), np.int32)
        keep = and_(keep, lax.lt(tpos, lax.broadcast_in_dim(ql, shape4, (0,))))
    if key_value_seq_lengths is not None:
        kl = lax.convert_element_type(as_operand(key_value_seq_lengths), np.int32)
        keep = and_(keep, lax.lt(spos, lax.broadcast_in_dim(kl, shape4, (0,))))
    if keep is not None:
        # JAX fills masked logits with the dtype's lowest finite value, so fully masked
        # rows give a uniform average rather than NaN.
        logits = lax.select(keep, logits, lax.full_like(logits, float(np.finfo(dt).min)))
    probs = softmax(logits, axis=-1)
    # out (B, T, N, H): sum_s probs[b, n, t, s] v[b, s, n // G, h]
    pg = lax.reshape(probs, (B, K, G, T, S))
    out = lax.dot_general(pg, v, (((4,), (1,)), ((0, 1), (0, 2))))  # (B, K, G, T, H)
    out = lax.transpose(out, (0, 3, 1, 2, 4))
    out = lax.reshape(out, (B, T, N, H))
    if unbatched:
        out = lax.squeeze(out, (0,))
    if return_residual:
        res = logsumexp(logits, axis=-1)
        if unbatched:
            res = lax.squeeze(res, (0,))
        return out, res
    return out


def scaled_matmul(lhs, rhs, lhs_scales, rhs_scales, preferred_element_type=np.float32):
    """Block-scaled matrix multiplication (``jax.nn.scaled_matmul``, the reference path):
    lhs (B, M, K) and rhs (B, N, K) are multiplied by their scales (B, M, K / block) and
    (B, N, K / block), each scale covering ``block`` consecutive entries of K, and
    contracted over K: the result is (B, M, N) of ``preferred_element_type``."""
    lhs, rhs, ls, rs = (as_operand(t) for t in (lhs, rhs, lhs_scales, rhs_scales))
    out_dt = dtypes.canonicalize_dtype(preferred_element_type)
    for name, t in (("lhs", lhs), ("rhs", rhs), ("lhs_scales", ls), ("rhs_scales", rs)):
        if get_aval(t).ndim != 3:
            raise ValueError(f"scaled_matmul: {name} must be rank 3, got shape "
                             f"{get_aval(t).shape}")
    B, M, K = get_aval(lhs).shape
    B2, N, K2 = get_aval(rhs).shape
    if (B, K) != (B2, K2):
        raise ValueError(f"scaled_matmul: lhs {get_aval(lhs).shape} and rhs "
                         f"{get_aval(rhs).shape} must agree on B and K")

    def dequant(x, s, rows):
        nb = get_aval(s).shape[2]
        if get_aval(s).shape[:2] != (B, rows) or nb == 0 or K % nb:
            raise ValueError(f"scaled_matmul: scales of shape {get_aval(s).shape} do not "
                             f"divide operand of shape {get_aval(x).shape} into blocks")
        blk = K // nb
        x = lax.convert_element_type(x, out_dt)
        s = lax.convert_element_type(s, out_dt)
        s = lax.reshape(lax.broadcast_in_dim(s, (B, rows, nb, blk), (0, 1, 2)), (B, rows, K))
        return lax.mul(x, s)

    a = dequant(lhs, ls, M)
    b = dequant(rhs, rs, N)
    return lax.dot_general(a, b, (((2,), (2,)), ((0,), (0,))))


# ------------------------------- block-scaled dot products --------------------------------

class BlockScaleConfig:
    """How ``scaled_dot_general`` quantizes one operand (``jax.nn``'s BlockScaleConfig):
    ``block_size`` consecutive contracting entries share one scale of ``scale_type``;
    the values become ``data_type``; nvfp4 divides by ``global_scale`` first."""

    def __init__(self, mode, block_size, data_type, scale_type, global_scale, infer_only):
        self.mode, self.block_size = mode, block_size
        self.data_type, self.scale_type = np.dtype(data_type), np.dtype(scale_type)
        self.global_scale, self.infer_only = global_scale, infer_only

    def __repr__(self):
        return (f"BlockScaleConfig(mode={self.mode!r}, block_size={self.block_size}, "
                f"data_type={self.data_type.name}, scale_type={self.scale_type.name})")


def get_scaled_dot_general_config(mode, global_scale=None):
    """The quantization config of ``scaled_dot_general`` for ``mode`` 'mxfp8' (float8_e4m3fn
    values, float8_e8m0fnu scales per 32) or 'nvfp4' (float4_e2m1fn values, float8_e4m3fn
    scales per 16, a float32 ``global_scale``, default 1) -- ``jax.nn``'s."""
    if mode == "nvfp4":
        gs = lax.convert_element_type(np.ones((1,), np.float32), np.float32) \
            if global_scale is None else global_scale
        return BlockScaleConfig("nvfp4", 16, dtypes.float4_e2m1fn, dtypes.float8_e4m3fn, gs,
                                False)
    if mode == "mxfp8":
        return BlockScaleConfig("mxfp8", 32, dtypes.float8_e4m3fn, dtypes.float8_e8m0fnu,
                                None, False)
    raise ValueError(f"get_scaled_dot_general_config: unsupported mode {mode!r}; use "
                     "'mxfp8' or 'nvfp4'")


def _e8m0_rounding_up(x):
    # the e8m0 exponent of a float32 value, rounded up unless it is a power of two
    bits = lax.bitcast_convert_type(lax.convert_element_type(x, np.float32), np.uint32)
    exp, mant = lax.shift_right_logical(bits, np.uint32(23)), lax.bitwise_and(
        bits, np.uint32(0x7FFFFF))
    up = (mant > 0) & (exp != 0xFE) & ~((exp == 0) & (mant <= 0x400000))
    exp = _red_where(up, exp + np.uint32(1), exp)
    return lax.convert_element_type(exp, np.uint8)


def _red_where(c, a, b):
    from tracer.numpy.manipulation import where
    return where(c, a, b)


def _e8m0_to(x, dtype):
    v = lax.bitcast_convert_type(lax.shift_left(lax.convert_element_type(x, np.uint32),
                                                np.uint32(23)), np.float32)
    tiny = 2.0 ** -15 if np.dtype(dtype) == np.float16 else 2.0 ** -127
    return lax.convert_element_type(_red_where(v == 0, np.float32(tiny), v), dtype)


def _quantize(x, config):
    """(values of ``config.data_type``, scales of ``config.scale_type``) of the (B, M, K)
    operand ``x``, per ``block_size`` entries of K, as jax.nn quantizes."""
    from tracer.numpy.manipulation import clip, reshape
    B, M, K = get_aval(x).shape
    bs = config.block_size
    if K % bs:
        raise ValueError(f"scaled_dot_general: the contracting size {K} is not a multiple "
                         f"of the {config.mode} block size {bs}")
    x = reshape(x, (B, M, K // bs, bs))
    dt = get_aval(x).dtype
    big = lax.convert_element_type(np.float32(dtypes.finfo(config.data_type).max), dt)

    def per_block(v):
        return _red.max(_uf.abs(v), axis=-1, keepdims=True) / big

    if config.mode == "mxfp8":
        scales_q = _e8m0_rounding_up(per_block(x))
        scaled = x / _e8m0_to(scales_q, dt)
        scales_q = lax.bitcast_convert_type(scales_q, config.scale_type)
    else:
        smax = float(dtypes.finfo(config.scale_type).max)
        x = x / config.global_scale
        scales_q = lax.convert_element_type(clip(per_block(x), 0, smax), config.scale_type)
        scaled = x / lax.convert_element_type(scales_q, np.float32)
    xq = lax.convert_element_type(clip(scaled, -big, big), config.data_type)
    return reshape(xq, (B, M, K)), reshape(scales_q, (B, M, K // bs))


def _normalize(x, contract, batch):
    from tracer.numpy.manipulation import reshape, transpose
    nd = get_aval(x).ndim
    shape = get_aval(x).shape
    kept = [d for d in range(nd) if d not in contract and d not in batch]
    b, c = sorted(batch), sorted(contract)
    t = transpose(x, tuple(b + kept + c))
    return reshape(t, (int(np.prod([shape[d] for d in b], dtype=int)),
                       int(np.prod([shape[d] for d in kept], dtype=int)),
                       int(np.prod([shape[d] for d in c], dtype=int))))


def _dot_out_shape(ls, rs, lc, lb, rc, rb):
    return (tuple(ls[i] for i in range(len(ls)) if i in lb)
            + tuple(ls[i] for i in range(len(ls)) if i not in lc and i not in lb)
            + tuple(rs[i] for i in range(len(rs)) if i not in rc and i not in rb))


def _scaled_dot_impl(lhs, rhs, dn, pet, configs):
    from tracer.numpy.manipulation import reshape
    (lc, rc), (lb, rb) = dn
    l3, r3 = _normalize(lhs, lc, lb), _normalize(rhs, rc, rb)
    lq, ls = _quantize(l3, configs[0])
    rq, rs = _quantize(r3, configs[1])
    nv = configs[0].mode == "nvfp4"
    out = scaled_matmul(lq, rq, ls, rs, preferred_element_type=np.float32 if nv else pet)
    if nv:
        out = lax.convert_element_type(
            out * (configs[0].global_scale * configs[1].global_scale), pet)
    return reshape(out, _dot_out_shape(get_aval(lhs).shape, get_aval(rhs).shape,
                                       lc, lb, rc, rb))


def _scaled_transpose_lhs(g, x, y, dn, pet, configs, swap_ans=False):
    from tracer.numpy.manipulation import matmul, reshape, transpose
    (xc, yc), (xb, yb) = dn
    xn, yn = get_aval(x).ndim, get_aval(y).ndim
    x_kept = [d for d in range(xn) if d not in xc and d not in xb]
    y_kept = [d for d in range(yn) if d not in yc and d not in yb]
    nb = len(xb)
    if swap_ans:
        ans_batch, ans_y = range(nb), range(nb, nb + len(y_kept))
    else:
        ans_batch = range(nb)
        ans_y = range(nb + len(x_kept), nb + len(x_kept) + len(y_kept))
    xc_by_y = list(np.take(xc, np.argsort(yc)))
    out_axes = np.argsort(list(xb) + x_kept + xc_by_y)
    y3 = _normalize(y, tuple(y_kept), tuple(yb))
    g3 = _normalize(g, tuple(ans_y), tuple(ans_batch))
    if configs[0].mode != "nvfp4":
        gq, gs = _quantize(g3, configs[0])
        yq, ys = _quantize(y3, configs[1])
        out = scaled_matmul(gq, yq, gs, ys, preferred_element_type=pet)
    else:
        out = lax.convert_element_type(matmul(g3, transpose(y3, (0, 2, 1))), pet)
    shape = _dot_out_shape(get_aval(g).shape, get_aval(y).shape, tuple(ans_y),
                           tuple(ans_batch), tuple(y_kept), tuple(yb))
    return transpose(reshape(out, shape), tuple(int(i) for i in out_axes))


def _scaled_dot_general_fn(dn, pet, configs):
    from tracer.custom_derivatives import custom_vjp

    @custom_vjp
    def f(lhs, rhs):
        return _scaled_dot_impl(lhs, rhs, dn, pet, configs)

    def fwd(lhs, rhs):
        return _scaled_dot_impl(lhs, rhs, dn, pet, configs), (lhs, rhs)

    def bwd(res, g):
        lhs, rhs = res
        (lc, rc), (lb, rb) = dn
        gl = _scaled_transpose_lhs(g, lhs, rhs, dn, pet, [configs[2], configs[1]])
        gr = _scaled_transpose_lhs(g, rhs, lhs, ((rc, lc), (rb, lb)), pet,
                                   [configs[2], configs[0]], swap_ans=True)
        if configs[2].mode == "nvfp4":
            # straight-through estimator: entries clipped by the forward quantization
            # get no gradient (jax.nn's rule)
            big = float(dtypes.finfo(configs[0].data_type).max) * \
                float(dtypes.finfo(configs[0].scale_type).max)
            gl = _red_where(_uf.abs(lhs) <= configs[0].global_scale * big, gl, 0)
            gr = _red_where(_uf.abs(rhs) <= configs[1].global_scale * big, gr, 0)
        return lax.convert_element_type(gl, get_aval(lhs).dtype), \
            lax.convert_element_type(gr, get_aval(rhs).dtype)

    f.defvjp(fwd, bwd)
    return f


def scaled_dot_general(lhs, rhs, dimension_numbers, preferred_element_type=np.float32,
                       configs=None, implementation=None):
    """``lax.dot_general`` with block-scaled quantization (``jax.nn.scaled_dot_general``):
    each operand is quantized along its contracting dimensions per ``configs[0]`` /
    ``configs[1]`` (``get_scaled_dot_general_config``: mxfp8 or nvfp4) and the quantized
    values are multiplied by ``scaled_matmul``; the gradient quantizes the cotangent per
    ``configs[2]``. ``configs=None`` is a plain ``dot_general``. ``preferred_element_type``
    is float32, bfloat16 or float16; ``implementation`` is ignored (as in JAX)."""
    pet = dtypes.canonicalize_dtype(preferred_element_type)
    if configs is None:
        return lax.dot_general(lhs, rhs, dimension_numbers, preferred_element_type=pet)
    if pet not in (dtypes.float32, dtypes.bfloat16, dtypes.float16):
        raise TypeError(f"scaled_dot_general: preferred_element_type must be float32, "
                        f"bfloat16 or float16, got {pet.name}")
    if len(configs) != 3:
        raise ValueError(f"scaled_dot_general: configs must list 3 BlockScaleConfigs (lhs, "
                         f"rhs, gradient), got {len(configs)}")
    lhs, rhs = as_operand(lhs), as_operand(rhs)
    (lc, rc), (lb, rb) = dimension_numbers
    dn = ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb)))
    squeeze = not dn[1][0]
    if squeeze:      # a batch dimension of 1, as jax.nn adds one
        from tracer.numpy.manipulation import expand_dims
        ln, rn = get_aval(lhs).ndim, get_aval(rhs).ndim
        lhs, rhs = expand_dims(lhs, ln), expand_dims(rhs, rn)
        dn = (dn[0], ((ln,), (rn,)))
    out = _scaled_dot_general_fn(dn, pet, tuple(configs))(lhs, rhs)
    if squeeze:
        from tracer.numpy.manipulation import squeeze as _sq
        out = _sq(out, 0)
    return out
