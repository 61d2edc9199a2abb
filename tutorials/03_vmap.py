# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # 03 — Automatic batching with vmap
#
# `vmap` turns a function of one example into a function of a batch. Every primitive has
# a batching rule, so the result is one batched program — no Python loop.

# %%
import numpy as np

import tracer
import tracer.numpy as tnp

rng = np.random.default_rng(0)
W = rng.standard_normal((4, 3))
xs = rng.standard_normal((8, 4))

predict = lambda W, x: tnp.tanh(x @ W)
batched = tracer.vmap(predict, in_axes=(None, 0))
print(batched(W, xs).shape)
print(tracer.make_jaxpr(batched)(W, xs))   # one dot_general, no loop

# %% [markdown]
# ## Per-example gradients
#
# `vmap(grad(f))` gives one gradient per example — the building block of differential
# privacy and of many diagnostics.

# %%
def loss(W, x, y):
    return tnp.sum((predict(W, x) - y) ** 2)


ys = rng.standard_normal((8, 3))
per_example = tracer.vmap(tracer.grad(loss), in_axes=(None, 0, 0))(W, xs, ys)
print(per_example.shape)
loop = np.stack([np.asarray(tracer.grad(loss)(W, xs[i], ys[i])) for i in range(8)])
np.testing.assert_allclose(np.asarray(per_example), loop, rtol=1e-10)
print("matches a Python loop of grads")

# %% [markdown]
# ## in_axes and out_axes
#
# `in_axes` picks the mapped axis of each argument (None: shared), `out_axes` where the
# batch axis goes in the output. Pytrees work as prefixes.

# %%
f = lambda a, b: a * b["scale"] + b["shift"]
out = tracer.vmap(f, in_axes=(1, {"scale": None, "shift": 0}), out_axes=-1)(
    tnp.ones((3, 5)), {"scale": 2.0, "shift": tnp.arange(5.0)})
print(out.shape)

# %% [markdown]
# Mismatched batch sizes are reported with the argument path:

# %%
try:
    tracer.vmap(lambda a, b: a + b)(tnp.ones(3), tnp.ones(4))
except ValueError as e:
    print(e)
