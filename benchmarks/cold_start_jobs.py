"""The cold-start jobs: whole user programs, each written once against a JAX-shaped
namespace ``B`` (``tracer`` or ``jax``), so the two systems run the same source.

A job is ``fn(B, n_calls) -> result`` that builds its inputs with NumPy, makes its jitted
functions, calls them ``n_calls`` times and returns the last result (the runner blocks on
it). Only ``benchmarks/cold_start.py`` imports this module, inside the fresh process of
one job. ``B`` offers ``jit``, ``grad``, ``value_and_grad``, ``vmap``, ``numpy``, ``lax``,
``nn``, ``random``, ``scipy.linalg`` and ``tree_util``.
"""
from __future__ import annotations

import numpy as np


def _f32(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


# ------------------------------------- the benchmark workloads ------------------------------

def mlp_train_step(B, n):
    jnp = B.numpy
    rng = np.random.default_rng(4)
    sizes = (784, 512, 512, 10)
    params = [(_f32(rng, m, k, scale=1 / np.sqrt(m)), np.zeros(k, np.float32))
              for m, k in zip(sizes[:-1], sizes[1:])]
    x = _f32(rng, 128, 784)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 128)]

    def loss(params, x, y):
        h = x
        for i, (w, b) in enumerate(params):
            h = h @ w + b
            if i < len(params) - 1:
                h = jnp.maximum(h, 0.0)
        return -jnp.mean(jnp.sum(y * B.nn.log_softmax(h), axis=1))

    @B.jit
    def step(params, x, y):
        l, g = B.value_and_grad(loss)(params, x, y)
        return B.tree_util.tree_map(lambda p, d: p - 0.01 * d, params, g), l

    for _ in range(n):
        params, l = step(params, x, y)
    return l


def scan_rnn(B, n):
    jnp, lax = B.numpy, B.lax
    rng = np.random.default_rng(7)
    w, u = _f32(rng, 128, 128, scale=1 / np.sqrt(128)), _f32(rng, 128, 32, scale=1 / np.sqrt(32))
    xs, h0 = _f32(rng, 1000, 32), np.zeros(128, np.float32)

    def loss(w, u, xs, h0):
        h, _ = lax.scan(lambda h, x: (jnp.tanh(w @ h + u @ x), None), h0, xs)
        return jnp.sum(h)

    f = B.jit(B.value_and_grad(loss, argnums=(0, 1)))
    for _ in range(n):
        out = f(w, u, xs, h0)
    return out


def while_ode(B, n):
    jnp, lax = B.numpy, B.lax
    dt = 0.001

    def lorenz(s):
        x, y, z = s[0], s[1], s[2]
        return jnp.stack([10.0 * (y - x), x * (28.0 - z) - y, x * y - (8.0 / 3.0) * z])

    def rk4(i, s):
        k1 = lorenz(s)
        k2 = lorenz(s + dt / 2 * k1)
        k3 = lorenz(s + dt / 2 * k2)
        k4 = lorenz(s + dt * k3)
        return s + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)

    f = B.jit(lambda s: lax.fori_loop(0, 10000, rk4, s))
    s = np.array([1.0, 1.0, 1.0])
    for _ in range(n):
        out = f(s)
    return out


def softmax_rows(B, n):
    jnp = B.numpy
    x = _f32(np.random.default_rng(1), 4096, 4096)

    @B.jit
    def softmax(x):
        e = jnp.exp(x - jnp.max(x, axis=1, keepdims=True))
        return e / jnp.sum(e, axis=1, keepdims=True)

    for _ in range(n):
        out = softmax(x)
    return out


def per_example_grads(B, n):
    jnp = B.numpy
    rng = np.random.default_rng(5)
    params = (_f32(rng, 512, 64, scale=1 / 22.6), np.zeros(64, np.float32),
              _f32(rng, 64, 1, scale=1 / 8), np.zeros(1, np.float32))
    x, y = _f32(rng, 256, 512), _f32(rng, 256)

    def loss(params, x, y):
        w1, b1, w2, b2 = params
        return jnp.sum((jnp.tanh(x @ w1 + b1) @ w2 + b2 - y) ** 2)

    f = B.jit(B.vmap(B.grad(loss), in_axes=(None, 0, 0)))
    for _ in range(n):
        out = f(params, x, y)
    return out


def conv2d(B, n):
    jnp, lax = B.numpy, B.lax
    rng = np.random.default_rng(11)
    x, w = _f32(rng, 32, 28, 28, 8), _f32(rng, 3, 3, 8, 16, scale=1 / 8)

    def loss(x, w):
        y = lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jnp.sum(B.nn.relu(y))

    f = B.jit(B.value_and_grad(loss, argnums=(0, 1)))
    for _ in range(n):
        out = f(x, w)
    return out


def logsumexp_grad(B, n):
    jnp = B.numpy
    rng = np.random.default_rng(2)
    a, w = _f32(rng, 4096, 1024), _f32(rng, 1024, 128, scale=1 / 32)

    def loss(w, a):
        z = a @ w
        m = B.lax.stop_gradient(jnp.max(z, axis=1, keepdims=True))
        return jnp.sum(jnp.log(jnp.sum(jnp.exp(z - m), axis=1)) + m[:, 0])

    f = B.jit(B.grad(loss))
    for _ in range(n):
        out = f(w, a)
    return out


# ------------------------------------- realistic programs -----------------------------------

def gp_fit(B, n):
    """Gaussian-process regression: RBF kernel hyperparameters fitted by Adam on the
    negative log marginal likelihood (Cholesky, triangular solves, grad over a dict)."""
    jnp = B.numpy
    sl = B.scipy.linalg
    rng = np.random.default_rng(3)
    xs = np.sort(rng.uniform(-3, 3, 200))[:, None]
    ys = np.sin(2 * xs[:, 0]) + 0.1 * rng.standard_normal(200)

    def nll(p, x, y):
        ls, amp, noise = jnp.exp(p["log_ls"]), jnp.exp(p["log_amp"]), jnp.exp(p["log_noise"])
        d2 = jnp.sum((x[:, None, :] - x[None, :, :]) ** 2, axis=-1)
        k = amp * jnp.exp(-0.5 * d2 / ls ** 2) + (noise + 1e-6) * jnp.eye(x.shape[0])
        c = jnp.linalg.cholesky(k)
        alpha = sl.solve_triangular(c, y, lower=True)
        return 0.5 * jnp.sum(alpha ** 2) + jnp.sum(jnp.log(jnp.diagonal(c)))

    @B.jit
    def step(p, m, v, t):
        l, g = B.value_and_grad(nll)(p, xs, ys)
        m = B.tree_util.tree_map(lambda m, g: 0.9 * m + 0.1 * g, m, g)
        v = B.tree_util.tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
        p = B.tree_util.tree_map(
            lambda p, m, v: p - 0.05 * (m / (1 - 0.9 ** t)) / (jnp.sqrt(v / (1 - 0.999 ** t)) + 1e-8),
            p, m, v)
        return p, m, v, l

    p = {"log_ls": 0.0, "log_amp": 0.0, "log_noise": -2.0}
    m = {k: 0.0 for k in p}
    v = {k: 0.0 for k in p}
    for t in range(1, n + 1):
        p, m, v, l = step(p, m, v, float(t))
    return l


def gru_scan(B, n):
    """A GRU language-model-style regression over 100 steps, trained by SGD with scan."""
    jnp, lax = B.numpy, B.lax
    rng = np.random.default_rng(8)
    h, d, steps = 64, 16, 100
    params = {k: _f32(rng, h, h + d, scale=1 / np.sqrt(h + d)) for k in ("wz", "wr", "wh")}
    params["wo"] = _f32(rng, 1, h, scale=1 / np.sqrt(h))
    xs, ys = _f32(rng, steps, 8, d), _f32(rng, steps, 8)

    def cell(p, hprev, x):
        hx = jnp.concatenate([hprev, x], axis=-1)
        z = B.nn.sigmoid(hx @ p["wz"].T)
        r = B.nn.sigmoid(hx @ p["wr"].T)
        hc = jnp.tanh(jnp.concatenate([r * hprev, x], axis=-1) @ p["wh"].T)
        return (1 - z) * hprev + z * hc

    def loss(p, xs, ys):
        def body(hprev, xy):
            x, y = xy
            hnew = cell(p, hprev, x)
            return hnew, jnp.mean((hnew @ p["wo"].T)[:, 0] - y) ** 2
        _, errs = lax.scan(body, jnp.zeros((8, h), jnp.float32), (xs, ys))
        return jnp.mean(errs)

    @B.jit
    def step(p):
        l, g = B.value_and_grad(loss)(p, xs, ys)
        return B.tree_util.tree_map(lambda a, b: a - 0.1 * b, p, g), l

    for _ in range(n):
        params, l = step(params)
    return l


def attention_adam(B, n):
    """One self-attention block with a residual MLP, trained with Adam on a regression."""
    jnp = B.numpy
    rng = np.random.default_rng(9)
    t, d = 64, 32
    p = {"wq": _f32(rng, d, d, scale=d ** -0.5), "wk": _f32(rng, d, d, scale=d ** -0.5),
         "wv": _f32(rng, d, d, scale=d ** -0.5), "w1": _f32(rng, d, 4 * d, scale=d ** -0.5),
         "w2": _f32(rng, 4 * d, d, scale=(4 * d) ** -0.5)}
    x, y = _f32(rng, 16, t, d), _f32(rng, 16, t, d)

    def block(p, x):
        q, k, v = x @ p["wq"], x @ p["wk"], x @ p["wv"]
        att = B.nn.softmax(jnp.einsum("btd,bsd->bts", q, k) / np.sqrt(d), axis=-1)
        h = x + jnp.einsum("bts,bsd->btd", att, v)
        h = (h - jnp.mean(h, -1, keepdims=True)) / jnp.sqrt(jnp.var(h, -1, keepdims=True) + 1e-5)
        return h + B.nn.gelu(h @ p["w1"]) @ p["w2"]

    def loss(p):
        return jnp.mean((block(p, x) - y) ** 2)

    @B.jit
    def step(p, m, v, t):
        l, g = B.value_and_grad(loss)(p)
        m = B.tree_util.tree_map(lambda m, g: 0.9 * m + 0.1 * g, m, g)
        v = B.tree_util.tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
        p = B.tree_util.tree_map(
            lambda p, m, v: p - 1e-3 * (m / (1 - 0.9 ** t)) / (jnp.sqrt(v / (1 - 0.999 ** t)) + 1e-8),
            p, m, v)
        return p, m, v, l

    m = B.tree_util.tree_map(np.zeros_like, p)
    v = B.tree_util.tree_map(np.zeros_like, p)
    for i in range(1, n + 1):
        p, m, v, l = step(p, m, v, np.float32(i))
    return l


def nbody(B, n):
    """A gravitational n-body simulation: 64 bodies, 200 leapfrog steps in fori_loop."""
    jnp, lax = B.numpy, B.lax
    rng = np.random.default_rng(10)
    pos, vel = rng.standard_normal((64, 3)), 0.1 * rng.standard_normal((64, 3))
    mass = rng.uniform(0.5, 1.5, 64)

    def accel(x):
        d = x[None, :, :] - x[:, None, :]
        r2 = jnp.sum(d * d, axis=-1) + 1e-2
        return jnp.sum(mass[None, :, None] * d * r2[:, :, None] ** -1.5, axis=1)

    def leapfrog(i, state):
        x, v = state
        v = v + 0.0005 * accel(x)
        x = x + 0.001 * v
        return x, v + 0.0005 * accel(x)

    f = B.jit(lambda x, v: lax.fori_loop(0, 200, leapfrog, (x, v)))
    for _ in range(n):
        out = f(pos, vel)
    return out


def cnn_digits(B, n):
    """A convolution + max-pool network on 8x8 digits (scikit-learn's, or random stand-ins
    when scikit-learn is absent), trained by SGD."""
    jnp, lax = B.numpy, B.lax
    rng = np.random.default_rng(12)
    try:
        from sklearn.datasets import load_digits
        d = load_digits()
        x = (d.images[:256] / 16.0).astype(np.float32)[..., None]
        y = np.eye(10, dtype=np.float32)[d.target[:256]]
    except ImportError:
        x = rng.uniform(0, 1, (256, 8, 8, 1)).astype(np.float32)
        y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 256)]
    p = {"c1": _f32(rng, 3, 3, 1, 8, scale=1 / 3), "c2": _f32(rng, 3, 3, 8, 16, scale=1 / 8.5),
         "w": _f32(rng, 4 * 4 * 16, 10, scale=1 / 16)}
    dn = ("NHWC", "HWIO", "NHWC")

    def forward(p, x):
        h = B.nn.relu(lax.conv_general_dilated(x, p["c1"], (1, 1), "SAME", dimension_numbers=dn))
        h = B.nn.relu(lax.conv_general_dilated(h, p["c2"], (1, 1), "SAME", dimension_numbers=dn))
        h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        return h.reshape(h.shape[0], -1) @ p["w"]

    def loss(p, x, y):
        return -jnp.mean(jnp.sum(y * B.nn.log_softmax(forward(p, x)), axis=-1))

    @B.jit
    def step(p, x, y):
        l, g = B.value_and_grad(loss)(p, x, y)
        return B.tree_util.tree_map(lambda a, b: a - 0.1 * b, p, g), l

    for _ in range(n):
        p, l = step(p, x, y)
    return l


# name -> (job, number of calls)
JOBS = {
    "mlp_train_step": (mlp_train_step, 100),
    "scan_rnn": (scan_rnn, 50),
    "while_ode": (while_ode, 200),
    "softmax_rows": (softmax_rows, 20),
    "per_example_grads": (per_example_grads, 50),
    "conv2d": (conv2d, 100),
    "logsumexp_grad": (logsumexp_grad, 20),
    "gp_fit": (gp_fit, 100),
    "gru_scan": (gru_scan, 100),
    "attention_adam": (attention_adam, 100),
    "nbody": (nbody, 50),
    "cnn_digits": (cnn_digits, 100),
}
