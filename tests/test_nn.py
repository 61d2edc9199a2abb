"""tracer.nn against NumPy/SciPy formulas: values over shapes and dtypes, stability at
extreme inputs (softplus, log_sigmoid, logsumexp with infinite rows), JAX's derivatives at
the kinks, masks (where=), one_hot, standardize, attention; grad / vmap / jit samples."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.special as sps

import tracer
import tracer.nn as nn
import tracer.numpy as tnp
from tracer.test_util import check_grads, check_jit, check_vmap

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


REF = {
    "relu": lambda x: np.maximum(x, 0),
    "relu6": lambda x: np.minimum(np.maximum(x, 0), 6),
    "sigmoid": sps.expit,
    "log_sigmoid": lambda x: -np.logaddexp(0, -x),
    "softplus": lambda x: np.logaddexp(x, 0),
    "sparse_plus": lambda x: np.where(x <= -1, 0, np.where(x >= 1, x, (x + 1) ** 2 / 4)),
    "sparse_sigmoid": lambda x: 0.5 * np.clip(x + 1, 0, 2),
    "soft_sign": lambda x: x / (np.abs(x) + 1),
    "silu": lambda x: x * sps.expit(x), "swish": lambda x: x * sps.expit(x),
    "hard_sigmoid": lambda x: np.minimum(np.maximum(x + 3, 0), 6) / 6,
    "hard_silu": lambda x: x * np.minimum(np.maximum(x + 3, 0), 6) / 6,
    "hard_swish": lambda x: x * np.minimum(np.maximum(x + 3, 0), 6) / 6,
    "hard_tanh": lambda x: np.clip(x, -1, 1),
    "leaky_relu": lambda x: np.where(x >= 0, x, 0.01 * x),
    "elu": lambda x: np.where(x > 0, x, np.expm1(x)),
    "selu": lambda x: SELU_SCALE * np.where(x > 0, x, SELU_ALPHA * np.expm1(x)),
    "celu": lambda x: np.maximum(x, 0) + np.expm1(np.minimum(x, 0)),
    "gelu": _gelu_tanh,
    "mish": lambda x: x * np.tanh(np.logaddexp(x, 0)),
    "squareplus": lambda x: (x + np.sqrt(x * x + 4)) / 2,
    "identity": lambda x: x, "tanh": np.tanh,
}


@pytest.mark.parametrize("name", sorted(REF))
def test_activation_values(name, rng):
    for dt, tol in ((np.float64, 1e-12), (np.float32, 2e-6)):
        for shape in ((), (7,), (2, 3)):
            x = rng.uniform(-8, 8, shape).astype(dt)
            got = getattr(nn, name)(x)
            want = REF[name](x.astype(np.float64))
            assert np.asarray(got).dtype == dt
            np.testing.assert_allclose(np.asarray(got), want, rtol=tol, atol=tol)
    edges = np.array([-1.0, 0.0, 1.0, 3.0, -3.0, 6.0, -6.0])
    np.testing.assert_allclose(np.asarray(getattr(nn, name)(edges)), REF[name](edges),
                               rtol=1e-12, atol=1e-15)


def test_gelu_exact_and_log1mexp():
    x = np.linspace(-5, 5, 11)
    np.testing.assert_allclose(np.asarray(nn.gelu(x, approximate=False)),
                               x * 0.5 * (1 + sps.erf(x / np.sqrt(2))), rtol=1e-12, atol=1e-15)
    y = np.array([1e-10, 0.1, 0.6931, 0.7, 5.0, 50.0])
    # The reference needs both forms too: log(-expm1(-y)) rounds to 0 for large y.
    want = np.where(y < np.log(2), np.log(-np.expm1(-y)), np.log1p(-np.exp(-y)))
    np.testing.assert_allclose(np.asarray(nn.log1mexp(y)), want, rtol=1e-12)
    assert float(nn.log1mexp(50.0)) == pytest.approx(-np.exp(-50.0), rel=1e-12)


def test_stability_at_extremes():
    big = np.array([-1000.0, -50.0, 0.0, 50.0, 1000.0])
    np.testing.assert_allclose(np.asarray(nn.softplus(big)), np.logaddexp(big, 0), rtol=1e-15)
    np.testing.assert_allclose(np.asarray(nn.log_sigmoid(big)), -np.logaddexp(0, -big),
                               rtol=1e-15)
    assert np.all(np.isfinite(np.asarray(nn.log_sigmoid(big))))
    assert float(tracer.grad(nn.softplus)(1000.0)) == 1.0
    assert float(tracer.grad(nn.log_sigmoid)(-1000.0)) == 1.0
    assert float(tracer.grad(nn.softplus)(-1000.0)) == 0.0
    assert np.isfinite(float(tracer.grad(nn.mish)(-1000.0)))
    assert float(tracer.grad(nn.elu)(-1000.0)) == 0.0
    np.testing.assert_array_equal(np.asarray(nn.sigmoid(big)), sps.expit(big))


@pytest.mark.parametrize("name,x,want", [
    ("relu", 0.0, 0.0), ("relu6", 0.0, 0.0), ("relu6", 6.0, 0.0), ("relu6", 3.0, 1.0),
    ("hard_tanh", 1.0, 1.0), ("hard_tanh", -1.0, 1.0), ("leaky_relu", 0.0, 1.0),
    ("elu", 0.0, 1.0), ("celu", 0.0, 1.0), ("sparse_plus", 1.0, 1.0),
    ("sparse_sigmoid", 1.0, 0.25), ("selu", 0.0, SELU_SCALE * SELU_ALPHA),
])
def test_derivatives_at_kinks_match_jax(name, x, want):
    assert float(tracer.grad(getattr(nn, name))(x)) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("name", ["relu", "relu6"])
def test_relu_keeps_nan_and_gives_positive_zero_as_jax(name):
    """Recorded from JAX 0.10.2 (x64): jax.nn.relu / relu6 of NaN is NaN (maximum's
    propagation), of -0.0 is +0.0; their derivative at NaN is 0; eager, jit, vmap(grad)."""
    x = np.array([np.nan, -0.0, 0.0, -1.0, 2.0, 7.0, np.inf, -np.inf], np.float32)
    want = {"relu": [np.nan, 0, 0, 0, 2, 7, np.inf, 0], "relu6": [np.nan, 0, 0, 0, 2, 6, 6, 0]}
    dwant = {"relu": [0, 0, 0, 0, 1, 1, 1, 0], "relu6": [0, 0, 0, 0, 1, 0, 0, 0]}
    f = getattr(nn, name)
    for got in (f(x), tracer.jit(f)(x)):
        got = np.asarray(got)
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, np.array(want[name], np.float32))
        assert not np.signbit(got).any()
    np.testing.assert_array_equal(np.asarray(tracer.vmap(tracer.grad(f))(x)), dwant[name])
    np.testing.assert_array_equal(np.asarray(f(np.array([1, -2, 3], np.int32))),
                                  [1, 0, 3])


@pytest.mark.parametrize("name", ["sigmoid", "log_sigmoid", "softplus", "silu", "elu",
                                  "selu", "celu", "gelu", "mish", "soft_sign", "squareplus",
                                  "sparse_plus", "hard_silu", "log1mexp"])
def test_activation_grads(name, rng):
    x = rng.uniform(0.2, 3, 4) * np.array([1, -1, 1, -1])
    if name == "log1mexp":
        x = np.abs(x) + 0.1
    check_grads(getattr(nn, name), (x,), order=2, atol=1e-5, rtol=1e-5)


def _np_softmax(x, axis):
    return sps.softmax(x, axis=axis)


def test_softmax_family(rng):
    x = rng.standard_normal((3, 4, 5))
    for axis in (-1, 0, (1, 2)):
        np.testing.assert_allclose(np.asarray(nn.softmax(x, axis=axis)), _np_softmax(x, axis),
                                   rtol=1e-12)
        np.testing.assert_allclose(np.asarray(nn.log_softmax(x, axis=axis)),
                                   sps.log_softmax(x, axis=axis), rtol=1e-12)
        np.testing.assert_allclose(np.asarray(nn.logsumexp(x, axis=axis)),
                                   sps.logsumexp(x, axis=axis), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(nn.logsumexp(x, axis=1, keepdims=True)),
                               sps.logsumexp(x, axis=1, keepdims=True), rtol=1e-12)
    b = rng.standard_normal((3, 4, 5))
    val, sign = nn.logsumexp(x, axis=-1, b=b, return_sign=True)
    wv, ws = sps.logsumexp(x, axis=-1, b=b, return_sign=True)
    np.testing.assert_allclose(np.asarray(val), wv, rtol=1e-10)
    np.testing.assert_array_equal(np.asarray(sign), ws)
    no_sign = np.asarray(nn.logsumexp(x, axis=-1, b=b))
    assert np.all(np.isnan(no_sign[ws < 0])) and np.allclose(no_sign[ws > 0], wv[ws > 0])
    np.testing.assert_allclose(np.asarray(nn.logmeanexp(x, axis=0)),
                               sps.logsumexp(x, axis=0) - np.log(3), rtol=1e-12)
    big = np.array([1000.0, 1000.0, -1000.0])
    np.testing.assert_allclose(np.asarray(nn.softmax(big)), [0.5, 0.5, 0.0])
    np.testing.assert_allclose(np.asarray(nn.logsumexp(big)), 1000 + np.log(2), rtol=1e-15)


def test_infinite_rows_like_jax():
    x = np.array([[-np.inf, -np.inf], [1.0, 2.0], [np.inf, 1.0], [-np.inf, 0.0]])
    lse = np.asarray(nn.logsumexp(x, axis=1))
    np.testing.assert_array_equal(lse[[0, 2]], [-np.inf, np.inf])
    assert lse[3] == 0.0
    g = np.asarray(tracer.grad(lambda x: tnp.sum(nn.logsumexp(x, axis=1)[1:2]))(x))
    np.testing.assert_allclose(g[1], sps.softmax([1.0, 2.0]))
    # A finite maximum with -inf entries: finite gradients, 0 for the -inf entry.
    np.testing.assert_array_equal(np.asarray(tracer.grad(nn.logsumexp)(x[3])), [0.0, 1.0])
    np.testing.assert_array_equal(np.asarray(nn.softmax(x[3])), [0.0, 1.0])
    jac = np.asarray(tracer.jacfwd(nn.softmax)(x[3]))
    assert np.all(np.isfinite(jac)) and np.all(jac == 0)
    # Rows that are all -inf (or hold +inf) are NaN for softmax and log_softmax, as in JAX.
    sm = np.asarray(nn.softmax(x, axis=1))
    assert np.all(np.isnan(sm[[0, 2]]))
    assert np.all(np.isnan(np.asarray(nn.log_softmax(x, axis=1))[[0, 2]]))


def test_where_masks(rng):
    x = rng.standard_normal((2, 5))
    w = rng.random((2, 5)) < 0.6
    w[:, 0] = True
    sm = np.asarray(nn.softmax(x, where=w))
    assert np.all(sm[~w] == 0)
    for i in range(2):
        np.testing.assert_allclose(sm[i, w[i]], sps.softmax(x[i, w[i]]), rtol=1e-12)
        np.testing.assert_allclose(np.asarray(nn.logsumexp(x, axis=1, where=w))[i],
                                   sps.logsumexp(x[i, w[i]]), rtol=1e-12)
    ls = np.asarray(nn.log_softmax(x, where=w))
    assert np.all(ls[~w] == -np.inf)
    np.testing.assert_allclose(np.asarray(nn.logmeanexp(x, axis=1, where=w)),
                               [sps.logsumexp(x[i, w[i]]) - np.log(w[i].sum()) for i in range(2)],
                               rtol=1e-12)
    check_grads(lambda x: nn.softmax(x, where=w), (x,), order=1)


def test_glu_one_hot_standardize(rng):
    x = rng.standard_normal((3, 4))
    np.testing.assert_allclose(np.asarray(nn.glu(x)), x[:, :2] * sps.expit(x[:, 2:]),
                               rtol=1e-12)
    np.testing.assert_allclose(np.asarray(nn.glu(x[:2], axis=0)), x[:1] * sps.expit(x[1:2]))
    with pytest.raises(ValueError, match="even"):
        nn.glu(x[:3], axis=0)
    labels = np.array([[0, 2], [3, -1]])
    oh = np.asarray(nn.one_hot(labels, 3))
    np.testing.assert_array_equal(oh, (labels[..., None] == np.arange(3)).astype(float))
    assert oh.dtype == np.float64
    oh0 = np.asarray(nn.one_hot(labels, 3, axis=0, dtype=np.int32))
    np.testing.assert_array_equal(oh0, np.moveaxis(oh, -1, 0).astype(np.int32))
    for alg in ("fast", "stable"):
        s = np.asarray(nn.standardize(x, axis=1, algorithm=alg))
        want = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)
        np.testing.assert_allclose(s, want, rtol=1e-9)
    s = np.asarray(nn.standardize(x, axis=0, mean=0.0, variance=1.0, epsilon=0.0))
    np.testing.assert_allclose(s, x)
    check_grads(lambda x: nn.standardize(x, axis=1), (x,), order=1, atol=1e-5, rtol=1e-5)


def _attention_ref(q, k, v, bias=None, mask=None, causal=False, scale=None):
    B, T, N, H = q.shape
    S, K = k.shape[1], k.shape[2]
    G = N // K
    kk = np.repeat(k, G, axis=2)
    vv = np.repeat(v, G, axis=2)
    logits = np.einsum("btnh,bsnh->bnts", q, kk) * (1 / np.sqrt(H) if scale is None else scale)
    if bias is not None:
        logits = logits + bias
    keep = np.ones(logits.shape, bool)
    if mask is not None:
        keep &= np.broadcast_to(mask, logits.shape)
    if causal:
        keep &= np.tril(np.ones((T, S), bool))
    logits = np.where(keep, logits, np.finfo(logits.dtype).min)
    p = sps.softmax(logits, axis=-1)
    return np.einsum("bnts,bsnh->btnh", p, vv)


def test_dot_product_attention(rng):
    B, T, S, N, K, H = 2, 3, 4, 4, 2, 5
    q = rng.standard_normal((B, T, N, H))
    k = rng.standard_normal((B, S, K, H))
    v = rng.standard_normal((B, S, K, H))
    bias = rng.standard_normal((1, N, T, S))
    mask = rng.random((B, 1, T, S)) < 0.7
    np.testing.assert_allclose(np.asarray(nn.dot_product_attention(q, k, v)),
                               _attention_ref(q, k, v), rtol=1e-10)
    np.testing.assert_allclose(
        np.asarray(nn.dot_product_attention(q, k, v, bias, mask, scale=0.3)),
        _attention_ref(q, k, v, bias, mask, scale=0.3), rtol=1e-10)
    qc, kc, vc = (rng.standard_normal((B, 4, N, H)) for _ in range(3))
    np.testing.assert_allclose(np.asarray(nn.dot_product_attention(qc, kc, vc, is_causal=True)),
                               _attention_ref(qc, kc, vc, causal=True), rtol=1e-10)
    out, res = nn.dot_product_attention(q[0], k[0], v[0], return_residual=True)
    np.testing.assert_allclose(np.asarray(out), _attention_ref(q[:1], k[:1], v[:1])[0],
                               rtol=1e-10)
    assert res.shape == (N, T)
    lens = np.array([2, 4])
    got = np.asarray(nn.dot_product_attention(q, k, v, key_value_seq_lengths=lens))
    m = np.arange(S)[None, None, None, :] < lens[:, None, None, None]
    np.testing.assert_allclose(got, _attention_ref(q, k, v, mask=m), rtol=1e-10)
    with pytest.raises(ValueError, match="multiple"):
        nn.dot_product_attention(q, k[:, :, :1].repeat(3, 2), v[:, :, :1].repeat(3, 2))
    check_grads(lambda q, k, v: nn.dot_product_attention(q, k, v, is_causal=True),
                (q[:1, :2, :2, :2], k[:1, :2, :1, :2], v[:1, :2, :1, :2]), order=1,
                atol=1e-5, rtol=1e-5)


def test_scaled_matmul(rng):
    lhs = rng.standard_normal((2, 3, 8))
    rhs = rng.standard_normal((2, 4, 8))
    ls = rng.uniform(0.5, 2, (2, 3, 2))
    rs = rng.uniform(0.5, 2, (2, 4, 2))
    got = nn.scaled_matmul(lhs, rhs, ls, rs, preferred_element_type=np.float64)
    a = lhs * np.repeat(ls, 4, axis=2)
    b = rhs * np.repeat(rs, 4, axis=2)
    np.testing.assert_allclose(np.asarray(got), np.einsum("bmk,bnk->bmn", a, b), rtol=1e-12)
    assert nn.scaled_matmul(lhs, rhs, ls, rs).dtype == np.float32


@pytest.mark.parametrize("name", ["relu", "gelu", "softmax", "log_softmax", "logsumexp",
                                  "standardize", "one_hot"])
def test_vmap(name, rng):
    if name == "one_hot":
        check_vmap(lambda i: nn.one_hot(i, 4), (rng.integers(0, 4, (3, 2)),))
        return
    x = rng.standard_normal((3, 2, 4))
    f = getattr(nn, name)
    if name == "logsumexp":
        f = lambda x: nn.logsumexp(x, axis=-1)  # noqa: E731
    check_vmap(f, (x,))
    check_vmap(f, (x,), in_axes=1, out_axes=1)


def test_jit(rng):
    x = rng.standard_normal((2, 5))
    check_jit(lambda x: (nn.relu(x), nn.log_softmax(x), nn.logsumexp(x, axis=0),
                         nn.gelu(x, approximate=False), nn.one_hot(np.array([1, 3]), 5)), (x,),
              rtol=1e-14, atol=1e-15)


# A row masked out entirely (padding), and an +inf entry masked out; expected from JAX.
_MX = np.array([[1., 2., 3.], [.5, -1., 2.], [np.inf, 0., 1.]])
_MW = np.array([[True, False, True], [False] * 3, [False, True, True]])
_MX_WEIGHTS = np.arange(9.).reshape(3, 3)


def test_softmax_where_masked_rows_are_zero_with_zero_derivatives():
    want = [[0.11920292, 0., 0.88079708], [0., 0., 0.], [0., 0.26894142, 0.73105858]]
    want_grad = [[-0.20998717, 0., 0.20998717], [0., 0., 0.], [0., -0.19661193, 0.19661193]]
    for f in (nn.softmax, tracer.jit(nn.softmax, static_argnames=("axis",))):
        np.testing.assert_allclose(f(_MX, where=_MW), want, atol=1e-8)
    loss = lambda a: tnp.sum(nn.softmax(a, where=_MW) * _MX_WEIGHTS)
    for g in (tracer.grad(loss), tracer.jit(tracer.grad(loss))):
        np.testing.assert_allclose(g(_MX), want_grad, atol=1e-8)
    # per row under vmap, as a Python loop
    rows = tracer.vmap(lambda r, w: nn.softmax(r, where=w))(_MX, _MW)
    np.testing.assert_allclose(rows, want, atol=1e-8)


def test_log_softmax_where_masked_rows_have_zero_derivatives():
    want = [[-2.12692801, -np.inf, -0.12692801], [-np.inf] * 3,
            [-np.inf, -1.31326169, -0.31326169]]
    np.testing.assert_allclose(nn.log_softmax(_MX, where=_MW), want, atol=1e-8)
    loss = lambda a: tnp.sum(tnp.where(_MW, nn.log_softmax(a, where=_MW), 0.0))
    want_grad = [[0.76159416, 0., -0.76159416], [0., 0., 0.], [0., 0.46211716, -0.46211716]]
    for g in (tracer.grad(loss), tracer.jit(tracer.grad(loss))):
        np.testing.assert_allclose(g(_MX), want_grad, atol=1e-8)
    # a loss that reads only the first row: the masked row's derivative is 0, not NaN
    g0 = tracer.grad(lambda a: tnp.sum(nn.log_softmax(a, where=_MW)[0]))(_MX)
    assert np.isfinite(np.asarray(g0)).all()


def test_logsumexp_terms_weighted_zero_take_no_part():
    b = np.array([0., 1., 1.])
    for a0 in (1000., np.inf, np.nan, -np.inf):
        a = np.array([a0, 1., 2.])
        np.testing.assert_allclose(nn.logsumexp(a, b=b), 2.313261687518223, rtol=1e-15)
        np.testing.assert_allclose(sps.logsumexp(a, b=b), 2.313261687518223, rtol=1e-15)
    a = np.array([1000., 1., 2.])
    g = tracer.grad(lambda t: nn.logsumexp(t, b=b))(a)
    np.testing.assert_allclose(g, [0., 0.26894142, 0.73105858], atol=1e-8)
    assert float(nn.logsumexp(a, b=np.zeros(3))) == -np.inf
    np.testing.assert_allclose(tracer.jit(lambda t: nn.logsumexp(t, b=b))(a), 2.313261687518223,
                               rtol=1e-15)


def test_logsumexp_where_masked_infinite_entries_have_zero_derivatives():
    # JAX: [0.2689, 0.7311, 0.0]; the exp of the unmasked inf gave a NaN derivative
    mk = np.array([True, True, False])
    for bad in (np.inf, np.nan):
        x = np.array([0., 1., bad])
        want = [0.26894142, 0.73105858, 0.]
        for g in (tracer.grad(lambda t: nn.logsumexp(t, where=mk)),
                  tracer.jit(tracer.grad(lambda t: nn.logsumexp(t, where=mk)))):
            np.testing.assert_allclose(g(x), want, atol=1e-8)
        np.testing.assert_allclose(nn.logsumexp(x, where=mk), np.log(1 + np.e), rtol=1e-15)
        xs = np.stack([x, x])
        np.testing.assert_allclose(
            tracer.vmap(tracer.grad(lambda t: nn.logsumexp(t, where=mk)))(xs), [want] * 2,
            atol=1e-8)


@pytest.mark.parametrize("call, match", [
    (lambda x: nn.softmax(x, where=np.ones((2, 3))),
     r"nn\.softmax: where must be None or a boolean array; got f64\[2,3\].*mask != 0"),
    (lambda x: nn.log_softmax(x, where=np.ones((2, 3), np.int32)),
     r"nn\.log_softmax: where must be None or a boolean array; got i32\[2,3\]"),
    (lambda x: nn.logsumexp(x, where=np.ones((2, 3))),
     r"logsumexp: where must be None or a boolean array"),
    (lambda x: nn.softmax(x, where=np.ones(4, bool)),
     r"nn\.softmax: where of shape \(4,\) does not broadcast to the input's shape \(2, 3\)"),
    (lambda x: nn.log_softmax(x, axis=0, where=np.ones((3, 3), bool)),
     r"nn\.log_softmax: where of shape \(3, 3\) does not broadcast"),
    (lambda x: nn.logsumexp(x, b=np.ones(4)),
     r"logsumexp: b of shape \(4,\) does not broadcast with a of shape \(2, 3\)"),
])
def test_masks_and_weights_of_the_wrong_kind_are_errors_naming_the_function(call, match):
    """As JAX: a mask must be boolean and broadcast to the input (a float mask used to
    fail inside select_n, a wrong shape inside broadcast_to, without naming the function
    called). Under jit and vmap too."""
    x = np.arange(6.0).reshape(2, 3)
    with pytest.raises(ValueError, match=match):
        call(x)
    with pytest.raises(ValueError, match=match):
        tracer.jit(call)(x)
    with pytest.raises(ValueError, match=match):
        tracer.vmap(call)(np.stack([x, x]))


def test_a_mask_that_broadcasts_and_complex_softmax():
    x = np.array([[1.0, 2.0, 3.0], [0.0, -1.0, 5.0]])
    w = np.array([True, False, True])
    got = np.asarray(nn.softmax(x, where=w))
    e = np.exp(x[:, [0, 2]] - x[:, [0, 2]].max(1, keepdims=True))
    want = np.zeros_like(x)
    want[:, [0, 2]] = e / e.sum(1, keepdims=True)
    np.testing.assert_allclose(got, want, rtol=1e-15)
    with pytest.raises(TypeError, match=r"nn\.softmax: complex input \(c128\[2,3\]\)"):
        nn.softmax(x.astype(complex))
