"""The benchmark workloads: each gives a NumPy function, a tracer function (jitted unless
the point is eager dispatch) and their arguments. Sizes follow the jit issue; ``quick``
shrinks them for smoke runs."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

import lax
import tracer
import tracer.numpy as tnp


@dataclass
class Workload:
    numpy_fn: Callable
    tracer_fn: Callable
    args: tuple
    check: Callable | None = None
    note: str = ""
    numba_fn: Callable | None = None     # hand-written Numba (``hand_numba``), where given


def _close(rtol):
    def check(a, b):
        fa = [np.asarray(t) for t in tracer.tree_util.tree_leaves(a)]
        fb = [np.asarray(t) for t in tracer.tree_util.tree_leaves(b)]
        assert len(fa) == len(fb)
        for x, y in zip(fa, fb):
            np.testing.assert_allclose(y, x, rtol=rtol, atol=rtol)
    return check


# ------------------------------------------ elementwise ------------------------------------

def elementwise(quick):
    n = 10 ** 5 if quick else 10 ** 7
    x = np.random.default_rng(0).normal(size=n).astype(np.float32)
    f_np = lambda x: np.sin(x) * np.cos(x) + np.exp(-x * x) / (1 + x * x)
    f = tracer.jit(lambda x: tnp.sin(x) * tnp.cos(x) + tnp.exp(-x * x) / (1 + x * x))
    import hand_numba
    return Workload(f_np, f, (x,), _close(1e-5), "sin(x)*cos(x)+exp(-x*x)/(1+x*x), f32",
                    hand_numba.elementwise)


# ------------------------------------------ softmax ----------------------------------------

def softmax_np(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def softmax_tracer(x):
    e = tnp.exp(x - tnp.max(x, axis=1, keepdims=True))
    return e / tnp.sum(e, axis=1, keepdims=True)


def softmax_rows(quick):
    n = 256 if quick else 4096
    x = np.random.default_rng(1).normal(size=(n, n)).astype(np.float32)
    import hand_numba
    return Workload(softmax_np, tracer.jit(softmax_tracer), (x,), _close(1e-5), "rows, f32",
                    hand_numba.softmax_rows)


# --------------------------------------- logsumexp grad ------------------------------------

def _lse_tracer(z):
    m = tracer.stop_gradient(tnp.max(z, axis=1, keepdims=True))
    return tnp.log(tnp.sum(tnp.exp(z - m), axis=1)) + m[:, 0]


def lse_loss(w, a):
    return tnp.sum(_lse_tracer(a @ w))


def lse_grad_np(w, a):
    z = a @ w
    e = np.exp(z - z.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    return a.T @ p


def logsumexp_grad(quick):
    m, k, n = (256, 128, 32) if quick else (4096, 1024, 128)
    rng = np.random.default_rng(2)
    a = rng.normal(size=(m, k)).astype(np.float32)
    w = (rng.normal(size=(k, n)) / np.sqrt(k)).astype(np.float32)
    return Workload(lse_grad_np, tracer.jit(tracer.grad(lse_loss)), (w, a), _close(1e-3),
                    f"grad_w sum(logsumexp(A@w, 1)), A {m}x{k}, w {k}x{n}")


# ------------------------------------------ matmul -----------------------------------------

def matmul(dtype):
    def make(quick):
        n = 128 if quick else 1024
        rng = np.random.default_rng(3)
        a = rng.normal(size=(n, n)).astype(dtype)
        b = rng.normal(size=(n, n)).astype(dtype)
        return Workload(lambda a, b: a @ b, tracer.jit(lambda a, b: a @ b), (a, b),
                        _close(1e-3), f"{n}^2 {np.dtype(dtype).name}")
    return make


# ------------------------------------------- MLP -------------------------------------------

SIZES = (784, 512, 512, 10)


def mlp_data(batch, seed=4):
    rng = np.random.default_rng(seed)
    params = []
    for m, n in zip(SIZES[:-1], SIZES[1:]):
        params.append(((rng.normal(size=(m, n)) / np.sqrt(m)).astype(np.float32),
                       np.zeros(n, np.float32)))
    x = rng.normal(size=(batch, SIZES[0])).astype(np.float32)
    y = np.eye(SIZES[-1], dtype=np.float32)[rng.integers(0, SIZES[-1], batch)]
    return params, x, y


def _log_softmax(z):
    z = z - tracer.stop_gradient(tnp.max(z, axis=1, keepdims=True))
    return z - tnp.log(tnp.sum(tnp.exp(z), axis=1, keepdims=True))


def mlp_loss(params, x, y):
    h = x
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        if i < len(params) - 1:
            h = tnp.maximum(h, 0.0)
    return -tnp.mean(tnp.sum(y * _log_softmax(h), axis=1))


LR = 0.01


def mlp_step_tracer(params, x, y):
    loss, grads = tracer.value_and_grad(mlp_loss)(params, x, y)
    new = [(w - LR * gw, b - LR * gb) for (w, b), (gw, gb) in zip(params, grads)]
    return new, loss


def mlp_step_np(params, x, y):
    hs, zs = [x], []
    h = x
    for i, (w, b) in enumerate(params):
        z = h @ w + b
        zs.append(z)
        h = np.maximum(z, 0) if i < len(params) - 1 else z
        hs.append(h)
    z = zs[-1]
    zm = z - z.max(axis=1, keepdims=True)
    lse = np.log(np.exp(zm).sum(axis=1, keepdims=True))
    logp = zm - lse
    n = x.shape[0]
    loss = -np.sum(y * logp) / n
    g = (np.exp(logp) * y.sum(axis=1, keepdims=True) - y) / n
    new = [None] * len(params)
    for i in range(len(params) - 1, -1, -1):
        w, b = params[i]
        gw = hs[i].T @ g
        gb = g.sum(axis=0)
        if i > 0:
            g = (g @ w.T) * (zs[i - 1] > 0)
        new[i] = (w - LR * gw, b - LR * gb)
    return new, np.float32(loss)


def mlp_train_step(quick):
    params, x, y = mlp_data(32 if quick else 128)
    return Workload(mlp_step_np, tracer.jit(mlp_step_tracer), (params, x, y), _close(1e-4),
                    "784-512-512-10, batch 128, f32, value_and_grad + SGD")


# ------------------------------------- per-example grads ------------------------------------

def pe_loss(params, x, y):
    w1, b1, w2, b2 = params
    h = tnp.tanh(x @ w1 + b1)
    pred = h @ w2 + b2
    return tnp.sum((pred - y) ** 2)


def pe_grads_np(params, x, y):
    w1, b1, w2, b2 = params
    h = np.tanh(x @ w1 + b1)                     # (B, 64)
    pred = h @ w2 + b2                            # (B, 1)
    g = 2 * (pred - y[:, None])                   # (B, 1)
    gw2 = h[:, :, None] * g[:, None, :]           # (B, 64, 1)
    gb2 = g
    gh = (g @ w2.T) * (1 - h * h)                 # (B, 64)
    gw1 = x[:, :, None] * gh[:, None, :]          # (B, 512, 64)
    return gw1, gh, gw2, gb2


def per_example_grads(quick):
    b = 32 if quick else 256
    rng = np.random.default_rng(5)
    params = ((rng.normal(size=(512, 64)) / 22.6).astype(np.float32), np.zeros(64, np.float32),
              (rng.normal(size=(64, 1)) / 8).astype(np.float32), np.zeros(1, np.float32))
    x = rng.normal(size=(b, 512)).astype(np.float32)
    y = rng.normal(size=(b,)).astype(np.float32)
    f = tracer.jit(tracer.vmap(tracer.grad(pe_loss), in_axes=(None, 0, 0)))
    return Workload(pe_grads_np, f, (params, x, y), _close(1e-4),
                    f"jit(vmap(grad)) 512-64-1, {b} examples")


# --------------------------------------- eager dispatch -------------------------------------

def eager_dispatch(quick):
    a = np.ones(16, np.float32)
    b = np.ones(16, np.float32)
    ta, tb = tnp.asarray(a), tnp.asarray(b)
    n = 1000

    def np_ops(a, b):
        for _ in range(n):
            c = np.add(a, b)
        return c

    def tracer_ops(a, b):
        for _ in range(n):
            c = tnp.add(a, b)
        return c

    w = Workload(np_ops, tracer_ops, (ta, tb), None,
                 "1000 x add of 16 floats, eager (per-op overhead = (jit - numpy)/1000)")
    w.args_np = (a, b)
    return w


WORKLOADS = {
    "elementwise": elementwise,
    "softmax_rows": softmax_rows,
    "logsumexp_grad": logsumexp_grad,
    "matmul_f32": matmul(np.float32),
    "matmul_f64": matmul(np.float64),
    "mlp_train_step": mlp_train_step,
    "per_example_grads": per_example_grads,
    "eager_dispatch": eager_dispatch,
}

from control_flow_workloads import CONTROL_FLOW_WORKLOADS  # noqa: E402  (scan_rnn, while_ode)

WORKLOADS.update(CONTROL_FLOW_WORKLOADS)

from conv_workloads import CONV_WORKLOADS  # noqa: E402  (conv2d, maxpool)

WORKLOADS.update(CONV_WORKLOADS)
