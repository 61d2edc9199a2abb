"""Convolution and pooling workloads (issue 9): forward and backward passes of a CNN's two
building blocks.

- ``conv2d``: value and gradient (w.r.t. input and kernel) of sum(relu(conv(x, w))) with
  an NHWC 32x28x28x8 input, an HWIO 3x3x8x16 kernel, SAME padding, float32. NumPy: im2col
  (a sliding-window view) and matmul, with the hand-written backward pass.
- ``maxpool``: value and gradient of sum(maxpool(x) ** 2), 2x2 windows, stride 2, NHWC
  32x28x28x16, float32. NumPy: reshapes, max, and the gradient routed to each window's
  first maximum (the row-major tie rule of the select).

JAX versions of both are in ``jax_conv.py``.
"""
from __future__ import annotations

import numpy as np

import lax
import tracer
import tracer.numpy as tnp

DN = ("NHWC", "HWIO", "NHWC")


# --------------------------------------------- conv2d ---------------------------------------

def conv_data(quick, seed=11):
    n = 4 if quick else 32
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 28, 28, 8)).astype(np.float32)
    w = (rng.standard_normal((3, 3, 8, 16)) / 8).astype(np.float32)
    return x, w


def conv_loss(x, w):
    y = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=DN)
    return tnp.sum(tracer.nn.relu(y))


def conv_value_and_grad_np(x, w):
    N, H, W, C = x.shape
    O = w.shape[-1]
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(1, 2))  # N,H,W,C,3,3
    P = win.transpose(0, 1, 2, 4, 5, 3).reshape(N * H * W, 9 * C)
    wm = w.reshape(9 * C, O)
    y = P @ wm
    loss = np.maximum(y, 0).sum()
    g = (y > 0).astype(np.float32)
    gw = (P.T @ g).reshape(w.shape)
    gp = (g @ wm.T).reshape(N, H, W, 3, 3, C)
    gxp = np.zeros_like(xp)
    for i in range(3):
        for j in range(3):
            gxp[:, i:i + H, j:j + W, :] += gp[:, :, :, i, j, :]
    return loss, (gxp[:, 1:-1, 1:-1, :], gw)


def conv2d(quick):
    from workloads import Workload, _close
    x, w = conv_data(quick)
    f = tracer.jit(tracer.value_and_grad(conv_loss, argnums=(0, 1)))
    return Workload(conv_value_and_grad_np, f, (x, w), _close(2e-3),
                    f"conv NHWC {x.shape} * HWIO {w.shape}, SAME, relu, sum, f32, value "
                    "and grad (x, w)")


# --------------------------------------------- maxpool --------------------------------------

def pool_data(quick, seed=12):
    n = 4 if quick else 32
    return np.random.default_rng(seed).standard_normal((n, 28, 28, 16)).astype(np.float32)


def pool_loss(x):
    return tnp.sum(lax.reduce_window_max(x, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") ** 2)


def pool_value_and_grad_np(x):
    N, H, W, C = x.shape
    v = x.reshape(N, H // 2, 2, W // 2, 2, C).transpose(0, 1, 3, 5, 2, 4)
    v = v.reshape(N, H // 2, W // 2, C, 4)
    m = v.max(axis=-1)
    first = v.argmax(axis=-1)[..., None]        # argmax takes the first maximum
    g = np.zeros_like(v)
    np.put_along_axis(g, first, (2 * m)[..., None], axis=-1)
    gx = g.reshape(N, H // 2, W // 2, C, 2, 2).transpose(0, 1, 4, 2, 5, 3).reshape(x.shape)
    return (m * m).sum(), gx


def maxpool(quick):
    from workloads import Workload, _close
    x = pool_data(quick)
    f = tracer.jit(tracer.value_and_grad(pool_loss))
    return Workload(pool_value_and_grad_np, f, (x,), _close(1e-4),
                    f"2x2/2 max pool of NHWC {x.shape}, sum of squares, f32, value and grad")


CONV_WORKLOADS = {
    "conv2d": conv2d,
    "maxpool": maxpool,
}
