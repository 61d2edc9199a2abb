# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # 08 — Data-parallel training over MPI processes
#
# Tutorial 05's digits MLP, trained data-parallel: every process holds the same
# parameters, takes its own slice of each batch, computes the gradients of its slice,
# and the gradients are averaged over all processes with `lax.pmean` inside a
# `tracer.pmap`. The averaged gradient of equal slices is the gradient of the whole
# batch, so every process applies the same Adam update and the training follows the
# single-process one (up to the order of the float sums).
#
# Run it on 4 processes of one machine:
#
#     mpiexec -n 4 python tutorials/08_data_parallel.py
#
# on a cluster, with a hostfile listing the machines (mpich's hydra launcher):
#
#     mpiexec -f hosts.txt -n 16 python tutorials/08_data_parallel.py
#
# or as a plain `python tutorials/08_data_parallel.py` (one process).
# `TRACER_TUTORIAL_FAST=1` trains for two epochs only, as CI does. The `mpi` extra
# (`pip install -e ".[mpi]"` in the repository, as README says) provides mpi4py and `mpiexec`.

# %%
import os
import time

import numpy as np
from sklearn.datasets import load_digits

import tracer
import tracer.numpy as tnp
from tracer import lax, random

tracer.distributed.initialize()
NPROC, RANK = tracer.process_count(), tracer.process_index()
LOCAL = tracer.local_device_count()         # devices of this process (1 by default)
NDEV = tracer.device_count()                # every process's devices

FAST = os.environ.get("TRACER_TUTORIAL_FAST") == "1"
EPOCHS = 2 if FAST else 40
BATCH = 64                                  # the global batch, split over the devices
assert BATCH % NDEV == 0, f"the batch of {BATCH} must split evenly over {NDEV} devices"
PER_DEVICE = BATCH // NDEV
SIZES = (64, 256, 128, 10)
LR = 2e-3


def say(*args):
    if RANK == 0:                           # one process prints
        print(*args, flush=True)


# %% [markdown]
# ## Data: every process loads the same data set and shuffles it the same way
#
# (The seeds are the same on every process, so each process knows every batch; it
# takes its own rows of it.)

# %%
digits = load_digits()
X = (digits.data / 16.0).astype(np.float32)
y = digits.target.astype(np.int32)
order = np.random.default_rng(0).permutation(len(X))
X, y = X[order], y[order]
X_train, y_train, X_test, y_test = X[:-300], y[:-300], X[-300:], y[-300:]
say(f"{NPROC} process(es), {NDEV} device(s); train {X_train.shape}, test {X_test.shape}; "
    f"each device takes {PER_DEVICE} rows of every batch of {BATCH}")

# %% [markdown]
# ## The model and the loss: tutorial 05's

# %%
def init_params(key, sizes):
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        key, sub = random.split(key)
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        w = random.uniform(sub, (fan_in, fan_out), tnp.float32, -limit, limit)
        params.append((w, tnp.zeros(fan_out, tnp.float32)))
    return params


def predict(params, x):
    for w, b in params[:-1]:
        x = tnp.maximum(x @ w + b, 0.0)
    w, b = params[-1]
    return x @ w + b


def log_softmax(z):
    z = z - tnp.max(z, axis=-1, keepdims=True)
    return z - tnp.log(tnp.sum(tnp.exp(z), axis=-1, keepdims=True))


def loss(params, x, labels):
    onehot = labels[:, None] == tnp.arange(10)
    return -tnp.mean(tnp.sum(tnp.where(onehot, log_softmax(predict(params, x)), 0.0), axis=-1))


# %% [markdown]
# ## The data-parallel step
#
# `pmap` maps `device_step` over the devices: the parameters and the optimizer state are
# not mapped (`in_axes=None`, the same everywhere), the batch slices are (axis 0 of
# `x` and `labels`: this process's devices). `lax.pmean(grads, "batch")` averages every
# gradient leaf over all devices of all processes (one MPI Allreduce per leaf); what
# follows is the same on every device, so the results are returned once
# (`out_axes=None`). `jit` compiles the whole step, the Allreduces included as steps of
# the program.

# %%
tree_map = tracer.tree_util.tree_map


def adam_init(params):
    zeros = tree_map(tnp.zeros_like, params)
    return {"step": tnp.zeros((), tnp.float32), "m": zeros, "v": zeros}


def device_step(params, opt, x, labels):
    value, grads = tracer.value_and_grad(loss)(params, x, labels)
    grads = lax.pmean(grads, "batch")        # the gradient of the whole batch
    value = lax.pmean(value, "batch")
    b1, b2, eps = 0.9, 0.999, 1e-8
    step = opt["step"] + 1.0
    m = tree_map(lambda m, g: b1 * m + (1 - b1) * g, opt["m"], grads)
    v = tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, opt["v"], grads)
    scale = LR * tnp.sqrt(1 - b2 ** step) / (1 - b1 ** step)
    params = tree_map(lambda p, m, v: p - scale * m / (tnp.sqrt(v) + eps), params, m, v)
    return params, {"step": step, "m": m, "v": v}, value


train_step = tracer.jit(tracer.pmap(device_step, axis_name="batch",
                                    in_axes=(None, None, 0, 0), out_axes=None))


@tracer.jit
def accuracy(params, x, labels):
    return tnp.mean(tnp.argmax(predict(params, x), axis=-1) == labels)


# %% [markdown]
# ## Training: this process's rows of each batch, as [local devices, rows per device, ...]

# %%
def local_batches(rng):
    perm = rng.permutation(len(X_train))        # the same permutation on every process
    mine = slice(RANK * LOCAL * PER_DEVICE, (RANK + 1) * LOCAL * PER_DEVICE)
    for i in range(0, len(perm) - BATCH + 1, BATCH):
        idx = perm[i:i + BATCH][mine]
        yield (X_train[idx].reshape(LOCAL, PER_DEVICE, -1),
               y_train[idx].reshape(LOCAL, PER_DEVICE))


from lax import mpi as _mpi_steps               # noqa: E402  (its call statistics)

params = init_params(random.PRNGKey(0), SIZES)
opt = adam_init(params)
tracer.config.update("jit_compile", "sync")     # compile before the first step (as 05)
t0 = time.perf_counter()
xb, yb = next(local_batches(np.random.default_rng(99)))
tracer.block_until_ready(train_step(params, opt, xb, yb))
say(f"first call (tracing and compiling the step): {time.perf_counter() - t0:.2f} s")

rng = np.random.default_rng(1)
losses, step_times, comm_times = [], [], []
for epoch in range(EPOCHS):
    for xb, yb in local_batches(rng):
        comm0 = _mpi_steps.stats["seconds"]
        t = time.perf_counter()
        params, opt, value = train_step(params, opt, xb, yb)
        tracer.block_until_ready(params)
        step_times.append(time.perf_counter() - t)
        comm_times.append(_mpi_steps.stats["seconds"] - comm0)
        losses.append(float(value))

test_acc = float(accuracy(params, X_test, y_test))
step = float(np.median(step_times))
comm = float(np.median(comm_times))
say(f"final loss {np.mean(losses[-20:]):.4f}; held-out accuracy {test_acc:.4f}")
say(f"time per step {step * 1e3:.2f} ms (median), of which in MPI calls {comm * 1e3:.2f} ms "
    f"({100 * comm / step:.0f}% communication, waiting for the other processes included)")

# %% [markdown]
# Every process ends with the same parameters (they applied the same updates); check it:

# %%
flat = np.concatenate([np.asarray(leaf).ravel() for leaf in tracer.tree_util.tree_leaves(params)])
gathered = tracer.pmap(lambda p: lax.all_gather(p, "batch"), axis_name="batch")(
    np.broadcast_to(flat, (LOCAL,) + flat.shape))
assert np.array_equal(np.asarray(gathered)[0], np.broadcast_to(flat, (NDEV,) + flat.shape)), \
    "the processes' parameters diverged"
say("every process holds the same parameters")

# %%
if not FAST:
    assert test_acc >= 0.97, f"held-out accuracy {test_acc:.4f} is below 0.97"
