# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # 04 — Control flow: cond, scan, fori_loop
#
# Under `jit`, Python `if` and `for` run at trace time. Data-dependent control flow uses
# lax primitives that hold sub-programs: `lax.cond`/`lax.switch` for branches,
# `lax.scan` for loops with stacked outputs (an RNN), `lax.fori_loop` and
# `lax.while_loop` for iteration. All are differentiable and batchable.

# %%
import os
import time

import numpy as np

import lax
import tracer
import tracer.numpy as tnp

FAST = os.environ.get("TRACER_TUTORIAL_FAST") == "1"

# %% [markdown]
# ## cond

# %%
@tracer.jit
def safe_log(x):
    return lax.cond(x > 0, lambda v: tnp.log(v), lambda v: tnp.zeros_like(v), x)


print(safe_log(2.0), safe_log(-1.0))

# %% [markdown]
# ## scan: a recurrent network, and its gradient

# %%
rng = np.random.default_rng(0)
H, D, T = 16, 4, 50
params = {"W": rng.standard_normal((H, H)) * 0.1, "U": rng.standard_normal((H, D)) * 0.1}
xs = rng.standard_normal((T, D))


def rnn_loss(params, xs):
    def step(h, x):
        h = tnp.tanh(params["W"] @ h + params["U"] @ x)
        return h, tnp.sum(h)

    h_final, outs = lax.scan(step, tnp.zeros(H), xs)
    return tnp.sum(outs) + tnp.sum(h_final ** 2)


value, grads = tracer.jit(tracer.value_and_grad(rnn_loss))(params, xs)
print(value, grads["W"].shape)

# The same gradient from a hand-unrolled Python loop:
def unrolled(params, xs):
    h, total = tnp.zeros(H), 0.0
    for t in range(T):
        h = tnp.tanh(params["W"] @ h + params["U"] @ xs[t])
        total = total + tnp.sum(h)
    return total + tnp.sum(h ** 2)


np.testing.assert_allclose(np.asarray(tracer.grad(unrolled)(params, xs)["W"]),
                           np.asarray(grads["W"]), rtol=1e-8)
print("scan gradient matches the unrolled loop")

# %% [markdown]
# ## fori_loop: integrating the Lorenz system with RK4

# %%
def lorenz(u, sigma=10.0, rho=28.0, beta=8.0 / 3.0):
    x, y, z = u[0], u[1], u[2]
    return tnp.stack([sigma * (y - x), x * (rho - z) - y, x * y - beta * z])


def rk4(u, dt):
    k1 = lorenz(u)
    k2 = lorenz(u + dt / 2 * k1)
    k3 = lorenz(u + dt / 2 * k2)
    k4 = lorenz(u + dt * k3)
    return u + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)


steps = 1000 if FAST else 10_000


@tracer.jit
def integrate(u0):
    return lax.fori_loop(0, steps, lambda i, u: rk4(u, 0.001), u0)


u0 = tnp.array([1.0, 1.0, 1.0])
t = time.perf_counter()
print(integrate(u0), f"({steps} steps, first call {time.perf_counter() - t:.2f} s)")
