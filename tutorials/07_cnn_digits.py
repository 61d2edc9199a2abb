# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # 07 — A small convolutional network on the digits
#
# The digits of tutorial 05, now as 8×8 images: two convolution + max-pooling blocks and
# a dense classifier, written with `lax.conv_general_dilated` and
# `lax.reduce_window_max` (whose gradient is the spec's SelectAndScatter). The training
# step — forward, backward through the convolutions and poolings, and Adam — is one jitted
# program; both convolution and pooling run as compiled kernels.
#
# Run it with `python tutorials/07_cnn_digits.py` (`TRACER_TUTORIAL_FAST=1`: one epoch).

# %%
import os
import time

import numpy as np
from sklearn.datasets import load_digits

import lax
import tracer
import tracer.numpy as tnp
from tracer import random

FAST = os.environ.get("TRACER_TUTORIAL_FAST") == "1"
EPOCHS = 1 if FAST else 15
BATCH = 64
LR = 3e-3

digits = load_digits()
X = (digits.images / 16.0).astype(np.float32)[..., None]       # NHWC: (1797, 8, 8, 1)
y = digits.target.astype(np.int32)
order = np.random.default_rng(0).permutation(len(X))
X, y = X[order], y[order]
X_train, y_train, X_test, y_test = X[:-300], y[:-300], X[-300:], y[-300:]

# %% [markdown]
# ## The model

# %%
DN = ("NHWC", "HWIO", "NHWC")


def conv_block(x, w, b):
    x = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=DN) + b
    x = tnp.maximum(x, 0.0)
    return lax.reduce_window_max(x, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")   # 2x2 max-pool


def predict(params, x):
    x = conv_block(x, *params["conv1"])           # (n, 4, 4, 16)
    x = conv_block(x, *params["conv2"])           # (n, 2, 2, 32)
    x = x.reshape(x.shape[0], -1)
    w, b = params["dense"]
    return x @ w + b


def init(key):
    k1, k2, k3 = random.split(key, 3)

    def glorot(k, shape, fan_in, fan_out):
        lim = np.sqrt(6.0 / (fan_in + fan_out))
        return random.uniform(k, shape, tnp.float32, -lim, lim)

    return {"conv1": (glorot(k1, (3, 3, 1, 16), 9, 144), tnp.zeros(16, tnp.float32)),
            "conv2": (glorot(k2, (3, 3, 16, 32), 144, 288), tnp.zeros(32, tnp.float32)),
            "dense": (glorot(k3, (128, 10), 128, 10), tnp.zeros(10, tnp.float32))}


def loss(params, x, labels):
    logp = tracer.nn.log_softmax(predict(params, x))
    return -tnp.mean(tnp.sum(tracer.nn.one_hot(labels, 10) * logp, axis=-1))


tree_map = tracer.tree_util.tree_map


@tracer.jit
def train_step(params, opt, x, labels):
    value, grads = tracer.value_and_grad(loss)(params, x, labels)
    step = opt["step"] + 1.0
    m = tree_map(lambda m, g: 0.9 * m + 0.1 * g, opt["m"], grads)
    v = tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, opt["v"], grads)
    scale = LR * tnp.sqrt(1 - 0.999 ** step) / (1 - 0.9 ** step)
    params = tree_map(lambda p, m, v: p - scale * m / (tnp.sqrt(v) + 1e-8), params, m, v)
    return params, {"step": step, "m": m, "v": v}, value


accuracy = tracer.jit(lambda params, x, labels:
                      tnp.mean(tnp.argmax(predict(params, x), axis=-1) == labels))

# %% [markdown]
# ## Training

# %%
params = init(random.PRNGKey(0))
zeros = tree_map(tnp.zeros_like, params)
opt = {"step": tnp.zeros((), tnp.float32), "m": zeros, "v": zeros}
rng = np.random.default_rng(1)
t0 = time.perf_counter()
for epoch in range(EPOCHS):
    perm = rng.permutation(len(X_train))
    for i in range(0, len(perm) - BATCH + 1, BATCH):
        idx = perm[i:i + BATCH]
        params, opt, value = train_step(params, opt, X_train[idx], y_train[idx])
    print(f"epoch {epoch + 1}: loss {float(value):.4f}")
test_acc = float(accuracy(params, X_test, y_test))
print(f"held-out accuracy {test_acc:.4f} after {EPOCHS} epochs "
      f"({time.perf_counter() - t0:.1f} s, compiling included)")
print(train_step.lower(params, opt, X_train[:BATCH], y_train[:BATCH]).as_text()
      .count("library_call"), "library calls in the compiled step")

# %%
if not FAST:
    assert test_acc >= 0.95, f"held-out accuracy {test_acc:.4f} is below 0.95"
