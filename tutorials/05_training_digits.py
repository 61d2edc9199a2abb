# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # 05 — Training a multilayer perceptron on handwritten digits
#
# The main demo: a two-hidden-layer MLP trained on scikit-learn's digits data set
# (1797 8×8 images, 10 classes) with minibatch Adam. The model, the loss and the
# optimizer are plain NumPy-style code on a pytree of parameters; `tracer.value_and_grad`
# differentiates the loss and `tracer.jit` compiles the whole training step (forward,
# backward and the Adam update) into one program. The same training written in plain
# NumPy, with a hand-written backward pass, runs afterwards for comparison.
#
# Run it with `python tutorials/05_training_digits.py`
# (`TRACER_TUTORIAL_FAST=1` trains for two epochs only, as CI does).

# %%
import os
import time

import numpy as np
from sklearn.datasets import load_digits
from tqdm import tqdm

import tracer
import tracer.numpy as tnp
from tracer import random

FAST = os.environ.get("TRACER_TUTORIAL_FAST") == "1"
EPOCHS = 2 if FAST else 40
BATCH = 64
SIZES = (64, 256, 128, 10)
LR = 2e-3

# %% [markdown]
# ## Data: 1497 training images, 300 held out

# %%
digits = load_digits()
X = (digits.data / 16.0).astype(np.float32)
y = digits.target.astype(np.int32)
order = np.random.default_rng(0).permutation(len(X))
X, y = X[order], y[order]
X_train, y_train, X_test, y_test = X[:-300], y[:-300], X[-300:], y[-300:]
print(f"train {X_train.shape}, test {X_test.shape}")

# %% [markdown]
# ## The model: parameters are a list of (W, b) pairs — a pytree

# %%
def init_params(key, sizes):
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        key, sub = random.split(key)
        limit = np.sqrt(6.0 / (fan_in + fan_out))      # Glorot-uniform initialisation
        w = random.uniform(sub, (fan_in, fan_out), tnp.float32, -limit, limit)
        params.append((w, tnp.zeros(fan_out, tnp.float32)))
    return params


def predict(params, x):
    for w, b in params[:-1]:
        x = tnp.maximum(x @ w + b, 0.0)          # relu
    w, b = params[-1]
    return x @ w + b                              # logits


def log_softmax(z):
    z = z - tnp.max(z, axis=-1, keepdims=True)
    return z - tnp.log(tnp.sum(tnp.exp(z), axis=-1, keepdims=True))


def loss(params, x, labels):
    onehot = labels[:, None] == tnp.arange(10)
    return -tnp.mean(tnp.sum(tnp.where(onehot, log_softmax(predict(params, x)), 0.0), axis=-1))


# %% [markdown]
# ## Adam, written with tree_map over the parameter pytree

# %%
tree_map = tracer.tree_util.tree_map


def adam_init(params):
    zeros = tree_map(tnp.zeros_like, params)
    return {"step": tnp.zeros((), tnp.float32), "m": zeros, "v": zeros}


@tracer.jit
def train_step(params, opt, x, labels):
    value, grads = tracer.value_and_grad(loss)(params, x, labels)
    b1, b2, eps = 0.9, 0.999, 1e-8
    step = opt["step"] + 1.0
    m = tree_map(lambda m, g: b1 * m + (1 - b1) * g, opt["m"], grads)
    v = tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, opt["v"], grads)
    scale = LR * tnp.sqrt(1 - b2 ** step) / (1 - b1 ** step)
    params = tree_map(lambda p, m, v: p - scale * m / (tnp.sqrt(v) + eps), params, m, v)
    return params, {"step": step, "m": m, "v": v}, value


@tracer.jit
def accuracy(params, x, labels):
    return tnp.mean(tnp.argmax(predict(params, x), axis=-1) == labels)


# %% [markdown]
# ## Training

# %%
def batches(rng, n):
    perm = rng.permutation(len(X_train))
    for i in range(0, len(perm) - BATCH + 1, BATCH):
        idx = perm[i:i + BATCH]
        yield X_train[idx], y_train[idx]


params = init_params(random.PRNGKey(0), SIZES)
opt = adam_init(params)
rng = np.random.default_rng(1)

# By default a first call answers through NumPy while Numba compiles in the background;
# here we wait for the compiled code so that the time below is the real compile time
# (kernels are cached on disk: a second run of this script reuses them).
tracer.config.update("jit_compile", "sync")
t0 = time.perf_counter()
xb, yb = next(batches(np.random.default_rng(99), len(X_train)))
params_c, opt_c, _ = train_step(params, opt, xb, yb)      # first call: trace + compile
accuracy(params_c, X_test, y_test)
tracer.block_until_ready(params_c)
compile_s = time.perf_counter() - t0
print(f"first call (tracing and compiling the training step): {compile_s:.2f} s")

losses, step_times = [], []
for epoch in range(EPOCHS):
    bar = tqdm(list(batches(rng, len(X_train))), desc=f"epoch {epoch + 1}/{EPOCHS}",
               leave=False, disable=FAST)
    for i, (xb, yb) in enumerate(bar):
        t = time.perf_counter()
        params, opt, value = train_step(params, opt, xb, yb)
        step_times.append(time.perf_counter() - t)
        losses.append(float(value))
        if i % 8 == 0:
            bar.set_postfix(loss=f"{losses[-1]:.3f}", refresh=False)

test_acc = float(accuracy(params, X_test, y_test))
train_acc = float(accuracy(params, X_train, y_train))
tracer_step = float(np.median(step_times))
print(f"final loss {np.mean(losses[-20:]):.4f}; train accuracy {train_acc:.4f}; "
      f"held-out accuracy {test_acc:.4f}")

# %% [markdown]
# ## The same training in plain NumPy, for comparison
#
# Forward, a hand-written backward pass and Adam, on the same batches.

# %%
def numpy_train_step(params, opt, x, labels):
    acts = [x]
    for w, b in params[:-1]:
        acts.append(np.maximum(acts[-1] @ w + b, 0.0))
    w, b = params[-1]
    z = acts[-1] @ w + b
    z = z - z.max(axis=-1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=-1, keepdims=True)
    n = len(x)
    value = -np.mean(np.log(p[np.arange(n), labels] + 1e-30))
    g = p
    g[np.arange(n), labels] -= 1.0
    g /= n
    grads = []
    for i in range(len(params) - 1, -1, -1):
        w, b = params[i]
        grads.append((acts[i].T @ g, g.sum(axis=0)))
        if i:
            g = (g @ w.T) * (acts[i] > 0)
    grads = grads[::-1]
    b1, b2, eps = 0.9, 0.999, 1e-8
    step = opt["step"] + 1
    new_params, ms, vs = [], [], []
    for (w, b), (gw, gb), (mw, mb), (vw, vb) in zip(params, grads, opt["m"], opt["v"]):
        mw, mb = b1 * mw + (1 - b1) * gw, b1 * mb + (1 - b1) * gb
        vw, vb = b2 * vw + (1 - b2) * gw * gw, b2 * vb + (1 - b2) * gb * gb
        scale = LR * np.sqrt(1 - b2 ** step) / (1 - b1 ** step)
        new_params.append((w - scale * mw / (np.sqrt(vw) + eps),
                           b - scale * mb / (np.sqrt(vb) + eps)))
        ms.append((mw, mb))
        vs.append((vw, vb))
    return new_params, {"step": step, "m": ms, "v": vs}, value


np_params = [(np.asarray(w), np.asarray(b)) for w, b in init_params(random.PRNGKey(0), SIZES)]
np_opt = {"step": 0, "m": [(np.zeros_like(w), np.zeros_like(b)) for w, b in np_params],
          "v": [(np.zeros_like(w), np.zeros_like(b)) for w, b in np_params]}
np_times = []
rng = np.random.default_rng(1)
for epoch in range(EPOCHS):
    for xb, yb in batches(rng, len(X_train)):
        t = time.perf_counter()
        np_params, np_opt, _ = numpy_train_step(np_params, np_opt, xb, yb)
        np_times.append(time.perf_counter() - t)
z = X_test
for w, b in np_params[:-1]:
    z = np.maximum(z @ w + b, 0.0)
np_acc = float(np.mean(np.argmax(z @ np_params[-1][0] + np_params[-1][1], -1) == y_test))
numpy_step = float(np.median(np_times))

print(f"time per training step: tracer.jit {tracer_step * 1e6:.0f} us, plain NumPy "
      f"{numpy_step * 1e6:.0f} us (ratio {numpy_step / tracer_step:.2f}x); NumPy held-out "
      f"accuracy {np_acc:.4f}")
print(f"compile time {compile_s:.2f} s")

# %% [markdown]
# ## Pictures: the loss curve, some test digits with predictions, the confusion matrix

# %%
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

pred = np.asarray(tnp.argmax(predict(params, X_test), axis=-1))
confusion = np.zeros((10, 10), int)
np.add.at(confusion, (y_test, pred), 1)
fig, axes = plt.subplots(1, 3, figsize=(13, 4))
axes[0].plot(losses)
axes[0].set(title="training loss", xlabel="step", yscale="log")
axes[1].imshow(np.concatenate([X_test[i].reshape(8, 8) for i in range(8)], axis=1),
               cmap="gray_r")
axes[1].set(title="predicted: " + " ".join(str(p) for p in pred[:8]), xticks=[], yticks=[])
axes[2].imshow(confusion, cmap="Blues")
axes[2].set(title="confusion matrix (held out)", xlabel="predicted", ylabel="true")
fig.tight_layout()
out_png = os.path.join(os.path.dirname(os.path.abspath(__file__)), "05_training_digits.png")
fig.savefig(out_png, dpi=80)
print(f"figure saved to {out_png}")

# %%
if not FAST:
    assert test_acc >= 0.97, f"held-out accuracy {test_acc:.4f} is below 0.97"
