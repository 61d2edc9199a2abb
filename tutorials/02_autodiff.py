# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # 02 — Automatic differentiation
#
# `grad`, `value_and_grad`, `jvp`, `vjp`, `linearize`, `jacfwd`, `jacrev`, `hessian`,
# and custom rules with `custom_jvp` / `custom_vjp`. Reverse mode is JAX's: forward mode
# (jvp), partial evaluation into known and unknown parts, then transposition.

# %%
import numpy as np

import tracer
import tracer.numpy as tnp


def loss(w, x):
    return tnp.sum(tnp.tanh(x @ w) ** 2)


w = tnp.array([0.5, -1.0, 2.0])
x = tnp.array([[1.0, 2.0, 3.0], [0.0, 1.0, -1.0]])
print("value and grad:", tracer.value_and_grad(loss)(w, x))
print("grad wrt both:", tracer.grad(loss, argnums=(0, 1))(w, x))

# %% [markdown]
# The gradient is itself a traced program, free of needless zeros:

# %%
print(tracer.make_jaxpr(tracer.grad(loss))(w, x))

# %% [markdown]
# ## Forward and reverse mode, Jacobians and Hessians

# %%
f = lambda v: tnp.sin(v) * v
primal, tangent = tracer.jvp(f, (w,), (tnp.ones(3),))
print("jvp:", primal, tangent)
out, f_vjp = tracer.vjp(f, w)
print("vjp:", f_vjp(tnp.ones(3)))
print("jacfwd:\n", tracer.jacfwd(f)(w))
print("hessian of sum(sin(v)^3):\n", tracer.hessian(lambda v: tnp.sum(tnp.sin(v) ** 3))(w))

# %% [markdown]
# Derivatives at kinks follow JAX: d|x|/dx at 0 is 1, ties in max split the gradient.

# %%
print(tracer.grad(tnp.abs)(0.0), tracer.grad(lambda a: tnp.maximum(a, 1.0))(1.0))

# %% [markdown]
# ## Custom derivatives
#
# `custom_jvp` attaches a rule, e.g. a numerically stable derivative of log(1 + e^x):

# %%
@tracer.custom_jvp
def softplus(x):
    return tnp.log1p(tnp.exp(x))


@softplus.defjvp
def softplus_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return softplus(x), t / (1 + tnp.exp(-x))


print(softplus(100.0), tracer.grad(softplus)(100.0))

# %% [markdown]
# Numerical check against finite differences (what the test suite does for every
# primitive):

# %%
from tracer.test_util import check_grads

check_grads(loss, (np.asarray(w), np.asarray(x)), order=2)
print("check_grads passed")
