"""The low-precision types under jit, grad and vmap: ``jit(f)(x)`` equals eager bit for
bit over every recorded edge-value case (these dtypes run as host steps through the
eager impls under jit: no kernel carries them yet); grad gives tangents in the primal's
dtype; vmap equals a loop; a bfloat16 MLP trains under grad and jit, tracking the same
MLP in float32 within bfloat16 tolerance."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import lax
import tracer
import tracer.numpy as tnp
import lowp_cases as L

CASES = L.cases()
BF16 = np.dtype(ml_dtypes.bfloat16)


@pytest.fixture(autouse=True)
def _x32():
    tracer.config.update("enable_x64", False)
    yield
    tracer.config.update("enable_x64", True)


def _same_bits(a, b):
    a, b = np.atleast_1d(np.asarray(a)), np.atleast_1d(np.asarray(b))
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(L.bits(a), L.bits(b))


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_jit_equals_eager_bits(case):
    key, fn, args, _ = case
    assert _same_bits(tracer.jit(fn)(*args), fn(*args)), key


def test_jit_of_a_mixed_program_equals_eager():
    x = np.linspace(-3, 3, 37).astype(BF16)

    def f(x):
        y = tnp.exp(x) * x + 1.0
        z = lax.convert_element_type(y, tnp.float8_e4m3fn)
        w = y.astype(tnp.float32) * 2 + tnp.sum(y).astype(tnp.float32)
        i = lax.convert_element_type(x, tnp.int4) + tnp.int4(3)
        return tnp.sum(y), w, z, i, tnp.cumsum(y), tnp.max(y), y.reshape(37, 1).T

    for a, b in zip(f(x), tracer.jit(f)(x)):
        assert _same_bits(a, b)
    text = tracer.jit(f).lower(x).as_text()
    assert "host_step exp" in text and "host_step convert_element_type" in text


def test_jit_scan_and_while_over_bf16_carries():
    def f(x):
        def body(c, v):
            return c * 0.5 + v, c
        return lax.scan(body, x[0], x)

    x = np.linspace(0, 1, 9).astype(BF16)
    for a, b in zip(tracer.tree_util.tree_leaves(f(x)),
                    tracer.tree_util.tree_leaves(tracer.jit(f)(x))):
        assert _same_bits(a, b)
    g = lambda v: lax.while_loop(lambda c: c < 100, lambda c: c * 3, v)  # noqa: E731
    assert _same_bits(tracer.jit(g)(BF16.type(1.1)), g(BF16.type(1.1)))


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1fn",
                                  "float8_e4m3fnuz"])
def test_grad_tangents_in_the_primal_dtype(name):
    dt = L.dtype_of(name)
    x = np.array([0.5, 1.0, 1.5], np.float32).astype(dt)
    f = lambda v: tnp.sum(v * v * 0.5 + tnp.sin(v))  # noqa: E731
    g = tracer.grad(f)(x)
    assert g.dtype == dt
    # d/dx = x + cos(x), each step rounded in the format
    want = (x.astype(np.float32) + np.cos(x.astype(np.float32))).astype(dt).astype(np.float32)
    np.testing.assert_allclose(np.asarray(g).astype(np.float32), want,
                               rtol=2 * float(ml_dtypes.finfo(dt).eps))
    assert _same_bits(tracer.jit(tracer.grad(f))(x), g)
    _, t = tracer.jvp(lambda v: tnp.exp(v), (x,), (np.ones(3, dt),))
    assert t.dtype == dt


def test_grad_of_integer_inputs_is_float0():
    x = np.array([1, 2], ml_dtypes.int4)
    g = tracer.grad(lambda i, v: tnp.sum(i.astype(tnp.float32) * v), argnums=(0, 1),
                    allow_int=True)(x, np.float32([1, 1]))
    assert g[0].dtype == tracer.dtypes.float0 and g[1].dtype == np.float32


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "int4", "uint2"])
def test_vmap_equals_a_loop(name):
    dt = L.dtype_of(name)
    x = np.resize(L.from_bits(L.DATA[f"{name}/x"], dt), 16).reshape(4, 4)
    if name in L.FLOATS:
        f = lambda r: lax.mul(lax.add(r, r[::-1]), r) - tnp.sum(r)  # noqa: E731
    else:
        f = lambda r: lax.bitwise_xor(lax.add(r, r[::-1]), lax.shift_left(r, r))  # noqa: E731
    looped = np.stack([np.asarray(f(r)) for r in x])
    assert _same_bits(tracer.vmap(f)(x), looped)
    assert _same_bits(tracer.jit(tracer.vmap(f))(x), looped)


def _mlp_params(rng, dt):
    sizes = [(8, 32), (32, 32), (32, 1)]
    return [(rng.normal(0, 1 / np.sqrt(m), (m, n)).astype(np.float32).astype(dt),
             np.zeros(n, np.float32).astype(dt)) for m, n in sizes]


def _loss(params, x, y):
    h = x
    for i, (w, b) in enumerate(params):
        h = tnp.dot(h, w) + b
        if i < len(params) - 1:
            h = tnp.tanh(h)
    return tnp.mean((h[:, 0] - y) ** 2)


def test_bf16_mlp_trains_tracking_float32():
    rng = np.random.default_rng(0)
    x32 = rng.normal(size=(64, 8)).astype(np.float32)
    y32 = np.sin(x32.sum(1)).astype(np.float32)
    p32 = _mlp_params(rng, np.float32)
    pbf = [(w.astype(BF16), b.astype(BF16)) for w, b in p32]
    xbf, ybf = x32.astype(BF16), y32.astype(BF16)

    def step_fn(params, x, y):
        loss, g = tracer.value_and_grad(_loss)(params, x, y)
        lr = 0.1
        return [(w - lr * gw, b - lr * gb) for (w, b), (gw, gb) in zip(params, g)], loss

    step = tracer.jit(step_fn)

    l32, lbf = [], []
    for _ in range(8):
        p32, a = step(p32, x32, y32)
        pbf, b = step(pbf, xbf, ybf)
        l32.append(float(a))
        lbf.append(float(b))
    assert all(w.dtype == BF16 and b.dtype == BF16 for w, b in pbf)
    # training makes progress in both, and bf16 tracks f32 within bf16's resolution
    assert l32[-1] < 0.8 * l32[0] and lbf[-1] < 0.8 * lbf[0]
    np.testing.assert_allclose(lbf, l32, rtol=0.05)
    # the jitted step equals the eager one bit for bit
    for a, b in zip(tracer.tree_util.tree_leaves(step_fn(pbf, xbf, ybf)),
                    tracer.tree_util.tree_leaves(step(pbf, xbf, ybf))):
        assert _same_bits(a, b)


def test_grad_through_preferred_element_type_products():
    rng = np.random.default_rng(3)
    a = rng.normal(size=(4, 5)).astype(np.float32).astype(BF16)
    dn = (((1,), (0,)), ((), ()))
    f = lambda x, y: tnp.sum(lax.dot_general(x, y, dn, preferred_element_type=np.float32))  # noqa: E731
    gx, gy = tracer.grad(f, argnums=(0, 1))(a, a.T.copy())
    assert gx.dtype == BF16 and gy.dtype == BF16
    # d/dx sum(x @ y) = row sums of y, broadcast; here y = a.T
    want = np.broadcast_to(a.astype(np.float32).sum(0), (4, 5)).astype(BF16)
    np.testing.assert_array_equal(np.asarray(gx).view(np.uint16), want.view(np.uint16))
    lhs, rhs = a.reshape(1, 1, 4, 5), np.ones((1, 1, 2, 2), np.float32).astype(BF16)
    h = lambda l, r: tnp.sum(lax.conv_general_dilated(  # noqa: E731
        l, r, (1, 1), "VALID", preferred_element_type=np.float32))
    gl, gr = tracer.grad(h, argnums=(0, 1))(lhs, rhs)
    assert gl.dtype == BF16 and gr.dtype == BF16
    # d/drhs[0,0,0,0] = the sum of the lhs window it meets: lhs[:3, :4]
    assert float(np.asarray(gr)[0, 0, 0, 0]) == float(
        np.float32(a.astype(np.float32)[:3, :4].sum()).astype(BF16))
    assert _same_bits(tracer.jit(tracer.grad(h, argnums=(0, 1)))(lhs, rhs)[1], gr)


def test_vmap_of_cond_and_higher_derivatives():
    a = np.random.default_rng(4).normal(size=(4, 5)).astype(np.float32).astype(BF16)
    c = lambda x: lax.cond(x.sum() > 0, lambda v: v * 2, lambda v: v - 1, x)  # noqa: E731
    assert _same_bits(tracer.vmap(c)(a), np.stack([np.asarray(c(r)) for r in a]))
    assert tracer.hessian(lambda v: tnp.sum(v ** 3))(a[0]).dtype == BF16
